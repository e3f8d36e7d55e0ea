/* registry.c -- the driver registry, spec parsing, error strings and the
 * checked wrappers of the optional hooks. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "saker/store.h"
#include "layer.h"
#include "lock.h"
#include "size.h"
#include "duration.h"

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
/* docs/drivers.md's example (backends/example.c): in tests/check_store only */
#ifdef SAKER_EXAMPLE_DRIVER
extern const struct saker_store_driver saker_store_example;
#endif

const struct saker_store_driver *const saker_store_drivers[] = {
	&saker_store_memory,
#ifdef SAKER_EXAMPLE_DRIVER
	&saker_store_example,
#endif
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
	case SAKER_EEXIST:    return "already recorded";
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
saker_store_default_spec(void)
{
	static char spec[300];
	size_t i;

	if (spec[0] != '\0')
		return spec;
	for (i = 0; saker_store_drivers[i] != NULL; i++)
		if (saker_store_drivers[i]->default_location != NULL) {
			snprintf(spec, sizeof(spec), "%s:%s",
			    saker_store_drivers[i]->name,
			    saker_store_drivers[i]->default_location);
			return spec;
		}
	snprintf(spec, sizeof(spec), "%s", saker_store_drivers[0]->name);
	return spec;
}

const struct saker_store_driver *
saker_store_spec_driver(const char *spec)
{
	return spec != NULL ? saker_store_driver_find(spec, strcspn(spec, ",:")) :
	    NULL;
}

bool
saker_store_driver_takes(const struct saker_store_driver *drv, const char *key)
{
	size_t i;

	for (i = 0; drv->options != NULL && drv->options[i].name != NULL; i++)
		if (strcmp(drv->options[i].name, key) == 0)
			return true;
	return false;
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

/* "checkpoint-bytes, max-memory" -- the keys a driver takes. */
static void
option_names(const struct saker_store_driver *drv, char *buf, size_t len)
{
	size_t i, off = 0;

	buf[0] = '\0';
	for (i = 0; drv->options != NULL && drv->options[i].name != NULL; i++) {
		int n = snprintf(buf + off, len - off, "%s%s", i > 0 ? ", " : "",
		    drv->options[i].name);
		if (n < 0 || (size_t)n >= len - off)
			break;
		off += (size_t)n;
	}
}

/*
 * One "KEY=VALUE" (len bytes at kv; copied into `text`, which must live
 * until open() returns) checked against the driver's table and parsed
 * into vals[].
 */
static int
parse_option(const struct saker_store_driver *drv, const char *kv, size_t len,
    char *text, struct saker_store_optval *vals, char *err, size_t errlen)
{
	const struct saker_store_option *o = NULL;
	const char *eq = memchr(kv, '=', len);
	size_t i, kn = eq != NULL ? (size_t)(eq - kv) : len;
	char names[256];
	const char *val;
	uint64_t u = 0;
	int bad = 0;

	for (i = 0; drv->options != NULL && drv->options[i].name != NULL; i++)
		if (strlen(drv->options[i].name) == kn &&
		    memcmp(drv->options[i].name, kv, kn) == 0) {
			o = &drv->options[i];
			break;
		}
	if (o == NULL) {
		option_names(drv, names, sizeof(names));
		if (names[0] == '\0')
			snprintf(err, errlen, "store type '%s' takes no options"
			    " (got '%.*s')", drv->name, (int)kn, kv);
		else
			snprintf(err, errlen, "store type '%s' has no option"
			    " '%.*s' (options: %s)", drv->name, (int)kn, kv,
			    names);
		return SAKER_EINVAL;
	}
	if (eq == NULL) {
		snprintf(err, errlen, "store option %s.%s needs a value: %s=VALUE"
		    " (%s)", drv->name, o->name, o->name, o->help);
		return SAKER_EINVAL;
	}
	memcpy(text, eq + 1, len - kn - 1);
	text[len - kn - 1] = '\0';
	val = text;
	switch (o->type) {
	case SAKER_OPT_SIZE:
		bad = parse_size(val, &u) != 0;
		break;
	case SAKER_OPT_UINT: {
		const char *p = val;

		bad = *p == '\0';
		for (; *p != '\0' && !bad; p++) {
			if (*p < '0' || *p > '9' || u > (UINT64_MAX - 9) / 10)
				bad = 1;
			else
				u = u * 10 + (uint64_t)(*p - '0');
		}
		break;
	}
	case SAKER_OPT_SECONDS: {
		/* a bare number stays seconds, as driver options always were */
		int64_t ms;

		bad = parse_duration(val, DURATION_BARE_S,
		    o->max > INT64_MAX ? INT64_MAX : (int64_t)o->max, &ms) != 0;
		u = bad ? 0 : (uint64_t)ms;
		break;
	}
	case SAKER_OPT_STRING:
		bad = *val == '\0';
		break;
	}
	if (!bad && o->type != SAKER_OPT_STRING && (u < o->min || u > o->max))
		bad = 1;
	if (bad) {
		snprintf(err, errlen, "store option %s.%s: bad value '%s' (%s)",
		    drv->name, o->name, val, o->help);
		return SAKER_EINVAL;
	}
	vals[i].given = true;
	vals[i].u = u;
	vals[i].s = val;
	return SAKER_OK;
}

/* The drivers configure builds when it finds their library: one it did
 * not build is named as such, with the package that brings the library
 * (Debian's name). */
static const struct {
	const char *type, *lib, *option, *package;
} optional_drivers[] = {
	{ "lmdb", "liblmdb", "lmdb", "liblmdb-dev" },
	{ "sqlite", "sqlite3", "sqlite", "libsqlite3-dev" },
	{ "postgres", "libpq", "postgres", "libpq-dev" },
};

void
saker_store_type_error(const char *spec, size_t tlen, char *err, size_t errlen)
{
	size_t i;

	for (i = 0; i < sizeof(optional_drivers) / sizeof(optional_drivers[0]); i++) {
		if (strlen(optional_drivers[i].type) != tlen ||
		    strncmp(spec, optional_drivers[i].type, tlen) != 0)
			continue;
		snprintf(err, errlen, "store type '%s' is not compiled in: configure "
		    "found no %s (or had --with-%s=no); install %s and rebuild "
		    "(./configure && make)", optional_drivers[i].type,
		    optional_drivers[i].lib, optional_drivers[i].option,
		    optional_drivers[i].package);
		return;
	}
	snprintf(err, errlen, "unknown store type '%.*s' (compiled-in types: %s)",
	    (int)tlen, spec, saker_store_driver_list());
}

int
saker_store_open(const char *spec, const struct saker_store_opts *opts,
    saker_store **out, char *err, size_t errlen)
{
	const struct saker_store_driver *drv;
	const char *colon, *location = NULL, *p;
	struct saker_store_opts o = *opts;
	struct saker_store_optval *vals = NULL;
	struct saker_store_lock *lock = NULL;
	size_t tlen, nopt = 0, i;
	char *text = NULL, *t;
	int rc;

	*out = NULL;
	if (spec == NULL || *spec == '\0') {
		snprintf(err, errlen, "empty store spec (expected TYPE[:LOCATION]; types: %s)",
		    saker_store_driver_list());
		return SAKER_EINVAL;
	}
	colon = strchr(spec, ':');
	tlen = strcspn(spec, ",:");
	drv = saker_store_driver_find(spec, tlen);
	if (drv == NULL) {
		saker_store_type_error(spec, tlen, err, errlen);
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

	/* the options: the caller's first, then the spec's, so a key in the
	 * spec wins; every value is copied into one buffer `text` */
	while (drv->options != NULL && drv->options[nopt].name != NULL)
		nopt++;
	{
		size_t need = (colon != NULL ? (size_t)(colon - spec) : strlen(spec)) + 1;

		for (i = 0; opts->driver_opts != NULL && opts->driver_opts[i] != NULL; i++)
			need += strlen(opts->driver_opts[i]) + 1;
		if ((text = malloc(need)) == NULL ||
		    (vals = calloc(nopt + 1, sizeof(*vals))) == NULL) {
			free(text);
			snprintf(err, errlen, "out of memory");
			return SAKER_ENOMEM;
		}
	}
	t = text;
	for (i = 0; opts->driver_opts != NULL && opts->driver_opts[i] != NULL; i++) {
		size_t n = strlen(opts->driver_opts[i]);

		if ((rc = parse_option(drv, opts->driver_opts[i], n, t, vals,
		    err, errlen)) != SAKER_OK)
			goto out;
		t += n + 1;
	}
	for (p = spec + tlen; *p == ','; ) {
		size_t n;

		p++;
		n = strcspn(p, ",:");
		if ((rc = parse_option(drv, p, n, t, vals, err, errlen)) != SAKER_OK)
			goto out;
		t += n + 1;
		p += n;
	}
	o.optvals = vals;
	if ((rc = saker_lock_take(drv, location, &o, &lock, err, errlen)) !=
	    SAKER_OK)
		goto out;
	o.lock = lock;
	/* the driver notifies the layer, which wakes the core (store.h) */
	if ((rc = saker_layer_wake_open(&o)) != SAKER_OK) {
		snprintf(err, errlen, "out of memory");
		saker_lock_drop(lock);
		goto out;
	}
	rc = drv->open(location, &o, out, err, errlen);
	if (rc == SAKER_OK && !o.read_only &&
	    (rc = saker_lock_late(lock, err, errlen)) != SAKER_OK) {
		drv->close(*out);
		*out = NULL;
	}
	if (rc == SAKER_OK &&
	    (rc = saker_layer_opened(*out, location, o.read_only)) !=
	    SAKER_OK) {
		snprintf(err, errlen, "out of memory");
		drv->close(*out);
		*out = NULL;
	}
	if (rc == SAKER_OK) {
		(*out)->lock = lock;
		saker_layer_wake_start(*out, opts, &o);
	} else {
		saker_layer_wake_fail(&o, opts);
		saker_lock_drop(lock);
	}
out:
	free(vals);
	free(text);
	return rc;
}

void
saker_store_close(saker_store *s)
{
	struct saker_store_lock *lock;
	saker_store **cell;
	char *where;

	if (s == NULL)
		return;
	lock = s->lock;
	cell = s->wake_cell;
	/* close() commits its last batch: nobody is woken any more */
	if (cell != NULL)
		*cell = NULL;
	/* a batch the driver lost ends here as at a commit (REFUSALS):
	 * close() commits what is left, and may write (PostgreSQL hands
	 * its open items back) */
	s->lost = 0;
	where = s->where;	/* the driver's close() frees s, and may
				 * still report a refusal naming the store */
	s->driver->close(s);
	free(where);
	saker_layer_wake_close(cell);
	saker_lock_drop(lock);	/* after close() wrote its last batch */
}

int
saker_store_sync(saker_store *s)
{
	if (s->driver->sync == NULL)
		return SAKER_OK;
	s->depth++;	/* a layer call (layer.h) */
	s->lerr = NULL;
	return saker_layer_leave(s, s->driver->sync(s));
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
	if (s->driver->fd_ready == NULL)
		return SAKER_OK;
	s->depth++;	/* a layer call: other brokers' items wake once */
	s->lerr = NULL;
	return saker_layer_leave(s, s->driver->fd_ready(s, now_ms));
}

int
saker_store_tick(saker_store *s, int64_t now_ms)
{
	s->tick++;	/* shared stores: counters are counted again (layer.c) */
	if (s->driver->tick == NULL)
		return SAKER_OK;
	s->depth++;	/* a layer call (layer.h) */
	s->lerr = NULL;
	return saker_layer_leave(s, s->driver->tick(s, now_ms));
}

static int
count_id(void *arg, const void *key, size_t len, int64_t expires_ms)
{
	(void)key;
	(void)len;
	(void)expires_ms;
	(*(uint64_t *)arg)++;
	return 0;
}

int
saker_store_dedup_count(saker_store *s, saker_queue *q, uint64_t *n)
{
	*n = 0;
	if (s->driver->dedup_count != NULL)
		return s->driver->dedup_count(s, q, n);
	if (s->driver->dedup_iterate == NULL)
		return SAKER_EINVAL;	/* a driver without ids (none ships) */
	return s->driver->dedup_iterate(s, q, count_id, n);
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
