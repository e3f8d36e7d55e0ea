/* intmap.h -- a map from 64-bit integer keys to pointers (open addressing,
 * linear probing, backward-shift deletion: no tombstones, so a map that
 * churns stays as fast as a fresh one).  Keys are ids a program makes
 * itself (arrival numbers), not input an attacker chooses: the hash is a
 * fixed multiplicative one, not hash.h's keyed SipHash.
 *
 * The struct is public so it can be embedded; zero it (or intmap_init)
 * before use.  Values are the caller's: pointers (never NULL), or, through
 * the *_u64 functions, 64-bit integers (never 0), not both in one map. */
#ifndef SAKER_INTMAP_H
#define SAKER_INTMAP_H
#include <stddef.h>
#include <stdint.h>

struct intmap_ent {
	uint64_t key;
	/* 0: an empty slot.  An integer, so that a map of ids to ids needs
	 * no allocation per entry; a pointer is kept as its uintptr_t. */
	uint64_t value;
};

struct intmap {
	struct intmap_ent *e;
	size_t cap;		/* 0 or a power of two */
	size_t n;
};

void intmap_init(struct intmap *m);
/* Free the slots (not the values); the map is empty and usable again. */
void intmap_free(struct intmap *m);
/* Room for `more` more entries, so that that many intmap_put() of new
 * keys cannot fail.  0, or -1 when out of memory (the map is unchanged). */
int intmap_reserve(struct intmap *m, size_t more);
/* Insert or replace key's value (non-NULL).  0, or -1 when out of memory
 * (only when a new key needs room that intmap_reserve() did not make). */
int intmap_put(struct intmap *m, uint64_t key, void *value);
/* The value of key, or NULL. */
void *intmap_get(const struct intmap *m, uint64_t key);
/* Remove key; its value, or NULL when it was not there. */
void *intmap_del(struct intmap *m, uint64_t key);
/* Forget every entry, keeping the slots (no memory is freed). */
void intmap_clear(struct intmap *m);

/* The same for integer values (never 0): 0 stands for "not there". */
int intmap_put_u64(struct intmap *m, uint64_t key, uint64_t value);
uint64_t intmap_get_u64(const struct intmap *m, uint64_t key);
uint64_t intmap_del_u64(struct intmap *m, uint64_t key);
/* Remove every entry whose value is `value`; how many went. */
size_t intmap_del_value_u64(struct intmap *m, uint64_t value);
/* Every entry once, in no particular order: *pos starts at 0; 1 with the
 * next entry's key and value, 0 when there are no more.  The map must
 * not change during the walk. */
int intmap_next_u64(const struct intmap *m, size_t *pos, uint64_t *key,
    uint64_t *value);

static inline size_t
intmap_count(const struct intmap *m)
{
	return m->n;
}

#endif
