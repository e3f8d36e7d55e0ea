/* check_sqlite_faults.c -- SQLite's storage failures through a VFS that
 * fails reads, writes or fsyncs on demand, and the layer's refusal states
 * (store.h, REFUSALS) they lead to: a batch lost mid-way, a failed fsync
 * of the WAL, a failed checkpoint. */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "saker/store.h"
#include "testlib.h"

/*
 * The faults: a VFS registered as SQLite's default that forwards every
 * call to the real one, except that while `fail_reads` (`fail_writes`,
 * `fail_syncs`) is above zero the next read (write, sync) of a database
 * or WAL file fails with SQLITE_IOERR_READ (_WRITE, _FSYNC).  SQLite
 * rolls the whole transaction back on an I/O error inside a statement
 * (not just the statement), which is the loss the driver reports to the
 * layer.  A test program of its own, so that no other test runs over it.
 */
struct ffile {
	sqlite3_file base;
	sqlite3_file *real;	/* follows this struct in the same block */
	bool data;		/* a database or WAL file: reads may fail */
};

static sqlite3_vfs fvfs;
static sqlite3_vfs *real_vfs;
static int fail_reads;		/* fail this many reads from now */
static int reads_failed;	/* reads failed so far */
static int fail_writes, writes_failed;	/* the same for writes */
static int fail_syncs, syncs_failed;	/* and for syncs */

#define REAL(f) (((struct ffile *)(f))->real)

/* Does this call on f fail: a database or WAL file, a fault armed? */
static bool
fails(sqlite3_file *f, int *armed, int *failed)
{
	if (!((struct ffile *)f)->data || *armed <= 0)
		return false;
	(*armed)--;
	(*failed)++;
	return true;
}

static int
f_close(sqlite3_file *f)
{
	return REAL(f)->pMethods->xClose(REAL(f));
}

static int
f_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
	if (fails(f, &fail_reads, &reads_failed))
		return SQLITE_IOERR_READ;
	return REAL(f)->pMethods->xRead(REAL(f), buf, n, off);
}

static int
f_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
	if (fails(f, &fail_writes, &writes_failed))
		return SQLITE_IOERR_WRITE;
	return REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
}

static int
f_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	return REAL(f)->pMethods->xTruncate(REAL(f), size);
}

static int
f_sync(sqlite3_file *f, int flags)
{
	if (fails(f, &fail_syncs, &syncs_failed))
		return SQLITE_IOERR_FSYNC;
	return REAL(f)->pMethods->xSync(REAL(f), flags);
}

static int
f_size(sqlite3_file *f, sqlite3_int64 *size)
{
	return REAL(f)->pMethods->xFileSize(REAL(f), size);
}

static int
f_lock(sqlite3_file *f, int l)
{
	return REAL(f)->pMethods->xLock(REAL(f), l);
}

static int
f_unlock(sqlite3_file *f, int l)
{
	return REAL(f)->pMethods->xUnlock(REAL(f), l);
}

static int
f_reserved(sqlite3_file *f, int *out)
{
	return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}

static int
f_fcntl(sqlite3_file *f, int op, void *arg)
{
	return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}

static int
f_sector(sqlite3_file *f)
{
	return REAL(f)->pMethods->xSectorSize(REAL(f));
}

static int
f_devchar(sqlite3_file *f)
{
	return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}

static int
f_shmmap(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp)
{
	return REAL(f)->pMethods->xShmMap(REAL(f), pg, pgsz, extend, pp);
}

static int
f_shmlock(sqlite3_file *f, int off, int n, int flags)
{
	return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}

static void
f_shmbarrier(sqlite3_file *f)
{
	REAL(f)->pMethods->xShmBarrier(REAL(f));
}

static int
f_shmunmap(sqlite3_file *f, int del)
{
	return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}

static int
f_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp)
{
	/* no memory-mapped reads: every read goes through f_read() */
	(void)f;
	(void)off;
	(void)n;
	*pp = NULL;
	return SQLITE_OK;
}

static int
f_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
	(void)f;
	(void)off;
	(void)p;
	return SQLITE_OK;
}

static const sqlite3_io_methods fmethods = {
	3, f_close, f_read, f_write, f_truncate, f_sync, f_size, f_lock,
	f_unlock, f_reserved, f_fcntl, f_sector, f_devchar, f_shmmap,
	f_shmlock, f_shmbarrier, f_shmunmap, f_fetch, f_unfetch
};

static int
f_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags,
    int *outflags)
{
	struct ffile *ff = (struct ffile *)f;
	int rc;

	(void)vfs;
	ff->real = (sqlite3_file *)(ff + 1);
	ff->data = (flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL)) != 0;
	rc = real_vfs->xOpen(real_vfs, name, ff->real, flags, outflags);
	/* SQLite calls xClose only when pMethods is set */
	ff->base.pMethods = ff->real->pMethods != NULL ? &fmethods : NULL;
	return rc;
}

static void
vfs_install(void)
{
	if (real_vfs != NULL)
		return;
	real_vfs = sqlite3_vfs_find(NULL);
	ck_assert_ptr_nonnull(real_vfs);
	fvfs = *real_vfs;
	fvfs.zName = "saker-failing";
	fvfs.szOsFile = (int)sizeof(struct ffile) + real_vfs->szOsFile;
	fvfs.xOpen = f_open;
	fvfs.pNext = NULL;
	ck_assert_int_eq(sqlite3_vfs_register(&fvfs, 1), SQLITE_OK);
}

/* ------------------------------------------------------------------ */

#define NBIG 2000	/* items in "big": far more pages than the head's */
#define ITEM_LEN 1000

static char *dir;
static char spec[512];

static saker_store *
store_open_sync(saker_sync_mode sync)
{
	struct saker_store_opts o;
	saker_store *s = NULL;
	char err[512];

	memset(&o, 0, sizeof(o));
	o.create = true;
	o.sync = sync;
	ck_assert_msg(saker_store_open(spec, &o, &s, err, sizeof(err)) ==
	    SAKER_OK, "open %s: %s", spec, err);
	return s;
}

static saker_store *
store_open(void)
{
	return store_open_sync(SAKER_SYNC_ALWAYS);
}

static saker_queue *
queue(saker_store *s, const char *name)
{
	saker_queue *q = NULL;

	ck_assert_msg(saker_store_queue_open(s, name, strlen(name), true, NULL,
	    &q) == SAKER_OK, "queue %s: %s", name, saker_store_errmsg(s));
	return q;
}

static int
put(saker_store *s, saker_queue *q, int n)
{
	char data[ITEM_LEN];
	struct saker_item it;

	memset(data, 'x', sizeof(data));
	snprintf(data, sizeof(data), "it%05d", n);
	memset(&it, 0, sizeof(it));
	it.len = sizeof(data);
	it.data = data;
	return saker_store_put(s, q, &it, 1000);
}

static void
must_commit(saker_store *s)
{
	ck_assert_msg(saker_store_commit(s) == SAKER_OK, "commit: %s",
	    saker_store_errmsg(s));
}

/* the data of the item a take handed out ("itNNNNN") */
static int
take_cb(void *arg, const struct saker_item *it)
{
	char *got = arg;

	snprintf(got, 8, "%.*s", (int)(it->len < 7 ? it->len : 7),
	    (const char *)it->data);
	return 0;
}

static uint64_t
items(saker_store *s, saker_queue *q)
{
	struct saker_queue_stats st;

	memset(&st, 0, sizeof(st));
	ck_assert_int_eq(saker_store_queue_stats(s, q, &st), SAKER_OK);
	return st.items;
}

static void
setup(void)
{
	dir = tl_mkdtemp();
	snprintf(spec, sizeof(spec), "sqlite:%s/s.db", dir);
	vfs_install();
	fail_reads = reads_failed = 0;
	fail_writes = writes_failed = 0;
	fail_syncs = syncs_failed = 0;
}

static void
teardown(void)
{
	fail_reads = fail_writes = fail_syncs = 0;
	tl_rmrf(dir);
	free(dir);
	dir = NULL;
}

/* A store whose queue "big" holds NBIG items and "small" item 0, reopened:
 * a cold page cache, so that taking from "big" soon reads the file. */
static saker_store *
cold_store(saker_queue **big, saker_queue **small)
{
	saker_store *s = store_open();
	int i;

	*big = queue(s, "big");
	*small = queue(s, "small");
	for (i = 0; i < NBIG; i++) {
		ck_assert_int_eq(put(s, *big, i), SAKER_OK);
		if (i % 500 == 499)
			must_commit(s);
	}
	ck_assert_int_eq(put(s, *small, 0), SAKER_OK);
	must_commit(s);
	saker_store_close(s);

	s = store_open();
	*big = queue(s, "big");
	*small = queue(s, "small");
	ck_assert_uint_eq(items(s, *big), NBIG);
	ck_assert_uint_eq(items(s, *small), 1);
	return s;
}

/* Take from "big" with the next read failing, until a take fails: SQLite
 * rolls the transaction back, the driver reports the batch lost. */
static void
lose_batch(saker_store *s, saker_queue *big)
{
	char got[8];
	int code = SAKER_OK, taken;

	fail_reads = 1;
	for (taken = 0; taken < NBIG && code == SAKER_OK; taken++)
		code = saker_store_take(s, big, SAKER_TAKE_REMOVE, 1000, take_cb,
		    got);
	fail_reads = 0;
	ck_assert_msg(reads_failed == 1, "no take read a page from the file "
	    "(%d taken)", taken);
	ck_assert_msg(code == SAKER_EIO, "the take whose read failed: %d %s",
	    code, saker_store_errmsg(s));
	ck_assert_msg(taken > 1, "the first take failed: no take of the batch "
	    "was undone by the loss");
}

/*
 * A batch SQLite loses mid-way.  "big" holds NBIG items written by an
 * earlier run of the store, so that after a reopen its items are on pages
 * the cache has not read.  In one batch: a put into "small" (its counter
 * goes up), then takes from "big" until a read fails.  From then on
 * (store.h, REFUSALS):
 *   - every write of the batch gets the code and "sqlite LOCATION: this
 *     batch was rolled back (WHY); it ends at the next commit";
 *   - the counters are as at the last commit, for both queues;
 *   - the commit ending the batch fails with "batch rolled back: WHY";
 *   - the next batch is not refused, and what it does is kept.
 */
START_TEST(test_sqlite_batch_lost_midway)
{
	saker_store *s;
	saker_queue *big, *small;
	char got[8], want[1024], where[600];
	int rc;

	s = cold_store(&big, &small);
	ck_assert_int_eq(put(s, small, 1), SAKER_OK);
	ck_assert_uint_eq(items(s, small), 2);
	lose_batch(s, big);

	/* the layer's message, for every write of the batch */
	snprintf(where, sizeof(where), "sqlite %s/s.db", dir);
	snprintf(want, sizeof(want), "%s: this batch was rolled back (%s); it "
	    "ends at the next commit", where, saker_strerror(SAKER_EIO));
	rc = put(s, small, 2);
	ck_assert_int_eq(rc, SAKER_EIO);
	ck_assert_str_eq(saker_store_errmsg(s), want);
	rc = saker_store_take(s, small, SAKER_TAKE_REMOVE, 1000, take_cb, got);
	ck_assert_int_eq(rc, SAKER_EIO);
	ck_assert_str_eq(saker_store_errmsg(s), want);

	/* the batch's counters are undone: the put, and the takes */
	ck_assert_uint_eq(items(s, small), 1);
	ck_assert_uint_eq(items(s, big), NBIG);

	/* the commit that ends it says so, without a commit of the driver */
	rc = saker_store_commit(s);
	ck_assert_int_eq(rc, SAKER_EIO);
	snprintf(want, sizeof(want), "%s: batch rolled back: %s", where,
	    saker_strerror(SAKER_EIO));
	ck_assert_str_eq(saker_store_errmsg(s), want);
	ck_assert(saker_store_takes_writes(s));
	ck_assert(!saker_store_refuses_writes(s));

	/* the next batch is not refused: the head of "big" is its first
	 * item again, and what it does is kept */
	ck_assert_int_eq(put(s, small, 3), SAKER_OK);
	memset(got, 0, sizeof(got));
	rc = saker_store_take(s, big, SAKER_TAKE_REMOVE, 1000, take_cb, got);
	ck_assert_msg(rc == SAKER_OK, "take after the loss: %s",
	    saker_store_errmsg(s));
	ck_assert_str_eq(got, "it00000");
	must_commit(s);
	ck_assert_uint_eq(items(s, small), 2);
	ck_assert_uint_eq(items(s, big), NBIG - 1);
	saker_store_close(s);

	/* and it is what a reopen finds: the lost batch is not there */
	s = store_open();
	big = queue(s, "big");
	small = queue(s, "small");
	ck_assert_uint_eq(items(s, small), 2);
	ck_assert_uint_eq(items(s, big), NBIG - 1);
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(saker_store_take(s, small, SAKER_TAKE_REMOVE, 1000,
	    take_cb, got), SAKER_OK);
	ck_assert_str_eq(got, "it00000");
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(saker_store_take(s, small, SAKER_TAKE_REMOVE, 1000,
	    take_cb, got), SAKER_OK);
	ck_assert_msg(strcmp(got, "it00003") == 0, "the second item of small: "
	    "%s (the lost batch's it00001 must not be there)", got);
	must_commit(s);
	saker_store_close(s);
}
END_TEST

/* Does errmsg() start with "sqlite LOCATION: " and then `head`? */
static void
says_at(int line, saker_store *s, const char *head)
{
	char want[1024];
	const char *e = saker_store_errmsg(s);

	snprintf(want, sizeof(want), "sqlite %s/s.db: %s", dir, head);
	ck_assert_msg(strncmp(e, want, strlen(want)) == 0, "line %d: \"%s\", "
	    "not \"%s...\"", line, e, want);
}
#define says(s, head) says_at(__LINE__, (s), (head))

/* Take every item of q: their numbers must be 0, 1, ... n - 1. */
static void
take_all(saker_store *s, saker_queue *q, int n)
{
	char got[8], want[16];
	int i;

	for (i = 0; i < n; i++) {
		memset(got, 0, sizeof(got));
		ck_assert_msg(saker_store_take(s, q, SAKER_TAKE_REMOVE, 1000,
		    take_cb, got) == SAKER_OK, "item %d: %s", i,
		    saker_store_errmsg(s));
		snprintf(want, sizeof(want), "it%05d", i);
		ck_assert_str_eq(got, want);
	}
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_REMOVE, 1000,
	    take_cb, got), SAKER_EEMPTY);
	must_commit(s);
}

/* A --sync periodic store whose queue "q" holds item 0, committed. */
static saker_store *
periodic_with_one(saker_queue **q)
{
	saker_store *s = store_open_sync(SAKER_SYNC_PERIODIC);

	*q = queue(s, "q");
	ck_assert_int_eq(put(s, *q, 0), SAKER_OK);
	must_commit(s);
	return s;
}

/*
 * --sync periodic: the timer's sync() fsyncs the WAL.  When that fsync
 * fails the kernel may have dropped its pages, so nothing committed since
 * the last sync can be vouched for: sync() fails with "fsync of the WAL
 * failed", every later write gets the layer's "store is read-only after a
 * failed write", reads still work, and a reopen takes writes again.
 */
START_TEST(test_sqlite_periodic_wal_fsync_fails)
{
	saker_store *s;
	saker_queue *q;
	char got[8];
	int rc;

	s = periodic_with_one(&q);
	fail_syncs = 1;
	rc = saker_store_sync(s);
	fail_syncs = 0;
	ck_assert_int_eq(syncs_failed, 1);
	ck_assert_int_eq(rc, SAKER_EIO);
	says(s, "fsync of the WAL failed (");
	ck_assert_msg(strstr(saker_store_errmsg(s), "refusing writes until "
	    "restart") != NULL, "%s", saker_store_errmsg(s));
	ck_assert(saker_store_refuses_writes(s));

	ck_assert_int_eq(put(s, q, 1), SAKER_EREADONLY);
	says(s, "store is read-only after a failed write: fsync of the WAL "
	    "failed (");
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_REMOVE, 1000,
	    take_cb, got), SAKER_EREADONLY);
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_PEEK, 1000,
	    take_cb, got), SAKER_OK);
	ck_assert_str_eq(got, "it00000");
	(void)saker_store_commit(s);
	saker_store_close(s);

	s = store_open_sync(SAKER_SYNC_PERIODIC);
	ck_assert(!saker_store_refuses_writes(s));
	q = queue(s, "q");
	ck_assert_int_eq(put(s, q, 1), SAKER_OK);
	must_commit(s);
	take_all(s, q, 2);
	saker_store_close(s);
}
END_TEST

/* More than the journal holds before a checkpoint is due (512 KiB): the
 * commit of this batch checkpoints. */
#define NCKPT 600

/*
 * A store with item 0 committed, then a batch of NCKPT more whose commit
 * checkpoints with the next `writes` writes, `syncs` syncs and `reads`
 * reads failing: the commit succeeds all the same (the batch is durable
 * in the journal), the checkpoint is not counted, and the faults armed
 * were met (a read fault: at least one).  Returns the store and *q.
 */
static saker_store *
checkpoint_fails(int writes, int syncs, int reads, saker_queue **q)
{
	struct saker_store_stats st;
	saker_store *s = store_open();
	uint64_t before;
	int i;

	*q = queue(s, "q");
	ck_assert_int_eq(put(s, *q, 0), SAKER_OK);
	must_commit(s);
	for (i = 1; i <= NCKPT; i++)
		ck_assert_int_eq(put(s, *q, i), SAKER_OK);
	saker_store_get_stats(s, &st);
	before = st.checkpoints;
	fail_writes = writes;
	fail_syncs = syncs;
	fail_reads = reads;
	ck_assert_msg(saker_store_commit(s) == SAKER_OK, "commit: %s",
	    saker_store_errmsg(s));
	fail_writes = fail_syncs = fail_reads = 0;
	ck_assert_msg(writes_failed == writes && syncs_failed == syncs &&
	    (reads == 0) == (reads_failed == 0), "the checkpoint met %d of %d "
	    "write, %d of %d sync and %d read faults", writes_failed, writes,
	    syncs_failed, syncs, reads_failed);
	saker_store_get_stats(s, &st);
	ck_assert_uint_eq(st.checkpoints, before);
	return s;
}

/* Close s, reopen: it takes writes, and "q" holds items 0 .. n - 1. */
static void
reopen_holds(saker_store *s, int n)
{
	saker_queue *q;

	(void)saker_store_commit(s);
	saker_store_close(s);
	s = store_open();
	q = queue(s, "q");
	ck_assert(saker_store_takes_writes(s));
	ck_assert_uint_eq(items(s, q), (uint64_t)n);
	take_all(s, q, n);
	saker_store_close(s);
}

/*
 * A checkpoint whose write to the WAL fails: the batch was acknowledged
 * (its journal record is durable), the long transaction is rebuilt from
 * the journal, and the store goes on taking writes; nothing acknowledged
 * is lost, and a later checkpoint (the close's) succeeds.
 */
START_TEST(test_sqlite_checkpoint_write_fails)
{
	saker_queue *q;
	saker_store *s = checkpoint_fails(1, 0, 0, &q);

	ck_assert(saker_store_takes_writes(s));
	ck_assert_uint_eq(items(s, q), NCKPT + 1);
	ck_assert_int_eq(put(s, q, NCKPT + 1), SAKER_OK);
	must_commit(s);
	reopen_holds(s, NCKPT + 2);
}
END_TEST

/*
 * A checkpoint whose fsync fails: what SQLite wrote may or may not be on
 * the disk, so the store refuses writes ("store is read-only after a
 * failed write: checkpoint: ..."), still reads, and the reopen replays
 * the journal: every acknowledged item is there, once.
 */
START_TEST(test_sqlite_checkpoint_fsync_fails)
{
	saker_queue *q;
	saker_store *s = checkpoint_fails(0, 1, 0, &q);
	char got[8];

	ck_assert(saker_store_refuses_writes(s));
	ck_assert_int_eq(put(s, q, NCKPT + 1), SAKER_EREADONLY);
	says(s, "store is read-only after a failed write: checkpoint: ");
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_PEEK, 1000,
	    take_cb, got), SAKER_OK);
	ck_assert_str_eq(got, "it00000");
	reopen_holds(s, NCKPT + 1);
}
END_TEST

/*
 * A batch lost inside commit() (store.h, REFUSALS): with --sync periodic
 * a commit is SQLite's COMMIT, which writes the batch's pages to the WAL;
 * when that write fails SQLite rolls the transaction back and the driver
 * reports the batch lost during the commit.  The commit fails, the
 * batch's counters are undone, and the loss ends with that commit: the
 * next batch is taken, and a reopen finds the batches before and after,
 * not the lost one.
 */
START_TEST(test_sqlite_commit_write_fails)
{
	saker_store *s;
	saker_queue *q;
	char got[8];
	int rc;

	s = periodic_with_one(&q);
	ck_assert_int_eq(put(s, q, 1), SAKER_OK);
	ck_assert_uint_eq(items(s, q), 2);
	fail_writes = 1;
	rc = saker_store_commit(s);
	fail_writes = 0;
	ck_assert_int_eq(writes_failed, 1);
	ck_assert_msg(rc == SAKER_EIO, "commit: %d %s", rc,
	    saker_store_errmsg(s));
	says(s, "commit: ");
	ck_assert_uint_eq(items(s, q), 1);
	ck_assert(saker_store_takes_writes(s));
	ck_assert(!saker_store_refuses_writes(s));

	ck_assert_msg(put(s, q, 2) == SAKER_OK, "the next batch: %s",
	    saker_store_errmsg(s));
	must_commit(s);
	ck_assert_uint_eq(items(s, q), 2);
	saker_store_close(s);

	s = store_open_sync(SAKER_SYNC_PERIODIC);
	q = queue(s, "q");
	ck_assert_uint_eq(items(s, q), 2);
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_REMOVE, 1000,
	    take_cb, got), SAKER_OK);
	ck_assert_str_eq(got, "it00000");
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_REMOVE, 1000,
	    take_cb, got), SAKER_OK);
	ck_assert_str_eq(got, "it00002");
	must_commit(s);
	saker_store_close(s);
}
END_TEST

struct names {
	char list[256];
};

static int
name_cb(void *arg, const char *name, size_t len)
{
	struct names *n = arg;
	size_t at = strlen(n->list);

	snprintf(n->list + at, sizeof(n->list) - at, "%s%.*s", at ? "," : "",
	    (int)len, name);
	return 0;
}

/*
 * The queues of a lost batch go back too: a queue the batch made is not
 * there (its handle is dead, a lookup does not find it, the listing does
 * not name it), a queue it deleted is back with its items; the next batch
 * can make the same queue again.
 */
START_TEST(test_sqlite_batch_lost_queues)
{
	saker_store *s;
	saker_queue *big, *small, *made, *q;
	struct names n;

	s = cold_store(&big, &small);
	made = queue(s, "made");
	ck_assert_int_eq(put(s, made, 7), SAKER_OK);
	ck_assert_int_eq(saker_store_queue_delete(s, small), SAKER_OK);
	ck_assert_int_eq(saker_store_queue_open(s, "small", 5, false, NULL, &q),
	    SAKER_ENOTFOUND);
	lose_batch(s, big);
	ck_assert_int_eq(saker_store_commit(s), SAKER_EIO);

	ck_assert_int_eq(saker_store_queue_open(s, "made", 4, false, NULL, &q),
	    SAKER_ENOTFOUND);
	ck_assert_int_eq(saker_store_queue_open(s, "small", 5, false, NULL,
	    &small), SAKER_OK);
	ck_assert_uint_eq(items(s, small), 1);
	memset(&n, 0, sizeof(n));
	ck_assert_int_eq(saker_store_queues(s, name_cb, &n), SAKER_OK);
	ck_assert_msg(strstr(n.list, "made") == NULL && strstr(n.list, "small")
	    != NULL && strstr(n.list, "big") != NULL, "queues: %s", n.list);

	made = queue(s, "made");
	ck_assert_int_eq(put(s, made, 0), SAKER_OK);
	must_commit(s);
	saker_store_close(s);
	s = store_open();
	made = queue(s, "made");
	small = queue(s, "small");
	ck_assert_uint_eq(items(s, made), 1);
	take_all(s, made, 1);
	take_all(s, small, 1);
	saker_store_close(s);
}
END_TEST

static int
iter_count(void *arg, const struct saker_item *it)
{
	(void)it;
	(*(int *)arg)++;
	return 0;
}

/* Is the store stale, every call refused with the layer's "store failed
 * and must be reopened: WHY", reads too? */
static void
stale_at(int line, saker_store *s, saker_queue *q, const char *why)
{
	char head[512], got[8];
	int n = 0;

	snprintf(head, sizeof(head), "store failed and must be reopened: %s",
	    why);
	ck_assert_msg(saker_store_is_stale(s), "line %d: not stale: %s", line,
	    saker_store_errmsg(s));
	ck_assert_int_eq(put(s, q, 99), SAKER_EIO);
	says_at(line, s, head);
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_PEEK, 1000, take_cb,
	    got), SAKER_EIO);
	says_at(line, s, head);
	ck_assert_int_eq(saker_store_iterate(s, q, iter_count, &n), SAKER_EIO);
	ck_assert_int_eq(n, 0);
}
#define stale(s, q, why) stale_at(__LINE__, (s), (q), (why))

/*
 * A checkpoint fails (its WAL write), and so does the rebuild of the long
 * transaction from the journal (every read fails): SQLite holds only what
 * the last checkpoint wrote, not the batches acknowledged since, so the
 * store cannot answer reads either (store.h, REFUSALS: stale) -- a peek
 * must not say "empty" about a queue of 601 acknowledged items.  A reopen
 * replays the journal: every item is there.
 */
START_TEST(test_sqlite_checkpoint_rebuild_fails)
{
	saker_queue *q;
	/* every read fails, from the checkpoint on */
	saker_store *s = checkpoint_fails(1, 0, 1000000, &q);

	stale(s, q, "checkpoint failed and replaying the journal failed: ");
	reopen_holds(s, NCKPT + 1);
}
END_TEST

/*
 * SQLite rolls the long transaction back (a read fails mid-batch) and the
 * rebuild from the journal fails too (every read fails): the batch
 * acknowledged since the last checkpoint is not in SQLite, so the store
 * is stale, reads refused; a reopen replays it.
 */
START_TEST(test_sqlite_rebuild_fails)
{
	saker_store *s;
	saker_queue *big, *small;
	char got[8];
	int code = SAKER_OK, taken;

	s = cold_store(&big, &small);
	ck_assert_int_eq(put(s, small, 1), SAKER_OK);
	must_commit(s);		/* in the journal only */
	fail_reads = 1000000;
	for (taken = 0; taken < NBIG && code == SAKER_OK; taken++)
		code = saker_store_take(s, big, SAKER_TAKE_REMOVE, 1000, take_cb,
		    got);
	fail_reads = 0;
	ck_assert_msg(code == SAKER_EIO, "take: %d %s", code,
	    saker_store_errmsg(s));
	stale(s, small, "the transaction since the last checkpoint was rolled "
	    "back and replaying the journal failed: ");
	(void)saker_store_commit(s);
	saker_store_close(s);

	s = store_open();
	big = queue(s, "big");
	small = queue(s, "small");
	ck_assert_uint_eq(items(s, big), NBIG);
	take_all(s, small, 2);
	saker_store_close(s);
}
END_TEST

/*
 * A queue delete that fails (a read of the queue's pages fails, SQLite
 * rolls the batch back): the queue is still there, with the items it
 * had at the last commit (the batch's put into it undone), its handle
 * still good; the commit says the batch was rolled back, and the next
 * batch takes from it.
 */
START_TEST(test_sqlite_delete_fails)
{
	saker_store *s;
	saker_queue *big, *small, *q;
	char got[8];
	int rc;

	s = cold_store(&big, &small);
	ck_assert_int_eq(put(s, big, NBIG), SAKER_OK);
	ck_assert_uint_eq(items(s, big), NBIG + 1);
	fail_reads = 1;
	rc = saker_store_queue_delete(s, big);
	fail_reads = 0;
	ck_assert_int_eq(reads_failed, 1);
	ck_assert_msg(rc == SAKER_EIO, "delete: %d %s", rc,
	    saker_store_errmsg(s));
	ck_assert_uint_eq(items(s, big), NBIG);
	ck_assert_int_eq(saker_store_queue_open(s, "big", 3, false, NULL, &q),
	    SAKER_OK);
	ck_assert_ptr_eq(q, big);
	ck_assert_int_eq(saker_store_commit(s), SAKER_EIO);
	says(s, "batch rolled back: ");

	memset(got, 0, sizeof(got));
	ck_assert_int_eq(saker_store_take(s, big, SAKER_TAKE_REMOVE, 1000,
	    take_cb, got), SAKER_OK);
	ck_assert_str_eq(got, "it00000");
	must_commit(s);
	saker_store_close(s);
	s = store_open();
	big = queue(s, "big");
	ck_assert_uint_eq(items(s, big), NBIG - 1);
	saker_store_close(s);
}
END_TEST

int
main(void)
{
	Suite *su = suite_create("sqlite_faults");
	TCase *tc = tcase_create("sqlite");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_sqlite_batch_lost_midway);
	tcase_add_test(tc, test_sqlite_commit_write_fails);
	tcase_add_test(tc, test_sqlite_batch_lost_queues);
	tcase_add_test(tc, test_sqlite_delete_fails);
	tcase_add_test(tc, test_sqlite_checkpoint_rebuild_fails);
	tcase_add_test(tc, test_sqlite_rebuild_fails);
	tcase_add_test(tc, test_sqlite_periodic_wal_fsync_fails);
	tcase_add_test(tc, test_sqlite_checkpoint_write_fails);
	tcase_add_test(tc, test_sqlite_checkpoint_fsync_fails);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
