/* qtab.c -- a driver's queues by name and by id (see qtab.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "kit.h"
#include "qtab.h"

static size_t
name_slot(const struct kit_qtab *t, const char *name, size_t len)
{
	return (size_t)saker_hash(name, len) & (t->nbuckets - 1);
}

static void
link_name(struct kit_qtab *t, struct kit_qent *e)
{
	size_t n = name_slot(t, e->name, e->len);

	e->name_next = t->nb[n];
	t->nb[n] = e;
}

static void
link_id(struct kit_qtab *t, struct kit_qent *e)
{
	size_t i = kit_hash_id((uint64_t)e->id, t->nbuckets);

	e->id_next = t->ib[i];
	t->ib[i] = e;
}

static int
grow(struct kit_qtab *t)
{
	struct kit_qent **onb = t->nb, **oib = t->ib, *e, *next;
	size_t on = t->nbuckets, n = on != 0 ? on * 2 : 64, i;

	if (n < on)
		return -1;
	t->nb = calloc(n, sizeof(*t->nb));
	t->ib = calloc(n, sizeof(*t->ib));
	if (t->nb == NULL || t->ib == NULL) {
		free(t->nb);
		free(t->ib);
		t->nb = onb;
		t->ib = oib;
		return -1;
	}
	t->nbuckets = n;
	for (i = 0; i < on; i++)
		for (e = onb[i]; e != NULL; e = next) {
			next = e->name_next;
			link_name(t, e);
		}
	for (i = 0; i < on; i++)
		for (e = oib[i]; e != NULL; e = next) {
			next = e->id_next;
			link_id(t, e);
		}
	free(onb);
	free(oib);
	return 0;
}

int
kit_qtab_add(struct kit_qtab *t, struct kit_qent *e)
{
	if (t->count >= t->nbuckets && grow(t) != 0 && t->nbuckets == 0)
		return -1;
	link_name(t, e);
	link_id(t, e);
	t->count++;
	return 0;
}

static void
unlink_id(struct kit_qtab *t, struct kit_qent *e)
{
	struct kit_qent **pp = &t->ib[kit_hash_id((uint64_t)e->id, t->nbuckets)];

	while (*pp != NULL && *pp != e)
		pp = &(*pp)->id_next;
	if (*pp != NULL)
		*pp = e->id_next;
}

void
kit_qtab_remove(struct kit_qtab *t, struct kit_qent *e)
{
	struct kit_qent **pp;

	if (t->nbuckets == 0)
		return;
	pp = &t->nb[name_slot(t, e->name, e->len)];
	while (*pp != NULL && *pp != e)
		pp = &(*pp)->name_next;
	if (*pp == NULL)
		return;         /* not in the table */
	*pp = e->name_next;
	unlink_id(t, e);
	e->name_next = e->id_next = NULL;
	t->count--;
}

void
kit_qtab_set_id(struct kit_qtab *t, struct kit_qent *e, int64_t id)
{
	unlink_id(t, e);
	e->id = id;
	link_id(t, e);
}

struct kit_qent *
kit_qtab_by_name(const struct kit_qtab *t, const char *name, size_t len)
{
	struct kit_qent *e;

	if (t->nbuckets == 0)
		return NULL;
	for (e = t->nb[name_slot(t, name, len)]; e != NULL; e = e->name_next)
		if (e->len == len && memcmp(e->name, name, len) == 0)
			return e;
	return NULL;
}

struct kit_qent *
kit_qtab_by_id(const struct kit_qtab *t, int64_t id)
{
	struct kit_qent *e;

	if (t->nbuckets == 0)
		return NULL;
	for (e = t->ib[kit_hash_id((uint64_t)id, t->nbuckets)]; e != NULL;
	    e = e->id_next)
		if (e->id == id)
			return e;
	return NULL;
}

struct kit_qent *
kit_qtab_next(const struct kit_qtab *t, size_t *bucket,
    const struct kit_qent *e)
{
	if (e == NULL)
		*bucket = 0;            /* a new walk */
	else if (e->name_next != NULL)
		return e->name_next;
	else
		(*bucket)++;
	for (; *bucket < t->nbuckets; (*bucket)++)
		if (t->nb[*bucket] != NULL)
			return t->nb[*bucket];
	return NULL;
}

void
kit_qtab_free(struct kit_qtab *t)
{
	free(t->nb);
	free(t->ib);
	memset(t, 0, sizeof(*t));
}
