/* store_conformance.h -- the driver-independent store test suite. */
#ifndef SAKER_STORE_CONFORMANCE_H
#define SAKER_STORE_CONFORMANCE_H

#include <check.h>
#include <stdbool.h>

#include "saker/store.h"

/*
 * One Check TCase, named drv->name, that runs every conformance test against
 * the driver through its vtable.  Each test gets a fresh store in a fresh
 * temp dir: spec "memory" for drivers without a location, else
 * "NAME:TMPDIR/store" (opened with opts.create).  Durable drivers also get
 * the reopen tests, and the exclusive-open (SAKER_ELOCKED) test unless the
 * driver has SAKER_CAP_SHARED.  At most 8 TCases can be built per process.
 */
TCase *store_conformance_tcase(const struct saker_store_driver *drv);

/* For drivers whose location is not a path (a database server). */
struct store_conformance_opts {
	/* Write the spec of a fresh, empty store into buf; tmpdir is the
	 * test's temp dir.  NULL: the default spec above. */
	void (*spec)(char *buf, size_t len, const char *tmpdir);
	/* Damage every stored item of the (closed) store at spec whose data
	 * holds `marker`: flip bit 5 of the marker's fourth byte, as
	 * test_damaged_item does in the files of a file-based store.  Returns
	 * how many items it damaged.  NULL: only stores made of files under
	 * the temp dir get that test. */
	int (*damage)(const char *spec, const char *marker, size_t len);
	/* From now on (`on`) until called with false, make the store's
	 * fdatasync fail with EIO, as a disk error would.  NULL: the driver
	 * does not get the tests of a failing asynchronous commit. */
	void (*fail_sync)(bool on);
};
TCase *store_conformance_tcase_opts(const struct saker_store_driver *drv,
    const struct store_conformance_opts *opts);

/*
 * The suite's fixture without its tests, for tests of the layer that run
 * over every driver (check_policy): each test of the TCase gets a fresh
 * store as above, opened with the wake-up log below.  Shares the limit of
 * 8 TCases per process.
 */
TCase *store_conformance_fixture(const struct saker_store_driver *drv,
    const struct store_conformance_opts *opts);
/* The store of the running test. */
saker_store *store_conformance_store(void);
/* notify() calls since the test began or the last call of this; *last_ctx
 * (may be NULL) gets the queue ctx of the last of them, NULL if none. */
int store_conformance_wakeups(void **last_ctx);

#endif /* SAKER_STORE_CONFORMANCE_H */
