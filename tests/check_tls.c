/* check_tls.c -- sakerd with --tls-cert against real TLS clients: openssl
 * s_client, pymemcache (tls_context), Ruby Dalli (ssl_context) and saker
 * --tls; a plain-text client on the TLS port; client certificates
 * (--tls-ca); certificate reload on SIGHUP; HTTPS for --http.
 *
 * The certificates are made by `openssl req` in each test's temporary
 * directory: nothing private is committed.  A client that is not
 * installed is skipped, except under CI=true, where it fails. */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

static char *dir;                 /* certificates and scripts */
static struct tl_server *srv;

/* ------------------------------------------------------------ helpers */

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

/* sh -c cmd in dir, stdin from /dev/null; status, and output (stdout and
 * stderr) in *outp when not NULL. */
static int
sh(const char *cmd, char **outp)
{
	char *out = tl_strdupf("%s/sh.out", dir);
	pid_t pid = fork();
	int rc;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int nul = open("/dev/null", O_RDONLY);

		if (fd < 0 || nul < 0 || chdir(dir) != 0)
			_exit(126);
		dup2(nul, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	rc = reap(pid, 30000);
	if (outp != NULL) {
		*outp = tl_read_file(out, NULL);
		if (*outp == NULL)
			*outp = strdup("");
	}
	free(out);
	return rc;
}

static bool
have(const char *cmd)
{
	return sh(cmd, NULL) == 0;
}

/* Make a certificate NAME.pem / NAME.key for CN=cn signed by ca.pem. */
static void
make_cert(const char *name, const char *cn)
{
	char *out, *cmd = tl_strdupf(
	    "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout %s.key -out %s.csr "
	    "-subj /CN=%s && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' "
	    "> %s.ext && openssl x509 -req -in %s.csr -CA ca.pem -CAkey ca.key "
	    "-CAcreateserial -days 2 -out %s.pem -extfile %s.ext",
	    name, name, cn, name, name, name, name);

	ck_assert_msg(sh(cmd, &out) == 0, "%s:\n%s", cmd, out);
	free(out);
	free(cmd);
}

static void
setup(void)
{
	char *out;

	dir = tl_mkdtemp();
	ck_assert_msg(sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key "
	    "-out ca.pem -days 2 -subj /CN=saker-test-ca", &out) == 0, "CA: %s", out);
	free(out);
	make_cert("server", "localhost");
	make_cert("client", "saker-client");
	srv = NULL;
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

static char *
path(const char *name)
{
	return tl_strdupf("%s/%s", dir, name);
}

/* sakerd with the server certificate, plus extra arguments (up to 4). */
static void
start_tls(const char *a1, const char *a2, const char *a3, const char *a4)
{
	char *cert = path("server.pem"), *key = path("server.key");

	srv = tl_server_start("memory", "--tls-cert", cert, "--tls-key", key,
	    a1, a2, a3, a4, NULL);
	free(cert);
	free(key);
}

/* openssl s_client sending `input` (printf format escapes), extra client
 * options in `opts`; its output (stderr included). */
static int
s_client(int port, const char *opts, const char *input, char **out)
{
	char *cmd = tl_strdupf("printf '%s' | openssl s_client -quiet "
	    "-verify_return_error -CAfile ca.pem -connect 127.0.0.1:%d %s",
	    input, port, opts);
	int rc = sh(cmd, out);

	free(cmd);
	return rc;
}

/* Wait up to 5 s for `what` to appear in the server's log `n` times. */
static void
wait_log(const char *what, int n)
{
	int64_t deadline = tl_now_ms() + 5000;
	int seen = 0;

	for (;;) {
		char *log = tl_read_file(srv->log, NULL), *p;

		seen = 0;
		for (p = log; p != NULL && (p = strstr(p, what)) != NULL; p++)
			seen++;
		free(log);
		if (seen >= n || tl_now_ms() > deadline)
			break;
		tl_sleep_ms(20);
	}
	ck_assert_msg(seen == n, "log has \"%s\" %d times, want %d", what, seen, n);
}

static void
need(const char *cmd, const char *what)
{
	if (have(cmd))
		return;
	if (getenv("CI") != NULL && strcmp(getenv("CI"), "true") == 0)
		ck_abort_msg("%s is not installed", what);
	printf("SKIP %s: not installed\n", what);
}

/* ------------------------------------------------------------ tests */

START_TEST(test_s_client)
{
	static const char *const vers[] = { "-tls1_2", "-tls1_3" };
	char *out;
	size_t i;

	start_tls(NULL, NULL, NULL, NULL);
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(s_client(srv->port, vers[i],
		    "set q 0 0 5\\r\\nhello\\r\\nget q\\r\\nquit\\r\\n", &out), 0);
		ck_assert_msg(strstr(out, "STORED\r\nVALUE q 0 5\r\nhello\r\nEND\r\n") != NULL,
		    "%s: %s", vers[i], out);
		free(out);
	}
	/* TLS 1.1 and older are refused */
	ck_assert_int_ne(s_client(srv->port, "-tls1_1 -cipher DEFAULT@SECLEVEL=0",
	    "version\\r\\nquit\\r\\n", &out), 0);
	ck_assert_msg(strstr(out, "VERSION") == NULL, "TLS 1.1 answered: %s", out);
	free(out);
}
END_TEST

START_TEST(test_big_items)
{
	/* replies of several records, and a request spread over many */
	char *out;

	start_tls(NULL, NULL, NULL, NULL);
	{
		char *cmd = tl_strdupf("/usr/bin/python3 - %d <<'EOF'\n"
		    "import socket, ssl, sys\n"
		    "ctx = ssl.create_default_context(cafile='ca.pem')\n"
		    "s = ctx.wrap_socket(socket.create_connection(('127.0.0.1', int(sys.argv[1]))), server_hostname='localhost')\n"
		    "data = bytes(range(256)) * 2000\n"
		    "req = b''\n"
		    "for i in range(5):\n"
		    "    req += b'set big 0 0 %%d\\r\\n' %% len(data) + data + b'\\r\\n'\n"
		    "req += b'get big\\r\\n' * 5\n"
		    "s.sendall(req)\n"
		    "want = b'STORED\\r\\n' * 5 + (b'VALUE big 0 %%d\\r\\n' %% len(data) + data + b'\\r\\nEND\\r\\n') * 5\n"
		    "got = b''\n"
		    "while len(got) < len(want):\n"
		    "    b = s.recv(65536)\n"
		    "    if not b: break\n"
		    "    got += b\n"
		    "print('ok' if got == want else 'FAIL %%d bytes' %% len(got))\n"
		    "EOF\n", srv->port);
		ck_assert_int_eq(sh(cmd, &out), 0);
		ck_assert_msg(strcmp(out, "ok\n") == 0, "%s", out);
		free(out);
		free(cmd);
	}
}
END_TEST

START_TEST(test_plain_text_client)
{
	char buf[64], *out;
	int fd;

	start_tls(NULL, NULL, NULL, NULL);
	fd = tl_connect(srv->port);
	mustsends(fd, "set q 0 0 1\r\nx\r\nget q\r\n");
	/* closed, and not one byte of reply */
	ck_assert_int_eq(tl_readn(fd, buf, sizeof(buf), 5000), 0);
	close(fd);
	wait_log("plain text on the TLS port", 1);
	/* nothing was stored */
	ck_assert_int_eq(s_client(srv->port, "", "get q\\r\\nquit\\r\\n", &out), 0);
	ck_assert_msg(strstr(out, "END\r\n") != NULL && strstr(out, "VALUE") == NULL,
	    "%s", out);
	free(out);
}
END_TEST

START_TEST(test_stalled_handshake)
{
	/* half a ClientHello: that connection waits, the loop serves others */
	static const unsigned char part[] = { 0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00 };
	char *out, *sock = path("s.sock");
	struct sockaddr_un sun;
	int fd, ufd;

	start_tls("-s", sock, NULL, NULL);
	fd = tl_connect(srv->port);
	mustsend(fd, part, sizeof(part));
	ck_assert_int_eq(s_client(srv->port, "", "set h 0 0 2\\r\\nok\\r\\nget h\\r\\nquit\\r\\n",
	    &out), 0);
	ck_assert_msg(strstr(out, "STORED\r\nVALUE h 0 2\r\nok\r\nEND\r\n") != NULL, "%s", out);
	free(out);
	ck_assert(tl_quiet(fd, 100));
	close(fd);
	/* the Unix socket stays plain text */
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock);
	ufd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(ufd, 0);
	ck_assert_int_eq(connect(ufd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	mustsends(ufd, "version\r\n");
	out = tl_mustreadline(ufd);
	ck_assert_msg(strncmp(out, "VERSION ", 8) == 0, "%s", out);
	free(out);
	close(ufd);
	free(sock);
}
END_TEST

START_TEST(test_pymemcache)
{
	char *out, *cmd;

	need("/usr/bin/python3 -c 'import pymemcache'", "pymemcache (python3-pymemcache)");
	if (!have("/usr/bin/python3 -c 'import pymemcache'"))
		return;
	start_tls(NULL, NULL, NULL, NULL);
	cmd = tl_strdupf("/usr/bin/python3 - %d <<'EOF'\n"
	    "import ssl, sys\n"
	    "from pymemcache.client.base import Client\n"
	    "ctx = ssl.create_default_context(cafile='ca.pem')\n"
	    /* 127.0.0.1, not localhost: pymemcache tries only the first
	     * address, ::1 on a stock Debian /etc/hosts, where sakerd does
	     * not listen (the certificate names both) */
	    "c = Client(('127.0.0.1', int(sys.argv[1])), tls_context=ctx, timeout=5)\n"
	    "assert c.set('pq', b'one', noreply=False)\n"
	    "assert c.set('pq', b'two', noreply=False)\n"
	    "assert c.get('pq') == b'one'\n"
	    "big = b'x' * 500000\n"
	    "assert c.set('pb', big, noreply=False)\n"
	    "assert c.get_many(['pq', 'pb', 'none']) == {'pq': b'two', 'pb': big}\n"
	    "assert c.get('pq') is None\n"
	    "print('ok')\n"
	    "EOF\n", srv->port);
	ck_assert_msg(sh(cmd, &out) == 0 && strcmp(out, "ok\n") == 0, "%s", out);
	free(out);
	free(cmd);
}
END_TEST

START_TEST(test_dalli)
{
	char *out, *cmd;

	need("ruby -e 'require \"dalli\"'", "Ruby Dalli (ruby-dalli)");
	if (!have("ruby -e 'require \"dalli\"'"))
		return;
	start_tls(NULL, NULL, NULL, NULL);
	cmd = tl_strdupf("ruby - %d <<'EOF'\n"
	    "require 'dalli'\n"
	    "require 'openssl'\n"
	    "ctx = OpenSSL::SSL::SSLContext.new\n"
	    "ctx.ca_file = 'ca.pem'\n"
	    "ctx.verify_mode = OpenSSL::SSL::VERIFY_PEER\n"
	    "dc = Dalli::Client.new(\"localhost:#{ARGV[0]}\", ssl_context: ctx,\n"
	    "    serializer: nil, compress: false, socket_timeout: 5)\n"
	    "raise 'set' if dc.set('dq', 'hello', 0, raw: true).nil?\n"
	    "dc.set('dq', 'world', 0, raw: true)\n"
	    "raise 'get' unless dc.get('dq') == 'hello'\n"
	    /* (get_multi over TLS fails inside Dalli 3.0.6: its SSLSocket
	     * lacks the `server` its multi-get loop asks for) */
	    "raise 'get 2' unless dc.get('dq') == 'world'\n"
	    "raise 'empty' unless dc.get('dq').nil?\n"
	    "big = 'y' * 300000\n"
	    "dc.set('db', big, 0, raw: true)\n"
	    "raise 'big' unless dc.get('db') == big\n"
	    "puts 'ok'\n"
	    "EOF\n", srv->port);
	ck_assert_msg(sh(cmd, &out) == 0 && strcmp(out, "ok\n") == 0, "%s", out);
	free(out);
	free(cmd);
}
END_TEST

START_TEST(test_client_certificates)
{
	char *ca = path("ca.pem"), *out;

	start_tls("--tls-ca", ca, NULL, NULL);
	/* without a certificate: the handshake fails, nothing is served */
	s_client(srv->port, "", "version\\r\\nquit\\r\\n", &out);
	ck_assert_msg(strstr(out, "VERSION") == NULL, "served without a certificate: %s", out);
	free(out);
	wait_log("closing a TLS connection from 127.0.0.1", 1);
	/* with one signed by the CA */
	ck_assert_int_eq(s_client(srv->port, "-cert client.pem -key client.key",
	    "version\\r\\nquit\\r\\n", &out), 0);
	ck_assert_msg(strstr(out, "VERSION ") != NULL, "%s", out);
	free(out);
	/* a self-signed one is refused */
	ck_assert_int_eq(sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout self.key "
	    "-out self.pem -days 2 -subj /CN=intruder", NULL), 0);
	s_client(srv->port, "-cert self.pem -key self.key", "version\\r\\nquit\\r\\n", &out);
	ck_assert_msg(strstr(out, "VERSION") == NULL, "self-signed served: %s", out);
	free(out);
	free(ca);
}
END_TEST


/*
 * Finding 5: with -c 20 and --tls-ca (no --auth-file), 19 connections
 * that sent the start of a ClientHello and stopped were all still open
 * 35 s later, each holding a slot of -c.  Now a handshake has a deadline
 * (--tls-handshake-timeout, default 5 s), and at most a quarter of -c
 * (here 5) are in progress at once: a client with a good certificate
 * gets in meanwhile, and every stalled one is closed.
 */
START_TEST(test_stalled_handshakes_budget)
{
	static const unsigned char part[] = { 0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00 };
	char *ca = path("ca.pem"), *out;
	int fd[19], i, open_fds;
	int64_t t0, end;

	start_tls("--tls-ca", ca, "-c", "20");
	for (i = 0; i < 19; i++) {
		fd[i] = tl_connect(srv->port);
		mustsend(fd[i], part, sizeof(part));
	}
	tl_sleep_ms(200);
	t0 = tl_now_ms();
	ck_assert_int_eq(s_client(srv->port, "-cert client.pem -key client.key",
	    "version\\r\\nquit\\r\\n", &out), 0);
	ck_assert_msg(strstr(out, "VERSION ") != NULL, "%s", out);
	free(out);
	/* all closed by the deadline: 5 s (and most at once by the budget) */
	end = t0 + tl_slow(9000);
	do {
		open_fds = 0;
		for (i = 0; i < 19; i++) {
			if (fd[i] < 0)
				continue;
			if (!tl_quiet(fd[i], 0)) {
				/* EOF or an alert: the server let go */
				close(fd[i]);
				fd[i] = -1;
				continue;
			}
			open_fds++;
		}
		if (open_fds > 0)
			tl_sleep_ms(100);
	} while (open_fds > 0 && tl_now_ms() < end);
	ck_assert_msg(open_fds == 0, "%d stalled handshakes still open after %lld ms",
	    open_fds, (long long)(tl_now_ms() - t0));
	wait_log("TLS handshakes in progress: closing the oldest", 1);
	free(ca);
}
END_TEST

/* A relay on a free port to 127.0.0.1:to for one connection, in a child
 * process: the client's first chunk (its ClientHello) goes through at
 * once, the rest only `hold_ms` later; the server's side at once.  A
 * real mutual-TLS client on a slow link.  Its port in *port. */
static pid_t
slow_relay(int to, int hold_ms, int *port)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), c, s, one = 1, first = 1;
	int64_t held_until = 0;
	pid_t pid;

	ck_assert_int_ge(l, 0);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &alen), 0);
	*port = ntohs(a.sin_port);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid > 0) {
		close(l);
		return pid;
	}
	/* the child: no Check assertion (its exit would stop the server) */
	if ((c = accept(l, NULL, NULL)) < 0 ||
	    (s = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		_exit(1);
	a.sin_port = htons((uint16_t)to);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) != 0)
		_exit(1);
	for (;;) {
		struct pollfd p[2] = { { c, POLLIN, 0 }, { s, POLLIN, 0 } };
		char buf[16384];
		ssize_t n;

		if (held_until != 0 && tl_now_ms() < held_until)
			p[0].events = 0;
		if (poll(p, 2, 50) < 0)
			_exit(1);
		if ((p[1].revents & (POLLIN | POLLHUP)) != 0) {
			if ((n = read(s, buf, sizeof(buf))) <= 0 ||
			    write(c, buf, (size_t)n) != n)
				_exit(0);
		}
		if ((p[0].revents & (POLLIN | POLLHUP)) != 0) {
			if ((n = read(c, buf, sizeof(buf))) <= 0 ||
			    write(s, buf, (size_t)n) != n)
				_exit(0);
			if (first) {
				first = 0;
				held_until = tl_now_ms() + hold_ms;
			}
		}
	}
}

/*
 * Issue 45: a flood of stalled handshakes evicted about half of real
 * mutual-TLS handshakes as "the oldest".  Now those that have not sent a
 * whole ClientHello go first: a certified client whose second flight is
 * held 1.5 s by a slow link, while 20 half ClientHellos arrive (-c 20: 5
 * in progress at most), still gets in.
 */
START_TEST(test_real_handshake_outlives_flood)
{
	static const unsigned char part[] = { 0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00 };
	char *ca = path("ca.pem"), *out, *cmd;
	int fd[20], i, rport, st;
	pid_t relay;
	FILE *f;
	size_t n;

	start_tls("--tls-ca", ca, "-c", "20");
	relay = slow_relay(srv->port, 1500, &rport);
	cmd = tl_strdupf("(sleep 3; printf 'version\\r\\nquit\\r\\n') | openssl "
	    "s_client -quiet -verify_return_error -CAfile %s/ca.pem -cert "
	    "%s/client.pem -key %s/client.key -connect 127.0.0.1:%d 2>&1", dir, dir,
	    dir, rport);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	/* its ClientHello is through; then the flood */
	tl_sleep_ms(300);
	for (i = 0; i < 20; i++) {
		fd[i] = tl_connect(srv->port);
		mustsend(fd[i], part, sizeof(part));
		tl_sleep_ms(20);
	}
	out = calloc(1, 65536);
	ck_assert_ptr_nonnull(out);
	n = fread(out, 1, 65535, f);
	out[n] = '\0';
	pclose(f);
	ck_assert_msg(strstr(out, "VERSION ") != NULL, "%s", out);
	free(out);
	free(cmd);
	for (i = 0; i < 20; i++)
		close(fd[i]);
	waitpid(relay, &st, 0);
	free(ca);
}
END_TEST

/* --tls-handshake-timeout sets the deadline, with or without --auth-file. */
START_TEST(test_handshake_timeout_flag)
{
	static const unsigned char part[] = { 0x16, 0x03, 0x01 };
	char buf[16];
	int fd;
	int64_t t0;

	int hport = tl_free_port(), i;
	char *spec = tl_strdupf("127.0.0.1:%d", hport);

	start_tls("--tls-handshake-timeout", "1", "--http", spec);
	/* the memcache port, then HTTPS (whose request timeout is 10 s) */
	for (i = 0; i < 2; i++) {
		fd = tl_connect(i == 0 ? srv->port : hport);
		mustsend(fd, part, sizeof(part));
		t0 = tl_now_ms();
		ck_assert_int_le(tl_readn(fd, buf, sizeof(buf), 8000), 0);
		ck_assert_int_lt(tl_now_ms() - t0, 3000);
		ck_assert_int_ge(tl_now_ms() - t0, 800);
		close(fd);
	}
	free(spec);
}
END_TEST

/* The subject CN the server presents now. */
static char *
served_cn(int port)
{
	char *cmd = tl_strdupf("openssl s_client -connect 127.0.0.1:%d -CAfile ca.pem "
	    "</dev/null 2>/dev/null | openssl x509 -noout -subject", port);
	char *out;

	ck_assert_int_eq(sh(cmd, &out), 0);
	free(cmd);
	return out;
}

START_TEST(test_reload)
{
	char *out;

	start_tls("-v", NULL, NULL, NULL);
	out = served_cn(srv->port);
	ck_assert_msg(strstr(out, "CN = localhost") != NULL, "%s", out);
	free(out);
	/* a new pair: served after SIGHUP */
	make_cert("new", "reloaded");
	ck_assert_int_eq(sh("cp new.pem server.pem && cp new.key server.key", NULL), 0);
	ck_assert_int_eq(kill(srv->pid, SIGHUP), 0);
	wait_log("TLS: reloaded", 1);
	out = served_cn(srv->port);
	ck_assert_msg(strstr(out, "CN = reloaded") != NULL, "%s", out);
	free(out);
	/* a certificate with the wrong key: reported, the old pair stays */
	make_cert("other", "other");
	ck_assert_int_eq(sh("cp other.pem server.pem", NULL), 0);
	ck_assert_int_eq(kill(srv->pid, SIGHUP), 0);
	wait_log("TLS: keeping the previous certificate and key", 1);
	out = served_cn(srv->port);
	ck_assert_msg(strstr(out, "CN = reloaded") != NULL, "%s", out);
	free(out);
	/* and the server still works */
	ck_assert_int_eq(s_client(srv->port, "", "version\\r\\nquit\\r\\n", &out), 0);
	ck_assert_msg(strstr(out, "VERSION ") != NULL, "%s", out);
	free(out);
}
END_TEST

START_TEST(test_https)
{
	char *out, *hp;
	int port = tl_free_port();

	hp = tl_strdupf("127.0.0.1:%d", port);
	start_tls("--http", hp, NULL, NULL);
	/* (s_client's status says whether evhttp's close came with a
	 * close_notify: not checked) */
	s_client(port, "", "GET /metrics HTTP/1.0\\r\\n\\r\\n", &out);
	ck_assert_msg(strstr(out, "HTTP/1.0 200 OK") != NULL &&
	    strstr(out, "saker_connections ") != NULL, "%s", out);
	free(out);
	s_client(port, "", "GET /healthz HTTP/1.0\\r\\n\\r\\n", &out);
	ck_assert_msg(strstr(out, "200 OK") != NULL && strstr(out, "ok\n") != NULL, "%s", out);
	free(out);
	free(hp);
}
END_TEST


/* HTTPS handshakes have the same budget: with -c 8, at most 2 in
 * progress; a fifth closes the oldest at once, long before the deadline,
 * and a real client is served meanwhile. */
START_TEST(test_https_handshake_budget)
{
	static const unsigned char part[] = { 0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00 };
	char *out, *hp;
	int port = tl_free_port(), fd[5], i, open_fds = 0;

	hp = tl_strdupf("127.0.0.1:%d", port);
	start_tls("--http", hp, "-c", "8");
	for (i = 0; i < 5; i++) {
		fd[i] = tl_connect(port);
		mustsend(fd[i], part, sizeof(part));
		tl_sleep_ms(50);
	}
	tl_sleep_ms(500);
	for (i = 0; i < 5; i++)
		open_fds += tl_quiet(fd[i], 0);
	ck_assert_msg(open_fds <= 2, "%d HTTPS handshakes still open", open_fds);
	/* the oldest went first */
	ck_assert(!tl_quiet(fd[0], 0));
	ck_assert(tl_quiet(fd[4], 0));
	s_client(port, "", "GET /healthz HTTP/1.0\\r\\n\\r\\n", &out);
	ck_assert_msg(strstr(out, "200 OK") != NULL, "%s", out);
	free(out);
	for (i = 0; i < 5; i++)
		close(fd[i]);
	free(hp);
}
END_TEST

START_TEST(test_saker_cli)
{
	char *out = NULL, *err = NULL, *server, *ca = path("ca.pem");
	int rc;

	start_tls(NULL, NULL, NULL, NULL);
	server = tl_strdupf("localhost:%d", srv->port);
	rc = tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "--tls", "--tls-ca", ca,
	    "-s", server, "cliq", "over tls", NULL);
	ck_assert_msg(rc == 0, "put: %s", err);
	free(err);
	rc = tl_run_saker(dir, NULL, &out, NULL, &err, "get", "--tls", "--tls-ca", ca,
	    "-s", server, "cliq", NULL);
	ck_assert_msg(rc == 0 && strcmp(out, "over tls") == 0, "get: %d %s %s", rc, out, err);
	free(out);
	free(err);
	rc = tl_run_saker(dir, NULL, &out, NULL, &err, "stats", "--tls", "--tls-ca", ca,
	    "-s", server, NULL);
	ck_assert_msg(rc == 0 && strstr(out, "curr_connections") != NULL, "stats: %s", err);
	free(out);
	free(err);
	/* an untrusted server certificate is an error, not a silent success */
	rc = tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "--tls", "-s", server,
	    "cliq", "x", NULL);
	ck_assert_msg(rc != 0 && strstr(err, "certificate") != NULL, "untrusted: %s", err);
	free(err);
	free(server);
	free(ca);
}
END_TEST

/*
 * saker's client side of a server that asks for certificates (--tls-ca):
 * --tls-cert and --tls-key log in, a missing one is refused before any
 * connection, an unreadable CA file says so, and a client the server
 * refuses hears why (the server's alert, not "Broken pipe").  [ADDR]:PORT names the
 * server by address.
 */
START_TEST(test_saker_cli_client_cert)
{
	char *out = NULL, *err = NULL, *server, *v6ish, *ca = path("ca.pem");
	char *cert = path("client.pem"), *key = path("client.key");
	char *nofile = path("no-such-ca.pem");
	int rc;

	start_tls("--tls-ca", ca, NULL, NULL);
	server = tl_strdupf("127.0.0.1:%d", srv->port);
	v6ish = tl_strdupf("[127.0.0.1]:%d", srv->port);
	rc = tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "--tls", "--tls-ca",
	    ca, "--tls-cert", cert, "--tls-key", key, "-s", server, "mq", "mutual",
	    NULL);
	ck_assert_msg(rc == 0, "put with a client certificate: %s", err);
	free(err);
	rc = tl_run_saker(dir, NULL, &out, NULL, &err, "get", "--tls", "--tls-ca",
	    ca, "--tls-cert", cert, "--tls-key", key, "-s", v6ish, "mq", NULL);
	ck_assert_msg(rc == 0 && strcmp(out, "mutual") == 0, "get: %d %s %s", rc,
	    out, err);
	free(out);
	free(err);
	/* without a certificate the server ends the handshake */
	rc = tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "--tls", "--tls-ca",
	    ca, "-s", server, "mq", "x", NULL);
	ck_assert_msg(rc != 0 && strstr(err, "certificate required") != NULL,
	    "no certificate: %d %s", rc, err);
	free(err);
	/* refused before connecting */
	rc = tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "--tls", "--tls-cert",
	    cert, "-s", server, "mq", "x", NULL);
	ck_assert_msg(rc != 0 && strstr(err, "--tls-cert and --tls-key go "
	    "together") != NULL, "%s", err);
	free(err);
	rc = tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "-s", server, "mq",
	    "x", "--tls-key", NULL);
	ck_assert_msg(rc != 0 && strstr(err, "--tls-key needs a file name") !=
	    NULL, "%s", err);
	free(err);
	rc = tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "--tls", "--tls-ca",
	    nofile, "-s", server, "mq", "x", NULL);
	ck_assert_msg(rc != 0 && strstr(err, "TLS setup: ") != NULL, "%s", err);
	free(err);
	rc = tl_run_saker(dir, NULL, NULL, NULL, &err, "put", "--tls", "--tls-ca",
	    ca, "--tls-cert", cert, "--tls-key", ca, "-s", server, "mq", "x", NULL);
	ck_assert_msg(rc != 0 && strstr(err, "TLS setup: ") != NULL, "%s", err);
	free(err);
	free(nofile);
	free(key);
	free(cert);
	free(v6ish);
	free(server);
	free(ca);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("tls");
	TCase *tc = tcase_create("tls");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_s_client);
	tcase_add_test(tc, test_big_items);
	tcase_add_test(tc, test_plain_text_client);
	tcase_add_test(tc, test_stalled_handshake);
	tcase_add_test(tc, test_stalled_handshakes_budget);
	tcase_add_test(tc, test_handshake_timeout_flag);
	tcase_add_test(tc, test_https_handshake_budget);
	tcase_add_test(tc, test_pymemcache);
	tcase_add_test(tc, test_dalli);
	tcase_add_test(tc, test_client_certificates);
	tcase_add_test(tc, test_reload);
	tcase_add_test(tc, test_https);
	tcase_add_test(tc, test_saker_cli);
	tcase_add_test(tc, test_saker_cli_client_cert);
	suite_add_tcase(s, tc);
	/* issue 45 (CK_RUN_CASE=i45) */
	tc = tcase_create("i45");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_real_handshake_outlives_flood);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
