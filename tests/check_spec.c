/* check_spec.c -- the store registry's half of a --store spec
 * (TYPE[,KEY=VALUE...][:LOCATION], backends/registry.c): every refusal
 * saker_store_open() makes before a driver sees the spec, with the message
 * a user reads, and the error codes' words (saker_strerror). */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "saker/store.h"

static char err[512];

/* saker_store_open(spec) must fail with rc and a message holding want. */
static void
refused(const char *spec, int rc, const char *want)
{
	struct saker_store_opts o;
	saker_store *s = (saker_store *)&o;	/* must come back NULL */

	memset(&o, 0, sizeof(o));
	o.create = true;
	err[0] = '\0';
	ck_assert_int_eq(saker_store_open(spec, &o, &s, err, sizeof(err)), rc);
	ck_assert_ptr_null(s);
	ck_assert_msg(strstr(err, want) != NULL, "spec '%s': \"%s\" lacks \"%s\"",
	    spec != NULL ? spec : "(null)", err, want);
}

START_TEST(test_spec_shape)
{
	refused(NULL, SAKER_EINVAL, "empty store spec (expected TYPE[:LOCATION]; "
	    "types: memory");
	refused("", SAKER_EINVAL, "empty store spec");
	refused("nosuch:x", SAKER_EINVAL, "unknown store type 'nosuch' "
	    "(compiled-in types: memory");
	refused("memory:/tmp/x", SAKER_EINVAL, "store type 'memory' takes no location");
#ifdef HAVE_LMDB
	refused("lmdb", SAKER_EINVAL, "store type 'lmdb' needs a location: lmdb:DIR");
	refused("lmdb:", SAKER_EINVAL, "store type 'lmdb' needs a location: lmdb:DIR");
#endif
#ifdef HAVE_SQLITE
	refused("sqlite", SAKER_EINVAL, "store type 'sqlite' needs a location: "
	    "sqlite:FILE");
#endif
}
END_TEST

/* Driver options: known keys only, each with a value of its type and
 * range; the message names the options or the expected value. */
START_TEST(test_options)
{
	refused("memory,bogus=1", SAKER_EINVAL, "store type 'memory' has no "
	    "option 'bogus' (options: max-memory)");
	refused("memory,max-memory", SAKER_EINVAL, "store option memory.max-memory "
	    "needs a value: max-memory=VALUE (");
	refused("memory,max-memory=lots", SAKER_EINVAL, "store option "
	    "memory.max-memory: bad value 'lots' (");
	refused("memory,max-memory=", SAKER_EINVAL, "bad value ''");
#ifdef HAVE_SQLITE
	refused("sqlite,x=1:/tmp/nowhere.db", SAKER_EINVAL, "store type 'sqlite' "
	    "takes no options (got 'x')");
#endif
#ifdef HAVE_LMDB
	refused("lmdb,checkpoint-bytes=0:/tmp/nowhere", SAKER_EINVAL,
	    "store option lmdb.checkpoint-bytes: bad value '0'");
#endif
#ifdef HAVE_POSTGRES
	refused("postgres,schema=:host=nowhere", SAKER_EINVAL,
	    "store option postgres.schema: bad value ''");
	refused("postgres,timeout=50ms:host=nowhere", SAKER_EINVAL,
	    "store option postgres.timeout: bad value '50ms'");
	refused("postgres,lease=forever:host=nowhere", SAKER_EINVAL,
	    "store option postgres.lease: bad value 'forever'");
#endif
}
END_TEST

/* The caller's options (driver_opts) go through the same checks. */
START_TEST(test_caller_options)
{
	static const char *const bad[] = { "max-memory=-1", NULL };
	static const char *const good[] = { "max-memory=1m", NULL };
	struct saker_store_opts o;
	saker_store *s;

	memset(&o, 0, sizeof(o));
	o.create = true;
	o.driver_opts = bad;
	ck_assert_int_eq(saker_store_open("memory", &o, &s, err, sizeof(err)),
	    SAKER_EINVAL);
	ck_assert_msg(strstr(err, "memory.max-memory: bad value '-1'") != NULL,
	    "%s", err);
	o.driver_opts = good;
	ck_assert_int_eq(saker_store_open("memory", &o, &s, err, sizeof(err)),
	    SAKER_OK);
	saker_store_close(s);
	/* and the spec's own wins over them */
	ck_assert_int_eq(saker_store_open("memory,max-memory=2m", &o, &s, err,
	    sizeof(err)), SAKER_OK);
	saker_store_close(s);
}
END_TEST

/* Which driver a spec names, and the list of them. */
START_TEST(test_lookup)
{
	ck_assert_ptr_nonnull(strstr(saker_store_driver_list(), "memory"));
	ck_assert_str_eq(saker_store_spec_driver("memory")->name, "memory");
	ck_assert_str_eq(saker_store_spec_driver("memory,max-memory=1m")->name,
	    "memory");
	ck_assert_ptr_null(saker_store_spec_driver("nosuch:x"));
	ck_assert_ptr_null(saker_store_spec_driver(NULL));
	ck_assert(saker_store_driver_takes(saker_store_spec_driver("memory"),
	    "max-memory"));
	ck_assert(!saker_store_driver_takes(saker_store_spec_driver("memory"),
	    "schema"));
}
END_TEST

START_TEST(test_strerror)
{
	ck_assert_str_eq(saker_strerror(SAKER_OK), "success");
	ck_assert_str_eq(saker_strerror(SAKER_EEMPTY), "queue empty");
	ck_assert_str_eq(saker_strerror(SAKER_ENOTFOUND), "not found");
	ck_assert_str_eq(saker_strerror(SAKER_EINVAL), "invalid argument");
	ck_assert_str_eq(saker_strerror(SAKER_ENOMEM), "out of memory");
	ck_assert_str_eq(saker_strerror(SAKER_EFULL), "storage full");
	ck_assert_str_eq(saker_strerror(SAKER_EIO), "I/O error");
	ck_assert_str_eq(saker_strerror(SAKER_ECORRUPT),
	    "storage corrupt or not a saker store");
	ck_assert_str_eq(saker_strerror(SAKER_EVERSION),
	    "storage format is newer than this build");
	ck_assert_str_eq(saker_strerror(SAKER_ELOCKED),
	    "store is in use by another process");
	ck_assert_str_eq(saker_strerror(SAKER_EREADONLY), "store is read-only");
	ck_assert_str_eq(saker_strerror(SAKER_EINDOUBT),
	    "commit failed; its outcome is unknown");
	ck_assert_str_eq(saker_strerror(-999), "unknown error");
	ck_assert_str_eq(saker_strerror(1), "unknown error");
}
END_TEST

int
main(void)
{
	Suite *su = suite_create("spec");
	TCase *tc = tcase_create("registry");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_spec_shape);
	tcase_add_test(tc, test_options);
	tcase_add_test(tc, test_caller_options);
	tcase_add_test(tc, test_lookup);
	tcase_add_test(tc, test_strerror);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
