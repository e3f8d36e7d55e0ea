/* postgres.h -- the PostgreSQL driver (postgres.c):
 * what it exports is the driver table.  (PostgreSQL's own server header
 * of this name is never meant: "" finds this one first.) */
#ifndef SAKER_POSTGRES_H
#define SAKER_POSTGRES_H

#include "saker/store.h"

extern const struct saker_store_driver saker_store_postgres;

#endif
