/*
 * reply.h -- the replies of a session's current batch.
 *
 * Replies go into session.pend and leave only after the batch's commit.
 * The protocol records where each reply ends, so that a failed commit can
 * replace every reply with an error in that protocol -- except those
 * marked with reply_keep(), which go out as they are (enum reply_keep).
 * The records are the protocol's (src/proto/pstate.h): the core only
 * tells it, through the broker's hooks, what it keeps and what it cut.
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

/* Append formatted bytes to the reply being built. */
void replyf(struct session *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Drop what was added to the batch's replies since pend was `len` bytes
 * long (the protocol forgets its records of it: hooks->reply_cut). */
void reply_truncate(struct session *s, size_t len);

/* The reply being built hands out an item that left its queue, or does
 * not depend on the store at all: the protocol records it
 * (hooks->reply_keep). */
static inline void
reply_keep(struct session *s, enum reply_keep keep)
{
	s->b->hooks->reply_keep(s, keep);
}

#endif
