/* conn.h -- a client connection: input framing, batched replies, output. */
#ifndef SAKER_CONN_H
#define SAKER_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "server.h"

/* The protocol a connection speaks, decided by its first byte. */
enum conn_proto {
	CONN_PROTO_UNKNOWN = 0,
	CONN_PROTO_TEXT,  /* memcache text, meta commands included */
	CONN_PROTO_BINARY /* memcached's binary protocol (first byte 0x80) */
};

struct get_ops;
struct getgroup;

/* A binary reply of the current batch, kept so a failed commit can answer
 * each request with an error packet of the same opcode and opaque. */
struct bin_rec {
	size_t end;                     /* where its bytes end in pend */
	uint32_t opaque;
	uint8_t opcode;
	uint8_t keep;                   /* enum reply_keep */
};

/* Which replies of a failed batch go out as they are. */
enum reply_keep {
	KEEP_NEVER = 0,                 /* SERVER_ERROR (the batch rolled back) */
	KEEP_IN_DOUBT,                  /* it hands out a removed item: when the
	                                 * commit's outcome is unknown
	                                 * (SAKER_EINDOUBT) the take may have
	                                 * reached the disk, and a duplicate
	                                 * beats a lost item */
	KEEP_ALWAYS                     /* it does not depend on the store
	                                 * (version) */
};

/* A text reply of the current batch that may be kept (enum reply_keep). */
struct kept_reply {
	unsigned idx;                   /* its number among the batch's replies */
	uint8_t keep;
	size_t start, end;              /* its bytes in pend */
};

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
	size_t reply_start;             /* where the reply being built starts */
	uint8_t reply_keep;             /* ... and whether to keep it */
	struct kept_reply *kept;        /* text: such replies of this batch */
	size_t nkept, kept_cap;
	struct bin_rec *brecs;          /* binary: replies of this batch */
	size_t nbrecs, brecs_cap;

	uint8_t proto;                  /* enum conn_proto */
	bool authed;                    /* --auth-file: authenticated */
	const struct get_ops *gops;     /* how the current get answers */
	struct getgroup *grp;           /* binary / meta multi-get being collected */

	enum conn_state state;
	size_t swallow;                 /* CONN_SWALLOW: bytes left to discard */

	struct open_list opens;         /* open items, oldest first */
	size_t nopens;

	/* CONN_WAITING */
	char *wait_line;                /* copy of the get line; keys point here */
	struct waiter *waits;           /* one per key of the get, in order */
	size_t nwaits;
	struct event *wait_timer;
	bool monitoring;                /* the wait is a `monitor`: stream items */
	int64_t monitor_left;           /* items still wanted; -1 = no limit */

	struct event *idle_ev;          /* --idle-timeout */
	int64_t last_cmd_ms;            /* when a command last completed */

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

/*
 * For a command followed by a data block: the line ends `need` bytes into
 * c->in and `bytes` of data plus "\r\n" follow.  Returns 1 with *p at the
 * start of c->in (line, then data) when all has arrived, 0 when more input
 * is needed, -1 after answering a bad data chunk (connection closing).
 */
int conn_data_block(struct conn *c, size_t need, size_t bytes, const char **p);

/* Close when the first byte of a binary header is wrong: only this
 * connection is affected. */
void conn_protocol_error(struct conn *c, const char *why);

/* The commit: after a successful commit move pend to out and write; after a
 * failed one replace each pending reply with SERVER_ERROR `reason`. */
/* The batch's commit is over: send its replies.  When it failed they become
 * errors, except that with `in_doubt` (SAKER_EINDOUBT) replies handing out
 * removed items go out as they are. */
void conn_flush(struct conn *c, bool committed, bool in_doubt, const char *reason);
/* After a failed commit: when `keep` (enum reply_keep) says so, move the
 * reply at [start, end) of `sent` (the batch's replies as they were, *pos
 * bytes of it already consumed) to pend and return true. */
bool conn_resend_kept(struct conn *c, struct evbuffer *sent, size_t *pos,
    size_t start, size_t end, unsigned keep, bool in_doubt);
/* Drop what was added to the batch's replies since pend was `len` bytes
 * long and held `nbrecs` binary records. */
void conn_reply_truncate(struct conn *c, size_t len, size_t nbrecs);
/* The reply being built (binary: the last one recorded) hands out an item
 * that left its queue, or does not depend on the store at all. */
void conn_reply_keep(struct conn *c, enum reply_keep keep);

/* The open item `c` holds longest on q, or NULL; and how many it holds. */
struct open_item *conn_oldest_open(struct conn *c, struct squeue *q);
size_t conn_count_open(struct conn *c, struct squeue *q);
void conn_forget_open(struct conn *c, struct open_item *oi);
/* Drop records of open items on q (queue deleted or flushed). */
void conns_forget_queue(struct squeue *q);

/* End a wait: unlink from every queue, stop the timer. */
void conn_end_wait(struct conn *c);

#endif
