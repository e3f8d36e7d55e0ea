/* console.c -- the web console's page and JSON API (console.h,
 * docs/console.md). */
#include "config.h"

#include <inttypes.h>
#include <sys/queue.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "clock.h"
#include "console.h"
#include "console_assets.h"
#include "csrf.h"
#include "deadletter.h"
#include "hashmap.h"
#include "history.h"
#include "http_reply.h"
#include "log.h"
#include "ops.h"
#include "qname.h"
#include "queues.h"
#include "requeue.h"
#include "session.h"

/* GET /api/queues: queues per page by default, and at most */
#define API_LIMIT_DEFAULT 100
#define API_LIMIT_MAX 1000
/* peek: items by default, and at most */
#define PEEK_DEFAULT 10
#define PEEK_MAX 100
/* peek?retrying=1 looks at this many items at most (one loop turn) */
#define PEEK_SCAN_MAX 100000
/* preview of an item's data: text bytes, or bytes shown as hex */
#define PREVIEW_TEXT 200
#define PREVIEW_HEX 64
/* open items listed: by default, and at most */
#define OPEN_DEFAULT 100
#define OPEN_MAX 1000
/* requeue without n: batches of REQUEUE_MAX, each its own commit, up to */
#define REQUEUE_ALL_MAX 100000
/* rates are recomputed when the last sample is at least this old */
#define RATE_MIN_MS 500


static const char *const sync_names[] = { "always", "periodic", "never" };

void
console_json_str(struct evbuffer *out, const char *s, size_t len)
{
	size_t i, run = 0;

	evbuffer_add(out, "\"", 1);
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '<' &&
		    c != '>' && c != '&') {
			run++;
			continue;
		}
		if (run > 0)
			evbuffer_add(out, s + i - run, run);
		run = 0;
		if (c == '"' || c == '\\')
			evbuffer_add_printf(out, "\\%c", c);
		else
			evbuffer_add_printf(out, "\\u%04x", c);
	}
	if (run > 0)
		evbuffer_add(out, s + len - run, run);
	evbuffer_add(out, "\"", 1);
}

/* ------------------------------------------------------------ replies */

/* Send out as the JSON reply, and free it. */
static void
send_json(struct evhttp_request *req, int code, const char *reason,
    struct evbuffer *out)
{
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    "application/json");
	evhttp_send_reply(req, code, reason, out);
	evbuffer_free(out);
}

/* {"error": msg} with that status. */
static void
send_error(struct evhttp_request *req, int code, const char *reason,
    const char *msg)
{
	struct evbuffer *out = evbuffer_new();

	if (out == NULL) {
		http_send_error(req, 500, "Internal Server Error", "out of memory");
		return;
	}
	evbuffer_add_printf(out, "{\"error\":");
	console_json_str(out, msg, strlen(msg));
	evbuffer_add_printf(out, "}\n");
	send_json(req, code, reason, out);
}

/* A decimal parameter: absent leaves *v; false when malformed or over max. */
static bool
param_u64(struct evkeyvalq *q, const char *key, uint64_t max, uint64_t *v)
{
	const char *s = evhttp_find_header(q, key);
	uint64_t n = 0;

	if (s == NULL)
		return true;
	if (*s == '\0')
		return false;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9')
			return false;
		if (n > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		n = n * 10 + (uint64_t)(*s - '0');
	}
	if (n > max)
		return false;
	*v = n;
	return true;
}

/* ------------------------------------------------------------- assets */

bool
console_path(const char *path)
{
	return strcmp(path, "/") == 0 || strncmp(path, "/api/", 5) == 0 ||
	    console_asset(path) != NULL;
}

static void
serve_asset(struct evhttp_request *req, const struct console_asset *a)
{
	struct evbuffer *out = evbuffer_new();

	if (out == NULL) {
		http_send_error(req, 500, "Internal Server Error", "out of memory");
		return;
	}
	evbuffer_add_reference(out, a->data, a->len, NULL, NULL);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    a->type);
	evhttp_send_reply(req, 200, "OK", out);
	evbuffer_free(out);
}

/* ------------------------------------------------------- /api/server */

static void
api_server(const struct console_env *env, struct evhttp_request *req,
    const char *user)
{
	char csrf[CSRF_TOKEN_LEN + 1];
	const struct history_stats *hs = history_stats();
	struct broker *b = env->b;
	struct stats *s = &b->stats;
	struct evbuffer *out = evbuffer_new();
	uint64_t commits = 0;
	size_t i;

	if (out == NULL) {
		http_send_error(req, 500, "Internal Server Error", "out of memory");
		return;
	}
	for (i = 0; i <= STATS_COMMIT_BUCKETS; i++)
		commits += s->commit_hist[i];
	/* this login's token, for a few minutes (csrf.h) */
	csrf_token(user, strlen(user), saker_now_ms(), csrf);
	evbuffer_add_printf(out, "{\"version\":");
	console_json_str(out, PACKAGE_VERSION, strlen(PACKAGE_VERSION));
	evbuffer_add_printf(out, ",\"store\":");
	console_json_str(out, saker_store_name(b->store), strlen(saker_store_name(b->store)));
	{
		/* the database of a store on a server (postgres) */
		struct saker_store_stats ss;

		saker_store_get_stats(b->store, &ss);
		if (ss.server) {
			evbuffer_add_printf(out, ",\"database\":");
			if (ss.connected)
				evbuffer_add_printf(out, "\"connected\"");
			else
				console_json_str(out, ss.down_why, strlen(ss.down_why));
			evbuffer_add_printf(out, ",\"database_reconnects\":%" PRIu64
			    ",\"database_in_doubt\":%" PRIu64, ss.reconnects,
			    ss.in_doubt);
		}
	}
	evbuffer_add_printf(out, ",\"sync\":\"%s\",\"status\":\"%s\","
	    "\"uptime\":%lld,\"pid\":%ld,"
	    "\"connections\":%" PRIu64 ",\"http_connections\":%u,"
	    "\"total_connections\":%" PRIu64 ",\"queues\":%zu,"
	    "\"commits\":%" PRIu64 ",\"commit_mean_ms\":%.3f,"
	    "\"cmd_get\":%" PRIu64 ",\"cmd_set\":%" PRIu64 ","
	    "\"store_failed\":%s,\"writes_allowed\":%s,\"login_required\":%s,"
	    "\"history_interval_ms\":%u,\"history_samples\":%d,"
	    "\"history_queues\":%" PRIu64 ",\"history_bytes\":%" PRIu64 ","
	    "\"history_walk_us\":%" PRIu64 ",\"history_walk_slices\":%" PRIu64 ","
	    "\"csrf_token\":\"%s\"}\n",
	    sync_names[b->sync],
	    b->status == STATUS_UP ? "up" : b->status == STATUS_READONLY ?
	    "readonly" : "quiescent",
	    (long long)(time(NULL) - s->started), (long)getpid(),
	    s->curr_connections, env->http_connections(), s->total_connections,
	    b->nqueues, commits,
	    commits > 0 ? (double)s->commit_ns / (double)commits / 1e6 : 0.0,
	    s->cmd_get, s->cmd_set, b->store_failed ? "true" : "false",
	    env->writes_allowed ? "true" : "false",
	    env->login_required ? "true" : "false", hs->interval_ms,
	    HISTORY_SAMPLES, hs->rings,
	    hs->rings * (uint64_t)sizeof(struct depth_history),
	    hs->walk_us, hs->slices, csrf);
	send_json(req, 200, "OK", out);
}

/* ------------------------------------------------------- /api/queues */

enum sort_key { SK_NAME, SK_ITEMS, SK_BYTES, SK_DELAYED, SK_OPEN, SK_WAITERS,
    SK_DEAD, SK_EXPIRED, SK_AGE, SK_ENQ_RATE, SK_DEQ_RATE };

static const char *const sort_names[] = { "name", "items", "bytes", "delayed",
    "open", "waiters", "dead_lettered", "expired", "age", "enqueue_rate",
    "dequeue_rate", NULL };

/* One queue's line of a listing.  Self-contained: a listing runs over
 * several loop turns (list_job), and a queue may be deleted and reaped
 * meanwhile. */
struct row {
	char *name;                   /* a copy (malloc) in the heap */
	size_t len;
	struct saker_queue_stats st;
	int64_t age_ms;
	double enq_rate, deq_rate;
	size_t nwaiters;
	uint64_t dead_lettered, discarded, retries;
};

/* The queue's rates, into w: recomputed from its counters when the last
 * sample is old enough, so they cost nothing while nobody asks (0 when
 * out of memory). */
static void
sample_rates(struct row *w, struct squeue *q, int64_t now)
{
	struct queue_watch *r = queue_watch(q);

	if (r == NULL)
		return;
	if (r->rate_ms != 0 && now - r->rate_ms < RATE_MIN_MS)
		goto out;
	if (r->rate_ms == 0 || now - r->rate_ms > 60000) {
		/* first sample, or not sampled for a minute: start again */
		r->enq_rate = r->deq_rate = 0;
	} else {
		double dt = (double)(now - r->rate_ms) / 1000.0;

		r->enq_rate = (double)(q->enqueued - r->rate_enq) / dt;
		r->deq_rate = (double)(q->dequeued - r->rate_deq) / dt;
	}
	r->rate_ms = now;
	r->rate_enq = q->enqueued;
	r->rate_deq = q->dequeued;
out:
	w->enq_rate = r->enq_rate;
	w->deq_rate = r->deq_rate;
}

struct rows {
	struct broker *b;
	int64_t now;
};

/* q's row into *w; 0, or 1 when the store cannot say (left out). */
static int
row_one(void *arg, struct squeue *q, struct row *w)
{
	struct rows *r = arg;

	memset(w, 0, sizeof(*w));
	if (q->h != NULL &&
	    saker_store_queue_stats(r->b->store, q->h, &w->st) != SAKER_OK)
		return 1;
	if (w->st.head_created_ms > 0 && r->now > w->st.head_created_ms)
		w->age_ms = r->now - w->st.head_created_ms;
	sample_rates(w, q, r->now);
	w->nwaiters = q->nwaiters;
	w->dead_lettered = q->dead_lettered;
	w->discarded = q->discarded;
	w->retries = q->retries;
	return 0;
}

static enum sort_key sort_by;
static bool sort_desc;

#define CMP(a, b) ((a) < (b) ? -1 : (a) > (b) ? 1 : 0)

/* sort_by, sort_desc: those of the listing being worked on */
static int
row_cmp(const struct row *a, const struct row *b)
{
	int c = 0;

	switch (sort_by) {
	case SK_NAME: break;
	case SK_ITEMS: c = CMP(a->st.items, b->st.items); break;
	case SK_BYTES: c = CMP(a->st.bytes, b->st.bytes); break;
	case SK_DELAYED: c = CMP(a->st.delayed_items, b->st.delayed_items); break;
	case SK_OPEN: c = CMP(a->st.open_items, b->st.open_items); break;
	case SK_WAITERS: c = CMP(a->nwaiters, b->nwaiters); break;
	case SK_DEAD: c = CMP(a->dead_lettered, b->dead_lettered); break;
	case SK_EXPIRED: c = CMP(a->st.expired_items, b->st.expired_items); break;
	case SK_AGE: c = CMP(a->age_ms, b->age_ms); break;
	case SK_ENQ_RATE: c = CMP(a->enq_rate, b->enq_rate); break;
	case SK_DEQ_RATE: c = CMP(a->deq_rate, b->deq_rate); break;
	}
	if (c == 0)
		c = strcmp(a->name, b->name);
	return sort_desc ? -c : c;
}

static void
row_json(struct evbuffer *out, struct broker *b, const struct row *w,
    bool history)
{
	evbuffer_add_printf(out, "{\"name\":");
	console_json_str(out, w->name, w->len);
	evbuffer_add_printf(out, ",\"items\":%" PRIu64 ",\"bytes\":%" PRIu64
	    ",\"delayed\":%" PRIu64 ",\"open\":%" PRIu64 ",\"waiters\":%zu"
	    ",\"dead_lettered\":%" PRIu64 ",\"expired\":%" PRIu64
	    ",\"discarded\":%" PRIu64 ",\"total_items\":%" PRIu64
	    ",\"age_ms\":%" PRId64 ",\"enqueue_rate\":%.2f,\"dequeue_rate\":%.2f"
	    ",\"retries\":%" PRIu64 ",\"dedup_ids\":%" PRIu64
	    ",\"dedup_hits\":%" PRIu64,
	    w->st.items, w->st.bytes, w->st.delayed_items, w->st.open_items,
	    w->nwaiters, w->dead_lettered, w->st.expired_items,
	    w->discarded, w->st.total_items, w->age_ms, w->enq_rate,
	    w->deq_rate, w->retries, w->st.dedup_ids, w->st.dedup_hits);
	if (history) {
		const struct squeue *q = queue_find(b, w->name, w->len);

		evbuffer_add_printf(out, ",\"depth\":");
		if (q != NULL)
			history_json(out, q);
		else
			evbuffer_add(out, "[]", 2);
	}
	evbuffer_add(out, "}", 1);
}

/*
 * GET /api/queues over several loop turns.  With 100,000 queues one
 * listing held the loop 0.08 s (memory) to 0.42 s (sqlite) whatever its
 * limit=, and 8 clients looping it pushed memcache `version` to a median
 * of 0.49 s (issue 45).  Now a listing walks the registry a piece at a
 * time (queues_walk_waited_from), LIST_SLICE_NS of loop time per piece
 * and LIST_GAP_US between pieces, so every other event runs in between
 * and listings have the loop at most 40 % of the time; a listing keeps the
 * offset+limit best rows in a heap (no sort of every queue), and at most
 * LIST_JOBS_MAX listings are in progress at once (more get 503).
 * Queues created or deleted meanwhile may be missed or (after the
 * registry grows) counted twice: a listing is a moment's view anyway.
 */
#define LIST_JOBS_MAX 2
#define LIST_SLICE_NS 500000
#define LIST_GAP_US 2000

struct list_job {
	TAILQ_ENTRY(list_job) link;
	struct evhttp_request *req;   /* its connection's close ends the job */
	struct broker *b;
	struct event *ev;
	size_t pos;                   /* queues_walk_waited_from() */
	uint64_t t0;                  /* the slice's start */
	unsigned n;                   /* queues in this slice */
	int64_t now;
	enum sort_key sort_by;
	bool desc, history, oom;
	char *prefix;
	size_t plen;
	uint64_t offset, limit;
	struct row *heap;             /* the best rows, the worst on top */
	size_t nheap, k;
	uint64_t total, items, bytes, delayed, open;
};

static TAILQ_HEAD(, list_job) list_jobs = TAILQ_HEAD_INITIALIZER(list_jobs);
static unsigned nlist_jobs;

static void
list_job_free(struct list_job *j)
{
	size_t i;

	TAILQ_REMOVE(&list_jobs, j, link);
	nlist_jobs--;
	if (j->ev != NULL)
		event_free(j->ev);
	for (i = 0; i < j->nheap; i++)
		free(j->heap[i].name);
	free(j->heap);
	free(j->prefix);
	free(j);
}

bool
console_conn_busy(struct evhttp_connection *evcon)
{
	struct list_job *j;

	TAILQ_FOREACH(j, &list_jobs, link)
		if (evhttp_request_get_connection(j->req) == evcon)
			return true;
	return false;
}

void
console_conn_closed(struct evhttp_connection *evcon)
{
	struct list_job *j, *next;

	/* evhttp frees the connection's requests: a listing for one of
	 * them ends here (a request it already orphaned is still ours to
	 * answer, which frees it) */
	for (j = TAILQ_FIRST(&list_jobs); j != NULL; j = next) {
		next = TAILQ_NEXT(j, link);
		if (evhttp_request_get_connection(j->req) == evcon)
			list_job_free(j);
	}
}

static void
heap_swap(struct row *a, struct row *b)
{
	struct row t = *a;

	*a = *b;
	*b = t;
}

/* Keep w if it is among the k best so far (the heap's top: the worst),
 * with a copy of its name. */
static void
heap_offer(struct list_job *j, struct row *w)
{
	struct row *h = j->heap;
	size_t i, c;
	char *name;

	if (j->k == 0 || (j->nheap == j->k && row_cmp(w, &h[0]) >= 0))
		return;
	if ((name = malloc(w->len + 1)) == NULL) {
		j->oom = true;
		return;
	}
	memcpy(name, w->name, w->len);
	name[w->len] = '\0';
	w->name = name;
	if (j->nheap < j->k) {
		i = j->nheap++;
		h[i] = *w;
		while (i > 0 && row_cmp(&h[(i - 1) / 2], &h[i]) < 0) {
			heap_swap(&h[(i - 1) / 2], &h[i]);
			i = (i - 1) / 2;
		}
		return;
	}
	free(h[0].name);
	h[0] = *w;
	for (i = 0; (c = 2 * i + 1) < j->nheap; i = c) {
		if (c + 1 < j->nheap && row_cmp(&h[c + 1], &h[c]) > 0)
			c++;
		if (row_cmp(&h[c], &h[i]) <= 0)
			break;
		heap_swap(&h[c], &h[i]);
	}
}

/* Take the heap's worst row out. */
static struct row
heap_pop(struct list_job *j)
{
	struct row *h = j->heap, top = h[0];
	size_t i, c;

	h[0] = h[--j->nheap];
	for (i = 0; (c = 2 * i + 1) < j->nheap; i = c) {
		if (c + 1 < j->nheap && row_cmp(&h[c + 1], &h[c]) > 0)
			c++;
		if (row_cmp(&h[c], &h[i]) <= 0)
			break;
		heap_swap(&h[c], &h[i]);
	}
	return top;
}

/* The reply: totals, then the rows ranked offset.. of the heap. */
static void
list_reply(struct list_job *j)
{
	struct evbuffer *out = evbuffer_new();
	struct row *page = NULL;
	size_t n = 0, i;

	if (out == NULL || (j->nheap > j->offset &&
	    (page = malloc((j->nheap - j->offset) * sizeof(*page))) == NULL)) {
		if (out != NULL)
			evbuffer_free(out);
		send_error(j->req, 500, "Internal Server Error", "out of memory");
		return;
	}
	/* popped worst first: the page fills from its end */
	if (j->nheap > j->offset) {
		n = j->nheap - (size_t)j->offset;
		for (i = n; i > 0; i--)
			page[i - 1] = heap_pop(j);
	}
	evbuffer_add_printf(out, "{\"total\":%" PRIu64 ",\"offset\":%" PRIu64
	    ",\"limit\":%" PRIu64 ",\"totals\":{\"items\":%" PRIu64 ",\"bytes\":%"
	    PRIu64 ",\"delayed\":%" PRIu64 ",\"open\":%" PRIu64 "},\"queues\":[",
	    j->total, j->offset, j->limit, j->items, j->bytes, j->delayed, j->open);
	for (i = 0; i < n; i++) {
		if (i > 0)
			evbuffer_add(out, ",", 1);
		row_json(out, j->b, &page[i], j->history);
		free(page[i].name);
	}
	evbuffer_add_printf(out, "]}\n");
	free(page);
	send_json(j->req, 200, "OK", out);
}

/* queues_walk_waited_from(): q into the totals and maybe the heap; 1 to
 * end the slice (its time is up, or out of memory). */
static int
list_one(void *arg, struct squeue *q)
{
	struct list_job *j = arg;
	struct rows r = { j->b, j->now };
	struct row w;

	if ((j->plen == 0 || (q->len >= j->plen && memcmp(q->name, j->prefix,
	    j->plen) == 0)) && row_one(&r, q, &w) == 0) {
		w.name = q->name;
		w.len = q->len;
		j->total++;
		j->items += w.st.items;
		j->bytes += w.st.bytes;
		j->delayed += w.st.delayed_items;
		j->open += w.st.open_items;
		heap_offer(j, &w);
	}
	return j->oom || (++j->n % 64 == 0 &&
	    saker_mono_ns() - j->t0 >= LIST_SLICE_NS);
}

/* One slice of a listing; the reply and the end when it is done. */
static void
list_slice(evutil_socket_t fd, short what, void *arg)
{
	struct list_job *j = arg;
	static const struct timeval gap = { 0, LIST_GAP_US };

	j->t0 = saker_mono_ns();
	j->n = 0;
	j->now = saker_now_ms();
	sort_by = j->sort_by;
	sort_desc = j->desc;
	if (queues_walk_waited_from(j->b, &j->pos, list_one, j) != 0 &&
	    !j->oom && evtimer_add(j->ev, &gap) == 0)
		return;         /* the rest after the loop's other events */
	if (j->oom)
		send_error(j->req, 500, "Internal Server Error", "out of memory");
	else
		list_reply(j);
	list_job_free(j);
}

static void
api_queues(const struct console_env *env, struct evhttp_request *req,
    struct evkeyvalq *qs)
{
	const char *prefix = evhttp_find_header(qs, "prefix");
	const char *sort = evhttp_find_header(qs, "sort");
	uint64_t offset = 0, limit = API_LIMIT_DEFAULT, history = 0;
	struct list_job *j;
	size_t i;

	if (!param_u64(qs, "offset", UINT64_MAX, &offset) ||
	    !param_u64(qs, "limit", API_LIMIT_MAX, &limit) ||
	    !param_u64(qs, "history", 1, &history)) {
		send_error(req, 400, "Bad Request", "offset and limit are numbers "
		    "(limit 0..1000), history 0 or 1");
		return;
	}
	if ((j = calloc(1, sizeof(*j))) == NULL) {
		send_error(req, 500, "Internal Server Error", "out of memory");
		return;
	}
	j->sort_by = SK_NAME;
	if (sort != NULL) {
		if (*sort == '-') {
			j->desc = true;
			sort++;
		}
		for (i = 0; sort_names[i] != NULL; i++)
			if (strcmp(sort, sort_names[i]) == 0)
				break;
		if (sort_names[i] == NULL) {
			free(j);
			send_error(req, 400, "Bad Request", "unknown sort key");
			return;
		}
		j->sort_by = (enum sort_key)i;
	}
	if (nlist_jobs >= LIST_JOBS_MAX) {
		free(j);
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Retry-After", "1");
		send_error(req, 503, "Service Unavailable", "other queue listings "
		    "in progress; retry in a second");
		return;
	}
	TAILQ_INSERT_TAIL(&list_jobs, j, link);
	nlist_jobs++;
	j->req = req;
	j->b = env->b;
	j->offset = offset;
	j->limit = limit;
	j->history = history == 1;
	/* the k best, no more than there are queues (none past them) */
	j->k = hashmap_count(env->b->queues);
	if (offset >= j->k)
		j->k = 0;
	else if (offset + limit < j->k)
		j->k = (size_t)(offset + limit);
	if ((prefix != NULL && (j->prefix = strdup(prefix)) == NULL) ||
	    (j->k > 0 && (j->heap = malloc(j->k * sizeof(*j->heap))) == NULL) ||
	    (j->ev = evtimer_new(evhttp_connection_get_base(
	    evhttp_request_get_connection(req)), list_slice, j)) == NULL) {
		send_error(req, 500, "Internal Server Error", "out of memory");
		list_job_free(j);
		return;
	}
	j->plen = prefix != NULL ? strlen(prefix) : 0;
	list_slice(-1, 0, j);
}

/* ------------------------------------------------- /api/queues/NAME/peek */

struct peek_ctx {
	struct evbuffer *out;
	uint64_t n, max;
	int64_t now;
	bool retrying;		/* only delayed items handed out before */
	uint64_t scanned;
};

static const char *const state_names[] = { "ready", "delayed", "open" };

static int
peek_one(void *arg, const struct saker_item *it)
{
	struct peek_ctx *p = arg;
	const unsigned char *d = it->data;
	bool text = true;
	size_t i, show;

	/* retrying: given back with a delay (abort/delay=, retry_backoff) */
	if (p->retrying && (it->state != SAKER_ITEM_DELAYED ||
	    it->deliveries == 0))
		return ++p->scanned >= PEEK_SCAN_MAX;
	for (i = 0; i < it->len; i++)
		if ((d[i] < 0x20 && d[i] != '\t' && d[i] != '\n' && d[i] != '\r') ||
		    d[i] >= 0x7f) {
			text = false;
			break;
		}
	if (p->n > 0)
		evbuffer_add(p->out, ",", 1);
	evbuffer_add_printf(p->out, "{\"id\":%" PRIu64 ",\"state\":\"%s\","
	    "\"age_ms\":%" PRId64 ",\"flags\":%" PRIu32 ",\"deliveries\":%" PRIu32
	    ",\"size\":%zu,\"due_ms\":%" PRId64 ",\"expires_ms\":%" PRId64 ",",
	    it->id, (unsigned)it->state < 3 ? state_names[it->state] : "?",
	    it->created_ms > 0 && p->now > it->created_ms ? p->now - it->created_ms : 0,
	    it->flags, it->deliveries, it->len,
	    it->state == SAKER_ITEM_DELAYED ? it->due_ms : 0, it->expires_ms);
	if (text) {
		show = it->len < PREVIEW_TEXT ? it->len : PREVIEW_TEXT;
		evbuffer_add_printf(p->out, "\"encoding\":\"text\",\"preview\":");
		console_json_str(p->out, (const char *)d, show);
	} else {
		show = it->len < PREVIEW_HEX ? it->len : PREVIEW_HEX;
		evbuffer_add_printf(p->out, "\"encoding\":\"hex\",\"preview\":\"");
		for (i = 0; i < show; i++)
			evbuffer_add_printf(p->out, "%02x", d[i]);
		evbuffer_add(p->out, "\"", 1);
	}
	evbuffer_add_printf(p->out, ",\"truncated\":%s}", show < it->len ? "true" : "false");
	return ++p->n >= p->max;
}

static void
api_peek(const struct console_env *env, struct evhttp_request *req,
    struct squeue *q, struct evkeyvalq *qs)
{
	struct peek_ctx p;
	uint64_t n = PEEK_DEFAULT, retrying = 0;
	int rc;

	if (!param_u64(qs, "n", PEEK_MAX, &n) || n == 0 ||
	    !param_u64(qs, "retrying", 1, &retrying)) {
		send_error(req, 400, "Bad Request",
		    "n is a number 1..100, retrying 0 or 1");
		return;
	}
	if ((p.out = evbuffer_new()) == NULL) {
		send_error(req, 500, "Internal Server Error", "out of memory");
		return;
	}
	p.n = 0;
	p.max = n;
	p.now = saker_now_ms();
	p.retrying = retrying != 0;
	p.scanned = 0;
	evbuffer_add_printf(p.out, "{\"name\":");
	console_json_str(p.out, q->name, q->len);
	evbuffer_add_printf(p.out, ",\"items\":[");
	rc = q->h != NULL ? saker_store_iterate(env->b->store, q->h,
	    peek_one, &p) : 0;
	if (rc < 0) {
		evbuffer_free(p.out);
		send_error(req, 500, "Internal Server Error", saker_strerror(rc));
		return;
	}
	evbuffer_add_printf(p.out, "]}\n");
	send_json(req, 200, "OK", p.out);
}

/* ---------------------------------------------- /api/queues/NAME/history */

static void
api_history(struct evhttp_request *req, struct squeue *q)
{
	struct evbuffer *out = evbuffer_new();

	if (out == NULL) {
		send_error(req, 500, "Internal Server Error", "out of memory");
		return;
	}
	evbuffer_add_printf(out, "{\"name\":");
	console_json_str(out, q->name, q->len);
	evbuffer_add_printf(out, ",\"interval_ms\":%u,\"samples\":%d,"
	    "\"last_ms\":%" PRId64 ",\"depth\":", history_stats()->interval_ms,
	    HISTORY_SAMPLES, history_stats()->last_ms);
	history_json(out, q);
	evbuffer_add_printf(out, "}\n");
	send_json(req, 200, "OK", out);
}

/* ------------------------------------------------- /api/queues/NAME/open */

/* Every open item of q with its holder: the sessions' records (session.h),
 * oldest first within a session.  O(open items of every session). */
static void
api_open(const struct console_env *env, struct evhttp_request *req,
    struct squeue *q, struct evkeyvalq *qs)
{
	struct broker *b = env->b;
	uint64_t n = OPEN_DEFAULT, total = 0;
	int64_t now = saker_now_ms();
	struct session *s;
	struct open_item *oi;
	struct evbuffer *out, *items;

	if (!param_u64(qs, "n", OPEN_MAX, &n) || n == 0) {
		send_error(req, 400, "Bad Request", "n is a number 1..1000");
		return;
	}
	out = evbuffer_new();
	items = evbuffer_new();
	if (out == NULL || items == NULL) {
		if (out != NULL)
			evbuffer_free(out);
		if (items != NULL)
			evbuffer_free(items);
		send_error(req, 500, "Internal Server Error", "out of memory");
		return;
	}
	TAILQ_FOREACH(s, &b->sessions, link) {
		const char *peer;

		/* the console's own sessions hold nothing between requests */
		if (s->dead || s->nopens == 0)
			continue;
		peer = NULL;
		TAILQ_FOREACH(oi, &s->opens, link) {
			if (oi->q != q)
				continue;
			if (total++ >= n)
				continue;
			if (peer == NULL)
				peer = b->hooks->peer(s);
			if (total > 1)
				evbuffer_add(items, ",", 1);
			evbuffer_add_printf(items, "{\"id\":%" PRIu64 ",\"holder\":",
			    oi->id);
			console_json_str(items, peer, strlen(peer));
			evbuffer_add_printf(items, ",\"user\":");
			if (s->perms != NULL && s->authed)
				console_json_str(items, s->perms->user,
				    strlen(s->perms->user));
			else
				evbuffer_add_printf(items, "null");
			evbuffer_add_printf(items, ",\"age_ms\":%" PRId64
			    ",\"deliveries\":%" PRIu32 ",\"deadline_ms\":%" PRId64 "}",
			    now > oi->opened_ms ? now - oi->opened_ms : 0,
			    oi->deliveries, oi->deadline_ms);
		}
	}
	evbuffer_add_printf(out, "{\"name\":");
	console_json_str(out, q->name, q->len);
	evbuffer_add_printf(out, ",\"total\":%" PRIu64 ",\"open\":[", total);
	evbuffer_add_buffer(out, items);
	evbuffer_add_printf(out, "]}\n");
	evbuffer_free(items);
	send_json(req, 200, "OK", out);
}

/* ------------------------------------------------------------ POSTs */

/* The queue whose dead-letter queue is called name. */
struct origin_ctx {
	struct broker *b;
	const char *name;
	struct squeue *found;
};

static int
origin_one(void *arg, struct squeue *q)
{
	struct origin_ctx *o = arg;
	char dl[SAKER_QNAME_MAX + 1];

	dl_name(o->b, q, dl, sizeof(dl));
	if (strcmp(dl, o->name) == 0 && strcmp(q->name, o->name) != 0) {
		o->found = q;
		return 1;
	}
	return 0;
}

static bool
csrf_ok(struct evhttp_request *req, const char *user)
{
	const char *t = evhttp_find_header(evhttp_request_get_input_headers(req),
	    "X-CSRF-Token");

	return csrf_check(user, strlen(user), t, saker_now_ms());
}

static void
op_failed(struct evhttp_request *req, int r, const char *msg)
{
	if (r == OPR_READONLY || r == OPR_SERVER || r == OPR_NOMEM)
		send_error(req, 503, "Service Unavailable", msg != NULL ? msg : "store error");
	else if (r == OPR_DENIED)
		send_error(req, 403, "Forbidden", "permission denied");
	else
		send_error(req, 400, "Bad Request", msg != NULL ? msg : "refused");
}

static void
api_post(const struct console_env *env, struct evhttp_request *req,
    const char *name, size_t len, const char *action, struct evkeyvalq *qs)
{
	struct session s;
	const char *msg = NULL;
	char why[256];
	int r = OPR_OK;

	memset(&s, 0, sizeof(s));
	if (session_init(&s, env->b, true) != 0) {
		send_error(req, 500, "Internal Server Error", "out of memory");
		return;
	}
	if (strcmp(action, "flush") == 0 || strcmp(action, "delete") == 0) {
		bool flush = action[0] == 'f';

		r = flush ? op_flush(&s, name, len, &msg) : op_delete(&s, name, len, &msg);
		if (r == OPR_NOT_FOUND)
			send_error(req, 404, "Not Found", "no such queue");
		else if (r != OPR_OK)
			op_failed(req, r, msg);
		else if (!env->commit(why, sizeof(why)))
			send_error(req, 503, "Service Unavailable", why);
		else {
			struct evbuffer *out = evbuffer_new();

			if (out != NULL) {
				evbuffer_add_printf(out, "{\"%s\":true}\n",
				    flush ? "flushed" : "deleted");
				send_json(req, 200, "OK", out);
			} else
				http_send_error(req, 500, "Internal Server Error", "out of memory");
			log_info("console: %s %s", flush ? "flushed" : "deleted", name);
		}
	} else {
		/* requeue */
		const char *to = evhttp_find_header(qs, "to");
		struct origin_ctx o = { env->b, name, NULL };
		uint64_t want = REQUEUE_ALL_MAX, moved = 0, m;
		bool all = evhttp_find_header(qs, "n") == NULL;
		struct evbuffer *out;

		if (!param_u64(qs, "n", REQUEUE_ALL_MAX, &want) || want == 0) {
			send_error(req, 400, "Bad Request", "n is a number 1..100000");
			goto done;
		}
		if (to == NULL) {
			queues_walk(env->b, origin_one, &o);
			if (o.found == NULL) {
				send_error(req, 400, "Bad Request", "not the dead-letter "
				    "queue of any queue: say where with ?to=QUEUE");
				goto done;
			}
			to = o.found->name;
		} else if (!saker_qname_valid(to, strlen(to))) {
			send_error(req, 400, "Bad Request", "bad queue name in to");
			goto done;
		}
		/* batches of REQUEUE_MAX, each committed before the next */
		while (moved < want) {
			uint64_t ask = want - moved < REQUEUE_MAX ? want - moved : REQUEUE_MAX;

			r = op_requeue(&s, name, len, to, strlen(to), ask, &m, &msg);
			if (r != OPR_OK)
				break;
			if (m > 0 && !env->commit(why, sizeof(why))) {
				send_error(req, 503, "Service Unavailable", why);
				goto done;
			}
			moved += m;
			if (m < ask)
				break;
		}
		if (r != OPR_OK && moved == 0) {
			op_failed(req, r, msg);
			goto done;
		}
		if ((out = evbuffer_new()) == NULL) {
			http_send_error(req, 500, "Internal Server Error", "out of memory");
			goto done;
		}
		evbuffer_add_printf(out, "{\"moved\":%" PRIu64 ",\"to\":", moved);
		console_json_str(out, to, strlen(to));
		evbuffer_add_printf(out, ",\"all\":%s}\n", all ? "true" : "false");
		send_json(req, 200, "OK", out);
	}
done:
	session_close(&s);
	session_free(&s);
}

/* ----------------------------------------------------------- dispatch */

void
console_handle(const struct console_env *env, struct evhttp_request *req,
    const char *user)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
	const char *query = uri != NULL ? evhttp_uri_get_query(uri) : NULL;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	bool get = cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD;
	const struct console_asset *a;
	struct evkeyvalq qs;

	http_security_headers(req);
	if (user == NULL)
		user = "";
	if (path == NULL) {
		http_send_error(req, 400, "Bad Request", "bad request");
		return;
	}
	if ((a = console_asset(strcmp(path, "/") == 0 ? "/index.html" : path)) != NULL) {
		if (get)
			serve_asset(req, a);
		else
			http_send_error(req, 405, "Method Not Allowed", "only GET");
		return;
	}
	TAILQ_INIT(&qs);
	if (query != NULL && evhttp_parse_query_str(query, &qs) != 0) {
		send_error(req, 400, "Bad Request", "bad query string");
		return;
	}
	if (env->b->store == NULL) {
		send_error(req, 503, "Service Unavailable", "starting");
	} else if (!get && (strcmp(path, "/api/server") == 0 ||
	    strcmp(path, "/api/queues") == 0)) {
		send_error(req, 405, "Method Not Allowed", "only GET");
	} else if (strcmp(path, "/api/server") == 0) {
		api_server(env, req, user);
	} else if (strcmp(path, "/api/queues") == 0) {
		api_queues(env, req, &qs);
	} else if (strncmp(path, "/api/queues/", 12) == 0) {
		/* /api/queues/NAME/ACTION, NAME percent-encoded (a '/' in it,
		 * encoded or not, makes it an invalid name) */
		const char *p = path + 12, *slash = strchr(p, '/');
		char raw[3 * SAKER_QNAME_MAX + 1], *name = NULL;
		const char *action = slash != NULL ? slash + 1 : "";
		size_t rlen = slash != NULL ? (size_t)(slash - p) : 0, nlen = 0;
		struct squeue *q;

		if (rlen > 0 && rlen < sizeof(raw)) {
			memcpy(raw, p, rlen);
			raw[rlen] = '\0';
			name = evhttp_uridecode(raw, 0, &nlen);
		}
		if (name == NULL || !saker_qname_valid(name, nlen)) {
			send_error(req, 400, "Bad Request", "bad queue name");
		} else if (strcmp(action, "peek") == 0 ||
		    strcmp(action, "history") == 0 || strcmp(action, "open") == 0) {
			if (!get)
				send_error(req, 405, "Method Not Allowed", "only GET");
			else if ((q = queue_find(env->b, name, nlen)) == NULL ||
			    (q->h == NULL && q->nwaiters == 0))
				send_error(req, 404, "Not Found", "no such queue");
			else if (action[0] == 'p')
				api_peek(env, req, q, &qs);
			else if (action[0] == 'h')
				api_history(req, q);
			else
				api_open(env, req, q, &qs);
		} else if (strcmp(action, "requeue") == 0 || strcmp(action, "flush") == 0 ||
		    strcmp(action, "delete") == 0) {
			if (cmd != EVHTTP_REQ_POST)
				send_error(req, 405, "Method Not Allowed", "only POST");
			else if (!env->writes_allowed)
				send_error(req, 403, "Forbidden", "changes need an admin "
				    "login (--auth-file) or --http on a loopback address");
			else if (!csrf_ok(req, user))
				send_error(req, 403, "Forbidden", "missing or wrong X-CSRF-Token "
				    "(GET /api/server has it)");
			else
				api_post(env, req, name, nlen, action, &qs);
		} else {
			send_error(req, 404, "Not Found", "no such API");
		}
		free(name);
	} else {
		send_error(req, 404, "Not Found", "no such API");
	}
	evhttp_clear_headers(&qs);
}
