/* report.c -- the `stats` reply: global counters, then one block per queue
 * (text lines; the binary protocol sends one packet per line). */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "clock.h"
#include "queues.h"
#include "report.h"

static const char *const sync_names[] = { "always", "periodic", "never" };

struct totals {
	struct broker *b;
	uint64_t items, total_items, bytes;
};

static int
sum_one(void *arg, struct squeue *q)
{
	struct totals *t = arg;
	struct broker *b = t->b;
	struct saker_queue_stats st = { 0 };

	if (saker_store_queue_stats(b->store, q->h, &st) == SAKER_OK) {
		t->items += st.items;
		t->total_items += st.total_items;
		t->bytes += st.bytes;
	}
	return 0;
}

static void
queue_one(struct broker *b, struct evbuffer *out, struct squeue *q)
{
	struct saker_queue_stats st = { 0 };
	int64_t age = 0;

	/* (a queue only in memory, waited on by a get, has no items) */
	if (q->h != NULL &&
	    saker_store_queue_stats(b->store, q->h, &st) != SAKER_OK)
		return;
	if (st.head_created_ms > 0) {
		age = saker_now_ms() - st.head_created_ms;
		if (age < 0)
			age = 0;
	}
#define QSTAT(k, fmt, v) evbuffer_add_printf(out, "STAT queue_%s_" k " " fmt "\r\n", q->name, v)
	QSTAT("items", "%" PRIu64, st.items);
	QSTAT("bytes", "%" PRIu64, st.bytes);
	QSTAT("total_items", "%" PRIu64, st.total_items);
	QSTAT("expired_items", "%" PRIu64, st.expired_items);
	QSTAT("age", "%" PRId64, age);
	QSTAT("discarded", "%" PRIu64, q->discarded);
	QSTAT("waiters", "%zu", q->nwaiters);
	QSTAT("open_transactions", "%" PRIu64, st.open_items);
	QSTAT("delayed_items", "%" PRIu64, st.delayed_items);
	QSTAT("open_timeouts", "%" PRIu64, q->open_timeouts);
	QSTAT("dead_lettered", "%" PRIu64, q->dead_lettered);
	QSTAT("retries", "%" PRIu64, q->retries);
	QSTAT("expired_to", "%" PRIu64, st.expired_to);
	QSTAT("dedup_ids", "%" PRIu64, st.dedup_ids);
	QSTAT("dedup_hits", "%" PRIu64, st.dedup_hits);
#undef QSTAT
}

/* Every queue (whose name starts with prefix), to be sorted by name. */
struct qlist {
	struct squeue **v;
	size_t n, cap;
	const char *prefix;
	size_t plen;
	const struct perms *who;
	bool oom;
};

static int
collect_one(void *arg, struct squeue *q)
{
	struct qlist *l = arg;

	if (l->plen > 0 && strncmp(q->name, l->prefix, l->plen) != 0)
		return 0;
	if (!perms_sees(l->who, q->name, strlen(q->name)))
		return 0;
	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 64;
		struct squeue **nv = realloc(l->v, ncap * sizeof(*nv));

		if (nv == NULL) {
			l->oom = true;
			return 1;
		}
		l->v = nv;
		l->cap = ncap;
	}
	l->v[l->n++] = q;
	return 0;
}

static int
by_name(const void *a, const void *b)
{
	const struct squeue *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

/* Per-queue lines of at most `max` queues in name order; returns how many
 * matching queues were left out. */
static size_t
write_queues(struct broker *b, struct evbuffer *out, const char *prefix,
    size_t plen, size_t max, const struct perms *who)
{
	struct qlist l = { NULL, 0, 0, prefix, plen, who, false };
	size_t i, shown;

	/* with the queues gets wait on that the store does not have */
	queues_walk_waited(b, collect_one, &l);
	if (l.oom) {
		/* out of memory: say what we can, unsorted */
		free(l.v);
		evbuffer_add_printf(out, "STAT error out of memory sorting queues\r\n");
		return 0;
	}
	if (l.n > 1)		/* l.v is NULL with no queues; qsort wants an array */
		qsort(l.v, l.n, sizeof(l.v[0]), by_name);
	shown = l.n < max ? l.n : max;
	for (i = 0; i < shown; i++)
		queue_one(b, out, l.v[i]);
	free(l.v);
	return l.n - shown;
}

void
stats_write_queues(struct broker *b, struct evbuffer *out, const char *prefix,
    size_t plen, const struct perms *who)
{
	write_queues(b, out, prefix, plen, SIZE_MAX, who);
	evbuffer_add(out, "END\r\n", 5);
}

void
stats_write_queue(struct broker *b, struct evbuffer *out, const char *name,
    size_t len)
{
	struct squeue *q = queue_find(b, name, len);

	if (q != NULL && (q->h != NULL || q->nwaiters > 0))
		queue_one(b, out, q);
	evbuffer_add(out, "END\r\n", 5);
}

/* A store on a database server: its connection, for operators. */
static void
stats_write_server(struct broker *b, struct evbuffer *out)
{
	struct saker_store_stats ss;
	int64_t now = saker_now_ms();

	saker_store_get_stats(b->store, &ss);
	if (!ss.server)
		return;
	evbuffer_add_printf(out, "STAT store_connected %d\r\n"
	    "STAT store_reconnects %" PRIu64 "\r\n"
	    "STAT store_in_doubt_commits %" PRIu64 "\r\n"
	    "STAT store_last_commit_age %.3f\r\n", ss.connected ? 1 : 0,
	    ss.reconnects, ss.in_doubt, ss.last_commit_ms > 0 &&
	    ss.last_commit_ms < now ? (double)(now - ss.last_commit_ms) / 1e3 :
	    ss.last_commit_ms > 0 ? 0.0 : -1.0);
	/* what VACUUM of the store waits behind (-1: not known yet) */
	evbuffer_add_printf(out, "STAT store_horizon_age %.3f\r\n"
	    "STAT store_horizon_xids %" PRId64 "\r\n"
	    "STAT store_dead_rows %" PRId64 "\r\n", ss.horizon_age_ms >= 0 ?
	    (double)ss.horizon_age_ms / 1e3 : -1.0, ss.horizon_xids,
	    ss.dead_rows);
	/* the item table's segments, emptied in turn by TRUNCATE */
	if (ss.segments > 0)
		evbuffer_add_printf(out, "STAT store_segments %d\r\n"
		    "STAT store_segment %" PRId64 "\r\n"
		    "STAT store_segment_truncations %" PRId64 "\r\n"
		    "STAT store_segment_moved %" PRIu64 "\r\n", ss.segments,
		    ss.segment, ss.segment_truncations, ss.segment_moved);
	/* the reason, without spaces: stats values are one word */
	if (!ss.connected) {
		char *p;

		for (p = ss.down_why; *p != '\0'; p++)
			if (*p == ' ' || *p == '\r' || *p == '\n')
				*p = '_';
		evbuffer_add_printf(out, "STAT store_down_why %s\r\n", ss.down_why);
	}
}

void
stats_write(struct broker *b, struct evbuffer *out, const struct perms *who)
{
	struct stats *s = &b->stats;
	struct totals t = { b, 0, 0, 0 };
	time_t now = time(NULL);
	size_t omitted;

	queues_walk(b, sum_one, &t);
#define STAT(k, fmt, v) evbuffer_add_printf(out, "STAT " k " " fmt "\r\n", v)
	STAT("pid", "%ld", (long)getpid());
	STAT("uptime", "%lld", (long long)(now - s->started));
	STAT("time", "%lld", (long long)now);
	STAT("version", "%s", PACKAGE_VERSION);
	STAT("store", "%s", saker_store_name(b->store));
	STAT("sync", "%s", sync_names[b->sync]);
	stats_write_server(b, out);
	STAT("curr_connections", "%" PRIu64, s->curr_connections);
	STAT("total_connections", "%" PRIu64, s->total_connections);
	STAT("rejected_connections", "%" PRIu64, s->rejected_connections);
	STAT("cmd_get", "%" PRIu64, s->cmd_get);
	STAT("cmd_set", "%" PRIu64, s->cmd_set);
	STAT("cmd_peek", "%" PRIu64, s->cmd_peek);
	STAT("get_hits", "%" PRIu64, s->get_hits);
	STAT("get_misses", "%" PRIu64, s->get_misses);
	STAT("bytes_read", "%" PRIu64, s->bytes_read);
	STAT("bytes_written", "%" PRIu64, s->bytes_written);
	STAT("curr_items", "%" PRIu64, t.items);
	STAT("total_items", "%" PRIu64, t.total_items);
	STAT("bytes", "%" PRIu64, t.bytes);
	STAT("curr_queues", "%zu", b->nqueues);
	STAT("queue_creates", "%" PRIu64, s->queue_creates);
	STAT("queue_deletes", "%" PRIu64, s->queue_deletes);
	STAT("permission_denied", "%" PRIu64, s->permission_denied);
	STAT("reloads", "%" PRIu64, s->reloads);
	STAT("retries_scheduled", "%" PRIu64, s->retries_scheduled);
	STAT("touches", "%" PRIu64, s->touches);
	STAT("set_duplicates", "%" PRIu64, s->set_duplicates);
	/* Kestrel's per-queue lines, for the first STATS_MAX_QUEUES queues by
	 * name: a server with thousands of queues must not answer a plain
	 * stats with megabytes (clients read it into one string) */
	omitted = write_queues(b, out, NULL, 0, STATS_MAX_QUEUES, who);
	STAT("queues_omitted", "%zu", omitted);
#undef STAT
	evbuffer_add(out, "END\r\n", 5);
}
