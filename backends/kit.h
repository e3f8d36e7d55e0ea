/*
 * kit.h -- small helpers the store drivers share: byte order, hashing, the
 * item checksum and a monotonic clock for a driver's own timers.
 *
 * Backend-local: drivers include this, saker/store.h and config.h, nothing
 * of the core.  (The core passes wall-clock time in as now_ms; kit_mono_ns()
 * is only for measuring durations such as commit time.)
 */
#ifndef SAKER_BACKENDS_KIT_H
#define SAKER_BACKENDS_KIT_H

#include <stddef.h>
#include <stdint.h>

/* Big-endian integers: keys that sort by memcmp, portable record headers. */
void kit_put_be32(unsigned char *p, uint32_t v);
void kit_put_be64(unsigned char *p, uint64_t v);
uint32_t kit_get_be32(const unsigned char *p);
uint64_t kit_get_be64(const unsigned char *p);

/* Little-endian integers: the redo journal's headers and records. */
void kit_put_le32(unsigned char *p, uint32_t v);
void kit_put_le64(unsigned char *p, uint64_t v);
uint32_t kit_get_le32(const unsigned char *p);
uint64_t kit_get_le64(const unsigned char *p);

/* A multiplicative hash of a 64-bit id into a power-of-two table of n
 * buckets. */
size_t kit_hash_id(uint64_t id, size_t n);

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

/* Monotonic nanoseconds, for timing a driver's own work. */
uint64_t kit_mono_ns(void);

#endif /* SAKER_BACKENDS_KIT_H */
