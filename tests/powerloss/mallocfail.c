/* mallocfail.c -- LD_PRELOAD shim for tests/check_faults: fail the Nth allocation made by the store libraries (LMDB, SQLite). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "powerloss.h"

/*
 * Same settings as libpowerloss.so (powerloss.h): SAKER_FAULT=malloc:N[:once|
 * :persist] and the arm file SAKER_FAULT_ARM.  Once armed, the Nth malloc,
 * calloc or realloc called from inside liblmdb or libsqlite3 returns NULL
 * with ENOMEM (once, or that one and every later one); "<arm>.hit" is
 * created when it happens.  Allocations of sakerd itself and of libevent
 * are never failed: this is the store's out-of-memory path, as SQLite's own
 * malloc tests exercise it.
 *
 * The real allocator is glibc's (__libc_malloc and friends): this shim
 * cannot be combined with ASan, whose allocator must see every block, so
 * the test skips the malloc loop in a sanitizer build.  sakerd is single-
 * threaded; the counters are atomics anyway.
 */

void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);

static unsigned long fault_n;
static bool fault_on, fault_persist;
static unsigned long count, calls;
static bool armed;
static char arm_path[PATH_MAX];

/* Load ranges of the libraries whose allocations may fail. */
#define MAXRANGES 16
static struct { uintptr_t lo, hi; } ranges[MAXRANGES];
static int nranges;

static int
find_libs(struct dl_phdr_info *info, size_t size, void *arg)
{
	int i;

	(void)size;
	(void)arg;
	if (info->dlpi_name == NULL || (strstr(info->dlpi_name, "liblmdb") == NULL &&
	    strstr(info->dlpi_name, "libsqlite3") == NULL))
		return 0;
	for (i = 0; i < info->dlpi_phnum && nranges < MAXRANGES; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		ranges[nranges].lo = info->dlpi_addr + ph->p_vaddr;
		ranges[nranges].hi = ranges[nranges].lo + ph->p_memsz;
		nranges++;
	}
	return 0;
}

static void read_env(void) __attribute__((constructor));

static void
read_env(void)
{
	const char *e = getenv(PL_ENV_FAULT), *a = getenv(PL_ENV_ARM);
	char mode[16] = "once";
	unsigned long n;

	if (e == NULL || sscanf(e, "malloc:%lu:%15[a-z]", &n, mode) < 1 || n == 0)
		return;
	fault_n = n;
	fault_persist = strcmp(mode, "persist") == 0;
	if (a != NULL && strlen(a) + 8 < sizeof(arm_path))
		strcpy(arm_path, a);
	else
		armed = true;
	dl_iterate_phdr(find_libs, NULL);
	fault_on = nranges > 0;
}

/* Whether this allocation, called from `caller`, is the one to fail. */
static bool
fail_now(const void *caller)
{
	uintptr_t pc = (uintptr_t)caller;
	unsigned long c;
	int i, fd;

	if (!fault_on)
		return false;
	for (i = 0; i < nranges; i++)
		if (pc >= ranges[i].lo && pc < ranges[i].hi)
			break;
	if (i == nranges)
		return false;
	if (!__atomic_load_n(&armed, __ATOMIC_ACQUIRE)) {
		/* look for the arm file now and then, not on every call */
		if ((__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED) & 63) != 1 ||
		    access(arm_path, F_OK) != 0)
			return false;
		__atomic_store_n(&armed, true, __ATOMIC_RELEASE);
	}
	c = __atomic_add_fetch(&count, 1, __ATOMIC_RELAXED);
	if (c != fault_n && !(fault_persist && c > fault_n))
		return false;
	if (c == fault_n && arm_path[0] != '\0') {
		char hit[PATH_MAX + 8];

		snprintf(hit, sizeof(hit), "%s.hit", arm_path);
		if ((fd = open(hit, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) >= 0)
			close(fd);
	}
	errno = ENOMEM;
	return true;
}

void *
malloc(size_t n)
{
	if (fail_now(__builtin_return_address(0)))
		return NULL;
	return __libc_malloc(n);
}

void *
calloc(size_t k, size_t n)
{
	if (fail_now(__builtin_return_address(0)))
		return NULL;
	return __libc_calloc(k, n);
}

void *
realloc(void *p, size_t n)
{
	if (fail_now(__builtin_return_address(0)))
		return NULL;
	return __libc_realloc(p, n);
}
