/* options.h -- sakerd's command line. */
#ifndef SAKER_OPTIONS_H
#define SAKER_OPTIONS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "saker/store.h"

#define SAKERD_DEFAULT_PORT 22133
/* --max-conn-memory by default: this, or --max-item-size + 1 MiB when that
 * is larger (a connection must hold one whole set and its replies). */
#define SAKERD_DEFAULT_CONN_MEMORY (4u * 1024 * 1024)
#define SAKERD_CONN_MEMORY_SLACK (1024u * 1024)
/* --drain-timeout by default, in seconds */
#define SAKERD_DEFAULT_DRAIN_TIMEOUT 30
/* --tls-handshake-timeout: seconds a TLS handshake may take by default */
#define SAKERD_DEFAULT_TLS_HANDSHAKE 5
/* --http-host may be given this many times */
#define OPT_MAX_HTTP_HOSTS 16
/* --max-queues: generous for real deployments (a queue per tenant or
 * worker), yet bounded: 100,000 queues of one small item each made sakerd's
 * RSS about 70 MB (memory and lmdb stores; docs/security.md) */
#define SAKERD_DEFAULT_MAX_QUEUES 100000
/* The default --store is the store layer's saker_store_default_spec():
 * durable by default when the LMDB driver is built (README, "Choosing a
 * store"; sakerd(8)), else memory. */

struct options {
	const char *listen;          /* -l; NULL with -s alone = no TCP */
	int port;                    /* -p */
	const char *unix_socket;     /* -s */
	const char *store_spec;      /* --store */
	saker_sync_mode sync;        /* --sync */
	int sync_period_ms;          /* --sync periodic:DURATION */
	bool async_commit;           /* --commit async: a batch in flight */
	int max_conns;               /* -c */
	int64_t idle_timeout_ms;     /* --idle-timeout; 0 = never */
	size_t max_item_size;        /* --max-item-size */
	uint64_t max_memory;         /* --max-memory (memory store) */
	bool max_memory_set;
	unsigned max_open;           /* --max-open: open items per queue per connection */
	size_t max_queues;           /* --max-queues; 0 = no limit */
	bool enable_shutdown;        /* --enable-shutdown */
	bool daemonize;              /* -d */
	const char *pidfile;         /* -P */
	const char *user;            /* -u: run as this user after binding */
	const char *log_target;      /* --log */
	const char *config_path;     /* --config */
	const char *auth_file;       /* --auth-file: user:password lines */
	struct auth *auth;           /* ... read (server_init() takes it) */
	const char *http;            /* --http [ADDR:]PORT */
	bool http_public;            /* --http-public: /metrics needs no login */
	const char *http_hosts[OPT_MAX_HTTP_HOSTS]; /* --http-host NAME */
	size_t nhttp_hosts;
	int64_t tls_handshake_ms;    /* --tls-handshake-timeout */
	unsigned http_history_ms;    /* --http-history: depth sampling; 0 none */
	const char *tls_cert;        /* --tls-cert: TCP listeners and --http speak TLS */
	const char *tls_key;         /* --tls-key */
	const char *tls_ca;          /* --tls-ca: require verified client certificates */
	unsigned metrics_max_queues; /* --metrics-max-queues */
	size_t max_conn_memory;      /* --max-conn-memory: input, replies and
	                              * pre-login bodies of one connection */
	int64_t drain_timeout_ms;    /* --drain-timeout: close a connection over
	                              * its memory budget that reads nothing */
	int verbose;                 /* -v count */
};

/* Parse argv into *o (defaults first).  Returns 0 to run, 1 when --help or
 * --version was printed (exit 0), -1 after printing an error (exit 1). */
int options_parse(int argc, char **argv, struct options *o);

#endif
