/*
 * console.h -- the web console on --http: the page and its JSON API under
 * /api/ (docs/console.md).  http.c authenticates a request, then hands
 * it here.
 */
#ifndef SAKER_CONSOLE_H
#define SAKER_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>

struct broker;
struct evhttp_request;

struct console_env {
	struct broker *b;
	/* the POSTs (requeue, flush) are allowed: an admin login is required
	 * (--auth-file without --http-public) or --http listens on loopback */
	bool writes_allowed;
	bool login_required;          /* for /api/server */
	/* commit the batch now (the POST answers its outcome): true when
	 * durable, else why in `why` */
	bool (*commit)(char *why, size_t len);
	/* open HTTP connections (for /api/server) */
	unsigned (*http_connections)(void);
};

/* Is path the console's ("/", its assets, "/api/...")? */
bool console_path(const char *path);
/* Serve req (a console path, already authorized as `user`, NULL without
 * a login): the CSRF tokens it hands out and accepts are that user's. */
void console_handle(const struct console_env *env, struct evhttp_request *req,
    const char *user);

/* evcon is closing (http.c's close callback): the listings in progress
 * for its requests end, unanswered (evhttp frees the requests). */
struct evhttp_connection;
void console_conn_closed(struct evhttp_connection *evcon);
/* Is a listing in progress for a request of evcon (its reply is being
 * made: http.c's request deadline waits for it, as for a reply being
 * written)? */
bool console_conn_busy(struct evhttp_connection *evcon);

/* Append s[0..len) as a JSON string, quotes included: every byte outside
 * printable ASCII, and " \ < > &, escaped as \uXXXX or \" \\. */
struct evbuffer;
void console_json_str(struct evbuffer *out, const char *s, size_t len);

#endif
