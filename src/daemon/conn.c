/* conn.c -- a client connection: the socket under a broker session.
 * Reading into the session's input and running its protocol, writing the
 * committed replies, waits' timers, idleness, closing. */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/util.h>

#include "auth.h"
#include "clock.h"
#include "conn.h"
#include "log.h"
#include "login.h"
#include "ops.h"
#include "proto.h"
#include "proto_text.h"
#include "reply.h"
#include "tls.h"

/* Bytes asked of one read(). */
#define READ_CHUNK 16384
/* Input we buffer behind a blocking get before we stop reading. */
#define IN_HIGH_WATER (1u * 1024 * 1024 + PROTO_MAX_GET_LINE)

/*
 * The memory budget (--max-conn-memory).  Everything a connection makes
 * us hold counts (conn_memory()): unread input (pre-login bodies
 * included), the replies of the current batch (pend) and those not yet
 * written (out, TLS state).  Past the budget the server stops reading the
 * connection and runs no further command of it until its replies drain;
 * a multi-get stops handing out items (session_over_budget()).  A
 * connection whose replies do not move for --drain-timeout is closed.
 */

TAILQ_HEAD(conn_list, conn);

/* What the loop gave us (conn_setup()), and every connection. */
static struct conn_env env;
static struct conn_list conns = TAILQ_HEAD_INITIALIZER(conns);
/* connections with replies in this batch */
static struct conn_list batch = TAILQ_HEAD_INITIALIZER(batch);
/* ... and in the batch in flight (their batch_link; s.in_flight) */
static struct conn_list flight = TAILQ_HEAD_INITIALIZER(flight);
/* woken connections with pipelined input */
static struct conn_list resume = TAILQ_HEAD_INITIALIZER(resume);
/*
 * TLS connections whose handshake is not over, oldest first.  Each has a
 * deadline (--tls-handshake-timeout), whatever the auth settings: a
 * ClientHello begun and never finished held a -c slot forever without
 * --auth-file (issue 35).  And at most env.tls_handshakes_max are in
 * progress at once: one more closes the oldest, so stalled handshakes
 * cannot take more than that share of -c, however fast they come.
 */
static struct conn_list handshakes = TAILQ_HEAD_INITIALIZER(handshakes);
static unsigned nhandshakes;

static void conn_read_cb(evutil_socket_t fd, short what, void *arg);
static void conn_write_cb(evutil_socket_t fd, short what, void *arg);
static void conn_idle_cb(evutil_socket_t fd, short what, void *arg);
static void conn_drain_cb(evutil_socket_t fd, short what, void *arg);
static void conn_login_cb(evutil_socket_t fd, short what, void *arg);
static void conn_hs_cb(evutil_socket_t fd, short what, void *arg);
static size_t conn_memory(const struct conn *c);
static void conn_process(struct conn *c);
static void conn_flush(struct conn *c, const struct commit_result *res);
static void peer_names(int fd, char *host, size_t hlen, char *addr,
    size_t alen);

struct conn *
conn_new(int fd, bool tls)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	if (tls && (c->tls = tls_new()) == NULL) {
		free(c);
		return NULL;
	}
	c->fd = fd;
	c->out = evbuffer_new();
	c->rev = event_new(env.base, fd, EV_READ | EV_PERSIST, conn_read_cb, c);
	c->wev = event_new(env.base, fd, EV_WRITE | EV_PERSIST, conn_write_cb, c);
	if (tls)
		c->hs_ev = evtimer_new(env.base, conn_hs_cb, c);
	/* without --auth-file every connection starts authenticated */
	if (c->out == NULL || c->rev == NULL || c->wev == NULL ||
	    (tls && c->hs_ev == NULL) ||
	    session_init(&c->s, env.broker, env.broker->auth == NULL) != 0) {
		if (c->out) evbuffer_free(c->out);
		if (c->rev) event_free(c->rev);
		if (c->wev) event_free(c->wev);
		if (c->hs_ev) event_free(c->hs_ev);
		tls_free(c->tls);
		free(c);
		return NULL;
	}
	c->s.ps = &c->ps;               /* zeroed: no protocol yet */
	c->s.mem_budget = env.max_conn_memory;
	peer_names(fd, c->peer, sizeof(c->peer), c->addr, sizeof(c->addr));
	if (!c->s.authed) {
		struct timeval tv = { LOGIN_TIMEOUT_S, 0 };

		c->login_ev = evtimer_new(env.base, conn_login_cb, c);
		if (c->login_ev != NULL)
			evtimer_add(c->login_ev, &tv);
	}
	TAILQ_INSERT_TAIL(&conns, c, link);
	event_add(c->rev, NULL);
	c->reading = true;
	c->last_cmd_ms = saker_now_ms();
	if (env.idle_tv != NULL) {
		c->idle_ev = evtimer_new(env.base, conn_idle_cb, c);
		if (c->idle_ev != NULL)
			evtimer_add(c->idle_ev, env.idle_tv);
	}
	env.broker->stats.curr_connections++;
	env.broker->stats.total_connections++;
	if (c->tls != NULL) {
		struct timeval tv = { env.tls_handshake_ms / 1000,
		    (env.tls_handshake_ms % 1000) * 1000 };

		c->accepted_ms = saker_now_ms();
		if (nhandshakes >= env.tls_handshakes_max &&
		    !TAILQ_EMPTY(&handshakes)) {
			static int64_t last_log_ms;
			struct conn *old;

			/* the oldest that has not even sent a whole
			 * ClientHello; else the oldest: a flood of stalled
			 * ones evicted real mutual-TLS handshakes half the
			 * time (issue 45) */
			TAILQ_FOREACH(old, &handshakes, hs_link)
				if (!tls_hello_seen(old->tls))
					break;
			if (old == NULL)
				old = TAILQ_FIRST(&handshakes);

			if (c->accepted_ms - last_log_ms >= 60000) {
				last_log_ms = c->accepted_ms;
				log_warn("%u TLS handshakes in progress: closing the "
				    "oldest (from %s, %lld ms) for a new one (logged "
				    "once a minute)", nhandshakes, old->addr,
				    (long long)(c->accepted_ms - old->accepted_ms));
			}
			conn_close(old);
		}
		evtimer_add(c->hs_ev, &tv);
		TAILQ_INSERT_TAIL(&handshakes, c, hs_link);
		c->handshaking = true;
		nhandshakes++;
	}
	return c;
}

unsigned
conn_tls_handshakes(void)
{
	return nhandshakes;
}

void
conn_set_tls_handshakes_max(unsigned n)
{
	env.tls_handshakes_max = n > 0 ? n : 1;
}

static void
handshake_over(struct conn *c)
{
	if (!c->handshaking)
		return;
	c->handshaking = false;
	TAILQ_REMOVE(&handshakes, c, hs_link);
	nhandshakes--;
	if (c->hs_ev != NULL)
		event_del(c->hs_ev);
}

/* The handshake's deadline passed. */
static void
conn_hs_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	if (!c->handshaking || c->s.dead)
		return;
	log_info("closing a TLS connection from %s whose handshake did not end "
	    "within %" PRId64 " ms", c->addr, env.tls_handshake_ms);
	conn_close(c);
	env.drain();
}

/*
 * --idle-timeout: a connection that completed no command for that long is
 * closed, whether it sends nothing (half-open), a byte now and then
 * (slowloris) or never reads its replies.  A blocked get is not idle.
 */
static void
conn_idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	int64_t idle = saker_now_ms() - c->last_cmd_ms;

	if (c->s.state == SESSION_WAITING ||
	    idle < env.idle_timeout_ms) {
		evtimer_add(c->idle_ev, env.idle_tv);
		return;
	}
	log_info("closing a connection idle for %lld ms", (long long)idle);
	conn_close(c);
	env.drain();
}

static void
conn_free(struct conn *c)
{
	struct event *evs[] = { c->rev, c->wev, c->idle_ev, c->drain_ev,
	    c->login_ev, c->throttle_ev, c->hs_ev, c->wait_timer };
	size_t i;

	for (i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
		if (evs[i] != NULL)
			event_free(evs[i]);
	evbuffer_free(c->out);
	tls_free(c->tls);
	proto_session_free(&c->s);
	session_free(&c->s);
	free(c);
}

static void
pause_reading(struct conn *c)
{
	if (c->reading) {
		event_del(c->rev);
		c->reading = false;
	}
}

static void
resume_reading(struct conn *c)
{
	if (!c->reading && !c->s.dead && c->s.state != SESSION_CLOSING) {
		event_add(c->rev, NULL);
		c->reading = true;
	}
	if (c->drain_ev != NULL)
		event_del(c->drain_ev);
}

/* Over the budget: stop reading until the replies drain, and give them
 * --drain-timeout to start moving. */
static void
pause_for_budget(struct conn *c)
{
	struct timeval tv = { env.drain_timeout_ms / 1000,
	    (env.drain_timeout_ms % 1000) * 1000 };

	pause_reading(c);
	if (c->drain_ev == NULL &&
	    (c->drain_ev = evtimer_new(env.base, conn_drain_cb, c)) == NULL)
		return;
	if (!evtimer_pending(c->drain_ev, NULL)) {
		c->drain_mark = c->written;
		evtimer_add(c->drain_ev, &tv);
	}
}

static void
conn_drain_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	struct timeval tv = { env.drain_timeout_ms / 1000,
	    (env.drain_timeout_ms % 1000) * 1000 };

	if (c->reading || c->s.dead)
		return;
	if (c->written != c->drain_mark) {
		/* a slow reader, but a reader: wait on */
		c->drain_mark = c->written;
		evtimer_add(c->drain_ev, &tv);
		return;
	}
	log_info("closing a connection over its memory budget (%zu bytes held) "
	    "whose replies did not move for %" PRId64 " ms", conn_memory(c),
	    env.drain_timeout_ms);
	conn_close(c);
	env.drain();
}

void
conn_close(struct conn *c)
{
	struct event *evs[] = { c->rev, c->wev, c->idle_ev, c->drain_ev,
	    c->login_ev, c->throttle_ev };
	size_t i;

	if (c->s.dead)
		return;
	/* ends its wait and returns its open items */
	session_close(&c->s);
	for (i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
		if (evs[i] != NULL)
			event_del(evs[i]);
	handshake_over(c);
	if (c->tls != NULL) {
		/* tell a TLS client this is an orderly end (best effort) */
		tls_close_notify(c->tls);
		if (evbuffer_get_length(tls_wire(c->tls)) > 0)
			(void)evbuffer_write(tls_wire(c->tls), c->fd);
	}
	close(c->fd);
	c->fd = -1;
	TAILQ_REMOVE(&conns, c, link);
	if (c->s.in_flight) {
		TAILQ_REMOVE(&flight, c, batch_link);
		c->s.in_flight = false;
		c->s.flush_scheduled = false;
	} else if (c->s.flush_scheduled) {
		TAILQ_REMOVE(&batch, c, batch_link);
		c->s.flush_scheduled = false;
	}
	if (c->in_resume) {
		TAILQ_REMOVE(&resume, c, resume_link);
		c->in_resume = false;
	}
	env.broker->stats.curr_connections--;
	if (c->busy == 0)
		conn_free(c);
}

/* Close after the replies already queued have been written. */
static void
conn_close_after_write(struct conn *c)
{
	c->s.state = SESSION_CLOSING;
	pause_reading(c);
	reply_schedule(&c->s);
	/* a session already in the batch still needs the commit to run */
	c->s.b->hooks->schedule_commit(c->s.b);
}

void
conn_setup(const struct conn_env *e)
{
	env = *e;
}

struct conn *
conn_first(void)
{
	return TAILQ_FIRST(&conns);
}

bool
conn_batch_empty(void)
{
	return TAILQ_EMPTY(&batch);
}

void
conn_flush_batch(const struct commit_result *res)
{
	struct conn *c;

	while ((c = TAILQ_FIRST(&batch)) != NULL) {
		TAILQ_REMOVE(&batch, c, batch_link);
		c->s.flush_scheduled = false;
		conn_flush(c, res);
	}
}

/*
 * The batch went in flight (broker_commit_start()): its connections wait
 * for its result.  They stay flush_scheduled, so a reply added meanwhile
 * (a wait that timed out) goes out with theirs and they join no other
 * batch; conn_process() runs none of their input.
 */
void
conn_batch_to_flight(void)
{
	struct conn *c;

	while ((c = TAILQ_FIRST(&batch)) != NULL) {
		TAILQ_REMOVE(&batch, c, batch_link);
		c->s.in_flight = true;
		TAILQ_INSERT_TAIL(&flight, c, batch_link);
	}
}

/* While a batch is in flight: the connections of the batch gathering that
 * wrote nothing get their replies now (a version, an empty get, stats:
 * nothing of theirs waits for a commit; what they read may include the
 * batch in flight and this one, as every read sees the current batch). */
void
conn_flush_unwritten(void)
{
	struct commit_result ok;
	struct conn *c, *next;

	ok.ok = true;
	ok.in_doubt = false;
	ok.reason[0] = '\0';
	for (c = TAILQ_FIRST(&batch); c != NULL; c = next) {
		next = TAILQ_NEXT(c, batch_link);
		if (c->s.wrote)
			continue;
		TAILQ_REMOVE(&batch, c, batch_link);
		c->s.flush_scheduled = false;
		conn_flush(c, &ok);
	}
}

void
conn_flush_flight(const struct commit_result *res)
{
	struct conn *c;

	while ((c = TAILQ_FIRST(&flight)) != NULL) {
		TAILQ_REMOVE(&flight, c, batch_link);
		c->s.in_flight = false;
		c->s.flush_scheduled = false;
		conn_flush(c, res);
		/* the input that arrived meanwhile runs from env.drain() */
		if (!c->s.dead && !c->in_resume &&
		    evbuffer_get_length(c->s.in) > 0) {
			TAILQ_INSERT_TAIL(&resume, c, resume_link);
			c->in_resume = true;
		}
	}
}

bool
conn_resume_one(void)
{
	struct conn *c = TAILQ_FIRST(&resume);

	if (c == NULL)
		return false;
	TAILQ_REMOVE(&resume, c, resume_link);
	c->in_resume = false;
	conn_process(c);
	return true;
}

void
conn_close_all(void)
{
	struct conn *c;

	/* last replies, best effort, then close: open items go back; not
	 * those of a batch still in flight, whose result nobody knows */
	while ((c = TAILQ_FIRST(&conns)) != NULL) {
		if (!c->s.in_flight)
			evbuffer_add_buffer(c->out, c->s.pend);
		if (c->tls != NULL) {
			if (tls_output(c->tls, c->out) == TLS_OK &&
			    evbuffer_get_length(tls_wire(c->tls)) > 0)
				(void)evbuffer_write(tls_wire(c->tls), c->fd);
		} else if (evbuffer_get_length(c->out) > 0) {
			(void)evbuffer_write(c->out, c->fd);
		}
		conn_close(c);
	}
}

/* --- the broker's hooks ------------------------------------------------- */

void
conn_schedule_flush(struct session *s)
{
	struct conn *c = conn_of(s);

	TAILQ_INSERT_TAIL(&batch, c, batch_link);
	s->b->hooks->schedule_commit(s->b);
}

static void
wait_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	op_wait_timeout(&c->s);
	env.drain();
}

bool
conn_wait_start(struct session *s, int64_t timeout_ms)
{
	struct conn *c = conn_of(s);
	struct timeval tv;

	if (c->wait_timer == NULL &&
	    (c->wait_timer = evtimer_new(env.base, wait_timeout_cb, c)) == NULL)
		return false;
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	event_add(c->wait_timer, &tv);
	return true;
}

void
conn_wait_end(struct session *s)
{
	struct conn *c = conn_of(s);

	if (c->wait_timer != NULL)
		event_del(c->wait_timer);
	/* the wait was a command in progress: idleness starts now */
	c->last_cmd_ms = saker_now_ms();
	/* pipelined input that arrived meanwhile runs from env.drain() */
	if (!s->dead && !c->in_resume) {
		TAILQ_INSERT_TAIL(&resume, c, resume_link);
		c->in_resume = true;
	}
}

void
conn_hook_close(struct session *s)
{
	conn_close(conn_of(s));
}

void
conn_hook_close_after_write(struct session *s)
{
	conn_close_after_write(conn_of(s));
}

/* --- output ------------------------------------------------------------- */

/* Bytes waiting for the socket: replies, and their ciphertext on TLS. */
static size_t
out_pending(const struct conn *c)
{
	size_t n = evbuffer_get_length(c->out);

	if (c->tls != NULL)
		n += evbuffer_get_length(tls_wire(c->tls));
	return n;
}

/* Bytes this connection holds in its buffers (TLS state included): what
 * the memory budget counts. */
static size_t
conn_memory(const struct conn *c)
{
	size_t n = evbuffer_get_length(c->s.in) + evbuffer_get_length(c->s.pend) +
	    evbuffer_get_length(c->s.held) + evbuffer_get_length(c->out);

	if (c->tls != NULL)
		n += tls_memory(c->tls);
	return n;
}

static void
conn_write(struct conn *c)
{
	struct evbuffer *wire = c->out;
	size_t before;
	int n;

	if (c->tls != NULL) {
		/* encrypt what is committed; the ciphertext goes out below */
		if (tls_output(c->tls, c->out) != TLS_OK &&
		    c->s.state != SESSION_CLOSING) {
			log_info("closing a TLS connection from %s: %s",
			    c->addr, tls_error(c->tls));
			conn_close(c);
			return;
		}
		wire = tls_wire(c->tls);
	}
	before = evbuffer_get_length(wire);
	if (before == 0)
		goto drained;
	n = evbuffer_write(wire, c->fd);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
			event_add(c->wev, NULL);
			return;
		}
		conn_close(c);
		return;
	}
	env.broker->stats.bytes_written += (uint64_t)n;
	c->written += (uint64_t)n;
	c->s.out_len = out_pending(c);
	if (evbuffer_get_length(wire) > 0) {
		event_add(c->wev, NULL);
		if (conn_memory(c) > env.max_conn_memory)
			pause_for_budget(c);
		return;
	}
drained:
	if (c->tls != NULL && evbuffer_get_length(c->out) > 0 &&
	    c->s.state != SESSION_CLOSING) {
		/* replies wait for the handshake, which reading drives */
		event_del(c->wev);
		return;
	}
	event_del(c->wev);
	c->s.out_len = out_pending(c);
	if (c->s.state == SESSION_CLOSING) {
		conn_close(c);
		return;
	}
	if (!c->reading && c->s.state != SESSION_WAITING) {
		resume_reading(c);
		/* input may have piled up while we were not reading */
		if (evbuffer_get_length(c->s.in) > 0) {
			conn_process(c);
			env.drain();
		}
	}
}

/* The batch's commit is over: send its replies.  When it failed they
 * become errors (proto_fail_batch()), except that with `in_doubt`
 * (SAKER_EINDOUBT) replies handing out removed items go out as they are. */
static void
conn_flush(struct conn *c, const struct commit_result *res)
{
	struct session *s = &c->s;

	if (!res->ok) {
		struct evbuffer *sent = evbuffer_new();

		if (sent == NULL)
			evbuffer_drain(s->pend, evbuffer_get_length(s->pend));
		else
			evbuffer_add_buffer(sent, s->pend);
		proto_fail_batch(s, sent, res->in_doubt, res->reason);
		if (sent != NULL)
			evbuffer_free(sent);
	}
	session_batch_done(s, res->ok);
	s->wrote = false;
	reply_reset(s);
	evbuffer_add_buffer(c->out, s->pend);
	if (s->held_in_batch && !res->ok) {
		/*
		 * Commands run behind a waiting get were part of the failed
		 * batch, or their replies were: they are not in the batch's
		 * records and cannot be answered in order now.  Drop them and
		 * close, so the client never takes a STORED for an item the
		 * store rolled back.
		 */
		log_warn("commit failed with replies held behind a get; closing the connection");
		evbuffer_drain(s->held, evbuffer_get_length(s->held));
		s->held_some = false;
		if (s->state == SESSION_WAITING)
			session_end_wait(s);
		conn_close_after_write(c);
	}
	s->held_in_batch = false;
	s->out_len = out_pending(c);
	conn_write(c);
}

static void
conn_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	conn_write(c);
}

/* --- logins ------------------------------------------------------------- */

/* One getpeername() for both names of the peer: `host`, the address
 * without the port, is the key of login throttling, so one host's
 * connections share it; `addr`, with the port, tells connections apart in
 * log lines.  For -s, both name the peer's uid (SO_PEERCRED): the local
 * users of a Unix socket are throttled apart, not as one "unix" peer
 * (issue 45), and its pid tells connections apart. */
static void
peer_names(int fd, char *host, size_t hlen, char *addr, size_t alen)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	socklen_t sl = sizeof(ss);
	char ip[INET6_ADDRSTRLEN];
	bool v4;

	snprintf(host, hlen, "unknown");
	snprintf(addr, alen, "unknown peer");
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
		return;
	if (ss.ss_family == AF_UNIX) {
		struct ucred cr;
		socklen_t crl = sizeof(cr);

		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) == 0) {
			snprintf(host, hlen, "unix:uid=%u", (unsigned)cr.uid);
			snprintf(addr, alen, "unix:uid=%u,pid=%ld", (unsigned)cr.uid,
			    (long)cr.pid);
		} else {
			snprintf(host, hlen, "unix");
			snprintf(addr, alen, "unix");
		}
		return;
	}
	v4 = ss.ss_family == AF_INET;
	if ((!v4 && ss.ss_family != AF_INET6) || inet_ntop(ss.ss_family, v4 ?
	    (void *)&in->sin_addr : (void *)&in6->sin6_addr, ip, sizeof(ip)) == NULL)
		return;
	snprintf(host, hlen, "%s", ip);
	snprintf(addr, alen, v4 ? "%s:%u" : "[%s]:%u", ip,
	    (unsigned)ntohs(v4 ? in->sin_port : in6->sin6_port));
}

static void
conn_login_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	if (c->s.authed || c->s.dead)
		return;
	log_info("closing a connection from %s that did not log in within %d s",
	    c->peer, LOGIN_TIMEOUT_S);
	conn_close(c);
	env.drain();
}

const char *
conn_peer(struct session *s)
{
	return conn_of(s)->addr;
}

void
conn_login_ok(struct session *s)
{
	struct conn *c = conn_of(s);

	login_ok(c->peer, c->login_user, c->login_ulen, saker_now_ms());
	if (c->login_ev != NULL)
		event_del(c->login_ev);
}

/* A login's delay is over: run it (conn_login_admit() checks again, as
 * other attempts may have added to the delay meanwhile). */
static void
conn_throttle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	if (c->s.dead || !c->throttled)
		return;
	c->throttled = false;
	c->busy++;
	resume_reading(c);
	conn_process(c);
	env.drain();
	if (--c->busy == 0 && c->s.dead)
		conn_free(c);
}

bool
conn_login_admit(struct session *s, const char *user, size_t ulen)
{
	struct conn *c = conn_of(s);
	int64_t delay = login_wait(c->peer, user, ulen, saker_now_ms());
	struct timeval tv;

	if (delay <= 0) {
		c->login_ulen = ulen < sizeof(c->login_user) ? ulen :
		    sizeof(c->login_user);
		memcpy(c->login_user, user, c->login_ulen);
		c->login_checks = auth_checks(env.broker->auth);
		return true;
	}
	if (c->throttle_ev == NULL &&
	    (c->throttle_ev = evtimer_new(env.base, conn_throttle_cb, c)) == NULL) {
		/* cannot wait: never check early, refuse the connection */
		log_error("out of memory delaying a login from %s; closing it",
		    c->addr);
		conn_close_after_write(c);
		return false;
	}
	/* the check waits, and so does everything after it; the loop does
	 * not (a timer, nothing sleeps) */
	c->throttled = true;
	pause_reading(c);
	tv.tv_sec = delay / 1000;
	tv.tv_usec = (delay % 1000) * 1000;
	evtimer_add(c->throttle_ev, &tv);
	return false;
}

void
conn_login_failed(struct session *s, const char *how,
    void (*answer)(struct session *s))
{
	struct conn *c = conn_of(s);

	struct auth *a = env.broker->auth;

	/* refused without a check (a login the protocol found malformed):
	 * it costs a check all the same */
	if (auth_checks(a) == c->login_checks)
		auth_dummy(a);
	(void)login_failed(c->peer, c->login_user, c->login_ulen,
	    auth_known(a, c->login_user, c->login_ulen), how, saker_now_ms());
	c->login_fails++;
	answer(&c->s);
	if (c->login_fails >= LOGIN_CONN_TRIES) {
		log_warn("closing the connection from %s after %u failed logins",
		    c->addr, c->login_fails);
		conn_close_after_write(c);
	}
}

/* --- input -------------------------------------------------------------- */

/* Parse and run every complete command in the session's input. */
static void
conn_process(struct conn *c)
{
	struct session *s = &c->s;
	uint64_t t;

	c->busy++;
	/* a waiting get lets some commands behind it run (proto_step); a
	 * connection whose replies are in flight runs nothing until they
	 * are sent (conn_flush_flight()) */
	while (!s->dead && !s->in_flight && (s->state == SESSION_CMD || s->state == SESSION_SWALLOW ||
	    (s->state == SESSION_WAITING && !s->monitoring))) {
		int r;

		if (c->throttled)
			break;          /* a failed login's answer is due first */
		if (s->state == SESSION_CMD && session_over_budget(s) &&
		    evbuffer_get_length(s->in) > 0) {
			/* the next command waits until the replies drain */
			pause_for_budget(c);
			break;
		}
		t = env.broker->touches;
		r = proto_step(s);
		if (env.broker->touches != t)
			s->wrote = true;

		if (r == PROTO_STOP)
			break;
		if (r == PROTO_SKIPPED)
			continue;
		if (env.idle_tv != NULL)
			c->last_cmd_ms = saker_now_ms();
		/* hand items made visible by this command to their waiters */
		env.drain();
	}
	c->busy--;
	if (s->dead && c->busy == 0)
		conn_free(c);
}

/* One read() straight into the input buffer (evbuffer_read would add an
 * FIONREAD ioctl per call: a third syscall per request). */
static ssize_t
conn_read(struct conn *c, evutil_socket_t fd)
{
	struct evbuffer_iovec v;
	ssize_t n;

	if (evbuffer_reserve_space(c->s.in, READ_CHUNK, &v, 1) < 1)
		return -1;
	n = read(fd, v.iov_base, READ_CHUNK);
	v.iov_len = n > 0 ? (size_t)n : 0;
	evbuffer_commit_space(c->s.in, &v, 1);
	return n;
}

/* The TLS read path: ciphertext in, plaintext into the session's input.
 * Returns the plaintext bytes added (maybe 0 during the handshake), or -1
 * when the connection was closed. */
static ssize_t
conn_read_tls(struct conn *c, evutil_socket_t fd)
{
	size_t n = 0;

	switch (tls_input(c->tls, fd, c->s.in, &n)) {
	case TLS_OK:
		break;
	case TLS_AGAIN:
		return 0;
	case TLS_EOF:
		if (n > 0)
			break;
		conn_close(c);
		return -1;
	case TLS_PLAIN:
		/* one line for the operator, nothing for the client */
		log_warn("closing a connection from %s: plain text on the TLS port",
		    c->addr);
		conn_close(c);
		return -1;
	case TLS_FAIL:
		log_warn("closing a TLS connection from %s: %s",
		    c->addr, tls_error(c->tls));
		/* the alert OpenSSL queued goes out, then we close */
		c->s.state = SESSION_CLOSING;
		pause_reading(c);
		conn_write(c);
		return -1;
	}
	if (c->handshaking && tls_handshake_done(c->tls))
		handshake_over(c);
	/* handshake messages to send, or replies held until it finished */
	if (evbuffer_get_length(tls_wire(c->tls)) > 0 ||
	    evbuffer_get_length(c->out) > 0)
		conn_write(c);
	return c->s.dead ? -1 : (ssize_t)n;
}

static void
conn_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	ssize_t n;

	if (c->tls != NULL) {
		c->busy++;
		n = conn_read_tls(c, fd);
		c->busy--;
		if (n <= 0) {
			if (c->s.dead) {
				if (c->busy == 0)
					conn_free(c);
				env.drain();
			}
			return;
		}
	} else {
		n = conn_read(c, fd);
		if (n <= 0) {
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
			    errno == EINTR))
				return;
			conn_close(c);
			env.drain();
			return;
		}
	}
	env.broker->stats.bytes_read += (uint64_t)n;
	if (c->s.state == SESSION_WAITING && c->s.monitoring) {
		/* keep reading to notice a disconnect, but not without bound;
		 * the wait's reply resumes reading when it is written */
		if (conn_memory(c) > env.max_conn_memory)
			pause_reading(c);
		return;
	}
	c->busy++;
	conn_process(c);
	env.drain();
	/* input behind a waiting get and the replies held for it count
	 * against the budget like other input and output; a waiting get is
	 * not closed for it (its reply comes when an item does) */
	if (!c->s.dead && c->reading && conn_memory(c) > env.max_conn_memory) {
		if (c->s.state == SESSION_WAITING)
			pause_reading(c);
		else
			pause_for_budget(c);
	}
	if (--c->busy == 0 && c->s.dead)
		conn_free(c);
}
