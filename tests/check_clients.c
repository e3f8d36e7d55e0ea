/* check_clients.c -- real memcache clients, unmodified, against sakerd
 * (issue 19): pymemcache and python-memcache (text), Ruby Dalli (binary),
 * PHP Memcached in text and in binary mode, memjs from the npm registry
 * (binary, one shared connection) and the libmemcached tools.  Each runs
 * the scripts in tests/clients/: set, get, add and the refused storage
 * commands, gets, multi-gets up to 10,000 keys, blocking gets with t=,
 * open/close, bounded stats, quit -- compared with what memcached answers.
 *
 * A client that is not installed is skipped with a message naming its
 * package, except under CI=true (.ci/run sets it): there a missing client
 * fails, so CI can never pass with the clients skipped. */
#include "config.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

static struct tl_server *srv;
static char *dir;
static const char *srcdir;	/* $SAKER_SRCDIR: where tests/clients/ is */

/* lease* queues: an open_timeout for the clients' touch steps */
static const char clients_conf[] = "[queue lease*]\nopen_timeout = 1s\n";

static void
setup(void)
{
	char *conf;
	FILE *f;

	dir = tl_mkdtemp();
	conf = tl_strdupf("%s/clients.conf", dir);
	f = fopen(conf, "w");
	ck_assert_ptr_nonnull(f);
	fputs(clients_conf, f);
	fclose(f);
	srv = tl_server_start("memory", "--config", conf, NULL);
	free(conf);
}

static void
teardown(void)
{
	if (srv != NULL && srv->pid > 0)
		tl_server_stop(srv);
	tl_server_free(srv);
	srv = NULL;
	tl_rmrf(dir);
	free(dir);
}

/* Start argv with stdout and stderr into `out` (a path). */
static pid_t
spawn(char *const argv[], const char *out)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int nul = open("/dev/null", O_RDONLY);

		if (fd < 0 || nul < 0)
			_exit(126);
		dup2(nul, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Wait (bounded) for pid; its exit status, or -1 after killing it. */
static int
reap(pid_t pid, int ms)
{
	int64_t deadline = tl_now_ms() + ms;
	int st;

	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (tl_now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		tl_sleep_ms(10);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Run argv to the end; returns its status, output in *outp (malloc'd). */
static int
run(char *const argv[], char **outp)
{
	char *out = tl_strdupf("%s/out", dir);
	int rc = reap(spawn(argv, out), 30000);

	*outp = tl_read_file(out, NULL);
	if (*outp == NULL)
		*outp = strdup("");
	free(out);
	return rc;
}

/* Exit status of a shell test (0 = available). */
static bool
have(const char *sh)
{
	char *argv[] = { "sh", "-c", (char *)sh, NULL };
	pid_t pid = fork();

	if (pid < 0)
		return false;
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		execvp("sh", argv);
		_exit(127);
	}
	return reap(pid, 20000) == 0;
}

static char *
write_script(const char *name, const char *text)
{
	char *path = tl_strdupf("%s/%s", dir, name);
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return path;
}

/* Run a client script that prints "ok <step>" lines and "done" at the
 * end; it must exit 0 after "done". */
static void
run_script_argv(char *const argv[], const char *what)
{
	char *out, *p;
	int rc, n = 0;
	bool done = false;

	rc = run(argv, &out);
	for (p = out; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p) {
		if (strncmp(p, "ok ", 3) == 0)
			n++;
		if (strncmp(p, "done\n", 5) == 0)
			done = true;
	}
	ck_assert_msg(rc == 0 && done, "%s exited %d after %d steps%s:\n%s", what,
	    rc, n, done ? "" : " (no \"done\")", out);
	printf("%s: %d steps passed\n", what, n);
	fflush(stdout);
	free(out);
}

/* An inline script (written to the temp dir), run as INTERP SCRIPT PORT. */
static void
run_script(const char *interp, const char *name, const char *text)
{
	char *path = write_script(name, text);
	char *port = tl_strdupf("%d", srv->port);
	char *argv[] = { (char *)interp, path, port, NULL };

	run_script_argv(argv, name);
	free(port);
	free(path);
}

/* A script of tests/clients/, run as INTERP SCRIPT PORT [ARG]. */
static void
run_client(const char *interp, const char *script, const char *arg)
{
	char *path = tl_strdupf("%s/tests/clients/%s", srcdir, script);
	char *port = tl_strdupf("%d", srv->port);
	char *argv[] = { (char *)interp, path, port, (char *)arg, NULL };
	char *what = tl_strdupf("%s%s%s", script, arg ? " " : "", arg ? arg : "");

	run_script_argv(argv, what);
	free(what);
	free(port);
	free(path);
}

/* Debian's python modules are for /usr/bin/python3 (a python3 earlier on
 * PATH, e.g. pyenv's, does not see them). */
static const char *python = "/usr/bin/python3";

START_TEST(test_pymemcache)
{
	run_client(python, "pymemcache_test.py", NULL);
}
END_TEST

START_TEST(test_python_memcache)
{
	run_client(python, "python_memcache_test.py", NULL);
}
END_TEST

START_TEST(test_memjs)
{
	run_client("node", "memjs_test.js", NULL);
}
END_TEST

/* ------------------------------------------------------------ Dalli */

START_TEST(test_dalli)
{
	run_client("ruby", "dalli_test.rb", NULL);
}
END_TEST

/* Dalli logs in with SASL PLAIN against --auth-file. */
static const char dalli_auth_rb[] =
"require 'dalli'\n"
"port = ARGV[0]\n"
"dc = Dalli::Client.new(\"127.0.0.1:#{port}\", username: 'alice', password: 's3cret',\n"
"  serializer: nil, compress: false)\n"
"dc.set('aq', 'v', 0, raw: true)\n"
"puts 'ok login' if dc.get('aq') == 'v'\n"
"bad = Dalli::Client.new(\"127.0.0.1:#{port}\", username: 'alice', password: 'nope')\n"
"begin\n"
"  bad.set('aq', 'x')\n"
"rescue Dalli::DalliError\n"
"  puts 'ok refused'\n"
"end\n"
"puts 'done'\n";

START_TEST(test_dalli_sasl)
{
	char *users = tl_strdupf("%s/users", dir);
	FILE *f = fopen(users, "w");

	ck_assert_ptr_nonnull(f);
	fputs("alice:s3cret\n", f);
	fclose(f);
	ck_assert_int_eq(chmod(users, 0600), 0);
	tl_server_stop(srv);
	tl_server_free(srv);
	srv = tl_server_start("memory", "--auth-file", users, NULL);
	run_script("ruby", "dalli_auth.rb", dalli_auth_rb);
	free(users);
}
END_TEST

/* -------------------------------------------------------- PHP Memcached */

START_TEST(test_php_memcached_text)
{
	run_client("php", "php_memcached_test.php", "text");
}
END_TEST

START_TEST(test_php_memcached_binary)
{
	run_client("php", "php_memcached_test.php", "binary");
}
END_TEST

/* --------------------------------------------------- libmemcached tools */

/* Debian names them memccp, memccat...; upstream memcp, memcat... */
static const char *memcp = "memccp", *memcat = "memccat";
static const char *memstat = "memcstat", *memflush = "memcflush";

/* tool --servers=... [--binary] a [b [c]]; output in *outp. */
static int
memc(const char *tool, const char *servers, bool binary, const char *a,
    const char *b, const char *c3, char **outp)
{
	const char *argv[8];
	int n = 0;

	argv[n++] = tool;
	argv[n++] = servers;
	if (binary)
		argv[n++] = "--binary";
	argv[n++] = a;
	argv[n++] = b;
	argv[n++] = c3;
	argv[n] = NULL;
	return run((char *const *)argv, outp);
}

/* _i = 0: text protocol, 1: --binary. */
START_TEST(test_libmemcached_tools)
{
	bool bin = _i == 1;
	char *servers = tl_strdupf("--servers=127.0.0.1:%d", srv->port);
	char *file = write_script("lq", "hello");
	char *out, *catout = tl_strdupf("%s/cat.out", dir);
	int fd = tl_connect(srv->port), rc;
	pid_t pid;

	ck_assert_int_eq(chdir(dir), 0);
	/* set (the file's name is the key), then get */
	rc = memc(memcp, servers, bin, "lq", NULL, NULL, &out);
	ck_assert_msg(rc == 0, "%s: %d %s", memcp, rc, out);
	free(out);
	rc = memc(memcat, servers, bin, "lq", NULL, NULL, &out);
	ck_assert_msg(rc == 0 && strcmp(out, "hello\n") == 0, "%s: %d \"%s\"", memcat, rc, out);
	free(out);
	/* add enqueues; replace is refused and nothing is stored */
	rc = memc(memcp, servers, bin, "--add", "lq", NULL, &out);
	ck_assert_msg(rc == 0, "%s --add: %d %s", memcp, rc, out);
	free(out);
	rc = memc(memcp, servers, bin, "--replace", "lq", NULL, &out);
	ck_assert_msg(rc != 0, "%s --replace succeeded: %s", memcp, out);
	free(out);
	ck_assert_int_eq(tl_stat(fd, "queue_lq_items"), 1);
	tl_ckget(fd, "lq", "hello");
	/* several keys on one connection, an empty queue among them */
	tl_set(fd, "la", "A");
	tl_set(fd, "lc", "C");
	memc(memcat, servers, bin, "la", "lb", "lc", &out);
	ck_assert_msg(strcmp(out, "A\nC\n") == 0, "%s la lb lc: \"%s\"", memcat, out);
	free(out);
	/* a blocking get with t=, woken by a set */
	{
		const char *argv[] = { memcat, servers, bin ? "--binary" : "lw/t=5000",
		    bin ? "lw/t=5000" : NULL, NULL };

		pid = spawn((char *const *)argv, catout);
		tl_wait_stat(fd, "queue_lw_waiters", 1, 10000);
		tl_set(fd, "lw", "woken");
		rc = reap(pid, 20000);
		out = tl_read_file(catout, NULL);
		ck_assert_msg(rc == 0 && out != NULL && strcmp(out, "woken\n") == 0,
		    "blocking %s: %d \"%s\"", memcat, rc, out ? out : "");
		free(out);
	}
	/* open then close on one connection: the item is gone for good */
	tl_set(fd, "lr", "reliable");
	memc(memcat, servers, bin, "lr/open", "lr/close", NULL, &out);
	ck_assert_msg(strcmp(out, "reliable\n") == 0, "open/close: \"%s\"", out);
	free(out);
	ck_assert_int_eq(tl_stat(fd, "queue_lr_items"), 0);
	ck_assert_int_eq(tl_stat(fd, "queue_lr_open_transactions"), 0);
	tl_ckget(fd, "lr", NULL);
	/* stats (libmemcached parses the version) and flush_all */
	rc = memc(memstat, servers, bin, NULL, NULL, NULL, &out);
	ck_assert_msg(rc == 0 && strstr(out, "queues_omitted") != NULL,
	    "%s: %d \"%s\"", memstat, rc, out);
	free(out);
	tl_set(fd, "lf", "flushed");
	rc = memc(memflush, servers, bin, NULL, NULL, NULL, &out);
	ck_assert_msg(rc == 0, "%s: %d \"%s\"", memflush, rc, out);
	free(out);
	tl_ckget(fd, "lf", NULL);
	close(fd);
	free(catout);
	free(file);
	free(servers);
}
END_TEST

/* ------------------------------------------------------------ suite */

/* Under CI=true a missing client is a failure, not a skip. */
START_TEST(test_client_missing)
{
	ck_abort_msg("a memcache client is missing (see MISSING above); CI=true "
	    "requires every client: bash .ci/run installs them");
}
END_TEST

/* A client is there: add its tests.  Missing: skip, but fail under CI. */
static void
client(TCase *tc, TCase *must, bool present, const char *name,
    const char *packages, const TTest *t1, const TTest *t2)
{
	if (present) {
		tcase_add_test(tc, t1);
		if (t2 != NULL)
			tcase_add_test(tc, t2);
		return;
	}
	printf("%s %s: not installed (%s)\n", must != NULL ? "MISSING" : "SKIP",
	    name, packages);
	if (must != NULL)
		tcase_add_test(must, test_client_missing);
}

int
main(void)
{
	Suite *s = suite_create("clients");
	TCase *tc = tcase_create("clients"), *must = NULL;
	const char *ci = getenv("CI");
	char *node_path, *probe;
	SRunner *sr;
	int failed;
	bool tools;

	srcdir = getenv("SAKER_SRCDIR");
	if (srcdir == NULL)
		srcdir = ".";
	/* memjs is vendored by `npm ci` in tests/clients (.ci/run) */
	node_path = tl_strdupf("%s/tests/clients/node_modules%s%s", srcdir,
	    getenv("NODE_PATH") ? ":" : "", getenv("NODE_PATH") ? getenv("NODE_PATH") : "");
	setenv("NODE_PATH", node_path, 1);
	if (ci != NULL && strcmp(ci, "true") == 0) {
		must = tcase_create("required");
		suite_add_tcase(s, must);
	}
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	probe = tl_strdupf("%s -c 'import pymemcache'", python);
	client(tc, must, have(probe), "pymemcache", "Debian package python3-pymemcache",
	    test_pymemcache, NULL);
	free(probe);
	probe = tl_strdupf("%s -c 'import memcache'", python);
	client(tc, must, have(probe), "python-memcache", "Debian package python3-memcache",
	    test_python_memcache, NULL);
	free(probe);
	client(tc, must, have("ruby -e 'require \"dalli\"'"), "Ruby Dalli",
	    "Debian packages ruby, ruby-dalli", test_dalli, test_dalli_sasl);
	client(tc, must, have("php -r 'exit(class_exists(\"Memcached\") && function_exists(\"pcntl_fork\") ? 0 : 1);'"),
	    "PHP Memcached", "Debian packages php-cli, php-memcached",
	    test_php_memcached_text, test_php_memcached_binary);
	client(tc, must, have("node -e 'require(\"memjs\")'"), "memjs",
	    "Debian packages nodejs, npm; then npm ci in tests/clients",
	    test_memjs, NULL);
	if (!have("command -v memccp && command -v memccat") &&
	    have("command -v memcp && command -v memcat")) {
		memcp = "memcp";
		memcat = "memcat";
		memstat = "memstat";
		memflush = "memflush";
	}
	tools = have("command -v memccp && command -v memccat") ||
	    have("command -v memcp && command -v memcat");
	if (tools)
		tcase_add_loop_test(tc, test_libmemcached_tools, 0, 2);
	else
		client(tc, must, false, "libmemcached tools",
		    "Debian package libmemcached-tools", NULL, NULL);
	fflush(stdout);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	free(node_path);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
