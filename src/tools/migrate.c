/* migrate.c -- `saker migrate`: its arguments, and the copy engine
 * (migrate_copy.c) run from one store into another. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "saker/store.h"
#include "clock.h"
#include "migrate.h"
#include "migrate_copy.h"
#include "migrate_int.h"
#include "migrate_progress.h"

static const char migrate_usage[] =
	    "usage: saker migrate [--append] [--progress|--quiet] SRC_SPEC DST_SPEC\n"
	    "\n"
	    "Copy every queue of the store SRC_SPEC into DST_SPEC (TYPE:LOCATION,\n"
	    "e.g. lmdb:/var/lib/saker or sqlite:/var/lib/saker.db), as a restart\n"
	    "of the source would show them: ready items in order, delayed items\n"
	    "with their due times, open items back at the head.  The destination\n"
	    "is built beside its final place, verified (counts and checksums per\n"
	    "queue) and renamed into place; on any failure or interrupt it is left\n"
	    "as it was.  Stop sakerd on both stores first.\n"
	    "\n"
	    "  --append     add after the items of a non-empty destination\n"
	    "  --progress   show the progress line even when stderr is not a terminal\n"
	    "  -q, --quiet  no progress line, no summary\n"
	    "  -h, --help   this text\n"
	    "\n"
	    "Exit status: 0 copied and verified, 1 failure, 2 usage error.\n";

int
migrate_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "append", no_argument, NULL, 'a' },
		{ "progress", no_argument, NULL, 'p' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct mig_opts opts;
	struct mig_err e;
	struct mig_target *t = NULL;
	saker_store *src = NULL;
	int64_t now_ms;
	int ch, rc = 1;

	memset(&opts, 0, sizeof(opts));
	optind = 1;
	while ((ch = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'a': opts.append = true; break;
		case 'p': opts.progress = MIG_PROGRESS_ON; break;
		case 'q': opts.quiet = true; opts.progress = MIG_PROGRESS_OFF; break;
		case 'h': fputs(migrate_usage, stdout); return 0;
		default:  fputs(migrate_usage, stderr); return 2;
		}
	}
	if (argc - optind != 2) {
		fputs(migrate_usage, stderr);
		return 2;
	}
	if (mig_spec_driver(argv[optind], "source", &e) == NULL ||
	    mig_spec_driver(argv[optind + 1], "destination", &e) == NULL) {
		fprintf(stderr, "saker migrate: %s\n", e.msg);
		return 1;
	}
	if (mig_same_location(argv[optind], argv[optind + 1])) {
		fprintf(stderr, "saker migrate: source and destination are the same (%s)\n",
		    argv[optind + 1]);
		return 1;
	}
	mig_signals_install();
	now_ms = saker_now_ms();
	if (mig_source_open(argv[optind], &src, &e) < 0) {
		fprintf(stderr, "saker migrate: %s\n", e.msg);
		goto out;
	}
	if (mig_target_open(argv[optind + 1], argv[optind], &opts, now_ms, &t, &e) == 0) {
		mig_target_set_totals(t, mig_source_totals(src));
		if (mig_target_copy(t, src, &e) == 0) {
			saker_store_close(src);
			src = NULL;
			if (mig_target_finish(t, &e) == 0)
				rc = 0;
		}
	}
	if (rc != 0) {
		mig_target_free(t);
		t = NULL;
		fprintf(stderr, "saker migrate: %s; %s left as it was\n", e.msg,
		    argv[optind + 1]);
		goto out;
	}
	if (!opts.quiet)
		mig_target_summary(t, stdout, "migrated");
	if (fflush(stdout) != 0)
		rc = 1;
out:
	mig_target_free(t);
	saker_store_close(src);
	mig_signals_restore();
	return rc;
}
