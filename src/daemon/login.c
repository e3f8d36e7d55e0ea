/* login.c -- failed logins per address, per user name and per pair, in
 * one fixed-size table (login.h has the policy). */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "hash.h"
#include "log.h"
#include "login.h"

#define BUCKET 8                /* slots probed per key */
#define KEY_MAX 112             /* longer user names are cut: they share */
#define ADDR_KEY_MAX 64

enum kind { K_ADDR = 'a', K_USER = 'u', K_PAIR = 'p' };

struct entry {
	char key[KEY_MAX];      /* kind, ' ', address and/or user */
	uint8_t klen;           /* 0 = free */
	uint32_t fails;         /* failures lately (not yet forgotten) */
	uint32_t unlogged;      /* K_ADDR: failures since the last log line */
	int64_t last_ms;        /* the last failure */
	int64_t log_ms;         /* K_ADDR: the last log line */
};

/* Static: a flood of addresses or names costs no memory, it only evicts
 * (the least recently failed entry of a bucket). */
static struct entry table[LOGIN_SLOTS];
/* log lines in the current second, whatever the address */
static int64_t log_window_ms;
static unsigned log_lines;

/*
 * The throttling key of an address: an IPv6 address counts by its /64
 * (one host usually gets a whole /64, and changing the low bits costs an
 * attacker nothing), an IPv4-mapped one as its IPv4 address; anything
 * else ("unix", an IPv4 address) as it is.
 */
static void
addr_key(const char *peer, char *out, size_t len)
{
	struct in6_addr a6;
	char ip[INET6_ADDRSTRLEN];

	if (inet_pton(AF_INET6, peer, &a6) == 1) {
		if (IN6_IS_ADDR_V4MAPPED(&a6) &&
		    inet_ntop(AF_INET, &a6.s6_addr[12], ip, sizeof(ip)) != NULL) {
			snprintf(out, len, "%s", ip);
			return;
		}
		memset(&a6.s6_addr[8], 0, 8);
		if (inet_ntop(AF_INET6, &a6, ip, sizeof(ip)) != NULL) {
			snprintf(out, len, "%s/64", ip);
			return;
		}
	}
	snprintf(out, len, "%s", peer);
}

/* The key of kind k for address key `ak` and user[0..ulen) into key;
 * returns its length. */
static size_t
make_key(enum kind k, const char *ak, const char *user, size_t ulen,
    char key[KEY_MAX])
{
	size_t n = 0, alen = ak != NULL ? strlen(ak) : 0;

	key[n++] = (char)k;
	key[n++] = ' ';
	if (k != K_USER) {
		memcpy(key + n, ak, alen);
		n += alen;
	}
	if (k == K_PAIR)
		key[n++] = ' ';
	if (k != K_ADDR) {
		if (ulen > KEY_MAX - n)
			ulen = KEY_MAX - n;
		memcpy(key + n, user, ulen);
		n += ulen;
	}
	return n;
}

/* Keyed (hash.h): addresses and user names are the attacker's choice, and
 * an unkeyed hash would let one aim them all at a victim's bucket. */
static size_t
bucket_of(const char *key, size_t len)
{
	return (size_t)(saker_hash(key, len) % (LOGIN_SLOTS / BUCKET)) * BUCKET;
}

/* The entry of key; with `add`, taken when missing (a free one, else the
 * least recently failed of its bucket). */
static struct entry *
find(const char *key, size_t len, bool add, int64_t now_ms)
{
	size_t b = bucket_of(key, len), i;
	struct entry *victim = NULL;
	int64_t vscore = 0;

	for (i = b; i < b + BUCKET; i++) {
		struct entry *e = &table[i];
		/* free or forgiven entries go first, then the least recently
		 * failed */
		int64_t score = e->klen == 0 || (e->fails == 0 && e->unlogged == 0) ?
		    INT64_MIN : e->last_ms;

		if (e->klen == len && memcmp(e->key, key, len) == 0) {
			if (now_ms - e->last_ms > LOGIN_FORGET_MS)
				e->fails = 0;
			return e;
		}
		if (victim == NULL || score < vscore) {
			victim = e;
			vscore = score;
		}
	}
	if (!add)
		return NULL;
	memset(victim, 0, sizeof(*victim));
	memcpy(victim->key, key, len);
	victim->klen = (uint8_t)len;
	return victim;
}

/* The delay owed after `fails` failures. */
static int64_t
delay_for(uint32_t fails)
{
	uint32_t extra;
	int64_t delay;

	if (fails < LOGIN_FREE_TRIES)
		return 0;
	/* 250 ms, 500 ms, 1 s, ... up to the cap; the shift stays small */
	extra = fails - LOGIN_FREE_TRIES;
	if (extra > 8)
		return LOGIN_MAX_DELAY_MS;
	delay = (int64_t)250 << extra;
	return delay < LOGIN_MAX_DELAY_MS ? delay : LOGIN_MAX_DELAY_MS;
}

static int64_t
owed(const struct entry *e, int64_t now_ms)
{
	int64_t left;

	if (e == NULL || e->fails == 0)
		return 0;
	left = e->last_ms + delay_for(e->fails) - now_ms;
	return left > 0 ? left : 0;
}

int64_t
login_wait(const char *peer, const char *user, size_t ulen, int64_t now_ms)
{
	char ak[ADDR_KEY_MAX], key[KEY_MAX];
	size_t n;
	int64_t a, u;

	addr_key(peer, ak, sizeof(ak));
	n = make_key(K_ADDR, ak, NULL, 0, key);
	a = owed(find(key, n, false, now_ms), now_ms);
	n = make_key(K_USER, NULL, user, ulen, key);
	u = owed(find(key, n, false, now_ms), now_ms);
	return a > u ? a : u;
}

static void
count_fail(struct entry *e, int64_t now_ms)
{
	if (e->fails < UINT32_MAX)
		e->fails++;
	e->last_ms = now_ms;
}

/* The user name as it may appear in a log line: printable ASCII, cut. */
static void
log_name(const char *user, size_t ulen, char *out, size_t len)
{
	size_t i, n = 0;

	for (i = 0; i < ulen && n + 4 < len; i++) {
		unsigned char c = (unsigned char)user[i];

		out[n++] = c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? (char)c : '?';
	}
	if (i < ulen && n + 4 < len) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
}

unsigned
login_failed(const char *peer, const char *user, size_t ulen, const char *how,
    int64_t now_ms)
{
	char ak[ADDR_KEY_MAX], key[KEY_MAX], name[48];
	struct entry *a;
	size_t n;

	addr_key(peer, ak, sizeof(ak));
	n = make_key(K_USER, NULL, user, ulen, key);
	count_fail(find(key, n, true, now_ms), now_ms);
	n = make_key(K_PAIR, ak, user, ulen, key);
	count_fail(find(key, n, true, now_ms), now_ms);
	/* the address last: adding the others cannot evict it now */
	n = make_key(K_ADDR, ak, NULL, 0, key);
	a = find(key, n, true, now_ms);
	count_fail(a, now_ms);
	if (a->unlogged < UINT32_MAX)
		a->unlogged++;
	/* a disk filler otherwise: one line a second per address at most,
	 * and LOGIN_LOG_LINES a second in all (a flood of addresses) */
	if (now_ms - log_window_ms >= LOGIN_LOG_MS) {
		log_window_ms = now_ms;
		log_lines = 0;
	}
	if ((a->log_ms == 0 || now_ms - a->log_ms >= LOGIN_LOG_MS) &&
	    log_lines < LOGIN_LOG_LINES) {
		log_lines++;
		log_name(user, ulen, name, sizeof(name));
		log_warn("%s authentication failed from %s (user \"%s\"); %u failed "
		    "logins from that address since the last such line, %u lately%s",
		    how, peer, name, a->unlogged, a->fails, log_lines ==
		    LOGIN_LOG_LINES ? "; more addresses failing: the next lines "
		    "wait a second" : "");
		a->unlogged = 0;
		a->log_ms = now_ms;
	}
	return a->fails;
}

/* e's count less n (what one pair contributed). */
static void
take_off(struct entry *e, uint32_t n)
{
	if (e != NULL)
		e->fails = e->fails > n ? e->fails - n : 0;
}

void
login_ok(const char *peer, const char *user, size_t ulen)
{
	char ak[ADDR_KEY_MAX], key[KEY_MAX];
	struct entry *p;
	size_t n;

	addr_key(peer, ak, sizeof(ak));
	n = make_key(K_PAIR, ak, user, ulen, key);
	if ((p = find(key, n, false, 0)) == NULL || p->fails == 0)
		return;
	n = make_key(K_ADDR, ak, NULL, 0, key);
	take_off(find(key, n, false, 0), p->fails);
	n = make_key(K_USER, NULL, user, ulen, key);
	take_off(find(key, n, false, 0), p->fails);
	p->fails = 0;
}

void
login_reset(void)
{
	memset(table, 0, sizeof(table));
	log_window_ms = 0;
	log_lines = 0;
}
