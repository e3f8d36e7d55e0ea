/* http_reply.c -- what every reply of the HTTP port carries: the
 * security headers, and error replies that keep them. */
#include "config.h"

#include <event2/buffer.h>
#include <event2/http.h>

#include "http_reply.h"

/*
 * The headers every reply of the HTTP port carries, error pages
 * included: no framing, no sniffing, no caching, no referrer, and a
 * policy that loads nothing from elsewhere.
 */
void
http_security_headers(struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	if (evhttp_find_header(h, "X-Content-Type-Options") != NULL)
		return;
	evhttp_add_header(h, "Content-Security-Policy",
	    "default-src 'self'; base-uri 'none'; form-action 'none'; "
	    "frame-ancestors 'none'");
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	evhttp_add_header(h, "X-Frame-Options", "DENY");
	evhttp_add_header(h, "Referrer-Policy", "no-referrer");
	evhttp_add_header(h, "Cache-Control", "no-store");
}

/*
 * An error reply in plain text with the security headers: instead of
 * evhttp_send_error(), whose page clears every header set before it.
 * Out of memory, the connection is dropped (what evhttp_send_error does).
 */
void
http_send_error(struct evhttp_request *req, int code, const char *reason,
    const char *msg)
{
	struct evbuffer *b = evbuffer_new();

	if (b == NULL) {
		evhttp_connection_free(evhttp_request_get_connection(req));
		return;
	}
	http_security_headers(req);
	evhttp_remove_header(evhttp_request_get_output_headers(req), "Content-Type");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    "text/plain; charset=utf-8");
	evbuffer_add_printf(b, "%s\n", msg);
	evhttp_send_reply(req, code, reason, b);
	evbuffer_free(b);
}
