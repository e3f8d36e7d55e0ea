/* queues.h -- the core's queue registry: names, driver handles, wait-lists,
 * fanout children, and the driver's "queue gained items" notification. */
#ifndef SAKER_QUEUES_H
#define SAKER_QUEUES_H
#include <stdbool.h>
#include <stddef.h>

#include "server.h"

/* Load every queue the store has. 0, or a saker_err. */
int queues_load(void);
/* Free the registry (store still open or already closed: handles unused). */
void queues_free(void);

/* The queue called name; with `create`, created in the store if missing.
 * Returns NULL with *err set when missing (create=false) or on failure. */
struct squeue *queue_lookup(const char *name, size_t len, bool create, int *err);

/* Delete the queue's items and the queue from the store. */
int queue_delete(struct squeue *q);
/* After a successful commit: free the core's record of queues deleted
 * since, unless they are in use again (recreated, waited on, fanout
 * parents), so a stream of short-lived queue names does not grow memory. */
void queues_reap(void);

/* The saker_notify_fn given to the store. */
void queues_notify(void *arg, saker_queue *h, void *queue_ctx);

void waiter_link(struct waiter *w, struct squeue *q);
void waiter_unlink(struct waiter *w);

/* This queue's configuration (cached until the next reload). */
const struct queue_config *queue_cfg(struct squeue *q);

/* Visit every queue that exists in the store. */
int queues_walk(int (*fn)(void *arg, struct squeue *q), void *arg);

#endif
