/* login.c -- failed logins per peer address, in a fixed-size table. */
#include "config.h"

#include <stdbool.h>
#include <string.h>

#include "login.h"

#define BUCKET 8                /* slots probed per address */
#define ADDR_MAX 64

struct peer {
	char addr[ADDR_MAX];    /* "" = free */
	unsigned fails;
	int64_t last_ms;
};

/* Static: a flood of addresses costs no memory, it only evicts. */
static struct peer peers[LOGIN_PEERS];

static size_t
bucket_of(const char *addr)
{
	uint32_t h = 2166136261u;

	for (; *addr != '\0'; addr++)
		h = (h ^ (unsigned char)*addr) * 16777619u;
	return (h % (LOGIN_PEERS / BUCKET)) * BUCKET;
}

/* The peer's slot; with `add`, taken (a free one, else the oldest of its
 * bucket) when missing. */
static struct peer *
find(const char *addr, bool add, int64_t now_ms)
{
	size_t b = bucket_of(addr), i;
	struct peer *old = NULL;

	for (i = b; i < b + BUCKET; i++) {
		struct peer *p = &peers[i];

		if (p->addr[0] != '\0' && strncmp(p->addr, addr, ADDR_MAX - 1) == 0) {
			if (now_ms - p->last_ms > LOGIN_FORGET_MS)
				p->fails = 0;
			return p;
		}
		if (old == NULL || p->addr[0] == '\0' ||
		    (old->addr[0] != '\0' && p->last_ms < old->last_ms))
			old = p;
	}
	if (!add)
		return NULL;
	memset(old, 0, sizeof(*old));
	strncpy(old->addr, addr, ADDR_MAX - 1);
	return old;
}

/* The delay owed after `fails` failures. */
static int64_t
delay_for(unsigned fails)
{
	unsigned extra;
	int64_t delay;

	if (fails <= LOGIN_FREE_TRIES)
		return 0;
	/* 250 ms, 500 ms, 1 s, ... up to the cap; the shift stays small */
	extra = fails - LOGIN_FREE_TRIES - 1;
	if (extra > 8)
		return LOGIN_MAX_DELAY_MS;
	delay = (int64_t)250 << extra;
	return delay < LOGIN_MAX_DELAY_MS ? delay : LOGIN_MAX_DELAY_MS;
}

int64_t
login_failed(const char *peer, int64_t now_ms, unsigned *fails)
{
	struct peer *p = find(peer, true, now_ms);

	if (p->fails < UINT32_MAX)
		p->fails++;
	p->last_ms = now_ms;
	*fails = p->fails;
	return delay_for(p->fails);
}

int64_t
login_wait(const char *peer, int64_t now_ms)
{
	struct peer *p = find(peer, false, now_ms);
	int64_t left;

	if (p == NULL)
		return 0;
	left = p->last_ms + delay_for(p->fails) - now_ms;
	return left > 0 ? left : 0;
}

void
login_ok(const char *peer)
{
	struct peer *p = find(peer, false, 0);

	if (p != NULL)
		memset(p, 0, sizeof(*p));
}
