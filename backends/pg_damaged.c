/* pg_damaged.c -- the PostgreSQL driver's damaged items: an item that
 * fails its checksum is moved to "<queue>_damaged" (store.h, take()). */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_batch.h"
#include "pg_damaged.h"
#include "pg_item.h"
#include "pg_queue.h"
#include "pg_wire.h"

/*
 * The item of row `row` of res (ITEM_COLS) failed its checksum: the layer
 * puts it, as it is, into q's quarantine queue in the current batch
 * (saker_store_quarantine(); res NULL: the store takes no writes, it
 * stays).  The caller removes the original once this succeeded, in the
 * same batch.  Either way s->err holds the message naming both queues.
 * No copy of the bytes: pg_put() copies them into the batch's arrays
 * before it runs any statement, and a statement that fails before that
 * (opening the quarantine queue) fails the put, so res is not read
 * after a lost batch has freed it.
 */
static int
pg_put_damaged(struct pg_store *s, struct saker_queue *q, const PGresult *res,
    int row, int64_t id, int64_t now_ms)
{
	struct saker_item it;
	char msg[sizeof(s->err)];
	int err;

	if (res != NULL) {
		pg_row_item(res, row, &it, SAKER_ITEM_READY);
		/* attributes too long to put again are damage: left out */
		if (it.attrs_len > SAKER_ATTRS_MAX)
			it.attrs_len = 0;
	}
	err = saker_store_quarantine(&s->base, q, q->name, q->len,
	    (uint64_t)id, res != NULL ? &it : NULL, now_ms, msg, sizeof(msg));
	pg_errf(s, SAKER_ECORRUPT, "%s", msg);
	return err;
}

/* pg_take_one() met a damaged item (the only row of res, which this
 * takes): in the batch, move it aside and remove it from q. */
int
pg_take_damaged(struct pg_store *s, struct saker_queue *q, int mode,
    PGresult *res, int64_t now_ms)
{
	struct pgp p = { 0 };
	PGresult *dr;
	int64_t id = pg_rv_i64(res, 0, C_ID);
	uint64_t n;
	int err;

	if (mode == SAKER_TAKE_PEEK) {
		/* a peek changed nothing yet: delete it first, unless another
		 * broker has taken it meanwhile (it meets the damage then) */
		if (!pg_writable(s)) {
			PQclear(res);
			(void)pg_put_damaged(s, q, NULL, 0, id, now_ms);
			return SAKER_ECORRUPT;
		}
		pg_pp_i64(&p, q->id);
		pg_pp_i64(&p, id);
		if ((err = pg_begin(s)) != SAKER_OK ||
		    (dr = pg_run(s, P_DEL_READY, &p, "moving a damaged item")) ==
		    NULL) {
			PQclear(res);
			return err != SAKER_OK ? err : s->code;
		}
		n = pg_rv_changed(dr);
		PQclear(dr);
		if (n == 0) {
			PQclear(res);
			return pg_errf(s, SAKER_ECORRUPT, "queue '%.*s': item %"
			    PRId64 " failed its checksum (taken meanwhile by"
			    " another broker)", (int)q->len, q->name, id);
		}
	}
	/* REMOVE deleted it, OPEN leased it to us (state 1), PEEK above */
	if (mode == SAKER_TAKE_OPEN && !pg_del_room(s))
		err = pg_errf(s, SAKER_ENOMEM, "out of memory");
	else
		err = pg_put_damaged(s, q, res, 0, id, now_ms);
	if (err == SAKER_OK && mode == SAKER_TAKE_OPEN)
		pg_del_add(s, q->id, (uint64_t)id);
	if (err == SAKER_OK)	/* moved aside: gone from q */
		saker_store_account(&s->base, q, SAKER_ITEM_READY,
		    SAKER_ITEM_NONE, (size_t)PQgetlength(res, 0, C_DATA));
	if (err != SAKER_OK && !saker_store_is_lost(&s->base)) {
		/* not moved: put it back as it was (it stays damaged) */
		int e2 = pg_head_back(s, q, mode, res);

		PQclear(res);
		return e2 != SAKER_OK ? e2 : SAKER_ECORRUPT;
	}
	PQclear(res);
	return SAKER_ECORRUPT;
}

/* Claimed item held_rows[i] failed its checksum: move it aside and delete
 * it in the batch, and serve the others as before. */
int
pg_held_damaged(struct pg_store *s, struct saker_queue *q, int i,
    int64_t now_ms)
{
	int row = q->held_rows[i], err;
	int64_t id = pg_rv_i64(q->held, row, C_ID);

	if (!pg_writable(s)) {
		(void)pg_put_damaged(s, q, NULL, 0, id, now_ms);
		return SAKER_ECORRUPT;
	}
	if ((err = pg_begin(s)) != SAKER_OK)
		return err;
	if (!pg_del_room(s))
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	/* a failed statement loses the batch, and with it q->held */
	if (pg_put_damaged(s, q, q->held, row, id, now_ms) != SAKER_OK)
		return SAKER_ECORRUPT;
	pg_del_add(s, q->id, (uint64_t)id);
	saker_store_account(&s->base, q, SAKER_ITEM_READY, SAKER_ITEM_NONE,
	    (size_t)PQgetlength(q->held, row, C_DATA));
	memmove(q->held_rows + q->held_head + 1, q->held_rows + q->held_head,
	    (size_t)(i - q->held_head) * sizeof(*q->held_rows));
	q->held_head++;
	s->nheld--;
	if (q->held_head == q->held_n)
		pg_held_drop(s, q);
	return SAKER_ECORRUPT;
}
