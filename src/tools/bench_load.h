/* bench_load.h -- what each connection of `saker bench` sends next
 * (bench_int.h). */
#ifndef SAKER_BENCH_LOAD_H
#define SAKER_BENCH_LOAD_H

#include "bench_int.h"

void pump(struct conn *c);
/* --resend: the answer to a set of c: stored, or not (item seq of queue q,
 * sent at sent_ns, is to be sent again, after the backoff). */
void resend_stored(struct conn *c);
void resend_later(struct conn *c, uint64_t seq, int q, uint64_t sent_ns);
void pump_all(struct bench *b);

#endif
