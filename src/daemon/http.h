/* http.h -- GET /metrics (Prometheus text format) and GET /healthz, served
 * by libevent's evhttp on the server's own event loop. */
#ifndef SAKER_HTTP_H
#define SAKER_HTTP_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include <event2/event.h>

struct broker;
struct http_server;

/* spec is "[ADDR:]PORT" (ADDR defaults to 127.0.0.1), or NULL for no
 * listener (see http_listen_fd); / is the web console and /api/ its JSON
 * API (console.h); /metrics reports
 * broker b (at most max_queues queues), /healthz also *stopping.  With
 * need_admin, /metrics and the console answer only HTTP Basic auth of an
 * --auth-file user with admin rights (401 otherwise).  commit() commits
 * the current batch at once (the console's POSTs answer its
 * outcome).  HTTP connections count against max_conns (-c) together with
 * b's memcache connections (stats.curr_connections), and may hold at most a
 * quarter of it together; one past either is closed at once.  Each must
 * send a whole request within 10 s of its accept or its last request, and
 * with need_admin make an authorized one within LOGIN_TIMEOUT_S.  NULL on error
 * (logged). */
struct http_server *http_start(struct event_base *base, const char *spec,
    struct broker *b, unsigned max_queues, const bool *stopping,
    bool need_admin, int max_conns, bool (*commit)(char *why, size_t len));
/* Start accepting on the address http_start() bound (which does not
 * listen yet: the store opens first); 0, or -1 after logging. */
int http_listen(struct http_server *h);
/* Names besides the listening address that requests may carry in Host
 * and Origin (--http-host; names[] must outlive h).  Anything else is
 * refused with 403, but /healthz (DNS rebinding). */
void http_allow_hosts(struct http_server *h, const char *const *names, size_t n);
/* Serve the connections of fd, a socket already listening (the
 * in-process fuzzer's way in: http_start with spec NULL makes a server
 * without a listener).  -1 on error. */
int http_listen_fd(struct http_server *h, evutil_socket_t fd);
/* --tls-handshake-timeout for HTTPS connections (default 5 s). */
void http_set_handshake_timeout(int64_t ms);
/* --idle-timeout (0: none): when shorter than the 10 s request deadline,
 * a connection must send each whole request (and may sit idle between
 * them) at most this long. */
void http_set_idle_timeout(int64_t ms);
/* Bytes the HTTP connections hold now: unread input and unsent replies
 * (the fuzzers check the budgets with it). */
void http_memory(size_t *in, size_t *out);
/* Read ahead per connection, and unsent replies in all past which
 * requests get 503 (one reply may still exceed it). */
size_t http_max_input(void);
size_t http_max_unsent(void);
/* Out of descriptors: stop accepting on l for 100 ms rather than retry
 * the accept at once, forever (the memcache listener's too). */
struct evconnlistener;
void http_pause_accepts(struct evconnlistener *l);
/* HTTP connections open now (for the memcache listener's -c check). */
unsigned http_connections(void);
void http_stop(struct http_server *h);

struct evbuffer;
/* Append s[0..len) as a Prometheus label value (without the quotes). */
void http_label_value(struct evbuffer *b, const char *s, size_t len);

#endif
