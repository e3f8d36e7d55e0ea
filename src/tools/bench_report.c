/* bench_report.c -- `saker bench`: the report: throughput, latency percentiles, verification counts, text or JSON. */
#include "config.h"

#include <sys/types.h>
#include <sys/resource.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "bench_int.h"
#include "bench_opts.h"
#include "bench_report.h"
#include "bench_util.h"
#include "clock.h"

/* ----------------------------------------------------------- reporting */

static double
tv_s(const struct timeval *tv)
{
	return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

static void
lost_counts(const struct bench *b, uint64_t *lost, uint64_t *unacked)
{
	int i;
	size_t w;

	*lost = *unacked = 0;
	for (i = 0; i < b->nconns; i++) {
		const struct conn *c = &b->conns[i];
		size_t n = c->acked.nw > c->seen.nw ? c->acked.nw : c->seen.nw;

		for (w = 0; w < n; w++) {
			uint64_t a = w < c->acked.nw ? c->acked.w[w] : 0;
			uint64_t s = w < c->seen.nw ? c->seen.w[w] : 0;

			*lost += (uint64_t)__builtin_popcountll(a & ~s);
			*unacked += (uint64_t)__builtin_popcountll(s & ~a);
		}
	}
}

/* The first LIST_MAX items whose bits differ the `lost` way (acknowledged,
 * never received) or the other (received, never acknowledged: a set
 * answered with an error that was stored after all), with the wall-clock
 * times their set was sent and acknowledged where the mode keeps them
 * (blocking), so a loss can be matched with a server's log. */
#define LIST_MAX 16

static void
print_items(const struct bench *b, bool lost, bool json)
{
	struct timespec rt;
	uint64_t off_ns, a, s, d, mono = saker_mono_ns();
	size_t w, k = 0;
	int i, bit;

	clock_gettime(CLOCK_REALTIME, &rt);
	off_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec -
	    mono;
	if (json)
		printf(",\"%s_items\":[", lost ? "lost" : "unacked");
	else
		printf("  %s (connection/sequence, at most %d):",
		    lost ? "lost" : "received but not acknowledged", LIST_MAX);
	for (i = 0; i < b->nconns && k < LIST_MAX; i++) {
		const struct conn *c = &b->conns[i];
		size_t n = c->acked.nw > c->seen.nw ? c->acked.nw : c->seen.nw;

		for (w = 0; w < n && k < LIST_MAX; w++) {
			a = w < c->acked.nw ? c->acked.w[w] : 0;
			s = w < c->seen.nw ? c->seen.w[w] : 0;
			d = lost ? a & ~s : s & ~a;
			while (d != 0 && k < LIST_MAX) {
				uint64_t seq, sent, stored;

				bit = __builtin_ctzll(d);
				d &= d - 1;
				seq = (uint64_t)w * 64 + (uint64_t)bit;
				sent = b->o.mode == M_BLOCKING ?
				    times_get(c, 2 * seq) : 0;
				stored = b->o.mode == M_BLOCKING ?
				    times_get(c, 2 * seq + 1) : 0;
				if (json) {
					printf("%s[%d,%" PRIu64, k ? "," : "", i,
					    seq);
					if (sent)
						printf(",%" PRIu64, (sent + off_ns) /
						    1000000);
					else
						printf(",null");
					if (stored && lost)
						printf(",%" PRIu64, (stored +
						    off_ns) / 1000000);
					else if (lost)
						printf(",null");
					printf("]");
				} else
					printf(" %d/%" PRIu64, i, seq);
				k++;
			}
		}
	}
	printf(json ? "]" : "\n");
}

static void
print_hist(const struct hist *h, const char *pre, bool json)
{
	static const struct { const char *name; uint64_t ppm; } qs[] = {
		{ "p50", 500000 }, { "p90", 900000 }, { "p99", 990000 },
		{ "p999", 999000 }
	};
	size_t i;

	for (i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		double us = (double)hist_quantile(h, qs[i].ppm) / 1000.0;

		if (json)
			printf(",\"%s_%s_us\":%.1f", pre, qs[i].name, us);
		else
			printf(" %s=%.1f", qs[i].name, us);
	}
	if (json) {
		/* a coarse histogram: samples per bucket, the last one
		 * open-ended; and the slow samples with their times */
		static const uint64_t edges_us[] = { 100, 200, 500, 1000, 2000,
		    5000, 10000, 20000, 50000, 100000, 200000, 500000 };
		uint64_t below = 0, c;

		printf(",\"%s_hist_edges_us\":[", pre);
		for (i = 0; i < sizeof(edges_us) / sizeof(edges_us[0]); i++)
			printf("%s%" PRIu64, i ? "," : "", edges_us[i]);
		printf("],\"%s_hist\":[", pre);
		for (i = 0; i < sizeof(edges_us) / sizeof(edges_us[0]); i++) {
			c = hist_count_below(h, edges_us[i] * 1000);
			printf("%s%" PRIu64, i ? "," : "", c - below);
			below = c;
		}
		printf(",%" PRIu64 "],\"%s_slow\":[", h->n - below, pre);
		for (i = 0; i < h->nslow; i++)
			printf("%s[%" PRId64 ",%.1f]", i ? "," : "",
			    h->slow[i].at_ms, (double)h->slow[i].v / 1000.0);
		printf("],\"%s_slow_dropped\":%" PRIu64, pre, h->slow_dropped);
	}
	if (json)
		printf(",\"%s_max_us\":%.1f,\"%s_mean_us\":%.1f,\"%s_count\":%"
		    PRIu64, pre, (double)h->max / 1000.0, pre,
		    h->n ? (double)h->sum / (double)h->n / 1000.0 : 0.0, pre,
		    h->n);
	else
		printf(" max=%.1f mean=%.1f (us, n=%" PRIu64 ")\n",
		    (double)h->max / 1000.0,
		    h->n ? (double)h->sum / (double)h->n / 1000.0 : 0.0, h->n);
}

/* Distinct items the producers sent (a resend is the same item). */
static uint64_t
set_items(const struct bench *b)
{
	uint64_t n = 0;
	int i;

	for (i = 0; i < b->nconns; i++)
		n += b->conns[i].seq;
	return n;
}

int
report(struct bench *b)
{
	double secs = (double)(b->t_measure_end - b->t_measure) / 1e9;
	double cpu, scpu = -1, suser = 0, ssys = 0, per = 0;
	/* what "per item" divides by: requests in mget mode */
	uint64_t units = b->o.mode == M_MGET ? b->m_reqs : b->m_items;
	uint64_t lost = 0, unacked = 0;
	const struct opts *o = &b->o;
	bool bad;

	if (!b->stopped) {	/* interrupted before the measured phase ended */
		getrusage(RUSAGE_SELF, &b->ru1);
		server_cpu(b, &b->srv1);
	}
	cpu = tv_s(&b->ru1.ru_utime) + tv_s(&b->ru1.ru_stime) -
	    tv_s(&b->ru0.ru_utime) - tv_s(&b->ru0.ru_stime);
	if (b->srv0.ok && b->srv1.ok) {
		suser = b->srv1.user - b->srv0.user;
		ssys = b->srv1.sys - b->srv0.sys;
		scpu = suser + ssys;
		if (units > 0)
			per = scpu * 1e6 / (double)units;
	}
	if (secs <= 0)
		secs = 1e-9;
	if (o->verify)
		lost_counts(b, &lost, &unacked);
	bad = o->verify && (lost > 0 || b->dups > 0);

	if (o->json) {
		printf("{\"mode\":\"%s\",\"protocol\":\"%s\",\"server\":\"%s\","
		    "\"conns\":%d,\"depth\":%d,\"size\":%d,\"queues\":%d",
		    mode_names[o->mode], proto_names[o->proto], o->server,
		    o->conns, o->depth, o->size, b->nqueues);
		if (o->mode == M_MGET)
			printf(",\"keys\":%d,\"fill\":\"%s\"", o->keys,
			    fill_names[o->fill]);
		if (o->mode == M_BLOCKING || o->mode == M_PRODUCE)
			printf(",\"rate\":%.0f", o->rate);
		printf(",\"ids\":%s", o->ids ? "true" : "false");
		if (o->resend)
			printf(",\"set_items\":%" PRIu64 ",\"resent\":%" PRIu64
			    ",\"resend_pending\":%" PRIu64, set_items(b),
			    b->resent, b->resend_pending_now);
		printf(",\"seconds\":%.3f,\"ops\":%" PRIu64 ",\"ops_per_s\":%.0f,"
		    "\"items\":%" PRIu64 ",\"items_per_s\":%.0f,\"sets\":%"
		    PRIu64 ",\"gets\":%" PRIu64 ",\"misses\":%" PRIu64,
		    secs, b->m_ops, (double)b->m_ops / secs, b->m_items,
		    (double)b->m_items / secs, b->m_sets, b->m_gets,
		    b->m_misses);
		if (o->mode == M_MGET)
			printf(",\"requests\":%" PRIu64 ",\"requests_per_s\":%.0f",
			    b->m_reqs, (double)b->m_reqs / secs);
		print_hist(&b->lat, "lat", true);
		if (o->mode == M_BLOCKING || o->mode == M_DELAYED)
			print_hist(&b->dlat, o->mode == M_DELAYED ? "late" :
			    "deliv", true);
		if (o->mode == M_BLOCKING)
			print_hist(&b->elat, "e2e", true);
		printf(",\"errors\":%" PRIu64 ",\"verified\":%s",
		    b->errors, o->verify && !b->drain_timeout ? "true" : "false");
		if (o->verify) {
			printf(",\"in\":%" PRIu64 ",\"out\":%" PRIu64
			    ",\"leftover\":%" PRIu64 ",\"lost\":%" PRIu64
			    ",\"duplicates\":%" PRIu64 ",\"unacked_seen\":%" PRIu64
			    ",\"foreign\":%" PRIu64, b->acked_total,
			    b->received, b->leftover, lost, b->dups, unacked,
			    b->foreign);
			print_items(b, true, true);
			print_items(b, false, true);
		}
		if (o->mode == M_DELAYED)
			printf(",\"early\":%" PRIu64, b->early);
		if (o->mode == M_RETRY)
			printf(",\"fail_pct\":%d,\"retries\":%" PRIu64
			    ",\"dead_lettered\":%" PRIu64, o->fail_pct,
			    b->retries, b->dead);
		printf(",\"client_cpu_s\":%.3f", cpu);
		if (scpu >= 0)
			printf(",\"server_cpu_s\":%.3f,\"server_cpu_pct\":%.2f,"
			    "\"server_user_s\":%.3f,\"server_sys_s\":%.3f,"
			    "\"server_us_per_item\":%.2f", scpu,
			    100.0 * scpu / secs, suser, ssys, per);
		printf(",\"interrupted\":%s}\n",
		    b->interrupted ? "true" : "false");
		return bad ? 2 : 0;
	}
	printf("saker bench %s: %s %s, %d conns, depth %d, %d-byte items, "
	    "%d queue%s%s\n", mode_names[o->mode], proto_names[o->proto],
	    o->server, o->conns, o->depth, o->size, b->nqueues,
	    b->nqueues == 1 ? "" : "s", o->ids ? ", sets with ids" : "");
	printf("  measured %.2f s: %" PRIu64 " items (%.0f items/s), %" PRIu64
	    " ops (%.0f ops/s), %" PRIu64 " empty gets\n", secs, b->m_items,
	    (double)b->m_items / secs, b->m_ops, (double)b->m_ops / secs,
	    b->m_misses);
	if (o->mode == M_MGET)
		printf("  %" PRIu64 " multi-gets of %d keys (queues %s): %.0f "
		    "requests/s, %.0f keys/s\n", b->m_reqs, o->keys,
		    fill_names[o->fill], (double)b->m_reqs / secs,
		    (double)b->m_reqs * o->keys / secs);
	printf("  request latency:");
	print_hist(&b->lat, "lat", false);
	if (o->mode == M_BLOCKING) {
		printf("  delivery latency (STORED to receipt):");
		print_hist(&b->dlat, "deliv", false);
		printf("  delivery latency (set sent to receipt):");
		print_hist(&b->elat, "e2e", false);
		if (b->before_ack > 0)
			printf("  %" PRIu64 " items arrived before their STORED "
			    "was read (counted as 0)\n", b->before_ack);
	}
	if (o->mode == M_DELAYED) {
		printf("  promotion lateness (receipt - due):");
		print_hist(&b->dlat, "late", false);
		printf("  %" PRIu64 " items arrived more than 1 ms early\n",
		    b->early);
	}
	if (o->mode == M_RETRY)
		printf("  jobs done (closed) %" PRIu64 ", failed (aborted, %d%%)"
		    " %" PRIu64 ", %s; %" PRIu64 " drained from the"
		    " dead-letter queues\n", b->m_items, o->fail_pct, b->retries,
		    o->retry_delay_ms >= 0 ? "with abort/delay=" :
		    "with the queue's retry_backoff", b->dead);
	if (b->errors > 0)
		printf("  %" PRIu64 " error replies, first: %s\n", b->errors,
		    b->first_error);
	if (o->resend)
		printf("  resent %" PRIu64 " sets not acknowledged%s; %" PRIu64
		    " never acknowledged\n", b->resent, o->ids ?
		    " (same ids)" : " (no ids: a resend may duplicate)",
		    b->resend_pending_now);
	if (o->verify)
		printf("  verify: in %" PRIu64 ", out %" PRIu64 " (%" PRIu64
		    " left after the run), lost %" PRIu64 ", duplicates %"
		    PRIu64 ", unacknowledged %" PRIu64 ", foreign %" PRIu64
		    "  => %s\n", b->acked_total, b->received, b->leftover,
		    lost, b->dups, unacked, b->foreign, bad ? "FAILED" : "ok");
	else
		printf("  verify: off\n");
	if (o->verify && lost > 0)
		print_items(b, true, false);
	if (o->verify && unacked > 0)
		print_items(b, false, false);
	if (b->drain_timeout)
		printf("  the drain after the run timed out: loss counts are "
		    "upper bounds\n");
	printf("  client cpu %.2f s", cpu);
	if (scpu >= 0)
		printf(", server cpu %.3f s (%.2f%% of one core: user %.3f s,"
		    " system %.3f s; %.2f us per %s)", scpu,
		    100.0 * scpu / secs, suser, ssys, per,
		    o->mode == M_MGET ? "request" : "item");
	printf("\n");
	return bad ? 2 : 0;
}
