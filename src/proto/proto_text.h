/*
 * proto_text.h -- the memcache text protocol: one command line in, one
 * parsed command out.  Pure functions: no I/O, no allocation, no store.
 * Framing (finding line ends, reading data blocks, the 8192-byte line cap)
 * is conn.c's job; this file only understands a single line without its
 * line terminator.
 */
#ifndef SAKER_PROTO_TEXT_H
#define SAKER_PROTO_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_MAX_LINE 8192     /* longest command line, terminator excluded */
#define PROTO_MAX_KEYS 128      /* most keys in one get */

/* Fixed error replies (CONTRACT §4). */
#define PROTO_ERR_UNKNOWN      "ERROR\r\n"
#define PROTO_ERR_FORMAT       "CLIENT_ERROR bad command line format\r\n"
#define PROTO_ERR_CHUNK        "CLIENT_ERROR bad data chunk\r\n"
#define PROTO_ERR_TOO_LARGE    "SERVER_ERROR object too large for cache\r\n"
#define PROTO_ERR_LINE_TOO_LONG "CLIENT_ERROR line too long\r\n"
#define PROTO_ERR_TOO_MANY_KEYS "CLIENT_ERROR too many keys\r\n"
#define PROTO_ERR_QNAME        "CLIENT_ERROR bad queue name\r\n"
#define PROTO_ERR_COMBINATION  "CLIENT_ERROR bad option combination\r\n"
#define PROTO_ERR_OPTION       "CLIENT_ERROR unknown option\r\n"

enum proto_cmd_type {
	PROTO_CMD_NONE = 0,
	PROTO_CMD_SET,           /* set and add */
	PROTO_CMD_GET,           /* get and gets */
	PROTO_CMD_NOSTORE,       /* replace, append, prepend, cas: refused on a
	                          * queue after their data block is read */
	PROTO_CMD_DELETE,
	PROTO_CMD_FLUSH,
	PROTO_CMD_FLUSH_ALL,
	PROTO_CMD_FLUSH_EXPIRED,
	PROTO_CMD_MONITOR,
	PROTO_CMD_CONFIRM,
	PROTO_CMD_STATS,
	PROTO_CMD_STATUS,
	PROTO_CMD_VERSION,
	PROTO_CMD_VERBOSITY,
	PROTO_CMD_QUIT,
	PROTO_CMD_SHUTDOWN
};

/* get options (bits of proto_key.opts) */
#define PROTO_OPT_OPEN    0x01u
#define PROTO_OPT_CLOSE   0x02u
#define PROTO_OPT_ABORT   0x04u
#define PROTO_OPT_PEEK    0x08u

/* One key token: "jobs/t=250/open". */
struct proto_key {
	const char *raw;         /* the token exactly as sent (echoed in VALUE) */
	size_t raw_len;
	const char *name;        /* the queue name: raw up to the first '/' */
	size_t name_len;
	unsigned opts;           /* PROTO_OPT_* */
	int64_t timeout_ms;      /* t=<ms>; -1 when absent */
};

enum proto_status_arg {
	PROTO_STATUS_QUERY = 0,  /* plain "status" */
	PROTO_STATUS_UP,
	PROTO_STATUS_READONLY,
	PROTO_STATUS_QUIESCENT
};

struct proto_cmd {
	enum proto_cmd_type type;
	bool noreply;
	bool cas;                /* GET: gets (VALUE lines carry a CAS field) */
	const char *word;        /* the command word as sent (NOSTORE's reply) */
	size_t word_len;

	/* SET, DELETE, FLUSH, FLUSH_EXPIRED, MONITOR, CONFIRM: keys[0] is the
	 * queue.  GET: keys[0..nkeys-1]. */
	size_t nkeys;
	struct proto_key keys[PROTO_MAX_KEYS];

	/* SET, NOSTORE */
	uint32_t flags;
	int64_t exptime;         /* as sent (memcache rules applied by the caller) */
	size_t bytes;            /* data block length */
	int64_t delay_ms;        /* /delay=<ms>; -1 when absent */
	int64_t at_s;            /* /at=<unix seconds>; -1 when absent */

	/* MONITOR: seconds, max (-1 = no max); CONFIRM: n; VERBOSITY: level;
	 * FLUSH_ALL: optional delay (ignored by the server) */
	int64_t num1;
	int64_t num2;

	enum proto_status_arg status;

	/* When parsing failed on a "set" line whose <bytes> field was valid,
	 * the number of data bytes (plus the 2-byte terminator) the client
	 * will send anyway and the caller should read and discard, so the
	 * connection stays in step; otherwise -1. */
	int64_t swallow;
};

/*
 * Parse one command line (without "\r\n" or "\n").  On success returns NULL
 * and fills *cmd.  On failure returns the reply to send (one of PROTO_ERR_*,
 * "\r\n" included) and sets cmd->swallow as described above.  Pointers in
 * *cmd point into `line`.
 *
 * Checks done here: command word (case-insensitive), argument count, every
 * number (decimal, in range; flags fit 32 bits; bytes <= SIZE_MAX), queue
 * names (CONTRACT §2), get options (t=, open, close, abort, peek; forbidden
 * combinations; unknown options), set options (delay=, at=; not both; no
 * negative or overflowing values; delay at most 10 years = 315360000000 ms,
 * at= at most year 9999), the 128-key cap.
 */
const char *proto_parse_line(const char *line, size_t len, struct proto_cmd *cmd);

#endif
