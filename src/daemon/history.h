/*
 * history.h -- the console's depth-over-time chart: one timer for the
 * whole server samples every queue's ready items (queue_stats, as a
 * `stats` does) every interval (--http-history, default 60 s) and keeps
 * the last HISTORY_SAMPLES of each queue in a ring hung on its struct
 * queue_watch (docs/console.md has the memory bound).  A sweep over the queues
 * runs in slices of at most HISTORY_SLICE_US each, one per loop turn, so
 * 100k queues in a store whose queue_stats reads the disk never stall the
 * loop for long.
 *
 * A queue gets a ring at its first non-empty sample and loses it when it
 * has been empty for a whole window or is deleted (the core calls
 * queue_watch_free() then): idle queues cost nothing.
 */
#ifndef SAKER_HISTORY_H
#define SAKER_HISTORY_H

#include <stdint.h>

#include <event2/event.h>

#define HISTORY_SAMPLES 60
#define HISTORY_SLICE_US 2000

struct broker;
struct evbuffer;
struct squeue;

/* One queue's samples: depth[t % (HISTORY_SAMPLES + 1)] is sweep t's, for
 * the sweeps first..last (one malloc'd block); the extra slot holds the
 * sample of the sweep under way. */
struct depth_history {
	uint64_t first, last;
	uint32_t zeros;                  /* empty samples in a row up to last */
	uint32_t depth[HISTORY_SAMPLES + 1]; /* items (saturated at UINT32_MAX) */
};

/* What the console keeps of one queue, hung on squeue.ext (the core knows
 * it only as a pointer to free): made at the first need, freed when the
 * queue is deleted, so a queue made again starts afresh. */
struct queue_watch {
	/* the rates (console.c): counters at the last sample, and items per
	 * second between the two samples before */
	int64_t rate_ms;
	uint64_t rate_enq, rate_deq;
	double enq_rate, deq_rate;
	struct depth_history *hist;      /* NULL: no ring */
};

/* q's, made if it has none (NULL: out of memory). */
struct queue_watch *queue_watch(struct squeue *q);
/* For broker.queue_ext_free. */
void queue_watch_free(void *ext);

/* Sample b's queues every interval_ms on base (0: never), from a fresh
 * history (the last start's timer stopped, its sweep count and stats
 * gone).  -1 when out of memory. */
int history_start(struct event_base *base, struct broker *b, unsigned interval_ms);
/* Stop the timer (before the event base is freed). */
void history_stop(void);

struct history_stats {
	unsigned interval_ms;
	uint64_t rings;                  /* queues holding a ring now */
	/* the last complete sweep: loop time spent in it in microseconds,
	 * and the slices it took */
	uint64_t walk_us, slices;
	int64_t last_ms;                 /* wall-clock ms of the last sample
	                                  * (0: none yet) */
	uint64_t sweeps;                 /* complete sweeps since the start:
	                                  * two may end in one millisecond */
};
const struct history_stats *history_stats(void);

/* Append q's samples as a JSON array, oldest first: one per complete
 * sweep in the window (at most HISTORY_SAMPLES), 0 where q had no items or
 * no ring. */
void history_json(struct evbuffer *out, const struct squeue *q);

#endif
