/* check_migrate_pg.c -- `saker migrate` into a PostgreSQL store, which
 * cannot be built aside and renamed into place: written in place when
 * empty, verified, refused when not empty or with --append, and emptied
 * again when the copy fails half-way.  A private cluster (pg_cluster.h). */
#include "config.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "itemattr.h"
#include "migrate.h"
#include "migrate_copy.h"
#include "pg_cluster.h"
#include "saker/store.h"
#include "testlib.h"

static struct pg_cluster pgc;

static saker_store *
open_spec(const char *spec, bool create)
{
	struct saker_store_opts o;
	char err[512];
	saker_store *s = NULL;

	memset(&o, 0, sizeof(o));
	o.create = create;
	o.sync = SAKER_SYNC_NEVER;
	ck_assert_msg(saker_store_open(spec, &o, &s, err, sizeof(err)) == SAKER_OK,
	    "%s: %s", spec, err);
	return s;
}

/* n items of 32 bytes in queue `name` of the LMDB store at spec */
static void
fill(const char *spec, const char *name, int n)
{
	saker_store *s = open_spec(spec, true);
	struct saker_item it;
	saker_queue *q;
	char buf[32];
	int i;

	ck_assert_int_eq(saker_store_queue_open(s, name, strlen(name), true, NULL,
	    &q), SAKER_OK);
	memset(&it, 0, sizeof(it));
	it.data = buf;
	it.len = sizeof(buf);
	for (i = 0; i < n; i++) {
		memset(buf, 'a' + i % 26, sizeof(buf));
		ck_assert_int_eq(saker_store_put(s, q, &it, saker_now_ms()), SAKER_OK);
	}
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
}

static int
count_queue(void *arg, const char *name, size_t len)
{
	(void)name;
	(void)len;
	(*(int *)arg)++;
	return 0;
}

/* Items in queue `name` of the store at spec (-1: no such queue), and
 * how many queues it has. */
static long long
items_in(const char *spec, const char *name, int *nqueues)
{
	saker_store *s = open_spec(spec, false);
	struct saker_queue_stats st;
	saker_queue *q;
	long long n = -1;

	*nqueues = 0;
	ck_assert_int_eq(saker_store_queues(s, count_queue, nqueues), SAKER_OK);
	if (saker_store_queue_open(s, name, strlen(name), false, NULL, &q) ==
	    SAKER_OK) {
		ck_assert_int_eq(saker_store_queue_stats(s, q, &st), SAKER_OK);
		n = (long long)st.items;
	}
	saker_store_close(s);
	return n;
}

static char *
pg_spec(void)
{
	char buf[512];

	pg_cluster_spec(&pgc, buf, sizeof(buf));
	return strdup(buf);
}

/* Into an empty store: written in place and verified; then refused as
 * not empty, and --append refused outright; the store is left as it was. */
START_TEST(test_into_postgres)
{
	char *src = tl_strdupf("lmdb:%s/src", tl_dir), *dst = pg_spec();
	char *out = NULL, *err = NULL;
	int rc, nq;

	fill(src, "jobs", 300);
	fill(src, "mail", 5);
	rc = tl_run_saker(tl_dir, NULL, &out, NULL, &err, "migrate", src, dst, NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, err);
	ck_assert_msg(strstr(out, "jobs: 300 items") != NULL &&
	    strstr(out, "verified") != NULL, "%s", out);
	free(out);
	free(err);
	ck_assert_int_eq(items_in(dst, "jobs", &nq), 300);
	ck_assert_int_eq(items_in(dst, "mail", &nq), 5);
	ck_assert_int_eq(nq, 2);

	rc = tl_run_saker(tl_dir, NULL, &out, NULL, &err, "migrate", src, dst, NULL);
	ck_assert_int_eq(rc, 1);
	ck_assert_msg(strstr(err, "is not empty (305 items in 2 queues)") != NULL,
	    "%s", err);
	free(out);
	free(err);
	rc = tl_run_saker(tl_dir, NULL, &out, NULL, &err, "migrate", "--append",
	    src, dst, NULL);
	ck_assert_int_eq(rc, 1);
	ck_assert_msg(strstr(err, "--append into a postgres store is not "
	    "supported") != NULL, "%s", err);
	free(out);
	free(err);
	ck_assert_int_eq(items_in(dst, "jobs", &nq), 300);
	ck_assert_int_eq(nq, 2);
	free(src);
	free(dst);
}
END_TEST

/* Deduplication ids as "key@expires_ms", collected (the driver lists them
 * in no order; read_ids sorts them). */
struct ids {
	int n;
	char v[8][64];
};

static int
add_id(void *arg, const void *key, size_t len, int64_t expires_ms)
{
	struct ids *l = arg;

	ck_assert_int_lt(l->n, 8);
	snprintf(l->v[l->n++], 64, "%.*s@%lld", (int)len, (const char *)key,
	    (long long)expires_ms);
	return 0;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(a, b);
}

struct attr_walk {
	char *out;
	size_t len, off;
};

static int
item_id(void *arg, const struct saker_item *it)
{
	struct attr_walk *w = arg;
	const void *v;
	size_t vlen;

	if (!itemattr_get(it->attrs, it->attrs_len, ITEMATTR_ID, &v, &vlen))
		v = "-", vlen = 1;
	w->off += (size_t)snprintf(w->out + w->off, w->len - w->off, "%.*s ",
	    (int)vlen, (const char *)v);
	return 0;
}

/* The ids of queue `name` at spec as "key@expires_ms ", sorted; and the
 * deduplication id of each item, in order ("-": none). */
static void
read_ids(const char *spec, const char *name, char *ids, size_t idlen,
    char *attrs, size_t alen)
{
	saker_store *s = open_spec(spec, false);
	struct attr_walk w = { attrs, alen, 0 };
	struct ids l;
	saker_queue *q;
	size_t off = 0;
	int i;

	memset(&l, 0, sizeof(l));
	attrs[0] = '\0';
	ck_assert_int_eq(saker_store_queue_open(s, name, strlen(name), false, NULL,
	    &q), SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_iterate(s, q, add_id, &l), 0);
	ck_assert_int_eq(saker_store_iterate(s, q, item_id, &w), 0);
	qsort(l.v, (size_t)l.n, sizeof(l.v[0]), cmp_str);
	ids[0] = '\0';
	for (i = 0; i < l.n; i++)
		off += (size_t)snprintf(ids + off, idlen - off, "%s ", l.v[i]);
	saker_store_close(s);
}

/* Item attributes and live deduplication ids go into PostgreSQL (where
 * every broker sees them) and come out of it again, ids with the expiry
 * they had; an expired id stays behind. */
START_TEST(test_ids_through_postgres)
{
	char *src = tl_strdupf("lmdb:%s/src", tl_dir), *dst = pg_spec();
	char *back = tl_strdupf("sqlite:%s/back.db", tl_dir);
	char *out = NULL, *err = NULL, *want;
	char ids[512], attrs[128];
	unsigned char rec[64];
	int64_t now = saker_now_ms();
	struct saker_item it;
	saker_store *s = open_spec(src, true);
	saker_queue *q;
	int rc;

	ck_assert_int_eq(saker_store_queue_open(s, "ids", 3, true, NULL, &q), SAKER_OK);
	memset(&it, 0, sizeof(it));
	it.data = "job";
	it.len = 3;
	it.attrs = rec;
	it.attrs_len = itemattr_set(rec, sizeof(rec), NULL, 0, ITEMATTR_ID, "r-1", 3);
	ck_assert_int_eq(saker_store_put(s, q, &it, now), SAKER_OK);
	it.attrs = NULL;
	it.attrs_len = 0;
	ck_assert_int_eq(saker_store_put(s, q, &it, now), SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_load(s, q, "r-1", 3, now + 300000, now), SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_load(s, q, "r-0", 3, now + 600000, now), SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_load(s, q, "old", 3, now + 200, now), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
	tl_sleep_ms(300);

	rc = tl_run_saker(tl_dir, NULL, &out, NULL, &err, "migrate", src, dst, NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, err);
	ck_assert_msg(strstr(out, "ids: 2 items") != NULL &&
	    strstr(out, ", 2 deduplication ids; verified") != NULL, "%s", out);
	free(out);
	free(err);
	want = tl_strdupf("r-0@%lld r-1@%lld ", (long long)(now + 600000),
	    (long long)(now + 300000));
	read_ids(dst, "ids", ids, sizeof(ids), attrs, sizeof(attrs));
	ck_assert_str_eq(ids, want);
	ck_assert_str_eq(attrs, "r-1 - ");
	/* and out of PostgreSQL again */
	rc = tl_run_saker(tl_dir, NULL, &out, NULL, &err, "migrate", "-q", dst,
	    back, NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, err);
	free(out);
	free(err);
	read_ids(back, "ids", ids, sizeof(ids), attrs, sizeof(attrs));
	ck_assert_str_eq(ids, want);
	ck_assert_str_eq(attrs, "r-1 - ");
	free(want);
	free(src);
	free(dst);
	free(back);
}
END_TEST

static void
interrupt_at_100(uint64_t n)
{
	if (n == 100)
		raise(SIGINT);
}

/* Interrupted half-way (in-process, so the hook can raise SIGINT): what
 * was written is deleted again, the destination is empty as before. */
START_TEST(test_interrupted_is_undone)
{
	char *src = tl_strdupf("lmdb:%s/src", tl_dir), *dst = pg_spec();
	char *argv[] = { "migrate", "-q", src, dst, NULL };
	int nq;

	fill(src, "jobs", 5000);
	mig_test_item_hook = interrupt_at_100;
	ck_assert_int_eq(migrate_main(4, argv), 1);
	mig_test_item_hook = NULL;
	ck_assert_int_eq(items_in(dst, "jobs", &nq), -1);
	ck_assert_int_eq(nq, 0);
	/* and it can be done again */
	ck_assert_int_eq(migrate_main(4, argv), 0);
	ck_assert_int_eq(items_in(dst, "jobs", &nq), 5000);
	free(src);
	free(dst);
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
		printf("check_migrate_pg: SKIP: %s\n", why);
		pg_cluster_destroy(&pgc);
		return rc > 0 ? 77 : EXIT_FAILURE;
	}
	su = suite_create("migrate_pg");
	tc = tcase_create("direct");
	tcase_add_checked_fixture(tc, tl_dir_setup, tl_dir_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_into_postgres);
	tcase_add_test(tc, test_interrupted_is_undone);
	tcase_add_test(tc, test_ids_through_postgres);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	pg_cluster_destroy(&pgc);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
