/*
 * totalq.h -- Jepsen's total-queue check for crash tests.
 *
 * TQ_NPROD producers each send unique items ("t<tag>-p<producer>-<seq>")
 * one at a time, as fast as they are acknowledged, over TQ_NQUEUE queues
 * named <prefix>0..3, and remember per item whether STORED came back.
 * After the crash and a restart every queue is drained and each item read
 * back is matched against what was sent:
 *   lost        acknowledged but never read back
 *   unexpected  read back but never sent, or refused
 *   duplicated  read back more than once
 *   reordered   out of order within one producer and queue
 * Items in flight at the crash ("maybe") may or may not come back.
 */
#ifndef SAKER_TESTS_TOTALQ_H
#define SAKER_TESTS_TOTALQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TQ_NPROD 50
#define TQ_NQUEUE 4
#define TQ_MAXSEQ 100000

struct tq_counts {
	int acked, maybe, read, lost, unexpected, duplicated, reordered;
};

struct tq_producer;

struct tq {
	char prefix[32];		/* queue name prefix */
	int tag;			/* round or cut number, in every item */
	struct tq_producer *prs;
	struct tq_counts ct;
};

/* Connect the producers to 127.0.0.1:port; each sends its first item. */
void tq_start(struct tq *t, int port, const char *prefix, int tag);
/* Keep producing until the monotonic clock reaches until_ms; a broken
 * connection fails the test (the server must still be up). */
void tq_run_until(struct tq *t, int64_t until_ms, const char *name);
/* After the crash: take the replies that made it out, then close. */
void tq_stop(struct tq *t);
/* Drain every queue over fd (a connection to the restarted server) and
 * fill t->ct; prints lost and unexpected items. */
void tq_check(struct tq *t, int fd, const char *name);
void tq_free(struct tq *t);

#endif
