/* check_clients.c -- real memcache clients from Debian packages against
 * sakerd: Ruby Dalli (binary protocol), PHP Memcached with
 * OPT_BINARY_PROTOCOL, and the libmemcached tools with --binary.  Each does
 * set, get, a multi-get, a blocking get with t= and the open/close cycle.
 * A client that is not installed is skipped with a message saying which
 * package brings it. */
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

static void
setup(void)
{
	srv = tl_server_start("memory", NULL);
	dir = tl_mkdtemp();
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

/* Run a client script that prints "ok <step>" lines; every step must pass. */
static void
run_script(const char *interp, const char *name, const char *text, int nsteps)
{
	char *path = write_script(name, text);
	char *port = tl_strdupf("%d", srv->port);
	char *argv[] = { (char *)interp, path, port, NULL };
	char *out, *p;
	int rc, n = 0;

	rc = run(argv, &out);
	for (p = out; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (strncmp(p, "ok ", 3) == 0)
			n++;
	ck_assert_msg(rc == 0 && n == nsteps, "%s exited %d after %d of %d steps:\n%s",
	    interp, rc, n, nsteps, out);
	free(out);
	free(port);
	free(path);
}

/* ------------------------------------------------------------ Dalli */

static const char dalli_rb[] =
"require 'dalli'\n"
"port = ARGV[0]\n"
"dc = Dalli::Client.new(\"127.0.0.1:#{port}\", serializer: nil, compress: false, socket_timeout: 2)\n"
"def check(what, got, want)\n"
"  if got != want\n"
"    STDERR.puts \"FAIL #{what}: got #{got.inspect}, want #{want.inspect}\"\n"
"    exit 1\n"
"  end\n"
"  puts \"ok #{what}\"\n"
"end\n"
"check(\"set\", dc.set(\"dq\", \"hello\", 0, raw: true).nil?, false)\n"
"check(\"get\", dc.get(\"dq\"), \"hello\")\n"
"check(\"get empty\", dc.get(\"dq\"), nil)\n"
"dc.set(\"da\", \"1\", 0, raw: true); dc.set(\"dc\", \"3\", 0, raw: true)\n"
"check(\"get_multi\", dc.get_multi(\"da\", \"db\", \"dc\"), {\"da\" => \"1\", \"dc\" => \"3\"})\n"
"t0 = Time.now\n"
"check(\"blocking get timeout\", dc.get(\"dw/t=300\"), nil)\n"
"el = Time.now - t0\n"
"check(\"waited\", el >= 0.25 && el < 1.5, true)\n"
"pid = fork do\n"
"  d2 = Dalli::Client.new(\"127.0.0.1:#{port}\", serializer: nil, compress: false)\n"
"  sleep 0.2\n"
"  d2.set(\"dw\", \"late\", 0, raw: true)\n"
"  exit! 0\n"
"end\n"
"check(\"blocking get woken\", dc.get(\"dw/t=1500\"), \"late\")\n"
"Process.wait(pid)\n"
"dc.set(\"dr\", \"item\", 0, raw: true)\n"
"check(\"open\", dc.get(\"dr/open\"), \"item\")\n"
"check(\"close\", dc.get(\"dr/close\"), nil)\n"
"check(\"gone\", dc.get(\"dr\"), nil)\n"
"dc.set(\"dr\", \"again\", 0, raw: true)\n"
"check(\"open 2\", dc.get(\"dr/open\"), \"again\")\n"
"check(\"abort\", dc.get(\"dr/abort\"), nil)\n"
"check(\"back\", dc.get(\"dr\"), \"again\")\n"
"check(\"delete\", dc.delete(\"dr\"), true)\n"
"check(\"stats\", dc.stats.values.first[\"curr_connections\"].to_i >= 1, true)\n"
"check(\"version\", dc.version.values.first.nil?, false)\n"
"pid = fork do\n"
"  d2 = Dalli::Client.new(\"127.0.0.1:#{port}\", serializer: nil, compress: false)\n"
"  sleep 0.2\n"
"  d2.set(\"mb\", \"second\", 0, raw: true)\n"
"  exit! 0\n"
"end\n"
"t0 = Time.now\n"
"check(\"blocking get_multi\", dc.get_multi(\"ma/t=1500\", \"mb/t=1500\"), {\"mb/t=1500\" => \"second\"})\n"
"check(\"woken early\", Time.now - t0 < 1.2, true)\n"
"Process.wait(pid)\n";

START_TEST(test_dalli)
{
	run_script("ruby", "dalli.rb", dalli_rb, 18);
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
"end\n";

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
	run_script("ruby", "dalli_auth.rb", dalli_auth_rb, 2);
	free(users);
}
END_TEST

/* -------------------------------------------------------- PHP Memcached */

static const char php_memcached[] =
"<?php\n"
"$port = (int)$argv[1];\n"
"$m = new Memcached();\n"
"$m->setOption(Memcached::OPT_BINARY_PROTOCOL, true);\n"
"$m->setOption(Memcached::OPT_COMPRESSION, false);\n"
"$m->setOption(Memcached::OPT_RECV_TIMEOUT, 2000000);\n"
"$m->setOption(Memcached::OPT_SEND_TIMEOUT, 2000000);\n"
"$m->setOption(Memcached::OPT_POLL_TIMEOUT, 2000);\n"
"$m->addServer('127.0.0.1', $port);\n"
"function check($what, $got, $want) {\n"
"\tif ($got !== $want) {\n"
"\t\tfwrite(STDERR, \"FAIL $what: got \" . var_export($got, true) . \", want \" . var_export($want, true) . \"\\n\");\n"
"\t\texit(1);\n"
"\t}\n"
"\techo \"ok $what\\n\";\n"
"}\n"
"check(\"set\", $m->set(\"pq\", \"hello\"), true);\n"
"check(\"get\", $m->get(\"pq\"), \"hello\");\n"
"check(\"get empty\", $m->get(\"pq\"), false);\n"
"check(\"miss code\", $m->getResultCode(), Memcached::RES_NOTFOUND);\n"
"$m->set(\"pa\", \"1\"); $m->set(\"pc\", \"3\");\n"
"check(\"get_multi\", $m->getMulti([\"pa\", \"pb\", \"pc\"]), [\"pa\" => \"1\", \"pc\" => \"3\"]);\n"
"$t0 = microtime(true);\n"
"check(\"blocking get timeout\", $m->get(\"pw/t=300\"), false);\n"
"$el = microtime(true) - $t0;\n"
"check(\"waited\", $el >= 0.25 && $el < 1.5, true);\n"
"$pid = pcntl_fork();\n"
"if ($pid == 0) {\n"
"\t$m2 = new Memcached();\n"
"\t$m2->setOption(Memcached::OPT_BINARY_PROTOCOL, true);\n"
"\t$m2->addServer('127.0.0.1', $port);\n"
"\tusleep(200000);\n"
"\t$m2->set(\"pw\", \"late\");\n"
"\t/* leave without destructors: the parent's connection is shared */\n"
"\tpcntl_exec(\"/bin/true\");\n"
"}\n"
"check(\"blocking get woken\", $m->get(\"pw/t=1500\"), \"late\");\n"
"pcntl_waitpid($pid, $st);\n"
"$m->set(\"pr\", \"item\");\n"
"check(\"open\", $m->get(\"pr/open\"), \"item\");\n"
"check(\"close\", $m->get(\"pr/close\"), false);\n"
"check(\"gone\", $m->get(\"pr\"), false);\n"
"$m->set(\"pr\", \"again\");\n"
"check(\"open 2\", $m->get(\"pr/open\"), \"again\");\n"
"check(\"abort\", $m->get(\"pr/abort\"), false);\n"
"check(\"back\", $m->get(\"pr\"), \"again\");\n"
"check(\"delete\", $m->delete(\"pr\"), true);\n"
"$pid = pcntl_fork();\n"
"if ($pid == 0) {\n"
"\t$m2 = new Memcached();\n"
"\t$m2->setOption(Memcached::OPT_BINARY_PROTOCOL, true);\n"
"\t$m2->addServer('127.0.0.1', $port);\n"
"\tusleep(200000);\n"
"\t$m2->set(\"qb\", \"second\");\n"
"\tpcntl_exec(\"/bin/true\");\n"
"}\n"
"$t0 = microtime(true);\n"
"check(\"blocking getMulti\", $m->getMulti([\"qa/t=1500\", \"qb/t=1500\"]), [\"qb/t=1500\" => \"second\"]);\n"
"check(\"woken early\", microtime(true) - $t0 < 1.2, true);\n"
"pcntl_waitpid($pid, $st);\n";

START_TEST(test_php_memcached)
{
	run_script("php", "memcached.php", php_memcached, 17);
}
END_TEST

/* --------------------------------------------------- libmemcached tools */

/* Debian names them memccp, memccat...; upstream memcp, memcat... */
static const char *memcp = "memccp", *memcat = "memccat";

static char *
memc(const char *tool, const char *servers, const char *a, const char *b,
    const char *c3, int *rc)
{
	char *argv[] = { (char *)tool, (char *)servers, "--binary", (char *)a,
	    (char *)b, (char *)c3, NULL };
	char *out;

	*rc = run(argv, &out);
	return out;
}

START_TEST(test_libmemcached_tools)
{
	char *servers = tl_strdupf("--servers=127.0.0.1:%d", srv->port);
	char *file = write_script("lq", "hello");
	char *out, *catout = tl_strdupf("%s/cat.out", dir);
	int fd = tl_connect(srv->port), rc;
	pid_t pid;

	ck_assert_int_eq(chdir(dir), 0);
	/* set (the file's name is the key), then get */
	out = memc(memcp, servers, "lq", NULL, NULL, &rc);
	ck_assert_msg(rc == 0, "%s: %d %s", memcp, rc, out);
	free(out);
	out = memc(memcat, servers, "lq", NULL, NULL, &rc);
	ck_assert_msg(rc == 0 && strcmp(out, "hello\n") == 0, "%s: %d \"%s\"", memcat, rc, out);
	free(out);
	/* several keys on one connection, an empty queue among them */
	tl_set(fd, "la", "A");
	tl_set(fd, "lc", "C");
	out = memc(memcat, servers, "la", "lb", "lc", &rc);
	ck_assert_msg(strcmp(out, "A\nC\n") == 0, "%s la lb lc: \"%s\"", memcat, out);
	free(out);
	/* a blocking get with t=, woken by a set */
	{
		char *argv[] = { (char *)memcat, servers, "--binary", "lw/t=5000", NULL };

		pid = spawn(argv, catout);
		tl_wait_stat(fd, "queue_lw_waiters", 1, 5000);
		tl_set(fd, "lw", "woken");
		rc = reap(pid, 10000);
		out = tl_read_file(catout, NULL);
		ck_assert_msg(rc == 0 && out != NULL && strcmp(out, "woken\n") == 0,
		    "blocking %s: %d \"%s\"", memcat, rc, out ? out : "");
		free(out);
	}
	/* open then close on one connection: the item is gone for good */
	tl_set(fd, "lr", "reliable");
	out = memc(memcat, servers, "lr/open", "lr/close", NULL, &rc);
	ck_assert_msg(strcmp(out, "reliable\n") == 0, "open/close: \"%s\"", out);
	free(out);
	ck_assert_int_eq(tl_stat(fd, "queue_lr_items"), 0);
	ck_assert_int_eq(tl_stat(fd, "queue_lr_open_transactions"), 0);
	tl_ckget(fd, "lr", NULL);
	close(fd);
	free(catout);
	free(file);
	free(servers);
}
END_TEST

/* ------------------------------------------------------------ suite */

int
main(void)
{
	Suite *s = suite_create("clients");
	TCase *tc = tcase_create("clients");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	if (have("ruby -e 'require \"dalli\"'")) {
		tcase_add_test(tc, test_dalli);
		tcase_add_test(tc, test_dalli_sasl);
	}
	else
		printf("SKIP Ruby Dalli: not installed (Debian packages ruby, ruby-dalli)\n");
	if (have("php -r 'exit(class_exists(\"Memcached\") && function_exists(\"pcntl_fork\") ? 0 : 1);'"))
		tcase_add_test(tc, test_php_memcached);
	else
		printf("SKIP PHP Memcached: not installed (Debian packages php-cli, php-memcached)\n");
	if (!have("command -v memccp && command -v memccat") &&
	    have("command -v memcp && command -v memcat")) {
		memcp = "memcp";
		memcat = "memcat";
	}
	if (have("command -v memccp && command -v memccat") ||
	    have("command -v memcp && command -v memcat"))
		tcase_add_test(tc, test_libmemcached_tools);
	else
		printf("SKIP libmemcached tools: not installed (Debian package libmemcached-tools)\n");
	fflush(stdout);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
