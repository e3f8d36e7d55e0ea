/*
 * proto_binary.h -- memcached's binary protocol, framed here and run on the
 * broker's operations (ops.h).  A connection speaks it when its
 * first byte is 0x80, as memcached decides.
 */
#ifndef SAKER_PROTO_BINARY_H
#define SAKER_PROTO_BINARY_H

#include <stdbool.h>

#include "step.h"

#define BIN_REQ_MAGIC 0x80
#define BIN_RES_MAGIC 0x81
#define BIN_HEADER 24
#define BIN_MAX_KEY 250

/* opcodes */
enum {
	BIN_GET = 0x00, BIN_SET = 0x01, BIN_ADD = 0x02, BIN_REPLACE = 0x03,
	BIN_DELETE = 0x04, BIN_QUIT = 0x07, BIN_FLUSH = 0x08, BIN_GETQ = 0x09,
	BIN_NOOP = 0x0a, BIN_VERSION = 0x0b, BIN_GETK = 0x0c, BIN_GETKQ = 0x0d,
	BIN_STAT = 0x10, BIN_SETQ = 0x11, BIN_DELETEQ = 0x14, BIN_QUITQ = 0x17,
	BIN_FLUSHQ = 0x18, BIN_VERBOSITY = 0x1b, BIN_TOUCH = 0x1c,
	BIN_APPEND = 0x0e, BIN_PREPEND = 0x0f, BIN_ADDQ = 0x12,
	BIN_REPLACEQ = 0x13, BIN_APPENDQ = 0x19, BIN_PREPENDQ = 0x1a,
	BIN_SASL_LIST = 0x20, BIN_SASL_AUTH = 0x21, BIN_SASL_STEP = 0x22
};

/* response status */
enum {
	BIN_OK = 0x0000, BIN_ENOENT = 0x0001, BIN_EEXISTS = 0x0002,
	BIN_E2BIG = 0x0003, BIN_EINVAL = 0x0004, BIN_NOT_STORED = 0x0005,
	BIN_AUTH_ERROR = 0x0020, BIN_UNKNOWN = 0x0081, BIN_ENOMEM = 0x0082,
	BIN_ENOTSUP = 0x0083,
	BIN_EINTERNAL = 0x0084, BIN_ETMPFAIL = 0x0086
};

/* Handle the packet at the front of s->in (struct protocol.step). */
int bin_step(struct session *s);
/* While a get waits: is the next packet complete and one that runs at once
 * behind it (Set, Add, Delete, Flush, Stat, Version, Verbosity and their
 * quiet forms; proto.c)? */
bool bin_runs_behind_wait(struct session *s);

/* After a failed commit: answer every request of the batch with an error
 * packet of its opcode and opaque (a Noop still answers plainly, so a
 * multi-get stays framed).  `sent` holds the batch's replies as they were;
 * those kept (enum reply_keep) are sent from it. */
void bin_fail_batch(struct session *s, struct evbuffer *sent, bool in_doubt,
    const char *reason);

#endif
