/* lmdb.c -- the LMDB store driver: all queues of a store in one environment. */
#include "config.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lmdb.h>

#include "hash.h"
#include "clock.h"
#include "kit.h"
#include "longtxn.h"
#include "log.h"
#include "lmdb_verify.h"
#include "qtab.h"
#include "saker/store.h"

/*
 * On-disk layout (docs/lmdb.md has the long version).  All integers are
 * big-endian so fixed-width keys sort correctly with LMDB's memcmp order.
 *
 *   meta     "format" -> "saker-lmdb", "version" -> u32,
 *            "next_qid" -> u64, "next_arrival" -> u64
 *   queues   name -> struct qrec (id, lo, tail and the counters)
 *   items    (qid, seq) -> header + data        the ready FIFOs
 *   open     (qid, seq) -> header + data        items handed out, not confirmed
 *   delayed  (due_ms, arrival) -> qid + header + data
 *   dedup    (qid, id) -> expires u64 + CRC32C   deduplication ids
 *   dedup_exp (qid, expires, id) -> ""            the same, by expiry
 *
 * An item record is a header (LM_HDR), then, with LM_HF_ATTRS, a u16
 * length and the item's attributes, then the data and the checksum.
 * A queue's ready items are the keys (qid, lo <= seq < tail).  put() appends at
 * tail, release() inserts at lo - 1; both start at 2^62 so neither end runs
 * out.  An item's id is its sequence number: sequences are never reused, so
 * the id of an open item stays unique while it exists.  items, open and
 * delayed each hold a sentinel record that is never deleted (is_sentinel).
 *
 * Batches run in one long write transaction; each is made durable by one
 * record in DIR/saker.journal (journal.h), and a checkpoint commits
 * the long transaction now and then (docs/lmdb.md: "Batches, the journal
 * and checkpoints").
 */
#define LM_FORMAT	"saker-lmdb"
#define LM_VERSION	5	/* 2: the journal, sentinels, "journal_seq";
				 * 3: items may carry a checksum (LM_HF_CRC);
				 * 4: header bytes 2-3 hold the delivery
				 * count (0 in records written before);
				 * 5: item attributes (LM_HF_ATTRS), the
				 * dedup and dedup_exp databases */
#define LM_SEQ_START	((uint64_t)1 << 62)
#define LM_HDR		24	/* state, hflags, deliveries u16, flags,
				 * expires, created */
#define LM_HF_CRC	0x01	/* hflags: a CRC32C trailer follows the data */
#define LM_HF_ATTRS	0x02	/* hflags: the data is preceded by a u16
				 * length and that many bytes of item
				 * attributes (set only with LM_HF_CRC) */
#define LM_CRC		4	/* the trailer: CRC32C of bytes 1.. of the
				 * header and of the body (attributes and
				 * data), big-endian */
#define LM_QREC		72	/* 9 x u64 */
#define LM_KEY		16
#define LM_MAXDATA	((size_t)UINT32_MAX - 64)
#ifndef LM_MAP_INITIAL
#define LM_MAP_INITIAL	((size_t)1 << 30)
#endif
#define LM_GROW_PCT	70	/* grow the map when it is fuller than this */
#ifndef LM_GUARD_PCT
#define LM_GUARD_PCT	85	/* beyond this estimated fill, ops run nested */
#endif
#define LM_STATE_READY	0
#define LM_STATE_OPEN	1
#define LM_EBADVAL	(-29000) /* internal: a malformed record */

/*
 * Checkpoints (longtxn.h decides them): the long transaction is committed
 * when the journal holds this many bytes, when its oldest batch is this
 * old, or when the map needs to grow.  Between checkpoints item data waits
 * in LMDB's dirty pages, so the byte limit also bounds the server's
 * memory.  8 MiB, not SQLite's 512 KiB: an LMDB checkpoint writes each
 * dirty B-tree page once and syncs twice, so a smaller one costs more
 * syncs per item; 1 MiB cost up to 10 % of the throughput under 50
 * producers (docs/lmdb.md), where SQLite's checkpoint, which also copies
 * its WAL, held the loop 19 ms at 8 MiB against 0.9 ms at 512 KiB.
 */
#define LM_CKPT_BYTES	((uint64_t)8 << 20)
#define LM_CKPT_NS	((uint64_t)1000 * 1000 * 1000)

/* Driver options (store.h, DRIVER OPTIONS): checkpoint-bytes=1 makes a
 * checkpoint after every batch (the crash tests use it); docs/lmdb.md. */
enum { LM_OPT_CHECKPOINT_BYTES };
static const struct saker_store_option lm_options[] = {
	[LM_OPT_CHECKPOINT_BYTES] = { "checkpoint-bytes", SAKER_OPT_SIZE, 1,
	    (uint64_t)1 << 40, "journal bytes between checkpoints, 1 to 1t,"
	    " default 8m" },
	{ NULL, SAKER_OPT_STRING, 0, 0, NULL }
};

/* The databases, as named in journal records. */
enum { LD_META, LD_QUEUES, LD_ITEMS, LD_OPEN, LD_DELAYED, LD_DEDUP,
    LD_DEDUPX, LD_COUNT };
#define LM_DKEY	(16 + SAKER_DEDUP_KEY_MAX)	/* a dedup_exp key, at most */
#define LM_DVAL	12	/* a dedup value: expires u64, CRC32C u32 */

/* Journal operations (one batch's payload is a sequence of them). */
enum {
	JR_PUT = 1,	/* db, u16 klen, u32 vlen, key, value */
	JR_DEL = 2,	/* db, u16 klen, key */
	JR_MOVE = 3,	/* from, to, skip, state, pad[3], from key, to key */
	JR_DELQ = 4,	/* db, pad[6], u64 qid: every (qid, *) key of db */
	JR_DELDQ = 5	/* pad[7], u64 qid: every delayed item of queue qid */
};

struct lq_state {
	uint64_t lo, tail;	/* ready seqs are in [lo, tail) */
	/* items..open too: the queue record on disk holds them (format 1),
	 * so this driver keeps them, undone with the batch (own_counts) */
	uint64_t items, bytes, delayed, open, total, expired;
	bool exists;		/* the queue has (will have) a record */
};

struct saker_queue {
	struct saker_queue_base base; /* the layer's (store.h): first */
	struct kit_qent ent;	/* in lstore.qt, by name and by id */
	struct saker_queue *dirty_next;
	char *name;		/* its length is ent.len */
	uint64_t id;
	void *ctx;
	struct lq_state cur;	/* as of the current batch */
	struct lq_state saved;	/* as of the last commit (valid when dirty) */
	bool dirty;
	bool deleted;		/* deleted in this batch: freed at commit */
	uint64_t expired_to;
};

struct lstore {
	saker_store base;
	MDB_env *env;
	MDB_dbi dbi[LD_COUNT];	/* the databases, by LD_* */
	MDB_txn *ptxn;		/* the long write txn between checkpoints */
	MDB_txn *txn;		/* for this batch: ptxn, or a read txn */
	bool txn_write;
	bool txn_dirty;		/* the batch wrote something */
	bool touched;		/* the batch began a write in ptxn */
	char *dir;
	saker_sync_mode sync;
	bool read_only;
	bool broken;		/* a write or fsync failed: refuse writes */
	int lost;		/* batch rolled back under the caller: commit()
				 * must fail with this code */
	char broken_msg[640];
	char err[1024];
	saker_notify_fn notify;
	void *notify_arg;
	struct kit_qtab qt;	/* every queue struct, by name and by id */
	struct saker_queue *dirty;
	uint64_t next_qid, next_arrival;
	uint64_t saved_next_qid, saved_next_arrival;
	uint64_t max_qid;	/* this queue's items may use MDB_APPEND */
	size_t psize, mapsize;
	uint64_t base_pages;	/* pages in use when the batch began */
	uint64_t est_pages;	/* estimate of pages ptxn adds */
	struct ltx lt;		/* the journal (fd -1 when read-only) and the
				 * checkpoint policy (longtxn.h) */
	size_t jmark;		/* journal length when a nested op began */
	uint64_t store_id;	/* random, made at creation: seeds the journal */
	int begin_err;		/* saker_err of the last failed lm_begin_long */
	bool stale;		/* ptxn was lost: refuse even reads */
	bool no_dedup;		/* read-only, format < 5: no dedup databases */
	bool no_async;		/* the flush thread could not be started */
	uint64_t flight_t0;	/* when the batch in flight began its commit */
	bool flight_done;	/* its result collected early (flight_rc), for
				 * commit_finish() to report */
	int flight_rc;
	struct saker_store_stats st;
};

extern const struct saker_store_driver saker_store_lmdb;

/* ---------------------------------------------------------------------
 * Encoding
 * --------------------------------------------------------------------- */

/* The key (a, b) into kb; returns it as an MDB_val pointing at kb. */
static MDB_val
mkkey(unsigned char *kb, uint64_t a, uint64_t b)
{
	saker_put_be64(kb, a);
	saker_put_be64(kb + 8, b);
	return (MDB_val){ .mv_size = LM_KEY, .mv_data = kb };
}

/* Is `k` a 16-byte key whose first half is `qid`? */
static bool
key_in(const MDB_val *k, uint64_t qid)
{
	return k->mv_size == LM_KEY && saker_get_be64(k->mv_data) == qid;
}

/*
 * Sentinels.  LMDB cannot reuse, within a transaction, the root page of a
 * tree that became empty: it goes to the freelist, not back to the
 * transaction.  A queue store empties its trees all the time, and batches
 * share one long transaction, so every tree holds one record that is never
 * deleted: key (0, 0) with an empty value in items and open (queue ids
 * start at 1), key 0xff.. (after every due time) in delayed, with queue
 * id 0 in its value; keys of 8 and 16 zero bytes (queue 0, no id) in
 * dedup and dedup_exp.
 */
static bool
is_sentinel(const MDB_val *k, unsigned char fill)
{
	const unsigned char *p = k->mv_data;
	size_t i;

	if (k->mv_size != LM_KEY)
		return false;
	for (i = 0; i < LM_KEY; i++)
		if (p[i] != fill)
			return false;
	return true;
}

/* Put the sentinels in (they are never journalled: every writer puts them
 * at open, before anything else). */
static int
put_sentinels(MDB_txn *t, const MDB_dbi *dbi)
{
	unsigned char k0[LM_KEY], kf[LM_KEY], dv[8 + LM_HDR];
	MDB_val k, v;
	int rc;

	memset(k0, 0, sizeof(k0));
	memset(kf, 0xff, sizeof(kf));
	memset(dv, 0, sizeof(dv));
	k = (MDB_val){ .mv_size = LM_KEY, .mv_data = k0 };
	v.mv_data = dv;
	v.mv_size = 0;
	rc = mdb_put(t, dbi[LD_ITEMS], &k, &v, MDB_NOOVERWRITE);
	if (rc == 0 || rc == MDB_KEYEXIST)
		rc = mdb_put(t, dbi[LD_OPEN], &k, &v, MDB_NOOVERWRITE);
	if (rc == 0 || rc == MDB_KEYEXIST)
		rc = mdb_put(t, dbi[LD_DEDUPX], &k, &v, MDB_NOOVERWRITE);
	k.mv_size = 8;
	if (rc == 0 || rc == MDB_KEYEXIST)
		rc = mdb_put(t, dbi[LD_DEDUP], &k, &v, MDB_NOOVERWRITE);
	k.mv_data = kf;
	k.mv_size = LM_KEY;
	v.mv_size = sizeof(dv);
	if (rc == 0 || rc == MDB_KEYEXIST)
		rc = mdb_put(t, dbi[LD_DELAYED], &k, &v, MDB_NOOVERWRITE);
	return rc == MDB_KEYEXIST ? 0 : rc;
}

/* Count one more delivery, in place: the count is bytes 2-3 of the
 * header (not under the checksum). */
static void
hdr_bump(unsigned char *p)
{
	uint16_t n = saker_get_be16(p + 2);

	if (n < SAKER_DELIVERIES_MAX)
		n++;
	saker_put_be16(p + 2, n);
}

static void
hdr_write(unsigned char *p, int state, uint32_t flags, int64_t expires,
    int64_t created, uint32_t deliveries)
{
	p[0] = (unsigned char)state;
	p[1] = LM_HF_CRC;
	saker_put_be16(p + 2, (uint16_t)deliveries);
	saker_put_be32(p + 4, flags);
	saker_put_be64(p + 8, (uint64_t)expires);
	saker_put_be64(p + 16, (uint64_t)created);
}

/* The bytes before the data in a record's body of `body` bytes: the
 * attributes and their length (LM_HF_ATTRS), or none; SIZE_MAX when the
 * length does not fit the body (damage). */
static size_t
rec_apre(const unsigned char *p, size_t body)
{
	if (!(p[1] & LM_HF_ATTRS))
		return 0;
	if (body < 2 || saker_get_be16(p + LM_HDR) > body - 2)
		return SIZE_MAX;
	return 2 + (size_t)saker_get_be16(p + LM_HDR);
}

/* Fill `it` from a record header + body (the view points into the map).
 * Attributes whose length is damaged read as data: rec_sound() refuses
 * such a record, which is then moved aside, not served. */
static int
hdr_read(const void *rec, size_t size, struct saker_item *it)
{
	const unsigned char *p = rec;
	size_t body, pre;

	if (size < LM_HDR || ((p[1] & LM_HF_CRC) && size < LM_HDR + LM_CRC))
		return LM_EBADVAL;
	memset(it, 0, sizeof(*it));
	it->flags = saker_get_be32(p + 4);
	it->expires_ms = (int64_t)saker_get_be64(p + 8);
	it->created_ms = (int64_t)saker_get_be64(p + 16);
	it->deliveries = saker_get_be16(p + 2);
	body = size - LM_HDR - ((p[1] & LM_HF_CRC) ? LM_CRC : 0);
	if ((pre = rec_apre(p, body)) == SIZE_MAX)
		pre = 0;
	if (pre > 0) {
		it->attrs = p + LM_HDR + 2;
		it->attrs_len = pre - 2;
	}
	it->len = body - pre;
	it->data = p + LM_HDR + pre;
	return 0;
}

/* The checksum of a record: everything but the state byte and the
 * delivery count (a take with open and a release rewrite them in place;
 * the count is summed as zeros, as written before format 4) and the
 * trailer.  `body`: the bytes between header and trailer. */
static uint32_t
rec_crc(const unsigned char *p, size_t body)
{
	static const unsigned char zero[2];
	uint32_t crc;

	crc = kit_crc32c(0, p + 1, 1);
	crc = kit_crc32c(crc, zero, 2);
	return kit_crc32c(crc, p + 4, LM_HDR - 4 + body);
}

/* Write the trailer of a record whose header and body are in place. */
static void
rec_seal(unsigned char *p, size_t body)
{
	saker_put_be32(p + LM_HDR + body, rec_crc(p, body));
}

/* Is the record sound?  Records written before format 3 have no
 * checksum (hflags 0) and pass; attributes come only with a checksum;
 * any other hflags bit is damage.  Bytes 2-3 (zero before format 4) are
 * the delivery count: any value goes. */
static bool
rec_sound(const void *rec, size_t size)
{
	const unsigned char *p = rec;
	size_t body;

	if (size < LM_HDR || (p[1] & ~(LM_HF_CRC | LM_HF_ATTRS)) != 0)
		return false;
	if (p[1] == 0)
		return true;
	if (!(p[1] & LM_HF_CRC) || size < LM_HDR + LM_CRC)
		return false;
	body = size - LM_HDR - LM_CRC;
	return rec_apre(p, body) != SIZE_MAX &&
	    saker_get_be32(p + LM_HDR + body) == rec_crc(p, body);
}

/* Data bytes of a record of `size` bytes (header, attributes and trailer
 * excluded). */
static size_t
rec_datalen(const unsigned char *p, size_t size)
{
	struct saker_item it;

	return hdr_read(p, size, &it) == 0 ? it.len : 0;
}

static bool
expired(const struct saker_item *it, int64_t now_ms)
{
	return it->expires_ms != 0 && it->expires_ms <= now_ms;
}

/* A queue record (LM_QREC bytes): q's id and counters, u64 each, in this
 * order.  Written from q, or read into q (which then exists). */
static void
qrec_io(unsigned char *p, struct saker_queue *q, bool write)
{
	uint64_t *f[] = { &q->id, &q->cur.lo, &q->cur.tail, &q->cur.items,
	    &q->cur.bytes, &q->cur.delayed, &q->cur.open, &q->cur.total,
	    &q->cur.expired };
	size_t i;

	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (write)
			saker_put_be64(p + 8 * i, *f[i]);
		else
			*f[i] = saker_get_be64(p + 8 * i);
	}
	if (!write)
		q->cur.exists = true;
}

/* ---------------------------------------------------------------------
 * Errors
 * --------------------------------------------------------------------- */

static int seterr(struct lstore *, int, const char *, ...)
    __attribute__((format(printf, 3, 4)));

static int
seterr(struct lstore *s, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	return code;
}

/* Map an LMDB or errno code to a saker_err. */
static int
maperr(int rc)
{
	switch (rc) {
	case 0:
		return SAKER_OK;
	case MDB_NOTFOUND:
		return SAKER_ENOTFOUND;
	case MDB_MAP_FULL:
	case MDB_TXN_FULL:
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return SAKER_EFULL;
	case ENOMEM:
		return SAKER_ENOMEM;
	case MDB_CORRUPTED:
	case MDB_PAGE_NOTFOUND:
	case MDB_INVALID:
	case LM_EBADVAL:
		return SAKER_ECORRUPT;
	case MDB_VERSION_MISMATCH:
		return SAKER_EVERSION;
	case MDB_BAD_VALSIZE:
		return SAKER_EINVAL;
	case EROFS:
		return SAKER_EREADONLY;
	default:
		return SAKER_EIO;
	}
}

static const char *
lm_strerror(int rc)
{
	if (rc == LM_EBADVAL)
		return "malformed record";
	return mdb_strerror(rc);
}

/* Record an LMDB failure of operation `what` and return its saker code. */
static int
lm_fail(struct lstore *s, int rc, const char *what)
{
	int code = maperr(rc);

	if (code == SAKER_EFULL)
		return seterr(s, code, "lmdb %s: %s: storage full (%s)", s->dir,
		    what, lm_strerror(rc));
	return seterr(s, code, "lmdb %s: %s: %s", s->dir, what,
	    lm_strerror(rc));
}

/* ---------------------------------------------------------------------
 * Queue table: chained hashes by name and by id
 * --------------------------------------------------------------------- */

#define LQ(e) KIT_QENT_QUEUE(e, struct saker_queue, ent)

/* A new queue struct in the table (not yet existing in the store). */
static struct saker_queue *
qtab_add(struct lstore *s, const char *name, size_t len, uint64_t id)
{
	struct saker_queue *q = calloc(1, sizeof(*q));

	if (q == NULL || (q->name = malloc(len + 1)) == NULL) {
		free(q);
		return NULL;
	}
	memcpy(q->name, name, len);
	q->name[len] = '\0';
	q->id = id;
	q->ent.name = q->name;
	q->ent.len = len;
	q->ent.id = (int64_t)id;
	if (kit_qtab_add(&s->qt, &q->ent) != 0) {
		free(q->name);
		free(q);
		return NULL;
	}
	q->cur.lo = q->cur.tail = LM_SEQ_START;
	if (id > s->max_qid)
		s->max_qid = id;
	return q;
}

static void
qtab_remove(struct lstore *s, struct saker_queue *q)
{
	kit_qtab_remove(&s->qt, &q->ent);
	free(q->name);
	free(q);
}

/* The existing queue with id `id`, or NULL. */
static struct saker_queue *
qtab_by_id(struct lstore *s, uint64_t id)
{
	struct kit_qent *e = kit_qtab_by_id(&s->qt, (int64_t)id);

	return e != NULL && LQ(e)->cur.exists ? LQ(e) : NULL;
}

/* About to change q in this batch: remember its committed state. */
static void
q_change(struct lstore *s, struct saker_queue *q)
{
	if (!q->dirty) {
		q->saved = q->cur;
		q->dirty = true;
		q->dirty_next = s->dirty;
		s->dirty = q;
	}
	q->cur.exists = true;
}

/* ---------------------------------------------------------------------
 * The journal: every change to the batch txn is recorded as it is made,
 * so the batch can be replayed on top of the last checkpoint.  The
 * recorders return an LMDB-style code; a failure fails the operation.
 * --------------------------------------------------------------------- */

/* Record a put of k = v or, with v NULL, a delete of k, in db `db`. */
static int
jr_rec(struct lstore *s, int db, const void *k, size_t klen, const void *v,
    size_t vlen)
{
	size_t hdr = v != NULL ? 8 : 4;
	unsigned char *p;

	if (klen > UINT16_MAX || vlen > UINT32_MAX)
		return MDB_BAD_VALSIZE;
	if (lj_reserve(&s->lt.j, hdr + klen + vlen, &p) != 0)
		return ENOMEM;
	p[0] = v != NULL ? JR_PUT : JR_DEL;
	p[1] = (unsigned char)db;
	saker_put_be16(p + 2, (uint16_t)klen);
	if (v != NULL)
		saker_put_be32(p + 4, (uint32_t)vlen);
	memcpy(p + hdr, k, klen);
	if (vlen > 0)
		memcpy(p + hdr + klen, v, vlen);
	return 0;
}

/* The record at `fk` in db `from` moved to `tk` in db `to`, losing its
 * first `skip` bytes, with its state byte set to `state` and, when `bump`,
 * one more delivery counted (byte 5: journals written before format 4
 * have 0 there). */
static int
jr_move(struct lstore *s, int from, const void *fk, size_t skip, int to,
    const void *tk, int state, bool bump)
{
	unsigned char *p;

	if (lj_reserve(&s->lt.j, 8 + 2 * LM_KEY, &p) != 0)
		return ENOMEM;
	memset(p, 0, 8);
	p[0] = JR_MOVE;
	p[1] = (unsigned char)from;
	p[2] = (unsigned char)to;
	p[3] = (unsigned char)skip;
	p[4] = (unsigned char)state;
	p[5] = bump ? 1 : 0;
	memcpy(p + 8, fk, LM_KEY);
	memcpy(p + 8 + LM_KEY, tk, LM_KEY);
	return 0;
}

static int
jr_delq(struct lstore *s, int op, int db, uint64_t qid)
{
	unsigned char *p;

	if (lj_reserve(&s->lt.j, 16, &p) != 0)
		return ENOMEM;
	memset(p, 0, 8);
	p[0] = (unsigned char)op;
	p[1] = (unsigned char)db;
	saker_put_be64(p + 8, qid);
	return 0;
}

/* Delete the record at cursor c (of db `db`) and journal it. */
static int
cur_del(struct lstore *s, MDB_cursor *c, int db)
{
	unsigned char kb[512];
	MDB_val k, v;
	int rc;

	if ((rc = mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT)) != 0)
		return rc;
	if (k.mv_size > sizeof(kb))
		return LM_EBADVAL;
	memcpy(kb, k.mv_data, k.mv_size);
	if ((rc = mdb_cursor_del(c, 0)) != 0)
		return rc;
	return jr_rec(s, db, kb, k.mv_size, NULL, 0);
}

/* Delete every record of queue q from `dbi` (keys that start with qid:
 * (qid, seq), (qid, id), (qid, expires, id)). */
static int
del_prefix(MDB_txn *t, MDB_dbi dbi, uint64_t qid, bool *wrote)
{
	unsigned char kb[8];
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	if ((rc = mdb_cursor_open(t, dbi, &c)) != 0)
		return rc;
	for (;;) {
		saker_put_be64(kb, qid);
		k = (MDB_val){ .mv_size = 8, .mv_data = kb };
		rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (rc == MDB_NOTFOUND || (rc == 0 && (k.mv_size < 8 ||
		    saker_get_be64(k.mv_data) != qid))) {
			rc = 0;
			break;
		}
		if (rc != 0 || (rc = mdb_cursor_del(c, 0)) != 0)
			break;
		*wrote = true;
	}
	mdb_cursor_close(c);
	return rc;
}

/* Delete every delayed item of queue q: a scan, but delete and flush are
 * rare and the scan is skipped when the queue has none. */
static int
del_delayed(MDB_txn *t, MDB_dbi dbi, uint64_t qid, bool *wrote)
{
	unsigned char kb[LM_KEY];
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	if ((rc = mdb_cursor_open(t, dbi, &c)) != 0)
		return rc;
	rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	while (rc == 0) {
		if (v.mv_size < 8 + LM_HDR || k.mv_size != LM_KEY) {
			rc = LM_EBADVAL;
			break;
		}
		if (saker_get_be64(v.mv_data) != qid) {
			rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
			continue;
		}
		memcpy(kb, k.mv_data, LM_KEY);
		if ((rc = mdb_cursor_del(c, 0)) != 0)
			break;
		*wrote = true;
		/* Re-seek rather than trust the cursor position after a delete. */
		k = (MDB_val){ .mv_size = LM_KEY, .mv_data = kb };
		rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Replay a move: copy, then delete the source. */
static int
jr_apply_move(MDB_txn *t, MDB_dbi from, MDB_val *fk, size_t skip, MDB_dbi to,
    MDB_val *tk, int state, bool bump)
{
	unsigned char *dst;
	MDB_val v, dv;
	int rc;

	if ((rc = mdb_get(t, from, fk, &v)) != 0)
		return rc == MDB_NOTFOUND ? LM_EBADVAL : rc;
	if (v.mv_size < skip + LM_HDR)
		return LM_EBADVAL;
	dv.mv_size = v.mv_size - skip;
	if ((rc = mdb_put(t, to, tk, &dv, MDB_RESERVE)) != 0)
		return rc;
	/* the reservation may have moved the source: fetch it again */
	if ((rc = mdb_get(t, from, fk, &v)) != 0)
		return rc == MDB_NOTFOUND ? LM_EBADVAL : rc;
	dst = dv.mv_data;
	memcpy(dst, (unsigned char *)v.mv_data + skip, dv.mv_size);
	dst[0] = (unsigned char)state;
	if (bump)
		hdr_bump(dst);
	return mdb_del(t, from, fk, NULL);
}

/* Apply one journal record (a batch) to ptxn.  Returns an LMDB code. */
static int
jr_apply(void *arg, const unsigned char *p, size_t len)
{
	struct lstore *s = arg;
	const unsigned char *end = p + len;
	MDB_val k, v, k2;
	size_t klen, vlen;
	bool wrote;
	int rc = 0, db, db2;

	while (rc == 0 && p < end) {
		if ((size_t)(end - p) < 4)
			return LM_EBADVAL;
		db = p[1];
		if (db >= LD_COUNT)
			return LM_EBADVAL;
		switch (p[0]) {
		case JR_PUT:
			if ((size_t)(end - p) < 8)
				return LM_EBADVAL;
			klen = saker_get_be16(p + 2);
			vlen = saker_get_be32(p + 4);
			if ((size_t)(end - p) - 8 < klen ||
			    (size_t)(end - p) - 8 - klen < vlen)
				return LM_EBADVAL;
			k.mv_data = (void *)(p + 8);
			k.mv_size = klen;
			v.mv_data = (void *)(p + 8 + klen);
			v.mv_size = vlen;
			rc = mdb_put(s->ptxn, s->dbi[db], &k, &v, 0);
			p += 8 + klen + vlen;
			break;
		case JR_DEL:
			klen = saker_get_be16(p + 2);
			if ((size_t)(end - p) - 4 < klen)
				return LM_EBADVAL;
			k.mv_data = (void *)(p + 4);
			k.mv_size = klen;
			rc = mdb_del(s->ptxn, s->dbi[db], &k, NULL);
			p += 4 + klen;
			break;
		case JR_MOVE:
			if ((size_t)(end - p) < 8 + 2 * LM_KEY ||
			    (db2 = p[2]) >= LD_COUNT)
				return LM_EBADVAL;
			k.mv_data = (void *)(p + 8);
			k.mv_size = LM_KEY;
			k2.mv_data = (void *)(p + 8 + LM_KEY);
			k2.mv_size = LM_KEY;
			if (p[5] > 1)
				return LM_EBADVAL;
			rc = jr_apply_move(s->ptxn, s->dbi[db], &k, p[3],
			    s->dbi[db2], &k2, p[4], p[5] == 1);
			p += 8 + 2 * LM_KEY;
			break;
		case JR_DELQ:
		case JR_DELDQ:
			if ((size_t)(end - p) < 16)
				return LM_EBADVAL;
			if (p[0] == JR_DELQ)
				rc = del_prefix(s->ptxn, s->dbi[db], saker_get_be64(p + 8),
				    &wrote);
			else
				rc = del_delayed(s->ptxn, s->dbi[LD_DELAYED],
				    saker_get_be64(p + 8), &wrote);
			p += 16;
			break;
		default:
			return LM_EBADVAL;
		}
	}
	return rc;
}

/* ---------------------------------------------------------------------
 * Transactions
 * --------------------------------------------------------------------- */

/* Grow the map while no transaction is open, before it can run full. */
static void
lm_grow(struct lstore *s)
{
	MDB_envinfo ei;
	uint64_t used;
	size_t size;

	if (mdb_env_info(s->env, &ei) != 0)
		return;
	used = ((uint64_t)ei.me_last_pgno + 1) * s->psize;
	size = ei.me_mapsize;
	while (used * 100 > (uint64_t)size * LM_GROW_PCT && size < SIZE_MAX / 2)
		size *= 2;
	if (size != ei.me_mapsize && mdb_env_set_mapsize(s->env, size) != 0)
		size = ei.me_mapsize;	/* ops run nested, then fail EFULL */
	s->mapsize = size;
	s->base_pages = (uint64_t)ei.me_last_pgno + 1;
}

static void lm_reload(struct lstore *, const char *);
static void lm_flight_wait(struct lstore *);

/* Abort the batch and put every queue back as of the last commit.  The
 * batch ran in the long transaction, so when it wrote anything that
 * transaction is rebuilt from the last checkpoint and the journal. */
static void
lm_rollback(struct lstore *s)
{
	struct saker_queue *q, *next;

	if (s->touched && !s->stale)
		lm_flight_wait(s);	/* the rebuild below needs its result */
	if (s->txn != NULL && s->txn != s->ptxn)
		mdb_txn_abort(s->txn);	/* a read txn */
	s->txn = NULL;
	lj_cut(&s->lt.j, 0);
	if (s->touched && !s->stale) {
		s->touched = false;
		lm_reload(s, "a batch failed");
	}
	for (q = s->dirty; q != NULL; q = next) {
		next = q->dirty_next;
		q->cur = q->saved;
		/* the layer counts q's ids again at their next use: a delete
		 * undone brings back ids it may have counted as gone */
		q->base.ids_known = false;
		q->dirty = false;
		q->deleted = false;
		q->dirty_next = NULL;
	}
	s->dirty = NULL;
}

static int
lm_refuse(struct lstore *s)
{
	if (s->read_only)
		return seterr(s, SAKER_EREADONLY, "lmdb %s: store opened read-only",
		    s->dir);
	if (s->broken)
		return seterr(s, SAKER_EREADONLY, "lmdb %s: store is read-only "
		    "after a failed write: %s", s->dir, s->broken_msg);
	if (s->lost)
		return seterr(s, s->lost, "lmdb %s: this batch was rolled back "
		    "(%s); it ends at the next commit", s->dir,
		    saker_strerror(s->lost));
	return SAKER_OK;
}

static uint64_t
pages_for(const struct lstore *s, size_t bytes)
{
	return (bytes + s->psize - 1) / s->psize + 4;
}

/* Begin the long transaction (no transaction may be open). */
static int
lm_begin_long(struct lstore *s)
{
	int rc;

	lm_grow(s);
	rc = mdb_txn_begin(s->env, NULL, 0, &s->ptxn);
	if (rc != 0) {
		s->ptxn = NULL;
		return lm_fail(s, rc, "begin transaction");
	}
	s->est_pages = pages_for(s, s->lt.j.off);
	return SAKER_OK;
}

/*
 * Make sure a transaction is open: the long transaction, which every batch
 * runs in; or a read txn when the store was opened read-only (or failed
 * before a long transaction existed).  A broken store still reads from its
 * long transaction, which holds every batch acknowledged before the
 * failure.
 */
static int
lm_begin(struct lstore *s, bool write)
{
	int rc;

	if (write && (rc = lm_refuse(s)) != SAKER_OK)
		return rc;
	if (s->stale)
		return seterr(s, SAKER_EIO, "lmdb %s: store failed and must be "
		    "reopened: %s", s->dir, s->broken_msg);
	if (s->txn != NULL)
		return SAKER_OK;
	if (s->ptxn == NULL && !s->read_only && !s->broken &&
	    (rc = lm_begin_long(s)) != SAKER_OK)
		return rc;
	if (s->ptxn == NULL) {
		rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &s->txn);
		if (rc != 0) {
			s->txn = NULL;
			return lm_fail(s, rc, "begin transaction");
		}
		s->txn_write = false;
	} else {
		s->txn = s->ptxn;
		s->txn_write = !s->read_only && !s->broken;
	}
	s->txn_dirty = false;
	s->touched = false;
	return SAKER_OK;
}

/*
 * Begin one write operation expected to add about `bytes` of records.
 * While the map is comfortably large the operation runs in the batch txn
 * itself.  Near the guard line it runs in a nested txn, so that a
 * MDB_MAP_FULL fails only this operation and not the whole batch.
 */
static int
op_begin(struct lstore *s, size_t bytes, MDB_txn **t)
{
	int rc;

	*t = NULL;
	if ((rc = lm_begin(s, true)) != SAKER_OK)
		return rc;
	s->est_pages += pages_for(s, bytes);
	if ((s->base_pages + s->est_pages) * s->psize * 100 <=
	    (uint64_t)s->mapsize * LM_GUARD_PCT) {
		*t = s->txn;
		s->touched = true;
		return SAKER_OK;
	}
	rc = mdb_txn_begin(s->env, s->txn, 0, t);
	if (rc != 0) {
		*t = NULL;
		return lm_fail(s, rc, "begin nested transaction");
	}
	s->jmark = s->lt.j.len;
	return SAKER_OK;
}

/*
 * End an operation begun by op_begin with LMDB result `rc`; `wrote` says
 * whether it changed anything.  Returns an LMDB code.  A failure inside a
 * nested txn leaves the batch intact.  A failure in the batch txn itself
 * poisons it (LMDB marks it broken), so the whole batch is rolled back and
 * commit() will report it.
 */
static int
op_end(struct lstore *s, MDB_txn *t, int rc, bool wrote)
{
	if (t == NULL)
		return rc;
	if (t != s->txn) {
		if (rc == 0 && wrote)
			rc = mdb_txn_commit(t);
		else
			mdb_txn_abort(t);
		if (rc == 0 && wrote)
			s->txn_dirty = s->touched = true;
		else
			lj_cut(&s->lt.j, s->jmark);	/* its records too */
		return rc;
	}
	if (rc == 0) {
		if (wrote)
			s->txn_dirty = true;
		return 0;
	}
	if (rc == MDB_NOTFOUND || rc == MDB_KEYEXIST || rc == MDB_BAD_VALSIZE)
		return rc;	/* these leave the txn usable */
	lm_rollback(s);
	s->lost = maperr(rc);
	return rc;
}

/* Delete record `key` (LM_KEY bytes) of db `db` and journal it, as an
 * operation of its own.  A saker_err; `what` names it in a failure. */
static int
op_del(struct lstore *s, int db, unsigned char *key, const char *what)
{
	MDB_val k = { .mv_size = LM_KEY, .mv_data = key };
	MDB_txn *t;
	int rc;

	if ((rc = op_begin(s, 0, &t)) != SAKER_OK)
		return rc;
	rc = mdb_del(t, s->dbi[db], &k, NULL);
	if (rc == 0)
		rc = jr_rec(s, db, key, LM_KEY, NULL, 0);
	if ((rc = op_end(s, t, rc, true)) != 0)
		return lm_fail(s, rc, what);
	return SAKER_OK;
}

/* ---------------------------------------------------------------------
 * Commit and sync
 * --------------------------------------------------------------------- */

/* Meta record `key`: read it into *v, or write it (n bytes at val).  An
 * LMDB code. */
static int
meta_get(struct lstore *s, MDB_txn *t, const char *key, MDB_val *v)
{
	MDB_val k = { strlen(key), (void *)(uintptr_t)key };

	return mdb_get(t, s->dbi[LD_META], &k, v);
}

static int
meta_put(struct lstore *s, MDB_txn *t, const char *key, const void *val,
    size_t n)
{
	MDB_val k = { strlen(key), (void *)(uintptr_t)key };
	MDB_val v = { n, (void *)(uintptr_t)val };

	return mdb_put(t, s->dbi[LD_META], &k, &v, 0);
}

/* Put meta record `key` = v into the batch (journalled) or, with
 * !journal, straight into the long txn. */
static int
meta_put64(struct lstore *s, const char *key, uint64_t val, bool journal)
{
	unsigned char num[8];
	int rc;

	saker_put_be64(num, val);
	rc = meta_put(s, journal ? s->txn : s->ptxn, key, num, 8);
	if (rc == 0 && journal)
		rc = jr_rec(s, LD_META, key, strlen(key), num, 8);
	return rc;
}

static int
lm_write_state(struct lstore *s)
{
	struct saker_queue *q;
	unsigned char rec[LM_QREC];
	MDB_val k, v;
	int rc;

	for (q = s->dirty; q != NULL; q = q->dirty_next) {
		k.mv_data = q->name;
		k.mv_size = q->ent.len;
		if (q->cur.exists) {
			qrec_io(rec, q, true);
			v.mv_data = rec;
			v.mv_size = sizeof(rec);
			rc = mdb_put(s->txn, s->dbi[LD_QUEUES], &k, &v, 0);
			if (rc == 0)
				rc = jr_rec(s, LD_QUEUES, k.mv_data, k.mv_size,
				    rec, sizeof(rec));
		} else if (q->saved.exists) {
			rc = mdb_del(s->txn, s->dbi[LD_QUEUES], &k, NULL);
			if (rc == 0)
				rc = jr_rec(s, LD_QUEUES, k.mv_data, k.mv_size,
				    NULL, 0);
		} else {
			rc = 0;
		}
		if (rc != 0 && rc != MDB_NOTFOUND)
			return rc;
	}
	if (s->next_qid != s->saved_next_qid &&
	    (rc = meta_put64(s, "next_qid", s->next_qid, true)) != 0)
		return rc;
	if (s->next_arrival != s->saved_next_arrival &&
	    (rc = meta_put64(s, "next_arrival", s->next_arrival, true)) != 0)
		return rc;
	return 0;
}

/*
 * Did a commit fail because the disk (or a size limit) is full?  LMDB
 * reports a short write as EIO, and a full disk usually shows up as one,
 * so an EIO is examined: little free space or a file size limit close to
 * the data file's size means "full", which leaves the store writable;
 * anything else is treated as a real I/O error.
 */
static bool
commit_full(struct lstore *s, int rc)
{
	uint64_t need = (s->est_pages + 16) * s->psize + (1u << 20);
	mdb_filehandle_t fd;
	struct statvfs vfs;
	struct rlimit rl;
	struct stat sb;

	if (maperr(rc) == SAKER_EFULL)
		return true;
	if (rc != EIO)
		return false;
	if (statvfs(s->dir, &vfs) == 0 &&
	    (uint64_t)vfs.f_bavail * vfs.f_frsize < need)
		return true;
	if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    mdb_env_get_fd(s->env, &fd) == 0 && fstat(fd, &sb) == 0 &&
	    (uint64_t)sb.st_size + need >= (uint64_t)rl.rlim_cur)
		return true;
	return false;
}

/*
 * The long transaction for the engine (longtxn.h): LMDB's mechanism under
 * its checkpoint policy.
 */
static int
lt_begin(void *arg)
{
	struct lstore *s = arg;

	s->begin_err = lm_begin_long(s);
	if (s->begin_err != SAKER_OK)
		snprintf(s->lt.err, sizeof(s->lt.err), "%.*s",
		    (int)sizeof(s->lt.err) - 1, s->err);
	return s->begin_err;
}

static void
lt_abort(void *arg)
{
	struct lstore *s = arg;

	if (s->txn != NULL && s->txn != s->ptxn)
		mdb_txn_abort(s->txn);	/* a read txn */
	s->txn = NULL;
	if (s->ptxn != NULL)
		mdb_txn_abort(s->ptxn);
	s->ptxn = NULL;
}

/* LMDB's own commit (synced, except with --sync never) with "journal_seq"
 * = seq.  Running out of room (disk, map, memory) is not fatal: the store
 * stays writable and the checkpoint is tried again later; any other
 * failure makes it read-only, as a failed commit always did. */
static int
lt_commit(void *arg, uint64_t seq, bool *fatal)
{
	struct lstore *s = arg;
	int rc;

	rc = meta_put64(s, "journal_seq", seq, false);
	if (rc == 0)
		rc = mdb_txn_commit(s->ptxn);
	else
		mdb_txn_abort(s->ptxn);
	s->ptxn = NULL;
	*fatal = rc != 0 && !commit_full(s, rc) && rc != ENOMEM;
	return rc;
}

static const struct ltx_ops lm_ltx_ops = {
	.begin = lt_begin,
	.apply = jr_apply,
	.commit = lt_commit,
	.abort = lt_abort,
};

/*
 * Rebuild the long transaction (ltx_rebuild()).  When even that fails the
 * store cannot serve what it acknowledged and refuses everything until it
 * is reopened (which replays the journal again).
 */
static void
lm_reload(struct lstore *s, const char *why)
{
	if (ltx_rebuild(&s->lt) == 0)
		return;
	s->broken = true;
	s->stale = true;
	snprintf(s->broken_msg, sizeof(s->broken_msg), "%s, then rebuilding "
	    "the transaction from the journal failed: %s", why, s->lt.err);
}

/* Time for a checkpoint?  The engine's rule, or the map needs to grow
 * (which LMDB can do only with no transaction open). */
static bool
ckpt_due(struct lstore *s)
{
	uint64_t now;

	if (s->ptxn == NULL || s->broken)
		return false;
	now = saker_mono_ns();
	if (ltx_due(&s->lt, now))
		return true;
	return now >= s->lt.hold_ns &&
	    (s->base_pages + s->est_pages) * s->psize * 100 >
	    (uint64_t)s->mapsize * LM_GROW_PCT;
}

/*
 * Checkpoint (ltx_checkpoint()): the long transaction into data.mdb, the
 * journal starts again.  A failure leaves every acknowledged batch in the
 * journal and the long transaction rebuilt from it.
 */
static int
lm_checkpoint(struct lstore *s)
{
	uint64_t made = s->lt.checkpoints, first = s->lt.ckpt_seq + 1;
	uint64_t last = s->lt.j.seq, bytes = s->lt.j.off;
	bool fatal, rebuilt;
	int rc;

	if (s->ptxn == NULL)
		return SAKER_OK;
	rc = ltx_checkpoint(&s->lt, &fatal, &rebuilt);
	s->st.commit_ns += s->lt.last_ns;
	if (log_get_level() >= LOG_LVL_DEBUG && last >= first) {
		MDB_envinfo ei;

		if (mdb_env_info(s->env, &ei) != 0)
			ei.me_last_pgno = 0;
		log_debug("lmdb checkpoint: %" PRIu64 " us (%s), journal %" PRIu64
		    " bytes, batches %" PRIu64 "..%" PRIu64 ", data.mdb pages "
		    "%zu, rc %d", s->lt.last_ns / 1000,
		    s->sync != SAKER_SYNC_NEVER ? "synced" : "not synced",
		    bytes, first, last, (size_t)ei.me_last_pgno + 1, rc);
	}
	if (rc == 0) {
		if (s->lt.checkpoints != made && s->sync != SAKER_SYNC_NEVER)
			s->st.fsyncs += 2;	/* data pages, then meta page */
		return SAKER_OK;
	}
	if (!rebuilt) {
		s->broken = true;
		s->stale = true;
		snprintf(s->broken_msg, sizeof(s->broken_msg), "checkpoint "
		    "failed, then rebuilding the transaction from the journal "
		    "failed: %s", s->lt.err);
	}
	if (!fatal)
		return seterr(s, maperr(rc) == SAKER_ENOMEM ? SAKER_ENOMEM :
		    SAKER_EFULL, "lmdb %s: checkpoint failed (%s); the journal "
		    "keeps every batch, trying again in %d ms", s->dir,
		    lm_strerror(rc), (int)(LTX_RETRY_NS / 1000000));
	if (!s->broken) {
		s->broken = true;
		snprintf(s->broken_msg, sizeof(s->broken_msg), "checkpoint: %s",
		    lm_strerror(rc));
	}
	return seterr(s, SAKER_EIO, "lmdb %s: checkpoint failed, store now "
	    "read-only: %s", s->dir, lm_strerror(rc));
}

/* commit(), or with `async` commit_start(): the record goes to the
 * journal's flush thread (*started) unless a checkpoint is due. */
static int
lm_commit_x(saker_store *ss, bool async, bool *started)
{
	struct lstore *s = (struct lstore *)ss;
	struct saker_queue *q, *next;
	uint64_t t0;
	int rc, code;

	if (s->lost) {
		code = s->lost;
		s->lost = 0;
		lm_rollback(s);
		return seterr(s, code, "lmdb %s: batch rolled back: %s", s->dir,
		    saker_strerror(code));
	}
	if (s->txn == NULL)
		goto done;
	if (s->txn != s->ptxn) {
		/* a read txn (read-only or failed store) */
		mdb_txn_abort(s->txn);
		s->txn = NULL;
		goto done;
	}
	if (!s->txn_write || (!s->txn_dirty && s->dirty == NULL &&
	    s->next_qid == s->saved_next_qid &&
	    s->next_arrival == s->saved_next_arrival)) {
		/* Nothing written: no I/O, no fsync. */
		s->txn = NULL;
		s->touched = false;
		lj_cut(&s->lt.j, 0);
		goto done;
	}
	t0 = saker_mono_ns();
	s->touched = true;
	if ((rc = lm_write_state(s)) != 0) {
		lm_rollback(s);
		if (commit_full(s, rc))
			return seterr(s, SAKER_EFULL, "lmdb %s: commit failed, batch "
			    "rolled back: storage full (%s)", s->dir,
			    lm_strerror(rc));
		return seterr(s, maperr(rc) == SAKER_ENOMEM ? SAKER_ENOMEM :
		    SAKER_EIO, "lmdb %s: commit failed, batch rolled back: %s",
		    s->dir, lm_strerror(rc));
	}
	/* A checkpoint must follow its batch before the next one gathers
	 * into the long transaction: that turn commits synchronously. */
	if (async && (s->sync != SAKER_SYNC_ALWAYS || s->no_async ||
	    ckpt_due(s)))
		async = false;
	if (async) {
		code = ltx_write_start(&s->lt);
		if (code == SAKER_EINVAL) {
			log_warn("lmdb %s: %s; committing synchronously", s->dir,
			    s->lt.err);
			s->no_async = true;
			async = false;
		} else if (code == SAKER_OK)
			*started = true;
	}
	if (!async)
		code = ltx_write(&s->lt, s->sync == SAKER_SYNC_ALWAYS);
	if (log_get_level() >= LOG_LVL_DEBUG && !*started &&
	    saker_mono_ns() - t0 >= 1000000)
		log_debug("lmdb journal record %" PRIu64 " (%s): %" PRIu64 " us",
		    s->lt.j.seq, s->sync == SAKER_SYNC_ALWAYS ? "fdatasync" :
		    "no sync", (saker_mono_ns() - t0) / 1000);
	if (code != SAKER_OK) {
		lm_rollback(s);	/* rebuilds the long txn without the batch */
		if (code == SAKER_EFULL || code == SAKER_ENOMEM)
			return seterr(s, code, "lmdb %s: commit failed, batch "
			    "rolled back: %s", s->dir, s->lt.err);
		if (!s->stale) {
			s->broken = true;
			snprintf(s->broken_msg, sizeof(s->broken_msg), "commit: %s",
			    s->lt.err);
		}
		return seterr(s, code, "lmdb %s: commit failed%s, store now "
		    "read-only: %s", s->dir, code == SAKER_EINDOUBT ? " and may "
		    "or may not have reached the disk" : ", batch rolled back",
		    s->lt.err);
	}
	for (q = s->dirty; q != NULL; q = next) {
		next = q->dirty_next;
		q->dirty = false;
		q->dirty_next = NULL;
		if (q->deleted)
			qtab_remove(s, q);
	}
	s->dirty = NULL;
	s->saved_next_qid = s->next_qid;
	s->saved_next_arrival = s->next_arrival;
	s->txn = NULL;
	s->touched = false;
	if (*started) {
		/* counted when its result comes (lm_flight_collect) */
		s->flight_t0 = t0;
		return SAKER_OK;
	}
	s->st.commits++;
	s->st.commit_ns += saker_mono_ns() - t0;
done:
	/* The batch is acknowledged whatever a checkpoint does: its
	 * failures are reported by the next batches. */
	if (ckpt_due(s) && s->txn == NULL)
		(void)lm_checkpoint(s);
	return SAKER_OK;
}

static int
lm_commit(saker_store *ss)
{
	bool started = false;

	return lm_commit_x(ss, false, &started);
}

static int
lm_commit_start(saker_store *ss, bool *started)
{
	*started = false;
	return lm_commit_x(ss, true, started);
}

/*
 * Collect the result of the batch in flight, waiting for it.  When its
 * write or fdatasync failed, the in-memory state already moved on (the
 * queues' saved state is the batch's, the next batch gathered in the long
 * transaction on top of it), so rather than unpick two batches the store
 * drops its long transaction and refuses every call, reads too, until
 * reopened: the journal then says what reached the disk.  A local store
 * refuses writes after a failed fsync anyway (store.h).
 */
static int
lm_flight_collect(struct lstore *s)
{
	int code;

	if (!s->lt.j.inflight)
		return SAKER_OK;
	code = ltx_write_finish(&s->lt);
	if (code == SAKER_OK) {
		s->st.commits++;
		s->st.commit_ns += saker_mono_ns() - s->flight_t0;
		return SAKER_OK;
	}
	s->touched = false;	/* no rebuild: the store is stale */
	s->stale = true;
	lm_rollback(s);
	lt_abort(s);
	s->broken = true;
	snprintf(s->broken_msg, sizeof(s->broken_msg), "commit: %s", s->lt.err);
	return seterr(s, code, "lmdb %s: commit failed%s, this batch and the "
	    "next rolled back, store must be reopened: %s", s->dir,
	    code == SAKER_EINDOUBT ? " and may or may not have reached the "
	    "disk" : "", s->lt.err);
}

/* Something must not run with a batch in flight (a rebuild of the long
 * transaction): wait for its result now and keep it for commit_finish(),
 * whose caller still waits for the descriptor. */
static void
lm_flight_wait(struct lstore *s)
{
	if (!s->lt.j.inflight)
		return;
	s->flight_rc = lm_flight_collect(s);
	s->flight_done = true;
	lj_flush_poke(&s->lt.j, true);
}

static int
lm_commit_fd(saker_store *ss)
{
	struct lstore *s = (struct lstore *)ss;

	return s->lt.j.inflight || s->flight_done ? ltx_flush_fd(&s->lt) : -1;
}

static int
lm_commit_finish(saker_store *ss)
{
	struct lstore *s = (struct lstore *)ss;

	if (s->flight_done) {
		s->flight_done = false;
		lj_flush_poke(&s->lt.j, false);
		return s->flight_rc;
	}
	return lm_flight_collect(s);
}

static int
lm_sync(saker_store *ss)
{
	struct lstore *s = (struct lstore *)ss;

	if (s->read_only || s->broken || s->sync != SAKER_SYNC_PERIODIC)
		return SAKER_OK;
	if (lj_sync(&s->lt.j) != 0) {
		s->broken = true;
		snprintf(s->broken_msg, sizeof(s->broken_msg), "%s", s->lt.j.err);
		return seterr(s, SAKER_EIO, "lmdb %s: fsync failed, store now "
		    "read-only: %s", s->dir, s->lt.j.err);
	}
	return SAKER_OK;
}

/* ---------------------------------------------------------------------
 * Queues
 * --------------------------------------------------------------------- */

static int
lm_queue_open(saker_store *ss, const char *name, size_t len, bool create,
    void *queue_ctx, saker_queue **out)
{
	struct lstore *s = (struct lstore *)ss;
	struct saker_queue *q;
	struct kit_qent *e;
	int rc;

	*out = NULL;
	if (name == NULL || len == 0 || len > (size_t)mdb_env_get_maxkeysize(s->env))
		return seterr(s, SAKER_EINVAL, "lmdb: bad queue name length %zu",
		    len);
	e = kit_qtab_by_name(&s->qt, name, len);
	q = e != NULL ? LQ(e) : NULL;
	if (q != NULL && q->cur.exists && !q->deleted) {
		if (queue_ctx != NULL)
			q->ctx = queue_ctx;
		*out = q;
		return SAKER_OK;
	}
	if (!create)
		return seterr(s, SAKER_ENOTFOUND, "no queue '%.*s'", (int)len, name);
	if ((rc = lm_begin(s, true)) != SAKER_OK)
		return rc;
	if (q == NULL) {
		q = qtab_add(s, name, len, s->next_qid);
		if (q == NULL)
			return seterr(s, SAKER_ENOMEM, "lmdb: out of memory");
		s->next_qid++;
	}
	/* New, or deleted / rolled back in this batch: start empty.  Its
	 * record is written at commit.  A struct reused keeps no id count
	 * of the layer's (its ids went with the delete). */
	q_change(s, q);
	memset(&q->cur, 0, sizeof(q->cur));
	memset(q->base.n, 0, sizeof(q->base.n));
	q->base.ids_known = false;
	q->base.dedup_hits = 0;
	q->cur.lo = q->cur.tail = LM_SEQ_START;
	q->cur.exists = true;
	q->deleted = false;
	q->ctx = queue_ctx;
	*out = q;
	return SAKER_OK;
}

/* Delete q's items, and with `ids` its deduplication ids (a delete; a
 * flush keeps them: store.h). */
static int
empty_queue(struct lstore *s, struct saker_queue *q, bool ids,
    const char *what)
{
	MDB_txn *t;
	bool wrote = false, wids = false;
	int rc;

	/* Deleting touches about one leaf page per few dozen records. */
	rc = op_begin(s, (q->cur.items + q->cur.open + q->cur.delayed) * 64, &t);
	if (rc != SAKER_OK)
		return rc;
	rc = del_prefix(t, s->dbi[LD_ITEMS], q->id, &wrote);
	if (rc == 0)
		rc = del_prefix(t, s->dbi[LD_OPEN], q->id, &wrote);
	if (rc == 0 && q->cur.delayed > 0)
		rc = del_delayed(t, s->dbi[LD_DELAYED], q->id, &wrote);
	if (rc == 0 && wrote)
		rc = jr_delq(s, JR_DELQ, LD_ITEMS, q->id);
	if (rc == 0 && wrote)
		rc = jr_delq(s, JR_DELQ, LD_OPEN, q->id);
	if (rc == 0 && wrote && q->cur.delayed > 0)
		rc = jr_delq(s, JR_DELDQ, LD_DELAYED, q->id);
	if (rc == 0 && ids)
		rc = del_prefix(t, s->dbi[LD_DEDUP], q->id, &wids);
	if (rc == 0 && wids)
		rc = del_prefix(t, s->dbi[LD_DEDUPX], q->id, &wids);
	if (rc == 0 && wids)
		rc = jr_delq(s, JR_DELQ, LD_DEDUP, q->id);
	if (rc == 0 && wids)
		rc = jr_delq(s, JR_DELQ, LD_DEDUPX, q->id);
	if ((rc = op_end(s, t, rc, wrote || wids)) != 0)
		return lm_fail(s, rc, what);
	q_change(s, q);
	q->cur.items = q->cur.bytes = q->cur.delayed = q->cur.open = 0;
	return SAKER_OK;
}

static int
lm_queue_delete(saker_store *ss, saker_queue *q)
{
	struct lstore *s = (struct lstore *)ss;
	int rc;

	if (q == NULL || !q->cur.exists)
		return seterr(s, SAKER_ENOTFOUND, "lmdb: no such queue");
	if ((rc = empty_queue(s, q, true, "delete queue")) != SAKER_OK)
		return rc;
	q->cur.exists = false;
	q->deleted = true;
	q->ctx = NULL;
	return SAKER_OK;
}

static int
lm_queue_flush(saker_store *ss, saker_queue *q)
{
	struct lstore *s = (struct lstore *)ss;

	if (q == NULL)
		return seterr(s, SAKER_EINVAL, "lmdb: no queue");
	if (!q->cur.exists)
		return SAKER_OK;
	return empty_queue(s, q, false, "flush queue");
}

static int
lm_queues(saker_store *ss, saker_queue_name_fn fn, void *arg)
{
	struct lstore *s = (struct lstore *)ss;
	struct saker_queue *q;
	struct kit_qent *e;
	size_t i;
	int r;

	for (e = kit_qtab_next(&s->qt, &i, NULL); e != NULL;
	    e = kit_qtab_next(&s->qt, &i, e)) {
		q = LQ(e);
		if (!q->cur.exists || q->deleted)
			continue;
		if ((r = fn(arg, q->name, q->ent.len)) != 0)
			return r;
	}
	return SAKER_OK;
}

static int
lm_queue_stats(saker_store *ss, saker_queue *q, struct saker_queue_stats *st)
{
	struct lstore *s = (struct lstore *)ss;
	struct saker_item it;
	unsigned char kb[LM_KEY];
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	memset(st, 0, sizeof(*st));
	if (q == NULL || !q->cur.exists)
		return seterr(s, SAKER_ENOTFOUND, "lmdb: no such queue");
	st->items = q->cur.items;
	st->bytes = q->cur.bytes;
	st->delayed_items = q->cur.delayed;
	st->open_items = q->cur.open;
	st->total_items = q->cur.total;
	st->expired_items = q->cur.expired;
	st->expired_to = q->expired_to;
	if (q->cur.items == 0)
		return SAKER_OK;
	if ((rc = lm_begin(s, false)) != SAKER_OK)
		return rc;
	if ((rc = mdb_cursor_open(s->txn, s->dbi[LD_ITEMS], &c)) != 0)
		return lm_fail(s, rc, "queue stats");
	k = mkkey(kb, q->id, 0);
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	if (rc == 0 && key_in(&k, q->id) && hdr_read(v.mv_data, v.mv_size, &it) == 0)
		st->head_created_ms = it.created_ms;
	mdb_cursor_close(c);
	return SAKER_OK;
}

/* ---------------------------------------------------------------------
 * Items
 * --------------------------------------------------------------------- */

/* Reserve `size` bytes for record (qid, seq) in db (items or open); the
 * caller fills them.  At the tail of items, MDB_APPEND when the key can be
 * the largest in the database: keys of the newest queue are. */
static int
rec_reserve(struct lstore *s, MDB_txn *t, int db, struct saker_queue *q,
    uint64_t seq, size_t size, bool at_tail, unsigned char **dst)
{
	unsigned char kb[LM_KEY];
	MDB_val k, v;
	int rc = MDB_KEYEXIST;

	k = mkkey(kb, q->id, seq);
	v.mv_size = size;
	if (at_tail && db == LD_ITEMS && q->id >= s->max_qid)
		rc = mdb_put(t, s->dbi[LD_ITEMS], &k, &v,
		    MDB_RESERVE | MDB_APPEND);
	if (rc == MDB_KEYEXIST) {
		/* not the largest key after all (MDB_APPEND refuses without
		 * touching the txn): an ordinary insert */
		v.mv_size = size;
		rc = mdb_put(t, s->dbi[db], &k, &v, MDB_RESERVE);
	}
	*dst = v.mv_data;
	return rc;
}

/*
 * Move the record at cursor `c` (whose value starts `skip` bytes before the
 * item header) to (q, seq) in db `to`, and delete it from the cursor's
 * database: to items as a ready item, or to open (a take) as an open item
 * with one more delivery counted.  Returns an LMDB code.
 */
static int
move_rec(struct lstore *s, MDB_txn *t, MDB_cursor *c, int from, size_t skip,
    int to, struct saker_queue *q, uint64_t seq, bool at_tail, size_t *len)
{
	int state = to == LD_OPEN ? LM_STATE_OPEN : LM_STATE_READY;
	unsigned char *dst, fk[LM_KEY], tk[LM_KEY];
	MDB_val k, v;
	size_t size;
	int rc;

	if ((rc = mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT)) != 0)
		return rc;
	if (v.mv_size < skip + LM_HDR || k.mv_size != LM_KEY)
		return LM_EBADVAL;
	memcpy(fk, k.mv_data, LM_KEY);
	size = v.mv_size - skip;
	if ((rc = rec_reserve(s, t, to, q, seq, size, at_tail, &dst)) != 0)
		return rc;
	/* The reservation may have spilled dirty pages to disk, so fetch the
	 * source again before copying from it. */
	if ((rc = mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT)) != 0)
		return rc;
	if (v.mv_size != size + skip)
		return LM_EBADVAL;
	memcpy(dst, (unsigned char *)v.mv_data + skip, size);
	dst[0] = (unsigned char)state;
	if (to == LD_OPEN)
		hdr_bump(dst);
	*len = rec_datalen(dst, size);
	if ((rc = mdb_cursor_del(c, 0)) != 0)
		return rc;
	mkkey(tk, q->id, seq);
	return jr_move(s, from, fk, skip, to, tk, state, to == LD_OPEN);
}

static int
lm_put(saker_store *ss, saker_queue *q, const struct saker_item *item,
    int64_t now_ms)
{
	struct lstore *s = (struct lstore *)ss;
	unsigned char kb[LM_KEY], *rec;
	size_t skip, pre, size;
	int64_t created;
	bool ready;
	MDB_txn *t;
	MDB_val k, v;
	int rc;

	if (q == NULL || item == NULL || (item->len > 0 && item->data == NULL))
		return seterr(s, SAKER_EINVAL, "lmdb put: bad argument");
	if (item->len > LM_MAXDATA)
		return seterr(s, SAKER_EINVAL, "lmdb put: item of %zu bytes is "
		    "too large", item->len);
	if (item->attrs_len > SAKER_ATTRS_MAX ||
	    (item->attrs_len > 0 && item->attrs == NULL))
		return seterr(s, SAKER_EINVAL, "lmdb put: bad item attributes "
		    "(%zu bytes, at most %u)", item->attrs_len, SAKER_ATTRS_MAX);
	created = item->created_ms != 0 ? item->created_ms : now_ms;
	ready = item->due_ms <= now_ms;
	skip = ready ? 0 : 8;	/* a delayed record starts with the queue id */
	/* attributes, when there are any, between header and data: an item
	 * without any is the record it was before format 5 */
	pre = item->attrs_len > 0 ? 2 + item->attrs_len : 0;
	size = skip + LM_HDR + pre + item->len + LM_CRC;
	if ((rc = op_begin(s, size + 8, &t)) != SAKER_OK)
		return rc;
	if (ready) {
		mkkey(kb, q->id, q->cur.tail);
		rc = rec_reserve(s, t, LD_ITEMS, q, q->cur.tail, size, true,
		    &rec);
	} else {
		k = mkkey(kb, (uint64_t)item->due_ms, s->next_arrival);
		v.mv_size = size;
		rc = mdb_put(t, s->dbi[LD_DELAYED], &k, &v, MDB_RESERVE);
		rec = v.mv_data;
	}
	if (rc == 0) {
		if (!ready)
			saker_put_be64(rec, q->id);
		hdr_write(rec + skip, LM_STATE_READY, item->flags,
		    item->expires_ms, created, item->deliveries);
		if (pre > 0) {
			rec[skip + 1] |= LM_HF_ATTRS;
			saker_put_be16(rec + skip + LM_HDR,
			    (uint16_t)item->attrs_len);
			memcpy(rec + skip + LM_HDR + 2, item->attrs,
			    item->attrs_len);
		}
		if (item->len > 0)
			memcpy(rec + skip + LM_HDR + pre, item->data,
			    item->len);
		rec_seal(rec + skip, pre + item->len);
		rc = jr_rec(s, ready ? LD_ITEMS : LD_DELAYED, kb, LM_KEY, rec,
		    size);
	}
	if ((rc = op_end(s, t, rc, true)) != 0)
		return lm_fail(s, rc, "put");
	q_change(s, q);
	q->cur.total++;
	if (!ready) {
		s->next_arrival++;
		q->cur.delayed++;
		return SAKER_OK;
	}
	q->cur.tail++;
	q->cur.items++;
	q->cur.bytes += item->len;
	if (s->notify != NULL)
		s->notify(s->notify_arg, q, q->ctx);
	return SAKER_OK;
}

/* The size of the head ready item, to size a take(OPEN) (0 when none). */
static size_t
head_size(struct lstore *s, struct saker_queue *q)
{
	unsigned char kb[LM_KEY];
	MDB_cursor *c;
	MDB_val k, v;
	size_t n = 0;

	if (lm_begin(s, true) != SAKER_OK ||
	    mdb_cursor_open(s->txn, s->dbi[LD_ITEMS], &c) != 0)
		return 0;
	k = mkkey(kb, q->id, 0);
	if (mdb_cursor_get(c, &k, &v, MDB_SET_RANGE) == 0 && key_in(&k, q->id))
		n = v.mv_size;
	mdb_cursor_close(c);
	return n;
}

struct take_res {
	bool found, taken;
	bool expired;		/* the head expired: for expire_scan first */
	size_t len;
	int fnret;
	/* the head failed its checksum: a copy of it, to move aside */
	unsigned char *bad;
	size_t badsize;
	uint64_t badseq;
};

/* The body of take(), run in txn t.  Returns an LMDB code; MDB_NOTFOUND
 * when no visible item was found.  An expired head stops it (res->expired:
 * the caller removes it outside this operation, expire_scan) unless
 * `skip`: a read-only peek cannot remove it and passes it by. */
static int
take_in(struct lstore *s, MDB_txn *t, struct saker_queue *q, int mode,
    int64_t now_ms, bool skip, saker_item_fn fn, void *arg,
    struct take_res *res)
{
	unsigned char kb[LM_KEY];
	struct saker_item it;
	MDB_cursor *c;
	MDB_val k, v;
	uint64_t seq = 0;
	size_t len;
	int rc;

	if ((rc = mdb_cursor_open(t, s->dbi[LD_ITEMS], &c)) != 0)
		return rc;
	k = mkkey(kb, q->id, 0);
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	for (;;) {
		if (rc == 0 && !key_in(&k, q->id))
			rc = MDB_NOTFOUND;
		if (rc != 0)
			break;
		if ((rc = hdr_read(v.mv_data, v.mv_size, &it)) != 0)
			break;
		seq = saker_get_be64((unsigned char *)k.mv_data + 8);
		if (!expired(&it, now_ms))
			break;
		if (!skip) {
			res->expired = true;
			mdb_cursor_close(c);
			return 0;
		}
		rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	if (rc != 0) {
		mdb_cursor_close(c);
		return rc;
	}
	if (!rec_sound(v.mv_data, v.mv_size)) {
		/* never served: lm_take moves it aside */
		mdb_cursor_close(c);
		if ((res->bad = malloc(v.mv_size)) == NULL)
			return ENOMEM;
		memcpy(res->bad, v.mv_data, v.mv_size);
		res->badsize = v.mv_size;
		res->badseq = seq;
		return 0;
	}
	it.id = seq;
	it.state = SAKER_ITEM_READY;
	if (mode == SAKER_TAKE_OPEN) {
		/* fn sees the count with this hand-out */
		if (it.deliveries < SAKER_DELIVERIES_MAX)
			it.deliveries++;
	}
	res->found = true;
	res->len = it.len;
	res->fnret = fn(arg, &it);
	if (res->fnret != 0 || mode == SAKER_TAKE_PEEK) {
		mdb_cursor_close(c);
		return 0;
	}
	if (mode == SAKER_TAKE_OPEN) {
		rc = move_rec(s, t, c, LD_ITEMS, 0, LD_OPEN, q, seq, false,
		    &len);
	} else {
		mkkey(kb, q->id, seq);
		if ((rc = mdb_cursor_del(c, 0)) == 0)
			rc = jr_rec(s, LD_ITEMS, kb, LM_KEY, NULL, 0);
	}
	if (rc == 0)
		res->taken = true;
	mdb_cursor_close(c);
	return rc;
}

/*
 * The head of q failed its checksum (res->bad is a copy of the record).
 * The layer copies its bytes, as they are, to q's quarantine queue
 * (saker_store_quarantine()); then the record is deleted from q, in the
 * current batch: it is not lost and not served, and the next take sees
 * the next item.  Returns SAKER_ECORRUPT with the layer's message.
 */
static int
move_damaged(struct lstore *s, struct saker_queue *q, struct take_res *res,
    bool write, int64_t now_ms)
{
	unsigned char kb[LM_KEY];
	struct saker_item it;
	size_t len;
	int rc;

	/* its header may be what is damaged: keep the flags and the age,
	 * not the expiry (a moved item must not vanish) */
	memset(&it, 0, sizeof(it));
	len = res->badsize;
	it.data = res->bad;
	if (hdr_read(res->bad, res->badsize, &it) == 0) {
		it.expires_ms = 0;
		it.deliveries = 0;
		len = it.len;
	}
	it.len = len;
	rc = saker_store_quarantine(&s->base, q, q->name, q->ent.len,
	    res->badseq, write ? &it : NULL, now_ms, s->err, sizeof(s->err));
	free(res->bad);
	res->bad = NULL;
	if (rc != SAKER_OK)
		return SAKER_ECORRUPT;
	mkkey(kb, q->id, res->badseq);
	if ((rc = op_del(s, LD_ITEMS, kb, "take")) != SAKER_OK)
		return rc;
	q_change(s, q);
	q->cur.items--;
	q->cur.bytes -= q->cur.bytes < len ? q->cur.bytes : len;
	return SAKER_ECORRUPT;
}

/*
 * The expired record `key` of q in db (LD_ITEMS: ready; LD_DELAYED: its
 * value starts with the queue id): the layer routes it to q's expire_to
 * queue or drops it (saker_store_expired), then the record is deleted,
 * both in the batch.  Read here, in the batch txn, outside any operation:
 * the layer's put writes the same trees, so no cursor or view of the
 * caller's survives it.  A damaged record is dropped: its bytes cannot be
 * trusted.  An error leaves the item in place.
 */
static int
expire_one(struct lstore *s, struct saker_queue *q, int db,
    unsigned char *key, int64_t now_ms)
{
	MDB_val k = { .mv_size = LM_KEY, .mv_data = key }, v;
	size_t skip = db == LD_DELAYED ? 8 : 0, len;
	struct saker_item it;
	bool routed = false;
	int rc;

	if ((rc = mdb_get(s->txn, s->dbi[db], &k, &v)) == 0 &&
	    (v.mv_size < skip || hdr_read((unsigned char *)v.mv_data + skip,
	    v.mv_size - skip, &it) != 0))
		rc = LM_EBADVAL;
	if (rc != 0)
		return lm_fail(s, rc, "expire");
	len = it.len;
	/* it views the map until the next write: the layer copies it first */
	if (rec_sound((unsigned char *)v.mv_data + skip, v.mv_size - skip) &&
	    (rc = saker_store_expired(&s->base, q, &it, now_ms, &routed)) !=
	    SAKER_OK)
		return rc;
	if ((rc = op_del(s, db, key, "expire")) != SAKER_OK)
		return rc;
	q_change(s, q);
	if (db == LD_DELAYED) {
		q->cur.delayed--;
	} else {
		q->cur.items--;
		q->cur.bytes -= q->cur.bytes < len ? q->cur.bytes : len;
	}
	if (routed)
		q->expired_to++;
	else
		q->cur.expired++;
	return SAKER_OK;
}

/*
 * The next expired ready item of q from sequence *from on, looked for in
 * the batch txn without an operation (the usual take finds none and must
 * not pay for one): for take (`head`) only before the first live item,
 * for flush_expired among the first `limit` (0: all) counted in *seen.
 * *from and *seen move past what was looked at; *seq is the item found.
 */
static int
expired_next(struct lstore *s, struct saker_queue *q, int64_t now_ms,
    uint64_t limit, bool head, uint64_t *from, uint64_t *seen,
    uint64_t *seq, bool *found)
{
	unsigned char kb[LM_KEY];
	struct saker_item it;
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	*found = false;
	if ((rc = lm_begin(s, true)) != SAKER_OK)
		return rc;
	if ((rc = mdb_cursor_open(s->txn, s->dbi[LD_ITEMS], &c)) != 0)
		return lm_fail(s, rc, "expire");
	k = mkkey(kb, q->id, *from);
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && key_in(&k, q->id) && (limit == 0 || *seen < limit)) {
		(*seen)++;
		*seq = saker_get_be64((unsigned char *)k.mv_data + 8);
		*from = *seq + 1;
		if (hdr_read(v.mv_data, v.mv_size, &it) == 0 &&
		    expired(&it, now_ms)) {
			*found = true;
			break;
		}
		if (head)
			break;
		rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(c);
	if (rc != 0 && rc != MDB_NOTFOUND)
		return lm_fail(s, rc, "expire");
	return SAKER_OK;
}

/*
 * Without an expire_to target: q's expired ready items from sequence
 * `from` on (as expired_next() bounds them) are handed to the layer, which
 * has nowhere to put them and writes nothing, and deleted by one cursor in
 * one operation.  A damaged one is dropped without asking: its bytes
 * cannot be trusted.
 */
static int
expire_drop(struct lstore *s, struct saker_queue *q, int64_t now_ms,
    uint64_t limit, bool head, uint64_t from, uint64_t seen,
    uint64_t *removed)
{
	uint64_t n = 0, nbytes = 0;
	unsigned char kb[LM_KEY];
	struct saker_item it;
	MDB_cursor *c;
	MDB_txn *t;
	MDB_val k, v;
	bool routed;
	int rc, lrc;

	if ((rc = op_begin(s, 0, &t)) != SAKER_OK)
		return rc;
	if ((lrc = mdb_cursor_open(t, s->dbi[LD_ITEMS], &c)) != 0)
		return lm_fail(s, op_end(s, t, lrc, false), "expire");
	k = mkkey(kb, q->id, from);
	lrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	while (lrc == 0 && key_in(&k, q->id) && (limit == 0 || seen < limit)) {
		seen++;
		from = saker_get_be64((unsigned char *)k.mv_data + 8) + 1;
		if (hdr_read(v.mv_data, v.mv_size, &it) != 0 ||
		    !expired(&it, now_ms)) {
			if (head)
				break;
			lrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
			continue;
		}
		if (rec_sound(v.mv_data, v.mv_size) &&
		    (rc = saker_store_expired(&s->base, q, &it, now_ms,
		    &routed)) != SAKER_OK)
			break;
		if ((lrc = cur_del(s, c, LD_ITEMS)) != 0)
			break;
		n++;
		nbytes += it.len;
		k = mkkey(kb, q->id, from);
		lrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	}
	mdb_cursor_close(c);
	if ((lrc = op_end(s, t, lrc == MDB_NOTFOUND ? 0 : lrc, n > 0)) != 0)
		return lm_fail(s, lrc, "expire");
	if (n > 0) {
		q_change(s, q);
		q->cur.items -= n;
		q->cur.bytes -= q->cur.bytes < nbytes ? q->cur.bytes : nbytes;
		q->cur.expired += n;
	}
	if (removed != NULL)
		*removed += n;
	return rc;
}

/*
 * Remove q's expired ready items: for take (`head`) those before the first
 * live one, for flush_expired those among the first `limit` ready items
 * (0: all).  Every one, however many, each handed to the layer
 * (saker_store_expired); *removed (may be NULL) counts them.  With an
 * expire_to target each moves on its own (expire_one) and the look goes
 * on at the next key, so a live item is looked at once.
 */
static int
expire_scan(struct lstore *s, struct saker_queue *q, int64_t now_ms,
    uint64_t limit, bool head, uint64_t *removed)
{
	uint64_t seen = 0, from = 0, seq = 0;
	unsigned char kb[LM_KEY];
	bool found;
	int rc;

	for (;;) {
		if ((rc = expired_next(s, q, now_ms, limit, head, &from, &seen,
		    &seq, &found)) != SAKER_OK || !found)
			return rc;
		if (!saker_store_has_expire_to(q))	/* look at it again */
			return expire_drop(s, q, now_ms, limit, head, seq,
			    seen - 1, removed);
		mkkey(kb, q->id, seq);
		if ((rc = expire_one(s, q, LD_ITEMS, kb, now_ms)) != SAKER_OK)
			return rc;
		if (removed != NULL)
			(*removed)++;
	}
}

static int
lm_take(saker_store *ss, saker_queue *q, int mode, int64_t now_ms,
    saker_item_fn fn, void *arg)
{
	struct lstore *s = (struct lstore *)ss;
	struct take_res res;
	MDB_txn *t;
	bool write, swept = false;
	int rc;

	if (q == NULL || fn == NULL || mode < SAKER_TAKE_REMOVE ||
	    mode > SAKER_TAKE_PEEK)
		return seterr(s, SAKER_EINVAL, "lmdb take: bad argument");
	/* A read-only (or failed) store can still be peeked at; expired
	 * items are then skipped rather than removed. */
	write = !(mode == SAKER_TAKE_PEEK && (s->read_only || s->broken));
	for (;;) {
		if (q->cur.items == 0)
			return SAKER_EEMPTY;
		memset(&res, 0, sizeof(res));
		if (write) {
			rc = op_begin(s, mode == SAKER_TAKE_OPEN ?
			    head_size(s, q) : 0, &t);
			if (rc != SAKER_OK)
				return rc;
		} else {
			if ((rc = lm_begin(s, false)) != SAKER_OK)
				return rc;
			t = s->txn;
		}
		/* once expire_scan ran, what it left is passed by */
		rc = take_in(s, t, q, mode, now_ms, !write || swept, fn, arg,
		    &res);
		if (rc == MDB_NOTFOUND)
			rc = 0;
		if (write)
			rc = op_end(s, t, rc, res.taken);
		if (rc != 0) {
			free(res.bad);
			return lm_fail(s, rc, "take");
		}
		if (!res.expired)
			break;
		/* the head expired: it and those behind it go first, every
		 * one, then the take looks again */
		if ((rc = expire_scan(s, q, now_ms, 0, true, NULL)) != SAKER_OK)
			return rc;
		swept = true;
	}
	if (res.bad != NULL)
		return move_damaged(s, q, &res, write, now_ms);
	if (res.taken) {
		q_change(s, q);
		q->cur.items--;
		q->cur.bytes -= res.len;
		if (mode == SAKER_TAKE_OPEN)
			q->cur.open++;
	}
	if (!res.found)
		return SAKER_EEMPTY;
	return res.fnret;
}

static int
lm_confirm(saker_store *ss, saker_queue *q, uint64_t id)
{
	struct lstore *s = (struct lstore *)ss;
	unsigned char kb[LM_KEY];
	int rc;

	if (q == NULL)
		return seterr(s, SAKER_EINVAL, "lmdb confirm: no queue");
	if (q->cur.open == 0)
		return seterr(s, SAKER_ENOTFOUND, "no open item %" PRIu64, id);
	mkkey(kb, q->id, id);
	rc = op_del(s, LD_OPEN, kb, "confirm");
	if (rc == SAKER_ENOTFOUND)	/* MDB_NOTFOUND */
		return seterr(s, SAKER_ENOTFOUND, "no open item %" PRIu64, id);
	if (rc != SAKER_OK)
		return rc;
	q_change(s, q);
	q->cur.open--;
	return SAKER_OK;
}

/*
 * The open item (q, id) as the batch sees it, its record in *v (to size the
 * operation that moves it) and its key in kb; opens the batch.
 */
static int
lm_open_get(struct lstore *s, saker_queue *q, uint64_t id,
    unsigned char kb[LM_KEY], MDB_val *v, const char *what)
{
	MDB_val k;
	int rc;

	if (q->cur.open == 0)
		return seterr(s, SAKER_ENOTFOUND, "no open item %" PRIu64, id);
	if ((rc = lm_begin(s, true)) != SAKER_OK)
		return rc;
	k = mkkey(kb, q->id, id);
	rc = mdb_get(s->txn, s->dbi[LD_OPEN], &k, v);
	if (rc == MDB_NOTFOUND)
		return seterr(s, SAKER_ENOTFOUND, "no open item %" PRIu64, id);
	if (rc != 0)
		return lm_fail(s, rc, what);
	return SAKER_OK;
}

/*
 * Open item (q, id) back to the ready items of `to`: at the head when `to`
 * is q (a release), at the tail of another queue (a move).
 */
static int
open_to_ready(struct lstore *s, struct saker_queue *q, uint64_t id,
    struct saker_queue *to, const char *what)
{
	bool at_tail = to != q;
	unsigned char kb[LM_KEY];
	MDB_cursor *c = NULL;
	MDB_txn *t;
	MDB_val k, v;
	size_t len = 0;
	int rc;

	/* Look it up in the batch first, to size the operation. */
	if ((rc = lm_open_get(s, q, id, kb, &v, what)) != SAKER_OK)
		return rc;
	if ((rc = op_begin(s, v.mv_size, &t)) != SAKER_OK)
		return rc;
	k = mkkey(kb, q->id, id);
	if ((rc = mdb_cursor_open(t, s->dbi[LD_OPEN], &c)) == 0 &&
	    (rc = mdb_cursor_get(c, &k, &v, MDB_SET)) == 0)
		rc = move_rec(s, t, c, LD_OPEN, 0, LD_ITEMS, to, at_tail ?
		    to->cur.tail : to->cur.lo - 1, at_tail, &len);
	if (c != NULL)
		mdb_cursor_close(c);
	if ((rc = op_end(s, t, rc, true)) != 0)
		return lm_fail(s, rc, what);
	q_change(s, q);
	q->cur.open--;
	q_change(s, to);
	if (at_tail) {
		to->cur.tail++;
		to->cur.total++;
	} else {
		to->cur.lo--;
	}
	to->cur.items++;
	to->cur.bytes += len;
	if (s->notify != NULL)
		s->notify(s->notify_arg, to, to->ctx);
	return SAKER_OK;
}

static int
lm_release(saker_store *ss, saker_queue *q, uint64_t id)
{
	struct lstore *s = (struct lstore *)ss;

	if (q == NULL)
		return seterr(s, SAKER_EINVAL, "lmdb release: no queue");
	return open_to_ready(s, q, id, q, "release");
}

/*
 * Open item (q, id) into the delayed set at (due, next arrival): the
 * delayed record is the queue id and the open record (state READY, its
 * delivery count and checksum as they are).  Journalled as a put and a
 * delete: a move cannot grow a record by the queue id.
 */
static int
lm_release_delayed(saker_store *ss, saker_queue *q, uint64_t id,
    int64_t due_ms, int64_t now_ms)
{
	struct lstore *s = (struct lstore *)ss;
	unsigned char kb[LM_KEY], dk[LM_KEY], *dst;
	MDB_txn *t;
	MDB_val k, v, dv;
	int rc;

	if (due_ms <= now_ms)
		return lm_release(ss, q, id);
	if (q == NULL)
		return seterr(s, SAKER_EINVAL, "lmdb release: no queue");
	if ((rc = lm_open_get(s, q, id, kb, &v, "release")) != SAKER_OK)
		return rc;
	if ((rc = op_begin(s, 2 * (8 + v.mv_size), &t)) != SAKER_OK)
		return rc;
	k = mkkey(dk, (uint64_t)due_ms, s->next_arrival);
	dv.mv_size = 8 + v.mv_size;
	rc = mdb_put(t, s->dbi[LD_DELAYED], &k, &dv, MDB_RESERVE);
	if (rc == 0) {
		/* the reservation may have moved the source: fetch it again */
		k.mv_data = kb;
		rc = mdb_get(t, s->dbi[LD_OPEN], &k, &v);
	}
	if (rc == 0 && (v.mv_size + 8 != dv.mv_size || v.mv_size < LM_HDR))
		rc = LM_EBADVAL;
	if (rc == 0) {
		dst = dv.mv_data;
		saker_put_be64(dst, q->id);
		memcpy(dst + 8, v.mv_data, v.mv_size);
		dst[8] = LM_STATE_READY;
		rc = jr_rec(s, LD_DELAYED, dk, LM_KEY, dst, dv.mv_size);
	}
	if (rc == 0)
		rc = mdb_del(t, s->dbi[LD_OPEN], &k, NULL);
	if (rc == 0)
		rc = jr_rec(s, LD_OPEN, kb, LM_KEY, NULL, 0);
	if ((rc = op_end(s, t, rc, true)) != 0) {
		if (rc == MDB_NOTFOUND)
			return seterr(s, SAKER_ENOTFOUND, "no open item %"
			    PRIu64, id);
		return lm_fail(s, rc, "release");
	}
	q_change(s, q);
	s->next_arrival++;
	q->cur.open--;
	q->cur.delayed++;
	return SAKER_OK;
}

static int
lm_move(saker_store *ss, saker_queue *q, uint64_t id, saker_queue *to)
{
	struct lstore *s = (struct lstore *)ss;

	if (q == NULL || to == NULL || to == q || !to->cur.exists || to->deleted)
		return seterr(s, SAKER_EINVAL, "lmdb move: bad argument");
	return open_to_ready(s, q, id, to, "move");
}

/* The first delayed record in txn t: its due time and size.  Returns an
 * LMDB code (MDB_NOTFOUND when there is none). */
static int
delayed_first(struct lstore *s, MDB_txn *t, int64_t *due, size_t *size)
{
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	if ((rc = mdb_cursor_open(t, s->dbi[LD_DELAYED], &c)) != 0)
		return rc;
	rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	if (rc == 0 && k.mv_size != LM_KEY)
		rc = LM_EBADVAL;
	if (rc == 0 && is_sentinel(&k, 0xff))
		rc = MDB_NOTFOUND;
	if (rc == 0) {
		*due = (int64_t)saker_get_be64(k.mv_data);
		*size = v.mv_size;
	}
	mdb_cursor_close(c);
	return rc;
}

/* PR_EXPIRED: dropped; PR_LAYER: expired, for the layer to route. */
enum { PR_MOVED, PR_EXPIRED, PR_ORPHAN, PR_LAYER };

/* Promote the first delayed record (known to be due) in txn t.  An expired
 * sound one is left in place (PR_LAYER), its key in xkey, for the caller
 * to hand to the layer outside this operation (expire_one). */
static int
promote_one(struct lstore *s, MDB_txn *t, int64_t now_ms,
    struct saker_queue **qp, int *what, size_t *len, unsigned char *xkey)
{
	struct saker_item it = { 0 };	/* hdr_read may refuse a record */
	struct saker_queue *q;
	MDB_cursor *c;
	MDB_val k, v;
	bool routed;
	int rc;

	*qp = NULL;
	if ((rc = mdb_cursor_open(t, s->dbi[LD_DELAYED], &c)) != 0)
		return rc;
	rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	if (rc == 0 && (v.mv_size < 8 + LM_HDR || k.mv_size != LM_KEY)) {
		/* unreadable: drop it rather than block every later item */
		*what = PR_ORPHAN;
		rc = cur_del(s, c, LD_DELAYED);
		goto out;
	}
	if (rc != 0)
		goto out;
	q = qtab_by_id(s, saker_get_be64(v.mv_data));
	hdr_read((unsigned char *)v.mv_data + 8, v.mv_size - 8, &it);
	*len = it.len;
	if (q == NULL || q->deleted) {
		*what = PR_ORPHAN;
		rc = cur_del(s, c, LD_DELAYED);
	} else if (expired(&it, now_ms) &&
	    rec_sound((unsigned char *)v.mv_data + 8, v.mv_size - 8)) {
		/* without an expire_to target the layer writes nothing: ask it
		 * here, under the cursor (expire_scan does the same) */
		if (!saker_store_has_expire_to(q) &&
		    saker_store_expired(&s->base, q, &it, now_ms, &routed) ==
		    SAKER_OK && !routed) {
			*what = PR_EXPIRED;
			rc = cur_del(s, c, LD_DELAYED);
		} else {
			*what = PR_LAYER;
			memcpy(xkey, k.mv_data, LM_KEY);
		}
	} else if (expired(&it, now_ms)) {
		/* damaged: dropped, its bytes cannot be trusted */
		*what = PR_EXPIRED;
		rc = cur_del(s, c, LD_DELAYED);
	} else {
		*what = PR_MOVED;
		rc = move_rec(s, t, c, LD_DELAYED, 8, LD_ITEMS, q, q->cur.tail,
		    true, len);
	}
	*qp = q;
out:
	mdb_cursor_close(c);
	return rc;
}

static int
lm_promote(saker_store *ss, int64_t now_ms, int64_t *next_due_ms)
{
	struct lstore *s = (struct lstore *)ss;
	unsigned char xkey[LM_KEY];
	struct saker_queue *q;
	int64_t due, dummy;
	size_t size, len;
	MDB_txn *t;
	int rc, what = PR_ORPHAN, ret = SAKER_OK;

	if (next_due_ms == NULL)
		next_due_ms = &dummy;
	*next_due_ms = 0;
	if ((rc = lm_begin(s, false)) != SAKER_OK)
		return rc;
	for (;;) {
		rc = delayed_first(s, s->txn, &due, &size);
		if (rc == MDB_NOTFOUND)
			break;
		if (rc != 0) {
			ret = lm_fail(s, rc, "promote");
			break;
		}
		*next_due_ms = due;
		if (due > now_ms)
			break;
		if (!s->txn_write) {
			/* Due but not promotable: the store is read-only or
			 * broken.  Say so, so the caller backs off instead of
			 * asking again at once. */
			if ((ret = lm_refuse(s)) == SAKER_OK)
				ret = seterr(s, SAKER_EREADONLY, "lmdb %s: "
				    "store is read-only", s->dir);
			break;
		}
		if ((ret = op_begin(s, size, &t)) != SAKER_OK)
			break;
		len = 0;
		rc = promote_one(s, t, now_ms, &q, &what, &len, xkey);
		if ((rc = op_end(s, t, rc, what != PR_LAYER)) != 0) {
			ret = lm_fail(s, rc, "promote");
			break;
		}
		*next_due_ms = 0;
		if (what == PR_ORPHAN)
			continue;
		if (what == PR_LAYER) {
			if ((ret = expire_one(s, q, LD_DELAYED, xkey, now_ms)) !=
			    SAKER_OK)
				break;
			continue;
		}
		if (what == PR_EXPIRED) {
			q_change(s, q);
			q->cur.delayed--;
			q->cur.expired++;
			continue;
		}
		q_change(s, q);
		q->cur.delayed--;
		q->cur.tail++;
		q->cur.items++;
		q->cur.bytes += len;
		if (s->notify != NULL)
			s->notify(s->notify_arg, q, q->ctx);
	}
	return ret;
}

static int
lm_flush_expired(saker_store *ss, saker_queue *q, int64_t now_ms,
    uint64_t limit, uint64_t *removed)
{
	struct lstore *s = (struct lstore *)ss;

	if (removed != NULL)
		*removed = 0;
	if (q == NULL)
		return seterr(s, SAKER_EINVAL, "lmdb flush_expired: no queue");
	if (q->cur.items == 0)
		return SAKER_OK;
	return expire_scan(s, q, now_ms, limit, false, removed);
}

/* Call fn for every item of q in `state`: the records (qid, seq) of open
 * or items, or the delayed records whose value starts with qid (a scan,
 * skipped when q has none). */
static int
iter_state(struct lstore *s, struct saker_queue *q, saker_item_state state,
    saker_item_fn fn, void *arg, int *fnret)
{
	bool delayed = state == SAKER_ITEM_DELAYED;
	size_t skip = delayed ? 8 : 0;
	unsigned char kb[LM_KEY], *rec;
	struct saker_item it;
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	rc = mdb_cursor_open(s->txn, delayed ? s->dbi[LD_DELAYED] :
	    state == SAKER_ITEM_OPEN ? s->dbi[LD_OPEN] : s->dbi[LD_ITEMS], &c);
	if (rc != 0)
		return rc;
	k = mkkey(kb, q->id, 0);
	rc = mdb_cursor_get(c, &k, &v, delayed ? MDB_FIRST : MDB_SET_RANGE);
	for (; rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (delayed && (k.mv_size != LM_KEY || v.mv_size < 8)) {
			rc = LM_EBADVAL;
			break;
		}
		if (!delayed && !key_in(&k, q->id))
			break;
		if (delayed && saker_get_be64(v.mv_data) != q->id)
			continue;
		rec = (unsigned char *)v.mv_data + skip;
		if ((rc = hdr_read(rec, v.mv_size - skip, &it)) != 0)
			break;
		it.id = saker_get_be64((unsigned char *)k.mv_data + 8);
		if (delayed)
			it.due_ms = (int64_t)saker_get_be64(k.mv_data);
		if (!rec_sound(rec, v.mv_size - skip)) {
			*fnret = seterr(s, SAKER_ECORRUPT, "queue '%.*s': %sitem %"
			    PRIu64 " failed its checksum", (int)q->ent.len,
			    q->name, delayed ? "delayed " : "", it.id);
			break;
		}
		it.state = state;
		if ((*fnret = fn(arg, &it)) != 0)
			break;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

static int
lm_iterate(saker_store *ss, saker_queue *q, saker_item_fn fn, void *arg)
{
	struct lstore *s = (struct lstore *)ss;
	int rc, fnret = 0;

	if (q == NULL || fn == NULL)
		return seterr(s, SAKER_EINVAL, "lmdb iterate: bad argument");
	if (!q->cur.exists)
		return seterr(s, SAKER_ENOTFOUND, "lmdb: no such queue");
	if ((rc = lm_begin(s, false)) != SAKER_OK)
		return rc;
	rc = 0;
	if (q->cur.open > 0)
		rc = iter_state(s, q, SAKER_ITEM_OPEN, fn, arg, &fnret);
	if (rc == 0 && fnret == 0 && q->cur.items > 0)
		rc = iter_state(s, q, SAKER_ITEM_READY, fn, arg, &fnret);
	if (rc == 0 && fnret == 0 && q->cur.delayed > 0)
		rc = iter_state(s, q, SAKER_ITEM_DELAYED, fn, arg, &fnret);
	if (rc != 0)
		return lm_fail(s, rc, "iterate");
	return fnret;
}

/* ---------------------------------------------------------------------
 * Deduplication ids (store.h, DEDUPLICATION): dedup holds (qid, id) ->
 * expiry and its checksum, dedup_exp the same ids by (qid, expiry, id),
 * so a sweep reads only what it removes.  Both are written in the batch
 * (journalled), so ids are as durable as the items put with them.
 * --------------------------------------------------------------------- */

/* The key (qid, id) of dedup or, with `idx`, (qid, expires, id) of
 * dedup_exp, in kb (LM_DKEY bytes). */
static MDB_val
dd_key(unsigned char *kb, uint64_t qid, bool idx, int64_t expires,
    const void *id, size_t len)
{
	size_t pre = idx ? 16 : 8;

	saker_put_be64(kb, qid);
	if (idx)
		saker_put_be64(kb + 8, (uint64_t)expires);
	memcpy(kb + pre, id, len);
	return (MDB_val){ .mv_size = pre + len, .mv_data = kb };
}

/* The value of dedup key k: expires and a checksum of key and expiry. */
static uint32_t
dd_crc(const MDB_val *k, const unsigned char *exp8)
{
	return kit_crc32c(kit_crc32c(0, k->mv_data, k->mv_size), exp8, 8);
}

static void
dd_seal(unsigned char *val, const MDB_val *k, int64_t expires)
{
	saker_put_be64(val, (uint64_t)expires);
	saker_put_be32(val + 8, dd_crc(k, val));
}

/* The expiry in the dedup record k = v; false when it is damaged. */
static bool
dd_read(const MDB_val *k, const MDB_val *v, int64_t *expires)
{
	const unsigned char *p = v->mv_data;

	if (k->mv_size <= 8 || k->mv_size > 8 + SAKER_DEDUP_KEY_MAX ||
	    v->mv_size != LM_DVAL || saker_get_be32(p + 8) != dd_crc(k, p))
		return false;
	*expires = (int64_t)saker_get_be64(p);
	return true;
}

static int
dd_args(struct lstore *s, saker_queue *q, const void *id, size_t len)
{
	if (q == NULL || !q->cur.exists || id == NULL || len == 0 ||
	    len > SAKER_DEDUP_KEY_MAX)
		return seterr(s, SAKER_EINVAL, "lmdb: bad deduplication id");
	return SAKER_OK;
}

/* Delete the dedup record at k (its expiry `expires`) and its entry in
 * dedup_exp, journalled; a missing entry is no error. */
static int
dd_del(struct lstore *s, MDB_txn *t, MDB_val *k, int64_t expires)
{
	unsigned char xb[LM_DKEY];
	MDB_val x;
	int rc;

	x = dd_key(xb, saker_get_be64(k->mv_data), true, expires,
	    (unsigned char *)k->mv_data + 8, k->mv_size - 8);
	rc = mdb_del(t, s->dbi[LD_DEDUPX], &x, NULL);
	if (rc == 0)
		rc = jr_rec(s, LD_DEDUPX, xb, x.mv_size, NULL, 0);
	if (rc == 0 || rc == MDB_NOTFOUND)
		rc = mdb_del(t, s->dbi[LD_DEDUP], k, NULL);
	if (rc == 0)
		rc = jr_rec(s, LD_DEDUP, k->mv_data, k->mv_size, NULL, 0);
	return rc;
}

static int
lm_dedup_put(saker_store *ss, saker_queue *q, const void *id, size_t len,
    int64_t expires_ms, int64_t now_ms, bool *replaced)
{
	struct lstore *s = (struct lstore *)ss;
	unsigned char kb[LM_DKEY], xb[LM_DKEY], val[LM_DVAL];
	MDB_val k, v, x;
	int64_t old = 0;
	MDB_txn *t;
	int rc;

	*replaced = false;
	if ((rc = dd_args(s, q, id, len)) != SAKER_OK ||
	    (rc = op_begin(s, 2 * LM_DKEY + LM_DVAL, &t)) != SAKER_OK)
		return rc;
	k = dd_key(kb, q->id, false, 0, id, len);
	dd_seal(val, &k, expires_ms);
	v = (MDB_val){ .mv_size = LM_DVAL, .mv_data = val };
	/* one search for a new id (the usual case); a kept one comes back
	 * in v.  One expired or damaged (taken as expired: at worst one
	 * duplicate, not an id refused for ever) is replaced. */
	rc = mdb_put(t, s->dbi[LD_DEDUP], &k, &v, MDB_NOOVERWRITE);
	if (rc == MDB_KEYEXIST && (!dd_read(&k, &v, &old) || old <= now_ms)) {
		x = dd_key(xb, q->id, true, old, id, len);
		if ((rc = mdb_del(t, s->dbi[LD_DEDUPX], &x, NULL)) == 0)
			rc = jr_rec(s, LD_DEDUPX, xb, x.mv_size, NULL, 0);
		v = (MDB_val){ .mv_size = LM_DVAL, .mv_data = val };
		if (rc == 0 || rc == MDB_NOTFOUND)
			rc = mdb_put(t, s->dbi[LD_DEDUP], &k, &v, 0);
		*replaced = rc == 0;
	}
	if (rc == 0)
		rc = jr_rec(s, LD_DEDUP, kb, k.mv_size, val, LM_DVAL);
	x = dd_key(xb, q->id, true, expires_ms, id, len);
	v.mv_size = 0;
	if (rc == 0 && (rc = mdb_put(t, s->dbi[LD_DEDUPX], &x, &v, 0)) == 0)
		rc = jr_rec(s, LD_DEDUPX, xb, x.mv_size, val, 0);
	if ((rc = op_end(s, t, rc, rc == 0)) == MDB_KEYEXIST)
		return SAKER_EEXIST;
	if (rc != 0)
		return lm_fail(s, rc, "record deduplication id");
	return SAKER_OK;
}

static int
lm_dedup_del(saker_store *ss, saker_queue *q, const void *id, size_t len)
{
	struct lstore *s = (struct lstore *)ss;
	unsigned char kb[LM_DKEY];
	int64_t old = 0;
	MDB_val k, v;
	MDB_txn *t;
	int rc;

	if ((rc = dd_args(s, q, id, len)) != SAKER_OK ||
	    (rc = op_begin(s, 0, &t)) != SAKER_OK)
		return rc;
	k = dd_key(kb, q->id, false, 0, id, len);
	rc = mdb_get(t, s->dbi[LD_DEDUP], &k, &v);
	if (rc == 0) {
		(void)dd_read(&k, &v, &old);	/* damaged: no entry found */
		rc = dd_del(s, t, &k, old);
	}
	if ((rc = op_end(s, t, rc, rc == 0)) == MDB_NOTFOUND)
		return seterr(s, SAKER_ENOTFOUND, "lmdb: no such "
		    "deduplication id (%zu bytes)", len);	/* binary */
	if (rc != 0)
		return lm_fail(s, rc, "remove deduplication id");
	return SAKER_OK;
}

/* The first dedup_exp entry of q at cursor c; MDB_NOTFOUND when none. */
static int
dd_first(MDB_cursor *c, uint64_t qid, MDB_val *k)
{
	unsigned char kb[8];
	MDB_val v;
	int rc;

	saker_put_be64(kb, qid);
	*k = (MDB_val){ .mv_size = 8, .mv_data = kb };
	rc = mdb_cursor_get(c, k, &v, MDB_SET_RANGE);
	if (rc == 0 && (k->mv_size < 8 || saker_get_be64(k->mv_data) != qid))
		rc = MDB_NOTFOUND;
	if (rc == 0 && (k->mv_size <= 16 || k->mv_size > LM_DKEY))
		rc = LM_EBADVAL;
	return rc;
}

static int
lm_dedup_sweep(saker_store *ss, saker_queue *q, int64_t now_ms,
    uint64_t limit, uint64_t *removed)
{
	struct lstore *s = (struct lstore *)ss;
	unsigned char kb[LM_DKEY];
	MDB_cursor *c;
	MDB_val k, x, v;
	int64_t exp, old;
	uint64_t n = 0;
	MDB_txn *t;
	int rc;

	*removed = 0;
	if (q == NULL || !q->cur.exists)
		return seterr(s, SAKER_ENOTFOUND, "lmdb: no such queue");
	if ((rc = lm_begin(s, true)) != SAKER_OK)
		return rc;
	/* none expired (the usual case): one look, no write */
	if ((rc = mdb_cursor_open(s->txn, s->dbi[LD_DEDUPX], &c)) != 0)
		return lm_fail(s, rc, "sweep deduplication ids");
	rc = dd_first(c, q->id, &x);
	exp = rc == 0 ? (int64_t)saker_get_be64((unsigned char *)x.mv_data +
	    8) : 0;
	mdb_cursor_close(c);
	if (rc == MDB_NOTFOUND || (rc == 0 && exp > now_ms))
		return SAKER_OK;
	if (rc != 0)
		return lm_fail(s, rc, "sweep deduplication ids");
	if ((rc = op_begin(s, 0, &t)) != SAKER_OK)
		return rc;
	if ((rc = mdb_cursor_open(t, s->dbi[LD_DEDUPX], &c)) != 0)
		goto end;
	while ((limit == 0 || n < limit) && (rc = dd_first(c, q->id, &x)) ==
	    0 && (exp = (int64_t)saker_get_be64((unsigned char *)x.mv_data +
	    8)) <= now_ms) {
		/* the id goes (and is counted) when its record has this
		 * expiry or is damaged; else the entry is a leftover of a
		 * damaged record replaced, and goes alone */
		k = dd_key(kb, q->id, false, 0, (unsigned char *)x.mv_data + 16,
		    x.mv_size - 16);
		rc = mdb_get(t, s->dbi[LD_DEDUP], &k, &v);
		if (rc == 0 && (!dd_read(&k, &v, &old) || old == exp)) {
			if ((rc = dd_del(s, t, &k, exp)) != 0)
				break;
			n++;
			continue;
		}
		if (rc != 0 && rc != MDB_NOTFOUND)
			break;
		memcpy(kb, x.mv_data, x.mv_size);
		if ((rc = mdb_cursor_del(c, 0)) != 0 ||
		    (rc = jr_rec(s, LD_DEDUPX, kb, x.mv_size, NULL, 0)) != 0)
			break;
	}
	if (rc == MDB_NOTFOUND || rc == 0)
		rc = 0;
	mdb_cursor_close(c);
end:
	if ((rc = op_end(s, t, rc, true)) != 0)
		return lm_fail(s, rc, "sweep deduplication ids");
	*removed = n;
	return SAKER_OK;
}

static int
lm_dedup_iterate(saker_store *ss, saker_queue *q, saker_dedup_fn fn,
    void *arg)
{
	struct lstore *s = (struct lstore *)ss;
	unsigned char kb[8];
	MDB_cursor *c;
	MDB_val k, v;
	int64_t exp;
	int rc, r = 0;

	if (q == NULL || fn == NULL || !q->cur.exists)
		return seterr(s, SAKER_EINVAL, "lmdb: bad argument");
	if ((rc = lm_begin(s, false)) != SAKER_OK)
		return rc;
	if (s->no_dedup)
		return SAKER_OK;
	if ((rc = mdb_cursor_open(s->txn, s->dbi[LD_DEDUP], &c)) != 0)
		return lm_fail(s, rc, "read deduplication ids");
	saker_put_be64(kb, q->id);
	k = (MDB_val){ .mv_size = 8, .mv_data = kb };
	for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0 &&
	    k.mv_size >= 8 && saker_get_be64(k.mv_data) == q->id;
	    rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (!dd_read(&k, &v, &exp)) {
			r = seterr(s, SAKER_ECORRUPT, "queue '%.*s': a "
			    "deduplication id record failed its checksum",
			    (int)q->ent.len, q->name);
			break;
		}
		if ((r = fn(arg, (unsigned char *)k.mv_data + 8,
		    k.mv_size - 8, exp)) != 0)
			break;
	}
	mdb_cursor_close(c);
	if (rc != 0 && rc != MDB_NOTFOUND)
		return lm_fail(s, rc, "read deduplication ids");
	return r;
}

/* ---------------------------------------------------------------------
 * Stats, errmsg
 * --------------------------------------------------------------------- */

static void
lm_store_stats(saker_store *ss, struct saker_store_stats *st)
{
	struct lstore *s = (struct lstore *)ss;
	mdb_filehandle_t fd;
	struct stat sb;

	*st = s->st;
	st->checkpoints = s->lt.checkpoints;
	st->checkpoint_ns = s->lt.checkpoint_ns;
	st->fsyncs += s->lt.j.fsyncs;
	if (mdb_env_get_fd(s->env, &fd) == 0 && fstat(fd, &sb) == 0)
		st->disk_bytes = (uint64_t)sb.st_size;
}

static const char *
lm_errmsg(saker_store *ss)
{
	struct lstore *s = (struct lstore *)ss;

	if (s == NULL)
		return "no store";
	return s->err[0] != '\0' ? s->err : "no error";
}

/* ---------------------------------------------------------------------
 * Open and close
 * --------------------------------------------------------------------- */

static void
lm_free(struct lstore *s)
{
	struct kit_qent *e, *next;
	size_t i;

	if (s->txn != NULL && s->txn != s->ptxn)
		mdb_txn_abort(s->txn);
	if (s->ptxn != NULL)
		mdb_txn_abort(s->ptxn);
	s->txn = s->ptxn = NULL;
	if (s->env != NULL)
		mdb_env_close(s->env);
	ltx_close(&s->lt);
	for (e = kit_qtab_next(&s->qt, &i, NULL); e != NULL; e = next) {
		next = kit_qtab_next(&s->qt, &i, e);
		free(LQ(e)->name);
		free(LQ(e));
	}
	kit_qtab_free(&s->qt);
	free(s->dir);
	free(s);
}

static void
lm_close(saker_store *ss)
{
	struct lstore *s = (struct lstore *)ss;

	if (s == NULL)
		return;
	if (s->lt.j.inflight)
		(void)lm_flight_collect(s);
	if (s->txn != NULL && !s->stale)
		(void)lm_commit(ss);
	lm_rollback(s);	/* a batch whose commit failed */
	/* A broken store keeps its journal for the next open to replay. */
	if (!s->broken)
		(void)lm_checkpoint(s);
	if (!s->read_only && !s->broken && s->sync == SAKER_SYNC_NEVER)
		(void)mdb_env_sync(s->env, 1);
	lm_free(s);
}

/*
 * Does DIR hold data.mdb?  Then walk its pages before liblmdb maps it:
 * liblmdb trusts its file and aborts (an assertion) or dies of SIGSEGV/
 * SIGBUS on some damage, where a store must fail to open with a reason
 * instead (lmdb_verify.h).  When it does not, refuse a directory holding
 * anything else: it is not ours.
 */
static int
lm_check_dir(struct lstore *s, bool *have_data)
{
	char path[4096], why[512];
	struct dirent *de;
	struct stat sb;
	DIR *d;
	int rc;

	snprintf(path, sizeof(path), "%s/data.mdb", s->dir);
	if (stat(path, &sb) == 0) {
		*have_data = true;
		rc = lmv_verify(path, NULL, why, sizeof(why));
		if (rc > 0)
			return seterr(s, SAKER_ECORRUPT, "%s; restore it from a "
			    "backup (docs/lmdb.md)", why);
		if (rc < 0)
			return seterr(s, SAKER_EIO, "%s", why);
		return SAKER_OK;
	}
	*have_data = false;
	if ((d = opendir(s->dir)) == NULL)
		return seterr(s, SAKER_EIO, "cannot read directory %s: %s", s->dir,
		    strerror(errno));
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    strcmp(de->d_name, "saker.lock") == 0 ||
		    strcmp(de->d_name, "lock.mdb") == 0)
			continue;
		seterr(s, SAKER_ECORRUPT, "%s is not a saker store: it holds "
		    "files (%s, ...) but no data.mdb", s->dir, de->d_name);
		closedir(d);
		return SAKER_ECORRUPT;
	}
	closedir(d);
	return SAKER_OK;
}

/*
 * The map an item must fit into: LMDB cannot grow the map while the long
 * transaction is open, and an item put in a fresh 1 GiB map of which 85 %
 * may be used (LM_GUARD_PCT) fails as "full" well below 1 GiB.  So the
 * map starts at four times the largest item the caller will put (it is
 * address space, not disk: the file grows only as pages are written).
 */
static size_t
lm_initial_map(uint64_t max_item)
{
	size_t size = LM_MAP_INITIAL;

	while ((uint64_t)size / 4 < max_item && size < SIZE_MAX / 4)
		size *= 2;
	return size;
}

static int
meta_get64(struct lstore *s, MDB_txn *t, const char *key, uint64_t *out)
{
	MDB_val v;
	int rc;

	rc = meta_get(s, t, key, &v);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc != 0)
		return lm_fail(s, rc, "read meta");
	if (v.mv_size != 8)
		return seterr(s, SAKER_ECORRUPT, "lmdb %s: bad meta record %s",
		    s->dir, key);
	*out = saker_get_be64(v.mv_data);
	return SAKER_OK;
}

/* Record this build's format version (unless already there). */
static int
meta_version(struct lstore *s, MDB_txn *t)
{
	unsigned char num[4];
	MDB_val v;
	int rc;

	rc = meta_get(s, t, "version", &v);
	if (rc == 0 && v.mv_size == 4 && saker_get_be32(v.mv_data) == LM_VERSION)
		return 0;
	if (rc != 0 && rc != MDB_NOTFOUND)
		return rc;
	saker_put_be32(num, LM_VERSION);
	return meta_put(s, t, "version", num, 4);
}

/* Read the store's id, making one when there is none (a new store, or a
 * version 1 store being upgraded). */
static int
meta_store_id(struct lstore *s, MDB_txn *t)
{
	unsigned char num[8];
	MDB_val v;
	uint64_t id;
	int rc;

	rc = meta_get(s, t, "store_id", &v);
	if (rc == 0 && v.mv_size == 8) {
		s->store_id = saker_get_be64(v.mv_data);
		return 0;
	}
	if (rc != 0 && rc != MDB_NOTFOUND)
		return rc;
	s->store_id = id = ltx_new_id();
	saker_put_be64(num, id);
	return meta_put(s, t, "store_id", num, 8);
}

static int
meta_check(struct lstore *s, MDB_txn *t)
{
	MDB_val v;
	uint32_t version;
	int rc;

	rc = meta_get(s, t, "format", &v);
	if (rc != 0 && rc != MDB_NOTFOUND)
		return lm_fail(s, rc, "read meta");
	if (rc != 0 || v.mv_size != strlen(LM_FORMAT) ||
	    memcmp(v.mv_data, LM_FORMAT, v.mv_size) != 0)
		return seterr(s, SAKER_ECORRUPT, "%s/data.mdb is not a saker store "
		    "(no \"%s\" format record)", s->dir, LM_FORMAT);
	rc = meta_get(s, t, "version", &v);
	if (rc != 0 && rc != MDB_NOTFOUND)
		return lm_fail(s, rc, "read meta");
	if (rc != 0 || v.mv_size != 4)
		return seterr(s, SAKER_ECORRUPT, "lmdb %s: format version record "
		    "missing or damaged", s->dir);
	version = saker_get_be32(v.mv_data);
	if (version > LM_VERSION)
		return seterr(s, SAKER_EVERSION, "lmdb %s: store format version %u "
		    "is newer than this build supports (%d); upgrade saker",
		    s->dir, version, LM_VERSION);
	if (version == 0)
		return seterr(s, SAKER_ECORRUPT, "lmdb %s: bad format version 0",
		    s->dir);
	return SAKER_OK;
}

/* Open the named databases (creating them for a new store: an empty
 * environment) and check the format. */
static int
lm_open_dbs(struct lstore *s, bool create)
{
	static const char *const names[LD_COUNT] = { "meta", "queues", "items",
	    "open", "delayed", "dedup", "dedup_exp" };
	MDB_txn *t;
	MDB_dbi main;
	MDB_stat ms;
	bool fresh;
	size_t i;
	int rc, ret;

	rc = mdb_txn_begin(s->env, NULL, s->read_only ? MDB_RDONLY : 0, &t);
	if (rc != 0)
		return lm_fail(s, rc, "begin transaction");
	if ((rc = mdb_dbi_open(t, NULL, 0, &main)) != 0 ||
	    (rc = mdb_stat(t, main, &ms)) != 0) {
		ret = lm_fail(s, rc, "open main database");
		goto fail;
	}
	fresh = ms.ms_entries == 0;
	if (fresh && (!create || s->read_only)) {
		ret = seterr(s, SAKER_ENOTFOUND, "no saker store in %s (empty "
		    "database)", s->dir);
		goto fail;
	}
	for (i = 0; i < LD_COUNT; i++) {
		/* a store of format < 5 gains the dedup databases here
		 * (read-only: it has no ids) */
		rc = mdb_dbi_open(t, names[i], fresh || (i >= LD_DEDUP &&
		    !s->read_only) ? MDB_CREATE : 0, &s->dbi[i]);
		if (rc == MDB_NOTFOUND && i >= LD_DEDUP) {
			s->no_dedup = true;
			continue;
		}
		if (rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE) {
			ret = seterr(s, SAKER_ECORRUPT, "%s/data.mdb is an LMDB "
			    "database but not a saker store (no \"%s\" table)",
			    s->dir, names[i]);
			goto fail;
		}
		if (rc != 0) {
			ret = lm_fail(s, rc, "open database");
			goto fail;
		}
	}
	/* a new store: its format, then this build's version */
	if (fresh && ((rc = meta_put(s, t, "format", LM_FORMAT,
	    strlen(LM_FORMAT))) != 0 || (rc = meta_version(s, t)) != 0)) {
		ret = lm_fail(s, rc, "initialise store");
		goto fail;
	}
	if ((ret = meta_check(s, t)) != SAKER_OK ||
	    (ret = meta_get64(s, t, "journal_seq", &s->lt.ckpt_seq)) != SAKER_OK)
		goto fail;
	/* Older stores are upgraded in place: version 2 (the journal), 3
	 * (item checksums; records without one still read) and 5 (item
	 * attributes, the dedup databases) only add to them, and from now on
	 * an older build must refuse the store, as it would ignore the
	 * journal or read a checksum or attributes as data. */
	if (!s->read_only && ((rc = put_sentinels(t, s->dbi)) != 0 ||
	    (rc = meta_version(s, t)) != 0 ||
	    (rc = meta_store_id(s, t)) != 0)) {
		ret = lm_fail(s, rc, "initialise store");
		goto fail;
	}
	if (s->read_only &&
	    (ret = meta_get64(s, t, "store_id", &s->store_id)) != SAKER_OK)
		goto fail;
	/* Commit, even a read txn: that keeps the dbi handles open. */
	if ((rc = mdb_txn_commit(t)) != 0)
		return lm_fail(s, rc, "initialise store");
	return SAKER_OK;
fail:
	mdb_txn_abort(t);
	return ret;
}

/*
 * Open the journal and replay what it holds beyond the last checkpoint
 * (the batches acknowledged before a crash), then checkpoint them.  A
 * read-only opener must not write: it only finds out (*pending) whether
 * there is anything to replay.
 */
static int
lm_journal_open(struct lstore *s, bool *pending)
{
	char path[4096];
	int rc;

	*pending = false;
	if ((size_t)snprintf(path, sizeof(path), "%s/saker.journal", s->dir) >=
	    sizeof(path))
		return seterr(s, SAKER_EINVAL, "lmdb %s: path too long", s->dir);
	if ((rc = ltx_open(&s->lt, path, !s->read_only, s->store_id,
	    s->sync == SAKER_SYNC_NEVER, s->lt.ckpt_seq)) != 0)
		return seterr(s, SAKER_EIO, "lmdb %s: %s", s->dir, s->lt.j.err);
	if (s->read_only) {
		if ((rc = ltx_pending(&s->lt, pending)) != 0)
			return seterr(s, rc == EILSEQ ? SAKER_ECORRUPT : SAKER_EIO,
			    "lmdb %s: %s", s->dir, s->lt.j.err);
		return SAKER_OK;
	}
	rc = ltx_replay(&s->lt);
	if (rc == LTX_EBEGIN)
		return s->begin_err;
	if (rc != 0) {
		if (s->lt.j.err[0] != '\0')
			return seterr(s, rc == EILSEQ ? SAKER_ECORRUPT : SAKER_EIO,
			    "lmdb %s: %s", s->dir, s->lt.j.err);
		return seterr(s, maperr(rc), "lmdb %s: replaying journal batch "
		    "%llu: %s", s->dir, (unsigned long long)s->lt.j.seq + 1,
		    lm_strerror(rc));
	}
	/* the replayed batches into the data file (with none, this only ends
	 * the long txn); a failed checkpoint fails the open */
	return lm_checkpoint(s);
}

static int
lm_load(struct lstore *s)
{
	struct saker_queue *q;
	MDB_cursor *c;
	MDB_val k, v;
	uint64_t id;
	int rc, ret;

	if ((ret = lm_begin(s, false)) != SAKER_OK)
		return ret;
	s->next_qid = 1;
	s->next_arrival = 1;
	if ((ret = meta_get64(s, s->txn, "next_qid", &s->next_qid)) != SAKER_OK ||
	    (ret = meta_get64(s, s->txn, "next_arrival", &s->next_arrival)) !=
	    SAKER_OK)
		return ret;
	s->saved_next_qid = s->next_qid;
	s->saved_next_arrival = s->next_arrival;
	if ((rc = mdb_cursor_open(s->txn, s->dbi[LD_QUEUES], &c)) != 0)
		return lm_fail(s, rc, "read queues");
	rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	for (; rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (v.mv_size != LM_QREC || k.mv_size == 0) {
			mdb_cursor_close(c);
			return seterr(s, SAKER_ECORRUPT, "lmdb %s: damaged queue "
			    "record", s->dir);
		}
		id = saker_get_be64(v.mv_data);
		if ((q = qtab_add(s, k.mv_data, k.mv_size, id)) == NULL) {
			mdb_cursor_close(c);
			return seterr(s, SAKER_ENOMEM, "lmdb: out of memory");
		}
		qrec_io(v.mv_data, q, false);
		if (id >= s->next_qid)
			s->next_qid = id + 1;
	}
	mdb_cursor_close(c);
	if (rc != MDB_NOTFOUND)
		return lm_fail(s, rc, "read queues");
	return SAKER_OK;
}

/*
 * After a crash, open items go back to the heads of their queues.  Walking
 * the open items from the last one backwards and inserting each at lo - 1
 * keeps their original order.
 */
static int
lm_recover(struct lstore *s)
{
	struct saker_queue *q;
	MDB_cursor *c;
	MDB_stat ms;
	MDB_val k, v;
	size_t len;
	int rc, ret;

	if ((rc = mdb_stat(s->txn, s->dbi[LD_OPEN], &ms)) != 0)
		return lm_fail(s, rc, "recover");
	if (ms.ms_entries <= 1)	/* the sentinel */
		return SAKER_OK;
	if ((ret = lm_begin(s, true)) != SAKER_OK)
		return ret;
	if ((rc = mdb_cursor_open(s->txn, s->dbi[LD_OPEN], &c)) != 0)
		return lm_fail(s, rc, "recover");
	while ((rc = mdb_cursor_get(c, &k, &v, MDB_LAST)) == 0) {
		if (is_sentinel(&k, 0)) {
			rc = MDB_NOTFOUND;	/* every open item done */
			break;
		}
		q = k.mv_size == LM_KEY ? qtab_by_id(s, saker_get_be64(k.mv_data)) : NULL;
		if (q == NULL) {
			rc = cur_del(s, c, LD_OPEN);	/* orphan */
		} else {
			len = 0;
			rc = move_rec(s, s->txn, c, LD_OPEN, 0, LD_ITEMS, q,
			    q->cur.lo - 1, false, &len);
			if (rc == 0) {
				q_change(s, q);
				q->cur.lo--;
				if (q->cur.open > 0)
					q->cur.open--;
				q->cur.items++;
				q->cur.bytes += len;
			}
		}
		if (rc != 0)
			break;
		s->txn_dirty = true;
	}
	mdb_cursor_close(c);
	if (rc != MDB_NOTFOUND)
		return lm_fail(s, rc, "recover open items");
	return lm_commit(&s->base);
}

static int
lm_open(const char *location, const struct saker_store_opts *opts,
    saker_store **out, char *err, size_t errlen)
{
	struct lstore *s;
	struct stat sb;
	MDB_envinfo ei;
	MDB_stat ms;
	unsigned int flags = MDB_NOTLS;
	bool have_data, pending;
	int rc, ret;

	*out = NULL;
	if (location == NULL || *location == '\0') {
		snprintf(err, errlen, "lmdb store needs a directory: lmdb:DIR");
		return SAKER_EINVAL;
	}
	if (opts == NULL) {
		snprintf(err, errlen, "lmdb: no options");
		return SAKER_EINVAL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->dir = strdup(location)) == NULL) {
		free(s);
		snprintf(err, errlen, "out of memory");
		return SAKER_ENOMEM;
	}
	s->base.driver = &saker_store_lmdb;
	ltx_init(&s->lt, &lm_ltx_ops, s,
	    saker_store_optval(opts, LM_OPT_CHECKPOINT_BYTES) != NULL ?
	    saker_store_optval(opts, LM_OPT_CHECKPOINT_BYTES)->u :
	    LM_CKPT_BYTES, LM_CKPT_NS);
	s->sync = opts->sync;
	s->read_only = opts->read_only;
	s->notify = opts->notify;
	s->notify_arg = opts->notify_arg;

	/* the layer made the directory (SAKER_LOCK_IN_DIR) */
	if (stat(location, &sb) != 0) {
		ret = seterr(s, errno == ENOENT ? SAKER_ENOTFOUND : SAKER_EIO,
		    "store directory %s: %s", location, strerror(errno));
		goto fail;
	}
	if (!S_ISDIR(sb.st_mode)) {
		ret = seterr(s, SAKER_EINVAL, "store location %s is not a directory",
		    location);
		goto fail;
	}
	if ((ret = lm_check_dir(s, &have_data)) != SAKER_OK)
		goto fail;
	if (!have_data && (!opts->create || opts->read_only)) {
		ret = seterr(s, SAKER_ENOTFOUND, "no saker store in %s", location);
		goto fail;
	}

	/* always and periodic: checkpoints are LMDB's synced commits (the
	 * journal is synced per batch or by sync()); never: not even those. */
	if (s->read_only)
		flags |= MDB_RDONLY;
	else if (s->sync == SAKER_SYNC_NEVER)
		flags |= MDB_NOSYNC | MDB_NOMETASYNC;
	if ((rc = mdb_env_create(&s->env)) != 0) {
		s->env = NULL;
		ret = lm_fail(s, rc, "create environment");
		goto fail;
	}
	if ((rc = mdb_env_set_maxdbs(s->env, 8)) != 0 ||
	    (rc = mdb_env_set_mapsize(s->env, lm_initial_map(opts->max_item)))
	    != 0) {
		ret = lm_fail(s, rc, "configure environment");
		goto fail;
	}
	if ((rc = mdb_env_open(s->env, location, flags, 0600)) != 0) {
		if (rc == MDB_INVALID)
			ret = seterr(s, SAKER_ECORRUPT, "%s/data.mdb is not an LMDB "
			    "database (%s)", location, mdb_strerror(rc));
		else
			ret = lm_fail(s, rc, "open environment");
		goto fail;
	}
	if ((rc = mdb_env_stat(s->env, &ms)) != 0 ||
	    (rc = mdb_env_info(s->env, &ei)) != 0) {
		ret = lm_fail(s, rc, "stat environment");
		goto fail;
	}
	s->psize = ms.ms_psize;
	s->mapsize = ei.me_mapsize;
	if ((ret = lm_open_dbs(s, opts->create)) != SAKER_OK ||
	    (ret = lm_journal_open(s, &pending)) != SAKER_OK)
		goto fail;
	if (pending) {
		lm_free(s);
		return ltx_open_recovered(&saker_store_lmdb, location, opts, out,
		    err, errlen);
	}
	if ((ret = lm_load(s)) != SAKER_OK)
		goto fail;
	if (!s->read_only && (ret = lm_recover(s)) != SAKER_OK)
		goto fail;
	if (s->txn != NULL && s->txn != s->ptxn)
		mdb_txn_abort(s->txn);	/* the loading read */
	s->txn = NULL;
	s->err[0] = '\0';
	*out = &s->base;
	return SAKER_OK;
fail:
	snprintf(err, errlen, "%s", s->err);
	lm_rollback(s);
	lm_free(s);
	return ret;
}

const struct saker_store_driver saker_store_lmdb = {
	.name = "lmdb",
	.location_help = "DIR",
	.location = SAKER_LOCATION_DIR,
	/* sakerd is durable by default when LMDB is built (README) */
	.default_location = "./saker-data",
	.durable = true,
	.options = lm_options,
	.lock = SAKER_LOCK_IN_DIR,
	/* the queue record on disk holds the four counters (format 1) */
	.own_counts = true,
	.open = lm_open,
	.close = lm_close,
	.errmsg = lm_errmsg,
	.queue_open = lm_queue_open,
	.queue_delete = lm_queue_delete,
	.queue_flush = lm_queue_flush,
	.queues = lm_queues,
	.queue_stats = lm_queue_stats,
	.put = lm_put,
	.take = lm_take,
	.confirm = lm_confirm,
	.release = lm_release,
	.release_delayed = lm_release_delayed,
	.move = lm_move,
	.expire_to = saker_store_keep_expire_to,
	.promote = lm_promote,
	.flush_expired = lm_flush_expired,
	.iterate = lm_iterate,
	.dedup_put = lm_dedup_put,
	.dedup_del = lm_dedup_del,
	.dedup_sweep = lm_dedup_sweep,
	.dedup_iterate = lm_dedup_iterate,
	.commit = lm_commit,
	.sync = lm_sync,
	.commit_start = lm_commit_start,
	.commit_fd = lm_commit_fd,
	.commit_finish = lm_commit_finish,
	.store_stats = lm_store_stats,
	.watch_fd = NULL,
	.fd_ready = NULL,
};
