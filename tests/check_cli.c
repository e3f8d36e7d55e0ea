/* check_cli.c -- tests of `saker`: dump format, migrate, dump/load, put/get/stats. */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "saker/store.h"
#include "testlib.h"

/* The engine (in libsaker.a) is tested directly as well as through the
 * binary. */
#include "clock.h"
#include "dump.h"
#include "itemattr.h"
#include "migrate.h"
#include "migrate_copy.h"
#include "migrate_progress.h"

/* ------------------------------------------------------------------ */
/* helpers */

/* The helpers of the durable drivers' tests, which a build without LMDB
 * or SQLite leaves out. */
#define DRIVER_HELPER __attribute__((unused))

static void
write_file(const char *path, const void *p, size_t len)
{
	FILE *fp = fopen(path, "wb");

	ck_assert_ptr_nonnull(fp);
	ck_assert_uint_eq(fwrite(p, 1, len, fp), len);
	ck_assert_int_eq(fclose(fp), 0);
}


static bool
exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* No "*.tmp-*" sibling left in dir. */
DRIVER_HELPER static void
ck_no_temporaries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) != NULL)
		ck_assert_msg(strstr(de->d_name, ".tmp-") == NULL,
		    "temporary %s/%s left behind", dir, de->d_name);
	closedir(d);
}

static saker_store *
open_store(const char *spec, bool create, bool read_only)
{
	struct saker_store_opts o;
	saker_store *s = NULL;
	char err[512] = "";

	memset(&o, 0, sizeof(o));
	o.create = create;
	o.read_only = read_only;
	o.sync = SAKER_SYNC_NEVER;
	ck_assert_msg(saker_store_open(spec, &o, &s, err, sizeof(err)) == SAKER_OK,
	    "open %s: %s", spec, err);
	return s;
}

static void
put_item(saker_store *s, saker_queue *q, const void *data, size_t len,
    uint32_t flags, int64_t expires, int64_t due, int64_t now)
{
	struct saker_item it;

	memset(&it, 0, sizeof(it));
	it.data = data;
	it.len = len;
	it.flags = flags;
	it.expires_ms = expires;
	it.due_ms = due;
	it.created_ms = now - 1000;
	ck_assert_int_eq(s->driver->put(s, q, &it, now), SAKER_OK);
}

static int
take_cb(void *arg, const struct saker_item *it)
{
	(void)arg;
	(void)it;
	return 0;
}

/* The model of one queue after a restart: data strings in order, and
 * how many of them (from the tail) are still delayed. */
struct model {
	const char *name;
	int n;
	char data[64][32];
	size_t len[64];
	int delayed;
};

static struct model models[3];

/*
 * A store with every item state, in three queues:
 *   ready items (binary data, flags, expiry, an empty item), two of them
 *   taken open and never confirmed; delayed items whose due time has
 *   passed (promoted at the next start); delayed items a day ahead.
 */
DRIVER_HELPER static void
fill_store(const char *spec)
{
	static const char *names[3] = { "alpha", "jobs+audit", "z_q" };
	saker_store *s = open_store(spec, true, false);
	int64_t now = saker_now_ms();
	saker_queue *q;
	int qi, i;

	for (qi = 0; qi < 3; qi++) {
		struct model *m = &models[qi];
		char buf[32];
		size_t len;

		memset(m, 0, sizeof(*m));
		m->name = names[qi];
		ck_assert_int_eq(s->driver->queue_open(s, names[qi], strlen(names[qi]),
		    true, NULL, &q), SAKER_OK);
		/* future delayed items first, so arrival differs from due order */
		for (i = 2; i >= 0; i--) {
			len = (size_t)snprintf(buf, sizeof(buf), "later-%d", i);
			put_item(s, q, buf, len, 7, 0, now + 86400000 + i * 1000, now);
		}
		/* due in the past by the time of the copy */
		for (i = 0; i < 2; i++) {
			len = (size_t)snprintf(buf, sizeof(buf), "due-%d", i);
			put_item(s, q, buf, len, 0, 0, now - 30000 + i, now - 60000);
		}
		for (i = 0; i < 10; i++) {
			len = (size_t)snprintf(buf, sizeof(buf), "r%d%c\r\nx", i, '\0');
			put_item(s, q, buf, i == 9 ? 0 : len, (uint32_t)(i * 1000003u),
			    i % 2 ? now + 86400000 * 30LL : 0, 0, now);
		}
		/* Expected restart order: the two open ones (r0, r1) back at the
		 * head, the other ready ones, the promoted ones, then the
		 * delayed ones by due time. */
		for (i = 0; i < 10; i++) {
			m->len[m->n] = i == 9 ? 0 : (size_t)snprintf(m->data[m->n], 32,
			    "r%d%c\r\nx", i, '\0');
			m->n++;
		}
		for (i = 0; i < 2; i++, m->n++)
			m->len[m->n] = (size_t)snprintf(m->data[m->n], 32, "due-%d", i);
		for (i = 0; i < 3; i++, m->n++)
			m->len[m->n] = (size_t)snprintf(m->data[m->n], 32, "later-%d", i);
		m->delayed = 3;
		ck_assert_int_eq(s->driver->take(s, q, SAKER_TAKE_OPEN, now, take_cb, NULL), SAKER_OK);
		ck_assert_int_eq(s->driver->take(s, q, SAKER_TAKE_OPEN, now, take_cb, NULL), SAKER_OK);
	}
	/* an empty queue is copied too */
	ck_assert_int_eq(s->driver->queue_open(s, "empty", 5, true, NULL, &q), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
}

struct check_ctx {
	const struct model *m;
	int i;
};

static int
check_cb(void *arg, const struct saker_item *it)
{
	struct check_ctx *c = arg;
	const struct model *m = c->m;
	int i = c->i++;

	ck_assert_int_lt(i, m->n);
	ck_assert_msg(it->len == m->len[i] && memcmp(it->data, m->data[i], it->len) == 0,
	    "queue %s item %d differs", m->name, i);
	if (i >= m->n - m->delayed)
		ck_assert_int_eq(it->state, SAKER_ITEM_DELAYED);
	else
		ck_assert_int_eq(it->state, SAKER_ITEM_READY);
	return 0;
}

/* The store at spec holds exactly what a restart of fill_store()'s store
 * would show. */
DRIVER_HELPER static void
check_store(const char *spec)
{
	saker_store *s = open_store(spec, false, true);
	saker_queue *q;
	int qi;

	for (qi = 0; qi < 3; qi++) {
		struct check_ctx c = { &models[qi], 0 };
		ck_assert_int_eq(s->driver->queue_open(s, models[qi].name,
		    strlen(models[qi].name), false, NULL, &q), SAKER_OK);
		ck_assert_int_eq(s->driver->iterate(s, q, check_cb, &c), 0);
		ck_assert_int_eq(c.i, models[qi].n);
	}
	ck_assert_int_eq(s->driver->queue_open(s, "empty", 5, false, NULL, &q), SAKER_OK);
	saker_store_close(s);
}

DRIVER_HELPER static char *
dump_to_string(const char *dir, const char *spec, size_t *len)
{
	char *out = NULL, *err = NULL;
	int rc = tl_run_saker(dir, NULL, &out, len, &err, "dump", "-q", spec, NULL);

	ck_assert_msg(rc == 0, "dump %s: status %d: %s", spec, rc, err);
	free(err);
	return out;
}

/* ------------------------------------------------------------------ */
/* the dump format, on synthetic streams */

/* An attribute record holding the id `id`, in a static buffer. */
static const void *
attrs_with_id(const char *id, size_t *len)
{
	static unsigned char rec[SAKER_ATTRS_MAX];

	*len = itemattr_set(rec, sizeof(rec), NULL, 0, ITEMATTR_ID, id, strlen(id));
	ck_assert_uint_gt(*len, 0);
	return rec;
}

/* Queue "a": a ready item with attributes and binary data, an empty
 * delayed one; ids "k1" and "k\0/2"; queue "b+c" empty.  Version 3 writes
 * all of it; version 2 leaves attributes and ids out, version 1 the
 * delivery counts too. */
static char *
synthetic_stream_version(size_t *len, uint32_t version)
{
	struct dump_writer w;
	struct saker_item it;
	char *buf = NULL;
	FILE *fp = open_memstream(&buf, len);
	static const char bin[] = "a\0b\r\n\xff";

	ck_assert_ptr_nonnull(fp);
	dump_writer_start_version(&w, fp, version);
	dump_write_queue(&w, "a", 1);
	memset(&it, 0, sizeof(it));
	it.data = bin;
	it.len = sizeof(bin);
	it.flags = 0xdeadbeef;
	it.expires_ms = 123456789012LL;
	it.created_ms = 42;
	it.deliveries = 70000;
	it.attrs = attrs_with_id("order-7", &it.attrs_len);
	dump_write_item(&w, &it, MIG_READY);
	it.len = 0;
	it.attrs = NULL;
	it.attrs_len = 0;
	it.due_ms = 9000000000000LL;
	dump_write_item(&w, &it, MIG_DELAYED);
	dump_write_id(&w, "k1", 2, 8000000000000LL);
	dump_write_id(&w, "k\0/2", 4, 8000000000001LL);
	dump_write_queue_end(&w);
	dump_write_queue(&w, "b+c", 3);
	dump_write_queue_end(&w);
	ck_assert_int_eq(dump_writer_finish(&w), 0);
	fclose(fp);
	return buf;
}

static char *
synthetic_stream(size_t *len)
{
	return synthetic_stream_version(len, DUMP_VERSION);
}

/* Read a whole stream; 0 on success, -1 with e set. */
static int
read_stream(const char *buf, size_t len, int *nitems, struct mig_err *e)
{
	struct dump_reader r;
	struct dump_rec rec;
	FILE *fp = fmemopen((void *)(uintptr_t)buf, len, "rb");
	int rc;

	*nitems = 0;
	if (len == 0)
		fp = fopen("/dev/null", "rb");
	ck_assert_ptr_nonnull(fp);
	if ((rc = dump_reader_start(&r, fp, e)) == 0) {
		while ((rc = dump_read(&r, &rec, e)) > 0 && rc != DUMP_REC_END)
			if (rc == DUMP_REC_ITEM)
				(*nitems)++;
		rc = rc == DUMP_REC_END ? 0 : -1;
	}
	dump_reader_free(&r);
	fclose(fp);
	return rc;
}

START_TEST(dump_format_roundtrip)
{
	size_t len;
	char *buf = synthetic_stream(&len);
	struct dump_reader r;
	struct dump_rec rec;
	struct mig_err e;
	FILE *fp = fmemopen(buf, len, "rb");

	const void *id;
	size_t idlen;

	ck_assert_int_eq(memcmp(buf, "SAKERDMP\r\n\x1a\n\0\0\0\3", 16), 0);
	ck_assert_int_eq(dump_reader_start(&r, fp, &e), 0);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_QUEUE);
	ck_assert_int_eq(rec.name_len, 1);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_ITEM);
	ck_assert_int_eq(rec.state, MIG_READY);
	ck_assert_int_eq(rec.item.len, 7);
	ck_assert_int_eq(memcmp(rec.item.data, "a\0b\r\n\xff", 7), 0);
	ck_assert_uint_eq(rec.item.flags, 0xdeadbeef);
	ck_assert_int_eq(rec.item.expires_ms, 123456789012LL);
	ck_assert_int_eq(rec.item.due_ms, 0);
	ck_assert_int_eq(rec.item.created_ms, 42);
	ck_assert_uint_eq(rec.item.deliveries, 70000);
	/* the attribute record comes back byte-exact */
	ck_assert(itemattr_get(rec.item.attrs, rec.item.attrs_len, ITEMATTR_ID,
	    &id, &idlen));
	ck_assert(idlen == 7 && memcmp(id, "order-7", 7) == 0);
	ck_assert_uint_eq(rec.item.attrs_len, 1 + 3 + 7);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_ITEM);
	ck_assert_int_eq(rec.state, MIG_DELAYED);
	ck_assert_int_eq(rec.item.len, 0);
	ck_assert_uint_eq(rec.item.attrs_len, 0);
	ck_assert_int_eq(rec.item.due_ms, 9000000000000LL);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_ID);
	ck_assert(rec.key_len == 2 && memcmp(rec.key, "k1", 2) == 0);
	ck_assert_int_eq(rec.expires_ms, 8000000000000LL);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_ID);
	ck_assert(rec.key_len == 4 && memcmp(rec.key, "k\0/2", 4) == 0);
	ck_assert_int_eq(rec.expires_ms, 8000000000001LL);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_QUEUE_END);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_QUEUE);
	ck_assert_int_eq(rec.name_len, 3);
	ck_assert_int_eq(memcmp(rec.name, "b+c", 3), 0);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_QUEUE_END);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_END);
	dump_reader_free(&r);
	fclose(fp);
	free(buf);
}
END_TEST

/* Version 1 streams (no delivery counts) and version 2 streams (no
 * attributes, no ids) are still read. */
START_TEST(dump_format_old_versions)
{
	size_t len, len2, len3;
	char *buf = synthetic_stream_version(&len, 1);
	char *buf2 = synthetic_stream_version(&len2, 2);
	char *buf3 = synthetic_stream(&len3);
	struct dump_reader r;
	struct dump_rec rec;
	struct mig_err e;
	FILE *fp = fmemopen(buf, len, "rb");

	ck_assert_int_eq(memcmp(buf, "SAKERDMP\r\n\x1a\n\0\0\0\1", 16), 0);
	ck_assert_int_eq(memcmp(buf2, "SAKERDMP\r\n\x1a\n\0\0\0\2", 16), 0);
	ck_assert_uint_eq(len + 8, len2);	/* 4 bytes per item */
	/* version 3: 2 bytes per item, 11 of attributes, two ids of 11 + 2, 11 + 4 */
	ck_assert_uint_eq(len2 + 4 + 11 + 13 + 15, len3);
	ck_assert_int_eq(dump_reader_start(&r, fp, &e), 0);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_QUEUE);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_ITEM);
	ck_assert_int_eq(rec.item.len, 7);
	ck_assert_uint_eq(rec.item.flags, 0xdeadbeef);
	ck_assert_int_eq(rec.item.created_ms, 42);
	ck_assert_uint_eq(rec.item.deliveries, 0);
	ck_assert_uint_eq(rec.item.attrs_len, 0);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_ITEM);
	ck_assert_int_eq(rec.item.due_ms, 9000000000000LL);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_QUEUE_END);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_QUEUE);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_QUEUE_END);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_END);
	dump_reader_free(&r);
	fclose(fp);
	fp = fmemopen(buf2, len2, "rb");
	ck_assert_int_eq(dump_reader_start(&r, fp, &e), 0);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_QUEUE);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_ITEM);
	ck_assert_int_eq(rec.item.len, 7);
	ck_assert_uint_eq(rec.item.deliveries, 70000);
	ck_assert_uint_eq(rec.item.attrs_len, 0);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_ITEM);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_QUEUE_END);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_QUEUE);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_QUEUE_END);
	ck_assert_int_eq(dump_read(&r, &rec, &e), DUMP_REC_END);
	dump_reader_free(&r);
	fclose(fp);
	/* version 4 is refused with the versions this build reads */
	buf[15] = 4;
	fp = fmemopen(buf, len, "rb");
	ck_assert_int_eq(dump_reader_start(&r, fp, &e), -1);
	ck_assert_msg(strstr(e.msg, "versions 1 to 3") != NULL, "%s", e.msg);
	dump_reader_free(&r);
	fclose(fp);
	free(buf);
	free(buf2);
	free(buf3);
}
END_TEST

/* A stream whose checksums are right but whose content is not: malformed
 * attributes, an id of a bad length, an item after the ids, an id in a
 * version 2 stream.  Each is refused with a message naming it. */
static char *
stream_with(size_t *len, uint32_t version, const void *attrs, size_t alen,
    const void *key, size_t klen, bool item_after)
{
	struct dump_writer w;
	struct saker_item it;
	char *buf = NULL;
	FILE *fp = open_memstream(&buf, len);

	ck_assert_ptr_nonnull(fp);
	dump_writer_start_version(&w, fp, version);
	dump_write_queue(&w, "q", 1);
	memset(&it, 0, sizeof(it));
	it.data = "d";
	it.len = 1;
	it.attrs = attrs;
	it.attrs_len = alen;
	dump_write_item(&w, &it, MIG_READY);
	if (key != NULL) {
		/* bypass the writer's version check: a damaged old stream */
		uint32_t v = w.version;
		w.version = 3;
		dump_write_id(&w, key, klen, 9000000000000LL);
		w.version = v;
	}
	if (item_after)
		dump_write_item(&w, &it, MIG_READY);
	dump_write_queue_end(&w);
	ck_assert_int_eq(dump_writer_finish(&w), 0);
	fclose(fp);
	return buf;
}

START_TEST(dump_format_bad_content)
{
	static const unsigned char trunc_entry[] = { 1, 1, 0, 5, 'a' };
	static const unsigned char good[] = { 1, 1, 0, 1, 'a' };
	char key[SAKER_DEDUP_KEY_MAX + 1];
	struct mig_err e;
	size_t len;
	char *buf;
	int n;

	memset(key, 'k', sizeof(key));
	buf = stream_with(&len, 3, good, sizeof(good), "k", 1, false);
	ck_assert_int_eq(read_stream(buf, len, &n, &e), 0);
	free(buf);
	buf = stream_with(&len, 3, trunc_entry, sizeof(trunc_entry), NULL, 0, false);
	ck_assert_int_eq(read_stream(buf, len, &n, &e), -1);
	ck_assert_msg(strstr(e.msg, "malformed item attributes") != NULL, "%s", e.msg);
	free(buf);
	buf = stream_with(&len, 3, NULL, 0, key, sizeof(key), false);
	ck_assert_int_eq(read_stream(buf, len, &n, &e), -1);
	ck_assert_msg(strstr(e.msg, "id of 129 bytes") != NULL, "%s", e.msg);
	free(buf);
	buf = stream_with(&len, 3, NULL, 0, key, 128, true);
	ck_assert_int_eq(read_stream(buf, len, &n, &e), -1);
	ck_assert_msg(strstr(e.msg, "item after the queue's ids") != NULL, "%s", e.msg);
	free(buf);
	buf = stream_with(&len, 2, NULL, 0, "k", 1, false);
	ck_assert_int_eq(read_stream(buf, len, &n, &e), -1);
	ck_assert_msg(strstr(e.msg, "unknown record type 0x49") != NULL, "%s", e.msg);
	free(buf);
}
END_TEST

START_TEST(dump_format_bad_input)
{
	size_t len, i;
	char *buf = synthetic_stream(&len), *copy = malloc(len + 1);
	struct mig_err e;
	int n;

	ck_assert_int_eq(read_stream(buf, len, &n, &e), 0);
	ck_assert_int_eq(n, 2);
	/* every proper prefix is refused, as truncated or bad magic */
	for (i = 0; i < len; i++) {
		ck_assert_msg(read_stream(buf, i, &n, &e) == -1, "prefix %zu accepted", i);
		ck_assert_msg(strstr(e.msg, "truncated") != NULL || strstr(e.msg, "magic") != NULL,
		    "prefix %zu: %s", i, e.msg);
	}
	/* any single flipped byte is refused */
	for (i = 0; i < len; i++) {
		memcpy(copy, buf, len);
		copy[i] ^= 0x20;
		ck_assert_msg(read_stream(copy, len, &n, &e) == -1, "flip at %zu accepted", i);
	}
	memcpy(copy, buf, len);
	copy[0] = 'X';
	ck_assert_int_eq(read_stream(copy, len, &n, &e), -1);
	ck_assert_ptr_nonnull(strstr(e.msg, "not a saker dump"));
	memcpy(copy, buf, len);
	copy[15] = 4;
	ck_assert_int_eq(read_stream(copy, len, &n, &e), -1);
	ck_assert_ptr_nonnull(strstr(e.msg, "version 4"));
	memcpy(copy, buf, len);
	copy[len] = 'Z';
	ck_assert_int_eq(read_stream(copy, len + 1, &n, &e), -1);
	ck_assert_ptr_nonnull(strstr(e.msg, "after the end"));
	free(copy);
	free(buf);
}
END_TEST

/* The copy engine's source walk hands out items with their attribute
 * records and, after them, the queue's live ids sorted by key (the
 * driver lists them in no order); an expired id is left out.  On the
 * memory driver, in-process. */
struct walk_log {
	char text[512];
	size_t n;
};

static int
wl_queue(void *arg, const char *name, size_t len)
{
	struct walk_log *l = arg;

	l->n += (size_t)snprintf(l->text + l->n, sizeof(l->text) - l->n, "Q%.*s ",
	    (int)len, name);
	return 0;
}

static int
wl_item(void *arg, const struct saker_item *it, int state, bool was_open)
{
	struct walk_log *l = arg;
	const void *v;
	size_t vlen;

	(void)was_open;
	if (!itemattr_get(it->attrs, it->attrs_len, ITEMATTR_ID, &v, &vlen))
		v = "-", vlen = 1;
	l->n += (size_t)snprintf(l->text + l->n, sizeof(l->text) - l->n, "%c%.*s/%.*s ",
	    state, (int)it->len, (const char *)it->data, (int)vlen, (const char *)v);
	return 0;
}

static int
wl_id(void *arg, const void *key, size_t len, int64_t expires_ms)
{
	struct walk_log *l = arg;

	l->n += (size_t)snprintf(l->text + l->n, sizeof(l->text) - l->n, "I%.*s@%lld ",
	    (int)len, (const char *)key, (long long)(expires_ms % 1000));
	return 0;
}

START_TEST(source_walk_ids)
{
	static const struct mig_source_cb cb = { wl_queue, wl_item, NULL, wl_id };
	saker_store *s = open_store("memory", true, false);
	int64_t now = 1700000000000LL;
	struct saker_item it;
	struct walk_log l;
	struct mig_err e;
	saker_queue *q;

	ck_assert_int_eq(saker_store_queue_open(s, "q", 1, true, NULL, &q), SAKER_OK);
	memset(&it, 0, sizeof(it));
	it.data = "a";
	it.len = 1;
	it.attrs = attrs_with_id("ka", &it.attrs_len);
	ck_assert_int_eq(saker_store_put(s, q, &it, now), SAKER_OK);
	it.data = "b";
	it.attrs = NULL;
	it.attrs_len = 0;
	ck_assert_int_eq(saker_store_put(s, q, &it, now), SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_load(s, q, "zz", 2, now + 5001, now), SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_load(s, q, "ka", 2, now + 5002, now), SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_load(s, q, "gone", 4, now + 10, now), SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_load(s, q, "k", 1, now + 5003, now), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	memset(&l, 0, sizeof(l));
	ck_assert_int_eq(mig_source_each(s, now + 10, &cb, &l, &e), 0);
	ck_assert_str_eq(l.text, "Qq Ra/ka Rb/- Ik@3 Ika@2 Izz@1 ");
	saker_store_close(s);
}
END_TEST

START_TEST(digest_order_matters)
{
	struct mig_digest a, b;
	struct saker_item x, y;

	memset(&x, 0, sizeof(x));
	memset(&y, 0, sizeof(y));
	x.data = "x";
	x.len = 1;
	y.data = "y";
	y.len = 1;
	mig_digest_init(&a);
	mig_digest_init(&b);
	mig_digest_add(&a, &x, MIG_READY);
	mig_digest_add(&a, &y, MIG_READY);
	mig_digest_add(&b, &y, MIG_READY);
	mig_digest_add(&b, &x, MIG_READY);
	ck_assert_uint_ne(a.ready_chain, b.ready_chain);
	/* the delayed sum is order-free by design (--append merges) */
	mig_digest_init(&a);
	mig_digest_init(&b);
	x.due_ms = 5;
	y.due_ms = 6;
	mig_digest_add(&a, &x, MIG_DELAYED);
	mig_digest_add(&a, &y, MIG_DELAYED);
	mig_digest_add(&b, &y, MIG_DELAYED);
	mig_digest_add(&b, &x, MIG_DELAYED);
	ck_assert_uint_eq(a.delayed_sum, b.delayed_sum);
	ck_assert_uint_ne(a.delayed_chain, b.delayed_chain);
}
END_TEST

/* ------------------------------------------------------------------ */
/* usage and refusals that need no driver */

#ifdef HAVE_LMDB
/* Flip one byte of `marker` in every file of dir/sub that holds it. */
static int
flip_marker(const char *dir, const char *marker)
{
	static const char *const files[] = { "data.mdb", "saker.journal", NULL };
	size_t mlen = strlen(marker), i, k, n;
	char path[1024];
	unsigned char *buf;
	struct stat sb;
	int fd, hits = 0;

	for (k = 0; files[k] != NULL; k++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[k]);
		if (stat(path, &sb) != 0 || sb.st_size == 0)
			continue;
		fd = open(path, O_RDWR);
		ck_assert_int_ge(fd, 0);
		buf = malloc((size_t)sb.st_size);
		ck_assert_ptr_nonnull(buf);
		n = (size_t)pread(fd, buf, (size_t)sb.st_size, 0);
		for (i = 0; n >= mlen && i <= n - mlen; i++)
			if (memcmp(buf + i, marker, mlen) == 0) {
				buf[i + 2] ^= 0x01;
				ck_assert_int_eq(pwrite(fd, buf + i + 2, 1,
				    (off_t)(i + 2)), 1);
				hits++;
			}
		free(buf);
		close(fd);
	}
	return hits;
}

/* saker check: 0 on a sound store; 1 and a line naming the queue on a
 * damaged item; 1 and one line on a damaged page. */
START_TEST(check_store_cmd)
{
	char *dir = tl_mkdtemp(), *sdir = tl_strdupf("%s/s", dir);
	char *spec = tl_strdupf("lmdb:%s", sdir), *out = NULL, *err = NULL;
	unsigned char page[4096];
	saker_store *s;
	saker_queue *q;
	struct stat sb;
	char path[1024];
	int fd;

	s = open_store(spec, true, false);
	ck_assert_int_eq(s->driver->queue_open(s, "good", 4, true, NULL, &q),
	    SAKER_OK);
	put_item(s, q, "fine", 4, 0, 0, 0, 1700000000000LL);
	ck_assert_int_eq(s->driver->queue_open(s, "hurt", 4, true, NULL, &q),
	    SAKER_OK);
	put_item(s, q, "a marker to flip", 16, 0, 0, 0, 1700000000000LL);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);

	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "check",
	    spec, NULL), 0);
	ck_assert_msg(strstr(out, "2 queues, 2 items, 0 deduplication ids read; no damage found") !=
	    NULL, "out: %s", out);
	free(out);
	free(err);

	/* -q: nothing to say about a sound store */
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "check", "-q",
	    spec, NULL), 0);
	ck_assert_str_eq(out, "");
	free(out);
	free(err);

	ck_assert_int_gt(flip_marker(sdir, "a marker to flip"), 0);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "check",
	    spec, NULL), 1);
	ck_assert_msg(strstr(out, "damaged: queue 'hurt'") != NULL &&
	    strstr(out, "'good'") == NULL && strstr(out, "DAMAGED") != NULL,
	    "out: %s", out);
	free(out);
	free(err);
	/* -q: damage is reported in full, summary included */
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "check", "-q",
	    spec, NULL), 1);
	ck_assert_msg(strstr(out, "damaged: queue 'hurt'") != NULL &&
	    strstr(out, "DAMAGED") != NULL, "out: %s", out);
	free(out);
	free(err);

	/* a zeroed page: the walk says which, one line on stderr */
	snprintf(path, sizeof(path), "%s/data.mdb", sdir);
	ck_assert_int_eq(stat(path, &sb), 0);
	memset(page, 0, sizeof(page));
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, page, sizeof(page),
	    (off_t)(sb.st_size - 4096)), 4096);
	close(fd);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "check",
	    spec, NULL), 1);
	ck_assert_msg(strstr(err, "is damaged: page") != NULL &&
	    strchr(err, '\n') == err + strlen(err) - 1, "err: %s", err);
	free(out);
	free(err);
	free(spec);
	free(sdir);
	tl_rmrf(dir);
	free(dir);
}
END_TEST
#endif

/* Sizes in the progress line and the summary: B, then KiB and MiB with
 * one decimal, GiB with two. */
START_TEST(human_bytes)
{
	char b[32];

	mig_human_bytes(b, sizeof(b), 0);
	ck_assert_str_eq(b, "0 B");
	mig_human_bytes(b, sizeof(b), 1023);
	ck_assert_str_eq(b, "1023 B");
	mig_human_bytes(b, sizeof(b), 1024);
	ck_assert_str_eq(b, "1.0 KiB");
	mig_human_bytes(b, sizeof(b), 1536);
	ck_assert_str_eq(b, "1.5 KiB");
	mig_human_bytes(b, sizeof(b), 5u << 20);
	ck_assert_str_eq(b, "5.0 MiB");
	mig_human_bytes(b, sizeof(b), (3ull << 30) + (1ull << 29));
	ck_assert_str_eq(b, "3.50 GiB");
}
END_TEST

START_TEST(cli_usage)
{
	char *dir = tl_mkdtemp(), *out = NULL, *err = NULL;

	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "--help", NULL), 0);
	ck_assert_ptr_nonnull(strstr(out, "migrate"));
	free(out);
	free(err);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "--version", NULL), 0);
	ck_assert_ptr_nonnull(strstr(out, PACKAGE_VERSION));
	free(out);
	free(err);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "frobnicate", NULL), 2);
	ck_assert_ptr_nonnull(strstr(err, "unknown command"));
	free(err);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, NULL), 2);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "migrate", "x", NULL), 2);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "migrate", "--bogus", "a", "b", NULL), 2);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "dump", NULL), 2);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "load", NULL), 2);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "get", "-t", "x", "q", NULL), 2);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "put", "bad/name", "x", NULL), 2);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "stats", "extra", NULL), 2);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, NULL, "help", "migrate", NULL), 0);
	ck_assert_ptr_nonnull(strstr(out, "--append"));
	free(out);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, NULL, "dump", "--help", NULL), 0);
	free(out);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, NULL, "load", "--help", NULL), 0);
	free(out);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, NULL, "put", "--help", NULL), 0);
	free(out);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, NULL, "get", "--help", NULL), 0);
	free(out);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, NULL, "stats", "--help", NULL), 0);
	free(out);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

START_TEST(refuse_types)
{
	char *dir = tl_mkdtemp(), *err = NULL, *dst = tl_strdupf("lmdb:%s/d", dir);

	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "migrate", "nosuch:x", dst, NULL), 1);
	ck_assert_msg(strstr(err, "source store 'nosuch:x': unknown store type "
	    "'nosuch' (compiled-in types: ") != NULL, "%s", err);
	free(err);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "migrate", "memory", dst, NULL), 1);
	ck_assert_ptr_nonnull(strstr(err, "not durable"));
	free(err);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "migrate", dst, "memory", NULL), 1);
	ck_assert_ptr_nonnull(strstr(err, "not durable"));
	free(err);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "load", "bogus:x", NULL), 1);
	ck_assert_msg(strstr(err, "destination store 'bogus:x': unknown store "
	    "type 'bogus'") != NULL, "%s", err);
	free(err);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "migrate", dst, dst, NULL), 1);
	ck_assert_ptr_nonnull(strstr(err, "same"));
	free(err);
	ck_assert(!exists(dst + 5));
	tl_rmrf(dir);
	free(dst);
	free(dir);
}
END_TEST

/* A type with no driver gets the registry's message, the one sakerd gives
 * (saker_store_type_error()), after the role: a known driver this build
 * left out says "not compiled in" with the package to install.  Which
 * driver is absent depends on the build, as in sakerd_bad_values; the
 * message of a never-known type is compared whole in every build. */
START_TEST(migrate_absent_driver)
{
	char *dir = tl_mkdtemp(), *err = NULL, *want;
	char why[512];

	saker_store_type_error("nosuch:x", 6, why, sizeof(why));
	want = tl_strdupf("saker migrate: source store 'nosuch:x': %s\n", why);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "migrate",
	    "nosuch:x", "nosuch:y", NULL), 1);
	ck_assert_msg(strstr(err, want) != NULL, "%s", err);
	free(want);
	free(err);
	/* the type ends at its first option, as in sakerd's --store */
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "load",
	    "nosuch,a=1:x", NULL), 1);
	ck_assert_msg(strstr(err, "destination store 'nosuch,a=1:x': unknown "
	    "store type 'nosuch' (") != NULL, "%s", err);
	free(err);
#if !defined(HAVE_POSTGRES) || !defined(HAVE_SQLITE) || !defined(HAVE_LMDB)
	{
#if !defined(HAVE_POSTGRES)
		const char *spec = "postgres:x", *type = "postgres", *lib = "libpq",
		    *pkg = "libpq-dev";
#elif !defined(HAVE_SQLITE)
		const char *spec = "sqlite:x", *type = "sqlite", *lib = "sqlite3",
		    *pkg = "libsqlite3-dev";
#else
		const char *spec = "lmdb:x", *type = "lmdb", *lib = "liblmdb",
		    *pkg = "liblmdb-dev";
#endif
		char *tail = tl_strdupf("store type '%s' is not compiled in: "
		    "configure found no %s (or had --with-%s=no); install %s and "
		    "rebuild", type, lib, type, pkg);

		ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err,
		    "migrate", spec, "nosuch:y", NULL), 1);
		want = tl_strdupf("source store '%s': %s", spec, tail);
		ck_assert_msg(strstr(err, want) != NULL, "%s", err);
		free(want);
		free(err);
		ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err,
		    "load", spec, NULL), 1);
		want = tl_strdupf("destination store '%s': %s", spec, tail);
		ck_assert_msg(strstr(err, want) != NULL, "%s", err);
		free(want);
		free(err);
		free(tail);
	}
#endif
	tl_rmrf(dir);
	free(dir);
}
END_TEST

#if defined(HAVE_LMDB) && defined(HAVE_SQLITE)
/* ------------------------------------------------------------------ */
/* with the durable drivers */

START_TEST(migrate_roundtrip)
{
	char *dir = tl_mkdtemp(), *out = NULL, *err = NULL;
	char *a = tl_strdupf("lmdb:%s/a", dir), *b = tl_strdupf("sqlite:%s/b.db", dir);
	char *c = tl_strdupf("lmdb:%s/c", dir);
	char *d1, *d2, *d3;
	size_t l1, l2, l3;
	int rc;

	fill_store(a);
	d1 = dump_to_string(dir, a, &l1);
	rc = tl_run_saker(dir, NULL, &out, NULL, &err, "migrate", a, b, NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, err);
	ck_assert_ptr_nonnull(strstr(out, "verified"));
	ck_assert_ptr_nonnull(strstr(out, "alpha: 15 items (12 ready, 3 delayed, 2 were open)"));
	free(out);
	free(err);
	check_store(b);
	rc = tl_run_saker(dir, NULL, &out, NULL, &err, "migrate", "-q", b, c, NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, err);
	ck_assert_str_eq(out, "");
	free(out);
	free(err);
	check_store(c);
	/* the source is untouched: still has its open items */
	d2 = dump_to_string(dir, b, &l2);
	d3 = dump_to_string(dir, c, &l3);
	ck_assert(l1 == l2 && memcmp(d1, d2, l1) == 0);
	ck_assert(l1 == l3 && memcmp(d1, d3, l1) == 0);
	ck_no_temporaries(dir);
	free(d1);
	free(d2);
	free(d3);
	free(a);
	free(b);
	free(c);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

START_TEST(migrate_refusals)
{
	char *dir = tl_mkdtemp(), *err = NULL, *out = NULL;
	char *a = tl_strdupf("lmdb:%s/a", dir), *b = tl_strdupf("sqlite:%s/b.db", dir);
	char *a2 = tl_strdupf("lmdb:%s/./a/", dir);
	char *missing = tl_strdupf("lmdb:%s/missing", dir);
	char *d1, *d2;
	size_t l1, l2;
	saker_store *s;
	int rc;

	fill_store(a);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "migrate", a, a2, NULL), 1);
	ck_assert_ptr_nonnull(strstr(err, "same"));
	free(err);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "migrate", missing, b, NULL), 1);
	ck_assert_ptr_nonnull(strstr(err, "source"));
	free(err);
	ck_assert(!exists(b + 7));
	/* a source held by a running server (its exclusive lock) */
	s = open_store(a, false, false);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "migrate", a, b, NULL), 1);
	ck_assert_msg(strstr(err, "in use") != NULL, "%s", err);
	free(err);
	saker_store_close(s);
	ck_assert(!exists(b + 7));
	/* a non-empty destination */
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "migrate", "-q", a, b, NULL), 0);
	d1 = dump_to_string(dir, b, &l1);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "migrate", a, b, NULL), 1);
	ck_assert_ptr_nonnull(strstr(err, "not empty"));
	ck_assert_ptr_nonnull(strstr(err, "--append"));
	free(err);
	/* --append: the source's items after the existing ones */
	rc = tl_run_saker(dir, NULL, &out, NULL, &err, "migrate", "--append", a, b, NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, err);
	free(out);
	free(err);
	{
		saker_store *t = open_store(b, false, true);
		struct saker_queue_stats st;
		saker_queue *q;

		ck_assert_int_eq(t->driver->queue_open(t, "alpha", 5, false, NULL, &q), SAKER_OK);
		ck_assert_int_eq(saker_store_queue_stats(t, q, &st), SAKER_OK);
		ck_assert_uint_eq(st.items, 24);
		ck_assert_uint_eq(st.delayed_items, 6);
		saker_store_close(t);
	}
	d2 = dump_to_string(dir, b, &l2);
	ck_assert_uint_gt(l2, l1);
	ck_no_temporaries(dir);
	free(d1);
	free(d2);
	free(a);
	free(a2);
	free(b);
	free(missing);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

static uint64_t hook_at;

static void
interrupt_hook(uint64_t n)
{
	if (n == hook_at)
		raise(SIGINT);
}

static void
fill_many(const char *spec, int n)
{
	saker_store *s = open_store(spec, true, false);
	saker_queue *q;
	int64_t now = saker_now_ms();
	char buf[64];
	int i;

	ck_assert_int_eq(s->driver->queue_open(s, "many", 4, true, NULL, &q), SAKER_OK);
	memset(buf, 'm', sizeof(buf));
	for (i = 0; i < n; i++) {
		snprintf(buf, sizeof(buf), "%08d", i);
		put_item(s, q, buf, sizeof(buf), 0, 0, 0, now);
	}
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
}

static void
put_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
}

/* dump -o: written under a temporary name and renamed into place, so a
 * file that cannot be made or replaced is refused with nothing left
 * behind; --progress and -q as for migrate. */
START_TEST(dump_output)
{
	char *dir = tl_mkdtemp(), *out = NULL, *err = NULL;
	char *a = tl_strdupf("lmdb:%s/a", dir), *file = tl_strdupf("%s/d.dump", dir);
	char *sub = tl_strdupf("%s/sub", dir);
	struct stat sb;

	fill_store(a);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "dump", "-o",
	    "/nonexistent/dir/d", a, NULL), 1);
	ck_assert_msg(strstr(err, "saker dump: cannot create /nonexistent/dir/d.tmp-")
	    != NULL, "%s", err);
	free(out);
	free(err);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "dump", "-q",
	    "-o", sub, a, NULL), 1);
	ck_assert_msg(strstr(err, "saker dump: cannot write ") != NULL &&
	    strstr(err, ": Is a directory") != NULL, "%s", err);
	free(out);
	free(err);
	ck_no_temporaries(dir);

	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "dump",
	    "--progress", "-o", file, a, NULL), 0);
	ck_assert_msg(err[0] == '\r' && strstr(err, " items (100%)") != NULL &&
	    strstr(err, "dumped ") != NULL, "%s", err);
	free(out);
	free(err);
	ck_assert_int_eq(stat(file, &sb), 0);
	ck_assert_int_gt(sb.st_size, 0);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "dump", "-q",
	    "-o", file, a, NULL), 0);
	ck_assert_str_eq(err, "");
	free(out);
	free(err);
	free(a);
	free(file);
	free(sub);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

/* --progress draws the meter on stderr even when it is no terminal: a
 * line redrawn with \r, ending at 100% and a newline; -q draws none. */
START_TEST(migrate_progress_line)
{
	char *dir = tl_mkdtemp(), *out = NULL, *err = NULL, *p;
	char *a = tl_strdupf("lmdb:%s/a", dir), *b = tl_strdupf("sqlite:%s/b.db", dir);
	int rc;

	fill_store(a);
	rc = tl_run_saker(dir, NULL, &out, NULL, &err, "migrate", "--progress", a,
	    b, NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, err);
	ck_assert_msg(err[0] == '\r', "%s", err);
	ck_assert_msg((p = strstr(err, " items (100%)  ")) != NULL, "%s", err);
	ck_assert_msg(strstr(p, " items/s") != NULL, "%s", err);
	ck_assert_msg(err[strlen(err) - 1] == '\n', "%s", err);
	ck_assert_ptr_nonnull(strstr(out, "verified"));
	free(out);
	free(err);
	free(a);
	a = tl_strdupf("lmdb:%s/c", dir);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "migrate",
	    "-q", b, a, NULL), 0);
	ck_assert_str_eq(err, "");
	ck_assert_str_eq(out, "");
	free(out);
	free(err);
	free(a);
	free(b);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

/* A destination that is not what its type needs, or a temporary left
 * by a killed run, is refused before anything is written, each with the
 * reason; what was there stays. */
START_TEST(migrate_destination_refusals)
{
	char *dir = tl_mkdtemp(), *err = NULL;
	char *a = tl_strdupf("lmdb:%s/a", dir);
	char *file = tl_strdupf("%s/plain", dir), *sub = tl_strdupf("%s/sub", dir);
	char *junk = tl_strdupf("%s/junk.db", dir);
	char *to_file = tl_strdupf("lmdb:%s", file), *to_dir = tl_strdupf("sqlite:%s", sub);
	char *to_junk = tl_strdupf("sqlite:%s", junk);
	char *to_new = tl_strdupf("sqlite:%s/new.db", dir);
	char *tmp = tl_strdupf("%s/new.db.tmp-%ld", dir, (long)getpid());
	char *argv[] = { "migrate", "-q", a, to_new, NULL };
	char *text;
	size_t len;
	FILE *fe;
	int se, rc;

	fill_store(a);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "migrate", a,
	    "sqlite:", NULL), 1);
	ck_assert_msg(strstr(err, "destination store 'sqlite:' needs a location: "
	    "sqlite:FILE") != NULL, "%s", err);
	free(err);

	put_file(file, "not a store");
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "migrate", a,
	    to_file, NULL), 1);
	ck_assert_msg(strstr(err, "exists and is not a directory") != NULL, "%s", err);
	free(err);

	ck_assert_int_eq(mkdir(sub, 0700), 0);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "migrate", a,
	    to_dir, NULL), 1);
	ck_assert_msg(strstr(err, "is a directory, expected a file") != NULL, "%s", err);
	free(err);

	/* a file that is no SQLite database: not taken for an empty one */
	put_file(junk, "this is not an SQLite database, not at all");
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "migrate", a,
	    to_junk, NULL), 1);
	ck_assert_msg(strstr(err, "exists but cannot be opened as a sqlite store")
	    != NULL, "%s", err);
	free(err);
	text = tl_read_file(junk, &len);
	ck_assert_str_eq(text, "this is not an SQLite database, not at all");
	free(text);

	/* a temporary of this process's pid: in-process, so the pid is ours */
	put_file(tmp, "left over");
	ck_assert_ptr_nonnull(fe = tmpfile());
	fflush(stderr);
	se = dup(2);
	dup2(fileno(fe), 2);
	rc = migrate_main(4, argv);
	fflush(stderr);
	dup2(se, 2);
	close(se);
	ck_assert_int_eq(rc, 1);
	rewind(fe);
	{
		char buf[1024];

		len = fread(buf, 1, sizeof(buf) - 1, fe);
		buf[len] = '\0';
		ck_assert_msg(strstr(buf, "already exists (left by a killed run?); "
		    "remove it first") != NULL, "%s", buf);
	}
	fclose(fe);
	ck_assert(!exists(to_new + 7));
	text = tl_read_file(tmp, &len);
	ck_assert_str_eq(text, "left over");	/* not ours to remove */
	free(text);

	free(a);
	free(file);
	free(sub);
	free(junk);
	free(to_file);
	free(to_dir);
	free(to_junk);
	free(to_new);
	free(tmp);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

/* Interrupted after some batches were committed: the destination is left
 * as it was, new or existing. */
START_TEST(migrate_interrupted)
{
	char *dir = tl_mkdtemp();
	char *a = tl_strdupf("lmdb:%s/a", dir), *b = tl_strdupf("sqlite:%s/b.db", dir);
	char *c = tl_strdupf("lmdb:%s/c", dir);
	char *argv1[] = { "migrate", "-q", a, b, NULL };
	char *argv2[] = { "migrate", "-q", "--append", a, c, NULL };
	char *d1, *d2;
	size_t l1, l2;

	fill_many(a, 25000);
	mig_test_item_hook = interrupt_hook;
	hook_at = 21000;
	ck_assert_int_eq(migrate_main(4, argv1), 1);
	ck_assert(!exists(b + 7));
	ck_no_temporaries(dir);

	fill_store(c);
	d1 = dump_to_string(dir, c, &l1);
	hook_at = 12000;
	ck_assert_int_eq(migrate_main(5, argv2), 1);
	d2 = dump_to_string(dir, c, &l2);
	ck_assert(l1 == l2 && memcmp(d1, d2, l1) == 0);
	ck_no_temporaries(dir);
	mig_test_item_hook = NULL;
	free(d1);
	free(d2);
	free(a);
	free(b);
	free(c);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

/* A full disk (here: a file size limit) fails the copy cleanly. */
START_TEST(migrate_disk_full)
{
	char *dir = tl_mkdtemp();
	char *a = tl_strdupf("lmdb:%s/a", dir);
	const char *dsts[2];
	int i;

	dsts[0] = tl_strdupf("sqlite:%s/b.db", dir);
	dsts[1] = tl_strdupf("lmdb:%s/c", dir);
	fill_many(a, 40000);
	for (i = 0; i < 2; i++) {
		char *errp = tl_strdupf("%s/err", dir), *msg;
		int status;
		pid_t pid = fork();

		ck_assert_int_ne(pid, -1);
		if (pid == 0) {
			struct rlimit rl = { 1 << 20, 1 << 20 };
			char *argv[] = { "migrate", "-q", a, (char *)dsts[i], NULL };
			int fd = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);

			dup2(fd, 2);
			signal(SIGXFSZ, SIG_IGN);
			setrlimit(RLIMIT_FSIZE, &rl);
			_exit(migrate_main(4, argv));
		}
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		msg = tl_read_file(errp, NULL);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1,
		    "%s: status %d: %s", dsts[i], status, msg);
		ck_assert_msg(strstr(msg, "left as it was") != NULL, "%s", msg);
		ck_assert(!exists(strchr(dsts[i], ':') + 1));
		ck_no_temporaries(dir);
		free(msg);
		free(errp);
		free((char *)dsts[i]);
	}
	free(a);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

START_TEST(dump_load_identity)
{
	char *dir = tl_mkdtemp(), *err = NULL, *out = NULL;
	char *a = tl_strdupf("lmdb:%s/a", dir), *b = tl_strdupf("sqlite:%s/b.db", dir);
	char *c = tl_strdupf("lmdb:%s/c", dir), *f1 = tl_strdupf("%s/one.dump", dir);
	char *d1, *d2, *d3;
	size_t l1, l2, l3;
	int rc;

	fill_store(a);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "dump", "-q", "-o", f1, a, NULL), 0);
	free(err);
	d1 = tl_read_file(f1, &l1);
	rc = tl_run_saker(dir, f1, &out, NULL, &err, "load", b, NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, err);
	ck_assert_ptr_nonnull(strstr(out, "loaded 45 items"));
	free(out);
	free(err);
	check_store(b);
	d2 = dump_to_string(dir, b, &l2);
	ck_assert(l1 == l2 && memcmp(d1, d2, l1) == 0);
	rc = tl_run_saker(dir, f1, NULL, NULL, &err, "load", "-q", c, NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, err);
	free(err);
	d3 = dump_to_string(dir, c, &l3);
	ck_assert(l1 == l3 && memcmp(d1, d3, l1) == 0);
	/* loading again refuses the non-empty store */
	ck_assert_int_eq(tl_run_saker(dir, f1, NULL, NULL, &err, "load", c, NULL), 1);
	ck_assert_ptr_nonnull(strstr(err, "not empty"));
	free(err);
	ck_no_temporaries(dir);
	free(d1);
	free(d2);
	free(d3);
	free(a);
	free(b);
	free(c);
	free(f1);
	tl_rmrf(dir);
	free(dir);
}
END_TEST


/* Queue "ids": two items with attribute records (an id, and an unknown
 * type 200 a newer build would add), two live ids and an expired one. */
DRIVER_HELPER static void
fill_ids(const char *spec)
{
	static const unsigned char newer[] = { 1, 200, 0, 3, 'x', 'y', 'z',
	    1, 0, 2, 'i', '1' };
	saker_store *s = open_store(spec, true, false);
	int64_t now = saker_now_ms();
	struct saker_item it;
	saker_queue *q;

	ck_assert_int_eq(saker_store_queue_open(s, "ids", 3, true, NULL, &q), SAKER_OK);
	memset(&it, 0, sizeof(it));
	it.data = "one";
	it.len = 3;
	it.created_ms = now;
	it.attrs = newer;
	it.attrs_len = sizeof(newer);
	ck_assert_int_eq(saker_store_put(s, q, &it, now), SAKER_OK);
	it.data = "two";
	it.attrs = attrs_with_id("i2", &it.attrs_len);
	ck_assert_int_eq(saker_store_put(s, q, &it, now), SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_load(s, q, "i1", 2, now + 3600000, now), SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_load(s, q, "i2\0b", 4, now + 7200000, now), SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_load(s, q, "old", 3, now + 300, now), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
}

struct idlist {
	int n;
	char keys[8][8];
	int64_t exp[8];
};

static int
idlist_add(void *arg, const void *key, size_t len, int64_t expires_ms)
{
	struct idlist *l = arg;

	ck_assert_int_lt(l->n, 8);
	ck_assert_uint_lt(len, 8);
	memset(l->keys[l->n], 0, 8);
	memcpy(l->keys[l->n], key, len);
	l->exp[l->n++] = expires_ms;
	return 0;
}

static int
attrs_check(void *arg, const struct saker_item *it)
{
	int *i = arg;
	const void *v;
	size_t vlen;

	if ((*i)++ == 0) {
		/* the record a newer build wrote, byte-exact */
		ck_assert_uint_eq(it->attrs_len, 12);
		ck_assert_int_eq(memcmp(it->attrs, "\1\310\0\3xyz\1\0\2i1", 12), 0);
	} else {
		ck_assert(itemattr_get(it->attrs, it->attrs_len, ITEMATTR_ID, &v, &vlen));
		ck_assert(vlen == 2 && memcmp(v, "i2", 2) == 0);
	}
	return 0;
}

/* spec keeps what fill_ids() wrote, but the expired id; the ids keep
 * the expiry they had (not a new window). */
DRIVER_HELPER static void
check_ids(const char *spec, const struct idlist *want)
{
	saker_store *s = open_store(spec, false, true);
	struct idlist got;
	saker_queue *q;
	int i = 0, j, k;

	ck_assert_int_eq(saker_store_queue_open(s, "ids", 3, false, NULL, &q), SAKER_OK);
	ck_assert_int_eq(saker_store_iterate(s, q, attrs_check, &i), 0);
	ck_assert_int_eq(i, 2);
	memset(&got, 0, sizeof(got));
	ck_assert_int_eq(saker_store_dedup_iterate(s, q, idlist_add, &got), 0);
	ck_assert_int_eq(got.n, 2);
	for (j = 0; j < want->n; j++) {
		for (k = 0; k < got.n; k++)
			if (memcmp(got.keys[k], want->keys[j], 8) == 0)
				break;
		ck_assert_msg(k < got.n, "id %s lost", want->keys[j]);
		ck_assert_int_eq(got.exp[k], want->exp[j]);
	}
	saker_store_close(s);
}

/* dump, load and migrate carry item attributes byte-exact and the live
 * deduplication ids with their expiry; the dump of the copy is the same
 * bytes; a version 2 dump still loads. */
START_TEST(dump_load_ids)
{
	char *dir = tl_mkdtemp(), *err = NULL, *out = NULL;
	char *a = tl_strdupf("lmdb:%s/a", dir), *b = tl_strdupf("sqlite:%s/b.db", dir);
	char *c = tl_strdupf("lmdb:%s/c", dir), *f1 = tl_strdupf("%s/one.dump", dir);
	char *d = tl_strdupf("sqlite:%s/d.db", dir), *f2 = tl_strdupf("%s/v2.dump", dir);
	struct idlist want, all;
	saker_store *s;
	saker_queue *q;
	char *d1, *d2, *d3, *v2;
	size_t l1, l2, l3, lv2;
	int rc, i;

	fill_ids(a);
	/* the ids a copy must keep, with their expiry, read from the source:
	 * all but "old", which expires now */
	s = open_store(a, false, true);
	ck_assert_int_eq(saker_store_queue_open(s, "ids", 3, false, NULL, &q), SAKER_OK);
	memset(&all, 0, sizeof(all));
	ck_assert_int_eq(saker_store_dedup_iterate(s, q, idlist_add, &all), 0);
	ck_assert_int_eq(all.n, 3);
	saker_store_close(s);
	memset(&want, 0, sizeof(want));
	for (i = 0; i < all.n; i++)
		if (strcmp(all.keys[i], "old") != 0)
			idlist_add(&want, all.keys[i], strlen(all.keys[i]) +
			    (all.keys[i][1] == '2' ? 2 : 0), all.exp[i]);
	ck_assert_int_eq(want.n, 2);
	tl_sleep_ms(400);

	rc = tl_run_saker(dir, NULL, NULL, NULL, &err, "dump", "-o", f1, a, NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, err);
	ck_assert_msg(strstr(err, "dumped 2 items") != NULL &&
	    strstr(err, ", 2 deduplication ids from") != NULL, "%s", err);
	free(err);
	d1 = tl_read_file(f1, &l1);
	rc = tl_run_saker(dir, f1, &out, NULL, &err, "load", b, NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, err);
	ck_assert_msg(strstr(out, "ids: 2 items (2 ready, 0 delayed, 0 were open), "
	    "6 B, 2 deduplication ids") != NULL, "%s", out);
	free(out);
	free(err);
	check_ids(b, &want);
	d2 = dump_to_string(dir, b, &l2);
	ck_assert(l1 == l2 && memcmp(d1, d2, l1) == 0);
	/* migrate: sqlite -> lmdb, verified by the ids' checksum too */
	rc = tl_run_saker(dir, NULL, &out, NULL, &err, "migrate", b, c, NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, err);
	ck_assert_msg(strstr(out, ", 2 deduplication ids; verified") != NULL, "%s", out);
	free(out);
	free(err);
	check_ids(c, &want);
	d3 = dump_to_string(dir, c, &l3);
	ck_assert(l1 == l3 && memcmp(d1, d3, l1) == 0);
	/* an old (version 2) dump loads: items without attributes, no ids */
	v2 = synthetic_stream_version(&lv2, 2);
	write_file(f2, v2, lv2);
	rc = tl_run_saker(dir, f2, &out, NULL, &err, "load", d, NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, err);
	ck_assert_msg(strstr(out, "loaded 2 items") != NULL &&
	    strstr(out, "deduplication") == NULL, "%s", out);
	free(out);
	free(err);
	free(v2);
	free(d1);
	free(d2);
	free(d3);
	ck_no_temporaries(dir);
	free(a);
	free(b);
	free(c);
	free(d);
	free(f1);
	free(f2);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

START_TEST(load_bad_input)
{
	char *dir = tl_mkdtemp(), *err = NULL;
	char *a = tl_strdupf("lmdb:%s/a", dir), *b = tl_strdupf("sqlite:%s/b.db", dir);
	char *f = tl_strdupf("%s/bad.dump", dir);
	char *d;
	size_t l;

	fill_store(a);
	d = dump_to_string(dir, a, &l);
	write_file(f, d, l - 30);
	ck_assert_int_eq(tl_run_saker(dir, f, NULL, NULL, &err, "load", b, NULL), 1);
	ck_assert_msg(strstr(err, "truncated") != NULL, "%s", err);
	ck_assert_ptr_nonnull(strstr(err, "left as it was"));
	free(err);
	ck_assert(!exists(b + 7));
	d[0] = 'X';
	write_file(f, d, l);
	ck_assert_int_eq(tl_run_saker(dir, f, NULL, NULL, &err, "load", b, NULL), 1);
	ck_assert_ptr_nonnull(strstr(err, "not a saker dump"));
	free(err);
	d[0] = 'S';
	d[15] = 9;
	write_file(f, d, l);
	ck_assert_int_eq(tl_run_saker(dir, f, NULL, NULL, &err, "load", b, NULL), 1);
	ck_assert_ptr_nonnull(strstr(err, "version 9"));
	free(err);
	d[15] = 1;
	d[l / 2] ^= 1;
	write_file(f, d, l);
	ck_assert_int_eq(tl_run_saker(dir, f, NULL, NULL, &err, "load", b, NULL), 1);
	ck_assert_ptr_nonnull(strstr(err, "bad dump"));
	free(err);
	ck_assert(!exists(b + 7));
	ck_no_temporaries(dir);
	free(d);
	free(a);
	free(b);
	free(f);
	tl_rmrf(dir);
	free(dir);
}
END_TEST
#endif

/* ------------------------------------------------------------------ */
/* put / get / stats against a running sakerd */

START_TEST(client_put_get_stats)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	char *dir = tl_mkdtemp(), *srv = tl_strdupf("127.0.0.1:%d", s->port);
	char *in = tl_strdupf("%s/in", dir), *out = NULL, *err = NULL;
	static const char bin[] = "bin\0ary\r\n";
	size_t len;

	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "put", "-s", srv, "jobs", "hello", NULL), 0);
	write_file(in, bin, sizeof(bin));
	ck_assert_int_eq(tl_run_saker(dir, in, NULL, NULL, NULL, "put", "-s", srv, "-f", "7", "jobs", "-", NULL), 0);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, &len, NULL, "get", "-s", srv, "jobs", NULL), 0);
	ck_assert(len == 5 && memcmp(out, "hello", 5) == 0);
	free(out);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, NULL, "stats", "-s", srv, NULL), 0);
	ck_assert_ptr_nonnull(strstr(out, "QUEUE"));
	ck_assert_ptr_nonnull(strstr(out, "jobs"));
	free(out);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, NULL, "stats", "--raw", "-s", srv, NULL), 0);
	ck_assert_ptr_nonnull(strstr(out, "STAT queue_jobs_items 1\n"));
	free(out);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, &len, &err, "get", "-F", "-s", srv, "jobs", NULL), 0);
	ck_assert(len == sizeof(bin) && memcmp(out, bin, len) == 0);
	ck_assert_ptr_nonnull(strstr(err, "flags 7"));
	free(out);
	free(err);
	/* empty, then a bounded wait: status 1, stdout empty, why on stderr */
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, &len, &err, "get", "-s", srv, "jobs", NULL), 1);
	ck_assert_uint_eq(len, 0);
	ck_assert_str_eq(err, "saker get: queue jobs is empty\n");
	free(out);
	free(err);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "get", "-t", "100", "-s", srv, "jobs", NULL), 1);
	ck_assert_str_eq(err, "saker get: queue jobs is empty (waited 100 ms)\n");
	free(err);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, &len, &err, "get", "-q", "-s", srv, "jobs", NULL), 1);
	ck_assert_uint_eq(len, 0);
	ck_assert_str_eq(err, "");
	free(out);
	free(err);
	tl_server_free(s);
	/* nobody listening: one clear line */
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "-s", srv, "jobs", "x", NULL), 1);
	ck_assert_ptr_nonnull(strstr(err, "cannot connect"));
	ck_assert_ptr_eq(strchr(err, '\n'), err + strlen(err) - 1);
	free(err);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "stats", "-s", srv, NULL), 1);
	ck_assert_ptr_nonnull(strstr(err, "cannot connect"));
	free(err);
	free(srv);
	free(in);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

/* Command lines the client refuses: exit status, and the start of the
 * first line on stderr (or stdout for --help). */
/* longer than a sockaddr_un's path (108 bytes) */
#define SOCK_TOO_LONG "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
static const struct {
	const char *argv[7];
	int status;
	const char *says;
} refusals[] = {
	{ { "put", NULL }, 2, "usage: saker put " },
	{ { "put", "-f", "4294967296", "q", "x", NULL }, 2, "saker put: bad flags '4294967296' (0..4294967295)" },
	{ { "put", "-e", "-1", "q", "x", NULL }, 2, "saker put: bad exptime '-1'" },
	{ { "put", "-d", "x", "q", "x", NULL }, 2, "saker put: bad delay 'x' (milliseconds)" },
	{ { "put", "-d", "1.5ms", "q", "x", NULL }, 2, "saker put: bad delay '1.5ms' (milliseconds), or a duration" },
	{ { "get", "-t", "-1s", "q", NULL }, 2, "saker get: bad timeout '-1s' (milliseconds), or a duration" },
	{ { "put", "-a", "253402300800", "q", "x", NULL }, 2, "saker put: bad time '253402300800' (unix seconds)" },
	{ { "put", "--bogus", NULL }, 2, "saker put: unrecognized option '--bogus'" },
	{ { "put", "--id", "", "q", "x", NULL }, 2, "saker put: bad id '' (1..128 printable bytes, no space or '/')" },
	{ { "put", "-i", "a/b", "q", "x", NULL }, 2, "saker put: bad id 'a/b'" },
	{ { "put", "-i", "a b", "q", "x", NULL }, 2, "saker put: bad id 'a b'" },
	{ { "put", "-i", "caf\xc3\xa9", "q", "x", NULL }, 2, "saker put: bad id 'caf" },
	{ { "put", "-i", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "q", "x", NULL }, 2, "saker put: bad id 'xxx" },
	{ { "get", NULL }, 2, "usage: saker get " },
	{ { "get", "bad/name//", NULL }, 2, "saker get: bad queue name 'bad/name//'" },
	{ { "stats", "--bogus", NULL }, 2, "saker stats: unrecognized option '--bogus'" },
	{ { "requeue", NULL }, 2, "usage: saker requeue " },
	{ { "requeue", "a", "a", NULL }, 2, "saker requeue: FROM and TO are the same queue" },
	{ { "requeue", "a", "b/c", NULL }, 2, "saker requeue: bad queue name 'b/c'" },
	{ { "requeue", "--help", NULL }, 0, "usage: saker requeue [-s SERVER] [--max N] FROM TO" },
	{ { "put", "-s", "[::1", "q", "x", NULL }, 1, "saker put: bad server address '[::1' (expected HOST:PORT)" },
	{ { "put", "-s", "/nonexistent/sock", "q", "x", NULL }, 1, "saker put: cannot connect to /nonexistent/sock: " },
	{ { "put", "-s", ":22133", "q", "x", NULL }, 1, "saker put: bad server address ':22133' (expected HOST:PORT)" },
	{ { "get", "-s", "[::1]x", "q", NULL }, 1, "saker get: bad server address '[::1]x' (expected HOST:PORT)" },
	{ { "stats", "-s", "/" SOCK_TOO_LONG, NULL }, 1, "saker stats: cannot connect to /" SOCK_TOO_LONG ": socket path too long" },
	{ { "requeue", "--max", "0", "a", "b", NULL }, 2, "saker requeue: bad --max '0' (a number of items, at least 1)" },
	{ { "requeue", "--max", "x", "a", "b", NULL }, 2, "saker requeue: bad --max 'x'" },
	{ { "requeue", "--bogus", "a", "b", NULL }, 2, "saker requeue: unrecognized option '--bogus'" },
	{ { "check", NULL }, 2, "usage: saker check [-q] SPEC" },
	{ { "dump", NULL }, 2, "usage: saker dump [--progress|--quiet] [-o FILE] SPEC" },
	{ { "dump", "--help", NULL }, 0, "usage: saker dump [--progress|--quiet] [-o FILE] SPEC" },
	{ { "dump", "--bogus", "x", NULL }, 2, "saker dump: unrecognized option '--bogus'" },
	{ { "load", "a", "b", NULL }, 2, "usage: saker load [--append]" },
	{ { "load", "--help", NULL }, 0, "usage: saker load [--append]" },
	{ { "load", "--bogus", "x", NULL }, 2, "saker load: unrecognized option '--bogus'" },
	{ { "load", "-i", "/nonexistent/dump", "lmdb:/nonexistent/st", NULL }, 1, "saker load: /nonexistent/dump: No such file or directory" },
	{ { "check", "a", "b", NULL }, 2, "usage: saker check [-q] SPEC" },
	{ { "check", "--help", NULL }, 0, "usage: saker check [-q] SPEC" },
	{ { "check", "--bogus", "x", NULL }, 2, "saker check: unrecognized option '--bogus'" },
	{ { "check", "nosuch:x", NULL }, 1, "saker check: nosuch:x: unknown store type 'nosuch'" },
};

START_TEST(client_refusals)
{
	char *dir = tl_mkdtemp(), *out = NULL, *err = NULL;
	const char *const *a = refusals[_i].argv;
	int rc = tl_run_saker(dir, NULL, &out, NULL, &err, a[0], a[1], a[2],
	    a[3], a[4], a[5], a[6], NULL);
	const char *text = refusals[_i].status == 0 ? out : err;

	ck_assert_msg(rc == refusals[_i].status, "%s: status %d, want %d: %s",
	    a[0], rc, refusals[_i].status, err);
	ck_assert_msg(strncmp(text, refusals[_i].says,
	    strlen(refusals[_i].says)) == 0, "%s: %s", a[0], text);
	free(out);
	free(err);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

/* buf[0..len) holds two CRLF-ended lines. */
static bool
two_lines(const char *buf, size_t len)
{
	const char *p = memmem(buf, len, "\r\n", 2);

	return p != NULL && memmem(p + 2, len - (size_t)(p + 2 - buf), "\r\n", 2) != NULL;
}

/* A fake server on a free port: accepts one connection, reads a request
 * (into the file `log` when not NULL), answers `reply` (NULL: closes at
 * once); a child process. */
static pid_t
fake_server(int *port, const char *reply, const char *log)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	pid_t pid;

	ck_assert_int_ge(lfd, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
	*port = ntohs(sa.sin_port);
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		char buf[4096];
		ssize_t got;
		int fd;

		alarm(20);
		fd = accept(lfd, NULL, NULL);
		if (fd >= 0 && reply != NULL) {
			if ((got = read(fd, buf, sizeof(buf))) <= 0)
				_exit(1);
			/* a logged request is a set: its line and its data
			 * may come in two writes; read up to the data's CRLF */
			while (log != NULL && (size_t)got < sizeof(buf) &&
			    !two_lines(buf, (size_t)got)) {
				ssize_t more = read(fd, buf + got, sizeof(buf) - (size_t)got);
				if (more <= 0)
					_exit(1);
				got += more;
			}
			if (log != NULL) {
				FILE *fp = fopen(log, "wb");
				if (fp == NULL || fwrite(buf, 1, (size_t)got, fp) !=
				    (size_t)got || fclose(fp) != 0)
					_exit(1);
			}
			if (write(fd, reply, strlen(reply)) < 0)
				_exit(1);
			tl_sleep_ms(200);
		}
		_exit(0);
	}
	close(lfd);
	return pid;
}

/* Servers that misbehave: one clear line each, status 1.  `reply` is
 * what the fake server answers (NULL: it closes at once); the error line
 * holds both `says` strings. */
static const struct {
	const char *reply, *cmd, *says, *says2;
} bad_servers[] = {
	{ NULL, "put", "closed the connection", "" },
	{ "SERVER_ERROR out of cheese\r\n", "put", "replied: SERVER_ERROR out of cheese", "" },
	{ "SERVER_ERROR no\r\n", "get", "replied: SERVER_ERROR no", "" },
	{ "HELLO there\r\n", "get", "replied: HELLO there", "" },
	/* an item, then no END */
	{ "VALUE q 0 1\r\nx\r\nNOPE\r\n", "get", "unexpected reply", "NOPE" },
	{ "NOT_STORED\r\n", "put", "saker put: queue 'q' is full (NOT_STORED)", "" },
	{ NULL, "stats", "closed the connection", "" },
	{ "SERVER_ERROR busy\r\n", "stats", "replied: SERVER_ERROR busy", "" },
	{ "STAT pid 1\r\nSTATE\r\n", "stats", "replied: STATE", "" },
	{ NULL, "requeue", "closed the connection", "" },
	{ "CLIENT_ERROR nope\r\n", "requeue", "saker requeue: ", "replied: CLIENT_ERROR nope" },
	{ "99999\r\n", "requeue", "replied: 99999", "" },	/* more than asked */
};

START_TEST(client_bad_servers)
{
	const char *cmd = bad_servers[_i].cmd;
	char *dir = tl_mkdtemp(), *err = NULL, *srv;
	int port, st, rc;
	pid_t pid = fake_server(&port, bad_servers[_i].reply, NULL);

	srv = tl_strdupf("127.0.0.1:%d", port);
	if (strcmp(cmd, "put") == 0)
		rc = tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "-s", srv,
		    "q", "x", NULL);
	else if (strcmp(cmd, "get") == 0)
		rc = tl_run_saker(dir, NULL, NULL, NULL, &err, "get", "-s", srv,
		    "q", NULL);
	else if (strcmp(cmd, "stats") == 0)
		rc = tl_run_saker(dir, NULL, NULL, NULL, &err, "stats", "-s", srv,
		    NULL);
	else
		rc = tl_run_saker(dir, NULL, NULL, NULL, &err, "requeue", "-s",
		    srv, "dead", "live", NULL);
	ck_assert_msg(rc == 1, "%s: status %d: %s", cmd, rc, err);
	ck_assert_msg(strstr(err, bad_servers[_i].says) != NULL &&
	    strstr(err, bad_servers[_i].says2) != NULL, "%s", err);
	if (bad_servers[_i].reply == NULL)
		ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1, "%s",
		    err);
	free(err);
	free(srv);
	waitpid(pid, &st, 0);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

/* put --id against sakerd: a retry with the same id stores nothing more,
 * another id does; the queue keeps both ids. */
START_TEST(client_put_id)
{
	char *dir = tl_mkdtemp(), *sock = tl_strdupf("%s/s.sock", dir);
	struct tl_server *s = tl_server_start("memory", "-s", sock, NULL);
	char *out = NULL, *err = NULL;
	size_t len;
	int fd;

	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "put", "-s",
	    sock, "--id", "job-1", "idq", "first", NULL), 0);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "put", "-s",
	    sock, "--id", "job-1", "idq", "retry", NULL), 0);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "put", "-s",
	    sock, "-i", "job-2", "-d", "1", "idq", "second", NULL), 0);
	fd = tl_connect(s->port);
	ck_assert_int_eq(tl_stat(fd, "queue_idq_dedup_ids"), 2);
	ck_assert_int_eq(tl_stat(fd, "queue_idq_dedup_hits"), 1);
	close(fd);
	/* the consumer reads the id back (-I), with the other meta fields */
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, &len, &err, "get", "-s",
	    sock, "-I", "-D", "idq", NULL), 0);
	ck_assert(len == 5 && memcmp(out, "first", 5) == 0);
	ck_assert_str_eq(err, "deliveries 0\nid job-1\n");
	free(out);
	free(err);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, &len, &err, "get", "-t",
	    "5000", "-s", sock, "--show-id", "idq", NULL), 0);
	ck_assert(len == 6 && memcmp(out, "second", 6) == 0);
	ck_assert_str_eq(err, "id job-2\n");
	free(out);
	free(err);
	/* an item set without an id: no id line */
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "put", "-s",
	    sock, "plainq", "p", NULL), 0);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, &len, &err, "get", "-s",
	    sock, "-I", "plainq", NULL), 0);
	ck_assert(len == 1 && out[0] == 'p');
	ck_assert_str_eq(err, "");
	free(out);
	free(err);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "get", "-q",
	    "-s", sock, "idq", NULL), 1);	/* no "retry" item */
	tl_server_free(s);
	free(sock);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

/* put --id sends the id as the set key's /id= segment, after a delay. */
START_TEST(client_put_id_wire)
{
	char *dir = tl_mkdtemp(), *log = tl_strdupf("%s/req", dir), *srv, *req;
	int port, st;
	size_t len;
	pid_t pid = fake_server(&port, "STORED\r\n", log);

	srv = tl_strdupf("127.0.0.1:%d", port);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "put", "-s",
	    srv, "-d", "250", "--id", "order-42:a.b", "jobs", "xyz", NULL), 0);
	waitpid(pid, &st, 0);
	req = tl_read_file(log, &len);
	ck_assert_ptr_nonnull(req);
	ck_assert_msg(len == 47 && memcmp(req, "set jobs/delay=250/id=order-42:a.b "
	    "0 0 3\r\nxyz\r\n", len) == 0, "sent: %.*s", (int)len, req);
	free(req);
	free(srv);
	free(log);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

/* stats over a list of servers: each in turn under a "== SERVER"
 * header, its counters and its queues' table. */
START_TEST(client_stats_many)
{
	char *dir = tl_mkdtemp(), *out = NULL, *err = NULL, *list, *head;
	struct tl_server *s = tl_server_start("memory", NULL);
	int c = tl_connect(s->port);
	const char *p;
	int n = 0;

	tl_set(c, "jobs", "x");
	close(c);
	list = tl_strdupf("127.0.0.1:%d,127.0.0.1:%d", s->port, s->port);
	head = tl_strdupf("== 127.0.0.1:%d\n", s->port);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "stats", "-s",
	    list, NULL), 0);
	for (p = out; (p = strstr(p, head)) != NULL; p++)
		n++;
	ck_assert_msg(n == 2, "%d headers: %s", n, out);
	ck_assert_msg(strncmp(out, head, strlen(head)) == 0, "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "\nQUEUE "));
	ck_assert_ptr_nonnull(strstr(out, "\njobs "));
	free(out);
	free(err);
	/* --raw: the STAT lines as sent, under the same headers */
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "stats", "-r",
	    "-s", list, NULL), 0);
	ck_assert_msg(strncmp(out, head, strlen(head)) == 0, "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "STAT queue_jobs_items 1\n"));
	free(out);
	free(err);
	tl_server_stop(s);
	tl_server_free(s);
	free(list);
	free(head);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

/* -d and -a make an item visible later; -e sets its expiry; a unix
 * socket and [ADDR]:PORT reach the server too.  "Not yet" is asserted
 * only when the get is over before the item's time (valgrind slows every
 * run). */
START_TEST(client_put_options)
{
	char *dir = tl_mkdtemp(), *sock = tl_strdupf("%s/s.sock", dir);
	struct tl_server *s = tl_server_start("memory", "-s", sock, NULL);
	char *srv = tl_strdupf("[127.0.0.1]:%d", s->port), *out = NULL, *at;
	int64_t t0 = tl_unix_ms(), at_s;
	size_t len;
	int rc;

	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "put", "-s",
	    sock, "-d", "2000", "later", "d", NULL), 0);
	rc = tl_run_saker(dir, NULL, NULL, NULL, NULL, "get", "-q", "-p", "-s",
	    sock, "later", NULL);
	if (tl_unix_ms() < t0 + 2000)
		ck_assert_int_eq(rc, 1);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, &len, NULL, "get", "-t",
	    "10000", "-s", sock, "later", NULL), 0);
	ck_assert(len == 1 && out[0] == 'd');
	free(out);

	at_s = tl_unix_s() + 3;
	at = tl_strdupf("%lld", (long long)at_s);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "put", "-s",
	    srv, "-a", at, "atq", "a", NULL), 0);
	rc = tl_run_saker(dir, NULL, NULL, NULL, NULL, "get", "-q", "-p", "-s",
	    srv, "atq", NULL);
	if (tl_unix_ms() < at_s * 1000)
		ck_assert_int_eq(rc, 1);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, &len, NULL, "get", "-t",
	    "10000", "-s", srv, "atq", NULL), 0);
	ck_assert(len == 1 && out[0] == 'a');
	free(out);

	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "put", "-s",
	    srv, "-e", "1", "expq", "e", NULL), 0);
	tl_sleep_ms(2100);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "get", "-q",
	    "-s", srv, "expq", NULL), 1);		/* expired */
	tl_server_free(s);
	free(at);
	free(srv);
	free(sock);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

/* ------------------------------------------------------------------ */
/* --user: logging in to a server started with --auth-file */

/* A file in dir with text and mode; the path malloc'd. */
static char *
file_mode(const char *dir, const char *name, const char *text, mode_t mode)
{
	char *path = tl_strdupf("%s/%s", dir, name);

	write_file(path, text, strlen(text));
	ck_assert_int_eq(chmod(path, mode), 0);
	return path;
}

/* saker with its own session: no controlling terminal (tty_in NULL), or
 * a pseudo-terminal as its controlling terminal, on which tty_in is typed
 * once the prompt `prompt` has appeared; everything shown on the terminal
 * goes to *shown.  stdin is /dev/null, stderr to *err.  Returns the exit
 * status. */
static int
run_saker_session(const char *dir, const char *tty_in, const char *prompt,
    char **shown, char **err, const char *const *args)
{
	const char *argv[16];
	char *epath = tl_strdupf("%s/session.err", dir), buf[4096];
	size_t n = 0, got = 0;
	int master = -1, status;
	pid_t pid;

	argv[n++] = "saker";
	while (*args != NULL && n < 15)
		argv[n++] = *args++;
	argv[n] = NULL;
	if (tty_in != NULL) {
		master = posix_openpt(O_RDWR | O_NOCTTY);
		ck_assert_int_ge(master, 0);
		ck_assert_int_eq(grantpt(master), 0);
		ck_assert_int_eq(unlockpt(master), 0);
	}
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		int in = open("/dev/null", O_RDONLY), e;

		/* a new session has no controlling terminal until it opens one */
		if (setsid() == -1 || in == -1)
			_exit(126);
		if (tty_in != NULL && open(ptsname(master), O_RDWR) == -1)
			_exit(126);
		e = open(epath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (e == -1)
			_exit(126);
		dup2(in, 0);
		dup2(e, 2);
		execv(tl_saker_path(), (char *const *)argv);
		_exit(127);
	}
	if (tty_in != NULL) {
		int64_t end = tl_now_ms() + tl_slow(10000);
		/* held open here so that the terminal never hangs up before
		 * saker has opened it (reads would fail with EIO) */
		int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
		bool typed = false, exited = false;

		ck_assert_int_ge(slave, 0);
		/* read what saker shows, type tty_in after the prompt, until
		 * saker has exited and nothing more is shown */
		while (tl_now_ms() < end && got < sizeof(buf) - 1) {
			struct pollfd p = { master, POLLIN, 0 };
			ssize_t r = 0;

			if (poll(&p, 1, 100) == 1)
				r = read(master, buf + got, 1);
			if (r == 1) {
				got++;
				buf[got] = '\0';
				if (!typed && strstr(buf, prompt) != NULL) {
					ck_assert_int_eq(write(master, tty_in,
					    strlen(tty_in)), (ssize_t)strlen(tty_in));
					typed = true;
				}
				continue;
			}
			if (exited)
				break;
			if (waitpid(pid, &status, WNOHANG) == pid)
				exited = true;
		}
		buf[got] = '\0';
		*shown = strdup(buf);
		close(slave);
		close(master);
		if (exited)
			pid = 0;
		else
			kill(pid, SIGKILL);	/* it hangs: failed below */
	}
	if (pid != 0)
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	*err = tl_read_file(epath, NULL);
	free(epath);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* What the client refuses before it sends a login: each with its reason
 * and status 1, nothing sent that a server could log. */
START_TEST(client_login_refusals)
{
	char *dir = tl_mkdtemp(), *err = NULL, *longpw, *want;
	char *empty = file_mode(dir, "empty.pw", "", 0600);
	char *blank = file_mode(dir, "blank.pw", "\nsecond\n", 0600);
	struct tl_server *s = tl_server_start("memory", NULL);
	char *srv = tl_strdupf("127.0.0.1:%d", s->port);
	char *bigpw;

	unsetenv("SAKER_USER");
	unsetenv("SAKER_PASSWORD");
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "--user",
	    "u", "--password-file", "/nonexistent/pw", "-s", srv, "q", "x", NULL), 1);
	ck_assert_msg(strstr(err, "saker put: cannot open password file "
	    "/nonexistent/pw: No such file or directory\n") != NULL, "%s", err);
	free(err);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "--user",
	    "u", "--password-file", dir, "-s", srv, "q", "x", NULL), 1);
	ck_assert_msg(strstr(err, "is not a regular file") != NULL, "%s", err);
	free(err);
	/* an empty first line is an empty password */
	want = tl_strdupf("saker put: the password for user u is empty in %s\n",
	    empty);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "--user",
	    "u", "--password-file", empty, "-s", srv, "q", "x", NULL), 1);
	ck_assert_msg(strstr(err, want) != NULL, "%s", err);
	free(err);
	free(want);
	want = tl_strdupf("saker put: the password for user u is empty in %s\n",
	    blank);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "--user",
	    "u", "--password-file", blank, "-s", srv, "q", "x", NULL), 1);
	ck_assert_msg(strstr(err, want) != NULL, "%s", err);
	free(err);
	free(want);
	/* a first line of 4096 bytes or more */
	ck_assert_ptr_nonnull(longpw = calloc(1, 5000));
	memset(longpw, 'p', 4999);
	bigpw = file_mode(dir, "big.pw", longpw, 0600);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "--user",
	    "u", "--password-file", bigpw, "-s", srv, "q", "x", NULL), 1);
	ck_assert_msg(strstr(err, "the first line is longer than 4095 bytes")
	    != NULL, "%s", err);
	free(err);
	setenv("SAKER_PASSWORD", longpw, 1);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "--user",
	    "u", "-s", srv, "q", "x", NULL), 1);
	ck_assert_msg(strstr(err, "saker put: SAKER_PASSWORD is longer than 4095 "
	    "bytes\n") != NULL, "%s", err);
	free(err);
	/* user and password together over what the server takes */
	longpw[4000] = '\0';
	setenv("SAKER_PASSWORD", longpw, 1);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "--user",
	    "a-rather-long-user-name-for-this-purpose-that-goes-on-and-on-and-on-"
	    "and-on-for-well-over-ninety-six-bytes-in-all-to-pass-the-limit",
	    "-s", srv, "q", "x", NULL), 1);
	ck_assert_msg(strstr(err, "user name and password are longer than the "
	    "server takes (4096 bytes)") != NULL, "%s", err);
	free(err);
	setenv("SAKER_PASSWORD", "pw", 1);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "--user",
	    "a b", "-s", srv, "q", "x", NULL), 1);
	ck_assert_msg(strstr(err, "saker put: bad user name 'a b' (no spaces, "
	    "colons or control characters)") != NULL, "%s", err);
	free(err);
	/* a password alone: whose? */
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "-s",
	    srv, "q", "x", NULL), 1);
	ck_assert_msg(strstr(err, "a password without a user name: give --user "
	    "NAME or SAKER_USER") != NULL, "%s", err);
	free(err);
	unsetenv("SAKER_PASSWORD");
	/* nothing reached the queue */
	{
		int c = tl_connect(s->port);

		ck_assert_int_eq(tl_stat(c, "curr_items"), 0);
		close(c);
	}
	tl_server_stop(s);
	tl_server_free(s);
	free(longpw);
	free(bigpw);
	free(empty);
	free(blank);
	free(srv);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

START_TEST(client_login)
{
	char *dir = tl_mkdtemp();
	char *users = file_mode(dir, "users", "admin:adminpw:admin\n"
	    "ro:ro pass:queues=*,read\n", 0600);
	char *pw = file_mode(dir, "ro.pw", "ro pass\n", 0600);
	char *open_pw = file_mode(dir, "open.pw", "ro pass\n", 0640);
	struct tl_server *s = tl_server_start("memory", "--auth-file", users,
	    NULL);
	char *srv = tl_strdupf("127.0.0.1:%d", s->port), *out, *err, *want;
	size_t len;

	unsetenv("SAKER_USER");
	unsetenv("SAKER_PASSWORD");
	/* no login: the server's refusal in words that say what to do */
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "stats",
	    "-s", srv, NULL), 1);
	ck_assert_msg(strstr(err, "requires a login") != NULL &&
	    strstr(err, "--user NAME") != NULL, "%s", err);
	free(err);
	/* from the environment: every command */
	setenv("SAKER_USER", "admin", 1);
	setenv("SAKER_PASSWORD", "adminpw", 1);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "put", "-s",
	    srv, "jobs", "hello", NULL), 0);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "put", "-s",
	    srv, "jobs", "world", NULL), 0);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, NULL, "requeue",
	    "-s", srv, "--max", "1", "jobs", "later", NULL), 0);
	ck_assert_str_eq(out, "requeued 1 items from jobs to later\n");
	free(out);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, NULL, "stats",
	    "--raw", "-s", srv, NULL), 0);
	ck_assert_ptr_nonnull(strstr(out, "STAT queue_jobs_items 1\n"));
	ck_assert_ptr_nonnull(strstr(out, "STAT queue_later_items 1\n"));
	free(out);
	/* from a file, --user over SAKER_USER; a read-only user reads... */
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, &len, NULL, "get",
	    "--user", "ro", "--password-file", pw, "-s", srv, "later", NULL), 0);
	ck_assert(len == 5 && memcmp(out, "hello", 5) == 0);
	free(out);
	unsetenv("SAKER_PASSWORD");
	unsetenv("SAKER_USER");
	/* an empty file name is a usage error */
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "put",
	    "--user=ro", "--password-file=", NULL), 2);
	ck_assert_str_eq(err, "saker: --password-file needs a file name\n");
	free(err);
	/* ...and may not write: said with its name */
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "put",
	    "--user=ro", "-s", srv, "--password-file", pw, "jobs", "x", NULL), 1);
	ck_assert_msg(strstr(err, "user 'ro' may not") != NULL, "%s", err);
	free(err);
	/* a wrong password: one line, status 1 */
	setenv("SAKER_PASSWORD", "nope", 1);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, &len, &err, "get",
	    "--user", "admin", "-s", srv, "jobs", NULL), 1);
	want = tl_strdupf("saker get: %s refused the login of user 'admin': "
	    "wrong user name or password\n", srv);
	ck_assert_str_eq(err, want);
	ck_assert_uint_eq(len, 0);
	free(want);
	free(out);
	free(err);
	/* bench logs every connection in */
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "bench",
	    "--user", "admin", "-s", srv, "-t", "300ms", "-c", "2", "--quiet",
	    NULL), 1);
	want = tl_strdupf("saker bench: %s refused the login of user 'admin': "
	    "wrong user name or password (during connect)\n", srv);
	ck_assert_str_eq(err, want);
	free(want);
	free(out);
	free(err);
	setenv("SAKER_PASSWORD", "adminpw", 1);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, &err, "bench",
	    "--user", "admin", "-s", srv, "-t", "300ms", "-c", "2", "--quiet",
	    "--queue-prefix", "bq", NULL), 0);
	ck_assert_msg(strstr(out, "=> ok") != NULL && strstr(out, "error "
	    "replies") == NULL, "%s%s", out, err);
	free(out);
	free(err);
	setenv("SAKER_PASSWORD", "nope", 1);
	/* a password without a user name */
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "stats",
	    "-s", srv, NULL), 1);
	ck_assert_str_eq(err, "saker stats: a password without a user name: "
	    "give --user NAME or SAKER_USER\n");
	free(err);
	unsetenv("SAKER_PASSWORD");
	/* a password file others may read is refused before connecting */
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "get",
	    "--user", "ro", "--password-file", open_pw, "-s", srv, "jobs",
	    NULL), 1);
	want = tl_strdupf("saker get: password file %s is open to group or "
	    "others (mode 0640); run chmod 600 %s\n", open_pw, open_pw);
	ck_assert_str_eq(err, want);
	free(want);
	free(err);
	/* never a password argument */
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "get",
	    "--user", "ro", "--password", "ro pass", "jobs", NULL), 2);
	ck_assert_ptr_nonnull(strstr(err, "use --password-file FILE or "
	    "SAKER_PASSWORD"));
	free(err);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, &err, "stats",
	    "--password=ro", NULL), 2);
	ck_assert_ptr_nonnull(strstr(err, "shown to every user by ps"));
	free(err);
	/* a login that is not needed is harmless: nothing stored */
	tl_server_free(s);
	s = tl_server_start("memory", NULL);
	free(srv);
	srv = tl_strdupf("127.0.0.1:%d", s->port);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "put",
	    "--user", "ro", "--password-file", pw, "-s", srv, "q", "x", NULL), 0);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, NULL, NULL, "stats",
	    "--raw", "-s", srv, NULL), 0);
	ck_assert_ptr_nonnull(strstr(out, "STAT curr_items 1\n"));
	ck_assert_ptr_null(strstr(out, "login"));
	free(out);
	tl_server_free(s);
	free(srv);
	free(users);
	free(pw);
	free(open_pw);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

/* No password anywhere: asked on the terminal, without echo; with no
 * terminal, one line that says where a password can come from. */
START_TEST(client_login_prompt)
{
	char *dir = tl_mkdtemp();
	char *users = file_mode(dir, "users", "admin:s3cret word:admin\n", 0600);
	struct tl_server *s = tl_server_start("memory", "--auth-file", users,
	    NULL);
	char *srv = tl_strdupf("127.0.0.1:%d", s->port), *shown = NULL, *err;
	const char *put[] = { "put", "--user", "admin", "-s", srv, "q", "hi",
	    NULL };

	unsetenv("SAKER_USER");
	unsetenv("SAKER_PASSWORD");
	ck_assert_int_eq(run_saker_session(dir, "s3cret word\n",
	    "Password for admin: ", &shown, &err, put), 0);
	ck_assert_msg(strstr(shown, "Password for admin: ") != NULL, "%s", shown);
	ck_assert_msg(strstr(shown, "s3cret") == NULL, "echoed: %s", shown);
	ck_assert_str_eq(err, "");
	free(shown);
	free(err);
	ck_assert_int_eq(run_saker_session(dir, "wrong\n", "Password for admin: ",
	    &shown, &err, put), 1);
	ck_assert_ptr_nonnull(strstr(err, "wrong user name or password"));
	free(shown);
	free(err);
	ck_assert_int_eq(run_saker_session(dir, NULL, NULL, NULL, &err, put), 1);
	ck_assert_str_eq(err, "saker put: user admin needs a password: give "
	    "--password-file FILE or SAKER_PASSWORD (no terminal to ask on)\n");
	free(err);
	tl_server_free(s);
	free(srv);
	free(users);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

#ifdef HAVE_OPENSSL
/* The login over TLS, with a self-signed certificate made as the README
 * says. */
START_TEST(client_login_tls)
{
	char *dir = tl_mkdtemp();
	char *users = file_mode(dir, "users", "admin:adminpw:admin\n", 0600);
	char *cmd = tl_strdupf("cd %s && openssl req -x509 -newkey ec -pkeyopt "
	    "ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=127.0.0.1 "
	    "-addext subjectAltName=IP:127.0.0.1 -keyout server.key -out "
	    "server.pem >/dev/null 2>&1", dir);
	char *cert = tl_strdupf("%s/server.pem", dir);
	char *key = tl_strdupf("%s/server.key", dir);
	struct tl_server *s;
	char *srv, *out;
	size_t len;

	if (system(cmd) != 0) {
		fprintf(stderr, "client_login_tls: skipped (no openssl command)\n");
		goto done;
	}
	s = tl_server_start("memory", "--auth-file", users, "--tls-cert", cert,
	    "--tls-key", key, NULL);
	srv = tl_strdupf("127.0.0.1:%d", s->port);
	setenv("SAKER_PASSWORD", "adminpw", 1);
	ck_assert_int_eq(tl_run_saker(dir, NULL, NULL, NULL, NULL, "put",
	    "--tls-ca", cert, "--user", "admin", "-s", srv, "q", "over tls",
	    NULL), 0);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &out, &len, NULL, "get",
	    "--tls-ca", cert, "--user", "admin", "-s", srv, "q", NULL), 0);
	ck_assert(len == 8 && memcmp(out, "over tls", 8) == 0);
	free(out);
	unsetenv("SAKER_PASSWORD");
	tl_server_free(s);
	free(srv);
done:
	free(cmd);
	free(cert);
	free(key);
	free(users);
	tl_rmrf(dir);
	free(dir);
}
END_TEST
#endif

/* ------------------------------------------------------------------ */
/* sakerd's own messages */

/*
 * sakerd in directory cwd with the NULL-terminated arguments, its stderr
 * into a file of dir: when it exits by itself (a refusal) its status; when
 * it logs that it is serving, it is stopped with SIGTERM and the status
 * of that exit is returned.  *log gets what it wrote.
 */
static int
run_sakerd(const char *dir, const char *cwd, char **log, ...)
{
	const char *argv[24];
	char *path = tl_strdupf("%s/sakerd.err", dir), *text = NULL;
	const char *bin = tl_sakerd_path();	/* absolute, before the chdir */
	int64_t end = tl_now_ms() + tl_slow(10000);
	int n = 1, status = -1;
	bool termed = false;
	va_list ap;
	pid_t pid;

	argv[0] = "sakerd";
	va_start(ap, log);
	for (const char *a = va_arg(ap, const char *); a != NULL && n < 23;
	    a = va_arg(ap, const char *))
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	/* not the last run's log: its "serving" would stop this one early */
	unlink(path);
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		int e = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (e == -1 || chdir(cwd) != 0)
			_exit(126);
		dup2(e, 2);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	while (waitpid(pid, &status, WNOHANG) == 0) {
		ck_assert_msg(tl_now_ms() < end, "sakerd neither served nor exited");
		free(text);
		text = tl_read_file(path, NULL);
		if (!termed && text != NULL && strstr(text, " serving ") != NULL) {
			kill(pid, SIGTERM);
			termed = true;
		}
		tl_sleep_ms(20);
	}
	free(text);
	*log = tl_read_file(path, NULL);
	free(path);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A value refused names the option it was given to, not itself. */
START_TEST(sakerd_bad_values)
{
	static const char *const cases[][3] = {
		{ "--sync", "bogus", "invalid value 'bogus' for option --sync\n" },
		{ "-p", "abc", "invalid value 'abc' for option -p/--port\n" },
		{ "--port=70000", NULL, "invalid value '70000' for option -p/--port\n" },
		{ "--max-item-size", "zz",
		  "invalid value 'zz' for option --max-item-size\n" },
		{ "--idle-timeout", "-1", "invalid value '-1' for option --idle-timeout\n" },
	};
	char *dir = tl_mkdtemp(), *log;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(run_sakerd(dir, dir, &log, cases[i][0],
		    cases[i][1], NULL), 1);
		ck_assert_msg(strncmp(log, "sakerd: ", 8) == 0 &&
		    strncmp(log + 8, cases[i][2], strlen(cases[i][2])) == 0,
		    "%s: %s", cases[i][0], log);
		free(log);
	}
	/* a driver this build lacks is named as such, with the package */
#ifdef HAVE_POSTGRES
	ck_assert_int_eq(run_sakerd(dir, dir, &log, "--store", "nosuch:x", NULL), 1);
	ck_assert_ptr_nonnull(strstr(log, "unknown store type 'nosuch'"));
#else
	ck_assert_int_eq(run_sakerd(dir, dir, &log, "--store", "postgres:x", NULL), 1);
	ck_assert_msg(strstr(log, "store type 'postgres' is not compiled in: "
	    "configure found no libpq (or had --with-postgres=no); install "
	    "libpq-dev and rebuild") != NULL, "%s", log);
#endif
	free(log);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

#ifdef HAVE_LMDB
/* Started in "/", a relative store is shown from the root, "lmdb:/tmp/..."
 * (1.0.0: "lmdb://tmp/..."). */
START_TEST(sakerd_store_from_root)
{
	char *dir = tl_mkdtemp(), *log, *spec, *want;
	char *port = tl_strdupf("%d", tl_free_port());

	spec = tl_strdupf("lmdb:%s/store", dir + 1);	/* relative to / */
	want = tl_strdupf("store lmdb:%s/store, sync", dir);
	ck_assert_int_eq(run_sakerd(dir, "/", &log, "-p", port, "--store", spec,
	    NULL), 0);
	ck_assert_msg(strstr(log, want) != NULL, "%s", log);
	free(log);
	free(want);
	free(spec);
	free(port);
	tl_rmrf(dir);
	free(dir);
}
END_TEST
#endif

/* Run as root: after -u the pidfile's directory may be root's; sakerd
 * empties the file it cannot remove and says why.  And a store made by
 * root refused to the -u user says whose it is and what to do. */
START_TEST(sakerd_user_files)
{
	char *dir = tl_mkdtemp(), *log, *pid, *store, *want;
	char *port = tl_strdupf("%d", tl_free_port());
	size_t len = 99;
	char *text;

	if (geteuid() != 0 || getpwnam("nobody") == NULL) {
		fprintf(stderr, "sakerd_user_files: skipped (needs root and the "
		    "user nobody)\n");
		goto out;
	}
	/* memcheck, once -u has changed the uid, cannot remove its own vgdb
	 * files and says so in the log, which tests/valgrind.sh fails */
	if (getenv("TL_VALGRIND") != NULL) {
		fprintf(stderr, "sakerd_user_files: skipped under valgrind\n");
		goto out;
	}
	ck_assert_int_eq(chmod(dir, 0755), 0);
	pid = tl_strdupf("%s/sakerd.pid", dir);
	ck_assert_int_eq(run_sakerd(dir, dir, &log, "-p", port, "--store",
	    "memory", "-u", "nobody", "-P", pid, NULL), 0);
	text = tl_read_file(pid, &len);
	ck_assert_msg(text == NULL || len == 0, "pidfile left with %s", text);
	ck_assert_msg(text == NULL || strstr(log, "emptied it instead") != NULL,
	    "%s", log);
	free(text);
	free(log);
	free(pid);
#ifdef HAVE_LMDB
	store = tl_strdupf("lmdb:%s/store", dir);
	ck_assert_int_eq(run_sakerd(dir, dir, &log, "-p", port, "--store",
	    store, NULL), 0);
	free(log);
	ck_assert_int_eq(run_sakerd(dir, dir, &log, "-p", port, "--store",
	    store, "-u", "nobody", NULL), 1);
	want = tl_strdupf("belongs to root (uid 0) and this process runs as "
	    "nobody (uid %ld): run it as that user, or give the store to this "
	    "one (chown -R nobody %s)", (long)getpwnam("nobody")->pw_uid,
	    store + 5);
	ck_assert_msg(strstr(log, want) != NULL, "%s", log);
	free(want);
	free(log);
	free(store);
#endif
out:
	free(port);
	tl_rmrf(dir);
	free(dir);
}
END_TEST

#ifdef HAVE_SQLITE
/* A SQLite store's files are its owner's only, as LMDB's, whatever the
 * umask (1.0.0 made them 0644: every local user could read the items). */
START_TEST(sqlite_file_mode)
{
	static const char *const files[] = { "store.db", "store.db-wal",
	    "store.db-shm" };
	struct tl_server *s;
	struct stat st;
	char *path, *dir = tl_mkdtemp(), *spec = tl_strdupf("sqlite:%s/m.db", dir);
	char *dump;
	size_t i, len;
	int fd;

	umask(022);
	s = tl_server_start("sqlite", NULL);
	fd = tl_connect(s->port);
	tl_set(fd, "jobs", "secret");
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		path = tl_strdupf("%s/%s", s->dir, files[i]);
		ck_assert_msg(stat(path, &st) == 0, "%s: %s", path, strerror(errno));
		ck_assert_msg((st.st_mode & 0777) == 0600, "%s: mode %o", path,
		    (unsigned)(st.st_mode & 0777));
		free(path);
	}
	close(fd);
	tl_server_stop(s);
	/* a store saker makes (load, migrate) too */
	path = tl_strdupf("sqlite:%s/store.db", s->dir);
	ck_assert_int_eq(tl_run_saker(dir, NULL, &dump, &len, NULL, "dump", path,
	    NULL), 0);
	free(path);
	path = tl_strdupf("%s/dump", dir);
	write_file(path, dump, len);
	ck_assert_int_eq(tl_run_saker(dir, path, NULL, NULL, NULL, "load", spec,
	    NULL), 0);
	ck_assert_int_eq(stat(spec + 7, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	tl_server_free(s);
	free(dump);
	free(path);
	free(spec);
	tl_rmrf(dir);
	free(dir);
}
END_TEST
#endif

int
main(void)
{
	Suite *su = suite_create("cli");
	TCase *tc;
	SRunner *sr;
	int failed;

	tc = tcase_create("format");
	tcase_add_test(tc, dump_format_roundtrip);
	tcase_add_test(tc, dump_format_old_versions);
	tcase_add_test(tc, dump_format_bad_content);
	tcase_add_test(tc, dump_format_bad_input);
	tcase_add_test(tc, digest_order_matters);
	tcase_add_test(tc, source_walk_ids);
	suite_add_tcase(su, tc);

	tc = tcase_create("usage");
	/* cli_usage runs saker 18 times: 4 s is too short under memcheck on a
	 * busy machine even with CK_TIMEOUT_MULTIPLIER */
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, cli_usage);
	tcase_add_test(tc, human_bytes);
	tcase_add_loop_test(tc, client_refusals, 0,
	    (int)(sizeof(refusals) / sizeof(refusals[0])));
	tcase_add_loop_test(tc, client_bad_servers, 0,
	    (int)(sizeof(bad_servers) / sizeof(bad_servers[0])));
	tcase_add_test(tc, client_stats_many);
	tcase_add_test(tc, client_put_options);
	tcase_add_test(tc, client_put_id_wire);
	tcase_add_test(tc, refuse_types);
	tcase_add_test(tc, migrate_absent_driver);
	tcase_add_test(tc, sakerd_bad_values);
#ifdef HAVE_SQLITE
	tcase_add_test(tc, sqlite_file_mode);
#endif
	tcase_add_test(tc, sakerd_user_files);
#ifdef HAVE_LMDB
	tcase_add_test(tc, sakerd_store_from_root);
#endif
#ifdef HAVE_LMDB
	tcase_add_test(tc, check_store_cmd);
#endif
	suite_add_tcase(su, tc);

#if defined(HAVE_LMDB) && defined(HAVE_SQLITE)
	tc = tcase_create("stores");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, migrate_roundtrip);
	tcase_add_test(tc, migrate_refusals);
	tcase_add_test(tc, migrate_destination_refusals);
	tcase_add_test(tc, migrate_progress_line);
	tcase_add_test(tc, dump_output);
	tcase_add_test(tc, migrate_interrupted);
	tcase_add_test(tc, migrate_disk_full);
	tcase_add_test(tc, dump_load_identity);
	tcase_add_test(tc, dump_load_ids);
	tcase_add_test(tc, load_bad_input);
	suite_add_tcase(su, tc);
#endif

	tc = tcase_create("client");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, client_put_get_stats);
	tcase_add_test(tc, client_put_id);
	tcase_add_test(tc, client_login);
	tcase_add_test(tc, client_login_refusals);
	tcase_add_test(tc, client_login_prompt);
#ifdef HAVE_OPENSSL
	tcase_add_test(tc, client_login_tls);
#endif
	suite_add_tcase(su, tc);

	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
