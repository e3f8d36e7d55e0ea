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

/* Addresses, networks and (user, address) pairs share the main table;
 * the user names of the auth file have one of their own (only known
 * names get an entry, so a flood cannot take their slots). */
enum kind { K_ADDR = 'a', K_NET = 'n', K_USER = 'u', K_PAIR = 'p' };

struct entry {
	char key[KEY_MAX];      /* kind, ' ', address and/or user */
	uint8_t klen;           /* 0 = free */
	uint32_t fails;         /* failures lately (not yet forgotten) */
	uint32_t unlogged;      /* K_ADDR: failures since the last log line */
	int64_t last_ms;        /* the last failure */
	int64_t log_ms;         /* K_ADDR, K_USER: the last log line */
};

struct table {
	struct entry *e;
	size_t n;
};

/* Static: a flood of addresses or names costs no memory, it only evicts
 * (the entry of a bucket with the fewest failures). */
static struct entry main_slots[LOGIN_SLOTS];
static struct entry user_slots[LOGIN_USER_SLOTS];
static const struct table tmain = { main_slots, LOGIN_SLOTS };
static const struct table tusers = { user_slots, LOGIN_USER_SLOTS };
/* log lines in the current second, whatever the address */
static int64_t log_window_ms;
static unsigned log_lines;

/*
 * The throttling key of an address: an IPv6 address counts by its /64
 * (one host usually gets a whole /64, and changing the low bits costs an
 * attacker nothing), an IPv4-mapped one as its IPv4 address; anything
 * else ("unix:uid=N", an IPv4 address) as it is.  With `net`, the key of
 * its network instead: an IPv4 address's /24, an IPv6 one's /48 (a site's
 * usual allocation: 65,536 /64s an attacker may hop between); a Unix
 * socket peer is its own network.
 */
static void
addr_key(const char *peer, bool net, char *out, size_t len)
{
	struct in6_addr a6;
	struct in_addr a4;
	char ip[INET6_ADDRSTRLEN];
	bool v4 = false;

	if (inet_pton(AF_INET6, peer, &a6) == 1) {
		if (IN6_IS_ADDR_V4MAPPED(&a6)) {
			memcpy(&a4, &a6.s6_addr[12], 4);
			v4 = true;
		} else {
			memset(&a6.s6_addr[net ? 6 : 8], 0, net ? 10 : 8);
			if (inet_ntop(AF_INET6, &a6, ip, sizeof(ip)) != NULL) {
				snprintf(out, len, "%s/%d", ip, net ? 48 : 64);
				return;
			}
		}
	} else if (inet_pton(AF_INET, peer, &a4) == 1) {
		v4 = true;
	}
	if (v4) {
		if (net)
			((unsigned char *)&a4)[3] = 0;
		if (inet_ntop(AF_INET, &a4, ip, sizeof(ip)) != NULL) {
			snprintf(out, len, net ? "%s/24" : "%s", ip);
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
	if (k == K_USER || k == K_PAIR) {
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
bucket_of(const struct table *t, const char *key, size_t len)
{
	return (size_t)(saker_hash(key, len) % (t->n / BUCKET)) * BUCKET;
}

/* The failures that make e worth keeping: none when free, forgiven or
 * forgotten. */
static uint32_t
weight(const struct entry *e, int64_t now_ms)
{
	if (e->klen == 0 || now_ms - e->last_ms > LOGIN_FORGET_MS)
		return 0;
	return e->fails;
}

/*
 * The entry of key in t; with `add`, taken when missing: a free or
 * forgotten one, else the one with the fewest failures, the least
 * recently failed of those.  On bd89b77 the least recently failed went
 * first whatever its count, and 7,500 cheap failures from 2,500 fresh
 * addresses evicted admin's entry (issue 45): an entry that failed often
 * now outlives any number of entries that failed less.
 */
static struct entry *
find(const struct table *t, const char *key, size_t len, bool add,
    int64_t now_ms)
{
	size_t b = bucket_of(t, key, len), i;
	struct entry *victim = NULL;

	for (i = b; i < b + BUCKET; i++) {
		struct entry *e = &t->e[i];

		if (e->klen == len && memcmp(e->key, key, len) == 0) {
			if (now_ms - e->last_ms > LOGIN_FORGET_MS)
				e->fails = 0;
			return e;
		}
		if (victim == NULL || weight(e, now_ms) < weight(victim, now_ms) ||
		    (weight(e, now_ms) == weight(victim, now_ms) &&
		    e->last_ms < victim->last_ms))
			victim = e;
	}
	if (!add)
		return NULL;
	memset(victim, 0, sizeof(*victim));
	memcpy(victim->key, key, len);
	victim->klen = (uint8_t)len;
	return victim;
}

/* The entry of kind k (NULL if none), or a new one with `add`. */
static struct entry *
entry_of(enum kind k, const char *peer, const char *user, size_t ulen,
    bool add, int64_t now_ms)
{
	char ak[ADDR_KEY_MAX], key[KEY_MAX];
	size_t n;

	addr_key(peer, k == K_NET, ak, sizeof(ak));
	n = make_key(k, ak, user, ulen, key);
	return find(k == K_USER ? &tusers : &tmain, key, n, add, now_ms);
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

/*
 * The delays of the address and of the (user, address) pair, and the
 * user name's own only when the address's network has failed logins
 * lately: guessing at a user from many addresses is paced as one, but
 * the user logging in from anywhere else is not held back by it (on
 * bd89b77 12 connections guessing `admin` from one address made admin's
 * own logins wait 4-15 s or time out everywhere: issue 45).
 */
int64_t
login_wait(const char *peer, const char *user, size_t ulen, int64_t now_ms)
{
	int64_t a, p, u = 0;
	const struct entry *net = entry_of(K_NET, peer, NULL, 0, false, now_ms);

	a = owed(entry_of(K_ADDR, peer, NULL, 0, false, now_ms), now_ms);
	p = owed(entry_of(K_PAIR, peer, user, ulen, false, now_ms), now_ms);
	if (net != NULL && net->fails > 0)
		u = owed(entry_of(K_USER, peer, user, ulen, false, now_ms), now_ms);
	if (p > a)
		a = p;
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

/* The user-wide alert: a known user failing often across addresses is
 * worth an operator's look (once a minute per user at most). */
static void
user_alert(struct entry *u, const char *user, size_t ulen, int64_t now_ms)
{
	char name[48];

	if (u->fails < LOGIN_USER_ALERT ||
	    (u->log_ms != 0 && now_ms - u->log_ms < 60000))
		return;
	u->log_ms = now_ms;
	log_name(user, ulen, name, sizeof(name));
	log_warn("user \"%s\": %u failed logins lately, from any address; "
	    "addresses whose network failed wait up to %d s per attempt, the "
	    "others log in as usual (logged once a minute)", name, u->fails,
	    LOGIN_MAX_DELAY_MS / 1000);
}

unsigned
login_failed(const char *peer, const char *user, size_t ulen, bool known,
    const char *how, int64_t now_ms)
{
	char name[48];
	struct entry *a;

	/* an unknown name is no guess at anyone: it costs the address and
	 * its network, never a user's slot */
	if (known) {
		struct entry *u = entry_of(K_USER, peer, user, ulen, true, now_ms);

		count_fail(u, now_ms);
		user_alert(u, user, ulen, now_ms);
		count_fail(entry_of(K_PAIR, peer, user, ulen, true, now_ms), now_ms);
	}
	count_fail(entry_of(K_NET, peer, NULL, 0, true, now_ms), now_ms);
	/* the address last: adding the others cannot evict it now */
	a = entry_of(K_ADDR, peer, NULL, 0, true, now_ms);
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
login_ok(const char *peer, const char *user, size_t ulen, int64_t now_ms)
{
	struct entry *p = entry_of(K_PAIR, peer, user, ulen, false, now_ms);

	if (p == NULL || p->fails == 0)
		return;
	take_off(entry_of(K_ADDR, peer, NULL, 0, false, now_ms), p->fails);
	take_off(entry_of(K_NET, peer, NULL, 0, false, now_ms), p->fails);
	take_off(entry_of(K_USER, peer, user, ulen, false, now_ms), p->fails);
	p->fails = 0;
}

void
login_reset(void)
{
	memset(main_slots, 0, sizeof(main_slots));
	memset(user_slots, 0, sizeof(user_slots));
	log_window_ms = 0;
	log_lines = 0;
}
