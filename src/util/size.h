/* size.h -- byte sizes as people write them ("64k", "1m", "2g"). */
#ifndef SAKER_SIZE_H
#define SAKER_SIZE_H
#include <stdint.h>

/* Parse a byte size like "1048576", "64k", "1m", "2g" (powers of 1024),
 * overflow checked.  0, or -1 on error. */
int parse_size(const char *s, uint64_t *out);

#endif
