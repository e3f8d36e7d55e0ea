/* http.c -- /metrics and /healthz for operators, on the main event loop. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/listener.h>

#include "auth.h"
#include "clock.h"
#include "console.h"
#include "http.h"
#include "login.h"
#include "proto_meta.h"
#include "tls.h"
#include "log.h"
#include "queues.h"

struct http_server {
	struct evhttp *http;
	struct broker *b;           /* what /metrics and /healthz report */
	unsigned max_queues;        /* --metrics-max-queues */
	const bool *stopping;       /* the server is stopping: /healthz 503 */
	bool need_admin;            /* /metrics: Basic auth of an admin user */
	struct console_env console; /* the web console (console.h) */
	struct event_base *base;
};

/* Request line and headers together; no request we serve reads a body. */
#define HTTP_MAX_HEADERS 8192
#define HTTP_MAX_BODY 1024
/* A connection that sends or reads nothing for this long is closed. */
#define HTTP_TIMEOUT_S 10

/* Open HTTP connections, counted against -c together with the memcache
 * ones.  File-level, not in struct http_server: a connection's bufferevent
 * is finalized by libevent after evhttp_free() too (at event_base_free). */
static struct {
	unsigned open;               /* HTTP connections open */
	const uint64_t *others;      /* memcache connections open */
	uint64_t *rejected;          /* stats.rejected_connections */
	uint64_t max;                /* -c */
} hconn;

unsigned
http_connections(void)
{
	return hconn.open;
}

/* Prometheus label values escape backslash, double quote and newline
 * (the text exposition format): a queue name holding one of them must not
 * end the label or the line early. */
void
http_label_value(struct evbuffer *b, const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (s[i] == '\n')
			evbuffer_add(b, "\\n", 2);
		else if (s[i] == '\\' || s[i] == '"') {
			evbuffer_add(b, "\\", 1);
			evbuffer_add(b, &s[i], 1);
		} else
			evbuffer_add(b, &s[i], 1);
	}
}

static void
metric_head(struct evbuffer *b, const char *name, const char *type, const char *help)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
metric_u64(struct evbuffer *b, const char *name, const char *type, const char *help,
    uint64_t v)
{
	metric_head(b, name, type, help);
	evbuffer_add_printf(b, "%s %" PRIu64 "\n", name, v);
}

static void
metric_dbl(struct evbuffer *b, const char *name, const char *type, const char *help,
    double v)
{
	metric_head(b, name, type, help);
	evbuffer_add_printf(b, "%s %.6f\n", name, v);
}

struct qrow {
	struct squeue *q;
	struct saker_queue_stats st;
};

struct qcollect {
	struct broker *b;
	struct qrow *rows;
	size_t n, cap, max, skipped;
};

static int
collect_one(void *arg, struct squeue *q)
{
	struct qcollect *qc = arg;

	if (qc->n >= qc->max) {
		qc->skipped++;
		return 0;
	}
	if (qc->n == qc->cap) {
		size_t ncap = qc->cap ? qc->cap * 2 : 64;
		struct qrow *nr = realloc(qc->rows, ncap * sizeof(*nr));
		if (nr == NULL)
			return 1;
		qc->rows = nr;
		qc->cap = ncap;
	}
	memset(&qc->rows[qc->n], 0, sizeof(qc->rows[qc->n]));
	qc->rows[qc->n].q = q;
	if (qc->b->store->driver->queue_stats(qc->b->store, q->h, &qc->rows[qc->n].st) == SAKER_OK)
		qc->n++;
	return 0;
}

enum qfield { QF_ITEMS, QF_BYTES, QF_DELAYED, QF_OPEN, QF_WAITERS, QF_ENQ, QF_DEQ,
    QF_EXPIRED, QF_DISCARDED, QF_AGE, QF_DEAD, QF_EXPIRED_TO };

static void
queue_metric(struct evbuffer *b, struct qcollect *qc, const char *name,
    const char *type, const char *help, enum qfield f)
{
	int64_t now = saker_now_ms();
	size_t i;

	metric_head(b, name, type, help);
	for (i = 0; i < qc->n; i++) {
		struct qrow *r = &qc->rows[i];
		evbuffer_add_printf(b, "%s{queue=\"", name);
		http_label_value(b, r->q->name, r->q->len);
		evbuffer_add(b, "\"} ", 3);
		switch (f) {
		case QF_ITEMS: evbuffer_add_printf(b, "%" PRIu64 "\n", r->st.items); break;
		case QF_BYTES: evbuffer_add_printf(b, "%" PRIu64 "\n", r->st.bytes); break;
		case QF_DELAYED: evbuffer_add_printf(b, "%" PRIu64 "\n", r->st.delayed_items); break;
		case QF_OPEN: evbuffer_add_printf(b, "%" PRIu64 "\n", r->st.open_items); break;
		case QF_WAITERS: evbuffer_add_printf(b, "%zu\n", r->q->nwaiters); break;
		case QF_ENQ: evbuffer_add_printf(b, "%" PRIu64 "\n", r->st.total_items); break;
		case QF_DEQ: evbuffer_add_printf(b, "%" PRIu64 "\n", r->q->dequeued); break;
		case QF_EXPIRED: evbuffer_add_printf(b, "%" PRIu64 "\n", r->st.expired_items); break;
		case QF_DISCARDED: evbuffer_add_printf(b, "%" PRIu64 "\n", r->q->discarded); break;
		case QF_DEAD: evbuffer_add_printf(b, "%" PRIu64 "\n", r->q->dead_lettered); break;
		case QF_EXPIRED_TO: evbuffer_add_printf(b, "%" PRIu64 "\n", r->st.expired_to); break;
		case QF_AGE: {
			int64_t age = r->st.head_created_ms > 0 ? now - r->st.head_created_ms : 0;
			evbuffer_add_printf(b, "%.3f\n", age > 0 ? (double)age / 1000.0 : 0.0);
			break;
		}
		}
	}
}

static void
write_metrics(struct http_server *h, struct evbuffer *b)
{
	struct stats *s = &h->b->stats;
	struct saker_store_stats ss;
	struct qcollect qc = { h->b, NULL, 0, 0, h->max_queues, 0 };
	uint64_t items = 0, bytes = 0, cum = 0;
	size_t i;

	saker_store_get_stats(h->b->store, &ss);
	queues_walk(h->b, collect_one, &qc);
	for (i = 0; i < qc.n; i++) {
		items += qc.rows[i].st.items;
		bytes += qc.rows[i].st.bytes;
	}
	metric_head(b, "saker_info", "gauge", "Build and store of this server.");
	evbuffer_add_printf(b, "saker_info{version=\"%s\",store=\"%s\"} 1\n",
	    PACKAGE_VERSION, h->b->store->driver->name);
	metric_u64(b, "saker_uptime_seconds", "gauge", "Seconds since the server started.",
	    (uint64_t)(time(NULL) - s->started));
	metric_u64(b, "saker_connections", "gauge", "Open client connections.",
	    s->curr_connections);
	metric_u64(b, "saker_connections_total", "counter", "Client connections accepted.",
	    s->total_connections);
	metric_u64(b, "saker_connections_rejected_total", "counter",
	    "Connections refused at the -c limit.", s->rejected_connections);
	metric_head(b, "saker_commands_total", "counter", "Commands by kind.");
	evbuffer_add_printf(b, "saker_commands_total{cmd=\"get\"} %" PRIu64 "\n"
	    "saker_commands_total{cmd=\"set\"} %" PRIu64 "\n"
	    "saker_commands_total{cmd=\"peek\"} %" PRIu64 "\n", s->cmd_get, s->cmd_set,
	    s->cmd_peek);
	metric_u64(b, "saker_get_hits_total", "counter", "Gets that returned an item.",
	    s->get_hits);
	metric_u64(b, "saker_get_misses_total", "counter", "Gets that returned no item.",
	    s->get_misses);
	metric_u64(b, "saker_read_bytes_total", "counter", "Bytes read from clients.",
	    s->bytes_read);
	metric_u64(b, "saker_written_bytes_total", "counter", "Bytes written to clients.",
	    s->bytes_written);
	metric_u64(b, "saker_items", "gauge", "Ready items in all (listed) queues.", items);
	metric_u64(b, "saker_item_bytes", "gauge", "Data bytes of ready items in all (listed) queues.",
	    bytes);
	metric_u64(b, "saker_queues", "gauge", "Queues in the store.", qc.n + qc.skipped);
	metric_u64(b, "saker_queues_unlisted", "gauge",
	    "Queues left out of the per-queue series by --metrics-max-queues.", qc.skipped);
	metric_u64(b, "saker_store_fsyncs_total", "counter", "fsync calls made by the store.",
	    ss.fsyncs);
	metric_u64(b, "saker_store_commits_total", "counter", "Store commits that wrote.",
	    ss.commits);
	metric_u64(b, "saker_store_disk_bytes", "gauge", "Bytes the store occupies on disk.",
	    ss.disk_bytes);
	metric_u64(b, "saker_store_checkpoints_total", "counter",
	    "Checkpoints of the store's files (LMDB, SQLite).", ss.checkpoints);
	metric_dbl(b, "saker_store_checkpoint_seconds_total", "counter",
	    "Time the checkpoints took (part of the commit time).",
	    (double)ss.checkpoint_ns / 1e9);
	if (ss.server) {
		/* a store on a database server (postgres) */
		int64_t last = ss.last_commit_ms > 0 ? ss.last_commit_ms :
		    (int64_t)s->started * 1000;

		metric_u64(b, "saker_store_connected", "gauge",
		    "1 while the store's database connection is up.",
		    ss.connected ? 1 : 0);
		metric_u64(b, "saker_store_reconnects_total", "counter",
		    "Database connections made again after a loss.", ss.reconnects);
		metric_u64(b, "saker_store_in_doubt_commits_total", "counter",
		    "Commits whose outcome is unknown (no answer to COMMIT).",
		    ss.in_doubt);
		metric_dbl(b, "saker_store_last_commit_age_seconds", "gauge",
		    "Seconds since the last commit that wrote (since the start"
		    " before the first).", last < saker_now_ms() ?
		    (double)(saker_now_ms() - last) / 1000.0 : 0.0);
	}
	metric_head(b, "saker_store_commit_seconds", "histogram",
	    "Time spent in store commits (one per event-loop turn that wrote).");
	for (i = 0; i < STATS_COMMIT_BUCKETS; i++) {
		cum += s->commit_hist[i];
		evbuffer_add_printf(b, "saker_store_commit_seconds_bucket{le=\"%g\"} %" PRIu64 "\n",
		    stats_commit_bounds[i], cum);
	}
	cum += s->commit_hist[STATS_COMMIT_BUCKETS];
	evbuffer_add_printf(b, "saker_store_commit_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n"
	    "saker_store_commit_seconds_sum %.6f\nsaker_store_commit_seconds_count %" PRIu64 "\n",
	    cum, (double)s->commit_ns / 1e9, cum);

	queue_metric(b, &qc, "saker_queue_items", "gauge", "Ready items in the queue.", QF_ITEMS);
	queue_metric(b, &qc, "saker_queue_bytes", "gauge", "Data bytes of ready items.", QF_BYTES);
	queue_metric(b, &qc, "saker_queue_delayed_items", "gauge",
	    "Items waiting for their due time.", QF_DELAYED);
	queue_metric(b, &qc, "saker_queue_open_items", "gauge",
	    "Items handed out with /open and not yet confirmed.", QF_OPEN);
	queue_metric(b, &qc, "saker_queue_waiters", "gauge", "Clients blocked in get.",
	    QF_WAITERS);
	queue_metric(b, &qc, "saker_queue_enqueued_total", "counter",
	    "Items ever put into the queue (kept by the store).", QF_ENQ);
	queue_metric(b, &qc, "saker_queue_dequeued_total", "counter",
	    "Items taken from the queue since the server started.", QF_DEQ);
	queue_metric(b, &qc, "saker_queue_expired_total", "counter",
	    "Items dropped because they expired.", QF_EXPIRED);
	queue_metric(b, &qc, "saker_queue_discarded_total", "counter",
	    "Items dropped because the queue was full.", QF_DISCARDED);
	queue_metric(b, &qc, "saker_queue_dead_lettered_total", "counter",
	    "Items moved to the dead-letter queue after max_deliveries hand-outs"
	    " (since the server started).", QF_DEAD);
	queue_metric(b, &qc, "saker_queue_expired_to_total", "counter",
	    "Expired items moved to the expire_to queue (since the server"
	    " started).", QF_EXPIRED_TO);
	queue_metric(b, &qc, "saker_queue_oldest_item_age_seconds", "gauge",
	    "Age of the item at the head of the queue.", QF_AGE);
	free(qc.rows);
}

/* Longest Authorization header we decode ("Basic " + base64 of
 * "user:password"); longer is simply refused. */
#define HTTP_MAX_CREDENTIALS 1024

/*
 * /metrics with --auth-file: "Authorization: Basic base64(user:password)"
 * of a user with admin rights.  True to serve it; otherwise the reply was
 * sent: 401 with a WWW-Authenticate challenge, or 429 while the peer owes
 * a delay for its failed logins (checked before any crypt(3) runs, so
 * guessing over HTTP is as slow as over memcache).
 */
static bool
admin_authorized(struct evhttp_request *req, struct evbuffer *b, const char *what)
{
	struct evkeyvalq *hdrs = evhttp_request_get_input_headers(req);
	const char *auth = evhttp_find_header(hdrs, "Authorization");
	char *addr = NULL, dec[HTTP_MAX_CREDENTIALS], peer[64];
	const struct perms *who = NULL;
	ev_uint16_t port;
	int64_t wait;
	long n = -1;
	char *colon;
	unsigned fails;

	evhttp_connection_get_peer(evhttp_request_get_connection(req), &addr, &port);
	snprintf(peer, sizeof(peer), "%s", addr != NULL ? addr : "unknown");
	if ((wait = login_wait(peer, saker_now_ms())) > 0) {
		char retry[32];

		snprintf(retry, sizeof(retry), "%lld", (long long)(wait + 999) / 1000);
		evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", retry);
		evbuffer_add_printf(b, "too many failed logins from %s; retry later\n", peer);
		evhttp_send_reply(req, 429, "Too Many Requests", b);
		return false;
	}
	if (auth != NULL && strncasecmp(auth, "Basic ", 6) == 0) {
		const char *p = auth + 6;
		size_t len;

		while (*p == ' ')
			p++;
		len = strlen(p);
		while (len > 0 && p[len - 1] == ' ')
			len--;
		if (len < sizeof(dec))
			n = meta_b64_decode(p, len, dec, sizeof(dec));
	}
	if (n > 0 && (colon = memchr(dec, ':', (size_t)n)) != NULL)
		who = auth_check(dec, (size_t)(colon - dec), colon + 1,
		    (size_t)(dec + n - colon - 1));
	memset(dec, 0, sizeof(dec));
	if (who != NULL && (who->rights & PERM_ADMIN) != 0) {
		login_ok(peer);
		return true;
	}
	if (who != NULL) {
		log_warn("%s: user %s from %s is not an admin", what, who->user, peer);
	} else if (auth != NULL) {
		(void)login_failed(peer, saker_now_ms(), &fails);
		log_warn("HTTP authentication failed from %s (%u failed from that "
		    "address lately)", peer, fails);
	}
	evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
	    "Basic realm=\"saker\"");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    "text/plain; charset=utf-8");
	evbuffer_add_printf(b, "/metrics and the console need the login of an "
	    "admin user (--auth-file); /healthz is open\n");
	evhttp_send_reply(req, 401, "Unauthorized", b);
	return false;
}

static void
handle(struct evhttp_request *req, void *arg)
{
	struct http_server *h = arg;
	const char *uri = evhttp_request_get_uri(req);
	const struct evhttp_uri *parsed = evhttp_request_get_evhttp_uri(req);
	const char *path = parsed != NULL ? evhttp_uri_get_path(parsed) : NULL;
	struct evbuffer *b = evbuffer_new();

	if (b == NULL) {
		evhttp_send_error(req, 500, "out of memory");
		return;
	}
	if (path != NULL && console_path(path)) {
		/* the console and its API: the same login as /metrics */
		if (!h->need_admin || admin_authorized(req, b, "console"))
			console_handle(&h->console, req);
	} else if (evhttp_request_get_command(req) != EVHTTP_REQ_GET &&
	    evhttp_request_get_command(req) != EVHTTP_REQ_HEAD) {
		evhttp_send_error(req, 405, "only GET");
	} else if (strcmp(uri, "/metrics") == 0) {
		if (h->need_admin && !admin_authorized(req, b, "/metrics")) {
			evbuffer_free(b);
			return;
		}
		write_metrics(h, b);
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
		    "text/plain; version=0.0.4; charset=utf-8");
		evhttp_send_reply(req, 200, "OK", b);
	} else if (strcmp(uri, "/healthz") == 0) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
		    "text/plain; charset=utf-8");
		struct saker_store_stats ss;

		saker_store_get_stats(h->b->store, &ss);
		if (h->b->store_failed) {
			evbuffer_add_printf(b, "store not writable: %s\n", h->b->store_error);
			evhttp_send_reply(req, 503, "Service Unavailable", b);
		} else if (ss.server && !ss.connected) {
			evbuffer_add_printf(b, "database unavailable: %s\n", ss.down_why);
			evhttp_send_reply(req, 503, "Service Unavailable", b);
		} else if (*h->stopping) {
			evbuffer_add_printf(b, "stopping\n");
			evhttp_send_reply(req, 503, "Service Unavailable", b);
		} else {
			evbuffer_add_printf(b, "ok\n");
			evhttp_send_reply(req, 200, "OK", b);
		}
	} else {
		evhttp_send_error(req, 404, "try /, /metrics or /healthz");
	}
	evbuffer_free(b);
}

/* An HTTP connection is gone (evhttp freed it). */
static void
http_conn_closed(struct evhttp_connection *evcon, void *arg)
{
	(void)evcon;
	(void)arg;
	hconn.open--;
}

/* A connection http_bev() counted, looked at once evhttp has set it up. */
struct http_new_conn {
	struct bufferevent *bev;
	bool over;                   /* one past -c when it was accepted */
};

/*
 * Right after the accept: evhttp has made the connection's evhttp_connection
 * and given it to the bufferevent as the callbacks' argument (if the
 * connection already ended, bufferevent_free() has cleared it).  Watch
 * for its end, or end it now if it was one past -c: closed, nothing sent,
 * the way evhttp ends a request that timed out.
 */
static void
http_conn_adopt(evutil_socket_t fd, short what, void *arg)
{
	struct http_new_conn *nc = arg;
	struct evhttp_connection *evcon;
	void *cbarg = NULL;

	(void)fd;
	(void)what;
	bufferevent_getcb(nc->bev, NULL, NULL, NULL, &cbarg);
	evcon = cbarg;
	if (evcon == NULL || evhttp_connection_get_bufferevent(evcon) != nc->bev) {
		hconn.open--;           /* gone already */
	} else {
		evhttp_connection_set_closecb(evcon, http_conn_closed, NULL);
		if (nc->over)
			evhttp_connection_free(evcon);
	}
	bufferevent_decref(nc->bev);
	free(nc);
}

/*
 * evhttp asks for the bufferevent of each connection it accepts, once per
 * connection: the only notice libevent 2.1 gives of a new incoming
 * connection (evhttp_set_newreqcb and evhttp_set_max_connections came in
 * 2.2).  It is counted here, and its end is watched from the next loop
 * pass (http_conn_adopt), when evhttp has set it up.
 */
static struct bufferevent *
http_bev(struct event_base *base, void *arg)
{
	static const struct timeval now = { 0, 0 };
	struct http_new_conn *nc;
	struct bufferevent *bev;

	(void)arg;
	/* --tls-cert: the same certificate serves HTTPS */
	bev = tls_on() ? tls_http_bev(base) :
	    bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL)
		return NULL;
	nc = malloc(sizeof(*nc));
	if (nc == NULL) {
		bufferevent_free(bev);
		return NULL;
	}
	nc->bev = bev;
	hconn.open++;
	nc->over = *hconn.others + hconn.open > hconn.max;
	if (nc->over)
		(*hconn.rejected)++;
	bufferevent_incref(bev);
	if (event_base_once(base, -1, EV_TIMEOUT, http_conn_adopt, nc, &now) != 0) {
		/* cannot watch it: not counted (out of memory only) */
		hconn.open--;
		bufferevent_decref(bev);
		free(nc);
	}
	return bev;
}

static void
http_reenable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	evconnlistener_enable(arg);
}

/* Out of descriptors: libevent would retry the accept at once, forever
 * (99 % CPU, a log line each time, the memcache port starved).  Pause
 * 100 ms at a time instead, and say so once per shortage. */
static void
http_accept_error(struct evconnlistener *l, void *arg)
{
	static int64_t last_log_ms;
	int err = EVUTIL_SOCKET_ERROR();
	int64_t now = saker_now_ms();

	(void)arg;
	if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
		struct timeval tv = { 0, 100000 };

		if (now - last_log_ms > 60000) {
			last_log_ms = now;
			log_warn("--http accept: %s; pausing accepts 100 ms at a time "
			    "(logged once a minute)", evutil_socket_error_to_string(err));
		}
		evconnlistener_disable(l);
		event_base_once(evconnlistener_get_base(l), -1, EV_TIMEOUT,
		    http_reenable, l, &tv);
		return;
	}
	log_warn("--http accept: %s", evutil_socket_error_to_string(err));
}

struct http_server *
http_start(struct event_base *base, const char *spec, struct broker *b,
    unsigned max_queues, const bool *stopping, bool need_admin, int max_conns,
    bool (*commit)(char *why, size_t len))
{
	struct http_server *h;
	struct evhttp_bound_socket *bound = NULL;
	char addr[256] = "";
	const char *colon = spec != NULL ? strrchr(spec, ':') : NULL;
	long port = 0;
	char *end = NULL;

	if (spec == NULL) {
		/* no listener yet: see http_listen_fd() */
	} else if (colon == NULL) {
		snprintf(addr, sizeof(addr), "127.0.0.1");
		port = strtol(spec, &end, 10);
	} else {
		size_t alen = (size_t)(colon - spec);
		if (alen >= sizeof(addr))
			alen = sizeof(addr) - 1;
		memcpy(addr, spec, alen);
		addr[alen] = '\0';
		/* [::1]:9100 */
		if (addr[0] == '[' && alen > 1 && addr[alen - 1] == ']') {
			memmove(addr, addr + 1, alen - 2);
			addr[alen - 2] = '\0';
		}
		port = strtol(colon + 1, &end, 10);
	}
	if (spec != NULL && (*end != '\0' || port <= 0 || port > 65535)) {
		log_error("--http %s: expected [ADDR:]PORT", spec);
		return NULL;
	}
	h = calloc(1, sizeof(*h));
	if (h == NULL)
		return NULL;
	h->b = b;
	h->max_queues = max_queues;
	h->stopping = stopping;
	h->need_admin = need_admin;
	h->console.b = b;
	h->console.login_required = need_admin;
	/* without a login, changes only from this host */
	h->console.writes_allowed = need_admin || strncmp(addr, "127.", 4) == 0 ||
	    strcmp(addr, "::1") == 0 || strcmp(addr, "localhost") == 0;
	h->console.commit = commit;
	h->console.http_connections = http_connections;
	if (console_init() != 0) {
		log_error("--http: no random bytes for the console's CSRF token");
		free(h);
		return NULL;
	}
	h->http = evhttp_new(base);
	if (h->http == NULL || (spec != NULL && (bound =
	    evhttp_bind_socket_with_handle(h->http, addr, (uint16_t)port)) == NULL)) {
		log_error("--http: cannot listen on %s:%ld", addr, port);
		if (h->http != NULL)
			evhttp_free(h->http);
		free(h);
		return NULL;
	}
	evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD |
	    EVHTTP_REQ_POST);
	/* bounded requests: a client may not make us hold more than a few
	 * KiB, nor hold a connection open by sending slowly */
	evhttp_set_max_headers_size(h->http, HTTP_MAX_HEADERS);
	evhttp_set_max_body_size(h->http, HTTP_MAX_BODY);
	evhttp_set_timeout(h->http, HTTP_TIMEOUT_S);
	h->base = base;
	if (bound != NULL)
		evconnlistener_set_error_cb(evhttp_bound_socket_get_listener(bound),
		    http_accept_error);
	evhttp_set_gencb(h->http, handle, h);
	/* every connection's bufferevent is ours, to count it against -c
	 * (and, with --tls-cert, to serve HTTPS with the same certificate) */
	hconn.others = &b->stats.curr_connections;
	hconn.rejected = &b->stats.rejected_connections;
	hconn.max = max_conns > 0 ? (uint64_t)max_conns : 0;
	evhttp_set_bevcb(h->http, http_bev, NULL);
	if (spec != NULL)
		log_info("console on %s://%s:%ld/, metrics on /metrics%s",
		    tls_on() ? "https" : "http", addr, port,
		    h->console.writes_allowed ? "" : " (console read-only: no "
		    "--auth-file login and not on loopback)");
	return h;
}

int
http_listen_fd(struct http_server *h, evutil_socket_t fd)
{
	struct evhttp_bound_socket *bound;

	if ((bound = evhttp_accept_socket_with_handle(h->http, fd)) == NULL)
		return -1;
	evconnlistener_set_error_cb(evhttp_bound_socket_get_listener(bound),
	    http_accept_error);
	return 0;
}

void
http_stop(struct http_server *h)
{
	if (h == NULL)
		return;
	evhttp_free(h->http);
	free(h);
}
