/* fuzz_http.c -- fuzz target: an HTTP client's bytes through the --http
 * endpoint (libevent's evhttp parser and sakerd's routes) in-process. */
#include "config.h"

#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "http.h"
#include "log.h"
#include "login.h"
#include "server.h"

/*
 * The server is fuzz_conn's (memory store, an --auth-file with an admin a:p
 * and a limited user u:p, so /metrics asks for Basic auth), with its HTTP
 * server listening on a loopback port this file binds (port 0: the kernel
 * picks a free one; no other process is involved).  Each input is one HTTP
 * connection: connected to that port, the input written in chunks the
 * first byte chooses, the loop run in between, the replies read and
 * dropped, then a hang-up.  Afterwards no HTTP connection may be left
 * open, and the failed logins of one input do not throttle the next.
 */

static struct sockaddr_in addr;

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
}

int
fuzz_http(const uint8_t *data, size_t size)
{
	size_t chunk, off, n;
	int fd, turns, stuck = 0;

	fuzz_server_setup();
	listen_once();
	log_set_level(LOG_LVL_ERROR);
	if (size == 0)
		return 0;
	chunk = fuzz_chunk(data[0], size - 1);
	data++;
	size--;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	FUZZ_CHECK(fd >= 0);
	/* loopback: the connection is made at once (the backlog holds it) */
	FUZZ_CHECK(connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	FUZZ_CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
	fuzz_turns(fd);
	for (off = 0; off < size; off += n) {
		ssize_t w;

		n = chunk == 0 || size - off < chunk ? size - off : chunk;
		w = write(fd, data + off, n);
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			break;          /* the server closed the connection */
		if (w > 0) {
			n = (size_t)w;
			stuck = 0;
		} else {
			n = 0;
			if (++stuck > 64)
				break;  /* it stopped reading */
		}
		fuzz_turns(fd);
	}
	fuzz_turns(fd);
	close(fd);
	for (turns = 0; turns < 64 && http_connections() > 0; turns++)
		fuzz_turns(-1);
	FUZZ_CHECK(http_connections() == 0);
	login_ok("127.0.0.1");
	return 0;
}
