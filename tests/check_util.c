/* check_util.c -- src/util's hash and hash table: keyed per process, so
 * that queue names chosen by clients cannot be aimed at one slot. */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "hashmap.h"
#include "intmap.h"
#include "itemattr.h"

/* The core's table hash before it was keyed (FNV-1a with a final xor
 * shift): what an attacker could compute offline. */
static uint64_t
old_fnv(const char *p, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= (unsigned char)p[i];
		h *= 1099511628211ull;
	}
	return h ^ (h >> 29);
}

#define FLOOD_N 4000            /* names */
#define FLOOD_BITS 12           /* low bits made equal under old_fnv */

/* FLOOD_N distinct names whose old hash has its low FLOOD_BITS bits zero:
 * in a table of 16384 slots (where 4000 entries live) they all start in
 * 4 slots.  Found by trial, as an attacker would, at 4096 tries a name. */
static char (*flood_names(void))[24]
{
	char (*names)[24] = calloc(FLOOD_N, sizeof(*names));
	unsigned long i;
	int n = 0;

	ck_assert_ptr_nonnull(names);
	for (i = 0; n < FLOOD_N; i++) {
		int len = snprintf(names[n], sizeof(names[n]), "q%lx", i);

		if ((old_fnv(names[n], (size_t)len) &
		    ((1u << FLOOD_BITS) - 1)) == 0)
			n++;
	}
	return names;
}

START_TEST(test_flooding)
{
	char (*names)[24] = flood_names();
	struct hashmap *m = hashmap_new();
	size_t max;
	int i;

	ck_assert_ptr_nonnull(m);
	for (i = 0; i < FLOOD_N; i++)
		ck_assert_int_eq(hashmap_put(m, names[i], strlen(names[i]),
		    names[i]), 0);
	ck_assert_uint_eq(hashmap_count(m), FLOOD_N);
	for (i = 0; i < FLOOD_N; i++)
		ck_assert_ptr_eq(hashmap_get(m, names[i], strlen(names[i])),
		    names[i]);
	/* Under the old hash these would all pile up from 4 home slots: the
	 * last ones in sit about FLOOD_N / 4 slots from home, and a lookup
	 * scans that far.  Keyed, the longest run is a few dozen at most. */
	max = hashmap_max_probe(m);
	fprintf(stderr, "flooding: %d names colliding under unkeyed FNV, "
	    "longest probe keyed: %zu\n", FLOOD_N, max);
	ck_assert_uint_lt(max, 64);
	hashmap_free(m);
	free(names);
}
END_TEST

/* The same names in the same table under the old hash: linear probing
 * from 4 home slots makes 4 runs of about FLOOD_N / 4, so the test above is not
 * passing for lack of an attack. */
START_TEST(test_flooding_attack_is_real)
{
	char (*names)[24] = flood_names();
	static unsigned char used[16384];
	size_t max = 0, d, k;
	int i;

	memset(used, 0, sizeof(used));
	for (i = 0; i < FLOOD_N; i++) {
		k = (size_t)old_fnv(names[i], strlen(names[i])) & 16383;
		for (d = 0; used[k]; d++)
			k = (k + 1) & 16383;
		used[k] = 1;
		if (d > max)
			max = d;
	}
	fprintf(stderr, "flooding: longest probe unkeyed: %zu\n", max);
	ck_assert_uint_ge(max, FLOOD_N / 4 - 64);
	free(names);
}
END_TEST

static const char *self_path;

static uint64_t
child_hash(void)
{
	char cmd[4200];
	unsigned long long v = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "'%s' --print-hash", self_path);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%llx", &v), 1);
	ck_assert_int_eq(pclose(f), 0);
	return (uint64_t)v;
}

/* Each process draws its own key: the same name hashes differently in
 * two runs (a 2^-64 chance of a false failure per pair). */
START_TEST(test_seed_per_process)
{
	uint64_t a = child_hash(), b = child_hash(), c = child_hash();

	ck_assert(a != b || b != c);
	ck_assert(a != b);
	ck_assert(b != c);
	/* and is stable within one process */
	ck_assert_uint_eq(saker_hash("jobs", 4), saker_hash("jobs", 4));
}
END_TEST

/* The SipHash-2-4 paper's test vector, under a known key. */
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

/* intmap against a plain array, through growth and many deletions (the
 * backward shift must keep every other key findable). */
START_TEST(test_intmap_model)
{
	enum { N = 5000 };
	static void *model[N];
	static char vals[N];
	struct intmap m;
	uint64_t rng = 42, k;
	int i, live = 0;

	intmap_init(&m);
	ck_assert_ptr_null(intmap_get(&m, 7));
	ck_assert_ptr_null(intmap_del(&m, 7));
	memset(model, 0, sizeof(model));
	for (i = 0; i < 200000; i++) {
		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		/* keys spread thin and packed close: id-like and colliding */
		k = (rng >> 33) % N;
		if ((rng >> 20) & 1) {
			void *old = intmap_get(&m, k * 1024);

			ck_assert_ptr_eq(old, model[k]);
			ck_assert_int_eq(intmap_put(&m, k * 1024, &vals[k]), 0);
			live += model[k] == NULL;
			model[k] = &vals[k];
		} else {
			ck_assert_ptr_eq(intmap_del(&m, k * 1024), model[k]);
			live -= model[k] != NULL;
			model[k] = NULL;
		}
		if (i % 20000 == 0)
			for (k = 0; k < N; k++)
				if (intmap_get(&m, k * 1024) != model[k])
					ck_abort_msg("step %d: key %d wrong", i,
					    (int)k);
		ck_assert_uint_eq(intmap_count(&m), (size_t)live);
	}
	for (k = 0; k < N; k++)
		ck_assert_ptr_eq(intmap_get(&m, k * 1024), model[k]);
	intmap_free(&m);
	ck_assert_uint_eq(intmap_count(&m), 0);
	ck_assert_ptr_null(intmap_get(&m, 1024));
}
END_TEST

/* After intmap_reserve(n), n puts of new keys need no memory: the memory
 * driver reserves before it changes anything, so a take never fails
 * half-way. */
START_TEST(test_intmap_reserve)
{
	struct intmap m;
	struct intmap_ent *e;
	static char v;
	uint64_t i;

	intmap_init(&m);
	ck_assert_int_eq(intmap_reserve(&m, 100), 0);
	e = m.e;
	for (i = 0; i < 100; i++)
		ck_assert_int_eq(intmap_put(&m, i + 1, &v), 0);
	ck_assert_ptr_eq(m.e, e);
	ck_assert_uint_eq(intmap_count(&m), 100);
	/* replacing is no new key; NULL is no value */
	ck_assert_int_eq(intmap_put(&m, 1, &v), 0);
	ck_assert_int_eq(intmap_put(&m, 2, NULL), -1);
	ck_assert_uint_eq(intmap_count(&m), 100);
	ck_assert_int_eq(intmap_reserve(&m, SIZE_MAX), -1);
	ck_assert_ptr_eq(m.e, e);
	intmap_free(&m);
}
END_TEST

/* The integer-valued map the postgres driver keeps its open items in
 * (item id -> queue id): against a plain array, through growth, deletes
 * by key and by value (a queue's items all go at once), and a clear that
 * keeps the slots. */
START_TEST(test_intmap_u64)
{
	enum { N = 4000, Q = 7 };
	static uint64_t model[N];
	struct intmap m;
	struct intmap_ent *e;
	uint64_t rng = 7, k, v;
	size_t live = 0, gone;
	int i;

	intmap_init(&m);
	ck_assert_uint_eq(intmap_get_u64(&m, 1), 0);
	ck_assert_uint_eq(intmap_del_u64(&m, 1), 0);
	ck_assert_uint_eq(intmap_del_value_u64(&m, 1), 0);
	ck_assert_int_eq(intmap_put_u64(&m, 1, 0), -1);	/* 0 is no value */
	memset(model, 0, sizeof(model));
	for (i = 0; i < 100000; i++) {
		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		k = (rng >> 33) % N;
		v = 1 + (rng >> 40) % Q;
		switch ((rng >> 20) % 64) {
		case 0:
			/* every entry of one value goes; the others stay */
			gone = 0;
			for (k = 0; k < N; k++)
				if (model[k] == v) {
					model[k] = 0;
					gone++;
				}
			ck_assert_uint_eq(intmap_del_value_u64(&m, v), gone);
			live -= gone;
			for (k = 0; k < N; k++)
				if (intmap_get_u64(&m, k * 4096 + 1) != model[k])
					ck_abort_msg("step %d: key %d wrong", i,
					    (int)k);
			break;
		case 1: case 2: case 3: case 4: case 5: case 6: case 7:
		case 8: case 9: case 10: case 11: case 12: case 13:
		case 14: case 15: case 16: case 17: case 18: case 19:
		case 20: case 21: case 22: case 23: case 24: case 25:
		case 26: case 27: case 28: case 29: case 30: case 31:
			ck_assert_uint_eq(intmap_del_u64(&m, k * 4096 + 1),
			    model[k]);
			live -= model[k] != 0;
			model[k] = 0;
			break;
		default:
			ck_assert_uint_eq(intmap_get_u64(&m, k * 4096 + 1),
			    model[k]);
			ck_assert_int_eq(intmap_put_u64(&m, k * 4096 + 1, v), 0);
			live += model[k] == 0;
			model[k] = v;
			break;
		}
		ck_assert_uint_eq(intmap_count(&m), live);
	}
	for (k = 0; k < N; k++)
		ck_assert_uint_eq(intmap_get_u64(&m, k * 4096 + 1), model[k]);
	/* clear: nothing is found, the slots stay for reuse */
	e = m.e;
	ck_assert_uint_gt(live, 0);
	intmap_clear(&m);
	ck_assert_uint_eq(intmap_count(&m), 0);
	ck_assert_ptr_eq(m.e, e);
	for (k = 0; k < N; k++)
		ck_assert_uint_eq(intmap_get_u64(&m, k * 4096 + 1), 0);
	ck_assert_int_eq(intmap_put_u64(&m, 5, 9), 0);
	ck_assert_uint_eq(intmap_get_u64(&m, 5), 9);
	ck_assert_ptr_eq(m.e, e);
	intmap_free(&m);
}
END_TEST

/* A walk of the map (the postgres driver renews its open items' leases
 * by key) yields every entry exactly once with its value, also after
 * deletions moved entries back, and nothing from an empty or cleared
 * map. */
START_TEST(test_intmap_next)
{
	enum { N = 3000 };
	static unsigned char seen[N];
	struct intmap m;
	uint64_t k, v;
	size_t pos = 0, n = 0, live = 0;

	intmap_init(&m);
	ck_assert_int_eq(intmap_next_u64(&m, &pos, &k, &v), 0);
	for (k = 0; k < N; k++)
		ck_assert_int_eq(intmap_put_u64(&m, k * 4096 + 3, k + 100), 0);
	/* every third goes: backward shifts move the others */
	for (k = 0; k < N; k += 3)
		ck_assert_uint_eq(intmap_del_u64(&m, k * 4096 + 3), k + 100);
	memset(seen, 0, sizeof(seen));
	while (intmap_next_u64(&m, &pos, &k, &v)) {
		ck_assert_uint_eq((k - 3) % 4096, 0);
		k = (k - 3) / 4096;
		ck_assert_uint_lt(k, N);
		ck_assert_uint_ne(k % 3, 0);
		ck_assert_uint_eq(v, k + 100);
		ck_assert_uint_eq(seen[k], 0);
		seen[k] = 1;
		n++;
	}
	for (k = 0; k < N; k++)
		live += k % 3 != 0;
	ck_assert_uint_eq(n, live);
	ck_assert_uint_eq(n, intmap_count(&m));
	/* at the end it stays at the end */
	ck_assert_int_eq(intmap_next_u64(&m, &pos, &k, &v), 0);
	intmap_clear(&m);
	pos = 0;
	ck_assert_int_eq(intmap_next_u64(&m, &pos, &k, &v), 0);
	intmap_free(&m);
}
END_TEST

/* the attribute record: set, replace, keep unknown types, refuse junk */
START_TEST(test_itemattr)
{
	unsigned char a[64], b[64], c[16];
	static const unsigned char unknown[] = { 1, 200, 0, 2, 'x', 'y' };
	static const unsigned char newer[] = { 2, 9, 9 };
	static const unsigned char cut[] = { 1, 1, 0, 5, 'a' };
	const void *v;
	size_t n, vlen;

	ck_assert(itemattr_valid(NULL, 0));
	ck_assert(!itemattr_get(NULL, 0, ITEMATTR_ID, &v, &vlen));
	n = itemattr_set(a, sizeof(a), NULL, 0, ITEMATTR_ID, "job-1", 5);
	ck_assert_uint_eq(n, 1 + 3 + 5);
	ck_assert(itemattr_valid(a, n));
	ck_assert(itemattr_get(a, n, ITEMATTR_ID, &v, &vlen));
	ck_assert_uint_eq(vlen, 5);
	ck_assert_mem_eq(v, "job-1", 5);
	/* replacing keeps one entry of the type */
	n = itemattr_set(b, sizeof(b), a, n, ITEMATTR_ID, "k", 1);
	ck_assert_uint_eq(n, 1 + 3 + 1);
	ck_assert(itemattr_get(b, n, ITEMATTR_ID, &v, &vlen));
	ck_assert_uint_eq(vlen, 1);
	/* an unknown type survives a set, byte-exact, first */
	ck_assert(itemattr_valid(unknown, sizeof(unknown)));
	ck_assert(!itemattr_get(unknown, sizeof(unknown), ITEMATTR_ID, &v,
	    &vlen));
	n = itemattr_set(a, sizeof(a), unknown, sizeof(unknown), ITEMATTR_ID,
	    "z", 1);
	ck_assert_uint_eq(n, sizeof(unknown) + 4);
	ck_assert_mem_eq(a, unknown, sizeof(unknown));
	ck_assert(itemattr_get(a, n, ITEMATTR_ID, &v, &vlen));
	/* a newer version is opaque: valid, nothing known in it, not
	 * rewritten by this build */
	ck_assert(itemattr_valid(newer, sizeof(newer)));
	ck_assert(!itemattr_get(newer, sizeof(newer), ITEMATTR_ID, &v, &vlen));
	ck_assert_uint_eq(itemattr_set(a, sizeof(a), newer, sizeof(newer),
	    ITEMATTR_ID, "z", 1), 0);
	/* a cut entry is malformed; too small a buffer refuses */
	ck_assert(!itemattr_valid(cut, sizeof(cut)));
	ck_assert(!itemattr_get(cut, sizeof(cut), ITEMATTR_ID, &v, &vlen));
	ck_assert_uint_eq(itemattr_set(c, sizeof(c), NULL, 0, ITEMATTR_ID,
	    "0123456789abcdef", 16), 0);
	ck_assert_uint_eq(itemattr_set(c, sizeof(c), NULL, 0, 0, "a", 1), 0);
	ck_assert_uint_eq(itemattr_set(c, sizeof(c), NULL, 0, 256, "a", 1), 0);
}
END_TEST


int
main(int argc, char **argv)
{
	Suite *s;
	TCase *tc;
	SRunner *sr;
	int failed;

	/* the child of test_seed_per_process: before any allocation, so that
	 * a leak checker has nothing to say */
	if (argc > 1 && strcmp(argv[1], "--print-hash") == 0) {
		printf("%016llx\n",
		    (unsigned long long)saker_hash("jobs", 4));
		return 0;
	}
	s = suite_create("util");
	tc = tcase_create("hash");
	self_path = argv[0];
	tcase_add_test(tc, test_siphash_vector);
	tcase_add_test(tc, test_seed_per_process);
	tcase_add_test(tc, test_flooding_attack_is_real);
	tcase_add_test(tc, test_flooding);
	suite_add_tcase(s, tc);
	tc = tcase_create("intmap");
	tcase_add_test(tc, test_intmap_model);
	tcase_add_test(tc, test_intmap_reserve);
	tcase_add_test(tc, test_intmap_u64);
	tcase_add_test(tc, test_intmap_next);
	tcase_add_test(tc, test_itemattr);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
