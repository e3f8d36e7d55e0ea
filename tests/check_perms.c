/* check_perms.c -- per-user permissions of --auth-file (queue patterns,
 * read, write, admin) against a real sakerd: the text, meta and binary
 * protocols, stats, reloads, the log, startup errors and pymemcache. */
#include "config.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <check.h>
#include <crypt.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

static char *dir;
static struct tl_server *srv;

/* alice reads jobs*; wo writes jobs1 only; root is admin of everything */
static const char users[] =
    "# test users\n"
    "alice:apw:queues=jobs*,read\n"
    "wo:wpw:queues=jobs1, write\n"
    "root:rpw:admin\n";

static void
setup(void)
{
	dir = tl_mkdtemp();
}

static void
teardown(void)
{
	if (srv != NULL && srv->pid > 0)
		tl_server_kill(srv);
	tl_server_free(srv);
	srv = NULL;
	tl_rmrf(dir);
	free(dir);
}

static char *
write_users(const char *text)
{
	char *path = tl_strdupf("%s/users", dir);
	char *tmp = tl_strdupf("%s/users.tmp", dir);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	ck_assert_int_eq(rename(tmp, path), 0);
	free(tmp);
	return path;
}

static void
start(const char *text, const char *extra)
{
	char *path = write_users(text);

	srv = tl_server_start("memory", "--auth-file", path, extra, NULL);
	free(path);
}

/* A connection logged in as user (memcached's ASCII login). */
#define login(u, p) login_(__FILE__, __LINE__, (u), (p))
static int
login_(const char *file, int line, const char *user, const char *pass)
{
	int fd = tl_connect_(file, line, srv->port);
	char *req = tl_strdupf("set auth 0 0 %zu\r\n%s %s\r\n",
	    strlen(user) + 1 + strlen(pass), user, pass);

	tl_mustsend_(file, line, fd, req, strlen(req));
	tl_ckresp_(file, line, fd, "STORED\r\n", 8);
	free(req);
	return fd;
}

/* Wait up to 3 s for `what` in the server log, n times exactly. */
static void
ck_log_count(const char *what, int n)
{
	int64_t deadline = tl_now_ms() + 3000;
	int seen;

	for (;;) {
		char *log = tl_read_file(srv->log, NULL), *p;

		seen = 0;
		for (p = log; p != NULL && (p = strstr(p, what)) != NULL; p++)
			seen++;
		free(log);
		if (seen >= n || tl_now_ms() > deadline)
			break;
		tl_sleep_ms(10);
	}
	ck_assert_msg(seen == n, "log has \"%s\" %d times, want %d", what, seen, n);
}

#define DENIED "CLIENT_ERROR permission denied\r\n"

/* requeue reads its source and writes its target: each right checked,
 * and refused while the server is read-only; nothing moves then. */
START_TEST(test_requeue_rights)
{
	int root, a, w;

	start(users, NULL);
	root = login("root", "rpw");
	tl_set(root, "jobs1", "one");
	tl_set(root, "other", "o");
	a = login("alice", "apw");
	w = login("wo", "wpw");
	/* alice reads jobs1 but writes nothing; wo writes jobs1 but reads
	 * nothing */
	mustsends(a, "requeue jobs1 jobs2 10\r\nrequeue other jobs1 1\r\n");
	ckresp(a, DENIED DENIED);
	mustsends(w, "requeue jobs1 jobs1 1\r\nrequeue other jobs1 1\r\n");
	ckresp(w, DENIED DENIED);
	mustsends(root, "status readonly\r\n");
	ckresp(root, "END\r\n");
	mustsends(root, "requeue jobs1 jobs2 10\r\n");
	ckresp(root, "SERVER_ERROR server is read-only\r\n");
	mustsends(root, "status up\r\n");
	ckresp(root, "END\r\n");
	tl_ckget(root, "jobs1/peek", "one");	/* nothing moved */
	mustsends(root, "requeue jobs1 jobs2 10\r\n");
	ckresp(root, "1\r\n");
	tl_ckget(root, "jobs2", "one");
	ck_assert_int_eq(tl_stat(root, "permission_denied"), 4);
	close(root);
	close(a);
	close(w);
}
END_TEST

START_TEST(test_text_rights)
{
	int root, a, w;

	start(users, NULL);
	root = login("root", "rpw");
	tl_set(root, "jobs1", "one");
	tl_set(root, "jobs1", "two");
	tl_set(root, "other", "o");

	a = login("alice", "apw");
	tl_ckget(a, "jobs1", "one");
	/* write refused, its data block consumed: the next line is a command */
	mustsends(a, "set jobs1 0 0 1\r\nz\r\nversion\r\n");
	ckresp(a, DENIED "VERSION " PACKAGE_VERSION "\r\n");
	mustsends(a, "add jobs1 0 0 1\r\nz\r\n");
	ckresp(a, DENIED);
	/* noreply: nothing answered, still in step */
	mustsends(a, "set jobs1 0 0 1 noreply\r\nz\r\nversion\r\n");
	ckresp(a, "VERSION " PACKAGE_VERSION "\r\n");
	/* a queue outside its patterns, for reading too; not even created */
	mustsends(a, "get other\r\nget nope\r\ngets nope/t=100\r\nget nope/peek\r\n");
	ckresp(a, DENIED DENIED DENIED DENIED);
	mustsends(a, "delete jobs1\r\nflush jobs1\r\nflush_expired jobs1\r\n");
	ckresp(a, DENIED DENIED DENIED);
	mustsends(a, "monitor other 0\r\nconfirm other 1\r\n");
	ckresp(a, DENIED DENIED);
	/* meta commands */
	mustsends(a, "mg other v\r\nms jobs1 1\r\nz\r\nmd jobs1\r\nmn\r\n");
	ckresp(a, DENIED DENIED DENIED "MN\r\n");
	mustsends(a, "mg jobs1 v\r\n");
	ckresp(a, "VA 3\r\ntwo\r\n");

	/* write-only: sets jobs1, reads nothing, writes nothing else */
	w = login("wo", "wpw");
	mustsends(w, "set jobs1 0 0 3\r\nnew\r\nget jobs1\r\nset jobs2 0 0 1\r\nx\r\n");
	ckresp(w, "STORED\r\n" DENIED DENIED);

	/* nothing changed but what was allowed */
	tl_ckget(root, "other", "o");
	tl_ckget(root, "jobs1", "new");
	tl_ckget(root, "jobs1", NULL);
	mustsends(root, "stats queue nope\r\nstats queue jobs2\r\n");
	ckresp(root, "END\r\nEND\r\n");
	ck_assert_int_eq(tl_stat(root, "permission_denied"), 17);
	close(a);
	close(w);
	close(root);
}
END_TEST

START_TEST(test_multiget_denied)
{
	int root, a;

	start(users, NULL);
	root = login("root", "rpw");
	tl_set(root, "jobs1", "a");
	tl_set(root, "jobs2", "b");
	a = login("alice", "apw");
	/* one denied key refuses the whole get: nothing dequeued or opened */
	mustsends(a, "get jobs1 jobs2 other\r\nget jobs1/open other\r\n");
	ckresp(a, DENIED DENIED);
	mustsends(a, "mg jobs1 v q\r\nmg other v q\r\nmn\r\n");
	ckresp(a, DENIED "MN\r\n");
	tl_ckget(root, "jobs1", "a");
	tl_ckget(root, "jobs2", "b");
	close(a);
	close(root);
}
END_TEST

START_TEST(test_admin_commands)
{
	int root, a;

	start(users, "--enable-shutdown");
	root = login("root", "rpw");
	tl_set(root, "jobs1", "a");
	a = login("alice", "apw");
	mustsends(a, "flush_all\r\nflush_all noreply\r\nshutdown\r\nverbosity 1\r\n"
	    "verbosity 1 noreply\r\nstatus readonly\r\nstatus quiescent\r\nstatus\r\n");
	ckresp(a, DENIED DENIED DENIED DENIED DENIED "UP\r\n");
	ck_assert(tl_server_alive(srv));
	mustsends(root, "status\r\n");
	ckresp(root, "UP\r\n");
	tl_ckget(root, "jobs1", "a");
	tl_set(root, "jobs1", "b");
	/* the admin may */
	mustsends(root, "verbosity 1\r\nstatus readonly\r\nstatus up\r\nflush_all\r\n");
	ckresp(root, "OK\r\nEND\r\nEND\r\nOK\r\n");
	tl_ckget(root, "jobs1", NULL);
	mustsends(root, "shutdown\r\n");
	ck_assert_int_eq(tl_server_wait_exit(srv, 5000), 0);
	close(a);
	close(root);
}
END_TEST

START_TEST(test_stats_filtered)
{
	char *st;
	int root, a;

	start(users, NULL);
	root = login("root", "rpw");
	tl_set(root, "jobs1", "a");
	tl_set(root, "jobs2", "b");
	tl_set(root, "other", "c");
	a = login("alice", "apw");

	st = tl_stats(a);
	ck_assert_int_eq(tl_stat_value(st, "queue_jobs1_items"), 1);
	ck_assert_int_eq(tl_stat_value(st, "queue_jobs2_items"), 1);
	ck_assert_int_eq(tl_stat_value(st, "queue_other_items"), -1);
	ck_assert_int_eq(tl_stat_value(st, "curr_items"), 3);   /* global */
	free(st);
	st = tl_stats(root);
	ck_assert_int_eq(tl_stat_value(st, "queue_other_items"), 1);
	free(st);

	mustsends(a, "stats queues\r\n");
	st = tl_mustreadline(a);
	ck_assert_str_eq(st, "STAT queue_jobs1_items 1");
	free(st);
	for (;;) {
		st = tl_mustreadline(a);
		ck_assert_msg(strstr(st, "other") == NULL, "%s", st);
		if (strcmp(st, "END") == 0)
			break;
		free(st);
	}
	free(st);
	mustsends(a, "stats queue other\r\nstats queues oth\r\n");
	ckresp(a, DENIED "END\r\n");
	mustsends(a, "stats queue jobs2\r\n");
	ckresp(a, "STAT queue_jobs2_items 1\r\n");
	close(a);
	close(root);
}
END_TEST

/* ------------------------------------------------------------ binary */

static void
put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static void
breq(int fd, uint8_t op, const char *key, const void *ext, size_t extlen,
    const void *val, size_t vallen, uint32_t opaque)
{
	size_t keylen = key != NULL ? strlen(key) : 0, body = keylen + extlen + vallen;
	unsigned char *p = calloc(1, 24 + body);

	p[0] = 0x80;
	p[1] = op;
	p[2] = (unsigned char)(keylen >> 8);
	p[3] = (unsigned char)keylen;
	p[4] = (unsigned char)extlen;
	put32(p + 8, (uint32_t)body);
	put32(p + 12, opaque);
	/* memcpy's pointers must not be NULL even for 0 bytes (UBSan) */
	if (extlen > 0)
		memcpy(p + 24, ext, extlen);
	if (keylen > 0)
		memcpy(p + 24 + extlen, key, keylen);
	if (vallen > 0)
		memcpy(p + 24 + extlen + keylen, val, vallen);
	mustsend(fd, p, 24 + body);
	free(p);
}

/* Expect a response: opcode, status, opaque and the value (after key and
 * extras; NULL: any). */
#define bexpect(fd, op, st, opq, val) bexpect_(__FILE__, __LINE__, fd, op, st, opq, val)
static void
bexpect_(const char *file, int line, int fd, uint8_t op, uint16_t status,
    uint32_t opaque, const char *val)
{
	unsigned char h[24];
	uint32_t body, skip;
	char *b;

	if (tl_readn(fd, h, 24, tl_timeout_ms) != 24)
		tl_fail(file, line, "no binary response");
	body = (uint32_t)h[8] << 24 | (uint32_t)h[9] << 16 | (uint32_t)h[10] << 8 | h[11];
	skip = (uint32_t)(h[2] << 8 | h[3]) + h[4];
	b = calloc(1, body + 1);
	if (body > 0 && tl_readn(fd, b, body, tl_timeout_ms) != (ssize_t)body)
		tl_fail(file, line, "short binary body");
	if (h[1] != op || (h[6] << 8 | h[7]) != status ||
	    ((uint32_t)h[12] << 24 | (uint32_t)h[13] << 16 | (uint32_t)h[14] << 8 | h[15]) != opaque)
		tl_fail(file, line, "got opcode %#x status %#x (\"%s\"), want %#x %#x opaque %u",
		    h[1], h[6] << 8 | h[7], b + skip, op, status, opaque);
	if (val != NULL && strcmp(b + skip, val) != 0)
		tl_fail(file, line, "value \"%s\", want \"%s\"", b + skip, val);
	free(b);
}

enum { OP_GET = 0x00, OP_SET = 0x01, OP_DELETE = 0x04, OP_FLUSH = 0x08,
	OP_NOOP = 0x0a, OP_GETK = 0x0c, OP_GETKQ = 0x0d, OP_STAT = 0x10, OP_VERBOSITY = 0x1b,
	OP_SASL_AUTH = 0x21 };

START_TEST(test_binary_denied)
{
	unsigned char ext[8] = { 0 };
	int root, fd;

	start(users, NULL);
	root = login("root", "rpw");
	tl_set(root, "jobs1", "a");
	tl_set(root, "other", "o");
	fd = tl_connect(srv->port);
	breq(fd, OP_SASL_AUTH, "PLAIN", NULL, 0, "\0alice\0apw", 10, 1);
	bexpect(fd, OP_SASL_AUTH, 0, 1, NULL);
	breq(fd, OP_GET, "other", NULL, 0, NULL, 0, 2);
	bexpect(fd, OP_GET, 0x20, 2, "permission denied");
	breq(fd, OP_SET, "jobs1", ext, 8, "zz", 2, 3);
	bexpect(fd, OP_SET, 0x20, 3, "permission denied");
	breq(fd, OP_DELETE, "jobs1", NULL, 0, NULL, 0, 4);
	bexpect(fd, OP_DELETE, 0x20, 4, "permission denied");
	breq(fd, OP_FLUSH, NULL, NULL, 0, NULL, 0, 5);
	bexpect(fd, OP_FLUSH, 0x20, 5, "permission denied");
	put32(ext, 1);
	breq(fd, OP_VERBOSITY, NULL, ext, 4, NULL, 0, 6);
	bexpect(fd, OP_VERBOSITY, 0x20, 6, "permission denied");
	/* a quiet multi-get with one denied key takes nothing */
	breq(fd, OP_GETKQ, "jobs1", NULL, 0, NULL, 0, 7);
	breq(fd, OP_GETKQ, "other", NULL, 0, NULL, 0, 8);
	breq(fd, OP_NOOP, NULL, NULL, 0, NULL, 0, 9);
	bexpect(fd, OP_GETKQ, 0x20, 8, "permission denied");
	bexpect(fd, OP_NOOP, 0, 9, NULL);
	tl_ckget(root, "other", "o");
	/* and what it may read, it reads */
	breq(fd, OP_GETK, "jobs1", NULL, 0, NULL, 0, 10);
	bexpect(fd, OP_GETK, 0, 10, "a");
	/* Stat: the global counters and its own queues' lines only */
	breq(fd, OP_STAT, NULL, NULL, 0, NULL, 0, 11);
	{
		bool jobs = false, total = false;

		for (;;) {
			unsigned char h[24];
			uint32_t body;
			char *b;

			ck_assert_int_eq(tl_readn(fd, h, 24, tl_timeout_ms), 24);
			ck_assert_int_eq(h[1], OP_STAT);
			body = (uint32_t)h[8] << 24 | (uint32_t)h[9] << 16 |
			    (uint32_t)h[10] << 8 | h[11];
			b = calloc(1, body + 1);
			ck_assert(body == 0 || tl_readn(fd, b, body, tl_timeout_ms) == (ssize_t)body);
			if (body == 0) {
				free(b);
				break;
			}
			ck_assert_msg(strstr(b, "other") == NULL, "%s", b);
			jobs |= strncmp(b, "queue_jobs1_items", 17) == 0;
			total |= strncmp(b, "curr_items", 10) == 0;
			free(b);
		}
		ck_assert(jobs && total);
	}
	close(fd);
	close(root);
}
END_TEST

/* ------------------------------------------------------ the auth file */

/* sakerd with this auth file exits 1 and says `want1` and `want2`. */
static void
ck_refused(const char *text, const char *want1, const char *want2)
{
	char *path = write_users(text), *errpath = tl_strdupf("%s/err", dir), *out;
	pid_t pid = fork();
	int st;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 2);
		execl(tl_sakerd_path(), "sakerd", "-p", "0", "-s", "/nonexistent/sock",
		    "--auth-file", path, (char *)NULL);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	out = tl_read_file(errpath, NULL);
	ck_assert_ptr_nonnull(out);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s: status %#x: %s",
	    text, st, out);
	ck_assert_msg(strstr(out, want1) != NULL && strstr(out, want2) != NULL,
	    "%s: stderr \"%s\"", text, out);
	free(out);
	free(errpath);
	free(path);
}

START_TEST(test_bad_lines)
{
	ck_refused("a:pw\nb:pw:queues=jobs*,reed\n", "line 2", "unknown permission \"reed\"");
	ck_refused("a:pw:queues=jo*bs\n", "line 1", "bad queue pattern \"jo*bs\"");
	ck_refused("a:pw:queues=\n", "line 1", "bad queue pattern");
	ck_refused("a:pw:queues=a/b\n", "line 1", "bad queue pattern");
	ck_refused("# x\n\na:pw:read,,write\n", "line 3", "empty permission");
	ck_refused("a:pw:read,\n", "line 1", "empty permission");
	ck_refused("a:pw\nb:x\na:pw2\n", "line 3", "listed twice");
	/* a clear-text password with ':' and no permissions field after it */
	ck_refused("alice:s3cret:with:colons\n", "line 1", "user:pa:ss:");
}
END_TEST

START_TEST(test_line_forms)
{
	char salt[CRYPT_GENSALT_OUTPUT_SIZE], *text;
	struct crypt_data cd;
	int fd;

	/* an empty permissions field: the defaults; ':' in the password; a
	 * crypt(3) hash followed by permissions */
	ck_assert_ptr_nonnull(crypt_gensalt_rn("$6$", 0, NULL, 0, salt, sizeof(salt)));
	memset(&cd, 0, sizeof(cd));
	text = tl_strdupf("bob:pa:ss:\ncarol:pw:admin,read\ndave:%s:queues=d*,queues=x,write\n",
	    crypt_r("dpw", salt, &cd));
	start(text, NULL);
	free(text);
	fd = login("dave", "dpw");
	mustsends(fd, "set d1 0 0 1\r\n1\r\nset x 0 0 1\r\n2\r\nset xy 0 0 1\r\n3\r\nget d1\r\n");
	ckresp(fd, "STORED\r\nSTORED\r\n" DENIED DENIED);
	close(fd);
	fd = login("bob", "pa:ss");
	tl_set(fd, "anything", "x");
	tl_ckget(fd, "anything", "x");
	mustsends(fd, "flush_all\r\n");
	ckresp(fd, DENIED);
	close(fd);
	/* admin with read only: admin commands, but no writes */
	fd = login("carol", "pw");
	mustsends(fd, "set q 0 0 1\r\nx\r\nflush_all\r\nget q\r\n");
	ckresp(fd, DENIED "OK\r\nEND\r\n");
	close(fd);
}
END_TEST

START_TEST(test_reload)
{
	int64_t deadline;
	int a, a2;
	char *path;

	start(users, NULL);
	a = login("alice", "apw");
	mustsends(a, "set jobs1 0 0 1\r\nx\r\n");
	ckresp(a, DENIED);

	/* a bad file: logged, the old users stay */
	path = write_users("alice:apw:queues=jobs*,read,wrte\n");
	kill(srv->pid, SIGHUP);
	ck_log_count("line 1: unknown permission \"wrte\"", 1);
	ck_log_count("keeping the previous users", 1);
	a2 = login("alice", "apw");
	mustsends(a2, "set jobs1 0 0 1\r\nx\r\nget jobs1\r\n");
	ckresp(a2, DENIED "END\r\n");
	close(a2);

	/* new rights reach the connections already logged in */
	free(path);
	path = write_users("alice:apw:queues=jobs*,read,write\n");
	kill(srv->pid, SIGHUP);
	for (deadline = tl_now_ms() + 3000; ; ) {
		char *l;

		mustsends(a, "set jobs1 0 0 1\r\nx\r\n");
		l = tl_mustreadline(a);
		if (strcmp(l, "STORED") == 0) {
			free(l);
			break;
		}
		ck_assert_str_eq(l, "CLIENT_ERROR permission denied");
		free(l);
		ck_assert_msg(tl_now_ms() < deadline, "the reload gave no write right");
		tl_sleep_ms(20);
	}

	/* a user removed from the file may do nothing more */
	free(path);
	path = write_users("root:rpw:admin\n");
	kill(srv->pid, SIGHUP);
	ck_log_count("may do nothing more", 1);
	mustsends(a, "get jobs1\r\nstats queue jobs1\r\nversion\r\n");
	ckresp(a, DENIED DENIED "VERSION " PACKAGE_VERSION "\r\n");
	free(path);
	close(a);
}
END_TEST

START_TEST(test_reload_waiting)
{
	char *path;
	int a, root;

	start(users, NULL);
	a = login("alice", "apw");
	root = login("root", "rpw");
	mustsends(a, "get jobs1/t=10000\r\n");
	tl_wait_stat(root, "queue_jobs1_waiters", 1, 3000);
	/* alice loses jobs* while she waits: the item that arrives is not hers */
	path = write_users("alice:apw:queues=mail,read\nroot:rpw:admin\n");
	kill(srv->pid, SIGHUP);
	ck_log_count("users have a clear-text password", 2);  /* start, reload */
	tl_set(root, "jobs1", "secret");
	ckresp(a, DENIED);
	tl_ckget(root, "jobs1", "secret");
	free(path);
	close(a);
	close(root);
}
END_TEST

START_TEST(test_log_rate_limited)
{
	char req[64 * 16], *addr, *line;
	size_t i;
	int a;

	start(users, NULL);
	a = login("alice", "apw");
	req[0] = '\0';
	for (i = 0; i < 64; i++)
		strcat(req, "get other\r\n");
	mustsends(a, req);
	for (i = 0; i < 64; i++)
		ckresp(a, DENIED);
	addr = tl_local_addr(a);
	line = tl_strdupf("permission denied: user alice from %s: get other",
	    addr);
	ck_log_count(line, 1);
	free(line);
	/* a second later one more line, counting those not logged */
	tl_sleep_ms(1100);
	mustsends(a, "set jobs1 0 0 1\r\nx\r\n");
	ckresp(a, DENIED);
	line = tl_strdupf("permission denied: user alice from %s: set jobs1 "
	    "(and 63 more not logged)", addr);
	ck_log_count(line, 1);
	free(line);
	free(addr);
	close(a);
	a = login("root", "rpw");
	ck_assert_int_eq(tl_stat(a, "permission_denied"), 65);
	close(a);
}
END_TEST

/* -------------------------------------------------------------- HTTP */

static int http_port;

static void
start_http(const char *text, const char *extra)
{
	char *path = write_users(text), *port;
	int64_t deadline;
	int fd;

	http_port = tl_free_port();
	port = tl_strdupf("127.0.0.1:%d", http_port);
	srv = tl_server_start("memory", "--auth-file", path, "--http", port, extra, NULL);
	deadline = tl_now_ms() + 10000;
	/* the memcache port may accept before --http is bound */
	while ((fd = tl_try_connect(http_port)) < 0) {
		ck_assert_msg(tl_now_ms() < deadline, "--http %s never listened", port);
		tl_sleep_ms(20);
	}
	close(fd);
	free(port);
	free(path);
}

/* GET path with these credentials ("user:pass", or NULL for none); the
 * whole response, malloc'd. */
#define http_get(path, cred) tl_http(http_port, "GET", (path), (cred), NULL)
#define http_status(resp) tl_http_status(resp)

START_TEST(test_metrics_auth)
{
	char *r;
	int fd;

	start_http(users, NULL);
	fd = login("root", "rpw");
	tl_set(fd, "jobs1", "a");
	close(fd);

	r = http_get("/metrics", NULL);
	ck_assert_int_eq(http_status(r), 401);
	ck_assert_msg(strstr(r, "\r\nWWW-Authenticate: Basic realm=\"saker\"\r\n") != NULL, "%s", r);
	ck_assert_msg(strstr(r, "jobs1") == NULL, "%s", r);
	free(r);
	r = http_get("/metrics", "root:rpw");
	ck_assert_int_eq(http_status(r), 200);
	ck_assert_msg(strstr(r, "saker_queue_items{queue=\"jobs1\"} 1\n") != NULL, "%s", r);
	free(r);
	/* a good login without admin, a wrong password, a malformed header */
	r = http_get("/metrics", "alice:apw");
	ck_assert_int_eq(http_status(r), 401);
	ck_assert_msg(strstr(r, "jobs1") == NULL, "%s", r);
	free(r);
	ck_log_count("/metrics: user alice from 127.0.0.1 is not an admin", 1);
	r = http_get("/metrics", "root:wrong");
	ck_assert_int_eq(http_status(r), 401);
	free(r);
	ck_log_count("HTTP authentication failed from 127.0.0.1", 1);
	r = http_get("/metrics", "rootrpw");
	ck_assert_int_eq(http_status(r), 401);
	free(r);
	/* /healthz stays open */
	r = http_get("/healthz", NULL);
	ck_assert_int_eq(http_status(r), 200);
	ck_assert_msg(strstr(r, "\r\n\r\nok\n") != NULL, "%s", r);
	free(r);
}
END_TEST

START_TEST(test_metrics_throttled)
{
	char *r;
	int i;

	start_http(users, NULL);
	/* 3 failures are free; then the address owes 250 ms, during which
	 * even the right password is not checked (login.h) */
	for (i = 0; i < 3; i++) {
		r = http_get("/metrics", "root:guess");
		ck_assert_int_eq(http_status(r), 401);
		free(r);
	}
	r = http_get("/metrics", "root:rpw");
	ck_assert_int_eq(http_status(r), 429);
	ck_assert_msg(strstr(r, "\r\nRetry-After: 1\r\n") != NULL, "%s", r);
	free(r);
	tl_sleep_ms(300);
	r = http_get("/metrics", "root:rpw");
	ck_assert_int_eq(http_status(r), 200);
	free(r);
}
END_TEST

START_TEST(test_metrics_public)
{
	char *r;

	start_http(users, "--http-public");
	r = http_get("/metrics", NULL);
	ck_assert_int_eq(http_status(r), 200);
	ck_assert_msg(strstr(r, "saker_connections ") != NULL, "%s", r);
	free(r);
}
END_TEST

/* ---------------------------------------------------------- pymemcache */

static int
sh(const char *cmd, char **outp)
{
	char *out = tl_strdupf("%s/sh.out", dir);
	pid_t pid = fork();
	int st;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd < 0 || chdir(dir) != 0)
			_exit(126);
		dup2(fd, 1);
		dup2(fd, 2);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	*outp = tl_read_file(out, NULL);
	if (*outp == NULL)
		*outp = strdup("");
	free(out);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

START_TEST(test_pymemcache)
{
	char *out, *cmd;
	int root;

	if (sh("/usr/bin/python3 -c 'import pymemcache'", &out) != 0) {
		free(out);
		ck_assert_msg(getenv("CI") == NULL || strcmp(getenv("CI"), "true") != 0,
		    "pymemcache (python3-pymemcache) is not installed");
		printf("SKIP pymemcache: not installed\n");
		return;
	}
	free(out);
	start(users, NULL);
	root = login("root", "rpw");
	tl_set(root, "jobs1", "one");
	tl_set(root, "jobs1", "two");
	tl_set(root, "other", "o");
	cmd = tl_strdupf("/usr/bin/python3 - %d <<'EOF'\n"
	    "import sys\n"
	    "from pymemcache.client.base import Client\n"
	    "from pymemcache.exceptions import MemcacheClientError\n"
	    "c = Client(('127.0.0.1', int(sys.argv[1])), timeout=5)\n"
	    /* memcached's ASCII login is a set of 'user password' */
	    "def login():\n"
	    "    assert c.set('auth', b'alice apw', noreply=False)\n"
	    "login()\n"
	    /* pymemcache's default noreply set: refused without a word, and the
	     * same connection (no new login) goes on */
	    "c.set('jobs1', b'x')\n"
	    "assert c.get('jobs1') == b'one'\n"
	    /* refusals are clean client errors; pymemcache drops the connection
	     * after any error, so each time it logs in again */
	    "for f in (lambda: c.set('jobs1', b'x', noreply=False),\n"
	    "          lambda: c.get('other'),\n"
	    "          lambda: c.get_many(['jobs1', 'other'])):\n"
	    "    try:\n"
	    "        f()\n"
	    "        raise SystemExit('not refused')\n"
	    "    except MemcacheClientError as e:\n"
	    "        assert e.args[0] == b'permission denied', e\n"
	    "    login()\n"
	    "assert c.get('jobs1') == b'two'\n"
	    "assert c.get('jobs1') is None\n"
	    "print('ok')\n"
	    "EOF\n", srv->port);
	ck_assert_msg(sh(cmd, &out) == 0 && strcmp(out, "ok\n") == 0, "%s", out);
	free(out);
	free(cmd);
	tl_ckget(root, "other", "o");
	close(root);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("perms");
	TCase *tc = tcase_create("perms");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_text_rights);
	tcase_add_test(tc, test_multiget_denied);
	tcase_add_test(tc, test_admin_commands);
	tcase_add_test(tc, test_stats_filtered);
	tcase_add_test(tc, test_binary_denied);
	tcase_add_test(tc, test_bad_lines);
	tcase_add_test(tc, test_line_forms);
	tcase_add_test(tc, test_reload);
	tcase_add_test(tc, test_reload_waiting);
	tcase_add_test(tc, test_log_rate_limited);
	tcase_add_test(tc, test_metrics_auth);
	tcase_add_test(tc, test_metrics_throttled);
	tcase_add_test(tc, test_metrics_public);
	tcase_add_test(tc, test_pymemcache);
	tcase_add_test(tc, test_requeue_rights);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
