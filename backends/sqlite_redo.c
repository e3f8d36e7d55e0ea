/* sqlite_redo.c -- the SQLite driver's journal records: writing and replaying them (sqlite_redo.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kit.h"
#include "sqlite_redo.h"

static int
put(struct lj *j, const void *p, size_t n)
{
	unsigned char *d;

	if (j->len == 0) {	/* a batch's first entry: the format first */
		if (lj_reserve(j, 1, &d) != 0)
			return ENOMEM;
		*d = SR_FORMAT;
	}
	if (lj_reserve(j, n, &d) != 0)
		return ENOMEM;
	memcpy(d, p, n);
	return 0;
}

int
sr_int(struct lj *j, int param, int64_t v)
{
	unsigned char e[10] = { 'i', (unsigned char)param };

	saker_put_le64(e + 2, (uint64_t)v);
	return put(j, e, sizeof(e));
}

int
sr_bytes(struct lj *j, char kind, int param, const void *p, size_t n)
{
	unsigned char e[6] = { (unsigned char)kind, (unsigned char)param };
	size_t mark = j->len;
	int rc;

	if (n > UINT32_MAX)
		return ENOMEM;
	saker_put_le32(e + 2, (uint32_t)n);
	if ((rc = put(j, e, sizeof(e))) == 0 && n > 0 &&
	    (rc = put(j, p, n)) != 0)
		lj_cut(j, mark);
	return rc;
}

int
sr_exec(struct lj *j, int which)
{
	const unsigned char e[2] = { 'x', (unsigned char)which };

	return put(j, e, sizeof(e));
}

/* The size of the entry at p (of n bytes left), or 0 when it is cut
 * short or unknown. */
static size_t
entry_size(const unsigned char *p, size_t n)
{
	uint64_t len;

	if (n < 2)
		return 0;
	switch (p[0]) {
	case 'i':
		return n >= 10 ? 10 : 0;
	case 'b':
	case 't':
		if (n < 6)
			return 0;
		len = saker_get_le32(p + 2);
		return len <= n - 6 ? 6 + (size_t)len : 0;
	case 'x':
		return 2;
	default:
		return 0;
	}
}

/* Bind the entries [p, end) to st. */
static int
bind_all(sqlite3_stmt *st, const unsigned char *p, const unsigned char *end,
    char *err, size_t errlen)
{
	int nparams = sqlite3_bind_parameter_count(st), rc = SQLITE_OK;

	while (p < end) {
		size_t sz = entry_size(p, (size_t)(end - p));
		int param = p[1];

		if (param < 1 || param > nparams) {
			snprintf(err, errlen, "parameter %d out of range", param);
			return SQLITE_CORRUPT;
		}
		if (p[0] == 'i')
			rc = sqlite3_bind_int64(st, param,
			    (int64_t)saker_get_le64(p + 2));
		else if (p[0] == 'b')
			/* empty items are empty blobs, never NULL */
			rc = sqlite3_bind_blob(st, param, sz > 6 ? (const void *)(p + 6) : "",
			    (int)(sz - 6), SQLITE_STATIC);
		else
			rc = sqlite3_bind_text(st, param, (const char *)p + 6,
			    (int)(sz - 6), SQLITE_STATIC);
		if (rc != SQLITE_OK) {
			snprintf(err, errlen, "bind: %s", sqlite3_errstr(rc));
			return rc;
		}
		p += sz;
	}
	return SQLITE_OK;
}

int
sr_apply(sqlite3_stmt *const *st, int nst, const unsigned char *p,
    size_t len, char *err, size_t errlen)
{
	const unsigned char *end = p + len, *binds;
	int rc;

	if (len == 0 || p[0] != SR_FORMAT) {
		snprintf(err, errlen, "record format %d, this build writes %d",
		    len > 0 ? p[0] : -1, SR_FORMAT);
		return SQLITE_CORRUPT;
	}
	binds = ++p;
	while (p < end) {
		size_t sz = entry_size(p, (size_t)(end - p));
		sqlite3_stmt *s;

		if (sz == 0) {
			snprintf(err, errlen, "entry cut short or unknown");
			return SQLITE_CORRUPT;
		}
		if (p[0] != 'x') {
			p += sz;
			continue;
		}
		if (p[1] >= nst || (s = st[p[1]]) == NULL ||
		    sqlite3_stmt_readonly(s)) {
			snprintf(err, errlen, "statement %d is not one that "
			    "writes", p[1]);
			return SQLITE_CORRUPT;
		}
		rc = bind_all(s, binds, p, err, errlen);
		if (rc == SQLITE_OK) {
			rc = sqlite3_step(s);
			if (rc == SQLITE_DONE || rc == SQLITE_ROW)
				rc = SQLITE_OK;
			else
				snprintf(err, errlen, "statement %d: %s", p[1],
				    sqlite3_errmsg(sqlite3_db_handle(s)));
		}
		sqlite3_reset(s);
		sqlite3_clear_bindings(s);
		if (rc != SQLITE_OK)
			return rc;
		p += sz;
		binds = p;
	}
	if (binds != end) {
		snprintf(err, errlen, "values bound to no statement");
		return SQLITE_CORRUPT;
	}
	return SQLITE_OK;
}
