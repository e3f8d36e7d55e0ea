/* check_powerloss.c -- simulated power loss under load: writes not yet fsynced vanish at every cut. */
#include "config.h"

#include <sys/socket.h>
#include <sys/stat.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "powerloss/powerloss.h"
#include "testlib.h"
#include "idprod.h"
#include "totalq.h"

/*
 * sakerd runs with tests/powerloss/libpowerloss.so preloaded, which keeps
 * an undo journal of every write to the store's files since their last
 * fsync (powerloss.h).  Each cut: 50 producers set unique items one at a
 * time, SIGKILL at a random moment, the journals are played backwards
 * (the files are now as a power cut would have left them), the server
 * restarts, every queue is drained and checked, Jepsen total-queue style:
 *   lost        acknowledged (STORED) but not read back
 *   unexpected  read back but never sent, or refused
 *   duplicated, reordered (within one producer and queue)
 * With --sync always all four must be 0 and the store must open cleanly
 * after every cut.  The survey cases run --sync periodic and never the
 * same way and only print what they lose (docs/durability.md).
 */

#define CUTS 20
#define SURVEY_CUTS 3

struct counts {
	struct tq_counts tq;
	long undone;		/* writes the power cut took back */
};

struct plrun {
	char *top;		/* temp dir: data/ (watched) and journal/ */
	char data[PATH_MAX];
	char journal[PATH_MAX];
	char spec[PATH_MAX + 16];
};

/* Environment for the next server start: preload the shim. */
void pl_env_set(const char *watch, const char *journal);

void
pl_env_set(const char *watch, const char *journal)
{
	const char *so = getenv("POWERLOSS_SO");
	const char *asan = getenv("ASAN_OPTIONS");
	char path[PATH_MAX], *opts;

	if (so == NULL)
		so = "tests/powerloss/libpowerloss.so";
	ck_assert_msg(realpath(so, path) != NULL, "%s: %s (build it: make %s)",
	    so, strerror(errno), "tests/powerloss/libpowerloss.so");
	setenv("LD_PRELOAD", path, 1);
	/* The shim is not built with ASan; in a sanitizer build ASan must
	 * not insist on being first in the library list. */
	opts = tl_strdupf("%s%sverify_asan_link_order=0", asan ? asan : "",
	    asan && *asan ? ":" : "");
	setenv("ASAN_OPTIONS", opts, 1);
	free(opts);
	setenv(PL_ENV_DIR, watch, 1);
	if (journal != NULL)
		setenv(PL_ENV_JOURNAL, journal, 1);
	else
		unsetenv(PL_ENV_JOURNAL);
}

static void
pl_env_clear(void)
{
	unsetenv("LD_PRELOAD");
	unsetenv(PL_ENV_DIR);
	unsetenv(PL_ENV_JOURNAL);
}

/* One cut; the server is running on entry and on return. */
static void
cut_once(struct tl_server *s, struct plrun *pr_run, const char *name, int cut,
    struct counts *ct, bool ids)
{
	struct idprod ip;
	struct tq t;
	char err[512];
	long undone;
	int ctl;

	memset(ct, 0, sizeof(*ct));
	tq_start(&t, s->port, "pl", cut);
	if (ids)
		idprod_start(&ip, s->port, cut);
	tq_run_until(&t, tl_now_ms() + 100 + random() % 301, name);
	tl_server_kill(s);
	tq_stop(&t);

	/* The power cut: every write since the last fsync is undone. */
	undone = pl_restore(pr_run->journal, err, sizeof(err));
	ck_assert_msg(undone >= 0, "%s: restore: %s", name, err);
	ct->undone = undone;

	tl_server_restart(s);	/* fails the test unless it opens cleanly */
	ctl = tl_connect(s->port);
	tq_check(&t, ctl, name);
	if (ids)	/* acknowledged id sets survived the cut, once each */
		idprod_check(&ip, ctl, name, cut);
	close(ctl);
	ct->tq = t.ct;
	tq_free(&t);
	printf("%s cut %d: undone writes %ld acknowledged %d maybe %d read %d "
	    "lost %d unexpected %d duplicated %d reordered %d\n", name, cut,
	    undone, t.ct.acked, t.ct.maybe, t.ct.read, t.ct.lost,
	    t.ct.unexpected, t.ct.duplicated, t.ct.reordered);
	fflush(stdout);
}

static struct tl_server *
pl_start(struct plrun *r, const char *store, const char *sync)
{
	struct tl_server *s;

	r->top = tl_mkdtemp();
	snprintf(r->data, sizeof(r->data), "%s/data", r->top);
	snprintf(r->journal, sizeof(r->journal), "%s/journal", r->top);
	ck_assert_int_eq(mkdir(r->data, 0700), 0);
	ck_assert_int_eq(mkdir(r->journal, 0700), 0);
	if (strcmp(store, "lmdb") == 0)
		snprintf(r->spec, sizeof(r->spec), "lmdb:%s/store", r->data);
	else
		snprintf(r->spec, sizeof(r->spec), "sqlite:%s/store.db", r->data);
	pl_env_set(r->data, r->journal);
	s = tl_server_start(r->spec, "--sync", sync, NULL);
	return s;
}

static void
pl_finish(struct tl_server *s, struct plrun *r)
{
	tl_server_stop(s);
	tl_server_free(s);
	pl_env_clear();
	tl_rmrf(r->top);
	free(r->top);
}

static void
powerloss_store(const char *store, const char *sync, int cuts, bool strict)
{
	struct plrun r;
	struct tl_server *s = pl_start(&r, store, sync);
	struct counts ct, sum;
	unsigned seed = (unsigned)getpid();
	char name[64];
	int cut;
	int64_t t0 = tl_now_ms();

	memset(&sum, 0, sizeof(sum));
	srandom(seed);
	snprintf(name, sizeof(name), "%s --sync %s", store, sync);
	printf("%s: cut-time seed %u\n", name, seed);
	for (cut = 0; cut < cuts; cut++) {
		cut_once(s, &r, name, cut, &ct, strict);
		sum.tq.acked += ct.tq.acked;
		sum.tq.lost += ct.tq.lost;
		sum.tq.unexpected += ct.tq.unexpected;
		sum.undone += ct.undone;
		ck_assert_msg(ct.tq.unexpected == 0 && ct.tq.duplicated == 0 &&
		    ct.tq.reordered == 0, "%s cut %d: unexpected %d duplicated %d "
		    "reordered %d", name, cut, ct.tq.unexpected,
		    ct.tq.duplicated, ct.tq.reordered);
		if (strict) {
			ck_assert_msg(ct.tq.lost == 0, "%s cut %d: %d acknowledged "
			    "items lost", name, cut, ct.tq.lost);
			ck_assert_msg(ct.tq.acked > 0, "%s cut %d: nothing "
			    "acknowledged", name, cut);
		}
	}
	printf("%s: %d cuts in %lld ms, acknowledged %d, lost %d, unexpected %d\n",
	    name, cuts, (long long)(tl_now_ms() - t0), sum.tq.acked, sum.tq.lost,
	    sum.tq.unexpected);
	/* With --sync never nothing is fsynced during a cut: if nothing was
	 * undone, the shim is not working and the whole test proves nothing. */
	if (strcmp(sync, "never") == 0)
		ck_assert_msg(sum.undone > 0, "%s: the power-loss shim undid "
		    "nothing; is it loaded?", name);
	pl_finish(s, &r);
}

#ifdef HAVE_LMDB
START_TEST(test_lmdb_always)
{
	powerloss_store("lmdb", "always", CUTS, true);
}
END_TEST

START_TEST(test_lmdb_survey)
{
	powerloss_store("lmdb", "periodic", SURVEY_CUTS, false);
	powerloss_store("lmdb", "never", SURVEY_CUTS, false);
}
END_TEST
#endif

#ifdef HAVE_SQLITE
START_TEST(test_sqlite_always)
{
	powerloss_store("sqlite", "always", CUTS, true);
}
END_TEST

START_TEST(test_sqlite_survey)
{
	powerloss_store("sqlite", "periodic", SURVEY_CUTS, false);
	powerloss_store("sqlite", "never", SURVEY_CUTS, false);
}
END_TEST
#endif

/* The shim itself: an unsynced write is undone, a synced one is kept. */
START_TEST(test_shim_selfcheck)
{
	char *top = tl_mkdtemp(), err[256], cmd[PATH_MAX * 3], *got;
	char data[PATH_MAX], journal[PATH_MAX], file[PATH_MAX + 8];
	size_t len;
	FILE *fp;

	snprintf(data, sizeof(data), "%s/data", top);
	snprintf(journal, sizeof(journal), "%s/journal", top);
	snprintf(file, sizeof(file), "%s/f", data);
	ck_assert_int_eq(mkdir(data, 0700), 0);
	ck_assert_int_eq(mkdir(journal, 0700), 0);
	pl_env_set(data, journal);
	/* dd writes with write(); conv=fsync makes it fsync at the end. */
	snprintf(cmd, sizeof(cmd), "printf synced | dd of=%s conv=fsync "
	    "status=none && printf XXXXXXXXXXX | dd of=%s conv=notrunc "
	    "status=none", file, file);
	ck_assert_int_eq(system(cmd), 0);
	pl_env_clear();
	got = tl_read_file(file, &len);
	ck_assert_str_eq(got, "XXXXXXXXXXX");
	free(got);
	ck_assert_int_ge(pl_restore(journal, err, sizeof(err)), 1);
	got = tl_read_file(file, &len);
	ck_assert_str_eq(got, "synced");
	free(got);
	(void)fp;
	tl_rmrf(top);
	free(top);
}
END_TEST

static Suite *
powerloss_suite(void)
{
	Suite *s = suite_create("powerloss");
	TCase *tc = tcase_create("shim");

	tcase_add_test(tc, test_shim_selfcheck);
	suite_add_tcase(s, tc);
#ifdef HAVE_LMDB
	tc = tcase_create("lmdb");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_lmdb_always);
	tcase_add_test(tc, test_lmdb_survey);
	suite_add_tcase(s, tc);
#endif
#ifdef HAVE_SQLITE
	tc = tcase_create("sqlite");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_sqlite_always);
	tcase_add_test(tc, test_sqlite_survey);
	suite_add_tcase(s, tc);
#endif
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(powerloss_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
