/*
 * saker/store.h -- the queue-store interface.
 *
 * Everything the network core knows about storage is in this header.  A
 * storage driver is a `const struct saker_store_driver` with designated
 * initialisers: one file in backends/, one line in the registry
 * (backends/registry.c) and one --with-NAME switch in configure.ac
 * (docs/drivers.md walks through writing one).  Drivers, the registry and
 * the helpers they share (backends/kit.h) are compiled into saker itself;
 * no library is installed.
 *
 * THE MODEL
 *   A store holds named queues.  Each queue has
 *     - a ready FIFO        items visible to take/peek, oldest first;
 *     - a delayed set       items with a due time in the future, ordered by
 *                           (due time, arrival); invisible until promoted;
 *     - open items          items handed out by a tentative take, held until
 *                           confirmed (deleted) or released (back to the head,
 *                           or into the delayed set with a due time).
 *   Every item carries 32-bit client flags, an absolute expiry time, the time
 *   it was put, and opaque binary data.  All times are wall-clock milliseconds
 *   since the Unix epoch (int64_t); the caller passes `now_ms` into every call
 *   that needs a clock, so drivers never read the wall clock for an item's
 *   times (expiry, due time, age) and tests control them.  Drivers do read
 *   the monotonic clock (saker_mono_ns()) for their own housekeeping: how
 *   long a commit took, the age of a long transaction before a checkpoint,
 *   a database round trip's deadline.
 *
 * THREADING
 *   A store handle is used by one thread at a time.  Drivers never touch
 *   sockets or the event loop; they report events through the callback in
 *   struct saker_store_opts.
 *
 * BATCHES AND DURABILITY
 *   Writes are grouped into batches.  A driver starts a batch implicitly at
 *   the first call after open or after the last commit(); every call until the
 *   next commit() belongs to it.  Nothing in a batch is durable until commit()
 *   returns SAKER_OK; with sync mode SAKER_SYNC_ALWAYS the batch is then on
 *   stable storage (one fsync for the whole batch: group commit).  The core
 *   acknowledges writes only after commit() succeeded.
 *   If commit() fails, the driver has rolled the whole batch back: the store
 *   (on disk and in every in-memory counter) is exactly as after the previous
 *   successful commit, and the caller must treat every call of the batch as
 *   not done.  A single call the driver refuses (no such open item, a bad
 *   argument, a memory limit, LMDB's full map) fails alone and leaves the
 *   rest of the batch intact and committable.  A failure the storage
 *   engine answers by rolling its own transaction back loses the batch
 *   instead: SQLite after some disk-full, I/O and out-of-memory errors,
 *   PostgreSQL after any statement the server refuses and after a lost
 *   connection (a failed statement aborts a PostgreSQL transaction; a
 *   savepoint around every call would cost a round trip each).  A driver
 *   that lost its batch fails that call and tells the layer
 *   (saker_store_lose_batch(), REFUSALS), which restores its counters,
 *   refuses every later call of the batch that writes and fails the
 *   commit() that ends it, the store being as after the previous
 *   successful commit; the core answers every call of that batch
 *   SERVER_ERROR, as after a failed commit.
 *   One failure is not a clean rollback: when the fsync of a commit fails,
 *   its data may already be in the file and may or may not be there after a
 *   restart; likewise when the connection to a database server breaks
 *   during COMMIT.  commit() then returns SAKER_EINDOUBT: the in-memory state
 *   is rolled back as above, a local store refuses writes from then on (a
 *   failed fsync cannot be retried safely), and the caller must treat every
 *   call of the batch as "maybe done" (an item put may reappear, an item
 *   taken may be gone: the core hands taken items out rather than lose them).
 *
 * BUFFERS
 *   Items are given to the caller through a saker_item_fn callback.  The view
 *   (struct saker_item and the bytes at item->data) is owned by the driver and
 *   valid only until the callback returns; copy what you keep.  Strings and
 *   items passed *into* a driver are copied by it if it keeps them.
 *
 * DELIVERY COUNTS (every driver)
 *   Every item carries the number of times it was handed out by a
 *   take(SAKER_TAKE_OPEN), stored with the item.  That take counts the
 *   hand-out in the same batch as the take itself (durable with it) and
 *   gives fn the item with the new count; release(), release_delayed()
 *   and a crash (open items back to the head at open()) keep the count;
 *   confirm() deletes the item.  REMOVE, PEEK and iterate() show the
 *   stored count; put() stores item->deliveries as given (load and
 *   migrate carry it).  Counts stop at SAKER_DELIVERIES_MAX.  move()
 *   hands an open item to another queue with its count.  The count a
 *   hand-out gives is the layer's (saker_store_handout()): the driver
 *   hands fn and stores what it returns.
 *
 * ERRORS
 *   Every fallible call returns a saker_err.  Driver-native codes (MDB_*,
 *   SQLITE_*) never cross this interface; the driver maps them and keeps a
 *   human-readable reason available through errmsg() until its next call.
 */
#ifndef SAKER_STORE_H
#define SAKER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes.  Negative values so "< 0 means failure" reads naturally. */
typedef enum saker_err {
	SAKER_OK = 0,
	SAKER_EEMPTY = -1,    /* take/peek: no visible item (not a failure) */
	SAKER_ENOTFOUND = -2, /* no such queue, or no such open item id */
	SAKER_EINVAL = -3,    /* bad argument (caller bug or bad spec) */
	SAKER_ENOMEM = -4,    /* out of memory, or the configured memory limit */
	SAKER_EFULL = -5,     /* storage full (disk, map, quota) */
	SAKER_EIO = -6,       /* I/O error reading or writing storage */
	SAKER_ECORRUPT = -7,  /* storage is damaged or not a saker store */
	SAKER_EVERSION = -8,  /* on-disk format newer than this build */
	SAKER_ELOCKED = -9,   /* another process has the store open */
	SAKER_EREADONLY = -10, /* store refuses writes (e.g. after a failed fsync) */
	SAKER_EINDOUBT = -11, /* commit(): the outcome is unknown (see top) */
	SAKER_EEXIST = -12    /* dedup_put(): the id is already recorded */
} saker_err;

/* A fixed, short description of a code ("storage full", ...). Never NULL. */
const char *saker_strerror(int err);

/* Durability of commit(). */
typedef enum saker_sync_mode {
	SAKER_SYNC_ALWAYS = 0,   /* commit() returns after fsync */
	SAKER_SYNC_PERIODIC = 1, /* commit() writes; sync() fsyncs, called on a timer */
	SAKER_SYNC_NEVER = 2     /* never fsync; the OS writes back when it likes */
} saker_sync_mode;

/* Where an item is, as reported by iterate(). */
typedef enum saker_item_state {
	SAKER_ITEM_READY = 0,
	SAKER_ITEM_DELAYED = 1,
	SAKER_ITEM_OPEN = 2,
	SAKER_ITEM_NONE = 3     /* not in the queue: saker_store_account() */
} saker_item_state;

/* One item.  As input to put(): id and state are ignored.  As output: a
 * driver-owned view, valid only inside the callback it is passed to. */
struct saker_item {
	uint64_t id;             /* unique within its queue while the item exists;
	                          * the handle for confirm()/release() */
	uint32_t flags;          /* client flags, stored and returned unchanged */
	int64_t expires_ms;      /* absolute expiry; 0 = never expires */
	int64_t due_ms;          /* absolute time it becomes visible; 0 or <= now
	                          * at put() time = ready at once */
	int64_t created_ms;      /* when it was put (age, max_age); put() stores
	                          * this value, 0 meaning now_ms */
	uint32_t deliveries;     /* times handed out by take(OPEN): see
	                          * DELIVERY COUNTS (0 for a new item) */
	saker_item_state state;  /* output of iterate() only */
	size_t len;              /* data length in bytes (may be 0) */
	const void *data;        /* binary-safe payload */
	size_t attrs_len;        /* item attributes (ITEM ATTRIBUTES, below): */
	const void *attrs;       /* opaque bytes, 0..SAKER_ATTRS_MAX, stored
	                          * with the item by every call that keeps it
	                          * (put, release, move, expiry routing, the
	                          * quarantine copy) and handed back byte-exact
	                          * by take and iterate; 0 and NULL: none */
};

/*
 * ITEM ATTRIBUTES
 *   Everything an item carries beyond data, flags, expiry, due time, age
 *   and delivery count (the deduplication id first; a priority or a trace
 *   id next) travels in one versioned record the layer and the core encode
 *   (src/util/itemattr.h): a driver stores attrs_len bytes with the item
 *   and never looks inside, so a new attribute changes no driver and no
 *   on-disk format.
 */
#define SAKER_ATTRS_MAX 1024u

/* Receives one item.  Return 0 to go on (iterate) or accept it (take);
 * non-zero stops an iteration (and is returned by iterate()). */
typedef int (*saker_item_fn)(void *arg, const struct saker_item *item);

/* Receives one deduplication record: key (len bytes, not NUL-terminated)
 * and its expiry.  Non-zero stops the iteration. */
typedef int (*saker_dedup_fn)(void *arg, const void *key, size_t len,
    int64_t expires_ms);

/* Receives one queue name (not NUL-terminated). Non-zero stops the listing. */
typedef int (*saker_queue_name_fn)(void *arg, const char *name, size_t len);

/* Per-queue counters, as filled by queue_stats(). */
struct saker_queue_stats {
	uint64_t items;         /* ready items (expired ones not yet swept count) */
	uint64_t bytes;         /* data bytes of ready items */
	uint64_t delayed_items; /* items in the delayed set */
	uint64_t open_items;    /* items handed out and not yet confirmed/released */
	uint64_t total_items;   /* items ever put into this queue */
	uint64_t expired_items; /* items dropped because they expired */
	int64_t head_created_ms;/* created_ms of the head ready item; 0 if none */
	/* filled by the layer (saker_store_queue_stats), not the driver: */
	uint64_t expired_to;    /* items that expired and went to the queue's
	                         * expire_to queue, since open() (not stored;
	                         * counted by saker_store_expired()) */
	uint64_t dedup_ids;     /* deduplication ids recorded (live or not
	                         * yet swept) */
	uint64_t dedup_hits;    /* sets answered as duplicates since open */
};

/* Store-wide counters; a driver fills what it has and leaves the rest 0. */
struct saker_store_stats {
	uint64_t commits;       /* successful commit() calls that wrote something */
	uint64_t fsyncs;        /* fsync/fdatasync calls made */
	uint64_t commit_ns;     /* total nanoseconds spent in commit() */
	uint64_t disk_bytes;    /* bytes the store occupies on disk, if known */
	uint64_t checkpoints;   /* checkpoints done: the driver's own files
	                         * (LMDB's data.mdb, SQLite's database from
	                         * its WAL) brought up to date */
	uint64_t checkpoint_ns; /* total nanoseconds they took (they run in
	                         * commit(), so this is part of commit_ns) */
	/* A store on a database server (postgres) fills these: */
	bool server;            /* the four below mean something */
	bool connected;         /* statements can go out now; false while
	                         * the driver reconnects (writes fail) */
	uint64_t reconnects;    /* connections made again after a loss */
	uint64_t in_doubt;      /* commits that returned SAKER_EINDOUBT */
	int64_t last_commit_ms; /* wall clock of the last commit that wrote;
	                         * 0: none since open() */
	char down_why[160];     /* while !connected: why, one line */
	/* While server: what VACUUM of the store's tables waits behind,
	 * read by the driver about once a second (-1: not known) */
	int64_t horizon_age_ms; /* the oldest transaction or prepared
	                         * transaction of the database holding a
	                         * snapshot, by its start; 0: none */
	int64_t horizon_xids;   /* the oldest xmin anyone holds (sessions,
	                         * replication slots, standbys' feedback,
	                         * prepared transactions), in transactions */
	int64_t dead_rows;      /* dead row versions of the items table */
	/* While server and segments > 0: the items table's segments,
	 * emptied in turn by TRUNCATE (postgres format 7) */
	int segments;
	int64_t segment;        /* the one taking puts (-1: not known) */
	int64_t segment_truncations; /* by every broker, since created */
	uint64_t segment_moved; /* items this broker moved forward */
};

/* A queue handle; opaque to the core.  Valid from queue_open() until
 * queue_delete() of that queue or close() of the store. */
typedef struct saker_queue saker_queue;

/* The layer's part of a queue handle: a driver's struct saker_queue
 * begins with it (zeroed when the handle is made), as its store begins
 * with struct saker_store.  Only the layer reads or writes it. */
/* the counters in struct saker_queue_base's n[] */
enum {
	SAKER_N_ITEMS,          /* ready items */
	SAKER_N_BYTES,          /* their data bytes */
	SAKER_N_DELAYED,        /* delayed items */
	SAKER_N_OPEN,           /* open items */
	SAKER_N_IDS             /* deduplication ids recorded */
};

struct saker_queue_base {
	size_t xtolen;          /* expire_to: where expired items go */
	char xto[256];          /* (xtolen 0: dropped) */
	/* the queue's counters (THE LAYER, COUNTERS), by SAKER_N_*; then
	 * their value at the batch's first change, restored when the batch
	 * is lost.  A driver reads them with saker_queue_counted() and
	 * never writes them. */
	uint64_t n[5], snap[5];
	bool ids_known;         /* n[4] counted (dedup_count) since open */
	uint64_t dedup_hits;    /* duplicates answered since open */
	uint64_t expired_to;    /* items routed by saker_store_expired()
	                         * since open (a lost batch does not take
	                         * them back: nor did the drivers' counts) */
	struct saker_queue_base *touched_next; /* the batch's changed queues */
	bool touched;
	bool gone;              /* deleted in this batch, snap its counters
	                         * before: saker_store_queue_restored() */
	/* the same for the batch in flight (ASYNCHRONOUS COMMIT): its
	 * counters before it, restored when it fails */
	uint64_t fsnap[5];
	struct saker_queue_base *flight_next;
	bool in_flight;
	unsigned synced;        /* shared stores: the tick of the last count */
	/* wake-ups (the notify contract, below): q is on the store's list of
	 * queues to wake at the end of the layer call, with the queue_ctx
	 * its driver gave */
	bool woken;
	struct saker_queue_base *wake_next;
	void *wake_ctx;
};

/* q's four counters as the layer has them now, read in place: for a
 * driver that stores them (its record) or tests them on a hot path (a
 * take's "is there anything"); not for a shared store's, which the layer
 * recounts (saker_store_queue_counts()). */
static inline struct saker_queue_stats
saker_queue_counted(const saker_queue *q)
{
	const uint64_t *n = ((const struct saker_queue_base *)
	    (const void *)q)->n;

	return (struct saker_queue_stats){ .items = n[SAKER_N_ITEMS],
	    .bytes = n[SAKER_N_BYTES], .delayed_items = n[SAKER_N_DELAYED],
	    .open_items = n[SAKER_N_OPEN] };
}

/*
 * The "queue gained visible items" notification.  The core's callback
 * (opts->notify) is called synchronously from inside a layer call
 * (saker_store_put(), _take(), _release(), _promote(), _fd_ready(),
 * _tick() and every other one that can make items visible), at its end,
 * after the driver's state is updated, at most once per queue per call.
 * `queue_ctx` is the pointer given to queue_open().  The callback must not
 * call back into the store; the core records the queue and serves its
 * waiters after the store call returns.
 *
 * A driver calls the notify it got in its opts freely: once for every item
 * it makes ready, in any order, inside any hook.  That is the layer's
 * (saker_store_open() puts its own callback there): it marks the queue,
 * and the outermost layer call hands each marked queue to the core once
 * when it returns, so a driver keeps no list of its own.  Notifications
 * made inside open() reach nobody (the core has no queue contexts yet; it
 * serves every queue after the open).
 */
typedef void (*saker_notify_fn)(void *notify_arg, saker_queue *q, void *queue_ctx);

/*
 * DRIVER OPTIONS
 *   Settings of one driver travel in one channel: the spec
 *   "TYPE[,KEY=VALUE...][:LOCATION]" ("lmdb,checkpoint-bytes=1m:/var/lib/saker",
 *   "memory,max-memory=64m"), plus "KEY=VALUE" strings a caller adds in
 *   opts->driver_opts (sakerd's --max-memory, for one).  A driver lists the
 *   keys it takes in its `options` table; saker_store_open() checks every key
 *   against that table and parses every value once, with the same error
 *   messages for every driver, before open() is called.  open() finds the
 *   value of its i-th table entry with saker_store_optval(opts, i): NULL when
 *   not given.  Values are valid during open() only; copy what you keep.
 */
typedef enum {
	SAKER_OPT_SIZE,    /* bytes, "64k", "1m", "2g" (powers of 1024): .u */
	SAKER_OPT_UINT,    /* a decimal integer: .u */
	SAKER_OPT_SECONDS, /* a duration ("30", "0.5", "250ms", "1.5s", "2m"; a
	                    * bare number is seconds): .u, in milliseconds */
	SAKER_OPT_STRING   /* any text without ',' or ':': .s */
} saker_opt_type;

struct saker_store_option {
	const char *name;        /* "checkpoint-bytes"; NULL ends the table */
	saker_opt_type type;
	uint64_t min, max;       /* bounds of .u (milliseconds for SECONDS);
	                          * ignored for STRING */
	const char *help;        /* one line, for --help and error messages */
};

struct saker_store_optval {
	bool given;
	uint64_t u;
	const char *s;           /* STRING: the text (NUL-terminated) */
};

/* Options passed to open(). Zero-initialise, then set what you need. */
struct saker_store_opts {
	saker_sync_mode sync;
	/* Extra "KEY=VALUE" driver options, NULL-terminated (may be NULL);
	 * checked and parsed like those in the spec, which win on a repeat. */
	const char *const *driver_opts;
	/* Filled by saker_store_open() for open(): saker_store_optval() */
	const struct saker_store_optval *optvals;
	bool read_only;          /* open for reading only (dump, migrate source) */
	uint64_t max_item;       /* the largest item the caller will put (its
	                          * --max-item-size); 0 = not said.  A driver
	                          * that cannot hold an item that large fails
	                          * open() with SAKER_EINVAL and the limit, so
	                          * no put fails later for its size alone */
	bool create;             /* create the store if it does not exist */
	saker_notify_fn notify;  /* may be NULL */
	void *notify_arg;
	/* Filled by saker_store_open() for open(): the lock it holds on the
	 * location (see `lock` in the driver); NULL when not locked by it.
	 * Only for saker_store_relock(). */
	struct saker_store_lock *lock;
};

/* The base of every driver's handle: drivers embed it as their first
 * member (zeroed: calloc it). */
typedef struct saker_store {
	const struct saker_store_driver *driver;
	struct saker_store_lock *lock; /* the layer's, from open to close */
	struct saker_queue_base *touched; /* queues whose counters the
	                          * current batch changed (layer.c) */
	struct saker_queue_base *flight; /* ... and the batch in flight */
	bool inflight;          /* a commit_start() not yet finished */
	unsigned tick;          /* tick() calls (layer.c): shared stores
	                          * count a queue again once per tick */
	/* wake-ups (the notify contract): the core's callback and argument,
	 * the queues the driver notified during the current layer call
	 * (woken..woken_tail, each once), how deep layer calls are nested
	 * (the layer's own put inside a driver's take), and the argument
	 * the driver got with the layer's callback (holds this store) */
	saker_notify_fn notify;
	void *notify_arg;
	struct saker_queue_base *woken, *woken_tail;
	unsigned depth;
	struct saker_store **wake_cell;
	/* write refusals (THE LAYER, refusals): while the store refuses
	 * writes, the one message every writing call gets (NULL: it takes
	 * them); the message of the layer's refusal that ended the last
	 * layer call, which errmsg() gives (NULL: the driver's) */
	char *refusal;
	const char *lerr;
	char lbuf[96];          /* a message the layer words (lerr) */
	/* the refusal states (REFUSALS): "TYPE LOCATION" for their
	 * messages; the code `refusal` is answered with; whether reads are
	 * refused too (the store is stale); the code of a batch the driver
	 * lost (0: none) and its message */
	char *where;
	int refuse_rc;
	bool refuse_reads;
	int lost;
	char rbuf[768];
	char lostbuf[768];
	char lostwhy[384];	/* REASON of a lost batch */
} saker_store;

/*
 * How the layer locks a driver's location (`lock` of the driver): before
 * open() and until close(), exclusive for a writer (which leaves its pid
 * in the file), shared for a read-only open, never waiting.  When it is
 * held the open fails with SAKER_ELOCKED, "store LOCATION is in use by
 * another process (pid N)".  A read-only open where there is no lock file
 * (nobody ever wrote there) or that may not write takes none.
 */
typedef enum saker_lock_kind {
	SAKER_LOCK_NONE = 0,  /* no lock (memory; shared stores) */
	SAKER_LOCK_IN_DIR,    /* LOCATION is a directory: LOCATION/saker.lock;
	                       * the layer creates the directory (0700) when
	                       * opts->create and not read_only */
	SAKER_LOCK_BESIDE     /* LOCATION is a file: LOCATION.lock */
} saker_lock_kind;

/*
 * Capabilities, the `caps` bit field of a driver: what the core may assume
 * beyond the contract above.
 *
 * SAKER_CAP_SHARED  Several processes (brokers) may open the same store at
 *                   once.  Items put by another process are not announced
 *                   through notify(), or not reliably, so the core retries
 *                   every blocked client and promote() about once a second.
 *                   open() of a shared store never returns SAKER_ELOCKED.
 */
#define SAKER_CAP_SHARED (1u << 0)
/* (1u << 1) was SAKER_CAP_DELIVERIES, which every driver had: delivery
 * counts and move() are part of every driver's contract now. */

/* Delivery counts stop here (they fit 16 bits on every driver). */
#define SAKER_DELIVERIES_MAX 65535u

/* What the LOCATION of a spec is, the `location` of a driver: the tools
 * and the daemon ask this, never the driver's name. */
typedef enum saker_location_kind {
	SAKER_LOCATION_NONE = 0, /* takes no location (memory) */
	SAKER_LOCATION_DIR,      /* a directory: migrate builds a new one
	                          * beside it and renames it into place */
	SAKER_LOCATION_FILE,     /* a file (its sidecars beside it): the same */
	SAKER_LOCATION_SECRET    /* a connection string, written in place; it
	                          * may hold a password, so logs show the
	                          * TYPE alone, never the location */
} saker_location_kind;

struct saker_store_driver {
	const char *name;        /* "memory", "lmdb", ... the TYPE of a spec */
	const char *location_help; /* "DIR", "FILE", or NULL if no location:
	                          * for messages only; see `location` */
	saker_location_kind location;
	/* sakerd's default store: the first driver of the registry with a
	 * default location, at that location (LMDB's "./saker-data"); the
	 * first driver (memory) when none has one.  NULL: none. */
	const char *default_location;
	bool durable;            /* survives a restart (migrate source/target) */
	unsigned caps;           /* SAKER_CAP_* bits */
	const struct saker_store_option *options; /* the keys it takes (see
	                          * DRIVER OPTIONS); NULL = none */
	saker_lock_kind lock;    /* how the layer locks the location */

	/* Open (creating per opts->create) the store at `location` (NULL when
	 * the spec had none).  On failure returns an error, sets *out = NULL and
	 * writes a one-line reason into err[errlen]. Stores left by a crash are
	 * recovered here: open items go back to the heads of their queues. */
	int (*open)(const char *location, const struct saker_store_opts *opts,
	    saker_store **out, char *err, size_t errlen);

	/* Commit any pending batch and release everything.  NULL-safe. */
	void (*close)(saker_store *s);

	/* Reason for the last failure, for logs and SERVER_ERROR lines. */
	const char *(*errmsg)(saker_store *s);

	/* --- queues ------------------------------------------------------- */

	/* Find queue `name`, creating it (empty) when `create` and it does not
	 * exist; SAKER_ENOTFOUND otherwise.  `queue_ctx` is stored (replacing
	 * any previous value; NULL keeps the one it has: the layer opens
	 * queues without one) and passed back in notifications.  Idempotent:
	 * opening an open queue returns the same handle. */
	int (*queue_open)(saker_store *s, const char *name, size_t len, bool create,
	    void *queue_ctx, saker_queue **out);

	/* Delete the queue with all its items (ready, delayed and open).
	 * The handle is invalid afterwards. */
	int (*queue_delete)(saker_store *s, saker_queue *q);

	/* Remove every item of the queue (ready, delayed, open); keep the
	 * queue and its total_items/expired_items counters. */
	int (*queue_flush)(saker_store *s, saker_queue *q);

	/* List every queue, in no particular order. */
	int (*queues)(saker_store *s, saker_queue_name_fn fn, void *arg);

	/* total_items, expired_items and head_created_ms (the layer fills
	 * the rest); cheap (no scan of the queue). */
	int (*queue_stats)(saker_store *s, saker_queue *q, struct saker_queue_stats *st);

	/* SAKER_CAP_SHARED: items, bytes, delayed_items
	 * and open_items of q counted in the store (may scan the queue:
	 * the layer asks at most once per tick() per queue, for a queue
	 * whose stats are read), so changes other processes made show. */
	int (*queue_count)(saker_store *s, saker_queue *q,
	    struct saker_queue_stats *st);

	/* --- items -------------------------------------------------------- */

	/* Append a copy of `item` to the queue: to the ready tail when
	 * item->due_ms <= now_ms, else into the delayed set.  Notifies when
	 * the item is ready at once.  item->deliveries is at most
	 * SAKER_DELIVERIES_MAX (callers put through saker_store_put(), which
	 * clamps it). */
	int (*put)(saker_store *s, saker_queue *q, const struct saker_item *item,
	    int64_t now_ms);

	/* Hand the oldest ready, unexpired item to fn.  Expired items met at
	 * the head go to saker_store_expired() and are removed.  `mode` says what happens to it:
	 *   SAKER_TAKE_REMOVE  it leaves the queue;
	 *   SAKER_TAKE_OPEN    it becomes an open item (id valid for confirm);
	 *   SAKER_TAKE_PEEK    it stays at the head.
	 * Returns SAKER_EEMPTY (fn not called) when nothing is visible.
	 * A durable driver verifies the item's checksum first: an item that
	 * fails it is never handed to fn; the driver has the layer copy it
	 * to the quarantine queue (saker_store_quarantine()), removes it in
	 * the same batch and returns SAKER_ECORRUPT with the layer's
	 * message as errmsg().  The caller commits as after any write; the
	 * next take sees the next item. */
	int (*take)(saker_store *s, saker_queue *q, int mode, int64_t now_ms,
	    saker_item_fn fn, void *arg);

	/* Delete open item `id` for good. SAKER_ENOTFOUND if not open. */
	int (*confirm)(saker_store *s, saker_queue *q, uint64_t id);

	/* Put open item `id` back at the head of the ready FIFO; notifies.
	 * Releasing several items newest first restores their original order. */
	int (*release)(saker_store *s, saker_queue *q, uint64_t id);

	/* Put open item `id` of q into q's delayed set, due at `due_ms`,
	 * keeping its data, flags, expiry, age and delivery count, in the
	 * current batch: after commit() (and after a restart or crash) it is
	 * delayed as if put with that due time; after a failed commit it is
	 * still open.  Counted in delayed_items, no longer in open_items.
	 * Among delayed items with the same due time it comes after those
	 * already there, as if put now (its id may change: the old one is
	 * no handle any more).  due_ms <= now_ms is release() (back to the
	 * head, notifies).
	 * SAKER_ENOTFOUND if not open.  The retry-with-delay of an abort
	 * and the queue's retry_backoff (docs/protocol.md). */
	int (*release_delayed)(saker_store *s, saker_queue *q, uint64_t id,
	    int64_t due_ms, int64_t now_ms);

	/* Append open item `id` of q
	 * to the ready tail of queue `to` (another queue), keeping its data,
	 * flags, expiry, age and delivery count, in the current batch: after
	 * commit() it is in `to` and not in q, after a failed commit it is
	 * still open in q.  Notifies `to`.  SAKER_ENOTFOUND if not open,
	 * SAKER_EINVAL if to == q.  The dead-letter and expire-to moves. */
	int (*move)(saker_store *s, saker_queue *q, uint64_t id, saker_queue *to);

	/* Optional (NULL): where the items of q that expire go: queue
	 * `name` (len bytes), or NULL to drop them (the default).  Not
	 * stored: the caller says it again after open() and after a failed
	 * commit.  A driver sets this to the layer's
	 * saker_store_keep_expire_to and hands every item it finds expired
	 * (take at the head, promote, flush_expired) to
	 * saker_store_expired(), which drops it or appends a copy to that
	 * queue with its expiry cleared (it must not expire again at once)
	 * and its data, flags, age, delivery count and attributes kept, in
	 * the current batch; the driver removes the original and counts it
	 * in q's expired_to or expired_items.  Every one moves, however many
	 * expired together, in FIFO order, in the call that met it.  The
	 * target is woken once per call (the layer's wake-ups).  A name
	 * equal to q's own drops them. */
	int (*expire_to)(saker_store *s, saker_queue *q, const char *name,
	    size_t len);

	/* Move every delayed item with due_ms <= now_ms, in (due, arrival)
	 * order, to the tail of its queue's ready FIFO, notifying the queue.
	 * Items that expired meanwhile go to saker_store_expired().
	 * Sets *next_due_ms to the earliest due time still pending in the whole
	 * store, or 0 when none.  Cheap when nothing is due. */
	int (*promote)(saker_store *s, int64_t now_ms, int64_t *next_due_ms);

	/* Remove expired ready items of the queue; count in *removed.
	 * `limit` bounds the work: at most that many ready items are looked
	 * at, from the head (0 = all of them).  The core's background sweep
	 * relies on it to keep a loop turn short on huge queues. */
	int (*flush_expired)(saker_store *s, saker_queue *q, int64_t now_ms,
	    uint64_t limit, uint64_t *removed);

	/* Call fn for every item of the queue with its full state: open items
	 * (oldest first), then ready items in FIFO order, then delayed items in
	 * (due, arrival) order.  Loading the same sequence into an empty queue
	 * with put() reproduces a restart of this queue.  Stops when fn returns
	 * non-zero and returns that value. */
	int (*iterate)(saker_store *s, saker_queue *q, saker_item_fn fn, void *arg);

	/* --- deduplication ids (DEDUPLICATION, below) ---------------------- */

	/* Record id `key` (1..SAKER_DEDUP_KEY_MAX bytes) of q, live until
	 * expires_ms, in the current batch: durable with the batch's other
	 * writes, gone with them when it is lost.  SAKER_EEXIST (nothing
	 * changed) when a record of key on q has expires_ms > now_ms; a
	 * record that has expired is replaced, and *replaced says so (the
	 * number of records did not grow).  On a shared store the record
	 * is the database's, seen by every broker: of two batches recording
	 * one key at once, one commits it and the other gets SAKER_EEXIST. */
	int (*dedup_put)(saker_store *s, saker_queue *q, const void *key,
	    size_t len, int64_t expires_ms, int64_t now_ms, bool *replaced);

	/* Remove the record of key on q in the current batch (the put it was
	 * made for failed alone).  SAKER_ENOTFOUND when there is none. */
	int (*dedup_del)(saker_store *s, saker_queue *q, const void *key,
	    size_t len);

	/* Remove records of q with expires_ms <= now_ms, oldest expiry first,
	 * at most `limit` of them (0 = all); count them in *removed.  Cheap
	 * when none has expired (records kept in expiry order or indexed by
	 * it): the layer sweeps before refusing an id at the limit. */
	int (*dedup_sweep)(saker_store *s, saker_queue *q, int64_t now_ms,
	    uint64_t limit, uint64_t *removed);

	/* Call fn for every record of q (expired ones not yet swept too), in
	 * no particular order; stops when fn returns non-zero and returns
	 * that value.  Dump, migrate and the layer's count at first use. */
	int (*dedup_iterate)(saker_store *s, saker_queue *q,
	    saker_dedup_fn fn, void *arg);

	/* Optional (NULL: the layer counts through dedup_iterate): *n = the
	 * number of records of q (expired ones not yet swept too), cheaply:
	 * O(1), or one count query on a database, never the records over
	 * the wire.  The layer asks it once, at a queue's first use of ids
	 * since open (saker_store_dedup_count). */
	int (*dedup_count)(saker_store *s, saker_queue *q, uint64_t *n);

	/* --- batches ------------------------------------------------------ */

	/* Make the current batch durable per the sync mode (see top).  Cheap
	 * and SAKER_OK when nothing is pending. */
	int (*commit)(saker_store *s);

	/* Optional (NULL: nothing to sync): SAKER_SYNC_PERIODIC: flush
	 * committed batches to stable storage; called on a timer. */
	int (*sync)(saker_store *s);

	/*
	 * Optional (NULL: commit() only), all three or none: the
	 * asynchronous commit (ASYNCHRONOUS COMMIT, below).  commit_start()
	 * ends the current batch as commit() does but may return before it
	 * is durable: *started true, SAKER_OK, the batch in flight; or
	 * *started false and the result of a synchronous commit() (a driver
	 * commits synchronously whenever it must: nothing written, a sync
	 * mode other than SAKER_SYNC_ALWAYS, a checkpoint due).  Called with
	 * no batch in flight.  commit_fd() is a descriptor that becomes
	 * readable when the batch in flight has its result (it stays
	 * readable until commit_finish()), -1 when none is in flight.
	 * commit_finish() returns that result, waiting for it if need be:
	 * SAKER_OK (the batch is durable), or an error after which the batch
	 * in flight and the current batch gathered on top of it are both
	 * rolled back.  close() with a batch in flight waits for its result.
	 */
	int (*commit_start)(saker_store *s, bool *started);
	int (*commit_fd)(saker_store *s);
	int (*commit_finish)(saker_store *s);

	/* Optional (NULL): store-wide counters.  The caller zeroes *st. */
	void (*store_stats)(saker_store *s, struct saker_store_stats *st);

	/* Optional (NULL): a file descriptor the core should watch for
	 * readability (e.g. a database notification socket), or -1 when there
	 * is none right now.  When it is readable the core calls fd_ready(),
	 * which may notify queues.  The core asks watch_fd() again after every
	 * fd_ready() and tick() call and re-registers when the descriptor
	 * changed (a driver that reconnects gets a new socket). */
	int (*watch_fd)(saker_store *s);
	int (*fd_ready)(saker_store *s, int64_t now_ms);

	/* Optional (NULL): called by the core about once a second, for
	 * housekeeping a driver cannot drive itself (reconnecting with backoff,
	 * returning expired leases).  May notify queues.  Having tick() says
	 * nothing about sharing: that is SAKER_CAP_SHARED. */
	int (*tick)(saker_store *s, int64_t now_ms);
};

/* take() modes */
#define SAKER_TAKE_REMOVE 0
#define SAKER_TAKE_OPEN 1
#define SAKER_TAKE_PEEK 2

/* ---------------------------------------------------------------------
 * The registry and thin wrappers (backends/registry.c).  The core and the
 * tools call the wrappers below for every optional member, so a NULL hook
 * is checked in one place; required members are called through the
 * vtable.
 * --------------------------------------------------------------------- */

/* Compiled-in drivers, NULL-terminated. */
extern const struct saker_store_driver *const saker_store_drivers[];

/* The driver called `name` (length len), or NULL. */
const struct saker_store_driver *saker_store_driver_find(const char *name, size_t len);

/* sakerd's default --store ("lmdb:./saker-data", or "memory"): see
 * `default_location` of the driver. */
const char *saker_store_default_spec(void);

/* The driver a spec "TYPE[,...][:LOCATION]" names, or NULL. */
const struct saker_store_driver *saker_store_spec_driver(const char *spec);

/* Does the driver take option `key` (its `options` table)? */
bool saker_store_driver_takes(const struct saker_store_driver *drv,
    const char *key);

/* "memory, lmdb, sqlite" -- the compiled-in types, for error messages. */
const char *saker_store_driver_list(void);

/* The message for a type spec[0..tlen) no compiled-in driver has: a known
 * driver this build left out is named as such with the package that brings
 * its library ("not compiled in: ..."), anything else is listed as unknown
 * with the compiled-in types.  saker_store_open() gives it; so do the tools
 * that check a spec before opening it. */
void saker_store_type_error(const char *spec, size_t tlen, char *err,
    size_t errlen);

/* Open a store from a spec "TYPE[,KEY=VALUE...][:LOCATION]", split at the
 * first ':'.  Unknown types, unknown option keys and bad option values give
 * SAKER_EINVAL and a one-line message (listing the compiled-in types, or
 * the keys the driver takes). */
int saker_store_open(const char *spec, const struct saker_store_opts *opts,
    saker_store **out, char *err, size_t errlen);

/* close(), then the layer drops the store's lock.  NULL-safe. */
void saker_store_close(saker_store *s);

/* In open(): a read-only open that must first recover as a writer (a
 * journal to replay) turns the layer's shared lock into the exclusive one
 * (exclusive = true), opens, recovers and closes the store for writing,
 * then turns it back (false).  SAKER_ELOCKED and a message in err while
 * another process holds it.  SAKER_OK when opts->lock is NULL. */
int saker_store_relock(const struct saker_store_opts *opts, bool exclusive,
    char *err, size_t errlen);

/* In open(): row `i` of the driver's options table (DRIVER OPTIONS). */
static inline const struct saker_store_optval *
saker_store_optval(const struct saker_store_opts *opts, size_t i)
{
	return opts->optvals != NULL && opts->optvals[i].given ?
	    &opts->optvals[i] : NULL;
}

/* Optional hooks, checked: a missing one does nothing and succeeds. */
int saker_store_sync(saker_store *s);                 /* SAKER_OK if NULL */
void saker_store_get_stats(saker_store *s, struct saker_store_stats *st);
                                                      /* zeroes *st first */
int saker_store_watch_fd(saker_store *s);             /* -1 if NULL */
int saker_store_fd_ready(saker_store *s, int64_t now_ms); /* SAKER_OK if NULL */
int saker_store_tick(saker_store *s, int64_t now_ms); /* SAKER_OK if NULL */

/* Does the store need the core's once-a-second timer: tick() or
 * SAKER_CAP_SHARED? */
bool saker_store_needs_tick(const saker_store *s);

/* The records of deduplication ids q keeps: dedup_count() when the driver
 * has it, else one pass of dedup_iterate() (SAKER_EINVAL for a driver
 * without ids).  The layer's count at a queue's first use of ids. */
int saker_store_dedup_count(saker_store *s, saker_queue *q, uint64_t *n);

/* Is the store shared with other processes (SAKER_CAP_SHARED)? */
bool saker_store_shared(const saker_store *s);

/* ---------------------------------------------------------------------
 * THE CORE'S CALLS (backends/layer.c).  The core and the tools reach the
 * store only through these, never through the vtable: each is the hook of
 * the same name with the layer's rules around it (see THE LAYER below),
 * so a rule about storage is written once, here, for every driver.
 * --------------------------------------------------------------------- */

const char *saker_store_name(const saker_store *s);  /* the driver's TYPE */
const char *saker_store_errmsg(saker_store *s);      /* never NULL */
int saker_store_queue_open(saker_store *s, const char *name, size_t len,
    bool create, void *queue_ctx, saker_queue **out);
int saker_store_queue_delete(saker_store *s, saker_queue *q);
int saker_store_queue_flush(saker_store *s, saker_queue *q);
int saker_store_queues(saker_store *s, saker_queue_name_fn fn, void *arg);
int saker_store_queue_stats(saker_store *s, saker_queue *q,
    struct saker_queue_stats *st);
/* items, bytes, delayed_items and open_items: the capacity check's,
 * without a round trip to a database (but a shared store's recount, at
 * most once per tick) */
int saker_store_queue_counts(saker_store *s, saker_queue *q,
    struct saker_queue_stats *st);
int saker_store_take(saker_store *s, saker_queue *q, int mode, int64_t now_ms,
    saker_item_fn fn, void *arg);
int saker_store_confirm(saker_store *s, saker_queue *q, uint64_t id);
int saker_store_release(saker_store *s, saker_queue *q, uint64_t id);
int saker_store_release_delayed(saker_store *s, saker_queue *q, uint64_t id,
    int64_t due_ms, int64_t now_ms);
int saker_store_move(saker_store *s, saker_queue *q, uint64_t id,
    saker_queue *to);
/* Can the driver route expired items (has it expire_to())? */
bool saker_store_routes_expired(const saker_store *s);
/* expire_to(); without the hook: SAKER_OK for name NULL, else EINVAL */
int saker_store_expire_to(saker_store *s, saker_queue *q, const char *name,
    size_t len);
int saker_store_promote(saker_store *s, int64_t now_ms, int64_t *next_due_ms);
int saker_store_flush_expired(saker_store *s, saker_queue *q, int64_t now_ms,
    uint64_t limit, uint64_t *removed);
int saker_store_iterate(saker_store *s, saker_queue *q, saker_item_fn fn,
    void *arg);
int saker_store_commit(saker_store *s);

/*
 * ASYNCHRONOUS COMMIT.  A driver with commit_start() lets the core hand
 * it a batch and go on serving while the batch is made durable (a flush
 * thread's fdatasync): saker_store_commit_start() ends the batch; when it
 * says *started, the batch is in flight and the calls that follow gather
 * the next batch on top of it (they see its effects).  At most one batch
 * is in flight.  Its result arrives when saker_store_commit_fd() is
 * readable and is collected by saker_store_commit_finish():
 *   - SAKER_OK: the batch in flight is durable; the one gathering goes on;
 *   - an error: the batch in flight failed, and so does the batch
 *     gathered on top of it, at once: both are rolled back (the counters
 *     too), the store is as after the last successful commit (for the
 *     local stores, which fail this way only when the journal's write or
 *     fdatasync failed: refusing every call until reopened), and the
 *     caller treats every call of both batches as not done (or in doubt,
 *     SAKER_EINDOUBT: the batch in flight only); the next call starts a
 *     new batch.
 * Without commit_start() (or when the driver declines: *started false)
 * saker_store_commit_start() is saker_store_commit().
 * saker_store_commit() with a batch in flight collects its result first;
 * when that failed, it returns that failure for both batches.
 */
int saker_store_commit_start(saker_store *s, bool *started);
int saker_store_commit_fd(saker_store *s);
int saker_store_commit_finish(saker_store *s);
bool saker_store_commit_inflight(const saker_store *s);

/* ---------------------------------------------------------------------
 * THE LAYER (backends/policy.c, lock.c, layer.c): the broker's rules about
 * storage, once over every driver: the lock file (saker_lock_kind), the
 * delivery-count clamp (saker_store_put), the quarantine of damaged items,
 * what becomes of an expired item (saker_store_expired), which queues to
 * wake (the notify contract), deduplication ids and the per-queue
 * counters (COUNTERS, below).
 * Drivers keep the primitives of the vtable and call the functions below
 * where their comments say.
 * --------------------------------------------------------------------- */

/* Has an item whose expiry is expires_ms (0: never) expired at now_ms?
 * At its expiry time, not after: the one rule of every driver's take,
 * promote and flush_expired (SQL drivers say the same in their WHERE). */
static inline bool
saker_item_expired(int64_t expires_ms, int64_t now_ms)
{
	return expires_ms != 0 && expires_ms <= now_ms;
}

/* put(), with item->deliveries clamped to SAKER_DELIVERIES_MAX (a dump
 * may carry any 32-bit count).  The core and the tools put through it.
 * The layer refuses, before the driver sees it, an item that is NULL,
 * has len > 0 without data or attrs_len > 0 without attrs, or more than
 * SAKER_ATTRS_MAX attribute bytes: SAKER_EINVAL, errmsg() "bad item:
 * ...".  A driver's put() gets none of those. */

/* For a driver's take(SAKER_TAKE_OPEN) and its crash recovery (DELIVERY
 * COUNTS): the count an item whose stored count is `stored` is handed
 * out with, one more, at most SAKER_DELIVERIES_MAX.  The driver gives fn
 * the item with it and stores it with the open item in the take's batch
 * (a journal that replays the take asks again), so an item open at a
 * crash comes back with the count it was handed out with.  (Inline: a
 * take's hot path.) */
static inline uint32_t
saker_store_handout(uint32_t stored)
{
	return stored < SAKER_DELIVERIES_MAX ? stored + 1 :
	    SAKER_DELIVERIES_MAX;
}
int saker_store_put(saker_store *s, saker_queue *q,
    const struct saker_item *item, int64_t now_ms);

/*
 * Derived queues: a queue's quarantine queue "<qname>_damaged" (below) and
 * the core's dead-letter queue "<qname>_dead" (src/core/deadletter.c).
 * One rule for every suffix: qname (qlen bytes) cut so that it and the
 * suffix fit SAKER_STORE_QNAME_MAX bytes, the longest queue name (1..250
 * bytes, docs/protocol.md).  name gets it NUL-terminated; returns its
 * length.
 */
#define SAKER_STORE_QNAME_MAX 250
#define SAKER_SUFFIX_DAMAGED "_damaged"
#define SAKER_SUFFIX_DEAD "_dead"
size_t saker_store_derived_name(const char *qname, size_t qlen,
    const char *suffix, char name[SAKER_STORE_QNAME_MAX + 1]);

/*
 * For a durable driver's take(): item `id` of queue q (named qname, qlen
 * bytes) failed its checksum.  `bad` is what could be read of it (flags,
 * age, count, data), NULL when the store takes no writes (it stays); its
 * bytes may be the driver's own (a cursor's page, a statement's column):
 * the layer copies them before its first write.  A
 * copy, bytes as they are, without expiry or due time, goes to the tail
 * of the quarantine queue (through queue_open() and put(): a fresh
 * checksum, so it can be fetched for a look) in the current batch; msg
 * gets the one-line message naming both queues.  SAKER_OK: the driver
 * removes the original in the same batch; else the error (nothing was
 * copied).  Either way take() returns SAKER_ECORRUPT, errmsg() msg.
 */
int saker_store_quarantine(saker_store *s, saker_queue *q, const char *qname,
    size_t qlen, uint64_t id, const struct saker_item *bad, int64_t now_ms,
    char *msg, size_t msglen);

/* A driver's .expire_to: keeps `name` in q's struct saker_queue_base. */
int saker_store_keep_expire_to(saker_store *s, saker_queue *q,
    const char *name, size_t len);

/* Does q have an expire_to queue (cheap: no queue is opened)? */
static inline bool
saker_store_has_expire_to(const saker_queue *q)
{
	return ((const struct saker_queue_base *)(const void *)q)->xtolen > 0;
}

/* *to = q's expire_to queue (opened, created when missing, through
 * queue_open()), or NULL when its expired items are dropped.  An error
 * from queue_open() otherwise.  saker_store_expired() asks it; a driver
 * that met an expired item calls that, not this. */
int saker_store_expire_target(saker_store *s, saker_queue *q,
    saker_queue **to);

/* A driver met item `item` of q expired (take at the head, promote,
 * flush_expired) and removes it in the current batch: the layer decides
 * where it goes.  With an expire_to queue, a copy is put there (through
 * the driver's put(), in this batch) with its expiry and due time
 * cleared and its data, flags, age, delivery count and attributes kept,
 * and *routed is true: the layer counts it in q's expired_to.  Without
 * one (or when it is q), *routed is false and nothing is written, opened
 * or moved in the store (a driver may call this with a cursor open on q,
 * as LMDB's take does): the driver counts it in expired_items.  item's
 * bytes may be the driver's own: the layer copies them before the put.
 * An error (the target could not be opened or written): the driver
 * leaves the item in place. */
int saker_store_expired(saker_store *s, saker_queue *q,
    const struct saker_item *item, int64_t now_ms, bool *routed);

/*
 * COUNTERS.  The layer keeps every queue's items, bytes (of ready items),
 * delayed_items and open_items in its struct saker_queue_base, so that
 * saker_store_queue_stats() and every capacity check are O(1) on every
 * store.  Every driver tells the layer each change of an item's state,
 * a fact like notify(): put (NONE -> READY or DELAYED),
 * take (READY -> OPEN, or -> NONE: removed, or an expired item dropped
 * or routed, the target then NONE -> READY), confirm (OPEN -> NONE),
 * release (OPEN -> READY or DELAYED), move (OPEN -> NONE in q, NONE ->
 * READY in `to`), promote (DELAYED -> READY, or -> NONE when expired),
 * flush_expired (READY -> NONE).  queue_flush() and queue_delete() are
 * counted by the layer itself.  The layer remembers each queue's
 * counters at the first change of a batch and puts them back when
 * commit() fails or the driver says it lost the batch (and those of a
 * queue deleted in the batch when the driver says it brought the queue
 * back: saker_store_queue_restored()).  A driver whose format stores
 * the four hands them to the layer at open (saker_store_queue_seed()).
 */
void saker_store_account(saker_store *s, saker_queue *q,
    saker_item_state from, saker_item_state to, size_t len);
/* n items of `bytes` data bytes in all, at once (a promotion in SQL) */
void saker_store_account_n(saker_store *s, saker_queue *q,
    saker_item_state from, saker_item_state to, uint64_t n, uint64_t bytes);

/*
 * For a driver whose on-disk queue record keeps the four counters (LMDB,
 * SQLite): at open, after its recovery, it hands the layer what each
 * queue's record says (st's items, bytes, delayed_items, open_items);
 * when it writes the record it reads them back (saker_queue_counted()).  Also for putting back a queue's counters
 * as read before a single call the driver undid (a savepoint rolled
 * back): within a batch only on a queue the batch changed already, so
 * that the layer's snapshot of it stays that of the batch.
 */
void saker_store_queue_seed(saker_store *s, saker_queue *q,
    const struct saker_queue_stats *st);

/*
 * REFUSALS.  A store opened read-only (opts->read_only) takes no writes:
 * the layer refuses every call that writes -- put (and put_once,
 * dedup_load), take other than PEEK, confirm, release, release_delayed,
 * move, queue_flush, queue_delete -- with SAKER_EREADONLY
 * and errmsg() "TYPE LOCATION: store opened read-only" (no LOCATION for a
 * driver without one or whose location is a secret) before the driver
 * is called, so a driver checks no read-only flag on its entry points.
 * (Its open, promote, flush_expired, dedup_sweep, tick and commit still
 * know the mode: the core runs them on any store, and a read-only one
 * finds nothing to do or says so.)
 */

/* For a driver that hands out again the handle of a queue deleted in
 * this batch (made again by queue_open()): the layer's part of it starts
 * afresh -- counters, deduplication ids and hits, expired_to -- as in a
 * new handle.  Its expire_to target is kept (the core sets it again). */
void saker_store_queue_fresh(saker_store *s, saker_queue *q);

/* For a driver whose rollback (a failed commit, a lost batch) brought q
 * back as it was at the last commit in a way the layer did not see (a
 * delete undone): the layer counts q's deduplication ids again at their
 * next use, and a queue deleted in the batch gets back its counters. */
void saker_store_queue_restored(saker_store *s, saker_queue *q);

/* For a shared store's driver that changed q in a way it cannot tell
 * item by item (a promotion in the database, an item put back whose size
 * it does not know): the layer counts q in the store again (queue_count)
 * at the next read of its counters outside a batch that changed it. */
void saker_store_recount(saker_store *s, saker_queue *q);

/*
 * DEDUPLICATION.  A producer that retries a set (its commit's outcome was
 * unknown, its connection broke, its client resent) names the set with an
 * id; the queue keeps each id for its dedup_window, and a set with an id
 * already kept is answered as stored without a second item
 * (docs/protocol.md).  The record and the item are written in one batch,
 * both or neither; the item carries its id among its attributes.
 */
#define SAKER_DEDUP_KEY_MAX 128u

/* put() of `item` (attrs ignored: the layer writes them) with id `key`
 * (1..SAKER_DEDUP_KEY_MAX bytes) on q, remembered until now_ms +
 * window_ms.  SAKER_EEXIST when q keeps the id already: nothing was put,
 * the duplicate is counted (dedup_hits).  SAKER_EFULL when the id is
 * new and q keeps max_ids ids that have not expired (0: no limit): the
 * caller words the message. */
int saker_store_put_once(saker_store *s, saker_queue *q,
    const struct saker_item *item, const void *key, size_t len,
    int64_t window_ms, uint64_t max_ids, int64_t now_ms);

/* Does q keep id `key` (a set into a queue that refuses it, full, is
 * still answered as a duplicate when it is one)?  SAKER_EEXIST, counted
 * as a duplicate, when it does; SAKER_OK when not, nothing kept. */
int saker_store_dedup_kept(saker_store *s, saker_queue *q, const void *key,
    size_t len, int64_t window_ms, int64_t now_ms);

/* Drop the expired ids of q, at most limit (0 = all): the core's sweep. */
int saker_store_dedup_sweep(saker_store *s, saker_queue *q, int64_t now_ms,
    uint64_t limit, uint64_t *removed);

/* Every id q keeps, with its expiry (dump, migrate). */
int saker_store_dedup_iterate(saker_store *s, saker_queue *q,
    saker_dedup_fn fn, void *arg);

/* Keep id `key` on q until expires_ms as it is (load, migrate): SAKER_OK
 * also when q kept it already. */
int saker_store_dedup_load(saker_store *s, saker_queue *q, const void *key,
    size_t len, int64_t expires_ms, int64_t now_ms);

/*
 * THE REFUSAL STATES.  The layer keeps them, a driver reports the event
 * where it knows it, and every driver's refusals read the same:
 *
 * - batch lost (saker_store_lose_batch): the driver rolled its batch
 *   back under the caller.  The counters go back now; every later call
 *   of the batch that writes gets `code` and "TYPE LOCATION: this batch
 *   was rolled back (REASON); it ends at the next commit", and the
 *   commit() that ends it fails with `code` and "TYPE LOCATION: batch
 *   rolled back: REASON" without reaching the driver (a batch lost
 *   inside commit() or commit_start() ends with that call, one lost
 *   while gathering on a batch in flight that failed ends with that
 *   saker_store_commit_finish(); one lost
 *   before close() ends there, the driver's close() writing what it
 *   writes as after a commit).  REASON is the driver's (the `why` of
 *   saker_store_lose_batch_why(): the failure that lost the batch, one
 *   line, without the TYPE prefix), or the code's saker_strerror().
 * - writes refused (saker_store_refuse_writes): a write or fsync failed;
 *   until the store is reopened every call that writes gets
 *   SAKER_EREADONLY and "TYPE LOCATION: store is read-only after a
 *   failed write: WHY" (the first WHY is kept).
 * - stale (saker_store_refuse_all): what the store acknowledged is no
 *   longer readable in this process; until reopened every call, reads
 *   too, gets SAKER_EIO and "TYPE LOCATION: store failed and must be
 *   reopened: WHY".
 *
 * A driver whose mechanism differs in a state asks
 * saker_store_refusal() instead of keeping a flag of its own.
 */
void saker_store_lose_batch(saker_store *s, int code);
void saker_store_lose_batch_why(saker_store *s, int code, const char *why);
void saker_store_refuse_writes(saker_store *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void saker_store_refuse_all(saker_store *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The code the layer answers a call that writes (`write`) or only reads
 * with now, SAKER_OK when it takes it; a refusal sets errmsg(). */
int saker_store_refusal(saker_store *s, bool write);
/* Does the store refuse writes until reopened (read-only, a failed
 * write, stale)?  A lost batch is not counted: it ends at the commit. */
bool saker_store_refuses_writes(const saker_store *s);
/* Does the layer let a write through now (no refusal, no lost batch)? */
bool saker_store_takes_writes(const saker_store *s);
/* Is the store stale (reads refused too)? */
bool saker_store_is_stale(const saker_store *s);
/* Has the driver lost the batch under way (until the commit ending it)? */
bool saker_store_is_lost(const saker_store *s);

#ifdef __cplusplus
}
#endif
#endif /* SAKER_STORE_H */
