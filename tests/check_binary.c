/* check_binary.c -- raw-byte conformance tests of the binary protocol, the
 * meta commands and --auth-file against a real sakerd. */
#include "config.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <check.h>
#include <crypt.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

static struct tl_server *srv;
static int c = -1;

static void
setup(void)
{
	srv = tl_server_start("memory", NULL);
	c = tl_connect(srv->port);
}

static void
teardown(void)
{
	if (c != -1)
		close(c);
	c = -1;
	if (srv != NULL && srv->pid > 0)
		tl_server_stop(srv);
	tl_server_free(srv);
	srv = NULL;
}

/* ---------------------------------------------------- binary packets */

enum {
	OP_GET = 0x00, OP_SET = 0x01, OP_DELETE = 0x04, OP_QUIT = 0x07, OP_FLUSH = 0x08,
	OP_GETQ = 0x09, OP_NOOP = 0x0a, OP_VERSION = 0x0b, OP_GETK = 0x0c, OP_GETKQ = 0x0d,
	OP_STAT = 0x10, OP_SETQ = 0x11, OP_DELETEQ = 0x14, OP_QUITQ = 0x17,
	OP_SASL_LIST = 0x20, OP_SASL_AUTH = 0x21
};

struct pkt {
	unsigned char magic, opcode, extlen, datatype;
	uint16_t keylen, status;
	uint32_t bodylen, opaque;
	uint64_t cas;
	unsigned char ext[256];
	char key[65536];
	char *val;
	size_t vallen;
};

static void
put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

static void
put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static uint32_t
get32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A request packet, malloc'd, length in *lenp. */
static unsigned char *
mkreq(uint8_t op, const char *key, size_t keylen, const void *ext, size_t extlen,
    const void *val, size_t vallen, uint32_t opaque, size_t *lenp)
{
	size_t body = keylen + extlen + vallen;
	unsigned char *p = calloc(1, 24 + body);

	p[0] = 0x80;
	p[1] = op;
	put16(p + 2, (uint16_t)keylen);
	p[4] = (unsigned char)extlen;
	put32(p + 8, (uint32_t)body);
	put32(p + 12, opaque);
	if (extlen)
		memcpy(p + 24, ext, extlen);
	if (keylen)
		memcpy(p + 24 + extlen, key, keylen);
	if (vallen)
		memcpy(p + 24 + extlen + keylen, val, vallen);
	*lenp = 24 + body;
	return p;
}

static void
breq(int fd, uint8_t op, const char *key, const void *ext, size_t extlen,
    const void *val, size_t vallen, uint32_t opaque)
{
	size_t n;
	unsigned char *p = mkreq(op, key, key ? strlen(key) : 0, ext, extlen, val,
	    vallen, opaque, &n);

	mustsend(fd, p, n);
	free(p);
}

/* Set: flags and exptime in the extras. */
static void
bset(int fd, uint8_t op, const char *key, uint32_t flags, const char *val,
    uint32_t opaque)
{
	unsigned char ext[8];

	put32(ext, flags);
	put32(ext + 4, 0);
	breq(fd, op, key, ext, 8, val, strlen(val), opaque);
}

/* Read one response packet (fails the test on timeout or EOF). */
#define bread(fd, p) bread_(__FILE__, __LINE__, (fd), (p))
static void
bread_(const char *file, int line, int fd, struct pkt *p)
{
	unsigned char h[24];
	size_t body;
	unsigned char *b;

	if (tl_readn(fd, h, 24, tl_timeout_ms) != 24)
		tl_fail(file, line, "no binary response header");
	p->magic = h[0];
	p->opcode = h[1];
	p->keylen = (uint16_t)(h[2] << 8 | h[3]);
	p->extlen = h[4];
	p->datatype = h[5];
	p->status = (uint16_t)(h[6] << 8 | h[7]);
	p->bodylen = get32(h + 8);
	p->opaque = get32(h + 12);
	p->cas = (uint64_t)get32(h + 16) << 32 | get32(h + 20);
	body = p->bodylen;
	if (p->magic != 0x81)
		tl_fail(file, line, "response magic %#x", p->magic);
	if ((size_t)p->keylen + p->extlen > body)
		tl_fail(file, line, "key and extras longer than the body");
	b = malloc(body + 1);
	if (body > 0 && tl_readn(fd, b, body, tl_timeout_ms) != (ssize_t)body)
		tl_fail(file, line, "short binary response body");
	memcpy(p->ext, b, p->extlen);
	memcpy(p->key, b + p->extlen, p->keylen);
	p->key[p->keylen] = '\0';
	p->vallen = body - p->keylen - p->extlen;
	free(p->val);
	p->val = malloc(p->vallen + 1);
	memcpy(p->val, b + p->extlen + p->keylen, p->vallen);
	p->val[p->vallen] = '\0';
	free(b);
}

/*
 * Expect one response: opcode, status, opaque, key (NULL: none) and value
 * (NULL: any).  CAS is always zero.
 */
#define bexpect(fd, op, st, opq, key, val) \
	bexpect_(__FILE__, __LINE__, (fd), (op), (st), (opq), (key), (val))
static void
bexpect_(const char *file, int line, int fd, uint8_t op, uint16_t status,
    uint32_t opaque, const char *key, const char *val)
{
	struct pkt p = { 0 };

	bread_(file, line, fd, &p);
	if (p.opcode != op || p.status != status || p.opaque != opaque)
		tl_fail(file, line, "got opcode %#x status %#x opaque %u (val \"%s\"), "
		    "want %#x %#x %u", p.opcode, p.status, p.opaque, p.val, op, status,
		    opaque);
	if (p.cas != 0)
		tl_fail(file, line, "CAS %llu, want 0", (unsigned long long)p.cas);
	if (key == NULL ? p.keylen != 0 : strcmp(p.key, key) != 0)
		tl_fail(file, line, "key \"%s\", want \"%s\"", p.key, key ? key : "");
	if (val != NULL && strcmp(p.val, val) != 0)
		tl_fail(file, line, "value \"%s\", want \"%s\"", p.val, val);
	free(p.val);
}

/* Expect a get hit with its flags. */
#define bhit(fd, op, opq, key, flags, val) \
	bhit_(__FILE__, __LINE__, (fd), (op), (opq), (key), (flags), (val))
static void
bhit_(const char *file, int line, int fd, uint8_t op, uint32_t opaque,
    const char *key, uint32_t flags, const char *val)
{
	struct pkt p = { 0 };

	bread_(file, line, fd, &p);
	if (p.opcode != op || p.status != 0 || p.opaque != opaque)
		tl_fail(file, line, "got opcode %#x status %#x opaque %u (\"%s\"), "
		    "want a hit %#x opaque %u", p.opcode, p.status, p.opaque, p.val, op,
		    opaque);
	if (p.extlen != 4 || get32(p.ext) != flags)
		tl_fail(file, line, "extras %u bytes, flags %u; want 4, %u", p.extlen,
		    p.extlen == 4 ? get32(p.ext) : 0, flags);
	if (key == NULL ? p.keylen != 0 : strcmp(p.key, key) != 0)
		tl_fail(file, line, "key \"%s\", want \"%s\"", p.key, key ? key : "");
	if (strcmp(p.val, val) != 0)
		tl_fail(file, line, "value \"%s\", want \"%s\"", p.val, val);
	if (p.cas != 0)
		tl_fail(file, line, "CAS %llu, want 0", (unsigned long long)p.cas);
	free(p.val);
}

/* ------------------------------------------------------ binary tests */

/* Retries (issue 37): an abort with a delay keeps the item out of sight
 * until it is due; Touch (0x1c, 4-byte exptime extras) extends the lease
 * of the open item, and is "not found" when none is held. */
START_TEST(test_bin_abort_delay_touch)
{
	unsigned char ext[4];
	int64_t t0, waited;

	put32(ext, 0);
	breq(c, 0x1c, "rq", ext, 4, NULL, 0, 1);
	bexpect(c, 0x1c, 0x01, 1, NULL, "no open item on the queue to touch");
	bset(c, OP_SET, "rq", 9, "job", 2);
	bexpect(c, OP_SET, 0, 2, NULL, NULL);
	breq(c, OP_GET, "rq/open", NULL, 0, NULL, 0, 3);
	bhit(c, OP_GET, 3, NULL, 9, "job");
	put32(ext, 60);
	breq(c, 0x1c, "rq", ext, 4, NULL, 0, 4);
	bexpect(c, 0x1c, 0, 4, NULL, "");
	/* bad extras and a bad name are refused, not guessed at */
	breq(c, 0x1c, "rq", NULL, 0, NULL, 0, 5);
	bexpect(c, 0x1c, 0x04, 5, NULL, NULL);
	breq(c, 0x1c, "r q", ext, 4, NULL, 0, 6);
	bexpect(c, 0x1c, 0x04, 6, NULL, NULL);
	/* abort with a delay: a miss reply, and nothing to get meanwhile */
	t0 = tl_now_ms();
	breq(c, OP_GET, "rq/abort/delay=400", NULL, 0, NULL, 0, 7);
	bexpect(c, OP_GET, 0x01, 7, NULL, NULL);
	breq(c, OP_GET, "rq", NULL, 0, NULL, 0, 8);
	bexpect(c, OP_GET, 0x01, 8, NULL, NULL);
	breq(c, OP_GET, "rq/open/t=5000", NULL, 0, NULL, 0, 9);
	bhit(c, OP_GET, 9, NULL, 9, "job");
	waited = tl_now_ms() - t0;
	ck_assert_msg(waited >= 400, "served after %lld ms, before its delay",
	    (long long)waited);
	ck_assert_msg(waited < tl_slow(2000), "served after %lld ms",
	    (long long)waited);
	breq(c, OP_GET, "rq/touch/open", NULL, 0, NULL, 0, 10);
	bexpect(c, OP_GET, 0x04, 10, NULL, "bad option combination");
	breq(c, OP_GET, "rq/close", NULL, 0, NULL, 0, 11);
	bexpect(c, OP_GET, 0x01, 11, NULL, NULL);
}
END_TEST

START_TEST(test_bin_set_get)
{
	bset(c, OP_SET, "q", 0xdeadbeefu, "hello", 11);
	bexpect(c, OP_SET, 0, 11, NULL, "");
	bset(c, OP_SET, "q", 7, "world", 12);
	bexpect(c, OP_SET, 0, 12, NULL, "");
	breq(c, OP_GETK, "q", NULL, 0, NULL, 0, 13);
	bhit(c, OP_GETK, 13, "q", 0xdeadbeefu, "hello");
	breq(c, OP_GET, "q", NULL, 0, NULL, 0, 14);
	bhit(c, OP_GET, 14, NULL, 7, "world");
	/* misses: GetK echoes the key, Get says "Not found" */
	breq(c, OP_GETK, "q", NULL, 0, NULL, 0, 15);
	bexpect(c, OP_GETK, 1, 15, "q", "");
	breq(c, OP_GET, "q", NULL, 0, NULL, 0, 16);
	bexpect(c, OP_GET, 1, 16, NULL, "Not found");
	/* and the text protocol sees the same queues */
	bset(c, OP_SET, "shared", 3, "x", 17);
	bexpect(c, OP_SET, 0, 17, NULL, "");
	{
		int t = tl_connect(srv->port);
		size_t len;
		uint32_t flags;
		char *v = tl_getn(t, "shared", &len, &flags);

		ck_assert_str_eq(v, "x");
		ck_assert_uint_eq(flags, 3);
		free(v);
		tl_set(t, "shared", "y");
		close(t);
	}
	breq(c, OP_GETK, "shared", NULL, 0, NULL, 0, 18);
	bhit(c, OP_GETK, 18, "shared", 0, "y");
}
END_TEST

START_TEST(test_bin_key_echo_options)
{
	bset(c, OP_SET, "jobs", 0, "a", 1);
	bexpect(c, OP_SET, 0, 1, NULL, "");
	breq(c, OP_GETK, "jobs/t=100/open", NULL, 0, NULL, 0, 2);
	bhit(c, OP_GETK, 2, "jobs/t=100/open", 0, "a");
	/* close alone fetches nothing: a miss with the key as sent */
	breq(c, OP_GETK, "jobs/close", NULL, 0, NULL, 0, 3);
	bexpect(c, OP_GETK, 1, 3, "jobs/close", "");
	{
		int t = tl_connect(srv->port);

		ck_assert_int_eq(tl_stat(t, "queue_jobs_open_transactions"), 0);
		close(t);
	}
}
END_TEST

START_TEST(test_bin_quiet)
{
	/* SetQ says nothing on success; errors still answer */
	bset(c, OP_SETQ, "a", 1, "1", 1);
	bset(c, OP_SETQ, "c", 3, "3", 2);
	bset(c, OP_SETQ, ".bad", 0, "x", 3);
	bexpect(c, OP_SETQ, 4, 3, NULL, "bad queue name");
	/* GetQ/GetKQ: hits in order, misses silent, Noop ends it */
	breq(c, OP_GETKQ, "a", NULL, 0, NULL, 0, 10);
	breq(c, OP_GETKQ, "b", NULL, 0, NULL, 0, 11);
	breq(c, OP_GETQ, "c", NULL, 0, NULL, 0, 12);
	breq(c, OP_GETQ, "d", NULL, 0, NULL, 0, 13);
	breq(c, OP_NOOP, NULL, NULL, 0, NULL, 0, 14);
	bhit(c, OP_GETKQ, 10, "a", 1, "1");
	bhit(c, OP_GETQ, 12, NULL, 3, "3");
	bexpect(c, OP_NOOP, 0, 14, NULL, "");
	/* DeleteQ: silent when deleted, "not found" reported */
	breq(c, OP_DELETEQ, "a", NULL, 0, NULL, 0, 20);
	breq(c, OP_DELETEQ, "zz", NULL, 0, NULL, 0, 21);
	breq(c, OP_NOOP, NULL, NULL, 0, NULL, 0, 22);
	bexpect(c, OP_DELETEQ, 1, 21, NULL, "Not found");
	bexpect(c, OP_NOOP, 0, 22, NULL, "");
	ck_assert(tl_quiet(c, 100));
}
END_TEST

/* Quiet gets ended by a plain GetK: every reply in request order. */
START_TEST(test_bin_multiget_getk_last)
{
	bset(c, OP_SETQ, "x", 0, "X", 1);
	bset(c, OP_SETQ, "z", 0, "Z", 2);
	breq(c, OP_GETKQ, "w", NULL, 0, NULL, 0, 3);
	breq(c, OP_GETKQ, "x", NULL, 0, NULL, 0, 4);
	breq(c, OP_GETKQ, "y", NULL, 0, NULL, 0, 5);
	breq(c, OP_GETK, "z", NULL, 0, NULL, 0, 6);
	breq(c, OP_GETK, "w", NULL, 0, NULL, 0, 7);
	bhit(c, OP_GETKQ, 4, "x", 0, "X");
	bhit(c, OP_GETK, 6, "z", 0, "Z");
	bexpect(c, OP_GETK, 1, 7, "w", "");
	ck_assert(tl_quiet(c, 100));
}
END_TEST

/* A quiet multi-get with t= waits on all its queues at once. */
START_TEST(test_bin_multiget_waits_on_all)
{
	int t = tl_connect(srv->port);
	int64_t t0 = tl_now_ms();

	breq(c, OP_GETKQ, "ma/t=5000", NULL, 0, NULL, 0, 1);
	breq(c, OP_GETKQ, "mb/t=5000", NULL, 0, NULL, 0, 2);
	breq(c, OP_GETKQ, "mc/t=5000", NULL, 0, NULL, 0, 3);
	breq(c, OP_NOOP, NULL, NULL, 0, NULL, 0, 4);
	tl_wait_stat(t, "queue_mc_waiters", 1, 2000);
	ck_assert_int_eq(tl_stat(t, "queue_ma_waiters"), 1);
	ck_assert_int_eq(tl_stat(t, "queue_mb_waiters"), 1);
	tl_set(t, "mb", "B");
	bhit(c, OP_GETKQ, 2, "mb/t=5000", 0, "B");
	bexpect(c, OP_NOOP, 0, 4, NULL, "");
	ck_assert_int_lt(tl_now_ms() - t0, 4000);
	/* the wait is over on every queue; those that never got an item
	 * were never created (a get creates no queue) */
	ck_assert_int_eq(tl_stat(t, "queue_mb_waiters"), 0);
	ck_assert_int_eq(tl_stat(t, "queue_ma_waiters"), -1);
	ck_assert_int_eq(tl_stat(t, "queue_mc_waiters"), -1);
	/* the connection goes on */
	breq(c, OP_VERSION, NULL, NULL, 0, NULL, 0, 5);
	bexpect(c, OP_VERSION, 0, 5, NULL, PACKAGE_VERSION);
	close(t);
}
END_TEST

/* Woken by a quiet key, the final GetK still answers its miss after it. */
START_TEST(test_bin_multiget_wait_getk_last)
{
	int t = tl_connect(srv->port);

	breq(c, OP_GETKQ, "wa/t=5000", NULL, 0, NULL, 0, 1);
	breq(c, OP_GETK, "wb/t=5000", NULL, 0, NULL, 0, 2);
	tl_wait_stat(t, "queue_wb_waiters", 1, 2000);
	tl_set(t, "wa", "A");
	bhit(c, OP_GETKQ, 1, "wa/t=5000", 0, "A");
	bexpect(c, OP_GETK, 1, 2, "wb/t=5000", "");
	/* and a single Get is woken with its own opcode and opaque */
	breq(c, OP_GET, "wc/t=5000", NULL, 0, NULL, 0, 9);
	tl_wait_stat(t, "queue_wc_waiters", 1, 2000);
	tl_setn(t, "wc", 42, 0, "C", 1);
	bhit(c, OP_GET, 9, NULL, 42, "C");
	close(t);
}
END_TEST

START_TEST(test_bin_multiget_timeout)
{
	int64_t t0 = tl_now_ms(), dt;

	breq(c, OP_GETKQ, "ta/t=200", NULL, 0, NULL, 0, 1);
	breq(c, OP_GETQ, "tb/t=300", NULL, 0, NULL, 0, 2);
	breq(c, OP_NOOP, NULL, NULL, 0, NULL, 0, 3);
	bexpect(c, OP_NOOP, 0, 3, NULL, "");
	dt = tl_now_ms() - t0;
	ck_assert_msg(dt >= 280 && dt < 3000, "waited %lld ms, want the largest t=",
	    (long long)dt);
	ck_assert(tl_quiet(c, 100));
}
END_TEST

START_TEST(test_bin_errors)
{
	char key[260];
	unsigned char ext[8] = { 0 };

	/* unknown opcode */
	breq(c, 0x33, NULL, NULL, 0, NULL, 0, 1);
	bexpect(c, 0x33, 0x81, 1, NULL, "Unknown command");
	/* SASL without --auth-file is unknown too */
	breq(c, OP_SASL_LIST, NULL, NULL, 0, NULL, 0, 2);
	bexpect(c, OP_SASL_LIST, 0x81, 2, NULL, NULL);
	/* 250-byte keys work; 251 do not */
	memset(key, 'k', 250);
	key[250] = '\0';
	bset(c, OP_SET, key, 0, "v", 3);
	bexpect(c, OP_SET, 0, 3, NULL, "");
	breq(c, OP_GETK, key, NULL, 0, NULL, 0, 4);
	bhit(c, OP_GETK, 4, key, 0, "v");
	key[250] = 'k';
	key[251] = '\0';
	bset(c, OP_SET, key, 0, "v", 5);
	bexpect(c, OP_SET, 4, 5, NULL, NULL);
	breq(c, OP_GETK, key, NULL, 0, NULL, 0, 6);
	bexpect(c, OP_GETK, 4, 6, NULL, NULL);
	/* spaces are allowed in binary keys, but not in queue names */
	bset(c, OP_SET, "a b", 0, "v", 7);
	bexpect(c, OP_SET, 4, 7, NULL, "bad queue name");
	breq(c, OP_GETK, "a b", NULL, 0, NULL, 0, 8);
	bexpect(c, OP_GETK, 4, 8, NULL, "bad queue name");
	/* options are checked as in text */
	breq(c, OP_GETK, "q/bogus", NULL, 0, NULL, 0, 9);
	bexpect(c, OP_GETK, 4, 9, NULL, "unknown option");
	breq(c, OP_GETK, "q/peek/open", NULL, 0, NULL, 0, 10);
	bexpect(c, OP_GETK, 4, 10, NULL, "bad option combination");
	/* a set without its 8 bytes of extras */
	breq(c, OP_SET, "q", NULL, 0, "v", 1, 11);
	bexpect(c, OP_SET, 4, 11, NULL, NULL);
	/* a get with a value */
	breq(c, OP_GET, "q", NULL, 0, "v", 1, 12);
	bexpect(c, OP_GET, 4, 12, NULL, NULL);
	/* a delayed set; a bad delay */
	bset(c, OP_SET, "q/delay=abc", 0, "v", 13);
	bexpect(c, OP_SET, 4, 13, NULL, "bad command line format");
	/* an open item blocks a plain get, as in text */
	bset(c, OP_SET, "o", 0, "1", 14);
	bexpect(c, OP_SET, 0, 14, NULL, "");
	breq(c, OP_GETK, "o/open", NULL, 0, NULL, 0, 15);
	bhit(c, OP_GETK, 15, "o/open", 0, "1");
	breq(c, OP_GETK, "o", NULL, 0, NULL, 0, 16);
	bexpect(c, OP_GETK, 4, 16, NULL, "close or abort the open item first");
	/* CAS never matches a non-zero value */
	put32(ext, 0);
	{
		size_t n;
		unsigned char *p = mkreq(OP_SET, "o", 1, ext, 8, "v", 1, 17, &n);
		p[23] = 5;     /* CAS = 5 */
		mustsend(c, p, n);
		free(p);
	}
	bexpect(c, OP_SET, 2, 17, NULL, NULL);
	breq(c, OP_NOOP, NULL, NULL, 0, NULL, 0, 18);
	bexpect(c, OP_NOOP, 0, 18, NULL, "");
}
END_TEST

START_TEST(test_bin_too_large)
{
	struct tl_server *s = tl_server_start("memory", "--max-item-size", "1k", NULL);
	int b = tl_connect(s->port);
	char big[2000];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	bset(b, OP_SET, "q", 0, big, 1);
	bexpect(b, OP_SET, 3, 1, NULL, NULL);
	bset(b, OP_SETQ, "q", 0, big, 2);
	bexpect(b, OP_SETQ, 3, 2, NULL, NULL);
	/* the body was skipped: the stream is still in step */
	bset(b, OP_SET, "q", 0, "ok", 3);
	bexpect(b, OP_SET, 0, 3, NULL, "");
	breq(b, OP_GETK, "q", NULL, 0, NULL, 0, 4);
	bhit(b, OP_GETK, 4, "q", 0, "ok");
	close(b);
	tl_server_stop(s);
	tl_server_free(s);
}
END_TEST

/* A header that cannot be trusted closes that connection only. */
START_TEST(test_bin_bad_header)
{
	int b = tl_connect(srv->port), t = tl_connect(srv->port);
	unsigned char bad[24] = { 0 };

	breq(b, OP_NOOP, NULL, NULL, 0, NULL, 0, 1);
	bad[0] = 0x42;
	mustsend(b, bad, sizeof(bad));
	bexpect(b, OP_NOOP, 0, 1, NULL, "");
	tl_expect_closed(b, 2000);
	close(b);
	/* key longer than the body */
	b = tl_connect(srv->port);
	memset(bad, 0, sizeof(bad));
	bad[0] = 0x80;
	bad[1] = OP_GET;
	put16(bad + 2, 10);
	put32(bad + 8, 5);
	mustsend(b, bad, sizeof(bad));
	tl_expect_closed(b, 2000);
	close(b);
	/* everybody else goes on */
	breq(c, OP_NOOP, NULL, NULL, 0, NULL, 0, 2);
	bexpect(c, OP_NOOP, 0, 2, NULL, "");
	tl_set(t, "still", "up");
	tl_ckget(t, "still", "up");
	close(t);
}
END_TEST

START_TEST(test_bin_stats_version_flush_quit)
{
	struct pkt p = { 0 };
	bool pid = false, conns = false;
	int n = 0, b;

	breq(c, OP_STAT, NULL, NULL, 0, NULL, 0, 77);
	for (;;) {
		bread(c, &p);
		ck_assert_uint_eq(p.opcode, OP_STAT);
		ck_assert_uint_eq(p.opaque, 77);
		ck_assert_uint_eq(p.status, 0);
		if (p.keylen == 0)
			break;
		if (strcmp(p.key, "pid") == 0)
			pid = atoi(p.val) == srv->pid;
		if (strcmp(p.key, "curr_connections") == 0)
			conns = atoi(p.val) >= 1;
		ck_assert_int_lt(++n, 10000);
	}
	free(p.val);
	ck_assert(pid && conns);
	breq(c, OP_VERSION, NULL, NULL, 0, NULL, 0, 1);
	bexpect(c, OP_VERSION, 0, 1, NULL, PACKAGE_VERSION);
	bset(c, OP_SET, "f", 0, "x", 2);
	bexpect(c, OP_SET, 0, 2, NULL, "");
	breq(c, OP_FLUSH, NULL, NULL, 0, NULL, 0, 3);
	bexpect(c, OP_FLUSH, 0, 3, NULL, "");
	breq(c, OP_GETK, "f", NULL, 0, NULL, 0, 4);
	bexpect(c, OP_GETK, 1, 4, "f", "");
	breq(c, OP_QUIT, NULL, NULL, 0, NULL, 0, 5);
	bexpect(c, OP_QUIT, 0, 5, NULL, "");
	tl_expect_closed(c, 2000);
	close(c);
	c = -1;
	b = tl_connect(srv->port);
	breq(b, OP_QUITQ, NULL, NULL, 0, NULL, 0, 6);
	tl_expect_closed(b, 2000);
	close(b);
}
END_TEST

/* The reliable-read cycle over binary: open, close, abort. */
START_TEST(test_bin_open_close)
{
	int t = tl_connect(srv->port);

	bset(c, OP_SETQ, "r", 0, "one", 1);
	bset(c, OP_SETQ, "r", 0, "two", 2);
	breq(c, OP_GETK, "r/open", NULL, 0, NULL, 0, 3);
	bhit(c, OP_GETK, 3, "r/open", 0, "one");
	ck_assert_int_eq(tl_stat(t, "queue_r_open_transactions"), 1);
	breq(c, OP_GETK, "r/close/open", NULL, 0, NULL, 0, 4);
	bhit(c, OP_GETK, 4, "r/close/open", 0, "two");
	breq(c, OP_GETK, "r/abort", NULL, 0, NULL, 0, 5);
	bexpect(c, OP_GETK, 1, 5, "r/abort", "");
	breq(c, OP_GETK, "r", NULL, 0, NULL, 0, 6);
	bhit(c, OP_GETK, 6, "r", 0, "two");
	ck_assert_int_eq(tl_stat(t, "queue_r_items"), 0);
	/* a disconnect returns an open item */
	bset(c, OP_SETQ, "r", 0, "three", 7);
	breq(c, OP_GETK, "r/open", NULL, 0, NULL, 0, 8);
	bhit(c, OP_GETK, 8, "r/open", 0, "three");
	close(c);
	c = -1;
	tl_wait_stat(t, "queue_r_items", 1, 2000);
	tl_ckget(t, "r", "three");
	close(t);
}
END_TEST

START_TEST(test_bin_delayed_and_pending_disconnect)
{
	int64_t t0 = tl_now_ms();
	int b;

	bset(c, OP_SET, "d/delay=200", 0, "later", 1);
	bexpect(c, OP_SET, 0, 1, NULL, "");
	breq(c, OP_GETK, "d", NULL, 0, NULL, 0, 2);
	bexpect(c, OP_GETK, 1, 2, "d", "");
	breq(c, OP_GETK, "d/t=3000", NULL, 0, NULL, 0, 3);
	bhit(c, OP_GETK, 3, "d/t=3000", 0, "later");
	ck_assert_int_lt(tl_now_ms() - t0, 2500);
	/* quiet gets never ended, then a disconnect: nothing is lost */
	bset(c, OP_SET, "p", 0, "kept", 4);
	bexpect(c, OP_SET, 0, 4, NULL, "");
	b = tl_connect(srv->port);
	breq(b, OP_GETKQ, "zz", NULL, 0, NULL, 0, 1);
	close(b);
	b = tl_connect(srv->port);
	breq(b, OP_GETKQ, "p/t=5000", NULL, 0, NULL, 0, 1);
	breq(b, OP_GETKQ, "pp/t=5000", NULL, 0, NULL, 0, 2);
	close(b);
	breq(c, OP_GETK, "p", NULL, 0, NULL, 0, 5);
	bhit(c, OP_GETK, 5, "p", 0, "kept");
}
END_TEST

/* ----------------------------------------------------------- meta */

START_TEST(test_meta_basic)
{
	mustsends(c, "ms m1 3 F9 T0\r\nabc\r\n");
	ckresp(c, "HD\r\n");
	mustsends(c, "ms m1 2 q\r\nde\r\nms m1 S2 O5 k c\r\nfg\r\n");
	ckresp(c, "HD km1 O5 c0\r\n");
	mustsends(c, "mg m1 v f k s t c O12\r\n");
	ckresp(c, "VA 3 f9 s3 t-1 c0 km1 O12\r\nabc\r\n");
	/* without v: HD, and the item is taken all the same */
	mustsends(c, "mg m1 f\r\n");
	ckresp(c, "HD f0\r\n");
	mustsends(c, "mg m1/peek v\r\n");
	ckresp(c, "VA 2\r\nfg\r\n");
	mustsends(c, "mg m1 v\r\n");
	ckresp(c, "VA 2\r\nfg\r\n");
	/* misses: EN with the echoed flags; q hides it */
	mustsends(c, "mg m1 v k Oab\r\nmg m1 v q\r\nmn\r\n");
	ckresp(c, "EN km1 Oab\r\nMN\r\n");
	/* a TTL */
	mustsends(c, "ms tt 1 T100\r\nx\r\nmg tt t v\r\n");
	ckresp(c, "HD\r\nVA 1 t100\r\nx\r\n");
	/* md */
	mustsends(c, "md m1\r\nmd m1\r\nmd m1 q\r\nmn\r\n");
	ckresp(c, "HD\r\nNF\r\nNF\r\nMN\r\n");
	/* key options and echo */
	mustsends(c, "ms jobs 1\r\nj\r\nmg jobs/t=100/open k v\r\nmg jobs/close k\r\n");
	ckresp(c, "HD\r\nVA 1 kjobs/t=100/open\r\nj\r\nEN kjobs/close\r\n");
	/* a delayed set */
	mustsends(c, "ms dl/delay=100000 1\r\nx\r\nmg dl v\r\n");
	ckresp(c, "HD\r\nEN\r\n");
}
END_TEST

START_TEST(test_meta_base64)
{
	/* "b64q" = YjY0cQ== */
	mustsends(c, "ms YjY0cQ== 2 b\r\nhi\r\n");
	ckresp(c, "HD\r\n");
	{
		int t = tl_connect(srv->port);

		tl_ckget(t, "b64q", "hi");
		close(t);
	}
	mustsends(c, "ms YjY0cQ== 2 b k\r\nho\r\nmg YjY0cQ== b k v\r\n");
	ckresp(c, "HD kYjY0cQ== b\r\nVA 2 kYjY0cQ== b\r\nho\r\n");
	mustsends(c, "mg !!!! b v\r\n");
	ckresp(c, "CLIENT_ERROR error decoding key\r\n");
}
END_TEST

START_TEST(test_meta_multiget)
{
	int t = tl_connect(srv->port);

	tl_set(t, "x", "X");
	tl_set(t, "z", "Z");
	/* quiet lines and mn: hits in order, misses silent */
	mustsends(c, "mg w v q k\r\nmg x v q k\r\nmg y v q k\r\nmg z v q k\r\nmn\r\n");
	ckresp(c, "VA 1 kx\r\nX\r\nVA 1 kz\r\nZ\r\nMN\r\n");
	/* with t= the lines wait on every queue at once */
	mustsends(c, "mg ma/t=5000 v q k\r\nmg mb/t=5000 v q k\r\nmn\r\n");
	tl_wait_stat(t, "queue_mb_waiters", 1, 2000);
	ck_assert_int_eq(tl_stat(t, "queue_ma_waiters"), 1);
	tl_set(t, "mb", "B");
	ckresp(c, "VA 1 kmb/t=5000\r\nB\r\nMN\r\n");
	/* a plain mg ends the group and reports its own miss */
	mustsends(c, "mg na/t=5000 v q k\r\nmg nb/t=5000 v k\r\n");
	tl_wait_stat(t, "queue_nb_waiters", 1, 2000);
	tl_set(t, "na", "A");
	ckresp(c, "VA 1 kna/t=5000\r\nA\r\nEN knb/t=5000\r\n");
	/* a text command ends a group too */
	tl_set(t, "g1", "1");
	mustsends(c, "mg g1 v q\r\nget g2\r\n");
	ckresp(c, "VA 1\r\n1\r\nEND\r\n");
	close(t);
}
END_TEST

START_TEST(test_meta_errors)
{
	mustsends(c, "me q\r\n");
	ckresp(c, "CLIENT_ERROR unsupported command\r\n");
	mustsends(c, "mg q zz\r\n");
	ckresp(c, "CLIENT_ERROR invalid flag\r\n");
	mustsends(c, "mg\r\n");
	ckresp(c, "CLIENT_ERROR bad command line format\r\n");
	mustsends(c, "mg .bad v\r\n");
	ckresp(c, "CLIENT_ERROR bad queue name\r\n");
	mustsends(c, "mg q/nope v\r\n");
	ckresp(c, "CLIENT_ERROR unknown option\r\n");
	mustsends(c, "md q/x\r\n");
	ckresp(c, "CLIENT_ERROR bad queue name\r\n");
	/* a refused ms skips its data */
	mustsends(c, "ms q 2 ME\r\nhi\r\nms q 2 MZ\r\nhi\r\nms q 2 F-1\r\nhi\r\nmn\r\n");
	ckresp(c, "CLIENT_ERROR mode not supported by a queue\r\n"
	    "CLIENT_ERROR invalid mode for ms M token\r\n"
	    "CLIENT_ERROR bad command line format\r\nMN\r\n");
	mustsends(c, "ms q 2 C7\r\nhi\r\n");
	ckresp(c, "EX\r\n");
	mustsends(c, "ms q 2000000\r\n");
	ckresp(c, "SERVER_ERROR object too large for cache\r\n");
	{
		char *junk = calloc(1, 2000002);
		memset(junk, 'x', 2000000);
		memcpy(junk + 2000000, "\r\n", 2);
		mustsend(c, junk, 2000002);
		free(junk);
	}
	mustsends(c, "mn\r\n");
	ckresp(c, "MN\r\n");
	mustsends(c, "ms q 2\r\nhiXX");
	ckresp(c, "CLIENT_ERROR bad data chunk\r\n");
	tl_expect_closed(c, 2000);
}
END_TEST

/* ----------------------------------------------------------- auth */

static char *auth_dir;

static char *
write_auth(const char *text, mode_t mode)
{
	char *path = tl_strdupf("%s/users", auth_dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	ck_assert_int_eq(chmod(path, mode), 0);
	return path;
}

static void
auth_setup(void)
{
	auth_dir = tl_mkdtemp();
}

static void
auth_teardown(void)
{
	tl_rmrf(auth_dir);
	free(auth_dir);
}

/* memcached's ASCII authentication: `set <any> 0 0 <n>` + "user password". */
static bool
text_login(int port, const char *user, const char *pass)
{
	int fd = tl_connect(port);
	char *data = tl_strdupf("%s %s", user, pass);
	char *cmd = tl_strdupf("set auth 0 0 %zu\r\n%s\r\n", strlen(data), data);
	char *l;
	bool ok;

	mustsends(fd, cmd);
	l = tl_mustreadline(fd);
	ok = strcmp(l, "STORED") == 0;
	if (!ok)
		ck_assert_str_eq(l, "CLIENT_ERROR authentication failure");
	free(l);
	free(cmd);
	free(data);
	close(fd);
	return ok;
}

START_TEST(test_auth_text)
{
	/* a clear-text password holding ':' is followed by a permissions
	 * field, here an empty one (the defaults) */
	char *path = write_auth("# users\nalice:s3cret:with:colons:\nbob:pw\n", 0600);
	struct tl_server *s = tl_server_start("memory", "--auth-file", path, NULL);
	int fd = tl_connect(s->port);

	mustsends(fd, "get q\r\n");
	ckresp(fd, "CLIENT_ERROR unauthenticated\r\n");
	mustsends(fd, "mg q v\r\nversion\r\n");
	ckresp(fd, "CLIENT_ERROR unauthenticated\r\nCLIENT_ERROR unauthenticated\r\n");
	mustsends(fd, "set x 0 0 11\r\nalice wrong\r\n");
	ckresp(fd, "CLIENT_ERROR authentication failure\r\n");
	mustsends(fd, "get q\r\n");
	ckresp(fd, "CLIENT_ERROR unauthenticated\r\n");
	mustsends(fd, "set x 0 0 24\r\nalice s3cret:with:colons\r\n");
	ckresp(fd, "STORED\r\n");
	tl_set(fd, "q", "v");
	tl_ckget(fd, "q", "v");
	close(fd);
	ck_assert(text_login(s->port, "bob", "pw"));
	ck_assert(!text_login(s->port, "bob", "pw2"));
	ck_assert(!text_login(s->port, "bob", "p"));
	ck_assert(!text_login(s->port, "carol", "pw"));
	tl_server_stop(s);
	tl_server_free(s);
	free(path);
}
END_TEST

START_TEST(test_auth_binary_sasl)
{
	char *path = write_auth("alice:secret\n", 0600);
	struct tl_server *s = tl_server_start("memory", "--auth-file", path, NULL);
	int fd = tl_connect(s->port);

	breq(fd, OP_SASL_LIST, NULL, NULL, 0, NULL, 0, 1);
	bexpect(fd, OP_SASL_LIST, 0, 1, NULL, "PLAIN");
	breq(fd, OP_GETK, "q", NULL, 0, NULL, 0, 2);
	bexpect(fd, OP_GETK, 0x20, 2, NULL, NULL);
	breq(fd, OP_SASL_AUTH, "PLAIN", NULL, 0, "\0alice\0wrong", 12, 3);
	bexpect(fd, OP_SASL_AUTH, 0x20, 3, NULL, NULL);
	bset(fd, OP_SET, "q", 0, "v", 4);
	bexpect(fd, OP_SET, 0x20, 4, NULL, NULL);
	breq(fd, OP_SASL_AUTH, "PLAIN", NULL, 0, "\0alice\0secret", 13, 5);
	bexpect(fd, OP_SASL_AUTH, 0, 5, NULL, NULL);
	bset(fd, OP_SET, "q", 0, "v", 6);
	bexpect(fd, OP_SET, 0, 6, NULL, "");
	breq(fd, OP_GETK, "q", NULL, 0, NULL, 0, 7);
	bhit(fd, OP_GETK, 7, "q", 0, "v");
	close(fd);
	tl_server_stop(s);
	tl_server_free(s);
	free(path);
}
END_TEST

START_TEST(test_auth_file_checked)
{
	const char *bad[] = { "alice:pw\n", "no colon here\n", "# nobody\n" };
	mode_t modes[] = { 0644, 0600, 0600 };
	const char *want[] = { "chmod", "line 1", "no user" };
	size_t i;

	for (i = 0; i < 3; i++) {
		char *path = write_auth(bad[i], modes[i]);
		char *errpath = tl_strdupf("%s/err", auth_dir);
		char *out;
		int st;
		pid_t pid = fork();

		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			dup2(fd, 2);
			execl(tl_sakerd_path(), "sakerd", "-p", "0", "-s",
			    "/nonexistent/sock", "--auth-file", path, (char *)NULL);
			_exit(127);
		}
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "case %zu: status %#x",
		    i, st);
		out = tl_read_file(errpath, NULL);
		ck_assert_ptr_nonnull(out);
		ck_assert_msg(strstr(out, "--auth-file") != NULL && strstr(out, want[i]) != NULL,
		    "case %zu: stderr \"%s\"", i, out);
		free(out);
		free(errpath);
		free(path);
	}
}
END_TEST

/* A crypt(3) hash of pass with a fresh salt of `method` ($y$, $6$). */
static char *
hash_of(const char *method, const char *pass)
{
	char salt[CRYPT_GENSALT_OUTPUT_SIZE];
	struct crypt_data cd;
	const char *h;

	ck_assert_ptr_nonnull(crypt_gensalt_rn(method, 0, NULL, 0, salt, sizeof(salt)));
	memset(&cd, 0, sizeof(cd));
	h = crypt_r(pass, salt, &cd);
	ck_assert_msg(h != NULL && h[0] == '$', "crypt_r(%s) failed", method);
	return strdup(h);
}

/* Wait (bounded) for `what` in the server's log. */
static void
ck_log(struct tl_server *s, const char *what)
{
	int64_t deadline = tl_now_ms() + 3000;

	for (;;) {
		char *log = tl_read_file(s->log, NULL);
		bool seen = log != NULL && strstr(log, what) != NULL;

		free(log);
		if (seen)
			return;
		ck_assert_msg(tl_now_ms() < deadline, "no log line \"%s\"", what);
		tl_sleep_ms(10);
	}
}

START_TEST(test_auth_hashed)
{
	char *y = hash_of("$y$", "yes pw"), *six = hash_of("$6$", "sha pw");
	char *text = tl_strdupf("yuser:%s\nsuser:%s\nplain:pw\n", y, six);
	char *path = write_auth(text, 0600);
	struct tl_server *s = tl_server_start("memory", "--auth-file", path, NULL);
	int fd;

	ck_assert(text_login(s->port, "yuser", "yes pw"));
	ck_assert(!text_login(s->port, "yuser", "yes pW"));
	ck_assert(!text_login(s->port, "yuser", y));
	ck_assert(text_login(s->port, "suser", "sha pw"));
	ck_assert(!text_login(s->port, "suser", "yes pw"));
	ck_assert(!text_login(s->port, "plain", "yes pw"));
	ck_assert(text_login(s->port, "plain", "pw"));
	/* SASL PLAIN against a hash */
	fd = tl_connect(s->port);
	breq(fd, OP_SASL_AUTH, "PLAIN", NULL, 0, "\0suser\0sha pX", 13, 1);
	bexpect(fd, OP_SASL_AUTH, 0x20, 1, NULL, NULL);
	breq(fd, OP_SASL_AUTH, "PLAIN", NULL, 0, "\0suser\0sha pw", 13, 2);
	bexpect(fd, OP_SASL_AUTH, 0, 2, NULL, NULL);
	close(fd);
	/* the clear-text user is reported at startup */
	ck_log(s, "1 of 3 users have a clear-text password");
	tl_server_stop(s);
	tl_server_free(s);
	free(path);
	free(text);
	free(y);
	free(six);
}
END_TEST

START_TEST(test_auth_bad_hashes)
{
	char *six = hash_of("$6$", "pw");
	char *cut = tl_strdupf("alice:%.*s\n", (int)strlen(six) - 3, six);
	char *perms = tl_strdupf("alice:%s:queues=jobs*,bogus\n", six);
	const char *bad[] = { "alice:$zz$nosuchmethod\n", cut, perms };
	const char *want[] = { "crypt(3) cannot use", "crypt(3) cannot use",
	    "unknown permission \"bogus\"" };
	size_t i;

	for (i = 0; i < 3; i++) {
		char *path = write_auth(bad[i], 0600);
		char *errpath = tl_strdupf("%s/err", auth_dir);
		char *out;
		int st;
		pid_t pid = fork();

		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			dup2(fd, 2);
			execl(tl_sakerd_path(), "sakerd", "-p", "0", "-s",
			    "/nonexistent/sock", "--auth-file", path, (char *)NULL);
			_exit(127);
		}
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "case %zu: status %#x",
		    i, st);
		out = tl_read_file(errpath, NULL);
		ck_assert_ptr_nonnull(out);
		ck_assert_msg(strstr(out, "line 1") != NULL && strstr(out, want[i]) != NULL,
		    "case %zu: stderr \"%s\"", i, out);
		free(out);
		free(errpath);
		free(path);
	}
	free(cut);
	free(perms);
	free(six);
}
END_TEST

START_TEST(test_auth_reload)
{
	char *path = write_auth("alice:one\n", 0600);
	struct tl_server *s = tl_server_start("memory", "--auth-file", path, NULL);
	int64_t deadline;

	ck_assert(text_login(s->port, "alice", "one"));
	free(write_auth("alice:two\n", 0600));
	kill(s->pid, SIGHUP);
	deadline = tl_now_ms() + 3000;
	while (!text_login(s->port, "alice", "two"))
		ck_assert_msg(tl_now_ms() < deadline, "SIGHUP did not reload the file");
	ck_assert(!text_login(s->port, "alice", "one"));
	/* a file others may read is refused on reload: the users stay */
	free(write_auth("alice:three\n", 0644));
	kill(s->pid, SIGHUP);
	/* the server says so in its log */
	deadline = tl_now_ms() + 3000;
	for (;;) {
		char *log = tl_read_file(s->log, NULL);
		bool seen = log != NULL && strstr(log, "keeping the previous users") != NULL;

		free(log);
		if (seen)
			break;
		ck_assert_msg(tl_now_ms() < deadline, "no log line about the refused file");
		tl_sleep_ms(10);
	}
	ck_assert(text_login(s->port, "alice", "two"));
	ck_assert(!text_login(s->port, "alice", "three"));
	tl_server_stop(s);
	tl_server_free(s);
	free(path);
}
END_TEST

/* ------------------------------------------------------------ suite */

static Suite *
binary_suite(void)
{
	Suite *s = suite_create("binary");
	TCase *tc = tcase_create("binary");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_bin_set_get);
	tcase_add_test(tc, test_bin_abort_delay_touch);
	tcase_add_test(tc, test_bin_key_echo_options);
	tcase_add_test(tc, test_bin_quiet);
	tcase_add_test(tc, test_bin_multiget_getk_last);
	tcase_add_test(tc, test_bin_multiget_waits_on_all);
	tcase_add_test(tc, test_bin_multiget_wait_getk_last);
	tcase_add_test(tc, test_bin_multiget_timeout);
	tcase_add_test(tc, test_bin_errors);
	tcase_add_test(tc, test_bin_too_large);
	tcase_add_test(tc, test_bin_bad_header);
	tcase_add_test(tc, test_bin_stats_version_flush_quit);
	tcase_add_test(tc, test_bin_open_close);
	tcase_add_test(tc, test_bin_delayed_and_pending_disconnect);
	suite_add_tcase(s, tc);

	tc = tcase_create("meta");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_meta_basic);
	tcase_add_test(tc, test_meta_base64);
	tcase_add_test(tc, test_meta_multiget);
	tcase_add_test(tc, test_meta_errors);
	suite_add_tcase(s, tc);

	tc = tcase_create("auth");
	tcase_add_checked_fixture(tc, auth_setup, auth_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_auth_text);
	tcase_add_test(tc, test_auth_binary_sasl);
	tcase_add_test(tc, test_auth_file_checked);
	tcase_add_test(tc, test_auth_reload);
	tcase_add_test(tc, test_auth_hashed);
	tcase_add_test(tc, test_auth_bad_hashes);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(binary_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
