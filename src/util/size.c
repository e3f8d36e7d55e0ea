/* size.c -- byte sizes as people write them (--max-item-size, --config). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "size.h"

int
parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;
	uint64_t mul = 1;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return -1;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': mul = 1024ull; end++; break;
	case 'm': case 'M': mul = 1024ull * 1024; end++; break;
	case 'g': case 'G': mul = 1024ull * 1024 * 1024; end++; break;
	default: return -1;
	}
	if (*end != '\0' || v > UINT64_MAX / mul)
		return -1;
	*out = v * mul;
	return 0;
}
