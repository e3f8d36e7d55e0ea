/* check_http.c -- unit tests of the /metrics exposition helpers and of
 * the login throttle's table (login.h). */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "csrf.h"
#include "hash.h"
#include "http.h"
#include "log.h"
#include "login.h"

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


/* ------------------------------------------------------------ login.h */

#define T0 1000000

/* Issue 35: an IPv6 host changing the low 64 bits of its address is one
 * address; another /64 is another. */
START_TEST(test_login_ipv6_64)
{
	char a[64];
	int i;

	login_reset();
	for (i = 0; i < 3; i++) {
		snprintf(a, sizeof(a), "2001:db8:1:2::%x", i + 1);
		(void)login_failed(a, "u", 1, true, "text", T0);
	}
	/* the third failure makes the /64 owe 250 ms, for any user */
	ck_assert_int_eq(login_wait("2001:db8:1:2:ffff:1:2:3", "other", 5, T0), 250);
	ck_assert_int_eq(login_wait("2001:db8:1:3::1", "other", 5, T0), 0);
	ck_assert_int_eq(login_wait("2001:db8:1:2::9", "other", 5, T0 + 250), 0);
	/* an IPv4-mapped address is its IPv4 address */
	login_reset();
	for (i = 0; i < 3; i++)
		(void)login_failed("::ffff:10.0.0.1", "u", 1, true, "text", T0);
	ck_assert_int_eq(login_wait("10.0.0.1", "v", 1, T0), 250);
}
END_TEST

/* Issue 35, finding 2: a success forgets its own user's failures from
 * that address only. */
START_TEST(test_login_ok_own_user)
{
	login_reset();
	(void)login_failed("10.0.0.1", "admin", 5, true, "HTTP", T0);
	(void)login_failed("10.0.0.1", "admin", 5, true, "HTTP", T0);
	(void)login_failed("10.0.0.1", "bob", 3, true, "text", T0);
	ck_assert_int_eq(login_wait("10.0.0.1", "x", 1, T0), 250);
	login_ok("10.0.0.1", "bob", 3, T0);
	/* bob's one failure is gone: 2 left, nothing owed */
	ck_assert_int_eq(login_wait("10.0.0.1", "x", 1, T0), 0);
	(void)login_failed("10.0.0.1", "admin", 5, true, "HTTP", T0);
	ck_assert_int_eq(login_wait("10.0.0.1", "x", 1, T0), 250);
	/* another user's login changes nothing for admin */
	login_ok("10.0.0.1", "carol", 5, T0);
	ck_assert_int_eq(login_wait("10.0.0.1", "admin", 5, T0), 250);
	/* admin's from another address leaves these */
	login_ok("10.0.0.2", "admin", 5, T0);
	ck_assert_int_eq(login_wait("10.0.0.1", "x", 1, T0), 250);
	ck_assert_int_eq(login_wait("10.0.0.9", "admin", 5, T0), 250);
	login_ok("10.0.0.1", "admin", 5, T0);
	ck_assert_int_eq(login_wait("10.0.0.1", "admin", 5, T0), 0);
}
END_TEST

/* The table is static: a flood of 200,000 addresses and names costs no
 * memory, and an address that keeps failing keeps its count (entries
 * with the fewest failures go first). */
START_TEST(test_login_table_bounded)
{
	char a[64];
	int i;

	login_reset();
	log_set_level(LOG_LVL_ERROR);
	for (i = 0; i < 200000; i++) {
		snprintf(a, sizeof(a), "10.%d.%d.%d", (i >> 16) & 255, (i >> 8) & 255,
		    i & 255);
		(void)login_failed(a, a, strlen(a), true, "text", T0 + i / 100);
		if (i % 1000 == 0)
			(void)login_failed("192.0.2.1", "admin", 5, true, "text",
			    T0 + i / 100);
	}
	ck_assert_int_gt(login_wait("192.0.2.1", "x", 1, T0 + 2000), 0);
	log_set_level(LOG_LVL_WARN);
}

/* Issue 45, finding 2: 12 connections guessing `admin` from one address
 * made admin's own logins wait everywhere.  The user-wide delay is owed
 * only by addresses whose network (/24) failed lately. */
START_TEST(test_login_user_not_locked_out)
{
	int i;

	login_reset();
	for (i = 0; i < 12; i++)
		(void)login_failed("10.0.0.1", "admin", 5, true, "text", T0);
	ck_assert_int_eq(login_wait("10.0.0.1", "admin", 5, T0), 5000);
	/* the attacker's network neighbours wait for admin's delay */
	ck_assert_int_eq(login_wait("10.0.0.7", "admin", 5, T0), 5000);
	ck_assert_int_eq(login_wait("10.0.0.7", "bob", 3, T0), 0);
	/* admin from elsewhere is not held back (5000 on bd89b77) */
	ck_assert_int_eq(login_wait("10.0.1.7", "admin", 5, T0), 0);
	ck_assert_int_eq(login_wait("192.0.2.1", "admin", 5, T0), 0);
	/* an IPv6 /48 is one network, its /64s several addresses */
	login_reset();
	for (i = 0; i < 5; i++)
		(void)login_failed("2001:db8:1:1::1", "admin", 5, true, "text", T0);
	ck_assert_int_gt(login_wait("2001:db8:1:ffff::1", "admin", 5, T0), 0);
	ck_assert_int_eq(login_wait("2001:db8:1:ffff::1", "bob", 3, T0), 0);
	ck_assert_int_eq(login_wait("2001:db8:2::1", "admin", 5, T0), 0);
	/* Unix socket peers by uid (all one "unix" on bd89b77) */
	login_reset();
	for (i = 0; i < 5; i++)
		(void)login_failed("unix:uid=1000", "app", 3, true, "text", T0);
	ck_assert_int_gt(login_wait("unix:uid=1000", "x", 1, T0), 0);
	ck_assert_int_eq(login_wait("unix:uid=1001", "app", 3, T0), 0);
}
END_TEST

/* Issue 45, finding 3: 7,500 cheap failures from 2,500 fresh addresses
 * evicted admin's entry.  Unknown names make no user entries, user names
 * have slots of their own, and an entry that failed often outlives any
 * number that failed less. */
START_TEST(test_login_table_not_flushed)
{
	char a[64], u[32];
	int i;

	login_reset();
	log_set_level(LOG_LVL_ERROR);
	for (i = 0; i < 20; i++)
		(void)login_failed("192.0.2.1", "admin", 5, true, "text", T0);
	for (i = 0; i < 200000; i++) {
		snprintf(a, sizeof(a), "10.%d.%d.%d", (i >> 16) & 255, (i >> 8) & 255,
		    i & 255);
		snprintf(u, sizeof(u), "u%d", i);
		(void)login_failed(a, u, strlen(u), false, "text", T0 + 1000);
		(void)login_failed(a, "admin", 5, true, "text", T0 + 1000);
	}
	log_set_level(LOG_LVL_WARN);
	/* the guessing address, its network and admin all kept their 20 */
	ck_assert_int_eq(login_wait("192.0.2.1", "x", 1, T0 + 1000), 4000);
	ck_assert_int_gt(login_wait("192.0.2.9", "admin", 5, T0 + 1000), 0);
	/* the unknown names own nothing: a fresh network owes nothing for
	 * them, nor for admin */
	ck_assert_int_eq(login_wait("198.51.100.1", "u5", 2, T0 + 1000), 0);
	ck_assert_int_eq(login_wait("198.51.100.1", "admin", 5, T0 + 1000), 0);
}
END_TEST

/* Failures are logged at most once a second per address, with a count,
 * and 20 lines a second in all. */
START_TEST(test_login_log_rate)
{
	char a[64], path[] = "/tmp/saker-login-log-XXXXXX", *buf;
	int fd = mkstemp(path), i, lines = 0;
	FILE *f;
	size_t cap = 1 << 20, n;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(log_open(path), 0);
	login_reset();
	for (i = 0; i < 1000; i++)
		(void)login_failed("10.0.0.1", "u", 1, true, "text", T0 + i);
	for (i = 0; i < 100; i++) {
		snprintf(a, sizeof(a), "10.1.0.%d", i);
		(void)login_failed(a, "u", 1, true, "text", T0 + 1500);
	}
	(void)login_failed("10.0.0.1", "u", 1, true, "text", T0 + 2600);
	log_open("stderr");
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	buf = malloc(cap + 1);
	n = fread(buf, 1, cap, f);
	buf[n] = '\0';
	fclose(f);
	unlink(path);
	close(fd);
	for (char *p = buf; (p = strstr(p, "authentication failed")) != NULL; p++)
		lines++;
	/* 1 + 20 + 1 */
	ck_assert_int_eq(lines, 22);
	ck_assert_msg(strstr(buf, "; 1000 failed logins from that address since the "
	    "last such line") != NULL, "%s", buf);
	free(buf);
}
END_TEST
END_TEST


/* ------------------------------------------------------------- csrf.h */

/* The SipHash-2-4 paper's test vector. */
START_TEST(test_siphash_vector)
{
	uint8_t k[16], m[15];
	int i;

	for (i = 0; i < 16; i++)
		k[i] = (uint8_t)i;
	for (i = 0; i < 15; i++)
		m[i] = (uint8_t)i;
	ck_assert_uint_eq(saker_siphash(k, m, 15), 0xa129ca6149be45e5ull);
}
END_TEST

/* Issue 35: a token is its user's, and lives one to two periods. */
START_TEST(test_csrf_tokens)
{
	char t[CSRF_TOKEN_LEN + 1], u[CSRF_TOKEN_LEN + 1];
	int64_t now = (int64_t)1000 * CSRF_PERIOD_MS + 10;

	ck_assert_int_eq(csrf_init(), 0);
	csrf_token("root", 4, now, t);
	csrf_token("ops", 3, now, u);
	ck_assert_uint_eq(strlen(t), CSRF_TOKEN_LEN);
	ck_assert_str_ne(t, u);
	ck_assert(csrf_check("root", 4, t, now));
	ck_assert(!csrf_check("ops", 3, t, now));
	ck_assert(!csrf_check("", 0, t, now));
	ck_assert(csrf_check("root", 4, t, now + CSRF_PERIOD_MS));
	ck_assert(!csrf_check("root", 4, t, now + 2 * CSRF_PERIOD_MS));
	ck_assert(!csrf_check("root", 4, NULL, now));
	ck_assert(!csrf_check("root", 4, "short", now));
	t[0] = t[0] == '0' ? '1' : '0';
	ck_assert(!csrf_check("root", 4, t, now));
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
	tc = tcase_create("login");
	tcase_add_test(tc, test_login_ipv6_64);
	tcase_add_test(tc, test_login_ok_own_user);
	tcase_add_test(tc, test_login_table_bounded);
	tcase_add_test(tc, test_login_user_not_locked_out);
	tcase_add_test(tc, test_login_table_not_flushed);
	tcase_add_test(tc, test_login_log_rate);
	suite_add_tcase(s, tc);
	tc = tcase_create("csrf");
	tcase_add_test(tc, test_siphash_vector);
	tcase_add_test(tc, test_csrf_tokens);
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
