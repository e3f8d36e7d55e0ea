/* check_store.c -- runs the store conformance suite against every compiled-in driver. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "saker/store.h"
#include "store_conformance.h"

extern const struct saker_store_driver saker_store_memory;
#ifdef HAVE_LMDB
extern const struct saker_store_driver saker_store_lmdb;
#endif
#ifdef HAVE_SQLITE
extern const struct saker_store_driver saker_store_sqlite;
#endif
#ifdef HAVE_POSTGRES
#include <unistd.h>
#include "pg_cluster.h"
extern const struct saker_store_driver saker_store_postgres;

/*
 * PostgreSQL: one throwaway cluster for the whole run (tests/pg_cluster.c);
 * each test gets a fresh, empty store as its own schema in that cluster
 * (the driver's schema= option), named after the forked test process.
 */
static struct pg_cluster pgc;

static void
pg_spec(char *buf, size_t len, const char *tmpdir)
{
	static int n;

	(void)tmpdir;
	snprintf(buf, len, "postgres:%s schema=t%d_%d", pgc.conninfo,
	    (int)getpid(), ++n);
}
#endif

/* ------------------------------------------------------------------ */
/* memory-driver specifics the conformance suite cannot know about */

#define BASE ((int64_t)1700000000000LL)

static int
mem_put(saker_store *s, saker_queue *q, size_t len)
{
	static char buf[4096];
	struct saker_item it;

	memset(&it, 0, sizeof(it));
	it.len = len;
	it.data = buf;
	return saker_store_memory.put(s, q, &it, BASE);
}

static int
drop_cb(void *arg, const struct saker_item *item)
{
	(void)arg;
	(void)item;
	return 0;
}

START_TEST(test_memory_limit)
{
	const struct saker_store_driver *d = &saker_store_memory;
	struct saker_store_opts opts;
	saker_store *s = NULL;
	saker_queue *q = NULL;
	char err[128];
	int i, rc = SAKER_OK;

	memset(&opts, 0, sizeof(opts));
	opts.max_memory = 4096;
	ck_assert_int_eq(saker_store_open("memory", &opts, &s, err, sizeof(err)),
	    SAKER_OK);
	ck_assert_int_eq(d->queue_open(s, "m", 1, true, NULL, &q), SAKER_OK);

	/* one item above the limit never fits */
	ck_assert_int_eq(mem_put(s, q, 4097), SAKER_ENOMEM);
	ck_assert_str_eq(d->errmsg(s), "out of memory");

	/* 100-byte items: per-item overhead counts, so fewer than 41 fit */
	for (i = 0; i < 100; i++) {
		rc = mem_put(s, q, 100);
		if (rc != SAKER_OK)
			break;
	}
	ck_assert_int_eq(rc, SAKER_ENOMEM);
	ck_assert_int_gt(i, 1);
	ck_assert_int_lt(i, 41);
	ck_assert_str_eq(d->errmsg(s), "out of memory");
	ck_assert_int_eq(mem_put(s, q, 100), SAKER_ENOMEM);

	/* an open item still holds memory; confirming it frees room */
	ck_assert_int_eq(d->take(s, q, SAKER_TAKE_OPEN, BASE, drop_cb, NULL),
	    SAKER_OK);
	ck_assert_int_eq(mem_put(s, q, 100), SAKER_ENOMEM);
	ck_assert_int_eq(d->take(s, q, SAKER_TAKE_PEEK, BASE, drop_cb, NULL),
	    SAKER_OK);
	ck_assert_int_eq(d->take(s, q, SAKER_TAKE_REMOVE, BASE, drop_cb, NULL),
	    SAKER_OK);
	ck_assert_int_eq(mem_put(s, q, 100), SAKER_OK);
	ck_assert_int_eq(mem_put(s, q, 100), SAKER_ENOMEM);

	/* flushing returns all of it */
	ck_assert_int_eq(d->queue_flush(s, q), SAKER_OK);
	for (i = 0; i < 100; i++)
		if (mem_put(s, q, 100) != SAKER_OK)
			break;
	ck_assert_int_gt(i, 1);
	ck_assert_int_eq(d->queue_delete(s, q), SAKER_OK);
	ck_assert_int_eq(d->queue_open(s, "m2", 2, true, NULL, &q), SAKER_OK);
	ck_assert_int_eq(mem_put(s, q, 3000), SAKER_OK);
	saker_store_close(s);
}
END_TEST

START_TEST(test_memory_read_only)
{
	const struct saker_store_driver *d = &saker_store_memory;
	struct saker_store_opts opts;
	saker_store *s = NULL;
	saker_queue *q = NULL;
	char err[128];
	int64_t next = -1;

	memset(&opts, 0, sizeof(opts));
	opts.read_only = true;
	ck_assert_int_eq(saker_store_open("memory", &opts, &s, err, sizeof(err)),
	    SAKER_OK);
	ck_assert_int_eq(d->queue_open(s, "r", 1, true, NULL, &q), SAKER_EREADONLY);
	ck_assert_int_eq(d->queue_open(s, "r", 1, false, NULL, &q), SAKER_ENOTFOUND);
	ck_assert_int_eq(d->promote(s, BASE, &next), SAKER_OK);
	ck_assert_int_eq(next, 0);
	ck_assert_int_eq(d->commit(s), SAKER_OK);
	saker_store_close(s);
}
END_TEST

START_TEST(test_memory_spec)
{
	struct saker_store_opts opts;
	saker_store *s = NULL;
	char err[128] = "";

	memset(&opts, 0, sizeof(opts));
	ck_assert_int_eq(saker_store_open("memory:/tmp/x", &opts, &s, err,
	    sizeof(err)), SAKER_EINVAL);
	ck_assert_ptr_null(s);
	ck_assert(err[0] != '\0');
	/* close is NULL-safe */
	saker_store_memory.close(NULL);
}
END_TEST

/* ------------------------------------------------------------------ */

static void
add_driver(Suite *su, const struct saker_store_driver *drv)
{
	TCase *tc;

	if (drv->open == NULL) {
		printf("check_store: skipping driver '%s' (not implemented yet)\n",
		    drv->name);
		return;
	}
	tc = store_conformance_tcase(drv);
	if (tc == NULL) {
		printf("check_store: too many drivers, skipping '%s'\n", drv->name);
		return;
	}
	suite_add_tcase(su, tc);
}

int
main(void)
{
	Suite *su;
	SRunner *sr;
	TCase *tc;
	int failed;

	su = suite_create("store");
	add_driver(su, &saker_store_memory);
#ifdef HAVE_LMDB
	add_driver(su, &saker_store_lmdb);
#endif
#ifdef HAVE_SQLITE
	add_driver(su, &saker_store_sqlite);
#endif
#ifdef HAVE_POSTGRES
	if (getenv("CK_RUN_CASE") == NULL ||
	    strcmp(getenv("CK_RUN_CASE"), "postgres") == 0) {
		char why[256];
		int rc = pg_cluster_start(&pgc, why, sizeof(why));

		if (rc == 0) {
			/* several brokers open one database by design */
			struct store_conformance_opts o = { pg_spec, true };
			TCase *ptc = store_conformance_tcase_opts(
			    &saker_store_postgres, &o);

			if (ptc != NULL)
				suite_add_tcase(su, ptc);
		} else {
			printf("check_store: skipping driver 'postgres': %s\n",
			    why);
			if (rc < 0) {
				pg_cluster_destroy(&pgc);
				return EXIT_FAILURE;
			}
		}
	}
#endif
	if (saker_store_memory.open != NULL) {
		tc = tcase_create("memory-extra");
		tcase_add_test(tc, test_memory_limit);
		tcase_add_test(tc, test_memory_read_only);
		tcase_add_test(tc, test_memory_spec);
		suite_add_tcase(su, tc);
	}
	fflush(stdout);

	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
#ifdef HAVE_POSTGRES
	pg_cluster_destroy(&pgc);
#endif
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
