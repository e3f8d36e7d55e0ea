/* conn.c -- a client connection: reading, choosing the protocol, framing
 * text commands and data blocks, batched replies, writing, closing. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "commands.h"
#include "conn.h"
#include "log.h"
#include "proto_binary.h"
#include "proto_meta.h"
#include "proto_text.h"
#include "queues.h"

/* Output beyond this stops reading from the client until it drains: a
 * client that pipelines without reading cannot grow our memory unbounded. */
#define OUT_HIGH_WATER (4u * 1024 * 1024)
/* Input we buffer behind a blocking get before we stop reading. */
/* Bytes asked of one read(). */
#define READ_CHUNK 16384
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
	c->in = evbuffer_new();
	c->pend = evbuffer_new();
	c->out = evbuffer_new();
	c->rev = event_new(srv->base, fd, EV_READ | EV_PERSIST, conn_read_cb, c);
	c->wev = event_new(srv->base, fd, EV_WRITE | EV_PERSIST, conn_write_cb, c);
	if (c->in == NULL || c->pend == NULL || c->out == NULL || c->rev == NULL ||
	    c->wev == NULL) {
		if (c->in) evbuffer_free(c->in);
		if (c->pend) evbuffer_free(c->pend);
		if (c->out) evbuffer_free(c->out);
		if (c->rev) event_free(c->rev);
		if (c->wev) event_free(c->wev);
		free(c);
		return NULL;
	}
	event_priority_set(c->rev, 0);
	event_priority_set(c->wev, 0);
	TAILQ_INIT(&c->opens);
	/* without --auth-file every connection starts authenticated */
	c->authed = !auth_active;
	TAILQ_INSERT_TAIL(&srv->conns, c, link);
	event_add(c->rev, NULL);
	c->reading = true;
	c->last_cmd_ms = saker_now_ms();
	if (srv->idle_tv != NULL) {
		c->idle_ev = evtimer_new(srv->base, conn_idle_cb, c);
		if (c->idle_ev != NULL)
			evtimer_add(c->idle_ev, srv->idle_tv);
	}
	srv->stats.curr_connections++;
	srv->stats.total_connections++;
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
	if (c->state == CONN_WAITING || idle < (int64_t)srv->opt->idle_timeout_s * 1000) {
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
	evbuffer_free(c->in);
	evbuffer_free(c->pend);
	evbuffer_free(c->out);
	event_free(c->rev);
	event_free(c->wev);
	gg_free(c);
	free(c->brecs);
	free(c->kept);
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
	if (!c->reading && !c->dead && c->state != CONN_CLOSING) {
		event_add(c->rev, NULL);
		c->reading = true;
	}
}

void
conn_close(struct conn *c)
{
	struct open_item *oi;

	if (c->dead)
		return;
	c->dead = true;
	if (c->state == CONN_WAITING)
		conn_end_wait(c);
	/* Return open items newest first, so each lands in front of the
	 * previous one and the queue head keeps their original order. */
	while ((oi = TAILQ_LAST(&c->opens, open_list)) != NULL) {
		if (oi->q->h != NULL) {
			int rc = srv->store->driver->release(srv->store, oi->q->h, oi->id);
			if (rc == SAKER_OK)
				server_touch();
			else if (rc != SAKER_ENOTFOUND)
				log_error("returning an open item to %s: %s", oi->q->name,
				    srv->store->driver->errmsg(srv->store));
		}
		conn_forget_open(c, oi);
	}
	event_del(c->rev);
	event_del(c->wev);
	if (c->idle_ev != NULL)
		event_del(c->idle_ev);
	close(c->fd);
	c->fd = -1;
	TAILQ_REMOVE(&srv->conns, c, link);
	if (c->in_batch) {
		TAILQ_REMOVE(&srv->batch_conns, c, batch_link);
		c->in_batch = false;
	}
	if (c->in_resume) {
		TAILQ_REMOVE(&srv->resume, c, resume_link);
		c->in_resume = false;
	}
	srv->stats.curr_connections--;
	if (c->busy == 0)
		conn_free(c);
}

void
conn_close_after_write(struct conn *c)
{
	c->state = CONN_CLOSING;
	pause_reading(c);
	server_schedule_flush(c);
}

/* --- replies ---------------------------------------------------------- */

void
conn_reply(struct conn *c, const char *s, size_t len)
{
	evbuffer_add(c->pend, s, len);
	server_schedule_flush(c);
}

void
conn_reply_str(struct conn *c, const char *s)
{
	conn_reply(c, s, strlen(s));
	conn_reply_done(c);
}

void
conn_reply_done(struct conn *c)
{
	size_t end = evbuffer_get_length(c->pend);

	if (c->reply_keep != KEEP_NEVER) {
		if (c->nkept == c->kept_cap) {
			size_t ncap = c->kept_cap ? c->kept_cap * 2 : 8;
			struct kept_reply *n = realloc(c->kept, ncap * sizeof(*n));

			if (n == NULL) {
				/* a failed commit answers it with SERVER_ERROR
				 * like the rest */
				log_error("out of memory recording a reply");
				goto done;
			}
			c->kept = n;
			c->kept_cap = ncap;
		}
		c->kept[c->nkept].idx = c->batch_replies;
		c->kept[c->nkept].keep = c->reply_keep;
		c->kept[c->nkept].start = c->reply_start;
		c->kept[c->nkept].end = end;
		c->nkept++;
	}
done:
	c->reply_keep = KEEP_NEVER;
	c->reply_start = end;
	c->batch_replies++;
}

void
conn_reply_truncate(struct conn *c, size_t len, size_t nbrecs)
{
	size_t now = evbuffer_get_length(c->pend);

	if (c->nbrecs > nbrecs)
		c->nbrecs = nbrecs;
	if (now <= len)
		return;
	/* evbuffer cannot cut its tail: move the head aside, drop the rest */
	{
		struct evbuffer *head = evbuffer_new();

		if (head != NULL && evbuffer_remove_buffer(c->pend, head, len) ==
		    (int)len) {
			evbuffer_drain(c->pend, now - len);
			evbuffer_add_buffer(c->pend, head);
			evbuffer_free(head);
			return;
		}
		if (head != NULL)
			evbuffer_free(head);
	}
	/* cannot fix the reply stream: end the connection instead */
	log_error("out of memory undoing a reply; closing the connection");
	evbuffer_drain(c->pend, evbuffer_get_length(c->pend));
	c->nbrecs = 0;
	conn_close_after_write(c);
}

void
conn_reply_keep(struct conn *c, enum reply_keep keep)
{
	if (c->proto == CONN_PROTO_BINARY) {
		if (c->nbrecs > 0 && c->brecs[c->nbrecs - 1].keep < keep)
			c->brecs[c->nbrecs - 1].keep = (uint8_t)keep;
	} else if (c->reply_keep < keep) {
		c->reply_keep = (uint8_t)keep;
	}
}

void
conn_replyf(struct conn *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	evbuffer_add_vprintf(c->pend, fmt, ap);
	va_end(ap);
	server_schedule_flush(c);
}

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
	srv->stats.bytes_written += (uint64_t)n;
	if (evbuffer_get_length(c->out) > 0) {
		event_add(c->wev, NULL);
		if (evbuffer_get_length(c->out) > OUT_HIGH_WATER)
			pause_reading(c);
		return;
	}
drained:
	event_del(c->wev);
	if (c->state == CONN_CLOSING) {
		conn_close(c);
		return;
	}
	if (!c->reading && c->state != CONN_WAITING) {
		resume_reading(c);
		/* input may have piled up while we were not reading */
		if (evbuffer_get_length(c->in) > 0) {
			conn_process(c);
			server_drain();
		}
	}
}

bool
conn_resend_kept(struct conn *c, struct evbuffer *sent, size_t *pos,
    size_t start, size_t end, unsigned keep, bool in_doubt)
{
	if (sent == NULL || !(keep == KEEP_ALWAYS ||
	    (in_doubt && keep == KEEP_IN_DOUBT)))
		return false;
	evbuffer_drain(sent, start - *pos);
	evbuffer_remove_buffer(sent, c->pend, end - start);
	*pos = end;
	return true;
}

/* Text replies of a failed batch: SERVER_ERROR for each, except those
 * kept (enum reply_keep), which are sent from `sent` as they were. */
static void
text_fail_batch(struct conn *c, struct evbuffer *sent, bool in_doubt,
    const char *reason)
{
	size_t k = 0, pos = 0;
	unsigned i;

	for (i = 0; i < c->batch_replies; i++) {
		if (k < c->nkept && c->kept[k].idx == i) {
			const struct kept_reply *t = &c->kept[k++];

			if (conn_resend_kept(c, sent, &pos, t->start, t->end,
			    t->keep, in_doubt))
				continue;
		}
		evbuffer_add_printf(c->pend, "SERVER_ERROR %s\r\n", reason);
	}
}

void
conn_flush(struct conn *c, bool committed, bool in_doubt, const char *reason)
{
	struct open_item *oi, *next;

	if (!committed) {
		struct evbuffer *sent = evbuffer_new();

		if (sent == NULL)
			evbuffer_drain(c->pend, evbuffer_get_length(c->pend));
		else {
			evbuffer_add_buffer(sent, c->pend);
		}
		if (c->proto == CONN_PROTO_BINARY)
			bin_fail_batch(c, sent, in_doubt, reason);
		else
			text_fail_batch(c, sent, in_doubt, reason);
		if (sent != NULL)
			evbuffer_free(sent);
		/* the store rolled back the takes of this batch */
		for (oi = TAILQ_FIRST(&c->opens); oi != NULL; oi = next) {
			next = TAILQ_NEXT(oi, link);
			if (oi->batch == srv->flush_batch)
				conn_forget_open(c, oi);
		}
	}
	c->batch_replies = 0;
	c->nbrecs = 0;
	c->nkept = 0;
	c->reply_start = 0;
	c->reply_keep = KEEP_NEVER;
	evbuffer_add_buffer(c->out, c->pend);
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

/* --- open items --------------------------------------------------------- */

struct open_item *
conn_oldest_open(struct conn *c, struct squeue *q)
{
	struct open_item *oi;

	TAILQ_FOREACH(oi, &c->opens, link)
		if (oi->q == q)
			return oi;
	return NULL;
}

size_t
conn_count_open(struct conn *c, struct squeue *q)
{
	struct open_item *oi;
	size_t n = 0;

	TAILQ_FOREACH(oi, &c->opens, link)
		if (oi->q == q)
			n++;
	return n;
}

void
conn_forget_open(struct conn *c, struct open_item *oi)
{
	TAILQ_REMOVE(&c->opens, oi, link);
	c->nopens--;
	free(oi);
}

void
conns_forget_queue(struct squeue *q)
{
	struct open_item *oi, *next;
	struct conn *c;

	TAILQ_FOREACH(c, &srv->conns, link) {
		for (oi = TAILQ_FIRST(&c->opens); oi != NULL; oi = next) {
			next = TAILQ_NEXT(oi, link);
			if (oi->q == q)
				conn_forget_open(c, oi);
		}
	}
}

/* --- waiting ------------------------------------------------------------ */

void
conn_end_wait(struct conn *c)
{
	size_t i;

	for (i = 0; i < c->nwaits; i++)
		waiter_unlink(&c->waits[i]);
	free(c->waits);
	c->waits = NULL;
	c->nwaits = 0;
	free(c->wait_line);
	c->wait_line = NULL;
	if (c->wait_timer != NULL) {
		event_free(c->wait_timer);
		c->wait_timer = NULL;
	}
	c->monitoring = false;
	if (c->state == CONN_WAITING)
		c->state = CONN_CMD;
	/* the wait was a command in progress: idleness starts now */
	c->last_cmd_ms = saker_now_ms();
	/* pipelined input that arrived meanwhile runs from server_drain() */
	if (!c->dead && !c->in_resume) {
		TAILQ_INSERT_TAIL(&srv->resume, c, resume_link);
		c->in_resume = true;
	}
}

/* --- input -------------------------------------------------------------- */

static inline __attribute__((always_inline)) int
data_block(struct conn *c, size_t need, size_t bytes, const char **pp)
{
	size_t total = need + bytes + 2;
	const unsigned char *p;

	if (evbuffer_get_length(c->in) < total)
		return 0;
	p = evbuffer_pullup(c->in, (ev_ssize_t)total);
	if (p[need + bytes] != '\r' || p[need + bytes + 1] != '\n') {
		conn_reply_str(c, PROTO_ERR_CHUNK);
		conn_close_after_write(c);
		return -1;
	}
	*pp = (const char *)p;
	return 1;
}

int
conn_data_block(struct conn *c, size_t need, size_t bytes, const char **pp)
{
	return data_block(c, need, bytes, pp);
}

void
conn_protocol_error(struct conn *c, const char *why)
{
	/* the replies before the bad packet still go out */
	log_info("closing a connection: %s", why);
	conn_close_after_write(c);
}

/*
 * Before --auth-file authentication only memcached's ASCII login is
 * accepted: `set <any> <flags> <exptime> <bytes>` whose data is
 * "user password".  Returns as conn_one_command does.
 */
static bool
text_auth_command(struct conn *c, const char *line, size_t linelen, size_t need)
{
	const char *tok[6] = { NULL }, *p, *sp;
	size_t toklen[6] = { 0 }, i, ntok = 0, n;
	uint64_t bytes = 0;
	int rc;

	/* split as the text parser does, but accept any key */
	for (i = 0; i < linelen && ntok < 6; ) {
		while (i < linelen && (line[i] == ' ' || line[i] == '\t'))
			i++;
		if (i == linelen)
			break;
		tok[ntok] = line + i;
		while (i < linelen && line[i] != ' ' && line[i] != '\t')
			i++;
		toklen[ntok] = (size_t)(line + i - tok[ntok]);
		ntok++;
	}
	for (i = 0; ntok >= 5 && i < toklen[4]; i++) {
		unsigned d = (unsigned)(unsigned char)tok[4][i] - '0';
		if (d > 9 || bytes > UINT32_MAX)
			break;
		bytes = bytes * 10 + d;
	}
	if (ntok < 5 || ntok > 6 || toklen[0] != 3 ||
	    strncasecmp(tok[0], "set", 3) != 0 || toklen[4] == 0 ||
	    i != toklen[4] || bytes > 4096) {
		conn_reply_str(c, "CLIENT_ERROR unauthenticated\r\n");
		evbuffer_drain(c->in, need);
		if (ntok >= 5 && toklen[0] == 3 && strncasecmp(tok[0], "set", 3) == 0 &&
		    toklen[4] > 0 && i == toklen[4]) {
			/* a set with a readable length: skip its data */
			c->swallow = (size_t)bytes + 2;
			c->state = CONN_SWALLOW;
		}
		return true;
	}
	n = (size_t)bytes;
	rc = conn_data_block(c, need, n, &p);
	if (rc <= 0)
		return false;
	p += need;
	sp = memchr(p, ' ', n);
	if (sp != NULL && auth_check(p, (size_t)(sp - p), sp + 1,
	    (size_t)(p + n - sp - 1))) {
		c->authed = true;
		conn_reply_str(c, "STORED\r\n");
	} else {
		log_warn("authentication failed on a connection");
		conn_reply_str(c, "CLIENT_ERROR authentication failure\r\n");
	}
	evbuffer_drain(c->in, need + n + 2);
	return true;
}

/* Handle one complete line at the front of c->in, `eol` bytes of line end
 * after `len` bytes of line.  Returns false when more input is needed. */
static bool
conn_one_command(struct conn *c, size_t len, size_t eol)
{
	static struct proto_cmd cmd;
	size_t linelen = len, need = len + eol, total;
	const char *line, *err, *p;
	int rc;

	line = (const char *)evbuffer_pullup(c->in, (ev_ssize_t)need);
	if (linelen > 0 && line[linelen - 1] == '\r')
		linelen--;
	if (linelen > PROTO_MAX_LINE) {
		conn_reply_str(c, PROTO_ERR_LINE_TOO_LONG);
		conn_close_after_write(c);
		return false;
	}
	/* one test keeps logins, meta commands and mg groups off the path of
	 * plain get and set */
	if (__builtin_expect((line[0] == 'm') | !c->authed | (c->grp != NULL), 0)) {
		if (!c->authed)
			return text_auth_command(c, line, linelen, need);
		if (line[0] == 'm' && meta_is_command(line, linelen))
			return meta_command(c, line, linelen, need);
		if (gg_pending(c)) {
			/* quiet mg lines end at any other command */
			meta_run_group(c);
			if (c->state != CONN_CMD)
				return false;
			line = (const char *)evbuffer_pullup(c->in, (ev_ssize_t)need);
		}
	}
	err = proto_parse_line(line, linelen, &cmd);
	if (err != NULL) {
		conn_reply_str(c, err);
		evbuffer_drain(c->in, need);
		if (cmd.swallow >= 0) {
			c->swallow = (size_t)cmd.swallow;
			c->state = CONN_SWALLOW;
		}
		return true;
	}
	if (cmd.type == PROTO_CMD_NOSTORE) {
		/* refused, but its data block is still on its way: skip it */
		if (!cmd.noreply) {
			conn_replyf(c, "CLIENT_ERROR %.*s not supported on a queue\r\n",
			    (int)cmd.word_len, cmd.word);
			conn_reply_done(c);
		}
		evbuffer_drain(c->in, need);
		c->swallow = cmd.bytes + 2;
		c->state = CONN_SWALLOW;
		return true;
	}
	if (cmd.type != PROTO_CMD_SET) {
		cmd_execute(c, &cmd, line, linelen, NULL);
		if (!c->dead)
			evbuffer_drain(c->in, need);
		return true;
	}
	if (cmd.bytes > srv->opt->max_item_size) {
		conn_reply_str(c, PROTO_ERR_TOO_LARGE);
		evbuffer_drain(c->in, need);
		c->swallow = cmd.bytes + 2;
		c->state = CONN_SWALLOW;
		return true;
	}
	total = need + cmd.bytes + 2;
	rc = data_block(c, need, cmd.bytes, &p);
	if (rc <= 0)
		return false;
	if (p != line) {
		/* the pullup moved the line: parse again so pointers are valid */
		line = p;
		(void)proto_parse_line(line, linelen, &cmd);
	}
	cmd_execute(c, &cmd, line, linelen, p + need);
	if (!c->dead)
		evbuffer_drain(c->in, total);
	return true;
}

void
conn_process(struct conn *c)
{
	c->busy++;
	while (!c->dead && (c->state == CONN_CMD || c->state == CONN_SWALLOW)) {
		size_t avail = evbuffer_get_length(c->in), eol = 0;
		struct evbuffer_ptr pos;

		if (avail == 0)
			break;
		if (c->state == CONN_SWALLOW) {
			size_t n = avail < c->swallow ? avail : c->swallow;
			evbuffer_drain(c->in, n);
			c->swallow -= n;
			if (c->swallow == 0)
				c->state = CONN_CMD;
			continue;
		}
		if (c->proto != CONN_PROTO_TEXT) {
			if (c->proto == CONN_PROTO_UNKNOWN) {
				/* memcached's rule: a binary client's first byte is 0x80 */
				unsigned char first;
				evbuffer_copyout(c->in, &first, 1);
				c->proto = first == BIN_REQ_MAGIC ? CONN_PROTO_BINARY :
				    CONN_PROTO_TEXT;
			}
			if (c->proto == CONN_PROTO_BINARY) {
				if (!bin_one(c))
					break;
				if (srv->idle_tv != NULL)
					c->last_cmd_ms = saker_now_ms();
				server_drain();
				continue;
			}
		}
		pos = evbuffer_search_eol(c->in, NULL, &eol, EVBUFFER_EOL_LF);
		if (pos.pos < 0) {
			if (avail > PROTO_MAX_LINE + 1) {
				conn_reply_str(c, PROTO_ERR_LINE_TOO_LONG);
				conn_close_after_write(c);
			}
			break;
		}
		if (!conn_one_command(c, (size_t)pos.pos, eol))
			break;
		if (srv->idle_tv != NULL)
			c->last_cmd_ms = saker_now_ms();
		/* hand items made visible by this command to their waiters */
		server_drain();
	}
	c->busy--;
	if (c->dead && c->busy == 0)
		conn_free(c);
}

/* One read() straight into the input buffer (evbuffer_read would add an
 * FIONREAD ioctl per call: a third syscall per request). */
static ssize_t
conn_read(struct conn *c, evutil_socket_t fd)
{
	struct evbuffer_iovec v;
	ssize_t n;

	if (evbuffer_reserve_space(c->in, READ_CHUNK, &v, 1) < 1)
		return -1;
	n = read(fd, v.iov_base, READ_CHUNK);
	v.iov_len = n > 0 ? (size_t)n : 0;
	evbuffer_commit_space(c->in, &v, 1);
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
	srv->stats.bytes_read += (uint64_t)n;
	if (c->state == CONN_WAITING) {
		/* keep reading to notice a disconnect, but not without bound */
		if (evbuffer_get_length(c->in) > IN_HIGH_WATER)
			pause_reading(c);
		return;
	}
	c->busy++;
	conn_process(c);
	server_drain();
	if (!c->dead && evbuffer_get_length(c->out) > OUT_HIGH_WATER)
		pause_reading(c);
	if (--c->busy == 0 && c->dead)
		conn_free(c);
}
