/* pg_queue.c -- the PostgreSQL driver's queues in memory: finding them,
 * the lists a batch keeps of them, the hint of where a queue's head is,
 * the items claimed ahead into them, waking their waiters. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "pg_queue.h"
#include "pg_wire.h"

/* ------------------------------------------------------------------ */
/* queue tables */

struct saker_queue *
pg_find_name(struct pg_store *s, const char *name, size_t len)
{
	struct kit_qent *e = kit_qtab_by_name(&s->qt, name, len);

	return e != NULL ? PG_Q(e) : NULL;
}

struct saker_queue *
pg_find_id(struct pg_store *s, int64_t id)
{
	struct kit_qent *e = kit_qtab_by_id(&s->qt, id);

	return e != NULL ? PG_Q(e) : NULL;
}

/* Something may now sit before the hint: scan from the head again. */
void
pg_unhint(struct saker_queue *q)
{
	q->hint_gen--;
}

void
pg_mark_dirty(struct pg_store *s, struct saker_queue *q)
{
	if (q->dirty)
		return;
	LIST_INSERT_HEAD(&s->dirty, q, dirty_link);
	q->dirty = true;
}

/* n items of q expired and were dropped: counted at the commit */
void
pg_expired(struct pg_store *s, struct saker_queue *q, int64_t n)
{
	pg_mark_dirty(s, q);
	q->d_expired += n;
}

void
pg_unlist(struct saker_queue *q)
{
	if (q->dirty)
		LIST_REMOVE(q, dirty_link);
	if (q->pend)
		LIST_REMOVE(q, pend_link);
	if (q->took)
		LIST_REMOVE(q, took_link);
	q->dirty = q->pend = q->took = false;
	q->d_total = q->d_expired = q->c_total = q->c_expired = 0;
}

int
pg_dead(struct pg_store *s, struct saker_queue *q)
{
	if (q == NULL || q->dead)
		return pg_errf(s, SAKER_ENOTFOUND, "no such queue");
	return SAKER_OK;
}

/* ------------------------------------------------------------------ */
/* where the head is */

/* The row just taken (or dropped, or claimed last) in this transaction:
 * later takes in the same transaction start after it. */
void
pg_hint(struct pg_store *s, struct saker_queue *q, const PGresult *res,
    int row)
{
	if (!s->in_txn)
		return;
	q->hint_gen = s->txn_gen;
	q->hint_vis = pg_rv_i64(res, row, 4);
	q->hint_id = pg_rv_i64(res, row, 0);
}

/* $1-$5 of HEAD_WHERE: q's visible head at now_ms, past the row this
 * transaction took last (pg_hint()), or from its low-water mark. */
void
pg_head_params(const struct pg_store *s, const struct saker_queue *q,
    struct pgp *p, int64_t now_ms)
{
	memset(p, 0, sizeof(*p));
	pg_pp_i64(p, q->id);
	pg_pp_i64(p, now_ms);
	pg_pp_i64(p, now_ms + PG_SKEW_MS);
	if (q->hint_gen == s->txn_gen && s->in_txn) {
		pg_pp_i64(p, q->hint_vis);
		pg_pp_i64(p, q->hint_id);
	} else {
		/* (vis, id) > ($4, $5): from the low-water mark on */
		pg_pp_i64(p, q->lo_vis);
		pg_pp_i64(p, q->lo_id - 1);
	}
}

/* ------------------------------------------------------------------ */
/* items claimed ahead (pg_lease.c claims them) */

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

/* ------------------------------------------------------------------ */
/* wake-ups */

/* The layer's notify, for every item made ready: it wakes each queue once
 * per layer call (store.h), so nothing here keeps a list. */
void
pg_notify_local(struct pg_store *s, struct saker_queue *q)
{
	if (q != NULL)
		q->empty_gen = s->txn_gen - 1;
	if (s->notify != NULL && q != NULL && !q->dead)
		s->notify(s->notify_arg, q, q->ctx);
}

/* Tell local waiters and, at commit, the other brokers. */
void
pg_gained(struct pg_store *s, struct saker_queue *q)
{
	if (q->hint_gen == s->txn_gen)
		q->hint_gen--;	/* a released item may sit before the hint */
	pg_notify_local(s, q);
	if (!q->pend) {
		LIST_INSERT_HEAD(&s->pend, q, pend_link);
		q->pend = true;
	}
}

/* After a reconnect notifications may have been missed: look at every
 * queue again. */
void
pg_notify_all(struct pg_store *s)
{
	struct kit_qent *e;
	size_t i = 0;

	for (e = kit_qtab_next(&s->qt, &i, NULL); e != NULL;
	    e = kit_qtab_next(&s->qt, &i, e))
		pg_notify_local(s, PG_Q(e));
}
