/* history.c -- per-queue depth samples for the console's chart
 * (history.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "clock.h"
#include "history.h"
#include "queues.h"

#define SLOTS (HISTORY_SAMPLES + 1)
/* the clock is read every this many queues of a slice */
#define CLOCK_EVERY 32

static struct {
	struct event *tick_ev;   /* every interval: start a sweep */
	struct event *slice_ev;  /* next loop turn: the sweep's next slice */
	struct broker *b;
	bool sweeping;
	uint64_t ticks;          /* complete sweeps; the one under way is `ticks` */
	size_t pos;              /* where the sweep's next slice starts */
	uint64_t done;           /* queues of this sweep done */
	uint64_t rings_now, walk_us_now, slices_now;    /* of the sweep under way */
	struct history_stats st;
} h;

struct queue_watch *
queue_watch(struct squeue *q)
{
	if (q->ext == NULL)
		q->ext = calloc(1, sizeof(struct queue_watch));
	return q->ext;
}

void
queue_watch_free(void *ext)
{
	struct queue_watch *w = ext;

	free(w->hist);
	free(w);
}

/* q's ring is dropped; so is its record when that held nothing else (the
 * overview never asked its rates): an idle queue costs nothing. */
static void
drop_ring(struct squeue *q, struct queue_watch *w)
{
	free(w->hist);
	w->hist = NULL;
	if (w->rate_ms == 0) {
		free(w);
		q->ext = NULL;
	}
}

static void
sample(struct broker *b, struct squeue *q)
{
	struct saker_queue_stats st;
	struct queue_watch *w = q->ext;
	struct depth_history *r = w != NULL ? w->hist : NULL;
	uint64_t t = h.ticks;
	uint32_t d;

	if (r != NULL && r->last == t)
		return;         /* seen this sweep (the table moved under us) */
	if (saker_store_queue_stats(b->store, q->h, &st) != SAKER_OK)
		d = r != NULL ? r->depth[r->last % SLOTS] : 0;  /* as before */
	else
		d = st.items > UINT32_MAX ? UINT32_MAX : (uint32_t)st.items;
	/* missed sweeps (the queue was skipped or gone): the last sample
	 * stands for them; after a whole window, start again */
	if (r != NULL && t - r->last > HISTORY_SAMPLES) {
		drop_ring(q, w);
		r = NULL;
	}
	if (r == NULL) {
		if (d == 0)
			return;
		if ((w = queue_watch(q)) == NULL || (r = malloc(sizeof(*r))) == NULL)
			return;         /* no chart for this queue, this time */
		r->first = r->last = t;
		r->zeros = 0;
		w->hist = r;
	}
	for (; r->last + 1 < t; r->last++)
		r->depth[(r->last + 1) % SLOTS] = r->depth[r->last % SLOTS];
	r->last = t;
	r->depth[t % SLOTS] = d;
	r->zeros = d == 0 ? r->zeros + 1 : 0;
	if (r->zeros >= HISTORY_SAMPLES) {
		drop_ring(q, w);
		return;
	}
	h.rings_now++;
}

/* arg: when the slice's budget ends (us) */
static int
slice_one(void *arg, struct squeue *q)
{
	const int64_t *end_us = arg;

	sample(h.b, q);
	h.done++;
	return h.done % CLOCK_EVERY == 0 && saker_now_us() >= *end_us;
}

static void
slice_cb(evutil_socket_t fd, short what, void *arg)
{
	int64_t t0 = saker_now_us();
	int64_t end_us = t0 + HISTORY_SLICE_US;
	static const struct timeval now = { 0, 0 };

	if (h.b->store == NULL) {
		h.sweeping = false;
		return;
	}
	h.slices_now++;
	if (queues_walk_from(h.b, &h.pos, slice_one, &end_us) != 0) {
		/* budget spent: the rest in the next loop turn */
		h.walk_us_now += (uint64_t)(saker_now_us() - t0);
		event_add(h.slice_ev, &now);
		return;
	}
	h.walk_us_now += (uint64_t)(saker_now_us() - t0);
	h.ticks++;
	h.st.sweeps = h.ticks;
	h.st.last_ms = saker_now_ms();
	h.st.rings = h.rings_now;
	h.st.walk_us = h.walk_us_now;
	h.st.slices = h.slices_now;
	h.sweeping = false;
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	if (h.sweeping || h.b->store == NULL)
		return;         /* the last sweep is not over: skip this one */
	h.sweeping = true;
	h.pos = 0;
	h.done = 0;
	h.rings_now = h.walk_us_now = h.slices_now = 0;
	slice_cb(-1, 0, NULL);
}

int
history_start(struct event_base *base, struct broker *b, unsigned interval_ms)
{
	struct timeval tv;

	/* a fresh history: a second server in one process (the fuzz
	 * targets, in-process tests) must not inherit the last one's sweep
	 * count, or its charts would open with a window of made-up zeros */
	history_stop();
	memset(&h, 0, sizeof(h));
	h.b = b;
	h.st.interval_ms = interval_ms;
	if (interval_ms == 0)
		return 0;
	h.tick_ev = event_new(base, -1, EV_PERSIST, tick_cb, NULL);
	h.slice_ev = evtimer_new(base, slice_cb, NULL);
	tv.tv_sec = interval_ms / 1000;
	tv.tv_usec = (interval_ms % 1000) * 1000;
	if (h.tick_ev == NULL || h.slice_ev == NULL || event_add(h.tick_ev, &tv) != 0) {
		history_stop();
		return -1;
	}
	return 0;
}

void
history_stop(void)
{
	if (h.tick_ev != NULL)
		event_free(h.tick_ev);
	if (h.slice_ev != NULL)
		event_free(h.slice_ev);
	h.tick_ev = h.slice_ev = NULL;
	h.sweeping = false;
}

const struct history_stats *
history_stats(void)
{
	return &h.st;
}

void
history_json(struct evbuffer *out, const struct squeue *q)
{
	const struct queue_watch *w = q->ext;
	const struct depth_history *r = w != NULL ? w->hist : NULL;
	uint64_t n = h.ticks < HISTORY_SAMPLES ? h.ticks : HISTORY_SAMPLES;
	uint64_t t;

	/* not sampled for a whole window: not shown */
	if (r != NULL && r->last + HISTORY_SAMPLES < h.ticks)
		r = NULL;
	evbuffer_add(out, "[", 1);
	for (t = h.ticks - n; t < h.ticks; t++) {
		uint32_t d = 0;

		if (r != NULL && t >= r->first)
			d = r->depth[(t <= r->last ? t : r->last) % SLOTS];
		evbuffer_add_printf(out, t > h.ticks - n ? ",%u" : "%u", (unsigned)d);
	}
	evbuffer_add(out, "]", 1);
}
