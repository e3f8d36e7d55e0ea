/* proto_text.c -- parse one memcache text-protocol line (docs/protocol.md:
 * "Queue names", "Enqueue: set", "Dequeue: get", "Errors"). */
#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "requeue.h"
#include "proto_text.h"
#include "qname.h"

/*
 * Design: the line is walked once, left to right, by next_tok(); each
 * command's parser pulls the tokens it expects and validates them as they
 * come, so the first error in the line decides the reply.  Nothing is
 * allocated and nothing is copied: every pointer in struct proto_cmd points
 * into the caller's line, which is what lets a VALUE line echo the key
 * exactly as the client sent it.
 */

/*
 * Largest <bytes> on a set: it must fit a size_t, and bytes + 2 must fit
 * the int64_t swallow count.
 */
#if SIZE_MAX < INT64_MAX
#define SET_BYTES_MAX	((uint64_t)SIZE_MAX)
#else
#define SET_BYTES_MAX	((uint64_t)INT64_MAX - 2)
#endif

#define GET_TIMEOUT_MAX	((uint64_t)1 << 31)		/* t=<ms> */
/* monitor <q> <seconds>: the same bound as t=, so seconds * 1000 fits */
#define MONITOR_SECONDS_MAX (GET_TIMEOUT_MAX / 1000)
#define SET_DELAY_MAX	UINT64_C(315360000000)		/* 10 years in ms */
#define SET_AT_MAX	UINT64_C(253402300799)		/* 9999-12-31T23:59:59Z */
#define SET_ID_MAX	OP_ID_MAX			/* bytes of an id= */

/*
 * Byte classes, so the tokeniser spends one table load per byte.  Tokens
 * are separated by spaces and tabs; any other control character, DEL or a
 * byte >= 0x80 stays inside the token but marks it bad.  Noting '/' on the
 * way lets a key without options skip the search for its first '/'.
 */
#define K_SEP	1
#define K_BAD	2
#define K_SLASH	4
#define BAD16	K_BAD, K_BAD, K_BAD, K_BAD, K_BAD, K_BAD, K_BAD, K_BAD, \
		K_BAD, K_BAD, K_BAD, K_BAD, K_BAD, K_BAD, K_BAD, K_BAD
#define OK16	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0

static const unsigned char byte_class[256] = {
	/* 0x00 */ K_BAD, K_BAD, K_BAD, K_BAD, K_BAD, K_BAD, K_BAD, K_BAD,
	/* 0x08 */ K_BAD, K_SEP, K_BAD, K_BAD, K_BAD, K_BAD, K_BAD, K_BAD,
	/* 0x10 */ BAD16,
	/* 0x20 */ K_SEP, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, K_SLASH,
	/* 0x30 */ OK16, OK16, OK16, OK16,
	/* 0x70 */ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, K_BAD,
	/* 0x80 */ BAD16, BAD16, BAD16, BAD16, BAD16, BAD16, BAD16, BAD16
};

#if K_BAD != PROTO_TOK_BAD || K_SLASH != PROTO_TOK_SLASH
#error "byte classes and PROTO_TOK_* disagree"
#endif

struct cursor {
	const char *p;
	const char *end;
};

struct tok {
	const char *p;
	size_t n;
	unsigned cls;		/* K_BAD and K_SLASH of all its bytes */
};

/* Take the next space/tab-separated token; false at the end of the line. */
static inline bool
next_tok(struct cursor *cur, struct tok *t)
{
	const unsigned char *p = (const unsigned char *)cur->p;
	const unsigned char *end = (const unsigned char *)cur->end;
	const unsigned char *start;
	unsigned c, acc = 0;

	while (p < end && byte_class[*p] == K_SEP)
		p++;
	if (p == end) {
		cur->p = cur->end;
		return false;
	}
	start = p;
	for (; p < end && ((c = byte_class[*p]) & K_SEP) == 0; p++)
		acc |= c;
	t->p = (const char *)start;
	t->n = (size_t)(p - start);
	t->cls = acc;
	cur->p = (const char *)p;
	return true;
}

/* Exact, case-sensitive match of a token against a literal. */
static bool
tok_is(const struct tok *t, const char *lit, size_t litlen)
{
	return t->n == litlen && memcmp(t->p, lit, litlen) == 0;
}

/* ASCII case-insensitive match; `lower` must be lower case. */
static bool
tok_is_ci(const char *p, size_t n, const char *lower, size_t lowerlen)
{
	size_t i;

	if (n != lowerlen)
		return false;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c >= 'A' && c <= 'Z')
			c += 'a' - 'A';
		if (c != (unsigned char)lower[i])
			return false;
	}
	return true;
}

/*
 * Strict unsigned decimal: one or more digits, nothing else (no sign, no
 * space, no hex), value <= max.  strtoull would accept " +0x1f" and wrap
 * silently, which is exactly what a protocol parser must not do.
 */
bool
proto_u64(const char *p, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (n == 0)
		return false;
	for (i = 0; i < n; i++) {
		unsigned d = (unsigned)(unsigned char)p[i] - '0';
		if (d > 9)
			return false;
		if (v > max / 10 || (v == max / 10 && d > max % 10))
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

/* Strict signed decimal: an optional '-' then digits; fits int64_t. */
bool
proto_i64(const char *p, size_t n, int64_t *out)
{
	uint64_t mag;

	if (n > 0 && p[0] == '-') {
		/* the magnitude of INT64_MIN is INT64_MAX + 1 */
		if (!proto_u64(p + 1, n - 1, (uint64_t)INT64_MAX + 1, &mag))
			return false;
		if (mag == (uint64_t)INT64_MAX + 1)
			*out = INT64_MIN;
		else
			*out = -(int64_t)mag;
		return true;
	}
	if (!proto_u64(p, n, (uint64_t)INT64_MAX, &mag))
		return false;
	*out = (int64_t)mag;
	return true;
}

/* A non-negative int64_t token. */
static bool
parse_count(const struct tok *t, int64_t *out)
{
	uint64_t v;

	if (!proto_u64(t->p, t->n, (uint64_t)INT64_MAX, &v))
		return false;
	*out = (int64_t)v;
	return true;
}

/* No token left on the line. */
static bool
at_end(struct cursor *cur)
{
	struct tok t;

	return !next_tok(cur, &t);
}

/* An optional trailing "noreply" and then the end of the line; all of
 * delete <q> [noreply] and flush <q> [noreply] after the queue. */
static const char *
parse_noreply_end(struct cursor *cur, struct proto_cmd *cmd)
{
	struct tok t;

	if (!next_tok(cur, &t))
		return NULL;
	if (!tok_is(&t, "noreply", 7) || !at_end(cur))
		return PROTO_ERR_FORMAT;
	cmd->noreply = true;
	return NULL;
}

static void
key_init(struct proto_key *k, const struct tok *t, size_t name_len)
{
	k->raw = t->p;
	k->raw_len = t->n;
	k->name = t->p;
	k->name_len = name_len;
	k->opts = 0;
	k->timeout_ms = -1;
	k->delay_ms = -1;
}

/* A queue name with no options (delete, flush, monitor, ...). */
static const char *
take_plain_queue(struct cursor *cur, struct proto_cmd *cmd)
{
	struct tok t;

	if (!next_tok(cur, &t))
		return PROTO_ERR_FORMAT;
	/* saker_qname_valid rejects '/', so "q/open" is a bad name here */
	if (!saker_qname_valid(t.p, t.n))
		return PROTO_ERR_QNAME;
	key_init(&cmd->keys[0], &t, t.n);
	cmd->nkeys = 1;
	return NULL;
}

/*
 * Split "name/opt/opt" and validate the name.  Any control character or
 * high byte anywhere in the token is a bad name: the raw token is echoed in
 * the VALUE line, so it must never carry bytes that could break framing.
 */
static const char *
split_key(const struct tok *t, struct proto_key *k)
{
	const char *slash;
	size_t name_len = t->n;

	if ((t->cls & K_BAD) != 0)
		return PROTO_ERR_QNAME;
	if ((t->cls & K_SLASH) != 0) {
		slash = memchr(t->p, '/', t->n);
		name_len = (size_t)(slash - t->p);
	}
	if (!saker_qname_valid(t->p, name_len))
		return PROTO_ERR_QNAME;
	key_init(k, t, name_len);
	return NULL;
}

/*
 * Find the option segment that starts after the '/' at raw[*pos].  Options
 * are a few bytes long: a plain loop beats a memchr call here.
 */
static void
next_segment(const struct proto_key *k, size_t *pos, const char **seg,
    size_t *seglen)
{
	size_t i = *pos + 1;	/* skip the '/' */
	size_t start = i;

	while (i < k->raw_len && k->raw[i] != '/')
		i++;
	*seg = k->raw + start;
	*seglen = i - start;
	*pos = i;
}

/* One get key:
 * "name[/t=<ms>][/open][/close][/abort[/delay=<ms>]][/peek][/touch]". */
static const char *
parse_get_key(const struct tok *t, struct proto_key *k)
{
	const char *err, *seg;
	size_t pos, seglen;
	uint64_t ms;

	if ((err = split_key(t, k)) != NULL)
		return err;
	for (pos = k->name_len; pos < k->raw_len; ) {
		next_segment(k, &pos, &seg, &seglen);
		if (seglen == 4 && memcmp(seg, "open", 4) == 0)
			k->opts |= PROTO_OPT_OPEN;
		else if (seglen == 5 && memcmp(seg, "close", 5) == 0)
			k->opts |= PROTO_OPT_CLOSE;
		else if (seglen == 5 && memcmp(seg, "abort", 5) == 0)
			k->opts |= PROTO_OPT_ABORT;
		else if (seglen == 4 && memcmp(seg, "peek", 4) == 0)
			k->opts |= PROTO_OPT_PEEK;
		else if (seglen == 5 && memcmp(seg, "touch", 5) == 0)
			k->opts |= PROTO_OPT_TOUCH;
		else if (seglen >= 6 && memcmp(seg, "delay=", 6) == 0) {
			if (!proto_u64(seg + 6, seglen - 6, SET_DELAY_MAX,
			    &ms))
				return PROTO_ERR_FORMAT;
			k->delay_ms = (int64_t)ms;
		} else if (seglen >= 2 && seg[0] == 't' && seg[1] == '=') {
			if (!proto_u64(seg + 2, seglen - 2, GET_TIMEOUT_MAX,
			    &ms))
				return PROTO_ERR_FORMAT;
			k->timeout_ms = (int64_t)ms;
		} else
			return PROTO_ERR_OPTION;	/* includes empty "//" */
	}
	/*
	 * peek never takes the item, abort hands back rather than reads: both
	 * contradict a transaction being opened or closed in the same request.
	 */
	if ((k->opts & (PROTO_OPT_PEEK | PROTO_OPT_ABORT)) != 0 &&
	    (k->opts & (PROTO_OPT_OPEN | PROTO_OPT_CLOSE)) != 0)
		return PROTO_ERR_COMBINATION;
	if ((k->opts & PROTO_OPT_PEEK) != 0 && (k->opts & PROTO_OPT_ABORT) != 0)
		return PROTO_ERR_COMBINATION;
	/* a delay says when an aborted item comes back: nothing else has
	 * one; a touch keeps the item, so it goes with nothing that ends
	 * or takes one */
	if (k->delay_ms >= 0 && (k->opts & PROTO_OPT_ABORT) == 0)
		return PROTO_ERR_COMBINATION;
	if ((k->opts & PROTO_OPT_TOUCH) != 0 && (k->opts & ~PROTO_OPT_TOUCH) != 0)
		return PROTO_ERR_COMBINATION;
	return NULL;
}

/*
 * A set key with a control character or high byte: a bad id when the byte
 * is in an "id=" segment and the name before it is clean (the id's own
 * message says what an id may hold), else a bad queue name as for every
 * key.
 */
static const char *
bad_set_key(const struct tok *t)
{
	const char *p = memchr(t->p, '/', t->n), *end = t->p + t->n;
	const char *seg;
	size_t i;

	if (p == NULL)
		return PROTO_ERR_QNAME;
	for (i = 0; i < (size_t)(p - t->p); i++)
		if (byte_class[(unsigned char)t->p[i]] & K_BAD)
			return PROTO_ERR_QNAME;
	while (p < end) {
		bool bad = false;

		seg = ++p;
		while (p < end && *p != '/')
			bad |= (byte_class[(unsigned char)*p++] & K_BAD) != 0;
		if (bad)
			return p - seg >= 3 && memcmp(seg, "id=", 3) == 0 ?
			    PROTO_ERR_ID : PROTO_ERR_QNAME;
	}
	return PROTO_ERR_QNAME;
}

/* The set key: "name[/delay=<ms>|/at=<unix seconds>][/id=<KEY>]". */
static const char *
parse_set_key(const struct tok *t, struct proto_cmd *cmd)
{
	struct proto_key *k = &cmd->keys[0];
	const char *err, *seg;
	size_t pos, seglen;
	uint64_t v;

	if ((t->cls & K_BAD) != 0)
		return bad_set_key(t);
	if ((err = split_key(t, k)) != NULL)
		return err;
	cmd->nkeys = 1;
	for (pos = k->name_len; pos < k->raw_len; ) {
		next_segment(k, &pos, &seg, &seglen);
		if (seglen >= 3 && memcmp(seg, "id=", 3) == 0) {
			/* the id is what the store keeps: 1..SET_ID_MAX
			 * bytes ('/' ends the segment, the tokenizer took
			 * spaces and controls); given twice is ambiguous */
			if (seglen == 3 || seglen - 3 > SET_ID_MAX)
				return PROTO_ERR_ID;
			if (cmd->id != NULL)
				return PROTO_ERR_FORMAT;
			cmd->id = seg + 3;
			cmd->id_len = seglen - 3;
		} else if (seglen >= 6 && memcmp(seg, "delay=", 6) == 0) {
			if (!proto_u64(seg + 6, seglen - 6, SET_DELAY_MAX, &v))
				return PROTO_ERR_FORMAT;
			cmd->delay_ms = (int64_t)v;
		} else if (seglen >= 3 && memcmp(seg, "at=", 3) == 0) {
			if (!proto_u64(seg + 3, seglen - 3, SET_AT_MAX, &v))
				return PROTO_ERR_FORMAT;
			cmd->at_s = (int64_t)v;
		} else
			return PROTO_ERR_OPTION;
	}
	/* two different due times for one item: the line is malformed */
	if (cmd->delay_ms >= 0 && cmd->at_s >= 0)
		return PROTO_ERR_FORMAT;
	return NULL;
}

/* set <key> <flags> <exptime> <bytes> [noreply] */
static const char *
parse_set(struct cursor *cur, struct proto_cmd *cmd)
{
	struct tok a[5], extra;
	size_t n = 0;
	uint64_t bytes = 0, flags = 0;
	bool bytes_ok, more;
	const char *err;

	while (n < 5 && next_tok(cur, &a[n]))
		n++;
	more = n == 5 && next_tok(cur, &extra);

	/*
	 * Read <bytes> before anything else can fail: whatever is wrong with
	 * the rest of the line, a client that sent a valid length will send
	 * that many bytes next, and the caller must skip them to stay in step.
	 */
	bytes_ok = n >= 4 && proto_u64(a[3].p, a[3].n, SET_BYTES_MAX, &bytes);
	if (bytes_ok)
		cmd->bytes = (size_t)bytes;

	if (n < 4 || more)
		err = PROTO_ERR_FORMAT;
	else
		err = parse_set_key(&a[0], cmd);
	if (err == NULL && (!proto_u64(a[1].p, a[1].n, UINT32_MAX, &flags) ||
	    !proto_i64(a[2].p, a[2].n, &cmd->exptime) || !bytes_ok ||
	    (n == 5 && !tok_is(&a[4], "noreply", 7))))
		err = PROTO_ERR_FORMAT;
	if (err != NULL) {
		if (bytes_ok)
			cmd->swallow = (int64_t)bytes + 2;
		return err;
	}
	cmd->flags = (uint32_t)flags;
	cmd->noreply = n == 5;
	return NULL;
}

static const char *parse_get(struct cursor *cur, struct proto_cmd *cmd);

/*
 * replace|append|prepend <key> <flags> <exptime> <bytes> [noreply]
 * cas <key> <flags> <exptime> <bytes> <cas unique> [noreply]
 *
 * A queue has no value to replace or extend and no version to compare, so
 * these are refused -- but only after their data block, which the client
 * sends whatever we answer: the line is checked just enough to know how
 * many bytes follow.  The key is not checked: the refusal is the answer.
 */
static const char *
parse_nostore(struct cursor *cur, struct proto_cmd *cmd)
{
	bool is_cas = cmd->word_len == 3;
	size_t want = is_cas ? 5 : 4, n = 0;
	struct tok a[7];
	uint64_t bytes, v;

	while (n < 7 && next_tok(cur, &a[n]))
		n++;
	if (n < 4 || !proto_u64(a[3].p, a[3].n, SET_BYTES_MAX, &bytes))
		return PROTO_ERR_FORMAT;
	cmd->bytes = (size_t)bytes;
	if (n < want || n > want + 1 ||
	    !proto_u64(a[1].p, a[1].n, UINT32_MAX, &v) ||
	    !proto_i64(a[2].p, a[2].n, &cmd->exptime) ||
	    (is_cas && !proto_u64(a[4].p, a[4].n, UINT64_MAX, &v)) ||
	    (n == want + 1 && !tok_is(&a[want], "noreply", 7))) {
		cmd->swallow = (int64_t)bytes + 2;
		return PROTO_ERR_FORMAT;
	}
	cmd->noreply = n == want + 1;
	return NULL;
}

/* gets <key> [<key> ...]: get, with a CAS field in each VALUE line */
static const char *
parse_gets(struct cursor *cur, struct proto_cmd *cmd)
{
	cmd->cas = true;
	return parse_get(cur, cmd);
}

/* get|gets <key> [<key> ...] */
static const char *
parse_get(struct cursor *cur, struct proto_cmd *cmd)
{
	struct tok t;
	const char *err;
	size_t n = 0;

	while (next_tok(cur, &t)) {
		if (n == PROTO_MAX_GET_KEYS)
			return PROTO_ERR_TOO_MANY_KEYS;
		if ((err = parse_get_key(&t, &cmd->keys[n])) != NULL)
			return err;
		cmd->nkeys = ++n;
	}
	if (n == 0)
		return PROTO_ERR_FORMAT;
	return NULL;
}

/* flush_all [<delay>] [noreply] */
static const char *
parse_flush_all(struct cursor *cur, struct proto_cmd *cmd)
{
	struct tok t;

	if (!next_tok(cur, &t))
		return NULL;
	if (tok_is(&t, "noreply", 7)) {
		cmd->noreply = true;
		return at_end(cur) ? NULL : PROTO_ERR_FORMAT;
	}
	if (!parse_count(&t, &cmd->num1))
		return PROTO_ERR_FORMAT;
	return parse_noreply_end(cur, cmd);
}

/* monitor <q> <seconds> [max] */
static const char *
parse_monitor(struct cursor *cur, struct proto_cmd *cmd)
{
	struct tok t;

	if (!next_tok(cur, &t) || !parse_count(&t, &cmd->num1) ||
	    (uint64_t)cmd->num1 > MONITOR_SECONDS_MAX)
		return PROTO_ERR_FORMAT;
	if (next_tok(cur, &t) && !parse_count(&t, &cmd->num2))
		return PROTO_ERR_FORMAT;
	return at_end(cur) ? NULL : PROTO_ERR_FORMAT;
}

/* confirm <q> <n> */
static const char *
parse_confirm(struct cursor *cur, struct proto_cmd *cmd)
{
	struct tok t;

	if (!next_tok(cur, &t) || !parse_count(&t, &cmd->num1))
		return PROTO_ERR_FORMAT;
	return at_end(cur) ? NULL : PROTO_ERR_FORMAT;
}

/* touch <q> <exptime> [noreply]: the lease of the open items (retry.h) */
static const char *
parse_touch(struct cursor *cur, struct proto_cmd *cmd)
{
	struct tok t;

	if (!next_tok(cur, &t) || !proto_i64(t.p, t.n, &cmd->exptime))
		return PROTO_ERR_FORMAT;
	return parse_noreply_end(cur, cmd);
}

/* requeue <from> <to> <max> */
static const char *
parse_requeue(struct cursor *cur, struct proto_cmd *cmd)
{
	struct tok t;

	if (!next_tok(cur, &t))
		return PROTO_ERR_FORMAT;
	if (!saker_qname_valid(t.p, t.n))
		return PROTO_ERR_QNAME;
	key_init(&cmd->keys[1], &t, t.n);
	cmd->nkeys = 2;
	if (!next_tok(cur, &t) || !parse_count(&t, &cmd->num1) ||
	    cmd->num1 < 1 || cmd->num1 > REQUEUE_MAX)
		return PROTO_ERR_FORMAT;
	return at_end(cur) ? NULL : PROTO_ERR_FORMAT;
}

/* verbosity <n> [noreply] */
static const char *
parse_verbosity(struct cursor *cur, struct proto_cmd *cmd)
{
	struct tok t;

	if (!next_tok(cur, &t) || !parse_count(&t, &cmd->num1))
		return PROTO_ERR_FORMAT;
	return parse_noreply_end(cur, cmd);
}

/* status [up|readonly|quiescent] */
static const char *
parse_status(struct cursor *cur, struct proto_cmd *cmd)
{
	struct tok t;

	if (!next_tok(cur, &t))
		return NULL;
	if (tok_is_ci(t.p, t.n, "up", 2))
		cmd->status = PROTO_STATUS_UP;
	else if (tok_is_ci(t.p, t.n, "readonly", 8))
		cmd->status = PROTO_STATUS_READONLY;
	else if (tok_is_ci(t.p, t.n, "quiescent", 9))
		cmd->status = PROTO_STATUS_QUIESCENT;
	else
		return PROTO_ERR_FORMAT;
	return at_end(cur) ? NULL : PROTO_ERR_FORMAT;
}

/* stats [queues [PREFIX] | queue NAME] */
static const char *
parse_stats(struct cursor *cur, struct proto_cmd *cmd)
{
	struct tok t;

	if (!next_tok(cur, &t))
		return NULL;
	if (tok_is(&t, "queues", 6)) {
		cmd->stats = PROTO_STATS_QUEUES;
		if (next_tok(cur, &t)) {
			/* any prefix of a name: the name's bytes, no '/' */
			if ((t.cls & (K_BAD | K_SLASH)) != 0 || t.n > 250)
				return PROTO_ERR_QNAME;
			key_init(&cmd->keys[0], &t, t.n);
			cmd->nkeys = 1;
		}
		return at_end(cur) ? NULL : PROTO_ERR_FORMAT;
	}
	if (tok_is(&t, "queue", 5)) {
		cmd->stats = PROTO_STATS_QUEUE;
		if (take_plain_queue(cur, cmd) != NULL)
			return PROTO_ERR_FORMAT;
		return at_end(cur) ? NULL : PROTO_ERR_FORMAT;
	}
	return PROTO_ERR_FORMAT;
}

/* stats, version, quit, shutdown; flush_expired <q> */
static const char *
parse_no_args(struct cursor *cur, struct proto_cmd *cmd)
{
	(void)cmd;
	return at_end(cur) ? NULL : PROTO_ERR_FORMAT;
}

typedef const char *(*parse_fn)(struct cursor *, struct proto_cmd *);

/*
 * The hot commands first: lookup is a linear scan by length then bytes.
 * `queue`: the first argument is a queue name without options, taken
 * (take_plain_queue) before the command's parser reads the rest.
 */
static const struct command {
	const char *name;
	size_t len;
	enum proto_cmd_type type;
	bool queue;
	parse_fn parse;
} commands[] = {
	{ "get",		3,  PROTO_CMD_GET,		false, parse_get },
	{ "set",		3,  PROTO_CMD_SET,		false, parse_set },
	{ "gets",		4,  PROTO_CMD_GET,		false, parse_gets },
	{ "delete",		6,  PROTO_CMD_DELETE,		true,  parse_noreply_end },
	{ "confirm",		7,  PROTO_CMD_CONFIRM,		true,  parse_confirm },
	{ "touch",		5,  PROTO_CMD_TOUCH,		true,  parse_touch },
	{ "monitor",		7,  PROTO_CMD_MONITOR,		true,  parse_monitor },
	{ "flush",		5,  PROTO_CMD_FLUSH,		true,  parse_noreply_end },
	{ "flush_all",		9,  PROTO_CMD_FLUSH_ALL,	false, parse_flush_all },
	{ "flush_expired",	13, PROTO_CMD_FLUSH_EXPIRED,	true,  parse_no_args },
	{ "requeue",		7,  PROTO_CMD_REQUEUE,		true,  parse_requeue },
	{ "stats",		5,  PROTO_CMD_STATS,		false, parse_stats },
	{ "status",		6,  PROTO_CMD_STATUS,		false, parse_status },
	{ "version",		7,  PROTO_CMD_VERSION,		false, parse_no_args },
	{ "verbosity",		9,  PROTO_CMD_VERBOSITY,	false, parse_verbosity },
	{ "quit",		4,  PROTO_CMD_QUIT,		false, parse_no_args },
	{ "shutdown",		8,  PROTO_CMD_SHUTDOWN,		false, parse_no_args },
	/* a queue's "add" is an enqueue like set (docs/protocol.md) */
	{ "add",		3,  PROTO_CMD_SET,		false, parse_set },
	{ "replace",		7,  PROTO_CMD_NOSTORE,		false, parse_nostore },
	{ "append",		6,  PROTO_CMD_NOSTORE,		false, parse_nostore },
	{ "prepend",		7,  PROTO_CMD_NOSTORE,		false, parse_nostore },
	{ "cas",		3,  PROTO_CMD_NOSTORE,		false, parse_nostore },
};

bool
proto_is_get_line(const char *line, size_t len)
{
	struct cursor cur = { line, line + len };
	struct tok word;

	/* the word must be complete: "get" alone may yet become "getx" */
	if (!next_tok(&cur, &word) || cur.p == cur.end)
		return false;
	return tok_is_ci(word.p, word.n, "get", 3) ||
	    tok_is_ci(word.p, word.n, "gets", 4);
}

const char *
proto_parse_line(const char *line, size_t len, struct proto_cmd *cmd)
{
	struct cursor cur;
	struct tok word;
	const char *err;
	size_t i;

	/*
	 * Scalars only: clearing the key array would cost more than parsing a
	 * typical line.
	 */
	cmd->type = PROTO_CMD_NONE;
	cmd->noreply = false;
	cmd->cas = false;
	cmd->nkeys = 0;
	cmd->flags = 0;
	cmd->exptime = 0;
	cmd->bytes = 0;
	cmd->delay_ms = -1;
	cmd->at_s = -1;
	cmd->id = NULL;
	cmd->id_len = 0;
	cmd->num1 = -1;
	cmd->num2 = -1;
	cmd->status = PROTO_STATUS_QUERY;
	cmd->stats = PROTO_STATS_ALL;
	cmd->swallow = -1;

	/* text.c enforces the caps; this only keeps a caller's slip harmless */
	if (line == NULL)
		return PROTO_ERR_UNKNOWN;
	if (len > PROTO_MAX_LINE &&
	    (len > PROTO_MAX_GET_LINE || !proto_is_get_line(line, len)))
		return PROTO_ERR_LINE_TOO_LONG;

	cur.p = line;
	cur.end = line + len;
	if (!next_tok(&cur, &word))
		return PROTO_ERR_UNKNOWN;
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		const struct command *c = &commands[i];

		if (!tok_is_ci(word.p, word.n, c->name, c->len))
			continue;
		cmd->type = c->type;
		cmd->word = word.p;
		cmd->word_len = word.n;
		err = c->queue ? take_plain_queue(&cur, cmd) : NULL;
		if (err == NULL)
			err = c->parse(&cur, cmd);
		if (err != NULL)
			cmd->noreply = false;
		return err;
	}
	return PROTO_ERR_UNKNOWN;
}

/* The same tokenizer for the other readers of text lines (text.c's login,
 * proto_meta.c); the parser above keeps its own inlined copy. */
bool
proto_next_tok(struct proto_cursor *pc, struct proto_tok *pt)
{
	struct cursor cur = { pc->p, pc->end };
	struct tok t;

	if (!next_tok(&cur, &t)) {
		pc->p = pc->end;
		return false;
	}
	pc->p = cur.p;
	pt->p = t.p;
	pt->n = t.n;
	pt->cls = t.cls;
	return true;
}

/*
 * Keys that come without a text line are checked by the text parser itself,
 * on a line made for the purpose: one definition of what a queue name and
 * its options may be.  A key with a space or a tab splits into two tokens,
 * which is a bad queue name for every protocol.
 */
static const char *
parse_as_line(struct proto_scratch *sc, const char *prefix, size_t plen,
    const char *key, size_t len, const char *suffix, size_t slen)
{
	struct proto_cmd *cmd = &sc->key;
	char *line = sc->key_line;
	const char *err;

	if (len == 0)
		return PROTO_ERR_FORMAT;
	if (memchr(key, ' ', len) != NULL || memchr(key, '\t', len) != NULL)
		return PROTO_ERR_QNAME;
	if (plen + len + slen > sizeof(sc->key_line))
		return PROTO_ERR_QNAME;
	memcpy(line, prefix, plen);
	memcpy(line + plen, key, len);
	memcpy(line + plen + len, suffix, slen);
	err = proto_parse_line(line, plen + len + slen, cmd);
	if (err != NULL)
		return err;
	if (cmd->keys[0].raw_len != len || (cmd->type == PROTO_CMD_GET && cmd->nkeys != 1))
		return PROTO_ERR_QNAME;
	return NULL;
}

const char *
proto_parse_get_key(struct proto_scratch *sc, const char *key, size_t len,
    struct proto_key *k)
{
	const char *err;

	err = parse_as_line(sc, "get ", 4, key, len, "", 0);
	if (err != NULL)
		return err;
	*k = sc->key.keys[0];
	k->raw = k->name = key;
	return NULL;
}

/* Does a space or tab of this binary or meta set key sit in its "id="
 * segment (a bad id rather than a bad queue name)? */
static bool
blank_in_id(const char *key, size_t len)
{
	const char *p = memchr(key, '/', len), *end = key + len, *seg;

	if (p == NULL || memchr(key, ' ', (size_t)(p - key)) != NULL ||
	    memchr(key, '\t', (size_t)(p - key)) != NULL)
		return false;	/* the name's: a bad queue name */
	while (p < end) {
		bool blank = false;

		seg = ++p;
		for (; p < end && *p != '/'; p++)
			if (*p == ' ' || *p == '\t')
				blank = true;
		if (blank)
			return p - seg >= 3 && memcmp(seg, "id=", 3) == 0;
	}
	return false;
}

const char *
proto_parse_set_key(struct proto_scratch *sc, const char *key, size_t len,
    struct proto_key *k, int64_t *delay_ms, int64_t *at_s, const char **id,
    size_t *id_len)
{
	const char *err;

	/* a set line with extra tokens is a format error, so a key holding a
	 * space cannot pass as a shorter key */
	if (blank_in_id(key, len))
		return PROTO_ERR_ID;
	err = parse_as_line(sc, "set ", 4, key, len, " 0 0 0", 6);
	if (err != NULL)
		return err;
	*k = sc->key.keys[0];
	k->raw = k->name = key;
	*delay_ms = sc->key.delay_ms;
	*at_s = sc->key.at_s;
	/* the id as the caller's bytes, not the scratch line's */
	*id = sc->key.id == NULL ? NULL :
	    key + (sc->key.id - sc->key.keys[0].raw);
	*id_len = sc->key.id_len;
	return NULL;
}
