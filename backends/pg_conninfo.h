/* pg_conninfo.h -- the PostgreSQL driver's options and connection
 * string (pg_conninfo.c). */
#ifndef SAKER_PG_CONNINFO_H
#define SAKER_PG_CONNINFO_H

#include "pg_int.h"

int pg_list_n(const char *list);
void pg_params(struct pg_store *s, const char **kw, const char **val,
    size_t max);
void pg_rotate_past(struct pg_store *s, PGconn *c);
int pg_channel_opts(struct pg_store *s, const struct saker_store_opts *opts,
    char *err, size_t errlen);
int pg_parse_location(struct pg_store *s, const char *loc, char *err,
    size_t errlen);
extern const struct saker_store_option pg_options[];

#endif
