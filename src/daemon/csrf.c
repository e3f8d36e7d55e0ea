/* csrf.c -- the console's CSRF tokens (csrf.h). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "bytes.h"
#include "csrf.h"
#include "hash.h"

/* two keys: 128 bits of token */
static uint8_t key[2][16];

int
csrf_init(void)
{
	return saker_random(key, sizeof(key));
}

/* The token of user for period number `period`. */
static void
token_for(const char *user, size_t ulen, int64_t period,
    char out[CSRF_TOKEN_LEN + 1])
{
	uint8_t msg[8 + 256];
	size_t n;

	/* the period first, then the name (cut: names are short) */
	saker_put_le64(msg, (uint64_t)period);
	n = ulen < sizeof(msg) - 8 ? ulen : sizeof(msg) - 8;
	memcpy(msg + 8, user, n);
	snprintf(out, CSRF_TOKEN_LEN + 1, "%016llx%016llx",
	    (unsigned long long)saker_siphash(key[0], msg, 8 + n),
	    (unsigned long long)saker_siphash(key[1], msg, 8 + n));
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
