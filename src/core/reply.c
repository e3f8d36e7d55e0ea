/* reply.c -- the replies of a session's current batch, and what a failed
 * commit keeps of them. */
#include "config.h"

#include <stdarg.h>
#include <stdlib.h>

#include "log.h"
#include "reply.h"

void
reply_done(struct session *s)
{
	size_t end = evbuffer_get_length(s->pend);

	if (s->reply_keep != KEEP_NEVER) {
		if (s->nkept == s->kept_cap) {
			size_t ncap = s->kept_cap ? s->kept_cap * 2 : 8;
			struct kept_reply *n = realloc(s->kept, ncap * sizeof(*n));

			if (n == NULL) {
				/* a failed commit answers it with SERVER_ERROR
				 * like the rest */
				log_error("out of memory recording a reply");
				goto done;
			}
			s->kept = n;
			s->kept_cap = ncap;
		}
		s->kept[s->nkept].idx = s->batch_replies;
		s->kept[s->nkept].keep = s->reply_keep;
		s->kept[s->nkept].start = s->reply_start;
		s->kept[s->nkept].end = end;
		s->nkept++;
	}
done:
	s->reply_keep = KEEP_NEVER;
	s->reply_start = end;
	s->batch_replies++;
}

void
replyf(struct session *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	evbuffer_add_vprintf(s->pend, fmt, ap);
	va_end(ap);
	reply_schedule(s);
}

void
reply_record(struct session *s, uint8_t opcode, uint32_t opaque)
{
	if (s->nbrecs == s->brecs_cap) {
		size_t ncap = s->brecs_cap ? s->brecs_cap * 2 : 16;
		struct bin_rec *nr = realloc(s->brecs, ncap * sizeof(*nr));

		if (nr == NULL) {
			log_error("out of memory recording a binary reply");
			return;
		}
		s->brecs = nr;
		s->brecs_cap = ncap;
	}
	s->brecs[s->nbrecs].end = evbuffer_get_length(s->pend);
	s->brecs[s->nbrecs].opcode = opcode;
	s->brecs[s->nbrecs].opaque = opaque;
	s->brecs[s->nbrecs].keep = KEEP_NEVER;
	s->nbrecs++;
	reply_schedule(s);
}

void
reply_truncate(struct session *s, size_t len, size_t nbrecs)
{
	size_t now = evbuffer_get_length(s->pend);

	if (s->nbrecs > nbrecs)
		s->nbrecs = nbrecs;
	if (now <= len)
		return;
	/* evbuffer cannot cut its tail: move the head aside, drop the rest */
	{
		struct evbuffer *head = evbuffer_new();

		if (head != NULL && evbuffer_remove_buffer(s->pend, head, len) ==
		    (int)len) {
			evbuffer_drain(s->pend, now - len);
			evbuffer_add_buffer(s->pend, head);
			evbuffer_free(head);
			return;
		}
		if (head != NULL)
			evbuffer_free(head);
	}
	/* cannot fix the reply stream: end the connection instead */
	log_error("out of memory undoing a reply; closing the connection");
	evbuffer_drain(s->pend, evbuffer_get_length(s->pend));
	s->nbrecs = 0;
	s->b->hooks->close_after_write(s);
}

void
reply_keep(struct session *s, enum reply_keep keep)
{
	if (s->proto == SESSION_PROTO_BINARY) {
		if (s->nbrecs > 0 && s->brecs[s->nbrecs - 1].keep < keep)
			s->brecs[s->nbrecs - 1].keep = (uint8_t)keep;
	} else if (s->reply_keep < keep) {
		s->reply_keep = (uint8_t)keep;
	}
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
	s->batch_replies = 0;
	s->nbrecs = 0;
	s->nkept = 0;
	s->reply_start = 0;
	s->reply_keep = KEEP_NEVER;
}

void
reply_held_begin(struct session *s, struct held_save *sv)
{
	sv->pend = s->pend;
	sv->replies = s->batch_replies;
	sv->nkept = s->nkept;
	sv->start = s->reply_start;
	sv->keep = s->reply_keep;
	sv->nbrecs = s->nbrecs;
	s->pend = s->held;
	s->reply_start = evbuffer_get_length(s->held);
}

void
reply_held_end(struct session *s, const struct held_save *sv)
{
	s->pend = sv->pend;
	s->batch_replies = sv->replies;
	s->nkept = sv->nkept;
	s->reply_start = sv->start;
	s->reply_keep = sv->keep;
	s->nbrecs = sv->nbrecs;
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
	s->reply_start = evbuffer_get_length(s->pend);
	s->held_in_batch = true;
	reply_schedule(s);
}
