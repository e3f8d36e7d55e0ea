/* fuzz_conf.c -- fuzz target: the files an operator gives sakerd, read at
 * start and again on SIGHUP: the --config file of per-queue settings
 * (qconfig.c) and the permissions field of an --auth-file line (perms.c). */
#include "config.h"	/* _GNU_SOURCE: memfd_create */

#include <sys/mman.h>

#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "perms.h"
#include "qconfig.h"
#include "qname.h"

/*
 * The first byte chooses the parser: even, the input (less that byte) is a
 * --config file, read from a memfd through its /proc path as sakerd opens
 * any path; odd, it is a permissions field.  What parses is then asked
 * about a few queue names, fixed ones and pieces of the input, and its
 * answers checked against what the file format promises (docs/sakerd.8):
 * a queue always gets settings, max_open is at least 1, a dead-letter or
 * expire-to name is a valid queue name or empty, durations stay within
 * ten years; write or read rights imply the queue is allowed.  What does
 * not parse must say why.
 */

#define TEN_YEARS_MS (10LL * 366 * 24 * 3600 * 1000)

static const char *names[] = { "jobs", "jobs_dead", "a", "q", "queue", "x*" };

static void
check_qc(const struct config *cf, const char *name, size_t len, bool *timeout)
{
	const struct queue_config *qc = config_for(cf, name, len);

	FUZZ_CHECK(qc != NULL);
	FUZZ_CHECK(qc->max_open >= 1);
	FUZZ_CHECK(qc->max_age_ms >= 0 && qc->max_age_ms <= TEN_YEARS_MS);
	FUZZ_CHECK(qc->open_timeout_ms >= 0 && qc->open_timeout_ms <= TEN_YEARS_MS);
	FUZZ_CHECK(qc->max_deliveries <= SAKER_DELIVERIES_MAX);
	FUZZ_CHECK(memchr(qc->dead_letter, '\0', sizeof(qc->dead_letter)) != NULL);
	FUZZ_CHECK(memchr(qc->expire_to, '\0', sizeof(qc->expire_to)) != NULL);
	FUZZ_CHECK(qc->dead_letter[0] == '\0' ||
	    saker_qname_valid(qc->dead_letter, strlen(qc->dead_letter)));
	FUZZ_CHECK(qc->expire_to[0] == '\0' ||
	    saker_qname_valid(qc->expire_to, strlen(qc->expire_to)));
	if (qc->open_timeout_ms > 0)
		*timeout = true;
}

static void
fuzz_config(const uint8_t *data, size_t size)
{
	struct queue_config defaults;
	struct config *cf;
	char path[64], err[512];
	bool timeout = false;
	size_t i, off;
	int fd;

	memset(&defaults, 0, sizeof(defaults));
	defaults.max_open = 1;
	fd = memfd_create("fuzz_conf", MFD_CLOEXEC);
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(write(fd, data, size) == (ssize_t)size);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	err[0] = '\0';
	cf = config_load(path, &defaults, err, sizeof(err));
	close(fd);
	if (cf == NULL) {
		/* "FILE:LINE: reason" or "FILE: reason" */
		FUZZ_CHECK(strncmp(err, path, strlen(path)) == 0 &&
		    err[strlen(path)] == ':');
		return;
	}
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		check_qc(cf, names[i], strlen(names[i]), &timeout);
	/* pieces of the input as names: what a section named may match */
	for (off = 0; off + 8 <= size; off += size / 4 + 1)
		check_qc(cf, (const char *)data + off, 8, &timeout);
	FUZZ_CHECK(!timeout || config_has_open_timeout(cf));
	config_free(cf);
}

static void
fuzz_perms(const uint8_t *data, size_t size)
{
	struct perms p;
	char err[512];
	size_t i, off;

	memset(&p, 0, sizeof(p));
	err[0] = '\0';
	if (perms_parse((const char *)data, size, &p, err, sizeof(err)) != 0) {
		FUZZ_CHECK(err[0] != '\0');
		perms_free(&p);
		return;
	}
	FUZZ_CHECK((p.rights & ~(PERM_READ | PERM_WRITE | PERM_ADMIN)) == 0);
	for (i = 0; i < p.npat; i++)
		FUZZ_CHECK(p.pat[i].p != NULL || p.pat[i].len == 0);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *n = names[i];
		size_t len = strlen(n);
		bool ok = perms_queue_ok(&p, n, len);

		FUZZ_CHECK(!perms_allow(&p, n, len, PERM_READ) || ok);
		FUZZ_CHECK(!perms_allow(&p, n, len, PERM_WRITE) || ok);
		FUZZ_CHECK(perms_sees(&p, n, len) ==
		    ((p.rights & PERM_ADMIN) != 0 || (p.rights != 0 && ok)));
	}
	for (off = 0; off + 4 <= size; off += size / 4 + 1)
		(void)perms_queue_ok(&p, (const char *)data + off, 4);
	perms_free(&p);
}

int
fuzz_conf(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if ((data[0] & 1) == 0)
		fuzz_config(data + 1, size - 1);
	else
		fuzz_perms(data + 1, size - 1);
	return 0;
}
