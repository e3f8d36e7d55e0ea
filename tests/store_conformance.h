/* store_conformance.h -- the driver-independent store test suite. */
#ifndef SAKER_STORE_CONFORMANCE_H
#define SAKER_STORE_CONFORMANCE_H

#include <check.h>

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
};
TCase *store_conformance_tcase_opts(const struct saker_store_driver *drv,
    const struct store_conformance_opts *opts);

#endif /* SAKER_STORE_CONFORMANCE_H */
