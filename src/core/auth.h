/* auth.h -- --auth-file: the users and passwords behind memcached's ASCII
 * authentication and binary SASL PLAIN. */
#ifndef SAKER_AUTH_H
#define SAKER_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "perms.h"

struct auth;            /* the users of one file (broker.auth) */
struct broker;

/*
 * Load FILE (lines "user:password[:permissions]" or
 * "user:HASH[:permissions]", HASH a crypt(3) hash such as $y$...
 * (yescrypt) or $6$... (sha512-crypt); blank lines and lines starting
 * with '#' are skipped).  The permissions (perms.h) follow the last ':'
 * when a line has two or more; a clear-text password is what lies
 * between the first ':' and that one, and is accepted with a warning.
 * Refuses a file that others may read or write, one without users, a
 * malformed line, a user listed twice, a hash crypt(3) cannot use and a
 * bad permissions field.  The users, or NULL with the reason (and line)
 * in err.
 */
struct auth *auth_load(const char *path, char *err, size_t errlen);
/* Reread b->auth's file (SIGHUP); a bad file keeps the users loaded
 * before.  The logged-in sessions of b get their user's new rights (none
 * when the user is gone). */
void auth_reload(struct broker *b);
/* Is user/password in the file?  Its rights (valid until the next
 * reload, which updates the sessions holding them), or NULL.  The time
 * taken does not depend on how much of a password matched, nor on
 * whether the user exists (one crypt(3) of the file's most expensive hash
 * stands in for an unknown user; a user whose hash costs less than half
 * of that pays it as well).  It does not throttle: callers ask login.h
 * first. */
const struct perms *auth_check(struct auth *a, const char *user, size_t ulen,
    const char *pass, size_t plen);
/* Is user[0..ulen) in the file?  (Every entry compared: no early exit.)
 * Failures of other names are no guess at anyone's password (login.h). */
bool auth_known(struct auth *a, const char *user, size_t ulen);
/* auth_check() calls so far: a login that failed without one (a malformed
 * login the protocol refused before checking) is given auth_dummy(), so
 * that no failure is cheaper than a checked one. */
unsigned long auth_checks(const struct auth *a);
/* One crypt(3) of the dummy hash (auth_check()'s cost), result unused. */
void auth_dummy(struct auth *a);
/* Forget every user (NULL: nothing). */
void auth_free(struct auth *a);

#endif
