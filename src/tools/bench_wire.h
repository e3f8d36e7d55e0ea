/* bench_wire.h -- requests of `saker bench` onto the wire (bench_int.h). */
#ifndef SAKER_BENCH_WIRE_H
#define SAKER_BENCH_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/util.h>

#include "bench_int.h"

bool get_hex(const char *p, int n, uint64_t *v);
struct req *ring_push(struct conn *c, enum rtype t, int q);
void send_bytes(struct conn *c, const void *p, size_t n);
void send_resp(struct conn *c, int argc, const char *const *argv,
    const size_t *lens);
void send_set(struct conn *c, int q, long delay_ms);
/* The set of item `seq` again (--resend). */
void send_set_again(struct conn *c, int q, uint64_t seq);
void send_get(struct conn *c, enum rtype t, int q);
void send_mget(struct conn *c);
void send_line(struct conn *c, enum rtype t, const char *fmt, ...);
/* The event (b->flush_ev, arg b) that writes at the end of a loop pass
 * what send_bytes() queued on plain connections. */
void flush_conns(evutil_socket_t fd, short what, void *arg);

#endif
