/* hashmap.c -- string-keyed open-addressing hash map with tombstones.
 * Keys hash with saker_hash(): seeded per process, since clients choose
 * queue names and linear probing turns a flood of names aimed at one
 * slot into O(n) lookups. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "hashmap.h"

struct slot {
	char *key;               /* NULL = empty; TOMB = deleted */
	size_t len;
	uint64_t hash;
	void *value;
};

struct hashmap {
	struct slot *slots;
	size_t cap;              /* power of two */
	size_t count;            /* live entries */
	size_t used;             /* live + tombstones */
};

static char tomb_marker;
#define TOMB (&tomb_marker)

struct hashmap *
hashmap_new(void)
{
	struct hashmap *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return NULL;
	m->cap = 16;
	m->slots = calloc(m->cap, sizeof(*m->slots));
	if (m->slots == NULL) {
		free(m);
		return NULL;
	}
	return m;
}

void
hashmap_free(struct hashmap *m)
{
	size_t i;

	if (m == NULL)
		return;
	for (i = 0; i < m->cap; i++)
		if (m->slots[i].key != NULL && m->slots[i].key != TOMB)
			free(m->slots[i].key);
	free(m->slots);
	free(m);
}

static struct slot *
find(const struct hashmap *m, const char *key, size_t len, uint64_t h)
{
	size_t mask = m->cap - 1, i = h & mask;

	for (;;) {
		struct slot *s = &m->slots[i];
		if (s->key == NULL)
			return NULL;
		if (s->key != TOMB && s->hash == h && s->len == len &&
		    memcmp(s->key, key, len) == 0)
			return s;
		i = (i + 1) & mask;
	}
}

static int
grow(struct hashmap *m)
{
	struct slot *old = m->slots;
	size_t oldcap = m->cap, i;
	size_t ncap = m->count * 4 > m->cap ? m->cap * 2 : m->cap;

	m->slots = calloc(ncap, sizeof(*m->slots));
	if (m->slots == NULL) {
		m->slots = old;
		return -1;
	}
	m->cap = ncap;
	m->used = m->count;
	for (i = 0; i < oldcap; i++) {
		struct slot *s = &old[i];
		size_t j;
		if (s->key == NULL || s->key == TOMB)
			continue;
		j = s->hash & (ncap - 1);
		while (m->slots[j].key != NULL)
			j = (j + 1) & (ncap - 1);
		m->slots[j] = *s;
	}
	free(old);
	return 0;
}

void *
hashmap_get(const struct hashmap *m, const char *key, size_t len)
{
	struct slot *s = find(m, key, len, saker_hash(key, len));

	return s != NULL ? s->value : NULL;
}

int
hashmap_put(struct hashmap *m, const char *key, size_t len, void *value)
{
	uint64_t h = saker_hash(key, len);
	struct slot *s = find(m, key, len, h);
	size_t i, mask;

	if (s != NULL) {
		s->value = value;
		return 0;
	}
	/* keep the load (tombstones included) under 1/2 */
	if ((m->used + 1) * 2 > m->cap && grow(m) != 0)
		return -1;
	mask = m->cap - 1;
	i = h & mask;
	while (m->slots[i].key != NULL && m->slots[i].key != TOMB)
		i = (i + 1) & mask;
	s = &m->slots[i];
	s->key = malloc(len + 1);
	if (s->key == NULL)
		return -1;
	memcpy(s->key, key, len);
	s->key[len] = '\0';
	s->len = len;
	s->hash = h;
	s->value = value;
	m->count++;
	m->used++;
	return 0;
}

void *
hashmap_del(struct hashmap *m, const char *key, size_t len)
{
	struct slot *s = find(m, key, len, saker_hash(key, len));
	void *v;

	if (s == NULL)
		return NULL;
	v = s->value;
	free(s->key);
	s->key = TOMB;
	s->value = NULL;
	m->count--;
	return v;
}

size_t
hashmap_count(const struct hashmap *m)
{
	return m->count;
}

int
hashmap_walk(const struct hashmap *m,
    int (*fn)(void *arg, const char *key, size_t len, void *value), void *arg)
{
	size_t i;
	int rc;

	for (i = 0; i < m->cap; i++) {
		struct slot *s = &m->slots[i];
		if (s->key == NULL || s->key == TOMB)
			continue;
		if ((rc = fn(arg, s->key, s->len, s->value)) != 0)
			return rc;
	}
	return 0;
}

int
hashmap_walk_from(const struct hashmap *m, size_t *pos,
    int (*fn)(void *arg, const char *key, size_t len, void *value), void *arg)
{
	size_t i;
	int rc;

	for (i = *pos; i < m->cap; i++) {
		struct slot *s = &m->slots[i];
		if (s->key == NULL || s->key == TOMB)
			continue;
		if ((rc = fn(arg, s->key, s->len, s->value)) != 0) {
			*pos = i + 1;
			return rc;
		}
	}
	*pos = 0;
	return 0;
}

size_t
hashmap_max_probe(const struct hashmap *m)
{
	size_t mask = m->cap - 1, i, d, max = 0;

	for (i = 0; i < m->cap; i++) {
		const struct slot *s = &m->slots[i];
		if (s->key == NULL || s->key == TOMB)
			continue;
		d = (i - (size_t)s->hash) & mask;
		if (d > max)
			max = d;
	}
	return max;
}
