/* hash.h -- the one hash of in-memory tables: SipHash-2-4, keyed.
 *
 * Queue names are chosen by clients, so every table keyed by them hashes
 * under a key drawn at random once per process (getrandom, else
 * /dev/urandom): names aimed at one bucket of one run land anywhere in
 * the next.  Not for anything on disk: a value changes between runs. */
#ifndef SAKER_HASH_H
#define SAKER_HASH_H
#include <stddef.h>
#include <stdint.h>

/* SipHash-2-4 of data under the 128-bit key k. */
uint64_t saker_siphash(const uint8_t k[16], const void *data, size_t len);

/* SipHash-2-4 under this process's random key: for hash tables. */
uint64_t saker_hash(const void *data, size_t len);

/* Fill p with n random bytes (getrandom, else /dev/urandom).  Returns 0,
 * or -1 when neither answers. */
int saker_random(void *p, size_t n);

#endif
