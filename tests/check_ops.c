/* check_ops.c -- integration tests of what operators use: --config limits
 * and SIGHUP reload, /metrics and /healthz, status, fanout, the pidfile,
 * -d, and startup errors. */
#include "config.h"

#include <check.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

#define http_get(port, path) tl_http((port), "GET", (path), NULL, NULL)

/* Run sakerd with args (NULL-terminated); return its exit status and
 * put its stderr in *err. */
static int
run_sakerd(char **err, ...)
{
	char *argv[TL_MAX_ARGS];
	char *logpath = tl_strdupf("%s/run.err", tl_dir);
	va_list ap;
	int argc = 0, status;
	pid_t pid;

	argv[argc++] = (char *)tl_sakerd_path();
	va_start(ap, err);
	while (argc < TL_MAX_ARGS - 1 && (argv[argc] = va_arg(ap, char *)) != NULL)
		argc++;
	va_end(ap);
	argv[argc] = NULL;
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		FILE *f = freopen(logpath, "w", stderr);
		(void)f;
		dup2(STDERR_FILENO, STDOUT_FILENO);
		/* relative paths (the default store) land in the test's dir */
		if (chdir(tl_dir) != 0)
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	*err = tl_read_file(logpath, NULL);
	free(logpath);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

START_TEST(test_config_limits)
{
	char *conf = tl_write_file("q.conf",
	    "max_open = 2\n"
	    "[queue lim]\nmax_items = 2\n"
	    "[queue ring*]\nmax_items = 2\ndiscard_old_when_full = yes\n"
	    "[queue small]\nmax_item_size = 4\n"
	    "[queue ot]\nopen_timeout = 200ms\n");
	struct tl_server *s = tl_server_start("memory", "--config", conf, NULL);
	int c = tl_connect(s->port);

	tl_set(c, "lim", "a");
	tl_set(c, "lim", "b");
	mustsends(c, "set lim 0 0 1\r\nc\r\n");
	ckresp(c, "NOT_STORED\r\n");
	tl_ckget(c, "lim", "a");

	tl_set(c, "ring1", "a");
	tl_set(c, "ring1", "b");
	tl_set(c, "ring1", "c");
	tl_ckget(c, "ring1", "b");
	ck_assert_int_eq(tl_stat(c, "queue_ring1_discarded"), 1);

	mustsends(c, "set small 0 0 5\r\nhello\r\n");
	ckresp(c, "SERVER_ERROR object too large for cache\r\n");
	tl_set(c, "small", "hey");

	/* max_open = 2 from the defaults */
	tl_set(c, "two", "1");
	tl_set(c, "two", "2");
	tl_set(c, "two", "3");
	tl_ckget(c, "two/open", "1");
	tl_ckget(c, "two/open", "2");
	mustsends(c, "get two/open\r\n");
	ckresp(c, "CLIENT_ERROR too many open items\r\n");

	/* open_timeout returns the item to the head */
	tl_set(c, "ot", "x");
	tl_ckget(c, "ot/open", "x");
	tl_wait_stat(c, "queue_ot_open_timeouts", 1, 3000);
	ck_assert_int_eq(tl_stat(c, "queue_ot_items"), 1);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	free(conf);
}
END_TEST

START_TEST(test_config_reload)
{
	char *conf = tl_write_file("q.conf", "[queue q]\nmax_items = 1\n");
	struct tl_server *s = tl_server_start("memory", "--config", conf, NULL);
	int c = tl_connect(s->port);

	tl_set(c, "q", "a");
	mustsends(c, "set q 0 0 1\r\nb\r\n");
	ckresp(c, "NOT_STORED\r\n");

	/* a bad file keeps the old configuration */
	tl_reload(s, conf, "[queue q]\nmax_items = lots\n");
	mustsends(c, "set q 0 0 1\r\nb\r\n");
	ckresp(c, "NOT_STORED\r\n");

	/* a good one applies */
	tl_reload(s, conf, "[queue q]\nmax_items = 3\n");
	tl_set(c, "q", "b");
	close(c);
	tl_server_stop(s);
	{
		char *log = tl_read_file(s->log, NULL);
		ck_assert_msg(log != NULL && strstr(log, "max_items wants a whole number") != NULL,
		    "the reload error is not in the log: %s", log ? log : "(none)");
		free(log);
	}
	tl_server_free(s);
	free(conf);
}
END_TEST

START_TEST(test_config_bad_file)
{
	char *conf = tl_write_file("bad.conf", "# ok\n[queue q]\nmax_itemz = 3\n");
	char *err = NULL;
	int rc = run_sakerd(&err, "-p", "0", "-s", "/nonexistent/x", "--config", conf, NULL);

	ck_assert_int_eq(rc, 1);
	ck_assert_msg(strstr(err, "bad.conf:3") != NULL, "stderr: %s", err);
	free(err);
	free(conf);
}
END_TEST

/* Dead letters routed to a queue the same section governs, or round a
 * cycle, are refused at startup with the sections named; a section of
 * its own for the dead-letter queue makes the same routing valid. */
START_TEST(test_config_dead_letter_loops)
{
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "[queue jobs*]\nmax_deliveries = 1\ndead_letter = jobs_graveyard\n",
		  "[queue jobs*]: dead_letter = jobs_graveyard is governed by"
		  " [queue jobs*] itself" },
		{ "[queue a]\nmax_deliveries = 1\ndead_letter = a\n",
		  "[queue a]: dead_letter = a is governed by [queue a] itself" },
		{ "max_deliveries = 2\ndead_letter = spent\n",
		  "the settings before any section: dead_letter = spent" },
		{ "[queue a]\nmax_deliveries = 1\ndead_letter = b\n"
		  "[queue b]\nmax_deliveries = 1\ndead_letter = c\n"
		  "[queue c]\nmax_deliveries = 1\ndead_letter = a\n",
		  "[queue a]: dead letters route in a cycle (dead_letter = b"
		  " leads back to [queue a])" },
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *conf = tl_write_file("dl.conf", bad[i].text), *err = NULL;
		int rc = run_sakerd(&err, "-p", "0", "-s", "/nonexistent/x",
		    "--config", conf, NULL);

		ck_assert_int_eq(rc, 1);
		ck_assert_msg(strstr(err, bad[i].want) != NULL, "case %zu: %s",
		    i, err);
		free(err);
		free(conf);
	}
	{
		char *conf = tl_write_file("dl.conf", "[queue jobs*]\n"
		    "max_deliveries = 1\ndead_letter = jobs_graveyard\n"
		    "[queue jobs_graveyard]\n");
		struct tl_server *s = tl_server_start("memory", "--config",
		    conf, NULL);

		tl_server_stop(s);
		tl_server_free(s);
		free(conf);
	}
}
END_TEST

START_TEST(test_metrics_and_health)
{
	int hport = tl_free_port();
	char *spec = tl_strdupf("127.0.0.1:%d", hport);
	struct tl_server *s = tl_server_start("memory", "--http", spec, NULL);
	int c = tl_connect(s->port);
	char *r;

	tl_set(c, "jobs", "abc");
	mustsends(c, "set jobs/delay=60000 0 0 1\r\nd\r\n");
	ckresp(c, "STORED\r\n");
	r = http_get(hport, "/metrics");
	ck_assert_msg(strstr(r, "HTTP/1.1 200") != NULL || strstr(r, "HTTP/1.0 200") != NULL, "%s", r);
	ck_assert_ptr_nonnull(strstr(r, "# TYPE saker_queue_items gauge"));
	ck_assert_ptr_nonnull(strstr(r, "saker_queue_items{queue=\"jobs\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(r, "saker_queue_delayed_items{queue=\"jobs\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(r, "saker_store_commit_seconds_bucket{le=\"+Inf\"}"));
	/* the memory store has no files to checkpoint */
	ck_assert_ptr_nonnull(strstr(r, "\nsaker_store_checkpoints_total 0\n"));
	free(r);
	r = http_get(hport, "/healthz");
	ck_assert_ptr_nonnull(strstr(r, " 200 "));
	ck_assert_ptr_nonnull(strstr(r, "\r\n\r\nok\n"));
	free(r);
	r = http_get(hport, "/nope");
	ck_assert_ptr_nonnull(strstr(r, " 404 "));
	free(r);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	free(spec);
}
END_TEST

/* A counter of /metrics as a number (-1 when it is not there). */
static double
metric_value(const char *text, const char *name)
{
	char *pat = tl_strdupf("\n%s ", name);
	const char *p = strstr(text, pat);
	double v = p != NULL ? strtod(p + strlen(pat), NULL) : -1;

	free(pat);
	return v;
}

/* The checkpoints of the store's files are on /metrics: LMDB's (due a
 * second after the last one, at a commit) and SQLite's WAL checkpoint
 * (past 1,000 pages of WAL; 60 batches of 100 kB make 6 MB). */
static const char *const ckpt_stores[] = {
#ifdef HAVE_LMDB
	"lmdb",
#endif
#ifdef HAVE_SQLITE
	"sqlite",
#endif
	NULL
};

START_TEST(test_metrics_checkpoints)
{
	int hport = tl_free_port(), c, i;
	char *spec = tl_strdupf("127.0.0.1:%d", hport), *r;
	struct tl_server *s = tl_server_start(ckpt_stores[_i], "--http", spec,
	    NULL);
	char *big = malloc(100001);

	ck_assert_ptr_nonnull(big);
	memset(big, 'c', 100000);
	big[100000] = '\0';
	c = tl_connect(s->port);
	r = http_get(hport, "/metrics");
	ck_assert_msg(metric_value(r, "saker_store_checkpoints_total") >= 0,
	    "%s", r);
	free(r);
	for (i = 0; i < 60; i++)
		tl_set(c, "ck", big);
	tl_sleep_ms(1100);
	tl_set(c, "ck", "x");
	r = http_get(hport, "/metrics");
	ck_assert_msg(metric_value(r, "saker_store_checkpoints_total") >= 1 &&
	    metric_value(r, "saker_store_checkpoint_seconds_total") > 0 &&
	    metric_value(r, "saker_store_checkpoint_seconds_total") <=
	    metric_value(r, "saker_store_commit_seconds_sum"), "%s", r);
	free(r);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	free(big);
	free(spec);
}
END_TEST

START_TEST(test_status_modes)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	int c = tl_connect(s->port);

	mustsends(c, "status\r\n");
	ckresp(c, "UP\r\n");
	tl_set(c, "q", "a");
	mustsends(c, "status readonly\r\n");
	ckresp(c, "END\r\n");
	mustsends(c, "set q 0 0 1\r\nb\r\n");
	ckresp(c, "SERVER_ERROR server is read-only\r\n");
	tl_ckget(c, "q/peek", "a");
	mustsends(c, "status quiescent\r\nstatus\r\n");
	ckresp(c, "END\r\nQUIESCENT\r\n");
	mustsends(c, "get q\r\n");
	ckresp(c, "SERVER_ERROR server is quiescent\r\n");
	mustsends(c, "status up\r\n");
	ckresp(c, "END\r\n");
	tl_ckget(c, "q", "a");
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
}
END_TEST

START_TEST(test_fanout)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	int c = tl_connect(s->port);

	tl_set(c, "jobs", "before");
	/* a write creates the child (flush: empty); a get does not */
	tl_ckget(c, "jobs+audit", NULL);
	ck_assert_int_eq(tl_stat(c, "queue_jobs+audit_items"), -1);
	mustsends(c, "flush jobs+audit\r\n");
	ckresp(c, "END\r\n");
	tl_set(c, "jobs", "after");
	tl_ckget(c, "jobs", "before");
	tl_ckget(c, "jobs", "after");
	tl_ckget(c, "jobs+audit", "after");
	tl_ckget(c, "jobs+audit", NULL);
	mustsends(c, "delete jobs+audit\r\n");
	ckresp(c, "DELETED\r\n");
	tl_set(c, "jobs", "later");
	tl_ckget(c, "jobs", "later");
	ck_assert_int_eq(tl_stat(c, "queue_jobs+audit_items"), -1);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
}
END_TEST

/* Server RSS in kB, from /proc. */
static long
rss_kb(pid_t pid)
{
	char path[64], *st, *p;
	size_t len;
	long kb = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	st = tl_read_file(path, &len);
	if (st != NULL && (p = strstr(st, "VmRSS:")) != NULL)
		kb = strtol(p + 6, NULL, 10);
	free(st);
	return kb;
}

/* `n` short-lived queues (set, get, delete each), in pipelined chunks;
 * each chunk's replies are read up to its closing VERSION line (no reply
 * or value of these contains "VERSION"). */
#define INBUF (1 << 20)

/* Send a pipelined chunk ending in "version" and read its replies into
 * in[INBUF] up to the closing VERSION line; returns the bytes read. */
static size_t
send_to_version(int c, const char *buf, size_t len, char *in)
{
	size_t got = 0;

	mustsend(c, buf, len);
	do {
		ssize_t r = tl_readn(c, in + got, 1, 5000);

		ck_assert_int_eq(r, 1);
		got++;
		/* then whatever else is there, without waiting */
		r = recv(c, in + got, INBUF - got, MSG_DONTWAIT);
		if (r > 0)
			got += (size_t)r;
		ck_assert_uint_lt(got, INBUF);
	} while (got < 10 || memcmp(in + got - 2, "\r\n", 2) != 0 ||
	    memmem(in, got, "VERSION ", 8) == NULL);
	return got;
}

static void
churn_queues(int c, int round, int n)
{
	char *buf = malloc(1 << 16), *in = malloc(INBUF);
	size_t len = 0;
	int i;

	ck_assert(buf != NULL && in != NULL);
	for (i = 0; i < n; i++) {
		len += (size_t)snprintf(buf + len, 256, "set r%d-%d 0 0 1\r\nx\r\n"
		    "get r%d-%d\r\ndelete r%d-%d\r\n", round, i, round, i,
		    round, i);
		if (len < 60000 && i + 1 < n)
			continue;
		len += (size_t)snprintf(buf + len, 64, "version\r\n");
		send_to_version(c, buf, len, in);
		len = 0;
	}
	free(in);
	free(buf);
}

/* Deleted queues leave nothing behind: a stream of short-lived queue names
 * (reply queues) must not grow the server. */
START_TEST(test_queue_churn)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	int c = tl_connect(s->port);
	long r1, r3;

	churn_queues(c, 0, 30000);
	r1 = rss_kb(s->pid);
	churn_queues(c, 1, 30000);
	churn_queues(c, 2, 30000);
	r3 = rss_kb(s->pid);
	ck_assert_int_eq(tl_stat(c, "queue_deletes"), 90000);
	printf("queue churn: server RSS %ld kB after 30000 queues, %ld kB after "
	    "90000\n", r1, r3);
#if !defined(__SANITIZE_ADDRESS__)
	/* (ASan keeps freed memory in quarantine, and valgrind's RSS is
	 * its own shadow memory: only counts there; memcheck reports
	 * leaks itself) */
	if (getenv("TL_VALGRIND") == NULL)
		ck_assert_msg(r1 > 0 && r3 - r1 < 4096,
		    "RSS grew from %ld to %ld kB", r1, r3);
#endif
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
}
END_TEST

/* `n` multi-gets of 100 distinct names each (round r), pipelined; each
 * chunk's replies are read up to the closing VERSION line. */
static void
get_missing(int c, int round, int n)
{
	char *buf = malloc(1 << 16), *in = malloc(INBUF);
	size_t len = 0, got;
	int i, k;

	ck_assert(buf != NULL && in != NULL);
	for (i = 0; i < n; i++) {
		len += (size_t)snprintf(buf + len, 8, "get");
		for (k = 0; k < 100; k++)
			len += (size_t)snprintf(buf + len, 32, " m%d-%d-%d",
			    round, i, k);
		len += (size_t)snprintf(buf + len, 8, "\r\n");
		if (len < 50000 && i + 1 < n)
			continue;
		len += (size_t)snprintf(buf + len, 64, "version\r\n");
		got = send_to_version(c, buf, len, in);
		len = 0;
		/* every key missed: nothing but END lines before VERSION */
		ck_assert_ptr_null(memmem(in, got, "VALUE", 5));
	}
	free(in);
	free(buf);
}

/* A get of a queue that does not exist leaves nothing behind (issue 36, a
 * miss is cheap): no queue in `stats`, no memory held for the name, and
 * still no answer it would not have given before: a name set after its
 * miss is served, a get that waits on a missing name is woken by the set,
 * and a queue the store makes itself (an expire_to target deleted, then
 * made again by the next expiry) is read by a plain get. */
START_TEST(test_miss_leaves_nothing)
{
	char *conf = tl_write_file("q.conf",
	    "[queue ex]\nmax_age = 300ms\nexpire_to = ex_late\n");
	struct tl_server *s = tl_server_start("memory", "--config", conf, NULL);
	int c = tl_connect(s->port), w = tl_connect(s->port);
	long long q0 = tl_stat(c, "curr_queues");
	long r1, r2;

	ck_assert_int_eq(q0, 0);
	tl_ckget(c, "nosuch", NULL);
	mustsends(c, "get nosuch/peek a b c a\r\n");
	ckresp(c, "END\r\n");
	mustsends(c, "mg nosuch v\r\n");
	ckresp(c, "EN\r\n");
	get_missing(c, 0, 1000);
	ck_assert_int_eq(tl_stat(c, "curr_queues"), q0);
	ck_assert_int_eq(tl_stat(c, "queue_nosuch_items"), -1);
	/* 100,000 distinct names more do not grow the server */
	r1 = rss_kb(s->pid);
	get_missing(c, 1, 1000);
	r2 = rss_kb(s->pid);
	printf("misses: server RSS %ld kB after 100,000 missing names, %ld kB "
	    "after 200,000\n", r1, r2);
#if !defined(__SANITIZE_ADDRESS__)
	if (getenv("TL_VALGRIND") == NULL)
		ck_assert_msg(r1 > 0 && r2 - r1 < 1024, "RSS grew from %ld to "
		    "%ld kB", r1, r2);
#endif
	ck_assert_int_eq(tl_stat(c, "curr_queues"), q0);
	/* a miss is not remembered as a miss */
	tl_set(c, "nosuch", "now");
	mustsends(c, "get a b nosuch\r\n");
	ckresp(c, "VALUE nosuch 0 3\r\nnow\r\nEND\r\n");
	/* a wait on a missing name is woken by the set that creates it */
	mustsends(w, "get later/t=5000\r\n");
	tl_sleep_ms(100);
	tl_set(c, "later", "woken");
	ckresp(w, "VALUE later/t=5000 0 5\r\nwoken\r\nEND\r\n");
	/* the store makes ex_late for the expired item: a get finds it */
	tl_set(c, "ex", "first");
	tl_ckget(c, "ex_late", NULL);
	tl_sleep_ms(400);
	tl_ckget(c, "ex", NULL);	/* expired: moved to ex_late */
	tl_ckget(c, "ex_late", "first");
	/* and again after a delete */
	mustsends(c, "delete ex_late\r\n");
	ckresp(c, "DELETED\r\n");
	tl_set(c, "ex", "old");
	tl_ckget(c, "ex_late", NULL);
	tl_sleep_ms(400);
	tl_ckget(c, "ex", NULL);	/* expired: moved to ex_late */
	tl_ckget(c, "ex_late", "old");
	close(w);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	free(conf);
}
END_TEST

/* expire_to added by a reload to a queue already in use: its target is
 * made at the reload (listed before any expiry) and gets the expired
 * items; taken out again, they are dropped as before. */
START_TEST(test_expire_to_by_reload)
{
	char *conf = tl_write_file("r.conf", "[queue rq]\nmax_age = 200ms\n");
	struct tl_server *s = tl_server_start("memory", "--config", conf, NULL);
	int c = tl_connect(s->port);

	tl_set(c, "rq", "a");
	tl_set(c, "other", "o");
	ck_assert_int_eq(tl_stat(c, "queue_rq_late_items"), -1);
	tl_reload(s, conf, "[queue rq]\nmax_age = 200ms\nexpire_to = rq_late\n"
	    "[queue other]\nexpire_to = other_late\n");
	ck_assert_int_eq(tl_stat(c, "queue_rq_late_items"), 0);
	ck_assert_int_eq(tl_stat(c, "queue_other_late_items"), 0);
	tl_sleep_ms(300);
	tl_ckget(c, "rq", NULL);		/* expired: moved */
	tl_ckget(c, "rq_late", "a");
	ck_assert_int_eq(tl_stat(c, "queue_rq_expired_to"), 1);
	tl_reload(s, conf, "[queue rq]\nmax_age = 200ms\n");
	tl_set(c, "rq", "b");
	tl_sleep_ms(300);
	tl_ckget(c, "rq", NULL);		/* expired: dropped */
	tl_ckget(c, "rq_late", NULL);
	ck_assert_int_eq(tl_stat(c, "queue_rq_expired_items"), 1);	/* dropped */
	ck_assert_int_eq(tl_stat(c, "queue_rq_expired_to"), 1);	/* not moved */
	tl_ckget(c, "other", "o");
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	free(conf);
}
END_TEST

/* `stats` lists a queue the store made (issue 42): the expire_to target
 * from when the configuration names it for a queue in use, with the
 * items moved into it, before any client reads it; and a target the store
 * makes again after a delete, with its item. */
START_TEST(test_stats_list_store_made)
{
	char *conf = tl_write_file("x.conf",
	    "[queue xq]\nmax_age = 200ms\nexpire_to = xq_late\n");
	struct tl_server *s = tl_server_start("memory", "--config", conf, NULL);
	int c = tl_connect(s->port);

	ck_assert_int_eq(tl_stat(c, "queue_xq_late_items"), -1);
	tl_set(c, "xq", "a");
	tl_set(c, "xq", "b");
	tl_set(c, "xq", "c");
	/* named by the configuration of a queue in use: made, listed */
	ck_assert_int_eq(tl_stat(c, "queue_xq_late_items"), 0);
	tl_sleep_ms(300);
	tl_ckget(c, "xq", NULL);	/* all three expired: moved */
	ck_assert_int_eq(tl_stat(c, "queue_xq_items"), 0);
	ck_assert_int_eq(tl_stat(c, "queue_xq_late_items"), 3);
	/* deleted, then made again by the store for the next expiry */
	mustsends(c, "delete xq_late\r\n");
	ckresp(c, "DELETED\r\n");
	ck_assert_int_eq(tl_stat(c, "queue_xq_late_items"), -1);
	tl_set(c, "xq", "d");
	tl_sleep_ms(300);
	tl_ckget(c, "xq", NULL);
	ck_assert_int_eq(tl_stat(c, "queue_xq_late_items"), 1);
	tl_ckget(c, "xq_late", "d");
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	free(conf);
}
END_TEST

START_TEST(test_pidfile_and_daemon)
{
	char *pidfile = tl_strdupf("%s/sakerd.pid", tl_dir);
	char *sock = tl_strdupf("%s/s.sock", tl_dir);
	char *sock2 = tl_strdupf("%s/s2.sock", tl_dir);
	char *err = NULL, *pidtxt;
	long pid;
	int rc;

	/* relative paths mean the start directory, though a daemon runs in / */
	rc = run_sakerd(&err, "-d", "-p", "0", "-s", sock, "-P", "sakerd.pid", NULL);
	ck_assert_msg(rc == 0, "sakerd -d exited %d: %s", rc, err);
	free(err);
	pidtxt = tl_read_file(pidfile, NULL);
	ck_assert_ptr_nonnull(pidtxt);
	pid = strtol(pidtxt, NULL, 10);
	ck_assert_int_gt(pid, 1);
	ck_assert_int_eq(kill((pid_t)pid, 0), 0);
	/* a second server on the same pidfile is refused */
	rc = run_sakerd(&err, "-p", "0", "-s", sock2, "-P", pidfile, NULL);
	ck_assert_int_eq(rc, 1);
	ck_assert_msg(strstr(err, "held by running process") != NULL, "%s", err);
	free(err);
	kill((pid_t)pid, SIGTERM);
	for (rc = 0; rc < 500 && kill((pid_t)pid, 0) == 0; rc++)
		tl_sleep_ms(20);
	ck_assert_int_ne(kill((pid_t)pid, 0), 0);
	ck_assert_int_ne(access(pidfile, F_OK), 0);	/* removed at exit */
#ifdef HAVE_LMDB
	{
		char *data = tl_strdupf("%s/saker-data/data.mdb", tl_dir);

		ck_assert_msg(access(data, F_OK) == 0, "the default store is not in "
		    "the start directory");
		free(data);
	}
#endif
	/* -d with a store that cannot open still fails in the foreground */
	rc = run_sakerd(&err, "-d", "-p", "0", "-s", sock, "--store", "lmdb:/proc/no/such", NULL);
	ck_assert_int_eq(rc, 1);
	free(err);
	free(pidtxt);
	free(pidfile);
	free(sock);
	free(sock2);
}
END_TEST

START_TEST(test_idle_timeout)
{
	struct tl_server *s = tl_server_start("memory", "--idle-timeout", "1", NULL);
	int idle = tl_connect(s->port), slow = tl_connect(s->port);
	int waiter = tl_connect(s->port), busy = tl_connect(s->port);
	int64_t t0 = tl_now_ms();
	int i;

	/* a blocked get is not idle: it gets its END after 2.5 s */
	mustsends(waiter, "get w/t=2500\r\n");
	/* slowloris: a byte every 200 ms, never a whole command */
	for (i = 0; i < 15; i++) {
		char b = 'g';
		if (i < 14)
			(void)write(slow, &b, 1);
		tl_set(busy, "q", "x");          /* busy completes commands */
		tl_sleep_ms(200);
	}
	tl_expect_closed(idle, 2000);
	tl_expect_closed(slow, 2000);
	ckresp(waiter, "END\r\n");
	ck_assert_int_ge(tl_now_ms() - t0, 2400);
	mustsends(busy, "version\r\n");
	ckresp(busy, "VERSION " PACKAGE_VERSION "\r\n");
	close(idle);
	close(slow);
	close(waiter);
	close(busy);
	tl_server_stop(s);
	tl_server_free(s);
}
END_TEST

/* One duration grammar (issue 36): the same "1.5s" is 1.5 seconds in the
 * config file, in a flag and in a driver option, beside each place's old
 * bare number. */
START_TEST(test_duration_everywhere)
{
	char *conf = tl_write_file("dur.conf", "[queue ot]\nopen_timeout = 1.5s\n");
	struct tl_server *s = tl_server_start("memory", "--config", conf,
	    "--idle-timeout", "1.5s", NULL);
	int c, idle;
	int64_t t0;
	char *err = NULL;
#ifdef HAVE_POSTGRES
	char *sock = tl_strdupf("%s/dur.sock", tl_dir);
#endif

	idle = tl_connect(s->port);
	c = tl_connect(s->port);
	t0 = tl_now_ms();
	tl_set(c, "ot", "x");
	tl_ckget(c, "ot/open", "x");
	/* config file: the open item returns after 1.5 s, not 1.5 ms or 1 s */
	tl_wait_stat(c, "queue_ot_open_timeouts", 1, 6000);
	ck_assert_int_ge(tl_now_ms() - t0, 1450);
	/* flag: the silent connection is closed, and not before 1.5 s */
	tl_expect_closed(idle, 6000);
	ck_assert_int_ge(tl_now_ms() - t0, 1450);
	close(idle);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	free(conf);

	/* the other duration flags take the same grammar, a bare number
	 * stays seconds (and milliseconds after --sync periodic:) */
	ck_assert_int_eq(run_sakerd(&err, "--drain-timeout", "1.5x", NULL), 1);
	ck_assert_msg(strstr(err, "invalid value '1.5x'") != NULL, "%s", err);
	free(err);
	ck_assert_int_eq(run_sakerd(&err, "--tls-handshake-timeout", "-1s",
	    NULL), 1);
	free(err);
	ck_assert_int_eq(run_sakerd(&err, "--sync", "periodic:1.5", NULL), 1);
	free(err);
	ck_assert_int_eq(run_sakerd(&err, "--http-history", "2h", NULL), 1);
	free(err);
#ifdef HAVE_POSTGRES
	/* driver option: "1.5s" passes the option check and the driver goes
	 * on to connect (and fails: there is no database here) */
	ck_assert_int_eq(run_sakerd(&err, "-p", "0", "-s", sock,
	    "--store", "postgres,timeout=1.5s,probe=250ms,lease=2m:"
	    "host=/nonexistent dbname=x", NULL), 1);
	ck_assert_msg(strstr(err, "bad value") == NULL &&
	    strstr(err, "cannot connect") != NULL, "%s", err);
	free(err);
	ck_assert_int_eq(run_sakerd(&err, "-p", "0", "-s", sock,
	    "--store", "postgres,timeout=1.5x:host=/nonexistent", NULL), 1);
	ck_assert_msg(strstr(err, "postgres.timeout: bad value '1.5x'") != NULL,
	    "%s", err);
	free(err);
	/* lease= inside the connection string (1.0's form): the same */
	ck_assert_int_eq(run_sakerd(&err, "-p", "0", "-s", sock,
	    "--store", "postgres:host=/nonexistent dbname=x lease=1.5s", NULL),
	    1);
	ck_assert_msg(strstr(err, "cannot connect") != NULL, "%s", err);
	free(err);
	ck_assert_int_eq(run_sakerd(&err, "-p", "0", "-s", sock,
	    "--store", "postgres:host=/nonexistent lease=1.5ms", NULL), 1);
	ck_assert_msg(strstr(err, "lease must be") != NULL, "%s", err);
	free(err);
	free(sock);
#endif
}
END_TEST

START_TEST(test_startup_errors)
{
	char *err = NULL;

	ck_assert_int_eq(run_sakerd(&err, "--store", "nosuch:x", NULL), 1);
	ck_assert_msg(strstr(err, "unknown store type 'nosuch'") != NULL &&
	    strstr(err, "memory") != NULL, "%s", err);
	free(err);
	ck_assert_int_eq(run_sakerd(&err, "--sync", "sometimes", NULL), 1);
	free(err);
	ck_assert_int_eq(run_sakerd(&err, "-t", "4", NULL), 1);
	free(err);
	/* --http-history: 0, or 0.01 .. 3600 seconds */
	ck_assert_int_eq(run_sakerd(&err, "--http-history", "0.005", NULL), 1);
	free(err);
	ck_assert_int_eq(run_sakerd(&err, "--http-history", "3601", NULL), 1);
	free(err);
	ck_assert_int_eq(run_sakerd(&err, "--http-history", "1.2345", NULL), 1);
	free(err);
	ck_assert_int_eq(run_sakerd(&err, "--http-history", "", NULL), 1);
	free(err);
	ck_assert_int_eq(run_sakerd(&err, "--http-history", "x", NULL), 1);
	free(err);
	ck_assert_int_eq(run_sakerd(&err, "--help", NULL), 0);
	free(err);
	ck_assert_int_eq(run_sakerd(&err, "--version", NULL), 0);
	free(err);
}
END_TEST

#ifdef HAVE_LMDB
/* A store with more queues than a new --max-queues: a warning at start,
 * every queue it has still works, new ones are refused. */
START_TEST(test_max_queues_below_store)
{
	char *spec = tl_strdupf("lmdb:%s/many", tl_dir);
	struct tl_server *s = tl_server_start(spec, NULL);
	int c = tl_connect(s->port);
	char *log;

	tl_set(c, "q1", "a");
	tl_set(c, "q2", "b");
	tl_set(c, "q3", "c");
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	s = tl_server_start(spec, "--max-queues", "2", NULL);
	c = tl_connect(s->port);
	log = tl_read_file(s->log, NULL);
	ck_assert_msg(log != NULL && strstr(log, "the store has 3 queues, more than "
	    "--max-queues 2: they all work, new ones are refused") != NULL,
	    "%s", log);
	free(log);
	tl_set(c, "q3", "d");
	tl_ckget(c, "q1", "a");
	mustsends(c, "set q4 0 0 1\r\nx\r\n");
	ckresp(c, "SERVER_ERROR too many queues\r\n");
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	free(spec);
}
END_TEST
#endif

/* What sakerd cannot listen on or run as: exit 1 with the reason in the
 * log (stderr here) and the line that points at it. */
START_TEST(test_listen_refusals)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	char *err = NULL, *port, *want, *longpath;
	int busy = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_eq(run_sakerd(&err, "--store", "memory", "-l",
	    "not an address", NULL), 1);
	ck_assert_msg(strstr(err, "cannot parse listen address 'not an address'")
	    != NULL && strstr(err, "sakerd: cannot listen; see the log above\n")
	    != NULL, "%s", err);
	free(err);

	/* a port another socket listens on */
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(busy, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(busy, 1), 0);
	ck_assert_int_eq(getsockname(busy, (struct sockaddr *)&sa, &sl), 0);
	port = tl_strdupf("%d", ntohs(sa.sin_port));
	want = tl_strdupf("cannot listen on 127.0.0.1:%s: Address already in use",
	    port);
	ck_assert_int_eq(run_sakerd(&err, "--store", "memory", "-p", port, NULL), 1);
	ck_assert_msg(strstr(err, want) != NULL, "%s", err);
	free(err);
	close(busy);

	ck_assert_int_eq(run_sakerd(&err, "--store", "memory", "-p", "0", "-s",
	    "/nonexistent/dir/s.sock", NULL), 1);
	ck_assert_msg(strstr(err, "cannot listen on /nonexistent/dir/s.sock: "
	    "No such file or directory") != NULL, "%s", err);
	free(err);
	longpath = tl_strdupf("%s/%0120d.sock", tl_dir, 0);
	ck_assert_int_eq(run_sakerd(&err, "--store", "memory", "-p", "0", "-s",
	    longpath, NULL), 1);
	ck_assert_msg(strstr(err, "unix socket path too long: ") != NULL, "%s", err);
	free(err);

	ck_assert_int_eq(run_sakerd(&err, "--store", "memory", "-p", "0", "-s",
	    "s.sock", "-u", "no_such_user_here", NULL), 1);
	ck_assert_msg(strstr(err, "-u no_such_user_here: no such user") != NULL &&
	    strstr(err, "sakerd: cannot drop privileges; see the log above\n")
	    != NULL, "%s", err);
	free(err);
	free(port);
	free(want);
	free(longpath);
}
END_TEST

/* Files sakerd must open before it serves: a pidfile or log it cannot
 * open is a startup error on the terminal, naming the file and why. */
START_TEST(test_startup_files)
{
	char *err = NULL;

	ck_assert_int_eq(run_sakerd(&err, "--store", "memory", "-P",
	    "/nonexistent/dir/sakerd.pid", NULL), 1);
	ck_assert_msg(strstr(err, "sakerd: cannot open pidfile "
	    "/nonexistent/dir/sakerd.pid: No such file or directory\n") != NULL,
	    "%s", err);
	free(err);
	ck_assert_int_eq(run_sakerd(&err, "--store", "memory", "--log",
	    "/nonexistent/dir/sakerd.log", NULL), 1);
	ck_assert_msg(strstr(err, "sakerd: cannot open log "
	    "/nonexistent/dir/sakerd.log: No such file or directory\n") != NULL,
	    "%s", err);
	free(err);
	/* -d makes the paths absolute first: the same refusals */
	ck_assert_int_eq(run_sakerd(&err, "-d", "--store", "memory", "-P",
	    "/nonexistent/dir/sakerd.pid", NULL), 1);
	ck_assert_msg(strstr(err, "cannot open pidfile") != NULL, "%s", err);
	free(err);
}
END_TEST

/* --log FILE and logrotate: after the file is renamed, SIGHUP makes
 * sakerd write to a new file of that name. */
START_TEST(test_log_reopen)
{
	char *log = tl_strdupf("%s/sakerd.log", tl_dir);
	char *old = tl_strdupf("%s/sakerd.log.1", tl_dir), *text;
	struct tl_server *s = tl_server_start("memory", "-v", "--log", log, NULL);
	int64_t deadline = tl_now_ms() + 5000;
	int c = tl_connect(s->port);

	ck_assert_int_eq(rename(log, old), 0);
	ck_assert_int_eq(kill(s->pid, SIGHUP), 0);
	while (tl_stat(c, "reloads") < 1) {
		ck_assert_msg(tl_now_ms() < deadline, "no reload");
		tl_sleep_ms(10);
	}
	close(c);
	tl_server_stop(s);
	text = tl_read_file(old, NULL);
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(strstr(text, "SIGHUP: reopening the log") != NULL, "%s", text);
	ck_assert_msg(strstr(text, "stopping") == NULL, "%s", text);
	free(text);
	text = tl_read_file(log, NULL);
	ck_assert_msg(text != NULL, "no new %s", log);
	ck_assert_msg(strstr(text, "signal 15: stopping") != NULL, "%s", text);
	free(text);
	tl_server_free(s);
	free(log);
	free(old);
}
END_TEST

/* Readiness for systemd's Type=notify: one datagram "READY=1" on
 * $NOTIFY_SOCKET once the server serves, "STOPPING=1" when it stops. */
START_TEST(test_systemd_notify)
{
	struct sockaddr_un sun;
	struct timeval tv = { 5, 0 };
	struct tl_server *s;
	char *path = tl_strdupf("%s/notify", tl_dir), buf[256];
	ssize_t n;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	ck_assert_uint_lt(strlen(path), sizeof(sun.sun_path));
	strcpy(sun.sun_path, path);
	ck_assert_int_ge(fd = socket(AF_UNIX, SOCK_DGRAM, 0), 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	/* the test process's own environment: Check runs each test in a
	 * child of its own, and the server inherits it */
	ck_assert_int_eq(setenv("NOTIFY_SOCKET", path, 1), 0);
	s = tl_server_start("memory", NULL);
	unsetenv("NOTIFY_SOCKET");
	n = recv(fd, buf, sizeof(buf) - 1, 0);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	ck_assert_str_eq(buf, "READY=1\nSTATUS=serving");
	tl_server_stop(s);
	n = recv(fd, buf, sizeof(buf) - 1, 0);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	ck_assert_str_eq(buf, "STOPPING=1");
	tl_server_free(s);

	/* a relative NOTIFY_SOCKET is no systemd's: ignored, and the
	 * server starts all the same */
	ck_assert_int_eq(setenv("NOTIFY_SOCKET", "notify", 1), 0);
	s = tl_server_start("memory", NULL);
	unsetenv("NOTIFY_SOCKET");
	tv.tv_sec = 0;
	tv.tv_usec = 200000;
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	ck_assert_int_lt(recv(fd, buf, sizeof(buf), 0), 0);
	tl_server_stop(s);
	tl_server_free(s);
	close(fd);
	free(path);
}
END_TEST

/* --max-item-size beyond what the store can hold is refused at startup
 * with the reason (SQLite once answered a 1 GiB set with a misleading
 * "NOT NULL constraint failed"). */
START_TEST(test_max_item_refused)
{
#ifdef HAVE_SQLITE
	char *err = NULL, *spec = tl_strdupf("sqlite:%s/big.db", tl_dir);

	ck_assert_int_eq(run_sakerd(&err, "--store", spec, "--max-item-size",
	    "1g", NULL), 1);
	ck_assert_msg(strstr(err, "sqlite holds items up to") != NULL &&
	    strstr(err, "--max-item-size") != NULL, "%s", err);
	free(err);
	free(spec);
#endif
}
END_TEST

#ifdef HAVE_LMDB
#include <fcntl.h>
#include <sys/stat.h>
#include "saker/store.h"

/* A store whose data.mdb has a zeroed page in use, or 64 bytes of 0xff
 * at its start: exit status 1 and one line, never an abort (liblmdb
 * asserted) or a segfault. */
static void
damaged_start(bool zero)
{
	char *dir = tl_strdupf("%s/dmg%d", tl_dir, zero), *err = NULL;
	char *spec = tl_strdupf("lmdb:%s", dir), *path;
	unsigned char page[4096];
	struct saker_store_opts o;
	saker_store *st = NULL;
	saker_queue *q;
	struct saker_item it;
	char why[512];
	struct stat sb;
	int fd, i;

	memset(&o, 0, sizeof(o));
	o.create = true;
	ck_assert_int_eq(saker_store_open(spec, &o, &st, why, sizeof(why)),
	    SAKER_OK);
	memset(&it, 0, sizeof(it));
	it.data = "some item data";
	it.len = 14;
	for (i = 0; i < 20; i++) {
		char name[8];

		snprintf(name, sizeof(name), "q%d", i);
		ck_assert_int_eq(st->driver->queue_open(st, name, strlen(name),
		    true, NULL, &q), SAKER_OK);
		ck_assert_int_eq(st->driver->put(st, q, &it, 1700000000000LL),
		    SAKER_OK);
	}
	ck_assert_int_eq(saker_store_commit(st), SAKER_OK);
	saker_store_close(st);
	path = tl_strdupf("%s/data.mdb", dir);
	ck_assert_int_eq(stat(path, &sb), 0);
	memset(page, zero ? 0 : 0xff, sizeof(page));
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, page, zero ? 4096 : 64,
	    (off_t)(sb.st_size - 4096)), zero ? 4096 : 64);
	close(fd);
	ck_assert_int_eq(run_sakerd(&err, "--store", spec, NULL), 1);
	ck_assert_msg(strstr(err, "is damaged: page") != NULL, "%s", err);
	free(err);
	free(path);
	free(spec);
	free(dir);
}

START_TEST(test_damaged_lmdb_start)
{
	damaged_start(true);
	damaged_start(false);
}
END_TEST
#endif

int
main(void)
{
	Suite *s = suite_create("ops");
	TCase *tc = tcase_create("ops");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, tl_dir_setup, tl_dir_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_config_limits);
	tcase_add_test(tc, test_config_reload);
	tcase_add_test(tc, test_config_bad_file);
	tcase_add_test(tc, test_config_dead_letter_loops);
	tcase_add_test(tc, test_metrics_and_health);
	if (ckpt_stores[0] != NULL)
		tcase_add_loop_test(tc, test_metrics_checkpoints, 0,
		    (int)(sizeof(ckpt_stores) / sizeof(ckpt_stores[0])) - 1);
	tcase_add_test(tc, test_status_modes);
	tcase_add_test(tc, test_fanout);
	tcase_add_test(tc, test_queue_churn);
	tcase_add_test(tc, test_miss_leaves_nothing);
	tcase_add_test(tc, test_stats_list_store_made);
	tcase_add_test(tc, test_expire_to_by_reload);
	tcase_add_test(tc, test_pidfile_and_daemon);
	tcase_add_test(tc, test_idle_timeout);
	tcase_add_test(tc, test_startup_errors);
	tcase_add_test(tc, test_startup_files);
	tcase_add_test(tc, test_listen_refusals);
#ifdef HAVE_LMDB
	tcase_add_test(tc, test_max_queues_below_store);
#endif
	tcase_add_test(tc, test_systemd_notify);
	tcase_add_test(tc, test_log_reopen);
	tcase_add_test(tc, test_duration_everywhere);
	tcase_add_test(tc, test_max_item_refused);
#ifdef HAVE_LMDB
	tcase_add_test(tc, test_damaged_lmdb_start);
#endif
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
