/*
 * sqlite_redo.h -- the SQLite driver's journal records (sqlite_redo.c).
 *
 * With --sync always the SQLite driver keeps one long transaction open
 * between checkpoints and makes each batch durable with one record in its
 * redo journal (journal.h), as the LMDB driver does.  A record lists the
 * batch's writing statements in the order they ran: each as its index in
 * the driver's statement table and the values bound to it.  Every writing
 * statement of the driver takes all of its inputs as bound values (none
 * reads the clock or a random number), so running the records' statements
 * in order on the database as of the last checkpoint gives back the
 * database every acknowledged batch left.
 *
 * PAYLOAD (journal.h frames it and checks it)
 *   u8  SR_FORMAT, then entries:
 *   'i' u8 param  i64 value            bind an integer
 *   'b' u8 param  u32 len  len bytes   bind a blob
 *   't' u8 param  u32 len  len bytes   bind text
 *   'x' u8 statement                   run it with those bindings
 *   little-endian.  A statement's index means the driver's table
 *   (sqlite.c, S_*) of SR_FORMAT: renumbering it needs a new SR_FORMAT.
 */
#ifndef SAKER_SQLITE_REDO_H
#define SAKER_SQLITE_REDO_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "journal.h"

#define SR_FORMAT	1

/* Append one entry to the journal's current batch.  Returns 0 or ENOMEM. */
int sr_int(struct lj *j, int param, int64_t v);
int sr_bytes(struct lj *j, char kind, int param, const void *p, size_t n);
int sr_exec(struct lj *j, int which);

/*
 * Run one record's statements: st[0 .. nst-1] are the driver's prepared
 * statements (NULL where one is not prepared).  Only statements that
 * write are run; anything else in a record (a transaction statement, an
 * unknown index, a parameter out of range, a cut entry) refuses the
 * record.  Returns SQLITE_OK or an SQLite result code, with a message in
 * err.
 */
int sr_apply(sqlite3_stmt *const *st, int nst, const unsigned char *p,
    size_t len, char *err, size_t errlen);

#endif
