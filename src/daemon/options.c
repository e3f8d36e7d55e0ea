/* options.c -- sakerd's command line: defaults, parsing, --help. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "options.h"
#include "size.h"
#include "duration.h"

enum {
	OPT_STORE = 256, OPT_SYNC, OPT_MAX_ITEM, OPT_SHUTDOWN, OPT_LOG,
	OPT_MAX_MEMORY, OPT_MAX_OPEN, OPT_VERSION, OPT_HELP, OPT_CONFIG, OPT_HTTP,
	OPT_METRICS_MAX, OPT_AUTH_FILE, OPT_IDLE_TIMEOUT, OPT_TLS_CERT, OPT_TLS_KEY,
	OPT_TLS_CA, OPT_CONN_MEMORY, OPT_DRAIN_TIMEOUT, OPT_HTTP_PUBLIC,
	OPT_MAX_QUEUES, OPT_HTTP_HISTORY, OPT_HTTP_HOST, OPT_TLS_HANDSHAKE,
	OPT_COMMIT
};

static const struct option longopts[] = {
	{ "listen", required_argument, NULL, 'l' },
	{ "port", required_argument, NULL, 'p' },
	{ "unix-socket", required_argument, NULL, 's' },
	{ "store", required_argument, NULL, OPT_STORE },
	{ "sync", required_argument, NULL, OPT_SYNC },
	{ "commit", required_argument, NULL, OPT_COMMIT },
	{ "max-connections", required_argument, NULL, 'c' },
	{ "max-item-size", required_argument, NULL, OPT_MAX_ITEM },
	{ "max-memory", required_argument, NULL, OPT_MAX_MEMORY },
	{ "max-open", required_argument, NULL, OPT_MAX_OPEN },
	{ "max-queues", required_argument, NULL, OPT_MAX_QUEUES },
	{ "enable-shutdown", no_argument, NULL, OPT_SHUTDOWN },
	{ "daemonize", no_argument, NULL, 'd' },
	{ "pidfile", required_argument, NULL, 'P' },
	{ "user", required_argument, NULL, 'u' },
	{ "log", required_argument, NULL, OPT_LOG },
	{ "verbose", no_argument, NULL, 'v' },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "auth-file", required_argument, NULL, OPT_AUTH_FILE },
	{ "idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT },
	{ "http", required_argument, NULL, OPT_HTTP },
	{ "http-public", no_argument, NULL, OPT_HTTP_PUBLIC },
	{ "http-history", required_argument, NULL, OPT_HTTP_HISTORY },
	{ "http-host", required_argument, NULL, OPT_HTTP_HOST },
	{ "tls-handshake-timeout", required_argument, NULL, OPT_TLS_HANDSHAKE },
	{ "metrics-max-queues", required_argument, NULL, OPT_METRICS_MAX },
	{ "max-conn-memory", required_argument, NULL, OPT_CONN_MEMORY },
	{ "drain-timeout", required_argument, NULL, OPT_DRAIN_TIMEOUT },
	{ "tls-cert", required_argument, NULL, OPT_TLS_CERT },
	{ "tls-key", required_argument, NULL, OPT_TLS_KEY },
	{ "tls-ca", required_argument, NULL, OPT_TLS_CA },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 }
};

/* The --store forms of the drivers compiled in, and only those. */
#ifdef HAVE_LMDB
#define FORM_LMDB " | lmdb:DIR"
#else
#define FORM_LMDB ""
#endif
#ifdef HAVE_SQLITE
#define FORM_SQLITE " | sqlite:FILE"
#else
#define FORM_SQLITE ""
#endif
#ifdef HAVE_POSTGRES
#define FORM_POSTGRES " |\n                            postgres:CONNINFO"
#else
#define FORM_POSTGRES ""
#endif
#define STORE_FORMS "memory" FORM_LMDB FORM_SQLITE FORM_POSTGRES

static void
usage(FILE *f)
{
	fprintf(f,
"Usage: sakerd [OPTION]...\n"
"A durable message-queue server speaking the memcache protocols (text, meta\n"
"commands and binary).\n"
"\n"
"  -l, --listen ADDR         TCP address to listen on (default 127.0.0.1)\n"
"  -p, --port PORT           TCP port (default %d; 0: no TCP, with -s only)\n"
"  -s, --unix-socket PATH    also listen on a unix-domain socket\n"
"      --store TYPE[,KEY=VAL...][:LOC]  storage driver and its options\n"
"                            (sakerd(8)); compiled in:\n"
"                            %s\n"
"                            %s (default %s)\n"
"      --sync MODE           always | periodic[:DURATION] | never (default\n"
"                            always): when a durable store fsyncs acknowledged\n"
"                            writes (periodic: default 100ms, bare number ms)\n"
"      --commit MODE         sync | async (default sync): async, with --sync\n"
"                            always, LMDB and SQLite fsync a batch on a flush\n"
"                            thread while the next one gathers; PostgreSQL\n"
"                            sends its COMMIT without waiting (any --sync)\n"
"  -c, --max-connections N   most open client connections, --http ones\n"
"                            included (default 4096)\n"
"      --idle-timeout DURATION  close connections that complete no command\n"
"                            for DURATION (blocked gets are not idle; default\n"
"                            0: never)\n"
"      --max-item-size BYTES largest item accepted (default 1m; k/m/g suffixes)\n"
"      --max-conn-memory BYTES  memory one connection may hold in unread input,\n"
"                            replies and pre-login bodies; past it the server\n"
"                            stops reading it until its replies drain\n"
"                            (default 4m, or max-item-size + 1m if larger)\n"
"      --drain-timeout DURATION  close a connection over that budget whose\n"
"                            replies do not move for DURATION (default %ds)\n"
"      --max-memory BYTES    memory store: item memory limit (default unlimited;\n"
"                            the same as --store memory,max-memory=BYTES)\n"
"      --max-open N          open (unconfirmed) items one connection may hold\n"
"                            per queue (default 1; --config can set it per queue)\n"
"      --max-queues N        most queues (default %d, 0: no limit); a write\n"
"                            that would create one more answers SERVER_ERROR\n"
"                            too many queues; gets never create queues\n"
"      --config FILE         per-queue limits (see sakerd(8)); reread on SIGHUP\n"
"      --auth-file FILE      require a login: lines user:HASH[:PERMS] (crypt(3):\n"
"                            $y$, $6$) or user:password[:PERMS] (warned),\n"
"                            memcached's ASCII authentication and binary SASL\n"
"                            PLAIN; PERMS: queues=PATTERN[*] (repeatable), read,\n"
"                            write, admin; the file must not be readable by\n"
"                            others; reread on SIGHUP\n"
"      --http [ADDR:]PORT    serve the web console (/) and its JSON API (/api/),\n"
"                            GET /metrics (Prometheus) and GET /healthz; with\n"
"                            --auth-file all but /healthz ask for HTTP Basic\n"
"                            auth of an admin user; without a login the\n"
"                            console changes nothing unless ADDR is loopback\n"
"      --http-public         /metrics and the console without a login even\n"
"                            with --auth-file\n"
"      --http-host NAME      a name clients use for --http (repeatable); a\n"
"                            request whose Host or Origin is not NAME, the\n"
"                            --http address, localhost or (listening on every\n"
"                            address) an IP address gets 403, but /healthz\n"
"      --http-history DURATION  sample every queue's depth this often for\n"
"                            the console's chart of the last 60 samples\n"
"                            (default 60s: the last hour; 0: no sampling;\n"
"                            10ms to 1h)\n"
"      --metrics-max-queues N  per-queue series in /metrics (default 1000)\n"
"      --tls-cert FILE       TLS 1.2/1.3 on the TCP listener and --http with this\n"
"                            PEM certificate chain (needs --tls-key; the Unix\n"
"                            socket stays plain); reread on SIGHUP\n"
"      --tls-key FILE        the certificate's PEM private key\n"
"      --tls-ca FILE         require client certificates signed by these CAs\n"
"      --tls-handshake-timeout DURATION  close a TLS connection whose\n"
"                            handshake is not done within DURATION (default\n"
"                            %ds); handshakes in\n"
"                            progress beyond a quarter of -c (memcache, and\n"
"                            HTTPS) close the oldest\n"
"      --enable-shutdown     allow the 'shutdown' command\n"
"  -d, --daemonize           detach and run in the background\n"
"  -P, --pidfile FILE        write the process id to FILE (refused while a\n"
"                            running sakerd holds it)\n"
"  -u, --user USER           run as USER once the sockets are bound\n"
"      --log TARGET          stderr (default), syslog, or a file path\n"
"  -v, --verbose             more log output (repeat for debug)\n"
"      --version             print the version and exit\n"
"      --help                print this help and exit\n"
"\n"
"A DURATION is 250ms, 5s, 1.5s, 2m or 2h; a bare number is seconds (but\n"
"milliseconds after periodic:, as in the --config file).\n"
"\n"
"Signals: SIGTERM/SIGINT stop gracefully (commit, close the store, exit 0);\n"
"SIGHUP reopens the log file and rereads --config, --auth-file and the TLS\n"
"certificate and key (a bad file keeps the old one).\n"
"See sakerd(8) and saker-protocol(7).\n",
	    SAKERD_DEFAULT_PORT, saker_store_driver_list(), STORE_FORMS,
	    saker_store_default_spec(), SAKERD_DEFAULT_DRAIN_TIMEOUT,
	    SAKERD_DEFAULT_MAX_QUEUES, SAKERD_DEFAULT_TLS_HANDSHAKE);
}

static int
parse_int(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* A duration flag (duration.h's grammar): a bare number stays seconds, as
 * these flags always took; from min_ms to max_ms, or 0 when zero_ok. */
static int
parse_flag_duration(const char *s, int64_t min_ms, int64_t max_ms,
    bool zero_ok, int64_t *out)
{
	int64_t ms;

	if (parse_duration(s, DURATION_BARE_S, max_ms, &ms) != 0 ||
	    (ms < min_ms && !(ms == 0 && zero_ok)))
		return -1;
	*out = ms;
	return 0;
}

static int
parse_sync(const char *s, struct options *o)
{
	int64_t ms;

	if (strcmp(s, "always") == 0) {
		o->sync = SAKER_SYNC_ALWAYS;
	} else if (strcmp(s, "never") == 0) {
		o->sync = SAKER_SYNC_NEVER;
	} else if (strcmp(s, "periodic") == 0) {
		o->sync = SAKER_SYNC_PERIODIC;
		o->sync_period_ms = 100;
	} else if (strncmp(s, "periodic:", 9) == 0 &&
	    /* a bare number stays milliseconds here, as it always was */
	    parse_duration(s + 9, DURATION_BARE_MS, 3600000, &ms) == 0 &&
	    ms >= 1) {
		o->sync = SAKER_SYNC_PERIODIC;
		o->sync_period_ms = (int)ms;
	} else {
		return -1;
	}
	return 0;
}

/* Where an option that only keeps its argument keeps it; NULL for the
 * others. */
static const char **
string_option(struct options *o, int c)
{
	switch (c) {
	case 'l': return &o->listen;
	case 's': return &o->unix_socket;
	case OPT_STORE: return &o->store_spec;
	case 'P': return &o->pidfile;
	case 'u': return &o->user;
	case OPT_LOG: return &o->log_target;
	case OPT_CONFIG: return &o->config_path;
	case OPT_AUTH_FILE: return &o->auth_file;
	case OPT_HTTP: return &o->http;
	case OPT_TLS_CERT: return &o->tls_cert;
	case OPT_TLS_KEY: return &o->tls_key;
	case OPT_TLS_CA: return &o->tls_ca;
	default: return NULL;
	}
}

/* "memory": the drivers that take max-memory=, for the message */
static const char *
max_memory_stores(void)
{
	static char list[128];
	size_t i, off = 0;

	for (i = 0; saker_store_drivers[i] != NULL && off < sizeof(list); i++)
		if (saker_store_driver_takes(saker_store_drivers[i], "max-memory"))
			off += (size_t)snprintf(list + off, sizeof(list) - off,
			    "%s%s", off > 0 ? ", " : "",
			    saker_store_drivers[i]->name);
	return list;
}

/* The long name of option c. */
static const char *
long_name(int c)
{
	const struct option *lo;

	for (lo = longopts; lo->name != NULL; lo++)
		if (lo->val == c)
			return lo->name;
	return "?";
}

int
options_parse(int argc, char **argv, struct options *o)
{
	const struct saker_store_driver *drv;
	const char **str;
	uint64_t size;
	int64_t ms;
	long v;
	int c;

	memset(o, 0, sizeof(*o));
	o->listen = "127.0.0.1";
	o->port = SAKERD_DEFAULT_PORT;
	o->store_spec = saker_store_default_spec();
	o->sync = SAKER_SYNC_ALWAYS;
	o->sync_period_ms = 100;
	o->max_conns = 4096;
	o->max_item_size = 1024 * 1024;
	o->max_open = 1;
	o->max_queues = SAKERD_DEFAULT_MAX_QUEUES;
	o->metrics_max_queues = 1000;
	o->http_history_ms = 60000;
	o->tls_handshake_ms = SAKERD_DEFAULT_TLS_HANDSHAKE * 1000;
	o->drain_timeout_ms = SAKERD_DEFAULT_DRAIN_TIMEOUT * 1000;

	optind = 1;
	while ((c = getopt_long(argc, argv, "l:p:s:c:dP:u:v", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (parse_int(optarg, 0, 65535, &v) != 0)
				goto bad;
			o->port = (int)v;
			break;
		case OPT_SYNC:
			if (parse_sync(optarg, o) != 0)
				goto bad;
			break;
		case OPT_COMMIT:
			if (strcmp(optarg, "sync") == 0)
				o->async_commit = false;
			else if (strcmp(optarg, "async") == 0)
				o->async_commit = true;
			else
				goto bad;
			break;
		case 'c':
			if (parse_int(optarg, 1, 1000000, &v) != 0)
				goto bad;
			o->max_conns = (int)v;
			break;
		case OPT_MAX_ITEM:
			if (parse_size(optarg, &size) != 0 || size == 0 ||
			    size > 1024ull * 1024 * 1024)
				goto bad;
			o->max_item_size = (size_t)size;
			break;
		case OPT_MAX_MEMORY:
			if (parse_size(optarg, &size) != 0)
				goto bad;
			o->max_memory = size;
			o->max_memory_set = true;
			break;
		case OPT_MAX_OPEN:
			if (parse_int(optarg, 1, 1000000, &v) != 0)
				goto bad;
			o->max_open = (unsigned)v;
			break;
		case OPT_MAX_QUEUES:
			if (parse_int(optarg, 0, 100000000, &v) != 0)
				goto bad;
			o->max_queues = (size_t)v;
			break;
		case OPT_SHUTDOWN:
			o->enable_shutdown = true;
			break;
		case 'd':
			o->daemonize = true;
			break;
		case OPT_IDLE_TIMEOUT:
			if (parse_flag_duration(optarg, 1, 86400LL * 365 * 1000,
			    true, &o->idle_timeout_ms) != 0)
				goto bad;
			break;
		case OPT_CONN_MEMORY:
			if (parse_size(optarg, &size) != 0 || size == 0 ||
			    size > (uint64_t)SIZE_MAX / 2)
				goto bad;
			o->max_conn_memory = (size_t)size;
			break;
		case OPT_DRAIN_TIMEOUT:
			if (parse_flag_duration(optarg, 1, 86400 * 1000, false,
			    &o->drain_timeout_ms) != 0)
				goto bad;
			break;
		case OPT_HTTP_PUBLIC:
			o->http_public = true;
			break;
		case OPT_HTTP_HOST:
			if (o->nhttp_hosts == OPT_MAX_HTTP_HOSTS) {
				fprintf(stderr, "sakerd: at most %d --http-host\n",
				    OPT_MAX_HTTP_HOSTS);
				return -1;
			}
			if (optarg[0] == '\0' || strlen(optarg) > 253 ||
			    strpbrk(optarg, ":/ []") != NULL)
				goto bad;
			o->http_hosts[o->nhttp_hosts++] = optarg;
			break;
		case OPT_TLS_HANDSHAKE:
			if (parse_flag_duration(optarg, 1, 3600 * 1000, false,
			    &o->tls_handshake_ms) != 0)
				goto bad;
			break;
		case OPT_HTTP_HISTORY:
			/* 0: no sampling; else 10 ms .. an hour */
			if (parse_flag_duration(optarg, 10, 3600 * 1000, true,
			    &ms) != 0)
				goto bad;
			o->http_history_ms = (unsigned)ms;
			break;
		case OPT_METRICS_MAX:
			if (parse_int(optarg, 0, 1000000, &v) != 0)
				goto bad;
			o->metrics_max_queues = (unsigned)v;
			break;
		case 'v':
			o->verbose++;
			break;
		case OPT_VERSION:
			printf("sakerd %s\n", PACKAGE_VERSION);
			return 1;
		case OPT_HELP:
			usage(stdout);
			return 1;
		default:
			if ((str = string_option(o, c)) != NULL) {
				*str = optarg;
				break;
			}
			fprintf(stderr, "Try 'sakerd --help' for more information.\n");
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sakerd: unexpected argument '%s'\n"
		    "Try 'sakerd --help' for more information.\n", argv[optind]);
		return -1;
	}
	if (o->port == 0 && o->unix_socket == NULL) {
		fprintf(stderr, "sakerd: -p 0 needs -s PATH (nothing to listen on)\n");
		return -1;
	}
	if ((o->tls_cert != NULL) != (o->tls_key != NULL) ||
	    (o->tls_ca != NULL && o->tls_cert == NULL)) {
		fprintf(stderr, "sakerd: --tls-cert and --tls-key go together "
		    "(and --tls-ca needs both)\n");
		return -1;
	}
#ifndef HAVE_OPENSSL
	if (o->tls_cert != NULL) {
		fprintf(stderr, "sakerd: --tls-cert: this sakerd was built without "
		    "OpenSSL (./configure --with-openssl)\n");
		return -1;
	}
#endif
	drv = saker_store_spec_driver(o->store_spec);
	if (o->max_memory_set &&
	    (drv == NULL || !saker_store_driver_takes(drv, "max-memory"))) {
		/* 1.0 ignored it there; say so instead */
		fprintf(stderr, "sakerd: --max-memory is an option of the %s "
		    "store only, not of --store %s\n", max_memory_stores(),
		    o->store_spec);
		return -1;
	}
	if (o->max_conn_memory == 0) {
		o->max_conn_memory = SAKERD_DEFAULT_CONN_MEMORY;
		if (o->max_item_size + SAKERD_CONN_MEMORY_SLACK > o->max_conn_memory)
			o->max_conn_memory = o->max_item_size + SAKERD_CONN_MEMORY_SLACK;
	} else if (o->max_conn_memory < o->max_item_size + SAKERD_CONN_MEMORY_SLACK) {
		/* a connection must be able to hold one whole set */
		fprintf(stderr, "sakerd: --max-conn-memory %zu is less than "
		    "--max-item-size + 1m (%zu)\n", o->max_conn_memory,
		    o->max_item_size + (size_t)SAKERD_CONN_MEMORY_SLACK);
		return -1;
	}
	if (o->auth_file != NULL) {
		char err[256];

		/* read now, before privileges are dropped and before detaching,
		 * so a bad file is a startup error on the terminal */
		if ((o->auth = auth_load(o->auth_file, err, sizeof(err))) == NULL) {
			fprintf(stderr, "sakerd: --auth-file %s: %s\n", o->auth_file, err);
			return -1;
		}
	}
	return 0;
bad:
	/* named from the table: argv[optind - 1] is the value itself when
	 * it came as a separate argument */
	fprintf(stderr, "sakerd: invalid value '%s' for option %s%s--%s\n"
	    "Try 'sakerd --help' for more information.\n", optarg,
	    c < 0x80 ? (char[3]){ '-', (char)c, '\0' } : "", c < 0x80 ? "/" : "",
	    long_name(c));
	return -1;
}
