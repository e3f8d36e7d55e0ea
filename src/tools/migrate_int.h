/* migrate_int.h -- the copy target's state, private to the copy engine
 * (migrate_copy.c) and its progress report (migrate_progress.c).  Include
 * migrate.h first. */
#ifndef SAKER_MIGRATE_INT_H
#define SAKER_MIGRATE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "saker/store.h"

struct mig_q {
	char *name;
	size_t len;
	struct mig_digest want;
	unsigned delayed_inputs;         /* bit per input that added delayed items */
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
	uint64_t src_items, src_bytes;
	struct mig_meter meter;
};

#endif
