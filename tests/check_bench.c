/*
 * check_bench.c -- tests of `saker bench`, the load generator behind every
 * speed claim in docs/benchmarks.md.  Each mode runs briefly against the
 * real sakerd and must verify its items (lost 0, duplicates 0); then a
 * second client interferes on purpose (steals, re-sends, injects items) and
 * the verifier must notice; the RESP and beanstalk drivers run against
 * redis-server and beanstalkd.  Speed itself is never asserted here: that
 * is what the benchmarks are for.
 *
 * redis-server and beanstalkd are optional on a developer machine (the
 * test says it skipped them), but under CI=true a missing peer fails.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

/* ------------------------------------------------------------ helpers */

/* Value of a numeric field of bench's --json object, or -1 if absent. */
static double
json_num(const char *json, const char *name)
{
	char *pat = tl_strdupf("\"%s\":", name);
	const char *p = strstr(json, pat);
	double v = -1;

	if (p != NULL)
		v = strtod(p + strlen(pat), NULL);
	free(pat);
	return v;
}

static bool
json_true(const char *json, const char *name)
{
	char *pat = tl_strdupf("\"%s\":true", name);
	bool v = strstr(json, pat) != NULL;

	free(pat);
	return v;
}

/* Run `saker bench` with the NULL-terminated extra arguments against
 * port in the given mode; returns the exit status and the JSON report in
 * *json. */
static int
bench(const char *dir, int port, char **json, char **err, const char *mode, ...)
{
	const char *a[24];
	char *server = tl_strdupf("127.0.0.1:%d", port);
	int n = 0, rc;
	va_list ap;

	a[n++] = "bench";
	a[n++] = mode;
	a[n++] = "-s";
	a[n++] = server;
	a[n++] = "--json";
	a[n++] = "--quiet";
	va_start(ap, mode);
	for (const char *s = va_arg(ap, const char *); s != NULL && n < 23;
	    s = va_arg(ap, const char *))
		a[n++] = s;
	va_end(ap);
	while (n < 24)
		a[n++] = NULL;
	rc = tl_run_saker(dir, NULL, json, NULL, err, a[0], a[1], a[2], a[3],
	    a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13],
	    a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], NULL);
	free(server);
	return rc;
}

/* A clean run: exit 0, items verified, nothing lost or duplicated. */
static void
ck_clean(int rc, const char *json, const char *err)
{
	ck_assert_msg(rc == 0, "bench exited %d: %s", rc, err != NULL ? err : "");
	ck_assert_ptr_nonnull(json);
	ck_assert_msg(json_true(json, "verified"), "not verified: %s", json);
	ck_assert_msg(json_num(json, "lost") == 0, "lost: %s", json);
	ck_assert_msg(json_num(json, "duplicates") == 0, "dups: %s", json);
	ck_assert_msg(json_num(json, "errors") == 0, "errors: %s", json);
	ck_assert_msg(json_num(json, "foreign") == 0, "foreign: %s", json);
	ck_assert_msg(json_num(json, "ops") > 0, "no ops: %s", json);
	ck_assert_msg(json_num(json, "lat_count") > 0, "no latencies: %s", json);
	ck_assert_msg(json_num(json, "lat_p50_us") > 0 &&
	    json_num(json, "lat_p50_us") <= json_num(json, "lat_p99_us") &&
	    json_num(json, "lat_p99_us") <= json_num(json, "lat_max_us"),
	    "percentiles out of order: %s", json);
}

/* A child process that runs fn(fd) on its own connection to port until
 * the parent kills it. */
static pid_t
interferer(int port, void (*fn)(int fd))
{
	pid_t pid = fork();

	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		int fd;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		fd = tl_try_connect(port);
		if (fd == -1)
			_exit(1);
		fn(fd);
		_exit(0);
	}
	return pid;
}

static void
stop_child(pid_t pid)
{
	int status;

	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
}

/* Take whatever arrives on bench0 and drop it. */
static void
steal(int fd)
{
	char buf[4096];

	for (int i = 0; i < 2000; i++) {
		if (write(fd, "get bench0/t=100\r\n", 18) != 18)
			return;
		if (tl_readn(fd, buf, 1, 1000) <= 0)
			return;
		(void)read(fd, buf, sizeof(buf));
	}
}

/* Take one item and put it back twice: bench must count a duplicate. */
static void
resend(int fd)
{
	for (int i = 0; i < 50; i++) {
		char *line;

		if (write(fd, "get bench0/t=1000\r\n", 19) != 19)
			return;
		line = tl_readline_ms(fd, 2000);
		if (line == NULL)
			return;
		if (strncmp(line, "VALUE ", 6) == 0) {
			char key[64];
			unsigned flags;
			size_t len;
			char *data;

			if (sscanf(line, "VALUE %63s %u %zu", key, &flags, &len) != 3)
				return;
			data = malloc(len + 2);
			if (data == NULL || tl_readn(fd, data, len + 2, 2000) != (ssize_t)(len + 2))
				return;
			free(tl_readline_ms(fd, 2000)); /* END */
			for (int k = 0; k < 2; k++) {
				char *hdr = tl_strdupf("set bench0 %u 0 %zu\r\n", flags, len);

				(void)!write(fd, hdr, strlen(hdr));
				(void)!write(fd, data, len + 2);
				free(hdr);
				free(tl_readline_ms(fd, 2000)); /* STORED */
			}
			free(data);
		}
		free(line);
	}
}

/* Items bench never wrote. */
static void
inject(int fd)
{
	for (int i = 0; i < 20; i++) {
		(void)!write(fd, "set bench0 0 0 24\r\nxxxxxxxxxxxxxxxxxxxxxxxx\r\n", 45);
		free(tl_readline_ms(fd, 2000));
		tl_sleep_ms(20);
	}
	pause();
}

/* Path of a peer server binary, or NULL (a skip, or a failure in CI). */
static const char *
peer(const char *path)
{
	const char *ci = getenv("CI");

	if (access(path, X_OK) == 0)
		return path;
	if (ci != NULL && strcmp(ci, "true") == 0)
		ck_abort_msg("%s is missing (CI=true: .ci/run must install it)", path);
	fprintf(stderr, "check_bench: %s not installed, skipping\n", path);
	return NULL;
}

/* Start a peer server in dir on a free port; returns its pid. */
static pid_t
start_peer(const char *dir, int port, const char *const *argv)
{
	pid_t pid = fork();

	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (chdir(dir) != 0)
			_exit(126);
		freopen("/dev/null", "w", stdout);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 200; i++) {
		int fd = tl_try_connect(port);

		if (fd != -1) {
			close(fd);
			return pid;
		}
		tl_sleep_ms(25);
	}
	stop_child(pid);
	ck_abort_msg("%s did not start on port %d", argv[0], port);
	return -1;
}

/* -------------------------------------------------------------- tests */

/* Every mode with its own small parameters; run for a second each. */
static const char *const modes[][8] = {
	{ "pair", NULL },
	{ "pair", "-d", "16", "-q", "3", NULL },
	/* 8 MB in flight per connection: more than a socket takes at once,
	 * so the client's writes go partly through its write event */
	{ "pair", "-d", "16", "--size", "500000", NULL },
	{ "produce", "--rate", "2000", NULL },
	{ "consume", "--items", "3000", NULL },
	{ "mget", "--items", "200", "-k", "10", "-q", "10", NULL },
	{ "blocking", "--rate", "500", "--timeout", "200", NULL },
	{ "delayed", "--items", "300", "--window", "500", NULL },
	/* no retry_backoff configured: failed jobs come back at once */
	{ "retry", "--fail", "20", "-q", "2", NULL },
};

START_TEST(test_modes_verify)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	const char *const *m = modes[_i];
	char *json = NULL, *err = NULL;
	int rc = bench(s->dir, s->port, &json, &err, m[0], "-t", "1", "-c", "4",
	    m[1], m[2], m[3], m[4], m[5], m[6], NULL);

	ck_clean(rc, json, err);
	ck_assert_msg(strstr(json, m[0]) != NULL, "mode missing: %s", json);
	if (strcmp(m[0], "blocking") == 0)
		ck_assert_msg(json_num(json, "deliv_count") > 0, "%s", json);
	free(json);
	free(err);
	tl_server_free(s);
}
END_TEST

#ifdef HAVE_LMDB
/* A durable store too: the same checks through LMDB's commit path. */
START_TEST(test_pair_lmdb)
{
	struct tl_server *s = tl_server_start("lmdb", NULL);
	char *json = NULL, *err = NULL;
	int rc = bench(s->dir, s->port, &json, &err, "pair", "-t", "1", "-d", "4", NULL);

	ck_clean(rc, json, err);
	free(json);
	free(err);
	tl_server_free(s);
}
END_TEST
#endif

/* mget --fill empty|missing (issue 36): K keys at a time in turn from Q
 * names that are existing empty queues (made with flush) or no queue at
 * all; every key misses, for -t, and only the empty fill makes queues. */
START_TEST(test_mget_fill)
{
	static const char *const fills[] = { "empty", "missing" };
	struct tl_server *s = tl_server_start("memory", NULL);
	char *json = NULL, *err = NULL;
	int i, fd;

	for (i = 0; i < 2; i++) {
		int rc = bench(s->dir, s->port, &json, &err, "mget", "-t",
		    "500ms", "-c", "3", "-k", "10", "-q", "25", "--fill",
		    fills[i], "--queue-prefix", fills[i], NULL);
		char *want = tl_strdupf("\"keys\":10,\"fill\":\"%s\"",
		    fills[i]);

		ck_clean(rc, json, err);
		ck_assert_msg(strstr(json, want) != NULL &&
		    json_num(json, "queues") == 25 &&
		    json_num(json, "requests") > 0 &&
		    json_num(json, "items") == 0 &&
		    json_num(json, "misses") == json_num(json, "requests"),
		    "%s", json);
		fd = tl_connect(s->port);
		/* the 25 empty queues stay; missing names make none */
		ck_assert_int_eq(tl_stat(fd, "curr_queues"), 25);
		ck_assert_int_eq(tl_stat(fd, "queue_empty24_items"), 0);
		close(fd);
		free(want);
		free(json);
		free(err);
	}
	tl_server_free(s);
}
END_TEST

/* retry mode (issue 37): a share of jobs fails with the queue's backoff
 * (or an explicit delay); every item ends closed once or dead-lettered,
 * which the drain picks up from <queue>_dead. */
START_TEST(test_retry_mode)
{
	char *dir = tl_mkdtemp(), *conf = tl_strdupf("%s/r.conf", dir);
	char *json = NULL, *err = NULL;
	struct tl_server *s;
	FILE *f = fopen(conf, "w");
	int rc, fd;

	ck_assert_ptr_nonnull(f);
	fputs("[queue rq0]\nretry_backoff = 10,100\nmax_deliveries = 3\n"
	    "[queue rq1]\nretry_backoff = 10,100\nmax_deliveries = 3\n", f);
	fclose(f);
	s = tl_server_start("memory", "--config", conf, NULL);
	rc = bench(s->dir, s->port, &json, &err, "retry", "-t", "1", "-c", "4",
	    "-q", "2", "--queue-prefix", "rq", "--fail", "30", NULL);
	ck_clean(rc, json, err);
	ck_assert_msg(json_num(json, "items") > 0 &&
	    json_num(json, "retries") > 0 && json_num(json, "fail_pct") == 30,
	    "%s", json);
	fd = tl_connect(s->port);
	ck_assert_int_gt(tl_stat(fd, "retries_scheduled"), 0);
	close(fd);
	free(json);
	free(err);
	/* every job fails: nothing done, everything dead-lettered */
	rc = bench(s->dir, s->port, &json, &err, "retry", "-t", "0.5", "-c",
	    "2", "--queue-prefix", "rq", "--fail", "100", "--retry-delay", "5",
	    NULL);
	ck_clean(rc, json, err);
	ck_assert_msg(json_num(json, "items") == 0 &&
	    json_num(json, "dead_lettered") > 0, "%s", json);
	free(json);
	free(err);
	tl_server_free(s);
	tl_rmrf(dir);
	free(dir);
	free(conf);
}
END_TEST

/* Sum of the JSON array field `name` (the coarse histogram), or -1. */
static double
json_sum(const char *json, const char *name)
{
	char *pat = tl_strdupf("\"%s\":[", name);
	const char *p = strstr(json, pat);
	double sum = 0;
	char *end;

	free(pat);
	if (p == NULL)
		return -1;
	p = strchr(p, '[') + 1;
	while (*p != ']' && *p != '\0') {
		sum += strtod(p, &end);
		if (end == p)
			return -1;
		p = end;
		if (*p == ',')
			p++;
	}
	return sum;
}

/*
 * The soak's evidence (contrib/bench/soak.sh): the coarse histogram holds
 * every sample, and a pause of the server (SIGSTOP for 300 ms) shows up as
 * a slow sample of at least that length with its wall-clock time, within
 * the run.
 */
/* --ids: every set carries its own id: the run verifies as without ids,
 * and the server keeps exactly one id per item acknowledged, with no
 * duplicate answered. */
START_TEST(test_ids)
{
	/* a fast run sets more than the default max_dedup_ids (100000) */
	char *dir = tl_mkdtemp(), *conf = tl_strdupf("%s/i.conf", dir);
	char *json = NULL, *err = NULL;
	struct tl_server *s;
	int rc, fd;
	FILE *f = fopen(conf, "w");

	ck_assert_ptr_nonnull(f);
	fputs("[queue idb*]\nmax_dedup_ids = 10000000\n", f);
	fclose(f);
	s = tl_server_start("memory", "--config", conf, NULL);
	rc = bench(s->dir, s->port, &json, &err, "pair", "-t", "1", "-c", "2",
	    "-d", "4", "--queue-prefix", "idb", "--ids", NULL);

	ck_clean(rc, json, err);
	ck_assert_msg(strstr(json, "\"ids\":true") != NULL, "%s", json);
	fd = tl_connect(s->port);
	ck_assert_int_eq(tl_stat(fd, "queue_idb0_dedup_ids"), (long long)json_num(json, "in"));
	ck_assert_int_eq(tl_stat(fd, "queue_idb0_dedup_hits"), 0);
	close(fd);
	free(json);
	free(err);
	tl_server_free(s);
	free(conf);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

/* --resend: sets refused by a full queue (NOT_STORED) go again, the
 * same items, until stored; every item sent is acknowledged once and
 * received once.  Without --resend the refused ones are just errors. */
START_TEST(test_resend)
{
	char *dir = tl_mkdtemp(), *conf = tl_strdupf("%s/r.conf", dir);
	char *json = NULL, *err = NULL;
	struct tl_server *s;
	FILE *f = fopen(conf, "w");
	int rc;

	ck_assert_ptr_nonnull(f);
	fputs("[queue rs*]\nmax_items = 4\n", f);
	fclose(f);
	s = tl_server_start("memory", "--config", conf, NULL);
	rc = bench(s->dir, s->port, &json, &err, "blocking", "-t", "0.3", "-c",
	    "1", "-d", "16", "--rate", "3000", "--timeout", "200",
	    "--queue-prefix", "rs", "--resend", NULL);
	ck_assert_msg(rc == 0, "bench exited %d: %s", rc, err);
	ck_assert_msg(json_true(json, "verified") && json_num(json, "lost") == 0 &&
	    json_num(json, "duplicates") == 0 && json_num(json, "unacked_seen") == 0,
	    "%s", json);
	ck_assert_msg(json_num(json, "errors") > 0 && json_num(json, "resent") > 0 &&
	    json_num(json, "resend_pending") == 0, "%s", json);
	/* every item sent was stored in the end: acknowledged and received */
	ck_assert_msg(json_num(json, "set_items") > 0 &&
	    json_num(json, "in") == json_num(json, "set_items") &&
	    json_num(json, "out") == json_num(json, "set_items"), "%s", json);
	ck_assert_msg(strstr(json, "\"ids\":false") != NULL, "%s", json);
	free(json);
	free(err);
	/* the same without --resend: refused sets stay refused */
	rc = bench(s->dir, s->port, &json, &err, "blocking", "-t", "0.3", "-c",
	    "1", "-d", "16", "--rate", "3000", "--timeout", "200",
	    "--queue-prefix", "rs", NULL);
	ck_assert_msg(rc == 0, "bench exited %d: %s", rc, err);
	ck_assert_msg(json_num(json, "errors") > 0 && json_num(json, "resent") == -1,
	    "%s", json);
	free(json);
	free(err);
	tl_server_free(s);
	free(conf);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

START_TEST(test_hist_and_slow_samples)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	char *json = NULL, *err = NULL;
	struct timespec t0, t1;
	char secs[16];
	pid_t pauser;
	const char *p;
	double at;
	int rc;

	pauser = fork();
	ck_assert_int_ne(pauser, -1);
	if (pauser == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* (memcheck: the bench starts later and runs longer) */
		usleep((useconds_t)tl_slow(800) * 1000);
		kill(s->pid, SIGSTOP);
		usleep(300 * 1000);
		kill(s->pid, SIGCONT);
		_exit(0);
	}
	clock_gettime(CLOCK_REALTIME, &t0);
	snprintf(secs, sizeof(secs), "%d", tl_slow(2000) / 1000);
	rc = bench(s->dir, s->port, &json, &err, "pair", "-t", secs, "-d", "4",
	    NULL);
	clock_gettime(CLOCK_REALTIME, &t1);
	waitpid(pauser, NULL, 0);
	ck_clean(rc, json, err);
	ck_assert_msg(json_sum(json, "lat_hist") == json_num(json, "lat_count"),
	    "histogram does not add up: %s", json);
	ck_assert_msg(json_num(json, "lat_max_us") >= 250000, "no pause: %s",
	    json);
	p = strstr(json, "\"lat_slow\":[[");
	ck_assert_msg(p != NULL, "no slow samples: %s", json);
	at = strtod(p + strlen("\"lat_slow\":[["), NULL);
	ck_assert_msg(at >= (double)t0.tv_sec * 1000 &&
	    at <= (double)t1.tv_sec * 1000 + 1000, "slow sample time %.0f "
	    "outside the run: %s", at, json);
	free(json);
	free(err);
	tl_server_free(s);
}
END_TEST

START_TEST(test_detects_theft)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	pid_t thief = interferer(s->port, steal);
	char *json = NULL, *err = NULL;
	int rc = bench(s->dir, s->port, &json, &err, "pair", "-t", "1", "--no-clean", NULL);

	stop_child(thief);
	ck_assert_msg(rc != 0, "bench passed although items were taken: %s", json);
	ck_assert_ptr_nonnull(json);
	ck_assert_msg(json_num(json, "lost") > 0, "no loss reported: %s", json);
	/* the lost items are named: [connection, sequence, sent, acked] */
	ck_assert_msg(strstr(json, "\"lost_items\":[[") != NULL,
	    "lost items not listed: %s", json);
	ck_assert_msg(strstr(json, "\"unacked_items\":[]") != NULL,
	    "unacknowledged items listed: %s", json);
	free(json);
	free(err);
	tl_server_free(s);
}
END_TEST

START_TEST(test_detects_duplicates)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	pid_t dup = interferer(s->port, resend);
	char *json = NULL, *err = NULL;
	int rc = bench(s->dir, s->port, &json, &err, "produce", "-t", "1",
	    "--rate", "500", "--no-clean", NULL);

	stop_child(dup);
	ck_assert_msg(rc != 0, "bench passed with duplicates: %s", json);
	ck_assert_ptr_nonnull(json);
	ck_assert_msg(json_num(json, "duplicates") > 0, "no duplicate: %s", json);
	free(json);
	free(err);
	tl_server_free(s);
}
END_TEST

START_TEST(test_counts_foreign)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	pid_t inj = interferer(s->port, inject);
	char *json = NULL, *err = NULL;

	(void)bench(s->dir, s->port, &json, &err, "pair", "-t", "1", "--no-clean", NULL);
	stop_child(inj);
	ck_assert_ptr_nonnull(json);
	ck_assert_msg(json_num(json, "foreign") > 0, "foreign items not seen: %s", json);
	free(json);
	free(err);
	tl_server_free(s);
}
END_TEST

/* The server dies mid-run: bench says so and exits non-zero, promptly. */
START_TEST(test_server_dies)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	pid_t pid = fork();
	int rc;
	char *err = NULL;

	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		tl_sleep_ms(500);
		kill(s->pid, SIGKILL);
		_exit(0);
	}
	rc = bench(s->dir, s->port, NULL, &err, "pair", "-t", "30", NULL);
	waitpid(pid, NULL, 0);
	ck_assert_int_ne(rc, 0);
	ck_assert_msg(err != NULL && strstr(err, "connection") != NULL, "stderr: %s",
	    err != NULL ? err : "(none)");
	free(err);
	tl_server_free(s);
}
END_TEST

START_TEST(test_bad_usage)
{
	char *dir = tl_mkdtemp(), *err = NULL;

	ck_assert_int_ne(tl_run_saker(dir, NULL, NULL, NULL, &err, "bench",
	    "--depth", "0", NULL), 0);
	ck_assert_msg(strstr(err, "bad value") != NULL, "%s", err);
	free(err);
	ck_assert_int_ne(tl_run_saker(dir, NULL, NULL, NULL, &err, "bench",
	    "no-such-mode", NULL), 0);
	ck_assert_msg(strstr(err, "unknown mode") != NULL, "%s", err);
	free(err);
	ck_assert_int_ne(tl_run_saker(dir, NULL, NULL, NULL, &err, "bench",
	    "-s", "127.0.0.1:1", "-t", "1", "--quiet", NULL), 0);
	ck_assert_msg(strstr(err, "refused") != NULL, "%s", err);
	free(err);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

/*
 * The report people read (without --json), which every number in
 * docs/benchmarks.md was copied from: the header naming the run, the
 * measured rates, the percentiles in order, the mode's own latency
 * lines, the verdict, and the server's CPU with --server-pid.
 */
static const char *const text_modes[][7] = {
	{ "pair", NULL },
	{ "blocking", "--rate", "500", "--timeout", "200", NULL },
	{ "delayed", "--items", "200", "--window", "300", NULL },
	{ "mget", "--items", "100", "-k", "5", NULL },
	{ "pair", "--no-verify", "--size", "8", "--warmup", "1", NULL },
};

/* The number after `what` in text (-1 when missing). */
static double
num_after(const char *text, const char *what)
{
	const char *p = strstr(text, what);

	return p != NULL ? strtod(p + strlen(what), NULL) : -1;
}

START_TEST(test_text_report)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	const char *const *m = text_modes[_i];
	char *server = tl_strdupf("127.0.0.1:%d", s->port);
	char *pid = tl_strdupf("%ld", (long)s->pid);
	char *out = NULL, *err = NULL, *head;
	bool verify = strcmp(m[1] != NULL ? m[1] : "", "--no-verify") != 0;
	int rc = tl_run_saker(s->dir, NULL, &out, NULL, &err, "bench", m[0],
	    "-s", server, "-t", "1", "-c", "2", "--quiet", "--server-pid", pid,
	    "--queue-prefix", "txt", m[1], m[2], m[3], m[4], m[5], NULL);

	ck_assert_msg(rc == 0, "bench %s exited %d: %s", m[0], rc, err);
	head = tl_strdupf("saker bench %s: memcache %s, 2 conns, depth 1, ",
	    m[0], server);
	ck_assert_msg(strncmp(out, head, strlen(head)) == 0, "%s", out);
	ck_assert_msg(strstr(out, "  measured ") != NULL &&
	    num_after(out, " items (") >= 0 && num_after(out, " ops (") > 0,
	    "%s", out);
	/* percentiles in order, and a count */
	ck_assert_msg(num_after(out, "request latency: p50=") > 0 &&
	    num_after(out, "request latency: p50=") <= num_after(out, " p99=") &&
	    num_after(out, " p99=") <= num_after(out, " max=") &&
	    num_after(out, "(us, n=") > 0, "%s", out);
	if (strcmp(m[0], "blocking") == 0)
		ck_assert_msg(strstr(out, "  delivery latency (STORED to "
		    "receipt): p50=") != NULL && strstr(out, "  delivery latency "
		    "(set sent to receipt): p50=") != NULL, "%s", out);
	if (strcmp(m[0], "delayed") == 0)
		ck_assert_msg(strstr(out, "  promotion lateness (receipt - due): "
		    "p50=") != NULL && strstr(out, "items arrived more than 1 ms "
		    "early") != NULL, "%s", out);
	if (strcmp(m[0], "mget") == 0)
		ck_assert_msg(strstr(out, "multi-gets of ") != NULL, "%s", out);
	if (verify)
		ck_assert_msg(strstr(out, "  verify: in ") != NULL &&
		    strstr(out, "lost 0, duplicates 0") != NULL &&
		    strstr(out, "=> ok") != NULL, "%s", out);
	else
		ck_assert_msg(strstr(out, "  verify: off\n") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "error replies") == NULL &&
	    strstr(out, "timed out") == NULL, "%s", out);
	ck_assert_msg(num_after(out, "  client cpu ") >= 0 &&
	    num_after(out, ", server cpu ") >= 0 &&
	    num_after(out, "% of one core: user ") >= 0 &&
	    num_after(out, " s, system ") >= 0 &&
	    strstr(out, strcmp(m[0], "mget") == 0 ? " us per request)\n" :
	    " us per item)\n") != NULL, "%s", out);
	free(head);
	free(out);
	free(err);
	free(pid);
	free(server);
	tl_server_free(s);
}
END_TEST

/* --server-pid in the JSON report too. */
START_TEST(test_json_server_cpu)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	char *pid = tl_strdupf("%ld", (long)s->pid), *json = NULL, *err = NULL;
	int rc = bench(s->dir, s->port, &json, &err, "pair", "-t", "1",
	    "--server-pid", pid, NULL);

	ck_clean(rc, json, err);
	ck_assert_msg(json_num(json, "server_cpu_s") >= 0 &&
	    json_num(json, "server_cpu_pct") >= 0, "%s", json);
	/* user + system, and per item (rounded to 1 ms and 0.01 us) */
	ck_assert_msg(fabs(json_num(json, "server_user_s") +
	    json_num(json, "server_sys_s") - json_num(json, "server_cpu_s")) <
	    0.0025 && json_num(json, "items") > 0 &&
	    fabs(json_num(json, "server_us_per_item") -
	    json_num(json, "server_cpu_s") * 1e6 / json_num(json, "items")) <=
	    0.01 + 0.002 * json_num(json, "server_us_per_item") +
	    0.0005 * 1e6 / json_num(json, "items"), "%s", json);
	free(json);
	free(err);
	free(pid);
	tl_server_free(s);
}
END_TEST

/*
 * The server's CPU in the report is that of the measured phase, not of
 * the drain that verifies after it (which once made a durable produce run
 * look CPU-bound).  Here the drain empties 200 MB the run did not write,
 * which costs the server far more than 50 sets in a second.
 */
START_TEST(test_server_cpu_excludes_drain)
{
	enum { N = 2000, LEN = 100000 };
	struct tl_server *s = tl_server_start("memory", NULL);
	char *pid = tl_strdupf("%ld", (long)s->pid), *json = NULL, *err = NULL;
	const char *head = "set dr0 0 0 100000 noreply\r\n";
	size_t hl = strlen(head);
	char *cmd = malloc(hl + LEN + 2);
	double before, after;
	int fd = tl_connect(s->port), i, rc;

	ck_assert(cmd != NULL);
	memcpy(cmd, head, hl);
	memset(cmd + hl, 'd', LEN);
	memcpy(cmd + hl + LEN, "\r\n", 2);
	for (i = 0; i < N; i++)
		mustsend(fd, cmd, hl + LEN + 2);
	/* in order: once this is stored, so are the others */
	mustsends(fd, "set drsync 0 0 1\r\nx\r\n");
	ckresp(fd, "STORED\r\n");
	close(fd);
	before = tl_proc_cpu_s(s->pid);
	rc = bench(s->dir, s->port, &json, &err, "produce", "-c", "1", "-t", "1",
	    "--rate", "50", "--no-clean", "--queue-prefix", "dr", "--server-pid",
	    pid, NULL);
	after = tl_proc_cpu_s(s->pid);
	ck_assert_msg(rc == 0 && json != NULL, "bench exited %d: %s", rc, err);
	ck_assert_msg(json_num(json, "lost") == 0 &&
	    json_num(json, "foreign") >= N, "%s", json);
	/* /proc counts in 10 ms ticks; this drain measured 40-60 ms */
	ck_assert_msg(after - before >= 0.02,
	    "the drain cost the server only %.3f s", after - before);
	ck_assert_msg(json_num(json, "server_cpu_s") <= (after - before) / 2,
	    "reported %.3f s of the server's %.3f s: %s",
	    json_num(json, "server_cpu_s"), after - before, json);
	free(cmd);
	free(json);
	free(err);
	free(pid);
	tl_server_free(s);
}
END_TEST

#define L30 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define L300 L30 L30 L30 L30 L30 L30 L30 L30 L30 L30

/* Every refusal of a command line: exit status 1 and the reason; --help
 * is no refusal. */
static const struct {
	const char *argv[6];
	const char *says;
} refusals[] = {
	{ { "pair", "extra", NULL }, "unexpected argument 'extra'" },
	{ { "--no-such-option", NULL }, "usage: saker bench" },
	{ { "-m", "sideways", NULL }, "bad value 'sideways' for option -m/--mode\n" },
	{ { "--protocol", "smtp", NULL }, "bad value 'smtp' for option --protocol\n" },
	{ { "--size", "0", NULL }, "bad value '0' for option --size\n" },
	{ { "--size", "8", NULL }, "--size must be at least 16" },
	{ { "--warmup", "-1", NULL }, "bad value '-1' for option --warmup\n" },
	{ { "--server-pid", "0", NULL }, "bad value '0' for option --server-pid\n" },
	/* longer than its 256-byte host buffer, a ':' past the end: it once
	 * wrote a NUL there */
	{ { "-s", L300 ":1", NULL }, "server address too long" },
	{ { "mget", "--protocol", "resp", NULL }, "mode mget needs the memcache protocol" },
	{ { "delayed", "--protocol", "resp", NULL }, "mode delayed needs the memcache protocol" },
	{ { "mget", "--protocol", "beanstalk", NULL }, "mode mget is not available with beanstalk" },
	{ { "delayed", "--protocol", "beanstalk", NULL }, "mode delayed is not available with beanstalk" },
	{ { "retry", "--protocol", "resp", NULL }, "mode retry needs the memcache protocol" },
	{ { "retry", "--fail", "101", NULL }, "bad value '101' for option --fail\n" },
	{ { "retry", "-d", "4", NULL }, "mode retry runs at depth 1" },
	{ { "mget", "--fill", "full", NULL }, "bad value 'full' for option --fill\n" },
	{ { "pair", "--fill", "empty", NULL }, "--fill is for mode mget" },
	{ { "mget", "-k", "10", "-q", "5", NULL }, "-q must be equal to -k with --fill items" },
	{ { "mget", "-q", "50", "--fill", "missing", NULL }, "-q must be at least -k" },
	{ { "pair", "--ids", "--protocol", "resp", NULL }, "--ids needs the memcache protocol" },
	{ { "pair", "--resend", NULL }, "--resend is for modes produce and blocking" },
	{ { "blocking", "--resend", "--no-verify", NULL }, "--resend is for modes produce and blocking, on the memcache protocol, verifying" },
};

START_TEST(test_refusals)
{
	char *dir = tl_mkdtemp(), *out = NULL, *err = NULL;
	const char *const *a = refusals[_i].argv;

	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "bench",
	    a[0], a[1], a[2], a[3], a[4], NULL), 1);
	ck_assert_msg(strstr(err, refusals[_i].says) != NULL, "%s: %s", a[0],
	    err);
	free(out);
	free(err);
	if (_i == 0) {
		/* --help: the usage on stdout, status 0 */
		ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err,
		    "bench", "--help", NULL), 0);
		ck_assert_msg(strstr(out, "usage: saker bench [MODE] [options]") !=
		    NULL && strstr(out, "--server-pid PID") != NULL, "%s", out);
		free(out);
		free(err);
	}
	tl_rmrf(dir);
	free(dir);
}
END_TEST

/* The other protocols against the real servers they were written for:
 * each peer's command line ("PORT" stands for the port) and the bench
 * modes to run on it. */
static const struct {
	const char *proto;
	const char *argv[12];
	const char *modes[3];
} peers[] = {
	{ "resp", { "/usr/bin/redis-server", "--port", "PORT", "--bind",
	    "127.0.0.1", "--save", "", "--appendonly", "no", NULL },
	  { "pair", "blocking", NULL } },
	{ "beanstalk", { "/usr/bin/beanstalkd", "-l", "127.0.0.1", "-p", "PORT",
	    NULL },
	  { "pair", NULL } },
};

START_TEST(test_peers)
{
	const char *argv[12];
	char *dir, *portstr;
	int port;
	pid_t pid;

	if (peer(peers[_i].argv[0]) == NULL)
		return;
	dir = tl_mkdtemp();
	port = tl_free_port();
	portstr = tl_strdupf("%d", port);
	for (int k = 0; k < 12; k++)
		argv[k] = peers[_i].argv[k] != NULL && strcmp(peers[_i].argv[k],
		    "PORT") == 0 ? portstr : peers[_i].argv[k];
	pid = start_peer(dir, port, argv);
	for (int m = 0; peers[_i].modes[m] != NULL; m++) {
		char *json = NULL, *err = NULL;
		int rc = bench(dir, port, &json, &err, peers[_i].modes[m],
		    "--protocol", peers[_i].proto, "-t", "1", "--rate", "300", NULL);

		ck_clean(rc, json, err);
		free(json);
		free(err);
	}
	stop_child(pid);
	free(portstr);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

int
main(void)
{
	Suite *su = suite_create("bench");
	TCase *tc = tcase_create("bench");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_modes_verify, 0, (int)(sizeof(modes) / sizeof(modes[0])));
#ifdef HAVE_LMDB
	tcase_add_test(tc, test_pair_lmdb);
#endif
	tcase_add_test(tc, test_hist_and_slow_samples);
	tcase_add_test(tc, test_retry_mode);
	tcase_add_test(tc, test_resend);
	tcase_add_test(tc, test_ids);
	tcase_add_test(tc, test_mget_fill);
	tcase_add_test(tc, test_detects_theft);
	tcase_add_test(tc, test_detects_duplicates);
	tcase_add_test(tc, test_counts_foreign);
	tcase_add_test(tc, test_server_dies);
	tcase_add_test(tc, test_bad_usage);
	tcase_add_loop_test(tc, test_text_report, 0,
	    (int)(sizeof(text_modes) / sizeof(text_modes[0])));
	tcase_add_test(tc, test_json_server_cpu);
	tcase_add_test(tc, test_server_cpu_excludes_drain);
	tcase_add_loop_test(tc, test_refusals, 0,
	    (int)(sizeof(refusals) / sizeof(refusals[0])));
	tcase_add_loop_test(tc, test_peers, 0, (int)(sizeof(peers) / sizeof(peers[0])));
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
