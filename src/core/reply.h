/*
 * reply.h -- the replies of a session's current batch.
 *
 * Replies go into session.pend and leave only after the batch's commit.
 * Each completed reply is counted (reply_done) so that a failed commit can
 * replace every reply with an error -- except those marked with
 * reply_keep(), which go out as they are (enum reply_keep).  The binary
 * protocol records one struct bin_rec per packet instead (reply_record).
 */
#ifndef SAKER_REPLY_H
#define SAKER_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "session.h"

/* Which replies of a failed batch go out as they are. */
enum reply_keep {
	KEEP_NEVER = 0,                 /* SERVER_ERROR (the batch rolled back) */
	KEEP_IN_DOUBT,                  /* it hands out a removed item: when the
	                                 * commit's outcome is unknown
	                                 * (SAKER_EINDOUBT) the take may have
	                                 * reached the disk, and a duplicate
	                                 * beats a lost item */
	KEEP_ALWAYS                     /* it does not depend on the store
	                                 * (version) */
};

/* Have the commit flush this session's replies this turn. */
static inline void
reply_schedule(struct session *s)
{
	if (!s->flush_scheduled && !s->dead) {
		s->flush_scheduled = true;
		s->b->hooks->schedule_flush(s);
	}
}

/* Append bytes to the reply being built. */
static inline void
reply_add(struct session *s, const char *p, size_t len)
{
	evbuffer_add(s->pend, p, len);
	reply_schedule(s);
}

/* The reply being built is complete. */
void reply_done(struct session *s);

/* A whole reply. */
static inline void
reply_str(struct session *s, const char *str)
{
	reply_add(s, str, strlen(str));
	reply_done(s);
}

/* Append formatted bytes to the reply being built. */
void replyf(struct session *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Binary: one packet of this batch ended at the current end of pend. */
void reply_record(struct session *s, uint8_t opcode, uint32_t opaque);

/* Drop what was added to the batch's replies since pend was `len` bytes
 * long and held `nbrecs` binary records. */
void reply_truncate(struct session *s, size_t len, size_t nbrecs);
/* The reply being built (binary: the last one recorded) hands out an item
 * that left its queue, or does not depend on the store at all. */
void reply_keep(struct session *s, enum reply_keep keep);

/*
 * Commands run behind a waiting get (proto_step) answer into s->held, which
 * follows the get's reply once it is written (reply_release_held).  Their
 * replies are not in the batch's records: a failed commit of a batch that
 * ran or released any of them closes the session (s->held_in_batch).
 */
struct held_save {
	struct evbuffer *pend;
	unsigned replies;
	size_t nkept, start, nbrecs;
	uint8_t keep;
};
void reply_held_begin(struct session *s, struct held_save *sv);
void reply_held_end(struct session *s, const struct held_save *sv);
void reply_release_held(struct session *s);

/* After a failed commit: when `keep` (enum reply_keep) says so, move the
 * reply at [start, end) of `sent` (the batch's replies as they were, *pos
 * bytes of it already consumed) to pend and return true. */
bool reply_resend_kept(struct session *s, struct evbuffer *sent, size_t *pos,
    size_t start, size_t end, unsigned keep, bool in_doubt);

/* Forget the batch's reply records (its replies are on their way). */
void reply_reset(struct session *s);

#endif
