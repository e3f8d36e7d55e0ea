/* pg_item.h -- the PostgreSQL driver's items (pg_item.c). */
#ifndef SAKER_PG_ITEM_H
#define SAKER_PG_ITEM_H

#include "pg_int.h"

void pg_saw(struct pg_store *s, int64_t now_ms);
int pg_put(saker_store *base, saker_queue *q, const struct saker_item *item,
    int64_t now_ms);
void pg_row_item(const PGresult *res, int row, struct saker_item *it,
    saker_item_state state);
bool pg_row_sound(const PGresult *res, int row);
void pg_row_view(const PGresult *res, int row, const int col[5],
    struct saker_item *it);
int pg_expired_item(struct pg_store *s, struct saker_queue *q,
    const struct saker_item *it, int64_t now_ms);
int pg_expired_lost(struct pg_store *s, struct saker_queue *q, int err);
int pg_reinsert(struct pg_store *s, struct saker_queue *q, const PGresult *r);
int pg_head_back(struct pg_store *s, struct saker_queue *q, int mode,
    const PGresult *res);

#endif
