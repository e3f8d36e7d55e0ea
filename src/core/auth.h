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
 * whether the user exists (one crypt(3) of the file's first hash stands
 * in for an unknown user).  It does not throttle: callers ask login.h
 * first. */
const struct perms *auth_check(struct auth *a, const char *user, size_t ulen,
    const char *pass, size_t plen);
/* Forget every user (NULL: nothing). */
void auth_free(struct auth *a);

#endif
