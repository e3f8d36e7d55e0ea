/* client.c -- `saker put`, `saker get` and `saker stats`: a tiny blocking client. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#ifdef HAVE_OPENSSL
#include <openssl/err.h>
#include <openssl/ssl.h>
#endif

#include "client.h"
#include "client_login.h"
#include "clock.h"
#include "duration.h"
#include "qname.h"
#include "saker/store.h"
#include "tls_client.h"

#define CLIENT_MAX_DATA (1u << 30)

/* A connection with a read buffer and one deadline for the whole exchange. */
struct conn {
	int fd;
#ifdef HAVE_OPENSSL
	SSL *ssl;                       /* --tls */
#endif
	const char *server;
	uint64_t deadline_ns;
	char buf[65536];
	size_t pos, len;
};

/* ------------------------------------------------------------------ */
/* connecting */

static int
wait_fd(int fd, short events, uint64_t deadline_ns)
{
	struct pollfd p = { fd, events, 0 };

	for (;;) {
		uint64_t now = saker_mono_ns();
		int ms, rc;

		if (now >= deadline_ns) {
			errno = ETIMEDOUT;
			return -1;
		}
		ms = (int)((deadline_ns - now + 999999) / 1000000);
		rc = poll(&p, 1, ms);
		if (rc > 0)
			return 0;
		if (rc == -1 && errno != EINTR)
			return -1;
	}
}

static int
connect_fd(int fd, const struct sockaddr *sa, socklen_t salen)
{
	int flags = fcntl(fd, F_GETFL), err = 0;
	socklen_t elen = sizeof(err);

	if (flags == -1 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) == -1)
		return -1;
	if (connect(fd, sa, salen) == -1) {
		if (errno != EINPROGRESS)
			return -1;
		if (wait_fd(fd, POLLOUT,
		    saker_mono_ns() + (uint64_t)CLIENT_CONNECT_MS * 1000000u) == -1)
			return -1;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == -1)
			return -1;
		if (err != 0) {
			errno = err;
			return -1;
		}
	}
	return 0;
}

int
client_connect(const char *server, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL, *ai;
	char host[256];
	const char *port = "22133", *colon;
	int fd = -1, rc, saved = 0;

	if (strchr(server, '/') != NULL) {
		struct sockaddr_un sun;

		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		if (strlen(server) >= sizeof(sun.sun_path)) {
			snprintf(err, errlen, "cannot connect to %s: socket path too long", server);
			return -1;
		}
		memcpy(sun.sun_path, server, strlen(server) + 1);
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
		    connect_fd(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
			snprintf(err, errlen, "cannot connect to %s: %s", server, strerror(errno));
			if (fd != -1)
				close(fd);
			return -1;
		}
		return fd;
	}
	if (server[0] == '[') {
		const char *end = strchr(server, ']');
		if (end == NULL || (size_t)(end - server - 1) >= sizeof(host) ||
		    (end[1] != '\0' && end[1] != ':')) {
			snprintf(err, errlen, "bad server address '%s' (expected HOST:PORT)", server);
			return -1;
		}
		memcpy(host, server + 1, (size_t)(end - server - 1));
		host[end - server - 1] = '\0';
		if (end[1] == ':')
			port = end + 2;
	} else {
		colon = strrchr(server, ':');
		size_t hl = colon != NULL ? (size_t)(colon - server) : strlen(server);
		if (hl >= sizeof(host) || hl == 0) {
			snprintf(err, errlen, "bad server address '%s' (expected HOST:PORT)", server);
			return -1;
		}
		memcpy(host, server, hl);
		host[hl] = '\0';
		if (colon != NULL)
			port = colon + 1;
	}
	if ((rc = getaddrinfo(host, port, &hints, &res)) != 0) {
		snprintf(err, errlen, "cannot resolve %s: %s", server, gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd == -1) {
			saved = errno;
			continue;
		}
		if (connect_fd(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		saved = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd == -1)
		snprintf(err, errlen, "cannot connect to %s: %s", server, strerror(saved));
	return fd;
}

#ifdef HAVE_OPENSSL
/* Wait for what OpenSSL asked for after a call returned `rc`.  Returns 0
 * to retry, -1 with errno set (EPROTO: a TLS error, see the queue). */
static int
tls_wait(struct conn *c, int rc, uint64_t deadline_ns)
{
	switch (SSL_get_error(c->ssl, rc)) {
	case SSL_ERROR_WANT_READ:
		return wait_fd(c->fd, POLLIN, deadline_ns);
	case SSL_ERROR_WANT_WRITE:
		return wait_fd(c->fd, POLLOUT, deadline_ns);
	case SSL_ERROR_ZERO_RETURN:
		errno = ECONNRESET;
		return -1;
	case SSL_ERROR_SYSCALL:
		if (errno == 0)
			errno = ECONNRESET;
		return -1;
	default:
		errno = EPROTO;
		return -1;
	}
}
#endif

/* --tls: the handshake on c->fd, the certificate checked for `server`. */
static int
conn_start_tls(struct conn *c, const char *server, char *err, size_t errlen)
{
#ifdef HAVE_OPENSSL
	/* a handshake is a round trip or two and the server's signature:
	 * allow it what a reply gets */
	uint64_t deadline = saker_mono_ns() + (uint64_t)CLIENT_REPLY_MS * 1000000u;
	char e[256];
	int rc;

	if (!tls_client.on)
		return 0;
	if ((c->ssl = tls_client_new(server, err, errlen)) == NULL)
		return -1;
	if (!SSL_set_fd(c->ssl, c->fd)) {
		snprintf(err, errlen, "TLS: %s", tls_client_error(e, sizeof(e)));
		return -1;
	}
	for (;;) {
		ERR_clear_error();
		if ((rc = SSL_connect(c->ssl)) == 1)
			return 0;
		if (tls_wait(c, rc, deadline) == -1)
			break;
	}
	if (errno == EPROTO) {
		long v = SSL_get_verify_result(c->ssl);

		if (v != X509_V_OK)
			snprintf(err, errlen, "TLS handshake with %s: certificate: %s",
			    server, X509_verify_cert_error_string(v));
		else
			snprintf(err, errlen, "TLS handshake with %s: %s", server,
			    tls_client_error(e, sizeof(e)));
	} else {
		snprintf(err, errlen, "TLS handshake with %s: %s", server, strerror(errno));
	}
	return -1;
#else
	return 0;
#endif
}

static void
conn_close(struct conn *c)
{
#ifdef HAVE_OPENSSL
	if (c->ssl != NULL) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
#endif
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
}

static void
conn_deadline(struct conn *c, uint64_t ms)
{
	c->deadline_ns = saker_mono_ns() + ms * 1000000u;
}

static int conn_login(const char *cmd, struct conn *c);

/* Try each server of a comma-separated list in turn; the connection has
 * the usual reply deadline.  NULL after telling stderr why (for `saker
 * cmd`). */
static struct conn *
conn_open(const char *cmd, const char *servers, char *which, size_t wlen)
{
	char *list = strdup(servers), *tok, *save = NULL, err[512];
	struct conn *c = malloc(sizeof(*c));
	int fd = -1;

	if (list == NULL || c == NULL) {
		fprintf(stderr, "saker %s: out of memory\n", cmd);
		free(list);
		free(c);
		return NULL;
	}
	for (tok = strtok_r(list, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		if ((fd = client_connect(tok, err, sizeof(err))) == -1)
			continue;
		memset(c, 0, sizeof(*c));
		c->fd = fd;
		if (conn_start_tls(c, tok, err, sizeof(err)) == 0) {
			snprintf(which, wlen, "%s", tok);
			break;
		}
		conn_close(c);
		fd = -1;
	}
	free(list);
	if (fd == -1) {
		fprintf(stderr, "saker %s: %s\n", cmd, err);
		free(c);
		return NULL;
	}
	c->server = which;
	conn_deadline(c, CLIENT_REPLY_MS);
	if (client_login_wanted() && conn_login(cmd, c) == -1) {
		conn_close(c);
		free(c);
		return NULL;
	}
	return c;
}

static int
conn_write(struct conn *c, const void *p, size_t len)
{
	const char *s = p;

#ifdef HAVE_OPENSSL
	while (c->ssl != NULL && len > 0) {
		size_t w = 0;
		int rc;

		ERR_clear_error();
		if ((rc = SSL_write_ex(c->ssl, s, len, &w)) == 1) {
			s += w;
			len -= w;
		} else if (tls_wait(c, rc, c->deadline_ns) == -1) {
			return -1;
		}
	}
#endif
	while (len > 0) {
		ssize_t n = send(c->fd, s, len, MSG_NOSIGNAL);
		if (n > 0) {
			s += n;
			len -= (size_t)n;
			continue;
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (wait_fd(c->fd, POLLOUT, c->deadline_ns) == -1)
				return -1;
			continue;
		}
		return -1;
	}
	return 0;
}

static int
conn_fill(struct conn *c)
{
	ssize_t n;

	if (c->pos > 0) {
		memmove(c->buf, c->buf + c->pos, c->len - c->pos);
		c->len -= c->pos;
		c->pos = 0;
	}
	for (;;) {
		if (c->len == sizeof(c->buf)) {
			errno = EMSGSIZE;
			return -1;
		}
#ifdef HAVE_OPENSSL
		if (c->ssl != NULL) {
			size_t got = 0;
			int rc;

			ERR_clear_error();
			rc = SSL_read_ex(c->ssl, c->buf + c->len, sizeof(c->buf) - c->len, &got);
			if (rc == 1) {
				c->len += got;
				return 0;
			}
			if (tls_wait(c, rc, c->deadline_ns) == -1)
				return -1;
			continue;
		}
#endif
		n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
		if (n > 0) {
			c->len += (size_t)n;
			return 0;
		}
		if (n == 0) {
			errno = ECONNRESET;
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		if (wait_fd(c->fd, POLLIN, c->deadline_ns) == -1)
			return -1;
	}
}

/* One reply line without its terminator, NUL-terminated in place. */
static char *
conn_line(struct conn *c)
{
	for (;;) {
		char *nl = memchr(c->buf + c->pos, '\n', c->len - c->pos);
		if (nl != NULL) {
			char *line = c->buf + c->pos;
			*nl = '\0';
			if (nl > line && nl[-1] == '\r')
				nl[-1] = '\0';
			c->pos = (size_t)(nl - c->buf) + 1;
			return line;
		}
		if (conn_fill(c) == -1)
			return NULL;
	}
}

/* Copy exactly len bytes of reply data to fp. */
static int
conn_copy(struct conn *c, size_t len, FILE *fp, bool *out_failed)
{
	while (len > 0) {
		size_t n;

		if (c->pos == c->len && conn_fill(c) == -1)
			return -1;
		n = c->len - c->pos < len ? c->len - c->pos : len;
		if (fwrite(c->buf + c->pos, 1, n, fp) != n)
			*out_failed = true;
		c->pos += n;
		len -= n;
	}
	return 0;
}

#ifdef HAVE_OPENSSL
/* A TLS connection failed: is there a TLS reason?  A server that refuses
 * the client (no certificate, say) sends an alert and closes; a write
 * after that fails with EPIPE, and the alert is read here. */
static bool
tls_reason(struct conn *c)
{
	char b[1];
	size_t got;
	int e = errno, rc;

	if (c->ssl == NULL)
		return false;
	if (ERR_peek_error() == 0 && (e == EPIPE || e == ECONNRESET) &&
	    (rc = SSL_read_ex(c->ssl, b, sizeof(b), &got)) != 1 &&
	    SSL_get_error(c->ssl, rc) != SSL_ERROR_SSL)
		ERR_clear_error();
	errno = e;
	return ERR_peek_error() != 0;
}
#endif

static void
io_error(const char *cmd, struct conn *c)
{
#ifdef HAVE_OPENSSL
	char e[256];

	if (tls_reason(c)) {
		fprintf(stderr, "saker %s: TLS with %s failed: %s\n", cmd,
		    c->server, tls_client_error(e, sizeof(e)));
		return;
	}
#endif
	if (errno == ETIMEDOUT)
		fprintf(stderr, "saker %s: %s did not answer in time\n", cmd, c->server);
	else if (errno == ECONNRESET || errno == EPIPE)
		fprintf(stderr, "saker %s: %s closed the connection\n", cmd, c->server);
	else
		fprintf(stderr, "saker %s: talking to %s failed: %s\n", cmd, c->server,
		    strerror(errno));
}

/*
 * --user: memcached's ASCII login, before the command.  A server without
 * --auth-file refuses the login's key as a queue name and stores nothing;
 * the command goes on without a login there.
 */
static int
conn_login(const char *cmd, struct conn *c)
{
	size_t len = 0;
	char *req = client_login_request(cmd, &len), *line;
	int rc;

	if (req == NULL)
		return -1;
	rc = conn_write(c, req, len);
	client_login_free(req, len);
	if (rc == -1 || (line = conn_line(c)) == NULL) {
		io_error(cmd, c);
		return -1;
	}
	if (strcmp(line, "STORED") == 0 ||
	    strcmp(line, "CLIENT_ERROR bad queue name") == 0)
		return 0;
	if (strcmp(line, "CLIENT_ERROR authentication failure") == 0)
		fprintf(stderr, "saker %s: %s refused the login of user '%s': "
		    "wrong user name or password\n", cmd, c->server,
		    client_login_user());
	else
		fprintf(stderr, "saker %s: %s replied to the login: %s\n", cmd,
		    c->server, line);
	return -1;
}

/* A reply that is not what `cmd` expects, in one line; a server that
 * wants a login says so in words a user can act on. */
static void
bad_reply(const char *cmd, const char *server, const char *line)
{
	if (!client_login_wanted() &&
	    (strcmp(line, "CLIENT_ERROR authentication failure") == 0 ||
	    strcmp(line, "CLIENT_ERROR unauthenticated") == 0))
		fprintf(stderr, "saker %s: %s requires a login (%s): give --user "
		    "NAME or SAKER_USER, and --password-file FILE or "
		    "SAKER_PASSWORD\n", cmd, server, line);
	else if (strcmp(line, "CLIENT_ERROR permission denied") == 0 &&
	    client_login_user() != NULL)
		fprintf(stderr, "saker %s: %s: user '%s' may not do that "
		    "(CLIENT_ERROR permission denied)\n", cmd, server,
		    client_login_user());
	else
		fprintf(stderr, "saker %s: %s replied: %s\n", cmd, server, line);
}

static bool
parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > max)
		return false;
	*out = v;
	return true;
}

/* The `i` token of a meta reply line ("VA 5 f0 d1 iorder-17") into
 * id[0..cap), "" when the item has none; false when it is too long. */
static bool
meta_id(const char *line, char *id, size_t cap)
{
	const char *p = line;

	id[0] = '\0';
	while ((p = strchr(p, ' ')) != NULL) {
		size_t n;

		p++;
		if (*p != 'i')
			continue;
		n = strcspn(p + 1, " ");
		if (n >= cap)
			return false;
		memcpy(id, p + 1, n);
		id[n] = '\0';
		return true;
	}
	return true;
}

/* put -d and get -t: the wire takes milliseconds, so send the parsed value */
static bool
parse_ms(const char *cmd, const char *what, const char *s, int64_t *ms)
{
	if (parse_duration(s, DURATION_BARE_MS, 315360000000LL, ms) == 0)
		return true;
	fprintf(stderr, "saker %s: bad %s '%s' (milliseconds),"
	    " or a duration with a unit: 250ms, 1.5s, 2m\n", cmd, what, s);
	return false;
}

/* ------------------------------------------------------------------ */
/* saker put */

static const char put_usage[] =
	    "usage: saker put [-s SERVER] [-f FLAGS] [-e EXPTIME] [-d MS | -a UNIXTIME]\n"
	    "                 [-i KEY] QUEUE [DATA|-]\n"
	    "\n"
	    "Enqueue one item: DATA, or standard input when DATA is '-' or absent\n"
	    "(binary-safe, up to the server's item size limit).\n"
	    "\n"
	    "  -s, --server SERVER  HOST:PORT, [V6ADDR]:PORT or a unix socket path;\n"
	    "                       a comma-separated list is tried in order\n"
	    "                       (default " CLIENT_DEFAULT_SERVER ")\n"
	    "  -f, --flags N        32-bit client flags stored with the item (default 0)\n"
	    "  -e, --expire N       memcache exptime: 0 never, <= 2592000 seconds from\n"
	    "                       now, else absolute unix seconds (default 0)\n"
	    "  -d, --delay DURATION make the item visible DURATION from now (250ms,\n"
"                       1.5s, 2m; a bare number is milliseconds)\n"
	    "  -a, --at UNIXTIME    make the item visible at that time\n"
	    "  -i, --id KEY         deduplication id (1..128 printable bytes, no '/'):\n"
	    "                       the queue keeps one item per id for its\n"
	    "                       dedup_window, so a retry of this put with the\n"
	    "                       same KEY is answered STORED without a second item\n"
	    TLS_CLIENT_HELP
	    CLIENT_LOGIN_HELP
	    "  -h, --help           this text\n"
	    "\n"
	    "Exit status: 0 STORED, 1 not stored or no server, 2 usage error.\n";

/* The id travels as a key segment (`set q/id=KEY`): the protocol's key
 * rules (no space or control byte) and its segment separator '/' bound
 * what it may hold; the store bounds its length (SAKER_SAKER_DEDUP_KEY_MAX). */

static bool
dedup_key_ok(const char *k)
{
	size_t n = strlen(k), i;

	if (n == 0 || n > SAKER_DEDUP_KEY_MAX)
		return false;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)k[i];
		if (c <= ' ' || c >= 0x7f || c == '/')
			return false;
	}
	return true;
}

static char *
read_all(FILE *fp, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap), *nb;

	if (buf == NULL)
		return NULL;
	for (;;) {
		size_t got = fread(buf + n, 1, cap - n, fp);
		n += got;
		if (got == 0)
			break;
		if (n == cap) {
			if (cap >= CLIENT_MAX_DATA) {
				errno = EFBIG;
				free(buf);
				return NULL;
			}
			if ((nb = realloc(buf, cap * 2)) == NULL) {
				free(buf);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
	}
	if (ferror(fp)) {
		free(buf);
		return NULL;
	}
	*len = n;
	return buf;
}

int
put_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, 's' },
		{ "flags", required_argument, NULL, 'f' },
		{ "expire", required_argument, NULL, 'e' },
		{ "delay", required_argument, NULL, 'd' },
		{ "at", required_argument, NULL, 'a' },
		{ "id", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *servers = CLIENT_DEFAULT_SERVER, *queue, *delay = NULL, *at = NULL;
	const char *id = NULL;
	uint64_t flags = 0, exptime = 0, v;
	int64_t ms;
	char which[512], head[800], *data = NULL, *line, delaybuf[24];
	size_t len;
	struct conn *c = NULL;
	int ch, n, rc = 1;
	bool own = false;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "s:f:e:d:a:i:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 's': servers = optarg; break;
		case 'f':
			if (!parse_u64(optarg, UINT32_MAX, &flags)) {
				fprintf(stderr, "saker put: bad flags '%s' (0..4294967295)\n", optarg);
				return 2;
			}
			break;
		case 'e':
			if (!parse_u64(optarg, INT32_MAX, &exptime)) {
				fprintf(stderr, "saker put: bad exptime '%s'\n", optarg);
				return 2;
			}
			break;
		case 'd':
			if (!parse_ms("put", "delay", optarg, &ms))
				return 2;
			snprintf(delaybuf, sizeof(delaybuf), "%" PRId64, ms);
			delay = delaybuf;
			break;
		case 'a':
			if (!parse_u64(optarg, 253402300799ULL, &v)) {
				fprintf(stderr, "saker put: bad time '%s' (unix seconds)\n", optarg);
				return 2;
			}
			at = optarg;
			break;
		case 'i':
			if (!dedup_key_ok(optarg)) {
				fprintf(stderr, "saker put: bad id '%s' (1..%u printable "
				    "bytes, no space or '/')\n", optarg, SAKER_DEDUP_KEY_MAX);
				return 2;
			}
			id = optarg;
			break;
		case 'h': fputs(put_usage, stdout); return 0;
		default:  fputs(put_usage, stderr); return 2;
		}
	}
	if (argc - optind < 1 || argc - optind > 2 || (delay != NULL && at != NULL)) {
		fputs(put_usage, stderr);
		return 2;
	}
	queue = argv[optind];
	if (!saker_qname_valid(queue, strlen(queue))) {
		fprintf(stderr, "saker put: bad queue name '%s'\n", queue);
		return 2;
	}
	if (argc - optind == 2 && strcmp(argv[optind + 1], "-") != 0) {
		data = argv[optind + 1];
		len = strlen(data);
	} else {
		if ((data = read_all(stdin, &len)) == NULL) {
			fprintf(stderr, "saker put: reading standard input failed: %s\n",
			    strerror(errno));
			return 1;
		}
		own = true;
	}
	n = snprintf(head, sizeof(head), "set %s%s%s%s%s %" PRIu64 " %" PRIu64 " %zu\r\n",
	    queue, delay != NULL ? "/delay=" : at != NULL ? "/at=" : "",
	    delay != NULL ? delay : at != NULL ? at : "",
	    id != NULL ? "/id=" : "", id != NULL ? id : "", flags, exptime, len);
	if ((c = conn_open("put", servers, which, sizeof(which))) == NULL)
		goto out;
	if (conn_write(c, head, (size_t)n) == -1 || conn_write(c, data, len) == -1 ||
	    conn_write(c, "\r\n", 2) == -1 || (line = conn_line(c)) == NULL) {
		io_error("put", c);
		goto out;
	}
	if (strcmp(line, "STORED") == 0)
		rc = 0;
	else if (strcmp(line, "NOT_STORED") == 0)
		fprintf(stderr, "saker put: queue '%s' is full (NOT_STORED)\n", queue);
	else
		bad_reply("put", which, line);
out:
	if (c != NULL) {
		conn_close(c);
		free(c);
	}
	if (own)
		free(data);
	return rc;
}

/* ------------------------------------------------------------------ */
/* saker get */

static const char get_usage[] =
	    "usage: saker get [-s SERVER] [-t MS] [-p] [-F] [-D] [-I] [-q] QUEUE\n"
	    "\n"
	    "Dequeue one item and write its data to standard output, unchanged\n"
	    "(a newline is added only when standard output is a terminal).\n"
	    "\n"
	    "  -s, --server SERVER  HOST:PORT, [V6ADDR]:PORT or a unix socket path;\n"
	    "                       a comma-separated list is tried in order\n"
	    "                       (default " CLIENT_DEFAULT_SERVER ")\n"
	    "  -t, --timeout DURATION  wait up to DURATION for an item (default 0;\n"
"                       250ms, 1.5s, 2m; a bare number is milliseconds)\n"
	    "  -p, --peek           show the head item without removing it\n"
	    "  -F, --show-flags     print the item's flags to standard error\n"
	    "  -D, --show-deliveries  print the item's delivery count (times it was\n"
	    "                       handed out by /open) to standard error\n"
	    "  -I, --show-id        print the item's deduplication id (the put's --id)\n"
	    "                       as \"id KEY\" to standard error; nothing without one\n"
	    "  -q, --quiet          say nothing on standard error when the queue is empty\n"
	    TLS_CLIENT_HELP
	    CLIENT_LOGIN_HELP
	    "  -h, --help           this text\n"
	    "\n"
	    "Standard output is exactly the item's data (plus a newline when it is a\n"
	    "terminal).  Exit status: 0 an item was written, 1 queue empty (after the\n"
	    "timeout; \"saker get: queue Q is empty\" on standard error) or no server,\n"
	    "2 usage error.\n";

int
get_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "peek", no_argument, NULL, 'p' },
		{ "show-flags", no_argument, NULL, 'F' },
		{ "show-deliveries", no_argument, NULL, 'D' },
		{ "show-id", no_argument, NULL, 'I' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *servers = CLIENT_DEFAULT_SERVER, *queue;
	uint64_t timeout = 0;
	int64_t ms;
	char which[512], req[600], key[600], *line;
	struct conn *c = NULL;
	bool peek = false, show_flags = false, out_failed = false, quiet = false;
	bool show_dlv = false, show_id = false, meta;
	unsigned long long flags, bytes, dlv = 0;
	char id[SAKER_DEDUP_KEY_MAX + 1] = "";
	int ch, n, rc = 1;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "s:t:pFDIqh", longopts, NULL)) != -1) {
		switch (ch) {
		case 's': servers = optarg; break;
		case 'q': quiet = true; break;
		case 't':
			if (!parse_ms("get", "timeout", optarg, &ms))
				return 2;
			timeout = (uint64_t)ms;
			break;
		case 'p': peek = true; break;
		case 'F': show_flags = true; break;
		case 'D': show_dlv = true; break;
		case 'I': show_id = true; break;
		case 'h': fputs(get_usage, stdout); return 0;
		default:  fputs(get_usage, stderr); return 2;
		}
	}
	if (argc - optind != 1) {
		fputs(get_usage, stderr);
		return 2;
	}
	queue = argv[optind];
	if (!saker_qname_valid(queue, strlen(queue))) {
		fprintf(stderr, "saker get: bad queue name '%s'\n", queue);
		return 2;
	}
	n = snprintf(key, sizeof(key), "%s", queue);
	if (timeout > 0)
		n += snprintf(key + n, sizeof(key) - (size_t)n, "/t=%" PRIu64, timeout);
	if (peek)
		snprintf(key + n, sizeof(key) - (size_t)n, "/peek");
	/* the count and the id come with the meta get (its flags d, i) */
	meta = show_dlv || show_id;
	n = meta ? snprintf(req, sizeof(req), "mg %s v f d i\r\n", key) :
	    snprintf(req, sizeof(req), "get %s\r\n", key);
	if ((c = conn_open("get", servers, which, sizeof(which))) == NULL)
		return 1;
	conn_deadline(c, timeout + CLIENT_REPLY_MS);
	if (conn_write(c, req, (size_t)n) == -1 || (line = conn_line(c)) == NULL) {
		io_error("get", c);
		goto out;
	}
	if (strcmp(line, "END") == 0 || (meta && strcmp(line, "EN") == 0)) {
		/* status 1 and nothing on stdout (scripts loop on it); a person
		 * is told why on stderr, unless -q */
		if (!quiet) {
			if (timeout > 0)
				fprintf(stderr, "saker get: queue %s is empty "
				    "(waited %" PRIu64 " ms)\n", queue, timeout);
			else
				fprintf(stderr, "saker get: queue %s is empty\n", queue);
		}
		goto out;
	}
	if (meta ? strncmp(line, "VA ", 3) != 0 ||
	    sscanf(line + 3, "%llu f%llu d%llu", &bytes, &flags, &dlv) != 3 ||
	    !meta_id(line, id, sizeof(id)) :
	    strncmp(line, "VALUE ", 6) != 0 ||
	    sscanf(line + 6, "%*s %llu %llu", &flags, &bytes) != 2) {
		bad_reply("get", which, line);
		goto out;
	}
	if (conn_copy(c, (size_t)bytes, stdout, &out_failed) == -1 ||
	    (line = conn_line(c)) == NULL || (line[0] == '\0' && !meta &&
	    (line = conn_line(c)) == NULL)) {
		io_error("get", c);
		goto out;
	}
	if (!meta && strcmp(line, "END") != 0) {
		fprintf(stderr, "saker get: unexpected reply from %s: %s\n", which, line);
		goto out;
	}
	if (isatty(STDOUT_FILENO))
		fputc('\n', stdout);
	if (show_flags)
		fprintf(stderr, "flags %llu\n", flags);
	if (show_dlv)
		fprintf(stderr, "deliveries %llu\n", dlv);
	if (show_id && id[0] != '\0')
		fprintf(stderr, "id %s\n", id);
	if (fflush(stdout) != 0 || out_failed) {
		fprintf(stderr, "saker get: writing standard output failed: %s\n",
		    strerror(errno));
		goto out;
	}
	rc = 0;
out:
	conn_close(c);
	free(c);
	return rc;
}

/* ------------------------------------------------------------------ */
/* saker stats */

static const char stats_usage[] =
	    "usage: saker stats [-s SERVER[,SERVER...]] [--raw]\n"
	    "\n"
	    "Print the server's statistics as a table: global counters, then one\n"
	    "row per queue.\n"
	    "\n"
	    "  -s, --server LIST  servers (HOST:PORT, [V6ADDR]:PORT or a unix socket\n"
	    "                     path), comma-separated; each is shown in turn\n"
	    "                     (default " CLIENT_DEFAULT_SERVER ")\n"
	    "  -r, --raw          print the STAT lines as the server sent them\n"
	    TLS_CLIENT_HELP
	    CLIENT_LOGIN_HELP
	    "  -h, --help         this text\n"
	    "\n"
	    "Exit status: 0 ok, 1 a server could not be reached, 2 usage error.\n";

struct stat_line {
	char *name;
	char *value;
	int qi;                  /* queue index, or -1 for a global stat */
	int col;
};

static const char *const stat_qcols[] = {
	"items", "bytes", "total_items", "expired_items", "age", "discarded",
	"waiters", "open_transactions", "delayed_items", "open_timeouts",
	"dead_lettered", "expired_to", "retries"
};
static const char *const stat_qheads[] = {
	"ITEMS", "BYTES", "TOTAL", "EXPIRED", "AGE_MS", "DISCARDED",
	"WAITERS", "OPEN", "DELAYED", "OPEN_TIMEOUTS", "DEAD_LETTERED",
	"EXPIRED_TO", "RETRIES"
};
#define STAT_NCOLS (sizeof(stat_qcols) / sizeof(stat_qcols[0]))

/* Queue names may contain '_', so "queue_<q>_<k>" is split using the
 * names learnt from the "_age" keys (no other key ends in "age"). */
static void
stats_print(struct stat_line *sl, size_t n)
{
	char **qs = NULL;
	size_t nq = 0, i, j, k, w = 0, qw = 5;
	size_t cw[STAT_NCOLS];

	for (i = 0; i < n; i++) {
		size_t len = strlen(sl[i].name);
		sl[i].qi = -1;
		if (strncmp(sl[i].name, "queue_", 6) == 0 && len > 10 &&
		    strcmp(sl[i].name + len - 4, "_age") == 0) {
			char **nqs = realloc(qs, (nq + 1) * sizeof(*qs));
			if (nqs == NULL)
				break;
			qs = nqs;
			qs[nq] = strndup(sl[i].name + 6, len - 10);
			if (qs[nq] == NULL)
				break;
			nq++;
		}
	}
	for (i = 0; i < n; i++) {
		size_t best = 0;
		if (strncmp(sl[i].name, "queue_", 6) != 0)
			continue;
		for (j = 0; j < nq; j++) {
			size_t ql = strlen(qs[j]);
			const char *rest = sl[i].name + 6 + ql;
			if (strncmp(sl[i].name + 6, qs[j], ql) != 0 || *rest != '_' || ql < best)
				continue;
			for (k = 0; k < STAT_NCOLS; k++) {
				if (strcmp(rest + 1, stat_qcols[k]) == 0) {
					sl[i].qi = (int)j;
					sl[i].col = (int)k;
					best = ql;
				}
			}
		}
	}
	for (i = 0; i < n; i++)
		if (sl[i].qi == -1 && strlen(sl[i].name) > w)
			w = strlen(sl[i].name);
	for (i = 0; i < n; i++)
		if (sl[i].qi == -1)
			printf("%-*s  %s\n", (int)w, sl[i].name, sl[i].value);
	if (nq > 0) {
		for (k = 0; k < STAT_NCOLS; k++)
			cw[k] = strlen(stat_qheads[k]);
		for (j = 0; j < nq; j++)
			if (strlen(qs[j]) > qw)
				qw = strlen(qs[j]);
		for (i = 0; i < n; i++)
			if (sl[i].qi >= 0 && strlen(sl[i].value) > cw[sl[i].col])
				cw[sl[i].col] = strlen(sl[i].value);
		printf("\n%-*s", (int)qw, "QUEUE");
		for (k = 0; k < STAT_NCOLS; k++)
			printf("  %*s", (int)cw[k], stat_qheads[k]);
		printf("\n");
		for (j = 0; j < nq; j++) {
			const char *vals[STAT_NCOLS];
			for (k = 0; k < STAT_NCOLS; k++)
				vals[k] = "-";
			for (i = 0; i < n; i++)
				if (sl[i].qi == (int)j)
					vals[sl[i].col] = sl[i].value;
			printf("%-*s", (int)qw, qs[j]);
			for (k = 0; k < STAT_NCOLS; k++)
				printf("  %*s", (int)cw[k], vals[k]);
			printf("\n");
		}
	}
	for (j = 0; j < nq; j++)
		free(qs[j]);
	free(qs);
}

static int
stats_one(const char *server, bool raw, bool header)
{
	char which[512], *line;
	struct conn *c;
	struct stat_line *sl = NULL;
	size_t n = 0, i;
	int rc = 1;

	if ((c = conn_open("stats", server, which, sizeof(which))) == NULL)
		return 1;
	if (conn_write(c, "stats\r\n", 7) == -1) {
		io_error("stats", c);
		goto out;
	}
	if (header)
		printf("== %s\n", server);
	for (;;) {
		char *sp;
		struct stat_line *nsl;

		if ((line = conn_line(c)) == NULL) {
			io_error("stats", c);
			goto out;
		}
		if (strcmp(line, "END") == 0)
			break;
		if (strncmp(line, "STAT ", 5) != 0 || (sp = strchr(line + 5, ' ')) == NULL) {
			bad_reply("stats", server, line);
			goto out;
		}
		if (raw) {
			printf("%s\n", line);
			continue;
		}
		if ((nsl = realloc(sl, (n + 1) * sizeof(*sl))) == NULL)
			goto oom;
		sl = nsl;
		*sp = '\0';
		sl[n].name = strdup(line + 5);
		sl[n].value = strdup(sp + 1);
		n++;
		if (sl[n - 1].name == NULL || sl[n - 1].value == NULL)
			goto oom;
	}
	if (!raw)
		stats_print(sl, n);
	rc = 0;
	goto out;
oom:
	fprintf(stderr, "saker stats: out of memory\n");
out:
	for (i = 0; i < n; i++) {
		free(sl[i].name);
		free(sl[i].value);
	}
	free(sl);
	conn_close(c);
	free(c);
	return rc;
}

int
stats_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, 's' },
		{ "raw", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *servers = CLIENT_DEFAULT_SERVER;
	char *list, *tok, *save = NULL;
	bool raw = false, many;
	int ch, rc = 0;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "s:rh", longopts, NULL)) != -1) {
		switch (ch) {
		case 's': servers = optarg; break;
		case 'r': raw = true; break;
		case 'h': fputs(stats_usage, stdout); return 0;
		default:  fputs(stats_usage, stderr); return 2;
		}
	}
	if (argc != optind) {
		fputs(stats_usage, stderr);
		return 2;
	}
	if ((list = strdup(servers)) == NULL)
		return 1;
	many = strchr(servers, ',') != NULL;
	for (tok = strtok_r(list, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		if (stats_one(tok, raw, many) != 0)
			rc = 1;
		if (many)
			printf("\n");
	}
	free(list);
	if (fflush(stdout) != 0)
		rc = 1;
	return rc;
}

/* ------------------------------------------------------------------ */
/* saker requeue */

#define REQUEUE_BATCH 1000	/* the server's limit per request (one commit) */

static void
requeue_usage(FILE *fp)
{
	fprintf(fp,
	    "usage: saker requeue [-s SERVER] [--max N] FROM TO\n"
	    "\n"
	    "Move items from the head of queue FROM (a dead-letter queue, say) to\n"
	    "the tail of queue TO, with their delivery counts reset, in batches of\n"
	    "up to %d items, each one transaction of the server: after a crash\n"
	    "every item is in exactly one of the two queues.  Progress goes to\n"
	    "standard error when it is a terminal.\n"
	    "\n"
	    "  -s, --server SERVER  HOST:PORT, [V6ADDR]:PORT or a unix socket path\n"
	    "                       (default " CLIENT_DEFAULT_SERVER ")\n"
	    "  -m, --max N          move at most N items (default: until FROM is empty)\n"
	    TLS_CLIENT_HELP
	    CLIENT_LOGIN_HELP
	    "  -h, --help           this text\n"
	    "\n"
	    "Standard output says how many items moved.  Exit status: 0 done,\n"
	    "1 refused or no server (items moved before stay moved), 2 usage error.\n",
	    REQUEUE_BATCH);
}

int
requeue_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, 's' },
		{ "max", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *servers = CLIENT_DEFAULT_SERVER, *from, *to;
	uint64_t max = UINT64_MAX, total = 0, want, n;
	char which[512], req[600], *line;
	struct conn *c = NULL;
	bool tty = isatty(STDERR_FILENO) != 0;
	int ch, len, rc = 1;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "s:m:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 's': servers = optarg; break;
		case 'm':
			if (!parse_u64(optarg, UINT64_MAX - 1, &max) || max == 0) {
				fprintf(stderr, "saker requeue: bad --max '%s' (a "
				    "number of items, at least 1)\n", optarg);
				return 2;
			}
			break;
		case 'h': requeue_usage(stdout); return 0;
		default:  requeue_usage(stderr); return 2;
		}
	}
	if (argc - optind != 2) {
		requeue_usage(stderr);
		return 2;
	}
	from = argv[optind];
	to = argv[optind + 1];
	if (!saker_qname_valid(from, strlen(from)) ||
	    !saker_qname_valid(to, strlen(to))) {
		fprintf(stderr, "saker requeue: bad queue name '%s'\n",
		    saker_qname_valid(from, strlen(from)) ? to : from);
		return 2;
	}
	if (strcmp(from, to) == 0) {
		fprintf(stderr, "saker requeue: FROM and TO are the same queue\n");
		return 2;
	}
	if ((c = conn_open("requeue", servers, which, sizeof(which))) == NULL)
		return 1;
	for (;;) {
		want = max - total < REQUEUE_BATCH ? max - total : REQUEUE_BATCH;
		len = snprintf(req, sizeof(req), "requeue %s %s %" PRIu64 "\r\n",
		    from, to, want);
		conn_deadline(c, CLIENT_REPLY_MS);
		if (conn_write(c, req, (size_t)len) == -1 ||
		    (line = conn_line(c)) == NULL) {
			io_error("requeue", c);
			goto out;
		}
		if (!parse_u64(line, want, &n)) {
			bad_reply("requeue", which, line);
			goto out;
		}
		total += n;
		if (tty)
			fprintf(stderr, "\rrequeued %" PRIu64 " items", total);
		if (n < want || total >= max)
			break;
	}
	rc = 0;
out:
	if (tty && total > 0)
		fputc('\n', stderr);
	printf("requeued %" PRIu64 " items from %s to %s\n", total, from, to);
	conn_close(c);
	free(c);
	return rc;
}
