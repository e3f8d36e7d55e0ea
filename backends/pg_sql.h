/* pg_sql.h -- the PostgreSQL driver's statements and schema
 * (pg_sql.c). */
#ifndef SAKER_PG_SQL_H
#define SAKER_PG_SQL_H

#include "pg_int.h"

/* The advisory lock that saker_rotate() takes (try, exclusive) for a
 * rotation; a statement that must not miss a row being moved forward by
 * key takes it shared, in a statement of its own before (pg_doubt_redo()). */
#define PG_LOCK_ROTATE "7308604707263426419"
/* The advisory lock of the held rows' moves: a broker moving its own
 * held rows forward (P_SEG_MINE) takes it (try, exclusive) for its
 * batch, a lease sweep (P_SWEEP_LOCK) shared; a sweep that could not
 * have it may have missed a row being moved and covers its range again
 * (pg_tick()). */
#define PG_LOCK_MOVE "7308604707263426420"

int pg_prepare_all(struct pg_store *s);
int pg_session(struct pg_store *s);
int pg_check_schema(struct pg_store *s, bool create);
extern const char pg_fold_sql[];

#endif
