/* sakerd.c -- the server's main(): options, logging, daemonizing, the
 * pidfile and readiness notification (systemd's sd_notify protocol). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "options.h"
#include "server.h"

#ifdef SAKER_COVERAGE
/* ./configure --enable-coverage only.  gcov writes its counts at exit(),
 * and most test servers end with SIGKILL (a teardown, or a crash on
 * purpose), so what they ran went uncounted.  tests/testlib.c sends
 * SIGUSR2 first under `make coverage` (TL_COVERAGE): the counts are
 * written, then the process dies of SIGKILL as before, with no commit
 * and no cleanup, so a crash test still tests a crash. */
extern void __gcov_dump(void);

static void
coverage_dump_and_die(int sig)
{
	(void)sig;
	__gcov_dump();
	signal(SIGKILL, SIG_DFL);
	raise(SIGKILL);
}
#endif

static int pidfd = -1;
static int ready_fd = -1;    /* -d: tells the waiting parent we are up */

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

/*
 * At a clean exit.  After -u the pidfile's directory (/run, say) may be
 * writable by root only: then the file is emptied, so that no stale pid
 * stays in it for a script to signal, and the log says where it belongs.
 */
static void
pidfile_remove(const char *path, const char *user)
{
	int e;

	if (unlink(path) == 0 || errno == ENOENT)
		return;
	e = errno;
	if (ftruncate(pidfd, 0) == 0)
		log_notice("cannot remove the pidfile %s: %s; emptied it instead%s%s%s",
		    path, strerror(e), user != NULL ? " (to be removed, it belongs "
		    "in a directory that user " : "", user != NULL ? user : "",
		    user != NULL ? " may write, as -u drops root)" : "");
	else
		log_warn("cannot remove the pidfile %s: %s", path, strerror(e));
}

/*
 * Detach.  The parent stays until the child reports that it is serving (or
 * dies), so `sakerd -d` still fails with status 1 and the reason on the
 * terminal when, say, the store cannot be opened.
 */
static int
daemonize_start(void)
{
	int fds[2];
	pid_t pid;
	char c;

	if (pipe(fds) != 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0) {
		close(fds[1]);
		_exit(read(fds[0], &c, 1) == 1 ? 0 : 1);
	}
	close(fds[0]);
	ready_fd = fds[1];
	if (setsid() < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0)
		_exit(0);
	/* the working directory stays until the store is open (daemonize_done):
	 * a relative --store location means the directory sakerd was started in */
	return 0;
}

static void
daemonize_done(void)
{
	int fd;

	if (ready_fd < 0)
		return;
	/* do not hold the start directory's file system busy */
	if (chdir("/") != 0)
		log_warn("cannot change to /: %s", strerror(errno));
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		if (log_is_stderr() == 0)
			dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	if (write(ready_fd, "1", 1) != 1)
		log_warn("cannot notify the parent process");
	close(ready_fd);
	ready_fd = -1;
}

/* systemd Type=notify: one datagram to $NOTIFY_SOCKET. */
static void
notify_systemd(const char *msg)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sun;
	size_t len;
	int fd;

	if (path == NULL || (path[0] != '/' && path[0] != '@'))
		return;
	len = strlen(path);
	if (len >= sizeof(sun.sun_path))
		return;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, path, len);
	if (sun.sun_path[0] == '@')
		sun.sun_path[0] = '\0';      /* abstract namespace */
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (sendto(fd, msg, strlen(msg), 0, (struct sockaddr *)&sun,
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) < 0)
		log_warn("sd_notify: %s", strerror(errno));
	close(fd);
}

/*
 * A daemon runs in "/", but files named relative to the start directory are
 * opened again later (the log and the configuration on SIGHUP, the pidfile
 * at exit, the certificate on reload): make those paths absolute first.
 * The absolute copies live until main() returns (abs_paths[]).
 */
static char *abs_paths[9];
static size_t n_abs_paths;

static int
absolute_path(const char **path)
{
	char cwd[PATH_MAX], *abs;
	size_t n;

	if (*path == NULL || (*path)[0] == '/')
		return 0;
	if (n_abs_paths == sizeof(abs_paths) / sizeof(abs_paths[0])) {
		errno = ENOMEM;
		return -1;
	}
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		return -1;
	n = strlen(cwd) + 1 + strlen(*path) + 1;
	abs = malloc(n);
	if (abs == NULL)
		return -1;
	snprintf(abs, n, "%s/%s", cwd, *path);
	abs_paths[n_abs_paths++] = abs;
	*path = abs;
	return 0;
}

static void
free_absolute_paths(void)
{
	while (n_abs_paths > 0)
		free(abs_paths[--n_abs_paths]);
}

static int
absolute_paths(struct options *o)
{
	const char **paths[] = { &o->pidfile, &o->config_path,
		&o->auth_file, &o->tls_cert, &o->tls_key, &o->tls_ca,
		&o->unix_socket };

	/* --log names a file unless it is one of the two words */
	if (o->log_target != NULL && strcmp(o->log_target, "stderr") != 0 &&
	    strcmp(o->log_target, "syslog") != 0 && absolute_path(&o->log_target) != 0) {
		fprintf(stderr, "sakerd: %s: %s\n", o->log_target, strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (absolute_path(paths[i]) != 0) {
			fprintf(stderr, "sakerd: %s: %s\n", *paths[i], strerror(errno));
			return -1;
		}
	return 0;
}

int
main(int argc, char **argv)
{
	struct options opt;
	int rc;

#ifdef SAKER_COVERAGE
	signal(SIGUSR2, coverage_dump_and_die);
#endif
	rc = options_parse(argc, argv, &opt);
	if (rc != 0)
		return rc > 0 ? 0 : 1;
	log_set_level(LOG_LVL_WARN + opt.verbose);
	if (opt.daemonize && absolute_paths(&opt) != 0)
		return 1;
	if (log_open(opt.log_target) != 0) {
		fprintf(stderr, "sakerd: cannot open log %s: %s\n", opt.log_target,
		    strerror(errno));
		return 1;
	}
	if (opt.pidfile != NULL && pidfile_open(opt.pidfile) != 0)
		return 1;
	if (opt.daemonize && daemonize_start() != 0) {
		fprintf(stderr, "sakerd: cannot daemonize: %s\n", strerror(errno));
		return 1;
	}
	rc = server_init(&opt);
	if (rc == 0) {
		pidfile_write();
		daemonize_done();
		notify_systemd("READY=1\nSTATUS=serving");
		server_loop();
		notify_systemd("STOPPING=1");
	}
	server_exit();
	if (pidfd >= 0) {
		if (rc == 0)
			pidfile_remove(opt.pidfile, opt.user);
		close(pidfd);
	}
	free_absolute_paths();
	return rc;
}
