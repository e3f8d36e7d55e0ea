/* check_history.c -- the console's depth-over-time samples (history.h),
 * in-process: a broker over the memory store, history's timer on a test
 * event base, and the JSON array history_json() writes after each sweep.
 * The memory driver's vtable is copied with a queue_stats() that fails on
 * demand, for the "a failed read keeps the last sample" rule. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "broker.h"
#include "clock.h"
#include "history.h"
#include "queues.h"
#include "saker/store.h"

extern const struct saker_store_driver saker_store_memory;

static struct saker_store_driver faildrv;
static bool stats_fail;         /* queue_stats() fails while set */

static int
maybe_failing_stats(saker_store *s, saker_queue *q, struct saker_queue_stats *st)
{
	if (stats_fail)
		return SAKER_EIO;
	return saker_store_memory.queue_stats(s, q, st);
}

/* The broker's owner: history never calls a hook, so none does anything. */
static void h_broker(struct broker *b) { (void)b; }
static void h_session(struct session *s) { (void)s; }
static void h_arm(struct broker *b, int64_t t) { (void)b; (void)t; }
static bool h_wait(struct session *s, int64_t t) { (void)s; (void)t; return true; }
static void h_failed(struct session *s, const char *how,
    void (*answer)(struct session *s)) { (void)s; (void)how; (void)answer; }
static const char *h_peer(struct session *s) { (void)s; return "test"; }
static void h_keep(struct session *s, unsigned k) { (void)s; (void)k; }
static void h_cut(struct session *s, size_t len) { (void)s; (void)len; }

static const struct broker_hooks hooks = {
	.schedule_commit = h_broker, .schedule_flush = h_session,
	.arm_promote = h_arm, .arm_open_timeout = h_arm,
	.wait_start = h_wait, .wait_end = h_session,
	.close = h_session, .close_after_write = h_session, .stop = h_broker,
	.login_admit = NULL, .login_failed = h_failed, .login_ok = h_session,
	.peer = h_peer, .reply_keep = h_keep, .reply_cut = h_cut,
};

static struct broker br;
static struct event_base *base;

static void
setup(void)
{
	struct saker_store_opts o;
	char err[256];

	memset(&o, 0, sizeof(o));
	o.create = true;
	broker_init(&br, &hooks);
	ck_assert_int_eq(saker_store_open("memory", &o, &br.store, err, sizeof(err)),
	    SAKER_OK);
	faildrv = saker_store_memory;
	faildrv.queue_stats = maybe_failing_stats;
	br.store->driver = &faildrv;
	br.queue_ext_free = queue_watch_free;
	ck_assert_int_eq(broker_load_config(&br, NULL, 1), 0);
	ck_assert_int_eq(queues_load(&br), SAKER_OK);
	stats_fail = false;
	ck_assert_ptr_nonnull(base = event_base_new());
}

static void
teardown(void)
{
	history_stop();
	queues_free(&br);
	config_free(br.config);
	saker_store_close(br.store);
	event_base_free(base);
}

static struct squeue *
mkqueue(const char *name)
{
	struct squeue *q;
	int err = 0;

	q = queue_lookup(&br, name, strlen(name), true, &err);
	ck_assert_msg(q != NULL, "queue %s: %d", name, err);
	return q;
}

static void
put(struct squeue *q, int n)
{
	struct saker_item it;

	memset(&it, 0, sizeof(it));
	it.len = 1;
	it.data = "x";
	while (n-- > 0)
		ck_assert_int_eq(saker_store_put(br.store, q->h, &it, saker_now_ms()),
		    SAKER_OK);
	ck_assert_int_eq(saker_store_commit(br.store), SAKER_OK);
}

static int
drop_item(void *arg, const struct saker_item *it)
{
	(void)arg;
	(void)it;
	return 0;
}

static void
take(struct squeue *q)
{
	ck_assert_int_eq(saker_store_take(br.store, q->h, SAKER_TAKE_REMOVE,
	    saker_now_ms(), drop_item, NULL), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(br.store), SAKER_OK);
}

/* Run the loop until `n` more sweeps are complete.  Counted, not told by
 * last_ms: a persistent timer that ran late fires again sooner, so two
 * sweeps can end in one millisecond on a loaded machine. */
static void
sweeps(int n)
{
	int64_t deadline = saker_now_ms() + 10000;
	uint64_t want = history_stats()->sweeps + (uint64_t)n;

	while (history_stats()->sweeps < want) {
		ck_assert_msg(saker_now_ms() < deadline, "no sweep in 10 s");
		event_base_loop(base, EVLOOP_ONCE);
	}
	ck_assert_uint_eq(history_stats()->sweeps, want);
}

/* q's samples as history_json() writes them */
static char *
json(const struct squeue *q)
{
	struct evbuffer *out = evbuffer_new();
	size_t len = evbuffer_get_length(out);
	char *s;

	history_json(out, q);
	len = evbuffer_get_length(out);
	s = malloc(len + 1);
	evbuffer_remove(out, s, len);
	s[len] = '\0';
	evbuffer_free(out);
	return s;
}

#define ck_json(q, want) do { \
	char *j_ = json(q); \
	ck_assert_str_eq(j_, (want)); \
	free(j_); \
} while (0)

/* Each sweep adds a sample of the queue's ready items, oldest first. */
START_TEST(test_depth_follows_the_queue)
{
	struct squeue *q = mkqueue("jobs");

	ck_json(q, "[]");		/* no sweep yet */
	ck_assert_int_eq(history_start(base, &br, 10), 0);
	ck_assert_uint_eq(history_stats()->interval_ms, 10);
	ck_assert_int_eq(history_stats()->last_ms, 0);
	put(q, 3);
	sweeps(1);
	ck_json(q, "[3]");
	ck_assert_uint_eq(history_stats()->rings, 1);
	ck_assert_uint_ge(history_stats()->slices, 1);
	ck_assert_int_gt(history_stats()->last_ms, 0);
	take(q);
	sweeps(1);
	ck_json(q, "[3,2]");
	put(q, 5);
	sweeps(1);
	ck_json(q, "[3,2,7]");
}
END_TEST

/* A queue that never had items gets no ring (and no record): zeros, and
 * the sweep counts no ring for it. */
START_TEST(test_idle_queue_costs_nothing)
{
	struct squeue *idle = mkqueue("idle"), *busy = mkqueue("busy");

	ck_assert_int_eq(history_start(base, &br, 10), 0);
	put(busy, 1);
	sweeps(2);
	ck_json(idle, "[0,0]");
	ck_assert_ptr_null(idle->ext);
	ck_json(busy, "[1,1]");
	ck_assert_ptr_nonnull(busy->ext);
	ck_assert_uint_eq(history_stats()->rings, 1);
}
END_TEST

/* At most HISTORY_SAMPLES samples; a queue empty for a whole window loses
 * its ring, and its record too when the overview never asked its rates. */
START_TEST(test_window_and_drop)
{
	struct squeue *q = mkqueue("q"), *rated = mkqueue("rated");
	char *j;
	int i, n;

	ck_assert_int_eq(history_start(base, &br, 10), 0);
	put(q, 1);
	put(rated, 1);
	queue_watch(rated)->rate_ms = 1;	/* as the overview leaves it */
	sweeps(HISTORY_SAMPLES + 5);
	j = json(q);
	for (n = 0, i = 0; j[i] != '\0'; i++)
		n += j[i] == '1';
	ck_assert_int_eq(n, HISTORY_SAMPLES);
	free(j);
	ck_assert_uint_eq(history_stats()->rings, 2);

	take(q);
	take(rated);
	sweeps(HISTORY_SAMPLES - 1);
	ck_assert_ptr_nonnull(q->ext);		/* not yet a whole window */
	j = json(q);
	ck_assert_ptr_nonnull(strstr(j, "[1,0,0,"));
	free(j);
	sweeps(1);
	ck_assert_ptr_null(q->ext);		/* ring and record gone */
	ck_assert_ptr_nonnull(rated->ext);	/* the rates stay ... */
	ck_assert_ptr_null(((struct queue_watch *)rated->ext)->hist); /* ... alone */
	sweeps(1);
	ck_assert_uint_eq(history_stats()->rings, 0);
	j = json(q);
	ck_assert_ptr_null(strchr(j, '1'));	/* all zeros now */
	free(j);

	/* items again: a fresh ring from this sweep on */
	put(q, 2);
	sweeps(1);
	j = json(q);
	ck_assert_int_eq(j[strlen(j) - 2], '2');
	ck_assert_ptr_null(strchr(j, '1'));
	free(j);
}
END_TEST

/* A failed queue_stats() keeps the last sample rather than a made-up 0,
 * and starts no ring for a queue that has none. */
START_TEST(test_failed_read_repeats_last)
{
	struct squeue *q = mkqueue("q"), *other = mkqueue("other");

	ck_assert_int_eq(history_start(base, &br, 10), 0);
	put(q, 4);
	sweeps(1);
	put(other, 1);
	stats_fail = true;
	sweeps(2);
	ck_json(q, "[4,4,4]");
	ck_assert_ptr_null(other->ext);
	stats_fail = false;
	take(q);
	sweeps(1);
	ck_json(q, "[4,4,4,3]");
	ck_json(other, "[0,0,0,1]");
}
END_TEST

/* --http-history 0: no timer, no samples. */
START_TEST(test_off)
{
	struct squeue *q = mkqueue("q");
	struct timeval tv = { 0, 50000 };

	ck_assert_int_eq(history_start(base, &br, 0), 0);
	ck_assert_uint_eq(history_stats()->interval_ms, 0);
	put(q, 1);
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
	ck_assert_int_eq(history_stats()->last_ms, 0);
	ck_assert_ptr_null(q->ext);
	ck_json(q, "[]");
}
END_TEST

/* With the store gone (closed for a restart) a tick samples nothing. */
START_TEST(test_no_store)
{
	struct squeue *q = mkqueue("q");
	struct timeval tv = { 0, 60000 };
	saker_store *s = br.store;

	put(q, 1);
	ck_assert_int_eq(history_start(base, &br, 10), 0);
	br.store = NULL;
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
	ck_assert_int_eq(history_stats()->last_ms, 0);
	ck_assert_ptr_null(q->ext);
	br.store = s;
	sweeps(1);
	ck_json(q, "[1]");
}
END_TEST

/* A second start (a second server in one process) begins a fresh
 * history: no sweeps, no stats, no samples from before. */
START_TEST(test_restart_is_fresh)
{
	struct squeue *q = mkqueue("q");

	ck_assert_int_eq(history_start(base, &br, 10), 0);
	put(q, 1);
	sweeps(3);
	ck_json(q, "[1,1,1]");
	history_stop();
	ck_assert_int_eq(history_start(base, &br, 20), 0);
	ck_assert_uint_eq(history_stats()->interval_ms, 20);
	ck_assert_int_eq(history_stats()->last_ms, 0);
	ck_assert_uint_eq(history_stats()->rings, 0);
	ck_json(q, "[]");
	take(q);
	put(q, 2);
	sweeps(1);
	ck_json(q, "[2]");
}
END_TEST

/* Many queues: every one sampled once per sweep, the sweep cut in slices
 * of about HISTORY_SLICE_US when it takes longer than that. */
START_TEST(test_many_queues)
{
	enum { NQ = 20000 };
	struct squeue *last = NULL;
	char name[16];
	int64_t t0;
	int i;

	for (i = 0; i < NQ; i++) {
		snprintf(name, sizeof(name), "q%05d", i);
		last = mkqueue(name);
		put(last, 1);
	}
	ck_assert_int_eq(history_start(base, &br, 10), 0);
	t0 = saker_now_us();
	sweeps(1);
	ck_assert_uint_eq(history_stats()->rings, NQ);
	ck_json(last, "[1]");
	/* the sweep took more than one slice's budget in all: then it took
	 * more than one slice */
	if (history_stats()->walk_us > 2 * HISTORY_SLICE_US)
		ck_assert_uint_gt(history_stats()->slices, 1);
	ck_assert_int_le((int64_t)history_stats()->walk_us, saker_now_us() - t0);
}
END_TEST

int
main(void)
{
	Suite *su = suite_create("history");
	TCase *tc = tcase_create("sweeps");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_depth_follows_the_queue);
	tcase_add_test(tc, test_idle_queue_costs_nothing);
	tcase_add_test(tc, test_window_and_drop);
	tcase_add_test(tc, test_failed_read_repeats_last);
	tcase_add_test(tc, test_off);
	tcase_add_test(tc, test_no_store);
	tcase_add_test(tc, test_restart_is_fresh);
	tcase_add_test(tc, test_many_queues);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
