/* client_login.c -- `saker --user NAME` (client_login.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "client_login.h"

/* The server reads at most this much login data (src/proto/text.c). */
#define LOGIN_DATA_MAX 4096
/* The key of the login `set`: a name no queue may have (it starts with a
 * dot), so a server without --auth-file refuses it ("CLIENT_ERROR bad
 * queue name") instead of storing the password as an item. */
#define LOGIN_KEY ".saker-login"

static const char *user;           /* --user or SAKER_USER */
static const char *password_file;  /* --password-file */
static char password[LOGIN_DATA_MAX];
static size_t password_len;
static bool password_known;

int
client_login_take_options(int *argc, char **argv)
{
	int i, o = 1;

	for (i = 1; i < *argc; i++) {
		const char *a = argv[i], *val = NULL, **dst = NULL;
		size_t nl = 0;

		if (strcmp(a, "--") == 0) {
			while (i < *argc)
				argv[o++] = argv[i++];
			break;
		}
		if (strncmp(a, "--user", 6) == 0 && (a[6] == '\0' || a[6] == '=')) {
			dst = &user;
			nl = 6;
		} else if (strncmp(a, "--password-file", 15) == 0 &&
		    (a[15] == '\0' || a[15] == '=')) {
			dst = &password_file;
			nl = 15;
		} else if (strncmp(a, "--password", 10) == 0 &&
		    (a[10] == '\0' || a[10] == '=')) {
			fprintf(stderr, "saker: --password: a password on the command "
			    "line is shown to every user by ps; use --password-file "
			    "FILE or SAKER_PASSWORD\n");
			return -1;
		}
		if (dst == NULL) {
			argv[o++] = argv[i];
			continue;
		}
		if (a[nl] == '=')
			val = a + nl + 1;
		else if (i + 1 < *argc)
			val = argv[++i];
		if (val == NULL || *val == '\0') {
			fprintf(stderr, "saker: %.*s needs a %s\n", (int)nl, a,
			    dst == &user ? "user name" : "file name");
			return -1;
		}
		*dst = val;
	}
	argv[o] = NULL;
	*argc = o;
	if (user == NULL && (user = getenv("SAKER_USER")) != NULL && *user == '\0')
		user = NULL;
	return 0;
}

bool
client_login_wanted(void)
{
	const char *env = getenv("SAKER_PASSWORD");

	return user != NULL || password_file != NULL || (env != NULL && *env != '\0');
}

const char *
client_login_user(void)
{
	return user;
}

/* The first line of a password file that only its owner can read. */
static int
read_password_file(const char *cmd, const char *path)
{
	struct stat st;
	ssize_t n;
	size_t len = 0;
	char *nl;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd == -1) {
		fprintf(stderr, "saker %s: cannot open password file %s: %s\n", cmd,
		    path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "saker %s: password file %s is not a regular file\n",
		    cmd, path);
		close(fd);
		return -1;
	}
	/* as psql's .pgpass: a password others can read is no secret */
	if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
		fprintf(stderr, "saker %s: password file %s is open to group or "
		    "others (mode %04o); run chmod 600 %s\n", cmd, path,
		    (unsigned)(st.st_mode & 07777), path);
		close(fd);
		return -1;
	}
	while (len < sizeof(password) &&
	    (n = read(fd, password + len, sizeof(password) - len)) != 0) {
		if (n == -1) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "saker %s: reading password file %s: %s\n",
			    cmd, path, strerror(errno));
			close(fd);
			return -1;
		}
		len += (size_t)n;
	}
	close(fd);
	if ((nl = memchr(password, '\n', len)) != NULL)
		len = (size_t)(nl - password);
	else if (len == sizeof(password)) {
		fprintf(stderr, "saker %s: password file %s: the first line is "
		    "longer than %d bytes\n", cmd, path, LOGIN_DATA_MAX - 1);
		return -1;
	}
	if (len > 0 && password[len - 1] == '\r')
		len--;
	password_len = len;
	return 0;
}

/* Where the prompt left the terminal, for a signal in the middle. */
static struct termios saved_tio;
static volatile sig_atomic_t tty_fd = -1;

static void
restore_tty(int sig)
{
	if (tty_fd != -1)
		tcsetattr(tty_fd, TCSAFLUSH, &saved_tio);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Ask on the controlling terminal, without echo. */
static int
prompt_password(const char *cmd)
{
	struct termios tio;
	struct sigaction sa, old_int, old_term, old_hup;
	size_t len = 0;
	int fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
	char c;

	if (fd == -1 || tcgetattr(fd, &saved_tio) == -1) {
		fprintf(stderr, "saker %s: user %s needs a password: give "
		    "--password-file FILE or SAKER_PASSWORD (no terminal to ask "
		    "on)\n", cmd, user);
		if (fd != -1)
			close(fd);
		return -1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = restore_tty;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGHUP, &sa, &old_hup);
	tty_fd = fd;
	tio = saved_tio;
	tio.c_lflag &= ~(tcflag_t)(ECHO | ECHOE | ECHOK | ECHONL);
	tio.c_lflag |= ICANON;
	/* echo off before the prompt: what is typed after it stays */
	tcsetattr(fd, TCSAFLUSH, &tio);
	dprintf(fd, "Password for %s: ", user);
	for (;;) {
		ssize_t n = read(fd, &c, 1);

		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0 || c == '\n')
			break;
		if (len < sizeof(password) - 1)
			password[len++] = c;
	}
	tcsetattr(fd, TCSAFLUSH, &saved_tio);
	tty_fd = -1;
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	dprintf(fd, "\n");
	close(fd);
	password_len = len;
	return 0;
}

static int
find_password(const char *cmd)
{
	const char *env = getenv("SAKER_PASSWORD");

	if (password_file != NULL) {
		if (read_password_file(cmd, password_file) == -1)
			return -1;
	} else if (env != NULL && *env != '\0') {
		if (strlen(env) >= sizeof(password)) {
			fprintf(stderr, "saker %s: SAKER_PASSWORD is longer than "
			    "%d bytes\n", cmd, LOGIN_DATA_MAX - 1);
			return -1;
		}
		password_len = strlen(env);
		memcpy(password, env, password_len);
	} else if (prompt_password(cmd) == -1) {
		return -1;
	}
	if (password_len == 0) {
		fprintf(stderr, "saker %s: the password for user %s is empty%s%s\n",
		    cmd, user, password_file != NULL ? " in " : "",
		    password_file != NULL ? password_file : "");
		return -1;
	}
	password_known = true;
	return 0;
}

/* The server splits the login at its first space: a user name has none
 * (and no control characters, which no --auth-file line holds). */
static bool
user_ok(const char *u)
{
	for (; *u != '\0'; u++)
		if ((unsigned char)*u <= ' ' || *u == 0x7f || *u == ':')
			return false;
	return true;
}

char *
client_login_request(const char *cmd, size_t *len)
{
	size_t ulen, dlen, hlen;
	char head[64], *req;

	if (user == NULL) {
		fprintf(stderr, "saker %s: a password without a user name: give "
		    "--user NAME or SAKER_USER\n", cmd);
		return NULL;
	}
	if (!user_ok(user)) {
		fprintf(stderr, "saker %s: bad user name '%s' (no spaces, colons "
		    "or control characters)\n", cmd, user);
		return NULL;
	}
	if (!password_known && find_password(cmd) == -1)
		return NULL;
	ulen = strlen(user);
	dlen = ulen + 1 + password_len;
	if (dlen > LOGIN_DATA_MAX) {
		fprintf(stderr, "saker %s: user name and password are longer than "
		    "the server takes (%d bytes)\n", cmd, LOGIN_DATA_MAX);
		return NULL;
	}
	hlen = (size_t)snprintf(head, sizeof(head), "set " LOGIN_KEY " 0 0 %zu\r\n",
	    dlen);
	if ((req = malloc(hlen + dlen + 2)) == NULL) {
		fprintf(stderr, "saker %s: out of memory\n", cmd);
		return NULL;
	}
	memcpy(req, head, hlen);
	memcpy(req + hlen, user, ulen);
	req[hlen + ulen] = ' ';
	memcpy(req + hlen + ulen + 1, password, password_len);
	memcpy(req + hlen + dlen, "\r\n", 2);
	*len = hlen + dlen + 2;
	return req;
}

void
client_login_free(char *req, size_t len)
{
	if (req == NULL)
		return;
	/* volatile: a plain memset before free may be optimised away */
	for (volatile char *p = req; len > 0; len--)
		*p++ = 0;
	free(req);
}
