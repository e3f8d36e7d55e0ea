/* check_qconfig.c -- the --config file (qconfig.h), in-process: each
 * setting's accepted forms, the line-numbered refusal of a bad value, an
 * unreadable file, dead letters routed into a cycle, and which section a
 * queue gets. */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qconfig.h"
#include "testlib.h"

static char err[512];
static struct config *cf;

static struct config *
load(const char *text)
{
	char *path = tl_write_file("q.conf", text);
	struct queue_config d;

	memset(&d, 0, sizeof(d));
	d.max_open = 1;
	config_free(cf);
	err[0] = '\0';
	cf = config_load(path, &d, err, sizeof(err));
	free(path);
	return cf;
}

static void
teardown(void)
{
	config_free(cf);
	cf = NULL;
	tl_dir_teardown();
}

/* text must be refused with "q.conf:LINE: want" */
static void
refused(const char *text, const char *want)
{
	ck_assert_msg(load(text) == NULL, "accepted: %s", text);
	ck_assert_msg(strstr(err, want) != NULL, "\"%s\" lacks \"%s\"", err, want);
}

#define Q(name) config_for(cf, (name), strlen(name))

START_TEST(test_values)
{
	ck_assert_ptr_nonnull(load("max_items = 10\n"
	    "[queue a]\nmax_bytes = 64k\nmax_item_size = 1k\nmax_age = 1.5s\n"
	    "discard_old_when_full = on\nmax_open = 3\nopen_timeout = 250\n"
	    "max_deliveries = 5\nretry_backoff = 1s,10m\ndead_letter = a_graves\n"
	    "expire_to = a_late\n"
	    "[queue b*]\ndiscard_old_when_full = true\n"
	    "[queue bb*]\ndiscard_old_when_full = 1\n"));
	ck_assert_uint_eq(Q("a")->max_bytes, 65536);
	ck_assert_uint_eq(Q("a")->max_item_size, 1024);
	ck_assert_int_eq(Q("a")->max_age_ms, 1500);
	ck_assert(Q("a")->discard_old_when_full);
	ck_assert_uint_eq(Q("a")->max_open, 3);
	ck_assert_int_eq(Q("a")->open_timeout_ms, 250);	/* bare: ms */
	ck_assert_uint_eq(Q("a")->max_deliveries, 5);
	ck_assert_int_eq(Q("a")->retry_backoff_ms, 1000);
	ck_assert_int_eq(Q("a")->retry_backoff_max_ms, 600000);
	ck_assert_str_eq(Q("a")->dead_letter, "a_graves");
	ck_assert_str_eq(Q("a")->expire_to, "a_late");
	/* the section before any [queue]: the defaults of the others */
	ck_assert_uint_eq(Q("zzz")->max_items, 10);
	ck_assert(!Q("zzz")->discard_old_when_full);
	/* the longest matching prefix wins */
	ck_assert(Q("bx")->discard_old_when_full);
	ck_assert(Q("bbx")->discard_old_when_full);
	ck_assert(config_names_dead_letter(cf, "a_graves", 8));
	ck_assert(!config_names_dead_letter(cf, "a_late", 6));
	ck_assert(config_has_open_timeout(cf));

	/* every spelling of no */
	ck_assert_ptr_nonnull(load("[queue a]\ndiscard_old_when_full = off\n"
	    "[queue b]\ndiscard_old_when_full = no\n[queue c]\n"
	    "discard_old_when_full = false\n[queue d]\ndiscard_old_when_full = 0\n"
	    "[queue e]\ndiscard_old_when_full = yes\n"));
	ck_assert(!Q("a")->discard_old_when_full && !Q("b")->discard_old_when_full &&
	    !Q("c")->discard_old_when_full && !Q("d")->discard_old_when_full);
	ck_assert(Q("e")->discard_old_when_full);
	ck_assert(!config_has_open_timeout(cf));
}
END_TEST

/* A bad value: the file, the line and what the setting wants. */
START_TEST(test_bad_values)
{
	refused("[queue a]\nmax_bytes = lots\n",
	    "q.conf:2: max_bytes: max_bytes wants a size (e.g. 1048576, 64k, 1g)");
	refused("# c\n\n[queue a]\nmax_item_size = 1x\n",
	    "q.conf:4: max_item_size: max_item_size wants a size (e.g. 65536, 64k)");
	refused("[queue a]\ndiscard_old_when_full = maybe\n",
	    "q.conf:2: discard_old_when_full: discard_old_when_full wants yes or no");
	refused("[queue a]\nopen_timeout = soon\n",
	    "q.conf:2: open_timeout: open_timeout wants a duration (e.g. 30s, 1.5s;");
	refused("[queue a]\nexpire_to = bad/name//\n",
	    "q.conf:2: expire_to: expire_to wants a queue name");
	refused("[queue a]\ndead_letter = \n", "dead_letter wants a queue name");
	refused("[queue a]\nmax_open = 0\n", "max_open wants a number from 1 to 1000000");
	refused("[queue a]\nmax_deliveries = 65536\n",
	    "max_deliveries wants a number from 0 to 65535");
	refused("[queue a]\nretry_backoff = 10m,1s\n",
	    "retry_backoff wants BASE[,MAX], durations with MAX >= BASE");
	refused("[queue a]\nmax_itemz = 3\n", "q.conf:2: max_itemz: unknown setting (known: ");
}
END_TEST

/* dedup_window and max_dedup_ids: the defaults with no setting (5 minutes,
 * 100000, also for a config built without a file), durations within
 * 1 s .. 7 days, a section inherits them, no "unlimited". */
START_TEST(test_dedup)
{
	struct queue_config zero;

	ck_assert_ptr_nonnull(load("dedup_window = 10m\n"
	    "[queue a]\ndedup_window = 1s\nmax_dedup_ids = 7\n"
	    "[queue b]\nmax_dedup_ids = 100000000\ndedup_window = 168h\n"
	    "[queue c]\n"));
	ck_assert_int_eq(qconfig_dedup_window(Q("a")), 1000);
	ck_assert_uint_eq(qconfig_max_dedup_ids(Q("a")), 7);
	ck_assert_int_eq(qconfig_dedup_window(Q("b")), 604800000LL);
	ck_assert_uint_eq(qconfig_max_dedup_ids(Q("b")), 100000000u);
	ck_assert_int_eq(qconfig_dedup_window(Q("c")), 600000);
	ck_assert_uint_eq(qconfig_max_dedup_ids(Q("c")), 100000);
	ck_assert_int_eq(qconfig_dedup_window(Q("zzz")), 600000);
	memset(&zero, 0, sizeof(zero));
	ck_assert_int_eq(qconfig_dedup_window(&zero), 300000);
	ck_assert_uint_eq(qconfig_max_dedup_ids(&zero), 100000);

	refused("[queue a]\ndedup_window = 999ms\n",
	    "q.conf:2: dedup_window: dedup_window wants a duration from 1s to 168h");
	refused("dedup_window = 169h\n", "dedup_window wants a duration");
	refused("dedup_window = 0\n", "dedup_window wants a duration");
	refused("dedup_window = -5s\n", "dedup_window wants a duration");
	refused("[queue a]\nmax_dedup_ids = 0\n",
	    "q.conf:2: max_dedup_ids: max_dedup_ids wants a number from 1 to 100000000");
	refused("max_dedup_ids = 100000001\n", "max_dedup_ids wants a number");
	refused("max_dedup_ids = 99999999999999999999999\n",
	    "max_dedup_ids wants a number");
	refused("max_dedup_ids = lots\n", "max_dedup_ids wants a number");
}
END_TEST

/* Dead letters that would never come to rest: a chain into a cycle that
 * does not pass its start is named too. */
START_TEST(test_dead_letter_cycle_through)
{
	refused("[queue a]\nmax_deliveries = 1\ndead_letter = b\n"
	    "[queue b]\nmax_deliveries = 1\ndead_letter = c\n"
	    "[queue c]\nmax_deliveries = 1\ndead_letter = b\n",
	    "[queue a]: dead letters route into a cycle through [queue ");
	/* a chain that ends is fine */
	ck_assert_ptr_nonnull(load("[queue a]\nmax_deliveries = 1\ndead_letter = b\n"
	    "[queue b]\nmax_deliveries = 1\ndead_letter = c\n"
	    "[queue c]\nmax_deliveries = 0\n"));
}
END_TEST

/* A file that cannot be read: its name and why. */
START_TEST(test_unreadable)
{
	struct queue_config d;
	char *path = tl_strdupf("%s/missing.conf", tl_dir);

	memset(&d, 0, sizeof(d));
	d.max_open = 1;
	ck_assert_ptr_null(config_load(path, &d, err, sizeof(err)));
	ck_assert_msg(strstr(err, "missing.conf: No such file or directory") != NULL,
	    "%s", err);
	free(path);
	/* a directory opens but does not read */
	ck_assert_ptr_null(config_load(tl_dir, &d, err, sizeof(err)));
	ck_assert_msg(strstr(err, ": read error") != NULL, "%s", err);
}
END_TEST

int
main(void)
{
	Suite *su = suite_create("qconfig");
	TCase *tc = tcase_create("file");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, tl_dir_setup, teardown);
	tcase_add_test(tc, test_values);
	tcase_add_test(tc, test_bad_values);
	tcase_add_test(tc, test_dedup);
	tcase_add_test(tc, test_dead_letter_cycle_through);
	tcase_add_test(tc, test_unreadable);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
