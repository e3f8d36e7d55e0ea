/* fuzz_conn.c -- fuzz target: a client's bytes through the whole server (framing, text, binary and meta protocols, command layer) over the memory store. */
#include "config.h"

#include <sys/socket.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "auth.h"
#include "conn.h"
#include "login.h"
#include "fuzz.h"
#include "http.h"
#include "log.h"
#include "options.h"
#include "queues.h"
#include "server.h"

/*
 * One server (server_init() with no listener, the memory store limited to
 * 64 MiB) lives for the whole fuzzing process, as sakerd does.  Each input
 * is one client: a socketpair whose server end becomes a connection, the
 * input written to the other end in chunks whose size the first byte
 * chooses (so commands are also split across reads), the event loop run
 * after each chunk as sakerd would (reads, commits, replies, timers), the
 * replies read and thrown away.  Then the client hangs up, a second
 * connection sends "status up", and every queue is deleted, so the next
 * input starts from an empty server (and the process does not grow with
 * the queue names inputs invent).  Afterwards no connection may be left
 * and the loop must not be stuck in a batch.
 */

/* After each chunk the loop turns until it is idle (nothing active, no
 * reply read), at most MAX_TURNS times; an input is written in at most
 * MAX_CHUNKS pieces.  Both bound the system calls of one input: they, not
 * the server's code, set the fuzzer's speed (a turn is an epoll_wait and a
 * timerfd_settime; a 3 KB input in 1-byte writes with 4 turns each was
 * 36,000 calls). */
#define MAX_TURNS	16
#define MAX_CHUNKS	12

size_t fuzz_max_chunks = MAX_CHUNKS;

static struct options opt;
static bool ready;
static bool echo;		/* FUZZ_CONN_ECHO=1: replies to stderr */

static void
setup(void)
{
	static char *argv[] = {
		"sakerd", "-p", "1", "--store", "memory", "--max-memory", "64m",
		"--log", "/dev/null", "--max-item-size", "65536", NULL
	};

	char path[] = "/tmp/fuzz_conn_auth.XXXXXX", err[256];
	int fd;

	FUZZ_CHECK(options_parse(11, argv, &opt) == 0);
	opt.port = 0;		/* no listener: connections come from socketpair() */
	FUZZ_CHECK(log_open(opt.log_target) == 0);
	/* an --auth-file (users u and a, password p): bit 0x40 of the first byte
	 * starts the client logged out, so the pre-login state is fuzzed */
	fd = mkstemp(path);
	FUZZ_CHECK(fd >= 0);
	/* u is limited (perms.h): logins as u fuzz the refusals too */
	FUZZ_CHECK(write(fd, "u:p:queues=q*,read\na:p:admin\n", 29) == 29);
	close(fd);
	FUZZ_CHECK((opt.auth = auth_load(path, err, sizeof(err))) != NULL);
	unlink(path);
	FUZZ_CHECK(server_init(&opt) == 0);
	/* SIGINT and SIGTERM are the fuzzer's: it prints its statistics and
	 * exits.  Left to sakerd's handlers they would stop the server and
	 * the next input would fail as if it had found a bug (freeing the
	 * events puts the fuzzer's handlers back). */
	for (size_t i = 0; i < sizeof(srv->sig_ev) / sizeof(srv->sig_ev[0]); i++)
		if (srv->sig_ev[i] != NULL) {
			event_free(srv->sig_ev[i]);
			srv->sig_ev[i] = NULL;
		}
	/* an HTTP server without a listener, for fuzz_http (admin login
	 * required, as with --auth-file) */
	srv->http = http_start(srv->base, NULL, &srv->broker, 1000,
	    &srv->stopping, true, opt.max_conns, server_commit_now);
	FUZZ_CHECK(srv->http != NULL);
	echo = getenv("FUZZ_CONN_ECHO") != NULL;
	ready = true;
}

void
fuzz_server_setup(void)
{
	if (!ready)
		setup();
}

void
fuzz_turns(int peer)
{
	char sink[16384];
	ssize_t n;
	int i;
	bool busy = true;

	for (i = 0; i < MAX_TURNS && busy; i++) {
		server_turn(false);
		/* the client reads its replies, so the server never stalls */
		busy = event_base_get_num_events(srv->base,
		    EVENT_BASE_COUNT_ACTIVE) > 0;
		while (peer >= 0 && (n = read(peer, sink, sizeof(sink))) > 0) {
			busy = true;
			if (echo)
				fwrite(sink, 1, (size_t)n, stderr);
		}
	}
}

size_t
fuzz_chunk(uint8_t first, size_t size)
{
	size_t chunk, least;

	if (first < 128)
		return 0;	/* all at once */
	chunk = (size_t)(first & 63) + 1;
	if (fuzz_max_chunks == 0)
		return chunk;
	least = (size + fuzz_max_chunks - 1) / fuzz_max_chunks;
	return chunk < least ? least : chunk;
}

/* Write `len` bytes to the server, running the loop whenever the socket
 * is full.  False when the server closed the connection or stopped
 * reading (backpressure). */
static bool
send_all(int peer, const uint8_t *p, size_t len)
{
	int stuck = 0;

	while (len > 0) {
		ssize_t n = write(peer, p, len);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			stuck = 0;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return false;
		fuzz_turns(peer);
		if (++stuck > 64)
			return false;
	}
	return true;
}

void
fuzz_send(int peer, const uint8_t *data, size_t size, size_t chunk)
{
	size_t off, n;

	for (off = 0; off < size; off += n) {
		n = chunk == 0 || size - off < chunk ? size - off : chunk;
		if (!send_all(peer, data + off, n))
			break;
		fuzz_turns(peer);
	}
	fuzz_turns(peer);
}

void
fuzz_session(const uint8_t *data, size_t size, size_t chunk, bool authed,
    bool tls)
{
	struct conn *c;
	int sv[2];

	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0, sv) == 0);
	if ((c = conn_new(sv[0], tls)) == NULL) {
		close(sv[0]);
		close(sv[1]);
		return;
	}
	c->s.authed = authed;
	fuzz_send(sv[1], data, size, chunk);
	close(sv[1]);		/* hang up: the server notices on its next read */
	fuzz_turns(-1);
}

static int
delete_one(void *arg, struct squeue *q)
{
	(void)arg;
	FUZZ_CHECK(queue_delete(&srv->broker, q) == SAKER_OK);
	return 0;
}

void
fuzz_client(const char *bytes)
{
	fuzz_server_setup();
	fuzz_session((const uint8_t *)bytes, strlen(bytes), 0, true, false);
}

void
fuzz_reset(void)
{
	struct conn *c;

	while ((c = conn_first()) != NULL)
		conn_close(c);
	queues_walk(&srv->broker, delete_one, NULL);
	fuzz_turns(-1);		/* the commit reaps the deleted queues */
}

int
fuzz_conn(const uint8_t *data, size_t size)
{
	static const uint8_t reset[] = "status up\r\n";
	struct conn *c;

	if (!ready)
		setup();
	log_set_level(LOG_LVL_ERROR);	/* an input may have sent verbosity */
	if (size == 0)
		return 0;
	fuzz_session(data + 1, size - 1, fuzz_chunk(data[0], size - 1),
	    (data[0] & 0x40) == 0, false);
	/* a connection paused for backpressure or blocked in a get with no
	 * timeout never reads the hang-up: close what is left */
	while ((c = conn_first()) != NULL)
		conn_close(c);
	server_drain();
	fuzz_turns(-1);
	fuzz_session(reset, sizeof(reset) - 1, 0, true, false);
	/* failed logins of this input do not slow the next one down */
	login_reset();
	fuzz_reset();
	FUZZ_CHECK(srv->broker.stats.curr_connections == 0);
	FUZZ_CHECK(conn_batch_empty());
	return 0;
}
