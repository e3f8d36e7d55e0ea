/* check_layer.c -- the layer's per-queue counters (store.h, COUNTERS):
 * kept from what the driver reports, put back when a batch is lost,
 * counted in the store again on a shared one.  The
 * memory driver never fails a commit, so its vtable is copied here with a
 * commit() that fails on demand: what is tested is the layer's undo.
 * Then the copies the layer makes of a driver's bytes. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "saker/store.h"

extern const struct saker_store_driver saker_store_memory;

static struct saker_store_driver faildrv;
static int fail_next;	/* the next commit() fails with this (0: none) */

static int
fail_commit(saker_store *s)
{
	int rc = fail_next;

	fail_next = 0;
	return rc != 0 ? rc : saker_store_memory.commit(s);
}

static saker_store *
open_failing(void)
{
	struct saker_store_opts o;
	saker_store *s;
	char err[256];

	memset(&o, 0, sizeof(o));
	o.create = true;
	ck_assert_int_eq(saker_store_open("memory", &o, &s, err, sizeof(err)),
	    SAKER_OK);
	faildrv = saker_store_memory;
	faildrv.commit = fail_commit;
	s->driver = &faildrv;
	return s;
}

static void
put(saker_store *s, saker_queue *q, size_t len, int64_t due)
{
	static const char data[64];
	struct saker_item it;

	memset(&it, 0, sizeof(it));
	it.len = len;
	it.data = data;
	it.due_ms = due;
	ck_assert_int_eq(saker_store_put(s, q, &it, 1000), SAKER_OK);
}

static int
accept_cb(void *arg, const struct saker_item *it)
{
	*(uint64_t *)arg = it->id;
	return 0;
}

#define ck_counts(s, q, i, b, d, o) do { \
	struct saker_queue_stats st_; \
	memset(&st_, 0, sizeof(st_)); \
	ck_assert_int_eq(saker_store_queue_stats((s), (q), &st_), SAKER_OK); \
	ck_assert_uint_eq(st_.items, (i)); \
	ck_assert_uint_eq(st_.bytes, (b)); \
	ck_assert_uint_eq(st_.delayed_items, (d)); \
	ck_assert_uint_eq(st_.open_items, (o)); \
} while (0)

/* A failed commit puts every changed queue's counters back. */
START_TEST(test_failed_commit_restores)
{
	saker_store *s = open_failing();
	saker_queue *q, *r;
	uint64_t id;

	ck_assert_int_eq(saker_store_queue_open(s, "q", 1, true, NULL, &q),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_queue_open(s, "r", 1, true, NULL, &r),
	    SAKER_OK);
	put(s, q, 5, 0);
	put(s, q, 5, 0);
	put(s, q, 5, 5000);	/* delayed */
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	ck_counts(s, q, 2, 10, 1, 0);

	/* a batch over both queues: a put, an open item, a move */
	put(s, q, 7, 0);
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_OPEN, 1000,
	    accept_cb, &id), SAKER_OK);
	ck_assert_int_eq(saker_store_move(s, q, id, r), SAKER_OK);
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_OPEN, 1000,
	    accept_cb, &id), SAKER_OK);
	ck_counts(s, q, 1, 7, 1, 1);
	ck_counts(s, r, 1, 5, 0, 0);
	fail_next = SAKER_EIO;
	ck_assert_int_eq(saker_store_commit(s), SAKER_EIO);
	ck_counts(s, q, 2, 10, 1, 0);
	ck_counts(s, r, 0, 0, 0, 0);

	/* the next batch starts from there, and commits */
	put(s, r, 3, 0);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	ck_counts(s, r, 1, 3, 0, 0);
	fail_next = SAKER_EINDOUBT;	/* "maybe done" rolls back in memory too */
	put(s, r, 3, 0);
	ck_assert_int_eq(saker_store_commit(s), SAKER_EINDOUBT);
	ck_counts(s, r, 1, 3, 0, 0);
	saker_store_close(s);
}
END_TEST

/* A flush is counted by the layer (and undone with its batch); a queue
 * deleted in a failed batch is forgotten, not written to. */
START_TEST(test_flush_and_delete)
{
	saker_store *s = open_failing();
	saker_queue *q, *d;

	ck_assert_int_eq(saker_store_queue_open(s, "q", 1, true, NULL, &q),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_queue_open(s, "d", 1, true, NULL, &d),
	    SAKER_OK);
	put(s, q, 4, 0);
	put(s, q, 4, 9000);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	ck_assert_int_eq(saker_store_queue_flush(s, q), SAKER_OK);
	ck_counts(s, q, 0, 0, 0, 0);
	put(s, d, 4, 0);
	ck_assert_int_eq(saker_store_queue_delete(s, d), SAKER_OK);
	fail_next = SAKER_EIO;
	ck_assert_int_eq(saker_store_commit(s), SAKER_EIO);
	ck_counts(s, q, 1, 4, 1, 0);
	saker_store_close(s);
}
END_TEST

/* A driver that lost its batch outside commit() says so: the same undo;
 * the rest of the batch is refused with the driver's reason, the commit
 * ends it without reaching the driver. */
START_TEST(test_batch_lost)
{
	static const char data[4];
	struct saker_item it = { .data = data, .len = 4 };
	saker_store *s = open_failing();
	saker_queue *q;

	ck_assert_int_eq(saker_store_queue_open(s, "q", 1, true, NULL, &q),
	    SAKER_OK);
	put(s, q, 2, 0);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	put(s, q, 2, 0);
	ck_counts(s, q, 2, 4, 0, 0);
	saker_store_lose_batch_why(s, SAKER_EIO, "the session went");
	ck_counts(s, q, 1, 2, 0, 0);
	ck_assert_int_eq(saker_store_put(s, q, &it, 1000), SAKER_EIO);
	ck_assert_str_eq(saker_store_errmsg(s), "memory: this batch was "
	    "rolled back (the session went); it ends at the next commit");
	fail_next = SAKER_ENOMEM;	/* the driver's commit is not called */
	ck_assert_int_eq(saker_store_commit(s), SAKER_EIO);
	ck_assert_str_eq(saker_store_errmsg(s), "memory: batch rolled "
	    "back: the session went");
	fail_next = 0;
	/* the queue may change again, in a batch of its own */
	put(s, q, 6, 0);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	ck_counts(s, q, 2, 8, 0, 0);
	saker_store_close(s);
}
END_TEST

/* What close() of the failing driver found: was a batch still lost? */
static int lost_at_close = -1;

static void
close_noting(saker_store *s)
{
	lost_at_close = saker_store_is_lost(s);
	saker_store_memory.close(s);
}

/* A batch lost and never committed ends at the close, as at a commit:
 * the driver's close() writes what it writes after a commit (PostgreSQL
 * hands its open items back) and is not refused by the lost batch. */
START_TEST(test_batch_lost_close)
{
	saker_store *s = open_failing();
	saker_queue *q;

	faildrv.close = close_noting;
	ck_assert_int_eq(saker_store_queue_open(s, "q", 1, true, NULL, &q),
	    SAKER_OK);
	put(s, q, 2, 0);
	saker_store_lose_batch(s, SAKER_EIO);
	ck_assert(saker_store_is_lost(s));
	lost_at_close = -1;
	saker_store_close(s);
	ck_assert_int_eq(lost_at_close, 0);
}
END_TEST

/* A shared store: the layer counts a queue in the store again once per
 * tick when its counters are read (other brokers change it too), never in
 * a batch that changed it, and when the driver asks. */
static uint64_t other_items;	/* what "the database" holds */
static int counts_asked;

static int
count_hook(saker_store *s, saker_queue *q, struct saker_queue_stats *st)
{
	(void)s;
	(void)q;
	counts_asked++;
	st->items = other_items;
	st->bytes = other_items * 10;
	return SAKER_OK;
}

START_TEST(test_shared_recount)
{
	saker_store *s = open_failing();
	saker_queue *q;

	faildrv.caps = SAKER_CAP_SHARED;
	faildrv.queue_count = count_hook;
	counts_asked = 0;
	other_items = 100;
	ck_assert_int_eq(saker_store_queue_open(s, "q", 1, true, NULL, &q),
	    SAKER_OK);
	ck_counts(s, q, 100, 1000, 0, 0);	/* counted at the first read */
	ck_assert_int_eq(counts_asked, 1);
	put(s, q, 10, 0);			/* this broker's put: at once */
	ck_counts(s, q, 101, 1010, 0, 0);
	ck_assert_int_eq(counts_asked, 1);	/* no round trip */
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	other_items = 150;			/* the others put 49 */
	ck_counts(s, q, 101, 1010, 0, 0);	/* until the next tick */
	ck_assert_int_eq(saker_store_tick(s, 2000), SAKER_OK);
	put(s, q, 10, 0);
	ck_counts(s, q, 102, 1020, 0, 0);	/* changed in this batch: kept */
	ck_assert_int_eq(counts_asked, 1);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	other_items = 151;
	ck_counts(s, q, 151, 1510, 0, 0);	/* counted again, once */
	ck_counts(s, q, 151, 1510, 0, 0);
	ck_assert_int_eq(counts_asked, 2);
	other_items = 160;
	saker_store_recount(s, q);		/* the driver asks */
	ck_counts(s, q, 160, 1600, 0, 0);
	ck_assert_int_eq(counts_asked, 3);
	saker_store_close(s);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The layer copies a driver's bytes before it writes: a damaged item's
 * (saker_store_quarantine) and an expired one's (saker_store_expired) may
 * be a cursor's page or a statement's column, which the driver's next
 * write (the put of the copy) overwrites.  This put scribbles over
 * `scratch`, the "driver's" bytes, before it stores the item. */

static char scratch[16];

static int
scribble_put(saker_store *s, saker_queue *q, const struct saker_item *it,
    int64_t now_ms)
{
	memset(scratch, 'X', sizeof(scratch));
	return saker_store_memory.put(s, q, it, now_ms);
}

static int
data_cb(void *arg, const struct saker_item *it)
{
	char *buf = arg;

	ck_assert_uint_lt(it->len, 16);
	memcpy(buf, it->data, it->len);
	buf[it->len] = '\0';
	return 0;
}

START_TEST(test_copies_driver_bytes)
{
	saker_store *s = open_failing();
	saker_queue *q, *dq, *t;
	struct saker_item it;
	char msg[256], got[16];
	bool routed = false;

	faildrv.put = scribble_put;
	ck_assert_int_eq(saker_store_queue_open(s, "q", 1, true, NULL, &q),
	    SAKER_OK);
	memset(&it, 0, sizeof(it));
	memcpy(scratch, "bytes", 5);
	it.data = scratch;
	it.len = 5;
	ck_assert_int_eq(saker_store_quarantine(s, q, "q", 1, 7, &it, 1000,
	    msg, sizeof(msg)), SAKER_OK);
	ck_assert_int_eq(saker_store_queue_open(s, "q_damaged", 9, false, NULL,
	    &dq), SAKER_OK);
	ck_assert_int_eq(saker_store_take(s, dq, SAKER_TAKE_REMOVE, 1000,
	    data_cb, got), SAKER_OK);
	ck_assert_str_eq(got, "bytes");

	ck_assert_int_eq(saker_store_keep_expire_to(s, q, "t", 1), SAKER_OK);
	memcpy(scratch, "aged", 4);
	it.len = 4;
	it.expires_ms = 500;
	ck_assert_int_eq(saker_store_expired(s, q, &it, 1000, &routed),
	    SAKER_OK);
	ck_assert(routed);
	ck_assert_int_eq(saker_store_queue_open(s, "t", 1, false, NULL, &t),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_take(s, t, SAKER_TAKE_REMOVE, 1000,
	    data_cb, got), SAKER_OK);
	ck_assert_str_eq(got, "aged");
	saker_store_close(s);
}
END_TEST

int
main(void)
{
	Suite *su = suite_create("layer");
	TCase *tc = tcase_create("counters");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_failed_commit_restores);
	tcase_add_test(tc, test_flush_and_delete);
	tcase_add_test(tc, test_batch_lost);
	tcase_add_test(tc, test_batch_lost_close);
	tcase_add_test(tc, test_shared_recount);
	suite_add_tcase(su, tc);
	tc = tcase_create("copies");
	tcase_add_test(tc, test_copies_driver_bytes);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
