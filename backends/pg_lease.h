/* pg_lease.h -- the PostgreSQL driver's leases (pg_lease.c). */
#ifndef SAKER_PG_LEASE_H
#define SAKER_PG_LEASE_H

#include "pg_int.h"
#include "pg_wire.h"

bool pg_os_take(struct intmap *o, uint64_t id, int64_t qid);
bool pg_lease_ok(const struct pg_store *s, int64_t now_ms);
int pg_held_return(struct pg_store *s, struct saker_queue *q);
int pg_claim(struct pg_store *s, struct saker_queue *q, int n, int64_t now_ms);
int pg_claim_size(struct pg_store *s, struct saker_queue *q);
int pg_take_held(struct pg_store *s, struct saker_queue *q, int mode,
    int64_t now_ms, saker_item_fn fn, void *arg);
int pg_peek_held(struct pg_store *s, struct saker_queue *q, int64_t now_ms,
    saker_item_fn fn, void *arg);
int pg_run_leased(struct pg_store *s, int which, const struct pgp *p,
    const char *what, uint64_t id, const char *after);
void pg_vacuum_drop(struct pg_store *s, int64_t now_ms);
int pg_vacuum_tick(struct pg_store *s, int64_t now_ms);
void pg_vacuum_poll(struct pg_store *s, int64_t now_ms);
int pg_main_up(struct pg_store *s);
int pg_tick(saker_store *base, int64_t now_ms);
int pg_fd_ready(saker_store *base, int64_t now_ms);

#endif
