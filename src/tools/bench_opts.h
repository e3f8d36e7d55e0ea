/* bench_opts.h -- the command line of `saker bench` (bench_int.h). */
#ifndef SAKER_BENCH_OPTS_H
#define SAKER_BENCH_OPTS_H

#include "bench_int.h"

/* The names of the enums' values, indexed by them. */
extern const char *const mode_names[M_RETRY + 1];
extern const char *const proto_names[P_BS + 1];
extern const char *const fill_names[F_MISSING + 1];

int parse_opts(struct opts *o, int argc, char **argv);

#endif
