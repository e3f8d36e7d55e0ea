/* layer.c -- the core's only way to the store (store.h, THE LAYER): one
 * function per store call, so the core and the tools never reach into a
 * driver's vtable and every rule about storage has one place to live. */
#include "config.h"

#include "saker/store.h"

const char *
saker_store_name(const saker_store *s)
{
	return s->driver->name;
}

unsigned
saker_store_caps(const saker_store *s)
{
	return s->driver->caps;
}

const char *
saker_store_errmsg(saker_store *s)
{
	const char *e = s->driver->errmsg(s);

	return e != NULL ? e : "";
}

int
saker_store_queue_open(saker_store *s, const char *name, size_t len,
    bool create, void *queue_ctx, saker_queue **out)
{
	return s->driver->queue_open(s, name, len, create, queue_ctx, out);
}

int
saker_store_queue_delete(saker_store *s, saker_queue *q)
{
	return s->driver->queue_delete(s, q);
}

int
saker_store_queue_flush(saker_store *s, saker_queue *q)
{
	return s->driver->queue_flush(s, q);
}

int
saker_store_queues(saker_store *s, saker_queue_name_fn fn, void *arg)
{
	return s->driver->queues(s, fn, arg);
}

int
saker_store_queue_stats(saker_store *s, saker_queue *q,
    struct saker_queue_stats *st)
{
	return s->driver->queue_stats(s, q, st);
}

int
saker_store_take(saker_store *s, saker_queue *q, int mode, int64_t now_ms,
    saker_item_fn fn, void *arg)
{
	return s->driver->take(s, q, mode, now_ms, fn, arg);
}

int
saker_store_confirm(saker_store *s, saker_queue *q, uint64_t id)
{
	return s->driver->confirm(s, q, id);
}

int
saker_store_release(saker_store *s, saker_queue *q, uint64_t id)
{
	return s->driver->release(s, q, id);
}

int
saker_store_release_delayed(saker_store *s, saker_queue *q, uint64_t id,
    int64_t due_ms, int64_t now_ms)
{
	return s->driver->release_delayed(s, q, id, due_ms, now_ms);
}

int
saker_store_move(saker_store *s, saker_queue *q, uint64_t id, saker_queue *to)
{
	if (s->driver->move == NULL)
		return SAKER_EINVAL;
	return s->driver->move(s, q, id, to);
}

bool
saker_store_routes_expired(const saker_store *s)
{
	return s->driver->expire_to != NULL;
}

int
saker_store_expire_to(saker_store *s, saker_queue *q, const char *name,
    size_t len)
{
	if (s->driver->expire_to == NULL)
		return name == NULL ? SAKER_OK : SAKER_EINVAL;
	return s->driver->expire_to(s, q, name, len);
}

int
saker_store_promote(saker_store *s, int64_t now_ms, int64_t *next_due_ms)
{
	return s->driver->promote(s, now_ms, next_due_ms);
}

int
saker_store_flush_expired(saker_store *s, saker_queue *q, int64_t now_ms,
    uint64_t limit, uint64_t *removed)
{
	return s->driver->flush_expired(s, q, now_ms, limit, removed);
}

int
saker_store_iterate(saker_store *s, saker_queue *q, saker_item_fn fn,
    void *arg)
{
	return s->driver->iterate(s, q, fn, arg);
}

int
saker_store_commit(saker_store *s)
{
	return s->driver->commit(s);
}
