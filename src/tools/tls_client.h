/*
 * tls_client.h -- `saker --tls`: TLS for put, get, stats and bench.
 *
 * The options are global to saker (saker.c takes them out of argv before
 * the subcommand parses the rest): --tls, --tls-ca FILE (trust these CAs
 * instead of the system's), --tls-cert FILE and --tls-key FILE (a client
 * certificate, for a server started with --tls-ca).
 */
#ifndef SAKER_TLS_CLIENT_H
#define SAKER_TLS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

struct tls_client_opts {
	bool on;
	const char *ca, *cert, *key;
};
extern struct tls_client_opts tls_client;

/* Remove the --tls options from argv (up to a "--").  Returns 0, or -1
 * after printing a usage error. */
int tls_client_take_options(int *argc, char **argv);

/* The help lines for the options. */
#define TLS_CLIENT_HELP \
	"      --tls                speak TLS (the server runs with --tls-cert)\n" \
	"      --tls-ca FILE        trust the CAs in FILE, not the system's\n" \
	"      --tls-cert FILE      client certificate (server has --tls-ca)\n" \
	"      --tls-key FILE       its private key\n"

#ifdef HAVE_OPENSSL
struct ssl_st;
/* A client SSL for `server` (HOST:PORT as given to -s): the name or
 * address is what the certificate must show.  NULL with err set. */
struct ssl_st *tls_client_new(const char *server, char *err, size_t errlen);
/* OpenSSL's last error as text (the queue emptied). */
const char *tls_client_error(char *buf, size_t len);
#endif

#endif
