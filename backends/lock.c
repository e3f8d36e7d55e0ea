/* lock.c -- the store's lock file, taken by the layer around a driver's
 * open() and close() (store.h, saker_lock_kind). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "saker/store.h"
#include "lock.h"

struct saker_store_lock {
	int fd;                 /* -1: not locked (see saker_lock_take) */
	bool exclusive;
	mode_t mode;            /* of a new lock file: as the store's files */
	char *location;         /* into buf */
	char buf[];             /* the lock file's path, then the location */
};

/*
 * The pid of a process holding a lock on fd's file: from /proc/locks,
 * which knows every holder (a writer refused by a reader learns the
 * reader's pid; the inode alone when the device numbers differ, as on
 * some overlay file systems), else the pid the last writer wrote into the
 * file.  0 when neither says.
 */
static long
lock_holder(int fd)
{
	char line[256], kind[16];
	unsigned maj, min;
	unsigned long ino;
	struct stat sb;
	long pid = 0, other = 0, p;
	ssize_t n;
	FILE *f;

	if (fstat(fd, &sb) == 0 && (f = fopen("/proc/locks", "re")) != NULL) {
		while (pid == 0 && fgets(line, sizeof(line), f) != NULL) {
			if (sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%lu", kind,
			    &p, &maj, &min, &ino) != 5 ||
			    strcmp(kind, "FLOCK") != 0 || p <= 0 ||
			    ino != (unsigned long)sb.st_ino)
				continue;
			if (maj == major(sb.st_dev) && min == minor(sb.st_dev))
				pid = p;
			else if (other == 0)
				other = p;
		}
		fclose(f);
	}
	if (pid == 0)
		pid = other;
	if (pid == 0 && (n = pread(fd, line, sizeof(line) - 1, 0)) > 0) {
		line[n] = '\0';
		pid = strtol(line, NULL, 10);
	}
	return pid > 0 ? pid : 0;
}

/* flock() l's file; a writer then leaves its pid there (informative only:
 * failures are ignored). */
static int
lock_flock(struct saker_store_lock *l, bool exclusive, char *err, size_t errlen)
{
	char pid[32];
	long holder;
	int n;

	if (flock(l->fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
		if (errno != EWOULDBLOCK) {
			snprintf(err, errlen, "store %s: cannot lock %s: %s",
			    l->location, l->buf, strerror(errno));
			return SAKER_EIO;
		}
		if ((holder = lock_holder(l->fd)) > 0)
			snprintf(err, errlen, "store %s is in use by another "
			    "process (pid %ld)", l->location, holder);
		else
			snprintf(err, errlen, "store %s is in use by another "
			    "process", l->location);
		return SAKER_ELOCKED;
	}
	l->exclusive = exclusive;
	if (exclusive) {
		n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
		if (ftruncate(l->fd, 0) == 0)
			(void)!pwrite(l->fd, pid, (size_t)n, 0);
	}
	return SAKER_OK;
}

/* "NAME (uid N)" of uid, or "uid N" when it has no name. */
static void
user_name(uid_t uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);

	if (pw != NULL)
		snprintf(buf, len, "%s (uid %ld)", pw->pw_name, (long)uid);
	else
		snprintf(buf, len, "uid %ld", (long)uid);
}

/*
 * A lock file refused with EACCES: when it (or, not yet made, its
 * directory) belongs to a user other than this process's, say both and
 * what to do -- a store made by root and then served by a system user is
 * the usual case.  Appended to err.
 */
static void
owner_hint(const struct saker_store_lock *l, char *err, size_t errlen)
{
	struct stat sb;
	struct passwd *pw;
	char owner[96], me[96], dir[4096], *slash;
	size_t n = strlen(err), ll = strlen(l->location);
	bool inside = strncmp(l->buf, l->location, ll) == 0 && l->buf[ll] == '/';
	bool is_dir = false;

	if (stat(l->buf, &sb) != 0) {
		/* not made yet: its directory refused it */
		snprintf(dir, sizeof(dir), "%s", l->buf);
		if ((slash = strrchr(dir, '/')) != NULL)
			slash[slash == dir ? 1 : 0] = '\0';
		else
			snprintf(dir, sizeof(dir), ".");
		if (stat(dir, &sb) != 0)
			return;
		is_dir = true;
	}
	if (sb.st_uid == geteuid())
		return;
	user_name(sb.st_uid, owner, sizeof(owner));
	user_name(geteuid(), me, sizeof(me));
	pw = getpwuid(geteuid());
	snprintf(err + n, errlen - n, "; %s belongs to %s and this process runs "
	    "as %s: run it as that user, or give the store to this one (chown%s "
	    "%s %s%s)", is_dir ? "its directory" : "it", owner, me,
	    inside ? " -R" : "", pw != NULL ? pw->pw_name : "USER",
	    inside || !is_dir ? l->location : dir, inside || is_dir ? "" : "*");
}

/* Open l's file for a writer (created) or a reader (never created).
 * SAKER_ENOTFOUND: the location is missing or no directory. */
static int
lock_file(struct saker_store_lock *l, bool writer, char *err, size_t errlen)
{
	int e;

	l->fd = open(l->buf, (writer ? O_RDWR | O_CREAT : O_RDONLY) |
	    O_CLOEXEC, l->mode);
	if (l->fd >= 0)
		return SAKER_OK;
	e = errno;
	if (!writer && (e == ENOENT || e == EACCES || e == EROFS))
		return SAKER_OK;	/* nobody wrote here, or cannot: no lock */
	snprintf(err, errlen, "store %s: cannot open lock file %s: %s",
	    l->location, l->buf, strerror(e));
	if (e == EACCES)
		owner_hint(l, err, errlen);
	return e == ENOENT || e == ENOTDIR ? SAKER_ENOTFOUND :
	    e == EACCES || e == EROFS ? SAKER_EREADONLY : SAKER_EIO;
}

int
saker_lock_take(const struct saker_store_driver *drv, const char *location,
    const struct saker_store_opts *opts, struct saker_store_lock **out,
    char *err, size_t errlen)
{
	bool in_dir = drv->lock == SAKER_LOCK_IN_DIR;
	size_t llen, len;
	struct saker_store_lock *l;
	int rc;

	*out = NULL;
	if (drv->lock == SAKER_LOCK_NONE || location == NULL)
		return SAKER_OK;
	llen = strlen(location) + 1;
	len = llen + sizeof("/saker.lock");
	if (in_dir && opts->create && !opts->read_only &&
	    mkdir(location, 0700) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create store directory %s: %s",
		    location, strerror(errno));
		return SAKER_EIO;
	}
	if ((l = malloc(sizeof(*l) + len + llen)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return SAKER_ENOMEM;
	}
	snprintf(l->buf, len, in_dir ? "%s/saker.lock" : "%s.lock", location);
	l->location = l->buf + len;
	memcpy(l->location, location, llen);
	l->exclusive = false;
	l->mode = in_dir ? 0600 : 0644;	/* inside a 0700 dir; readable
					 * beside a file, for readers */
	/* the location is missing (and not to be created) or no directory:
	 * the driver says so, and no lock file is left beside nothing
	 * (saker_lock_late() locks if it opens all the same) */
	l->fd = -1;
	rc = !opts->create && access(location, F_OK) != 0 ? SAKER_OK :
	    lock_file(l, !opts->read_only, err, errlen);
	if (rc == SAKER_ENOTFOUND)
		rc = SAKER_OK;
	if (rc == SAKER_OK && l->fd >= 0)
		rc = lock_flock(l, !opts->read_only, err, errlen);
	if (rc != SAKER_OK) {
		saker_lock_drop(l);
		return rc;
	}
	*out = l;
	return SAKER_OK;
}

/* A writer whose lock file could not be opened because its location was
 * missing, and whose driver then opened it all the same: lock it now. */
int
saker_lock_late(struct saker_store_lock *l, char *err, size_t errlen)
{
	int rc;

	if (l == NULL || l->fd >= 0)
		return SAKER_OK;
	if ((rc = lock_file(l, true, err, errlen)) != SAKER_OK)
		return rc;
	return lock_flock(l, true, err, errlen);
}

int
saker_store_relock(const struct saker_store_opts *opts, bool exclusive,
    char *err, size_t errlen)
{
	struct saker_store_lock *l = opts->lock;
	int rc;

	if (l == NULL || (l->fd >= 0 && l->exclusive == exclusive))
		return SAKER_OK;
	if (l->fd < 0)
		return exclusive ? saker_lock_late(l, err, errlen) : SAKER_OK;
	if ((rc = lock_flock(l, exclusive, err, errlen)) != SAKER_OK &&
	    exclusive) {
		char why[8];

		/* flock() may have dropped the shared lock on the way */
		(void)lock_flock(l, false, why, sizeof(why));
	}
	return rc;
}

void
saker_lock_drop(struct saker_store_lock *l)
{
	if (l == NULL)
		return;
	if (l->fd >= 0)
		close(l->fd);	/* drops the flock */
	free(l);
}
