/* bench_load.h -- what each connection of `saker bench` sends next
 * (bench_int.h). */
#ifndef SAKER_BENCH_LOAD_H
#define SAKER_BENCH_LOAD_H

#include "bench_int.h"

void pump(struct conn *c);
void pump_all(struct bench *b);

#endif
