/* pg_cluster.h -- a throwaway PostgreSQL cluster for the tests. */
#ifndef SAKER_PG_CLUSTER_H
#define SAKER_PG_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>

/*
 * initdb + pg_ctl in a fresh /tmp directory, listening only on a unix
 * socket in that directory.  As root the server runs as user "nobody"
 * (PostgreSQL refuses to run as root).  Binaries come from $PG_BINDIR or
 * the newest /usr/lib/postgresql/N/bin.  fsync is off: these clusters are
 * for correctness tests, not for measuring durability.
 */
struct pg_cluster {
	char dir[64];		/* data in DIR/data, socket in DIR */
	char bindir[256];
	char conninfo[192];	/* "host=DIR dbname=postgres user=saker" */
	bool running;
};

/* 0: running; 1: PostgreSQL binaries missing (why says so: skip);
 * -1: failed (why says why, DIR/setup.log has details). */
int pg_cluster_start(struct pg_cluster *c, char *why, size_t whylen);
/* Stop the server and keep the data (to test a lost connection) ... */
int pg_cluster_server_stop(struct pg_cluster *c);
/* ... and start it again. 0 on success. */
int pg_cluster_server_start(struct pg_cluster *c);
/* The spec of a fresh, empty store in the cluster: its own schema (the
 * driver's schema= option), named after the process and a counter. */
void pg_cluster_spec(const struct pg_cluster *c, char *buf, size_t len);
/* Stop (immediate) and remove everything.  Safe to call twice. */
void pg_cluster_destroy(struct pg_cluster *c);

#endif
