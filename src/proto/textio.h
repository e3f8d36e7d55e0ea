/*
 * textio.h -- what the text protocol's classic commands (text.c) and its
 * meta commands (proto_meta.c) share: error replies, data blocks, skipping
 * a refused data block.
 */
#ifndef SAKER_TEXTIO_H
#define SAKER_TEXTIO_H

#include <stddef.h>

#include "proto_text.h"
#include "pstate.h"

/* The text reply for an operation's result other than success. */
void text_reply_result(struct session *s, int r, const char *msg);

/* Set the session to discard `n` bytes of input (a refused data block). */
void text_swallow(struct session *s, size_t n);

/*
 * For a command followed by a data block: the line ends `need` bytes into
 * s->in and `bytes` of data plus "\r\n" follow.  Returns 1 with *pp at the
 * start of s->in (line, then data) when all has arrived, 0 when more input
 * is needed, -1 after answering a bad data chunk (session closing).
 * Inlined: every set passes here.
 */
static inline __attribute__((always_inline)) int
text_data_block(struct session *s, size_t need, size_t bytes, const char **pp)
{
	size_t total = need + bytes + 2;
	const unsigned char *p;

	if (evbuffer_get_length(s->in) < total)
		return 0;
	p = evbuffer_pullup(s->in, (ev_ssize_t)total);
	if (p[need + bytes] != '\r' || p[need + bytes + 1] != '\n') {
		reply_str(s, PROTO_ERR_CHUNK);
		s->b->hooks->close_after_write(s);
		return -1;
	}
	*pp = (const char *)p;
	return 1;
}

#endif
