/* pg_lease.c -- the PostgreSQL driver's leases: the open items this
 * broker holds, items claimed ahead, lease renewal and the sweep of dead
 * brokers' leases (tick), the VACUUM connection and what it waits behind
 * (the xmin horizon), and a new statement session handing back what the
 * lost one held (pg_main_up). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_batch.h"
#include "pg_damaged.h"
#include "pg_item.h"
#include "pg_lease.h"
#include "pg_queue.h"
#include "pg_sql.h"
#include "pg_wire.h"

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

/* Remove id if it is held on queue qid; true if it was. */
bool
pg_os_take(struct intmap *o, uint64_t id, int64_t qid)
{
	uint64_t v = intmap_get_u64(o, id);

	if (v == 0 || v != (uint64_t)qid)
		return false;
	(void)intmap_del_u64(o, id);
	return true;
}

/* ---- claim ahead ---- */

/* Items claimed ahead are served only while their lease is surely ours:
 * renewals run every lease/4, so missing 3/4 of a lease means trouble. */
bool
pg_lease_ok(const struct pg_store *s, int64_t now_ms)
{
	return now_ms < s->lease_floor + s->lease_ms - s->lease_ms / 4;
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

/* Serve a take from the claimed items; SAKER_EEMPTY when they ran out. */
int
pg_take_held(struct pg_store *s, struct saker_queue *q, int mode,
    int64_t now_ms, saker_item_fn fn, void *arg)
{
	struct saker_item it;
	int64_t expires;
	uint64_t id;
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
			pg_row_item(q->held, row, &it, SAKER_ITEM_READY);
			if ((err = pg_expired_item(s, q, &it, now_ms)) !=
			    SAKER_OK)
				return err;
			pg_del_add(s, q->id, id);
			saker_store_account(&s->base, q, SAKER_ITEM_READY,
			    SAKER_ITEM_NONE, it.len);
			q->held_head++;
			s->nheld--;
			continue;
		}
		if (mode == SAKER_TAKE_OPEN && intmap_put_u64(&s->open, id,
		    (uint64_t)q->id) != 0)
			return pg_errf(s, SAKER_ENOMEM, "out of memory");
		pg_row_item(q->held, row, &it, SAKER_ITEM_READY);
		/* the layer's count (store.h, DELIVERY COUNTS); P_SETSTATE
		 * stores the same one with the open item in this batch */
		if (mode == SAKER_TAKE_OPEN)
			it.deliveries = saker_store_handout(it.deliveries);
		r = fn(arg, &it);
		if (r != 0) {
			/* refused: it stays first in line */
			if (mode == SAKER_TAKE_OPEN)
				(void)pg_os_take(&s->open, id, q->id);
			return r;
		}
		if (mode == SAKER_TAKE_REMOVE) {
			pg_del_add(s, q->id, id);
			pg_bid_out(s, q->id, &it);
		} else if ((err = pg_st_open(s, q->id, id, it.deliveries)) !=
		    SAKER_OK) {
			/* the core does not send an item whose take failed */
			(void)pg_os_take(&s->open, id, q->id);
			return err;
		}
		saker_store_account(&s->base, q, SAKER_ITEM_READY,
		    mode == SAKER_TAKE_OPEN ? SAKER_ITEM_OPEN : SAKER_ITEM_NONE,
		    it.len);
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

/* The segments' rotation (saker_rotate(), pg_vacuum_tick()) is tried
 * this often; after a failure, again this much later.  At most
 * PG_SEG_MOVE_MAX ready and delayed items are moved forward out of the
 * segment to be emptied per call: more wait for the next one (it is
 * emptied when none is left), and its locks stay short. */
#define PG_ROTATE_MS 1000
#define PG_ROTATE_RETRY_MS 60000
#define PG_SEG_MOVE_MAX 5000

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

/* A column of a text result (a simple query's) as a number: -1 if it is
 * not one. */
static int64_t
pg_text_i64(const PGresult *res, int col)
{
	const char *t = PQgetvalue(res, 0, col);
	char *end;
	long long v;

	errno = 0;
	v = strtoll(t, &end, 10);
	if (PQgetisnull(res, 0, col) || end == t || *end != '\0' ||
	    errno == ERANGE)
		return -1;
	return (int64_t)v;
}

/* A result of saker_rotate() on the VACUUM link (pg_seg_tick()). */
static void
pg_rotated(struct pg_store *s, const PGresult *res)
{
	int64_t moved;

	if (PQntuples(res) < 1 || PQnfields(res) < 4)
		return;
	s->seg_due = pg_text_i64(res, 0) != 0;
	if ((moved = pg_text_i64(res, 1)) > 0)
		s->seg_moved += (uint64_t)moved;
	s->seg_cur = pg_text_i64(res, 2);
	s->seg_truncated = pg_text_i64(res, 3);
}

int
pg_vacuum_tick(struct pg_store *s, int64_t now_ms)
{
	struct pg_link *l = &s->links[PG_L_VACUUM];
	PGresult *res;
	char line[300] = "", sql[256];
	bool vac_due, rot_due;
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
				if (!s->rotating)
					s->vacuum_at = now_ms + (s->horizon_ms >=
					    PG_HORIZON_VACUUM_MS && s->vacuum_ms <
					    PG_HORIZON_VACUUM_MS ?
					    PG_HORIZON_VACUUM_MS : s->vacuum_ms);
				break;
			}
			if (PQresultStatus(res) == PGRES_TUPLES_OK && s->rotating)
				pg_rotated(s, res);
			else if (PQresultStatus(res) != PGRES_COMMAND_OK)
				pg_oneline(line, sizeof(line),
				    PQresultErrorMessage(res));
			PQclear(res);
		}
		if (line[0] != '\0' && s->rotating) {
			/* told once a minute at most; tried again then */
			s->rot_at = now_ms + PG_ROTATE_RETRY_MS;
			if (s->vacuuming)
				pg_vacuum_drop(s, now_ms);
			return pg_errf(s, SAKER_EIO, "postgres: rotating the"
			    " segments of saker_items failed, tried again in a"
			    " minute: %s", line);
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
	vac_due = s->vacuum_ms != 0 && s->conn != NULL &&
	    s->commits != s->vacuum_commits && now_ms >= s->vacuum_at;
	rot_due = s->version >= 7 && s->conn != NULL && now_ms >= s->rot_at;
	if (l->c == NULL && !vac_due && !rot_due)
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
	/* this session has no search_path of ours: the schema is named
	 * (it was checked to need no quoting beyond this) */
	/* both due: they take turns, a rotation every tick would starve
	 * the VACUUMs */
	if (vac_due && s->rotating)
		rot_due = false;
	if (rot_due)
		snprintf(sql, sizeof(sql), "SELECT * FROM %s%s%ssaker_rotate(%"
		    PRId64 ", %" PRId64 ", %d)", s->schema != NULL ? "\"" : "",
		    s->schema != NULL ? s->schema : "", s->schema != NULL ?
		    "\"." : "", s->seg_rows, s->seg_ms, PG_SEG_MOVE_MAX);
	else if (vac_due)
		snprintf(sql, sizeof(sql), "VACUUM %s%s%s%ssaker_items",
		    PQserverVersion(l->c) >= 120000 ? "(SKIP_LOCKED) " : "",
		    s->schema != NULL ? "\"" : "", s->schema != NULL ?
		    s->schema : "", s->schema != NULL ? "\"." : "");
	else
		return SAKER_OK;
	if (!PQsendQuery(l->c, sql)) {
		pg_vacuum_drop(s, now_ms);
		return SAKER_OK;
	}
	(void)PQflush(l->c);
	s->vacuuming = true;
	s->rotating = rot_due;
	if (rot_due)
		s->rot_at = now_ms + PG_ROTATE_MS;	/* every tick */
	else
		s->vacuum_commits = s->commits;
	return SAKER_OK;
}

/* The VACUUM link's part of pg_links(): a connection being made or a
 * VACUUM under way advances, a link the server closed is dropped. */
void
pg_vacuum_poll(struct pg_store *s, int64_t now_ms)
{
	struct pg_link *l;

	l = &s->links[PG_L_VACUUM];
	if (l->c != NULL && (!l->up || s->vacuuming))
		(void)pg_vacuum_tick(s, now_ms);
	else if (l->up && pg_readable(l->c) && (!PQconsumeInput(l->c) ||
	    PQstatus(l->c) == CONNECTION_BAD))
		pg_vacuum_drop(s, now_ms);
}

/*
 * The rows that commits which got no answer deleted (pg_gone_end): the
 * core handed those items out (store.h, SAKER_EINDOUBT), so whether the
 * COMMIT happened or not, they must not be served again.  Deleted now if
 * still there, ready or still ours; a row another broker has opened since
 * (its lease ran out first) stays with it.  Before anything is served.
 */
static int
pg_doubt_redo(struct pg_store *s)
{
	struct pg_arr qa = { .oid = OID_INT8 }, ia = { .oid = OID_INT8 };
	struct saker_queue *q;
	struct pgp p = { 0 };
	PGresult *res;
	size_t k;
	int i, err = SAKER_OK;

	for (k = 0; k < s->ndids; k++) {
		const struct pg_bid *b = &s->dids[k];

		memset(&p, 0, sizeof(p));
		pg_pp_bin(&p, b->name, b->nlen);
		pg_pp_bin(&p, b->key, b->klen);
		pg_pp_i64(&p, b->expires);
		pg_pp_i64(&p, b->now);
		if ((res = pg_run(s, P_D_PUT, &p, "recording the id of an item"
		    " a commit without an answer handed out")) == NULL)
			return s->code;
		PQclear(res);
	}
	s->ndids = 0;
	memset(&p, 0, sizeof(p));
	if (s->ndoubt == 0)
		return SAKER_OK;
	if (!pg_arr_reserve(&qa, 12 * s->ndoubt / 2) ||
	    !pg_arr_reserve(&ia, 12 * s->ndoubt / 2)) {
		err = pg_errf(s, SAKER_ENOMEM, "out of memory");
		goto out;
	}
	for (k = 0; k + 1 < s->ndoubt; k += 2) {
		pg_arr_i64(&qa, s->doubt[k]);
		pg_arr_i64(&ia, s->doubt[k + 1]);
	}
	pg_pp_arr(&p, &qa);
	pg_pp_arr(&p, &ia);
	pg_pp_str(&p, s->owner);
	/* A ready row is moved forward by saker_rotate() as a DELETE and an
	 * INSERT: a DELETE by key whose snapshot predates the move's COMMIT
	 * finds the old row gone and skips it, and never sees the new one
	 * (READ COMMITTED), so the item would be served again.  The
	 * rotation's lock, shared, in a statement of its own: no move is
	 * under way once it is held, and the next statement's snapshot sees
	 * every move that committed before. */
	if ((err = pg_simple(s, "BEGIN", "begin")) != SAKER_OK)
		goto out;
	if ((err = pg_simple(s, "SELECT pg_advisory_xact_lock_shared("
	    PG_LOCK_ROTATE ")", "waiting for a segment rotation")) !=
	    SAKER_OK)
		goto rollback;
	if ((res = pg_run(s, P_DOUBT_DELS, &p, "deleting the items a commit"
	    " without an answer handed out")) == NULL) {
		err = s->code;
		goto rollback;
	}
	if ((err = pg_simple(s, "COMMIT", "deleting the items a commit"
	    " without an answer handed out")) != SAKER_OK) {
		PQclear(res);
		goto out;
	}
	for (i = 0; i < PQntuples(res); i++)
		if ((q = pg_find_id(s, pg_rv_i64(res, i, 0))) != NULL)
			saker_store_recount(&s->base, q);
	PQclear(res);
	s->ndoubt = 0;
	goto out;
rollback:
	/* the session stays usable; the error is the one above */
	if (s->conn != NULL)
		PQclear(pg_exec(s, "ROLLBACK"));
out:
	pg_arr_free(&qa);
	pg_arr_free(&ia);
	return err;
}

/* The statement connection just connected: set it up (one bounded
 * round trip), hand back what the old session held. */
int
pg_main_up(struct pg_store *s)
{
	struct pg_link *l = &s->links[PG_L_MAIN];

	s->conn = l->c;
	if (pg_prepare_all(s) != SAKER_OK) {
		pg_link_drop(s, l, true);
		return s->code;
	}
	l->up = true;
	intmap_clear(&s->open);
	if (!s->read_only) {
		struct pgp p = { 0 };
		struct saker_queue *q;
		PGresult *res;
		int i, err;

		if ((err = pg_doubt_redo(s)) != SAKER_OK)
			return err;
		/* Everything else the lost session held goes back to its
		 * queue now, claimed ahead and open alike (at least once):
		 * which of the open ones' clients are still there is
		 * unknown, and a lease this broker kept renewing would never
		 * run out. */
		pg_pp_str(&p, s->owner);
		if ((res = pg_run(s, P_RELEASE_ALL, &p, "returning open and"
		    " claimed items")) == NULL)
			return s->code;
		for (i = 0; i < PQntuples(res); i++)
			if ((q = pg_find_id(s, pg_rv_i64(res, i, 0))) != NULL)
				pg_gained(s, q);
		PQclear(res);
	}
	if (s->conn == NULL)
		return s->code;
	s->down_why[0] = '\0';
	s->down_said = false;
	s->lretry_at = 0;
	if (s->opened)
		s->reconnects++;
	/* waiters look again: what they missed is there to take */
	pg_notify_all(s);
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
	uint64_t id, qid;
	size_t k = 0;
	int i, err = SAKER_OK;

	while (intmap_next_u64(&s->open, &k, &id, &qid)) {
		if (!pg_arr_reserve(&qa, 12) || !pg_arr_reserve(&ia, 12))
			goto nomem;
		pg_arr_i64(&qa, (int64_t)qid);
		pg_arr_i64(&ia, (int64_t)id);
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

/*
 * The segments (format 7; pg_sql.c, PG_ROTATE_FN): saker_rotate() runs
 * on the VACUUM link (pg_vacuum_tick(): its TRUNCATE's lock must not
 * fail a batch, nor its wait stall the loop).  While a rotation is due,
 * this broker moves its own held rows out of the segment to be emptied,
 * in the batch: its confirms and renewals run on this connection, so
 * none of them misses a row that moved.
 */
static int
pg_seg_tick(struct pg_store *s)
{
	struct pgp p;
	PGresult *res;

	if (s->version < 7 || !s->seg_due || s->seg_cur < 0 ||
	    (s->open.n == 0 && s->nheld == 0))
		return SAKER_OK;
	s->seg_due = false;	/* until the next call says so again */
	memset(&p, 0, sizeof(p));
	pg_pp_str(&p, s->owner);
	pg_pp_i64(&p, s->seg_cur);
	if (pg_begin(s) != SAKER_OK || (res = pg_run(s, P_SEG_MINE, &p,
	    "moving held items to the current segment")) == NULL)
		return s->code;
	s->seg_moved += pg_rv_changed(res);
	PQclear(res);
	return SAKER_OK;
}

int
pg_tick(saker_store *base, int64_t now_ms)
{
	struct pg_store *s = PG(base);
	struct saker_queue *q, *next;
	struct pgp p;
	PGresult *res;
	bool sure;
	int i, err, r;

	if (s->read_only)
		return SAKER_OK;
	/* a batch in flight into a silent server: given up as a round trip
	 * would be, without the loop waiting for it */
	if (pg_flight_watch(s, s->fl.t0))
		pg_flight_wait(s);
	err = pg_links(s, now_ms);
	pg_vacuum_poll(s, now_ms);
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
	if (saker_store_is_lost(&s->base))
		return SAKER_OK;
	/* the tick's statements would wait for a batch in flight that is
	 * overdue (the probe's wait, on the loop): the next tick runs them,
	 * waiting if need be (a slow COMMIT every turn must not starve the
	 * lease renewals) */
	if (pg_flight_overdue(s) && !s->fl.skipped) {
		s->fl.skipped = true;
		return SAKER_OK;
	}
	s->fl.skipped = false;
	if ((err = pg_seg_tick(s)) != SAKER_OK)
		return err;
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
	/* A held row its owner moves to the current segment (P_SEG_MINE) is
	 * a DELETE and an INSERT: a sweep whose snapshot predates the move's
	 * COMMIT skips the old row and never sees the new one.  The moves'
	 * lock, shared, in a statement before the sweep's: with it no move
	 * is under way nor can start before this batch ends; without it the
	 * sweep gives back what it sees but does not move on, so the next one
	 * covers the same leases again. */
	memset(&p, 0, sizeof(p));
	if ((res = pg_run(s, P_SWEEP_LOCK, &p, "returning expired leases"))
	    == NULL)
		return s->code;
	sure = PQntuples(res) == 1 && pg_rv_i64(res, 0, 0) == 1;
	PQclear(res);
	memset(&p, 0, sizeof(p));
	pg_pp_i64(&p, s->sweep_from);
	if ((res = pg_run(s, P_SWEEP, &p, "returning expired leases")) == NULL)
		return s->code;
	for (i = 0; i < PQntuples(res); i++) {
		if (pg_rv_i64(res, i, 0) == 0) {
			if (!sure)
				continue;
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
	if (saker_store_is_lost(&s->base) || s->conn == NULL)
		return r;
	err = pg_vacuum_tick(s, now_ms);
	return err != SAKER_OK ? err : r;
}

int
pg_fd_ready(saker_store *base, int64_t now_ms)
{
	struct pg_store *s = PG(base);
	int err;

	if (s->read_only)
		return SAKER_OK;
	if (pg_flight_watch(s, s->fl.t0))
		pg_flight_wait(s);
	err = pg_links(s, now_ms);
	pg_vacuum_poll(s, now_ms);
	return err;
}
