/* pg_batch.h -- the PostgreSQL driver's batch (pg_batch.c). */
#ifndef SAKER_PG_BATCH_H
#define SAKER_PG_BATCH_H

#include "pg_int.h"
#include "pg_wire.h"

void pg_batch_arrs(struct pg_store *s, void (*fn)(struct pg_arr *));
int pg_st_add(struct pg_store *s, int64_t qid, uint64_t id, int st);
int pg_st_open(struct pg_store *s, int64_t qid, uint64_t id, uint32_t dlv);
bool pg_writable(const struct pg_store *s);
bool pg_del_room(struct pg_store *s);
void pg_del_add(struct pg_store *s, int64_t qid, uint64_t id);
int pg_gone_add(struct pg_store *s, int64_t qid, uint64_t id);
void pg_bid_add(struct pg_store *s, const struct saker_queue *q,
    const void *key, size_t len, int64_t expires, int64_t now);
void pg_bid_del(struct pg_store *s, const struct saker_queue *q,
    const void *key, size_t len);
void pg_bid_out(struct pg_store *s, int64_t qid, const struct saker_item *it);
void pg_send_pending(struct pg_store *s, struct pg_pipe *pp);
void pg_pending_done(struct pg_store *s, struct pg_pipe *pp);
PGresult *pg_run(struct pg_store *s, int which, const struct pgp *p,
    const char *what);
PGresult *pg_run_alone(struct pg_store *s, int which, const struct pgp *p,
    const char *what);
int pg_flush(struct pg_store *s);
void pg_lose_batch(struct pg_store *s, int code);
int pg_begin(struct pg_store *s);
int pg_commit(saker_store *base);
int pg_commit_start(saker_store *base, bool *started);
int pg_commit_fd(saker_store *base);
int pg_commit_finish(saker_store *base);
/* Read the result of the batch in flight now, for commit_finish(). */
void pg_flight_wait(struct pg_store *s);
int pg_sync(saker_store *base);

#endif
