/* check_crash.c -- SIGKILL sakerd under load; no acknowledged item may be lost. */
#include "config.h"

#include <sys/socket.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

/*
 * Jepsen-style accounting: every producer sends unique items one at a time
 * ("as fast as acknowledged") and remembers, per item, whether a STORED
 * came back.  After SIGKILL and restart every queue is drained and each
 * item read back is matched against what was sent:
 *   lost        acknowledged but never read back        must be 0
 *   unexpected  read back but never sent (or refused)   must be 0
 *   duplicated  read back more than once                must be 0
 *   reordered   out of order within one producer/queue  must be 0
 * Items in flight at the kill ("maybe") may or may not come back.
 */

#define NPROD 50
#define NQUEUE 4
#define NROUNDS 5
#define MAXSEQ 100000

enum { ST_UNSENT, ST_MAYBE, ST_ACKED, ST_REFUSED };

struct producer {
	int fd;
	int next;		/* next sequence number to send */
	bool waiting;		/* a set is in flight */
	size_t len;
	char buf[256];
	unsigned char *state;	/* ST_* per sequence */
	unsigned char *seen;	/* times read back per sequence */
	int last[NQUEUE];	/* last sequence read back per queue */
};

struct counts {
	int acked, maybe, read, lost, unexpected, duplicated, reordered;
};

static int
queue_of(int p, int seq)
{
	return (p + seq) % NQUEUE;
}

static void
send_next(struct producer *pr, int p, int round)
{
	char req[128];
	int n;

	ck_assert_int_lt(pr->next, MAXSEQ);
	n = snprintf(req, sizeof(req), "set crash%d 0 0 %d\r\n",
	    queue_of(p, pr->next),
	    snprintf(NULL, 0, "r%d-p%d-%d", round, p, pr->next));
	n += snprintf(req + n, sizeof(req) - (size_t)n, "r%d-p%d-%d\r\n",
	    round, p, pr->next);
	pr->state[pr->next] = ST_MAYBE;
	pr->waiting = true;
	mustsend(pr->fd, req, (size_t)n);
}

/* Consume replies in pr->buf; false if the connection broke. */
static bool
take_replies(struct producer *pr)
{
	char *nl;
	size_t used;

	while ((nl = memchr(pr->buf, '\n', pr->len)) != NULL) {
		used = (size_t)(nl - pr->buf) + 1;
		if (!pr->waiting)
			return false;
		if (used == 8 && memcmp(pr->buf, "STORED\r\n", 8) == 0)
			pr->state[pr->next] = ST_ACKED;
		else
			pr->state[pr->next] = ST_REFUSED;
		pr->waiting = false;
		pr->next++;
		memmove(pr->buf, pr->buf + used, pr->len - used);
		pr->len -= used;
	}
	return true;
}

/* Read what is there; false on EOF or error. */
static bool
read_some(struct producer *pr)
{
	ssize_t r = recv(pr->fd, pr->buf + pr->len,
	    sizeof(pr->buf) - pr->len, MSG_DONTWAIT);

	if (r == -1 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (r <= 0)
		return false;
	pr->len += (size_t)r;
	return take_replies(pr);
}

/* Drain queue q (pipelined gets, 100 at a time) into the producers'
 * bookkeeping. */
static void
drain(int fd, int q, struct producer *prs, int round, struct counts *ct)
{
	char req[64 * 100];
	int i, n, got_end = 0;

	while (!got_end) {
		n = 0;
		for (i = 0; i < 100; i++)
			n += snprintf(req + n, sizeof(req) - (size_t)n,
			    "get crash%d\r\n", q);
		mustsend(fd, req, (size_t)n);
		for (i = 0; i < 100; i++) {
			struct tl_value v;
			int r, p, seq;

			if (tl_read_value(fd, &v) == 0) {
				got_end = 1;
				continue;
			}
			ck_assert_msg(!got_end, "crash%d: item after END", q);
			tl_ckresp_(__FILE__, __LINE__, fd, "END\r\n", 5);
			ct->read++;
			if (sscanf(v.data, "r%d-p%d-%d", &r, &p, &seq) != 3 ||
			    r != round || p < 0 || p >= NPROD || seq < 0 ||
			    seq >= MAXSEQ || queue_of(p, seq) != q ||
			    prs[p].state[seq] == ST_UNSENT ||
			    prs[p].state[seq] == ST_REFUSED) {
				fprintf(stderr, "unexpected item \"%s\" in "
				    "crash%d\n", v.data, q);
				ct->unexpected++;
			} else {
				if (prs[p].seen[seq]++ > 0)
					ct->duplicated++;
				if (seq <= prs[p].last[q]) {
					fprintf(stderr, "crash%d: p%d-%d after "
					    "p%d-%d\n", q, p, seq, p,
					    prs[p].last[q]);
					ct->reordered++;
				}
				prs[p].last[q] = seq;
			}
			tl_value_clear(&v);
		}
	}
}

/*
 * One round: load, kill, restart, check.  `s` is running on entry and on
 * return.
 */
static void
crash_round(struct tl_server *s, const char *name, int round)
{
	struct producer *prs = calloc(NPROD, sizeof(*prs));
	struct pollfd pf[NPROD];
	struct counts ct;
	int p, q, seq, ctl, opener;
	int64_t kill_at, t_delay, dt;
	char req[128];

	memset(&ct, 0, sizeof(ct));

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

	for (p = 0; p < NPROD; p++) {
		prs[p].fd = tl_connect(s->port);
		fcntl(prs[p].fd, F_SETFL, O_NONBLOCK);
		prs[p].state = calloc(MAXSEQ, 1);
		prs[p].seen = calloc(MAXSEQ, 1);
		for (q = 0; q < NQUEUE; q++)
			prs[p].last[q] = -1;
		send_next(&prs[p], p, round);
	}
	kill_at = tl_now_ms() + 100 + random() % 301;
	while (tl_now_ms() < kill_at) {
		int left = (int)(kill_at - tl_now_ms());

		for (p = 0; p < NPROD; p++) {
			pf[p].fd = prs[p].fd;
			pf[p].events = POLLIN;
		}
		if (poll(pf, NPROD, left > 0 ? left : 0) <= 0)
			continue;
		for (p = 0; p < NPROD; p++) {
			if (pf[p].revents == 0)
				continue;
			ck_assert_msg(read_some(&prs[p]), "%s: producer %d: "
			    "connection broke before the kill", name, p);
			if (!prs[p].waiting)
				send_next(&prs[p], p, round);
		}
	}
	tl_server_kill(s);
	/* Replies already sent before the kill still count as acks. */
	for (p = 0; p < NPROD; p++) {
		while (!tl_quiet(prs[p].fd, 1000) && read_some(&prs[p]))
			;
		close(prs[p].fd);
	}
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

	for (q = 0; q < NQUEUE; q++)
		drain(ctl, q, prs, round, &ct);

	for (p = 0; p < NPROD; p++) {
		for (seq = 0; seq < prs[p].next + 1 && seq < MAXSEQ; seq++) {
			if (prs[p].state[seq] == ST_ACKED) {
				ct.acked++;
				if (prs[p].seen[seq] == 0) {
					fprintf(stderr, "%s: lost r%d-p%d-%d\n",
					    name, round, p, seq);
					ct.lost++;
				}
			} else if (prs[p].state[seq] == ST_MAYBE)
				ct.maybe++;
		}
	}

	/* The delayed item keeps its due time across the crash. */
	dt = tl_now_ms() - t_delay;
	snprintf(req, sizeof(req), "delay-%d", round % 10);
	if (dt < 900)
		tl_ckget(ctl, "crashdelay", NULL);
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
	    ct.acked, ct.maybe, ct.read, ct.lost, ct.unexpected,
	    ct.duplicated, ct.reordered);
	fflush(stdout);
	ck_assert_msg(ct.lost == 0, "%s round %d: %d acknowledged items lost",
	    name, round, ct.lost);
	ck_assert_msg(ct.unexpected == 0, "%s round %d: %d unexpected items",
	    name, round, ct.unexpected);
	ck_assert_msg(ct.duplicated == 0, "%s round %d: %d duplicated items",
	    name, round, ct.duplicated);
	ck_assert_msg(ct.reordered == 0, "%s round %d: %d items out of "
	    "producer order", name, round, ct.reordered);
	ck_assert_msg(ct.acked > 0, "%s round %d: nothing was acknowledged "
	    "in the load phase", name, round);
	for (p = 0; p < NPROD; p++) {
		free(prs[p].state);
		free(prs[p].seen);
	}
	free(prs);
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
