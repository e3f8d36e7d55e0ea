/*
 * proto_meta.h -- memcached's meta commands (mg, ms, md, mn; me refused)
 * inside the text protocol (text.c frames them), run on the broker's
 * operations.
 */
#ifndef SAKER_PROTO_META_H
#define SAKER_PROTO_META_H

#include <stdbool.h>
#include <stddef.h>

#include "session.h"

/* Is this line (first byte 'm') a meta command: "mg", "ms", "md", "mn",
 * "me" or "ma" followed by a space or the end of the line? */
bool meta_is_command(const char *line, size_t len);

/* Run the meta command on the line at the front of s->in (`need` bytes
 * with its terminator).  Returns false when more input is needed or the
 * connection stopped reading commands, as the text framing expects. */
bool meta_command(struct session *s, const char *line, size_t linelen, size_t need);

/* Run the `mg ... q` lines collected so far (another command follows). */
void meta_run_group(struct session *s);

/* Base64 (RFC 4648, padded).  decode returns the length or -1. */
long meta_b64_decode(const char *in, size_t len, char *out, size_t outcap);
size_t meta_b64_encode(const char *in, size_t len, char *out);

#endif
