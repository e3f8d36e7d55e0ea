/* pstate.c -- the protocol layer's records of a session's batch replies,
 * and what a failed commit keeps of them. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pstate.h"

void
reply_done(struct session *s)
{
	struct proto_state *ps = s->ps;
	size_t end = evbuffer_get_length(s->pend);

	if (ps->at.keep != KEEP_NEVER) {
		if (ps->at.nkept == ps->kept_cap) {
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
		ps->kept[ps->at.nkept++] = (struct kept_reply){
		    .idx = ps->at.replies, .keep = ps->at.keep,
		    .start = ps->at.start, .end = end };
	}
done:
	ps->at.keep = KEEP_NEVER;
	ps->at.start = end;
	ps->at.replies++;
}

void
reply_record(struct session *s, uint8_t opcode, uint32_t opaque)
{
	struct proto_state *ps = s->ps;

	if (ps->at.nbrecs == ps->brecs_cap) {
		size_t ncap = ps->brecs_cap ? ps->brecs_cap * 2 : 16;
		struct bin_rec *nr = realloc(ps->brecs, ncap * sizeof(*nr));

		if (nr == NULL) {
			log_error("out of memory recording a binary reply");
			return;
		}
		ps->brecs = nr;
		ps->brecs_cap = ncap;
	}
	ps->brecs[ps->at.nbrecs++] = (struct bin_rec){
	    .end = evbuffer_get_length(s->pend), .opaque = opaque,
	    .opcode = opcode, .keep = KEEP_NEVER };
	reply_schedule(s);
}

void
pstate_keep(struct session *s, unsigned keep)
{
	struct proto_state *ps = s->ps;

	if (ps == NULL)
		return;         /* a session without a protocol (the console's) */
	if (ps->kind == PROTO_BINARY) {
		if (ps->at.nbrecs > 0 && ps->brecs[ps->at.nbrecs - 1].keep < keep)
			ps->brecs[ps->at.nbrecs - 1].keep = (uint8_t)keep;
	} else if (ps->at.keep < keep) {
		ps->at.keep = (uint8_t)keep;
	}
}

void
pstate_cut(struct session *s, size_t len)
{
	struct proto_state *ps = s->ps;

	/* a packet's record ends where its bytes do, never before them */
	while (ps != NULL && ps->at.nbrecs > 0 && ps->brecs[ps->at.nbrecs - 1].end > len)
		ps->at.nbrecs--;
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
	memset(&s->ps->at, 0, sizeof(s->ps->at));   /* keep: KEEP_NEVER */
}

void
pstate_free(struct proto_state *ps)
{
	free(ps->brecs);
	free(ps->kept);
	ps->brecs = NULL;
	ps->kept = NULL;
}
