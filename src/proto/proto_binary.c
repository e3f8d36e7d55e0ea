/* proto_binary.c -- memcached's binary protocol: packet framing, the
 * commands, and replies written for the shared command layer. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "auth.h"
#include "bytes.h"
#include "getgroup.h"
#include "log.h"
#include "proto_binary.h"
#include "qname.h"
#include "pstate.h"
#include "report.h"

/*
 * Every request carries a header of 24 bytes: magic 0x80, opcode, key
 * length, extras length, data type, vbucket, body length, opaque, CAS.  A
 * header that cannot be trusted (wrong magic, key and extras longer than
 * the body) means the stream is lost: only this connection is closed.
 * Anything else wrong with a request is answered with an error packet and
 * its body skipped, so the connection stays in step.
 */

/* Bodies of requests other than set are small: key, extras, a SASL blob. */
#define BIN_MAX_SMALL_BODY 4096

/* One response packet into c->pend; CAS is always zero. */
static void
bin_put(struct session *c, uint8_t opcode, uint16_t status, uint32_t opaque,
    const void *ext, size_t extlen, const void *key, size_t keylen,
    const void *val, size_t vallen)
{
	unsigned char h[BIN_HEADER];

	memset(h, 0, sizeof(h));
	h[0] = BIN_RES_MAGIC;
	h[1] = opcode;
	saker_put_be16(h + 2, (uint16_t)keylen);
	h[4] = (unsigned char)extlen;
	saker_put_be16(h + 6, status);
	saker_put_be32(h + 8, (uint32_t)(extlen + keylen + vallen));
	saker_put_be32(h + 12, opaque);
	evbuffer_add(c->pend, h, sizeof(h));
	if (extlen > 0)
		evbuffer_add(c->pend, ext, extlen);
	if (keylen > 0)
		evbuffer_add(c->pend, key, keylen);
	if (vallen > 0)
		evbuffer_add(c->pend, val, vallen);
}

static void
bin_reply(struct session *c, uint8_t opcode, uint16_t status, uint32_t opaque,
    const void *key, size_t keylen, const void *val, size_t vallen)
{
	bin_put(c, opcode, status, opaque, NULL, 0, key, keylen, val, vallen);
	reply_record(c, opcode, opaque);
}

static void
bin_error(struct session *c, uint8_t opcode, uint32_t opaque, uint16_t status,
    const char *msg)
{
	bin_reply(c, opcode, status, opaque, NULL, 0, msg, strlen(msg));
}

/* The status and message for a command-layer result. */
static uint16_t
bin_status(int r, const char **msg)
{
	switch (r) {
	case OPR_OK:
		return BIN_OK;
	case OPR_NOT_STORED:
		*msg = "Not stored";
		return BIN_NOT_STORED;
	case OPR_NOT_FOUND:
		*msg = "Not found";
		return BIN_ENOENT;
	case OPR_TOO_LARGE:
		*msg = "object too large for cache";
		return BIN_E2BIG;
	case OPR_READONLY:
		return BIN_ETMPFAIL;
	case OPR_FORMAT:
		*msg = "bad command line format";
		return BIN_EINVAL;
	case OPR_CLIENT:
		return BIN_EINVAL;
	case OPR_NOMEM:
		return BIN_ENOMEM;
	case OPR_DENIED:
		*msg = "permission denied";
		return BIN_AUTH_ERROR;
	default:
		return BIN_EINTERNAL;
	}
}

static void
bin_result(struct session *c, uint8_t opcode, uint32_t opaque, int r, const char *msg)
{
	uint16_t st = bin_status(r, &msg);

	bin_error(c, opcode, opaque, st, msg != NULL ? msg : "error");
}

/* A text parser error ("CLIENT_ERROR bad queue name\r\n") as a packet. */
static void
bin_text_error(struct session *c, uint8_t opcode, uint32_t opaque, const char *err)
{
	static const char ce[] = "CLIENT_ERROR ";
	char msg[128];
	size_t n;

	if (strncmp(err, ce, sizeof(ce) - 1) == 0)
		err += sizeof(ce) - 1;
	n = strcspn(err, "\r\n");
	if (n >= sizeof(msg))
		n = sizeof(msg) - 1;
	memcpy(msg, err, n);
	msg[n] = '\0';
	bin_error(c, opcode, opaque, BIN_EINVAL, msg);
}

/* --- gets --------------------------------------------------------------- */

static bool
op_is_getk(uint8_t opcode)
{
	return opcode == BIN_GETK || opcode == BIN_GETKQ;
}

static int
bin_hit(void *arg, const struct saker_item *it)
{
	struct hit_ctx *hc = arg;
	struct session *c = hc->s;
	const struct gg_key *gk = &c->ps->grp->keys[hc->k];
	unsigned char flags[4];
	bool withkey = op_is_getk(gk->opcode);

	hc->id = it->id;
	saker_put_be32(flags, it->flags);
	bin_put(c, gk->opcode, BIN_OK, gk->opaque, flags, 4, withkey ? hc->key : NULL,
	    withkey ? hc->key_len : 0, it->data, it->len);
	reply_record(c, gk->opcode, gk->opaque);
	return 0;
}

/* A miss: GetK answers with its key, Get with "Not found". */
static void
bin_miss(struct session *c, const struct getgroup *g, const struct gg_key *gk)
{
	if (op_is_getk(gk->opcode))
		bin_reply(c, gk->opcode, BIN_ENOENT, gk->opaque, g->buf + gk->off,
		    gk->len, NULL, 0);
	else
		bin_error(c, gk->opcode, gk->opaque, BIN_ENOENT, "Not found");
}

/* The Noop that ended a group. */
static void
bin_end(struct session *c, const struct getgroup *g)
{
	bin_reply(c, BIN_NOOP, BIN_OK, g->end_opaque, NULL, 0, NULL, 0);
}

static void
bin_get_error(struct session *c, const struct gg_key *gk, int r, const char *msg)
{
	bin_result(c, gk->opcode, gk->opaque, r, msg);
}

static const struct gg_replies bin_replies = {
	.hit = bin_hit,
	.miss = bin_miss,
	.end = bin_end,
	.error = bin_get_error,
};

static void
bin_run_group(struct session *c, int end, uint32_t opaque)
{
	gg_run(c, &bin_replies, end, opaque);
}

/* --- the commands ------------------------------------------------------- */

struct bin_req {
	uint8_t opcode;
	uint16_t keylen;
	uint8_t extlen;
	uint32_t bodylen, opaque;
	uint64_t cas;
	const unsigned char *ext;
	const char *key;
	const char *val;
	size_t vallen;
};

static bool
is_get(uint8_t op)
{
	return op == BIN_GET || op == BIN_GETQ || op == BIN_GETK || op == BIN_GETKQ;
}

static bool
is_set(uint8_t op)
{
	return op == BIN_SET || op == BIN_SETQ || op == BIN_ADD || op == BIN_ADDQ;
}

/* The answer to a command's result.  A quiet request that succeeded gets
 * no reply, but is recorded: a failed commit must still tell the client. */
static void
bin_done(struct session *c, const struct bin_req *r, bool quiet, int res,
    const char *msg)
{
	if (res != OPR_OK)
		bin_result(c, r->opcode, r->opaque, res, msg);
	else if (quiet)
		reply_record(c, r->opcode, r->opaque);
	else
		bin_reply(c, r->opcode, BIN_OK, r->opaque, NULL, 0, NULL, 0);
}

/* Before answering anything else, the gets collected so far run, so the
 * replies keep the order of the requests.  False when that started a
 * wait: the request stays in c->in for later. */
static bool
bin_settle_group(struct session *c)
{
	/* while waiting, the group is the waiting get: a request run behind
	 * it (bin_runs_behind_wait) answers after it by other means */
	if (!gg_pending(c) || c->state == SESSION_WAITING)
		return true;
	bin_run_group(c, GG_END_NONE, 0);
	return c->state == SESSION_CMD;
}

/* Get, GetQ, GetK, GetKQ.  Returns whether the packet was consumed. */
static bool
bin_get(struct session *c, const struct bin_req *r, size_t total)
{
	struct proto_key pk;
	struct gg_key *gk;
	const char *err = NULL;
	bool quiet = r->opcode == BIN_GETQ || r->opcode == BIN_GETKQ;

	if (r->extlen != 0 || r->vallen != 0)
		err = "CLIENT_ERROR bad command line format";
	else if (r->keylen > BIN_MAX_KEY)
		err = "CLIENT_ERROR key longer than 250 bytes";
	else
		err = proto_parse_get_key(c->b->proto, r->key, r->keylen, &pk);
	if (err == NULL && !gg_room(c, r->keylen) && !bin_settle_group(c))
		return false;
	if (err == NULL && (gk = gg_add(c, &pk, r->key, r->keylen)) != NULL) {
		gk->opcode = r->opcode;
		gk->opaque = r->opaque;
		gk->quiet = quiet;
		evbuffer_drain(c->in, total);
		/* a get that answers a miss ends the group */
		if (!quiet)
			bin_run_group(c, GG_END_NONE, 0);
		return true;
	}
	if (!bin_settle_group(c))
		return false;
	if (err != NULL)
		bin_text_error(c, r->opcode, r->opaque, err);
	else
		bin_error(c, r->opcode, r->opaque, BIN_ENOMEM, "out of memory");
	evbuffer_drain(c->in, total);
	return true;
}

static void
bin_set(struct session *c, const struct bin_req *r)
{
	bool quiet = r->opcode == BIN_SETQ || r->opcode == BIN_ADDQ;
	int64_t delay_ms, at_s;
	struct proto_key pk;
	const char *err, *msg = NULL, *id;
	size_t id_len;
	int res;

	if (r->extlen != 8 || r->keylen == 0) {
		bin_error(c, r->opcode, r->opaque, BIN_EINVAL, "bad command line format");
		return;
	}
	if (r->keylen > BIN_MAX_KEY) {
		bin_error(c, r->opcode, r->opaque, BIN_EINVAL, "key longer than 250 bytes");
		return;
	}
	if ((err = proto_parse_set_key(c->b->proto, r->key, r->keylen, &pk, &delay_ms, &at_s,
	    &id, &id_len)) != NULL) {
		bin_text_error(c, r->opcode, r->opaque, err);
		return;
	}
	if (r->cas != 0) {
		/* every item's CAS is 0: no other value can match */
		bin_error(c, r->opcode, r->opaque, BIN_EEXISTS, "Data exists for key");
		return;
	}
	res = op_set(c, &pk, saker_get_be32(r->ext), (int64_t)saker_get_be32(r->ext + 4), delay_ms, at_s,
	    id, id_len, r->val, r->vallen, &msg);
	bin_done(c, r, quiet, res, msg);
}

static void
bin_delete(struct session *c, const struct bin_req *r)
{
	const char *msg = NULL;
	int res;

	if (r->extlen != 0 || r->vallen != 0 || r->keylen > BIN_MAX_KEY ||
	    !saker_qname_valid(r->key, r->keylen)) {
		bin_error(c, r->opcode, r->opaque, BIN_EINVAL, "bad queue name");
		return;
	}
	res = op_delete(c, r->key, r->keylen, &msg);
	bin_done(c, r, r->opcode == BIN_DELETEQ, res, msg);
}

/* Touch: the lease of this connection's open items on the key's queue,
 * the 4-byte extras an exptime as in text `touch` (retry.h). */
static void
bin_touch(struct session *c, const struct bin_req *r)
{
	const char *msg = NULL;
	int res;

	if (r->extlen != 4 || r->vallen != 0) {
		bin_error(c, r->opcode, r->opaque, BIN_EINVAL,
		    "bad command line format");
		return;
	}
	if (r->keylen > BIN_MAX_KEY || !saker_qname_valid(r->key, r->keylen)) {
		bin_error(c, r->opcode, r->opaque, BIN_EINVAL, "bad queue name");
		return;
	}
	res = op_touch(c, r->key, r->keylen, (int64_t)saker_get_be32(r->ext), &msg);
	if (res == OPR_OK)
		bin_reply(c, r->opcode, BIN_OK, r->opaque, NULL, 0, NULL, 0);
	else if (res == OPR_NOT_FOUND)
		bin_error(c, r->opcode, r->opaque, BIN_ENOENT, msg);
	else
		bin_result(c, r->opcode, r->opaque, res, msg);
}

static void
bin_flush(struct session *c, const struct bin_req *r)
{
	const char *msg = NULL;
	int res;

	/* the optional 4-byte delay is accepted and ignored, as in text */
	if ((r->extlen != 0 && r->extlen != 4) || r->keylen != 0 || r->vallen != 0) {
		bin_error(c, r->opcode, r->opaque, BIN_EINVAL, "bad command line format");
		return;
	}
	res = op_flush_all(c, &msg);
	bin_done(c, r, r->opcode == BIN_FLUSHQ, res, msg);
}

/* One packet per "STAT name value" line of the text reply, then an
 * empty one. */
static void
bin_stats(struct session *c, const struct bin_req *r)
{
	struct evbuffer *tmp = evbuffer_new();
	char *line;
	size_t n;

	if (tmp == NULL) {
		bin_error(c, r->opcode, r->opaque, BIN_ENOMEM, "out of memory");
		return;
	}
	stats_write(c->b, tmp, c->perms);
	while ((line = evbuffer_readln(tmp, &n, EVBUFFER_EOL_CRLF)) != NULL) {
		char *name, *sp;

		if (n > 5 && strncmp(line, "STAT ", 5) == 0) {
			name = line + 5;
			sp = strchr(name, ' ');
			if (sp != NULL)
				bin_reply(c, BIN_STAT, BIN_OK, r->opaque, name,
				    (size_t)(sp - name), sp + 1, strlen(sp + 1));
		}
		free(line);
	}
	evbuffer_free(tmp);
	bin_reply(c, BIN_STAT, BIN_OK, r->opaque, NULL, 0, NULL, 0);
}

/* The answer to a failed SASL login (maybe sent after a delay). */
static void
bin_login_failure(struct session *c)
{
	bin_error(c, c->ps->login_opcode, c->ps->login_opaque, BIN_AUTH_ERROR, "Auth failure");
}

/* May this SASL PLAIN login be checked now (login_admit)?  False leaves
 * it in the input. */
static bool
bin_sasl_admit(struct session *c, const struct bin_req *r)
{
	const char *v = r->val, *u;
	const char *p;

	if (c->b->hooks->login_admit == NULL)
		return true;
	u = memchr(v, '\0', r->vallen);
	u = u != NULL ? u + 1 : v + r->vallen;
	p = memchr(u, '\0', r->vallen - (size_t)(u - v));
	return c->b->hooks->login_admit(c, u, p != NULL ? (size_t)(p - u) :
	    r->vallen - (size_t)(u - v));
}

/* SASL PLAIN: "[authzid] NUL user NUL password". */
static void
bin_sasl_auth(struct session *c, const struct bin_req *r)
{
	const char *v = r->val, *u, *p;
	const struct perms *who;
	size_t n = r->vallen;

	if (r->keylen != 5 || memcmp(r->key, "PLAIN", 5) != 0) {
		bin_error(c, r->opcode, r->opaque, BIN_AUTH_ERROR, "Auth failure");
		return;
	}
	u = memchr(v, '\0', n);
	p = u != NULL ? memchr(u + 1, '\0', n - (size_t)(u + 1 - v)) : NULL;
	if (p != NULL && (who = auth_check(c->b->auth, u + 1, (size_t)(p - u - 1), p + 1,
	    n - (size_t)(p + 1 - v))) != NULL) {
		c->authed = true;
		c->perms = who;
		c->b->hooks->login_ok(c);
		bin_reply(c, r->opcode, BIN_OK, r->opaque, NULL, 0, "Authenticated", 13);
		return;
	}
	c->ps->login_opcode = r->opcode;
	c->ps->login_opaque = r->opaque;
	c->b->hooks->login_failed(c, "SASL", bin_login_failure);
}

/* Opcodes allowed before authentication. */
static bool
bin_open_opcode(uint8_t op)
{
	return op == BIN_SASL_LIST || op == BIN_SASL_AUTH || op == BIN_SASL_STEP ||
	    op == BIN_VERSION || op == BIN_NOOP || op == BIN_QUIT || op == BIN_QUITQ;
}

bool
bin_runs_behind_wait(struct session *c)
{
	unsigned char h[BIN_HEADER];
	uint32_t bodylen;
	uint16_t keylen;
	uint8_t extlen;

	if (!c->authed || evbuffer_get_length(c->in) < BIN_HEADER)
		return false;
	evbuffer_copyout(c->in, h, BIN_HEADER);
	keylen = saker_get_be16(h + 2);
	extlen = h[4];
	bodylen = saker_get_be32(h + 8);
	if (h[0] != BIN_REQ_MAGIC || (uint32_t)keylen + extlen > bodylen ||
	    evbuffer_get_length(c->in) < BIN_HEADER + (size_t)bodylen)
		return false;
	if (is_set(h[1]))
		return bodylen - keylen - extlen <= c->b->max_item_size &&
		    (size_t)keylen + extlen <= BIN_MAX_SMALL_BODY;
	switch (h[1]) {
	case BIN_DELETE:
	case BIN_DELETEQ:
	case BIN_FLUSH:
	case BIN_FLUSHQ:
	case BIN_STAT:
	case BIN_VERSION:
	case BIN_VERBOSITY:
		return bodylen <= BIN_MAX_SMALL_BODY;
	default:
		return false;
	}
}

int
bin_step(struct session *c)
{
	unsigned char h[BIN_HEADER];
	const unsigned char *p;
	struct bin_req r;
	size_t avail = evbuffer_get_length(c->in), total;
	uint16_t refuse = BIN_OK;

	if (avail < BIN_HEADER)
		return PROTO_STOP;
	evbuffer_copyout(c->in, h, BIN_HEADER);
	if (h[0] != BIN_REQ_MAGIC) {
		proto_protocol_error(c, "bad magic byte in a binary request");
		return PROTO_STOP;
	}
	memset(&r, 0, sizeof(r));
	r.opcode = h[1];
	r.keylen = saker_get_be16(h + 2);
	r.extlen = h[4];
	r.bodylen = saker_get_be32(h + 8);
	r.opaque = saker_get_be32(h + 12);
	r.cas = saker_get_be64(h + 16);
	if ((uint32_t)r.keylen + r.extlen > r.bodylen) {
		proto_protocol_error(c, "binary request with key and extras longer than its body");
		return PROTO_STOP;
	}
	r.vallen = r.bodylen - r.keylen - r.extlen;
	total = BIN_HEADER + (size_t)r.bodylen;

	if (!is_get(r.opcode) && r.opcode != BIN_NOOP && !bin_settle_group(c))
		return PROTO_STOP;
	/* refused before its body is read, which is skipped rather than
	 * buffered: a client that has not logged in makes us buffer nothing
	 * but the header */
	if (!c->authed && !bin_open_opcode(r.opcode))
		refuse = BIN_AUTH_ERROR;
	else if (is_set(r.opcode) ? r.vallen > c->b->max_item_size ||
	    r.keylen + r.extlen > BIN_MAX_SMALL_BODY :
	    r.bodylen > BIN_MAX_SMALL_BODY)
		refuse = is_set(r.opcode) ? BIN_E2BIG : BIN_EINVAL;
	if (refuse != BIN_OK) {
		if (!bin_settle_group(c))
			return PROTO_STOP;
		bin_error(c, r.opcode, r.opaque, refuse,
		    refuse == BIN_AUTH_ERROR ? "Auth failure" :
		    refuse == BIN_E2BIG ? "object too large for cache" :
		    "request body too large");
		evbuffer_drain(c->in, BIN_HEADER);
		c->ps->swallow = r.bodylen;
		if (c->ps->swallow > 0)
			c->state = SESSION_SWALLOW;
		return PROTO_COMMAND;
	}
	if (avail < total)
		return PROTO_STOP;
	p = evbuffer_pullup(c->in, (ev_ssize_t)total);
	r.ext = p + BIN_HEADER;
	r.key = (const char *)r.ext + r.extlen;
	r.val = r.key + r.keylen;

	switch (r.opcode) {
	case BIN_GET:
	case BIN_GETQ:
	case BIN_GETK:
	case BIN_GETKQ:
		return bin_get(c, &r, total) ? PROTO_COMMAND : PROTO_STOP;
	case BIN_NOOP:
		evbuffer_drain(c->in, total);
		if (gg_pending(c))
			bin_run_group(c, GG_END_NOOP, r.opaque);
		else
			bin_reply(c, BIN_NOOP, BIN_OK, r.opaque, NULL, 0, NULL, 0);
		return PROTO_COMMAND;
	case BIN_SET:
	case BIN_SETQ:
	case BIN_ADD:		/* on a queue every item is added */
	case BIN_ADDQ:
		bin_set(c, &r);
		break;
	case BIN_REPLACE:
	case BIN_REPLACEQ:
	case BIN_APPEND:
	case BIN_APPENDQ:
	case BIN_PREPEND:
	case BIN_PREPENDQ: {
		/* as in text: nothing to replace or extend in a queue */
		static const char *const names[] = { "replace", "append", "prepend" };
		const char *what = names[r.opcode == BIN_REPLACE ||
		    r.opcode == BIN_REPLACEQ ? 0 : r.opcode == BIN_APPEND ||
		    r.opcode == BIN_APPENDQ ? 1 : 2];
		char msg[64];

		snprintf(msg, sizeof(msg), "%s not supported on a queue", what);
		bin_error(c, r.opcode, r.opaque, BIN_ENOTSUP, msg);
		break;
	}
	case BIN_DELETE:
	case BIN_DELETEQ:
		bin_delete(c, &r);
		break;
	case BIN_TOUCH:
		bin_touch(c, &r);
		break;
	case BIN_FLUSH:
	case BIN_FLUSHQ:
		bin_flush(c, &r);
		break;
	case BIN_VERSION:
		bin_reply(c, r.opcode, BIN_OK, r.opaque, NULL, 0, PACKAGE_VERSION,
		    strlen(PACKAGE_VERSION));
		reply_keep(c, KEEP_ALWAYS);
		break;
	case BIN_STAT:
		bin_stats(c, &r);
		break;
	case BIN_VERBOSITY:
		if (!session_admin(c)) {
			session_denied(c, "verbosity", NULL, 0);
			bin_error(c, r.opcode, r.opaque, BIN_AUTH_ERROR, "permission denied");
			break;
		}
		if (r.extlen != 4) {
			bin_error(c, r.opcode, r.opaque, BIN_EINVAL, "bad command line format");
			break;
		}
		log_set_level((int)(saker_get_be32(r.ext) > 3 ? 3 : saker_get_be32(r.ext)));
		bin_reply(c, r.opcode, BIN_OK, r.opaque, NULL, 0, NULL, 0);
		break;
	case BIN_QUIT:
		bin_reply(c, r.opcode, BIN_OK, r.opaque, NULL, 0, NULL, 0);
		evbuffer_drain(c->in, total);
		c->b->hooks->close_after_write(c);
		return PROTO_STOP;
	case BIN_QUITQ:
		c->b->hooks->close(c);
		return PROTO_STOP;
	case BIN_SASL_LIST:
		if (c->b->auth == NULL)
			goto unknown;
		bin_reply(c, r.opcode, BIN_OK, r.opaque, NULL, 0, "PLAIN", 5);
		break;
	case BIN_SASL_AUTH:
		if (c->b->auth == NULL)
			goto unknown;
		if (!bin_sasl_admit(c, &r))
			return PROTO_STOP;      /* run again after the delay */
		bin_sasl_auth(c, &r);
		break;
	case BIN_SASL_STEP:
		if (c->b->auth == NULL)
			goto unknown;
		bin_error(c, r.opcode, r.opaque, BIN_AUTH_ERROR, "Auth failure");
		break;
	default:
unknown:
		bin_error(c, r.opcode, r.opaque, BIN_UNKNOWN, "Unknown command");
		break;
	}
	if (!c->dead)
		evbuffer_drain(c->in, total);
	return PROTO_COMMAND;
}

void
bin_fail_batch(struct session *c, struct evbuffer *sent, bool in_doubt,
    const char *reason)
{
	size_t i, pos = 0, start = 0;

	for (i = 0; i < c->ps->at.nbrecs; start = c->ps->brecs[i].end, i++) {
		const struct bin_rec *br = &c->ps->brecs[i];

		if (reply_resend_kept(c, sent, &pos, start, br->end, br->keep,
		    in_doubt))
			continue;
		if (br->opcode == BIN_NOOP) {
			bin_put(c, BIN_NOOP, BIN_OK, br->opaque, NULL, 0, NULL, 0, NULL, 0);
		} else {
			bin_put(c, br->opcode, BIN_EINTERNAL, br->opaque, NULL, 0, NULL, 0,
			    reason, strlen(reason));
		}
	}
}
