/* bench_report.h -- the result of a `saker bench` run (bench_int.h). */
#ifndef SAKER_BENCH_REPORT_H
#define SAKER_BENCH_REPORT_H

#include "bench_int.h"

int report(struct bench *b);

#endif
