/* pg_lease.c -- the PostgreSQL driver's leases: the open items this
 * broker holds, items claimed ahead, lease renewal and the sweep of dead
 * brokers' leases (tick), the VACUUM connection. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_int.h"

/* the VACUUM connection, after a failure */
#define PG_VACUUM_RETRY_MS 16000
/* Claimed items not taken for this long go back to the queue. */
#define PG_HELD_IDLE_MS 1000
/* The lease sweep looks this far behind the last one (besides timeout=
 * when the lease is shorter), and from the bottom this often when the
 * table has fewer dead rows than this (pg_tick()). */
#define PG_SWEEP_MARGIN_MS 1000
#define PG_SWEEP_FULL_MS 300000
#define PG_SWEEP_FULL_DEAD 50000
/* A snapshot held this long: the broker's VACUUMs this far apart. */
#define PG_HORIZON_VACUUM_MS 30000

/* ------------------------------------------------------------------ */
/* the set of open items this broker holds */

static size_t
os_slot(uint64_t id, size_t cap)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ULL) >> 20) & (cap - 1);
}

int
pg_os_add(struct pg_oset *o, uint64_t id, int64_t qid)
{
	size_t i;

	if ((o->n + 1) * 2 > o->cap) {
		struct pg_oset no;
		size_t k;

		no.cap = o->cap ? o->cap * 2 : 64;
		no.n = 0;
		no.ids = calloc(no.cap, sizeof(*no.ids));
		no.qids = calloc(no.cap, sizeof(*no.qids));
		if (no.ids == NULL || no.qids == NULL) {
			free(no.ids);
			free(no.qids);
			return SAKER_ENOMEM;
		}
		for (k = 0; k < o->cap; k++)
			if (o->ids[k] != 0)
				(void)pg_os_add(&no, o->ids[k], o->qids[k]);
		free(o->ids);
		free(o->qids);
		*o = no;
	}
	for (i = os_slot(id, o->cap); o->ids[i] != 0; i = (i + 1) & (o->cap - 1))
		if (o->ids[i] == id) {
			o->qids[i] = qid;
			return SAKER_OK;
		}
	o->ids[i] = id;
	o->qids[i] = qid;
	o->n++;
	return SAKER_OK;
}

static void
os_del_at(struct pg_oset *o, size_t i)
{
	size_t j, k;

	o->ids[i] = 0;
	o->n--;
	/* backward-shift deletion keeps probe chains intact without tombstones */
	for (j = (i + 1) & (o->cap - 1); o->ids[j] != 0; j = (j + 1) & (o->cap - 1)) {
		k = os_slot(o->ids[j], o->cap);
		if ((j > i && (k <= i || k > j)) || (j < i && k <= i && k > j)) {
			o->ids[i] = o->ids[j];
			o->qids[i] = o->qids[j];
			o->ids[j] = 0;
			i = j;
		}
	}
}

/* Remove id if it is held on queue qid; true if it was. */
bool
pg_os_take(struct pg_oset *o, uint64_t id, int64_t qid)
{
	size_t i;

	if (o->cap == 0 || id == 0)
		return false;
	for (i = os_slot(id, o->cap); o->ids[i] != 0; i = (i + 1) & (o->cap - 1)) {
		if (o->ids[i] != id)
			continue;
		if (o->qids[i] != qid)
			return false;
		os_del_at(o, i);
		return true;
	}
	return false;
}

void
pg_os_drop_queue(struct pg_oset *o, int64_t qid)
{
	size_t i = 0;

	while (i < o->cap) {
		if (o->ids[i] != 0 && o->qids[i] == qid)
			os_del_at(o, i);	/* slot i may refill: look again */
		else
			i++;
	}
}

void
pg_os_clear(struct pg_oset *o)
{
	if (o->cap > 0) {
		memset(o->ids, 0, o->cap * sizeof(*o->ids));
		o->n = 0;
	}
}

/* Whether id has a state change waiting in the batch's arrays. */
bool
pg_os_has(const struct pg_oset *o, uint64_t id)
{
	size_t i;

	if (o->cap == 0 || id == 0)
		return false;
	for (i = os_slot(id, o->cap); o->ids[i] != 0; i = (i + 1) & (o->cap - 1))
		if (o->ids[i] == id)
			return true;
	return false;
}

/* ---- claim ahead ---- */

/* Items claimed ahead are served only while their lease is surely ours:
 * renewals run every lease/4, so missing 3/4 of a lease means trouble. */
bool
pg_lease_ok(const struct pg_store *s, int64_t now_ms)
{
	return now_ms < s->lease_floor + s->lease_ms - s->lease_ms / 4;
}

/* Forget the queue's claimed items here (the database is not told). */
void
pg_held_drop(struct pg_store *s, struct saker_queue *q)
{
	if (q->held == NULL)
		return;
	s->nheld -= (size_t)(q->held_n - q->held_head);
	PQclear(q->held);
	free(q->held_rows);
	q->held = NULL;
	q->held_rows = NULL;
	q->held_head = q->held_n = 0;
	LIST_REMOVE(q, held_link);
}

void
pg_held_drop_all(struct pg_store *s)
{
	struct saker_queue *q;

	while ((q = LIST_FIRST(&s->holding)) != NULL)
		pg_held_drop(s, q);
}

/* Hand the queue's unserved claimed items back (state 0) in this batch;
 * they keep their place in the FIFO. */
int
pg_held_return(struct pg_store *s, struct saker_queue *q)
{
	int i, err;

	if (q->held == NULL)
		return SAKER_OK;
	for (i = q->held_head; i < q->held_n; i++)
		if ((err = pg_st_add(s, q->id, (uint64_t)pg_rv_i64(q->held,
		    q->held_rows[i], 0), 0)) != SAKER_OK)
			return err;
	pg_held_drop(s, q);
	pg_gained(s, q);
	return SAKER_OK;
}

/*
 * How many items the next claim of this queue asks for: as many as the
 * queue had takes in the previous batch, or in this one so far, whichever
 * is more (so it doubles while a burst lasts).  A queue with one take per
 * batch claims one item at a time: a single consumer sees strict FIFO and
 * nothing is held back from other brokers.
 */
int
pg_claim_size(struct pg_store *s, struct saker_queue *q)
{
	unsigned n;

	if (q->take_batch != s->batch_no) {
		q->takes_prev = q->take_batch + 1 == s->batch_no ?
		    q->takes_cur : 0;
		q->takes_cur = 0;
		q->take_batch = s->batch_no;
	}
	if (q->takes_cur < PG_CLAIM_MAX)
		q->takes_cur++;
	n = q->takes_prev > q->takes_cur ? q->takes_prev : q->takes_cur;
	return n > PG_CLAIM_MAX ? PG_CLAIM_MAX : (int)n;
}

/* Claim up to n of the oldest visible items into q->held. */
int
pg_claim(struct pg_store *s, struct saker_queue *q, int n, int64_t now_ms)
{
	struct pgp p;
	PGresult *res;

	if (s->nheld == 0 && s->open.n == 0)
		s->lease_floor = now_ms;
	pg_head_params(s, q, &p, now_ms);
	pg_pp_str(&p, s->owner);
	pg_pp_i64(&p, s->lease_ms);
	pg_pp_i64(&p, n);
	if ((res = pg_run(s, P_CLAIM, &p, "claiming items")) == NULL)
		return s->code;
	if (PQntuples(res) == 0)
		q->empty_gen = s->txn_gen;
	return pg_held_install(s, q, res, now_ms);
}

/* Serve the claimed rows of res (P_CLAIM's) from q->held; takes res. */
int
pg_held_install(struct pg_store *s, struct saker_queue *q, PGresult *res,
    int64_t now_ms)
{
	int *rows, k = PQntuples(res), i, j, t;

	if (k == 0) {
		PQclear(res);
		return SAKER_EEMPTY;
	}
	if ((rows = malloc((size_t)k * sizeof(*rows))) == NULL) {
		PQclear(res);
		/* still leased to us: the sweep returns them */
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	}
	/* RETURNING has no order: sort by (vis, id), at most PG_CLAIM_MAX */
	for (i = 0; i < k; i++) {
		t = i;
		for (j = i; j > 0 && (pg_rv_i64(res, rows[j - 1], 4) >
		    pg_rv_i64(res, t, 4) || (pg_rv_i64(res, rows[j - 1], 4) ==
		    pg_rv_i64(res, t, 4) && pg_rv_i64(res, rows[j - 1], 0) >
		    pg_rv_i64(res, t, 0))); j--)
			rows[j] = rows[j - 1];
		rows[j] = t;
	}
	pg_hint(s, q, res, rows[k - 1]);
	q->held = res;
	q->held_rows = rows;
	q->held_head = 0;
	q->held_n = k;
	q->held_used_ms = now_ms;
	s->nheld += (size_t)k;
	LIST_INSERT_HEAD(&s->holding, q, held_link);
	return SAKER_OK;
}

/* Serve a take from the claimed items; SAKER_EEMPTY when they ran out. */
int
pg_take_held(struct pg_store *s, struct saker_queue *q, int mode,
    int64_t now_ms, saker_item_fn fn, void *arg)
{
	struct saker_item it;
	int64_t expires;
	uint64_t id;
	bool moved;
	int row, r, err;

	while (q->held_head < q->held_n) {
		row = q->held_rows[q->held_head];
		if (!pg_row_sound(q->held, row))
			return pg_held_damaged(s, q, q->held_head, now_ms);
		id = (uint64_t)pg_rv_i64(q->held, row, 0);
		expires = pg_rv_i64(q->held, row, 2);
		if (!pg_del_room(s))
			return pg_errf(s, SAKER_ENOMEM, "out of memory");
		if (expires != 0 && expires <= now_ms) {
			if ((err = pg_xto_put(s, q, q->held, row, pg_item_cols,
			    now_ms, &moved)) != SAKER_OK)
				return err;
			pg_del_add(s, q->id, id);
			if (!moved)
				pg_expired(s, q, 1);
			q->held_head++;
			s->nheld--;
			continue;
		}
		if (mode == SAKER_TAKE_OPEN && pg_os_add(&s->open, id, q->id) !=
		    SAKER_OK)
			return pg_errf(s, SAKER_ENOMEM, "out of memory");
		pg_row_item(q->held, row, &it, SAKER_ITEM_READY);
		/* P_SETSTATE counts the delivery of a claimed item it opens */
		if (mode == SAKER_TAKE_OPEN &&
		    it.deliveries < SAKER_DELIVERIES_MAX)
			it.deliveries++;
		r = fn(arg, &it);
		if (r != 0) {
			/* refused: it stays first in line */
			if (mode == SAKER_TAKE_OPEN)
				(void)pg_os_take(&s->open, id, q->id);
			return r;
		}
		if (mode == SAKER_TAKE_REMOVE) {
			pg_del_add(s, q->id, id);
		} else if ((err = pg_st_add(s, q->id, id, 1)) != SAKER_OK) {
			/* the core does not send an item whose take failed */
			(void)pg_os_take(&s->open, id, q->id);
			return err;
		}
		q->held_head++;
		s->nheld--;
		q->held_used_ms = now_ms;
		if (q->held_head == q->held_n)
			pg_held_drop(s, q);
		return SAKER_OK;
	}
	pg_held_drop(s, q);
	return SAKER_EEMPTY;
}

/* Peek: the first unexpired claimed item, if any, is the head. */
int
pg_peek_held(struct pg_store *s, struct saker_queue *q, int64_t now_ms,
    saker_item_fn fn, void *arg)
{
	struct saker_item it;
	int64_t expires;
	int i, row;

	for (i = q->held_head; i < q->held_n; i++) {
		row = q->held_rows[i];
		if (!pg_row_sound(q->held, row))
			return pg_held_damaged(s, q, i, now_ms);
		expires = pg_rv_i64(q->held, row, 2);
		if (expires != 0 && expires <= now_ms)
			continue;
		pg_row_item(q->held, row, &it, SAKER_ITEM_READY);
		return fn(arg, &it);
	}
	return SAKER_EEMPTY;
}

/* Run a statement on open item `id` that changes its row only while this
 * broker holds its lease: SAKER_ELOCKED when it changed nothing.  `after`
 * ends the message (what became of the item). */
int
pg_run_leased(struct pg_store *s, int which, const struct pgp *p,
    const char *what, uint64_t id, const char *after)
{
	PGresult *res;
	uint64_t n;

	if ((res = pg_run(s, which, p, what)) == NULL)
		return s->code;
	n = pg_rv_changed(res);
	PQclear(res);
	if (n == 0)
		return pg_errf(s, SAKER_ELOCKED, "open item %" PRIu64 " is no"
		    " longer leased to this broker (the lease expired and the"
		    " item went back to the queue%s)", id, after);
	return SAKER_OK;
}

/* ------------------------------------------------------------------ */
/* the shared-store hooks */

/*
 * The broker's own VACUUM of saker_items, on a connection of its own so
 * neither the event loop nor the notifications wait for it (a session
 * running a command receives no NOTIFY until it is done).  Every take
 * leaves a dead row (and a dead index entry at the head of its queue)
 * that each later take steps over until a vacuum removes it; autovacuum
 * looks only once a minute (autovacuum_naptime), and by then a busy
 * queue's takes had slowed to half (docs/scaling.md, "Vacuum and
 * bloat").  Driven by the once-a-second tick: the outcome of a VACUUM is
 * read without blocking, and a new one is sent vacuum_ms after the last
 * ended, when this broker committed something since.  SKIP_LOCKED: a
 * VACUUM another broker runs meanwhile is enough.
 */
void
pg_vacuum_drop(struct pg_store *s, int64_t now_ms)
{
	pg_link_drop(s, &s->links[PG_L_VACUUM], true);
	s->vacuuming = false;
	s->vacuum_at = now_ms + PG_VACUUM_RETRY_MS;	/* connect again then */
}

int
pg_vacuum_tick(struct pg_store *s, int64_t now_ms)
{
	struct pg_link *l = &s->links[PG_L_VACUUM];
	PGresult *res;
	char line[300] = "", sql[128];
	int r;

	if (s->vacuuming) {
		if (!PQconsumeInput(l->c) || PQflush(l->c) < 0) {
			pg_vacuum_drop(s, now_ms);
			return SAKER_OK;	/* the main connection will tell */
		}
		while (!PQisBusy(l->c)) {
			if ((res = PQgetResult(l->c)) == NULL) {
				s->vacuuming = false;
				/* behind a held snapshot it can remove nothing
				 * newer, and reads the whole grown table each
				 * time: less often then */
				s->vacuum_at = now_ms + (s->horizon_ms >=
				    PG_HORIZON_VACUUM_MS && s->vacuum_ms <
				    PG_HORIZON_VACUUM_MS ? PG_HORIZON_VACUUM_MS :
				    s->vacuum_ms);
				break;
			}
			if (PQresultStatus(res) != PGRES_COMMAND_OK)
				pg_oneline(line, sizeof(line),
				    PQresultErrorMessage(res));
			PQclear(res);
		}
		if (line[0] != '\0') {
			s->vacuum_ms = 0;
			pg_vacuum_drop(s, now_ms);
			return pg_errf(s, SAKER_EIO, "postgres: VACUUM saker_items"
			    " failed, left to autovacuum from now on: %s", line);
		}
		if (s->vacuuming)
			return SAKER_OK;
	}
	if (l->c == NULL && (s->vacuum_ms == 0 || s->conn == NULL ||
	    s->commits == s->vacuum_commits || now_ms < s->vacuum_at))
		return SAKER_OK;
	/* connected without waiting, like the others (pg_links()) */
	if (l->c == NULL && pg_link_start(s, l, s->wait_ns) != SAKER_OK) {
		pg_vacuum_drop(s, now_ms);
		return SAKER_OK;	/* the main connection will tell */
	}
	if (!l->up) {
		if ((r = pg_link_step(s, l)) < 0)
			pg_vacuum_drop(s, now_ms);
		if (r <= 0)
			return SAKER_OK;
		l->up = true;
	}
	if (s->vacuum_ms == 0 || s->commits == s->vacuum_commits ||
	    now_ms < s->vacuum_at)
		return SAKER_OK;
	/* this session has no search_path of ours: the schema is named
	 * (it was checked to need no quoting beyond this) */
	snprintf(sql, sizeof(sql), "VACUUM %s%s%s%ssaker_items",
	    PQserverVersion(l->c) >= 120000 ? "(SKIP_LOCKED) " : "",
	    s->schema != NULL ? "\"" : "", s->schema != NULL ? s->schema : "",
	    s->schema != NULL ? "\"." : "");
	if (!PQsendQuery(l->c, sql)) {
		pg_vacuum_drop(s, now_ms);
		return SAKER_OK;
	}
	(void)PQflush(l->c);
	s->vacuuming = true;
	s->vacuum_commits = s->commits;
	return SAKER_OK;
}

/*
 * Renew the leases of every row this broker holds: its open items (the
 * set mirrors the database) and the claimed ones in memory, by key.  A
 * statement by owner alone read every entry of saker_items_lease, dead
 * ones too (60 ms a renewal after 5 minutes of a held horizon).
 */
static int
pg_renew(struct pg_store *s)
{
	struct pg_arr qa = { .oid = OID_INT8 }, ia = { .oid = OID_INT8 };
	struct saker_queue *q;
	struct pgp p;
	PGresult *res;
	size_t k;
	int i, err = SAKER_OK;

	for (k = 0; k < s->open.cap; k++) {
		if (s->open.ids[k] == 0)
			continue;
		if (!pg_arr_reserve(&qa, 12) || !pg_arr_reserve(&ia, 12))
			goto nomem;
		pg_arr_i64(&qa, s->open.qids[k]);
		pg_arr_i64(&ia, (int64_t)s->open.ids[k]);
	}
	LIST_FOREACH(q, &s->holding, held_link)
		for (i = q->held_head; i < q->held_n; i++) {
			if (!pg_arr_reserve(&qa, 12) || !pg_arr_reserve(&ia, 12))
				goto nomem;
			pg_arr_i64(&qa, q->id);
			pg_arr_i64(&ia, pg_rv_i64(q->held, q->held_rows[i], 0));
		}
	memset(&p, 0, sizeof(p));
	pg_pp_str(&p, s->owner);
	pg_pp_i64(&p, s->lease_ms);
	pg_pp_arr(&p, &qa);
	pg_pp_arr(&p, &ia);
	if ((res = pg_run(s, P_RENEW, &p, "renewing leases")) == NULL)
		err = s->code;
	PQclear(res);
	pg_arr_free(&qa);
	pg_arr_free(&ia);
	return err;
nomem:
	pg_arr_free(&qa);
	pg_arr_free(&ia);
	return pg_errf(s, SAKER_ENOMEM, "out of memory");
}

/* Warnings about a held horizon again while it lasts, this often. */
#define PG_HORIZON_REWARN_MS 300000

/*
 * What VACUUM waits behind, read once a tick for store_stats (P_HORIZON),
 * and a warning (the tick's error) when the oldest snapshot of the
 * database passes horizon_warn=, again every 5 minutes while it lasts:
 * the store keeps its speed (the low-water marks), but every consumed
 * item stays on disk until that transaction ends.
 */
static int
pg_horizon_tick(struct pg_store *s, int64_t now_ms)
{
	PGresult *res;

	if ((res = pg_run(s, P_HORIZON, NULL, "reading the xmin horizon")) ==
	    NULL)
		return s->code;
	if (PQntuples(res) > 0) {
		s->horizon_ms = pg_rv_i64(res, 0, 0);
		s->horizon_xids = pg_rv_i64(res, 0, 1);
		s->dead_rows = pg_rv_i64(res, 0, 2);
	}
	PQclear(res);
	if (s->horizon_warn_ms == 0 || s->horizon_ms < s->horizon_warn_ms) {
		s->horizon_warned = 0;
		return SAKER_OK;
	}
	if (s->horizon_warned != 0 &&
	    now_ms - s->horizon_warned < PG_HORIZON_REWARN_MS)
		return SAKER_OK;
	s->horizon_warned = now_ms;
	return pg_errf(s, SAKER_EIO, "postgres: a transaction of the database"
	    " has held a snapshot for %" PRId64 " s (oldest xmin %" PRId64
	    " transactions back): VACUUM cannot remove the %" PRId64 " dead"
	    " rows of saker_items, the store grows with every item consumed"
	    " until it ends (pg_stat_activity: idle in transaction, long"
	    " queries; docs/scaling.md)", s->horizon_ms / 1000,
	    s->horizon_xids, s->dead_rows);
}

int
pg_tick(saker_store *base, int64_t now_ms)
{
	struct pg_store *s = PG(base);
	struct saker_queue *q, *next;
	struct pgp p;
	PGresult *res;
	int i, err, r;

	if (s->read_only)
		return SAKER_OK;
	err = pg_links(s, now_ms);
	if (s->conn == NULL) {
		struct pg_link *l = &s->links[PG_L_MAIN];

		/* reconnect without waiting: the socket is watched, and
		 * fd_ready() or the next tick goes on */
		if (l->c != NULL || now_ms < s->retry_at)
			return err;
		s->attempt_at = now_ms;
		r = pg_link_start(s, l, s->wait_ns);
		if (r == SAKER_OK && (r = pg_link_step(s, l)) > 0)
			r = pg_main_up(s) == SAKER_OK ? 1 : -1;
		if (r < 0 && (r = pg_attempt_failed(s, now_ms)) != SAKER_OK)
			return r;
		return err;
	}
	if (err != SAKER_OK)
		return err;
	if (s->lost)
		return SAKER_OK;
	/* claimed items nobody took for a while go back to the queue */
	for (q = LIST_FIRST(&s->holding); q != NULL; q = next) {
		next = LIST_NEXT(q, held_link);
		if (now_ms - q->held_used_ms >= PG_HELD_IDLE_MS &&
		    ((err = pg_begin(s)) != SAKER_OK ||
		    (err = pg_held_return(s, q)) != SAKER_OK))
			return err;
	}
	/* renew our leases well before they run out */
	if ((s->open.n > 0 || s->nheld > 0) &&
	    now_ms - s->renewed_at >= s->lease_ms / 4) {
		if ((err = pg_begin(s)) != SAKER_OK)
			return err;
		if ((err = pg_renew(s)) != SAKER_OK)
			return err;
		s->renewed_at = now_ms;
		/* counts once the batch commits */
		s->renew_at = now_ms;
	}
	/* return the leases of brokers that died: those that ran out since
	 * the last sweep (less a margin for batches that committed late);
	 * all of them at the first tick and every PG_SWEEP_FULL_MS, in case
	 * one was skipped (locked by a batch that then rolled back), but
	 * not while a snapshot is held or many dead rows wait for VACUUM:
	 * it would step over every dead lease entry (a 5-minute held run
	 * timed out a commit) */
	if ((err = pg_begin(s)) != SAKER_OK)
		return err;
	memset(&p, 0, sizeof(p));
	if (s->sweep_full_at == 0 || (now_ms - s->sweep_full_at >=
	    PG_SWEEP_FULL_MS && s->horizon_ms >= 0 &&
	    s->horizon_ms < PG_HORIZON_VACUUM_MS && s->dead_rows >= 0 &&
	    s->dead_rows < PG_SWEEP_FULL_DEAD)) {
		s->sweep_full_at = now_ms;
		s->sweep_from = INT64_MIN;
	}
	pg_pp_i64(&p, s->sweep_from);
	if ((res = pg_run(s, P_SWEEP, &p, "returning expired leases")) == NULL)
		return s->code;
	for (i = 0; i < PQntuples(res); i++) {
		if (pg_rv_i64(res, i, 0) == 0) {
			/* a claim committed up to timeout= after its lease
			 * started: a lease longer than that has run out only
			 * after its row became visible */
			s->sweep_from = pg_rv_i64(res, i, 1) - PG_SWEEP_MARGIN_MS -
			    (s->lease_ms > s->timeout_ms + PG_SWEEP_MARGIN_MS ?
			    0 : s->timeout_ms);
			continue;
		}
		q = pg_find_id(s, pg_rv_i64(res, i, 0));
		if (q != NULL)
			pg_gained(s, q);
	}
	PQclear(res);
	/* last: their failures (warnings) must not skip the work above */
	r = pg_horizon_tick(s, now_ms);
	if (s->lost || s->conn == NULL)
		return r;
	err = pg_vacuum_tick(s, now_ms);
	return err != SAKER_OK ? err : r;
}
