/* bytes.h -- fixed-width integers to and from bytes, of either order.
 *
 * Big-endian: keys that sort by memcmp (LMDB), record headers, checksummed
 * fields, the binary memcache protocol.  Little-endian: the redo journal.
 * These lay out bytes on disk and on the wire: never change what they
 * produce. */
#ifndef SAKER_BYTES_H
#define SAKER_BYTES_H
#include <stdint.h>

void saker_put_be16(unsigned char *p, uint16_t v);
void saker_put_be32(unsigned char *p, uint32_t v);
void saker_put_be64(unsigned char *p, uint64_t v);
uint16_t saker_get_be16(const unsigned char *p);
uint32_t saker_get_be32(const unsigned char *p);
uint64_t saker_get_be64(const unsigned char *p);

void saker_put_le32(unsigned char *p, uint32_t v);
void saker_put_le64(unsigned char *p, uint64_t v);
uint32_t saker_get_le32(const unsigned char *p);
uint64_t saker_get_le64(const unsigned char *p);

#endif
