/* qconfig.h -- per-queue configuration (--config FILE, reloaded on SIGHUP). */
#ifndef SAKER_QCONFIG_H
#define SAKER_QCONFIG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qname.h"

/* Limits for one queue; 0 means "no limit" for every field but max_open. */
struct queue_config {
	uint64_t max_items;          /* ready + delayed items */
	uint64_t max_bytes;          /* data bytes of ready items */
	uint64_t max_item_size;      /* bytes; 0 = the server's --max-item-size */
	int64_t max_age_ms;          /* items older than this expire */
	bool discard_old_when_full;  /* drop the oldest instead of NOT_STORED */
	unsigned max_open;           /* open items per connection (>= 1) */
	int64_t open_timeout_ms;     /* open items held longer go back */
	uint32_t max_deliveries;     /* an item opened this many times goes to
	                              * the dead-letter queue when it comes
	                              * back; 0 = unlimited */
	int64_t retry_backoff_ms;    /* retry_backoff BASE: an item given
	                              * back (abort, disconnect, timeout) is
	                              * delayed (retry.h); 0 = at once */
	int64_t retry_backoff_max_ms;/* retry_backoff MAX (the cap) */
	char dead_letter[SAKER_QNAME_MAX + 1]; /* "" = "<name>_dead" */
	char expire_to[SAKER_QNAME_MAX + 1];   /* where expired items go;
	                              * "" = dropped */
	int64_t dedup_window_ms;     /* how long a set's id= is kept;
	                              * 0 = QCONFIG_DEDUP_WINDOW_MS */
	uint64_t max_dedup_ids;      /* ids kept at most (a set with a new id
	                              * past it is refused); 0 =
	                              * QCONFIG_MAX_DEDUP_IDS: never unlimited */
};

/* Deduplication defaults (docs/protocol.md, "Deduplication ids"): the
 * window of SQS FIFO queues, and a bound on what a flood of distinct ids
 * may cost (a few hundred bytes each in memory or on disk). */
#define QCONFIG_DEDUP_WINDOW_MS   300000LL          /* 5 minutes */
#define QCONFIG_DEDUP_WINDOW_MIN  1000LL            /* 1 second */
#define QCONFIG_DEDUP_WINDOW_MAX  604800000LL       /* 7 days */
#define QCONFIG_MAX_DEDUP_IDS     100000u
#define QCONFIG_MAX_DEDUP_IDS_MAX 100000000u

/* The settings in effect: a field left 0 (no file, a test's config) is
 * the default. */
static inline int64_t
qconfig_dedup_window(const struct queue_config *qc)
{
	return qc->dedup_window_ms > 0 ? qc->dedup_window_ms :
	    QCONFIG_DEDUP_WINDOW_MS;
}
static inline uint64_t
qconfig_max_dedup_ids(const struct queue_config *qc)
{
	return qc->max_dedup_ids > 0 ? qc->max_dedup_ids :
	    QCONFIG_MAX_DEDUP_IDS;
}

struct config;

/* Parse FILE. On error returns NULL and writes "FILE:LINE: reason" to err. */
struct config *config_load(const char *path, const struct queue_config *defaults,
    char *err, size_t errlen);
/* A configuration with only `defaults` (no file). */
struct config *config_default(const struct queue_config *defaults);
void config_free(struct config *cf);

/* The settings for queue `name`: the exact [queue NAME] section, else the
 * longest matching [queue PREFIX*] section, else the defaults. */
const struct queue_config *config_for(const struct config *cf, const char *name,
    size_t len);
/* Does the defaults' or some section's dead_letter name exactly this
 * queue? */
bool config_names_dead_letter(const struct config *cf, const char *name,
    size_t len);
/* Does any section set open_timeout? */
bool config_has_open_timeout(const struct config *cf);

#endif
