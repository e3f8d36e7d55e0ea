/* bench.c -- `saker bench`: a single-threaded, verifying libevent load
 * generator.  This file runs a benchmark through its phases (connect,
 * setup, prefill, warmup, measure, stop, drain) and owns main; the parts
 * are listed in bench_int.h. */
#include "config.h"

#include <sys/types.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <signal.h>
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
#include <event2/util.h>

#ifdef HAVE_OPENSSL
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <event2/bufferevent_ssl.h>
#endif

#include "bench.h"
#include "bench_int.h"
#include "bench_load.h"
#include "bench_opts.h"
#include "bench_reply.h"
#include "bench_report.h"
#include "bench_util.h"
#include "bench_wire.h"
#include "client_login.h"
#include "clock.h"
#include "tls_client.h"

static const char *const phase_names[PH_DONE + 1] = {
	"connect", "setup", "prefill", "warmup", "measure", "stop", "drain",
	"done"
};

/* -------------------------------------------------------------- phases */

static void enter_phase(struct bench *, enum phase);

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

/* Move on when the current phase's work is finished (b->progress). */
static void
check_progress(struct bench *b)
{
	int i, busy = 0;

	for (i = 0; i < b->nconns; i++)
		busy += b->conns[i].rcount > 0 ||
		    /* retry: a job held open is closed before the drain */
		    (b->o.mode == M_RETRY && b->conns[i].pair_next == 2);
	/* --resend: sets still to be acknowledged, waiting or in flight (a
	 * refusal sends them again), hold the stop, up to RESEND_STOP_NS (a
	 * server that never takes them again) */
	if (b->phase == PH_STOP && b->o.resend &&
	    saker_mono_ns() < b->t_stop + RESEND_STOP_NS) {
		bool held = b->resend_pending_now > 0;

		for (i = 0; i < b->nconns && !held; i++)
			held = b->conns[i].role != ROLE_CONSUMER &&
			    b->conns[i].rcount > 0;
		if (held) {
			/* the grace for items on their way to consumers
			 * counts from the last set's acknowledgement */
			b->resend_held_ns = saker_mono_ns();
			return;
		}
	}
	switch (b->phase) {
	case PH_SETUP:
		if (busy == 0) {
			for (i = 0; i < b->nconns; i++) {
				struct conn *c = &b->conns[i];

				if (b->o.proto == P_BS ? c->setup_step < 3 :
				    c->id == 0 && b->o.clean &&
				    c->setup_step < (unsigned)b->nall)
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
		if (b->o.mode == M_MGET && b->o.fill == F_ITEMS &&
		    b->mget_left <= 0 && busy == 0)
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

			if (b->resend_held_ns > from)
				from = b->resend_held_ns;
			/* Items still arriving (a backlog after an outage)
			 * are no loss: closing the consumers now could drop
			 * one on its way to them.  The grace counts from the
			 * last one, for RESEND_STOP_NS at most. */
			if (b->last_recv_ns > from &&
			    b->last_recv_ns < b->t_stop + RESEND_STOP_NS)
				from = b->last_recv_ns;

			/* every acknowledged item in: closing the consumers
			 * now cannot take one that is on its way to them */
			if ((b->acked_received >= b->acked_total &&
			    b->conns[b->nconns - 1].rcount == 0 &&
			    consumers_idle(b)) ||
			    saker_mono_ns() > from + GRACE_NS +
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
			/* empty: one flush per queue; missing: nothing */
			b->prefill_left = b->o.fill == F_ITEMS ?
			    b->o.items * b->nqueues :
			    b->o.fill == F_EMPTY ? b->nqueues : 0;
		else
			b->prefill_left = 0;
		b->prefill_total = (uint64_t)b->prefill_left;
		break;
	case PH_WARMUP:
		b->rate_t0 = saker_mono_ns();
		b->rate_sent = 0;
		arm_phase_timer(b, b->o.warmup);
		break;
	case PH_MEASURE:
		b->t_measure = saker_mono_ns();
		if (b->o.rate > 0 && b->rate_t0 == 0)
			b->rate_t0 = b->t_measure;
		getrusage(RUSAGE_SELF, &b->ru0);
		server_cpu(b, &b->srv0);
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
		b->t_measure_end = saker_mono_ns();
		b->t_stop = b->t_measure_end;
		getrusage(RUSAGE_SELF, &b->ru1);
		server_cpu(b, &b->srv1);
		b->stopped = true;
		evtimer_del(b->phase_ev);
		if (b->o.mode == M_BLOCKING || b->o.mode == M_DELAYED ||
		    b->o.resend)
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
on_written(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	if (c->pend != NULL)
		bufferevent_disable(bev, EV_WRITE);
}

/* One more connection is ready for the workload. */
static void
conn_ready(struct bench *b)
{
	if (++b->nconnected == b->nconns) {
		b->phase = PH_SETUP;
		enter_phase(b, PH_SETUP);
	}
}

static void
login_reply(struct conn *c, const char *line)
{
	c->logging_in = false;
	/* a server without --auth-file refuses the login's key, no more */
	if (strcmp(line, "STORED") == 0 ||
	    strcmp(line, "CLIENT_ERROR bad queue name") == 0)
		conn_ready(c->b);
	else if (strcmp(line, "CLIENT_ERROR authentication failure") == 0)
		fail(c->b, "%s refused the login of user '%s': wrong user name or "
		    "password", c->b->o.server, client_login_user());
	else
		fail(c->b, "%s replied to the login: %.80s", c->b->o.server, line);
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
		if (!tls_client.on) {
			if ((c->pend = evbuffer_new()) == NULL) {
				fail(b, "connection %d: out of memory", c->id);
				return;
			}
			/* the login goes straight out; on_written turns the
			 * write event off once it has */
			if (b->login == NULL)
				bufferevent_disable(bev, EV_WRITE);
		}
		if (b->login != NULL) {
			c->logging_in = true;
			if (bufferevent_write(bev, b->login, b->login_len) != 0)
				fail(b, "connection %d: out of memory", c->id);
			return;
		}
		conn_ready(b);
		return;
	}
#ifdef HAVE_OPENSSL
	if ((what & BEV_EVENT_ERROR) && tls_client.on) {
		unsigned long e = bufferevent_get_openssl_error(bev);
		char buf[256];

		if (e != 0) {
			ERR_error_string_n(e, buf, sizeof(buf));
			fail(b, "connection %d to %s: TLS: %s", c->id, b->o.server, buf);
			return;
		}
	}
#endif
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
		    (double)(saker_mono_ns() - b->t_measure) / 1e9,
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
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	int e;

	if (strlen(b->o.server) >= sizeof(host)) {
		fprintf(stderr, "saker bench: %.64s...: server address too long\n",
		    b->o.server);
		return -1;
	}
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

/* A connection's bufferevent: plain, or TLS with --tls (the handshake runs
 * inside the connect; BEV_EVENT_CONNECTED comes after it). */
static struct bufferevent *
new_bev(struct bench *b)
{
#ifdef HAVE_OPENSSL
	if (tls_client.on) {
		struct bufferevent *bev;
		char err[512];
		SSL *ssl = tls_client_new(b->o.server, err, sizeof(err));

		if (ssl == NULL) {
			fprintf(stderr, "saker bench: %s\n", err);
			return NULL;
		}
		bev = bufferevent_openssl_socket_new(b->base, -1, ssl,
		    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
		if (bev == NULL)
			SSL_free(ssl);
		return bev;
	}
#endif
	return bufferevent_socket_new(b->base, -1, BEV_OPT_CLOSE_ON_FREE);
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
		c->drain_done = i >= b->nall;
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
		c->bev = new_bev(b);
		if (c->bev == NULL)
			return -1;
		bufferevent_setcb(c->bev, on_read, on_written, on_event, c);
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
	struct event *evs[] = { b->phase_ev, b->tick_ev, b->progress_ev,
	    b->sig_ev, b->flush_ev };
	int i;

	for (i = 0; b->conns != NULL && i < b->nconns; i++) {
		struct conn *c = &b->conns[i];

		if (c->bev != NULL)
			bufferevent_free(c->bev);
		if (c->pend != NULL)
			evbuffer_free(c->pend);
		free(c->ring);
		free(c->rs);
		free(c->acked.w);
		free(c->seen.w);
		free(c->t_ns);
		free(c->out);
		free(c->payload);
	}
	free(b->conns);
	for (i = 0; b->qnames != NULL && i < b->nall; i++)
		free(b->qnames[i]);
	free(b->qnames);
	free(b->qlens);
	free(b->pad);
	for (i = 0; i < (int)(sizeof(evs) / sizeof(evs[0])); i++)
		if (evs[i] != NULL)
			event_free(evs[i]);
	if (b->base != NULL)
		event_base_free(b->base);
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
	b->progress = check_progress;
	b->login_reply = login_reply;
	if ((rc = parse_opts(&b->o, argc, argv)) != 0) {
		free(b);
		return rc < 0 ? 1 : 0;
	}
	signal(SIGPIPE, SIG_IGN);
	if (client_login_wanted()) {
		/* asked for (a prompt, say) before the first connection */
		if (b->o.proto != P_MC) {
			fprintf(stderr, "saker bench: --user: logins are for the "
			    "memcache protocol only\n");
			free(b);
			return 2;
		}
		if ((b->login = client_login_request("bench", &b->login_len)) ==
		    NULL) {
			free(b);
			return 1;
		}
	}
	if (resolve(b) != 0) {
		client_login_free(b->login, b->login_len);
		free(b);
		return 1;
	}
	b->tag = (uint16_t)((uint64_t)time(NULL) ^ (uint64_t)getpid() ^
	    saker_mono_ns());
	b->nconns = b->o.conns;
	if (b->o.mode == M_BLOCKING || b->o.mode == M_DELAYED)
		b->nconns++;            /* the producer */
	if (b->o.mode == M_MGET)
		b->nqueues = b->o.queues_set ? b->o.queues : b->o.keys;
	else if (b->o.proto == P_BS && b->o.mode == M_BLOCKING)
		b->nqueues = 1;         /* a beanstalk producer uses one tube */
	else if (b->o.mode == M_BLOCKING || b->o.mode == M_DELAYED)
		b->nqueues = b->o.queues < b->o.conns ? b->o.queues :
		    b->o.conns;
	else
		b->nqueues = b->o.queues < b->nconns ? b->o.queues : b->nconns;
	/* retry: the dead-letter queues too (sakerd's default names) */
	b->nall = b->o.mode == M_RETRY ? 2 * b->nqueues : b->nqueues;
	b->rng = saker_mono_ns() | 1;
	b->qnames = calloc((size_t)b->nall, sizeof(*b->qnames));
	b->qlens = calloc((size_t)b->nall, sizeof(*b->qlens));
	b->pad = malloc((size_t)b->o.size);
	b->base = event_base_new();
	rc = 1;
	if (b->qnames == NULL || b->qlens == NULL || b->pad == NULL ||
	    b->base == NULL) {
		fprintf(stderr, "saker bench: out of memory\n");
		goto out;
	}
	memset(b->pad, 'x', (size_t)b->o.size);
	for (i = 0; i < b->nall; i++) {
		char name[300];

		snprintf(name, sizeof(name), "%s%d%s", b->o.prefix,
		    i % b->nqueues, i < b->nqueues ? "" : "_dead");
		if ((b->qnames[i] = strdup(name)) == NULL)
			goto out;
		b->qlens[i] = strlen(name);
	}
	b->phase_ev = evtimer_new(b->base, on_phase_timer, b);
	b->flush_ev = event_new(b->base, -1, 0, flush_conns, b);
	b->sig_ev = evsignal_new(b->base, SIGINT, on_signal, b);
	evsignal_add(b->sig_ev, NULL);
	/* --resend: sets go again when their backoff ends, not only
	 * after a reply */
	if (b->o.rate > 0 || b->o.resend) {
		b->tick_ev = event_new(b->base, -1, EV_PERSIST, on_tick, b);
		evtimer_add(b->tick_ev, &ms1);
	}
	if (!b->o.quiet && isatty(STDERR_FILENO)) {
		b->progress_ev = event_new(b->base, -1, EV_PERSIST, on_progress,
		    b);
		evtimer_add(b->progress_ev, &s1);
	}
	b->t_start = saker_mono_ns();
	if (setup_conns(b) != 0)
		goto out;
	event_base_dispatch(b->base);
	if (b->progress_ev != NULL)
		fprintf(stderr, "\r%-78s\r", "");
	if (b->failed)
		fprintf(stderr, "saker bench: %s (during %s)\n", b->errmsg,
		    phase_names[b->phase]);
	else
		rc = report(b);
out:
	teardown(b);
	client_login_free(b->login, b->login_len);
	free(b);
	return rc;
}
