/* journal.c -- a store driver's redo journal (LMDB, SQLite): framing, writing, replay. */
#include "config.h"

#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "journal.h"
#include "kit.h"

#define LJ_MAGIC	0x314a4b53u	/* "SKJ1" little-endian */
#define LJ_GROW_MIN	((uint64_t)1 << 20)
#define LJ_KEEP_BUF	((size_t)4 << 20)	/* free a larger batch buffer */
#define LJ_ZERO_CHUNK	((size_t)64 << 10)

/* A call, not the address of libc's: a test's LD_PRELOAD shim
 * (tests/powerloss) must see it as it sees every other. */
static int
sys_fdatasync(int fd)
{
	return fdatasync(fd);
}

int (*lj_fdatasync)(int fd) = sys_fdatasync;

static int lj_fail(struct lj *j, int e, const char *what);

/*
 * The flush thread: one record at a time, handed over by lj_write_start()
 * and collected by lj_write_finish().  It touches nothing of struct lj but
 * the bytes it was given and the descriptor, so the owner's thread goes on
 * filling the next batch without a lock; only the hand-over and the result
 * pass through mu.
 */
struct lj_flusher {
	pthread_t tid;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int efd;		/* written when a record is done */
	int fd;			/* the journal */
	const unsigned char *p;	/* the record in flight */
	size_t n;
	uint64_t off;
	bool job;		/* a record is handed over and not done */
	bool quit;
	int err;		/* its result: 0 or errno */
	bool in_doubt;		/* written, then fdatasync failed */
};

static void *
flush_main(void *arg)
{
	struct lj_flusher *f = arg;
	const unsigned char *p;
	uint64_t off, one = 1;
	size_t n, done;
	ssize_t r;
	bool doubt;
	int e;

	pthread_mutex_lock(&f->mu);
	for (;;) {
		while (!f->job && !f->quit)
			pthread_cond_wait(&f->cv, &f->mu);
		if (!f->job)
			break;
		p = f->p;
		n = f->n;
		off = f->off;
		pthread_mutex_unlock(&f->mu);
		doubt = false;
		e = 0;
		for (done = 0; done < n; done += (size_t)r) {
			r = pwrite(f->fd, p + done, n - done, (off_t)(off + done));
			if (r < 0 && errno == EINTR)
				r = 0;
			else if (r < 0) {
				e = errno;
				break;
			} else if (r == 0) {
				e = ENOSPC;
				break;
			}
		}
		if (e == 0 && lj_fdatasync(f->fd) != 0) {
			e = errno;
			doubt = true;
		}
		pthread_mutex_lock(&f->mu);
		f->err = e;
		f->in_doubt = doubt;
		/* The eventfd is written before the job is marked done, under
		 * the lock: a finish that waited on the condition then always
		 * finds the counter set and drains it, and no stale wake-up is
		 * left for the loop. */
		while (write(f->efd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
		f->job = false;
		pthread_cond_broadcast(&f->cv);
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

int
lj_flush_start(struct lj *j)
{
	struct lj_flusher *f;
	int e;

	if (j->fl != NULL)
		return 0;
	if ((f = calloc(1, sizeof(*f))) == NULL)
		return lj_fail(j, ENOMEM, "flush thread");
	f->fd = j->fd;
	if ((f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
		e = errno;
		free(f);
		return lj_fail(j, e, "flush thread's eventfd");
	}
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	if ((e = pthread_create(&f->tid, NULL, flush_main, f)) != 0) {
		pthread_cond_destroy(&f->cv);
		pthread_mutex_destroy(&f->mu);
		close(f->efd);
		free(f);
		return lj_fail(j, e, "flush thread");
	}
	j->fl = f;
	return 0;
}

static void
flush_stop(struct lj *j)
{
	struct lj_flusher *f = j->fl;
	bool doubt;

	if (f == NULL)
		return;
	if (j->inflight)
		(void)lj_write_finish(j, &doubt);
	pthread_mutex_lock(&f->mu);
	f->quit = true;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
	pthread_join(f->tid, NULL);
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	close(f->efd);
	free(f);
	j->fl = NULL;
}

void
lj_flush_poke(struct lj *j, bool readable)
{
	uint64_t v = 1;
	ssize_t r;

	if (j->fl == NULL)
		return;
	do
		r = readable ? write(j->fl->efd, &v, sizeof(v)) :
		    read(j->fl->efd, &v, sizeof(v));
	while (r < 0 && errno == EINTR);
}

int
lj_flush_fd(const struct lj *j)
{
	return j->fl != NULL ? j->fl->efd : -1;
}

static uint64_t
rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

/*
 * The record check: a 64-bit multiply-rotate hash over 8-byte words.  It
 * guards against torn and stale records, not against an adversary, and
 * runs at several GB/s, which matters on the --sync never path.
 */
static uint64_t
lj_hash(uint64_t seed, const unsigned char *p, size_t n)
{
	const uint64_t k1 = 0x9e3779b185ebca87ull, k2 = 0xc2b2ae3d27d4eb4full;
	uint64_t h = seed ^ ((uint64_t)n * k1), w;

	for (; n >= 8; n -= 8, p += 8) {
		memcpy(&w, p, 8);
		h ^= rotl64(w * k2, 31) * k1;
		h = rotl64(h, 27) * k1 + 0x52dce729u;
	}
	w = 0;
	memcpy(&w, p, n);
	h ^= rotl64(w * k2, 31) * k1;
	h ^= h >> 33;
	h *= k2;
	h ^= h >> 29;
	h *= 0x165667b19e3779f9ull;
	h ^= h >> 32;
	return h;
}

static uint64_t
rec_check(const struct lj *j, const unsigned char *hdr,
    const unsigned char *payload, size_t len)
{
	/* covers seq and len (hdr + 8 .. + 24) and the payload */
	return lj_hash(lj_hash(0x736b6a31u ^ j->store_id, hdr + 8, 16),
	    payload, len);
}

static int
lj_fail(struct lj *j, int e, const char *what)
{
	snprintf(j->err, sizeof(j->err), "journal %s: %s", what, strerror(e));
	return e;
}

int
lj_open(struct lj *j, const char *path, bool create)
{
	struct stat sb;

	memset(j, 0, sizeof(*j));
	j->fd = open(path, (create ? O_RDWR | O_CREAT : O_RDONLY) | O_CLOEXEC,
	    0600);
	if (j->fd < 0) {
		if (errno == ENOENT && !create)
			return 0;
		return lj_fail(j, errno, "open");
	}
	if (fstat(j->fd, &sb) != 0)
		return lj_fail(j, errno, "stat");
	j->size = (uint64_t)sb.st_size;
	return 0;
}

void
lj_close(struct lj *j)
{
	flush_stop(j);
	free(j->spare);
	j->spare = NULL;
	j->spare_cap = 0;
	if (j->fd >= 0)
		close(j->fd);
	j->fd = -1;
	free(j->buf);
	j->buf = NULL;
	j->len = j->cap = 0;
}

int
lj_reserve(struct lj *j, size_t n, unsigned char **p)
{
	size_t need = LJ_HDR + j->len + n, cap;
	unsigned char *nb;

	if (need < n)
		return ENOMEM;
	if (need > j->cap) {
		cap = j->cap != 0 ? j->cap : 16384;
		while (cap < need && cap < SIZE_MAX / 2)
			cap *= 2;
		if (cap < need)
			cap = need;
		if ((nb = realloc(j->buf, cap)) == NULL)
			return ENOMEM;
		j->buf = nb;
		j->cap = cap;
	}
	*p = j->buf + LJ_HDR + j->len;
	j->len += n;
	return 0;
}

/* pwrite() (`wr`) or pread() all n bytes at off, *done of them done.  0,
 * errno, or for a short count ENOSPC (writing) or EILSEQ (reading: not a
 * whole record). */
static int
pio_all(int fd, unsigned char *p, size_t n, uint64_t off, bool wr,
    size_t *done)
{
	ssize_t r;

	for (*done = 0; *done < n; *done += (size_t)r) {
		r = wr ? pwrite(fd, p + *done, n - *done, (off_t)(off + *done)) :
		    pread(fd, p + *done, n - *done, (off_t)(off + *done));
		if (r < 0 && errno == EINTR)
			r = 0;
		else if (r < 0)
			return errno;
		else if (r == 0)
			return wr ? ENOSPC : EILSEQ;
	}
	return 0;
}

/* Zero-fill the file up to at least `want` bytes, so that records are
 * written over allocated blocks and fdatasync has no metadata to commit. */
static int
lj_grow(struct lj *j, uint64_t want)
{
	static unsigned char zeros[LJ_ZERO_CHUNK];	/* never written to */
	uint64_t size = j->size < LJ_GROW_MIN ? LJ_GROW_MIN : j->size;
	size_t n, done;
	int e;

	while (size < want)
		size *= 2;
	while (j->size < size) {
		n = size - j->size < sizeof(zeros) ? (size_t)(size - j->size) :
		    sizeof(zeros);
		e = pio_all(j->fd, zeros, n, j->size, true, &done);
		j->size += done;
		if (e != 0)
			return lj_fail(j, e, "grow");
	}
	/* Make the new size durable now rather than in the next record's
	 * fdatasync.  Not with --sync never: a durable journal over a data
	 * file that is not would bring back batches older than the data
	 * file's last (unsynced) checkpoint after a machine crash. */
	if (j->never_sync)
		return 0;
	if (lj_fdatasync(j->fd) != 0)
		return lj_fail(j, errno, "fdatasync after growing");
	j->fsyncs++;
	return 0;
}

/* Frame the current batch as record seq + 1 at off, growing the file
 * first; *n gets the record's bytes.  0, or an errno value with nothing of
 * the record written. */
static int
lj_frame(struct lj *j, size_t *n)
{
	unsigned char *h = j->buf;
	int e;

	if (j->fd < 0)
		return lj_fail(j, EBADF, "write");
	if (h == NULL && lj_reserve(j, 0, &h) != 0)
		return lj_fail(j, ENOMEM, "write");
	h = j->buf;
	*n = LJ_HDR + j->len;
	if (j->off + *n > j->size && (e = lj_grow(j, j->off + *n)) != 0)
		return e;	/* nothing of the record written */
	saker_put_le64(h, LJ_MAGIC);	/* magic + reserved */
	saker_put_le64(h + 8, j->seq + 1);
	saker_put_le64(h + 16, (uint64_t)j->len);
	saker_put_le64(h + 24, rec_check(j, h, h + LJ_HDR, j->len));
	return 0;
}

/* The record of n bytes is in the file (and synced when asked): count it,
 * empty the batch. */
static void
lj_written(struct lj *j, size_t n)
{
	j->off += n;
	j->seq++;
	j->len = 0;
	if (j->cap > LJ_KEEP_BUF) {
		free(j->buf);
		j->buf = NULL;
		j->cap = 0;
	}
}

int
lj_write(struct lj *j, bool sync, bool *in_doubt)
{
	size_t n, done;
	int e;

	*in_doubt = false;
	if (j->inflight)
		return lj_fail(j, EBUSY, "write (a record is in flight)");
	if ((e = lj_frame(j, &n)) != 0)
		return e;
	e = pio_all(j->fd, j->buf, n, j->off, true, &done);
	if (e != 0)	/* a record cut short never passes its check */
		return lj_fail(j, e, "write");
	j->unsynced = true;
	if (sync) {
		j->fsyncs++;
		if (lj_fdatasync(j->fd) != 0) {
			*in_doubt = true;
			return lj_fail(j, errno, "fdatasync");
		}
		j->unsynced = false;
	}
	lj_written(j, n);
	return 0;
}

int
lj_write_start(struct lj *j)
{
	struct lj_flusher *f = j->fl;
	unsigned char *b;
	size_t n, cap;
	int e;

	if (f == NULL)
		return lj_fail(j, EINVAL, "write (no flush thread)");
	if (j->inflight)
		return lj_fail(j, EBUSY, "write (a record is in flight)");
	if ((e = lj_frame(j, &n)) != 0)
		return e;
	pthread_mutex_lock(&f->mu);
	f->p = j->buf;
	f->n = n;
	f->off = j->off;
	f->job = true;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
	j->inflight = true;
	j->fl_n = n;
	j->fsyncs++;
	/* the next batch fills the other buffer */
	b = j->buf;
	cap = j->cap;
	j->buf = j->spare;
	j->cap = j->spare_cap;
	j->spare = b;
	j->spare_cap = cap;
	j->len = 0;
	return 0;
}

int
lj_write_finish(struct lj *j, bool *in_doubt)
{
	struct lj_flusher *f = j->fl;
	uint64_t cnt;
	int e;

	*in_doubt = false;
	if (f == NULL || !j->inflight)
		return 0;
	pthread_mutex_lock(&f->mu);
	while (f->job)
		pthread_cond_wait(&f->cv, &f->mu);
	e = f->err;
	*in_doubt = f->in_doubt;
	pthread_mutex_unlock(&f->mu);
	while (read(f->efd, &cnt, sizeof(cnt)) < 0 && errno == EINTR)
		;
	j->inflight = false;
	if (j->spare_cap > LJ_KEEP_BUF) {
		free(j->spare);
		j->spare = NULL;
		j->spare_cap = 0;
	}
	if (e != 0)	/* as lj_write(): a short record never passes */
		return lj_fail(j, e, *in_doubt ? "fdatasync" : "write");
	/* lj_written() on the counters only: the buffer that went out is
	 * the spare now, the current one holds the next batch */
	j->off += j->fl_n;
	j->seq++;
	return 0;
}

int
lj_sync(struct lj *j)
{
	if (j->fd < 0 || !j->unsynced)
		return 0;
	j->fsyncs++;
	if (lj_fdatasync(j->fd) != 0)
		return lj_fail(j, errno, "fdatasync");
	j->unsynced = false;
	return 0;
}

/*
 * Read the record header at `off`.  Returns 1 for a plausible header with
 * the expected seq (its payload length in *len), 0 when the journal ends
 * here, or -errno.
 */
static int
rec_head(struct lj *j, uint64_t off, uint64_t want_seq, unsigned char *h,
    uint64_t *len)
{
	size_t got;
	int e;

	if (off + LJ_HDR > j->size)
		return 0;
	if ((e = pio_all(j->fd, h, LJ_HDR, off, false, &got)) != 0)
		return e == EILSEQ ? 0 : -e;
	if (saker_get_le64(h) != LJ_MAGIC || saker_get_le64(h + 8) != want_seq)
		return 0;
	*len = saker_get_le64(h + 16);
	if (*len > j->size - off - LJ_HDR || *len > SIZE_MAX - LJ_HDR)
		return 0;
	return 1;
}

int
lj_replay(struct lj *j, uint64_t applied, uint64_t upto,
    int (*fn)(void *arg, const unsigned char *payload, size_t len), void *arg)
{
	unsigned char h[LJ_HDR], *p = NULL;
	uint64_t off = 0, seq = applied, len = 0;
	size_t got;
	int r = 0;

	memset(h, 0, sizeof(h));
	j->seq = applied;
	j->off = 0;
	if (j->fd < 0)
		return 0;
	while (off < upto) {
		r = rec_head(j, off, seq + 1, h, &len);
		if (r < 0) {
			r = lj_fail(j, -r, "read");
			break;
		}
		if (r == 0 && off == 0 && saker_get_le64(h) == LJ_MAGIC &&
		    saker_get_le64(h + 8) > applied + 1 && saker_get_le64(h + 16) <=
		    j->size - LJ_HDR) {
			/* a whole record from the future: another store's? */
			free(p);
			p = malloc(saker_get_le64(h + 16) + 1);
			if (p != NULL && pio_all(j->fd, p, saker_get_le64(h + 16),
			    LJ_HDR, false, &got) == 0 && saker_get_le64(h + 24) ==
			    rec_check(j, h, p, saker_get_le64(h + 16))) {
				snprintf(j->err, sizeof(j->err), "journal starts "
				    "at batch %llu but the data file holds only "
				    "batches up to %llu: they do not belong "
				    "together", (unsigned long long)saker_get_le64(h + 8),
				    (unsigned long long)applied);
				free(p);
				return EILSEQ;
			}
			r = 0;
		}
		if (r == 0)
			break;
		free(p);
		if ((p = malloc(len + 1)) == NULL) {
			r = lj_fail(j, ENOMEM, "replay");
			break;
		}
		if ((r = pio_all(j->fd, p, len, off + LJ_HDR, false, &got)) != 0) {
			r = r == EILSEQ ? 0 : lj_fail(j, r, "read");
			break;
		}
		if (saker_get_le64(h + 24) != rec_check(j, h, p, len))
			break;		/* torn: the batch was never acknowledged */
		if ((r = fn(arg, p, len)) != 0)
			break;
		seq++;
		off += LJ_HDR + len;
		j->seq = seq;
		j->off = off;
	}
	free(p);
	return r;
}

static int
pending_fn(void *arg, const unsigned char *payload, size_t len)
{
	(void)payload;
	(void)len;
	*(bool *)arg = true;
	return 1;	/* one is enough */
}

int
lj_pending(struct lj *j, uint64_t applied, bool *pending)
{
	uint64_t seq = j->seq, off = j->off;
	int r;

	*pending = false;
	r = lj_replay(j, applied, UINT64_MAX, pending_fn, pending);
	j->seq = seq;
	j->off = off;
	return r == 1 ? 0 : r;
}
