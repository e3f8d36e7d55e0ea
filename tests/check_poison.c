/* check_poison.c -- integration tests of delivery counts and dead-letter
 * queues (issue 22): a real sakerd on every store that counts deliveries,
 * workers that disconnect, abort or time out holding an item. */
#include "config.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

static const char conf_text[] =
    "[queue poison]\nmax_deliveries = 3\n"
    "[queue named]\nmax_deliveries = 2\ndead_letter = graveyard\n"
    "[queue ot]\nmax_deliveries = 1\nopen_timeout = 200ms\n"
    "[queue rs]\nmax_deliveries = 1\n"
    "[queue free]\n";

/* One worker: connect, open the head of q (expecting `want` handed out
 * for the `n`-th time), and disconnect holding it. */
static void
crashing_worker(int port, const char *q, const char *want, unsigned n)
{
	int c = tl_connect(port);
	char *cmd = tl_strdupf("mg %s/open v d\r\n", q);
	char *exp = tl_strdupf("VA %zu d%u\r\n%s\r\n", strlen(want), n, want);

	mustsends(c, cmd);
	ckresp(c, exp);
	close(c);
	free(cmd);
	free(exp);
}

/* The item reaches the dead-letter queue after exactly N deliveries (a
 * worker that always disconnects holding it), keeping its data, flags and
 * count; the queue goes on with the next item. */
static void
dead_letter_on(const char *store)
{
	char *conf = tl_write_file("poison.conf", conf_text);
	struct tl_server *s = tl_server_start(store, "--config", conf, NULL);
	int c = tl_connect(s->port);
	unsigned i;

	tl_setn(c, "poison", 42, 0, "bad", 3);
	tl_set(c, "poison", "good");
	for (i = 1; i <= 3; i++) {
		crashing_worker(s->port, "poison", "bad", i);
		tl_wait_stat(c, "queue_poison_open_transactions", 0, 5000);
		if (i < 3) {
			ck_assert_int_eq(tl_stat(c, "queue_poison_items"), 2);
			ck_assert_int_eq(tl_stat(c, "queue_poison_dead_lettered"), 0);
		}
	}
	tl_wait_stat(c, "queue_poison_dead_lettered", 1, 5000);
	ck_assert_int_eq(tl_stat(c, "queue_poison_items"), 1);
	ck_assert_int_eq(tl_stat(c, "queue_poison_dead_items"), 1);
	/* the next item is served; the poison one never again */
	mustsends(c, "mg poison/peek v d\r\n");
	ckresp(c, "VA 4 d0\r\ngood\r\n");

	/* abort counts as coming back; dead_letter names the queue */
	tl_set(c, "named", "n1");
	tl_ckget(c, "named/open", "n1");
	mustsends(c, "get named/abort\r\n");
	ckresp(c, "END\r\n");
	tl_ckget(c, "named/open", "n1");
	mustsends(c, "get named/abort\r\n");
	ckresp(c, "END\r\n");
	mustsends(c, "get named\r\n");
	ckresp(c, "END\r\n");
	ck_assert_int_eq(tl_stat(c, "queue_named_dead_lettered"), 1);
	ck_assert_int_eq(tl_stat(c, "queue_graveyard_items"), 1);

	/* an open_timeout counts too */
	tl_set(c, "ot", "slow");
	tl_ckget(c, "ot/open", "slow");
	tl_wait_stat(c, "queue_ot_dead_lettered", 1, 5000);
	ck_assert_int_eq(tl_stat(c, "queue_ot_items"), 0);
	tl_ckget(c, "ot_dead", "slow");

	/* without max_deliveries items come back forever, counted */
	tl_set(c, "free", "f");
	for (i = 1; i <= 5; i++) {
		char *exp = tl_strdupf("VA 1 d%u\r\nf\r\n", i);

		mustsends(c, "mg free/open v d\r\n");
		ckresp(c, exp);
		mustsends(c, "get free/abort\r\n");
		ckresp(c, "END\r\n");
		free(exp);
	}
	ck_assert_int_eq(tl_stat(c, "queue_free_dead_lettered"), 0);
	close(c);

	if (strcmp(store, "memory") != 0) {
		/* durable: the moved item and its count survive a restart */
		tl_server_stop(s);
		tl_server_restart(s);
		c = tl_connect(s->port);
		ck_assert_int_eq(tl_stat(c, "queue_poison_items"), 1);
		mustsends(c, "mg poison_dead v d f\r\n");
		ckresp(c, "VA 3 f42 d3\r\nbad\r\n");
		mustsends(c, "mg free v d\r\n");
		ckresp(c, "VA 1 d5\r\nf\r\n");
		tl_ckget(c, "graveyard", "n1");

		/* killed while the item is open for its last delivery: after
		 * the restart it is moved, not served */
		tl_set(c, "rs", "crash");
		tl_set(c, "rs", "next");
		mustsends(c, "mg rs/open v d\r\n");
		ckresp(c, "VA 5 d1\r\ncrash\r\n");
		tl_server_kill(s);
		close(c);
		tl_server_restart(s);
		c = tl_connect(s->port);
		mustsends(c, "mg rs/open v d\r\n");
		ckresp(c, "VA 4 d1\r\nnext\r\n");
		ck_assert_int_eq(tl_stat(c, "queue_rs_dead_lettered"), 1);
		mustsends(c, "mg rs_dead v d\r\n");
		ckresp(c, "VA 5 d2\r\ncrash\r\n");
		close(c);
	} else {
		mustsends(c = tl_connect(s->port), "mg poison_dead v d f\r\n");
		ckresp(c, "VA 3 f42 d3\r\nbad\r\n");
		close(c);
	}
	tl_server_stop(s);
	tl_server_free(s);
	free(conf);
}

START_TEST(test_dead_letter_memory)
{
	dead_letter_on("memory");
}
END_TEST

#ifdef HAVE_LMDB
START_TEST(test_dead_letter_lmdb)
{
	dead_letter_on("lmdb");
}
END_TEST
#endif

#ifdef HAVE_SQLITE
START_TEST(test_dead_letter_sqlite)
{
	dead_letter_on("sqlite");
}
END_TEST
#endif

/* A lowered limit (SIGHUP) applies to items already counted: an item
 * whose deliveries are spent is moved at its next take, not served; bad
 * settings are refused with the old configuration kept. */
START_TEST(test_dead_letter_reload)
{
	char *conf = tl_write_file("poison.conf", "[queue q]\n");
	struct tl_server *s = tl_server_start("memory", "--config", conf, "-v",
	    NULL);
	int c = tl_connect(s->port);
	char *log;

	tl_set(c, "q", "x");
	tl_set(c, "q", "y");
	tl_ckget(c, "q/open", "x");
	mustsends(c, "get q/abort\r\n");
	ckresp(c, "END\r\n");
	tl_ckget(c, "q/open", "x");
	mustsends(c, "get q/abort\r\n");
	ckresp(c, "END\r\n");

	tl_reload(s, conf, "[queue q]\nmax_deliveries = 70000\n");
	mustsends(c, "mg q/peek v d\r\n");
	ckresp(c, "VA 1 d2\r\nx\r\n");

	tl_reload(s, conf, "[queue q]\nmax_deliveries = 2\ndead_letter = spent\n");
	/* a plain get skips (moves) the spent head */
	mustsends(c, "mg q v d\r\n");
	ckresp(c, "VA 1 d0\r\ny\r\n");
	ck_assert_int_eq(tl_stat(c, "queue_q_dead_lettered"), 1);
	mustsends(c, "mg spent v d\r\n");
	ckresp(c, "VA 1 d3\r\nx\r\n");
	close(c);
	tl_server_stop(s);
	log = tl_read_file(s->log, NULL);
	ck_assert_msg(log != NULL && strstr(log, "max_deliveries wants a number"
	    " from 0 to 65535") != NULL, "no reload error in the log: %s",
	    log != NULL ? log : "(none)");
	ck_assert_msg(strstr(log, "queue q: an item delivered 3 times moved to"
	    " dead-letter queue spent (1 so far)") != NULL,
	    "no move in the log: %s", log);
	free(log);
	tl_server_free(s);
	free(conf);
}
END_TEST

/* A [queue jobs*] section also matches jobs_dead: its items are served
 * from there however often they are opened and given back, never moved on
 * to jobs_dead_dead; a reload into a loop is refused, the old settings
 * kept. */
START_TEST(test_dead_letter_readable)
{
	char *conf = tl_write_file("poison.conf", "[queue jobs*]\nmax_deliveries = 1\n");
	struct tl_server *s = tl_server_start("memory", "--config", conf, "-v",
	    NULL);
	int c = tl_connect(s->port);
	unsigned i;
	char *log, *st;

	tl_set(c, "jobs", "x");
	tl_ckget(c, "jobs/open", "x");
	mustsends(c, "get jobs/abort\r\n");
	ckresp(c, "END\r\n");
	ck_assert_int_eq(tl_stat(c, "queue_jobs_dead_items"), 1);
	for (i = 2; i <= 4; i++) {
		char *exp = tl_strdupf("VA 1 d%u\r\nx\r\n", i);

		mustsends(c, "mg jobs_dead/open v d\r\n");
		ckresp(c, exp);
		mustsends(c, "get jobs_dead/abort\r\n");
		ckresp(c, "END\r\n");
		free(exp);
	}
	tl_reload(s, conf, "[queue jobs*]\nmax_deliveries = 1\n"
	    "dead_letter = jobs_graveyard\n");
	/* the old settings hold: jobs_dead is still served */
	mustsends(c, "mg jobs_dead v d\r\n");
	ckresp(c, "VA 1 d4\r\nx\r\n");
	ck_assert_int_eq(tl_stat(c, "queue_jobs_dead_dead_lettered"), 0);
	st = tl_stats(c);
	ck_assert_msg(strstr(st, "queue_jobs_dead_dead_items") == NULL, "%s", st);
	free(st);
	close(c);
	tl_server_stop(s);
	log = tl_read_file(s->log, NULL);
	ck_assert_msg(log != NULL && strstr(log, "[queue jobs*]: dead_letter ="
	    " jobs_graveyard is governed by [queue jobs*] itself") != NULL,
	    "no refused reload in the log: %s", log != NULL ? log : "(none)");
	free(log);
	tl_server_free(s);
	free(conf);
}
END_TEST

/* saker requeue moves items back in batches of one commit each, counts
 * reset; --max bounds it; the server command refuses bad arguments. */
START_TEST(test_requeue)
{
	char *conf = tl_write_file("poison.conf", "[queue jobs]\nmax_deliveries = 1\n");
	struct tl_server *s = tl_server_start("sqlite", "--config", conf, NULL);
	int c = tl_connect(s->port);
	char *srv = tl_strdupf("127.0.0.1:%d", s->port), *out = NULL, *err = NULL;
	char *buf;
	size_t off = 0, cap = 2500 * 32;
	int i, rc;

	/* 2500 items in one write: pipelined, a few commits */
	buf = malloc(cap);
	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < 2500; i++)
		off += (size_t)snprintf(buf + off, cap - off,
		    "set dq 0 0 5 noreply\r\n%05d\r\n", i);
	mustsend(c, buf, off);
	free(buf);
	tl_wait_stat(c, "queue_dq_items", 2500, 10000);

	rc = tl_run_saker(tl_dir, NULL, &out, NULL, &err, "requeue", "-s", srv,
	    "--max", "2200", "dq", "t", NULL);
	ck_assert_msg(rc == 0, "requeue: %d %s %s", rc, out, err);
	ck_assert_str_eq(out, "requeued 2200 items from dq to t\n");
	free(out);
	free(err);
	ck_assert_int_eq(tl_stat(c, "queue_t_items"), 2200);
	ck_assert_int_eq(tl_stat(c, "queue_dq_items"), 300);
	tl_ckget(c, "t", "00000");	/* in order */
	rc = tl_run_saker(tl_dir, NULL, &out, NULL, &err, "requeue", "-s", srv,
	    "dq", "t", NULL);
	ck_assert_msg(rc == 0, "requeue: %d %s %s", rc, out, err);
	ck_assert_str_eq(out, "requeued 300 items from dq to t\n");
	free(out);
	free(err);
	ck_assert_int_eq(tl_stat(c, "queue_t_items"), 2499);
	ck_assert_int_eq(tl_stat(c, "queue_dq_items"), 0);

	/* a dead-lettered item goes back with its count reset */
	tl_setn(c, "jobs", 7, 0, "p", 1);
	mustsends(c, "mg jobs/open v d\r\n");
	ckresp(c, "VA 1 d1\r\np\r\n");
	mustsends(c, "get jobs/abort\r\n");
	ckresp(c, "END\r\n");
	ck_assert_int_eq(tl_stat(c, "queue_jobs_dead_items"), 1);
	mustsends(c, "requeue jobs_dead jobs 10\r\n");
	ckresp(c, "1\r\n");
	mustsends(c, "mg jobs/open v d f\r\n");
	ckresp(c, "VA 1 f7 d1\r\np\r\n");

	/* bad requests */
	mustsends(c, "requeue jobs jobs 1\r\n");
	ckresp(c, "CLIENT_ERROR requeue to the same queue\r\n");
	mustsends(c, "requeue a b 0\r\nrequeue a b 1001\r\nrequeue a/x b 1\r\n");
	ckresp(c, "CLIENT_ERROR bad command line format\r\n"
	    "CLIENT_ERROR bad command line format\r\n"
	    "CLIENT_ERROR bad queue name\r\n");
	mustsends(c, "requeue nosuch b 5\r\n");
	ckresp(c, "0\r\n");
	rc = tl_run_saker(tl_dir, NULL, NULL, NULL, NULL, "requeue", "-s", srv,
	    "--max", "0", "a", "b", NULL);
	ck_assert_int_eq(rc, 2);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	free(srv);
	free(conf);
}
END_TEST

#if defined(HAVE_LMDB) && defined(HAVE_SQLITE)
/* dump, load and migrate carry delivery counts across drivers. */
START_TEST(test_counts_dump_load_migrate)
{
	struct tl_server *s = tl_server_start("lmdb", NULL);
	char *src = tl_strdupf("lmdb:%s/store", s->dir);
	char *mid = tl_strdupf("sqlite:%s/mid.db", tl_dir);
	char *dst = tl_strdupf("lmdb:%s/dst", tl_dir);
	char *dumpf = tl_strdupf("%s/dump", tl_dir), *out = NULL, *err = NULL;
	size_t outlen = 0;
	FILE *f;
	int c = tl_connect(s->port), i, rc;

	tl_set(c, "q", "x");
	tl_set(c, "q", "y");
	for (i = 0; i < 2; i++) {
		tl_ckget(c, "q/open", "x");
		mustsends(c, "get q/abort\r\n");
		ckresp(c, "END\r\n");
	}
	close(c);
	tl_server_stop(s);

	rc = tl_run_saker(tl_dir, NULL, &out, &outlen, &err, "dump", src, NULL);
	ck_assert_msg(rc == 0, "dump: %d %s", rc, err);
	f = fopen(dumpf, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(out, 1, outlen, f), outlen);
	fclose(f);
	free(out);
	free(err);
	rc = tl_run_saker(tl_dir, dumpf, NULL, NULL, &err, "load", mid, NULL);
	ck_assert_msg(rc == 0, "load: %d %s", rc, err);
	free(err);
	rc = tl_run_saker(tl_dir, NULL, NULL, NULL, &err, "migrate", "--quiet",
	    mid, dst, NULL);
	ck_assert_msg(rc == 0, "migrate: %d %s", rc, err);
	free(err);

	free(s->spec);
	s->spec = dst;
	tl_server_restart(s);
	c = tl_connect(s->port);
	mustsends(c, "mg q v d\r\nmg q v d\r\n");
	ckresp(c, "VA 1 d2\r\nx\r\nVA 1 d0\r\ny\r\n");
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	free(src);
	free(mid);
	free(dumpf);
}
END_TEST
#endif

/* expire_to: items that expire in a queue move to another one, expiry
 * cleared, whether a get meets them at the head, a delayed one expires
 * before it is due, or the sweep finds them; counted and logged. */
static void
expire_to_on(const char *store)
{
	char *conf = tl_write_file("poison.conf", "[queue ex]\nmax_age = 300ms\nexpire_to = ex_late\n"
	    "[queue ex_late]\nmax_age = 1h\n");
	struct tl_server *s = tl_server_start(store, "--config", conf, "-v",
	    NULL);
	int c = tl_connect(s->port);
	char *log = NULL;
	int64_t t0;

	tl_setn(c, "ex", 9, 0, "old", 3);
	mustsends(c, "set ex/delay=500 0 0 7\r\ndelayed\r\n");
	ckresp(c, "STORED\r\n");
	tl_sleep_ms(400);
	tl_set(c, "ex", "fresh");
	/* the head expired: moved, and the get goes on with the next */
	tl_ckget(c, "ex", "fresh");
	ck_assert_int_eq(tl_stat(c, "queue_ex_expired_to"), 1);
	ck_assert_int_eq(tl_stat(c, "queue_ex_expired_items"), 0);
	/* the delayed one expired before it fell due */
	tl_wait_stat(c, "queue_ex_expired_to", 2, 3000);
	ck_assert_int_eq(tl_stat(c, "queue_ex_delayed_items"), 0);
	/* the sweep moves one no get meets */
	tl_set(c, "ex", "swept");
	tl_wait_stat(c, "queue_ex_expired_to", 3, 12000);
	ck_assert_int_eq(tl_stat(c, "queue_ex_items"), 0);
	mustsends(c, "mg ex_late v f t\r\nmg ex_late v\r\nmg ex_late v\r\n");
	ckresp(c, "VA 3 f9 t-1\r\nold\r\nVA 7\r\ndelayed\r\n"
	    "VA 5\r\nswept\r\n");
	close(c);
	/* and the log says so (the sweep writes the line) */
	t0 = tl_now_ms();
	do {
		free(log);
		tl_sleep_ms(200);
		log = tl_read_file(s->log, NULL);
	} while ((log == NULL || strstr(log, "so far)") == NULL ||
	    strstr(log, "expired items moved to ex_late") == NULL) &&
	    tl_now_ms() - t0 < 8000);
	ck_assert_msg(log != NULL && strstr(log, "queue ex: ") != NULL &&
	    strstr(log, "expired items moved to ex_late") != NULL,
	    "no expire_to line in the log: %s", log != NULL ? log : "(none)");
	free(log);
	tl_server_stop(s);
	tl_server_free(s);
	free(conf);
}

START_TEST(test_expire_to_memory)
{
	expire_to_on("memory");
}
END_TEST

#ifdef HAVE_LMDB
START_TEST(test_expire_to_lmdb)
{
	expire_to_on("lmdb");
}
END_TEST
#endif

#ifdef HAVE_SQLITE
START_TEST(test_expire_to_sqlite)
{
	expire_to_on("sqlite");
}
END_TEST
#endif

/*
 * SIGKILL while poison items move: every item is put once into "dl"
 * (max_deliveries = 1), workers open items and disconnect holding them,
 * so each comes back once and moves to "dl_dead" in the commit of the
 * disconnect; the server is killed at a random moment.  After the
 * restart every acknowledged item is in exactly one of the two queues:
 * lost = 0, duplicated = 0 (the total-queue count of check_crash).
 */
#define KL_ROUNDS 4
#define KL_ITEMS 300
#define KL_WORKERS 8

static void
kill_loop_round(struct tl_server *s, const char *store, int round)
{
	char *v, *line;
	int seen[KL_ITEMS], w[KL_WORKERS], c, i, k, n, lost = 0, dup = 0;
	int read = 0, in_dead = 0;
	size_t off = 0;
	char *buf = malloc(KL_ITEMS * 64);
	int64_t until;

	ck_assert_ptr_nonnull(buf);
	c = tl_connect(s->port);
	for (i = 0; i < KL_ITEMS; i++)
		off += (size_t)snprintf(buf + off, KL_ITEMS * 64 - off,
		    "set dl 0 0 %d\r\nr%d-%05d\r\n", 8 + (round > 9), round, i);
	mustsend(c, buf, off);
	for (i = 0; i < KL_ITEMS; i++) {
		line = tl_mustreadline(c);
		ck_assert_str_eq(line, "STORED");
		free(line);
	}
	free(buf);
	until = tl_now_ms() + 100 + random() % 400;
	while (tl_now_ms() < until) {
		for (k = 0; k < KL_WORKERS; k++) {
			w[k] = tl_connect(s->port);
			mustsends(w[k], "get dl/open\r\n");
		}
		for (k = 0; k < KL_WORKERS; k++) {
			/* a VALUE line, data and END, or END: either way die
			 * holding whatever was handed out */
			line = tl_readline_ms(w[k], 2000);
			free(line);
			close(w[k]);
		}
	}
	tl_server_kill(s);
	close(c);
	tl_server_restart(s);
	c = tl_connect(s->port);
	memset(seen, 0, sizeof(seen));
	/* dl first: spent items met there move to dl_dead, not returned */
	for (n = 0; n < 2; n++) {
		const char *q = n == 0 ? "dl" : "dl_dead";

		while ((v = tl_get(c, q)) != NULL) {
			int r = -1, idx = -1;

			ck_assert_msg(sscanf(v, "r%d-%d", &r, &idx) == 2 &&
			    r == round && idx >= 0 && idx < KL_ITEMS,
			    "%s round %d: unexpected item %s in %s", store,
			    round, v, q);
			if (seen[idx]++ > 0)
				dup++;
			read++;
			in_dead += n;
			free(v);
		}
	}
	for (i = 0; i < KL_ITEMS; i++)
		if (seen[i] == 0)
			lost++;
	printf("%s kill loop round %d: items %d read %d (%d from dl_dead) "
	    "lost %d duplicated %d\n", store, round, KL_ITEMS, read, in_dead,
	    lost, dup);
	fflush(stdout);
	ck_assert_msg(lost == 0, "%s round %d: %d items lost", store, round,
	    lost);
	ck_assert_msg(dup == 0, "%s round %d: %d items duplicated", store,
	    round, dup);
	ck_assert_msg(in_dead > 0, "%s round %d: nothing was dead-lettered "
	    "before the kill", store, round);
	close(c);
}

static void
kill_loop(const char *store)
{
	char *conf = tl_write_file("poison.conf", "[queue dl]\nmax_deliveries = 1\n");
	struct tl_server *s = tl_server_start(store, "--config", conf,
	    "--sync", "always", NULL);
	unsigned seed = (unsigned)getpid();
	int round;

	srandom(seed);
	printf("%s kill loop: seed %u\n", store, seed);
	for (round = 0; round < KL_ROUNDS; round++)
		kill_loop_round(s, store, round);
	tl_server_stop(s);
	tl_server_free(s);
	free(conf);
}

#ifdef HAVE_LMDB
START_TEST(test_kill_loop_lmdb)
{
	kill_loop("lmdb");
}
END_TEST
#endif

#ifdef HAVE_SQLITE
START_TEST(test_kill_loop_sqlite)
{
	kill_loop("sqlite");
}
END_TEST
#endif

/* saker get -D shows the delivery count (with -p, without taking). */
START_TEST(test_cli_shows_deliveries)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	char *srv = tl_strdupf("127.0.0.1:%d", s->port), *out = NULL, *err = NULL;
	int c = tl_connect(s->port), i, rc;

	tl_set(c, "q", "x");
	for (i = 0; i < 2; i++) {
		tl_ckget(c, "q/open", "x");
		mustsends(c, "get q/abort\r\n");
		ckresp(c, "END\r\n");
	}
	rc = tl_run_saker(tl_dir, NULL, &out, NULL, &err, "get", "-s", srv, "-p",
	    "-D", "q", NULL);
	ck_assert_msg(rc == 0, "saker get: %d %s", rc, err);
	ck_assert_str_eq(out, "x");
	ck_assert_str_eq(err, "deliveries 2\n");
	free(out);
	free(err);
	ck_assert_int_eq(tl_stat(c, "queue_q_items"), 1);
	rc = tl_run_saker(tl_dir, NULL, &out, NULL, &err, "get", "-s", srv, "-D",
	    "-q", "q", NULL);
	ck_assert_int_eq(rc, 0);
	free(out);
	free(err);
	rc = tl_run_saker(tl_dir, NULL, &out, NULL, &err, "get", "-s", srv, "-D",
	    "-q", "q", NULL);
	ck_assert_int_eq(rc, 1);
	ck_assert_str_eq(out, "");
	free(out);
	free(err);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	free(srv);
}
END_TEST

/* A dead-letter queue --max-queues does not allow: the spent item stays
 * in its queue (never lost, never served again), and the log says why. */
START_TEST(test_dead_letter_no_room)
{
	char *conf = tl_write_file("full.conf", "[queue jobs]\nmax_deliveries = 1\n");
	struct tl_server *s = tl_server_start("memory", "--config", conf,
	    "--max-queues", "1", NULL);
	int c = tl_connect(s->port);
	int64_t deadline = tl_now_ms() + 5000;
	char *log;

	tl_set(c, "jobs", "spent");
	tl_ckget(c, "jobs/open", "spent");
	mustsends(c, "get jobs/abort\r\n");
	ckresp(c, "END\r\n");
	mustsends(c, "get jobs\r\n");
	ckresp(c, "END\r\n");
	ck_assert_int_eq(tl_stat(c, "queue_jobs_items"), 1);
	ck_assert_int_eq(tl_stat(c, "queue_jobs_dead_lettered"), 0);
	ck_assert_int_eq(tl_stat(c, "queue_jobs_dead_items"), -1);
	for (;;) {
		log = tl_read_file(s->log, NULL);
		if (log != NULL && strstr(log, "queue jobs: cannot open its "
		    "dead-letter queue jobs_dead: too many queues (--max-queues)")
		    != NULL)
			break;
		ck_assert_msg(tl_now_ms() < deadline, "log: %s", log);
		free(log);
		tl_sleep_ms(10);
	}
	free(log);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	free(conf);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("poison");
	TCase *tc = tcase_create("poison");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, tl_dir_setup, tl_dir_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_dead_letter_memory);
#ifdef HAVE_LMDB
	tcase_add_test(tc, test_dead_letter_lmdb);
#endif
#ifdef HAVE_SQLITE
	tcase_add_test(tc, test_dead_letter_sqlite);
#endif
	tcase_add_test(tc, test_dead_letter_reload);
	tcase_add_test(tc, test_dead_letter_no_room);
	tcase_add_test(tc, test_dead_letter_readable);
	tcase_add_test(tc, test_cli_shows_deliveries);
	tcase_add_test(tc, test_expire_to_memory);
#ifdef HAVE_LMDB
	tcase_add_test(tc, test_expire_to_lmdb);
#endif
#ifdef HAVE_SQLITE
	tcase_add_test(tc, test_expire_to_sqlite);
#endif
#ifdef HAVE_SQLITE
	tcase_add_test(tc, test_requeue);
#endif
#if defined(HAVE_LMDB) && defined(HAVE_SQLITE)
	tcase_add_test(tc, test_counts_dump_load_migrate);
#endif
#ifdef HAVE_LMDB
	tcase_add_test(tc, test_kill_loop_lmdb);
#endif
#ifdef HAVE_SQLITE
	tcase_add_test(tc, test_kill_loop_sqlite);
#endif
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
