/*
 * migrate_int.h -- the types the copy engine's files share (migrate_copy.c,
 * migrate_progress.c, migrate.c, dump.c, check_cmd.c): options, the error
 * text, the digest, the name list, the source callbacks, the progress meter
 * and the copy target's state.  Types and constants only: each file's
 * functions are declared in its own header (migrate_copy.h,
 * migrate_progress.h, migrate.h, dump.h).
 */
#ifndef SAKER_MIGRATE_INT_H
#define SAKER_MIGRATE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "saker/store.h"

#define MIG_COMMIT_EVERY 10000

/* Normalised item states (also the record tags of the dump format). */
#define MIG_READY 'R'
#define MIG_DELAYED 'D'

enum mig_progress_mode {
	MIG_PROGRESS_AUTO = 0,   /* on when stderr is a terminal */
	MIG_PROGRESS_ON,         /* --progress */
	MIG_PROGRESS_OFF         /* --quiet */
};

struct mig_opts {
	bool append;             /* add after existing items of a non-empty target */
	enum mig_progress_mode progress;
	bool quiet;              /* no progress, no summary */
};

/* Error text of the last failure; filled by every fallible mig_* call. */
struct mig_err {
	char msg[1024];
};

/* FNV-1a 64: the checksum primitive of migrate and the dump format. */
#define MIG_FNV_INIT 0xcbf29ce484222325ULL

/* Per-queue digest (migrate_copy.h, CHECKSUM). */
struct mig_digest {
	uint64_t ready;
	uint64_t delayed;
	uint64_t bytes;
	uint64_t ready_chain;
	uint64_t delayed_chain;
	uint64_t delayed_sum;
	uint64_t ids;            /* deduplication ids, and the sum mod 2^64 */
	uint64_t ids_sum;        /* of FNV-1a-64 over BE64 expiry and key */
};

/* Queue names collected by a store's queues() callback (copies, not
 * NUL-terminated); `oom` when one could not be kept. */
struct mig_name {
	char *s;
	size_t len;
};
struct mig_names {
	struct mig_name *v;
	size_t n, cap;
	bool oom;
};

/* Callbacks of mig_source_each(): a non-zero return stops the walk and is
 * returned (the callback has set the error). */
struct mig_source_cb {
	int (*queue_begin)(void *arg, const char *name, size_t len);
	int (*item)(void *arg, const struct saker_item *it, int state, bool was_open);
	int (*queue_end)(void *arg);
	/* a deduplication id of the queue, after its items (NULL: ids are
	 * not wanted) */
	int (*id)(void *arg, const void *key, size_t len, int64_t expires_ms);
};

/* Progress line shared with dump (stderr, redrawn in place). */
struct mig_meter {
	bool on;
	bool drawn;
	uint64_t items, bytes;
	uint64_t total_items;
	uint64_t start_ns, last_ns;
};

/* The copy target's state: built by migrate_copy.c, reported on by
 * migrate_progress.c. */
struct mig_q {
	char *name;
	size_t len;
	struct mig_digest want;
	unsigned delayed_inputs;         /* bit per input that added delayed items */
	unsigned id_inputs;              /* bit per input that added ids */
	uint64_t src_ids;
	bool from_src;
	uint64_t src_ready, src_delayed, src_open, src_bytes;
};

struct mig_target {
	const struct saker_store_driver *drv;
	struct mig_opts opts;
	char *spec;                      /* as given */
	char *path;                      /* its location */
	char *tmp_path, *tmp_spec;
	bool is_dir;
	bool direct;                 /* location is not a path (a database):
	                              * written in place, undone on failure */
	bool replace;                    /* something is at path and gets swapped out */
	bool tmp_made, done;
	saker_store *st;
	saker_queue *q;
	size_t cur;                      /* index of the current queue in qs */
	struct mig_q *qs;
	size_t nq, capq;
	int64_t now_ms;
	unsigned input;                  /* 1 = the existing destination, 2 = source */
	uint64_t pending, pending_bytes;
	uint64_t src_items, src_bytes, src_ids;
	struct mig_meter meter;
};

#endif
