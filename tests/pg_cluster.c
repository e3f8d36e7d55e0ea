/* pg_cluster.c -- start and remove a throwaway PostgreSQL cluster for tests. */
#include "config.h"

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pg_cluster.h"

/* Run argv (NULL-terminated) as the cluster's user, output appended to
 * DIR/setup.log; returns the exit status or -1. */
static int
run(struct pg_cluster *c, char *const argv[])
{
	char log[128];
	pid_t pid;
	int st, fd;

	snprintf(log, sizeof(log), "%s/setup.log", c->dir);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		fd = open("/dev/null", O_RDONLY);
		if (fd >= 0) {
			dup2(fd, 0);
			close(fd);
		}
		if (geteuid() == 0) {
			struct passwd *pw = getpwnam("nobody");

			if (pw == NULL || setgid(pw->pw_gid) != 0 ||
			    setuid(pw->pw_uid) != 0)
				_exit(126);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool
find_bindir(struct pg_cluster *c)
{
	const char *env = getenv("PG_BINDIR");
	char path[300];
	glob_t g;

	if (env != NULL && *env != '\0') {
		snprintf(c->bindir, sizeof(c->bindir), "%s", env);
	} else {
		if (glob("/usr/lib/postgresql/*/bin/initdb", 0, NULL, &g) != 0)
			return false;
		/* glob sorts: the last one is the newest for equal widths */
		snprintf(c->bindir, sizeof(c->bindir), "%.*s",
		    (int)(strlen(g.gl_pathv[g.gl_pathc - 1]) - 7),
		    g.gl_pathv[g.gl_pathc - 1]);
		globfree(&g);
	}
	snprintf(path, sizeof(path), "%s/pg_ctl", c->bindir);
	return access(path, X_OK) == 0;
}

int
pg_cluster_server_start(struct pg_cluster *c)
{
	char pgctl[300], data[128], log[128], opts[256];
	char *argv[] = { pgctl, "-D", data, "-w", "-t", "60", "-l", log, "-o",
	    opts, "start", NULL };

	snprintf(pgctl, sizeof(pgctl), "%s/pg_ctl", c->bindir);
	snprintf(data, sizeof(data), "%s/data", c->dir);
	snprintf(log, sizeof(log), "%s/server.log", c->dir);
	snprintf(opts, sizeof(opts), "-c listen_addresses= -k %s -c fsync=off"
	    " -c full_page_writes=off -c max_connections=200", c->dir);
	if (run(c, argv) != 0)
		return -1;
	c->running = true;
	return 0;
}

int
pg_cluster_server_stop(struct pg_cluster *c)
{
	char pgctl[300], data[128];
	char *argv[] = { pgctl, "-D", data, "-w", "-m", "fast", "stop", NULL };

	snprintf(pgctl, sizeof(pgctl), "%s/pg_ctl", c->bindir);
	snprintf(data, sizeof(data), "%s/data", c->dir);
	if (run(c, argv) != 0)
		return -1;
	c->running = false;
	return 0;
}

int
pg_cluster_start(struct pg_cluster *c, char *why, size_t whylen)
{
	char initdb[300], data[128];
	char *argv[] = { initdb, "-D", data, "-A", "trust", "-U", "saker",
	    "--no-sync", "-E", "UTF8", NULL };

	memset(c, 0, sizeof(*c));
	if (!find_bindir(c)) {
		snprintf(why, whylen, "PostgreSQL binaries not found (install"
		    " Debian's postgresql package or set PG_BINDIR)");
		return 1;
	}
	snprintf(c->dir, sizeof(c->dir), "/tmp/saker-pg-XXXXXX");
	if (mkdtemp(c->dir) == NULL) {
		c->dir[0] = '\0';
		snprintf(why, whylen, "mkdtemp failed");
		return -1;
	}
	if (geteuid() == 0) {
		struct passwd *pw = getpwnam("nobody");

		if (pw == NULL || chown(c->dir, pw->pw_uid, pw->pw_gid) != 0) {
			snprintf(why, whylen, "cannot hand %s to user nobody",
			    c->dir);
			return -1;
		}
	}
	snprintf(initdb, sizeof(initdb), "%s/initdb", c->bindir);
	snprintf(data, sizeof(data), "%s/data", c->dir);
	if (run(c, argv) != 0) {
		snprintf(why, whylen, "initdb failed; see %s/setup.log", c->dir);
		return -1;
	}
	if (pg_cluster_server_start(c) != 0) {
		snprintf(why, whylen, "pg_ctl start failed; see %s/setup.log"
		    " and server.log", c->dir);
		return -1;
	}
	snprintf(c->conninfo, sizeof(c->conninfo),
	    "host=%s dbname=postgres user=saker", c->dir);
	return 0;
}

static int
rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(path);
}

void
pg_cluster_destroy(struct pg_cluster *c)
{
	char pgctl[300], data[128];
	char *argv[] = { pgctl, "-D", data, "-w", "-m", "immediate", "stop",
	    NULL };

	if (c->dir[0] == '\0')
		return;
	if (c->running) {
		snprintf(pgctl, sizeof(pgctl), "%s/pg_ctl", c->bindir);
		snprintf(data, sizeof(data), "%s/data", c->dir);
		(void)run(c, argv);
		c->running = false;
	}
	if (getenv("TL_KEEP") == NULL)
		nftw(c->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	c->dir[0] = '\0';
}

void
pg_cluster_spec(const struct pg_cluster *c, char *buf, size_t len)
{
	static int n;

	snprintf(buf, len, "postgres:%s schema=t%d_%d", c->conninfo,
	    (int)getpid(), ++n);
}
