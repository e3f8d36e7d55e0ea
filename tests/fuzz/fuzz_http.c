/* fuzz_http.c -- fuzz target: an HTTP client's bytes through the --http
 * endpoint (libevent's evhttp parser and sakerd's routes) in-process. */
#include "config.h"

#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "fuzz.h"
#include "http.h"
#include "log.h"
#include "login.h"
#include "server.h"
#include "tls.h"

/*
 * The server is fuzz_conn's (memory store, an --auth-file with an admin a:p
 * and a limited user u:p, so /metrics asks for Basic auth), with its HTTP
 * server listening on a loopback port this file binds (port 0: the kernel
 * picks a free one; no other process is involved).  Each input is one HTTP
 * connection: connected to that port, the input written in chunks the
 * first byte chooses, the loop run in between, the replies read and
 * dropped, then a hang-up (bit 0x40 of the first byte: nothing is read,
 * see send_unread()).  Afterwards no HTTP connection may be left open,
 * and the failed logins of one input do not throttle the next.
 *
 * So that the console's API has something to work on, each input starts
 * with queues jobs (two items), jobs_dead (one) and other (one), which are
 * deleted afterwards.  Its POSTs need the server's random CSRF token, which
 * no fuzzer would guess: "@CSRF@" in an input is replaced by it (the
 * harness reads it from GET /api/server once).
 *
 * The endpoint is plain HTTP: with TLS on, sakerd serves it as HTTPS.  A
 * process that also replays fuzz_tls's inputs (check_fuzz_replay) has TLS
 * on from them, so it is turned off here first.
 */

static struct sockaddr_in addr;
static char csrf[64];
static int64_t csrf_ms;		/* when csrf was read: tokens live minutes */
static const char *const hosts[] = { "x" };

static const char fill[] =
    "set jobs 0 0 1\r\na\r\nset jobs 0 0 2\r\nbb\r\n"
    "set jobs_dead 0 0 1\r\nd\r\nset other 0 0 1\r\no\r\n";

static int
connect_http(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	FUZZ_CHECK(fd >= 0);
	/* loopback: the connection is made at once (the backlog holds it) */
	FUZZ_CHECK(connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	FUZZ_CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
	return fd;
}

/* The CSRF token, from GET /api/server as the console's page reads it. */
static void
read_csrf(void)
{
	static const char req[] = "GET /api/server HTTP/1.0\r\nHost: x\r\n"
	    "Authorization: Basic YTpw\r\n\r\n";	/* a:p */
	char reply[8192];
	size_t got = 0;
	const char *t;
	int fd = connect_http(), turns;

	FUZZ_CHECK(write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1));
	for (turns = 0; turns < 64 && got < sizeof(reply) - 1; turns++) {
		ssize_t n = -1;

		server_turn(false);
		while (got < sizeof(reply) - 1 &&
		    (n = read(fd, reply + got, sizeof(reply) - 1 - got)) > 0)
			got += (size_t)n;
		if (n == 0)
			break;		/* HTTP/1.0: the server closed */
	}
	reply[got] = '\0';
	close(fd);
	t = strstr(reply, "\"csrf_token\":\"");
	FUZZ_CHECK(t != NULL);
	csrf_ms = saker_now_ms();
	t += 14;
	FUZZ_CHECK(sscanf(t, "%32[0-9a-f]", csrf) == 1 && strlen(csrf) == 32);
}

/* The input with every "@CSRF@" replaced by the token; malloc'd. */
static uint8_t *
with_token(const uint8_t *data, size_t size, size_t *out)
{
	static const char mark[] = "@CSRF@";
	size_t ml = sizeof(mark) - 1, tl = strlen(csrf), i, o = 0;
	uint8_t *buf = malloc(size / ml * tl + size + 1);

	FUZZ_CHECK(buf != NULL);
	for (i = 0; i < size;) {
		if (size - i >= ml && memcmp(data + i, mark, ml) == 0) {
			memcpy(buf + o, csrf, tl);
			o += tl;
			i += ml;
		} else {
			buf[o++] = data[i++];
		}
	}
	*out = o;
	return buf;
}

static void
listen_once(void)
{
	socklen_t len = sizeof(addr);
	int fd;

	if (addr.sin_port != 0)
		return;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	FUZZ_CHECK(fd >= 0);
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	FUZZ_CHECK(bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	FUZZ_CHECK(listen(fd, 64) == 0);
	FUZZ_CHECK(getsockname(fd, (struct sockaddr *)&addr, &len) == 0);
	FUZZ_CHECK(http_listen_fd(srv->http, fd) == 0);
	/* the seeds' "Host: x" names this server (--http-host x) */
	http_allow_hosts(srv->http, hosts, 1);
	read_csrf();
}

/*
 * Bit 0x40 of the first byte: the keep-alive path of a client that
 * pipelines requests and never reads a reply (issue 35).  The input is
 * written in its chunks with the loop turned in between but nothing read
 * back, for as long as the socket takes it; meanwhile the connection may
 * hold no more than the read-ahead limit (one read past it at most) and
 * the unsent-replies budget plus one reply.
 */
static void
send_unread(int fd, const uint8_t *data, size_t size, size_t chunk)
{
	size_t off, n, in, out;
	ssize_t w;

	for (off = 0; off < size; off += (size_t)w) {
		n = chunk == 0 || size - off < chunk ? size - off : chunk;
		w = write(fd, data + off, n);
		fuzz_turns(-1);
		http_memory(&in, &out);
		FUZZ_CHECK(in <= http_max_input() + 16384 + 1024);
		FUZZ_CHECK(out <= http_max_unsent() + 1024 * 1024);
		if (w <= 0)
			break;		/* full: the server stopped reading */
	}
}

int
fuzz_http(const uint8_t *data, size_t size)
{
	size_t chunk;
	int fd, turns;
	uint8_t *input;
	bool unread;

	fuzz_server_setup();
	if (tls_on())
		tls_teardown();
	listen_once();
	/* a token is good for 5 to 10 minutes (csrf.h): a long run renews it */
	if (saker_now_ms() - csrf_ms > 60000)
		read_csrf();
	log_set_level(LOG_LVL_ERROR);
	if (size == 0)
		return 0;
	chunk = fuzz_chunk(data[0], size - 1);
	unread = (data[0] & 0x40) != 0;
	data = input = with_token(data + 1, size - 1, &size);
	fuzz_client(fill);
	fd = connect_http();
	fuzz_turns(fd);
	if (unread)
		send_unread(fd, data, size, chunk);
	else
		fuzz_send(fd, data, size, chunk);
	close(fd);
	for (turns = 0; turns < 64 && http_connections() > 0; turns++)
		fuzz_turns(-1);
	FUZZ_CHECK(http_connections() == 0);
	login_reset();
	fuzz_reset();
	free(input);
	return 0;
}
