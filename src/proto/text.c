/* text.c -- the memcache text protocol on a session: line and data-block
 * framing, the ASCII login, the commands and their text replies. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth.h"
#include "requeue.h"
#include "report.h"
#include "log.h"
#include "proto_meta.h"
#include "proto_text.h"
#include "getgroup.h"
#include "text.h"
#include "textio.h"

/* --- replies ------------------------------------------------------------ */

static char *
fmt_u64(char *end, uint64_t v)
{
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	return end;
}

/* VALUE <key> <flags> <bytes>[ <cas>], the data, with the key echoed as
 * sent.  Written with one reserve/commit into the reply buffer: a multi-get
 * writes a hundred of these per request.  A queue item has no version to
 * compare, so gets answers CAS 0, as the binary and meta replies do. */
static inline __attribute__((always_inline)) int
text_value(void *arg, const struct saker_item *it, bool cas)
{
	struct hit_ctx *hc = arg;
	struct evbuffer *b = hc->s->pend;
	char num[48], *end = num + sizeof(num), *p;
	struct evbuffer_iovec v;
	size_t nlen, total;
	char *w;

	hc->id = it->id;
	/* " <flags> <bytes>\r\n" built backwards into num */
	*--end = '\n';
	*--end = '\r';
	if (cas) {
		*--end = '0';
		*--end = ' ';
	}
	p = fmt_u64(end, it->len);
	*--p = ' ';
	p = fmt_u64(p, it->flags);
	*--p = ' ';
	nlen = (size_t)(num + sizeof(num) - p);
	total = 6 + hc->key_len + nlen + it->len + 2;
	if (evbuffer_reserve_space(b, (ev_ssize_t)total, &v, 1) != 1 ||
	    v.iov_len < total) {
		/* cannot get one piece: fall back to separate appends */
		evbuffer_add(b, "VALUE ", 6);
		evbuffer_add(b, hc->key, hc->key_len);
		evbuffer_add(b, p, nlen);
		evbuffer_add(b, it->data, it->len);
		evbuffer_add(b, "\r\n", 2);
		return 0;
	}
	w = v.iov_base;
	memcpy(w, "VALUE ", 6);
	w += 6;
	memcpy(w, hc->key, hc->key_len);
	w += hc->key_len;
	memcpy(w, p, nlen);
	w += nlen;
	if (it->len > 0)
		memcpy(w, it->data, it->len);
	w += it->len;
	memcpy(w, "\r\n", 2);
	v.iov_len = total;
	evbuffer_commit_space(b, &v, 1);
	return 0;
}

static int
text_hit(void *arg, const struct saker_item *it)
{
	return text_value(arg, it, false);
}

static int
text_hit_cas(void *arg, const struct saker_item *it)
{
	return text_value(arg, it, true);
}

static void
text_end(struct session *s, const uint64_t *hits, size_t nkeys)
{
	(void)hits;
	(void)nkeys;
	reply_str(s, "END\r\n");
}

static void
text_get_error(struct session *s, size_t k, int r, const char *msg)
{
	(void)k;
	text_reply_result(s, r, msg);
}

static const struct get_ops text_get_ops = {
	.hit = text_hit,
	.end = text_end,
	.error = text_get_error,
};

static const struct get_ops text_gets_ops = {
	.hit = text_hit_cas,
	.end = text_end,
	.error = text_get_error,
};

/* --- commands ----------------------------------------------------------- */

static void
text_set(struct session *s, struct proto_cmd *cmd, const char *data)
{
	const char *msg = NULL;
	int r;

	r = op_set(s, &cmd->keys[0], cmd->flags, cmd->exptime, cmd->delay_ms,
	    cmd->at_s, cmd->id, cmd->id_len, data, cmd->bytes, &msg);
	if (r == OPR_OK) {
		if (!cmd->noreply)
			reply_str(s, "STORED\r\n");
		return;
	}
	/* noreply hides the answers about the request; store failures show */
	if (cmd->noreply && (r == OPR_NOT_STORED || r == OPR_TOO_LARGE ||
	    r == OPR_READONLY || r == OPR_DENIED))
		return;
	text_reply_result(s, r, msg);
}

static void
text_delete(struct session *s, struct proto_cmd *cmd)
{
	struct proto_key *k = &cmd->keys[0];
	const char *msg = NULL;
	int r = op_delete(s, k->name, k->name_len, &msg);

	if (r == OPR_OK) {
		if (!cmd->noreply)
			reply_str(s, "DELETED\r\n");
	} else if ((r != OPR_NOT_FOUND && r != OPR_DENIED) || !cmd->noreply) {
		text_reply_result(s, r, msg);
	}
}

static void
text_flush(struct session *s, struct proto_cmd *cmd)
{
	struct proto_key *k = &cmd->keys[0];
	const char *msg = NULL;
	int r = op_flush(s, k->name, k->name_len, &msg);

	if (r != OPR_OK && (r != OPR_DENIED || !cmd->noreply))
		text_reply_result(s, r, msg);
	else if (!cmd->noreply)
		reply_str(s, "END\r\n");
}

static void
text_flush_all(struct session *s, struct proto_cmd *cmd)
{
	const char *msg = NULL;
	int r = op_flush_all(s, &msg);

	if (r != OPR_OK && (r != OPR_DENIED || !cmd->noreply))
		text_reply_result(s, r, msg);
	else if (!cmd->noreply)
		reply_str(s, "OK\r\n");
}

static void
text_requeue(struct session *s, struct proto_cmd *cmd)
{
	uint64_t moved = 0;
	const char *msg = NULL;
	int r = op_requeue(s, cmd->keys[0].name, cmd->keys[0].name_len,
	    cmd->keys[1].name, cmd->keys[1].name_len, (uint64_t)cmd->num1,
	    &moved, &msg);

	if (r != OPR_OK) {
		text_reply_result(s, r, msg);
		return;
	}
	replyf(s, "%llu\r\n", (unsigned long long)moved);
	reply_done(s);
}

static void
text_flush_expired(struct session *s, struct proto_cmd *cmd)
{
	struct proto_key *k = &cmd->keys[0];
	uint64_t removed = 0;
	const char *msg = NULL;
	int r = op_flush_expired(s, k->name, k->name_len, &removed, &msg);

	if (r != OPR_OK) {
		text_reply_result(s, r, msg);
		return;
	}
	replyf(s, "%llu\r\n", (unsigned long long)removed);
	reply_done(s);
}

static void
text_confirm(struct session *s, struct proto_cmd *cmd)
{
	struct proto_key *k = &cmd->keys[0];
	const char *msg = NULL;
	int r = op_confirm(s, k->name, k->name_len, cmd->num1, &msg);

	if (r == OPR_OK)
		reply_str(s, "END\r\n");
	else if (r == OPR_NOT_FOUND)
		reply_str(s, "ERROR\r\n");
	else
		text_reply_result(s, r, msg);
}

static void
text_touch(struct session *s, struct proto_cmd *cmd)
{
	struct proto_key *k = &cmd->keys[0];
	const char *msg = NULL;
	int r = op_touch(s, k->name, k->name_len, cmd->exptime, &msg);

	if (r == OPR_OK) {
		if (!cmd->noreply)
			reply_str(s, "TOUCHED\r\n");
	} else if (r == OPR_NOT_FOUND || r == OPR_DENIED) {
		/* memcache's answers about the request: noreply hides them
		 * (a client that sent it reads nothing back) */
		if (!cmd->noreply)
			text_reply_result(s, r, msg);
	} else {
		text_reply_result(s, r, msg);
	}
}

static void
text_status(struct session *s, struct proto_cmd *cmd)
{
	static const char *const names[] = { "UP", "READONLY", "QUIESCENT" };
	struct broker *b = s->b;

	if (cmd->status != PROTO_STATUS_QUERY && !session_admin(s)) {
		session_denied(s, "status", NULL, 0);
		reply_str(s, PROTO_ERR_DENIED);
		return;
	}
	switch (cmd->status) {
	case PROTO_STATUS_QUERY:
		replyf(s, "%s\r\n", names[b->status]);
		reply_done(s);
		return;
	case PROTO_STATUS_UP:
		b->status = STATUS_UP;
		break;
	case PROTO_STATUS_READONLY:
		b->status = STATUS_READONLY;
		break;
	case PROTO_STATUS_QUIESCENT:
		b->status = STATUS_QUIESCENT;
		break;
	}
	log_info("server status is now %s", names[b->status]);
	reply_str(s, "END\r\n");
}

/* Run one parsed command.  `line` is the command line (keys point into
 * it); `data` the set's data block (cmd->bytes long) or NULL. */
static void
text_execute(struct session *s, struct proto_cmd *cmd, const char *line,
    size_t linelen, const char *data)
{
	switch (cmd->type) {
	case PROTO_CMD_SET:
		text_set(s, cmd, data);
		break;
	case PROTO_CMD_GET:
		op_get(s, cmd->cas ? &text_gets_ops : &text_get_ops, cmd->keys,
		    cmd->nkeys, line, linelen);
		break;
	case PROTO_CMD_DELETE:
		text_delete(s, cmd);
		break;
	case PROTO_CMD_FLUSH:
		text_flush(s, cmd);
		break;
	case PROTO_CMD_FLUSH_ALL:
		text_flush_all(s, cmd);
		break;
	case PROTO_CMD_FLUSH_EXPIRED:
		text_flush_expired(s, cmd);
		break;
	case PROTO_CMD_REQUEUE:
		text_requeue(s, cmd);
		break;
	case PROTO_CMD_MONITOR:
		/* monitor <q> <seconds> [max]: items handed out opened; the
		 * client confirms them with `confirm <q> <n>` */
		op_monitor(s, &text_get_ops, &cmd->keys[0], cmd->num1, cmd->num2,
		    line, linelen);
		break;
	case PROTO_CMD_CONFIRM:
		text_confirm(s, cmd);
		break;
	case PROTO_CMD_TOUCH:
		text_touch(s, cmd);
		break;
	case PROTO_CMD_STATS:
		if (cmd->stats == PROTO_STATS_QUEUE &&
		    !perms_sees(s->perms, cmd->keys[0].name, cmd->keys[0].name_len)) {
			session_denied(s, "stats queue", cmd->keys[0].name,
			    cmd->keys[0].name_len);
			reply_str(s, PROTO_ERR_DENIED);
			break;
		}
		if (cmd->stats == PROTO_STATS_QUEUES)
			stats_write_queues(s->b, s->pend, cmd->nkeys > 0 ?
			    cmd->keys[0].name : NULL, cmd->nkeys > 0 ?
			    cmd->keys[0].name_len : 0, s->perms);
		else if (cmd->stats == PROTO_STATS_QUEUE)
			stats_write_queue(s->b, s->pend, cmd->keys[0].name,
			    cmd->keys[0].name_len);
		else
			stats_write(s->b, s->pend, s->perms);
		reply_done(s);
		reply_schedule(s);
		break;
	case PROTO_CMD_STATUS:
		text_status(s, cmd);
		break;
	case PROTO_CMD_VERSION:
		reply_keep(s, KEEP_ALWAYS);
		reply_str(s, "VERSION " PACKAGE_VERSION "\r\n");
		break;
	case PROTO_CMD_VERBOSITY:
		if (!session_admin(s)) {
			session_denied(s, "verbosity", NULL, 0);
			if (!cmd->noreply)
				reply_str(s, PROTO_ERR_DENIED);
			break;
		}
		/* clamped before the cast: a level of 2^63 is just "debug" */
		log_set_level(cmd->num1 > LOG_LVL_DEBUG ? LOG_LVL_DEBUG : (int)cmd->num1);
		if (!cmd->noreply)
			reply_str(s, "OK\r\n");
		break;
	case PROTO_CMD_QUIT:
		/* the replies of the commands before it still go out */
		s->b->hooks->close_after_write(s);
		break;
	case PROTO_CMD_SHUTDOWN:
		if (!session_admin(s)) {
			session_denied(s, "shutdown", NULL, 0);
			reply_str(s, PROTO_ERR_DENIED);
			break;
		}
		if (!s->b->enable_shutdown) {
			reply_str(s, "ERROR\r\n");
			break;
		}
		log_info("shutdown requested by a client");
		s->b->hooks->close(s);
		s->b->hooks->stop(s->b);
		break;
	case PROTO_CMD_NONE:
	case PROTO_CMD_NOSTORE:		/* answered by text_line() */
		reply_str(s, PROTO_ERR_UNKNOWN);
		break;
	}
}

/* --- framing ------------------------------------------------------------ */

/* The answer to a failed text login (maybe sent after a delay). */
static void
text_login_failure(struct session *s)
{
	reply_str(s, "CLIENT_ERROR authentication failure\r\n");
}

/*
 * Before --auth-file authentication only memcached's ASCII login is
 * accepted: `set <any> <flags> <exptime> <bytes>` whose data is
 * "user password".  Returns as text_line does.
 */
static bool
text_login(struct session *s, const char *line, size_t linelen, size_t need)
{
	struct proto_cursor cur = { line, line + linelen };
	struct proto_tok tok[6];
	size_t ntok = 0, n;
	const char *p, *sp;
	const struct perms *who;
	uint64_t bytes = 0;
	bool skip;
	int rc;

	/* split as the text parser does, but accept any key */
	while (ntok < 6 && proto_next_tok(&cur, &tok[ntok]))
		ntok++;
	/* a set with a readable length (digits, the value before the last
	 * one within 32 bits) has data to skip; decided before draining, as
	 * the tokens point into s->in, which the drain may free */
	skip = ntok >= 5 && tok[0].n == 3 && strncasecmp(tok[0].p, "set", 3) == 0 &&
	    proto_u64(tok[4].p, tok[4].n, (uint64_t)UINT32_MAX * 10 + 9, &bytes);
	if (!skip || ntok > 6 || bytes > 4096) {
		reply_str(s, "CLIENT_ERROR unauthenticated\r\n");
		evbuffer_drain(s->in, need);
		if (skip)
			text_swallow(s, (size_t)bytes + 2);
		return true;
	}
	n = (size_t)bytes;
	rc = text_data_block(s, need, n, &p);
	if (rc <= 0)
		return false;
	p += need;
	sp = memchr(p, ' ', n);
	/* the peer's delay comes before the check; the login stays in the
	 * input until then */
	if (s->b->hooks->login_admit != NULL && !s->b->hooks->login_admit(s, p,
	    sp != NULL ? (size_t)(sp - p) : n))
		return false;
	who = sp != NULL ? auth_check(s->b->auth, p, (size_t)(sp - p), sp + 1,
	    (size_t)(p + n - sp - 1)) : NULL;
	evbuffer_drain(s->in, need + n + 2);
	if (who != NULL) {
		s->authed = true;
		s->perms = who;
		s->b->hooks->login_ok(s);
		reply_str(s, "STORED\r\n");
	} else {
		s->b->hooks->login_failed(s, "text", text_login_failure);
	}
	return true;
}

/* Handle one complete line at the front of s->in, `eol` bytes of line end
 * after `len` bytes of line.  `head` is the first `head_len` bytes of s->in
 * when the line lies within them, else NULL.  Returns false when more
 * input is needed. */
static bool
text_line(struct session *s, size_t len, size_t eol, const char *head,
    size_t head_len)
{
	struct proto_cmd *cmd = &s->b->proto->line;
	size_t linelen = len, need = len + eol, total;
	const char *line, *err, *p;
	int rc;

	line = head != NULL ? head :
	    (const char *)evbuffer_pullup(s->in, (ev_ssize_t)need);
	if (linelen > 0 && line[linelen - 1] == '\r')
		linelen--;
	if (linelen > PROTO_MAX_LINE && (linelen > PROTO_MAX_GET_LINE ||
	    !proto_is_get_line(line, linelen))) {
		reply_str(s, PROTO_ERR_LINE_TOO_LONG);
		s->b->hooks->close_after_write(s);
		return false;
	}
	/* one test keeps logins, meta commands and mg groups off the path of
	 * plain get and set */
	if (__builtin_expect((line[0] == 'm') | !s->authed | (s->ps->grp != NULL), 0)) {
		if (!s->authed)
			return text_login(s, line, linelen, need);
		if (line[0] == 'm' && meta_is_command(line, linelen))
			return meta_command(s, line, linelen, need);
		if (gg_pending(s)) {
			/* quiet mg lines end at any other command */
			meta_run_group(s);
			if (s->state != SESSION_CMD)
				return false;
			line = (const char *)evbuffer_pullup(s->in, (ev_ssize_t)need);
			head = NULL;
		}
	}
	err = proto_parse_line(line, linelen, cmd);
	if (err != NULL) {
		reply_str(s, err);
		evbuffer_drain(s->in, need);
		if (cmd->swallow >= 0)
			text_swallow(s, (size_t)cmd->swallow);
		return true;
	}
	if (cmd->type == PROTO_CMD_NOSTORE) {
		/* refused, but its data block is still on its way: skip it */
		if (!cmd->noreply) {
			replyf(s, "CLIENT_ERROR %.*s not supported on a queue\r\n",
			    (int)cmd->word_len, cmd->word);
			reply_done(s);
		}
		evbuffer_drain(s->in, need);
		text_swallow(s, cmd->bytes + 2);
		return true;
	}
	if (cmd->type != PROTO_CMD_SET) {
		text_execute(s, cmd, line, linelen, NULL);
		if (!s->dead)
			evbuffer_drain(s->in, need);
		return true;
	}
	if (cmd->bytes > s->b->max_item_size) {
		reply_str(s, PROTO_ERR_TOO_LARGE);
		evbuffer_drain(s->in, need);
		text_swallow(s, cmd->bytes + 2);
		return true;
	}
	total = need + cmd->bytes + 2;
	if (head != NULL && total <= head_len &&
	    head[total - 2] == '\r' && head[total - 1] == '\n') {
		p = head;	/* line and data in the first chunk: no pullup */
	} else {
		rc = text_data_block(s, need, cmd->bytes, &p);
		if (rc <= 0)
			return false;
	}
	if (p != line) {
		/* the pullup moved the line: parse again so pointers are valid */
		line = p;
		(void)proto_parse_line(line, linelen, cmd);
	}
	text_execute(s, cmd, line, linelen, p + need);
	if (!s->dead)
		evbuffer_drain(s->in, total);
	return true;
}

bool
text_runs_behind_wait(struct session *s)
{
	struct proto_cmd *cmd = &s->b->proto->behind;
	size_t eol = 0, linelen, need, total;
	struct evbuffer_ptr pos;
	const char *line;

	if (!s->authed || s->ps->grp != NULL)
		return false;
	pos = evbuffer_search_eol(s->in, NULL, &eol, EVBUFFER_EOL_LF);
	if (pos.pos < 0 || (size_t)pos.pos > PROTO_MAX_LINE + 1)
		return false;
	linelen = (size_t)pos.pos;
	need = linelen + eol;
	line = (const char *)evbuffer_pullup(s->in, (ev_ssize_t)need);
	if (linelen > 0 && line[linelen - 1] == '\r')
		linelen--;
	if (linelen > PROTO_MAX_LINE || line[0] == 'm' ||
	    proto_parse_line(line, linelen, cmd) != NULL)
		return false;
	switch (cmd->type) {
	case PROTO_CMD_SET:
		if (cmd->bytes > s->b->max_item_size)
			return false;
		/* all of the data, well terminated: a bad chunk closes the
		 * connection, after the get */
		total = need + cmd->bytes + 2;
		if (evbuffer_get_length(s->in) < total)
			return false;
		line = (const char *)evbuffer_pullup(s->in, (ev_ssize_t)total);
		return line[total - 2] == '\r' && line[total - 1] == '\n';
	case PROTO_CMD_DELETE:
	case PROTO_CMD_FLUSH:
	case PROTO_CMD_FLUSH_ALL:
	case PROTO_CMD_FLUSH_EXPIRED:
	case PROTO_CMD_STATS:
	case PROTO_CMD_VERSION:
	case PROTO_CMD_VERBOSITY:
		return true;
	default:
		return false;
	}
}

/* No line end in the `avail` bytes of input: more than any line may be?
 * A get line may be long (PROTO_MAX_GET_LINE); its first word tells. */
static bool
line_too_long(struct session *s, size_t avail)
{
	char head[64];

	if (avail > PROTO_MAX_GET_LINE + 1)
		return true;
	evbuffer_copyout(s->in, head, sizeof(head));
	return !proto_is_get_line(head, sizeof(head));
}

int
text_step(struct session *s)
{
	size_t avail, eol = 0;
	struct evbuffer_ptr pos;
	struct evbuffer_iovec head;

	/* The line nearly always lies whole in the first chunk of input:
	 * look for its end there, sparing evbuffer_search_eol() and the
	 * pullups (a third of the cost of framing a command). */
	if (evbuffer_peek(s->in, -1, NULL, &head, 1) == 1 && head.iov_len > 0) {
		const char *nl = memchr(head.iov_base, '\n', head.iov_len);

		if (nl != NULL)
			return text_line(s, (size_t)(nl - (const char *)head.iov_base),
			    1, head.iov_base, head.iov_len) ? PROTO_COMMAND :
			    PROTO_STOP;
	}
	pos = evbuffer_search_eol(s->in, NULL, &eol, EVBUFFER_EOL_LF);
	if (pos.pos < 0) {
		avail = evbuffer_get_length(s->in);
		if (avail > PROTO_MAX_LINE + 1 && line_too_long(s, avail)) {
			reply_str(s, PROTO_ERR_LINE_TOO_LONG);
			s->b->hooks->close_after_write(s);
		}
		return PROTO_STOP;
	}
	return text_line(s, (size_t)pos.pos, eol, NULL, 0) ? PROTO_COMMAND :
	    PROTO_STOP;
}

void
text_fail_batch(struct session *s, struct evbuffer *sent, bool in_doubt,
    const char *reason)
{
	size_t k = 0, pos = 0;
	unsigned i;

	for (i = 0; i < s->ps->at.replies; i++) {
		if (k < s->ps->at.nkept && s->ps->kept[k].idx == i) {
			const struct kept_reply *t = &s->ps->kept[k++];

			if (reply_resend_kept(s, sent, &pos, t->start, t->end,
			    t->keep, in_doubt))
				continue;
		}
		evbuffer_add_printf(s->pend, "SERVER_ERROR %s\r\n", reason);
	}
}
