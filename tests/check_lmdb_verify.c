/* check_lmdb_verify.c -- the walk that checks an LMDB file before liblmdb
 * maps it (lmdb_verify.h), on a real store damaged on purpose: each kind
 * of damage is found and named, a sound file passes, and what is no LMDB
 * file at all is left to liblmdb. */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lmdb_verify.h"
#include "saker/store.h"
#include "testlib.h"

#define PAGEHDR 16
#define DBREC 48                /* an MDB_db */
#define META_DBS (PAGEHDR + 24) /* a meta page's two MDB_dbs: free, main */

static char *file;              /* tl_dir/store/data.mdb */
static char why[512];
static unsigned psize;

/* A store of a few thousand items in two queues (branch pages). */
static void
make_store(void)
{
	struct saker_store_opts o;
	struct saker_item it;
	char err[256], data[100], *spec = tl_strdupf("lmdb:%s/store", tl_dir);
	saker_store *s;
	saker_queue *q;
	int i, k;

	memset(&o, 0, sizeof(o));
	o.create = true;
	o.sync = SAKER_SYNC_NEVER;
	ck_assert_int_eq(saker_store_open(spec, &o, &s, err, sizeof(err)), SAKER_OK);
	memset(data, 'x', sizeof(data));
	memset(&it, 0, sizeof(it));
	it.data = data;
	it.len = sizeof(data);
	for (k = 0; k < 2; k++) {
		ck_assert_int_eq(saker_store_queue_open(s, k ? "b" : "a", 1, true,
		    NULL, &q), SAKER_OK);
		for (i = 0; i < 2000; i++)
			ck_assert_int_eq(saker_store_put(s, q, &it, 1000), SAKER_OK);
	}
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
	free(spec);
	file = tl_strdupf("%s/store/data.mdb", tl_dir);
}

static uint64_t
get64(int fd, off_t off)
{
	uint64_t v;

	ck_assert_int_eq(pread(fd, &v, 8, off), 8);
	return v;
}

static void
put_bytes(off_t off, const void *v, size_t len)
{
	int fd = open(file, O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, v, len, off), (ssize_t)len);
	close(fd);
}

/* The current meta page's offset (the one with the larger txnid) and the
 * main database's root page. */
static off_t
current_meta(uint64_t *main_root)
{
	int fd = open(file, O_RDONLY);
	uint32_t ps;
	off_t m0, m1, m;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &ps, 4, META_DBS), 4);
	psize = ps;
	m0 = 0;
	m1 = psize;
	m = get64(fd, m1 + META_DBS + 2 * DBREC + 8) >
	    get64(fd, m0 + META_DBS + 2 * DBREC + 8) ? m1 : m0;
	*main_root = get64(fd, m + META_DBS + DBREC + 40);
	close(fd);
	return m;
}

static int
verify(void)
{
	struct lmv_stats st;

	return lmv_verify(file, &st, why, sizeof(why));
}

#define ck_damaged(s) do { \
	ck_assert_int_eq(verify(), 1); \
	ck_assert_msg(strstr(why, (s)) != NULL, "why: %s", why); \
} while (0)

START_TEST(test_sound)
{
	struct lmv_stats st;
	uint64_t root;

	make_store();
	current_meta(&root);
	ck_assert_int_eq(lmv_verify(file, &st, why, sizeof(why)), 0);
	ck_assert_str_eq(why, "");
	ck_assert_uint_eq(st.psize, psize);
	ck_assert_uint_ge(st.entries, 4000);
	ck_assert_uint_gt(st.pages, 2);
	ck_assert_uint_ge(st.last_pgno, root);
	/* stats are optional */
	ck_assert_int_eq(lmv_verify(file, NULL, why, sizeof(why)), 0);
}
END_TEST

/* Not an LMDB file, missing, too short: liblmdb's to refuse (0). */
START_TEST(test_left_to_liblmdb)
{
	char *junk = tl_write_file("junk", "");
	char big[4096];
	FILE *f;

	ck_assert_int_eq(lmv_verify(junk, NULL, why, sizeof(why)), 0);
	free(junk);
	junk = tl_strdupf("%s/missing", tl_dir);
	ck_assert_int_eq(lmv_verify(junk, NULL, why, sizeof(why)), 0);
	free(junk);
	memset(big, 'z', sizeof(big));
	junk = tl_strdupf("%s/zzz", tl_dir);
	ck_assert_ptr_nonnull(f = fopen(junk, "w"));
	ck_assert_uint_eq(fwrite(big, 1, sizeof(big), f), sizeof(big));
	fclose(f);
	ck_assert_int_eq(lmv_verify(junk, NULL, why, sizeof(why)), 0);
	free(junk);
	/* a directory cannot be read as a file: -1 with the reason */
	ck_assert_int_eq(lmv_verify(tl_dir, NULL, why, sizeof(why)), -1);
	ck_assert_msg(strstr(why, "cannot map") != NULL, "%s", why);
}
END_TEST

START_TEST(test_bad_page_size)
{
	uint32_t v = 1000;

	make_store();
	put_bytes(META_DBS, &v, 4);
	ck_damaged("bad page size 1000");
}
END_TEST

START_TEST(test_truncated)
{
	uint64_t root;

	make_store();
	current_meta(&root);
	ck_assert_int_eq(truncate(file, 3 * (off_t)psize), 0);
	ck_damaged("lies beyond the file (3 pages): truncated");
}
END_TEST

/* The main database's root pointing at a meta page. */
START_TEST(test_root_out_of_range)
{
	uint64_t root, one = 1;
	off_t m;

	make_store();
	m = current_meta(&root);
	put_bytes(m + META_DBS + DBREC + 40, &one, 8);
	ck_damaged("is damaged: the main database page 1 is out of range");
}
END_TEST

/* A page that does not carry its own number was overwritten. */
START_TEST(test_page_overwritten)
{
	uint64_t root, zero = 0;

	make_store();
	current_meta(&root);
	put_bytes((off_t)root * psize, &zero, 8);
	ck_assert_int_eq(verify(), 1);
	ck_assert_msg(strstr(why, "says it is page 0 (overwritten or zeroed)")
	    != NULL, "%s", why);
}
END_TEST

START_TEST(test_page_flags)
{
	uint64_t root;
	uint16_t zero = 0;

	make_store();
	current_meta(&root);
	put_bytes((off_t)root * psize + 10, &zero, 2);
	ck_damaged("of the main database: flags 0, expected a");
}
END_TEST

START_TEST(test_page_bounds)
{
	uint64_t root;
	uint16_t lower = 200, upper = 100;

	make_store();
	current_meta(&root);
	put_bytes((off_t)root * psize + 12, &lower, 2);
	put_bytes((off_t)root * psize + 14, &upper, 2);
	ck_damaged("of the main database: bad bounds 200..100");
}
END_TEST

static void
teardown(void)
{
	free(file);
	file = NULL;
	tl_dir_teardown();
}

int
main(void)
{
	Suite *su = suite_create("lmdb_verify");
	TCase *tc = tcase_create("walk");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, tl_dir_setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_sound);
	tcase_add_test(tc, test_left_to_liblmdb);
	tcase_add_test(tc, test_bad_page_size);
	tcase_add_test(tc, test_truncated);
	tcase_add_test(tc, test_root_out_of_range);
	tcase_add_test(tc, test_page_overwritten);
	tcase_add_test(tc, test_page_flags);
	tcase_add_test(tc, test_page_bounds);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
