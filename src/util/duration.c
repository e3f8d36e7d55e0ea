/* duration.c -- the one duration grammar of the config file, the driver
 * options and the command line. */
#include "config.h"

#include <string.h>

#include "duration.h"

/* More decimals than this could only spell a fraction of a millisecond
 * unless they are trailing zeros; nine keeps frac * mul within int64. */
#define FRAC_DIGITS_MAX 9

int
parse_duration(const char *s, int64_t bare_ms, int64_t max_ms, int64_t *out_ms)
{
	int64_t n = 0, frac = 0, denom = 1, mul, total;
	int digits = 0;

	if (s == NULL || *s < '0' || *s > '9' || max_ms < 0)
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (n > (INT64_MAX - (*s - '0')) / 10)
			return -1;
		n = n * 10 + (*s - '0');
	}
	if (*s == '.') {
		s++;
		if (*s < '0' || *s > '9')
			return -1;      /* "1." and "1.s" are typos */
		for (; *s >= '0' && *s <= '9'; s++) {
			if (digits == FRAC_DIGITS_MAX) {
				if (*s != '0')
					return -1;
				continue;
			}
			frac = frac * 10 + (*s - '0');
			denom *= 10;
			digits++;
		}
	}
	if (*s == '\0')
		mul = bare_ms;
	else if (strcmp(s, "ms") == 0)
		mul = 1;
	else if (strcmp(s, "s") == 0)
		mul = 1000;
	else if (strcmp(s, "m") == 0)
		mul = 60 * 1000;
	else if (strcmp(s, "h") == 0)
		mul = 3600 * 1000;
	else
		return -1;
	if (mul < 1 || mul > 3600 * 1000)
		return -1;
	/* frac < 10^9 and mul <= 3.6e6: the product fits */
	if (frac * mul % denom != 0)
		return -1;      /* finer than a millisecond */
	if (n > max_ms / mul)
		return -1;
	total = n * mul;        /* <= max_ms: no overflow */
	if (frac * mul / denom > max_ms - total)
		return -1;
	*out_ms = total + frac * mul / denom;
	return 0;
}
