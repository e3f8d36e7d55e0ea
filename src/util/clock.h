/* clock.h -- the two clocks saker uses. */
#ifndef SAKER_CLOCK_H
#define SAKER_CLOCK_H
#include <stdint.h>

/* Wall-clock milliseconds since the Unix epoch: due times and expiry, which
 * must survive restarts, are measured on this clock. */
int64_t saker_now_ms(void);

/* The same wall clock in microseconds: for arming a timer at a due
 * millisecond without the up-to-1-ms error of a truncated `now`. */
int64_t saker_now_us(void);

/* Monotonic nanoseconds: for measuring durations (latency, commit time). */
uint64_t saker_mono_ns(void);

/* This thread's time on a CPU and time spent runnable but waiting for one
 * (/proc/thread-self/schedstat), in ns: what a slow loop turn spent
 * working, waiting for the machine, or (the rest) asleep.  Returns 0, or -1
 * where the kernel does not say. */
int saker_thread_sched(uint64_t *cpu_ns, uint64_t *wait_ns);

#endif
