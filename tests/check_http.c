/* check_http.c -- unit tests of the /metrics exposition helpers. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "http.h"

/* The label value as /metrics writes it, NUL-terminated (caller frees). */
static char *
label(const char *s, size_t len)
{
	struct evbuffer *b = evbuffer_new();
	size_t n;
	char *out;

	ck_assert_ptr_nonnull(b);
	http_label_value(b, s, len);
	n = evbuffer_get_length(b);
	out = malloc(n + 1);
	ck_assert_ptr_nonnull(out);
	evbuffer_remove(b, out, n);
	out[n] = '\0';
	evbuffer_free(b);
	return out;
}

START_TEST(test_label_plain)
{
	char *v = label("jobs+a", 6);

	ck_assert_str_eq(v, "jobs+a");
	free(v);
}
END_TEST

/* A newline must not end the sample's line: the exposition format spells
 * it \n, as it spells a backslash \\ and a double quote \". */
START_TEST(test_label_escapes)
{
	static const char name[] = "a\nb\\c\"d";
	char *v = label(name, sizeof(name) - 1);

	ck_assert_str_eq(v, "a\\nb\\\\c\\\"d");
	ck_assert_ptr_null(strchr(v, '\n'));
	free(v);
}
END_TEST

static Suite *
http_suite(void)
{
	Suite *s = suite_create("http");
	TCase *tc = tcase_create("metrics");

	tcase_add_test(tc, test_label_plain);
	tcase_add_test(tc, test_label_escapes);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(http_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
