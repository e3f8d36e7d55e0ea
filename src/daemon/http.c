/* http.c -- /metrics and /healthz for operators, on the main event loop. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/listener.h>

#include "auth.h"
#include "clock.h"
#include "console.h"
#include "csrf.h"
#include "http.h"
#include "http_reply.h"
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
	char addr[256];             /* the address --http listens on */
	bool wildcard;              /* 0.0.0.0, :: or none: any of the host's */
	const char *const *hosts;   /* --http-host names */
	size_t nhosts;
	int bound_fd;               /* bound, listening from http_listen() */
};

/* Request line and headers together; no request we serve reads a body. */
#define HTTP_MAX_HEADERS 8192
#define HTTP_MAX_BODY 1024
/* A connection that sends or reads nothing for this long is closed; a
 * reply that does not move for this long too (evhttp's write timeout). */
#define HTTP_TIMEOUT_S 10
/*
 * evhttp's timeout is per read: one header byte every 9 s kept a request
 * open for hours, and its slot of -c with it (issue 45).  So each
 * exchange has a deadline of its own, from the accept or from the last
 * request read: the next request must be read whole within
 * HTTP_REQUEST_MS (or --idle-timeout if shorter), which is also how long
 * a keep-alive connection may sit idle.  A reply still being written
 * (or made over loop turns: a console listing) then has until
 * HTTP_REPLY_MS from its request (a client reading a byte now and
 * then), and with --auth-file a connection that has made
 * no authorized request within LOGIN_TIMEOUT_S of its accept is closed,
 * as on the memcache port.
 */
#define HTTP_REQUEST_MS (HTTP_TIMEOUT_S * 1000)
#define HTTP_REPLY_MS 60000
/* The share of -c HTTP connections may hold together: the rest is the
 * memcache port's, whatever the HTTP clients do. */
#define HTTP_CONN_SHARE 4
/*
 * Input read ahead of the request being answered, per connection.  evhttp
 * answers one request at a time, but while a reply is being written it
 * keeps reading (to notice a close) with nobody consuming: a client that
 * pipelined requests without reading the replies grew the server by
 * 100 MB a second (issue 35).  Past this read high-watermark the
 * bufferevent stops reading until evhttp takes the next request, so a
 * connection holds at most this much input and one reply.
 */
#define HTTP_MAX_INPUT (HTTP_MAX_HEADERS + HTTP_MAX_BODY + 4096)
/* /healthz answers 503 for this long after the store refused a write,
 * even if a commit succeeded since. */
#define HEALTHZ_REFUSED_MS 30000
/* Unsent replies of all HTTP connections together: past it a request is
 * answered 503 at once, without building its reply, until they drain. */
#define HTTP_MAX_UNSENT (16u * 1024 * 1024)

/* Open HTTP connections, counted against -c together with the memcache
 * ones.  File-level, not in struct http_server: a connection's bufferevent
 * is finalized by libevent after evhttp_free() too (at event_base_free). */
struct http_conn;
static struct {
	unsigned open;               /* HTTP connections open */
	const uint64_t *others;      /* memcache connections open */
	uint64_t *rejected;          /* stats.rejected_connections */
	uint64_t max;                /* -c */
	uint64_t max_http;           /* HTTP's share of it (HTTP_CONN_SHARE) */
	int64_t request_ms;          /* HTTP_REQUEST_MS or --idle-timeout */
	bool need_login;             /* --auth-file: the login deadline */
	TAILQ_HEAD(, http_conn) all; /* every connection adopted */
	uint64_t over_budget;        /* requests refused by HTTP_MAX_UNSENT */
	int64_t handshake_ms;        /* --tls-handshake-timeout (HTTPS) */
} hconn = { .all = TAILQ_HEAD_INITIALIZER(hconn.all), .handshake_ms = 5000,
    .request_ms = HTTP_REQUEST_MS };

/* One HTTP connection: counted from http_bev() to its close. */
struct http_conn {
	struct bufferevent *bev;
	bool over;                   /* one past -c when it was accepted */
	TAILQ_ENTRY(http_conn) link;
	struct event *hs_ev;         /* HTTPS: the handshake's deadline */
	struct evhttp_connection *evcon;
	struct event *dl_ev;         /* the exchange's deadline */
	int64_t accepted_ms;
	int64_t since_ms;            /* accepted, or the last request read */
	bool authed;                 /* made an authorized request */
};

/* The HTTP connection of evcon (at most -c / HTTP_CONN_SHARE of them). */
static struct http_conn *
conn_of(struct evhttp_connection *evcon)
{
	struct http_conn *hc;

	TAILQ_FOREACH(hc, &hconn.all, link)
		if (hc->evcon == evcon)
			return hc;
	return NULL;
}

void
http_memory(size_t *in, size_t *out)
{
	struct http_conn *hc;

	*in = *out = 0;
	TAILQ_FOREACH(hc, &hconn.all, link) {
		*in += evbuffer_get_length(bufferevent_get_input(hc->bev));
		*out += evbuffer_get_length(bufferevent_get_output(hc->bev));
	}
}

size_t
http_max_input(void)
{
	return HTTP_MAX_INPUT;
}

size_t
http_max_unsent(void)
{
	return HTTP_MAX_UNSENT;
}

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
	if (saker_store_queue_stats(qc->b->store, q->h, &qc->rows[qc->n].st) == SAKER_OK)
		qc->n++;
	return 0;
}

enum qfield { QF_ITEMS, QF_BYTES, QF_DELAYED, QF_OPEN, QF_WAITERS, QF_ENQ, QF_DEQ,
    QF_EXPIRED, QF_DISCARDED, QF_AGE, QF_DEAD, QF_EXPIRED_TO, QF_RETRIES,
    QF_DEDUP_IDS, QF_DEDUP_HITS };

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
		case QF_RETRIES: evbuffer_add_printf(b, "%" PRIu64 "\n", r->q->retries); break;
		case QF_DEDUP_IDS: evbuffer_add_printf(b, "%" PRIu64 "\n", r->st.dedup_ids); break;
		case QF_DEDUP_HITS: evbuffer_add_printf(b, "%" PRIu64 "\n", r->st.dedup_hits); break;
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
	    PACKAGE_VERSION, saker_store_name(h->b->store));
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
	metric_u64(b, "saker_retries_scheduled_total", "counter",
	    "Open items given back with a delay (abort/delay=, retry_backoff).",
	    s->retries_scheduled);
	metric_u64(b, "saker_set_duplicates_total", "counter",
	    "Sets answered STORED without an item: their id= was kept.",
	    s->set_duplicates);
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
		if (ss.horizon_age_ms >= 0) {
			metric_dbl(b, "saker_store_horizon_age_seconds", "gauge",
			    "Age of the oldest transaction of the database"
			    " holding a snapshot (VACUUM waits behind it).",
			    (double)ss.horizon_age_ms / 1000.0);
			metric_u64(b, "saker_store_horizon_xids", "gauge",
			    "Transactions between the oldest xmin held anywhere"
			    " and now.", (uint64_t)ss.horizon_xids);
			metric_u64(b, "saker_store_dead_rows", "gauge",
			    "Dead row versions of the store's item table.",
			    ss.dead_rows > 0 ? (uint64_t)ss.dead_rows : 0);
		}
		if (ss.segments > 0 && ss.segment >= 0) {
			metric_u64(b, "saker_store_segment", "gauge",
			    "The segment of the item table taking puts (of"
			    " saker_store_segments).", (uint64_t)ss.segment);
			metric_u64(b, "saker_store_segments", "gauge",
			    "Segments of the item table, emptied in turn by"
			    " TRUNCATE.", (uint64_t)ss.segments);
			metric_u64(b, "saker_store_segment_truncations_total",
			    "counter", "Segments emptied by TRUNCATE, by every"
			    " broker since the store was made.",
			    (uint64_t)ss.segment_truncations);
			metric_u64(b, "saker_store_segment_moved_total",
			    "counter", "Items this broker moved forward out of"
			    " a segment to be emptied.", ss.segment_moved);
		}
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
	queue_metric(b, &qc, "saker_queue_retries_total", "counter",
	    "Items given back with a delay (since the server started).",
	    QF_RETRIES);
	queue_metric(b, &qc, "saker_queue_dedup_ids", "gauge",
	    "Deduplication ids the queue keeps (live or not yet swept).",
	    QF_DEDUP_IDS);
	queue_metric(b, &qc, "saker_queue_dedup_hits_total", "counter",
	    "Sets with a kept id answered without an item (since the store"
	    " opened).", QF_DEDUP_HITS);
	queue_metric(b, &qc, "saker_queue_oldest_item_age_seconds", "gauge",
	    "Age of the item at the head of the queue.", QF_AGE);
	free(qc.rows);
}

/* Longest Authorization header we decode ("Basic " + base64 of
 * "user:password"); longer is simply refused. */
#define HTTP_MAX_CREDENTIALS 1024

/*
 * /metrics with --auth-file: "Authorization: Basic base64(user:password)"
 * of a user with admin rights (the security headers already set).  True
 * to serve it; otherwise the reply was sent: 401 with a WWW-Authenticate challenge, or 429 while the peer or
 * the user name owes a delay for failed logins (login.h).  The 429 comes
 * before any password is checked, right or wrong, so neither its timing
 * nor its status tells a good guess, and guessing over HTTP is as slow as
 * over memcache (an HTTP request cannot be held back cheaply: evhttp
 * keeps reading while it waits).
 */
static bool
admin_authorized(struct http_server *h, struct evhttp_request *req,
    const char *what, const char **user)
{
	struct evkeyvalq *hdrs = evhttp_request_get_input_headers(req);
	const char *auth = evhttp_find_header(hdrs, "Authorization");
	char *addr = NULL, dec[HTTP_MAX_CREDENTIALS], peer[64];
	const struct perms *who = NULL;
	ev_uint16_t port;
	int64_t wait;
	long n = -1;
	char *colon = NULL;

	evhttp_connection_get_peer(evhttp_request_get_connection(req), &addr, &port);
	snprintf(peer, sizeof(peer), "%s", addr != NULL ? addr : "unknown");
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
	if (n > 0)
		colon = memchr(dec, ':', (size_t)n);
	if (auth != NULL && (wait = login_wait(peer, dec, colon != NULL ?
	    (size_t)(colon - dec) : 0, saker_now_ms())) > 0) {
		char retry[32], msg[128];

		memset(dec, 0, sizeof(dec));
		snprintf(retry, sizeof(retry), "%lld", (long long)(wait + 999) / 1000);
		snprintf(msg, sizeof(msg), "too many failed logins from %s or for "
		    "that user; retry later", peer);
		evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", retry);
		http_send_error(req, 429, "Too Many Requests", msg);
		return false;
	}
	if (colon != NULL)
		who = auth_check(h->b->auth, dec, (size_t)(colon - dec), colon + 1,
		    (size_t)(dec + n - colon - 1));
	if (who != NULL && (who->rights & PERM_ADMIN) != 0) {
		struct http_conn *hc = conn_of(evhttp_request_get_connection(req));

		if (hc != NULL)
			hc->authed = true;      /* past the login deadline */
		login_ok(peer, dec, (size_t)(colon - dec), saker_now_ms());
		memset(dec, 0, sizeof(dec));
		if (user != NULL)
			*user = who->user;      /* the console's CSRF tokens */
		return true;
	}
	if (who != NULL) {
		login_ok(peer, dec, (size_t)(colon - dec), saker_now_ms());
		log_warn("%s: user %s from %s is not an admin", what, who->user, peer);
	} else if (auth != NULL) {
		size_t ulen = colon != NULL ? (size_t)(colon - dec) : 0;

		/* malformed credentials cost a check too (auth.h) */
		if (colon == NULL)
			auth_dummy(h->b->auth);
		(void)login_failed(peer, dec, ulen, auth_known(h->b->auth, dec,
		    ulen), "HTTP", saker_now_ms());
	}
	memset(dec, 0, sizeof(dec));
	evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
	    "Basic realm=\"saker\"");
	http_send_error(req, 401, "Unauthorized", "/metrics and the console need "
	    "the login of an admin user (--auth-file); /healthz is open");
	return false;
}

/*
 * DNS rebinding (issue 35): a page from evil.example whose name comes to
 * resolve to 127.0.0.1 reaches the console with the browser's own
 * `Host: evil.example`, reads the CSRF token and posts.  So a request's
 * Host, and its Origin when it has one, must name this server: the
 * address --http listens on, "localhost", an IP address when it listens
 * on every address (an address literal cannot be rebound), or a name
 * given with --http-host.  The port is not compared (a proxy may change
 * it); a name must match whole, case aside, a trailing dot aside.
 */
static bool
host_allowed(const struct http_server *h, const char *host, size_t len)
{
	char name[256];
	struct in6_addr a6;
	size_t i;

	if (len > 0 && host[0] == '[') {
		const char *rb = memchr(host, ']', len);

		if (rb == NULL)
			return false;
		host++;
		len = (size_t)(rb - host);
	} else {
		const char *colon = memchr(host, ':', len);

		if (colon != NULL)
			len = (size_t)(colon - host);
	}
	if (len > 0 && host[len - 1] == '.')
		len--;
	if (len == 0 || len >= sizeof(name))
		return false;
	memcpy(name, host, len);
	name[len] = '\0';
	if (strcasecmp(name, "localhost") == 0 || strcasecmp(name, h->addr) == 0)
		return true;
	if (h->wildcard && (inet_pton(AF_INET, name, &a6) == 1 ||
	    inet_pton(AF_INET6, name, &a6) == 1))
		return true;
	for (i = 0; i < h->nhosts; i++)
		if (strcasecmp(name, h->hosts[i]) == 0)
			return true;
	return false;
}

/* Host and Origin both name this server (host_allowed()); otherwise 403
 * was sent. */
static bool
origin_checked(const struct http_server *h, struct evhttp_request *req)
{
	static int64_t last_log_ms;
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	const char *host = evhttp_find_header(in, "Host");
	const char *origin = evhttp_find_header(in, "Origin");
	const char *bad = NULL, *p;
	int64_t now;

	/* no Host: HTTP/1.0 from a tool, not a browser */
	if (host != NULL && !host_allowed(h, host, strlen(host)))
		bad = host;
	else if (origin != NULL && strcmp(origin, "null") != 0) {
		/* "null" says nothing: the Fetch standard has browsers send it
		 * for the console's own POSTs under its Referrer-Policy
		 * no-referrer (Firefox does), as for sandboxed pages; those
		 * still need this server's Host and a CSRF token */
		p = strstr(origin, "://");
		if (p == NULL || !host_allowed(h, p + 3, strcspn(p + 3, "/")))
			bad = origin;
	}
	if (bad == NULL)
		return true;
	now = saker_now_ms();
	if (last_log_ms == 0 || now - last_log_ms >= 60000) {
		char shown[80];
		size_t i;

		last_log_ms = now;
		for (i = 0; i + 1 < sizeof(shown) && bad[i] != '\0'; i++)
			shown[i] = bad[i] >= 0x20 && bad[i] < 0x7f ? bad[i] : '?';
		shown[i] = '\0';
		log_warn("--http: refused a request for \"%s\", not this server's "
		    "address (a DNS rebinding page?); name it with --http-host if it "
		    "is (logged once a minute)", shown);
	}
	http_send_error(req, 403, "Forbidden", "Host or Origin is not this "
	    "server (sakerd --http-host NAME allows a name)");
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
	size_t unread, unsent;

	struct http_conn *hc = conn_of(evhttp_request_get_connection(req));

	if (hc != NULL)
		hc->since_ms = saker_now_ms();  /* the next exchange's deadline */
	if (b == NULL) {
		http_send_error(req, 500, "Internal Server Error", "out of memory");
		return;
	}
	http_memory(&unread, &unsent);
	if (unsent > HTTP_MAX_UNSENT) {
		/* clients that do not read their replies hold enough already */
		static int64_t last_log_ms;
		int64_t now = saker_now_ms();

		if (hconn.over_budget++ == 0 || now - last_log_ms >= 60000) {
			last_log_ms = now;
			log_warn("--http: over %u MiB of unsent replies; answering "
			    "503 until they drain (%" PRIu64 " so far; logged once a "
			    "minute)", HTTP_MAX_UNSENT >> 20, hconn.over_budget);
		}
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Connection", "close");
		http_send_error(req, 503, "Service Unavailable", "too many unsent "
		    "replies; retry later");
		evbuffer_free(b);
		return;
	}
	http_security_headers(req);
	/* /healthz stays open to load balancers whatever Host they send */
	if ((path == NULL || strcmp(path, "/healthz") != 0) &&
	    !origin_checked(h, req)) {
		/* answered 403 */
	} else if (path != NULL && console_path(path)) {
		const char *user = NULL;

		/* the console and its API: the same login as /metrics */
		if (!h->need_admin || admin_authorized(h, req, "console", &user))
			console_handle(&h->console, req, user);
	} else if (evhttp_request_get_command(req) != EVHTTP_REQ_GET &&
	    evhttp_request_get_command(req) != EVHTTP_REQ_HEAD) {
		http_send_error(req, 405, "Method Not Allowed", "only GET");
	} else if (strcmp(uri, "/metrics") == 0) {
		if (!h->need_admin || admin_authorized(h, req, "/metrics", NULL)) {
			write_metrics(h, b);
			evhttp_add_header(evhttp_request_get_output_headers(req),
			    "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
			evhttp_send_reply(req, 200, "OK", b);
		}
	} else if (strcmp(uri, "/healthz") == 0) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
		    "text/plain; charset=utf-8");
		struct saker_store_stats ss;

		saker_store_get_stats(h->b->store, &ss);
		if (h->b->store_failed)
			evbuffer_add_printf(b, "store not writable: %s\n", h->b->store_error);
		else if (h->b->store_failed_ms != 0 &&
		    saker_now_ms() - h->b->store_failed_ms < HEALTHZ_REFUSED_MS)
			/* a later commit that only took items succeeded: on a
			 * full disk /healthz said ok while every set failed */
			evbuffer_add_printf(b, "store refused a write %.1f s ago: "
			    "%s\n", (double)(saker_now_ms() -
			    h->b->store_failed_ms) / 1000.0, h->b->store_error);
		else if (ss.server && !ss.connected)
			evbuffer_add_printf(b, "database unavailable: %s\n", ss.down_why);
		else if (*h->stopping)
			evbuffer_add_printf(b, "stopping\n");
		if (evbuffer_get_length(b) > 0) {
			evhttp_send_reply(req, 503, "Service Unavailable", b);
		} else {
			evbuffer_add_printf(b, "ok\n");
			evhttp_send_reply(req, 200, "OK", b);
		}
	} else {
		http_send_error(req, 404, "Not Found", "try /, /metrics or /healthz");
	}
	evbuffer_free(b);
}

/* An HTTP connection is gone (evhttp freed it). */
static void
http_conn_closed(struct evhttp_connection *evcon, void *arg)
{
	struct http_conn *hc = arg;

	console_conn_closed(evcon);
	hconn.open--;
	TAILQ_REMOVE(&hconn.all, hc, link);
	if (hc->hs_ev != NULL)
		event_free(hc->hs_ev);
	if (hc->dl_ev != NULL)
		event_free(hc->dl_ev);
	free(hc);
}

/* When hc's deadline comes (see HTTP_REQUEST_MS). */
static int64_t
deadline_of(const struct http_conn *hc)
{
	int64_t d = hc->since_ms + hconn.request_ms;
	int64_t login = hc->accepted_ms + LOGIN_TIMEOUT_S * 1000;

	if (hconn.need_login && !hc->authed && login < d)
		d = login;
	return d;
}

static void
arm_deadline(struct http_conn *hc, int64_t now)
{
	int64_t ms = deadline_of(hc) - now;
	struct timeval tv;

	if (ms < 1)
		ms = 1;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(hc->dl_ev, &tv);
}

/* Log the first closing of a kind, then at most once a minute: a flood
 * of dripping clients must not fill the disk. */
static void
close_late(struct http_conn *hc, const char *why, int64_t now)
{
	static int64_t last_log_ms;
	static uint64_t closed;

	closed++;
	if (last_log_ms == 0 || now - last_log_ms >= 60000) {
		last_log_ms = now;
		log_info("--http: closing a connection that %s (%" PRIu64 " such "
		    "closings so far; logged once a minute)", why, closed);
	}
	evhttp_connection_free(hc->evcon);      /* frees hc */
}

/* The exchange's deadline (or a moment to look again) has come. */
static void
http_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn *hc = arg;
	int64_t now = saker_now_ms();
	/* a reply being written, or made over loop turns (a console
	 * listing of many queues) */
	bool replying = evbuffer_get_length(bufferevent_get_output(hc->bev)) > 0 ||
	    console_conn_busy(hc->evcon);

	if (hconn.need_login && !hc->authed &&
	    now - hc->accepted_ms >= LOGIN_TIMEOUT_S * 1000 && !replying) {
		close_late(hc, "made no authorized request within the login "
		    "deadline", now);
	} else if (now < deadline_of(hc)) {
		arm_deadline(hc, now);
	} else if (!replying) {
		close_late(hc, "sent no whole request within the request "
		    "deadline", now);
	} else if (now - hc->since_ms >= HTTP_REPLY_MS) {
		close_late(hc, "did not read its reply within the reply "
		    "deadline", now);
	} else {
		/* a reply in flight: look again in a second */
		struct timeval tv = { 1, 0 };

		evtimer_add(hc->dl_ev, &tv);
	}
}

/* HTTPS: the handshake's deadline (--tls-handshake-timeout, shorter than
 * evhttp's 10 s request timeout, which would end it otherwise). */
static void
http_hs_cb(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn *hc = arg;

	if (tls_bev_handshaking(hc->bev)) {
		log_info("--http: closing a TLS connection whose handshake did not "
		    "end within %" PRId64 " ms", hconn.handshake_ms);
		evhttp_connection_free(hc->evcon);
	}
}

/*
 * HTTPS: at most HTTP's share of -c in handshakes, as on the memcache
 * port (conn.c), and a new connection past that share, or past the share
 * itself while handshakes are in progress, closes the oldest still in its
 * handshake: stalled ones cannot keep real HTTPS clients out, each holds
 * its slot for at most the deadline.  False when the share is full of
 * established connections: newc must go.
 */
static bool
handshake_budget(struct http_conn *newc)
{
	static int64_t last_log_ms;
	struct http_conn *hc;
	uint64_t n = 0;
	int64_t now = saker_now_ms();

	TAILQ_FOREACH(hc, &hconn.all, link)
		n += tls_bev_handshaking(hc->bev);
	while (n > hconn.max_http || hconn.open > hconn.max_http) {
		/* the oldest without a whole ClientHello first (conn.c) */
		TAILQ_FOREACH(hc, &hconn.all, link)
			if (hc != newc && tls_bev_handshaking(hc->bev) &&
			    !tls_bev_hello_seen(hc->bev))
				break;
		if (hc == NULL)
			TAILQ_FOREACH(hc, &hconn.all, link)
				if (hc != newc && tls_bev_handshaking(hc->bev))
					break;
		if (hc == NULL)
			break;
		if (last_log_ms == 0 || now - last_log_ms >= 60000) {
			last_log_ms = now;
			log_info("--http: %" PRIu64 " TLS handshakes in progress: "
			    "closing the oldest (logged once a minute)", n);
		}
		evhttp_connection_free(hc->evcon);      /* frees hc */
		n--;
	}
	return hconn.open <= hconn.max_http;
}

void
http_set_handshake_timeout(int64_t ms)
{
	hconn.handshake_ms = ms;
}

void
http_set_idle_timeout(int64_t ms)
{
	hconn.request_ms = ms > 0 && ms < HTTP_REQUEST_MS ? ms : HTTP_REQUEST_MS;
}

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
	struct http_conn *hc = arg;
	struct bufferevent *bev = hc->bev;
	struct evhttp_connection *evcon;
	void *cbarg = NULL;

	bufferevent_getcb(bev, NULL, NULL, NULL, &cbarg);
	evcon = cbarg;
	if (evcon == NULL || evhttp_connection_get_bufferevent(evcon) != bev) {
		hconn.open--;           /* gone already */
		free(hc);
	} else {
		TAILQ_INSERT_TAIL(&hconn.all, hc, link);
		hc->evcon = evcon;
		evhttp_connection_set_closecb(evcon, http_conn_closed, hc);
		if (hc->over) {
			evhttp_connection_free(evcon);
			goto done;
		}
		hc->accepted_ms = hc->since_ms = saker_now_ms();
		if ((hc->dl_ev = evtimer_new(bufferevent_get_base(bev),
		    http_deadline_cb, hc)) == NULL) {
			/* without its deadline it could be held forever */
			evhttp_connection_free(evcon);
			goto done;
		}
		arm_deadline(hc, hc->accepted_ms);
		if (tls_on()) {
			if (!handshake_budget(hc)) {
				(*hconn.rejected)++;
				evhttp_connection_free(evcon);
				goto done;
			}
			if ((hc->hs_ev = evtimer_new(bufferevent_get_base(bev),
			    http_hs_cb, hc)) != NULL) {
				struct timeval tv = { hconn.handshake_ms / 1000,
				    (hconn.handshake_ms % 1000) * 1000 };

				evtimer_add(hc->hs_ev, &tv);
			}
		}
	}
done:
	bufferevent_decref(bev);
}

/*
 * evhttp asks for the bufferevent of each connection it accepts, once per
 * connection: the only notice libevent 2.1 gives of a new incoming
 * connection (evhttp_set_newreqcb and evhttp_set_max_connections came in
 * 2.2).  It is counted here, and its end is watched from the next loop
 * pass (http_conn_adopt), when evhttp has set it up.  Its input is
 * bounded here too (HTTP_MAX_INPUT): evhttp never sets watermarks.
 */
static struct bufferevent *
http_bev(struct event_base *base, void *arg)
{
	static const struct timeval now = { 0, 0 };
	struct http_conn *hc;
	struct bufferevent *bev;

	/* --tls-cert: the same certificate serves HTTPS */
	bev = tls_on() ? tls_http_bev(base) :
	    bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL)
		return NULL;
	hc = calloc(1, sizeof(*hc));
	if (hc == NULL) {
		bufferevent_free(bev);
		return NULL;
	}
	bufferevent_setwatermark(bev, EV_READ, 0, HTTP_MAX_INPUT);
	hc->bev = bev;
	hconn.open++;
	/* HTTPS past the share may yet take a stalled handshake's slot
	 * (handshake_budget()) */
	hc->over = *hconn.others + hconn.open > hconn.max ||
	    (hconn.open > hconn.max_http && !tls_on());
	if (hc->over)
		(*hconn.rejected)++;
	bufferevent_incref(bev);
	if (event_base_once(base, -1, EV_TIMEOUT, http_conn_adopt, hc, &now) != 0) {
		/* cannot watch it: not counted (out of memory only) */
		hconn.open--;
		bufferevent_decref(bev);
		free(hc);
	}
	return bev;
}

static void
reenable_cb(evutil_socket_t fd, short what, void *arg)
{
	evconnlistener_enable(arg);
}

void
http_pause_accepts(struct evconnlistener *l)
{
	struct timeval tv = { 0, 100000 };

	evconnlistener_disable(l);
	event_base_once(evconnlistener_get_base(l), -1, EV_TIMEOUT, reenable_cb,
	    l, &tv);
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

	if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
		if (now - last_log_ms > 60000) {
			last_log_ms = now;
			log_warn("--http accept: %s; pausing accepts 100 ms at a time "
			    "(logged once a minute)", evutil_socket_error_to_string(err));
		}
		http_pause_accepts(l);
		return;
	}
	log_warn("--http accept: %s", evutil_socket_error_to_string(err));
}

/* A socket bound to addr:port (a name is resolved: the first address
 * that binds), not yet listening; -1 after logging why. */
static int
http_bind(const char *addr, long port)
{
	struct addrinfo hints, *ai = NULL, *a;
	char serv[16];
	int fd = -1, one = 1, rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	snprintf(serv, sizeof(serv), "%ld", port);
	if ((rc = getaddrinfo(addr, serv, &hints, &ai)) != 0) {
		log_error("--http %s: %s", addr, gai_strerror(rc));
		return -1;
	}
	for (a = ai; a != NULL; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    a->ai_protocol);
		if (fd < 0)
			continue;
		if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
		    bind(fd, a->ai_addr, a->ai_addrlen) == 0)
			break;
		log_warn("--http: bind %s:%ld: %s", addr, port, strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd;
}

struct http_server *
http_start(struct event_base *base, const char *spec, struct broker *b,
    unsigned max_queues, const bool *stopping, bool need_admin, int max_conns,
    bool (*commit)(char *why, size_t len))
{
	struct http_server *h;
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
	snprintf(h->addr, sizeof(h->addr), "%s", addr);
	h->wildcard = addr[0] == '\0' || strcmp(addr, "0.0.0.0") == 0 ||
	    strcmp(addr, "::") == 0;
	h->console.http_connections = http_connections;
	if (csrf_init() != 0) {
		log_error("--http: no random bytes for the console's CSRF token");
		free(h);
		return NULL;
	}
	h->http = evhttp_new(base);
	h->bound_fd = -1;
	if (h->http == NULL || (spec != NULL &&
	    (h->bound_fd = http_bind(addr, port)) < 0)) {
		log_error("--http: cannot listen on %s:%ld", addr, port);
		if (h->http != NULL)
			evhttp_free(h->http);
		free(h);
		return NULL;
	}
	/* every method reaches handle(), which answers 405 with the security
	 * headers: evhttp's own 501 page would have none */
	evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD |
	    EVHTTP_REQ_POST | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
	    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT |
	    EVHTTP_REQ_PATCH);
	/* bounded requests: a client may not make us hold more than a few
	 * KiB, nor hold a connection open by sending slowly */
	evhttp_set_max_headers_size(h->http, HTTP_MAX_HEADERS);
	evhttp_set_max_body_size(h->http, HTTP_MAX_BODY);
	evhttp_set_timeout(h->http, HTTP_TIMEOUT_S);
	evhttp_set_gencb(h->http, handle, h);
	/* every connection's bufferevent is ours, to count it against -c
	 * (and, with --tls-cert, to serve HTTPS with the same certificate) */
	hconn.others = &b->stats.curr_connections;
	hconn.rejected = &b->stats.rejected_connections;
	hconn.max = max_conns > 0 ? (uint64_t)max_conns : 0;
	hconn.max_http = hconn.max / HTTP_CONN_SHARE > 0 ?
	    hconn.max / HTTP_CONN_SHARE : 1;
	hconn.need_login = need_admin;
	evhttp_set_bevcb(h->http, http_bev, NULL);
	if (spec != NULL)
		log_info("console on %s://%s:%ld/, metrics on /metrics%s",
		    tls_on() ? "https" : "http", addr, port,
		    h->console.writes_allowed ? "" : " (console read-only: no "
		    "--auth-file login and not on loopback)");
	return h;
}

int
http_listen(struct http_server *h)
{
	int fd = h->bound_fd;

	if (fd < 0)
		return 0;
	if (listen(fd, 128) != 0 || http_listen_fd(h, fd) != 0) {
		log_error("--http: cannot listen on %s: %s", h->addr, strerror(errno));
		return -1;
	}
	h->bound_fd = -1;       /* evhttp's now */
	return 0;
}

void
http_allow_hosts(struct http_server *h, const char *const *names, size_t n)
{
	h->hosts = names;
	h->nhosts = n;
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
	if (h->bound_fd >= 0)
		close(h->bound_fd);
	evhttp_free(h->http);
	free(h);
}
