/* auth.c -- --auth-file: loading, checking permissions, reloading on
 * SIGHUP, and comparing passwords in constant time, or through crypt(3)
 * when the file holds a hash. */
#include "config.h"

#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "log.h"
#include "session.h"

#define AUTH_MAX_FILE (1024 * 1024)
/* Longest password a login may carry (text logins are capped at 4096
 * bytes of "user password" anyway). */
#define AUTH_MAX_PASS 4096

struct user {
	char *name, *pass;              /* pass: the secret, or its crypt(3) hash */
	size_t nlen, plen;
	bool hashed;
	int64_t cost_ns;                /* one crypt(3) of the hash, at load */
	struct perms perms;             /* perms.user is name */
};

struct userdb {
	struct user *u;
	size_t n, nplain;               /* nplain: users with a clear-text secret */
	/* what a login of an unknown or clear-text user is checked against
	 * so that it costs what a known user's does: the file's most
	 * expensive hash (measured at load), NULL when the file holds none */
	const struct user *dummy;
};

/* The users of one --auth-file, and the scratch their checks use. */
struct auth {
	struct userdb db;
	char *path;                     /* reread on SIGHUP */
	struct crypt_data crypt;        /* crypt_r's work area (32 KiB) */
	char pass[AUTH_MAX_PASS + 1];   /* the password being checked, NUL-ended */
	unsigned long checks;           /* auth_check() calls (auth_checks()) */
};

static void
db_free(struct userdb *d)
{
	size_t i;

	for (i = 0; i < d->n; i++) {
		/* passwords do not linger in freed memory */
		memset(d->u[i].pass, 0, d->u[i].plen);
		free(d->u[i].name);
		free(d->u[i].pass);
		perms_free(&d->u[i].perms);
	}
	free(d->u);
	d->u = NULL;
	d->n = 0;
	d->nplain = 0;
	d->dummy = NULL;
}

/*
 * A secret starting with '$' is a crypt(3) hash: "$y$" yescrypt, "$6$"
 * sha512-crypt, or any other method libcrypt knows.  It must hash: an
 * unknown method or a damaged hash makes crypt_r fail or answer a string
 * starting with '*', and such a line is refused at load rather than
 * locking the user out later.
 */
static int64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ... and *cost_ns is what one crypt(3) of it took. */
static bool
hash_usable(struct auth *a, const char *hash, int64_t *cost_ns)
{
	int64_t t0 = mono_ns();
	const char *h = crypt_r("", hash, &a->crypt);

	*cost_ns = mono_ns() - t0;
	return h != NULL && h[0] == '$' && strlen(h) == strlen(hash);
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

/*
 * Parse the file's text into *d.  A line is "user:secret[:permissions]":
 * the user ends at the first ':', the permissions start after the last
 * one when there are two or more.  So a clear-text secret may hold ':'
 * only when a permissions field follows it (empty for the defaults:
 * "alice:pa:ss:"); a crypt(3) hash never holds one.
 */
static int
db_parse(struct auth *a, const char *text, size_t len, struct userdb *d,
    char *err, size_t errlen)
{
	const char *p = text, *end = text + len;
	size_t lineno = 0, cap = 0, i;
	struct user *u = NULL;
	char why[256];

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl != NULL ? nl : end, *colon, *last;

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
		for (last = le - 1; *last != ':'; last--)
			;
		if (last == colon)
			last = le;              /* no permissions field */
		for (i = 0; i < d->n; i++) {
			if (d->u[i].nlen == (size_t)(colon - p) &&
			    memcmp(d->u[i].name, p, d->u[i].nlen) == 0) {
				snprintf(err, errlen, "line %zu: user \"%s\" is listed twice",
				    lineno, d->u[i].name);
				return -1;
			}
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
		memset(u, 0, sizeof(*u));
		u->nlen = (size_t)(colon - p);
		u->plen = (size_t)(last - colon - 1);
		u->name = dup_n(p, u->nlen);
		u->pass = dup_n(colon + 1, u->plen);
		if (u->name == NULL || u->pass == NULL) {
			free(u->name);
			free(u->pass);
			goto nomem;
		}
		u->hashed = u->pass[0] == '$';
		if (u->hashed && (strlen(u->pass) != u->plen || !hash_usable(a, u->pass, &u->cost_ns))) {
			snprintf(err, errlen, "line %zu: a hash crypt(3) cannot use "
			    "(write $y$... or $6$...)", lineno);
			goto bad_user;
		}
		if (last < le && perms_parse(last + 1, (size_t)(le - last - 1),
		    &u->perms, why, sizeof(why)) != 0) {
			snprintf(err, errlen, "line %zu: %s%s", lineno, why, u->hashed ? "" :
			    "; a clear-text password holding ':' needs a permissions "
			    "field after it, empty for the defaults (user:pa:ss:)");
			goto bad_user;
		}
		if (last == le)
			(void)perms_parse("", 0, &u->perms, why, sizeof(why));
		u->perms.user = u->name;
		if (!u->hashed)
			d->nplain++;
		d->n++;
next:
		p = nl != NULL ? nl + 1 : end;
	}
	if (d->n == 0) {
		snprintf(err, errlen, "no user:password line");
		return -1;
	}
	/* the most expensive: with mixed costs in the file, an unknown user
	 * checked against the first hash took 350 us where admin took 50 ms
	 * (issue 45) */
	for (i = 0; i < d->n; i++)
		if (d->u[i].hashed && (d->dummy == NULL ||
		    d->u[i].cost_ns > d->dummy->cost_ns))
			d->dummy = &d->u[i];
	return 0;
bad_user:
	memset(u->pass, 0, u->plen);
	free(u->name);
	free(u->pass);
	perms_free(&u->perms);
	return -1;
nomem:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* Read and check the file into *d. */
static int
db_load(struct auth *a, const char *path, struct userdb *d, char *err,
    size_t errlen)
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
	rc = db_parse(a, text, (size_t)n, d, err, errlen);
	memset(text, 0, (size_t)n);
	free(text);
	if (rc != 0)
		db_free(d);
	return rc;
}

struct auth *
auth_load(const char *path, char *err, size_t errlen)
{
	struct auth *a = calloc(1, sizeof(*a));

	if (a == NULL || (a->path = strdup(path)) == NULL) {
		free(a);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (db_load(a, path, &a->db, err, errlen) != 0) {
		auth_free(a);
		return NULL;
	}
	if (a->db.nplain > 0)
		log_warn("--auth-file %s: %zu of %zu users have a clear-text password; "
		    "store crypt(3) hashes instead (mkpasswd -m yescrypt, or openssl "
		    "passwd -6)", path, a->db.nplain, a->db.n);
	return a;
}

/* The rights of user `name` in d, or NULL when d has no such user. */
static const struct perms *
db_perms(const struct userdb *d, const char *name)
{
	size_t i;

	for (i = 0; i < d->n; i++)
		if (strcmp(d->u[i].name, name) == 0)
			return &d->u[i].perms;
	return NULL;
}

void
auth_reload(struct broker *b)
{
	struct auth *a = b->auth;
	struct userdb nd;
	struct session *s;
	size_t revoked = 0;
	char err[256];

	if (a == NULL)
		return;
	if (db_load(a, a->path, &nd, err, sizeof(err)) != 0) {
		log_error("--auth-file %s: %s; keeping the previous users", a->path, err);
		return;
	}
	/* sessions logged in get their user's new rights; a user no longer
	 * in the file keeps its connections but may do nothing with them */
	TAILQ_FOREACH(s, &b->sessions, link) {
		const struct perms *np;

		if (s->perms == NULL || s->perms == &perms_revoked)
			continue;
		np = db_perms(&nd, s->perms->user);
		if (np == NULL) {
			np = &perms_revoked;
			revoked++;
		}
		s->perms = np;
	}
	db_free(&a->db);
	a->db = nd;
	log_info("--auth-file %s: %zu users", a->path, a->db.n);
	if (revoked > 0)
		log_warn("--auth-file %s: %zu connections of users no longer in the "
		    "file may do nothing more", a->path, revoked);
	if (a->db.nplain > 0)
		log_warn("--auth-file %s: %zu of %zu users have a clear-text password",
		    a->path, a->db.nplain, a->db.n);
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

/* Does `pass` hash to u's stored hash?  (crypt_r's own time depends
 * only on the hash's method and cost, not on the password.)  A password
 * no hash can match (over AUTH_MAX_PASS bytes, or holding a NUL) is
 * hashed all the same, cut, and refused: on bd89b77 it was refused
 * without a crypt in 16 us, a failure 3,000 times cheaper than a real
 * one to flood the login tables with (issue 45). */
static bool
hash_matches(struct auth *a, const struct user *u, const char *pass, size_t plen)
{
	bool bad = plen > AUTH_MAX_PASS || memchr(pass, '\0', plen) != NULL;
	const char *h;
	bool ok;

	if (plen > AUTH_MAX_PASS)
		plen = AUTH_MAX_PASS;
	memcpy(a->pass, pass, plen);
	a->pass[plen] = '\0';
	h = crypt_r(a->pass, u->pass, &a->crypt);
	ok = !bad && h != NULL && ct_diff(h, strlen(h), u->pass, u->plen) == 0;
	memset(a->pass, 0, plen);
	return ok;
}

/*
 * Every entry is compared (no early exit on the matching user), and
 * exactly one crypt(3) runs whenever the file holds a hash: the named
 * user's, or for a user that is not in the file (or has a clear-text
 * password) the dummy's, whose result is thrown away.  So a login costs
 * the same whether the user exists or not (issue 35: an unknown user was
 * answered in 122 us, a known one in 1,845 us).
 */
const struct perms *
auth_check(struct auth *a, const char *user, size_t ulen, const char *pass,
    size_t plen)
{
	const struct user *named = NULL;
	bool ok = false;
	size_t i;

	a->checks++;
	for (i = 0; i < a->db.n; i++)
		if (ct_diff(user, ulen, a->db.u[i].name, a->db.u[i].nlen) == 0)
			named = &a->db.u[i];
	if (named != NULL && named->hashed) {
		ok = hash_matches(a, named, pass, plen);
		/* a user whose hash is much cheaper than the dummy pays the
		 * dummy too: its answer would stand out as a known name */
		if (named->cost_ns * 2 < a->db.dummy->cost_ns)
			(void)hash_matches(a, a->db.dummy, pass, plen);
	} else {
		if (a->db.dummy != NULL)
			(void)hash_matches(a, a->db.dummy, pass, plen);
		ok = named != NULL &&
		    ct_diff(pass, plen, named->pass, named->plen) == 0;
	}
	return ok ? &named->perms : NULL;
}

bool
auth_known(struct auth *a, const char *user, size_t ulen)
{
	bool known = false;
	size_t i;

	if (a == NULL)
		return false;
	for (i = 0; i < a->db.n; i++)
		known |= ct_diff(user, ulen, a->db.u[i].name, a->db.u[i].nlen) == 0;
	return known;
}

unsigned long
auth_checks(const struct auth *a)
{
	return a != NULL ? a->checks : 0;
}

void
auth_dummy(struct auth *a)
{
	if (a != NULL && a->db.dummy != NULL)
		(void)hash_matches(a, a->db.dummy, "", 0);
}

void
auth_free(struct auth *a)
{
	if (a == NULL)
		return;
	db_free(&a->db);
	free(a->path);
	free(a);
}
