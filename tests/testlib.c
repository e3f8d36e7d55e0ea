/* testlib.c -- server start/stop and raw-socket helpers for the tests. */
#include "config.h"

#include <sys/types.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

int tl_timeout_ms = 5000;

int
tl_slow(int ms)
{
	return getenv("TL_VALGRIND") != NULL ? 6 * ms : ms;
}

/* Stretch the default read deadline for memcheck before any test runs
 * (a test that sets tl_timeout_ms itself keeps its own value). */
__attribute__((constructor)) static void
tl_timeout_init(void)
{
	tl_timeout_ms = tl_slow(tl_timeout_ms);
}

/* How long a started server may take to accept its first connection. */
#define TL_READY_MS 5000
/* How long a server may take to exit after SIGTERM. */
#define TL_STOP_MS 10000
/* Start attempts (a port found free may be taken before sakerd binds). */
#define TL_START_TRIES 5
/* Longest line tl_readline accepts. */
#define TL_LINE_MAX (1024 * 1024)

/*
 * Everything we started, so that an exiting test process (Check calls
 * exit() on a failed assertion) kills its servers and removes its dirs.
 */
#define TL_TRACK_MAX 64
static struct tl_server *tracked[TL_TRACK_MAX];
static bool atexit_done;

static void tl_cleanup_at_exit(void);

/*
 * The janitor: a detached process that learns every temp dir we create
 * through a pipe and removes them once the pipe closes, i.e. once the test
 * process is gone however it ended (Check leaves a failed test with
 * _exit(), and kills a timed-out one with SIGKILL).
 */
static int janitor_fd = -1;
static pid_t janitor_owner;

static void
janitor_run(int rfd)
{
	char *paths = NULL, buf[4096], *p, *nl;
	size_t len = 0;
	ssize_t r;

	for (;;) {
		r = read(rfd, buf, sizeof(buf));
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if ((p = realloc(paths, len + (size_t)r + 1)) == NULL)
			break;
		paths = p;
		memcpy(paths + len, buf, (size_t)r);
		len += (size_t)r;
		paths[len] = '\0';
	}
	if (paths == NULL)
		_exit(0);
	/* Servers die by PR_SET_PDEATHSIG; give them a moment first. */
	tl_sleep_ms(300);
	for (p = paths; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
		*nl = '\0';
		if (strncmp(p, "/tmp/saker-test-", 16) == 0)
			tl_rmrf(p);
	}
	free(paths);
	_exit(0);
}

static void
janitor_register(const char *dir)
{
	int pfd[2], fd;
	pid_t pid;

	if (getenv("TL_KEEP") != NULL)
		return;
	if (janitor_fd == -1 || janitor_owner != getpid()) {
		if (janitor_fd != -1)
			close(janitor_fd);	/* inherited from our parent */
		janitor_fd = -1;
		if (pipe2(pfd, O_CLOEXEC) == -1)
			return;
		signal(SIGPIPE, SIG_IGN);
		if ((pid = fork()) == -1) {
			close(pfd[0]);
			close(pfd[1]);
			return;
		}
		if (pid == 0) {
			/* Own session: out of reach of Check's killpg. */
			setsid();
			if (fork() != 0)
				_exit(0);
			for (fd = 0; fd < 1024; fd++)
				if (fd != pfd[0])
					close(fd);
			janitor_run(pfd[0]);
		}
		waitpid(pid, NULL, 0);
		close(pfd[0]);
		janitor_fd = pfd[1];
		janitor_owner = getpid();
	}
	if (write(janitor_fd, dir, strlen(dir)) < 0 ||
	    write(janitor_fd, "\n", 1) < 0) {
		/* best effort: worst case a temp dir is left behind */
	}
}

void
tl_fail(const char *file, int line, const char *fmt, ...)
{
	char msg[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	_ck_assert_failed(file, line, "Failed", "%s", msg);
	/* Not reached: Check exits (fork mode) or longjmps (no-fork). */
	_exit(1);
}

char *
tl_strdupf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		ck_abort_msg("out of memory");
	return s;
}

char *
tl_local_addr(int fd)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	char host[INET_ADDRSTRLEN];

	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	ck_assert_ptr_nonnull(inet_ntop(AF_INET, &sin.sin_addr, host,
	    sizeof(host)));
	return tl_strdupf("%s:%u", host, (unsigned)ntohs(sin.sin_port));
}

void
tl_reload(struct tl_server *s, const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int fd = tl_connect(s->port);
	long long before = tl_stat(fd, "reloads");

	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
		ck_abort_msg("cannot write %s", path);
	ck_assert_int_eq(kill(s->pid, SIGHUP), 0);
	tl_wait_stat(fd, "reloads", before + 1, tl_slow(5000));
	close(fd);
}

char *
tl_base64(const char *s)
{
	static const char t[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = strlen(s), i, o = 0;
	char *out = malloc(n / 3 * 4 + 5);

	if (out == NULL)
		ck_abort_msg("out of memory");
	for (i = 0; i + 2 < n; i += 3) {
		unsigned v = (unsigned char)s[i] << 16 |
		    (unsigned char)s[i + 1] << 8 | (unsigned char)s[i + 2];

		out[o++] = t[v >> 18];
		out[o++] = t[v >> 12 & 63];
		out[o++] = t[v >> 6 & 63];
		out[o++] = t[v & 63];
	}
	if (i < n) {
		unsigned v = (unsigned char)s[i] << 16 |
		    (i + 1 < n ? (unsigned char)s[i + 1] << 8 : 0);

		out[o++] = t[v >> 18];
		out[o++] = t[v >> 12 & 63];
		out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
		out[o++] = '=';
	}
	out[o] = '\0';
	return out;
}

#define TL_HTTP_MAX (1 << 20)

char *
tl_http(int port, const char *method, const char *path, const char *cred,
    const char *headers)
{
	char *enc = cred != NULL ? tl_base64(cred) : NULL;
	char *auth = enc != NULL ?
	    tl_strdupf("Authorization: Basic %s\r\n", enc) : NULL;
	char *req = tl_strdupf("%s %s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\n%s%s%s\r\n",
	    method, path, port, auth != NULL ? auth : "",
	    headers != NULL ? headers : "",
	    strcmp(method, "POST") == 0 ? "Content-Length: 0\r\n" : "");
	char *buf = malloc(TL_HTTP_MAX);
	size_t len = 0;
	ssize_t n;
	int fd = tl_connect(port);

	if (buf == NULL)
		ck_abort_msg("out of memory");
	mustsends(fd, req);
	while (len < TL_HTTP_MAX - 1 && (n = tl_readn(fd, buf + len,
	    TL_HTTP_MAX - 1 - len, tl_slow(3000))) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	close(fd);
	free(req);
	free(auth);
	free(enc);
	return buf;
}

int
tl_http_status_(const char *file, int line, const char *resp)
{
	int code = 0;

	if (sscanf(resp, "HTTP/1.%*d %d", &code) != 1)
		tl_fail(file, line, "not an HTTP response: \"%.200s\"", resp);
	return code;
}

int64_t
tl_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Not time(): that reads a coarse clock that can lag the server's
 * clock_gettime() by a tick, enough to see a due item "a second early". */
int64_t
tl_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
tl_unix_s(void)
{
	return tl_unix_ms() / 1000;
}

void
tl_sleep_ms(int ms)
{
	struct timespec ts;

	if (ms <= 0)
		return;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

char *
tl_escape(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	size_t cap = 400, i, o = 0;
	char *s = malloc(cap * 4 + 8);

	if (s == NULL)
		ck_abort_msg("out of memory");
	for (i = 0; i < len && i < cap; i++) {
		switch (p[i]) {
		case '\r': s[o++] = '\\'; s[o++] = 'r'; break;
		case '\n': s[o++] = '\\'; s[o++] = 'n'; break;
		case '\0': s[o++] = '\\'; s[o++] = '0'; break;
		case '\\': s[o++] = '\\'; s[o++] = '\\'; break;
		case '"': s[o++] = '\\'; s[o++] = '"'; break;
		default:
			if (p[i] < 0x20 || p[i] >= 0x7f)
				o += (size_t)sprintf(s + o, "\\x%02x", p[i]);
			else
				s[o++] = (char)p[i];
		}
	}
	if (i < len) {
		memcpy(s + o, "...", 3);
		o += 3;
	}
	s[o] = '\0';
	return s;
}

/* ------------------------------------------------------------ files */

char *
tl_mkdtemp(void)
{
	char *d = strdup("/tmp/saker-test-XXXXXX");

	if (d == NULL || mkdtemp(d) == NULL)
		ck_abort_msg("mkdtemp: %s", strerror(errno));
	janitor_register(d);
	return d;
}

char *tl_dir;

void
tl_dir_setup(void)
{
	tl_dir = tl_mkdtemp();
}

void
tl_dir_teardown(void)
{
	tl_rmrf(tl_dir);
	free(tl_dir);
	tl_dir = NULL;
}

char *
tl_write_file(const char *name, const char *text)
{
	char *path = tl_strdupf("%s/%s", tl_dir, name);
	size_t len = strlen(text);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		ck_abort_msg("%s: %s", path, strerror(errno));
	if (write(fd, text, len) != (ssize_t)len)
		ck_abort_msg("%s: short write", path);
	close(fd);
	return path;
}

void
tl_rmrf(const char *path)
{
	struct stat st;
	DIR *dp;
	struct dirent *de;

	if (path == NULL || lstat(path, &st) == -1)
		return;
	if (!S_ISDIR(st.st_mode)) {
		unlink(path);
		return;
	}
	if ((dp = opendir(path)) != NULL) {
		while ((de = readdir(dp)) != NULL) {
			char *sub;

			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			if (asprintf(&sub, "%s/%s", path, de->d_name) < 0)
				continue;
			tl_rmrf(sub);
			free(sub);
		}
		closedir(dp);
	}
	rmdir(path);
}

char *
tl_read_file(const char *path, size_t *lenp)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (f == NULL)
		return NULL;
	for (;;) {
		if (cap - len < 4096) {
			char *nb;

			cap = cap ? cap * 2 : 8192;
			if ((nb = realloc(buf, cap + 1)) == NULL) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, f);
		if (n == 0)
			break;
		len += n;
	}
	fclose(f);
	buf[len] = '\0';
	if (lenp != NULL)
		*lenp = len;
	return buf;
}

double
tl_proc_cpu_s(pid_t pid)
{
	char path[64], *text, *p;
	unsigned long ut = 0, st = 0;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	text = tl_read_file(path, NULL);
	ck_assert_msg(text != NULL, "cannot read %s", path);
	/* after the parenthesised name: the state is field 3, utime 14 and
	 * stime 15 */
	p = strrchr(text, ')');
	ck_assert_msg(p != NULL && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u"
	    " %*u %*u %*u %*u %lu %lu", &ut, &st) == 2, "%s: %s", path, text);
	free(text);
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static const char *
binary_path(const char *env, const char *def, char *cache, size_t cachelen)
{
	const char *p;
	char real[PATH_MAX];

	if (cache[0] != '\0')
		return cache;
	if ((p = getenv(env)) == NULL || *p == '\0')
		p = def;
	if (realpath(p, real) != NULL)
		p = real;
	snprintf(cache, cachelen, "%s", p);
	return cache;
}

const char *
tl_sakerd_path(void)
{
	static char path[PATH_MAX];

	return binary_path("SAKERD", "./sakerd", path, sizeof(path));
}

const char *
tl_saker_path(void)
{
	static char path[PATH_MAX];

	return binary_path("SAKER", "./saker", path, sizeof(path));
}

/* Last few lines of a server's log, for failure messages. */
static char *
log_tail(const struct tl_server *s)
{
	size_t len;
	char *all = tl_read_file(s->log, &len), *t;

	if (all == NULL)
		return strdup("(no log)");
	t = strdup(len > 1500 ? all + len - 1500 : all);
	free(all);
	return t;
}

/* ---------------------------------------------------------- servers */

int
tl_free_port(void)
{
	static unsigned next;
	struct sockaddr_in sin;
	socklen_t slen = sizeof(sin);
	int fd, port, tries;

	/*
	 * Below the kernel's ephemeral range (32768-60999 here): a port the
	 * kernel picked by bind(0) can be handed out again as the local port
	 * of some test's client connection before sakerd binds it, and then
	 * sakerd's bind fails (the client socket has no SO_REUSEADDR).  Seen
	 * as --http listeners that never came up while the suite ran two
	 * programs at once.  Start at a per-process random point so
	 * concurrent test programs do not walk the same ports.
	 */
	if (next == 0)
		next = (unsigned)getpid() * 7919u + (unsigned)tl_now_ms();
	for (tries = 0; tries < 200; tries++) {
		port = 20000 + (int)(next++ % 12000);
		if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
			ck_abort_msg("socket: %s", strerror(errno));
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sin.sin_port = htons((uint16_t)port);
		if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0) {
			close(fd);
			return port;
		}
		close(fd);
	}
	/* all taken (unlikely): let the kernel choose */
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		ck_abort_msg("socket: %s", strerror(errno));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = 0;
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    getsockname(fd, (struct sockaddr *)&sin, &slen) == -1)
		ck_abort_msg("bind port 0: %s", strerror(errno));
	port = ntohs(sin.sin_port);
	close(fd);
	return port;
}

static void
track(struct tl_server *s)
{
	int i;

	if (!atexit_done) {
		atexit(tl_cleanup_at_exit);
		atexit_done = true;
	}
	for (i = 0; i < TL_TRACK_MAX; i++) {
		if (tracked[i] == NULL) {
			tracked[i] = s;
			return;
		}
	}
}

static void
untrack(struct tl_server *s)
{
	int i;

	for (i = 0; i < TL_TRACK_MAX; i++)
		if (tracked[i] == s)
			tracked[i] = NULL;
}

static void
tl_cleanup_at_exit(void)
{
	int i;

	for (i = 0; i < TL_TRACK_MAX; i++) {
		struct tl_server *s = tracked[i];

		/* A forked child inherits the table; only the owner acts. */
		if (s == NULL || s->owner != getpid())
			continue;
		if (s->pid > 0)
			tl_server_kill(s);
		if (getenv("TL_KEEP") == NULL)
			tl_rmrf(s->dir);
	}
}

/* Reap the child without blocking; true if it has exited. */
static bool
reaped(struct tl_server *s)
{
	int st;
	pid_t r;

	if (s->pid <= 0)
		return true;
	r = waitpid(s->pid, &st, WNOHANG);
	if (r == s->pid || (r == -1 && errno == ECHILD)) {
		s->status = r == s->pid ? st : -1;
		s->pid = 0;
		return true;
	}
	return false;
}

bool
tl_server_alive(struct tl_server *s)
{
	return s != NULL && !reaped(s);
}

/* fork+exec sakerd on a fresh port; no waiting. */
static void
spawn(const char *file, int line, struct tl_server *s)
{
	const char *argv[TL_MAX_ARGS + 10];
	char portbuf[16], hdr[128];
	int argc = 0, i, logfd, nullfd;
	pid_t parent = getpid(), pid;

	s->port = tl_free_port();
	snprintf(portbuf, sizeof(portbuf), "%d", s->port);
	argv[argc++] = tl_sakerd_path();
	argv[argc++] = "-l";
	argv[argc++] = "127.0.0.1";
	argv[argc++] = "-p";
	argv[argc++] = portbuf;
	if (s->spec != NULL) {
		argv[argc++] = "--store";
		argv[argc++] = s->spec;
	}
	for (i = 0; i < s->nargs; i++)
		argv[argc++] = s->args[i];
	argv[argc] = NULL;

	if ((logfd = open(s->log, O_WRONLY | O_CREAT | O_APPEND, 0644)) == -1)
		tl_fail(file, line, "open %s: %s", s->log, strerror(errno));
	snprintf(hdr, sizeof(hdr), "=== testlib: start on port %d ===\n",
	    s->port);
	if (write(logfd, hdr, strlen(hdr)) < 0) {
		/* the log is for humans; a failed header is harmless */
	}
	fflush(NULL);
	if ((pid = fork()) == -1)
		tl_fail(file, line, "fork: %s", strerror(errno));
	if (pid == 0) {
		/* Die with the test process, however it ends. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(126);
		if ((nullfd = open("/dev/null", O_RDONLY)) != -1)
			dup2(nullfd, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		if (chdir(s->dir) == -1)
			_exit(126);
		execv(argv[0], (char *const *)argv);
		dprintf(2, "testlib: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(logfd);
	s->pid = pid;
	s->status = -1;
}

/* Wait until the server accepts a connection; false if it exited. */
static bool
wait_ready(struct tl_server *s)
{
	/* memcheck starts sakerd many times slower, more so on a loaded box */
	int64_t deadline = tl_now_ms() + tl_slow(TL_READY_MS);
	int fd;

	while (tl_now_ms() < deadline) {
		if (reaped(s))
			return false;
		if ((fd = tl_try_connect(s->port)) != -1) {
			close(fd);
			return true;
		}
		tl_sleep_ms(10);
	}
	return false;
}

static void
start_loop(const char *file, int line, struct tl_server *s)
{
	int try;
	char *tail;

	for (try = 0; try < TL_START_TRIES; try++) {
		spawn(file, line, s);
		if (wait_ready(s))
			return;
		if (s->pid > 0) {
			/* alive but not accepting within the deadline */
			tl_server_kill(s);
			break;
		}
	}
	tail = log_tail(s);
	tl_fail(file, line, "sakerd (%s, store %s) did not start; log:\n%s",
	    tl_sakerd_path(), s->spec ? s->spec : "(default)", tail);
}

struct tl_server *
tl_server_start_(const char *file, int line, const char *store, ...)
{
	struct tl_server *s = calloc(1, sizeof(*s));
	const char *a;
	va_list ap;

	if (s == NULL)
		tl_fail(file, line, "out of memory");
	s->owner = getpid();
	s->status = -1;
	s->dir = tl_mkdtemp();
	s->log = tl_strdupf("%s/sakerd.log", s->dir);
	if (store == NULL)
		s->spec = NULL;
	else if (strcmp(store, "lmdb") == 0)
		s->spec = tl_strdupf("lmdb:%s/store", s->dir);
	else if (strcmp(store, "sqlite") == 0)
		s->spec = tl_strdupf("sqlite:%s/store.db", s->dir);
	else
		s->spec = strdup(store);
	va_start(ap, store);
	while ((a = va_arg(ap, const char *)) != NULL) {
		if (s->nargs == TL_MAX_ARGS)
			tl_fail(file, line, "too many server arguments");
		s->args[s->nargs++] = strdup(a);
	}
	va_end(ap);
	track(s);
	start_loop(file, line, s);
	return s;
}

void
tl_server_restart_(const char *file, int line, struct tl_server *s)
{
	if (s->pid > 0)
		tl_fail(file, line, "restart of a running server");
	start_loop(file, line, s);
}

int
tl_server_wait_exit(struct tl_server *s, int ms)
{
	int64_t deadline = tl_now_ms() + ms;

	for (;;) {
		if (reaped(s))
			return s->status;
		if (tl_now_ms() >= deadline)
			return -1;
		tl_sleep_ms(2);
	}
}

void
tl_server_stop_(const char *file, int line, struct tl_server *s)
{
	int st;
	char *tail;

	if (s->pid <= 0)
		tl_fail(file, line, "stop: server is not running (status %d)",
		    s->status);
	kill(s->pid, SIGTERM);
	st = tl_server_wait_exit(s, TL_STOP_MS);
	if (st == -1 && s->pid > 0) {
		tl_server_kill(s);
		tail = log_tail(s);
		tl_fail(file, line, "sakerd did not exit within %d ms of "
		    "SIGTERM; log:\n%s", TL_STOP_MS, tail);
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		tail = log_tail(s);
		if (WIFSIGNALED(st))
			tl_fail(file, line, "sakerd died of signal %d after "
			    "SIGTERM; log:\n%s", WTERMSIG(st), tail);
		tl_fail(file, line, "sakerd exited %d after SIGTERM; log:\n%s",
		    WEXITSTATUS(st), tail);
	}
}

/* Under `make coverage` (TL_COVERAGE set): SIGUSR2 first, on which a
 * coverage build of sakerd writes its gcov counts and dies of SIGKILL
 * itself (src/daemon/sakerd.c), so what the killed servers ran is
 * counted; the same death otherwise.  True when s is gone. */
static bool
coverage_kill(struct tl_server *s)
{
	if (getenv("TL_COVERAGE") == NULL)
		return false;
	kill(s->pid, SIGUSR2);
	return tl_server_wait_exit(s, 2000) != -1;
}

void
tl_server_kill(struct tl_server *s)
{
	if (s == NULL || s->pid <= 0)
		return;
	if (coverage_kill(s))
		return;
	kill(s->pid, SIGKILL);
	if (waitpid(s->pid, &s->status, 0) == -1)
		s->status = -1;
	s->pid = 0;
}

void
tl_server_free(struct tl_server *s)
{
	int i;

	if (s == NULL)
		return;
	tl_server_kill(s);
	untrack(s);
	if (getenv("TL_KEEP") == NULL)
		tl_rmrf(s->dir);
	for (i = 0; i < s->nargs; i++)
		free(s->args[i]);
	free(s->dir);
	free(s->spec);
	free(s->log);
	free(s);
}

/* ------------------------------------------------------ connections */

int
tl_try_connect(int port)
{
	struct sockaddr_in sin;
	struct timeval tv;
	int fd, one = 1;

	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		return -1;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((uint16_t)port);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1) {
		close(fd);
		return -1;
	}
	/* Backstops only: every read below also polls with a deadline. */
	tv.tv_sec = tl_timeout_ms / 1000;
	tv.tv_usec = (tl_timeout_ms % 1000) * 1000;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int
tl_connect_(const char *file, int line, int port)
{
	int fd = tl_try_connect(port);

	if (fd == -1)
		tl_fail(file, line, "connect 127.0.0.1:%d: %s", port,
		    strerror(errno));
	return fd;
}

void
tl_mustsend_(const char *file, int line, int fd, const void *buf, size_t len)
{
	const char *p = buf;
	int64_t deadline = tl_now_ms() + tl_timeout_ms;
	size_t off = 0;
	ssize_t n;

	while (off < len) {
		n = send(fd, p + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK ||
		    errno == EINTR)) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };
			int left = (int)(deadline - tl_now_ms());

			if (left <= 0)
				tl_fail(file, line, "send: timed out after "
				    "%zu of %zu bytes", off, len);
			poll(&pfd, 1, left);
			continue;
		}
		tl_fail(file, line, "send: %s (after %zu of %zu bytes)",
		    strerror(errno), off, len);
	}
}

/* Wait until fd is readable or the deadline passes. */
static bool
wait_readable(int fd, int64_t deadline)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int left, r;

	for (;;) {
		left = (int)(deadline - tl_now_ms());
		if (left < 0)
			left = 0;
		r = poll(&pfd, 1, left);
		if (r > 0)
			return true;
		if (r == 0)
			return false;
		if (errno != EINTR)
			return false;
	}
}

ssize_t
tl_readn(int fd, void *buf, size_t n, int ms)
{
	int64_t deadline = tl_now_ms() + ms;
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		if (!wait_readable(fd, deadline))
			break;
		r = recv(fd, (char *)buf + got, n - got, MSG_DONTWAIT);
		if (r == 0)
			break;
		if (r == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK ||
			    errno == EINTR)
				continue;
			return got > 0 ? (ssize_t)got : -1;
		}
		got += (size_t)r;
	}
	return (ssize_t)got;
}

void
tl_ckresp_(const char *file, int line, int fd, const void *exp, size_t len)
{
	int64_t deadline = tl_now_ms() + tl_timeout_ms;
	size_t cap = len + 512, got = 0;
	char *buf = malloc(cap), *e, *g;
	const char *why = "timeout";
	bool mismatch = false;
	ssize_t r;

	if (buf == NULL)
		tl_fail(file, line, "out of memory");
	while (got < len) {
		if (!wait_readable(fd, deadline))
			break;
		r = recv(fd, buf + got, len - got, MSG_DONTWAIT);
		if (r == 0) {
			why = "EOF";
			break;
		}
		if (r == -1) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			why = strerror(errno);
			break;
		}
		got += (size_t)r;
		if (memcmp(buf, exp, got) != 0) {
			mismatch = true;
			break;
		}
	}
	if (got == len && memcmp(buf, exp, len) == 0) {
		free(buf);
		return;
	}
	if (mismatch) {
		/* Take a little more so the message shows the whole reply. */
		r = tl_readn(fd, buf + got, cap - got, 100);
		if (r > 0)
			got += (size_t)r;
		why = "mismatch";
	}
	e = tl_escape(exp, len);
	g = tl_escape(buf, got);
	tl_fail(file, line, "ckresp (%s):\n  expected \"%s\"\n  got      \"%s\"",
	    why, e, g);
}

char *
tl_readline_ms(int fd, int ms)
{
	int64_t deadline = tl_now_ms() + ms;
	char peek[4096], *line = NULL, *nl;
	size_t len = 0;
	ssize_t r, take;

	for (;;) {
		if (!wait_readable(fd, deadline))
			goto fail;
		r = recv(fd, peek, sizeof(peek), MSG_PEEK | MSG_DONTWAIT);
		if (r == 0)
			goto fail;
		if (r == -1) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			goto fail;
		}
		/* Consume up to and including the newline, nothing more. */
		nl = memchr(peek, '\n', (size_t)r);
		take = nl != NULL ? nl - peek + 1 : r;
		if (len + (size_t)take > TL_LINE_MAX)
			goto fail;
		{
			char *nb = realloc(line, len + (size_t)take + 1);

			if (nb == NULL)
				goto fail;
			line = nb;
		}
		r = recv(fd, line + len, (size_t)take, MSG_DONTWAIT);
		if (r != take)
			goto fail;
		len += (size_t)take;
		if (nl != NULL)
			break;
	}
	len--;			/* the \n */
	if (len > 0 && line[len - 1] == '\r')
		len--;
	line[len] = '\0';
	return line;
fail:
	free(line);
	return NULL;
}

char *
tl_mustreadline_(const char *file, int line, int fd)
{
	char *l = tl_readline_ms(fd, tl_timeout_ms);

	if (l == NULL)
		tl_fail(file, line, "no reply line within %d ms (timeout or "
		    "connection closed)", tl_timeout_ms);
	return l;
}

void
tl_expect_closed_(const char *file, int line, int fd, int ms)
{
	int64_t deadline = tl_now_ms() + ms;
	char buf[4096];
	ssize_t r;

	for (;;) {
		if (!wait_readable(fd, deadline))
			tl_fail(file, line, "connection not closed within %d ms",
			    ms);
		r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r == 0)
			return;
		if (r == -1 && (errno == ECONNRESET || errno == EPIPE))
			return;
	}
}

bool
tl_quiet(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, ms) == 0;
}

void
tl_value_clear(struct tl_value *v)
{
	free(v->key);
	free(v->data);
	memset(v, 0, sizeof(*v));
}

int
tl_read_value_(const char *file, int line, int fd, struct tl_value *v)
{
	char *l = tl_mustreadline_(file, line, fd), *save = NULL, *tok[5];
	unsigned long long flags, bytes;
	char *end;
	int n = 0;
	ssize_t r;

	memset(v, 0, sizeof(*v));
	if (strcmp(l, "END") == 0) {
		free(l);
		return 0;
	}
	if (strncmp(l, "VALUE ", 6) != 0)
		tl_fail(file, line, "expected VALUE or END, got \"%s\"",
		    tl_escape(l, strlen(l)));
	for (char *t = strtok_r(l, " ", &save); t != NULL && n < 5;
	    t = strtok_r(NULL, " ", &save))
		tok[n++] = t;
	if (n != 4)
		tl_fail(file, line, "malformed VALUE line (%d fields)", n);
	errno = 0;
	flags = strtoull(tok[2], &end, 10);
	if (*end != '\0' || errno != 0 || flags > UINT32_MAX)
		tl_fail(file, line, "bad flags in VALUE line: %s", tok[2]);
	bytes = strtoull(tok[3], &end, 10);
	if (*end != '\0' || errno != 0 || bytes > 64 * 1024 * 1024)
		tl_fail(file, line, "bad length in VALUE line: %s", tok[3]);
	v->key = strdup(tok[1]);
	v->flags = (uint32_t)flags;
	v->len = (size_t)bytes;
	free(l);
	if ((v->data = malloc(v->len + 2)) == NULL)
		tl_fail(file, line, "out of memory");
	r = tl_readn(fd, v->data, v->len + 2, tl_timeout_ms);
	if (r != (ssize_t)(v->len + 2))
		tl_fail(file, line, "VALUE %s: got %zd of %zu data bytes",
		    v->key, r, v->len + 2);
	if (v->data[v->len] != '\r' || v->data[v->len + 1] != '\n')
		tl_fail(file, line, "VALUE %s: data not followed by \\r\\n",
		    v->key);
	v->data[v->len] = '\0';
	return 1;
}

void
tl_set_(const char *file, int line, int fd, const char *key, uint32_t flags,
    long long exptime, const void *data, size_t len)
{
	char *hdr = tl_strdupf("set %s %u %lld %zu\r\n", key, flags, exptime,
	    len);

	tl_mustsend_(file, line, fd, hdr, strlen(hdr));
	tl_mustsend_(file, line, fd, data, len);
	tl_mustsend_(file, line, fd, "\r\n", 2);
	free(hdr);
	tl_ckresp_(file, line, fd, "STORED\r\n", 8);
}

char *
tl_get_(const char *file, int line, int fd, const char *key, size_t *lenp,
    uint32_t *flagsp)
{
	char *req = tl_strdupf("get %s\r\n", key), *data;
	struct tl_value v;

	tl_mustsend_(file, line, fd, req, strlen(req));
	free(req);
	if (tl_read_value_(file, line, fd, &v) == 0)
		return NULL;
	if (strcmp(v.key, key) != 0)
		tl_fail(file, line, "VALUE key \"%s\", requested \"%s\"",
		    v.key, key);
	tl_ckresp_(file, line, fd, "END\r\n", 5);
	data = v.data;
	if (lenp != NULL)
		*lenp = v.len;
	if (flagsp != NULL)
		*flagsp = v.flags;
	free(v.key);
	return data;
}

void
tl_ckget_(const char *file, int line, int fd, const char *key,
    const char *want)
{
	size_t len;
	char *got = tl_get_(file, line, fd, key, &len, NULL);

	if (want == NULL && got == NULL)
		return;
	if (want == NULL)
		tl_fail(file, line, "get %s: expected a miss, got \"%s\"", key,
		    tl_escape(got, len));
	if (got == NULL)
		tl_fail(file, line, "get %s: expected \"%s\", got a miss", key,
		    tl_escape(want, strlen(want)));
	if (len != strlen(want) || memcmp(got, want, len) != 0)
		tl_fail(file, line, "get %s: expected \"%s\", got \"%s\"", key,
		    tl_escape(want, strlen(want)), tl_escape(got, len));
	free(got);
}

char *
tl_stats_(const char *file, int line, int fd)
{
	char *all = strdup(""), *l, *nb;
	size_t len = 0, ll;

	tl_mustsend_(file, line, fd, "stats\r\n", 7);
	for (;;) {
		l = tl_mustreadline_(file, line, fd);
		if (strcmp(l, "END") == 0) {
			free(l);
			return all;
		}
		if (strncmp(l, "STAT ", 5) != 0)
			tl_fail(file, line, "stats: unexpected line \"%s\"",
			    tl_escape(l, strlen(l)));
		ll = strlen(l);
		if ((nb = realloc(all, len + ll + 2)) == NULL)
			tl_fail(file, line, "out of memory");
		all = nb;
		memcpy(all + len, l, ll);
		len += ll;
		all[len++] = '\n';
		all[len] = '\0';
		free(l);
	}
}

char *
tl_stat_str(const char *stats, const char *name)
{
	size_t nl = strlen(name);
	const char *p = stats, *v, *eol;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, "STAT ", 5) == 0 &&
		    strncmp(p + 5, name, nl) == 0 && p[5 + nl] == ' ') {
			v = p + 5 + nl + 1;
			eol = strchr(v, '\n');
			return strndup(v, eol ? (size_t)(eol - v) : strlen(v));
		}
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return NULL;
}

long long
tl_stat_value(const char *stats, const char *name)
{
	char *s = tl_stat_str(stats, name);
	long long v;

	if (s == NULL)
		return -1;
	v = strtoll(s, NULL, 10);
	free(s);
	return v;
}

long long
tl_stat_(const char *file, int line, int fd, const char *name)
{
	char *st = tl_stats_(file, line, fd);
	long long v = tl_stat_value(st, name);

	free(st);
	return v;
}

void
tl_wait_stat_(const char *file, int line, int fd, const char *name,
    long long want, int ms)
{
	int64_t deadline = tl_now_ms() + ms;
	long long v;

	for (;;) {
		v = tl_stat_(file, line, fd, name);
		if (v == -1)
			v = 0;
		if (v == want)
			return;
		if (tl_now_ms() >= deadline)
			tl_fail(file, line, "stat %s is %lld, waited %d ms for "
			    "%lld", name, v, ms, want);
		tl_sleep_ms(5);
	}
}

/* Run the saker binary; stdin from in_path (or /dev/null), stdout and
 * stderr captured.  Returns the exit status (or 128+signal). */
int
tl_run_saker(const char *dir, const char *in_path, char **out, size_t *outlen,
    char **err, const char *arg0, ...)
{
	const char *argv[32];
	char *opath = tl_strdupf("%s/run.out", dir), *epath = tl_strdupf("%s/run.err", dir);
	va_list ap;
	int n = 1, status;
	pid_t pid;

	argv[0] = "saker";
	va_start(ap, arg0);
	for (const char *a = arg0; a != NULL && n < 31; a = va_arg(ap, const char *))
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		int in = open(in_path != NULL ? in_path : "/dev/null", O_RDONLY);
		int o = open(opath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(epath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (in == -1 || o == -1 || e == -1)
			_exit(126);
		dup2(in, 0);
		dup2(o, 1);
		dup2(e, 2);
		execv(tl_saker_path(), (char *const *)argv);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	if (out != NULL)
		*out = tl_read_file(opath, outlen);
	if (err != NULL)
		*err = tl_read_file(epath, NULL);
	free(opath);
	free(epath);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
