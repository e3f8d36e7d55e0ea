/* check_hostile.c -- a hostile client against the real sakerd: bytes and
 * numbers meant to crash it, exhaust its memory or descriptors, or guess
 * passwords; each test is a regression test of issue 18. */
#include "config.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

static char *tmpdir;

static void
setup(void)
{
	tmpdir = tl_mkdtemp();
}

static void
teardown(void)
{
	tl_rmrf(tmpdir);
	free(tmpdir);
	tmpdir = NULL;
}

static char *
write_file(const char *name, const char *text)
{
	char *path = tl_strdupf("%s/%s", tmpdir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

/* The server answers a fresh connection. */
static void
still_serving(struct tl_server *s)
{
	int fd;

	ck_assert(tl_server_alive(s));
	fd = tl_connect(s->port);
	mustsends(fd, "version\r\n");
	free(tl_mustreadline(fd));
	close(fd);
}

/* Item 1: before login the tokens of a refused line were read after the
 * input buffer holding them was drained (ASan: heap-use-after-free). */
START_TEST(test_prelogin_refused_set)
{
	char *auth = write_file("users", "alice:secret\n");
	struct tl_server *s = tl_server_start("memory", "--auth-file", auth, NULL);
	int fd = tl_connect(s->port);
	char big[5002];

	/* 5000 bytes is more than a login may carry: refused, data skipped */
	mustsends(fd, "set auth 0 0 5000\r\n");
	ckresp(fd, "CLIENT_ERROR unauthenticated\r\n");
	memset(big, 'x', sizeof(big));
	big[5000] = '\r';
	big[5001] = '\n';
	mustsend(fd, big, sizeof(big));
	mustsends(fd, "set q 0 0 -1\r\n");
	ckresp(fd, "CLIENT_ERROR unauthenticated\r\n");
	mustsends(fd, "set x 0 0 12\r\nalice secret\r\n");
	ckresp(fd, "STORED\r\n");
	close(fd);
	still_serving(s);
	tl_server_stop(s);
	tl_server_free(s);
	free(auth);
}
END_TEST

/* Item 7: `monitor q 9223372036854775807` multiplied the seconds by 1000
 * (UBSan: signed overflow; release: END at once). */
START_TEST(test_monitor_huge_seconds)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	int fd = tl_connect(s->port);

	mustsends(fd, "monitor q 9223372036854775807\r\n");
	ckresp(fd, "CLIENT_ERROR bad command line format\r\n");
	mustsends(fd, "monitor q 2147484 1\r\n");
	ckresp(fd, "CLIENT_ERROR bad command line format\r\n");
	tl_set(fd, "q", "a");
	mustsends(fd, "monitor q 2147483 1\r\n");
	ckresp(fd, "VALUE q 0 1\r\na\r\nEND\r\n");
	mustsends(fd, "verbosity 9223372036854775807\r\n");
	ckresp(fd, "OK\r\n");
	close(fd);
	still_serving(s);
	tl_server_stop(s);
	tl_server_free(s);
}
END_TEST

/* Item 6: max_open (default 1) counted the items held before the request
 * only, so one request could open several. */
START_TEST(test_max_open_in_one_request)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	int fd = tl_connect(s->port);

	tl_set(fd, "q", "1");
	tl_set(fd, "q", "2");
	tl_set(fd, "q", "3");
	mustsends(fd, "get q/open q/open q/open\r\n");
	ckresp(fd, "CLIENT_ERROR too many open items\r\n");
	/* nothing was opened: the first item is still there */
	mustsends(fd, "get q/peek\r\n");
	ckresp(fd, "VALUE q/peek 0 1\r\n1\r\nEND\r\n");
	/* closing one and opening one in the same request is fine */
	mustsends(fd, "get q/open\r\n");
	ckresp(fd, "VALUE q/open 0 1\r\n1\r\nEND\r\n");
	mustsends(fd, "get q/close/open\r\n");
	ckresp(fd, "VALUE q/close/open 0 1\r\n2\r\nEND\r\n");
	mustsends(fd, "get q/close q/open\r\n");
	ckresp(fd, "VALUE q/open 0 1\r\n3\r\nEND\r\n");
	mustsends(fd, "get q/close\r\n");
	ckresp(fd, "END\r\n");
	/* a run of quiet mg lines is one request */
	tl_set(fd, "m", "1");
	tl_set(fd, "m", "2");
	mustsends(fd, "mg m/open v q\r\nmg m/open v q\r\nmn\r\n");
	ckresp(fd, "CLIENT_ERROR too many open items\r\nMN\r\n");
	mustsends(fd, "get m/peek\r\n");
	ckresp(fd, "VALUE m/peek 0 1\r\n1\r\nEND\r\n");
	/* different queues each get their own max_open */
	mustsends(fd, "get m/open q/open\r\n");
	ckresp(fd, "VALUE m/open 0 1\r\n1\r\nEND\r\n");
	close(fd);
	tl_server_stop(s);
	tl_server_free(s);
}
END_TEST

/* Durations in the config file were multiplied into int64_t and then
 * added to the clock: max_age = 9223372036854775807 overflowed on every
 * set.  Now at most 10 years, else a startup error. */
START_TEST(test_config_duration_overflow)
{
	char *conf = write_file("q.conf", "max_age = 9223372036854775807\n");
	char *cmd = tl_strdupf("timeout 10 %s --store memory -p %d --config %s "
	    "--log /dev/null >/dev/null 2>&1", tl_sakerd_path(), tl_free_port(), conf);
	int st = system(cmd);

	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
	free(cmd);
	free(conf);
	conf = write_file("q.conf", "[queue q]\nopen_timeout = 87600h\n"
	    "max_age = 87600h\n");
	{
		struct tl_server *s = tl_server_start("memory", "--config", conf, NULL);
		int fd = tl_connect(s->port);

		mustsends(fd, "set q 0 0 1\r\nx\r\n");
		ckresp(fd, "STORED\r\n");
		close(fd);
		tl_server_stop(s);
		tl_server_free(s);
	}
	free(conf);
}
END_TEST

int
main(void)
{
	Suite *su = suite_create("hostile");
	TCase *tc = tcase_create("hostile");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_prelogin_refused_set);
	tcase_add_test(tc, test_monitor_huge_seconds);
	tcase_add_test(tc, test_max_open_in_one_request);
	tcase_add_test(tc, test_config_duration_overflow);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
