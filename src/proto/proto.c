/* proto.c -- the table of protocols, and the steps every session takes
 * whatever it speaks: discarding refused input, choosing the protocol. */
#include "config.h"

#include "getgroup.h"
#include "proto.h"
#include "proto_binary.h"
#include "text.h"

static const struct protocol protocols[] = {
	[SESSION_PROTO_TEXT] = { "text", text_step, text_fail_batch },
	[SESSION_PROTO_BINARY] = { "binary", bin_step, bin_fail_batch },
};

int
proto_step(struct session *s)
{
	size_t avail = evbuffer_get_length(s->in);

	if (avail == 0)
		return PROTO_STOP;
	if (s->state == SESSION_SWALLOW) {
		size_t n = avail < s->swallow ? avail : s->swallow;

		evbuffer_drain(s->in, n);
		s->swallow -= n;
		if (s->swallow == 0)
			s->state = SESSION_CMD;
		return PROTO_SKIPPED;
	}
	if (__builtin_expect(s->proto == SESSION_PROTO_UNKNOWN, 0)) {
		/* memcached's rule: a binary client's first byte is 0x80 */
		unsigned char first;

		evbuffer_copyout(s->in, &first, 1);
		s->proto = first == BIN_REQ_MAGIC ? SESSION_PROTO_BINARY :
		    SESSION_PROTO_TEXT;
	}
	return protocols[s->proto].step(s);
}

void
proto_fail_batch(struct session *s, struct evbuffer *sent, bool in_doubt,
    const char *reason)
{
	const struct protocol *p = &protocols[s->proto == SESSION_PROTO_BINARY ?
	    SESSION_PROTO_BINARY : SESSION_PROTO_TEXT];

	p->fail_batch(s, sent, in_doubt, reason);
}

void
proto_session_free(struct session *s)
{
	gg_free(s);
}
