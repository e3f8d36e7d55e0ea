/* postgres.c -- the PostgreSQL queue store: several brokers over one database. */
#include "config.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "hash.h"
#include "kit.h"
#include "pg_batch.h"
#include "pg_conninfo.h"
#include "pg_damaged.h"
#include "pg_item.h"
#include "pg_lease.h"
#include "pg_queue.h"
#include "pg_sql.h"
#include "pg_wire.h"
#include "postgres.h"

/* PostgreSQL's largest field value is 1 GB less one byte (MaxAllocSize)
 * including its 4-byte header; keep a little more aside for the wire. */
#define PG_MAX_ITEM ((uint64_t)0x3fffffff - 64)
#define PG_LEASE_MS 60000
/* Default of the timeout= option: the longest the broker waits for a
 * sign of life from the database, in a round trip or connecting. */
#define PG_TIMEOUT_MS 2000
/* Default of the probe= option (pg_next()) */
#define PG_PROBE_MS 250
/* open() may wait longer: nothing else is running yet, and brokers
 * starting together wait for each other's schema lock. */
#define PG_OPEN_TIMEOUT_MS 10000
/* Default of the vacuum= option: the broker's own VACUUM of saker_items
 * at most this often, while it writes (pg_vacuum_tick()). */
#define PG_VACUUM_MS 1000
/* Defaults of the segment= and segment_rows= options (pg_seg_tick()):
 * 10 s keeps a rotation's lock attempt (at most 50 ms of waiting for
 * every statement on saker_items) rare, and with 4 segments an item
 * consumed within 30 s is never moved; 50,000 puts bound a segment of a
 * busy store to some 20 MB, so about 80 MB of consumed items at most. */
#define PG_SEG_MS 10000
#define PG_SEG_ROWS 50000
/* Default of the horizon_warn= option (pg_horizon_tick()). */
#define PG_HORIZON_WARN_MS 60000

/*
 * Layout (docs/scaling.md has the full story):
 *   saker_meta(key, value)          format version
 *   saker_queues(id, name)          one row per queue
 *   saker_items(qid, id, ..., seg)  every item: ready, delayed, open;
 *                                   in 4 segments emptied by TRUNCATE
 *   saker_counts(qid, owner, ...)   total/expired counters, one row per
 *                                   queue and broker, summed when read
 *   saker_dedup(queue, key, ...)    deduplication ids, by queue name
 *
 * An item is visible when state = 0 and due <= now (due 0: at once).
 * Visible items are ordered by (vis, id): vis is the put time of a ready
 * item and the due time of a delayed one, so a delayed item joins the
 * tail when it falls due without any promotion step.  An open item has
 * state 1, a lease owner (this broker's identity, unique per process
 * start) and a lease expiry on the database clock; live brokers renew
 * their leases every tick and any broker returns expired ones.
 *
 * Statements that change items run inside the batch transaction, so one
 * COMMIT per loop turn makes a whole batch durable (group commit).  After
 * any failed statement PostgreSQL refuses the rest of the transaction:
 * the driver rolls the batch back at once and fails the next commit().
 */

/* ------------------------------------------------------------------ */
/* queue tables */

static struct saker_queue *
pg_queue_new(struct pg_store *s, const char *name, size_t len, int64_t id)
{
	struct saker_queue *q;

	q = calloc(1, sizeof(*q) + len);
	if (q == NULL)
		return NULL;
	memcpy(q->name, name, len);
	q->len = len;
	q->id = id;
	q->qe.name = q->name;
	q->qe.len = len;
	q->qe.id = id;
	q->lo_vis = INT64_MIN;	/* the database's default mark */
	if (kit_qtab_add(&s->qt, &q->qe) != 0) {
		free(q);
		return NULL;
	}
	return q;
}

/* ------------------------------------------------------------------ */
/* queues */

/* *id: the queue id statement `which` (P_Q_FIND, P_Q_CREATE) returns
 * for p, or left alone when it returns no row. */
static int
pg_qid(struct pg_store *s, int which, const struct pgp *p, const char *what,
    int64_t *id)
{
	PGresult *res;

	if ((res = pg_run(s, which, p, what)) == NULL)
		return s->code;
	if (PQntuples(res) > 0)
		*id = pg_rv_i64(res, 0, 0);
	PQclear(res);
	return SAKER_OK;
}

/* The id of queue `name` in the database, creating it when asked.
 * *id = 0 when it does not exist. */
static int
pg_resolve(struct pg_store *s, const char *name, size_t len, bool create,
    int64_t *id, bool *created)
{
	struct pgp p = { 0 };
	int err;

	*id = 0;
	*created = false;
	pg_pp_bin(&p, name, len);
	if ((err = pg_qid(s, P_Q_FIND, &p, "looking up queue", id)) !=
	    SAKER_OK || *id != 0 || !create)
		return err;
	if ((err = pg_begin(s)) != SAKER_OK ||
	    (err = pg_qid(s, P_Q_CREATE, &p, "creating queue", id)) != SAKER_OK)
		return err;
	*created = *id != 0;
	/* else another broker created it meanwhile */
	if (*id != 0 ||
	    (err = pg_qid(s, P_Q_FIND, &p, "looking up queue", id)) != SAKER_OK)
		return err;
	if (*id == 0)
		return pg_errf(s, SAKER_EIO, "postgres: queue vanished while"
		    " being created");
	return SAKER_OK;
}

static int
pg_queue_open(saker_store *base, const char *name, size_t len, bool create,
    void *queue_ctx, saker_queue **out)
{
	struct pg_store *s = PG(base);
	struct saker_queue *q;
	int64_t id;
	bool created;
	int err;

	*out = NULL;
	if (name == NULL || len == 0)
		return pg_errf(s, SAKER_EINVAL, "empty queue name");
	if ((q = pg_find_name(s, name, len)) != NULL) {
		if (queue_ctx != NULL)
			q->ctx = queue_ctx;
		*out = q;
		return SAKER_OK;
	}
	if (create && saker_store_is_lost(&s->base))
		return pg_begin(s);
	/* (read-only: the layer asks without create, and refuses a new
	 * queue itself) */
	err = pg_resolve(s, name, len, create && !s->read_only, &id, &created);
	if (err != SAKER_OK)
		return err;
	if (id == 0)
		return pg_errf(s, SAKER_ENOTFOUND, "no such queue");
	if ((q = pg_queue_new(s, name, len, id)) == NULL)
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	q->fresh = created;
	if (created)
		s->any_fresh = true;	/* (the next commit is synchronous) */
	q->ctx = queue_ctx;
	*out = q;
	return SAKER_OK;
}

static int
pg_exec_qid(struct pg_store *s, int which, int64_t qid, const char *what)
{
	struct pgp p = { 0 };
	PGresult *res;

	pg_pp_i64(&p, qid);
	if ((res = pg_run(s, which, &p, what)) == NULL)
		return s->code;
	PQclear(res);
	return SAKER_OK;
}

/* Every item of q goes, in the batch (flush, and the start of delete; a
 * failure loses the batch, which forgets the open and claimed sets).
 * After the rotation's lock (P_ROT_WAIT): a DELETE whose snapshot
 * predated a move forward would skip the moved item, which would
 * outlive the flush (docs/scaling.md, "Segments"). */
static int
pg_queue_empty(struct pg_store *s, struct saker_queue *q, const char *what)
{
	struct pgp p = { 0 };
	PGresult *res;
	int err;

	if ((err = pg_dead(s, q)) != SAKER_OK || (err = pg_begin(s)) != SAKER_OK)
		return err;
	if (s->version >= 7) {
		if ((res = pg_run(s, P_ROT_WAIT, &p, "waiting for a segment"
		    " rotation")) == NULL)
			return s->code;
		PQclear(res);
	}
	if ((err = pg_exec_qid(s, P_I_DELQ, q->id, what)) != SAKER_OK)
		return err;
	(void)intmap_del_value_u64(&s->open, (uint64_t)q->id);
	pg_held_drop(s, q);
	return SAKER_OK;
}

static int
pg_queue_delete(saker_store *base, saker_queue *q)
{
	struct pg_store *s = PG(base);
	struct pgp p = { 0 };
	PGresult *res;
	int err;

	if ((err = pg_queue_empty(s, q, "deleting items")) != SAKER_OK)
		return err;
	/* its deduplication ids go with it (a flush keeps them) */
	pg_pp_bin(&p, q->name, q->len);
	if ((res = pg_run(s, P_D_DELQ, &p, "deleting ids")) == NULL)
		return s->code;
	PQclear(res);
	if ((err = pg_exec_qid(s, P_C_DELQ, q->id, "deleting counters")) !=
	    SAKER_OK ||
	    (err = pg_exec_qid(s, P_Q_DELETE, q->id, "deleting queue")) !=
	    SAKER_OK)
		return err;
	pg_unlist(q);
	kit_qtab_remove(&s->qt, &q->qe);
	q->dead = true;
	q->fresh = false;
	LIST_INSERT_HEAD(&s->deleted, q, gone_link);
	return SAKER_OK;
}

static int
pg_queue_flush(saker_store *base, saker_queue *q)
{
	return pg_queue_empty(PG(base), q, "flushing queue");
}

static int
pg_queues(saker_store *base, saker_queue_name_fn fn, void *arg)
{
	struct pg_store *s = PG(base);
	PGresult *res;
	int i, r = 0;

	if ((res = pg_run(s, P_Q_LIST, NULL, "listing queues")) == NULL)
		return s->code;
	for (i = 0; i < PQntuples(res) && r == 0; i++)
		r = fn(arg, PQgetvalue(res, i, 0), (size_t)PQgetlength(res, i, 0));
	PQclear(res);
	return r;
}

/*
 * The one row the database answers about live queue q: P_STATS and
 * P_QCOUNT by its id at the newest time seen, P_D_COUNT by its name
 * (saker_dedup is by name; a store before format 6, opened read-only,
 * has none: no row).  *res is NULL when there is no row.
 */
static int
pg_queue_row(struct pg_store *s, saker_queue *q, int which, const char *what,
    PGresult **res)
{
	struct pgp p = { 0 };
	int err;

	*res = NULL;
	if ((err = pg_dead(s, q)) != SAKER_OK)
		return err;
	if (which == P_D_COUNT && s->version < 6)
		return SAKER_OK;
	if (which == P_D_COUNT) {
		pg_pp_bin(&p, q->name, q->len);
	} else {
		pg_pp_i64(&p, q->id);
		pg_pp_i64(&p, s->last_now);
	}
	if ((*res = pg_run(s, which, &p, what)) == NULL)
		return s->code;
	if (PQntuples(*res) == 0) {
		PQclear(*res);
		*res = NULL;
	}
	return SAKER_OK;
}

static int
pg_queue_stats(saker_store *base, saker_queue *q, struct saker_queue_stats *st)
{
	PGresult *res;
	int err;

	memset(st, 0, sizeof(*st));
	err = pg_queue_row(PG(base), q, P_STATS, "reading queue stats", &res);
	if (res != NULL) {
		st->total_items = (uint64_t)(pg_rv_i64(res, 0, 0) + q->d_total);
		st->expired_items = (uint64_t)(pg_rv_i64(res, 0, 1) + q->d_expired);
		st->head_created_ms = pg_rv_i64(res, 0, 2);
		PQclear(res);
	}
	return err;
}

/* The layer's recount (store.h, queue_count): a scan of the queue's rows,
 * at most once a second per queue whose counters are read. */
static int
pg_queue_count(saker_store *base, saker_queue *q, struct saker_queue_stats *st)
{
	PGresult *res;
	int err;

	err = pg_queue_row(PG(base), q, P_QCOUNT, "counting queue items", &res);
	if (res != NULL) {
		st->items = (uint64_t)pg_rv_i64(res, 0, 0);
		st->bytes = (uint64_t)pg_rv_i64(res, 0, 1);
		st->delayed_items = (uint64_t)pg_rv_i64(res, 0, 2);
		st->open_items = (uint64_t)pg_rv_i64(res, 0, 3);
		PQclear(res);
	}
	return err;
}

/* ------------------------------------------------------------------ */
/* items */

static int
pg_del1(struct pg_store *s, struct saker_queue *q, int64_t id)
{
	struct pgp p = { 0 };
	PGresult *res;

	pg_pp_i64(&p, q->id);
	pg_pp_i64(&p, id);
	if ((res = pg_run(s, P_DEL1, &p, "dropping expired item")) == NULL)
		return s->code;
	PQclear(res);
	return SAKER_OK;
}

/* One item by one statement: the quiet path (claim size 1) and peek. */
static int
pg_take_one(struct pg_store *s, struct saker_queue *q, int mode,
    int64_t now_ms, saker_item_fn fn, void *arg)
{
	struct saker_item it;
	struct pgp p;
	PGresult *res;
	int64_t expires;
	int err, r, which;

	if (mode == SAKER_TAKE_OPEN && s->nheld == 0 && s->open.n == 0)
		s->lease_floor = now_ms;
	which = mode == SAKER_TAKE_REMOVE ? P_TAKE_REMOVE :
	    mode == SAKER_TAKE_OPEN ? P_TAKE_OPEN : P_PEEK;
	for (;;) {
		pg_head_params(s, q, &p, now_ms);
		if (mode == SAKER_TAKE_OPEN) {
			pg_pp_str(&p, s->owner);
			pg_pp_i64(&p, s->lease_ms);
		}
		if ((res = pg_run(s, which, &p, "taking item")) == NULL)
			return s->code;
		if (PQntuples(res) == 0) {
			PQclear(res);
			if (s->in_txn)
				q->empty_gen = s->txn_gen;
			return SAKER_EEMPTY;
		}
		expires = pg_rv_i64(res, 0, 2);
		if (mode != SAKER_TAKE_PEEK)
			pg_hint(s, q, res, 0);
		/* checked before the expiry: damage there must not drop it */
		if (!pg_row_sound(res, 0))
			return pg_take_damaged(s, q, mode, res, now_ms);
		if (expires == 0 || expires > now_ms)
			break;
		/* expired at the head: the layer drops or routes it and it
		 * leaves q in this batch (a peek's or an open's by P_DEL1), and
		 * the next one is looked at; if the layer fails, it is put back
		 * as it was */
		if (mode != SAKER_TAKE_REMOVE && !pg_writable(s)) {
			PQclear(res);
			return SAKER_EEMPTY;	/* cannot drop it: hide it */
		}
		pg_row_item(res, 0, &it, SAKER_ITEM_READY);
		/* P_TAKE_OPEN counted a delivery that never happened (at the
		 * cap the count it had is unknown: it stays there) */
		if (mode == SAKER_TAKE_OPEN && it.deliveries > 0 &&
		    it.deliveries < SAKER_DELIVERIES_MAX)
			it.deliveries--;
		if ((err = pg_begin(s)) != SAKER_OK ||
		    (err = pg_expired_item(s, q, &it, now_ms)) != SAKER_OK) {
			/* lost: the rollback put it back */
			if (!saker_store_is_lost(&s->base))
				(void)pg_head_back(s, q, mode, res);
			PQclear(res);
			return err;
		}
		if (mode != SAKER_TAKE_REMOVE &&
		    (err = pg_del1(s, q, (int64_t)it.id)) != SAKER_OK) {
			PQclear(res);
			return err;
		}
		saker_store_account(&s->base, q, SAKER_ITEM_READY,
		    SAKER_ITEM_NONE, it.len);
		if (mode != SAKER_TAKE_REMOVE)
			pg_hint(s, q, res, 0);
		PQclear(res);
	}
	pg_row_item(res, 0, &it, SAKER_ITEM_READY);
	r = fn(arg, &it);
	if (r != 0 && mode != SAKER_TAKE_PEEK)
		pg_unhint(q);
	if (r != 0)
		err = pg_head_back(s, q, mode, res);
	else if (mode == SAKER_TAKE_OPEN)
		err = intmap_put_u64(&s->open, it.id, (uint64_t)q->id) == 0 ? SAKER_OK :
		    pg_errf(s, SAKER_ENOMEM, "out of memory");
	else if (mode == SAKER_TAKE_REMOVE) {
		err = pg_gone_add(s, q->id, it.id);
		pg_bid_out(s, q->id, &it);
	}
	else
		err = SAKER_OK;
	if (r == 0 && err == SAKER_OK && mode != SAKER_TAKE_PEEK)
		saker_store_account(&s->base, q, SAKER_ITEM_READY,
		    mode == SAKER_TAKE_OPEN ? SAKER_ITEM_OPEN : SAKER_ITEM_NONE,
		    it.len);
	PQclear(res);
	if (err != SAKER_OK)
		return err;
	return r;
}

static int
pg_take(saker_store *base, saker_queue *q, int mode, int64_t now_ms,
    saker_item_fn fn, void *arg)
{
	struct pg_store *s = PG(base);
	int err, n;

	if ((err = pg_dead(s, q)) != SAKER_OK)
		return err;
	if (mode != SAKER_TAKE_REMOVE && mode != SAKER_TAKE_OPEN &&
	    mode != SAKER_TAKE_PEEK)
		return pg_errf(s, SAKER_EINVAL, "bad take mode");
	if (mode != SAKER_TAKE_PEEK && (err = pg_begin(s)) != SAKER_OK)
		return err;
	pg_saw(s, now_ms);
	if (mode == SAKER_TAKE_PEEK) {
		if (q->held != NULL &&
		    (err = pg_peek_held(s, q, now_ms, fn, arg)) != SAKER_EEMPTY)
			return err;
		return pg_take_one(s, q, mode, now_ms, fn, arg);
	}
	n = pg_claim_size(s, q);
	q->adv = true;
	if (!q->took) {
		LIST_INSERT_HEAD(&s->took, q, took_link);
		q->took = true;
	}
	/* the batch in flight may be claiming for this queue: its claim
	 * first, as if it had been synchronous */
	if (q->held == NULL && s->fl.on) {
		pg_flight_wait(s);
		if (saker_store_is_lost(&s->base))
			return pg_begin(s);	/* failed with the flight */
		n = pg_claim_size(s, q);
	}
	if (q->empty_gen == s->txn_gen && q->held == NULL)
		return SAKER_EEMPTY;
	for (;;) {
		if (q->held != NULL && !pg_lease_ok(s, now_ms) &&
		    (err = pg_held_return(s, q)) != SAKER_OK)
			return err;
		if (q->held != NULL) {
			err = pg_take_held(s, q, mode, now_ms, fn, arg);
			if (err != SAKER_EEMPTY)
				return err;
			continue;
		}
		if (n <= 1)
			return pg_take_one(s, q, mode, now_ms, fn, arg);
		if ((err = pg_claim(s, q, n, now_ms)) != SAKER_OK)
			return err;
	}
}

/* The checks every call on open item `id` of q starts with, then the
 * batch. */
static int
pg_open_begin(struct pg_store *s, struct saker_queue *q, uint64_t id)
{
	int err;

	if ((err = pg_dead(s, q)) != SAKER_OK)
		return err;
	if (id == 0 || id > (uint64_t)INT64_MAX)
		return pg_errf(s, SAKER_ENOTFOUND, "no such open item");
	return pg_begin(s);
}

static int
pg_confirm(saker_store *base, saker_queue *q, uint64_t id)
{
	struct pg_store *s = PG(base);
	struct pgp p = { 0 };
	int err;

	if ((err = pg_open_begin(s, q, id)) != SAKER_OK)
		return err;
	if (!pg_del_room(s))
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	/* the set mirrors the database's leases owned by this process */
	if (!pg_os_take(&s->open, id, q->id))
		return pg_errf(s, SAKER_ENOTFOUND, "no such open item");
	/* While the lease is surely ours the delete joins the batch's
	 * statement; otherwise ask now whether it still is. */
	if (pg_lease_ok(s, s->last_now)) {
		pg_del_add(s, q->id, id);
		saker_store_account(base, q, SAKER_ITEM_OPEN, SAKER_ITEM_NONE, 0);
		return SAKER_OK;
	}
	pg_pp_i64(&p, q->id);
	pg_pp_i64(&p, (int64_t)id);
	pg_pp_str(&p, s->owner);
	err = pg_run_leased(s, P_CONFIRM, &p, "confirming item", id,
	    "; it may be delivered again");
	/* a lost lease: no longer ours, not open here either */
	saker_store_account(base, q, SAKER_ITEM_OPEN, SAKER_ITEM_NONE, 0);
	if (err != SAKER_OK)
		saker_store_recount(base, q);
	return err;
}

static int
pg_release(saker_store *base, saker_queue *q, uint64_t id)
{
	struct pg_store *s = PG(base);
	int err;

	if ((err = pg_open_begin(s, q, id)) != SAKER_OK)
		return err;
	if (!pg_os_take(&s->open, id, q->id))
		return pg_errf(s, SAKER_ENOTFOUND, "no such open item");
	/* the released item goes before the claimed ones: all of them go
	 * back to the database's FIFO in their places */
	if ((err = pg_held_return(s, q)) != SAKER_OK ||
	    (intmap_get_u64(&s->st_ids, id) != 0 && (err = pg_flush(s)) != SAKER_OK) ||
	    (err = pg_st_add(s, q->id, id, 0)) != SAKER_OK) {
		/* still open, unless the batch was lost (the set was reloaded
		 * from the database then) */
		if (!saker_store_is_lost(&s->base))
			(void)intmap_put_u64(&s->open, id, (uint64_t)q->id);
		return err;
	}
	/* its size is not known here: the bytes are counted again */
	saker_store_account(base, q, SAKER_ITEM_OPEN, SAKER_ITEM_READY, 0);
	saker_store_recount(base, q);
	pg_gained(s, q);
	return SAKER_OK;
}

/* Take open item id of q out of this process's set, for a statement of
 * its own: a state change of it still in the batch's arrays goes first.
 * On failure it is still open (unless the batch was lost). */
static int
pg_open_take(struct pg_store *s, struct saker_queue *q, uint64_t id)
{
	int err;

	if (!pg_os_take(&s->open, id, q->id))
		return pg_errf(s, SAKER_ENOTFOUND, "no such open item");
	if (intmap_get_u64(&s->st_ids, id) != 0 && (err = pg_flush(s)) != SAKER_OK) {
		if (!saker_store_is_lost(&s->base))
			(void)intmap_put_u64(&s->open, id, (uint64_t)q->id);
		return err;
	}
	return SAKER_OK;
}

static int
pg_release_delayed(saker_store *base, saker_queue *q, uint64_t id,
    int64_t due_ms, int64_t now_ms)
{
	struct pg_store *s = PG(base);
	struct pgp p = { 0 };
	int err;

	if (due_ms <= now_ms)
		return pg_release(base, q, id);
	if ((err = pg_open_begin(s, q, id)) != SAKER_OK ||
	    (err = pg_open_take(s, q, id)) != SAKER_OK)
		return err;
	pg_pp_i64(&p, q->id);
	pg_pp_i64(&p, (int64_t)id);
	pg_pp_str(&p, s->owner);
	pg_pp_i64(&p, due_ms);
	err = pg_run_leased(s, P_DELAY, &p, "delaying item", id, "");
	saker_store_account(base, q, SAKER_ITEM_OPEN, err == SAKER_OK ?
	    SAKER_ITEM_DELAYED : SAKER_ITEM_NONE, 0);
	if (err != SAKER_OK)
		saker_store_recount(base, q);
	return err;
}

static int
pg_move(saker_store *base, saker_queue *q, uint64_t id, saker_queue *to)
{
	struct pg_store *s = PG(base);
	struct pgp p = { 0 };
	int64_t vis;
	int err;

	if ((err = pg_dead(s, to)) != SAKER_OK)
		return err;
	if (to == q)
		return pg_errf(s, SAKER_EINVAL, "move: same queue");
	if ((err = pg_open_begin(s, q, id)) != SAKER_OK ||
	    (err = pg_open_take(s, q, id)) != SAKER_OK)
		return err;
	vis = s->last_now > s->last_vis ? s->last_now : s->last_vis;
	s->last_vis = vis;
	pg_pp_i64(&p, q->id);
	pg_pp_i64(&p, (int64_t)id);
	pg_pp_str(&p, s->owner);
	pg_pp_i64(&p, to->id);
	pg_pp_i64(&p, vis);
	err = pg_run_leased(s, P_MOVE, &p, "moving item", id, "");
	saker_store_account(base, q, SAKER_ITEM_OPEN, SAKER_ITEM_NONE, 0);
	if (err != SAKER_OK) {
		saker_store_recount(base, q);
		return err;
	}
	/* its size is not known here: `to` is counted again */
	saker_store_account(base, to, SAKER_ITEM_NONE, SAKER_ITEM_READY, 0);
	saker_store_recount(base, to);
	pg_mark_dirty(s, to);
	to->d_total++;
	pg_gained(s, to);
	if (to->hint_gen == s->txn_gen && vis <= to->hint_vis)
		pg_unhint(to);
	return SAKER_OK;
}

static int
pg_promote(saker_store *base, int64_t now_ms, int64_t *next_due_ms)
{
	struct pg_store *s = PG(base);
	struct saker_queue *q;
	struct pg_pipe pp;
	struct pgp p = { 0 }, pn = { 0 };
	PGresult *res, *cr;
	int64_t qid;
	int err, i, prom = -1;

	*next_due_ms = 0;
	pg_saw(s, now_ms);
	/* The flight's answer is next on the connection: read it first (a
	 * pipeline sent behind it took it for its own, and the flight, which
	 * committed, came back failed).  One overdue is not waited for here,
	 * on the loop: tick() gives it up in time, and the next tick
	 * promotes. */
	if (pg_flight_overdue(s))
		return SAKER_OK;
	pg_flight_wait(s);
	if (s->conn == NULL)
		return SAKER_OK;	/* tick() promotes after the reconnect */
	pg_pipe_init(&pp);
	/* one round trip: pending writes, promotion, next due time */
	if (!s->read_only && !saker_store_is_lost(&s->base) &&
	    now_ms > s->promoted_to) {
		if ((err = pg_begin(s)) != SAKER_OK)
			return err;
		pg_send_pending(s, &pp);
		pg_pp_i64(&p, s->promoted_to);
		pg_pp_i64(&p, now_ms);
		prom = pp.n;
		pg_pipe_send(s, &pp, P_PROMOTE, NULL, &p, "promoting");
	} else {
		pg_send_pending(s, &pp);
	}
	pg_pp_i64(&pn, now_ms);
	pg_pipe_send(s, &pp, P_NEXT, NULL, &pn, "finding next due item");
	if (!pg_pipe_wait(s, &pp))
		return pg_pipe_fail(s, &pp);
	pg_pending_done(s, &pp);
	if (PQntuples(pp.res[pp.n - 1]) > 0)
		*next_due_ms = pg_rv_i64(pp.res[pp.n - 1], 0, 0);
	if (prom < 0) {
		pg_pipe_clear(&pp);
		return SAKER_OK;
	}
	s->promoted_to = now_ms;
	res = pp.res[prom];
	for (i = 0; i < PQntuples(res); i++) {
		qid = pg_rv_i64(res, i, 0);
		q = pg_find_id(s, qid);
		if (pg_rv_i64(res, i, 1) == 0) {
			/* n items of q fell due, with their bytes */
			if (q != NULL) {
				saker_store_account_n(&s->base, q,
				    SAKER_ITEM_DELAYED, SAKER_ITEM_READY,
				    (uint64_t)pg_rv_i64(res, i, 2),
				    (uint64_t)pg_rv_i64(res, i, 3));
				pg_gained(s, q);
			}
			continue;
		}
		if (q != NULL) {
			static const int cols[5] = { 2, 3, 4, 5, 6 };
			struct saker_item it;

			saker_store_account(&s->base, q, SAKER_ITEM_DELAYED,
			    SAKER_ITEM_NONE, 0);
			pg_row_view(res, i, cols, &it);
			if ((err = pg_expired_item(s, q, &it, now_ms)) !=
			    SAKER_OK) {
				pg_pipe_clear(&pp);
				return pg_expired_lost(s, q, err);
			}
			continue;
		}
		/* a queue this broker never opened (libpq copied p) */
		memset(&p, 0, sizeof(p));
		pg_pp_i64(&p, qid);
		pg_pp_str(&p, s->owner);
		pg_pp_i64(&p, 0);
		pg_pp_i64(&p, 1);
		if ((cr = pg_run(s, P_C_ADD, &p, "writing counters")) == NULL) {
			pg_pipe_clear(&pp);
			return s->code;
		}
		PQclear(cr);
	}
	pg_pipe_clear(&pp);
	return SAKER_OK;
}

static int
pg_flush_expired(saker_store *base, saker_queue *q, int64_t now_ms,
    uint64_t limit, uint64_t *removed)
{
	struct pg_store *s = PG(base);
	struct pgp p = { 0 };
	PGresult *res;
	int err;

	*removed = 0;
	if ((err = pg_dead(s, q)) != SAKER_OK || (err = pg_begin(s)) != SAKER_OK)
		return err;
	pg_saw(s, now_ms);
	pg_pp_i64(&p, q->id);
	pg_pp_i64(&p, now_ms);
	pg_pp_i64(&p, limit == 0 || limit > INT64_MAX ? INT64_MAX : (int64_t)limit);
	pg_pp_i64(&p, q->lo_vis);	/* from the low-water mark on */
	pg_pp_i64(&p, q->lo_id);
	if (saker_store_has_expire_to(q) && s->version >= 4) {
		static const int cols[5] = { 0, 1, 2, 3, 4 };
		struct saker_item it;
		int i;

		if ((res = pg_run(s, P_EXPIRE_GET, &p, "moving expired items")) ==
		    NULL)
			return s->code;
		for (i = 0; i < PQntuples(res); i++) {
			pg_row_view(res, i, cols, &it);
			saker_store_account(&s->base, q, SAKER_ITEM_READY,
			    SAKER_ITEM_NONE, it.len);
			if ((err = pg_expired_item(s, q, &it, now_ms)) !=
			    SAKER_OK) {
				PQclear(res);
				return pg_expired_lost(s, q, err);
			}
		}
		*removed = (uint64_t)PQntuples(res);
		PQclear(res);
		return SAKER_OK;
	}
	if ((res = pg_run(s, P_EXPIRE, &p, "dropping expired items")) == NULL)
		return s->code;
	*removed = PQntuples(res) > 0 ? (uint64_t)pg_rv_i64(res, 0, 0) : 0;
	if (*removed > 0) {
		pg_expired(s, q, (int64_t)*removed);
		saker_store_account_n(&s->base, q, SAKER_ITEM_READY,
		    SAKER_ITEM_NONE, *removed, (uint64_t)pg_rv_i64(res, 0, 1));
	}
	PQclear(res);
	return SAKER_OK;
}

/* Stream one listing to fn, a row at a time (queues can be large). */
static int
pg_iter_rows(struct pg_store *s, int which, struct saker_queue *q,
    saker_item_state state, saker_item_fn fn, void *arg)
{
	struct saker_item it;
	struct pgp p = { 0 };
	PGresult *res;
	ExecStatusType st;
	char name[16];
	int r = 0, err = SAKER_OK;

	if (s->conn == NULL)
		return pg_down(s);
	if ((err = pg_flush(s)) != SAKER_OK)
		return err;
	pg_pp_i64(&p, q->id);
	pg_pp_i64(&p, s->last_now);
	snprintf(name, sizeof(name), "s%d", which);
	if (!PQsendQueryPrepared(s->conn, name, which == P_IT_OPEN ? 1 : 2,
	    p.v, p.l, p.f, 1))
		return pg_fail(s, NULL, "reading items");
	(void)PQsetSingleRowMode(s->conn);
	pg_deadline(s);
	for (;;) {
		if (!pg_next(s, &res)) {
			/* no answer in time: the connection is dropped */
			if (err == SAKER_OK)
				err = pg_fail(s, NULL, "reading items");
			break;
		}
		if (res == NULL)
			break;
		st = PQresultStatus(res);
		if (st == PGRES_SINGLE_TUPLE) {
			if (r == 0 && !pg_row_sound(res, 0)) {
				/* never handed out; the rest is drained */
				r = pg_errf(s, SAKER_ECORRUPT, "queue '%.*s': item %"
				    PRId64 " failed its checksum", (int)q->len,
				    q->name, pg_rv_i64(res, 0, C_ID));
			} else if (r == 0) {
				pg_row_item(res, 0, &it, state);
				r = fn(arg, &it);
			}
		} else if (st != PGRES_TUPLES_OK && err == SAKER_OK) {
			/* keep the result for the message; drain the rest */
			bool txn = s->in_txn;

			s->in_txn = false;
			err = pg_fail(s, res, "reading items");
			s->in_txn = txn;
		}
		PQclear(res);
		if (s->conn == NULL)
			break;
		pg_deadline(s);	/* a long listing: per row */
	}
	/* libpq keeps single-row mode on until the next query that is not
	 * pipelined: the first statement of the next pipeline would get its
	 * rows one by one (and be taken for a failure).  An empty query
	 * ends it. */
	if (s->conn != NULL && PQstatus(s->conn) == CONNECTION_OK)
		PQclear(pg_exec(s, ""));
	if (err != SAKER_OK && s->in_txn)
		pg_lose_batch(s, err);
	if (err != SAKER_OK)
		return err;
	return r;
}

static int
pg_iterate(saker_store *base, saker_queue *q, saker_item_fn fn, void *arg)
{
	struct pg_store *s = PG(base);
	int r;

	if ((r = pg_dead(s, q)) != SAKER_OK)
		return r;
	if ((r = pg_iter_rows(s, P_IT_OPEN, q, SAKER_ITEM_OPEN, fn, arg)) != 0)
		return r;
	if ((r = pg_iter_rows(s, P_IT_READY, q, SAKER_ITEM_READY, fn, arg)) != 0)
		return r;
	return pg_iter_rows(s, P_IT_DELAYED, q, SAKER_ITEM_DELAYED, fn, arg);
}

/* ------------------------------------------------------------------ */
/* deduplication ids (store.h, DEDUPLICATION; P_D_PUT says how brokers
 * share them): statements of the batch that see none of its buffered
 * puts, so a set with an id adds one round trip and no other */

/* The batch, and the parameters every deduplication statement starts
 * with: the queue, and the key if `keyed`. */
static int
pg_dedup_begin(struct pg_store *s, struct saker_queue *q, bool keyed,
    const void *key, size_t len, struct pgp *p)
{
	int err;

	memset(p, 0, sizeof(*p));
	if ((err = pg_dead(s, q)) != SAKER_OK || (err = pg_begin(s)) != SAKER_OK)
		return err;
	pg_pp_bin(p, q->name, q->len);
	if (!keyed)
		return SAKER_OK;
	if (key == NULL || len == 0 || len > SAKER_DEDUP_KEY_MAX)
		return pg_errf(s, SAKER_EINVAL, "bad deduplication id");
	pg_pp_bin(p, key, len);
	return SAKER_OK;
}

static int
pg_dedup_put(saker_store *base, saker_queue *q, const void *key, size_t len,
    int64_t expires_ms, int64_t now_ms, bool *replaced)
{
	struct pg_store *s = PG(base);
	struct pgp p;
	PGresult *res;
	int err;

	*replaced = false;
	if ((err = pg_dedup_begin(s, q, true, key, len, &p)) != SAKER_OK)
		return err;
	pg_saw(s, now_ms);
	pg_pp_i64(&p, expires_ms);
	pg_pp_i64(&p, now_ms);
	if ((res = pg_run_alone(s, P_D_PUT, &p, "recording id")) == NULL)
		return s->code;
	err = PQntuples(res) == 0 ? SAKER_EEXIST : SAKER_OK;
	*replaced = err == SAKER_OK && pg_rv_i64(res, 0, 0) != 0;
	PQclear(res);
	if (err == SAKER_OK)
		pg_bid_add(s, q, key, len, expires_ms, now_ms);
	return err;
}

static int
pg_dedup_del(saker_store *base, saker_queue *q, const void *key, size_t len)
{
	struct pg_store *s = PG(base);
	struct pgp p;
	PGresult *res;
	uint64_t n;
	int err;

	if ((err = pg_dedup_begin(s, q, true, key, len, &p)) != SAKER_OK)
		return err;
	if ((res = pg_run_alone(s, P_D_DEL, &p, "removing id")) == NULL)
		return s->code;
	n = pg_rv_changed(res);
	PQclear(res);
	if (n > 0)
		pg_bid_del(s, q, key, len);
	return n > 0 ? SAKER_OK : pg_errf(s, SAKER_ENOTFOUND, "no such id");
}

static int
pg_dedup_sweep(saker_store *base, saker_queue *q, int64_t now_ms,
    uint64_t limit, uint64_t *removed)
{
	struct pg_store *s = PG(base);
	struct pgp p;
	PGresult *res;
	int err;

	*removed = 0;
	if ((err = pg_dedup_begin(s, q, false, NULL, 0, &p)) != SAKER_OK)
		return err;
	pg_saw(s, now_ms);
	pg_pp_i64(&p, now_ms);
	pg_pp_i64(&p, limit == 0 || limit > INT64_MAX ? INT64_MAX :
	    (int64_t)limit);
	if ((res = pg_run_alone(s, P_D_SWEEP, &p, "sweeping ids")) == NULL)
		return s->code;
	*removed = pg_rv_changed(res);
	PQclear(res);
	return SAKER_OK;
}

static int
pg_dedup_iterate(saker_store *base, saker_queue *q, saker_dedup_fn fn,
    void *arg)
{
	struct pg_store *s = PG(base);
	struct pgp p = { 0 };
	PGresult *res;
	int i, r = 0;

	if ((r = pg_dead(s, q)) != SAKER_OK)
		return r;
	if (s->version < 6)
		return SAKER_OK;	/* a read-only open of an older store */
	pg_pp_bin(&p, q->name, q->len);
	if ((res = pg_run(s, P_D_LIST, &p, "listing ids")) == NULL)
		return s->code;
	for (i = 0; i < PQntuples(res) && r == 0; i++)
		r = fn(arg, PQgetvalue(res, i, 0), (size_t)PQgetlength(res, i, 0),
		    pg_rv_i64(res, i, 1));
	PQclear(res);
	return r;
}

/* How many ids q keeps (store.h, dedup_count): counted by the database,
 * whichever broker recorded them. */
static int
pg_dedup_count(saker_store *base, saker_queue *q, uint64_t *n)
{
	PGresult *res;
	int err;

	*n = 0;
	err = pg_queue_row(PG(base), q, P_D_COUNT, "counting ids", &res);
	if (res != NULL) {
		*n = (uint64_t)pg_rv_i64(res, 0, 0);
		PQclear(res);
	}
	return err;
}

/* ------------------------------------------------------------------ */
/* store */

static const char *
pg_errmsg(saker_store *base)
{
	struct pg_store *s = PG(base);

	return s->err[0] != '\0' ? s->err : "no error";
}

static void
pg_store_stats(saker_store *base, struct saker_store_stats *st)
{
	struct pg_store *s = PG(base);
	PGresult *res;

	memset(st, 0, sizeof(*st));
	st->commits = s->commits;
	st->fsyncs = s->fsyncs;
	st->commit_ns = s->commit_ns;
	st->server = !s->read_only;
	st->connected = s->conn != NULL;
	st->reconnects = s->reconnects;
	st->in_doubt = s->in_doubt;
	st->last_commit_ms = s->last_commit_ms;
	st->horizon_age_ms = s->horizon_ms;
	st->horizon_xids = s->horizon_xids;
	st->dead_rows = s->dead_rows;
	st->segments = s->version >= 7 ? 4 : 0;
	st->segment = s->seg_cur;
	st->segment_truncations = s->seg_truncated;
	st->segment_moved = s->seg_moved;
	if (s->conn == NULL)
		pg_oneline(st->down_why, sizeof(st->down_why),
		    s->down_why[0] != '\0' ? s->down_why : "connecting");
	if (s->conn == NULL || saker_store_is_lost(&s->base))
		return;
	if ((res = pg_run(s, P_SIZE, NULL, "reading the size")) == NULL)
		return;
	if (PQntuples(res) > 0)
		st->disk_bytes = (uint64_t)pg_rv_i64(res, 0, 0);
	PQclear(res);
}

static void
pg_free(struct pg_store *s)
{
	struct saker_queue *q;
	struct kit_qent *e, *next;
	size_t i;
	int k;

	for (k = 0; k < PG_L_N; k++)
		pg_link_drop(s, &s->links[k], false);
	if (s->efd >= 0)
		close(s->efd);
	if (s->fl.efd >= 0)
		close(s->fl.efd);
	if (s->fl.evfd >= 0)
		close(s->fl.evfd);
	free(s->fl.pp);	/* (its results went with the connection) */
	while ((q = LIST_FIRST(&s->fl.deleted)) != NULL) {
		LIST_REMOVE(q, gone_link);
		free(q);
	}
	free(s->fl.gone);
	free(s->fl.bids);
	pg_held_drop_all(s);
	pg_batch_arrs(s, pg_arr_free);
	free(s->gone);
	free(s->doubt);
	free(s->bids);
	free(s->dids);
	intmap_free(&s->st_ids);
	i = 0;
	for (e = kit_qtab_next(&s->qt, &i, NULL); e != NULL; e = next) {
		next = kit_qtab_next(&s->qt, &i, e);
		free(PG_Q(e));
	}
	while ((q = LIST_FIRST(&s->deleted)) != NULL ||
	    (q = LIST_FIRST(&s->zombies)) != NULL) {
		LIST_REMOVE(q, gone_link);
		free(q);
	}
	kit_qtab_free(&s->qt);
	intmap_free(&s->open);
	free(s->conninfo);
	if (s->copts != NULL)
		PQconninfoFree(s->copts);
	free(s->schema);
	free(s->chan);
	free(s);
}

static void
pg_close(saker_store *base)
{
	struct pg_store *s = PG(base);
	struct saker_queue *q;
	struct pgp p = { 0 };
	PGresult *res;
	int i;

	if (s == NULL)
		return;
	if (!s->read_only && s->conn != NULL) {
		s->counts_now = true;
		(void)pg_commit(base);
		/* A clean stop hands our open items back at once; only a
		 * broker that dies leaves them to the lease sweep. */
		pg_pp_str(&p, s->owner);
		if (pg_begin(s) == SAKER_OK &&
		    (res = pg_run(s, P_RELEASE_ALL, &p, "returning open items")) !=
		    NULL) {
			for (i = 0; i < PQntuples(res); i++)
				if ((q = pg_find_id(s, pg_rv_i64(res, i, 0))) != NULL &&
				    !q->pend) {
					LIST_INSERT_HEAD(&s->pend, q, pend_link);
					q->pend = true;
				}
			PQclear(res);
			(void)pg_commit(base);
		}
	}
	if (s->in_txn && s->conn != NULL)
		PQclear(pg_exec(s, "ROLLBACK"));
	pg_free(s);
}

static void
pg_make_owner(struct pg_store *s)
{
	char host[64] = "localhost";
	uint64_t r = 0;

	(void)gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	if (saker_random(&r, sizeof(r)) != 0)
		r = saker_mono_ns() ^ ((uint64_t)getpid() << 32);
	snprintf(s->owner, sizeof(s->owner), "%s/%d/%016" PRIx64, host,
	    (int)getpid(), r);
}

/* A NOTIFY named this queue: its waiters look (pg_wire_cb.notified). */
static void
pg_notified(struct pg_store *s, const char *name, size_t len)
{
	pg_notify_local(s, pg_find_name(s, name, len));
}

/* The wire layer's reports, answered by the parts above it. */
static const struct pg_wire_cb pg_wire_cbs = {
	.conn_lost = pg_held_drop_all,
	.lose_batch = pg_lose_batch,
	.session_up = pg_main_up,
	.notified = pg_notified,
	.missed = pg_notify_all,
	.flight_wait = pg_flight_wait,
};

static int
pg_open(const char *location, const struct saker_store_opts *opts,
    saker_store **out, char *err, size_t errlen)
{
	struct pg_store *s;
	PGresult *res;
	int e;

	*out = NULL;
	if (location == NULL || location[0] == '\0') {
		snprintf(err, errlen, "postgres store needs a connection string"
		    " (postgres:'host=... dbname=...')");
		return SAKER_EINVAL;
	}
	if (opts->max_item > PG_MAX_ITEM) {
		snprintf(err, errlen, "postgres holds items up to %llu bytes (a "
		    "bytea value is at most 1 GB); lower --max-item-size",
		    (unsigned long long)PG_MAX_ITEM);
		return SAKER_EINVAL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return SAKER_ENOMEM;
	}
	s->base.driver = &saker_store_postgres;
	s->wcb = &pg_wire_cbs;
	s->sync = opts->sync;
	s->read_only = opts->read_only;
	s->notify = opts->notify;
	s->notify_arg = opts->notify_arg;
	s->lease_ms = PG_LEASE_MS;
	s->vacuum_ms = PG_VACUUM_MS;
	s->horizon_warn_ms = PG_HORIZON_WARN_MS;
	s->horizon_ms = s->horizon_xids = s->dead_rows = -1;
	s->seg_ms = PG_SEG_MS;
	s->seg_rows = PG_SEG_ROWS;
	s->seg_cur = s->seg_truncated = -1;
	s->timeout_ms = PG_TIMEOUT_MS;
	s->probe_ms = PG_PROBE_MS;
	s->efd = -1;
	s->fl.efd = s->fl.evfd = s->fl.regfd = -1;
	for (e = 0; e < PG_L_N; e++)
		s->links[e].regfd = -1;
	/* the queue lists are empty: calloc */
	s->put_name.oid = s->put_data.oid = s->put_attrs.oid = OID_BYTEA;
	s->put_vis.oid = s->put_due.oid = s->put_flags.oid = OID_INT8;
	s->put_exp.oid = s->put_created.oid = s->put_crc.oid = OID_INT8;
	s->put_dlv.oid = OID_INT8;
	s->st_qid.oid = s->st_id.oid = s->st_st.oid = s->st_dlv.oid = OID_INT8;
	s->del_qid.oid = s->del_id.oid = OID_INT8;
	if ((e = pg_parse_location(s, location, err, errlen)) != SAKER_OK ||
	    (e = pg_channel_opts(s, opts, err, errlen)) != SAKER_OK) {
		pg_free(s);
		return e;
	}
	s->wait_ns = (uint64_t)(s->timeout_ms > PG_OPEN_TIMEOUT_MS ?
	    s->timeout_ms : PG_OPEN_TIMEOUT_MS) * 1000000u;
	snprintf(s->ka_user_timeout, sizeof(s->ka_user_timeout), "%" PRId64,
	    s->timeout_ms);
	if (asprintf(&s->chan, "saker%s%s", s->schema != NULL ? "." : "",
	    s->schema != NULL ? s->schema : "") < 0) {
		s->chan = NULL;
		pg_free(s);
		snprintf(err, errlen, "out of memory");
		return SAKER_ENOMEM;
	}
	pg_make_owner(s);
	{
		char *perr = NULL;
		const PQconninfoOption *o;

		if ((s->copts = PQconninfoParse(s->conninfo, &perr)) == NULL) {
			char line[300];

			pg_oneline(line, sizeof(line), perr != NULL ? perr :
			    "out of memory");
			PQfreemem(perr);
			e = pg_errf(s, SAKER_EINVAL, "postgres: bad connection"
			    " string: %s", line);
			goto fail;
		}
		for (o = s->copts; o->keyword != NULL; o++)
			if (strcmp(o->keyword, "host") == 0 && o->val != NULL)
				s->nhosts = pg_list_n(o->val);
		if (s->nhosts > PG_HOSTS_MAX)
			s->nhosts = 1;	/* too many to rotate: in order */
	}
	if ((s->fl.efd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (s->fl.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
	    epoll_ctl(s->fl.efd, EPOLL_CTL_ADD, s->fl.evfd,
	    &(struct epoll_event){ .events = EPOLLIN }) != 0) {
		e = pg_errf(s, SAKER_EIO, "postgres: the commit's descriptor:"
		    " %s", strerror(errno));
		goto fail;
	}
	if ((s->efd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		e = pg_errf(s, SAKER_EIO, "postgres: epoll_create1: %s",
		    strerror(errno));
		goto fail;
	}
	if ((e = pg_link_wait(s, &s->links[PG_L_MAIN], s->wait_ns)) !=
	    SAKER_OK)
		goto fail;
	s->conn = s->links[PG_L_MAIN].c;
	if ((e = pg_session(s)) != SAKER_OK ||
	    (e = pg_check_schema(s, opts->create)) != SAKER_OK ||
	    (e = pg_prepare_all(s)) != SAKER_OK)
		goto fail;
	s->links[PG_L_MAIN].up = true;
	if (!s->read_only) {
		res = pg_exec(s, pg_fold_sql);
		if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK) {
			PQclear(res);
			res = pg_exec(s, "ROLLBACK");
		}
		PQclear(res);
		if ((e = pg_listen_open(s)) != SAKER_OK)
			goto fail;
	}
	if (s->conn == NULL) {
		e = SAKER_EIO;
		goto fail;
	}
	/* from here on the loop runs: no wait longer than timeout= (a
	 * read-only tool has no loop to keep answering) */
	if (!s->read_only)
		s->wait_ns = (uint64_t)s->timeout_ms * 1000000u;
	s->opened = true;
	s->err[0] = '\0';
	*out = &s->base;
	return SAKER_OK;

fail:
	snprintf(err, errlen, "%s", s->err[0] != '\0' ? s->err :
	    saker_strerror(e));
	pg_free(s);
	return e != SAKER_OK ? e : SAKER_EIO;
}

const struct saker_store_driver saker_store_postgres = {
	.name = "postgres",
	.location_help = "'host=... dbname=...'",
	.location = SAKER_LOCATION_SECRET,
	.durable = true,
	.options = pg_options,
	.caps = SAKER_CAP_SHARED,
	.open = pg_open,
	.close = pg_close,
	.errmsg = pg_errmsg,
	.queue_open = pg_queue_open,
	.queue_delete = pg_queue_delete,
	.queue_flush = pg_queue_flush,
	.queues = pg_queues,
	.queue_stats = pg_queue_stats,
	.queue_count = pg_queue_count,
	.put = pg_put,
	.take = pg_take,
	.confirm = pg_confirm,
	.release = pg_release,
	.release_delayed = pg_release_delayed,
	.move = pg_move,
	.expire_to = saker_store_keep_expire_to,
	.promote = pg_promote,
	.flush_expired = pg_flush_expired,
	.iterate = pg_iterate,
	.dedup_put = pg_dedup_put,
	.dedup_del = pg_dedup_del,
	.dedup_sweep = pg_dedup_sweep,
	.dedup_iterate = pg_dedup_iterate,
	.dedup_count = pg_dedup_count,
	.commit = pg_commit,
	.commit_start = pg_commit_start,
	.commit_fd = pg_commit_fd,
	.commit_finish = pg_commit_finish,
	.sync = pg_sync,
	.store_stats = pg_store_stats,
	.watch_fd = pg_watch_fd,
	.fd_ready = pg_fd_ready,
	.tick = pg_tick,
};
