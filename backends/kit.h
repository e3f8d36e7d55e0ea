/*
 * kit.h -- the item checksum, which only the store drivers use (byte
 * order, the table hash and the clock are src/util's: bytes.h, hash.h,
 * clock.h).  Backend-local: drivers include this, saker/store.h,
 * src/util and config.h, nothing of the core.
 */
#ifndef SAKER_BACKENDS_KIT_H
#define SAKER_BACKENDS_KIT_H

#include <stddef.h>
#include <stdint.h>

#include "bytes.h"

/*
 * CRC32C (Castagnoli), the checksum of a durable item.  Start with crc 0;
 * kit_crc32c(kit_crc32c(0, a, n), b, m) == kit_crc32c(0, ab, n + m).  Uses
 * the SSE4.2 instruction when the CPU has it, else a table.
 */
uint32_t kit_crc32c(uint32_t crc, const void *p, size_t len);

/* The checksum of a durable item whose store keeps the fields in columns
 * (SQLite, PostgreSQL): CRC32C over flags (be32), expires and created
 * (be64 each), then the data.  Position fields (queue, sequence, state,
 * due time) are left out: a move or a release changes them. */
uint32_t kit_item_crc(uint32_t flags, int64_t expires_ms, int64_t created_ms,
    const void *data, size_t len);

/* For the tests, which check that both ways agree: 1 = use the table,
 * 2 = the instruction if the CPU has it, 0 = pick.  Returns the way now
 * in use. */
int kit_crc32c_force(int force);

#endif /* SAKER_BACKENDS_KIT_H */
