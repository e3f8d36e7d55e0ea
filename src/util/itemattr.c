/* itemattr.c -- the item attribute record (itemattr.h). */
#include "config.h"

#include <string.h>

#include "itemattr.h"

/* Walk the entries of a version-1 record: false on a malformed one. */
static bool
walk(const unsigned char *p, size_t len, unsigned type,
    const unsigned char **val, size_t *vlen)
{
	size_t off = 1;

	while (off < len) {
		size_t n;

		if (len - off < 3)
			return false;
		n = (size_t)p[off + 1] << 8 | p[off + 2];
		if (len - off - 3 < n)
			return false;
		if (type != 0 && p[off] == type && val != NULL) {
			*val = p + off + 3;
			*vlen = n;
		}
		off += 3 + n;
	}
	return true;
}

bool
itemattr_valid(const void *rec, size_t len)
{
	const unsigned char *p = rec;

	if (len == 0)
		return true;
	if (p[0] != ITEMATTR_VERSION)
		return p[0] > ITEMATTR_VERSION;
	return walk(p, len, 0, NULL, NULL);
}

bool
itemattr_get(const void *rec, size_t len, unsigned type, const void **val,
    size_t *vlen)
{
	const unsigned char *p = rec, *v = NULL;
	size_t n = 0;

	if (len == 0 || p[0] != ITEMATTR_VERSION || type == 0 || type > 255)
		return false;
	if (!walk(p, len, type, &v, &n) || v == NULL)
		return false;
	*val = v;
	*vlen = n;
	return true;
}

size_t
itemattr_set(void *out, size_t cap, const void *rec, size_t len,
    unsigned type, const void *val, size_t vlen)
{
	const unsigned char *p = rec;
	unsigned char *o = out;
	size_t off, w = 1;

	if (type == 0 || type > 255 || vlen > 0xffff || cap < 1)
		return 0;
	if (len > 0 && (p[0] != ITEMATTR_VERSION || !walk(p, len, 0, NULL,
	    NULL)))
		return 0;
	o[0] = ITEMATTR_VERSION;
	/* keep every other entry as it is, in its order */
	for (off = 1; off < len; ) {
		size_t n = (size_t)p[off + 1] << 8 | p[off + 2];

		if (p[off] != type) {
			if (cap - w < 3 + n)
				return 0;
			memcpy(o + w, p + off, 3 + n);
			w += 3 + n;
		}
		off += 3 + n;
	}
	if (cap - w < 3 + vlen)
		return 0;
	o[w] = (unsigned char)type;
	o[w + 1] = (unsigned char)(vlen >> 8);
	o[w + 2] = (unsigned char)vlen;
	if (vlen > 0)
		memcpy(o + w + 3, val, vlen);
	return w + 3 + vlen;
}
