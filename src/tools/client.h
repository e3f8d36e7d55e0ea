/*
 * client.h -- the small memcache-protocol client behind `saker put`,
 * `saker get` and `saker stats` (saker(1)).
 */
#ifndef SAKER_CLIENT_H
#define SAKER_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#define CLIENT_DEFAULT_SERVER "127.0.0.1:22133"
#define CLIENT_CONNECT_MS 5000   /* connect timeout */
#define CLIENT_REPLY_MS 10000    /* reply timeout (added to get's -t) */

/* Connect to one server: "HOST:PORT", "[V6ADDR]:PORT", "HOST" (port
 * 22133) or a unix socket path (anything containing '/').  Returns the fd,
 * or -1 with a one-line reason in err. */
int client_connect(const char *server, char *err, size_t errlen);

int put_main(int argc, char **argv);
int get_main(int argc, char **argv);
int stats_main(int argc, char **argv);
int requeue_main(int argc, char **argv);

#endif
