/* textio.c -- what the text protocol's classic commands (text.c) and its
 * meta commands (proto_meta.c) share: error replies, data blocks, skipping
 * a refused data block. */
#include "config.h"

#include "proto_text.h"
#include "pstate.h"
#include "textio.h"

void
text_reply_result(struct session *s, int r, const char *msg)
{
	if (msg == NULL)
		msg = "error";
	switch (r) {
	case OPR_NOT_STORED:
		reply_str(s, "NOT_STORED\r\n");
		break;
	case OPR_NOT_FOUND:
		reply_str(s, "NOT_FOUND\r\n");
		break;
	case OPR_TOO_LARGE:
		reply_str(s, PROTO_ERR_TOO_LARGE);
		break;
	case OPR_FORMAT:
		reply_str(s, PROTO_ERR_FORMAT);
		break;
	case OPR_DENIED:
		reply_str(s, PROTO_ERR_DENIED);
		break;
	case OPR_CLIENT:
		replyf(s, "CLIENT_ERROR %s\r\n", msg);
		reply_done(s);
		break;
	default:
		replyf(s, "SERVER_ERROR %s\r\n", msg);
		reply_done(s);
		break;
	}
}


void
text_swallow(struct session *s, size_t n)
{
	s->ps->swallow = n;
	s->state = SESSION_SWALLOW;
}
