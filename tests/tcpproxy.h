/* tcpproxy.h -- a TCP proxy for tests that fail the network on demand. */
#ifndef SAKER_TCPPROXY_H
#define SAKER_TCPPROXY_H

/*
 * Listens on 127.0.0.1 (a free port) and relays every connection to a
 * unix socket (a test cluster's PostgreSQL) from a thread of its own.
 * The mode says what the network does:
 *   TP_RELAY   relay both ways (connections frozen before go on);
 *   TP_FREEZE  a partition or a hung host: new connections are
 *              accepted, and nothing is relayed on any connection;
 *   TP_REFUSE  every connection is closed and new ones are refused
 *              (the listening socket is closed until the next RELAY).
 */
enum tp_mode { TP_RELAY, TP_FREEZE, TP_REFUSE };

struct tcpproxy;

/* NULL (and a reason on stderr) on failure. */
struct tcpproxy *tp_start(const char *unix_path);
int tp_port(const struct tcpproxy *p);
void tp_set_mode(struct tcpproxy *p, enum tp_mode m);
/* connections accepted so far */
unsigned tp_accepted(struct tcpproxy *p);
/* Stop the thread, close everything, free. NULL-safe. */
void tp_stop(struct tcpproxy *p);

#endif
