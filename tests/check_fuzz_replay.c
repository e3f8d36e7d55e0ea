/* check_fuzz_replay.c -- replays the fuzz corpus (tests/fuzz/corpus) through every fuzz entry point. */
#include "config.h"

#include <sys/stat.h>

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

/*
 * Every file under corpus/<target>/ is a seed or a minimised input that
 * once found a bug (those are named regress-*).  A crash, a sanitizer
 * report or a failed invariant fails the test.  The directory can be
 * overridden with $FUZZ_CORPUS.
 */

extern const struct saker_store_driver saker_store_memory;
#ifdef HAVE_LMDB
extern const struct saker_store_driver saker_store_lmdb;
#endif
#ifdef HAVE_SQLITE
extern const struct saker_store_driver saker_store_sqlite;
#endif

static const char *
corpus_dir(void)
{
	const char *d = getenv("FUZZ_CORPUS");

	return d != NULL && *d != '\0' ? d : FUZZ_CORPUS_DIR;
}

static uint8_t *
slurp(const char *path, size_t *lenp)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	ck_assert_msg(fp != NULL, "%s: %s", path, strerror(errno));
	if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0 &&
	    fseek(fp, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		ck_assert_ptr_nonnull(buf);
		ck_assert_int_eq(fread(buf, 1, (size_t)n, fp), (size_t)n);
		*lenp = (size_t)n;
	}
	fclose(fp);
	ck_assert_msg(buf != NULL, "%s: cannot read", path);
	return buf;
}

/* Run fn over every regular file of corpus/<sub> (only those whose name
 * starts with one of the prefixes, if given); returns the count. */
static int
replay_some(const char *sub, int (*fn)(const uint8_t *, size_t),
    const char *const *prefixes)
{
	char dir[4096], path[4096 + 256];
	struct dirent *de;
	struct stat st;
	DIR *d;
	int n = 0;

	snprintf(dir, sizeof(dir), "%s/%s", corpus_dir(), sub);
	d = opendir(dir);
	ck_assert_msg(d != NULL, "%s: %s", dir, strerror(errno));
	while ((de = readdir(d)) != NULL) {
		uint8_t *buf;
		size_t len = 0;

		if (de->d_name[0] == '.')
			continue;
		if (prefixes != NULL) {
			const char *const *p;

			for (p = prefixes; *p != NULL; p++)
				if (strncmp(de->d_name, *p, strlen(*p)) == 0)
					break;
			if (*p == NULL)
				continue;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		buf = slurp(path, &len);
		fn(buf, len);
		free(buf);
		n++;
	}
	closedir(d);
	return n;
}

static int
replay(const char *sub, int (*fn)(const uint8_t *, size_t))
{
	return replay_some(sub, fn, NULL);
}

/* The targets whose corpus is replayed as it is, with the fewest inputs
 * each must find (so an emptied corpus fails). */
static const struct {
	const char *sub;
	int (*fn)(const uint8_t *, size_t);
	int least;
} plain[] = {
	{ "proto", fuzz_proto, 20 },
	{ "dump", fuzz_dump, 5 },
	{ "conf", fuzz_conf, 20 },
	{ "store", fuzz_store, 5 },
#ifdef HAVE_OPENSSL
	{ "tls", fuzz_tls, 5 },
#endif
#ifdef HAVE_SQLITE
	{ "redo", fuzz_redo, 5 },
#endif
};

START_TEST(test_plain)
{
	int n = replay(plain[_i].sub, plain[_i].fn);

	printf("%s: %d inputs replayed\n", plain[_i].sub, n);
	ck_assert_int_ge(n, plain[_i].least);
}
END_TEST

/* Whole client sessions through the server; the protocol corpus too, as
 * sessions written in one piece. */
static int
conn_whole(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size + 1);

	ck_assert_ptr_nonnull(buf);
	buf[0] = 0;		/* "in one piece" */
	memcpy(buf + 1, data, size);
	fuzz_conn(buf, size + 1);
	free(buf);
	return 0;
}

/* The same before login (--auth-file): every line must be refused
 * cleanly, whatever it is. */
static int
conn_whole_prelogin(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size + 1);

	ck_assert_ptr_nonnull(buf);
	buf[0] = 0x40;		/* in one piece, not logged in */
	memcpy(buf + 1, data, size);
	fuzz_conn(buf, size + 1);
	free(buf);
	return 0;
}

START_TEST(test_conn)
{
	int n = replay("conn", fuzz_conn);
	int m = replay("proto", conn_whole);
	int l = replay("proto", conn_whole_prelogin);

	printf("conn: %d sessions and %d protocol inputs replayed (%d before login)\n",
	    n, m, l);
	ck_assert_int_ge(n, 20);
}
END_TEST

/* HTTP requests through the --http endpoint: every input whole and in
 * 7-byte writes. */
static int
http_split(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size + 1);

	ck_assert_ptr_nonnull(buf);
	buf[0] = 128 + 6;	/* 7-byte writes, instead of the file's choice */
	if (size > 1)
		memcpy(buf + 1, data + 1, size - 1);
	fuzz_http(buf, size > 0 ? size : 1);
	free(buf);
	return 0;
}

START_TEST(test_http)
{
	int n = replay("http", fuzz_http);
	int m = replay("http", http_split);

	printf("http: %d requests replayed, and again in 7-byte writes\n", n);
	ck_assert_int_ge(n, 10);
	ck_assert_int_eq(m, n);
}
END_TEST

/* The store programs over the durable drivers too: the same model, so
 * the memory driver and the durable ones are held to one behaviour. */
static const struct saker_store_driver *durable_drv;
static char durable_dir[64];
static int durable_n;

static int
store_durable(const uint8_t *data, size_t size)
{
	char loc[128];

	snprintf(loc, sizeof(loc), "%s/s%d%s", durable_dir, durable_n++,
	    strcmp(durable_drv->name, "sqlite") == 0 ? ".db" : "");
	/* the driver is opened without the layer, which makes a store's
	 * directory (SAKER_LOCK_IN_DIR) */
	if (durable_drv->lock == SAKER_LOCK_IN_DIR)
		ck_assert_int_eq(mkdir(loc, 0700), 0);
	return fuzz_store_driver(durable_drv, loc, data, size);
}

static void
replay_durable(const struct saker_store_driver *drv)
{
	char cmd[128];
	int n;

	durable_drv = drv;
	durable_n = 0;
	snprintf(durable_dir, sizeof(durable_dir), "/tmp/saker-fuzz-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(durable_dir));
	/* Only the hand-made programs: each opens a durable store, and
	 * the hundreds a fuzzing run adds would cost seconds. */
	{
		static const char *const hand[] = { "seed-", "regress-", NULL };

		n = replay_some("store", store_durable, hand);
	}
	printf("store over %s: %d inputs replayed\n", drv->name, n);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", durable_dir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_ge(n, 5);
}

#ifdef HAVE_LMDB
START_TEST(test_store_lmdb)
{
	replay_durable(&saker_store_lmdb);
}
END_TEST
#endif

#ifdef HAVE_SQLITE
START_TEST(test_store_sqlite)
{
	replay_durable(&saker_store_sqlite);
}
END_TEST
#endif

static Suite *
replay_suite(void)
{
	Suite *s = suite_create("fuzz_replay");
	TCase *tc = tcase_create("corpus");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_plain, 0, (int)(sizeof(plain) / sizeof(plain[0])));
	tcase_add_test(tc, test_conn);
	tcase_add_test(tc, test_http);
#ifdef HAVE_LMDB
	tcase_add_test(tc, test_store_lmdb);
#endif
#ifdef HAVE_SQLITE
	tcase_add_test(tc, test_store_sqlite);
#endif
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(replay_suite());
	int failed;

	/* the files' own write sizes, however many writes that makes */
	fuzz_max_chunks = 0;
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
