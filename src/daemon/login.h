/* login.h -- --auth-file logins on a hostile network: failed attempts are
 * counted per peer address (in a bounded table) and slow that peer down. */
#ifndef SAKER_LOGIN_H
#define SAKER_LOGIN_H

#include <stdint.h>

/* Peers remembered; a full table forgets the oldest of a bucket. */
#define LOGIN_PEERS 4096
/* Failed attempts a peer makes at full speed; each further one waits
 * 250 ms, doubling up to LOGIN_MAX_DELAY_MS, before its answer. */
#define LOGIN_FREE_TRIES 3
#define LOGIN_MAX_DELAY_MS 5000
/* A peer without a failure for this long starts again from zero. */
#define LOGIN_FORGET_MS (10 * 60 * 1000)
/* Failed attempts one connection may make; the last closes it. */
#define LOGIN_CONN_TRIES 5
/* A connection that has not logged in after this long is closed. */
#define LOGIN_TIMEOUT_S 30

/* A failed attempt from `peer` (an address as text) at now_ms: how long
 * the connection must wait before it is answered (ms), and the peer's
 * failures so far in *fails. */
int64_t login_failed(const char *peer, int64_t now_ms, unsigned *fails);
/* How long `peer` must still wait (ms) before its next attempt is worth
 * checking: its delay after its last failure (0 when none).  For logins
 * that cannot be held back, such as HTTP Basic auth, which are refused
 * meanwhile without spending a crypt(3) on them. */
int64_t login_wait(const char *peer, int64_t now_ms);
/* A successful login: the peer's failures are forgotten. */
void login_ok(const char *peer);

#endif
