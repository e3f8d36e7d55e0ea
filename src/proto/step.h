/* step.h -- what one protocol step returns, and the one way a protocol
 * gives up on a stream it cannot read. */
#ifndef SAKER_STEP_H
#define SAKER_STEP_H

#include "log.h"
#include "session.h"

enum proto_step_result {
	PROTO_STOP = 0,     /* more input is needed, or the session stopped
	                     * reading commands (waiting, closing) */
	PROTO_COMMAND,      /* one command ran */
	PROTO_SKIPPED       /* input of a refused request was discarded */
};

/* The stream cannot be trusted (binary header): close after the replies
 * already queued; only this session is affected. */
static inline void
proto_protocol_error(struct session *s, const char *why)
{
	/* the replies before the bad packet still go out */
	log_info("closing a connection: %s", why);
	s->b->hooks->close_after_write(s);
}

#endif
