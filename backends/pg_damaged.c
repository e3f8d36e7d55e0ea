/* pg_damaged.c -- the PostgreSQL driver's damaged items: an item that
 * fails its checksum is moved to "<queue>_damaged" (store.h, take()). */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_int.h"

#define PG_DAMAGED "_damaged"	/* where damaged items are moved to */

/* ---- damaged items ---- */

/* Whether a damaged item can be moved aside now. */
static bool
pg_can_move(const struct pg_store *s)
{
	return !s->read_only && !s->lost && s->conn != NULL;
}

static int
pg_left_in_place(struct pg_store *s, const struct saker_queue *q, int64_t id)
{
	return pg_errf(s, SAKER_ECORRUPT, "queue '%.*s': item %" PRId64
	    " failed its checksum (left in place: the store takes no writes)",
	    (int)q->len, q->name, id);
}

/* "<q>_damaged", the name cut to fit 250 bytes (store.h, take()). */
static void
pg_damaged_name(const struct saker_queue *q, char *name, size_t namelen)
{
	size_t base, dlen = sizeof(PG_DAMAGED) - 1;

	base = q->len + dlen < 250 ? q->len : 250 - dlen;
	snprintf(name, namelen, "%.*s%s", (int)base, q->name, PG_DAMAGED);
}

/*
 * The item of row `row` of res (ITEM_COLS) failed its checksum: put its
 * bytes, as they are, at the tail of queue `name` (pg_damaged_name();
 * created as needed, with a fresh checksum so they can be fetched for a
 * look) in the current batch (store.h, take()).  The caller removes the
 * original once this succeeded, in the same batch.
 */
static int
pg_put_damaged(struct pg_store *s, struct saker_queue *q, const PGresult *res,
    int row, int64_t now_ms, const char *name)
{
	struct saker_item it;
	struct saker_queue *dq;
	void *copy = NULL;
	int err;

	memset(&it, 0, sizeof(it));
	it.flags = (uint32_t)pg_rv_i64(res, row, C_FLAGS);
	it.created_ms = pg_rv_i64(res, row, C_CREATED);
	it.expires_ms = 0;	/* a moved item must not vanish */
	it.len = (size_t)PQgetlength(res, row, C_DATA);
	/* res may be freed if a statement below fails (the batch is lost) */
	if (it.len > 0 && (copy = malloc(it.len)) == NULL)
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	if (it.len > 0)
		memcpy(copy, PQgetvalue(res, row, C_DATA), it.len);
	it.data = copy != NULL ? copy : "";
	err = pg_begin(s);
	/* an existing handle keeps the core's context */
	if (err == SAKER_OK && (dq = pg_find_name(s, name, strlen(name))) ==
	    NULL)
		err = pg_queue_open(&s->base, name, strlen(name), true, NULL,
		    &dq);
	if (err == SAKER_OK && dq == q)
		err = pg_errf(s, SAKER_EINVAL, "the queue is its own damaged"
		    " queue");
	if (err == SAKER_OK)
		err = pg_put(&s->base, dq, &it, now_ms);
	free(copy);
	return err;
}

static int
pg_damaged_err(struct pg_store *s, const struct saker_queue *q, int64_t id,
    const char *name, int err)
{
	char why[300];

	if (err == SAKER_OK)
		return pg_errf(s, SAKER_ECORRUPT, "queue '%.*s': item %" PRId64
		    " failed its checksum; moved to queue '%s'", (int)q->len,
		    q->name, id, name);
	pg_oneline(why, sizeof(why), s->err[0] != '\0' ? s->err :
	    saker_strerror(err));
	return pg_errf(s, SAKER_ECORRUPT, "queue '%.*s': item %" PRId64
	    " failed its checksum and could not be moved to '%s' (%s)",
	    (int)q->len, q->name, id, name, why);
}

/* pg_take_one() met a damaged item (the only row of res, which this
 * takes): in the batch, move it aside and remove it from q. */
int
pg_take_damaged(struct pg_store *s, struct saker_queue *q, int mode,
    PGresult *res, int64_t now_ms)
{
	struct pgp p = { 0 };
	PGresult *dr;
	char name[256];
	int64_t id = pg_rv_i64(res, 0, C_ID);
	uint64_t n;
	int err;

	pg_damaged_name(q, name, sizeof(name));
	if (mode == SAKER_TAKE_PEEK) {
		/* a peek changed nothing yet: delete it first, unless another
		 * broker has taken it meanwhile (it meets the damage then) */
		if (!pg_can_move(s)) {
			PQclear(res);
			return pg_left_in_place(s, q, id);
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
		err = pg_put_damaged(s, q, res, 0, now_ms, name);
	if (err == SAKER_OK && mode == SAKER_TAKE_OPEN)
		pg_del_add(s, q->id, (uint64_t)id);
	if (err != SAKER_OK && !s->lost) {
		/* not moved: put it back as it was (it stays damaged) */
		int e2;

		err = pg_damaged_err(s, q, id, name, err);
		e2 = mode == SAKER_TAKE_OPEN ? pg_st_add(s, q->id,
		    (uint64_t)id, 0) : pg_reinsert(s, q, res);
		PQclear(res);
		return e2 != SAKER_OK ? e2 : err;
	}
	PQclear(res);
	return pg_damaged_err(s, q, id, name, err);
}

/* Claimed item held_rows[i] failed its checksum: move it aside and delete
 * it in the batch, and serve the others as before. */
int
pg_held_damaged(struct pg_store *s, struct saker_queue *q, int i,
    int64_t now_ms)
{
	int row = q->held_rows[i], err;
	int64_t id = pg_rv_i64(q->held, row, C_ID);
	char name[256];

	pg_damaged_name(q, name, sizeof(name));
	if (!pg_can_move(s))
		return pg_left_in_place(s, q, id);
	if ((err = pg_begin(s)) != SAKER_OK)
		return err;
	if (!pg_del_room(s))
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	/* a failed statement loses the batch, and with it q->held */
	if ((err = pg_put_damaged(s, q, q->held, row, now_ms, name)) !=
	    SAKER_OK)
		return pg_damaged_err(s, q, id, name, err);
	pg_del_add(s, q->id, (uint64_t)id);
	memmove(q->held_rows + q->held_head + 1, q->held_rows + q->held_head,
	    (size_t)(i - q->held_head) * sizeof(*q->held_rows));
	q->held_head++;
	s->nheld--;
	if (q->held_head == q->held_n)
		pg_held_drop(s, q);
	return pg_damaged_err(s, q, id, name, SAKER_OK);
}
