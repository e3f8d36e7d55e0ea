/* sqlite.c -- the SQLite queue store: one database file in WAL mode. */
#include "config.h"

#include <sys/queue.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "saker/store.h"
#include "longtxn.h"
#include "clock.h"
#include "hash.h"
#include "kit.h"
#include "log.h"
#include "qtab.h"
#include "sqlite_redo.h"

/*
 * Layout (docs/sqlite.md has the full story):
 *   meta(key, value)            next delayed arrival number; the journal's
 *                               store_id and journal_seq (--sync always)
 *   queues(id, name, ...)       per-queue sequence bounds and counters
 *   items(qid, seq, ...)        ready and open items, clustered per queue
 *   delayed(due, seq, ...)      delayed items of every queue, in due order
 *   dedup(qid, key, expires)    deduplication ids, by key and by expiry
 * Per-queue counters live in memory and are written to `queues` by commit()
 * in the same transaction as the batch, so open() never counts items.
 */

#define SQ_APPLICATION_ID 0x53414b52	/* "SAKR" */
/* 1: saker 1.0.0; 2: items carry a CRC32C (kit_item_crc) in column crc,
 * NULL in rows written before (not checked); 3: items carry their
 * delivery count in column deliveries (0 in rows written before); 4: the
 * store may hold acknowledged batches in its redo journal (FILE.saker-
 * journal, --sync always), which older builds would not replay, so they
 * refuse it; 5: items carry attributes (column attrs, NULL for none) and
 * queues their deduplication ids (table dedup).  Opening an older store
 * for writing upgrades it in place. */
#define SQ_FORMAT_VERSION 5
/* A row holds the item, its attributes and a few integers: keep this much
 * of SQLite's length limit for the rest. */
#define SQ_ROW_SLACK (1024 + SAKER_ATTRS_MAX)

/* Ready items are appended at `tail` counting up from 2^62; released
 * items go below every existing item at `lo`, counting down.  Neither can
 * meet the other or overflow in any realistic lifetime. */
#define SQ_SEQ_BASE ((int64_t)1 << 62)

/* 8 MiB page cache: memory stays bounded whatever the queue sizes. */
#define SQ_CACHE_KIB 8192
/* Checkpoint once the WAL holds this many pages (4 MiB at 4 KiB pages). */
#define SQ_AUTOCHECKPOINT 1000
/* Truncate a WAL that one huge batch blew up back to this size. */
#define SQ_JOURNAL_LIMIT (64 * 1024 * 1024)
/*
 * --sync always: batches are made durable by the driver's redo journal
 * (FILE.saker-journal, sqlite_redo.h) and SQLite commits the long
 * transaction that holds them (a checkpoint) when the journal holds this
 * many bytes or is this old, and at close.  Between checkpoints the batches
 * wait in SQLite's page cache (SQ_CACHE_KIB; beyond it SQLite writes them
 * to the WAL uncommitted), so memory stays bounded.  A checkpoint holds the
 * loop for as long as its commit and WAL copy take, about proportional to
 * the bytes: under 50 producers 512 KiB took 0.9 ms at the median (max
 * 11.5 ms), 8 MiB 19 ms (max 42 ms), for the same throughput
 * (docs/sqlite.md).  LMDB's checkpoint, which copies no WAL, keeps 8 MiB
 * (lmdb.c).  The policy over these is longtxn.h's, shared with LMDB.
 */
#define SQ_CKPT_BYTES ((uint64_t)512 << 10)
#define SQ_CKPT_NS ((uint64_t)1000 * 1000 * 1000)
#define SQ_REDO_SUFFIX ".saker-journal"
/* How long to wait for a transient lock held by an outside reader. */
#define SQ_BUSY_MS 2000
/* Expired items are deleted in chunks so no SELECT runs over a table that
 * is being changed under it. */
#define SQ_EXPIRE_CHUNK 256

/* Journal records name statements by their index here (sqlite_redo.h):
 * renumbering needs a new SR_FORMAT. */
enum {
	S_BEGIN, S_COMMIT, S_ROLLBACK,
	S_SP, S_SP_RELEASE, S_SP_ROLLBACK,
	S_BSP, S_BSP_RELEASE, S_BSP_ROLLBACK,
	S_Q_INSERT, S_Q_UPDATE, S_Q_DELETE, S_META_SET,
	S_I_INSERT, S_I_HEAD, S_I_DELETE, S_I_OPEN, S_I_CONFIRM,
	S_I_OPENLEN, S_I_RELEASE, S_I_MOVE, S_I_OPENSEQS, S_I_OPENLIST, S_I_READYLIST,
	S_I_EXPIRED, S_I_GET, S_I_DELQ,
	S_D_INSERT, S_D_DUE, S_D_DELDUE, S_D_FIRST, S_D_LIST, S_D_DELQ,
	S_D_RELEASE,	/* appended: the journal names statements by index */
	S_X_PUT, S_X_RENEW, S_X_DEL, S_X_FIRST, S_X_SWEEP, S_X_LIST, S_X_DELQ,
	S_COUNT
};

static const char *const sq_sql[S_COUNT] = {
	[S_BEGIN] = "BEGIN IMMEDIATE",
	[S_COMMIT] = "COMMIT",
	[S_ROLLBACK] = "ROLLBACK",
	[S_SP] = "SAVEPOINT saker_op",
	[S_SP_RELEASE] = "RELEASE saker_op",
	[S_SP_ROLLBACK] = "ROLLBACK TO saker_op",
	/* a batch inside the long transaction (--sync always) */
	[S_BSP] = "SAVEPOINT saker_batch",
	[S_BSP_RELEASE] = "RELEASE saker_batch",
	[S_BSP_ROLLBACK] = "ROLLBACK TO saker_batch",
	[S_Q_INSERT] = "INSERT INTO queues(id, name, head, tail, lo,"
	    " items, bytes, delayed_items, open_items, total_items,"
	    " expired_items) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
	/* An UPDATE that leaves the name alone does not touch its index. */
	[S_Q_UPDATE] = "UPDATE queues SET head = ?3, tail = ?4, lo = ?5,"
	    " items = ?6, bytes = ?7, delayed_items = ?8, open_items = ?9,"
	    " total_items = ?10, expired_items = ?11 WHERE id = ?1",
	[S_Q_DELETE] = "DELETE FROM queues WHERE id = ?1",
	[S_META_SET] = "INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)",
	[S_I_INSERT] = "INSERT INTO items(qid, seq, state, flags, expires,"
	    " created, data, crc, deliveries, attrs)"
	    " VALUES (?1, ?2, 0, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
	/* @CRC@: the crc column, or NULL on a version 1 store opened
	 * read-only; @DLV@: the deliveries column, or 0 on a store older
	 * than version 3 opened read-only; @ATR@: attrs, or NULL before
	 * version 5 (sq_prepare) */
	[S_I_HEAD] = "SELECT seq, flags, expires, created, data, @CRC@, @DLV@,"
	    " @ATR@"
	    " FROM items WHERE qid = ?1 AND seq >= ?2 AND state = 0 ORDER BY seq LIMIT 1",
	[S_I_DELETE] = "DELETE FROM items WHERE qid = ?1 AND seq = ?2",
	[S_I_OPEN] = "UPDATE items SET state = 1,"
	    " deliveries = min(deliveries + 1, 65535)"
	    " WHERE qid = ?1 AND seq = ?2",
	[S_I_CONFIRM] = "DELETE FROM items WHERE qid = ?1 AND seq = ?2"
	    " AND state = 1",
	[S_I_OPENLEN] = "SELECT length(data) FROM items"
	    " WHERE qid = ?1 AND seq = ?2 AND state = 1",
	[S_I_RELEASE] = "UPDATE items SET seq = ?3, state = 0"
	    " WHERE qid = ?1 AND seq = ?2",
	[S_I_OPENSEQS] = "SELECT seq, length(data) FROM items"
	    " WHERE qid = ?1 AND state = 1 ORDER BY seq",
	[S_I_MOVE] = "UPDATE items SET qid = ?3, seq = ?4, state = 0"
	    " WHERE qid = ?1 AND seq = ?2 AND state = 1",
	[S_I_OPENLIST] = "SELECT seq, flags, expires, created, data, @CRC@, @DLV@,"
	    " @ATR@"
	    " FROM items WHERE qid = ?1 AND state = 1 ORDER BY seq",
	[S_I_READYLIST] = "SELECT seq, flags, expires, created, data, @CRC@, @DLV@,"
	    " @ATR@"
	    " FROM items WHERE qid = ?1 AND seq >= ?2 AND state = 0 ORDER BY seq",
	[S_I_EXPIRED] = "SELECT seq, expires, length(data) FROM items"
	    " WHERE qid = ?1 AND seq >= ?2 AND state = 0 ORDER BY seq LIMIT ?3",
	[S_I_GET] = "SELECT seq, flags, expires, created, data, @CRC@, @DLV@,"
	    " @ATR@"
	    " FROM items WHERE qid = ?1 AND seq = ?2",
	[S_I_DELQ] = "DELETE FROM items WHERE qid = ?1",
	[S_D_INSERT] = "INSERT INTO delayed(due, seq, qid, flags, expires,"
	    " created, data, crc, deliveries, attrs)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	/* the columns of S_D_LIST, then qid */
	[S_D_DUE] = "SELECT due, seq, flags, expires, created, data, @CRC@,"
	    " @DLV@, @ATR@, qid FROM delayed WHERE due <= ?1 ORDER BY due, seq",
	[S_D_DELDUE] = "DELETE FROM delayed WHERE due <= ?1",
	[S_D_FIRST] = "SELECT due FROM delayed ORDER BY due, seq LIMIT 1",
	[S_D_LIST] = "SELECT due, seq, flags, expires, created, data, @CRC@,"
	    " @DLV@, @ATR@ FROM delayed WHERE qid = ?1 ORDER BY due, seq",
	[S_D_DELQ] = "DELETE FROM delayed WHERE qid = ?1",
	/* an open item into the delayed set (release_delayed): the row is
	 * copied as it is, count and checksum included; S_I_CONFIRM then
	 * deletes the open row */
	[S_D_RELEASE] = "INSERT INTO delayed(due, seq, qid, flags, expires,"
	    " created, data, crc, deliveries, attrs) SELECT ?3, ?4, qid, flags,"
	    " expires, created, data, crc, deliveries, attrs FROM items"
	    " WHERE qid = ?1 AND seq = ?2 AND state = 1",
	/* deduplication ids (store.h, DEDUPLICATION) */
	/* a new id in one statement; a kept one is renewed if it expired */
	[S_X_PUT] = "INSERT OR IGNORE INTO dedup(qid, key, expires)"
	    " VALUES (?1, ?2, ?3)",
	[S_X_RENEW] = "UPDATE dedup SET expires = ?3 WHERE qid = ?1"
	    " AND key = ?2 AND expires <= ?4",
	[S_X_DEL] = "DELETE FROM dedup WHERE qid = ?1 AND key = ?2",
	[S_X_FIRST] = "SELECT min(expires) FROM dedup WHERE qid = ?1",
	/* oldest first through dedup_expires; LIMIT -1: all */
	[S_X_SWEEP] = "DELETE FROM dedup WHERE qid = ?1 AND key IN (SELECT key"
	    " FROM dedup WHERE qid = ?1 AND expires <= ?2 ORDER BY expires"
	    " LIMIT ?3)",
	[S_X_LIST] = "SELECT key, expires FROM dedup WHERE qid = ?1",
	[S_X_DELQ] = "DELETE FROM dedup WHERE qid = ?1",
};

/* Format 5's additions, also the upgrade from older formats. */
#define SQ_SCHEMA_5 \
    "CREATE TABLE dedup(" \
    " qid INTEGER NOT NULL," \
    " key BLOB NOT NULL," \
    " expires INTEGER NOT NULL," \
    " PRIMARY KEY(qid, key)" \
    ") WITHOUT ROWID;" \
    "CREATE INDEX dedup_expires ON dedup(qid, expires);"


static const char sq_schema[] =
    "CREATE TABLE meta("
    " key TEXT PRIMARY KEY,"
    " value INTEGER NOT NULL"
    ") WITHOUT ROWID;"
    "CREATE TABLE queues("
    " id INTEGER PRIMARY KEY,"
    " name BLOB NOT NULL UNIQUE,"
    " head INTEGER NOT NULL,"
    " tail INTEGER NOT NULL,"
    " lo INTEGER NOT NULL,"
    " items INTEGER NOT NULL,"
    " bytes INTEGER NOT NULL,"
    " delayed_items INTEGER NOT NULL,"
    " open_items INTEGER NOT NULL,"
    " total_items INTEGER NOT NULL,"
    " expired_items INTEGER NOT NULL"
    ");"
    "CREATE TABLE items("
    " qid INTEGER NOT NULL,"
    " seq INTEGER NOT NULL,"
    " state INTEGER NOT NULL,"	/* 0 ready, 1 open */
    " flags INTEGER NOT NULL,"
    " expires INTEGER NOT NULL,"
    " created INTEGER NOT NULL,"
    " data BLOB NOT NULL,"
    " crc INTEGER,"
    " deliveries INTEGER NOT NULL DEFAULT 0,"
    " attrs BLOB,"
    " PRIMARY KEY(qid, seq)"
    ") WITHOUT ROWID;"
    "CREATE TABLE delayed("
    " due INTEGER NOT NULL,"
    " seq INTEGER NOT NULL,"
    " qid INTEGER NOT NULL,"
    " flags INTEGER NOT NULL,"
    " expires INTEGER NOT NULL,"
    " created INTEGER NOT NULL,"
    " data BLOB NOT NULL,"
    " crc INTEGER,"
    " deliveries INTEGER NOT NULL DEFAULT 0,"
    " attrs BLOB,"
    " PRIMARY KEY(due, seq)"
    ") WITHOUT ROWID;"
    "CREATE INDEX delayed_qid ON delayed(qid);"
    SQ_SCHEMA_5;

/* What commit() writes back for a queue; also the undo snapshot. */
struct sq_state {
	int64_t head;		/* every ready item has seq >= head */
	int64_t tail;		/* next seq appended */
	int64_t lo;		/* next seq released to the head */
	/* items..open too: the queues table holds them (format 1), so
	 * this driver keeps them, undone with the batch (own_counts) */
	uint64_t items, bytes, delayed, open, total, expired;
};

struct saker_queue {
	struct saker_queue_base base; /* the layer's (store.h): first */
	void *ctx;
	struct sq_state cur;	/* live */
	struct sq_state saved;	/* as of the last commit */
	bool fresh;		/* created in the current batch */
	bool dead;		/* deleted, or rolled back out of existence */
	enum { SQ_LIST_NONE, SQ_LIST_DIRTY, SQ_LIST_DELETED,
	    SQ_LIST_ZOMBIE } list;
	LIST_ENTRY(saker_queue) link;
	struct kit_qent qe;	/* name, len and id; in s->qt while live */
	/* per-operation undo (promote touches many queues) */
	unsigned touch_gen;
	struct sq_state undo;
	struct saker_queue *touch_next;
	uint64_t expired_to;
	char name[];		/* qe.len bytes, not terminated */
};

LIST_HEAD(sq_list, saker_queue);

/* An item's row as flush_expired and crash recovery collect it. */
struct sq_row {
	int64_t seq;
	size_t len;		/* of its data */
};

struct sq_store {
	saker_store base;
	sqlite3 *db;
	char *path;
	saker_sync_mode sync;
	bool read_only;
	int64_t version;	/* the file's format version */
	saker_notify_fn notify;
	void *notify_arg;
	sqlite3_stmt *st[S_COUNT];

	bool in_txn;		/* BEGIN IMMEDIATE done, COMMIT pending */
	bool lost;		/* SQLite rolled the batch back on an error */
	int lost_err;
	bool broken;		/* an fsync failed: refuse writes */
	/* the asynchronous commit (store.h): a batch in flight on the
	 * journal's flush thread, its start, a result collected early */
	bool stale;		/* its fdatasync failed: refuse reads too */
	bool no_async;		/* the flush thread could not be started */
	bool flight_wrote;	/* it changed rows (counted at its result) */
	bool flight_done;
	int flight_rc;
	uint64_t flight_t0;
	bool unsynced;		/* periodic: commits since the last sync() */
	int changes;		/* sqlite3_total_changes() at BEGIN */

	/* queues by name and by id */
	struct kit_qtab qt;	/* the live queues by name and id */
	struct sq_list dirty, deleted, zombies;

	int64_t next_qid;
	int64_t dseq, dseq_saved;	/* delayed arrival numbers */
	int64_t next_due;		/* earliest due time, 0 = none; may be early */

	unsigned gen;
	struct saker_queue *touched;
	bool in_op;		/* inside sq_sp_begin()..sq_sp_end() */

	uint64_t commits, fsyncs, commit_ns;
	uint64_t ckpts, ckpt_ns;	/* the WAL's checkpoints (sq_wal_hook()),
					 * counted when not journaled */
	bool ckpt_failing;	/* the last one failed (warned once) */

	/* --sync always: the redo journal (sqlite_redo.h) */
	bool journaled;		/* batches go to the journal, not to COMMIT */
	struct ltx lt;		/* the journal (fd -1 when not journaled) and
				 * the checkpoint policy (longtxn.h) */
	bool long_txn;		/* BEGIN done; a checkpoint COMMITs it */
	sqlite3_stmt *jst;	/* the writing statement whose binds are */
	size_t jst_mark;	/* recorded from this batch offset on */
	size_t op_mark;		/* batch offset when the operation began */
	bool jnomem;		/* an entry could not be recorded */
	bool redo_pending;	/* read-only: the journal needs a replay */
	char err[1024];
};

#define SQ(s) ((struct sq_store *)(void *)(s))

extern const struct saker_store_driver saker_store_sqlite;

static int sq_commit(saker_store *);

/* ------------------------------------------------------------------ */
/* errors */

static int
sq_errf(struct sq_store *s, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	return code;
}

static int
sq_map(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_FULL:
		return SAKER_EFULL;
	case SQLITE_NOMEM:
		return SAKER_ENOMEM;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return SAKER_ECORRUPT;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return SAKER_ELOCKED;
	case SQLITE_READONLY:
		return SAKER_EREADONLY;
	case SQLITE_CONSTRAINT:
	case SQLITE_MISMATCH:
	case SQLITE_RANGE:
	case SQLITE_TOOBIG:
		return SAKER_EINVAL;
	default:
		return SAKER_EIO;
	}
}

static void sq_lose_batch(struct sq_store *, int);
static void sq_rebuild(struct sq_store *);
static void sq_flight_wait(struct sq_store *);

/*
 * Record a failed SQLite call.  SQLite undoes just the failing statement
 * for most errors, but for some (I/O errors, a full disk while spilling the
 * cache) it rolls back the whole transaction: then the batch is gone, the
 * in-memory state goes back to the last commit and the next commit() fails.
 */
static int
sq_fail(struct sq_store *s, int rc, const char *what)
{
	int code = sq_map(rc);

	snprintf(s->err, sizeof(s->err), "sqlite %s: %s: %s", s->path, what,
	    sqlite3_errmsg(s->db));
	if (s->in_txn && sqlite3_get_autocommit(s->db))
		sq_lose_batch(s, code);
	else if (s->journaled && s->long_txn && sqlite3_get_autocommit(s->db))
		sq_rebuild(s);	/* between batches: none lost */
	return code;
}

/*
 * Journaled stores record what each writing statement runs with
 * (sqlite_redo.h).  A statement's values are bound together just before
 * it runs, so a bind to another writing statement drops what was
 * recorded for one that never ran.  Returns whether to record this bind.
 */
static bool
sq_rec_bind(struct sq_store *s, sqlite3_stmt *st)
{
	if (!s->journaled || sqlite3_stmt_readonly(st))
		return false;
	if (s->jst != st) {
		if (s->jst != NULL)
			lj_cut(&s->lt.j, s->jst_mark);
		s->jst = st;
		s->jst_mark = s->lt.j.len;
	}
	return true;
}

static void
sq_bind_i64(struct sq_store *s, sqlite3_stmt *st, int i, int64_t v)
{
	if (sq_rec_bind(s, st) && sr_int(&s->lt.j, i, v) != 0)
		s->jnomem = true;
	sqlite3_bind_int64(st, i, v);
}

static void
sq_bind_text(struct sq_store *s, sqlite3_stmt *st, int i, const char *v)
{
	if (sq_rec_bind(s, st) && sr_bytes(&s->lt.j, 't', i, v, strlen(v)) != 0)
		s->jnomem = true;
	sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
}

static void
sq_reset(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* Run a statement that returns no rows and reset it. */
static int
sq_exec(struct sq_store *s, int which, const char *what)
{
	sqlite3_stmt *st = s->st[which];
	bool rec = s->journaled && !sqlite3_stmt_readonly(st);
	size_t mark = s->lt.j.len;
	int rc;

	if (rec) {
		if (s->jst == st)
			mark = s->jst_mark;
		else if (s->jst != NULL)
			lj_cut(&s->lt.j, mark = s->jst_mark);
		s->jst = NULL;
		if (sr_exec(&s->lt.j, which) != 0)
			s->jnomem = true;
	}
	rc = sqlite3_step(st);
	sq_reset(st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
		if (rec)	/* it changed nothing: nothing to replay */
			lj_cut(&s->lt.j, mark);
		return sq_fail(s, rc, what);
	}
	return SAKER_OK;
}

/* Bind a blob; a failure (SQLITE_TOOBIG beyond SQLITE_LIMIT_LENGTH) is
 * reported, never left to bind NULL and fail later as a misleading
 * "NOT NULL constraint failed". */
static int
sq_bind_blob(struct sq_store *s, sqlite3_stmt *st, int i, const void *p,
    size_t len)
{
	int rc, limit = sqlite3_limit(s->db, SQLITE_LIMIT_LENGTH, -1);

	if (len > (size_t)limit)
		return sq_errf(s, SAKER_EINVAL, "sqlite: an item of %zu bytes is"
		    " larger than SQLite's limit of %d bytes", len, limit);
	/* A NULL pointer would bind SQL NULL; empty items are empty blobs. */
	rc = sqlite3_bind_blob(st, i, len > 0 ? p : "", (int)len, SQLITE_STATIC);
	if (rc == SQLITE_OK && sq_rec_bind(s, st) &&
	    sr_bytes(&s->lt.j, 'b', i, p, len) != 0)
		s->jnomem = true;
	if (rc != SQLITE_OK) {
		if (s->jst == st) {
			lj_cut(&s->lt.j, s->jst_mark);
			s->jst = NULL;
		}
		sq_reset(st);
		return sq_errf(s, rc == SQLITE_TOOBIG ? SAKER_EINVAL : SAKER_EIO,
		    "sqlite: cannot bind %zu bytes: %s", len, sqlite3_errstr(rc));
	}
	return SAKER_OK;
}

/* An item's checksum: its attributes, when it has some, continue the
 * CRC, so rows without them keep the checksum of format 2. */
static int64_t
sq_crc(const struct saker_item *it)
{
	uint32_t c = kit_item_crc(it->flags, it->expires_ms, it->created_ms,
	    it->data, it->len);

	return it->attrs_len > 0 ? kit_crc32c(c, it->attrs, it->attrs_len) : c;
}

/* Does the item read from column `c` of st's row hold its checksum?
 * Rows from before format 2 (NULL) pass. */
static bool
sq_row_sound(sqlite3_stmt *st, int c, const struct saker_item *it)
{
	if (sqlite3_column_type(st, c) == SQLITE_NULL)
		return true;
	return sqlite3_column_int64(st, c) == sq_crc(it);
}

/* The item in st's row from column c on: seq, flags, expires, created,
 * data, checksum, deliveries, attributes (every item listing's order).  A
 * view: data and attributes stay valid until st moves on. */
static void
sq_row_item(sqlite3_stmt *st, int c, saker_item_state state,
    struct saker_item *it)
{
	memset(it, 0, sizeof(*it));
	it->id = (uint64_t)sqlite3_column_int64(st, c);
	it->flags = (uint32_t)sqlite3_column_int64(st, c + 1);
	it->expires_ms = sqlite3_column_int64(st, c + 2);
	it->created_ms = sqlite3_column_int64(st, c + 3);
	it->data = sqlite3_column_blob(st, c + 4);
	it->len = (size_t)sqlite3_column_bytes(st, c + 4);
	if (it->data == NULL)
		it->data = "";
	it->deliveries = (uint32_t)sqlite3_column_int64(st, c + 6);
	it->attrs = sqlite3_column_blob(st, c + 7);	/* NULL: none */
	it->attrs_len = it->attrs != NULL ?
	    (size_t)sqlite3_column_bytes(st, c + 7) : 0;
	it->state = state;
}

/* Run item listing `which` for q from seq on and read its first row into
 * *it, a view until the statement is reset.  SAKER_EEMPTY: no row (the
 * statement is reset, as on an error). */
static int
sq_read_item(struct sq_store *s, struct saker_queue *q, int which,
    int64_t seq, struct saker_item *it, const char *what)
{
	sqlite3_stmt *st = s->st[which];
	int rc;

	sq_bind_i64(s, st, 1, q->qe.id);
	sq_bind_i64(s, st, 2, seq);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		sq_row_item(st, 0, SAKER_ITEM_READY, it);
		return SAKER_OK;
	}
	sq_reset(st);
	return rc == SQLITE_DONE ? SAKER_EEMPTY : sq_fail(s, rc, what);
}

/* ------------------------------------------------------------------ */
/* queue tables */

#define SQ_Q(e) KIT_QENT_QUEUE(e, struct saker_queue, qe)

static struct saker_queue *
sq_queue_new(const char *name, size_t len, int64_t id)
{
	struct saker_queue *q;

	q = calloc(1, sizeof(*q) + len);
	if (q == NULL)
		return NULL;
	memcpy(q->name, name, len);
	q->qe.name = q->name;
	q->qe.len = len;
	q->qe.id = id;
	q->cur.head = SQ_SEQ_BASE;
	q->cur.tail = SQ_SEQ_BASE;
	q->cur.lo = SQ_SEQ_BASE - 1;
	q->saved = q->cur;
	return q;
}

static void
sq_unlist(struct saker_queue *q)
{
	if (q->list != SQ_LIST_NONE)
		LIST_REMOVE(q, link);
	q->list = SQ_LIST_NONE;
}

static void
sq_mark_dirty(struct sq_store *s, struct saker_queue *q)
{
	if (q->list == SQ_LIST_DIRTY)
		return;
	sq_unlist(q);
	LIST_INSERT_HEAD(&s->dirty, q, link);
	q->list = SQ_LIST_DIRTY;
}

static void
sq_touch(struct sq_store *s, struct saker_queue *q)
{
	if (q->touch_gen == s->gen)
		return;
	q->touch_gen = s->gen;
	q->undo = q->cur;
	q->touch_next = s->touched;
	s->touched = q;
	sq_mark_dirty(s, q);
}

/* ------------------------------------------------------------------ */
/* batches */

static void
sq_refresh_next_due(struct sq_store *s)
{
	sqlite3_stmt *st = s->st[S_D_FIRST];
	int rc;

	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		s->next_due = sqlite3_column_int64(st, 0);
	else if (rc == SQLITE_DONE)
		s->next_due = 0;
	else
		s->next_due = 1;	/* unknown: make the next promote() look */
	sq_reset(st);
}

/* Put the in-memory state back to the last commit. */
static void
sq_restore(struct sq_store *s)
{
	struct saker_queue *q;

	while ((q = LIST_FIRST(&s->dirty)) != NULL) {
		sq_unlist(q);
		if (q->fresh) {
			/* It never existed on disk.  The caller may still hold
			 * the handle, so keep the memory until close(). */
			kit_qtab_remove(&s->qt, &q->qe);
			q->dead = true;
			q->fresh = false;
			LIST_INSERT_HEAD(&s->zombies, q, link);
			q->list = SQ_LIST_ZOMBIE;
			continue;
		}
		q->cur = q->saved;
	}
	while ((q = LIST_FIRST(&s->deleted)) != NULL) {
		sq_unlist(q);
		q->cur = q->saved;
		q->dead = false;
		if (kit_qtab_add(&s->qt, &q->qe) != 0) {
			/* cannot happen: the table had room for it before */
			q->dead = true;
			LIST_INSERT_HEAD(&s->zombies, q, link);
			q->list = SQ_LIST_ZOMBIE;
		}
	}
	s->dseq = s->dseq_saved;
	s->touched = NULL;
}

/* ------------------------------------------------------------------ */
/* the redo journal (--sync always; sqlite_redo.h) */

static int
sq_redo_apply(void *arg, const unsigned char *p, size_t len)
{
	struct sq_store *s = arg;

	/* SQLITE_OK is 0, what lj_replay() takes for success */
	return sr_apply(s->st, S_COUNT, p, len, s->lt.j.err, sizeof(s->lt.j.err));
}

/* Run a transaction statement. */
static int
sq_step(struct sq_store *s, int which)
{
	int rc = sqlite3_step(s->st[which]);

	sqlite3_reset(s->st[which]);
	return rc;
}

/* Write meta key = v past the journal: the journal's own bookkeeping,
 * which a replay must not redo.  Returns SQLite's result. */
static int
sq_meta_put(struct sq_store *s, const char *key, int64_t v)
{
	sqlite3_stmt *m = s->st[S_META_SET];
	int rc;

	sqlite3_bind_text(m, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(m, 2, v);
	rc = sqlite3_step(m);
	sq_reset(m);
	return rc;
}

/*
 * The long transaction for the engine (longtxn.h): SQLite's mechanism
 * under its checkpoint policy.
 */
static int
lt_begin(void *arg)
{
	struct sq_store *s = arg;
	int rc = sq_step(s, S_BEGIN);

	if (rc != SQLITE_DONE) {
		snprintf(s->lt.err, sizeof(s->lt.err), "begin: %s",
		    sqlite3_errmsg(s->db));
		return rc;
	}
	s->long_txn = true;
	return 0;
}

static void
lt_abort(void *arg)
{
	struct sq_store *s = arg;

	if (!sqlite3_get_autocommit(s->db))
		sq_step(s, S_ROLLBACK);
	s->long_txn = false;
}

/* SQLite's synced commit with "journal_seq" = seq.  A failed fsync is
 * fatal (the WAL's pages may be gone); anything else (a full disk, say)
 * leaves the journal holding every batch until a later try succeeds. */
static int
lt_commit(void *arg, uint64_t seq, bool *fatal)
{
	struct sq_store *s = arg;
	int rc;

	rc = sq_meta_put(s, "journal_seq", (int64_t)seq);
	if (rc == SQLITE_DONE)
		rc = sq_step(s, S_COMMIT);
	if (rc == SQLITE_DONE) {
		s->long_txn = false;
		return 0;
	}
	snprintf(s->err, sizeof(s->err), "sqlite %s: checkpoint: %s",
	    s->path, sqlite3_errmsg(s->db));
	*fatal = rc == SQLITE_IOERR_FSYNC || rc == SQLITE_IOERR_DIR_FSYNC;
	lt_abort(s);
	return rc;
}

static const struct ltx_ops sq_ltx_ops = {
	.begin = lt_begin,
	.apply = sq_redo_apply,
	.commit = lt_commit,
	.abort = lt_abort,
};

/*
 * SQLite rolled back the long transaction (or is told to): rebuild it
 * (ltx_rebuild()), so that it holds every acknowledged batch again.  When
 * even that fails the store refuses writes; the next open replays the
 * journal.
 */
static void
sq_rebuild(struct sq_store *s)
{
	uint64_t n;

	sq_flight_wait(s);	/* the journal must end where it says */
	if (s->stale)
		return;
	n = s->lt.j.seq - s->lt.ckpt_seq;
	s->jst = NULL;
	if (ltx_rebuild(&s->lt) == 0) {
		if (n > 0)
			log_warn("sqlite %s: the transaction since the last "
			    "checkpoint was rolled back; %" PRIu64 " batches "
			    "replayed from the journal", s->path, n);
		return;
	}
	s->broken = true;
	snprintf(s->err, sizeof(s->err), "sqlite %s: the transaction since the"
	    " last checkpoint was rolled back and replaying the journal failed"
	    " (%s); refusing writes until restart, which replays it again",
	    s->path, s->lt.err);
	log_error("%s", s->err);
}

/* Undo the current batch alone (its savepoint); the long transaction,
 * with the batches before it, stays. */
static void
sq_drop_batch(struct sq_store *s)
{
	int rc = sq_step(s, S_BSP_ROLLBACK);

	if (rc == SQLITE_DONE)
		rc = sq_step(s, S_BSP_RELEASE);
	lj_cut(&s->lt.j, 0);
	s->jst = NULL;
	if (rc != SQLITE_DONE || sqlite3_get_autocommit(s->db))
		sq_rebuild(s);
}

/*
 * Checkpoint (ltx_checkpoint()): the long transaction committed, the
 * journal starts again.  A failure leaves every acknowledged batch in the
 * journal and the long transaction rebuilt from it.
 */
static int
sq_checkpoint(struct sq_store *s)
{
	bool fatal, rebuilt;
	int rc;

	if (!s->long_txn || s->broken)
		return SAKER_OK;
	if (sqlite3_get_autocommit(s->db)) {	/* rolled back under us */
		sq_rebuild(s);
		return s->broken ? SAKER_EIO : SAKER_OK;
	}
	rc = ltx_checkpoint(&s->lt, &fatal, &rebuilt);
	if (rc == 0) {
		s->ckpt_failing = false;
		log_debug("sqlite checkpoint: %" PRIu64 " us, journal batches up "
		    "to %" PRIu64, s->lt.last_ns / 1000, s->lt.ckpt_seq);
		return SAKER_OK;
	}
	if (!s->ckpt_failing)
		log_warn("%s; the journal keeps every batch until one succeeds",
		    s->err);
	s->ckpt_failing = true;
	if (!rebuilt) {
		s->broken = true;
		snprintf(s->err, sizeof(s->err), "sqlite %s: checkpoint failed "
		    "and replaying the journal failed (%s); refusing writes "
		    "until restart, which replays it again", s->path, s->lt.err);
		log_error("%s", s->err);
	}
	if (fatal) {
		s->broken = true;
		return SAKER_EIO;
	}
	return sq_map(rc);
}

/* The batch's record into the journal, flushed; then the batch joins the
 * long transaction. */
static int
sq_batch_end(struct sq_store *s, bool async, bool *started)
{
	int rc, err;

	if (s->jnomem)
		return sq_errf(s, SAKER_ENOMEM, "sqlite %s: out of memory for "
		    "the batch's journal record", s->path);
	if (sqlite3_get_autocommit(s->db))
		return sq_errf(s, SAKER_EIO, "sqlite %s: the transaction was "
		    "rolled back during the batch", s->path);
	if (s->jst != NULL) {	/* values bound to a statement never run */
		lj_cut(&s->lt.j, s->jst_mark);
		s->jst = NULL;
	}
	/* a checkpoint must follow its batch before the next one gathers
	 * into the long transaction: that batch commits synchronously */
	if (async && (s->no_async || s->lt.j.len == 0 ||
	    ltx_due(&s->lt, saker_mono_ns())))
		async = false;
	err = SAKER_OK;
	if (async) {
		err = ltx_write_start(&s->lt);
		if (err == SAKER_EINVAL) {
			log_warn("sqlite %s: %s; committing synchronously",
			    s->path, s->lt.err);
			s->no_async = true;
			async = false;
		} else if (err == SAKER_OK)
			*started = true;
	}
	if (!async && s->lt.j.len > 0)
		err = ltx_write(&s->lt, true);
	if (err != SAKER_OK) {
		if (err == SAKER_EFULL || err == SAKER_ENOMEM)
			return sq_errf(s, err, "sqlite %s: batch rolled back: %s",
			    s->path, s->lt.err);
		s->broken = true;	/* as for SQLite's own fsync */
		return sq_errf(s, err, "sqlite %s: commit failed%s: %s; refusing"
		    " writes until restart", s->path, err == SAKER_EINDOUBT ?
		    " and may or may not have reached the disk" :
		    ", batch rolled back", s->lt.err);
	}
	rc = sq_step(s, S_BSP_RELEASE);
	s->in_txn = false;
	if (rc != SQLITE_DONE || sqlite3_get_autocommit(s->db))
		sq_rebuild(s);	/* the journal has the batch now */
	if (*started)
		return SAKER_OK;
	if (!s->broken && ltx_due(&s->lt, saker_mono_ns()))
		(void)sq_checkpoint(s);	/* the batch is durable anyway */
	return SAKER_OK;
}

/* The batch is gone from the database: memory goes back to the last
 * commit, and the batch's operations fail until commit() reports it. */
static void
sq_batch_lost(struct sq_store *s, int code)
{
	s->in_txn = false;
	s->lost = true;
	s->lost_err = code;
	sq_restore(s);
	sq_refresh_next_due(s);
}

/* SQLite rolled the batch's transaction back on its own. */
static void
sq_lose_batch(struct sq_store *s, int code)
{
	if (s->journaled) {
		/* the long transaction: every batch since the last
		 * checkpoint, not just this one */
		sq_rebuild(s);
	}
	sq_batch_lost(s, code);
}

/* Make sure a write transaction is open; every write goes through here. */
static int
sq_begin(struct sq_store *s)
{
	int rc;

	if (s->read_only)
		return sq_errf(s, SAKER_EREADONLY, "sqlite %s: opened read-only",
		    s->path);
	if (s->broken)
		return sq_errf(s, SAKER_EREADONLY, "sqlite %s: an fsync failed;"
		    " refusing writes until restart", s->path);
	if (s->lost)
		return sq_errf(s, s->lost_err, "sqlite %s: the batch was rolled"
		    " back by an earlier error; commit to start again", s->path);
	if (s->journaled && s->long_txn && sqlite3_get_autocommit(s->db)) {
		/* SQLite rolled the long transaction back on an error that
		 * came through no write (a read's, say): rebuild it before
		 * anything runs outside it, and fail the batch under way */
		if (s->in_txn) {
			sq_lose_batch(s, SAKER_EIO);
			return sq_errf(s, SAKER_EIO, "sqlite %s: the batch was "
			    "rolled back by an earlier error; commit to start "
			    "again", s->path);
		}
		sq_rebuild(s);
		if (s->broken)
			return sq_errf(s, SAKER_EREADONLY, "%s", s->err);
	}
	if (s->in_txn)
		return SAKER_OK;
	/* journaled: one long transaction, a savepoint a batch */
	if (!s->long_txn) {
		if ((rc = sq_step(s, S_BEGIN)) != SQLITE_DONE)
			return sq_fail(s, rc, "begin");
		s->long_txn = s->journaled;
	}
	if (s->journaled && (rc = sq_step(s, S_BSP)) != SQLITE_DONE)
		return sq_fail(s, rc, "begin batch");
	s->jnomem = false;
	s->in_txn = true;
	s->changes = sqlite3_total_changes(s->db);
	return SAKER_OK;
}

/* Savepoints make multi-statement operations all-or-nothing. */
static int
sq_sp_begin(struct sq_store *s)
{
	int err;

	if ((err = sq_begin(s)) != SAKER_OK)
		return err;
	s->gen++;	/* a new operation: sq_touch() records queues anew */
	s->touched = NULL;
	s->op_mark = s->lt.j.len;
	if ((err = sq_exec(s, S_SP, "savepoint")) == SAKER_OK)
		s->in_op = true;
	return err;
}

static int
sq_sp_end(struct sq_store *s, int err)
{
	struct saker_queue *q;
	int rc;

	s->in_op = false;
	if (err == SAKER_OK) {
		err = sq_exec(s, S_SP_RELEASE, "release savepoint");
		if (err == SAKER_OK)
			return SAKER_OK;
	}
	for (q = s->touched; q != NULL; q = q->touch_next)
		q->cur = q->undo;	/* the operation's queues as they were */
	s->touched = NULL;
	if (!s->in_txn)
		return err;	/* sq_fail() already dropped the batch */
	if (!sqlite3_get_autocommit(s->db)) {
		rc = sq_step(s, S_SP_ROLLBACK);
		if (rc == SQLITE_DONE)
			rc = sq_step(s, S_SP_RELEASE);
		/* cannot undo just this operation: drop the batch */
		if (rc != SQLITE_DONE && s->journaled) {
			sq_drop_batch(s);
			sq_batch_lost(s, err);
			return err;
		}
		if (rc != SQLITE_DONE) {
			sq_step(s, S_ROLLBACK);
		} else if (s->journaled) {
			lj_cut(&s->lt.j, s->op_mark);	/* undone: not replayed */
			s->jst = NULL;
		}
	}
	if (sqlite3_get_autocommit(s->db))
		sq_lose_batch(s, err);
	return err;
}

static int
sq_write_queue(struct sq_store *s, struct saker_queue *q)
{
	int which = q->fresh ? S_Q_INSERT : S_Q_UPDATE;
	sqlite3_stmt *st = s->st[which];
	/* ?3 .. ?11 */
	const int64_t v[] = { q->cur.head, q->cur.tail, q->cur.lo,
	    (int64_t)q->cur.items, (int64_t)q->cur.bytes,
	    (int64_t)q->cur.delayed, (int64_t)q->cur.open,
	    (int64_t)q->cur.total, (int64_t)q->cur.expired };
	int err, i;

	sq_bind_i64(s, st, 1, q->qe.id);
	if (q->fresh && (err = sq_bind_blob(s, st, 2, q->name, q->qe.len)) !=
	    SAKER_OK)
		return err;
	for (i = 0; i < 9; i++)
		sq_bind_i64(s, st, 3 + i, v[i]);
	return sq_exec(s, which, "write queue");
}

/* commit(), or with `async` commit_start(): the journal record goes to
 * the flush thread (*started) unless a checkpoint is due. */
static int
sq_commit_x(saker_store *base, bool async, bool *started)
{
	struct sq_store *s = SQ(base);
	struct saker_queue *q;
	uint64_t t0;
	bool wrote;
	int err, rc;

	if (s->lost) {
		s->lost = false;
		return sq_errf(s, s->lost_err, "sqlite %s: batch rolled back by an"
		    " earlier error", s->path);
	}
	if (!s->in_txn && LIST_EMPTY(&s->dirty) && LIST_EMPTY(&s->deleted) &&
	    s->dseq == s->dseq_saved)
		return SAKER_OK;
	t0 = saker_mono_ns();
	if ((err = sq_begin(s)) != SAKER_OK)
		goto fail;
	LIST_FOREACH(q, &s->dirty, link) {
		if ((err = sq_write_queue(s, q)) != SAKER_OK)
			goto fail;
	}
	if (s->dseq != s->dseq_saved) {
		sq_bind_text(s, s->st[S_META_SET], 1, "dseq");
		sq_bind_i64(s, s->st[S_META_SET], 2, s->dseq);
		if ((err = sq_exec(s, S_META_SET, "write meta")) != SAKER_OK)
			goto fail;
	}
	wrote = sqlite3_total_changes(s->db) != s->changes;
	if (s->journaled) {
		if ((err = sq_batch_end(s, async && s->sync ==
		    SAKER_SYNC_ALWAYS, started)) != SAKER_OK)
			goto fail;
	} else if ((rc = sq_step(s, S_COMMIT)) != SQLITE_DONE) {
		err = sq_fail(s, rc, "commit");
		if (rc == SQLITE_IOERR_FSYNC || rc == SQLITE_IOERR_DIR_FSYNC) {
			/* As in sq_sync(): after a failed fsync the kernel may
			 * have dropped dirty pages of the WAL, so nothing can
			 * be vouched for any more (fail-stop). */
			s->broken = true;
			snprintf(s->err, sizeof(s->err), "sqlite %s: fsync "
			    "failed at commit; refusing writes until restart",
			    s->path);
			err = SAKER_EINDOUBT;
		}
		goto fail;
	}
	s->in_txn = false;
	while ((q = LIST_FIRST(&s->dirty)) != NULL) {
		sq_unlist(q);
		q->saved = q->cur;
		q->fresh = false;
	}
	while ((q = LIST_FIRST(&s->deleted)) != NULL) {
		sq_unlist(q);
		free(q);
	}
	s->dseq_saved = s->dseq;
	if (*started) {
		/* counted when its result comes (sq_flight_collect) */
		s->flight_wrote = wrote;
		s->flight_t0 = t0;
		return SAKER_OK;
	}
	if (wrote) {
		s->commits++;
		if (s->sync == SAKER_SYNC_ALWAYS)
			s->fsyncs++;
		else if (s->sync == SAKER_SYNC_PERIODIC)
			s->unsynced = true;
	}
	s->commit_ns += saker_mono_ns() - t0;
	return SAKER_OK;

fail:
	if (s->lost) {
		/* sq_fail() already rolled everything back */
		s->lost = false;
		return err;
	}
	if (s->in_txn) {
		if (s->journaled)
			sq_drop_batch(s);
		else if (!sqlite3_get_autocommit(s->db))
			sq_step(s, S_ROLLBACK);
		s->in_txn = false;
		sq_restore(s);
		sq_refresh_next_due(s);
	}
	return err;
}

static int
sq_commit(saker_store *base)
{
	bool started = false;

	return sq_commit_x(base, false, &started);
}

static int
sq_commit_start(saker_store *base, bool *started)
{
	*started = false;
	return sq_commit_x(base, true, started);
}

/*
 * Collect the result of the batch in flight, waiting for it.  When its
 * write or fdatasync failed, memory and the long transaction already hold
 * it and the batch gathered on top: rather than unpick two batches the
 * store rolls its long transaction back and refuses every call, reads
 * too, until reopened, when the journal says what reached the disk.
 */
static int
sq_flight_collect(struct sq_store *s)
{
	int code;

	if (!s->lt.j.inflight)
		return SAKER_OK;
	code = ltx_write_finish(&s->lt);
	if (code == SAKER_OK) {
		if (s->flight_wrote) {
			s->commits++;
			s->fsyncs++;
		}
		s->commit_ns += saker_mono_ns() - s->flight_t0;
		return SAKER_OK;
	}
	s->stale = true;
	s->broken = true;
	s->in_txn = false;
	s->lost = false;
	s->jst = NULL;
	lj_cut(&s->lt.j, 0);
	sq_restore(s);
	lt_abort(s);
	return sq_errf(s, code, "sqlite %s: commit failed%s, this batch and "
	    "the next rolled back, store must be reopened: %s", s->path,
	    code == SAKER_EINDOUBT ? " and may or may not have reached the "
	    "disk" : "", s->lt.err);
}

/* A rebuild must not run with a batch in flight: its result now, kept
 * for commit_finish(), whose caller still waits for the descriptor. */
static void
sq_flight_wait(struct sq_store *s)
{
	if (!s->lt.j.inflight)
		return;
	s->flight_rc = sq_flight_collect(s);
	s->flight_done = true;
	lj_flush_poke(&s->lt.j, true);
}

static int
sq_commit_fd(saker_store *base)
{
	struct sq_store *s = SQ(base);

	return s->lt.j.inflight || s->flight_done ? ltx_flush_fd(&s->lt) : -1;
}

static int
sq_commit_finish(saker_store *base)
{
	struct sq_store *s = SQ(base);

	if (s->flight_done) {
		s->flight_done = false;
		lj_flush_poke(&s->lt.j, false);
		return s->flight_rc;
	}
	return sq_flight_collect(s);
}

static int
sq_sync(saker_store *base)
{
	struct sq_store *s = SQ(base);
	sqlite3_file *wal = NULL;
	int rc;

	if (s->sync != SAKER_SYNC_PERIODIC || !s->unsynced || s->read_only)
		return SAKER_OK;
	/*
	 * With synchronous=NORMAL a WAL commit is written but not fsynced;
	 * checkpoints fsync the WAL before copying it and the database after.
	 * So everything committed is durable once the WAL file is fsynced.
	 * A checkpoint would not do: it skips the fsync when an outside
	 * reader keeps it from copying anything.
	 */
	rc = sqlite3_file_control(s->db, "main", SQLITE_FCNTL_JOURNAL_POINTER,
	    &wal);
	if (rc != SQLITE_OK || wal == NULL || wal->pMethods == NULL) {
		rc = sqlite3_wal_checkpoint_v2(s->db, "main",
		    SQLITE_CHECKPOINT_FULL, NULL, NULL);
		if (rc != SQLITE_OK && rc != SQLITE_BUSY)
			goto fail;
	} else if ((rc = wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL)) !=
	    SQLITE_OK)
		goto fail;
	s->fsyncs++;
	s->unsynced = false;
	return SAKER_OK;

fail:
	/* After a failed fsync the kernel may have dropped the dirty pages:
	 * what was acknowledged can no longer be vouched for. */
	s->broken = true;
	return sq_errf(s, SAKER_EIO, "sqlite %s: fsync of the WAL failed (%d);"
	    " refusing writes until restart", s->path, rc);
}

/* ------------------------------------------------------------------ */
/* queues */

static int
sq_queue_open(saker_store *base, const char *name, size_t len, bool create,
    void *queue_ctx, saker_queue **out)
{
	struct sq_store *s = SQ(base);
	struct saker_queue *q;
	struct kit_qent *e;

	*out = NULL;
	if (name == NULL || len == 0)
		return sq_errf(s, SAKER_EINVAL, "empty queue name");
	if ((e = kit_qtab_by_name(&s->qt, name, len)) != NULL) {
		q = SQ_Q(e);
		if (queue_ctx != NULL)
			q->ctx = queue_ctx;
		*out = q;
		return SAKER_OK;
	}
	if (!create)
		return sq_errf(s, SAKER_ENOTFOUND, "no such queue");
	if (s->read_only || s->lost || s->broken)
		return sq_begin(s);	/* for its error */
	if ((q = sq_queue_new(name, len, s->next_qid)) == NULL)
		return sq_errf(s, SAKER_ENOMEM, "out of memory");
	if (kit_qtab_add(&s->qt, &q->qe) != 0) {
		free(q);
		return sq_errf(s, SAKER_ENOMEM, "out of memory");
	}
	/* The row is written by commit() with the counters. */
	s->next_qid++;
	q->fresh = true;
	q->ctx = queue_ctx;
	sq_mark_dirty(s, q);
	*out = q;
	return SAKER_OK;
}

static int
sq_dead(struct sq_store *s, struct saker_queue *q)
{
	if (s->stale)
		return sq_errf(s, SAKER_EIO, "sqlite %s: a commit's fdatasync "
		    "failed with the next batch on top; reopen the store",
		    s->path);
	if (q == NULL || q->dead)
		return sq_errf(s, SAKER_ENOTFOUND, "no such queue");
	return SAKER_OK;
}

/* Delete every item of q (ready, open, delayed) and, when `drop`, q
 * itself with its deduplication ids, all or nothing (queue_delete,
 * queue_flush). */
static int
sq_clear(struct sq_store *s, struct saker_queue *q, bool drop)
{
	int err;

	if ((err = sq_dead(s, q)) != SAKER_OK ||
	    (err = sq_sp_begin(s)) != SAKER_OK)
		return err;
	sq_bind_i64(s, s->st[S_I_DELQ], 1, q->qe.id);
	err = sq_exec(s, S_I_DELQ, "delete items");
	if (err == SAKER_OK && q->cur.delayed != 0) {
		sq_bind_i64(s, s->st[S_D_DELQ], 1, q->qe.id);
		err = sq_exec(s, S_D_DELQ, "delete delayed items");
	}
	if (err == SAKER_OK && drop) {
		sq_bind_i64(s, s->st[S_X_DELQ], 1, q->qe.id);
		err = sq_exec(s, S_X_DELQ, "delete deduplication ids");
	}
	if (err == SAKER_OK && drop && !q->fresh) {
		sq_bind_i64(s, s->st[S_Q_DELETE], 1, q->qe.id);
		err = sq_exec(s, S_Q_DELETE, "delete queue");
	}
	if ((err = sq_sp_end(s, err)) != SAKER_OK)
		return err;
	if (q->cur.delayed != 0)
		sq_refresh_next_due(s);	/* the earliest may have gone */
	if (!drop) {
		sq_mark_dirty(s, q);
		q->cur.items = q->cur.bytes = q->cur.delayed = q->cur.open = 0;
		q->cur.head = q->cur.tail;
		return SAKER_OK;
	}
	kit_qtab_remove(&s->qt, &q->qe);
	sq_unlist(q);
	q->dead = true;
	if (q->fresh) {
		free(q);
	} else {
		LIST_INSERT_HEAD(&s->deleted, q, link);
		q->list = SQ_LIST_DELETED;
	}
	return SAKER_OK;
}

static int
sq_queue_delete(saker_store *base, saker_queue *q)
{
	return sq_clear(SQ(base), q, true);
}

static int
sq_queue_flush(saker_store *base, saker_queue *q)
{
	return sq_clear(SQ(base), q, false);
}

static int
sq_queues(saker_store *base, saker_queue_name_fn fn, void *arg)
{
	struct sq_store *s = SQ(base);
	struct kit_qent *e;
	size_t i = 0;
	int r;

	for (e = kit_qtab_next(&s->qt, &i, NULL); e != NULL;
	    e = kit_qtab_next(&s->qt, &i, e))
		if ((r = fn(arg, e->name, e->len)) != 0)
			return r;
	return SAKER_OK;
}

static int
sq_queue_stats(saker_store *base, saker_queue *q, struct saker_queue_stats *st)
{
	struct sq_store *s = SQ(base);
	struct saker_item it;
	int err;

	memset(st, 0, sizeof(*st));
	if ((err = sq_dead(s, q)) != SAKER_OK)
		return err;
	st->items = q->cur.items;
	st->bytes = q->cur.bytes;
	st->delayed_items = q->cur.delayed;
	st->open_items = q->cur.open;
	st->total_items = q->cur.total;
	st->expired_items = q->cur.expired;
	st->expired_to = q->expired_to;
	if (q->cur.items == 0)
		return SAKER_OK;
	if ((err = sq_read_item(s, q, S_I_HEAD, q->cur.head, &it,
	    "read queue head")) != SAKER_OK)
		return err == SAKER_EEMPTY ? SAKER_OK : err;
	st->head_created_ms = it.created_ms;
	sq_reset(s->st[S_I_HEAD]);
	return SAKER_OK;
}

/* ------------------------------------------------------------------ */
/* items */

static void
sq_notify(struct sq_store *s, struct saker_queue *q)
{
	if (s->notify != NULL)
		s->notify(s->notify_arg, q, q->ctx);
}

/* Bind the item's flags, expiry, creation time, data, checksum, delivery
 * count and attributes to st's parameters from `first` on (S_I_INSERT,
 * S_D_INSERT).  crc NULL: a row moved from before format 2 stays
 * unchecked.  No attributes leave attrs NULL. */
static int
sq_bind_item(struct sq_store *s, sqlite3_stmt *st, int first,
    const struct saker_item *it, const int64_t *crc)
{
	int err;

	sq_bind_i64(s, st, first, it->flags);
	sq_bind_i64(s, st, first + 1, it->expires_ms);
	sq_bind_i64(s, st, first + 2, it->created_ms);
	if ((err = sq_bind_blob(s, st, first + 3, it->data, it->len)) !=
	    SAKER_OK)
		return err;
	if (crc != NULL)
		sq_bind_i64(s, st, first + 4, *crc);
	sq_bind_i64(s, st, first + 5, it->deliveries);
	if (it->attrs_len > 0)
		return sq_bind_blob(s, st, first + 6, it->attrs, it->attrs_len);
	return SAKER_OK;
}

/* Append one ready item at q's tail (caller has begun the batch). */
static int
sq_append(struct sq_store *s, struct saker_queue *q,
    const struct saker_item *it, const int64_t *crc)
{
	sqlite3_stmt *st = s->st[S_I_INSERT];
	int err;

	sq_bind_i64(s, st, 1, q->qe.id);
	sq_bind_i64(s, st, 2, q->cur.tail);
	if ((err = sq_bind_item(s, st, 3, it, crc)) != SAKER_OK ||
	    (err = sq_exec(s, S_I_INSERT, "insert item")) != SAKER_OK)
		return err;
	sq_mark_dirty(s, q);
	q->cur.tail++;
	q->cur.items++;
	q->cur.bytes += it->len;
	return SAKER_OK;
}

static int
sq_put(saker_store *base, saker_queue *q, const struct saker_item *item,
    int64_t now_ms)
{
	struct sq_store *s = SQ(base);
	sqlite3_stmt *st = s->st[S_D_INSERT];
	struct saker_item it;
	int64_t crc;
	int err;

	if ((err = sq_dead(s, q)) != SAKER_OK)
		return err;
	if (item == NULL || (item->data == NULL && item->len > 0) ||
	    (item->attrs == NULL && item->attrs_len > 0) ||
	    item->attrs_len > SAKER_ATTRS_MAX)
		return sq_errf(s, SAKER_EINVAL, "bad item");
	if ((err = sq_begin(s)) != SAKER_OK)
		return err;
	/* an expired item promote() routes here: undone with promote */
	if (s->in_op)
		sq_touch(s, q);
	it = *item;
	if (it.created_ms == 0)
		it.created_ms = now_ms;
	crc = sq_crc(&it);
	if (it.due_ms <= now_ms) {
		if ((err = sq_append(s, q, &it, &crc)) != SAKER_OK)
			return err;
		q->cur.total++;
		sq_notify(s, q);	/* the layer wakes q once per call */
		return SAKER_OK;
	}
	sq_bind_i64(s, st, 1, it.due_ms);
	sq_bind_i64(s, st, 2, s->dseq);
	sq_bind_i64(s, st, 3, q->qe.id);
	if ((err = sq_bind_item(s, st, 4, &it, &crc)) != SAKER_OK ||
	    (err = sq_exec(s, S_D_INSERT, "insert delayed item")) != SAKER_OK)
		return err;
	s->dseq++;
	sq_mark_dirty(s, q);
	q->cur.delayed++;
	q->cur.total++;
	if (s->next_due == 0 || item->due_ms < s->next_due)
		s->next_due = item->due_ms;
	return SAKER_OK;
}

/* Take the item at seq (ready, at the head; len bytes) off q's ready
 * items and account for it: `which` S_I_DELETE deletes it (counted as
 * expired when `expired`), S_I_OPEN opens it. */
static int
sq_remove_ready(struct sq_store *s, struct saker_queue *q, int which,
    int64_t seq, size_t len, bool expired)
{
	sqlite3_stmt *st = s->st[which];
	int err;

	sq_bind_i64(s, st, 1, q->qe.id);
	sq_bind_i64(s, st, 2, seq);
	if ((err = sq_exec(s, which, which == S_I_OPEN ? "open item" :
	    "delete item")) != SAKER_OK)
		return err;
	sq_mark_dirty(s, q);
	q->cur.items--;
	q->cur.bytes -= len;
	if (which == S_I_OPEN)
		q->cur.open++;
	if (expired)
		q->cur.expired++;
	return SAKER_OK;
}

/*
 * The head of q (row of statement h, viewed by it) failed its checksum:
 * the layer copies its bytes, as they are, to q's quarantine queue
 * (saker_store_quarantine()) and the row is deleted, in the current
 * batch.  Never served, not lost (store.h, take()).
 */
static int
sq_move_damaged(struct sq_store *s, struct saker_queue *q, sqlite3_stmt *h,
    int64_t seq, const struct saker_item *bad, int64_t now_ms)
{
	struct saker_item it = *bad;
	unsigned char attrs[SAKER_ATTRS_MAX];
	void *copy = NULL;
	bool writes = !s->read_only && !s->broken && !s->lost;
	int err;

	if (writes && it.len > 0 && (copy = malloc(it.len)) == NULL) {
		sq_reset(h);
		return sq_errf(s, SAKER_ENOMEM, "out of memory");
	}
	if (copy != NULL)
		memcpy(copy, it.data, it.len);
	it.data = copy != NULL ? copy : "";
	/* attributes too long to be any are damage: the data goes alone */
	if (it.attrs_len > sizeof(attrs))
		it.attrs_len = 0;
	it.attrs = it.attrs_len > 0 ? memcpy(attrs, it.attrs, it.attrs_len) :
	    NULL;
	sq_reset(h);
	err = saker_store_quarantine(&s->base, q, q->name, q->qe.len,
	    (uint64_t)seq, writes ? &it : NULL, now_ms, s->err,
	    sizeof(s->err));
	if (err == SAKER_OK &&
	    (err = sq_remove_ready(s, q, S_I_DELETE, seq, bad->len,
	    false)) == SAKER_OK &&
	    q->cur.head == seq)
		q->cur.head = seq + 1;
	free(copy);
	return SAKER_ECORRUPT;
}

/* Expired item `it` of q (a view of its row) leaves: the layer routes a
 * copy to q's expire_to queue or drops it (saker_store_expired()); the
 * caller removes the row and, when !*routed, counts it as expired. */
static int
sq_expired(struct sq_store *s, struct saker_queue *q,
    const struct saker_item *it, int64_t now_ms, bool *routed)
{
	int err = saker_store_expired(&s->base, q, it, now_ms, routed);

	if (err == SAKER_ENOMEM)	/* the layer's copy: no message of ours */
		return sq_errf(s, err, "out of memory");
	if (err == SAKER_OK && *routed)
		q->expired_to++;
	return err;
}

static int
sq_take(saker_store *base, saker_queue *q, int mode, int64_t now_ms,
    saker_item_fn fn, void *arg)
{
	struct sq_store *s = SQ(base);
	sqlite3_stmt *h = s->st[S_I_HEAD];
	struct saker_item it;
	int64_t from, seq;
	size_t len;
	bool routed;
	int err, r;

	if ((err = sq_dead(s, q)) != SAKER_OK)
		return err;
	if (mode != SAKER_TAKE_REMOVE && mode != SAKER_TAKE_OPEN &&
	    mode != SAKER_TAKE_PEEK)
		return sq_errf(s, SAKER_EINVAL, "bad take mode");
	if (q->cur.items == 0)
		return SAKER_EEMPTY;
	if (mode != SAKER_TAKE_PEEK && (err = sq_begin(s)) != SAKER_OK)
		return err;
	from = q->cur.head;
	for (;;) {
		if ((err = sq_read_item(s, q, S_I_HEAD, from, &it,
		    "read queue head")) != SAKER_OK)
			return err;
		seq = (int64_t)it.id;
		len = it.len;
		if (!sq_row_sound(h, 5, &it))
			return sq_move_damaged(s, q, h, seq, &it, now_ms);
		if (it.expires_ms == 0 || it.expires_ms > now_ms)
			break;
		/* expired at the head: routed or dropped, every one, look
		 * again */
		from = seq + 1;
		if (s->read_only || s->broken || s->lost) {
			sq_reset(h);
			continue;	/* cannot write: just skip it */
		}
		if ((err = sq_begin(s)) == SAKER_OK)
			err = sq_expired(s, q, &it, now_ms, &routed);
		sq_reset(h);
		if (err != SAKER_OK ||
		    (err = sq_remove_ready(s, q, S_I_DELETE, seq, len,
		    !routed)) != SAKER_OK)
			return err;
		q->cur.head = from;
		if (q->cur.items == 0)
			return SAKER_EEMPTY;
	}
	if (mode == SAKER_TAKE_OPEN && it.deliveries < SAKER_DELIVERIES_MAX)
		it.deliveries++;	/* fn sees the count with this hand-out */
	r = fn(arg, &it);
	sq_reset(h);
	if (r != 0 || mode == SAKER_TAKE_PEEK)
		return r;
	if ((err = sq_remove_ready(s, q, mode == SAKER_TAKE_REMOVE ?
	    S_I_DELETE : S_I_OPEN, seq, len, false)) != SAKER_OK)
		return err;
	q->cur.head = seq + 1;
	return SAKER_OK;
}

static int
sq_confirm(saker_store *base, saker_queue *q, uint64_t id)
{
	struct sq_store *s = SQ(base);
	sqlite3_stmt *st = s->st[S_I_CONFIRM];
	int err;

	if ((err = sq_dead(s, q)) != SAKER_OK)
		return err;
	if (q->cur.open == 0 || id > (uint64_t)INT64_MAX)
		return sq_errf(s, SAKER_ENOTFOUND, "no such open item");
	if ((err = sq_begin(s)) != SAKER_OK)
		return err;
	sq_bind_i64(s, st, 1, q->qe.id);
	sq_bind_i64(s, st, 2, (int64_t)id);
	if ((err = sq_exec(s, S_I_CONFIRM, "confirm item")) != SAKER_OK)
		return err;
	if (sqlite3_changes(s->db) == 0)
		return sq_errf(s, SAKER_ENOTFOUND, "no such open item");
	sq_mark_dirty(s, q);
	q->cur.open--;
	return SAKER_OK;
}

/* Begin the batch and find open item `id` of q: its data's length in
 * *len.  (release and move change its row; the counters need the length.) */
static int
sq_open_item(struct sq_store *s, saker_queue *q, uint64_t id, size_t *len)
{
	sqlite3_stmt *st = s->st[S_I_OPENLEN];
	int err, rc;

	if (q->cur.open == 0 || id > (uint64_t)INT64_MAX)
		return sq_errf(s, SAKER_ENOTFOUND, "no such open item");
	if ((err = sq_begin(s)) != SAKER_OK)
		return err;
	sq_bind_i64(s, st, 1, q->qe.id);
	sq_bind_i64(s, st, 2, (int64_t)id);
	rc = sqlite3_step(st);
	*len = rc == SQLITE_ROW ? (size_t)sqlite3_column_int64(st, 0) : 0;
	sq_reset(st);
	if (rc == SQLITE_DONE)
		return sq_errf(s, SAKER_ENOTFOUND, "no such open item");
	if (rc != SQLITE_ROW)
		return sq_fail(s, rc, "find open item");
	return SAKER_OK;
}

/* Open item seq of q (of len bytes) back to its head (release,
 * recovery). */
static int
sq_unopen(struct sq_store *s, struct saker_queue *q, int64_t seq,
    size_t len, const char *what)
{
	sqlite3_stmt *st = s->st[S_I_RELEASE];
	int err;

	sq_bind_i64(s, st, 1, q->qe.id);
	sq_bind_i64(s, st, 2, seq);
	sq_bind_i64(s, st, 3, q->cur.lo);
	if ((err = sq_exec(s, S_I_RELEASE, what)) != SAKER_OK)
		return err;
	sq_mark_dirty(s, q);
	q->cur.head = q->cur.lo;
	q->cur.lo--;
	q->cur.open--;
	q->cur.items++;
	q->cur.bytes += len;
	return SAKER_OK;
}

static int
sq_release(saker_store *base, saker_queue *q, uint64_t id)
{
	struct sq_store *s = SQ(base);
	size_t len;
	int err;

	if ((err = sq_dead(s, q)) != SAKER_OK ||
	    (err = sq_open_item(s, q, id, &len)) != SAKER_OK ||
	    (err = sq_unopen(s, q, (int64_t)id, len, "release item")) !=
	    SAKER_OK)
		return err;
	sq_notify(s, q);
	return SAKER_OK;
}

static int
sq_release_delayed(saker_store *base, saker_queue *q, uint64_t id,
    int64_t due_ms, int64_t now_ms)
{
	struct sq_store *s = SQ(base);
	sqlite3_stmt *st;
	size_t len;
	int err;

	if (due_ms <= now_ms)
		return sq_release(base, q, id);
	if ((err = sq_dead(s, q)) != SAKER_OK ||
	    (err = sq_open_item(s, q, id, &len)) != SAKER_OK)
		return err;
	/* two statements, all or nothing */
	if ((err = sq_sp_begin(s)) != SAKER_OK)
		return err;
	sq_touch(s, q);
	st = s->st[S_D_RELEASE];
	sq_bind_i64(s, st, 1, q->qe.id);
	sq_bind_i64(s, st, 2, (int64_t)id);
	sq_bind_i64(s, st, 3, due_ms);
	sq_bind_i64(s, st, 4, s->dseq);
	err = sq_exec(s, S_D_RELEASE, "delay item");
	if (err == SAKER_OK) {
		st = s->st[S_I_CONFIRM];
		sq_bind_i64(s, st, 1, q->qe.id);
		sq_bind_i64(s, st, 2, (int64_t)id);
		err = sq_exec(s, S_I_CONFIRM, "delay item");
	}
	if ((err = sq_sp_end(s, err)) != SAKER_OK)
		return err;
	s->touched = NULL;
	s->dseq++;
	q->cur.open--;
	q->cur.delayed++;
	if (s->next_due == 0 || due_ms < s->next_due)
		s->next_due = due_ms;
	return SAKER_OK;
}

static int
sq_move(saker_store *base, saker_queue *q, uint64_t id, saker_queue *to)
{
	struct sq_store *s = SQ(base);
	sqlite3_stmt *st;
	size_t len;
	int err;

	if ((err = sq_dead(s, q)) != SAKER_OK || (err = sq_dead(s, to)) != SAKER_OK)
		return err;
	if (to == q)
		return sq_errf(s, SAKER_EINVAL, "move: same queue");
	if ((err = sq_open_item(s, q, id, &len)) != SAKER_OK)
		return err;
	st = s->st[S_I_MOVE];
	sq_bind_i64(s, st, 1, q->qe.id);
	sq_bind_i64(s, st, 2, (int64_t)id);
	sq_bind_i64(s, st, 3, to->qe.id);
	sq_bind_i64(s, st, 4, to->cur.tail);
	if ((err = sq_exec(s, S_I_MOVE, "move item")) != SAKER_OK)
		return err;
	sq_mark_dirty(s, q);
	q->cur.open--;
	sq_mark_dirty(s, to);
	to->cur.tail++;
	to->cur.items++;
	to->cur.bytes += len;
	to->cur.total++;
	sq_notify(s, to);
	return SAKER_OK;
}

static int
sq_promote_rows(struct sq_store *s, int64_t now_ms, uint64_t *moved)
{
	sqlite3_stmt *st = s->st[S_D_DUE];
	struct saker_queue *q;
	struct kit_qent *e;
	struct saker_item it;
	int64_t crc;
	bool routed;
	int err = SAKER_OK, rc;

	sq_bind_i64(s, st, 1, now_ms);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		(*moved)++;
		e = kit_qtab_by_id(&s->qt, sqlite3_column_int64(st, 9));
		if (e == NULL)
			continue;	/* orphan row: deleted below */
		q = SQ_Q(e);
		sq_touch(s, q);
		q->cur.delayed--;
		sq_row_item(st, 1, SAKER_ITEM_READY, &it);
		if (it.expires_ms != 0 && it.expires_ms <= now_ms) {
			if ((err = sq_expired(s, q, &it, now_ms, &routed)) !=
			    SAKER_OK)
				break;
			if (!routed)
				q->cur.expired++;
			continue;
		}
		crc = sqlite3_column_int64(st, 6);
		err = sq_append(s, q, &it, sqlite3_column_type(st, 6) ==
		    SQLITE_NULL ? NULL : &crc);
		if (err != SAKER_OK)
			break;
		sq_notify(s, q);
	}
	if (err == SAKER_OK && rc != SQLITE_DONE)
		err = sq_fail(s, rc, "read delayed items");
	sq_reset(st);
	if (err != SAKER_OK)
		return err;
	sq_bind_i64(s, s->st[S_D_DELDUE], 1, now_ms);
	return sq_exec(s, S_D_DELDUE, "delete promoted items");
}

static int
sq_promote(saker_store *base, int64_t now_ms, int64_t *next_due_ms)
{
	struct sq_store *s = SQ(base);
	uint64_t moved = 0;
	int err;

	*next_due_ms = s->next_due;
	/* A read-only store (dump, migrate source) shows items as they are. */
	if (s->next_due == 0 || s->next_due > now_ms || s->read_only)
		return SAKER_OK;
	if ((err = sq_sp_begin(s)) != SAKER_OK)
		return err;
	err = sq_promote_rows(s, now_ms, &moved);
	if ((err = sq_sp_end(s, err)) != SAKER_OK)
		return err;
	s->touched = NULL;
	sq_refresh_next_due(s);
	*next_due_ms = s->next_due;
	return SAKER_OK;
}

/* Expired ready item r of q goes: to q's expire_to queue, or dropped and
 * counted (flush_expired). */
static int
sq_expire_row(struct sq_store *s, struct saker_queue *q,
    const struct sq_row *r, int64_t now_ms)
{
	struct saker_item it;
	bool routed = false;
	int err;

	/* (without a target the layer would drop it: no need to read it) */
	if (saker_store_has_expire_to(q)) {
		err = sq_read_item(s, q, S_I_GET, r->seq, &it,
		    "read expired item");
		if (err == SAKER_OK) {
			err = sq_expired(s, q, &it, now_ms, &routed);
			sq_reset(s->st[S_I_GET]);
		}
		if (err != SAKER_OK && err != SAKER_EEMPTY)
			return err;
	}
	return sq_remove_ready(s, q, S_I_DELETE, r->seq, r->len, !routed);
}

static int
sq_flush_expired(saker_store *base, saker_queue *q, int64_t now_ms,
    uint64_t limit, uint64_t *removed)
{
	struct sq_store *s = SQ(base);
	sqlite3_stmt *st = s->st[S_I_EXPIRED];
	struct sq_row rows[SQ_EXPIRE_CHUNK];
	int64_t from, last = 0, expires;
	uint64_t chunk, seen = 0, got;
	int err, rc, n, i;

	*removed = 0;
	if ((err = sq_dead(s, q)) != SAKER_OK)
		return err;
	if (q->cur.items == 0)
		return SAKER_OK;
	/* At most `limit` ready items are looked at (store.h): no index on
	 * expiry, so a bound on matches would scan a huge queue whole. */
	from = q->cur.head;
	for (;;) {
		chunk = SQ_EXPIRE_CHUNK;
		if (limit != 0 && limit - seen < chunk)
			chunk = limit - seen;
		if (chunk == 0)
			break;
		sq_bind_i64(s, st, 1, q->qe.id);
		sq_bind_i64(s, st, 2, from);
		sq_bind_i64(s, st, 3, (int64_t)chunk);
		n = 0;
		got = 0;
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			got++;
			last = sqlite3_column_int64(st, 0);
			expires = sqlite3_column_int64(st, 1);
			if (expires == 0 || expires > now_ms)
				continue;
			rows[n].seq = last;
			rows[n].len = (size_t)sqlite3_column_int64(st, 2);
			n++;
		}
		seen += got;
		sq_reset(st);
		if (rc != SQLITE_DONE)
			return sq_fail(s, rc, "find expired items");
		if (n > 0 && (err = sq_begin(s)) != SAKER_OK)
			return err;
		for (i = 0; i < n; i++) {
			if ((err = sq_expire_row(s, q, &rows[i], now_ms)) !=
			    SAKER_OK)
				return err;
			(*removed)++;
		}
		if (got < chunk)
			break;
		from = last + 1;
	}
	return SAKER_OK;
}

/* Feed every row of item listing `which` of q to fn. */
static int
sq_iter_rows(struct sq_store *s, struct saker_queue *q, int which,
    saker_item_state state, saker_item_fn fn, void *arg)
{
	sqlite3_stmt *st = s->st[which];
	struct saker_item it;
	int rc, r = 0, c;

	sq_bind_i64(s, st, 1, q->qe.id);
	if (state == SAKER_ITEM_READY)
		sq_bind_i64(s, st, 2, q->cur.head);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		c = state == SAKER_ITEM_DELAYED;	/* due first */
		sq_row_item(st, c, state, &it);
		if (c)
			it.due_ms = sqlite3_column_int64(st, 0);
		if (!sq_row_sound(st, c + 5, &it)) {
			sq_reset(st);
			return sq_errf(s, SAKER_ECORRUPT, "queue '%.*s': item %"
			    PRIu64 " failed its checksum", (int)q->qe.len,
			    q->name, it.id);
		}
		if ((r = fn(arg, &it)) != 0)
			break;
	}
	sq_reset(st);
	if (r != 0)
		return r;
	if (rc != SQLITE_DONE)
		return sq_fail(s, rc, "read items");
	return 0;
}

static int
sq_iterate(saker_store *base, saker_queue *q, saker_item_fn fn, void *arg)
{
	struct sq_store *s = SQ(base);
	int r;

	if ((r = sq_dead(s, q)) != SAKER_OK)
		return r;
	if (q->cur.open > 0 && (r = sq_iter_rows(s, q, S_I_OPENLIST,
	    SAKER_ITEM_OPEN, fn, arg)) != 0)
		return r;
	if (q->cur.items > 0 && (r = sq_iter_rows(s, q, S_I_READYLIST,
	    SAKER_ITEM_READY, fn, arg)) != 0)
		return r;
	if (q->cur.delayed > 0 && (r = sq_iter_rows(s, q, S_D_LIST,
	    SAKER_ITEM_DELAYED, fn, arg)) != 0)
		return r;
	return SAKER_OK;
}

/* ------------------------------------------------------------------ */
/* deduplication ids (store.h, DEDUPLICATION): rows of table dedup,
 * written in the batch's transaction like the items */

/* Bind q and key to st's first two parameters. */
static int
sq_bind_key(struct sq_store *s, sqlite3_stmt *st, struct saker_queue *q,
    const void *key, size_t len)
{
	sq_bind_i64(s, st, 1, q->qe.id);
	return sq_bind_blob(s, st, 2, key, len);
}

static int
sq_dedup_put(saker_store *base, saker_queue *q, const void *key, size_t len,
    int64_t expires_ms, int64_t now_ms, bool *replaced)
{
	struct sq_store *s = SQ(base);
	sqlite3_stmt *st = s->st[S_X_PUT];
	int err;

	*replaced = false;
	if ((err = sq_dead(s, q)) != SAKER_OK ||
	    (err = sq_begin(s)) != SAKER_OK ||
	    (err = sq_bind_key(s, st, q, key, len)) != SAKER_OK)
		return err;
	sq_bind_i64(s, st, 3, expires_ms);
	if ((err = sq_exec(s, S_X_PUT, "write deduplication id")) != SAKER_OK ||
	    sqlite3_changes(s->db) > 0)
		return err;
	st = s->st[S_X_RENEW];
	if ((err = sq_bind_key(s, st, q, key, len)) != SAKER_OK)
		return err;
	sq_bind_i64(s, st, 3, expires_ms);
	sq_bind_i64(s, st, 4, now_ms);
	if ((err = sq_exec(s, S_X_RENEW, "renew deduplication id")) != SAKER_OK)
		return err;
	if (sqlite3_changes(s->db) == 0)
		return SAKER_EEXIST;	/* kept, and live */
	*replaced = true;
	return SAKER_OK;
}

static int
sq_dedup_del(saker_store *base, saker_queue *q, const void *key, size_t len)
{
	struct sq_store *s = SQ(base);
	int err;

	if ((err = sq_dead(s, q)) != SAKER_OK ||
	    (err = sq_begin(s)) != SAKER_OK ||
	    (err = sq_bind_key(s, s->st[S_X_DEL], q, key, len)) != SAKER_OK ||
	    (err = sq_exec(s, S_X_DEL, "delete deduplication id")) != SAKER_OK)
		return err;
	if (sqlite3_changes(s->db) == 0)
		return sq_errf(s, SAKER_ENOTFOUND, "no such deduplication id");
	return SAKER_OK;
}

static int
sq_dedup_sweep(saker_store *base, saker_queue *q, int64_t now_ms,
    uint64_t limit, uint64_t *removed)
{
	struct sq_store *s = SQ(base);
	sqlite3_stmt *st = s->st[S_X_FIRST];
	int err, rc;
	bool due;

	*removed = 0;
	if ((err = sq_dead(s, q)) != SAKER_OK || st == NULL)
		return err;	/* st NULL: a store before format 5, read-only */
	/* the earliest expiry first, through the index: no batch is begun
	 * when nothing has expired */
	sq_bind_i64(s, st, 1, q->qe.id);
	rc = sqlite3_step(st);
	due = rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL &&
	    sqlite3_column_int64(st, 0) <= now_ms;
	sq_reset(st);
	if (rc != SQLITE_ROW)
		return sq_fail(s, rc, "read deduplication ids");
	if (!due)
		return SAKER_OK;
	st = s->st[S_X_SWEEP];
	if ((err = sq_begin(s)) != SAKER_OK)
		return err;
	sq_bind_i64(s, st, 1, q->qe.id);
	sq_bind_i64(s, st, 2, now_ms);
	sq_bind_i64(s, st, 3, limit == 0 || limit > INT64_MAX ? -1 :
	    (int64_t)limit);
	if ((err = sq_exec(s, S_X_SWEEP, "sweep deduplication ids")) !=
	    SAKER_OK)
		return err;
	*removed = (uint64_t)sqlite3_changes(s->db);
	return SAKER_OK;
}

static int
sq_dedup_iterate(saker_store *base, saker_queue *q, saker_dedup_fn fn,
    void *arg)
{
	struct sq_store *s = SQ(base);
	sqlite3_stmt *st = s->st[S_X_LIST];
	int rc, r = 0;

	if ((r = sq_dead(s, q)) != SAKER_OK)
		return r;
	if (st == NULL)
		return SAKER_OK;	/* a store before format 5, read-only */
	sq_bind_i64(s, st, 1, q->qe.id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW &&
	    (r = fn(arg, sqlite3_column_blob(st, 0),
	    (size_t)sqlite3_column_bytes(st, 0),
	    sqlite3_column_int64(st, 1))) == 0)
		;
	sq_reset(st);
	if (r != 0)
		return r;
	return rc == SQLITE_DONE ? SAKER_OK : sq_fail(s, rc, "read deduplication"
	    " ids");
}

/* ------------------------------------------------------------------ */
/* store */

static const char *
sq_errmsg(saker_store *base)
{
	struct sq_store *s = SQ(base);

	return s->err[0] != '\0' ? s->err : "no error";
}

static uint64_t
sq_file_size(const char *path, const char *suffix)
{
	char buf[4096];
	struct stat sb;

	if ((size_t)snprintf(buf, sizeof(buf), "%s%s", path, suffix) >=
	    sizeof(buf) || stat(buf, &sb) != 0)
		return 0;
	return (uint64_t)sb.st_size;
}

static void
sq_store_stats(saker_store *base, struct saker_store_stats *st)
{
	struct sq_store *s = SQ(base);

	memset(st, 0, sizeof(*st));
	st->commits = s->commits;
	st->fsyncs = s->fsyncs;
	st->commit_ns = s->commit_ns;
	st->disk_bytes = sq_file_size(s->path, "") +
	    sq_file_size(s->path, "-wal") +
	    sq_file_size(s->path, SQ_REDO_SUFFIX);
	st->checkpoints = s->ckpts + s->lt.checkpoints;
	st->checkpoint_ns = s->ckpt_ns + s->lt.checkpoint_ns;
}

static void
sq_free(struct sq_store *s)
{
	struct saker_queue *q;
	struct kit_qent *e, *next;
	size_t i = 0;

	for (i = 0; i < S_COUNT; i++)
		sqlite3_finalize(s->st[i]);
	if (s->db != NULL)
		sqlite3_close(s->db);
	for (e = kit_qtab_next(&s->qt, &i, NULL); e != NULL; e = next) {
		next = kit_qtab_next(&s->qt, &i, e);
		free(SQ_Q(e));
	}
	while ((q = LIST_FIRST(&s->deleted)) != NULL ||
	    (q = LIST_FIRST(&s->zombies)) != NULL) {
		LIST_REMOVE(q, link);
		free(q);
	}
	kit_qtab_free(&s->qt);
	ltx_close(&s->lt);
	free(s->path);
	free(s);
}

static void
sq_close(saker_store *base)
{
	struct sq_store *s = SQ(base);

	if (s == NULL)
		return;
	if (s->lt.j.inflight)
		(void)sq_flight_collect(s);
	if (!s->read_only && !s->stale)
		sq_commit(base);
	if (s->in_txn && s->journaled) {
		sq_drop_batch(s);
		s->in_txn = false;
	}
	/* a broken store keeps its journal for the next open to replay */
	if (s->journaled && sq_checkpoint(s) != SAKER_OK)
		log_error("%s", s->err);
	if (s->in_txn || s->long_txn)
		sq_step(s, S_ROLLBACK);
	sq_sync(base);
	sq_free(s);
}

/* Run one pragma or statement returning at most one integer. */
static int
sq_pragma_int(sqlite3 *db, const char *sql, int64_t *val)
{
	sqlite3_stmt *st;
	int rc;

	rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && val != NULL)
		*val = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int
sq_open_err(struct sq_store *s, int code, int rc, const char *what)
{
	return sq_errf(s, code, "sqlite %s: %s: %s", s->path, what,
	    s->db != NULL ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
}

/* A writable open of a file this process may not write: SQLite opens it
 * read-only without a word and every batch would fail later, after the
 * server said it was serving.  Its -wal and -shm files are made beside it,
 * so the directory must be writable too. */
static int
sq_check_writable(struct sq_store *s, const char *location)
{
	char dir[4096];
	const char *slash = strrchr(location, '/');
	size_t n = slash == NULL ? 1 : slash == location ? 1 :
	    (size_t)(slash - location);

	if (sqlite3_db_readonly(s->db, "main") == 1)
		return sq_errf(s, SAKER_EREADONLY, "sqlite %s: the file is not"
		    " writable by this process (uid %u)", location,
		    (unsigned)geteuid());
	if (n >= sizeof(dir))
		return sq_errf(s, SAKER_EINVAL, "sqlite %s: path too long",
		    location);
	memcpy(dir, slash == NULL ? "." : location, n);
	dir[n] = '\0';
	if (access(dir, W_OK | X_OK) != 0)
		return sq_errf(s, SAKER_EREADONLY, "sqlite %s: its directory %s"
		    " is not writable by this process (uid %u), and SQLite"
		    " keeps the -wal and -shm files there: %s", location, dir,
		    (unsigned)geteuid(), strerror(errno));
	return SAKER_OK;
}

/* Run a script that begins and commits a transaction; on a failure what
 * it began is rolled back. */
static int
sq_script(struct sq_store *s, const char *sql, const char *what)
{
	int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL), err;

	if (rc == SQLITE_OK)
		return SAKER_OK;
	err = sq_open_err(s, sq_map(rc), rc, what);
	sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return err;
}

/* Check the application id and format version; create the schema in an
 * empty file when asked to. */
static int
sq_check_format(struct sq_store *s, bool create)
{
	int64_t appid = 0, version = 0, tables = 0;
	char sql[sizeof(sq_schema) + 256];
	int rc, err;

	rc = sq_pragma_int(s->db, "PRAGMA application_id", &appid);
	if (rc == SQLITE_OK)
		rc = sq_pragma_int(s->db, "PRAGMA user_version", &version);
	if (rc == SQLITE_OK)
		rc = sq_pragma_int(s->db, "SELECT count(*) FROM sqlite_master",
		    &tables);
	if ((rc & 0xff) == SQLITE_NOTADB)
		return sq_errf(s, SAKER_ECORRUPT, "sqlite %s: not an SQLite"
		    " database (nor a saker store)", s->path);
	if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED)
		return sq_open_err(s, SAKER_ELOCKED, rc, "database is locked");
	if (rc != SQLITE_OK)
		return sq_open_err(s, sq_map(rc), rc, "reading the header");
	if (appid == 0 && version == 0 && tables == 0) {
		if (!create || s->read_only)
			return sq_errf(s, SAKER_ECORRUPT, "sqlite %s: empty"
			    " database, not a saker store", s->path);
		/* WAL mode first: it cannot change inside a transaction */
		snprintf(sql, sizeof(sql), "PRAGMA journal_mode=WAL;"
		    " BEGIN IMMEDIATE; PRAGMA application_id=%d;"
		    " PRAGMA user_version=%d; %s COMMIT", SQ_APPLICATION_ID,
		    SQ_FORMAT_VERSION, sq_schema);
		if ((err = sq_script(s, sql, "creating the schema")) != SAKER_OK)
			return err;
		s->version = SQ_FORMAT_VERSION;
		return SAKER_OK;
	}
	if (appid != SQ_APPLICATION_ID)
		return sq_errf(s, SAKER_ECORRUPT, "sqlite %s: an SQLite database"
		    " but not a saker store (application_id 0x%" PRIx64 ")",
		    s->path, (uint64_t)appid);
	if (version > SQ_FORMAT_VERSION)
		return sq_errf(s, SAKER_EVERSION, "sqlite %s: format version %"
		    PRId64 " is newer than this build (%d)", s->path, version,
		    SQ_FORMAT_VERSION);
	if (version < 1)
		return sq_errf(s, SAKER_ECORRUPT, "sqlite %s: bad format version"
		    " %" PRId64, s->path, version);
	s->version = version;
	if (version < SQ_FORMAT_VERSION && !s->read_only) {
		/* 1 -> 2: the checksum column; old rows keep NULL there.
		 * 2 -> 3: the delivery count; old rows count 0.
		 * 3 -> 4: nothing to change (the journal's meta keys are
		 * written when needed).
		 * 4 -> 5: the attributes column; old rows have none (NULL);
		 * the dedup table. */
		snprintf(sql, sizeof(sql), "BEGIN IMMEDIATE;%s%s"
		    " ALTER TABLE items ADD COLUMN attrs BLOB;"
		    " ALTER TABLE delayed ADD COLUMN attrs BLOB;" SQ_SCHEMA_5
		    " PRAGMA user_version=%d; COMMIT", version < 2 ?
		    " ALTER TABLE items ADD COLUMN crc INTEGER;"
		    " ALTER TABLE delayed ADD COLUMN crc INTEGER;" : "",
		    version < 3 ?
		    " ALTER TABLE items ADD COLUMN deliveries INTEGER NOT NULL"
		    " DEFAULT 0;"
		    " ALTER TABLE delayed ADD COLUMN deliveries INTEGER NOT NULL"
		    " DEFAULT 0;" : "", SQ_FORMAT_VERSION);
		if ((err = sq_script(s, sql,
		    "upgrading the format to version 5")) != SAKER_OK)
			return err;
		s->version = SQ_FORMAT_VERSION;
	}
	return SAKER_OK;
}

/*
 * SQLite calls this after every commit with the WAL's size.  It does what
 * SQLite's own automatic checkpoint (which it replaces) does, a passive
 * checkpoint once the WAL holds SQ_AUTOCHECKPOINT pages, and counts and
 * times it (store_stats(), /metrics; -vv logs each one).  It runs in the
 * committing call, on the event loop.  A checkpoint on a connection and
 * thread of its own was tried (2026-12-06) and left out: under steady
 * writes it never finds the WAL fully copied between two transactions,
 * which is when SQLite restarts the WAL from its beginning, so the WAL
 * grew without bound (77 MB in 5 s of 50 producers, 10,431 checkpoints;
 * here it stays at 4-6 MB).  A failure is warned of once until one
 * succeeds again: it leaves the WAL growing, not the data at risk.
 */
static int
sq_wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct sq_store *s = arg;
	uint64_t t0, ns;
	int rc, logged = 0, copied = 0;

	if (frames < SQ_AUTOCHECKPOINT)
		return SQLITE_OK;
	t0 = saker_mono_ns();
	rc = sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE,
	    &logged, &copied);
	ns = saker_mono_ns() - t0;
	if (!s->journaled) {	/* else part of sq_checkpoint()'s count */
		s->ckpts++;
		s->ckpt_ns += ns;
	}
	if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
		if (!s->ckpt_failing)
			log_warn("sqlite %s: checkpoint failed (%d): %s; the WAL"
			    " grows until one succeeds", s->path, rc,
			    sqlite3_errmsg(db));
		s->ckpt_failing = true;
		return SQLITE_OK;
	}
	s->ckpt_failing = false;
	log_debug("sqlite checkpoint: %" PRIu64 " us, %d of %d WAL frames "
	    "copied, rc %d", ns / 1000, copied, logged, rc);
	return SQLITE_OK;
}

static int
sq_settings(struct sq_store *s)
{
	char sql[256];
	bool wal = false;
	int rc;

	if (!s->read_only) {
		sqlite3_stmt *st;

		/* Persistent, but make sure an old file is in WAL mode. */
		rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1,
		    &st, NULL);
		if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
			const char *m = (const char *)sqlite3_column_text(st, 0);
			wal = m != NULL && strcmp(m, "wal") == 0;
			rc = SQLITE_OK;
		}
		sqlite3_finalize(st);
		if (rc != SQLITE_OK)
			return sq_open_err(s, (rc & 0xff) == SQLITE_BUSY ?
			    SAKER_ELOCKED : sq_map(rc), rc, "setting WAL mode");
		if (!wal)
			return sq_errf(s, SAKER_EIO, "sqlite %s: cannot switch"
			    " to WAL mode", s->path);
	}
	snprintf(sql, sizeof(sql), "PRAGMA synchronous=%s;"
	    " PRAGMA cache_size=-%d; PRAGMA journal_size_limit=%d;",
	    s->sync == SAKER_SYNC_ALWAYS ? "FULL" :
	    s->sync == SAKER_SYNC_PERIODIC ? "NORMAL" : "OFF",
	    SQ_CACHE_KIB, SQ_JOURNAL_LIMIT);
	rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return sq_open_err(s, sq_map(rc), rc, "setting pragmas");
	/* SQLite's automatic checkpoint, replaced (sq_wal_hook()) */
	if (!s->read_only)
		sqlite3_wal_hook(s->db, sq_wal_hook, s);
	return SAKER_OK;
}

static int
sq_prepare(struct sq_store *s)
{
	char sql[512], tmp[512];
	/* each tag (5 characters) and what it stands for in this store */
	const char *const tags[][2] = {
		{ "@CRC@", s->version >= 2 ? "crc" : "NULL" },
		{ "@DLV@", s->version >= 3 ? "deliveries" : "0" },
		{ "@ATR@", s->version >= 5 ? "attrs" : "NULL" },
	};
	const char *at;
	int i, t, rc;

	for (i = 0; i < S_COUNT; i++) {
		snprintf(sql, sizeof(sql), "%s", sq_sql[i]);
		for (t = 0; t < 3; t++) {
			if ((at = strstr(sql, tags[t][0])) == NULL)
				continue;
			snprintf(tmp, sizeof(tmp), "%.*s%s%s", (int)(at - sql),
			    sql, tags[t][1], at + 5);
			snprintf(sql, sizeof(sql), "%s", tmp);
		}
		/* writes of newer columns: a read-only old store never
		 * writes */
		if ((s->version < 2 && strstr(sq_sql[i], "crc") != NULL &&
		    strstr(sq_sql[i], "@CRC@") == NULL) ||
		    (s->version < 3 && strstr(sq_sql[i], "deliveries") != NULL) ||
		    (s->version < 5 && (strstr(sq_sql[i], "attrs") != NULL ||
		    strstr(sq_sql[i], "dedup") != NULL)))
			continue;
		rc = sqlite3_prepare_v3(s->db, sql, -1,
		    SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL);
		if (rc == SQLITE_ERROR)
			return sq_errf(s, SAKER_ECORRUPT, "sqlite %s: saker"
			    " schema missing or damaged: %s", s->path,
			    sqlite3_errmsg(s->db));
		if (rc != SQLITE_OK)
			return sq_open_err(s, sq_map(rc), rc, "preparing");
	}
	return SAKER_OK;
}

/* A meta value, or `dflt` when it is not there. */
static int
sq_meta_get(struct sq_store *s, const char *key, int64_t dflt, int64_t *v)
{
	char sql[128];
	int rc;

	*v = dflt;
	snprintf(sql, sizeof(sql), "SELECT value FROM meta WHERE key = '%s'",
	    key);
	if ((rc = sq_pragma_int(s->db, sql, v)) != SQLITE_OK)
		return sq_open_err(s, sq_map(rc), rc, "reading meta");
	return SAKER_OK;
}

/*
 * Open the redo journal (FILE.saker-journal) and replay the batches it
 * holds beyond the last checkpoint, whatever the sync mode now: a store
 * last run with --sync always may hold acknowledged batches only there.
 * With --sync always the journal is kept open for the batches to come.
 * A read-only opener must not replay and refuses a store that needs it.
 */
static int
sq_redo_open(struct sq_store *s)
{
	char path[4096];
	int64_t id, seq;
	bool create = !s->read_only && s->sync == SAKER_SYNC_ALWAYS;
	int rc, e;

	if ((size_t)snprintf(path, sizeof(path), "%s%s", s->path,
	    SQ_REDO_SUFFIX) >= sizeof(path))
		return sq_errf(s, SAKER_EINVAL, "store path too long");
	if ((e = sq_meta_get(s, "store_id", 0, &id)) != SAKER_OK ||
	    (e = sq_meta_get(s, "journal_seq", 0, &seq)) != SAKER_OK)
		return e;
	if (id == 0 && !s->read_only) {
		/* seeds the journal's checks: another store's records
		 * never pass them */
		id = (int64_t)ltx_new_id();
		if ((rc = sq_meta_put(s, "store_id", id)) != SQLITE_DONE)
			return sq_open_err(s, sq_map(rc), rc, "writing meta");
	}
	if (ltx_open(&s->lt, path, create, (uint64_t)id, false, (uint64_t)seq)
	    != 0)
		return sq_errf(s, SAKER_EIO, "sqlite %s: %s", s->path, s->lt.j.err);
	if (s->read_only) {
		if ((rc = ltx_pending(&s->lt, &s->redo_pending)) != 0)
			return sq_errf(s, SAKER_EIO, "sqlite %s: %s", s->path,
			    s->lt.j.err);
		return SAKER_OK;
	}
	if (s->lt.j.fd >= 0) {
		char why[sizeof(s->err)];
		uint64_t n;

		if ((rc = ltx_recover(&s->lt, &n)) != 0) {
			/* a failed checkpoint's reason is lt_commit()'s */
			snprintf(why, sizeof(why), "%s", rc == LTX_ECKPT ?
			    s->err : s->lt.err);
			return sq_errf(s, rc == EILSEQ ? SAKER_ECORRUPT :
			    SAKER_EIO, "sqlite %s: replaying its journal %s: %s",
			    s->path, path, why);
		}
		if (n > 0)
			log_info("sqlite %s: %" PRIu64 " acknowledged batches "
			    "replayed from %s", s->path, n, path);
	}
	if (!create)
		lj_close(&s->lt.j);
	return SAKER_OK;
}

static int
sq_load(struct sq_store *s)
{
	sqlite3_stmt *st;
	struct saker_queue *q;
	int64_t maxid = 0;
	int rc, err = SAKER_OK;

	rc = sqlite3_prepare_v2(s->db, "SELECT id, name, head, tail, lo, items,"
	    " bytes, delayed_items, open_items, total_items, expired_items"
	    " FROM queues", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return sq_open_err(s, SAKER_ECORRUPT, rc, "reading queues");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const void *name = sqlite3_column_blob(st, 1);
		size_t len = (size_t)sqlite3_column_bytes(st, 1);

		if (name == NULL || len == 0) {
			err = sq_errf(s, SAKER_ECORRUPT, "sqlite %s: queue"
			    " without a name", s->path);
			break;
		}
		q = sq_queue_new(name, len, sqlite3_column_int64(st, 0));
		if (q == NULL || kit_qtab_add(&s->qt, &q->qe) != 0) {
			free(q);
			err = sq_errf(s, SAKER_ENOMEM, "out of memory");
			break;
		}
		q->cur.head = sqlite3_column_int64(st, 2);
		q->cur.tail = sqlite3_column_int64(st, 3);
		q->cur.lo = sqlite3_column_int64(st, 4);
		q->cur.items = (uint64_t)sqlite3_column_int64(st, 5);
		q->cur.bytes = (uint64_t)sqlite3_column_int64(st, 6);
		q->cur.delayed = (uint64_t)sqlite3_column_int64(st, 7);
		q->cur.open = (uint64_t)sqlite3_column_int64(st, 8);
		q->cur.total = (uint64_t)sqlite3_column_int64(st, 9);
		q->cur.expired = (uint64_t)sqlite3_column_int64(st, 10);
		q->saved = q->cur;
		if (q->qe.id > maxid)
			maxid = q->qe.id;
	}
	if (err == SAKER_OK && rc != SQLITE_DONE)
		err = sq_open_err(s, sq_map(rc), rc, "reading queues");
	sqlite3_finalize(st);
	if (err != SAKER_OK)
		return err;
	s->next_qid = maxid + 1;
	if ((err = sq_meta_get(s, "dseq", 0, &s->dseq)) != SAKER_OK)
		return err;
	s->dseq_saved = s->dseq;
	sq_refresh_next_due(s);
	return SAKER_OK;
}

/* After a crash: the open items of q go back to its head, in order. */
static int
sq_recover_queue(struct sq_store *s, struct saker_queue *q)
{
	sqlite3_stmt *st = s->st[S_I_OPENSEQS];
	struct sq_row *rows = NULL, *tmp;
	size_t n = 0, cap = 0, i;
	int rc, err = SAKER_OK;

	sq_bind_i64(s, st, 1, q->qe.id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			if ((tmp = realloc(rows, cap * sizeof(*rows))) == NULL) {
				sq_reset(st);
				free(rows);
				return sq_errf(s, SAKER_ENOMEM, "out of memory");
			}
			rows = tmp;
		}
		rows[n].seq = sqlite3_column_int64(st, 0);
		rows[n].len = (size_t)sqlite3_column_int64(st, 1);
		n++;
	}
	sq_reset(st);
	if (rc != SQLITE_DONE) {
		free(rows);
		return sq_fail(s, rc, "reading rows items");
	}
	/* Newest first, each to the current head: original order results. */
	for (i = n; i-- > 0 && err == SAKER_OK;)
		err = sq_unopen(s, q, rows[i].seq, rows[i].len,
		    "recover rows item");
	free(rows);
	if (err != SAKER_OK)
		return err;
	sq_mark_dirty(s, q);	/* even with no rows: the count goes */
	q->cur.open = 0;
	return SAKER_OK;
}

static int
sq_recover(struct sq_store *s)
{
	struct saker_queue *q;
	struct kit_qent *e;
	size_t i = 0;
	int err;

	if (s->read_only)
		return SAKER_OK;
	for (e = kit_qtab_next(&s->qt, &i, NULL); e != NULL;
	    e = kit_qtab_next(&s->qt, &i, e)) {
		q = SQ_Q(e);
		if (q->cur.open == 0)
			continue;
		if ((err = sq_begin(s)) != SAKER_OK ||
		    (err = sq_recover_queue(s, q)) != SAKER_OK)
			return err;
	}
	return sq_commit(&s->base);
}

static int
sq_open(const char *location, const struct saker_store_opts *opts,
    saker_store **out, char *err, size_t errlen)
{
	struct sq_store *s;
	struct stat sb;
	int flags, rc, e;

	*out = NULL;
	if (location == NULL || location[0] == '\0') {
		snprintf(err, errlen, "sqlite store needs a FILE (sqlite:FILE)");
		return SAKER_EINVAL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->path = strdup(location)) == NULL) {
		free(s);
		snprintf(err, errlen, "out of memory");
		return SAKER_ENOMEM;
	}
	s->base.driver = &saker_store_sqlite;
	ltx_init(&s->lt, &sq_ltx_ops, s, SQ_CKPT_BYTES, SQ_CKPT_NS);
	s->sync = opts->sync;
	s->read_only = opts->read_only;
	s->notify = opts->notify;
	s->notify_arg = opts->notify_arg;
	LIST_INIT(&s->dirty);
	LIST_INIT(&s->deleted);
	LIST_INIT(&s->zombies);

	if (stat(location, &sb) != 0) {
		if (errno != ENOENT || !opts->create || opts->read_only) {
			e = errno == ENOENT ? SAKER_ENOTFOUND : SAKER_EIO;
			sq_errf(s, e, "sqlite %s: %s", location,
			    strerror(errno));
			goto fail;
		}
		/* made here, mode 0600, as LMDB's files: SQLite would follow
		 * the umask (0644: every local user could read the items);
		 * its -wal and -shm files take the database file's mode */
		if ((rc = open(location, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
		    0600)) == -1 && errno != EEXIST) {
			e = sq_errf(s, SAKER_EIO, "sqlite %s: cannot create: %s",
			    location, strerror(errno));
			goto fail;
		}
		if (rc != -1)
			close(rc);
	} else if (!S_ISREG(sb.st_mode)) {
		e = sq_errf(s, SAKER_EINVAL, "sqlite %s: not a regular file",
		    location);
		goto fail;
	}
	flags = SQLITE_OPEN_NOMUTEX | (opts->read_only ? SQLITE_OPEN_READONLY :
	    SQLITE_OPEN_READWRITE | (opts->create ? SQLITE_OPEN_CREATE : 0));
	rc = sqlite3_open_v2(location, &s->db, flags, NULL);
	if (rc != SQLITE_OK) {
		e = sq_open_err(s, (rc & 0xff) == SQLITE_CANTOPEN ? SAKER_EIO :
		    sq_map(rc), rc, "cannot open");
		goto fail;
	}
	sqlite3_extended_result_codes(s->db, 1);
	sqlite3_busy_timeout(s->db, SQ_BUSY_MS);
	if (!opts->read_only && (e = sq_check_writable(s, location)) !=
	    SAKER_OK)
		goto fail;
	/* as large as this build of SQLite allows (SQLITE_MAX_LENGTH) */
	sqlite3_limit(s->db, SQLITE_LIMIT_LENGTH, INT32_MAX);
	if (opts->max_item > (uint64_t)sqlite3_limit(s->db, SQLITE_LIMIT_LENGTH,
	    -1) - SQ_ROW_SLACK) {
		e = sq_errf(s, SAKER_EINVAL, "sqlite holds items up to %d bytes"
		    " (SQLite's SQLITE_MAX_LENGTH less a row's other columns);"
		    " lower --max-item-size", sqlite3_limit(s->db,
		    SQLITE_LIMIT_LENGTH, -1) - SQ_ROW_SLACK);
		goto fail;
	}
	if ((e = sq_check_format(s, opts->create)) != SAKER_OK ||
	    (e = sq_settings(s)) != SAKER_OK ||
	    (e = sq_prepare(s)) != SAKER_OK ||
	    (e = sq_redo_open(s)) != SAKER_OK)
		goto fail;
	if (s->redo_pending) {
		sq_free(s);
		return ltx_open_recovered(&saker_store_sqlite, location, opts, out,
		    err, errlen);
	}
	if ((e = sq_load(s)) != SAKER_OK || (e = sq_recover(s)) != SAKER_OK)
		goto fail;
	s->journaled = s->lt.j.fd >= 0;
	s->err[0] = '\0';
	*out = &s->base;
	return SAKER_OK;

fail:
	snprintf(err, errlen, "%s", s->err);
	if (s->in_txn)
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	sq_free(s);
	return e;
}

const struct saker_store_driver saker_store_sqlite = {
	.name = "sqlite",
	.location_help = "FILE",
	.location = SAKER_LOCATION_FILE,
	.durable = true,
	.lock = SAKER_LOCK_BESIDE,
	/* the queues table holds the four counters (format 1) */
	.own_counts = true,
	.open = sq_open,
	.close = sq_close,
	.errmsg = sq_errmsg,
	.queue_open = sq_queue_open,
	.queue_delete = sq_queue_delete,
	.queue_flush = sq_queue_flush,
	.queues = sq_queues,
	.queue_stats = sq_queue_stats,
	.put = sq_put,
	.take = sq_take,
	.confirm = sq_confirm,
	.release = sq_release,
	.release_delayed = sq_release_delayed,
	.move = sq_move,
	.expire_to = saker_store_keep_expire_to,
	.promote = sq_promote,
	.flush_expired = sq_flush_expired,
	.iterate = sq_iterate,
	.dedup_put = sq_dedup_put,
	.dedup_del = sq_dedup_del,
	.dedup_sweep = sq_dedup_sweep,
	.dedup_iterate = sq_dedup_iterate,
	.commit = sq_commit,
	.sync = sq_sync,
	.commit_start = sq_commit_start,
	.commit_fd = sq_commit_fd,
	.commit_finish = sq_commit_finish,
	.store_stats = sq_store_stats,
	.watch_fd = NULL,
	.fd_ready = NULL,
};
