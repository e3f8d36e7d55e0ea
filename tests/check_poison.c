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

static char *tmp;

static void
setup(void)
{
	tmp = tl_mkdtemp();
}

static void
teardown(void)
{
	tl_rmrf(tmp);
	free(tmp);
}

static char *
write_conf(const char *text)
{
	char *path = tl_strdupf("%s/poison.conf", tmp);
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return path;
}

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
	char *conf = write_conf(conf_text);
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
	char *conf = write_conf("[queue q]\n");
	struct tl_server *s = tl_server_start("memory", "--config", conf, "-v",
	    NULL);
	int c = tl_connect(s->port);
	char *log;
	FILE *f;

	tl_set(c, "q", "x");
	tl_set(c, "q", "y");
	tl_ckget(c, "q/open", "x");
	mustsends(c, "get q/abort\r\n");
	ckresp(c, "END\r\n");
	tl_ckget(c, "q/open", "x");
	mustsends(c, "get q/abort\r\n");
	ckresp(c, "END\r\n");

	f = fopen(conf, "w");
	fputs("[queue q]\nmax_deliveries = 70000\n", f);
	fclose(f);
	kill(s->pid, SIGHUP);
	tl_sleep_ms(200);
	mustsends(c, "mg q/peek v d\r\n");
	ckresp(c, "VA 1 d2\r\nx\r\n");

	f = fopen(conf, "w");
	fputs("[queue q]\nmax_deliveries = 2\ndead_letter = spent\n", f);
	fclose(f);
	kill(s->pid, SIGHUP);
	tl_sleep_ms(200);
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

int
main(void)
{
	Suite *s = suite_create("poison");
	TCase *tc = tcase_create("poison");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_dead_letter_memory);
#ifdef HAVE_LMDB
	tcase_add_test(tc, test_dead_letter_lmdb);
#endif
#ifdef HAVE_SQLITE
	tcase_add_test(tc, test_dead_letter_sqlite);
#endif
	tcase_add_test(tc, test_dead_letter_reload);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
