/*
 * lmdb_verify.h -- a bounds-checked walk of an LMDB file's B-trees.
 *
 * liblmdb trusts its file: a zeroed page can trip one of its assertions
 * (abort) and a few bytes of 0xff can make it read past the end of the
 * map (SIGSEGV, SIGBUS).  The LMDB driver therefore walks every page
 * reachable from the current meta page itself, with every offset, size and
 * page number checked against the file, before liblmdb sees the file; and
 * `saker check` runs the same walk.  It reads the file only (no liblmdb
 * call) and never writes.  The layout follows LMDB 0.9's data format
 * version 1 (MDB_DATA_VERSION), which this walk refuses to guess beyond.
 */
#ifndef SAKER_LMDB_VERIFY_H
#define SAKER_LMDB_VERIFY_H

#include <stddef.h>
#include <stdint.h>

struct lmv_stats {
	uint64_t pages;		/* branch, leaf and overflow pages reached */
	uint64_t entries;	/* leaf entries in every database */
	unsigned psize;
	uint64_t last_pgno;
};

/*
 * Walk data.mdb at `path`.  Returns 0 when every reachable page is sound,
 * 1 when the file is damaged (a one-line reason in why), -1 when it cannot
 * be read (errno-based reason in why).  A missing or empty file and a file
 * whose meta pages are not LMDB's are left to liblmdb (0): it reports them
 * well and never crashes on them.
 */
int lmv_verify(const char *path, struct lmv_stats *st, char *why,
    size_t whylen);

#endif /* SAKER_LMDB_VERIFY_H */
