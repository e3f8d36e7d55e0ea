/* stats.c -- the broker's counters and the commit latency histogram. */
#include "config.h"

#include <stddef.h>

#include "stats.h"

const double stats_commit_bounds[STATS_COMMIT_BUCKETS] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0
};

void
stats_commit(struct stats *s, uint64_t ns)
{
	double sec = (double)ns / 1e9;
	size_t i;

	for (i = 0; i < STATS_COMMIT_BUCKETS && sec > stats_commit_bounds[i]; i++)
		;
	s->commit_hist[i]++;
	s->commit_ns += ns;
}

