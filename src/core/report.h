/* report.h -- the `stats` reply. */
#ifndef SAKER_REPORT_H
#define SAKER_REPORT_H

#include <stddef.h>

#include "broker.h"
#include "perms.h"

struct evbuffer;

/* Per-queue lines in a plain `stats`: the first this many queues by name,
 * then `STAT queues_omitted <n>` (docs/protocol.md). */
#define STATS_MAX_QUEUES 100

/* Append the STAT lines and END for the `stats` command.  The per-queue
 * lines are those of the queues `who` sees (perms_sees; NULL: all); the
 * global counters are the whole server's. */
void stats_write(struct broker *b, struct evbuffer *out, const struct perms *who);
/* `stats queues [PREFIX]`: the per-queue lines of every queue whose name
 * starts with prefix (plen 0: all) and `who` sees, by name, then END. */
void stats_write_queues(struct broker *b, struct evbuffer *out,
    const char *prefix, size_t plen, const struct perms *who);
/* `stats queue NAME`: that queue's lines (none if it does not exist), END. */
void stats_write_queue(struct broker *b, struct evbuffer *out,
    const char *name, size_t len);

#endif
