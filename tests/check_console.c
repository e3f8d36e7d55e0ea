/* check_console.c -- the web console's JSON API and page over a real
 * sakerd (docs/console.md): shapes, escaping of hostile names and data,
 * security headers, CSRF, the admin login, peek, requeue, flush and
 * delete. */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

static char *dir;
static struct tl_server *srv;
static int http_port;

/* Every byte a queue name may hold that HTML or JSON treat specially. */
#define HOSTILE_Q "<img_src=x_onerror=alert(1)>\"\\&'%"
/* ... and the same as JSON (console_json_str's escapes). */
#define HOSTILE_Q_JSON "\\u003cimg_src=x_onerror=alert(1)\\u003e\\\"\\\\\\u0026'%"
/* ... percent-encoded for a URL path */
#define HOSTILE_Q_URL "%3Cimg_src%3Dx_onerror%3Dalert(1)%3E%22%5C%26'%25"
#define HOSTILE_DATA "<script>alert(\"x\")</script>\\"
#define HOSTILE_DATA_JSON "\\u003cscript\\u003ealert(\\\"x\\\")\\u003c/script\\u003e\\\\"

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

/* sakerd with --http on addr (NULL: 127.0.0.1) and the extra arguments
 * (up to four, NULL-terminated). */
static void
start4(const char *addr, const char *a1, const char *a2, const char *a3,
    const char *a4)
{
	char *port;
	int64_t deadline;
	int fd;

	http_port = tl_free_port();
	port = tl_strdupf("%s:%d", addr != NULL ? addr : "127.0.0.1", http_port);
	srv = tl_server_start("memory", "--http", port, a1, a2, a3, a4, NULL);
	deadline = tl_now_ms() + 10000;
	while ((fd = tl_try_connect(http_port)) < 0) {
		ck_assert_msg(tl_now_ms() < deadline, "--http %s never listened", port);
		tl_sleep_ms(20);
	}
	close(fd);
	free(port);
}

static void
start(const char *addr, const char *a1, const char *a2)
{
	start4(addr, a1, a2, NULL, NULL);
}

/* METHOD path with credentials ("user:pass" or NULL) and a CSRF token (or
 * NULL); the whole response, malloc'd. */
static char *
http_req(const char *method, const char *path, const char *cred, const char *token)
{
	char *tok = token != NULL ? tl_strdupf("X-CSRF-Token: %s\r\n", token) : NULL;
	char *resp = tl_http(http_port, method, path, cred, tok);

	free(tok);
	return resp;
}

#define get(path) http_req("GET", (path), NULL, NULL)

#define status(resp) tl_http_status(resp)

static const char *
body(const char *resp)
{
	const char *b = strstr(resp, "\r\n\r\n");

	ck_assert_msg(b != NULL, "no body in \"%s\"", resp);
	return b + 4;
}

#define ck_has(resp, s) ck_assert_msg(strstr((resp), (s)) != NULL, \
	"\"%s\" not in:\n%s", (s), (resp))
#define ck_hasnt(resp, s) ck_assert_msg(strstr((resp), (s)) == NULL, \
	"\"%s\" in:\n%s", (s), (resp))

/* One request whose status, or one string in whose reply, is all a check
 * needs; macros, so a failure names the caller's line. */
#define ck_status(want, req) do {					\
	char *r_ = (req);						\
	ck_assert_int_eq(tl_http_status(r_), (want));			\
	free(r_);							\
} while (0)
#define ck_reply_has(req, s) do {					\
	char *r_ = (req);						\
	ck_has(r_, (s));						\
	free(r_);							\
} while (0)

/* The CSRF token of GET /api/server, malloc'd. */
static char *
csrf_token(const char *cred)
{
	char *r = http_req("GET", "/api/server", cred, NULL), *t;
	const char *p;

	ck_assert_int_eq(status(r), 200);
	p = strstr(r, "\"csrf_token\":\"");
	ck_assert_msg(p != NULL, "%s", r);
	p += 14;
	t = strndup(p, strcspn(p, "\""));
	ck_assert_uint_eq(strlen(t), 32);
	free(r);
	return t;
}

/* The number after "key": in the object of queue name (as JSON) in a
 * /api/queues body; -1 when the queue is not there. */
static long long
queue_field(const char *resp, const char *json_name, const char *key)
{
	char *needle = tl_strdupf("{\"name\":\"%s\",", json_name);
	char *k = tl_strdupf("\"%s\":", key);
	const char *p = strstr(resp, needle), *end;
	long long v = -1;

	if (p != NULL) {
		end = strchr(p, '}');
		p = strstr(p, k);
		ck_assert_msg(p != NULL && p < end, "%s has no %s: %s", json_name, key, resp);
		v = atoll(p + strlen(k));
	}
	free(needle);
	free(k);
	return v;
}

START_TEST(test_queues_json)
{
	char *r;
	int fd;

	start(NULL, NULL, NULL);
	fd = tl_connect(srv->port);
	tl_set(fd, HOSTILE_Q, HOSTILE_DATA);
	tl_set(fd, HOSTILE_Q, "two");
	tl_set(fd, "plain", "x");
	r = get("/api/queues");
	ck_assert_int_eq(status(r), 200);
	ck_has(r, "\r\nContent-Type: application/json\r\n");
	ck_has(r, "{\"total\":2,\"offset\":0,\"limit\":100,");
	ck_has(r, "\"totals\":{\"items\":3,");
	ck_assert_int_eq(queue_field(r, HOSTILE_Q_JSON, "items"), 2);
	ck_assert_int_eq(queue_field(r, HOSTILE_Q_JSON, "bytes"),
	    (long long)strlen(HOSTILE_DATA) + 3);
	ck_assert_int_eq(queue_field(r, "plain", "items"), 1);
	ck_assert_int_ge(queue_field(r, "plain", "age_ms"), 0);
	ck_assert_int_eq(queue_field(r, "plain", "dead_lettered"), 0);
	ck_has(r, "\"enqueue_rate\":");
	ck_has(r, "\"dequeue_rate\":");
	/* nothing of the name reaches the body unescaped */
	ck_hasnt(body(r), "<");
	ck_hasnt(body(r), ">");
	ck_hasnt(body(r), "&");
	free(r);

	/* the count follows a set */
	tl_set(fd, "plain", "y");
	r = get("/api/queues?prefix=pl");
	ck_assert_int_eq(queue_field(r, "plain", "items"), 2);
	ck_assert_int_eq(queue_field(r, HOSTILE_Q_JSON, "items"), -1);
	ck_has(r, "{\"total\":1,");
	free(r);
	close(fd);
}
END_TEST

START_TEST(test_queues_pages)
{
	char *r, name[16];
	int fd, i;

	start(NULL, NULL, NULL);
	fd = tl_connect(srv->port);
	for (i = 0; i < 5; i++) {
		int j;

		snprintf(name, sizeof(name), "q%d", i);
		for (j = 0; j <= i; j++)
			tl_set(fd, name, "x");
	}
	r = get("/api/queues?offset=1&limit=2");
	ck_has(r, "{\"total\":5,\"offset\":1,\"limit\":2,");
	ck_assert_int_eq(queue_field(r, "q0", "items"), -1);
	ck_assert_int_eq(queue_field(r, "q1", "items"), 2);
	ck_assert_int_eq(queue_field(r, "q2", "items"), 3);
	ck_assert_int_eq(queue_field(r, "q3", "items"), -1);
	free(r);
	/* by items, most first */
	r = get("/api/queues?sort=-items&limit=1");
	ck_assert_int_eq(queue_field(r, "q4", "items"), 5);
	ck_assert_int_eq(queue_field(r, "q3", "items"), -1);
	free(r);
	r = get("/api/queues?sort=items&limit=1");
	ck_assert_int_eq(queue_field(r, "q0", "items"), 1);
	free(r);
	/* past the end: an empty page */
	ck_reply_has(get("/api/queues?offset=99"), "\"queues\":[]}");
	/* bounded */
	ck_status(400, get("/api/queues?limit=1001"));
	ck_status(400, get("/api/queues?offset=99999999999999999999999"));
	ck_status(400, get("/api/queues?sort=pid"));
	close(fd);
}
END_TEST

/* A queue's retrying items (issue 37): delayed items that were handed
 * out before, given back with a delay; a plain delayed set is not one. */
START_TEST(test_retrying)
{
	char *r;
	int fd;

	start(NULL, NULL, NULL);
	fd = tl_connect(srv->port);
	tl_set(fd, "rq", "failing job");
	mustsends(fd, "set rq/delay=60000 0 0 5\r\nlater\r\n");
	ckresp(fd, "STORED\r\n");
	tl_set(fd, "rq", "good job");
	mustsends(fd, "get rq/open\r\n");
	ckresp(fd, "VALUE rq/open 0 11\r\nfailing job\r\nEND\r\n");
	mustsends(fd, "get rq/abort/delay=60000\r\n");
	ckresp(fd, "END\r\n");
	r = get("/api/queues/rq/peek?n=10&retrying=1");
	ck_assert_int_eq(status(r), 200);
	ck_has(r, "\"state\":\"delayed\"");
	ck_has(r, "\"deliveries\":1,\"size\":11,\"due_ms\":");
	ck_has(r, "\"preview\":\"failing job\"");
	ck_hasnt(r, "later");
	ck_hasnt(r, "good job");
	free(r);
	r = get("/api/queues?prefix=rq");
	ck_has(r, "\"retries\":1");
	ck_has(r, "\"dedup_ids\":0,\"dedup_hits\":0");
	free(r);
	/* deduplication ids and duplicates answered (issue 44) */
	mustsends(fd, "set dq/id=a 0 0 1\r\nx\r\nset dq/id=a 0 0 1\r\nx\r\n"
	    "set dq/id=b 0 0 1\r\nx\r\n");
	ckresp(fd, "STORED\r\nSTORED\r\nSTORED\r\n");
	r = get("/api/queues?prefix=dq");
	ck_has(r, "\"items\":2,");
	ck_has(r, "\"dedup_ids\":2,\"dedup_hits\":1");
	free(r);
	ck_status(400, get("/api/queues/rq/peek?retrying=2"));
	/* the page has the table */
	r = get("/");
	ck_has(r, "<table id=\"retrying\">");
	free(r);
	close(fd);
}
END_TEST

START_TEST(test_peek_does_not_take)
{
	char *r, *v;
	int fd;

	start(NULL, NULL, NULL);
	fd = tl_connect(srv->port);
	tl_setn(fd, HOSTILE_Q, 42, 0, HOSTILE_DATA, strlen(HOSTILE_DATA));
	tl_setn(fd, HOSTILE_Q, 0, 0, "\x01\x02\xff", 3);
	r = get("/api/queues/" HOSTILE_Q_URL "/peek?n=5");
	ck_assert_int_eq(status(r), 200);
	ck_has(r, "{\"name\":\"" HOSTILE_Q_JSON "\",\"items\":[");
	ck_has(r, "\"state\":\"ready\"");
	v = tl_strdupf("\"flags\":42,\"deliveries\":0,\"size\":%zu,",
	    strlen(HOSTILE_DATA));
	ck_has(r, v);
	free(v);
	ck_has(r, "\"encoding\":\"text\",\"preview\":\"" HOSTILE_DATA_JSON "\","
	    "\"truncated\":false}");
	ck_has(r, "\"encoding\":\"hex\",\"preview\":\"0102ff\"");
	ck_hasnt(body(r), "<");
	free(r);
	/* n bounds the answer */
	r = get("/api/queues/" HOSTILE_Q_URL "/peek?n=1");
	ck_hasnt(r, "0102ff");
	free(r);
	/* still there, in order */
	tl_ckget(fd, HOSTILE_Q, HOSTILE_DATA);
	v = tl_get(fd, HOSTILE_Q);
	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(memcmp(v, "\x01\x02\xff", 3), 0);
	free(v);
	close(fd);

	/* names are checked as the protocol does */
	ck_status(400, get("/api/queues/a%2Fb/peek"));
	ck_status(400, get("/api/queues/.x/peek"));
	ck_status(400, get("/api/queues/a%00b/peek"));
	ck_status(404, get("/api/queues/nosuch/peek"));
	ck_status(400, get("/api/queues/" HOSTILE_Q_URL "/peek?n=101"));
}
END_TEST

START_TEST(test_headers)
{
	static const char *const paths[] = { "/", "/console.js", "/console.css",
	    "/api/server", "/api/queues", NULL };
	static const char *const files[] = { "/index.html", "/console.js",
	    "/console.css", NULL };
	const char *srcdir = getenv("SAKER_SRCDIR");
	char *r;
	int i;

	start(NULL, NULL, NULL);
	for (i = 0; paths[i] != NULL; i++) {
		r = get(paths[i]);
		ck_assert_int_eq(status(r), 200);
		ck_has(r, "\r\nContent-Security-Policy: default-src 'self'; ");
		ck_has(r, "\r\nX-Content-Type-Options: nosniff\r\n");
		free(r);
	}
	r = get("/");
	ck_has(r, "\r\nContent-Type: text/html; charset=utf-8\r\n");
	ck_has(r, "<script src=\"/console.js\"");
	free(r);
	r = get("/console.js");
	ck_has(r, "\r\nContent-Type: text/javascript; charset=utf-8\r\n");
	free(r);
	/* what is served is the file in src/daemon/console/ (the build
	 * embeds it anew when it changes) */
	for (i = 0; files[i] != NULL; i++) {
		char *path = tl_strdupf("%s/src/daemon/console/%s",
		    srcdir != NULL ? srcdir : ".", files[i] + 1);
		char *want = tl_read_file(path, NULL);

		ck_assert_msg(want != NULL, "cannot read %s", path);
		r = get(files[i]);
		ck_assert_str_eq(body(r), want);
		free(r);
		free(want);
		free(path);
	}
	r = get("/api/server");
	ck_has(r, "\"version\":\"" PACKAGE_VERSION "\",\"store\":\"memory\","
	    "\"sync\":\"always\",");
	ck_has(r, "\"uptime\":");
	ck_has(r, "\"commit_mean_ms\":");
	ck_has(r, "\"writes_allowed\":true,\"login_required\":false,");
	free(r);
	ck_status(404, get("/api/nothing"));
	/* /metrics and /healthz as before */
	ck_status(200, get("/healthz"));
}
END_TEST

START_TEST(test_csrf)
{
	char *r, *t;
	int fd;

	start(NULL, NULL, NULL);
	fd = tl_connect(srv->port);
	tl_set(fd, "jobs", "a");
	t = csrf_token(NULL);
	ck_status(403, http_req("POST", "/api/queues/jobs/flush", NULL, NULL));
	ck_status(403, http_req("POST", "/api/queues/jobs/flush", NULL,
	    "00000000000000000000000000000000"));
	ck_status(405, get("/api/queues/jobs/flush"));
	ck_assert_int_eq(tl_stat(fd, "curr_items"), 1);
	r = http_req("POST", "/api/queues/jobs/flush", NULL, t);
	ck_assert_int_eq(status(r), 200);
	ck_has(r, "{\"flushed\":true}");
	free(r);
	ck_assert_int_eq(tl_stat(fd, "curr_items"), 0);
	free(t);
	close(fd);
}
END_TEST

START_TEST(test_requeue)
{
	char *r, *t;
	int fd, i;

	start(NULL, NULL, NULL);
	fd = tl_connect(srv->port);
	/* jobs exists (empty); its dead-letter queue jobs_dead has 5 */
	tl_set(fd, "jobs", "a");
	tl_ckget(fd, "jobs", "a");
	for (i = 0; i < 5; i++) {
		char d[8];

		snprintf(d, sizeof(d), "d%d", i);
		tl_set(fd, "jobs_dead", d);
	}
	t = csrf_token(NULL);
	r = http_req("POST", "/api/queues/jobs_dead/requeue?n=2", NULL, t);
	ck_assert_int_eq(status(r), 200);
	ck_has(r, "{\"moved\":2,\"to\":\"jobs\",\"all\":false}");
	free(r);
	r = get("/api/queues");
	ck_assert_int_eq(queue_field(r, "jobs", "items"), 2);
	ck_assert_int_eq(queue_field(r, "jobs_dead", "items"), 3);
	free(r);
	/* the rest; the oldest first */
	ck_reply_has(http_req("POST", "/api/queues/jobs_dead/requeue", NULL, t), "{\"moved\":3,\"to\":\"jobs\",\"all\":true}");
	for (i = 0; i < 5; i++) {
		char d[8];

		snprintf(d, sizeof(d), "d%d", i);
		tl_ckget(fd, "jobs", d);
	}
	/* elsewhere with ?to= */
	tl_set(fd, "jobs_dead", "z");
	ck_reply_has(http_req("POST", "/api/queues/jobs_dead/requeue?to=other", NULL, t), "{\"moved\":1,\"to\":\"other\",\"all\":true}");
	tl_ckget(fd, "other", "z");
	/* not a dead-letter queue of anything, no ?to= */
	tl_set(fd, "lonely", "z");
	ck_status(400, http_req("POST", "/api/queues/lonely/requeue", NULL, t));
	ck_status(400, http_req("POST", "/api/queues/lonely/requeue?to=a/b", NULL, t));
	ck_status(400, http_req("POST", "/api/queues/lonely/requeue?to=lonely", NULL, t));
	tl_ckget(fd, "lonely", "z");
	free(t);
	close(fd);
}
END_TEST

START_TEST(test_delete)
{
	char *r, *t;
	int fd;

	start(NULL, NULL, NULL);
	fd = tl_connect(srv->port);
	tl_set(fd, "jobs_dead", "a");
	tl_set(fd, "keep", "b");
	t = csrf_token(NULL);
	ck_status(403, http_req("POST", "/api/queues/jobs_dead/delete", NULL, NULL));
	r = http_req("POST", "/api/queues/jobs_dead/delete", NULL, t);
	ck_assert_int_eq(status(r), 200);
	ck_has(r, "{\"deleted\":true}");
	free(r);
	r = get("/api/queues");
	ck_assert_int_eq(queue_field(r, "jobs_dead", "items"), -1);
	ck_assert_int_eq(queue_field(r, "keep", "items"), 1);
	ck_has(r, "{\"total\":1,");
	free(r);
	ck_status(404, http_req("POST", "/api/queues/jobs_dead/delete", NULL, t));
	ck_status(404, get("/api/queues/jobs_dead/peek"));
	free(t);
	close(fd);
}
END_TEST

/* Rates: items per second between two looks at least 0.5 s apart.  A
 * deleted queue's go with it, so the same name made again starts from 0
 * rather than counting the old queue's sets; a get waiting on it keeps
 * the broker's entry alive across the delete, so this is the delete's
 * doing, not the entry being freed. */
START_TEST(test_rates_fresh_after_delete)
{
	char *r, *t;
	int fd, fd2, i;
	int64_t deadline;

	start(NULL, NULL, NULL);
	fd = tl_connect(srv->port);
	fd2 = tl_connect(srv->port);
	tl_set(fd, "r", "x");
	r = get("/api/queues");
	ck_assert_int_eq(queue_field(r, "r", "enqueue_rate"), 0);
	free(r);
	for (i = 0; i < 30; i++)
		tl_set(fd, "r", "x");
	tl_sleep_ms(600);
	r = get("/api/queues");
	ck_assert_int_ge(queue_field(r, "r", "enqueue_rate"), 1);
	free(r);
	t = csrf_token(NULL);
	ck_status(200, http_req("POST", "/api/queues/r/flush", NULL, t));
	mustsends(fd2, "get r/t=20000\r\n");
	deadline = tl_now_ms() + tl_slow(5000);
	while (r = get("/api/queues"), queue_field(r, "r", "waiters") != 1) {
		ck_assert_msg(tl_now_ms() < deadline, "no waiter: %s", r);
		free(r);
		tl_sleep_ms(20);
	}
	free(r);
	ck_status(200, http_req("POST", "/api/queues/r/delete", NULL, t));
	for (i = 0; i < 31; i++)
		tl_set(fd, "r", "x");
	ckresp(fd2, "VALUE r/t=20000 0 1\r\nx\r\nEND\r\n");
	tl_sleep_ms(600);
	r = get("/api/queues");
	ck_assert_int_eq(queue_field(r, "r", "items"), 30);
	ck_assert_int_eq(queue_field(r, "r", "enqueue_rate"), 0);
	free(r);
	free(t);
	close(fd2);
	close(fd);
}
END_TEST

/* No login and not on loopback: the console only looks. */
START_TEST(test_public_read_only)
{
	char *t;

	start("0.0.0.0", NULL, NULL);
	t = csrf_token(NULL);
	ck_reply_has(get("/api/server"), "\"writes_allowed\":false,");
	ck_status(403, http_req("POST", "/api/queues/jobs/flush", NULL, t));
	free(t);
}
END_TEST

static char *
write_users(const char *text)
{
	char *path = tl_strdupf("%s/users", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

START_TEST(test_admin_login)
{
	char *path = write_users("alice:apw:queues=jobs*,read,write\nroot:rpw:admin\n");
	char *r, *t;
	int fd;

	start("0.0.0.0", "--auth-file", path);
	fd = tl_connect(srv->port);
	mustsends(fd, "set auth 0 0 8\r\nroot rpw\r\n");
	ckresp(fd, "STORED\r\n");
	tl_set(fd, "jobs", "a");
	r = get("/api/queues");
	ck_assert_int_eq(status(r), 401);
	ck_hasnt(r, "jobs");
	free(r);
	ck_status(401, http_req("GET", "/", "alice:apw", NULL));
	r = http_req("GET", "/api/queues/jobs/peek", "alice:apw", NULL);
	ck_assert_int_eq(status(r), 401);
	ck_hasnt(r, "\"preview\"");
	free(r);
	r = http_req("GET", "/api/queues", "root:rpw", NULL);
	ck_assert_int_eq(status(r), 200);
	ck_assert_int_eq(queue_field(r, "jobs", "items"), 1);
	free(r);
	t = csrf_token("root:rpw");
	ck_status(401, http_req("POST", "/api/queues/jobs/flush", "alice:apw", t));
	ck_assert_int_eq(tl_stat(fd, "curr_items"), 1);
	/* an admin login may change things from anywhere */
	ck_status(200, http_req("POST", "/api/queues/jobs/flush", "root:rpw", t));
	ck_assert_int_eq(tl_stat(fd, "curr_items"), 0);
	ck_status(200, get("/healthz"));
	free(t);
	free(path);
	close(fd);
}
END_TEST

/* The "depth" array of a history body: how many samples, the last one,
 * and the largest; false when there is none. */
static bool
depth_of(const char *resp, int *n, long long *last, long long *max)
{
	const char *p = strstr(resp, "\"depth\":[");

	*n = 0;
	*last = *max = -1;
	if (p == NULL)
		return false;
	p += 9;
	while (*p != ']' && *p != '\0') {
		char *end;
		long long v = strtoll(p, &end, 10);

		ck_assert_msg(end != p, "bad depth array: %s", resp);
		(*n)++;
		*last = v;
		if (v > *max)
			*max = v;
		p = *end == ',' ? end + 1 : end;
	}
	return *p == ']';
}

/* Poll path until its depth array ends with want (within a few seconds). */
static char *
wait_last(const char *path, long long want)
{
	int64_t deadline = tl_now_ms() + tl_slow(5000);
	long long last, max;
	int n;
	char *r;

	for (;;) {
		r = get(path);
		ck_assert_int_eq(status(r), 200);
		if (depth_of(r, &n, &last, &max) && n > 0 && last == want)
			return r;
		ck_assert_msg(tl_now_ms() < deadline, "last sample never %lld: %s",
		    want, r);
		free(r);
		tl_sleep_ms(10);
	}
}

#define HIST_PATH "/api/queues/" HOSTILE_Q_URL "/history"
#define HISTORY_NONE "\"history_queues\":0,"

/* Poll /api/server until it holds s. */
static void
wait_server(const char *s)
{
	int64_t deadline = tl_now_ms() + tl_slow(5000);
	char *r;

	while (r = get("/api/server"), strstr(r, s) == NULL) {
		ck_assert_msg(tl_now_ms() < deadline, "never %s: %s", s, r);
		free(r);
		tl_sleep_ms(10);
	}
	free(r);
}

/* Depth over time: sampled by a timer (here every 20 ms), at most 60
 * samples a queue, gone with the queue. */
START_TEST(test_history)
{
	char *r, *t;
	long long last, max;
	int64_t deadline;
	int fd, n;

	start(NULL, "--http-history", "0.02");
	fd = tl_connect(srv->port);
	tl_set(fd, HOSTILE_Q, "a");
	tl_set(fd, HOSTILE_Q, "b");
	tl_set(fd, HOSTILE_Q, "c");
	r = wait_last(HIST_PATH, 3);
	ck_has(r, "\r\nContent-Type: application/json\r\n");
	ck_has(r, "{\"name\":\"" HOSTILE_Q_JSON "\",\"interval_ms\":20,"
	    "\"samples\":60,");
	ck_has(r, "\"last_ms\":");
	ck_hasnt(body(r), "<");
	free(r);
	/* after 60 sweeps: 60 samples, and no more after further ones */
	deadline = tl_now_ms() + tl_slow(10000);
	while (r = get(HIST_PATH), depth_of(r, &n, &last, &max) && n < 60) {
		ck_assert_msg(tl_now_ms() < deadline, "never 60 samples: %s", r);
		free(r);
		tl_sleep_ms(20);
	}
	free(r);
	tl_sleep_ms(200);
	r = get(HIST_PATH);
	ck_assert(depth_of(r, &n, &last, &max));
	ck_assert_int_eq(n, 60);
	ck_assert_int_eq(last, 3);
	ck_assert_int_eq(max, 3);
	free(r);
	/* it follows a get */
	tl_ckget(fd, HOSTILE_Q, "a");
	free(wait_last(HIST_PATH, 2));
	/* in the overview only when asked for */
	r = get("/api/queues");
	ck_hasnt(r, "\"depth\":");
	free(r);
	r = get("/api/queues?history=1");
	ck_has(r, "\"depth\":[");
	ck_assert(depth_of(r, &n, &last, &max));
	ck_assert_int_eq(n, 60);
	free(r);
	ck_reply_has(get("/api/server"), "\"history_interval_ms\":20,\"history_samples\":60,"
	    "\"history_queues\":1,");

	/* bad names, no such queue, only GET */
	ck_status(400, get("/api/queues/a%2Fb/history"));
	ck_status(404, get("/api/queues/nosuch/history"));
	t = csrf_token(NULL);
	ck_status(405, http_req("POST", HIST_PATH, NULL, t));

	/* deleted: its history goes with it, and a new queue of that name
	 * starts from nothing */
	ck_status(200, http_req("POST", "/api/queues/" HOSTILE_Q_URL "/delete", NULL, t));
	ck_status(404, get(HIST_PATH));
	wait_server(HISTORY_NONE);
	tl_set(fd, HOSTILE_Q, "new");
	r = wait_last(HIST_PATH, 1);
	ck_assert(depth_of(r, &n, &last, &max));
	ck_assert_int_eq(max, 1);
	free(r);

	/* a queue empty for the whole window keeps no ring */
	tl_ckget(fd, HOSTILE_Q, "new");
	free(wait_last(HIST_PATH, 0));
	wait_server(HISTORY_NONE);
	r = get(HIST_PATH);
	ck_assert(depth_of(r, &n, &last, &max));
	ck_assert_int_eq(n, 60);
	ck_assert_int_eq(max, 0);
	free(r);
	free(t);
	close(fd);
}
END_TEST

/* Many queues: a sweep runs in slices of ~2 ms (one per loop turn) and
 * still samples every queue once. */
START_TEST(test_history_slices)
{
	enum { NQ = 30000 };
	char *req, *r, *p;
	size_t len = 0, cap = (size_t)NQ * 40;
	long long last, max;
	int64_t deadline;
	int fd, i, n;

	start(NULL, "--http-history", "0.05");
	fd = tl_connect(srv->port);
	req = malloc(cap);
	for (i = 0; i < NQ; i++)
		len += (size_t)snprintf(req + len, cap - len, "set s%05d 0 0 1 noreply\r\nx\r\n", i);
	mustsend(fd, req, len);
	free(req);
	tl_set(fd, "s99999", "x");
	deadline = tl_now_ms() + tl_slow(20000);
	for (;;) {
		long long slices = -1;

		r = get("/api/server");
		if ((p = strstr(r, "\"history_walk_slices\":")) != NULL)
			slices = atoll(p + 22);
		if (strstr(r, "\"history_queues\":30001,") != NULL && slices > 1)
			break;
		ck_assert_msg(tl_now_ms() < deadline, "not every queue sampled, or "
		    "in one slice: %s", r);
		free(r);
		tl_sleep_ms(20);
	}
	free(r);
	r = get("/api/queues/s29999/history");
	ck_assert(depth_of(r, &n, &last, &max));
	ck_assert_int_ge(n, 1);
	ck_assert_int_eq(last, 1);
	free(r);
	close(fd);
}
END_TEST

/* --http-history 0: no sampling, an empty history. */
START_TEST(test_history_off)
{
	char *r;
	long long last, max;
	int fd, n;

	start(NULL, "--http-history", "0");
	fd = tl_connect(srv->port);
	tl_set(fd, "jobs", "a");
	tl_sleep_ms(100);
	r = get("/api/queues/jobs/history");
	ck_assert_int_eq(status(r), 200);
	ck_has(r, "\"interval_ms\":0,");
	ck_assert(depth_of(r, &n, &last, &max));
	ck_assert_int_eq(n, 0);
	free(r);
	close(fd);
}
END_TEST

/* Open items (reliable reads) with who holds them and for how long. */
START_TEST(test_open_holders)
{
	char *path = write_users("alice:apw:queues=jobs*,read,write\nroot:rpw:admin\n");
	char *r, *v, *want, *addr;
	int64_t deadline;
	int a, b;

	start4("127.0.0.1", "--auth-file", path, "--http-history", "0");
	a = tl_connect(srv->port);
	mustsends(a, "set auth 0 0 9\r\nalice apw\r\n");
	ckresp(a, "STORED\r\n");
	tl_set(a, "jobs", "one");
	tl_set(a, "jobs", "two");
	tl_set(a, "jobs2", "other");
	mustsends(a, "get jobs/open\r\n");
	ckresp(a, "VALUE jobs/open 0 3\r\none\r\nEND\r\n");
	mustsends(a, "get jobs2/open\r\n");
	ckresp(a, "VALUE jobs2/open 0 5\r\nother\r\nEND\r\n");
	tl_sleep_ms(50);

	/* the console's login, as every /api route */
	r = get("/api/queues/jobs/open");
	ck_assert_int_eq(status(r), 401);
	ck_hasnt(r, "alice");
	free(r);
	ck_status(401, http_req("GET", "/api/queues/jobs/open", "alice:apw", NULL));

	r = http_req("GET", "/api/queues/jobs/open", "root:rpw", NULL);
	ck_assert_int_eq(status(r), 200);
	ck_has(r, "{\"name\":\"jobs\",\"total\":1,\"open\":[{\"id\":");
	/* the holder is the connection: address and port */
	want = tl_strdupf("\"holder\":\"%s\",\"user\":\"alice\",\"age_ms\":",
	    addr = tl_local_addr(a));
	ck_has(r, want);
	free(want);
	free(addr);
	ck_has(r, "\"deliveries\":1,");
	v = strstr(r, "\"age_ms\":");
	ck_assert_int_ge(atoll(v + 9), 50);
	ck_hasnt(r, "jobs2");
	free(r);

	/* no login: user null */
	b = tl_connect(srv->port);
	mustsends(b, "set auth 0 0 8\r\nroot rpw\r\n");
	ckresp(b, "STORED\r\n");
	mustsends(b, "get jobs/open\r\n");
	ckresp(b, "VALUE jobs/open 0 3\r\ntwo\r\nEND\r\n");
	r = http_req("GET", "/api/queues/jobs/open?n=1", "root:rpw", NULL);
	ck_has(r, "{\"name\":\"jobs\",\"total\":2,\"open\":[{\"id\":");
	ck_assert_ptr_null(strstr(strstr(r, "\"id\":") + 1, "\"id\":"));
	free(r);
	r = http_req("GET", "/api/queues/jobs/open", "root:rpw", NULL);
	ck_has(r, "\"user\":\"alice\"");
	ck_has(r, "\"user\":\"root\"");
	free(r);

	/* held no more once the holder leaves */
	close(a);
	close(b);
	deadline = tl_now_ms() + tl_slow(5000);
	for (;;) {
		r = http_req("GET", "/api/queues/jobs/open", "root:rpw", NULL);
		if (strstr(r, "\"total\":0,\"open\":[]}") != NULL)
			break;
		ck_assert_msg(tl_now_ms() < deadline, "still held: %s", r);
		free(r);
		tl_sleep_ms(10);
	}
	free(r);
	ck_status(400, http_req("GET", "/api/queues/jobs/open?n=0", "root:rpw", NULL));
	ck_status(404, http_req("GET", "/api/queues/nosuch/open", "root:rpw", NULL));
	free(path);
}
END_TEST

/* A holder without a login: user null. */
START_TEST(test_open_anonymous)
{
	char *r, *want, *addr;
	int fd;

	start(NULL, NULL, NULL);
	fd = tl_connect(srv->port);
	tl_set(fd, HOSTILE_Q, "x");
	mustsends(fd, "get " HOSTILE_Q "/open\r\n");
	ckresp(fd, "VALUE " HOSTILE_Q "/open 0 1\r\nx\r\nEND\r\n");
	r = get("/api/queues/" HOSTILE_Q_URL "/open");
	ck_assert_int_eq(status(r), 200);
	ck_has(r, "{\"name\":\"" HOSTILE_Q_JSON "\",\"total\":1,");
	want = tl_strdupf("\"holder\":\"%s\",\"user\":null,",
	    addr = tl_local_addr(fd));
	ck_has(r, want);
	free(want);
	free(addr);
	ck_hasnt(body(r), "<");
	free(r);
	close(fd);
}
END_TEST

/* ------------------------------------------------------------ issue 35 */

/* One raw HTTP/1.0 request with the given header lines (each ending in
 * \r\n) and nothing else: no Host unless the lines have one. */
static char *
raw_req(const char *method, const char *path, const char *headers)
{
	char *req = tl_strdupf("%s %s HTTP/1.0\r\n%s%s\r\n", method, path,
	    headers, strcmp(method, "POST") == 0 ? "Content-Length: 0\r\n" : "");
	char *buf = malloc(1 << 20);
	size_t len = 0;
	ssize_t n;
	int fd = tl_connect(http_port);

	ck_assert_ptr_nonnull(buf);
	mustsends(fd, req);
	while (len < (1 << 20) - 1 &&
	    (n = tl_readn(fd, buf + len, (1 << 20) - 1 - len, 3000)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	close(fd);
	free(req);
	return buf;
}

/* Finding 4, DNS rebinding: with the default loopback --http and no
 * login, a request with Host: evil.example got the CSRF token, and a
 * POST with it and Origin: http://evil.example deleted a queue.  Now a
 * Host or Origin that is not this server gets 403 (but /healthz). */
START_TEST(test_rebinding_refused)
{
	char *r, *t, *h;
	int fd;

	start(NULL, NULL, NULL);
	fd = tl_connect(srv->port);
	tl_set(fd, "jobs", "a");
	r = raw_req("GET", "/api/server", "Host: evil.example:1234\r\n");
	ck_assert_int_eq(status(r), 403);
	ck_hasnt(r, "csrf_token");
	ck_has(r, "\r\nX-Content-Type-Options: nosniff\r\n");
	free(r);
	ck_status(403, raw_req("GET", "/metrics", "Host: evil.example\r\n"));
	ck_status(403, raw_req("GET", "/", "Host: 127.0.0.1.evil.example\r\n"));
	ck_status(200, raw_req("GET", "/healthz", "Host: evil.example\r\n"));
	/* the server's own names pass, ports aside */
	ck_status(200, raw_req("GET", "/api/server", "Host: 127.0.0.1:1\r\n"));
	ck_status(200, raw_req("GET", "/api/server", "Host: LOCALHOST:9\r\n"));
	ck_status(200, raw_req("GET", "/api/server", ""));
	/* a good token with a foreign Origin changes nothing */
	t = csrf_token(NULL);
	h = tl_strdupf("Host: 127.0.0.1:%d\r\nOrigin: http://evil.example\r\n"
	    "X-CSRF-Token: %s\r\n", http_port, t);
	ck_status(403, raw_req("POST", "/api/queues/jobs/delete", h));
	free(h);
	h = tl_strdupf("Host: 127.0.0.1:%d\r\nOrigin: http://127.0.0.1.evil.example:%d\r\n"
	    "X-CSRF-Token: %s\r\n", http_port, http_port, t);
	ck_status(403, raw_req("POST", "/api/queues/jobs/delete", h));
	free(h);
	/* "Origin: null" says nothing (browsers send it for the console's own
	 * POSTs under Referrer-Policy: no-referrer): Host and token decide */
	h = tl_strdupf("Host: evil.example\r\nOrigin: null\r\nX-CSRF-Token: %s\r\n", t);
	ck_status(403, raw_req("POST", "/api/queues/jobs/delete", h));
	free(h);
	h = tl_strdupf("Host: 127.0.0.1:%d\r\nOrigin: null\r\n", http_port);
	ck_status(403, raw_req("POST", "/api/queues/jobs/delete", h));
	free(h);
	ck_assert_int_eq(tl_stat(fd, "curr_items"), 1);
	/* ... the console's own Origin does */
	h = tl_strdupf("Host: 127.0.0.1:%d\r\nOrigin: http://127.0.0.1:%d\r\n"
	    "X-CSRF-Token: %s\r\n", http_port, http_port, t);
	ck_status(200, raw_req("POST", "/api/queues/jobs/flush", h));
	free(h);
	ck_assert_int_eq(tl_stat(fd, "curr_items"), 0);
	free(t);
	close(fd);
	r = tl_read_file(srv->log, NULL);
	ck_has(r, "--http-host");
	free(r);
}
END_TEST

/* --http-host NAME lets a name through (a proxy's, a DNS name's). */
START_TEST(test_http_host_flag)
{
	start("127.0.0.1", "--http-host", "saker.example");
	ck_status(200, raw_req("GET", "/api/server", "Host: Saker.Example.:443\r\n"));
	ck_status(200, raw_req("GET", "/api/server", "Host: saker.example\r\n"
	    "Origin: https://saker.example\r\n"));
	ck_status(403, raw_req("GET", "/api/server", "Host: other.example\r\n"));
	ck_status(403, raw_req("GET", "/api/server", "Host: saker.example\r\n"
	    "Origin: https://evil.example\r\n"));
}
END_TEST

/* Listening on every address, IP literals are this server. */
START_TEST(test_http_host_wildcard)
{
	start("0.0.0.0", NULL, NULL);
	ck_status(200, raw_req("GET", "/api/server", "Host: 10.1.2.3:9100\r\n"));
	ck_status(200, raw_req("GET", "/api/server", "Host: [::1]:9100\r\n"));
	ck_status(403, raw_req("GET", "/api/server", "Host: evil.example\r\n"));
}
END_TEST

/* Finding 4, CSRF: one token served the process's whole life and every
 * user.  Now a token is bound to the login that fetched it. */
START_TEST(test_csrf_bound_to_login)
{
	char *path = write_users("root:rpw:admin\nops:opw:admin\n");
	char *t_root, *t_ops;
	int fd;

	start4(NULL, "--auth-file", path, NULL, NULL);
	fd = tl_connect(srv->port);
	mustsends(fd, "set auth 0 0 8\r\nroot rpw\r\n");
	ckresp(fd, "STORED\r\n");
	tl_set(fd, "jobs", "a");
	t_root = csrf_token("root:rpw");
	t_ops = csrf_token("ops:opw");
	ck_assert_str_ne(t_root, t_ops);
	ck_status(403, http_req("POST", "/api/queues/jobs/flush", "ops:opw", t_root));
	ck_assert_int_eq(tl_stat(fd, "curr_items"), 1);
	ck_status(200, http_req("POST", "/api/queues/jobs/flush", "ops:opw", t_ops));
	ck_assert_int_eq(tl_stat(fd, "curr_items"), 0);
	free(t_root);
	free(t_ops);
	free(path);
	close(fd);
}
END_TEST

/* Finding 4: libevent's error pages had none of the security headers.
 * Every error of ours has them now, a method evhttp refused included. */
START_TEST(test_error_pages_headers)
{
	static const char *const methods[] = { "GET", "PUT", "DELETE", "OPTIONS",
	    "TRACE", "POST", NULL };
	char *r;
	int i;

	start(NULL, NULL, NULL);
	for (i = 0; methods[i] != NULL; i++) {
		r = http_req(methods[i], "/nothing-here", NULL, NULL);
		ck_assert_int_ge(status(r), 400);
		ck_has(r, "\r\nContent-Security-Policy: default-src 'self'; ");
		ck_has(r, "\r\nX-Content-Type-Options: nosniff\r\n");
		ck_has(r, "\r\nX-Frame-Options: DENY\r\n");
		ck_has(r, "\r\nCache-Control: no-store\r\n");
		ck_hasnt(r, "<HTML>");
		free(r);
	}
	r = http_req("PUT", "/console.js", NULL, NULL);
	ck_assert_int_eq(status(r), 405);
	ck_has(r, "\r\nX-Content-Type-Options: nosniff\r\n");
	free(r);
	r = http_req("GET", "/metrics", NULL, NULL);
	ck_has(r, "\r\nX-Content-Type-Options: nosniff\r\n");
	free(r);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("console");
	TCase *tc = tcase_create("console");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_queues_json);
	tcase_add_test(tc, test_queues_pages);
	tcase_add_test(tc, test_peek_does_not_take);
	tcase_add_test(tc, test_retrying);
	tcase_add_test(tc, test_headers);
	tcase_add_test(tc, test_csrf);
	tcase_add_test(tc, test_requeue);
	tcase_add_test(tc, test_delete);
	tcase_add_test(tc, test_rates_fresh_after_delete);
	tcase_add_test(tc, test_public_read_only);
	tcase_add_test(tc, test_admin_login);
	tcase_add_test(tc, test_history);
	tcase_add_test(tc, test_history_off);
	tcase_add_test(tc, test_history_slices);
	tcase_add_test(tc, test_open_holders);
	tcase_add_test(tc, test_open_anonymous);
	tcase_add_test(tc, test_rebinding_refused);
	tcase_add_test(tc, test_http_host_flag);
	tcase_add_test(tc, test_http_host_wildcard);
	tcase_add_test(tc, test_csrf_bound_to_login);
	tcase_add_test(tc, test_error_pages_headers);
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
