/* store_conformance.c -- store interface tests run unchanged against every driver. */
#include "config.h"

#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "saker/store.h"
#include "store_conformance.h"

/* A fixed clock: tests pass times explicitly so expiry and delays are exact. */
#define BASE ((int64_t)1700000000000LL)

#define MAX_SLOTS 8
#define MAX_NOTES 256

/* What a take/iterate callback saw, copied out of the driver's view. */
struct got {
	uint64_t id;
	uint32_t flags;
	int64_t expires_ms;
	int64_t due_ms;
	int64_t created_ms;
	uint32_t deliveries;
	saker_item_state state;
	size_t len;
	unsigned char *data;
	size_t attrs_len;
	unsigned char attrs[SAKER_ATTRS_MAX];
};

struct note {
	saker_queue *q;
	void *ctx;
};

/*
 * The fixture.  Check fixtures take no argument, so the driver under test
 * reaches the shared setup through one small setup function per slot.
 */
static struct {
	const struct saker_store_driver *drv;
	int (*damage)(const char *, const char *, size_t);
	void (*fail_sync)(bool);
	char dir[64];
	char spec[256];
	struct saker_store_opts opts;
	saker_store *s;
	struct got got;     /* last item handed to take_cb */
	int calls;          /* take_cb invocations */
	struct note notes[MAX_NOTES];
	int nnotes;
} T;

static const struct saker_store_driver *slots[MAX_SLOTS];
static struct store_conformance_opts slot_opts[MAX_SLOTS];
static int nslots;

/* ------------------------------------------------------------------ */
/* fixture */

static void
on_notify(void *arg, saker_queue *q, void *ctx)
{
	/* plain checks on hot paths: every Check assertion does I/O */
	if (arg != &T)
		ck_abort_msg("notify_arg not passed back");
	if (T.nnotes < MAX_NOTES) {
		T.notes[T.nnotes].q = q;
		T.notes[T.nnotes].ctx = ctx;
	}
	T.nnotes++;
}

static void
open_store(void)
{
	char err[256] = "";
	int rc;

	rc = saker_store_open(T.spec, &T.opts, &T.s, err, sizeof(err));
	ck_assert_msg(rc == SAKER_OK, "open %s: %d (%s)", T.spec, rc, err);
	ck_assert_ptr_nonnull(T.s);
}

static void
fixture_setup(const struct saker_store_driver *drv,
    const struct store_conformance_opts *o)
{
	memset(&T, 0, sizeof(T));
	T.drv = drv;
	T.damage = o->damage;
	T.fail_sync = o->fail_sync;
	snprintf(T.dir, sizeof(T.dir), "/tmp/saker-conf-XXXXXX");
	ck_assert_msg(mkdtemp(T.dir) != NULL, "mkdtemp failed");
	if (o->spec != NULL)
		o->spec(T.spec, sizeof(T.spec), T.dir);
	else if (drv->location_help == NULL)
		snprintf(T.spec, sizeof(T.spec), "%s", drv->name);
	else
		snprintf(T.spec, sizeof(T.spec), "%s:%s/store", drv->name, T.dir);
	T.opts.sync = SAKER_SYNC_NEVER;
	T.opts.create = true;
	T.opts.notify = on_notify;
	T.opts.notify_arg = &T;
	open_store();
}

static int
rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(path);
}

static void
fixture_teardown(void)
{
	if (T.fail_sync != NULL)
		T.fail_sync(false);
	if (T.s != NULL)
		saker_store_close(T.s);
	T.s = NULL;
	free(T.got.data);
	T.got.data = NULL;
	if (T.dir[0] != '\0')
		nftw(T.dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#define SLOT_SETUP(n) static void setup_##n(void) { fixture_setup(slots[n], &slot_opts[n]); }
SLOT_SETUP(0)
SLOT_SETUP(1)
SLOT_SETUP(2)
SLOT_SETUP(3)
SLOT_SETUP(4)
SLOT_SETUP(5)
SLOT_SETUP(6)
SLOT_SETUP(7)

static void (*const slot_setups[MAX_SLOTS])(void) = {
	setup_0, setup_1, setup_2, setup_3, setup_4, setup_5, setup_6, setup_7
};

/* ------------------------------------------------------------------ */
/* helpers: every store call goes through the vtable */

/*
 * Helpers that assert take the caller's line (through the macros below),
 * so a failure points at the test step, not at the helper.
 */
static saker_queue *
qopen_at(int line, const char *name, void *ctx)
{
	saker_queue *q = NULL;
	int rc;

	rc = saker_store_queue_open(T.s, name, strlen(name), true, ctx, &q);
	ck_assert_msg(rc == SAKER_OK && q != NULL,
	    "line %d: queue_open %s: %d", line, name, rc);
	return q;
}
#define qopen_ctx(name, ctx) qopen_at(__LINE__, (name), (ctx))
#define qopen(name) qopen_at(__LINE__, (name), NULL)

static int
put_full(saker_queue *q, const void *data, size_t len, uint32_t flags,
    int64_t expires_ms, int64_t due_ms, int64_t created_ms, int64_t now)
{
	struct saker_item it;

	memset(&it, 0, sizeof(it));
	it.flags = flags;
	it.expires_ms = expires_ms;
	it.due_ms = due_ms;
	it.created_ms = created_ms;
	it.len = len;
	it.data = data;
	return saker_store_put(T.s, q, &it, now);
}

/* Put a string item; must succeed. */
static void
put_s_at(int line, saker_queue *q, const char *str, int64_t expires_ms,
    int64_t due_ms, int64_t now)
{
	int rc = put_full(q, str, strlen(str), 0, expires_ms, due_ms, 0, now);

	ck_assert_msg(rc == SAKER_OK, "line %d: put %s: %d (%s)", line, str, rc,
	    saker_store_errmsg(T.s));
}
#define put_s(...) put_s_at(__LINE__, __VA_ARGS__)

static void
got_copy(struct got *g, const struct saker_item *item)
{
	free(g->data);
	g->id = item->id;
	g->flags = item->flags;
	g->expires_ms = item->expires_ms;
	g->due_ms = item->due_ms;
	g->created_ms = item->created_ms;
	g->deliveries = item->deliveries;
	g->state = item->state;
	g->len = item->len;
	g->data = malloc(item->len + 1);
	if (g->data == NULL)
		ck_abort_msg("out of memory");
	if (item->len > 0)
		memcpy(g->data, item->data, item->len);
	g->data[item->len] = '\0';
	if (item->attrs_len > SAKER_ATTRS_MAX)
		ck_abort_msg("attrs_len %zu over SAKER_ATTRS_MAX", item->attrs_len);
	g->attrs_len = item->attrs_len;
	if (item->attrs_len > 0)
		memcpy(g->attrs, item->attrs, item->attrs_len);
}

static int
take_cb(void *arg, const struct saker_item *item)
{
	if (arg != &T)
		ck_abort_msg("take arg not passed back");
	T.calls++;
	got_copy(&T.got, item);
	return 0;
}

static int
take(saker_queue *q, int mode, int64_t now)
{
	return saker_store_take(T.s, q, mode, now, take_cb, &T);
}

/* Take in `mode` and expect the string item `want`; returns its id. */
static uint64_t
take_s_at(int line, saker_queue *q, int mode, int64_t now, const char *want)
{
	int rc = take(q, mode, now);

	ck_assert_msg(rc == SAKER_OK, "line %d: take (want %s): %d", line, want,
	    rc);
	ck_assert_msg(T.got.len == strlen(want) &&
	    memcmp(T.got.data, want, T.got.len) == 0,
	    "line %d: take: got \"%s\" (len %zu), want \"%s\"", line,
	    (char *)T.got.data, T.got.len, want);
	return T.got.id;
}
#define take_s(...) take_s_at(__LINE__, __VA_ARGS__)

static void
take_empty_at(int line, saker_queue *q, int mode, int64_t now)
{
	int before = T.calls;
	int rc = take(q, mode, now);

	ck_assert_msg(rc == SAKER_EEMPTY, "line %d: take: %d (%s), want EEMPTY",
	    line, rc, rc == SAKER_OK ? (char *)T.got.data : "");
	ck_assert_msg(T.calls == before, "line %d: callback called on EEMPTY",
	    line);
}
#define take_empty(...) take_empty_at(__LINE__, __VA_ARGS__)

static struct saker_queue_stats
qstats_at(int line, saker_queue *q)
{
	struct saker_queue_stats st;
	int rc;

	memset(&st, 0xa5, sizeof(st));
	rc = saker_store_queue_stats(T.s, q, &st);
	ck_assert_msg(rc == SAKER_OK, "line %d: queue_stats: %d", line, rc);
	return st;
}
#define qstats(q) qstats_at(__LINE__, (q))

static int64_t
promote_at(int line, int64_t now)
{
	int64_t next = -1;
	int rc = saker_store_promote(T.s, now, &next);

	ck_assert_msg(rc == SAKER_OK && next >= 0,
	    "line %d: promote: %d, next_due %" PRId64, line, rc, next);
	return next;
}
#define promote(now) promote_at(__LINE__, (now))

static void
commit_at(int line)
{
	int rc = saker_store_commit(T.s);

	ck_assert_msg(rc == SAKER_OK, "line %d: commit: %d (%s)", line, rc,
	    saker_store_errmsg(T.s));
}
#define commit() commit_at(__LINE__)

static void
reopen(void)
{
	saker_store_close(T.s);
	T.s = NULL;
	open_store();
}

static int
count_notes(saker_queue *q)
{
	int i, n = 0;

	for (i = 0; i < T.nnotes && i < MAX_NOTES; i++)
		if (T.notes[i].q == q)
			n++;
	return n;
}

/* Collects iterate() output. */
struct itlog {
	struct got items[16];
	int n;
	int stop_at;  /* return non-zero at this call (1-based); 0 = never */
};

static int
iter_cb(void *arg, const struct saker_item *item)
{
	struct itlog *l = arg;

	ck_assert_int_lt(l->n, 16);
	memset(&l->items[l->n], 0, sizeof(l->items[l->n]));
	got_copy(&l->items[l->n], item);
	l->n++;
	if (l->stop_at != 0 && l->n == l->stop_at)
		return 42;
	return 0;
}

static void
itlog_free(struct itlog *l)
{
	int i;

	for (i = 0; i < l->n; i++)
		free(l->items[i].data);
	l->n = 0;
}

/* Collects queues() output. */
struct qlist {
	char names[8][32];
	int n;
	int stop_at;
};

static int
qlist_cb(void *arg, const char *name, size_t len)
{
	struct qlist *l = arg;

	ck_assert_uint_lt(len, 32);
	if (l->n < 8) {
		memcpy(l->names[l->n], name, len);
		l->names[l->n][len] = '\0';
	}
	l->n++;
	if (l->stop_at != 0 && l->n == l->stop_at)
		return 1;
	return 0;
}

static bool
qlist_has(const struct qlist *l, const char *name)
{
	int i;

	for (i = 0; i < l->n && i < 8; i++)
		if (strcmp(l->names[i], name) == 0)
			return true;
	return false;
}

static int
count_cb(void *arg, const char *name, size_t len)
{
	(void)name;
	(void)len;
	(*(int *)arg)++;
	return 0;
}

/* ------------------------------------------------------------------ */
/* basic FIFO and item fields */

START_TEST(test_fifo_order)
{
	saker_queue *q = qopen("fifo");
	char buf[32];
	int i;

	for (i = 0; i < 10; i++) {
		snprintf(buf, sizeof(buf), "item-%d", i);
		put_s(q, buf, 0, 0, BASE + i);
	}
	commit();
	for (i = 0; i < 10; i++) {
		snprintf(buf, sizeof(buf), "item-%d", i);
		take_s(q, SAKER_TAKE_REMOVE, BASE + 100, buf);
	}
	take_empty(q, SAKER_TAKE_REMOVE, BASE + 100);
	commit();
}
END_TEST

START_TEST(test_roundtrip_fields)
{
	saker_queue *q = qopen("fields");
	static const unsigned char bin[] = { 0, 1, 0, 'a', 0xff, 0, '\r', '\n', 0 };
	const size_t big = 1024 * 1024;
	unsigned char *data;
	size_t i;

	data = malloc(big);
	ck_assert_ptr_nonnull(data);
	for (i = 0; i < big; i++)
		data[i] = (unsigned char)((i * 131 + 7) ^ (i >> 9));

	ck_assert_int_eq(put_full(q, bin, sizeof(bin), 0xffffffffu,
	    BASE + 86400000, 0, BASE - 5000, BASE), SAKER_OK);
	ck_assert_int_eq(put_full(q, "", 0, 7, 0, 0, 0, BASE + 1), SAKER_OK);
	ck_assert_int_eq(put_full(q, data, big, 0x80000001u, 0, 0, BASE - 1,
	    BASE + 2), SAKER_OK);
	commit();

	ck_assert_int_eq(take(q, SAKER_TAKE_REMOVE, BASE + 10), SAKER_OK);
	ck_assert_uint_eq(T.got.flags, 0xffffffffu);
	ck_assert_int_eq(T.got.expires_ms, BASE + 86400000);
	ck_assert_int_eq(T.got.created_ms, BASE - 5000);
	ck_assert_uint_eq(T.got.len, sizeof(bin));
	ck_assert_mem_eq(T.got.data, bin, sizeof(bin));

	/* created_ms 0 means "now" at put time */
	ck_assert_int_eq(take(q, SAKER_TAKE_REMOVE, BASE + 10), SAKER_OK);
	ck_assert_uint_eq(T.got.flags, 7);
	ck_assert_int_eq(T.got.expires_ms, 0);
	ck_assert_int_eq(T.got.created_ms, BASE + 1);
	ck_assert_uint_eq(T.got.len, 0);

	ck_assert_int_eq(take(q, SAKER_TAKE_REMOVE, BASE + 10), SAKER_OK);
	ck_assert_uint_eq(T.got.flags, 0x80000001u);
	ck_assert_int_eq(T.got.created_ms, BASE - 1);
	ck_assert_uint_eq(T.got.len, big);
	ck_assert_msg(memcmp(T.got.data, data, big) == 0, "1 MiB data differs");
	take_empty(q, SAKER_TAKE_REMOVE, BASE + 10);
	free(data);
	commit();
}
END_TEST

START_TEST(test_peek)
{
	saker_queue *q = qopen("peek");
	struct saker_queue_stats st;
	uint64_t id1, id2;

	put_s(q, "first", 0, 0, BASE);
	put_s(q, "second", 0, 0, BASE);
	id1 = take_s(q, SAKER_TAKE_PEEK, BASE, "first");
	id2 = take_s(q, SAKER_TAKE_PEEK, BASE, "first");
	ck_assert_uint_eq(id1, id2);
	st = qstats(q);
	ck_assert_uint_eq(st.items, 2);
	ck_assert_uint_eq(st.open_items, 0);
	take_s(q, SAKER_TAKE_REMOVE, BASE, "first");
	take_s(q, SAKER_TAKE_PEEK, BASE, "second");
	take_s(q, SAKER_TAKE_REMOVE, BASE, "second");
	take_empty(q, SAKER_TAKE_PEEK, BASE);
}
END_TEST

START_TEST(test_take_empty)
{
	saker_queue *q = qopen("empty");

	take_empty(q, SAKER_TAKE_REMOVE, BASE);
	take_empty(q, SAKER_TAKE_OPEN, BASE);
	take_empty(q, SAKER_TAKE_PEEK, BASE);
	put_s(q, "x", 0, 0, BASE);
	take_s(q, SAKER_TAKE_REMOVE, BASE, "x");
	take_empty(q, SAKER_TAKE_REMOVE, BASE);
	take_empty(q, SAKER_TAKE_OPEN, BASE);
	take_empty(q, SAKER_TAKE_PEEK, BASE);
	ck_assert_int_eq(T.calls, 1);
}
END_TEST

/* ------------------------------------------------------------------ */
/* expiry */

START_TEST(test_expiry)
{
	saker_queue *q = qopen("exp");
	struct saker_queue_stats st;

	put_s(q, "short", BASE + 100, 0, BASE);
	put_s(q, "never", 0, 0, BASE);
	put_s(q, "long", BASE + 1000, 0, BASE);
	put_s(q, "short2", BASE + 50, 0, BASE);
	commit();

	/* items that have not expired yet are returned */
	take_s(q, SAKER_TAKE_PEEK, BASE + 10, "short");

	/* "short" expired: skipped, removed and counted, by peek too */
	take_s(q, SAKER_TAKE_PEEK, BASE + 500, "never");
	st = qstats(q);
	ck_assert_uint_eq(st.expired_items, 1);
	ck_assert_uint_eq(st.items, 3);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 500, "never");

	/* "long" expired and so did "short2": both dropped */
	take_empty(q, SAKER_TAKE_REMOVE, BASE + 5000);
	st = qstats(q);
	ck_assert_uint_eq(st.expired_items, 3);
	ck_assert_uint_eq(st.items, 0);
	ck_assert_uint_eq(st.bytes, 0);

	/* expires 0 never expires, however late */
	put_s(q, "forever", 0, 0, BASE);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 100LL * 365 * 86400000, "forever");

	/* an open take skips expired items as well */
	put_s(q, "gone", BASE + 1, 0, BASE);
	put_s(q, "kept", 0, 0, BASE);
	take_s(q, SAKER_TAKE_OPEN, BASE + 2, "kept");
	st = qstats(q);
	ck_assert_uint_eq(st.expired_items, 4);
	ck_assert_uint_eq(st.open_items, 1);
	commit();
}
END_TEST

START_TEST(test_flush_expired)
{
	saker_queue *q = qopen("fexp");
	struct saker_queue_stats st;
	uint64_t removed, total;
	char buf[16];
	int i, rounds;

	for (i = 0; i < 8; i++) {
		snprintf(buf, sizeof(buf), "i%d", i);
		put_s(q, buf, i % 2 == 0 ? BASE + 100 : 0, 0, BASE);
	}
	removed = 99;
	ck_assert_int_eq(saker_store_flush_expired(T.s, q, BASE + 50, 0, &removed),
	    SAKER_OK);
	ck_assert_uint_eq(removed, 0);
	ck_assert_int_eq(saker_store_flush_expired(T.s, q, BASE + 200, 0, &removed),
	    SAKER_OK);
	ck_assert_uint_eq(removed, 4);
	st = qstats(q);
	ck_assert_uint_eq(st.items, 4);
	ck_assert_uint_eq(st.expired_items, 4);
	ck_assert_uint_eq(st.bytes, 8);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 200, "i1");
	take_s(q, SAKER_TAKE_REMOVE, BASE + 200, "i3");
	take_s(q, SAKER_TAKE_REMOVE, BASE + 200, "i5");
	take_s(q, SAKER_TAKE_REMOVE, BASE + 200, "i7");

	/* a limit bounds each call, repeated calls finish the job */
	for (i = 0; i < 10; i++)
		put_s(q, "e", BASE + 300, 0, BASE);
	total = 0;
	for (rounds = 0; rounds < 100 && total < 10; rounds++) {
		ck_assert_int_eq(saker_store_flush_expired(T.s, q, BASE + 400, 3,
		    &removed), SAKER_OK);
		ck_assert_uint_le(removed, 3);
		total += removed;
	}
	ck_assert_uint_eq(total, 10);
	st = qstats(q);
	ck_assert_uint_eq(st.items, 0);
	ck_assert_uint_eq(st.expired_items, 14);
	take_empty(q, SAKER_TAKE_REMOVE, BASE + 400);

	/* the limit counts items looked at, not removed: expired items
	 * behind `limit` live ones are left for a later call */
	for (i = 0; i < 5; i++)
		put_s(q, "live", 0, 0, BASE);
	for (i = 0; i < 3; i++)
		put_s(q, "old", BASE + 450, 0, BASE);
	ck_assert_int_eq(saker_store_flush_expired(T.s, q, BASE + 500, 5, &removed),
	    SAKER_OK);
	ck_assert_uint_eq(removed, 0);
	ck_assert_int_eq(saker_store_flush_expired(T.s, q, BASE + 500, 0, &removed),
	    SAKER_OK);
	ck_assert_uint_eq(removed, 3);
	ck_assert_uint_eq(qstats(q).items, 5);
	commit();
}
END_TEST

/* ------------------------------------------------------------------ */
/* open items */

START_TEST(test_open_confirm)
{
	saker_queue *q = qopen("oc");
	saker_queue *other;
	struct saker_queue_stats st;
	uint64_t ida, idb;

	put_s(q, "A", 0, 0, BASE);
	put_s(q, "BB", 0, 0, BASE);
	put_s(q, "CCC", 0, 0, BASE);
	ida = take_s(q, SAKER_TAKE_OPEN, BASE, "A");
	st = qstats(q);
	ck_assert_uint_eq(st.open_items, 1);
	ck_assert_uint_eq(st.items, 2);
	ck_assert_uint_eq(st.bytes, 5);

	/* an open item is invisible to take */
	idb = take_s(q, SAKER_TAKE_OPEN, BASE, "BB");
	ck_assert_uint_ne(ida, idb);
	st = qstats(q);
	ck_assert_uint_eq(st.open_items, 2);
	ck_assert_uint_eq(st.items, 1);

	ck_assert_int_eq(saker_store_confirm(T.s, q, ida), SAKER_OK);
	ck_assert_int_eq(saker_store_confirm(T.s, q, ida), SAKER_ENOTFOUND);
	ck_assert_int_eq(saker_store_release(T.s, q, ida), SAKER_ENOTFOUND);
	ck_assert_int_eq(saker_store_confirm(T.s, q, idb ^ 0x5a5a5a5a00ULL),
	    SAKER_ENOTFOUND);
	st = qstats(q);
	ck_assert_uint_eq(st.open_items, 1);

	/* a ready item's id is not an open id */
	take_s(q, SAKER_TAKE_PEEK, BASE, "CCC");
	ck_assert_int_eq(saker_store_confirm(T.s, q, T.got.id), SAKER_ENOTFOUND);

	/* an open id belongs to its queue only */
	other = qopen("oc-other");
	ck_assert_int_eq(saker_store_confirm(T.s, other, idb), SAKER_ENOTFOUND);
	ck_assert_int_eq(saker_store_release(T.s, other, idb), SAKER_ENOTFOUND);
	ck_assert_uint_eq(qstats(q).open_items, 1);
	take_empty(other, SAKER_TAKE_REMOVE, BASE);

	ck_assert_int_eq(saker_store_confirm(T.s, q, idb), SAKER_OK);
	take_s(q, SAKER_TAKE_REMOVE, BASE, "CCC");
	take_empty(q, SAKER_TAKE_REMOVE, BASE);
	st = qstats(q);
	ck_assert_uint_eq(st.open_items, 0);
	ck_assert_uint_eq(st.items, 0);
	ck_assert_uint_eq(st.total_items, 3);
	commit();
}
END_TEST

START_TEST(test_release)
{
	saker_queue *q = qopen("rel");
	struct saker_queue_stats st;
	uint64_t ida, idb, idc;

	ck_assert_int_eq(put_full(q, "A", 1, 42, BASE + 100000, 0, BASE - 7,
	    BASE), SAKER_OK);
	put_s(q, "B", 0, 0, BASE);
	put_s(q, "C", 0, 0, BASE);
	put_s(q, "D", 0, 0, BASE);

	/* release puts one item back at the head, intact */
	ida = take_s(q, SAKER_TAKE_OPEN, BASE, "A");
	ck_assert_int_eq(saker_store_release(T.s, q, ida), SAKER_OK);
	st = qstats(q);
	ck_assert_uint_eq(st.open_items, 0);
	ck_assert_uint_eq(st.items, 4);
	ck_assert_int_eq(st.head_created_ms, BASE - 7);
	take_s(q, SAKER_TAKE_PEEK, BASE, "A");
	ck_assert_uint_eq(T.got.flags, 42);
	ck_assert_int_eq(T.got.expires_ms, BASE + 100000);
	ck_assert_int_eq(T.got.created_ms, BASE - 7);

	/* releasing newest first restores the original order */
	ida = take_s(q, SAKER_TAKE_OPEN, BASE, "A");
	idb = take_s(q, SAKER_TAKE_OPEN, BASE, "B");
	idc = take_s(q, SAKER_TAKE_OPEN, BASE, "C");
	ck_assert_int_eq(saker_store_release(T.s, q, idc), SAKER_OK);
	ck_assert_int_eq(saker_store_release(T.s, q, idb), SAKER_OK);
	ck_assert_int_eq(saker_store_release(T.s, q, ida), SAKER_OK);
	ck_assert_int_eq(saker_store_release(T.s, q, ida), SAKER_ENOTFOUND);
	commit();
	take_s(q, SAKER_TAKE_REMOVE, BASE, "A");
	take_s(q, SAKER_TAKE_REMOVE, BASE, "B");
	take_s(q, SAKER_TAKE_REMOVE, BASE, "C");
	take_s(q, SAKER_TAKE_REMOVE, BASE, "D");
	take_empty(q, SAKER_TAKE_REMOVE, BASE);

	/* a released item goes before items put while it was open */
	put_s(q, "E", 0, 0, BASE);
	ida = take_s(q, SAKER_TAKE_OPEN, BASE, "E");
	put_s(q, "F", 0, 0, BASE);
	ck_assert_int_eq(saker_store_release(T.s, q, ida), SAKER_OK);
	take_s(q, SAKER_TAKE_REMOVE, BASE, "E");
	take_s(q, SAKER_TAKE_REMOVE, BASE, "F");
	st = qstats(q);
	ck_assert_uint_eq(st.total_items, 6);
	commit();
}
END_TEST

/* ------------------------------------------------------------------ */
/* delayed items */

START_TEST(test_delayed_basic)
{
	saker_queue *q = qopen("delay");
	struct saker_queue_stats st;

	put_s(q, "later", 0, BASE + 1000, BASE);
	/* due_ms <= now at put time: ready at once */
	put_s(q, "now", 0, BASE, BASE);
	put_s(q, "past", 0, BASE - 10, BASE);
	take_s(q, SAKER_TAKE_REMOVE, BASE, "now");
	take_s(q, SAKER_TAKE_REMOVE, BASE, "past");
	take_empty(q, SAKER_TAKE_REMOVE, BASE);
	take_empty(q, SAKER_TAKE_PEEK, BASE);
	take_empty(q, SAKER_TAKE_OPEN, BASE);
	st = qstats(q);
	ck_assert_uint_eq(st.delayed_items, 1);
	ck_assert_uint_eq(st.items, 0);
	ck_assert_uint_eq(st.bytes, 0);
	ck_assert_uint_eq(st.total_items, 3);
	ck_assert_int_eq(st.head_created_ms, 0);
	commit();

	ck_assert_int_eq(promote(BASE + 999), BASE + 1000);
	take_empty(q, SAKER_TAKE_REMOVE, BASE + 999);
	/* due exactly now is promoted */
	ck_assert_int_eq(promote(BASE + 1000), 0);
	st = qstats(q);
	ck_assert_uint_eq(st.delayed_items, 0);
	ck_assert_uint_eq(st.items, 1);
	ck_assert_uint_eq(st.bytes, 5);
	ck_assert_int_eq(st.head_created_ms, BASE);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 1000, "later");
	ck_assert_int_eq(promote(BASE + 2000), 0);
	commit();
}
END_TEST

START_TEST(test_delayed_order)
{
	saker_queue *q = qopen("dorder");
	saker_queue *q2 = qopen("dorder2");

	put_s(q, "d1-300", 0, BASE + 300, BASE);
	put_s(q, "d2-100", 0, BASE + 100, BASE + 1);
	put_s(q, "d3-300", 0, BASE + 300, BASE + 2);
	put_s(q, "d4-200", 0, BASE + 200, BASE + 3);
	put_s(q, "d5-5000", 0, BASE + 5000, BASE + 4);
	put_s(q2, "x-700", 0, BASE + 700, BASE + 5);
	put_s(q2, "x-50", 0, BASE + 50, BASE + 6);
	put_s(q, "ready", 0, 0, BASE + 7);
	commit();

	/* the earliest due time across all queues */
	ck_assert_int_eq(promote(BASE + 10), BASE + 50);
	ck_assert_int_eq(promote(BASE + 50), BASE + 100);
	take_s(q2, SAKER_TAKE_REMOVE, BASE + 50, "x-50");
	take_empty(q2, SAKER_TAKE_REMOVE, BASE + 50);

	ck_assert_int_eq(promote(BASE + 300), BASE + 700);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 300, "ready");
	take_s(q, SAKER_TAKE_REMOVE, BASE + 300, "d2-100");
	take_s(q, SAKER_TAKE_REMOVE, BASE + 300, "d4-200");
	take_s(q, SAKER_TAKE_REMOVE, BASE + 300, "d1-300");
	take_s(q, SAKER_TAKE_REMOVE, BASE + 300, "d3-300");
	take_empty(q, SAKER_TAKE_REMOVE, BASE + 300);

	/* a new earlier item changes next_due */
	put_s(q, "d6-400", 0, BASE + 400, BASE + 300);
	ck_assert_int_eq(promote(BASE + 301), BASE + 400);
	ck_assert_int_eq(promote(BASE + 400), BASE + 700);
	ck_assert_int_eq(promote(BASE + 4999), BASE + 5000);
	take_s(q2, SAKER_TAKE_REMOVE, BASE + 4999, "x-700");
	take_s(q, SAKER_TAKE_REMOVE, BASE + 4999, "d6-400");
	take_empty(q, SAKER_TAKE_REMOVE, BASE + 4999);
	ck_assert_int_eq(promote(BASE + 6000), 0);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 6000, "d5-5000");
	commit();
}
END_TEST

START_TEST(test_delayed_expired)
{
	saker_queue *q = qopen("dexp");
	saker_queue *q2 = qopen_ctx("dexp2", &T.dir);
	struct saker_queue_stats st;

	put_s(q, "dies", BASE + 500, BASE + 1000, BASE);
	put_s(q2, "lives", BASE + 5000, BASE + 1000, BASE);
	st = qstats(q);
	ck_assert_uint_eq(st.delayed_items, 1);
	T.nnotes = 0;
	ck_assert_int_eq(promote(BASE + 1000), 0);
	st = qstats(q);
	ck_assert_uint_eq(st.delayed_items, 0);
	ck_assert_uint_eq(st.items, 0);
	ck_assert_uint_eq(st.expired_items, 1);
	/* the queue whose only item was dropped gained nothing: no notification */
	ck_assert_int_eq(count_notes(q), 0);
	ck_assert_int_eq(count_notes(q2), 1);
	take_empty(q, SAKER_TAKE_REMOVE, BASE + 1000);
	take_s(q2, SAKER_TAKE_REMOVE, BASE + 1000, "lives");
	commit();
}
END_TEST

/* ------------------------------------------------------------------ */
/* notifications */

START_TEST(test_notify)
{
	int c1, c2, c3;
	saker_queue *q1 = qopen_ctx("n1", &c1);
	saker_queue *q2 = qopen_ctx("n2", &c2);
	saker_queue *q3 = qopen_ctx("n3", &c3);
	uint64_t id;

	/* ready put notifies, with the queue's ctx */
	T.nnotes = 0;
	put_s(q1, "a", 0, 0, BASE);
	ck_assert_int_eq(T.nnotes, 1);
	ck_assert_ptr_eq(T.notes[0].q, q1);
	ck_assert_ptr_eq(T.notes[0].ctx, &c1);

	/* delayed put, take, confirm, stats do not */
	T.nnotes = 0;
	put_s(q1, "d", 0, BASE + 100, BASE);
	take_s(q1, SAKER_TAKE_PEEK, BASE, "a");
	id = take_s(q1, SAKER_TAKE_OPEN, BASE, "a");
	(void)qstats(q1);
	commit();
	ck_assert_int_eq(T.nnotes, 0);

	/* release notifies */
	ck_assert_int_eq(saker_store_release(T.s, q1, id), SAKER_OK);
	ck_assert_int_eq(T.nnotes, 1);
	ck_assert_ptr_eq(T.notes[0].q, q1);
	ck_assert_ptr_eq(T.notes[0].ctx, &c1);
	id = take_s(q1, SAKER_TAKE_OPEN, BASE, "a");
	T.nnotes = 0;
	ck_assert_int_eq(saker_store_confirm(T.s, q1, id), SAKER_OK);
	ck_assert_int_eq(T.nnotes, 0);

	/* promotion: once per queue that gained items, per call */
	put_s(q1, "d2", 0, BASE + 100, BASE);
	put_s(q1, "d3", 0, BASE + 50, BASE);
	put_s(q2, "e1", 0, BASE + 60, BASE);
	put_s(q2, "e2", 0, BASE + 70, BASE);
	put_s(q3, "f1", 0, BASE + 1000, BASE);
	ck_assert_int_eq(T.nnotes, 0);
	ck_assert_int_eq(promote(BASE + 10), BASE + 50);
	ck_assert_int_eq(T.nnotes, 0);
	ck_assert_int_eq(promote(BASE + 100), BASE + 1000);
	ck_assert_int_eq(T.nnotes, 2);
	ck_assert_int_eq(count_notes(q1), 1);
	ck_assert_int_eq(count_notes(q2), 1);
	ck_assert_int_eq(count_notes(q3), 0);
	ck_assert_ptr_eq(T.notes[0].ctx, T.notes[0].q == q1 ? (void *)&c1 : (void *)&c2);
	ck_assert_ptr_eq(T.notes[1].ctx, T.notes[1].q == q1 ? (void *)&c1 : (void *)&c2);

	/* re-opening a queue replaces its ctx */
	ck_assert_ptr_eq(qopen_ctx("n3", &c1), q3);
	T.nnotes = 0;
	put_s(q3, "g", 0, 0, BASE);
	ck_assert_int_eq(T.nnotes, 1);
	ck_assert_ptr_eq(T.notes[0].q, q3);
	ck_assert_ptr_eq(T.notes[0].ctx, &c1);
	commit();
}
END_TEST

/* ------------------------------------------------------------------ */
/* queues */

START_TEST(test_queue_open)
{
	saker_queue *q = NULL, *q2 = NULL;
	struct saker_queue_stats st;
	struct qlist l;

	ck_assert_int_eq(saker_store_queue_open(T.s, "nope", 4, false, NULL, &q),
	    SAKER_ENOTFOUND);
	memset(&l, 0, sizeof(l));
	ck_assert_int_eq(saker_store_queues(T.s, qlist_cb, &l), SAKER_OK);
	ck_assert_int_eq(l.n, 0);

	/* names are (pointer, length), not NUL-terminated */
	ck_assert_int_eq(saker_store_queue_open(T.s, "jobsXYZ", 4, true, NULL, &q),
	    SAKER_OK);
	ck_assert_ptr_nonnull(q);
	ck_assert_int_eq(saker_store_queue_open(T.s, "jobs", 4, false, NULL, &q2),
	    SAKER_OK);
	ck_assert_ptr_eq(q, q2);
	ck_assert_int_eq(saker_store_queue_open(T.s, "jobs", 4, true, NULL, &q2),
	    SAKER_OK);
	ck_assert_ptr_eq(q, q2);
	ck_assert_int_eq(saker_store_queue_open(T.s, "job", 3, false, NULL, &q2),
	    SAKER_ENOTFOUND);
	ck_assert_int_eq(saker_store_queue_open(T.s, "jobsX", 5, false, NULL, &q2),
	    SAKER_ENOTFOUND);
	st = qstats(q);
	ck_assert_uint_eq(st.items, 0);
	ck_assert_uint_eq(st.bytes, 0);
	ck_assert_uint_eq(st.delayed_items, 0);
	ck_assert_uint_eq(st.open_items, 0);
	ck_assert_uint_eq(st.total_items, 0);
	ck_assert_uint_eq(st.expired_items, 0);
	ck_assert_int_eq(st.head_created_ms, 0);
	commit();
}
END_TEST

START_TEST(test_queues_list)
{
	static const char *const names[] = { "a", "bb", "jobs+audit", "x.y", "Q" };
	struct qlist l;
	size_t i;

	for (i = 0; i < 5; i++)
		(void)qopen(names[i]);
	(void)qopen("a");
	memset(&l, 0, sizeof(l));
	ck_assert_int_eq(saker_store_queues(T.s, qlist_cb, &l), SAKER_OK);
	ck_assert_int_eq(l.n, 5);
	for (i = 0; i < 5; i++)
		ck_assert_msg(qlist_has(&l, names[i]), "%s not listed", names[i]);

	/* non-zero from the callback stops the listing */
	memset(&l, 0, sizeof(l));
	l.stop_at = 2;
	(void)saker_store_queues(T.s, qlist_cb, &l);
	ck_assert_int_eq(l.n, 2);
	commit();
}
END_TEST

START_TEST(test_queue_delete)
{
	saker_queue *q = qopen("del");
	saker_queue *other = qopen("other");
	struct saker_queue_stats st;
	struct qlist l;

	put_s(q, "ready1", 0, 0, BASE);
	put_s(q, "ready2", 0, 0, BASE);
	put_s(q, "delayed", 0, BASE + 100, BASE);
	put_s(other, "o-delayed", 0, BASE + 200, BASE);
	take_s(q, SAKER_TAKE_OPEN, BASE, "ready1");
	commit();

	ck_assert_int_eq(saker_store_queue_delete(T.s, q), SAKER_OK);
	commit();
	memset(&l, 0, sizeof(l));
	ck_assert_int_eq(saker_store_queues(T.s, qlist_cb, &l), SAKER_OK);
	ck_assert_int_eq(l.n, 1);
	ck_assert(qlist_has(&l, "other"));
	ck_assert_int_eq(saker_store_queue_open(T.s, "del", 3, false, NULL, &q),
	    SAKER_ENOTFOUND);

	/* its delayed item is gone from the store-wide schedule */
	T.nnotes = 0;
	ck_assert_int_eq(promote(BASE + 150), BASE + 200);
	ck_assert_int_eq(T.nnotes, 0);

	/* a queue of the same name starts from nothing */
	q = qopen("del");
	st = qstats(q);
	ck_assert_uint_eq(st.items, 0);
	ck_assert_uint_eq(st.delayed_items, 0);
	ck_assert_uint_eq(st.open_items, 0);
	ck_assert_uint_eq(st.total_items, 0);
	take_empty(q, SAKER_TAKE_REMOVE, BASE + 1000);
	ck_assert_int_eq(promote(BASE + 1000), 0);
	take_empty(q, SAKER_TAKE_REMOVE, BASE + 1000);
	take_s(other, SAKER_TAKE_REMOVE, BASE + 1000, "o-delayed");

	/* deleting an empty queue works too */
	ck_assert_int_eq(saker_store_queue_delete(T.s, q), SAKER_OK);
	ck_assert_int_eq(saker_store_queue_delete(T.s, other), SAKER_OK);
	memset(&l, 0, sizeof(l));
	ck_assert_int_eq(saker_store_queues(T.s, qlist_cb, &l), SAKER_OK);
	ck_assert_int_eq(l.n, 0);
	commit();
}
END_TEST

START_TEST(test_queue_flush)
{
	saker_queue *q = qopen("fl");
	saker_queue *other = qopen("fl-other");
	struct saker_queue_stats st;
	uint64_t id;

	put_s(q, "r1", 0, 0, BASE);
	put_s(q, "r2", BASE + 10, 0, BASE);
	put_s(q, "r3", 0, 0, BASE);
	put_s(q, "d1", 0, BASE + 100, BASE);
	put_s(other, "od", 0, BASE + 300, BASE);
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "r1");
	take_s(q, SAKER_TAKE_PEEK, BASE + 20, "r3");  /* r2 expires */
	commit();

	ck_assert_int_eq(saker_store_queue_flush(T.s, q), SAKER_OK);
	st = qstats(q);
	ck_assert_uint_eq(st.items, 0);
	ck_assert_uint_eq(st.bytes, 0);
	ck_assert_uint_eq(st.delayed_items, 0);
	ck_assert_uint_eq(st.open_items, 0);
	ck_assert_uint_eq(st.total_items, 4);
	ck_assert_uint_eq(st.expired_items, 1);
	ck_assert_int_eq(st.head_created_ms, 0);
	ck_assert_int_eq(saker_store_confirm(T.s, q, id), SAKER_ENOTFOUND);
	ck_assert_int_eq(saker_store_release(T.s, q, id), SAKER_ENOTFOUND);
	take_empty(q, SAKER_TAKE_REMOVE, BASE);
	T.nnotes = 0;
	ck_assert_int_eq(promote(BASE + 200), BASE + 300);
	ck_assert_int_eq(T.nnotes, 0);
	take_empty(q, SAKER_TAKE_REMOVE, BASE + 200);

	/* the queue stays usable */
	put_s(q, "after", 0, 0, BASE + 200);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 200, "after");
	st = qstats(q);
	ck_assert_uint_eq(st.total_items, 5);
	commit();
}
END_TEST

/* ------------------------------------------------------------------ */
/* iterate and stats */

START_TEST(test_iterate)
{
	saker_queue *q = qopen("it");
	struct itlog l;
	int i, rc;
	static const char *const want[] = {
		"o1", "o2", "r1", "r2", "d-100", "d-200a", "d-200b"
	};
	static const saker_item_state wstate[] = {
		SAKER_ITEM_OPEN, SAKER_ITEM_OPEN, SAKER_ITEM_READY, SAKER_ITEM_READY,
		SAKER_ITEM_DELAYED, SAKER_ITEM_DELAYED, SAKER_ITEM_DELAYED
	};

	ck_assert_int_eq(put_full(q, "o1", 2, 11, BASE + 9000, 0, BASE - 1, BASE),
	    SAKER_OK);
	put_s(q, "o2", 0, 0, BASE);
	put_s(q, "d-200a", 0, BASE + 200, BASE);
	put_s(q, "r1", 0, 0, BASE);
	ck_assert_int_eq(put_full(q, "d-100", 5, 13, BASE + 8000, BASE + 100,
	    BASE - 2, BASE), SAKER_OK);
	put_s(q, "r2", 0, 0, BASE);
	put_s(q, "d-200b", 0, BASE + 200, BASE);
	take_s(q, SAKER_TAKE_OPEN, BASE, "o1");
	take_s(q, SAKER_TAKE_OPEN, BASE, "o2");
	commit();

	memset(&l, 0, sizeof(l));
	rc = saker_store_iterate(T.s, q, iter_cb, &l);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(l.n, 7);
	for (i = 0; i < 7; i++) {
		ck_assert_str_eq((char *)l.items[i].data, want[i]);
		ck_assert_int_eq(l.items[i].state, wstate[i]);
	}
	ck_assert_uint_eq(l.items[0].flags, 11);
	ck_assert_int_eq(l.items[0].expires_ms, BASE + 9000);
	ck_assert_int_eq(l.items[0].created_ms, BASE - 1);
	ck_assert_uint_eq(l.items[4].flags, 13);
	ck_assert_int_eq(l.items[4].expires_ms, BASE + 8000);
	ck_assert_int_eq(l.items[4].due_ms, BASE + 100);
	ck_assert_int_eq(l.items[4].created_ms, BASE - 2);
	ck_assert_int_eq(l.items[5].due_ms, BASE + 200);
	ck_assert_int_eq(l.items[6].due_ms, BASE + 200);
	ck_assert_int_eq(l.items[2].created_ms, BASE);
	itlog_free(&l);

	/* non-zero from fn stops and is returned */
	memset(&l, 0, sizeof(l));
	l.stop_at = 3;
	rc = saker_store_iterate(T.s, q, iter_cb, &l);
	ck_assert_int_eq(rc, 42);
	ck_assert_int_eq(l.n, 3);
	itlog_free(&l);

	/* iterate changes nothing */
	take_s(q, SAKER_TAKE_REMOVE, BASE, "r1");
	ck_assert_uint_eq(qstats(q).open_items, 2);
	ck_assert_uint_eq(qstats(q).delayed_items, 3);
	commit();
}
END_TEST

START_TEST(test_stats)
{
	saker_queue *q = qopen("st");
	struct saker_queue_stats st;
	char ten[10], twenty[20], thirty[30];

	memset(ten, 'a', sizeof(ten));
	memset(twenty, 'b', sizeof(twenty));
	memset(thirty, 'c', sizeof(thirty));
	ck_assert_int_eq(put_full(q, ten, 10, 0, 0, 0, BASE - 300, BASE), SAKER_OK);
	ck_assert_int_eq(put_full(q, twenty, 20, 0, 0, 0, BASE - 200, BASE), SAKER_OK);
	ck_assert_int_eq(put_full(q, thirty, 30, 0, 0, 0, 0, BASE + 5), SAKER_OK);
	ck_assert_int_eq(put_full(q, thirty, 30, 0, 0, BASE + 1000, 0, BASE),
	    SAKER_OK);
	st = qstats(q);
	ck_assert_uint_eq(st.items, 3);
	ck_assert_uint_eq(st.bytes, 60);
	ck_assert_uint_eq(st.delayed_items, 1);
	ck_assert_uint_eq(st.open_items, 0);
	ck_assert_uint_eq(st.total_items, 4);
	ck_assert_uint_eq(st.expired_items, 0);
	ck_assert_int_eq(st.head_created_ms, BASE - 300);

	ck_assert_int_eq(take(q, SAKER_TAKE_OPEN, BASE), SAKER_OK);
	st = qstats(q);
	ck_assert_uint_eq(st.items, 2);
	ck_assert_uint_eq(st.bytes, 50);
	ck_assert_uint_eq(st.open_items, 1);
	ck_assert_int_eq(st.head_created_ms, BASE - 200);

	ck_assert_int_eq(take(q, SAKER_TAKE_REMOVE, BASE), SAKER_OK);
	st = qstats(q);
	ck_assert_uint_eq(st.items, 1);
	ck_assert_uint_eq(st.bytes, 30);
	ck_assert_int_eq(st.head_created_ms, BASE + 5);

	ck_assert_int_eq(take(q, SAKER_TAKE_REMOVE, BASE), SAKER_OK);
	st = qstats(q);
	ck_assert_uint_eq(st.items, 0);
	ck_assert_uint_eq(st.bytes, 0);
	ck_assert_int_eq(st.head_created_ms, 0);
	ck_assert_uint_eq(st.total_items, 4);
	ck_assert_uint_eq(st.open_items, 1);
	ck_assert_uint_eq(st.delayed_items, 1);
	commit();
}
END_TEST

START_TEST(test_commit)
{
	saker_queue *q;
	int i;

	commit();
	for (i = 0; i < 1000; i++)
		commit();
	q = qopen("c");
	put_s(q, "x", 0, 0, BASE);
	commit();
	commit();
	take_s(q, SAKER_TAKE_REMOVE, BASE, "x");
	commit();
	ck_assert_ptr_nonnull(saker_store_errmsg(T.s));
}
END_TEST

/* ------------------------------------------------------------------ */
/* scale */

START_TEST(test_many_queues)
{
	enum { NQ = 1000 };
	static saker_queue *qs[NQ];
	char name[32], data[32];
	int i, n = 0;

	for (i = 0; i < NQ; i++) {
		snprintf(name, sizeof(name), "queue-%d", i);
		qs[i] = qopen(name);
		snprintf(data, sizeof(data), "data-%d", i);
		put_s(qs[i], data, 0, 0, BASE);
		if (i % 3 == 0) {
			snprintf(data, sizeof(data), "more-%d", i);
			put_s(qs[i], data, 0, 0, BASE);
		}
	}
	commit();
	ck_assert_int_eq(saker_store_queues(T.s, count_cb, &n), SAKER_OK);
	ck_assert_int_eq(n, NQ);
	for (i = NQ - 1; i >= 0; i--) {
		snprintf(name, sizeof(name), "queue-%d", i);
		ck_assert_ptr_eq(qopen(name), qs[i]);
		ck_assert_uint_eq(qstats(qs[i]).items, i % 3 == 0 ? 2 : 1);
		snprintf(data, sizeof(data), "data-%d", i);
		take_s(qs[i], SAKER_TAKE_REMOVE, BASE, data);
		if (i % 3 == 0) {
			snprintf(data, sizeof(data), "more-%d", i);
			take_s(qs[i], SAKER_TAKE_REMOVE, BASE, data);
		}
		take_empty(qs[i], SAKER_TAKE_REMOVE, BASE);
	}
	commit();
}
END_TEST

START_TEST(test_bulk)
{
	enum { N = 100000 };
	saker_queue *q = qopen("bulk");
	char buf[16];
	int i;

	for (i = 0; i < N; i++) {
		snprintf(buf, sizeof(buf), "%08d", i);
		if (put_full(q, buf, 8, (uint32_t)i, 0, 0, 0, BASE) != SAKER_OK)
			ck_abort_msg("put %d failed", i);
		if (i % 10000 == 9999)
			commit();
	}
	commit();
	ck_assert_uint_eq(qstats(q).items, N);
	ck_assert_uint_eq(qstats(q).bytes, (uint64_t)N * 8);
	for (i = 0; i < N; i++) {
		snprintf(buf, sizeof(buf), "%08d", i);
		if (take(q, SAKER_TAKE_REMOVE, BASE) != SAKER_OK)
			ck_abort_msg("take %d failed: %s", i, saker_store_errmsg(T.s));
		if (T.got.len != 8 || memcmp(T.got.data, buf, 8) != 0 ||
		    T.got.flags != (uint32_t)i)
			ck_abort_msg("item %d out of order: got %s", i,
			    (char *)T.got.data);
		if (i % 10000 == 9999)
			commit();
	}
	take_empty(q, SAKER_TAKE_REMOVE, BASE);
	ck_assert_uint_eq(qstats(q).total_items, N);
	commit();
}
END_TEST

/* ------------------------------------------------------------------ */
/* delivery counts and move */

/* Put a string item with a delivery count (load, migrate). */
static void
put_dlv(saker_queue *q, const char *str, uint32_t deliveries, int64_t due_ms)
{
	struct saker_item it;
	int rc;

	memset(&it, 0, sizeof(it));
	it.data = str;
	it.len = strlen(str);
	it.flags = 77;
	it.due_ms = due_ms;
	it.deliveries = deliveries;
	rc = saker_store_put(T.s, q, &it, BASE);
	ck_assert_msg(rc == SAKER_OK, "put %s: %d (%s)", str, rc,
	    saker_store_errmsg(T.s));
}

/* take(OPEN) counts a delivery and shows it; release keeps it; REMOVE,
 * PEEK and iterate show the stored count; put stores the count given. */
START_TEST(test_deliveries)
{
	saker_queue *q = qopen("dlv");
	struct itlog l;
	uint64_t id;

	memset(&l, 0, sizeof(l));
	put_s(q, "A", 0, 0, BASE);
	put_s(q, "B", 0, 0, BASE);
	take_s(q, SAKER_TAKE_PEEK, BASE, "A");
	ck_assert_uint_eq(T.got.deliveries, 0);
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "A");
	ck_assert_uint_eq(T.got.deliveries, 1);
	ck_assert_int_eq(saker_store_release(T.s, q, id), SAKER_OK);
	take_s(q, SAKER_TAKE_PEEK, BASE, "A");
	ck_assert_uint_eq(T.got.deliveries, 1);
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "A");
	ck_assert_uint_eq(T.got.deliveries, 2);
	/* open items show their count in iterate too */
	ck_assert_int_eq(saker_store_iterate(T.s, q, iter_cb, &l), 0);
	ck_assert_int_eq(l.n, 2);
	ck_assert_uint_eq(l.items[0].deliveries, 2);
	ck_assert_uint_eq(l.items[1].deliveries, 0);
	itlog_free(&l);
	ck_assert_int_eq(saker_store_release(T.s, q, id), SAKER_OK);
	commit();
	/* a plain take does not count: it shows what is stored */
	take_s(q, SAKER_TAKE_REMOVE, BASE, "A");
	ck_assert_uint_eq(T.got.deliveries, 2);
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "B");
	ck_assert_uint_eq(T.got.deliveries, 1);
	ck_assert_int_eq(saker_store_confirm(T.s, q, id), SAKER_OK);
	take_empty(q, SAKER_TAKE_OPEN, BASE);

	/* put keeps a count (ready or delayed), and stops at the maximum */
	put_dlv(q, "C", 7, 0);
	put_dlv(q, "D", 9, BASE + 100);
	put_dlv(q, "E", SAKER_DELIVERIES_MAX, 0);
	take_s(q, SAKER_TAKE_PEEK, BASE, "C");
	ck_assert_uint_eq(T.got.deliveries, 7);
	ck_assert_uint_eq(T.got.flags, 77);
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "C");
	ck_assert_uint_eq(T.got.deliveries, 8);
	ck_assert_int_eq(saker_store_confirm(T.s, q, id), SAKER_OK);
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "E");
	ck_assert_uint_eq(T.got.deliveries, SAKER_DELIVERIES_MAX);
	ck_assert_int_eq(saker_store_confirm(T.s, q, id), SAKER_OK);
	promote(BASE + 100);
	take_s(q, SAKER_TAKE_PEEK, BASE + 100, "D");
	ck_assert_uint_eq(T.got.deliveries, 9);
	commit();
}
END_TEST

/* move(): an open item goes to the tail of another queue with its data,
 * flags, expiry, age and count, in the batch. */
START_TEST(test_move)
{
	saker_queue *q = qopen("mv");
	saker_queue *dq = qopen_ctx("mv_dead", (void *)&T);
	struct saker_queue_stats st;
	uint64_t id, idb;
	int n0;

	ck_assert_int_eq(put_full(q, "A", 1, 5, BASE + 5000, 0, BASE - 7, BASE),
	    SAKER_OK);
	put_s(q, "B", 0, 0, BASE);
	put_s(dq, "Z", 0, 0, BASE);
	commit();
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "A");
	ck_assert_uint_eq(T.got.deliveries, 1);
	n0 = count_notes(dq);
	ck_assert_int_eq(saker_store_move(T.s, q, id, dq), SAKER_OK);
	ck_assert_int_eq(count_notes(dq), n0 + 1);
	/* gone from q for good: not open, not ready */
	ck_assert_int_eq(saker_store_release(T.s, q, id), SAKER_ENOTFOUND);
	ck_assert_int_eq(saker_store_move(T.s, q, id, dq), SAKER_ENOTFOUND);
	ck_assert_int_eq(saker_store_confirm(T.s, q, id), SAKER_ENOTFOUND);
	idb = take_s(q, SAKER_TAKE_OPEN, BASE, "B");
	ck_assert_int_eq(saker_store_move(T.s, q, idb, q), SAKER_EINVAL);
	ck_assert_int_eq(saker_store_release(T.s, q, idb), SAKER_OK);
	commit();
	st = qstats(q);
	ck_assert_uint_eq(st.open_items, 0);
	ck_assert_uint_eq(st.items, 1);
	st = qstats(dq);
	ck_assert_uint_eq(st.items, 2);
	ck_assert_uint_eq(st.bytes, 2);
	ck_assert_uint_eq(st.total_items, 2);
	/* at the tail, everything kept */
	take_s(dq, SAKER_TAKE_REMOVE, BASE, "Z");
	take_s(dq, SAKER_TAKE_REMOVE, BASE, "A");
	ck_assert_uint_eq(T.got.flags, 5);
	ck_assert_int_eq(T.got.expires_ms, BASE + 5000);
	ck_assert_int_eq(T.got.created_ms, BASE - 7);
	ck_assert_uint_eq(T.got.deliveries, 1);
	take_empty(dq, SAKER_TAKE_REMOVE, BASE);
	take_s(q, SAKER_TAKE_REMOVE, BASE, "B");
	commit();
}
END_TEST

static saker_queue *qfind_at(int line, const char *name);

/* expire_to(): expired items go to another queue, expiry cleared, from
 * every place a driver finds them (take, flush_expired, promote). */
START_TEST(test_expire_to)
{
	saker_queue *q = qopen("xq");
	saker_queue *t = qopen_ctx("xq_exp", (void *)&T);
	saker_queue *q2 = qopen("xq2"), *nq;
	struct saker_queue_stats st;
	uint64_t removed = 0;
	int n0;

	ck_assert_int_eq(saker_store_expire_to(T.s, q, "xq_exp", 6), SAKER_OK);
	ck_assert_int_eq(put_full(q, "A", 1, 3, BASE + 10, 0, BASE - 5, BASE),
	    SAKER_OK);
	put_s(q, "B", 0, 0, BASE);
	put_s(q, "E", BASE + 10, 0, BASE);
	put_s(q, "D", BASE + 15, BASE + 20, BASE);
	commit();
	n0 = count_notes(t);
	/* at the head, met by a take */
	take_s(q, SAKER_TAKE_PEEK, BASE + 50, "B");
	st = qstats(q);
	ck_assert_uint_eq(st.expired_to, 1);
	ck_assert_uint_eq(st.expired_items, 0);
	ck_assert_int_gt(count_notes(t), n0);
	/* expired while delayed, met by promote */
	promote(BASE + 50);
	ck_assert_uint_eq(qstats(q).expired_to, 2);
	/* behind a live item, met by the sweep */
	ck_assert_int_eq(saker_store_flush_expired(T.s, q, BASE + 50, 0, &removed),
	    SAKER_OK);
	ck_assert_uint_eq(removed, 1);
	st = qstats(q);
	ck_assert_uint_eq(st.expired_to, 3);
	ck_assert_uint_eq(st.expired_items, 0);
	ck_assert_uint_eq(st.items, 1);
	ck_assert_uint_eq(st.delayed_items, 0);
	commit();
	st = qstats(t);
	ck_assert_uint_eq(st.items, 3);
	ck_assert_uint_eq(st.total_items, 3);
	take_s(t, SAKER_TAKE_REMOVE, BASE + 50, "A");
	ck_assert_int_eq(T.got.expires_ms, 0);
	ck_assert_uint_eq(T.got.flags, 3);
	ck_assert_int_eq(T.got.created_ms, BASE - 5);
	take_s(t, SAKER_TAKE_REMOVE, BASE + 50, "D");
	ck_assert_int_eq(T.got.expires_ms, 0);
	take_s(t, SAKER_TAKE_REMOVE, BASE + 50, "E");
	take_s(q, SAKER_TAKE_REMOVE, BASE + 50, "B");

	/* cleared: dropped again */
	ck_assert_int_eq(saker_store_expire_to(T.s, q, NULL, 0), SAKER_OK);
	put_s(q, "F", BASE + 10, 0, BASE);
	take_empty(q, SAKER_TAKE_REMOVE, BASE + 50);
	ck_assert_uint_eq(qstats(q).expired_items, 1);
	/* a queue that does not exist yet is created */
	ck_assert_int_eq(saker_store_expire_to(T.s, q2, "xq_new", 6), SAKER_OK);
	put_s(q2, "G", BASE + 10, 0, BASE);
	take_empty(q2, SAKER_TAKE_OPEN, BASE + 50);
	commit();
	nq = qfind_at(__LINE__, "xq_new");
	take_s(nq, SAKER_TAKE_REMOVE, BASE + 50, "G");
	/* its own name: dropped */
	ck_assert_int_eq(saker_store_expire_to(T.s, q2, "xq2", 3), SAKER_OK);
	put_s(q2, "H", BASE + 10, 0, BASE);
	take_empty(q2, SAKER_TAKE_OPEN, BASE + 50);
	ck_assert_uint_eq(qstats(q2).expired_items, 1);
	commit();
}
END_TEST

/* ------------------------------------------------------------------ */
/* expire_to with many items at once: every one moves, in order, however
 * many expired together (docs/protocol.md: every expired item moves).  A
 * driver may bound its work per call; what it leaves stays in place for
 * the next call, never dropped.  At most one wake-up of the target per
 * call. */

#define XN 1500	/* more than any driver's per-call batch of moves */

static void
xput_many(saker_queue *q, int n, int64_t expires_ms, int64_t due_ms)
{
	char buf[16];
	int i;

	for (i = 0; i < n; i++) {
		snprintf(buf, sizeof(buf), "x%04d", i);
		if (put_full(q, buf, 5, (uint32_t)i, expires_ms, due_ms, 0,
		    BASE) != SAKER_OK)
			ck_abort_msg("put %s: %s", buf, saker_store_errmsg(T.s));
	}
}

/* Since T.nnotes was zeroed: at most `max` wake-ups, all of queue q. */
static void
notes_only_at(int line, saker_queue *q, int max)
{
	ck_assert_msg(T.nnotes <= max && count_notes(q) == T.nnotes,
	    "line %d: %d wake-ups (%d of the target), want at most %d", line,
	    T.nnotes, count_notes(q), max);
}
#define notes_only(q, max) notes_only_at(__LINE__, (q), (max))

/* The target holds x0000..x(n-1) in order, expiry cleared. */
static void
xcheck_target(saker_queue *t, int n, int64_t now)
{
	char buf[16];
	int i;

	ck_assert_uint_eq(qstats(t).items, (uint64_t)n);
	for (i = 0; i < n; i++) {
		snprintf(buf, sizeof(buf), "x%04d", i);
		if (take(t, SAKER_TAKE_REMOVE, now) != SAKER_OK)
			ck_abort_msg("target: item %d missing: %s", i,
			    saker_store_errmsg(T.s));
		if (T.got.len != 5 || memcmp(T.got.data, buf, 5) != 0 ||
		    T.got.flags != (uint32_t)i || T.got.expires_ms != 0)
			ck_abort_msg("target: item %d: got %s (flags %u,"
			    " expires %" PRId64 ")", i, (char *)T.got.data,
			    T.got.flags, T.got.expires_ms);
		if (i % 500 == 499)
			commit();
	}
	take_empty(t, SAKER_TAKE_REMOVE, now);
}

/* At the head: one take meets them all and moves every one (the layer
 * routes them, saker_store_expired(): no bound per call). */
START_TEST(test_expire_to_many_head)
{
	saker_queue *q = qopen("xmh");
	saker_queue *t = qopen_ctx("xmh_to", (void *)&T);
	struct saker_queue_stats st;

	ck_assert_int_eq(saker_store_expire_to(T.s, q, "xmh_to", 6), SAKER_OK);
	xput_many(q, XN, BASE + 10, 0);
	put_s(q, "live", 0, 0, BASE);
	commit();
	T.nnotes = 0;
	/* the live item behind them is served at once, and the target is
	 * woken once however many the take moved */
	take_s(q, SAKER_TAKE_REMOVE, BASE + 50, "live");
	notes_only(t, 1);
	ck_assert_int_eq(T.nnotes, 1);
	commit();
	st = qstats(q);
	ck_assert_uint_eq(st.items, 0);
	ck_assert_uint_eq(st.expired_to, XN);
	ck_assert_uint_eq(st.expired_items, 0);
	xcheck_target(t, XN, BASE + 50);
	commit();
}
END_TEST

/* In promotion: delayed items that were expired by their due time. */
START_TEST(test_expire_to_many_promote)
{
	saker_queue *q = qopen("xmp");
	saker_queue *t = qopen_ctx("xmp_to", (void *)&T);
	struct saker_queue_stats st;

	ck_assert_int_eq(saker_store_expire_to(T.s, q, "xmp_to", 6), SAKER_OK);
	xput_many(q, XN, BASE + 50, BASE + 100);
	commit();
	ck_assert_uint_eq(qstats(q).delayed_items, XN);
	T.nnotes = 0;
	ck_assert_int_eq(promote(BASE + 200), 0);
	/* once, and q gained nothing */
	notes_only(t, 1);
	ck_assert_int_eq(T.nnotes, 1);
	commit();
	st = qstats(q);
	ck_assert_uint_eq(st.delayed_items, 0);
	ck_assert_uint_eq(st.items, 0);
	ck_assert_uint_eq(st.expired_to, XN);
	ck_assert_uint_eq(st.expired_items, 0);
	xcheck_target(t, XN, BASE + 200);
	commit();
}
END_TEST

/* In the sweep, without a limit (all in one call) and with one (each
 * call looks at most at `limit` items; the sweep comes back). */
START_TEST(test_expire_to_many_sweep)
{
	saker_queue *q = qopen("xms");
	saker_queue *t = qopen_ctx("xms_to", (void *)&T);
	struct saker_queue_stats st;
	uint64_t removed, total = 0;
	int calls = 0;

	ck_assert_int_eq(saker_store_expire_to(T.s, q, "xms_to", 6), SAKER_OK);
	/* a live item first: the sweep, not a take, must find them */
	put_s(q, "live", 0, 0, BASE);
	xput_many(q, XN, BASE + 10, 0);
	commit();
	T.nnotes = 0;
	ck_assert_int_eq(saker_store_flush_expired(T.s, q, BASE + 50, 0, &removed),
	    SAKER_OK);
	ck_assert_uint_eq(removed, XN);
	notes_only(t, 1);
	ck_assert_int_eq(T.nnotes, 1);
	commit();
	st = qstats(q);
	ck_assert_uint_eq(st.items, 1);
	ck_assert_uint_eq(st.expired_to, XN);
	ck_assert_uint_eq(st.expired_items, 0);
	xcheck_target(t, XN, BASE + 50);

	/* with a limit */
	xput_many(q, XN, BASE + 10, 0);
	commit();
	do {
		ck_assert_int_lt(++calls, 100);
		T.nnotes = 0;
		removed = 0;
		ck_assert_int_eq(saker_store_flush_expired(T.s, q, BASE + 50, 400,
		    &removed), SAKER_OK);
		ck_assert_uint_le(removed, 400);
		notes_only(t, 1);
		total += removed;
		commit();
	} while (qstats(q).items > 1);
	ck_assert_uint_eq(total, XN);
	st = qstats(q);
	ck_assert_uint_eq(st.expired_to, 2 * XN);
	ck_assert_uint_eq(st.expired_items, 0);
	xcheck_target(t, XN, BASE + 50);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 50, "live");
	commit();
}
END_TEST

/* ------------------------------------------------------------------ */
/* A failing call inside a batch leaves the rest of it committable
 * (store.h, BATCHES AND DURABILITY). */
START_TEST(test_batch_survives_failure)
{
	saker_queue *q = qopen("bf");
	saker_queue *q2 = qopen("bf2");
	struct saker_item bad;
	uint64_t id;

	put_s(q, "keep", 0, 0, BASE);
	put_s(q, "open", 0, 0, BASE);
	commit();
	put_s(q, "a", 0, 0, BASE);
	take_s(q, SAKER_TAKE_REMOVE, BASE, "keep");
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "open");
	/* calls that fail, in the middle of the batch */
	ck_assert_int_eq(saker_store_confirm(T.s, q, id + 1000), SAKER_ENOTFOUND);
	ck_assert_int_eq(saker_store_release(T.s, q, id + 1000), SAKER_ENOTFOUND);
	ck_assert_int_eq(saker_store_release_delayed(T.s, q, id + 1000, BASE + 500,
	    BASE), SAKER_ENOTFOUND);
	if (T.drv->move != NULL) {
		ck_assert_int_eq(saker_store_move(T.s, q, id + 1000, q2),
		    SAKER_ENOTFOUND);
		ck_assert_int_eq(saker_store_move(T.s, q, id, q), SAKER_EINVAL);
	}
	memset(&bad, 0, sizeof(bad));
	bad.len = 4;	/* and no data */
	ck_assert_int_eq(saker_store_put(T.s, q, &bad, BASE), SAKER_EINVAL);
	/* the batch goes on and commits whole */
	put_s(q, "b", 0, 0, BASE);
	put_s(q2, "c", 0, 0, BASE);
	commit();
	if (T.drv->durable)
		reopen();
	q = qfind_at(__LINE__, "bf");
	q2 = qfind_at(__LINE__, "bf2");
	take_s(q, SAKER_TAKE_REMOVE, BASE, T.drv->durable ? "open" : "a");
	if (T.drv->durable)	/* open items come back at open() */
		take_s(q, SAKER_TAKE_REMOVE, BASE, "a");
	else
		ck_assert_int_eq(saker_store_confirm(T.s, q, id), SAKER_OK);
	take_s(q, SAKER_TAKE_REMOVE, BASE, "b");
	take_empty(q, SAKER_TAKE_REMOVE, BASE);
	take_s(q2, SAKER_TAKE_REMOVE, BASE, "c");
	commit();
}
END_TEST

/* ------------------------------------------------------------------ */
/* Wake-ups: at most once per queue per call, whatever the call moves. */
START_TEST(test_notify_once)
{
	int c1, c2;
	saker_queue *q = qopen_ctx("wo", &c1);
	saker_queue *q2 = qopen_ctx("wo2", &c2);
	uint64_t ids[3];
	int i;

	/* promote of many items into one queue */
	for (i = 0; i < 300; i++)
		put_s(q, "d", 0, BASE + 10 + i % 7, BASE);
	put_s(q2, "e", 0, BASE + 12, BASE);
	commit();
	T.nnotes = 0;
	ck_assert_int_eq(promote(BASE + 100), 0);
	ck_assert_int_eq(count_notes(q), 1);
	ck_assert_int_eq(count_notes(q2), 1);
	ck_assert_int_eq(T.nnotes, 2);
	commit();
	/* put and release: once each */
	for (i = 0; i < 3; i++)
		ids[i] = take_s(q, SAKER_TAKE_OPEN, BASE + 100, "d");
	T.nnotes = 0;
	ck_assert_int_eq(saker_store_release(T.s, q, ids[2]), SAKER_OK);
	ck_assert_int_eq(T.nnotes, 1);
	put_s(q, "p", 0, 0, BASE + 100);
	ck_assert_int_eq(T.nnotes, 2);
	ck_assert_int_eq(count_notes(q), 2);
	/* move: the target once, the source not at all */
	if (T.drv->move != NULL) {
		T.nnotes = 0;
		ck_assert_int_eq(saker_store_move(T.s, q, ids[1], q2), SAKER_OK);
		ck_assert_int_eq(T.nnotes, 1);
		ck_assert_int_eq(count_notes(q2), 1);
	}
	commit();
	take_s(q2, SAKER_TAKE_REMOVE, BASE + 100, "e");
	if (T.drv->move != NULL)
		take_s(q2, SAKER_TAKE_REMOVE, BASE + 100, "d");
	take_empty(q2, SAKER_TAKE_REMOVE, BASE + 100);
	commit();
	/* routing expired items into a target: once per call */
	if (T.drv->expire_to != NULL) {
		ck_assert_int_eq(saker_store_expire_to(T.s, q2, "wo", 2), SAKER_OK);
		for (i = 0; i < 50; i++)
			put_s(q2, "x", BASE + 150, 0, BASE + 100);
		for (i = 0; i < 50; i++)
			put_s(q2, "y", BASE + 150, BASE + 120, BASE + 100);
		for (i = 0; i < 50; i++)
			put_s(q2, "z", BASE + 150, BASE + 500, BASE + 100);
		commit();
		T.nnotes = 0;
		take_empty(q2, SAKER_TAKE_PEEK, BASE + 1000);
		notes_only(q, 1);
		ck_assert_int_eq(T.nnotes, 1);
		/* (a driver whose take sees due items routed them all) */
		T.nnotes = 0;
		ck_assert_int_eq(promote(BASE + 1000), 0);
		notes_only(q, 1);
		commit();
		ck_assert_uint_eq(qstats(q2).expired_to, 150);
	}
}
END_TEST

/* The other calls that make items visible: once per queue each, and a
 * call that makes nothing visible wakes nobody. */
START_TEST(test_notify_once_calls)
{
	int c1, c2;
	saker_queue *q = qopen_ctx("wc", &c1);
	saker_queue *q2 = qopen_ctx("wc2", &c2);
	struct saker_item it;
	uint64_t id;
	int i;

	for (i = 0; i < 3; i++)
		put_s(q, "a", 0, 0, BASE);
	commit();
	/* release_delayed due now is a release: once */
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "a");
	T.nnotes = 0;
	ck_assert_int_eq(saker_store_release_delayed(T.s, q, id, BASE, BASE),
	    SAKER_OK);
	ck_assert_int_eq(T.nnotes, 1);
	ck_assert_int_eq(count_notes(q), 1);
	ck_assert_ptr_eq(T.notes[0].ctx, &c1);
	/* due later: nothing visible, nobody woken; its promotion wakes q */
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "a");
	T.nnotes = 0;
	ck_assert_int_eq(saker_store_release_delayed(T.s, q, id, BASE + 10,
	    BASE), SAKER_OK);
	ck_assert_int_eq(T.nnotes, 0);
	/* a delayed put, a take, a confirm: nobody (a commit may announce
	 * what its batch did: a shared store's does) */
	put_s(q2, "d", 0, BASE + 10, BASE);
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "a");
	ck_assert_int_eq(saker_store_confirm(T.s, q, id), SAKER_OK);
	ck_assert_int_eq(T.nnotes, 0);
	commit();
	T.nnotes = 0;
	ck_assert_int_eq(promote(BASE + 20), 0);
	ck_assert_int_eq(T.nnotes, 2);
	ck_assert_int_eq(count_notes(q), 1);
	ck_assert_int_eq(count_notes(q2), 1);
	commit();
	/* put_once: the layer's put inside: once */
	memset(&it, 0, sizeof(it));
	it.data = "o";
	it.len = 1;
	T.nnotes = 0;
	ck_assert_int_eq(saker_store_put_once(T.s, q2, &it, "id-1", 4, 60000,
	    0, BASE + 20), SAKER_OK);
	ck_assert_int_eq(T.nnotes, 1);
	ck_assert_int_eq(count_notes(q2), 1);
	ck_assert_ptr_eq(T.notes[0].ctx, &c2);
	commit();
}
END_TEST

/* durable drivers: reopen */

static saker_queue *
qfind_at(int line, const char *name)
{
	saker_queue *q = NULL;
	int rc = saker_store_queue_open(T.s, name, strlen(name), false, NULL, &q);

	ck_assert_msg(rc == SAKER_OK, "line %d: queue %s after reopen: %d", line,
	    name, rc);
	return q;
}
#define qfind(name) qfind_at(__LINE__, (name))

/*
 * A damaged item: flip a byte of its data wherever the store's files hold
 * it (data file, log, journal).  Needs a store made of files under T.dir.
 */
static const char dmg_marker[] = "damage-me: a marker the store keeps verbatim";
static int dmg_hits;

static int
dmg_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	size_t mlen = sizeof(dmg_marker) - 1, n, i;
	unsigned char *buf;
	int fd;

	(void)ftw;
	if (type != FTW_F || sb->st_size <= 0 || sb->st_size > (64 << 20))
		return 0;
	if ((fd = open(path, O_RDWR)) < 0)
		return 0;
	buf = malloc((size_t)sb->st_size);
	ck_assert_ptr_nonnull(buf);
	n = (size_t)pread(fd, buf, (size_t)sb->st_size, 0);
	for (i = 0; n >= mlen && i <= n - mlen; i++) {
		if (memcmp(buf + i, dmg_marker, mlen) != 0)
			continue;
		buf[i + 3] ^= 0x20;
		ck_assert_int_eq(pwrite(fd, buf + i + 3, 1, (off_t)(i + 3)), 1);
		dmg_hits++;
	}
	free(buf);
	close(fd);
	return 0;
}

/* Damaged items are never served: take answers SAKER_ECORRUPT naming the
 * queue, the item moves to "<queue>_damaged", and the queue goes on. */
START_TEST(test_damaged_item)
{
	saker_queue *q = qopen("dq"), *other = qopen("fine"), *dq;
	const char *msg;

	put_s(q, dmg_marker, 0, 0, BASE);
	put_s(q, "after", 0, 0, BASE);
	put_s(other, "untouched", 0, 0, BASE);
	commit();
	saker_store_close(T.s);
	T.s = NULL;
	dmg_hits = 0;
	if (T.damage != NULL)
		dmg_hits = T.damage(T.spec, dmg_marker, sizeof(dmg_marker) - 1);
	else
		ck_assert_int_eq(nftw(T.dir, dmg_entry, 16, FTW_PHYS), 0);
	ck_assert_int_gt(dmg_hits, 0);
	open_store();
	q = qfind("dq");
	ck_assert_int_eq(take(q, SAKER_TAKE_REMOVE, BASE + 1), SAKER_ECORRUPT);
	ck_assert_int_eq(T.calls, 0);
	msg = saker_store_errmsg(T.s);
	ck_assert_msg(strstr(msg, "'dq'") != NULL &&
	    strstr(msg, "dq_damaged") != NULL, "errmsg: %s", msg);
	commit();
	take_s(q, SAKER_TAKE_REMOVE, BASE + 1, "after");
	take_s(qfind("fine"), SAKER_TAKE_PEEK, BASE + 1, "untouched");
	commit();
	/* kept, not lost: the bytes as they are, in dq_damaged */
	reopen();
	dq = qfind("dq_damaged");
	ck_assert_int_eq(take(dq, SAKER_TAKE_REMOVE, BASE + 2), SAKER_OK);
	ck_assert_uint_eq(T.got.len, sizeof(dmg_marker) - 1);
	ck_assert(memcmp(T.got.data, dmg_marker, T.got.len) != 0);
	ck_assert_int_eq(take(qfind("dq"), SAKER_TAKE_REMOVE, BASE + 2),
	    SAKER_EEMPTY);
	commit();
	(void)other;
}
END_TEST

START_TEST(test_reopen_ready)
{
	saker_queue *q = qopen("keep");
	saker_queue *q2 = qopen("keep2");
	static const unsigned char bin[] = { 'x', 0, 'y', 0 };
	struct saker_queue_stats st;

	ck_assert_int_eq(put_full(q, bin, sizeof(bin), 0xdeadbeefu,
	    BASE + 100000, 0, BASE - 9, BASE), SAKER_OK);
	ck_assert_int_eq(put_full(q, "", 0, 3, 0, 0, 0, BASE + 1), SAKER_OK);
	put_s(q, "third", 0, 0, BASE + 2);
	put_s(q, "gone", 0, 0, BASE + 3);
	put_s(q2, "other", 0, 0, BASE + 4);
	take_s(q2, SAKER_TAKE_REMOVE, BASE + 5, "other");
	commit();
	reopen();

	q = qfind("keep");
	q2 = qfind("keep2");
	st = qstats(q);
	ck_assert_uint_eq(st.items, 4);
	ck_assert_uint_eq(st.total_items, 4);
	ck_assert_uint_eq(st.bytes, 4 + 0 + 5 + 4);
	ck_assert_int_eq(st.head_created_ms, BASE - 9);
	st = qstats(q2);
	ck_assert_uint_eq(st.items, 0);
	ck_assert_uint_eq(st.total_items, 1);

	ck_assert_int_eq(take(q, SAKER_TAKE_REMOVE, BASE + 10), SAKER_OK);
	ck_assert_uint_eq(T.got.flags, 0xdeadbeefu);
	ck_assert_int_eq(T.got.expires_ms, BASE + 100000);
	ck_assert_int_eq(T.got.created_ms, BASE - 9);
	ck_assert_uint_eq(T.got.len, sizeof(bin));
	ck_assert_mem_eq(T.got.data, bin, sizeof(bin));
	ck_assert_int_eq(take(q, SAKER_TAKE_REMOVE, BASE + 10), SAKER_OK);
	ck_assert_uint_eq(T.got.flags, 3);
	ck_assert_uint_eq(T.got.len, 0);
	ck_assert_int_eq(T.got.created_ms, BASE + 1);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 10, "third");
	commit();

	/* what was taken and committed stays taken */
	reopen();
	q = qfind("keep");
	take_s(q, SAKER_TAKE_REMOVE, BASE + 10, "gone");
	take_empty(q, SAKER_TAKE_REMOVE, BASE + 10);
	ck_assert_uint_eq(qstats(q).total_items, 4);
	commit();
}
END_TEST

START_TEST(test_reopen_expiry)
{
	saker_queue *q = qopen("rexp");

	put_s(q, "short", BASE + 100, 0, BASE);
	put_s(q, "long", BASE + 10000, 0, BASE);
	commit();
	reopen();
	q = qfind("rexp");
	take_s(q, SAKER_TAKE_REMOVE, BASE + 500, "long");
	ck_assert_uint_eq(qstats(q).expired_items, 1);
	commit();
}
END_TEST

START_TEST(test_reopen_delayed)
{
	saker_queue *q = qopen("rdel");
	saker_queue *q2 = qopen("rdel2");
	struct itlog l;

	put_s(q, "d-500", 0, BASE + 500, BASE);
	put_s(q, "d-100", 0, BASE + 100, BASE);
	put_s(q2, "e-300", 0, BASE + 300, BASE);
	put_s(q, "d-500b", 0, BASE + 500, BASE + 1);
	commit();
	reopen();
	q = qfind("rdel");
	q2 = qfind("rdel2");
	ck_assert_uint_eq(qstats(q).delayed_items, 3);
	take_empty(q, SAKER_TAKE_REMOVE, BASE);

	memset(&l, 0, sizeof(l));
	ck_assert_int_eq(saker_store_iterate(T.s, q, iter_cb, &l), 0);
	ck_assert_int_eq(l.n, 3);
	ck_assert_int_eq(l.items[0].due_ms, BASE + 100);
	ck_assert_int_eq(l.items[1].due_ms, BASE + 500);
	ck_assert_str_eq((char *)l.items[1].data, "d-500");
	ck_assert_int_eq(l.items[2].state, SAKER_ITEM_DELAYED);
	itlog_free(&l);

	ck_assert_int_eq(promote(BASE), BASE + 100);
	/* all fell due while "down": promoted in due order */
	ck_assert_int_eq(promote(BASE + 1000), 0);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 1000, "d-100");
	take_s(q, SAKER_TAKE_REMOVE, BASE + 1000, "d-500");
	take_s(q, SAKER_TAKE_REMOVE, BASE + 1000, "d-500b");
	take_s(q2, SAKER_TAKE_REMOVE, BASE + 1000, "e-300");
	commit();
	reopen();
	q = qfind("rdel");
	ck_assert_int_eq(promote(BASE + 2000), 0);
	take_empty(q, SAKER_TAKE_REMOVE, BASE + 2000);
	ck_assert_uint_eq(qstats(q).total_items, 3);
}
END_TEST

START_TEST(test_reopen_open_items)
{
	saker_queue *q = qopen("ropen");
	struct saker_queue_stats st;
	uint64_t idc;

	put_s(q, "A", 0, 0, BASE);
	put_s(q, "B", 0, 0, BASE);
	put_s(q, "C", 0, 0, BASE);
	put_s(q, "D", 0, 0, BASE);
	put_s(q, "E", 0, 0, BASE);
	take_s(q, SAKER_TAKE_OPEN, BASE, "A");
	take_s(q, SAKER_TAKE_OPEN, BASE, "B");
	idc = take_s(q, SAKER_TAKE_OPEN, BASE, "C");
	ck_assert_int_eq(saker_store_confirm(T.s, q, idc), SAKER_OK);
	commit();
	reopen();

	q = qfind("ropen");
	st = qstats(q);
	ck_assert_uint_eq(st.open_items, 0);
	ck_assert_uint_eq(st.items, 4);
	ck_assert_uint_eq(st.total_items, 5);
	take_s(q, SAKER_TAKE_REMOVE, BASE, "A");
	take_s(q, SAKER_TAKE_REMOVE, BASE, "B");
	take_s(q, SAKER_TAKE_REMOVE, BASE, "D");
	take_s(q, SAKER_TAKE_REMOVE, BASE, "E");
	take_empty(q, SAKER_TAKE_REMOVE, BASE);
	commit();
}
END_TEST

/* Counts are stored: a released item and an item open at the crash come
 * back with theirs; a moved item is in the target after a reopen. */
START_TEST(test_reopen_deliveries)
{
	saker_queue *q = qopen("rdlv");
	saker_queue *dq = qopen("rdlv_dead");
	uint64_t id;

	put_s(q, "A", 0, 0, BASE);
	put_s(q, "B", 0, 0, BASE);
	put_s(q, "C", 0, 0, BASE);
	put_dlv(q, "D", 40, BASE + 100);
	commit();
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "A");
	ck_assert_int_eq(saker_store_release(T.s, q, id), SAKER_OK);
	commit();
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "A");
	ck_assert_int_eq(saker_store_move(T.s, q, id, dq), SAKER_OK);
	commit();
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "B");
	ck_assert_int_eq(saker_store_release(T.s, q, id), SAKER_OK);
	commit();
	take_s(q, SAKER_TAKE_OPEN, BASE, "B");
	commit();
	reopen();	/* B open: back at the head, counted twice */

	q = qfind("rdlv");
	dq = qfind("rdlv_dead");
	ck_assert_uint_eq(qstats(q).open_items, 0);
	take_s(q, SAKER_TAKE_PEEK, BASE, "B");
	ck_assert_uint_eq(T.got.deliveries, 2);
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "B");
	ck_assert_uint_eq(T.got.deliveries, 3);
	ck_assert_int_eq(saker_store_confirm(T.s, q, id), SAKER_OK);
	take_s(q, SAKER_TAKE_PEEK, BASE, "C");
	ck_assert_uint_eq(T.got.deliveries, 0);
	take_s(dq, SAKER_TAKE_PEEK, BASE, "A");
	ck_assert_uint_eq(T.got.deliveries, 2);
	ck_assert_uint_eq(qstats(dq).items, 1);
	commit();
	reopen();
	q = qfind("rdlv");
	promote(BASE + 100);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 100, "C");
	take_s(q, SAKER_TAKE_REMOVE, BASE + 100, "D");
	ck_assert_uint_eq(T.got.deliveries, 40);
	commit();
}
END_TEST

/* release_delayed(): an open item into the delayed set with its data,
 * flags, expiry, age and count; invisible until promoted at its due
 * time; due <= now is a release; after a reopen still delayed. */
START_TEST(test_release_delayed)
{
	saker_queue *q = qopen("rdly"), *q2;
	struct saker_queue_stats st;
	uint64_t id;

	ck_assert_int_eq(put_full(q, "A", 1, 42, BASE + 100000, 0, BASE - 7,
	    BASE), SAKER_OK);
	put_s(q, "B", 0, 0, BASE);
	commit();
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "A");
	ck_assert_int_eq(saker_store_release_delayed(T.s, q, id, BASE + 500, BASE),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_release_delayed(T.s, q, id, BASE + 500, BASE),
	    SAKER_ENOTFOUND);
	st = qstats(q);
	ck_assert_uint_eq(st.open_items, 0);
	ck_assert_uint_eq(st.delayed_items, 1);
	ck_assert_uint_eq(st.items, 1);
	ck_assert_uint_eq(st.total_items, 2);
	commit();
	ck_assert_int_eq(promote(BASE + 499), BASE + 500);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 499, "B");
	take_empty(q, SAKER_TAKE_REMOVE, BASE + 499);
	ck_assert_int_eq(promote(BASE + 500), 0);
	id = take_s(q, SAKER_TAKE_OPEN, BASE + 500, "A");
	ck_assert_uint_eq(T.got.flags, 42);
	ck_assert_int_eq(T.got.expires_ms, BASE + 100000);
	ck_assert_int_eq(T.got.created_ms, BASE - 7);
	ck_assert_uint_eq(T.got.deliveries, 2);
	/* due now: a plain release, to the head, ahead of later items */
	put_s(q, "C", 0, 0, BASE + 500);
	ck_assert_int_eq(saker_store_release_delayed(T.s, q, id, BASE + 500,
	    BASE + 500), SAKER_OK);
	st = qstats(q);
	ck_assert_uint_eq(st.delayed_items, 0);
	ck_assert_uint_eq(st.items, 2);
	take_s(q, SAKER_TAKE_PEEK, BASE + 500, "A");
	ck_assert_int_eq(saker_store_release_delayed(T.s, q, id, BASE + 900,
	    BASE + 500), SAKER_ENOTFOUND);
	commit();
	/* with the same due time: after the delayed items already there,
	 * before those put later */
	q2 = qopen("rdly2");
	put_s(q2, "J", 0, 0, BASE + 600);
	put_s(q2, "X", 0, BASE + 800, BASE + 600);
	id = take_s(q2, SAKER_TAKE_OPEN, BASE + 600, "J");
	ck_assert_int_eq(saker_store_release_delayed(T.s, q2, id, BASE + 800,
	    BASE + 600), SAKER_OK);
	put_s(q2, "Y", 0, BASE + 800, BASE + 600);
	commit();
	ck_assert_int_eq(promote(BASE + 799), BASE + 800);
	take_empty(q2, SAKER_TAKE_REMOVE, BASE + 799);
	ck_assert_int_eq(promote(BASE + 800), 0);
	take_s(q2, SAKER_TAKE_REMOVE, BASE + 800, "X");
	take_s(q2, SAKER_TAKE_REMOVE, BASE + 800, "J");
	take_s(q2, SAKER_TAKE_REMOVE, BASE + 800, "Y");
	commit();
	if (!T.drv->durable)
		return;
	/* durable: still delayed, with its count, after a reopen */
	id = take_s(q, SAKER_TAKE_OPEN, BASE + 600, "A");
	ck_assert_int_eq(saker_store_release_delayed(T.s, q, id, BASE + 2000,
	    BASE + 600), SAKER_OK);
	commit();
	reopen();
	q = qfind("rdly");
	st = qstats(q);
	ck_assert_uint_eq(st.open_items, 0);
	ck_assert_uint_eq(st.delayed_items, 1);
	ck_assert_int_eq(promote(BASE + 1999), BASE + 2000);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 1999, "C");
	take_empty(q, SAKER_TAKE_REMOVE, BASE + 1999);
	ck_assert_int_eq(promote(BASE + 2000), 0);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 2000, "A");
	ck_assert_uint_eq(T.got.flags, 42);
	ck_assert_int_eq(T.got.created_ms, BASE - 7);
	ck_assert_uint_eq(T.got.deliveries, 3);
	commit();
}
END_TEST

START_TEST(test_reopen_deleted_queue)
{
	saker_queue *q = qopen("rd-gone");
	saker_queue *q2 = qopen("rd-kept");
	struct qlist l;

	put_s(q, "x", 0, 0, BASE);
	put_s(q, "y", 0, BASE + 100, BASE);
	put_s(q2, "z", 0, 0, BASE);
	commit();
	ck_assert_int_eq(saker_store_queue_delete(T.s, q), SAKER_OK);
	ck_assert_int_eq(saker_store_queue_flush(T.s, q2), SAKER_OK);
	commit();
	reopen();
	memset(&l, 0, sizeof(l));
	ck_assert_int_eq(saker_store_queues(T.s, qlist_cb, &l), SAKER_OK);
	ck_assert_int_eq(l.n, 1);
	ck_assert(qlist_has(&l, "rd-kept"));
	q2 = qfind("rd-kept");
	take_empty(q2, SAKER_TAKE_REMOVE, BASE);
	ck_assert_uint_eq(qstats(q2).total_items, 1);
	ck_assert_int_eq(promote(BASE + 1000), 0);
}
END_TEST

START_TEST(test_reopen_read_only)
{
	saker_queue *q = qopen("ro");
	struct itlog l;

	put_s(q, "kept", 0, 0, BASE);
	commit();
	saker_store_close(T.s);
	T.s = NULL;
	T.opts.read_only = true;
	T.opts.create = false;
	open_store();
	q = qfind("ro");
	memset(&l, 0, sizeof(l));
	ck_assert_int_eq(saker_store_iterate(T.s, q, iter_cb, &l), 0);
	ck_assert_int_eq(l.n, 1);
	ck_assert_str_eq((char *)l.items[0].data, "kept");
	itlog_free(&l);
	ck_assert_int_eq(put_full(q, "no", 2, 0, 0, 0, 0, BASE), SAKER_EREADONLY);
}
END_TEST

START_TEST(test_locked)
{
	saker_store *s2 = NULL;
	char err[256] = "";
	int rc;

	rc = saker_store_open(T.spec, &T.opts, &s2, err, sizeof(err));
	if (rc == SAKER_OK)
		saker_store_close(s2);
	ck_assert_int_eq(rc, SAKER_ELOCKED);
	ck_assert_ptr_null(s2);
	ck_assert_msg(err[0] != '\0', "no error message");

	/* the first handle is unharmed */
	put_s(qopen("lk"), "x", 0, 0, BASE);
	commit();
}
END_TEST


/* ------------------------------------------------------------------ */
/* ASYNCHRONOUS COMMIT (store.h): a batch in flight, the next gathering on
 * top of it, at close, at a failure.  Durable drivers with commit_start
 * must start it with SAKER_SYNC_ALWAYS; the others commit synchronously
 * through the same calls. */

/* commit_start(); returns whether the batch is in flight, and checks the
 * descriptor says the same */
static bool
flight_start_at(int line)
{
	bool started = true;
	int rc = saker_store_commit_start(T.s, &started);

	ck_assert_msg(rc == SAKER_OK, "line %d: commit_start: %d (%s)", line,
	    rc, T.drv->errmsg(T.s));
	ck_assert_msg(started == saker_store_commit_inflight(T.s),
	    "line %d: started %d, in flight %d", line, started,
	    saker_store_commit_inflight(T.s));
	if (started)
		ck_assert_int_ge(saker_store_commit_fd(T.s), 0);
	else
		ck_assert_int_eq(saker_store_commit_fd(T.s), -1);
	if (T.drv->durable && T.drv->commit_start != NULL)
		ck_assert_msg(started, "line %d: %s has commit_start but "
		    "committed synchronously", line, T.drv->name);
	return started;
}
#define flight_start() flight_start_at(__LINE__)

/* the descriptor becomes readable: the result is there */
static void
flight_ready(void)
{
	struct pollfd pfd;

	pfd.fd = saker_store_commit_fd(T.s);
	pfd.events = POLLIN;
	pfd.revents = 0;
	ck_assert_int_ge(pfd.fd, 0);
	ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
	ck_assert(pfd.revents & POLLIN);
}

static void
sync_always(void)
{
	T.opts.sync = SAKER_SYNC_ALWAYS;
	reopen();
}

START_TEST(test_async_commit)
{
	saker_queue *q;
	bool started;

	sync_always();
	q = qopen("ac");
	put_s(q, "a", 0, 0, BASE);
	put_s(q, "b", 0, 0, BASE);
	started = flight_start();
	/* the next batch gathers on top of the one in flight, and sees it */
	take_s(q, SAKER_TAKE_REMOVE, BASE, "a");
	put_s(q, "c", 0, 0, BASE);
	ck_assert_uint_eq(qstats(q).items, 2);
	if (started) {
		flight_ready();
		ck_assert_int_eq(saker_store_commit_finish(T.s), SAKER_OK);
		ck_assert(!saker_store_commit_inflight(T.s));
		ck_assert_int_eq(saker_store_commit_fd(T.s), -1);
	}
	/* nothing in flight: finishing is a no-op */
	ck_assert_int_eq(saker_store_commit_finish(T.s), SAKER_OK);
	ck_assert_uint_eq(qstats(q).items, 2);
	/* several in a row, the last one collected by commit() */
	(void)flight_start();
	put_s(q, "d", 0, 0, BASE);
	commit();
	ck_assert(!saker_store_commit_inflight(T.s));
	if (T.drv->durable) {
		reopen();
		q = qfind_at(__LINE__, "ac");
	}
	take_s(q, SAKER_TAKE_REMOVE, BASE, "b");
	take_s(q, SAKER_TAKE_REMOVE, BASE, "c");
	take_s(q, SAKER_TAKE_REMOVE, BASE, "d");
	take_empty(q, SAKER_TAKE_REMOVE, BASE);
	commit();
}
END_TEST

/* close() with a batch in flight waits for it: the batch is there after
 * the reopen, whole */
START_TEST(test_async_close)
{
	saker_queue *q;
	int i;

	sync_always();
	q = qopen("acl");
	put_s(q, "keep", 0, 0, BASE);
	commit();
	for (i = 0; i < 50; i++)
		put_s(q, "x", 0, 0, BASE);
	take_s(q, SAKER_TAKE_REMOVE, BASE, "keep");
	(void)flight_start();
	reopen();
	q = qfind_at(__LINE__, "acl");
	ck_assert_uint_eq(qstats(q).items, 50);
	for (i = 0; i < 50; i++)
		take_s(q, SAKER_TAKE_REMOVE, BASE, "x");
	take_empty(q, SAKER_TAKE_REMOVE, BASE);
	commit();
}
END_TEST

/* The fdatasync of the batch in flight fails: it fails, the batch gathered
 * on top of it fails with it, and neither is acknowledged; after a reopen
 * the last batch that succeeded is there, the one in flight maybe (it was
 * written before its fdatasync failed: in doubt), the one on top never. */
START_TEST(test_async_failure)
{
	struct saker_queue_stats st;
	saker_queue *q;
	int rc;

	sync_always();
	q = qopen("af");
	put_s(q, "a", 0, 0, BASE);
	commit();
	T.fail_sync(true);
	put_s(q, "b", 0, 0, BASE);
	ck_assert(flight_start());
	take_s(q, SAKER_TAKE_REMOVE, BASE, "a");
	put_s(q, "c", 0, 0, BASE);
	flight_ready();
	rc = saker_store_commit_finish(T.s);
	ck_assert_msg(rc == SAKER_EINDOUBT || rc == SAKER_EIO, "finish: %d",
	    rc);
	ck_assert_msg(strstr(T.drv->errmsg(T.s), "fdatasync") != NULL,
	    "the reason is not told: %s", T.drv->errmsg(T.s));
	ck_assert(!saker_store_commit_inflight(T.s));
	ck_assert_int_eq(saker_store_commit_fd(T.s), -1);
	/* as after the last success: "a" alone, or (a local store after a
	 * failed fdatasync) refusing to answer at all */
	memset(&st, 0, sizeof(st));
	if (saker_store_queue_stats(T.s, q, &st) == SAKER_OK)
		ck_assert_uint_eq(st.items, 1);
	ck_assert_int_ne(T.drv->put(T.s, q, &(struct saker_item){ .len = 1,
	    .data = "d" }, BASE), SAKER_OK);
	(void)saker_store_commit(T.s);
	T.fail_sync(false);
	reopen();
	q = qfind_at(__LINE__, "af");
	take_s(q, SAKER_TAKE_REMOVE, BASE, "a");
	if (take(q, SAKER_TAKE_REMOVE, BASE) == SAKER_OK)
		ck_assert_msg(T.got.len == 1 && memcmp(T.got.data, "b", 1) == 0,
		    "after the failure: %.*s", (int)T.got.len,
		    (char *)T.got.data);
	take_empty(q, SAKER_TAKE_REMOVE, BASE);
	commit();
}
END_TEST

/* ------------------------------------------------------------------ */

TCase *
store_conformance_tcase(const struct saker_store_driver *drv)
{
	static const struct store_conformance_opts defaults;

	return store_conformance_tcase_opts(drv, &defaults);
}

/* Say which tests a driver does not get, and why: what its caps and
 * optional hooks do not promise is not tested, and the log shows it. */
static void
skipped(const struct saker_store_driver *drv, const char *tests,
    const char *why)
{
	printf("check_store: %s: skipping %s (%s)\n", drv->name, tests, why);
}

TCase *
store_conformance_fixture(const struct saker_store_driver *drv,
    const struct store_conformance_opts *opts)
{
	TCase *tc;

	if (nslots >= MAX_SLOTS)
		return NULL;
	slots[nslots] = drv;
	slot_opts[nslots] = *opts;
	tc = tcase_create(drv->name);
	tcase_add_checked_fixture(tc, slot_setups[nslots], fixture_teardown);
	nslots++;
	tcase_set_timeout(tc, 120);
	return tc;
}

saker_store *
store_conformance_store(void)
{
	return T.s;
}

int
store_conformance_wakeups(void **last_ctx)
{
	int n = T.nnotes;

	if (last_ctx != NULL)
		*last_ctx = n > 0 && n <= MAX_NOTES ? T.notes[n - 1].ctx : NULL;
	T.nnotes = 0;
	return n;
}

/* ------------------------------------------------------------------ */
/* item attributes and deduplication ids (store.h) */

/* a record of the attribute format with one unknown type: opaque to the
 * driver, so any bytes would do; these are also a valid record */
static size_t
attrs_of(unsigned char *a, size_t cap, unsigned tag, size_t vlen)
{
	size_t i;

	ck_assert_uint_ge(cap, 4 + vlen);
	a[0] = 1;
	a[1] = (unsigned char)tag;
	a[2] = (unsigned char)(vlen >> 8);
	a[3] = (unsigned char)vlen;
	for (i = 0; i < vlen; i++)
		a[4 + i] = (unsigned char)(tag * 31 + i * 7);	/* zeros too */
	return 4 + vlen;
}

static int
put_attrs(saker_queue *q, const char *str, const void *attrs, size_t alen,
    int64_t expires_ms, int64_t due_ms, int64_t now)
{
	struct saker_item it;

	memset(&it, 0, sizeof(it));
	it.expires_ms = expires_ms;
	it.due_ms = due_ms;
	it.len = strlen(str);
	it.data = str;
	it.attrs = attrs;
	it.attrs_len = alen;
	return saker_store_put(T.s, q, &it, now);
}

#define got_attrs(a, n) do { \
	ck_assert_uint_eq(T.got.attrs_len, (n)); \
	if ((n) > 0) \
		ck_assert_mem_eq(T.got.attrs, (a), (n)); \
} while (0)

/* attributes go everywhere the item goes, byte-exact */
START_TEST(test_attrs_roundtrip)
{
	saker_queue *q = qopen("at"), *q2 = qopen("at2");
	unsigned char a[SAKER_ATTRS_MAX], b[64], c[64];
	size_t na = attrs_of(a, sizeof(a), 200, SAKER_ATTRS_MAX - 4);
	size_t nb = attrs_of(b, sizeof(b), 201, 9), nc = attrs_of(c, sizeof(c),
	    202, 0);
	struct itlog log;
	uint64_t id;

	memset(&log, 0, sizeof(log));
	ck_assert_int_eq(put_attrs(q, "A", a, na, 0, 0, BASE), SAKER_OK);
	ck_assert_int_eq(put_attrs(q, "B", b, nb, 0, 0, BASE), SAKER_OK);
	put_s(q, "C", 0, 0, BASE);
	ck_assert_int_eq(put_attrs(q, "D", c, nc, 0, BASE + 100, BASE),
	    SAKER_OK);
	commit();
	/* iterate: open, ready, delayed, each with its own */
	ck_assert_int_eq(saker_store_iterate(T.s, q, iter_cb, &log), SAKER_OK);
	ck_assert_int_eq(log.n, 4);
	ck_assert_uint_eq(log.items[0].attrs_len, na);
	ck_assert_mem_eq(log.items[0].attrs, a, na);
	ck_assert_uint_eq(log.items[1].attrs_len, nb);
	ck_assert_uint_eq(log.items[2].attrs_len, 0);
	ck_assert_uint_eq(log.items[3].attrs_len, nc);
	ck_assert_mem_eq(log.items[3].attrs, c, nc);
	itlog_free(&log);
	/* peek, open + release, open + release_delayed + promote */
	take_s(q, SAKER_TAKE_PEEK, BASE, "A");
	got_attrs(a, na);
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "A");
	got_attrs(a, na);
	ck_assert_int_eq(saker_store_release(T.s, q, id), SAKER_OK);
	commit();
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "A");
	ck_assert_int_eq(saker_store_release_delayed(T.s, q, id, BASE + 50, BASE),
	    SAKER_OK);
	commit();
	/* move to another queue */
	id = take_s(q, SAKER_TAKE_OPEN, BASE, "B");
	got_attrs(b, nb);
	ck_assert_int_eq(saker_store_move(T.s, q, id, q2), SAKER_OK);
	commit();
	take_s(q2, SAKER_TAKE_REMOVE, BASE, "B");
	got_attrs(b, nb);
	take_s(q, SAKER_TAKE_REMOVE, BASE, "C");
	ck_assert_uint_eq(T.got.attrs_len, 0);
	promote(BASE + 200);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 200, "A");
	got_attrs(a, na);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 200, "D");
	got_attrs(c, nc);
	commit();
	/* routed when it expires */
	if (T.drv->expire_to != NULL) {
		ck_assert_int_eq(saker_store_expire_to(T.s, q, "at2", 3), SAKER_OK);
		ck_assert_int_eq(put_attrs(q, "E", b, nb, BASE + 300, 0,
		    BASE + 200), SAKER_OK);
		commit();
		take_empty(q, SAKER_TAKE_REMOVE, BASE + 400);
		commit();
		take_s(q2, SAKER_TAKE_REMOVE, BASE + 400, "E");
		got_attrs(b, nb);
		commit();
	}
	/* and through a restart */
	if (T.drv->durable) {
		ck_assert_int_eq(put_attrs(q, "F", a, na, 0, 0, BASE), SAKER_OK);
		ck_assert_int_eq(put_attrs(q, "G", b, nb, 0, BASE + 900, BASE),
		    SAKER_OK);
		commit();
		take_s(q, SAKER_TAKE_OPEN, BASE, "F");
		commit();
		reopen();	/* F open: back at the head */
		q = qfind("at");
		take_s(q, SAKER_TAKE_REMOVE, BASE, "F");
		got_attrs(a, na);
		promote(BASE + 1000);
		take_s(q, SAKER_TAKE_REMOVE, BASE + 1000, "G");
		got_attrs(b, nb);
		commit();
	}
}
END_TEST

struct idlog {
	char keys[8][SAKER_DEDUP_KEY_MAX + 1];
	int64_t exp[8];
	int n;
};

static int
id_cb(void *arg, const void *key, size_t len, int64_t expires_ms)
{
	struct idlog *l = arg;

	ck_assert_uint_le(len, SAKER_DEDUP_KEY_MAX);
	if (l->n < 8) {
		memcpy(l->keys[l->n], key, len);
		l->keys[l->n][len] = '\0';
		l->exp[l->n] = expires_ms;
	}
	l->n++;
	return 0;
}

static int
put_once(saker_queue *q, const char *str, const char *key, int64_t window,
    uint64_t max_ids, int64_t now)
{
	struct saker_item it;

	memset(&it, 0, sizeof(it));
	it.len = strlen(str);
	it.data = str;
	return saker_store_put_once(T.s, q, &it, key, strlen(key), window,
	    max_ids, now);
}

/* the id of the item handed out last, from its attributes */
static void
got_id(const char *want)
{
	/* version 1, one entry of type 1 (ITEMATTR_ID): the layer wrote it */
	ck_assert_uint_eq(T.got.attrs_len, 4 + strlen(want));
	ck_assert_uint_eq(T.got.attrs[0], 1);
	ck_assert_uint_eq(T.got.attrs[1], 1);
	ck_assert_uint_eq((size_t)T.got.attrs[2] << 8 | T.got.attrs[3],
	    strlen(want));
	ck_assert_mem_eq(T.got.attrs + 4, want, strlen(want));
}

START_TEST(test_dedup)
{
	saker_queue *q = qopen("dd"), *q2 = qopen("dd2");
	struct saker_queue_stats st;
	char longkey[SAKER_DEDUP_KEY_MAX + 2];
	struct idlog l;
	uint64_t removed = 9;
	bool replaced;

	memset(&l, 0, sizeof(l));
	ck_assert_int_eq(put_once(q, "A", "job-1", 1000, 0, BASE), SAKER_OK);
	ck_assert_int_eq(put_once(q, "A2", "job-1", 1000, 0, BASE + 1),
	    SAKER_EEXIST);
	ck_assert_int_eq(put_once(q, "B", "job-2", 1000, 0, BASE + 2),
	    SAKER_OK);
	/* ids are per queue; binary bytes are ids too */
	ck_assert_int_eq(put_once(q2, "A", "job-1", 1000, 0, BASE), SAKER_OK);
	commit();
	ck_assert_int_eq(put_once(q, "A3", "job-1", 1000, 0, BASE + 999),
	    SAKER_EEXIST);
	commit();
	st = qstats(q);
	ck_assert_uint_eq(st.items, 2);
	ck_assert_uint_eq(st.total_items, 2);
	ck_assert_uint_eq(st.dedup_ids, 2);
	ck_assert_uint_eq(st.dedup_hits, 2);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 10, "A");
	got_id("job-1");
	commit();
	/* consumed, still in the window: still a duplicate */
	ck_assert_int_eq(put_once(q, "A4", "job-1", 1000, 0, BASE + 20),
	    SAKER_EEXIST);
	/* the window is over at expires_ms: the id is new again */
	ck_assert_int_eq(put_once(q, "A5", "job-1", 1000, 0, BASE + 1000),
	    SAKER_OK);
	commit();
	ck_assert_uint_eq(qstats(q).dedup_ids, 2);
	ck_assert_int_eq(saker_store_dedup_iterate(T.s, q, id_cb, &l),
	    SAKER_OK);
	ck_assert_int_eq(l.n, 2);
	ck_assert(strcmp(l.keys[0], "job-1") == 0 ?
	    l.exp[0] == BASE + 2000 && strcmp(l.keys[1], "job-2") == 0 &&
	    l.exp[1] == BASE + 1002 :
	    l.exp[1] == BASE + 2000 && strcmp(l.keys[0], "job-2") == 0);
	/* the sweep takes what expired, oldest first, bounded */
	ck_assert_int_eq(saker_store_dedup_sweep(T.s, q, BASE + 1500, 0,
	    &removed), SAKER_OK);
	ck_assert_uint_eq(removed, 1);
	commit();
	ck_assert_uint_eq(qstats(q).dedup_ids, 1);
	ck_assert_int_eq(put_once(q, "B2", "job-2", 1000, 0, BASE + 1500),
	    SAKER_OK);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 1500, "B");
	got_id("job-2");
	take_s(q, SAKER_TAKE_REMOVE, BASE + 1500, "A5");
	got_id("job-1");
	take_s(q, SAKER_TAKE_REMOVE, BASE + 1500, "B2");
	commit();
	/* asking leaves nothing behind */
	ck_assert_int_eq(saker_store_dedup_kept(T.s, q, "job-2", 5, 1000,
	    BASE + 1500), SAKER_EEXIST);
	ck_assert_int_eq(saker_store_dedup_kept(T.s, q, "job-9", 5, 1000,
	    BASE + 1500), SAKER_OK);
	commit();
	ck_assert_uint_eq(qstats(q).dedup_ids, 2);
	ck_assert_int_eq(put_once(q, "B3", "job-9", 1000, 0, BASE + 1500),
	    SAKER_OK);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 1500, "B3");
	commit();
	/* the hooks' own answers */
	ck_assert_int_eq(T.drv->dedup_put(T.s, q, "job-2", 5, BASE + 9000,
	    BASE + 1600, &replaced), SAKER_EEXIST);
	ck_assert_int_eq(T.drv->dedup_del(T.s, q, "nope", 4), SAKER_ENOTFOUND);
	/* bad ids */
	memset(longkey, 'k', sizeof(longkey));
	longkey[SAKER_DEDUP_KEY_MAX + 1] = '\0';
	ck_assert_int_eq(put_once(q, "X", longkey, 1000, 0, BASE),
	    SAKER_EINVAL);
	ck_assert_int_eq(put_once(q, "X", "", 1000, 0, BASE), SAKER_EINVAL);
	ck_assert_int_eq(put_once(q, "X", "ok", 0, 0, BASE), SAKER_EINVAL);
	longkey[SAKER_DEDUP_KEY_MAX] = '\0';
	ck_assert_int_eq(put_once(q, "L", longkey, 1000, 0, BASE + 1600),
	    SAKER_OK);
	commit();
	ck_assert_uint_eq(qstats(q).items, 1);
}
END_TEST

/* the limit counts live ids; expired ones make room */
START_TEST(test_dedup_limit)
{
	saker_queue *q = qopen("dl");
	char key[16];
	int i;

	for (i = 0; i < 3; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		ck_assert_int_eq(put_once(q, "x", key, 100 + i, 3, BASE),
		    SAKER_OK);
	}
	ck_assert_int_eq(put_once(q, "x", "k3", 100, 3, BASE), SAKER_EFULL);
	/* a duplicate at the limit is still a duplicate, not an error */
	ck_assert_int_eq(put_once(q, "x", "k1", 100, 3, BASE), SAKER_EEXIST);
	commit();
	ck_assert_uint_eq(qstats(q).items, 3);
	/* k0 expired at BASE + 100: swept to make room */
	ck_assert_int_eq(put_once(q, "x", "k3", 100, 3, BASE + 100), SAKER_OK);
	commit();
	ck_assert_uint_eq(qstats(q).dedup_ids, 3);
	ck_assert_uint_eq(qstats(q).items, 4);
	/* replacing an expired id does not count twice */
	ck_assert_int_eq(put_once(q, "x", "k1", 100, 0, BASE + 101), SAKER_OK);
	ck_assert_uint_eq(qstats(q).dedup_ids, 3);
	commit();
}
END_TEST

/* flush keeps a queue's ids, delete drops them; load keeps an expiry */
START_TEST(test_dedup_queue_life)
{
	saker_queue *q = qopen("dq");
	struct idlog l;

	memset(&l, 0, sizeof(l));
	ck_assert_int_eq(put_once(q, "A", "a", 1000, 0, BASE), SAKER_OK);
	commit();
	ck_assert_int_eq(saker_store_queue_flush(T.s, q), SAKER_OK);
	commit();
	ck_assert_uint_eq(qstats(q).items, 0);
	ck_assert_uint_eq(qstats(q).dedup_ids, 1);
	ck_assert_int_eq(put_once(q, "A", "a", 1000, 0, BASE + 1),
	    SAKER_EEXIST);
	ck_assert_int_eq(saker_store_queue_delete(T.s, q), SAKER_OK);
	commit();
	q = qopen("dq");
	ck_assert_uint_eq(qstats(q).dedup_ids, 0);
	ck_assert_int_eq(put_once(q, "A", "a", 1000, 0, BASE + 2), SAKER_OK);
	/* load: the given expiry, a repeat is no error */
	ck_assert_int_eq(saker_store_dedup_load(T.s, q, "b", 1, BASE + 77,
	    BASE), SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_load(T.s, q, "b", 1, BASE + 77,
	    BASE), SAKER_OK);
	commit();
	ck_assert_int_eq(saker_store_dedup_iterate(T.s, q, id_cb, &l),
	    SAKER_OK);
	ck_assert_int_eq(l.n, 2);
	ck_assert(l.exp[0] == BASE + 77 || l.exp[1] == BASE + 77);
	ck_assert_uint_eq(qstats(q).dedup_ids, 2);
	ck_assert_int_eq(put_once(q, "B", "b", 1000, 0, BASE + 76),
	    SAKER_EEXIST);
	ck_assert_int_eq(put_once(q, "B", "b", 1000, 0, BASE + 77), SAKER_OK);
	commit();
}
END_TEST

/* ids are durable with their batch: through a restart, counted again */
START_TEST(test_reopen_dedup)
{
	saker_queue *q = qopen("rdd");
	struct saker_queue_stats st;

	ck_assert_int_eq(put_once(q, "A", "a", 60000, 0, BASE), SAKER_OK);
	ck_assert_int_eq(put_once(q, "B", "b", 10, 0, BASE), SAKER_OK);
	commit();
	reopen();
	q = qfind("rdd");
	ck_assert_int_eq(put_once(q, "A", "a", 60000, 0, BASE + 100),
	    SAKER_EEXIST);
	st = qstats(q);
	ck_assert_uint_eq(st.dedup_ids, 2);
	ck_assert_uint_eq(st.items, 2);
	ck_assert_int_eq(put_once(q, "B", "b", 10, 0, BASE + 100), SAKER_OK);
	take_s(q, SAKER_TAKE_REMOVE, BASE + 100, "A");
	got_id("a");
	commit();
}
END_TEST

TCase *
store_conformance_tcase_opts(const struct saker_store_driver *drv,
    const struct store_conformance_opts *opts)
{
	TCase *tc;

	if ((tc = store_conformance_fixture(drv, opts)) == NULL)
		return NULL;
	tcase_add_test(tc, test_fifo_order);
	tcase_add_test(tc, test_roundtrip_fields);
	tcase_add_test(tc, test_peek);
	tcase_add_test(tc, test_take_empty);
	tcase_add_test(tc, test_expiry);
	tcase_add_test(tc, test_flush_expired);
	tcase_add_test(tc, test_open_confirm);
	tcase_add_test(tc, test_release);
	tcase_add_test(tc, test_release_delayed);
	tcase_add_test(tc, test_delayed_basic);
	tcase_add_test(tc, test_delayed_order);
	tcase_add_test(tc, test_delayed_expired);
	tcase_add_test(tc, test_notify);
	tcase_add_test(tc, test_queue_open);
	tcase_add_test(tc, test_queues_list);
	tcase_add_test(tc, test_queue_delete);
	tcase_add_test(tc, test_queue_flush);
	tcase_add_test(tc, test_iterate);
	tcase_add_test(tc, test_stats);
	tcase_add_test(tc, test_commit);
	tcase_add_test(tc, test_many_queues);
	tcase_add_test(tc, test_bulk);
	tcase_add_test(tc, test_deliveries);
	tcase_add_test(tc, test_move);
	tcase_add_test(tc, test_batch_survives_failure);
	tcase_add_test(tc, test_notify_once);
	tcase_add_test(tc, test_notify_once_calls);
	tcase_add_test(tc, test_attrs_roundtrip);
	tcase_add_test(tc, test_dedup);
	tcase_add_test(tc, test_dedup_limit);
	tcase_add_test(tc, test_dedup_queue_life);
	tcase_add_test(tc, test_async_commit);
	if (drv->commit_start != NULL && opts->fail_sync != NULL)
		tcase_add_test(tc, test_async_failure);
	else
		skipped(drv, "test_async_failure", "no commit_start, or no "
		    "way to fail its fdatasync");
	if (drv->expire_to != NULL) {
		tcase_add_test(tc, test_expire_to);
		tcase_add_test(tc, test_expire_to_many_head);
		tcase_add_test(tc, test_expire_to_many_promote);
		tcase_add_test(tc, test_expire_to_many_sweep);
	} else
		skipped(drv, "test_expire_to*", "no expire_to");
	if (!drv->durable) {
		skipped(drv, "test_reopen_* test_locked test_damaged_item",
		    "not durable");
		return tc;
	}
	tcase_add_test(tc, test_reopen_ready);
	tcase_add_test(tc, test_reopen_expiry);
	tcase_add_test(tc, test_reopen_delayed);
	tcase_add_test(tc, test_reopen_open_items);
	tcase_add_test(tc, test_reopen_deleted_queue);
	tcase_add_test(tc, test_reopen_deliveries);
	tcase_add_test(tc, test_reopen_read_only);
	tcase_add_test(tc, test_reopen_dedup);
	tcase_add_test(tc, test_async_close);
	if ((drv->caps & SAKER_CAP_SHARED) == 0)
		tcase_add_test(tc, test_locked);
	else
		skipped(drv, "test_locked", "SAKER_CAP_SHARED");
	/* the store's bytes are in files under its location, or the
	 * test knows how to damage them */
	if (opts->spec == NULL || opts->damage != NULL)
		tcase_add_test(tc, test_damaged_item);
	else
		skipped(drv, "test_damaged_item", "no way to damage its items");
	return tc;
}
