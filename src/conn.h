/* conn.h -- a client connection: input framing, batched replies, output. */
#ifndef SAKER_CONN_H
#define SAKER_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "server.h"

enum conn_state {
	CONN_CMD = 0,     /* reading commands */
	CONN_SWALLOW,     /* discarding the data block of a refused set */
	CONN_WAITING,     /* a blocking get is waiting for an item */
	CONN_CLOSING      /* writing the last replies, then close */
};

struct conn {
	TAILQ_ENTRY(conn) link;         /* srv->conns */
	TAILQ_ENTRY(conn) batch_link;   /* srv->batch_conns */
	TAILQ_ENTRY(conn) resume_link;  /* srv->resume */
	bool in_batch, in_resume;

	int fd;
	struct event *rev, *wev;
	bool reading;                   /* rev is added */
	struct evbuffer *in;            /* unparsed input */
	struct evbuffer *pend;          /* replies of the current batch */
	struct evbuffer *out;           /* committed replies not yet written */
	unsigned batch_replies;         /* replies in pend (for a failed commit) */

	enum conn_state state;
	size_t swallow;                 /* CONN_SWALLOW: bytes left to discard */

	struct open_list opens;         /* open items, oldest first */
	size_t nopens;

	/* CONN_WAITING */
	char *wait_line;                /* copy of the get line; keys point here */
	struct waiter *waits;
	size_t nwaits;
	struct event *wait_timer;
	bool monitoring;                /* the wait is a `monitor`: stream items */
	int64_t monitor_left;           /* items still wanted; -1 = no limit */

	int busy;                       /* inside conn_process() */
	bool dead;                      /* closed; free when not busy */
};

struct conn *conn_new(int fd);
/* Close now: cancel waits, return open items to their queues. */
void conn_close(struct conn *c);
/* Close after the replies already queued have been written. */
void conn_close_after_write(struct conn *c);
/* Parse and run every complete command in c->in. */
void conn_process(struct conn *c);

/* Queue a reply (counts one completed reply for commit-failure handling
 * when `complete`). */
void conn_reply(struct conn *c, const char *s, size_t len);
void conn_reply_str(struct conn *c, const char *s);
void conn_reply_done(struct conn *c);
void conn_replyf(struct conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* commit_ev: after a successful commit move pend to out and write; after a
 * failed one replace each pending reply with SERVER_ERROR `reason`. */
void conn_flush(struct conn *c, bool committed, const char *reason);

/* The open item `c` holds longest on q, or NULL; and how many it holds. */
struct open_item *conn_oldest_open(struct conn *c, struct squeue *q);
size_t conn_count_open(struct conn *c, struct squeue *q);
void conn_forget_open(struct conn *c, struct open_item *oi);
/* Drop records of open items on q (queue deleted or flushed). */
void conns_forget_queue(struct squeue *q);

/* End a wait: unlink from every queue, stop the timer. */
void conn_end_wait(struct conn *c);

#endif
