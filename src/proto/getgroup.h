/*
 * commands.h -- the command layer every protocol shares, and the text
 * protocol's commands on top of it.
 *
 * The operations (set with limits, fanout and delay; get with options,
 * several keys and waiting; delete; flush_all) know nothing about wire
 * formats.  Writes return an enum op_result and a message; a get writes its
 * replies through a struct get_ops that the protocol supplies, so a blocked
 * get woken later still answers in its own protocol.
 */
#ifndef SAKER_COMMANDS_H
#define SAKER_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "proto_text.h"

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
	OPR_NOMEM           /* SERVER_ERROR msg (out of memory, storage full) */
};

/* What a get's hit callback is given (as the saker_item_fn argument). */
struct hit_ctx {
	struct conn *c;
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
	void (*end)(struct conn *c, const uint64_t *hits, size_t nkeys);
	/* The get was refused because of key k (an error for the whole
	 * request): no item moved. */
	void (*error)(struct conn *c, size_t k, int result, const char *msg);
};

/*
 * Get: keys[0..nkeys-1] (raw and name pointing into base[0..baselen)),
 * answered through ops.  Waits (copying base) when no key has an item and
 * some key has t=.
 */
void cmd_get(struct conn *c, const struct get_ops *ops,
    const struct proto_key *keys, size_t nkeys, const char *base,
    size_t baselen);

/* Set one item on k's queue (k carries no get options); delay_ms / at_s
 * are -1 when absent.  *msg is set for OPR_READONLY, OPR_SERVER, OPR_NOMEM. */
int op_set(const struct proto_key *k, uint32_t flags, int64_t exptime,
    int64_t delay_ms, int64_t at_s, const void *data, size_t len,
    const char **msg);
/* Delete a queue and its items. */
int op_delete(const char *name, size_t len, const char **msg);
/* Flush every queue. */
int op_flush_all(const char **msg);

/*
 * Validate a key that came without a text line (binary protocol, meta
 * commands): as a get key (name plus options) or as a set key (name plus
 * delay=/at=).  On success returns NULL and fills *k (name_len, opts,
 * timeout_ms; raw and name point at key) and, for a set key, *delay_ms and
 * *at_s.  On failure returns the text error (a PROTO_ERR_* string).
 */
const char *cmd_parse_get_key(const char *key, size_t len, struct proto_key *k);
const char *cmd_parse_set_key(const char *key, size_t len, struct proto_key *k,
    int64_t *delay_ms, int64_t *at_s);

/* --- get groups --------------------------------------------------------- */

/*
 * A get made of several requests (binary quiet gets ended by a Noop or a
 * plain get; meta `mg ... q` lines ended by `mn` or a plain mg).  Its keys
 * are collected and run as one multi-get, so its t= options wait on all
 * the queues at once; the group stays intact while the connection waits.
 */
enum gg_end { GG_END_NONE = 0, GG_END_NOOP, GG_END_MN };

struct gg_key {
	uint32_t opaque;            /* binary */
	uint16_t off, len;          /* the key in buf (decoded, for meta b) */
	uint16_t name_len;
	uint16_t ooff;              /* meta O token in buf */
	uint8_t olen;
	uint8_t opcode;             /* binary */
	uint16_t mflags;            /* meta flags (MF_*) */
	bool quiet;                 /* no reply on a miss */
	unsigned opts;
	int64_t timeout_ms;
};

struct getgroup {
	size_t nkeys;
	struct gg_key keys[PROTO_MAX_KEYS];
	char *buf;                  /* key bytes and meta opaques */
	size_t len, cap;
	int end;                    /* enum gg_end */
	uint32_t end_opaque;        /* of the binary Noop */
};

/* Largest key bytes a group holds (offsets are 16-bit). */
#define GG_MAX_BYTES 65535u

/* True when the connection has collected keys not yet run. */
static inline bool
gg_pending(const struct conn *c)
{
	return c->grp != NULL && c->grp->nkeys > 0;
}

/* Room for one more key of `bytes` bytes (plus `extra`)? */
bool gg_room(struct conn *c, size_t bytes);
/* Add a validated key (raw bytes copied); NULL when out of memory. */
struct gg_key *gg_add(struct conn *c, const struct proto_key *k,
    const char *raw, size_t rawlen);
/* Copy extra bytes (a meta opaque) into the group; false when out of memory. */
bool gg_stash(struct conn *c, struct gg_key *gk, const char *p, size_t n);
/* Run the collected keys as one get answered through ops, ended by `end`. */
void gg_run(struct conn *c, const struct get_ops *ops, int end,
    uint32_t end_opaque);
/* Forget the collected keys (the protocol's end/error callbacks call it). */
void gg_reset(struct conn *c);
void gg_free(struct conn *c);

/* --- the text protocol -------------------------------------------------- */

/* Run one parsed command for c.  `line` is the command line (keys point
 * into it); `data` the set's data block (cmd->bytes long) or NULL. */
void cmd_execute(struct conn *c, struct proto_cmd *cmd, const char *line,
    size_t linelen, const char *data);

/* Hand items of q to its waiters, first come first served. */
void cmd_serve_waiters(struct squeue *q);

/* Text replies of a store error (SERVER_ERROR reason), shared by meta. */
const char *cmd_store_error(int rc, int *result);

#endif
