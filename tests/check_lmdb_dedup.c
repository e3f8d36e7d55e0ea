/* check_lmdb_dedup.c -- what the store conformance suite cannot see of
 * the LMDB driver's item attributes and deduplication ids (format 5):
 * they survive a crash through the journal replay, a store written by
 * 1.0.0 is upgraded in place, and damage to either is found, not served. */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itemattr.h"
#include "saker/store.h"
#include "testlib.h"

#define BASE ((int64_t)1700000000000LL)
#define WINDOW ((int64_t)60000)

static saker_store *
open_store(const char *dir, bool read_only)
{
	struct saker_store_opts o;
	saker_store *s = NULL;
	char spec[600], err[1024];

	memset(&o, 0, sizeof(o));
	o.sync = SAKER_SYNC_ALWAYS;
	o.create = !read_only;
	o.read_only = read_only;
	snprintf(spec, sizeof(spec), "lmdb:%s", dir);
	ck_assert_msg(saker_store_open(spec, &o, &s, err, sizeof(err)) ==
	    SAKER_OK, "open %s: %s", spec, err);
	return s;
}

static saker_queue *
queue(saker_store *s, const char *name, bool create)
{
	saker_queue *q = NULL;

	ck_assert_int_eq(saker_store_queue_open(s, name, strlen(name), create,
	    NULL, &q), SAKER_OK);
	return q;
}

static void
put(saker_store *s, saker_queue *q, const char *data, const char *attrs,
    size_t alen)
{
	struct saker_item it = { 0 };

	it.data = data;
	it.len = strlen(data);
	it.attrs = attrs;
	it.attrs_len = alen;
	ck_assert_int_eq(saker_store_put(s, q, &it, BASE), SAKER_OK);
}

/* One item as take/iterate handed it over. */
struct got {
	char data[64];
	unsigned char attrs[SAKER_ATTRS_MAX];
	size_t alen;
	uint64_t id;
};

static int
got_cb(void *arg, const struct saker_item *item)
{
	struct got *g = arg;

	snprintf(g->data, sizeof(g->data), "%.*s", (int)item->len,
	    (const char *)item->data);
	ck_assert_uint_le(item->attrs_len, SAKER_ATTRS_MAX);
	if (item->attrs_len > 0)
		memcpy(g->attrs, item->attrs, item->attrs_len);
	g->alen = item->attrs_len;
	g->id = item->id;
	return 0;
}

/* Take the head of q (mode), which must be `data` with attributes
 * attrs[0..alen); returns its id. */
static uint64_t
expect(saker_store *s, saker_queue *q, int mode, const char *data,
    const void *attrs, size_t alen)
{
	struct got g;

	memset(&g, 0, sizeof(g));
	ck_assert_int_eq(saker_store_take(s, q, mode, BASE + 5000, got_cb, &g),
	    SAKER_OK);
	ck_assert_str_eq(g.data, data);
	ck_assert_uint_eq(g.alen, alen);
	ck_assert(alen == 0 || memcmp(g.attrs, attrs, alen) == 0);
	return g.id;
}

struct ids {
	char key[8][SAKER_DEDUP_KEY_MAX + 1];
	int64_t exp[8];
	int n;
};

static int
ids_cb(void *arg, const void *key, size_t len, int64_t expires_ms)
{
	struct ids *ids = arg;

	ck_assert_int_lt(ids->n, 8);
	snprintf(ids->key[ids->n], sizeof(ids->key[0]), "%.*s", (int)len,
	    (const char *)key);
	ids->exp[ids->n++] = expires_ms;
	return 0;
}

static void
expect_ids(saker_store *s, saker_queue *q, int n, const char *key,
    int64_t exp)
{
	struct ids ids;

	memset(&ids, 0, sizeof(ids));
	ck_assert_int_eq(saker_store_dedup_iterate(s, q, ids_cb, &ids),
	    SAKER_OK);
	ck_assert_int_eq(ids.n, n);
	if (n > 0) {
		ck_assert_str_eq(ids.key[0], key);
		ck_assert_int_eq(ids.exp[0], exp);
	}
}

static int
put_once(saker_store *s, saker_queue *q, const char *data, const char *id)
{
	struct saker_item it = { 0 };

	it.data = data;
	it.len = strlen(data);
	return saker_store_put_once(s, q, &it, id, strlen(id), WINDOW, 0, BASE);
}

/* ------------------------------------------------------------------ */

static char big[SAKER_ATTRS_MAX + 1];	/* attributes at the bound */

/* In a child: items with attributes through release_delayed and move,
 * an item with an id, all only in the journal, then SIGKILL. */
static void
crash_child(const char *dir)
{
	saker_store *s = open_store(dir, false);
	saker_queue *q = queue(s, "q", true), *r = queue(s, "r", true);
	uint64_t id;

	put(s, q, "x", "\001ax", 3);
	put(s, q, "y", big, SAKER_ATTRS_MAX);
	put(s, q, "z", NULL, 0);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	id = expect(s, q, SAKER_TAKE_OPEN, "x", "\001ax", 3);
	ck_assert_int_eq(saker_store_release_delayed(s, q, id, BASE + 1000,
	    BASE), SAKER_OK);
	id = expect(s, q, SAKER_TAKE_OPEN, "y", big, SAKER_ATTRS_MAX);
	ck_assert_int_eq(saker_store_move(s, q, id, r), SAKER_OK);
	ck_assert_int_eq(put_once(s, q, "w", "k1"), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	/* a batch not committed: its id goes with its item */
	ck_assert_int_eq(put_once(s, q, "v", "k2"), SAKER_OK);
	kill(getpid(), SIGKILL);
	_exit(5);
}

/* What crash_child left, as the replayed (or checkpointed) store has it. */
static void
crash_check(saker_store *s)
{
	saker_queue *q = queue(s, "q", false), *r = queue(s, "r", false);
	unsigned char want[64];
	size_t wlen;
	int64_t next;

	wlen = itemattr_set(want, sizeof(want), NULL, 0, ITEMATTR_ID, "k1", 2);
	ck_assert_uint_gt(wlen, 0);
	expect_ids(s, q, 1, "k1", BASE + WINDOW);
	ck_assert_int_eq(put_once(s, q, "w", "k1"), SAKER_EEXIST);
	ck_assert_int_eq(saker_store_promote(s, BASE + 2000, &next), SAKER_OK);
	expect(s, q, SAKER_TAKE_PEEK, "z", NULL, 0);
	expect(s, r, SAKER_TAKE_PEEK, "y", big, SAKER_ATTRS_MAX);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
}

START_TEST(test_crash_replay)
{
	char *dir = tl_strdupf("%s/store", tl_dir);
	unsigned char want[64];
	saker_store *s;
	saker_queue *q;
	size_t wlen;
	pid_t pid;
	int st;

	memset(big, 0xa5, sizeof(big));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		crash_child(dir);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child %d",
	    st);
	/* replayed from the journal */
	s = open_store(dir, false);
	crash_check(s);
	saker_store_close(s);
	/* checkpointed into data.mdb by that close */
	s = open_store(dir, false);
	crash_check(s);
	q = queue(s, "q", false);
	wlen = itemattr_set(want, sizeof(want), NULL, 0, ITEMATTR_ID, "k1", 2);
	expect(s, q, SAKER_TAKE_REMOVE, "z", NULL, 0);
	expect(s, q, SAKER_TAKE_REMOVE, "w", want, wlen);
	expect(s, q, SAKER_TAKE_REMOVE, "x", "\001ax", 3);
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_REMOVE, BASE,
	    got_cb, &(struct got){ .alen = 0 }), SAKER_EEMPTY);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
	free(dir);
}
END_TEST

/* ------------------------------------------------------------------ */

static void
copy_file(const char *from, const char *to)
{
	char buf[8192];
	ssize_t n;
	int in, out;

	in = open(from, O_RDONLY);
	ck_assert_msg(in >= 0, "open %s", from);
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_msg(out >= 0, "create %s", to);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		ck_assert_int_eq(write(out, buf, (size_t)n), n);
	close(in);
	close(out);
}

/* Every item of q, as "data," ("data*," with attributes) in iterate's
 * order, into out. */
static int
list_cb(void *arg, const struct saker_item *item)
{
	char *out = arg;

	snprintf(out + strlen(out), 256 - strlen(out), "%.*s%s,",
	    (int)item->len, (const char *)item->data,
	    item->attrs_len > 0 ? "*" : "");
	return 0;
}

static void
list(saker_store *s, const char *qname, char out[256])
{
	out[0] = '\0';
	ck_assert_int_eq(saker_store_iterate(s, queue(s, qname, false),
	    list_cb, out), SAKER_OK);
}

/* The store written by 1.0.0 (format 1): opened read-only it has no ids;
 * opened for writing it gains the dedup databases; its old items read
 * unchanged and without attributes; new items with ids work and
 * survive a reopen. */
START_TEST(test_upgrade_1_0_0)
{
	const char *src = getenv("srcdir");
	char *from = tl_strdupf("%s/tests/data/store-1.0.0-lmdb/data.mdb",
	    src != NULL ? src : ".");
	char *dir = tl_strdupf("%s/store", tl_dir), *to;
	char q1[256], q2[256], now[256];
	saker_store *s;
	saker_queue *q;

	ck_assert_int_eq(mkdir(dir, 0700), 0);
	to = tl_strdupf("%s/data.mdb", dir);
	copy_file(from, to);

	s = open_store(dir, true);
	list(s, "q1", q1);
	list(s, "q2", q2);
	ck_assert_str_ne(q1, "");
	expect_ids(s, queue(s, "q1", false), 0, NULL, 0);
	saker_store_close(s);

	s = open_store(dir, false);
	q = queue(s, "q1", false);
	expect_ids(s, q, 0, NULL, 0);
	ck_assert_int_eq(put_once(s, q, "new", "id-1"), SAKER_OK);
	ck_assert_int_eq(put_once(s, q, "new", "id-1"), SAKER_EEXIST);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);

	s = open_store(dir, false);
	q = queue(s, "q1", false);
	expect_ids(s, q, 1, "id-1", BASE + WINDOW);
	ck_assert_int_eq(put_once(s, q, "new", "id-1"), SAKER_EEXIST);
	/* the old items unchanged, without attributes; the new one with */
	list(s, "q2", now);
	ck_assert_str_eq(now, q2);
	ck_assert_ptr_null(strchr(q1, '*'));
	list(s, "q1", now);
	ck_assert_uint_eq(strlen(now), strlen(q1) + strlen("new*,"));
	ck_assert_ptr_nonnull(strstr(now, "new*,"));
	saker_store_close(s);

	s = open_store(dir, true);
	q = queue(s, "q1", false);
	expect_ids(s, q, 1, "id-1", BASE + WINDOW);
	saker_store_close(s);
	free(from);
	free(to);
	free(dir);
}
END_TEST

/* ------------------------------------------------------------------ */

/* Flip the byte `at` bytes after the only occurrence of pat in file. */
static void
flip_after(const char *file, const void *pat, size_t plen, size_t at)
{
	size_t len, i, hit = SIZE_MAX;
	char *buf = tl_read_file(file, &len);
	int fd;

	ck_assert_ptr_nonnull(buf);
	for (i = 0; i + plen <= len; i++) {
		if (memcmp(buf + i, pat, plen) == 0) {
			ck_assert_msg(hit == SIZE_MAX, "pattern found twice");
			hit = i;
		}
	}
	ck_assert_msg(hit != SIZE_MAX, "pattern not found");
	buf[hit + at] ^= 0x01;
	fd = open(file, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, buf + hit + at, 1, (off_t)(hit + at)), 1);
	close(fd);
	free(buf);
}

/* A damaged attribute byte fails the item's checksum: iterate names it,
 * take moves it aside.  A damaged id record is named by dedup_iterate
 * and counts as expired for a new set with that id. */
START_TEST(test_damage)
{
	char *dir = tl_strdupf("%s/store", tl_dir);
	char *file = tl_strdupf("%s/data.mdb", dir);
	static const char amark[] = "\001attr-marker-0123456789";
	unsigned char pat[32], want[64];
	struct got g;
	size_t wlen;
	saker_store *s;
	saker_queue *q;
	uint64_t removed;
	bool replaced;

	s = open_store(dir, false);
	q = queue(s, "q", true);
	put(s, q, "item", amark, sizeof(amark) - 1);
	ck_assert_int_eq(put_once(s, q, "other", "id-marker-42"), SAKER_OK);
	ck_assert_int_eq(put_once(s, q, "third", "id-marker-43"), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);

	flip_after(file, amark + 1, sizeof(amark) - 2, 5);
	/* the dedup records: key (qid, id) and then its value, the expiry */
	for (int i = 0; i < 8; i++)
		pat[12 + i] = (unsigned char)((uint64_t)(BASE + WINDOW) >>
		    (56 - 8 * i));
	memcpy(pat, "id-marker-42", 12);
	flip_after(file, pat, 20, 19);
	memcpy(pat, "id-marker-43", 12);
	flip_after(file, pat, 20, 19);
	{
		/* saker check names both, items and ids */
		char *spec = tl_strdupf("lmdb:%s", dir), *out = NULL, *err = NULL;

		ck_assert_int_eq(tl_run_saker(tl_dir, NULL, &out, NULL, &err,
		    "check", spec, NULL), 1);
		ck_assert_msg(strstr(out, "damaged: queue 'q': deduplication"
		    " ids:") != NULL && strstr(out, "checksum") != NULL,
		    "out: %s", out);
		free(out);
		free(err);
		free(spec);
	}

	s = open_store(dir, false);
	q = queue(s, "q", false);
	memset(&g, 0, sizeof(g));
	ck_assert_int_eq(saker_store_iterate(s, q, got_cb, &g),
	    SAKER_ECORRUPT);
	ck_assert_msg(strstr(saker_store_errmsg(s), "checksum") != NULL, "%s",
	    saker_store_errmsg(s));
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_REMOVE, BASE,
	    got_cb, &g), SAKER_ECORRUPT);
	wlen = itemattr_set(want, sizeof(want), NULL, 0, ITEMATTR_ID,
	    "id-marker-42", 12);
	expect(s, q, SAKER_TAKE_PEEK, "other", want, wlen);
	ck_assert_int_eq(saker_store_dedup_iterate(s, q, ids_cb,
	    &(struct ids){ .n = 0 }), SAKER_ECORRUPT);
	ck_assert_msg(strstr(saker_store_errmsg(s), "deduplication") != NULL,
	    "%s", saker_store_errmsg(s));
	ck_assert_int_eq(s->driver->dedup_put(s, q, "id-marker-42", 12,
	    BASE + 2 * WINDOW, BASE, &replaced), SAKER_OK);
	ck_assert(replaced);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	/* the sweep takes the damaged record once its entry by expiry is
	 * due, and the entry the replaced one left, uncounted */
	ck_assert_int_eq(s->driver->dedup_sweep(s, q, BASE + WINDOW - 1, 0,
	    &removed), SAKER_OK);
	ck_assert_uint_eq(removed, 0);
	ck_assert_int_eq(s->driver->dedup_sweep(s, q, BASE + WINDOW, 0,
	    &removed), SAKER_OK);
	ck_assert_uint_eq(removed, 1);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	expect_ids(s, q, 1, "id-marker-42", BASE + 2 * WINDOW);
	saker_store_close(s);
	free(file);
	free(dir);
}
END_TEST

/* The page walk run at every open (lmdb_verify.h) reaches the dedup
 * database too: its root page zeroed, the store is refused, naming that
 * page (only dedup's database record points to it).
 * (LMDB 0.9 layout, native order: a meta page holds the main database's
 * record at 16 + 24 + 48, its root at +40; a leaf node is lo, hi, flags,
 * ksize (u16 each), the key, then a 48-byte record for a database.) */
START_TEST(test_dedup_page_damaged)
{
	char *dir = tl_strdupf("%s/store", tl_dir), spec[600], err[1024];
	char *file = tl_strdupf("%s/data.mdb", dir), *buf, *node = NULL;
	static const char pat[] = "\005\000dedup";
	struct saker_store_opts o;
	uint64_t t0, t1, root;
	uint32_t psize;
	saker_store *s;
	size_t len, i;
	char *m;
	int fd;

	s = open_store(dir, false);
	ck_assert_int_eq(put_once(s, queue(s, "q", true), "x", "id"), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);

	ck_assert_ptr_nonnull(buf = tl_read_file(file, &len));
	memcpy(&psize, buf + 40, 4);
	memcpy(&t0, buf + 40 + 2 * 48 + 8, 8);
	memcpy(&t1, buf + psize + 40 + 2 * 48 + 8, 8);
	m = buf + (t1 > t0 ? psize : 0);
	memcpy(&root, m + 40 + 48 + 40, 8);	/* the main database's root */
	ck_assert_uint_lt((root + 1) * psize, len);
	for (i = 0; i + sizeof(pat) - 1 <= psize && node == NULL; i++)
		if (memcmp(buf + root * psize + i, pat, sizeof(pat) - 1) == 0)
			node = buf + root * psize + i + 2;
	ck_assert_ptr_nonnull(node);
	memcpy(&root, node + 5 + 40, 8);	/* dedup's root */
	ck_assert_uint_lt((root + 1) * psize, len);
	fd = open(file, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "\0\0\0\0\0\0\0\0", 8,
	    (off_t)(root * psize)), 8);
	close(fd);

	memset(&o, 0, sizeof(o));
	o.read_only = true;
	snprintf(spec, sizeof(spec), "lmdb:%s", dir);
	s = NULL;
	ck_assert_int_eq(saker_store_open(spec, &o, &s, err, sizeof(err)),
	    SAKER_ECORRUPT);
	snprintf(spec, sizeof(spec), "page %llu says it is page 0",
	    (unsigned long long)root);
	ck_assert_msg(strstr(err, spec) != NULL, "%s", err);
	free(buf);
	free(file);
	free(dir);
}
END_TEST

/* A queue deleted and made again in one batch reuses the driver's
 * struct: the layer's id count must start again with it (found by
 * fuzz_store), as with a driver that frees the handle. */
START_TEST(test_delete_reopen)
{
	char *dir = tl_strdupf("%s/store", tl_dir);
	struct saker_queue_stats st;
	saker_store *s = open_store(dir, false);
	saker_queue *q = queue(s, "q", true);

	ck_assert_int_eq(put_once(s, q, "a", "id-a"), SAKER_OK);
	ck_assert_int_eq(put_once(s, q, "a", "id-a"), SAKER_EEXIST);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	ck_assert_int_eq(saker_store_queue_delete(s, q), SAKER_OK);
	q = queue(s, "q", true);
	ck_assert_int_eq(saker_store_queue_stats(s, q, &st), SAKER_OK);
	ck_assert_uint_eq(st.dedup_ids, 0);
	ck_assert_uint_eq(st.dedup_hits, 0);
	ck_assert_int_eq(put_once(s, q, "a", "id-a"), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	ck_assert_int_eq(saker_store_queue_stats(s, q, &st), SAKER_OK);
	ck_assert_uint_eq(st.dedup_ids, 1);
	expect_ids(s, q, 1, "id-a", BASE + WINDOW);
	saker_store_close(s);
	free(dir);
}
END_TEST

/* Attributes past SAKER_ATTRS_MAX are refused, not cut. */
START_TEST(test_attrs_bound)
{
	char *dir = tl_strdupf("%s/store", tl_dir);
	saker_store *s = open_store(dir, false);
	struct saker_item it = { .data = "b", .len = 1, .attrs = big,
	    .attrs_len = SAKER_ATTRS_MAX + 1 };

	ck_assert_int_eq(saker_store_put(s, queue(s, "q", true), &it, BASE),
	    SAKER_EINVAL);
	ck_assert_msg(strstr(saker_store_errmsg(s), "attributes") != NULL,
	    "%s", saker_store_errmsg(s));
	saker_store_close(s);
	free(dir);
}
END_TEST

int
main(void)
{
	Suite *su = suite_create("lmdb_dedup");
	TCase *tc = tcase_create("lmdb");
	SRunner *sr;
	int nf;

	tcase_add_checked_fixture(tc, tl_dir_setup, tl_dir_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_crash_replay);
	tcase_add_test(tc, test_upgrade_1_0_0);
	tcase_add_test(tc, test_damage);
	tcase_add_test(tc, test_dedup_page_damaged);
	tcase_add_test(tc, test_delete_reopen);
	tcase_add_test(tc, test_attrs_bound);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
