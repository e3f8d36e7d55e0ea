/* stats.h -- the broker's counters (report.h writes the `stats` reply). */
#ifndef SAKER_STATS_H
#define SAKER_STATS_H
#include <stdint.h>
#include <time.h>

struct stats {
	time_t started;
	uint64_t curr_connections, total_connections, rejected_connections;
	uint64_t cmd_get, cmd_set, cmd_peek, get_hits, get_misses;
	uint64_t bytes_read, bytes_written;
	uint64_t queue_creates, queue_deletes;
	uint64_t permission_denied;     /* --auth-file refusals (perms.h) */
	uint64_t reloads;               /* SIGHUPs handled (config, users, TLS) */
	uint64_t retries_scheduled;     /* open items given back with a delay
	                                 * (abort /delay=, retry_backoff) */
	uint64_t touches;               /* leases extended (touch) */
	uint64_t set_duplicates;        /* sets answered STORED without an
	                                 * item: their id= was kept (ops.h) */
	/* store commit latency histogram (seconds); last bucket is +Inf */
	uint64_t commit_hist[12 + 1];
	uint64_t commit_ns;
};

#define STATS_COMMIT_BUCKETS 12
extern const double stats_commit_bounds[STATS_COMMIT_BUCKETS];
/* Count one commit that took `ns` nanoseconds. */
void stats_commit(struct stats *s, uint64_t ns);

#endif
