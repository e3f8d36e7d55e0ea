/*
 * longtxn.h -- the long-transaction engine the LMDB and SQLite drivers
 * share (longtxn.c).
 *
 * Both drivers keep one long write transaction open between checkpoints
 * and make each batch durable by one record in their redo journal
 * (journal.h).  What follows from that is policy, written here once:
 *
 *   - when to checkpoint: after a batch, when the journal holds
 *     max_bytes, or when the oldest batch not yet in the data file is
 *     max_ns old; never within LTX_RETRY_NS of a failed checkpoint;
 *   - what a checkpoint is: the driver's durable commit of the long
 *     transaction recording the last batch it holds; then the journal
 *     starts again at offset 0;
 *   - what a failed checkpoint does: the journal still holds every
 *     acknowledged batch, so the long transaction is rebuilt from the
 *     data file and the journal, and the next try waits LTX_RETRY_NS;
 *     whether the store stays writable is the driver's word (*fatal);
 *   - rebuilding: the last checkpoint plus the journal's records up to
 *     the last one written, checked to end exactly there;
 *   - recovery at open: the batches the journal holds beyond the last
 *     checkpoint are replayed into a long transaction, which is then
 *     checkpointed; a read-only opener only asks whether any are;
 *   - the checkpoint statistics.
 *
 * The driver gives the mechanism (struct ltx_ops): begin its long
 * transaction, apply one journal payload to it, commit it durably with
 * the number of its last batch, abort it.  The engine never calls the
 * driver for anything else and the driver never reaches into the
 * engine's decisions; it reads lt->j to frame records (jr_*, sr_*).
 */
#ifndef SAKER_LONGTXN_H
#define SAKER_LONGTXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "saker/store.h"

#include "journal.h"

/* A checkpoint that failed is tried again this much later (after a
 * batch): a full disk is not emptied in microseconds, and every retry
 * costs a rebuild. */
#define LTX_RETRY_NS	((uint64_t)1000 * 1000 * 1000)

/* Returned by ltx_replay()/ltx_rebuild() when ops->begin failed: the
 * driver's own error state says why. */
#define LTX_EBEGIN	(-1)
/* Returned by ltx_recover() when the checkpoint of what it replayed
 * failed: ops->commit said why, in the driver's own error state. */
#define LTX_ECKPT	(-2)

struct ltx_ops {
	/* Begin the long transaction (none is open).  0 or non-zero, and
	 * then it may say why in the engine's err. */
	int (*begin)(void *arg);
	/* Apply one journal payload to it.  0 or non-zero (the driver's
	 * code, passed back to the engine's caller). */
	int (*apply)(void *arg, const unsigned char *p, size_t len);
	/* Record `seq` as the last batch in the data file and commit the
	 * long transaction durably.  0, or the driver's code with the long
	 * transaction gone (aborted if the database kept it); *fatal says
	 * whether the store must stop writing (else it is for want of room
	 * and the journal keeps every batch until a later try). */
	int (*commit)(void *arg, uint64_t seq, bool *fatal);
	/* Abort the long transaction if one is open. */
	void (*abort)(void *arg);
};

struct ltx {
	struct lj j;		/* the journal: fd -1 when there is none */
	const struct ltx_ops *ops;
	void *arg;		/* the driver's store, for ops */
	uint64_t ckpt_seq;	/* last batch in the data file */
	uint64_t max_bytes;	/* checkpoint once the journal is this long */
	uint64_t max_ns;	/* or its oldest batch this old */
	uint64_t first_ns;	/* when that oldest batch was written; 0: none */
	uint64_t hold_ns;	/* no checkpoint before this (after a failure) */
	uint64_t checkpoints;	/* made, and the time they took */
	uint64_t checkpoint_ns;
	uint64_t last_ns;	/* how long the last attempt took */
	bool failing;		/* the last checkpoint failed */
	char err[320];		/* why a rebuild or a journal write failed */
};

/* Before anything else: no journal open, the driver's ops and limits. */
void ltx_init(struct ltx *lt, const struct ltx_ops *ops, void *arg,
    uint64_t max_bytes, uint64_t max_ns);

/* Open the journal at `path` (creating it when `create`) for a store whose
 * data file holds batches up to `ckpt_seq`.  0 or an errno value, with
 * lt->j.err saying why; a missing file with !create leaves lt->j.fd -1. */
int ltx_open(struct ltx *lt, const char *path, bool create, uint64_t store_id,
    bool never_sync, uint64_t ckpt_seq);

/* Read-only openers: does the journal hold batches the data file does not
 * (which they must not replay)?  Closes the journal.  0 or lj_pending's
 * error. */
int ltx_pending(struct ltx *lt, bool *pending);

/* Recovery at open: begin the long transaction and replay every batch the
 * journal holds beyond ckpt_seq (the batches acknowledged before a crash).
 * The caller then checkpoints them (ltx_checkpoint).  0, LTX_EBEGIN, an
 * errno value of the journal (EILSEQ: not this store's), or ops->apply's
 * code; on failure the long transaction is aborted and lt->j.err says why
 * when the journal does. */
int ltx_replay(struct ltx *lt);

/*
 * Recovery at open for a writer, whole: replay what the journal holds
 * beyond ckpt_seq (ltx_replay()) and checkpoint it (ltx_checkpoint()),
 * so the open ends with every acknowledged batch in the data file and no
 * long transaction.  *replayed: how many batches.  0; LTX_EBEGIN;
 * LTX_ECKPT (the long transaction aborted, the journal keeping the
 * batches for the next open); or the journal's errno value (EILSEQ: not
 * this store's) or ops->apply's code, with lt->err saying why.
 */
int ltx_recover(struct ltx *lt, uint64_t *replayed);

/* A new store's id, which seeds its journal's checks (journal.h): random,
 * positive as an int64 and never 0. */
uint64_t ltx_new_id(void);

/*
 * Make the current batch durable: its record into the journal, with
 * fdatasync when `sync`.  A saker_err: SAKER_OK; SAKER_EFULL or
 * SAKER_ENOMEM when none of it counts and the store may go on writing;
 * SAKER_EIO when a write or fdatasync failed, which leaves the page cache
 * in an unknown state, so the store must stop writing rather than risk
 * acknowledging what may not be on disk; SAKER_EINDOUBT the same, with the
 * record maybe in the journal.  lt->err says why.  On a failure the caller
 * rolls the batch back (the long transaction holds it, the journal does
 * not or may not).
 */
int ltx_write(struct ltx *lt, bool sync);

/*
 * The same, asynchronous (--sync always): ltx_write_start() hands the
 * batch's record to the journal's flush thread (started on first use) and
 * returns; ltx_flush_fd() becomes readable when the write and its
 * fdatasync are over, and ltx_write_finish() collects the result, waiting
 * when called earlier.  Between the two the driver gathers the next batch
 * into its long transaction but must not checkpoint, rebuild or start a
 * second record.  ltx_write_start(): SAKER_OK (lt->j.inflight), or as
 * ltx_write() with nothing in flight; SAKER_EINVAL when the thread cannot
 * be started (the caller writes synchronously instead).
 * ltx_write_finish(): SAKER_OK, SAKER_EIO or SAKER_EINDOUBT, lt->err.
 */
int ltx_write_start(struct ltx *lt);
int ltx_write_finish(struct ltx *lt);
int ltx_flush_fd(const struct ltx *lt);

/* Time for a checkpoint (the long transaction being open)? */
bool ltx_due(const struct ltx *lt, uint64_t now_ns);

/*
 * Checkpoint: commit the long transaction (ops->commit) recording the
 * journal's last batch, then start the journal again; with no batch since
 * the last checkpoint only abort it.  0, or ops->commit's code and *fatal:
 * the long transaction has then been rebuilt (ltx_rebuild), and when even
 * that failed *rebuilt is false and lt->err says why.
 */
int ltx_checkpoint(struct ltx *lt, bool *fatal, bool *rebuilt);

/*
 * Rebuild the long transaction from the last checkpoint and the journal's
 * records up to the last one written, after the database lost it (a failed
 * checkpoint, or a batch that failed or may not be in the journal).  The
 * current batch's payload is dropped.  With no batch since the checkpoint
 * the long transaction is only aborted (the next batch begins one).  0, or
 * non-zero with lt->err saying why: the store then cannot serve what it
 * acknowledged until it is reopened (which replays the journal again).
 */
int ltx_rebuild(struct ltx *lt);

void ltx_close(struct ltx *lt);

/*
 * A read-only opener (dump, a migrate source) found batches in the journal
 * that the data file does not hold yet (ltx_pending(), after a crash): it
 * must not replay them itself, so they are recovered as a writer would
 * (drv->open for writing, drv->close), which needs the exclusive lock
 * (saker_store_relock()), and the store is then opened read-only with
 * `opts`.  The caller has freed its own half-open store.  A saker_err,
 * with err saying why.
 */
int ltx_open_recovered(const struct saker_store_driver *drv,
    const char *location, const struct saker_store_opts *opts,
    saker_store **out, char *err, size_t errlen);

#endif /* SAKER_LONGTXN_H */
