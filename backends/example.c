/*
 * example.c -- the smallest complete store driver, written from
 * include/saker/store.h alone (docs/drivers.md walks through it).
 *
 * Not durable, no options, no location: the spec is "example".  It keeps
 * everything in plain linked lists, so every lookup is a linear scan: it
 * is documentation and a second implementation for the conformance suite
 * and the store fuzzer, not a store for production (it is built into the
 * test programs only, never into sakerd or saker).
 *
 * Layout
 *   A queue has two lists of items: ready (the FIFO, head first) and open
 *   (oldest first).  Delayed items of every queue are on one store-wide
 *   list sorted by (due time, arrival), so promote() looks at its head
 *   only.  Each item is one allocation (header and data) and is on exactly
 *   one list.  Ids come from one store-wide counter; an item gets a new id
 *   when it is opened, so the open list stays sorted by id.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "saker/store.h"

struct ex_item {
	struct ex_item *next;
	struct saker_queue *q;   /* its queue (the delayed list mixes them) */
	uint64_t id;
	uint32_t flags, deliveries;
	int64_t expires_ms, due_ms, created_ms;
	size_t len, attrs_len;    /* the attributes follow the data */
	unsigned char data[];
};

/* A deduplication record: a linear list per queue, like everything here */
struct ex_id {
	struct ex_id *next;
	int64_t expires_ms;
	size_t len;
	unsigned char key[];
};

/* A singly linked list with a tail, for appending. */
struct ex_list {
	struct ex_item *head, *tail;
};

/* store.h declares struct saker_queue opaque: each driver defines it. */
struct saker_queue {
	struct saker_queue_base base; /* the layer's (store.h): first */
	struct saker_queue *next; /* the store's list of queues */
	void *ctx;                /* the core's, given back in notify() */
	struct ex_list ready, open;
	struct ex_id *ids;        /* deduplication records, newest first */
	/* total_items and expired_items; the layer counts items, bytes,
	 * delayed and open from what the calls below tell it (store.h,
	 * COUNTERS) */
	struct saker_queue_stats st;
	size_t len;
	char name[];
};

struct ex_store {
	saker_store base;         /* first member: the registry's view */
	saker_notify_fn notify;
	void *notify_arg;
	struct saker_queue *queues;
	struct ex_list delayed;   /* every queue's, by (due_ms, arrival) */
	uint64_t last_id;
	const char *err;          /* errmsg(): a fixed string, no formatting */
};

#define EX(s) ((struct ex_store *)(s))

extern const struct saker_store_driver saker_store_example;

/* ------------------------------------------------------------------ */
/* lists and items */

static void
list_append(struct ex_list *l, struct ex_item *it)
{
	it->next = NULL;
	if (l->tail != NULL)
		l->tail->next = it;
	else
		l->head = it;
	l->tail = it;
}

static void
list_push_head(struct ex_list *l, struct ex_item *it)
{
	it->next = l->head;
	l->head = it;
	if (l->tail == NULL)
		l->tail = it;
}

/* Unlink the item after `prev` (NULL: the head) and return it. */
static struct ex_item *
list_unlink(struct ex_list *l, struct ex_item *prev)
{
	struct ex_item *it = prev != NULL ? prev->next : l->head;

	if (prev != NULL)
		prev->next = it->next;
	else
		l->head = it->next;
	if (l->tail == it)
		l->tail = prev;
	it->next = NULL;
	return it;
}

/* The open item `id` of q, unlinked; NULL if there is none. */
static struct ex_item *
open_unlink(saker_store *s, struct saker_queue *q, uint64_t id)
{
	struct ex_item *it, *prev = NULL;

	for (it = q->open.head; it != NULL; prev = it, it = it->next)
		if (it->id == id) {
			saker_store_account(s, q, SAKER_ITEM_OPEN,
			    SAKER_ITEM_NONE, it->len);
			return list_unlink(&q->open, prev);
		}
	return NULL;
}

/* Insert into the delayed list after every item due at or before it, so
 * items with the same due time keep their arrival order. */
static void
delayed_insert(struct ex_store *es, struct ex_item *it)
{
	struct ex_item *prev = NULL, *cur = es->delayed.head;

	while (cur != NULL && cur->due_ms <= it->due_ms) {
		prev = cur;
		cur = cur->next;
	}
	if (prev == NULL)
		list_push_head(&es->delayed, it);
	else {
		it->next = cur;
		prev->next = it;
		if (cur == NULL)
			es->delayed.tail = it;
	}
	saker_store_account(&es->base, it->q, SAKER_ITEM_NONE,
	    SAKER_ITEM_DELAYED, it->len);
}

static void
ready_append(saker_store *s, struct saker_queue *q, struct ex_item *it)
{
	list_append(&q->ready, it);
	saker_store_account(s, q, SAKER_ITEM_NONE, SAKER_ITEM_READY, it->len);
}

static void
ready_push_head(saker_store *s, struct saker_queue *q, struct ex_item *it)
{
	list_push_head(&q->ready, it);
	saker_store_account(s, q, SAKER_ITEM_NONE, SAKER_ITEM_READY, it->len);
}

static struct ex_item *
ready_pop(saker_store *s, struct saker_queue *q)
{
	struct ex_item *it = list_unlink(&q->ready, NULL);

	saker_store_account(s, q, SAKER_ITEM_READY, SAKER_ITEM_NONE, it->len);
	return it;
}

static void view(const struct ex_item *it, saker_item_state state,
    struct saker_item *v);

/* Item `it` of q expired: the layer puts a copy into q's expire_to queue
 * or drops it (store.h, saker_store_expired); the caller then unlinks and
 * frees it.  An error: it stays where it is, the caller returns it. */
static int
ex_expired(saker_store *s, saker_queue *q, const struct ex_item *it,
    int64_t now_ms)
{
	struct saker_item v;
	bool routed;
	int rc;

	view(it, SAKER_ITEM_READY, &v);
	if ((rc = saker_store_expired(s, q, &v, now_ms, &routed)) != SAKER_OK)
		return rc;
	if (!routed)	/* a routed one the layer counted */
		q->st.expired_items++;
	return SAKER_OK;
}

/* q gained a ready item.  Said for every item: the layer wakes each
 * queue once per call (store.h, the notify contract). */
static void
notify(struct ex_store *es, struct saker_queue *q)
{
	if (es->notify != NULL)
		es->notify(es->notify_arg, q, q->ctx);
}

/* The caller's view of an item: points into ours, no copy. */
static void
view(const struct ex_item *it, saker_item_state state, struct saker_item *v)
{
	v->id = it->id;
	v->flags = it->flags;
	v->expires_ms = it->expires_ms;
	v->due_ms = it->due_ms;
	v->created_ms = it->created_ms;
	v->deliveries = it->deliveries;
	v->state = state;
	v->len = it->len;
	v->data = it->data;
	v->attrs_len = it->attrs_len;
	v->attrs = it->attrs_len > 0 ? it->data + it->len : NULL;
}

static void
free_ids(struct saker_queue *q)
{
	while (q->ids != NULL) {
		struct ex_id *next = q->ids->next;

		free(q->ids);
		q->ids = next;
	}
}

static void
free_list(struct ex_item *it)
{
	while (it != NULL) {
		struct ex_item *next = it->next;

		free(it);
		it = next;
	}
}

/* ------------------------------------------------------------------ */
/* open, close, errmsg */

static int
ex_open(const char *location, const struct saker_store_opts *opts,
    saker_store **out, char *err, size_t errlen)
{
	struct ex_store *es;

	(void)location;          /* location_help NULL: the registry refuses one */
	*out = NULL;
	if (opts->read_only) {
		snprintf(err, errlen, "example: not durable, nothing to read");
		return SAKER_EINVAL;
	}
	if ((es = calloc(1, sizeof(*es))) == NULL) {
		snprintf(err, errlen, "example: out of memory");
		return SAKER_ENOMEM;
	}
	es->base.driver = &saker_store_example;
	es->notify = opts->notify;
	es->notify_arg = opts->notify_arg;
	es->err = "no error";
	*out = &es->base;
	return SAKER_OK;
}

static void
ex_close(saker_store *s)
{
	struct ex_store *es = EX(s);
	struct saker_queue *q, *next;

	if (es == NULL)
		return;
	for (q = es->queues; q != NULL; q = next) {
		next = q->next;
		free_list(q->ready.head);
		free_list(q->open.head);
		free_ids(q);
		free(q);
	}
	free_list(es->delayed.head);
	free(es);
}

static const char *
ex_errmsg(saker_store *s)
{
	return EX(s)->err;
}

/* Set errmsg() and return the code. */
static int
fail(struct ex_store *es, int rc, const char *why)
{
	es->err = why;
	return rc;
}

/* ------------------------------------------------------------------ */
/* queues */

static int
ex_queue_open(saker_store *s, const char *name, size_t len, bool create,
    void *queue_ctx, saker_queue **out)
{
	struct ex_store *es = EX(s);
	struct saker_queue *q;

	for (q = es->queues; q != NULL; q = q->next)
		if (q->len == len && memcmp(q->name, name, len) == 0)
			break;
	if (q == NULL && !create)
		return fail(es, SAKER_ENOTFOUND, "no such queue");
	if (q == NULL) {
		if ((q = calloc(1, sizeof(*q) + len)) == NULL)
			return fail(es, SAKER_ENOMEM, "out of memory");
		memcpy(q->name, name, len);
		q->len = len;
		q->next = es->queues;
		es->queues = q;
	}
	if (queue_ctx != NULL)	/* NULL keeps it: the layer opens queues too */
		q->ctx = queue_ctx;
	*out = q;
	return SAKER_OK;
}

/* Free every item of q (ready, open, delayed); keep its totals. */
static int
ex_queue_flush(saker_store *s, saker_queue *q)
{
	struct ex_store *es = EX(s);
	struct ex_item *it = es->delayed.head, *prev = NULL;

	free_list(q->ready.head);
	free_list(q->open.head);
	q->ready.head = q->ready.tail = q->open.head = q->open.tail = NULL;
	while (it != NULL) {
		if (it->q != q) {
			prev = it;
			it = it->next;
			continue;
		}
		free(list_unlink(&es->delayed, prev));
		it = prev != NULL ? prev->next : es->delayed.head;
	}
	return SAKER_OK;	/* (the layer zeroes its counters) */
}

static int
ex_queue_delete(saker_store *s, saker_queue *q)
{
	struct ex_store *es = EX(s);
	struct saker_queue **pp;

	ex_queue_flush(s, q);
	for (pp = &es->queues; *pp != q; pp = &(*pp)->next)
		;
	*pp = q->next;
	free_ids(q);
	free(q);
	return SAKER_OK;
}

static int
ex_queues(saker_store *s, saker_queue_name_fn fn, void *arg)
{
	struct saker_queue *q;

	for (q = EX(s)->queues; q != NULL; q = q->next)
		if (fn(arg, q->name, q->len) != 0)
			break;
	return SAKER_OK;
}

static int
ex_queue_stats(saker_store *s, saker_queue *q, struct saker_queue_stats *st)
{
	(void)s;
	memset(st, 0, sizeof(*st));
	st->total_items = q->st.total_items;
	st->expired_items = q->st.expired_items;
	st->head_created_ms = q->ready.head != NULL ?
	    q->ready.head->created_ms : 0;
	return SAKER_OK;
}

/* ------------------------------------------------------------------ */
/* put, take, confirm, release */

static int
ex_put(saker_store *s, saker_queue *q, const struct saker_item *item,
    int64_t now_ms)
{
	struct ex_store *es = EX(s);
	struct ex_item *it;

	/* the item: saker_store_put() checked it (no data, attributes
	 * missing or too long) */
	if ((it = malloc(sizeof(*it) + item->len + item->attrs_len)) == NULL)
		return fail(es, SAKER_ENOMEM, "out of memory");
	if (item->len > 0)
		memcpy(it->data, item->data, item->len);
	if (item->attrs_len > 0)
		memcpy(it->data + item->len, item->attrs, item->attrs_len);
	it->len = item->len;
	it->attrs_len = item->attrs_len;
	it->q = q;
	it->id = ++es->last_id;
	it->flags = item->flags;
	it->deliveries = item->deliveries < SAKER_DELIVERIES_MAX ?
	    item->deliveries : SAKER_DELIVERIES_MAX;
	it->expires_ms = item->expires_ms;
	it->due_ms = item->due_ms;
	it->created_ms = item->created_ms != 0 ? item->created_ms : now_ms;
	q->st.total_items++;
	if (it->due_ms > now_ms) {
		delayed_insert(es, it);
		return SAKER_OK;
	}
	ready_append(s, q, it);
	notify(es, q);
	return SAKER_OK;
}

static int
ex_take(saker_store *s, saker_queue *q, int mode, int64_t now_ms,
    saker_item_fn fn, void *arg)
{
	struct ex_store *es = EX(s);
	struct ex_item *it;
	struct saker_item v;
	int rc;

	/* expired items met at the head go (routed or dropped) */
	while (q->ready.head != NULL &&
	    saker_item_expired(q->ready.head->expires_ms, now_ms)) {
		if ((rc = ex_expired(s, q, q->ready.head, now_ms)) != SAKER_OK)
			return rc;
		free(ready_pop(s, q));
	}
	if ((it = q->ready.head) == NULL)
		return SAKER_EEMPTY;
	view(it, mode == SAKER_TAKE_OPEN ? SAKER_ITEM_OPEN : SAKER_ITEM_READY, &v);
	if (mode == SAKER_TAKE_OPEN) {
		/* what the item will be once opened: a new id, one more
		 * delivery; kept only if fn accepts it */
		v.id = es->last_id + 1;
		v.deliveries = saker_store_handout(v.deliveries);
	}
	if ((rc = fn(arg, &v)) != 0 || mode == SAKER_TAKE_PEEK)
		return rc;
	ready_pop(s, q);
	if (mode == SAKER_TAKE_REMOVE) {
		free(it);
		return SAKER_OK;
	}
	it->id = ++es->last_id;
	it->deliveries = v.deliveries;
	list_append(&q->open, it);
	saker_store_account(s, q, SAKER_ITEM_NONE, SAKER_ITEM_OPEN, it->len);
	return SAKER_OK;
}

static int
ex_confirm(saker_store *s, saker_queue *q, uint64_t id)
{
	struct ex_item *it = open_unlink(s, q, id);

	if (it == NULL)
		return fail(EX(s), SAKER_ENOTFOUND, "no such open item");
	free(it);
	return SAKER_OK;
}

static int
ex_release(saker_store *s, saker_queue *q, uint64_t id)
{
	struct ex_item *it = open_unlink(s, q, id);

	if (it == NULL)
		return fail(EX(s), SAKER_ENOTFOUND, "no such open item");
	ready_push_head(s, q, it);
	notify(EX(s), q);
	return SAKER_OK;
}

static int
ex_release_delayed(saker_store *s, saker_queue *q, uint64_t id,
    int64_t due_ms, int64_t now_ms)
{
	struct ex_store *es = EX(s);
	struct ex_item *it;

	if (due_ms <= now_ms)
		return ex_release(s, q, id);
	if ((it = open_unlink(s, q, id)) == NULL)
		return fail(es, SAKER_ENOTFOUND, "no such open item");
	it->due_ms = due_ms;
	it->id = ++es->last_id;  /* arrival order, as if put now */
	delayed_insert(es, it);
	return SAKER_OK;
}

static int
ex_move(saker_store *s, saker_queue *q, uint64_t id, saker_queue *to)
{
	struct ex_item *it;

	if (to == q)
		return fail(EX(s), SAKER_EINVAL, "move to the same queue");
	if ((it = open_unlink(s, q, id)) == NULL)
		return fail(EX(s), SAKER_ENOTFOUND, "no such open item");
	it->q = to;
	ready_append(s, to, it);
	to->st.total_items++;
	notify(EX(s), to);
	return SAKER_OK;
}

/* ------------------------------------------------------------------ */
/* delayed items and expiry */

static int
ex_promote(saker_store *s, int64_t now_ms, int64_t *next_due_ms)
{
	struct ex_store *es = EX(s);
	struct saker_queue *q;

	int rc = SAKER_OK;

	while (es->delayed.head != NULL && es->delayed.head->due_ms <= now_ms) {
		struct ex_item *it = es->delayed.head;

		q = it->q;
		/* (an item the layer could not route stays due, for the
		 * next call) */
		if (saker_item_expired(it->expires_ms, now_ms) &&
		    (rc = ex_expired(s, q, it, now_ms)) != SAKER_OK)
			break;
		list_unlink(&es->delayed, NULL);
		saker_store_account(s, q, SAKER_ITEM_DELAYED, SAKER_ITEM_NONE,
		    it->len);
		if (saker_item_expired(it->expires_ms, now_ms)) {
			free(it);
			continue;
		}
		ready_append(s, q, it);
		notify(es, q);
	}
	*next_due_ms = es->delayed.head != NULL ? es->delayed.head->due_ms : 0;
	return rc;
}

static int
ex_flush_expired(saker_store *s, saker_queue *q, int64_t now_ms,
    uint64_t limit, uint64_t *removed)
{
	struct ex_item *it = q->ready.head, *prev = NULL;
	uint64_t seen = 0;
	int rc;

	*removed = 0;
	while (it != NULL && (limit == 0 || seen++ < limit)) {
		if (!saker_item_expired(it->expires_ms, now_ms)) {
			prev = it;
			it = it->next;
			continue;
		}
		if ((rc = ex_expired(s, q, it, now_ms)) != SAKER_OK)
			return rc;
		saker_store_account(s, q, SAKER_ITEM_READY, SAKER_ITEM_NONE,
		    it->len);
		(*removed)++;
		free(list_unlink(&q->ready, prev));
		it = prev != NULL ? prev->next : q->ready.head;
	}
	return SAKER_OK;
}

/* ------------------------------------------------------------------ */
/* deduplication ids: linear scans of the queue's list */

/* The link that points at q's record of key (the one after the last
 * record when there is none). */
static struct ex_id **
id_find(struct saker_queue *q, const void *key, size_t len)
{
	struct ex_id **pp;

	for (pp = &q->ids; *pp != NULL; pp = &(*pp)->next)
		if ((*pp)->len == len && memcmp((*pp)->key, key, len) == 0)
			break;
	return pp;
}

static int
ex_dedup_put(saker_store *s, saker_queue *q, const void *key, size_t len,
    int64_t expires_ms, int64_t now_ms, bool *replaced)
{
	struct ex_id *d = *id_find(q, key, len);

	*replaced = d != NULL;
	if (d != NULL) {
		if (d->expires_ms > now_ms)
			return SAKER_EEXIST;
		d->expires_ms = expires_ms;
		return SAKER_OK;
	}
	if ((d = malloc(sizeof(*d) + len)) == NULL)
		return fail(EX(s), SAKER_ENOMEM, "out of memory");
	d->expires_ms = expires_ms;
	d->len = len;
	memcpy(d->key, key, len);
	d->next = q->ids;
	q->ids = d;
	return SAKER_OK;
}

static int
ex_dedup_del(saker_store *s, saker_queue *q, const void *key, size_t len)
{
	struct ex_id **pp = id_find(q, key, len), *d = *pp;

	if (d == NULL)
		return fail(EX(s), SAKER_ENOTFOUND, "no such id");
	*pp = d->next;
	free(d);
	return SAKER_OK;
}

/* (oldest expiry first is the contract; a whole scan per removal keeps
 * this driver short, not fast) */
static int
ex_dedup_sweep(saker_store *s, saker_queue *q, int64_t now_ms,
    uint64_t limit, uint64_t *removed)
{
	struct ex_id **pp, **oldest, *d;

	(void)s;
	*removed = 0;
	while (limit == 0 || *removed < limit) {
		oldest = NULL;
		for (pp = &q->ids; *pp != NULL; pp = &(*pp)->next)
			if ((*pp)->expires_ms <= now_ms && (oldest == NULL ||
			    (*pp)->expires_ms < (*oldest)->expires_ms))
				oldest = pp;
		if (oldest == NULL)
			break;
		d = *oldest;
		*oldest = d->next;
		free(d);
		(*removed)++;
	}
	return SAKER_OK;
}

static int
ex_dedup_iterate(saker_store *s, saker_queue *q, saker_dedup_fn fn,
    void *arg)
{
	struct ex_id *d;
	int rc;

	(void)s;
	for (d = q->ids; d != NULL; d = d->next)
		if ((rc = fn(arg, d->key, d->len, d->expires_ms)) != 0)
			return rc;
	return SAKER_OK;
}

/* ------------------------------------------------------------------ */
/* iterate, commit */

/* Hand every item of `head`'s list that belongs to q to fn. */
static int
iterate_list(const struct ex_item *head, saker_queue *q,
    saker_item_state state, saker_item_fn fn, void *arg)
{
	struct saker_item v;
	int rc;

	for (; head != NULL; head = head->next) {
		if (head->q != q)
			continue;
		view(head, state, &v);
		if ((rc = fn(arg, &v)) != 0)
			return rc;
	}
	return 0;
}

static int
ex_iterate(saker_store *s, saker_queue *q, saker_item_fn fn, void *arg)
{
	int rc;

	if ((rc = iterate_list(q->open.head, q, SAKER_ITEM_OPEN, fn, arg)) != 0 ||
	    (rc = iterate_list(q->ready.head, q, SAKER_ITEM_READY, fn, arg)) != 0)
		return rc;
	return iterate_list(EX(s)->delayed.head, q, SAKER_ITEM_DELAYED, fn, arg);
}

/* Nothing is ever written anywhere, so a batch cannot fail: every call
 * took effect when it returned and commit() has nothing to do. */
static int
ex_commit(saker_store *s)
{
	(void)s;
	return SAKER_OK;
}

const struct saker_store_driver saker_store_example = {
	.name = "example",
	.location_help = NULL,
	.durable = false,
	.options = NULL,
	.open = ex_open,
	.close = ex_close,
	.errmsg = ex_errmsg,
	.queue_open = ex_queue_open,
	.queue_delete = ex_queue_delete,
	.queue_flush = ex_queue_flush,
	.queues = ex_queues,
	.queue_stats = ex_queue_stats,
	.put = ex_put,
	.take = ex_take,
	.confirm = ex_confirm,
	.release = ex_release,
	.release_delayed = ex_release_delayed,
	.move = ex_move,
	.expire_to = saker_store_keep_expire_to, /* the layer routes */
	.promote = ex_promote,
	.flush_expired = ex_flush_expired,
	.iterate = ex_iterate,
	.dedup_put = ex_dedup_put,
	.dedup_del = ex_dedup_del,
	.dedup_sweep = ex_dedup_sweep,
	.dedup_iterate = ex_dedup_iterate,
	.commit = ex_commit,
	/* optional, left NULL: sync, store_stats, watch_fd, fd_ready,
	 * tick */
};
