/* pg_batch.c -- the PostgreSQL driver's batch: writes buffered for the
 * next pipeline, statements run after them, the group commit and the
 * rollback of a batch that failed. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "clock.h"
#include "itemattr.h"
#include "pg_batch.h"
#include "pg_queue.h"
#include "pg_wire.h"

/* NOTIFY payloads are limited to 8000 bytes. */
#define PG_NOTIFY_MAX 7000

static int pg_commit_end(struct pg_store *, struct pg_pipe *, bool);
static void pg_flight_gone(struct pg_store *, bool);
static void pg_flight_queues(struct pg_store *, bool);
static bool pg_flight_send(struct pg_store *, bool);

/* ---- writes buffered for the next pipeline ---- */

static bool
pg_pending(const struct pg_store *s)
{
	return s->put_name.n > 0 || s->st_id.n > 0 || s->del_id.n > 0;
}

/* fn on each of the batch's arrays */
void
pg_batch_arrs(struct pg_store *s, void (*fn)(struct pg_arr *))
{
	struct pg_arr *a[] = { &s->put_name, &s->put_vis, &s->put_due,
	    &s->put_flags, &s->put_exp, &s->put_created, &s->put_data,
	    &s->put_crc, &s->put_dlv, &s->put_attrs, &s->st_qid, &s->st_id,
	    &s->st_st, &s->st_dlv, &s->del_qid, &s->del_id };
	size_t i;

	for (i = 0; i < sizeof(a) / sizeof(a[0]); i++)
		fn(a[i]);
}

static void
pg_pending_reset(struct pg_store *s)
{
	pg_batch_arrs(s, pg_arr_reset);
	intmap_clear(&s->st_ids);
	s->put_bytes = 0;
}

/* A state change of an item this broker holds (see P_SETSTATE); dlv:
 * the delivery count an open (st 1) stores, the one the layer gave
 * (saker_store_handout()). */
static int
pg_st_push(struct pg_store *s, int64_t qid, uint64_t id, int st,
    uint32_t dlv)
{
	if (!pg_arr_reserve(&s->st_qid, 12) || !pg_arr_reserve(&s->st_id, 12) ||
	    !pg_arr_reserve(&s->st_st, 12) || !pg_arr_reserve(&s->st_dlv, 12) ||
	    intmap_put_u64(&s->st_ids, id, (uint64_t)qid) != 0)
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	pg_arr_i64(&s->st_qid, qid);
	pg_arr_i64(&s->st_id, (int64_t)id);
	pg_arr_i64(&s->st_st, st);
	pg_arr_i64(&s->st_dlv, dlv);
	return SAKER_OK;
}

/* ... that gives it back (st 0): its count stays */
int
pg_st_add(struct pg_store *s, int64_t qid, uint64_t id, int st)
{
	return pg_st_push(s, qid, id, st, 0);
}

/* ... that opens a claimed item, with the count the layer handed out */
int
pg_st_open(struct pg_store *s, int64_t qid, uint64_t id, uint32_t dlv)
{
	return pg_st_push(s, qid, id, 1, dlv);
}

/* Room for `more` elements of `size` bytes after the n used in the array
 * whose pointer is at vp (cap allocated), doubling; false when out of
 * memory or the size overflows.  The pointer goes through memcpy: vp
 * points at an int64_t * or a struct pg_bid *, not at a void *. */
static bool
pg_room(void *vp, size_t size, size_t n, size_t *cap, size_t more)
{
	size_t c = *cap > 0 ? *cap : 16;
	void *v, *p;

	if (more <= *cap && n <= *cap - more)
		return true;
	if (more > SIZE_MAX / size - n)
		return false;
	while (c < n + more)
		c = c <= SIZE_MAX / size / 2 ? c * 2 : SIZE_MAX / size;
	memcpy(&v, vp, sizeof(v));
	if ((p = realloc(v, c * size)) == NULL)
		return false;
	memcpy(vp, &p, sizeof(p));
	*cap = c;
	return true;
}

/* Can the current batch write (a damaged or expired item be moved)?
 * The layer says whether it takes writes (read-only, a lost batch); the
 * driver whether the server is reachable. */
bool
pg_writable(const struct pg_store *s)
{
	return saker_store_takes_writes(&s->base) && s->conn != NULL;
}

bool
pg_del_room(struct pg_store *s)
{
	return pg_arr_reserve(&s->del_qid, 12) &&
	    pg_arr_reserve(&s->del_id, 12) &&
	    pg_room(&s->gone, sizeof(*s->gone), s->ngone, &s->capgone, 2);
}

/* Delete an item this broker holds; pg_del_room() made room. */
void
pg_del_add(struct pg_store *s, int64_t qid, uint64_t id)
{
	pg_arr_i64(&s->del_qid, qid);
	pg_arr_i64(&s->del_id, (int64_t)id);
	s->gone[s->ngone++] = qid;
	s->gone[s->ngone++] = (int64_t)id;
}

/* A take removed row (qid, id) in this batch: see pg_gone_end(). */
int
pg_gone_add(struct pg_store *s, int64_t qid, uint64_t id)
{
	if (!pg_room(&s->gone, sizeof(*s->gone), s->ngone, &s->capgone, 2))
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	s->gone[s->ngone++] = qid;
	s->gone[s->ngone++] = (int64_t)id;
	return SAKER_OK;
}

/* pg_dedup_put() recorded key on q in this batch.  Out of memory the id
 * is not kept for pg_gone_end(): at least once, as before. */
void
pg_bid_add(struct pg_store *s, const struct saker_queue *q, const void *key,
    size_t len, int64_t expires, int64_t now)
{
	struct pg_bid *b;

	if (len > sizeof(b->key) || q->len > sizeof(b->name) ||
	    !pg_room(&s->bids, sizeof(*s->bids), s->nbids, &s->capbids, 1))
		return;
	b = &s->bids[s->nbids++];
	b->qid = q->id;
	b->expires = expires;
	b->now = now;
	b->out = false;
	b->nlen = (uint8_t)q->len;
	b->klen = (uint8_t)len;
	memcpy(b->name, q->name, q->len);
	memcpy(b->key, key, len);
}

/* pg_dedup_del() took key on q back in this batch. */
void
pg_bid_del(struct pg_store *s, const struct saker_queue *q, const void *key,
    size_t len)
{
	size_t i;

	for (i = s->nbids; i-- > 0; )
		if (s->bids[i].qid == q->id && s->bids[i].klen == len &&
		    memcmp(s->bids[i].key, key, len) == 0) {
			s->bids[i] = s->bids[--s->nbids];
			return;
		}
}

/* A take of this batch removed *it from queue qid and hands it out: if
 * it carries an id this batch recorded, mark it. */
void
pg_bid_out(struct pg_store *s, int64_t qid, const struct saker_item *it)
{
	const void *key;
	size_t len, i;

	if (s->nbids == 0 || !itemattr_get(it->attrs, it->attrs_len,
	    ITEMATTR_ID, &key, &len))
		return;
	for (i = s->nbids; i-- > 0; )
		if (s->bids[i].qid == qid && s->bids[i].klen == len &&
		    memcmp(s->bids[i].key, key, len) == 0) {
			s->bids[i].out = true;
			return;
		}
}

/* The batch is over; `doubt`: its COMMIT got no answer, so the rows it
 * deleted are kept to be deleted again once connected, and the ids of
 * the items it put and handed out to be recorded again (pg_main_up).
 * Out of memory for that, they may be handed out twice (at least once). */
static void
pg_gone_end(struct pg_store *s, bool doubt)
{
	size_t i;

	if (doubt && s->ngone > 0 &&
	    pg_room(&s->doubt, sizeof(*s->doubt), s->ndoubt,
	    &s->capdoubt, s->ngone)) {
		memcpy(s->doubt + s->ndoubt, s->gone,
		    s->ngone * sizeof(*s->gone));
		s->ndoubt += s->ngone;
	}
	for (i = 0; doubt && i < s->nbids; i++)
		if (s->bids[i].out && pg_room(&s->dids, sizeof(*s->dids),
		    s->ndids, &s->capdids, 1))
			s->dids[s->ndids++] = s->bids[i];
	s->ngone = 0;
	s->nbids = 0;
}

/* The batch ended: its takes no longer count for the claims of the next. */
static void
pg_took_clear(struct pg_store *s)
{
	struct saker_queue *q;

	while ((q = LIST_FIRST(&s->took)) != NULL) {
		LIST_REMOVE(q, took_link);
		q->took = false;
	}
}

/* Queue the batch's BEGIN, if not sent yet. */
static void
pg_send_begin(struct pg_store *s, struct pg_pipe *pp)
{
	if (s->in_txn && !s->begun) {
		pg_pipe_send(s, pp, 0, "BEGIN", NULL, "begin");
		s->begun = true;
	}
}

/* Queue the batch's BEGIN (if not sent yet) and every buffered write
 * ahead of whatever the caller sends next. */
void
pg_send_pending(struct pg_store *s, struct pg_pipe *pp)
{
	struct pgp p;

	pg_send_begin(s, pp);
	if (s->put_name.n > 0) {
		memset(&p, 0, sizeof(p));
		pg_pp_arr(&p, &s->put_name);
		pp->qsync = pp->n;
		pg_pipe_send(s, pp, P_QSYNC, NULL, &p, "creating queues");
		pg_pp_arr(&p, &s->put_vis);
		pg_pp_arr(&p, &s->put_due);
		pg_pp_arr(&p, &s->put_flags);
		pg_pp_arr(&p, &s->put_exp);
		pg_pp_arr(&p, &s->put_created);
		pg_pp_arr(&p, &s->put_data);
		pg_pp_arr(&p, &s->put_crc);
		pg_pp_i64(&p, (int64_t)s->put_name.n);
		pg_pp_arr(&p, &s->put_dlv);
		pg_pp_arr(&p, &s->put_attrs);
		pg_pipe_send(s, pp, P_PUTS, NULL, &p, "inserting items");
	}
	if (s->st_id.n > 0) {
		memset(&p, 0, sizeof(p));
		pg_pp_arr(&p, &s->st_qid);
		pg_pp_arr(&p, &s->st_id);
		pg_pp_arr(&p, &s->st_st);
		pg_pp_str(&p, s->owner);
		pg_pp_arr(&p, &s->st_dlv);
		pg_pipe_send(s, pp, P_SETSTATE, NULL, &p, "changing item states");
	}
	if (s->del_id.n > 0) {
		memset(&p, 0, sizeof(p));
		pg_pp_arr(&p, &s->del_qid);
		pg_pp_arr(&p, &s->del_id);
		pg_pp_str(&p, s->owner);
		pg_pipe_send(s, pp, P_DELS, NULL, &p, "deleting items");
	}
	/* libpq copied the parameters; if the pipeline fails the whole
	 * batch is rolled back anyway */
	pg_pending_reset(s);
}

/* After a pipeline that carried pending writes succeeded: queues that
 * another broker deleted and this batch re-created have new ids. */
void
pg_pending_done(struct pg_store *s, struct pg_pipe *pp)
{
	const PGresult *r;
	struct saker_queue *q;
	int64_t id;
	int i;

	if (pp->qsync < 0 || (r = pp->res[pp->qsync]) == NULL)
		return;
	for (i = 0; i < PQntuples(r); i++) {
		id = pg_rv_i64(r, i, 0);
		q = pg_find_name(s, PQgetvalue(r, i, 1),
		    (size_t)PQgetlength(r, i, 1));
		/* deleted and created again elsewhere: a new id */
		if (q != NULL && q->id != id && id != 0) {
			kit_qtab_set_id(&s->qt, &q->qe, id);
			q->id = id;
			q->lo_vis = INT64_MIN;	/* a new row's mark */
			q->lo_id = 0;
		}
	}
}

/* The batch in flight's answer, read before the connection is used for
 * the batch gathered on it: a failed flight lost that batch too
 * (pg_commit_end()), and the layer refuses it (store.h, REFUSALS). */
static int
pg_flight_settle(struct pg_store *s)
{
	pg_flight_wait(s);
	return saker_store_is_lost(&s->base) ?
	    saker_store_refusal(&s->base, true) : SAKER_OK;
}

/* Run a prepared statement after the batch's pending writes (or only
 * its BEGIN: `alone`, for one that needs not see them), in one round
 * trip; NULL (and s->code, s->err set) on failure. */
static PGresult *
pg_run_in(struct pg_store *s, int which, const struct pgp *p,
    const char *what, bool alone)
{
	struct pg_pipe pp;
	PGresult *res;

	/* a failed flight took this batch with it: the layer's refusal
	 * says so (s->code; its message is the layer's) */
	if ((s->code = pg_flight_settle(s)) != SAKER_OK)
		return NULL;
	if (s->conn == NULL) {
		pg_down(s);
		return NULL;
	}
	pg_pipe_init(&pp);
	if (alone)
		pg_send_begin(s, &pp);
	else
		pg_send_pending(s, &pp);
	pg_pipe_send(s, &pp, which, NULL, p, what);
	if (!pg_pipe_wait(s, &pp)) {
		pg_pipe_fail(s, &pp);
		return NULL;
	}
	pg_pending_done(s, &pp);
	res = pp.res[pp.n - 1];
	pp.res[pp.n - 1] = NULL;
	pg_pipe_clear(&pp);
	return res;
}

PGresult *
pg_run(struct pg_store *s, int which, const struct pgp *p, const char *what)
{
	return pg_run_in(s, which, p, what, false);
}

/* The deduplication statements see no item: the batch's puts stay
 * buffered for its one pipeline. */
PGresult *
pg_run_alone(struct pg_store *s, int which, const struct pgp *p,
    const char *what)
{
	return pg_run_in(s, which, p, what, true);
}

/* Send the pending writes now (before a listing that must see them). */
int
pg_flush(struct pg_store *s)
{
	struct pg_pipe pp;
	int err;

	if ((err = pg_flight_settle(s)) != SAKER_OK)
		return err;
	if (s->conn == NULL || (!pg_pending(s) && (s->begun || !s->in_txn)))
		return SAKER_OK;
	pg_pipe_init(&pp);
	pg_send_pending(s, &pp);
	if (!pg_pipe_wait(s, &pp))
		return pg_pipe_fail(s, &pp);
	pg_pending_done(s, &pp);
	pg_pipe_clear(&pp);
	return SAKER_OK;
}

/* Rebuild the set of open items from the database after a rollback: it
 * knows which leases are still ours. */
static void
pg_reload_open(struct pg_store *s)
{
	struct pgp p = { 0 };
	PGresult *res;
	int i;

	intmap_clear(&s->open);
	if (s->conn == NULL || s->read_only)
		return;
	pg_pp_str(&p, s->owner);
	if ((res = pg_run(s, P_MINE, &p, "reading open items")) == NULL)
		return;
	for (i = 0; i < PQntuples(res); i++)
		(void)intmap_put_u64(&s->open, (uint64_t)pg_rv_i64(res, i, 1),
		    (uint64_t)pg_rv_i64(res, i, 0));
	PQclear(res);
}

/* Undo the in-memory side of a batch that did not commit. */
static void
pg_restore(struct pg_store *s)
{
	struct saker_queue *q;
	struct kit_qent *e, *next;
	size_t i = 0;

	struct saker_queue *qn;

	while ((q = LIST_FIRST(&s->pend)) != NULL) {
		LIST_REMOVE(q, pend_link);
		q->pend = false;
	}
	/* the deltas of committed batches are still to be written */
	for (q = LIST_FIRST(&s->dirty); q != NULL; q = qn) {
		qn = LIST_NEXT(q, dirty_link);
		if (q->c_total == 0 && q->c_expired == 0) {
			pg_unlist(q);
			continue;
		}
		q->d_total = q->c_total;
		q->d_expired = q->c_expired;
	}
	for (e = kit_qtab_next(&s->qt, &i, NULL); e != NULL; e = next) {
		next = kit_qtab_next(&s->qt, &i, e);
		q = PG_Q(e);
		if (!q->fresh)
			continue;
		/* never existed; the core may still hold the handle until
		 * it looks every queue up again */
		kit_qtab_remove(&s->qt, &q->qe);
		q->dead = true;
		q->fresh = false;
		LIST_INSERT_HEAD(&s->zombies, q, gone_link);
	}
	while ((q = LIST_FIRST(&s->deleted)) != NULL) {
		LIST_REMOVE(q, gone_link);
		free(q);
	}
}

/*
 * The batch is lost (a statement failed, the session went): the layer
 * keeps the state and refuses the rest of the batch (store.h, REFUSALS),
 * with the failure's message (s->err, less its "postgres: ") as the
 * reason.  The driver's part: roll back, and put its memory of the batch
 * back as at the last commit.
 */
void
pg_lose_batch(struct pg_store *s, int code)
{
	PGresult *res;
	struct pgp p = { 0 };
	char why[256];

	pg_oneline(why, sizeof(why), strncmp(s->err, "postgres: ", 10) == 0 ?
	    s->err + 10 : s->err);	/* before the ROLLBACK's */
	s->in_txn = false;
	s->begun = false;
	s->txn_gen++;
	s->renew_at = 0;
	if (s->conn != NULL)
		PQclear(pg_exec(s, "ROLLBACK"));
	pg_pending_reset(s);
	pg_took_clear(s);
	/* the rows it deleted are back for sure unless its COMMIT went
	 * out: then pg_commit_end() decides, in doubt or not */
	if (!s->committing)
		pg_gone_end(s, false);
	/* Claims of earlier batches are still ours in the database, but
	 * which of them this batch handed out is unknown now: give them all
	 * back at once, in their place in the FIFO. */
	pg_held_drop_all(s);
	if (s->conn != NULL && !s->read_only) {
		pg_pp_str(&p, s->owner);
		if ((res = pg_run(s, P_GIVEBACK, &p, "returning claims")) != NULL)
			PQclear(res);
	}
	pg_restore(s);
	pg_reload_open(s);
	saker_store_lose_batch_why(&s->base, code, why);
}

int
pg_begin(struct pg_store *s)
{
	int err;

	/* the layer's refusal (store.h, REFUSALS), with its one message: a
	 * batch lost in this very call (the layer refused the call at entry
	 * otherwise), or a read-only store (for the driver's own writes:
	 * commit's counters) */
	if ((err = saker_store_refusal(&s->base, true)) != SAKER_OK)
		return err;
	/* Down is no refusal state of the layer's: those last until the
	 * store is reopened, this one until tick() has reconnected (a
	 * server keeps what it committed; nothing here needs a reopen).
	 * So the driver answers it, as any call that cannot reach the
	 * server. */
	if (s->conn == NULL)
		return pg_down(s);
	if (s->in_txn)
		return SAKER_OK;
	/* the BEGIN goes out with the batch's first statement */
	s->in_txn = true;
	s->begun = false;
	s->txn_gen++;
	return SAKER_OK;
}

/* ------------------------------------------------------------------ */
/* batches */

/* One array of NOTIFY payloads naming every queue that gained items in
 * this batch; names hold no newline, so it separates them. */
static int
pg_notify_arr(struct pg_store *s, struct pg_arr *a)
{
	struct saker_queue *q;
	char *buf;
	size_t off = 0;

	if (LIST_EMPTY(&s->pend) || s->read_only)
		return SAKER_OK;
	if ((buf = malloc(PG_NOTIFY_MAX + 1)) == NULL)
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	for (q = LIST_FIRST(&s->pend); q != NULL || off > 0;
	    q = q != NULL ? LIST_NEXT(q, pend_link) : NULL) {
		if (q != NULL && q->len >= PG_NOTIFY_MAX)
			continue;
		if (q == NULL || off + q->len + 1 > PG_NOTIFY_MAX) {
			if (!pg_arr_reserve(a, 4 + off)) {
				free(buf);
				return pg_errf(s, SAKER_ENOMEM, "out of memory");
			}
			pg_arr_put(a, buf, off);
			off = 0;
			if (q == NULL)
				break;
		}
		memcpy(buf + off, q->name, q->len);
		off += q->len;
		buf[off++] = '\n';
	}
	free(buf);
	return SAKER_OK;
}

/*
 * The counters (saker_counts) are written at most once a second: a row
 * updated by every commit grows a chain of dead versions that every
 * later update walks while something holds the xmin horizon (issue 47:
 * 51 buffers a commit after two minutes, and growing).  Until then
 * queue_stats adds them from memory; a broker that dies loses a second
 * of counts, never items.
 */
#define PG_COUNTS_MS 1000

/* The counter deltas, one row per queue. */
static int
pg_counts_arr(struct pg_store *s, struct pg_arr *qid, struct pg_arr *tot,
    struct pg_arr *exp)
{
	struct saker_queue *q;

	LIST_FOREACH(q, &s->dirty, dirty_link) {
		if (q->d_total == 0 && q->d_expired == 0)
			continue;
		if (!pg_arr_reserve(qid, 12) || !pg_arr_reserve(tot, 12) ||
		    !pg_arr_reserve(exp, 12))
			return pg_errf(s, SAKER_ENOMEM, "out of memory");
		pg_arr_i64(qid, q->id);
		pg_arr_i64(tot, q->d_total);
		pg_arr_i64(exp, q->d_expired);
	}
	return SAKER_OK;
}

/* Most queues one advance of the low-water marks looks at. */
#define PG_ADV_MAX 64

/*
 * At most once a second, at the end of a batch: lock the queue rows of
 * up to PG_ADV_MAX queues this broker took from since the last time
 * (P_ADV_LOCK, one round trip), and send P_ADVANCE for those it got in
 * the commit's pipeline.  Last in the batch so that nothing after it
 * waits for a lock while it holds theirs.  *adv_ix: its index in pp, or
 * -1.
 */
static int
pg_advance_send(struct pg_store *s, struct pg_pipe *pp, int *adv_ix)
{
	struct pg_arr ids = { .oid = OID_INT8 }, got = { .oid = OID_INT8 };
	struct saker_queue *q;
	struct kit_qent *e;
	struct pgp p;
	PGresult *res;
	size_t i = 0;
	int k, err = SAKER_OK;

	*adv_ix = -1;
	if (s->version < 5 || s->last_now - s->adv_at < 1000)
		return SAKER_OK;
	s->adv_at = s->last_now;
	for (e = kit_qtab_next(&s->qt, &i, NULL); e != NULL &&
	    ids.n < PG_ADV_MAX; e = kit_qtab_next(&s->qt, &i, e)) {
		q = PG_Q(e);
		if (!q->adv || q->dead || q->fresh)
			continue;
		if (!pg_arr_reserve(&ids, 12)) {
			err = pg_errf(s, SAKER_ENOMEM, "out of memory");
			goto out;
		}
		pg_arr_i64(&ids, q->id);
		q->adv = false;
	}
	if (ids.n == 0)
		goto out;
	memset(&p, 0, sizeof(p));
	pg_pp_arr(&p, &ids);
	if ((res = pg_run(s, P_ADV_LOCK, &p, "locking queues")) == NULL) {
		err = s->code;
		goto out;
	}
	for (k = 0; k < PQntuples(res); k++) {
		if (!pg_arr_reserve(&got, 12)) {
			PQclear(res);
			err = pg_errf(s, SAKER_ENOMEM, "out of memory");
			goto out;
		}
		pg_arr_i64(&got, pg_rv_i64(res, k, 0));
	}
	PQclear(res);
	if (got.n == 0)
		goto out;
	memset(&p, 0, sizeof(p));
	pg_pp_arr(&p, &got);
	pg_pp_i64(&p, s->last_now);
	*adv_ix = pp->n;
	pg_pipe_send(s, pp, P_ADVANCE, NULL, &p, "advancing low-water marks");
out:
	pg_arr_free(&ids);
	pg_arr_free(&got);
	return err;
}

/* The committed marks of P_ADVANCE's result. */
static void
pg_advance_done(struct pg_store *s, const PGresult *res)
{
	struct saker_queue *q;
	int k;

	for (k = 0; k < PQntuples(res); k++)
		if ((q = pg_find_id(s, pg_rv_i64(res, k, 0))) != NULL) {
			q->lo_vis = pg_rv_i64(res, k, 1);
			q->lo_id = pg_rv_i64(res, k, 2);
		}
}

/*
 * The whole batch in one round trip: BEGIN (if no statement went out
 * yet), the buffered puts, state changes and deletes, the counters, the
 * NOTIFY and the COMMIT, pipelined.  However many commands the loop turn
 * ran, that is at most eight statements.
 *
 * With `async` (commit_start()) the pipeline is sent and not waited for
 * (*started): the batch is in flight, s->fl holds what its result is
 * needed for, and pg_flight_end() reads it.  What a success makes
 * final (queues created, deleted, a renewal of the leases) moves to
 * s->fl, apart from the next batch's, and back for pg_restore() when it
 * fails; the counter deltas it carries are forgotten at once (a batch
 * rolled back put nothing to count).
 */
static int
pg_commit_x(struct pg_store *s, bool async, bool *started)
{
	struct saker_queue *q;
	struct pg_arr cq = { .oid = OID_INT8 }, ct = { .oid = OID_INT8 },
	    ce = { .oid = OID_INT8 }, nt = { .oid = OID_TEXT };
	struct pg_pipe pp;
	struct pgp p;
	struct saker_queue *pre[PG_PRECLAIM_MAX];
	int pre_ix[PG_PRECLAIM_MAX], npre = 0, k, adv_ix = -1;
	bool counts;
	uint64_t t0, bno;
	int err, commit_ix;

	/* (a batch lost before: the layer ends it, this is not called; it
	 * collected the batch in flight too, so this reads nothing) */
	pg_flight_wait(s);
	if (saker_store_is_lost(&s->base))
		return saker_store_refusal(&s->base, true);
	/* Nothing to commit is no failure, even while down (store.h):
	 * the replies of a turn that wrote nothing (a get that timed out
	 * with a miss, in the same turn as the tick) stand.  /healthz
	 * learns of the connection from store_stats. */
	counts = s->counts_now || s->last_now - s->counts_at >= PG_COUNTS_MS;
	if (!s->in_txn && (!counts || LIST_EMPTY(&s->dirty)) &&
	    LIST_EMPTY(&s->pend)) {
		s->batch_no++;
		return SAKER_OK;
	}
	if (s->conn == NULL && !s->read_only)
		return pg_down(s);
	if (async && (s->read_only || s->fl.on || s->fl.done || s->fl.efd < 0))
		async = false;
	bno = s->batch_no++;
	t0 = saker_mono_ns();
	if ((err = pg_begin(s)) != SAKER_OK ||
	    (counts && (err = pg_counts_arr(s, &cq, &ct, &ce)) != SAKER_OK) ||
	    (err = pg_notify_arr(s, &nt)) != SAKER_OK)
		goto fail;
	pg_pipe_init(&pp);
	if (!s->read_only && (err = pg_advance_send(s, &pp, &adv_ix)) !=
	    SAKER_OK) {
		pg_pipe_clear(&pp);
		goto fail;
	}
	pg_send_pending(s, &pp);
	if (cq.n > 0) {
		memset(&p, 0, sizeof(p));
		pg_pp_str(&p, s->owner);
		pg_pp_arr(&p, &cq);
		pg_pp_arr(&p, &ct);
		pg_pp_arr(&p, &ce);
		pg_pipe_send(s, &pp, P_COUNTS, NULL, &p, "writing counters");
	}
	if (nt.n > 0) {
		memset(&p, 0, sizeof(p));
		pg_pp_str(&p, s->chan);
		pg_pp_arr(&p, &nt);
		pg_pipe_send(s, &pp, P_NOTIFY, NULL, &p, "notify");
	}
	/* Busy queues claim for the next turn in this round trip: the items
	 * this batch put are there already, so the next turn's takes need
	 * none (a pair workload costs one round trip per turn). */
	LIST_FOREACH(q, &s->took, took_link) {
		if (npre == PG_PRECLAIM_MAX || pp.n >= PG_PIPE_MAX - 2)
			break;
		if (q->dead || q->held != NULL || q->take_batch != bno ||
		    q->takes_cur < 2 || q->empty_gen == s->txn_gen)
			continue;
		if (s->nheld == 0 && s->open.n == 0 && npre == 0)
			s->lease_floor = s->last_now;
		memset(&p, 0, sizeof(p));
		pg_pp_i64(&p, q->id);
		pg_pp_i64(&p, s->last_now);
		pg_pp_i64(&p, s->last_now + PG_SKEW_MS);
		pg_pp_i64(&p, q->lo_vis);
		pg_pp_i64(&p, q->lo_id - 1);
		pg_pp_str(&p, s->owner);
		pg_pp_i64(&p, s->lease_ms);
		pg_pp_i64(&p, q->takes_cur > PG_CLAIM_MAX ? PG_CLAIM_MAX :
		    q->takes_cur);
		pre_ix[npre] = pp.n;
		pre[npre++] = q;
		pg_pipe_send(s, &pp, P_CLAIM, NULL, &p, "claiming items");
	}
	commit_ix = pp.n;
	pg_pipe_send(s, &pp, 0, "COMMIT", NULL, "commit");
	pg_arr_free(&cq);
	pg_arr_free(&ct);
	pg_arr_free(&ce);
	pg_arr_free(&nt);
	s->fl.pp = &pp;
	s->fl.npre = npre;
	for (k = 0; k < npre; k++) {
		s->fl.pre[k] = pre[k];
		s->fl.pre_ix[k] = pre_ix[k];
	}
	s->fl.adv_ix = adv_ix;
	s->fl.commit_ix = commit_ix;
	s->fl.t0 = t0;
	if (async && pg_flight_send(s, counts)) {
		*started = true;
		return SAKER_OK;
	}
	s->fl.pp = NULL;
	return pg_commit_end(s, &pp, counts);

fail:
	pg_gone_end(s, false);
	pg_arr_free(&cq);
	pg_arr_free(&ct);
	pg_arr_free(&ce);
	pg_arr_free(&nt);
	pg_took_clear(s);
	/* pg_fail() may have rolled back already (the layer ends a batch
	 * lost in commit() with it) */
	if (s->in_txn)
		pg_lose_batch(s, err);
	return err;
}

/* The transaction of the batch just sent is over for the one that
 * gathers next: its takes, NOTIFYs and counter deltas are the sent
 * batch's. */
static void
pg_txn_over(struct pg_store *s, bool counts)
{
	struct saker_queue *q;

	pg_took_clear(s);
	s->in_txn = false;
	s->begun = false;
	s->txn_gen++;
	if (counts) {
		s->counts_at = s->last_now;
		s->counts_now = false;
		while ((q = LIST_FIRST(&s->dirty)) != NULL)
			pg_unlist(q);
	} else {
		LIST_FOREACH(q, &s->dirty, dirty_link) {
			q->c_total = q->d_total;
			q->c_expired = q->d_expired;
		}
	}
	while ((q = LIST_FIRST(&s->pend)) != NULL) {
		LIST_REMOVE(q, pend_link);
		q->pend = false;
	}
}

/*
 * Read the results of the batch whose pipeline pp (up to its COMMIT) is
 * sent: synchronously from pg_commit_x(), or for the batch in flight
 * from pg_flight_end().  `counts`: the counters went with it.
 */
static int
pg_commit_end(struct pg_store *s, struct pg_pipe *pp, bool counts)
{
	struct saker_queue *q;
	bool in_doubt = false, flight = s->fl.on;
	bool dropped = flight && s->fl.dropped, ok;
	const char *st;
	int err, k;

	/* the COMMIT is out: a batch lost meanwhile (the connection went,
	 * pg_lose_batch()) leaves its rows to this call, in doubt or not */
	s->committing = true;
	ok = dropped ? false : pg_pipe_wait(s, pp);
	s->committing = false;
	if (!ok) {
		/* (a connection dropped in flight: its answer is lost) */
		if (dropped && pp->bad < 0)
			pp->bad = s->fl.commit_ix;
		s->fl.dropped = false;
		/* A statement before the COMMIT that PostgreSQL refused aborts
		 * the transaction (the COMMIT is skipped).  Otherwise, when the
		 * connection broke, the COMMIT may have happened or not, and
		 * nobody can tell us which. */
		st = pp->bad_res != NULL ? PQresultErrorField(pp->bad_res,
		    PG_DIAG_SQLSTATE) : NULL;
		/* dropped: judged by its own connection, not by one made
		 * since (that one's health says nothing of this COMMIT) */
		in_doubt = (dropped || s->conn == NULL ||
		    PQstatus(s->conn) != CONNECTION_OK) &&
		    !(st != NULL && pp->bad < s->fl.commit_ix);
		if (flight) {
			pg_flight_gone(s, in_doubt);
			/* the batch gathered on it is rolled back, but the core
			 * answers it with the flight's result: in doubt, the
			 * items its takes handed out go out as they are, so they
			 * are deleted again once connected like the flight's;
			 * otherwise given back (GIVEBACK).  Not left to ride into
			 * a later batch either way. */
			pg_gone_end(s, in_doubt);
		} else {
			pg_gone_end(s, in_doubt);
		}
		/* in flight, the batch gathered since fails with it: pg_fail()
		 * rolls that one back (its BEGIN is not even sent) */
		if (flight) {
			s->in_txn = true;
			s->begun = false;
			pg_flight_queues(s, false);
		}
		s->fl.on = false;
		err = pg_pipe_fail(s, pp);
		if (in_doubt) {
			char why[300];

			/* the client's SERVER_ERROR line says so */
			s->in_doubt++;
			pg_oneline(why, sizeof(why), s->conn == NULL &&
			    s->down_why[0] != '\0' ? s->down_why : s->err);
			pg_errf(s, SAKER_EINDOUBT, "postgres: outcome unknown, the"
			    " COMMIT got no answer (%s): the batch may or may not"
			    " be stored; retrying a write without an id may"
			    " duplicate it", why);
		}
		pg_took_clear(s);
		/* pg_fail() may have rolled back already; in flight that was
		 * the batch gathered on it, which the layer refuses now and
		 * ends with commit_finish() (saker_store_commit_finish()) */
		if (s->in_txn)
			pg_lose_batch(s, err);
		return in_doubt ? SAKER_EINDOUBT : err;
	}
	pg_pending_done(s, pp);
	if (s->fl.adv_ix >= 0)
		pg_advance_done(s, pp->res[s->fl.adv_ix]);
	for (k = 0; k < s->fl.npre; k++) {
		q = s->fl.pre[k];
		/* blocked clients of this broker are served from them now
		 * (in flight no take claimed meanwhile: pg_take() waits for
		 * the flight first when the queue holds nothing) */
		if (pg_held_install(s, q, pp->res[s->fl.pre_ix[k]],
		    s->last_now) == SAKER_OK)
			pg_notify_local(s, q);
		pp->res[s->fl.pre_ix[k]] = NULL;
	}
	pg_pipe_clear(pp);
	if (flight) {
		pg_flight_gone(s, false);
		pg_flight_queues(s, true);
		s->fl.on = false;
	} else {
		pg_gone_end(s, false);
		pg_txn_over(s, counts);
		if (s->renew_at != 0) {
			s->lease_floor = s->renew_at;
			s->renew_at = 0;
		}
		while ((q = LIST_FIRST(&s->deleted)) != NULL) {
			LIST_REMOVE(q, gone_link);
			free(q);
		}
		/* queues created in this batch are committed now */
		{
			struct kit_qent *e;
			size_t i = 0;

			for (e = kit_qtab_next(&s->qt, &i, NULL); e != NULL;
			    e = kit_qtab_next(&s->qt, &i, e))
				PG_Q(e)->fresh = false;
		}
		s->any_fresh = false;
	}
	s->commits++;
	s->last_commit_ms = s->last_now;
	if (s->sync == SAKER_SYNC_ALWAYS)
		s->fsyncs++;
	else if (s->sync == SAKER_SYNC_PERIODIC)
		s->unsynced = true;
	s->commit_ns += saker_mono_ns() - s->fl.t0;
	return SAKER_OK;
}

int
pg_commit(saker_store *base)
{
	bool started = false;

	return pg_commit_x(PG(base), false, &started);
}

/* ------------------------------------------------------------------ */
/* the batch in flight */

/* The flight ended, for its queues.  Committed (kept): what it did is
 * final -- the queues it deleted are freed, its lease renewal holds.
 * Failed: the queues it created and deleted go back to the batch
 * gathered since, which pg_restore() undoes with them. */
static void
pg_flight_queues(struct pg_store *s, bool kept)
{
	struct saker_queue *q;
	struct kit_qent *e;
	size_t i = 0;

	while ((q = LIST_FIRST(&s->fl.deleted)) != NULL) {
		LIST_REMOVE(q, gone_link);
		if (kept)
			free(q);
		else
			LIST_INSERT_HEAD(&s->deleted, q, gone_link);
	}
	for (e = s->fl.any_fresh ? kit_qtab_next(&s->qt, &i, NULL) : NULL;
	    e != NULL; e = kit_qtab_next(&s->qt, &i, e))
		if (PG_Q(e)->fl_fresh) {
			PG_Q(e)->fl_fresh = false;
			if (!kept) {
				PG_Q(e)->fresh = true;
				s->any_fresh = true;
			}
		}
	s->fl.any_fresh = false;
	if (kept && s->fl.renew_at != 0)
		s->lease_floor = s->fl.renew_at;
	s->fl.renew_at = 0;
}

/* pg_gone_end() for the flight's rows and ids, not the next batch's. */
static void
pg_flight_gone(struct pg_store *s, bool doubt)
{
	int64_t *g = s->gone;
	size_t ng = s->ngone, cg = s->capgone, nb = s->nbids, cb = s->capbids;
	struct pg_bid *b = s->bids;

	s->gone = s->fl.gone;
	s->ngone = s->fl.ngone;
	s->capgone = s->fl.capgone;
	s->bids = s->fl.bids;
	s->nbids = s->fl.nbids;
	s->capbids = s->fl.capbids;
	pg_gone_end(s, doubt);
	s->fl.gone = s->gone;
	s->fl.ngone = 0;
	s->fl.capgone = s->capgone;
	s->fl.bids = s->bids;
	s->fl.nbids = 0;
	s->fl.capbids = s->capbids;
	s->gone = g;
	s->ngone = ng;
	s->capgone = cg;
	s->bids = b;
	s->nbids = nb;
	s->capbids = cb;
}

/*
 * Put the batch whose pipeline s->fl.pp holds in flight: the sync point
 * is sent and flushed, nothing is read.  False (nothing changed, the
 * caller waits for the result as before) when libpq cannot send it all
 * at once or the socket cannot be watched.
 */
static bool
pg_flight_send(struct pg_store *s, bool counts)
{
	struct saker_queue *q;
	struct kit_qent *e;
	size_t i = 0;
	struct epoll_event ev;
	struct pg_pipe *pp;
	int64_t *g;
	struct pg_bid *b;
	size_t n;
	int fd = PQsocket(s->conn);

	if (s->fl.pp->sendfail || fd < 0 || !PQpipelineSync(s->conn))
		return false;
	s->fl.pp->synced = true;
	if (PQflush(s->conn) != 0)
		return false;	/* (pg_pipe_wait() sends the rest) */
	if ((pp = malloc(sizeof(*pp))) == NULL)
		return false;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	if (s->fl.regfd >= 0)
		(void)epoll_ctl(s->fl.efd, EPOLL_CTL_DEL, s->fl.regfd, NULL);
	s->fl.regfd = -1;
	if (epoll_ctl(s->fl.efd, EPOLL_CTL_ADD, fd, &ev) != 0) {
		free(pp);
		return false;
	}
	s->fl.regfd = fd;
	memcpy(pp, s->fl.pp, sizeof(*pp));
	s->fl.pp = pp;
	/* the flight's rows and ids apart from the next batch's */
	g = s->fl.gone;
	s->fl.gone = s->gone;
	s->gone = g;
	n = s->fl.capgone;
	s->fl.capgone = s->capgone;
	s->capgone = n;
	s->fl.ngone = s->ngone;
	s->ngone = 0;
	b = s->fl.bids;
	s->fl.bids = s->bids;
	s->bids = b;
	n = s->fl.capbids;
	s->fl.capbids = s->capbids;
	s->capbids = n;
	s->fl.nbids = s->nbids;
	s->nbids = 0;
	pg_txn_over(s, counts);
	while ((q = LIST_FIRST(&s->deleted)) != NULL) {
		LIST_REMOVE(q, gone_link);
		LIST_INSERT_HEAD(&s->fl.deleted, q, gone_link);
	}
	s->fl.renew_at = s->renew_at;
	s->renew_at = 0;
	s->fl.any_fresh = s->any_fresh;
	for (e = s->any_fresh ? kit_qtab_next(&s->qt, &i, NULL) : NULL;
	    e != NULL; e = kit_qtab_next(&s->qt, &i, e))
		if (PG_Q(e)->fresh) {
			PG_Q(e)->fresh = false;
			PG_Q(e)->fl_fresh = true;
		}
	s->any_fresh = false;
	s->fl.on = true;
	return true;
}

/* Read the result of the batch in flight (waiting for it); keep it for
 * commit_finish() when that is not the caller: evfd keeps commit_fd()
 * readable for the loop. */
static int
pg_flight_end(struct pg_store *s)
{
	int rc;

	rc = pg_commit_end(s, s->fl.pp, false);
	free(s->fl.pp);
	s->fl.pp = NULL;
	if (s->fl.regfd >= 0)
		(void)epoll_ctl(s->fl.efd, EPOLL_CTL_DEL, s->fl.regfd, NULL);
	s->fl.regfd = -1;
	return rc;
}

void
pg_flight_wait(struct pg_store *s)
{
	uint64_t one = 1;

	if (!s->fl.on)
		return;
	s->fl.rc = pg_flight_end(s);
	snprintf(s->fl.err, sizeof(s->fl.err), "%s", s->err);
	s->fl.done = true;
	/* A failed flight takes the batch gathering now with it (store.h):
	 * pg_commit_end() lost that one (pg_lose_batch()), so the layer
	 * refuses its writes until saker_store_commit_finish() ends it. */
	if (write(s->fl.evfd, &one, sizeof(one)) < 0) {
		/* (an eventfd's counter does not overflow from 1) */
	}
}

int
pg_commit_start(saker_store *base, bool *started)
{
	*started = false;
	return pg_commit_x(PG(base), true, started);
}

int
pg_commit_fd(saker_store *base)
{
	struct pg_store *s = PG(base);

	return s->fl.on || s->fl.done ? s->fl.efd : -1;
}

int
pg_commit_finish(saker_store *base)
{
	struct pg_store *s = PG(base);
	uint64_t v;

	if (s->fl.done) {
		s->fl.done = false;
		/* (a failed flight's gathered batch ends in the layer with
		 * this call; after a flight that succeeded a lost batch is the
		 * gathered one's own failure, which its commit still reports:
		 * the layer keeps it, see saker_store_commit_finish()) */
		if (read(s->fl.evfd, &v, sizeof(v)) < 0) {
			/* (nothing to read: nothing to reset) */
		}
		if (s->fl.rc != SAKER_OK)
			snprintf(s->err, sizeof(s->err), "%s", s->fl.err);
		return s->fl.rc;
	}
	if (!s->fl.on)
		return SAKER_OK;
	return pg_flight_end(s);
}

int
pg_sync(saker_store *base)
{
	struct pg_store *s = PG(base);

	if (s->sync != SAKER_SYNC_PERIODIC || !s->unsynced || s->read_only ||
	    s->in_txn || s->conn == NULL || s->fl.on)
		return SAKER_OK;
	/* A synchronous commit that writes a commit record flushes the WAL up
	 * to it, and with it every asynchronous commit before. */
	if (pg_simple(s, "BEGIN; SET LOCAL synchronous_commit = on;"
	    " SELECT txid_current(); COMMIT", "sync") != SAKER_OK)
		return s->code;
	s->fsyncs++;
	s->unsynced = false;
	return SAKER_OK;
}
