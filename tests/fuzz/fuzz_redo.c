/* fuzz_redo.c -- fuzz target: the SQLite driver's journal records (backends/sqlite_redo.c) applied to a small database. */
#include "config.h"

#include <string.h>

#include "fuzz.h"

#ifdef HAVE_SQLITE
#include <sqlite3.h>

#include "../../backends/sqlite_redo.h"

/*
 * A record comes from the store's own journal, behind a check seeded with
 * the store's id, so one written by anyone else never gets here; this
 * target hands sr_apply() any bytes all the same.  The table stands for
 * the driver's: statements that write with integer, blob and text values,
 * one that only reads and a transaction statement, which a record must
 * never run.  Whatever a record asks, sr_apply() returns SQLITE_OK or an
 * error with a one-line reason, and the database stays usable.
 */
static const char *const redo_sql[] = {
	"INSERT INTO t(a, b, c) VALUES (?1, ?2, ?3)",
	"DELETE FROM t WHERE a = ?1",
	"UPDATE t SET b = ?2, c = ?3 WHERE a = ?1",
	"SELECT count(*) FROM t WHERE a = ?1",
	"SAVEPOINT f",
};
#define NSTMT ((int)(sizeof(redo_sql) / sizeof(redo_sql[0])))

static sqlite3 *db;
static sqlite3_stmt *st[NSTMT];

static void
setup(void)
{
	int i;

	FUZZ_CHECK(sqlite3_open(":memory:", &db) == SQLITE_OK);
	FUZZ_CHECK(sqlite3_exec(db, "CREATE TABLE t(a INTEGER PRIMARY KEY,"
	    " b BLOB NOT NULL, c TEXT)", NULL, NULL, NULL) == SQLITE_OK);
	for (i = 0; i < NSTMT; i++)
		FUZZ_CHECK(sqlite3_prepare_v2(db, redo_sql[i], -1, &st[i],
		    NULL) == SQLITE_OK);
}

int
fuzz_redo(const uint8_t *data, size_t size)
{
	char err[256];
	int rc;

	if (db == NULL)
		setup();
	FUZZ_CHECK(sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK);
	err[0] = '\0';
	rc = sr_apply(st, NSTMT, data, size, err, sizeof(err));
	FUZZ_CHECK(rc == SQLITE_OK || (err[0] != '\0' &&
	    strchr(err, '\n') == NULL));
	/* no savepoint, no transaction change: the record ran inside ours */
	FUZZ_CHECK(!sqlite3_get_autocommit(db));
	FUZZ_CHECK(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK);
	return 0;
}
#else
int
fuzz_redo(const uint8_t *data, size_t size)
{
	(void)data;
	(void)size;
	return 0;
}
#endif
