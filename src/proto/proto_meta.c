/* proto_meta.c -- memcached's meta commands: parsing mg/ms/md/mn lines,
 * running them on the shared command layer, VA/HD/EN/NF/NS/EX/MN replies. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "clock.h"
#include "getgroup.h"
#include "itemattr.h"
#include "proto_meta.h"
#include "proto_text.h"
#include "qname.h"
#include "textio.h"

/*
 * A meta line is "<cmd> <key> [<datalen>] <flag>*", each flag one letter
 * and an optional argument glued to it (O123, F5, T60, MS).  Replies come
 * in request order.  `mg` always dequeues (with the key's options, so
 * `/peek` looks without taking); the return flags say what the reply shows.
 */

/* return flags of mg (and those ms/md echo) */
#define MF_V 0x001u     /* value */
#define MF_F 0x002u     /* client flags */
#define MF_K 0x004u     /* key */
#define MF_S 0x008u     /* size */
#define MF_T 0x010u     /* remaining TTL */
#define MF_C 0x020u     /* CAS: always 0 */
#define MF_O 0x040u     /* opaque */
#define MF_Q 0x080u     /* quiet: no EN (mg), no HD (ms, md) */
#define MF_B 0x100u     /* key is base64 */
#define MF_D 0x200u     /* delivery count (saker's own) */
#define MF_I 0x400u     /* the item's deduplication id (saker's own) */

#define META_MAX_OPAQUE 32

struct meta_req {
	char cmd;               /* g s d n e a */
	const char *key;        /* decoded when b */
	size_t keylen;
	const char *rawkey;     /* the key token as sent */
	size_t rawkeylen;
	unsigned mf;
	const char *opaque;
	size_t olen;
	uint32_t flags;         /* ms F */
	int64_t ttl;            /* ms T */
	uint64_t cas;           /* ms, md C */
	char mode;              /* ms M */
	bool has_len;
	size_t datalen;         /* ms */
};

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t
meta_b64_encode(const char *in, size_t len, char *out)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t i, o = 0;

	for (i = 0; i + 2 < len; i += 3) {
		out[o++] = b64[p[i] >> 2];
		out[o++] = b64[(p[i] & 3) << 4 | p[i + 1] >> 4];
		out[o++] = b64[(p[i + 1] & 15) << 2 | p[i + 2] >> 6];
		out[o++] = b64[p[i + 2] & 63];
	}
	if (i < len) {
		out[o++] = b64[p[i] >> 2];
		if (i + 1 < len) {
			out[o++] = b64[(p[i] & 3) << 4 | p[i + 1] >> 4];
			out[o++] = b64[(p[i + 1] & 15) << 2];
		} else {
			out[o++] = b64[(p[i] & 3) << 4];
			out[o++] = '=';
		}
		out[o++] = '=';
	}
	return o;
}

static int
b64_val(unsigned char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+')
		return 62;
	if (ch == '/')
		return 63;
	return -1;
}

long
meta_b64_decode(const char *in, size_t len, char *out, size_t outcap)
{
	size_t i, o = 0;

	if (len == 0 || len % 4 != 0 || len / 4 * 3 > outcap)
		return -1;
	for (i = 0; i < len; i += 4) {
		int v[4], j, pad = 0;

		for (j = 0; j < 4; j++) {
			unsigned char ch = (unsigned char)in[i + j];
			if (ch == '=' && i + 4 == len && j >= 2) {
				v[j] = 0;
				pad++;
				continue;
			}
			if (pad > 0 || (v[j] = b64_val(ch)) < 0)
				return -1;
		}
		out[o++] = (char)(v[0] << 2 | v[1] >> 4);
		if (pad < 2)
			out[o++] = (char)((v[1] & 15) << 4 | v[2] >> 2);
		if (pad < 1)
			out[o++] = (char)((v[2] & 3) << 6 | v[3]);
	}
	return (long)o;
}

bool
meta_is_command(const char *line, size_t len)
{
	if (len < 2 || line[0] != 'm' || strchr("gsdnea", line[1]) == NULL ||
	    line[1] == '\0')
		return false;
	return len == 2 || line[2] == ' ' || line[2] == '\t';
}

/* --- parsing ------------------------------------------------------------ */

#define E_FORMAT "CLIENT_ERROR bad command line format\r\n"
#define E_FLAG "CLIENT_ERROR invalid flag\r\n"

/* One flag token of command m->cmd.  NULL, or the error line. */
static const char *
meta_flag(struct meta_req *m, const struct proto_tok *t)
{
	const char *arg = t->p + 1;
	size_t an = t->n - 1;
	uint64_t u;

	switch (t->p[0]) {
	case 'q': m->mf |= MF_Q; return an == 0 ? NULL : E_FLAG;
	case 'b': m->mf |= MF_B; return an == 0 ? NULL : E_FLAG;
	case 'k': m->mf |= MF_K; return an == 0 ? NULL : E_FLAG;
	case 'c': m->mf |= MF_C; return an == 0 ? NULL : E_FLAG;
	case 'O':
		if (an > META_MAX_OPAQUE)
			return "CLIENT_ERROR opaque token too long\r\n";
		m->mf |= MF_O;
		m->opaque = arg;
		m->olen = an;
		return NULL;
	default:
		break;
	}
	if (m->cmd == 'g') {
		switch (t->p[0]) {
		case 'v': m->mf |= MF_V; return NULL;
		case 'f': m->mf |= MF_F; return NULL;
		case 's': m->mf |= MF_S; return NULL;
		case 't': m->mf |= MF_T; return NULL;
		case 'd': m->mf |= MF_D; return an == 0 ? NULL : E_FLAG;
		case 'i': m->mf |= MF_I; return an == 0 ? NULL : E_FLAG;
		/* accepted and ignored: LRU hints, vivify, recache, touch */
		case 'h': case 'l': case 'u': case 'E': case 'N': case 'R': case 'T':
			return NULL;
		}
		return E_FLAG;
	}
	if (m->cmd == 's') {
		switch (t->p[0]) {
		case 'F':
			if (!proto_u64(arg, an, UINT32_MAX, &u))
				return E_FORMAT;
			m->flags = (uint32_t)u;
			return NULL;
		case 'T':
			return proto_i64(arg, an, &m->ttl) ? NULL : E_FORMAT;
		case 'C':
			return proto_u64(arg, an, UINT64_MAX, &m->cas) ? NULL : E_FORMAT;
		case 'M':
			if (an != 1)
				return "CLIENT_ERROR invalid mode for ms M token\r\n";
			m->mode = arg[0];
			return NULL;
		case 'S':
			/* the data length as a flag (memcached 1.6.0's syntax) */
			if (!proto_u64(arg, an, SIZE_MAX - 2, &u))
				return E_FORMAT;
			if (!m->has_len) {
				m->datalen = (size_t)u;
				m->has_len = true;
			}
			return NULL;
		case 'I': case 'E': case 's':
			return NULL;
		}
		return E_FLAG;
	}
	if (m->cmd == 'd') {
		switch (t->p[0]) {
		case 'C':
			return proto_u64(arg, an, UINT64_MAX, &m->cas) ? NULL : E_FORMAT;
		case 'I': case 'T': case 'x': case 'E':
			return NULL;
		}
		return E_FLAG;
	}
	return E_FLAG;
}

/*
 * Parse a meta line.  NULL on success; otherwise the error line, with
 * *swallow set to the data bytes to skip (ms with a readable length) or -1.
 */
static const char *
meta_parse(const char *line, size_t len, struct meta_req *m, char *keybuf,
    size_t keycap, int64_t *swallow)
{
	struct proto_cursor cur = { line, line + len };
	const char *err = NULL;
	struct proto_tok t;
	uint64_t u;

	memset(m, 0, sizeof(*m));
	m->mode = 'S';
	*swallow = -1;
	(void)proto_next_tok(&cur, &t);
	m->cmd = t.p[1];
	if (m->cmd == 'n')
		return NULL;
	if (!proto_next_tok(&cur, &t))
		return E_FORMAT;
	m->rawkey = m->key = t.p;
	m->rawkeylen = m->keylen = t.n;
	if (m->cmd == 's') {
		struct proto_cursor save = cur;
		struct proto_tok lt;

		if (proto_next_tok(&cur, &lt) && proto_u64(lt.p, lt.n, SIZE_MAX - 2, &u)) {
			m->datalen = (size_t)u;
			m->has_len = true;
		} else {
			cur = save;
		}
	}
	while (proto_next_tok(&cur, &t))
		if (err == NULL)
			err = meta_flag(m, &t);
	if (m->cmd == 's') {
		if (!m->has_len)
			return E_FORMAT;
		if (err != NULL) {
			*swallow = (int64_t)m->datalen + 2;
			return err;
		}
	}
	if (err != NULL)
		return err;
	if (m->mf & MF_B) {
		long n = meta_b64_decode(m->rawkey, m->rawkeylen, keybuf, keycap);
		if (n <= 0) {
			if (m->cmd == 's')
				*swallow = (int64_t)m->datalen + 2;
			return "CLIENT_ERROR error decoding key\r\n";
		}
		m->key = keybuf;
		m->keylen = (size_t)n;
	}
	return NULL;
}

/* --- replies ------------------------------------------------------------ */

/* " k<key> b" and " O<opaque>" as requested. */
static void
meta_echo(struct evbuffer *b, unsigned mf, const char *key, size_t keylen,
    const char *o, size_t olen)
{
	if (mf & MF_K) {
		evbuffer_add(b, " k", 2);
		if (mf & MF_B) {
			char enc[(PROTO_MAX_LINE / 3 + 2) * 4];

			if (keylen > PROTO_MAX_LINE)
				keylen = PROTO_MAX_LINE;
			evbuffer_add(b, enc, meta_b64_encode(key, keylen, enc));
			evbuffer_add(b, " b", 2);
		} else {
			evbuffer_add(b, key, keylen);
		}
	}
	if (mf & MF_O) {
		evbuffer_add(b, " O", 2);
		evbuffer_add(b, o, olen);
	}
}

/* A status line ("HD", "NS", ...) with the echoed flags. */
static void
meta_status(struct session *c, const char *st, const struct meta_req *m)
{
	evbuffer_add(c->pend, st, 2);
	meta_echo(c->pend, m->mf, m->key, m->keylen, m->opaque, m->olen);
	if (m->mf & MF_C)
		evbuffer_add(c->pend, " c0", 3);
	reply_add(c, "\r\n", 2);
	reply_done(c);
}

/* Can these bytes be one token of a reply line? */
static bool
id_token_safe(const void *p, size_t n)
{
	const unsigned char *u = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (u[i] <= ' ' || u[i] >= 0x7f)
			return false;
	return n > 0;
}

static int
meta_hit(void *arg, const struct saker_item *it)
{
	struct hit_ctx *hc = arg;
	struct session *c = hc->s;
	const struct getgroup *g = c->ps->grp;
	const struct gg_key *gk = &g->keys[hc->k];
	struct evbuffer *b = c->pend;
	unsigned mf = gk->mflags;

	hc->id = it->id;
	if (mf & MF_V)
		evbuffer_add_printf(b, "VA %zu", it->len);
	else
		evbuffer_add(b, "HD", 2);
	if (mf & MF_F)
		evbuffer_add_printf(b, " f%lu", (unsigned long)it->flags);
	if (mf & MF_S)
		evbuffer_add_printf(b, " s%zu", it->len);
	if (mf & MF_T) {
		int64_t left = -1;

		if (it->expires_ms > 0) {
			left = (it->expires_ms - saker_now_ms() + 999) / 1000;
			if (left < 0)
				left = 0;
		}
		evbuffer_add_printf(b, " t%lld", (long long)left);
	}
	if (mf & MF_C)
		evbuffer_add(b, " c0", 3);
	if (mf & MF_D)
		evbuffer_add_printf(b, " d%lu", (unsigned long)it->deliveries);
	if (mf & MF_I) {
		const void *id;
		size_t idlen;

		/* no token for an item set without one; an id is a key's
		 * bytes (the set parser's check), but one a store handed
		 * back (a load, a newer build) must not break the line */
		if (itemattr_get(it->attrs, it->attrs_len, ITEMATTR_ID, &id,
		    &idlen) && id_token_safe(id, idlen)) {
			evbuffer_add(b, " i", 2);
			evbuffer_add(b, id, idlen);
		}
	}
	meta_echo(b, mf, hc->key, hc->key_len, g->buf + gk->ooff, gk->olen);
	evbuffer_add(b, "\r\n", 2);
	if (mf & MF_V) {
		evbuffer_add(b, it->data, it->len);
		evbuffer_add(b, "\r\n", 2);
	}
	reply_done(c);
	return 0;
}

/* A miss: EN with the echoed flags. */
static void
meta_miss(struct session *c, const struct getgroup *g, const struct gg_key *gk)
{
	evbuffer_add(c->pend, "EN", 2);
	meta_echo(c->pend, gk->mflags, g->buf + gk->off, gk->len,
	    g->buf + gk->ooff, gk->olen);
	reply_add(c, "\r\n", 2);
	reply_done(c);
}

/* The mn that ended a group. */
static void
meta_end(struct session *c, const struct getgroup *g)
{
	(void)g;
	reply_str(c, "MN\r\n");
}

static void
meta_get_error(struct session *c, const struct gg_key *gk, int r, const char *msg)
{
	(void)gk;
	text_reply_result(c, r, msg);
}

static const struct gg_replies meta_replies = {
	.hit = meta_hit,
	.miss = meta_miss,
	.end = meta_end,
	.error = meta_get_error,
};

void
meta_run_group(struct session *c)
{
	gg_run(c, &meta_replies, GG_END_NONE, 0);
}

/* --- commands ----------------------------------------------------------- */

/* Run the quiet gets collected so far; false when that started a wait. */
static bool
meta_settle(struct session *c)
{
	if (!gg_pending(c))
		return true;
	meta_run_group(c);
	return c->state == SESSION_CMD;
}

/* mg: add the key to the group; a non-quiet mg runs it. */
static bool
meta_mg(struct session *c, const struct meta_req *m, size_t need)
{
	struct proto_key pk;
	struct gg_key *gk = NULL;
	const char *err;

	err = proto_parse_get_key(c->b->proto, m->key, m->keylen, &pk);
	if (err == NULL && !gg_room(c, m->keylen + m->olen) && !meta_settle(c))
		return false;
	if (err == NULL && (gk = gg_add(c, &pk, m->key, m->keylen)) != NULL &&
	    (m->olen == 0 || gg_stash(c, gk, m->opaque, m->olen))) {
		gk->mflags = (uint16_t)m->mf;
		gk->quiet = (m->mf & MF_Q) != 0;
		evbuffer_drain(c->in, need);
		if (!gk->quiet)
			meta_run_group(c);
		return true;
	}
	if (gk != NULL)
		c->ps->grp->nkeys--;        /* its opaque did not fit: take it back */
	if (!meta_settle(c))
		return false;
	if (err != NULL)
		reply_str(c, err);
	else
		reply_str(c, "SERVER_ERROR out of memory\r\n");
	evbuffer_drain(c->in, need);
	return true;
}

static void
meta_ms(struct session *c, const struct meta_req *m, const char *data)
{
	struct proto_key pk;
	int64_t delay_ms, at_s;
	const char *err, *msg = NULL, *id;
	size_t id_len;
	int r;

	if (m->mode != 'S' && m->mode != 's') {
		reply_str(c, strchr("EeAaPpRr", m->mode) != NULL ?
		    "CLIENT_ERROR mode not supported by a queue\r\n" :
		    "CLIENT_ERROR invalid mode for ms M token\r\n");
		return;
	}
	if ((err = proto_parse_set_key(c->b->proto, m->key, m->keylen, &pk, &delay_ms, &at_s,
	    &id, &id_len)) != NULL) {
		reply_str(c, err);
		return;
	}
	if (m->cas != 0) {
		/* every item's CAS is 0: no other value can match */
		meta_status(c, "EX", m);
		return;
	}
	r = op_set(c, &pk, m->flags, m->ttl, delay_ms, at_s, id, id_len, data,
	    m->datalen, &msg);
	if (r == OPR_OK) {
		if (!(m->mf & MF_Q))
			meta_status(c, "HD", m);
	} else if (r == OPR_NOT_STORED) {
		meta_status(c, "NS", m);
	} else {
		text_reply_result(c, r, msg);
	}
}

static void
meta_md(struct session *c, const struct meta_req *m)
{
	const char *msg = NULL;
	int r;

	if (!saker_qname_valid(m->key, m->keylen)) {
		reply_str(c, PROTO_ERR_QNAME);
		return;
	}
	if (m->cas != 0) {
		meta_status(c, "EX", m);
		return;
	}
	r = op_delete(c, m->key, m->keylen, &msg);
	if (r == OPR_OK) {
		if (!(m->mf & MF_Q))
			meta_status(c, "HD", m);
	} else if (r == OPR_NOT_FOUND) {
		meta_status(c, "NF", m);
	} else {
		text_reply_result(c, r, msg);
	}
}

bool
meta_command(struct session *c, const char *line, size_t linelen, size_t need)
{
	char *keybuf = c->b->proto->meta_key;
	struct meta_req m;
	const char *err, *p;
	int64_t swallow;
	int rc;

	/* any command but mg and mn first runs the quiet gets before it */
	if (line[1] != 'g' && line[1] != 'n' && !meta_settle(c))
		return false;
	err = meta_parse(line, linelen, &m, keybuf, PROTO_MAX_LINE, &swallow);
	if (err != NULL) {
		if (line[1] == 'g' && !meta_settle(c))
			return false;
		reply_str(c, err);
		evbuffer_drain(c->in, need);
		if (swallow >= 0)
			text_swallow(c, (size_t)swallow);
		return true;
	}
	switch (m.cmd) {
	case 'g':
		return meta_mg(c, &m, need);
	case 'n':
		evbuffer_drain(c->in, need);
		if (gg_pending(c))
			gg_run(c, &meta_replies, GG_END_MN, 0);
		else
			reply_str(c, "MN\r\n");
		return true;
	case 'd':
		meta_md(c, &m);
		break;
	case 's':
		if (m.datalen > c->b->max_item_size) {
			reply_str(c, PROTO_ERR_TOO_LARGE);
			evbuffer_drain(c->in, need);
			text_swallow(c, m.datalen + 2);
			return true;
		}
		rc = text_data_block(c, need, m.datalen, &p);
		if (rc <= 0)
			return false;
		if (p != line)
			(void)meta_parse(p, linelen, &m, keybuf, PROTO_MAX_LINE, &swallow);
		meta_ms(c, &m, p + need);
		if (!c->dead)
			evbuffer_drain(c->in, need + m.datalen + 2);
		return true;
	default:
		/* me (debug) and ma (arithmetic) have no meaning for a queue */
		reply_str(c, "CLIENT_ERROR unsupported command\r\n");
		break;
	}
	if (!c->dead)
		evbuffer_drain(c->in, need);
	return true;
}
