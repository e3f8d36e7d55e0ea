/*
 * check_store.c -- runs the store conformance suite against every driver in
 * the compiled-in registry (saker_store_drivers[]), so a new driver is
 * tested without editing this file; then driver-specific extras.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "saker/store.h"
#include "itemattr.h"
#include "store_conformance.h"

extern const struct saker_store_driver saker_store_memory;
#ifdef HAVE_POSTGRES
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include "pg_cluster.h"
#include "itemattr.h"

/*
 * PostgreSQL: one throwaway cluster for the whole run (tests/pg_cluster.c);
 * each test gets a fresh, empty store as its own schema in that cluster
 * (the driver's schema= option), named after the forked test process.
 */
static struct pg_cluster pgc;

static void
pg_spec(char *buf, size_t len, const char *tmpdir)
{
	(void)tmpdir;
	pg_cluster_spec(&pgc, buf, len);
}

#include <libpq-fe.h>

#include <poll.h>

#include "tcpproxy.h"

/* A plain libpq connection to the tables of `schema` (as the driver's
 * schema= option sets them up), to look at or damage them. */
static PGconn *
px_conn(const char *schema)
{
	PGconn *c = PQconnectdb(pgc.conninfo);
	char sql[128];
	PGresult *r;

	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "connect: %s",
	    PQerrorMessage(c));
	snprintf(sql, sizeof(sql), "SET search_path = \"%s\"", schema);
	r = PQexec(c, sql);
	ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	return c;
}

static void
px_exec(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);

	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK ||
	    PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql,
	    PQresultErrorMessage(r));
	PQclear(r);
}

/* The first column of the first row as text ("" for none or NULL). */
static void
px_val(PGconn *c, const char *sql, char *out, size_t len)
{
	PGresult *r = PQexec(c, sql);

	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql,
	    PQresultErrorMessage(r));
	snprintf(out, len, "%s", PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
}

/* Flip bit 5 of the 4th byte of `marker` in every item holding it. */
static int
px_damage_items(PGconn *c, const char *marker, size_t len)
{
	const char *v[1] = { marker };
	int l[1] = { (int)len }, f[1] = { 1 }, n;
	PGresult *r;

	r = PQexecParams(c, "UPDATE saker_items SET data = set_byte(data,"
	    " position($1::bytea IN data) + 2,"
	    " get_byte(data, position($1::bytea IN data) + 2) # 32)"
	    " WHERE position($1::bytea IN data) > 0", 1, NULL, v, l, f, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "damage: %s",
	    PQresultErrorMessage(r));
	n = atoi(PQcmdTuples(r));
	PQclear(r);
	return n;
}

/* store_conformance_opts.damage: the schema is the spec's schema=. */
static int
pg_damage(const char *spec, const char *marker, size_t len)
{
	const char *at = strstr(spec, "schema=");
	char schema[64];
	PGconn *c;
	int n;

	ck_assert_ptr_nonnull(at);
	snprintf(schema, sizeof(schema), "%.*s", (int)strcspn(at + 7, " "),
	    at + 7);
	c = px_conn(schema);
	n = px_damage_items(c, marker, len);
	PQfinish(c);
	return n;
}
#endif

/* ------------------------------------------------------------------ */
/* the drivers' shared kit */

#include "../backends/journal.h"
#include "../backends/kit.h"
#include "../backends/qtab.h"

START_TEST(test_kit_crc32c)
{
	static const char v[] = "123456789";
	unsigned char big[1000];
	uint32_t whole, parts;
	int way;
	size_t i;

	for (i = 0; i < sizeof(big); i++)
		big[i] = (unsigned char)(i * 7 + 3);
	for (way = 1; way <= 2; way++) {
		kit_crc32c_force(way);
		/* the check value of CRC-32C (RFC 3720) */
		ck_assert_uint_eq(kit_crc32c(0, v, 9), 0xe3069283u);
		ck_assert_uint_eq(kit_crc32c(0, v, 0), 0);
		/* unaligned starts and odd lengths, and chaining */
		whole = kit_crc32c(0, big + 1, 997);
		parts = kit_crc32c(kit_crc32c(0, big + 1, 13), big + 14, 984);
		ck_assert_uint_eq(whole, parts);
		if (way == 1)
			ck_assert_uint_eq(kit_crc32c_force(2) == 2 ?
			    kit_crc32c(0, big + 1, 997) : whole, whole);
	}
	kit_crc32c_force(0);
}
END_TEST

START_TEST(test_kit_be)
{
	unsigned char b[8];

	saker_put_be64(b, 0x0102030405060708ULL);
	ck_assert_int_eq(b[0], 1);
	ck_assert_int_eq(b[7], 8);
	ck_assert(saker_get_be64(b) == 0x0102030405060708ULL);
	saker_put_be32(b, 0xa1b2c3d4u);
	ck_assert_int_eq(b[0], 0xa1);
	ck_assert_uint_eq(saker_get_be32(b), 0xa1b2c3d4u);
	saker_put_le64(b, 0x0102030405060708ULL);
	ck_assert_int_eq(b[0], 8);
	ck_assert_int_eq(b[7], 1);
	ck_assert(saker_get_le64(b) == 0x0102030405060708ULL);
	saker_put_le32(b, 0xa1b2c3d4u);
	ck_assert_int_eq(b[0], 0xd4);
	ck_assert_uint_eq(saker_get_le32(b), 0xa1b2c3d4u);
}
END_TEST

/* The drivers' queue table: 5,000 entries through several doublings,
 * found by name and id, renumbered, removed, iterated exactly once. */
struct tq {
	int tag;
	struct kit_qent qe;
	char name[16];
};

START_TEST(test_kit_qtab)
{
	enum { N = 5000 };
	struct kit_qtab t;
	struct tq *v = calloc(N, sizeof(*v));
	struct kit_qent *e;
	unsigned char *seen = calloc(N, 1);
	size_t b = 0, n = 0;
	int i;

	ck_assert_ptr_nonnull(v);
	ck_assert_ptr_nonnull(seen);
	memset(&t, 0, sizeof(t));
	ck_assert_ptr_null(kit_qtab_by_name(&t, "x", 1));
	ck_assert_ptr_null(kit_qtab_by_id(&t, 1));
	ck_assert_ptr_null(kit_qtab_next(&t, &b, NULL));
	for (i = 0; i < N; i++) {
		v[i].tag = i;
		snprintf(v[i].name, sizeof(v[i].name), "q%d", i);
		v[i].qe.name = v[i].name;
		v[i].qe.len = strlen(v[i].name);
		v[i].qe.id = 1000 + i;
		ck_assert_int_eq(kit_qtab_add(&t, &v[i].qe), 0);
	}
	ck_assert_uint_eq(t.count, N);
	for (i = 0; i < N; i += 7) {
		e = kit_qtab_by_name(&t, v[i].name, strlen(v[i].name));
		ck_assert_ptr_eq(e, &v[i].qe);
		ck_assert_int_eq(KIT_QENT_QUEUE(e, struct tq, qe)->tag, i);
		ck_assert_ptr_eq(kit_qtab_by_id(&t, 1000 + i), &v[i].qe);
	}
	/* a prefix of a name is another name */
	ck_assert_ptr_null(kit_qtab_by_name(&t, "q1", 1));
	kit_qtab_set_id(&t, &v[3].qe, 99999);
	ck_assert_ptr_null(kit_qtab_by_id(&t, 1003));
	ck_assert_ptr_eq(kit_qtab_by_id(&t, 99999), &v[3].qe);
	for (i = 0; i < N; i += 2)
		kit_qtab_remove(&t, &v[i].qe);
	kit_qtab_remove(&t, &v[0].qe);       /* twice: a no-op */
	ck_assert_uint_eq(t.count, N / 2);
	ck_assert_ptr_null(kit_qtab_by_name(&t, "q10", 3));
	ck_assert_ptr_null(kit_qtab_by_id(&t, 1010));
	for (e = kit_qtab_next(&t, &b, NULL); e != NULL;
	    e = kit_qtab_next(&t, &b, e)) {
		i = KIT_QENT_QUEUE(e, struct tq, qe)->tag;
		ck_assert_int_eq(i % 2, 1);
		ck_assert_int_eq(seen[i], 0);
		seen[i] = 1;
		n++;
	}
	ck_assert_uint_eq(n, N / 2);
	/* a new walk starts at the first bucket whatever the cursor held
	 * (sqlite's close reused a loop counter: a leak under memcheck) */
	b = 12345;
	for (n = 0, e = kit_qtab_next(&t, &b, NULL); e != NULL;
	    e = kit_qtab_next(&t, &b, e))
		n++;
	ck_assert_uint_eq(n, N / 2);
	kit_qtab_free(&t);
	free(seen);
	free(v);
}
END_TEST

/* ------------------------------------------------------------------ */
/* stores written by saker 1.0.0 (no item checksums) open and serve:
 * tests/data holds one per durable file driver, made by 1.0.0's sakerd
 * with: set q1 first, set q1 second, set q1/delay=1000 delayed,
 * set q2 other, get q2/open, then SIGTERM (q2's item is open). */

#if defined(HAVE_LMDB) || defined(HAVE_SQLITE)
#include <fcntl.h>
#include <unistd.h>

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

struct compat_got {
	char data[64];
	uint32_t deliveries;
	uint64_t id;
};

static int
compat_cb(void *arg, const struct saker_item *item)
{
	struct compat_got *g = arg;

	snprintf(g->data, sizeof(g->data), "%.*s", (int)item->len,
	    (const char *)item->data);
	g->deliveries = item->deliveries;
	g->id = item->id;
	return 0;
}

/* Take the head of qname in `mode`: it must be `want` with `dlv`
 * deliveries; an open one is released again. */
static void
compat_take_mode(saker_store *s, const char *qname, int mode, const char *want,
    uint32_t dlv)
{
	struct compat_got g;
	saker_queue *q;

	memset(&g, 0, sizeof(g));
	ck_assert_int_eq(s->driver->queue_open(s, qname, strlen(qname), false,
	    NULL, &q), SAKER_OK);
	ck_assert_int_eq(s->driver->take(s, q, mode, INT64_MAX / 2,
	    compat_cb, &g), SAKER_OK);
	ck_assert_str_eq(g.data, want);
	ck_assert_uint_eq(g.deliveries, dlv);
	if (mode == SAKER_TAKE_OPEN)
		ck_assert_int_eq(s->driver->release(s, q, g.id), SAKER_OK);
}
#define compat_take(s, qn, want, dlv) \
	compat_take_mode((s), (qn), SAKER_TAKE_REMOVE, (want), (dlv))

/* Items from before delivery counts read 0 and are counted from then on,
 * durably. */
static void
compat_check(const char *spec)
{
	struct saker_store_opts o;
	struct saker_item it;
	saker_store *s = NULL;
	saker_queue *q;
	char err[512];
	int64_t next;

	memset(&o, 0, sizeof(o));
	o.create = true;
	ck_assert_msg(saker_store_open(spec, &o, &s, err, sizeof(err)) ==
	    SAKER_OK, "open %s: %s", spec, err);
	/* the open item, back at the head */
	compat_take(s, "q2", "other", 0);
	compat_take_mode(s, "q1", SAKER_TAKE_OPEN, "first", 1);
	compat_take(s, "q1", "first", 1);
	compat_take(s, "q1", "second", 0);
	ck_assert_int_eq(s->driver->promote(s, INT64_MAX / 2, &next), SAKER_OK);
	compat_take_mode(s, "q1", SAKER_TAKE_OPEN, "delayed", 1);
	compat_take_mode(s, "q1", SAKER_TAKE_OPEN, "delayed", 2);
	/* new items (with a checksum) next to the old ones */
	ck_assert_int_eq(s->driver->queue_open(s, "q3", 2, true, NULL, &q),
	    SAKER_OK);
	memset(&it, 0, sizeof(it));
	it.data = "new";
	it.len = 3;
	ck_assert_int_eq(s->driver->put(s, q, &it, 1700000000000LL), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
	ck_assert_int_eq(saker_store_open(spec, &o, &s, err, sizeof(err)),
	    SAKER_OK);
	compat_take(s, "q3", "new", 0);
	compat_take(s, "q1", "delayed", 2);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
}

static const char *
data_dir(void)
{
	const char *d = getenv("srcdir");	/* set by automake's harness */

	return d != NULL ? d : ".";
}
#endif

#ifdef HAVE_LMDB
START_TEST(test_compat_lmdb)
{
	char dir[] = "/tmp/saker-compat-XXXXXX", from[1024], to[1024],
	    spec[1100];

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(from, sizeof(from), "%s/tests/data/store-1.0.0-lmdb/data.mdb",
	    data_dir());
	snprintf(to, sizeof(to), "%s/data.mdb", dir);
	copy_file(from, to);
	snprintf(spec, sizeof(spec), "lmdb:%s", dir);
	compat_check(spec);
	snprintf(to, sizeof(to), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(to), 0);
}
END_TEST
#endif

#ifdef HAVE_SQLITE
START_TEST(test_compat_sqlite)
{
	char dir[] = "/tmp/saker-compat-XXXXXX", from[1024], to[1024],
	    spec[1100];

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(from, sizeof(from), "%s/tests/data/store-1.0.0.sqlite",
	    data_dir());
	snprintf(to, sizeof(to), "%s/s.db", dir);
	copy_file(from, to);
	snprintf(spec, sizeof(spec), "sqlite:%s", to);
	compat_check(spec);
	snprintf(to, sizeof(to), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(to), 0);
}
END_TEST
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
	ck_assert_int_eq(saker_store_open("memory,max-memory=4k", &opts, &s, err,
	    sizeof(err)), SAKER_OK);
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

/*
 * A set with a deduplication id whose put fails (the memory store is
 * full): the id is not kept, so the producer's retry, once there is room,
 * is stored -- not answered as a duplicate of an item that was never
 * put (which would lose it).  The retry's id is kept from then on.
 */
START_TEST(test_memory_full_dedup)
{
	static char big[4097], small[100];
	struct saker_store_opts opts;
	struct saker_queue_stats st;
	saker_store *s = NULL;
	saker_queue *q = NULL;
	char err[128];

	memset(&opts, 0, sizeof(opts));
	ck_assert_int_eq(saker_store_open("memory,max-memory=4k", &opts, &s, err,
	    sizeof(err)), SAKER_OK);
	ck_assert_int_eq(saker_store_queue_open(s, "m", 1, true, NULL, &q),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_put_once(s, q, &(struct saker_item){
	    .len = sizeof(big), .data = big }, "k1", 2, 60000, 0, BASE),
	    SAKER_ENOMEM);
	memset(&st, 0, sizeof(st));
	ck_assert_int_eq(saker_store_queue_stats(s, q, &st), SAKER_OK);
	ck_assert_uint_eq(st.items, 0);
	ck_assert_uint_eq(st.dedup_ids, 0);

	ck_assert_int_eq(saker_store_put_once(s, q, &(struct saker_item){
	    .len = sizeof(small), .data = small }, "k1", 2, 60000, 0, BASE),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_put_once(s, q, &(struct saker_item){
	    .len = sizeof(small), .data = small }, "k1", 2, 60000, 0, BASE),
	    SAKER_EEXIST);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	memset(&st, 0, sizeof(st));
	ck_assert_int_eq(saker_store_queue_stats(s, q, &st), SAKER_OK);
	ck_assert_uint_eq(st.items, 1);
	ck_assert_uint_eq(st.dedup_ids, 1);
	ck_assert_uint_eq(st.dedup_hits, 1);
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
	/* the layer refuses to make a queue (store.h, REFUSALS) */
	ck_assert_int_eq(saker_store_queue_open(s, "r", 1, true, NULL, &q),
	    SAKER_EREADONLY);
	ck_assert_str_eq(saker_store_errmsg(s),
	    "memory: store opened read-only");
	ck_assert_int_eq(saker_store_queue_open(s, "r", 1, false, NULL, &q),
	    SAKER_ENOTFOUND);
	ck_assert_str_ne(saker_store_errmsg(s),
	    "memory: store opened read-only");
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

/* The driver-option channel (store.h, DRIVER OPTIONS): keys checked
 * against each driver's table and values parsed by the registry, with one
 * wording for every driver. */
static int
open_err(const char *spec, const char *const *extra, char *err, size_t len)
{
	struct saker_store_opts o;
	saker_store *s = NULL;
	int rc;

	memset(&o, 0, sizeof(o));
	o.driver_opts = extra;
	err[0] = '\0';
	rc = saker_store_open(spec, &o, &s, err, len);
	if (rc == SAKER_OK)
		saker_store_close(s);
	else
		ck_assert_ptr_null(s);
	return rc;
}

START_TEST(test_store_options)
{
	static const char *const big[] = { "max-memory=1g", NULL };
	static const char *const bad[] = { "max-memory=lots", NULL };
	const struct saker_store_driver *d = &saker_store_memory;
	struct saker_store_opts o;
	saker_store *s = NULL;
	saker_queue *q = NULL;
	char err[256], spec[64];
	size_t i;

	ck_assert_int_eq(open_err("memory,max-memory=64k", NULL, err,
	    sizeof(err)), SAKER_OK);
	ck_assert_int_eq(open_err("memory,bogus=1", NULL, err, sizeof(err)),
	    SAKER_EINVAL);
	ck_assert_str_eq(err, "store type 'memory' has no option 'bogus'"
	    " (options: max-memory)");
	ck_assert_int_eq(open_err("memory,max-memory=12q", NULL, err,
	    sizeof(err)), SAKER_EINVAL);
	ck_assert_msg(strncmp(err, "store option memory.max-memory: bad value"
	    " '12q' (", 41) == 0, "%s", err);
	ck_assert_int_eq(open_err("memory,max-memory=99999999999999999999999",
	    NULL, err, sizeof(err)), SAKER_EINVAL);
	ck_assert_int_eq(open_err("memory,max-memory", NULL, err, sizeof(err)),
	    SAKER_EINVAL);
	ck_assert_msg(strstr(err, "needs a value") != NULL, "%s", err);
	ck_assert_int_eq(open_err("memory,", NULL, err, sizeof(err)),
	    SAKER_EINVAL);
	ck_assert_int_eq(open_err("memory", bad, err, sizeof(err)),
	    SAKER_EINVAL);
	ck_assert_msg(strstr(err, "'lots'") != NULL, "%s", err);

	/* every driver answers an unknown key the same way, before open() */
	for (i = 0; saker_store_drivers[i] != NULL; i++) {
		snprintf(spec, sizeof(spec), "%s,nope=1%s",
		    saker_store_drivers[i]->name,
		    saker_store_drivers[i]->location_help != NULL ?
		    ":/nonexistent/x" : "");
		ck_assert_int_eq(open_err(spec, NULL, err, sizeof(err)),
		    SAKER_EINVAL);
		ck_assert_msg(strstr(err, "no option 'nope'") != NULL ||
		    strstr(err, "takes no options") != NULL, "%s: %s", spec, err);
	}
#ifdef HAVE_LMDB
	ck_assert_int_eq(open_err("lmdb,checkpoint-bytes=0:/nonexistent/x",
	    NULL, err, sizeof(err)), SAKER_EINVAL);
	ck_assert_msg(strstr(err, "lmdb.checkpoint-bytes: bad value '0'") !=
	    NULL, "%s", err);
#endif
#ifdef HAVE_POSTGRES
	/* seconds, bounded; refused before any connection is tried */
	ck_assert_int_eq(open_err("postgres,lease=0.01:host=/nonexistent",
	    NULL, err, sizeof(err)), SAKER_EINVAL);
	ck_assert_msg(strstr(err, "postgres.lease: bad value '0.01'") != NULL,
	    "%s", err);
	ck_assert_int_eq(open_err("postgres,lease=1.0005:host=/nonexistent",
	    NULL, err, sizeof(err)), SAKER_EINVAL);
#endif

	/* the value reaches the driver, and the spec wins over driver_opts */
	memset(&o, 0, sizeof(o));
	o.driver_opts = big;
	ck_assert_int_eq(saker_store_open("memory,max-memory=2k", &o, &s, err,
	    sizeof(err)), SAKER_OK);
	ck_assert_int_eq(d->queue_open(s, "m", 1, true, NULL, &q), SAKER_OK);
	ck_assert_int_eq(mem_put(s, q, 3000), SAKER_ENOMEM);
	saker_store_close(s);
	ck_assert_int_eq(saker_store_open("memory", &o, &s, err, sizeof(err)),
	    SAKER_OK);
	ck_assert_int_eq(d->queue_open(s, "m", 1, true, NULL, &q), SAKER_OK);
	ck_assert_int_eq(mem_put(s, q, 3000), SAKER_OK);
	saker_store_close(s);
}
END_TEST

/* ------------------------------------------------------------------ */
/* the redo journal of the lmdb driver and of the sqlite driver with
 * --sync always (docs/lmdb.md, docs/sqlite.md) */

#if defined(HAVE_LMDB) || defined(HAVE_SQLITE)
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/file.h>

/* A journaling driver: its spec and its files, in a directory. */
struct jdrv {
	const char *name;
	const char *spec;	/* printf: the directory */
	const char *journal;	/* the journal's name in it */
	const char *const *files;
	bool own_dir;		/* the driver makes the directory */
};

static const char *const lm_files[] = { "data.mdb", "lock.mdb", "saker.lock",
    "saker.journal", NULL };
static const char *const sq_files[] = { "store.db", "store.db-wal",
    "store.db-shm", "store.db.lock", "store.db.saker-journal", NULL };

static const struct jdrv jdrvs[] = {
#ifdef HAVE_LMDB
	{ "lmdb", "lmdb:%s", "saker.journal", lm_files, true },
#endif
#ifdef HAVE_SQLITE
	{ "sqlite", "sqlite:%s/store.db", "store.db.saker-journal", sq_files,
	    false },
#endif
};
#define NJDRVS ((int)(sizeof(jdrvs) / sizeof(jdrvs[0])))

/* A fresh directory name for d's store (made unless d makes it). */
static void
jn_mkdir(const struct jdrv *d, char *dir)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
	if (d->own_dir)
		rmdir(dir);
}

static void
jn_rmstore(const struct jdrv *d, const char *dir)
{
	char path[512];
	int i;

	for (i = 0; d->files[i] != NULL; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, d->files[i]);
		unlink(path);
	}
	rmdir(dir);
}

static void
jn_path(const struct jdrv *d, const char *dir, char *path, size_t len)
{
	snprintf(path, len, "%s/%s", dir, d->journal);
}

static saker_store *
jn_open_store(const struct jdrv *d, const char *dir, bool read_only)
{
	struct saker_store_opts o;
	saker_store *s = NULL;
	char spec[512], err[1024];
	int rc;

	memset(&o, 0, sizeof(o));
	o.sync = SAKER_SYNC_ALWAYS;
	o.create = !read_only;
	o.read_only = read_only;
	snprintf(spec, sizeof(spec), d->spec, dir);
	rc = saker_store_open(spec, &o, &s, err, sizeof(err));
	ck_assert_msg(rc == SAKER_OK, "open %s: %s", spec, err);
	return s;
}

static void
lm_put_str(saker_store *s, saker_queue *q, const char *str)
{
	struct saker_item it;

	memset(&it, 0, sizeof(it));
	it.len = strlen(str);
	it.data = str;
	ck_assert_int_eq(s->driver->put(s, q, &it, BASE), SAKER_OK);
}

static int
copy_cb(void *arg, const struct saker_item *item)
{
	snprintf(arg, 64, "%.*s", (int)item->len, (const char *)item->data);
	return 0;
}

/* Take the head of queue "q" into buf ("" when empty). */
static void
lm_take_str(saker_store *s, char *buf, int mode)
{
	saker_queue *q;
	int rc;

	buf[0] = '\0';
	ck_assert_int_eq(s->driver->queue_open(s, "q", 1, false, NULL, &q),
	    SAKER_OK);
	rc = s->driver->take(s, q, mode, BASE, copy_cb, buf);
	ck_assert(rc == SAKER_OK || rc == SAKER_EEMPTY);
}

/* Take from queue "q" and check what came: want "" for nothing. */
static void
lm_expect(saker_store *s, int mode, const char *want)
{
	char buf[64];

	lm_take_str(s, buf, mode);
	ck_assert_str_eq(buf, want);
}

/* Take want[0], want[1], ... from "q" in order, then find it empty, and
 * commit. */
static void
jn_take_all(saker_store *s, const char *const *want)
{
	for (; *want != NULL; want++)
		lm_expect(s, SAKER_TAKE_REMOVE, *want);
	lm_expect(s, SAKER_TAKE_REMOVE, "");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
}

/* In a child: make batches that only the journal holds (no checkpoint
 * yet), then die without closing the store, as a crash would. */
static void
jn_crash_after_batches(const struct jdrv *d, const char *dir)
{
	pid_t pid = fork();
	int st;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		saker_store *s = jn_open_store(d, dir, false);
		saker_queue *q;

		if (s->driver->queue_open(s, "q", 1, true, NULL, &q) != SAKER_OK)
			_exit(2);
		lm_put_str(s, q, "one");
		lm_put_str(s, q, "two");
		if (saker_store_commit(s) != SAKER_OK)
			_exit(3);
		lm_put_str(s, q, "three");
		if (saker_store_commit(s) != SAKER_OK)
			_exit(4);
		/* No close, no checkpoint, no exit handlers (nor a leak
		 * report under valgrind): a crash. */
		kill(getpid(), SIGKILL);
		_exit(5);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
	    "child: %d", st);
}

#ifdef HAVE_LMDB
/* Put `n` items "e" to q expiring at BASE + 10, due at `due` (0: ready). */
static void
jn_put_expiring(saker_store *s, saker_queue *q, int n, int64_t due)
{
	struct saker_item it;

	memset(&it, 0, sizeof(it));
	it.data = "e";
	it.len = 1;
	it.expires_ms = BASE + 10;
	it.due_ms = due;
	while (n-- > 0)
		ck_assert_int_eq(saker_store_put(s, q, &it, BASE), SAKER_OK);
}

/* Expired items the layer routed (at the head of a take and in promote)
 * are in the journal with the deletes of their originals: after a crash
 * before any checkpoint, the replay finds them in the target and gone
 * from q, every one. */
START_TEST(test_journal_expire_to)
{
	const struct jdrv *d = &jdrvs[0];	/* lmdb */
	char dir[] = "/tmp/saker-jn-XXXXXX", buf[64];
	struct saker_queue_stats st;
	saker_store *s;
	saker_queue *q, *t;
	int64_t next;
	pid_t pid;
	int wst;

	jn_mkdir(d, dir);
	if ((pid = fork()) == 0) {
		s = jn_open_store(d, dir, false);
		if (saker_store_queue_open(s, "q", 1, true, NULL, &q) != 0 ||
		    saker_store_expire_to(s, q, "t", 1) != 0)
			_exit(2);
		jn_put_expiring(s, q, 1200, 0);
		jn_put_expiring(s, q, 300, BASE + 5);
		lm_put_str(s, q, "live");
		if (saker_store_commit(s) != SAKER_OK)
			_exit(3);
		if (saker_store_take(s, q, SAKER_TAKE_REMOVE, BASE + 50,
		    copy_cb, buf) != SAKER_OK || strcmp(buf, "live") != 0 ||
		    saker_store_promote(s, BASE + 50, &next) != SAKER_OK ||
		    saker_store_commit(s) != SAKER_OK)
			_exit(4);
		kill(getpid(), SIGKILL);	/* a crash, as above */
		_exit(5);
	}
	ck_assert_int_ge(pid, 0);
	ck_assert_int_eq(waitpid(pid, &wst, 0), pid);
	ck_assert_msg(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL,
	    "child: %d", wst);
	s = jn_open_store(d, dir, false);
	ck_assert_int_eq(saker_store_queue_open(s, "q", 1, false, NULL, &q),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_queue_stats(s, q, &st), SAKER_OK);
	ck_assert_uint_eq(st.items + st.delayed_items + st.expired_items, 0);
	/* no record of them is left in q either: the next item is the head */
	lm_put_str(s, q, "next");
	lm_expect(s, SAKER_TAKE_REMOVE, "next");
	ck_assert_int_eq(saker_store_queue_open(s, "t", 1, false, NULL, &t),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_queue_stats(s, t, &st), SAKER_OK);
	ck_assert_uint_eq(st.items, 1500);
	saker_store_close(s);
	jn_rmstore(d, dir);
}
END_TEST
#endif

/* A read-only opener (saker dump, migrate source) of a crashed store
 * sees every acknowledged batch: it recovers the store first. */
START_TEST(test_journal_read_only)
{
	const struct jdrv *d = &jdrvs[_i];
	char dir[] = "/tmp/saker-jn-XXXXXX";
	saker_store *s;

	jn_mkdir(d, dir);
	jn_crash_after_batches(d, dir);
	s = jn_open_store(d, dir, true);
	lm_expect(s, SAKER_TAKE_PEEK, "one");
	saker_store_close(s);
	/* and a writer finds all three, in order */
	s = jn_open_store(d, dir, false);
	lm_expect(s, SAKER_TAKE_REMOVE, "one");
	lm_expect(s, SAKER_TAKE_REMOVE, "two");
	lm_expect(s, SAKER_TAKE_REMOVE, "three");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
	/* the takes were checkpointed at close: nothing comes back */
	s = jn_open_store(d, dir, false);
	lm_expect(s, SAKER_TAKE_PEEK, "");
	saker_store_close(s);
	jn_rmstore(d, dir);
}
END_TEST

/* A read-only opener that must recover needs the exclusive lock for it:
 * while another process shares the lock it is refused, naming that one,
 * and the store is left as it was for the next opener. */
START_TEST(test_journal_read_only_locked)
{
	const struct jdrv *d = &jdrvs[_i];
	char dir[] = "/tmp/saker-jn-XXXXXX", path[512], err[1024], want[64];
	struct saker_store_opts o;
	saker_store *s = NULL;
	int p2c[2], c2p[2], st;
	pid_t pid;
	char c;

	jn_mkdir(d, dir);
	jn_crash_after_batches(d, dir);
	snprintf(path, sizeof(path), "%s/%s", dir, d->own_dir ? "saker.lock" :
	    "store.db.lock");
	ck_assert_int_eq(pipe(p2c), 0);
	ck_assert_int_eq(pipe(c2p), 0);
	if ((pid = fork()) == 0) {
		int fd = open(path, O_RDONLY);

		if (fd < 0 || flock(fd, LOCK_SH | LOCK_NB) != 0)
			_exit(1);
		(void)!write(c2p[1], "r", 1);
		(void)!read(p2c[0], &c, 1);
		_exit(0);
	}
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(read(c2p[0], &c, 1), 1);
	memset(&o, 0, sizeof(o));
	o.read_only = true;
	snprintf(path, sizeof(path), d->spec, dir);
	ck_assert_int_eq(saker_store_open(path, &o, &s, err, sizeof(err)),
	    SAKER_ELOCKED);
	ck_assert_ptr_null(s);
	snprintf(want, sizeof(want), "(pid %ld)", (long)pid);
	ck_assert_msg(strstr(err, "needs write access") != NULL &&
	    strstr(err, "in use by another process") != NULL &&
	    strstr(err, want) != NULL, "%s", err);
	ck_assert_int_eq(write(p2c[1], "x", 1), 1);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(p2c[0]); close(p2c[1]); close(c2p[0]); close(c2p[1]);
	/* the other one gone, the reader recovers and sees every batch */
	s = jn_open_store(d, dir, true);
	lm_expect(s, SAKER_TAKE_PEEK, "one");
	saker_store_close(s);
	jn_rmstore(d, dir);
}
END_TEST

/* Another store's journal, copied in by hand, is never replayed. */
START_TEST(test_journal_foreign)
{
	const struct jdrv *d = &jdrvs[_i];
	char a[] = "/tmp/saker-jn-XXXXXX", b[] = "/tmp/saker-jn-XXXXXX";
	char from[512], to[512];
	saker_store *s;
	saker_queue *q;

	jn_mkdir(d, a);
	jn_mkdir(d, b);
	jn_crash_after_batches(d, a);
	/* b has applied no batch yet, so a's first record (batch 1) is in
	 * sequence: only the store id in the record check tells them apart */
	s = jn_open_store(d, b, false);
	saker_store_close(s);
	jn_path(d, a, from, sizeof(from));
	jn_path(d, b, to, sizeof(to));
	ck_assert_int_eq(rename(from, to), 0);
	s = jn_open_store(d, b, false);
	ck_assert_int_eq(s->driver->queue_open(s, "q", 1, false, NULL, &q),
	    SAKER_ENOTFOUND);
	saker_store_close(s);
	jn_rmstore(d, a);
	jn_rmstore(d, b);
}
END_TEST

/* A torn last record (a crash in the middle of writing it) ends the
 * journal: the batches before it are replayed, it is not. */
START_TEST(test_journal_torn)
{
	const struct jdrv *d = &jdrvs[_i];
	char dir[] = "/tmp/saker-jn-XXXXXX", path[512], buf[64];
	unsigned char hdr[32];
	saker_store *s;
	uint64_t len;
	int fd, i;

	jn_mkdir(d, dir);
	jn_crash_after_batches(d, dir);
	/* the second record starts after the first: flip its last byte */
	jn_path(d, dir, path, sizeof(path));
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, hdr, 32, 0), 32);
	for (len = 0, i = 7; i >= 0; i--)
		len = (len << 8) | hdr[16 + i];
	ck_assert_int_eq(pread(fd, hdr, 32, (off_t)(32 + len)), 32);
	for (len = 32 + len + 32, i = 7; i >= 0; i--)
		len += (uint64_t)hdr[16 + i] << (8 * i);
	ck_assert_int_eq(pread(fd, buf, 1, (off_t)len - 1), 1);
	buf[0] ^= 0x55;
	ck_assert_int_eq(pwrite(fd, buf, 1, (off_t)len - 1), 1);
	close(fd);
	s = jn_open_store(d, dir, false);
	jn_take_all(s, (const char *const[]){ "one", "two", NULL });
	saker_store_close(s);
	jn_rmstore(d, dir);
}
END_TEST

/* A --sync always crash, then an open with another sync mode: the
 * batches only the journal held are replayed all the same. */
START_TEST(test_journal_other_mode)
{
	const struct jdrv *d = &jdrvs[_i];
	char dir[] = "/tmp/saker-jn-XXXXXX", spec[512], err[1024];
	struct saker_store_opts o;
	saker_store *s = NULL;

	jn_mkdir(d, dir);
	jn_crash_after_batches(d, dir);
	memset(&o, 0, sizeof(o));
	o.sync = SAKER_SYNC_NEVER;
	snprintf(spec, sizeof(spec), d->spec, dir);
	ck_assert_msg(saker_store_open(spec, &o, &s, err, sizeof(err)) ==
	    SAKER_OK, "open %s: %s", spec, err);
	jn_take_all(s, (const char *const[]){ "one", "two", "three", NULL });
	saker_store_close(s);
	jn_rmstore(d, dir);
}
END_TEST

/*
 * A flush and a delete that only the journal holds (a crash before any
 * checkpoint) are replayed: the flushed queue has only what came after,
 * its delayed item is gone too, and keeps its deduplication ids (a flush
 * does); the deleted queue is gone with its ids (a retry of its id is a
 * new set once the queue is made again).
 */
START_TEST(test_journal_flush_delete)
{
	const struct jdrv *d = &jdrvs[_i];
	char dir[] = "/tmp/saker-jn-XXXXXX";
	struct saker_queue_stats st;
	struct saker_item it;
	saker_store *s;
	saker_queue *q, *g;
	int64_t next = 0;
	pid_t pid;
	int wst;

	jn_mkdir(d, dir);
	if ((pid = fork()) == 0) {
		s = jn_open_store(d, dir, false);
		if (saker_store_queue_open(s, "q", 1, true, NULL, &q) != 0 ||
		    saker_store_queue_open(s, "gone", 4, true, NULL, &g) != 0)
			_exit(2);
		lm_put_str(s, q, "one");
		memset(&it, 0, sizeof(it));
		it.data = "later";
		it.len = 5;
		it.due_ms = BASE + 100000;
		if (saker_store_put(s, q, &it, BASE) != SAKER_OK)
			_exit(3);
		it.due_ms = 0;
		it.data = "x";
		it.len = 1;
		if (saker_store_put_once(s, q, &it, "kq", 2, 3600000, 0, BASE) !=
		    SAKER_OK || saker_store_put_once(s, g, &it, "kg", 2, 3600000,
		    0, BASE) != SAKER_OK || saker_store_commit(s) != SAKER_OK)
			_exit(4);
		if (saker_store_queue_flush(s, q) != SAKER_OK ||
		    saker_store_queue_delete(s, g) != SAKER_OK ||
		    saker_store_commit(s) != SAKER_OK)
			_exit(5);
		lm_put_str(s, q, "after");
		if (saker_store_commit(s) != SAKER_OK)
			_exit(6);
		kill(getpid(), SIGKILL);	/* a crash, as above */
		_exit(7);
	}
	ck_assert_int_ge(pid, 0);
	ck_assert_int_eq(waitpid(pid, &wst, 0), pid);
	ck_assert_msg(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL,
	    "%s: child: %d", d->name, wst);

	s = jn_open_store(d, dir, false);
	ck_assert_int_eq(saker_store_queue_open(s, "gone", 4, false, NULL, &g),
	    SAKER_ENOTFOUND);
	ck_assert_int_eq(saker_store_queue_open(s, "q", 1, false, NULL, &q),
	    SAKER_OK);
	memset(&st, 0, sizeof(st));
	ck_assert_int_eq(saker_store_queue_stats(s, q, &st), SAKER_OK);
	ck_assert_uint_eq(st.items, 1);
	ck_assert_uint_eq(st.delayed_items, 0);
	ck_assert_uint_eq(st.dedup_ids, 1);
	ck_assert_int_eq(saker_store_promote(s, BASE + 200000, &next), SAKER_OK);
	jn_take_all(s, (const char *const[]){ "after", NULL });
	memset(&it, 0, sizeof(it));
	it.data = "y";
	it.len = 1;
	ck_assert_int_eq(saker_store_put_once(s, q, &it, "kq", 2, 3600000, 0,
	    BASE), SAKER_EEXIST);
	ck_assert_int_eq(saker_store_queue_open(s, "gone", 4, true, NULL, &g),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_put_once(s, g, &it, "kg", 2, 3600000, 0,
	    BASE), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
	jn_rmstore(d, dir);
}
END_TEST

/* ------------------------------------------------------------------ */
/* a store spec that names something else (a wrong path, another
 * program's database, a newer build's store): the open refuses with what
 * it found, and leaves it as it was */

/* Open `spec` for writing, creating it if need be: expect `want` and an
 * error naming `has`. */
static void
open_refused(const char *spec, int want, const char *has)
{
	struct saker_store_opts o;
	saker_store *s = NULL;
	char err[1024];
	int rc;

	memset(&o, 0, sizeof(o));
	o.create = true;
	rc = saker_store_open(spec, &o, &s, err, sizeof(err));
	ck_assert_msg(rc == want && s == NULL, "%s: %d, not %d: %s", spec, rc,
	    want, err);
	ck_assert_msg(strstr(err, has) != NULL, "%s: \"%s\" does not say "
	    "\"%s\"", spec, err, has);
}

/* The size and modification time of path, to see it left alone. */
static void
file_id(const char *path, struct stat *sb)
{
	ck_assert_msg(stat(path, sb) == 0, "%s: %s", path, strerror(errno));
}

static void
same_file(const char *path, const struct stat *was)
{
	struct stat now;

	file_id(path, &now);
	ck_assert_msg(now.st_size == was->st_size &&
	    now.st_mtim.tv_sec == was->st_mtim.tv_sec &&
	    now.st_mtim.tv_nsec == was->st_mtim.tv_nsec, "%s was changed", path);
}

#ifdef HAVE_LMDB
#include <lmdb.h>

START_TEST(test_lmdb_foreign_dir)
{
	char dir[] = "/tmp/saker-fo-XXXXXX", path[512], spec[600];
	struct stat was;
	MDB_env *env;
	MDB_txn *t;
	MDB_dbi dbi;
	MDB_val k = { 1, "k" }, v = { 1, "v" };
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(spec, sizeof(spec), "lmdb:%s", dir);
	/* somebody's directory: no data.mdb made in it */
	snprintf(path, sizeof(path), "%s/notes.txt", dir);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs("mine\n", f);
	fclose(f);
	file_id(path, &was);
	open_refused(spec, SAKER_ECORRUPT, " is not a saker store: it holds "
	    "files (notes.txt, ...) but no data.mdb");
	same_file(path, &was);
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	ck_assert_int_ne(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/notes.txt", dir);
	ck_assert_int_eq(unlink(path), 0);

	/* another program's LMDB database */
	ck_assert_int_eq(mdb_env_create(&env), 0);
	ck_assert_int_eq(mdb_env_set_maxdbs(env, 2), 0);
	ck_assert_int_eq(mdb_env_open(env, dir, 0, 0600), 0);
	ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &t), 0);
	ck_assert_int_eq(mdb_dbi_open(t, "theirs", MDB_CREATE, &dbi), 0);
	ck_assert_int_eq(mdb_put(t, dbi, &k, &v, 0), 0);
	ck_assert_int_eq(mdb_txn_commit(t), 0);
	mdb_env_close(env);
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	file_id(path, &was);
	open_refused(spec, SAKER_ECORRUPT, "/data.mdb is an LMDB database but "
	    "not a saker store (no \"");
	same_file(path, &was);
	jn_rmstore(&jdrvs[0], dir);
}
END_TEST
#endif

#ifdef HAVE_SQLITE
#include <sqlite3.h>

static int64_t sq_user_version(const char *path);

START_TEST(test_sqlite_foreign_file)
{
	char dir[] = "/tmp/saker-fo-XXXXXX", path[512], spec[600];
	struct stat was;
	saker_store *s;
	sqlite3 *db;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/app.db", dir);
	snprintf(spec, sizeof(spec), "sqlite:%s", path);
	/* another program's database */
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "PRAGMA application_id=1234; "
	    "CREATE TABLE t(x); INSERT INTO t VALUES(1)", NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	file_id(path, &was);
	open_refused(spec, SAKER_ECORRUPT, "app.db: an SQLite database but not "
	    "a saker store (application_id 0x4d2)");
	same_file(path, &was);
	ck_assert_int_eq(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/app.db.lock", dir);
	(void)unlink(path);	/* the layer's lock, if it took one */
	ck_assert_int_eq(rmdir(dir), 0);

	/* a store a newer build wrote (its format version above ours) */
	ck_assert_ptr_nonnull(mkdtemp(strcpy(dir, "/tmp/saker-fo-XXXXXX")));
	snprintf(path, sizeof(path), "%s/store.db", dir);
	snprintf(spec, sizeof(spec), "sqlite:%s", path);
	s = jn_open_store(&jdrvs[NJDRVS - 1], dir, false);
	saker_store_close(s);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "PRAGMA user_version=99", NULL, NULL,
	    NULL), SQLITE_OK);
	sqlite3_close(db);
	open_refused(spec, SAKER_EVERSION, "store.db: format version 99 is "
	    "newer than this build (");
	ck_assert_int_eq(sq_user_version(path), 99);
	jn_rmstore(&jdrvs[NJDRVS - 1], dir);
}
END_TEST
#endif

/* One put of `data` to queue "q" and its commit, then a close (which
 * checkpoints: the data file holds the batch, the journal starts again). */
static void
jn_batch_closed(const struct jdrv *d, const char *dir, const char *data)
{
	saker_store *s = jn_open_store(d, dir, false);
	saker_queue *q;

	ck_assert_int_eq(saker_store_queue_open(s, "q", 1, true, NULL, &q),
	    SAKER_OK);
	lm_put_str(s, q, data);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
}

/* Copy d's data file (and SQLite's WAL, which belongs to it) from
 * directory `from` to `to`; a WAL `from` does not have goes from `to`. */
static void
jn_copy_data(const struct jdrv *d, const char *from, const char *to)
{
	char a[512], b[512];
	int i;

	for (i = 0; i < (d->own_dir ? 1 : 2); i++) {
		snprintf(a, sizeof(a), "%s/%s", from, d->files[i]);
		snprintf(b, sizeof(b), "%s/%s", to, d->files[i]);
		if (access(a, F_OK) == 0)
			copy_file(a, b);
		else
			unlink(b);
	}
	if (!d->own_dir) {	/* the WAL index is rebuilt from the WAL */
		snprintf(b, sizeof(b), "%s/%s", to, d->files[2]);
		unlink(b);
	}
}

/*
 * A data file restored from an older backup beside the journal of a later
 * run: the journal's first batch is not the next one the data file needs,
 * so the open refuses (SAKER_ECORRUPT) and says which batches each holds,
 * rather than replay batches onto a state they were not made on or throw
 * them away.  The journal is left as it was: with the data file it belongs
 * to back in place, the open replays every batch.
 */
START_TEST(test_journal_older_data)
{
	const struct jdrv *d = &jdrvs[_i];
	char dir[] = "/tmp/saker-jn-XXXXXX", old[] = "/tmp/saker-jo-XXXXXX";
	char cur[] = "/tmp/saker-jc-XXXXXX", spec[512], err[1024], path[512];
	char want[256];
	struct saker_store_opts o;
	saker_store *s = NULL;
	struct stat st0, st1;
	int rc, i;

	jn_mkdir(d, dir);
	ck_assert_ptr_nonnull(mkdtemp(old));
	ck_assert_ptr_nonnull(mkdtemp(cur));
	jn_batch_closed(d, dir, "zero");	/* batch 1 */
	jn_copy_data(d, dir, old);		/* the backup */
	jn_batch_closed(d, dir, "half");	/* batch 2 */
	jn_crash_after_batches(d, dir);	/* 3 and 4: the journal only */
	jn_copy_data(d, dir, cur);
	jn_copy_data(d, old, dir);		/* the restore */
	jn_path(d, dir, path, sizeof(path));
	ck_assert_int_eq(stat(path, &st0), 0);

	memset(&o, 0, sizeof(o));
	o.sync = SAKER_SYNC_ALWAYS;
	o.create = true;
	snprintf(spec, sizeof(spec), d->spec, dir);
	for (i = 0; i < 2; i++) {	/* the same again: nothing changed */
		rc = saker_store_open(spec, &o, &s, err, sizeof(err));
		ck_assert_msg(rc == SAKER_ECORRUPT && s == NULL, "%s: open: %d %s",
		    d->name, rc, err);
		ck_assert_msg(strstr(err, dir) != NULL, "%s: %s", d->name, err);
		snprintf(want, sizeof(want), "journal starts at batch 3 but the "
		    "data file holds only batches up to 1: they do not belong "
		    "together");
		ck_assert_msg(strstr(err, want) != NULL, "%s: %s", d->name, err);
	}
	ck_assert_int_eq(stat(path, &st1), 0);
	ck_assert_int_eq(st1.st_size, st0.st_size);
	ck_assert_int_gt(st1.st_size, 0);

	jn_copy_data(d, cur, dir);
	s = jn_open_store(d, dir, false);
	jn_take_all(s, (const char *const[]){ "zero", "half", "one", "two",
	    "three", NULL });
	saker_store_close(s);
	jn_rmstore(d, dir);
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", old, d->files[i]);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%s", cur, d->files[i]);
		unlink(path);
	}
	ck_assert_int_eq(rmdir(old), 0);
	ck_assert_int_eq(rmdir(cur), 0);
}
END_TEST

#ifdef HAVE_SQLITE
#include "../backends/sqlite_redo.h"

static int64_t
sr_count(sqlite3 *db)
{
	sqlite3_stmt *c;
	int64_t n = -1;

	ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1,
	    &c, NULL), SQLITE_OK);
	if (sqlite3_step(c) == SQLITE_ROW)
		n = sqlite3_column_int64(c, 0);
	sqlite3_finalize(c);
	return n;
}

static int64_t
sq_user_version(const char *path)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int64_t v = -1;

	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st,
	    NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static int
sq_count_id(void *arg, const void *key, size_t len, int64_t expires_ms)
{
	(void)key;
	(void)len;
	(void)expires_ms;
	(*(uint64_t *)arg)++;
	return 0;
}

/* Back to format 4's tables. */
static void
sq_to_format_4(const char *path)
{
	sqlite3 *db;

	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "DROP TABLE dedup;"
	    " ALTER TABLE items DROP COLUMN attrs;"
	    " ALTER TABLE delayed DROP COLUMN attrs; PRAGMA user_version=4",
	    NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

/* Format 5 (attributes, deduplication ids) over format 4: a writable open
 * of a format 4 file serves it and upgrades it; a read-only one reads it
 * as it is (attributes none, no ids) and leaves it. */
START_TEST(test_sqlite_format_4)
{
	const struct jdrv *d = &jdrvs[NJDRVS - 1];
	char dir[] = "/tmp/saker-jn-XXXXXX", path[512];
	saker_store *s;
	saker_queue *q;
	uint64_t n = 0;

	jn_mkdir(d, dir);
	s = jn_open_store(d, dir, false);
	ck_assert_int_eq(s->driver->queue_open(s, "q", 1, true, NULL, &q),
	    SAKER_OK);
	lm_put_str(s, q, "old");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
	snprintf(path, sizeof(path), "%s/store.db", dir);
	ck_assert_int_eq(sq_user_version(path), 5);
	sq_to_format_4(path);
	s = jn_open_store(d, dir, true);
	lm_expect(s, SAKER_TAKE_PEEK, "old");
	ck_assert_int_eq(s->driver->queue_open(s, "q", 1, false, NULL, &q),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_iterate(s, q, sq_count_id, &n),
	    SAKER_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(saker_store_dedup_sweep(s, q, BASE, 0, &n), SAKER_OK);
	saker_store_close(s);
	ck_assert_int_eq(sq_user_version(path), 4);
	s = jn_open_store(d, dir, false);
	lm_expect(s, SAKER_TAKE_REMOVE, "old");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
	ck_assert_int_eq(sq_user_version(path), 5);
	jn_rmstore(d, dir);
}
END_TEST

/* A format 4 store killed with batches only its journal holds: the
 * upgrade to format 5 comes first, then the replay of the records format
 * 4 wrote (statements by index, no attributes bound). */
START_TEST(test_sqlite_format_4_journal)
{
	const struct jdrv *d = &jdrvs[NJDRVS - 1];
	char dir[] = "/tmp/saker-jn-XXXXXX", path[512];
	saker_store *s;

	jn_mkdir(d, dir);
	jn_crash_after_batches(d, dir);
	snprintf(path, sizeof(path), "%s/store.db", dir);
	sq_to_format_4(path);
	s = jn_open_store(d, dir, false);
	jn_take_all(s, (const char *const[]){ "one", "two", "three", NULL });
	saker_store_close(s);
	ck_assert_int_eq(sq_user_version(path), 5);
	jn_rmstore(d, dir);
}
END_TEST

/* Attributes as a driver sees them: opaque bytes, a NUL among them. */
static const char sq_attrs[] = { 9, 0, 'x', 0, 7 };

struct sq_got {
	char data[64];
	unsigned char attrs[SAKER_ATTRS_MAX];
	size_t attrs_len;
};

static int
sq_got_cb(void *arg, const struct saker_item *item)
{
	struct sq_got *g = arg;

	snprintf(g->data, sizeof(g->data), "%.*s", (int)item->len,
	    (const char *)item->data);
	g->attrs_len = item->attrs_len;
	if (item->attrs_len > 0)
		memcpy(g->attrs, item->attrs, item->attrs_len);
	return 0;
}

/* Take the head of qname: `want` with attributes want_attrs. */
static void
sq_take_attrs(saker_store *s, const char *qname, const char *want,
    const void *want_attrs, size_t want_len)
{
	struct sq_got g;
	saker_queue *q;

	memset(&g, 0, sizeof(g));
	ck_assert_int_eq(s->driver->queue_open(s, qname, strlen(qname), false,
	    NULL, &q), SAKER_OK);
	ck_assert_int_eq(s->driver->take(s, q, SAKER_TAKE_REMOVE, BASE,
	    sq_got_cb, &g), SAKER_OK);
	ck_assert_str_eq(g.data, want);
	ck_assert_uint_eq(g.attrs_len, want_len);
	ck_assert(want_len == 0 || memcmp(g.attrs, want_attrs, want_len) == 0);
}

/* On qname: put "plain" with sq_attrs, then "once" with id `id` (kept
 * 60 s), and find the id kept. */
static void
sq_put_attrs_id(saker_store *s, const char *qname, const char *id)
{
	struct saker_item it;
	saker_queue *q;

	ck_assert_int_eq(s->driver->queue_open(s, qname, strlen(qname), true,
	    NULL, &q), SAKER_OK);
	memset(&it, 0, sizeof(it));
	it.data = "plain";
	it.len = 5;
	it.attrs = sq_attrs;
	it.attrs_len = sizeof(sq_attrs);
	ck_assert_int_eq(s->driver->put(s, q, &it, BASE), SAKER_OK);
	it.data = "once";
	it.len = 4;
	it.attrs = NULL;
	it.attrs_len = 0;
	ck_assert_int_eq(saker_store_put_once(s, q, &it, id, strlen(id),
	    60000, 0, BASE), SAKER_OK);
	ck_assert_int_eq(saker_store_put_once(s, q, &it, id, strlen(id),
	    60000, 0, BASE), SAKER_EEXIST);
}

/* After a reopen: qname holds "plain" and "once" with their attributes,
 * and id is still kept (a put with it is a duplicate) until it expires. */
static void
sq_check_attrs_id(saker_store *s, const char *qname, const char *id)
{
	unsigned char rec[64];
	struct saker_item it;
	saker_queue *q;
	uint64_t n = 0;
	bool replaced = false;
	size_t len;

	len = itemattr_set(rec, sizeof(rec), NULL, 0, ITEMATTR_ID, id,
	    strlen(id));
	ck_assert_uint_gt(len, 0);
	sq_take_attrs(s, qname, "plain", sq_attrs, sizeof(sq_attrs));
	sq_take_attrs(s, qname, "once", rec, len);
	ck_assert_int_eq(s->driver->queue_open(s, qname, strlen(qname), false,
	    NULL, &q), SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_iterate(s, q, sq_count_id, &n),
	    SAKER_OK);
	ck_assert_uint_eq(n, 1);
	memset(&it, 0, sizeof(it));
	it.data = "again";
	it.len = 5;
	ck_assert_int_eq(saker_store_put_once(s, q, &it, id, strlen(id),
	    60000, 0, BASE), SAKER_EEXIST);
	/* expired: renewed in place, then swept, then taken anew */
	ck_assert_int_eq(s->driver->dedup_put(s, q, id, strlen(id),
	    BASE + 120000, BASE + 60000, &replaced), SAKER_OK);
	ck_assert(replaced);
	ck_assert_int_eq(saker_store_dedup_sweep(s, q, BASE + 119999, 0, &n),
	    SAKER_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(saker_store_dedup_sweep(s, q, BASE + 120000, 0, &n),
	    SAKER_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(saker_store_put_once(s, q, &it, id, strlen(id),
	    60000, 0, BASE + 120000), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
}

/* Attributes and ids of batches only the redo journal holds (--sync
 * always, killed before a checkpoint) come back with their items. */
START_TEST(test_sqlite_journal_attrs)
{
	const struct jdrv *d = &jdrvs[NJDRVS - 1];
	char dir[] = "/tmp/saker-jn-XXXXXX";
	saker_store *s;
	pid_t pid;
	int st;

	jn_mkdir(d, dir);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		s = jn_open_store(d, dir, false);
		sq_put_attrs_id(s, "q", "job-1");
		if (saker_store_commit(s) != SAKER_OK)
			_exit(3);
		kill(getpid(), SIGKILL);	/* a crash */
		_exit(5);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
	    "child: %d", st);
	s = jn_open_store(d, dir, false);
	sq_check_attrs_id(s, "q", "job-1");
	saker_store_close(s);
	jn_rmstore(d, dir);
}
END_TEST

/* A store written by saker 1.0.0 (format 1): read-only it serves as it
 * is (no attributes, no ids); a writable open upgrades it in place, its
 * old items unchanged (compat_check()), and new items keep attributes
 * and ids across a reopen. */
START_TEST(test_sqlite_upgrade_1_0_0)
{
	char dir[] = "/tmp/saker-compat-XXXXXX", from[1024], to[1024],
	    spec[1100], err[512];
	struct saker_store_opts o;
	saker_store *s = NULL;
	saker_queue *q;
	uint64_t n = 0;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(from, sizeof(from), "%s/tests/data/store-1.0.0.sqlite",
	    data_dir());
	snprintf(to, sizeof(to), "%s/s.db", dir);
	copy_file(from, to);
	snprintf(spec, sizeof(spec), "sqlite:%s", to);
	memset(&o, 0, sizeof(o));
	o.read_only = true;
	ck_assert_msg(saker_store_open(spec, &o, &s, err, sizeof(err)) ==
	    SAKER_OK, "open %s: %s", spec, err);
	ck_assert_int_eq(s->driver->queue_open(s, "q1", 2, false, NULL, &q),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_iterate(s, q, sq_count_id, &n),
	    SAKER_OK);
	ck_assert_uint_eq(n, 0);
	compat_take_mode(s, "q1", SAKER_TAKE_PEEK, "first", 0);
	saker_store_close(s);
	ck_assert_int_eq(sq_user_version(to), 1);
	compat_check(spec);
	ck_assert_int_eq(sq_user_version(to), 5);
	o.read_only = false;
	ck_assert_int_eq(saker_store_open(spec, &o, &s, err, sizeof(err)),
	    SAKER_OK);
	sq_put_attrs_id(s, "q1", "job-1");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
	ck_assert_int_eq(saker_store_open(spec, &o, &s, err, sizeof(err)),
	    SAKER_OK);
	sq_check_attrs_id(s, "q1", "job-1");
	saker_store_close(s);
	snprintf(to, sizeof(to), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(to), 0);
}
END_TEST

/* In a child with a 3 MiB file size limit: a batch whose record does not
 * fit in the journal, and one whose pages do not fit in the WAL, fail,
 * and the acknowledged batches around them stay.  Exit codes say which
 * step went wrong. */
static void
sq_fsize_child(const struct jdrv *d, const char *dir)
{
	struct rlimit rl = { (rlim_t)3 << 20, (rlim_t)3 << 20 };
	struct saker_item it;
	saker_store *s = NULL;
	saker_queue *q;
	struct saker_store_opts o;
	char spec[512], err[1024];
	static char big[(size_t)5 << 19];	/* 2.5 MiB */
	int i, rc;

	signal(SIGXFSZ, SIG_IGN);
	if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
		_exit(10);
	memset(&o, 0, sizeof(o));
	o.sync = SAKER_SYNC_ALWAYS;
	o.create = true;
	snprintf(spec, sizeof(spec), d->spec, dir);
	if (saker_store_open(spec, &o, &s, err, sizeof(err)) != SAKER_OK ||
	    s->driver->queue_open(s, "q", 1, true, NULL, &q) != SAKER_OK)
		_exit(11);
	memset(&it, 0, sizeof(it));
	it.data = "one";
	it.len = 3;
	if (s->driver->put(s, q, &it, BASE) != SAKER_OK ||
	    saker_store_commit(s) != SAKER_OK)
		_exit(12);
	/* its record cannot grow the journal past the limit */
	memset(big, 'b', sizeof(big));
	it.data = big;
	it.len = sizeof(big);
	if (s->driver->put(s, q, &it, BASE) != SAKER_OK)
		_exit(13);
	if ((rc = saker_store_commit(s)) != SAKER_EFULL)
		_exit(rc == SAKER_OK ? 14 : 15);
	it.data = "two";
	it.len = 3;
	if (s->driver->put(s, q, &it, BASE) != SAKER_OK ||
	    saker_store_commit(s) != SAKER_OK)
		_exit(16);
	/* 10 MiB in one batch: more than SQLite's 8 MiB page cache, so it
	 * writes pages to the WAL, which cannot grow past the limit */
	it.data = big;
	it.len = sizeof(big);
	for (i = 0, rc = SAKER_OK; i < 4 && rc == SAKER_OK; i++)
		rc = s->driver->put(s, q, &it, BASE);
	if (rc == SAKER_OK && saker_store_commit(s) == SAKER_OK)
		_exit(17);
	saker_store_commit(s);	/* a lost batch reports once more, or not */
	it.data = "three";
	it.len = 5;
	if (s->driver->put(s, q, &it, BASE) != SAKER_OK ||
	    saker_store_commit(s) != SAKER_OK)
		_exit(18);
	saker_store_close(s);
	_exit(0);
}

START_TEST(test_sqlite_journal_full)
{
	const struct jdrv *d = &jdrvs[NJDRVS - 1];
	char dir[] = "/tmp/saker-jn-XXXXXX";
	saker_store *s;
	pid_t pid;
	int st;

	jn_mkdir(d, dir);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		sq_fsize_child(d, dir);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d", st);
	s = jn_open_store(d, dir, false);
	jn_take_all(s, (const char *const[]){ "one", "two", "three", NULL });
	saker_store_close(s);
	jn_rmstore(d, dir);
}
END_TEST

/* In a child with a 3 MiB file size limit, sync mode _i: a batch whose
 * commit fails loses its deduplication id with its item (a retry is no
 * duplicate), and the batches around it keep theirs.  Exit codes say
 * which step went wrong. */
static void
sq_lost_ids_child(const char *dir, saker_sync_mode sync)
{
	struct rlimit rl = { (rlim_t)3 << 20, (rlim_t)3 << 20 };
	struct saker_store_opts o;
	struct saker_item it;
	saker_store *s = NULL;
	saker_queue *q;
	char spec[512], err[1024];
	static char big[(size_t)4 << 20];

	signal(SIGXFSZ, SIG_IGN);
	if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
		_exit(10);
	memset(&o, 0, sizeof(o));
	o.sync = sync;
	o.create = true;
	snprintf(spec, sizeof(spec), "sqlite:%s/store.db", dir);
	if (saker_store_open(spec, &o, &s, err, sizeof(err)) != SAKER_OK ||
	    s->driver->queue_open(s, "q", 1, true, NULL, &q) != SAKER_OK)
		_exit(11);
	memset(&it, 0, sizeof(it));
	it.data = "one";
	it.len = 3;
	if (saker_store_put_once(s, q, &it, "k1", 2, 60000, 0, BASE) !=
	    SAKER_OK || saker_store_commit(s) != SAKER_OK)
		_exit(12);
	it.data = big;
	it.len = sizeof(big);
	if (saker_store_put_once(s, q, &it, "k2", 2, 60000, 0, BASE) !=
	    SAKER_OK)
		_exit(13);
	if (saker_store_commit(s) == SAKER_OK)
		_exit(14);
	it.data = "two";
	it.len = 3;
	if (saker_store_put_once(s, q, &it, "k2", 2, 60000, 0, BASE) !=
	    SAKER_OK)
		_exit(15);
	if (saker_store_put_once(s, q, &it, "k1", 2, 60000, 0, BASE) !=
	    SAKER_EEXIST || saker_store_commit(s) != SAKER_OK)
		_exit(16);
	saker_store_close(s);
	_exit(0);
}

START_TEST(test_sqlite_lost_batch_ids)
{
	const struct jdrv *d = &jdrvs[NJDRVS - 1];
	char dir[] = "/tmp/saker-jn-XXXXXX";
	saker_store *s;
	saker_queue *q;
	uint64_t n = 0;
	pid_t pid;
	int st;

	jn_mkdir(d, dir);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		sq_lost_ids_child(dir, _i == 0 ? SAKER_SYNC_ALWAYS :
		    SAKER_SYNC_PERIODIC);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d", st);
	s = jn_open_store(d, dir, false);
	ck_assert_int_eq(s->driver->queue_open(s, "q", 1, false, NULL, &q),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_iterate(s, q, sq_count_id, &n),
	    SAKER_OK);
	ck_assert_uint_eq(n, 2);
	jn_take_all(s, (const char *const[]){ "one", "two", NULL });
	saker_store_close(s);
	jn_rmstore(d, dir);
}
END_TEST

/* expire_to = t and 1,500 items expired together (issue 42): one get on q
 * (the expired items at its head) and one sweep (those behind a live
 * item) move every one to t, in order, through saker_store_expired(),
 * and t is woken at most once per call; kept across a reopen.  _i: the
 * two write paths (--sync always journals, periodic commits). */
#define SQX_N 1500

struct sqx {
	saker_queue *t;
	int t_notes, other_notes;
	char got[64];
	uint32_t flags;
	int64_t expires;
};

static void
sqx_notify(void *arg, saker_queue *q, void *ctx)
{
	struct sqx *x = arg;

	(void)ctx;
	if (q == x->t)
		x->t_notes++;
	else
		x->other_notes++;
}

static int
sqx_copy(void *arg, const struct saker_item *item)
{
	struct sqx *x = arg;

	snprintf(x->got, sizeof(x->got), "%.*s", (int)item->len,
	    (const char *)item->data);
	x->flags = item->flags;
	x->expires = item->expires_ms;
	return 0;
}

static void
sqx_put(saker_store *s, saker_queue *q, const char *str, uint32_t flags,
    int64_t expires)
{
	struct saker_item it;

	memset(&it, 0, sizeof(it));
	it.data = str;
	it.len = strlen(str);
	it.flags = flags;
	it.expires_ms = expires;
	ck_assert_msg(saker_store_put(s, q, &it, BASE) == SAKER_OK, "put %s: %s",
	    str, saker_store_errmsg(s));
}

static saker_store *
sqx_open(const char *dir, saker_sync_mode sync, struct sqx *x)
{
	struct saker_store_opts o;
	saker_store *s = NULL;
	char spec[512], err[1024];
	int rc;

	memset(&o, 0, sizeof(o));
	o.sync = sync;
	o.create = true;
	o.notify = sqx_notify;
	o.notify_arg = x;
	snprintf(spec, sizeof(spec), "sqlite:%s/store.db", dir);
	rc = saker_store_open(spec, &o, &s, err, sizeof(err));
	ck_assert_msg(rc == SAKER_OK, "open %s: %s", spec, err);
	return s;
}

START_TEST(test_sqlite_expire_to_many)
{
	const struct jdrv *d = &jdrvs[NJDRVS - 1];
	saker_sync_mode sync = _i == 0 ? SAKER_SYNC_ALWAYS : SAKER_SYNC_PERIODIC;
	char dir[] = "/tmp/saker-sx-XXXXXX", want[16];
	struct saker_queue_stats st;
	struct sqx x;
	saker_store *s;
	saker_queue *q;
	uint64_t removed = 0;
	int i;

	memset(&x, 0, sizeof(x));
	jn_mkdir(d, dir);
	s = sqx_open(dir, sync, &x);
	ck_assert_int_eq(saker_store_queue_open(s, "q", 1, true, NULL, &q),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_queue_open(s, "t", 1, true, NULL, &x.t),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_expire_to(s, q, "t", 1), SAKER_OK);
	for (i = 0; i < SQX_N; i++) {
		if (i == SQX_N / 2)
			sqx_put(s, q, "live", 0, 0);
		snprintf(want, sizeof(want), "x%04d", i);
		sqx_put(s, q, want, (uint32_t)i, BASE + 10);
	}
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	x.t_notes = x.other_notes = 0;
	/* the get: the first half goes at the head, "live" is served */
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_REMOVE, BASE + 1000,
	    sqx_copy, &x), SAKER_OK);
	ck_assert_str_eq(x.got, "live");
	ck_assert_int_eq(x.t_notes, 1);
	ck_assert_int_eq(x.other_notes, 0);
	/* the sweep: the rest */
	ck_assert_int_eq(saker_store_flush_expired(s, q, BASE + 1000, 0,
	    &removed), SAKER_OK);
	ck_assert_uint_eq(removed, SQX_N - SQX_N / 2);
	ck_assert_int_eq(x.t_notes, 2);
	ck_assert_int_eq(x.other_notes, 0);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	ck_assert_int_eq(saker_store_queue_stats(s, q, &st), SAKER_OK);
	ck_assert_uint_eq(st.items, 0);
	ck_assert_uint_eq(st.expired_to, SQX_N);
	ck_assert_uint_eq(st.expired_items, 0);
	saker_store_close(s);

	s = sqx_open(dir, sync, &x);
	ck_assert_int_eq(saker_store_queue_open(s, "t", 1, false, NULL, &x.t),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_queue_stats(s, x.t, &st), SAKER_OK);
	ck_assert_uint_eq(st.items, SQX_N);
	for (i = 0; i < SQX_N; i++) {
		snprintf(want, sizeof(want), "x%04d", i);
		ck_assert_int_eq(saker_store_take(s, x.t, SAKER_TAKE_REMOVE,
		    BASE + 1000, sqx_copy, &x), SAKER_OK);
		ck_assert_str_eq(x.got, want);
		ck_assert_uint_eq(x.flags, (uint32_t)i);
		ck_assert_int_eq(x.expires, 0);	/* cleared: not expired again */
	}
	ck_assert_int_eq(saker_store_take(s, x.t, SAKER_TAKE_REMOVE,
	    BASE + 1000, sqx_copy, &x), SAKER_EEMPTY);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
	jn_rmstore(d, dir);
}
END_TEST

/* A store file this process may not write is refused at open with a
 * one-line reason, not opened read-only to fail every batch later (a
 * root-owned file under a service user).  As root the opener becomes
 * nobody; otherwise the file is made read-only. */
static void
sq_unwritable_child(const char *path)
{
	struct saker_store_opts o;
	saker_store *s = NULL;
	char err[512];
	int e;

	if (geteuid() == 0 && setuid(65534) != 0)
		_exit(10);
	memset(&o, 0, sizeof(o));
	o.sync = SAKER_SYNC_ALWAYS;
	o.create = true;
	e = saker_store_open(path, &o, &s, err, sizeof(err));
	if (e != SAKER_EREADONLY) {
		fprintf(stderr, "open as uid %u: %d %s\n", (unsigned)geteuid(), e, err);
		_exit(11);
	}
	if (strstr(err, "not writable") == NULL)
		_exit(12);
	_exit(0);
}

START_TEST(test_sqlite_unwritable)
{
	char dir[] = "/tmp/saker-ro-XXXXXX", path[64], spec[256];
	struct saker_store_opts o;
	saker_store *s;
	char err[512];
	pid_t pid;
	int st;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 0777), 0);
	snprintf(path, sizeof(path), "%s/q.db", dir);
	snprintf(spec, sizeof(spec), "sqlite:%s", path);
	memset(&o, 0, sizeof(o));
	o.sync = SAKER_SYNC_ALWAYS;
	o.create = true;
	ck_assert_int_eq(saker_store_open(spec, &o, &s, err, sizeof(err)),
	    SAKER_OK);
	saker_store_close(s);
	ck_assert_int_eq(chmod(path, 0444), 0);
	/* only the database is someone else's (made by root with `saker
	 * load`, say): the files beside it are made anew by the opener */
	snprintf(spec, sizeof(spec), "rm -f %s.lock %s.saker-journal", path,
	    path);
	ck_assert_int_eq(system(spec), 0);
	snprintf(spec, sizeof(spec), "sqlite:%s", path);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		sq_unwritable_child(spec);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d", st);
	snprintf(spec, sizeof(spec), "rm -rf %s", dir);
	ck_assert_int_eq(system(spec), 0);
}
END_TEST

/* The sqlite driver's journal records: replayed as they were written,
 * and a malformed one refused with one message, never run wrongly. */
START_TEST(test_sqlite_redo_records)
{
	static const char *const sql[] = { "INSERT INTO t VALUES (?1, ?2, ?3)",
	    "SELECT count(*) FROM t WHERE a = ?1", "DELETE FROM t WHERE a = ?1",
	    "SAVEPOINT x" };
	sqlite3 *db;
	sqlite3_stmt *st[4], *q;
	struct lj j;
	char err[256];
	unsigned char rec[256];
	size_t n;
	int i;

	memset(&j, 0, sizeof(j));
	j.fd = -1;
	ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "CREATE TABLE t(a INTEGER, b BLOB NOT"
	    " NULL, c TEXT)", NULL, NULL, NULL), SQLITE_OK);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(sqlite3_prepare_v2(db, sql[i], -1, &st[i],
		    NULL), SQLITE_OK);

	/* two inserts (one with an empty blob) and a delete */
	ck_assert_int_eq(sr_int(&j, 1, 7), 0);
	ck_assert_int_eq(sr_bytes(&j, 'b', 2, "xy", 2), 0);
	ck_assert_int_eq(sr_bytes(&j, 't', 3, "k", 1), 0);
	ck_assert_int_eq(sr_exec(&j, 0), 0);
	ck_assert_int_eq(sr_int(&j, 1, -8), 0);
	ck_assert_int_eq(sr_bytes(&j, 'b', 2, "", 0), 0);
	ck_assert_int_eq(sr_exec(&j, 0), 0);
	ck_assert_int_eq(sr_int(&j, 1, 7), 0);
	ck_assert_int_eq(sr_exec(&j, 2), 0);
	ck_assert_int_eq(j.buf[LJ_HDR], SR_FORMAT);
	n = j.len;
	ck_assert_uint_le(n, sizeof(rec));
	memcpy(rec, j.buf + LJ_HDR, n);
	ck_assert_int_eq(sr_apply(st, 4, rec, n, err, sizeof(err)), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT a, length(b), typeof(b),"
	    " typeof(c) FROM t", -1, &q, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
	ck_assert_int_eq(sqlite3_column_int64(q, 0), -8);
	ck_assert_int_eq(sqlite3_column_int(q, 1), 0);
	ck_assert_str_eq((const char *)sqlite3_column_text(q, 2), "blob");
	ck_assert_str_eq((const char *)sqlite3_column_text(q, 3), "null");
	ck_assert_int_eq(sqlite3_step(q), SQLITE_DONE);
	sqlite3_finalize(q);

	/* malformed records, each with one insert that must not run */
	for (i = 0; i < 8; i++) {
		j.len = 0;
		ck_assert_int_eq(sr_int(&j, 1, 100 + i), 0);
		ck_assert_int_eq(sr_bytes(&j, 'b', 2, "zz", 2), 0);
		switch (i) {
		case 0:	/* another format */
			j.buf[LJ_HDR] = SR_FORMAT + 1;
			sr_exec(&j, 0);
			break;
		case 1:	/* a statement that reads */
			sr_exec(&j, 1);
			break;
		case 2:	/* a transaction statement */
			sr_exec(&j, 3);
			break;
		case 3:	/* no such statement */
			sr_exec(&j, 9);
			break;
		case 4:	/* no such parameter */
			sr_int(&j, 4, 1);
			sr_exec(&j, 0);
			break;
		case 5:	/* values bound to no statement */
			break;
		case 6:	/* cut short */
			sr_exec(&j, 0);
			j.len -= 3;
			break;
		case 7:	/* an unknown entry */
			sr_exec(&j, 0);
			j.buf[LJ_HDR + 1] = 'z';
			break;
		}
		err[0] = '\0';
		ck_assert_int_eq(sr_apply(st, 4, j.buf + LJ_HDR, j.len, err,
		    sizeof(err)), SQLITE_CORRUPT);
		ck_assert_msg(err[0] != '\0' && strchr(err, '\n') == NULL,
		    "case %d: \"%s\"", i, err);
		ck_assert_int_eq(sr_count(db), 1);
	}
	ck_assert_int_eq(sr_apply(st, 4, j.buf + LJ_HDR, 0, err, sizeof(err)),
	    SQLITE_CORRUPT);
	for (i = 0; i < 4; i++)
		sqlite3_finalize(st[i]);
	sqlite3_close(db);
	free(j.buf);
}
END_TEST
#endif

#ifdef HAVE_LMDB
/* Damage data.mdb of a store with a few queues: `zero` zeroes its last
 * page (a page in use: the newest root), else 64 bytes of 0xff at its
 * start.  Both made liblmdb abort or crash; now open() refuses the store
 * with one line and SAKER_ECORRUPT. */
static void
lm_damage(bool zero)
{
	char dir[] = "/tmp/saker-lmd-XXXXXX", path[512], spec[600], err[1024];
	unsigned char page[4096];
	struct saker_store_opts o;
	saker_store *s;
	saker_queue *q;
	struct stat sb;
	int fd, i, rc;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	s = jn_open_store(&jdrvs[0], dir, false);
	for (i = 0; i < 20; i++) {
		char name[8];

		snprintf(name, sizeof(name), "q%d", i);
		ck_assert_int_eq(s->driver->queue_open(s, name, strlen(name),
		    true, NULL, &q), SAKER_OK);
		lm_put_str(s, q, "some item data, long enough to fill pages");
	}
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_ge(sb.st_size, 3 * 4096);
	memset(page, zero ? 0 : 0xff, sizeof(page));
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, page, zero ? 4096 : 64,
	    (off_t)(sb.st_size - 4096)), zero ? 4096 : 64);
	close(fd);

	memset(&o, 0, sizeof(o));
	o.create = true;
	snprintf(spec, sizeof(spec), "lmdb:%s", dir);
	err[0] = '\0';
	s = NULL;
	rc = saker_store_open(spec, &o, &s, err, sizeof(err));
	ck_assert_int_eq(rc, SAKER_ECORRUPT);
	ck_assert_ptr_null(s);
	ck_assert_msg(strstr(err, "damaged") != NULL && strchr(err, '\n') ==
	    NULL, "err: %s", err);
	/* a read-only opener (saker dump) is refused the same way */
	o.create = false;
	o.read_only = true;
	ck_assert_int_eq(saker_store_open(spec, &o, &s, err, sizeof(err)),
	    SAKER_ECORRUPT);
	jn_rmstore(&jdrvs[0], dir);
}

START_TEST(test_lmdb_damaged_zero_page)
{
	lm_damage(true);
}
END_TEST

START_TEST(test_lmdb_damaged_ff_bytes)
{
	lm_damage(false);
}
END_TEST
#endif
#endif

/* ------------------------------------------------------------------ */

/* The journal's fdatasync, failing on demand: the disk error a failing
 * asynchronous commit is tested with (store_conformance.h). */
static int
fdatasync_eio(int fd)
{
	(void)fd;
	errno = EIO;
	return -1;
}

static void
journal_fail_sync(bool on)
{
	static int (*real)(int);

	if (real == NULL)
		real = lj_fdatasync;
	lj_fdatasync = on ? fdatasync_eio : real;
}

#ifdef HAVE_LMDB
/*
 * --sync periodic on LMDB: a commit writes the journal record, the timer's
 * sync() fdatasyncs it.  When that fdatasync fails the kernel may have
 * dropped the pages, so what was acknowledged since the last sync is in
 * doubt and nothing more may be (store.h, REFUSALS): sync() fails with
 * "fsync failed, store now read-only", every later write gets the layer's
 * "store is read-only after a failed write", reads still work, and a
 * reopen takes writes again.
 */
START_TEST(test_lmdb_periodic_sync_fails)
{
	char dir[] = "/tmp/saker-jn-XXXXXX", spec[512], err[1024], want[600];
	struct saker_store_opts o;
	saker_store *s = NULL;
	saker_queue *q;
	int rc;

	jn_mkdir(&jdrvs[0], dir);
	memset(&o, 0, sizeof(o));
	o.sync = SAKER_SYNC_PERIODIC;
	o.create = true;
	snprintf(spec, sizeof(spec), "lmdb:%s", dir);
	ck_assert_msg(saker_store_open(spec, &o, &s, err, sizeof(err)) ==
	    SAKER_OK, "open: %s", err);
	ck_assert_int_eq(saker_store_queue_open(s, "q", 1, true, NULL, &q),
	    SAKER_OK);
	lm_put_str(s, q, "one");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	ck_assert(!saker_store_refuses_writes(s));

	journal_fail_sync(true);
	rc = saker_store_sync(s);
	journal_fail_sync(false);
	ck_assert_int_eq(rc, SAKER_EIO);
	snprintf(want, sizeof(want), "lmdb %s: fsync failed, store now "
	    "read-only: ", dir);
	ck_assert_msg(strncmp(saker_store_errmsg(s), want, strlen(want)) == 0 &&
	    strstr(saker_store_errmsg(s), "fdatasync") != NULL, "sync: %s",
	    saker_store_errmsg(s));
	ck_assert(saker_store_refuses_writes(s));

	rc = saker_store_put(s, q, &(struct saker_item){ .len = 3,
	    .data = "two" }, BASE);
	ck_assert_int_eq(rc, SAKER_EREADONLY);
	snprintf(want, sizeof(want), "lmdb %s: store is read-only after a "
	    "failed write: ", dir);
	ck_assert_msg(strncmp(saker_store_errmsg(s), want, strlen(want)) == 0,
	    "put: %s", saker_store_errmsg(s));
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_REMOVE, BASE,
	    copy_cb, err), SAKER_EREADONLY);
	lm_expect(s, SAKER_TAKE_PEEK, "one");	/* reads still work */
	(void)saker_store_commit(s);
	saker_store_close(s);

	/* the fdatasync works again: a reopen takes writes */
	s = jn_open_store(&jdrvs[0], dir, false);
	ck_assert(!saker_store_refuses_writes(s));
	ck_assert_int_eq(saker_store_queue_open(s, "q", 1, false, NULL, &q),
	    SAKER_OK);
	lm_put_str(s, q, "two");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	jn_take_all(s, (const char *const[]){ "one", "two", NULL });
	saker_store_close(s);
	jn_rmstore(&jdrvs[0], dir);
}
END_TEST
#endif

static void
add_driver(Suite *su, const struct saker_store_driver *drv)
{
	struct store_conformance_opts o;
	TCase *tc;

	if (drv->open == NULL) {
		printf("check_store: skipping driver '%s' (not implemented yet)\n",
		    drv->name);
		return;
	}
	memset(&o, 0, sizeof(o));
	/* the drivers whose commit goes through the journal */
	if (strcmp(drv->name, "lmdb") == 0 || strcmp(drv->name, "sqlite") == 0)
		o.fail_sync = journal_fail_sync;
	tc = store_conformance_tcase_opts(drv, &o);
	if (tc == NULL) {
		printf("check_store: too many drivers, skipping '%s'\n", drv->name);
		return;
	}
	suite_add_tcase(su, tc);
}

#ifdef HAVE_POSTGRES
/* ------------------------------------------------------------------ */
/* postgres-driver specifics: item checksums, the format 3 upgrade */

struct px_got {
	char data[64];
	char id[64];	/* the deduplication id ("" for none) */
	size_t attrs_len;
	uint32_t flags;
	uint32_t deliveries;
	int calls;
	int refuse;	/* answer this from the callback */
};

static int
px_cb(void *arg, const struct saker_item *it)
{
	struct px_got *g = arg;
	const void *v;
	size_t vlen;

	snprintf(g->data, sizeof(g->data), "%.*s", (int)it->len,
	    (const char *)it->data);
	g->attrs_len = it->attrs_len;
	g->id[0] = '\0';
	if (itemattr_get(it->attrs, it->attrs_len, ITEMATTR_ID, &v, &vlen))
		snprintf(g->id, sizeof(g->id), "%.*s", (int)vlen,
		    (const char *)v);
	g->flags = it->flags;
	g->deliveries = it->deliveries;
	g->calls++;
	return g->refuse;
}

static saker_store *
px_open(const char *schema, bool read_only, int want)
{
	struct saker_store_opts o;
	saker_store *s = NULL;
	char spec[512], err[512] = "";
	int rc;

	memset(&o, 0, sizeof(o));
	o.create = !read_only;
	o.read_only = read_only;
	o.sync = SAKER_SYNC_NEVER;
	snprintf(spec, sizeof(spec), "postgres:%s schema=%s", pgc.conninfo,
	    schema);
	rc = saker_store_open(spec, &o, &s, err, sizeof(err));
	ck_assert_msg(rc == want, "open %s: %d (%s)", spec, rc, err);
	return s;
}

/* A store on the schema PREFIX_pid reached through a tcpproxy (started
 * here, *pxp) with timeout=0.5, so that a test can freeze or cut the
 * link under a batch. */
static saker_store *
px_open_proxied(const char *prefix, char *schema, size_t len,
    struct tcpproxy **pxp)
{
	char sock[256], spec[512], err[512] = "";
	struct saker_store_opts o;
	saker_store *s = NULL;

	snprintf(schema, len, "%s_%d", prefix, (int)getpid());
	snprintf(sock, sizeof(sock), "%s/.s.PGSQL.5432", pgc.dir);
	ck_assert_ptr_nonnull(*pxp = tp_start(sock));
	memset(&o, 0, sizeof(o));
	o.create = true;
	o.sync = SAKER_SYNC_NEVER;
	snprintf(spec, sizeof(spec), "postgres,timeout=0.5:host=127.0.0.1"
	    " port=%d dbname=postgres user=saker schema=%s", tp_port(*pxp),
	    schema);
	ck_assert_msg(saker_store_open(spec, &o, &s, err, sizeof(err)) ==
	    SAKER_OK, "open: %s", err);
	return s;
}

static saker_queue *
px_q(saker_store *s, const char *name)
{
	saker_queue *q = NULL;

	ck_assert_int_eq(s->driver->queue_open(s, name, strlen(name), true,
	    NULL, &q), SAKER_OK);
	return q;
}

static void
px_put(saker_store *s, const char *qname, const char *data, int64_t expires)
{
	struct saker_item it;

	memset(&it, 0, sizeof(it));
	it.data = data;
	it.len = strlen(data);
	it.flags = 5;
	it.expires_ms = expires;
	ck_assert_int_eq(s->driver->put(s, px_q(s, qname), &it, BASE),
	    SAKER_OK);
}

/* counts deduplication records */
static int
px_id_cb(void *arg, const void *key, size_t len, int64_t expires_ms)
{
	(void)key;
	(void)len;
	(void)expires_ms;
	(*(int *)arg)++;
	return 0;
}

/* saker_store_put_once() of data with id `key` (window 60 s) */
static void
px_put_once(saker_store *s, const char *qname, const char *data,
    const char *key, int want)
{
	struct saker_item it;
	int rc;

	memset(&it, 0, sizeof(it));
	it.data = data;
	it.len = strlen(data);
	rc = saker_store_put_once(s, px_q(s, qname), &it, key, strlen(key),
	    60000, 0, BASE);
	ck_assert_msg(rc == want, "put_once %s: %d (%s)", key, rc,
	    s->driver->errmsg(s));
}

/* take and expect `want` (NULL: SAKER_EEMPTY) */
static void
px_take_at(int line, saker_store *s, const char *qname, int mode,
    const char *want)
{
	struct px_got g = { .calls = 0 };
	int rc = s->driver->take(s, px_q(s, qname), mode, BASE + 100, px_cb, &g);

	if (want == NULL) {
		ck_assert_msg(rc == SAKER_EEMPTY, "line %d: %s: %d %s", line,
		    qname, rc, s->driver->errmsg(s));
		return;
	}
	ck_assert_msg(rc == SAKER_OK, "line %d: %s: %d %s", line, qname, rc,
	    s->driver->errmsg(s));
	ck_assert_str_eq(g.data, want);
}
#define px_take(s, q, m, w) px_take_at(__LINE__, (s), (q), (m), (w))

/* a take meets the damaged item: SAKER_ECORRUPT naming both queues, and
 * nothing handed out */
static void
px_corrupt_at(int line, saker_store *s, const char *qname, int mode,
    const char *moved_to)
{
	struct px_got g = { .calls = 0 };
	char want[128];
	const char *msg;
	int rc = s->driver->take(s, px_q(s, qname), mode, BASE + 100, px_cb, &g);

	msg = s->driver->errmsg(s);
	ck_assert_msg(rc == SAKER_ECORRUPT, "line %d: %s: %d %s", line, qname,
	    rc, msg);
	ck_assert_int_eq(g.calls, 0);
	snprintf(want, sizeof(want), "queue '%s'", qname);
	ck_assert_msg(strstr(msg, want) != NULL, "line %d: %s", line, msg);
	ck_assert_msg(strstr(msg, moved_to) != NULL, "line %d: %s", line, msg);
}
#define px_corrupt(s, q, m, t) px_corrupt_at(__LINE__, (s), (q), (m), (t))

static const char px_marker[] = "damage-me";

/* the damaged bytes, kept: the marker with bit 5 of byte 3 flipped */
static void
px_check_moved(saker_store *s, const char *dq)
{
	char want[sizeof(px_marker)];

	memcpy(want, px_marker, sizeof(want));
	want[3] ^= 0x20;
	px_take(s, dq, SAKER_TAKE_REMOVE, want);
	px_take(s, dq, SAKER_TAKE_REMOVE, NULL);
}

static int
px_count_cb(void *arg, const struct saker_item *it)
{
	(void)it;
	(*(int *)arg)++;
	return 0;
}

/* Every way an item is handed out checks it: a take of one item (open,
 * peek), items claimed ahead (take, peek past an expired one), iterate;
 * a read-only store leaves it in place. */
START_TEST(test_pg_damaged_paths)
{
	char schema[32];
	saker_store *s, *ro;
	PGconn *c;
	int n = 0;

	snprintf(schema, sizeof(schema), "dmg_%d", (int)getpid());
	s = px_open(schema, false, SAKER_OK);
	px_put(s, "one", px_marker, 0);
	px_put(s, "one", "one-ok", 0);
	px_put(s, "pk", px_marker, 0);
	px_put(s, "pk", "pk-ok", 0);
	px_put(s, "held", "held-1", 0);
	px_put(s, "held", px_marker, 0);
	px_put(s, "held", "held-2", 0);
	px_put(s, "hp", "hp-1", 0);
	px_put(s, "hp", "hp-2", 0);
	px_put(s, "hp", "hp-3", 0);
	px_put(s, "hp", "hp-expiring", BASE + 50);
	px_put(s, "hp", px_marker, 0);
	px_put(s, "hp", "hp-4", 0);
	px_put(s, "it", "it-1", 0);
	px_put(s, "it", px_marker, 0);
	px_put(s, "it", "it-2", 0);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	c = px_conn(schema);
	ck_assert_int_eq(px_damage_items(c, px_marker, strlen(px_marker)), 5);

	/* read-only: reported, left where it is */
	ro = px_open(schema, true, SAKER_OK);
	px_corrupt(ro, "pk", SAKER_TAKE_PEEK, "left in place");
	px_corrupt(ro, "pk", SAKER_TAKE_PEEK, "left in place");
	saker_store_close(ro);

	/* one item by one statement: open, peek */
	px_corrupt(s, "one", SAKER_TAKE_OPEN, "moved to queue 'one_damaged'");
	px_corrupt(s, "pk", SAKER_TAKE_PEEK, "moved to queue 'pk_damaged'");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	px_take(s, "one", SAKER_TAKE_OPEN, "one-ok");
	px_take(s, "pk", SAKER_TAKE_PEEK, "pk-ok");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);

	/* claimed ahead: the 2nd take of a batch claims 2 items */
	px_take(s, "held", SAKER_TAKE_REMOVE, "held-1");
	px_corrupt(s, "held", SAKER_TAKE_REMOVE, "'held_damaged'");
	px_take(s, "held", SAKER_TAKE_REMOVE, "held-2");
	px_take(s, "held", SAKER_TAKE_REMOVE, NULL);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);

	/* the 4th take claims 4: hp-3, expiring, damaged, hp-4; a peek
	 * steps over the expired one to the damaged one */
	px_take(s, "hp", SAKER_TAKE_REMOVE, "hp-1");
	px_take(s, "hp", SAKER_TAKE_REMOVE, "hp-2");
	px_take(s, "hp", SAKER_TAKE_REMOVE, "hp-3");
	px_corrupt(s, "hp", SAKER_TAKE_PEEK, "'hp_damaged'");
	px_take(s, "hp", SAKER_TAKE_PEEK, "hp-4");
	px_take(s, "hp", SAKER_TAKE_REMOVE, "hp-4");
	px_take(s, "hp", SAKER_TAKE_REMOVE, NULL);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);

	/* iterate (saker check) names it and hands out only what is sound */
	ck_assert_int_eq(s->driver->iterate(s, px_q(s, "it"), px_count_cb, &n),
	    SAKER_ECORRUPT);
	ck_assert_int_eq(n, 1);
	ck_assert_msg(strstr(s->driver->errmsg(s), "queue 'it'") != NULL, "%s",
	    s->driver->errmsg(s));
	saker_store_close(s);

	/* the moves were committed: kept, with the damaged bytes, and each
	 * queue went on; the one still open from "one" came back */
	s = px_open(schema, false, SAKER_OK);
	px_check_moved(s, "one_damaged");
	px_check_moved(s, "pk_damaged");
	px_check_moved(s, "held_damaged");
	px_check_moved(s, "hp_damaged");
	px_take(s, "one", SAKER_TAKE_REMOVE, "one-ok");
	px_take(s, "one", SAKER_TAKE_REMOVE, NULL);
	px_take(s, "pk", SAKER_TAKE_REMOVE, "pk-ok");
	px_take(s, "pk", SAKER_TAKE_REMOVE, NULL);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
	PQfinish(c);
}
END_TEST

/* A take the caller refuses puts the item back with its checksum. */
START_TEST(test_pg_refused_keeps_crc)
{
	struct px_got g = { .refuse = 1 };
	char schema[32], v[64];
	saker_store *s;
	PGconn *c;

	snprintf(schema, sizeof(schema), "ref_%d", (int)getpid());
	s = px_open(schema, false, SAKER_OK);
	px_put(s, "r", "kept", 0);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	ck_assert_int_eq(s->driver->take(s, px_q(s, "r"), SAKER_TAKE_REMOVE,
	    BASE + 100, px_cb, &g), 1);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	c = px_conn(schema);
	px_val(c, "SELECT count(*) FROM saker_items WHERE crc IS NOT NULL",
	    v, sizeof(v));
	ck_assert_str_eq(v, "1");
	/* and it is checked: damaged now, it is not served */
	ck_assert_int_eq(px_damage_items(c, "kept", 4), 1);
	px_corrupt(s, "r", SAKER_TAKE_REMOVE, "'r_damaged'");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	PQfinish(c);
	saker_store_close(s);
}
END_TEST

/* The format 2 schema (saker 1.1): as that release created it. */
static const char px_format2_sql[] =
    "CREATE TABLE saker_meta (key text PRIMARY KEY, value bigint NOT NULL);"
    "CREATE TABLE saker_queues (id bigserial PRIMARY KEY,"
    " name bytea NOT NULL UNIQUE);"
    "CREATE SEQUENCE saker_item_id;"
    "CREATE TABLE saker_items (qid bigint NOT NULL, id bigint NOT NULL,"
    " vis bigint NOT NULL, due bigint NOT NULL, state smallint NOT NULL,"
    " owner text, lease_until bigint NOT NULL DEFAULT 0,"
    " flags bigint NOT NULL, expires bigint NOT NULL,"
    " created bigint NOT NULL, len bigint NOT NULL, data bytea NOT NULL,"
    " PRIMARY KEY (qid, id));"
    "CREATE INDEX saker_items_head ON saker_items (qid, vis, id)"
    " WHERE state = 0;"
    "CREATE INDEX saker_items_due ON saker_items (due)"
    " WHERE state = 0 AND due > 0;"
    "CREATE INDEX saker_items_lease ON saker_items (lease_until)"
    " WHERE state > 0;"
    "CREATE TABLE saker_counts (qid bigint NOT NULL, owner text NOT NULL,"
    " total bigint NOT NULL, expired bigint NOT NULL,"
    " PRIMARY KEY (qid, owner));"
    "INSERT INTO saker_meta VALUES ('format', 2);"
    "INSERT INTO saker_queues(name) VALUES ('q1'::bytea), ('q2'::bytea);"
    /* q1: first (flags 7), second; q2: other, open by a broker gone */
    "INSERT INTO saker_items(qid, id, vis, due, state, flags, expires,"
    " created, len, data) SELECT q.id, nextval('saker_item_id'), v.vis, 0,"
    " 0, v.flags, 0, 1700000000000, length(v.data), v.data FROM"
    " (VALUES ('q1'::bytea, 1700000000001, 7, 'first'::bytea),"
    " ('q1', 1700000000002, 0, 'second'), ('q2', 1700000000003, 0, 'other'))"
    " AS v(name, vis, flags, data) JOIN saker_queues q ON q.name = v.name"
    " ORDER BY v.vis;"
    "UPDATE saker_items SET state = 1, owner = 'gone/1/0', lease_until = 0"
    " WHERE data = 'other'::bytea;";

START_TEST(test_pg_upgrade_format2)
{
	char schema[32], sql[128], v[64];
	struct px_got g = { .calls = 0 };
	saker_store *s;
	PGconn *c;
	int n = 0;

	snprintf(schema, sizeof(schema), "up_%d", (int)getpid());
	c = PQconnectdb(pgc.conninfo);
	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	snprintf(sql, sizeof(sql), "CREATE SCHEMA \"%s\"", schema);
	px_exec(c, sql);
	PQfinish(c);
	c = px_conn(schema);
	px_exec(c, px_format2_sql);

	/* read-only (dump, migrate, check): read as it is, not upgraded */
	s = px_open(schema, true, SAKER_OK);
	ck_assert_int_eq(s->driver->iterate(s, px_q(s, "q1"), px_count_cb, &n),
	    SAKER_OK);
	ck_assert_int_eq(n, 2);
	px_take(s, "q1", SAKER_TAKE_PEEK, "first");
	n = 0;	/* no ids before format 6 (dump, migrate) */
	ck_assert_int_eq(saker_store_dedup_iterate(s, px_q(s, "q1"), px_id_cb,
	    &n), SAKER_OK);
	ck_assert_int_eq(n, 0);
	saker_store_close(s);
	px_val(c, "SELECT value FROM saker_meta WHERE key = 'format'", v,
	    sizeof(v));
	ck_assert_str_eq(v, "2");

	/* a writable open upgrades it (to format 7: checksums, delivery
	 * counts, low-water marks, attributes and ids, segments); the old
	 * items come out intact, counting 0 deliveries, with no attributes */
	s = px_open(schema, false, SAKER_OK);
	px_val(c, "SELECT value FROM saker_meta WHERE key = 'format'", v,
	    sizeof(v));
	ck_assert_str_eq(v, "7");
	px_val(c, "SELECT count(*) FROM saker_items WHERE deliveries <> 0", v,
	    sizeof(v));
	ck_assert_str_eq(v, "0");
	ck_assert_int_eq(s->driver->take(s, px_q(s, "q1"), SAKER_TAKE_REMOVE,
	    BASE + 100, px_cb, &g), SAKER_OK);
	ck_assert_str_eq(g.data, "first");
	ck_assert_uint_eq(g.flags, 7);
	ck_assert_uint_eq(g.attrs_len, 0);
	px_put(s, "q3", "new", 0);
	px_put_once(s, "q3", "with-id", "k1", SAKER_OK);
	px_put_once(s, "q3", "again", "k1", SAKER_EEXIST);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	px_val(c, "SELECT count(*) FROM saker_dedup", v, sizeof(v));
	ck_assert_str_eq(v, "1");
	/* the new items have a checksum, the old ones none */
	px_val(c, "SELECT count(*) FROM saker_items WHERE crc IS NOT NULL", v,
	    sizeof(v));
	ck_assert_str_eq(v, "2");
	px_val(c, "SELECT count(*) FROM saker_items WHERE crc IS NULL", v,
	    sizeof(v));
	ck_assert_str_eq(v, "2");
	saker_store_close(s);

	/* a second broker finds format 7 and upgrades nothing; it knows
	 * the id */
	s = px_open(schema, false, SAKER_OK);
	px_take(s, "q1", SAKER_TAKE_REMOVE, "second");
	px_take(s, "q3", SAKER_TAKE_REMOVE, "new");
	px_put_once(s, "q3", "again", "k1", SAKER_EEXIST);
	g.calls = 0;
	ck_assert_int_eq(s->driver->take(s, px_q(s, "q3"), SAKER_TAKE_REMOVE,
	    BASE + 100, px_cb, &g), SAKER_OK);
	ck_assert_str_eq(g.data, "with-id");
	ck_assert_str_eq(g.id, "k1");
	/* the open item of the broker that is gone: its lease ran out */
	ck_assert_int_eq(s->driver->tick(s, BASE), SAKER_OK);
	px_take(s, "q2", SAKER_TAKE_REMOVE, "other");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);

	/* a newer format is refused */
	px_exec(c, "UPDATE saker_meta SET value = 8 WHERE key = 'format'");
	s = px_open(schema, false, SAKER_EVERSION);
	ck_assert_ptr_null(s);
	PQfinish(c);
}
END_TEST

/* The format 6 schema (before segments): as that release created it. */
static const char px_format6_sql[] =
    "CREATE TABLE saker_meta (key text PRIMARY KEY, value bigint NOT NULL);"
    "CREATE TABLE saker_queues (id bigserial PRIMARY KEY,"
    " name bytea NOT NULL UNIQUE,"
    " lo_vis bigint NOT NULL DEFAULT (-9223372036854775807 - 1),"
    " lo_id bigint NOT NULL DEFAULT 0);"
    "CREATE SEQUENCE saker_item_id;"
    "CREATE TABLE saker_items (qid bigint NOT NULL, id bigint NOT NULL,"
    " vis bigint NOT NULL, due bigint NOT NULL, state smallint NOT NULL,"
    " owner text, lease_until bigint NOT NULL DEFAULT 0,"
    " flags bigint NOT NULL, expires bigint NOT NULL,"
    " created bigint NOT NULL, len bigint NOT NULL, data bytea NOT NULL,"
    " crc bigint, deliveries bigint NOT NULL DEFAULT 0, attrs bytea,"
    " PRIMARY KEY (qid, id));"
    "CREATE INDEX saker_items_head ON saker_items (qid, vis, id)"
    " WHERE state = 0;"
    "CREATE INDEX saker_items_due ON saker_items (due)"
    " WHERE state = 0 AND due > 0;"
    "CREATE INDEX saker_items_lease ON saker_items (lease_until)"
    " WHERE state > 0;"
    "CREATE INDEX saker_items_held ON saker_items (qid, vis, id)"
    " WHERE state > 0;"
    "CREATE TABLE saker_counts (qid bigint NOT NULL, owner text NOT NULL,"
    " total bigint NOT NULL, expired bigint NOT NULL,"
    " PRIMARY KEY (qid, owner));"
    "CREATE TABLE saker_dedup (queue bytea NOT NULL, key bytea NOT NULL,"
    " expires bigint NOT NULL, PRIMARY KEY (queue, key));"
    "CREATE INDEX saker_dedup_expires ON saker_dedup (queue, expires);"
    "INSERT INTO saker_meta VALUES ('format', 6);"
    "INSERT INTO saker_queues(name) VALUES ('q1'::bytea), ('q2'::bytea);"
    /* q1: first (flags 7, 2 deliveries), second, and one delayed far
     * ahead; q2: other, open by a broker gone */
    "INSERT INTO saker_items(qid, id, vis, due, state, flags, expires,"
    " created, len, data, deliveries) SELECT q.id, nextval('saker_item_id'),"
    " v.vis, v.due, 0, v.flags, 0, 1700000000000, length(v.data), v.data,"
    " v.dlv FROM (VALUES ('q1'::bytea, 1700000000001, 0, 7, 'first'::bytea,"
    " 2), ('q1', 1700000000002, 0, 0, 'second', 0),"
    " ('q1', 9000000000000, 9000000000000, 0, 'later', 0),"
    " ('q2', 1700000000003, 0, 0, 'other', 0))"
    " AS v(name, vis, due, flags, data, dlv) JOIN saker_queues q"
    " ON q.name = v.name ORDER BY v.vis;"
    "UPDATE saker_items SET state = 1, owner = 'gone/1/0', lease_until = 0"
    " WHERE data = 'other'::bytea;"
    "INSERT INTO saker_dedup VALUES ('q1'::bytea, 'k1'::bytea,"
    " 9000000000000);";

/* Format 6 to 7: read as it is by a read-only open; a writable open
 * moves every item into segment 0 of the partitioned table, keys,
 * states and ids intact, and the store then rotates (saker_rotate). */
START_TEST(test_pg_upgrade_format6)
{
	char schema[32], sql[128], v[64];
	struct px_got g = { .calls = 0 };
	saker_store *s;
	PGconn *c;
	int n = 0;

	snprintf(schema, sizeof(schema), "up6_%d", (int)getpid());
	c = PQconnectdb(pgc.conninfo);
	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	snprintf(sql, sizeof(sql), "CREATE SCHEMA \"%s\"", schema);
	px_exec(c, sql);
	PQfinish(c);
	c = px_conn(schema);
	px_exec(c, px_format6_sql);

	s = px_open(schema, true, SAKER_OK);
	ck_assert_int_eq(s->driver->iterate(s, px_q(s, "q1"), px_count_cb, &n),
	    SAKER_OK);
	ck_assert_int_eq(n, 3);
	px_take(s, "q1", SAKER_TAKE_PEEK, "first");
	saker_store_close(s);
	px_val(c, "SELECT value FROM saker_meta WHERE key = 'format'", v,
	    sizeof(v));
	ck_assert_str_eq(v, "6");

	s = px_open(schema, false, SAKER_OK);
	px_val(c, "SELECT value FROM saker_meta WHERE key = 'format'", v,
	    sizeof(v));
	ck_assert_str_eq(v, "7");
	px_val(c, "SELECT count(*) FROM saker_items_s0", v, sizeof(v));
	ck_assert_str_eq(v, "4");
	px_val(c, "SELECT relkind::text FROM pg_class WHERE relname ="
	    " 'saker_items' AND relnamespace = current_schema()::regnamespace",
	    v, sizeof(v));
	ck_assert_str_eq(v, "p");
	px_val(c, "SELECT count(*) FROM pg_class WHERE relname ="
	    " 'saker_items_f6'", v, sizeof(v));
	ck_assert_str_eq(v, "0");
	ck_assert_int_eq(s->driver->take(s, px_q(s, "q1"), SAKER_TAKE_REMOVE,
	    BASE + 100, px_cb, &g), SAKER_OK);
	ck_assert_str_eq(g.data, "first");
	ck_assert_uint_eq(g.flags, 7);
	px_take(s, "q1", SAKER_TAKE_REMOVE, "second");
	g.calls = 0;
	ck_assert_int_eq(s->driver->take(s, px_q(s, "q1"), SAKER_TAKE_REMOVE,
	    BASE + 100, px_cb, &g), SAKER_EEMPTY);	/* later: delayed */
	px_put_once(s, "q1", "again", "k1", SAKER_EEXIST);
	px_put(s, "q3", "new", 0);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	/* new items go to the current segment */
	px_val(c, "SELECT seg::text FROM saker_items WHERE data = 'new'", v,
	    sizeof(v));
	ck_assert_str_eq(v, "0");
	/* the open item of the broker that is gone: its lease ran out */
	ck_assert_int_eq(s->driver->tick(s, BASE), SAKER_OK);
	px_take(s, "q2", SAKER_TAKE_REMOVE, "other");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
	/* a rotation moves the delayed item forward and empties segment 1
	 * (nothing due: a rotation is forced by 0 rows, 0 ms) */
	px_val(c, "SELECT r::text || ',' || cur::text FROM saker_rotate(0, 0,"
	    " 100)", v, sizeof(v));
	ck_assert_str_eq(v, "1,1");
	px_val(c, "SELECT r::text || ',' || moved::text || ',' || cur::text"
	    " FROM saker_rotate(0, 0, 100)", v, sizeof(v));
	ck_assert_str_eq(v, "1,0,2");
	px_val(c, "SELECT r::text || ',' || moved::text || ',' || cur::text"
	    " FROM saker_rotate(0, 0, 100)", v, sizeof(v));
	ck_assert_str_eq(v, "1,0,3");
	/* segment 0 holds 'later' and 'new': moved into 3, then emptied */
	px_val(c, "SELECT r::text || ',' || moved::text || ',' || cur::text"
	    " FROM saker_rotate(0, 0, 100)", v, sizeof(v));
	ck_assert_str_eq(v, "1,2,0");
	px_val(c, "SELECT string_agg(seg::text || ':' || convert_from(data,"
	    " 'UTF8'), ' ' ORDER BY id) FROM saker_items", v, sizeof(v));
	ck_assert_str_eq(v, "3:later 3:new");
	s = px_open(schema, false, SAKER_OK);
	px_take(s, "q3", SAKER_TAKE_REMOVE, "new");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
	PQfinish(c);
}
END_TEST

/* Take from qname and expect data with deduplication id `id`. */
static void
px_take_id(saker_store *s, const char *qname, const char *data,
    const char *id)
{
	struct px_got g = { .calls = 0 };

	ck_assert_int_eq(s->driver->take(s, px_q(s, qname), SAKER_TAKE_REMOVE,
	    BASE + 100, px_cb, &g), SAKER_OK);
	ck_assert_str_eq(g.data, data);
	ck_assert_str_eq(g.id, id);
}

/* Attributes through the driver's own paths: a refused take put back,
 * items claimed ahead, and the checksum, which covers them. */
START_TEST(test_pg_attrs_paths)
{
	struct px_got g = { .refuse = 1 };
	char schema[32];
	saker_store *s;
	PGconn *c;
	PGresult *r;

	snprintf(schema, sizeof(schema), "atr_%d", (int)getpid());
	s = px_open(schema, false, SAKER_OK);
	px_put_once(s, "a", "a1", "k1", SAKER_OK);
	px_put_once(s, "a", "a2", "k2", SAKER_OK);
	px_put_once(s, "a", "a3", "k3", SAKER_OK);
	px_put_once(s, "a", "a4", "k4", SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	/* refused: P_REINSERT puts it back, attrs and all */
	ck_assert_int_eq(s->driver->take(s, px_q(s, "a"), SAKER_TAKE_REMOVE,
	    BASE + 100, px_cb, &g), 1);
	ck_assert_str_eq(g.id, "k1");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	/* one batch: one take alone, then from the items claimed ahead */
	px_take_id(s, "a", "a1", "k1");
	px_take_id(s, "a", "a2", "k2");
	px_take_id(s, "a", "a3", "k3");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);	/* nothing claimed ahead from here */
	/* a changed attribute byte fails the checksum: moved aside */
	c = px_conn(schema);
	r = PQexec(c, "UPDATE saker_items SET attrs = set_byte(attrs, 4,"
	    " get_byte(attrs, 4) # 32) WHERE attrs IS NOT NULL");
	ck_assert_str_eq(PQcmdTuples(r), "1");
	PQclear(r);
	s = px_open(schema, false, SAKER_OK);
	px_corrupt(s, "a", SAKER_TAKE_REMOVE, "'a_damaged'");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	px_take_id(s, "a_damaged", "a4", "K4");
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	PQfinish(c);
	saker_store_close(s);
}
END_TEST

/* px_once_child()'s `want` for a put_once that fails after a bounded
 * wait (lock_timeout) and loses its batch, the connection kept */
#define PX_REFUSED 1

/* A second broker recording key: 0 when put_once answers `want` (and
 * its batch commits), else 1; 2 when it cannot start. */
static pid_t
px_once_child(const char *schema, const char *key, int want)
{
	struct saker_store_opts o = { .create = true,
	    .sync = SAKER_SYNC_NEVER };
	struct saker_item it = { .data = "b", .len = 1 };
	saker_store *b = NULL;
	saker_queue *q = NULL;
	char sp[512], err[256];
	pid_t pid = fork();
	int rc;

	ck_assert_int_ge(pid, 0);
	if (pid > 0)
		return pid;
	snprintf(sp, sizeof(sp), "postgres:%s schema=%s", pgc.conninfo, schema);
	if (saker_store_open(sp, &o, &b, err, sizeof(err)) != SAKER_OK ||
	    b->driver->queue_open(b, "d", 1, true, NULL, &q) != SAKER_OK)
		_exit(2);
	rc = saker_store_put_once(b, q, &it, key, strlen(key), 60000, 0,
	    BASE);
	if (want == PX_REFUSED) {
		struct saker_store_stats st;

		if (rc == SAKER_OK || rc == SAKER_EEXIST ||
		    saker_store_commit(b) == SAKER_OK)
			_exit(1);
		b->driver->store_stats(b, &st);
		_exit(st.connected && st.reconnects == 0 &&
		    saker_store_put(b, q, &it, BASE) == SAKER_OK &&
		    saker_store_commit(b) == SAKER_OK ? 0 : 3);
	}
	if (saker_store_commit(b) != SAKER_OK)
		_exit(2);
	_exit(rc == want ? 0 : 1);
}

static void
px_child_done(pid_t pid)
{
	int st = 0;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d", st);
}

/* Two brokers record one id at once: the second waits for the first's
 * batch, then is refused the id if it committed, or records it if it
 * rolled back (here: its session is ended); when the first's batch
 * stays open, past 3/4 of timeout= (2 s), the second's fails and its
 * connection stays. */
START_TEST(test_pg_dedup_race)
{
	char schema[32], v[64];
	saker_store *a;
	PGconn *c;
	pid_t pid;
	int st;

	snprintf(schema, sizeof(schema), "race_%d", (int)getpid());
	a = px_open(schema, false, SAKER_OK);
	px_put_once(a, "d", "a", "k", SAKER_OK);
	pid = px_once_child(schema, "k", SAKER_EEXIST);
	usleep(500000);
	ck_assert_int_eq(waitpid(pid, &st, WNOHANG), 0);	/* it waits */
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);
	px_child_done(pid);

	px_put_once(a, "d", "a1", "k1", SAKER_OK);
	pid = px_once_child(schema, "k1", PX_REFUSED);
	px_child_done(pid);
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);

	px_put_once(a, "d", "a2", "k2", SAKER_OK);
	pid = px_once_child(schema, "k2", SAKER_OK);
	usleep(500000);
	ck_assert_int_eq(waitpid(pid, &st, WNOHANG), 0);
	c = px_conn(schema);
	px_val(c, "SELECT count(pg_terminate_backend(pid)) FROM"
	    " pg_stat_activity WHERE datname = current_database() AND"
	    " state = 'idle in transaction' AND query LIKE '%saker_dedup%'",
	    v, sizeof(v));
	ck_assert_str_eq(v, "1");
	px_child_done(pid);
	ck_assert_int_ne(saker_store_commit(a), SAKER_OK);
	saker_store_close(a);
	px_val(c, "SELECT string_agg(convert_from(data, 'UTF8'), ','"
	    " ORDER BY data) FROM saker_items", v, sizeof(v));
	ck_assert_str_eq(v, "a,a1,b,b");
	px_val(c, "SELECT string_agg(convert_from(key, 'UTF8'), ','"
	    " ORDER BY key) FROM saker_dedup", v, sizeof(v));
	ck_assert_str_eq(v, "k,k1,k2");
	PQfinish(c);
}
END_TEST

/* Connected again within 10 s (the driver reconnects from tick() and
 * fd_ready(), as the loop calls them). */
static void
px_reconnect(saker_store *s)
{
	struct saker_store_stats st;
	int i;

	for (i = 0; i < 500; i++) {
		(void)saker_store_tick(s, BASE + 1000 + i);
		(void)saker_store_fd_ready(s, BASE + 1000 + i);
		saker_store_get_stats(s, &st);
		if (st.connected)
			return;
		usleep(20000);
	}
	ck_abort_msg("not connected again within 10 s");
}

/*
 * A batch puts an item with an id and a take of the same batch hands it
 * out (a consumer waiting on the queue); the COMMIT gets no answer and
 * never happened (its session was ended first).  Connected again, the
 * broker records the id anyway and deletes what the batch's takes handed
 * out: the producer's retry of the set (told "outcome unknown") is the
 * duplicate it is, and the item taken before the batch is not served
 * again.  Without this the retry made a second item that was handed out
 * a second time (contrib/failover --ids, kill cycles).
 */
START_TEST(test_pg_doubt_handed_out)
{
	char schema[32], v[64];
	struct tcpproxy *px;
	saker_store *a = NULL;
	PGconn *c;
	int i;

	a = px_open_proxied("doubt", schema, sizeof(schema), &px);
	c = px_conn(schema);
	px_put(a, "d", "old", 0);
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);
	px_put_once(a, "d", "new", "k", SAKER_OK);
	px_take(a, "d", SAKER_TAKE_REMOVE, "old");
	px_take(a, "d", SAKER_TAKE_REMOVE, "new");
	/* the COMMIT goes into a frozen proxy, then the connection is cut:
	 * the server never sees it and rolls the transaction back */
	tp_set_mode(px, TP_FREEZE);
	ck_assert_int_eq(saker_store_commit(a), SAKER_EINDOUBT);
	tp_set_mode(px, TP_REFUSE);
	for (i = 0; i < 250; i++) {
		px_val(c, "SELECT count(*) FROM pg_stat_activity WHERE"
		    " datname = current_database() AND state LIKE 'idle in"
		    " transaction%'", v, sizeof(v));
		if (strcmp(v, "0") == 0)
			break;
		usleep(20000);
	}
	px_val(c, "SELECT count(*) FROM saker_items", v, sizeof(v));
	ck_assert_str_eq(v, "1");	/* "old": the batch did not happen */
	px_val(c, "SELECT count(*) FROM saker_dedup", v, sizeof(v));
	ck_assert_str_eq(v, "0");
	tp_set_mode(px, TP_RELAY);
	px_reconnect(a);
	px_val(c, "SELECT count(*) FROM saker_items", v, sizeof(v));
	ck_assert_str_eq(v, "0");
	px_val(c, "SELECT string_agg(convert_from(key, 'UTF8'), ',')"
	    " FROM saker_dedup", v, sizeof(v));
	ck_assert_str_eq(v, "k");
	px_put_once(a, "d", "new", "k", SAKER_EEXIST);
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);
	px_take(a, "d", SAKER_TAKE_REMOVE, NULL);
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);
	saker_store_close(a);
	PQfinish(c);
	tp_stop(px);
}
END_TEST

/*
 * Issue 42: a batch PostgreSQL loses under the caller (its session ended
 * between two statements) is the layer's state, worded as for every
 * driver (store.h, REFUSALS): the call that met the loss says why; every
 * later write of the batch is refused before the driver with "postgres:
 * this batch was rolled back (WHY); it ends at the next commit"; the
 * commit fails with "postgres: batch rolled back: WHY" and ends it; once
 * reconnected the next batch is taken, and the lost put never happened.
 */
START_TEST(test_pg_lost_batch)
{
	struct px_got g = { .calls = 0 };
	struct saker_item it;
	char schema[32], v[64];
	const char *m;
	saker_queue *q;
	saker_store *a;
	PGconn *c;

	snprintf(schema, sizeof(schema), "lost_%d", (int)getpid());
	a = px_open(schema, false, SAKER_OK);
	c = px_conn(schema);
	q = px_q(a, "d");
	px_put(a, "d", "old", 0);
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);
	memset(&it, 0, sizeof(it));
	it.data = "new";
	it.len = 3;
	ck_assert_int_eq(saker_store_put(a, q, &it, BASE), SAKER_OK);
	/* the broker's sessions end; its put is buffered, its BEGIN not
	 * sent yet: the take's round trip meets the loss */
	px_val(c, "SELECT count(pg_terminate_backend(pid)) FROM"
	    " pg_stat_activity WHERE datname = current_database() AND"
	    " pid <> pg_backend_pid() AND backend_type = 'client backend'",
	    v, sizeof(v));
	ck_assert_str_ne(v, "0");
	usleep(200000);
	ck_assert_int_eq(saker_store_take(a, q, SAKER_TAKE_REMOVE, BASE + 100,
	    px_cb, &g), SAKER_EIO);
	ck_assert_int_eq(g.calls, 0);
	m = saker_store_errmsg(a);
	ck_assert_msg(strstr(m, "connection lost") != NULL, "take: %s", m);
	/* later writes of the batch: the layer's refusal, the reason kept */
	it.data = "more";
	it.len = 4;
	ck_assert_int_eq(saker_store_put(a, q, &it, BASE), SAKER_EIO);
	m = saker_store_errmsg(a);
	ck_assert_msg(strncmp(m, "postgres: this batch was rolled back (", 38)
	    == 0 && strstr(m, "connection lost") != NULL &&
	    strstr(m, "); it ends at the next commit") != NULL, "put: %s", m);
	ck_assert_int_eq(saker_store_take(a, q, SAKER_TAKE_OPEN, BASE + 100,
	    px_cb, &g), SAKER_EIO);
	ck_assert_str_eq(saker_store_errmsg(a), m);
	ck_assert_int_eq(saker_store_commit(a), SAKER_EIO);
	m = saker_store_errmsg(a);
	ck_assert_msg(strncmp(m, "postgres: batch rolled back: ", 29) == 0 &&
	    strstr(m, "connection lost") != NULL, "commit: %s", m);
	/* the batch ended with its commit: the next one is the driver's
	 * (down until reconnected), then taken */
	px_reconnect(a);
	it.data = "after";
	it.len = 5;
	ck_assert_int_eq(saker_store_put(a, q, &it, BASE), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);
	px_take(a, "d", SAKER_TAKE_REMOVE, "old");
	px_take(a, "d", SAKER_TAKE_REMOVE, "after");
	px_take(a, "d", SAKER_TAKE_REMOVE, NULL);
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);
	saker_store_close(a);
	PQfinish(c);
}
END_TEST

/*
 * The same with the batch in flight (commit_start()): its COMMIT goes into
 * a frozen proxy, the next batch gathers on top (a put, then a take that
 * needs the connection and so waits for the flight), the flight ends in
 * doubt, and the batch gathered fails with it: its take is refused, its
 * put is never stored.  Connected again the reconcile is the synchronous
 * one's: the id recorded, the items handed out deleted, nothing twice.
 * Then a flight that succeeds: its result arrives through commit_fd().
 */
START_TEST(test_pg_async_doubt)
{
	char schema[32], v[64];
	struct tcpproxy *px;
	struct px_got g = { .calls = 0 };
	struct pollfd pfd;
	saker_store *a = NULL;
	bool started = false;
	PGconn *c;
	int i, rc;

	a = px_open_proxied("adoubt", schema, sizeof(schema), &px);
	c = px_conn(schema);
	px_put(a, "d", "old", 0);
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);
	px_put_once(a, "d", "new", "k", SAKER_OK);
	px_take(a, "d", SAKER_TAKE_REMOVE, "old");
	px_take(a, "d", SAKER_TAKE_REMOVE, "new");
	tp_set_mode(px, TP_FREEZE);
	ck_assert_int_eq(saker_store_commit_start(a, &started), SAKER_OK);
	ck_assert_msg(started, "postgres committed synchronously");
	ck_assert(saker_store_commit_inflight(a));
	ck_assert_int_ge(saker_store_commit_fd(a), 0);
	/* gathered on top: buffered, then a take that needs the database */
	px_put(a, "d", "late", 0);
	rc = a->driver->take(a, px_q(a, "d"), SAKER_TAKE_REMOVE, BASE + 100,
	    px_cb, &g);
	ck_assert_msg(rc != SAKER_OK && rc != SAKER_EEMPTY, "take on a failed"
	    " flight: %d", rc);
	ck_assert_int_eq(g.calls, 0);
	/* its result was read by the take: the descriptor says so */
	pfd.fd = saker_store_commit_fd(a);
	pfd.events = POLLIN;
	pfd.revents = 0;
	ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
	ck_assert_int_eq(saker_store_commit_finish(a), SAKER_EINDOUBT);
	ck_assert_msg(strstr(a->driver->errmsg(a), "outcome unknown") != NULL,
	    "not told: %s", a->driver->errmsg(a));
	ck_assert(!saker_store_commit_inflight(a));
	tp_set_mode(px, TP_REFUSE);
	for (i = 0; i < 250; i++) {
		px_val(c, "SELECT count(*) FROM pg_stat_activity WHERE"
		    " datname = current_database() AND state LIKE 'idle in"
		    " transaction%'", v, sizeof(v));
		if (strcmp(v, "0") == 0)
			break;
		usleep(20000);
	}
	px_val(c, "SELECT count(*) FROM saker_items", v, sizeof(v));
	ck_assert_str_eq(v, "1");	/* "old": the flight did not happen */
	tp_set_mode(px, TP_RELAY);
	px_reconnect(a);
	/* "old" and "new" handed out in doubt: deleted; "late" never */
	px_val(c, "SELECT count(*) FROM saker_items", v, sizeof(v));
	ck_assert_str_eq(v, "0");
	px_val(c, "SELECT string_agg(convert_from(key, 'UTF8'), ',')"
	    " FROM saker_dedup", v, sizeof(v));
	ck_assert_str_eq(v, "k");
	px_put_once(a, "d", "new", "k", SAKER_EEXIST);
	px_take(a, "d", SAKER_TAKE_REMOVE, NULL);
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);
	/* a flight that succeeds: the socket's answer wakes the loop */
	px_put(a, "d", "x", 0);
	ck_assert_int_eq(saker_store_commit_start(a, &started), SAKER_OK);
	ck_assert(started);
	px_put(a, "d", "y", 0);
	pfd.fd = saker_store_commit_fd(a);
	pfd.revents = 0;
	ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
	ck_assert_int_eq(saker_store_commit_finish(a), SAKER_OK);
	px_val(c, "SELECT count(*) FROM saker_items", v, sizeof(v));
	ck_assert_str_eq(v, "1");	/* "x"; "y" still gathering */
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);
	px_take(a, "d", SAKER_TAKE_REMOVE, "x");
	px_take(a, "d", SAKER_TAKE_REMOVE, "y");
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);
	saker_store_close(a);
	PQfinish(c);
	tp_stop(px);
}
END_TEST

/*
 * Promotion while a batch is in flight: sakerd's tick calls it after
 * tick() skipped its own statements for an overdue flight, the promote
 * timer at any time.  Its statements must not go out behind the flight's
 * unread answer: they did, each read the other's results, and a flight
 * that had committed (here: its take deleted "a") came back as failed,
 * not even in doubt -- the core answers that batch's gets with
 * SERVER_ERROR, and the item, gone from the database, is delivered to
 * nobody (contrib/failover --commit async lost acknowledged items so in
 * restart and partition cycles).  The flight's answer is its own; a
 * flight that already waited PG_PROBE_AFTER_MS is not waited for (the
 * next tick promotes).
 */
START_TEST(test_pg_async_promote)
{
	char schema[32], v[64], why[512];
	saker_store *a;
	bool started = false;
	int64_t next = -1;
	PGconn *c;
	int rp, rf;

	snprintf(schema, sizeof(schema), "aprom_%d", (int)getpid());
	a = px_open(schema, false, SAKER_OK);
	c = px_conn(schema);
	px_put(a, "p", "a", 0);
	px_put(a, "p", "b", 0);
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);
	px_take(a, "p", SAKER_TAKE_REMOVE, "a");
	ck_assert_int_eq(saker_store_commit_start(a, &started), SAKER_OK);
	ck_assert_msg(started, "postgres committed synchronously");
	/* gathered on top: a put, then promotion */
	px_put(a, "p", "c", 0);
	rp = saker_store_promote(a, BASE + 200, &next);
	snprintf(why, sizeof(why), "%s", a->driver->errmsg(a));
	rf = saker_store_commit_finish(a);
	px_val(c, "SELECT string_agg(convert_from(data, 'UTF8'), ','"
	    " ORDER BY id) FROM saker_items", v, sizeof(v));
	ck_assert_msg(rf == SAKER_OK, "the flight's take of \"a\" is"
	    " committed (left: %s), yet its commit: %d %s", v, rf,
	    a->driver->errmsg(a));
	ck_assert_msg(rp == SAKER_OK, "promote: %d %s", rp, why);
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);
	px_val(c, "SELECT string_agg(convert_from(data, 'UTF8'), ','"
	    " ORDER BY id) FROM saker_items", v, sizeof(v));
	ck_assert_str_eq(v, "b,c");
	/* the same with the flight overdue: promotion waits for nothing */
	px_take(a, "p", SAKER_TAKE_REMOVE, "b");
	ck_assert_int_eq(saker_store_commit_start(a, &started), SAKER_OK);
	ck_assert(started);
	usleep(80000);
	ck_assert_int_eq(saker_store_promote(a, BASE + 300, &next), SAKER_OK);
	ck_assert(saker_store_commit_inflight(a));
	ck_assert_int_eq(saker_store_commit_finish(a), SAKER_OK);
	px_take(a, "p", SAKER_TAKE_REMOVE, "c");
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);
	px_val(c, "SELECT count(*) FROM saker_items", v, sizeof(v));
	ck_assert_str_eq(v, "0");
	saker_store_close(a);
	PQfinish(c);
}
END_TEST

/*
 * The same into a partition, as contrib/failover met it: the flight's
 * COMMIT goes into a frozen proxy, promotion comes while it is overdue.
 * It sent its statements behind the flight and lost the connection on
 * them, leaving the flight unread: its clients waited out the whole
 * partition, and once connected again it was judged by the new
 * connection, "rolled back", not in doubt -- while the COMMIT, held in
 * the network, landed when the partition healed (TCP sends it again):
 * its take's item deleted, its get answered SERVER_ERROR, delivered to
 * nobody; the producer's retry found its id and got STORED.  Now the
 * tick gives the flight up in time, in doubt.
 */
START_TEST(test_pg_async_promote_frozen)
{
	char schema[32], v[64];
	struct tcpproxy *px;
	struct pollfd pfd;
	saker_store *a = NULL;
	bool started = false, given_up = false;
	int64_t next = -1;
	PGconn *c;
	int i, rp, rf;

	a = px_open_proxied("apfrz", schema, sizeof(schema), &px);
	c = px_conn(schema);
	px_put(a, "d", "old", 0);
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);
	px_put_once(a, "d", "new", "k", SAKER_OK);
	px_take(a, "d", SAKER_TAKE_REMOVE, "old");
	px_take(a, "d", SAKER_TAKE_REMOVE, "new");
	tp_set_mode(px, TP_FREEZE);
	ck_assert_int_eq(saker_store_commit_start(a, &started), SAKER_OK);
	ck_assert(started);
	px_put(a, "d", "late", 0);
	usleep(80000);	/* overdue: tick() skipped its statements */
	rp = saker_store_promote(a, BASE + 200, &next);
	/* the loop's tick, as in sakerd, until the flight's result is there */
	pfd.fd = saker_store_commit_fd(a);
	pfd.events = POLLIN;
	for (i = 0; i < 150 && !given_up; i++) {
		(void)saker_store_tick(a, BASE + 300 + i);
		(void)saker_store_fd_ready(a, BASE + 300 + i);
		pfd.revents = 0;
		given_up = pfd.fd >= 0 && poll(&pfd, 1, 20) == 1;
	}
	/* the partition heals: what the proxy held goes on, the COMMIT too */
	tp_set_mode(px, TP_RELAY);
	for (i = 0; i < 250; i++) {
		px_val(c, "SELECT count(*) FROM saker_items", v, sizeof(v));
		if (strcmp(v, "0") == 0)
			break;
		usleep(20000);
	}
	ck_assert_msg(strcmp(v, "0") == 0, "the held COMMIT did not land:"
	    " %s items", v);
	px_reconnect(a);
	rf = saker_store_commit_finish(a);
	ck_assert_msg(rf == SAKER_EINDOUBT, "a COMMIT that got no answer"
	    " reported %d (%s): its get's item, deleted when it landed, went"
	    " to nobody", rf, a->driver->errmsg(a));
	ck_assert_msg(given_up, "the flight was not given up within 3 s");
	ck_assert_msg(rp == SAKER_OK, "promote: %d", rp);
	/* the producer's retry is the duplicate it is; nothing is served
	 * again, "late" was never stored */
	px_put_once(a, "d", "new", "k", SAKER_EEXIST);
	px_take(a, "d", SAKER_TAKE_REMOVE, NULL);
	ck_assert_int_eq(saker_store_commit(a), SAKER_OK);
	saker_store_close(a);
	PQfinish(c);
	tp_stop(px);
}
END_TEST

/* Issue 42: expire_to = t, 1,500 items expired together (1,000, a live
 * one, 500): one get on q moves the 1,000 ahead of the live item, the
 * sweep the 500 behind it, and t holds all 1,500 in order, none dropped
 * (docs/protocol.md: every expired item moves). */
START_TEST(test_pg_expire_to_all)
{
	struct px_got g = { .calls = 0 };
	struct saker_queue_stats st;
	struct saker_item it;
	saker_queue *q, *t;
	saker_store *s;
	char schema[32], buf[16];
	uint64_t removed = 0;
	int i;

	snprintf(schema, sizeof(schema), "xall_%d", (int)getpid());
	s = px_open(schema, false, SAKER_OK);
	q = px_q(s, "xa");
	t = px_q(s, "xa_to");
	ck_assert_int_eq(saker_store_expire_to(s, q, "xa_to", 5), SAKER_OK);
	memset(&it, 0, sizeof(it));
	it.len = 5;
	for (i = 0; i < 1501; i++) {
		snprintf(buf, sizeof(buf), i == 1000 ? "live!" : "x%04d",
		    i < 1000 ? i : i - 1);
		it.data = buf;
		it.expires_ms = i == 1000 ? 0 : BASE + 10;
		ck_assert_int_eq(saker_store_put(s, q, &it, BASE), SAKER_OK);
	}
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_REMOVE, BASE + 100,
	    px_cb, &g), SAKER_OK);
	ck_assert_str_eq(g.data, "live!");
	ck_assert_int_eq(saker_store_flush_expired(s, q, BASE + 100, 0,
	    &removed), SAKER_OK);
	ck_assert_uint_eq(removed, 500);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	ck_assert_int_eq(saker_store_queue_stats(s, q, &st), SAKER_OK);
	ck_assert_uint_eq(st.items, 0);
	ck_assert_uint_eq(st.expired_to, 1500);
	ck_assert_uint_eq(st.expired_items, 0);
	ck_assert_int_eq(saker_store_queue_stats(s, t, &st), SAKER_OK);
	ck_assert_uint_eq(st.items, 1500);
	for (i = 0; i < 1500; i++) {
		snprintf(buf, sizeof(buf), "x%04d", i);
		ck_assert_int_eq(saker_store_take(s, t, SAKER_TAKE_REMOVE,
		    BASE + 100, px_cb, &g), SAKER_OK);
		ck_assert_str_eq(g.data, buf);
	}
	ck_assert_int_eq(saker_store_take(s, t, SAKER_TAKE_REMOVE, BASE + 100,
	    px_cb, &g), SAKER_EEMPTY);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
}
END_TEST

/* Issue 42: the first stats of a queue with 100,000 deduplication ids
 * count them with one count query (the driver's dedup_count), not by
 * reading every key over the wire; records expired but not yet swept
 * count too, another queue's do not. */
START_TEST(test_pg_dedup_count)
{
	struct saker_queue_stats st;
	struct timespec t0, t1;
	char schema[32];
	saker_store *s;
	PGconn *c;

	snprintf(schema, sizeof(schema), "dc_%d", (int)getpid());
	s = px_open(schema, false, SAKER_OK);
	px_put_once(s, "dc", "one", "k-one", SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
	c = px_conn(schema);
	px_exec(c, "INSERT INTO saker_dedup(queue, key, expires) SELECT"
	    " convert_to('dc', 'UTF8'), convert_to('k' || g, 'UTF8'),"
	    " CASE WHEN g % 2 = 0 THEN 1 ELSE 9000000000000 END"
	    " FROM generate_series(1, 100000) AS g");
	px_exec(c, "INSERT INTO saker_dedup(queue, key, expires) SELECT"
	    " convert_to('dc2', 'UTF8'), convert_to('k' || g, 'UTF8'),"
	    " 9000000000000 FROM generate_series(1, 10) AS g");
	PQfinish(c);
	s = px_open(schema, false, SAKER_OK);
	ck_assert_ptr_nonnull(s->driver->dedup_count);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(saker_store_queue_stats(s, px_q(s, "dc"), &st),
	    SAKER_OK);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_uint_eq(st.dedup_ids, 100001);
	printf("check_store: postgres: first stats of a queue with 100,001"
	    " ids: %.1f ms\n", (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	ck_assert_int_eq(saker_store_queue_stats(s, px_q(s, "dc2"), &st),
	    SAKER_OK);
	ck_assert_uint_eq(st.dedup_ids, 10);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
}
END_TEST

/* An expired head met by a take(OPEN), one statement at a time (a fresh
 * queue claims one item): it was never handed out, so its copy in the
 * expire_to queue keeps the delivery count it had (store.h: the layer
 * keeps deliveries), as the claimed-ahead path and promotion do. */
START_TEST(test_pg_expire_to_open_keeps_deliveries)
{
	struct px_got g = { .calls = 0 };
	struct saker_item it;
	saker_queue *q;
	saker_store *s;
	char schema[32];

	snprintf(schema, sizeof(schema), "xod_%d", (int)getpid());
	s = px_open(schema, false, SAKER_OK);
	q = px_q(s, "xo");
	ck_assert_int_eq(saker_store_expire_to(s, q, "xo_to", 5), SAKER_OK);
	memset(&it, 0, sizeof(it));
	it.data = "old";
	it.len = 3;
	it.deliveries = 3;
	it.expires_ms = BASE + 10;
	ck_assert_int_eq(saker_store_put(s, q, &it, BASE), SAKER_OK);
	it.data = "new";
	it.deliveries = 0;
	it.expires_ms = 0;
	ck_assert_int_eq(saker_store_put(s, q, &it, BASE), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_OPEN, BASE + 100,
	    px_cb, &g), SAKER_OK);
	ck_assert_str_eq(g.data, "new");
	ck_assert_uint_eq(g.deliveries, 1);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	ck_assert_int_eq(saker_store_take(s, px_q(s, "xo_to"),
	    SAKER_TAKE_REMOVE, BASE + 100, px_cb, &g), SAKER_OK);
	ck_assert_str_eq(g.data, "old");
	ck_assert_uint_eq(g.deliveries, 3);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
}
END_TEST

/* One throwaway cluster for the run; skipped (not failed) when the
 * PostgreSQL server binaries are missing. */
static int
add_postgres(Suite *su, const struct saker_store_driver *drv)
{
	char why[256];
	int rc;

	if (getenv("CK_RUN_CASE") != NULL &&
	    strcmp(getenv("CK_RUN_CASE"), drv->name) != 0)
		return 0;
	rc = pg_cluster_start(&pgc, why, sizeof(why));
	if (rc == 0) {
		struct store_conformance_opts o = { pg_spec, pg_damage, NULL };
		TCase *ptc = store_conformance_tcase_opts(drv, &o);

		if (ptc != NULL) {
			tcase_add_test(ptc, test_pg_damaged_paths);
			tcase_add_test(ptc, test_pg_refused_keeps_crc);
			tcase_add_test(ptc, test_pg_upgrade_format2);
			tcase_add_test(ptc, test_pg_upgrade_format6);
			tcase_add_test(ptc, test_pg_attrs_paths);
			tcase_add_test(ptc, test_pg_dedup_race);
			tcase_add_test(ptc, test_pg_doubt_handed_out);
			tcase_add_test(ptc, test_pg_lost_batch);
			tcase_add_test(ptc, test_pg_async_doubt);
			tcase_add_test(ptc, test_pg_async_promote);
			tcase_add_test(ptc, test_pg_async_promote_frozen);
			tcase_add_test(ptc, test_pg_expire_to_all);
			tcase_add_test(ptc, test_pg_dedup_count);
			tcase_add_test(ptc, test_pg_expire_to_open_keeps_deliveries);
			suite_add_tcase(su, ptc);
		}
		return 0;
	}
	printf("check_store: skipping driver '%s': %s\n", drv->name, why);
	if (rc < 0) {
		pg_cluster_destroy(&pgc);
		return -1;
	}
	return 0;
}
#endif

int
main(void)
{
	Suite *su;
	SRunner *sr;
	TCase *tc;
	int failed;
	size_t i;

	su = suite_create("store");
	for (i = 0; saker_store_drivers[i] != NULL; i++) {
		const struct saker_store_driver *drv = saker_store_drivers[i];

#ifdef HAVE_POSTGRES
		/* the one driver whose location is a server, not a path */
		if (strcmp(drv->name, "postgres") == 0) {
			if (add_postgres(su, drv) != 0)
				return EXIT_FAILURE;
			continue;
		}
#endif
		add_driver(su, drv);
	}
	tc = tcase_create("compat-1.0.0");
#ifdef HAVE_LMDB
	tcase_add_test(tc, test_compat_lmdb);
#endif
#ifdef HAVE_SQLITE
	tcase_add_test(tc, test_compat_sqlite);
	tcase_add_test(tc, test_sqlite_upgrade_1_0_0);
#endif
	suite_add_tcase(su, tc);
	tc = tcase_create("kit");
	tcase_add_test(tc, test_kit_crc32c);
	tcase_add_test(tc, test_kit_be);
	tcase_add_test(tc, test_kit_qtab);
	suite_add_tcase(su, tc);
	if (saker_store_memory.open != NULL) {
		tc = tcase_create("memory-extra");
		tcase_add_test(tc, test_memory_limit);
		tcase_add_test(tc, test_memory_full_dedup);
		tcase_add_test(tc, test_memory_read_only);
		tcase_add_test(tc, test_memory_spec);
		tcase_add_test(tc, test_store_options);
		suite_add_tcase(su, tc);
	}
#if defined(HAVE_LMDB) || defined(HAVE_SQLITE)
	tc = tcase_create("journal");
	tcase_add_loop_test(tc, test_journal_read_only, 0, NJDRVS);
	tcase_add_loop_test(tc, test_journal_read_only_locked, 0, NJDRVS);
	tcase_add_loop_test(tc, test_journal_foreign, 0, NJDRVS);
	tcase_add_loop_test(tc, test_journal_torn, 0, NJDRVS);
	tcase_add_loop_test(tc, test_journal_older_data, 0, NJDRVS);
	tcase_add_loop_test(tc, test_journal_flush_delete, 0, NJDRVS);
	tcase_add_loop_test(tc, test_journal_other_mode, 0, NJDRVS);
#ifdef HAVE_LMDB
	tcase_add_test(tc, test_journal_expire_to);
	tcase_add_test(tc, test_lmdb_periodic_sync_fails);
#endif
#ifdef HAVE_SQLITE
	tcase_add_test(tc, test_sqlite_redo_records);
	tcase_add_test(tc, test_sqlite_format_4);
	tcase_add_test(tc, test_sqlite_format_4_journal);
	tcase_add_test(tc, test_sqlite_journal_attrs);
	tcase_add_test(tc, test_sqlite_journal_full);
	tcase_add_loop_test(tc, test_sqlite_lost_batch_ids, 0, 2);
	tcase_add_test(tc, test_sqlite_unwritable);
	tcase_add_loop_test(tc, test_sqlite_expire_to_many, 0, 2);
#endif
	suite_add_tcase(su, tc);
#endif
#if defined(HAVE_LMDB) || defined(HAVE_SQLITE)
	tc = tcase_create("foreign");
#ifdef HAVE_LMDB
	tcase_add_test(tc, test_lmdb_foreign_dir);
#endif
#ifdef HAVE_SQLITE
	tcase_add_test(tc, test_sqlite_foreign_file);
#endif
	suite_add_tcase(su, tc);
#endif
#ifdef HAVE_LMDB
	tc = tcase_create("lmdb-damaged");
	tcase_add_test(tc, test_lmdb_damaged_zero_page);
	tcase_add_test(tc, test_lmdb_damaged_ff_bytes);
	suite_add_tcase(su, tc);
#endif
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
