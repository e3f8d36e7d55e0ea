/* pg_conninfo.c -- the PostgreSQL driver's location (a libpq connection
 * string plus its own keys and the driver options) and the connection
 * parameters made from it, with the hosts of a list rotated. */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "pg_conninfo.h"

/* ---- connection parameters, with the hosts of a list rotated ---- */

/* The number of elements of a comma-separated list. */
int
pg_list_n(const char *list)
{
	int n = 1;

	for (; *list != '\0'; list++)
		n += *list == ',';
	return n;
}

/* The list with its elements rotated left by k: "a,b,c" by 1 is
 * "b,c,a".  Empty elements (libpq's defaults) move like the others. */
static void
pg_list_rot(const char *list, int k, char *out, size_t len)
{
	const char *start[PG_HOSTS_MAX], *p = list;
	size_t elen[PG_HOSTS_MAX], o = 0;
	int n = 0, i, j;

	while (n < PG_HOSTS_MAX) {
		start[n] = p;
		elen[n] = strcspn(p, ",");
		p += elen[n];
		n++;
		if (*p != ',')
			break;
		p++;
	}
	out[0] = '\0';
	for (i = 0; i < n; i++) {
		j = (i + k) % n;
		if (o + elen[j] + 2 > len)
			break;
		if (i > 0)
			out[o++] = ',';
		memcpy(out + o, start[j], elen[j]);
		o += elen[j];
		out[o] = '\0';
	}
}

/*
 * The keywords and values for PQconnectStartParams(): ours first where
 * the connection string has none (a TCP user timeout of timeout=, so
 * unacknowledged data fails the connection; keepalives, so an idle
 * LISTEN connection learns of a dead peer), then the string's, with
 * host, hostaddr and port lists rotated by s->host_rot.  libpq tries
 * the hosts of a list in order and gives up on none by itself: a host
 * that swallows packets (a partition, a dead machine) would hold every
 * attempt, so after an attempt that timed out the next one starts with
 * the host after it.
 */
void
pg_params(struct pg_store *s, const char **kw, const char **val, size_t max)
{
	static const char *const ours[][2] = { { "tcp_user_timeout", NULL },
	    { "keepalives", "1" }, { "keepalives_idle", "10" },
	    { "keepalives_interval", "3" }, { "keepalives_count", "3" } };
	const PQconninfoOption *o;
	size_t n = 0, i;

	for (i = 0; i < sizeof(ours) / sizeof(ours[0]) && n + 1 < max; i++) {
		for (o = s->copts; o->keyword != NULL; o++)
			if (strcmp(o->keyword, ours[i][0]) == 0 && o->val != NULL)
				break;
		if (o->keyword != NULL)
			continue;
		kw[n] = ours[i][0];
		val[n++] = ours[i][1] != NULL ? ours[i][1] : s->ka_user_timeout;
	}
	for (o = s->copts; o->keyword != NULL && n + 1 < max; o++) {
		if (o->val == NULL)
			continue;
		kw[n] = o->keyword;
		val[n] = o->val;
		if (s->nhosts > 1 && s->host_rot % s->nhosts != 0 &&
		    (strcmp(o->keyword, "host") == 0 ||
		    strcmp(o->keyword, "hostaddr") == 0 ||
		    strcmp(o->keyword, "port") == 0) &&
		    pg_list_n(o->val) == s->nhosts) {
			char *buf = o->keyword[0] == 'p' ? s->rot_port :
			    o->keyword[4] == 'a' ? s->rot_addr : s->rot_host;

			pg_list_rot(o->val, s->host_rot % s->nhosts, buf,
			    sizeof(s->rot_host));
			val[n] = buf;
		}
		n++;
	}
	kw[n] = val[n] = NULL;
}

/* Element i of a comma-separated list, into out. */
static void
pg_list_el(const char *list, int i, char *out, size_t len)
{
	size_t n;

	for (; i > 0 && *list != '\0'; list++)
		if (*list == ',')
			i--;
	n = strcspn(list, ",");
	if (n >= len)
		n = len - 1;
	memcpy(out, list, n);
	out[n] = '\0';
}

/* An attempt timed out: the next starts after the host (and port) it
 * was stuck on. */
void
pg_rotate_past(struct pg_store *s, PGconn *c)
{
	const PQconninfoOption *o;
	const char *h = PQhost(c), *p = PQport(c), *hl = NULL, *pl = NULL;
	char eh[256], ep[32];
	int i, k;

	if (s->nhosts < 2)
		return;
	for (o = s->copts; o->keyword != NULL; o++) {
		if (o->val != NULL && strcmp(o->keyword, "host") == 0)
			hl = o->val;
		if (o->val != NULL && strcmp(o->keyword, "port") == 0)
			pl = o->val;
	}
	for (i = 0; hl != NULL && h != NULL && i < s->nhosts; i++) {
		/* element i of this attempt's order */
		k = (int)((s->host_rot + (unsigned)i) % (unsigned)s->nhosts);
		pg_list_el(hl, k, eh, sizeof(eh));
		if (strcmp(eh, h) != 0)
			continue;
		if (pl != NULL && p != NULL && pg_list_n(pl) == s->nhosts) {
			pg_list_el(pl, k, ep, sizeof(ep));
			if (strcmp(ep, p) != 0)
				continue;
		}
		s->host_rot += (unsigned)i + 1;
		return;
	}
	s->host_rot++;
}

/* ---- the location: a libpq connection string plus our own keys ---- */

/* Driver options (store.h, DRIVER OPTIONS): "postgres,schema=q,lease=30:
 * host=db dbname=saker".  The same keys inside the connection string
 * (1.0's form) still work; the options win when both are given. */
enum { PG_OPT_SCHEMA, PG_OPT_LEASE, PG_OPT_VACUUM, PG_OPT_TIMEOUT,
    PG_OPT_PROBE, PG_OPT_HORIZON_WARN, PG_OPT_SEGMENT,
    PG_OPT_SEGMENT_ROWS };
const struct saker_store_option pg_options[] = {
	[PG_OPT_SCHEMA] = { "schema", SAKER_OPT_STRING, 0, 0,
	    "schema to keep the tables in: 1-50 of a-z, 0-9, _" },
	[PG_OPT_LEASE] = { "lease", SAKER_OPT_SECONDS, 100, 86400000,
	    "how long before another broker may take over this broker's open"
	    " items: a duration (30, 1.5s, 2m; bare: seconds), 0.1s to 24h" },
	[PG_OPT_VACUUM] = { "vacuum", SAKER_OPT_SECONDS, 0, 3600000,
	    "time between this broker's own VACUUMs of its item table"
	    " while it writes (bare: seconds; default 1s, at most 1h); 0:"
	    " leave it to autovacuum" },
	[PG_OPT_TIMEOUT] = { "timeout", SAKER_OPT_SECONDS, 100, 3600000,
	    "how long the broker waits for a sign of life from the database"
	    " (in a round trip, or connecting) before it drops the connection"
	    " and reconnects (bare: seconds), 0.1s to 1h (default 2s)" },
	[PG_OPT_PROBE] = { "probe", SAKER_OPT_SECONDS, 0, 3600000,
	    "how long an empty query on the notification connection may take"
	    " while a statement is silent, before the database counts as"
	    " unreachable (bare: seconds; default 250ms, at most 1h; 0:"
	    " timeout= alone)" },
	[PG_OPT_HORIZON_WARN] = { "horizon_warn", SAKER_OPT_SECONDS, 0,
	    86400000, "warn in the log when a transaction of the database has"
	    " held a snapshot this long, keeping VACUUM from the store's dead"
	    " rows (bare: seconds; default 60s, at most 24h; 0: never)" },
	[PG_OPT_SEGMENT] = { "segment", SAKER_OPT_SECONDS, 1000, 86400000,
	    "how long a segment of the item table takes puts before the next"
	    " one does and the oldest is emptied by TRUNCATE (bare: seconds;"
	    " default 10s, 1s to 24h); the store keeps about 3 such spans of"
	    " consumed items on disk whatever snapshot anyone holds" },
	[PG_OPT_SEGMENT_ROWS] = { "segment_rows", SAKER_OPT_UINT, 1000,
	    1000000000, "or this many puts, whichever comes first (default"
	    " 50000, at least 1000)" },
	{ NULL, SAKER_OPT_STRING, 0, 0, NULL }
};

static int
pg_set_opt(struct pg_store *s, const char *key, const char *val, char *err,
    size_t errlen)
{
	int64_t ms;
	size_t i;

	if (strcmp(key, "schema") == 0) {
		for (i = 0; val[i] != '\0'; i++)
			if (!((val[i] >= 'a' && val[i] <= 'z') || val[i] == '_' ||
			    (val[i] >= '0' && val[i] <= '9' && i > 0)))
				break;
		if (i == 0 || i > 50 || val[i] != '\0') {
			snprintf(err, errlen, "postgres: schema must be 1-50"
			    " lower-case letters, digits or '_': %s", val);
			return SAKER_EINVAL;
		}
		free(s->schema);
		if ((s->schema = strdup(val)) == NULL)
			return SAKER_ENOMEM;
		return SAKER_OK;
	}
	/* lease=DURATION, in the connection string (1.0's form): the same
	 * grammar and bounds as the lease= driver option */
	if (parse_duration(val, DURATION_BARE_S, 86400000, &ms) != 0 ||
	    ms < 100) {
		snprintf(err, errlen, "postgres: lease must be a duration from"
		    " 0.1 to 86400 seconds (e.g. 30, 1.5s, 2m): %s", val);
		return SAKER_EINVAL;
	}
	s->lease_ms = ms;
	return SAKER_OK;
}

int
pg_channel_opts(struct pg_store *s, const struct saker_store_opts *opts,
    char *err, size_t errlen)
{
	const struct saker_store_optval *v;
	int e;

	if ((v = saker_store_optval(opts, PG_OPT_SCHEMA)) != NULL &&
	    (e = pg_set_opt(s, "schema", v->s, err, errlen)) != SAKER_OK)
		return e;
	if ((v = saker_store_optval(opts, PG_OPT_LEASE)) != NULL)
		s->lease_ms = (int64_t)v->u;
	if ((v = saker_store_optval(opts, PG_OPT_HORIZON_WARN)) != NULL)
		s->horizon_warn_ms = (int64_t)v->u;
	if ((v = saker_store_optval(opts, PG_OPT_VACUUM)) != NULL)
		s->vacuum_ms = (int64_t)v->u;
	if ((v = saker_store_optval(opts, PG_OPT_TIMEOUT)) != NULL)
		s->timeout_ms = (int64_t)v->u;
	if ((v = saker_store_optval(opts, PG_OPT_PROBE)) != NULL)
		s->probe_ms = (int64_t)v->u;
	if ((v = saker_store_optval(opts, PG_OPT_SEGMENT)) != NULL)
		s->seg_ms = (int64_t)v->u;
	if ((v = saker_store_optval(opts, PG_OPT_SEGMENT_ROWS)) != NULL)
		s->seg_rows = (int64_t)v->u;
	return SAKER_OK;
}

static bool
pg_our_key(const char *k, size_t n)
{
	return (n == 6 && memcmp(k, "schema", 6) == 0) ||
	    (n == 5 && memcmp(k, "lease", 5) == 0);
}

/*
 * Split `loc` into the connection string passed to libpq and the keys
 * this driver reads itself (schema=, lease=).  Keyword form: values may
 * be single-quoted with backslash escapes, as libpq parses them.  URI
 * form: our keys are query parameters.
 */
int
pg_parse_location(struct pg_store *s, const char *loc, char *err,
    size_t errlen)
{
	size_t len = strlen(loc), o = 0;
	bool uri = strncmp(loc, "postgres://", 11) == 0 ||
	    strncmp(loc, "postgresql://", 13) == 0;
	char *out, *val;
	const char *p = loc, *k, *ts;
	size_t kn, vn;
	int rc;

	if ((out = malloc(len + 64)) == NULL || (val = malloc(len + 1)) == NULL) {
		free(out);
		snprintf(err, errlen, "out of memory");
		return SAKER_ENOMEM;
	}
	if (uri) {
		const char *q = strchr(loc, '?');
		bool first = true;

		memcpy(out, loc, q != NULL ? (size_t)(q - loc) : len);
		o = q != NULL ? (size_t)(q - loc) : len;
		p = q != NULL ? q + 1 : loc + len;
		while (*p != '\0') {
			k = p;
			ts = p + strcspn(p, "&");
			kn = strcspn(k, "=&");
			if (pg_our_key(k, kn) && k[kn] == '=') {
				vn = (size_t)(ts - (k + kn + 1));
				memcpy(val, k + kn + 1, vn);
				val[vn] = '\0';
				if ((rc = pg_set_opt(s, kn == 6 ? "schema" :
				    "lease", val, err, errlen)) != SAKER_OK)
					goto fail;
			} else if (ts > k) {
				out[o++] = first ? '?' : '&';
				memcpy(out + o, k, (size_t)(ts - k));
				o += (size_t)(ts - k);
				first = false;
			}
			p = *ts != '\0' ? ts + 1 : ts;
		}
		out[o] = '\0';
		goto done;
	}
	while (*p != '\0') {
		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (*p == '\0')
			break;
		ts = p;
		k = p;
		while (*p != '\0' && *p != '=' && *p != ' ' && *p != '\t')
			p++;
		kn = (size_t)(p - k);
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p != '=') {
			snprintf(err, errlen, "postgres: bad connection string"
			    " near '%.*s' (expected key=value)", (int)kn, k);
			rc = SAKER_EINVAL;
			goto fail;
		}
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		vn = 0;
		if (*p == '\'') {
			for (p++; *p != '\0' && *p != '\''; p++) {
				if (*p == '\\' && p[1] != '\0')
					p++;
				val[vn++] = *p;
			}
			if (*p != '\'') {
				snprintf(err, errlen, "postgres: unterminated"
				    " quote in connection string");
				rc = SAKER_EINVAL;
				goto fail;
			}
			p++;
		} else {
			for (; *p != '\0' && *p != ' ' && *p != '\t' &&
			    *p != '\n'; p++) {
				if (*p == '\\' && p[1] != '\0')
					p++;
				val[vn++] = *p;
			}
		}
		val[vn] = '\0';
		if (pg_our_key(k, kn)) {
			if ((rc = pg_set_opt(s, kn == 6 ? "schema" : "lease", val,
			    err, errlen)) != SAKER_OK)
				goto fail;
			continue;
		}
		if (o > 0)
			out[o++] = ' ';
		memcpy(out + o, ts, (size_t)(p - ts));
		o += (size_t)(p - ts);
	}
	out[o] = '\0';
done:
	free(val);
	s->conninfo = out;
	return SAKER_OK;
fail:
	free(val);
	free(out);
	return rc;
}
