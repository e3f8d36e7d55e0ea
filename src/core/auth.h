/* auth.h -- --auth-file: the users and passwords behind memcached's ASCII
 * authentication and binary SASL PLAIN. */
#ifndef SAKER_AUTH_H
#define SAKER_AUTH_H

#include <stdbool.h>
#include <stddef.h>

/* True once an --auth-file is loaded: connections must authenticate. */
extern bool auth_active;

/*
 * Load FILE (lines "user:password" or "user:HASH", HASH a crypt(3) hash
 * such as $y$... (yescrypt) or $6$... (sha512-crypt); blank lines and
 * lines starting with '#' are skipped).  A clear-text password is
 * everything after the first ':' (colons included) and is accepted with a
 * warning.  Refuses a file that others may read or write, one without
 * users, a malformed line and a hash crypt(3) cannot use.  0, or -1 with
 * the reason in err.
 */
int auth_init(const char *path, char *err, size_t errlen);
/* Reread the file (SIGHUP); a bad file keeps the users loaded before. */
void auth_reload(void);
/* Is user/password in the file?  The time taken does not depend on how
 * much of a password matched. */
bool auth_check(const char *user, size_t ulen, const char *pass, size_t plen);
/* Forget every user. */
void auth_free(void);

#endif
