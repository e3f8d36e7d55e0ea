/* qconfig.c -- the per-queue configuration file: defaults, then
 * [queue NAME] and [queue PREFIX*] sections of `key = value` lines. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "saker/store.h"
#include "qconfig.h"
#include "size.h"
#include "duration.h"

struct section {
	char *pattern;               /* queue name, or prefix when `prefix` */
	size_t len;
	bool prefix;
	struct queue_config qc;
};

struct config {
	struct queue_config defaults;
	struct section *sections;
	size_t nsections;
	bool any_open_timeout;
};

struct config *
config_default(const struct queue_config *defaults)
{
	struct config *cf = calloc(1, sizeof(*cf));

	if (cf == NULL)
		return NULL;
	cf->defaults = *defaults;
	cf->any_open_timeout = defaults->open_timeout_ms > 0;
	return cf;
}

void
config_free(struct config *cf)
{
	size_t i;

	if (cf == NULL)
		return;
	for (i = 0; i < cf->nsections; i++)
		free(cf->sections[i].pattern);
	free(cf->sections);
	free(cf);
}

static char *
trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static int
parse_bool(const char *v, bool *out)
{
	if (strcmp(v, "yes") == 0 || strcmp(v, "true") == 0 || strcmp(v, "1") == 0 ||
	    strcmp(v, "on") == 0)
		*out = true;
	else if (strcmp(v, "no") == 0 || strcmp(v, "false") == 0 || strcmp(v, "0") == 0 ||
	    strcmp(v, "off") == 0)
		*out = false;
	else
		return -1;
	return 0;
}

/* at most 10 years, so now + duration cannot overflow int64_t */
#define DURATION_MAX_MS 315360000000LL

/* A duration of the config file: a bare number is milliseconds (as it
 * always was here), or duration.h's grammar ("30s", "1.5s", "2h"). */
static int
conf_duration(const char *v, int64_t *out)
{
	return parse_duration(v, DURATION_BARE_MS, DURATION_MAX_MS, out);
}

/* The cap of retry_backoff when only BASE is given. */
#define RETRY_MAX_DEFAULT_MS 3600000LL	/* 1 hour */

/* "BASE[,MAX]": durations, MAX >= BASE (MAX defaults to an hour, or BASE
 * when that is longer); "0" turns the backoff off. */
static int
parse_backoff(const char *v, int64_t *base, int64_t *max)
{
	char buf[64], *comma;

	if (strlen(v) >= sizeof(buf))
		return -1;
	memcpy(buf, v, strlen(v) + 1);
	comma = strchr(buf, ',');
	if (comma != NULL)
		*comma = '\0';
	if (conf_duration(trim(buf), base) != 0)
		return -1;
	if (comma == NULL) {
		*max = *base > RETRY_MAX_DEFAULT_MS ? *base : RETRY_MAX_DEFAULT_MS;
		return 0;
	}
	if (conf_duration(trim(comma + 1), max) != 0 || *max < *base)
		return -1;
	return 0;
}

static const char *
set_key(struct queue_config *qc, const char *key, const char *val)
{
	uint64_t u;

	if (strcmp(key, "max_items") == 0) {
		if (parse_size(val, &u) != 0)
			return "max_items wants a whole number";
		qc->max_items = u;
	} else if (strcmp(key, "max_bytes") == 0) {
		if (parse_size(val, &u) != 0)
			return "max_bytes wants a size (e.g. 1048576, 64k, 1g)";
		qc->max_bytes = u;
	} else if (strcmp(key, "max_item_size") == 0) {
		if (parse_size(val, &u) != 0)
			return "max_item_size wants a size (e.g. 65536, 64k)";
		qc->max_item_size = u;
	} else if (strcmp(key, "max_age") == 0) {
		if (conf_duration(val, &qc->max_age_ms) != 0)
			return "max_age wants a duration (e.g. 500ms, 1.5s, 10m, 2h;"
			    " a bare number is milliseconds)";
	} else if (strcmp(key, "discard_old_when_full") == 0) {
		if (parse_bool(val, &qc->discard_old_when_full) != 0)
			return "discard_old_when_full wants yes or no";
	} else if (strcmp(key, "max_open") == 0) {
		if (parse_size(val, &u) != 0 || u < 1 || u > 1000000)
			return "max_open wants a number from 1 to 1000000";
		qc->max_open = (unsigned)u;
	} else if (strcmp(key, "open_timeout") == 0) {
		if (conf_duration(val, &qc->open_timeout_ms) != 0)
			return "open_timeout wants a duration (e.g. 30s, 1.5s;"
			    " a bare number is milliseconds)";
	} else if (strcmp(key, "max_deliveries") == 0) {
		if (parse_size(val, &u) != 0 || u > SAKER_DELIVERIES_MAX)
			return "max_deliveries wants a number from 0 to 65535";
		qc->max_deliveries = (uint32_t)u;
	} else if (strcmp(key, "retry_backoff") == 0) {
		if (parse_backoff(val, &qc->retry_backoff_ms,
		    &qc->retry_backoff_max_ms) != 0)
			return "retry_backoff wants BASE[,MAX], durations with"
			    " MAX >= BASE (e.g. 1s,10m)";
	} else if (strcmp(key, "dead_letter") == 0) {
		if (!saker_qname_valid(val, strlen(val)))
			return "dead_letter wants a queue name";
		memcpy(qc->dead_letter, val, strlen(val) + 1);
	} else if (strcmp(key, "expire_to") == 0) {
		if (!saker_qname_valid(val, strlen(val)))
			return "expire_to wants a queue name";
		memcpy(qc->expire_to, val, strlen(val) + 1);
	} else if (strcmp(key, "dedup_window") == 0) {
		int64_t ms;

		if (conf_duration(val, &ms) != 0 ||
		    ms < QCONFIG_DEDUP_WINDOW_MIN || ms > QCONFIG_DEDUP_WINDOW_MAX)
			return "dedup_window wants a duration from 1s to 168h"
			    " (7 days; e.g. 5m, 1h)";
		qc->dedup_window_ms = ms;
	} else if (strcmp(key, "max_dedup_ids") == 0) {
		/* no "unlimited": a flood of distinct ids must stay bounded */
		if (parse_size(val, &u) != 0 || u < 1 ||
		    u > QCONFIG_MAX_DEDUP_IDS_MAX)
			return "max_dedup_ids wants a number from 1 to 100000000";
		qc->max_dedup_ids = u;
	} else {
		return "unknown setting (known: max_items, max_bytes, max_item_size, "
		    "max_age, discard_old_when_full, max_open, open_timeout, "
		    "max_deliveries, retry_backoff, dead_letter, expire_to, "
		    "dedup_window, max_dedup_ids)";
	}
	return NULL;
}

static const struct section *section_for(const struct config *cf,
    const char *name, size_t len);

/* "[queue jobs*]" or "the settings before any section", for messages. */
static void
section_label(const struct section *sec, char *buf, size_t len)
{
	if (sec == NULL)
		snprintf(buf, len, "the settings before any section");
	else
		snprintf(buf, len, "[queue %s%s]", sec->pattern,
		    sec->prefix ? "*" : "");
}

/*
 * Dead letters must stay readable: items in a dead-letter queue are served
 * from it whatever settings match it (deadletter.h), so a dead_letter that
 * the same settings govern, or a chain of dead_letter settings that comes
 * back to where it started, would only hide that the limit does nothing.
 * Both are refused, naming the sections.  The default "<name>_dead" makes a
 * new name at every step and needs no check.
 */
static int
check_dead_letters(const struct config *cf, const char *path, char *err,
    size_t errlen)
{
	size_t i, steps;

	for (i = 0; i <= cf->nsections; i++) {
		const struct section *start = i < cf->nsections ?
		    &cf->sections[i] : NULL;
		const struct queue_config *qc = start != NULL ? &start->qc :
		    &cf->defaults;
		const struct section *at;
		const char *target = qc->dead_letter;
		char a[300], b[300];

		if (qc->max_deliveries == 0 || target[0] == '\0')
			continue;
		for (steps = 0; steps <= cf->nsections; steps++) {
			const struct queue_config *tq;

			at = section_for(cf, target, strlen(target));
			if (at == start) {
				section_label(start, a, sizeof(a));
				if (steps == 0)
					snprintf(err, errlen, "%s: %s: dead_letter"
					    " = %s is governed by %s itself, so its"
					    " dead letters would route to itself;"
					    " give %s a [queue %s] section of its"
					    " own", path, a, target, a, target,
					    target);
				else
					snprintf(err, errlen, "%s: %s: dead letters"
					    " route in a cycle (dead_letter = %s"
					    " leads back to %s)", path, a,
					    qc->dead_letter, a);
				return -1;
			}
			tq = at != NULL ? &at->qc : &cf->defaults;
			if (tq->max_deliveries == 0 || tq->dead_letter[0] == '\0')
				break;
			if (steps == cf->nsections) {
				section_label(at, b, sizeof(b));
				section_label(start, a, sizeof(a));
				snprintf(err, errlen, "%s: %s: dead letters route"
				    " into a cycle through %s", path, a, b);
				return -1;
			}
			target = tq->dead_letter;
		}
	}
	return 0;
}

struct config *
config_load(const char *path, const struct queue_config *defaults, char *err,
    size_t errlen)
{
	struct config *cf = config_default(defaults);
	struct queue_config *cur;
	char line[1024];
	unsigned lineno = 0;
	FILE *f;

	if (cf == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		config_free(cf);
		return NULL;
	}
	cur = &cf->defaults;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *s, *eq, *key, *val;
		const char *why;

		lineno++;
		if (strchr(line, '\n') == NULL && !feof(f)) {
			snprintf(err, errlen, "%s:%u: line too long", path, lineno);
			goto fail;
		}
		s = trim(line);
		if (*s == '\0' || *s == '#')
			continue;
		if (*s == '[') {
			struct section *ns, *sec;
			char *name, *close = strchr(s, ']');

			if (close == NULL || close[1] != '\0' || strncmp(s, "[queue ", 7) != 0) {
				snprintf(err, errlen, "%s:%u: expected [queue NAME] or "
				    "[queue PREFIX*]", path, lineno);
				goto fail;
			}
			*close = '\0';
			name = trim(s + 7);
			if (*name == '\0') {
				snprintf(err, errlen, "%s:%u: empty queue name", path, lineno);
				goto fail;
			}
			ns = realloc(cf->sections, (cf->nsections + 1) * sizeof(*ns));
			if (ns == NULL)
				goto nomem;
			cf->sections = ns;
			sec = &cf->sections[cf->nsections];
			sec->len = strlen(name);
			sec->prefix = name[sec->len - 1] == '*';
			if (sec->prefix)
				name[--sec->len] = '\0';
			sec->pattern = strdup(name);
			if (sec->pattern == NULL)
				goto nomem;
			/* a section starts from the defaults read so far */
			sec->qc = cf->defaults;
			cf->nsections++;
			cur = &sec->qc;
			continue;
		}
		eq = strchr(s, '=');
		if (eq == NULL) {
			snprintf(err, errlen, "%s:%u: expected 'key = value'", path, lineno);
			goto fail;
		}
		*eq = '\0';
		key = trim(s);
		val = trim(eq + 1);
		if ((why = set_key(cur, key, val)) != NULL) {
			snprintf(err, errlen, "%s:%u: %s: %s", path, lineno, key, why);
			goto fail;
		}
		if (cur->open_timeout_ms > 0)
			cf->any_open_timeout = true;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s: read error", path);
		goto fail;
	}
	if (check_dead_letters(cf, path, err, errlen) != 0)
		goto fail;
	fclose(f);
	return cf;
nomem:
	snprintf(err, errlen, "%s:%u: out of memory", path, lineno);
fail:
	fclose(f);
	config_free(cf);
	return NULL;
}

/* The section that governs queue `name`, or NULL for the defaults. */
static const struct section *
section_for(const struct config *cf, const char *name, size_t len)
{
	const struct section *best = NULL;
	size_t i;

	for (i = 0; i < cf->nsections; i++) {
		const struct section *s = &cf->sections[i];
		if (!s->prefix) {
			if (s->len == len && memcmp(s->pattern, name, len) == 0)
				return s;
		} else if (s->len <= len && memcmp(s->pattern, name, s->len) == 0 &&
		    (best == NULL || s->len > best->len)) {
			best = s;
		}
	}
	return best;
}

const struct queue_config *
config_for(const struct config *cf, const char *name, size_t len)
{
	const struct section *s = section_for(cf, name, len);

	return s != NULL ? &s->qc : &cf->defaults;
}

bool
config_names_dead_letter(const struct config *cf, const char *name, size_t len)
{
	size_t i;

	/* the sections, then the defaults (i == nsections) */
	for (i = 0; i <= cf->nsections; i++) {
		const char *dl = i < cf->nsections ?
		    cf->sections[i].qc.dead_letter : cf->defaults.dead_letter;
		if (strlen(dl) == len && memcmp(dl, name, len) == 0)
			return true;
	}
	return false;
}

bool
config_has_open_timeout(const struct config *cf)
{
	return cf->any_open_timeout;
}
