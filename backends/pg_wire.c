/* pg_wire.c -- the PostgreSQL driver's connections: connecting and
 * reconnecting without blocking, the bounded wait for an answer and its
 * probe, binary parameters and arrays, pipelines, LISTEN/NOTIFY.  It
 * calls nothing of the driver above it: a lost connection, a failed
 * batch, a new session and a notification are reported through the
 * callbacks the driver set (s->wcb, struct pg_wire_cb). */
#include "config.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "clock.h"
#include "pg_conninfo.h"
#include "pg_wire.h"

/* Reconnection attempts: one per tick (about a second).  They are cheap
 * now that they never block the loop (pg_link_*), and the window after a
 * failover is the promotion plus at most this. */
#define PG_RETRY_MIN_MS 1000
/* ticks are about a second apart, not exactly */
#define PG_TICK_SLACK_MS 200

/* ------------------------------------------------------------------ */
/* errors */

int
pg_errf(struct pg_store *s, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	s->code = code;
	return code;
}

/* libpq messages end in a newline and may span lines: keep the first. */
void
pg_oneline(char *dst, size_t len, const char *msg)
{
	size_t n;

	if (msg == NULL || *msg == '\0')
		msg = "unknown error";
	n = strcspn(msg, "\n");
	if (n >= len)
		n = len - 1;
	memcpy(dst, msg, n);
	dst[n] = '\0';
}

static int
pg_map_state(const char *st)
{
	if (st == NULL)
		return SAKER_EIO;
	if (strcmp(st, "53100") == 0)
		return SAKER_EFULL;
	if (strcmp(st, "53200") == 0)
		return SAKER_ENOMEM;
	if (strcmp(st, "25006") == 0)
		return SAKER_EREADONLY;
	if (strncmp(st, "42", 2) == 0)
		return SAKER_ECORRUPT;	/* schema missing or damaged */
	if (strcmp(st, "54000") == 0 || strncmp(st, "22", 2) == 0)
		return SAKER_EINVAL;
	return SAKER_EIO;
}

/* ------------------------------------------------------------------ */
/* waiting for the database, never longer than timeout= */

static void pg_conn_lost(struct pg_store *, const char *);

/* The loop's descriptor watches link l's socket for `ev` (0: not at all).
 * Deleted and added again every time: libpq may have closed the old
 * socket (epoll forgets it then) and got the same number for a new one
 * (the next host of a list). */
static void
pg_ep(struct pg_store *s, struct pg_link *l, uint32_t ev)
{
	struct epoll_event e;
	int fd = l->c != NULL ? PQsocket(l->c) : -1;

	if (l->regfd >= 0)
		(void)epoll_ctl(s->efd, EPOLL_CTL_DEL, l->regfd, NULL);
	l->regfd = -1;
	if (s->efd < 0 || fd < 0 || ev == 0)
		return;
	memset(&e, 0, sizeof(e));
	e.events = ev;
	if (epoll_ctl(s->efd, EPOLL_CTL_ADD, fd, &e) == 0)
		l->regfd = fd;
}

/* Close link l without waiting: libpq's goodbye goes out on a
 * non-blocking socket, and after a timeout the socket is shut down
 * first, so nothing at all waits for a peer that stopped answering. */
void
pg_link_drop(struct pg_store *s, struct pg_link *l, bool abort)
{
	pg_ep(s, l, 0);
	if (l->c != NULL) {
		if (abort && PQsocket(l->c) >= 0)
			(void)shutdown(PQsocket(l->c), SHUT_RDWR);
		PQfinish(l->c);
	}
	if (l == &s->links[PG_L_MAIN]) {
		s->conn = NULL;
		if (s->fl.on)
			s->fl.dropped = true;
	}
	if (l == &s->links[PG_L_LISTEN])
		s->probing = false;	/* no answer will come */
	l->c = NULL;
	l->up = false;
}

/* Wait for c's socket to be ready for `ev`, at most until deadline_ns.
 * 1: ready; 0: the deadline passed; -1: poll failed. */
static int
pg_poll(PGconn *c, short ev, uint64_t deadline_ns)
{
	struct pollfd p;
	uint64_t now;
	int r;

	p.fd = PQsocket(c);
	p.events = ev;
	p.revents = 0;
	if (p.fd < 0)
		return -1;	/* poll() would just sleep */
	for (;;) {
		now = saker_mono_ns();
		if (now >= deadline_ns)
			return 0;
		r = poll(&p, 1, (int)((deadline_ns - now + 999999) / 1000000));
		if (r > 0)
			return 1;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

/* A round trip on the statement connection starts: its deadline. */
void
pg_deadline(struct pg_store *s)
{
	s->deadline_ns = saker_mono_ns() + s->wait_ns;
}

/*
 * The probe: a round trip on the statement connection that has heard
 * nothing for PG_PROBE_AFTER_MS sends an empty query on the LISTEN
 * connection.  Its answer within probe= says the server is there and the
 * statement is merely slow (a lock wait, a synchronous standby): it may
 * go on to timeout=.  No answer says the server or the way to it is
 * silent (a partition, a hung host): the connection is given up then,
 * so the loop waits probe= plus a little, not timeout=.
 */
#define PG_PROBE_AFTER_MS 50

static int pg_listen_read(struct pg_store *, int64_t);

/* Can a probe go out now? */
static bool
pg_probe_can(const struct pg_store *s)
{
	const struct pg_link *l = &s->links[PG_L_LISTEN];

	return s->probe_ms > 0 && l->up && s->listening && !s->probing &&
	    PQstatus(l->c) == CONNECTION_OK;
}

static void
pg_probe_send(struct pg_store *s, uint64_t now)
{
	struct pg_link *l = &s->links[PG_L_LISTEN];

	if (!PQsendQuery(l->c, "") || PQflush(l->c) < 0)
		return;		/* no probe: timeout= alone decides */
	s->probing = true;
	s->probe_dead_ns = now + (uint64_t)s->probe_ms * 1000000u;
}

/*
 * The batch in flight (commit_start()) has had no answer since sent_ns:
 * what pg_next() does while it waits, without waiting (tick(),
 * fd_ready()).  After PG_PROBE_AFTER_MS a probe goes out; no answer to
 * it within probe=, or no answer at all within timeout=, gives the
 * connection up.  True then: the flight's answer is lost, and the caller
 * collects it (in doubt) so that its clients hear of it.
 * pg_flight_overdue(): it had no answer for PG_PROBE_AFTER_MS.
 */
bool
pg_flight_overdue(const struct pg_store *s)
{
	return s->fl.on && saker_mono_ns() >= s->fl.t0 +
	    PG_PROBE_AFTER_MS * 1000000u;
}

bool
pg_flight_watch(struct pg_store *s, uint64_t sent_ns)
{
	uint64_t now = saker_mono_ns();
	char why[200];

	if (!s->fl.on || s->conn == NULL)
		return false;
	if (s->probing && now >= s->probe_dead_ns) {
		(void)pg_listen_read(s, 0);	/* (its answer may be there) */
		if (s->probing) {
			snprintf(why, sizeof(why), "no answer from the database"
			    " to a COMMIT in flight, nor to a probe within %"
			    PRId64 " ms (probe=)", s->probe_ms);
			pg_conn_lost(s, why);
			return true;
		}
	}
	if (now >= sent_ns + s->wait_ns) {
		snprintf(why, sizeof(why), "no answer from the database to a"
		    " COMMIT in flight within %" PRId64 ".%03d s (timeout=)",
		    s->timeout_ms / 1000, (int)(s->timeout_ms % 1000));
		pg_conn_lost(s, why);
		return true;
	}
	if (!s->probing && now >= sent_ns + PG_PROBE_AFTER_MS * 1000000u &&
	    pg_probe_can(s))
		pg_probe_send(s, now);
	return false;
}

/*
 * PQgetResult() on the statement connection without ever waiting past
 * s->deadline_ns, which every sign of life (the socket took our bytes or
 * had some for us) moves on by timeout=, nor past an unanswered probe
 * (above): the connection is non-blocking, and the output is flushed
 * and the input read here as the socket allows.  true with *res as
 * PQgetResult() gives it (NULL between statements); false when the
 * database did not answer in time: the connection is dropped
 * (pg_conn_lost()) and s->conn is NULL.
 */
bool
pg_next(struct pg_store *s, PGresult **res)
{
	PGconn *c = s->conn;
	struct pollfd p[2];
	uint64_t now, until, probe_at;
	char why[200];
	int f, r = 0, np, ms;
	bool probe_dead = false;

	*res = NULL;
	probe_at = saker_mono_ns() + PG_PROBE_AFTER_MS * 1000000u;
	for (;;) {
		if (PQstatus(c) == CONNECTION_BAD) {
			/* libpq knows; it answers at once */
			*res = PQgetResult(c);
			return true;
		}
		if ((f = PQflush(c)) < 0) {
			r = 1;		/* libpq says why */
			break;
		}
		if (f == 0 && !PQisBusy(c)) {
			*res = PQgetResult(c);
			return true;
		}
		now = saker_mono_ns();
		if (s->probing && now >= s->probe_dead_ns) {
			/* its answer may be there, unread since an earlier
			 * round trip ended */
			(void)pg_listen_read(s, 0);
			if (s->probing) {
				probe_dead = true;
				break;
			}
		}
		if (now >= s->deadline_ns) {
			r = 0;
			break;
		}
		if (now >= probe_at && pg_probe_can(s))
			pg_probe_send(s, now);
		until = s->deadline_ns;
		if (s->probing && s->probe_dead_ns < until)
			until = s->probe_dead_ns;
		else if (!s->probing && pg_probe_can(s) && probe_at < until)
			until = probe_at;
		p[0].fd = PQsocket(c);
		p[0].events = (short)(POLLIN | (f > 0 ? POLLOUT : 0));
		p[0].revents = 0;
		np = 1;
		if (s->probing && s->links[PG_L_LISTEN].c != NULL) {
			p[1].fd = PQsocket(s->links[PG_L_LISTEN].c);
			p[1].events = POLLIN;
			p[1].revents = 0;
			np = 2;
		}
		ms = (int)((until - now + 999999) / 1000000);
		r = poll(p, (nfds_t)np, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			r = -1;
			break;
		}
		/* the answer to a probe, and notifications meanwhile */
		if (np == 2 && p[1].revents != 0)
			(void)pg_listen_read(s, 0);
		if (p[0].revents == 0)
			continue;
		if (!PQconsumeInput(c) && PQstatus(c) != CONNECTION_BAD) {
			r = 1;
			break;
		}
		/* the database took or sent bytes: it is there.  The
		 * deadline bounds silence, not the size of a batch (a large
		 * item on a slow link takes as long as it takes) */
		pg_deadline(s);
		probe_at = saker_mono_ns() + PG_PROBE_AFTER_MS * 1000000u;
	}
	if (probe_dead)
		snprintf(why, sizeof(why), "no answer from the database, nor to"
		    " a probe within %" PRId64 " ms (probe=)", s->probe_ms);
	else if (r == 0)
		snprintf(why, sizeof(why), "no answer from the database within"
		    " %" PRId64 ".%03d s (timeout=)", s->timeout_ms / 1000,
		    (int)(s->timeout_ms % 1000));
	else
		pg_oneline(why, sizeof(why), r < 0 ? strerror(errno) :
		    PQerrorMessage(c));
	pg_conn_lost(s, why);
	return false;
}

/* PQexec() bounded by the deadline: the first failed result, else the
 * last; NULL when nothing came (s->conn may be NULL then). */
PGresult *
pg_exec(struct pg_store *s, const char *sql)
{
	PGresult *r, *keep = NULL;

	if (s->fl.on && s->wcb->flight_wait != NULL)
		s->wcb->flight_wait(s);
	if (s->conn == NULL || !PQsendQuery(s->conn, sql))
		return NULL;
	pg_deadline(s);
	for (;;) {
		if (!pg_next(s, &r)) {
			PQclear(keep);
			return NULL;
		}
		if (r == NULL)
			break;
		if (keep != NULL && (PQresultStatus(keep) == PGRES_FATAL_ERROR ||
		    PQresultStatus(keep) == PGRES_NONFATAL_ERROR)) {
			PQclear(r);
			continue;
		}
		PQclear(keep);
		keep = r;
		if (PQstatus(s->conn) == CONNECTION_BAD)
			break;
	}
	return keep;
}

/* Run plain SQL (no parameters, no rows wanted). */
int
pg_simple(struct pg_store *s, const char *sql, const char *what)
{
	PGresult *res;
	ExecStatusType st;

	if (s->conn == NULL)
		return pg_down(s);
	res = pg_exec(s, sql);
	st = res != NULL ? PQresultStatus(res) : PGRES_FATAL_ERROR;
	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
		PQclear(res);
		return SAKER_OK;
	}
	pg_fail(s, res, what);
	PQclear(res);
	return s->code;
}

/* ------------------------------------------------------------------ */
/* parameters and results: everything binary */

void
pg_pp_i64(struct pgp *p, int64_t x)
{
	saker_put_be64(p->b[p->n], (uint64_t)x);
	pg_pp_bin(p, p->b[p->n], 8);
}

void
pg_pp_bin(struct pgp *p, const void *d, size_t len)
{
	p->v[p->n] = len > 0 ? d : "";
	p->l[p->n] = (int)len;
	p->f[p->n] = 1;
	p->n++;
}

void
pg_pp_null(struct pgp *p)
{
	p->v[p->n] = NULL;
	p->l[p->n] = 0;
	p->f[p->n] = 1;
	p->n++;
}

void
pg_pp_str(struct pgp *p, const char *str)
{
	pg_pp_bin(p, str, strlen(str));
}

int64_t
pg_rv_i64(const PGresult *r, int row, int col)
{
	if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 8)
		return 0;
	return (int64_t)saker_get_be64((const unsigned char *)PQgetvalue(r, row,
	    col));
}

uint64_t
pg_rv_changed(const PGresult *r)
{
	const char *t = PQcmdTuples((PGresult *)r);

	return t != NULL && *t != '\0' ? strtoull(t, NULL, 10) : 0;
}

/* ------------------------------------------------------------------ */
/* binary arrays: one parameter carries a column of the whole batch */

/* ndim, has-null flag, element type, length and lower bound of dim 1 */
#define ARR_HDR 20

/* Room for `more` bytes of elements; false when out of memory. */
bool
pg_arr_reserve(struct pg_arr *a, size_t more)
{
	size_t need = (a->len > 0 ? a->len : ARR_HDR) + more, cap;
	unsigned char *p;

	if (need <= a->cap)
		return true;
	cap = a->cap > 0 ? a->cap : 256;
	while (cap < need)
		cap *= 2;
	if ((p = realloc(a->p, cap)) == NULL)
		return false;
	a->p = p;
	a->cap = cap;
	return true;
}

/* Append; pg_arr_reserve() must have made room. */
void
pg_arr_put(struct pg_arr *a, const void *d, size_t len)
{
	if (a->len == 0)
		a->len = ARR_HDR;
	saker_put_be32(a->p + a->len, (uint32_t)len);
	if (len > 0)
		memcpy(a->p + a->len + 4, d, len);
	a->len += 4 + len;
	a->n++;
}

void
pg_arr_i64(struct pg_arr *a, int64_t x)
{
	unsigned char b[8];

	saker_put_be64(b, (uint64_t)x);
	pg_arr_put(a, b, 8);
}

/* The array as a parameter value, its header filled in. */
void
pg_pp_arr(struct pgp *p, struct pg_arr *a)
{
	saker_put_be32(a->p, 1);
	saker_put_be32(a->p + 4, 0);
	saker_put_be32(a->p + 8, a->oid);
	saker_put_be32(a->p + 12, a->n);
	saker_put_be32(a->p + 16, 1);
	pg_pp_bin(p, a->p, a->len);
}

void
pg_arr_reset(struct pg_arr *a)
{
	a->len = 0;
	a->n = 0;
}

void
pg_arr_free(struct pg_arr *a)
{
	free(a->p);
	a->p = NULL;
	a->len = a->cap = 0;
	a->n = 0;
}

/* ------------------------------------------------------------------ */
/* pipelines: several statements, one round trip */

void
pg_pipe_init(struct pg_pipe *pp)
{
	memset(pp, 0, sizeof(*pp));
	pp->bad = pp->qsync = -1;
}

void
pg_pipe_clear(struct pg_pipe *pp)
{
	int i;

	for (i = 0; i < pp->n; i++)
		PQclear(pp->res[i]);
	PQclear(pp->bad_res);
	pg_pipe_init(pp);
}

/* Queue a prepared statement (sql == NULL) or plain SQL.  After a send
 * fails nothing more is sent; pg_pipe_wait() then reports it. */
bool
pg_pipe_send(struct pg_store *s, struct pg_pipe *pp, int which, const char *sql,
    const struct pgp *p, const char *what)
{
	char name[16];
	int ok = !pp->sendfail && pp->n < PG_PIPE_MAX - 1;

	if (ok)
		pp->what[pp->n] = what;	/* pg_pipe_fail() names it */
	if (ok && pp->n == 0 && PQpipelineStatus(s->conn) == PQ_PIPELINE_OFF)
		ok = PQenterPipelineMode(s->conn);
	if (ok && sql != NULL) {
		ok = PQsendQueryParams(s->conn, sql, 0, NULL, NULL, NULL, NULL, 1);
	} else if (ok) {
		snprintf(name, sizeof(name), "s%d", which);
		ok = PQsendQueryPrepared(s->conn, name, p != NULL ? p->n : 0,
		    p != NULL ? p->v : NULL, p != NULL ? p->l : NULL,
		    p != NULL ? p->f : NULL, 1);
	}
	if (!ok) {
		pp->sendfail = true;
		return false;
	}
	pp->n++;
	return true;
}

/*
 * Send everything queued and read every result.  The first statement
 * that fails is recorded in pp->bad / pp->bad_res; PostgreSQL skips the
 * ones after it.  Returns true when every statement succeeded.
 */
bool
pg_pipe_wait(struct pg_store *s, struct pg_pipe *pp)
{
	PGresult *r;
	ExecStatusType st;
	int i = 0, nulls = 0;

	if (pp->n == 0)
		goto out;
	if (!pp->synced && !PQpipelineSync(s->conn)) {
		pp->bad = 0;
		goto out;
	}
	pg_deadline(s);
	for (;;) {
		if (!pg_next(s, &r)) {
			/* no answer in time: the connection is gone */
			if (pp->bad < 0)
				pp->bad = i < pp->n ? i : pp->n - 1;
			goto out;
		}
		if (r == NULL) {
			/* one NULL ends each statement's results; two in a
			 * row mean the connection is gone */
			if (++nulls > 1 || PQstatus(s->conn) == CONNECTION_BAD)
				break;
			continue;
		}
		nulls = 0;
		st = PQresultStatus(r);
		if (st == PGRES_PIPELINE_SYNC) {
			PQclear(r);
			break;
		}
		if (i < pp->n && (st == PGRES_TUPLES_OK ||
		    st == PGRES_COMMAND_OK)) {
			pp->res[i++] = r;
			continue;
		}
		if (pp->bad < 0 && st != PGRES_PIPELINE_ABORTED) {
			pp->bad = i < pp->n ? i : pp->n - 1;
			pp->bad_res = r;
		} else {
			PQclear(r);
		}
		if (i < pp->n)
			i++;
	}
	if (i < pp->n && pp->bad < 0)
		pp->bad = i;
out:
	if (s->conn != NULL && PQstatus(s->conn) == CONNECTION_OK &&
	    PQpipelineStatus(s->conn) != PQ_PIPELINE_OFF)
		(void)PQexitPipelineMode(s->conn);
	if (pp->sendfail && pp->bad < 0)
		pp->bad = pp->n;
	return pp->bad < 0;
}

/* pg_fail() for the statement that failed in a pipeline. */
int
pg_pipe_fail(struct pg_store *s, struct pg_pipe *pp)
{
	int i = pp->bad >= 0 && pp->bad < PG_PIPE_MAX ? pp->bad : 0;
	int code;

	code = pg_fail(s, pp->bad_res, pp->what[i] != NULL ? pp->what[i] :
	    "pipeline");
	pg_pipe_clear(pp);
	return code;
}

/* ------------------------------------------------------------------ */
/* connections */

/* The statement connection is gone (or given up on): drop every
 * connection without waiting; tick() makes new ones. */
static void
pg_conn_lost(struct pg_store *s, const char *why)
{
	int i;

	pg_oneline(s->down_why, sizeof(s->down_why), why);
	s->down_said = false;
	/* after a reconnect the claims are given back: forget them now */
	s->wcb->conn_lost(s);
	for (i = 0; i < PG_L_N; i++)
		pg_link_drop(s, &s->links[i], true);
	if (s->in_txn) {
		/* the batch's statements went with the session */
		pg_errf(s, SAKER_EIO, "postgres: connection lost: %s",
		    s->down_why);
		s->wcb->lose_batch(s, SAKER_EIO);
	}
	s->listening = false;
	s->vacuuming = false;
	s->retry_at = 0;	/* first retry at the next tick */
	s->lretry_at = 0;
}

/* Record a failed statement.  Inside a batch PostgreSQL has aborted the
 * transaction: roll it back at once and fail the batch. */
int
pg_fail(struct pg_store *s, const PGresult *res, const char *what)
{
	const char *msg = res != NULL ? PQresultErrorMessage(res) : NULL;
	const char *st = res != NULL ? PQresultErrorField(res,
	    PG_DIAG_SQLSTATE) : NULL;
	char line[400];
	int code;

	if (msg == NULL || *msg == '\0')
		msg = s->conn != NULL ? PQerrorMessage(s->conn) :
		    s->down_why[0] != '\0' ? s->down_why : "not connected";
	pg_oneline(line, sizeof(line), msg);
	bool txn = s->in_txn;

	code = pg_map_state(st);
	if (s->conn == NULL || PQstatus(s->conn) == CONNECTION_BAD) {
		code = SAKER_EIO;
		snprintf(s->err, sizeof(s->err), "postgres: connection lost"
		    " (%s): %s", what, line);
		pg_conn_lost(s, line);
	} else {
		snprintf(s->err, sizeof(s->err), "postgres: %s: %s", what, line);
	}
	s->code = code;
	/* (pg_conn_lost() may have rolled it back already) */
	if (txn && s->in_txn)
		s->wcb->lose_batch(s, code);
	return code;
}

int
pg_down(struct pg_store *s)
{
	return pg_errf(s, SAKER_EIO, "postgres: database unavailable: %s;"
	    " reconnecting", s->down_why[0] != '\0' ? s->down_why :
	    "connecting");
}

static void
pg_quiet(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

/* Connecting link l failed: libpq says why. */
static int
pg_link_refused(struct pg_store *s, struct pg_link *l)
{
	char line[300];

	pg_oneline(line, sizeof(line), PQerrorMessage(l->c));
	pg_link_drop(s, l, false);
	return pg_errf(s, SAKER_EIO, "postgres: cannot connect: %s", line);
}

/*
 * Start connecting link l, without blocking (libpq resolves host names
 * with the system resolver, which can: hostaddr= avoids it), with the
 * parameters of pg_params().  connect_timeout does nothing here: libpq
 * applies it only in its blocking connect; the deadline is ours.
 */
int
pg_link_start(struct pg_store *s, struct pg_link *l, uint64_t wait_ns)
{
	const char *kw[80], *val[80];

	l->up = false;
	pg_params(s, kw, val, sizeof(kw) / sizeof(kw[0]));
	l->c = PQconnectStartParams(kw, val, 0);
	if (l->c == NULL)
		return pg_errf(s, SAKER_ENOMEM, "postgres: out of memory");
	if (PQstatus(l->c) == CONNECTION_BAD)
		return pg_link_refused(s, l);
	/* NOTICEs ("schema exists, skipping") are not for our stderr */
	PQsetNoticeProcessor(l->c, pg_quiet, NULL);
	/* libpq's rule: begin as if PQconnectPoll() asked to write */
	l->want = PGRES_POLLING_WRITING;
	l->deadline_ns = saker_mono_ns() + wait_ns;
	return SAKER_OK;
}

/*
 * Advance link l's connection as far as its socket allows now, without
 * waiting.  1: connected (non-blocking from now on, its socket watched
 * for input); 0: under way, the socket watched for what libpq waits
 * for; < 0: failed or past its deadline (link dropped, error set).
 */
int
pg_link_step(struct pg_store *s, struct pg_link *l)
{
	struct pollfd p;

	if (l->c == NULL)
		return pg_errf(s, SAKER_EIO, "postgres: not connected");
	while (!l->up) {
		if (saker_mono_ns() >= l->deadline_ns) {
			if (l == &s->links[PG_L_MAIN])
				pg_rotate_past(s, l->c);
			pg_link_drop(s, l, true);
			return pg_errf(s, SAKER_EIO, "postgres: cannot connect:"
			    " no answer within %" PRId64 ".%03d s (timeout=)",
			    s->timeout_ms / 1000, (int)(s->timeout_ms % 1000));
		}
		p.fd = PQsocket(l->c);
		p.events = l->want == PGRES_POLLING_WRITING ? POLLOUT : POLLIN;
		p.revents = 0;
		if (p.fd >= 0 && poll(&p, 1, 0) == 0) {
			pg_ep(s, l, p.events == POLLOUT ? EPOLLOUT : EPOLLIN);
			return 0;
		}
		l->want = PQconnectPoll(l->c);
		if (l->want == PGRES_POLLING_FAILED)
			return pg_link_refused(s, l);
		if (l->want == PGRES_POLLING_OK)
			break;
	}
	if (PQsetnonblocking(l->c, 1) != 0)
		return pg_link_refused(s, l);
	/* from here on input nobody asked for (the server ending the
	 * session, a notification) wakes the loop */
	pg_ep(s, l, EPOLLIN);
	return 1;
}

/* open(): connect link l, waiting (the loop is not running yet). */
int
pg_link_wait(struct pg_store *s, struct pg_link *l, uint64_t wait_ns)
{
	int r;

	if ((r = pg_link_start(s, l, wait_ns)) != SAKER_OK)
		return r;
	while ((r = pg_link_step(s, l)) == 0)
		(void)pg_poll(l->c, l->want == PGRES_POLLING_WRITING ? POLLOUT :
		    POLLIN, l->deadline_ns);
	return r > 0 ? SAKER_OK : s->code;
}

/* Send LISTEN on the (just connected) listen link; the answer is read
 * by pg_listen_read(). */
static int
pg_listen_send(struct pg_store *s)
{
	struct pg_link *l = &s->links[PG_L_LISTEN];
	char sql[300], *id;

	id = PQescapeIdentifier(l->c, s->chan, strlen(s->chan));
	if (id == NULL) {
		pg_link_drop(s, l, false);
		return pg_errf(s, SAKER_ENOMEM, "postgres: out of memory");
	}
	snprintf(sql, sizeof(sql), "LISTEN %s", id);
	PQfreemem(id);
	if (!PQsendQuery(l->c, sql) || PQflush(l->c) < 0) {
		char line[300];

		pg_oneline(line, sizeof(line), PQerrorMessage(l->c));
		pg_link_drop(s, l, true);
		return pg_errf(s, SAKER_EIO, "postgres: LISTEN: %s", line);
	}
	l->up = true;
	s->listening = false;
	return SAKER_OK;
}

/*
 * Read what the listen link has: the answer to LISTEN, notifications.
 * A lost listen connection is made again by pg_links(); the statement
 * connection, if it is gone too, says so itself.
 */
static int
pg_listen_read(struct pg_store *s, int64_t now_ms)
{
	struct pg_link *l = &s->links[PG_L_LISTEN];
	PGnotify *n;
	PGresult *res;
	char line[300] = "";
	int self;
	char *p, *end, *nl;

	if (!PQconsumeInput(l->c) || PQstatus(l->c) == CONNECTION_BAD)
		pg_oneline(line, sizeof(line), PQerrorMessage(l->c));
	while (line[0] == '\0' && !PQisBusy(l->c) &&
	    (res = PQgetResult(l->c)) != NULL) {
		if (PQresultStatus(res) == PGRES_EMPTY_QUERY)
			s->probing = false;	/* the server is there */
		else if (PQresultStatus(res) != PGRES_COMMAND_OK)
			pg_oneline(line, sizeof(line),
			    PQresultErrorMessage(res));
		else if (!s->listening) {
			s->listening = true;
			/* notifications were lost meanwhile */
			s->wcb->missed(s);
		}
		PQclear(res);
	}
	if (line[0] != '\0') {
		pg_link_drop(s, l, true);
		s->listening = false;
		s->lretry_at = now_ms + PG_RETRY_MIN_MS;
		return pg_errf(s, SAKER_EIO, "postgres: notification connection"
		    " lost: %s", line);
	}
	self = s->conn != NULL ? PQbackendPID(s->conn) : -1;
	while ((n = PQnotifies(l->c)) != NULL) {
		if (n->be_pid != self && n->extra != NULL) {
			p = n->extra;
			end = p + strlen(p);
			while (p < end) {
				nl = memchr(p, '\n', (size_t)(end - p));
				if (nl == NULL)
					nl = end;
				if (nl > p)
					s->wcb->notified(s, p,
					    (size_t)(nl - p));
				p = nl + 1;
			}
		}
		PQfreemem(n);
	}
	return SAKER_OK;
}

/* A connection attempt failed: try again after the backoff.  The
 * reason is returned (for the log) only when it is news. */
int
pg_attempt_failed(struct pg_store *s, int64_t now_ms)
{
	char why[sizeof(s->down_why)];
	bool news;

	pg_oneline(why, sizeof(why), strncmp(s->err, "postgres: ", 10) == 0 ?
	    s->err + 10 : s->err);
	news = !s->down_said || strcmp(why, s->down_why) != 0;
	snprintf(s->down_why, sizeof(s->down_why), "%s", why);
	s->down_said = true;
	/* counted from the start of the attempt: one that waited out
	 * its deadline is followed by the next at once */
	s->retry_at = s->attempt_at + PG_RETRY_MIN_MS - PG_TICK_SLACK_MS;
	if (!news)
		return SAKER_OK;
	return pg_errf(s, SAKER_EIO, "postgres: %s; trying again every %d s"
	    " until it answers", why, PG_RETRY_MIN_MS / 1000);
}

/* Has c's socket input (or an end) to read, now? */
bool
pg_readable(PGconn *c)
{
	struct pollfd p = { .fd = PQsocket(c), .events = POLLIN };

	return p.fd >= 0 && poll(&p, 1, 0) > 0;
}

/*
 * Everything the sockets allow now, on the statement and listen links,
 * without waiting (fd_ready() and tick()): connections being made
 * advance (a statement connection made is set up by wcb->session_up), a
 * statement connection the server closed is noticed while idle, the
 * listen connection is read and made again.  The VACUUM link is the
 * caller's (pg_vacuum_poll()).
 */
int
pg_links(struct pg_store *s, int64_t now_ms)
{
	struct pg_link *l = &s->links[PG_L_MAIN];
	PGnotify *n;
	int r, err = SAKER_OK;
	char line[300];

	if (l->c != NULL && !l->up) {
		r = pg_link_step(s, l);
		if (r > 0 && s->wcb->session_up(s) != SAKER_OK)
			r = -1;
		if (r < 0)
			err = pg_attempt_failed(s, now_ms);
	} else if (l->up && !s->fl.on && pg_readable(l->c)) {
		/* (in flight the answer is the flight's: commit_finish()) */
		/* between turns nothing is asked of it: this is the server
		 * ending the session (a restart, a failover) */
		if (!PQconsumeInput(l->c) || PQstatus(l->c) == CONNECTION_BAD) {
			pg_oneline(line, sizeof(line), PQerrorMessage(l->c));
			pg_conn_lost(s, line);
			err = pg_errf(s, SAKER_EIO, "postgres: connection lost:"
			    " %s; reconnecting", line);
			s->down_said = true;
		} else {
			while ((n = PQnotifies(l->c)) != NULL)
				PQfreemem(n);
		}
	}
	l = &s->links[PG_L_LISTEN];
	if (s->conn != NULL && !s->read_only && l->c == NULL &&
	    now_ms >= s->lretry_at && pg_link_start(s, l, s->wait_ns) !=
	    SAKER_OK)
		s->lretry_at = now_ms + PG_RETRY_MIN_MS;
	if (l->c != NULL && !l->up) {
		r = pg_link_step(s, l);
		if (r > 0)
			r = pg_listen_send(s) == SAKER_OK ? 1 : -1;
		if (r < 0)
			s->lretry_at = now_ms + PG_RETRY_MIN_MS;
	}
	if (l->up && (r = pg_listen_read(s, now_ms)) != SAKER_OK &&
	    err == SAKER_OK)
		err = r;
	return err;
}

/* open(): LISTEN, waiting for its answer (bounded). */
int
pg_listen_open(struct pg_store *s)
{
	struct pg_link *l = &s->links[PG_L_LISTEN];
	int e;

	if ((e = pg_link_wait(s, l, s->wait_ns)) != SAKER_OK ||
	    (e = pg_listen_send(s)) != SAKER_OK)
		return e;
	while (!s->listening) {
		if (pg_poll(l->c, POLLIN, l->deadline_ns) <= 0) {
			pg_link_drop(s, l, true);
			return pg_errf(s, SAKER_EIO, "postgres: LISTEN: no answer");
		}
		if ((e = pg_listen_read(s, 0)) != SAKER_OK)
			return e;
	}
	return SAKER_OK;
}

int
pg_watch_fd(saker_store *base)
{
	struct pg_store *s = PG(base);

	/* one descriptor for all of them, so it never changes */
	return s->efd;
}
