/* check_longtxn.c -- the long-transaction engine (backends/longtxn.h)
 * over a toy database: when a checkpoint is due, what a checkpoint and a
 * failed one do, rebuilding the long transaction from the journal, and the
 * replay at open.  A batch writes one letter; the database's committed
 * state and its long transaction are strings, so every test can say
 * exactly which batches each holds.  The drivers' own tests (check_store,
 * check_faults, check_crash, check_powerloss) test the same engine under
 * LMDB and SQLite. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "saker/store.h"
#include "clock.h"
#include "longtxn.h"

struct toy {
	char committed[64];	/* the data file */
	char txn[64];		/* the long transaction */
	bool open;
	uint64_t committed_seq;	/* its "journal_seq" */
	int fail_begin;		/* ops fail while these are set */
	int fail_commit;
	bool commit_fatal;
	int begins, commits;
};

static int
toy_begin(void *arg)
{
	struct toy *t = arg;

	ck_assert(!t->open);
	if (t->fail_begin)
		return t->fail_begin;
	t->begins++;
	strcpy(t->txn, t->committed);
	t->open = true;
	return 0;
}

static int
toy_apply(void *arg, const unsigned char *p, size_t len)
{
	struct toy *t = arg;

	ck_assert(t->open);
	ck_assert_uint_eq(len, 1);
	strncat(t->txn, (const char *)p, 1);
	return 0;
}

static int
toy_commit(void *arg, uint64_t seq, bool *fatal)
{
	struct toy *t = arg;

	ck_assert(t->open);
	t->open = false;
	if (t->fail_commit) {
		*fatal = t->commit_fatal;
		return t->fail_commit;
	}
	t->commits++;
	strcpy(t->committed, t->txn);
	t->committed_seq = seq;
	return 0;
}

static void
toy_abort(void *arg)
{
	struct toy *t = arg;

	t->open = false;
	t->txn[0] = '\0';
}

static const struct ltx_ops toy_ops = {
	.begin = toy_begin, .apply = toy_apply, .commit = toy_commit,
	.abort = toy_abort,
};

static char dir[64], path[128];
static struct toy db;
static struct ltx lt;

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/check_longtxn.XXXXXX");
	ck_assert(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/journal", dir);
	memset(&db, 0, sizeof(db));
	ltx_init(&lt, &toy_ops, &db, 1 << 20, (uint64_t)60 * 1000 * 1000 * 1000);
	ck_assert_int_eq(ltx_open(&lt, path, true, 42, false, 0), 0);
}

static void
teardown(void)
{
	ltx_close(&lt);
	unlink(path);
	rmdir(dir);
}

/* One batch: letter c into the long transaction (begun when none is
 * open) and into the journal. */
static void
batch(char c)
{
	unsigned char *p;

	if (!db.open)
		ck_assert_int_eq(toy_begin(&db), 0);
	strncat(db.txn, &c, 1);
	ck_assert_int_eq(lj_reserve(&lt.j, 1, &p), 0);
	*p = (unsigned char)c;
	ck_assert_int_eq(ltx_write(&lt, false), SAKER_OK);
}

START_TEST(test_due_bytes)
{
	lt.max_bytes = 3 * (LJ_HDR + 1);
	batch('a');
	batch('b');
	ck_assert(!ltx_due(&lt, saker_mono_ns()));
	batch('c');
	ck_assert(ltx_due(&lt, saker_mono_ns()));
}
END_TEST

START_TEST(test_due_age)
{
	uint64_t now = saker_mono_ns();

	lt.max_ns = 1000000;	/* 1 ms */
	/* no batch since the checkpoint: nothing is old, however long */
	ck_assert(!ltx_due(&lt, now + 1000000000));
	batch('a');
	ck_assert(!ltx_due(&lt, lt.first_ns + 999999));
	ck_assert(ltx_due(&lt, lt.first_ns + 1000000));
	batch('b');	/* the age is the oldest batch's */
	ck_assert(ltx_due(&lt, lt.first_ns + 1000000));
}
END_TEST

START_TEST(test_checkpoint)
{
	bool fatal, rebuilt;

	batch('a');
	batch('b');
	batch('c');
	ck_assert_int_eq(ltx_checkpoint(&lt, &fatal, &rebuilt), 0);
	ck_assert_str_eq(db.committed, "abc");
	ck_assert_uint_eq(db.committed_seq, 3);
	ck_assert_uint_eq(lt.ckpt_seq, 3);
	ck_assert_uint_eq(lt.j.off, 0);	/* the journal starts again */
	ck_assert_uint_eq(lt.checkpoints, 1);
	ck_assert_uint_eq(lt.first_ns, 0);
	ck_assert(!ltx_due(&lt, saker_mono_ns() + lt.max_ns));
	/* nothing since: no commit, the long transaction only ends */
	ck_assert_int_eq(toy_begin(&db), 0);
	ck_assert_int_eq(ltx_checkpoint(&lt, &fatal, &rebuilt), 0);
	ck_assert(!db.open);
	ck_assert_int_eq(db.commits, 1);
	ck_assert_uint_eq(lt.checkpoints, 1);
	/* the next batch is number 4, at the journal's start */
	batch('d');
	ck_assert_uint_eq(lt.j.seq, 4);
	ck_assert_uint_eq(lt.j.off, LJ_HDR + 1);
}
END_TEST

/* A failed checkpoint: the long transaction comes back from the journal
 * with every batch, the next try waits, the driver's *fatal is passed
 * on; a later one commits everything. */
START_TEST(test_checkpoint_fails)
{
	bool fatal, rebuilt;
	uint64_t now;

	lt.max_bytes = 1;
	batch('a');
	ck_assert_int_eq(ltx_checkpoint(&lt, &fatal, &rebuilt), 0);
	batch('b');
	batch('c');
	db.fail_commit = 28;
	now = saker_mono_ns();
	ck_assert_int_eq(ltx_checkpoint(&lt, &fatal, &rebuilt), 28);
	ck_assert(!fatal);
	ck_assert(rebuilt);
	ck_assert(db.open);
	ck_assert_str_eq(db.txn, "abc");
	ck_assert_str_eq(db.committed, "a");
	ck_assert(lt.failing);
	ck_assert(!ltx_due(&lt, saker_mono_ns()));	/* held */
	ck_assert_uint_ge(lt.hold_ns, now + LTX_RETRY_NS);
	ck_assert(!ltx_due(&lt, lt.hold_ns - 1));
	ck_assert(ltx_due(&lt, lt.hold_ns));
	db.commit_fatal = true;
	ck_assert_int_eq(ltx_checkpoint(&lt, &fatal, &rebuilt), 28);
	ck_assert(fatal);
	ck_assert(rebuilt);
	ck_assert_str_eq(db.txn, "abc");
	db.fail_commit = 0;
	batch('d');
	ck_assert_int_eq(ltx_checkpoint(&lt, &fatal, &rebuilt), 0);
	ck_assert_str_eq(db.committed, "abcd");
	ck_assert_uint_eq(lt.checkpoints, 2);
	ck_assert(!lt.failing);
	ck_assert_uint_eq(lt.hold_ns, 0);
}
END_TEST

/* A batch that reached the long transaction but not the journal is taken
 * out by a rebuild; the acknowledged ones stay. */
START_TEST(test_rebuild_drops_unjournalled)
{
	unsigned char *p;

	batch('a');
	batch('b');
	strcat(db.txn, "x");	/* a batch whose record was never written */
	ck_assert_int_eq(lj_reserve(&lt.j, 1, &p), 0);
	*p = 'x';
	ck_assert_int_eq(ltx_rebuild(&lt), 0);
	ck_assert(db.open);
	ck_assert_str_eq(db.txn, "ab");
	ck_assert_uint_eq(lt.j.len, 0);
	ck_assert_uint_eq(lt.j.seq, 2);
}
END_TEST

/* When even the rebuild fails the engine says why and keeps the journal's
 * position (the next open replays it all). */
START_TEST(test_rebuild_fails)
{
	uint64_t off;

	batch('a');
	batch('b');
	off = lt.j.off;
	db.fail_begin = 5;
	ck_assert_int_eq(ltx_rebuild(&lt), LTX_EBEGIN);
	ck_assert(!db.open);
	ck_assert(lt.err[0] != '\0');
	ck_assert_uint_eq(lt.j.seq, 2);
	ck_assert_uint_eq(lt.j.off, off);
}
END_TEST

/* After a crash: the batches beyond the data file's journal_seq are
 * replayed, the read-only opener sees them pending, another store's
 * journal is not replayed. */
START_TEST(test_replay_at_open)
{
	bool fatal, rebuilt, pending;

	batch('a');
	batch('b');
	batch('c');
	ltx_close(&lt);	/* a crash: no checkpoint */

	memset(&db, 0, sizeof(db));	/* the data file holds none */
	ck_assert_int_eq(ltx_open(&lt, path, false, 42, false, 0), 0);
	ck_assert_int_eq(ltx_pending(&lt, &pending), 0);
	ck_assert(pending);
	/* a data file that holds them (the journal restarts after each
	 * checkpoint, so its records are stale then) */
	ck_assert_int_eq(ltx_open(&lt, path, false, 42, false, 3), 0);
	ck_assert_int_eq(ltx_pending(&lt, &pending), 0);
	ck_assert(!pending);
	ck_assert_int_eq(ltx_open(&lt, path, false, 43, false, 0), 0);
	ck_assert_int_eq(ltx_pending(&lt, &pending), 0);
	ck_assert(!pending);	/* another store's records never pass */

	ck_assert_int_eq(ltx_open(&lt, path, true, 42, false, 0), 0);
	ck_assert_int_eq(ltx_replay(&lt), 0);
	ck_assert(db.open);
	ck_assert_str_eq(db.txn, "abc");
	ck_assert_int_eq(ltx_checkpoint(&lt, &fatal, &rebuilt), 0);
	ck_assert_str_eq(db.committed, "abc");
	ck_assert_uint_eq(db.committed_seq, 3);
}
END_TEST


/* One batch handed to the flush thread: ltx_write_start(), and the
 * batch after it gathers into the other buffer meanwhile. */
static void
batch_start(char c)
{
	unsigned char *p;
	size_t n;

	if (!db.open)
		ck_assert_int_eq(toy_begin(&db), 0);
	n = strlen(db.txn);
	db.txn[n] = c;
	db.txn[n + 1] = '\0';
	ck_assert_int_eq(lj_reserve(&lt.j, 1, &p), 0);
	*p = (unsigned char)c;
	ck_assert_int_eq(ltx_write_start(&lt), SAKER_OK);
	ck_assert(lt.j.inflight);
}

static void
fd_ready(void)
{
	struct pollfd pfd = { .fd = ltx_flush_fd(&lt), .events = POLLIN };

	ck_assert_int_ge(pfd.fd, 0);
	ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
}

/* Records written by the flush thread are the journal's, in order: the
 * position moves at finish, not at start; a second start while one is in
 * flight is refused; a batch gathered meanwhile is the next record. */
START_TEST(test_async_write)
{
	bool fatal, rebuilt;
	unsigned char *p;
	uint64_t off, fsyncs;

	batch('a');
	off = lt.j.off;
	fsyncs = lt.j.fsyncs;
	batch_start('b');
	ck_assert_uint_eq(lt.j.seq, 1);		/* not yet */
	ck_assert_uint_eq(lt.j.off, off);
	/* the next batch gathers while b flies */
	strcat(db.txn, "c");
	ck_assert_int_eq(lj_reserve(&lt.j, 1, &p), 0);
	*p = 'c';
	ck_assert_int_eq(ltx_write_start(&lt), SAKER_EIO);	/* EBUSY */
	ck_assert_ptr_nonnull(strstr(lt.err, "in flight"));
	fd_ready();
	ck_assert_int_eq(ltx_write_finish(&lt), SAKER_OK);
	ck_assert(!lt.j.inflight);
	ck_assert_uint_eq(lt.j.seq, 2);
	ck_assert_uint_gt(lt.j.off, off);
	/* c's payload survived the hand-over of b's buffer */
	ck_assert_uint_eq(lt.j.len, 1);
	ck_assert_int_eq(ltx_write_start(&lt), SAKER_OK);
	ck_assert_int_eq(ltx_write_finish(&lt), SAKER_OK);
	ck_assert_uint_eq(lt.j.seq, 3);
	ck_assert_uint_eq(lt.j.fsyncs, fsyncs + 2);	/* one per record */
	/* nothing in flight: finishing is a no-op */
	ck_assert_int_eq(ltx_write_finish(&lt), SAKER_OK);
	/* the journal holds a, b, c in order: a rebuild replays them */
	ck_assert_int_eq(ltx_rebuild(&lt), 0);
	ck_assert_str_eq(db.txn, "abc");
	ck_assert_int_eq(ltx_checkpoint(&lt, &fatal, &rebuilt), 0);
	ck_assert_str_eq(db.committed, "abc");
}
END_TEST

/* Close with a record in flight waits for it: it is there at the next
 * open. */
START_TEST(test_async_close)
{
	batch('a');
	batch_start('b');
	ltx_close(&lt);
	memset(&db, 0, sizeof(db));
	ck_assert_int_eq(ltx_open(&lt, path, true, 42, false, 0), 0);
	ck_assert_int_eq(ltx_replay(&lt), 0);
	ck_assert_str_eq(db.txn, "ab");
}
END_TEST

static int
eio(int fd)
{
	(void)fd;
	errno = EIO;
	return -1;
}

/* The thread's fdatasync fails: in doubt, the position stays (the record
 * may be in the file: a reopen decides), the reason says fdatasync. */
START_TEST(test_async_fsync_fails)
{
	int (*real)(int) = lj_fdatasync;
	uint64_t off;

	batch('a');
	off = lt.j.off;
	lj_fdatasync = eio;
	batch_start('b');
	fd_ready();
	ck_assert_int_eq(ltx_write_finish(&lt), SAKER_EINDOUBT);
	lj_fdatasync = real;
	ck_assert_ptr_nonnull(strstr(lt.err, "fdatasync"));
	ck_assert_uint_eq(lt.j.seq, 1);
	ck_assert_uint_eq(lt.j.off, off);
	ck_assert(!lt.j.inflight);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("longtxn");
	TCase *tc = tcase_create("engine");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_due_bytes);
	tcase_add_test(tc, test_due_age);
	tcase_add_test(tc, test_checkpoint);
	tcase_add_test(tc, test_checkpoint_fails);
	tcase_add_test(tc, test_rebuild_drops_unjournalled);
	tcase_add_test(tc, test_rebuild_fails);
	tcase_add_test(tc, test_replay_at_open);
	tcase_add_test(tc, test_async_write);
	tcase_add_test(tc, test_async_close);
	tcase_add_test(tc, test_async_fsync_fails);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
