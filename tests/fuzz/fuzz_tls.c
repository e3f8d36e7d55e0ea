/* fuzz_tls.c -- fuzz target: a client's bytes on a --tls-cert listener,
 * before and during the handshake (tls.c's glue to OpenSSL: record
 * reading, the plain-text check, failures and their alert, close). */
#include "config.h"

#include <sys/socket.h>

#include <stdio.h>
#include <unistd.h>

#include <event2/event.h>

#include "conn.h"
#include "fuzz.h"
#include "server.h"
#include "tls.h"

#ifdef HAVE_OPENSSL
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

/*
 * The server is fuzz_conn's, given a certificate made here once (P-256,
 * self-signed, written to temporary files for tls_setup() and removed).
 * Each input is one client of a TLS connection: a socketpair whose server
 * end is a connection with TLS on, the input written in the pieces its
 * first byte chooses (as for fuzz_conn) with the loop turned in between,
 * the server's answers read and dropped, then a hang-up.  Afterwards no
 * connection may be left.  A valid ClientHello gets a ServerHello; the
 * rest of a handshake depends on the server's random, so what is fuzzed
 * is everything up to there: records split anywhere, plain text on the
 * TLS port, broken records, alerts, early hang-ups; and (bit 0x40 of the
 * first byte) several handshakes at once against their budget and
 * deadline (three_clients()).
 */

static void
write_pem(char *path, EVP_PKEY *pk, X509 *x)
{
	int fd = mkstemp(path);
	FILE *f;

	FUZZ_CHECK(fd >= 0);
	f = fdopen(fd, "w");
	FUZZ_CHECK(f != NULL);
	FUZZ_CHECK(x != NULL ? PEM_write_X509(f, x) == 1 :
	    PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL) == 1);
	FUZZ_CHECK(fclose(f) == 0);
}

static void
tls_once(void)
{
	/* static: tls_setup() keeps the names (for a reload) */
	static char cert[32], key[32];
	EVP_PKEY *pk;
	X509 *x;
	X509_NAME *n;

	/* on once, unless fuzz_http turned it off in between */
	if (tls_on())
		return;
	snprintf(cert, sizeof(cert), "/tmp/fuzz_tls_cert.XXXXXX");
	snprintf(key, sizeof(key), "/tmp/fuzz_tls_key.XXXXXX");
	pk = EVP_EC_gen("P-256");
	FUZZ_CHECK(pk != NULL);
	x = X509_new();
	FUZZ_CHECK(x != NULL);
	FUZZ_CHECK(X509_set_version(x, 2) == 1);
	FUZZ_CHECK(ASN1_INTEGER_set(X509_get_serialNumber(x), 1) == 1);
	FUZZ_CHECK(X509_gmtime_adj(X509_getm_notBefore(x), 0) != NULL);
	FUZZ_CHECK(X509_gmtime_adj(X509_getm_notAfter(x), 86400L * 365) != NULL);
	FUZZ_CHECK(X509_set_pubkey(x, pk) == 1);
	n = X509_get_subject_name(x);
	FUZZ_CHECK(X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
	    (const unsigned char *)"localhost", -1, -1, 0) == 1);
	FUZZ_CHECK(X509_set_issuer_name(x, n) == 1);
	FUZZ_CHECK(X509_sign(x, pk, EVP_sha256()) > 0);
	write_pem(cert, NULL, x);
	write_pem(key, pk, NULL);
	FUZZ_CHECK(tls_setup(cert, key, NULL) == 0);
	unlink(cert);
	unlink(key);
	X509_free(x);
	EVP_PKEY_free(pk);
}

/* Handshakes in progress: the connections that say so, which must be
 * what conn.c counts. */
static unsigned
handshaking(void)
{
	struct conn *c;
	unsigned n = 0;

	for (c = conn_first(); c != NULL; c = TAILQ_NEXT(c, link))
		n += c->handshaking;
	FUZZ_CHECK(n == conn_tls_handshakes());
	return n;
}

/*
 * Bit 0x40 of the first byte: the handshake path under attack (issue 35).
 * Three clients connect one after another, with a budget of two
 * handshakes in progress (so the third closes the oldest still in its
 * handshake), each sending a third of the input in its chunks and none
 * hanging up.  Then every deadline fires at once (--tls-handshake-timeout,
 * without waiting for it): afterwards no connection may be left in its
 * handshake, and none may be counted as one.
 */
static void
three_clients(const uint8_t *data, size_t size, size_t chunk)
{
	int peer[3], sv[2], i;
	size_t part = size / 3, off = 0;
	struct conn *c;

	conn_set_tls_handshakes_max(2);
	for (i = 0; i < 3; i++) {
		size_t n = i < 2 ? part : size - off;

		FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0, sv) == 0);
		peer[i] = sv[1];
		if (conn_new(sv[0], true) == NULL)
			close(sv[0]);
		FUZZ_CHECK(handshaking() <= 2);
		fuzz_send(peer[i], data + off, n, chunk);
		off += n;
		FUZZ_CHECK(handshaking() <= 2);
	}
	for (c = conn_first(); c != NULL; c = TAILQ_NEXT(c, link))
		if (c->handshaking)
			event_active(c->hs_ev, EV_TIMEOUT, 1);
	fuzz_turns(-1);
	FUZZ_CHECK(handshaking() == 0);
	for (i = 0; i < 3; i++)
		close(peer[i]);
	fuzz_turns(-1);
	conn_set_tls_handshakes_max(1024);
}

int
fuzz_tls(const uint8_t *data, size_t size)
{
	fuzz_server_setup();
	tls_once();
	if (size == 0)
		return 0;
	if ((data[0] & 0x40) != 0) {
		three_clients(data + 1, size - 1, fuzz_chunk(data[0], size - 1));
		fuzz_reset();
		FUZZ_CHECK(srv->broker.stats.curr_connections == 0);
		FUZZ_CHECK(conn_tls_handshakes() == 0);
		return 0;
	}
	/* logged out, as every connection is with an --auth-file */
	fuzz_session(data + 1, size - 1, fuzz_chunk(data[0], size - 1), false,
	    true);
	fuzz_reset();
	FUZZ_CHECK(srv->broker.stats.curr_connections == 0);
	FUZZ_CHECK(conn_tls_handshakes() == 0);
	return 0;
}

#else

int
fuzz_tls(const uint8_t *data, size_t size)
{
	(void)data;
	(void)size;
	return 0;		/* built without OpenSSL: no TLS to fuzz */
}

#endif
