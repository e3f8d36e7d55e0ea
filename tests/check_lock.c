/* check_lock.c -- the store's lock file as users meet it (backends/lock.c):
 * a store in use names the process holding it, and a store made by root
 * but opened by a system user says whose it is and the chown that fixes
 * it (the usual mistake: `sakerd` run once as root, then as saker).  The
 * second part needs root (it switches to "nobody" in a child). */
#include "config.h"

#include <check.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "saker/store.h"
#include "testlib.h"

static char err[1024];

static int
open_spec(const char *spec, bool create, bool read_only, saker_store **s)
{
	struct saker_store_opts o;

	memset(&o, 0, sizeof(o));
	o.create = create;
	o.read_only = read_only;
	o.sync = SAKER_SYNC_NEVER;
	err[0] = '\0';
	return saker_store_open(spec, &o, s, err, sizeof(err));
}

/* A second writer is refused, naming the holder's pid; a reader too. */
START_TEST(test_in_use)
{
	char *spec = tl_strdupf("lmdb:%s/st", tl_dir);
	char *want = tl_strdupf("store %s/st is in use by another process (pid %ld)",
	    tl_dir, (long)getpid());
	saker_store *a, *b = NULL;

	ck_assert_int_eq(open_spec(spec, true, false, &a), SAKER_OK);
	ck_assert_int_eq(open_spec(spec, true, false, &b), SAKER_ELOCKED);
	ck_assert_ptr_null(b);
	ck_assert_msg(strstr(err, want) != NULL, "%s", err);
	ck_assert_int_eq(open_spec(spec, false, true, &b), SAKER_ELOCKED);
	ck_assert_msg(strstr(err, "is in use by another process") != NULL, "%s", err);
	saker_store_close(a);
	/* free again once closed */
	ck_assert_int_eq(open_spec(spec, false, false, &b), SAKER_OK);
	saker_store_close(b);
	free(spec);
	free(want);
}
END_TEST

/* In a child running as nobody: open spec as a writer; the message (or
 * "OK") back through a pipe. */
static char *
open_as_nobody(const char *spec)
{
	struct passwd *pw = getpwnam("nobody");
	char buf[1024];
	int fds[2], st;
	ssize_t n, got = 0;
	pid_t pid;

	ck_assert_ptr_nonnull(pw);
	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		saker_store *s;
		int rc;

		close(fds[0]);
		if (setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
			_exit(3);
		rc = open_spec(spec, true, false, &s);
		if (rc == SAKER_OK)
			snprintf(err, sizeof(err), "OK");
		else
			snprintf(err + strlen(err), sizeof(err) - strlen(err),
			    " [%d]", rc);
		(void)!write(fds[1], err, strlen(err));
		_exit(0);
	}
	close(fds[1]);
	while ((n = read(fds[0], buf + got, sizeof(buf) - 1 - (size_t)got)) > 0)
		got += n;
	buf[got] = '\0';
	close(fds[0]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d", st);
	return strdup(buf);
}

START_TEST(test_owner_hint)
{
	char *spec, *dir, *msg, *want;
	saker_store *s;

	if (geteuid() != 0) {
		printf("check_lock: owner hint: skipped (needs root)\n");
		return;
	}
	/* the tests' dir is root's 0700: nobody needs to reach inside */
	ck_assert_int_eq(chmod(tl_dir, 0755), 0);

	/* LMDB: a directory of root's, 0700 */
	spec = tl_strdupf("lmdb:%s/rootstore", tl_dir);
	ck_assert_int_eq(open_spec(spec, true, false, &s), SAKER_OK);
	saker_store_close(s);
	msg = open_as_nobody(spec);
	want = tl_strdupf("store %s/rootstore: cannot open lock file "
	    "%s/rootstore/saker.lock: Permission denied; its directory belongs "
	    "to root (uid 0) and this process runs as nobody (uid ", tl_dir, tl_dir);
	ck_assert_msg(strstr(msg, want) != NULL, "%s", msg);
	free(want);
	want = tl_strdupf("give the store to this one (chown -R nobody "
	    "%s/rootstore) [%d]", tl_dir, SAKER_EREADONLY);
	ck_assert_msg(strstr(msg, want) != NULL, "%s", msg);
	free(want);
	free(msg);
	free(spec);

#ifdef HAVE_SQLITE
	/* SQLite: a file with its lock file beside it, both root's */
	spec = tl_strdupf("sqlite:%s/root.db", tl_dir);
	ck_assert_int_eq(open_spec(spec, true, false, &s), SAKER_OK);
	saker_store_close(s);
	msg = open_as_nobody(spec);
	want = tl_strdupf("cannot open lock file %s/root.db.lock: Permission "
	    "denied; it belongs to root (uid 0)", tl_dir);
	ck_assert_msg(strstr(msg, want) != NULL, "%s", msg);
	free(want);
	want = tl_strdupf("(chown nobody %s/root.db*)", tl_dir);
	ck_assert_msg(strstr(msg, want) != NULL, "%s", msg);
	free(want);
	free(msg);
	free(spec);

	/* a new file in a directory of root's: the directory is named */
	dir = tl_strdupf("%s/rootdir", tl_dir);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	spec = tl_strdupf("sqlite:%s/new.db", dir);
	msg = open_as_nobody(spec);
	want = tl_strdupf("; its directory belongs to root (uid 0)");
	ck_assert_msg(strstr(msg, want) != NULL, "%s", msg);
	free(want);
	want = tl_strdupf("(chown nobody %s)", dir);
	ck_assert_msg(strstr(msg, want) != NULL, "%s", msg);
	free(want);
	free(msg);
	free(spec);
	free(dir);
#endif
	(void)dir;
}
END_TEST

int
main(void)
{
	Suite *su = suite_create("lock");
	TCase *tc = tcase_create("lock");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, tl_dir_setup, tl_dir_teardown);
	tcase_add_test(tc, test_in_use);
	tcase_add_test(tc, test_owner_hint);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
