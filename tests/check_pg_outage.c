/* check_pg_outage.c -- sakerd on the postgres store while the database
 * hangs or is down: the broker answers, fails writes in bounded time,
 * says so (/healthz, stats, /metrics), comes back, and loses nothing it
 * acknowledged. */
#include "config.h"

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "pg_cluster.h"
#include "tcpproxy.h"
#include "testlib.h"

/*
 * One throwaway cluster (tests/pg_cluster.c) reached through a TCP proxy
 * (tests/tcpproxy.c) that the tests freeze (a partition: connections are
 * accepted, nothing is answered) or whose server they stop.  The driver's
 * timeout= is 0.5 s here, so a test sees several deadlines in a few
 * seconds.
 */
#define TIMEOUT_MS 500
#define N_ACKED 40	/* items acknowledged before the outage */
#define N_TAKEN 6	/* of them taken before it (claims ahead) */
#define N_PROBES 60	/* requests timed during it */

static struct pg_cluster pgc;
static char pg_sock[128];

struct outage {
	struct tcpproxy *px;
	struct tcpproxy *px2;	/* a second way to the same server, or NULL */
	struct tl_server *srv;
	int http;
	int fd;
	int fo;			/* holds item N_TAKEN open across the outage */
	long in_doubt;		/* "outcome unknown" replies seen */
};

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* multi 1: a multi-host connection string whose first host refuses
 * (libpq goes on to the next inside PQconnectPoll()); 2: two hosts, both
 * proxies to the server (o->px first, o->px2 second) */
/* opts: more driver options (",segment=600"), or "" */
static void
outage_start_o(struct outage *o, const char *name, int multi, int timeout_ms,
    const char *opts)
{
	char *sp, *h, *hosts;

	memset(o, 0, sizeof(*o));
	o->px = tp_start(pg_sock);
	ck_assert_ptr_nonnull(o->px);
	if (multi == 2) {
		o->px2 = tp_start(pg_sock);
		ck_assert_ptr_nonnull(o->px2);
	}
	o->http = tl_free_port();
	hosts = multi == 1 ? tl_strdupf("host=127.0.0.1,127.0.0.1 port=%d,%d"
	    " target_session_attrs=read-write", tl_free_port(), tp_port(o->px)) :
	    multi == 2 ? tl_strdupf("host=127.0.0.1,127.0.0.1 port=%d,%d"
	    " target_session_attrs=read-write", tp_port(o->px),
	    tp_port(o->px2)) : tl_strdupf("host=127.0.0.1 port=%d",
	    tp_port(o->px));
	sp = tl_strdupf("postgres,timeout=%d.%d,lease=2%s:%s dbname=postgres"
	    " user=saker schema=%s_%d", timeout_ms / 1000,
	    timeout_ms % 1000 / 100, opts, hosts, name, (int)getpid());
	free(hosts);
	h = tl_strdupf("127.0.0.1:%d", o->http);
	o->srv = tl_server_start(sp, "--http", h, NULL);
	free(sp);
	free(h);
	o->fd = tl_connect(o->srv->port);
	o->fo = tl_connect(o->srv->port);
}

static void
outage_start_t(struct outage *o, const char *name, int multi, int timeout_ms)
{
	outage_start_o(o, name, multi, timeout_ms, "");
}

static void
outage_start(struct outage *o, const char *name, int multi)
{
	outage_start_t(o, name, multi, TIMEOUT_MS);
}

static void
outage_end(struct outage *o)
{
	close(o->fd);
	close(o->fo);
	tl_server_stop(o->srv);
	tl_server_free(o->srv);
	tp_stop(o->px);
	tp_stop(o->px2);
}

/* Send req, read one line: returned malloc'd, *ms the time it took. */
static char *
timed(int fd, const char *req, double *ms)
{
	double t0 = now_ms();
	char *line;

	mustsends(fd, req);
	line = tl_mustreadline(fd);
	*ms = now_ms() - t0;
	return line;
}

static int
healthz(struct outage *o)
{
	char *r = tl_http(o->http, "GET", "/healthz", NULL, NULL);
	int st = tl_http_status(r);

	free(r);
	return st;
}

/* Before the outage: N_ACKED acknowledged, N_TAKEN taken (the takes
 * claim more ahead), the next one open on o->fo, one delayed item due
 * during the outage. */
static void
load(struct outage *o)
{
	char buf[32], *v;
	int i;

	for (i = 0; i < N_ACKED; i++) {
		snprintf(buf, sizeof(buf), "item-%03d", i);
		tl_set(o->fd, "acked", buf);
	}
	for (i = 0; i < N_TAKEN; i++) {
		v = tl_get(o->fd, "acked");
		ck_assert_ptr_nonnull(v);
		free(v);
	}
	snprintf(buf, sizeof(buf), "item-%03d", N_TAKEN);
	v = tl_get(o->fo, "acked/open");
	ck_assert_str_eq(v, buf);
	free(v);
	mustsends(o->fd, "set later/delay=1500 0 0 5\r\nlater\r\n");
	ckresp(o->fd, "STORED\r\n");
	ck_assert_int_eq(healthz(o), 200);
}

static int
cmp_dbl(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

/*
 * While the database does not answer: writes fail within the deadline
 * (the first may be in doubt: its COMMIT got no answer), then at once;
 * version and stats answer at once (each under 100 ms, p99 printed); a
 * blocking get misses on time; /healthz says 503.
 */
static void
while_down(struct outage *o, const char *what)
{
	double lat[N_PROBES], ms, worst = 0;
	char *line, *st;
	int i, k;

	/* the first write meets the outage: bounded by the deadline */
	line = timed(o->fd, "set acked 0 0 5\r\nlost?\r\n", &ms);
	ck_assert_msg(strncmp(line, "SERVER_ERROR ", 13) == 0,
	    "%s: first set: %s", what, line);
	ck_assert_msg(ms < tl_slow(TIMEOUT_MS + 400), "%s: first set took"
	    " %.0f ms (timeout %d ms)", what, ms, TIMEOUT_MS);
	if (strstr(line, "outcome unknown") != NULL)
		o->in_doubt++;
	free(line);
	/* from now on nothing waits for the database */
	for (i = 0; i < N_PROBES; i++) {
		line = timed(o->fd, "version\r\n", &lat[i]);
		ck_assert_msg(strncmp(line, "VERSION ", 8) == 0, "%s", line);
		free(line);
		if (lat[i] > worst)
			worst = lat[i];
		if (i % 10 == 5)
			tl_sleep_ms(60);	/* across a tick or two */
	}
	qsort(lat, N_PROBES, sizeof(lat[0]), cmp_dbl);
	printf("%s: version during the outage: p50 %.2f ms, p99 %.2f ms,"
	    " max %.2f ms (%d requests)\n", what, lat[N_PROBES / 2],
	    lat[N_PROBES * 99 / 100], worst, N_PROBES);
	ck_assert_msg(worst < tl_slow(100), "%s: version took %.1f ms", what,
	    worst);
	for (k = 0; k < 5; k++) {
		double t0 = now_ms();

		st = tl_stats(o->fd);
		ms = now_ms() - t0;
		ck_assert_msg(ms < tl_slow(100), "%s: stats took %.1f ms", what, ms);
		ck_assert_int_eq(tl_stat_value(st, "store_connected"), 0);
		free(st);
		line = timed(o->fd, "set acked 0 0 4\r\nnope\r\n", &ms);
		ck_assert_msg(strncmp(line, "SERVER_ERROR postgres: database"
		    " unavailable: ", 42) == 0, "%s: set: %s", what, line);
		ck_assert_msg(ms < tl_slow(100), "%s: a set took %.1f ms", what,
		    ms);
		free(line);
	}
	/* a blocking get misses on time (not earlier, not later) */
	line = timed(o->fd, "get empty/t=500\r\n", &ms);
	ck_assert_msg(strcmp(line, "END") == 0, "%s: get/t=500: %s", what, line);
	ck_assert_msg(ms >= 480 && ms < tl_slow(500 + 150), "%s: get/t=500"
	    " took %.0f ms", what, ms);
	free(line);
	/* also on a queue that has items the broker cannot reach now,
	 * across a tick (the shared store's once-a-second retry) */
	line = timed(o->fd, "get acked/t=1200\r\n", &ms);
	ck_assert_msg(strcmp(line, "END") == 0, "%s: get acked/t=1200: %s",
	    what, line);
	ck_assert_msg(ms >= 1180 && ms < tl_slow(1200 + 150), "%s:"
	    " get acked/t=1200 took %.0f ms", what, ms);
	free(line);
	/* without t= the truth: no item, and why */
	line = timed(o->fd, "get acked\r\n", &ms);
	ck_assert_msg(strncmp(line, "SERVER_ERROR postgres: database"
	    " unavailable: ", 42) == 0, "%s: get: %s", what, line);
	ck_assert_msg(ms < tl_slow(100), "%s: get took %.1f ms", what, ms);
	free(line);
	ck_assert_int_eq(healthz(o), 503);
	st = tl_http(o->http, "GET", "/metrics", NULL, NULL);
	ck_assert_ptr_nonnull(strstr(st, "\nsaker_store_connected 0\n"));
	free(st);
}

/* After it: writes work again (within a few seconds), nothing
 * acknowledged is lost, the delayed item came due, state is back.
 * `woken` items from the head went to a waiter meanwhile. */
static void
after(struct outage *o, const char *what, int woken)
{
	int64_t t0 = tl_now_ms();
	long n = 0, later = 0;
	char *line, *v, *st;
	double ms;

	for (;;) {
		line = timed(o->fd, "set acked 0 0 5\r\nafter\r\n", &ms);
		if (strcmp(line, "STORED") == 0)
			break;
		ck_assert_msg(ms < tl_slow(TIMEOUT_MS + 400), "%s: set took"
		    " %.0f ms", what, ms);
		if (strstr(line, "outcome unknown") != NULL)
			o->in_doubt++;
		ck_assert_msg(tl_now_ms() - t0 < tl_slow(8000), "%s: no write"
		    " for 8 s after the end of the outage: %s", what, line);
		free(line);
		tl_sleep_ms(100);
	}
	free(line);
	printf("%s: first STORED %lld ms after the end of the outage\n", what,
	    (long long)(tl_now_ms() - t0));
	ck_assert_int_eq(healthz(o), 200);
	st = tl_stats(o->fd);
	ck_assert_int_eq(tl_stat_value(st, "store_connected"), 1);
	ck_assert_int_ge(tl_stat_value(st, "store_reconnects"), 1);
	/* each "outcome unknown" reply was counted, nothing else was */
	ck_assert_int_eq(tl_stat_value(st, "store_in_doubt_commits"),
	    o->in_doubt);
	free(st);
	/* the open item went back with the lost session: delivered
	 * again (at least once); its confirm finds nothing */
	mustsends(o->fo, "get acked/close\r\n");
	ckresp(o->fo, "END\r\n");
	/* every acknowledged item not taken is there, in order (the
	 * claims of the lost session came back, and the open item in its
	 * place), plus "after", plus the first set of the outage only if
	 * it was in doubt */
	while ((v = tl_get(o->fd, "acked")) != NULL) {
		char want[32];

		if (n < N_ACKED - N_TAKEN - woken) {
			snprintf(want, sizeof(want), "item-%03ld", n + N_TAKEN +
			    woken);
			ck_assert_str_eq(v, want);
		} else {
			ck_assert_msg(strcmp(v, "after") == 0 ||
			    (o->in_doubt > 0 && strcmp(v, "lost?") == 0),
			    "%s: unexpected item %s", what, v);
		}
		n++;
		free(v);
	}
	ck_assert_int_ge(n, N_ACKED - N_TAKEN - woken + 1);
	ck_assert_int_le(n, N_ACKED - N_TAKEN - woken + 1 + o->in_doubt);
	/* the delayed item fell due meanwhile and is there */
	while ((v = tl_get(o->fd, "later")) != NULL) {
		ck_assert_str_eq(v, "later");
		later++;
		free(v);
	}
	ck_assert_int_eq(later, 1);
	st = tl_http(o->http, "GET", "/metrics", NULL, NULL);
	ck_assert_ptr_nonnull(strstr(st, "\nsaker_store_connected 1\n"));
	ck_assert_ptr_nonnull(strstr(st, "\nsaker_store_reconnects_total "));
	ck_assert_ptr_nonnull(strstr(st, "\nsaker_store_in_doubt_commits_total "));
	ck_assert_ptr_nonnull(strstr(st, "\nsaker_store_last_commit_age_seconds "));
	free(st);
}


/*
 * A take whose COMMIT got no answer hands its item out (store.h,
 * SAKER_EINDOUBT); when that COMMIT never reached the server the row is
 * still there, held by this broker.  Connected again, the broker deletes
 * it before anything is served: the item is not handed out a second
 * time, and the rest come in order, once each.
 */
START_TEST(test_doubt_take_once)
{
	struct outage o;
	struct tl_value tv;
	char buf[32], *st;
	int i, got = 4;

	outage_start(&o, "doubt", 0);
	for (i = 0; i < 8; i++) {
		snprintf(buf, sizeof(buf), "d-%d", i);
		tl_set(o.fd, "dq", buf);
	}
	/* three takes in one turn: the commit claims the next ones ahead */
	mustsends(o.fd, "get dq dq dq\r\n");
	for (i = 0; i < 3; i++) {
		snprintf(buf, sizeof(buf), "d-%d", i);
		ck_assert_int_eq(tl_read_value(o.fd, &tv), 1);
		ck_assert_str_eq(tv.data, buf);
		tl_value_clear(&tv);
	}
	ck_assert_int_eq(tl_read_value(o.fd, &tv), 0);
	/* the next take is served from the claimed rows; its COMMIT is
	 * stuck in the frozen proxy, then thrown away with the connection */
	tp_set_mode(o.px, TP_FREEZE);
	mustsends(o.fd, "get dq\r\n");
	ck_assert_int_eq(tl_read_value(o.fd, &tv), 1);
	ck_assert_str_eq(tv.data, "d-3");
	tl_value_clear(&tv);
	ck_assert_int_eq(tl_read_value(o.fd, &tv), 0);
	st = tl_stats(o.fd);
	ck_assert_int_eq(tl_stat_value(st, "store_in_doubt_commits"), 1);
	free(st);
	tp_set_mode(o.px, TP_REFUSE);
	tl_sleep_ms(200);
	tp_set_mode(o.px, TP_RELAY);
	/* d-3 never again; d-4 .. d-7 once each, in order */
	for (i = 4; i < 8; i++) {
		mustsends(o.fd, "get dq/t=8000\r\n");
		ck_assert_int_eq(tl_read_value(o.fd, &tv), 1);
		snprintf(buf, sizeof(buf), "d-%d", i);
		ck_assert_msg(strcmp(tv.data, buf) == 0, "got %s, want %s; log %s",
		    tv.data, buf, tl_read_file(o.srv->log, NULL));
		tl_value_clear(&tv);
		ck_assert_int_eq(tl_read_value(o.fd, &tv), 0);
		got++;
	}
	mustsends(o.fd, "get dq/t=1500\r\n");
	ck_assert_int_eq(tl_read_value(o.fd, &tv), 0);
	ck_assert_int_eq(got, 8);
	outage_end(&o);
}
END_TEST

/* One statement on raw connection c; its first value (malloc'd), or NULL
 * when it returns no rows. */
static char *
raw1(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	char *v = NULL;

	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK ||
	    PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql,
	    PQresultErrorMessage(r));
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0)
		v = tl_strdupf("%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	return v;
}

static void
raw0(PGconn *c, const char *sql)
{
	free(raw1(c, sql));
}

static PGconn *
raw_connect(const char *name)
{
	PGconn *c = PQconnectdb(pgc.conninfo);
	char *sql;

	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	sql = tl_strdupf("SET search_path TO \"%s_%d\"", name, (int)getpid());
	raw0(c, sql);
	free(sql);
	return c;
}

/*
 * Issue 47, segments: the in-doubt reconcile (the by-key DELETE of the
 * rows a commit without an answer handed out) must not miss a row that
 * saker_rotate() is moving out of the oldest segment.  Made to happen:
 * the in-doubt item is ready again (as a peer's sweep leaves it once the
 * lease ran out) and sits in the segment to be emptied; a rotation moves
 * it forward and stays uncommitted (a held row keeps the segment from
 * being truncated) while the broker reconnects and reconciles; it
 * commits once the reconcile waits for it.  A DELETE whose snapshot
 * predates the move finds the old row gone and skips it, and the item
 * would be served a second time from the segment it was moved to.
 */
START_TEST(test_doubt_during_rotation)
{
	struct outage o;
	struct tl_value tv;
	PGconn *rot, *look;
	char buf[32], *v;
	int i, waiting = 0;
	int64_t t0;

	/* a long segment: the broker's own rotations stay out of the way,
	 * this test rotates by hand; timeout 2 s: the reconcile's lock
	 * wait (lock_timeout 1.5 s) outlasts the test's look at it */
	outage_start_o(&o, "doubtseg", 0, 2000, ",segment=600");
	for (i = 0; i < 8; i++) {
		snprintf(buf, sizeof(buf), "d-%d", i);
		tl_set(o.fd, "dq", buf);
	}
	tl_set(o.fd, "hq", "held");
	tl_ckget(o.fo, "hq/open", "held");
	mustsends(o.fd, "get dq dq dq\r\n");
	for (i = 0; i < 3; i++) {
		snprintf(buf, sizeof(buf), "d-%d", i);
		ck_assert_int_eq(tl_read_value(o.fd, &tv), 1);
		ck_assert_str_eq(tv.data, buf);
		tl_value_clear(&tv);
	}
	ck_assert_int_eq(tl_read_value(o.fd, &tv), 0);
	tp_set_mode(o.px, TP_FREEZE);
	mustsends(o.fd, "get dq\r\n");
	ck_assert_int_eq(tl_read_value(o.fd, &tv), 1);
	ck_assert_str_eq(tv.data, "d-3");
	tl_value_clear(&tv);
	ck_assert_int_eq(tl_read_value(o.fd, &tv), 0);
	tp_set_mode(o.px, TP_REFUSE);

	rot = raw_connect("doubtseg");
	look = raw_connect("doubtseg");
	/* (waits for the cut session's rollback) */
	v = raw1(rot, "UPDATE saker_items SET state = 0, owner = NULL,"
	    " lease_until = 0 WHERE data = 'd-3' RETURNING seg");
	ck_assert_str_eq(v, "0");
	free(v);
	/* segments 1, 2, 3 emptied in turn: segment 0 is next */
	for (i = 1; i <= 3; i++) {
		v = raw1(rot, "SELECT r FROM saker_rotate(0, 0, 5000)");
		ck_assert_str_eq(v, "1");
		free(v);
	}
	raw0(rot, "BEGIN");
	/* rows left (the open item): moved, not truncated */
	v = raw1(rot, "SELECT r FROM saker_rotate(0, 0, 5000)");
	ck_assert_str_eq(v, "-3");
	free(v);
	v = raw1(rot, "SELECT seg FROM saker_items WHERE data = 'd-3'");
	ck_assert_str_eq(v, "3");
	free(v);
	tp_set_mode(o.px, TP_RELAY);
	/* the reconnected broker's reconcile waits for the rotation */
	t0 = tl_now_ms();
	while (waiting == 0 && tl_now_ms() - t0 < tl_slow(10000)) {
		v = raw1(look, "SELECT count(*) FROM pg_stat_activity WHERE"
		    " wait_event_type = 'Lock' AND datname = current_database()");
		waiting = atoi(v);
		free(v);
		if (waiting == 0)
			tl_sleep_ms(2);
	}
	ck_assert_int_gt(waiting, 0);
	raw0(rot, "COMMIT");
	/* d-3 never again; d-4 .. d-7 once each, in order */
	for (i = 4; i < 8; i++) {
		mustsends(o.fd, "get dq/t=8000\r\n");
		ck_assert_int_eq(tl_read_value(o.fd, &tv), 1);
		snprintf(buf, sizeof(buf), "d-%d", i);
		ck_assert_msg(strcmp(tv.data, buf) == 0, "got %s, want %s",
		    tv.data, buf);
		tl_value_clear(&tv);
		ck_assert_int_eq(tl_read_value(o.fd, &tv), 0);
	}
	mustsends(o.fd, "get dq/t=500\r\n");
	ck_assert_int_eq(tl_read_value(o.fd, &tv), 0);
	v = raw1(look, "SELECT count(*) FROM saker_items WHERE data = 'd-3'");
	ck_assert_str_eq(v, "0");
	free(v);
	PQfinish(rot);
	PQfinish(look);
	outage_end(&o);
}
END_TEST

/* A partition: the proxy stops relaying (connections stay open). */
START_TEST(test_frozen)
{
	struct outage o;
	struct tl_value tv;
	char want[32];
	int64_t t0;
	int fw;

	outage_start(&o, "frozen", 0);
	load(&o);
	tp_set_mode(o.px, TP_FREEZE);
	while_down(&o, "frozen");
	/* past the delayed item's due time, and reconnect attempts have
	 * timed out against the frozen proxy meanwhile */
	tl_sleep_ms(1500);
	/* a consumer waiting when the database comes back gets the item
	 * the lost session held open, at once (not at its timeout) */
	fw = tl_connect(o.srv->port);
	mustsends(fw, "get acked/t=8000\r\n");
	ck_assert(tl_quiet(fw, 300));
	t0 = tl_now_ms();
	tp_set_mode(o.px, TP_RELAY);
	ck_assert_int_eq(tl_read_value(fw, &tv), 1);
	printf("frozen: a waiter got %s %lld ms after the end of the outage\n",
	    tv.data, (long long)(tl_now_ms() - t0));
	snprintf(want, sizeof(want), "item-%03d", N_TAKEN);
	ck_assert_str_eq(tv.data, want);
	ck_assert_int_lt(tl_now_ms() - t0, tl_slow(4000));
	tl_value_clear(&tv);
	ck_assert_int_eq(tl_read_value(fw, &tv), 0);
	close(fw);
	after(&o, "frozen", 1);
	outage_end(&o);
}
END_TEST

/* The database server stopped (its sessions ended, connections refused)
 * and started again. */
START_TEST(test_stopped)
{
	struct outage o;

	outage_start(&o, "stopped", 0);
	load(&o);
	ck_assert_int_eq(pg_cluster_server_stop(&pgc), 0);
	while_down(&o, "stopped");
	tl_sleep_ms(1000);
	ck_assert_int_eq(pg_cluster_server_start(&pgc), 0);
	after(&o, "stopped", 0);
	outage_end(&o);
}
END_TEST

/* Refused at the TCP level (the proxy closes its port), then back;
 * through a two-host connection string whose first host never answers. */
START_TEST(test_refused)
{
	struct outage o;

	outage_start(&o, "refused", 1);
	load(&o);
	tp_set_mode(o.px, TP_REFUSE);
	while_down(&o, "refused");
	tl_sleep_ms(1000);
	tp_set_mode(o.px, TP_RELAY);
	after(&o, "refused", 0);
	outage_end(&o);
}
END_TEST

/*
 * The first host of a two-host list stops answering (partitioned from
 * this broker) and stays so: libpq would try it first on every attempt
 * and wait on it for ever; the broker starts the attempt after one that
 * timed out with the next host, and writes work again through it.
 */
START_TEST(test_first_host_frozen)
{
	struct outage o;
	char *line;
	double ms;

	outage_start(&o, "firsthost", 2);
	load(&o);
	tp_set_mode(o.px, TP_FREEZE);
	line = timed(o.fd, "set acked 0 0 5\r\nlost?\r\n", &ms);
	ck_assert_msg(strncmp(line, "SERVER_ERROR ", 13) == 0, "%s", line);
	if (strstr(line, "outcome unknown") != NULL)
		o.in_doubt++;
	free(line);
	/* the delayed item falls due meanwhile */
	tl_sleep_ms(1000);
	after(&o, "first host frozen", 0);
	ck_assert_uint_ge(tp_accepted(o.px2), 1);
	outage_end(&o);
}
END_TEST

/*
 * timeout= 5 s: a silent database is still given up on in well under a
 * second, because the probe (an empty query on the notification
 * connection) goes unanswered too ...
 */
START_TEST(test_silent_found_by_probe)
{
	struct outage o;
	char *line;
	double ms;

	outage_start_t(&o, "probe", 0, 5000);
	load(&o);
	tp_set_mode(o.px, TP_FREEZE);
	line = timed(o.fd, "set acked 0 0 5\r\nlost?\r\n", &ms);
	ck_assert_msg(strncmp(line, "SERVER_ERROR ", 13) == 0, "%s", line);
	ck_assert_msg(strstr(line, "probe") != NULL, "%s", line);
	ck_assert_msg(ms < tl_slow(1000), "a set took %.0f ms with timeout=5"
	    " (the probe should have found the silence)", ms);
	printf("probe: the first set failed after %.0f ms (timeout=5)\n", ms);
	if (strstr(line, "outcome unknown") != NULL)
		o.in_doubt++;
	free(line);
	tl_sleep_ms(1500);
	tp_set_mode(o.px, TP_RELAY);
	after(&o, "probe", 0);
	outage_end(&o);
}
END_TEST

/*
 * ... while a statement that is merely slow (waiting 1.5 s for a lock
 * another session holds) is waited for: the server answers the probe.
 * Nothing is dropped, reconnected or in doubt.
 */
START_TEST(test_slow_is_not_silent)
{
	struct outage o;
	PGconn *pc;
	PGresult *r;
	char *sql, *line, *st;

	outage_start_t(&o, "slow", 0, 5000);
	tl_set(o.fd, "slow", "first");
	pc = PQconnectdb(pgc.conninfo);
	ck_assert_int_eq(PQstatus(pc), CONNECTION_OK);
	sql = tl_strdupf("BEGIN; LOCK TABLE slow_%d.saker_items IN ACCESS"
	    " EXCLUSIVE MODE", (int)getpid());
	r = PQexec(pc, sql);
	ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	free(sql);
	mustsends(o.fd, "set slow 0 0 6\r\nsecond\r\n");
	ck_assert(tl_quiet(o.fd, 1500));
	r = PQexec(pc, "COMMIT");
	PQclear(r);
	PQfinish(pc);
	line = tl_mustreadline(o.fd);
	ck_assert_str_eq(line, "STORED");
	free(line);
	st = tl_stats(o.fd);
	ck_assert_int_eq(tl_stat_value(st, "store_reconnects"), 0);
	ck_assert_int_eq(tl_stat_value(st, "store_in_doubt_commits"), 0);
	ck_assert_int_eq(tl_stat_value(st, "store_connected"), 1);
	free(st);
	tl_ckget(o.fd, "slow", "first");
	tl_ckget(o.fd, "slow", "second");
	outage_end(&o);
}
END_TEST

/*
 * --commit async (issue 43): a set's batch goes in flight into a frozen
 * proxy.  While its COMMIT is unanswered the client gets no STORED, and a
 * `version` on another connection is answered at once (< 50 ms each),
 * where a synchronous commit holds the loop up to timeout= (here 2 s).
 * Then SIGKILL, and the proxy drops the connection with the COMMIT
 * unrelayed: restarted, the item acknowledged before is there and the one
 * never acknowledged is not.
 */
START_TEST(test_async_frozen_kill)
{
	struct tcpproxy *px;
	struct tl_server *srv;
	double ms, worst = 0;
	char *sp, *line;
	int fd, fv, i;

	px = tp_start(pg_sock);
	ck_assert_ptr_nonnull(px);
	sp = tl_strdupf("postgres,timeout=2.0,lease=2:host=127.0.0.1 port=%d"
	    " dbname=postgres user=saker schema=afk_%d", tp_port(px),
	    (int)getpid());
	srv = tl_server_start(sp, "--commit", "async", NULL);
	free(sp);
	fd = tl_connect(srv->port);
	fv = tl_connect(srv->port);
	tl_set(fd, "q", "before");
	tp_set_mode(px, TP_FREEZE);
	mustsends(fd, "set q 0 0 5\r\nlater\r\n");
	tl_sleep_ms(50);	/* its batch is in flight now */
	for (i = 0; i < 20; i++) {
		line = timed(fv, "version\r\n", &ms);
		ck_assert_msg(strncmp(line, "VERSION ", 8) == 0, "%s", line);
		free(line);
		if (ms > worst)
			worst = ms;
		tl_sleep_ms(10);
	}
	ck_assert_msg(worst < 50, "a version waited %.1f ms for the COMMIT"
	    " in flight", worst);
	ck_assert_msg(tl_quiet(fd, 100), "a reply before the COMMIT's answer");
	tl_server_kill(srv);
	close(fd);
	close(fv);
	/* the frozen connection is closed with its COMMIT unrelayed */
	tp_set_mode(px, TP_REFUSE);
	tp_set_mode(px, TP_RELAY);
	tl_server_restart(srv);
	fd = tl_connect(srv->port);
	tl_ckget(fd, "q", "before");
	tl_ckget(fd, "q", NULL);
	close(fd);
	tl_server_stop(srv);
	tl_server_free(srv);
	tp_stop(px);
}
END_TEST

/*
 * --commit async: the COMMIT in flight goes into a frozen proxy and
 * nothing else asks the database.  The tick gives the connection up as a
 * round trip would (probe=, timeout=): the set is answered SERVER_ERROR
 * in bounded time, never STORED, while `version` on another connection
 * is answered without waiting for timeout=.
 */
START_TEST(test_async_frozen_answered)
{
	struct tcpproxy *px;
	struct tl_server *srv;
	double ms, worst = 0, t0;
	char *sp, *line = NULL;
	int fd, fv;

	px = tp_start(pg_sock);
	ck_assert_ptr_nonnull(px);
	sp = tl_strdupf("postgres,timeout=2.0,lease=2:host=127.0.0.1 port=%d"
	    " dbname=postgres user=saker schema=afa_%d", tp_port(px),
	    (int)getpid());
	srv = tl_server_start(sp, "--commit", "async", NULL);
	free(sp);
	fd = tl_connect(srv->port);
	fv = tl_connect(srv->port);
	tl_set(fd, "q", "before");
	tp_set_mode(px, TP_FREEZE);
	t0 = now_ms();
	mustsends(fd, "set q 0 0 5\r\nlater\r\n");
	while (line == NULL && now_ms() - t0 < 6000) {
		free(timed(fv, "version\r\n", &ms));
		if (ms > worst)
			worst = ms;
		line = tl_readline_ms(fd, 20);
	}
	ck_assert_msg(line != NULL, "no answer to the set in 6 s");
	ck_assert_msg(strncmp(line, "SERVER_ERROR", 12) == 0, "%s", line);
	free(line);
	/* (< 50 ms is the goal; one stall of about 230 ms remains, not the
	 * flight's: far below timeout=, which a synchronous commit waits) */
	ck_assert_msg(worst < 500, "a version waited %.1f ms", worst);
	tp_set_mode(px, TP_REFUSE);
	tp_set_mode(px, TP_RELAY);
	close(fd);
	close(fv);
	tl_server_stop(srv);
	tl_server_free(srv);
	tp_stop(px);
}
END_TEST

int
main(void)
{
	Suite *su;
	SRunner *sr;
	TCase *tc;
	char why[256];
	int failed, rc;

	rc = pg_cluster_start(&pgc, why, sizeof(why));
	if (rc != 0) {
		printf("check_pg_outage: SKIP: %s\n", why);
		pg_cluster_destroy(&pgc);
		return rc > 0 ? 77 : EXIT_FAILURE;
	}
	snprintf(pg_sock, sizeof(pg_sock), "%s/.s.PGSQL.5432", pgc.dir);
	su = suite_create("pg_outage");
	tc = tcase_create("outage");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_frozen);
	tcase_add_test(tc, test_doubt_take_once);
	tcase_add_test(tc, test_doubt_during_rotation);
	tcase_add_test(tc, test_stopped);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_first_host_frozen);
	tcase_add_test(tc, test_silent_found_by_probe);
	tcase_add_test(tc, test_slow_is_not_silent);
	tcase_add_test(tc, test_async_frozen_kill);
	tcase_add_test(tc, test_async_frozen_answered);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	pg_cluster_destroy(&pgc);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
