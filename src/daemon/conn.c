/* conn.c -- a client connection: the socket under a broker session.
 * Reading into the session's input and running its protocol, writing the
 * committed replies, waits' timers, idleness, closing. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "conn.h"
#include "log.h"
#include "ops.h"
#include "proto.h"
#include "proto_text.h"

/* Output beyond this stops reading from the client until it drains: a
 * client that pipelines without reading cannot grow our memory unbounded. */
#define OUT_HIGH_WATER (4u * 1024 * 1024)
/* Bytes asked of one read(). */
#define READ_CHUNK 16384
/* Input we buffer behind a blocking get before we stop reading. */
#define IN_HIGH_WATER (1u * 1024 * 1024 + PROTO_MAX_LINE)

static void conn_read_cb(evutil_socket_t fd, short what, void *arg);
static void conn_write_cb(evutil_socket_t fd, short what, void *arg);
static void conn_idle_cb(evutil_socket_t fd, short what, void *arg);

struct conn *
conn_new(int fd)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->fd = fd;
	c->out = evbuffer_new();
	c->rev = event_new(srv->base, fd, EV_READ | EV_PERSIST, conn_read_cb, c);
	c->wev = event_new(srv->base, fd, EV_WRITE | EV_PERSIST, conn_write_cb, c);
	/* without --auth-file every connection starts authenticated */
	if (c->out == NULL || c->rev == NULL || c->wev == NULL ||
	    session_init(&c->s, &srv->broker, !auth_active) != 0) {
		if (c->out) evbuffer_free(c->out);
		if (c->rev) event_free(c->rev);
		if (c->wev) event_free(c->wev);
		free(c);
		return NULL;
	}
	event_priority_set(c->rev, 0);
	event_priority_set(c->wev, 0);
	TAILQ_INSERT_TAIL(&srv->conns, c, link);
	event_add(c->rev, NULL);
	c->reading = true;
	c->last_cmd_ms = saker_now_ms();
	if (srv->idle_tv != NULL) {
		c->idle_ev = evtimer_new(srv->base, conn_idle_cb, c);
		if (c->idle_ev != NULL)
			evtimer_add(c->idle_ev, srv->idle_tv);
	}
	srv->broker.stats.curr_connections++;
	srv->broker.stats.total_connections++;
	return c;
}

/*
 * --idle-timeout: a connection that completed no command for that long is
 * closed, whether it sends nothing (half-open), a byte now and then
 * (slowloris) or never reads its replies.  A blocked get is not idle.
 */
static void
conn_idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	int64_t idle = saker_now_ms() - c->last_cmd_ms;

	(void)fd;
	(void)what;
	if (c->s.state == SESSION_WAITING ||
	    idle < (int64_t)srv->opt->idle_timeout_s * 1000) {
		evtimer_add(c->idle_ev, srv->idle_tv);
		return;
	}
	log_info("closing a connection idle for %lld ms", (long long)idle);
	conn_close(c);
	server_drain();
}

static void
conn_free(struct conn *c)
{
	if (c->idle_ev != NULL)
		event_free(c->idle_ev);
	if (c->wait_timer != NULL)
		event_free(c->wait_timer);
	evbuffer_free(c->out);
	event_free(c->rev);
	event_free(c->wev);
	proto_session_free(&c->s);
	session_free(&c->s);
	free(c);
}

static void
pause_reading(struct conn *c)
{
	if (c->reading) {
		event_del(c->rev);
		c->reading = false;
	}
}

static void
resume_reading(struct conn *c)
{
	if (!c->reading && !c->s.dead && c->s.state != SESSION_CLOSING) {
		event_add(c->rev, NULL);
		c->reading = true;
	}
}

void
conn_close(struct conn *c)
{
	if (c->s.dead)
		return;
	/* ends its wait and returns its open items */
	session_close(&c->s);
	event_del(c->rev);
	event_del(c->wev);
	if (c->idle_ev != NULL)
		event_del(c->idle_ev);
	close(c->fd);
	c->fd = -1;
	TAILQ_REMOVE(&srv->conns, c, link);
	if (c->s.flush_scheduled) {
		TAILQ_REMOVE(&srv->batch_conns, c, batch_link);
		c->s.flush_scheduled = false;
	}
	if (c->in_resume) {
		TAILQ_REMOVE(&srv->resume, c, resume_link);
		c->in_resume = false;
	}
	srv->broker.stats.curr_connections--;
	if (c->busy == 0)
		conn_free(c);
}

void
conn_close_after_write(struct conn *c)
{
	c->s.state = SESSION_CLOSING;
	pause_reading(c);
	reply_schedule(&c->s);
	/* a session already in the batch still needs the commit to run */
	srv->commit_scheduled = true;
}

/* --- the broker's hooks ------------------------------------------------- */

void
conn_schedule_flush(struct session *s)
{
	struct conn *c = conn_of(s);

	TAILQ_INSERT_TAIL(&srv->batch_conns, c, batch_link);
	srv->commit_scheduled = true;
}

static void
wait_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	(void)fd;
	(void)what;
	op_wait_timeout(&c->s);
	server_drain();
}

bool
conn_wait_start(struct session *s, int64_t timeout_ms)
{
	struct conn *c = conn_of(s);
	struct timeval tv;

	if (c->wait_timer == NULL &&
	    (c->wait_timer = evtimer_new(srv->base, wait_timeout_cb, c)) == NULL)
		return false;
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	event_add(c->wait_timer, &tv);
	return true;
}

void
conn_wait_end(struct session *s)
{
	struct conn *c = conn_of(s);

	if (c->wait_timer != NULL)
		event_del(c->wait_timer);
	/* the wait was a command in progress: idleness starts now */
	c->last_cmd_ms = saker_now_ms();
	/* pipelined input that arrived meanwhile runs from server_drain() */
	if (!s->dead && !c->in_resume) {
		TAILQ_INSERT_TAIL(&srv->resume, c, resume_link);
		c->in_resume = true;
	}
}

void
conn_hook_close(struct session *s)
{
	conn_close(conn_of(s));
}

void
conn_hook_close_after_write(struct session *s)
{
	conn_close_after_write(conn_of(s));
}

/* --- output ------------------------------------------------------------- */

static void
conn_write(struct conn *c)
{
	size_t before = evbuffer_get_length(c->out);
	int n;

	if (before == 0)
		goto drained;
	n = evbuffer_write(c->out, c->fd);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
			event_add(c->wev, NULL);
			return;
		}
		conn_close(c);
		return;
	}
	srv->broker.stats.bytes_written += (uint64_t)n;
	if (evbuffer_get_length(c->out) > 0) {
		event_add(c->wev, NULL);
		if (evbuffer_get_length(c->out) > OUT_HIGH_WATER)
			pause_reading(c);
		return;
	}
drained:
	event_del(c->wev);
	if (c->s.state == SESSION_CLOSING) {
		conn_close(c);
		return;
	}
	if (!c->reading && c->s.state != SESSION_WAITING) {
		resume_reading(c);
		/* input may have piled up while we were not reading */
		if (evbuffer_get_length(c->s.in) > 0) {
			conn_process(c);
			server_drain();
		}
	}
}

void
conn_flush(struct conn *c, const struct commit_result *res)
{
	struct session *s = &c->s;

	if (!res->ok) {
		struct evbuffer *sent = evbuffer_new();

		if (sent == NULL)
			evbuffer_drain(s->pend, evbuffer_get_length(s->pend));
		else
			evbuffer_add_buffer(sent, s->pend);
		proto_fail_batch(s, sent, res->in_doubt, res->reason);
		if (sent != NULL)
			evbuffer_free(sent);
	}
	session_batch_done(s, res->ok);
	reply_reset(s);
	evbuffer_add_buffer(c->out, s->pend);
	conn_write(c);
}

static void
conn_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	(void)fd;
	(void)what;
	conn_write(c);
}

/* --- input -------------------------------------------------------------- */

void
conn_process(struct conn *c)
{
	struct session *s = &c->s;

	c->busy++;
	while (!s->dead && (s->state == SESSION_CMD || s->state == SESSION_SWALLOW)) {
		int r = proto_step(s);

		if (r == PROTO_STOP)
			break;
		if (r == PROTO_SKIPPED)
			continue;
		if (srv->idle_tv != NULL)
			c->last_cmd_ms = saker_now_ms();
		/* hand items made visible by this command to their waiters */
		server_drain();
	}
	c->busy--;
	if (s->dead && c->busy == 0)
		conn_free(c);
}

/* One read() straight into the input buffer (evbuffer_read would add an
 * FIONREAD ioctl per call: a third syscall per request). */
static ssize_t
conn_read(struct conn *c, evutil_socket_t fd)
{
	struct evbuffer_iovec v;
	ssize_t n;

	if (evbuffer_reserve_space(c->s.in, READ_CHUNK, &v, 1) < 1)
		return -1;
	n = read(fd, v.iov_base, READ_CHUNK);
	v.iov_len = n > 0 ? (size_t)n : 0;
	evbuffer_commit_space(c->s.in, &v, 1);
	return n;
}

static void
conn_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	ssize_t n;

	(void)what;
	n = conn_read(c, fd);
	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		conn_close(c);
		server_drain();
		return;
	}
	srv->broker.stats.bytes_read += (uint64_t)n;
	if (c->s.state == SESSION_WAITING) {
		/* keep reading to notice a disconnect, but not without bound */
		if (evbuffer_get_length(c->s.in) > IN_HIGH_WATER)
			pause_reading(c);
		return;
	}
	c->busy++;
	conn_process(c);
	server_drain();
	if (!c->s.dead && evbuffer_get_length(c->out) > OUT_HIGH_WATER)
		pause_reading(c);
	if (--c->busy == 0 && c->s.dead)
		conn_free(c);
}
