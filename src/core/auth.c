/* auth.c -- --auth-file: loading, checking permissions, reloading on
 * SIGHUP, and comparing passwords in constant time. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "log.h"

#define AUTH_MAX_FILE (1024 * 1024)

struct user {
	char *name, *pass;
	size_t nlen, plen;
};

struct userdb {
	struct user *u;
	size_t n;
};

bool auth_active;
static struct userdb db;
static char *auth_path;

static void
db_free(struct userdb *d)
{
	size_t i;

	for (i = 0; i < d->n; i++) {
		/* passwords do not linger in freed memory */
		memset(d->u[i].pass, 0, d->u[i].plen);
		free(d->u[i].name);
		free(d->u[i].pass);
	}
	free(d->u);
	d->u = NULL;
	d->n = 0;
}

static char *
dup_n(const char *p, size_t n)
{
	char *s = malloc(n + 1);

	if (s != NULL) {
		memcpy(s, p, n);
		s[n] = '\0';
	}
	return s;
}

/* Parse the file's text into *d. */
static int
db_parse(const char *text, size_t len, struct userdb *d, char *err, size_t errlen)
{
	const char *p = text, *end = text + len;
	size_t lineno = 0, cap = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl != NULL ? nl : end, *colon;
		struct user *u;

		lineno++;
		if (le > p && le[-1] == '\r')
			le--;
		if (le == p || *p == '#')
			goto next;
		colon = memchr(p, ':', (size_t)(le - p));
		if (colon == NULL || colon == p) {
			snprintf(err, errlen, "line %zu: expected user:password", lineno);
			return -1;
		}
		if (d->n == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			struct user *nu = realloc(d->u, ncap * sizeof(*nu));
			if (nu == NULL)
				goto nomem;
			d->u = nu;
			cap = ncap;
		}
		u = &d->u[d->n];
		u->nlen = (size_t)(colon - p);
		u->plen = (size_t)(le - colon - 1);
		u->name = dup_n(p, u->nlen);
		u->pass = dup_n(colon + 1, u->plen);
		if (u->name == NULL || u->pass == NULL) {
			free(u->name);
			free(u->pass);
			goto nomem;
		}
		d->n++;
next:
		p = nl != NULL ? nl + 1 : end;
	}
	if (d->n == 0) {
		snprintf(err, errlen, "no user:password line");
		return -1;
	}
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* Read and check the file into *d. */
static int
db_load(const char *path, struct userdb *d, char *err, size_t errlen)
{
	struct stat st;
	char *text;
	ssize_t n;
	int fd, rc;

	memset(d, 0, sizeof(*d));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "not a regular file");
		close(fd);
		return -1;
	}
	if ((st.st_mode & (S_IROTH | S_IWOTH)) != 0) {
		snprintf(err, errlen, "other users may read or write it (mode %04o); "
		    "chmod o-rw it", (unsigned)(st.st_mode & 07777));
		close(fd);
		return -1;
	}
	if (st.st_size > AUTH_MAX_FILE) {
		snprintf(err, errlen, "larger than %d bytes", AUTH_MAX_FILE);
		close(fd);
		return -1;
	}
	text = malloc((size_t)st.st_size + 1);
	if (text == NULL) {
		snprintf(err, errlen, "out of memory");
		close(fd);
		return -1;
	}
	n = read(fd, text, (size_t)st.st_size);
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		free(text);
		return -1;
	}
	rc = db_parse(text, (size_t)n, d, err, errlen);
	memset(text, 0, (size_t)n);
	free(text);
	if (rc != 0)
		db_free(d);
	return rc;
}

int
auth_init(const char *path, char *err, size_t errlen)
{
	struct userdb nd;

	if (db_load(path, &nd, err, errlen) != 0)
		return -1;
	free(auth_path);
	auth_path = strdup(path);
	if (auth_path == NULL) {
		db_free(&nd);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	db_free(&db);
	db = nd;
	auth_active = true;
	return 0;
}

void
auth_reload(void)
{
	struct userdb nd;
	char err[256];

	if (auth_path == NULL)
		return;
	if (db_load(auth_path, &nd, err, sizeof(err)) != 0) {
		log_error("--auth-file %s: %s; keeping the previous users", auth_path, err);
		return;
	}
	db_free(&db);
	db = nd;
	log_info("--auth-file %s: %zu users", auth_path, db.n);
}

/* Nonzero when a differs from the stored b.  Runs over all of b whatever
 * a holds, so the time tells nothing about how much matched. */
static unsigned
ct_diff(const char *a, size_t alen, const char *b, size_t blen)
{
	unsigned d = alen != blen;
	size_t i;

	for (i = 0; i < blen; i++)
		d |= (unsigned)((unsigned char)b[i] ^ (unsigned char)(i < alen ? a[i] : 0));
	return d;
}

bool
auth_check(const char *user, size_t ulen, const char *pass, size_t plen)
{
	unsigned ok = 0;
	size_t i;

	/* every entry is compared: no early exit on the matching user */
	for (i = 0; i < db.n; i++) {
		unsigned d = ct_diff(user, ulen, db.u[i].name, db.u[i].nlen) |
		    ct_diff(pass, plen, db.u[i].pass, db.u[i].plen);
		ok |= d == 0;
	}
	return ok != 0;
}

void
auth_free(void)
{
	db_free(&db);
	free(auth_path);
	auth_path = NULL;
	auth_active = false;
}
