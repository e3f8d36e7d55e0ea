/* commands.c -- the command layer every protocol shares (set with limits,
 * fanout and delay; get with options, several keys and waiting; delete;
 * flush; get groups) and the text protocol's commands on top of it. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "commands.h"
#include "conn.h"
#include "log.h"
#include "proto_text.h"
#include "queues.h"
#include "stats.h"

#define TEN_YEARS_MS (315360000000LL)
#define MEMCACHE_REL_MAX (2592000LL)   /* 30 days: larger exptimes are absolute */

#define STORE (srv->store)
#define DRV (srv->store->driver)

/* The reason for a store failure, and which result it is; records a
 * failure that makes the store refuse writes (for /healthz). */
const char *
cmd_store_error(int rc, int *result)
{
	const char *why = DRV->errmsg(STORE);

	if (why == NULL || *why == '\0')
		why = saker_strerror(rc);
	if (rc == SAKER_EREADONLY || rc == SAKER_EIO || rc == SAKER_EFULL)
		server_store_failed(why);
	*result = rc == SAKER_ENOMEM || rc == SAKER_EFULL ? OPR_NOMEM : OPR_SERVER;
	return why;
}

/* --- text replies ------------------------------------------------------- */

/* The text reply for a result other than success. */
static void
text_error(struct conn *c, int r, const char *msg)
{
	switch (r) {
	case OPR_NOT_STORED:
		conn_reply_str(c, "NOT_STORED\r\n");
		break;
	case OPR_NOT_FOUND:
		conn_reply_str(c, "NOT_FOUND\r\n");
		break;
	case OPR_TOO_LARGE:
		conn_reply_str(c, PROTO_ERR_TOO_LARGE);
		break;
	case OPR_FORMAT:
		conn_reply_str(c, PROTO_ERR_FORMAT);
		break;
	case OPR_CLIENT:
		conn_replyf(c, "CLIENT_ERROR %s\r\n", msg);
		conn_reply_done(c);
		break;
	default:
		conn_replyf(c, "SERVER_ERROR %s\r\n", msg);
		conn_reply_done(c);
		break;
	}
}

static char *
fmt_u64(char *end, uint64_t v)
{
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	return end;
}

/* VALUE <key> <flags> <bytes>[ <cas>], the data, with the key echoed as
 * sent.  Written with one reserve/commit into the reply buffer: a multi-get
 * writes a hundred of these per request.  A queue item has no version to
 * compare, so gets answers CAS 0, as the binary and meta replies do. */
static inline __attribute__((always_inline)) int
text_value(void *arg, const struct saker_item *it, bool cas)
{
	struct hit_ctx *hc = arg;
	struct evbuffer *b = hc->c->pend;
	char num[48], *end = num + sizeof(num), *p;
	struct evbuffer_iovec v;
	size_t nlen, total;
	char *w;

	hc->id = it->id;
	/* " <flags> <bytes>\r\n" built backwards into num */
	*--end = '\n';
	*--end = '\r';
	if (cas) {
		*--end = '0';
		*--end = ' ';
	}
	p = fmt_u64(end, it->len);
	*--p = ' ';
	p = fmt_u64(p, it->flags);
	*--p = ' ';
	nlen = (size_t)(num + sizeof(num) - p);
	total = 6 + hc->key_len + nlen + it->len + 2;
	if (evbuffer_reserve_space(b, (ev_ssize_t)total, &v, 1) != 1 ||
	    v.iov_len < total) {
		/* cannot get one piece: fall back to separate appends */
		evbuffer_add(b, "VALUE ", 6);
		evbuffer_add(b, hc->key, hc->key_len);
		evbuffer_add(b, p, nlen);
		evbuffer_add(b, it->data, it->len);
		evbuffer_add(b, "\r\n", 2);
		return 0;
	}
	w = v.iov_base;
	memcpy(w, "VALUE ", 6);
	w += 6;
	memcpy(w, hc->key, hc->key_len);
	w += hc->key_len;
	memcpy(w, p, nlen);
	w += nlen;
	if (it->len > 0)
		memcpy(w, it->data, it->len);
	w += it->len;
	memcpy(w, "\r\n", 2);
	v.iov_len = total;
	evbuffer_commit_space(b, &v, 1);
	return 0;
}

static int
text_hit(void *arg, const struct saker_item *it)
{
	return text_value(arg, it, false);
}

static int
text_hit_cas(void *arg, const struct saker_item *it)
{
	return text_value(arg, it, true);
}

static void
text_end(struct conn *c, const uint64_t *hits, size_t nkeys)
{
	(void)hits;
	(void)nkeys;
	conn_reply_str(c, "END\r\n");
}

static void
text_get_error(struct conn *c, size_t k, int r, const char *msg)
{
	(void)k;
	text_error(c, r, msg);
}

static const struct get_ops text_get_ops = {
	.hit = text_hit,
	.end = text_end,
	.error = text_get_error,
};

static const struct get_ops text_gets_ops = {
	.hit = text_hit_cas,
	.end = text_end,
	.error = text_get_error,
};

static void
remember_open(struct conn *c, struct squeue *q, uint64_t id)
{
	struct open_item *oi = calloc(1, sizeof(*oi));

	if (oi == NULL) {
		/* cannot track it: put it straight back rather than lose it */
		(void)DRV->release(STORE, q->h, id);
		log_error("out of memory tracking an open item on %s", q->name);
		return;
	}
	oi->q = q;
	oi->id = id;
	oi->batch = srv->batch;
	oi->opened_ms = saker_now_ms();
	if (queue_cfg(q)->open_timeout_ms > 0) {
		oi->deadline_ms = oi->opened_ms + queue_cfg(q)->open_timeout_ms;
		server_arm_open_timeout(oi->deadline_ms);
	}
	TAILQ_INSERT_TAIL(&c->opens, oi, link);
	c->nopens++;
}

/* Take one item from q for c with `opts`; c->gops writes it as the reply
 * for key k.  Returns SAKER_OK (hit), SAKER_EEMPTY, or an error. */
static int
take_for(struct conn *c, struct squeue *q, unsigned opts, size_t k,
    const char *key, size_t key_len, int64_t now)
{
	struct hit_ctx hc = { c, k, key, key_len, 0 };
	size_t pend_len = evbuffer_get_length(c->pend), nbrecs = c->nbrecs;
	int mode = SAKER_TAKE_REMOVE, rc;

	if (opts & PROTO_OPT_OPEN)
		mode = SAKER_TAKE_OPEN;
	else if (opts & PROTO_OPT_PEEK)
		mode = SAKER_TAKE_PEEK;
	if (mode == SAKER_TAKE_PEEK)
		srv->stats.cmd_peek++;
	else
		srv->stats.cmd_get++;
	rc = DRV->take(STORE, q->h, mode, now, c->gops->hit, &hc);
	if (rc != SAKER_OK && rc != SAKER_EEMPTY) {
		/* It may have failed after handing the item to the callback
		 * (out of memory marking it open, say): the item is still in
		 * the queue, so its reply must not go out. */
		conn_reply_truncate(c, pend_len, nbrecs);
	}
	if (rc == SAKER_OK) {
		srv->stats.get_hits++;
		if (mode != SAKER_TAKE_PEEK) {
			q->dequeued++;
			server_touch();
		}
		if (mode == SAKER_TAKE_REMOVE)
			conn_reply_keep(c, KEEP_IN_DOUBT);
		if (mode == SAKER_TAKE_OPEN)
			remember_open(c, q, hc.id);
		server_schedule_flush(c);
	}
	return rc;
}

/* --- set ---------------------------------------------------------------- */

static int64_t
expiry_ms(int64_t exptime, int64_t now)
{
	if (exptime == 0)
		return 0;
	if (exptime < 0)
		return 1;               /* already expired: never returned */
	if (exptime <= MEMCACHE_REL_MAX)
		return now + exptime * 1000;
	if (exptime > INT64_MAX / 1000)
		return 0;
	return exptime * 1000;
}

static int
discard_cb(void *arg, const struct saker_item *it)
{
	(void)arg;
	(void)it;
	return 0;
}

/* Put `it` into q within q's limits.  Returns SAKER_OK, a store error, or
 * 1 when the queue is full and configured to refuse (NOT_STORED). */
static int
put_limited(struct squeue *q, struct saker_item *it, int64_t now)
{
	const struct queue_config *qc = queue_cfg(q);
	struct saker_item copy = *it;
	int rc;

	if (qc->max_items > 0 || qc->max_bytes > 0) {
		for (;;) {
			struct saker_queue_stats st = { 0 };
			bool full;

			rc = DRV->queue_stats(STORE, q->h, &st);
			if (rc != SAKER_OK)
				return rc;
			full = (qc->max_items > 0 && st.items + st.delayed_items >= qc->max_items) ||
			    (qc->max_bytes > 0 && st.bytes + it->len > qc->max_bytes);
			if (!full)
				break;
			if (!qc->discard_old_when_full)
				return 1;
			rc = DRV->take(STORE, q->h, SAKER_TAKE_REMOVE, now, discard_cb, NULL);
			if (rc == SAKER_EEMPTY)
				return 1;       /* full of delayed or open items */
			if (rc != SAKER_OK)
				return rc;
			q->discarded++;
		}
	}
	if (qc->max_age_ms > 0) {
		int64_t limit = now + qc->max_age_ms;
		if (copy.expires_ms == 0 || copy.expires_ms > limit)
			copy.expires_ms = limit;
	}
	rc = DRV->put(STORE, q->h, &copy, now);
	if (rc == SAKER_OK)
		q->enqueued++;
	return rc;
}

/* The set operation; inlined into the text protocol's hot path, called
 * through op_set() by the others. */
static inline __attribute__((always_inline)) int
set_item(const struct proto_key *k, uint32_t flags, int64_t exptime,
    int64_t delay_ms, int64_t at_s, const void *data, size_t len,
    const char **msg)
{
	const struct queue_config *qc;
	struct saker_item it;
	struct squeue *q;
	int64_t now = saker_now_ms();
	size_t i;
	int rc, r;

	srv->stats.cmd_set++;
	if (srv->status != STATUS_UP) {
		*msg = "server is read-only";
		return OPR_READONLY;
	}
	memset(&it, 0, sizeof(it));
	it.flags = flags;
	it.expires_ms = expiry_ms(exptime, now);
	it.created_ms = now;
	it.len = len;
	it.data = data;
	if (delay_ms > 0) {
		/* `now` is truncated to the millisecond: +1 makes the item
		 * never visible before delay_ms have really passed (at most
		 * 1 ms late instead of up to 1 ms early). */
		it.due_ms = now + delay_ms + 1;
	} else if (at_s >= 0) {
		int64_t at = at_s * 1000;
		if (at - now > TEN_YEARS_MS)
			return OPR_FORMAT;
		it.due_ms = at > now ? at : 0;
	}
	q = queue_lookup(k->name, k->name_len, true, &rc);
	if (q == NULL) {
		*msg = cmd_store_error(rc, &r);
		return r;
	}
	qc = queue_cfg(q);
	if (qc->max_item_size > 0 && len > qc->max_item_size)
		return OPR_TOO_LARGE;
	rc = put_limited(q, &it, now);
	if (rc == 1)
		return OPR_NOT_STORED;
	if (rc != SAKER_OK) {
		*msg = cmd_store_error(rc, &r);
		return r;
	}
	server_touch();
	/* fanout: every existing child gets its own copy, within its limits */
	for (i = 0; i < q->nchildren; i++) {
		struct squeue *ch = q->children[i];
		if (ch->h == NULL)
			continue;
		rc = put_limited(ch, &it, now);
		if (rc < 0)
			log_error("fanout copy to %s failed: %s", ch->name, DRV->errmsg(STORE));
	}
	if (it.due_ms > now)
		server_arm_promote(it.due_ms);
	return OPR_OK;
}

int
op_set(const struct proto_key *k, uint32_t flags, int64_t exptime,
    int64_t delay_ms, int64_t at_s, const void *data, size_t len,
    const char **msg)
{
	return set_item(k, flags, exptime, delay_ms, at_s, data, len, msg);
}

static void
cmd_set(struct conn *c, struct proto_cmd *cmd, const char *data)
{
	const char *msg = NULL;
	int r;

	r = set_item(&cmd->keys[0], cmd->flags, cmd->exptime, cmd->delay_ms,
	    cmd->at_s, data, cmd->bytes, &msg);
	if (r == OPR_OK) {
		if (!cmd->noreply)
			conn_reply_str(c, "STORED\r\n");
		return;
	}
	/* noreply hides the answers about the request; store failures show */
	if (cmd->noreply && (r == OPR_NOT_STORED || r == OPR_TOO_LARGE ||
	    r == OPR_READONLY))
		return;
	text_error(c, r, msg);
}

/* --- get ---------------------------------------------------------------- */

static unsigned
take_opts(unsigned opts)
{
	return opts & (PROTO_OPT_OPEN | PROTO_OPT_PEEK);
}

/* Does this key fetch an item (as opposed to only close/abort)? */
static bool
key_fetches(const struct proto_key *k)
{
	return (k->opts & (PROTO_OPT_CLOSE | PROTO_OPT_ABORT)) == 0 ||
	    (k->opts & PROTO_OPT_OPEN) != 0;
}

#define HIT_SET(h, k) ((h)[(k) >> 6] |= (uint64_t)1 << ((k) & 63))

static void wait_timeout_cb(evutil_socket_t fd, short what, void *arg);

/* Wait on every fetching key's queue at once.  The keys' raw bytes are
 * copied (base), so the reply can echo them however late it comes. */
static void
start_wait(struct conn *c, const struct proto_key *keys, size_t nkeys,
    struct squeue **qs, const char *base, size_t baselen, int64_t timeout_ms)
{
	struct timeval tv;
	size_t i;

	c->wait_line = malloc(baselen + 1);
	c->waits = calloc(nkeys, sizeof(*c->waits));
	c->wait_timer = evtimer_new(srv->base, wait_timeout_cb, c);
	if (c->wait_line == NULL || c->waits == NULL || c->wait_timer == NULL) {
		free(c->wait_line);
		free(c->waits);
		if (c->wait_timer)
			event_free(c->wait_timer);
		c->wait_line = NULL;
		c->waits = NULL;
		c->wait_timer = NULL;
		c->gops->error(c, 0, OPR_NOMEM, "out of memory");
		return;
	}
	memcpy(c->wait_line, base, baselen);
	c->wait_line[baselen] = '\0';
	for (i = 0; i < nkeys; i++) {
		const struct proto_key *k = &keys[i];
		struct waiter *w = &c->waits[i];

		/* waits[i] belongs to key i, so a wake knows which key it answers */
		w->conn = c;
		w->raw_off = (uint16_t)(k->raw - base);
		w->raw_len = (uint16_t)k->raw_len;
		w->opts = take_opts(k->opts);
		if (key_fetches(k))
			waiter_link(w, qs[i]);
	}
	c->nwaits = nkeys;
	c->state = CONN_WAITING;
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	event_add(c->wait_timer, &tv);
}

static void
wait_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	static const uint64_t none[2] = { 0, 0 };
	struct conn *c = arg;
	const struct get_ops *ops = c->gops;
	size_t n = c->nwaits;

	(void)fd;
	(void)what;
	srv->stats.get_misses++;
	conn_end_wait(c);
	ops->end(c, none, n);
	server_drain();
}

void
cmd_serve_waiters(struct squeue *q)
{
	struct waiter *w;
	int64_t now = saker_now_ms();

	while (q->h != NULL && (w = TAILQ_FIRST(&q->waiters)) != NULL) {
		struct conn *c = w->conn;
		const struct get_ops *ops = c->gops;
		size_t k = (size_t)(w - c->waits), n = c->nwaits;
		uint64_t hits[2] = { 0, 0 };
		const char *msg;
		int rc, r;

		rc = take_for(c, q, w->opts, k, c->wait_line + w->raw_off, w->raw_len, now);
		if (rc == SAKER_EEMPTY)
			break;
		if (rc != SAKER_OK) {
			log_error("handing an item of %s to a waiter: %s", q->name,
			    DRV->errmsg(STORE));
			conn_end_wait(c);
			msg = cmd_store_error(rc, &r);
			ops->error(c, k, r, msg);
			continue;
		}
		if (c->monitoring && (c->monitor_left < 0 || --c->monitor_left > 0)) {
			/* a monitor goes on: to the back of the line, per item */
			waiter_unlink(w);
			waiter_link(w, q);
			continue;
		}
		conn_end_wait(c);
		HIT_SET(hits, k);
		ops->end(c, hits, n);
	}
}

void
cmd_get(struct conn *c, const struct get_ops *ops, const struct proto_key *keys,
    size_t nkeys, const char *base, size_t baselen)
{
	struct squeue *qs[PROTO_MAX_KEYS];
	uint64_t hits[2] = { 0, 0 };
	int64_t now = saker_now_ms(), timeout = -1;
	size_t i, misses = 0;
	bool fetches = false;
	const char *msg;
	int rc, r;

	c->gops = ops;
	if (srv->status == STATUS_QUIESCENT) {
		ops->error(c, 0, OPR_READONLY, "server is quiescent");
		return;
	}
	/* Pass 1: find the queues and refuse bad requests before any item
	 * moves, so an error never costs an item. */
	for (i = 0; i < nkeys; i++) {
		const struct proto_key *k = &keys[i];
		size_t held;

		qs[i] = queue_lookup(k->name, k->name_len, true, &rc);
		if (qs[i] == NULL) {
			msg = cmd_store_error(rc, &r);
			ops->error(c, i, r, msg);
			return;
		}
		held = conn_count_open(c, qs[i]);
		if (k->opts == 0 && held > 0) {
			ops->error(c, i, OPR_CLIENT, "close or abort the open item first");
			return;
		}
		if ((k->opts & PROTO_OPT_OPEN) != 0) {
			size_t after = held;
			if ((k->opts & PROTO_OPT_CLOSE) != 0 && after > 0)
				after--;
			if (after >= queue_cfg(qs[i])->max_open) {
				ops->error(c, i, OPR_CLIENT, "too many open items");
				return;
			}
		}
		if (key_fetches(k)) {
			fetches = true;
			if (k->timeout_ms > timeout)
				timeout = k->timeout_ms;
		}
	}
	/* Pass 2: close/abort, then fetch. */
	for (i = 0; i < nkeys; i++) {
		const struct proto_key *k = &keys[i];
		struct open_item *oi;

		if ((k->opts & (PROTO_OPT_CLOSE | PROTO_OPT_ABORT)) != 0 &&
		    (oi = conn_oldest_open(c, qs[i])) != NULL) {
			if (k->opts & PROTO_OPT_CLOSE)
				rc = DRV->confirm(STORE, qs[i]->h, oi->id);
			else
				rc = DRV->release(STORE, qs[i]->h, oi->id);
			if (rc != SAKER_OK && rc != SAKER_ENOTFOUND) {
				msg = cmd_store_error(rc, &r);
				ops->error(c, i, r, msg);
				return;
			}
			conn_forget_open(c, oi);
			server_touch();
		}
		if (!key_fetches(k))
			continue;
		rc = take_for(c, qs[i], take_opts(k->opts), i, k->raw, k->raw_len, now);
		if (rc == SAKER_OK) {
			HIT_SET(hits, i);
		} else if (rc == SAKER_EEMPTY) {
			misses++;
		} else if ((hits[0] | hits[1]) == 0) {
			/* nothing handed out yet: the error is the reply */
			msg = cmd_store_error(rc, &r);
			log_error("get from %s: %s", qs[i]->name, msg);
			ops->error(c, i, r, msg);
			return;
		} else {
			/* replies already written for earlier keys stay valid */
			log_error("get from %s: %s", qs[i]->name, DRV->errmsg(STORE));
		}
	}
	if ((hits[0] | hits[1]) == 0 && fetches && timeout > 0) {
		/* counted as a miss only if the wait times out */
		start_wait(c, keys, nkeys, qs, base, baselen, timeout);
		return;
	}
	srv->stats.get_misses += misses;
	ops->end(c, hits, nkeys);
}

/*
 * Keys that come without a text line are checked by the text parser itself,
 * on a line made for the purpose: one definition of what a queue name and
 * its options may be.  A key with a space or a tab splits into two tokens,
 * which is a bad queue name for every protocol.
 */
static const char *
parse_as_line(const char *prefix, size_t plen, const char *key, size_t len,
    const char *suffix, size_t slen, struct proto_cmd *cmd)
{
	static char line[PROTO_MAX_LINE];
	const char *err;

	if (len == 0)
		return PROTO_ERR_FORMAT;
	if (memchr(key, ' ', len) != NULL || memchr(key, '\t', len) != NULL)
		return PROTO_ERR_QNAME;
	if (plen + len + slen > sizeof(line))
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
cmd_parse_get_key(const char *key, size_t len, struct proto_key *k)
{
	static struct proto_cmd cmd;
	const char *err;

	err = parse_as_line("get ", 4, key, len, "", 0, &cmd);
	if (err != NULL)
		return err;
	*k = cmd.keys[0];
	k->raw = k->name = key;
	return NULL;
}

const char *
cmd_parse_set_key(const char *key, size_t len, struct proto_key *k,
    int64_t *delay_ms, int64_t *at_s)
{
	static struct proto_cmd cmd;
	const char *err;

	/* a set line with extra tokens is a format error, so a key holding a
	 * space cannot pass as a shorter key */
	err = parse_as_line("set ", 4, key, len, " 0 0 0", 6, &cmd);
	if (err != NULL)
		return err;
	*k = cmd.keys[0];
	k->raw = k->name = key;
	*delay_ms = cmd.delay_ms;
	*at_s = cmd.at_s;
	return NULL;
}

/* --- get groups --------------------------------------------------------- */

bool
gg_room(struct conn *c, size_t bytes)
{
	if (c->grp == NULL)
		return true;
	return c->grp->nkeys < PROTO_MAX_KEYS && c->grp->len + bytes <= GG_MAX_BYTES;
}

static bool
gg_reserve(struct getgroup *g, size_t n)
{
	size_t cap;
	char *nb;

	if (g->len + n <= g->cap)
		return true;
	cap = g->cap ? g->cap : 256;
	while (cap < g->len + n)
		cap *= 2;
	if ((nb = realloc(g->buf, cap)) == NULL)
		return false;
	g->buf = nb;
	g->cap = cap;
	return true;
}

struct gg_key *
gg_add(struct conn *c, const struct proto_key *k, const char *raw, size_t rawlen)
{
	struct getgroup *g = c->grp;
	struct gg_key *gk;

	if (g == NULL && (g = c->grp = calloc(1, sizeof(*g))) == NULL)
		return NULL;
	if (g->nkeys >= PROTO_MAX_KEYS || g->len + rawlen > GG_MAX_BYTES ||
	    !gg_reserve(g, rawlen))
		return NULL;
	gk = &g->keys[g->nkeys++];
	memset(gk, 0, sizeof(*gk));
	gk->off = (uint16_t)g->len;
	gk->len = (uint16_t)rawlen;
	memcpy(g->buf + g->len, raw, rawlen);
	g->len += rawlen;
	gk->name_len = (uint16_t)k->name_len;
	gk->opts = k->opts;
	gk->timeout_ms = k->timeout_ms;
	return gk;
}

bool
gg_stash(struct conn *c, struct gg_key *gk, const char *p, size_t n)
{
	struct getgroup *g = c->grp;

	if (n > 255 || g->len + n > GG_MAX_BYTES || !gg_reserve(g, n))
		return false;
	gk->ooff = (uint16_t)g->len;
	gk->olen = (uint8_t)n;
	memcpy(g->buf + g->len, p, n);
	g->len += n;
	return true;
}

void
gg_run(struct conn *c, const struct get_ops *ops, int end, uint32_t end_opaque)
{
	struct proto_key keys[PROTO_MAX_KEYS];
	struct getgroup *g = c->grp;
	size_t i;

	g->end = end;
	g->end_opaque = end_opaque;
	for (i = 0; i < g->nkeys; i++) {
		const struct gg_key *gk = &g->keys[i];
		struct proto_key *k = &keys[i];

		k->raw = k->name = g->buf + gk->off;
		k->raw_len = gk->len;
		k->name_len = gk->name_len;
		k->opts = gk->opts;
		k->timeout_ms = gk->timeout_ms;
	}
	cmd_get(c, ops, keys, g->nkeys, g->buf, g->len);
}

void
gg_reset(struct conn *c)
{
	if (c->grp == NULL)
		return;
	c->grp->nkeys = 0;
	c->grp->len = 0;
	c->grp->end = GG_END_NONE;
}

void
gg_free(struct conn *c)
{
	if (c->grp == NULL)
		return;
	free(c->grp->buf);
	free(c->grp);
	c->grp = NULL;
}

/* --- queue administration ----------------------------------------------- */

int
op_delete(const char *name, size_t len, const char **msg)
{
	struct squeue *q;
	int rc, r;

	q = queue_lookup(name, len, false, &rc);
	if (q == NULL)
		return OPR_NOT_FOUND;
	rc = queue_delete(q);
	if (rc != SAKER_OK) {
		*msg = cmd_store_error(rc, &r);
		return r;
	}
	return OPR_OK;
}

static void
cmd_delete(struct conn *c, struct proto_cmd *cmd)
{
	struct proto_key *k = &cmd->keys[0];
	const char *msg = NULL;
	int r = op_delete(k->name, k->name_len, &msg);

	if (r == OPR_OK) {
		if (!cmd->noreply)
			conn_reply_str(c, "DELETED\r\n");
	} else if (r != OPR_NOT_FOUND || !cmd->noreply) {
		text_error(c, r, msg);
	}
}

static int
flush_one(struct squeue *q)
{
	int rc = DRV->queue_flush(STORE, q->h);

	if (rc == SAKER_OK) {
		conns_forget_queue(q);
		server_touch();
	}
	return rc;
}

static void
cmd_flush(struct conn *c, struct proto_cmd *cmd)
{
	struct proto_key *k = &cmd->keys[0];
	struct squeue *q;
	const char *msg;
	int rc = SAKER_OK, r;

	q = queue_lookup(k->name, k->name_len, false, &rc);
	if (q != NULL)
		rc = flush_one(q);
	if (rc != SAKER_OK && rc != SAKER_ENOTFOUND) {
		msg = cmd_store_error(rc, &r);
		text_error(c, r, msg);
		return;
	}
	if (!cmd->noreply)
		conn_reply_str(c, "END\r\n");
}

static int
flush_all_cb(void *arg, struct squeue *q)
{
	int *rc = arg;

	*rc = flush_one(q);
	return *rc != SAKER_OK;
}

int
op_flush_all(const char **msg)
{
	int rc = SAKER_OK, r;

	(void)queues_walk(flush_all_cb, &rc);
	if (rc != SAKER_OK) {
		*msg = cmd_store_error(rc, &r);
		return r;
	}
	return OPR_OK;
}

static void
cmd_flush_all(struct conn *c, struct proto_cmd *cmd)
{
	const char *msg = NULL;
	int r = op_flush_all(&msg);

	if (r != OPR_OK)
		text_error(c, r, msg);
	else if (!cmd->noreply)
		conn_reply_str(c, "OK\r\n");
}

static void
cmd_flush_expired(struct conn *c, struct proto_cmd *cmd)
{
	struct proto_key *k = &cmd->keys[0];
	struct squeue *q;
	uint64_t removed = 0;
	const char *msg;
	int rc, r;

	q = queue_lookup(k->name, k->name_len, false, &rc);
	if (q != NULL) {
		rc = DRV->flush_expired(STORE, q->h, saker_now_ms(), 0, &removed);
		if (rc != SAKER_OK) {
			msg = cmd_store_error(rc, &r);
			text_error(c, r, msg);
			return;
		}
		if (removed > 0)
			server_touch();
	}
	conn_replyf(c, "%llu\r\n", (unsigned long long)removed);
	conn_reply_done(c);
}

/* monitor <q> <seconds> [max]: hand out, opened, the items ready now and
 * those arriving in the next <seconds> (up to max), then END; the client
 * confirms them with `confirm <q> <n>`. */
static void
cmd_monitor(struct conn *c, struct proto_cmd *cmd, const char *line, size_t linelen)
{
	struct proto_key *k = &cmd->keys[0];
	struct squeue *q;
	int64_t now = saker_now_ms(), n;
	const char *msg;
	int rc, r;

	c->gops = &text_get_ops;
	if (srv->status == STATUS_QUIESCENT) {
		conn_reply_str(c, "SERVER_ERROR server is quiescent\r\n");
		return;
	}
	q = queue_lookup(k->name, k->name_len, true, &rc);
	if (q == NULL) {
		msg = cmd_store_error(rc, &r);
		text_error(c, r, msg);
		return;
	}
	for (n = 0; cmd->num2 < 0 || n < cmd->num2; n++) {
		rc = take_for(c, q, PROTO_OPT_OPEN, 0, k->raw, k->raw_len, now);
		if (rc != SAKER_OK)
			break;
	}
	if ((cmd->num2 < 0 || n < cmd->num2) && cmd->num1 > 0) {
		/* stream items that arrive during the monitor period */
		start_wait(c, k, 1, &q, line, linelen, cmd->num1 * 1000);
		if (c->state == CONN_WAITING) {
			c->monitoring = true;
			c->monitor_left = cmd->num2 < 0 ? -1 : cmd->num2 - n;
			c->waits[0].opts = PROTO_OPT_OPEN;
		}
		return;
	}
	conn_reply_str(c, "END\r\n");
}

static void
cmd_confirm(struct conn *c, struct proto_cmd *cmd)
{
	struct proto_key *k = &cmd->keys[0];
	struct squeue *q;
	const char *msg;
	int64_t i;
	int rc, r;

	q = queue_lookup(k->name, k->name_len, false, &rc);
	if (q == NULL || (int64_t)conn_count_open(c, q) < cmd->num1) {
		conn_reply_str(c, "ERROR\r\n");
		return;
	}
	for (i = 0; i < cmd->num1; i++) {
		struct open_item *oi = conn_oldest_open(c, q);
		rc = DRV->confirm(STORE, q->h, oi->id);
		if (rc != SAKER_OK && rc != SAKER_ENOTFOUND) {
			msg = cmd_store_error(rc, &r);
			text_error(c, r, msg);
			return;
		}
		conn_forget_open(c, oi);
		server_touch();
	}
	conn_reply_str(c, "END\r\n");
}

static void
cmd_status(struct conn *c, struct proto_cmd *cmd)
{
	static const char *const names[] = { "UP", "READONLY", "QUIESCENT" };

	switch (cmd->status) {
	case PROTO_STATUS_QUERY:
		conn_replyf(c, "%s\r\n", names[srv->status]);
		conn_reply_done(c);
		return;
	case PROTO_STATUS_UP:
		srv->status = STATUS_UP;
		break;
	case PROTO_STATUS_READONLY:
		srv->status = STATUS_READONLY;
		break;
	case PROTO_STATUS_QUIESCENT:
		srv->status = STATUS_QUIESCENT;
		break;
	}
	log_info("server status is now %s", names[srv->status]);
	conn_reply_str(c, "END\r\n");
}

void
cmd_execute(struct conn *c, struct proto_cmd *cmd, const char *line,
    size_t linelen, const char *data)
{
	switch (cmd->type) {
	case PROTO_CMD_SET:
		cmd_set(c, cmd, data);
		break;
	case PROTO_CMD_GET:
		cmd_get(c, cmd->cas ? &text_gets_ops : &text_get_ops, cmd->keys,
		    cmd->nkeys, line, linelen);
		break;
	case PROTO_CMD_DELETE:
		cmd_delete(c, cmd);
		break;
	case PROTO_CMD_FLUSH:
		cmd_flush(c, cmd);
		break;
	case PROTO_CMD_FLUSH_ALL:
		cmd_flush_all(c, cmd);
		break;
	case PROTO_CMD_FLUSH_EXPIRED:
		cmd_flush_expired(c, cmd);
		break;
	case PROTO_CMD_MONITOR:
		cmd_monitor(c, cmd, line, linelen);
		break;
	case PROTO_CMD_CONFIRM:
		cmd_confirm(c, cmd);
		break;
	case PROTO_CMD_STATS:
		stats_write(c->pend);
		conn_reply_done(c);
		server_schedule_flush(c);
		break;
	case PROTO_CMD_STATUS:
		cmd_status(c, cmd);
		break;
	case PROTO_CMD_VERSION:
		conn_reply_keep(c, KEEP_ALWAYS);
		conn_reply_str(c, "VERSION " PACKAGE_VERSION "\r\n");
		break;
	case PROTO_CMD_VERBOSITY:
		log_set_level((int)cmd->num1);
		if (!cmd->noreply)
			conn_reply_str(c, "OK\r\n");
		break;
	case PROTO_CMD_QUIT:
		/* the replies of the commands before it still go out */
		conn_close_after_write(c);
		break;
	case PROTO_CMD_SHUTDOWN:
		if (!srv->opt->enable_shutdown) {
			conn_reply_str(c, "ERROR\r\n");
			break;
		}
		log_info("shutdown requested by a client");
		conn_close(c);
		server_stop();
		break;
	case PROTO_CMD_NONE:
	case PROTO_CMD_NOSTORE:		/* answered by conn.c */
		conn_reply_str(c, PROTO_ERR_UNKNOWN);
		break;
	}
}
