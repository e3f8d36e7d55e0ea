/* idprod.h -- a producer of sets with deduplication ids for the crash
 * and power-loss tests (issue 44): exactly-once enqueue across a kill. */
#ifndef SAKER_TEST_IDPROD_H
#define SAKER_TEST_IDPROD_H

#include <sys/types.h>

/*
 * A producer process sets "crashid/id=r<round>-<seq>" one at a time and
 * reports every acknowledged seq through a pipe, until the kill breaks its
 * connection.  After the restart idprod_check() retries the set that was
 * in flight (its outcome unknown) and then every acknowledged one, with
 * the same ids: each must answer STORED, and the queue must hold each seq
 * exactly once, in order -- the id and its item committed together or not
 * at all.
 */
struct idprod {
	pid_t pid;
	int rd;         /* acknowledged seqs, 4 bytes each */
};

void idprod_start(struct idprod *p, int port, int round);
/* After the restart, on the control connection ctl: retry, drain, count */
void idprod_check(struct idprod *p, int ctl, const char *name, int round);

#endif
