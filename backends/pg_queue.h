/* pg_queue.h -- the PostgreSQL driver's queues in memory
 * (pg_queue.c). */
#ifndef SAKER_PG_QUEUE_H
#define SAKER_PG_QUEUE_H

#include "pg_int.h"
#include "pg_wire.h"

struct saker_queue *pg_find_name(struct pg_store *s, const char *name,
    size_t len);
struct saker_queue *pg_find_id(struct pg_store *s, int64_t id);
void pg_unhint(struct saker_queue *q);
void pg_mark_dirty(struct pg_store *s, struct saker_queue *q);
void pg_expired(struct pg_store *s, struct saker_queue *q, int64_t n);
void pg_unlist(struct saker_queue *q);
int pg_dead(struct pg_store *s, struct saker_queue *q);
void pg_hint(struct pg_store *s, struct saker_queue *q, const PGresult *res,
    int row);
void pg_head_params(const struct pg_store *s, const struct saker_queue *q,
    struct pgp *p, int64_t now_ms);
void pg_held_drop(struct pg_store *s, struct saker_queue *q);
void pg_held_drop_all(struct pg_store *s);
int pg_held_install(struct pg_store *s, struct saker_queue *q, PGresult *res,
    int64_t now_ms);
void pg_notify_local(struct pg_store *s, struct saker_queue *q);
void pg_gained(struct pg_store *s, struct saker_queue *q);
void pg_notify_all(struct pg_store *s);

#endif
