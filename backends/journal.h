/*
 * journal.h -- a store driver's redo journal (backends/journal.c).
 *
 * The LMDB driver, and the SQLite driver with --sync always, keep one long
 * write transaction open between checkpoints and make each batch durable
 * by appending one record to this journal and fdatasync()ing it: one flush
 * of a preallocated file per batch, instead of the database's own commit
 * (LMDB: data pages, then the meta page; SQLite: WAL frames, then their
 * fsync).  A checkpoint commits the long transaction with the database's
 * own synced commit, after which the journal starts again at offset 0.
 *
 * The journal only frames and stores opaque payloads; what a payload means
 * (LMDB's puts and deletes, SQLite's statements) is the driver's business.
 *
 * FILE FORMAT
 *   Records follow each other from offset 0; the rest of the file is
 *   zeros or stale records of an earlier round.  A record is
 *     "SKJ1"  u32 magic
 *     u32     reserved (0)
 *     u64     seq       batch number, +1 per record, never reused
 *     u64     len       payload bytes
 *     u64     check     hash of seq, len and payload, seeded with the
 *                       store's id (meta "store_id" in the database)
 *     payload
 *   little-endian.  A record is valid when its magic and check match; a
 *   torn write fails the check.  Records after a checkpoint at seq A have
 *   seqs A+1, A+2, ... and stale ones have seqs <= A, so a scan stops at
 *   the first record that is invalid or out of sequence.
 */
#ifndef SAKER_JOURNAL_H
#define SAKER_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LJ_HDR		32	/* record header bytes */

struct lj {
	int fd;
	uint64_t size;		/* file size: preallocated, zero-filled */
	uint64_t off;		/* end of the last record written */
	uint64_t seq;		/* seq of the last record written */
	unsigned char *buf;	/* LJ_HDR bytes of header room, then the payload */
	size_t len;		/* payload bytes in buf */
	size_t cap;
	bool unsynced;		/* written since the last fdatasync */
	bool never_sync;	/* --sync never: not even after growing */
	uint64_t store_id;	/* seeds every record's check: records of
				 * another store's journal never pass it */
	uint64_t fsyncs;	/* fdatasync calls made */
	char err[256];		/* reason for the last failure */
	/* the flush thread (lj_write_start()): NULL until started */
	struct lj_flusher *fl;
	bool inflight;		/* a record is with the flush thread */
	size_t fl_n;		/* its bytes, header included */
	unsigned char *spare;	/* the other batch buffer: the one in flight,
				 * or kept for the next hand-off */
	size_t spare_cap;
};

/* fdatasync(), or what a test puts in its place to fail it (EIO). */
extern int (*lj_fdatasync)(int fd);

/* Open (creating when `create`) the journal at `path`.  Returns 0, or an errno
 * value with a message in j->err.  A missing file with !create is not an
 * error: j->fd is then -1 and the journal is empty. */
int lj_open(struct lj *j, const char *dir, bool create);

void lj_close(struct lj *j);

/* Room for n more payload bytes of the current batch at *p; the caller
 * fills them.  Returns 0 or ENOMEM. */
int lj_reserve(struct lj *j, size_t n, unsigned char **p);

/* Drop the current batch's payload from byte `mark` on. */
static inline void
lj_cut(struct lj *j, size_t mark)
{
	if (mark < j->len)
		j->len = mark;
}

/*
 * Write the current batch as record seq + 1 at off (fdatasync when
 * `sync`), then empty the batch.  Returns 0, or an errno value with a
 * message in j->err; *in_doubt then says whether the record may be in
 * the file and valid (only when fdatasync failed).  Otherwise none of it
 * counts: a record cut short by a failed write never passes its check, and
 * the next batch is written over it.
 */
int lj_write(struct lj *j, bool sync, bool *in_doubt);

/*
 * The asynchronous write.  lj_flush_start() starts the flush thread (once;
 * 0 or an errno value, with j->err).  lj_write_start() frames the current
 * batch as record seq + 1 at off, as lj_write() with sync does, and hands
 * it to the thread, which writes it and fdatasyncs; the next batch fills
 * the other buffer meanwhile.  0 with j->inflight set, or an errno value
 * (growing the file failed: nothing written, nothing in flight).
 * lj_flush_fd() becomes readable (an eventfd) when the thread is done;
 * lj_write_finish() waits for that if need be and collects the result:
 * 0 (off and seq now count the record), or an errno value with j->err and
 * *in_doubt as for lj_write().  One record at a time: a second
 * lj_write_start() before lj_write_finish() is refused (EBUSY).
 * lj_close() waits for a record in flight and stops the thread.
 */
int lj_flush_start(struct lj *j);
int lj_write_start(struct lj *j);
int lj_write_finish(struct lj *j, bool *in_doubt);
int lj_flush_fd(const struct lj *j);
/* Make lj_flush_fd() readable again, or not: for a driver that collected a
 * result early (it had to wait) and keeps it for its caller, who still
 * waits for the descriptor. */
void lj_flush_poke(struct lj *j, bool readable);

/* fdatasync when something was written since the last one. */
int lj_sync(struct lj *j);

/* A checkpoint covered every record: start again at offset 0. */
static inline void
lj_restart(struct lj *j)
{
	j->off = 0;
}

/*
 * Read the records after seq `applied`, in order, calling fn with each
 * payload, until the first invalid or out-of-sequence record, or the end
 * offset `upto` (UINT64_MAX: the whole file).  On return j->seq and j->off
 * describe the last record passed to fn (j->seq = applied and j->off = 0
 * when there was none).  Returns 0, an errno value, or fn's non-zero
 * result; j->err says why.  A first record with a seq beyond applied + 1
 * is refused (EILSEQ): the journal does not belong to this data file.
 */
int lj_replay(struct lj *j, uint64_t applied, uint64_t upto,
    int (*fn)(void *arg, const unsigned char *payload, size_t len), void *arg);

/* Is there a valid record after seq `applied` (one that lj_replay would
 * pass on)?  For read-only openers, which must not replay themselves.
 * Returns 0 or lj_replay's error. */
int lj_pending(struct lj *j, uint64_t applied, bool *pending);

#endif
