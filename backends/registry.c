/* registry.c -- the driver registry, spec parsing, error strings and the
 * checked wrappers of the optional hooks. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "saker/store.h"

extern const struct saker_store_driver saker_store_memory;
#ifdef HAVE_LMDB
extern const struct saker_store_driver saker_store_lmdb;
#endif
#ifdef HAVE_SQLITE
extern const struct saker_store_driver saker_store_sqlite;
#endif
#ifdef HAVE_POSTGRES
extern const struct saker_store_driver saker_store_postgres;
#endif

const struct saker_store_driver *const saker_store_drivers[] = {
	&saker_store_memory,
#ifdef HAVE_LMDB
	&saker_store_lmdb,
#endif
#ifdef HAVE_SQLITE
	&saker_store_sqlite,
#endif
#ifdef HAVE_POSTGRES
	&saker_store_postgres,
#endif
	NULL
};

const char *
saker_strerror(int err)
{
	switch (err) {
	case SAKER_OK:        return "success";
	case SAKER_EEMPTY:    return "queue empty";
	case SAKER_ENOTFOUND: return "not found";
	case SAKER_EINVAL:    return "invalid argument";
	case SAKER_ENOMEM:    return "out of memory";
	case SAKER_EFULL:     return "storage full";
	case SAKER_EIO:       return "I/O error";
	case SAKER_ECORRUPT:  return "storage corrupt or not a saker store";
	case SAKER_EVERSION:  return "storage format is newer than this build";
	case SAKER_ELOCKED:   return "store is in use by another process";
	case SAKER_EREADONLY: return "store is read-only";
	case SAKER_EINDOUBT:  return "commit failed; its outcome is unknown";
	default:              return "unknown error";
	}
}

const struct saker_store_driver *
saker_store_driver_find(const char *name, size_t len)
{
	size_t i;

	for (i = 0; saker_store_drivers[i] != NULL; i++) {
		const char *n = saker_store_drivers[i]->name;
		if (strlen(n) == len && memcmp(n, name, len) == 0)
			return saker_store_drivers[i];
	}
	return NULL;
}

const char *
saker_store_driver_list(void)
{
	static char list[128];
	size_t i, off = 0;

	if (list[0] != '\0')
		return list;
	for (i = 0; saker_store_drivers[i] != NULL; i++) {
		int n = snprintf(list + off, sizeof(list) - off, "%s%s",
		    i > 0 ? ", " : "", saker_store_drivers[i]->name);
		if (n < 0 || (size_t)n >= sizeof(list) - off)
			break;
		off += (size_t)n;
	}
	return list;
}

int
saker_store_open(const char *spec, const struct saker_store_opts *opts,
    saker_store **out, char *err, size_t errlen)
{
	const struct saker_store_driver *drv;
	const char *colon, *location = NULL;
	size_t tlen;

	*out = NULL;
	if (spec == NULL || *spec == '\0') {
		snprintf(err, errlen, "empty store spec (expected TYPE[:LOCATION]; types: %s)",
		    saker_store_driver_list());
		return SAKER_EINVAL;
	}
	colon = strchr(spec, ':');
	tlen = colon != NULL ? (size_t)(colon - spec) : strlen(spec);
	drv = saker_store_driver_find(spec, tlen);
	if (drv == NULL) {
		snprintf(err, errlen, "unknown store type '%.*s' (compiled-in types: %s)",
		    (int)tlen, spec, saker_store_driver_list());
		return SAKER_EINVAL;
	}
	if (colon != NULL)
		location = colon + 1;
	if (drv->location_help != NULL && (location == NULL || *location == '\0')) {
		snprintf(err, errlen, "store type '%s' needs a location: %s:%s",
		    drv->name, drv->name, drv->location_help);
		return SAKER_EINVAL;
	}
	if (drv->location_help == NULL && location != NULL && *location != '\0') {
		snprintf(err, errlen, "store type '%s' takes no location", drv->name);
		return SAKER_EINVAL;
	}
	return drv->open(location, opts, out, err, errlen);
}

void
saker_store_close(saker_store *s)
{
	if (s != NULL)
		s->driver->close(s);
}

int
saker_store_sync(saker_store *s)
{
	return s->driver->sync != NULL ? s->driver->sync(s) : SAKER_OK;
}

void
saker_store_get_stats(saker_store *s, struct saker_store_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (s->driver->store_stats != NULL)
		s->driver->store_stats(s, st);
}

int
saker_store_watch_fd(saker_store *s)
{
	return s->driver->watch_fd != NULL ? s->driver->watch_fd(s) : -1;
}

int
saker_store_fd_ready(saker_store *s, int64_t now_ms)
{
	return s->driver->fd_ready != NULL ? s->driver->fd_ready(s, now_ms) :
	    SAKER_OK;
}

int
saker_store_tick(saker_store *s, int64_t now_ms)
{
	return s->driver->tick != NULL ? s->driver->tick(s, now_ms) : SAKER_OK;
}

bool
saker_store_needs_tick(const saker_store *s)
{
	return s->driver->tick != NULL || saker_store_shared(s);
}

bool
saker_store_shared(const saker_store *s)
{
	return (s->driver->caps & SAKER_CAP_SHARED) != 0;
}
