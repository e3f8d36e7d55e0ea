/* saker.c -- the `saker` command-line companion: subcommand dispatch. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "saker/store.h"
#include "bench.h"
#include "check_cmd.h"
#include "client.h"
#include "client_login.h"
#include "dump.h"
#include "migrate.h"
#include "tls_client.h"

struct subcommand {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *synopsis;
};

static const struct subcommand subcommands[] = {
	{ "put", put_main, "put   [-s HOST:PORT] [-i ID] QUEUE [DATA|-] enqueue (stdin with -)" },
	{ "get", get_main, "get   [-s HOST:PORT] [-t DURATION] QUEUE   dequeue one item to stdout" },
	{ "stats", stats_main, "stats [-s HOST:PORT] [--raw]               print stats" },
	{ "requeue", requeue_main, "requeue [-s HOST:PORT] [--max N] FROM TO   move items back, counts reset" },
	{ "migrate", migrate_main, "migrate [--append] [--progress|--quiet] SRC_SPEC DST_SPEC" },
	{ "dump", dump_main, "dump  SPEC > FILE                          portable backup" },
	{ "load", load_main, "load  [--append] SPEC < FILE               restore a backup" },
	{ "check", check_main, "check [-q] SPEC                            verify a store offline" },
	{ "bench", bench_main, "bench [options]                            load generator" },
	{ NULL, NULL, NULL }
};

static void
usage(FILE *fp)
{
	size_t i;

	fprintf(fp, "usage: saker COMMAND [options] [args]\n\n");
	for (i = 0; subcommands[i].name != NULL; i++)
		fprintf(fp, "  saker %s\n", subcommands[i].synopsis);
	fprintf(fp,
	    "\n"
	    "SPEC is TYPE[,KEY=VALUE...]:LOCATION; the KEY=VALUE driver options\n"
	    "are in sakerd(8).  Store types built in: %s.\n"
	    "`saker COMMAND --help` describes a command; saker(1) has the details.\n"
	    "put, get, stats, requeue and bench take --tls [--tls-ca FILE]\n"
	    "[--tls-cert FILE --tls-key FILE] to talk to a server started with\n"
	    "--tls-cert; and --user NAME [--password-file FILE] (or SAKER_USER and\n"
	    "SAKER_PASSWORD) for one with --auth-file.\n"
	    "Exit status: 0 success, 1 failure, 2 usage error.\n",
	    saker_store_driver_list());
}

static const struct subcommand *
find(const char *name)
{
	size_t i;

	for (i = 0; subcommands[i].name != NULL; i++)
		if (strcmp(subcommands[i].name, name) == 0)
			return &subcommands[i];
	return NULL;
}

int
main(int argc, char **argv)
{
	const struct subcommand *sc;
	char prog[64];

	if (tls_client_take_options(&argc, argv) != 0 ||
	    client_login_take_options(&argc, argv) != 0)
		return 2;
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		printf("saker %s\n", PACKAGE_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "help") == 0) {
		if (argc == 2) {
			usage(stdout);
			return 0;
		}
		if ((sc = find(argv[2])) == NULL) {
			fprintf(stderr, "saker: unknown command '%s'\n", argv[2]);
			return 2;
		}
		/* `saker help CMD` is `saker CMD --help` (argv[1] is
		 * replaced below) */
		argv[2] = (char *)"--help";
		argc = 3;
	} else if ((sc = find(argv[1])) == NULL) {
		fprintf(stderr, "saker: unknown command '%s' (try saker --help)\n", argv[1]);
		return 2;
	}
	/* getopt names the program in its messages ("saker put: unrecognized
	 * option"), as the commands' own lines do */
	snprintf(prog, sizeof(prog), "saker %s", sc->name);
	argv[1] = prog;
	return sc->fn(argc - 1, argv + 1);
}
