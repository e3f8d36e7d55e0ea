/*
 * powerloss.h -- the LD_PRELOAD shim libpowerloss.so (powerloss.c) and its
 * undo journal, shared with the restore code (restore.c) of the tests.
 *
 * The shim interposes the calls LMDB and SQLite make on their files: open,
 * close, write, pwrite, writev, ftruncate, fsync, fdatasync, msync, mmap.
 * Only files whose path starts with $SAKER_PL_DIR are watched; everything
 * else passes straight through.  It does two independent things:
 *
 * SIMULATED POWER LOSS ($SAKER_PL_JOURNAL = a directory)
 *   Before every write or truncation of a watched file, the bytes about to
 *   be overwritten (and the file's size) are appended to that file's undo
 *   journal.  fsync/fdatasync of the file empties its journal: what was
 *   written before is now on stable storage.  Writes through a descriptor
 *   opened with O_SYNC/O_DSYNC are durable when they return and are not
 *   journalled.  After SIGKILL, pl_restore() plays every journal backwards,
 *   so each file is exactly as at its last fsync: every write the kernel
 *   had not been asked to make durable is lost, as in a power cut (SIGKILL
 *   alone keeps the page cache, so it proves nothing about power loss).
 *   Directories are not watched.  Not modelled: directory entries (a file created and not yet fsynced
 *   survives with its fsynced contents), partial (torn) sector writes and
 *   reordering within one fsync interval, stores through a shared writable
 *   mapping (neither driver writes data that way: LMDB runs without
 *   MDB_WRITEMAP, SQLite maps only its -shm index, which it rebuilds).
 *
 * FAULT INJECTION ($SAKER_FAULT = "OP:N[:once|:persist][:ERRNO]")
 *   OP is write (write/pwrite/writev/ftruncate), fsync (fsync/fdatasync/
 *   msync) or mmap (LMDB's map and map growth).  The Nth such call on a
 *   watched file (counting from 1) fails with ERRNO (EIO, or ENOSPC for
 *   writes when asked; ENOMEM for mmap) without doing anything; with
 *   "persist" every later one fails too.  Counting starts once the file
 *   $SAKER_FAULT_ARM exists (at once when that variable is unset), so a
 *   test can let the server start cleanly first.  When a fault is
 *   injected the shim creates $SAKER_FAULT_ARM.hit (if ARM is set).
 *   "fsync:N:stall" fails nothing: the Nth fsync waits until the file
 *   $SAKER_FAULT_ARM.go exists, then goes on (a slow disk, for a batch
 *   held in flight; tests/check_faults.c test_inflight_*); "stallfail"
 *   waits the same, then fails with EIO.
 */
#ifndef SAKER_POWERLOSS_H
#define SAKER_POWERLOSS_H

#include <stddef.h>
#include <stdint.h>

#define PL_ENV_DIR	"SAKER_PL_DIR"
#define PL_ENV_JOURNAL	"SAKER_PL_JOURNAL"
#define PL_ENV_FAULT	"SAKER_FAULT"
#define PL_ENV_ARM	"SAKER_FAULT_ARM"

/*
 * Journal file: header "PLJ1", uint32 path length, the watched file's
 * absolute path; then records: "PLR1", uint64 offset, uint64 old file
 * size, uint64 n, then n bytes = the old contents of [offset, offset + n)
 * (n is already clipped to the old size).  Native byte order: the journal
 * never leaves the machine.  A record cut short by the kill is ignored:
 * its write had not started.
 */
#define PL_JMAGIC	"PLJ1"
#define PL_RMAGIC	"PLR1"

struct pl_rec_hdr {
	char magic[4];
	uint32_t pad;
	uint64_t off;
	uint64_t old_size;
	uint64_t n;
};

/* Play back every journal in dir (then remove them).  Returns the number
 * of records undone, or -1 with a message in err. */
long pl_restore(const char *dir, char *err, size_t errlen);

#endif
