/*
 * ops.h -- the broker's operations, the same for every protocol: set with
 * limits, fanout and delay; get with options, several keys and waiting;
 * delete; flush; flush_expired; monitor; confirm; status.
 *
 * They know nothing about wire formats.  Writes return an enum op_result
 * and a message; a get writes its replies through a struct get_ops that
 * the protocol supplies, so a blocked get woken later still answers in its
 * own protocol.
 */
#ifndef SAKER_OPS_H
#define SAKER_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "session.h"

#define OP_MAX_KEYS 128         /* most keys in one binary or meta get group */
#define OP_ID_MAX 128           /* bytes of a set's deduplication id (the
                                 * store's SAKER_DEDUP_KEY_MAX) */

/* get options (bits of op_key.opts) */
#define OP_OPT_OPEN    0x01u
#define OP_OPT_CLOSE   0x02u
#define OP_OPT_ABORT   0x04u
#define OP_OPT_PEEK    0x08u
#define OP_OPT_TOUCH   0x10u    /* extend the leases of the open items */

/* One key of a request: "jobs/t=250/open". */
struct op_key {
	const char *raw;         /* the token exactly as sent (echoed in VALUE) */
	size_t raw_len;
	const char *name;        /* the queue name: raw up to the first '/' */
	size_t name_len;
	unsigned opts;           /* OP_OPT_* */
	int64_t timeout_ms;      /* t=<ms>; -1 when absent */
	int64_t delay_ms;        /* abort's delay=<ms>; -1 when absent (the
	                          * queue's retry_backoff decides) */
};

/* Outcome of an operation; the protocol turns it into its reply. */
enum op_result {
	OPR_OK = 0,         /* STORED, DELETED, OK */
	OPR_NOT_STORED,     /* queue full */
	OPR_NOT_FOUND,      /* no such queue */
	OPR_TOO_LARGE,      /* item over the size limit */
	OPR_READONLY,       /* server status refuses it: SERVER_ERROR msg */
	OPR_FORMAT,         /* CLIENT_ERROR bad command line format */
	OPR_CLIENT,         /* CLIENT_ERROR msg */
	OPR_SERVER,         /* SERVER_ERROR msg (store failure) */
	OPR_NOMEM,          /* SERVER_ERROR msg (out of memory, storage full) */
	OPR_DENIED          /* CLIENT_ERROR permission denied (--auth-file) */
};

/* What a get's hit callback is given (as the saker_item_fn argument). */
struct hit_ctx {
	struct session *s;
	size_t k;                   /* index of the key in the get */
	const char *key;            /* the key exactly as requested */
	size_t key_len;
	uint64_t id;                /* the callback stores the item's id here */
};

/* How one protocol answers a get. */
struct get_ops {
	/* Write a hit for key h->k; called inside the driver's take().  Must
	 * set h->id. */
	saker_item_fn hit;
	/* The get is over (at once, after a wake or after a timeout): bit k
	 * of hits[] is set for every key that got an item.  Write what the
	 * other keys and the terminator need. */
	void (*end)(struct session *s, const uint64_t *hits, size_t nkeys);
	/* The get was refused because of key k (an error for the whole
	 * request): no item moved. */
	void (*error)(struct session *s, size_t k, int result, const char *msg);
};

/* Is bit k of a get's hits[] set? */
#define OP_HIT(h, k) (((h)[(k) >> 6] >> ((k) & 63)) & 1)

/*
 * Get: keys[0..nkeys-1] (raw and name pointing into base[0..baselen)),
 * answered through ops.  Waits (copying base) when no key has an item and
 * some key has t=.
 */
void op_get(struct session *s, const struct get_ops *ops,
    const struct op_key *keys, size_t nkeys, const char *base, size_t baselen);

/*
 * Every operation that names a queue first checks the session's rights
 * (session_may): a refusal is OPR_DENIED (for a get, through ops->error),
 * logged, and changes nothing -- not even creating the queue.
 */

/* Set one item on k's queue (k carries no get options); delay_ms / at_s
 * are -1 when absent.  id (id_len bytes, 1..OP_ID_MAX) is the set's
 * deduplication id, NULL when absent: a set with an id the queue keeps
 * (dedup_window) is OPR_OK without an item (stats.set_duplicates), one
 * past the queue's max_dedup_ids OPR_NOMEM.  *msg is set for OPR_READONLY,
 * OPR_SERVER, OPR_NOMEM. */
int op_set(struct session *s, const struct op_key *k, uint32_t flags,
    int64_t exptime, int64_t delay_ms, int64_t at_s, const char *id,
    size_t id_len, const void *data, size_t len, const char **msg);
/* Delete a queue and its items. */
int op_delete(struct session *s, const char *name, size_t len, const char **msg);
/* Empty one queue (a missing queue is fine). */
int op_flush(struct session *s, const char *name, size_t len, const char **msg);
/* Flush every queue (PERM_ADMIN). */
int op_flush_all(struct session *s, const char **msg);
/* Drop q's expired items; *removed says how many. */
int op_flush_expired(struct session *s, const char *name, size_t len,
    uint64_t *removed, const char **msg);
/* monitor: hand out, opened, the items of k's queue ready now and those
 * arriving in the next `seconds` (up to max, -1 = no max), through ops. */
void op_monitor(struct session *s, const struct get_ops *ops,
    const struct op_key *k, int64_t seconds, int64_t max, const char *base,
    size_t baselen);
/* Confirm the n oldest items s holds open on the queue.  OPR_NOT_FOUND
 * when it holds fewer. */
int op_confirm(struct session *s, const char *name, size_t len, int64_t n,
    const char **msg);

/*
 * touch: push back the open_timeout deadline of every item s holds open
 * on queue name.  `exptime` follows memcache's rules: 0 = the queue's
 * open_timeout again from now (with none configured the items keep no
 * deadline), up to 30 days = that many seconds from now, more = an
 * absolute Unix time; negative is OPR_FORMAT.  OPR_OK; OPR_NOT_FOUND when
 * s holds no item open there; OPR_DENIED.  Nothing is written to the
 * store: the lease is the connection's, kept by this broker (on a shared
 * store the broker's own lease on its open items is renewed meanwhile).
 */
int op_touch(struct session *s, const char *name, size_t len,
    int64_t exptime, const char **msg);

/* The blocking get's timer fired: answer it as a miss. */
void op_wait_timeout(struct session *s);
/* Hand items of q to its waiters, first come first served. */
void op_serve_waiters(struct broker *b, struct squeue *q);

/* The reason for a store failure, and which result it is (OPR_NOMEM or
 * OPR_SERVER); records a failure that makes the store refuse writes.
 * queue_lookup()'s QUEUE_ETOOMANY is "too many queues" (OPR_NOMEM). */
const char *op_store_error(struct broker *b, int rc, int *result);
/* The same as the result, the reason in *msg. */
int op_store_fail(struct broker *b, int rc, const char **msg);
/* The refusal of `what` on queue name: logged, OPR_DENIED. */
int op_denied(struct session *s, const char *what, const char *name,
    size_t len, const char **msg);

#endif
