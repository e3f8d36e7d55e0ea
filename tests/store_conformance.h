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
 * the reopen/lock tests.  At most 8 TCases can be built per process.
 */
TCase *store_conformance_tcase(const struct saker_store_driver *drv);

#endif /* SAKER_STORE_CONFORMANCE_H */
