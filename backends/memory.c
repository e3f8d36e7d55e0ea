/* memory.c -- the in-memory store driver: fast, not durable. */
#include "config.h"

#include <sys/queue.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "saker/store.h"
#include "hashmap.h"
#include "intmap.h"
#include "kit.h"

/*
 * Layout
 *   Every item is one allocation (header + data) and sits on exactly one of
 *   its queue's three intrusive doubly linked lists: ready (FIFO), open
 *   (sorted by id) or delayed (unordered).  Delayed items are also in one
 *   store-wide binary min-heap keyed by (due_ms, id), so promote() looks at
 *   the heap top only and knows the global next due time at once.  Ids come
 *   from one store-wide counter, so an id is also the arrival order.
 *   Open items are found by id through one store-wide hash table; queues by
 *   name through src/util's hashmap (keyed per process).  The handle given to every item call is the queue
 *   itself, so the hot path (put/take) never hashes.
 */

#define ITEM_READY   0
#define ITEM_DELAYED 1
#define ITEM_OPEN    2
#define ITEM_NONE    3    /* on no list (the values are saker_item_state's) */

struct mitem {
	TAILQ_ENTRY(mitem) link;
	struct saker_queue *q;
	uint64_t id;
	int64_t expires_ms;
	int64_t due_ms;          /* only meaningful while delayed */
	int64_t created_ms;
	size_t len;
	size_t heap_idx;         /* position in the delay heap while delayed */
	uint32_t flags;
	uint32_t state;
	uint32_t deliveries;     /* take(OPEN) hand-outs (store.h) */
	uint32_t attrs_len;      /* the attributes follow the data */
	unsigned char data[];
};

/* A deduplication record (store.h, DEDUPLICATION): in its queue's map by
 * key and on its queue's list in expiry order, so a sweep looks at the
 * head only. */
struct mdedup {
	TAILQ_ENTRY(mdedup) link;
	int64_t expires_ms;
	size_t len;
	char key[];
};

TAILQ_HEAD(dlist, mdedup);

TAILQ_HEAD(mlist, mitem);

struct saker_queue {
	struct saker_queue_base base; /* the layer's (store.h): first */
	struct mlist ready;
	struct mlist open;       /* sorted by id: oldest first */
	struct mlist delayed;    /* unordered; the heap holds the order */
	struct hashmap *ids;     /* deduplication key -> struct mdedup *,
	                          * made at the first id */
	struct dlist idlist;     /* the same records, by expiry */
	uint64_t nids;           /* how many: dedup_count(), O(1) */
	/* items, bytes, delayed and open are the layer's (store.h,
	 * COUNTERS); these three it asks the driver for */
	uint64_t total, expired;
	uint64_t ndelayed;       /* on `delayed`: sizes iterate()'s sort */
	uint64_t nexpiring;      /* ready items with an expiry time */
	void *ctx;
	size_t namelen;
	char name[];
};

/* A delay-heap entry: the key travels with the pointer. */
struct hent {
	int64_t due_ms;
	uint64_t id;
	struct mitem *it;
};

struct mstore {
	saker_store base;
	struct saker_store_opts opts; /* optvals, driver_opts cleared */
	uint64_t max_memory;         /* max-memory=; 0 = unlimited */
	const char *err;

	struct hashmap *queues;      /* name -> struct saker_queue * */

	struct intmap open;          /* open items by id */

	struct hent *heap;           /* delayed items, min by (due, id) */
	size_t hlen;
	size_t hcap;

	uint64_t next_id;
	uint64_t mem_used;           /* item data + per-item overhead */
};

#define MS(s) ((struct mstore *)(s))

extern const struct saker_store_driver saker_store_memory;

static const char ERR_NOMEM[] = "out of memory";

static int
fail(struct mstore *ms, int code, const char *msg)
{
	ms->err = msg;
	return code;
}

/* The checks of every call that changes queue q. */
static int
writable(struct mstore *ms, const struct saker_queue *q)
{
	if (q == NULL)
		return fail(ms, SAKER_EINVAL, "no queue");
	return SAKER_OK;	/* a read-only store: the layer refused */
}

/* q gained a ready item: the layer wakes each queue once per call
 * (store.h, the notify contract), so this is said for every item. */
static void
notify(struct mstore *ms, struct saker_queue *q)
{
	if (ms->opts.notify != NULL)
		ms->opts.notify(ms->opts.notify_arg, q, q->ctx);
}

/* ------------------------------------------------------------------ */
/* item lists */

/* Insert keeping the list sorted by id.  Items are nearly always opened in
 * id order, so the walk from the tail usually stops at once. */
static void
list_insert_sorted(struct mlist *l, struct mitem *it)
{
	struct mitem *after = TAILQ_LAST(l, mlist);

	while (after != NULL && after->id > it->id)
		after = TAILQ_PREV(after, mlist, link);
	if (after == NULL)
		TAILQ_INSERT_HEAD(l, it, link);
	else
		TAILQ_INSERT_AFTER(l, after, it, link);
}

/* Item `it` of queue it->q goes to state `to`: the layer counts it. */
static void
restate(struct mstore *ms, struct mitem *it, uint32_t to)
{
	saker_store_account(&ms->base, it->q, (saker_item_state)it->state,
	    (saker_item_state)to, it->len);
	it->state = to;
}

/* A released item goes back to the head, every other one to the tail.
 * it->q is q; it is on no list (ITEM_NONE). */
static void
ready_push(struct mstore *ms, struct saker_queue *q, struct mitem *it,
    bool head)
{
	restate(ms, it, ITEM_READY);
	it->due_ms = 0;
	if (head)
		TAILQ_INSERT_HEAD(&q->ready, it, link);
	else
		TAILQ_INSERT_TAIL(&q->ready, it, link);
	q->nexpiring += it->expires_ms != 0;
}

static void
ready_unlink(struct mstore *ms, struct saker_queue *q, struct mitem *it)
{
	TAILQ_REMOVE(&q->ready, it, link);
	restate(ms, it, ITEM_NONE);
	q->nexpiring -= it->expires_ms != 0;
}

static size_t
item_cost(size_t len, size_t attrs_len)
{
	return sizeof(struct mitem) + len + attrs_len;
}

static void
item_free(struct mstore *ms, struct mitem *it)
{
	ms->mem_used -= item_cost(it->len, it->attrs_len);
	free(it);
}

static void
item_view(const struct mitem *it, struct saker_item *v)
{
	v->id = it->id;
	v->flags = it->flags;
	v->expires_ms = it->expires_ms;
	v->due_ms = it->state == ITEM_DELAYED ? it->due_ms : 0;
	v->created_ms = it->created_ms;
	v->state = it->state == ITEM_OPEN ? SAKER_ITEM_OPEN :
	    it->state == ITEM_DELAYED ? SAKER_ITEM_DELAYED : SAKER_ITEM_READY;
	v->deliveries = it->deliveries;
	v->len = it->len;
	v->data = it->data;
	v->attrs_len = it->attrs_len;
	v->attrs = it->attrs_len > 0 ? it->data + it->len : NULL;
}

/* ------------------------------------------------------------------ */
/* the delay heap */

/*
 * A 4-ary min-heap whose entries carry their own keys: sifting compares
 * inside the (contiguous) array instead of chasing item pointers, and is
 * half as deep as a binary heap.  Each item knows its index so a queue's
 * delayed items can be removed from the middle on delete/flush.
 */
#define HEAP_D 4

static bool
key_less(int64_t due_a, uint64_t id_a, int64_t due_b, uint64_t id_b)
{
	if (due_a != due_b)
		return due_a < due_b;
	return id_a < id_b;
}

static bool
ent_less(const struct hent *a, const struct hent *b)
{
	return key_less(a->due_ms, a->id, b->due_ms, b->id);
}

static void
heap_set(struct mstore *ms, size_t i, const struct hent *e)
{
	ms->heap[i] = *e;
	e->it->heap_idx = i;
}

static void
heap_sift_up(struct mstore *ms, size_t i)
{
	struct hent e = ms->heap[i];

	while (i > 0) {
		size_t parent = (i - 1) / HEAP_D;
		if (!ent_less(&e, &ms->heap[parent]))
			break;
		heap_set(ms, i, &ms->heap[parent]);
		i = parent;
	}
	heap_set(ms, i, &e);
}

static void
heap_sift_down(struct mstore *ms, size_t i)
{
	struct hent e = ms->heap[i];
	size_t n = ms->hlen;

	for (;;) {
		size_t c = HEAP_D * i + 1, best, k, end;

		if (c >= n)
			break;
		best = c;
		end = c + HEAP_D < n ? c + HEAP_D : n;
		for (k = c + 1; k < end; k++)
			if (ent_less(&ms->heap[k], &ms->heap[best]))
				best = k;
		if (!ent_less(&ms->heap[best], &e))
			break;
		heap_set(ms, i, &ms->heap[best]);
		i = best;
	}
	heap_set(ms, i, &e);
}

static int
heap_push(struct mstore *ms, struct mitem *it)
{
	if (ms->hlen == ms->hcap) {
		size_t ncap = ms->hcap != 0 ? ms->hcap * 2 : 64;
		struct hent *nh;

		if (ncap > SIZE_MAX / sizeof(*nh))
			return SAKER_ENOMEM;
		nh = realloc(ms->heap, ncap * sizeof(*nh));
		if (nh == NULL)
			return SAKER_ENOMEM;
		ms->heap = nh;
		ms->hcap = ncap;
	}
	ms->heap[ms->hlen++] = (struct hent){ it->due_ms, it->id, it };
	heap_sift_up(ms, ms->hlen - 1);
	return SAKER_OK;
}

static void
heap_remove(struct mstore *ms, struct mitem *it)
{
	size_t i = it->heap_idx;

	ms->hlen--;
	if (i == ms->hlen)
		return;
	ms->heap[i] = ms->heap[ms->hlen];
	if (i > 0 && ent_less(&ms->heap[i], &ms->heap[(i - 1) / HEAP_D]))
		heap_sift_up(ms, i);
	else
		heap_sift_down(ms, i);
}

/* Drop every delayed item of q from the heap.  When q holds a large share
 * of the heap, one compaction pass and a rebuild beat many removals. */
static void
heap_remove_queue(struct mstore *ms, struct saker_queue *q)
{
	struct mitem *it;
	size_t i, j;

	if (q->ndelayed < 64 || q->ndelayed < ms->hlen / 8) {
		TAILQ_FOREACH(it, &q->delayed, link)
			heap_remove(ms, it);
		return;
	}
	for (i = 0, j = 0; i < ms->hlen; i++)
		if (ms->heap[i].it->q != q)
			heap_set(ms, j++, &ms->heap[i]);
	ms->hlen = j;
	for (i = ms->hlen / HEAP_D + 1; i-- > 0;)
		if (i < ms->hlen)
			heap_sift_down(ms, i);
}

/* ------------------------------------------------------------------ */
/* queues by name */

/* Free every item of q's lists; `tables`: take them out of the heap and
 * the open table too (not when the whole store goes). */
static void
queue_items_free(struct mstore *ms, struct saker_queue *q, bool tables)
{
	struct mlist *lists[] = { &q->ready, &q->open, &q->delayed };
	struct mitem *it, *next;
	size_t l;

	if (tables)
		heap_remove_queue(ms, q);
	for (l = 0; l < sizeof(lists) / sizeof(lists[0]); l++) {
		for (it = TAILQ_FIRST(lists[l]); it != NULL; it = next) {
			next = TAILQ_NEXT(it, link);
			if (tables && lists[l] == &q->open)
				intmap_del(&ms->open, it->id);
			item_free(ms, it);
		}
		TAILQ_INIT(lists[l]);
	}
}

/* Free every item of q and reset its item counters (not total/expired). */
static void
queue_clear(struct mstore *ms, struct saker_queue *q)
{
	queue_items_free(ms, q, true);	/* the layer zeroes its counters */
	q->nexpiring = 0;
	q->ndelayed = 0;
}

/* ------------------------------------------------------------------ */
/* deduplication ids */

static size_t
id_cost(size_t len)
{
	/* the record, and the map's copy of the key with its slot */
	return sizeof(struct mdedup) + 2 * len + 32;
}

static void
id_free(struct mstore *ms, struct saker_queue *q, struct mdedup *d)
{
	TAILQ_REMOVE(&q->idlist, d, link);
	hashmap_del(q->ids, d->key, d->len);
	ms->mem_used -= id_cost(d->len);
	q->nids--;
	free(d);
}

/* After d's expiry changed or it was made: its place on the list, which
 * stays in expiry order (from the tail: with one window per queue a new
 * record goes last). */
static void
id_place(struct saker_queue *q, struct mdedup *d)
{
	struct mdedup *after = TAILQ_LAST(&q->idlist, dlist);

	while (after != NULL && after->expires_ms > d->expires_ms)
		after = TAILQ_PREV(after, dlist, link);
	if (after == NULL)
		TAILQ_INSERT_HEAD(&q->idlist, d, link);
	else
		TAILQ_INSERT_AFTER(&q->idlist, after, d, link);
}

static void
ids_free(struct mstore *ms, struct saker_queue *q)
{
	struct mdedup *d;

	while ((d = TAILQ_FIRST(&q->idlist)) != NULL)
		id_free(ms, q, d);
	hashmap_free(q->ids);
	q->ids = NULL;
}

static int
mem_dedup_put(saker_store *s, saker_queue *q, const void *key, size_t len,
    int64_t expires_ms, int64_t now_ms, bool *replaced)
{
	struct mstore *ms = MS(s);
	struct mdedup *d;
	int rc;

	*replaced = false;
	if ((rc = writable(ms, q)) != SAKER_OK)
		return rc;
	if (key == NULL || len == 0 || len > SAKER_DEDUP_KEY_MAX)
		return fail(ms, SAKER_EINVAL, "bad deduplication id");
	if (q->ids == NULL && (q->ids = hashmap_new()) == NULL)
		return fail(ms, SAKER_ENOMEM, ERR_NOMEM);
	if ((d = hashmap_get(q->ids, key, len)) != NULL) {
		if (d->expires_ms > now_ms)
			return SAKER_EEXIST;
		TAILQ_REMOVE(&q->idlist, d, link);
		d->expires_ms = expires_ms;
		id_place(q, d);
		*replaced = true;
		return SAKER_OK;
	}
	if (ms->max_memory != 0 && ms->mem_used + id_cost(len) >
	    ms->max_memory)
		return fail(ms, SAKER_ENOMEM, ERR_NOMEM);
	if ((d = malloc(sizeof(*d) + len)) == NULL)
		return fail(ms, SAKER_ENOMEM, ERR_NOMEM);
	d->expires_ms = expires_ms;
	d->len = len;
	memcpy(d->key, key, len);
	if (hashmap_put(q->ids, d->key, len, d) != 0) {
		free(d);
		return fail(ms, SAKER_ENOMEM, ERR_NOMEM);
	}
	id_place(q, d);
	ms->mem_used += id_cost(len);
	q->nids++;
	return SAKER_OK;
}

static int
mem_dedup_del(saker_store *s, saker_queue *q, const void *key, size_t len)
{
	struct mstore *ms = MS(s);
	struct mdedup *d;
	int rc;

	if ((rc = writable(ms, q)) != SAKER_OK)
		return rc;
	if (q->ids == NULL || (d = hashmap_get(q->ids, key, len)) == NULL)
		return fail(ms, SAKER_ENOTFOUND, "no such deduplication id");
	id_free(ms, q, d);
	return SAKER_OK;
}

static int
mem_dedup_sweep(saker_store *s, saker_queue *q, int64_t now_ms,
    uint64_t limit, uint64_t *removed)
{
	struct mstore *ms = MS(s);
	struct mdedup *d;
	uint64_t n = 0;
	int rc;

	*removed = 0;
	if ((rc = writable(ms, q)) != SAKER_OK)
		return rc;
	while ((d = TAILQ_FIRST(&q->idlist)) != NULL &&
	    d->expires_ms <= now_ms && (limit == 0 || n < limit)) {
		id_free(ms, q, d);
		n++;
	}
	*removed = n;
	return SAKER_OK;
}

static int
mem_dedup_iterate(saker_store *s, saker_queue *q, saker_dedup_fn fn,
    void *arg)
{
	struct mdedup *d;
	int rc;

	if (q == NULL || fn == NULL)
		return fail(MS(s), SAKER_EINVAL, "bad iterate arguments");
	TAILQ_FOREACH(d, &q->idlist, link)
		if ((rc = fn(arg, d->key, d->len, d->expires_ms)) != 0)
			return rc;
	return SAKER_OK;
}

static int
mem_dedup_count(saker_store *s, saker_queue *q, uint64_t *n)
{
	if (q == NULL)
		return fail(MS(s), SAKER_EINVAL, "no queue");
	*n = q->nids;
	return SAKER_OK;
}

/* ------------------------------------------------------------------ */
/* the vtable */

enum { MEM_OPT_MAX_MEMORY };

static const struct saker_store_option mem_options[] = {
	[MEM_OPT_MAX_MEMORY] = { "max-memory", SAKER_OPT_SIZE, 0, UINT64_MAX,
	    "byte limit for item data, 0 = unlimited; puts beyond it fail" },
	{ NULL, SAKER_OPT_STRING, 0, 0, NULL }
};

static int
mem_open(const char *location, const struct saker_store_opts *opts,
    saker_store **out, char *err, size_t errlen)
{
	struct mstore *ms;

	*out = NULL;
	if (location != NULL && *location != '\0') {
		snprintf(err, errlen, "store type 'memory' takes no location");
		return SAKER_EINVAL;
	}
	ms = calloc(1, sizeof(*ms));
	if (ms == NULL || (ms->queues = hashmap_new()) == NULL) {
		free(ms);
		snprintf(err, errlen, "%s", ERR_NOMEM);
		return SAKER_ENOMEM;
	}
	ms->base.driver = &saker_store_memory;
	if (opts != NULL) {
		const struct saker_store_optval *v = saker_store_optval(opts,
		    MEM_OPT_MAX_MEMORY);

		ms->opts = *opts;
		ms->opts.optvals = NULL;    /* valid during open() only */
		ms->opts.driver_opts = NULL;
		ms->max_memory = v != NULL ? v->u : 0;
	}
	ms->err = "no error";
	ms->next_id = 1;
	*out = &ms->base;
	return SAKER_OK;
}

/* mem_close: no table bookkeeping, everything goes. */
static int
free_queue(void *arg, const char *name, size_t len, void *value)
{
	queue_items_free(arg, value, false);
	ids_free(arg, value);
	free(value);
	return 0;
}

static void
mem_close(saker_store *s)
{
	struct mstore *ms = MS(s);

	if (ms == NULL)
		return;
	if (ms->queues != NULL) {
		hashmap_walk(ms->queues, free_queue, ms);
		hashmap_free(ms->queues);
	}
	intmap_free(&ms->open);
	free(ms->heap);
	free(ms);
}

static const char *
mem_errmsg(saker_store *s)
{
	return MS(s)->err;
}

static int
mem_queue_open(saker_store *s, const char *name, size_t len, bool create,
    void *queue_ctx, saker_queue **out)
{
	struct mstore *ms = MS(s);
	struct saker_queue *q;

	if (name == NULL || len == 0)
		return fail(ms, SAKER_EINVAL, "empty queue name");
	q = hashmap_get(ms->queues, name, len);
	if (q != NULL) {
		if (queue_ctx != NULL)
			q->ctx = queue_ctx;
		*out = q;
		return SAKER_OK;
	}
	if (!create)
		return fail(ms, SAKER_ENOTFOUND, "no such queue");
	if (len > SIZE_MAX - sizeof(*q) - 1)
		return fail(ms, SAKER_EINVAL, "queue name too long");
	q = calloc(1, sizeof(*q) + len + 1);
	if (q == NULL)
		return fail(ms, SAKER_ENOMEM, ERR_NOMEM);
	TAILQ_INIT(&q->ready);
	TAILQ_INIT(&q->open);
	TAILQ_INIT(&q->delayed);
	TAILQ_INIT(&q->idlist);
	q->namelen = len;
	memcpy(q->name, name, len);
	q->ctx = queue_ctx;
	if (hashmap_put(ms->queues, name, len, q) != 0) {
		free(q);
		return fail(ms, SAKER_ENOMEM, ERR_NOMEM);
	}
	*out = q;
	return SAKER_OK;
}

/* Item `it` of q, still ready or delayed, expired: the layer routes a
 * copy of it to q's expire_to queue or drops it (store.h), then it goes
 * and is counted.  An error leaves it where it is. */
static int
expire_item(struct mstore *ms, struct saker_queue *q, struct mitem *it,
    int64_t now_ms)
{
	struct saker_item v;
	bool routed;
	int rc;

	item_view(it, &v);
	/* what errmsg() says unless the failing put says better */
	ms->err = "an expired item could not be moved to its expire_to queue";
	if ((rc = saker_store_expired(&ms->base, q, &v, now_ms, &routed)) !=
	    SAKER_OK)
		return rc;
	if (it->state == ITEM_DELAYED) {
		heap_remove(ms, it);
		TAILQ_REMOVE(&q->delayed, it, link);
		restate(ms, it, ITEM_NONE);
		q->ndelayed--;
	} else {
		ready_unlink(ms, q, it);
	}
	if (!routed)	/* a routed one the layer counted */
		q->expired++;
	item_free(ms, it);
	return SAKER_OK;
}


static int
mem_queue_flush(saker_store *s, saker_queue *q)
{
	struct mstore *ms = MS(s);
	int rc;

	if ((rc = writable(ms, q)) != SAKER_OK)
		return rc;
	queue_clear(ms, q);
	return SAKER_OK;
}

static int
mem_queue_delete(saker_store *s, saker_queue *q)
{
	int rc;

	if ((rc = mem_queue_flush(s, q)) != SAKER_OK)
		return rc;
	hashmap_del(MS(s)->queues, q->name, q->namelen);
	ids_free(MS(s), q);
	free(q);
	return SAKER_OK;
}

struct name_walk {
	saker_queue_name_fn fn;
	void *arg;
};

static int
name_one(void *arg, const char *name, size_t len, void *value)
{
	struct name_walk *w = arg;

	return w->fn(w->arg, name, len);
}

static int
mem_queues(saker_store *s, saker_queue_name_fn fn, void *arg)
{
	struct name_walk w = { fn, arg };

	return hashmap_walk(MS(s)->queues, name_one, &w);
}

static int
mem_queue_stats(saker_store *s, saker_queue *q, struct saker_queue_stats *st)
{
	if (q == NULL || st == NULL)
		return fail(MS(s), SAKER_EINVAL, "no queue");
	memset(st, 0, sizeof(*st));
	st->total_items = q->total;
	st->expired_items = q->expired;
	st->head_created_ms = TAILQ_EMPTY(&q->ready) ? 0 :
	    TAILQ_FIRST(&q->ready)->created_ms;
	return SAKER_OK;
}

static int
mem_put(saker_store *s, saker_queue *q, const struct saker_item *item,
    int64_t now_ms)
{
	struct mstore *ms = MS(s);
	struct mitem *it;
	size_t cost;

	if (q == NULL)	/* the item: saker_store_put() checked it */
		return fail(ms, SAKER_EINVAL, "no queue");
	if (item->len > SIZE_MAX - sizeof(*it) - SAKER_ATTRS_MAX)
		return fail(ms, SAKER_ENOMEM, ERR_NOMEM);
	cost = item_cost(item->len, item->attrs_len);
	if (ms->max_memory != 0 && ms->mem_used + cost > ms->max_memory)
		return fail(ms, SAKER_ENOMEM, ERR_NOMEM);
	it = malloc(cost);
	if (it == NULL)
		return fail(ms, SAKER_ENOMEM, ERR_NOMEM);
	it->q = q;
	it->state = ITEM_NONE;
	it->id = ms->next_id;
	it->flags = item->flags;
	it->expires_ms = item->expires_ms;
	it->created_ms = item->created_ms != 0 ? item->created_ms : now_ms;
	it->deliveries = item->deliveries;
	it->len = item->len;
	it->attrs_len = (uint32_t)item->attrs_len;
	if (item->len > 0)
		memcpy(it->data, item->data, item->len);
	if (item->attrs_len > 0)
		memcpy(it->data + item->len, item->attrs, item->attrs_len);

	if (item->due_ms > now_ms) {
		it->due_ms = item->due_ms;
		if (heap_push(ms, it) != SAKER_OK) {
			free(it);
			return fail(ms, SAKER_ENOMEM, ERR_NOMEM);
		}
		restate(ms, it, ITEM_DELAYED);
		TAILQ_INSERT_TAIL(&q->delayed, it, link);
		q->ndelayed++;
	} else {
		ready_push(ms, q, it, false);
	}
	ms->next_id++;
	ms->mem_used += cost;
	q->total++;
	if (it->state == ITEM_READY)
		notify(ms, q);
	return SAKER_OK;
}

/*
 * fn sees the item while it still sits at the head; only when fn accepts
 * it (returns 0) does the mode take effect.  A non-zero return leaves the
 * queue unchanged and is passed back.
 */
static int
mem_take(saker_store *s, saker_queue *q, int mode, int64_t now_ms,
    saker_item_fn fn, void *arg)
{
	struct mstore *ms = MS(s);
	struct saker_item view;
	struct mitem *it;
	int rc;

	if (q == NULL || fn == NULL ||
	    (mode != SAKER_TAKE_REMOVE && mode != SAKER_TAKE_OPEN &&
	    mode != SAKER_TAKE_PEEK))
		return fail(ms, SAKER_EINVAL, "bad take arguments");
	while ((it = TAILQ_FIRST(&q->ready)) != NULL &&
	    saker_item_expired(it->expires_ms, now_ms))
		if ((rc = expire_item(ms, q, it, now_ms)) != SAKER_OK)
			return rc;
	if (it == NULL)
		return SAKER_EEMPTY;
	/* room for one more open item before anything is moved, so that
	 * opening never fails half-way */
	if (mode == SAKER_TAKE_OPEN && intmap_reserve(&ms->open, 1) != 0)
		return fail(ms, SAKER_ENOMEM, ERR_NOMEM);

	item_view(it, &view);
	if (mode == SAKER_TAKE_OPEN) {
		view.state = SAKER_ITEM_OPEN;
		view.deliveries = saker_store_handout(view.deliveries);
	}
	rc = fn(arg, &view);
	if (rc != 0)
		return rc;

	switch (mode) {
	case SAKER_TAKE_REMOVE:
		ready_unlink(ms, q, it);
		item_free(ms, it);
		break;
	case SAKER_TAKE_OPEN:
		ready_unlink(ms, q, it);
		restate(ms, it, ITEM_OPEN);
		it->deliveries = view.deliveries;
		list_insert_sorted(&q->open, it);
		(void)intmap_put(&ms->open, it->id, it); /* room reserved */
		break;
	default:
		break;
	}
	return SAKER_OK;
}

/* *out: the open item `id` of queue q, unlinked from the open structures. */
static int
open_detach(struct mstore *ms, struct saker_queue *q, uint64_t id,
    struct mitem **out)
{
	struct mitem *it;
	int rc;

	if ((rc = writable(ms, q)) != SAKER_OK)
		return rc;
	if ((it = intmap_get(&ms->open, id)) == NULL || it->q != q)
		return fail(ms, SAKER_ENOTFOUND, "no such open item");
	*out = intmap_del(&ms->open, id);
	TAILQ_REMOVE(&q->open, *out, link);
	restate(ms, *out, ITEM_NONE);
	return SAKER_OK;
}

static int
mem_confirm(saker_store *s, saker_queue *q, uint64_t id)
{
	struct mstore *ms = MS(s);
	struct mitem *it;
	int rc;

	if ((rc = open_detach(ms, q, id, &it)) != SAKER_OK)
		return rc;
	item_free(ms, it);
	return SAKER_OK;
}

static int
mem_release(saker_store *s, saker_queue *q, uint64_t id)
{
	struct mstore *ms = MS(s);
	struct mitem *it;
	int rc;

	if ((rc = open_detach(ms, q, id, &it)) != SAKER_OK)
		return rc;
	ready_push(ms, q, it, true);
	notify(ms, q);
	return SAKER_OK;
}

static int
mem_release_delayed(saker_store *s, saker_queue *q, uint64_t id,
    int64_t due_ms, int64_t now_ms)
{
	struct mstore *ms = MS(s);
	struct mitem *it;
	int rc;

	if (due_ms <= now_ms)
		return mem_release(s, q, id);
	if ((rc = open_detach(ms, q, id, &it)) != SAKER_OK)
		return rc;
	/* a new id: the heap orders equal due times by id (arrival) */
	it->id = ms->next_id;
	it->due_ms = due_ms;
	if (heap_push(ms, it) != SAKER_OK) {
		/* back as it was: open, under its old id */
		it->id = id;
		list_insert_sorted(&q->open, it);
		(void)intmap_put(&ms->open, id, it); /* its slot is free */
		restate(ms, it, ITEM_OPEN);
		return fail(ms, SAKER_ENOMEM, ERR_NOMEM);
	}
	ms->next_id++;
	restate(ms, it, ITEM_DELAYED);
	TAILQ_INSERT_TAIL(&q->delayed, it, link);
	q->ndelayed++;
	return SAKER_OK;
}

static int
mem_move(saker_store *s, saker_queue *q, uint64_t id, saker_queue *to)
{
	struct mstore *ms = MS(s);
	struct mitem *it;
	int rc;

	if (q == NULL || to == NULL || to == q)
		return fail(ms, SAKER_EINVAL, "bad move arguments");
	if ((rc = open_detach(ms, q, id, &it)) != SAKER_OK)
		return rc;
	it->q = to;
	ready_push(ms, to, it, false);
	to->total++;
	notify(ms, to);
	return SAKER_OK;
}

static int
mem_promote(saker_store *s, int64_t now_ms, int64_t *next_due_ms)
{
	struct mstore *ms = MS(s);
	struct saker_queue *q;
	int rc = SAKER_OK;

	while (ms->hlen > 0 && ms->heap[0].due_ms <= now_ms) {
		struct mitem *it = ms->heap[0].it;

		q = it->q;
		if (saker_item_expired(it->expires_ms, now_ms)) {
			/* an error leaves it due: the next promote retries */
			if ((rc = expire_item(ms, q, it, now_ms)) != SAKER_OK)
				break;
			continue;
		}
		heap_remove(ms, it);
		TAILQ_REMOVE(&q->delayed, it, link);
		restate(ms, it, ITEM_NONE);
		q->ndelayed--;
		ready_push(ms, q, it, false);
		notify(ms, q);
	}
	if (next_due_ms != NULL)
		*next_due_ms = ms->hlen > 0 ? ms->heap[0].due_ms : 0;
	return rc;
}

static int
mem_flush_expired(saker_store *s, saker_queue *q, int64_t now_ms,
    uint64_t limit, uint64_t *removed)
{
	struct mstore *ms = MS(s);
	struct mitem *it, *next;
	uint64_t n = 0, seen = 0;
	int rc;

	if (removed != NULL)
		*removed = 0;
	if ((rc = writable(ms, q)) != SAKER_OK)
		return rc;
	/* The sweep calls this for every queue every few seconds: a queue of
	 * millions of items without expiry times costs nothing. */
	if (q->nexpiring == 0)
		return SAKER_OK;
	for (it = TAILQ_FIRST(&q->ready); it != NULL &&
	    (limit == 0 || seen < limit); it = next) {
		next = TAILQ_NEXT(it, link);
		seen++;
		if (!saker_item_expired(it->expires_ms, now_ms))
			continue;
		if ((rc = expire_item(ms, q, it, now_ms)) != SAKER_OK)
			break;
		n++;
	}
	if (removed != NULL)
		*removed = n;
	return rc;
}

static int
cmp_due(const void *a, const void *b)
{
	const struct mitem *x = *(const struct mitem *const *)a;
	const struct mitem *y = *(const struct mitem *const *)b;

	if (key_less(x->due_ms, x->id, y->due_ms, y->id))
		return -1;
	return key_less(y->due_ms, y->id, x->due_ms, x->id) ? 1 : 0;
}

static int
mem_iterate(saker_store *s, saker_queue *q, saker_item_fn fn, void *arg)
{
	struct mstore *ms = MS(s);
	struct saker_item view;
	struct mitem *it, **sorted;
	size_t i, n;
	int rc;

	if (q == NULL || fn == NULL)
		return fail(ms, SAKER_EINVAL, "bad iterate arguments");
	/* the open items, then the ready ones */
	for (i = 0; i < 2; i++)
		TAILQ_FOREACH(it, i == 0 ? &q->open : &q->ready, link) {
			item_view(it, &view);
			if ((rc = fn(arg, &view)) != 0)
				return rc;
		}
	n = (size_t)q->ndelayed;
	if (n == 0)
		return SAKER_OK;
	/* the heap is store-wide: sort this queue's share on the side */
	sorted = calloc(n, sizeof(*sorted));
	if (sorted == NULL)
		return fail(ms, SAKER_ENOMEM, ERR_NOMEM);
	for (i = 0, it = TAILQ_FIRST(&q->delayed); it != NULL && i < n;
	    it = TAILQ_NEXT(it, link))
		sorted[i++] = it;
	qsort(sorted, i, sizeof(*sorted), cmp_due);
	rc = 0;
	for (n = i, i = 0; i < n && rc == 0; i++) {
		item_view(sorted[i], &view);
		rc = fn(arg, &view);
	}
	free(sorted);
	return rc;
}

static int
mem_commit(saker_store *s)
{
	(void)s;
	return SAKER_OK;
}

const struct saker_store_driver saker_store_memory = {
	.name = "memory",
	.location_help = NULL,
	.durable = false,
	.options = mem_options,
	.open = mem_open,
	.close = mem_close,
	.errmsg = mem_errmsg,
	.queue_open = mem_queue_open,
	.queue_delete = mem_queue_delete,
	.queue_flush = mem_queue_flush,
	.queues = mem_queues,
	.queue_stats = mem_queue_stats,
	.put = mem_put,
	.take = mem_take,
	.confirm = mem_confirm,
	.release = mem_release,
	.release_delayed = mem_release_delayed,
	.move = mem_move,
	.expire_to = saker_store_keep_expire_to,
	.promote = mem_promote,
	.flush_expired = mem_flush_expired,
	.iterate = mem_iterate,
	.dedup_put = mem_dedup_put,
	.dedup_del = mem_dedup_del,
	.dedup_sweep = mem_dedup_sweep,
	.dedup_iterate = mem_dedup_iterate,
	.dedup_count = mem_dedup_count,
	.commit = mem_commit,
	.sync = NULL,
	.store_stats = NULL,
	.watch_fd = NULL,
	.fd_ready = NULL,
};
