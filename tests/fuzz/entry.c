/* entry.c -- libFuzzer / AFL++ / standalone glue around one fuzz entry point (FUZZ_ENTRY). */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "fuzz.h"

#ifndef FUZZ_ENTRY
#error "compile with -DFUZZ_ENTRY=fuzz_proto (or fuzz_dump, fuzz_store)"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return FUZZ_ENTRY(data, size);
}

#ifdef FUZZ_STANDALONE
/*
 * Without libFuzzer: run every file named on the command line, or standard
 * input when there is none.  That is what AFL++ needs
 * (afl-fuzz -i IN -o OUT -- ./fuzz_proto @@), and with __AFL_LOOP
 * (afl-clang-fast) it runs in persistent mode.
 */
#define MAXINPUT (1u << 20)

static int
run_stream(FILE *fp)
{
	static uint8_t buf[MAXINPUT];
	size_t n = fread(buf, 1, sizeof(buf), fp);

	if (ferror(fp))
		return -1;
	LLVMFuzzerTestOneInput(buf, n);
	return 0;
}

int
main(int argc, char **argv)
{
	FILE *fp;
	int i;

	if (argc < 2) {
#ifdef __AFL_LOOP
		while (__AFL_LOOP(10000))
#endif
			if (run_stream(stdin) < 0)
				return 1;
		return 0;
	}
	for (i = 1; i < argc; i++) {
		if ((fp = fopen(argv[i], "rb")) == NULL) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (run_stream(fp) < 0) {
			fprintf(stderr, "%s: read error\n", argv[i]);
			fclose(fp);
			return 1;
		}
		fclose(fp);
	}
	return 0;
}
#endif
