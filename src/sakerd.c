/* sakerd.c -- the server's main(): options, logging, daemon, pidfile. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "options.h"
#include "server.h"

static int pidfd = -1;

/* Create and lock the pidfile; refuse when a live process holds it. */
static int
pidfile_open(const char *path)
{
	char buf[32];
	int n;

	pidfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (pidfd < 0) {
		fprintf(stderr, "sakerd: cannot open pidfile %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (flock(pidfd, LOCK_EX | LOCK_NB) != 0) {
		n = (int)read(pidfd, buf, sizeof(buf) - 1);
		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		fprintf(stderr, "sakerd: pidfile %s is held by running process %s\n",
		    path, buf[0] ? buf : "(unknown)");
		close(pidfd);
		pidfd = -1;
		return -1;
	}
	return 0;
}

static void
pidfile_write(void)
{
	char buf[32];
	int n;

	if (pidfd < 0)
		return;
	n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (ftruncate(pidfd, 0) != 0 || pwrite(pidfd, buf, (size_t)n, 0) != n)
		log_warn("cannot write the pidfile: %s", strerror(errno));
}

static int
daemonize(void)
{
	pid_t pid = fork();
	int fd;

	if (pid < 0)
		return -1;
	if (pid > 0)
		_exit(0);
	if (setsid() < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0)
		_exit(0);
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	return 0;
}

int
main(int argc, char **argv)
{
	struct options opt;
	int rc;

	rc = options_parse(argc, argv, &opt);
	if (rc != 0)
		return rc > 0 ? 0 : 1;
	log_set_level(LOG_LVL_WARN + opt.verbose);
	if (log_open(opt.log_target) != 0) {
		fprintf(stderr, "sakerd: cannot open log %s: %s\n", opt.log_target,
		    strerror(errno));
		return 1;
	}
	if (opt.pidfile != NULL && pidfile_open(opt.pidfile) != 0)
		return 1;
	if (opt.daemonize) {
		if (opt.log_target == NULL)
			log_warn("daemonized with logs on stderr; use --log FILE or syslog");
		if (daemonize() != 0) {
			fprintf(stderr, "sakerd: cannot daemonize: %s\n", strerror(errno));
			return 1;
		}
	}
	pidfile_write();
	rc = server_run(&opt);
	if (pidfd >= 0) {
		unlink(opt.pidfile);
		close(pidfd);
	}
	return rc;
}
