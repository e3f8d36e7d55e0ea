/*
 * proto.h -- the protocols a session may speak, in one table.
 *
 * A session's first byte picks its protocol, as memcached decides: 0x80 is
 * the binary protocol, anything else is text (whose lines include the meta
 * commands).  The owner of the session (sakerd's conn.c) fills s->in and
 * calls proto_step() until it returns PROTO_STOP; after each
 * PROTO_COMMAND it serves the queues that command made ready.
 */
#ifndef SAKER_PROTO_H
#define SAKER_PROTO_H

#include <stdbool.h>

#include "session.h"
#include "step.h"

struct protocol {
	const char *name;
	/* Handle what is at the front of s->in (enum proto_step_result). */
	int (*step)(struct session *s);
	/* After a failed commit: answer every reply of the batch with an
	 * error, except those kept (enum reply_keep), which are moved from
	 * `sent` (the batch's replies as they were). */
	void (*fail_batch)(struct session *s, struct evbuffer *sent,
	    bool in_doubt, const char *reason);
};

/* One step of the session's protocol (chosen from its first byte). */
int proto_step(struct session *s);
/* The batch's commit failed: rewrite s->pend for s's protocol. */
void proto_fail_batch(struct session *s, struct evbuffer *sent, bool in_doubt,
    const char *reason);
/* Free what the protocols keep per session (in s->ps). */
void proto_session_free(struct session *s);

#endif
