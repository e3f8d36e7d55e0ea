/* proto.c -- the table of protocols, and the steps every session takes
 * whatever it speaks: discarding refused input, choosing the protocol. */
#include "config.h"

#include "getgroup.h"
#include "proto.h"
#include "proto_binary.h"
#include "pstate.h"
#include "text.h"

static const struct protocol protocols[] = {
	[PROTO_TEXT] = { "text", text_step, text_fail_batch },
	[PROTO_BINARY] = { "binary", bin_step, bin_fail_batch },
};

/*
 * While a get waits, the commands behind it that cannot depend on its
 * outcome run at once -- a set may even wake that very get -- and their
 * replies are held until the get has answered: one client object that sets
 * while its own blocking get waits must not deadlock itself.  Gets (they
 * keep their turn), commands touching open items, quit, meta and anything
 * refused wait for the get to end as before; so does everything behind a
 * monitor.  They answer into s->held, which follows the get's reply once
 * it is written (release_held), outside the batch's records: a failed
 * commit of a batch that ran or released any of them closes the session
 * (s->held_in_batch).
 */
static int
step_behind_wait(struct session *s)
{
	struct evbuffer *pend = s->pend;
	struct rec_marks at = s->ps->at;
	int r;

	if (s->monitoring || !(s->ps->kind == PROTO_BINARY ?
	    bin_runs_behind_wait(s) : text_runs_behind_wait(s)))
		return PROTO_STOP;
	s->pend = s->held;
	s->ps->at.start = evbuffer_get_length(s->held);
	r = protocols[s->ps->kind].step(s);
	s->pend = pend;
	s->ps->at = at;
	s->held_in_batch = true;
	s->held_some = true;
	reply_schedule(s);
	return r;
}

static void
release_held(struct session *s)
{
	if (!s->held_some)
		return;
	s->held_some = false;
	if (evbuffer_get_length(s->held) == 0)
		return;
	evbuffer_add_buffer(s->pend, s->held);
	s->ps->at.start = evbuffer_get_length(s->pend);
	s->held_in_batch = true;
	reply_schedule(s);
}

int
proto_step(struct session *s)
{
	size_t avail = evbuffer_get_length(s->in);

	if (s->state != SESSION_WAITING)
		release_held(s);
	if (avail == 0)
		return PROTO_STOP;
	if (s->state == SESSION_WAITING)
		return step_behind_wait(s);
	if (s->state == SESSION_SWALLOW) {
		size_t n = avail < s->ps->swallow ? avail : s->ps->swallow;

		evbuffer_drain(s->in, n);
		s->ps->swallow -= n;
		if (s->ps->swallow == 0)
			s->state = SESSION_CMD;
		return PROTO_SKIPPED;
	}
	if (__builtin_expect(s->ps->kind == PROTO_UNKNOWN, 0)) {
		/* memcached's rule: a binary client's first byte is 0x80 */
		unsigned char first;

		evbuffer_copyout(s->in, &first, 1);
		s->ps->kind = first == BIN_REQ_MAGIC ? PROTO_BINARY :
		    PROTO_TEXT;
	}
	return protocols[s->ps->kind].step(s);
}

void
proto_fail_batch(struct session *s, struct evbuffer *sent, bool in_doubt,
    const char *reason)
{
	const struct protocol *p = &protocols[s->ps->kind == PROTO_BINARY ?
	    PROTO_BINARY : PROTO_TEXT];

	p->fail_batch(s, sent, in_doubt, reason);
}

void
proto_session_free(struct session *s)
{
	gg_free(s);
	pstate_free(s->ps);
}
