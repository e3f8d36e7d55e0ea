/* powerloss.c -- LD_PRELOAD shim: undo journal for simulated power loss, and I/O fault injection (powerloss.h). */
#define _GNU_SOURCE 1
#include "config.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "powerloss.h"

/*
 * Test-only code.  It runs inside sakerd, under the drivers' I/O calls, so
 * it must never call an interposed function itself: everything goes
 * through the real_* pointers.  All state is behind one mutex (sakerd has
 * one thread, but the libraries may not).
 */

#define MAXFD		4096
#define MAXFILES	32

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static int (*real_open)(const char *, int, ...);
static int (*real_close)(int);
static int (*real_dup)(int);
static int (*real_dup2)(int, int);
static int (*real_ftruncate)(int, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_msync)(void *, size_t, int);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);

struct wfile {
	char path[PATH_MAX];
	int jfd;		/* undo journal, -1 when not recording */
	int rfd;		/* read-only descriptor for the old contents
				 * (the writer's may be write-only) */
	off_t jhdr;		/* journal header length */
};

enum { F_WRITE, F_FSYNC, F_MMAP, F_NOPS };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool inited;
static char watch_dir[PATH_MAX];	/* "" = watch nothing */
static size_t watch_len;
static char journal_dir[PATH_MAX];	/* "" = no power-loss recording */
static struct wfile files[MAXFILES];
static int nfiles;
static signed char fd_file[MAXFD];	/* file index + 1, 0 = not watched */
static bool fd_sync[MAXFD];		/* opened O_SYNC/O_DSYNC */

static int fault_op = -1;
static unsigned long fault_n, fault_count[F_NOPS];
static bool fault_persist;
static bool fault_stall;	/* fsync:N:stall: wait instead of failing */
static bool fault_stall_fail;	/* fsync:N:stallfail: wait, then fail */
static int fault_errno;
static char arm_path[PATH_MAX];
static bool armed;

static void
resolve(void)
{
	real_write = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	real_pwrite = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
	real_writev = (ssize_t (*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
	real_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
	real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
	real_dup = (int (*)(int))dlsym(RTLD_NEXT, "dup");
	real_dup2 = (int (*)(int, int))dlsym(RTLD_NEXT, "dup2");
	real_ftruncate = (int (*)(int, off_t))dlsym(RTLD_NEXT, "ftruncate");
	real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
	real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
	real_msync = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "msync");
	real_mmap = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
}

static void
parse_fault(const char *spec)
{
	char op[16];
	char mode[16] = "once", err[16] = "";
	unsigned long n;
	int k;

	k = sscanf(spec, "%15[a-z]:%lu:%15[a-z]:%15[A-Z]", op, &n, mode, err);
	if (k < 2 || n == 0) {
		fprintf(stderr, "powerloss: bad %s \"%s\"\n", PL_ENV_FAULT, spec);
		return;
	}
	if (strcmp(op, "write") == 0)
		fault_op = F_WRITE;
	else if (strcmp(op, "fsync") == 0)
		fault_op = F_FSYNC;
	else if (strcmp(op, "mmap") == 0)
		fault_op = F_MMAP;
	else {
		fprintf(stderr, "powerloss: unknown fault op \"%s\"\n", op);
		return;
	}
	fault_n = n;
	fault_persist = strcmp(mode, "persist") == 0;
	fault_stall_fail = strcmp(mode, "stallfail") == 0 && fault_op == F_FSYNC;
	fault_stall = (strcmp(mode, "stall") == 0 || fault_stall_fail) &&
	    fault_op == F_FSYNC;
	fault_errno = fault_op == F_MMAP ? ENOMEM : EIO;
	if (strcmp(err, "ENOSPC") == 0)
		fault_errno = ENOSPC;
}

/* Called with mu held: the real functions, needed from the first call. */
static void
init(void)
{
	static bool resolving;

	if (inited || resolving)
		return;
	resolving = true;
	resolve();
	__atomic_store_n(&inited, true, __ATOMIC_RELEASE);
}

/*
 * The settings are read in a constructor, not at the first call: under
 * ASan the first intercepted call comes from the sanitizer's own start-up,
 * before the environment is set up.  Nothing of the store happens before
 * main(), so nothing is missed.
 */
static void read_env(void) __attribute__((constructor));

static void
read_env(void)
{
	const char *e;

	pthread_mutex_lock(&mu);
	init();
	if ((e = getenv(PL_ENV_DIR)) != NULL && realpath(e, watch_dir) != NULL)
		watch_len = strlen(watch_dir);
	else
		watch_dir[0] = '\0';
	if ((e = getenv(PL_ENV_JOURNAL)) != NULL && strlen(e) < sizeof(journal_dir))
		strcpy(journal_dir, e);
	if ((e = getenv(PL_ENV_FAULT)) != NULL && *e != '\0')
		parse_fault(e);
	if ((e = getenv(PL_ENV_ARM)) != NULL && strlen(e) + 8 < sizeof(arm_path))
		strcpy(arm_path, e);
	else
		armed = true;
	pthread_mutex_unlock(&mu);
}

static void
lock(void)
{
	pthread_mutex_lock(&mu);
	init();
}

static void
unlock(void)
{
	pthread_mutex_unlock(&mu);
}

/*
 * True for a descriptor that is certainly not watched: such calls skip the
 * mutex entirely.  That matters for more than speed: libevent's signal
 * handler write()s to its socketpair, and taking the mutex there while the
 * interrupted code holds it would deadlock.
 */
static bool
unwatched(int fd)
{
	return __atomic_load_n(&inited, __ATOMIC_ACQUIRE) &&
	    (fd < 0 || fd >= MAXFD ||
	    __atomic_load_n(&fd_file[fd], __ATOMIC_RELAXED) == 0);
}

static struct wfile *
watched(int fd)
{
	if (fd < 0 || fd >= MAXFD || fd_file[fd] == 0)
		return NULL;
	return &files[fd_file[fd] - 1];
}

/* True when this call is the one to fail (mu held; fd is watched). */
static bool
fault_now(int op)
{
	char hit[PATH_MAX + 8];
	unsigned long c;
	int fd;

	if (fault_op != op)
		return false;
	if (!armed) {
		if (access(arm_path, F_OK) != 0)
			return false;
		armed = true;
	}
	c = ++fault_count[op];
	if (c != fault_n && !(fault_persist && c > fault_n))
		return false;
	if (arm_path[0] != '\0') {
		snprintf(hit, sizeof(hit), "%s.hit", arm_path);
		if ((fd = real_open(hit, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) >= 0)
			real_close(fd);
	}
	return true;
}

static int
write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t r;

	while (len > 0) {
		r = real_write(fd, p, len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

/* Journal the old contents of [off, off + len) of a watched file, and its
 * size, before they are overwritten (mu held). */
static void
journal(struct wfile *w, int fd, off_t off, size_t len)
{
	struct pl_rec_hdr h;
	struct stat st;
	char *old = NULL;
	ssize_t r = 0;

	if (w->jfd < 0 || fd_sync[fd] || w->rfd < 0 || fstat(w->rfd, &st) != 0)
		return;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, PL_RMAGIC, 4);
	h.off = (uint64_t)off;
	h.old_size = (uint64_t)st.st_size;
	if (off < st.st_size && len > 0) {
		if ((uint64_t)st.st_size - h.off < len)
			len = (size_t)((uint64_t)st.st_size - h.off);
		if ((old = malloc(len)) != NULL)
			r = pread(w->rfd, old, len, off);
		if (old == NULL || r != (ssize_t)len) {
			/* Cannot record: say so loudly, the run is void. */
			fprintf(stderr, "powerloss: cannot journal %s\n", w->path);
			free(old);
			return;
		}
		h.n = len;
	}
	if (write_all(w->jfd, &h, sizeof(h)) != 0 ||
	    (h.n > 0 && write_all(w->jfd, old, h.n) != 0))
		fprintf(stderr, "powerloss: journal write failed for %s\n", w->path);
	free(old);
}

/* The file is on stable storage: forget its undo records (mu held). */
static void
synced(struct wfile *w)
{
	if (w->jfd >= 0)
		real_ftruncate(w->jfd, w->jhdr);
}

static void
track(int fd, const char *path, int flags)
{
	char abs[PATH_MAX], jpath[PATH_MAX + 32];
	struct stat dst;
	uint32_t plen;
	int i;

	if (fd < 0 || fd >= MAXFD || watch_len == 0 || realpath(path, abs) == NULL ||
	    strncmp(abs, watch_dir, watch_len) != 0 ||
	    (abs[watch_len] != '/' && abs[watch_len] != '\0'))
		return;
	/* Regular files only: a directory's fsync failure is ignored by
	 * SQLite on purpose (not every file system can fsync one). */
	if (fstat(fd, &dst) != 0 || !S_ISREG(dst.st_mode))
		return;
	for (i = 0; i < nfiles; i++)
		if (strcmp(files[i].path, abs) == 0)
			break;
	if (i < nfiles) {
		struct stat a, b;

		/* Deleted and created again (a WAL): read the new file. */
		if (fstat(fd, &a) == 0 && (files[i].rfd < 0 ||
		    fstat(files[i].rfd, &b) != 0 || a.st_ino != b.st_ino ||
		    a.st_dev != b.st_dev)) {
			if (files[i].rfd >= 0)
				real_close(files[i].rfd);
			files[i].rfd = real_open(abs, O_RDONLY | O_CLOEXEC, 0);
		}
	}
	if (i == nfiles) {
		if (nfiles == MAXFILES)
			return;
		nfiles++;
		strcpy(files[i].path, abs);
		files[i].jfd = -1;
		files[i].rfd = real_open(abs, O_RDONLY | O_CLOEXEC, 0);
		if (journal_dir[0] != '\0') {
			snprintf(jpath, sizeof(jpath), "%s/%d.%ld.undo",
			    journal_dir, i, (long)getpid());
			files[i].jfd = real_open(jpath, O_WRONLY | O_CREAT |
			    O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
			plen = (uint32_t)strlen(abs);
			if (files[i].jfd >= 0 &&
			    (write_all(files[i].jfd, PL_JMAGIC, 4) != 0 ||
			    write_all(files[i].jfd, &plen, 4) != 0 ||
			    write_all(files[i].jfd, abs, plen) != 0)) {
				real_close(files[i].jfd);
				files[i].jfd = -1;
			}
			if (files[i].jfd < 0)
				fprintf(stderr, "powerloss: cannot create %s\n", jpath);
			files[i].jhdr = 8 + (off_t)plen;
		}
	}
	fd_file[fd] = (signed char)(i + 1);
	fd_sync[fd] = (flags & (O_SYNC | O_DSYNC)) != 0;
}

/* ------------------------------------------------------------------ */

static int
do_open(const char *path, int flags, mode_t mode)
{
	int fd;

	lock();
	fd = real_open(path, flags, mode);
	if (fd >= 0)
		track(fd, path, flags);
	unlock();
	return fd;
}

int open(const char *path, int flags, ...);
int open64(const char *path, int flags, ...);

/* open() and open64() read the mode only with O_CREAT or O_TMPFILE. */
#define OPEN_WRAPPER(name)						\
int									\
name(const char *path, int flags, ...)					\
{									\
	mode_t mode = 0;						\
	va_list ap;							\
									\
	if (flags & (O_CREAT | O_TMPFILE)) {				\
		va_start(ap, flags);					\
		mode = (mode_t)va_arg(ap, int);				\
		va_end(ap);						\
	}								\
	return do_open(path, flags, mode);				\
}
OPEN_WRAPPER(open)
OPEN_WRAPPER(open64)

int
close(int fd)
{
	int rc;

	if (unwatched(fd))
		return real_close(fd);
	lock();
	if (fd >= 0 && fd < MAXFD) {
		fd_file[fd] = 0;
		fd_sync[fd] = false;
	}
	rc = real_close(fd);
	unlock();
	return rc;
}

/* A duplicate refers to the same file (dd, shells: dup2 onto stdout). */
static int
dup_track(int from, int to)
{
	if (to >= 0 && to < MAXFD) {
		fd_file[to] = from >= 0 && from < MAXFD ? fd_file[from] : 0;
		fd_sync[to] = from >= 0 && from < MAXFD ? fd_sync[from] : false;
	}
	return to;
}

int
dup(int fd)
{
	int r;

	lock();
	r = dup_track(fd, real_dup(fd));
	unlock();
	return r;
}

int
dup2(int fd, int to)
{
	int r;

	lock();
	r = real_dup2(fd, to);
	if (r >= 0 && fd != to)
		dup_track(fd, r);
	unlock();
	return r;
}

/*
 * Before `len` bytes are written at `off` of fd (-1: at the file
 * position): fail the call if this is the one (errno set, false), else
 * journal what it overwrites.  With the lock held.
 */
static bool
before_write(int fd, off_t off, size_t len)
{
	struct wfile *w = watched(fd);

	if (w == NULL)
		return true;
	if (fault_now(F_WRITE)) {
		errno = fault_errno;
		return false;
	}
	if (off < 0 && (off = lseek(fd, 0, SEEK_CUR)) < 0)
		return true;
	journal(w, fd, off, len);
	return true;
}

ssize_t
write(int fd, const void *buf, size_t len)
{
	ssize_t r = -1;

	if (unwatched(fd))
		return real_write(fd, buf, len);
	lock();
	if (before_write(fd, -1, len))
		r = real_write(fd, buf, len);
	unlock();
	return r;
}

ssize_t
pwrite(int fd, const void *buf, size_t len, off_t off)
{
	ssize_t r = -1;

	if (unwatched(fd))
		return real_pwrite(fd, buf, len, off);
	lock();
	if (before_write(fd, off, len))
		r = real_pwrite(fd, buf, len, off);
	unlock();
	return r;
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off);

ssize_t
pwrite64(int fd, const void *buf, size_t len, off_t off)
{
	return pwrite(fd, buf, len, off);
}

ssize_t
writev(int fd, const struct iovec *iov, int n)
{
	size_t len = 0;
	ssize_t r = -1;
	int i;

	if (unwatched(fd))
		return real_writev(fd, iov, n);
	for (i = 0; i < n; i++)
		len += iov[i].iov_len;
	lock();
	if (before_write(fd, -1, len))
		r = real_writev(fd, iov, n);
	unlock();
	return r;
}

int
ftruncate(int fd, off_t len)
{
	struct stat st;
	size_t cut = 0;
	int rc = -1;

	if (unwatched(fd))
		return real_ftruncate(fd, len);
	/* shrinking: keep what is cut off; growing: keep the size */
	if (fstat(fd, &st) == 0 && st.st_size > len)
		cut = (size_t)(st.st_size - len);
	lock();
	if (before_write(fd, len, cut))
		rc = real_ftruncate(fd, len);
	unlock();
	return rc;
}

int ftruncate64(int fd, off_t len);

int
ftruncate64(int fd, off_t len)
{
	return ftruncate(fd, len);
}

static int
do_sync(int fd, int (*fn)(int))
{
	struct wfile *w;
	int rc;

	lock();
	if ((w = watched(fd)) != NULL && fault_now(F_FSYNC)) {
		if (fault_stall) {
			/* outside the lock: the other threads' writes go on */
			char go[PATH_MAX + 8];

			snprintf(go, sizeof(go), "%s.go", arm_path);
			unlock();
			while (access(go, F_OK) != 0)
				usleep(1000);
			if (fault_stall_fail) {
				errno = EIO;
				return -1;
			}
			lock();
			w = watched(fd);
		} else {
			errno = EIO;
			unlock();
			return -1;
		}
	}
	rc = fn(fd);
	if (rc == 0 && w != NULL)
		synced(w);
	unlock();
	return rc;
}

int
fsync(int fd)
{
	if (unwatched(fd))
		return real_fsync(fd);
	lock();
	unlock();
	return do_sync(fd, real_fsync);
}

int
fdatasync(int fd)
{
	if (unwatched(fd))
		return real_fdatasync(fd);
	lock();
	unlock();
	return do_sync(fd, real_fdatasync);
}

int
msync(void *addr, size_t len, int flags)
{
	int rc;

	/* Which file a mapping belongs to is not tracked; a fault here hits
	 * any msync once armed (only LMDB calls it, with MDB_WRITEMAP). */
	lock();
	if (fault_op == F_FSYNC && fault_now(F_FSYNC)) {
		errno = EIO;
		unlock();
		return -1;
	}
	rc = real_msync(addr, len, flags);
	unlock();
	return rc;
}

void *
mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p;

	if (unwatched(fd))
		return real_mmap(addr, len, prot, flags, fd, off);
	lock();
	if (watched(fd) != NULL && fault_now(F_MMAP)) {
		errno = ENOMEM;
		unlock();
		return MAP_FAILED;
	}
	p = real_mmap(addr, len, prot, flags, fd, off);
	unlock();
	return p;
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off);

void *
mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap(addr, len, prot, flags, fd, off);
}
