/*
 * batch.h -- the broker's batch cycle.  One loop turn of the owner is one
 * batch: the commands of the turn run, then broker_commit() makes their
 * writes durable with one commit, and the owner sends each session's
 * replies (conn_flush() in sakerd), rewritten as errors when the
 * commit failed.  The timers the broker asked for (broker_hooks) call the
 * other steps here.
 */
#ifndef SAKER_BATCH_H
#define SAKER_BATCH_H

#include <stdbool.h>

#include "broker.h"

/* The outcome of a batch's commit. */
struct commit_result {
	bool ok;                      /* durable (or nothing to commit) */
	bool in_doubt;                /* failed with SAKER_EINDOUBT */
	char reason[256];             /* why it failed */
};

/* Commit the batch when it wrote anything and start the next batch.  The
 * owner then sends every session of the batch its replies with the
 * result, and serves the ready queues (broker_serve_ready()). */
void broker_commit(struct broker *b, struct commit_result *res);

/*
 * The asynchronous commit (store.h, ASYNCHRONOUS COMMIT; docs/design.md).
 * broker_commit_start() ends the batch like broker_commit(), but when the
 * broker allows it (async_commit), nothing is in flight and the store can,
 * it returns true with the batch in flight: its sessions' replies wait
 * (the owner marks them in_flight) and the next batch gathers meanwhile.
 * Otherwise it returns false with *res as broker_commit() gives it.  When
 * the store's commit descriptor is readable, broker_commit_finish() gives
 * the result for the sessions of batch b->flush_batch; false when it
 * failed: the batch gathered on top of it fails too, and the owner then
 * fails that batch's sessions with the same result and calls
 * broker_fail_batch(), which starts the next.  At most one batch is in
 * flight; broker_commit() with one in flight is the owner's error (it
 * finishes the flight first).
 */
bool broker_commit_start(struct broker *b, struct commit_result *res);
bool broker_commit_finish(struct broker *b, struct commit_result *res);
void broker_fail_batch(struct broker *b);

/* Serve the waiters of every queue that gained items. */
void broker_serve_ready(struct broker *b);

/* Promote the due delayed items; arms the next promotion. */
void broker_promote(struct broker *b);
/* Return open items held past their queue's open_timeout; arms the next. */
void broker_expire_opens(struct broker *b);
/* A bounded sweep of expired items of every queue. */
void broker_sweep(struct broker *b);
/* A driver shared with other processes: its descriptor is readable, or a
 * second has passed (retries blocked gets, whose wake-ups may be lost). */
void broker_store_ready(struct broker *b);
void broker_tick(struct broker *b);

#endif
