/* perms.c -- a user's permissions field: parsing and matching queue names
 * against its patterns. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perms.h"
#include "qname.h"

const struct perms perms_revoked = { "(removed from --auth-file)", 0, 0, NULL, NULL };

static bool
word_is(const char *p, size_t n, const char *lit)
{
	return n == strlen(lit) && memcmp(p, lit, n) == 0;
}

int
perms_parse(const char *text, size_t len, struct perms *p, char *err,
    size_t errlen)
{
	const char *w = text, *end = text + len;
	size_t npat = 0, bytes = 0, used = 0;
	unsigned rw = 0;

	/* first pass: check every word, count the patterns and their bytes */
	while (w <= end && len > 0) {
		const char *c = memchr(w, ',', (size_t)(end - w));
		const char *we = c != NULL ? c : end, *ws = w;
		size_t n;

		while (ws < we && (*ws == ' ' || *ws == '\t'))
			ws++;
		while (we > ws && (we[-1] == ' ' || we[-1] == '\t'))
			we--;
		n = (size_t)(we - ws);
		if (n == 0) {
			snprintf(err, errlen, "empty permission (a ',' too many?)");
			return -1;
		}
		if (word_is(ws, n, "read")) {
			rw |= PERM_READ;
		} else if (word_is(ws, n, "write")) {
			rw |= PERM_WRITE;
		} else if (word_is(ws, n, "admin")) {
			p->rights |= PERM_ADMIN;
		} else if (n >= 7 && memcmp(ws, "queues=", 7) == 0) {
			const char *pat = ws + 7;
			size_t pl = n - 7, star = pl;

			if (pl > 0 && pat[pl - 1] == '*')
				star = pl - 1;
			if (pl == 0 || memchr(pat, '*', star) != NULL ||
			    (star > 0 && !saker_qname_valid(pat, star))) {
				snprintf(err, errlen, "bad queue pattern \"%.*s\" (a queue "
				    "name, or the start of one followed by '*')",
				    (int)(pl > 200 ? 200 : pl), pat);
				return -1;
			}
			npat++;
			bytes += star;
		} else {
			snprintf(err, errlen, "unknown permission \"%.*s\" (known: "
			    "queues=PATTERN, read, write, admin)", (int)(n > 100 ? 100 : n), ws);
			return -1;
		}
		if (c == NULL)
			break;
		w = c + 1;
	}
	p->rights |= rw != 0 ? rw : PERM_READ | PERM_WRITE;
	if (npat == 0)
		return 0;
	p->pat = calloc(npat, sizeof(*p->pat));
	p->buf = malloc(bytes + 1);
	if (p->pat == NULL || p->buf == NULL) {
		perms_free(p);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* second pass: copy the patterns (the words are known good) */
	for (w = text; ; ) {
		const char *c = memchr(w, ',', (size_t)(end - w));
		const char *we = c != NULL ? c : end, *ws = w;

		while (ws < we && (*ws == ' ' || *ws == '\t'))
			ws++;
		while (we > ws && (we[-1] == ' ' || we[-1] == '\t'))
			we--;
		if ((size_t)(we - ws) >= 7 && memcmp(ws, "queues=", 7) == 0) {
			struct perm_pat *pp = &p->pat[p->npat++];
			size_t pl = (size_t)(we - ws) - 7;

			pp->prefix = ws[7 + pl - 1] == '*';
			pp->len = pp->prefix ? pl - 1 : pl;
			memcpy(p->buf + used, ws + 7, pp->len);
			pp->p = p->buf + used;
			used += pp->len;
		}
		if (c == NULL)
			break;
		w = c + 1;
	}
	return 0;
}

void
perms_free(struct perms *p)
{
	free(p->pat);
	free(p->buf);
	p->pat = NULL;
	p->buf = NULL;
	p->npat = 0;
}

bool
perms_queue_ok(const struct perms *p, const char *name, size_t len)
{
	size_t i;

	if (p->npat == 0)
		return true;
	for (i = 0; i < p->npat; i++) {
		const struct perm_pat *pp = &p->pat[i];

		if (pp->prefix ? len >= pp->len && memcmp(name, pp->p, pp->len) == 0 :
		    len == pp->len && memcmp(name, pp->p, len) == 0)
			return true;
	}
	return false;
}
