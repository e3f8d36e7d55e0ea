/* lock.h -- the store's lock file (lock.c), for the registry. */
#ifndef SAKER_BACKENDS_LOCK_H
#define SAKER_BACKENDS_LOCK_H

#include <stddef.h>

#include "saker/store.h"

/* Lock `location` as drv->lock says, before drv->open(): *out is NULL for
 * SAKER_LOCK_NONE.  A writer's lock whose location is missing is left
 * for saker_lock_late(); the driver's open() reports what is missing. */
int saker_lock_take(const struct saker_store_driver *drv, const char *location,
    const struct saker_store_opts *opts, struct saker_store_lock **out,
    char *err, size_t errlen);

/* After a successful open(): take the lock saker_lock_take() left. */
int saker_lock_late(struct saker_store_lock *l, char *err, size_t errlen);

void saker_lock_drop(struct saker_store_lock *l);

#endif /* SAKER_BACKENDS_LOCK_H */
