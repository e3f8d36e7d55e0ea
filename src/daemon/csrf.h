/* csrf.h -- the console's CSRF tokens: bound to the login that asked for
 * one (the HTTP Basic user; "" without a login) and to a short period of
 * time, not one token for the process's whole life (issue 35).
 *
 * A token is a keyed hash (SipHash-2-4 under a random per-process key) of
 * the user name and the number of the CSRF_PERIOD_MS period it was made
 * in; it is accepted during that period and the next, so it lives 5 to
 * 10 minutes (the console asks for a fresh one every 2 s), and only for
 * requests of the same user. */
#ifndef SAKER_CSRF_H
#define SAKER_CSRF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CSRF_PERIOD_MS (5 * 60 * 1000)
#define CSRF_TOKEN_LEN 32

/* Draw the key (getrandom, else /dev/urandom); -1 when there is no
 * randomness. */
int csrf_init(void);
/* The token of user[0..ulen) at now_ms, NUL-terminated. */
void csrf_token(const char *user, size_t ulen, int64_t now_ms,
    char out[CSRF_TOKEN_LEN + 1]);
/* Is `token` (NULL: none) a token of that user made in this period or the
 * one before?  Compared in constant time. */
bool csrf_check(const char *user, size_t ulen, const char *token, int64_t now_ms);

#endif
