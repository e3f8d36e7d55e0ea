/* intmap.c -- integer-keyed map (intmap.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "intmap.h"

#define MIN_CAP 64

static size_t
slot(uint64_t key, size_t cap)
{
	/* Fibonacci hashing: the high bits of key * 2^64/phi spread
	 * consecutive ids over the table */
	return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 32) & (cap - 1);
}

void
intmap_init(struct intmap *m)
{
	memset(m, 0, sizeof(*m));
}

void
intmap_free(struct intmap *m)
{
	free(m->e);
	intmap_init(m);
}

/* Rehash into a table of ncap slots (a power of two, more than n). */
static int
resize(struct intmap *m, size_t ncap)
{
	struct intmap_ent *ne;
	size_t i, k;

	if (ncap > SIZE_MAX / sizeof(*ne))
		return -1;
	if ((ne = calloc(ncap, sizeof(*ne))) == NULL)
		return -1;
	for (i = 0; i < m->cap; i++) {
		if (m->e[i].value == 0)
			continue;
		for (k = slot(m->e[i].key, ncap); ne[k].value != 0;
		    k = (k + 1) & (ncap - 1))
			;
		ne[k] = m->e[i];
	}
	free(m->e);
	m->e = ne;
	m->cap = ncap;
	return 0;
}

int
intmap_reserve(struct intmap *m, size_t more)
{
	size_t ncap = m->cap != 0 ? m->cap : MIN_CAP;

	if (more > SIZE_MAX / 2 - m->n)
		return -1;
	/* at most half full: short probe chains */
	while ((m->n + more) * 2 > ncap) {
		if (ncap > SIZE_MAX / 2)
			return -1;
		ncap *= 2;
	}
	return ncap == m->cap ? 0 : resize(m, ncap);
}

/* The slot of key, or SIZE_MAX. */
static size_t
find(const struct intmap *m, uint64_t key)
{
	size_t k;

	if (m->cap == 0)
		return SIZE_MAX;
	for (k = slot(key, m->cap); m->e[k].value != 0;
	    k = (k + 1) & (m->cap - 1))
		if (m->e[k].key == key)
			return k;
	return SIZE_MAX;
}

int
intmap_put_u64(struct intmap *m, uint64_t key, uint64_t value)
{
	size_t k = find(m, key);

	if (value == 0)
		return -1;
	if (k != SIZE_MAX) {
		m->e[k].value = value;
		return 0;
	}
	if (intmap_reserve(m, 1) != 0)
		return -1;
	for (k = slot(key, m->cap); m->e[k].value != 0;
	    k = (k + 1) & (m->cap - 1))
		;
	m->e[k].key = key;
	m->e[k].value = value;
	m->n++;
	return 0;
}

uint64_t
intmap_get_u64(const struct intmap *m, uint64_t key)
{
	size_t k = find(m, key);

	return k == SIZE_MAX ? 0 : m->e[k].value;
}

/* Empty slot k and close the hole (backward shift), so that every probe
 * chain stays whole.  Only slots after k (cyclically) move into it. */
static void
del_at(struct intmap *m, size_t k)
{
	size_t j, home, mask = m->cap - 1;

	m->e[k].value = 0;
	m->n--;
	for (j = k;;) {
		j = (j + 1) & mask;
		if (m->e[j].value == 0)
			break;
		home = slot(m->e[j].key, m->cap);
		/* move e[j] into the hole unless its home lies in (k, j] */
		if (((j - home) & mask) >= ((j - k) & mask)) {
			m->e[k] = m->e[j];
			m->e[j].value = 0;
			k = j;
		}
	}
}

uint64_t
intmap_del_u64(struct intmap *m, uint64_t key)
{
	size_t k = find(m, key);
	uint64_t value;

	if (k == SIZE_MAX)
		return 0;
	value = m->e[k].value;
	del_at(m, k);
	return value;
}

size_t
intmap_del_value_u64(struct intmap *m, uint64_t value)
{
	size_t i = 0, n = 0;

	while (i < m->cap) {
		if (m->e[i].value != 0 && m->e[i].value == value) {
			/* slot i may refill from a later one: look again */
			del_at(m, i);
			n++;
		} else {
			i++;
		}
	}
	return n;
}

int
intmap_next_u64(const struct intmap *m, size_t *pos, uint64_t *key,
    uint64_t *value)
{
	for (; *pos < m->cap; (*pos)++)
		if (m->e[*pos].value != 0) {
			*key = m->e[*pos].key;
			*value = m->e[*pos].value;
			(*pos)++;
			return 1;
		}
	return 0;
}

void
intmap_clear(struct intmap *m)
{
	if (m->cap > 0)
		memset(m->e, 0, m->cap * sizeof(*m->e));
	m->n = 0;
}

/* Pointers are kept as integers: NULL (no value) is 0 on every platform
 * this builds on, and a uintptr_t fits in 64 bits. */
int
intmap_put(struct intmap *m, uint64_t key, void *value)
{
	if (value == NULL)
		return -1;
	return intmap_put_u64(m, key, (uint64_t)(uintptr_t)value);
}

void *
intmap_get(const struct intmap *m, uint64_t key)
{
	return (void *)(uintptr_t)intmap_get_u64(m, key);
}

void *
intmap_del(struct intmap *m, uint64_t key)
{
	return (void *)(uintptr_t)intmap_del_u64(m, key);
}
