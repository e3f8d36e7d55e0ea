/* queues.c -- the broker's queue registry: names to driver handles,
 * wait-lists of blocked clients, fanout children, store notifications. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "hashmap.h"
#include "log.h"
#include "qname.h"
#include "queues.h"

static void squeue_free(struct broker *b, struct squeue *q);

static void
sq_ext_free(struct broker *b, struct squeue *q)
{
	if (q->ext != NULL)
		b->queue_ext_free(q->ext);
	q->ext = NULL;
}

/* Nothing refers to q but the registry: no store queue, no waiter, not in
 * the ready list, no fanout child. */
static bool
sq_unused(const struct squeue *q)
{
	return q->h == NULL && q->nwaiters == 0 && !q->ready && q->nchildren == 0;
}

/* Mark q (in memory only) for queues_drop_stubs(). */
static void
stub_push(struct broker *b, struct squeue *q)
{
	if (q->stub_listed || q->in_grave)
		return;
	q->stub_listed = true;
	q->stub_next = b->stubs;
	b->stubs = q;
}

/* Take q out of the registry and free it; a parent left unused (in memory
 * only, no other child) follows with the next stubs. */
static void
sq_remove(struct broker *b, struct squeue *q)
{
	struct squeue *p = q->parent;
	size_t i;

	if (p != NULL) {
		for (i = 0; i < p->nchildren; i++)
			if (p->children[i] == q) {
				p->children[i] = p->children[--p->nchildren];
				break;
			}
		if (sq_unused(p))
			stub_push(b, p);
	}
	hashmap_del(b->queues, q->name, q->len);
	squeue_free(b, q);
}

/* Walks nested in a walk's callback must not add entries to the table. */
static unsigned walk_depth;

static void queue_attach(struct broker *b, const char *name);

static struct squeue *
sq_find_or_new(struct broker *b, const char *name, size_t len)
{
	struct squeue *q = hashmap_get(b->queues, name, len);
	size_t plen;

	if (q != NULL)
		return q;
	q = calloc(1, sizeof(*q));
	if (q == NULL)
		return NULL;
	q->name = malloc(len + 1);
	if (q->name == NULL || hashmap_put(b->queues, name, len, q) != 0) {
		free(q->name);
		free(q);
		return NULL;
	}
	memcpy(q->name, name, len);
	q->name[len] = '\0';
	q->len = len;
	TAILQ_INIT(&q->waiters);
	/* a fanout child registers with its parent, which may not exist yet */
	plen = saker_qname_parent_len(name, len);
	if (plen > 0) {
		struct squeue *p = sq_find_or_new(b, name, plen);
		if (p != NULL) {
			if (p->nchildren == p->children_cap) {
				size_t ncap = p->children_cap ? p->children_cap * 2 : 4;
				struct squeue **nc = realloc(p->children, ncap * sizeof(*nc));
				if (nc == NULL)
					return q;
				p->children = nc;
				p->children_cap = ncap;
			}
			p->children[p->nchildren++] = q;
			q->parent = p;
		}
	}
	return q;
}

struct squeue *
queue_find(struct broker *b, const char *name, size_t len)
{
	return hashmap_get(b->queues, name, len);
}

struct squeue *
queue_lookup(struct broker *b, const char *name, size_t len, bool create, int *err)
{
	struct squeue *q = hashmap_get(b->queues, name, len);
	int rc;

	if (q != NULL && q->h != NULL)
		return q;
	if (!create) {
		*err = SAKER_ENOTFOUND;
		return NULL;
	}
	if (b->max_queues > 0 && b->nqueues >= b->max_queues) {
		*err = QUEUE_ETOOMANY;
		return NULL;
	}
	if (q == NULL && (q = sq_find_or_new(b, name, len)) == NULL) {
		*err = SAKER_ENOMEM;
		return NULL;
	}
	rc = saker_store_queue_open(b->store, name, len, true, q, &q->h);
	if (rc != SAKER_OK) {
		q->h = NULL;
		*err = rc;
		/* a new entry is in memory only: freed with the next stubs */
		if (sq_unused(q))
			stub_push(b, q);
		return NULL;
	}
	b->nqueues++;
	b->stats.queue_creates++;
	broker_touch(b);
	q->qc = NULL;	/* a new handle: the store learns its settings */
	/* the expire_to target exists from when the configuration names it
	 * for a queue (docs/protocol.md), so `stats` lists it and the items
	 * the store moves there */
	if (queue_cfg(b, q)->expire_to[0] != '\0' && walk_depth == 0)
		queue_attach(b, q->qc->expire_to);
	return q;
}

/* A store shared with other processes may have gained the queue since we
 * loaded the list, and any store makes queues of its own (<q>_damaged,
 * expire_to targets): open it if it is there (never create it). */
void
queue_retry_shared(struct broker *b, struct squeue *q)
{
	if (q->h != NULL)
		return;
	if (saker_store_queue_open(b->store, q->name, q->len, false, q,
	    &q->h) == SAKER_OK) {
		b->nqueues++;
		q->qc = NULL;	/* a new handle: the store learns its settings */
	} else {
		q->h = NULL;
	}
}

static int
attach_one(void *arg, const char *name, size_t len)
{
	struct broker *b = arg;
	struct squeue *q = hashmap_get(b->queues, name, len);

	if (q == NULL || q->h == NULL)
		(void)queue_for_read(b, name, len, true);
	return 0;
}

/* Give every queue the store made of its own an entry (and the store its
 * context): after this, a name the registry lacks is a name the store
 * lacks.  Once per store-made queue that gained items unannounced. */
static void
attach_unknown(struct broker *b)
{
	b->store_unattached = false;
	if (saker_store_queues(b->store, attach_one, b) < 0)
		b->store_unattached = true;	/* look again at the next miss */
}

struct squeue *
queue_for_read(struct broker *b, const char *name, size_t len, bool remember)
{
	struct squeue *q = hashmap_get(b->queues, name, len);
	saker_queue *h;

	if (q == NULL && !remember) {
		/* A get that will not wait on the name needs no entry for a
		 * queue nobody has.  The store has one the broker does not
		 * know only if it made it itself (an expire_to target,
		 * <q>_damaged: its items were notified without a context)
		 * or, on a shared store, another broker did: only then ask
		 * it.  A queue found is opened again below with its context
		 * (store.h: queue_open() is idempotent, the context replaced). */
		bool shared = saker_store_shared(b->store);

		if (b->store_unattached && !shared) {
			attach_unknown(b);
			q = hashmap_get(b->queues, name, len);
		}
		if (q == NULL && (!shared || saker_store_queue_open(
		    b->store, name, len, false, NULL, &h) != SAKER_OK))
			return b->missing;
	}
	if (q == NULL) {
		q = sq_find_or_new(b, name, len);
		if (q == NULL)
			return NULL;
		queue_retry_shared(b, q);
		if (sq_unused(q))
			stub_push(b, q);
	} else {
		queue_retry_shared(b, q);
	}
	return q;
}

void
queues_drop_stubs(struct broker *b)
{
	struct squeue *q;

	while ((q = b->stubs) != NULL) {
		b->stubs = q->stub_next;
		q->stub_next = NULL;
		q->stub_listed = false;
		/* in use again: a set created it, a get waits on it, a child
		 * names it, or a delete put it in the graveyard */
		if (!sq_unused(q) || q->in_grave)
			continue;
		sq_remove(b, q);
	}
}

int
queue_delete(struct broker *b, struct squeue *q)
{
	int rc;

	rc = saker_store_queue_delete(b->store, q->h);
	if (rc != SAKER_OK)
		return rc;
	q->h = NULL;
	sq_ext_free(b, q);
	b->nqueues--;
	b->stats.queue_deletes++;
	if (!q->in_grave) {
		q->in_grave = true;
		q->grave_next = b->graveyard;
		b->graveyard = q;
	}
	broker_touch(b);
	return SAKER_OK;
}

static void
squeue_free(struct broker *b, struct squeue *q)
{
	sq_ext_free(b, q);
	free(q->children);
	free(q->name);
	free(q);
}

void
queues_reap(struct broker *b)
{
	struct squeue *q;

	while ((q = b->graveyard) != NULL) {
		b->graveyard = q->grave_next;
		q->grave_next = NULL;
		q->in_grave = false;
		/* Open items of a deleted queue were forgotten at the delete;
		 * waiters and children still point here. */
		if (!sq_unused(q))
			continue;
		if (q->stub_listed) {
			/* a get named it after the delete: the stubs free it */
			continue;
		}
		sq_remove(b, q);
	}
}

struct load_ctx {
	struct broker *b;
	int rc;
};

static int
load_one(void *arg, const char *name, size_t len)
{
	struct load_ctx *lc = arg;
	struct broker *b = lc->b;
	struct squeue *q = sq_find_or_new(b, name, len);
	int *rc = &lc->rc;

	if (q == NULL) {
		*rc = SAKER_ENOMEM;
		return 1;
	}
	*rc = saker_store_queue_open(b->store, name, len, false, q, &q->h);
	if (*rc == SAKER_OK)
		b->nqueues++;
	return *rc != SAKER_OK;
}

int
queues_load(struct broker *b)
{
	struct load_ctx lc = { b, SAKER_OK };
	int wrc;

	b->queues = hashmap_new();
	/* one entry for every name a plain get finds nowhere */
	b->missing = calloc(1, sizeof(*b->missing));
	if (b->queues == NULL || b->missing == NULL ||
	    (b->missing->name = strdup("")) == NULL)
		return SAKER_ENOMEM;
	TAILQ_INIT(&b->missing->waiters);
	b->nqueues = 0;
	b->stubs = NULL;
	wrc = saker_store_queues(b->store, load_one, &lc);
	if (lc.rc != SAKER_OK)
		return lc.rc;
	if (wrc < 0)
		return wrc;
	queues_apply_config(b);
	return SAKER_OK;
}

static int
free_one(void *arg, const char *key, size_t len, void *value)
{
	struct squeue *q = value;

	(void)key;
	(void)len;
	squeue_free(arg, q);
	return 0;
}

void
queues_free(struct broker *b)
{
	if (b->queues == NULL)
		return;
	hashmap_walk(b->queues, free_one, b);
	hashmap_free(b->queues);
	b->queues = NULL;
	if (b->missing != NULL)
		squeue_free(b, b->missing);
	b->missing = NULL;
	b->stubs = NULL;
	b->graveyard = NULL;
}

void
queues_notify(void *arg, saker_queue *h, void *queue_ctx)
{
	struct squeue *q = queue_ctx;
	struct broker *b = arg;

	(void)h;
	if (q == NULL) {
		/* items in a queue the store made itself, with no entry:
		 * queue_for_read() must look for it (attach_unknown()) */
		b->store_unattached = true;
		return;
	}
	if (q->nwaiters == 0)
		return;
	queue_mark_ready(arg, q);
}

void
queue_mark_ready(struct broker *b, struct squeue *q)
{
	if (q->ready)
		return;
	q->ready = true;
	TAILQ_INSERT_TAIL(&b->ready, q, ready_link);
}

/* After a failed commit: queues created in the batch are gone. */
static int
reopen_handle(void *arg, const char *key, size_t len, void *value)
{
	struct broker *b = arg;
	struct squeue *q = value;

	if (q->h == NULL)
		return 0;
	if (saker_store_queue_open(b->store, key, len, false, q, &q->h) != SAKER_OK) {
		q->h = NULL;
		b->nqueues--;
	}
	return 0;
}

void
queues_reopen(struct broker *b)
{
	hashmap_walk(b->queues, reopen_handle, b);
	queues_apply_config(b);
}

void
waiter_link(struct waiter *w, struct squeue *q)
{
	w->q = q;
	TAILQ_INSERT_TAIL(&q->waiters, w, link);
	q->nwaiters++;
	w->linked = true;
}

void
waiter_unlink(struct broker *b, struct waiter *w)
{
	if (!w->linked)
		return;
	TAILQ_REMOVE(&w->q->waiters, w, link);
	w->q->nwaiters--;
	w->linked = false;
	/* the last waiter of a queue the store does not have */
	if (sq_unused(w->q))
		stub_push(b, w->q);
}

struct walk_ctx {
	int (*fn)(void *, struct squeue *);
	void *arg;
	bool waited;            /* also the queues only in memory, waited on */
};

static int
walk_one(void *arg, const char *key, size_t len, void *value)
{
	struct walk_ctx *wc = arg;
	struct squeue *q = value;

	(void)key;
	(void)len;
	if (q->h == NULL && (!wc->waited || q->nwaiters == 0))
		return 0;
	return wc->fn(wc->arg, q);
}

/* A listing shows every queue the store has made of its own (an expire_to
 * target made again, <q>_damaged) with the items it moved there: give
 * them entries first, outside any walk (attach_unknown()). */
static int
walk(struct broker *b, struct walk_ctx *wc)
{
	int rc;

	if (b->store_unattached && walk_depth == 0 &&
	    !saker_store_shared(b->store))
		attach_unknown(b);
	walk_depth++;
	rc = hashmap_walk(b->queues, walk_one, wc);
	walk_depth--;
	return rc;
}

int
queues_walk(struct broker *b, int (*fn)(void *arg, struct squeue *q), void *arg)
{
	struct walk_ctx wc = { fn, arg, false };

	return walk(b, &wc);
}

int
queues_walk_from(struct broker *b, size_t *pos,
    int (*fn)(void *arg, struct squeue *q), void *arg)
{
	struct walk_ctx wc = { fn, arg, false };

	return hashmap_walk_from(b->queues, pos, walk_one, &wc);
}

int
queues_walk_waited(struct broker *b, int (*fn)(void *arg, struct squeue *q),
    void *arg)
{
	struct walk_ctx wc = { fn, arg, true };

	return walk(b, &wc);
}

int
queues_walk_waited_from(struct broker *b, size_t *pos,
    int (*fn)(void *arg, struct squeue *q), void *arg)
{
	struct walk_ctx wc = { fn, arg, true };

	return hashmap_walk_from(b->queues, pos, walk_one, &wc);
}

/* Tell the store where q's expired items go (store.h, expire_to). */
static void
apply_expire_to(struct broker *b, struct squeue *q)
{
	const char *to = q->qc->expire_to;

	if (q->h == NULL)
		return;
	if (!saker_store_routes_expired(b->store)) {
		if (to[0] != '\0')
			log_warn("queue %s: expire_to %s: the %s store cannot move"
			    " expired items; they are dropped", q->name, to,
			    saker_store_name(b->store));
		return;
	}
	if (saker_store_expire_to(b->store, q->h, to[0] != '\0' ? to :
	    NULL, strlen(to)) != SAKER_OK)
		log_error("queue %s: expire_to %s: %s", q->name, to,
		    saker_store_errmsg(b->store));
}

/* Make sure queue `name` exists in the store and the broker. */
static void
queue_attach(struct broker *b, const char *name)
{
	int rc = SAKER_OK;

	/* the target exists for the broker too (reads never create), with
	 * the broker's context in the store, so its waiters are woken */
	if (name[0] != '\0' && queue_lookup(b, name, strlen(name), true, &rc) ==
	    NULL)
		log_error("expire_to queue %s: %s", name, rc == QUEUE_ETOOMANY ?
		    "too many queues (--max-queues)" : saker_strerror(rc));
}

const struct queue_config *
queue_cfg_load(struct broker *b, struct squeue *q)
{
	q->qc = config_for(b->config, q->name, q->len);
	q->qc_gen = b->config_gen;
	apply_expire_to(b, q);
	return q->qc;
}

struct apply_ctx {
	struct broker *b;
	struct squeue **xto;	/* queues with an expire_to */
	size_t n, cap;
};

static int
apply_one(void *arg, const char *key, size_t len, void *value)
{
	struct apply_ctx *ac = arg;
	struct squeue *q = value;

	(void)key;
	(void)len;
	q->qc = NULL;
	if (q->h == NULL || queue_cfg(ac->b, q)->expire_to[0] == '\0')
		return 0;
	if (ac->n == ac->cap) {
		size_t ncap = ac->cap > 0 ? ac->cap * 2 : 16;
		struct squeue **nv = realloc(ac->xto, ncap * sizeof(*nv));

		if (nv == NULL)
			return 0;	/* its target is opened when used */
		ac->xto = nv;
		ac->cap = ncap;
	}
	ac->xto[ac->n++] = q;
	return 0;
}

void
queues_apply_config(struct broker *b)
{
	struct apply_ctx ac = { b, NULL, 0, 0 };
	size_t i;

	if (b->queues == NULL || b->config == NULL || b->store == NULL)
		return;
	hashmap_walk(b->queues, apply_one, &ac);
	/* after the walk: creating queues changes the table */
	for (i = 0; i < ac.n; i++)
		queue_attach(b, queue_cfg(b, ac.xto[i])->expire_to);
	free(ac.xto);
}
