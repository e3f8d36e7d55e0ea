/* check_faults.c -- storage fault injection (SQLite's method): fail the Nth write/fsync/mmap, N stepping up. */
#include "config.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "powerloss/powerloss.h"
#include "testlib.h"

/*
 * sakerd runs with tests/powerloss/libpowerloss.so preloaded and
 * SAKER_FAULT="OP:N:MODE": once the server is up (the arm file exists),
 * the Nth write, fsync or mmap call on a store file fails (powerloss.h).
 * A fixed workload of sets, takes, open+confirm and delayed items (which
 * need promotion) runs against it, one request at a time.  After it:
 *   - every reply is the normal one or SERVER_ERROR, never a STORED for an
 *     item the store did not keep;
 *   - the server is still up and answering;
 *   - after an fsync failure the store refuses writes (fail-stop) and
 *     /healthz answers 503 with the reason;
 *   - after SIGKILL and a restart without faults, every acknowledged item
 *     not taken is there, and nothing that was refused or taken is.
 * N steps upward from 1 until a run completes without hitting the fault.
 * To stay within make check's time budget, N runs 1..DENSE and then in
 * steps of 5 (fsync) or 15 (write); FAULT_STRIDE=1 in the environment runs
 * every N (FAULT_STRIDE=k: steps of k).  FAULT_ONLY=fsync:once runs one
 * loop.
 */

#define NITEMS 64
#define DENSE 10		/* every N up to here */

/* refused items that were back after a restart, per fault_loop() */
static int refused_back_total;
#define TIMEOUT_MS 5000

/* IT_DELIVERED: the client has the item (an open take) but its close was
 * answered SERVER_ERROR; whether the close reached the disk is unknown
 * after an fsync failure, so the item may or may not be back. */
enum { IT_UNSENT, IT_ACKED, IT_REFUSED, IT_TAKEN, IT_DELIVERED };

struct run {
	char *top;
	char data[PATH_MAX];
	char arm[PATH_MAX];
	char hit[PATH_MAX + 8];
	char spec[PATH_MAX + 16];
	int hport;
	struct tl_server *s;
	int fd;
	int state[NITEMS];
	int nerr;		/* SERVER_ERROR replies seen */
	bool broken;		/* a SERVER_ERROR was seen */
	bool failstop;		/* fsync fault: no STORED after an error */
	char last[128];		/* last request, for messages */
	char what[128];		/* "lmdb fsync:3:once" */
	int refused_back;	/* refused, yet there after the restart */
	bool ckpt_each;		/* lmdb-ckpt: checkpoint after every batch */
};

static void
env_set(const struct run *r, const char *fault)
{
	bool malloc_fault = strncmp(fault, "malloc:", 7) == 0;
	const char *so = getenv(malloc_fault ? "MALLOCFAIL_SO" : "POWERLOSS_SO");
	const char *asan = getenv("ASAN_OPTIONS");
	char path[PATH_MAX], *opts;

	if (so == NULL)
		so = malloc_fault ? "tests/powerloss/libmallocfail.so" :
		    "tests/powerloss/libpowerloss.so";
	ck_assert_msg(realpath(so, path) != NULL, "%s: %s", so, strerror(errno));
	setenv("LD_PRELOAD", path, 1);
	/* The shim has no ASan: in a sanitizer build, let it come first. */
	if (asan == NULL || strstr(asan, "verify_asan_link_order") == NULL) {
		opts = tl_strdupf("%s%sverify_asan_link_order=0", asan ? asan : "",
		    asan && *asan ? ":" : "");
		setenv("ASAN_OPTIONS", opts, 1);
		free(opts);
	}
	setenv(PL_ENV_DIR, r->data, 1);
	unsetenv(PL_ENV_JOURNAL);
	setenv(PL_ENV_FAULT, fault, 1);
	setenv(PL_ENV_ARM, r->arm, 1);
}

static void
env_clear(void)
{
	unsetenv("LD_PRELOAD");
	unsetenv(PL_ENV_DIR);
	unsetenv(PL_ENV_FAULT);
	unsetenv(PL_ENV_ARM);
}

static bool
exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

#define http_get(port, path) tl_http((port), "GET", (path), NULL, NULL)

/* One reply line, malloc'd. */
static char *
line(struct run *r)
{
	char *l = tl_readline(r->fd);

	if (l == NULL) {
		char *log = tl_read_file(r->s->log, NULL);
		size_t n = log != NULL ? strlen(log) : 0;

		tl_fail(__FILE__, __LINE__, "%s: no reply within %d ms after "
		    "\"%s\"; server %d %s, port %d; fault %s; end of its log:\n%s",
		    r->what, tl_timeout_ms, r->last, (int)r->s->pid,
		    tl_server_alive(r->s) ? "alive" : "gone", r->s->port,
		    access(r->hit, F_OK) == 0 ? "hit" : "not hit",
		    log == NULL ? "" : log + (n > 600 ? n - 600 : 0));
	}
	/* issue 35: the store's path is for the log, not for clients */
	ck_assert_msg(strstr(l, r->data) == NULL, "%s: a reply names the store: %s",
	    r->what, l);
	return l;
}

static bool
is_server_error(const char *l)
{
	return strncmp(l, "SERVER_ERROR ", 13) == 0;
}

static void
do_set(struct run *r, int i, const char *opts)
{
	char req[128], *l;

	snprintf(req, sizeof(req), "set fq%d%s 0 0 6\r\nit%04d\r\n", i % 2, opts, i);
	snprintf(r->last, sizeof(r->last), "set fq%d%s (item %d)", i % 2, opts, i);
	mustsends(r->fd, req);
	l = line(r);
	if (strcmp(l, "STORED") == 0) {
		/* fail-stop: nothing is acknowledged after a failed fsync */
		ck_assert_msg(!r->failstop || !r->broken, "%s: item %d STORED "
		    "after a SERVER_ERROR", r->what, i);
		r->state[i] = IT_ACKED;
	} else {
		ck_assert_msg(is_server_error(l), "set item %d: \"%s\"", i, l);
		r->state[i] = IT_REFUSED;
		r->broken = true;
		r->nerr++;
	}
	free(l);
}

/* Item number from a VALUE's data "itNNNN". */
static int
item_no(const struct tl_value *v)
{
	int i;

	ck_assert_msg(v->len == 6 && sscanf(v->data, "it%d", &i) == 1 && i >= 0 &&
	    i < NITEMS, "unexpected data \"%s\"", v->data);
	return i;
}

/* "get KEY": VALUE, END or SERVER_ERROR.  Returns the item or -1. */
static int
do_get(struct run *r, const char *key)
{
	char req[128], *l, *rest;
	struct tl_value v;
	int i = -1;

	snprintf(req, sizeof(req), "get %s\r\n", key);
	snprintf(r->last, sizeof(r->last), "get %s", key);
	mustsends(r->fd, req);
	l = line(r);
	if (is_server_error(l)) {
		r->broken = true;
		r->nerr++;
		free(l);
		return -1;
	}
	if (strcmp(l, "END") == 0 || (r->broken &&
	    strcmp(l, "CLIENT_ERROR too many open items") == 0)) {
		/* (an open item whose close failed is still held) */
		free(l);
		return -1;
	}
	ck_assert_msg(strncmp(l, "VALUE ", 6) == 0, "get %s: \"%s\"", key, l);
	memset(&v, 0, sizeof(v));
	rest = strrchr(l, ' ');
	v.len = (size_t)atol(rest + 1);
	v.data = calloc(1, v.len + 3);
	ck_assert_int_eq(tl_readn(r->fd, v.data, v.len + 2, TIMEOUT_MS),
	    (ssize_t)v.len + 2);
	v.data[v.len] = '\0';
	i = item_no(&v);
	free(v.data);
	free(l);
	l = line(r);
	ck_assert_str_eq(l, "END");
	free(l);
	return i;
}

static void
workload(struct run *r)
{
	int i, got, e0;

	for (i = 0; i < 16; i++)
		do_set(r, i, "");
	/* takes */
	for (i = 0; i < 4; i++)
		if ((got = do_get(r, i % 2 ? "fq1" : "fq0")) >= 0) {
			ck_assert_int_eq(r->state[got], IT_ACKED);
			r->state[got] = IT_TAKEN;
		}
	/* tentative takes: open then confirm (close) */
	for (i = 0; i < 3; i++) {
		if ((got = do_get(r, "fq0/open")) < 0)
			continue;
		ck_assert_int_eq(r->state[got], IT_ACKED);
		/* confirmed only if the close is answered without error;
		 * an open item that is never closed returns at restart */
		e0 = r->nerr;
		(void)do_get(r, "fq0/close");
		r->state[got] = r->nerr == e0 ? IT_TAKEN : IT_DELIVERED;
	}
	/* delayed items: promotion is a write too */
	for (i = 16; i < 20; i++)
		do_set(r, i, "/delay=1");
	for (i = 20; i < 28; i++)
		do_set(r, i, "");
	for (i = 0; i < 4; i++)
		if ((got = do_get(r, "fq1/t=300")) >= 0) {
			ck_assert_int_eq(r->state[got], IT_ACKED);
			r->state[got] = IT_TAKEN;
		}
}

/* After the restart: every acknowledged item not taken is there, nothing
 * else. */
static void
verify(struct run *r, const char *what)
{
	int seen[NITEMS], q, i, fd;

	memset(seen, 0, sizeof(seen));
	fd = tl_connect(r->s->port);
	for (q = 0; q < 2; q++) {
		char req[32];

		snprintf(req, sizeof(req), "get fq%d\r\n", q);
		for (;;) {
			struct tl_value v;

			mustsends(fd, req);
			if (tl_read_value(fd, &v) == 0)
				break;
			i = item_no(&v);
			tl_value_clear(&v);
			tl_ckresp_(__FILE__, __LINE__, fd, "END\r\n", 5);
			ck_assert_msg(seen[i]++ == 0, "%s: item %d twice", what, i);
			/* A SERVER_ERROR after a failed fsync is "maybe": the
			 * write may have reached the disk anyway (SQLite's WAL
			 * frames were written before the fsync failed). */
			if (r->state[i] == IT_DELIVERED)
				continue;
			if (r->state[i] == IT_REFUSED) {
				r->refused_back++;
				continue;
			}
			ck_assert_msg(r->state[i] == IT_ACKED, "%s: item %d back "
			    "after restart but it was %s", what, i,
			    r->state[i] == IT_TAKEN ? "taken" : "never sent");
		}
	}
	for (i = 0; i < NITEMS; i++) {
		ck_assert_msg(r->state[i] != IT_ACKED || seen[i] == 1,
		    "%s: acknowledged item %d lost", what, i);
		/* A close whose commit failed before reaching the disk leaves
		 * the item open, and open items return at restart; when the
		 * fsync failed, both drivers report the outcome unknown
		 * (SAKER_EINDOUBT): the item may be gone. */
		ck_assert_msg(r->state[i] != IT_DELIVERED || seen[i] == 1 ||
		    r->failstop, "%s: item %d gone although its close "
		    "failed", what, i);
	}
	close(fd);
}

/* One run with the Nth call failing; returns whether the fault hit. */
static bool
fault_run(const char *store, const char *op, unsigned long n, const char *mode)
{
	struct run r;
	char fault[64], hp[32], what[128], *h;
	bool hit;
	int fd;

	memset(&r, 0, sizeof(r));
	r.top = tl_mkdtemp();
	snprintf(r.data, sizeof(r.data), "%s/data", r.top);
	snprintf(r.arm, sizeof(r.arm), "%s/arm", r.top);
	snprintf(r.hit, sizeof(r.hit), "%s/arm.hit", r.top);
	ck_assert_int_eq(mkdir(r.data, 0700), 0);
	r.ckpt_each = strcmp(store, "lmdb-ckpt") == 0;
	/* lmdb-ckpt: a checkpoint after every batch, through the driver's
	 * option channel */
	snprintf(r.spec, sizeof(r.spec), r.ckpt_each ?
	    "lmdb,checkpoint-bytes=1:%s/store" : strncmp(store, "lmdb", 4) == 0 ?
	    "lmdb:%s/store" : "sqlite:%s/store.db", r.data);
	snprintf(fault, sizeof(fault), "%s:%lu:%s", op, n, mode);
	snprintf(what, sizeof(what), "%s %s", store, fault);
	snprintf(r.what, sizeof(r.what), "%s", what);
	r.failstop = strcmp(op, "fsync") == 0;
	r.hport = tl_free_port();
	snprintf(hp, sizeof(hp), "127.0.0.1:%d", r.hport);
	env_set(&r, fault);
	r.s = tl_server_start(r.spec, "--sync", "always", "--http", hp, NULL);
	env_clear();
	/* sakerd listens before it opens the store: only a reply proves the
	 * store is open, and only then may the faults start */
	r.fd = tl_connect(r.s->port);
	snprintf(r.last, sizeof(r.last), "version (before arming)");
	mustsends(r.fd, "version\r\n");
	h = line(&r);
	ck_assert_msg(strncmp(h, "VERSION ", 8) == 0, "%s: \"%s\"", what, h);
	free(h);
	/* arm: count from here on */
	fd = open(r.arm, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);

	workload(&r);
	hit = exists(r.hit);
	ck_assert_msg(hit || !r.broken, "%s: SERVER_ERROR without a fault", what);

	/* still up */
	snprintf(r.last, sizeof(r.last), "version");
	mustsends(r.fd, "version\r\n");
	h = line(&r);
	ck_assert_msg(strncmp(h, "VERSION ", 8) == 0, "%s: \"%s\"", what, h);
	free(h);
	if (hit && strcmp(op, "fsync") == 0) {
		/* fail-stop: refuses writes, /healthz says why */
		if (!r.broken)
			do_set(&r, 60, "");
		ck_assert_msg(r.broken, "%s: fsync failed, store still writable",
		    what);
		do_set(&r, 61, "");
		ck_assert_int_eq(r.state[61], IT_REFUSED);
		h = http_get(r.hport, "/healthz");
		ck_assert_msg(strstr(h, " 503 ") != NULL &&
		    strstr(h, "\r\n\r\nstore not writable: ") != NULL,
		    "%s: /healthz: %s", what, h);
		ck_assert_msg(strstr(h, r.data) == NULL, "%s: /healthz names the "
		    "store: %s", what, h);
		free(h);
	}
	close(r.fd);
	ck_assert_msg(tl_server_alive(r.s), "%s: server died", what);
	tl_server_kill(r.s);

	tl_server_restart(r.s);	/* no shim: a clean start */
	verify(&r, what);
	refused_back_total += r.refused_back;
	tl_server_stop(r.s);
	tl_server_free(r.s);
	tl_rmrf(r.top);
	free(r.top);
	return hit;
}

static void
fault_loop(const char *store, const char *op, const char *mode)
{
	const char *e;
	unsigned long n, stride;
	int runs = 0, hits = 0;
	int64_t t0 = tl_now_ms();

	char sel[64];

	/* LMDB allocates when a transaction begins or commits; batches run
	 * in one long transaction, so that is at checkpoints: take one after
	 * every batch for the allocation faults to meet the workload. */
	if (strcmp(store, "lmdb") == 0 && strcmp(op, "malloc") == 0)
		store = "lmdb-ckpt";
	snprintf(sel, sizeof(sel), "%s:%s", op, mode);
	if ((e = getenv("FAULT_ONLY")) != NULL && strcmp(e, sel) != 0)
		return;		/* a developer's filter: FAULT_ONLY=fsync:once */
#if defined(__SANITIZE_ADDRESS__)
	if (strcmp(op, "malloc") == 0) {
		/* libmallocfail.so replaces the allocator ASan must own */
		printf("%s malloc:N:%s: skipped in a sanitizer build\n", store, mode);
		return;
	}
#endif
	e = getenv("FAULT_STRIDE");
	/* the workload makes about 40 fsyncs, 150-200 writes and a few
	 * hundred (LMDB) to thousands (SQLite) of allocations */
	stride = e != NULL ? strtoul(e, NULL, 10) :
	    strcmp(op, "write") == 0 ? 15 : strcmp(op, "malloc") == 0 ?
	    (strcmp(store, "sqlite") == 0 ? 97 : 23) : 5;
	if (stride == 0)
		stride = 1;
	refused_back_total = 0;
	for (n = 1; n < 5000; n += n < DENSE ? 1 : stride) {
		runs++;
		if (!fault_run(store, op, n, mode))
			break;
		hits++;
	}
	ck_assert_msg(n < 5000, "%s %s:%s: the fault hit every run", store, op,
	    mode);
	printf("%s %s:N:%s: %d runs, fault hit in %d (N = 1..%lu), refused "
	    "but present after restart %d, %lld ms\n", store, op, mode, runs,
	    hits, n - 1, refused_back_total, (long long)(tl_now_ms() - t0));
	fflush(stdout);
	ck_assert_msg(hits > 0, "%s %s: the workload never reached the fault",
	    store, op);
}

/* A fault while the store opens: sakerd exits 1 with a message, never a
 * crash. */
static void
startup_fault(const char *store, const char *fault)
{
	char *top = tl_mkdtemp(), data[PATH_MAX], spec[PATH_MAX + 16];
	char logp[PATH_MAX + 8], *log;
	struct run r;
	pid_t pid;
	int st, fd;

	snprintf(data, sizeof(data), "%s/data", top);
	snprintf(logp, sizeof(logp), "%s/log", top);
	ck_assert_int_eq(mkdir(data, 0700), 0);
	snprintf(spec, sizeof(spec), strcmp(store, "lmdb") == 0 ?
	    "lmdb:%s/store" : "sqlite:%s/store.db", data);
	memset(&r, 0, sizeof(r));
	snprintf(r.data, sizeof(r.data), "%s", data);
	env_set(&r, fault);
	unsetenv(PL_ENV_ARM);	/* armed from the first call */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(tl_sakerd_path(), "sakerd", "-l", "127.0.0.1", "-p", "0",
		    "--store", spec, (char *)NULL);
		_exit(127);
	}
	env_clear();
	/* bounded: a server that did start is stopped after 2 s */
	{
		int64_t end = tl_now_ms() + 2000;
		pid_t w;

		while ((w = waitpid(pid, &st, WNOHANG)) == 0 && tl_now_ms() < end)
			tl_sleep_ms(10);
		if (w == 0) {
			kill(pid, SIGTERM);
			waitpid(pid, &st, 0);
		}
	}
	log = tl_read_file(logp, NULL);
	ck_assert_msg(!WIFSIGNALED(st) || WTERMSIG(st) == SIGTERM,
	    "%s %s: sakerd died of signal %d; log: %s", store, fault,
	    WTERMSIG(st), log ? log : "");
	if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
		ck_assert_msg(WEXITSTATUS(st) == 1 && log != NULL && *log != '\0',
		    "%s %s: exit %d; log: %s", store, fault, WEXITSTATUS(st),
		    log ? log : "");
	printf("%s %s at startup: %s\n", store, fault, WIFEXITED(st) ?
	    (WEXITSTATUS(st) == 0 ? "started" : "refused to start") : "started");
	free(log);
	tl_rmrf(top);
	free(top);
}

#define STORE_TESTS(drv)						\
START_TEST(test_##drv##_fsync_once) { fault_loop(#drv, "fsync", "once"); } END_TEST \
START_TEST(test_##drv##_fsync_persist) { fault_loop(#drv, "fsync", "persist"); } END_TEST \
START_TEST(test_##drv##_write_once) { fault_loop(#drv, "write", "once"); } END_TEST \
START_TEST(test_##drv##_write_persist) { fault_loop(#drv, "write", "persist"); } END_TEST \
START_TEST(test_##drv##_malloc_once) { fault_loop(#drv, "malloc", "once"); } END_TEST \
START_TEST(test_##drv##_malloc_persist) { fault_loop(#drv, "malloc", "persist"); } END_TEST \
START_TEST(test_##drv##_startup)					\
{									\
	static const char *const f[] = { "mmap:1", "mmap:2", "fsync:1",	\
	    "write:1", "write:2", "write:3:persist" };			\
	size_t i;							\
	if (getenv("FAULT_ONLY") != NULL)				\
		return;							\
	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++)			\
		startup_fault(#drv, f[i]);				\
}									\
END_TEST

#ifdef HAVE_LMDB
STORE_TESTS(lmdb)
/* The same with a checkpoint after every batch, so that the faults also
 * hit LMDB's own commits (the checkpoints) and the journal's restarts,
 * not only the journal writes of batches.  (The malloc loops always run
 * that way: see fault_loop.) */
START_TEST(test_lmdb_ckpt_fsync) { fault_loop("lmdb-ckpt", "fsync", "once"); } END_TEST
START_TEST(test_lmdb_ckpt_write) { fault_loop("lmdb-ckpt", "write", "persist"); } END_TEST
#endif
#ifdef HAVE_SQLITE
STORE_TESTS(sqlite)
#endif


/*
 * A batch in flight (--commit async, with --sync always): the
 * fdatasync of its journal record stalls (fsync:1:stall, counted from the
 * arm file, after a first commit has grown the journal).  Meanwhile its
 * client has no STORED, a get of its item on another connection has no
 * reply either (that take's batch waits for the one it took from), and a
 * version on a third is answered at once: the loop is not waiting.  Then
 * either the stall ends (`release`): the STORED comes, then the item; or
 * SIGKILL: the STORED was never sent, and after a restart the item is
 * there or not (written, never acknowledged), nothing else.
 */
static void
inflight(const char *drv, bool release)
{
	struct run r;
	struct tl_server *s;
	char *l, go[PATH_MAX + 8];
	int a, b, c, fd;
	int64_t t0, waited;

	memset(&r, 0, sizeof(r));
	r.top = tl_mkdtemp();
	snprintf(r.data, sizeof(r.data), "%s/data", r.top);
	snprintf(r.arm, sizeof(r.arm), "%s/arm", r.top);
	snprintf(r.hit, sizeof(r.hit), "%s/arm.hit", r.top);
	snprintf(go, sizeof(go), "%s/arm.go", r.top);
	ck_assert_int_eq(mkdir(r.data, 0700), 0);
	snprintf(r.spec, sizeof(r.spec), strcmp(drv, "lmdb") == 0 ?
	    "lmdb:%s/store" : "sqlite:%s/store.db", r.data);
	env_set(&r, "fsync:1:stall");
	s = tl_server_start(r.spec, "--sync", "always", "--commit", "async",
	    NULL);
	env_clear();
	a = tl_connect(s->port);
	b = tl_connect(s->port);
	c = tl_connect(s->port);
	mustsends(a, "set warm 0 0 1\r\nw\r\n");
	l = tl_readline(a);
	ck_assert_str_eq(l, "STORED");
	free(l);
	fd = open(r.arm, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);

	mustsends(a, "set fq 0 0 1\r\nx\r\n");
	t0 = tl_now_ms();
	while (!exists(r.hit) && tl_now_ms() - t0 < tl_timeout_ms)
		usleep(1000);
	ck_assert_msg(exists(r.hit), "%s: the fdatasync never came", drv);
	mustsends(c, "get fq\r\n");
	t0 = tl_now_ms();
	mustsends(b, "version\r\n");
	l = tl_readline(b);
	waited = tl_now_ms() - t0;
	ck_assert_msg(l != NULL && strncmp(l, "VERSION ", 8) == 0,
	    "%s: version during a batch in flight: %s", drv, l ? l : "no reply");
	free(l);
	ck_assert_msg(waited < 1000, "%s: version waited %lld ms", drv,
	    (long long)waited);
	l = tl_readline_ms(a, 300);
	ck_assert_msg(l == NULL, "%s: \"%s\" before the fdatasync", drv, l);
	l = tl_readline_ms(c, 50);
	ck_assert_msg(l == NULL, "%s: the get answered \"%s\" before the "
	    "batch it took from was durable", drv, l);
	if (release) {
		fd = open(go, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		ck_assert_int_ge(fd, 0);
		close(fd);
		l = tl_readline(a);
		ck_assert_msg(l != NULL && strcmp(l, "STORED") == 0,
		    "%s: after the fdatasync: %s", drv, l ? l : "no reply");
		free(l);
		l = tl_readline(c);
		ck_assert_msg(l != NULL && strcmp(l, "VALUE fq 0 1") == 0,
		    "%s: the get: %s", drv, l ? l : "no reply");
		free(l);
		close(a);
		close(b);
		close(c);
		tl_server_stop(s);
	} else {
		tl_server_kill(s);
		l = tl_readline_ms(a, 1000);
		ck_assert_msg(l == NULL, "%s: \"%s\" from a killed server", drv,
		    l);
		close(a);
		close(b);
		close(c);
		tl_server_restart(s);
		a = tl_connect(s->port);
		mustsends(a, "get fq\r\n");
		l = tl_readline(a);
		ck_assert_msg(l != NULL && (strcmp(l, "END") == 0 ||
		    strcmp(l, "VALUE fq 0 1") == 0), "%s: after the restart: %s",
		    drv, l ? l : "no reply");
		free(l);
		close(a);
	}
	tl_server_free(s);
}


/*
 * The fdatasync of the batch in flight fails (fsync:1:stallfail): a second
 * client's set, gathered on top of it meanwhile, fails with it (store.h,
 * ASYNCHRONOUS COMMIT): both get SERVER_ERROR, neither a STORED; a version
 * was answered meanwhile; the store then refuses sets, /healthz says so,
 * and after a restart the first item is there or not (written before the
 * fdatasync failed: in doubt), the second never.
 */
static void
inflight_fails(const char *drv)
{
	struct run r;
	struct tl_server *s;
	char *l, go[PATH_MAX + 8];
	int a, b, c, fd;
	int64_t t0;

	memset(&r, 0, sizeof(r));
	r.top = tl_mkdtemp();
	snprintf(r.data, sizeof(r.data), "%s/data", r.top);
	snprintf(r.arm, sizeof(r.arm), "%s/arm", r.top);
	snprintf(r.hit, sizeof(r.hit), "%s/arm.hit", r.top);
	snprintf(go, sizeof(go), "%s/arm.go", r.top);
	ck_assert_int_eq(mkdir(r.data, 0700), 0);
	snprintf(r.spec, sizeof(r.spec), strcmp(drv, "lmdb") == 0 ?
	    "lmdb:%s/store" : "sqlite:%s/store.db", r.data);
	env_set(&r, "fsync:1:stallfail");
	s = tl_server_start(r.spec, "--sync", "always", "--commit", "async",
	    NULL);
	env_clear();
	a = tl_connect(s->port);
	b = tl_connect(s->port);
	c = tl_connect(s->port);
	mustsends(a, "set warm 0 0 1\r\nw\r\n");
	l = tl_readline(a);
	ck_assert_str_eq(l, "STORED");
	free(l);
	fd = open(r.arm, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);

	mustsends(a, "set fq 0 0 1\r\nx\r\n");
	t0 = tl_now_ms();
	while (!exists(r.hit) && tl_now_ms() - t0 < tl_timeout_ms)
		usleep(1000);
	ck_assert_msg(exists(r.hit), "%s: the fdatasync never came", drv);
	mustsends(b, "set fq 0 0 1\r\ny\r\n");
	mustsends(c, "version\r\n");
	l = tl_readline(c);
	ck_assert_msg(l != NULL && strncmp(l, "VERSION ", 8) == 0,
	    "%s: version: %s", drv, l ? l : "no reply");
	free(l);
	l = tl_readline_ms(b, 200);
	ck_assert_msg(l == NULL, "%s: the set on top answered \"%s\" before "
	    "the batch under it", drv, l);
	fd = open(go, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	l = tl_readline(a);
	ck_assert_msg(l != NULL && is_server_error(l), "%s: the batch in "
	    "flight: %s", drv, l ? l : "no reply");
	free(l);
	l = tl_readline(b);
	ck_assert_msg(l != NULL && is_server_error(l), "%s: the batch on top: "
	    "%s", drv, l ? l : "no reply");
	free(l);
	mustsends(c, "set fq 0 0 1\r\nz\r\n");
	l = tl_readline(c);
	ck_assert_msg(l != NULL && is_server_error(l), "%s: a set after the "
	    "failure: %s", drv, l ? l : "no reply");
	free(l);
	close(a);
	close(b);
	close(c);
	tl_server_kill(s);
	tl_server_restart(s);
	a = tl_connect(s->port);
	mustsends(a, "get fq\r\n");
	l = tl_readline(a);
	ck_assert_msg(l != NULL && (strcmp(l, "END") == 0 ||
	    strcmp(l, "VALUE fq 0 1") == 0), "%s: after the restart: %s", drv,
	    l ? l : "no reply");
	if (strcmp(l, "VALUE fq 0 1") == 0) {
		free(l);
		l = tl_readline(a);
		ck_assert_msg(l != NULL && strcmp(l, "x") == 0, "%s: the item "
		    "on top is back: %s", drv, l ? l : "no reply");
	}
	free(l);
	close(a);
	tl_server_free(s);
}

#ifdef HAVE_LMDB
START_TEST(test_inflight_lmdb_release) { inflight("lmdb", true); } END_TEST
START_TEST(test_inflight_lmdb_kill) { inflight("lmdb", false); } END_TEST
START_TEST(test_inflight_lmdb_fails) { inflight_fails("lmdb"); } END_TEST
#endif
#ifdef HAVE_SQLITE
START_TEST(test_inflight_sqlite_release) { inflight("sqlite", true); } END_TEST
START_TEST(test_inflight_sqlite_kill) { inflight("sqlite", false); } END_TEST
START_TEST(test_inflight_sqlite_fails) { inflight_fails("sqlite"); } END_TEST
#endif

#define ADD_STORE(s, drv) do {						\
	TCase *tc = tcase_create(#drv);					\
	tcase_set_timeout(tc, 240);					\
	tcase_add_test(tc, test_##drv##_fsync_once);			\
	tcase_add_test(tc, test_##drv##_fsync_persist);			\
	tcase_add_test(tc, test_##drv##_write_once);			\
	tcase_add_test(tc, test_##drv##_write_persist);			\
	tcase_add_test(tc, test_##drv##_malloc_once);			\
	tcase_add_test(tc, test_##drv##_malloc_persist);		\
	tcase_add_test(tc, test_##drv##_startup);			\
	suite_add_tcase(s, tc);						\
} while (0)

int
main(void)
{
	Suite *s = suite_create("faults");
	SRunner *sr;
	int failed;

#ifdef HAVE_LMDB
	ADD_STORE(s, lmdb);
	{
		TCase *tc = tcase_create("lmdb-ckpt");

		tcase_set_timeout(tc, 240);
		tcase_add_test(tc, test_lmdb_ckpt_fsync);
		tcase_add_test(tc, test_lmdb_ckpt_write);
		suite_add_tcase(s, tc);
		tc = tcase_create("lmdb-inflight");
		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, test_inflight_lmdb_release);
		tcase_add_test(tc, test_inflight_lmdb_kill);
		tcase_add_test(tc, test_inflight_lmdb_fails);
		suite_add_tcase(s, tc);
	}
#endif
#ifdef HAVE_SQLITE
	ADD_STORE(s, sqlite);
	{
		TCase *tc = tcase_create("sqlite-inflight");

		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, test_inflight_sqlite_release);
		tcase_add_test(tc, test_inflight_sqlite_kill);
		tcase_add_test(tc, test_inflight_sqlite_fails);
		suite_add_tcase(s, tc);
	}
#endif
#if !defined(HAVE_LMDB) && !defined(HAVE_SQLITE)
	return 77;
#endif
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
