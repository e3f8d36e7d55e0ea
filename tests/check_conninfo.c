/* check_conninfo.c -- the PostgreSQL driver's location (pg_conninfo.h),
 * without a database: the connection string split into what libpq gets
 * and the driver's own keys (schema=, lease=), in keyword and URI form,
 * the refusals, and the connection parameters with a host list rotated
 * past a host that timed out. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "pg_conninfo.h"

static struct pg_store *s;
static char err[256];

static void
setup(void)
{
	ck_assert_ptr_nonnull(s = calloc(1, sizeof(*s)));
	err[0] = '\0';
}

static void
teardown(void)
{
	free(s->conninfo);
	free(s->schema);
	if (s->copts != NULL)
		PQconninfoFree(s->copts);
	free(s);
}

static int
parse(const char *loc)
{
	free(s->conninfo);
	s->conninfo = NULL;
	return pg_parse_location(s, loc, err, sizeof(err));
}

/* Keyword form: our keys come out, the rest goes to libpq as written. */
START_TEST(test_keywords)
{
	ck_assert_int_eq(parse("host=db dbname=saker schema=q1 lease=30"), SAKER_OK);
	ck_assert_str_eq(s->conninfo, "host=db dbname=saker");
	ck_assert_str_eq(s->schema, "q1");
	ck_assert_int_eq(s->lease_ms, 30000);

	/* durations as everywhere; spaces around '=' kept for libpq */
	ck_assert_int_eq(parse("  lease=1.5s\thost = db  port=5433 "), SAKER_OK);
	ck_assert_str_eq(s->conninfo, "host = db port=5433");
	ck_assert_int_eq(s->lease_ms, 1500);

	/* quoted values with escapes: ours unquoted, libpq's verbatim */
	ck_assert_int_eq(parse("password='a b\\'c' schema='my_q' user=x\\ y"),
	    SAKER_OK);
	ck_assert_str_eq(s->conninfo, "password='a b\\'c' user=x\\ y");
	ck_assert_str_eq(s->schema, "my_q");

	ck_assert_int_eq(parse(""), SAKER_OK);
	ck_assert_str_eq(s->conninfo, "");
}
END_TEST

/* URI form: our keys are query parameters, the others stay. */
START_TEST(test_uri)
{
	ck_assert_int_eq(parse("postgresql://u@h:5433/db?schema=q&sslmode=disable"
	    "&lease=2m&application_name=x"), SAKER_OK);
	ck_assert_str_eq(s->conninfo,
	    "postgresql://u@h:5433/db?sslmode=disable&application_name=x");
	ck_assert_str_eq(s->schema, "q");
	ck_assert_int_eq(s->lease_ms, 120000);

	ck_assert_int_eq(parse("postgres://h/db?schema=only"), SAKER_OK);
	ck_assert_str_eq(s->conninfo, "postgres://h/db");
	ck_assert_str_eq(s->schema, "only");

	ck_assert_int_eq(parse("postgres://h/db"), SAKER_OK);
	ck_assert_str_eq(s->conninfo, "postgres://h/db");

	/* empty parameters dropped, a key without '=' passed on */
	ck_assert_int_eq(parse("postgres://h/db?&sslmode=require&&schemax&"),
	    SAKER_OK);
	ck_assert_str_eq(s->conninfo, "postgres://h/db?sslmode=require&schemax");

	ck_assert_int_eq(parse("postgres://h/db?schema=Bad"), SAKER_EINVAL);
	ck_assert_str_eq(err, "postgres: schema must be 1-50 lower-case letters,"
	    " digits or '_': Bad");
	ck_assert_ptr_null(s->conninfo);
}
END_TEST

/* What is refused, and the message. */
START_TEST(test_refusals)
{
	ck_assert_int_eq(parse("host=db dbname"), SAKER_EINVAL);
	ck_assert_str_eq(err, "postgres: bad connection string near 'dbname'"
	    " (expected key=value)");
	ck_assert_int_eq(parse("host=db password='open"), SAKER_EINVAL);
	ck_assert_str_eq(err, "postgres: unterminated quote in connection string");
	ck_assert_int_eq(parse("schema=Q"), SAKER_EINVAL);
	ck_assert_str_eq(err, "postgres: schema must be 1-50 lower-case letters,"
	    " digits or '_': Q");
	ck_assert_int_eq(parse("schema=1q"), SAKER_EINVAL);	/* digit first */
	ck_assert_int_eq(parse("schema=''"), SAKER_EINVAL);	/* empty */
	ck_assert_int_eq(parse("schema=abcdefghijabcdefghijabcdefghijabcdefghij"
	    "abcdefghijk"), SAKER_EINVAL);			/* 51 */
	ck_assert_int_eq(parse("schema=abcdefghijabcdefghijabcdefghijabcdefghij"
	    "abcdefghij"), SAKER_OK);				/* 50 */
	ck_assert_int_eq(parse("lease=0.05"), SAKER_EINVAL);
	ck_assert_str_eq(err, "postgres: lease must be a duration from 0.1 to"
	    " 86400 seconds (e.g. 30, 1.5s, 2m): 0.05");
	ck_assert_int_eq(parse("lease=86401"), SAKER_EINVAL);
	ck_assert_int_eq(parse("lease=soon"), SAKER_EINVAL);
	ck_assert_int_eq(parse("lease=0.1"), SAKER_OK);
	ck_assert_int_eq(s->lease_ms, 100);
}
END_TEST

/* The value of keyword k among pg_params()'s, or NULL. */
static const char *
param(const char *const *kw, const char *const *val, const char *k)
{
	for (; *kw != NULL; kw++, val++)
		if (strcmp(*kw, k) == 0)
			return *val;
	return NULL;
}

static void
use(const char *conninfo, int nhosts)
{
	char *e = NULL;

	ck_assert_ptr_nonnull(s->copts = PQconninfoParse(conninfo, &e));
	s->nhosts = nhosts;
	strcpy(s->ka_user_timeout, "2000");
}

/* Our TCP keepalive and user timeout unless the string sets them; the
 * host, hostaddr and port lists start at host_rot. */
START_TEST(test_params)
{
	const char *kw[64], *val[64];

	use("host=a,b,c port=1,2,3 hostaddr=10.0.0.1,10.0.0.2,10.0.0.3 dbname=x", 3);
	pg_params(s, kw, val, 64);
	ck_assert_str_eq(param(kw, val, "tcp_user_timeout"), "2000");
	ck_assert_str_eq(param(kw, val, "keepalives"), "1");
	ck_assert_str_eq(param(kw, val, "keepalives_idle"), "10");
	ck_assert_str_eq(param(kw, val, "host"), "a,b,c");
	ck_assert_str_eq(param(kw, val, "dbname"), "x");

	s->host_rot = 1;
	pg_params(s, kw, val, 64);
	ck_assert_str_eq(param(kw, val, "host"), "b,c,a");
	ck_assert_str_eq(param(kw, val, "port"), "2,3,1");
	ck_assert_str_eq(param(kw, val, "hostaddr"), "10.0.0.2,10.0.0.3,10.0.0.1");
	s->host_rot = 5;				/* modulo the list */
	pg_params(s, kw, val, 64);
	ck_assert_str_eq(param(kw, val, "host"), "c,a,b");
	s->host_rot = 3;
	pg_params(s, kw, val, 64);
	ck_assert_str_eq(param(kw, val, "host"), "a,b,c");
	PQconninfoFree(s->copts);

	/* the string's own settings win; a port list of another length
	 * is not rotated */
	use("host=a,,c port=5432 keepalives=0 tcp_user_timeout=500", 3);
	s->host_rot = 1;
	pg_params(s, kw, val, 64);
	ck_assert_str_eq(param(kw, val, "keepalives"), "0");
	ck_assert_str_eq(param(kw, val, "tcp_user_timeout"), "500");
	ck_assert_str_eq(param(kw, val, "keepalives_count"), "3");
	ck_assert_str_eq(param(kw, val, "host"), ",c,a");	/* empty moves too */
	ck_assert_str_eq(param(kw, val, "port"), "5432");

	/* a short array: cut, NULL-terminated */
	pg_params(s, kw, val, 3);
	ck_assert_ptr_nonnull(kw[1]);
	ck_assert_ptr_null(kw[2]);
	ck_assert_ptr_null(val[2]);
}
END_TEST

START_TEST(test_list_n)
{
	ck_assert_int_eq(pg_list_n(""), 1);
	ck_assert_int_eq(pg_list_n("a"), 1);
	ck_assert_int_eq(pg_list_n("a,b"), 2);
	ck_assert_int_eq(pg_list_n(",,"), 3);
}
END_TEST

int
main(void)
{
	Suite *su = suite_create("conninfo");
	TCase *tc = tcase_create("location");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_keywords);
	tcase_add_test(tc, test_uri);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_params);
	tcase_add_test(tc, test_list_n);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
