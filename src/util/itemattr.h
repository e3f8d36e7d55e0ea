/* itemattr.h -- the item attribute record (store.h, ITEM ATTRIBUTES).
 *
 * An item's attributes beyond data, flags and times travel as one record
 * the drivers store without reading it:
 *
 *   version (1 byte, ITEMATTR_VERSION)
 *   then entries, each: type (1 byte), length (2 bytes, big-endian),
 *   that many bytes of value
 *
 * Entries appear at most once per type, in any order.  A reader skips
 * types it does not know (a newer build's attribute survives an older
 * build's release, move and dump byte-exact), and a record of a newer
 * version is kept as it is and read as having none of the known types.
 * Adding an attribute is a new type number here: no driver or on-disk
 * format changes.  The whole record is at most SAKER_ATTRS_MAX bytes. */
#ifndef SAKER_ITEMATTR_H
#define SAKER_ITEMATTR_H
#include <stdbool.h>
#include <stddef.h>

#define ITEMATTR_VERSION 1u

enum itemattr_type {
	ITEMATTR_ID = 1     /* the deduplication id of the set (1..128 bytes) */
};

/* Is rec[0..len) a well-formed record (len 0 included)?  A record of a
 * newer version is well-formed (opaque). */
bool itemattr_valid(const void *rec, size_t len);

/* The value of `type` in rec[0..len): true and *val, *vlen when there is
 * one; false when not (or the record is malformed or of a newer
 * version). */
bool itemattr_get(const void *rec, size_t len, unsigned type,
    const void **val, size_t *vlen);

/* Write into out[0..cap) the record rec[0..len) (0 for none) with `type`
 * set to val[0..vlen) (replacing an entry of that type).  Returns the new
 * record's length, or 0 when it would not fit cap, vlen is over 65535,
 * or rec is malformed or of a newer version. */
size_t itemattr_set(void *out, size_t cap, const void *rec, size_t len,
    unsigned type, const void *val, size_t vlen);

#endif
