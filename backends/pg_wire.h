/* pg_wire.h -- the PostgreSQL driver's wire layer (pg_wire.c):
 * connections, round trips, parameters, pipelines, and the callbacks
 * through which it reports to the driver above it. */
#ifndef SAKER_PG_WIRE_H
#define SAKER_PG_WIRE_H

#include "pg_int.h"

#define PG_MAX_PARAMS 12

/* a statement's parameters, all binary (pg_pp_*()) */
struct pgp {
	int n;
	const char *v[PG_MAX_PARAMS];
	int l[PG_MAX_PARAMS];
	int f[PG_MAX_PARAMS];
	unsigned char b[PG_MAX_PARAMS][8];
};

#define OID_BYTEA 17
#define OID_INT8 20
#define OID_TEXT 25

#define PG_PIPE_MAX 16

/* several statements in one round trip (pg_pipe_*()) */
struct pg_pipe {
	int n;
	const char *what[PG_PIPE_MAX];
	PGresult *res[PG_PIPE_MAX];	/* kept results, by statement */
	int bad;			/* first failed statement, or -1 */
	PGresult *bad_res;
	int qsync;			/* index of P_QSYNC, or -1 */
	bool sendfail;			/* a statement could not be sent */
	bool synced;			/* its sync point is sent */
};

/*
 * What the wire layer (pg_wire.c) tells the driver above it, which it
 * cannot call: the driver sets s->wcb before the first connection.
 */
struct pg_wire_cb {
	/* The statement connection is gone (called before its links are
	 * dropped): what its session claimed is void. */
	void (*conn_lost)(struct pg_store *s);
	/* A statement of the batch failed, or its session went: roll the
	 * batch back, fail its commit with `code`. */
	void (*lose_batch)(struct pg_store *s, int code);
	/* The statement connection (re)connected: set its session up;
	 * not SAKER_OK: it was dropped, s->code says why. */
	int (*session_up)(struct pg_store *s);
	/* Another broker's NOTIFY named queue name[0..len). */
	void (*notified)(struct pg_store *s, const char *name, size_t len);
	/* Notifications may have been missed (LISTEN answered again). */
	void (*missed)(struct pg_store *s);
	/* The statement connection is needed now: read the result of the
	 * batch in flight first (pg_exec()). */
	void (*flight_wait)(struct pg_store *s);
};

int pg_errf(struct pg_store *s, int code, const char *fmt, ...);
void pg_oneline(char *dst, size_t len, const char *msg);
void pg_link_drop(struct pg_store *s, struct pg_link *l, bool abort);
void pg_deadline(struct pg_store *s);
bool pg_flight_watch(struct pg_store *s, uint64_t sent_ns);
bool pg_flight_overdue(const struct pg_store *s);
bool pg_next(struct pg_store *s, PGresult **res);
PGresult *pg_exec(struct pg_store *s, const char *sql);
int pg_simple(struct pg_store *s, const char *sql, const char *what);
int pg_down(struct pg_store *s);
int pg_fail(struct pg_store *s, const PGresult *res, const char *what);
void pg_pp_i64(struct pgp *p, int64_t x);
void pg_pp_bin(struct pgp *p, const void *d, size_t len);
void pg_pp_null(struct pgp *p);
void pg_pp_str(struct pgp *p, const char *str);
int64_t pg_rv_i64(const PGresult *r, int row, int col);
uint64_t pg_rv_changed(const PGresult *r);
bool pg_arr_reserve(struct pg_arr *a, size_t more);
void pg_arr_put(struct pg_arr *a, const void *d, size_t len);
void pg_arr_i64(struct pg_arr *a, int64_t x);
void pg_arr_reset(struct pg_arr *a);
void pg_arr_free(struct pg_arr *a);
void pg_pp_arr(struct pgp *p, struct pg_arr *a);
void pg_pipe_init(struct pg_pipe *pp);
void pg_pipe_clear(struct pg_pipe *pp);
bool pg_pipe_wait(struct pg_store *s, struct pg_pipe *pp);
bool pg_pipe_send(struct pg_store *s, struct pg_pipe *pp, int which,
    const char *sql, const struct pgp *p, const char *what);
int pg_pipe_fail(struct pg_store *s, struct pg_pipe *pp);
int pg_link_start(struct pg_store *s, struct pg_link *l, uint64_t wait_ns);
int pg_link_step(struct pg_store *s, struct pg_link *l);
int pg_link_wait(struct pg_store *s, struct pg_link *l, uint64_t wait_ns);
int pg_links(struct pg_store *s, int64_t now_ms);
bool pg_readable(PGconn *c);
int pg_attempt_failed(struct pg_store *s, int64_t now_ms);
int pg_listen_open(struct pg_store *s);
int pg_watch_fd(saker_store *base);

#endif
