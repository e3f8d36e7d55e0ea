/*
 * broker.h -- the broker: the store, its queues, configuration, status,
 * counters and the batch number, in one struct instead of a global.
 *
 * The broker knows nothing about sockets, event loops or wire formats.
 * What it needs from the program that runs it (sakerd's loop, a test, a
 * fuzz target) it asks through struct broker_hooks: "commit at the end of
 * this turn", "this session has replies to send", "arm a timer at T",
 * "wake this session later", "close it".  A loop turn is one batch: every
 * command of the turn runs against the store, then the owner calls
 * broker_commit() (batch.h) once and sends the replies the batch held back.
 */
#ifndef SAKER_BROKER_H
#define SAKER_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "saker/store.h"
#include "hashmap.h"
#include "qconfig.h"
#include "stats.h"

struct auth;
struct broker;
struct proto_scratch;
struct session;
struct squeue;
TAILQ_HEAD(session_list, session);
TAILQ_HEAD(squeue_list, squeue);

enum broker_status { STATUS_UP = 0, STATUS_READONLY, STATUS_QUIESCENT };

#define OP_MAX_GET_KEYS 10000   /* most keys in one text get (op_get) */

/* What the broker asks of its owner.  Every hook is required. */
struct broker_hooks {
	/* A command wrote to the store or has replies waiting: run the
	 * commit at the end of this loop turn. */
	void (*schedule_commit)(struct broker *b);
	/* This session has replies in the current batch: hand them to
	 * session_flush() after the commit.  Called once per batch (the
	 * broker remembers it in session.flush_scheduled). */
	void (*schedule_flush)(struct session *s);
	/* Call broker_promote() (batch.h) when wall-clock millisecond due_ms begins
	 * (only ever called with an earlier time than the armed one). */
	void (*arm_promote)(struct broker *b, int64_t due_ms);
	/* Call broker_expire_opens() at deadline_ms (same rule). */
	void (*arm_open_timeout)(struct broker *b, int64_t deadline_ms);
	/* The session starts a blocking get: call op_wait_timeout() after
	 * timeout_ms unless wait_end comes first.  False when out of memory. */
	bool (*wait_start)(struct session *s, int64_t timeout_ms);
	/* The wait is over (served, timed out, cancelled): stop the timer
	 * and run the session's pipelined input soon. */
	void (*wait_end)(struct session *s);
	/* Close the session now (quit), or after its replies are written. */
	void (*close)(struct session *s);
	void (*close_after_write)(struct session *s);
	/* A client asked for a shutdown (--enable-shutdown). */
	void (*stop)(struct broker *b);
	/* A login for user[0..ulen) is complete: may its password be
	 * checked now?  False while the peer or the user name owes a delay
	 * for earlier failures: the protocol leaves the login in the input
	 * and stops, and the session runs it again when the delay is over
	 * (NULL: always now).  Checking first and delaying only refusals
	 * made a fast answer tell a good password (issue 35). */
	bool (*login_admit)(struct session *s, const char *user, size_t ulen);
	/* A login admitted by login_admit failed (`how`: "text" or "SASL"):
	 * count and log it with the peer, and have `answer` send the
	 * refusal; enough failures close the session after the answer. */
	void (*login_failed)(struct session *s, const char *how,
	    void (*answer)(struct session *s));
	/* A login succeeded (s->authed is set by the caller). */
	void (*login_ok)(struct session *s);
	/* The peer's address and port as text (log lines, the console). */
	const char *(*peer)(struct session *s);
	/* The records the session's protocol keeps of the batch's replies
	 * (reply.h): the reply being built is kept (enum reply_keep), and
	 * the replies were cut back to `len` bytes of pend. */
	void (*reply_keep)(struct session *s, unsigned keep);
	void (*reply_cut)(struct session *s, size_t len);
};

struct broker {
	const struct broker_hooks *hooks;
	saker_store *store;
	struct hashmap *queues;       /* name -> struct squeue */
	struct config *config;        /* --config */
	uint64_t config_gen;          /* bumped on every (re)load */
	enum broker_status status;
	struct stats stats;

	/* limits from the command line */
	size_t max_item_size;         /* --max-item-size */
	saker_sync_mode sync;         /* --sync (for `stats`) */
	bool enable_shutdown;         /* --enable-shutdown */
	bool closing;                 /* shutting down: the items its sessions
	                               * give back are no job's failure, so
	                               * no retry_backoff (retry.h) */
	size_t max_queues;            /* --max-queues; 0: no limit */
	size_t nqueues;               /* queues the store has */

	uint64_t batch;               /* current batch number */
	uint64_t flush_batch;         /* the batch the commit is flushing */
	bool dirty;                   /* store written since last commit */
	uint64_t touches;             /* broker_touch() calls: which session
	                               * wrote (session.wrote) */
	bool batch_put;               /* and a client's item put in it */
	/* The asynchronous commit (batch.h): a batch in flight, its number,
	 * whether it held a put, when its commit began */
	bool async_commit;            /* allowed (sakerd's --commit) */
	bool inflight;
	uint64_t flight_batch;
	bool flight_put;
	uint64_t flight_t0;
	uint64_t flight_commits;      /* store commits before it (store_failed) */
	struct squeue_list ready;     /* queues that gained items: serve waiters */
	struct squeue *graveyard;     /* deleted queues, freed after the commit */
	struct squeue *stubs;         /* in-memory-only queues gets named */
	struct squeue *missing;       /* queue_for_read(): no such queue */
	bool store_unattached;        /* the store notified items of a queue
	                               * it made, with no entry (queues.c) */
	struct session_list sessions; /* every open session */

	bool store_failed;            /* last commit failed: /healthz says so */
	char store_error[256];        /* why, as clients may see it (redacted) */
	/* When the store last refused a write: a commit that only deleted
	 * (a get) clears store_failed on a full disk that still refuses
	 * every set, so /healthz also looks at this (issue 45) until a
	 * commit holding a put succeeds (0 then: sets work again). */
	int64_t store_failed_ms;
	/* The store's location (the spec after its ':'): a file path or a
	 * conninfo, for the log only.  broker_redact() takes it out of what
	 * clients see (issue 35: SERVER_ERROR replies named the SQLite
	 * file); NULL or "" when there is none. */
	const char *store_location;
	bool promote_failing;         /* promote() failed last time: retrying */
	/* Frees what the owner hung on a queue (squeue.ext: sakerd's console
	 * keeps rates and depth samples there); required once one is set. */
	void (*queue_ext_free)(void *ext);
	/* --auth-file's users (auth.h), the broker's to free; NULL without
	 * one: every session starts logged in */
	struct auth *auth;
	/* The protocol layer's scratch for this broker's commands (src/proto:
	 * parsed command lines), the carrier's; opaque here */
	struct proto_scratch *proto;
	uint64_t rng;                 /* retry_random()'s state; 0: unseeded */
	/* ops.c's scratch, here rather than in file statics or 80 KB of
	 * stack: one command runs at a time per broker */
	struct {
		uint64_t hits[(OP_MAX_GET_KEYS + 63) / 64]; /* a get's keys that hit */
		struct squeue *qs[OP_MAX_GET_KEYS];         /* ... and their queues */
		char error[512];        /* op_store_error()'s message */
	} scratch;
};

/* Set up an empty broker (no store yet). */
void broker_init(struct broker *b, const struct broker_hooks *hooks);

/* Mark the store dirty and make sure the commit runs this loop turn. */
static inline void
broker_touch(struct broker *b)
{
	b->touches++;
	b->dirty = true;
	b->hooks->schedule_commit(b);
}

/* Record that the store refuses writes (for /healthz; redacted). */
void broker_store_failed(struct broker *b, const char *reason);
/* `why` (a driver's message) as a client may see it: every occurrence of
 * the store's location replaced by "(store)"; in buf, returned. */
const char *broker_redact(const struct broker *b, const char *why, char *buf,
    size_t len);

/* Is the store's database server out of reach right now (a store on a
 * server that is reconnecting: store_stats' connected)?  Cheap then. */
bool broker_store_down(struct broker *b);

/* Load (or reload) the per-queue configuration: 0, or -1 after logging. */
int broker_load_config(struct broker *b, const char *path, unsigned max_open);

#endif
