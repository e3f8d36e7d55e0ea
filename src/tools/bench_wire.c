/* bench_wire.c -- `saker bench`: item payloads, the requests of each protocol (memcache, RESP, beanstalk) and writing them out at the end of a loop pass. */
#include "config.h"

#include <sys/types.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "bench_int.h"
#include "bench_util.h"
#include "bench_wire.h"
#include "clock.h"

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

bool
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

struct req *
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
	r->t_ns = saker_mono_ns();
	return r;
}

/*
 * Queue n bytes on c.  A plain connection keeps its write event off: what
 * one loop pass queues is written by flush_conns() at the end of the pass,
 * one send for all of it, so a request costs no epoll_ctl() (libevent's
 * write event would be added and removed again for every request at depth
 * 1: two system calls more per request, on the client that measures).
 */
void
send_bytes(struct conn *c, const void *p, size_t n)
{
	struct bench *b = c->b;

	if (c->pend == NULL) {
		if (bufferevent_write(c->bev, p, n) != 0)
			fail(b, "connection %d: write failed", c->id);
		return;
	}
	if (evbuffer_add(c->pend, p, n) != 0) {
		fail(b, "connection %d: out of memory", c->id);
		return;
	}
	if (c->flush_queued)
		return;
	c->flush_queued = true;
	c->flush_next = b->flush_head;
	if (b->flush_head == NULL)
		event_active(b->flush_ev, EV_TIMEOUT, 1);
	b->flush_head = c;
}

/* A RESP command from up to four arguments. */
void
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

/* Enqueue item seq on queue q, delayed by delay_ms when >= 0. */
static void
send_set_seq(struct conn *c, int q, long delay_ms, uint64_t seq)
{
	struct bench *b = c->b;
	struct req *r = ring_push(c, R_SET, q);
	size_t size = (size_t)b->o.size, off;
	char id[32] = "";

	r->seq = seq;
	/* --ids: unique per run (the tag), producer and item; a resend
	 * carries the same id, so the server keeps one item */
	if (b->o.ids) {
		memcpy(id, "/id=", 4);
		put_hex(id + 4, b->tag, 4);
		put_hex(id + 8, (uint64_t)c->id, 4);
		put_hex(id + 12, seq, 16);
		id[28] = '\0';
	}
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
		    "set %s/delay=%ld%s 0 0 %zu\r\n", b->qnames[q], delay_ms, id,
		    size);
	else
		off = (size_t)snprintf(c->out, c->out_cap, "set %s%s 0 0 %zu\r\n",
		    b->qnames[q], id, size);
	memcpy(c->out + off, c->payload, size);
	off += size;
	c->out[off++] = '\r';
	c->out[off++] = '\n';
	send_bytes(c, c->out, off);
}

void
send_set(struct conn *c, int q, long delay_ms)
{
	send_set_seq(c, q, delay_ms, c->seq++);
}

void
send_set_again(struct conn *c, int q, uint64_t seq)
{
	send_set_seq(c, q, -1, seq);
}

void
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
	else if (t == R_OGET)
		off = (size_t)snprintf(c->out, c->out_cap, "get %s/open\r\n",
		    b->qnames[q]);
	else if (t == R_CLOSE)
		off = (size_t)snprintf(c->out, c->out_cap, "get %s/close\r\n",
		    b->qnames[q]);
	else if (t == R_ABORT && b->o.retry_delay_ms >= 0)
		off = (size_t)snprintf(c->out, c->out_cap,
		    "get %s/abort/delay=%ld\r\n", b->qnames[q],
		    b->o.retry_delay_ms);
	else if (t == R_ABORT)
		off = (size_t)snprintf(c->out, c->out_cap, "get %s/abort\r\n",
		    b->qnames[q]);
	else if (t == R_DRAIN && b->o.mode == M_RETRY)
		/* items given back with a delay are invisible until due */
		off = (size_t)snprintf(c->out, c->out_cap, "get %s/t=100\r\n",
		    b->qnames[q]);
	else
		off = (size_t)snprintf(c->out, c->out_cap, "get %s\r\n",
		    b->qnames[q]);
	send_bytes(c, c->out, off);
}

void
send_mget(struct conn *c)
{
	struct bench *b = c->b;
	size_t off = 3;
	/* K names in turn from the Q: with Q = K every request names all */
	int i, q = (int)(b->mget_next++ * (uint64_t)b->o.keys %
	    (uint64_t)b->nqueues);

	ring_push(c, R_MGET, -1);
	out_reserve(c, (size_t)b->o.keys * 256 + 16);
	memcpy(c->out, "get", 3);
	for (i = 0; i < b->o.keys; i++, q = (q + 1) % b->nqueues) {
		c->out[off++] = ' ';
		memcpy(c->out + off, b->qnames[q], b->qlens[q]);
		off += b->qlens[q];
	}
	c->out[off++] = '\r';
	c->out[off++] = '\n';
	send_bytes(c, c->out, off);
}

void
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

/* The end of a loop pass: write what send_bytes() queued on plain
 * connections.  What the socket does not take at once goes to the
 * bufferevent, whose write event sends it and on_written() turns off. */
void
flush_conns(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;
	struct conn *c;

	while ((c = b->flush_head) != NULL) {
		struct evbuffer *out;

		b->flush_head = c->flush_next;
		c->flush_queued = false;
		if (c->bev == NULL)
			continue;
		out = bufferevent_get_output(c->bev);
		/* behind bytes still waiting there, to keep the order */
		if (evbuffer_get_length(out) == 0 &&
		    evbuffer_write(c->pend, bufferevent_getfd(c->bev)) < 0 &&
		    errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			fail(b, "connection %d: write: %s", c->id,
			    strerror(errno));
			return;
		}
		if (evbuffer_get_length(c->pend) > 0) {
			if (bufferevent_write_buffer(c->bev, c->pend) != 0) {
				fail(b, "connection %d: write failed", c->id);
				return;
			}
			bufferevent_enable(c->bev, EV_WRITE);
		}
	}
}
