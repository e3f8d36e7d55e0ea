/*
 * qtab.h -- a driver's table of its queues, by name and by numeric id.
 *
 * The SQLite, PostgreSQL and LMDB drivers keep queues with an id and look
 * them up both ways (by name for queue_open, by id for rows read back).
 * The driver's queue struct embeds a struct kit_qent, fills in name, len
 * and id, and gets back from an entry to its queue with KIT_QENT_QUEUE.
 * Both indexes are src/util's hashmap (keyed per process, since clients
 * choose the names); a zeroed struct kit_qtab is an empty table.
 */
#ifndef SAKER_BACKENDS_QTAB_H
#define SAKER_BACKENDS_QTAB_H

#include <stddef.h>
#include <stdint.h>

struct hashmap;

struct kit_qent {
	const char *name;       /* not copied: owned by the driver's queue */
	size_t len;
	int64_t id;             /* change only through kit_qtab_set_id() */
};

struct kit_qtab {
	struct hashmap *by_name, *by_id;  /* NULL until the first add */
	size_t count;
};

/* The queue struct of type `type` whose member `member` is entry e. */
#define KIT_QENT_QUEUE(e, type, member) \
	((type *)(void *)((char *)(e) - offsetof(type, member)))

/* Add e (name, len and id set).  -1 when out of memory (e not added). */
int kit_qtab_add(struct kit_qtab *t, struct kit_qent *e);

/* Take e out of both indexes (a no-op for an entry not in the table). */
void kit_qtab_remove(struct kit_qtab *t, struct kit_qent *e);

/* Give e a new id.  -1 when out of memory: e keeps its old id. */
int kit_qtab_set_id(struct kit_qtab *t, struct kit_qent *e, int64_t id);

struct kit_qent *kit_qtab_by_name(const struct kit_qtab *t, const char *name,
    size_t len);
struct kit_qent *kit_qtab_by_id(const struct kit_qtab *t, int64_t id);

/* Every entry once, in no order: e = NULL starts a walk (and resets
 * *pos); then the next one after e, or NULL at the end.  Fetch the next
 * entry before freeing e; removing e is allowed, adding may not be. */
struct kit_qent *kit_qtab_next(const struct kit_qtab *t, size_t *pos,
    const struct kit_qent *e);

/* Free the indexes (not the entries). */
void kit_qtab_free(struct kit_qtab *t);

#endif /* SAKER_BACKENDS_QTAB_H */
