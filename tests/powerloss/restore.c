/* restore.c -- plays the shim's undo journals backwards: the store's files as at their last fsync (powerloss.h). */
#include "config.h"

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "powerloss.h"

static char *
slurp(const char *path, size_t *lenp)
{
	struct stat st;
	char *buf;
	ssize_t r;
	size_t got = 0;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return NULL;
	if (fstat(fd, &st) != 0 || (buf = malloc((size_t)st.st_size + 1)) == NULL) {
		close(fd);
		return NULL;
	}
	while (got < (size_t)st.st_size &&
	    (r = read(fd, buf + got, (size_t)st.st_size - got)) > 0)
		got += (size_t)r;
	close(fd);
	*lenp = got;
	return buf;
}

/* Undo one journal; returns records undone or -1. */
static long
restore_one(const char *jpath, char *err, size_t errlen)
{
	char path[4096];
	size_t len = 0, pos, nrec = 0, cap = 0, i;
	size_t *recs = NULL;
	uint32_t plen;
	char *buf;
	int fd;
	long done = 0;

	if ((buf = slurp(jpath, &len)) == NULL) {
		snprintf(err, errlen, "%s: %s", jpath, strerror(errno));
		return -1;
	}
	if (len < 8 || memcmp(buf, PL_JMAGIC, 4) != 0) {
		free(buf);
		return 0;	/* created but never written: nothing to undo */
	}
	memcpy(&plen, buf + 4, 4);
	if (plen == 0 || plen >= sizeof(path) || 8 + (size_t)plen > len) {
		free(buf);
		snprintf(err, errlen, "%s: bad header", jpath);
		return -1;
	}
	memcpy(path, buf + 8, plen);
	path[plen] = '\0';
	/* Collect complete records; a torn last one was never acted on. */
	for (pos = 8 + plen; pos + sizeof(struct pl_rec_hdr) <= len;) {
		struct pl_rec_hdr h;

		memcpy(&h, buf + pos, sizeof(h));
		if (memcmp(h.magic, PL_RMAGIC, 4) != 0 ||
		    h.n > len - pos - sizeof(h))
			break;
		if (nrec == cap) {
			size_t *n2;

			cap = cap ? cap * 2 : 64;
			if ((n2 = realloc(recs, cap * sizeof(*recs))) == NULL)
				break;
			recs = n2;
		}
		recs[nrec++] = pos;
		pos += sizeof(h) + h.n;
	}
	if (nrec > 0 && (fd = open(path, O_WRONLY | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		free(recs);
		free(buf);
		return -1;
	}
	for (i = nrec; i-- > 0;) {
		struct pl_rec_hdr h;

		memcpy(&h, buf + recs[i], sizeof(h));
		if (ftruncate(fd, (off_t)h.old_size) != 0 ||
		    (h.n > 0 && pwrite(fd, buf + recs[i] + sizeof(h), h.n,
		    (off_t)h.off) != (ssize_t)h.n)) {
			snprintf(err, errlen, "%s: undo: %s", path, strerror(errno));
			done = -1;
			break;
		}
		done++;
	}
	if (nrec > 0)
		close(fd);
	free(recs);
	free(buf);
	return done;
}

long
pl_restore(const char *dir, char *err, size_t errlen)
{
	char jpath[4096];
	struct dirent *de;
	DIR *d;
	long total = 0, n;

	if ((d = opendir(dir)) == NULL) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);

		if (l < 5 || strcmp(de->d_name + l - 5, ".undo") != 0)
			continue;
		snprintf(jpath, sizeof(jpath), "%s/%s", dir, de->d_name);
		if ((n = restore_one(jpath, err, errlen)) < 0) {
			total = -1;
			break;
		}
		total += n;
		unlink(jpath);
	}
	closedir(d);
	return total;
}
