/* qtab.c -- a driver's queues by name and by id (see qtab.h): two of
 * src/util's hash maps, one keyed by the name, one by the id's 8 bytes. */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "kit.h"
#include "qtab.h"

static int
ensure(struct kit_qtab *t)
{
	if (t->by_name == NULL && (t->by_name = hashmap_new()) == NULL)
		return -1;
	if (t->by_id == NULL && (t->by_id = hashmap_new()) == NULL)
		return -1;
	return 0;
}

int
kit_qtab_add(struct kit_qtab *t, struct kit_qent *e)
{
	if (ensure(t) != 0)
		return -1;
	if (hashmap_put(t->by_name, e->name, e->len, e) != 0)
		return -1;
	if (hashmap_put(t->by_id, (const char *)&e->id, sizeof(e->id), e) != 0) {
		hashmap_del(t->by_name, e->name, e->len);
		return -1;
	}
	t->count++;
	return 0;
}

void
kit_qtab_remove(struct kit_qtab *t, struct kit_qent *e)
{
	bool in = false;

	if (t->by_name == NULL)
		return;
	/* each index only where it still leads to e: a newer entry of the
	 * same name or id stays */
	if (hashmap_get(t->by_name, e->name, e->len) == e) {
		hashmap_del(t->by_name, e->name, e->len);
		in = true;
	}
	if (hashmap_get(t->by_id, (const char *)&e->id, sizeof(e->id)) == e) {
		hashmap_del(t->by_id, (const char *)&e->id, sizeof(e->id));
		in = true;
	}
	if (in)
		t->count--;
}

int
kit_qtab_set_id(struct kit_qtab *t, struct kit_qent *e, int64_t id)
{
	/* the new key first: out of memory, e keeps its old id and place */
	if (ensure(t) != 0 ||
	    hashmap_put(t->by_id, (const char *)&id, sizeof(id), e) != 0)
		return -1;
	if (id != e->id &&
	    hashmap_get(t->by_id, (const char *)&e->id, sizeof(e->id)) == e)
		hashmap_del(t->by_id, (const char *)&e->id, sizeof(e->id));
	e->id = id;
	return 0;
}

struct kit_qent *
kit_qtab_by_name(const struct kit_qtab *t, const char *name, size_t len)
{
	return t->by_name != NULL ? hashmap_get(t->by_name, name, len) : NULL;
}

struct kit_qent *
kit_qtab_by_id(const struct kit_qtab *t, int64_t id)
{
	return t->by_id != NULL ?
	    hashmap_get(t->by_id, (const char *)&id, sizeof(id)) : NULL;
}

static int
first(void *arg, const char *key, size_t len, void *value)
{
	*(struct kit_qent **)arg = value;
	return 1;
}

struct kit_qent *
kit_qtab_next(const struct kit_qtab *t, size_t *pos,
    const struct kit_qent *e)
{
	struct kit_qent *out = NULL;

	if (e == NULL)
		*pos = 0;               /* a new walk */
	else if (*pos == 0)
		return NULL;            /* the walk has ended */
	if (t->by_name == NULL ||
	    hashmap_walk_from(t->by_name, pos, first, &out) == 0)
		return NULL;
	return out;
}

void
kit_qtab_free(struct kit_qtab *t)
{
	hashmap_free(t->by_name);
	hashmap_free(t->by_id);
	memset(t, 0, sizeof(*t));
}
