/*
 * delayproxy.c -- a TCP forwarder that holds every chunk of data for a
 * fixed time in each direction: a network between two processes on one
 * machine (for pgbench.sh; the kernel here has no netem).
 *
 *   cc -O2 -o delayproxy delayproxy.c -levent
 *   delayproxy LISTEN_PORT TARGET_PORT DELAY_US
 *
 * Listens on 127.0.0.1:LISTEN_PORT and connects each client to
 * 127.0.0.1:TARGET_PORT; data in either direction is forwarded DELAY_US
 * microseconds after it arrived, in order (so a round trip costs
 * 2 * DELAY_US more).  Runs until killed.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

struct chunk {
	STAILQ_ENTRY(chunk) link;
	int64_t due_us;
	size_t len;
	unsigned char data[];
};

struct dir {
	struct bufferevent *from, *to;
	STAILQ_HEAD(, chunk) q;
	struct event *timer;
	struct pair *pair;
};

struct pair {
	struct dir up, down;	/* client -> target, target -> client */
	int closing;
};

static struct event_base *base;
static int target_port;
static int64_t delay_us;

static int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
arm(struct dir *d)
{
	struct chunk *c = STAILQ_FIRST(&d->q);
	struct timeval tv;
	int64_t wait;

	if (c == NULL)
		return;
	wait = c->due_us - now_us();
	if (wait < 0)
		wait = 0;
	tv.tv_sec = wait / 1000000;
	tv.tv_usec = wait % 1000000;
	evtimer_add(d->timer, &tv);
}

static void
pair_free(struct pair *p)
{
	struct dir *ds[2] = { &p->up, &p->down };
	struct chunk *c;
	int i;

	for (i = 0; i < 2; i++) {
		while ((c = STAILQ_FIRST(&ds[i]->q)) != NULL) {
			STAILQ_REMOVE_HEAD(&ds[i]->q, link);
			free(c);
		}
		event_free(ds[i]->timer);
	}
	bufferevent_free(p->up.from);
	bufferevent_free(p->up.to);
	free(p);
}

static void
due_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dir *d = arg;
	struct chunk *c;
	int64_t now = now_us();

	(void)fd;
	(void)what;
	while ((c = STAILQ_FIRST(&d->q)) != NULL && c->due_us <= now) {
		STAILQ_REMOVE_HEAD(&d->q, link);
		bufferevent_write(d->to, c->data, c->len);
		free(c);
	}
	arm(d);
}

static void
read_cb(struct bufferevent *bev, void *arg)
{
	struct dir *d = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);
	struct chunk *c;
	int was_empty;

	if (len == 0)
		return;
	if ((c = malloc(sizeof(*c) + len)) == NULL)
		return;
	c->len = len;
	c->due_us = now_us() + delay_us;
	evbuffer_remove(in, c->data, len);
	was_empty = STAILQ_EMPTY(&d->q);
	STAILQ_INSERT_TAIL(&d->q, c, link);
	if (was_empty)
		arm(d);
}

static void
event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct dir *d = arg;

	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		pair_free(d->pair);
}

static void
nodelay(struct bufferevent *bev)
{
	int one = 1;

	setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one,
	    sizeof(one));
}

static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct sockaddr_in to;
	struct pair *p;

	(void)l;
	(void)sa;
	(void)salen;
	(void)arg;
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		evutil_closesocket(fd);
		return;
	}
	p->up.from = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
	p->up.to = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	p->down.from = p->up.to;
	p->down.to = p->up.from;
	p->up.pair = p->down.pair = p;
	STAILQ_INIT(&p->up.q);
	STAILQ_INIT(&p->down.q);
	p->up.timer = evtimer_new(base, due_cb, &p->up);
	p->down.timer = evtimer_new(base, due_cb, &p->down);
	memset(&to, 0, sizeof(to));
	to.sin_family = AF_INET;
	to.sin_port = htons((unsigned short)target_port);
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bufferevent_socket_connect(p->up.to, (struct sockaddr *)&to,
	    sizeof(to)) != 0) {
		pair_free(p);
		return;
	}
	nodelay(p->up.from);
	nodelay(p->up.to);
	bufferevent_setcb(p->up.from, read_cb, NULL, event_cb, &p->up);
	bufferevent_setcb(p->up.to, read_cb, NULL, event_cb, &p->down);
	bufferevent_enable(p->up.from, EV_READ | EV_WRITE);
	bufferevent_enable(p->up.to, EV_READ | EV_WRITE);
}

int
main(int argc, char **argv)
{
	struct event_config *cfg;
	struct sockaddr_in sin;
	struct evconnlistener *l;

	if (argc != 4) {
		fprintf(stderr, "usage: delayproxy LISTEN_PORT TARGET_PORT"
		    " DELAY_US\n");
		return 2;
	}
	target_port = atoi(argv[2]);
	delay_us = atoll(argv[3]);
	/* timerfd-backed timers: sub-millisecond delays */
	cfg = event_config_new();
	event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
	base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((unsigned short)atoi(argv[1]));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = evconnlistener_new_bind(base, accept_cb, NULL,
	    LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE, -1,
	    (struct sockaddr *)&sin, sizeof(sin));
	if (l == NULL) {
		perror("delayproxy: listen");
		return 1;
	}
	event_base_dispatch(base);
	return 0;
}
