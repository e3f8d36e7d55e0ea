/*
 * testlib.h -- harness shared by the integration, crash and CLI tests.
 *
 * It starts the real sakerd on 127.0.0.1 and a free port, each server in
 * its own temporary directory, and talks raw bytes to it.  Every read is
 * bounded by a deadline (tl_timeout_ms, default 5000 ms, 30000 under
 * TL_VALGRIND), so a broken
 * server fails a test instead of hanging it.
 *
 * Failures go through Check (_ck_assert_failed) and name the caller's file
 * and line.  Check leaves a failed forked test with _exit() (teardowns and
 * atexit handlers do not run) and kills a timed-out one, so cleanup does
 * not depend on the test: every server gets PR_SET_PDEATHSIG(SIGKILL), and
 * a detached janitor process removes every tl_mkdtemp() directory once the
 * test process is gone.  Set TL_KEEP=1 in the environment to keep them
 * (server logs are in DIR/sakerd.log).  Start servers from the test's main
 * thread only (the death signal follows the thread that forked).
 *
 * Binaries: $SAKERD (default "./sakerd") and $SAKER (default "./saker").
 */
#ifndef SAKER_TESTLIB_H
#define SAKER_TESTLIB_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Deadline for every single read or connect wait, in milliseconds. */
extern int tl_timeout_ms;

/* A deadline for something the server must do, stretched sixfold when
 * the server runs under memcheck (TL_VALGRIND, set by tests/valgrind.sh),
 * which runs it twenty times slower.  Only for upper bounds: never for
 * "must not happen before" checks. */
int tl_slow(int ms);

/* ---------------------------------------------------------------- time */

/* Monotonic milliseconds. */
int64_t tl_now_ms(void);
/* Wall-clock Unix seconds / milliseconds (precise clock, as the server's). */
int64_t tl_unix_s(void);
int64_t tl_unix_ms(void);
/* Sleep ms milliseconds (only to let real time pass, never to synchronise). */
void tl_sleep_ms(int ms);

/* ---------------------------------------------------------- temp dirs */

/* mkdtemp under /tmp; returns a malloc'd path.  Fails the test on error. */
char *tl_mkdtemp(void);
/* rm -rf path (no symlink following).  Errors are ignored. */
void tl_rmrf(const char *path);
/* The per-test scratch directory: a checked fixture pair that makes
 * tl_dir (tl_mkdtemp()) before each test and removes it after. */
extern char *tl_dir;
void tl_dir_setup(void);
void tl_dir_teardown(void);
/* Write text to tl_dir/name (mode 0600, replaced if there); returns the
 * malloc'd path.  Fails the test on error. */
char *tl_write_file(const char *name, const char *text);
/* Whole file as a malloc'd NUL-terminated string, or NULL. */
char *tl_read_file(const char *path, size_t *lenp);
/* CPU time (user + system) of process pid so far, in seconds, from
 * /proc/PID/stat.  Fails the test when it cannot be read. */
double tl_proc_cpu_s(pid_t pid);

/* Path of the sakerd / saker binary (from $SAKERD / $SAKER, absolute). */
const char *tl_sakerd_path(void);
const char *tl_saker_path(void);

/* ------------------------------------------------------------- servers */

#define TL_MAX_ARGS 32

struct tl_server {
	pid_t pid;		/* 0 when not running */
	int port;		/* current port (may change on restart) */
	char *dir;		/* per-server temp dir, removed by tl_server_free */
	char *spec;		/* the --store spec passed, or NULL */
	char *log;		/* stderr+stdout of every start, appended */
	int nargs;
	char *args[TL_MAX_ARGS]; /* extra arguments */
	int status;		/* wait status of the last exit, -1 if none */
	pid_t owner;		/* process that started it */
};

/*
 * Start sakerd with `--store STORE` plus the NULL-terminated extra
 * arguments.  STORE is "memory", "lmdb" (-> lmdb:DIR/store), "sqlite"
 * (-> sqlite:DIR/store.db), any other "type:location" (passed verbatim) or
 * NULL (no --store).  The process runs in the temp dir.  Returns once the
 * server accepts connections; fails the test if it never does.
 */
#define tl_server_start(...) tl_server_start_(__FILE__, __LINE__, __VA_ARGS__)
struct tl_server *tl_server_start_(const char *file, int line,
    const char *store, ...);
/* Start again on the same store and arguments (on a fresh port). */
#define tl_server_restart(s) tl_server_restart_(__FILE__, __LINE__, (s))
void tl_server_restart_(const char *file, int line, struct tl_server *s);
/* SIGTERM, wait (bounded) and assert exit status 0. */
#define tl_server_stop(s) tl_server_stop_(__FILE__, __LINE__, (s))
void tl_server_stop_(const char *file, int line, struct tl_server *s);
/* SIGKILL and reap. */
void tl_server_kill(struct tl_server *s);
/* Wait up to ms for the server to exit by itself; returns its wait
 * status, or -1 if it is still running (it is left running). */
int tl_server_wait_exit(struct tl_server *s, int ms);
/* Kill if running, remove the temp dir, free. NULL is fine. */
void tl_server_free(struct tl_server *s);
/* True while the process exists (not yet reaped by us). */
bool tl_server_alive(struct tl_server *s);

/* Find a port that was free a moment ago on 127.0.0.1. */
int tl_free_port(void);

/* --------------------------------------------------------- connections */

/* Connect to 127.0.0.1:port; fails the test on error. */
#define tl_connect(port) tl_connect_(__FILE__, __LINE__, (port))
int tl_connect_(const char *file, int line, int port);
/* Same, but returns -1 instead of failing. */
int tl_try_connect(int port);

/* Write all bytes (bounded); fails the test on error. */
#define mustsend(fd, buf, len) tl_mustsend_(__FILE__, __LINE__, (fd), (buf), (len))
#define mustsends(fd, str) tl_mustsend_(__FILE__, __LINE__, (fd), (str), strlen(str))
void tl_mustsend_(const char *file, int line, int fd, const void *buf,
    size_t len);

/* Read exactly the expected bytes and compare; on mismatch or timeout the
 * failure message shows both, escaped. */
#define ckresp(fd, exp) tl_ckresp_(__FILE__, __LINE__, (fd), (exp), strlen(exp))
#define ckrespn(fd, exp, len) tl_ckresp_(__FILE__, __LINE__, (fd), (exp), (len))
void tl_ckresp_(const char *file, int line, int fd, const void *exp,
    size_t len);

/*
 * Read up to n bytes until all n arrived, EOF, or ms passed.  Returns the
 * number read (< n on EOF/timeout), -1 on error.
 */
ssize_t tl_readn(int fd, void *buf, size_t n, int ms);

/*
 * Read one line ending in "\n" within ms.  Returns it malloc'd without the
 * "\r\n"/"\n", or NULL on timeout or EOF.  Only the line's bytes are
 * consumed from the socket.
 */
char *tl_readline_ms(int fd, int ms);
#define tl_readline(fd) tl_readline_ms((fd), tl_timeout_ms)
/* As tl_readline but fails the test on timeout/EOF. */
#define tl_mustreadline(fd) tl_mustreadline_(__FILE__, __LINE__, (fd))
char *tl_mustreadline_(const char *file, int line, int fd);

/* Assert the peer closes the connection within ms (EOF or reset); any
 * bytes still pending before the close are skipped. */
#define tl_expect_closed(fd, ms) tl_expect_closed_(__FILE__, __LINE__, (fd), (ms))
void tl_expect_closed_(const char *file, int line, int fd, int ms);

/* True if nothing is readable on fd within ms. */
bool tl_quiet(int fd, int ms);

/* One VALUE block. */
struct tl_value {
	char *key;
	uint32_t flags;
	size_t len;
	char *data;		/* len bytes plus a NUL */
};

/*
 * Read one reply element: returns 1 and fills v for a VALUE block (data
 * and its "\r\n" consumed), 0 for "END".  Anything else fails the test.
 */
#define tl_read_value(fd, v) tl_read_value_(__FILE__, __LINE__, (fd), (v))
int tl_read_value_(const char *file, int line, int fd, struct tl_value *v);
void tl_value_clear(struct tl_value *v);

/*
 * "set key flags exptime len\r\n" + data, expect "STORED\r\n".
 */
#define tl_set(fd, key, data) tl_set_(__FILE__, __LINE__, (fd), (key), 0, 0, (data), strlen(data))
#define tl_setn(fd, key, flags, exp, data, len) tl_set_(__FILE__, __LINE__, (fd), (key), (flags), (exp), (data), (len))
void tl_set_(const char *file, int line, int fd, const char *key,
    uint32_t flags, long long exptime, const void *data, size_t len);

/*
 * "get key\r\n"; expects either one VALUE block whose key echoes `key`
 * followed by END, or a bare END.  Returns the data malloc'd (with a NUL
 * after it; *lenp and *flagsp set if not NULL), or NULL for END.
 */
#define tl_get(fd, key) tl_get_(__FILE__, __LINE__, (fd), (key), NULL, NULL)
#define tl_getn(fd, key, lenp, flagsp) tl_get_(__FILE__, __LINE__, (fd), (key), (lenp), (flagsp))
char *tl_get_(const char *file, int line, int fd, const char *key,
    size_t *lenp, uint32_t *flagsp);
/* Assert "get key" answers exactly `want` (a NUL-terminated string), or
 * a miss if want is NULL. */
#define tl_ckget(fd, key, want) tl_ckget_(__FILE__, __LINE__, (fd), (key), (want))
void tl_ckget_(const char *file, int line, int fd, const char *key,
    const char *want);

/*
 * "stats": returns the whole reply up to END (malloc'd), and
 * tl_stat_value looks a name up in it: the value as a number, or -1 if
 * the name is absent.  tl_stat is both in one call.
 */
#define tl_stats(fd) tl_stats_(__FILE__, __LINE__, (fd))
char *tl_stats_(const char *file, int line, int fd);
long long tl_stat_value(const char *stats, const char *name);
/* Raw value string of a stat (malloc'd), or NULL if absent. */
char *tl_stat_str(const char *stats, const char *name);
#define tl_stat(fd, name) tl_stat_(__FILE__, __LINE__, (fd), (name))
long long tl_stat_(const char *file, int line, int fd, const char *name);
/* Poll "stats" until name == want or ms passed; fails the test then.
 * Absent counts as 0. */
#define tl_wait_stat(fd, name, want, ms) tl_wait_stat_(__FILE__, __LINE__, (fd), (name), (want), (ms))
void tl_wait_stat_(const char *file, int line, int fd, const char *name,
    long long want, int ms);

/* Printable, escaped copy of bytes (\r \n \0 \xNN), malloc'd; long inputs
 * are cut with "...". */
char *tl_escape(const void *buf, size_t len);

/*
 * Run the saker binary with the NULL-terminated arguments; stdin from
 * in_path (or /dev/null), stdout and stderr captured into files in dir and
 * returned malloc'd (when out/err are not NULL).  Returns the exit status
 * (or 128+signal).
 */
int tl_run_saker(const char *dir, const char *in_path, char **out,
    size_t *outlen, char **err, const char *arg0, ...);

/* This end of a loopback TCP connection as sakerd names its peer
 * ("127.0.0.1:PORT"), malloc'd. */
char *tl_local_addr(int fd);

/* Write `text` to the config file `path` and SIGHUP s; returns once
 * sakerd's `reloads` stat shows it has reread it. */
void tl_reload(struct tl_server *s, const char *path, const char *text);

/* "user:pass" in base64 (RFC 4648), malloc'd. */
char *tl_base64(const char *s);

/*
 * One HTTP/1.0 request to 127.0.0.1:port: METHOD path with Basic
 * credentials ("user:pass", or NULL for none) and extra header lines
 * (each ending in \r\n, or NULL).  Returns the whole response, headers and
 * body, malloc'd (up to 1 MiB, read until the server closes).
 */
char *tl_http(int port, const char *method, const char *path,
    const char *cred, const char *headers);
/* The status code of a response tl_http() returned (fails the test when
 * it has none). */
#define tl_http_status(resp) tl_http_status_(__FILE__, __LINE__, (resp))
int tl_http_status_(const char *file, int line, const char *resp);

/* printf into a malloc'd string. */
char *tl_strdupf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* Fail the current test with a message naming file:line. */
void tl_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

#endif /* SAKER_TESTLIB_H */
