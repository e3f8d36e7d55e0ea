/* pg_item.c -- the PostgreSQL driver's items: a row as an item and its
 * checksum, the put into the batch's arrays, an expired item handed to
 * the layer, a refused item put back as it was. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "kit.h"
#include "pg_batch.h"
#include "pg_item.h"
#include "pg_queue.h"
#include "pg_wire.h"

/* The newest now_ms the driver was given ("delayed" in stats, the
 * commit's claims ahead). */
void
pg_saw(struct pg_store *s, int64_t now_ms)
{
	if (now_ms > s->last_now)
		s->last_now = now_ms;
}

/* An item's checksum: kit_item_crc(), then its attributes if it has any
 * (so rows without them, from before format 6 too, keep theirs). */
static uint32_t
pg_item_crc(uint32_t flags, int64_t expires_ms, int64_t created_ms,
    const void *data, size_t len, const void *attrs, size_t alen)
{
	uint32_t crc = kit_item_crc(flags, expires_ms, created_ms, data, len);

	return alen > 0 ? kit_crc32c(crc, attrs, alen) : crc;
}

/* Puts wait in the batch's arrays; beyond this many bytes of data they
 * are sent ahead of the commit, so no statement grows without bound. */
#define PG_PUT_FLUSH (8u << 20)

/* The put hook: the item joins the batch's arrays (sent ahead of the
 * next statement, or with the COMMIT). */
int
pg_put(saker_store *base, saker_queue *q, const struct saker_item *item,
    int64_t now_ms)
{
	struct pg_store *s = PG(base);
	int64_t due, vis, created;
	int err;

	if ((err = pg_dead(s, q)) != SAKER_OK)
		return err;
	/* the layer refused a malformed item (store.h, put); the length
	 * limit is this driver's own (a bytea length is an int32) */
	if (item->len > INT32_MAX)
		return pg_errf(s, SAKER_EINVAL, "bad item: longer than %d "
		    "bytes", INT32_MAX);
	if ((err = pg_begin(s)) != SAKER_OK)
		return err;
	if (!pg_arr_reserve(&s->put_name, 4 + q->len) ||
	    !pg_arr_reserve(&s->put_vis, 12) || !pg_arr_reserve(&s->put_due, 12) ||
	    !pg_arr_reserve(&s->put_flags, 12) || !pg_arr_reserve(&s->put_exp, 12) ||
	    !pg_arr_reserve(&s->put_created, 12) ||
	    !pg_arr_reserve(&s->put_crc, 12) || !pg_arr_reserve(&s->put_dlv, 12) ||
	    !pg_arr_reserve(&s->put_data, 4 + item->len) ||
	    !pg_arr_reserve(&s->put_attrs, 4 + item->attrs_len))
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	pg_saw(s, now_ms);
	due = item->due_ms > now_ms ? item->due_ms : 0;
	if (due != 0) {
		vis = due;
	} else {
		vis = now_ms > s->last_vis ? now_ms : s->last_vis;
		s->last_vis = vis;
	}
	/* the queue goes by name: P_QSYNC re-creates it if another broker
	 * deleted it meanwhile */
	pg_arr_put(&s->put_name, q->name, q->len);
	pg_arr_i64(&s->put_vis, vis);
	pg_arr_i64(&s->put_due, due);
	pg_arr_i64(&s->put_flags, (int64_t)item->flags);
	pg_arr_i64(&s->put_exp, item->expires_ms);
	created = item->created_ms != 0 ? item->created_ms : now_ms;
	pg_arr_i64(&s->put_created, created);
	pg_arr_put(&s->put_data, item->data, item->len);
	pg_arr_i64(&s->put_dlv, (int64_t)item->deliveries);
	/* empty: none (NULL in the row) */
	pg_arr_put(&s->put_attrs, item->attrs, item->attrs_len);
	pg_arr_i64(&s->put_crc, pg_item_crc(item->flags, item->expires_ms,
	    created, item->data, item->len, item->attrs, item->attrs_len));
	s->put_bytes += item->len;
	pg_mark_dirty(s, q);
	q->d_total++;
	saker_store_account(base, q, SAKER_ITEM_NONE, due != 0 ?
	    SAKER_ITEM_DELAYED : SAKER_ITEM_READY, item->len);
	if (due == 0)
		pg_gained(s, q);
	if (q->hint_gen == s->txn_gen && vis <= q->hint_vis)
		pg_unhint(q);
	if (s->put_bytes >= PG_PUT_FLUSH)
		return pg_flush(s);
	return SAKER_OK;
}

/* A view of the item in row `row` of res whose flags, created, data,
 * deliveries and attributes are in columns col[0..4] (the statements that
 * delete expired items return no more than that); a NULL one (a store
 * from before format 4 or 6) or one the row lacks reads as none. */
void
pg_row_view(const PGresult *res, int row, const int col[5],
    struct saker_item *it)
{
	int64_t d;

	memset(it, 0, sizeof(*it));
	it->flags = (uint32_t)pg_rv_i64(res, row, col[0]);
	it->created_ms = pg_rv_i64(res, row, col[1]);
	it->data = PQgetvalue(res, row, col[2]);
	it->len = (size_t)PQgetlength(res, row, col[2]);
	/* (asked out of range, libpq would print a notice) */
	d = PQnfields(res) > col[3] ? pg_rv_i64(res, row, col[3]) : 0;
	it->deliveries = d < 0 ? 0 : d > SAKER_DELIVERIES_MAX ?
	    SAKER_DELIVERIES_MAX : (uint32_t)d;
	if (PQnfields(res) > col[4] && !PQgetisnull(res, row, col[4])) {
		it->attrs = PQgetvalue(res, row, col[4]);
		it->attrs_len = (size_t)PQgetlength(res, row, col[4]);
	}
}

/* An item of ITEM_COLS rows, its bytes res's (pg_row_view()). */
void
pg_row_item(const PGresult *res, int row, struct saker_item *it,
    saker_item_state state)
{
	static const int cols[5] = { C_FLAGS, C_CREATED, C_DATA, C_DLV,
	    C_ATTRS };

	pg_row_view(res, row, cols, it);
	it->id = (uint64_t)pg_rv_i64(res, row, C_ID);
	it->expires_ms = pg_rv_i64(res, row, C_EXPIRES);
	if (state == SAKER_ITEM_DELAYED)
		it->due_ms = pg_rv_i64(res, row, C_DUE);
	it->state = state;
}

/* Does the item of this row (ITEM_COLS) hold its checksum?  Rows from
 * before format 3 (NULL) pass. */
bool
pg_row_sound(const PGresult *res, int row)
{
	uint32_t flags;

	if (PQgetisnull(res, row, C_CRC))
		return true;
	if (PQgetlength(res, row, C_CRC) != 8 ||
	    PQgetlength(res, row, C_FLAGS) != 8)
		return false;
	flags = (uint32_t)pg_rv_i64(res, row, C_FLAGS);
	/* flags are a u32 stored in a bigint: anything else is damage */
	if (pg_rv_i64(res, row, C_FLAGS) != (int64_t)flags)
		return false;
	return pg_rv_i64(res, row, C_CRC) == (int64_t)pg_item_crc(flags,
	    pg_rv_i64(res, row, C_EXPIRES), pg_rv_i64(res, row, C_CREATED),
	    PQgetvalue(res, row, C_DATA), (size_t)PQgetlength(res, row, C_DATA),
	    PQgetvalue(res, row, C_ATTRS),
	    (size_t)PQgetlength(res, row, C_ATTRS));
}

/*
 * Expired item `it` of q leaves q in this batch (the caller removes the
 * original): the layer routes it or drops it (saker_store_expired()),
 * and it is counted in q's expired_items when dropped.
 */
int
pg_expired_item(struct pg_store *s, struct saker_queue *q,
    const struct saker_item *it, int64_t now_ms)
{
	bool routed;
	int err;

	if ((err = saker_store_expired(&s->base, q, it, now_ms, &routed)) !=
	    SAKER_OK)
		return err;
	if (!routed)	/* routed: the layer counted it in expired_to */
		pg_expired(s, q, 1);
	return SAKER_OK;
}

/* Expired rows a statement already deleted (promotion, the sweep) could
 * not all be handed to the layer (err): they cannot be put back as they
 * were (the statement returned too little of them), so the batch is
 * rolled back, their deletes with it, rather than commit their loss. */
int
pg_expired_lost(struct pg_store *s, struct saker_queue *q, int err)
{
	if (saker_store_is_lost(&s->base))
		return err;	/* a failed statement rolled it back already */
	pg_errf(s, err, "postgres: queue '%.*s': an expired item could not be"
	    " moved (%s): the batch is rolled back, so that none is lost",
	    (int)q->len, q->name, saker_strerror(err));
	pg_lose_batch(s, err);
	return err;
}

/* Put back a removed item the caller refused, exactly as it was. */
int
pg_reinsert(struct pg_store *s, struct saker_queue *q, const PGresult *r)
{
	struct pgp p = { 0 };
	PGresult *res;

	pg_pp_i64(&p, q->id);
	pg_pp_i64(&p, pg_rv_i64(r, 0, 0));
	pg_pp_i64(&p, pg_rv_i64(r, 0, 4));
	pg_pp_i64(&p, pg_rv_i64(r, 0, 5));
	pg_pp_i64(&p, pg_rv_i64(r, 0, 1));
	pg_pp_i64(&p, pg_rv_i64(r, 0, 2));
	pg_pp_i64(&p, pg_rv_i64(r, 0, 3));
	pg_pp_i64(&p, PQgetlength(r, 0, 6));
	pg_pp_bin(&p, PQgetvalue(r, 0, 6), (size_t)PQgetlength(r, 0, 6));
	if (PQgetisnull(r, 0, C_CRC))
		pg_pp_null(&p);	/* from before format 3: stays unchecked */
	else
		pg_pp_i64(&p, pg_rv_i64(r, 0, C_CRC));
	pg_pp_i64(&p, pg_rv_i64(r, 0, C_DLV));
	if (PQgetisnull(r, 0, C_ATTRS))
		pg_pp_null(&p);
	else
		pg_pp_bin(&p, PQgetvalue(r, 0, C_ATTRS),
		    (size_t)PQgetlength(r, 0, C_ATTRS));
	if ((res = pg_run(s, P_REINSERT, &p, "returning item")) == NULL)
		return s->code;
	PQclear(res);
	return SAKER_OK;
}

/* A take's head row res (ITEM_COLS), removed (REMOVE) or leased to us
 * (OPEN) by its statement, goes back as it was: the caller refused it, or
 * it could not be moved.  A peek changed nothing. */
int
pg_head_back(struct pg_store *s, struct saker_queue *q, int mode,
    const PGresult *res)
{
	if (mode == SAKER_TAKE_PEEK)
		return SAKER_OK;
	if (mode == SAKER_TAKE_OPEN)
		return pg_st_add(s, q->id, (uint64_t)pg_rv_i64(res, 0, C_ID), 0);
	return pg_reinsert(s, q, res);
}
