/*
 * retry.h -- retries the way job queues do them: an open item given back
 * later instead of at once (an abort with /delay=MS, or the queue's
 * retry_backoff when it comes back by abort, disconnect or open_timeout).
 * The dead-letter check (deadletter.h) runs first: a spent item is moved,
 * never delayed.  The lease extension (touch) is ops.h's op_touch.
 */
#ifndef SAKER_RETRY_H
#define SAKER_RETRY_H

#include <stddef.h>
#include <stdint.h>

#include "broker.h"
#include "qconfig.h"

struct squeue;

/* dl_give_back()'s delay_ms: the queue's retry_backoff decides. */
#define RETRY_BACKOFF (-1)

/*
 * The wait before an item handed out `deliveries` times (the failed
 * hand-out included) is served again on a queue with config qc: 0 when qc
 * has no retry_backoff; else d = min(MAX, BASE * 2^(deliveries-1)) less a
 * jitter of up to a quarter of d drawn from `rnd` (the result is in
 * [d - d/4, d]), so workers that failed together do not retry together
 * and MAX is never passed.
 */
int64_t retry_backoff(const struct queue_config *qc, uint32_t deliveries,
    uint64_t rnd);

/* A fresh pseudo-random value for the jitter (not for secrets), from
 * b's generator (seeded at its first use). */
uint64_t retry_random(struct broker *b);

/*
 * Give open item `id` of q back after `delay_ms`: > 0 that long,
 * RETRY_BACKOFF the queue's retry_backoff for `deliveries` (none while
 * the broker is closing), 0 (or no backoff) at once to the head.  The due
 * time is rounded up to the next 10 ms (retry.c).  A delayed item goes to
 * the store's delayed set (release_delayed()), is counted (q->retries,
 * the broker's retries_scheduled) and the promote timer is armed.  The
 * store's code.
 */
int retry_give_back(struct broker *b, struct squeue *q, uint64_t id,
    uint32_t deliveries, int64_t delay_ms);

#endif
