/* pg_sql.c -- the PostgreSQL driver's SQL: the statements it prepares,
 * the schema it creates and upgrades, the session settings. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_sql.h"
#include "pg_wire.h"

/* 2: state 2 (claimed ahead); the lease index covers it.
 * 3: saker_items.crc, the item's CRC32C (kit_item_crc); NULL in rows
 * written before format 3, which are not checked.
 * 4: saker_items.deliveries, the delivery count (store.h); 0 in rows
 * written before. */
/* 5: saker_queues.lo_vis, lo_id, the queue's low-water mark (P_ADVANCE),
 * and saker_items_held; writers of this format keep every key of a
 * queue at or above its mark, older brokers would not. */
/* 6: saker_items.attrs, the item's attributes (store.h, NULL: none),
 * covered by its crc; saker_dedup, the deduplication ids of every
 * queue by name, shared by the brokers. */
/* 7: saker_items is partitioned by seg into PG_SEGS segments that take
 * puts in turn and are emptied by TRUNCATE (saker_rotate(), issue 47);
 * saker_meta's seg, seg_at, seg_id, seg_truncated say which takes puts
 * since when.  Brokers of format 6 would put into no segment. */
#define PG_FORMAT_VERSION 7

#define DBNOW "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
/* ready for stats and listings: visible, or claimed ahead by a broker */
#define READY "((state = 0 AND due <= $2::bigint) OR state = 2)"
/* @CRC@ stands for the crc column, or NULL::bigint while a read-only
 * open reads a store from before format 3; @DLV@ for the deliveries
 * column, or 0::bigint before format 4; @ATR@ for the attrs column, or
 * NULL::bytea before format 6 (pg_prepare_all()). */
#define ITEM_COLS "id, flags, expires, created, vis, due, data, @CRC@," \
	" @DLV@, @ATR@"

/* the segment that takes puts (PG_ITEMS_TABLE) */
#define CUR_SEG "(SELECT value::smallint FROM saker_meta WHERE key = 'seg')"

#define PG_DLV_MAX "65535"	/* SAKER_DELIVERIES_MAX */
/* The vis of a new key in queue row q: v, or just past the queue's
 * low-water mark when v is not above it (a broker whose clock runs
 * behind), so no key is ever made below the mark (P_ADVANCE). */
#define ABOVE_MARK(v, q) "CASE WHEN " v " > " q ".lo_vis THEN " v \
	" ELSE " q ".lo_vis + 1 END"
/* $4, $5: the last item this transaction took from the queue.  Rows a
 * transaction deleted stay in the index until it ends and every later
 * scan would step over them again; starting past them keeps a batch of
 * takes linear. */
#define HEAD_WHERE "qid = $1::bigint AND state = 0 AND due <= $2::bigint" \
	" AND vis <= $3::bigint AND (vis, id) > ($4::bigint, $5::bigint)"
/* the first n rows of HEAD_WHERE, locked, as c(qid, id); what the
 * statement made of them comes back as ITEM_COLS */
#define HEAD_ROWS(n) "WITH c AS (SELECT qid, id FROM saker_items WHERE " \
	HEAD_WHERE " ORDER BY vis, id LIMIT " n " FOR UPDATE SKIP LOCKED)"
#define RETURNING_ITEM " RETURNING i.id, i.flags, i.expires, i.created," \
	" i.vis, i.due, i.data, @CRC@, @DLV@, @ATR@"
/* back to the queue, no longer leased */
#define GIVE_BACK "UPDATE saker_items SET state = 0, owner = NULL," \
	" lease_until = 0"
/* Rows this broker holds, looked up by key: state::integer so the
 * planner cannot use saker_items_lease (WHERE state > 0) for them.  While
 * something holds the xmin horizon its statistics still say few rows are
 * leased, and a bitmap scan of that index visits every dead version of
 * every item ever claimed, once per batch (issue 47: 275 buffers a batch
 * after a minute, the first cost of a held horizon). */
#define HELD "state::integer > 0"
/* The rows of the keys in arrays q, i, by their ctids: a lookup in the
 * primary key per element, whatever the statistics say (a join of the
 * arrays with the table was planned as a scan of the whole primary key,
 * dead entries and all, under a held horizon). */
#define BY_KEYS(q, i) "(ctid = ANY (ARRAY (SELECT x.ctid FROM unnest(" q \
	"::bigint[], " i "::bigint[]) AS k(qid, id) CROSS JOIN LATERAL" \
	" (SELECT ctid FROM saker_items WHERE qid = k.qid AND id = k.id" \
	" LIMIT 1) x)) AND id = ANY (" i "::bigint[]))"	/* LIMIT: not pulled up
	 * into a join.  id: a ctid names a row only within its segment (a
	 * partition); the same ctid in another segment is another row,
	 * whose id, unique store-wide, is not in the list */
/* an open item leased to this broker */
#define MY_OPEN " WHERE qid = $1::bigint AND id = $2::bigint" \
	" AND state::integer = 1 AND owner = $3::text"
/* the expired among no more than $3 ready items from the head (store.h) */
#define EXPIRED_AT_HEAD "DELETE FROM saker_items WHERE (qid, id) IN" \
	" (SELECT qid, id FROM (SELECT qid, id, expires FROM saker_items WHERE" \
	" qid = $1::bigint AND state = 0 AND due <= $2::bigint" \
	" AND (vis, id) >= ($4::bigint, $5::bigint)" \
	" ORDER BY vis, id LIMIT $3::bigint FOR UPDATE SKIP LOCKED) AS h" \
	" WHERE expires <> 0 AND expires <= $2::bigint)"

/* Every column of an item row but seg, in the table's order. */
#define PG_ITEM_ROW "qid, id, vis, due, state, owner, lease_until, flags," \
	" expires, created, len, data, crc, deliveries, attrs"
/* The items, in PG_SEGS segments (partitions by seg) that take the puts
 * in turn: one is emptied by TRUNCATE, which frees its files whatever
 * snapshot anyone holds, where DELETEd rows stay until VACUUM may remove
 * them (issue 47; docs/scaling.md, "Segments").  Keys (qid, id) are
 * unique by the sequence; the primary key must name seg as well. */
#define PG_SEGS "4"

static const char *const pg_sql[P_COUNT] = {
	[P_Q_FIND] = "SELECT id FROM saker_queues WHERE name = $1::bytea",
	[P_Q_CREATE] = "INSERT INTO saker_queues(name) VALUES ($1::bytea)"
	    " ON CONFLICT (name) DO NOTHING RETURNING id",
	[P_Q_LIST] = "SELECT name FROM saker_queues",
	[P_Q_DELETE] = "DELETE FROM saker_queues WHERE id = $1::bigint",
	[P_I_DELQ] = "DELETE FROM saker_items WHERE qid = $1::bigint",
	[P_C_DELQ] = "DELETE FROM saker_counts WHERE qid = $1::bigint",
	[P_TAKE_REMOVE] = HEAD_ROWS("1")
	    " DELETE FROM saker_items i USING c WHERE i.qid = c.qid AND"
	    " i.id = c.id" RETURNING_ITEM,
	[P_TAKE_OPEN] = HEAD_ROWS("1")
	    " UPDATE saker_items i SET state = 1, owner = $6::text,"
	    " lease_until = " DBNOW " + $7::bigint,"
	    " deliveries = least(i.deliveries + 1, " PG_DLV_MAX ")"
	    " FROM c WHERE i.qid = c.qid"
	    " AND i.id = c.id" RETURNING_ITEM,
	[P_PEEK] = "SELECT " ITEM_COLS " FROM saker_items WHERE " HEAD_WHERE
	    " ORDER BY vis, id LIMIT 1",
	[P_REINSERT] = "INSERT INTO saker_items(qid, id, vis, due, state, flags,"
	    " expires, created, len, data, crc, deliveries, attrs, seg) VALUES"
	    " ($1::bigint, $2::bigint, $3::bigint, $4::bigint, 0, $5::bigint,"
	    " $6::bigint, $7::bigint, $8::bigint, $9::bytea, $10::bigint,"
	    " $11::bigint, $12::bytea, " CUR_SEG ")",
	[P_DEL1] = "DELETE FROM saker_items WHERE qid = $1::bigint AND"
	    " id = $2::bigint",
	/* a damaged item seen by a peek: only while nobody has taken it */
	[P_DEL_READY] = "DELETE FROM saker_items WHERE qid = $1::bigint AND"
	    " id = $2::bigint AND state = 0",
	[P_CONFIRM] = "DELETE FROM saker_items" MY_OPEN,
	/* how many and their bytes: the layer's counters (store.h) */
	[P_EXPIRE] = "WITH d AS (" EXPIRED_AT_HEAD " RETURNING len)"
	    " SELECT count(*)::bigint, coalesce(sum(len), 0)::bigint FROM d",
	/* no scan of the queue: the layer keeps the counts (P_QCOUNT) */
	[P_STATS] = "SELECT"
	    " (SELECT coalesce(sum(total), 0)::bigint FROM saker_counts"
	    " WHERE qid = $1::bigint),"
	    " (SELECT coalesce(sum(expired), 0)::bigint FROM saker_counts"
	    " WHERE qid = $1::bigint),"
	    " coalesce((SELECT created FROM saker_items WHERE qid = $1::bigint"
	    " AND " READY " ORDER BY vis, id LIMIT 1), 0)",
	[P_QCOUNT] = "SELECT count(*) FILTER (WHERE " READY "),"
	    " coalesce(sum(len) FILTER (WHERE " READY "),"
	    " 0)::bigint, count(*) FILTER (WHERE state = 0 AND due > $2::bigint),"
	    " count(*) FILTER (WHERE state = 1)"
	    " FROM saker_items WHERE qid = $1::bigint",
	[P_C_ADD] = "INSERT INTO saker_counts(qid, owner, total, expired) VALUES"
	    " ($1::bigint, $2::text, $3::bigint, $4::bigint) ON CONFLICT (qid, owner)"
	    " DO UPDATE SET total = saker_counts.total + excluded.total,"
	    " expired = saker_counts.expired + excluded.expired",
	/* Items that fell due in (prev, now]: the expired ones are dropped
	 * (kind 1), the queues of the others are reported (kind 0). */
	[P_PROMOTE] = "WITH x AS (DELETE FROM saker_items WHERE state = 0 AND"
	    " due > $1::bigint AND due <= $2::bigint AND expires <> 0 AND"
	    " expires <= $2::bigint RETURNING qid, flags, created, data,"
	    " @DLV@ AS dlv, @ATR@ AS atr)"
	    " SELECT qid, 1::bigint, flags, created, data, dlv, atr FROM x"
	    " UNION ALL SELECT qid, 0::bigint, count(*)::bigint,"
	    " coalesce(sum(len), 0)::bigint, ''::bytea,"
	    " 0::bigint, NULL::bytea FROM saker_items WHERE state = 0 AND"
	    " due > $1::bigint AND due <= $2::bigint AND (expires = 0 OR"
	    " expires > $2::bigint) GROUP BY qid",
	/* P_EXPIRE for a queue with expire_to: the rows come back to be
	 * moved (flags, created, data, deliveries, attributes) */
	/* in FIFO order: DELETE ... RETURNING follows no ORDER BY, and the
	 * items must reach the expire_to queue as they stood */
	[P_EXPIRE_GET] = "WITH x AS (" EXPIRED_AT_HEAD " RETURNING vis, id,"
	    " flags, created, data, @DLV@ AS dlv, @ATR@ AS atr) SELECT flags,"
	    " created, data, dlv, atr FROM x ORDER BY vis, id",
	[P_NEXT] = "SELECT coalesce(min(due), 0)::bigint FROM saker_items"
	    " WHERE state = 0 AND due > $1::bigint",
	/* the rows this broker holds, by key (pg_renew()) */
	[P_RENEW] = "UPDATE saker_items SET lease_until = " DBNOW " + $2::bigint"
	    " WHERE " BY_KEYS("$3", "$4") " AND " HELD " AND owner = $1::text",
	/* The rows by their ctid (a TID scan): as a join of (qid, id) the
	 * planner may scan the whole table per swept row while its
	 * statistics still say it is empty -- a 2.8 s sweep on the loop was
	 * seen on a fresh 40,000-item table.  A row locked here cannot move
	 * before the UPDATE; state > 0 again in case it did, and the lease
	 * again: a ctid names a row only within its segment (format 7), the
	 * same ctid in another one is another row. */
	/* Leases that ran out at $1 or later (pg_tick()): under a held
	 * horizon the lease index keeps an entry for every item ever claimed
	 * or opened, and a sweep from the bottom steps over all of them.
	 * The last row is (0, the database's clock). */
	[P_SWEEP] = "WITH r AS (" GIVE_BACK " WHERE ctid = ANY (ARRAY (SELECT"
	    " ctid FROM saker_items WHERE state > 0 AND lease_until >= $1::bigint"
	    " AND lease_until < " DBNOW " FOR UPDATE SKIP LOCKED)) AND state > 0"
	    " AND lease_until >= $1::bigint AND lease_until < " DBNOW
	    " RETURNING qid) SELECT qid, 0::bigint FROM r UNION ALL"
	    " SELECT 0::bigint, " DBNOW,
	[P_MINE] = "SELECT qid, id FROM saker_items WHERE state = 1 AND"
	    " owner = $1::text",
	[P_RELEASE_ALL] = GIVE_BACK " WHERE state > 0 AND owner = $1::text"
	    " RETURNING qid",
	[P_IT_OPEN] = "SELECT " ITEM_COLS " FROM saker_items WHERE"
	    " qid = $1::bigint AND state = 1 ORDER BY vis, id",
	[P_IT_READY] = "SELECT " ITEM_COLS " FROM saker_items WHERE"
	    " qid = $1::bigint AND " READY " ORDER BY vis, id",
	[P_IT_DELAYED] = "SELECT " ITEM_COLS " FROM saker_items WHERE"
	    " qid = $1::bigint AND state = 0 AND due > $2::bigint ORDER BY due, id",
	[P_NOTIFY] = "SELECT pg_notify($1::text, unnest($2::text[]))",
	[P_SIZE] = "SELECT ((SELECT sum(pg_total_relation_size(relid)) FROM"
	    " pg_partition_tree('saker_items')) +"
	    " pg_total_relation_size('saker_queues') +"
	    " pg_total_relation_size('saker_counts') +"
	    " coalesce(pg_total_relation_size(to_regclass('saker_dedup')),"
	    " 0))::bigint",
	/*
	 * The batched statements: one per kind of write per batch, whatever
	 * the number of commands, sent in one pipeline with the COMMIT.
	 * $1 of P_QSYNC and P_PUTS is the same array of queue names, one per
	 * item.  P_QSYNC re-creates a queue another broker deleted and
	 * reports every queue's id, so handles follow a delete elsewhere.
	 */
	[P_QSYNC] = "WITH n AS (SELECT DISTINCT unnest($1::bytea[]) AS name),"
	    " c AS (INSERT INTO saker_queues(name) SELECT name FROM n"
	    " ON CONFLICT (name) DO NOTHING RETURNING id, name)"
	    " SELECT id, name FROM c UNION ALL"
	    " SELECT q.id, q.name FROM saker_queues q JOIN n ON q.name = n.name",
	/* Ids are drawn in put order (volatile functions are evaluated after
	 * the sort); FOR KEY SHARE makes a concurrent queue delete wait for
	 * this batch.  A queue deleted between P_QSYNC and here fails the
	 * statement, and with it the batch, rather than drop an item. */
	[P_PUTS] = "WITH ins AS (INSERT INTO saker_items(qid, id, vis, due,"
	    " state, flags, expires, created, len, data, crc, deliveries,"
	    " attrs, seg) SELECT q.id, u.id, " ABOVE_MARK("u.vis", "q") ", u.due,"
	    " 0, u.flags, u.expires, u.created, length(u.data), u.data, u.crc,"
	    " u.dlv, nullif(u.atr, ''::bytea), " CUR_SEG " FROM (SELECT"
	    " nextval('saker_item_id') AS id,"
	    " x.* FROM unnest($1::bytea[], $2::bigint[], $3::bigint[],"
	    " $4::bigint[], $5::bigint[], $6::bigint[], $7::bytea[],"
	    " $8::bigint[], $10::bigint[], $11::bytea[]) WITH ORDINALITY AS"
	    " x(name, vis, due, flags, expires, created, data, crc, dlv, atr,"
	    " ord) ORDER BY x.ord"
	    " OFFSET 0) u JOIN"
	    " saker_queues q ON q.name = u.name FOR KEY SHARE OF q RETURNING 1)"
	    " SELECT CASE WHEN count(*) = $9::bigint THEN 0 ELSE"
	    " ('saker: queue deleted by another broker during the batch; stored '"
	    " || count(*))::int END FROM ins",
	/* state changes of items this broker holds: 0 gives one back, 1 opens
	 * a claimed one, 2 claims (never sent: claims are P_CLAIM) */
	[P_SETSTATE] = "UPDATE saker_items i SET (state, deliveries, owner,"
	    " lease_until) = (SELECT u.st, CASE WHEN u.st = 1 THEN"
	    " least(i.deliveries + 1, " PG_DLV_MAX ") ELSE i.deliveries END,"
	    " CASE WHEN u.st = 0 THEN NULL ELSE i.owner END,"
	    " CASE WHEN u.st = 0 THEN 0 ELSE i.lease_until END"
	    " FROM unnest($1::bigint[], $2::bigint[], $3::bigint[])"
	    " AS u(qid, id, st) WHERE u.qid = i.qid AND u.id = i.id LIMIT 1)"
	    " WHERE " BY_KEYS("$1", "$2") " AND " HELD " AND owner = $4::text",
	/* confirmed open items and claimed items taken or expired */
	[P_DELS] = "DELETE FROM saker_items WHERE " BY_KEYS("$1", "$2")
	    " AND " HELD " AND owner = $3::text",
	[P_DOUBT_DELS] = "DELETE FROM saker_items WHERE " BY_KEYS("$1", "$2")
	    " AND (state = 0 OR owner = $3::text) RETURNING qid",
	[P_COUNTS] = "INSERT INTO saker_counts(qid, owner, total, expired)"
	    " SELECT u.qid, $1::text, u.t, u.e FROM unnest($2::bigint[],"
	    " $3::bigint[], $4::bigint[]) AS u(qid, t, e)"
	    " ON CONFLICT (qid, owner) DO UPDATE SET"
	    " total = saker_counts.total + excluded.total,"
	    " expired = saker_counts.expired + excluded.expired",
	/* claim ahead: up to $8 of the oldest visible items, leased to this
	 * broker as state 2 and served from its memory */
	[P_CLAIM] = HEAD_ROWS("$8::bigint")
	    " UPDATE saker_items i SET state = 2, owner = $6::text,"
	    " lease_until = " DBNOW " + $7::bigint FROM c WHERE i.qid = c.qid"
	    " AND i.id = c.id" RETURNING_ITEM,
	[P_GIVEBACK] = GIVE_BACK " WHERE state = 2 AND owner = $1::text"
	    " RETURNING qid",
	/* an open item of this broker to the tail of another queue, with
	 * its count (the dead-letter move); a new id puts it after the
	 * items already there with the same vis */
	[P_MOVE] = "UPDATE saker_items SET qid = $4::bigint, vis = coalesce("
	    "(SELECT " ABOVE_MARK("$5::bigint", "m") " FROM saker_queues m"
	    " WHERE m.id = $4::bigint FOR KEY SHARE), $5::bigint),"
	    " id = nextval('saker_item_id'),"
	    " due = 0, state = 0, owner = NULL, lease_until = 0" MY_OPEN,
	/* an open item of this broker back as a delayed one, due at $4:
	 * vis = due joins it to the tail when it falls due, and a new id
	 * after the items already there with the same vis (release_delayed) */
	[P_DELAY] = GIVE_BACK ", due = $4::bigint, vis = coalesce((SELECT "
	    ABOVE_MARK("$4::bigint", "m") " FROM saker_queues m WHERE"
	    " m.id = $1::bigint FOR KEY SHARE), $4::bigint),"
	    " id = nextval('saker_item_id')" MY_OPEN,
	/*
	 * The low-water mark of a queue (lo_vis, lo_id): no row of the queue,
	 * whatever its state, has a smaller (vis, id), so takes start their
	 * index scan there (pg_head_params()) instead of stepping over the
	 * dead versions of every item consumed since the last VACUUM -- all
	 * of them while something holds the xmin horizon (issue 47).  Held
	 * rows count (a released item keeps its key); new keys are made at
	 * or above it (ABOVE_MARK).  Moved up once a second by a broker that
	 * takes from the queue: P_ADV_LOCK first locks the queue rows no
	 * batch is putting into (FOR UPDATE conflicts with their FOR KEY
	 * SHARE; skipped ones wait for the next time), then P_ADVANCE, a
	 * statement whose snapshot sees every put that saw the old mark,
	 * moves each to its first row, or to now when that is later
	 * (delayed items only, or none).
	 */
	[P_ADV_LOCK] = "SELECT id FROM saker_queues WHERE id = ANY ($1::bigint[])"
	    " FOR UPDATE SKIP LOCKED",
	[P_ADVANCE] = "UPDATE saker_queues q SET lo_vis = c.vis, lo_id = c.id"
	    " FROM saker_queues l CROSS JOIN LATERAL (SELECT x.vis, x.id FROM"
	    " ((SELECT vis, id FROM saker_items WHERE qid = l.id AND state = 0"
	    " AND (vis, id) >= (l.lo_vis, l.lo_id) ORDER BY vis, id LIMIT 1)"
	    " UNION ALL (SELECT vis, id FROM saker_items WHERE qid = l.id AND"
	    " state > 0 AND (vis, id) >= (l.lo_vis, l.lo_id) ORDER BY vis, id"
	    " LIMIT 1) UNION ALL SELECT $2::bigint, 0::bigint) AS x"
	    " ORDER BY x.vis, x.id LIMIT 1) AS c"
	    " WHERE l.id = ANY ($1::bigint[]) AND q.id = l.id"
	    " AND (c.vis, c.id) > (l.lo_vis, l.lo_id)"
	    " RETURNING q.id, q.lo_vis, q.lo_id",
	/*
	 * Deduplication ids (store.h, DEDUPLICATION), by queue name: one
	 * record per key in the database, whichever broker wrote it.  Of two
	 * batches recording one key at once the unique index makes the
	 * second wait for the first; it then finds the key kept (no row:
	 * SAKER_EEXIST), or, if the first rolled back, records it.  An
	 * expired record is taken over (xmax set: replaced).
	 */
	[P_D_PUT] = "INSERT INTO saker_dedup(queue, key, expires) VALUES"
	    " ($1::bytea, $2::bytea, $3::bigint) ON CONFLICT (queue, key) DO"
	    " UPDATE SET expires = excluded.expires"
	    " WHERE saker_dedup.expires <= $4::bigint"
	    " RETURNING (xmax <> 0)::int::bigint",
	[P_D_DEL] = "DELETE FROM saker_dedup WHERE queue = $1::bytea AND"
	    " key = $2::bytea",
	/* oldest expiry first; records another batch is replacing wait */
	[P_D_SWEEP] = "DELETE FROM saker_dedup WHERE (queue, key) IN (SELECT"
	    " queue, key FROM saker_dedup WHERE queue = $1::bytea AND"
	    " expires <= $2::bigint ORDER BY expires LIMIT $3::bigint"
	    " FOR UPDATE SKIP LOCKED)",
	[P_D_LIST] = "SELECT key, expires FROM saker_dedup WHERE"
	    " queue = $1::bytea",
	/* the layer's first count of a queue's ids: one round trip, no key
	 * over the wire (an index-only scan of the primary key) */
	[P_D_COUNT] = "SELECT count(*)::bigint FROM saker_dedup WHERE"
	    " queue = $1::bytea",
	[P_D_DELQ] = "DELETE FROM saker_dedup WHERE queue = $1::bytea",
	/* What VACUUM of saker_items waits behind (pg_horizon_tick()): the
	 * age of the oldest transaction of this database holding a snapshot
	 * (ms; prepared transactions count from their PREPARE), the oldest
	 * xmin held anywhere (sessions, replication slots, standbys'
	 * hot_standby_feedback, prepared transactions) in transactions, and
	 * the dead rows of saker_items.  Other users' sessions show only to
	 * members of pg_read_all_stats. */
	[P_HORIZON] = "SELECT coalesce((extract(epoch FROM clock_timestamp() -"
	    " least((SELECT min(xact_start) FROM pg_stat_activity WHERE"
	    " backend_xmin IS NOT NULL AND pid <> pg_backend_pid() AND"
	    " datname = current_database() AND backend_type <>"
	    " 'autovacuum worker' AND query NOT ILIKE 'vacuum%'),"
	    " (SELECT min(prepared) FROM"
	    " pg_prepared_xacts WHERE database = current_database()))) *"
	    " 1000)::bigint, 0), greatest((SELECT max(age(backend_xmin)) FROM"
	    " pg_stat_activity WHERE pid <> pg_backend_pid()), (SELECT"
	    " max(age(xmin)) FROM pg_replication_slots), (SELECT"
	    " max(age(backend_xmin)) FROM pg_stat_replication), (SELECT"
	    " max(age(transaction)) FROM pg_prepared_xacts), 0)::bigint,"
	    " (SELECT sum(pg_stat_get_dead_tuples(relid))::bigint FROM"
	    " pg_partition_tree('saker_items'))",
	/* this broker's held rows of the segment after $2, the current one:
	 * into $2 with their keys, so that it can be truncated */
	[P_SEG_MINE] = "WITH m AS (DELETE FROM saker_items WHERE"
	    " seg = (($2::bigint + 1) % " PG_SEGS ")::smallint AND state > 0 AND"
	    " owner = $1::text RETURNING " PG_ITEM_ROW ") INSERT INTO"
	    " saker_items (" PG_ITEM_ROW ", seg) SELECT " PG_ITEM_ROW ","
	    " $2::bigint::smallint FROM m",
};

#define PG_LO_MIN "(-9223372036854775807 - 1)"
/* the held rows of a queue in (vis, id) order, for P_ADVANCE */
#define PG_HELD_INDEX "CREATE INDEX saker_items_held ON saker_items" \
	" (qid, vis, id) WHERE state > 0"
/* the deduplication ids: queue name, key, expiry (ms); swept by expiry */
#define PG_DEDUP_TABLE "CREATE TABLE saker_dedup (queue bytea NOT NULL," \
	" key bytea NOT NULL, expires bigint NOT NULL," \
	" PRIMARY KEY (queue, key));" \
	" CREATE INDEX saker_dedup_expires ON saker_dedup (queue, expires)"

#define PG_AV " WITH (autovacuum_vacuum_scale_factor = 0.01," \
	" autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 1)"
#define PG_ITEMS_TABLE "CREATE TABLE saker_items (" \
	" qid bigint NOT NULL," \
	" id bigint NOT NULL," \
	" vis bigint NOT NULL,"		/* ordering time */ \
	" due bigint NOT NULL,"		/* visible from; 0 = at once */ \
	" state smallint NOT NULL,"	/* 0 ready or delayed, 1 open, 2 \
					 * claimed ahead by a broker */ \
	" owner text,"			/* lease owner of an open item */ \
	" lease_until bigint NOT NULL DEFAULT 0," /* database clock, ms */ \
	" flags bigint NOT NULL," \
	" expires bigint NOT NULL," \
	" created bigint NOT NULL," \
	" len bigint NOT NULL," \
	" data bytea NOT NULL," \
	" crc bigint,"			/* kit_item_crc(); NULL: unchecked */ \
	" deliveries bigint NOT NULL DEFAULT 0," /* take(OPEN) hand-outs */ \
	" attrs bytea,"			/* store.h; NULL: none */ \
	" seg smallint NOT NULL)"	/* the segment: saker_items_s<seg> */ \
	" PARTITION BY LIST (seg);" \
	" CREATE TABLE saker_items_s0 PARTITION OF saker_items" \
	" FOR VALUES IN (0)" PG_AV ";" \
	" CREATE TABLE saker_items_s1 PARTITION OF saker_items" \
	" FOR VALUES IN (1)" PG_AV ";" \
	" CREATE TABLE saker_items_s2 PARTITION OF saker_items" \
	" FOR VALUES IN (2)" PG_AV ";" \
	" CREATE TABLE saker_items_s3 PARTITION OF saker_items" \
	" FOR VALUES IN (3)" PG_AV
#define PG_ITEMS_INDEXES "ALTER TABLE saker_items ADD PRIMARY KEY" \
	" (qid, id, seg);" \
	" CREATE INDEX saker_items_head ON saker_items (qid, vis, id)" \
	" WHERE state = 0;" \
	" CREATE INDEX saker_items_due ON saker_items (due)" \
	" WHERE state = 0 AND due > 0;" \
	" CREATE INDEX saker_items_lease ON saker_items (lease_until)" \
	" WHERE state > 0; " PG_HELD_INDEX
/*
 * saker_rotate(rows, ms, max): once a second by every broker, on its
 * VACUUM connection (pg_vacuum_tick(); search_path: the schema's),
 * one at a time (an advisory lock; the others get r = -1).  When the
 * current segment cur has taken `rows` ids or is `ms` old (else r = 0),
 * the next one, nxt, the oldest, is emptied and becomes current: its
 * ready and delayed items (at most max) are moved into cur with their
 * keys, so FIFO and due order hold; held items (open, claimed ahead) are
 * moved by their owners (P_SEG_MINE) and those of a broker that died go
 * back to the queue when their lease runs out (P_SWEEP), so nothing pins
 * a segment for longer than a lease.  r = -3: rows are left, -2: the
 * lock was not had within 50 ms (a batch uses the segment; all of
 * saker_items waits behind the lock meanwhile, so it must be short),
 * 1: nxt was truncated and is current.  Returned with moved (rows moved)
 * and cur, the current segment after.
 */
#define PG_ROTATE_FN "CREATE FUNCTION saker_rotate(p_rows bigint," \
	" p_ms bigint, p_max bigint, OUT r int, OUT moved bigint," \
	" OUT cur int, OUT truncated bigint) LANGUAGE plpgsql SET search_path FROM CURRENT AS $f$ DECLARE nxt int; at bigint;" \
	" sid bigint; last bigint; n bigint; now_ms bigint := " DBNOW ";" \
	" BEGIN moved := 0; r := 0;" \
	" SELECT value INTO cur FROM saker_meta WHERE key = 'seg';" \
	" SELECT value INTO truncated FROM saker_meta" \
	" WHERE key = 'seg_truncated';" \
	" SELECT value INTO at FROM saker_meta WHERE key = 'seg_at';" \
	" SELECT value INTO sid FROM saker_meta WHERE key = 'seg_id';" \
	" SELECT last_value INTO last FROM saker_item_id;" \
	" IF now_ms - at < p_ms AND last - sid < p_rows THEN RETURN; END IF;" \
	" r := -1;" \
	" IF NOT pg_try_advisory_xact_lock(7308604707263426419) THEN RETURN;" \
	" END IF;" \
	" SELECT value INTO cur FROM saker_meta WHERE key = 'seg';" \
	" nxt := (cur + 1) % " PG_SEGS ";" \
	" EXECUTE format('WITH m AS (DELETE FROM saker_items_s%s WHERE ctid =" \
	" ANY (ARRAY (SELECT ctid FROM saker_items_s%s WHERE state = 0 LIMIT" \
	" %s FOR UPDATE SKIP LOCKED)) AND state = 0 RETURNING " PG_ITEM_ROW ")" \
	" INSERT INTO saker_items (" PG_ITEM_ROW ", seg) SELECT " PG_ITEM_ROW \
	", %s FROM m', nxt, nxt, p_max, cur);" \
	" GET DIAGNOSTICS moved = ROW_COUNT;" \
	" r := -3;" \
	" EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM saker_items_s%s" \
	" LIMIT 1) x', nxt) INTO n;" \
	" IF n > 0 THEN RETURN; END IF;" \
	" r := -2;" \
	" BEGIN PERFORM set_config('lock_timeout', '50ms', true);" \
	" EXECUTE format('LOCK TABLE saker_items_s%s IN ACCESS EXCLUSIVE MODE'," \
	" nxt);" \
	" EXCEPTION WHEN lock_not_available THEN RETURN; END;" \
	" r := -3;" \
	" EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM saker_items_s%s" \
	" LIMIT 1) x', nxt) INTO n;" \
	" IF n > 0 THEN RETURN; END IF;" \
	" EXECUTE format('TRUNCATE saker_items_s%s', nxt);" \
	" UPDATE saker_meta SET value = CASE key WHEN 'seg' THEN nxt" \
	" WHEN 'seg_at' THEN now_ms WHEN 'seg_id' THEN last" \
	" ELSE value + 1 END WHERE key IN ('seg', 'seg_at', 'seg_id'," \
	" 'seg_truncated');" \
	" cur := nxt; truncated := truncated + 1; r := 1; END $f$"
/* the segments' state (PG_ROTATE_FN) and the function */
#define PG_SEGS_SQL "INSERT INTO saker_meta VALUES ('seg', 0)," \
	" ('seg_at', " DBNOW "), ('seg_id', 0), ('seg_truncated', 0); " \
	PG_ROTATE_FN

static const char pg_schema_sql[] =
    "CREATE TABLE saker_meta ("
    " key text PRIMARY KEY,"
    " value bigint NOT NULL);"
    "CREATE TABLE saker_queues ("
    " id bigserial PRIMARY KEY,"
    " name bytea NOT NULL UNIQUE,"
    " lo_vis bigint NOT NULL DEFAULT " PG_LO_MIN ","	/* low-water mark */
    " lo_id bigint NOT NULL DEFAULT 0);"
    "CREATE SEQUENCE saker_item_id;"
    PG_ITEMS_TABLE ";"
    PG_ITEMS_INDEXES ";"
    PG_SEGS_SQL ";"
    "CREATE TABLE saker_counts ("
    " qid bigint NOT NULL,"
    " owner text NOT NULL,"
    " total bigint NOT NULL,"
    " expired bigint NOT NULL,"
    " PRIMARY KEY (qid, owner));"
    PG_DEDUP_TABLE ";";

/* [v]: format v to v + 1 */
static const char *const pg_upgrade_sql[] = {
	/* format 1 had no claimed items; its brokers must not share a store
	 * with this one, hence the version bump */
	[1] = "DROP INDEX saker_items_lease;"
	    " CREATE INDEX saker_items_lease ON saker_items (lease_until)"
	    " WHERE state > 0; UPDATE saker_meta SET value = 2"
	    " WHERE key = 'format'",
	/* format 3: items carry a checksum.  Adding a nullable column
	 * rewrites no rows; old rows keep NULL and are not checked.
	 * Committed durably whatever the sync mode.  Brokers of the
	 * previous release refuse the store from now on. */
	[2] = "SET LOCAL synchronous_commit = on;"
	    " ALTER TABLE saker_items ADD COLUMN IF NOT EXISTS crc bigint;"
	    " UPDATE saker_meta SET value = 3 WHERE key = 'format'",
	/* format 4: delivery counts.  A constant default adds the column
	 * without rewriting rows (PostgreSQL 11 and later). */
	[3] = "SET LOCAL synchronous_commit = on;"
	    " ALTER TABLE saker_items ADD COLUMN IF NOT EXISTS"
	    " deliveries bigint NOT NULL DEFAULT 0;"
	    " UPDATE saker_meta SET value = 4 WHERE key = 'format'",
	/* format 5: the low-water marks start at the bottom (constant
	 * defaults: no rewrite); brokers of format 4 make keys below a
	 * mark and are refused from now on */
	[4] = "SET LOCAL synchronous_commit = on;"
	    " ALTER TABLE saker_queues ADD COLUMN IF NOT EXISTS lo_vis bigint"
	    " NOT NULL DEFAULT " PG_LO_MIN ", ADD COLUMN IF NOT EXISTS lo_id"
	    " bigint NOT NULL DEFAULT 0; " PG_HELD_INDEX ";"
	    " UPDATE saker_meta SET value = 5 WHERE key = 'format'",
	/* format 6: item attributes (a nullable column: no rewrite, old
	 * items have none, their checksums hold) and the deduplication
	 * ids; brokers of format 5 would drop attributes and are refused */
	[5] = "SET LOCAL synchronous_commit = on;"
	    " ALTER TABLE saker_items ADD COLUMN IF NOT EXISTS attrs bytea; "
	    PG_DEDUP_TABLE "; UPDATE saker_meta SET value = 6"
	    " WHERE key = 'format'",
	/* format 7: the items move into segment 0 of the partitioned table
	 * (one copy, under the schema lock; the old table's indexes go with
	 * it before the new ones take their names); brokers of format 6
	 * would put into no segment and are refused */
	[6] = "SET LOCAL synchronous_commit = on;"
	    " ALTER TABLE saker_items RENAME TO saker_items_f6; "
	    PG_ITEMS_TABLE "; INSERT INTO saker_items (" PG_ITEM_ROW ", seg)"
	    " SELECT " PG_ITEM_ROW ", 0 FROM saker_items_f6;"
	    " DROP TABLE saker_items_f6; " PG_ITEMS_INDEXES "; " PG_SEGS_SQL ";"
	    " UPDATE saker_meta SET value = 7 WHERE key = 'format'",
};
_Static_assert(sizeof(pg_upgrade_sql) / sizeof(pg_upgrade_sql[0]) ==
    PG_FORMAT_VERSION, "a new format needs its upgrade");

/* Counter rows of earlier broker processes are folded into one row per
 * queue; additive upserts make this safe while other brokers run. */
const char pg_fold_sql[] =
    "BEGIN;"
    "DELETE FROM saker_counts c WHERE NOT EXISTS"
    " (SELECT 1 FROM saker_queues q WHERE q.id = c.qid);"
    "WITH d AS (DELETE FROM saker_counts WHERE owner <> '' RETURNING qid,"
    " total, expired) INSERT INTO saker_counts(qid, owner, total, expired)"
    " SELECT qid, '', sum(total)::bigint, sum(expired)::bigint FROM d"
    " GROUP BY qid ON CONFLICT (qid, owner) DO UPDATE SET"
    " total = saker_counts.total + excluded.total,"
    " expired = saker_counts.expired + excluded.expired;"
    "COMMIT";

/* sql with every `mark` (5 bytes) replaced by `by`; NULL when out of
 * memory. */
static char *
pg_sql_sub(const char *sql, const char *mark, const char *by)
{
	const char *at;
	char *out;
	size_t n;

	n = strlen(sql) + 1;
	for (at = sql; (at = strstr(at, mark)) != NULL; at += 5)
		n += strlen(by);
	if ((out = malloc(n)) == NULL)
		return NULL;
	out[0] = '\0';
	while ((at = strstr(sql, mark)) != NULL) {
		strncat(out, sql, (size_t)(at - sql));
		strcat(out, by);
		sql = at + 5;
	}
	strcat(out, sql);
	return out;
}

/* pg_sql[i] with @CRC@, @DLV@ and @ATR@ replaced by what this store's
 * format has (ITEM_COLS). */
static char *
pg_sql_for(const char *sql, int64_t version)
{
	char *a, *b, *c;

	if ((a = pg_sql_sub(sql, "@CRC@", version < 3 ? "NULL::bigint" :
	    "crc")) == NULL)
		return NULL;
	b = pg_sql_sub(a, "@DLV@", version < 4 ? "0::bigint" : "deliveries");
	free(a);
	if (b == NULL)
		return NULL;
	c = pg_sql_sub(b, "@ATR@", version < 6 ? "NULL::bytea" : "attrs");
	free(b);
	return c;
}

/* The session settings: durability, read-only, schema; READ COMMITTED
 * whatever the database's default, since P_ADVANCE must see what
 * committed before P_ADV_LOCK got its locks; no bitmap scans: with the
 * statistics of a queue table (nearly empty, after a VACUUM of a full
 * one) the planner took a bitmap scan of a queue's every primary key
 * entry, dead ones too, and a sort, for the claim that the head index
 * answers in order (13,092 buffers and 220 ms against 34 under a held
 * horizon); no sequential scans: a segment just truncated (format 7)
 * has statistics of an empty table, and the cached generic plan of a
 * claim was a scan of every segment and a sort, reading each dead row of
 * the current one per claim under a held horizon (5,178 buffers a call
 * against 109 before segments; all of saker_items' statements have an
 * index for their rows).  Once open (`locks`), a lock wait ends at 3/4 of timeout=:
 * its statement fails and loses the batch, where the silence of a longer
 * wait would drop the connection (a batch of a broker cut off holds the
 * ids it recorded until the database notices). */
static void
pg_session_sql(const struct pg_store *s, char *sql_set, size_t len,
    bool locks)
{
	char lock[64] = "";

	if (locks)
		snprintf(lock, sizeof(lock), ", set_config('lock_timeout', '%"
		    PRId64 "', false)", s->timeout_ms * 3 / 4);
	/* the schema name was checked to need no quoting beyond this */
	snprintf(sql_set, len, "SELECT set_config("
	    "'synchronous_commit', '%s', false), set_config("
	    "'default_transaction_read_only', '%s', false), set_config("
	    "'default_transaction_isolation', 'read committed', false),"
	    " set_config('enable_bitmapscan', 'off', false),"
	    " set_config('enable_seqscan', 'off', false)%s%s%s%s",
	    s->sync == SAKER_SYNC_ALWAYS ? "on" : "off",
	    s->read_only ? "on" : "off", lock, s->schema != NULL ?
	    ", set_config('search_path', '\"" : "", s->schema != NULL ?
	    s->schema : "", s->schema != NULL ? "\"', false)" : "");
}

/* open(): the session settings before anything reads the schema. */
int
pg_session(struct pg_store *s)
{
	char sql[640];

	/* brokers starting together wait for each other's schema lock */
	pg_session_sql(s, sql, sizeof(sql), false);
	return pg_simple(s, sql, "session setup");
}

/*
 * Set up the session and prepare every statement, pipelined: one round
 * trip (a reconnect runs it on the loop, bounded by the deadline like
 * any statement).
 */
int
pg_prepare_all(struct pg_store *s)
{
	PGresult *res;
	char name[16], sql_set[640], *sql;
	const char *what = "session setup";
	int i, n = 0, got = 0, bad = 0, nulls = 0;
	bool ok = true;

	pg_session_sql(s, sql_set, sizeof(sql_set), true);
	if (!PQenterPipelineMode(s->conn) ||
	    !PQsendQueryParams(s->conn, sql_set, 0, NULL, NULL, NULL, NULL, 0))
		ok = false;
	n++;
	for (i = 0; ok && i < P_COUNT; i++) {
		/* a read-only open of a store from before format 4 (dump,
		 * migrate, check) reads it as it is: before format 3 no crc
		 * column, nothing to check; no delivery counts, and no
		 * inserts or writes of them */
		if (s->version < 4 && (i == P_PUTS || i == P_REINSERT ||
		    i == P_TAKE_OPEN || i == P_SETSTATE || i == P_MOVE))
			continue;
		/* nor low-water marks before format 5 */
		if (s->version < 5 && (i == P_PUTS || i == P_MOVE ||
		    i == P_DELAY || i == P_ADV_LOCK || i == P_ADVANCE))
			continue;
		/* nor attributes and deduplication ids before format 6 */
		if (s->version < 6 && (i == P_PUTS || i == P_REINSERT ||
		    (i >= P_D_PUT && i <= P_D_DELQ)))
			continue;
		/* nor segments before format 7 */
		if (s->version < 7 && (i == P_PUTS || i == P_REINSERT ||
		    i == P_SEG_MINE))
			continue;
		snprintf(name, sizeof(name), "s%d", i);
		if ((sql = pg_sql_for(pg_sql[i], s->version)) == NULL) {
			(void)PQexitPipelineMode(s->conn);
			return pg_errf(s, SAKER_ENOMEM, "out of memory");
		}
		ok = PQsendPrepare(s->conn, name, sql, 0, NULL) == 1;
		free(sql);
		n++;
	}
	if (!ok || !PQpipelineSync(s->conn)) {
		pg_fail(s, NULL, what);
		return s->code;
	}
	pg_deadline(s);
	for (;;) {
		if (!pg_next(s, &res))
			return pg_fail(s, NULL, what);
		if (res == NULL) {
			if (++nulls > 1 || PQstatus(s->conn) == CONNECTION_BAD)
				break;
			continue;
		}
		nulls = 0;
		if (PQresultStatus(res) == PGRES_PIPELINE_SYNC) {
			PQclear(res);
			break;
		}
		if (PQresultStatus(res) != PGRES_COMMAND_OK &&
		    PQresultStatus(res) != PGRES_TUPLES_OK &&
		    PQresultStatus(res) != PGRES_PIPELINE_ABORTED && !bad) {
			bad = 1;
			pg_fail(s, res, got == 0 ? what : "preparing statements"
			    " (is the saker schema damaged?)");
		}
		got++;
		PQclear(res);
		if (s->conn == NULL)
			return s->code;
	}
	if (s->conn != NULL && PQpipelineStatus(s->conn) != PQ_PIPELINE_OFF)
		(void)PQexitPipelineMode(s->conn);
	if (bad)
		return s->code;
	if (got < n)
		return pg_fail(s, NULL, what);
	return SAKER_OK;
}

/* ---- schema ---- */

int
pg_check_schema(struct pg_store *s, bool create)
{
	char sql[256];
	PGresult *res;
	int64_t version = 0;
	bool exists;
	int err;

	if ((err = pg_simple(s, "BEGIN", "begin")) != SAKER_OK)
		return err;
	/* brokers starting together on an empty database create it once;
	 * CREATE SCHEMA IF NOT EXISTS too, under the lock: two at once can
	 * fail one with a unique violation on pg_namespace */
	if (!s->read_only && (err = pg_simple(s, "SELECT pg_advisory_xact_lock("
	    "7308604707263426418)", "locking the schema")) != SAKER_OK)
		goto out;
	if (s->schema != NULL && create && !s->read_only) {
		snprintf(sql, sizeof(sql), "CREATE SCHEMA IF NOT EXISTS \"%s\"",
		    s->schema);
		if ((err = pg_simple(s, sql, "creating schema")) != SAKER_OK)
			goto out;
	}
	res = pg_exec(s, "SELECT to_regclass('saker_meta') IS NOT NULL");
	if (res == NULL || PQresultStatus(res) != PGRES_TUPLES_OK) {
		err = pg_fail(s, res, "checking the schema");
		PQclear(res);
		goto out;
	}
	exists = PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	if (!exists) {
		if (!create || s->read_only) {
			err = pg_errf(s, SAKER_ENOTFOUND, "postgres: no saker"
			    " store in this database%s%s", s->schema != NULL ?
			    ", schema " : "", s->schema != NULL ? s->schema : "");
			goto out;
		}
		if ((err = pg_simple(s, pg_schema_sql, "creating tables")) !=
		    SAKER_OK)
			goto out;
		snprintf(sql, sizeof(sql), "INSERT INTO saker_meta VALUES"
		    " ('format', %d)", PG_FORMAT_VERSION);
		if ((err = pg_simple(s, sql, "creating tables")) != SAKER_OK)
			goto out;
		err = pg_simple(s, "COMMIT", "creating tables");
		s->version = PG_FORMAT_VERSION;
		return err;
	}
	res = pg_exec(s, "SELECT value::text FROM saker_meta WHERE"
	    " key = 'format'");
	if (res == NULL || PQresultStatus(res) != PGRES_TUPLES_OK) {
		err = pg_fail(s, res, "reading the format version");
		PQclear(res);
		goto out;
	}
	if (PQntuples(res) > 0)
		version = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	/* under the schema lock: brokers starting together upgrade once */
	for (; version >= 1 && version < PG_FORMAT_VERSION && !s->read_only;
	    version++)
		if ((err = pg_simple(s, pg_upgrade_sql[version],
		    "upgrading the format")) != SAKER_OK)
			goto out;
	if (version > PG_FORMAT_VERSION)
		err = pg_errf(s, SAKER_EVERSION, "postgres: store format version"
		    " %" PRId64 " is newer than this build (%d)", version,
		    PG_FORMAT_VERSION);
	else if (version < 1)
		err = pg_errf(s, SAKER_ECORRUPT, "postgres: bad saker format"
		    " version %" PRId64, version);
	else
		err = SAKER_OK;
	s->version = version;
out:
	res = pg_exec(s, err == SAKER_OK ? "COMMIT" : "ROLLBACK");
	if (err == SAKER_OK && (res == NULL ||
	    PQresultStatus(res) != PGRES_COMMAND_OK))
		err = pg_fail(s, res, "checking the schema");
	PQclear(res);
	return err;
}
