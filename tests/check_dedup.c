/* check_dedup.c -- deduplication ids (issue 44) against a real sakerd over
 * a socket: a set with /id=KEY enqueues once per id in the queue's
 * dedup_window on text, meta and binary; after the window it enqueues
 * again and the sweep forgets the id; bad ids are one CLIENT_ERROR and the
 * connection stays in step; max_dedup_ids gives its SERVER_ERROR; stats
 * and /metrics count; mg's i flag returns the id; a flood of distinct ids
 * stays bounded; on LMDB and SQLite the id survives a restart and kill -9
 * with its item; on PostgreSQL a retry through another broker (after the
 * first was killed) is recognised. */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#ifdef HAVE_POSTGRES
#include "pg_cluster.h"
#endif

static long long
qstat(int fd, const char *q, const char *k)
{
	char *name = tl_strdupf("queue_%s_%s", q, k);
	long long v = tl_stat(fd, name);

	free(name);
	return v < 0 ? 0 : v;
}

/* "set KEY 0 0 len" + data; expect `reply`. */
static void
set_reply(int fd, const char *key, const char *data, const char *reply)
{
	char *l = tl_strdupf("set %s 0 0 %zu\r\n%s\r\n", key, strlen(data),
	    data);

	mustsends(fd, l);
	ckresp(fd, reply);
	free(l);
}

static struct tl_server *
start_conf(const char *store, const char *conf_text, int hport)
{
	char *conf = tl_write_file("dedup.conf", conf_text);
	char *hp = tl_strdupf("127.0.0.1:%d", hport);
	struct tl_server *s;

	if (hport > 0)
		s = tl_server_start(store, "--config", conf, "--http", hp, NULL);
	else
		s = tl_server_start(store, "--config", conf, NULL);
	free(conf);
	free(hp);
	return s;
}

/* A second set with the same id answers STORED and adds nothing; other ids
 * and other queues are other ids; a set without an id is untouched. */
START_TEST(test_text_once)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	int c = tl_connect(s->port);
	char *st;

	set_reply(c, "q/id=order-17", "one", "STORED\r\n");
	set_reply(c, "q/id=order-17", "two", "STORED\r\n");
	mustsends(c, "add q/id=order-17 0 0 5 noreply\r\nthree\r\n");
	set_reply(c, "q/id=order-18", "four", "STORED\r\n");
	set_reply(c, "r/id=order-17", "five", "STORED\r\n");
	set_reply(c, "q", "six", "STORED\r\n");
	set_reply(c, "q", "six", "STORED\r\n");
	st = tl_stats(c);
	ck_assert_int_eq(tl_stat_value(st, "queue_q_items"), 4);
	ck_assert_int_eq(tl_stat_value(st, "queue_q_dedup_ids"), 2);
	ck_assert_int_eq(tl_stat_value(st, "queue_q_dedup_hits"), 2);
	ck_assert_int_eq(tl_stat_value(st, "queue_r_dedup_ids"), 1);
	ck_assert_int_eq(tl_stat_value(st, "queue_r_dedup_hits"), 0);
	ck_assert_int_eq(tl_stat_value(st, "set_duplicates"), 2);
	ck_assert_int_eq(tl_stat_value(st, "cmd_set"), 7);
	free(st);
	tl_ckget(c, "q", "one");
	tl_ckget(c, "q", "four");
	tl_ckget(c, "q", "six");
	tl_ckget(c, "q", "six");
	tl_ckget(c, "q", NULL);
	tl_ckget(c, "r", "five");
	/* the item is gone, the id stays for its window */
	set_reply(c, "q/id=order-17", "again", "STORED\r\n");
	tl_ckget(c, "q", NULL);
	/* with delay=, in either order */
	set_reply(c, "q/delay=1/id=d1", "d", "STORED\r\n");
	set_reply(c, "q/id=d1/delay=1", "d", "STORED\r\n");
	ck_assert_int_eq(qstat(c, "q", "dedup_hits"), 4);
	/* flush takes the items and keeps the ids; delete takes both */
	mustsends(c, "flush q\r\n");
	ckresp(c, "END\r\n");
	set_reply(c, "q/id=order-18", "again", "STORED\r\n");
	ck_assert_int_eq(qstat(c, "q", "items"), 0);
	ck_assert_int_eq(qstat(c, "q", "dedup_hits"), 5);
	mustsends(c, "delete q\r\n");
	ckresp(c, "DELETED\r\n");
	set_reply(c, "q/id=order-18", "new", "STORED\r\n");
	ck_assert_int_eq(qstat(c, "q", "items"), 1);
	ck_assert_int_eq(qstat(c, "q", "dedup_ids"), 1);
	ck_assert_int_eq(qstat(c, "q", "dedup_hits"), 0);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
}
END_TEST

/* After dedup_window the id enqueues again; the sweep forgets ids whose
 * window passed. */
START_TEST(test_window)
{
	struct tl_server *s = start_conf("memory", "[queue w]\n"
	    "dedup_window = 1s\n", 0);
	int c = tl_connect(s->port);

	set_reply(c, "w/id=a", "1", "STORED\r\n");
	set_reply(c, "w/id=a", "2", "STORED\r\n");
	ck_assert_int_eq(qstat(c, "w", "items"), 1);
	tl_sleep_ms(1100);
	set_reply(c, "w/id=a", "3", "STORED\r\n");
	ck_assert_int_eq(qstat(c, "w", "items"), 2);
	ck_assert_int_eq(qstat(c, "w", "dedup_hits"), 1);
	/* the expired record was replaced: still one id */
	ck_assert_int_eq(qstat(c, "w", "dedup_ids"), 1);
	/* the background sweep (every 5 s) drops it after its window */
	tl_wait_stat(c, "queue_w_dedup_ids", 0, tl_slow(12000));
	tl_ckget(c, "w", "1");
	tl_ckget(c, "w", "3");
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
}
END_TEST

/* Bad ids: one CLIENT_ERROR line each, the data block swallowed (the
 * connection stays in step), nothing stored, nothing counted. */
START_TEST(test_bad_ids)
{
	static const char bad[] = "CLIENT_ERROR bad id (1 to 128 bytes, no '/',"
	    " space or control character)\r\n";
	struct tl_server *s = tl_server_start("memory", NULL);
	int c = tl_connect(s->port);
	char id[200], *key;

	set_reply(c, "q/id=", "x", bad);
	memset(id, 'i', sizeof(id));
	key = tl_strdupf("q/id=%.129s", id);
	set_reply(c, key, "x", bad);
	free(key);
	key = tl_strdupf("q/id=%.128s", id);	/* the longest */
	set_reply(c, key, "ok", "STORED\r\n");
	free(key);
	set_reply(c, "q/id=a\x01z", "x", bad);
	set_reply(c, "q/id=\xc3\xa9", "x", bad);
	set_reply(c, "q/id=a/id=b", "x",
	    "CLIENT_ERROR bad command line format\r\n");
	set_reply(c, "q/id=a/x", "x", "CLIENT_ERROR unknown option\r\n");
	/* noreply does not hide a bad line */
	mustsends(c, "set q/id= 0 0 1 noreply\r\nx\r\n");
	ckresp(c, bad);
	/* a data block that looks like a command is never run */
	mustsends(c, "set q/id= 0 0 14\r\nflush_all\r\nxxx\r\n");
	ckresp(c, bad);
	/* meta: the same line */
	mustsends(c, "ms q/id= 1\r\nx\r\n");
	ckresp(c, bad);
	/* not a get option */
	mustsends(c, "get q/id=a\r\n");
	ckresp(c, "CLIENT_ERROR unknown option\r\n");
	ck_assert_int_eq(qstat(c, "q", "items"), 1);
	ck_assert_int_eq(qstat(c, "q", "dedup_ids"), 1);
	ck_assert_int_eq(qstat(c, "q", "dedup_hits"), 0);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
}
END_TEST

/* max_dedup_ids: past it a new id is refused with the queue and the
 * setting named, a kept id is still a duplicate; sets without an id go
 * on; once the window passes, the set at the limit sweeps and is taken. */
START_TEST(test_limit)
{
	static const char full[] = "SERVER_ERROR queue lim keeps max_dedup_ids=3"
	    " ids within its dedup_window; retry later\r\n";
	struct tl_server *s = start_conf("memory", "[queue lim]\n"
	    "max_dedup_ids = 3\ndedup_window = 1s\n", 0);
	int c = tl_connect(s->port);

	set_reply(c, "lim/id=1", "a", "STORED\r\n");
	set_reply(c, "lim/id=2", "b", "STORED\r\n");
	set_reply(c, "lim/id=3", "c", "STORED\r\n");
	set_reply(c, "lim/id=4", "d", full);
	/* noreply does not hide a store's refusal */
	mustsends(c, "set lim/id=5 0 0 1 noreply\r\ne\r\n");
	ckresp(c, full);
	mustsends(c, "ms lim/id=6 1\r\nf\r\n");
	ckresp(c, full);
	set_reply(c, "lim", "plain", "STORED\r\n");
	/* a retry of a kept id is a duplicate at the limit too */
	set_reply(c, "lim/id=2", "b", "STORED\r\n");
	ck_assert_int_eq(qstat(c, "lim", "dedup_hits"), 1);
	ck_assert_int_eq(qstat(c, "lim", "items"), 4);
	ck_assert_int_eq(qstat(c, "lim", "dedup_ids"), 3);
	/* another queue has its own limit (the default) */
	set_reply(c, "other/id=4", "x", "STORED\r\n");
	tl_sleep_ms(1100);
	set_reply(c, "lim/id=4", "d", "STORED\r\n");
	ck_assert_int_eq(qstat(c, "lim", "dedup_ids"), 1);
	ck_assert_int_eq(qstat(c, "lim", "items"), 5);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
}
END_TEST

/* A full queue: one that discards its oldest looks at the id first, so a
 * duplicate discards nothing; one that refuses answers a kept id STORED
 * (a duplicate) and a new one NOT_STORED (docs/protocol.md). */
START_TEST(test_full_queue)
{
	struct tl_server *s = start_conf("memory", "[queue dq]\nmax_items = 2\n"
	    "discard_old_when_full = yes\n[queue rq]\nmax_items = 1\n"
	    "[queue lq]\nmax_items = 1\ndiscard_old_when_full = yes\n"
	    "[queue bq]\nmax_bytes = 4\ndiscard_old_when_full = yes\n", 0);
	int c = tl_connect(s->port);

	set_reply(c, "dq/id=a", "a", "STORED\r\n");
	set_reply(c, "dq/id=b", "b", "STORED\r\n");
	set_reply(c, "dq/id=b", "b", "STORED\r\n");
	set_reply(c, "dq/id=a", "a", "STORED\r\n");
	ck_assert_int_eq(qstat(c, "dq", "discarded"), 0);
	ck_assert_int_eq(qstat(c, "dq", "items"), 2);
	set_reply(c, "dq/id=c", "c", "STORED\r\n");
	ck_assert_int_eq(qstat(c, "dq", "discarded"), 1);
	set_reply(c, "dq/id=c", "c", "STORED\r\n");
	set_reply(c, "dq", "d", "STORED\r\n");	/* no id: as ever */
	ck_assert_int_eq(qstat(c, "dq", "discarded"), 2);
	ck_assert_int_eq(qstat(c, "dq", "dedup_hits"), 3);
	tl_ckget(c, "dq", "c");
	tl_ckget(c, "dq", "d");
	tl_ckget(c, "dq", NULL);

	set_reply(c, "rq/id=x", "x", "STORED\r\n");
	/* full: the retry is still the duplicate it is, a new id refused */
	set_reply(c, "rq/id=x", "x", "STORED\r\n");
	ck_assert_int_eq(qstat(c, "rq", "dedup_hits"), 1);
	set_reply(c, "rq/id=y", "y", "NOT_STORED\r\n");
	ck_assert_int_eq(qstat(c, "rq", "dedup_ids"), 1);
	tl_ckget(c, "rq", "x");
	set_reply(c, "rq/id=x", "x", "STORED\r\n");	/* room: recognised */
	tl_ckget(c, "rq", NULL);
	set_reply(c, "rq/id=y", "y", "STORED\r\n");	/* y was not kept */
	tl_ckget(c, "rq", "y");

	/* full of delayed items: nothing to discard, as for any set */
	set_reply(c, "lq/delay=60000/id=d1", "d", "STORED\r\n");
	set_reply(c, "lq/id=d2", "e", "NOT_STORED\r\n");
	set_reply(c, "lq/id=d1", "d", "STORED\r\n");
	ck_assert_int_eq(qstat(c, "lq", "dedup_ids"), 1);
	ck_assert_int_eq(qstat(c, "lq", "dedup_hits"), 1);

	/* bytes: the oldest go until the new item fits */
	set_reply(c, "bq/id=1", "ab", "STORED\r\n");
	set_reply(c, "bq/id=2", "cd", "STORED\r\n");
	set_reply(c, "bq/id=3", "efg", "STORED\r\n");
	ck_assert_int_eq(qstat(c, "bq", "discarded"), 2);
	set_reply(c, "bq/id=2", "cd", "STORED\r\n");
	ck_assert_int_eq(qstat(c, "bq", "discarded"), 2);
	tl_ckget(c, "bq", "efg");
	tl_ckget(c, "bq", NULL);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
}
END_TEST

/* One binary request: Set (0x01) of key with value; returns the status. */
static unsigned
bin_set(int fd, uint8_t opcode, const char *key, const char *val)
{
	unsigned char req[24 + 8 + 256 + 64], resp[24];
	size_t kl = strlen(key), vl = strlen(val);
	uint32_t body = (uint32_t)(8 + kl + vl), be;
	char rest[512];
	size_t rbody;

	memset(req, 0, sizeof(req));
	req[0] = 0x80;
	req[1] = opcode;
	req[2] = (unsigned char)(kl >> 8);
	req[3] = (unsigned char)kl;
	req[4] = 8;
	be = htonl(body);
	memcpy(req + 8, &be, 4);
	memcpy(req + 24 + 8, key, kl);
	memcpy(req + 24 + 8 + kl, val, vl);
	mustsend(fd, req, 24 + body);
	ck_assert_int_eq(tl_readn(fd, resp, 24, tl_timeout_ms), 24);
	ck_assert_uint_eq(resp[0], 0x81);
	ck_assert_uint_eq(resp[1], opcode);
	memcpy(&be, resp + 8, 4);
	rbody = ntohl(be);
	ck_assert_uint_le(rbody, sizeof(rest));
	if (rbody > 0)
		ck_assert_int_eq(tl_readn(fd, rest, rbody, tl_timeout_ms),
		    (ssize_t)rbody);
	return (unsigned)resp[6] << 8 | resp[7];
}

/* The same id on meta ms and binary Set/Add; mg's i flag returns an item's
 * id, and nothing for an item set without one; fanout copies carry it. */
START_TEST(test_meta_binary_mg)
{
	struct tl_server *s = tl_server_start("memory", NULL);
	int c = tl_connect(s->port), b = tl_connect(s->port);
	char id[129];

	mustsends(c, "ms m/id=m1 2\r\nm1\r\n");
	ckresp(c, "HD\r\n");
	mustsends(c, "ms m/id=m1 2 O7\r\nm2\r\n");
	ckresp(c, "HD O7\r\n");
	ck_assert_uint_eq(bin_set(b, 0x01, "m/id=b1", "b1"), 0);
	ck_assert_uint_eq(bin_set(b, 0x02, "m/id=b1", "b2"), 0);	/* Add */
	ck_assert_uint_eq(bin_set(b, 0x01, "m/id=", "x"), 0x04);
	ck_assert_uint_eq(bin_set(b, 0x01, "m/id=a b", "x"), 0x04);
	ck_assert_uint_eq(bin_set(b, 0x01, "m", "plain"), 0);
	memset(id, 'z', 128);
	id[128] = '\0';
	{
		char *k = tl_strdupf("m/delay=0/id=%s", id);
		set_reply(c, k, "long", "STORED\r\n");
		free(k);
	}
	ck_assert_int_eq(qstat(c, "m", "items"), 4);
	ck_assert_int_eq(qstat(c, "m", "dedup_hits"), 2);
	mustsends(c, "mg m v i\r\n");
	ckresp(c, "VA 2 im1\r\nm1\r\n");
	mustsends(c, "mg m v i d k\r\n");
	ckresp(c, "VA 2 d0 ib1 km\r\nb1\r\n");
	mustsends(c, "mg m v i\r\n");
	ckresp(c, "VA 5\r\nplain\r\n");
	{
		char *want = tl_strdupf("HD i%s\r\n", id);
		mustsends(c, "mg m i\r\n");
		ckresp(c, want);
		free(want);
	}
	mustsends(c, "mg m v i\r\n");
	ckresp(c, "EN\r\n");
	mustsends(c, "mg m i5\r\n");
	ckresp(c, "CLIENT_ERROR invalid flag\r\n");
	/* fanout: a child exists once written; the parent's id decides */
	mustsends(c, "flush f+kid\r\n");
	ckresp(c, "END\r\n");
	set_reply(c, "f/id=x9", "fan", "STORED\r\n");
	set_reply(c, "f/id=x9", "fan", "STORED\r\n");
	ck_assert_int_eq(qstat(c, "f+kid", "items"), 1);
	mustsends(c, "mg f+kid v i\r\n");
	ckresp(c, "VA 3 ix9\r\nfan\r\n");
	close(b);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
}
END_TEST

/* /metrics: the global duplicates counter and the per-queue series, with
 * their HELP and TYPE. */
START_TEST(test_metrics)
{
	int hport = tl_free_port();
	struct tl_server *s = start_conf("memory", "", hport);
	int c = tl_connect(s->port);
	char *resp;

	set_reply(c, "mq/id=a", "1", "STORED\r\n");
	set_reply(c, "mq/id=a", "1", "STORED\r\n");
	set_reply(c, "mq/id=a", "1", "STORED\r\n");
	set_reply(c, "mq/id=b", "1", "STORED\r\n");
	resp = tl_http(hport, "GET", "/metrics", NULL, NULL);
	ck_assert_int_eq(tl_http_status(resp), 200);
	ck_assert_msg(strstr(resp, "# TYPE saker_set_duplicates_total counter\n"
	    "saker_set_duplicates_total 2\n") != NULL, "%s", resp);
	ck_assert_msg(strstr(resp, "# HELP saker_set_duplicates_total ") != NULL,
	    "%s", resp);
	ck_assert_msg(strstr(resp, "# TYPE saker_queue_dedup_ids gauge\n") !=
	    NULL && strstr(resp, "\nsaker_queue_dedup_ids{queue=\"mq\"} 2\n") !=
	    NULL, "%s", resp);
	ck_assert_msg(strstr(resp, "# TYPE saker_queue_dedup_hits_total counter\n")
	    != NULL && strstr(resp,
	    "\nsaker_queue_dedup_hits_total{queue=\"mq\"} 2\n") != NULL, "%s",
	    resp);
	free(resp);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
}
END_TEST

/* A pipelined flood of distinct ids: the queue keeps max_dedup_ids of
 * them and refuses the rest, one reply per set, in step. */
START_TEST(test_flood)
{
	enum { N = 3000, LIMIT = 1000 };
	struct tl_server *s = start_conf("memory", "max_dedup_ids = 1000\n", 0);
	int c = tl_connect(s->port);
	size_t cap = (size_t)N * 200, len = 0;
	char *buf = malloc(cap), *line;
	int i, stored = 0, refused = 0;

	for (i = 0; i < N; i++)
		len += (size_t)snprintf(buf + len, cap - len,
		    "set fl/id=flood-%08d-%0100d 0 0 1\r\nx\r\n", i, i);
	mustsend(c, buf, len);
	for (i = 0; i < N; i++) {
		line = tl_mustreadline(c);
		if (strcmp(line, "STORED") == 0)
			stored++;
		else if (strncmp(line, "SERVER_ERROR queue fl keeps "
		    "max_dedup_ids=1000 ", 39) == 0)
			refused++;
		else
			ck_abort_msg("reply %d: %s", i, line);
		free(line);
	}
	ck_assert_int_eq(stored, LIMIT);
	ck_assert_int_eq(refused, N - LIMIT);
	ck_assert_int_eq(qstat(c, "fl", "dedup_ids"), LIMIT);
	ck_assert_int_eq(qstat(c, "fl", "items"), LIMIT);
	/* the same flood again: all duplicates or refusals, nothing added */
	mustsend(c, buf, len);
	for (i = 0; i < N; i++)
		free(tl_mustreadline(c));
	ck_assert_int_eq(qstat(c, "fl", "items"), LIMIT);
	free(buf);
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
}
END_TEST

#if defined(HAVE_LMDB) || defined(HAVE_SQLITE)
/* On a durable store the id is in the item's commit: after kill -9 (--sync
 * always: an acknowledged set is on disk) and after a clean restart a
 * retry is still a duplicate, the item still carries its id, and the count
 * of ids is rebuilt from the store. */
static void
durable_restart(const char *store)
{
	char *conf = tl_write_file("dedup.conf", "[queue d]\ndedup_window = 1h\n");
	struct tl_server *s = tl_server_start(store, "--sync", "always",
	    "--config", conf, NULL);
	int c = tl_connect(s->port);

	set_reply(c, "d/id=k1", "one", "STORED\r\n");
	set_reply(c, "d/id=k2", "two", "STORED\r\n");
	set_reply(c, "d", "three", "STORED\r\n");
	close(c);
	tl_server_kill(s);
	tl_server_restart(s);
	c = tl_connect(s->port);
	/* the ids the store kept are counted at the first stats */
	ck_assert_int_eq(qstat(c, "d", "dedup_ids"), 2);
	set_reply(c, "d/id=k1", "one", "STORED\r\n");
	set_reply(c, "d/id=k2", "two", "STORED\r\n");
	ck_assert_int_eq(qstat(c, "d", "dedup_ids"), 2);
	ck_assert_int_eq(qstat(c, "d", "items"), 3);
	ck_assert_int_eq(qstat(c, "d", "dedup_hits"), 2);
	mustsends(c, "mg d v i\r\n");
	ckresp(c, "VA 3 ik1\r\none\r\n");
	/* open and given back by the disconnect: the id stays with it */
	mustsends(c, "mg d/open v i\r\n");
	ckresp(c, "VA 3 ik2\r\ntwo\r\n");
	close(c);
	tl_server_stop(s);
	tl_server_restart(s);
	c = tl_connect(s->port);
	set_reply(c, "d/id=k1", "one", "STORED\r\n");
	set_reply(c, "d/id=k3", "four", "STORED\r\n");
	ck_assert_int_eq(qstat(c, "d", "dedup_ids"), 3);
	ck_assert_int_eq(qstat(c, "d", "items"), 3);
	mustsends(c, "mg d v i\r\n");
	ckresp(c, "VA 3 ik2\r\ntwo\r\n");
	mustsends(c, "mg d v i\r\n");
	ckresp(c, "VA 5\r\nthree\r\n");
	mustsends(c, "mg d v i\r\n");
	ckresp(c, "VA 4 ik3\r\nfour\r\n");
	close(c);
	tl_server_stop(s);
	tl_server_free(s);
	free(conf);
}
#endif

#ifdef HAVE_LMDB
START_TEST(test_lmdb_restart)
{
	durable_restart("lmdb");
}
END_TEST
#endif

#ifdef HAVE_SQLITE
START_TEST(test_sqlite_restart)
{
	durable_restart("sqlite");
}
END_TEST
#endif

#ifdef HAVE_POSTGRES
/* One throwaway cluster for the run (tests/pg_cluster.c), started by
 * main() when PostgreSQL is installed. */
static struct pg_cluster pgc;
static bool pg_up;

/* On PostgreSQL the id is the database's: a retry through another broker
 * is recognised, also after the first broker was killed (a failover), and
 * the item read through either carries its id. */
START_TEST(test_pg_two_brokers)
{
	char *sp = tl_strdupf("postgres:%s schema=dedup_%d lease=2",
	    pgc.conninfo, (int)getpid());
	struct tl_server *a = tl_server_start(sp, NULL);
	struct tl_server *b = tl_server_start(sp, NULL);
	int fa = tl_connect(a->port), fb = tl_connect(b->port);

	set_reply(fa, "pq/id=x1", "one", "STORED\r\n");
	set_reply(fb, "pq/id=x1", "one", "STORED\r\n");
	set_reply(fb, "pq/id=x2", "two", "STORED\r\n");
	set_reply(fa, "pq/id=x2", "two", "STORED\r\n");
	ck_assert_int_eq(tl_stat(fa, "set_duplicates"), 1);
	ck_assert_int_eq(tl_stat(fb, "set_duplicates"), 1);
	set_reply(fa, "pq/id=x3", "three", "STORED\r\n");
	close(fa);
	tl_server_kill(a);
	/* the producer's retries go to the survivor */
	set_reply(fb, "pq/id=x3", "three", "STORED\r\n");
	set_reply(fb, "pq/id=x1", "one", "STORED\r\n");
	mustsends(fb, "mg pq v i\r\n");
	ckresp(fb, "VA 3 ix1\r\none\r\n");
	mustsends(fb, "mg pq v i\r\n");
	ckresp(fb, "VA 3 ix2\r\ntwo\r\n");
	mustsends(fb, "mg pq v i\r\n");
	ckresp(fb, "VA 5 ix3\r\nthree\r\n");
	mustsends(fb, "mg pq v i\r\n");
	ckresp(fb, "EN\r\n");
	ck_assert_int_eq(tl_stat(fb, "set_duplicates"), 3);
	close(fb);
	tl_server_stop(b);
	tl_server_free(a);
	tl_server_free(b);
	free(sp);
}
END_TEST
#endif

static Suite *
dedup_suite(void)
{
	Suite *s = suite_create("dedup");
	TCase *tc = tcase_create("memory");

	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, tl_dir_setup, tl_dir_teardown);
	tcase_add_test(tc, test_text_once);
	tcase_add_test(tc, test_window);
	tcase_add_test(tc, test_bad_ids);
	tcase_add_test(tc, test_limit);
	tcase_add_test(tc, test_full_queue);
	tcase_add_test(tc, test_meta_binary_mg);
	tcase_add_test(tc, test_metrics);
	tcase_add_test(tc, test_flood);
	suite_add_tcase(s, tc);
#ifdef HAVE_LMDB
	tc = tcase_create("lmdb");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, tl_dir_setup, tl_dir_teardown);
	tcase_add_test(tc, test_lmdb_restart);
	suite_add_tcase(s, tc);
#endif
#ifdef HAVE_SQLITE
	tc = tcase_create("sqlite");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, tl_dir_setup, tl_dir_teardown);
	tcase_add_test(tc, test_sqlite_restart);
	suite_add_tcase(s, tc);
#endif
#ifdef HAVE_POSTGRES
	if (pg_up) {
		tc = tcase_create("postgres");
		tcase_set_timeout(tc, 60);
		tcase_add_checked_fixture(tc, tl_dir_setup, tl_dir_teardown);
		tcase_add_test(tc, test_pg_two_brokers);
		suite_add_tcase(s, tc);
	}
#endif
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

#ifdef HAVE_POSTGRES
	char why[256];

	if (pg_cluster_start(&pgc, why, sizeof(why)) == 0)
		pg_up = true;
	else
		printf("check_dedup: postgres tests skipped: %s\n", why);
#endif
	sr = srunner_create(dedup_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
#ifdef HAVE_POSTGRES
	pg_cluster_destroy(&pgc);
#endif
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
