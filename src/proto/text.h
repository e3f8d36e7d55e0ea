/*
 * text.h -- the memcache text protocol on a session: framing of lines and
 * data blocks, the ASCII login, running each parsed command on the
 * broker's operations (ops.h) and writing its text reply.  Lines are
 * parsed by proto_text.c; meta commands (proto_meta.c) are lines of the
 * same protocol and share the framing and error replies of textio.h.
 */
#ifndef SAKER_TEXT_H
#define SAKER_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "step.h"

/* One step of a text session (struct protocol.step). */
int text_step(struct session *s);
/* While a get waits: is the next command complete and one that runs at
 * once behind it (set, add, delete, flush, flush_all, flush_expired,
 * stats, version, verbosity; proto.c)? */
bool text_runs_behind_wait(struct session *s);

/* After a failed commit: SERVER_ERROR for each reply of the batch, except
 * those kept (enum reply_keep), sent from `sent` as they were. */
void text_fail_batch(struct session *s, struct evbuffer *sent, bool in_doubt,
    const char *reason);

#endif
