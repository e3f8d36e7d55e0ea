/* postgres.c -- the PostgreSQL queue store: several brokers over one database. */
#include "config.h"

#include <sys/epoll.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "saker/store.h"
#include "clock.h"
#include "kit.h"
#include "qtab.h"
#include "duration.h"

/*
 * Layout (docs/scaling.md has the full story):
 *   saker_meta(key, value)          format version
 *   saker_queues(id, name)          one row per queue
 *   saker_items(qid, id, ...)       every item: ready, delayed, open
 *   saker_counts(qid, owner, ...)   total/expired counters, one row per
 *                                   queue and broker, summed when read
 *
 * An item is visible when state = 0 and due <= now (due 0: at once).
 * Visible items are ordered by (vis, id): vis is the put time of a ready
 * item and the due time of a delayed one, so a delayed item joins the
 * tail when it falls due without any promotion step.  An open item has
 * state 1, a lease owner (this broker's identity, unique per process
 * start) and a lease expiry on the database clock; live brokers renew
 * their leases every tick and any broker returns expired ones.
 *
 * Statements that change items run inside the batch transaction, so one
 * COMMIT per loop turn makes a whole batch durable (group commit).  After
 * any failed statement PostgreSQL refuses the rest of the transaction:
 * the driver rolls the batch back at once and fails the next commit().
 */

/* 2: state 2 (claimed ahead); the lease index covers it.
 * 3: saker_items.crc, the item's CRC32C (kit_item_crc); NULL in rows
 * written before format 3, which are not checked.
 * 4: saker_items.deliveries, the delivery count (store.h); 0 in rows
 * written before. */
/* PostgreSQL's largest field value is 1 GB less one byte (MaxAllocSize)
 * including its 4-byte header; keep a little more aside for the wire. */
#define PG_MAX_ITEM ((uint64_t)0x3fffffff - 64)
#define PG_FORMAT_VERSION 4
#define PG_LEASE_MS 60000
/* Items put by a broker whose clock runs ahead are still taken if they are
 * at most this far in the future; the bound keeps a queue full of delayed
 * items from being scanned by every take. */
#define PG_SKEW_MS 60000
/* NOTIFY payloads are limited to 8000 bytes. */
#define PG_NOTIFY_MAX 7000
/* Reconnection attempts: one per tick (about a second).  They are cheap
 * now that they never block the loop (pg_link_*), and the window after a
 * failover is the promotion plus at most this. */
#define PG_RETRY_MIN_MS 1000
/* ticks are about a second apart, not exactly */
#define PG_TICK_SLACK_MS 200
/* the VACUUM connection, after a failure */
#define PG_VACUUM_RETRY_MS 16000
/* Default of the timeout= option: the longest the broker waits for a
 * sign of life from the database, in a round trip or connecting. */
#define PG_TIMEOUT_MS 2000
/* Default of the probe= option (pg_next()) */
#define PG_PROBE_MS 250
/* open() may wait longer: nothing else is running yet, and brokers
 * starting together wait for each other's schema lock. */
#define PG_OPEN_TIMEOUT_MS 10000
#define PG_MAX_PARAMS 12
/* Most items one take claims ahead (they are held in memory). */
#define PG_CLAIM_MAX 64
/* Most queues a commit claims for the next turn (pg_commit). */
#define PG_PRECLAIM_MAX 4
/* Claimed items not taken for this long go back to the queue. */
#define PG_HELD_IDLE_MS 1000
/* Default of the vacuum= option: the broker's own VACUUM of saker_items
 * at most this often, while it writes (pg_vacuum_tick()). */
#define PG_VACUUM_MS 1000

#define DBNOW "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
/* ready for stats and listings: visible, or claimed ahead by a broker */
#define READY "((state = 0 AND due <= $2::bigint) OR state = 2)"
/* @CRC@ stands for the crc column, or NULL::bigint while a read-only
 * open reads a store from before format 3; @DLV@ for the deliveries
 * column, or 0::bigint before format 4 (pg_prepare_all()). */
#define ITEM_COLS "id, flags, expires, created, vis, due, data, @CRC@, @DLV@"
/* the columns of ITEM_COLS, by number */
enum { C_ID, C_FLAGS, C_EXPIRES, C_CREATED, C_VIS, C_DUE, C_DATA, C_CRC,
    C_DLV };
#define PG_DLV_MAX "65535"	/* SAKER_DELIVERIES_MAX */
/* $4, $5: the last item this transaction took from the queue.  Rows a
 * transaction deleted stay in the index until it ends and every later
 * scan would step over them again; starting past them keeps a batch of
 * takes linear. */
#define HEAD_WHERE "qid = $1::bigint AND state = 0 AND due <= $2::bigint" \
	" AND vis <= $3::bigint AND (vis, id) > ($4::bigint, $5::bigint)"

enum {
	P_Q_FIND, P_Q_CREATE, P_Q_LIST, P_Q_DELETE, P_I_DELQ, P_C_DELQ,
	P_TAKE_REMOVE, P_TAKE_OPEN, P_PEEK, P_REINSERT, P_DEL1, P_DEL_READY,
	P_CONFIRM, P_RELEASE, P_EXPIRE, P_STATS, P_C_ADD, P_PROMOTE,
	P_NEXT, P_RENEW, P_SWEEP, P_MINE, P_RELEASE_ALL, P_IT_OPEN,
	P_IT_READY, P_IT_DELAYED, P_NOTIFY, P_SIZE,
	P_QSYNC, P_PUTS, P_SETSTATE, P_DELS, P_COUNTS, P_CLAIM, P_GIVEBACK,
	P_MOVE, P_EXPIRE_GET, P_DELAY, P_COUNT
};

static const char *const pg_sql[P_COUNT] = {
	[P_Q_FIND] = "SELECT id FROM saker_queues WHERE name = $1::bytea",
	[P_Q_CREATE] = "INSERT INTO saker_queues(name) VALUES ($1::bytea)"
	    " ON CONFLICT (name) DO NOTHING RETURNING id",
	[P_Q_LIST] = "SELECT name FROM saker_queues",
	[P_Q_DELETE] = "DELETE FROM saker_queues WHERE id = $1::bigint",
	[P_I_DELQ] = "DELETE FROM saker_items WHERE qid = $1::bigint",
	[P_C_DELQ] = "DELETE FROM saker_counts WHERE qid = $1::bigint",
	[P_TAKE_REMOVE] = "WITH c AS (SELECT qid, id FROM saker_items WHERE "
	    HEAD_WHERE " ORDER BY vis, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
	    " DELETE FROM saker_items i USING c WHERE i.qid = c.qid AND"
	    " i.id = c.id RETURNING i.id, i.flags, i.expires, i.created, i.vis,"
	    " i.due, i.data, @CRC@, @DLV@",
	[P_TAKE_OPEN] = "WITH c AS (SELECT qid, id FROM saker_items WHERE "
	    HEAD_WHERE " ORDER BY vis, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
	    " UPDATE saker_items i SET state = 1, owner = $6::text,"
	    " lease_until = " DBNOW " + $7::bigint,"
	    " deliveries = least(i.deliveries + 1, " PG_DLV_MAX ")"
	    " FROM c WHERE i.qid = c.qid"
	    " AND i.id = c.id RETURNING i.id, i.flags, i.expires, i.created,"
	    " i.vis, i.due, i.data, @CRC@, @DLV@",
	[P_PEEK] = "SELECT " ITEM_COLS " FROM saker_items WHERE " HEAD_WHERE
	    " ORDER BY vis, id LIMIT 1",
	[P_REINSERT] = "INSERT INTO saker_items(qid, id, vis, due, state, flags,"
	    " expires, created, len, data, crc, deliveries) VALUES ($1::bigint,"
	    " $2::bigint, $3::bigint, $4::bigint, 0, $5::bigint, $6::bigint,"
	    " $7::bigint, $8::bigint, $9::bytea, $10::bigint, $11::bigint)",
	[P_DEL1] = "DELETE FROM saker_items WHERE qid = $1::bigint AND"
	    " id = $2::bigint",
	/* a damaged item seen by a peek: only while nobody has taken it */
	[P_DEL_READY] = "DELETE FROM saker_items WHERE qid = $1::bigint AND"
	    " id = $2::bigint AND state = 0",
	[P_CONFIRM] = "DELETE FROM saker_items WHERE qid = $1::bigint AND"
	    " id = $2::bigint AND state = 1 AND owner = $3::text",
	[P_RELEASE] = "UPDATE saker_items SET state = 0, owner = NULL,"
	    " lease_until = 0 WHERE qid = $1::bigint AND id = $2::bigint AND"
	    " state = 1 AND owner = $3::text",
	/* looks at no more than $3 ready items from the head (store.h) */
	[P_EXPIRE] = "DELETE FROM saker_items WHERE (qid, id) IN (SELECT qid, id"
	    " FROM (SELECT qid, id, expires FROM saker_items WHERE"
	    " qid = $1::bigint AND state = 0 AND due <= $2::bigint"
	    " ORDER BY vis, id LIMIT $3::bigint FOR UPDATE SKIP LOCKED) AS h"
	    " WHERE expires <> 0 AND expires <= $2::bigint)",
	[P_STATS] = "SELECT count(*) FILTER (WHERE " READY "),"
	    " coalesce(sum(len) FILTER (WHERE " READY "),"
	    " 0)::bigint, count(*) FILTER (WHERE state = 0 AND due > $2::bigint),"
	    " count(*) FILTER (WHERE state = 1),"
	    " (SELECT coalesce(sum(total), 0)::bigint FROM saker_counts"
	    " WHERE qid = $1::bigint),"
	    " (SELECT coalesce(sum(expired), 0)::bigint FROM saker_counts"
	    " WHERE qid = $1::bigint),"
	    " coalesce((SELECT created FROM saker_items WHERE qid = $1::bigint"
	    " AND " READY " ORDER BY vis, id LIMIT 1), 0)"
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
	    " @DLV@ AS dlv)"
	    " SELECT qid, 1::bigint, flags, created, data, dlv FROM x UNION ALL"
	    " SELECT DISTINCT qid, 0::bigint, 0::bigint, 0::bigint, ''::bytea,"
	    " 0::bigint FROM saker_items WHERE state = 0 AND"
	    " due > $1::bigint AND due <= $2::bigint AND (expires = 0 OR"
	    " expires > $2::bigint)",
	/* P_EXPIRE for a queue with expire_to: the rows come back to be
	 * moved (flags, created, data, deliveries) */
	[P_EXPIRE_GET] = "DELETE FROM saker_items WHERE (qid, id) IN (SELECT"
	    " qid, id FROM (SELECT qid, id, expires FROM saker_items WHERE"
	    " qid = $1::bigint AND state = 0 AND due <= $2::bigint"
	    " ORDER BY vis, id LIMIT $3::bigint FOR UPDATE SKIP LOCKED) AS h"
	    " WHERE expires <> 0 AND expires <= $2::bigint)"
	    " RETURNING flags, created, data, @DLV@",
	[P_NEXT] = "SELECT coalesce(min(due), 0)::bigint FROM saker_items"
	    " WHERE state = 0 AND due > $1::bigint",
	[P_RENEW] = "UPDATE saker_items SET lease_until = " DBNOW " + $2::bigint"
	    " WHERE state > 0 AND owner = $1::text",
	/* The rows by their ctid (a TID scan): as a join of (qid, id) the
	 * planner may scan the whole table per swept row while its
	 * statistics still say it is empty -- a 2.8 s sweep on the loop was
	 * seen on a fresh 40,000-item table.  A row locked here cannot move
	 * before the UPDATE; state > 0 again in case it did. */
	[P_SWEEP] = "UPDATE saker_items SET state = 0, owner = NULL,"
	    " lease_until = 0 WHERE ctid = ANY (ARRAY (SELECT ctid FROM"
	    " saker_items WHERE state > 0 AND lease_until < " DBNOW
	    " FOR UPDATE SKIP LOCKED)) AND state > 0 RETURNING qid",
	[P_MINE] = "SELECT qid, id FROM saker_items WHERE state = 1 AND"
	    " owner = $1::text",
	[P_RELEASE_ALL] = "UPDATE saker_items SET state = 0, owner = NULL,"
	    " lease_until = 0 WHERE state > 0 AND owner = $1::text RETURNING qid",
	[P_IT_OPEN] = "SELECT " ITEM_COLS " FROM saker_items WHERE"
	    " qid = $1::bigint AND state = 1 ORDER BY vis, id",
	[P_IT_READY] = "SELECT " ITEM_COLS " FROM saker_items WHERE"
	    " qid = $1::bigint AND " READY " ORDER BY vis, id",
	[P_IT_DELAYED] = "SELECT " ITEM_COLS " FROM saker_items WHERE"
	    " qid = $1::bigint AND state = 0 AND due > $2::bigint ORDER BY due, id",
	[P_NOTIFY] = "SELECT pg_notify($1::text, unnest($2::text[]))",
	[P_SIZE] = "SELECT (pg_total_relation_size('saker_items') +"
	    " pg_total_relation_size('saker_queues') +"
	    " pg_total_relation_size('saker_counts'))::bigint",
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
	    " state, flags, expires, created, len, data, crc, deliveries)"
	    " SELECT q.id, u.id, u.vis, u.due, 0, u.flags, u.expires, u.created,"
	    " length(u.data), u.data, u.crc, u.dlv FROM (SELECT"
	    " nextval('saker_item_id') AS id,"
	    " x.* FROM unnest($1::bytea[], $2::bigint[], $3::bigint[],"
	    " $4::bigint[], $5::bigint[], $6::bigint[], $7::bytea[],"
	    " $8::bigint[], $10::bigint[]) WITH ORDINALITY AS x(name, vis, due,"
	    " flags, expires, created, data, crc, dlv, ord) ORDER BY x.ord"
	    " OFFSET 0) u JOIN"
	    " saker_queues q ON q.name = u.name FOR KEY SHARE OF q RETURNING 1)"
	    " SELECT CASE WHEN count(*) = $9::bigint THEN 0 ELSE"
	    " ('saker: queue deleted by another broker during the batch; stored '"
	    " || count(*))::int END FROM ins",
	/* state changes of items this broker holds: 0 gives one back, 1 opens
	 * a claimed one, 2 claims (never sent: claims are P_CLAIM) */
	[P_SETSTATE] = "UPDATE saker_items i SET state = u.st,"
	    " deliveries = CASE WHEN u.st = 1 THEN least(i.deliveries + 1, "
	    PG_DLV_MAX ") ELSE i.deliveries END,"
	    " owner = CASE WHEN u.st = 0 THEN NULL ELSE i.owner END,"
	    " lease_until = CASE WHEN u.st = 0 THEN 0 ELSE i.lease_until END"
	    " FROM unnest($1::bigint[], $2::bigint[], $3::bigint[])"
	    " AS u(qid, id, st) WHERE i.qid = u.qid AND i.id = u.id"
	    " AND i.state > 0 AND i.owner = $4::text",
	/* confirmed open items and claimed items taken or expired */
	[P_DELS] = "DELETE FROM saker_items i USING unnest($1::bigint[],"
	    " $2::bigint[]) AS u(qid, id) WHERE i.qid = u.qid AND i.id = u.id"
	    " AND i.state > 0 AND i.owner = $3::text",
	[P_COUNTS] = "INSERT INTO saker_counts(qid, owner, total, expired)"
	    " SELECT u.qid, $1::text, u.t, u.e FROM unnest($2::bigint[],"
	    " $3::bigint[], $4::bigint[]) AS u(qid, t, e)"
	    " ON CONFLICT (qid, owner) DO UPDATE SET"
	    " total = saker_counts.total + excluded.total,"
	    " expired = saker_counts.expired + excluded.expired",
	/* claim ahead: up to $8 of the oldest visible items, leased to this
	 * broker as state 2 and served from its memory */
	[P_CLAIM] = "WITH c AS (SELECT qid, id FROM saker_items WHERE "
	    HEAD_WHERE " ORDER BY vis, id LIMIT $8::bigint FOR UPDATE SKIP LOCKED)"
	    " UPDATE saker_items i SET state = 2, owner = $6::text,"
	    " lease_until = " DBNOW " + $7::bigint FROM c WHERE i.qid = c.qid"
	    " AND i.id = c.id RETURNING i.id, i.flags, i.expires, i.created,"
	    " i.vis, i.due, i.data, @CRC@, @DLV@",
	[P_GIVEBACK] = "UPDATE saker_items SET state = 0, owner = NULL,"
	    " lease_until = 0 WHERE state = 2 AND owner = $1::text RETURNING qid",
	/* an open item of this broker to the tail of another queue, with
	 * its count (the dead-letter move); a new id puts it after the
	 * items already there with the same vis */
	[P_MOVE] = "UPDATE saker_items SET qid = $4::bigint, vis = $5::bigint,"
	    " id = nextval('saker_item_id'),"
	    " due = 0, state = 0, owner = NULL, lease_until = 0"
	    " WHERE qid = $1::bigint AND id = $2::bigint AND state = 1"
	    " AND owner = $3::text",
	/* an open item of this broker back as a delayed one, due at $4:
	 * vis = due joins it to the tail when it falls due, and a new id
	 * after the items already there with the same vis (release_delayed) */
	[P_DELAY] = "UPDATE saker_items SET state = 0, owner = NULL,"
	    " lease_until = 0, due = $4::bigint, vis = $4::bigint,"
	    " id = nextval('saker_item_id')"
	    " WHERE qid = $1::bigint AND id = $2::bigint AND state = 1"
	    " AND owner = $3::text",
};

static const char pg_schema_sql[] =
    "CREATE TABLE saker_meta ("
    " key text PRIMARY KEY,"
    " value bigint NOT NULL);"
    "CREATE TABLE saker_queues ("
    " id bigserial PRIMARY KEY,"
    " name bytea NOT NULL UNIQUE);"
    "CREATE SEQUENCE saker_item_id;"
    "CREATE TABLE saker_items ("
    " qid bigint NOT NULL,"
    " id bigint NOT NULL,"
    " vis bigint NOT NULL,"		/* ordering time */
    " due bigint NOT NULL,"		/* visible from; 0 = at once */
    " state smallint NOT NULL,"		/* 0 ready or delayed, 1 open,"
					 * 2 claimed ahead by a broker */
    " owner text,"			/* lease owner of an open item */
    " lease_until bigint NOT NULL DEFAULT 0," /* database clock, ms */
    " flags bigint NOT NULL,"
    " expires bigint NOT NULL,"
    " created bigint NOT NULL,"
    " len bigint NOT NULL,"
    " data bytea NOT NULL,"
    " crc bigint,"			/* kit_item_crc(); NULL: unchecked */
    " deliveries bigint NOT NULL DEFAULT 0," /* take(OPEN) hand-outs */
    " PRIMARY KEY (qid, id))"
    " WITH (autovacuum_vacuum_scale_factor = 0.01,"
    " autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 1);"
    "CREATE INDEX saker_items_head ON saker_items (qid, vis, id)"
    " WHERE state = 0;"
    "CREATE INDEX saker_items_due ON saker_items (due)"
    " WHERE state = 0 AND due > 0;"
    "CREATE INDEX saker_items_lease ON saker_items (lease_until)"
    " WHERE state > 0;"
    "CREATE TABLE saker_counts ("
    " qid bigint NOT NULL,"
    " owner text NOT NULL,"
    " total bigint NOT NULL,"
    " expired bigint NOT NULL,"
    " PRIMARY KEY (qid, owner));";

/* Counter rows of earlier broker processes are folded into one row per
 * queue; additive upserts make this safe while other brokers run. */
static const char pg_fold_sql[] =
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

struct saker_queue {
	struct saker_queue_base base; /* the layer's (store.h): first */
	int64_t id;
	char *name;
	size_t len;
	void *ctx;
	bool fresh;		/* created in the current batch */
	bool dead;		/* deleted or rolled back out of existence */
	bool dirty;		/* on the counter list */
	bool pend;		/* on the NOTIFY list */
	bool deleted;		/* on the deleted list */
	int64_t d_total, d_expired;	/* uncommitted counter deltas */
	unsigned hint_gen;	/* hint valid while == the store's txn_gen */
	int64_t hint_vis, hint_id;	/* see HEAD_WHERE */
	/* Claimed ahead (state 2): rows of `held`, served in (vis, id) order
	 * from held_rows[held_head] on.  Only claimed when empty. */
	PGresult *held;
	int *held_rows;
	int held_head, held_n;
	int64_t held_used_ms;	/* last take from it: idle ones go back */
	/* == the store's txn_gen: a claim in this transaction found nothing
	 * and nothing was added since, so the next take need not ask */
	unsigned empty_gen;
	/* takes per batch, for the claim size */
	uint64_t take_batch;
	unsigned takes_cur, takes_prev;
	bool took;		/* on the store's took list */
	LIST_ENTRY(saker_queue) held_link;
	LIST_ENTRY(saker_queue) took_link;
	LIST_ENTRY(saker_queue) dirty_link;
	LIST_ENTRY(saker_queue) pend_link;
	LIST_ENTRY(saker_queue) gone_link;	/* deleted or zombie list */
	uint64_t expired_to;
	struct kit_qent qe;	/* in s->qt while live (qtab.h) */
};

LIST_HEAD(pg_qlist, saker_queue);

/* A PostgreSQL binary one-dimensional array, built element by element:
 * the columns of the batched statements. */
struct pg_arr {
	unsigned char *p;
	size_t len, cap;
	uint32_t n, oid;
};

/* Open items this broker holds: id (unique store-wide) -> queue id. */
struct pg_oset {
	uint64_t *ids;
	int64_t *qids;
	size_t cap, n;
};

/*
 * A connection made without blocking: PQconnectStartParams(), then
 * PQconnectPoll() whenever its socket is ready, the socket registered in
 * the store's epoll descriptor (the one watch_fd() gives the loop).
 * `up`: connected and set up; before that `want` says what
 * PQconnectPoll() waits for and `deadline_ns` when to give up.
 */
enum { PG_L_MAIN, PG_L_LISTEN, PG_L_VACUUM, PG_L_N };
struct pg_link {
	PGconn *c;
	bool up;
	PostgresPollingStatusType want;
	uint64_t deadline_ns;
	int regfd;		/* registered in efd, or -1 */
};

struct pg_store {
	saker_store base;
	PGconn *conn;		/* statements: links[PG_L_MAIN].c once it is
				 * up and set up; NULL while down */
	struct pg_link links[PG_L_N];
	int efd;		/* epoll: every link's socket (watch_fd) */
	int64_t timeout_ms;	/* timeout= */
	uint64_t wait_ns;	/* statement deadline: timeout, or more in open */
	uint64_t deadline_ns;	/* of the round trip under way */
	bool opened;		/* open() done: a connection is a reconnect */
	uint64_t reconnects, in_doubt;
	int64_t last_commit_ms;	/* last_now at the last commit that wrote */
	bool down_said;		/* the current down_why went to the log */
	char ka_user_timeout[24];	/* tcp_user_timeout default (ms) */
	PQconninfoOption *copts;	/* the connection string, parsed */
	int nhosts;			/* elements of its host list */
	unsigned host_rot;		/* first host of the next attempt */
	char rot_host[2048], rot_addr[2048], rot_port[2048];
	char *conninfo;		/* as given to libpq */
	char *schema;		/* or NULL */
	char *chan;		/* notification channel */
	char owner[128];	/* lease owner: unique per process start */
	int64_t lease_ms;
	saker_sync_mode sync;
	bool read_only;
	int64_t version;	/* the store's format (pg_check_schema()) */
	saker_notify_fn notify;
	void *notify_arg;

	bool in_txn;
	unsigned txn_gen;	/* bumped when a transaction ends */
	bool lost;		/* batch rolled back by a failed statement */
	int lost_err;
	char lost_why[256];
	bool unsynced;
	int code;		/* of the last failure */

	int64_t retry_at;		/* next attempt of the main connection */
	int64_t attempt_at;		/* start of the last attempt */
	int64_t lretry_at;		/* listen connection */
	bool listening;			/* LISTEN answered */
	int64_t probe_ms;		/* probe= (0: no probes) */
	bool probing;			/* a probe is out (pg_next()) */
	uint64_t probe_dead_ns;		/* unanswered then: silence */
	uint64_t probes;
	char down_why[256];

	int64_t last_now;	/* newest now_ms seen: "delayed" in stats */
	int64_t last_vis;	/* keeps this broker's puts in order */
	int64_t promoted_to;	/* promote() reported items due up to here */
	int64_t renewed_at;

	struct kit_qtab qt;	/* the live queues by name and id */
	struct pg_qlist dirty, pend, deleted, zombies, holding, took;
	struct pg_oset open;

	/*
	 * Writes of the batch not yet sent: they go out in one pipeline
	 * ahead of the next statement that must see them, or with the
	 * COMMIT.  begun: the BEGIN of the batch went out.
	 */
	bool begun;
	struct pg_arr put_name, put_vis, put_due, put_flags, put_exp,
	    put_created, put_data, put_crc, put_dlv;
	size_t put_bytes;
	struct pg_arr st_qid, st_id, st_st;
	struct pg_oset st_ids;	/* ids with a state change in st_* */
	struct pg_arr del_qid, del_id;
	uint64_t batch_no;	/* commits so far: takes per batch */
	size_t nheld;		/* items claimed ahead, all queues */
	int64_t lease_floor;	/* every lease we hold runs at least
				 * lease_ms from here (local clock) */
	int64_t renew_at;	/* start of an uncommitted renewal */

	uint64_t commits, fsyncs, commit_ns;
	/* the VACUUMs on their own connection: every vacuum_ms (0:
	 * never) while commits move; vacuuming while one runs */
	int64_t vacuum_ms, vacuum_at;
	uint64_t vacuum_commits;
	bool vacuuming;
	char err[1024];
};

#define PG(s) ((struct pg_store *)(void *)(s))

extern const struct saker_store_driver saker_store_postgres;

static int pg_commit(saker_store *);
static int pg_fail(struct pg_store *, const PGresult *, const char *);

/* ------------------------------------------------------------------ */
/* errors */

static int
pg_errf(struct pg_store *s, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	s->code = code;
	return code;
}

/* libpq messages end in a newline and may span lines: keep the first. */
static void
pg_oneline(char *dst, size_t len, const char *msg)
{
	size_t n;

	if (msg == NULL || *msg == '\0')
		msg = "unknown error";
	n = strcspn(msg, "\n");
	if (n >= len)
		n = len - 1;
	memcpy(dst, msg, n);
	dst[n] = '\0';
}

static int
pg_map_state(const char *st)
{
	if (st == NULL)
		return SAKER_EIO;
	if (strcmp(st, "53100") == 0)
		return SAKER_EFULL;
	if (strcmp(st, "53200") == 0)
		return SAKER_ENOMEM;
	if (strcmp(st, "25006") == 0)
		return SAKER_EREADONLY;
	if (strncmp(st, "42", 2) == 0)
		return SAKER_ECORRUPT;	/* schema missing or damaged */
	if (strcmp(st, "54000") == 0 || strncmp(st, "22", 2) == 0)
		return SAKER_EINVAL;
	return SAKER_EIO;
}

/* ------------------------------------------------------------------ */
/* waiting for the database, never longer than timeout= */

static void pg_conn_lost(struct pg_store *, const char *);
static void pg_lose_batch(struct pg_store *, int);

/* The loop's descriptor watches link l's socket for `ev` (0: not at all).
 * Deleted and added again every time: libpq may have closed the old
 * socket (epoll forgets it then) and got the same number for a new one
 * (the next host of a list). */
static void
pg_ep(struct pg_store *s, struct pg_link *l, uint32_t ev)
{
	struct epoll_event e;
	int fd = l->c != NULL ? PQsocket(l->c) : -1;

	if (l->regfd >= 0)
		(void)epoll_ctl(s->efd, EPOLL_CTL_DEL, l->regfd, NULL);
	l->regfd = -1;
	if (s->efd < 0 || fd < 0 || ev == 0)
		return;
	memset(&e, 0, sizeof(e));
	e.events = ev;
	if (epoll_ctl(s->efd, EPOLL_CTL_ADD, fd, &e) == 0)
		l->regfd = fd;
}

/* Close link l without waiting: libpq's goodbye goes out on a
 * non-blocking socket, and after a timeout the socket is shut down
 * first, so nothing at all waits for a peer that stopped answering. */
static void
pg_link_drop(struct pg_store *s, struct pg_link *l, bool abort)
{
	pg_ep(s, l, 0);
	if (l->c != NULL) {
		if (abort && PQsocket(l->c) >= 0)
			(void)shutdown(PQsocket(l->c), SHUT_RDWR);
		PQfinish(l->c);
	}
	if (l == &s->links[PG_L_MAIN])
		s->conn = NULL;
	if (l == &s->links[PG_L_LISTEN])
		s->probing = false;	/* no answer will come */
	l->c = NULL;
	l->up = false;
}

/* Wait for c's socket to be ready for `ev`, at most until deadline_ns.
 * 1: ready; 0: the deadline passed; -1: poll failed. */
static int
pg_poll(PGconn *c, short ev, uint64_t deadline_ns)
{
	struct pollfd p;
	uint64_t now;
	int r;

	p.fd = PQsocket(c);
	p.events = ev;
	p.revents = 0;
	if (p.fd < 0)
		return -1;	/* poll() would just sleep */
	for (;;) {
		now = saker_mono_ns();
		if (now >= deadline_ns)
			return 0;
		r = poll(&p, 1, (int)((deadline_ns - now + 999999) / 1000000));
		if (r > 0)
			return 1;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

/* A round trip on the statement connection starts: its deadline. */
static void
pg_deadline(struct pg_store *s)
{
	s->deadline_ns = saker_mono_ns() + s->wait_ns;
}

/*
 * The probe: a round trip on the statement connection that has heard
 * nothing for PG_PROBE_AFTER_MS sends an empty query on the LISTEN
 * connection.  Its answer within probe= says the server is there and the
 * statement is merely slow (a lock wait, a synchronous standby): it may
 * go on to timeout=.  No answer says the server or the way to it is
 * silent (a partition, a hung host): the connection is given up then,
 * so the loop waits probe= plus a little, not timeout=.
 */
#define PG_PROBE_AFTER_MS 50

static int pg_listen_read(struct pg_store *, int64_t);

/* Can a probe go out now? */
static bool
pg_probe_can(const struct pg_store *s)
{
	const struct pg_link *l = &s->links[PG_L_LISTEN];

	return s->probe_ms > 0 && l->up && s->listening && !s->probing &&
	    PQstatus(l->c) == CONNECTION_OK;
}

static void
pg_probe_send(struct pg_store *s, uint64_t now)
{
	struct pg_link *l = &s->links[PG_L_LISTEN];

	if (!PQsendQuery(l->c, "") || PQflush(l->c) < 0)
		return;		/* no probe: timeout= alone decides */
	s->probing = true;
	s->probe_dead_ns = now + (uint64_t)s->probe_ms * 1000000u;
	s->probes++;
}

/*
 * PQgetResult() on the statement connection without ever waiting past
 * s->deadline_ns, which every sign of life (the socket took our bytes or
 * had some for us) moves on by timeout=, nor past an unanswered probe
 * (above): the connection is non-blocking, and the output is flushed
 * and the input read here as the socket allows.  true with *res as
 * PQgetResult() gives it (NULL between statements); false when the
 * database did not answer in time: the connection is dropped
 * (pg_conn_lost()) and s->conn is NULL.
 */
static bool
pg_next(struct pg_store *s, PGresult **res)
{
	PGconn *c = s->conn;
	struct pollfd p[2];
	uint64_t now, until, probe_at;
	char why[200];
	int f, r = 0, np, ms;
	bool probe_dead = false;

	*res = NULL;
	probe_at = saker_mono_ns() + PG_PROBE_AFTER_MS * 1000000u;
	for (;;) {
		if (PQstatus(c) == CONNECTION_BAD) {
			/* libpq knows; it answers at once */
			*res = PQgetResult(c);
			return true;
		}
		if ((f = PQflush(c)) < 0) {
			r = 1;		/* libpq says why */
			break;
		}
		if (f == 0 && !PQisBusy(c)) {
			*res = PQgetResult(c);
			return true;
		}
		now = saker_mono_ns();
		if (s->probing && now >= s->probe_dead_ns) {
			/* its answer may be there, unread since an earlier
			 * round trip ended */
			(void)pg_listen_read(s, 0);
			if (s->probing) {
				probe_dead = true;
				break;
			}
		}
		if (now >= s->deadline_ns) {
			r = 0;
			break;
		}
		if (now >= probe_at && pg_probe_can(s))
			pg_probe_send(s, now);
		until = s->deadline_ns;
		if (s->probing && s->probe_dead_ns < until)
			until = s->probe_dead_ns;
		else if (!s->probing && pg_probe_can(s) && probe_at < until)
			until = probe_at;
		p[0].fd = PQsocket(c);
		p[0].events = (short)(POLLIN | (f > 0 ? POLLOUT : 0));
		p[0].revents = 0;
		np = 1;
		if (s->probing && s->links[PG_L_LISTEN].c != NULL) {
			p[1].fd = PQsocket(s->links[PG_L_LISTEN].c);
			p[1].events = POLLIN;
			p[1].revents = 0;
			np = 2;
		}
		ms = (int)((until - now + 999999) / 1000000);
		r = poll(p, (nfds_t)np, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			r = -1;
			break;
		}
		/* the answer to a probe, and notifications meanwhile */
		if (np == 2 && p[1].revents != 0)
			(void)pg_listen_read(s, 0);
		if (p[0].revents == 0)
			continue;
		if (!PQconsumeInput(c) && PQstatus(c) != CONNECTION_BAD) {
			r = 1;
			break;
		}
		/* the database took or sent bytes: it is there.  The
		 * deadline bounds silence, not the size of a batch (a large
		 * item on a slow link takes as long as it takes) */
		pg_deadline(s);
		probe_at = saker_mono_ns() + PG_PROBE_AFTER_MS * 1000000u;
	}
	if (probe_dead)
		snprintf(why, sizeof(why), "no answer from the database, nor to"
		    " a probe within %" PRId64 " ms (probe=)", s->probe_ms);
	else if (r == 0)
		snprintf(why, sizeof(why), "no answer from the database within"
		    " %" PRId64 ".%03d s (timeout=)", s->timeout_ms / 1000,
		    (int)(s->timeout_ms % 1000));
	else
		pg_oneline(why, sizeof(why), r < 0 ? strerror(errno) :
		    PQerrorMessage(c));
	pg_conn_lost(s, why);
	return false;
}

/* PQexec() bounded by the deadline: the first failed result, else the
 * last; NULL when nothing came (s->conn may be NULL then). */
static PGresult *
pg_exec(struct pg_store *s, const char *sql)
{
	PGresult *r, *keep = NULL;

	if (s->conn == NULL || !PQsendQuery(s->conn, sql))
		return NULL;
	pg_deadline(s);
	for (;;) {
		if (!pg_next(s, &r)) {
			PQclear(keep);
			return NULL;
		}
		if (r == NULL)
			break;
		if (keep != NULL && (PQresultStatus(keep) == PGRES_FATAL_ERROR ||
		    PQresultStatus(keep) == PGRES_NONFATAL_ERROR)) {
			PQclear(r);
			continue;
		}
		PQclear(keep);
		keep = r;
		if (PQstatus(s->conn) == CONNECTION_BAD)
			break;
	}
	return keep;
}

/* ------------------------------------------------------------------ */
/* parameters and results: everything binary */

struct pgp {
	int n;
	const char *v[PG_MAX_PARAMS];
	int l[PG_MAX_PARAMS];
	int f[PG_MAX_PARAMS];
	unsigned char b[PG_MAX_PARAMS][8];
};

static void
pp_i64(struct pgp *p, int64_t x)
{
	unsigned char *b = p->b[p->n];
	int i;

	for (i = 0; i < 8; i++)
		b[i] = (unsigned char)((uint64_t)x >> (56 - 8 * i));
	p->v[p->n] = (const char *)b;
	p->l[p->n] = 8;
	p->f[p->n] = 1;
	p->n++;
}

static void
pp_bin(struct pgp *p, const void *d, size_t len)
{
	p->v[p->n] = len > 0 ? d : "";
	p->l[p->n] = (int)len;
	p->f[p->n] = 1;
	p->n++;
}

static void
pp_null(struct pgp *p)
{
	p->v[p->n] = NULL;
	p->l[p->n] = 0;
	p->f[p->n] = 1;
	p->n++;
}

static void
pp_str(struct pgp *p, const char *str)
{
	pp_bin(p, str, strlen(str));
}

static int64_t
rv_i64(const PGresult *r, int row, int col)
{
	const unsigned char *b;
	uint64_t x = 0;
	int i;

	if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 8)
		return 0;
	b = (const unsigned char *)PQgetvalue(r, row, col);
	for (i = 0; i < 8; i++)
		x = x << 8 | b[i];
	return (int64_t)x;
}

static uint64_t
rv_changed(const PGresult *r)
{
	const char *t = PQcmdTuples((PGresult *)r);

	return t != NULL && *t != '\0' ? strtoull(t, NULL, 10) : 0;
}

/* ------------------------------------------------------------------ */
/* binary arrays: one parameter carries a column of the whole batch */

#define OID_BYTEA 17
#define OID_INT8 20
#define OID_TEXT 25
/* ndim, has-null flag, element type, length and lower bound of dim 1 */
#define ARR_HDR 20

/* Room for `more` bytes of elements; false when out of memory. */
static bool
arr_reserve(struct pg_arr *a, size_t more)
{
	size_t need = (a->len > 0 ? a->len : ARR_HDR) + more, cap;
	unsigned char *p;

	if (need <= a->cap)
		return true;
	cap = a->cap > 0 ? a->cap : 256;
	while (cap < need)
		cap *= 2;
	if ((p = realloc(a->p, cap)) == NULL)
		return false;
	a->p = p;
	a->cap = cap;
	return true;
}

/* Append; arr_reserve() must have made room. */
static void
arr_put(struct pg_arr *a, const void *d, size_t len)
{
	if (a->len == 0)
		a->len = ARR_HDR;
	saker_put_be32(a->p + a->len, (uint32_t)len);
	if (len > 0)
		memcpy(a->p + a->len + 4, d, len);
	a->len += 4 + len;
	a->n++;
}

static void
arr_i64(struct pg_arr *a, int64_t x)
{
	unsigned char b[8];

	saker_put_be64(b, (uint64_t)x);
	arr_put(a, b, 8);
}

/* Fill in the header; the array is then a parameter value. */
static void
arr_done(struct pg_arr *a)
{
	saker_put_be32(a->p, 1);
	saker_put_be32(a->p + 4, 0);
	saker_put_be32(a->p + 8, a->oid);
	saker_put_be32(a->p + 12, a->n);
	saker_put_be32(a->p + 16, 1);
}

static void
arr_reset(struct pg_arr *a)
{
	a->len = 0;
	a->n = 0;
}

static void
arr_free(struct pg_arr *a)
{
	free(a->p);
	a->p = NULL;
	a->len = a->cap = 0;
	a->n = 0;
}

static void
pp_arr(struct pgp *p, struct pg_arr *a)
{
	arr_done(a);
	pp_bin(p, a->p, a->len);
}

/* ------------------------------------------------------------------ */
/* pipelines: several statements, one round trip */

#define PG_PIPE_MAX 16

struct pg_pipe {
	int n;
	const char *what[PG_PIPE_MAX];
	PGresult *res[PG_PIPE_MAX];	/* kept results, by statement */
	int bad;			/* first failed statement, or -1 */
	PGresult *bad_res;
	int qsync;			/* index of P_QSYNC, or -1 */
	bool sendfail;			/* a statement could not be sent */
};

static void
pipe_init(struct pg_pipe *pp)
{
	memset(pp, 0, sizeof(*pp));
	pp->bad = pp->qsync = -1;
}

static void
pipe_clear(struct pg_pipe *pp)
{
	int i;

	for (i = 0; i < pp->n; i++)
		PQclear(pp->res[i]);
	PQclear(pp->bad_res);
	pipe_init(pp);
}

/* Queue a prepared statement (sql == NULL) or plain SQL.  After a send
 * fails nothing more is sent; pipe_wait() then reports it. */
static bool
pipe_send(struct pg_store *s, struct pg_pipe *pp, int which, const char *sql,
    const struct pgp *p, const char *what)
{
	char name[16];
	int ok;

	if (pp->sendfail || pp->n >= PG_PIPE_MAX - 1) {
		pp->sendfail = true;
		return false;
	}
	pp->what[pp->n] = what;
	if (pp->n == 0 && PQpipelineStatus(s->conn) == PQ_PIPELINE_OFF &&
	    !PQenterPipelineMode(s->conn)) {
		pp->sendfail = true;
		return false;
	}
	if (sql != NULL) {
		ok = PQsendQueryParams(s->conn, sql, 0, NULL, NULL, NULL, NULL, 1);
	} else {
		snprintf(name, sizeof(name), "s%d", which);
		ok = PQsendQueryPrepared(s->conn, name, p != NULL ? p->n : 0,
		    p != NULL ? p->v : NULL, p != NULL ? p->l : NULL,
		    p != NULL ? p->f : NULL, 1);
	}
	if (!ok) {
		pp->sendfail = true;
		return false;
	}
	pp->n++;
	return true;
}

/*
 * Send everything queued and read every result.  The first statement
 * that fails is recorded in pp->bad / pp->bad_res; PostgreSQL skips the
 * ones after it.  Returns true when every statement succeeded.
 */
static bool
pipe_wait(struct pg_store *s, struct pg_pipe *pp)
{
	PGresult *r;
	ExecStatusType st;
	int i = 0, nulls = 0;

	if (pp->n == 0)
		goto out;
	if (!PQpipelineSync(s->conn)) {
		pp->bad = 0;
		goto out;
	}
	pg_deadline(s);
	for (;;) {
		if (!pg_next(s, &r)) {
			/* no answer in time: the connection is gone */
			if (pp->bad < 0)
				pp->bad = i < pp->n ? i : pp->n - 1;
			goto out;
		}
		if (r == NULL) {
			/* one NULL ends each statement's results; two in a
			 * row mean the connection is gone */
			if (++nulls > 1 || PQstatus(s->conn) == CONNECTION_BAD)
				break;
			continue;
		}
		nulls = 0;
		st = PQresultStatus(r);
		if (st == PGRES_PIPELINE_SYNC) {
			PQclear(r);
			break;
		}
		if (i < pp->n && (st == PGRES_TUPLES_OK ||
		    st == PGRES_COMMAND_OK)) {
			pp->res[i++] = r;
			continue;
		}
		if (pp->bad < 0 && st != PGRES_PIPELINE_ABORTED) {
			pp->bad = i < pp->n ? i : pp->n - 1;
			pp->bad_res = r;
		} else {
			PQclear(r);
		}
		if (i < pp->n)
			i++;
	}
	if (i < pp->n && pp->bad < 0)
		pp->bad = i;
out:
	if (s->conn != NULL && PQstatus(s->conn) == CONNECTION_OK &&
	    PQpipelineStatus(s->conn) != PQ_PIPELINE_OFF)
		(void)PQexitPipelineMode(s->conn);
	if (pp->sendfail && pp->bad < 0)
		pp->bad = pp->n;
	return pp->bad < 0;
}

/* pg_fail() for the statement that failed in a pipeline. */
static int
pipe_fail(struct pg_store *s, struct pg_pipe *pp)
{
	int i = pp->bad >= 0 && pp->bad < PG_PIPE_MAX ? pp->bad : 0;
	int code;

	code = pg_fail(s, pp->bad_res, pp->what[i] != NULL ? pp->what[i] :
	    "pipeline");
	pipe_clear(pp);
	return code;
}

/* ------------------------------------------------------------------ */
/* queue tables */

#define PG_Q(e) KIT_QENT_QUEUE(e, struct saker_queue, qe)

static void
pg_hash_remove(struct pg_store *s, struct saker_queue *q)
{
	kit_qtab_remove(&s->qt, &q->qe);
}

/* The queue got a new id (it was deleted and created again elsewhere). */
static void
pg_rehash_id(struct pg_store *s, struct saker_queue *q, int64_t id)
{
	kit_qtab_set_id(&s->qt, &q->qe, id);
	q->id = id;
}

static struct saker_queue *
pg_find_name(struct pg_store *s, const char *name, size_t len)
{
	struct kit_qent *e = kit_qtab_by_name(&s->qt, name, len);

	return e != NULL ? PG_Q(e) : NULL;
}

static struct saker_queue *
pg_find_id(struct pg_store *s, int64_t id)
{
	struct kit_qent *e = kit_qtab_by_id(&s->qt, id);

	return e != NULL ? PG_Q(e) : NULL;
}

static struct saker_queue *
pg_queue_new(struct pg_store *s, const char *name, size_t len, int64_t id)
{
	struct saker_queue *q;

	q = calloc(1, sizeof(*q));
	if (q == NULL)
		return NULL;
	q->name = malloc(len > 0 ? len : 1);
	if (q->name == NULL) {
		free(q);
		return NULL;
	}
	memcpy(q->name, name, len);
	q->len = len;
	q->id = id;
	q->qe.name = q->name;
	q->qe.len = len;
	q->qe.id = id;
	if (kit_qtab_add(&s->qt, &q->qe) != 0) {
		free(q->name);
		free(q);
		return NULL;
	}
	return q;
}

static void
pg_queue_free(struct saker_queue *q)
{
	if (q == NULL)
		return;
	free(q->name);
	free(q);
}

/* Something may now sit before the hint: scan from the head again. */
static void
pg_unhint(struct saker_queue *q)
{
	q->hint_gen--;
}

static void
pg_mark_dirty(struct pg_store *s, struct saker_queue *q)
{
	if (q->dirty)
		return;
	LIST_INSERT_HEAD(&s->dirty, q, dirty_link);
	q->dirty = true;
}

static void
pg_unlist(struct saker_queue *q)
{
	if (q->dirty)
		LIST_REMOVE(q, dirty_link);
	if (q->pend)
		LIST_REMOVE(q, pend_link);
	if (q->took)
		LIST_REMOVE(q, took_link);
	q->dirty = q->pend = q->took = false;
	q->d_total = q->d_expired = 0;
}

/* ------------------------------------------------------------------ */
/* the set of open items this broker holds */

static size_t
os_slot(uint64_t id, size_t cap)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ULL) >> 20) & (cap - 1);
}

static int
os_add(struct pg_oset *o, uint64_t id, int64_t qid)
{
	size_t i;

	if ((o->n + 1) * 2 > o->cap) {
		struct pg_oset no;
		size_t k;

		no.cap = o->cap ? o->cap * 2 : 64;
		no.n = 0;
		no.ids = calloc(no.cap, sizeof(*no.ids));
		no.qids = calloc(no.cap, sizeof(*no.qids));
		if (no.ids == NULL || no.qids == NULL) {
			free(no.ids);
			free(no.qids);
			return SAKER_ENOMEM;
		}
		for (k = 0; k < o->cap; k++)
			if (o->ids[k] != 0)
				(void)os_add(&no, o->ids[k], o->qids[k]);
		free(o->ids);
		free(o->qids);
		*o = no;
	}
	for (i = os_slot(id, o->cap); o->ids[i] != 0; i = (i + 1) & (o->cap - 1))
		if (o->ids[i] == id) {
			o->qids[i] = qid;
			return SAKER_OK;
		}
	o->ids[i] = id;
	o->qids[i] = qid;
	o->n++;
	return SAKER_OK;
}

static void
os_del_at(struct pg_oset *o, size_t i)
{
	size_t j, k;

	o->ids[i] = 0;
	o->n--;
	/* backward-shift deletion keeps probe chains intact without tombstones */
	for (j = (i + 1) & (o->cap - 1); o->ids[j] != 0; j = (j + 1) & (o->cap - 1)) {
		k = os_slot(o->ids[j], o->cap);
		if ((j > i && (k <= i || k > j)) || (j < i && k <= i && k > j)) {
			o->ids[i] = o->ids[j];
			o->qids[i] = o->qids[j];
			o->ids[j] = 0;
			i = j;
		}
	}
}

/* Remove id if it is held on queue qid; true if it was. */
static bool
os_take(struct pg_oset *o, uint64_t id, int64_t qid)
{
	size_t i;

	if (o->cap == 0 || id == 0)
		return false;
	for (i = os_slot(id, o->cap); o->ids[i] != 0; i = (i + 1) & (o->cap - 1)) {
		if (o->ids[i] != id)
			continue;
		if (o->qids[i] != qid)
			return false;
		os_del_at(o, i);
		return true;
	}
	return false;
}

static void
os_drop_queue(struct pg_oset *o, int64_t qid)
{
	size_t i = 0;

	while (i < o->cap) {
		if (o->ids[i] != 0 && o->qids[i] == qid)
			os_del_at(o, i);	/* slot i may refill: look again */
		else
			i++;
	}
}

static void
os_clear(struct pg_oset *o)
{
	if (o->cap > 0) {
		memset(o->ids, 0, o->cap * sizeof(*o->ids));
		o->n = 0;
	}
}

/* ------------------------------------------------------------------ */
/* connections */

static void pg_held_drop_all(struct pg_store *);
static void pg_held_drop(struct pg_store *, struct saker_queue *);
static int pg_held_install(struct pg_store *, struct saker_queue *, PGresult *,
    int64_t);

/* The statement connection is gone (or given up on): drop every
 * connection without waiting; tick() makes new ones. */
static void
pg_conn_lost(struct pg_store *s, const char *why)
{
	int i;

	pg_oneline(s->down_why, sizeof(s->down_why), why);
	s->down_said = false;
	/* after a reconnect the claims are given back: forget them now */
	pg_held_drop_all(s);
	for (i = 0; i < PG_L_N; i++)
		pg_link_drop(s, &s->links[i], true);
	if (s->in_txn) {
		/* the batch's statements went with the session */
		pg_errf(s, SAKER_EIO, "postgres: connection lost: %s",
		    s->down_why);
		pg_lose_batch(s, SAKER_EIO);
	}
	s->listening = false;
	s->vacuuming = false;
	s->retry_at = 0;	/* first retry at the next tick */
	s->lretry_at = 0;
}


/* Record a failed statement.  Inside a batch PostgreSQL has aborted the
 * transaction: roll it back at once and fail the batch. */
static int
pg_fail(struct pg_store *s, const PGresult *res, const char *what)
{
	const char *msg = res != NULL ? PQresultErrorMessage(res) : NULL;
	const char *st = res != NULL ? PQresultErrorField(res,
	    PG_DIAG_SQLSTATE) : NULL;
	char line[400];
	int code;

	if (msg == NULL || *msg == '\0')
		msg = s->conn != NULL ? PQerrorMessage(s->conn) :
		    s->down_why[0] != '\0' ? s->down_why : "not connected";
	pg_oneline(line, sizeof(line), msg);
	bool txn = s->in_txn;

	code = pg_map_state(st);
	if (s->conn == NULL || PQstatus(s->conn) == CONNECTION_BAD) {
		code = SAKER_EIO;
		snprintf(s->err, sizeof(s->err), "postgres: connection lost"
		    " (%s): %s", what, line);
		pg_conn_lost(s, line);
	} else {
		snprintf(s->err, sizeof(s->err), "postgres: %s: %s", what, line);
	}
	s->code = code;
	/* (pg_conn_lost() may have rolled it back already) */
	if (txn && s->in_txn)
		pg_lose_batch(s, code);
	return code;
}

static int
pg_down(struct pg_store *s)
{
	return pg_errf(s, SAKER_EIO, "postgres: database unavailable: %s;"
	    " reconnecting", s->down_why[0] != '\0' ? s->down_why :
	    "connecting");
}

/* ---- writes buffered for the next pipeline ---- */

static bool
pg_pending(const struct pg_store *s)
{
	return s->put_name.n > 0 || s->st_id.n > 0 || s->del_id.n > 0;
}

static void
pg_pending_reset(struct pg_store *s)
{
	arr_reset(&s->put_name);
	arr_reset(&s->put_vis);
	arr_reset(&s->put_due);
	arr_reset(&s->put_flags);
	arr_reset(&s->put_exp);
	arr_reset(&s->put_created);
	arr_reset(&s->put_data);
	arr_reset(&s->put_crc);
	arr_reset(&s->put_dlv);
	arr_reset(&s->st_qid);
	arr_reset(&s->st_id);
	arr_reset(&s->st_st);
	arr_reset(&s->del_qid);
	arr_reset(&s->del_id);
	os_clear(&s->st_ids);
	s->put_bytes = 0;
}

/* A state change of an item this broker holds (see P_SETSTATE). */
static int
pg_st_add(struct pg_store *s, int64_t qid, uint64_t id, int st)
{
	if (!arr_reserve(&s->st_qid, 12) || !arr_reserve(&s->st_id, 12) ||
	    !arr_reserve(&s->st_st, 12) ||
	    os_add(&s->st_ids, id, qid) != SAKER_OK)
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	arr_i64(&s->st_qid, qid);
	arr_i64(&s->st_id, (int64_t)id);
	arr_i64(&s->st_st, st);
	return SAKER_OK;
}

static bool
pg_del_room(struct pg_store *s)
{
	return arr_reserve(&s->del_qid, 12) && arr_reserve(&s->del_id, 12);
}

/* Delete an item this broker holds; pg_del_room() made room. */
static void
pg_del_add(struct pg_store *s, int64_t qid, uint64_t id)
{
	arr_i64(&s->del_qid, qid);
	arr_i64(&s->del_id, (int64_t)id);
}

/* Queue the batch's BEGIN (if not sent yet) and every buffered write
 * ahead of whatever the caller sends next. */
static void
pg_send_pending(struct pg_store *s, struct pg_pipe *pp)
{
	struct pgp p;

	if (s->in_txn && !s->begun) {
		pipe_send(s, pp, 0, "BEGIN", NULL, "begin");
		s->begun = true;
	}
	if (s->put_name.n > 0) {
		memset(&p, 0, sizeof(p));
		pp_arr(&p, &s->put_name);
		pp->qsync = pp->n;
		pipe_send(s, pp, P_QSYNC, NULL, &p, "creating queues");
		pp_arr(&p, &s->put_vis);
		pp_arr(&p, &s->put_due);
		pp_arr(&p, &s->put_flags);
		pp_arr(&p, &s->put_exp);
		pp_arr(&p, &s->put_created);
		pp_arr(&p, &s->put_data);
		pp_arr(&p, &s->put_crc);
		pp_i64(&p, (int64_t)s->put_name.n);
		pp_arr(&p, &s->put_dlv);
		pipe_send(s, pp, P_PUTS, NULL, &p, "inserting items");
	}
	if (s->st_id.n > 0) {
		memset(&p, 0, sizeof(p));
		pp_arr(&p, &s->st_qid);
		pp_arr(&p, &s->st_id);
		pp_arr(&p, &s->st_st);
		pp_str(&p, s->owner);
		pipe_send(s, pp, P_SETSTATE, NULL, &p, "changing item states");
	}
	if (s->del_id.n > 0) {
		memset(&p, 0, sizeof(p));
		pp_arr(&p, &s->del_qid);
		pp_arr(&p, &s->del_id);
		pp_str(&p, s->owner);
		pipe_send(s, pp, P_DELS, NULL, &p, "deleting items");
	}
	/* libpq copied the parameters; if the pipeline fails the whole
	 * batch is rolled back anyway */
	pg_pending_reset(s);
}

/* After a pipeline that carried pending writes succeeded: queues that
 * another broker deleted and this batch re-created have new ids. */
static void
pg_pending_done(struct pg_store *s, struct pg_pipe *pp)
{
	const PGresult *r;
	struct saker_queue *q;
	int64_t id;
	int i;

	if (pp->qsync < 0 || (r = pp->res[pp->qsync]) == NULL)
		return;
	for (i = 0; i < PQntuples(r); i++) {
		id = rv_i64(r, i, 0);
		q = pg_find_name(s, PQgetvalue(r, i, 1),
		    (size_t)PQgetlength(r, i, 1));
		if (q != NULL && q->id != id && id != 0)
			pg_rehash_id(s, q, id);
	}
}

/* Run a prepared statement after the batch's pending writes, in one
 * round trip; NULL (and s->code, s->err set) on failure. */
static PGresult *
pg_run(struct pg_store *s, int which, const struct pgp *p, const char *what)
{
	struct pg_pipe pp;
	PGresult *res;

	if (s->conn == NULL) {
		pg_down(s);
		return NULL;
	}
	pipe_init(&pp);
	pg_send_pending(s, &pp);
	pipe_send(s, &pp, which, NULL, p, what);
	if (!pipe_wait(s, &pp)) {
		pipe_fail(s, &pp);
		return NULL;
	}
	pg_pending_done(s, &pp);
	res = pp.res[pp.n - 1];
	pp.res[pp.n - 1] = NULL;
	pipe_clear(&pp);
	return res;
}

/* Send the pending writes now (before a listing that must see them). */
static int
pg_flush(struct pg_store *s)
{
	struct pg_pipe pp;

	if (s->conn == NULL || (!pg_pending(s) && (s->begun || !s->in_txn)))
		return SAKER_OK;
	pipe_init(&pp);
	pg_send_pending(s, &pp);
	if (!pipe_wait(s, &pp))
		return pipe_fail(s, &pp);
	pg_pending_done(s, &pp);
	pipe_clear(&pp);
	return SAKER_OK;
}

/* Run plain SQL (no parameters, no rows wanted). */
static int
pg_simple(struct pg_store *s, const char *sql, const char *what)
{
	PGresult *res;
	ExecStatusType st;

	if (s->conn == NULL)
		return pg_down(s);
	res = pg_exec(s, sql);
	st = res != NULL ? PQresultStatus(res) : PGRES_FATAL_ERROR;
	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
		PQclear(res);
		return SAKER_OK;
	}
	pg_fail(s, res, what);
	PQclear(res);
	return s->code;
}

/* Rebuild the set of open items from the database (after a rollback or a
 * reconnect: the database knows which leases are still ours). */
static void
pg_reload_open(struct pg_store *s)
{
	struct pgp p = { 0 };
	PGresult *res;
	int i;

	os_clear(&s->open);
	if (s->conn == NULL || s->read_only)
		return;
	pp_str(&p, s->owner);
	if ((res = pg_run(s, P_MINE, &p, "reading open items")) == NULL)
		return;
	for (i = 0; i < PQntuples(res); i++)
		(void)os_add(&s->open, (uint64_t)rv_i64(res, i, 1),
		    rv_i64(res, i, 0));
	PQclear(res);
}

/* Undo the in-memory side of a batch that did not commit. */
static void
pg_restore(struct pg_store *s)
{
	struct saker_queue *q;
	struct kit_qent *e, *next;
	size_t i = 0;

	while ((q = LIST_FIRST(&s->dirty)) != NULL)
		pg_unlist(q);
	while ((q = LIST_FIRST(&s->pend)) != NULL)
		pg_unlist(q);
	for (e = kit_qtab_next(&s->qt, &i, NULL); e != NULL; e = next) {
		next = kit_qtab_next(&s->qt, &i, e);
		q = PG_Q(e);
		if (!q->fresh)
			continue;
		/* never existed; the core may still hold the handle until
		 * it looks every queue up again */
		pg_hash_remove(s, q);
		q->dead = true;
		q->fresh = false;
		LIST_INSERT_HEAD(&s->zombies, q, gone_link);
	}
	while ((q = LIST_FIRST(&s->deleted)) != NULL) {
		LIST_REMOVE(q, gone_link);
		pg_queue_free(q);
	}
}

static void
pg_lose_batch(struct pg_store *s, int code)
{
	struct saker_queue *q;
	PGresult *res;
	struct pgp p = { 0 };

	s->in_txn = false;
	s->begun = false;
	s->txn_gen++;
	s->renew_at = 0;
	if (s->conn != NULL)
		PQclear(pg_exec(s, "ROLLBACK"));
	if (!s->lost) {
		s->lost = true;
		s->lost_err = code;
		pg_oneline(s->lost_why, sizeof(s->lost_why), s->err);
	}
	pg_pending_reset(s);
	while ((q = LIST_FIRST(&s->took)) != NULL) {
		LIST_REMOVE(q, took_link);
		q->took = false;
	}
	/* Claims of earlier batches are still ours in the database, but
	 * which of them this batch handed out is unknown now: give them all
	 * back at once, in their place in the FIFO. */
	pg_held_drop_all(s);
	if (s->conn != NULL && !s->read_only) {
		pp_str(&p, s->owner);
		if ((res = pg_run(s, P_GIVEBACK, &p, "returning claims")) != NULL)
			PQclear(res);
	}
	pg_restore(s);
	pg_reload_open(s);
}

static int
pg_begin(struct pg_store *s)
{
	if (s->read_only)
		return pg_errf(s, SAKER_EREADONLY, "postgres: opened read-only");
	if (s->lost)
		return pg_errf(s, s->lost_err, "%s (batch rolled back)",
		    s->lost_why);
	if (s->conn == NULL)
		return pg_down(s);
	if (s->in_txn)
		return SAKER_OK;
	/* the BEGIN goes out with the batch's first statement */
	s->in_txn = true;
	s->begun = false;
	s->txn_gen++;
	return SAKER_OK;
}

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

/* pg_sql[i] with @CRC@ replaced by `crc` and @DLV@ by `dlv`. */
static char *
pg_sql_for(const char *sql, const char *crc, const char *dlv)
{
	char *a, *b;

	if ((a = pg_sql_sub(sql, "@CRC@", crc)) == NULL)
		return NULL;
	b = pg_sql_sub(a, "@DLV@", dlv);
	free(a);
	return b;
}

/* The session settings: durability, read-only, schema. */
static void
pg_session_sql(const struct pg_store *s, char *sql_set, size_t len)
{
	/* the schema name was checked to need no quoting beyond this */
	snprintf(sql_set, len, "SELECT set_config("
	    "'synchronous_commit', '%s', false), set_config("
	    "'default_transaction_read_only', '%s', false)%s%s%s",
	    s->sync == SAKER_SYNC_ALWAYS ? "on" : "off",
	    s->read_only ? "on" : "off", s->schema != NULL ?
	    ", set_config('search_path', '\"" : "", s->schema != NULL ?
	    s->schema : "", s->schema != NULL ? "\"', false)" : "");
}

/* open(): the session settings before anything reads the schema. */
static int
pg_session(struct pg_store *s)
{
	char sql[256];
	PGresult *res;
	int err = SAKER_OK;

	pg_session_sql(s, sql, sizeof(sql));
	res = pg_exec(s, sql);
	if (res == NULL || PQresultStatus(res) != PGRES_TUPLES_OK)
		err = pg_fail(s, res, "session setup");
	PQclear(res);
	return err;
}

/*
 * Set up the session and prepare every statement, pipelined: one round
 * trip (a reconnect runs it on the loop, bounded by the deadline like
 * any statement).
 */
static int
pg_prepare_all(struct pg_store *s)
{
	PGresult *res;
	char name[16], sql_set[256], *sql;
	const char *what = "session setup";
	int i, n = 0, got = 0, bad = 0, nulls = 0;
	bool ok = true;

	pg_session_sql(s, sql_set, sizeof(sql_set));
	if (!PQenterPipelineMode(s->conn) ||
	    !PQsendQueryParams(s->conn, sql_set, 0, NULL, NULL, NULL, NULL, 0))
		ok = false;
	n++;
	for (i = 0; ok && i < P_COUNT; i++) {
		/* a read-only open of a format 2 store (dump, migrate, check)
		 * reads it as it is: no crc column, nothing to check, and no
		 * inserts */
		if (s->version < 3 && (i == P_PUTS || i == P_REINSERT))
			continue;
		/* ... and before format 4 no delivery counts: no writes of
		 * them */
		if (s->version < 4 && (i == P_PUTS || i == P_REINSERT ||
		    i == P_TAKE_OPEN || i == P_SETSTATE || i == P_MOVE))
			continue;
		snprintf(name, sizeof(name), "s%d", i);
		if ((sql = pg_sql_for(pg_sql[i], s->version < 3 ?
		    "NULL::bigint" : "crc", s->version < 4 ? "0::bigint" :
		    "deliveries")) == NULL) {
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

/* ---- connection parameters, with the hosts of a list rotated ---- */

#define PG_HOSTS_MAX 32

/* The number of elements of a comma-separated list. */
static int
pg_list_n(const char *list)
{
	int n = 1;

	for (; *list != '\0'; list++)
		n += *list == ',';
	return n;
}

/* The list with its elements rotated left by k: "a,b,c" by 1 is
 * "b,c,a".  Empty elements (libpq's defaults) move like the others. */
static void
pg_list_rot(const char *list, int k, char *out, size_t len)
{
	const char *start[PG_HOSTS_MAX], *p = list;
	size_t elen[PG_HOSTS_MAX], o = 0;
	int n = 0, i, j;

	while (n < PG_HOSTS_MAX) {
		start[n] = p;
		elen[n] = strcspn(p, ",");
		p += elen[n];
		n++;
		if (*p != ',')
			break;
		p++;
	}
	out[0] = '\0';
	for (i = 0; i < n; i++) {
		j = (i + k) % n;
		if (o + elen[j] + 2 > len)
			break;
		if (i > 0)
			out[o++] = ',';
		memcpy(out + o, start[j], elen[j]);
		o += elen[j];
		out[o] = '\0';
	}
}

/*
 * The keywords and values for PQconnectStartParams(): ours first where
 * the connection string has none (a TCP user timeout of timeout=, so
 * unacknowledged data fails the connection; keepalives, so an idle
 * LISTEN connection learns of a dead peer), then the string's, with
 * host, hostaddr and port lists rotated by s->host_rot.  libpq tries
 * the hosts of a list in order and gives up on none by itself: a host
 * that swallows packets (a partition, a dead machine) would hold every
 * attempt, so after an attempt that timed out the next one starts with
 * the host after it.
 */
static void
pg_params(struct pg_store *s, const char **kw, const char **val, size_t max)
{
	static const char *const ours[][2] = { { "tcp_user_timeout", NULL },
	    { "keepalives", "1" }, { "keepalives_idle", "10" },
	    { "keepalives_interval", "3" }, { "keepalives_count", "3" } };
	const PQconninfoOption *o;
	size_t n = 0, i;

	for (i = 0; i < sizeof(ours) / sizeof(ours[0]) && n + 1 < max; i++) {
		for (o = s->copts; o->keyword != NULL; o++)
			if (strcmp(o->keyword, ours[i][0]) == 0 && o->val != NULL)
				break;
		if (o->keyword != NULL)
			continue;
		kw[n] = ours[i][0];
		val[n++] = ours[i][1] != NULL ? ours[i][1] : s->ka_user_timeout;
	}
	for (o = s->copts; o->keyword != NULL && n + 1 < max; o++) {
		if (o->val == NULL)
			continue;
		kw[n] = o->keyword;
		val[n] = o->val;
		if (s->nhosts > 1 && s->host_rot % s->nhosts != 0 &&
		    (strcmp(o->keyword, "host") == 0 ||
		    strcmp(o->keyword, "hostaddr") == 0 ||
		    strcmp(o->keyword, "port") == 0) &&
		    pg_list_n(o->val) == s->nhosts) {
			char *buf = o->keyword[0] == 'p' ? s->rot_port :
			    o->keyword[4] == 'a' ? s->rot_addr : s->rot_host;

			pg_list_rot(o->val, s->host_rot % s->nhosts, buf,
			    sizeof(s->rot_host));
			val[n] = buf;
		}
		n++;
	}
	kw[n] = val[n] = NULL;
}

/* Element i of a comma-separated list, into out. */
static void
pg_list_el(const char *list, int i, char *out, size_t len)
{
	size_t n;

	for (; i > 0 && *list != '\0'; list++)
		if (*list == ',')
			i--;
	n = strcspn(list, ",");
	if (n >= len)
		n = len - 1;
	memcpy(out, list, n);
	out[n] = '\0';
}

/* An attempt timed out: the next starts after the host (and port) it
 * was stuck on. */
static void
pg_rotate_past(struct pg_store *s, PGconn *c)
{
	const PQconninfoOption *o;
	const char *h = PQhost(c), *p = PQport(c), *hl = NULL, *pl = NULL;
	char eh[256], ep[32];
	int i, k;

	if (s->nhosts < 2)
		return;
	for (o = s->copts; o->keyword != NULL; o++) {
		if (o->val != NULL && strcmp(o->keyword, "host") == 0)
			hl = o->val;
		if (o->val != NULL && strcmp(o->keyword, "port") == 0)
			pl = o->val;
	}
	for (i = 0; hl != NULL && h != NULL && i < s->nhosts; i++) {
		/* element i of this attempt's order */
		k = (int)((s->host_rot + (unsigned)i) % (unsigned)s->nhosts);
		pg_list_el(hl, k, eh, sizeof(eh));
		if (strcmp(eh, h) != 0)
			continue;
		if (pl != NULL && p != NULL && pg_list_n(pl) == s->nhosts) {
			pg_list_el(pl, k, ep, sizeof(ep));
			if (strcmp(ep, p) != 0)
				continue;
		}
		s->host_rot += (unsigned)i + 1;
		return;
	}
	s->host_rot++;
}

static void
pg_quiet(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

/* "2.000": timeout= in messages */
static const char *
pg_secs(const struct pg_store *s, char *buf, size_t len)
{
	snprintf(buf, len, "%" PRId64 ".%03d", s->timeout_ms / 1000,
	    (int)(s->timeout_ms % 1000));
	return buf;
}

/*
 * Start connecting link l, without blocking (libpq resolves host names
 * with the system resolver, which can: hostaddr= avoids it), with the
 * parameters of pg_params().  connect_timeout does nothing here: libpq
 * applies it only in its blocking connect; the deadline is ours.
 */
static int
pg_link_start(struct pg_store *s, struct pg_link *l, uint64_t wait_ns)
{
	const char *kw[80], *val[80];
	char line[300];

	l->up = false;
	pg_params(s, kw, val, sizeof(kw) / sizeof(kw[0]));
	l->c = PQconnectStartParams(kw, val, 0);
	if (l->c == NULL)
		return pg_errf(s, SAKER_ENOMEM, "postgres: out of memory");
	if (PQstatus(l->c) == CONNECTION_BAD) {
		pg_oneline(line, sizeof(line), PQerrorMessage(l->c));
		pg_link_drop(s, l, false);
		return pg_errf(s, SAKER_EIO, "postgres: cannot connect: %s", line);
	}
	/* NOTICEs ("schema exists, skipping") are not for our stderr */
	PQsetNoticeProcessor(l->c, pg_quiet, NULL);
	/* libpq's rule: begin as if PQconnectPoll() asked to write */
	l->want = PGRES_POLLING_WRITING;
	l->deadline_ns = saker_mono_ns() + wait_ns;
	return SAKER_OK;
}

/*
 * Advance link l's connection as far as its socket allows now, without
 * waiting.  1: connected (non-blocking from now on, its socket watched
 * for input); 0: under way, the socket watched for what libpq waits
 * for; < 0: failed or past its deadline (link dropped, error set).
 */
static int
pg_link_step(struct pg_store *s, struct pg_link *l)
{
	struct pollfd p;
	char line[300], t[32];

	if (l->c == NULL)
		return pg_errf(s, SAKER_EIO, "postgres: not connected");
	while (!l->up) {
		if (saker_mono_ns() >= l->deadline_ns) {
			if (l == &s->links[PG_L_MAIN])
				pg_rotate_past(s, l->c);
			pg_link_drop(s, l, true);
			return pg_errf(s, SAKER_EIO, "postgres: cannot connect:"
			    " no answer within %s s (timeout=)",
			    pg_secs(s, t, sizeof(t)));
		}
		p.fd = PQsocket(l->c);
		p.events = l->want == PGRES_POLLING_WRITING ? POLLOUT : POLLIN;
		p.revents = 0;
		if (p.fd >= 0 && poll(&p, 1, 0) == 0) {
			pg_ep(s, l, p.events == POLLOUT ? EPOLLOUT : EPOLLIN);
			return 0;
		}
		l->want = PQconnectPoll(l->c);
		if (l->want == PGRES_POLLING_FAILED) {
			pg_oneline(line, sizeof(line), PQerrorMessage(l->c));
			pg_link_drop(s, l, false);
			return pg_errf(s, SAKER_EIO, "postgres: cannot connect: %s",
			    line);
		}
		if (l->want == PGRES_POLLING_OK)
			break;
	}
	if (PQsetnonblocking(l->c, 1) != 0) {
		pg_oneline(line, sizeof(line), PQerrorMessage(l->c));
		pg_link_drop(s, l, false);
		return pg_errf(s, SAKER_EIO, "postgres: cannot connect: %s", line);
	}
	/* from here on input nobody asked for (the server ending the
	 * session, a notification) wakes the loop */
	pg_ep(s, l, EPOLLIN);
	return 1;
}

/* open(): connect link l, waiting (the loop is not running yet). */
static int
pg_link_wait(struct pg_store *s, struct pg_link *l, uint64_t wait_ns)
{
	int r;

	if ((r = pg_link_start(s, l, wait_ns)) != SAKER_OK)
		return r;
	while ((r = pg_link_step(s, l)) == 0)
		(void)pg_poll(l->c, l->want == PGRES_POLLING_WRITING ? POLLOUT :
		    POLLIN, l->deadline_ns);
	return r > 0 ? SAKER_OK : s->code;
}

/* Send LISTEN on the (just connected) listen link; the answer is read
 * by pg_listen_read(). */
static int
pg_listen_send(struct pg_store *s)
{
	struct pg_link *l = &s->links[PG_L_LISTEN];
	char sql[300], *id;

	id = PQescapeIdentifier(l->c, s->chan, strlen(s->chan));
	if (id == NULL) {
		pg_link_drop(s, l, false);
		return pg_errf(s, SAKER_ENOMEM, "postgres: out of memory");
	}
	snprintf(sql, sizeof(sql), "LISTEN %s", id);
	PQfreemem(id);
	if (!PQsendQuery(l->c, sql) || PQflush(l->c) < 0) {
		char line[300];

		pg_oneline(line, sizeof(line), PQerrorMessage(l->c));
		pg_link_drop(s, l, true);
		return pg_errf(s, SAKER_EIO, "postgres: LISTEN: %s", line);
	}
	l->up = true;
	s->listening = false;
	return SAKER_OK;
}

static void
pg_notify_local(struct pg_store *s, struct saker_queue *q)
{
	if (q != NULL)
		q->empty_gen = s->txn_gen - 1;
	if (s->notify != NULL && q != NULL && !q->dead)
		s->notify(s->notify_arg, q, q->ctx);
}

/* Tell local waiters and, at commit, the other brokers. */
static void
pg_gained(struct pg_store *s, struct saker_queue *q)
{
	if (q->hint_gen == s->txn_gen)
		q->hint_gen--;	/* a released item may sit before the hint */
	pg_notify_local(s, q);
	if (!q->pend) {
		LIST_INSERT_HEAD(&s->pend, q, pend_link);
		q->pend = true;
	}
}

/* After a reconnect notifications may have been missed: look at every
 * queue again. */
static void
pg_notify_all(struct pg_store *s)
{
	struct kit_qent *e;
	size_t i = 0;

	for (e = kit_qtab_next(&s->qt, &i, NULL); e != NULL;
	    e = kit_qtab_next(&s->qt, &i, e))
		pg_notify_local(s, PG_Q(e));
}

/*
 * Read what the listen link has: the answer to LISTEN, notifications.
 * A lost listen connection is made again by pg_links(); the statement
 * connection, if it is gone too, says so itself.
 */
static int
pg_listen_read(struct pg_store *s, int64_t now_ms)
{
	struct pg_link *l = &s->links[PG_L_LISTEN];
	PGnotify *n;
	PGresult *res;
	char line[300] = "";
	int self;
	char *p, *end, *nl;

	if (!PQconsumeInput(l->c) || PQstatus(l->c) == CONNECTION_BAD)
		pg_oneline(line, sizeof(line), PQerrorMessage(l->c));
	while (line[0] == '\0' && !PQisBusy(l->c) &&
	    (res = PQgetResult(l->c)) != NULL) {
		if (PQresultStatus(res) == PGRES_EMPTY_QUERY)
			s->probing = false;	/* the server is there */
		else if (PQresultStatus(res) != PGRES_COMMAND_OK)
			pg_oneline(line, sizeof(line),
			    PQresultErrorMessage(res));
		else if (!s->listening) {
			s->listening = true;
			/* notifications were lost meanwhile */
			pg_notify_all(s);
		}
		PQclear(res);
	}
	if (line[0] != '\0') {
		pg_link_drop(s, l, true);
		s->listening = false;
		s->lretry_at = now_ms + PG_RETRY_MIN_MS;
		return pg_errf(s, SAKER_EIO, "postgres: notification connection"
		    " lost: %s", line);
	}
	self = s->conn != NULL ? PQbackendPID(s->conn) : -1;
	while ((n = PQnotifies(l->c)) != NULL) {
		if (n->be_pid != self && n->extra != NULL) {
			p = n->extra;
			end = p + strlen(p);
			while (p < end) {
				nl = memchr(p, '\n', (size_t)(end - p));
				if (nl == NULL)
					nl = end;
				if (nl > p)
					pg_notify_local(s, pg_find_name(s, p,
					    (size_t)(nl - p)));
				p = nl + 1;
			}
		}
		PQfreemem(n);
	}
	return SAKER_OK;
}

/* The statement connection just connected: set it up (one bounded
 * round trip), hand back what the old session held. */
static int
pg_main_up(struct pg_store *s)
{
	struct pg_link *l = &s->links[PG_L_MAIN];

	s->conn = l->c;
	if (pg_prepare_all(s) != SAKER_OK) {
		pg_link_drop(s, l, true);
		return s->code;
	}
	l->up = true;
	os_clear(&s->open);
	if (!s->read_only) {
		struct pgp p = { 0 };
		struct saker_queue *q;
		PGresult *res;
		int i;

		/* Everything the lost session held goes back to its queue
		 * now, claimed ahead and open alike (at least once): which of
		 * them the failed batches handed out, and which of their
		 * clients are still there, is unknown, and a lease this
		 * broker kept renewing would never run out. */
		pp_str(&p, s->owner);
		if ((res = pg_run(s, P_RELEASE_ALL, &p, "returning open and"
		    " claimed items")) == NULL)
			return s->code;
		for (i = 0; i < PQntuples(res); i++)
			if ((q = pg_find_id(s, rv_i64(res, i, 0))) != NULL)
				pg_gained(s, q);
		PQclear(res);
	}
	if (s->conn == NULL)
		return s->code;
	s->down_why[0] = '\0';
	s->down_said = false;
	s->lretry_at = 0;
	if (s->opened)
		s->reconnects++;
	/* waiters look again: what they missed is there to take */
	pg_notify_all(s);
	return SAKER_OK;
}

/* A connection attempt failed: try again after the backoff.  The
 * reason is returned (for the log) only when it is news. */
static int
pg_attempt_failed(struct pg_store *s, int64_t now_ms)
{
	char why[sizeof(s->down_why)];
	bool news;

	pg_oneline(why, sizeof(why), strncmp(s->err, "postgres: ", 10) == 0 ?
	    s->err + 10 : s->err);
	news = !s->down_said || strcmp(why, s->down_why) != 0;
	snprintf(s->down_why, sizeof(s->down_why), "%s", why);
	s->down_said = true;
	/* counted from the start of the attempt: one that waited out
	 * its deadline is followed by the next at once */
	s->retry_at = s->attempt_at + PG_RETRY_MIN_MS - PG_TICK_SLACK_MS;
	if (!news)
		return SAKER_OK;
	return pg_errf(s, SAKER_EIO, "postgres: %s; trying again every %d s"
	    " until it answers", why, PG_RETRY_MIN_MS / 1000);
}

static bool
pg_readable(PGconn *c)
{
	struct pollfd p = { .fd = PQsocket(c), .events = POLLIN };

	return p.fd >= 0 && poll(&p, 1, 0) > 0;
}

static int pg_vacuum_tick(struct pg_store *, int64_t);
static void pg_vacuum_drop(struct pg_store *, int64_t);

/*
 * Everything the sockets allow now, on every link, without waiting
 * (fd_ready() and tick()): connections being made advance, a statement
 * connection the server closed is noticed while idle, the listen
 * connection is read and made again.
 */
static int
pg_links(struct pg_store *s, int64_t now_ms)
{
	struct pg_link *l = &s->links[PG_L_MAIN];
	PGnotify *n;
	int r, err = SAKER_OK;
	char line[300];

	if (l->c != NULL && !l->up) {
		r = pg_link_step(s, l);
		if (r > 0 && pg_main_up(s) != SAKER_OK)
			r = -1;
		if (r < 0)
			err = pg_attempt_failed(s, now_ms);
	} else if (l->up && pg_readable(l->c)) {
		/* between turns nothing is asked of it: this is the server
		 * ending the session (a restart, a failover) */
		if (!PQconsumeInput(l->c) || PQstatus(l->c) == CONNECTION_BAD) {
			pg_oneline(line, sizeof(line), PQerrorMessage(l->c));
			pg_conn_lost(s, line);
			err = pg_errf(s, SAKER_EIO, "postgres: connection lost:"
			    " %s; reconnecting", line);
			s->down_said = true;
		} else {
			while ((n = PQnotifies(l->c)) != NULL)
				PQfreemem(n);
		}
	}
	l = &s->links[PG_L_LISTEN];
	if (s->conn != NULL && !s->read_only && l->c == NULL &&
	    now_ms >= s->lretry_at && pg_link_start(s, l, s->wait_ns) !=
	    SAKER_OK)
		s->lretry_at = now_ms + PG_RETRY_MIN_MS;
	if (l->c != NULL && !l->up) {
		r = pg_link_step(s, l);
		if (r > 0)
			r = pg_listen_send(s) == SAKER_OK ? 1 : -1;
		if (r < 0)
			s->lretry_at = now_ms + PG_RETRY_MIN_MS;
	}
	if (l->up && (r = pg_listen_read(s, now_ms)) != SAKER_OK &&
	    err == SAKER_OK)
		err = r;
	l = &s->links[PG_L_VACUUM];
	if (l->c != NULL && (!l->up || s->vacuuming))
		(void)pg_vacuum_tick(s, now_ms);
	else if (l->up && pg_readable(l->c) && (!PQconsumeInput(l->c) ||
	    PQstatus(l->c) == CONNECTION_BAD))
		pg_vacuum_drop(s, now_ms);
	return err;
}

/* open(): LISTEN, waiting for its answer (bounded). */
static int
pg_listen_open(struct pg_store *s)
{
	struct pg_link *l = &s->links[PG_L_LISTEN];
	int e;

	if ((e = pg_link_wait(s, l, s->wait_ns)) != SAKER_OK ||
	    (e = pg_listen_send(s)) != SAKER_OK)
		return e;
	while (!s->listening) {
		if (pg_poll(l->c, POLLIN, l->deadline_ns) <= 0) {
			pg_link_drop(s, l, true);
			return pg_errf(s, SAKER_EIO, "postgres: LISTEN: no answer");
		}
		if ((e = pg_listen_read(s, 0)) != SAKER_OK)
			return e;
	}
	return SAKER_OK;
}

/* ------------------------------------------------------------------ */
/* batches */

/* One array of NOTIFY payloads naming every queue that gained items in
 * this batch; names hold no newline, so it separates them. */
static int
pg_notify_arr(struct pg_store *s, struct pg_arr *a)
{
	struct saker_queue *q;
	char *buf;
	size_t off = 0;

	if (LIST_EMPTY(&s->pend) || s->read_only)
		return SAKER_OK;
	if ((buf = malloc(PG_NOTIFY_MAX + 1)) == NULL)
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	for (q = LIST_FIRST(&s->pend); q != NULL || off > 0;
	    q = q != NULL ? LIST_NEXT(q, pend_link) : NULL) {
		if (q != NULL && q->len >= PG_NOTIFY_MAX)
			continue;
		if (q == NULL || off + q->len + 1 > PG_NOTIFY_MAX) {
			if (!arr_reserve(a, 4 + off)) {
				free(buf);
				return pg_errf(s, SAKER_ENOMEM, "out of memory");
			}
			arr_put(a, buf, off);
			off = 0;
			if (q == NULL)
				break;
		}
		memcpy(buf + off, q->name, q->len);
		off += q->len;
		buf[off++] = '\n';
	}
	free(buf);
	return SAKER_OK;
}

/* The batch's counter deltas, one row per queue. */
static int
pg_counts_arr(struct pg_store *s, struct pg_arr *qid, struct pg_arr *tot,
    struct pg_arr *exp)
{
	struct saker_queue *q;

	LIST_FOREACH(q, &s->dirty, dirty_link) {
		if (q->d_total == 0 && q->d_expired == 0)
			continue;
		if (!arr_reserve(qid, 12) || !arr_reserve(tot, 12) ||
		    !arr_reserve(exp, 12))
			return pg_errf(s, SAKER_ENOMEM, "out of memory");
		arr_i64(qid, q->id);
		arr_i64(tot, q->d_total);
		arr_i64(exp, q->d_expired);
	}
	return SAKER_OK;
}

/*
 * The whole batch in one round trip: BEGIN (if no statement went out
 * yet), the buffered puts, state changes and deletes, the counters, the
 * NOTIFY and the COMMIT, pipelined.  However many commands the loop turn
 * ran, that is at most eight statements.
 */
static int
pg_commit(saker_store *base)
{
	struct pg_store *s = PG(base);
	struct saker_queue *q;
	struct pg_arr cq = { .oid = OID_INT8 }, ct = { .oid = OID_INT8 },
	    ce = { .oid = OID_INT8 }, nt = { .oid = OID_TEXT };
	struct pg_pipe pp;
	struct pgp p;
	struct saker_queue *pre[PG_PRECLAIM_MAX];
	int pre_ix[PG_PRECLAIM_MAX], npre = 0, k;
	bool in_doubt = false;
	const char *st;
	uint64_t t0, bno;
	int err, commit_ix;

	if (s->lost) {
		s->lost = false;
		return pg_errf(s, s->lost_err, "%s (batch rolled back)",
		    s->lost_why);
	}
	/* Nothing to commit is no failure, even while down (store.h):
	 * the replies of a turn that wrote nothing (a get that timed out
	 * with a miss, in the same turn as the tick) stand.  /healthz
	 * learns of the connection from store_stats. */
	if (!s->in_txn && LIST_EMPTY(&s->dirty) && LIST_EMPTY(&s->pend)) {
		s->batch_no++;
		return SAKER_OK;
	}
	if (s->conn == NULL && !s->read_only)
		return pg_down(s);
	bno = s->batch_no++;
	t0 = saker_mono_ns();
	if ((err = pg_begin(s)) != SAKER_OK ||
	    (err = pg_counts_arr(s, &cq, &ct, &ce)) != SAKER_OK ||
	    (err = pg_notify_arr(s, &nt)) != SAKER_OK)
		goto fail;
	pipe_init(&pp);
	pg_send_pending(s, &pp);
	if (cq.n > 0) {
		memset(&p, 0, sizeof(p));
		pp_str(&p, s->owner);
		pp_arr(&p, &cq);
		pp_arr(&p, &ct);
		pp_arr(&p, &ce);
		pipe_send(s, &pp, P_COUNTS, NULL, &p, "writing counters");
	}
	if (nt.n > 0) {
		memset(&p, 0, sizeof(p));
		pp_str(&p, s->chan);
		pp_arr(&p, &nt);
		pipe_send(s, &pp, P_NOTIFY, NULL, &p, "notify");
	}
	/* Busy queues claim for the next turn in this round trip: the items
	 * this batch put are there already, so the next turn's takes need
	 * none (a pair workload costs one round trip per turn). */
	LIST_FOREACH(q, &s->took, took_link) {
		if (npre == PG_PRECLAIM_MAX || pp.n >= PG_PIPE_MAX - 2)
			break;
		if (q->dead || q->held != NULL || q->take_batch != bno ||
		    q->takes_cur < 2 || q->empty_gen == s->txn_gen)
			continue;
		if (s->nheld == 0 && s->open.n == 0 && npre == 0)
			s->lease_floor = s->last_now;
		memset(&p, 0, sizeof(p));
		pp_i64(&p, q->id);
		pp_i64(&p, s->last_now);
		pp_i64(&p, s->last_now + PG_SKEW_MS);
		pp_i64(&p, INT64_MIN);
		pp_i64(&p, 0);
		pp_str(&p, s->owner);
		pp_i64(&p, s->lease_ms);
		pp_i64(&p, q->takes_cur > PG_CLAIM_MAX ? PG_CLAIM_MAX :
		    q->takes_cur);
		pre_ix[npre] = pp.n;
		pre[npre++] = q;
		pipe_send(s, &pp, P_CLAIM, NULL, &p, "claiming items");
	}
	commit_ix = pp.n;
	pipe_send(s, &pp, 0, "COMMIT", NULL, "commit");
	arr_free(&cq);
	arr_free(&ct);
	arr_free(&ce);
	arr_free(&nt);
	if (!pipe_wait(s, &pp)) {
		/* A statement before the COMMIT that PostgreSQL refused aborts
		 * the transaction (the COMMIT is skipped).  Otherwise, when the
		 * connection broke, the COMMIT may have happened or not, and
		 * nobody can tell us which. */
		st = pp.bad_res != NULL ? PQresultErrorField(pp.bad_res,
		    PG_DIAG_SQLSTATE) : NULL;
		in_doubt = PQstatus(s->conn) != CONNECTION_OK &&
		    !(st != NULL && pp.bad < commit_ix);
		err = pipe_fail(s, &pp);
		if (in_doubt) {
			char why[300];

			/* the client's SERVER_ERROR line says so */
			s->in_doubt++;
			pg_oneline(why, sizeof(why), s->conn == NULL &&
			    s->down_why[0] != '\0' ? s->down_why : s->err);
			pg_errf(s, SAKER_EINDOUBT, "postgres: outcome unknown, the"
			    " COMMIT got no answer (%s): the batch may or may not"
			    " be stored; retrying a write may duplicate it", why);
			pg_oneline(s->lost_why, sizeof(s->lost_why), s->err);
		}
		goto fail;
	}
	pg_pending_done(s, &pp);
	for (k = 0; k < npre; k++) {
		/* blocked clients of this broker are served from them now */
		if (pg_held_install(s, pre[k], pp.res[pre_ix[k]], s->last_now) ==
		    SAKER_OK)
			pg_notify_local(s, pre[k]);
		pp.res[pre_ix[k]] = NULL;
	}
	pipe_clear(&pp);
	while ((q = LIST_FIRST(&s->took)) != NULL) {
		LIST_REMOVE(q, took_link);
		q->took = false;
	}
	s->in_txn = false;
	s->begun = false;
	s->txn_gen++;
	if (s->renew_at != 0) {
		s->lease_floor = s->renew_at;
		s->renew_at = 0;
	}
	while ((q = LIST_FIRST(&s->dirty)) != NULL) {
		q->fresh = false;
		pg_unlist(q);
	}
	while ((q = LIST_FIRST(&s->pend)) != NULL)
		pg_unlist(q);
	while ((q = LIST_FIRST(&s->deleted)) != NULL) {
		LIST_REMOVE(q, gone_link);
		pg_queue_free(q);
	}
	/* queues created in this batch are committed now */
	{
		struct kit_qent *e;
		size_t i = 0;

		for (e = kit_qtab_next(&s->qt, &i, NULL); e != NULL;
		    e = kit_qtab_next(&s->qt, &i, e))
			PG_Q(e)->fresh = false;
	}
	s->commits++;
	s->last_commit_ms = s->last_now;
	if (s->sync == SAKER_SYNC_ALWAYS)
		s->fsyncs++;
	else if (s->sync == SAKER_SYNC_PERIODIC)
		s->unsynced = true;
	s->commit_ns += saker_mono_ns() - t0;
	return SAKER_OK;

fail:
	arr_free(&cq);
	arr_free(&ct);
	arr_free(&ce);
	arr_free(&nt);
	while ((q = LIST_FIRST(&s->took)) != NULL) {
		LIST_REMOVE(q, took_link);
		q->took = false;
	}
	/* pg_fail() rolled back and recorded it; report it once */
	if (s->lost)
		err = s->lost_err;
	else if (s->in_txn)
		pg_lose_batch(s, err);
	s->lost = false;
	return in_doubt ? SAKER_EINDOUBT : err;
}

static int
pg_sync(saker_store *base)
{
	struct pg_store *s = PG(base);

	if (s->sync != SAKER_SYNC_PERIODIC || !s->unsynced || s->read_only ||
	    s->in_txn || s->conn == NULL)
		return SAKER_OK;
	/* A synchronous commit that writes a commit record flushes the WAL up
	 * to it, and with it every asynchronous commit before. */
	if (pg_simple(s, "BEGIN; SET LOCAL synchronous_commit = on;"
	    " SELECT txid_current(); COMMIT", "sync") != SAKER_OK)
		return s->code;
	s->fsyncs++;
	s->unsynced = false;
	return SAKER_OK;
}

/* ------------------------------------------------------------------ */
/* queues */

static int
pg_dead(struct pg_store *s, struct saker_queue *q)
{
	if (q == NULL || q->dead)
		return pg_errf(s, SAKER_ENOTFOUND, "no such queue");
	return SAKER_OK;
}

/* The id of queue `name` in the database, creating it when asked.
 * *id = 0 when it does not exist. */
static int
pg_resolve(struct pg_store *s, const char *name, size_t len, bool create,
    int64_t *id, bool *created)
{
	struct pgp p = { 0 };
	PGresult *res;
	int err;

	*id = 0;
	*created = false;
	pp_bin(&p, name, len);
	if ((res = pg_run(s, P_Q_FIND, &p, "looking up queue")) == NULL)
		return s->code;
	if (PQntuples(res) > 0)
		*id = rv_i64(res, 0, 0);
	PQclear(res);
	if (*id != 0 || !create)
		return SAKER_OK;
	if ((err = pg_begin(s)) != SAKER_OK)
		return err;
	if ((res = pg_run(s, P_Q_CREATE, &p, "creating queue")) == NULL)
		return s->code;
	if (PQntuples(res) > 0) {
		*id = rv_i64(res, 0, 0);
		*created = true;
	}
	PQclear(res);
	if (*id != 0)
		return SAKER_OK;
	/* another broker created it meanwhile */
	if ((res = pg_run(s, P_Q_FIND, &p, "looking up queue")) == NULL)
		return s->code;
	if (PQntuples(res) > 0)
		*id = rv_i64(res, 0, 0);
	PQclear(res);
	if (*id == 0)
		return pg_errf(s, SAKER_EIO, "postgres: queue vanished while"
		    " being created");
	return SAKER_OK;
}

static int
pg_queue_open(saker_store *base, const char *name, size_t len, bool create,
    void *queue_ctx, saker_queue **out)
{
	struct pg_store *s = PG(base);
	struct saker_queue *q;
	int64_t id;
	bool created;
	int err;

	*out = NULL;
	if (name == NULL || len == 0)
		return pg_errf(s, SAKER_EINVAL, "empty queue name");
	if ((q = pg_find_name(s, name, len)) != NULL) {
		if (queue_ctx != NULL)
			q->ctx = queue_ctx;
		*out = q;
		return SAKER_OK;
	}
	if (create && s->lost)
		return pg_begin(s);
	err = pg_resolve(s, name, len, create && !s->read_only, &id, &created);
	if (err != SAKER_OK)
		return err;
	if (id == 0 && create && s->read_only)
		return pg_errf(s, SAKER_EREADONLY, "postgres: opened read-only");
	if (id == 0)
		return pg_errf(s, SAKER_ENOTFOUND, "no such queue");
	if ((q = pg_queue_new(s, name, len, id)) == NULL)
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	q->fresh = created;
	q->ctx = queue_ctx;
	*out = q;
	return SAKER_OK;
}

static int
pg_exec_qid(struct pg_store *s, int which, int64_t qid, const char *what,
    uint64_t *changed)
{
	struct pgp p = { 0 };
	PGresult *res;

	pp_i64(&p, qid);
	if ((res = pg_run(s, which, &p, what)) == NULL)
		return s->code;
	if (changed != NULL)
		*changed = rv_changed(res);
	PQclear(res);
	return SAKER_OK;
}

static int
pg_queue_delete(saker_store *base, saker_queue *q)
{
	struct pg_store *s = PG(base);
	int err;

	if ((err = pg_dead(s, q)) != SAKER_OK || (err = pg_begin(s)) != SAKER_OK)
		return err;
	if ((err = pg_exec_qid(s, P_I_DELQ, q->id, "deleting items", NULL)) !=
	    SAKER_OK ||
	    (err = pg_exec_qid(s, P_C_DELQ, q->id, "deleting counters", NULL)) !=
	    SAKER_OK ||
	    (err = pg_exec_qid(s, P_Q_DELETE, q->id, "deleting queue", NULL)) !=
	    SAKER_OK)
		return err;
	os_drop_queue(&s->open, q->id);
	pg_held_drop(s, q);
	pg_unlist(q);
	pg_hash_remove(s, q);
	q->dead = true;
	q->fresh = false;
	LIST_INSERT_HEAD(&s->deleted, q, gone_link);
	return SAKER_OK;
}

static int
pg_queue_flush(saker_store *base, saker_queue *q)
{
	struct pg_store *s = PG(base);
	int err;

	if ((err = pg_dead(s, q)) != SAKER_OK || (err = pg_begin(s)) != SAKER_OK)
		return err;
	if ((err = pg_exec_qid(s, P_I_DELQ, q->id, "flushing queue", NULL)) !=
	    SAKER_OK)
		return err;
	os_drop_queue(&s->open, q->id);
	pg_held_drop(s, q);
	return SAKER_OK;
}

static int
pg_queues(saker_store *base, saker_queue_name_fn fn, void *arg)
{
	struct pg_store *s = PG(base);
	PGresult *res;
	int i, r = 0;

	if ((res = pg_run(s, P_Q_LIST, NULL, "listing queues")) == NULL)
		return s->code;
	for (i = 0; i < PQntuples(res) && r == 0; i++)
		r = fn(arg, PQgetvalue(res, i, 0), (size_t)PQgetlength(res, i, 0));
	PQclear(res);
	return r;
}

static int
pg_queue_stats(saker_store *base, saker_queue *q, struct saker_queue_stats *st)
{
	struct pg_store *s = PG(base);
	struct pgp p = { 0 };
	PGresult *res;
	int err;

	memset(st, 0, sizeof(*st));
	if ((err = pg_dead(s, q)) != SAKER_OK)
		return err;
	pp_i64(&p, q->id);
	pp_i64(&p, s->last_now);
	if ((res = pg_run(s, P_STATS, &p, "reading queue stats")) == NULL)
		return s->code;
	if (PQntuples(res) > 0) {
		st->items = (uint64_t)rv_i64(res, 0, 0);
		st->bytes = (uint64_t)rv_i64(res, 0, 1);
		st->delayed_items = (uint64_t)rv_i64(res, 0, 2);
		st->open_items = (uint64_t)rv_i64(res, 0, 3);
		st->total_items = (uint64_t)(rv_i64(res, 0, 4) + q->d_total);
		st->expired_items = (uint64_t)(rv_i64(res, 0, 5) + q->d_expired);
		st->expired_to = q->expired_to;
		st->head_created_ms = rv_i64(res, 0, 6);
	}
	PQclear(res);
	return SAKER_OK;
}

/* ------------------------------------------------------------------ */
/* items */

static void
pg_saw(struct pg_store *s, int64_t now_ms)
{
	if (now_ms > s->last_now)
		s->last_now = now_ms;
}

/* Puts wait in the batch's arrays; beyond this many bytes of data they
 * are sent ahead of the commit, so no statement grows without bound. */
#define PG_PUT_FLUSH (8u << 20)

static int
pg_put(saker_store *base, saker_queue *q, const struct saker_item *item,
    int64_t now_ms)
{
	struct pg_store *s = PG(base);
	int64_t due, vis, created;
	int err;

	if ((err = pg_dead(s, q)) != SAKER_OK)
		return err;
	if (item == NULL || (item->data == NULL && item->len > 0) ||
	    item->len > INT32_MAX)
		return pg_errf(s, SAKER_EINVAL, "bad item");
	if ((err = pg_begin(s)) != SAKER_OK)
		return err;
	if (!arr_reserve(&s->put_name, 4 + q->len) ||
	    !arr_reserve(&s->put_vis, 12) || !arr_reserve(&s->put_due, 12) ||
	    !arr_reserve(&s->put_flags, 12) || !arr_reserve(&s->put_exp, 12) ||
	    !arr_reserve(&s->put_created, 12) ||
	    !arr_reserve(&s->put_crc, 12) || !arr_reserve(&s->put_dlv, 12) ||
	    !arr_reserve(&s->put_data, 4 + item->len))
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	pg_saw(s, now_ms);
	due = item->due_ms > now_ms ? item->due_ms : 0;
	if (due != 0) {
		vis = due;
	} else {
		vis = now_ms > s->last_vis ? now_ms : s->last_vis;
		s->last_vis = vis;
	}
	/* the queue goes by name: P_QSYNC re-creates it if another broker
	 * deleted it meanwhile */
	arr_put(&s->put_name, q->name, q->len);
	arr_i64(&s->put_vis, vis);
	arr_i64(&s->put_due, due);
	arr_i64(&s->put_flags, (int64_t)item->flags);
	arr_i64(&s->put_exp, item->expires_ms);
	created = item->created_ms != 0 ? item->created_ms : now_ms;
	arr_i64(&s->put_created, created);
	arr_put(&s->put_data, item->data, item->len);
	arr_i64(&s->put_dlv, (int64_t)item->deliveries);
	arr_i64(&s->put_crc, kit_item_crc(item->flags, item->expires_ms,
	    created, item->data, item->len));
	s->put_bytes += item->len;
	pg_mark_dirty(s, q);
	q->d_total++;
	if (due == 0)
		pg_gained(s, q);
	if (q->hint_gen == s->txn_gen && vis <= q->hint_vis)
		pg_unhint(q);
	if (s->put_bytes >= PG_PUT_FLUSH)
		return pg_flush(s);
	return SAKER_OK;
}

static void
pg_row_item(const PGresult *res, int row, struct saker_item *it,
    saker_item_state state)
{
	memset(it, 0, sizeof(*it));
	it->id = (uint64_t)rv_i64(res, row, C_ID);
	it->flags = (uint32_t)rv_i64(res, row, C_FLAGS);
	it->expires_ms = rv_i64(res, row, C_EXPIRES);
	it->created_ms = rv_i64(res, row, C_CREATED);
	if (state == SAKER_ITEM_DELAYED)
		it->due_ms = rv_i64(res, row, C_DUE);
	it->state = state;
	it->data = PQgetvalue(res, row, C_DATA);
	it->len = (size_t)PQgetlength(res, row, C_DATA);
	if (PQnfields(res) > C_DLV && !PQgetisnull(res, row, C_DLV)) {
		int64_t d = rv_i64(res, row, C_DLV);

		it->deliveries = d < 0 ? 0 : d > SAKER_DELIVERIES_MAX ?
		    SAKER_DELIVERIES_MAX : (uint32_t)d;
	}
}

/* Does the item of this row (ITEM_COLS) hold its checksum?  Rows from
 * before format 3 (NULL) pass. */
static bool
pg_row_sound(const PGresult *res, int row)
{
	uint32_t flags;

	if (PQgetisnull(res, row, C_CRC))
		return true;
	if (PQgetlength(res, row, C_CRC) != 8 ||
	    PQgetlength(res, row, C_FLAGS) != 8)
		return false;
	flags = (uint32_t)rv_i64(res, row, C_FLAGS);
	/* flags are a u32 stored in a bigint: anything else is damage */
	if (rv_i64(res, row, C_FLAGS) != (int64_t)flags)
		return false;
	return rv_i64(res, row, C_CRC) == (int64_t)kit_item_crc(flags,
	    rv_i64(res, row, C_EXPIRES), rv_i64(res, row, C_CREATED),
	    PQgetvalue(res, row, C_DATA), (size_t)PQgetlength(res, row, C_DATA));
}

static int
pg_del1(struct pg_store *s, struct saker_queue *q, int64_t id, bool count)
{
	struct pgp p = { 0 };
	PGresult *res;

	pp_i64(&p, q->id);
	pp_i64(&p, id);
	if ((res = pg_run(s, P_DEL1, &p, "dropping expired item")) == NULL)
		return s->code;
	if (rv_changed(res) > 0 && count) {
		pg_mark_dirty(s, q);
		q->d_expired++;
	}
	PQclear(res);
	return SAKER_OK;
}

/*
 * An expired item of q (row `row` of res; its flags, created, data and
 * deliveries in columns cf, cc, cd, cn) goes to q's expire_to queue, with
 * its expiry cleared, in the batch; the caller deletes the original.
 * *moved false: q has no expire_to (or it is q): the caller drops it.
 */
static int
pg_xto_put(struct pg_store *s, struct saker_queue *q, const PGresult *res,
    int row, const int col[4], int64_t now_ms, bool *moved)
{
	struct saker_item it;
	struct saker_queue *t;
	void *copy = NULL;
	int64_t d;
	int err;

	*moved = false;
	if ((err = saker_store_expire_target(&s->base, q, &t)) != SAKER_OK ||
	    t == NULL)
		return err;
	memset(&it, 0, sizeof(it));
	it.flags = (uint32_t)rv_i64(res, row, col[0]);
	it.created_ms = rv_i64(res, row, col[1]);
	d = rv_i64(res, row, col[3]);
	it.deliveries = d < 0 ? 0 : d > SAKER_DELIVERIES_MAX ?
	    SAKER_DELIVERIES_MAX : (uint32_t)d;
	it.len = (size_t)PQgetlength(res, row, col[2]);
	/* res may be freed if a statement below fails (the batch is lost) */
	if (it.len > 0 && (copy = malloc(it.len)) == NULL)
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	if (it.len > 0)
		memcpy(copy, PQgetvalue(res, row, col[2]), it.len);
	it.data = copy != NULL ? copy : "";
	err = pg_put(&s->base, t, &it, now_ms);
	free(copy);
	if (err == SAKER_OK) {
		*moved = true;
		q->expired_to++;
	}
	return err;
}

static const int pg_item_cols[4] = { C_FLAGS, C_CREATED, C_DATA, C_DLV };

/* Put back a removed item the caller refused, exactly as it was. */
static int
pg_reinsert(struct pg_store *s, struct saker_queue *q, const PGresult *r)
{
	struct pgp p = { 0 };
	PGresult *res;

	pp_i64(&p, q->id);
	pp_i64(&p, rv_i64(r, 0, 0));
	pp_i64(&p, rv_i64(r, 0, 4));
	pp_i64(&p, rv_i64(r, 0, 5));
	pp_i64(&p, rv_i64(r, 0, 1));
	pp_i64(&p, rv_i64(r, 0, 2));
	pp_i64(&p, rv_i64(r, 0, 3));
	pp_i64(&p, PQgetlength(r, 0, 6));
	pp_bin(&p, PQgetvalue(r, 0, 6), (size_t)PQgetlength(r, 0, 6));
	if (PQgetisnull(r, 0, C_CRC))
		pp_null(&p);	/* from before format 3: stays unchecked */
	else
		pp_i64(&p, rv_i64(r, 0, C_CRC));
	pp_i64(&p, rv_i64(r, 0, C_DLV));
	if ((res = pg_run(s, P_REINSERT, &p, "returning item")) == NULL)
		return s->code;
	PQclear(res);
	return SAKER_OK;
}


/* The row just taken (or dropped) in this transaction: later takes in the
 * same transaction start after it. */
static void
pg_hint(struct pg_store *s, struct saker_queue *q, const PGresult *res)
{
	if (!s->in_txn)
		return;
	q->hint_gen = s->txn_gen;
	q->hint_vis = rv_i64(res, 0, 4);
	q->hint_id = rv_i64(res, 0, 0);
}


/* ---- damaged items ---- */

/* Whether a damaged item can be moved aside now. */
static bool
pg_can_move(const struct pg_store *s)
{
	return !s->read_only && !s->lost && s->conn != NULL;
}

/*
 * The item of row `row` of res (ITEM_COLS) failed its checksum: the layer
 * copies its bytes, as they are, to q's quarantine queue in the current
 * batch (saker_store_quarantine(); res NULL: the store takes no writes, it
 * stays).  The caller removes the original once this succeeded, in the
 * same batch.  Either way s->err holds the message naming both queues.
 */
static int
pg_put_damaged(struct pg_store *s, struct saker_queue *q, const PGresult *res,
    int row, int64_t id, int64_t now_ms)
{
	struct saker_item it;
	char msg[sizeof(s->err)];
	void *copy = NULL;
	int err;

	memset(&it, 0, sizeof(it));
	if (res != NULL) {
		it.flags = (uint32_t)rv_i64(res, row, C_FLAGS);
		it.created_ms = rv_i64(res, row, C_CREATED);
		it.len = (size_t)PQgetlength(res, row, C_DATA);
		/* res may be freed if a statement below fails */
		if (it.len > 0 && (copy = malloc(it.len)) == NULL)
			return pg_errf(s, SAKER_ENOMEM, "out of memory");
		if (it.len > 0)
			memcpy(copy, PQgetvalue(res, row, C_DATA), it.len);
		it.data = copy != NULL ? copy : "";
	}
	err = saker_store_quarantine(&s->base, q, q->name, q->len,
	    (uint64_t)id, res != NULL ? &it : NULL, now_ms, msg, sizeof(msg));
	free(copy);
	pg_errf(s, SAKER_ECORRUPT, "%s", msg);
	return err;
}

/* pg_take_one() met a damaged item (the only row of res, which this
 * takes): in the batch, move it aside and remove it from q. */
static int
pg_take_damaged(struct pg_store *s, struct saker_queue *q, int mode,
    PGresult *res, int64_t now_ms)
{
	struct pgp p = { 0 };
	PGresult *dr;
	int64_t id = rv_i64(res, 0, C_ID);
	uint64_t n;
	int err;

	if (mode == SAKER_TAKE_PEEK) {
		/* a peek changed nothing yet: delete it first, unless another
		 * broker has taken it meanwhile (it meets the damage then) */
		if (!pg_can_move(s)) {
			PQclear(res);
			(void)pg_put_damaged(s, q, NULL, 0, id, now_ms);
			return SAKER_ECORRUPT;
		}
		pp_i64(&p, q->id);
		pp_i64(&p, id);
		if ((err = pg_begin(s)) != SAKER_OK ||
		    (dr = pg_run(s, P_DEL_READY, &p, "moving a damaged item")) ==
		    NULL) {
			PQclear(res);
			return err != SAKER_OK ? err : s->code;
		}
		n = rv_changed(dr);
		PQclear(dr);
		if (n == 0) {
			PQclear(res);
			return pg_errf(s, SAKER_ECORRUPT, "queue '%.*s': item %"
			    PRId64 " failed its checksum (taken meanwhile by"
			    " another broker)", (int)q->len, q->name, id);
		}
	}
	/* REMOVE deleted it, OPEN leased it to us (state 1), PEEK above */
	if (mode == SAKER_TAKE_OPEN && !pg_del_room(s))
		err = pg_errf(s, SAKER_ENOMEM, "out of memory");
	else
		err = pg_put_damaged(s, q, res, 0, id, now_ms);
	if (err == SAKER_OK && mode == SAKER_TAKE_OPEN)
		pg_del_add(s, q->id, (uint64_t)id);
	if (err != SAKER_OK && !s->lost) {
		/* not moved: put it back as it was (it stays damaged) */
		int e2 = mode == SAKER_TAKE_OPEN ? pg_st_add(s, q->id,
		    (uint64_t)id, 0) : pg_reinsert(s, q, res);

		PQclear(res);
		return e2 != SAKER_OK ? e2 : SAKER_ECORRUPT;
	}
	PQclear(res);
	return SAKER_ECORRUPT;
}

/* One item by one statement: the quiet path (claim size 1) and peek. */
static int
pg_take_one(struct pg_store *s, struct saker_queue *q, int mode,
    int64_t now_ms, saker_item_fn fn, void *arg)
{
	struct saker_item it;
	struct pgp p;
	PGresult *res;
	int64_t expires;
	bool moved;
	int err, r, which;

	if (mode == SAKER_TAKE_OPEN && s->nheld == 0 && s->open.n == 0)
		s->lease_floor = now_ms;
	which = mode == SAKER_TAKE_REMOVE ? P_TAKE_REMOVE :
	    mode == SAKER_TAKE_OPEN ? P_TAKE_OPEN : P_PEEK;
	for (;;) {
		memset(&p, 0, sizeof(p));
		pp_i64(&p, q->id);
		pp_i64(&p, now_ms);
		pp_i64(&p, now_ms + PG_SKEW_MS);
		if (q->hint_gen == s->txn_gen && s->in_txn) {
			pp_i64(&p, q->hint_vis);
			pp_i64(&p, q->hint_id);
		} else {
			pp_i64(&p, INT64_MIN);
			pp_i64(&p, 0);
		}
		if (mode == SAKER_TAKE_OPEN) {
			pp_str(&p, s->owner);
			pp_i64(&p, s->lease_ms);
		}
		if ((res = pg_run(s, which, &p, "taking item")) == NULL)
			return s->code;
		if (PQntuples(res) == 0) {
			PQclear(res);
			if (s->in_txn)
				q->empty_gen = s->txn_gen;
			return SAKER_EEMPTY;
		}
		expires = rv_i64(res, 0, 2);
		if (mode != SAKER_TAKE_PEEK)
			pg_hint(s, q, res);
		/* checked before the expiry: damage there must not drop it */
		if (!pg_row_sound(res, 0))
			return pg_take_damaged(s, q, mode, res, now_ms);
		if (expires == 0 || expires > now_ms)
			break;
		/* expired at the head: drop it, count it (or move it to the
		 * expire_to queue), look again */
		if (mode == SAKER_TAKE_REMOVE) {
			if ((err = pg_xto_put(s, q, res, 0, pg_item_cols, now_ms,
			    &moved)) != SAKER_OK) {
				PQclear(res);
				return err;
			}
			if (!moved) {
				pg_mark_dirty(s, q);
				q->d_expired++;
			}
		} else if (!s->read_only && s->conn != NULL && !s->lost) {
			if ((err = pg_begin(s)) != SAKER_OK ||
			    (err = pg_xto_put(s, q, res, 0, pg_item_cols, now_ms,
			    &moved)) != SAKER_OK ||
			    (err = pg_del1(s, q, rv_i64(res, 0, 0), !moved)) !=
			    SAKER_OK) {
				PQclear(res);
				return err;
			}
			pg_hint(s, q, res);
		} else {
			PQclear(res);
			return SAKER_EEMPTY;	/* cannot drop it: hide it */
		}
		PQclear(res);
	}
	pg_row_item(res, 0, &it, SAKER_ITEM_READY);
	r = fn(arg, &it);
	if (r != 0 && mode != SAKER_TAKE_PEEK)
		pg_unhint(q);
	if (r != 0 && mode == SAKER_TAKE_REMOVE)
		err = pg_reinsert(s, q, res);
	else if (r != 0 && mode == SAKER_TAKE_OPEN)
		err = pg_st_add(s, q->id, it.id, 0);
	else if (mode == SAKER_TAKE_OPEN)
		err = os_add(&s->open, it.id, q->id) == SAKER_OK ? SAKER_OK :
		    pg_errf(s, SAKER_ENOMEM, "out of memory");
	else
		err = SAKER_OK;
	PQclear(res);
	if (err != SAKER_OK)
		return err;
	return r;
}

/* ---- claim ahead ---- */

/* Items claimed ahead are served only while their lease is surely ours:
 * renewals run every lease/4, so missing 3/4 of a lease means trouble. */
static bool
pg_lease_ok(const struct pg_store *s, int64_t now_ms)
{
	return now_ms < s->lease_floor + s->lease_ms - s->lease_ms / 4;
}

/* Forget the queue's claimed items here (the database is not told). */
static void
pg_held_drop(struct pg_store *s, struct saker_queue *q)
{
	if (q->held == NULL)
		return;
	s->nheld -= (size_t)(q->held_n - q->held_head);
	PQclear(q->held);
	free(q->held_rows);
	q->held = NULL;
	q->held_rows = NULL;
	q->held_head = q->held_n = 0;
	LIST_REMOVE(q, held_link);
}

static void
pg_held_drop_all(struct pg_store *s)
{
	struct saker_queue *q;

	while ((q = LIST_FIRST(&s->holding)) != NULL)
		pg_held_drop(s, q);
}

/* Hand the queue's unserved claimed items back (state 0) in this batch;
 * they keep their place in the FIFO. */
static int
pg_held_return(struct pg_store *s, struct saker_queue *q)
{
	int i, err;

	if (q->held == NULL)
		return SAKER_OK;
	for (i = q->held_head; i < q->held_n; i++)
		if ((err = pg_st_add(s, q->id, (uint64_t)rv_i64(q->held,
		    q->held_rows[i], 0), 0)) != SAKER_OK)
			return err;
	pg_held_drop(s, q);
	pg_gained(s, q);
	return SAKER_OK;
}

/*
 * How many items the next claim of this queue asks for: as many as the
 * queue had takes in the previous batch, or in this one so far, whichever
 * is more (so it doubles while a burst lasts).  A queue with one take per
 * batch claims one item at a time: a single consumer sees strict FIFO and
 * nothing is held back from other brokers.
 */
static int
pg_claim_size(struct pg_store *s, struct saker_queue *q)
{
	unsigned n;

	if (q->take_batch != s->batch_no) {
		q->takes_prev = q->take_batch + 1 == s->batch_no ?
		    q->takes_cur : 0;
		q->takes_cur = 0;
		q->take_batch = s->batch_no;
	}
	if (q->takes_cur < PG_CLAIM_MAX)
		q->takes_cur++;
	n = q->takes_prev > q->takes_cur ? q->takes_prev : q->takes_cur;
	return n > PG_CLAIM_MAX ? PG_CLAIM_MAX : (int)n;
}

/* Claim up to n of the oldest visible items into q->held. */
static int
pg_claim(struct pg_store *s, struct saker_queue *q, int n, int64_t now_ms)
{
	struct pgp p = { 0 };
	PGresult *res;

	if (s->nheld == 0 && s->open.n == 0)
		s->lease_floor = now_ms;
	pp_i64(&p, q->id);
	pp_i64(&p, now_ms);
	pp_i64(&p, now_ms + PG_SKEW_MS);
	if (q->hint_gen == s->txn_gen && s->in_txn) {
		pp_i64(&p, q->hint_vis);
		pp_i64(&p, q->hint_id);
	} else {
		pp_i64(&p, INT64_MIN);
		pp_i64(&p, 0);
	}
	pp_str(&p, s->owner);
	pp_i64(&p, s->lease_ms);
	pp_i64(&p, n);
	if ((res = pg_run(s, P_CLAIM, &p, "claiming items")) == NULL)
		return s->code;
	if (PQntuples(res) == 0) {
		PQclear(res);
		q->empty_gen = s->txn_gen;
		return SAKER_EEMPTY;
	}
	return pg_held_install(s, q, res, now_ms);
}

/* Serve the claimed rows of res (P_CLAIM's) from q->held; takes res. */
static int
pg_held_install(struct pg_store *s, struct saker_queue *q, PGresult *res,
    int64_t now_ms)
{
	int *rows, k = PQntuples(res), i, j, t;

	if (k == 0) {
		PQclear(res);
		return SAKER_EEMPTY;
	}
	if ((rows = malloc((size_t)k * sizeof(*rows))) == NULL) {
		PQclear(res);
		/* still leased to us: the sweep returns them */
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	}
	/* RETURNING has no order: sort by (vis, id), at most PG_CLAIM_MAX */
	for (i = 0; i < k; i++) {
		t = i;
		for (j = i; j > 0 && (rv_i64(res, rows[j - 1], 4) >
		    rv_i64(res, t, 4) || (rv_i64(res, rows[j - 1], 4) ==
		    rv_i64(res, t, 4) && rv_i64(res, rows[j - 1], 0) >
		    rv_i64(res, t, 0))); j--)
			rows[j] = rows[j - 1];
		rows[j] = t;
	}
	if (s->in_txn) {
		q->hint_gen = s->txn_gen;
		q->hint_vis = rv_i64(res, rows[k - 1], 4);
		q->hint_id = rv_i64(res, rows[k - 1], 0);
	}
	q->held = res;
	q->held_rows = rows;
	q->held_head = 0;
	q->held_n = k;
	q->held_used_ms = now_ms;
	s->nheld += (size_t)k;
	LIST_INSERT_HEAD(&s->holding, q, held_link);
	return SAKER_OK;
}

/* Claimed item held_rows[i] failed its checksum: move it aside and delete
 * it in the batch, and serve the others as before. */
static int
pg_held_damaged(struct pg_store *s, struct saker_queue *q, int i,
    int64_t now_ms)
{
	int row = q->held_rows[i], err;
	int64_t id = rv_i64(q->held, row, C_ID);

	if (!pg_can_move(s)) {
		(void)pg_put_damaged(s, q, NULL, 0, id, now_ms);
		return SAKER_ECORRUPT;
	}
	if ((err = pg_begin(s)) != SAKER_OK)
		return err;
	if (!pg_del_room(s))
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	/* a failed statement loses the batch, and with it q->held */
	if (pg_put_damaged(s, q, q->held, row, id, now_ms) != SAKER_OK)
		return SAKER_ECORRUPT;
	pg_del_add(s, q->id, (uint64_t)id);
	memmove(q->held_rows + q->held_head + 1, q->held_rows + q->held_head,
	    (size_t)(i - q->held_head) * sizeof(*q->held_rows));
	q->held_head++;
	s->nheld--;
	if (q->held_head == q->held_n)
		pg_held_drop(s, q);
	return SAKER_ECORRUPT;
}

/* Serve a take from the claimed items; SAKER_EEMPTY when they ran out. */
static int
pg_take_held(struct pg_store *s, struct saker_queue *q, int mode,
    int64_t now_ms, saker_item_fn fn, void *arg)
{
	struct saker_item it;
	int64_t expires;
	uint64_t id;
	bool moved;
	int row, r, err;

	while (q->held_head < q->held_n) {
		row = q->held_rows[q->held_head];
		if (!pg_row_sound(q->held, row))
			return pg_held_damaged(s, q, q->held_head, now_ms);
		id = (uint64_t)rv_i64(q->held, row, 0);
		expires = rv_i64(q->held, row, 2);
		if (!pg_del_room(s))
			return pg_errf(s, SAKER_ENOMEM, "out of memory");
		if (expires != 0 && expires <= now_ms) {
			if ((err = pg_xto_put(s, q, q->held, row, pg_item_cols,
			    now_ms, &moved)) != SAKER_OK)
				return err;
			pg_del_add(s, q->id, id);
			if (!moved) {
				pg_mark_dirty(s, q);
				q->d_expired++;
			}
			q->held_head++;
			s->nheld--;
			continue;
		}
		if (mode == SAKER_TAKE_OPEN && os_add(&s->open, id, q->id) !=
		    SAKER_OK)
			return pg_errf(s, SAKER_ENOMEM, "out of memory");
		pg_row_item(q->held, row, &it, SAKER_ITEM_READY);
		/* P_SETSTATE counts the delivery of a claimed item it opens */
		if (mode == SAKER_TAKE_OPEN &&
		    it.deliveries < SAKER_DELIVERIES_MAX)
			it.deliveries++;
		r = fn(arg, &it);
		if (r != 0) {
			/* refused: it stays first in line */
			if (mode == SAKER_TAKE_OPEN)
				(void)os_take(&s->open, id, q->id);
			return r;
		}
		if (mode == SAKER_TAKE_REMOVE) {
			pg_del_add(s, q->id, id);
		} else if ((err = pg_st_add(s, q->id, id, 1)) != SAKER_OK) {
			/* the core does not send an item whose take failed */
			(void)os_take(&s->open, id, q->id);
			return err;
		}
		q->held_head++;
		s->nheld--;
		q->held_used_ms = now_ms;
		if (q->held_head == q->held_n)
			pg_held_drop(s, q);
		return SAKER_OK;
	}
	pg_held_drop(s, q);
	return SAKER_EEMPTY;
}

/* Peek: the first unexpired claimed item, if any, is the head. */
static int
pg_peek_held(struct pg_store *s, struct saker_queue *q, int64_t now_ms,
    saker_item_fn fn, void *arg)
{
	struct saker_item it;
	int64_t expires;
	int i, row;

	for (i = q->held_head; i < q->held_n; i++) {
		row = q->held_rows[i];
		if (!pg_row_sound(q->held, row))
			return pg_held_damaged(s, q, i, now_ms);
		expires = rv_i64(q->held, row, 2);
		if (expires != 0 && expires <= now_ms)
			continue;
		pg_row_item(q->held, row, &it, SAKER_ITEM_READY);
		return fn(arg, &it);
	}
	return SAKER_EEMPTY;
}

static int
pg_take(saker_store *base, saker_queue *q, int mode, int64_t now_ms,
    saker_item_fn fn, void *arg)
{
	struct pg_store *s = PG(base);
	int err, n;

	if ((err = pg_dead(s, q)) != SAKER_OK)
		return err;
	if (mode != SAKER_TAKE_REMOVE && mode != SAKER_TAKE_OPEN &&
	    mode != SAKER_TAKE_PEEK)
		return pg_errf(s, SAKER_EINVAL, "bad take mode");
	if (mode != SAKER_TAKE_PEEK && (err = pg_begin(s)) != SAKER_OK)
		return err;
	pg_saw(s, now_ms);
	if (mode == SAKER_TAKE_PEEK) {
		if (q->held != NULL &&
		    (err = pg_peek_held(s, q, now_ms, fn, arg)) != SAKER_EEMPTY)
			return err;
		return pg_take_one(s, q, mode, now_ms, fn, arg);
	}
	n = pg_claim_size(s, q);
	if (!q->took) {
		LIST_INSERT_HEAD(&s->took, q, took_link);
		q->took = true;
	}
	if (q->empty_gen == s->txn_gen && q->held == NULL)
		return SAKER_EEMPTY;
	for (;;) {
		if (q->held != NULL && !pg_lease_ok(s, now_ms) &&
		    (err = pg_held_return(s, q)) != SAKER_OK)
			return err;
		if (q->held != NULL) {
			err = pg_take_held(s, q, mode, now_ms, fn, arg);
			if (err != SAKER_EEMPTY)
				return err;
			continue;
		}
		if (n <= 1)
			return pg_take_one(s, q, mode, now_ms, fn, arg);
		if ((err = pg_claim(s, q, n, now_ms)) != SAKER_OK)
			return err;
	}
}

/* Whether id has a state change waiting in the batch's arrays. */
static bool
os_has(const struct pg_oset *o, uint64_t id)
{
	size_t i;

	if (o->cap == 0 || id == 0)
		return false;
	for (i = os_slot(id, o->cap); o->ids[i] != 0; i = (i + 1) & (o->cap - 1))
		if (o->ids[i] == id)
			return true;
	return false;
}

/* Run a statement on open item `id` that changes its row only while this
 * broker holds its lease: SAKER_ELOCKED when it changed nothing.  `after`
 * ends the message (what became of the item). */
static int
pg_run_leased(struct pg_store *s, int which, const struct pgp *p,
    const char *what, uint64_t id, const char *after)
{
	PGresult *res;
	uint64_t n;

	if ((res = pg_run(s, which, p, what)) == NULL)
		return s->code;
	n = rv_changed(res);
	PQclear(res);
	if (n == 0)
		return pg_errf(s, SAKER_ELOCKED, "open item %" PRIu64 " is no"
		    " longer leased to this broker (the lease expired and the"
		    " item went back to the queue%s)", id, after);
	return SAKER_OK;
}

static int
pg_confirm(saker_store *base, saker_queue *q, uint64_t id)
{
	struct pg_store *s = PG(base);
	struct pgp p = { 0 };
	int err;

	if ((err = pg_dead(s, q)) != SAKER_OK)
		return err;
	if (id == 0 || id > (uint64_t)INT64_MAX)
		return pg_errf(s, SAKER_ENOTFOUND, "no such open item");
	if ((err = pg_begin(s)) != SAKER_OK)
		return err;
	if (!pg_del_room(s))
		return pg_errf(s, SAKER_ENOMEM, "out of memory");
	/* the set mirrors the database's leases owned by this process */
	if (!os_take(&s->open, id, q->id))
		return pg_errf(s, SAKER_ENOTFOUND, "no such open item");
	/* While the lease is surely ours the delete joins the batch's
	 * statement; otherwise ask now whether it still is. */
	if (pg_lease_ok(s, s->last_now)) {
		pg_del_add(s, q->id, id);
		return SAKER_OK;
	}
	pp_i64(&p, q->id);
	pp_i64(&p, (int64_t)id);
	pp_str(&p, s->owner);
	return pg_run_leased(s, P_CONFIRM, &p, "confirming item", id,
	    "; it may be delivered again");
}

static int
pg_release_id(struct pg_store *s, struct saker_queue *q, uint64_t id)
{
	int err;

	if (!os_take(&s->open, id, q->id))
		return pg_errf(s, SAKER_ENOTFOUND, "no such open item");
	/* the released item goes before the claimed ones: all of them go
	 * back to the database's FIFO in their places */
	if ((err = pg_held_return(s, q)) != SAKER_OK ||
	    (os_has(&s->st_ids, id) && (err = pg_flush(s)) != SAKER_OK) ||
	    (err = pg_st_add(s, q->id, id, 0)) != SAKER_OK) {
		/* still open, unless the batch was lost (the set was reloaded
		 * from the database then) */
		if (!s->lost)
			(void)os_add(&s->open, id, q->id);
		return err;
	}
	pg_gained(s, q);
	return SAKER_OK;
}

static int
pg_release(saker_store *base, saker_queue *q, uint64_t id)
{
	struct pg_store *s = PG(base);
	int err;

	if ((err = pg_dead(s, q)) != SAKER_OK)
		return err;
	if (id == 0 || id > (uint64_t)INT64_MAX)
		return pg_errf(s, SAKER_ENOTFOUND, "no such open item");
	if ((err = pg_begin(s)) != SAKER_OK)
		return err;
	return pg_release_id(s, q, id);
}

/* Take open item id of q out of this process's set, for a statement of
 * its own: a state change of it still in the batch's arrays goes first.
 * On failure it is still open (unless the batch was lost). */
static int
pg_open_take(struct pg_store *s, struct saker_queue *q, uint64_t id)
{
	int err;

	if (!os_take(&s->open, id, q->id))
		return pg_errf(s, SAKER_ENOTFOUND, "no such open item");
	if (os_has(&s->st_ids, id) && (err = pg_flush(s)) != SAKER_OK) {
		if (!s->lost)
			(void)os_add(&s->open, id, q->id);
		return err;
	}
	return SAKER_OK;
}

static int
pg_release_delayed(saker_store *base, saker_queue *q, uint64_t id,
    int64_t due_ms, int64_t now_ms)
{
	struct pg_store *s = PG(base);
	struct pgp p = { 0 };
	int err;

	if (due_ms <= now_ms)
		return pg_release(base, q, id);
	if ((err = pg_dead(s, q)) != SAKER_OK)
		return err;
	if (id == 0 || id > (uint64_t)INT64_MAX)
		return pg_errf(s, SAKER_ENOTFOUND, "no such open item");
	if ((err = pg_begin(s)) != SAKER_OK)
		return err;
	if ((err = pg_open_take(s, q, id)) != SAKER_OK)
		return err;
	pp_i64(&p, q->id);
	pp_i64(&p, (int64_t)id);
	pp_str(&p, s->owner);
	pp_i64(&p, due_ms);
	return pg_run_leased(s, P_DELAY, &p, "delaying item", id, "");
}

static int
pg_move(saker_store *base, saker_queue *q, uint64_t id, saker_queue *to)
{
	struct pg_store *s = PG(base);
	struct pgp p = { 0 };
	int64_t vis;
	int err;

	if ((err = pg_dead(s, q)) != SAKER_OK || (err = pg_dead(s, to)) !=
	    SAKER_OK)
		return err;
	if (to == q)
		return pg_errf(s, SAKER_EINVAL, "move: same queue");
	if (id == 0 || id > (uint64_t)INT64_MAX)
		return pg_errf(s, SAKER_ENOTFOUND, "no such open item");
	if ((err = pg_begin(s)) != SAKER_OK)
		return err;
	if ((err = pg_open_take(s, q, id)) != SAKER_OK)
		return err;
	vis = s->last_now > s->last_vis ? s->last_now : s->last_vis;
	s->last_vis = vis;
	pp_i64(&p, q->id);
	pp_i64(&p, (int64_t)id);
	pp_str(&p, s->owner);
	pp_i64(&p, to->id);
	pp_i64(&p, vis);
	if ((err = pg_run_leased(s, P_MOVE, &p, "moving item", id, "")) !=
	    SAKER_OK)
		return err;
	pg_mark_dirty(s, to);
	to->d_total++;
	pg_gained(s, to);
	if (to->hint_gen == s->txn_gen && vis <= to->hint_vis)
		pg_unhint(to);
	return SAKER_OK;
}

static int
pg_promote(saker_store *base, int64_t now_ms, int64_t *next_due_ms)
{
	struct pg_store *s = PG(base);
	struct saker_queue *q;
	struct pg_pipe pp;
	struct pgp p = { 0 }, pn = { 0 };
	PGresult *res;
	int64_t qid;
	int err, i, prom = -1;

	*next_due_ms = 0;
	pg_saw(s, now_ms);
	if (s->conn == NULL)
		return SAKER_OK;	/* tick() promotes after the reconnect */
	pipe_init(&pp);
	/* one round trip: pending writes, promotion, next due time */
	if (!s->read_only && !s->lost && now_ms > s->promoted_to) {
		if ((err = pg_begin(s)) != SAKER_OK)
			return err;
		pg_send_pending(s, &pp);
		pp_i64(&p, s->promoted_to);
		pp_i64(&p, now_ms);
		prom = pp.n;
		pipe_send(s, &pp, P_PROMOTE, NULL, &p, "promoting");
	} else {
		pg_send_pending(s, &pp);
	}
	pp_i64(&pn, now_ms);
	pipe_send(s, &pp, P_NEXT, NULL, &pn, "finding next due item");
	if (!pipe_wait(s, &pp))
		return pipe_fail(s, &pp);
	pg_pending_done(s, &pp);
	if (PQntuples(pp.res[pp.n - 1]) > 0)
		*next_due_ms = rv_i64(pp.res[pp.n - 1], 0, 0);
	if (prom < 0) {
		pipe_clear(&pp);
		return SAKER_OK;
	}
	s->promoted_to = now_ms;
	res = pp.res[prom];
	for (i = 0; i < PQntuples(res); i++) {
		qid = rv_i64(res, i, 0);
		q = pg_find_id(s, qid);
		if (rv_i64(res, i, 1) == 0) {
			if (q != NULL)
				pg_gained(s, q);
			continue;
		}
		if (q != NULL) {
			static const int cols[4] = { 2, 3, 4, 5 };
			bool moved = false;

			if (saker_store_has_expire_to(q) &&
			    (err = pg_xto_put(s, q, res, i, cols, now_ms,
			    &moved)) != SAKER_OK) {
				pipe_clear(&pp);
				return err;
			}
			if (!moved) {
				pg_mark_dirty(s, q);
				q->d_expired++;
			}
			continue;
		}
		/* a queue this broker never opened */
		{
			struct pgp c = { 0 };
			PGresult *cr;

			pp_i64(&c, qid);
			pp_str(&c, s->owner);
			pp_i64(&c, 0);
			pp_i64(&c, 1);
			if ((cr = pg_run(s, P_C_ADD, &c, "writing counters")) ==
			    NULL) {
				pipe_clear(&pp);
				return s->code;
			}
			PQclear(cr);
		}
	}
	pipe_clear(&pp);
	return SAKER_OK;
}

static int
pg_flush_expired(saker_store *base, saker_queue *q, int64_t now_ms,
    uint64_t limit, uint64_t *removed)
{
	struct pg_store *s = PG(base);
	struct pgp p = { 0 };
	PGresult *res;
	int err;

	*removed = 0;
	if ((err = pg_dead(s, q)) != SAKER_OK || (err = pg_begin(s)) != SAKER_OK)
		return err;
	pg_saw(s, now_ms);
	pp_i64(&p, q->id);
	pp_i64(&p, now_ms);
	pp_i64(&p, limit == 0 || limit > INT64_MAX ? INT64_MAX : (int64_t)limit);
	if (saker_store_has_expire_to(q) && s->version >= 4) {
		static const int cols[4] = { 0, 1, 2, 3 };
		uint64_t dropped = 0;
		bool moved;
		int i;

		if ((res = pg_run(s, P_EXPIRE_GET, &p, "moving expired items")) ==
		    NULL)
			return s->code;
		for (i = 0; i < PQntuples(res); i++) {
			if ((err = pg_xto_put(s, q, res, i, cols, now_ms, &moved)) !=
			    SAKER_OK) {
				PQclear(res);
				return err;
			}
			if (!moved)
				dropped++;
		}
		*removed = (uint64_t)PQntuples(res);
		PQclear(res);
		if (dropped > 0) {
			pg_mark_dirty(s, q);
			q->d_expired += (int64_t)dropped;
		}
		return SAKER_OK;
	}
	if ((res = pg_run(s, P_EXPIRE, &p, "dropping expired items")) == NULL)
		return s->code;
	*removed = rv_changed(res);
	PQclear(res);
	if (*removed > 0) {
		pg_mark_dirty(s, q);
		q->d_expired += (int64_t)*removed;
	}
	return SAKER_OK;
}

/* Stream one listing to fn, a row at a time (queues can be large). */
static int
pg_iter_rows(struct pg_store *s, int which, struct saker_queue *q,
    saker_item_state state, saker_item_fn fn, void *arg)
{
	struct saker_item it;
	struct pgp p = { 0 };
	PGresult *res;
	ExecStatusType st;
	char name[16];
	int r = 0, err = SAKER_OK;

	if (s->conn == NULL)
		return pg_down(s);
	if ((err = pg_flush(s)) != SAKER_OK)
		return err;
	pp_i64(&p, q->id);
	pp_i64(&p, s->last_now);
	snprintf(name, sizeof(name), "s%d", which);
	if (!PQsendQueryPrepared(s->conn, name, which == P_IT_OPEN ? 1 : 2,
	    p.v, p.l, p.f, 1))
		return pg_fail(s, NULL, "reading items");
	(void)PQsetSingleRowMode(s->conn);
	pg_deadline(s);
	for (;;) {
		if (!pg_next(s, &res)) {
			/* no answer in time: the connection is dropped */
			if (err == SAKER_OK)
				err = pg_fail(s, NULL, "reading items");
			break;
		}
		if (res == NULL)
			break;
		st = PQresultStatus(res);
		if (st == PGRES_SINGLE_TUPLE) {
			if (r == 0 && !pg_row_sound(res, 0)) {
				/* never handed out; the rest is drained */
				r = pg_errf(s, SAKER_ECORRUPT, "queue '%.*s': item %"
				    PRId64 " failed its checksum", (int)q->len,
				    q->name, rv_i64(res, 0, C_ID));
			} else if (r == 0) {
				pg_row_item(res, 0, &it, state);
				r = fn(arg, &it);
			}
		} else if (st != PGRES_TUPLES_OK && err == SAKER_OK) {
			/* keep the result for the message; drain the rest */
			bool txn = s->in_txn;

			s->in_txn = false;
			err = pg_fail(s, res, "reading items");
			s->in_txn = txn;
		}
		PQclear(res);
		if (s->conn == NULL)
			break;
		pg_deadline(s);	/* a long listing: per row */
	}
	/* libpq keeps single-row mode on until the next query that is not
	 * pipelined: the first statement of the next pipeline would get its
	 * rows one by one (and be taken for a failure).  An empty query
	 * ends it. */
	if (s->conn != NULL && PQstatus(s->conn) == CONNECTION_OK)
		PQclear(pg_exec(s, ""));
	if (err != SAKER_OK && s->in_txn)
		pg_lose_batch(s, err);
	if (err != SAKER_OK)
		return err;
	return r;
}

static int
pg_iterate(saker_store *base, saker_queue *q, saker_item_fn fn, void *arg)
{
	struct pg_store *s = PG(base);
	int r;

	if ((r = pg_dead(s, q)) != SAKER_OK)
		return r;
	if ((r = pg_iter_rows(s, P_IT_OPEN, q, SAKER_ITEM_OPEN, fn, arg)) != 0)
		return r;
	if ((r = pg_iter_rows(s, P_IT_READY, q, SAKER_ITEM_READY, fn, arg)) != 0)
		return r;
	return pg_iter_rows(s, P_IT_DELAYED, q, SAKER_ITEM_DELAYED, fn, arg);
}

/* ------------------------------------------------------------------ */
/* the shared-store hooks */

static int
pg_watch_fd(saker_store *base)
{
	struct pg_store *s = PG(base);

	/* one descriptor for all of them, so it never changes */
	return s->efd;
}

/*
 * The broker's own VACUUM of saker_items, on a connection of its own so
 * neither the event loop nor the notifications wait for it (a session
 * running a command receives no NOTIFY until it is done).  Every take
 * leaves a dead row (and a dead index entry at the head of its queue)
 * that each later take steps over until a vacuum removes it; autovacuum
 * looks only once a minute (autovacuum_naptime), and by then a busy
 * queue's takes had slowed to half (docs/scaling.md, "Vacuum and
 * bloat").  Driven by the once-a-second tick: the outcome of a VACUUM is
 * read without blocking, and a new one is sent vacuum_ms after the last
 * ended, when this broker committed something since.  SKIP_LOCKED: a
 * VACUUM another broker runs meanwhile is enough.
 */
static void
pg_vacuum_drop(struct pg_store *s, int64_t now_ms)
{
	pg_link_drop(s, &s->links[PG_L_VACUUM], true);
	s->vacuuming = false;
	s->vacuum_at = now_ms + PG_VACUUM_RETRY_MS;	/* connect again then */
}

static int
pg_vacuum_tick(struct pg_store *s, int64_t now_ms)
{
	struct pg_link *l = &s->links[PG_L_VACUUM];
	PGresult *res;
	char line[300] = "", sql[128];
	int r;

	if (s->vacuuming) {
		if (!PQconsumeInput(l->c) || PQflush(l->c) < 0) {
			pg_vacuum_drop(s, now_ms);
			return SAKER_OK;	/* the main connection will tell */
		}
		while (!PQisBusy(l->c)) {
			if ((res = PQgetResult(l->c)) == NULL) {
				s->vacuuming = false;
				s->vacuum_at = now_ms + s->vacuum_ms;
				break;
			}
			if (PQresultStatus(res) != PGRES_COMMAND_OK)
				pg_oneline(line, sizeof(line),
				    PQresultErrorMessage(res));
			PQclear(res);
		}
		if (line[0] != '\0') {
			s->vacuum_ms = 0;
			pg_vacuum_drop(s, now_ms);
			return pg_errf(s, SAKER_EIO, "postgres: VACUUM saker_items"
			    " failed, left to autovacuum from now on: %s", line);
		}
		if (s->vacuuming)
			return SAKER_OK;
	}
	if (l->c == NULL && (s->vacuum_ms == 0 || s->conn == NULL ||
	    s->commits == s->vacuum_commits || now_ms < s->vacuum_at))
		return SAKER_OK;
	/* connected without waiting, like the others (pg_links()) */
	if (l->c == NULL && pg_link_start(s, l, s->wait_ns) != SAKER_OK) {
		pg_vacuum_drop(s, now_ms);
		return SAKER_OK;	/* the main connection will tell */
	}
	if (!l->up) {
		if ((r = pg_link_step(s, l)) < 0)
			pg_vacuum_drop(s, now_ms);
		if (r <= 0)
			return SAKER_OK;
		l->up = true;
	}
	if (s->vacuum_ms == 0 || s->commits == s->vacuum_commits ||
	    now_ms < s->vacuum_at)
		return SAKER_OK;
	/* this session has no search_path of ours: the schema is named
	 * (it was checked to need no quoting beyond this) */
	snprintf(sql, sizeof(sql), "VACUUM %s%s%s%ssaker_items",
	    PQserverVersion(l->c) >= 120000 ? "(SKIP_LOCKED) " : "",
	    s->schema != NULL ? "\"" : "", s->schema != NULL ? s->schema : "",
	    s->schema != NULL ? "\"." : "");
	if (!PQsendQuery(l->c, sql)) {
		pg_vacuum_drop(s, now_ms);
		return SAKER_OK;
	}
	(void)PQflush(l->c);
	s->vacuuming = true;
	s->vacuum_commits = s->commits;
	return SAKER_OK;
}

static int
pg_fd_ready(saker_store *base, int64_t now_ms)
{
	struct pg_store *s = PG(base);

	if (s->read_only)
		return SAKER_OK;
	return pg_links(s, now_ms);
}

static int
pg_tick(saker_store *base, int64_t now_ms)
{
	struct pg_store *s = PG(base);
	struct saker_queue *q, *next;
	struct pgp p;
	PGresult *res;
	int i, err, r;

	if (s->read_only)
		return SAKER_OK;
	err = pg_links(s, now_ms);
	if (s->conn == NULL) {
		struct pg_link *l = &s->links[PG_L_MAIN];

		/* reconnect without waiting: the socket is watched, and
		 * fd_ready() or the next tick goes on */
		if (l->c != NULL || now_ms < s->retry_at)
			return err;
		s->attempt_at = now_ms;
		r = pg_link_start(s, l, s->wait_ns);
		if (r == SAKER_OK && (r = pg_link_step(s, l)) > 0)
			r = pg_main_up(s) == SAKER_OK ? 1 : -1;
		if (r < 0 && (r = pg_attempt_failed(s, now_ms)) != SAKER_OK)
			return r;
		return err;
	}
	if (err != SAKER_OK)
		return err;
	if (s->lost)
		return SAKER_OK;
	/* claimed items nobody took for a while go back to the queue */
	for (q = LIST_FIRST(&s->holding); q != NULL; q = next) {
		next = LIST_NEXT(q, held_link);
		if (now_ms - q->held_used_ms >= PG_HELD_IDLE_MS &&
		    ((err = pg_begin(s)) != SAKER_OK ||
		    (err = pg_held_return(s, q)) != SAKER_OK))
			return err;
	}
	/* renew our leases well before they run out */
	if ((s->open.n > 0 || s->nheld > 0) &&
	    now_ms - s->renewed_at >= s->lease_ms / 4) {
		if ((err = pg_begin(s)) != SAKER_OK)
			return err;
		memset(&p, 0, sizeof(p));
		pp_str(&p, s->owner);
		pp_i64(&p, s->lease_ms);
		if ((res = pg_run(s, P_RENEW, &p, "renewing leases")) == NULL)
			return s->code;
		PQclear(res);
		s->renewed_at = now_ms;
		/* counts once the batch commits */
		s->renew_at = now_ms;
	}
	/* return the leases of brokers that died */
	if ((err = pg_begin(s)) != SAKER_OK)
		return err;
	if ((res = pg_run(s, P_SWEEP, NULL, "returning expired leases")) == NULL)
		return s->code;
	for (i = 0; i < PQntuples(res); i++) {
		q = pg_find_id(s, rv_i64(res, i, 0));
		if (q != NULL)
			pg_gained(s, q);
	}
	PQclear(res);
	/* last: its failure (a warning) must not skip the work above */
	return pg_vacuum_tick(s, now_ms);
}

/* ------------------------------------------------------------------ */
/* store */

static const char *
pg_errmsg(saker_store *base)
{
	struct pg_store *s = PG(base);

	return s->err[0] != '\0' ? s->err : "no error";
}

static void
pg_store_stats(saker_store *base, struct saker_store_stats *st)
{
	struct pg_store *s = PG(base);
	PGresult *res;

	memset(st, 0, sizeof(*st));
	st->commits = s->commits;
	st->fsyncs = s->fsyncs;
	st->commit_ns = s->commit_ns;
	st->server = !s->read_only;
	st->connected = s->conn != NULL;
	st->reconnects = s->reconnects;
	st->in_doubt = s->in_doubt;
	st->last_commit_ms = s->last_commit_ms;
	if (s->conn == NULL)
		pg_oneline(st->down_why, sizeof(st->down_why),
		    s->down_why[0] != '\0' ? s->down_why : "connecting");
	if (s->conn == NULL || s->lost)
		return;
	if ((res = pg_run(s, P_SIZE, NULL, "reading the size")) == NULL)
		return;
	if (PQntuples(res) > 0)
		st->disk_bytes = (uint64_t)rv_i64(res, 0, 0);
	PQclear(res);
}

static void
pg_free(struct pg_store *s)
{
	struct saker_queue *q;
	struct kit_qent *e, *next;
	size_t i;
	int k;

	for (k = 0; k < PG_L_N; k++)
		pg_link_drop(s, &s->links[k], false);
	if (s->efd >= 0)
		close(s->efd);
	pg_held_drop_all(s);
	arr_free(&s->put_name);
	arr_free(&s->put_vis);
	arr_free(&s->put_due);
	arr_free(&s->put_flags);
	arr_free(&s->put_exp);
	arr_free(&s->put_created);
	arr_free(&s->put_data);
	arr_free(&s->put_crc);
	arr_free(&s->put_dlv);
	arr_free(&s->st_qid);
	arr_free(&s->st_id);
	arr_free(&s->st_st);
	arr_free(&s->del_qid);
	arr_free(&s->del_id);
	free(s->st_ids.ids);
	free(s->st_ids.qids);
	i = 0;
	for (e = kit_qtab_next(&s->qt, &i, NULL); e != NULL; e = next) {
		next = kit_qtab_next(&s->qt, &i, e);
		pg_queue_free(PG_Q(e));
	}
	while ((q = LIST_FIRST(&s->deleted)) != NULL) {
		LIST_REMOVE(q, gone_link);
		pg_queue_free(q);
	}
	while ((q = LIST_FIRST(&s->zombies)) != NULL) {
		LIST_REMOVE(q, gone_link);
		pg_queue_free(q);
	}
	kit_qtab_free(&s->qt);
	free(s->open.ids);
	free(s->open.qids);
	free(s->conninfo);
	if (s->copts != NULL)
		PQconninfoFree(s->copts);
	free(s->schema);
	free(s->chan);
	free(s);
}

static void
pg_close(saker_store *base)
{
	struct pg_store *s = PG(base);
	struct saker_queue *q;
	struct pgp p = { 0 };
	PGresult *res;
	int i;

	if (s == NULL)
		return;
	if (!s->read_only && s->conn != NULL) {
		(void)pg_commit(base);
		/* A clean stop hands our open items back at once; only a
		 * broker that dies leaves them to the lease sweep. */
		pp_str(&p, s->owner);
		if (pg_begin(s) == SAKER_OK &&
		    (res = pg_run(s, P_RELEASE_ALL, &p, "returning open items")) !=
		    NULL) {
			for (i = 0; i < PQntuples(res); i++)
				if ((q = pg_find_id(s, rv_i64(res, i, 0))) != NULL &&
				    !q->pend) {
					LIST_INSERT_HEAD(&s->pend, q, pend_link);
					q->pend = true;
				}
			PQclear(res);
			(void)pg_commit(base);
		}
	}
	if (s->in_txn && s->conn != NULL)
		PQclear(pg_exec(s, "ROLLBACK"));
	pg_free(s);
}

/* ---- the location: a libpq connection string plus our own keys ---- */

/* Driver options (store.h, DRIVER OPTIONS): "postgres,schema=q,lease=30:
 * host=db dbname=saker".  The same keys inside the connection string
 * (1.0's form) still work; the options win when both are given. */
enum { PG_OPT_SCHEMA, PG_OPT_LEASE, PG_OPT_VACUUM, PG_OPT_TIMEOUT,
    PG_OPT_PROBE };
static const struct saker_store_option pg_options[] = {
	[PG_OPT_SCHEMA] = { "schema", SAKER_OPT_STRING, 0, 0,
	    "schema to keep the tables in: 1-50 of a-z, 0-9, _" },
	[PG_OPT_LEASE] = { "lease", SAKER_OPT_SECONDS, 100, 86400000,
	    "how long before another broker may take over this broker's open"
	    " items: a duration (30, 1.5s, 2m; bare: seconds), 0.1s to 24h" },
	[PG_OPT_VACUUM] = { "vacuum", SAKER_OPT_SECONDS, 0, 3600000,
	    "time between this broker's own VACUUMs of its item table"
	    " while it writes (bare: seconds; default 1s, at most 1h); 0:"
	    " leave it to autovacuum" },
	[PG_OPT_TIMEOUT] = { "timeout", SAKER_OPT_SECONDS, 100, 3600000,
	    "how long the broker waits for a sign of life from the database"
	    " (in a round trip, or connecting) before it drops the connection"
	    " and reconnects (bare: seconds), 0.1s to 1h (default 2s)" },
	[PG_OPT_PROBE] = { "probe", SAKER_OPT_SECONDS, 0, 3600000,
	    "how long an empty query on the notification connection may take"
	    " while a statement is silent, before the database counts as"
	    " unreachable (bare: seconds; default 250ms, at most 1h; 0:"
	    " timeout= alone)" },
	{ NULL, SAKER_OPT_STRING, 0, 0, NULL }
};

static int
pg_set_opt(struct pg_store *s, const char *key, const char *val, char *err,
    size_t errlen)
{
	int64_t ms;
	size_t i;

	if (strcmp(key, "schema") == 0) {
		for (i = 0; val[i] != '\0'; i++)
			if (!((val[i] >= 'a' && val[i] <= 'z') || val[i] == '_' ||
			    (val[i] >= '0' && val[i] <= '9' && i > 0)))
				break;
		if (i == 0 || i > 50 || val[i] != '\0') {
			snprintf(err, errlen, "postgres: schema must be 1-50"
			    " lower-case letters, digits or '_': %s", val);
			return SAKER_EINVAL;
		}
		free(s->schema);
		if ((s->schema = strdup(val)) == NULL)
			return SAKER_ENOMEM;
		return SAKER_OK;
	}
	/* lease=DURATION, in the connection string (1.0's form): the same
	 * grammar and bounds as the lease= driver option */
	if (parse_duration(val, DURATION_BARE_S, 86400000, &ms) != 0 ||
	    ms < 100) {
		snprintf(err, errlen, "postgres: lease must be a duration from"
		    " 0.1 to 86400 seconds (e.g. 30, 1.5s, 2m): %s", val);
		return SAKER_EINVAL;
	}
	s->lease_ms = ms;
	return SAKER_OK;
}

static int
pg_channel_opts(struct pg_store *s, const struct saker_store_opts *opts,
    char *err, size_t errlen)
{
	const struct saker_store_optval *v;
	int e;

	if ((v = saker_store_optval(opts, PG_OPT_SCHEMA)) != NULL &&
	    (e = pg_set_opt(s, "schema", v->s, err, errlen)) != SAKER_OK)
		return e;
	if ((v = saker_store_optval(opts, PG_OPT_LEASE)) != NULL)
		s->lease_ms = (int64_t)v->u;
	if ((v = saker_store_optval(opts, PG_OPT_VACUUM)) != NULL)
		s->vacuum_ms = (int64_t)v->u;
	if ((v = saker_store_optval(opts, PG_OPT_TIMEOUT)) != NULL)
		s->timeout_ms = (int64_t)v->u;
	if ((v = saker_store_optval(opts, PG_OPT_PROBE)) != NULL)
		s->probe_ms = (int64_t)v->u;
	return SAKER_OK;
}

static bool
pg_our_key(const char *k, size_t n)
{
	return (n == 6 && memcmp(k, "schema", 6) == 0) ||
	    (n == 5 && memcmp(k, "lease", 5) == 0);
}

/*
 * Split `loc` into the connection string passed to libpq and the keys
 * this driver reads itself (schema=, lease=).  Keyword form: values may
 * be single-quoted with backslash escapes, as libpq parses them.  URI
 * form: our keys are query parameters.
 */
static int
pg_parse_location(struct pg_store *s, const char *loc, char *err,
    size_t errlen)
{
	size_t len = strlen(loc), o = 0;
	bool uri = strncmp(loc, "postgres://", 11) == 0 ||
	    strncmp(loc, "postgresql://", 13) == 0;
	char *out, *val;
	const char *p = loc, *k, *ts;
	size_t kn, vn;
	int rc;

	if ((out = malloc(len + 64)) == NULL || (val = malloc(len + 1)) == NULL) {
		free(out);
		snprintf(err, errlen, "out of memory");
		return SAKER_ENOMEM;
	}
	if (uri) {
		const char *q = strchr(loc, '?');
		bool first = true;

		memcpy(out, loc, q != NULL ? (size_t)(q - loc) : len);
		o = q != NULL ? (size_t)(q - loc) : len;
		p = q != NULL ? q + 1 : loc + len;
		while (*p != '\0') {
			k = p;
			ts = p + strcspn(p, "&");
			kn = strcspn(k, "=&");
			if (pg_our_key(k, kn) && k[kn] == '=') {
				vn = (size_t)(ts - (k + kn + 1));
				memcpy(val, k + kn + 1, vn);
				val[vn] = '\0';
				if ((rc = pg_set_opt(s, kn == 6 ? "schema" :
				    "lease", val, err, errlen)) != SAKER_OK)
					goto fail;
			} else if (ts > k) {
				out[o++] = first ? '?' : '&';
				memcpy(out + o, k, (size_t)(ts - k));
				o += (size_t)(ts - k);
				first = false;
			}
			p = *ts != '\0' ? ts + 1 : ts;
		}
		out[o] = '\0';
		goto done;
	}
	while (*p != '\0') {
		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (*p == '\0')
			break;
		ts = p;
		k = p;
		while (*p != '\0' && *p != '=' && *p != ' ' && *p != '\t')
			p++;
		kn = (size_t)(p - k);
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p != '=') {
			snprintf(err, errlen, "postgres: bad connection string"
			    " near '%.*s' (expected key=value)", (int)kn, k);
			rc = SAKER_EINVAL;
			goto fail;
		}
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		vn = 0;
		if (*p == '\'') {
			for (p++; *p != '\0' && *p != '\''; p++) {
				if (*p == '\\' && p[1] != '\0')
					p++;
				val[vn++] = *p;
			}
			if (*p != '\'') {
				snprintf(err, errlen, "postgres: unterminated"
				    " quote in connection string");
				rc = SAKER_EINVAL;
				goto fail;
			}
			p++;
		} else {
			for (; *p != '\0' && *p != ' ' && *p != '\t' &&
			    *p != '\n'; p++) {
				if (*p == '\\' && p[1] != '\0')
					p++;
				val[vn++] = *p;
			}
		}
		val[vn] = '\0';
		if (pg_our_key(k, kn)) {
			if ((rc = pg_set_opt(s, kn == 6 ? "schema" : "lease", val,
			    err, errlen)) != SAKER_OK)
				goto fail;
			continue;
		}
		if (o > 0)
			out[o++] = ' ';
		memcpy(out + o, ts, (size_t)(p - ts));
		o += (size_t)(p - ts);
	}
	out[o] = '\0';
done:
	free(val);
	s->conninfo = out;
	return SAKER_OK;
fail:
	free(val);
	free(out);
	return rc;
}

/* ---- schema ---- */

static int
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
	if (version == 1 && !s->read_only) {
		/* format 1 had no claimed items; its brokers must not share a
		 * store with this one, hence the version bump */
		if ((err = pg_simple(s, "DROP INDEX saker_items_lease;"
		    " CREATE INDEX saker_items_lease ON saker_items (lease_until)"
		    " WHERE state > 0; UPDATE saker_meta SET value = 2"
		    " WHERE key = 'format'", "upgrading the format")) != SAKER_OK)
			goto out;
		version = 2;
	}
	if (version == 2 && !s->read_only) {
		/* format 3: items carry a checksum.  Adding a nullable column
		 * rewrites no rows; old rows keep NULL and are not checked.
		 * Under the schema lock, so brokers starting together do it
		 * once; committed durably whatever the sync mode.  Brokers
		 * of the previous release refuse the store from now on. */
		if ((err = pg_simple(s, "SET LOCAL synchronous_commit = on;"
		    " ALTER TABLE saker_items ADD COLUMN IF NOT EXISTS crc bigint;"
		    " UPDATE saker_meta SET value = 3 WHERE key = 'format'",
		    "upgrading the format")) != SAKER_OK)
			goto out;
		version = 3;
	}
	if (version == 3 && !s->read_only) {
		/* format 4: delivery counts.  A constant default adds the
		 * column without rewriting rows (PostgreSQL 11 and later). */
		if ((err = pg_simple(s, "SET LOCAL synchronous_commit = on;"
		    " ALTER TABLE saker_items ADD COLUMN IF NOT EXISTS"
		    " deliveries bigint NOT NULL DEFAULT 0;"
		    " UPDATE saker_meta SET value = 4 WHERE key = 'format'",
		    "upgrading the format")) != SAKER_OK)
			goto out;
		version = 4;
	}
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

static void
pg_make_owner(struct pg_store *s)
{
	char host[64] = "localhost";
	uint64_t r = 0;
	int fd;

	(void)gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		r = saker_mono_ns() ^ ((uint64_t)getpid() << 32);
	if (fd >= 0)
		close(fd);
	snprintf(s->owner, sizeof(s->owner), "%s/%d/%016" PRIx64, host,
	    (int)getpid(), r);
}

static int
pg_open(const char *location, const struct saker_store_opts *opts,
    saker_store **out, char *err, size_t errlen)
{
	struct pg_store *s;
	PGresult *res;
	int e;

	*out = NULL;
	if (location == NULL || location[0] == '\0') {
		snprintf(err, errlen, "postgres store needs a connection string"
		    " (postgres:'host=... dbname=...')");
		return SAKER_EINVAL;
	}
	if (opts->max_item > PG_MAX_ITEM) {
		snprintf(err, errlen, "postgres holds items up to %llu bytes (a "
		    "bytea value is at most 1 GB); lower --max-item-size",
		    (unsigned long long)PG_MAX_ITEM);
		return SAKER_EINVAL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return SAKER_ENOMEM;
	}
	s->base.driver = &saker_store_postgres;
	s->sync = opts->sync;
	s->read_only = opts->read_only;
	s->notify = opts->notify;
	s->notify_arg = opts->notify_arg;
	s->lease_ms = PG_LEASE_MS;
	s->vacuum_ms = PG_VACUUM_MS;
	s->timeout_ms = PG_TIMEOUT_MS;
	s->probe_ms = PG_PROBE_MS;
	s->efd = -1;
	for (e = 0; e < PG_L_N; e++)
		s->links[e].regfd = -1;
	LIST_INIT(&s->dirty);
	LIST_INIT(&s->pend);
	LIST_INIT(&s->deleted);
	LIST_INIT(&s->zombies);
	LIST_INIT(&s->holding);
	LIST_INIT(&s->took);
	s->put_name.oid = s->put_data.oid = OID_BYTEA;
	s->put_vis.oid = s->put_due.oid = s->put_flags.oid = OID_INT8;
	s->put_exp.oid = s->put_created.oid = s->put_crc.oid = OID_INT8;
	s->put_dlv.oid = OID_INT8;
	s->st_qid.oid = s->st_id.oid = s->st_st.oid = OID_INT8;
	s->del_qid.oid = s->del_id.oid = OID_INT8;
	if ((e = pg_parse_location(s, location, err, errlen)) != SAKER_OK ||
	    (e = pg_channel_opts(s, opts, err, errlen)) != SAKER_OK) {
		pg_free(s);
		return e;
	}
	s->wait_ns = (uint64_t)(s->timeout_ms > PG_OPEN_TIMEOUT_MS ?
	    s->timeout_ms : PG_OPEN_TIMEOUT_MS) * 1000000u;
	snprintf(s->ka_user_timeout, sizeof(s->ka_user_timeout), "%" PRId64,
	    s->timeout_ms);
	if (asprintf(&s->chan, "saker%s%s", s->schema != NULL ? "." : "",
	    s->schema != NULL ? s->schema : "") < 0) {
		s->chan = NULL;
		pg_free(s);
		snprintf(err, errlen, "out of memory");
		return SAKER_ENOMEM;
	}
	pg_make_owner(s);
	{
		char *perr = NULL;
		const PQconninfoOption *o;

		if ((s->copts = PQconninfoParse(s->conninfo, &perr)) == NULL) {
			char line[300];

			pg_oneline(line, sizeof(line), perr != NULL ? perr :
			    "out of memory");
			PQfreemem(perr);
			e = pg_errf(s, SAKER_EINVAL, "postgres: bad connection"
			    " string: %s", line);
			goto fail;
		}
		for (o = s->copts; o->keyword != NULL; o++)
			if (strcmp(o->keyword, "host") == 0 && o->val != NULL)
				s->nhosts = pg_list_n(o->val);
		if (s->nhosts > PG_HOSTS_MAX)
			s->nhosts = 1;	/* too many to rotate: in order */
	}
	if ((s->efd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		e = pg_errf(s, SAKER_EIO, "postgres: epoll_create1: %s",
		    strerror(errno));
		goto fail;
	}
	if ((e = pg_link_wait(s, &s->links[PG_L_MAIN], s->wait_ns)) !=
	    SAKER_OK)
		goto fail;
	s->conn = s->links[PG_L_MAIN].c;
	if ((e = pg_session(s)) != SAKER_OK ||
	    (e = pg_check_schema(s, opts->create)) != SAKER_OK ||
	    (e = pg_prepare_all(s)) != SAKER_OK)
		goto fail;
	s->links[PG_L_MAIN].up = true;
	if (!s->read_only) {
		res = pg_exec(s, pg_fold_sql);
		if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK) {
			PQclear(res);
			res = pg_exec(s, "ROLLBACK");
		}
		PQclear(res);
		if ((e = pg_listen_open(s)) != SAKER_OK)
			goto fail;
	}
	if (s->conn == NULL) {
		e = SAKER_EIO;
		goto fail;
	}
	/* from here on the loop runs: no wait longer than timeout= (a
	 * read-only tool has no loop to keep answering) */
	if (!s->read_only)
		s->wait_ns = (uint64_t)s->timeout_ms * 1000000u;
	s->opened = true;
	s->err[0] = '\0';
	*out = &s->base;
	return SAKER_OK;

fail:
	snprintf(err, errlen, "%s", s->err[0] != '\0' ? s->err :
	    saker_strerror(e));
	pg_free(s);
	return e != SAKER_OK ? e : SAKER_EIO;
}

const struct saker_store_driver saker_store_postgres = {
	.name = "postgres",
	.location_help = "'host=... dbname=...'",
	.durable = true,
	.options = pg_options,
	.caps = SAKER_CAP_SHARED | SAKER_CAP_DELIVERIES,
	.open = pg_open,
	.close = pg_close,
	.errmsg = pg_errmsg,
	.queue_open = pg_queue_open,
	.queue_delete = pg_queue_delete,
	.queue_flush = pg_queue_flush,
	.queues = pg_queues,
	.queue_stats = pg_queue_stats,
	.put = pg_put,
	.take = pg_take,
	.confirm = pg_confirm,
	.release = pg_release,
	.release_delayed = pg_release_delayed,
	.move = pg_move,
	.expire_to = saker_store_keep_expire_to,
	.promote = pg_promote,
	.flush_expired = pg_flush_expired,
	.iterate = pg_iterate,
	.commit = pg_commit,
	.sync = pg_sync,
	.store_stats = pg_store_stats,
	.watch_fd = pg_watch_fd,
	.fd_ready = pg_fd_ready,
	.tick = pg_tick,
};
