/* check_compat.c -- raw-socket regression tests for what stock memcache
 * clients send beyond set and get (issue 19): the other storage commands,
 * gets, big multi-gets, bounded stats, commands pipelined behind a waiting
 * get, and quit after pipelined commands.  Each case here is also run by a
 * real client in check_clients. */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

static struct tl_server *srv;
static int c = -1;

static void
setup(void)
{
	srv = tl_server_start("memory", NULL);
	c = tl_connect(srv->port);
}

static void
teardown(void)
{
	if (c != -1)
		close(c);
	c = -1;
	if (srv != NULL && srv->pid > 0)
		tl_server_stop(srv);
	tl_server_free(srv);
	srv = NULL;
}

/* ------------------------------------------------- storage commands */

/* Every storage command consumes its data block and answers one line: a
 * data block that looks like a command is never run as one. */
START_TEST(test_storage_commands_consume_data)
{
	tl_set(c, "other", "keep");
	mustsends(c, "add q1 0 0 9\r\nget other\r\n");
	ckresp(c, "STORED\r\n");
	mustsends(c, "replace q1 0 0 9\r\nget other\r\n");
	ckresp(c, "CLIENT_ERROR replace not supported on a queue\r\n");
	mustsends(c, "append q1 0 0 9\r\nget other\r\n");
	ckresp(c, "CLIENT_ERROR append not supported on a queue\r\n");
	mustsends(c, "prepend q1 0 0 9\r\nget other\r\n");
	ckresp(c, "CLIENT_ERROR prepend not supported on a queue\r\n");
	mustsends(c, "cas q1 0 0 9 12345\r\nget other\r\n");
	ckresp(c, "CLIENT_ERROR cas not supported on a queue\r\n");
	/* noreply hides the refusal as it hides NOT_STORED */
	mustsends(c, "append q1 0 0 9 noreply\r\nget other\r\n"
	    "cas q1 0 0 9 1 noreply\r\nget other\r\nversion\r\n");
	ckresp(c, "VERSION " PACKAGE_VERSION "\r\n");
	/* a malformed line whose length is readable still skips its data */
	mustsends(c, "cas q1 0 0 9\r\nget other\r\n");
	ckresp(c, "CLIENT_ERROR bad command line format\r\n");
	mustsends(c, "replace q1 x 0 9\r\nget other\r\n");
	ckresp(c, "CLIENT_ERROR bad command line format\r\n");
	/* nothing was taken from `other`; add enqueued on q1 */
	tl_ckget(c, "other", "keep");
	tl_ckget(c, "q1", "get other");
	tl_ckget(c, "q1", NULL);
}
END_TEST

/* add is an enqueue with set's options and limits. */
START_TEST(test_add_enqueues)
{
	mustsends(c, "add q 5 0 1\r\na\r\nadd q/delay=0 6 0 1 noreply\r\nb\r\n");
	ckresp(c, "STORED\r\n");
	mustsends(c, "get q\r\n");
	ckresp(c, "VALUE q 5 1\r\na\r\nEND\r\n");
	mustsends(c, "get q/t=2000\r\n");
	ckresp(c, "VALUE q/t=2000 6 1\r\nb\r\nEND\r\n");
}
END_TEST

/* ------------------------------------------------------------- gets */

START_TEST(test_gets_cas_field)
{
	tl_setn(c, "q", 16, 0, "x", 1);
	tl_set(c, "r", "yz");
	mustsends(c, "gets q r nothing\r\n");
	ckresp(c, "VALUE q 16 1 0\r\nx\r\nVALUE r 0 2 0\r\nyz\r\nEND\r\n");
	/* a gets woken by a set answers in its own format */
	mustsends(c, "gets q/t=5000\r\n");
	{
		int p = tl_connect(srv->port);

		ck_assert(tl_quiet(c, 100));
		tl_set(p, "q", "late");
		close(p);
	}
	ckresp(c, "VALUE q/t=5000 0 4 0\r\nlate\r\nEND\r\n");
	/* plain get keeps three fields */
	tl_set(c, "q", "x");
	mustsends(c, "get q\r\n");
	ckresp(c, "VALUE q 0 1\r\nx\r\nEND\r\n");
}
END_TEST

/* Poll "stats queue q" on fd until its stat k is want (absent: 0). */
static void
qwait(int fd, const char *q, const char *k, long long want)
{
	char *cmd = tl_strdupf("stats queue %s\r\n", q);
	char *name = tl_strdupf("queue_%s_%s", q, k);
	int64_t deadline = tl_now_ms() + 5000;
	long long v;

	for (;;) {
		char *all = NULL, *l;
		size_t len = 0;
		FILE *f = open_memstream(&all, &len);

		mustsend(fd, cmd, strlen(cmd));
		while ((l = tl_mustreadline(fd)) != NULL && strcmp(l, "END") != 0) {
			fprintf(f, "%s\n", l);
			free(l);
		}
		free(l);
		fclose(f);
		v = tl_stat_value(all, name);
		free(all);
		if ((v < 0 ? 0 : v) == want)
			break;
		ck_assert_msg(tl_now_ms() < deadline, "%s is %lld, waited for %lld",
		    name, v, want);
		tl_sleep_ms(10);
	}
	free(name);
	free(cmd);
}

/* -------------------------------------------------------- multi-get */

/* "get" and n keys "<prefix><i>", as one line. */
static char *
get_line(const char *cmd, const char *prefix, int n, size_t *lenp)
{
	char *line = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&line, &len);
	int i;

	ck_assert_ptr_nonnull(f);
	fputs(cmd, f);
	for (i = 0; i < n; i++)
		fprintf(f, " %s%d", prefix, i);
	fputs("\r\n", f);
	fclose(f);
	*lenp = len;
	return line;
}

/* 10,000 keys in one get (a 68 KB line), and long names: memcached serves
 * both, and so must a queue server that clients use with get_many. */
START_TEST(test_multiget_big)
{
	char name[128], *line;
	size_t len;

	line = get_line("get", "k", 10000, &len);
	tl_set(c, "k0", "first");
	tl_set(c, "k4321", "middle");
	tl_set(c, "k9999", "last");
	mustsend(c, line, len);
	ckresp(c, "VALUE k0 0 5\r\nfirst\r\nVALUE k4321 0 6\r\nmiddle\r\n"
	    "VALUE k9999 0 4\r\nlast\r\nEND\r\n");
	/* gets too, and the connection goes on */
	tl_set(c, "k9998", "x");
	memcpy(line, "get", 3);
	mustsend(c, "gets", 4);
	mustsend(c, line + 3, len - 3);
	ckresp(c, "VALUE k9998 0 1 0\r\nx\r\nEND\r\n");
	free(line);

	/* 100 keys of 100 bytes: a 10,105-byte line */
	memset(name, 'n', 99);
	name[99] = '\0';
	line = get_line("get", name, 100, &len);
	ck_assert_uint_gt(len, 10000);
	tl_set(c, "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn42", "v");
	mustsend(c, line, len);
	ckresp(c, "VALUE nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn42 0 1\r\nv\r\nEND\r\n");
	free(line);

	/* a blocking multi-get of 10,000 keys is woken by a set on the last */
	line = get_line("get", "w", 10000, &len);
	len -= 2;
	mustsend(c, line, len);
	mustsends(c, "/t=5000\r\n");
	{
		int p = tl_connect(srv->port);

		qwait(p, "w9999", "waiters", 1);
		tl_set(p, "w9999", "woken");
		close(p);
	}
	ckresp(c, "VALUE w9999/t=5000 0 5\r\nwoken\r\nEND\r\n");
	free(line);
	qwait(c, "w0", "waiters", 0);
}
END_TEST

/* The caps: 10,000 keys, a 1 MiB get line, 8 KB for every other line. */
START_TEST(test_multiget_caps)
{
	char *line;
	size_t len, n = 1024 * 1024 + 10;

	line = get_line("get", "k", 10001, &len);
	mustsend(c, line, len);
	ckresp(c, "CLIENT_ERROR too many keys\r\n");
	free(line);
	tl_set(c, "k1", "still here");
	tl_ckget(c, "k1", "still here");

	/* a get line longer than 1 MiB is refused and the connection closed,
	 * whether or not its end has arrived */
	line = malloc(n);
	memset(line, ' ', n);
	memcpy(line, "get q", 5);
	mustsend(c, line, n);
	ckresp(c, "CLIENT_ERROR line too long\r\n");
	tl_expect_closed(c, 5000);
	close(c);
	/* other commands keep 8 KB */
	c = tl_connect(srv->port);
	memcpy(line, "stats", 5);
	mustsend(c, line, 8300);
	ckresp(c, "CLIENT_ERROR line too long\r\n");
	tl_expect_closed(c, 5000);
	close(c);
	free(line);
	c = tl_connect(srv->port);
}
END_TEST

/* ------------------------------------------------------------ stats */

/* Send a stats command; the reply up to END (malloc'd), *nitems set to
 * the number of "STAT queue_*_items" lines in it. */
static char *
stats_cmd(int fd, const char *cmd, int *nitems)
{
	char *all = NULL, *l;
	size_t len = 0;
	FILE *f = open_memstream(&all, &len);

	ck_assert_ptr_nonnull(f);
	*nitems = 0;
	mustsend(fd, cmd, strlen(cmd));
	for (;;) {
		l = tl_mustreadline(fd);
		if (strcmp(l, "END") == 0)
			break;
		ck_assert_msg(strncmp(l, "STAT ", 5) == 0, "%s: \"%s\"", cmd, l);
		if (strncmp(l, "STAT queue_", 11) == 0 &&
		    strstr(l, "_items ") != NULL && strstr(l, "_total_items ") == NULL &&
		    strstr(l, "_expired_items ") == NULL && strstr(l, "_delayed_items ") == NULL)
			(*nitems)++;
		fprintf(f, "%s\n", l);
		free(l);
	}
	free(l);
	fclose(f);
	return all;
}

/* A plain stats lists at most 100 queues, by name, and says how many it
 * left out; stats queues [PREFIX] and stats queue NAME give the rest. */
START_TEST(test_stats_bounded)
{
	char name[16], *st;
	int i, n;

	for (i = 0; i < 150; i++) {
		snprintf(name, sizeof(name), "q%03d", i);
		tl_set(c, name, "x");
	}
	st = stats_cmd(c, "stats\r\n", &n);
	ck_assert_int_eq(n, 100);
	ck_assert_int_eq(tl_stat_value(st, "queues_omitted"), 50);
	ck_assert_int_eq(tl_stat_value(st, "queue_q000_items"), 1);
	ck_assert_int_eq(tl_stat_value(st, "queue_q099_items"), 1);
	ck_assert_int_eq(tl_stat_value(st, "queue_q100_items"), -1);
	ck_assert_int_eq(tl_stat_value(st, "curr_items"), 150);
	free(st);

	st = stats_cmd(c, "stats queues\r\n", &n);
	ck_assert_int_eq(n, 150);
	ck_assert_int_eq(tl_stat_value(st, "pid"), -1);
	free(st);
	st = stats_cmd(c, "stats queues q14\r\n", &n);
	ck_assert_int_eq(n, 10);
	ck_assert_int_eq(tl_stat_value(st, "queue_q149_items"), 1);
	free(st);
	st = stats_cmd(c, "stats queue q123\r\n", &n);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(tl_stat_value(st, "queue_q123_items"), 1);
	ck_assert_int_eq(tl_stat_value(st, "queue_q123_waiters"), 0);
	free(st);
	st = stats_cmd(c, "stats queue nosuch\r\n", &n);
	ck_assert_int_eq(n, 0);
	ck_assert_str_eq(st, "");
	free(st);
	/* asking does not create the queue */
	st = stats_cmd(c, "stats queues nosuch\r\n", &n);
	ck_assert_int_eq(n, 0);
	free(st);
}
END_TEST

/* ------------------------------------------------ behind a waiting get */

/* One client object that sets while its own blocking get waits (memjs and
 * others share one connection): the set runs at once and wakes that very
 * get; the replies keep request order. */
START_TEST(test_set_wakes_own_get)
{
	mustsends(c, "get q/t=20000\r\nset q 3 0 5\r\nhello\r\n");
	ckresp(c, "VALUE q/t=20000 3 5\r\nhello\r\nEND\r\nSTORED\r\n");
	/* the same with gets, noreply, and a get after it keeping its turn */
	mustsends(c, "gets q/t=20000\r\nset q 0 0 1 noreply\r\na\r\n"
	    "set q 0 0 1\r\nb\r\nget q\r\nget q\r\n");
	ckresp(c, "VALUE q/t=20000 0 1 0\r\na\r\nEND\r\nSTORED\r\n"
	    "VALUE q 0 1\r\nb\r\nEND\r\nEND\r\n");
}
END_TEST

/* set, delete, flush, flush_all, stats and version behind a waiting get
 * take effect at once; their replies follow the get's. */
START_TEST(test_commands_run_behind_wait)
{
	int p = tl_connect(srv->port);
	char *l;

	tl_set(p, "gone", "x");
	tl_set(p, "flushed", "y");
	mustsends(c, "get w/t=20000\r\nset other 0 0 5\r\nfirst\r\n"
	    "delete gone\r\nflush flushed\r\nversion\r\nstats\r\n"
	    "delete never\r\n");
	/* while the get still waits, the effects are visible elsewhere */
	tl_wait_stat(p, "queue_other_items", 1, 5000);
	tl_wait_stat(p, "queue_flushed_items", 0, 5000);
	ck_assert_int_eq(tl_stat(p, "queue_gone_items"), -1);
	ck_assert_int_eq(tl_stat(p, "queue_w_waiters"), 1);
	ck_assert(tl_quiet(c, 100));
	tl_set(p, "w", "wake");
	ckresp(c, "VALUE w/t=20000 0 4\r\nwake\r\nEND\r\nSTORED\r\nDELETED\r\n"
	    "END\r\nVERSION " PACKAGE_VERSION "\r\n");
	/* stats, whole, then the last reply */
	for (;;) {
		l = tl_mustreadline(c);
		if (strcmp(l, "END") == 0)
			break;
		ck_assert_msg(strncmp(l, "STAT ", 5) == 0, "stats line \"%s\"", l);
		free(l);
	}
	free(l);
	ckresp(c, "NOT_FOUND\r\n");
	tl_ckget(p, "other", "first");
	close(p);
}
END_TEST

/* A get behind a waiting get keeps its turn: it runs after the first one
 * has answered, even if its queue fills meanwhile. */
START_TEST(test_get_behind_wait_keeps_turn)
{
	int p = tl_connect(srv->port);

	mustsends(c, "get a/t=20000\r\nget b\r\nset b 0 0 1\r\nz\r\n");
	tl_set(p, "b", "x");
	tl_wait_stat(p, "queue_a_waiters", 1, 5000);
	/* the second get has not taken b's item */
	ck_assert_int_eq(tl_stat(p, "queue_b_items"), 1);
	ck_assert(tl_quiet(c, 100));
	tl_set(p, "a", "y");
	ckresp(c, "VALUE a/t=20000 0 1\r\ny\r\nEND\r\n"
	    "VALUE b 0 1\r\nx\r\nEND\r\nSTORED\r\n");
	tl_ckget(p, "b", "z");
	close(p);
}
END_TEST

/* A waiting get that times out: its END, then the held replies. */
START_TEST(test_wait_timeout_then_held)
{
	mustsends(c, "get e/t=300\r\nset f 0 0 1\r\n1\r\nversion\r\n");
	ckresp(c, "END\r\nSTORED\r\nVERSION " PACKAGE_VERSION "\r\n");
	/* quit behind a waiting get: the get's answer, then the close */
	mustsends(c, "get e/t=300\r\nset f 0 0 1\r\n2\r\nquit\r\n");
	ckresp(c, "END\r\nSTORED\r\n");
	tl_expect_closed(c, 5000);
	close(c);
	c = tl_connect(srv->port);
	tl_ckget(c, "f", "1");
	tl_ckget(c, "f", "2");
}
END_TEST

/* A binary request: opcode, key, extras (set: flags and expiry), value. */
static size_t
bin_req(unsigned char *b, unsigned op, const char *key, const char *val,
    uint32_t opaque)
{
	size_t kl = strlen(key), vl = val != NULL ? strlen(val) : 0;
	size_t el = op <= 0x03 && op >= 0x01 ? 8 : 0, body = el + kl + vl;

	memset(b, 0, 24 + el);
	b[0] = 0x80;
	b[1] = (unsigned char)op;
	b[2] = (unsigned char)(kl >> 8);
	b[3] = (unsigned char)kl;
	b[4] = (unsigned char)el;
	b[8] = (unsigned char)(body >> 24);
	b[9] = (unsigned char)(body >> 16);
	b[10] = (unsigned char)(body >> 8);
	b[11] = (unsigned char)body;
	memcpy(b + 12, &opaque, 4);
	memcpy(b + 24 + el, key, kl);
	if (vl > 0)
		memcpy(b + 24 + el + kl, val, vl);
	return 24 + body;
}

/* Read one binary response; check opcode, status, opaque and value. */
static void
bin_expect(int fd, unsigned op, unsigned status, uint32_t opaque,
    const char *val)
{
	unsigned char h[24], body[256];
	size_t blen, el, kl;
	uint32_t o;

	ck_assert_int_eq(tl_readn(fd, h, 24, 10000), 24);
	blen = (size_t)h[8] << 24 | (size_t)h[9] << 16 | (size_t)h[10] << 8 | h[11];
	ck_assert_uint_le(blen, sizeof(body));
	ck_assert_int_eq(tl_readn(fd, body, blen, 5000), (ssize_t)blen);
	ck_assert_uint_eq(h[0], 0x81);
	ck_assert_uint_eq(h[1], op);
	ck_assert_uint_eq((unsigned)(h[6] << 8 | h[7]), status);
	memcpy(&o, h + 12, 4);
	ck_assert_uint_eq(o, opaque);
	if (val != NULL) {
		el = h[4];
		kl = (size_t)h[2] << 8 | h[3];
		ck_assert_uint_eq(blen - el - kl, strlen(val));
		ck_assert(memcmp(body + el + kl, val, strlen(val)) == 0);
	}
}

/* memjs shares one binary connection: its set behind its own waiting get
 * must run at once and wake the get. */
START_TEST(test_binary_set_wakes_own_get)
{
	unsigned char b[512];
	size_t n;

	n = bin_req(b, 0x00, "bq/t=20000", NULL, 1);
	n += bin_req(b + n, 0x01, "bq", "hello", 2);
	n += bin_req(b + n, 0x0b, "", NULL, 3);		/* version */
	n += bin_req(b + n, 0x00, "bq", NULL, 4);		/* keeps its turn */
	mustsend(c, b, n);
	bin_expect(c, 0x00, 0, 1, "hello");
	bin_expect(c, 0x01, 0, 2, NULL);
	bin_expect(c, 0x0b, 0, 3, PACKAGE_VERSION);
	bin_expect(c, 0x00, 1, 4, NULL);			/* not found */
}
END_TEST

/* Binary Add enqueues; Replace, Append, Prepend answer Not supported. */
START_TEST(test_binary_storage_commands)
{
	unsigned char b[512];
	size_t n;

	n = bin_req(b, 0x02, "ba", "one", 1);		/* add */
	n += bin_req(b + n, 0x03, "ba", "two", 2);	/* replace */
	n += bin_req(b + n, 0x0e, "ba", "three", 3);	/* append */
	n += bin_req(b + n, 0x0f, "ba", "four", 4);	/* prepend */
	n += bin_req(b + n, 0x00, "ba", NULL, 5);
	n += bin_req(b + n, 0x00, "ba", NULL, 6);
	mustsend(c, b, n);
	bin_expect(c, 0x02, 0, 1, NULL);
	bin_expect(c, 0x03, 0x83, 2, "replace not supported on a queue");
	bin_expect(c, 0x0e, 0x83, 3, "append not supported on a queue");
	bin_expect(c, 0x0f, 0x83, 4, "prepend not supported on a queue");
	bin_expect(c, 0x00, 0, 5, "one");
	bin_expect(c, 0x00, 1, 6, NULL);
}
END_TEST

/* ------------------------------------------------------------- quit */

START_TEST(test_quit_sends_pipelined_replies)
{
	mustsends(c, "version\r\nset q 0 0 1\r\nx\r\nget q\r\nquit\r\nversion\r\n");
	ckresp(c, "VERSION " PACKAGE_VERSION "\r\nSTORED\r\n"
	    "VALUE q 0 1\r\nx\r\nEND\r\n");
	tl_expect_closed(c, 5000);
	close(c);
	c = tl_connect(srv->port);
	/* quit alone still closes; the command after it never ran */
	mustsends(c, "quit\r\n");
	tl_expect_closed(c, 5000);
	close(c);
	c = tl_connect(srv->port);
	tl_ckget(c, "q", NULL);
}
END_TEST

/* ----------------------------------------------------------- daemon */

/* One line at the default log level: version, address and port, store. */
START_TEST(test_startup_line)
{
	char *want = tl_strdupf("notice: sakerd " PACKAGE_VERSION
	    " serving 127.0.0.1:%d, store memory, sync always\n", srv->port);
	int64_t deadline = tl_now_ms() + 10000;
	char *log;

	/* the line follows the listen by a moment: wait for it (bounded) */
	for (;;) {
		log = tl_read_file(srv->log, NULL);
		ck_assert_ptr_nonnull(log);
		if (strstr(log, want) != NULL || tl_now_ms() > deadline)
			break;
		free(log);
		tl_sleep_ms(20);
	}
	ck_assert_msg(strstr(log, want) != NULL, "no \"%s\" in:\n%s", want, log);
	free(want);
	free(log);
}
END_TEST

/* --help names only the store forms compiled in. */
START_TEST(test_help_store_forms)
{
	char *cmd = tl_strdupf("'%s' --help", tl_sakerd_path());
	FILE *p = popen(cmd, "r");
	char buf[8192];
	size_t n;

	ck_assert_ptr_nonnull(p);
	n = fread(buf, 1, sizeof(buf) - 1, p);
	buf[n] = '\0';
	ck_assert_int_eq(pclose(p), 0);
#ifdef HAVE_POSTGRES
	ck_assert_ptr_nonnull(strstr(buf, "postgres:CONNINFO"));
#else
	ck_assert_ptr_null(strstr(buf, "postgres"));
#endif
#ifdef HAVE_LMDB
	ck_assert_ptr_nonnull(strstr(buf, "lmdb:DIR"));
#else
	ck_assert_ptr_null(strstr(buf, "lmdb:DIR"));
#endif
#ifdef HAVE_SQLITE
	ck_assert_ptr_nonnull(strstr(buf, "sqlite:FILE"));
#else
	ck_assert_ptr_null(strstr(buf, "sqlite:FILE"));
#endif
	free(cmd);
}
END_TEST

static Suite *
compat_suite(void)
{
	Suite *s = suite_create("compat");
	TCase *tc = tcase_create("text");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_storage_commands_consume_data);
	tcase_add_test(tc, test_add_enqueues);
	tcase_add_test(tc, test_gets_cas_field);
	tcase_add_test(tc, test_multiget_big);
	tcase_add_test(tc, test_multiget_caps);
	tcase_add_test(tc, test_stats_bounded);
	tcase_add_test(tc, test_set_wakes_own_get);
	tcase_add_test(tc, test_commands_run_behind_wait);
	tcase_add_test(tc, test_get_behind_wait_keeps_turn);
	tcase_add_test(tc, test_wait_timeout_then_held);
	tcase_add_test(tc, test_binary_set_wakes_own_get);
	tcase_add_test(tc, test_binary_storage_commands);
	tcase_add_test(tc, test_quit_sends_pipelined_replies);
	tcase_add_test(tc, test_startup_line);
	tcase_add_test(tc, test_help_store_forms);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(compat_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
