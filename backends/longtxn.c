/*
 * longtxn.c -- the long-transaction engine of the LMDB and SQLite drivers:
 * when to checkpoint, what a failed one does, rebuilding the long
 * transaction from the journal, recovery at open (longtxn.h).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "saker/store.h"

#include "clock.h"
#include "hash.h"
#include "longtxn.h"

uint64_t
ltx_new_id(void)
{
	uint64_t r = 0;

	if (saker_random(&r, sizeof(r)) != 0)
		r = saker_mono_ns() ^ ((uint64_t)getpid() << 32);
	return (r >> 1) | 1;
}

/* A journal write's errno as a saker_err, with lt->err. */
static int
write_result(struct ltx *lt, int rc, bool in_doubt)
{
	if (rc == 0) {
		if (lt->first_ns == 0)
			lt->first_ns = saker_mono_ns();
		return SAKER_OK;
	}
	if (!in_doubt && (rc == ENOSPC || rc == EDQUOT || rc == EFBIG)) {
		snprintf(lt->err, sizeof(lt->err), "storage full (%.200s)",
		    lt->j.err);
		return SAKER_EFULL;
	}
	snprintf(lt->err, sizeof(lt->err), "%s", lt->j.err);
	if (!in_doubt && rc == ENOMEM)
		return SAKER_ENOMEM;
	return in_doubt ? SAKER_EINDOUBT : SAKER_EIO;
}

int
ltx_write(struct ltx *lt, bool sync)
{
	bool in_doubt = false;
	int rc = lj_write(&lt->j, sync, &in_doubt);

	return write_result(lt, rc, in_doubt);
}

int
ltx_write_start(struct ltx *lt)
{
	int rc;

	if (lj_flush_start(&lt->j) != 0) {
		snprintf(lt->err, sizeof(lt->err), "%s", lt->j.err);
		return SAKER_EINVAL;
	}
	if ((rc = lj_write_start(&lt->j)) == 0)
		return SAKER_OK;
	/* nothing written (growing failed): never in doubt */
	return write_result(lt, rc, false);
}

int
ltx_write_finish(struct ltx *lt)
{
	bool in_doubt = false;
	int rc = lj_write_finish(&lt->j, &in_doubt);

	/* ENOSPC from the thread's pwrite is not "full, go on": the record
	 * may be half there and the next batches were gathered on top */
	if (rc != 0 && !in_doubt && (rc == ENOSPC || rc == EDQUOT ||
	    rc == EFBIG || rc == ENOMEM)) {
		snprintf(lt->err, sizeof(lt->err), "%s", lt->j.err);
		return SAKER_EIO;
	}
	return write_result(lt, rc, in_doubt);
}

int
ltx_flush_fd(const struct ltx *lt)
{
	return lj_flush_fd(&lt->j);
}

void
ltx_init(struct ltx *lt, const struct ltx_ops *ops, void *arg,
    uint64_t max_bytes, uint64_t max_ns)
{
	memset(lt, 0, sizeof(*lt));
	lt->j.fd = -1;
	lt->ops = ops;
	lt->arg = arg;
	lt->max_bytes = max_bytes;
	lt->max_ns = max_ns;
}

int
ltx_open(struct ltx *lt, const char *path, bool create, uint64_t store_id,
    bool never_sync, uint64_t ckpt_seq)
{
	int rc = lj_open(&lt->j, path, create);

	lt->j.store_id = store_id;
	lt->j.never_sync = never_sync;
	lt->ckpt_seq = ckpt_seq;
	return rc;
}

int
ltx_pending(struct ltx *lt, bool *pending)
{
	int rc = lj_pending(&lt->j, lt->ckpt_seq, pending);

	lj_close(&lt->j);
	return rc;
}

int
ltx_replay(struct ltx *lt)
{
	int rc;

	if (lt->ops->begin(lt->arg) != 0)
		return LTX_EBEGIN;
	rc = lj_replay(&lt->j, lt->ckpt_seq, UINT64_MAX, lt->ops->apply,
	    lt->arg);
	if (rc != 0)
		lt->ops->abort(lt->arg);
	else if (lt->j.seq != lt->ckpt_seq)
		lt->first_ns = saker_mono_ns();	/* they wait for a checkpoint */
	return rc;
}

int
ltx_recover(struct ltx *lt, uint64_t *replayed)
{
	uint64_t from = lt->ckpt_seq;
	bool fatal, rebuilt;
	int rc;

	*replayed = 0;
	if ((rc = ltx_replay(lt)) != 0) {
		if (rc != LTX_EBEGIN)	/* the journal's reason, if it has one */
			snprintf(lt->err, sizeof(lt->err), "%s", lt->j.err);
		return rc;
	}
	if (ltx_checkpoint(lt, &fatal, &rebuilt) != 0) {
		/* the open fails: what the failed checkpoint rebuilt goes,
		 * the journal keeps the batches for the next one */
		lt->ops->abort(lt->arg);
		return LTX_ECKPT;
	}
	*replayed = lt->ckpt_seq - from;
	return 0;
}

bool
ltx_due(const struct ltx *lt, uint64_t now_ns)
{
	if (now_ns < lt->hold_ns)
		return false;
	return lt->j.off >= lt->max_bytes ||
	    (lt->first_ns != 0 && now_ns - lt->first_ns >= lt->max_ns);
}

int
ltx_rebuild(struct ltx *lt)
{
	uint64_t seq = lt->j.seq, upto = lt->j.off;
	int rc;

	lt->ops->abort(lt->arg);
	lj_cut(&lt->j, 0);
	lt->err[0] = '\0';
	if (seq == lt->ckpt_seq)
		return 0;	/* nothing since the checkpoint */
	lt->j.err[0] = '\0';
	if (lt->ops->begin(lt->arg) != 0) {
		if (lt->err[0] == '\0')	/* ops->begin may say why */
			snprintf(lt->err, sizeof(lt->err), "cannot begin a "
			    "transaction");
		rc = LTX_EBEGIN;
		goto fail;
	}
	rc = lj_replay(&lt->j, lt->ckpt_seq, upto, lt->ops->apply, lt->arg);
	if (rc == 0 && lt->j.seq == seq && lt->j.off == upto)
		return 0;
	lt->ops->abort(lt->arg);
	if (rc != 0 && lt->j.err[0] != '\0')
		snprintf(lt->err, sizeof(lt->err), "%s", lt->j.err);
	else if (rc != 0)
		snprintf(lt->err, sizeof(lt->err), "replaying batch %" PRIu64
		    " failed (%d)", lt->j.seq + 1, rc);
	else
		snprintf(lt->err, sizeof(lt->err), "the journal ends at batch %"
		    PRIu64 ", not %" PRIu64, lt->j.seq, seq);
	if (rc == 0)
		rc = EIO;
fail:
	/* what was written stays written: the next open replays it */
	lt->j.seq = seq;
	lt->j.off = upto;
	return rc;
}

int
ltx_checkpoint(struct ltx *lt, bool *fatal, bool *rebuilt)
{
	uint64_t t0 = saker_mono_ns(), now;
	int rc;

	*fatal = false;
	*rebuilt = true;
	if (lt->j.seq == lt->ckpt_seq) {
		/* nothing since the last one (reads, or empty batches) */
		lt->ops->abort(lt->arg);
		lt->first_ns = 0;
		lt->last_ns = 0;
		return 0;
	}
	rc = lt->ops->commit(lt->arg, lt->j.seq, fatal);
	now = saker_mono_ns();
	lt->last_ns = now - t0;
	if (rc == 0) {
		lt->checkpoints++;
		lt->checkpoint_ns += lt->last_ns;
		lt->ckpt_seq = lt->j.seq;
		lj_restart(&lt->j);
		lt->first_ns = 0;
		lt->hold_ns = 0;
		lt->failing = false;
		return 0;
	}
	/* Every acknowledged batch is still in the journal: the long
	 * transaction, which the commit lost, is rebuilt from it, and the
	 * next try waits (whether there is one is the driver's *fatal). */
	lt->failing = true;
	lt->hold_ns = now + LTX_RETRY_NS;
	*rebuilt = ltx_rebuild(lt) == 0;
	return rc;
}

void
ltx_close(struct ltx *lt)
{
	lj_close(&lt->j);
}

int
ltx_open_recovered(const struct saker_store_driver *drv, const char *location,
    const struct saker_store_opts *opts, saker_store **out, char *err,
    size_t errlen)
{
	struct saker_store_opts rw;
	saker_store *tmp;
	char why[512];
	int rc;

	memset(&rw, 0, sizeof(rw));
	rw.sync = SAKER_SYNC_ALWAYS;
	if ((rc = saker_store_relock(opts, true, why, sizeof(why))) != SAKER_OK ||
	    (rc = drv->open(location, &rw, &tmp, why, sizeof(why))) !=
	    SAKER_OK) {
		snprintf(err, errlen, "%s %s: its journal holds acknowledged "
		    "batches the data file does not yet (after a crash), and "
		    "applying them needs write access: %s", drv->name, location,
		    why);
		return rc;
	}
	drv->close(tmp);
	if ((rc = saker_store_relock(opts, false, err, errlen)) != SAKER_OK)
		return rc;
	return drv->open(location, opts, out, err, errlen);
}
