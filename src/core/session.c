/* session.c -- a client of the broker: its open items, its wait, leaving. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "deadletter.h"
#include "log.h"
#include "queues.h"
#include "retry.h"
#include "session.h"

int
session_init(struct session *s, struct broker *b, bool authed)
{
	s->b = b;
	s->in = evbuffer_new();
	s->pend = evbuffer_new();
	s->held = evbuffer_new();
	if (s->in == NULL || s->pend == NULL || s->held == NULL) {
		session_free(s);
		return -1;
	}
	TAILQ_INIT(&s->opens);
	s->authed = authed;
	TAILQ_INSERT_TAIL(&b->sessions, s, link);
	return 0;
}

void
session_close(struct session *s)
{
	struct broker *b = s->b;
	struct open_item *oi;

	if (s->dead)
		return;
	s->dead = true;
	if (s->perms != NULL)
		s->perms = &perms_revoked;      /* its user may be reloaded away */
	if (s->state == SESSION_WAITING)
		session_end_wait(s);
	/* Return open items newest first, so each lands in front of the
	 * previous one and the queue head keeps their original order. */
	while ((oi = TAILQ_LAST(&s->opens, open_list)) != NULL) {
		if (oi->q->h != NULL) {
			int rc = dl_give_back(b, oi->q, oi->id,
			    oi->deliveries, RETRY_BACKOFF);
			if (rc != SAKER_OK && rc != SAKER_ENOTFOUND)
				log_error("returning an open item to %s: %s", oi->q->name,
				    saker_store_errmsg(b->store));
		}
		session_forget_open(s, oi);
	}
	TAILQ_REMOVE(&b->sessions, s, link);
}

void
session_free(struct session *s)
{
	if (s->in != NULL)
		evbuffer_free(s->in);
	if (s->pend != NULL)
		evbuffer_free(s->pend);
	if (s->held != NULL)
		evbuffer_free(s->held);
	s->in = s->pend = s->held = NULL;
}

/* --- open items --------------------------------------------------------- */

struct open_item *
session_oldest_open(struct session *s, struct squeue *q)
{
	struct open_item *oi;

	TAILQ_FOREACH(oi, &s->opens, link)
		if (oi->q == q)
			return oi;
	return NULL;
}

size_t
session_count_open(struct session *s, struct squeue *q)
{
	struct open_item *oi;
	size_t n = 0;

	TAILQ_FOREACH(oi, &s->opens, link)
		if (oi->q == q)
			n++;
	return n;
}

void
session_forget_open(struct session *s, struct open_item *oi)
{
	TAILQ_REMOVE(&s->opens, oi, link);
	s->nopens--;
	free(oi);
}

void
sessions_forget_queue(struct broker *b, struct squeue *q)
{
	struct open_item *oi, *next;
	struct session *s;

	TAILQ_FOREACH(s, &b->sessions, link) {
		for (oi = TAILQ_FIRST(&s->opens); oi != NULL; oi = next) {
			next = TAILQ_NEXT(oi, link);
			if (oi->q == q)
				session_forget_open(s, oi);
		}
	}
}

void
session_batch_done(struct session *s, bool committed)
{
	struct open_item *oi, *next;

	if (committed)
		return;
	/* the store rolled back the takes of this batch */
	for (oi = TAILQ_FIRST(&s->opens); oi != NULL; oi = next) {
		next = TAILQ_NEXT(oi, link);
		if (oi->batch == s->b->flush_batch)
			session_forget_open(s, oi);
	}
}

/* --- permissions -------------------------------------------------------- */

void
session_denied(struct session *s, const char *what, const char *name,
    size_t len)
{
	int64_t now = saker_now_ms();
	char more[64] = "";

	s->b->stats.permission_denied++;
	if (s->denied_log_ms != 0 && now - s->denied_log_ms < 1000) {
		s->denied_unlogged++;
		return;
	}
	if (len > 250)
		len = 250;      /* queue names are at most 250 bytes anyway */
	if (s->denied_unlogged > 0)
		snprintf(more, sizeof(more), " (and %llu more not logged)",
		    (unsigned long long)s->denied_unlogged);
	log_warn("permission denied: user %s from %s: %s%s%.*s%s", s->perms != NULL ?
	    s->perms->user : "-", s->b->hooks->peer(s), what, len > 0 ? " " : "",
	    (int)len, name != NULL ? name : "", more);
	s->denied_log_ms = now;
	s->denied_unlogged = 0;
}

/* --- waiting ------------------------------------------------------------ */

void
session_end_wait(struct session *s)
{
	size_t i;

	for (i = 0; i < s->nwaits; i++)
		waiter_unlink(s->b, &s->waits[i]);
	free(s->waits);
	s->waits = NULL;
	s->nwaits = 0;
	free(s->wait_line);
	s->wait_line = NULL;
	s->monitoring = false;
	if (s->state == SESSION_WAITING)
		s->state = SESSION_CMD;
	/* a queue waited on that never got an item leaves nothing behind */
	queues_drop_stubs(s->b);
	s->b->hooks->wait_end(s);
}
