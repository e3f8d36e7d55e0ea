/* login.h -- --auth-file logins on a hostile network: failed attempts are
 * counted per peer address (an IPv6 /64 counting as one address, a Unix
 * socket peer by its uid), per network (IPv4 /24, IPv6 /48), per user
 * name of the auth file (across addresses) and per (user, address), in
 * bounded tables, and slow down later attempts BEFORE their password is
 * checked, whatever the password.
 *
 * Checking first and delaying only the refusal told a correct password
 * by its fast answer (issue 35): now an attempt that arrives while a
 * delay is owed waits (on a timer; HTTP Basic is refused with 429) and
 * is checked only when the delay is over, so the answer's timing says
 * nothing and guesses are checked no faster than the schedule below,
 * however many connections carry them.
 *
 * Who owes what (issue 45): an address owes its own delay and that of
 * each (user, address) pair; a user name's delay (its failures from every
 * address) is owed only by addresses whose network has failed lately.  So
 * guessing at `admin` from many addresses is paced as one stream, while
 * admin logging in from a network that is not guessing is never held
 * back by it: one address can no longer lock a user out. */
#ifndef SAKER_LOGIN_H
#define SAKER_LOGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Entries remembered (addresses, networks and pairs together); a full
 * bucket forgets its entry with the fewest failures (the least recently
 * failed of those).  Static: about 1 MiB whatever a flood of addresses
 * does.  User names have LOGIN_USER_SLOTS of their own, and only names
 * of the auth file get one: failures of unknown names count for the
 * address and its network only. */
#define LOGIN_SLOTS 8192
#define LOGIN_USER_SLOTS 1024
/* A user's failures lately (from any address) past which it is logged,
 * once a minute at most. */
#define LOGIN_USER_ALERT 20
/* Failed attempts an address (or a user name) makes at full speed; after
 * the 3rd failure the next attempt waits 250 ms, after the 4th 500 ms,
 * doubling up to LOGIN_MAX_DELAY_MS.  So checks at 0, 0, 0, 250 ms,
 * 750 ms, 1.75 s, 3.75 s, 7.75 s, then one per LOGIN_MAX_DELAY_MS: at
 * most 5 in any second, 8 in the first 10 s. */
#define LOGIN_FREE_TRIES 3
#define LOGIN_MAX_DELAY_MS 5000
/* An entry without a failure for this long starts again from zero. */
#define LOGIN_FORGET_MS (10 * 60 * 1000)
/* Failed attempts one connection may make; the last closes it. */
#define LOGIN_CONN_TRIES 5
/* A connection that has not logged in after this long is closed. */
#define LOGIN_TIMEOUT_S 30
/* Failed logins of one address are logged at most once per this (with
 * the count since its last line), and at most LOGIN_LOG_LINES lines in
 * all per LOGIN_LOG_MS (the others keep counting and come later). */
#define LOGIN_LOG_MS 1000
#define LOGIN_LOG_LINES 20

/* How long an attempt from `peer` (an address as text, or "unix:uid=N")
 * for user[0..ulen) must wait (ms) before its password may be checked:
 * the delay owed by the address, the pair and (when the address's network
 * failed lately) the user name, whichever ends last; 0 to check it now. */
int64_t login_wait(const char *peer, const char *user, size_t ulen,
    int64_t now_ms);
/* A failed attempt (`how`: "text", "SASL", "HTTP") checked at now_ms:
 * counted for the address and its network, and when `known` (the user is
 * in the auth file) for the user name and the pair too; logged (at most
 * once per LOGIN_LOG_MS per address, with the count since the last line).
 * Returns the address's failures lately. */
unsigned login_failed(const char *peer, const char *user, size_t ulen,
    bool known, const char *how, int64_t now_ms);
/* A successful login: the failures of this user from this address are
 * forgotten (taken off the address's and the user name's counts), and
 * only those: another user's failures stay. */
void login_ok(const char *peer, const char *user, size_t ulen,
    int64_t now_ms);
/* Forget everything (the in-process fuzzers, between inputs). */
void login_reset(void);

#endif
