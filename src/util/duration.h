/* duration.h -- durations as people write them ("250ms", "5s", "1.5s", "2m"). */
#ifndef SAKER_DURATION_H
#define SAKER_DURATION_H
#include <stdint.h>

/* What a bare number (no suffix) means: each place keeps the unit it
 * had before durations took suffixes. */
#define DURATION_BARE_MS 1LL            /* config file, --sync periodic:MS */
#define DURATION_BARE_S  1000LL         /* driver options, other flags */

/*
 * The one duration grammar of saker: DIGITS[.DIGITS][UNIT], UNIT one of
 * ms, s, m, h; no unit means bare_ms milliseconds per unit.  The result,
 * in milliseconds, must be whole (1.5s yes, 1.5ms no) and at most max_ms.
 * No sign, no spaces, no exponent.  Overflow checked.  0, or -1 on error
 * (*out_ms untouched).
 */
int parse_duration(const char *s, int64_t bare_ms, int64_t max_ms,
    int64_t *out_ms);

#endif
