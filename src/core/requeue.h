/*
 * requeue.h -- the way back from a dead-letter queue: items moved to
 * another queue with their delivery counts reset, one commit per request.
 */
#ifndef SAKER_REQUEUE_H
#define SAKER_REQUEUE_H

#include <stddef.h>
#include <stdint.h>

struct session;

/* Items moved by one requeue at most (one batch, one commit). */
#define REQUEUE_MAX 1000

/* requeue: move up to `max` (1..REQUEUE_MAX) items from the head of
 * queue `from` to the tail of queue `to`, delivery counts reset, in the
 * current batch (one commit).  *moved says how many.  An OPR_* code
 * (ops.h); *msg set as for the other operations. */
int op_requeue(struct session *s, const char *from, size_t flen,
    const char *to, size_t tlen, uint64_t max, uint64_t *moved,
    const char **msg);

#endif
