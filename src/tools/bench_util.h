/* bench_util.h -- failure, bit sets, delivery times, histograms and the
 * server's CPU, for every part of `saker bench` (bench_int.h). */
#ifndef SAKER_BENCH_UTIL_H
#define SAKER_BENCH_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "bench_int.h"

void fail(struct bench *b, const char *fmt, ...);
void *xrealloc(void *p, size_t n);
bool bits_test(const struct bits *bs, uint64_t i);
bool bits_test_set(struct bits *bs, uint64_t i);
void times_put(struct conn *c, uint64_t seq, uint64_t t);
uint64_t times_get(const struct conn *c, uint64_t seq);
void hist_add(struct hist *h, uint64_t v);
uint64_t hist_quantile(const struct hist *h, uint64_t ppm);
/* Samples below `ns` (the histogram's resolution: < 0.8 %). */
uint64_t hist_count_below(const struct hist *h, uint64_t ns);
/* The --server-pid process's user and system CPU so far; u->ok is false
 * without the option or when /proc does not tell. */
void server_cpu(const struct bench *b, struct cpu_use *u);

#endif
