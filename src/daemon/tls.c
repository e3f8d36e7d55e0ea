/* tls.c -- TLS for the memcache listeners and --http (tls.h says how). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <event2/bufferevent_ssl.h>

#include "log.h"
#include "tls.h"

/* Ciphertext asked of one read(), and plaintext taken per SSL_read: one
 * full record (16 KiB of data plus header, MAC and padding). */
#define TLS_CHUNK (16384 + 512)
/* What OpenSSL's record buffers hold while a record is in progress. */
#define TLS_RECORD_BUF (16384 + 2048)

struct tls {
	SSL *ssl;
	struct evbuffer *cin;   /* ciphertext read, not yet decrypted */
	struct evbuffer *cout;  /* ciphertext for the socket */
	bool started;           /* the first byte was looked at */
	bool failed;            /* a fatal error: send nothing more */
	char err[160];
};

static struct {
	SSL_CTX *ctx;           /* new connections start with this one */
	BIO_METHOD *bio;
	const char *cert, *key, *ca;
} tls_g;

/* --- a BIO over the connection's two evbuffers ------------------------- */

static int
bio_write(BIO *b, const char *buf, int len)
{
	struct tls *t = BIO_get_data(b);

	BIO_clear_retry_flags(b);
	if (len < 0 || evbuffer_add(t->cout, buf, (size_t)len) != 0)
		return -1;
	return len;
}

static int
bio_read(BIO *b, char *buf, int len)
{
	struct tls *t = BIO_get_data(b);
	int n;

	BIO_clear_retry_flags(b);
	if (len <= 0)
		return 0;
	n = evbuffer_remove(t->cin, buf, (size_t)len);
	if (n <= 0) {
		/* no more ciphertext now: the next read event brings it */
		BIO_set_retry_read(b);
		return -1;
	}
	return n;
}

static long
bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int
bio_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

/* --- the server context ------------------------------------------------- */

/* OpenSSL's oldest queued error as text, the queue emptied. */
static void
ssl_errstr(char *buf, size_t len, const char *fallback)
{
	unsigned long e = ERR_get_error();

	if (e == 0)
		snprintf(buf, len, "%s", fallback);
	else
		ERR_error_string_n(e, buf, len);
	ERR_clear_error();
}

static SSL_CTX *
make_ctx(const char *cert, const char *key, const char *ca)
{
	static const unsigned char sid[] = "sakerd";
	char err[256];
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	const char *what = "creating the TLS context";

	if (ctx == NULL)
		goto fail;
	/* TLS 1.2 and 1.3 only, as memcached -Z; no renegotiation (a client
	 * could make us redo the handshake's work at will) */
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION))
		goto fail;
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE);
	/* an idle connection holds no record buffers */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	what = cert;
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
		goto fail;
	what = key;
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
		goto fail;
	what = "--tls-key does not match --tls-cert";
	if (SSL_CTX_check_private_key(ctx) != 1)
		goto fail;
	if (ca != NULL) {
		STACK_OF(X509_NAME) *names;

		what = ca;
		if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1 ||
		    (names = SSL_load_client_CA_file(ca)) == NULL)
			goto fail;
		SSL_CTX_set_client_CA_list(ctx, names);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER |
		    SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	/* resumed sessions keep the verified client: name our cache */
	if (!SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1))
		goto fail;
	return ctx;
fail:
	ssl_errstr(err, sizeof(err), "unknown error");
	log_error("TLS: %s: %s", what, err);
	SSL_CTX_free(ctx);
	return NULL;
}

int
tls_setup(const char *cert, const char *key, const char *ca)
{
	tls_g.bio = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK,
	    "saker evbuffer");
	if (tls_g.bio == NULL || !BIO_meth_set_write(tls_g.bio, bio_write) ||
	    !BIO_meth_set_read(tls_g.bio, bio_read) ||
	    !BIO_meth_set_ctrl(tls_g.bio, bio_ctrl) ||
	    !BIO_meth_set_create(tls_g.bio, bio_create)) {
		log_error("TLS: cannot create the BIO method");
		tls_teardown();
		return -1;
	}
	tls_g.ctx = make_ctx(cert, key, ca);
	if (tls_g.ctx == NULL) {
		tls_teardown();
		return -1;
	}
	tls_g.cert = cert;
	tls_g.key = key;
	tls_g.ca = ca;
	log_info("TLS on: certificate %s%s%s", cert, ca != NULL ?
	    ", client certificates verified against " : "", ca != NULL ? ca : "");
	return 0;
}

void
tls_reload(void)
{
	SSL_CTX *ctx;

	if (tls_g.ctx == NULL)
		return;
	ctx = make_ctx(tls_g.cert, tls_g.key, tls_g.ca);
	if (ctx == NULL) {
		log_error("TLS: keeping the previous certificate and key");
		return;
	}
	/* open connections hold their own reference to the old context */
	SSL_CTX_free(tls_g.ctx);
	tls_g.ctx = ctx;
	log_info("TLS: reloaded %s and %s", tls_g.cert, tls_g.key);
}

void
tls_teardown(void)
{
	SSL_CTX_free(tls_g.ctx);
	tls_g.ctx = NULL;
	if (tls_g.bio != NULL)
		BIO_meth_free(tls_g.bio);
	tls_g.bio = NULL;
}

bool
tls_on(void)
{
	return tls_g.ctx != NULL;
}

/* --- one connection ----------------------------------------------------- */

struct tls *
tls_new(void)
{
	struct tls *t = calloc(1, sizeof(*t));
	BIO *b = NULL;

	if (t == NULL)
		return NULL;
	t->cin = evbuffer_new();
	t->cout = evbuffer_new();
	t->ssl = SSL_new(tls_g.ctx);
	if (t->cin == NULL || t->cout == NULL || t->ssl == NULL ||
	    (b = BIO_new(tls_g.bio)) == NULL) {
		ERR_clear_error();
		tls_free(t);
		return NULL;
	}
	BIO_set_data(b, t);
	SSL_set_bio(t->ssl, b, b);
	SSL_set_accept_state(t->ssl);
	return t;
}

void
tls_free(struct tls *t)
{
	if (t == NULL)
		return;
	SSL_free(t->ssl);
	if (t->cin != NULL)
		evbuffer_free(t->cin);
	if (t->cout != NULL)
		evbuffer_free(t->cout);
	free(t);
}

static enum tls_rc
tls_fail(struct tls *t, const char *fallback)
{
	ssl_errstr(t->err, sizeof(t->err), fallback);
	t->failed = true;
	return TLS_FAIL;
}

enum tls_rc
tls_input(struct tls *t, int fd, struct evbuffer *plain, size_t *nplain)
{
	struct evbuffer_iovec v;
	ssize_t n;

	*nplain = 0;
	if (t->failed)
		return TLS_FAIL;
	if (evbuffer_reserve_space(t->cin, TLS_CHUNK, &v, 1) < 1)
		return tls_fail(t, "out of memory");
	n = read(fd, v.iov_base, TLS_CHUNK);
	v.iov_len = n > 0 ? (size_t)n : 0;
	evbuffer_commit_space(t->cin, &v, 1);
	if (n == 0)
		return TLS_EOF;
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return TLS_AGAIN;
		snprintf(t->err, sizeof(t->err), "%s", strerror(errno));
		t->failed = true;
		return TLS_FAIL;
	}
	if (!t->started) {
		/* a TLS client opens with a handshake record (type 22); a
		 * memcache command never starts with that byte */
		unsigned char first;

		evbuffer_copyout(t->cin, &first, 1);
		if (first != 0x16) {
			t->failed = true;
			return TLS_PLAIN;
		}
		t->started = true;
	}
	/* decrypt every complete record we have: nothing is left in
	 * OpenSSL (SSL_pending) that a later read event would not announce */
	for (;;) {
		size_t got = 0;
		int ok;

		if (evbuffer_reserve_space(plain, TLS_CHUNK, &v, 1) < 1)
			return tls_fail(t, "out of memory");
		ERR_clear_error();
		ok = SSL_read_ex(t->ssl, v.iov_base, TLS_CHUNK, &got);
		v.iov_len = ok ? got : 0;
		evbuffer_commit_space(plain, &v, 1);
		if (ok) {
			*nplain += got;
			continue;
		}
		switch (SSL_get_error(t->ssl, 0)) {
		case SSL_ERROR_WANT_READ:
			/* a partial record (or handshake flight) waits for
			 * more ciphertext */
			return TLS_OK;
		case SSL_ERROR_WANT_WRITE:
			/* cannot happen: bio_write never refuses */
			return TLS_OK;
		case SSL_ERROR_ZERO_RETURN:
			return TLS_EOF;
		default:
			return tls_fail(t, "TLS protocol error");
		}
	}
}

enum tls_rc
tls_output(struct tls *t, struct evbuffer *plain)
{
	size_t len;

	if (t->failed)
		return TLS_FAIL;
	/* replies wait for the handshake (a client speaks first anyway) */
	if (!SSL_is_init_finished(t->ssl))
		return TLS_OK;
	while ((len = evbuffer_get_length(plain)) > 0) {
		struct evbuffer_iovec v;
		size_t w = 0, n;
		const void *p;

		if (evbuffer_peek(plain, -1, NULL, &v, 1) < 1)
			break;
		n = v.iov_len;
		p = v.iov_base;
		if (n < 16384 && len > n) {
			/* small chunks would make small records: fill one */
			n = len < 16384 ? len : 16384;
			p = evbuffer_pullup(plain, (ev_ssize_t)n);
			if (p == NULL)
				return tls_fail(t, "out of memory");
		}
		ERR_clear_error();
		if (!SSL_write_ex(t->ssl, p, n, &w))
			return tls_fail(t, "TLS write error");
		evbuffer_drain(plain, w);
	}
	return TLS_OK;
}

struct evbuffer *
tls_wire(struct tls *t)
{
	return t->cout;
}

void
tls_close_notify(struct tls *t)
{
	if (t->failed || !SSL_is_init_finished(t->ssl))
		return;
	ERR_clear_error();
	(void)SSL_shutdown(t->ssl);
	ERR_clear_error();
}

const char *
tls_error(const struct tls *t)
{
	return t->err[0] != '\0' ? t->err : "TLS error";
}

bool
tls_bev_handshaking(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);

	return ssl != NULL && !SSL_is_init_finished(ssl);
}

bool
tls_hello_seen(const struct tls *t)
{
	return SSL_get_state(t->ssl) != TLS_ST_BEFORE;
}

bool
tls_bev_hello_seen(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);

	return ssl == NULL || SSL_get_state(ssl) != TLS_ST_BEFORE;
}

bool
tls_handshake_done(const struct tls *t)
{
	return SSL_is_init_finished(t->ssl);
}

size_t
tls_memory(const struct tls *t)
{
	size_t n = evbuffer_get_length(t->cin) + evbuffer_get_length(t->cout);

	/* OpenSSL keeps its record buffers during the handshake and while a
	 * record is half read; otherwise RELEASE_BUFFERS frees them */
	if (SSL_in_init(t->ssl))
		n += 2 * TLS_RECORD_BUF;
	else if (evbuffer_get_length(t->cin) > 0 || SSL_has_pending(t->ssl))
		n += TLS_RECORD_BUF;
	return n;
}

/* --- --http as HTTPS ---------------------------------------------------- */

struct bufferevent *
tls_http_bev(struct event_base *base)
{
	struct bufferevent *bev;
	SSL *ssl;

	if (tls_g.ctx == NULL)
		return bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	ssl = SSL_new(tls_g.ctx);
	if (ssl == NULL) {
		ERR_clear_error();
		return NULL;
	}
	/* evhttp sets the accepted socket on it; the handshake follows */
	bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
	    BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL) {
		SSL_free(ssl);
		return NULL;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}
