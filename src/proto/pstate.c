/* pstate.c -- the protocol layer's records of a session's batch replies,
 * and what a failed commit keeps of them. */
#include "config.h"

#include <stdlib.h>

#include "log.h"
#include "pstate.h"

void
reply_done(struct session *s)
{
	struct proto_state *ps = s->ps;
	size_t end = evbuffer_get_length(s->pend);

	if (ps->reply_keep != KEEP_NEVER) {
		if (ps->nkept == ps->kept_cap) {
			size_t ncap = ps->kept_cap ? ps->kept_cap * 2 : 8;
			struct kept_reply *n = realloc(ps->kept, ncap * sizeof(*n));

			if (n == NULL) {
				/* a failed commit answers it with SERVER_ERROR
				 * like the rest */
				log_error("out of memory recording a reply");
				goto done;
			}
			ps->kept = n;
			ps->kept_cap = ncap;
		}
		ps->kept[ps->nkept].idx = ps->batch_replies;
		ps->kept[ps->nkept].keep = ps->reply_keep;
		ps->kept[ps->nkept].start = ps->reply_start;
		ps->kept[ps->nkept].end = end;
		ps->nkept++;
	}
done:
	ps->reply_keep = KEEP_NEVER;
	ps->reply_start = end;
	ps->batch_replies++;
}

void
reply_record(struct session *s, uint8_t opcode, uint32_t opaque)
{
	struct proto_state *ps = s->ps;

	if (ps->nbrecs == ps->brecs_cap) {
		size_t ncap = ps->brecs_cap ? ps->brecs_cap * 2 : 16;
		struct bin_rec *nr = realloc(ps->brecs, ncap * sizeof(*nr));

		if (nr == NULL) {
			log_error("out of memory recording a binary reply");
			return;
		}
		ps->brecs = nr;
		ps->brecs_cap = ncap;
	}
	ps->brecs[ps->nbrecs].end = evbuffer_get_length(s->pend);
	ps->brecs[ps->nbrecs].opcode = opcode;
	ps->brecs[ps->nbrecs].opaque = opaque;
	ps->brecs[ps->nbrecs].keep = KEEP_NEVER;
	ps->nbrecs++;
	reply_schedule(s);
}

void
pstate_keep(struct session *s, unsigned keep)
{
	struct proto_state *ps = s->ps;

	if (ps == NULL)
		return;         /* a session without a protocol (the console's) */
	if (ps->kind == PROTO_BINARY) {
		if (ps->nbrecs > 0 && ps->brecs[ps->nbrecs - 1].keep < keep)
			ps->brecs[ps->nbrecs - 1].keep = (uint8_t)keep;
	} else if (ps->reply_keep < keep) {
		ps->reply_keep = (uint8_t)keep;
	}
}

void
pstate_cut(struct session *s, size_t len)
{
	struct proto_state *ps = s->ps;

	/* a packet's record ends where its bytes do, never before them */
	while (ps != NULL && ps->nbrecs > 0 && ps->brecs[ps->nbrecs - 1].end > len)
		ps->nbrecs--;
}

bool
reply_resend_kept(struct session *s, struct evbuffer *sent, size_t *pos,
    size_t start, size_t end, unsigned keep, bool in_doubt)
{
	if (sent == NULL || !(keep == KEEP_ALWAYS ||
	    (in_doubt && keep == KEEP_IN_DOUBT)))
		return false;
	evbuffer_drain(sent, start - *pos);
	evbuffer_remove_buffer(sent, s->pend, end - start);
	*pos = end;
	return true;
}

void
reply_reset(struct session *s)
{
	struct proto_state *ps = s->ps;

	ps->batch_replies = 0;
	ps->nbrecs = 0;
	ps->nkept = 0;
	ps->reply_start = 0;
	ps->reply_keep = KEEP_NEVER;
}

void
reply_held_begin(struct session *s, struct held_save *sv)
{
	struct proto_state *ps = s->ps;

	sv->pend = s->pend;
	sv->replies = ps->batch_replies;
	sv->nkept = ps->nkept;
	sv->start = ps->reply_start;
	sv->keep = ps->reply_keep;
	sv->nbrecs = ps->nbrecs;
	s->pend = s->held;
	ps->reply_start = evbuffer_get_length(s->held);
}

void
reply_held_end(struct session *s, const struct held_save *sv)
{
	struct proto_state *ps = s->ps;

	s->pend = sv->pend;
	ps->batch_replies = sv->replies;
	ps->nkept = sv->nkept;
	ps->reply_start = sv->start;
	ps->reply_keep = sv->keep;
	ps->nbrecs = sv->nbrecs;
	s->held_in_batch = true;
	s->held_some = true;
	reply_schedule(s);
}

void
reply_release_held(struct session *s)
{
	if (!s->held_some)
		return;
	s->held_some = false;
	if (evbuffer_get_length(s->held) == 0)
		return;
	evbuffer_add_buffer(s->pend, s->held);
	s->ps->reply_start = evbuffer_get_length(s->pend);
	s->held_in_batch = true;
	reply_schedule(s);
}

void
pstate_free(struct proto_state *ps)
{
	free(ps->brecs);
	free(ps->kept);
	ps->brecs = NULL;
	ps->kept = NULL;
}
