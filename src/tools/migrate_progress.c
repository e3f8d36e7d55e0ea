/* migrate_progress.c -- progress of a copy (migrate_progress.h): the meter line
 * redrawn on stderr, shared with dump, and the summary at the end. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "migrate_int.h"
#include "migrate_progress.h"

void
mig_human_bytes(char *buf, size_t len, uint64_t bytes)
{
	if (bytes >= (1ULL << 30))
		snprintf(buf, len, "%.2f GiB", (double)bytes / (double)(1ULL << 30));
	else if (bytes >= (1ULL << 20))
		snprintf(buf, len, "%.1f MiB", (double)bytes / (double)(1ULL << 20));
	else if (bytes >= 1024)
		snprintf(buf, len, "%.1f KiB", (double)bytes / 1024.0);
	else
		snprintf(buf, len, "%" PRIu64 " B", bytes);
}

void
mig_meter_start(struct mig_meter *m, enum mig_progress_mode mode)
{
	memset(m, 0, sizeof(*m));
	m->on = mode == MIG_PROGRESS_ON ||
	    (mode == MIG_PROGRESS_AUTO && isatty(STDERR_FILENO));
	m->start_ns = saker_mono_ns();
	m->last_ns = m->start_ns;
}

static void
mig_meter_draw(struct mig_meter *m, uint64_t now)
{
	char b[32], eta[32] = "";
	double secs = (double)(now - m->start_ns) / 1e9;
	double rate = secs > 0 ? (double)m->items / secs : 0;

	mig_human_bytes(b, sizeof(b), m->bytes);
	if (m->total_items > 0 && rate > 0 && m->items <= m->total_items) {
		uint64_t left = (uint64_t)((double)(m->total_items - m->items) / rate);
		snprintf(eta, sizeof(eta), "  ETA %" PRIu64 ":%02" PRIu64,
		    left / 60, left % 60);
	}
	if (m->total_items > 0)
		fprintf(stderr, "\r%" PRIu64 "/%" PRIu64 " items (%u%%)  %s  %.0f items/s%s\033[K",
		    m->items, m->total_items,
		    (unsigned)(m->items * 100 / m->total_items), b, rate, eta);
	else
		fprintf(stderr, "\r%" PRIu64 " items  %s  %.0f items/s\033[K",
		    m->items, b, rate);
	fflush(stderr);
	m->drawn = true;
}

void
mig_meter_add(struct mig_meter *m, uint64_t bytes)
{
	uint64_t now;

	m->items++;
	m->bytes += bytes;
	/* Read the clock only now and then: this is the per-item path. */
	if (!m->on || (m->items & 255) != 0)
		return;
	now = saker_mono_ns();
	if (now - m->last_ns < 200000000u)
		return;
	m->last_ns = now;
	mig_meter_draw(m, now);
}

void
mig_meter_end(struct mig_meter *m)
{
	if (!m->on)
		return;
	if (m->drawn || m->items > 0)
		mig_meter_draw(m, saker_mono_ns());
	if (m->drawn)
		fputc('\n', stderr);
	m->drawn = false;
}

void
mig_target_set_totals(struct mig_target *t, uint64_t items)
{
	t->meter.total_items = items;
}

void
mig_target_summary(struct mig_target *t, FILE *fp, const char *verb)
{
	char b[32];
	double secs = (double)(saker_mono_ns() - t->meter.start_ns) / 1e9;
	size_t i, nsrc = 0;

	for (i = 0; i < t->nq; i++) {
		const struct mig_q *q = &t->qs[i];

		if (!q->from_src)
			continue;
		nsrc++;
		mig_human_bytes(b, sizeof(b), q->src_bytes);
		fprintf(fp, "  %.*s: %" PRIu64 " items (%" PRIu64 " ready, %" PRIu64
		    " delayed, %" PRIu64 " were open), %s", (int)q->len, q->name,
		    q->src_ready + q->src_delayed, q->src_ready, q->src_delayed,
		    q->src_open, b);
		if (q->src_ids > 0)
			fprintf(fp, ", %" PRIu64 " deduplication ids", q->src_ids);
		fputc('\n', fp);
	}
	mig_human_bytes(b, sizeof(b), t->src_bytes);
	fprintf(fp, "%s %" PRIu64 " items (%s) in %zu queues to %s in %.2f s "
	    "(%.0f items/s)", verb, t->src_items, b, nsrc, t->spec,
	    secs, secs > 0 ? (double)t->src_items / secs : 0.0);
	if (t->src_ids > 0)
		fprintf(fp, ", %" PRIu64 " deduplication ids", t->src_ids);
	fputs("; verified\n", fp);
}
