/*
 * server.h -- sakerd's event loop around one broker: listeners, the
 * per-turn commit and flush, timers, signals.  One event loop; every store
 * call happens on it.
 *
 * A loop turn is one batch: read callbacks parse and execute commands and
 * put their replies into each session's `pend` buffer; after the pass
 * (server_turn()) the broker commits once (one fsync for the whole turn),
 * and `pend` moves to each connection's `out` and is written: no
 * acknowledgement leaves before the write it acknowledges is durable.
 */
#ifndef SAKER_SERVER_H
#define SAKER_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include <event2/event.h>

#include "broker.h"
#include "options.h"

struct server {
	struct broker broker;         /* the queues and the store */
	struct options *opt;
	struct event_base *base;

	struct event *promote_ev;     /* timer for the earliest due item */
	int64_t promote_at;           /* when promote_ev fires; 0 = unarmed */
	struct event *sync_ev;        /* --sync periodic */
	struct event *store_fd_ev;    /* driver's watch_fd() */
	struct event *flight_ev;      /* the batch in flight's result */
	struct event *gather_ev;      /* the gathering window after it */
	bool gathering;               /* in that window: no commit yet */
	int store_fd;
	struct event *tick_ev;        /* driver's tick(), once a second */
	struct event *sweep_ev;       /* bounded sweep of expired items */
	struct event *open_timeout_ev;/* earliest open-item deadline */
	int64_t open_timeout_at;
	struct http_server *http;     /* --http */
	struct event *sig_ev[4];
	struct evconnlistener *listeners[2];
	/* TCP and Unix sockets bound but not yet listening (-1 once a
	 * listener owns them): the store opens in between */
	int listen_fd[2];
	char listen_name[2][300];

	bool commit_scheduled;        /* commit at the end of this turn */
	bool loop_done;               /* stopping: the last commit ran */
	bool draining;
	bool stopping;
};

extern struct server *srv;

/* Serve waiters of every queue that gained items; resume woken connections. */
void server_drain(void);
/* Commit the batch now and send its replies (the console's POSTs answer
 * the outcome); false with the reason in why when it failed. */
bool server_commit_now(char *why, size_t len);

/* Bind, drop privileges, open the store, load queues, and only then
 * listen: 0, or 1 after printing why.  Then server_loop() until stopped, and server_exit() (also
 * after a failed server_init()). */
int server_init(struct options *opt);
void server_loop(void);
/* One loop turn and its commit (server_loop() runs these; tests too). */
void server_turn(bool block);
void server_exit(void);

#endif
