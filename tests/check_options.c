/* check_options.c -- sakerd's command line (options.h), in-process:
 * the defaults, each flag's accepted forms and range, and the message a
 * bad one prints (sakerd(8) promises a clear one per error path). */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "options.h"

static struct options o;
static char out[8192], errs[8192];	/* what the last parse printed */

/* Read what fd 1 or 2 got into buf, and put the descriptor back. */
static void
collect(int fd, int saved, FILE *f, char *buf, size_t len)
{
	ssize_t n;

	fflush(fd == 1 ? stdout : stderr);
	dup2(saved, fd);
	close(saved);
	rewind(f);
	n = (ssize_t)fread(buf, 1, len - 1, f);
	buf[n > 0 ? n : 0] = '\0';
	fclose(f);
}

/* options_parse() over "sakerd" and the NULL-terminated arguments, with
 * its stdout and stderr in out and errs. */
static int
parse(const char *a, ...)
{
	char *argv[64];
	int argc = 0, rc, so, se;
	FILE *fo = tmpfile(), *fe = tmpfile();
	va_list ap;

	ck_assert(fo != NULL && fe != NULL);
	argv[argc++] = (char *)"sakerd";
	va_start(ap, a);
	for (; a != NULL; a = va_arg(ap, const char *)) {
		ck_assert_int_lt(argc, 63);
		argv[argc++] = (char *)a;
	}
	va_end(ap);
	argv[argc] = NULL;
	fflush(stdout);
	fflush(stderr);
	so = dup(1);
	se = dup(2);
	dup2(fileno(fo), 1);
	dup2(fileno(fe), 2);
	rc = options_parse(argc, argv, &o);
	collect(1, so, fo, out, sizeof(out));
	collect(2, se, fe, errs, sizeof(errs));
	return rc;
}

#define ck_errs(s) ck_assert_msg(strstr(errs, (s)) != NULL, \
	"stderr lacks \"%s\": %s", (s), errs)

/* A bad value: -1 and the message naming the value and the option. */
#define ck_bad(opt, val, named) do { \
	ck_assert_int_eq(parse(opt, val, NULL), -1); \
	ck_errs("sakerd: invalid value '" val "' for option " named "\n"); \
	ck_errs("Try 'sakerd --help' for more information.\n"); \
} while (0)

START_TEST(test_defaults)
{
	ck_assert_int_eq(parse(NULL), 0);
	ck_assert_str_eq(errs, "");
	ck_assert_str_eq(o.listen, "127.0.0.1");
	ck_assert_int_eq(o.port, SAKERD_DEFAULT_PORT);
	ck_assert_ptr_null(o.unix_socket);
	ck_assert_str_eq(o.store_spec, saker_store_default_spec());
	ck_assert_int_eq(o.sync, SAKER_SYNC_ALWAYS);
	ck_assert_int_eq(o.max_conns, 4096);
	ck_assert_uint_eq(o.max_item_size, 1024 * 1024);
	ck_assert_uint_eq(o.max_open, 1);
	ck_assert_uint_eq(o.max_queues, SAKERD_DEFAULT_MAX_QUEUES);
	ck_assert_uint_eq(o.metrics_max_queues, 1000);
	ck_assert_uint_eq(o.http_history_ms, 60000);
	ck_assert_int_eq(o.idle_timeout_ms, 0);
	ck_assert_int_eq(o.tls_handshake_ms, SAKERD_DEFAULT_TLS_HANDSHAKE * 1000);
	ck_assert_int_eq(o.drain_timeout_ms, SAKERD_DEFAULT_DRAIN_TIMEOUT * 1000);
	ck_assert_uint_eq(o.max_conn_memory, SAKERD_DEFAULT_CONN_MEMORY);
	ck_assert(!o.enable_shutdown && !o.daemonize && !o.http_public);
	ck_assert(!o.max_memory_set);
	ck_assert_ptr_null(o.auth);
	ck_assert_int_eq(o.verbose, 0);
}
END_TEST

/* Every flag's value lands in its field. */
START_TEST(test_values_taken)
{
	ck_assert_int_eq(parse("-l", "0.0.0.0", "-p", "0", "-s", "/tmp/s.sock",
	    "-c", "10", "-d", "-P", "/tmp/pid", "-u", "saker", "-v", "-v",
	    "--log", "syslog", "--config", "/etc/saker.conf", "--http", "8080",
	    "--http-public", "--http-host", "queue.example", "--http-host", "q2",
	    "--enable-shutdown", "--max-open", "5", "--max-queues", "0",
	    "--metrics-max-queues", "7", "--idle-timeout", "2m",
	    "--drain-timeout", "1.5s", "--tls-handshake-timeout", "250ms",
	    "--http-history", "0.02", "--store", "memory", "--max-memory", "64m",
	    NULL), 0);
	ck_assert_str_eq(o.listen, "0.0.0.0");
	ck_assert_int_eq(o.port, 0);
	ck_assert_str_eq(o.unix_socket, "/tmp/s.sock");
	ck_assert_int_eq(o.max_conns, 10);
	ck_assert(o.daemonize && o.enable_shutdown && o.http_public);
	ck_assert_str_eq(o.pidfile, "/tmp/pid");
	ck_assert_str_eq(o.user, "saker");
	ck_assert_int_eq(o.verbose, 2);
	ck_assert_str_eq(o.log_target, "syslog");
	ck_assert_str_eq(o.config_path, "/etc/saker.conf");
	ck_assert_str_eq(o.http, "8080");
	ck_assert_uint_eq(o.nhttp_hosts, 2);
	ck_assert_str_eq(o.http_hosts[0], "queue.example");
	ck_assert_str_eq(o.http_hosts[1], "q2");
	ck_assert_uint_eq(o.max_open, 5);
	ck_assert_uint_eq(o.max_queues, 0);
	ck_assert_uint_eq(o.metrics_max_queues, 7);
	ck_assert_int_eq(o.idle_timeout_ms, 120000);
	ck_assert_int_eq(o.drain_timeout_ms, 1500);
	ck_assert_int_eq(o.tls_handshake_ms, 250);
	ck_assert_uint_eq(o.http_history_ms, 20);
	ck_assert_str_eq(o.store_spec, "memory");
	ck_assert(o.max_memory_set);
	ck_assert_uint_eq(o.max_memory, 64ull << 20);
	ck_assert_str_eq(errs, "");

	/* 0 turns the sampling and the idle timeout off */
	ck_assert_int_eq(parse("--http-history", "0", "--idle-timeout", "0", NULL), 0);
	ck_assert_uint_eq(o.http_history_ms, 0);
	ck_assert_int_eq(o.idle_timeout_ms, 0);
}
END_TEST

/* --sync: always, never, periodic (100 ms), periodic:N where a bare N is
 * milliseconds (unlike the other durations), periodic:DURATION. */
START_TEST(test_sync)
{
	ck_assert_int_eq(parse("--sync", "never", NULL), 0);
	ck_assert_int_eq(o.sync, SAKER_SYNC_NEVER);
	ck_assert_int_eq(parse("--sync", "periodic", NULL), 0);
	ck_assert_int_eq(o.sync, SAKER_SYNC_PERIODIC);
	ck_assert_int_eq(o.sync_period_ms, 100);
	ck_assert_int_eq(parse("--sync", "periodic:250", NULL), 0);
	ck_assert_int_eq(o.sync, SAKER_SYNC_PERIODIC);
	ck_assert_int_eq(o.sync_period_ms, 250);
	ck_assert_int_eq(parse("--sync", "periodic:2s", NULL), 0);
	ck_assert_int_eq(o.sync_period_ms, 2000);
	ck_assert_int_eq(parse("--sync", "never", "--sync", "always", NULL), 0);
	ck_assert_int_eq(o.sync, SAKER_SYNC_ALWAYS);
	ck_bad("--sync", "sometimes", "--sync");
	ck_bad("--sync", "periodic:0", "--sync");
	ck_bad("--sync", "periodic:2h", "--sync");	/* over an hour */
	ck_bad("--sync", "periodic:", "--sync");
}
END_TEST

/* Numbers out of range or not numbers: refused with the option's short
 * and long names, or the long one alone. */
START_TEST(test_bad_numbers)
{
	ck_bad("-p", "65536", "-p/--port");
	ck_bad("-p", "-1", "-p/--port");
	ck_bad("-p", "80x", "-p/--port");
	ck_bad("-p", "", "-p/--port");
	ck_bad("-p", "99999999999999999999", "-p/--port");
	ck_bad("-c", "0", "-c/--max-connections");
	ck_bad("-c", "1000001", "-c/--max-connections");
	ck_bad("--max-open", "0", "--max-open");
	ck_bad("--max-open", "lots", "--max-open");
	ck_bad("--max-queues", "-1", "--max-queues");
	ck_bad("--max-queues", "100000001", "--max-queues");
	ck_bad("--metrics-max-queues", "1000001", "--metrics-max-queues");
	ck_bad("--max-item-size", "0", "--max-item-size");
	ck_bad("--max-item-size", "2g", "--max-item-size");
	ck_bad("--max-item-size", "1q", "--max-item-size");
	ck_bad("--max-memory", "lots", "--max-memory");
	ck_bad("--max-conn-memory", "0", "--max-conn-memory");
	ck_bad("--max-conn-memory", "x", "--max-conn-memory");
	/* the long form with = names the value alone too */
	ck_assert_int_eq(parse("--port=70000", NULL), -1);
	ck_errs("invalid value '70000' for option -p/--port\n");
}
END_TEST

/* Durations: the grammar, each flag's range, 0 only where it means off. */
START_TEST(test_bad_durations)
{
	ck_bad("--idle-timeout", "soon", "--idle-timeout");
	ck_bad("--idle-timeout", "-5", "--idle-timeout");
	ck_bad("--idle-timeout", "400d", "--idle-timeout");
	ck_bad("--drain-timeout", "0", "--drain-timeout");
	ck_bad("--drain-timeout", "2d", "--drain-timeout");
	ck_bad("--tls-handshake-timeout", "0", "--tls-handshake-timeout");
	ck_bad("--tls-handshake-timeout", "2h", "--tls-handshake-timeout");
	ck_bad("--http-history", "5ms", "--http-history");	/* under 10 ms */
	ck_bad("--http-history", "2h", "--http-history");
}
END_TEST

/* --http-host: a host name, no port, path, space or brackets; at most
 * OPT_MAX_HTTP_HOSTS of them. */
START_TEST(test_http_host)
{
	char *argv[2 * OPT_MAX_HTTP_HOSTS + 4];
	int argc = 0, i, rc, se;
	FILE *fe;

	ck_bad("--http-host", "", "--http-host");
	ck_bad("--http-host", "example.com:8080", "--http-host");
	ck_bad("--http-host", "example.com/x", "--http-host");
	ck_bad("--http-host", "a b", "--http-host");
	ck_bad("--http-host", "[::1]", "--http-host");
	memset(out, 'a', 254);
	out[254] = '\0';
	ck_assert_int_eq(parse("--http-host", out, NULL), -1);
	ck_errs("for option --http-host\n");

	argv[argc++] = (char *)"sakerd";
	for (i = 0; i <= OPT_MAX_HTTP_HOSTS; i++) {
		argv[argc++] = (char *)"--http-host";
		argv[argc++] = (char *)"h";
	}
	argv[argc] = NULL;
	ck_assert_ptr_nonnull(fe = tmpfile());
	fflush(stderr);
	se = dup(2);
	dup2(fileno(fe), 2);
	rc = options_parse(argc, argv, &o);
	collect(2, se, fe, errs, sizeof(errs));
	ck_assert_int_eq(rc, -1);
	ck_errs("sakerd: at most 16 --http-host\n");
}
END_TEST

/* What parses but cannot run together. */
START_TEST(test_conflicts)
{
	ck_assert_int_eq(parse("stray", NULL), -1);
	ck_errs("sakerd: unexpected argument 'stray'\n");
	ck_assert_int_eq(parse("-p", "0", NULL), -1);
	ck_errs("sakerd: -p 0 needs -s PATH (nothing to listen on)\n");
	ck_assert_int_eq(parse("-p", "0", "-s", "/tmp/x.sock", NULL), 0);

	ck_assert_int_eq(parse("--tls-cert", "c.pem", NULL), -1);
	ck_errs("sakerd: --tls-cert and --tls-key go together "
	    "(and --tls-ca needs both)\n");
	ck_assert_int_eq(parse("--tls-key", "k.pem", NULL), -1);
	ck_errs("--tls-cert and --tls-key go together");
	ck_assert_int_eq(parse("--tls-ca", "ca.pem", NULL), -1);
	ck_errs("--tls-cert and --tls-key go together");
#ifdef HAVE_OPENSSL
	ck_assert_int_eq(parse("--tls-cert", "c.pem", "--tls-key", "k.pem",
	    "--tls-ca", "ca.pem", NULL), 0);
	ck_assert_str_eq(o.tls_cert, "c.pem");
	ck_assert_str_eq(o.tls_key, "k.pem");
	ck_assert_str_eq(o.tls_ca, "ca.pem");
#else
	ck_assert_int_eq(parse("--tls-cert", "c.pem", "--tls-key", "k.pem", NULL), -1);
	ck_errs("built without OpenSSL");
#endif

	/* a connection must hold one whole set: item size + 1m */
	ck_assert_int_eq(parse("--max-item-size", "4m", "--max-conn-memory", "4m",
	    NULL), -1);
	ck_errs("sakerd: --max-conn-memory 4194304 is less than "
	    "--max-item-size + 1m (5242880)\n");
	ck_assert_int_eq(parse("--max-item-size", "4m", "--max-conn-memory", "5m",
	    NULL), 0);
	ck_assert_uint_eq(o.max_conn_memory, 5u << 20);
	/* unset, it grows with a large --max-item-size */
	ck_assert_int_eq(parse("--max-item-size", "8m", NULL), 0);
	ck_assert_uint_eq(o.max_item_size, 8u << 20);
	ck_assert_uint_eq(o.max_conn_memory, (8u << 20) + SAKERD_CONN_MEMORY_SLACK);
}
END_TEST

/* --max-memory belongs to the memory store: refused with another one
 * rather than ignored. */
START_TEST(test_max_memory_other_store)
{
	ck_assert_int_eq(parse("--store", "memory", "--max-memory", "1m", NULL), 0);
	ck_assert(o.max_memory_set);
#ifdef HAVE_LMDB
	ck_assert_int_eq(parse("--store", "lmdb:/tmp/nowhere", "--max-memory", "1m",
	    NULL), -1);
	ck_errs("sakerd: --max-memory is an option of the memory store only, "
	    "not of --store lmdb:/tmp/nowhere\n");
#endif
	ck_assert_int_eq(parse("--store", "nosuch:x", "--max-memory", "1m", NULL), -1);
	ck_errs("--max-memory is an option of the memory store only, "
	    "not of --store nosuch:x\n");
}
END_TEST

/* --auth-file is read at once: a bad one is a startup error naming it. */
START_TEST(test_auth_file)
{
	char path[] = "/tmp/check_options.XXXXXX";
	int fd;

	ck_assert_int_eq(parse("--auth-file", "/nonexistent/users", NULL), -1);
	ck_errs("sakerd: --auth-file /nonexistent/users: ");
	ck_assert_ptr_null(o.auth);

	ck_assert_int_ge(fd = mkstemp(path), 0);
	ck_assert_int_eq(fchmod(fd, 0600), 0);
	ck_assert_int_eq(write(fd, "alice:secret\n", 13), 13);
	close(fd);
	ck_assert_int_eq(parse("--auth-file", path, NULL), 0);
	ck_assert_ptr_nonnull(o.auth);
	ck_assert_str_eq(o.auth_file, path);
	auth_free(o.auth);
	unlink(path);
}
END_TEST

/* Write text to a new 0600 file; its path in path (a mkstemp template). */
static void
auth_text(char *path, const char *text, size_t len)
{
	int fd;

	ck_assert_int_ge(fd = mkstemp(path), 0);
	ck_assert_int_eq(fchmod(fd, 0600), 0);
	ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
}

/* What --auth-file refuses to read, and a file written on Windows. */
START_TEST(test_auth_file_refusals)
{
	char dir[] = "/tmp/check_options.XXXXXX", big[] = "/tmp/check_options.XXXXXX";
	char crlf[] = "/tmp/check_options.XXXXXX";
	static const char win[] = "# users\r\n\r\nalice:pw\r\nbob:pw2:\r\n";
	char *text;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(parse("--auth-file", dir, NULL), -1);
	ck_errs(": not a regular file\n");
	rmdir(dir);

	ck_assert_ptr_nonnull(text = calloc(1, 1024 * 1024 + 2));
	memset(text, '#', 1024 * 1024 + 1);
	auth_text(big, text, 1024 * 1024 + 1);
	free(text);
	ck_assert_int_eq(parse("--auth-file", big, NULL), -1);
	ck_errs(": larger than 1048576 bytes\n");
	unlink(big);

	/* CRLF: the \r is no part of a password or of the (empty)
	 * permissions field, which would be refused */
	auth_text(crlf, win, sizeof(win) - 1);
	ck_assert_int_eq(parse("--auth-file", crlf, NULL), 0);
	ck_assert_ptr_nonnull(o.auth);
	auth_free(o.auth);
	unlink(crlf);
}
END_TEST

/* --version and --help print to stdout and ask for exit 0; an unknown
 * option points at --help. */
START_TEST(test_version_help)
{
	ck_assert_int_eq(parse("--version", NULL), 1);
	ck_assert_str_eq(out, "sakerd " PACKAGE_VERSION "\n");
	ck_assert_int_eq(parse("--help", NULL), 1);
	ck_assert_ptr_nonnull(strstr(out, "Usage: sakerd"));
	ck_assert_ptr_nonnull(strstr(out, "--http-history DURATION"));
	ck_assert_ptr_nonnull(strstr(out, saker_store_default_spec()));
	ck_assert_str_eq(errs, "");
	ck_assert_int_eq(parse("--no-such-flag", NULL), -1);
	ck_errs("unrecognized option '--no-such-flag'");
	ck_errs("Try 'sakerd --help' for more information.\n");
	ck_assert_int_eq(parse("-p", NULL), -1);	/* value missing */
	ck_errs("Try 'sakerd --help' for more information.\n");
}
END_TEST

int
main(void)
{
	Suite *su = suite_create("options");
	TCase *tc = tcase_create("parse");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_values_taken);
	tcase_add_test(tc, test_sync);
	tcase_add_test(tc, test_bad_numbers);
	tcase_add_test(tc, test_bad_durations);
	tcase_add_test(tc, test_http_host);
	tcase_add_test(tc, test_conflicts);
	tcase_add_test(tc, test_max_memory_other_store);
	tcase_add_test(tc, test_auth_file);
	tcase_add_test(tc, test_auth_file_refusals);
	tcase_add_test(tc, test_version_help);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
