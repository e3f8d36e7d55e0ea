/* hashmap.h -- a string-keyed hash map (open addressing, linear probing),
 * hashed with saker_hash() (hash.h): seeded per process.
 * Keys are copied; values are opaque pointers owned by the caller. */
#ifndef SAKER_HASHMAP_H
#define SAKER_HASHMAP_H
#include <stddef.h>
#include <stdint.h>

struct hashmap;

struct hashmap *hashmap_new(void);
/* Free the map (not the values). */
void hashmap_free(struct hashmap *m);
void *hashmap_get(const struct hashmap *m, const char *key, size_t len);
/* Insert or replace. Returns 0, or -1 when out of memory. */
int hashmap_put(struct hashmap *m, const char *key, size_t len, void *value);
/* Remove; returns the old value or NULL. */
void *hashmap_del(struct hashmap *m, const char *key, size_t len);
size_t hashmap_count(const struct hashmap *m);
/* Visit every entry; a non-zero return from fn stops and is returned.
 * The map must not be modified during the walk. */
int hashmap_walk(const struct hashmap *m,
    int (*fn)(void *arg, const char *key, size_t len, void *value), void *arg);
/* The same from slot *pos on (0: the start), to walk a big map a piece at
 * a time: when fn stops the walk, *pos is where the next piece starts;
 * at the end *pos is 0.  Between pieces the map may change: an entry
 * added, or all of them after a resize, may then be visited twice or
 * missed. */
int hashmap_walk_from(const struct hashmap *m, size_t *pos,
    int (*fn)(void *arg, const char *key, size_t len, void *value), void *arg);

/* The farthest any entry sits from its home slot: how many extra probes
 * the worst lookup costs (for the flooding test and diagnostics). */
size_t hashmap_max_probe(const struct hashmap *m);

#endif
