/* check_duration.c -- the one duration grammar (src/util/duration.c) that
 * the config file, the driver options and the command line share. */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "duration.h"

#define TEN_YEARS_MS 315360000000LL

static const struct row {
	const char *in;
	int64_t bare_ms;        /* unit of a bare number */
	int64_t max_ms;         /* the caller's bound */
	int ok;
	int64_t want;           /* ms, when ok */
} rows[] = {
	/* the examples, in every bare unit */
	{ "250ms", DURATION_BARE_MS, TEN_YEARS_MS, 1, 250 },
	{ "250ms", DURATION_BARE_S, TEN_YEARS_MS, 1, 250 },
	{ "5s", DURATION_BARE_MS, TEN_YEARS_MS, 1, 5000 },
	{ "1.5s", DURATION_BARE_MS, TEN_YEARS_MS, 1, 1500 },
	{ "1.5s", DURATION_BARE_S, TEN_YEARS_MS, 1, 1500 },
	{ "2m", DURATION_BARE_S, TEN_YEARS_MS, 1, 120000 },
	{ "2h", DURATION_BARE_MS, TEN_YEARS_MS, 1, 7200000 },
	{ "0.5m", DURATION_BARE_MS, TEN_YEARS_MS, 1, 30000 },
	{ "0.25h", DURATION_BARE_MS, TEN_YEARS_MS, 1, 900000 },
	{ "0.001s", DURATION_BARE_MS, TEN_YEARS_MS, 1, 1 },
	{ "1.500000000s", DURATION_BARE_MS, TEN_YEARS_MS, 1, 1500 },
	{ "1.5000000000000s", DURATION_BARE_MS, TEN_YEARS_MS, 1, 1500 },
	{ "0", DURATION_BARE_MS, TEN_YEARS_MS, 1, 0 },
	{ "0s", DURATION_BARE_S, TEN_YEARS_MS, 1, 0 },
	{ "007s", DURATION_BARE_S, TEN_YEARS_MS, 1, 7000 },
	/* a bare number keeps the caller's unit */
	{ "500", DURATION_BARE_MS, TEN_YEARS_MS, 1, 500 },
	{ "30", DURATION_BARE_S, TEN_YEARS_MS, 1, 30000 },
	{ "0.25", DURATION_BARE_S, TEN_YEARS_MS, 1, 250 },
	{ "0.05", DURATION_BARE_S, TEN_YEARS_MS, 1, 50 },
	{ "1.5", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },   /* 1.5 ms */
	/* finer than a millisecond */
	{ "0.0001s", DURATION_BARE_S, TEN_YEARS_MS, 0, 0 },
	{ "1.0005", DURATION_BARE_S, TEN_YEARS_MS, 0, 0 },
	{ "1.5ms", DURATION_BARE_S, TEN_YEARS_MS, 0, 0 },
	{ "1.0000000001s", DURATION_BARE_S, TEN_YEARS_MS, 0, 0 },
	/* garbage */
	{ "", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "s", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "ms", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ ".5s", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "1.", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "1.s", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "1..5s", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "1.5.0s", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "5 s", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ " 5s", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "5s ", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "5S", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "5sec", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "5d", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "5us", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "1m30s", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "1e3", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "0x10", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "1,5s", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "abc", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	/* negatives and signs */
	{ "-1", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "-1s", DURATION_BARE_S, TEN_YEARS_MS, 0, 0 },
	{ "+1s", DURATION_BARE_S, TEN_YEARS_MS, 0, 0 },
	{ "-0", DURATION_BARE_S, TEN_YEARS_MS, 0, 0 },
	/* overflow: digits past int64, and products past it */
	{ "9223372036854775807", DURATION_BARE_MS, INT64_MAX, 1, INT64_MAX },
	{ "9223372036854775808", DURATION_BARE_MS, INT64_MAX, 0, 0 },
	{ "99999999999999999999999999", DURATION_BARE_MS, INT64_MAX, 0, 0 },
	{ "9223372036854775807s", DURATION_BARE_MS, INT64_MAX, 0, 0 },
	{ "9223372036854775h", DURATION_BARE_MS, INT64_MAX, 0, 0 },
	{ "2562047788015h", DURATION_BARE_MS, INT64_MAX, 1, 2562047788015LL * 3600000 },
	{ "2562047788015.999h", DURATION_BARE_MS, INT64_MAX, 0, 0 },
	/* the caller's bound, exactly and one past */
	{ "3600s", DURATION_BARE_S, 3600000, 1, 3600000 },
	{ "3600", DURATION_BARE_S, 3600000, 1, 3600000 },
	{ "60m", DURATION_BARE_S, 3600000, 1, 3600000 },
	{ "1h", DURATION_BARE_S, 3600000, 1, 3600000 },
	{ "3600.001", DURATION_BARE_S, 3600000, 0, 0 },
	{ "3600001ms", DURATION_BARE_S, 3600000, 0, 0 },
	{ "1.0001h", DURATION_BARE_S, 3600000, 0, 0 },
	{ "61m", DURATION_BARE_S, 3600000, 0, 0 },
	{ "87600h", DURATION_BARE_MS, TEN_YEARS_MS, 1, TEN_YEARS_MS },
	{ "87600.001h", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "315360000001", DURATION_BARE_MS, TEN_YEARS_MS, 0, 0 },
	{ "1ms", DURATION_BARE_MS, 0, 0, 0 },
	{ "0ms", DURATION_BARE_MS, 0, 1, 0 },
	/* a caller's nonsense is refused, not trusted */
	{ "1", 0, TEN_YEARS_MS, 0, 0 },
	{ "1", DURATION_BARE_MS, -1, 0, 0 },
};
#define NROWS ((int)(sizeof(rows) / sizeof(rows[0])))

START_TEST(test_table)
{
	const struct row *r = &rows[_i];
	int64_t out = -12345;
	int rc = parse_duration(r->in, r->bare_ms, r->max_ms, &out);

	if (r->ok) {
		ck_assert_msg(rc == 0, "'%s' (bare %lld ms, max %lld): refused",
		    r->in, (long long)r->bare_ms, (long long)r->max_ms);
		ck_assert_msg(out == r->want, "'%s': %lld ms, want %lld",
		    r->in, (long long)out, (long long)r->want);
	} else {
		ck_assert_msg(rc == -1, "'%s' (bare %lld ms, max %lld): "
		    "accepted as %lld ms", r->in, (long long)r->bare_ms,
		    (long long)r->max_ms, (long long)out);
		ck_assert_msg(out == -12345, "'%s': refused but wrote %lld",
		    r->in, (long long)out);
	}
}
END_TEST

START_TEST(test_null)
{
	int64_t out = 7;

	ck_assert_int_eq(parse_duration(NULL, DURATION_BARE_MS, 1000, &out), -1);
	ck_assert_int_eq(out, 7);
}
END_TEST

static Suite *
duration_suite(void)
{
	Suite *s = suite_create("duration");
	TCase *tc = tcase_create("table");

	tcase_add_loop_test(tc, test_table, 0, NROWS);
	tcase_add_test(tc, test_null);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(duration_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
