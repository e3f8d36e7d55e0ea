/* bench.c -- `saker bench`: a single-threaded, verifying libevent load generator. */
#include "config.h"

#include <sys/types.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "bench.h"

/* ------------------------------------------------------------ constants */

#define HDR_LEN       16        /* payload header: tag(4) producer(4) seq(8), hex */
#define MAX_LINE      1024      /* longest reply line we accept */
#define MAX_CONNS     65535     /* producer id must fit four hex digits */
#define MAX_KEYS      128       /* docs/protocol.md, "Multi-get": most keys in one get */
#define GRACE_NS      (2000ull * 1000 * 1000)

/* HDR-style log-linear histogram in nanoseconds: 128 linear sub-buckets per
 * power of two gives < 0.8% error from 256 ns up to 2^38 ns (~275 s). */
#define HIST_SUB_BITS 7
#define HIST_SUB      (1u << HIST_SUB_BITS)
#define HIST_SHIFTS   31
#define HIST_BUCKETS  (2 * HIST_SUB + HIST_SHIFTS * HIST_SUB)

enum mode { M_PAIR, M_PRODUCE, M_CONSUME, M_MGET, M_BLOCKING, M_DELAYED };
enum proto { P_MC, P_RESP, P_BS };
enum phase {
	PH_CONNECT, PH_SETUP, PH_PREFILL, PH_WARMUP, PH_MEASURE, PH_STOP,
	PH_DRAIN, PH_DONE
};
enum rtype {
	R_SETUP,        /* clean-up and beanstalk tube selection: reply ignored */
	R_SET,          /* enqueue one item (set / LPUSH / put) */
	R_GET,          /* non-blocking dequeue (get / RPOP / reserve-with-timeout 0) */
	R_BGET,         /* blocking dequeue (get q/t= / BRPOP) */
	R_MGET,         /* multi-key get */
	R_DRAIN,        /* dequeue after the run, to count what is left */
	R_BSDEL         /* beanstalk: delete a reserved job */
};
enum role { ROLE_WORKER, ROLE_PRODUCER, ROLE_CONSUMER };

static const char *const mode_names[] = {
	"pair", "produce", "consume", "mget", "blocking", "delayed"
};
static const char *const proto_names[] = { "memcache", "resp", "beanstalk" };
static const char *const phase_names[] = {
	"connect", "setup", "prefill", "warmup", "measure", "stop", "drain",
	"done"
};

/* ---------------------------------------------------------------- types */

struct hist {
	uint64_t b[HIST_BUCKETS];
	uint64_t n, max, sum;
};

struct bits {
	uint64_t *w;
	size_t nw;
};

struct req {
	enum rtype type;
	int queue;              /* queue index, or -1 */
	uint64_t t_ns;          /* when sent */
	uint64_t seq;           /* R_SET: sequence number of the item */
};

struct bench;

struct conn {
	struct bench *b;
	int id;
	enum role role;
	int queue;              /* the queue this connection works on */
	struct bufferevent *bev;

	struct req *ring;
	unsigned rhead, rcount, rcap;

	unsigned setup_step;
	bool setup_done;
	unsigned pair_next;     /* 0: set next, 1: get next */
	uint64_t seq;           /* next sequence number this producer uses */

	/* Drain: this connection empties queues drain_q, drain_q + stride... */
	int drain_q;
	bool drain_done;

	/* Reply parser. */
	bool in_data;           /* reading a data block */
	size_t need;            /* bytes of the block still to come, CRLF included */
	size_t blen;            /* length of the block proper */
	int nhits;              /* items in the reply being parsed */
	int arr_left;           /* RESP: array elements still to come */
	uint64_t bs_id;         /* beanstalk: id of the job being reserved */

	/* Verification, for items this connection produced. */
	struct bits acked;      /* seq acknowledged as stored */
	struct bits seen;       /* seq received by some consumer */
	uint64_t *t_ns;         /* blocking: STORED time; delayed: due time */
	size_t t_cap;

	char *out;              /* scratch for one request */
	size_t out_cap;
	char *payload;          /* the item being sent: header, then filler */
	int drain_stride;
	bool drain_dup;         /* the drain read an item twice: not a queue */
};

struct opts {
	const char *server;
	enum proto proto;
	enum mode mode;
	int conns, depth, size, queues, keys;
	double seconds, warmup, rate;
	long items;
	long window_ms, timeout_ms;
	const char *prefix;
	bool json, verify, clean, quiet;
	long server_pid;
	bool items_set;
};

struct bench {
	struct opts o;
	struct event_base *base;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	struct conn *conns;
	int nconns;             /* o.conns plus a producer in blocking/delayed */
	int nqueues;            /* queues actually used */
	char **qnames;
	size_t *qlens;
	char *pad;              /* o.size bytes of filler */
	uint16_t tag;           /* per run: tells our items from others' */

	enum phase phase;
	int nconnected, nsetup, ndrain_done;
	struct event *phase_ev, *tick_ev, *progress_ev, *sig_ev;
	uint64_t t_start, t_measure, t_measure_end, t_stop;
	bool failed, interrupted, drain_timeout;
	char errmsg[256];

	/* Work budgets. */
	long prefill_left;      /* prefill sets still to send */
	uint64_t prefill_total;
	long mget_left;         /* mget requests still to send */
	long delayed_left;      /* delayed sets still to send */
	uint64_t rate_sent;     /* sets sent under --rate since rate_t0 */
	uint64_t rate_t0;
	uint64_t last_due;      /* delayed: latest due time handed over */

	/* Counters for the measured window. */
	uint64_t m_ops, m_items, m_reqs, m_sets, m_gets, m_misses;
	uint64_t prog_items, prog_ops;
	struct hist lat;        /* request round trip */
	struct hist dlat;       /* blocking: STORED -> receipt; delayed: lateness */
	struct hist elat;       /* blocking: set sent -> receipt */

	/* Whole-run counters. */
	uint64_t acked_total, received, dups, foreign, leftover, errors;
	uint64_t early, before_ack;
	char first_error[128];

	double srv_cpu0;
	struct rusage ru0;
};

/* ---------------------------------------------------------------- utils */

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void
fail(struct bench *b, const char *fmt, ...)
{
	va_list ap;

	if (b->failed)
		return;
	b->failed = true;
	va_start(ap, fmt);
	vsnprintf(b->errmsg, sizeof(b->errmsg), fmt, ap);
	va_end(ap);
	event_base_loopbreak(b->base);
}

static void *
xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n);

	if (q == NULL) {
		fprintf(stderr, "saker bench: out of memory\n");
		exit(1);
	}
	return q;
}

/* Set bit i; return its previous value. */
static bool
bits_test_set(struct bits *bs, uint64_t i)
{
	size_t w = (size_t)(i / 64);
	uint64_t m = 1ull << (i % 64);
	bool old;

	if (w >= bs->nw) {
		size_t nw = bs->nw ? bs->nw * 2 : 1024;

		while (nw <= w)
			nw *= 2;
		bs->w = xrealloc(bs->w, nw * sizeof(*bs->w));
		memset(bs->w + bs->nw, 0, (nw - bs->nw) * sizeof(*bs->w));
		bs->nw = nw;
	}
	old = (bs->w[w] & m) != 0;
	bs->w[w] |= m;
	return old;
}

static void
times_put(struct conn *c, uint64_t seq, uint64_t t)
{
	if (seq >= c->t_cap) {
		size_t n = c->t_cap ? c->t_cap * 2 : 4096;

		while (n <= seq)
			n *= 2;
		c->t_ns = xrealloc(c->t_ns, n * sizeof(*c->t_ns));
		memset(c->t_ns + c->t_cap, 0, (n - c->t_cap) * sizeof(*c->t_ns));
		c->t_cap = n;
	}
	c->t_ns[seq] = t;
}

static uint64_t
times_get(const struct conn *c, uint64_t seq)
{
	return seq < c->t_cap ? c->t_ns[seq] : 0;
}

/* ------------------------------------------------------------ histogram */

static unsigned
hist_index(uint64_t v)
{
	unsigned msb, shift;

	if (v < 2 * HIST_SUB)
		return (unsigned)v;
	msb = 63u - (unsigned)__builtin_clzll(v);
	shift = msb - HIST_SUB_BITS;
	if (shift > HIST_SHIFTS)
		return HIST_BUCKETS - 1;
	return 2 * HIST_SUB + (shift - 1) * HIST_SUB +
	    (unsigned)((v >> shift) - HIST_SUB);
}

/* The middle of bucket i: within half a bucket (< 0.4%) of any value in it. */
static uint64_t
hist_value(unsigned i)
{
	unsigned k, shift;
	uint64_t sub;

	if (i < 2 * HIST_SUB)
		return i;
	k = i - 2 * HIST_SUB;
	shift = k / HIST_SUB + 1;
	sub = k % HIST_SUB + HIST_SUB;
	return (sub << shift) + ((1ull << shift) >> 1);
}

static void
hist_add(struct hist *h, uint64_t v)
{
	h->b[hist_index(v)]++;
	h->n++;
	h->sum += v;
	if (v > h->max)
		h->max = v;
}

/* Value at quantile ppm (parts per million), in ns. */
static uint64_t
hist_quantile(const struct hist *h, uint64_t ppm)
{
	uint64_t want, acc = 0;
	unsigned i;

	if (h->n == 0)
		return 0;
	want = (h->n * ppm + 999999) / 1000000;
	if (want == 0)
		want = 1;
	for (i = 0; i < HIST_BUCKETS; i++) {
		acc += h->b[i];
		if (acc >= want) {
			uint64_t v = hist_value(i);

			return v > h->max ? h->max : v;
		}
	}
	return h->max;
}

/* -------------------------------------------------------------- payload */

static const char hexd[] = "0123456789abcdef";

static void
put_hex(char *p, uint64_t v, int n)
{
	while (n-- > 0) {
		p[n] = hexd[v & 15];
		v >>= 4;
	}
}

static bool
get_hex(const char *p, int n, uint64_t *v)
{
	uint64_t r = 0;
	int i;

	for (i = 0; i < n; i++) {
		char ch = p[i];
		unsigned d;

		if (ch >= '0' && ch <= '9')
			d = (unsigned)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			d = (unsigned)(ch - 'a' + 10);
		else
			return false;
		r = r << 4 | d;
	}
	*v = r;
	return true;
}

/* -------------------------------------------------------------- sending */

static void
out_reserve(struct conn *c, size_t n)
{
	if (n <= c->out_cap)
		return;
	c->out = xrealloc(c->out, n);
	c->out_cap = n;
}

static struct req *
ring_push(struct conn *c, enum rtype t, int q)
{
	struct req *r;

	if (c->rcount == c->rcap) {
		/* Only beanstalk deletes go past depth; grow rather than drop. */
		unsigned ncap = c->rcap * 2, i;
		struct req *nr = xrealloc(NULL, ncap * sizeof(*nr));

		for (i = 0; i < c->rcount; i++)
			nr[i] = c->ring[(c->rhead + i) % c->rcap];
		free(c->ring);
		c->ring = nr;
		c->rhead = 0;
		c->rcap = ncap;
	}
	r = &c->ring[(c->rhead + c->rcount) % c->rcap];
	c->rcount++;
	r->type = t;
	r->queue = q;
	r->seq = 0;
	r->t_ns = mono_ns();
	return r;
}

static void
send_bytes(struct conn *c, const void *p, size_t n)
{
	if (bufferevent_write(c->bev, p, n) != 0)
		fail(c->b, "connection %d: write failed", c->id);
}

/* A RESP command from up to four arguments. */
static void
send_resp(struct conn *c, int argc, const char *const *argv,
    const size_t *lens)
{
	size_t need = 32, off;
	int i;

	for (i = 0; i < argc; i++)
		need += lens[i] + 32;
	out_reserve(c, need);
	off = (size_t)snprintf(c->out, c->out_cap, "*%d\r\n", argc);
	for (i = 0; i < argc; i++) {
		off += (size_t)snprintf(c->out + off, c->out_cap - off,
		    "$%zu\r\n", lens[i]);
		memcpy(c->out + off, argv[i], lens[i]);
		off += lens[i];
		c->out[off++] = '\r';
		c->out[off++] = '\n';
	}
	send_bytes(c, c->out, off);
}

/* Enqueue one item on queue q, delayed by delay_ms when >= 0. */
static void
send_set(struct conn *c, int q, long delay_ms)
{
	struct bench *b = c->b;
	struct req *r = ring_push(c, R_SET, q);
	size_t size = (size_t)b->o.size, off;

	r->seq = c->seq++;
	if (b->o.verify) {
		put_hex(c->payload, b->tag, 4);
		put_hex(c->payload + 4, (uint64_t)c->id, 4);
		put_hex(c->payload + 8, r->seq, 8);
	}
	if (b->o.proto == P_RESP) {
		const char *argv[3] = { "LPUSH", b->qnames[q], c->payload };
		size_t lens[3] = { 5, b->qlens[q], size };

		send_resp(c, 3, argv, lens);
		return;
	}
	out_reserve(c, size + b->qlens[q] + 128);
	if (b->o.proto == P_BS)
		off = (size_t)snprintf(c->out, c->out_cap, "put 0 0 60 %zu\r\n",
		    size);
	else if (delay_ms >= 0)
		off = (size_t)snprintf(c->out, c->out_cap,
		    "set %s/delay=%ld 0 0 %zu\r\n", b->qnames[q], delay_ms, size);
	else
		off = (size_t)snprintf(c->out, c->out_cap, "set %s 0 0 %zu\r\n",
		    b->qnames[q], size);
	memcpy(c->out + off, c->payload, size);
	off += size;
	c->out[off++] = '\r';
	c->out[off++] = '\n';
	send_bytes(c, c->out, off);
}

static void
send_get(struct conn *c, enum rtype t, int q)
{
	struct bench *b = c->b;
	size_t off;

	ring_push(c, t, q);
	out_reserve(c, b->qlens[q] + 64);
	if (b->o.proto == P_RESP) {
		char tbuf[32];
		const char *argv[3];
		size_t lens[3];

		if (t == R_BGET) {
			snprintf(tbuf, sizeof(tbuf), "%.3f",
			    (double)b->o.timeout_ms / 1000.0);
			argv[0] = "BRPOP"; lens[0] = 5;
			argv[2] = tbuf; lens[2] = strlen(tbuf);
		} else {
			argv[0] = "RPOP"; lens[0] = 4;
		}
		argv[1] = b->qnames[q];
		lens[1] = b->qlens[q];
		send_resp(c, t == R_BGET ? 3 : 2, argv, lens);
		return;
	}
	if (b->o.proto == P_BS)
		off = (size_t)snprintf(c->out, c->out_cap,
		    "reserve-with-timeout %ld\r\n",
		    t == R_BGET ? (b->o.timeout_ms + 999) / 1000 : 0L);
	else if (t == R_BGET)
		off = (size_t)snprintf(c->out, c->out_cap, "get %s/t=%ld\r\n",
		    b->qnames[q], b->o.timeout_ms);
	else
		off = (size_t)snprintf(c->out, c->out_cap, "get %s\r\n",
		    b->qnames[q]);
	send_bytes(c, c->out, off);
}

static void
send_mget(struct conn *c)
{
	struct bench *b = c->b;
	size_t off = 3;
	int i;

	ring_push(c, R_MGET, -1);
	out_reserve(c, (size_t)b->nqueues * 256 + 16);
	memcpy(c->out, "get", 3);
	for (i = 0; i < b->nqueues; i++) {
		c->out[off++] = ' ';
		memcpy(c->out + off, b->qnames[i], b->qlens[i]);
		off += b->qlens[i];
	}
	c->out[off++] = '\r';
	c->out[off++] = '\n';
	send_bytes(c, c->out, off);
}

static void
send_line(struct conn *c, enum rtype t, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf)) {
		fail(c->b, "request line too long");
		return;
	}
	ring_push(c, t, -1);
	send_bytes(c, buf, (size_t)n);
}

/* ------------------------------------------------------------ the pump */

static void enter_phase(struct bench *, enum phase);
static void check_progress(struct bench *);

/* Queue that item number i of a spread-out workload goes to. */
static int
spread_queue(const struct bench *b, uint64_t i)
{
	return (int)(i % (uint64_t)b->nqueues);
}

/* One setup request for connection c, or false when it has no more. */
static bool
setup_next(struct conn *c)
{
	struct bench *b = c->b;
	unsigned s = c->setup_step;

	if (b->o.proto == P_BS) {
		/* Each connection uses and watches its own tube only. */
		const char *t = b->qnames[c->queue];

		c->setup_step++;
		switch (s) {
		case 0: send_line(c, R_SETUP, "use %s\r\n", t); return true;
		case 1: send_line(c, R_SETUP, "watch %s\r\n", t); return true;
		case 2: send_line(c, R_SETUP, "ignore default\r\n"); return true;
		default: return false;
		}
	}
	/* Connection 0 deletes every queue so the run starts empty. */
	if (c->id != 0 || !b->o.clean || s >= (unsigned)b->nqueues)
		return false;
	c->setup_step++;
	if (b->o.proto == P_RESP) {
		const char *argv[2] = { "DEL", b->qnames[s] };
		size_t lens[2] = { 3, b->qlens[s] };

		ring_push(c, R_SETUP, -1);
		send_resp(c, 2, argv, lens);
	} else
		send_line(c, R_SETUP, "delete %s\r\n", b->qnames[s]);
	return true;
}

/* Issue the connection's next request in the current phase, if any. */
static bool
issue_next(struct conn *c)
{
	struct bench *b = c->b;
	bool running = b->phase == PH_WARMUP || b->phase == PH_MEASURE;

	switch (b->phase) {
	case PH_SETUP:
		return setup_next(c);
	case PH_PREFILL:
		if (b->prefill_left <= 0)
			return false;
		b->prefill_left--;
		send_set(c, b->o.mode == M_MGET ?
		    spread_queue(b, (uint64_t)b->prefill_left) : c->queue, -1);
		return true;
	case PH_DRAIN:
		if (c->drain_done)
			return false;
		send_get(c, R_DRAIN, c->drain_q);
		return true;
	case PH_STOP:
		/* Blocked consumers keep listening until everything arrives. */
		if (c->role == ROLE_CONSUMER) {
			send_get(c, R_BGET, c->queue);
			return true;
		}
		return false;
	default:
		break;
	}
	if (!running)
		return false;
	switch (b->o.mode) {
	case M_PAIR:
		c->pair_next ^= 1;
		if (c->pair_next)
			send_set(c, c->queue, -1);
		else
			send_get(c, R_GET, c->queue);
		return true;
	case M_PRODUCE:
		if (b->o.rate > 0) {
			double el = (double)(mono_ns() - b->rate_t0) / 1e9;

			if ((double)b->rate_sent >= el * b->o.rate)
				return false;
			b->rate_sent++;
		}
		send_set(c, c->queue, -1);
		return true;
	case M_CONSUME:
		send_get(c, R_GET, c->queue);
		return true;
	case M_MGET:
		if (b->mget_left <= 0)
			return false;
		b->mget_left--;
		send_mget(c);
		return true;
	case M_BLOCKING:
		if (c->role == ROLE_CONSUMER) {
			send_get(c, R_BGET, c->queue);
			return true;
		}
		if (b->o.rate <= 0)
			return false;
		{
			double el = (double)(mono_ns() - b->rate_t0) / 1e9;

			if ((double)b->rate_sent >= el * b->o.rate)
				return false;
			b->rate_sent++;
			times_put(c, 2 * c->seq, mono_ns());
			send_set(c, spread_queue(b, c->seq), -1);
		}
		return true;
	case M_DELAYED:
		if (c->role == ROLE_CONSUMER) {
			send_get(c, R_BGET, c->queue);
			return true;
		}
		if (b->delayed_left <= 0)
			return false;
		{
			/* Item i (1-based) falls due at i/N of the window. */
			long i = b->o.items - b->delayed_left + 1;
			long d = (long)((int64_t)b->o.window_ms * i / b->o.items);
			uint64_t seq = c->seq;

			uint64_t due = mono_ns() + (uint64_t)d * 1000000ull;

			b->delayed_left--;
			send_set(c, spread_queue(b, seq), d);
			times_put(c, 2 * seq, due);
			if (due > b->last_due)
				b->last_due = due;
		}
		return true;
	}
	return false;
}

static unsigned
conn_depth(const struct conn *c)
{
	/* A consumer blocks in one get at a time, as a real worker does. */
	if (c->role == ROLE_CONSUMER)
		return 1;
	/* Filling and emptying are not measured: pipeline them deeply so a
	 * store that fsyncs per turn spends one fsync on many items. */
	if ((c->b->phase == PH_PREFILL || c->b->phase == PH_DRAIN) &&
	    c->b->o.depth < 64)
		return 64;
	/* The delayed producer must hand all items over early in the window,
	 * or late sends would stretch the run past its deadline. */
	if (c->b->o.mode == M_DELAYED && c->role == ROLE_PRODUCER &&
	    c->b->o.depth < 64)
		return 64;
	return (unsigned)c->b->o.depth;
}

static void
pump(struct conn *c)
{
	while (!c->b->failed && c->rcount < conn_depth(c))
		if (!issue_next(c))
			break;
}

static void
pump_all(struct bench *b)
{
	int i;

	for (i = 0; i < b->nconns && !b->failed; i++)
		pump(&b->conns[i]);
}

/* ------------------------------------------------------- reply handling */

static bool
measuring(const struct bench *b)
{
	return b->phase == PH_MEASURE;
}

/* An item arrived; hdr holds the first min(len, HDR_LEN) bytes. */
static void
got_item(struct conn *c, const char *hdr, size_t len, uint64_t now)
{
	struct bench *b = c->b;
	uint64_t tag, pid, seq, t;
	struct conn *p;

	if (!b->o.verify)
		return;
	if (len < HDR_LEN || !get_hex(hdr, 4, &tag) || tag != b->tag ||
	    !get_hex(hdr + 4, 4, &pid) || pid >= (uint64_t)b->nconns ||
	    !get_hex(hdr + 8, 8, &seq)) {
		b->foreign++;
		return;
	}
	p = &b->conns[pid];
	if (bits_test_set(&p->seen, seq)) {
		b->dups++;
		c->drain_dup = b->phase == PH_DRAIN;
		return;
	}
	b->received++;
	if (b->o.mode == M_BLOCKING && b->phase != PH_DRAIN &&
	    (measuring(b) || b->phase == PH_STOP)) {
		/* Both ends are in this process, so one clock serves. */
		t = times_get(p, 2 * seq);
		hist_add(&b->elat, now > t ? now - t : 0);
		t = times_get(p, 2 * seq + 1);
		if (t == 0) {
			/* The loop read the waiter's socket before the
			 * producer's: the item beat its own STORED. */
			b->before_ack++;
			t = now;
		}
		hist_add(&b->dlat, now > t ? now - t : 0);
	} else if (b->o.mode == M_DELAYED && b->phase != PH_DRAIN) {
		t = times_get(p, 2 * seq);
		/* The server keeps due times in whole milliseconds. */
		if (t > now + 1000000)
			b->early++;
		hist_add(&b->dlat, now > t ? now - t : 0);
	}
}

/* The request at the head of c's ring is answered. */
static void
complete(struct conn *c, bool ok, int hits, const char *line)
{
	struct bench *b = c->b;
	struct req r;
	uint64_t now = mono_ns();

	if (c->rcount == 0) {
		fail(b, "connection %d: unsolicited reply: %.80s", c->id,
		    line ? line : "(data)");
		return;
	}
	r = c->ring[c->rhead];
	c->rhead = (c->rhead + 1) % c->rcap;
	c->rcount--;

	if (!ok && r.type != R_SETUP && r.type != R_BSDEL) {
		b->errors++;
		if (b->first_error[0] == '\0' && line != NULL)
			snprintf(b->first_error, sizeof(b->first_error), "%s",
			    line);
	}
	if (r.type == R_SET && ok) {
		b->acked_total++;
		if (b->o.verify)
			bits_test_set(&c->acked, r.seq);
		if (b->o.mode == M_BLOCKING && times_get(c, 2 * r.seq + 1) == 0)
			times_put(c, 2 * r.seq + 1, now);
	}
	if (r.type == R_DRAIN) {
		bool dup = c->drain_dup;

		c->drain_dup = false;
		b->leftover += (uint64_t)hits;
		/* A miss ends a queue's drain; so does an item read twice, or a
		 * server that is no queue (memcached) would keep us here. Gets
		 * still in flight for the old queue must not skip another. */
		if ((hits == 0 || dup) && r.queue == c->drain_q) {
			c->drain_q += c->drain_stride;
			if (c->drain_q >= b->nqueues)
				c->drain_done = true;
		}
	}
	if (!measuring(b) || r.type == R_SETUP || r.type == R_DRAIN)
		return;
	if (r.type != R_BGET)
		hist_add(&b->lat, now - r.t_ns);
	b->m_ops++;
	switch (r.type) {
	case R_SET:
		b->m_sets++;
		if (b->o.mode == M_PRODUCE && ok)
			b->m_items++;
		break;
	case R_GET:
	case R_BGET:
	case R_MGET:
		b->m_gets++;
		if (r.type == R_MGET)
			b->m_reqs++;
		if (hits == 0)
			b->m_misses++;
		b->m_items += (uint64_t)hits;
		break;
	default:
		break;
	}
}

static bool
starts(const char *line, size_t len, const char *word)
{
	size_t n = strlen(word);

	return len >= n && memcmp(line, word, n) == 0 &&
	    (len == n || line[n] == ' ');
}

/* A data block of blen bytes is complete; hdr holds its start. */
static void
data_done(struct conn *c, const char *hdr, size_t n, uint64_t now)
{
	struct bench *b = c->b;

	switch (b->o.proto) {
	case P_MC:
		got_item(c, hdr, n, now);
		c->nhits++;
		break;
	case P_RESP:
		if (c->arr_left > 0) {
			/* BRPOP answers [key, value]: only the value is an item. */
			if (--c->arr_left > 0)
				break;
		}
		got_item(c, hdr, n, now);
		complete(c, true, 1, NULL);
		break;
	case P_BS:
		got_item(c, hdr, n, now);
		complete(c, true, 1, NULL);
		{
			char buf[64];
			int k = snprintf(buf, sizeof(buf), "delete %" PRIu64 "\r\n",
			    c->bs_id);

			ring_push(c, R_BSDEL, -1);
			send_bytes(c, buf, (size_t)k);
		}
		break;
	}
}

static bool
parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || v > (1ull << 31))
		return false;
	*out = (size_t)v;
	return true;
}

/* One reply line (without CRLF, NUL-terminated). */
static void
line_done(struct conn *c, char *line, size_t len)
{
	struct bench *b = c->b;

	switch (b->o.proto) {
	case P_MC:
		if (starts(line, len, "VALUE")) {
			/* VALUE <key> <flags> <bytes> [<cas>] */
			const char *p = line + 6;
			int field = 0;

			while (field < 2 && (p = strchr(p, ' ')) != NULL) {
				p++;
				field++;
			}
			if (p == NULL || !parse_size(p, &c->blen)) {
				fail(b, "bad VALUE line: %.80s", line);
				return;
			}
			c->need = c->blen + 2;
			c->in_data = true;
		} else if (starts(line, len, "END")) {
			complete(c, true, c->nhits, line);
			c->nhits = 0;
		} else if (starts(line, len, "STORED") ||
		    starts(line, len, "DELETED") ||
		    starts(line, len, "NOT_FOUND") || starts(line, len, "OK"))
			complete(c, true, 0, line);
		else
			complete(c, false, 0, line);
		return;
	case P_RESP:
		if (len == 0) {
			fail(b, "empty RESP line");
			return;
		}
		switch (line[0]) {
		case '+':
		case ':':
			complete(c, true, 0, line);
			return;
		case '-':
			complete(c, false, 0, line);
			return;
		case '*':
			if (atol(line + 1) <= 0)
				complete(c, true, 0, line);
			else
				c->arr_left = (int)atol(line + 1);
			return;
		case '$':
			if (line[1] == '-') {
				complete(c, true, 0, line);
				return;
			}
			if (!parse_size(line + 1, &c->blen)) {
				fail(b, "bad RESP bulk length: %.80s", line);
				return;
			}
			c->need = c->blen + 2;
			c->in_data = true;
			return;
		default:
			fail(b, "bad RESP reply: %.80s", line);
			return;
		}
	case P_BS:
		if (starts(line, len, "RESERVED")) {
			/* RESERVED <id> <bytes> */
			char *end;

			c->bs_id = strtoull(line + 9, &end, 10);
			if (*end != ' ' || !parse_size(end + 1, &c->blen)) {
				fail(b, "bad RESERVED line: %.80s", line);
				return;
			}
			c->need = c->blen + 2;
			c->in_data = true;
		} else if (starts(line, len, "INSERTED") ||
		    starts(line, len, "USING") || starts(line, len, "WATCHING") ||
		    starts(line, len, "DELETED") ||
		    starts(line, len, "TIMED_OUT") ||
		    starts(line, len, "DEADLINE_SOON"))
			complete(c, true, 0, line);
		else
			complete(c, false, 0, line);
		return;
	}
}

static void
on_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct bench *b = c->b;
	struct evbuffer *in = bufferevent_get_input(bev);
	char line[MAX_LINE + 1];

	while (!b->failed) {
		if (c->in_data) {
			char hdr[HDR_LEN];
			size_t h = c->blen < HDR_LEN ? c->blen : HDR_LEN;

			if (evbuffer_get_length(in) < c->need)
				break;
			evbuffer_copyout(in, hdr, h);
			evbuffer_drain(in, c->need);
			c->in_data = false;
			data_done(c, hdr, c->blen, mono_ns());
		} else {
			size_t eol_len;
			struct evbuffer_ptr pos = evbuffer_search_eol(in, NULL,
			    &eol_len, EVBUFFER_EOL_CRLF);

			if (pos.pos < 0) {
				if (evbuffer_get_length(in) > MAX_LINE)
					fail(b, "reply line too long");
				break;
			}
			if ((size_t)pos.pos > MAX_LINE) {
				fail(b, "reply line too long");
				break;
			}
			evbuffer_remove(in, line, (size_t)pos.pos);
			line[pos.pos] = '\0';
			evbuffer_drain(in, eol_len);
			line_done(c, line, (size_t)pos.pos);
		}
	}
	if (b->failed)
		return;
	check_progress(b);
	pump(c);
}

/* -------------------------------------------------------------- phases */

/* True when no consumer has anything but its blocking get in flight: a
 * beanstalk job whose delete is unanswered would be released again if we
 * disconnected now. */
static bool
consumers_idle(const struct bench *b)
{
	int i;

	for (i = 0; i < b->nconns; i++) {
		const struct conn *c = &b->conns[i];

		if (c->role == ROLE_CONSUMER && c->rcount > 0 &&
		    (c->rcount > 1 || c->ring[c->rhead].type != R_BGET))
			return false;
	}
	return true;
}

/* Move on when the current phase's work is finished. */
static void
check_progress(struct bench *b)
{
	int i, busy = 0;

	for (i = 0; i < b->nconns; i++)
		busy += b->conns[i].rcount > 0;
	switch (b->phase) {
	case PH_SETUP:
		if (busy == 0) {
			for (i = 0; i < b->nconns; i++) {
				struct conn *c = &b->conns[i];

				if (b->o.proto == P_BS ? c->setup_step < 3 :
				    c->id == 0 && b->o.clean &&
				    c->setup_step < (unsigned)b->nqueues)
					return;
			}
			enter_phase(b, PH_PREFILL);
		}
		break;
	case PH_PREFILL:
		if (b->prefill_left <= 0 && busy == 0)
			enter_phase(b, b->o.warmup > 0 ? PH_WARMUP : PH_MEASURE);
		break;
	case PH_MEASURE:
		/* Fixed budgets end the measurement when spent. */
		if (b->o.mode == M_MGET && b->mget_left <= 0 && busy == 0)
			enter_phase(b, PH_STOP);
		else if (b->o.mode == M_CONSUME && b->o.verify &&
		    b->received >= b->prefill_total && b->prefill_total > 0)
			enter_phase(b, PH_STOP);
		else if (b->o.mode == M_DELAYED && b->delayed_left <= 0 &&
		    b->received + b->dups >= b->acked_total &&
		    b->conns[b->nconns - 1].rcount == 0)
			enter_phase(b, PH_STOP);
		break;
	case PH_STOP:
		if (b->o.mode == M_BLOCKING || b->o.mode == M_DELAYED) {
			/* Delayed items not yet due are invisible to the drain:
			 * wait for the last due time before giving up on them. */
			uint64_t from = b->last_due > b->t_stop ? b->last_due :
			    b->t_stop;

			if ((b->received >= b->acked_total &&
			    b->conns[b->nconns - 1].rcount == 0 &&
			    consumers_idle(b)) ||
			    mono_ns() > from + GRACE_NS +
			    (uint64_t)b->o.timeout_ms * 1000000ull)
				enter_phase(b, PH_DRAIN);
		} else if (busy == 0)
			enter_phase(b, PH_DRAIN);
		break;
	case PH_DRAIN:
		for (i = 0; i < b->nconns; i++)
			if (!b->conns[i].drain_done || b->conns[i].rcount > 0)
				return;
		enter_phase(b, PH_DONE);
		break;
	default:
		break;
	}
}

static void
on_phase_timer(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;

	if (b->phase == PH_WARMUP)
		enter_phase(b, PH_MEASURE);
	else if (b->phase == PH_DRAIN) {
		b->drain_timeout = true;
		enter_phase(b, PH_DONE);
	}
	else if (b->phase == PH_MEASURE)
		enter_phase(b, PH_STOP);
	else if (b->phase == PH_STOP) {
		struct timeval tv = { 0, 100000 };

		/* Poll the grace deadline: blocking gets may sit unanswered. */
		check_progress(b);
		if (b->phase == PH_STOP)
			evtimer_add(b->phase_ev, &tv);
	}
}

static void
arm_phase_timer(struct bench *b, double seconds)
{
	struct timeval tv;

	tv.tv_sec = (time_t)seconds;
	tv.tv_usec = (suseconds_t)((seconds - (double)tv.tv_sec) * 1e6);
	evtimer_add(b->phase_ev, &tv);
}

static double
server_cpu(const struct bench *b)
{
	char path[64], buf[1024], *p;
	unsigned long ut, st;
	FILE *f;
	size_t n;

	if (b->o.server_pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/stat", b->o.server_pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Fields after the parenthesised command name; utime is field 14. */
	if ((p = strrchr(buf, ')')) == NULL)
		return -1;
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
	    &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void
close_consumers(struct bench *b)
{
	int i;

	/* Cancel blocked gets by disconnecting; nothing is in flight now. */
	for (i = 0; i < b->nconns; i++) {
		struct conn *c = &b->conns[i];

		if (c->role == ROLE_CONSUMER && c->bev != NULL) {
			bufferevent_free(c->bev);
			c->bev = NULL;
			c->rcount = 0;
			c->drain_done = true;
		}
	}
}

static void
enter_phase(struct bench *b, enum phase ph)
{
	int i;

	b->phase = ph;
	switch (ph) {
	case PH_SETUP:
		break;
	case PH_PREFILL:
		if (b->o.mode == M_CONSUME)
			b->prefill_left = b->o.items;
		else if (b->o.mode == M_MGET)
			b->prefill_left = b->o.items * b->nqueues;
		else
			b->prefill_left = 0;
		b->prefill_total = (uint64_t)b->prefill_left;
		break;
	case PH_WARMUP:
		b->rate_t0 = mono_ns();
		b->rate_sent = 0;
		arm_phase_timer(b, b->o.warmup);
		break;
	case PH_MEASURE:
		b->t_measure = mono_ns();
		if (b->o.rate > 0 && b->rate_t0 == 0)
			b->rate_t0 = b->t_measure;
		getrusage(RUSAGE_SELF, &b->ru0);
		b->srv_cpu0 = server_cpu(b);
		if (b->o.mode == M_MGET)
			b->mget_left = b->o.items;
		if (b->o.mode == M_DELAYED) {
			b->delayed_left = b->o.items;
			/* Run until all are in, bounded by the window plus grace. */
			arm_phase_timer(b, (double)b->o.window_ms / 1000.0 +
			    (double)GRACE_NS / 1e9 + (double)b->o.timeout_ms /
			    1000.0);
		} else
			arm_phase_timer(b, b->o.seconds);
		break;
	case PH_STOP:
		b->t_measure_end = mono_ns();
		b->t_stop = b->t_measure_end;
		evtimer_del(b->phase_ev);
		if (b->o.mode == M_BLOCKING || b->o.mode == M_DELAYED)
			arm_phase_timer(b, 0.1);
		break;
	case PH_DRAIN:
		evtimer_del(b->phase_ev);
		if (b->o.mode == M_BLOCKING || b->o.mode == M_DELAYED) {
			/* Consumers are done; the producer alone empties every
			 * queue, one after the other. */
			struct conn *p = &b->conns[b->nconns - 1];

			close_consumers(b);
			p->drain_q = 0;
			p->drain_stride = 1;
			p->drain_done = false;
		}
		arm_phase_timer(b, 60);
		if (!b->o.verify)
			for (i = 0; i < b->nconns; i++)
				b->conns[i].drain_done = true;
		break;
	case PH_DONE:
		event_base_loopexit(b->base, NULL);
		return;
	default:
		break;
	}
	pump_all(b);
	if (!b->failed && b->phase == ph)
		check_progress(b);
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	struct bench *b = c->b;

	if (what & BEV_EVENT_CONNECTED) {
		int one = 1;

		setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one));
		if (++b->nconnected == b->nconns) {
			b->phase = PH_SETUP;
			enter_phase(b, PH_SETUP);
		}
		return;
	}
	if (what & BEV_EVENT_ERROR)
		fail(b, "connection %d to %s: %s", c->id, b->o.server,
		    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	else if (what & BEV_EVENT_EOF)
		fail(b, "connection %d: server closed the connection", c->id);
}

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;
	int i;

	/* Rate-limited producers get fresh tokens every millisecond. */
	for (i = 0; i < b->nconns; i++)
		if (b->conns[i].role != ROLE_CONSUMER)
			pump(&b->conns[i]);
}

static void
on_progress(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;

	if (b->phase == PH_MEASURE) {
		fprintf(stderr, "\r  %-8s %6.1fs %12" PRIu64 " items/s %12" PRIu64
		    " ops/s   ", phase_names[b->phase],
		    (double)(mono_ns() - b->t_measure) / 1e9,
		    b->m_items - b->prog_items, b->m_ops - b->prog_ops);
		b->prog_items = b->m_items;
		b->prog_ops = b->m_ops;
	} else
		fprintf(stderr, "\r  %-8s %-60s", phase_names[b->phase], "");
	fflush(stderr);
}

static void
on_signal(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;

	b->interrupted = true;
	if (b->phase == PH_WARMUP || b->phase == PH_MEASURE)
		enter_phase(b, PH_STOP);
	else
		fail(b, "interrupted");
}

/* ---------------------------------------------------------------- setup */

static int
resolve(struct bench *b)
{
	char host[256];
	const char *colon, *port = "22133";
	struct addrinfo hints, *res;
	int e;

	snprintf(host, sizeof(host), "%s", b->o.server);
	if ((colon = strrchr(b->o.server, ':')) != NULL) {
		host[colon - b->o.server] = '\0';
		port = colon + 1;
	}
	if (host[0] == '[') {
		/* [v6addr]:port */
		memmove(host, host + 1, strlen(host));
		host[strcspn(host, "]")] = '\0';
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if ((e = getaddrinfo(host[0] ? host : "127.0.0.1", port, &hints,
	    &res)) != 0) {
		fprintf(stderr, "saker bench: %s: %s\n", b->o.server,
		    gai_strerror(e));
		return -1;
	}
	memcpy(&b->addr, res->ai_addr, res->ai_addrlen);
	b->addrlen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static int
setup_conns(struct bench *b)
{
	int i;

	b->conns = calloc((size_t)b->nconns, sizeof(*b->conns));
	if (b->conns == NULL)
		return -1;
	for (i = 0; i < b->nconns; i++) {
		struct conn *c = &b->conns[i];

		c->b = b;
		c->id = i;
		c->rcap = (unsigned)b->o.depth + 8;
		c->ring = xrealloc(NULL, c->rcap * sizeof(*c->ring));
		c->drain_q = i;
		c->drain_stride = b->nconns;
		c->drain_done = i >= b->nqueues;
		c->payload = xrealloc(NULL, (size_t)b->o.size);
		memcpy(c->payload, b->pad, (size_t)b->o.size);
		if (b->o.mode == M_BLOCKING || b->o.mode == M_DELAYED) {
			c->role = i == b->nconns - 1 ? ROLE_PRODUCER :
			    ROLE_CONSUMER;
			c->queue = c->role == ROLE_CONSUMER ? i % b->nqueues : 0;
		} else {
			c->role = ROLE_WORKER;
			c->queue = i % b->nqueues;
		}
		c->bev = bufferevent_socket_new(b->base, -1,
		    BEV_OPT_CLOSE_ON_FREE);
		if (c->bev == NULL)
			return -1;
		bufferevent_setcb(c->bev, on_read, NULL, on_event, c);
		bufferevent_enable(c->bev, EV_READ | EV_WRITE);
		if (bufferevent_socket_connect(c->bev,
		    (struct sockaddr *)&b->addr, (int)b->addrlen) != 0) {
			fprintf(stderr, "saker bench: connect %s: %s\n",
			    b->o.server, strerror(errno));
			return -1;
		}
	}
	return 0;
}

static void
teardown(struct bench *b)
{
	int i;

	for (i = 0; b->conns != NULL && i < b->nconns; i++) {
		struct conn *c = &b->conns[i];

		if (c->bev != NULL)
			bufferevent_free(c->bev);
		free(c->ring);
		free(c->acked.w);
		free(c->seen.w);
		free(c->t_ns);
		free(c->out);
		free(c->payload);
	}
	free(b->conns);
	for (i = 0; b->qnames != NULL && i < b->nqueues; i++)
		free(b->qnames[i]);
	free(b->qnames);
	free(b->qlens);
	free(b->pad);
	if (b->phase_ev != NULL)
		event_free(b->phase_ev);
	if (b->tick_ev != NULL)
		event_free(b->tick_ev);
	if (b->progress_ev != NULL)
		event_free(b->progress_ev);
	if (b->sig_ev != NULL)
		event_free(b->sig_ev);
	if (b->base != NULL)
		event_base_free(b->base);
}

/* ----------------------------------------------------------- reporting */

static double
tv_s(const struct timeval *tv)
{
	return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

static void
lost_counts(const struct bench *b, uint64_t *lost, uint64_t *unacked)
{
	int i;
	size_t w;

	*lost = *unacked = 0;
	for (i = 0; i < b->nconns; i++) {
		const struct conn *c = &b->conns[i];
		size_t n = c->acked.nw > c->seen.nw ? c->acked.nw : c->seen.nw;

		for (w = 0; w < n; w++) {
			uint64_t a = w < c->acked.nw ? c->acked.w[w] : 0;
			uint64_t s = w < c->seen.nw ? c->seen.w[w] : 0;

			*lost += (uint64_t)__builtin_popcountll(a & ~s);
			*unacked += (uint64_t)__builtin_popcountll(s & ~a);
		}
	}
}

static void
print_hist(const struct hist *h, const char *pre, bool json)
{
	static const struct { const char *name; uint64_t ppm; } qs[] = {
		{ "p50", 500000 }, { "p90", 900000 }, { "p99", 990000 },
		{ "p999", 999000 }
	};
	size_t i;

	for (i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		double us = (double)hist_quantile(h, qs[i].ppm) / 1000.0;

		if (json)
			printf(",\"%s_%s_us\":%.1f", pre, qs[i].name, us);
		else
			printf(" %s=%.1f", qs[i].name, us);
	}
	if (json)
		printf(",\"%s_max_us\":%.1f,\"%s_mean_us\":%.1f,\"%s_count\":%"
		    PRIu64, pre, (double)h->max / 1000.0, pre,
		    h->n ? (double)h->sum / (double)h->n / 1000.0 : 0.0, pre,
		    h->n);
	else
		printf(" max=%.1f mean=%.1f (us, n=%" PRIu64 ")\n",
		    (double)h->max / 1000.0,
		    h->n ? (double)h->sum / (double)h->n / 1000.0 : 0.0, h->n);
}

static int
report(struct bench *b)
{
	struct rusage ru;
	double secs = (double)(b->t_measure_end - b->t_measure) / 1e9;
	double cpu, scpu1, scpu = -1;
	uint64_t lost = 0, unacked = 0;
	const struct opts *o = &b->o;
	bool bad;

	getrusage(RUSAGE_SELF, &ru);
	cpu = tv_s(&ru.ru_utime) + tv_s(&ru.ru_stime) -
	    tv_s(&b->ru0.ru_utime) - tv_s(&b->ru0.ru_stime);
	scpu1 = server_cpu(b);
	if (scpu1 >= 0 && b->srv_cpu0 >= 0)
		scpu = scpu1 - b->srv_cpu0;
	if (secs <= 0)
		secs = 1e-9;
	if (o->verify)
		lost_counts(b, &lost, &unacked);
	bad = o->verify && (lost > 0 || b->dups > 0);

	if (o->json) {
		printf("{\"mode\":\"%s\",\"protocol\":\"%s\",\"server\":\"%s\","
		    "\"conns\":%d,\"depth\":%d,\"size\":%d,\"queues\":%d",
		    mode_names[o->mode], proto_names[o->proto], o->server,
		    o->conns, o->depth, o->size, b->nqueues);
		if (o->mode == M_MGET)
			printf(",\"keys\":%d", b->nqueues);
		if (o->mode == M_BLOCKING || o->mode == M_PRODUCE)
			printf(",\"rate\":%.0f", o->rate);
		printf(",\"seconds\":%.3f,\"ops\":%" PRIu64 ",\"ops_per_s\":%.0f,"
		    "\"items\":%" PRIu64 ",\"items_per_s\":%.0f,\"sets\":%"
		    PRIu64 ",\"gets\":%" PRIu64 ",\"misses\":%" PRIu64,
		    secs, b->m_ops, (double)b->m_ops / secs, b->m_items,
		    (double)b->m_items / secs, b->m_sets, b->m_gets,
		    b->m_misses);
		if (o->mode == M_MGET)
			printf(",\"requests\":%" PRIu64 ",\"requests_per_s\":%.0f",
			    b->m_reqs, (double)b->m_reqs / secs);
		print_hist(&b->lat, "lat", true);
		if (o->mode == M_BLOCKING || o->mode == M_DELAYED)
			print_hist(&b->dlat, o->mode == M_DELAYED ? "late" :
			    "deliv", true);
		if (o->mode == M_BLOCKING)
			print_hist(&b->elat, "e2e", true);
		printf(",\"errors\":%" PRIu64 ",\"verified\":%s",
		    b->errors, o->verify && !b->drain_timeout ? "true" : "false");
		if (o->verify)
			printf(",\"in\":%" PRIu64 ",\"out\":%" PRIu64
			    ",\"leftover\":%" PRIu64 ",\"lost\":%" PRIu64
			    ",\"duplicates\":%" PRIu64 ",\"unacked_seen\":%" PRIu64
			    ",\"foreign\":%" PRIu64, b->acked_total,
			    b->received, b->leftover, lost, b->dups, unacked,
			    b->foreign);
		if (o->mode == M_DELAYED)
			printf(",\"early\":%" PRIu64, b->early);
		printf(",\"client_cpu_s\":%.3f", cpu);
		if (scpu >= 0)
			printf(",\"server_cpu_s\":%.3f,\"server_cpu_pct\":%.2f",
			    scpu, 100.0 * scpu / secs);
		printf(",\"interrupted\":%s}\n",
		    b->interrupted ? "true" : "false");
		return bad ? 2 : 0;
	}
	printf("saker bench %s: %s %s, %d conns, depth %d, %d-byte items, "
	    "%d queue%s\n", mode_names[o->mode], proto_names[o->proto],
	    o->server, o->conns, o->depth, o->size, b->nqueues,
	    b->nqueues == 1 ? "" : "s");
	printf("  measured %.2f s: %" PRIu64 " items (%.0f items/s), %" PRIu64
	    " ops (%.0f ops/s), %" PRIu64 " empty gets\n", secs, b->m_items,
	    (double)b->m_items / secs, b->m_ops, (double)b->m_ops / secs,
	    b->m_misses);
	if (o->mode == M_MGET)
		printf("  %" PRIu64 " multi-gets of %d keys: %.0f requests/s\n",
		    b->m_reqs, b->nqueues, (double)b->m_reqs / secs);
	printf("  request latency:");
	print_hist(&b->lat, "lat", false);
	if (o->mode == M_BLOCKING) {
		printf("  delivery latency (STORED to receipt):");
		print_hist(&b->dlat, "deliv", false);
		printf("  delivery latency (set sent to receipt):");
		print_hist(&b->elat, "e2e", false);
		if (b->before_ack > 0)
			printf("  %" PRIu64 " items arrived before their STORED "
			    "was read (counted as 0)\n", b->before_ack);
	}
	if (o->mode == M_DELAYED) {
		printf("  promotion lateness (receipt - due):");
		print_hist(&b->dlat, "late", false);
		printf("  %" PRIu64 " items arrived more than 1 ms early\n",
		    b->early);
	}
	if (b->errors > 0)
		printf("  %" PRIu64 " error replies, first: %s\n", b->errors,
		    b->first_error);
	if (o->verify)
		printf("  verify: in %" PRIu64 ", out %" PRIu64 " (%" PRIu64
		    " left after the run), lost %" PRIu64 ", duplicates %"
		    PRIu64 ", unacknowledged %" PRIu64 ", foreign %" PRIu64
		    "  => %s\n", b->acked_total, b->received, b->leftover,
		    lost, b->dups, unacked, b->foreign, bad ? "FAILED" : "ok");
	else
		printf("  verify: off\n");
	if (b->drain_timeout)
		printf("  the drain after the run timed out: loss counts are "
		    "upper bounds\n");
	printf("  client cpu %.2f s", cpu);
	if (scpu >= 0)
		printf(", server cpu %.3f s (%.2f%% of one core)", scpu,
		    100.0 * scpu / secs);
	printf("\n");
	return bad ? 2 : 0;
}

/* ------------------------------------------------------------- options */

static void
usage(FILE *f)
{
	fprintf(f,
"usage: saker bench [MODE] [options]\n"
"modes: pair (default), produce, consume, mget, blocking, delayed\n"
"  -s, --server HOST:PORT   server (default 127.0.0.1:22133)\n"
"      --protocol P         memcache (default), resp (Redis), beanstalk\n"
"  -m, --mode MODE          the workload (or give it as the first argument)\n"
"  -c, --conns N            connections (consumers in blocking/delayed) [4]\n"
"  -d, --depth D            requests in flight per connection [1]\n"
"      --size B             item size in bytes, >= 16 when verifying [64]\n"
"  -q, --queues Q           queues, connections spread over them [1]\n"
"  -t, --seconds S          measured duration [10]\n"
"      --warmup S           unmeasured run before measuring [0]\n"
"  -k, --keys K             mget: keys per request [100]\n"
"      --items N            consume: items prefilled; mget: requests (and\n"
"                           items per queue); delayed: items [see mode]\n"
"      --rate R             produce/blocking: items/s in total [blocking 1000]\n"
"      --window MS          delayed: items fall due over this window [5000]\n"
"      --timeout MS         blocking get timeout (get q/t=MS) [1000]\n"
"      --queue-prefix P     queue names are P0, P1, ... [bench]\n"
"      --server-pid PID     also report that process's CPU use\n"
"      --no-verify          do not check items (needed for memcached)\n"
"      --no-clean           do not delete the queues first\n"
"      --json               one JSON object on stdout\n"
"      --quiet              no progress display\n");
}

static int
parse_mode(const char *s, enum mode *m)
{
	size_t i;

	for (i = 0; i < sizeof(mode_names) / sizeof(mode_names[0]); i++)
		if (strcmp(s, mode_names[i]) == 0) {
			*m = (enum mode)i;
			return 0;
		}
	return -1;
}

static bool
num(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

static int
parse_opts(struct opts *o, int argc, char **argv)
{
	enum { O_PROTO = 256, O_SIZE, O_WARMUP, O_ITEMS, O_RATE, O_WINDOW,
	    O_TIMEOUT, O_PREFIX, O_PID, O_NOVERIFY, O_NOCLEAN, O_JSON,
	    O_QUIET };
	static const struct option lo[] = {
		{ "server", required_argument, NULL, 's' },
		{ "protocol", required_argument, NULL, O_PROTO },
		{ "mode", required_argument, NULL, 'm' },
		{ "conns", required_argument, NULL, 'c' },
		{ "depth", required_argument, NULL, 'd' },
		{ "size", required_argument, NULL, O_SIZE },
		{ "queues", required_argument, NULL, 'q' },
		{ "seconds", required_argument, NULL, 't' },
		{ "warmup", required_argument, NULL, O_WARMUP },
		{ "keys", required_argument, NULL, 'k' },
		{ "items", required_argument, NULL, O_ITEMS },
		{ "rate", required_argument, NULL, O_RATE },
		{ "window", required_argument, NULL, O_WINDOW },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "queue-prefix", required_argument, NULL, O_PREFIX },
		{ "server-pid", required_argument, NULL, O_PID },
		{ "no-verify", no_argument, NULL, O_NOVERIFY },
		{ "no-clean", no_argument, NULL, O_NOCLEAN },
		{ "json", no_argument, NULL, O_JSON },
		{ "quiet", no_argument, NULL, O_QUIET },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int ch;
	double v;
	bool rate_set = false;

	memset(o, 0, sizeof(*o));
	o->server = "127.0.0.1:22133";
	o->proto = P_MC;
	o->mode = M_PAIR;
	o->conns = 4;
	o->depth = 1;
	o->size = 64;
	o->queues = 1;
	o->keys = 100;
	o->seconds = 10;
	o->window_ms = 5000;
	o->timeout_ms = 1000;
	o->prefix = "bench";
	o->verify = o->clean = true;

	if (argc > 1 && argv[1][0] != '-') {
		if (parse_mode(argv[1], &o->mode) != 0) {
			fprintf(stderr, "saker bench: unknown mode '%s'\n",
			    argv[1]);
			return -1;
		}
		argv++;
		argc--;
	}
#ifdef __GLIBC__
	optind = 0;
#else
	optind = 1;
#endif
	while ((ch = getopt_long(argc, argv, "s:m:c:d:q:t:k:h", lo, NULL)) !=
	    -1) {
		switch (ch) {
		case 's': o->server = optarg; break;
		case O_PROTO:
			if (strcmp(optarg, "memcache") == 0)
				o->proto = P_MC;
			else if (strcmp(optarg, "resp") == 0)
				o->proto = P_RESP;
			else if (strcmp(optarg, "beanstalk") == 0)
				o->proto = P_BS;
			else
				goto bad;
			break;
		case 'm':
			if (parse_mode(optarg, &o->mode) != 0)
				goto bad;
			break;
		case 'c':
			if (!num(optarg, 1, MAX_CONNS - 1, &v)) goto bad;
			o->conns = (int)v;
			break;
		case 'd':
			if (!num(optarg, 1, 100000, &v)) goto bad;
			o->depth = (int)v;
			break;
		case O_SIZE:
			if (!num(optarg, 1, 64 << 20, &v)) goto bad;
			o->size = (int)v;
			break;
		case 'q':
			if (!num(optarg, 1, 100000, &v)) goto bad;
			o->queues = (int)v;
			break;
		case 't':
			if (!num(optarg, 0.001, 1e6, &o->seconds)) goto bad;
			break;
		case O_WARMUP:
			if (!num(optarg, 0, 1e6, &o->warmup)) goto bad;
			break;
		case 'k':
			if (!num(optarg, 1, MAX_KEYS, &v)) goto bad;
			o->keys = (int)v;
			break;
		case O_ITEMS:
			if (!num(optarg, 1, 1e10, &v)) goto bad;
			o->items = (long)v;
			o->items_set = true;
			break;
		case O_RATE:
			if (!num(optarg, 0, 1e9, &o->rate)) goto bad;
			rate_set = true;
			break;
		case O_WINDOW:
			if (!num(optarg, 1, 1e9, &v)) goto bad;
			o->window_ms = (long)v;
			break;
		case O_TIMEOUT:
			if (!num(optarg, 1, 1e9, &v)) goto bad;
			o->timeout_ms = (long)v;
			break;
		case O_PREFIX: o->prefix = optarg; break;
		case O_PID:
			if (!num(optarg, 1, 1e9, &v)) goto bad;
			o->server_pid = (long)v;
			break;
		case O_NOVERIFY: o->verify = false; break;
		case O_NOCLEAN: o->clean = false; break;
		case O_JSON: o->json = true; break;
		case O_QUIET: o->quiet = true; break;
		case 'h': usage(stdout); return 1;
		default: usage(stderr); return -1;
		}
		continue;
bad:
		fprintf(stderr, "saker bench: bad value for option: %s\n",
		    optarg);
		return -1;
	}
	if (optind != argc) {
		fprintf(stderr, "saker bench: unexpected argument '%s'\n",
		    argv[optind]);
		return -1;
	}
	if (!o->items_set)
		o->items = o->mode == M_CONSUME ? 100000 :
		    o->mode == M_MGET ? 5000 : 1000;
	if (o->mode == M_BLOCKING && !rate_set)
		o->rate = 1000;
	if (o->verify && o->size < HDR_LEN) {
		fprintf(stderr, "saker bench: --size must be at least %d to "
		    "verify items (or use --no-verify)\n", HDR_LEN);
		return -1;
	}
	if (o->proto == P_RESP && (o->mode == M_MGET || o->mode == M_DELAYED)) {
		fprintf(stderr, "saker bench: mode %s needs the memcache "
		    "protocol\n", mode_names[o->mode]);
		return -1;
	}
	if (o->proto == P_BS && o->mode != M_PAIR && o->mode != M_PRODUCE &&
	    o->mode != M_CONSUME && o->mode != M_BLOCKING) {
		fprintf(stderr, "saker bench: mode %s is not available with "
		    "beanstalk\n", mode_names[o->mode]);
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- main */

int
bench_main(int argc, char **argv)
{
	struct bench *b;
	struct timeval ms1 = { 0, 1000 }, s1 = { 1, 0 };
	int rc, i;

	if ((b = calloc(1, sizeof(*b))) == NULL)
		return 1;
	if ((rc = parse_opts(&b->o, argc, argv)) != 0) {
		free(b);
		return rc < 0 ? 1 : 0;
	}
	signal(SIGPIPE, SIG_IGN);
	if (resolve(b) != 0) {
		free(b);
		return 1;
	}
	b->tag = (uint16_t)((uint64_t)time(NULL) ^ (uint64_t)getpid() ^
	    mono_ns());
	b->nconns = b->o.conns;
	if (b->o.mode == M_BLOCKING || b->o.mode == M_DELAYED)
		b->nconns++;            /* the producer */
	if (b->o.mode == M_MGET)
		b->nqueues = b->o.keys;
	else if (b->o.proto == P_BS && b->o.mode == M_BLOCKING)
		b->nqueues = 1;         /* a beanstalk producer uses one tube */
	else if (b->o.mode == M_BLOCKING || b->o.mode == M_DELAYED)
		b->nqueues = b->o.queues < b->o.conns ? b->o.queues :
		    b->o.conns;
	else
		b->nqueues = b->o.queues < b->nconns ? b->o.queues : b->nconns;
	b->qnames = calloc((size_t)b->nqueues, sizeof(*b->qnames));
	b->qlens = calloc((size_t)b->nqueues, sizeof(*b->qlens));
	b->pad = malloc((size_t)b->o.size);
	b->base = event_base_new();
	if (b->qnames == NULL || b->qlens == NULL || b->pad == NULL ||
	    b->base == NULL) {
		fprintf(stderr, "saker bench: out of memory\n");
		teardown(b);
		free(b);
		return 1;
	}
	memset(b->pad, 'x', (size_t)b->o.size);
	for (i = 0; i < b->nqueues; i++) {
		char name[300];

		snprintf(name, sizeof(name), "%s%d", b->o.prefix, i);
		b->qnames[i] = strdup(name);
		if (b->qnames[i] == NULL) {
			teardown(b);
			free(b);
			return 1;
		}
		b->qlens[i] = strlen(name);
	}
	b->phase_ev = evtimer_new(b->base, on_phase_timer, b);
	b->sig_ev = evsignal_new(b->base, SIGINT, on_signal, b);
	evsignal_add(b->sig_ev, NULL);
	if (b->o.rate > 0) {
		b->tick_ev = event_new(b->base, -1, EV_PERSIST, on_tick, b);
		evtimer_add(b->tick_ev, &ms1);
	}
	if (!b->o.quiet && isatty(STDERR_FILENO)) {
		b->progress_ev = event_new(b->base, -1, EV_PERSIST, on_progress,
		    b);
		evtimer_add(b->progress_ev, &s1);
	}
	b->t_start = mono_ns();
	if (setup_conns(b) != 0) {
		teardown(b);
		free(b);
		return 1;
	}
	event_base_dispatch(b->base);
	if (b->progress_ev != NULL)
		fprintf(stderr, "\r%-78s\r", "");
	if (b->failed) {
		fprintf(stderr, "saker bench: %s (during %s)\n", b->errmsg,
		    phase_names[b->phase]);
		rc = 1;
	} else
		rc = report(b);
	teardown(b);
	free(b);
	return rc;
}
