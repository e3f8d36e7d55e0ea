/* conn.h -- a client connection: the socket under a broker session
 * (reading into its input, writing its committed replies, idleness). */
#ifndef SAKER_CONN_H
#define SAKER_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "batch.h"
#include "pstate.h"
#include "session.h"

struct conn {
	struct session s;               /* first: conn_of() */
	struct proto_state ps;          /* what its protocol keeps (s.ps) */
	TAILQ_ENTRY(conn) link;         /* every connection */
	TAILQ_ENTRY(conn) batch_link;   /* replies in this batch */
	TAILQ_ENTRY(conn) resume_link;  /* wait ended: input to run */
	bool in_resume;

	int fd;
	struct tls *tls;                /* --tls-cert on a TCP listener, else NULL */
	struct event *rev, *wev;
	bool reading;                   /* rev is added */
	struct evbuffer *out;           /* committed replies not yet written */

	struct event *wait_timer;       /* a blocking get's timeout */
	char peer[64];                  /* the client's host: the key of login
	                                 * throttling ("unix:uid=N" for -s) */
	char addr[72];                  /* host and port, which tell connections
	                                 * apart: logs, the console's holders */
	struct event *login_ev;         /* --auth-file: LOGIN_TIMEOUT_S */
	struct event *throttle_ev;      /* a login waiting for its delay */
	bool throttled;                 /* no command runs until it fires */
	char login_user[128];           /* the user of the login admitted last */
	size_t login_ulen;
	unsigned long login_checks;     /* auth_checks() when it was admitted */
	unsigned login_fails;           /* failed logins on this connection */
	struct event *idle_ev;          /* --idle-timeout */
	struct event *drain_ev;         /* --drain-timeout, over the budget */
	uint64_t written;               /* bytes written to it */
	uint64_t drain_mark;            /* `written` when drain_ev was armed */
	int64_t last_cmd_ms;            /* when a command last completed */

	int busy;                       /* inside conn_process() */
	/* TLS: the handshake is not over yet (in the handshakes list, its
	 * deadline armed) */
	bool handshaking;
	TAILQ_ENTRY(conn) hs_link;
	struct event *hs_ev;            /* --tls-handshake-timeout */
	int64_t accepted_ms;
};

/* The connection a session belongs to. */
static inline struct conn *
conn_of(struct session *s)
{
	return (struct conn *)s;
}

/* What connections need of the loop that runs them. */
struct conn_env {
	struct event_base *base;
	struct broker *broker;          /* every connection is its session */
	const struct timeval *idle_tv;  /* --idle-timeout; NULL = never */
	int64_t idle_timeout_ms;
	size_t max_conn_memory;         /* --max-conn-memory */
	int64_t drain_timeout_ms;       /* --drain-timeout */
	int64_t tls_handshake_ms;       /* --tls-handshake-timeout */
	unsigned tls_handshakes_max;    /* handshakes in progress at once */
	/* Serve the queues that gained items and resume woken connections
	 * (after each command, and after a callback that may wake some). */
	void (*drain)(void);
};
void conn_setup(const struct conn_env *env);

/* A connection on an accepted socket; `tls` makes it speak TLS. */
struct conn *conn_new(int fd, bool tls);
/* TLS handshakes in progress now. */
unsigned conn_tls_handshakes(void);
/* Change the most handshakes in progress at once (the fuzzers' way to
 * reach the budget with few connections). */
void conn_set_tls_handshakes_max(unsigned n);
/* The broker's login hooks (login.h has the policy). */
bool conn_login_admit(struct session *s, const char *user, size_t ulen);
void conn_login_failed(struct session *s, const char *how,
    void (*answer)(struct session *s));
void conn_login_ok(struct session *s);
/* The session's peer address as text. */
const char *conn_peer(struct session *s);
/* Close now: cancel waits, return open items to their queues. */
void conn_close(struct conn *c);

/* The first open connection, or NULL. */
struct conn *conn_first(void);
/* Close every connection after a last best-effort write (stopping). */
void conn_close_all(void);
/* No connection has replies waiting for a commit. */
bool conn_batch_empty(void);
/* The batch's commit is over: conn_flush() every connection of it. */
void conn_flush_batch(const struct commit_result *res);
/* The batch went in flight: its connections wait for its result, which
 * conn_flush_flight() sends them. */
void conn_batch_to_flight(void);
void conn_flush_flight(const struct commit_result *res);
/* While a batch is in flight: answer the connections of the gathering
 * batch that wrote nothing to the store. */
void conn_flush_unwritten(void);
/* Run the pipelined input of one connection whose wait ended; false when
 * there is none. */
bool conn_resume_one(void);

/* The broker's hooks for sessions that are connections (server.c uses
 * them for the broker's hooks table). */
void conn_schedule_flush(struct session *s);
bool conn_wait_start(struct session *s, int64_t timeout_ms);
void conn_wait_end(struct session *s);
void conn_hook_close(struct session *s);
void conn_hook_close_after_write(struct session *s);

#endif
