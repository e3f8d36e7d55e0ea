/* commands.c -- what each command does: set, get (blocking, multi-key,
 * reliable reads), delete, flush, stats, status and the rest. */
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

static void
reply_store_error(struct conn *c, int rc)
{
	const char *why = DRV->errmsg(STORE);

	if (why == NULL || *why == '\0')
		why = saker_strerror(rc);
	if (rc == SAKER_EREADONLY || rc == SAKER_EIO || rc == SAKER_EFULL)
		server_store_failed(why);
	conn_replyf(c, "SERVER_ERROR %s\r\n", why);
	conn_reply_done(c);
}

/* --- VALUE replies ------------------------------------------------------ */

struct value_ctx {
	struct conn *c;
	const char *key;            /* echoed exactly as requested */
	size_t key_len;
	uint64_t id;                /* of the item handed out */
};

static char *
fmt_u64(char *end, uint64_t v)
{
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	return end;
}

static int
value_cb(void *arg, const struct saker_item *it)
{
	struct value_ctx *vc = arg;
	struct evbuffer *b = vc->c->pend;
	char num[48], *end = num + sizeof(num), *p;

	vc->id = it->id;
	/* " <flags> <bytes>\r\n" built backwards into num */
	*--end = '\n';
	*--end = '\r';
	p = fmt_u64(end, it->len);
	*--p = ' ';
	p = fmt_u64(p, it->flags);
	*--p = ' ';
	evbuffer_add(b, "VALUE ", 6);
	evbuffer_add(b, vc->key, vc->key_len);
	evbuffer_add(b, p, (size_t)(num + sizeof(num) - p));
	evbuffer_add(b, it->data, it->len);
	evbuffer_add(b, "\r\n", 2);
	return 0;
}

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

/* Take one item from q for c with `opts`; write its VALUE under key.
 * Returns SAKER_OK (hit), SAKER_EEMPTY, or an error. */
static int
take_for(struct conn *c, struct squeue *q, unsigned opts, const char *key,
    size_t key_len, int64_t now)
{
	struct value_ctx vc = { c, key, key_len, 0 };
	int mode = SAKER_TAKE_REMOVE, rc;

	if (opts & PROTO_OPT_OPEN)
		mode = SAKER_TAKE_OPEN;
	else if (opts & PROTO_OPT_PEEK)
		mode = SAKER_TAKE_PEEK;
	if (mode == SAKER_TAKE_PEEK)
		srv->stats.cmd_peek++;
	else
		srv->stats.cmd_get++;
	rc = DRV->take(STORE, q->h, mode, now, value_cb, &vc);
	if (rc == SAKER_OK) {
		srv->stats.get_hits++;
		if (mode != SAKER_TAKE_PEEK) {
			q->dequeued++;
			server_touch();
		}
		if (mode == SAKER_TAKE_OPEN)
			remember_open(c, q, vc.id);
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

static void
cmd_set(struct conn *c, struct proto_cmd *cmd, const char *data)
{
	struct proto_key *k = &cmd->keys[0];
	const struct queue_config *qc;
	struct saker_item it;
	struct squeue *q;
	int64_t now = saker_now_ms();
	size_t i;
	int rc;

	srv->stats.cmd_set++;
	if (srv->status != STATUS_UP) {
		if (!cmd->noreply)
			conn_reply_str(c, "SERVER_ERROR server is read-only\r\n");
		return;
	}
	memset(&it, 0, sizeof(it));
	it.flags = cmd->flags;
	it.expires_ms = expiry_ms(cmd->exptime, now);
	it.created_ms = now;
	it.len = cmd->bytes;
	it.data = data;
	if (cmd->delay_ms > 0) {
		it.due_ms = now + cmd->delay_ms;
	} else if (cmd->at_s >= 0) {
		int64_t at = cmd->at_s * 1000;
		if (at - now > TEN_YEARS_MS) {
			conn_reply_str(c, PROTO_ERR_FORMAT);
			return;
		}
		it.due_ms = at > now ? at : 0;
	}
	q = queue_lookup(k->name, k->name_len, true, &rc);
	if (q == NULL) {
		reply_store_error(c, rc);
		return;
	}
	qc = queue_cfg(q);
	if (qc->max_item_size > 0 && cmd->bytes > qc->max_item_size) {
		if (!cmd->noreply)
			conn_reply_str(c, PROTO_ERR_TOO_LARGE);
		return;
	}
	rc = put_limited(q, &it, now);
	if (rc == 1) {
		if (!cmd->noreply)
			conn_reply_str(c, "NOT_STORED\r\n");
		return;
	}
	if (rc != SAKER_OK) {
		reply_store_error(c, rc);
		return;
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
	if (!cmd->noreply)
		conn_reply_str(c, "STORED\r\n");
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

static void wait_timeout_cb(evutil_socket_t fd, short what, void *arg);

static void
start_wait(struct conn *c, struct proto_cmd *cmd, struct squeue **qs,
    const char *line, size_t linelen, int64_t timeout_ms)
{
	struct timeval tv;
	size_t i, n = 0;

	c->wait_line = malloc(linelen + 1);
	c->waits = calloc(cmd->nkeys, sizeof(*c->waits));
	c->wait_timer = evtimer_new(srv->base, wait_timeout_cb, c);
	if (c->wait_line == NULL || c->waits == NULL || c->wait_timer == NULL) {
		free(c->wait_line);
		free(c->waits);
		if (c->wait_timer)
			event_free(c->wait_timer);
		c->wait_line = NULL;
		c->waits = NULL;
		c->wait_timer = NULL;
		conn_reply_str(c, "SERVER_ERROR out of memory\r\n");
		return;
	}
	memcpy(c->wait_line, line, linelen);
	c->wait_line[linelen] = '\0';
	for (i = 0; i < cmd->nkeys; i++) {
		struct proto_key *k = &cmd->keys[i];
		struct waiter *w;

		if (!key_fetches(k))
			continue;
		w = &c->waits[n++];
		w->conn = c;
		w->raw_off = (uint16_t)(k->raw - line);
		w->raw_len = (uint16_t)k->raw_len;
		w->opts = take_opts(k->opts);
		waiter_link(w, qs[i]);
	}
	c->nwaits = n;
	c->state = CONN_WAITING;
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	event_add(c->wait_timer, &tv);
}

static void
wait_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	(void)fd;
	(void)what;
	srv->stats.get_misses++;
	conn_end_wait(c);
	conn_reply_str(c, "END\r\n");
	server_drain();
}

void
cmd_serve_waiters(struct squeue *q)
{
	struct waiter *w;
	int64_t now = saker_now_ms();

	while (q->h != NULL && (w = TAILQ_FIRST(&q->waiters)) != NULL) {
		struct conn *c = w->conn;
		int rc = take_for(c, q, w->opts, c->wait_line + w->raw_off, w->raw_len, now);

		if (rc == SAKER_EEMPTY)
			break;
		if (rc != SAKER_OK) {
			log_error("handing an item of %s to a waiter: %s", q->name,
			    DRV->errmsg(STORE));
			conn_end_wait(c);
			reply_store_error(c, rc);
			continue;
		}
		if (c->monitoring && (c->monitor_left < 0 || --c->monitor_left > 0)) {
			/* a monitor goes on: to the back of the line, per item */
			waiter_unlink(w);
			waiter_link(w, q);
			continue;
		}
		conn_end_wait(c);
		conn_reply_str(c, "END\r\n");
	}
}

static void
cmd_get(struct conn *c, struct proto_cmd *cmd, const char *line, size_t linelen)
{
	struct squeue *qs[PROTO_MAX_KEYS];
	int64_t now = saker_now_ms(), timeout = -1;
	size_t i, hits = 0, misses = 0;
	bool fetches = false;
	int rc;

	if (srv->status == STATUS_QUIESCENT) {
		conn_reply_str(c, "SERVER_ERROR server is quiescent\r\n");
		return;
	}
	/* Pass 1: find the queues and refuse bad requests before any item
	 * moves, so an error never costs an item. */
	for (i = 0; i < cmd->nkeys; i++) {
		struct proto_key *k = &cmd->keys[i];
		size_t held;

		qs[i] = queue_lookup(k->name, k->name_len, true, &rc);
		if (qs[i] == NULL) {
			reply_store_error(c, rc);
			return;
		}
		held = conn_count_open(c, qs[i]);
		if (k->opts == 0 && held > 0) {
			conn_reply_str(c, "CLIENT_ERROR close or abort the open item first\r\n");
			return;
		}
		if ((k->opts & PROTO_OPT_OPEN) != 0) {
			size_t after = held;
			if ((k->opts & PROTO_OPT_CLOSE) != 0 && after > 0)
				after--;
			if (after >= queue_cfg(qs[i])->max_open) {
				conn_reply_str(c, "CLIENT_ERROR too many open items\r\n");
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
	for (i = 0; i < cmd->nkeys; i++) {
		struct proto_key *k = &cmd->keys[i];
		struct open_item *oi;

		if ((k->opts & (PROTO_OPT_CLOSE | PROTO_OPT_ABORT)) != 0 &&
		    (oi = conn_oldest_open(c, qs[i])) != NULL) {
			if (k->opts & PROTO_OPT_CLOSE)
				rc = DRV->confirm(STORE, qs[i]->h, oi->id);
			else
				rc = DRV->release(STORE, qs[i]->h, oi->id);
			if (rc != SAKER_OK && rc != SAKER_ENOTFOUND) {
				reply_store_error(c, rc);
				return;
			}
			conn_forget_open(c, oi);
			server_touch();
		}
		if (!key_fetches(k))
			continue;
		rc = take_for(c, qs[i], take_opts(k->opts), k->raw, k->raw_len, now);
		if (rc == SAKER_OK) {
			hits++;
		} else if (rc == SAKER_EEMPTY) {
			misses++;
		} else {
			/* replies already written for earlier keys stay valid */
			log_error("get from %s: %s", qs[i]->name, DRV->errmsg(STORE));
		}
	}
	if (hits == 0 && fetches && timeout > 0) {
		/* counted as a miss only if the wait times out */
		start_wait(c, cmd, qs, line, linelen, timeout);
		return;
	}
	srv->stats.get_misses += misses;
	conn_reply_str(c, "END\r\n");
}

/* --- queue administration ----------------------------------------------- */

static void
cmd_delete(struct conn *c, struct proto_cmd *cmd)
{
	struct proto_key *k = &cmd->keys[0];
	struct squeue *q;
	int rc;

	q = queue_lookup(k->name, k->name_len, false, &rc);
	if (q == NULL) {
		if (!cmd->noreply)
			conn_reply_str(c, rc == SAKER_ENOTFOUND ? "NOT_FOUND\r\n" :
			    "SERVER_ERROR cannot look up queue\r\n");
		return;
	}
	rc = queue_delete(q);
	if (rc != SAKER_OK) {
		reply_store_error(c, rc);
		return;
	}
	if (!cmd->noreply)
		conn_reply_str(c, "DELETED\r\n");
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
	int rc = SAKER_OK;

	q = queue_lookup(k->name, k->name_len, false, &rc);
	if (q != NULL)
		rc = flush_one(q);
	if (rc != SAKER_OK && rc != SAKER_ENOTFOUND) {
		reply_store_error(c, rc);
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

static void
cmd_flush_all(struct conn *c, struct proto_cmd *cmd)
{
	int rc = SAKER_OK;

	(void)queues_walk(flush_all_cb, &rc);
	if (rc != SAKER_OK) {
		reply_store_error(c, rc);
		return;
	}
	if (!cmd->noreply)
		conn_reply_str(c, "OK\r\n");
}

static void
cmd_flush_expired(struct conn *c, struct proto_cmd *cmd)
{
	struct proto_key *k = &cmd->keys[0];
	struct squeue *q;
	uint64_t removed = 0;
	int rc;

	q = queue_lookup(k->name, k->name_len, false, &rc);
	if (q != NULL) {
		rc = DRV->flush_expired(STORE, q->h, saker_now_ms(), 0, &removed);
		if (rc != SAKER_OK) {
			reply_store_error(c, rc);
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
	int rc;

	if (srv->status == STATUS_QUIESCENT) {
		conn_reply_str(c, "SERVER_ERROR server is quiescent\r\n");
		return;
	}
	q = queue_lookup(k->name, k->name_len, true, &rc);
	if (q == NULL) {
		reply_store_error(c, rc);
		return;
	}
	for (n = 0; cmd->num2 < 0 || n < cmd->num2; n++) {
		rc = take_for(c, q, PROTO_OPT_OPEN, k->raw, k->raw_len, now);
		if (rc != SAKER_OK)
			break;
	}
	if ((cmd->num2 < 0 || n < cmd->num2) && cmd->num1 > 0) {
		/* stream items that arrive during the monitor period */
		start_wait(c, cmd, &q, line, linelen, cmd->num1 * 1000);
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
	int64_t i;
	int rc;

	q = queue_lookup(k->name, k->name_len, false, &rc);
	if (q == NULL || (int64_t)conn_count_open(c, q) < cmd->num1) {
		conn_reply_str(c, "ERROR\r\n");
		return;
	}
	for (i = 0; i < cmd->num1; i++) {
		struct open_item *oi = conn_oldest_open(c, q);
		rc = DRV->confirm(STORE, q->h, oi->id);
		if (rc != SAKER_OK && rc != SAKER_ENOTFOUND) {
			reply_store_error(c, rc);
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
		cmd_get(c, cmd, line, linelen);
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
		conn_reply_str(c, "VERSION " PACKAGE_VERSION "\r\n");
		break;
	case PROTO_CMD_VERBOSITY:
		log_set_level((int)cmd->num1);
		if (!cmd->noreply)
			conn_reply_str(c, "OK\r\n");
		break;
	case PROTO_CMD_QUIT:
		conn_close(c);
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
		conn_reply_str(c, PROTO_ERR_UNKNOWN);
		break;
	}
}
