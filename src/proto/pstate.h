/*
 * pstate.h -- what the protocol layer keeps of a session (session.ps):
 * the protocol it speaks, the records of its batch's replies that let a
 * failed commit answer each request in that protocol, the multi-get being
 * collected, a binary login's delayed refusal, input to discard.  The core
 * sees only the pointer; the carrier (sakerd's struct conn) embeds one.
 */
#ifndef SAKER_PSTATE_H
#define SAKER_PSTATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reply.h"

/* The protocol a session speaks, decided by its first byte. */
enum proto_kind {
	PROTO_UNKNOWN = 0,
	PROTO_TEXT,     /* memcache text, meta commands included */
	PROTO_BINARY    /* memcached's binary protocol (first byte 0x80) */
};

/* A binary reply of the current batch, kept so a failed commit can answer
 * each request with an error packet of the same opcode and opaque. */
struct bin_rec {
	size_t end;                     /* where its bytes end in pend */
	uint32_t opaque;
	uint8_t opcode;
	uint8_t keep;                   /* enum reply_keep */
};

/* A text reply of the current batch that may be kept (enum reply_keep). */
struct kept_reply {
	unsigned idx;                   /* its number among the batch's replies */
	uint8_t keep;
	size_t start, end;              /* its bytes in pend */
};

struct getgroup;

struct proto_state {
	uint8_t kind;                   /* enum proto_kind */
	size_t swallow;                 /* SESSION_SWALLOW: bytes left to discard */
	struct getgroup *grp;           /* binary / meta multi-get being collected */

	/* where the batch's records stand (saved around held replies) */
	struct rec_marks {
		unsigned replies;       /* text: replies in pend */
		size_t start;           /* text: where the reply being built starts */
		uint8_t keep;           /* ... and whether to keep it */
		size_t nkept;           /* text: records in kept */
		size_t nbrecs;          /* binary: records in brecs */
	} at;
	struct kept_reply *kept;        /* text: the replies that may be kept */
	size_t kept_cap;
	struct bin_rec *brecs;          /* binary: one per reply packet */
	size_t brecs_cap;
	uint32_t login_opaque;          /* the SASL request a delayed refusal */
	uint8_t login_opcode;           /* answers */
};

/* Text: the reply being built is complete. */
void reply_done(struct session *s);

/* Text: a whole reply. */
static inline void
reply_str(struct session *s, const char *str)
{
	reply_add(s, str, strlen(str));
	reply_done(s);
}

/* Binary: one packet of this batch ended at the current end of pend. */
void reply_record(struct session *s, uint8_t opcode, uint32_t opaque);

/* The reply being built (binary: the last one recorded) hands out an item
 * that left its queue, or does not depend on the store at all; and the
 * batch's replies were cut back to `len` bytes (the broker's hooks). */
void pstate_keep(struct session *s, unsigned keep);
void pstate_cut(struct session *s, size_t len);

/* After a failed commit: when `keep` (enum reply_keep) says so, move the
 * reply at [start, end) of `sent` (the batch's replies as they were, *pos
 * bytes of it already consumed) to pend and return true. */
bool reply_resend_kept(struct session *s, struct evbuffer *sent, size_t *pos,
    size_t start, size_t end, unsigned keep, bool in_doubt);

/* Forget the batch's reply records (its replies are on their way). */
void reply_reset(struct session *s);

/* Free the records (proto_session_free() frees the rest). */
void pstate_free(struct proto_state *ps);

#endif
