/* bench_opts.c -- `saker bench`: the command line of `saker bench`. */
#include "config.h"

#include <sys/types.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_int.h"
#include "bench_opts.h"
#include "client_login.h"
#include "tls_client.h"
#include "duration.h"

/* ------------------------------------------------------------- options */

static void
usage(FILE *f)
{
	fprintf(f,
"usage: saker bench [MODE] [options]\n"
"modes: pair (default), produce, consume, mget, blocking, delayed, retry\n"
"  -s, --server HOST:PORT   server (default 127.0.0.1:22133)\n"
"      --protocol P         memcache (default), resp (Redis), beanstalk\n"
"  -m, --mode MODE          the workload (or give it as the first argument)\n"
"  -c, --conns N            connections (consumers in blocking/delayed) [4]\n"
"  -d, --depth D            requests in flight per connection [1]\n"
"                           (retry: 1, each request waits for the last reply)\n"
"      --size B             item size in bytes, >= 16 when verifying [64]\n"
"  -q, --queues Q           queues, connections spread over them [1]\n"
"  -t, --seconds DURATION   measured duration [10s]\n"
"      --warmup DURATION    unmeasured run before measuring [0]\n"
"  -k, --keys K             mget: keys per request [100]\n"
"      --fill F             mget: the queues hold items (every key hits, a\n"
"                           request per item), or are empty (made with\n"
"                           flush) or missing (every key misses, for -t)\n"
"                           [items]; with empty or missing, -q Q names the\n"
"                           keys are taken from, K at a time in turn [K]\n"
"      --items N            consume: items prefilled; mget: requests (and\n"
"                           items per queue); delayed: items [see mode]\n"
"      --rate R             produce/blocking: items/s in total [blocking 1000]\n"
"      --window DURATION    delayed: items fall due over this window [5s]\n"
"      --timeout DURATION   blocking get timeout (get q/t=MS) [1s]\n"
"      --fail PCT           retry: percent of jobs that fail (get q/abort) [10]\n"
"      --retry-delay DURATION  retry: fail with get q/abort/delay=MS instead of\n"
"                           the queue's retry_backoff\n"
"      --queue-prefix P     queue names are P0, P1, ... [bench]\n"
"      --server-pid PID     also report that process's CPU in the measured\n"
"                           time: user, system, and per item\n"
"      --no-verify          do not check items (needed for memcached)\n"
"      --ids                every set carries a unique deduplication id\n"
"                           (set q/id=KEY; memcache protocol), to measure\n"
"                           what ids cost against plain sets\n"
"      --resend             produce/blocking: a set not acknowledged (an\n"
"                           error reply, a commit in doubt) is sent again,\n"
"                           the same item, until STORED (backoff 100 ms,\n"
"                           doubling to 2 s while nothing is stored); with\n"
"                           --ids the server keeps one, so lost 0 and\n"
"                           duplicates 0 is exactly-once enqueue\n"
TLS_CLIENT_HELP
CLIENT_LOGIN_HELP
"      --no-clean           do not delete the queues first\n"
"      --json               one JSON object on stdout\n"
"      --quiet              no progress display\n"
"A DURATION is 250ms, 1.5s, 2m, 1h; a bare number is seconds for -t and\n"
"--warmup, milliseconds for the others (as before units were accepted).\n");
}

const char *const mode_names[M_RETRY + 1] = {
	"pair", "produce", "consume", "mget", "blocking", "delayed", "retry"
};
const char *const proto_names[P_BS + 1] = { "memcache", "resp", "beanstalk" };
const char *const fill_names[F_MISSING + 1] = { "items", "empty", "missing" };

/* The index of s in names[0..n) (mode_names, ...: indexed by the enum),
 * or -1. */
static int
pick(const char *s, const char *const *names, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

static bool
num(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

/* A duration flag: duration.h's grammar, a bare number in the flag's old
 * unit (seconds for -t and --warmup, milliseconds for the others). */
static bool
dur(const char *s, int64_t bare_ms, int64_t lo, int64_t hi, int64_t *out)
{
	return parse_duration(s, bare_ms, hi, out) == 0 && *out >= lo;
}

int
parse_opts(struct opts *o, int argc, char **argv)
{
	enum { O_PROTO = 256, O_SIZE, O_WARMUP, O_ITEMS, O_RATE, O_WINDOW,
	    O_TIMEOUT, O_PREFIX, O_PID, O_NOVERIFY, O_NOCLEAN, O_JSON,
	    O_QUIET, O_FAIL, O_RDELAY, O_FILL, O_IDS, O_RESEND };
	static const struct option lo[] = {
		{ "server", required_argument, NULL, 's' },
		{ "protocol", required_argument, NULL, O_PROTO },
		{ "mode", required_argument, NULL, 'm' },
		{ "conns", required_argument, NULL, 'c' },
		{ "depth", required_argument, NULL, 'd' },
		{ "size", required_argument, NULL, O_SIZE },
		{ "queues", required_argument, NULL, 'q' },
		{ "seconds", required_argument, NULL, 't' },
		{ "warmup", required_argument, NULL, O_WARMUP },
		{ "keys", required_argument, NULL, 'k' },
		{ "fill", required_argument, NULL, O_FILL },
		{ "items", required_argument, NULL, O_ITEMS },
		{ "rate", required_argument, NULL, O_RATE },
		{ "window", required_argument, NULL, O_WINDOW },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "queue-prefix", required_argument, NULL, O_PREFIX },
		{ "server-pid", required_argument, NULL, O_PID },
		{ "no-verify", no_argument, NULL, O_NOVERIFY },
		{ "no-clean", no_argument, NULL, O_NOCLEAN },
		{ "json", no_argument, NULL, O_JSON },
		{ "quiet", no_argument, NULL, O_QUIET },
		{ "fail", required_argument, NULL, O_FAIL },
		{ "retry-delay", required_argument, NULL, O_RDELAY },
		{ "ids", no_argument, NULL, O_IDS },
		{ "resend", no_argument, NULL, O_RESEND },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int ch, i;
	double v;
	int64_t ms;
	bool rate_set = false;

	memset(o, 0, sizeof(*o));
	o->server = "127.0.0.1:22133";
	o->proto = P_MC;
	o->mode = M_PAIR;
	o->conns = 4;
	o->depth = 1;
	o->size = 64;
	o->queues = 1;
	o->keys = 100;
	o->seconds = 10;
	o->window_ms = 5000;
	o->timeout_ms = 1000;
	o->prefix = "bench";
	o->fail_pct = 10;
	o->retry_delay_ms = -1;
	o->verify = o->clean = true;

	if (argc > 1 && argv[1][0] != '-') {
		if ((i = pick(argv[1], mode_names, M_RETRY + 1)) < 0) {
			fprintf(stderr, "saker bench: unknown mode '%s'\n",
			    argv[1]);
			return -1;
		}
		o->mode = (enum mode)i;
		argv++;
		argc--;
	}
#ifdef __GLIBC__
	optind = 0;
#else
	optind = 1;
#endif
	while ((ch = getopt_long(argc, argv, "s:m:c:d:q:t:k:h", lo, NULL)) !=
	    -1) {
		switch (ch) {
		case 's': o->server = optarg; break;
		case O_PROTO:
			if ((i = pick(optarg, proto_names, P_BS + 1)) < 0)
				goto bad;
			o->proto = (enum proto)i;
			break;
		case 'm':
			if ((i = pick(optarg, mode_names, M_RETRY + 1)) < 0)
				goto bad;
			o->mode = (enum mode)i;
			break;
		case 'c':
			if (!num(optarg, 1, MAX_CONNS - 1, &v)) goto bad;
			o->conns = (int)v;
			break;
		case 'd':
			if (!num(optarg, 1, 100000, &v)) goto bad;
			o->depth = (int)v;
			break;
		case O_SIZE:
			if (!num(optarg, 1, 64 << 20, &v)) goto bad;
			o->size = (int)v;
			break;
		case 'q':
			if (!num(optarg, 1, 100000, &v)) goto bad;
			o->queues = (int)v;
			o->queues_set = true;
			break;
		case 't':
			if (!dur(optarg, DURATION_BARE_S, 1, 1000000000LL, &ms))
				goto bad;
			o->seconds = (double)ms / 1000;
			break;
		case O_WARMUP:
			if (!dur(optarg, DURATION_BARE_S, 0, 1000000000LL, &ms))
				goto bad;
			o->warmup = (double)ms / 1000;
			break;
		case 'k':
			if (!num(optarg, 1, MAX_KEYS, &v)) goto bad;
			o->keys = (int)v;
			break;
		case O_FILL:
			if ((i = pick(optarg, fill_names, F_MISSING + 1)) < 0)
				goto bad;
			o->fill = (enum fill)i;
			break;
		case O_ITEMS:
			if (!num(optarg, 1, 1e10, &v)) goto bad;
			o->items = (long)v;
			o->items_set = true;
			break;
		case O_RATE:
			if (!num(optarg, 0, 1e9, &o->rate)) goto bad;
			rate_set = true;
			break;
		case O_WINDOW:
			if (!dur(optarg, DURATION_BARE_MS, 1, 1000000000LL, &ms))
				goto bad;
			o->window_ms = (long)ms;
			break;
		case O_TIMEOUT:
			if (!dur(optarg, DURATION_BARE_MS, 1, 1000000000LL, &ms))
				goto bad;
			o->timeout_ms = (long)ms;
			break;
		case O_PREFIX: o->prefix = optarg; break;
		case O_PID:
			if (!num(optarg, 1, 1e9, &v)) goto bad;
			o->server_pid = (long)v;
			break;
		case O_NOVERIFY: o->verify = false; break;
		case O_NOCLEAN: o->clean = false; break;
		case O_JSON: o->json = true; break;
		case O_QUIET: o->quiet = true; break;
		case O_IDS: o->ids = true; break;
		case O_RESEND: o->resend = true; break;
		case O_FAIL:
			if (!num(optarg, 0, 100, &v)) goto bad;
			o->fail_pct = (int)v;
			break;
		case O_RDELAY:
			if (!dur(optarg, DURATION_BARE_MS, 0, 315360000000LL, &ms))
				goto bad;
			o->retry_delay_ms = (long)ms;
			break;
		case 'h': usage(stdout); return 1;
		default: usage(stderr); return -1;
		}
		continue;
bad:
		/* the option named from the table: optarg alone does not
		 * say which one was wrong */
		for (i = 0; lo[i].name != NULL && lo[i].val != ch; i++)
			;
		fprintf(stderr, "saker bench: bad value '%s' for option %s%s--%s\n",
		    optarg, ch < 0x80 ? (char[3]){ '-', (char)ch, '\0' } : "",
		    ch < 0x80 ? "/" : "", lo[i].name != NULL ? lo[i].name : "?");
		return -1;
	}
	if (optind != argc) {
		fprintf(stderr, "saker bench: unexpected argument '%s'\n",
		    argv[optind]);
		return -1;
	}
	if (!o->items_set)
		o->items = o->mode == M_CONSUME ? 100000 :
		    o->mode == M_MGET ? 5000 : 1000;
	if (o->fill != F_ITEMS && o->mode != M_MGET) {
		fprintf(stderr, "saker bench: --fill is for mode mget\n");
		return -1;
	}
	if (o->mode == M_MGET && o->queues_set && (o->fill == F_ITEMS ?
	    o->queues != o->keys : o->queues < o->keys)) {
		fprintf(stderr, "saker bench: mget: -q must be %s -k%s\n",
		    o->fill == F_ITEMS ? "equal to" : "at least",
		    o->fill == F_ITEMS ? " with --fill items" : "");
		return -1;
	}
	if (o->mode == M_BLOCKING && !rate_set)
		o->rate = 1000;
	if (o->verify && o->size < HDR_LEN) {
		fprintf(stderr, "saker bench: --size must be at least %d to "
		    "verify items (or use --no-verify)\n", HDR_LEN);
		return -1;
	}
	if (o->mode == M_RETRY && o->depth != 1) {
		fprintf(stderr, "saker bench: mode retry runs at depth 1 "
		    "(each request waits for the last reply)\n");
		return -1;
	}
	if (o->ids && o->proto != P_MC) {
		fprintf(stderr, "saker bench: --ids needs the memcache "
		    "protocol\n");
		return -1;
	}
	if (o->resend && (o->proto != P_MC || !o->verify ||
	    (o->mode != M_BLOCKING && o->mode != M_PRODUCE))) {
		fprintf(stderr, "saker bench: --resend is for modes produce and "
		    "blocking, on the memcache protocol, verifying\n");
		return -1;
	}
	if (o->proto != P_MC && o->mode == M_RETRY) {
		fprintf(stderr, "saker bench: mode retry needs the memcache "
		    "protocol\n");
		return -1;
	}
	if (o->proto == P_RESP && (o->mode == M_MGET || o->mode == M_DELAYED)) {
		fprintf(stderr, "saker bench: mode %s needs the memcache "
		    "protocol\n", mode_names[o->mode]);
		return -1;
	}
	if (o->proto == P_BS && o->mode != M_PAIR && o->mode != M_PRODUCE &&
	    o->mode != M_CONSUME && o->mode != M_BLOCKING) {
		fprintf(stderr, "saker bench: mode %s is not available with "
		    "beanstalk\n", mode_names[o->mode]);
		return -1;
	}
	return 0;
}
