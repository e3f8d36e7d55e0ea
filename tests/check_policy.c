/* check_policy.c -- the store layer's rules, tested once rather than per
 * driver (the conformance suite tests each driver's primitives): the lock
 * file, the quarantine of damaged items, the expire_to target, the
 * delivery-count clamp and the deduplication rules (store.h, THE LAYER). */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "saker/store.h"
#include "store_conformance.h"
#ifdef HAVE_POSTGRES
#include "pg_cluster.h"
#endif

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

/* The quarantine through a durable driver: a damaged item of a queue
 * whose name is too long for "<name>_damaged" goes to the cut name. */
static const char dmg_marker[] = "policy: damage me, a marker kept verbatim";
static int dmg_hits;

static int
dmg_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	size_t mlen = sizeof(dmg_marker) - 1, n, i;
	unsigned char *buf;
	int fd;

	(void)ftw;
	if (type != FTW_F || sb->st_size <= 0 || sb->st_size > (64 << 20) ||
	    (fd = open(path, O_RDWR)) < 0)
		return 0;
	ck_assert_ptr_nonnull(buf = malloc((size_t)sb->st_size));
	n = (size_t)pread(fd, buf, (size_t)sb->st_size, 0);
	for (i = 0; n >= mlen && i <= n - mlen; i++)
		if (memcmp(buf + i, dmg_marker, mlen) == 0) {
			buf[i + 3] ^= 0x20;
			ck_assert_int_eq(pwrite(fd, buf + i + 3, 1,
			    (off_t)(i + 3)), 1);
			dmg_hits++;
		}
	free(buf);
	close(fd);
	return 0;
}

static int
nop_cb(void *arg, const struct saker_item *it)
{
	(void)arg;
	(void)it;
	ck_abort_msg("a damaged item was handed out");
	return 0;
}

static int
len_cb(void *arg, const struct saker_item *it)
{
	*(size_t *)arg = it->len;
	return 0;
}

START_TEST(test_quarantine_durable)
{
	const struct lockdrv *d = &lockdrvs[_i];
	char name[247], dname[SAKER_STORE_QNAME_MAX + 1], want[600], err[512];
	const char *msg;
	saker_store *s = NULL;
	saker_queue *q, *dq;
	struct saker_item it;
	size_t len = 0;

	mk_tmp();
	memset(name, 'q', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	saker_store_derived_name(name, strlen(name), SAKER_SUFFIX_DAMAGED,
	    dname);
	ck_assert_uint_eq(strlen(dname), 250);
	ck_assert_int_eq(open_spec(d, false, &s, err, sizeof(err)), SAKER_OK);
	ck_assert_int_eq(saker_store_queue_open(s, name, strlen(name), true,
	    NULL, &q), SAKER_OK);
	memset(&it, 0, sizeof(it));
	it.data = dmg_marker;
	it.len = sizeof(dmg_marker) - 1;
	ck_assert_int_eq(saker_store_put(s, q, &it, 1000), SAKER_OK);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
	dmg_hits = 0;
	ck_assert_int_eq(nftw(tmpdir, dmg_entry, 16, FTW_PHYS), 0);
	ck_assert_int_gt(dmg_hits, 0);

	ck_assert_int_eq(open_spec(d, false, &s, err, sizeof(err)), SAKER_OK);
	ck_assert_int_eq(saker_store_queue_open(s, name, strlen(name), false,
	    NULL, &q), SAKER_OK);
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_REMOVE, 2000,
	    nop_cb, NULL), SAKER_ECORRUPT);
	msg = saker_store_errmsg(s);
	snprintf(want, sizeof(want), " failed its checksum; moved to queue"
	    " '%s'", dname);
	ck_assert_msg(strncmp(msg, "queue '", 7) == 0 &&
	    strncmp(msg + 7, name, strlen(name)) == 0 &&
	    strstr(msg, want) != NULL, "errmsg: %s", msg);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);

	/* kept under the cut name, bytes as they are; gone from q */
	ck_assert_int_eq(open_spec(d, false, &s, err, sizeof(err)), SAKER_OK);
	ck_assert_int_eq(saker_store_queue_open(s, dname, strlen(dname), false,
	    NULL, &dq), SAKER_OK);
	ck_assert_int_eq(saker_store_take(s, dq, SAKER_TAKE_REMOVE, 3000,
	    len_cb, &len), SAKER_OK);
	ck_assert_uint_eq(len, sizeof(dmg_marker) - 1);
	ck_assert_int_eq(saker_store_queue_open(s, name, strlen(name), false,
	    NULL, &q), SAKER_OK);
	ck_assert_int_eq(saker_store_take(s, q, SAKER_TAKE_REMOVE, 3000, nop_cb,
	    NULL), SAKER_EEMPTY);
	ck_assert_int_eq(saker_store_commit(s), SAKER_OK);
	saker_store_close(s);
	rm_rf(tmpdir);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The rest over every compiled-in driver, each test on a fresh store of
 * the conformance suite's fixture (store_conformance.h): the layer's rules
 * must hold whatever driver is under them. */

static saker_store *ms;
static void *notified_ctx;

/* After the conformance fixture: its store is ours. */
static void
drv_setup(void)
{
	ms = store_conformance_store();
	(void)store_conformance_wakeups(NULL);
	notified_ctx = NULL;
}

/* Wake-ups since the last call; the last one's ctx in notified_ctx. */
static int
wakeups(void)
{
	return store_conformance_wakeups(&notified_ctx);
}

static saker_queue *
mq(const char *name, void *ctx)
{
	saker_queue *q = NULL;

	ck_assert_int_eq(saker_store_queue_open(ms, name, strlen(name), true,
	    ctx, &q), SAKER_OK);
	return q;
}

static struct saker_item got;
static char gotdata[64];

static int
copy_cb(void *arg, const struct saker_item *it)
{
	(void)arg;
	got = *it;
	ck_assert_uint_lt(it->len, sizeof(gotdata));
	memcpy(gotdata, it->data, it->len);
	gotdata[it->len] = '\0';
	got.data = gotdata;
	return 0;
}

static int
take(saker_queue *q, int64_t now)
{
	return saker_store_take(ms, q, SAKER_TAKE_REMOVE, now, copy_cb, NULL);
}

static void
put(saker_queue *q, const char *data, int64_t expires, uint32_t dlv)
{
	struct saker_item it;

	memset(&it, 0, sizeof(it));
	it.data = data;
	it.len = strlen(data);
	it.flags = 7;
	it.expires_ms = expires;
	it.deliveries = dlv;
	ck_assert_int_eq(saker_store_put(ms, q, &it, 1000), SAKER_OK);
}

/* "<q>_damaged" and "<q>_dead": one rule, cut at the name limit. */
START_TEST(test_derived_name)
{
	char name[SAKER_STORE_QNAME_MAX + 1], q[300];
	size_t i, j;

	ck_assert_uint_eq(saker_store_derived_name("jobs", 4,
	    SAKER_SUFFIX_DAMAGED, name), 12);
	ck_assert_str_eq(name, "jobs_damaged");
	ck_assert_uint_eq(saker_store_derived_name("jobs", 4, SAKER_SUFFIX_DEAD,
	    name), 9);
	ck_assert_str_eq(name, "jobs_dead");
	/* NAME + suffix up to 250 bytes is kept whole; a longer NAME is cut
	 * so that the suffix fits: one rule for both suffixes */
	memset(q, 'x', sizeof(q));
	for (i = 0; i < 2; i++) {
		const char *sfx = i == 0 ? SAKER_SUFFIX_DAMAGED : SAKER_SUFFIX_DEAD;
		size_t keep = SAKER_STORE_QNAME_MAX - strlen(sfx);
		const size_t lens[] = { keep, keep + 1, SAKER_STORE_QNAME_MAX,
		    sizeof(q) };

		for (j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
			ck_assert_uint_eq(saker_store_derived_name(q, lens[j], sfx,
			    name), SAKER_STORE_QNAME_MAX);
			ck_assert_int_eq(memcmp(name, q, keep), 0);
			ck_assert_str_eq(name + keep, sfx);
		}
	}
	/* a name at the limit that ends in the suffix is its own derived
	 * queue (the quarantine refuses that: test_quarantine_long_names) */
	memcpy(q + 245, "_dead", 5);
	ck_assert_uint_eq(saker_store_derived_name(q, 250, SAKER_SUFFIX_DEAD,
	    name), 250);
	ck_assert_int_eq(memcmp(name, q, 250), 0);
}
END_TEST

START_TEST(test_quarantine)
{
	saker_queue *q = mq("hurt", NULL), *dq;
	int ctx;
	struct saker_item bad;
	char msg[512];

	memset(&bad, 0, sizeof(bad));
	bad.data = "bytes";
	bad.len = 5;
	bad.flags = 9;
	bad.expires_ms = 1500;	/* cleared: it must not vanish */
	bad.due_ms = 90000;	/* cleared: it is ready at once */
	bad.created_ms = 42;
	bad.deliveries = 3;
	/* the core has the quarantine queue open: its context stays */
	dq = mq("hurt_damaged", &ctx);
	ck_assert_int_eq(saker_store_quarantine(ms, q, "hurt", 4, 17, &bad,
	    1000, msg, sizeof(msg)), SAKER_OK);
	ck_assert_str_eq(msg, "queue 'hurt': item 17 failed its checksum;"
	    " moved to queue 'hurt_damaged'");
	ck_assert_int_eq(wakeups(), 1);
	ck_assert_ptr_eq(notified_ctx, &ctx);
	ck_assert_int_eq(take(dq, 2000), SAKER_OK);
	ck_assert_str_eq(gotdata, "bytes");
	ck_assert_uint_eq(got.flags, 9);
	ck_assert_int_eq(got.expires_ms, 0);
	ck_assert_int_eq(got.created_ms, 42);
	ck_assert_uint_eq(got.deliveries, 3);

	/* a store that takes no writes: left in place, said once */
	ck_assert_int_eq(saker_store_quarantine(ms, q, "hurt", 4, 18, NULL,
	    1000, msg, sizeof(msg)), SAKER_EREADONLY);
	ck_assert_str_eq(msg, "queue 'hurt': item 18 failed its checksum"
	    " (left in place: the store takes no writes)");
	ck_assert_int_eq(take(dq, 2000), SAKER_EEMPTY);
}
END_TEST

/* A long name: the quarantine queue is cut to 250 bytes, and a queue
 * that is its own quarantine queue keeps the item. */
START_TEST(test_quarantine_long_names)
{
	char name[300], dname[SAKER_STORE_QNAME_MAX + 1], msg[1024], want[1024];
	struct saker_item bad;
	saker_queue *q, *dq;

	memset(&bad, 0, sizeof(bad));
	bad.data = "b";
	bad.len = 1;
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	q = mq(name, NULL);
	ck_assert_int_eq(saker_store_quarantine(ms, q, name, strlen(name), 1,
	    &bad, 1000, msg, sizeof(msg)), SAKER_OK);
	saker_store_derived_name(name, strlen(name), SAKER_SUFFIX_DAMAGED,
	    dname);
	ck_assert_int_eq(saker_store_queue_open(ms, dname, 250, false, NULL,
	    &dq), SAKER_OK);
	ck_assert_int_eq(take(dq, 2000), SAKER_OK);
	ck_assert_str_eq(gotdata, "b");

	/* 242 bytes + "_damaged": its quarantine name is its own */
	memcpy(name + 242, "_damaged", 9);
	q = mq(name, NULL);
	ck_assert_int_eq(saker_store_quarantine(ms, q, name, 250, 2, &bad,
	    1000, msg, sizeof(msg)), SAKER_EINVAL);
	snprintf(want, sizeof(want), "queue '%s': item 2 failed its checksum"
	    " and could not be moved to '%s' (the queue is its own"
	    " quarantine)", name, name);
	ck_assert_str_eq(msg, want);
	ck_assert_int_eq(take(q, 2000), SAKER_EEMPTY);
}
END_TEST

/* expire_to: the target kept by the layer, routed by the driver. */
START_TEST(test_expire_to_routing)
{
	saker_queue *q = mq("ex", NULL), *t, *late;
	struct saker_queue_stats st;
	int ctx;

	ck_assert(!saker_store_has_expire_to(q));
	ck_assert_int_eq(saker_store_expire_target(ms, q, &t), SAKER_OK);
	ck_assert_ptr_null(t);
	ck_assert_int_eq(saker_store_expire_to(ms, q, "ex_late", 7), SAKER_OK);
	ck_assert(saker_store_has_expire_to(q));
	/* the target is created when first needed, through queue_open() */
	ck_assert_int_eq(saker_store_queue_open(ms, "ex_late", 7, false, NULL,
	    &late), SAKER_ENOTFOUND);
	put(q, "old", 1500, 2);
	ck_assert_int_eq(take(q, 2000), SAKER_EEMPTY);
	ck_assert_int_eq(saker_store_queue_open(ms, "ex_late", 7, false, &ctx,
	    &late), SAKER_OK);
	ck_assert_int_eq(saker_store_expire_target(ms, q, &t), SAKER_OK);
	ck_assert_ptr_eq(t, late);
	ck_assert_int_eq(saker_store_queue_stats(ms, q, &st), SAKER_OK);
	ck_assert_uint_eq(st.expired_to, 1);
	ck_assert_uint_eq(st.expired_items, 0);
	ck_assert_int_eq(take(late, 2000), SAKER_OK);
	ck_assert_str_eq(gotdata, "old");
	ck_assert_int_eq(got.expires_ms, 0);
	ck_assert_uint_eq(got.deliveries, 2);

	/* the next expired item notifies the target with the core's ctx */
	put(q, "older", 1500, 0);
	(void)wakeups();
	ck_assert_int_eq(take(q, 2000), SAKER_EEMPTY);
	ck_assert_int_eq(wakeups(), 1);
	ck_assert_ptr_eq(notified_ctx, &ctx);
	ck_assert_int_eq(take(late, 2000), SAKER_OK);

	/* its own name, or none: dropped */
	ck_assert_int_eq(saker_store_expire_to(ms, q, "ex", 2), SAKER_OK);
	ck_assert_int_eq(saker_store_expire_target(ms, q, &t), SAKER_OK);
	ck_assert_ptr_null(t);
	put(q, "gone", 1500, 0);
	ck_assert_int_eq(take(q, 2000), SAKER_EEMPTY);
	ck_assert_int_eq(saker_store_expire_to(ms, q, NULL, 0), SAKER_OK);
	ck_assert(!saker_store_has_expire_to(q));
	put(q, "gone too", 1500, 0);
	ck_assert_int_eq(take(q, 2000), SAKER_EEMPTY);
	ck_assert_int_eq(saker_store_queue_stats(ms, q, &st), SAKER_OK);
	ck_assert_uint_eq(st.expired_to, 2);
	ck_assert_uint_eq(st.expired_items, 2);
	ck_assert_int_eq(take(late, 2000), SAKER_EEMPTY);

	/* a name that does not fit */
	{
		char big[300];

		memset(big, 'b', sizeof(big));
		ck_assert_int_eq(saker_store_expire_to(ms, q, big,
		    sizeof(big)), SAKER_EINVAL);
	}
}
END_TEST

/* The delivery-count clamp of put: a dump may carry any 32-bit count. */
START_TEST(test_put_clamp)
{
	saker_queue *q = mq("dl", NULL);

	put(q, "a", 0, 70000);
	put(q, "b", 0, SAKER_DELIVERIES_MAX);
	put(q, "c", 0, 5);
	ck_assert_int_eq(take(q, 2000), SAKER_OK);
	ck_assert_uint_eq(got.deliveries, SAKER_DELIVERIES_MAX);
	ck_assert_int_eq(take(q, 2000), SAKER_OK);
	ck_assert_uint_eq(got.deliveries, SAKER_DELIVERIES_MAX);
	ck_assert_int_eq(take(q, 2000), SAKER_OK);
	ck_assert_uint_eq(got.deliveries, 5);
}
END_TEST

/* The layer's deduplication rules (store.h, DEDUPLICATION) over the
 * driver's one question: a window that is none, or would overflow, is
 * refused; a load counts a new id and never a duplicate; asking
 * (dedup_kept) leaves no id behind; a full queue refuses a new id and
 * keeps its count; the counters match what dedup_iterate shows. */
static int
count_ids(void *arg, const void *key, size_t len, int64_t expires_ms)
{
	(void)key;
	(void)len;
	(void)expires_ms;
	(*(uint64_t *)arg)++;
	return 0;
}

static struct saker_queue_stats
ids_stats(saker_queue *q)
{
	struct saker_queue_stats st;
	uint64_t n = 0;

	memset(&st, 0, sizeof(st));
	ck_assert_int_eq(saker_store_queue_stats(ms, q, &st), SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_iterate(ms, q, count_ids, &n),
	    SAKER_OK);
	ck_assert_uint_eq(st.dedup_ids, n);
	ck_assert_int_eq(saker_store_dedup_count(ms, q, &n), SAKER_OK);
	ck_assert_uint_eq(st.dedup_ids, n);
	return st;
}

START_TEST(test_dedup_rules)
{
	saker_queue *q = mq("dd", NULL);
	struct saker_item it;
	struct saker_queue_stats st;

	memset(&it, 0, sizeof(it));
	it.data = "x";
	it.len = 1;
	ck_assert_int_eq(saker_store_put_once(ms, q, &it, "k1", 2, 0, 0, 1000),
	    SAKER_EINVAL);
	ck_assert_int_eq(saker_store_put_once(ms, q, &it, "k1", 2, INT64_MAX,
	    0, 1000), SAKER_EINVAL);
	ck_assert_int_eq(saker_store_dedup_kept(ms, q, "k1", 2, INT64_MAX,
	    1000), SAKER_EINVAL);
	ck_assert_uint_eq(ids_stats(q).dedup_ids, 0);

	/* a load: a new id counted, the same again neither counted nor a
	 * duplicate */
	ck_assert_int_eq(saker_store_dedup_load(ms, q, "k1", 2, 50000, 1000),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_load(ms, q, "k1", 2, 50000, 1000),
	    SAKER_OK);
	st = ids_stats(q);
	ck_assert_uint_eq(st.dedup_ids, 1);
	ck_assert_uint_eq(st.dedup_hits, 0);

	/* asking: a new id leaves nothing, a kept one is a duplicate */
	ck_assert_int_eq(saker_store_dedup_kept(ms, q, "k2", 2, 10000, 1000),
	    SAKER_OK);
	ck_assert_int_eq(saker_store_dedup_kept(ms, q, "k1", 2, 10000, 1000),
	    SAKER_EEXIST);
	st = ids_stats(q);
	ck_assert_uint_eq(st.dedup_ids, 1);
	ck_assert_uint_eq(st.dedup_hits, 1);

	/* full at 2 ids: k3 fits, k4 is refused and leaves no record */
	ck_assert_int_eq(saker_store_put_once(ms, q, &it, "k3", 2, 10000, 2,
	    1000), SAKER_OK);
	ck_assert_int_eq(saker_store_put_once(ms, q, &it, "k4", 2, 10000, 2,
	    1000), SAKER_EFULL);
	ck_assert_int_eq(saker_store_put_once(ms, q, &it, "k3", 2, 10000, 2,
	    1000), SAKER_EEXIST);
	st = ids_stats(q);
	ck_assert_uint_eq(st.dedup_ids, 2);
	ck_assert_uint_eq(st.dedup_hits, 2);
	ck_assert_uint_eq(st.items, 1);
	/* an expired record is replaced, not added */
	ck_assert_int_eq(saker_store_put_once(ms, q, &it, "k3", 2, 10000, 2,
	    20000), SAKER_OK);
	ck_assert_uint_eq(ids_stats(q).dedup_ids, 2);
	ck_assert_int_eq(saker_store_commit(ms), SAKER_OK);
	ck_assert_uint_eq(ids_stats(q).dedup_ids, 2);
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
		tcase_add_loop_test(tc, test_quarantine_durable, 0, NLOCKDRVS);
	}
	suite_add_tcase(su, tc);
	tc = tcase_create("names");
	tcase_add_test(tc, test_derived_name);
	suite_add_tcase(su, tc);
	return su;
}

/* The layer's cases over driver drv, as the conformance suite opens it. */
static void
add_driver(Suite *su, const struct saker_store_driver *drv,
    const struct store_conformance_opts *o)
{
	TCase *tc = store_conformance_fixture(drv, o);

	if (tc == NULL) {
		fprintf(stderr, "check_policy: no room for driver %s\n",
		    drv->name);
		exit(EXIT_FAILURE);
	}
	tcase_add_checked_fixture(tc, drv_setup, NULL);
	tcase_add_test(tc, test_quarantine);
	tcase_add_test(tc, test_quarantine_long_names);
	if (drv->expire_to != NULL)
		tcase_add_test(tc, test_expire_to_routing);
	else
		printf("check_policy: %s: skipping test_expire_to_routing (no"
		    " expire_to)\n", drv->name);
	tcase_add_test(tc, test_put_clamp);
	tcase_add_test(tc, test_dedup_rules);
	suite_add_tcase(su, tc);
}

#ifdef HAVE_POSTGRES
/* PostgreSQL: one throwaway cluster for the run, a schema per test, as in
 * check_store; skipped (not failed) without the server binaries. */
static struct pg_cluster pgc;

static void
pg_spec(char *buf, size_t len, const char *dir)
{
	(void)dir;
	pg_cluster_spec(&pgc, buf, len);
}

static int
add_postgres(Suite *su, const struct saker_store_driver *drv)
{
	struct store_conformance_opts o = { pg_spec, NULL, NULL };
	char why[256];
	int rc = pg_cluster_start(&pgc, why, sizeof(why));

	if (rc == 0) {
		add_driver(su, drv, &o);
		return 0;
	}
	printf("check_policy: skipping driver '%s': %s\n", drv->name, why);
	pg_cluster_destroy(&pgc);
	return rc < 0 ? -1 : 0;
}
#endif

int
main(void)
{
	static const struct store_conformance_opts defaults;
	Suite *su = policy_suite();
	SRunner *sr;
	size_t i;
	int nf;

	for (i = 0; saker_store_drivers[i] != NULL; i++) {
		const struct saker_store_driver *drv = saker_store_drivers[i];

#ifdef HAVE_POSTGRES
		if (strcmp(drv->name, "postgres") == 0) {
			if (add_postgres(su, drv) != 0)
				return EXIT_FAILURE;
			continue;
		}
#endif
		add_driver(su, drv, &defaults);
	}
	fflush(stdout);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
#ifdef HAVE_POSTGRES
	pg_cluster_destroy(&pgc);
#endif
	return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
