/* tls_client.c -- `saker --tls` (tls_client.h). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#ifdef HAVE_OPENSSL
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#endif

#include "tls_client.h"

struct tls_client_opts tls_client;

int
tls_client_take_options(int *argc, char **argv)
{
	int i, o = 1;

	for (i = 1; i < *argc; i++) {
		const char **dst = NULL;

		if (strcmp(argv[i], "--") == 0) {
			while (i < *argc)
				argv[o++] = argv[i++];
			break;
		}
		if (strcmp(argv[i], "--tls") == 0) {
			tls_client.on = true;
			continue;
		}
		if (strcmp(argv[i], "--tls-ca") == 0)
			dst = &tls_client.ca;
		else if (strcmp(argv[i], "--tls-cert") == 0)
			dst = &tls_client.cert;
		else if (strcmp(argv[i], "--tls-key") == 0)
			dst = &tls_client.key;
		if (dst == NULL) {
			argv[o++] = argv[i];
			continue;
		}
		if (i + 1 >= *argc) {
			fprintf(stderr, "saker: %s needs a file name\n", argv[i]);
			return -1;
		}
		*dst = argv[++i];
		tls_client.on = true;
	}
	argv[o] = NULL;
	*argc = o;
	if ((tls_client.cert != NULL) != (tls_client.key != NULL)) {
		fprintf(stderr, "saker: --tls-cert and --tls-key go together\n");
		return -1;
	}
#ifndef HAVE_OPENSSL
	if (tls_client.on) {
		fprintf(stderr, "saker: --tls: this saker was built without OpenSSL\n");
		return -1;
	}
#endif
	return 0;
}

#ifdef HAVE_OPENSSL
const char *
tls_client_error(char *buf, size_t len)
{
	unsigned long e = ERR_get_error();

	if (e == 0)
		snprintf(buf, len, "TLS error");
	else
		ERR_error_string_n(e, buf, len);
	ERR_clear_error();
	return buf;
}

static SSL_CTX *
client_ctx(char *err, size_t errlen)
{
	static SSL_CTX *ctx;
	char e[256];

	if (ctx != NULL)
		return ctx;
	ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL)
		goto fail;
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION))
		goto fail;
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (tls_client.ca != NULL ? SSL_CTX_load_verify_locations(ctx, tls_client.ca,
	    NULL) != 1 : SSL_CTX_set_default_verify_paths(ctx) != 1)
		goto fail;
	if (tls_client.cert != NULL &&
	    (SSL_CTX_use_certificate_chain_file(ctx, tls_client.cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, tls_client.key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1))
		goto fail;
	return ctx;
fail:
	snprintf(err, errlen, "TLS setup: %s", tls_client_error(e, sizeof(e)));
	SSL_CTX_free(ctx);
	ctx = NULL;
	return NULL;
}

SSL *
tls_client_new(const char *server, char *err, size_t errlen)
{
	SSL_CTX *ctx = client_ctx(err, errlen);
	char host[256], e[256];
	const char *end;
	size_t hl;
	SSL *ssl;
	int ok;

	if (ctx == NULL)
		return NULL;
	/* the host part of HOST:PORT or [V6ADDR]:PORT */
	if (server[0] == '[' && (end = strchr(server, ']')) != NULL)
		server++;
	else if ((end = strrchr(server, ':')) == NULL)
		end = server + strlen(server);
	hl = (size_t)(end - server);
	if (hl == 0 || hl >= sizeof(host)) {
		snprintf(err, errlen, "TLS: bad server name '%s'", server);
		return NULL;
	}
	memcpy(host, server, hl);
	host[hl] = '\0';
	if ((ssl = SSL_new(ctx)) == NULL) {
		snprintf(err, errlen, "TLS: %s", tls_client_error(e, sizeof(e)));
		return NULL;
	}
	/* an address must be in the certificate's IP names, a name in its
	 * DNS names (and is sent as SNI) */
	ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host);
	if (!ok) {
		ERR_clear_error();
		ok = SSL_set1_host(ssl, host) && SSL_set_tlsext_host_name(ssl, host);
	}
	if (!ok) {
		snprintf(err, errlen, "TLS: %s", tls_client_error(e, sizeof(e)));
		SSL_free(ssl);
		return NULL;
	}
	return ssl;
}
#endif
