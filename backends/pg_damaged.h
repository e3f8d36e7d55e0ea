/* pg_damaged.h -- the PostgreSQL driver's damaged items
 * (pg_damaged.c). */
#ifndef SAKER_PG_DAMAGED_H
#define SAKER_PG_DAMAGED_H

#include "pg_int.h"

int pg_take_damaged(struct pg_store *s, struct saker_queue *q, int mode,
    PGresult *res, int64_t now_ms);
int pg_held_damaged(struct pg_store *s, struct saker_queue *q, int i,
    int64_t now_ms);

#endif
