/*
 * server.h -- the core's shared state: the server, its queues, its
 * connections.  One event loop; every store call happens on it.
 *
 * A loop turn is one batch: read callbacks parse and execute commands and
 * put their replies into each connection's `pend` buffer; after the pass
 * (server_turn()) the store is committed once (one fsync for the whole
 * turn), and `pend` moves to `out` and is written: no acknowledgement
 * leaves before the write it acknowledges is durable.
 */
#ifndef SAKER_SERVER_H
#define SAKER_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include <event2/event.h>

#include "options.h"
#include "saker/store.h"
#include "qconfig.h"
#include "stats.h"

struct conn;
struct squeue;

/* A blocked get on one of its queues. */
struct waiter {
	TAILQ_ENTRY(waiter) link;     /* in squeue.waiters */
	struct conn *conn;
	struct squeue *q;
	uint16_t raw_off, raw_len;    /* key token in conn->wait_line */
	unsigned opts;                /* PROTO_OPT_OPEN / PEEK (CLOSE done already) */
	bool linked;
};
TAILQ_HEAD(waiter_list, waiter);

/* An item this connection holds open (tentative read). */
struct open_item {
	TAILQ_ENTRY(open_item) link;  /* in conn.opens, oldest first */
	struct squeue *q;
	uint64_t id;
	uint64_t batch;               /* batch number it was taken in */
	int64_t opened_ms;
	int64_t deadline_ms;          /* open_timeout; 0 = none */
};
TAILQ_HEAD(open_list, open_item);

/* The core's view of a queue. Never freed while the server runs (the
 * driver queue behind it may be deleted and recreated). */
struct squeue {
	char *name;
	size_t len;
	saker_queue *h;               /* driver handle; NULL after delete */
	struct waiter_list waiters;
	size_t nwaiters;
	struct squeue *parent;        /* fanout: "a" for "a+b" */
	struct squeue **children;     /* fanout children (with or without h) */
	size_t nchildren, children_cap;
	bool ready;                   /* in server.ready */
	TAILQ_ENTRY(squeue) ready_link;
	uint64_t discarded;
	uint64_t open_timeouts;
	uint64_t enqueued, dequeued;  /* for /metrics */
	const struct queue_config *qc;  /* cached config_for(); see queue_cfg() */
	uint64_t qc_gen;
	struct squeue *grave_next;    /* deleted: srv->graveyard */
	bool in_grave;
};
TAILQ_HEAD(squeue_list, squeue);

enum server_status { STATUS_UP = 0, STATUS_READONLY, STATUS_QUIESCENT };

TAILQ_HEAD(conn_list, conn);

struct server {
	struct options *opt;
	struct event_base *base;
	saker_store *store;
	struct hashmap *queues;       /* name -> struct squeue */

	struct event *promote_ev;     /* timer for the earliest due item */
	int64_t promote_at;           /* when promote_ev fires; 0 = unarmed */
	struct event *sync_ev;        /* --sync periodic */
	struct event *store_fd_ev;    /* driver's watch_fd() */
	int store_fd;
	struct event *tick_ev;        /* driver's tick(), once a second */
	struct event *sweep_ev;       /* bounded sweep of expired items */
	const struct timeval *idle_tv;/* --idle-timeout as a common timeout */
	struct event *open_timeout_ev;/* earliest open-item deadline */
	int64_t open_timeout_at;
	struct config *config;        /* --config */
	uint64_t config_gen;          /* bumped on every (re)load */
	struct http_server *http;     /* --http */
	bool store_failed;            /* last commit failed: /healthz says so */
	char store_error[256];
	bool promote_failing;         /* promote() failed last time: retrying */
	struct event *sig_ev[4];
	struct evconnlistener *listeners[2];

	uint64_t batch;               /* current batch number */
	uint64_t flush_batch;         /* the batch the commit is flushing */
	bool commit_scheduled;        /* commit at the end of this turn */
	bool loop_done;               /* stopping: the last commit ran */
	bool dirty;                   /* store written since last commit */
	struct conn_list batch_conns; /* connections with replies in this batch */
	struct squeue_list ready;     /* queues that gained items: serve waiters */
	struct squeue *graveyard;     /* deleted queues, freed after the commit */
	struct conn_list resume;      /* woken connections with pipelined input */
	bool draining;

	struct conn_list conns;
	enum server_status status;
	bool stopping;
	struct stats stats;
};

extern struct server *srv;

/* Mark the store dirty and make sure the commit runs this loop turn. */
void server_touch(void);
/* Have the commit flush this connection's pending replies this turn. */
void server_schedule_flush(struct conn *c);
/* Serve waiters of every queue that gained items; resume woken connections. */
void server_drain(void);
/* Arm the promotion timer for `due_ms` if earlier than the armed time. */
void server_arm_promote(int64_t due_ms);
/* Begin a graceful stop (shutdown command, signals). */
void server_stop(void);
/* Record that the store refuses writes (for /healthz). */
void server_store_failed(const char *reason);
/* Arm the open-item timeout timer for `deadline_ms` if earlier. */
void server_arm_open_timeout(int64_t deadline_ms);

/* Bind, drop privileges, open the store, load queues: 0, or 1 after
 * printing why.  Then server_loop() until stopped, and server_exit() (also
 * after a failed server_init()). */
int server_init(struct options *opt);
void server_loop(void);
/* One loop turn and its commit (server_loop() runs these; tests too). */
void server_turn(bool block);
void server_exit(void);

#endif
