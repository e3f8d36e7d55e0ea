/*
 * client_login.h -- `saker --user NAME`: the login that put, get, stats
 * and requeue send to a server started with --auth-file.
 *
 * The user name comes from --user or SAKER_USER; the password from
 * --password-file FILE (which must not be open to group or others),
 * SAKER_PASSWORD, or a prompt on the terminal; never from an argument,
 * which every user of the machine can read with ps.  The options are
 * global to saker, as the --tls ones (saker.c takes them out of argv).
 */
#ifndef SAKER_CLIENT_LOGIN_H
#define SAKER_CLIENT_LOGIN_H

#include <stdbool.h>
#include <stddef.h>

/* Remove --user and --password-file from argv (up to a "--"); refuse a
 * password given as an argument.  Returns 0, or -1 after printing a usage
 * error. */
int client_login_take_options(int *argc, char **argv);

/* Is a login wanted (a user name given, or a password without one: an
 * error that client_login_request reports)? */
bool client_login_wanted(void);

/* The user name of the login, or NULL. */
const char *client_login_user(void);

/* The memcached ASCII login request ("set .saker-login 0 0 N" and the
 * data "user password") into a malloc'd buffer, its length in *len; the
 * password is looked up (file, environment, prompt) at the first call.
 * NULL after printing why, "saker CMD: ..." (cmd names the command). */
char *client_login_request(const char *cmd, size_t *len);

/* Overwrite and free a request from client_login_request. */
void client_login_free(char *req, size_t len);

/* The help lines for the options. */
#define CLIENT_LOGIN_HELP \
	"      --user NAME          log in as NAME (server has --auth-file);\n" \
	"                           or SAKER_USER\n" \
	"      --password-file FILE its password: FILE's first line (chmod 600);\n" \
	"                           or SAKER_PASSWORD, or asked on the terminal\n"

#endif
