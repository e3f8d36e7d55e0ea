/* totalq.c -- Jepsen's total-queue check: producers, bookkeeping, drain and counts (totalq.h). */
#include "config.h"

#include <sys/socket.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "totalq.h"

enum { ST_UNSENT, ST_MAYBE, ST_ACKED, ST_REFUSED };

struct tq_producer {
	int fd;
	int next;		/* next sequence number to send */
	bool waiting;		/* a set is in flight */
	size_t len;
	char buf[256];
	unsigned char *state;	/* ST_* per sequence */
	unsigned char *seen;	/* times read back per sequence */
	int last[TQ_NQUEUE];	/* last sequence read back per queue */
};

static int
queue_of(int p, int seq)
{
	return (p + seq) % TQ_NQUEUE;
}

static void
send_next(struct tq *t, int p)
{
	struct tq_producer *pr = &t->prs[p];
	char req[160], data[64];
	int n, dl;

	ck_assert_int_lt(pr->next, TQ_MAXSEQ);
	dl = snprintf(data, sizeof(data), "t%d-p%d-%d", t->tag, p, pr->next);
	n = snprintf(req, sizeof(req), "set %s%d 0 0 %d\r\n%s\r\n", t->prefix,
	    queue_of(p, pr->next), dl, data);
	pr->state[pr->next] = ST_MAYBE;
	pr->waiting = true;
	mustsend(pr->fd, req, (size_t)n);
}

/* Consume replies in pr->buf; false if the connection broke. */
static bool
take_replies(struct tq_producer *pr)
{
	char *nl;
	size_t used;

	while ((nl = memchr(pr->buf, '\n', pr->len)) != NULL) {
		used = (size_t)(nl - pr->buf) + 1;
		if (!pr->waiting)
			return false;
		pr->state[pr->next] = used == 8 &&
		    memcmp(pr->buf, "STORED\r\n", 8) == 0 ? ST_ACKED : ST_REFUSED;
		pr->waiting = false;
		pr->next++;
		memmove(pr->buf, pr->buf + used, pr->len - used);
		pr->len -= used;
	}
	return true;
}

/* Read what is there; false on EOF or error. */
static bool
read_some(struct tq_producer *pr)
{
	ssize_t r = recv(pr->fd, pr->buf + pr->len, sizeof(pr->buf) - pr->len,
	    MSG_DONTWAIT);

	if (r == -1 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (r <= 0)
		return false;
	pr->len += (size_t)r;
	return take_replies(pr);
}

void
tq_start(struct tq *t, int port, const char *prefix, int tag)
{
	int p, q;

	memset(t, 0, sizeof(*t));
	snprintf(t->prefix, sizeof(t->prefix), "%s", prefix);
	t->tag = tag;
	t->prs = calloc(TQ_NPROD, sizeof(*t->prs));
	ck_assert_ptr_nonnull(t->prs);
	for (p = 0; p < TQ_NPROD; p++) {
		struct tq_producer *pr = &t->prs[p];

		pr->fd = tl_connect(port);
		fcntl(pr->fd, F_SETFL, O_NONBLOCK);
		pr->state = calloc(TQ_MAXSEQ, 1);
		pr->seen = calloc(TQ_MAXSEQ, 1);
		ck_assert(pr->state != NULL && pr->seen != NULL);
		for (q = 0; q < TQ_NQUEUE; q++)
			pr->last[q] = -1;
		send_next(t, p);
	}
}

void
tq_run_until(struct tq *t, int64_t until_ms, const char *name)
{
	struct pollfd pf[TQ_NPROD];
	int p;

	while (tl_now_ms() < until_ms) {
		int left = (int)(until_ms - tl_now_ms());

		for (p = 0; p < TQ_NPROD; p++) {
			pf[p].fd = t->prs[p].fd;
			pf[p].events = POLLIN;
		}
		if (poll(pf, TQ_NPROD, left > 0 ? left : 0) <= 0)
			continue;
		for (p = 0; p < TQ_NPROD; p++) {
			if (pf[p].revents == 0)
				continue;
			ck_assert_msg(read_some(&t->prs[p]), "%s: producer %d: "
			    "connection broke before the crash", name, p);
			if (!t->prs[p].waiting)
				send_next(t, p);
		}
	}
}

void
tq_stop(struct tq *t)
{
	int p;

	/* Replies already sent before the crash still count as acks. */
	for (p = 0; p < TQ_NPROD; p++) {
		while (!tl_quiet(t->prs[p].fd, 1000) && read_some(&t->prs[p]))
			;
		close(t->prs[p].fd);
		t->prs[p].fd = -1;
	}
}

/* Drain queue q (pipelined gets, 100 at a time) into the bookkeeping. */
static void
drain(struct tq *t, int fd, int q)
{
	char req[64 * 100];
	int i, n, got_end = 0;

	while (!got_end) {
		for (n = 0, i = 0; i < 100; i++)
			n += snprintf(req + n, sizeof(req) - (size_t)n,
			    "get %s%d\r\n", t->prefix, q);
		mustsend(fd, req, (size_t)n);
		for (i = 0; i < 100; i++) {
			struct tl_value v;
			struct tq_producer *pr;
			int tag, p, seq;

			if (tl_read_value(fd, &v) == 0) {
				got_end = 1;
				continue;
			}
			ck_assert_msg(!got_end, "%s%d: item after END", t->prefix, q);
			tl_ckresp_(__FILE__, __LINE__, fd, "END\r\n", 5);
			t->ct.read++;
			if (sscanf(v.data, "t%d-p%d-%d", &tag, &p, &seq) != 3 ||
			    tag != t->tag || p < 0 || p >= TQ_NPROD || seq < 0 ||
			    seq >= TQ_MAXSEQ || queue_of(p, seq) != q ||
			    t->prs[p].state[seq] == ST_UNSENT ||
			    t->prs[p].state[seq] == ST_REFUSED) {
				fprintf(stderr, "unexpected item \"%s\" in %s%d\n",
				    v.data, t->prefix, q);
				t->ct.unexpected++;
				tl_value_clear(&v);
				continue;
			}
			pr = &t->prs[p];
			if (pr->seen[seq]++ > 0)
				t->ct.duplicated++;
			if (seq <= pr->last[q]) {
				fprintf(stderr, "%s%d: p%d-%d after p%d-%d\n",
				    t->prefix, q, p, seq, p, pr->last[q]);
				t->ct.reordered++;
			}
			pr->last[q] = seq;
			tl_value_clear(&v);
		}
	}
}

void
tq_check(struct tq *t, int fd, const char *name)
{
	int p, q, seq;

	for (q = 0; q < TQ_NQUEUE; q++)
		drain(t, fd, q);
	for (p = 0; p < TQ_NPROD; p++) {
		const struct tq_producer *pr = &t->prs[p];

		for (seq = 0; seq <= pr->next && seq < TQ_MAXSEQ; seq++) {
			if (pr->state[seq] == ST_ACKED) {
				t->ct.acked++;
				if (pr->seen[seq] == 0) {
					fprintf(stderr, "%s: lost t%d-p%d-%d\n",
					    name, t->tag, p, seq);
					t->ct.lost++;
				}
			} else if (pr->state[seq] == ST_MAYBE) {
				t->ct.maybe++;
			}
		}
	}
}

void
tq_free(struct tq *t)
{
	int p;

	for (p = 0; p < TQ_NPROD; p++) {
		free(t->prs[p].state);
		free(t->prs[p].seen);
	}
	free(t->prs);
	t->prs = NULL;
}
