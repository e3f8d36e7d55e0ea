/* bench_reply.c -- `saker bench`: reading replies of each protocol, and verifying every item received (lost, duplicated, foreign, early). */
#include "config.h"

#include <sys/types.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "bench_int.h"
#include "bench_load.h"
#include "bench_reply.h"
#include "bench_util.h"
#include "bench_wire.h"
#include "clock.h"

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
	if (b->o.mode == M_RETRY && b->phase != PH_DRAIN) {
		/* a job handed out: done only when its close is answered */
		c->held = true;
		c->held_pid = pid;
		c->held_seq = seq;
		return;
	}
	if (bits_test_set(&p->seen, seq)) {
		b->dups++;
		c->drain_dup = b->phase == PH_DRAIN;
		return;
	}
	b->received++;
	b->last_recv_ns = now;
	if (bits_test(&p->acked, seq))
		b->acked_received++;
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

/* retry mode: what the reply to a worker's request means for its job. */
static void
retry_done(struct conn *c, enum rtype t, bool ok, int hits)
{
	struct bench *b = c->b;

	switch (t) {
	case R_OGET:
		if (hits > 0 && c->held) {
			b->rng ^= b->rng << 13;
			b->rng ^= b->rng >> 7;
			b->rng ^= b->rng << 17;
			c->held_fail = (int)(b->rng % 100) < b->o.fail_pct;
			c->pair_next = 2;
		} else {
			c->pair_next = 0;	/* nothing there: produce */
		}
		break;
	case R_CLOSE:
		/* done: the one moment an item counts as received */
		if (ok && c->held &&
		    bits_test_set(&b->conns[c->held_pid].seen, c->held_seq))
			b->dups++;
		else if (ok && c->held)
			b->received++;
		c->held = false;
		c->pair_next = 0;
		break;
	case R_ABORT:
		if (ok)
			b->retries++;
		c->held = false;
		/* the next job: take one (the set comes after a miss) */
		c->pair_next = 1;
		break;
	default:
		break;
	}
}

/* The request at the head of c's ring is answered. */
static void
complete(struct conn *c, bool ok, int hits, const char *line)
{
	struct bench *b = c->b;
	struct req r;
	uint64_t now = saker_mono_ns();

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
	/* --resend: a set not acknowledged may or may not be stored (the
	 * commit's outcome unknown, the store failing); send it again, the
	 * same item under the same id, until it is.  A CLIENT_ERROR is a
	 * request the server will never take: sending it again cannot help. */
	if (r.type == R_SET && b->o.resend) {
		if (ok)
			resend_stored(c);
		else if (line == NULL || strncmp(line, "CLIENT_ERROR", 12) != 0)
			resend_later(c, r.seq, r.queue, r.t_ns);
	}
	if (r.type == R_SET && ok) {
		b->acked_total++;
		if (b->o.verify && !bits_test_set(&c->acked, r.seq) &&
		    bits_test(&c->seen, r.seq))
			b->acked_received++;	/* it beat its STORED */
		if (b->o.mode == M_BLOCKING && times_get(c, 2 * r.seq + 1) == 0)
			times_put(c, 2 * r.seq + 1, now);
	}
	if (b->o.mode == M_RETRY)
		retry_done(c, r.type, ok, hits);
	if (r.type == R_DRAIN && b->o.mode == M_RETRY) {
		c->drain_dup = false;
		b->leftover += (uint64_t)hits;
		if (r.queue >= b->nqueues)
			b->dead += (uint64_t)hits;
		/* a miss: on to the next of this connection's queues, round
		 * and round while acknowledged items are unaccounted for
		 * (some may still be delayed; the drain's timer bounds it) */
		if (hits == 0 && r.queue == c->drain_q) {
			if (b->received + b->dups >= b->acked_total)
				c->drain_done = true;
			else if ((c->drain_q += c->drain_stride) >= b->nall)
				c->drain_q = c->id % b->nall;
		}
	} else if (r.type == R_DRAIN) {
		bool dup = c->drain_dup;

		c->drain_dup = false;
		b->leftover += (uint64_t)hits;
		/* A miss ends a queue's drain; so does an item read twice, or a
		 * server that is no queue (memcached) would keep us here. Gets
		 * still in flight for the old queue must not skip another. */
		if ((hits == 0 || dup) && r.queue == c->drain_q) {
			c->drain_q += c->drain_stride;
			if (c->drain_q >= b->nall)
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
	case R_CLOSE:
		b->m_gets++;
		if (ok)
			b->m_items++;
		break;
	case R_ABORT:
		b->m_gets++;
		break;
	case R_OGET:
		/* a job handed out is not done yet: its close counts */
		b->m_gets++;
		if (hits == 0)
			b->m_misses++;
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

/* A data block follows the line, its length at s; false when that is bad. */
static bool
data_follows(struct conn *c, const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || v > (1ull << 31))
		return false;
	c->blen = (size_t)v;
	c->need = c->blen + 2;
	c->in_data = true;
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
			if (p == NULL || !data_follows(c, p))
				fail(b, "bad VALUE line: %.80s", line);
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
			if (!data_follows(c, line + 1))
				fail(b, "bad RESP bulk length: %.80s", line);
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
			if (*end != ' ' || !data_follows(c, end + 1))
				fail(b, "bad RESERVED line: %.80s", line);
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

void
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
			data_done(c, hdr, c->blen, saker_mono_ns());
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
			if (c->logging_in)
				b->login_reply(c, line);
			else
				line_done(c, line, (size_t)pos.pos);
		}
	}
	if (b->failed)
		return;
	b->progress(b);	/* bench.c's phases, by callback: they are above */
	pump(c);
}
