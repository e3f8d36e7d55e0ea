/* bench_reply.h -- reading the replies of a `saker bench` run
 * (bench_int.h). */
#ifndef SAKER_BENCH_REPLY_H
#define SAKER_BENCH_REPLY_H

#include <event2/bufferevent.h>

#include "bench_int.h"

/* The read callback of every connection (arg: its struct conn). */
void on_read(struct bufferevent *bev, void *arg);

#endif
