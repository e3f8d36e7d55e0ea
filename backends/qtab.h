/*
 * qtab.h -- a driver's table of its queues, by name and by numeric id.
 *
 * The SQLite and PostgreSQL drivers keep queues in rows with an id and
 * look them up both ways (by name for queue_open, by id for rows read
 * back).  The table is intrusive: the driver's queue struct embeds a
 * struct kit_qent, fills in name, len and id, and gets back from an entry
 * to its queue with KIT_QENT_QUEUE.  Both chains grow together, doubling
 * when the count reaches the bucket count; names hash with saker_hash()
 * (src/util/hash.h, keyed at random per process), since clients choose
 * them.
 */
#ifndef SAKER_BACKENDS_QTAB_H
#define SAKER_BACKENDS_QTAB_H

#include <stddef.h>
#include <stdint.h>

struct kit_qent {
	struct kit_qent *name_next, *id_next;
	const char *name;       /* not copied: owned by the driver's queue */
	size_t len;
	int64_t id;             /* change only through kit_qtab_set_id() */
};

struct kit_qtab {
	struct kit_qent **nb, **ib;  /* by name, by id; nbuckets each */
	size_t nbuckets;             /* 0 or a power of two */
	size_t count;
};

/* The queue struct of type `type` whose member `member` is entry e. */
#define KIT_QENT_QUEUE(e, type, member) \
	((type *)(void *)((char *)(e) - offsetof(type, member)))

/* Add e (name, len and id set).  -1 only when the table is empty and
 * cannot be allocated; a failed grow keeps the old, longer chains. */
int kit_qtab_add(struct kit_qtab *t, struct kit_qent *e);

/* Take e out of both chains (a no-op for an entry not in the table). */
void kit_qtab_remove(struct kit_qtab *t, struct kit_qent *e);

/* Give e a new id, moving it to its new id chain. */
void kit_qtab_set_id(struct kit_qtab *t, struct kit_qent *e, int64_t id);

struct kit_qent *kit_qtab_by_name(const struct kit_qtab *t, const char *name,
    size_t len);
struct kit_qent *kit_qtab_by_id(const struct kit_qtab *t, int64_t id);

/* Every entry once, in no order: e = NULL starts a walk (and resets
 * *bucket); then the next one after e, or NULL at the end.  Fetch the
 * next entry before freeing e. */
struct kit_qent *kit_qtab_next(const struct kit_qtab *t, size_t *bucket,
    const struct kit_qent *e);

/* Free the chains (not the entries). */
void kit_qtab_free(struct kit_qtab *t);

#endif /* SAKER_BACKENDS_QTAB_H */
