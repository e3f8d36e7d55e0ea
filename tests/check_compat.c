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
	char *log = tl_read_file(srv->log, NULL);
	char *want = tl_strdupf("notice: sakerd " PACKAGE_VERSION
	    " serving 127.0.0.1:%d, store memory, sync always\n", srv->port);

	ck_assert_ptr_nonnull(log);
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
