/*
 * check_cmd.c -- `saker check SPEC`: verify a store offline, read-only.
 *
 * Opening the store runs the driver's own checks (LMDB walks its whole
 * B-tree first, SQLite and LMDB check their format records); then every
 * item of every queue is read through iterate(), which verifies each
 * item's checksum, then its deduplication ids (LMDB checks each record's).
 * Each damaged queue gets one line naming the item; the
 * walk goes on with the next queue.  Nothing is written or moved: a
 * damaged item is moved aside only when sakerd serves it.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "saker/store.h"
#include "check_cmd.h"
#include "migrate_copy.h"
#include "migrate_int.h"

static int
count_item(void *arg, const struct saker_item *item)
{
	(*(unsigned long long *)arg)++;
	return 0;
}

static int
count_id(void *arg, const void *key, size_t len, int64_t expires_ms)
{
	(void)key;
	(void)len;
	(void)expires_ms;
	(*(unsigned long long *)arg)++;
	return 0;
}

static const char check_usage[] =
	    "usage: saker check [-q] SPEC\n"
	    "Verify the store at SPEC (TYPE:LOCATION) without changing it: its\n"
	    "structure (LMDB: every page of its B-trees) and the checksum of every\n"
	    "item and deduplication id. Prints one line per damaged queue, then a\n"
	    "summary.\n"
	    "  -q, --quiet   print only the damage\n"
	    "Exit status: 0 sound, 1 damaged or cannot be read, 2 usage error.\n"
	    "Stop sakerd first: a store in use is refused.\n";

int
check_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct saker_store_opts o = { .read_only = true };
	struct mig_names ns = { NULL, 0, 0, false };
	unsigned long long items = 0, ids = 0, n;
	saker_store *s = NULL;
	saker_queue *q;
	char err[1024];
	size_t i, bad = 0;
	bool quiet = false, opened;
	int ch, rc;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'q': quiet = true; break;
		case 'h': fputs(check_usage, stdout); return 0;
		default:  fputs(check_usage, stderr); return 2;
		}
	}
	if (argc - optind != 1) {
		fputs(check_usage, stderr);
		return 2;
	}
	rc = saker_store_open(argv[optind], &o, &s, err, sizeof(err));
	if (rc != SAKER_OK) {
		fprintf(stderr, "saker check: %s: %s\n", argv[optind], err);
		return 1;
	}
	rc = saker_store_queues(s, mig_collect_name, &ns);
	if (rc != SAKER_OK || ns.oom) {
		fprintf(stderr, "saker check: %s: listing queues: %s\n",
		    argv[optind], ns.oom ? "out of memory" : saker_store_errmsg(s));
		bad++;
	}
	if (ns.n > 0)
		qsort(ns.v, ns.n, sizeof(*ns.v), mig_name_cmp);
	for (i = 0; i < ns.n; i++) {
		n = 0;
		rc = saker_store_queue_open(s, ns.v[i].s, ns.v[i].len, false,
		    NULL, &q);
		opened = rc == SAKER_OK;
		if (opened)
			rc = saker_store_iterate(s, q, count_item, &n);
		items += n;
		if (rc != SAKER_OK) {
			const char *why = saker_store_errmsg(s);

			printf("damaged: queue '%.*s': %s (after %llu sound items)\n",
			    (int)ns.v[i].len, ns.v[i].s, why != NULL && *why != '\0' ? why :
			    saker_strerror(rc), n);
			bad++;
		}
		if (!opened)
			continue;
		/* its deduplication ids: a damaged record is damage too */
		n = 0;
		if ((rc = saker_store_dedup_iterate(s, q, count_id, &n)) !=
		    SAKER_OK) {
			const char *why = saker_store_errmsg(s);

			printf("damaged: queue '%.*s': deduplication ids: %s"
			    " (after %llu sound ids)\n", (int)ns.v[i].len,
			    ns.v[i].s, why != NULL && *why != '\0' ? why :
			    saker_strerror(rc), n);
			bad++;
		}
		ids += n;
	}
	if (!quiet || bad > 0)
		printf("%s: %zu queues, %llu items, %llu deduplication ids"
		    " read; %s\n", argv[optind], ns.n, items, ids, bad == 0 ?
		    "no damage found" : "DAMAGED");
	mig_names_free(&ns);
	saker_store_close(s);
	return bad == 0 ? 0 : 1;
}
