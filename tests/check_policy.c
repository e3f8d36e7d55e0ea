/* check_policy.c -- the store layer's rules, tested once rather than per
 * driver (the conformance suite tests each driver's primitives): the lock
 * file, the quarantine of damaged items, the expire_to target and the
 * delivery-count clamp (store.h, THE LAYER). */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "saker/store.h"

/* ------------------------------------------------------------------ */
/* The lock: every driver with a lock file refuses a second opener and
 * names the holder's pid. */

struct lockdrv {
	const char *type;
	const char *sub;	/* the location inside the temp directory */
	const char *lockfile;	/* the lock file inside the temp directory */
};

static const struct lockdrv lockdrvs[] = {
#ifdef HAVE_LMDB
	{ "lmdb", "store", "store/saker.lock" },
#endif
#ifdef HAVE_SQLITE
	{ "sqlite", "store.db", "store.db.lock" },
#endif
};
#define NLOCKDRVS ((int)(sizeof(lockdrvs) / sizeof(lockdrvs[0])))

static char tmpdir[64];

static void
rm_rf(const char *dir)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void
mk_tmp(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_policy.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static int
open_spec(const struct lockdrv *d, bool read_only, saker_store **s, char *err,
    size_t errlen)
{
	struct saker_store_opts o;
	char spec[256];

	memset(&o, 0, sizeof(o));
	o.sync = SAKER_SYNC_NEVER;
	o.create = !read_only;
	o.read_only = read_only;
	snprintf(spec, sizeof(spec), "%s:%s/%s", d->type, tmpdir, d->sub);
	return saker_store_open(spec, &o, s, err, errlen);
}

static void
want_refusal(const char *err, const struct lockdrv *d, long pid)
{
	char want[256];

	snprintf(want, sizeof(want), "store %s/%s is in use by another process"
	    " (pid %ld)", tmpdir, d->sub, pid);
	ck_assert_str_eq(err, want);
}

START_TEST(test_lock_refusal_names_pid)
{
	const struct lockdrv *d = &lockdrvs[_i];
	saker_store *s = NULL, *s2 = NULL;
	char err[512] = "", path[256], buf[32];
	int fd;
	ssize_t n;

	mk_tmp();
	ck_assert_int_eq(open_spec(d, false, &s, err, sizeof(err)), SAKER_OK);
	/* the writer's pid is in the lock file */
	snprintf(path, sizeof(path), "%s/%s", tmpdir, d->lockfile);
	ck_assert_int_ge(fd = open(path, O_RDONLY), 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	ck_assert_int_eq(strtol(buf, NULL, 10), (long)getpid());

	/* a second writer and a reader are refused, naming the holder */
	ck_assert_int_eq(open_spec(d, false, &s2, err, sizeof(err)),
	    SAKER_ELOCKED);
	ck_assert_ptr_null(s2);
	want_refusal(err, d, (long)getpid());
	ck_assert_int_eq(open_spec(d, true, &s2, err, sizeof(err)),
	    SAKER_ELOCKED);
	want_refusal(err, d, (long)getpid());
	saker_store_close(s);

	/* closed: the lock is gone, readers share it */
	ck_assert_int_eq(open_spec(d, true, &s, err, sizeof(err)), SAKER_OK);
	ck_assert_int_eq(open_spec(d, true, &s2, err, sizeof(err)), SAKER_OK);
	saker_store_close(s2);
	saker_store_close(s);
	rm_rf(tmpdir);
}
END_TEST

/* A writer refused by a reader in another process names the reader, not
 * the last writer whose pid is in the file. */
START_TEST(test_lock_reader_named)
{
	const struct lockdrv *d = &lockdrvs[_i];
	saker_store *s = NULL;
	char err[512] = "";
	int p2c[2], c2p[2], st;
	pid_t pid;
	char c;

	mk_tmp();
	ck_assert_int_eq(open_spec(d, false, &s, err, sizeof(err)), SAKER_OK);
	saker_store_close(s);
	ck_assert_int_eq(pipe(p2c), 0);
	ck_assert_int_eq(pipe(c2p), 0);
	if ((pid = fork()) == 0) {
		saker_store *r = NULL;

		if (open_spec(d, true, &r, err, sizeof(err)) != SAKER_OK)
			_exit(1);
		(void)!write(c2p[1], "r", 1);
		(void)!read(p2c[0], &c, 1);
		saker_store_close(r);
		_exit(0);
	}
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(read(c2p[0], &c, 1), 1);
	ck_assert_int_eq(open_spec(d, false, &s, err, sizeof(err)),
	    SAKER_ELOCKED);
	want_refusal(err, d, (long)pid);
	ck_assert_int_eq(write(p2c[1], "x", 1), 1);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* the reader is gone: a writer opens */
	ck_assert_int_eq(open_spec(d, false, &s, err, sizeof(err)), SAKER_OK);
	saker_store_close(s);
	close(p2c[0]); close(p2c[1]); close(c2p[0]); close(c2p[1]);
	rm_rf(tmpdir);
}
END_TEST

/* A store that is not there leaves no lock file beside it. */
START_TEST(test_lock_missing_store)
{
	const struct lockdrv *d = &lockdrvs[_i];
	saker_store *s = NULL;
	char err[512] = "", path[256];
	struct stat sb;

	mk_tmp();
	ck_assert_int_eq(open_spec(d, true, &s, err, sizeof(err)),
	    SAKER_ENOTFOUND);
	snprintf(path, sizeof(path), "%s/%s", tmpdir, d->lockfile);
	ck_assert_int_ne(stat(path, &sb), 0);
	rm_rf(tmpdir);
}
END_TEST

static Suite *
policy_suite(void)
{
	Suite *su = suite_create("policy");
	TCase *tc = tcase_create("lock");

	if (NLOCKDRVS > 0) {
		tcase_add_loop_test(tc, test_lock_refusal_names_pid, 0,
		    NLOCKDRVS);
		tcase_add_loop_test(tc, test_lock_reader_named, 0, NLOCKDRVS);
		tcase_add_loop_test(tc, test_lock_missing_store, 0, NLOCKDRVS);
	}
	suite_add_tcase(su, tc);
	return su;
}

int
main(void)
{
	SRunner *sr = srunner_create(policy_suite());
	int nf;

	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
