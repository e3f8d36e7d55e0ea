/*
 * bench_int.h -- what the parts of `saker bench` share: constants and the
 * run's state (types only; each part's functions are in its own header).
 *
 * The parts call one way, from the top down (check_layers.sh sees it
 * through the headers each includes):
 *   bench.c         the phases and main
 *   bench_reply.c   reading replies; tells bench.c of progress through
 *                   b->progress, a callback, never by a call
 *   bench_load.c    what each connection sends next
 *   bench_wire.c    requests onto the wire, and writing them out
 *   bench_report.c  the result (uses bench_opts.h's name tables)
 *   bench_opts.c    the command line
 *   bench_util.c    failure, bit sets, histograms, the server's CPU
 */
#ifndef SAKER_BENCH_INT_H
#define SAKER_BENCH_INT_H

#include <sys/types.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

/* ------------------------------------------------------------ constants */

#define HDR_LEN       16        /* payload header: tag(4) producer(4) seq(8), hex */
#define MAX_LINE      1024      /* longest reply line we accept */
#define MAX_CONNS     65535     /* producer id must fit four hex digits */
#define MAX_KEYS      128       /* docs/protocol.md, "Multi-get": most keys in one get */
#define GRACE_NS      (2000ull * 1000 * 1000)
/* --resend: sets not acknowledged are sent again, oldest first, once the
 * connection's backoff has passed since its last refusal: none after a
 * set was stored (a full queue takes them as fast as it frees room);
 * after a refusal RESEND_MIN_NS, or twice the last wait when no set was
 * stored since, up to RESEND_MAX_NS (an outage must not turn into a flood
 * of doomed sets; the connection's new sets probe it meanwhile).  Only a
 * set sent after the last refusal moves the backoff: the rest of a burst
 * already in flight is the same round.  The stop waits at most
 * RESEND_STOP_NS for the last ones to be acknowledged. */
#define RESEND_MIN_NS  (100ull * 1000 * 1000)
#define RESEND_MAX_NS  (2000ull * 1000 * 1000)
#define RESEND_STOP_NS (120ull * 1000 * 1000 * 1000)

/* HDR-style log-linear histogram in nanoseconds: 128 linear sub-buckets per
 * power of two gives < 0.8% error from 256 ns up to 2^38 ns (~275 s). */
#define HIST_SUB_BITS 7
#define HIST_SUB      (1u << HIST_SUB_BITS)
#define HIST_SHIFTS   31
#define HIST_BUCKETS  (2 * HIST_SUB + HIST_SHIFTS * HIST_SUB)

enum mode { M_PAIR, M_PRODUCE, M_CONSUME, M_MGET, M_BLOCKING, M_DELAYED,
    M_RETRY };
enum proto { P_MC, P_RESP, P_BS };
enum phase {
	PH_CONNECT, PH_SETUP, PH_PREFILL, PH_WARMUP, PH_MEASURE, PH_STOP,
	PH_DRAIN, PH_DONE
};
enum rtype {
	R_SETUP,        /* clean-up and beanstalk tube selection: reply ignored */
	R_FLUSH,        /* mget --fill empty: create a queue empty (flush) */
	R_SET,          /* enqueue one item (set / LPUSH / put) */
	R_GET,          /* non-blocking dequeue (get / RPOP / reserve-with-timeout 0) */
	R_BGET,         /* blocking dequeue (get q/t= / BRPOP) */
	R_MGET,         /* multi-key get */
	R_DRAIN,        /* dequeue after the run, to count what is left */
	R_BSDEL,        /* beanstalk: delete a reserved job */
	R_OGET,         /* retry: get q/open */
	R_CLOSE,        /* retry: get q/close (the job is done) */
	R_ABORT         /* retry: get q/abort (the job failed) */
};
enum role { ROLE_WORKER, ROLE_PRODUCER, ROLE_CONSUMER };
/* mget: what the queues named by the keys hold during the run */
enum fill { F_ITEMS, F_EMPTY, F_MISSING };

/* ---------------------------------------------------------------- types */

/* Samples of at least HIST_SLOW_NS are remembered with the wall-clock
 * time they were taken (one entry per HIST_SLOW_GAP_MS window, holding
 * its largest), so a pause can be matched with the server's debug log. */
#define HIST_SLOW_NS     (10ull * 1000 * 1000)
#define HIST_SLOW_GAP_MS 100
#define HIST_SLOW_MAX    256

struct hist_slow {
	int64_t at_ms;          /* CLOCK_REALTIME, ms */
	uint64_t v;             /* ns */
};

struct hist {
	uint64_t b[HIST_BUCKETS];
	uint64_t n, max, sum;
	struct hist_slow slow[HIST_SLOW_MAX];
	size_t nslow;
	uint64_t slow_dropped;  /* slow windows past HIST_SLOW_MAX */
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

/* --resend: a set to send again (same sequence number, same id). */
struct resend {
	uint64_t seq;
	int queue;
};

struct bench;

struct conn {
	struct bench *b;
	int id;
	enum role role;
	int queue;              /* the queue this connection works on */
	struct bufferevent *bev;
	/* Plain TCP: requests wait in `pend` until the end of the loop pass
	 * and are written then, with the write event off (see send_bytes()). */
	struct evbuffer *pend;	/* NULL: TLS, straight into the bufferevent */
	bool flush_queued;	/* on the bench's flush list */
	struct conn *flush_next;

	struct req *ring;
	unsigned rhead, rcount, rcap;

	unsigned setup_step;
	unsigned pair_next;     /* 0: set next, 1: get next; retry: 2 = the
	                         * held job's close or abort next */
	bool held;              /* retry: holds an item it opened */
	bool held_fail;         /* ... and fails it */
	uint64_t held_pid, held_seq;
	uint64_t seq;           /* next sequence number this producer uses */
	/* --resend: sets answered with an error, oldest first (a FIFO
	 * ring), and the backoff (RESEND_MIN_NS) */
	struct resend *rs;
	unsigned rs_head, rs_count, rs_cap;
	uint64_t rs_wait_ns;    /* 0 after a set was stored */
	uint64_t rs_refused_ns; /* when the backoff last moved on a refusal */
	bool rs_stored;         /* a set was stored since then */

	/* Drain: this connection empties queues drain_q, drain_q + stride... */
	int drain_q;
	bool drain_done;

	/* Reply parser. */
	bool logging_in;        /* --user: the login's reply comes first */
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
	int fail_pct;           /* retry: share of jobs that fail, percent */
	long retry_delay_ms;    /* retry: abort/delay=; -1: the queue's backoff */
	const char *prefix;
	bool json, verify, clean, quiet;
	bool ids;               /* every set carries /id=<tag><producer><seq> */
	bool resend;            /* a set not acknowledged is sent again */
	long server_pid;
	bool items_set;
	bool queues_set;
	enum fill fill;         /* mget: items (every key hits), empty, missing */
};

/* A process's CPU time so far, in seconds. */
struct cpu_use {
	double user, sys;
	bool ok;		/* read; false without --server-pid or /proc */
};

struct bench {
	struct opts o;
	struct event_base *base;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	struct conn *conns;
	int nconns;             /* o.conns plus a producer in blocking/delayed */
	int nqueues;            /* queues actually used */
	int nall;               /* queues cleaned and drained: nqueues, and
	                         * in retry mode their dead-letter queues */
	uint64_t rng;           /* retry: which jobs fail */
	char **qnames;
	size_t *qlens;
	char *pad;              /* o.size bytes of filler */
	uint16_t tag;           /* per run: tells our items from others' */

	enum phase phase;
	/* Called after replies were read: the phase's work may be done.
	 * Set by bench.c, which owns the phases. */
	void (*progress)(struct bench *b);
	/* Called with the reply to c's login (a line without its CRLF).
	 * Set by bench.c, which owns the connections' setup. */
	void (*login_reply)(struct conn *c, const char *line);
	int nconnected;         /* connected (and logged in, with --user) */
	char *login;            /* --user: the login request, or NULL */
	size_t login_len;
	struct event *phase_ev, *tick_ev, *progress_ev, *sig_ev;
	struct event *flush_ev;	/* made active when flush_head is not empty */
	struct conn *flush_head;
	uint64_t t_start, t_measure, t_measure_end, t_stop;
	bool failed, interrupted, drain_timeout;
	char errmsg[256];

	/* Work budgets. */
	long prefill_left;      /* prefill sets still to send */
	uint64_t prefill_total;
	long mget_left;         /* mget requests still to send (--fill items) */
	uint64_t mget_next;     /* mget: requests sent; the next one's keys
	                         * start at name mget_next * K mod Q */
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
	/* received items that were also acknowledged: `received` counts a
	 * set answered with an error that was stored after all, so it can
	 * reach acked_total while an acknowledged item is still to come */
	uint64_t acked_received;
	uint64_t early, before_ack;
	uint64_t retries, dead;  /* retry: aborts sent; items drained from the
	                          * dead-letter queues */
	uint64_t resent;        /* --resend: sets sent again */
	uint64_t resend_pending_now; /* --resend: sets waiting to go again, over
	                         * every connection (at the end: never
	                         * acknowledged) */
	uint64_t resend_held_ns; /* --resend: the stop last waited for a set */
	uint64_t last_recv_ns;  /* blocking/delayed: when an item last arrived */
	char first_error[128];

	/* CPU at the start and the end of the measured phase (the end is
	 * taken at PH_STOP, so the drain that verifies is not in it) */
	struct cpu_use srv0, srv1;
	struct rusage ru0, ru1;
	bool stopped;		/* srv1 and ru1 taken */
};

#endif
