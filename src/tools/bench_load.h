/* bench_load.h -- what each connection of `saker bench` sends next
 * (bench_int.h). */
#ifndef SAKER_BENCH_LOAD_H
#define SAKER_BENCH_LOAD_H

#include "bench_int.h"

void pump(struct conn *c);
/* --resend: item seq of queue q, sent `tries` times and not acknowledged,
 * is to be sent again (after a backoff). */
void resend_later(struct conn *c, uint64_t seq, int q, unsigned tries);
void pump_all(struct bench *b);

#endif
