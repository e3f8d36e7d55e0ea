/* check_crash.c -- SIGKILL sakerd under load; no acknowledged item may be lost. */
#include "config.h"

#include <sys/socket.h>
#include <sys/wait.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "idprod.h"
#include "totalq.h"

/*
 * Each round: 50 producers load the server (Jepsen's total-queue check,
 * totalq.h) while one item is held open and one is delayed; SIGKILL at a
 * random moment, restart, and then lost, unexpected, duplicated and
 * reordered must all be 0, the open item must be back at the head, the
 * delayed one must keep its due time, and so must one given back with a
 * delay (get q/abort/delay=, issue 37), with its delivery count; a
 * producer of sets with deduplication ids that retries the one in flight
 * finds each of them exactly once (issue 44).
 */

#define RETRY_MS 1500

#define NROUNDS 5


/*
 * One round: load, kill, restart, check.  `s` is running on entry and on
 * return.
 */
static void
crash_round(struct tl_server *s, const char *name, int round)
{
	struct tq t;
	struct idprod ip;
	int ctl, opener;
	int64_t t_delay, t_retry, dt;
	char req[128], want[64], *line;

	/* An open item and a delayed item at the time of the kill. */
	ctl = tl_connect(s->port);
	opener = tl_connect(s->port);
	snprintf(req, sizeof(req), "open%d-a", round);
	tl_set(ctl, "crashopen", req);
	snprintf(req, sizeof(req), "open%d-b", round);
	tl_set(ctl, "crashopen", req);
	mustsends(opener, "get crashopen/open\r\n");
	{
		char data[32];

		snprintf(data, sizeof(data), "open%d-a", round);
		snprintf(req, sizeof(req), "VALUE crashopen/open 0 %zu\r\n"
		    "%s\r\nEND\r\n", strlen(data), data);
	}
	ckresp(opener, req);
	t_delay = tl_now_ms();
	snprintf(req, sizeof(req), "set crashdelay/delay=1000 0 0 7\r\n"
	    "delay-%d\r\n", round % 10);
	mustsends(ctl, req);
	ckresp(ctl, "STORED\r\n");
	snprintf(req, sizeof(req), "set crashretry 0 0 7\r\nretry-%d\r\n",
	    round % 10);
	mustsends(ctl, req);
	ckresp(ctl, "STORED\r\n");
	snprintf(want, sizeof(want), "VA 7 d1\r\nretry-%d\r\n", round % 10);
	mustsends(opener, "mg crashretry/open v d\r\n");
	ckresp(opener, want);
	t_retry = tl_now_ms();
	snprintf(req, sizeof(req), "get crashretry/abort/delay=%d\r\n",
	    RETRY_MS);
	mustsends(opener, req);
	ckresp(opener, "END\r\n");

	idprod_start(&ip, s->port, round);
	tq_start(&t, s->port, "crash", round);
	tq_run_until(&t, tl_now_ms() + 100 + random() % 301, name);
	tl_server_kill(s);
	tq_stop(&t);
	close(opener);
	close(ctl);

	tl_server_restart(s);
	ctl = tl_connect(s->port);

	/* The open item is back at the head, before the other one. */
	snprintf(req, sizeof(req), "open%d-a", round);
	tl_ckget(ctl, "crashopen", req);
	snprintf(req, sizeof(req), "open%d-b", round);
	tl_ckget(ctl, "crashopen", req);
	tl_ckget(ctl, "crashopen", NULL);

	/* The retried item: not served before its due time (a hit now must
	 * come after it), then served with its count. */
	mustsends(ctl, "mg crashretry v d\r\n");
	line = tl_mustreadline(ctl);
	dt = tl_now_ms() - t_retry;
	if (strcmp(line, "EN") != 0) {
		ck_assert_msg(strcmp(line, "VA 7 d1") == 0 && dt >= RETRY_MS,
		    "%s round %d: retried item: \"%s\" %lld ms after a %d ms"
		    " delay", name, round, line, (long long)dt, RETRY_MS);
		free(line);
		snprintf(want, sizeof(want), "retry-%d\r\n", round % 10);
		ckresp(ctl, want);
	} else {
		free(line);
		mustsends(ctl, "mg crashretry/t=5000 v d\r\n");
		ckresp(ctl, want);
		dt = tl_now_ms() - t_retry;
		ck_assert_msg(dt >= RETRY_MS, "%s round %d: retried item after"
		    " %lld ms, delay %d", name, round, (long long)dt, RETRY_MS);
	}

	tq_check(&t, ctl, name);
	idprod_check(&ip, ctl, name, round);

	/* The delayed item keeps its due time across the crash: it arrives,
	 * and never before its delay (received after it was sent, so a
	 * stalled test can only make it look later, not earlier). */
	snprintf(req, sizeof(req), "delay-%d", round % 10);
	{
		size_t len;
		char *got = tl_getn(ctl, "crashdelay/t=3000", &len, NULL);

		dt = tl_now_ms() - t_delay;
		ck_assert_msg(got != NULL && strcmp(got, req) == 0,
		    "%s round %d: delayed item %s not back (got %s)", name,
		    round, req, got ? got : "nothing");
		ck_assert_msg(dt >= 1000, "%s round %d: delay=1000 came "
		    "after %lld ms", name, round, (long long)dt);
		free(got);
	}
	close(ctl);

	printf("%s round %d: acknowledged %d maybe %d read %d lost %d "
	    "unexpected %d duplicated %d reordered %d\n", name, round,
	    t.ct.acked, t.ct.maybe, t.ct.read, t.ct.lost, t.ct.unexpected,
	    t.ct.duplicated, t.ct.reordered);
	fflush(stdout);
	ck_assert_msg(t.ct.lost == 0, "%s round %d: %d acknowledged items lost",
	    name, round, t.ct.lost);
	ck_assert_msg(t.ct.unexpected == 0, "%s round %d: %d unexpected items",
	    name, round, t.ct.unexpected);
	ck_assert_msg(t.ct.duplicated == 0, "%s round %d: %d duplicated items",
	    name, round, t.ct.duplicated);
	ck_assert_msg(t.ct.reordered == 0, "%s round %d: %d items out of "
	    "producer order", name, round, t.ct.reordered);
	ck_assert_msg(t.ct.acked > 0, "%s round %d: nothing was acknowledged "
	    "in the load phase", name, round);
	tq_free(&t);
}

static void
crash_store(const char *store)
{
	struct tl_server *s = tl_server_start(store, "--sync", "always", NULL);
	int64_t t0 = tl_now_ms();
	int round;

	unsigned seed = (unsigned)getpid();

	srandom(seed);
	printf("%s: kill-time seed %u\n", store, seed);
	for (round = 0; round < NROUNDS; round++)
		crash_round(s, store, round);
	printf("%s: %d rounds in %lld ms\n", store, NROUNDS,
	    (long long)(tl_now_ms() - t0));
	tl_server_stop(s);
	tl_server_free(s);
}

#ifdef HAVE_LMDB
START_TEST(test_crash_lmdb)
{
	crash_store("lmdb");
}
END_TEST
#endif

#ifdef HAVE_SQLITE
START_TEST(test_crash_sqlite)
{
	crash_store("sqlite");
}
END_TEST
#endif

static Suite *
crash_suite(void)
{
	Suite *s = suite_create("crash");
	TCase *tc = NULL;

#ifdef HAVE_LMDB
	tc = tcase_create("lmdb");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, test_crash_lmdb);
	suite_add_tcase(s, tc);
#endif
#ifdef HAVE_SQLITE
	tc = tcase_create("sqlite");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, test_crash_sqlite);
	suite_add_tcase(s, tc);
#endif
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

#if !defined(HAVE_LMDB) && !defined(HAVE_SQLITE)
	return 77;		/* no durable store compiled in: skip */
#endif
	sr = srunner_create(crash_suite());

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
