/*
 * text.h -- the memcache text protocol on a session: framing of lines and
 * data blocks, the ASCII login, running each parsed command on the
 * broker's operations (ops.h) and writing its text reply.  Lines are
 * parsed by proto_text.c; meta commands (proto_meta.c) are lines of the
 * same protocol and share the framing and the error replies here.
 */
#ifndef SAKER_TEXT_H
#define SAKER_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "proto.h"

/* One step of a text session (struct protocol.step). */
int text_step(struct session *s);

/* After a failed commit: SERVER_ERROR for each reply of the batch, except
 * those kept (enum reply_keep), sent from `sent` as they were. */
void text_fail_batch(struct session *s, struct evbuffer *sent, bool in_doubt,
    const char *reason);

/* The text reply for an operation's result other than success. */
void text_reply_result(struct session *s, int r, const char *msg);

/*
 * For a command followed by a data block: the line ends `need` bytes into
 * s->in and `bytes` of data plus "\r\n" follow.  Returns 1 with *p at the
 * start of s->in (line, then data) when all has arrived, 0 when more input
 * is needed, -1 after answering a bad data chunk (session closing).
 */
int text_data_block(struct session *s, size_t need, size_t bytes, const char **p);

/* Set the session to discard `n` bytes of input (a refused data block). */
void text_swallow(struct session *s, size_t n);

#endif
