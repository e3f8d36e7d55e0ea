/*
 * session.h -- one client of the broker, whatever carries it: its input,
 * the replies of the current batch, the items it holds open and the get it
 * is blocked in.  sakerd's struct conn embeds one and adds the socket.
 */
#ifndef SAKER_SESSION_H
#define SAKER_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <event2/buffer.h>

#include "broker.h"
#include "perms.h"

enum session_state {
	SESSION_CMD = 0,      /* reading commands */
	SESSION_SWALLOW,      /* discarding the data of a refused request
	                       * (the protocol counts the bytes) */
	SESSION_WAITING,      /* a blocking get is waiting for an item */
	SESSION_CLOSING       /* writing the last replies, then close */
};

/* An item this session holds open (tentative read). */
struct open_item {
	TAILQ_ENTRY(open_item) link;  /* in session.opens, oldest first */
	struct squeue *q;
	uint64_t id;
	uint32_t deliveries;          /* hand-outs, this one included */
	uint64_t batch;               /* batch number it was taken in */
	int64_t opened_ms;
	int64_t deadline_ms;          /* open_timeout; 0 = none */
};
TAILQ_HEAD(open_list, open_item);

struct get_ops;
struct proto_state;

struct session {
	struct broker *b;
	TAILQ_ENTRY(session) link;      /* b->sessions */

	struct evbuffer *in;            /* unparsed input */
	struct evbuffer *pend;          /* replies of the current batch */
	size_t mem_budget;              /* --max-conn-memory (0: none) */
	size_t out_len;                 /* replies committed, not yet written
	                                 * (kept by the carrier: conn.c) */
	bool flush_scheduled;           /* schedule_flush() ran this batch */
	bool wrote;                     /* wrote to the store in this batch:
	                                 * its replies wait for the commit
	                                 * even while another is in flight */
	bool in_flight;                 /* its replies wait for the batch in
	                                 * flight: it runs no command and is
	                                 * served no item until its result */
	/* The protocol's own state (src/proto/pstate.h: the records of the
	 * batch's replies a failed commit answers from, ...), set by the
	 * carrier; NULL for a session that speaks no protocol (the console's).
	 * The core reaches it only through the broker's hooks. */
	struct proto_state *ps;

	bool authed;                    /* --auth-file: authenticated */
	const struct perms *perms;      /* --auth-file: the user's rights, set
	                                 * at login; NULL: no --auth-file */
	int64_t denied_log_ms;          /* last "permission denied" log line */
	uint64_t denied_unlogged;       /* refusals since, not logged */
	const struct get_ops *gops;     /* how the current get answers */

	enum session_state state;

	struct open_list opens;         /* open items, oldest first */
	size_t nopens;

	/* SESSION_WAITING */
	struct evbuffer *held;          /* replies of commands run behind the
	                                 * waiting get: they follow its reply */
	bool held_in_batch;             /* this batch ran or sent such commands */
	bool held_some;                 /* held may be non-empty (spares a
	                                 * length call per command) */
	char *wait_line;                /* copy of the get's keys; waiters point here */
	struct waiter *waits;           /* one per key of the get, in order */
	size_t nwaits;
	bool monitoring;                /* the wait is a `monitor`: stream items */
	int64_t monitor_left;           /* items still wanted; -1 = no limit */

	bool dead;                      /* closed: stop reading its input */
};

/* Set up s for broker b with its buffers; -1 when out of memory. */
/* Do the session's replies (this batch's and those not yet written)
 * exceed its memory budget?  Then a multi-get hands out no further item,
 * a monitor stops, and the carrier runs no further command. */
static inline bool
session_over_budget(const struct session *s)
{
	return s->mem_budget > 0 &&
	    evbuffer_get_length(s->pend) +
	    (s->held_some ? evbuffer_get_length(s->held) : 0) +
	    s->out_len > s->mem_budget;
}

int session_init(struct session *s, struct broker *b, bool authed);
/* Return its open items, end its wait, leave the broker (s->dead). */
void session_close(struct session *s);
/* Free what session_init() allocated (after session_close()). */
void session_free(struct session *s);

/* The open item s holds longest on q, or NULL; and how many it holds. */
struct open_item *session_oldest_open(struct session *s, struct squeue *q);
size_t session_count_open(struct session *s, struct squeue *q);
void session_forget_open(struct session *s, struct open_item *oi);
/* Drop every session's records of open items on q (deleted or flushed). */
void sessions_forget_queue(struct broker *b, struct squeue *q);

/* May s do `need` (PERM_READ, PERM_WRITE) on queue name?  One branch
 * without --auth-file. */
static inline bool
session_may(const struct session *s, const char *name, size_t len, unsigned need)
{
	return s->perms == NULL || perms_allow(s->perms, name, len, need);
}

/* May s run the server-wide commands (PERM_ADMIN)? */
static inline bool
session_admin(const struct session *s)
{
	return s->perms == NULL || (s->perms->rights & PERM_ADMIN) != 0;
}

/* s was refused `what` (a command word) on queue name (len 0: none):
 * counted, and logged with the user and peer at most once a second per
 * session. */
void session_denied(struct session *s, const char *what, const char *name,
    size_t len);

/* End a wait: unlink from every queue, tell the owner (hooks->wait_end). */
void session_end_wait(struct session *s);

/* The batch's commit is over: when it failed, forget the items opened in
 * it (the store rolled their takes back).  The replies are the owner's. */
void session_batch_done(struct session *s, bool committed);

#endif
