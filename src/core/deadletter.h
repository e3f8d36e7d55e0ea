/*
 * deadletter.h -- poison items: an item handed out by /open
 * max_deliveries times (the queue's --config) that comes back (abort,
 * disconnect, open_timeout) goes to the queue's dead-letter queue instead
 * of the head, in the same batch (the store's move()), and never reaches a
 * consumer of its queue again.  The way back is requeue.h.
 */
#ifndef SAKER_DEADLETTER_H
#define SAKER_DEADLETTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker.h"

struct squeue;

/* Give open item `id` of q back after `deliveries` hand-outs: to q's
 * dead-letter queue when the limit is reached, else to q after delay_ms
 * (retry.h: > 0 that long, RETRY_BACKOFF the queue's retry_backoff, 0 at
 * once to the head).  Returns the store's code (SAKER_ENOTFOUND: not
 * open). */
int dl_give_back(struct broker *b, struct squeue *q, uint64_t id,
    uint32_t deliveries, int64_t delay_ms);

/* Is an item already handed out `before` times (not counting a hand-out
 * in progress) spent on q, so it must not be served again?  Never in a
 * dead-letter queue: what lands there is served from there. */
bool dl_spent(struct broker *b, struct squeue *q, uint32_t before);

/* Is q some queue's dead-letter queue: named by a dead_letter setting, or
 * "<Q>_dead" of a queue Q with max_deliveries and no dead_letter?  Its
 * items are served whatever settings match it (a [queue jobs*] section
 * also matches jobs_dead). */
bool dl_is_dead_letter(struct broker *b, const struct squeue *q);

/* Move open item `id` of q to q's dead-letter queue; counts and logs it.
 * SAKER_OK, or the store's code (the item is then still open). */
int dl_move(struct broker *b, struct squeue *q, uint64_t id,
    uint32_t deliveries);

/* The name of q's dead-letter queue, into buf (SAKER_QNAME_MAX + 1). */
void dl_name(struct broker *b, struct squeue *q, char *buf, size_t len);

#endif
