/*
 * proto_text.h -- the memcache text protocol: one command line in, one
 * parsed command out.  Pure functions: no I/O, no allocation, no store.
 * Framing (finding line ends, reading data blocks, the line caps: 8192
 * bytes, a get or gets line 1 MiB) is text.c's job; this file only understands a single line without its
 * line terminator.
 */
#ifndef SAKER_PROTO_TEXT_H
#define SAKER_PROTO_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops.h"

#define PROTO_MAX_LINE 8192     /* longest command line, terminator excluded */
/*
 * A text get or gets line may be longer and name more keys, as memcached
 * allows: clients send a get_many of a few hundred or thousand keys as one
 * line.  Bounded so one connection's line buffer, its parsed keys and a
 * waiting get's copy stay a few MB at most (docs/protocol.md).
 */
#define PROTO_MAX_GET_LINE (1024 * 1024)
#define PROTO_MAX_GET_KEYS OP_MAX_GET_KEYS
#define PROTO_MAX_KEYS OP_MAX_KEYS  /* most keys in one binary or meta get group */

/* Fixed error replies (docs/protocol.md, "Errors"). */
#define PROTO_ERR_UNKNOWN      "ERROR\r\n"
#define PROTO_ERR_FORMAT       "CLIENT_ERROR bad command line format\r\n"
#define PROTO_ERR_CHUNK        "CLIENT_ERROR bad data chunk\r\n"
#define PROTO_ERR_TOO_LARGE    "SERVER_ERROR object too large for cache\r\n"
#define PROTO_ERR_LINE_TOO_LONG "CLIENT_ERROR line too long\r\n"
#define PROTO_ERR_TOO_MANY_KEYS "CLIENT_ERROR too many keys\r\n"
#define PROTO_ERR_QNAME        "CLIENT_ERROR bad queue name\r\n"
#define PROTO_ERR_COMBINATION  "CLIENT_ERROR bad option combination\r\n"
#define PROTO_ERR_OPTION       "CLIENT_ERROR unknown option\r\n"
#define PROTO_ERR_DENIED       "CLIENT_ERROR permission denied\r\n"
#define PROTO_ERR_ID           "CLIENT_ERROR bad id (1 to 128 bytes, no '/', space or control character)\r\n"

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
	PROTO_CMD_TOUCH,         /* touch <q> <exptime> [noreply] */
	PROTO_CMD_REQUEUE,       /* requeue <from> <to> <max>: keys[0], keys[1] */
	PROTO_CMD_STATS,
	PROTO_CMD_STATUS,
	PROTO_CMD_VERSION,
	PROTO_CMD_VERBOSITY,
	PROTO_CMD_QUIT,
	PROTO_CMD_SHUTDOWN
};

/* get options (bits of proto_key.opts) */
#define PROTO_OPT_OPEN    OP_OPT_OPEN
#define PROTO_OPT_CLOSE   OP_OPT_CLOSE
#define PROTO_OPT_ABORT   OP_OPT_ABORT
#define PROTO_OPT_PEEK    OP_OPT_PEEK
#define PROTO_OPT_TOUCH   OP_OPT_TOUCH

/* One key token: "jobs/t=250/open".  It is the broker's struct op_key
 * (ops.h), so a parsed line runs without copying its keys. */
#define proto_key op_key

enum proto_stats_arg {
	PROTO_STATS_ALL = 0,     /* plain "stats" */
	PROTO_STATS_QUEUES,      /* "stats queues [PREFIX]": keys[0] the prefix
	                          * when nkeys is 1 */
	PROTO_STATS_QUEUE        /* "stats queue NAME": keys[0] */
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
	struct proto_key keys[PROTO_MAX_GET_KEYS];

	/* SET, NOSTORE */
	uint32_t flags;
	int64_t exptime;         /* as sent (memcache rules applied by the caller) */
	size_t bytes;            /* data block length */
	int64_t delay_ms;        /* /delay=<ms>; -1 when absent */
	int64_t at_s;            /* /at=<unix seconds>; -1 when absent */
	const char *id;          /* /id=<KEY>, the deduplication id; NULL
	                          * when absent */
	size_t id_len;

	/* MONITOR: seconds, max (-1 = no max); CONFIRM: n; VERBOSITY: level;
	 * FLUSH_ALL: optional delay (ignored by the server) */
	int64_t num1;
	int64_t num2;

	enum proto_status_arg status;
	enum proto_stats_arg stats;

	/* When parsing failed on a "set" line whose <bytes> field was valid,
	 * the number of data bytes (plus the 2-byte terminator) the client
	 * will send anyway and the caller should read and discard, so the
	 * connection stays in step; otherwise -1. */
	int64_t swallow;
};

/* The protocol layer's scratch for the commands of one broker (one runs
 * at a time), here rather than in static storage: broker.proto, the
 * carrier's.  A proto_cmd is 560 KB. */
struct proto_scratch {
	struct proto_cmd line;          /* text_line()'s command */
	struct proto_cmd behind;        /* text_runs_behind_wait()'s */
	struct proto_cmd key;           /* a binary or meta key parsed as a line */
	char key_line[PROTO_MAX_LINE];  /* ... that line */
	char meta_key[PROTO_MAX_LINE];  /* meta_command()'s key */
};

/*
 * The one tokenizer of the text protocol (command lines, meta commands,
 * the ASCII login): tokens are separated by spaces and tabs.  `cls` says
 * whether a token holds a byte no queue name may hold (PROTO_TOK_BAD: a
 * control character, DEL, a byte >= 0x80) or a '/' (PROTO_TOK_SLASH).
 */
#define PROTO_TOK_BAD   2u
#define PROTO_TOK_SLASH 4u
struct proto_cursor {
	const char *p;
	const char *end;
};
struct proto_tok {
	const char *p;
	size_t n;
	unsigned cls;            /* PROTO_TOK_* of all its bytes */
};
/* Take the next token; false at the end of the line. */
bool proto_next_tok(struct proto_cursor *cur, struct proto_tok *t);

/* Strict decimals: digits only, at most max; an optional '-' for an int64_t. */
bool proto_u64(const char *p, size_t n, uint64_t max, uint64_t *out);
bool proto_i64(const char *p, size_t n, int64_t *out);

/*
 * Is this (possibly incomplete) line a get or gets?  Those may be up to
 * PROTO_MAX_GET_LINE bytes long, every other line PROTO_MAX_LINE.
 */
bool proto_is_get_line(const char *line, size_t len);

/*
 * Parse one command line (without "\r\n" or "\n").  On success returns NULL
 * and fills *cmd.  On failure returns the reply to send (one of PROTO_ERR_*,
 * "\r\n" included) and sets cmd->swallow as described above.  Pointers in
 * *cmd point into `line`.
 *
 * Checks done here: command word (case-insensitive), argument count, every
 * number (decimal, in range; flags fit 32 bits; bytes <= SIZE_MAX), queue
 * names (docs/protocol.md, "Queue names"), get options (t=, open, close, abort, peek; forbidden
 * combinations; unknown options), set options (delay=, at=; not both; no
 * negative or overflowing values; delay at most 10 years = 315360000000 ms,
 * at= at most year 9999; id= once, 1..SAKER_DEDUP_KEY_MAX bytes of the key
 * charset without '/'), the get key cap (PROTO_MAX_GET_KEYS) and the
 * line caps (PROTO_MAX_GET_LINE for get and gets, else PROTO_MAX_LINE).
 */
const char *proto_parse_line(const char *line, size_t len, struct proto_cmd *cmd);

/*
 * Validate a key that came without a text line (binary protocol, meta
 * commands): as a get key (name plus options) or as a set key (name plus
 * delay=/at=/id=).  On success returns NULL and fills *k (name_len, opts,
 * timeout_ms; raw and name point at key) and, for a set key, *delay_ms,
 * *at_s and *id, *id_len (NULL, 0 without an id; *id points into key).
 * On failure returns the text error (a PROTO_ERR_* string).
 */
const char *proto_parse_get_key(struct proto_scratch *sc, const char *key,
    size_t len, struct proto_key *k);
const char *proto_parse_set_key(struct proto_scratch *sc, const char *key,
    size_t len, struct proto_key *k, int64_t *delay_ms, int64_t *at_s,
    const char **id, size_t *id_len);

#endif
