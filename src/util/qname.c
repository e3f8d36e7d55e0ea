/* qname.c -- queue-name rules (docs/protocol.md, "Queue names"). */
#include "config.h"

#include <string.h>

#include "qname.h"

bool
saker_qname_stored_ok(const char *name, size_t len)
{
	size_t i;

	if (len == 0 || len > SAKER_QNAME_MAX || name[0] == '.')
		return false;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		/* printable ASCII is 0x21..0x7e once space is excluded */
		if (c <= 0x20 || c >= 0x7f || c == '/')
			return false;
	}
	return true;
}

bool
saker_qname_valid(const char *name, size_t len)
{
	/* '*' means "any" at the end of a queues= pattern (--auth-file):
	 * a queue named "jobs*" would be a name no pattern can grant
	 * alone (issue 35) */
	return saker_qname_stored_ok(name, len) && memchr(name, '*', len) == NULL;
}

size_t
saker_qname_parent_len(const char *name, size_t len)
{
	const char *plus = memchr(name, '+', len);

	if (plus == NULL || plus == name)
		return 0;
	return (size_t)(plus - name);
}
