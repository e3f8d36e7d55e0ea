/* pg_sql.h -- the PostgreSQL driver's statements and schema
 * (pg_sql.c). */
#ifndef SAKER_PG_SQL_H
#define SAKER_PG_SQL_H

#include "pg_int.h"

int pg_prepare_all(struct pg_store *s);
int pg_session(struct pg_store *s);
int pg_check_schema(struct pg_store *s, bool create);
extern const char pg_fold_sql[];

#endif
