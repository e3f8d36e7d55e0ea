/*
 * tls.h -- TLS for the memcache listeners and --http (OpenSSL).
 *
 * A TLS connection keeps its socket and its place in the one event loop.
 * OpenSSL never touches the socket: conn.c reads ciphertext with one
 * read() per readiness event and hands it to tls_input(), which decrypts
 * every complete record into the connection's input buffer; replies are
 * encrypted by tls_output() into tls_wire() and written with one write(),
 * as plain replies are.  So the handshake (SSL_accept's work, started by
 * the first SSL_read) is driven by read readiness alone, SSL never wants
 * to write to a socket (its output goes to memory), and no decrypted byte
 * stays inside OpenSSL between events (tls_input drains SSL_pending).
 *
 * Without OpenSSL (./configure --with-openssl=no) the stubs below say
 * that TLS is off, and --tls-cert is refused by options.c.
 */
#ifndef SAKER_TLS_H
#define SAKER_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

struct tls;

enum tls_rc {
	TLS_OK = 0,     /* progress (maybe no plaintext yet) */
	TLS_AGAIN,      /* nothing to read now */
	TLS_EOF,        /* the peer closed (close_notify or end of stream) */
	TLS_PLAIN,      /* the first byte was no TLS handshake record */
	TLS_FAIL        /* handshake or record error; tls_error() says why */
};

#ifdef HAVE_OPENSSL
/* Build the server context from --tls-cert/--tls-key (and --tls-ca, which
 * makes client certificates mandatory).  Returns -1 after logging. */
int tls_setup(const char *cert, const char *key, const char *ca);
/* SIGHUP: read the files again; a bad pair is logged and the old context
 * kept.  Connections already open keep the context they started with. */
void tls_reload(void);
void tls_teardown(void);
bool tls_on(void);

/* A server-side TLS state for one accepted socket, or NULL (no memory). */
struct tls *tls_new(void);
void tls_free(struct tls *t);
/* One read() of ciphertext from fd, then decrypt all complete records into
 * `plain`; *nplain counts the bytes added. */
enum tls_rc tls_input(struct tls *t, int fd, struct evbuffer *plain, size_t *nplain);
/* Encrypt `plain` (drained) into tls_wire() once the handshake is done;
 * before that it waits in `plain`.  TLS_FAIL after a fatal error. */
enum tls_rc tls_output(struct tls *t, struct evbuffer *plain);
/* Ciphertext waiting for the socket: handshake messages, alerts, records. */
struct evbuffer *tls_wire(struct tls *t);
/* Queue a close_notify alert (best effort, before closing). */
void tls_close_notify(struct tls *t);
/* Why the last TLS_FAIL happened (static string). */
const char *tls_error(const struct tls *t);
/* Is the handshake over (application data may flow)? */
bool tls_handshake_done(const struct tls *t);
/* Bytes this TLS state holds: its ciphertext buffers and OpenSSL's record
 * buffers (released when idle: SSL_MODE_RELEASE_BUFFERS).  For the
 * per-connection memory budget. */
size_t tls_memory(const struct tls *t);

/* --http: a bufferevent speaking TLS on an accepted socket (evhttp's
 * bevcb), or NULL when TLS is off. */
struct bufferevent *tls_http_bev(struct event_base *base);
/* Is bev (of tls_http_bev) still in its handshake? */
bool tls_bev_handshaking(struct bufferevent *bev);
/* Has the handshake got a whole ClientHello (and answered it)?  Stalled
 * handshakes of a flood rarely have; a real client's has, one packet in:
 * when too many are in progress, those without go first (issue 45). */
bool tls_hello_seen(const struct tls *t);
bool tls_bev_hello_seen(struct bufferevent *bev);
#else
static inline int tls_setup(const char *c, const char *k, const char *a)
{ (void)c; (void)k; (void)a; return -1; }
static inline bool tls_on(void) { return false; }
static inline void tls_reload(void) { }
static inline void tls_teardown(void) { }
static inline struct tls *tls_new(void) { return NULL; }
static inline void tls_free(struct tls *t) { (void)t; }
static inline enum tls_rc tls_input(struct tls *t, int fd, struct evbuffer *p,
    size_t *n) { (void)t; (void)fd; (void)p; *n = 0; return TLS_FAIL; }
static inline enum tls_rc tls_output(struct tls *t, struct evbuffer *p)
{ (void)t; (void)p; return TLS_FAIL; }
static inline struct evbuffer *tls_wire(struct tls *t) { (void)t; return NULL; }
static inline void tls_close_notify(struct tls *t) { (void)t; }
static inline const char *tls_error(const struct tls *t) { (void)t; return "no TLS"; }
static inline size_t tls_memory(const struct tls *t) { (void)t; return 0; }
static inline bool tls_handshake_done(const struct tls *t) { (void)t; return true; }
static inline struct bufferevent *tls_http_bev(struct event_base *b) { (void)b; return NULL; }
static inline bool tls_bev_handshaking(struct bufferevent *b) { (void)b; return false; }
static inline bool tls_hello_seen(const struct tls *t) { (void)t; return true; }
static inline bool tls_bev_hello_seen(struct bufferevent *b) { (void)b; return true; }
#endif

#endif
