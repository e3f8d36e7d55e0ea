/* bench_util.c -- `saker bench`: the clock, failing a run, growing arrays, seen/acked bit sets, the latency histogram, the server's CPU. */
#include "config.h"

#include <sys/types.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <event2/event.h>

#include "bench_int.h"
#include "bench_util.h"
#include "clock.h"

/* ---------------------------------------------------------------- utils */

void
fail(struct bench *b, const char *fmt, ...)
{
	va_list ap;

	if (b->failed)
		return;
	b->failed = true;
	va_start(ap, fmt);
	vsnprintf(b->errmsg, sizeof(b->errmsg), fmt, ap);
	va_end(ap);
	event_base_loopbreak(b->base);
}

void *
xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n);

	if (q == NULL) {
		fprintf(stderr, "saker bench: out of memory\n");
		exit(1);
	}
	return q;
}

bool
bits_test(const struct bits *bs, uint64_t i)
{
	size_t w = (size_t)(i / 64);

	return w < bs->nw && (bs->w[w] & (1ull << (i % 64))) != 0;
}

/* Set bit i; return its previous value. */
bool
bits_test_set(struct bits *bs, uint64_t i)
{
	size_t w = (size_t)(i / 64);
	uint64_t m = 1ull << (i % 64);
	bool old;

	if (w >= bs->nw) {
		size_t nw = bs->nw ? bs->nw * 2 : 1024;

		while (nw <= w)
			nw *= 2;
		bs->w = xrealloc(bs->w, nw * sizeof(*bs->w));
		memset(bs->w + bs->nw, 0, (nw - bs->nw) * sizeof(*bs->w));
		bs->nw = nw;
	}
	old = (bs->w[w] & m) != 0;
	bs->w[w] |= m;
	return old;
}

void
times_put(struct conn *c, uint64_t seq, uint64_t t)
{
	if (seq >= c->t_cap) {
		size_t n = c->t_cap ? c->t_cap * 2 : 4096;

		while (n <= seq)
			n *= 2;
		c->t_ns = xrealloc(c->t_ns, n * sizeof(*c->t_ns));
		memset(c->t_ns + c->t_cap, 0, (n - c->t_cap) * sizeof(*c->t_ns));
		c->t_cap = n;
	}
	c->t_ns[seq] = t;
}

uint64_t
times_get(const struct conn *c, uint64_t seq)
{
	return seq < c->t_cap ? c->t_ns[seq] : 0;
}

/* ------------------------------------------------------------ histogram */

static unsigned
hist_index(uint64_t v)
{
	unsigned msb, shift;

	if (v < 2 * HIST_SUB)
		return (unsigned)v;
	msb = 63u - (unsigned)__builtin_clzll(v);
	shift = msb - HIST_SUB_BITS;
	if (shift > HIST_SHIFTS)
		return HIST_BUCKETS - 1;
	return 2 * HIST_SUB + (shift - 1) * HIST_SUB +
	    (unsigned)((v >> shift) - HIST_SUB);
}

/* The middle of bucket i: within half a bucket (< 0.4%) of any value in it. */
static uint64_t
hist_value(unsigned i)
{
	unsigned k, shift;
	uint64_t sub;

	if (i < 2 * HIST_SUB)
		return i;
	k = i - 2 * HIST_SUB;
	shift = k / HIST_SUB + 1;
	sub = k % HIST_SUB + HIST_SUB;
	return (sub << shift) + ((1ull << shift) >> 1);
}

void
hist_add(struct hist *h, uint64_t v)
{
	h->b[hist_index(v)]++;
	h->n++;
	h->sum += v;
	if (v > h->max)
		h->max = v;
	if (v >= HIST_SLOW_NS) {
		int64_t now = saker_now_ms();

		if (h->nslow > 0 &&
		    now - h->slow[h->nslow - 1].at_ms < HIST_SLOW_GAP_MS) {
			if (v > h->slow[h->nslow - 1].v)
				h->slow[h->nslow - 1].v = v;
		} else if (h->nslow < HIST_SLOW_MAX) {
			h->slow[h->nslow].at_ms = now;
			h->slow[h->nslow].v = v;
			h->nslow++;
		} else {
			h->slow_dropped++;
		}
	}
}

uint64_t
hist_count_below(const struct hist *h, uint64_t ns)
{
	uint64_t acc = 0;
	unsigned i;

	for (i = 0; i < HIST_BUCKETS; i++)
		if (hist_value(i) < ns)
			acc += h->b[i];
	return acc;
}

/* Value at quantile ppm (parts per million), in ns. */
uint64_t
hist_quantile(const struct hist *h, uint64_t ppm)
{
	uint64_t want, acc = 0;
	unsigned i;

	if (h->n == 0)
		return 0;
	want = (h->n * ppm + 999999) / 1000000;
	if (want == 0)
		want = 1;
	for (i = 0; i < HIST_BUCKETS; i++) {
		acc += h->b[i];
		if (acc >= want) {
			uint64_t v = hist_value(i);

			return v > h->max ? h->max : v;
		}
	}
	return h->max;
}

/* (bench_util.h) */
void
server_cpu(const struct bench *b, struct cpu_use *u)
{
	char path[64], buf[1024], *p;
	unsigned long ut, st;
	FILE *f;
	size_t n;

	u->ok = false;
	if (b->o.server_pid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%ld/stat", b->o.server_pid);
	if ((f = fopen(path, "r")) == NULL)
		return;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Fields after the parenthesised command name; utime is field 14. */
	if ((p = strrchr(buf, ')')) == NULL)
		return;
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
	    &ut, &st) != 2)
		return;
	u->user = (double)ut / (double)sysconf(_SC_CLK_TCK);
	u->sys = (double)st / (double)sysconf(_SC_CLK_TCK);
	u->ok = true;
}
