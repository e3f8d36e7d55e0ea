/* hash.c -- keyed SipHash-2-4 and the per-process table key (hash.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/random.h>
#endif

#include "hash.h"

static uint64_t
le64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND do { \
	v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
	v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2; \
	v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0; \
	v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
} while (0)

uint64_t
saker_siphash(const uint8_t k[16], const void *data, size_t len)
{
	const uint8_t *p = data, *end = p + (len & ~(size_t)7);
	uint64_t k0 = le64(k), k1 = le64(k + 8), m, b = (uint64_t)len << 56;
	uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
	uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
	size_t i;

	for (; p < end; p += 8) {
		m = le64(p);
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	for (i = 0; i < (len & 7); i++)
		b |= (uint64_t)p[i] << (8 * i);
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

int
saker_random(void *p, size_t n)
{
	uint8_t *b = p;
	size_t got = 0;
	int fd;

#if defined(__linux__)
	while (got < n) {
		ssize_t r = getrandom(b + got, n - got, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	if (got == n)
		return 0;
#endif
	if ((fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	while (got < n) {
		ssize_t r = read(fd, b + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			close(fd);
			return -1;
		}
		got += (size_t)r;
	}
	close(fd);
	return 0;
}

static uint8_t table_key[16];
static pthread_once_t table_key_once = PTHREAD_ONCE_INIT;

static void
table_key_init(void)
{
	struct timespec ts;
	uint64_t a, b;

	if (saker_random(table_key, sizeof(table_key)) == 0)
		return;
	/* No kernel source (a chroot without /dev): a weaker key from the
	 * clock, the pid and ASLR'd addresses is still not the same from
	 * run to run, and a hash table must not fail to start over it. */
	clock_gettime(CLOCK_REALTIME, &ts);
	a = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() ^
	    (uint64_t)(uintptr_t)&ts;
	b = (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&table_key_init << 7;
	memcpy(table_key, &a, 8);
	memcpy(table_key + 8, &b, 8);
}

uint64_t
saker_hash(const void *data, size_t len)
{
	pthread_once(&table_key_once, table_key_init);
	return saker_siphash(table_key, data, len);
}
