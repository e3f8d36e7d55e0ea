/*
 * getgroup.h -- a get made of several requests, shared by the binary
 * protocol and the meta commands.
 *
 * Binary quiet gets are ended by a Noop or a plain get; meta `mg ... q`
 * lines by `mn` or a plain mg.  Their keys are collected and run as one
 * multi-get (op_get), so their t= options wait on all the queues at once;
 * the group stays intact while the session waits.  Both protocols answer
 * a group the same way -- a hit per key that got an item, a miss for each
 * other key that reports misses, then the end marker if one ended the
 * group -- so that walk is here once and each protocol gives only how one
 * hit, one miss, one error and the end marker look (struct gg_replies).
 */
#ifndef SAKER_GETGROUP_H
#define SAKER_GETGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops.h"
#include "proto_text.h"
#include "pstate.h"

enum gg_end { GG_END_NONE = 0, GG_END_NOOP, GG_END_MN };

struct gg_key {
	uint32_t opaque;            /* binary */
	uint16_t off, len;          /* the key in buf (decoded, for meta b) */
	uint16_t ooff;              /* meta O token in buf */
	uint8_t olen;
	uint8_t opcode;             /* binary */
	uint16_t mflags;            /* meta flags (MF_*) */
	bool quiet;                 /* no reply on a miss */
	struct proto_key k;         /* raw and name set by gg_run: buf moves */
};

struct getgroup;

/* How one protocol writes the replies of a group. */
struct gg_replies {
	/* A hit for key hc->k (as struct get_ops.hit; must set hc->id). */
	saker_item_fn hit;
	/* A miss for key gk, which reports misses. */
	void (*miss)(struct session *s, const struct getgroup *g,
	    const struct gg_key *gk);
	/* The end marker (Noop, MN) that ended the group. */
	void (*end)(struct session *s, const struct getgroup *g);
	/* The request of key gk failed (result r, message msg). */
	void (*error)(struct session *s, const struct gg_key *gk, int r,
	    const char *msg);
};

struct getgroup {
	size_t nkeys;
	struct gg_key keys[PROTO_MAX_KEYS];
	char *buf;                  /* key bytes and meta opaques */
	size_t len, cap;
	int end;                    /* enum gg_end */
	uint32_t end_opaque;        /* of the binary Noop */
	const struct gg_replies *rep;
};

/* Largest key bytes a group holds (offsets are 16-bit). */
#define GG_MAX_BYTES 65535u

/* True when the session has collected keys not yet run. */
static inline bool
gg_pending(const struct session *s)
{
	return s->ps->grp != NULL && s->ps->grp->nkeys > 0;
}

/* Room for one more key of `bytes` bytes? */
bool gg_room(struct session *s, size_t bytes);
/* Add a validated key (raw bytes copied); NULL when out of memory. */
struct gg_key *gg_add(struct session *s, const struct proto_key *k,
    const char *raw, size_t rawlen);
/* Copy extra bytes (a meta opaque) into the group; false when out of memory. */
bool gg_stash(struct session *s, struct gg_key *gk, const char *p, size_t n);
/* Run the collected keys as one get answered through rep, ended by `end`. */
void gg_run(struct session *s, const struct gg_replies *rep, int end,
    uint32_t end_opaque);
void gg_free(struct session *s);

#endif
