/* reply.c -- the replies of a session's current batch. */
#include "config.h"

#include <stdarg.h>
#include <stdlib.h>

#include "log.h"
#include "reply.h"

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
reply_truncate(struct session *s, size_t len)
{
	size_t now = evbuffer_get_length(s->pend);

	s->b->hooks->reply_cut(s, len);
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
	s->b->hooks->reply_cut(s, 0);
	s->b->hooks->close_after_write(s);
}

