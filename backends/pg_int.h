/* pg_int.h -- the PostgreSQL driver's private types: the store, its
 * queues and links, and the constants its parts share.  No functions:
 * each part declares what it exports in its own header, so that the
 * includes show who calls whom (tests/check_layers.sh).  The parts call
 * one way, top down:
 *   postgres.c (the driver's hooks, open and close)
 *   > pg_lease (claims, leases, tick, the VACUUM link, a new session)
 *   > pg_damaged (checksum failures) > pg_item (rows, put, expired
 *   items handed to the layer) > pg_batch (buffered writes, commit,
 *   rollback) > pg_queue (queues in memory, claimed items, the layer's
 *   notify and the other brokers' NOTIFY) > pg_wire (connections, round
 *   trips, pipelines; it reports up through struct pg_wire_cb)
 *   > pg_conninfo (options, the connection string);
 *   pg_sql (statements, schema) is called by postgres.c and pg_lease and
 *   calls pg_wire. */
#ifndef SAKER_PG_INT_H
#define SAKER_PG_INT_H

#include <sys/queue.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "saker/store.h"
#include "intmap.h"
#include "qtab.h"

/* Items put by a broker whose clock runs ahead are still taken if they are
 * at most this far in the future; the bound keeps a queue full of delayed
 * items from being scanned by every take. */
#define PG_SKEW_MS 60000
/* Most items one take claims ahead (they are held in memory). */
#define PG_CLAIM_MAX 64
/* Most queues a commit claims for the next turn (pg_commit). */
#define PG_PRECLAIM_MAX 4

/* the columns of ITEM_COLS, by number */
enum { C_ID, C_FLAGS, C_EXPIRES, C_CREATED, C_VIS, C_DUE, C_DATA, C_CRC,
    C_DLV, C_ATTRS };

enum {
	P_Q_FIND, P_Q_CREATE, P_Q_LIST, P_Q_DELETE, P_I_DELQ, P_C_DELQ,
	P_TAKE_REMOVE, P_TAKE_OPEN, P_PEEK, P_REINSERT, P_DEL1, P_DEL_READY,
	P_CONFIRM, P_EXPIRE, P_STATS, P_C_ADD, P_PROMOTE,
	P_NEXT, P_RENEW, P_SWEEP, P_MINE, P_RELEASE_ALL, P_IT_OPEN,
	P_IT_READY, P_IT_DELAYED, P_NOTIFY, P_SIZE,
	P_QSYNC, P_PUTS, P_SETSTATE, P_DELS, P_DOUBT_DELS, P_COUNTS, P_CLAIM, P_GIVEBACK,
	P_MOVE, P_EXPIRE_GET, P_DELAY, P_QCOUNT, P_ADV_LOCK, P_ADVANCE,
	/* the deduplication statements last: a store before format 6 has
	 * none (pg_prepare_all()) */
	P_HORIZON, P_D_PUT, P_D_DEL, P_D_SWEEP, P_D_LIST, P_D_COUNT, P_D_DELQ,
	P_SEG_MINE, P_SWEEP_LOCK, P_ROT_WAIT,
	P_COUNT
};

struct saker_queue {
	struct saker_queue_base base; /* the layer's (store.h): first */
	int64_t id;
	size_t len;
	void *ctx;
	bool fresh;		/* created in the current batch */
	bool fl_fresh;		/* created in the batch in flight */
	bool dead;		/* deleted or rolled back out of existence */
	bool dirty;		/* on the counter list */
	bool pend;		/* on the NOTIFY list */
	bool deleted;		/* on the deleted list */
	/* counter deltas not written yet (P_COUNTS, once a second); c_*:
	 * the part of them from batches that committed */
	int64_t d_total, d_expired;
	int64_t c_total, c_expired;
	unsigned hint_gen;	/* hint valid while == the store's txn_gen */
	int64_t hint_vis, hint_id;	/* see HEAD_WHERE */
	/* the queue's low-water mark as this broker last saw it (P_ADVANCE):
	 * never above the database's; adv: taken from since the last
	 * advance */
	int64_t lo_vis, lo_id;
	bool adv;
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
	struct kit_qent qe;	/* in s->qt while live (qtab.h) */
	char name[];		/* len bytes, not NUL-terminated */
};

LIST_HEAD(pg_qlist, saker_queue);

/* A deduplication id a batch recorded (see bids in struct pg_store). */
struct pg_pipe;

struct pg_bid {
	int64_t qid, expires, now;
	bool out;		/* a take of the batch handed its item out */
	uint8_t nlen, klen;
	char name[250];		/* the queue's (saker_dedup is by name) */
	unsigned char key[128];	/* SAKER_DEDUP_KEY_MAX */
};

/* A PostgreSQL binary one-dimensional array, built element by element:
 * the columns of the batched statements. */
struct pg_arr {
	unsigned char *p;
	size_t len, cap;
	uint32_t n, oid;
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

struct pg_wire_cb;

struct pg_store {
	saker_store base;
	const struct pg_wire_cb *wcb;	/* the driver's (pg_wire.h) */
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
	bool committing;	/* the COMMIT is out: pg_commit() decides
				 * what the rows the batch deleted become */
	bool unsynced;
	int code;		/* of the last failure */

	int64_t retry_at;		/* next attempt of the main connection */
	int64_t attempt_at;		/* start of the last attempt */
	int64_t lretry_at;		/* listen connection */
	bool listening;			/* LISTEN answered */
	int64_t probe_ms;		/* probe= (0: no probes) */
	bool probing;			/* a probe is out (pg_next()) */
	uint64_t probe_dead_ns;		/* unanswered then: silence */
	char down_why[256];

	int64_t last_now;	/* newest now_ms seen: "delayed" in stats */
	int64_t last_vis;	/* keeps this broker's puts in order */
	int64_t promoted_to;	/* promote() reported items due up to here */
	int64_t adv_at;		/* last low-water mark advance (pg_commit) */
	int64_t counts_at;	/* last write of the counters (pg_commit) */
	/* the lease sweep's start on the database clock, and the local time
	 * of the last sweep from the bottom (pg_tick()) */
	int64_t sweep_from, sweep_full_at;
	bool counts_now;	/* write them at the next commit (close) */
	/* what VACUUM waits behind (pg_horizon_tick(), store_stats): -1
	 * until known; the last warning about it */
	int64_t horizon_ms, horizon_xids, dead_rows;
	int64_t horizon_warned, horizon_warn_ms;	/* horizon_warn= */
	int64_t renewed_at;
	/* the segments (pg_seg_tick()): rotation after segment_rows= ids
	 * or segment= ms; the current segment and the store's truncations
	 * as last read (-1: not yet), rows this broker moved forward */
	int64_t seg_rows, seg_ms;
	int64_t seg_cur, seg_truncated;
	uint64_t seg_moved;
	int64_t rot_at;		/* next saker_rotate() call (local clock) */
	bool rotating;		/* the VACUUM link runs one, not a VACUUM */
	bool seg_due;		/* the last call found a rotation due */

	struct kit_qtab qt;	/* the live queues by name and id */
	struct pg_qlist dirty, pend, deleted, zombies, holding, took;
	/* open items this broker holds: id (unique store-wide) -> queue id */
	struct intmap open;

	/*
	 * Writes of the batch not yet sent: they go out in one pipeline
	 * ahead of the next statement that must see them, or with the
	 * COMMIT.  begun: the BEGIN of the batch went out.
	 */
	bool begun;
	struct pg_arr put_name, put_vis, put_due, put_flags, put_exp,
	    put_created, put_data, put_crc, put_dlv, put_attrs;
	size_t put_bytes;
	struct pg_arr st_qid, st_id, st_st, st_dlv;
	struct intmap st_ids;	/* ids with a state change in st_* */
	struct pg_arr del_qid, del_id;
	/* (qid, id) of every row the batch deletes (a take, a confirm),
	 * and of those a commit that got no answer deleted: handed out
	 * already, they are deleted again when the connection is back
	 * (pg_main_up), or the FIFO would hand them out a second time */
	int64_t *gone, *doubt;
	size_t ngone, capgone, ndoubt, capdoubt;
	/* the ids the batch recorded (pg_dedup_put), and of those the ones
	 * whose item a take of the same batch handed out when its COMMIT got
	 * no answer: recorded again once connected, so that the producer's
	 * retry is the duplicate it is, not a second item */
	struct pg_bid *bids, *dids;
	size_t nbids, capbids, ndids, capdids;
	uint64_t batch_no;	/* commits so far: takes per batch */
	size_t nheld;		/* items claimed ahead, all queues */
	int64_t lease_floor;	/* every lease we hold runs at least
				 * lease_ms from here (local clock) */
	int64_t renew_at;	/* start of an uncommitted renewal */

	/*
	 * The batch in flight (commit_start(), pg_batch.c): its pipeline up
	 * to the COMMIT is sent, its results are unread.  The next batch
	 * gathers meanwhile; whatever needs the statement connection first
	 * reads them (pg_flight_wait()).  gone/bids: the flight's rows and
	 * ids, kept apart from the next batch's for the in-doubt reconcile.
	 * efd: an epoll set of the connection's socket and evfd, so that
	 * commit_fd() stays readable when the result was read early.
	 */
	struct pg_flight {
		bool on, done;		/* sent; read early (rc waits) */
		bool dropped;		/* its connection was dropped */
		bool skipped;		/* the last tick skipped its statements */
		bool any_fresh;		/* it created a queue */
		struct pg_qlist deleted;	/* the queues it deleted */
		int64_t renew_at;	/* its renewal of the leases */
		int rc;
		struct pg_pipe *pp;
		struct saker_queue *pre[PG_PRECLAIM_MAX];
		int pre_ix[PG_PRECLAIM_MAX], npre, adv_ix, commit_ix;
		uint64_t t0;
		int64_t *gone;
		size_t ngone, capgone;
		struct pg_bid *bids;
		size_t nbids, capbids;
		int efd, evfd, regfd;
		char err[1024];
	} fl;
	bool any_fresh;		/* a queue was created in this batch */

	uint64_t commits, fsyncs, commit_ns;
	/* the VACUUMs on their own connection: every vacuum_ms (0:
	 * never) while commits move; vacuuming while one runs */
	int64_t vacuum_ms, vacuum_at;
	uint64_t vacuum_commits;
	bool vacuuming;
	char err[1024];
};

#define PG(s) ((struct pg_store *)(void *)(s))

#define PG_Q(e) KIT_QENT_QUEUE(e, struct saker_queue, qe)

#define PG_HOSTS_MAX 32

#endif
