/* queues.h -- the broker's queue registry: names, driver handles,
 * wait-lists, fanout children, and the driver's "queue gained items"
 * notification. */
#ifndef SAKER_QUEUES_H
#define SAKER_QUEUES_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "broker.h"

struct session;

/* A blocked get on one of its queues. */
struct waiter {
	TAILQ_ENTRY(waiter) link;     /* in squeue.waiters */
	struct session *sess;
	struct squeue *q;
	uint32_t raw_off, raw_len;    /* key token in sess->wait_line */
	unsigned opts;                /* OP_OPT_OPEN / PEEK (CLOSE done already) */
	bool linked;
};
TAILQ_HEAD(waiter_list, waiter);

/* The broker's view of a queue. Never freed while the broker runs (the
 * driver queue behind it may be deleted and recreated) except by
 * queues_reap(). */
struct squeue {
	char *name;
	size_t len;
	saker_queue *h;               /* driver handle; NULL after delete */
	struct waiter_list waiters;
	size_t nwaiters;
	struct squeue *parent;        /* fanout: "a" for "a+b" */
	struct squeue **children;     /* fanout children (with or without h) */
	size_t nchildren, children_cap;
	bool ready;                   /* in broker.ready */
	TAILQ_ENTRY(squeue) ready_link;
	uint64_t discarded;
	uint64_t open_timeouts;
	uint64_t dead_lettered;       /* items moved to the dead-letter queue */
	uint64_t retries;             /* items given back with a delay (retry.h) */
	uint64_t expired_to_seen;     /* the store's expired_to, last logged */
	uint64_t enqueued, dequeued;  /* for /metrics */
	/* what the broker's owner keeps about this queue (NULL: nothing),
	 * freed by broker.queue_ext_free when the queue is deleted or freed:
	 * a queue made again starts afresh */
	void *ext;
	const struct queue_config *qc;  /* cached config_for(); see queue_cfg() */
	uint64_t qc_gen;
	size_t req_held;              /* op_get: items the session would hold
	                               * after the request's keys so far */
	bool req_counted;             /* req_held is set (only inside op_get) */
	struct squeue *grave_next;    /* deleted: broker.graveyard */
	bool in_grave;
	struct squeue *stub_next;     /* broker.stubs */
	bool stub_listed;
};

/* queue_lookup(): creating the queue would pass --max-queues (not a
 * saker_err: the store is fine). */
#define QUEUE_ETOOMANY (-1000)

/* Load every queue the store has. 0, or a saker_err. */
int queues_load(struct broker *b);
/* Free the registry (store still open or already closed: handles unused). */
void queues_free(struct broker *b);

/* The queue called name; with `create` (writes only), created in the store
 * if missing, unless that would make more than b->max_queues
 * (QUEUE_ETOOMANY).  Returns NULL with *err set when missing
 * (create=false) or on failure. */
struct squeue *queue_lookup(struct broker *b, const char *name, size_t len,
    bool create, int *err);

/* For a read (get, monitor): the queue called name, which may exist only
 * in memory (h == NULL: the store has no such queue), so that a get can
 * wait on it and a set can wake it.  Such an entry never reaches the store
 * and is freed by queues_drop_stubs() once nothing refers to it.  Without
 * `remember` (a get that cannot wait and neither opens nor closes), a
 * name neither the broker nor the store has gives broker.missing, shared
 * by all such names and never in the registry: a miss allocates nothing.
 * NULL only when out of memory. */
struct squeue *queue_for_read(struct broker *b, const char *name, size_t len,
    bool remember);
/* Free the in-memory-only entries that no waiter, ready list or fanout
 * child refers to any more.  Call when no squeue pointer is held across it
 * (end of a get, end of a wait). */
void queues_drop_stubs(struct broker *b);
/* A waited-on queue only in memory: open it if a store shared with other
 * processes has it now (never creates it). */
void queue_retry_shared(struct broker *b, struct squeue *q);
/* The registry's entry for name, in the store or not (NULL if none). */
struct squeue *queue_find(struct broker *b, const char *name, size_t len);

/* Delete the queue's items and the queue from the store. */
int queue_delete(struct broker *b, struct squeue *q);
/* After a successful commit: free the broker's record of queues deleted
 * since, unless they are in use again (recreated, waited on, fanout
 * parents), so a stream of short-lived queue names does not grow memory. */
void queues_reap(struct broker *b);
/* After a failed commit the store is as after the previous commit: queues
 * created since then are gone, so look every handle up again. */
void queues_reopen(struct broker *b);

/* The saker_notify_fn given to the store (notify_arg: the broker). */
void queues_notify(void *arg, saker_queue *h, void *queue_ctx);
/* Mark q as having gained items for its waiters (broker.ready). */
void queue_mark_ready(struct broker *b, struct squeue *q);

void waiter_link(struct waiter *w, struct squeue *q);
/* (b: a queue only in memory whose last waiter leaves is marked for
 * queues_drop_stubs()) */
void waiter_unlink(struct broker *b, struct waiter *w);

/* This queue's configuration (cached until the next reload); a fresh
 * one is handed to the store (expire_to).  Inline: every set and get asks,
 * and the cache almost always answers. */
const struct queue_config *queue_cfg_load(struct broker *b, struct squeue *q);
static inline const struct queue_config *
queue_cfg(struct broker *b, struct squeue *q)
{
	if (__builtin_expect(q->qc != NULL && q->qc_gen == b->config_gen, 1))
		return q->qc;
	return queue_cfg_load(b, q);
}
/* Apply the configuration to every queue now (after loading the queues,
 * a reload, a failed commit): the store must know every expire_to before
 * it promotes or sweeps. */
void queues_apply_config(struct broker *b);

/* Visit every queue that exists in the store. */
int queues_walk(struct broker *b, int (*fn)(void *arg, struct squeue *q), void *arg);
/* The same a piece at a time (hashmap_walk_from): *pos is 0 at the start
 * and again at the end.  queues_walk_waited_from() also visits the queues
 * only in memory that gets wait on (the console's listing). */
int queues_walk_waited_from(struct broker *b, size_t *pos,
    int (*fn)(void *arg, struct squeue *q), void *arg);
int queues_walk_from(struct broker *b, size_t *pos,
    int (*fn)(void *arg, struct squeue *q), void *arg);
/* The same, and the in-memory-only queues that gets are waiting on (for
 * stats: their waiters show while they wait). */
int queues_walk_waited(struct broker *b, int (*fn)(void *arg, struct squeue *q),
    void *arg);

#endif
