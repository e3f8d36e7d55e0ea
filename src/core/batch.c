/* batch.c -- the broker's batch cycle: the commit and what follows it,
 * promotion of delayed items, open-item timeouts, sweeps, the ticks of a
 * driver shared with other processes.  The loop that calls these is the
 * owner's (sakerd's server.c); the timers they ask for go through
 * broker_hooks. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "batch.h"
#include "clock.h"
#include "deadletter.h"
#include "log.h"
#include "ops.h"
#include "queues.h"
#include "retry.h"
#include "session.h"


/* With -vv, commits, promotions and sweeps that hold the loop at least
 * this long are logged with their duration. */
#define DEBUG_SLOW_NS 1000000u

/* The result `rc` of the commit of batch b->flush_batch, which began at
 * t0 (monotonic ns) and held a client's put when `put`: the replies' result,
 * the queues, the store's health.  `commits` is the store's count of
 * commits before it, when it was failed. */
static void
commit_outcome(struct broker *b, int rc, uint64_t t0, bool put,
    uint64_t commits, struct commit_result *res)
{
	struct saker_store_stats st;

	t0 = saker_mono_ns() - t0;
	stats_commit(&b->stats, t0);
	/* issue 25's evidence: what held the loop, when (-vv) */
	if (t0 >= DEBUG_SLOW_NS && log_get_level() >= LOG_LVL_DEBUG)
		log_debug("commit of batch %" PRIu64 ": %" PRIu64 " us",
		    b->flush_batch, t0 / 1000);
	if (rc != SAKER_OK) {
		const char *reason;

		res->ok = false;
		res->in_doubt = rc == SAKER_EINDOUBT;
		/* Copied: reopening the handles below overwrites the
		 * driver's message buffer before the replies go out. */
		reason = saker_store_errmsg(b->store);
		if (reason == NULL || *reason == '\0')
			reason = saker_strerror(rc);
		/* the log names the file, the clients' replies do not */
		broker_redact(b, reason, res->reason, sizeof(res->reason));
		if (res->in_doubt)
			log_error("store commit failed, outcome unknown (items "
			    "taken are handed out, items put may be there "
			    "after a restart): %s", reason);
		else if (!b->store_failed ||
		    strncmp(b->store_error, res->reason,
		    sizeof(b->store_error) - 1) != 0)
			/* once per reason: a store that is down
			 * fails every turn that writes */
			log_error("store commit failed, batch rolled back: %s",
			    reason);
		broker_store_failed(b, res->reason);
		queues_reopen(b);
		return;
	}
	/* Deleted queues are freed once no batch gathering could still
	 * bring them back (a batch in flight finished under a dirty one). */
	if (!b->dirty)
		queues_reap(b);
	/* Only a commit that wrote something proves the store
	 * writable again; an empty batch always succeeds, even
	 * on a store that refuses writes until restart. */
	if (b->store_failed) {
		saker_store_get_stats(b->store, &st);
		if (st.commits > commits) {
			b->store_failed = false;
			log_info("store commits succeed again");
		}
	}
	/* a set went through: what /healthz remembers of a
	 * refused write (a full disk, a database outage) is
	 * over */
	if (put)
		b->store_failed_ms = 0;
}

static uint64_t
store_commits(struct broker *b)
{
	struct saker_store_stats st;

	if (!b->store_failed)
		return 0;
	saker_store_get_stats(b->store, &st);
	return st.commits;
}

static void
result_ok(struct commit_result *res)
{
	res->ok = true;
	res->in_doubt = false;
	res->reason[0] = '\0';
}

/* The commit of the current batch, synchronous (`async` false) or handed
 * to the store when it can (*started). */
static void
commit_batch(struct broker *b, bool async, bool *started,
    struct commit_result *res)
{
	uint64_t commits = 0, t0;
	int rc;

	*started = false;
	result_ok(res);
	if (b->dirty) {
		t0 = saker_mono_ns();
		commits = store_commits(b);
		b->flush_batch = b->batch;
		if (async)
			rc = saker_store_commit_start(b->store, started);
		else
			rc = saker_store_commit(b->store);
		b->dirty = false;
		if (*started) {
			b->inflight = true;
			b->flight_batch = b->batch;
			b->flight_put = b->batch_put;
			b->flight_t0 = t0;
			b->flight_commits = commits;
		} else
			commit_outcome(b, rc, t0, b->batch_put, commits, res);
		b->batch_put = false;
	}
	b->flush_batch = b->batch++;
}

void
broker_commit(struct broker *b, struct commit_result *res)
{
	bool started;

	commit_batch(b, false, &started, res);
}

bool
broker_commit_start(struct broker *b, struct commit_result *res)
{
	bool started;

	commit_batch(b, b->async_commit && !b->inflight, &started, res);
	return started;
}

static int
serve_waited(void *arg, struct squeue *q)
{
	struct broker *b = arg;

	if (q->nwaiters > 0 && q->h != NULL)
		queue_mark_ready(b, q);
	return 0;
}

bool
broker_commit_finish(struct broker *b, struct commit_result *res)
{
	int rc;

	result_ok(res);
	if (!b->inflight)
		return true;
	rc = saker_store_commit_finish(b->store);
	b->inflight = false;
	b->flush_batch = b->flight_batch;
	commit_outcome(b, rc, b->flight_t0, b->flight_put, b->flight_commits,
	    res);
	/* the waiters the flight's sessions held up (op_serve_waiters) */
	queues_walk_waited(b, serve_waited, b);
	if (res->ok)
		return true;
	/* the batch gathered on top of it went down with it (store.h) */
	b->dirty = false;
	b->batch_put = false;
	return false;
}

void
broker_fail_batch(struct broker *b)
{
	b->flush_batch = b->batch++;
}

void
broker_serve_ready(struct broker *b)
{
	struct squeue *q;

	while ((q = TAILQ_FIRST(&b->ready)) != NULL) {
		TAILQ_REMOVE(&b->ready, q, ready_link);
		q->ready = false;
		op_serve_waiters(b, q);
	}
}

/* --- delayed items ------------------------------------------------------ */

/* How soon to try again when due items could not be promoted. */
#define PROMOTE_RETRY_MS 100

void
broker_promote(struct broker *b)
{
	int64_t now = saker_now_ms(), next = 0;
	uint64_t t0 = 0;
	int rc;

	if (log_get_level() >= LOG_LVL_DEBUG)
		t0 = saker_mono_ns();
	rc = saker_store_promote(b->store, now, &next);
	if (t0 != 0 && saker_mono_ns() - t0 >= DEBUG_SLOW_NS)
		log_debug("promote: %" PRIu64 " us",
		    (saker_mono_ns() - t0) / 1000);
	if (rc != SAKER_OK) {
		const char *why = saker_store_errmsg(b->store);

		/* Logged once per failure streak, not every retry. */
		if (!b->promote_failing)
			log_error("promoting delayed items: %s (retrying every "
			    "%d ms)", why, PROMOTE_RETRY_MS);
		b->promote_failing = true;
		if (rc == SAKER_EREADONLY || rc == SAKER_EIO)
			broker_store_failed(b, why);
		next = now + PROMOTE_RETRY_MS;
	} else {
		b->promote_failing = false;
		/* A due time already past that the driver did not promote
		 * would re-arm the timer at 0 ms forever; back off instead. */
		if (next > 0 && next <= now)
			next = now + PROMOTE_RETRY_MS;
	}
	broker_touch(b);
	if (next > 0)
		b->hooks->arm_promote(b, next);
}

/* --- open items --------------------------------------------------------- */

void
broker_expire_opens(struct broker *b)
{
	int64_t now = saker_now_ms(), next = 0;
	struct open_item *oi, *prev;
	struct session *s;

	TAILQ_FOREACH(s, &b->sessions, link) {
		/* newest first, so several expiring together keep their order */
		for (oi = TAILQ_LAST(&s->opens, open_list); oi != NULL; oi = prev) {
			prev = TAILQ_PREV(oi, open_list, link);
			if (oi->deadline_ms == 0)
				continue;
			if (oi->deadline_ms > now) {
				if (next == 0 || oi->deadline_ms < next)
					next = oi->deadline_ms;
				continue;
			}
			if (oi->q->h != NULL &&
			    dl_give_back(b, oi->q, oi->id, oi->deliveries,
			    RETRY_BACKOFF) ==
			    SAKER_OK)
				oi->q->open_timeouts++;
			session_forget_open(s, oi);
		}
	}
	if (next != 0)
		b->hooks->arm_open_timeout(b, next);
}

/* --- housekeeping ------------------------------------------------------- */

/* Expired items are dropped lazily at the head; this bounded sweep also
 * frees those stuck behind live ones. */
#define SWEEP_LIMIT 1000
static int
sweep_one(void *arg, struct squeue *q)
{
	struct broker *b = arg;
	const struct queue_config *qc = queue_cfg(b, q);
	struct saker_queue_stats st;
	uint64_t removed = 0;

	if (saker_store_flush_expired(b->store, q->h, saker_now_ms(),
	    SWEEP_LIMIT, &removed) == SAKER_OK && removed > 0)
		broker_touch(b);
	/* ids past their dedup_window, as bounded: a set at max_dedup_ids
	 * sweeps too, but a queue nobody sets should not keep them */
	removed = 0;
	if (saker_store_dedup_sweep(b->store, q->h, saker_now_ms(),
	    SWEEP_LIMIT, &removed) == SAKER_OK && removed > 0)
		broker_touch(b);
	/* expired items moved by the store since the last sweep (here, by
	 * takes, by promotion): one log line */
	memset(&st, 0, sizeof(st));
	if (qc->expire_to[0] != '\0' &&
	    saker_store_queue_stats(b->store, q->h, &st) == SAKER_OK &&
	    st.expired_to > q->expired_to_seen) {
		log_info("queue %s: %" PRIu64 " expired items moved to %s (%"
		    PRIu64 " so far)", q->name, st.expired_to -
		    q->expired_to_seen, qc->expire_to, st.expired_to);
		q->expired_to_seen = st.expired_to;
	}
	return 0;
}

void
broker_sweep(struct broker *b)
{
	uint64_t t0 = saker_mono_ns();

	if (b->status != STATUS_QUIESCENT)
		queues_walk(b, sweep_one, b);
	if (log_get_level() >= LOG_LVL_DEBUG)
		log_debug("sweep of %zu queues: %" PRIu64 " us", b->nqueues,
		    (saker_mono_ns() - t0) / 1000);
}

void
broker_store_ready(struct broker *b)
{
	if (saker_store_fd_ready(b->store, saker_now_ms()) != SAKER_OK)
		log_warn("store notification: %s", saker_store_errmsg(b->store));
	broker_touch(b);
}

static int
retry_waiters(void *arg, struct squeue *q)
{
	struct broker *b = arg;

	/* a get may wait on a queue another process has created since */
	queue_retry_shared(b, q);
	if (q->nwaiters > 0 && q->h != NULL)
		queue_mark_ready(b, q);
	return 0;
}

void
broker_tick(struct broker *b)
{
	int64_t next = 0;

	if (saker_store_tick(b->store, saker_now_ms()) != SAKER_OK)
		log_warn("store housekeeping: %s", saker_store_errmsg(b->store));
	/* other processes may have added items or delayed items we were not
	 * told about: look again */
	if (saker_store_shared(b->store))
		queues_walk_waited(b, retry_waiters, b);
	if (saker_store_promote(b->store, saker_now_ms(), &next) == SAKER_OK &&
	    next > 0)
		b->hooks->arm_promote(b, next);
	broker_touch(b);
}

