/* csrf.c -- the console's CSRF tokens (csrf.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "csrf.h"

/* two keys: 128 bits of token */
static uint8_t key[2][16];

int
csrf_init(void)
{
	size_t got = 0;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while (got < sizeof(key)) {
		ssize_t n = read(fd, (uint8_t *)key + got, sizeof(key) - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fd);
			return -1;
		}
		got += (size_t)n;
	}
	close(fd);
	return 0;
}

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
csrf_siphash(const uint8_t k[16], const void *data, size_t len)
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

/* The token of user for period number `period`. */
static void
token_for(const char *user, size_t ulen, int64_t period,
    char out[CSRF_TOKEN_LEN + 1])
{
	uint8_t msg[8 + 256];
	size_t n;
	int i;

	/* the period first, then the name (cut: names are short) */
	for (i = 0; i < 8; i++)
		msg[i] = (uint8_t)((uint64_t)period >> (8 * i));
	n = ulen < sizeof(msg) - 8 ? ulen : sizeof(msg) - 8;
	memcpy(msg + 8, user, n);
	snprintf(out, CSRF_TOKEN_LEN + 1, "%016llx%016llx",
	    (unsigned long long)csrf_siphash(key[0], msg, 8 + n),
	    (unsigned long long)csrf_siphash(key[1], msg, 8 + n));
}

void
csrf_token(const char *user, size_t ulen, int64_t now_ms,
    char out[CSRF_TOKEN_LEN + 1])
{
	token_for(user, ulen, now_ms / CSRF_PERIOD_MS, out);
}

bool
csrf_check(const char *user, size_t ulen, const char *token, int64_t now_ms)
{
	char t[CSRF_TOKEN_LEN + 1];
	unsigned diff[2] = { 0, 0 };
	int64_t period = now_ms / CSRF_PERIOD_MS;
	int j;
	size_t i;

	if (token == NULL || strlen(token) != CSRF_TOKEN_LEN)
		return false;
	for (j = 0; j < 2; j++) {
		token_for(user, ulen, period - j, t);
		for (i = 0; i < CSRF_TOKEN_LEN; i++)
			diff[j] |= (unsigned)((unsigned char)t[i] ^ (unsigned char)token[i]);
	}
	return diff[0] == 0 || diff[1] == 0;
}
