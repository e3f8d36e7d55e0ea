/* http_reply.h -- what every reply of the HTTP port carries (http.c
 * and console.c both answer with these). */
#ifndef SAKER_HTTP_REPLY_H
#define SAKER_HTTP_REPLY_H

struct evhttp_request;

/* Add the security headers every reply carries (CSP, nosniff, no
 * framing, no referrer, no-store); once per reply. */
void http_security_headers(struct evhttp_request *req);
/* A plain-text error reply with those headers (never evhttp_send_error,
 * whose page drops them). */
void http_send_error(struct evhttp_request *req, int code, const char *reason,
    const char *msg);

#endif
