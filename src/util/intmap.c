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
		if (m->e[i].value == NULL)
			continue;
		for (k = slot(m->e[i].key, ncap); ne[k].value != NULL;
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
	for (k = slot(key, m->cap); m->e[k].value != NULL;
	    k = (k + 1) & (m->cap - 1))
		if (m->e[k].key == key)
			return k;
	return SIZE_MAX;
}

int
intmap_put(struct intmap *m, uint64_t key, void *value)
{
	size_t k = find(m, key);

	if (value == NULL)
		return -1;
	if (k != SIZE_MAX) {
		m->e[k].value = value;
		return 0;
	}
	if (intmap_reserve(m, 1) != 0)
		return -1;
	for (k = slot(key, m->cap); m->e[k].value != NULL;
	    k = (k + 1) & (m->cap - 1))
		;
	m->e[k].key = key;
	m->e[k].value = value;
	m->n++;
	return 0;
}

void *
intmap_get(const struct intmap *m, uint64_t key)
{
	size_t k = find(m, key);

	return k == SIZE_MAX ? NULL : m->e[k].value;
}

void *
intmap_del(struct intmap *m, uint64_t key)
{
	size_t k = find(m, key), j, home, mask;
	void *value;

	if (k == SIZE_MAX)
		return NULL;
	value = m->e[k].value;
	m->e[k].value = NULL;
	m->n--;
	/* backward shift: close the hole so every probe chain stays whole */
	mask = m->cap - 1;
	for (j = k;;) {
		j = (j + 1) & mask;
		if (m->e[j].value == NULL)
			break;
		home = slot(m->e[j].key, m->cap);
		/* move e[j] into the hole unless its home lies in (k, j] */
		if (((j - home) & mask) >= ((j - k) & mask)) {
			m->e[k] = m->e[j];
			m->e[j].value = NULL;
			k = j;
		}
	}
	return value;
}
