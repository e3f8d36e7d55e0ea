/* lmdb_verify.c -- a bounds-checked walk of an LMDB file (see the header). */
#include "config.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lmdb_verify.h"

/*
 * LMDB 0.9 on-disk layout, native byte order (the file is not portable
 * between byte orders either):
 *   page header (16 bytes): pgno u64, pad u16, flags u16, lower u16,
 *     upper u16 -- on an overflow page lower/upper are one u32 page count;
 *   branch/leaf pages: after the header, (lower - 16) / 2 u16 node offsets;
 *   node (8 bytes + key + data): lo u16, hi u16, flags u16, ksize u16; on a
 *     leaf the data size is lo | hi << 16, on a branch the child page is
 *     lo | hi << 16 | flags << 32;
 *   meta page (pages 0 and 1): header, then magic u32, version u32,
 *     address u64, mapsize u64, two 48-byte database records (free, main),
 *     last_pgno u64, txnid u64;
 *   database record: pad u32 (page size, in the free one), flags u16,
 *     depth u16, branch, leaf, overflow pages, entries, root (u64 each).
 */
#define PAGEHDR		16
#define NODEHDR		8
#define DBREC		48
#define P_BRANCH	0x01
#define P_LEAF		0x02
#define P_OVERFLOW	0x04
#define P_META		0x08
#define F_BIGDATA	0x01
#define F_SUBDATA	0x02
#define F_DUPDATA	0x04
#define MDB_MAGIC	0xBEEFC0DEu
#define MDB_DATA_VERSION 1
#define P_INVALID	(~(uint64_t)0)
#define MAX_DEPTH	32

struct walk {
	const unsigned char *map;
	uint64_t size;		/* file bytes */
	unsigned psize;
	uint64_t last;		/* last page in use */
	unsigned char *seen;	/* a bit per page */
	struct lmv_stats *st;
	char *why;
	size_t whylen;
};

static uint16_t
u16(const unsigned char *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return v;
}

static uint32_t
u32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint64_t
u64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static int bad(struct walk *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
bad(struct walk *w, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->why, w->whylen, fmt, ap);
	va_end(ap);
	return 1;
}

/* The page `pgno`, checked to lie inside the file and the used range,
 * to carry its own number and not to have been reached before. */
static const unsigned char *
page_at(struct walk *w, uint64_t pgno, uint64_t npages, const char *what,
    int *rc)
{
	const unsigned char *p;
	uint64_t i;

	if (pgno < 2 || pgno > w->last || npages == 0 ||
	    npages > w->last - pgno + 1 ||
	    pgno + npages > w->size / w->psize) {
		*rc = bad(w, "%s page %llu is out of range (last page %llu, "
		    "file %llu bytes)", what, (unsigned long long)pgno,
		    (unsigned long long)w->last, (unsigned long long)w->size);
		return NULL;
	}
	p = w->map + pgno * w->psize;
	if (u64(p) != pgno) {
		*rc = bad(w, "page %llu says it is page %llu (overwritten or "
		    "zeroed)", (unsigned long long)pgno,
		    (unsigned long long)u64(p));
		return NULL;
	}
	for (i = pgno; i < pgno + npages; i++) {
		if (w->seen[i / 8] & (1u << (i % 8))) {
			*rc = bad(w, "page %llu is reached twice",
			    (unsigned long long)i);
			return NULL;
		}
		w->seen[i / 8] |= (unsigned char)(1u << (i % 8));
	}
	w->st->pages += npages;
	return p;
}

static int walk_tree(struct walk *w, const unsigned char *dbrec, bool is_main,
    const char *name);

static int
check_overflow(struct walk *w, uint64_t pgno, uint64_t dsize)
{
	const unsigned char *p;
	uint64_t n;
	int rc = 0;

	/* the header alone first: its page count says how far to mark */
	if (pgno < 2 || pgno > w->last || pgno >= w->size / w->psize)
		return bad(w, "overflow page %llu is out of range",
		    (unsigned long long)pgno);
	p = w->map + pgno * w->psize;
	if ((u16(p + 10) & (P_OVERFLOW | P_BRANCH | P_LEAF | P_META)) !=
	    P_OVERFLOW)
		return bad(w, "page %llu should be an overflow page (flags "
		    "%#x)", (unsigned long long)pgno, u16(p + 10));
	n = u32(p + 12);
	if (dsize > n * (uint64_t)w->psize - PAGEHDR)
		return bad(w, "a %llu-byte value does not fit its %llu "
		    "overflow pages at page %llu", (unsigned long long)dsize,
		    (unsigned long long)n, (unsigned long long)pgno);
	if (page_at(w, pgno, n, "overflow", &rc) == NULL)
		return rc;
	return 0;
}

/* One branch or leaf page at `level` (1 = leaves). */
static int
walk_page(struct walk *w, uint64_t pgno, unsigned level, bool is_main,
    const char *name)
{
	const unsigned char *p, *n;
	unsigned flags, lower, upper, nkeys, i, off, ksize, nflags;
	uint64_t dsize, child;
	int rc = 0;

	if ((p = page_at(w, pgno, 1, name, &rc)) == NULL)
		return rc;
	flags = u16(p + 10);
	lower = u16(p + 12);
	upper = u16(p + 14);
	if ((flags & (P_BRANCH | P_LEAF | P_OVERFLOW | P_META)) !=
	    (level > 1 ? P_BRANCH : P_LEAF))
		return bad(w, "page %llu of %s: flags %#x, expected a %s page",
		    (unsigned long long)pgno, name, flags,
		    level > 1 ? "branch" : "leaf");
	if (lower < PAGEHDR || lower > upper || upper > w->psize ||
	    (lower - PAGEHDR) % 2 != 0)
		return bad(w, "page %llu of %s: bad bounds %u..%u",
		    (unsigned long long)pgno, name, lower, upper);
	nkeys = (lower - PAGEHDR) / 2;
	if (level > 1 && nkeys == 0)
		return bad(w, "branch page %llu of %s is empty",
		    (unsigned long long)pgno, name);
	for (i = 0; i < nkeys; i++) {
		off = u16(p + PAGEHDR + 2 * i);
		if (off < upper || off + NODEHDR > w->psize)
			return bad(w, "page %llu of %s: node %u at bad offset "
			    "%u", (unsigned long long)pgno, name, i, off);
		n = p + off;
		nflags = u16(n + 4);
		ksize = u16(n + 6);
		if (off + NODEHDR + ksize > w->psize)
			return bad(w, "page %llu of %s: key of node %u runs "
			    "past the page", (unsigned long long)pgno, name, i);
		if (level > 1) {
			child = (uint64_t)u16(n) | (uint64_t)u16(n + 2) << 16 |
			    (uint64_t)nflags << 32;
			if ((rc = walk_page(w, child, level - 1, is_main,
			    name)) != 0)
				return rc;
			continue;
		}
		w->st->entries++;
		dsize = (uint64_t)u16(n) | (uint64_t)u16(n + 2) << 16;
		if (nflags & F_DUPDATA)
			return bad(w, "page %llu of %s: duplicate data, which "
			    "saker never writes", (unsigned long long)pgno, name);
		if (nflags & F_BIGDATA) {
			if (off + NODEHDR + ksize + 8 > w->psize)
				return bad(w, "page %llu of %s: node %u runs "
				    "past the page", (unsigned long long)pgno,
				    name, i);
			if ((rc = check_overflow(w, u64(n + NODEHDR + ksize),
			    dsize)) != 0)
				return rc;
			continue;
		}
		if (off + NODEHDR + ksize + dsize > w->psize)
			return bad(w, "page %llu of %s: value of node %u runs "
			    "past the page", (unsigned long long)pgno, name, i);
		if (nflags & F_SUBDATA) {
			char sub[64];

			if (!is_main || dsize != DBREC)
				return bad(w, "page %llu of %s: a misplaced "
				    "database record", (unsigned long long)pgno,
				    name);
			snprintf(sub, sizeof(sub), "database '%.*s'",
			    ksize < 32 ? (int)ksize : 32,
			    (const char *)n + NODEHDR);
			if ((rc = walk_tree(w, n + NODEHDR + ksize, false,
			    sub)) != 0)
				return rc;
		}
	}
	return 0;
}

static int
walk_tree(struct walk *w, const unsigned char *dbrec, bool is_main,
    const char *name)
{
	unsigned depth = u16(dbrec + 6);
	uint64_t root = u64(dbrec + 40);

	if (root == P_INVALID)
		return depth == 0 ? 0 : bad(w, "%s: empty with depth %u", name,
		    depth);
	if (depth == 0 || depth > MAX_DEPTH)
		return bad(w, "%s: depth %u", name, depth);
	return walk_page(w, root, depth, is_main, name);
}

int
lmv_verify(const char *path, struct lmv_stats *st, char *why, size_t whylen)
{
	struct lmv_stats dummy;
	struct walk w = { .st = st != NULL ? st : &dummy, .why = why,
	    .whylen = whylen };
	const unsigned char *m0, *m1, *meta;
	struct stat sb;
	unsigned psize;
	void *map;
	int fd, rc;

	memset(w.st, 0, sizeof(*w.st));
	why[0] = '\0';
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(why, whylen, "cannot open %s: %s", path,
		    strerror(errno));
		return -1;
	}
	if (fstat(fd, &sb) != 0) {
		snprintf(why, whylen, "cannot stat %s: %s", path,
		    strerror(errno));
		close(fd);
		return -1;
	}
	if (sb.st_size < 2 * PAGEHDR + 200) {
		close(fd);
		return 0;	/* liblmdb says "not an LMDB file" */
	}
	map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		snprintf(why, whylen, "cannot map %s: %s", path,
		    strerror(errno));
		return -1;
	}
	w.map = map;
	w.size = (uint64_t)sb.st_size;
	m0 = w.map + PAGEHDR;
	psize = u32(m0 + 24);	/* the free database's pad */
	rc = 0;
	if (!(u16(w.map + 10) & P_META) || u32(m0) != MDB_MAGIC ||
	    u32(m0 + 4) != MDB_DATA_VERSION)
		goto out;	/* liblmdb refuses it cleanly */
	if (psize < 512 || psize > 65536 || (psize & (psize - 1)) != 0 ||
	    w.size < 2 * (uint64_t)psize) {
		rc = bad(&w, "%s: bad page size %u", path, psize);
		goto out;
	}
	m1 = w.map + psize + PAGEHDR;
	if (!(u16(w.map + psize + 10) & P_META) || u32(m1) != MDB_MAGIC ||
	    u32(m1 + 4) != MDB_DATA_VERSION)
		goto out;
	/* the newer of the two meta pages is the current one */
	meta = u64(m1 + 24 + 2 * DBREC + 8) > u64(m0 + 24 + 2 * DBREC + 8) ?
	    m1 : m0;
	w.psize = psize;
	w.last = u64(meta + 24 + 2 * DBREC);
	w.st->psize = psize;
	w.st->last_pgno = w.last;
	if (w.last < 1 || w.last >= w.size / psize) {
		rc = bad(&w, "%s: the last page in use (%llu) lies beyond the "
		    "file (%llu pages): truncated", path,
		    (unsigned long long)w.last,
		    (unsigned long long)(w.size / psize));
		goto out;
	}
	if ((w.seen = calloc((size_t)(w.last / 8 + 1), 1)) == NULL) {
		snprintf(why, whylen, "out of memory");
		rc = -1;
		goto out;
	}
	if ((rc = walk_tree(&w, meta + 24, false, "the free list")) == 0)
		rc = walk_tree(&w, meta + 24 + DBREC, true, "the main database");
	if (rc > 0) {
		char tmp[512];

		snprintf(tmp, sizeof(tmp), "%s", why);
		snprintf(why, whylen, "%s is damaged: %s", path, tmp);
	}
out:
	free(w.seen);
	munmap(map, (size_t)sb.st_size);
	return rc;
}
