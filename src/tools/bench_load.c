/* bench_load.c -- `saker bench`: the workloads: what each connection of each mode sends next, and when. */
#include "config.h"

#include <sys/types.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench_int.h"
#include "bench_load.h"
#include "bench_util.h"
#include "bench_wire.h"
#include "clock.h"

/* ------------------------------------------------------------ the pump */

/* Queue that item number i of a spread-out workload goes to. */
static int
spread_queue(const struct bench *b, uint64_t i)
{
	return (int)(i % (uint64_t)b->nqueues);
}

void
resend_stored(struct conn *c)
{
	c->rs_wait_ns = 0;
	c->rs_stored = true;
}

void
resend_later(struct conn *c, uint64_t seq, int q, uint64_t sent_ns)
{
	struct resend *r;

	if (sent_ns >= c->rs_refused_ns) {
		c->rs_wait_ns = c->rs_stored || c->rs_wait_ns == 0 ?
		    RESEND_MIN_NS : c->rs_wait_ns * 2 > RESEND_MAX_NS ?
		    RESEND_MAX_NS : c->rs_wait_ns * 2;
		c->rs_refused_ns = saker_mono_ns();
		c->rs_stored = false;
	}
	if (c->rs_count == c->rs_cap) {
		unsigned ncap = c->rs_cap > 0 ? c->rs_cap * 2 : 64, i;
		struct resend *nr = xrealloc(NULL, ncap * sizeof(*nr));

		for (i = 0; i < c->rs_count; i++)
			nr[i] = c->rs[(c->rs_head + i) % c->rs_cap];
		free(c->rs);
		c->rs = nr;
		c->rs_head = 0;
		c->rs_cap = ncap;
	}
	r = &c->rs[(c->rs_head + c->rs_count) % c->rs_cap];
	r->seq = seq;
	r->queue = q;
	c->rs_count++;
	c->b->resend_pending_now++;
}

/* --resend: send the oldest set waiting to go again, once the backoff
 * has passed.  Before new sets, and in the stop too: a set counts as done
 * only when acknowledged. */
static bool
resend_next(struct conn *c)
{
	struct resend *r;

	if (c->rs_count == 0 ||
	    saker_mono_ns() < c->rs_refused_ns + c->rs_wait_ns)
		return false;
	r = &c->rs[c->rs_head];
	send_set_again(c, r->queue, r->seq);
	c->rs_head = (c->rs_head + 1) % c->rs_cap;
	c->rs_count--;
	c->b->resend_pending_now--;
	c->b->resent++;
	return true;
}

/* One setup request for connection c, or false when it has no more. */
/* --rate: whether another set may go now, counting it if so */
static bool
rate_take(struct bench *b)
{
	double el = (double)(saker_mono_ns() - b->rate_t0) / 1e9;

	if ((double)b->rate_sent >= el * b->o.rate)
		return false;
	b->rate_sent++;
	return true;
}

static bool
setup_next(struct conn *c)
{
	struct bench *b = c->b;
	unsigned s = c->setup_step;

	if (b->o.proto == P_BS) {
		/* Each connection uses and watches its own tube only. */
		const char *t = b->qnames[c->queue];

		c->setup_step++;
		switch (s) {
		case 0: send_line(c, R_SETUP, "use %s\r\n", t); return true;
		case 1: send_line(c, R_SETUP, "watch %s\r\n", t); return true;
		case 2: send_line(c, R_SETUP, "ignore default\r\n"); return true;
		default: return false;
		}
	}
	/* Connection 0 deletes every queue so the run starts empty. */
	if (c->id != 0 || !b->o.clean || s >= (unsigned)b->nall)
		return false;
	c->setup_step++;
	if (b->o.proto == P_RESP) {
		const char *argv[2] = { "DEL", b->qnames[s] };
		size_t lens[2] = { 3, b->qlens[s] };

		ring_push(c, R_SETUP, -1);
		send_resp(c, 2, argv, lens);
	} else
		send_line(c, R_SETUP, "delete %s\r\n", b->qnames[s]);
	return true;
}

/* Issue the connection's next request in the current phase, if any. */
static bool
issue_next(struct conn *c)
{
	struct bench *b = c->b;
	bool running = b->phase == PH_WARMUP || b->phase == PH_MEASURE;

	switch (b->phase) {
	case PH_SETUP:
		return setup_next(c);
	case PH_PREFILL:
		if (b->prefill_left <= 0)
			return false;
		b->prefill_left--;
		if (b->o.mode == M_MGET && b->o.fill == F_EMPTY) {
			send_line(c, R_FLUSH, "flush %s\r\n",
			    b->qnames[b->prefill_left]);
			return true;
		}
		send_set(c, b->o.mode == M_MGET ?
		    spread_queue(b, (uint64_t)b->prefill_left) : c->queue, -1);
		return true;
	case PH_DRAIN:
		if (c->drain_done)
			return false;
		send_get(c, R_DRAIN, c->drain_q);
		return true;
	case PH_STOP:
		/* Blocked consumers keep listening until everything arrives. */
		if (c->role == ROLE_CONSUMER) {
			send_get(c, R_BGET, c->queue);
			return true;
		}
		if (resend_next(c))
			return true;
		/* A worker holding a job finishes it: the drain must not meet
		 * an open item (and a job done is a job done). */
		if (b->o.mode == M_RETRY && c->pair_next == 2 &&
		    c->rcount == 0) {
			c->held_fail = false;
			send_get(c, R_CLOSE, c->queue);
			return true;
		}
		return false;
	default:
		break;
	}
	if (!running)
		return false;
	if (c->role != ROLE_CONSUMER && resend_next(c))
		return true;
	switch (b->o.mode) {
	case M_PAIR:
		c->pair_next ^= 1;
		if (c->pair_next)
			send_set(c, c->queue, -1);
		else
			send_get(c, R_GET, c->queue);
		return true;
	case M_PRODUCE:
		if (b->o.rate > 0 && !rate_take(b))
			return false;
		send_set(c, c->queue, -1);
		return true;
	case M_CONSUME:
		send_get(c, R_GET, c->queue);
		return true;
	case M_MGET:
		if (b->o.fill == F_ITEMS) {
			if (b->mget_left <= 0)
				return false;
			b->mget_left--;
		}
		send_mget(c);
		return true;
	case M_BLOCKING:
		if (c->role == ROLE_CONSUMER) {
			send_get(c, R_BGET, c->queue);
			return true;
		}
		if (b->o.rate <= 0 || !rate_take(b))
			return false;
		times_put(c, 2 * c->seq, saker_mono_ns());
		send_set(c, spread_queue(b, c->seq), -1);
		return true;
	case M_RETRY:
		/* One request at a time, each chosen by the last reply: set,
		 * get/open, then close the job or fail it (abort) */
		if (c->rcount > 0)
			return false;
		if (c->pair_next == 0) {
			send_set(c, c->queue, -1);
			c->pair_next = 1;
		} else if (c->pair_next == 1) {
			send_get(c, R_OGET, c->queue);
		} else {
			send_get(c, c->held_fail ? R_ABORT : R_CLOSE, c->queue);
		}
		return true;
	case M_DELAYED:
		if (c->role == ROLE_CONSUMER) {
			send_get(c, R_BGET, c->queue);
			return true;
		}
		if (b->delayed_left <= 0)
			return false;
		{
			/* Item i (1-based) falls due at i/N of the window. */
			long i = b->o.items - b->delayed_left + 1;
			long d = (long)((int64_t)b->o.window_ms * i / b->o.items);
			uint64_t seq = c->seq;

			uint64_t due = saker_mono_ns() + (uint64_t)d * 1000000ull;

			b->delayed_left--;
			send_set(c, spread_queue(b, seq), d);
			times_put(c, 2 * seq, due);
			if (due > b->last_due)
				b->last_due = due;
		}
		return true;
	}
	return false;
}

static unsigned
conn_depth(const struct conn *c)
{
	/* A consumer blocks in one get at a time, as a real worker does. */
	if (c->role == ROLE_CONSUMER)
		return 1;
	/* A retry worker's next request depends on the last reply; its
	 * drain waits for items that are due later */
	if (c->b->o.mode == M_RETRY)
		return 1;
	/* Filling and emptying are not measured: pipeline them deeply so a
	 * store that fsyncs per turn spends one fsync on many items. */
	if ((c->b->phase == PH_PREFILL || c->b->phase == PH_DRAIN) &&
	    c->b->o.depth < 64)
		return 64;
	/* The delayed producer must hand all items over early in the window,
	 * or late sends would stretch the run past its deadline. */
	if (c->b->o.mode == M_DELAYED && c->role == ROLE_PRODUCER &&
	    c->b->o.depth < 64)
		return 64;
	return (unsigned)c->b->o.depth;
}

void
pump(struct conn *c)
{
	while (!c->b->failed && c->rcount < conn_depth(c))
		if (!issue_next(c))
			break;
}

void
pump_all(struct bench *b)
{
	int i;

	for (i = 0; i < b->nconns && !b->failed; i++)
		pump(&b->conns[i]);
}
