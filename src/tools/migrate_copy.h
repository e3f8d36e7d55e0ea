/*
 * migrate_copy.h -- the engine copying queues between stores through the
 * driver interface.
 *
 * One generic engine serves `saker migrate`, `saker dump` and `saker load`;
 * it knows no driver by name (Cyrus cyrusdb_convert is the model):
 *
 *   source  a store opened read-only, walked queue by queue (sorted by
 *           name) with iterate(); or a dump stream (dump.c).
 *   target  a new store built in a temporary sibling (LOCATION.tmp-PID),
 *           committed every MIG_COMMIT_EVERY items, closed, fsynced,
 *           reopened and verified, then renamed into place.  Any failure
 *           or SIGINT/SIGTERM removes the temporary: the destination is
 *           left exactly as it was.
 *
 * NORMALISED ITEMS
 *   What is copied is what a restart of the source would show.  With T the
 *   time the operation started:
 *     - open items become ready items at the head (iterate() lists them
 *       first, oldest first);
 *     - delayed items with due <= T become ready (they follow the ready
 *       ones in due order, exactly where startup promotion puts them);
 *     - ready items carry due 0; delayed items keep their absolute due.
 *   Items are put() with now_ms = T, so the target's ready/delayed split
 *   is deterministic and the checksums below compare equal.
 *
 * DEDUPLICATION IDS
 *   Each queue's ids (store.h, DEDUPLICATION) follow its items, sorted by
 *   key bytes, with their absolute expiry; ids expired at T are left out
 *   (a restart would sweep them).  A source or target driver from before
 *   ids has none to give and refuses to take any.
 *
 * CHECKSUM (verification)
 *   Per item: h = FNV-1a-64 over BE32 flags, BE64 expires_ms, BE64 due,
 *   BE64 len, data, then (when the item has attributes) BE16 attributes
 *   length and the attribute record, byte-exact.  Per queue: counts of ready and delayed items; a chain
 *   over ready items in FIFO order (c = FNV-1a-64 continuing from c over
 *   BE64 h); the same chain over delayed items in (due, arrival) order; and
 *   the sum mod 2^64 of the delayed items' h.  Delayed items are compared
 *   by chain, or by sum when the queue's delayed items came from two inputs
 *   (--append onto a queue that already had delayed items), because the
 *   target then interleaves them by due time.  Ids are compared by count
 *   and by the sum mod 2^64 of FNV-1a-64 over BE64 expiry and key; when
 *   both inputs of --append gave a queue ids, the target keeps one of an
 *   id both had, so only "no more than written" is checked.
 */
#ifndef SAKER_MIGRATE_COPY_H
#define SAKER_MIGRATE_COPY_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "saker/store.h"
#include "migrate_int.h"

void mig_seterr(struct mig_err *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Set by the SIGINT/SIGTERM/SIGHUP handler that mig_signals_install()
 * installs; every loop checks it. */
extern volatile sig_atomic_t mig_interrupted;
void mig_signals_install(void);
void mig_signals_restore(void);

/* Test-only fault injection: when set, called before each item is put into
 * a target with the 1-based count of items put so far. */
extern void (*mig_test_item_hook)(uint64_t n);

uint64_t mig_fnv(uint64_t h, const void *p, size_t len);

/* Per-queue digest, as described above. */
void mig_digest_init(struct mig_digest *d);
void mig_digest_add(struct mig_digest *d, const struct saker_item *it, int state);
void mig_digest_add_id(struct mig_digest *d, const void *key, size_t len,
    int64_t expires_ms);

/* Check a spec names a compiled-in, durable driver with a location.
 * `role` ("source", "destination") is used in the message. */
const struct saker_store_driver *mig_spec_driver(const char *spec,
    const char *role, struct mig_err *e);

/* Open a source store read-only; a clear message for a locked store. */
int mig_source_open(const char *spec, saker_store **out, struct mig_err *e);

/* The queues() callback collecting names into a struct mig_names;
 * mig_name_cmp sorts them by name bytes. */
int mig_collect_name(void *arg, const char *name, size_t len);
int mig_name_cmp(const void *a, const void *b);
void mig_names_free(struct mig_names *ns);

/* Walk every queue of a source store, sorted by name, handing normalised
 * items (see above) to the callbacks.  A non-zero callback return stops
 * the walk and is returned (the callback has set e). */
int mig_source_each(saker_store *s, int64_t now_ms, const struct mig_source_cb *cb,
    void *arg, struct mig_err *e);

/* Source total for the progress line: items of every state. */
uint64_t mig_source_totals(saker_store *s);

/* The target. */
int mig_target_open(const char *spec, const char *src_spec,
    const struct mig_opts *opts, int64_t now_ms, struct mig_target **out,
    struct mig_err *e);
int mig_target_queue(struct mig_target *t, const char *name, size_t len,
    struct mig_err *e);
int mig_target_put(struct mig_target *t, const struct saker_item *it, int state,
    bool was_open, struct mig_err *e);
/* A deduplication id of the current queue (skipped when expired at T). */
int mig_target_id(struct mig_target *t, const void *key, size_t len,
    int64_t expires_ms, struct mig_err *e);
/* Every queue of src, walked by mig_source_each(), into t. */
int mig_target_copy(struct mig_target *t, saker_store *src, struct mig_err *e);
/* Commit, close, fsync, verify, rename into place.  After a failure the
 * destination is untouched; mig_target_free() removes the temporary. */
int mig_target_finish(struct mig_target *t, struct mig_err *e);
/* Free t; when mig_target_finish() did not succeed, first remove the
 * temporary (the abandon path).  NULL-safe. */
void mig_target_free(struct mig_target *t);

/* Both specs name the same file or directory. */
bool mig_same_location(const char *a, const char *b);

#endif
