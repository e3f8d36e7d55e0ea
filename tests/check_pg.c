/* check_pg.c -- two sakerd brokers over one PostgreSQL database. */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "pg_cluster.h"
#include "testlib.h"

/*
 * One throwaway cluster for the run (tests/pg_cluster.c); every test uses
 * its own schema in it, so brokers of different tests never meet.  The
 * lease is 2 s (the driver's lease= option) so the kill test is short.
 */
static struct pg_cluster pgc;

static char *
spec(const char *schema)
{
	return tl_strdupf("postgres:%s schema=%s_%d lease=2", pgc.conninfo,
	    schema, (int)getpid());
}

/* Two brokers on the schema, both started with the configuration text
 * `conf` (written to DIR/SCHEMA.conf), or with none when it is NULL. */
static void
two_conf(const char *schema, const char *conf, struct tl_server **a,
    struct tl_server **b)
{
	char *sp = spec(schema), *path = NULL;
	FILE *f;

	if (conf != NULL) {
		path = tl_strdupf("%s/%s.conf", pgc.dir, schema);
		f = fopen(path, "w");
		ck_assert_ptr_nonnull(f);
		fputs(conf, f);
		ck_assert_int_eq(fclose(f), 0);
	}
	*a = tl_server_start(sp, path != NULL ? "--config" : NULL, path, NULL);
	*b = tl_server_start(sp, path != NULL ? "--config" : NULL, path, NULL);
	free(path);
	free(sp);
}

static void
two(const char *schema, struct tl_server **a, struct tl_server **b)
{
	two_conf(schema, NULL, a, b);
}

START_TEST(test_set_a_get_b)
{
	struct tl_server *a, *b;
	int fa, fb, i;
	char buf[32];

	two("xfer", &a, &b);
	fa = tl_connect(a->port);
	fb = tl_connect(b->port);
	/* one producer through A: FIFO holds whichever broker takes */
	for (i = 0; i < 40; i++) {
		snprintf(buf, sizeof(buf), "item-%02d", i);
		tl_set(fa, "jobs", buf);
	}
	for (i = 0; i < 40; i++) {
		snprintf(buf, sizeof(buf), "item-%02d", i);
		tl_ckget(i % 3 == 0 ? fa : fb, "jobs", buf);
	}
	tl_ckget(fa, "jobs", NULL);
	tl_ckget(fb, "jobs", NULL);
	close(fa);
	close(fb);
	tl_server_stop(a);
	tl_server_stop(b);
	tl_server_free(a);
	tl_server_free(b);
}
END_TEST

static int
cmp_ll(const void *x, const void *y)
{
	long long a = *(const long long *)x, b = *(const long long *)y;

	return a < b ? -1 : a > b;
}

START_TEST(test_wake_across)
{
	enum { N = 40 };
	struct tl_server *a, *b;
	long long lat[N];
	int fa, fb, fs, i;
	char *v;

	two("wake", &a, &b);
	fa = tl_connect(a->port);
	fb = tl_connect(b->port);
	fs = tl_connect(b->port);
	tl_set(fa, "w", "warm-up");	/* creates the queue for both */
	tl_ckget(fb, "w", "warm-up");
	for (i = 0; i < N; i++) {
		int64_t t0;

		mustsends(fb, "get w/t=5000\r\n");
		tl_wait_stat(fs, "queue_w_waiters", 1, 3000);
		t0 = tl_now_ms();
		tl_set(fa, "w", "hello");
		v = tl_mustreadline(fb);
		lat[i] = tl_now_ms() - t0;
		ck_assert_str_eq(v, "VALUE w/t=5000 0 5");
		free(v);
		ckresp(fb, "hello\r\nEND\r\n");
	}
	qsort(lat, N, sizeof(lat[0]), cmp_ll);
	printf("check_pg: cross-broker wake-up over %d: median %lld ms,"
	    " p95 %lld ms, max %lld ms\n", N, lat[N / 2], lat[N * 95 / 100],
	    lat[N - 1]);
	fflush(stdout);
	/* the target is 50 ms p99; a shared 2-core CI box gets some slack */
	ck_assert_int_le(lat[N * 95 / 100], 50);
	ck_assert_int_lt(lat[N - 1], 1000);
	close(fa);
	close(fb);
	close(fs);
	tl_server_stop(a);
	tl_server_stop(b);
	tl_server_free(a);
	tl_server_free(b);
}
END_TEST

/* A get on broker B waits on a queue that exists nowhere (a get creates
 * none, issue 18); broker A's set creates it in the shared store, and B's
 * once-a-second look opens it and wakes the get.  Afterwards B has the
 * queue, and a timed-out wait on another missing name leaves nothing. */
START_TEST(test_wait_for_queue_across)
{
	struct tl_server *a, *b;
	int fa, fb, fs;
	char *st;

	two("waitnew", &a, &b);
	fa = tl_connect(a->port);
	fb = tl_connect(b->port);
	fs = tl_connect(b->port);
	mustsends(fb, "get fresh/t=10000\r\n");
	tl_wait_stat(fs, "queue_fresh_waiters", 1, 3000);
	ck_assert_int_eq(tl_stat(fs, "queue_creates"), 0);
	tl_set(fa, "fresh", "hello");
	ckresp(fb, "VALUE fresh/t=10000 0 5\r\nhello\r\nEND\r\n");
	ck_assert_int_eq(tl_stat(fs, "queue_fresh_items"), 0);
	mustsends(fb, "get none/t=300\r\n");
	ckresp(fb, "END\r\n");
	st = tl_stats(fs);
	ck_assert_int_eq(tl_stat_value(st, "queue_none_items"), -1);
	ck_assert_int_eq(tl_stat_value(st, "queue_creates"), 0);
	free(st);
	close(fa);
	close(fb);
	close(fs);
	tl_server_stop(a);
	tl_server_stop(b);
	tl_server_free(a);
	tl_server_free(b);
}
END_TEST

START_TEST(test_kill_returns_leases)
{
	enum { N = 3 };
	struct tl_server *a, *b;
	int fa[N], fb, i, got = 0;
	bool seen[N] = { false };
	char buf[32], *v;
	int64_t t0;

	two("kill", &a, &b);
	fb = tl_connect(b->port);
	for (i = 0; i < N; i++) {
		snprintf(buf, sizeof(buf), "job-%d", i);
		tl_set(fb, "k", buf);
	}
	/* A holds every item open, then dies without a word */
	for (i = 0; i < N; i++) {
		fa[i] = tl_connect(a->port);
		snprintf(buf, sizeof(buf), "job-%d", i);
		tl_ckget(fa[i], "k/open", buf);
	}
	tl_server_kill(a);
	t0 = tl_now_ms();
	/* a live lease is not stolen */
	tl_ckget(fb, "k", NULL);
	/* after the lease (2 s) a sweep returns them, in order, once each */
	while (got < N && tl_now_ms() - t0 < 8000) {
		mustsends(fb, "get k/t=1000\r\n");
		v = tl_mustreadline(fb);
		if (strcmp(v, "END") == 0) {
			free(v);
			continue;
		}
		ck_assert_str_eq(v, "VALUE k/t=1000 0 5");
		free(v);
		snprintf(buf, sizeof(buf), "job-%d\r\nEND\r\n", got);
		ckresp(fb, buf);
		seen[got] = true;
		got++;
	}
	ck_assert_int_eq(got, N);
	ck_assert(seen[0] && seen[N - 1]);
	ck_assert_int_ge(tl_now_ms() - t0, 1000);
	/* exactly once more: nothing left, and nothing comes back later */
	tl_ckget(fb, "k", NULL);
	mustsends(fb, "get k/t=3500\r\n");
	ckresp(fb, "END\r\n");
	for (i = 0; i < N; i++)
		close(fa[i]);
	close(fb);
	tl_server_stop(b);
	tl_server_free(a);
	tl_server_free(b);
}
END_TEST

START_TEST(test_open_close_across)
{
	struct tl_server *a, *b;
	int fa, fb;

	two("oc", &a, &b);
	fa = tl_connect(a->port);
	fb = tl_connect(b->port);
	tl_set(fa, "o", "one");
	tl_set(fa, "o", "two");
	/* an item open on A is invisible on B; abort puts it back first */
	tl_ckget(fa, "o/open", "one");
	tl_ckget(fb, "o/peek", "two");
	mustsends(fa, "get o/abort\r\n");
	ckresp(fa, "END\r\n");
	tl_ckget(fb, "o/open", "one");
	tl_ckget(fa, "o", "two");
	mustsends(fb, "get o/close\r\n");
	ckresp(fb, "END\r\n");
	tl_ckget(fa, "o", NULL);
	/* a clean stop hands open items back at once (no lease wait) */
	tl_set(fa, "o", "three");
	tl_ckget(fb, "o/open", "three");
	close(fb);
	tl_ckget(fa, "o/t=3000", "three");
	close(fa);
	tl_server_stop(a);
	tl_server_stop(b);
	tl_server_free(a);
	tl_server_free(b);
}
END_TEST

/* Send n "get q" in one write and read the n answers; each item's data is
 * recorded in seen[] (items are "i-<number>").  Returns the items got. */
static int
pipelined_gets(int fd, const char *q, int n, int *seen, int nseen)
{
	struct tl_value v;
	char *cmd, *p;
	int i, got = 0, idx;
	size_t ql = strlen(q);

	cmd = malloc((size_t)n * (ql + 6) + 1);
	ck_assert_ptr_nonnull(cmd);
	for (p = cmd, i = 0; i < n; i++)
		p += sprintf(p, "get %s\r\n", q);
	mustsends(fd, cmd);
	free(cmd);
	for (i = 0; i < n; i++) {
		if (tl_read_value(fd, &v) == 0)
			continue;
		ck_assert_int_eq(sscanf(v.data, "i-%d", &idx), 1);
		ck_assert_int_ge(idx, 0);
		ck_assert_int_lt(idx, nseen);
		seen[idx]++;
		got++;
		tl_value_clear(&v);
		ck_assert_int_eq(tl_read_value(fd, &v), 0);	/* END */
	}
	return got;
}

/* n pipelined sets of items i-<from>..; every one STORED */
static void
pipelined_sets(int fd, const char *q, int from, int n)
{
	char *cmd, *p, *exp;
	int i;

	cmd = malloc((size_t)n * 64);
	exp = malloc((size_t)n * 8 + 1);
	ck_assert(cmd != NULL && exp != NULL);
	for (p = cmd, i = 0; i < n; i++) {
		char d[16];
		int dl = snprintf(d, sizeof(d), "i-%d", from + i);

		p += sprintf(p, "set %s 0 0 %d\r\n%s\r\n", q, dl, d);
	}
	for (p = exp, i = 0; i < n; i++)
		p += sprintf(p, "STORED\r\n");
	mustsends(fd, cmd);
	ckresp(fd, exp);
	free(cmd);
	free(exp);
}

/*
 * A consumer that asks for many items at once makes its broker claim
 * ahead; the items it claimed but did not hand out are invisible to the
 * other broker.  Returns X, the item the other broker got first (items
 * 5..X-1 are claimed by A).
 */
enum { CLAIM_N = 30 };

static int
claim_ahead_setup(int fa, int fb)
{
	int seen[CLAIM_N] = { 0 }, i, x;
	char *v;

	for (i = 0; i < CLAIM_N; i++) {
		char d[16];

		snprintf(d, sizeof(d), "i-%d", i);
		tl_set(fb, "k", d);
	}
	/* one consumer on A: strict FIFO whatever A claims */
	ck_assert_int_eq(pipelined_gets(fa, "k", 5, seen, CLAIM_N), 5);
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(seen[i], 1);
	v = tl_get(fb, "k");
	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(sscanf(v, "i-%d", &x), 1);
	free(v);
	/* five takes in one batch claim more than five items */
	ck_assert_msg(x > 5 && x < CLAIM_N, "broker A claimed no items ahead (B got"
	    " i-%d)", x);
	return x;
}

START_TEST(test_claims_back_after_kill)
{
	struct tl_server *a, *b;
	int fa, fb, x, i, got = 0, seen[CLAIM_N] = { 0 };
	int64_t t0;
	struct tl_value v;
	int idx;

	two("ckill", &a, &b);
	fa = tl_connect(a->port);
	fb = tl_connect(b->port);
	x = claim_ahead_setup(fa, fb);
	seen[x] = 1;
	/* A dies holding claims: they come back once the lease runs out,
	 * each exactly once */
	tl_server_kill(a);
	t0 = tl_now_ms();
	while (got < CLAIM_N - 6 && tl_now_ms() - t0 < 8000) {
		mustsends(fb, "get k/t=1000\r\n");
		if (tl_read_value(fb, &v) == 0)
			continue;
		ck_assert_int_eq(sscanf(v.data, "i-%d", &idx), 1);
		ck_assert(idx >= 5 && idx < CLAIM_N);
		seen[idx]++;
		got++;
		tl_value_clear(&v);
		ck_assert_int_eq(tl_read_value(fb, &v), 0);
	}
	ck_assert_int_eq(got, CLAIM_N - 6);
	for (i = 5; i < CLAIM_N; i++)
		ck_assert_int_eq(seen[i], 1);
	mustsends(fb, "get k/t=3000\r\n");
	ckresp(fb, "END\r\n");
	close(fa);
	close(fb);
	tl_server_stop(b);
	tl_server_free(a);
	tl_server_free(b);
}
END_TEST

START_TEST(test_claims_back_on_stop)
{
	struct tl_server *a, *b;
	int fa, fb, x, i;
	char d[16];

	two("cstop", &a, &b);
	fa = tl_connect(a->port);
	fb = tl_connect(b->port);
	x = claim_ahead_setup(fa, fb);
	close(fa);
	/* a clean stop hands the claims back at once, in their places */
	tl_server_stop(a);
	for (i = 5; i < CLAIM_N; i++) {
		if (i == x)
			continue;
		snprintf(d, sizeof(d), "i-%d", i);
		tl_ckget(fb, "k", d);
	}
	tl_ckget(fb, "k", NULL);
	close(fb);
	tl_server_stop(b);
	tl_server_free(a);
	tl_server_free(b);
}
END_TEST

/* Producers and pipelined consumers on both brokers at once: every item
 * is delivered exactly once. */
/* An item damaged in the database (here by an UPDATE) is never served:
 * the broker that meets it answers SERVER_ERROR naming the queue and
 * moves it to q_damaged; both brokers go on with the rest. */
START_TEST(test_damaged_item_across)
{
	struct tl_server *a, *b;
	char sql[128], *v;
	PGconn *c;
	PGresult *r;
	int fa, fb;

	two("dmg", &a, &b);
	fa = tl_connect(a->port);
	fb = tl_connect(b->port);
	tl_set(fa, "d", "first");
	tl_set(fa, "d", "damage-me");
	tl_set(fa, "d", "last");
	tl_set(fa, "ok", "fine");
	c = PQconnectdb(pgc.conninfo);
	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	snprintf(sql, sizeof(sql), "UPDATE dmg_%d.saker_items SET data ="
	    " 'DAMAGE-me'::bytea WHERE data = 'damage-me'::bytea",
	    (int)getpid());
	r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s",
	    PQresultErrorMessage(r));
	ck_assert_str_eq(PQcmdTuples(r), "1");
	PQclear(r);
	PQfinish(c);
	tl_ckget(fb, "d", "first");
	mustsends(fb, "get d\r\n");
	v = tl_mustreadline(fb);
	ck_assert_msg(strncmp(v, "SERVER_ERROR ", 13) == 0 &&
	    strstr(v, "'d'") != NULL && strstr(v, "'d_damaged'") != NULL,
	    "%s", v);
	free(v);
	tl_ckget(fa, "d", "last");
	tl_ckget(fb, "d", NULL);
	tl_ckget(fb, "ok", "fine");
	/* kept as it is, for a look */
	tl_ckget(fa, "d_damaged", "DAMAGE-me");
	tl_ckget(fb, "d_damaged", NULL);
	close(fa);
	close(fb);
	tl_server_stop(a);
	tl_server_stop(b);
	tl_server_free(a);
	tl_server_free(b);
}
END_TEST

/* How many times a VACUUM (not autovacuum) ran on schema's saker_items:
 * on its segments (saker_items_s0...), the partitioned table itself has
 * no statistics. */
static long
vacuum_count(const char *schema)
{
	char sql[200];
	PGconn *c = PQconnectdb(pgc.conninfo);
	PGresult *r;
	long n;

	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	snprintf(sql, sizeof(sql), "SELECT coalesce(sum(vacuum_count), 0)"
	    " FROM pg_stat_user_tables WHERE schemaname = '%s_%d'"
	    " AND relname LIKE 'saker\\_items\\_s%%'", schema, (int)getpid());
	r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s",
	    PQresultErrorMessage(r));
	n = atol(PQgetvalue(r, 0, 0));
	PQclear(r);
	PQfinish(c);
	return n;
}

/* Each take leaves a dead row at its queue's head that later takes step
 * over until a vacuum: a broker that writes vacuums saker_items itself,
 * about once a second (vacuum= option), without its clients waiting;
 * vacuum=0 leaves it to autovacuum. */
START_TEST(test_vacuum)
{
	static const char *const schemas[2] = { "vac", "novac" };
	struct tl_server *a;
	char *sp;
	int fa, i, k;
	long n;
	int64_t t0;

	for (k = 0; k < 2; k++) {
		sp = tl_strdupf("postgres%s:%s schema=%s_%d", k == 0 ? "" :
		    ",vacuum=0", pgc.conninfo, schemas[k], (int)getpid());
		a = tl_server_start(sp, NULL);
		free(sp);
		fa = tl_connect(a->port);
		t0 = tl_now_ms();
		/* pairs for 2.5 s at least: two ticks see fresh commits */
		for (i = 0; i < 200 || tl_now_ms() - t0 < 2500; i++) {
			tl_set(fa, "v", "x");
			tl_ckget(fa, "v", "x");
		}
		if (k == 0) {
			while ((n = vacuum_count(schemas[k])) == 0 &&
			    tl_now_ms() - t0 < tl_slow(10000))
				tl_sleep_ms(100);
			ck_assert_msg(n > 0, "no VACUUM of saker_items in %lld ms",
			    (long long)(tl_now_ms() - t0));
		} else {
			ck_assert_int_eq(vacuum_count(schemas[k]), 0);
		}
		/* the broker went on serving meanwhile */
		tl_set(fa, "v", "last");
		tl_ckget(fa, "v", "last");
		close(fa);
		tl_server_stop(a);
		tl_server_free(a);
	}
}
END_TEST

/* One value of sql on the test's schema (malloc'd). */
static char *
schema_val(const char *schema, const char *sql)
{
	char *ci = tl_strdupf("%s options='-c search_path=%s_%d'",
	    pgc.conninfo, schema, (int)getpid());
	PGconn *c = PQconnectdb(ci);
	PGresult *r;
	char *v;

	free(ci);
	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s",
	    PQresultErrorMessage(r));
	v = tl_strdupf("%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	PQfinish(c);
	return v;
}

/*
 * Issue 47: a session holding a snapshot keeps VACUUM from the dead rows
 * of consumed items.  stats says how long and how many, the log warns
 * past horizon_warn=, and the queue's low-water mark moves on regardless
 * (takes start there), held back only by the item open since before it:
 * released, that item is served first.
 */
START_TEST(test_held_horizon)
{
	struct tl_server *a;
	PGconn *hold;
	PGresult *r;
	char *sp, *st, *lo0, *lo1;
	char *hp;
	int fa, fo, i, http;
	int64_t t0;
	long long v;

	sp = tl_strdupf("postgres,horizon_warn=1:%s schema=hz_%d lease=30",
	    pgc.conninfo, (int)getpid());
	http = tl_free_port();
	hp = tl_strdupf("127.0.0.1:%d", http);
	a = tl_server_start(sp, "--http", hp, NULL);
	free(hp);
	free(sp);
	fa = tl_connect(a->port);
	fo = tl_connect(a->port);
	/* nothing holds a snapshot yet */
	t0 = tl_now_ms();
	while ((v = tl_stat(fa, "store_horizon_age")) < 0 &&
	    tl_now_ms() - t0 < tl_slow(5000))
		tl_sleep_ms(100);
	ck_assert_int_eq(v, 0);
	tl_set(fa, "h", "first");
	tl_ckget(fo, "h/open", "first");

	hold = PQconnectdb(pgc.conninfo);
	ck_assert_int_eq(PQstatus(hold), CONNECTION_OK);
	r = PQexec(hold, "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	PQclear(r);
	lo0 = schema_val("hz", "SELECT lo_vis FROM saker_queues");
	/* pairs for 2.5 s: the mark moves at most once a second */
	t0 = tl_now_ms();
	for (i = 0; i < 200 || tl_now_ms() - t0 < 2500; i++) {
		tl_set(fa, "h", "x");
		tl_ckget(fa, "h", "x");
	}
	lo1 = schema_val("hz", "SELECT lo_vis FROM saker_queues");
	ck_assert_msg(strtoll(lo1, NULL, 10) > strtoll(lo0, NULL, 10),
	    "the mark did not move: %s -> %s", lo0, lo1);
	/* held back by the open item: at or below its key */
	free(lo1);
	lo1 = schema_val("hz", "SELECT (q.lo_vis, q.lo_id) <= (i.vis, i.id) FROM"
	    " saker_queues q, saker_items i WHERE i.data = 'first'");
	ck_assert_str_eq(lo1, "t");
	/* released, it is still the head */
	mustsends(fo, "get h/abort\r\n");
	ckresp(fo, "END\r\n");
	tl_set(fa, "h", "after");
	tl_ckget(fa, "h", "first");
	tl_ckget(fa, "h", "after");

	/* stats: the held snapshot's age, the dead rows it keeps */
	t0 = tl_now_ms();
	while (tl_now_ms() - t0 < tl_slow(10000)) {
		st = tl_stats(fa);
		v = tl_stat_value(st, "store_dead_rows");
		if (tl_stat_value(st, "store_horizon_age") >= 2 && v >= 100) {
			free(st);
			break;
		}
		free(st);
		tl_sleep_ms(200);
	}
	ck_assert_int_ge(tl_stat(fa, "store_horizon_age"), 2);
	ck_assert_int_ge(tl_stat(fa, "store_horizon_xids"), 1);
	ck_assert_int_ge(tl_stat(fa, "store_dead_rows"), 100);
	/* the same in /metrics, for an alert */
	{
		char *m = tl_http(http, "GET", "/metrics", NULL, NULL), *l;

		ck_assert_int_eq(tl_http_status(m), 200);
		l = strstr(m, "\nsaker_store_horizon_age_seconds ");
		ck_assert_msg(l != NULL &&
		    strtod(strchr(l + 1, ' '), NULL) >= 2.0, "%s", m);
		l = strstr(m, "\nsaker_store_dead_rows ");
		ck_assert_msg(l != NULL &&
		    strtoll(strchr(l + 1, ' '), NULL, 10) >= 100, "%s", m);
		ck_assert_ptr_nonnull(strstr(m, "\nsaker_store_horizon_xids "));
		free(m);
	}
	{
		char *log = tl_read_file(a->log, NULL);

		ck_assert_msg(log != NULL && strstr(log, "has held a snapshot for")
		    != NULL, "no warning in the log: %s", log ? log : "");
		free(log);
	}
	/* ended: the age drops back */
	PQclear(PQexec(hold, "COMMIT"));
	PQfinish(hold);
	t0 = tl_now_ms();
	while ((v = tl_stat(fa, "store_horizon_age")) >= 1 &&
	    tl_now_ms() - t0 < tl_slow(5000))
		tl_sleep_ms(100);
	ck_assert_int_lt(v, 1);
	free(lo0);
	free(lo1);
	close(fa);
	close(fo);
	tl_server_stop(a);
	tl_server_free(a);
}
END_TEST

/* How many of the comma-separated numbers differ between a and b. */
static int
files_changed(const char *a, const char *b)
{
	int n = 0;

	while (*a != '\0' && *b != '\0') {
		if (strtoll(a, NULL, 10) != strtoll(b, NULL, 10))
			n++;
		a += strcspn(a, ",");
		b += strcspn(b, ",");
		a += *a == ',';
		b += *b == ',';
	}
	return n;
}

/*
 * Issue 47, format 7: the items live in segments that take puts in turn
 * (segment=1s here); the oldest is emptied by TRUNCATE even while a
 * session holds a snapshot, so the store's size follows the items
 * queued, not those consumed.  Items left in an old segment are moved
 * forward with their keys: a queue nobody reads keeps its FIFO order, a
 * delayed item its due time, an open item stays with its broker and can
 * be confirmed.
 */
START_TEST(test_segments)
{
	struct tl_server *a;
	PGconn *hold;
	PGresult *r;
	char *sp, *v, *files0;
	int fa, fo, i;
	int64_t t0;
	long long trunc0, trunc1, moved, bytes;

	sp = tl_strdupf("postgres,segment=1,segment_rows=1000:%s schema=sg_%d"
	    " lease=30", pgc.conninfo, (int)getpid());
	a = tl_server_start(sp, NULL);
	free(sp);
	fa = tl_connect(a->port);
	fo = tl_connect(a->port);
	tl_set(fa, "so", "open1");
	tl_ckget(fo, "so/open", "open1");
	tl_set(fa, "sl", "lazy1");
	tl_set(fa, "sl", "lazy2");
	tl_set(fa, "sd/delay=9000", "soon");
	tl_set(fa, "sd/delay=600000", "later");
	t0 = tl_now_ms();
	while ((trunc0 = tl_stat(fa, "store_segment_truncations")) < 0 &&
	    tl_now_ms() - t0 < tl_slow(5000))
		tl_sleep_ms(100);
	ck_assert_int_ge(trunc0, 0);
	ck_assert_int_eq(tl_stat(fa, "store_segments"), 4);

	hold = PQconnectdb(pgc.conninfo);
	ck_assert_int_eq(PQstatus(hold), CONNECTION_OK);
	r = PQexec(hold, "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	PQclear(r);
	trunc0 = tl_stat(fa, "store_segment_truncations");
	files0 = schema_val("sg", "SELECT string_agg(relfilenode::text, ','"
	    " ORDER BY relname) FROM pg_class WHERE relname LIKE"
	    " 'saker\\_items\\_s_' AND relnamespace ="
	    " current_schema()::regnamespace");
	/* 6 s of pairs: segments taken and emptied in turn (the rotation
	 * is tried once a tick, a 1 s segment rotates every 1-2 s) */
	t0 = tl_now_ms();
	for (i = 0; tl_now_ms() - t0 < 6000; i++) {
		tl_set(fa, "h", "x");
		tl_ckget(fa, "h", "x");
	}
	trunc1 = tl_stat(fa, "store_segment_truncations");
	moved = tl_stat(fa, "store_segment_moved");
	ck_assert_msg(trunc1 - trunc0 >= 3, "truncations %lld -> %lld in 6 s"
	    " (%d pairs)", trunc0, trunc1, i);
	/* the lazy queue's items, the delayed ones and the open one */
	ck_assert_int_ge(moved, 5);
	/* seen from the database: the files of the segments emptied were
	 * replaced (TRUNCATE gives a table new ones) while the snapshot
	 * was held; DELETEd rows would have stayed in the old ones */
	v = schema_val("sg", "SELECT string_agg(relfilenode::text, ',' ORDER BY"
	    " relname) FROM pg_class WHERE relname LIKE 'saker\\_items\\_s_'"
	    " AND relnamespace = current_schema()::regnamespace");
	ck_assert_int_ge(files_changed(files0, v), 3);
	free(v);
	free(files0);
	v = schema_val("sg", "SELECT sum(pg_relation_size(relid)) FROM"
	    " pg_partition_tree('saker_items')");
	bytes = strtoll(v, NULL, 10);
	free(v);
	fprintf(stderr, "check_pg: segments: %d pairs, %lld truncations,"
	    " %lld moved, %lld bytes\n", i, trunc1 - trunc0, moved, bytes);
	PQclear(PQexec(hold, "COMMIT"));
	PQfinish(hold);

	/* moved forward, in order, intact */
	tl_ckget(fa, "sl", "lazy1");
	tl_ckget(fa, "sl", "lazy2");
	tl_ckget(fa, "sl", NULL);
	tl_ckget(fa, "sd", NULL);
	tl_ckget(fa, "sd/t=6000", "soon");
	tl_ckget(fa, "sd", NULL);
	v = schema_val("sg", "SELECT count(*) FROM saker_items WHERE state = 0"
	    " AND due > 0");
	ck_assert_str_eq(v, "1");
	free(v);
	mustsends(fo, "get so/close\r\n");
	ckresp(fo, "END\r\n");
	tl_ckget(fa, "so", NULL);
	v = schema_val("sg", "SELECT count(*) FROM saker_items WHERE"
	    " data = 'open1'");
	ck_assert_str_eq(v, "0");
	free(v);
	close(fa);
	close(fo);
	tl_server_stop(a);
	tl_server_free(a);
}
END_TEST

/* A statement on c that must succeed; its first value, or "" */
static char *
raw_val(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	char *v;

	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK ||
	    PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql,
	    PQresultErrorMessage(r));
	v = tl_strdupf("%s", PQresultStatus(r) == PGRES_TUPLES_OK &&
	    PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
	return v;
}

/*
 * Issue 47, segments: a lease sweep must not lose sight of a held row
 * that its owner is moving to the current segment (P_SEG_MINE: a DELETE
 * and an INSERT, under the moves' advisory lock).  Here the owner is a
 * broker that is gone but for its last batch: the row's lease runs out
 * while that batch, moving the row, stays open for 3 s, then commits.
 * Sweeps meanwhile skip the old row; one that moved on past the lease
 * would leave the item to the full sweep, 5 minutes later.  The item is
 * handed out again within seconds.
 */
START_TEST(test_sweep_during_move)
{
	struct tl_server *a;
	PGconn *m;
	char *sp, *v, *ci;
	int fa;

	/* lease=30: the sweep's margin is then 1 s (no timeout= added) */
	sp = tl_strdupf("postgres:%s schema=swmove_%d lease=30", pgc.conninfo,
	    (int)getpid());
	a = tl_server_start(sp, NULL);
	free(sp);
	fa = tl_connect(a->port);
	tl_set(fa, "sw", "ghost");
	ci = tl_strdupf("%s options='-c search_path=swmove_%d'", pgc.conninfo,
	    (int)getpid());
	m = PQconnectdb(ci);
	free(ci);
	ck_assert_int_eq(PQstatus(m), CONNECTION_OK);
	/* open on a broker that is gone, its lease out in 1.5 s */
	free(raw_val(m, "UPDATE saker_items SET state = 1, owner = 'ghost',"
	    " lease_until = (extract(epoch FROM clock_timestamp()) * 1000)"
	    "::bigint + 1500 WHERE data = 'ghost'"));
	/* its last batch moves it (as P_SEG_MINE does) and stays open */
	free(raw_val(m, "BEGIN"));
	v = raw_val(m, "SELECT pg_try_advisory_xact_lock(7308604707263426420)");
	ck_assert_str_eq(v, "t");
	free(v);
	v = raw_val(m, "WITH d AS (DELETE FROM saker_items WHERE data = 'ghost'"
	    " RETURNING *) INSERT INTO saker_items SELECT * FROM d RETURNING 1");
	ck_assert_str_eq(v, "1");
	free(v);
	tl_sleep_ms(3500);
	tl_ckget(fa, "sw", NULL);
	free(raw_val(m, "COMMIT"));
	/* the next sweeps still cover the lease that ran out */
	tl_ckget(fa, "sw/t=4000", "ghost");
	PQfinish(m);
	close(fa);
	tl_server_stop(a);
	tl_server_free(a);
}
END_TEST

/*
 * Issue 47, segments: a flush empties the queue even while
 * saker_rotate() is moving its items forward.  The rotation (by hand,
 * a held item keeping its segment from being truncated) moves them and
 * stays uncommitted while the broker's flush runs; it commits once the
 * flush waits for it.  A DELETE whose snapshot predates the move skips
 * the moved rows, and the items would outlive the flush.
 */
START_TEST(test_flush_during_rotation)
{
	struct tl_server *a;
	PGconn *rot, *look;
	char *sp, *v, *ci;
	int fa, fo, i, waiting = 0;
	int64_t t0;

	/* a long segment: the broker's own rotations stay out of the way */
	sp = tl_strdupf("postgres,segment=600:%s schema=flrot_%d lease=30",
	    pgc.conninfo, (int)getpid());
	a = tl_server_start(sp, NULL);
	free(sp);
	fa = tl_connect(a->port);
	fo = tl_connect(a->port);
	tl_set(fa, "fq", "f1");
	tl_set(fa, "fq", "f2");
	tl_set(fa, "hq", "held");
	tl_ckget(fo, "hq/open", "held");
	ci = tl_strdupf("%s options='-c search_path=flrot_%d'", pgc.conninfo,
	    (int)getpid());
	rot = PQconnectdb(ci);
	look = PQconnectdb(ci);
	free(ci);
	ck_assert_int_eq(PQstatus(rot), CONNECTION_OK);
	ck_assert_int_eq(PQstatus(look), CONNECTION_OK);
	for (i = 1; i <= 3; i++) {
		v = raw_val(rot, "SELECT r FROM saker_rotate(0, 0, 5000)");
		ck_assert_str_eq(v, "1");
		free(v);
	}
	free(raw_val(rot, "BEGIN"));
	v = raw_val(rot, "SELECT r FROM saker_rotate(0, 0, 5000)");
	ck_assert_str_eq(v, "-3");	/* moved, the held item left */
	free(v);
	mustsends(fa, "flush fq\r\n");
	t0 = tl_now_ms();
	while (waiting == 0 && tl_now_ms() - t0 < tl_slow(10000)) {
		v = raw_val(look, "SELECT count(*) FROM pg_stat_activity WHERE"
		    " wait_event_type = 'Lock' AND datname = current_database()");
		waiting = atoi(v);
		free(v);
		if (waiting == 0)
			tl_sleep_ms(2);
	}
	ck_assert_int_gt(waiting, 0);
	free(raw_val(rot, "COMMIT"));
	ckresp(fa, "END\r\n");
	tl_ckget(fa, "fq", NULL);
	v = raw_val(look, "SELECT count(*) FROM saker_items WHERE data IN"
	    " ('f1', 'f2')");
	ck_assert_str_eq(v, "0");
	free(v);
	PQfinish(rot);
	PQfinish(look);
	close(fa);
	close(fo);
	tl_server_stop(a);
	tl_server_free(a);
}
END_TEST

/* A live broker renews the leases of the items it holds open (by key):
 * with a 2 s lease, an item open on A for 5 s is not handed to B, and
 * A can still close it. */
START_TEST(test_renew_keeps_open)
{
	struct tl_server *a, *b;
	int fa, fb;
	int64_t t0;

	two("renew", &a, &b);
	fa = tl_connect(a->port);
	fb = tl_connect(b->port);
	tl_set(fa, "r", "one");
	tl_set(fa, "r", "two");
	tl_ckget(fa, "r/open", "one");
	t0 = tl_now_ms();
	while (tl_now_ms() - t0 < 5000) {
		tl_ckget(fb, "r/peek", "two");
		tl_sleep_ms(250);
	}
	mustsends(fa, "get r/close\r\n");
	ckresp(fa, "END\r\n");
	tl_ckget(fb, "r", "two");
	tl_ckget(fb, "r", NULL);
	close(fa);
	close(fb);
	tl_server_stop(a);
	tl_server_stop(b);
	tl_server_free(a);
	tl_server_free(b);
}
END_TEST

/* Two brokers (--commit MODE) put and take 600 items through one
 * queue: every item is delivered exactly once. */
static void
two_brokers_once(const char *schema, const char *mode)
{
	enum { N = 600, ROUND = 20 };
	struct tl_server *a, *b;
	int pa, pb, ca, cb, put = 0, got = 0, rounds = 0, i;
	static int seen[N];
	char *sp = spec(schema);

	memset(seen, 0, sizeof(seen));
	a = tl_server_start(sp, "--commit", mode, NULL);
	b = tl_server_start(sp, "--commit", mode, NULL);
	free(sp);
	pa = tl_connect(a->port);
	pb = tl_connect(b->port);
	ca = tl_connect(a->port);
	cb = tl_connect(b->port);
	while (got < N && rounds++ < 400) {
		if (put < N) {
			pipelined_sets(pa, "m", put, ROUND);
			pipelined_sets(pb, "m", put + ROUND, ROUND);
			put += 2 * ROUND;
		}
		got += pipelined_gets(ca, "m", 16, seen, N);
		got += pipelined_gets(cb, "m", 16, seen, N);
	}
	ck_assert_int_eq(got, N);
	for (i = 0; i < N; i++)
		ck_assert_msg(seen[i] == 1, "item i-%d seen %d times", i, seen[i]);
	tl_ckget(ca, "m", NULL);
	tl_ckget(cb, "m", NULL);
	close(pa);
	close(pb);
	close(ca);
	close(cb);
	tl_server_stop(a);
	tl_server_stop(b);
	tl_server_free(a);
	tl_server_free(b);
}

START_TEST(test_two_brokers_once)
{
	two_brokers_once("once", "sync");
}
END_TEST

/* The same with each batch's COMMIT in flight while the next gathers
 * (issue 43): the claims a flight makes for the next turn, the takes that
 * wait for it, the replies held until its answer lose and repeat
 * nothing. */
START_TEST(test_two_brokers_once_async)
{
	two_brokers_once("once_async", "async");
}
END_TEST

/* Delivery counts are shared by the brokers: an item handed out by A
 * then by B reaches the dead-letter queue after max_deliveries in total;
 * an item whose broker died holding it for its last delivery comes back
 * by the lease sweep and is moved at its next take, not served. */
START_TEST(test_dead_letter_across)
{
	struct tl_server *a, *b;
	int fa, fb, w, i;
	int64_t t0;

	two_conf("dl", "[queue p]\nmax_deliveries = 2\n"
	    "[queue s]\nmax_deliveries = 1\n", &a, &b);
	fa = tl_connect(a->port);
	fb = tl_connect(b->port);
	tl_set(fb, "p", "bad");
	tl_set(fb, "p", "good");
	/* a worker on A, then one on B, each dies holding it */
	w = tl_connect(a->port);
	mustsends(w, "mg p/open v d\r\n");
	ckresp(w, "VA 3 d1\r\nbad\r\n");
	close(w);
	tl_wait_stat(fa, "queue_p_open_transactions", 0, 5000);
	w = tl_connect(b->port);
	mustsends(w, "mg p/open v d\r\n");
	ckresp(w, "VA 3 d2\r\nbad\r\n");
	close(w);
	tl_wait_stat(fb, "queue_p_dead_lettered", 1, 5000);
	mustsends(fa, "mg p v d\r\n");
	ckresp(fa, "VA 4 d0\r\ngood\r\n");
	mustsends(fa, "mg p_dead v d\r\n");
	ckresp(fa, "VA 3 d2\r\nbad\r\n");

	/* A dies holding the last delivery; B's sweep returns it */
	tl_set(fb, "s", "x");
	w = tl_connect(a->port);
	mustsends(w, "mg s/open v d\r\n");
	ckresp(w, "VA 1 d1\r\nx\r\n");
	tl_server_kill(a);
	close(w);
	close(fa);
	t0 = tl_now_ms();
	for (i = 0; tl_stat(fb, "queue_s_dead_lettered") == 0; i++) {
		ck_assert_msg(tl_now_ms() - t0 < 10000, "never dead-lettered");
		mustsends(fb, "get s/t=1000\r\n");
		ckresp(fb, "END\r\n");	/* never served */
	}
	mustsends(fb, "mg s_dead v d\r\n");
	ckresp(fb, "VA 1 d2\r\nx\r\n");
	close(fb);
	tl_server_stop(b);
	tl_server_free(a);
	tl_server_free(b);
}
END_TEST

/* expire_to on a shared store: the expired head is moved once, by the
 * broker that meets it, and served from the target. */
START_TEST(test_expire_to_across)
{
	struct tl_server *a, *b;
	int fa, fb;

	two_conf("xto", "[queue ex]\nmax_age = 300ms\nexpire_to = ex_late\n",
	    &a, &b);
	fa = tl_connect(a->port);
	fb = tl_connect(b->port);
	tl_setn(fb, "ex", 5, 0, "old", 3);
	tl_sleep_ms(400);
	tl_set(fb, "ex", "new");
	tl_ckget(fa, "ex", "new");
	/* moved once, by whichever broker met it first (B may have claimed
	 * it ahead at its commit) */
	ck_assert_int_eq(tl_stat(fa, "queue_ex_expired_to") +
	    tl_stat(fb, "queue_ex_expired_to"), 1);
	mustsends(fb, "mg ex_late v f t\r\n");
	ckresp(fb, "VA 3 f5 t-1\r\nold\r\n");
	close(fa);
	close(fb);
	tl_server_stop(a);
	tl_server_stop(b);
	tl_server_free(a);
	tl_server_free(b);
}
END_TEST

/* Issue 42's first case over a real broker: expire_to = ex2_to, 1,500
 * items set with exptime 1 (1,000, a live one, 500): one get on ex2
 * moves the 1,000 ahead of the live item, the background sweep the 500
 * behind it, and the target holds all 1,500, in order; none dropped. */
START_TEST(test_expire_to_all)
{
	struct tl_server *a;
	char *sp = spec("xall"), *path;
	char buf[16];
	FILE *f;
	int fa, i;

	path = tl_strdupf("%s/xall.conf", pgc.dir);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs("[queue ex2]\nexpire_to = ex2_to\n", f);
	ck_assert_int_eq(fclose(f), 0);
	a = tl_server_start(sp, "--config", path, NULL);
	fa = tl_connect(a->port);
	for (i = 0; i < 1500; i++) {
		if (i == 1000)
			tl_set(fa, "ex2", "live");
		snprintf(buf, sizeof(buf), "x%04d", i);
		tl_setn(fa, "ex2", 0, 1, buf, 5);
	}
	tl_sleep_ms(2100);	/* every exptime 1 has passed */
	tl_ckget(fa, "ex2", "live");
	ck_assert_int_ge(tl_stat(fa, "queue_ex2_expired_to"), 1000);
	tl_wait_stat(fa, "queue_ex2_expired_to", 1500, 15000);
	ck_assert_int_eq(tl_stat(fa, "queue_ex2_expired_items"), 0);
	ck_assert_int_eq(tl_stat(fa, "queue_ex2_items"), 0);
	ck_assert_int_eq(tl_stat(fa, "queue_ex2_to_items"), 1500);
	for (i = 0; i < 1500; i++) {
		snprintf(buf, sizeof(buf), "x%04d", i);
		tl_ckget(fa, "ex2_to", buf);
	}
	tl_ckget(fa, "ex2_to", NULL);
	close(fa);
	tl_server_stop(a);
	tl_server_free(a);
	free(path);
	free(sp);
}
END_TEST

/* A capped queue on two brokers (issue 42): each broker's capacity check
 * reads the store layer's counters, which count its own changes at once
 * and the other broker's after the next tick (about a second): the cap
 * holds on one broker exactly, and across two once a second has passed. */
START_TEST(test_cap_across)
{
	struct tl_server *a, *b;
	int fa, fb;

	two_conf("cap", "[queue cap]\nmax_items = 5\n", &a, &b);
	fa = tl_connect(a->port);
	fb = tl_connect(b->port);
	tl_set(fa, "cap", "1");
	tl_set(fa, "cap", "2");
	tl_set(fa, "cap", "3");
	tl_sleep_ms(1300);	/* a tick on B: it counts the queue again */
	tl_set(fb, "cap", "4");
	tl_set(fb, "cap", "5");
	mustsends(fb, "set cap 0 0 1\r\n6\r\n");
	ckresp(fb, "NOT_STORED\r\n");	/* B's own puts, at once */
	ck_assert_int_eq(tl_stat(fb, "queue_cap_items"), 5);
	tl_ckget(fb, "cap", "1");
	tl_sleep_ms(1300);	/* and on A: B's two puts and its get show */
	ck_assert_int_eq(tl_stat(fa, "queue_cap_items"), 4);
	tl_set(fa, "cap", "6");
	mustsends(fa, "set cap 0 0 1\r\n7\r\n");
	ckresp(fa, "NOT_STORED\r\n");
	close(fa);
	close(fb);
	tl_server_stop(a);
	tl_server_stop(b);
	tl_server_free(a);
	tl_server_free(b);
}
END_TEST

/* Retries across brokers (issue 37): an item A gives back with a delay
 * is not served by B before it is due, keeps its count, and survives A's
 * kill -9; a lease B's worker keeps touching outlives open_timeout and the
 * broker lease while A asks for the item; the queue's backoff applies to
 * an abort on either broker. */
START_TEST(test_retry_across)
{
	struct tl_server *a, *b;
	int fa, fb, i;
	int64_t t0, ms;

	two_conf("rt", "[queue rj]\nopen_timeout = 800ms\n"
	    "retry_backoff = 1500,1500\n", &a, &b);
	fa = tl_connect(a->port);
	fb = tl_connect(b->port);
	tl_set(fb, "rj", "job");
	/* A's worker fails it: back in 1.2 s, and B waits that long */
	mustsends(fa, "mg rj/open v d\r\n");
	ckresp(fa, "VA 3 d1\r\njob\r\n");
	t0 = tl_now_ms();
	mustsends(fa, "get rj/abort/delay=1200\r\n");
	ckresp(fa, "END\r\n");
	tl_ckget(fb, "rj", NULL);
	mustsends(fb, "mg rj/open/t=6000 v d\r\n");
	ckresp(fb, "VA 3 d2\r\njob\r\n");
	ms = tl_now_ms() - t0;
	ck_assert_msg(ms >= 1200 && ms < tl_slow(4000), "B got it after %lld"
	    " ms, want 1200..", (long long)ms);
	/* B's worker holds it 2.5 s, past open_timeout and the 2 s broker
	 * lease, touching it; A never gets it */
	for (i = 0; i < 5; i++) {
		tl_sleep_ms(500);
		mustsends(fb, "touch rj 0\r\n");
		ckresp(fb, "TOUCHED\r\n");
		tl_ckget(fa, "rj", NULL);
	}
	ck_assert_int_eq(tl_stat(fb, "queue_rj_open_timeouts"), 0);
	/* B's abort takes the queue's backoff (1125..1500 ms) */
	t0 = tl_now_ms();
	mustsends(fb, "get rj/abort\r\n");
	ckresp(fb, "END\r\n");
	tl_ckget(fa, "rj", NULL);
	mustsends(fa, "mg rj/open/t=6000 v d\r\n");
	ckresp(fa, "VA 3 d3\r\njob\r\n");
	ms = tl_now_ms() - t0;
	ck_assert_msg(ms >= 1125 && ms < tl_slow(4500), "A got it after %lld"
	    " ms, want 1125..", (long long)ms);
	/* A gives it back for 1.5 s and dies: B serves it then, not before */
	t0 = tl_now_ms();
	mustsends(fa, "get rj/abort/delay=1500\r\n");
	ckresp(fa, "END\r\n");
	tl_server_kill(a);
	close(fa);
	tl_ckget(fb, "rj", NULL);
	mustsends(fb, "mg rj/t=6000 v d\r\n");
	ckresp(fb, "VA 3 d3\r\njob\r\n");
	ms = tl_now_ms() - t0;
	ck_assert_msg(ms >= 1500 && ms < tl_slow(4500), "B got it after %lld"
	    " ms, want 1500..", (long long)ms);
	close(fb);
	tl_server_stop(b);
	tl_server_free(a);
	tl_server_free(b);
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
		printf("check_pg: SKIP: %s\n", why);
		pg_cluster_destroy(&pgc);
		return rc > 0 ? 77 : EXIT_FAILURE;
	}
	su = suite_create("pg");
	tc = tcase_create("two-brokers");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_set_a_get_b);
	tcase_add_test(tc, test_open_close_across);
	tcase_add_test(tc, test_wake_across);
	tcase_add_test(tc, test_wait_for_queue_across);
	tcase_add_test(tc, test_kill_returns_leases);
	tcase_add_test(tc, test_claims_back_after_kill);
	tcase_add_test(tc, test_claims_back_on_stop);
	tcase_add_test(tc, test_two_brokers_once);
	tcase_add_test(tc, test_two_brokers_once_async);
	tcase_add_test(tc, test_vacuum);
	tcase_add_test(tc, test_held_horizon);
	tcase_add_test(tc, test_segments);
	tcase_add_test(tc, test_sweep_during_move);
	tcase_add_test(tc, test_flush_during_rotation);
	tcase_add_test(tc, test_renew_keeps_open);
	tcase_add_test(tc, test_damaged_item_across);
	tcase_add_test(tc, test_dead_letter_across);
	tcase_add_test(tc, test_expire_to_across);
	tcase_add_test(tc, test_expire_to_all);
	tcase_add_test(tc, test_retry_across);
	tcase_add_test(tc, test_cap_across);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	pg_cluster_destroy(&pgc);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
