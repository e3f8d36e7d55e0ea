/* bench.h -- `saker bench`, the load generator. */
#ifndef SAKER_BENCH_H
#define SAKER_BENCH_H

int bench_main(int argc, char **argv);

#endif
