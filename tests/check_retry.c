/* check_retry.c -- retries the way job queues do them (issue 37): the
 * backoff rule and its config, then a real sakerd over a socket: abort with
 * a delay (text and meta; binary in check_binary.c), retry_backoff on
 * abort, disconnect and open_timeout under max_deliveries, touch, and an
 * item given back with a delay that survives kill -9 on LMDB and SQLite.
 * Timing bounds: never early (the server's promise), late by at most a
 * tolerance stretched for a loaded machine (tl_slow). */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qconfig.h"
#include "retry.h"
#include "testlib.h"

/* ------------------------------------------------------------ the rule */

START_TEST(test_backoff_rule)
{
	static struct broker b;         /* the jitter's generator */
	struct queue_config qc;
	uint32_t n;

	memset(&qc, 0, sizeof(qc));
	ck_assert_int_eq(retry_backoff(&qc, 1, 0), 0);	/* not configured */
	qc.retry_backoff_ms = 100;
	qc.retry_backoff_max_ms = 1000;
	/* rnd 0: no jitter; doubling per delivery up to the cap */
	ck_assert_int_eq(retry_backoff(&qc, 0, 0), 100);
	ck_assert_int_eq(retry_backoff(&qc, 1, 0), 100);
	ck_assert_int_eq(retry_backoff(&qc, 2, 0), 200);
	ck_assert_int_eq(retry_backoff(&qc, 4, 0), 800);
	ck_assert_int_eq(retry_backoff(&qc, 5, 0), 1000);
	ck_assert_int_eq(retry_backoff(&qc, SAKER_DELIVERIES_MAX, 0), 1000);
	/* the jitter takes off at most a quarter, never adds */
	for (n = 1; n < 8; n++) {
		uint64_t r;

		for (r = 0; r < 2000; r += 7) {
			int64_t full = retry_backoff(&qc, n, 0);
			int64_t d = retry_backoff(&qc, n, r * 2654435761u);

			ck_assert_int_le(d, full);
			ck_assert_int_ge(d, full - full / 4);
		}
	}
	/* a huge base cannot overflow */
	qc.retry_backoff_ms = 315360000000LL;
	qc.retry_backoff_max_ms = 315360000000LL;
	ck_assert_int_eq(retry_backoff(&qc, 60000, 0), 315360000000LL);
	/* the jitter source varies */
	ck_assert(retry_random(&b) != retry_random(&b));
}
END_TEST

START_TEST(test_backoff_config)
{
	static const struct queue_config defaults = { .max_open = 1 };
	const struct queue_config *qc;
	struct config *cf;
	char err[256], *path;

	path = tl_write_file("retry.conf", "[queue a]\nretry_backoff = 1s, 10m\n"
	    "[queue b]\nretry_backoff = 250\n"
	    "[queue c]\nretry_backoff = 2h\n"
	    "[queue d]\nretry_backoff = 0\n");
	cf = config_load(path, &defaults, err, sizeof(err));
	ck_assert_msg(cf != NULL, "%s", err);
	qc = config_for(cf, "a", 1);
	ck_assert_int_eq(qc->retry_backoff_ms, 1000);
	ck_assert_int_eq(qc->retry_backoff_max_ms, 600000);
	qc = config_for(cf, "b", 1);
	ck_assert_int_eq(qc->retry_backoff_ms, 250);
	ck_assert_int_eq(qc->retry_backoff_max_ms, 3600000);	/* default cap */
	qc = config_for(cf, "c", 1);
	ck_assert_int_eq(qc->retry_backoff_max_ms, 7200000);	/* >= BASE */
	ck_assert_int_eq(config_for(cf, "d", 1)->retry_backoff_ms, 0);
	ck_assert_int_eq(config_for(cf, "e", 1)->retry_backoff_ms, 0);
	config_free(cf);
	free(path);

	path = tl_write_file("retry.conf", "[queue a]\nretry_backoff = 10s,1s\n");
	ck_assert_ptr_null(config_load(path, &defaults, err, sizeof(err)));
	ck_assert_msg(strstr(err, "retry.conf:2: retry_backoff: retry_backoff"
	    " wants BASE[,MAX]") != NULL, "%s", err);
	free(path);
	path = tl_write_file("retry.conf", "[queue a]\nretry_backoff = soon\n");
	ck_assert_ptr_null(config_load(path, &defaults, err, sizeof(err)));
	free(path);
	path = tl_write_file("retry.conf", "[queue a]\nretry_backoff = 1s,\n");
	ck_assert_ptr_null(config_load(path, &defaults, err, sizeof(err)));
	free(path);
}
END_TEST

/* ------------------------------------------------------ over a socket */

/* Block on `cmd` (a get with t=) and expect `want` back; the ms since t0
 * (taken before the request that gave the item back, so that "never
 * early" is a strict lower bound whatever the round trips cost). */
static int64_t
timed_since(int64_t t0, int c, const char *cmd, const char *want)
{
	mustsends(c, cmd);
	ckresp(c, want);
	return tl_now_ms() - t0;
}

#define IN_RANGE(ms, lo, hi) ck_assert_msg((ms) >= (lo) && (ms) < (hi), \
	"line %d: %lld ms, want [%d, %d)", __LINE__, (long long)(ms), (lo), (hi))

/* Text and meta: the delayed abort keeps data, flags and count, the item
 * is invisible and counted in delayed_items meanwhile, and comes back no
 * earlier than asked; /delay=0 is at once; bad forms are refused. */
START_TEST(test_abort_delay)
{
	int hport = tl_free_port();
	char *hp = tl_strdupf("127.0.0.1:%d", hport), *resp;
	struct tl_server *s = tl_server_start("memory", "--http", hp, NULL);
	int c = tl_connect(s->port), o = tl_connect(s->port);
	/* long enough for the checks below to run while it is delayed,
	 * under valgrind too */
	int d1 = tl_slow(600);
	char *st, *cmd = tl_strdupf("get jobs/abort/delay=%d\r\n", d1);
	int64_t ms, t0;

	tl_setn(c, "jobs", 7, 0, "job1", 4);
	mustsends(c, "get jobs/open\r\n");
	ckresp(c, "VALUE jobs/open 7 4\r\njob1\r\nEND\r\n");
	t0 = tl_now_ms();
	mustsends(c, cmd);
	ckresp(c, "END\r\n");
	free(cmd);
	tl_ckget(o, "jobs", NULL);
	st = tl_stats(o);
	ck_assert_int_eq(tl_stat_value(st, "queue_jobs_delayed_items"), 1);
	ck_assert_int_eq(tl_stat_value(st, "queue_jobs_open_transactions"), 0);
	ck_assert_int_eq(tl_stat_value(st, "queue_jobs_retries"), 1);
	ck_assert_int_eq(tl_stat_value(st, "retries_scheduled"), 1);
	free(st);
	resp = tl_http(hport, "GET", "/metrics", NULL, NULL);
	ck_assert_int_eq(tl_http_status(resp), 200);
	ck_assert_msg(strstr(resp, "\nsaker_retries_scheduled_total 1\n") !=
	    NULL && strstr(resp, "\nsaker_queue_retries_total{queue=\"jobs\"}"
	    " 1\n") != NULL && strstr(resp, "\nsaker_queue_delayed_items{queue="
	    "\"jobs\"} 1\n") != NULL, "%s", resp);
	free(resp);
	/* meta, from another connection, waiting for it */
	ms = timed_since(t0, o, "mg jobs/open/t=9000 v f d\r\n",
	    "VA 4 f7 d2\r\njob1\r\n");
	IN_RANGE(ms, d1, d1 + tl_slow(1000));
	/* meta's delayed abort: EN, as any key that only gives back */
	t0 = tl_now_ms();
	mustsends(o, "mg jobs/abort/delay=300 v\r\n");
	ckresp(o, "EN\r\n");
	ms = timed_since(t0, c, "mg jobs/open/t=5000 v d\r\n",
	    "VA 4 d3\r\njob1\r\n");
	IN_RANGE(ms, 300, tl_slow(1300));
	/* 0 is at once, to the head */
	mustsends(c, "get jobs/abort/delay=0\r\n");
	ckresp(c, "END\r\n");
	tl_ckget(o, "jobs", "job1");
	/* refused: not with open/close, out of range, alone */
	mustsends(c, "get jobs/open/delay=5\r\n");
	ckresp(c, "CLIENT_ERROR bad option combination\r\n");
	mustsends(c, "get jobs/delay=5\r\n");
	ckresp(c, "CLIENT_ERROR bad option combination\r\n");
	mustsends(c, "get jobs/abort/delay=315360000001\r\n");
	ckresp(c, "CLIENT_ERROR bad command line format\r\n");
	/* nothing open: a plain miss, nothing scheduled */
	mustsends(c, "get jobs/abort/delay=100\r\n");
	ckresp(c, "END\r\n");
	ck_assert_int_eq(tl_stat(c, "retries_scheduled"), 2);
	close(c);
	close(o);
	tl_server_stop(s);
	tl_server_free(s);
	free(hp);
}
END_TEST

/* The queue's backoff: an abort, a disconnect and an open_timeout bring
 * the item back after BASE, 2 BASE, 4 BASE ... up to MAX (less up to a
 * quarter of jitter), an explicit /delay= wins, and max_deliveries still
 * dead-letters the item on top, at once. */
START_TEST(test_backoff_timing)
{
	char *conf = tl_write_file("retry.conf", "[queue bk]\nretry_backoff = 200,700\n"
	    "max_deliveries = 6\nopen_timeout = 300ms\n"
	    "[queue plain]\n");
	struct tl_server *s = tl_server_start("memory", "--config", conf, NULL);
	int c = tl_connect(s->port), w;
	int64_t ms, t0;
	char *st;

	tl_set(c, "bk", "j");
	/* hand-out 1, aborted: BASE, 150..200 ms */
	mustsends(c, "get bk/open\r\n");
	ckresp(c, "VALUE bk/open 0 1\r\nj\r\nEND\r\n");
	t0 = tl_now_ms();
	mustsends(c, "get bk/abort\r\n");
	ckresp(c, "END\r\n");
	ms = timed_since(t0, c, "mg bk/open/t=5000 v d\r\n",
	    "VA 1 d2\r\nj\r\n");
	IN_RANGE(ms, 150, tl_slow(1000));
	/* hand-out 2: an explicit /delay=0 wins over the backoff */
	mustsends(c, "get bk/abort/delay=0\r\n");
	ckresp(c, "END\r\n");
	/* hand-out 3, its worker disconnects: 4 BASE = 800, capped at
	 * 700: 525..700 ms */
	w = tl_connect(s->port);
	mustsends(w, "mg bk/open v d\r\n");
	ckresp(w, "VA 1 d3\r\nj\r\n");
	t0 = tl_now_ms();
	close(w);
	ms = timed_since(t0, c, "mg bk/open/t=5000 v d\r\n",
	    "VA 1 d4\r\nj\r\n");
	IN_RANGE(ms, 525, tl_slow(1500));
	/* hand-out 5 (given back at once, taken again at once, so its
	 * open time is known), held past open_timeout (300 ms): then MAX
	 * again, 525..700 ms later; another connection waits for it */
	mustsends(c, "get bk/abort/delay=0\r\n");
	ckresp(c, "END\r\n");
	t0 = tl_now_ms();
	mustsends(c, "mg bk/open v d\r\n");
	ckresp(c, "VA 1 d5\r\nj\r\n");
	w = tl_connect(s->port);
	ms = timed_since(t0, w, "mg bk/t=5000 v d\r\n", "VA 1 d5\r\nj\r\n");
	IN_RANGE(ms, 300 + 525, tl_slow(2500));
	close(w);
	st = tl_stats(c);
	ck_assert_int_eq(tl_stat_value(st, "queue_bk_open_timeouts"), 1);
	ck_assert_int_eq(tl_stat_value(st, "queue_bk_retries"), 3);
	ck_assert_int_eq(tl_stat_value(st, "retries_scheduled"), 3);
	ck_assert_int_eq(tl_stat_value(st, "queue_bk_dead_lettered"), 0);
	free(st);
	/* a queue without retry_backoff gives back at once, as before */
	tl_set(c, "plain", "p");
	mustsends(c, "get plain/open\r\nget plain/abort\r\nget plain\r\n");
	ckresp(c, "VALUE plain/open 0 1\r\np\r\nEND\r\nEND\r\n"
	    "VALUE plain 0 1\r\np\r\nEND\r\n");
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	free(conf);
}
END_TEST

/* Spent items go to the dead-letter queue at once, not after a backoff;
 * the backoff applies to the others. */
START_TEST(test_backoff_dead_letter)
{
	char *conf = tl_write_file("retry.conf", "[queue dq]\nretry_backoff = 5s\n"
	    "max_deliveries = 2\n");
	struct tl_server *s = tl_server_start("memory", "--config", conf, NULL);
	int c = tl_connect(s->port);
	int64_t t0;

	tl_set(c, "dq", "poison");
	mustsends(c, "get dq/open\r\n");
	ckresp(c, "VALUE dq/open 0 6\r\npoison\r\nEND\r\n");
	/* 1st failure: delayed by the backoff (5 s less jitter) */
	mustsends(c, "get dq/abort/delay=50\r\n");
	ckresp(c, "END\r\n");
	mustsends(c, "get dq/open/t=3000\r\n");
	ckresp(c, "VALUE dq/open/t=3000 0 6\r\npoison\r\nEND\r\n");
	/* 2nd failure with the backoff: spent, dead-lettered at once */
	t0 = tl_now_ms();
	mustsends(c, "get dq/abort\r\n");
	ckresp(c, "END\r\n");
	tl_ckget(c, "dq_dead", "poison");
	ck_assert_int_lt(tl_now_ms() - t0, tl_slow(1000));
	ck_assert_int_eq(tl_stat(c, "queue_dq_dead_lettered"), 1);
	ck_assert_int_eq(tl_stat(c, "queue_dq_delayed_items"), 0);
	/* a first failure of another item waits out the 5 s backoff */
	tl_set(c, "dq", "next");
	mustsends(c, "get dq/open\r\n");
	ckresp(c, "VALUE dq/open 0 4\r\nnext\r\nEND\r\n");
	mustsends(c, "get dq/abort\r\n");
	ckresp(c, "END\r\n");
	mustsends(c, "get dq/t=1000\r\n");
	ckresp(c, "END\r\n");
	ck_assert_int_eq(tl_stat(c, "queue_dq_delayed_items"), 1);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	free(conf);
}
END_TEST

/* touch: a holder pushes its open_timeout back, so a second worker does
 * not get the item; without the touch it does.  Touching nothing held is
 * an error in every form, and noreply keeps the connection in step. */
START_TEST(test_touch)
{
	char *conf = tl_write_file("retry.conf", "[queue tq]\nopen_timeout = 1000ms\n"
	    "[queue free]\n");
	struct tl_server *s = tl_server_start("memory", "--config", conf, NULL);
	int c = tl_connect(s->port), o = tl_connect(s->port), i;

	mustsends(c, "touch tq 0\r\n");
	ckresp(c, "NOT_FOUND\r\n");
	mustsends(c, "get tq/touch\r\n");
	ckresp(c, "CLIENT_ERROR no open item on the queue to touch\r\n");
	mustsends(c, "touch tq 0 noreply\r\nget tq\r\n");
	ckresp(c, "END\r\n");
	tl_set(c, "tq", "long job");
	mustsends(c, "get tq/open\r\n");
	ckresp(c, "VALUE tq/open 0 8\r\nlong job\r\nEND\r\n");
	/* 4 x 400 ms = 1.6 s held, past the 1 s timeout, touched each time
	 * (600 ms to spare for a slow server: valgrind) */
	for (i = 0; i < 4; i++) {
		tl_sleep_ms(400);
		if (i == 1) {
			mustsends(c, "get tq/touch\r\n");
			ckresp(c, "END\r\n");
		} else {
			mustsends(c, "touch tq 0\r\n");
			ckresp(c, "TOUCHED\r\n");
		}
		tl_ckget(o, "tq", NULL);
	}
	ck_assert_int_eq(tl_stat(o, "queue_tq_open_timeouts"), 0);
	ck_assert_int_eq(tl_stat(o, "queue_tq_open_transactions"), 1);
	/* an explicit lease: 2 s, past the queue's timeout */
	mustsends(c, "touch tq 2\r\n");
	ckresp(c, "TOUCHED\r\n");
	tl_sleep_ms(900);
	tl_ckget(o, "tq", NULL);
	/* let it lapse: the other worker gets it */
	mustsends(o, "get tq/open/t=5000\r\n");
	ckresp(o, "VALUE tq/open/t=5000 0 8\r\nlong job\r\nEND\r\n");
	ck_assert_int_eq(tl_stat(o, "queue_tq_open_timeouts"), 1);
	/* the first worker no longer holds it */
	mustsends(c, "touch tq 0\r\n");
	ckresp(c, "NOT_FOUND\r\n");
	ck_assert_int_ge(tl_stat(o, "touches"), 4);
	/* a queue with no open_timeout: touch succeeds, changes nothing */
	tl_set(c, "free", "x");
	mustsends(c, "get free/open\r\ntouch free 0\r\n");
	ckresp(c, "VALUE free/open 0 1\r\nx\r\nEND\r\nTOUCHED\r\n");
	mustsends(c, "touch free -1\r\ntouch free\r\ntouch fr/ee 1\r\n");
	ckresp(c, "CLIENT_ERROR bad command line format\r\n"
	    "CLIENT_ERROR bad command line format\r\n"
	    "CLIENT_ERROR bad queue name\r\n");
	close(c);
	close(o);
	tl_server_stop(s);
	tl_server_free(s);
	free(conf);
}
END_TEST

/* kill -9 after a delayed abort was acknowledged: after the restart the
 * item is still delayed (not served early, not lost) with its count. */
static void
durable_delay(const char *store)
{
	struct tl_server *s = tl_server_start(store, "--sync", "always", NULL);
	int c = tl_connect(s->port);
	/* long enough to outlast the kill and the restart, under valgrind
	 * too */
	int d = tl_slow(2500);
	char *abort = tl_strdupf("get dj/abort/delay=%d\r\n", d);
	char *wait = tl_strdupf("mg dj/open/t=%d v d f\r\n", d + tl_slow(5000));
	int64_t t0, ms;
	char *st;

	tl_setn(c, "dj", 5, 0, "durable", 7);
	tl_set(c, "dj", "second");
	mustsends(c, "mg dj/open v d\r\n");
	ckresp(c, "VA 7 d1\r\ndurable\r\n");
	t0 = tl_now_ms();
	mustsends(c, abort);
	ckresp(c, "END\r\n");
	/* and one given back at once, for contrast */
	mustsends(c, "mg dj/open v d\r\n");
	ckresp(c, "VA 6 d1\r\nsecond\r\n");
	mustsends(c, "get dj/abort\r\n");
	ckresp(c, "END\r\n");
	close(c);
	tl_server_kill(s);
	tl_server_restart(s);
	c = tl_connect(s->port);
	st = tl_stats(c);
	ck_assert_int_eq(tl_stat_value(st, "queue_dj_delayed_items"), 1);
	ck_assert_int_eq(tl_stat_value(st, "queue_dj_items"), 1);
	free(st);
	mustsends(c, "mg dj/open v d\r\n");
	ckresp(c, "VA 6 d2\r\nsecond\r\n");
	mustsends(c, "get dj/close\r\n");
	ckresp(c, "END\r\n");
	mustsends(c, wait);
	ckresp(c, "VA 7 f5 d2\r\ndurable\r\n");
	ms = tl_now_ms() - t0;
	ck_assert_msg(ms >= d, "%s: served %lld ms after a %d ms delay",
	    store, (long long)ms, d);
	free(abort);
	free(wait);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
}

/* A server that stops gives its connections' open items back to the
 * head, as a crash does: stopping is no job's failure, so no backoff. */
static void
stop_no_backoff(const char *store)
{
	char *conf = tl_write_file("retry.conf", "[queue sb]\nretry_backoff = 20s\n");
	struct tl_server *s = tl_server_start(store, "--config", conf, NULL);
	int c = tl_connect(s->port), w = tl_connect(s->port);

	tl_set(c, "sb", "held");
	mustsends(w, "mg sb/open v d\r\n");
	ckresp(w, "VA 4 d1\r\nheld\r\n");
	close(c);
	tl_server_stop(s);
	close(w);
	tl_server_restart(s);
	c = tl_connect(s->port);
	mustsends(c, "mg sb v d\r\n");
	ckresp(c, "VA 4 d1\r\nheld\r\n");
	ck_assert_int_eq(tl_stat(c, "retries_scheduled"), 0);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	free(conf);
}

#ifdef HAVE_LMDB
START_TEST(test_stop_no_backoff_lmdb)
{
	stop_no_backoff("lmdb");
}
END_TEST

START_TEST(test_durable_delay_lmdb)
{
	durable_delay("lmdb");
}
END_TEST
#endif

#ifdef HAVE_SQLITE
START_TEST(test_durable_delay_sqlite)
{
	durable_delay("sqlite");
}
END_TEST
#endif

static Suite *
retry_suite(void)
{
	Suite *su = suite_create("retry");
	TCase *tc = tcase_create("retry");

	tcase_add_checked_fixture(tc, tl_dir_setup, tl_dir_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_backoff_rule);
	tcase_add_test(tc, test_backoff_config);
	tcase_add_test(tc, test_abort_delay);
	tcase_add_test(tc, test_backoff_timing);
	tcase_add_test(tc, test_backoff_dead_letter);
	tcase_add_test(tc, test_touch);
#ifdef HAVE_LMDB
	tcase_add_test(tc, test_durable_delay_lmdb);
	tcase_add_test(tc, test_stop_no_backoff_lmdb);
#endif
#ifdef HAVE_SQLITE
	tcase_add_test(tc, test_durable_delay_sqlite);
#endif
	suite_add_tcase(su, tc);
	return su;
}

int
main(void)
{
	SRunner *sr = srunner_create(retry_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
