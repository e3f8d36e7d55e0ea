/* check_proto.c -- table-driven tests of the text-protocol line parser. */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_text.h"
#include "qname.h"

/*
 * Each row: a command line, the reply the parser must return (NULL for
 * success), the command type on success, and a compact list of the fields
 * to check, "name=value" separated by spaces:
 *
 *   nkeys=N   k<i>=<raw token>   n<i>=<queue name>   t<i>=<timeout ms>
 *   o<i>=<opts: any of "ocap" (open close abort peek), "-" for none>
 *   flags= exp= bytes= delay= at= num1= num2= nr=0|1 st=q|up|ro|qs sw=
 *
 * Fields not listed still get checked against their defaults where the
 * command defines one: sw=-1, nr=0, delay=-1 and at=-1 on set, num2=-1 on
 * monitor, st=q on status, o<i>=- and t<i>=-1 on get keys, and n<i> is
 * k<i> up to its first '/'.
 */
struct row {
	const char *line;
	const char *err;
	enum proto_cmd_type type;
	const char *want;
};

#define OK(l, t, w)	{ (l), NULL, (t), (w) }
#define BAD(l, e, w)	{ (l), (e), PROTO_CMD_NONE, (w) }

#define E_UNK	PROTO_ERR_UNKNOWN
#define E_FMT	PROTO_ERR_FORMAT
#define E_MANY	PROTO_ERR_TOO_MANY_KEYS
#define E_QN	PROTO_ERR_QNAME
#define E_COMB	PROTO_ERR_COMBINATION
#define E_OPT	PROTO_ERR_OPTION

#define T_SET	PROTO_CMD_SET
#define T_GET	PROTO_CMD_GET
#define T_DEL	PROTO_CMD_DELETE
#define T_FL	PROTO_CMD_FLUSH
#define T_FLA	PROTO_CMD_FLUSH_ALL
#define T_FLE	PROTO_CMD_FLUSH_EXPIRED
#define T_MON	PROTO_CMD_MONITOR
#define T_CONF	PROTO_CMD_CONFIRM
#define T_TOUCH	PROTO_CMD_TOUCH
#define T_STATS	PROTO_CMD_STATS
#define T_STAT	PROTO_CMD_STATUS
#define T_VER	PROTO_CMD_VERSION
#define T_VERB	PROTO_CMD_VERBOSITY
#define T_QUIT	PROTO_CMD_QUIT
#define T_SHUT	PROTO_CMD_SHUTDOWN
#define T_NOST	PROTO_CMD_NOSTORE

static const struct row rows[] = {
	/* ---- unknown commands and empty lines ---- */
	BAD("", E_UNK, ""),
	BAD("   ", E_UNK, ""),
	BAD("\t \t", E_UNK, ""),
	BAD("bogus", E_UNK, ""),
	BAD("bogus q 0 0 5", E_UNK, ""),
	BAD("incr q 1", E_UNK, ""),
	BAD("ge q", E_UNK, ""),
	BAD("gett q", E_UNK, ""),
	BAD("getsq", E_UNK, ""),
	BAD("flush-all", E_UNK, ""),
	BAD("flush_al", E_UNK, ""),
	BAD("get\x80 q", E_UNK, ""),
	BAD("g\x01t q", E_UNK, ""),
	BAD("get\rq", E_UNK, ""),

	/* ---- add is set; replace, append, prepend, cas are refused (after
	 * their data block, which the caller skips) ---- */
	OK("add q 0 0 5", T_SET, "nkeys=1 k0=q flags=0 exp=0 bytes=5"),
	OK("ADD q/delay=5 1 2 3 noreply", T_SET, "delay=5 flags=1 exp=2 bytes=3 nr=1"),
	BAD("add q 0 0 5 junk", E_FMT, "sw=7"),
	OK("replace q 0 0 5", T_NOST, "bytes=5"),
	OK("append q 0 0 5 noreply", T_NOST, "bytes=5 nr=1"),
	OK("prepend bad/name 0 0 5", T_NOST, "bytes=5"),
	OK("cas q 0 0 5 99", T_NOST, "bytes=5"),
	OK("cas q 0 0 5 18446744073709551615 noreply", T_NOST, "bytes=5 nr=1"),
	BAD("cas q 0 0 5", E_FMT, "sw=7"),
	BAD("cas q 0 0 5 x", E_FMT, "sw=7"),
	BAD("cas q 0 0 5 1 junk", E_FMT, "sw=7"),
	BAD("append q 0 0 5 1", E_FMT, "sw=7"),
	BAD("append q 0 0 x", E_FMT, "sw=-1"),
	BAD("prepend q", E_FMT, "sw=-1"),

	/* ---- set: plain ---- */
	OK("set q 0 0 5", T_SET,
	    "nkeys=1 k0=q n0=q flags=0 exp=0 bytes=5"),
	OK("set jobs 7 100 12", T_SET, "k0=jobs flags=7 exp=100 bytes=12"),
	OK("set jobs+audit 0 0 1", T_SET, "k0=jobs+audit n0=jobs+audit"),
	OK("SET q 1 2 3", T_SET, "k0=q flags=1 exp=2 bytes=3"),
	OK("SeT q 1 2 3", T_SET, "k0=q flags=1 exp=2 bytes=3"),
	OK("  set  q\t0   0 5  ", T_SET, "k0=q bytes=5"),
	OK("set Q 0 0 5", T_SET, "k0=Q n0=Q"),
	OK("set q 0 0 5 noreply", T_SET, "k0=q bytes=5 nr=1"),
	OK("set q 0 0 0", T_SET, "bytes=0"),
	OK("set q 0 0 007", T_SET, "bytes=7"),
	OK("set q 00 000 5", T_SET, "flags=0 exp=0"),
	OK("set q 4294967295 0 5", T_SET, "flags=4294967295"),
	BAD("set q 4294967296 0 5", E_FMT, "sw=7"),
	BAD("set q 99999999999999999999999 0 5", E_FMT, "sw=7"),
	BAD("set q -1 0 5", E_FMT, "sw=7"),
	BAD("set q +1 0 5", E_FMT, "sw=7"),
	BAD("set q 0x1 0 5", E_FMT, "sw=7"),
	BAD("set q 1a 0 5", E_FMT, "sw=7"),

	/* exptime: signed */
	OK("set q 0 -1 5", T_SET, "exp=-1"),
	OK("set q 0 -0 5", T_SET, "exp=0"),
	OK("set q 0 2592000 5", T_SET, "exp=2592000"),
	OK("set q 0 2592001 5", T_SET, "exp=2592001"),
	OK("set q 0 9223372036854775807 5", T_SET, "exp=9223372036854775807"),
	OK("set q 0 -9223372036854775808 5", T_SET,
	    "exp=-9223372036854775808"),
	BAD("set q 0 9223372036854775808 5", E_FMT, "sw=7"),
	BAD("set q 0 -9223372036854775809 5", E_FMT, "sw=7"),
	BAD("set q 0 18446744073709551616 5", E_FMT, "sw=7"),
	BAD("set q 0 - 5", E_FMT, "sw=7"),
	BAD("set q 0 -- 5", E_FMT, "sw=7"),
	BAD("set q 0 +5 5", E_FMT, "sw=7"),
	BAD("set q 0 0x10 5", E_FMT, "sw=7"),
	BAD("set q 0 1.5 5", E_FMT, "sw=7"),

	/* bytes, and when the caller must swallow the data block */
	OK("set q 0 0 9223372036854775805", T_SET,
	    "bytes=9223372036854775805"),
	BAD("set q 0 0 9223372036854775806", E_FMT, "sw=-1"),
	BAD("set q 0 0 18446744073709551616", E_FMT, "sw=-1"),
	BAD("set q 0 0 -5", E_FMT, "sw=-1"),
	BAD("set q 0 0 +5", E_FMT, "sw=-1"),
	BAD("set q 0 0 5x", E_FMT, "sw=-1"),
	BAD("set q 0 0 0x5", E_FMT, "sw=-1"),
	BAD("set q 0 0 5 NOREPLY", E_FMT, "sw=7"),
	BAD("set q 0 0 5 junk", E_FMT, "sw=7"),
	BAD("set q 0 0 5 noreply extra", E_FMT, "sw=7"),
	BAD("set q 0 0 0 noreply extra", E_FMT, "sw=2"),
	BAD("set q 0 0 1000000 junk", E_FMT, "sw=1000002"),
	BAD("set", E_FMT, "sw=-1"),
	BAD("set q", E_FMT, "sw=-1"),
	BAD("set q 0", E_FMT, "sw=-1"),
	BAD("set q 0 0", E_FMT, "sw=-1"),

	/* set: queue names */
	BAD("set .q 0 0 5", E_QN, "sw=7"),
	BAD("set /delay=5 0 0 5", E_QN, "sw=7"),
	BAD("set q\x80 0 0 5", E_QN, "sw=7"),
	BAD("set q\x7f 0 0 5", E_QN, "sw=7"),
	BAD("set q\x01 0 0 5", E_QN, "sw=7"),
	BAD("set q/delay=5\x01 0 0 5", E_QN, "sw=7"),
	BAD("set .q 0 0 x", E_QN, "sw=-1"),

	/* set options */
	OK("set q/delay=1000 0 0 5", T_SET,
	    "k0=q/delay=1000 n0=q delay=1000 bytes=5"),
	OK("set q/delay=0 0 0 5", T_SET, "delay=0"),
	OK("set q/delay=315360000000 0 0 5", T_SET, "delay=315360000000"),
	OK("set q/delay=000315360000000 0 0 5", T_SET, "delay=315360000000"),
	BAD("set q/delay=315360000001 0 0 5", E_FMT, "sw=7"),
	BAD("set q/delay=99999999999999999999999 0 0 5", E_FMT, "sw=7"),
	BAD("set q/delay=-1 0 0 5", E_FMT, "sw=7"),
	BAD("set q/delay=+1 0 0 5", E_FMT, "sw=7"),
	BAD("set q/delay= 0 0 5", E_FMT, "sw=7"),
	BAD("set q/delay=abc 0 0 5", E_FMT, "sw=7"),
	OK("set q/at=1700000000 0 0 5", T_SET, "k0=q/at=1700000000 at=1700000000"),
	OK("set q/at=0 0 0 5", T_SET, "at=0"),
	OK("set q/at=253402300799 0 0 5", T_SET, "at=253402300799"),
	BAD("set q/at=253402300800 0 0 5", E_FMT, "sw=7"),
	BAD("set q/at=-5 0 0 5", E_FMT, "sw=7"),
	BAD("set q/at= 0 0 5", E_FMT, "sw=7"),
	BAD("set q/at=5/delay=5 0 0 5", E_FMT, "sw=7"),
	BAD("set q/delay=5/at=5 0 0 5", E_FMT, "sw=7"),
	OK("set q/delay=5/delay=7 0 0 5", T_SET, "delay=7"),
	OK("set jobs+x/delay=5 3 -1 5 noreply", T_SET,
	    "n0=jobs+x delay=5 flags=3 exp=-1 nr=1"),
	BAD("set q/open 0 0 5", E_OPT, "sw=7"),
	BAD("set q/t=5 0 0 5", E_OPT, "sw=7"),
	BAD("set q/DELAY=5 0 0 5", E_OPT, "sw=7"),
	BAD("set q/delay 0 0 5", E_OPT, "sw=7"),
	BAD("set q/ 0 0 5", E_OPT, "sw=7"),
	BAD("set q//delay=5 0 0 5", E_OPT, "sw=7"),
	BAD("set q/delay=5/ 0 0 5", E_OPT, "sw=7"),
	BAD("set q/bogus 0 0 abc", E_OPT, "sw=-1"),

	/* ---- get ---- */
	OK("get q", T_GET, "nkeys=1 k0=q n0=q o0=- t0=-1"),
	OK("gets q", T_GET, "nkeys=1 k0=q"),
	OK("GET q", T_GET, "k0=q"),
	OK("Gets q", T_GET, "k0=q"),
	OK("get Jobs", T_GET, "k0=Jobs"),
	OK("get \tq\t ", T_GET, "nkeys=1 k0=q"),
	OK("get noreply", T_GET, "nkeys=1 k0=noreply"),
	OK("get a b c", T_GET, "nkeys=3 k0=a k1=b k2=c"),
	OK("get a a", T_GET, "nkeys=2 k0=a k1=a"),
	OK("get a/open b/t=5 c/peek d", T_GET,
	    "nkeys=4 k0=a/open o0=o k1=b/t=5 t1=5 k2=c/peek o2=p k3=d"),
	OK("get jobs+audit/open", T_GET, "n0=jobs+audit o0=o"),
	OK("get q/t=250", T_GET, "k0=q/t=250 n0=q t0=250"),
	OK("get q/t=0", T_GET, "t0=0"),
	OK("get q/t=00250", T_GET, "t0=250"),
	OK("get q/t=2147483648", T_GET, "t0=2147483648"),
	BAD("get q/t=2147483649", E_FMT, ""),
	BAD("get q/t=99999999999999999999999", E_FMT, ""),
	BAD("get q/t=-1", E_FMT, ""),
	BAD("get q/t=+5", E_FMT, ""),
	BAD("get q/t=0x10", E_FMT, ""),
	BAD("get q/t=", E_FMT, ""),
	BAD("get q/t=5s", E_FMT, ""),
	OK("get q/open", T_GET, "o0=o"),
	OK("get q/close", T_GET, "o0=c"),
	OK("get q/abort", T_GET, "o0=a"),
	OK("get q/peek", T_GET, "o0=p"),
	OK("get q/close/open", T_GET, "o0=oc"),
	OK("get q/open/close", T_GET, "o0=oc"),
	OK("get q/t=100/open", T_GET, "o0=o t0=100"),
	OK("get q/open/t=100", T_GET, "o0=o t0=100"),
	OK("get q/close/open/t=1000", T_GET, "o0=oc t0=1000"),
	OK("get q/open/open", T_GET, "o0=o"),
	OK("get q/t=5/t=9", T_GET, "t0=9"),
	OK("get q/peek/t=10", T_GET, "o0=p t0=10"),
	OK("get q/abort/t=10", T_GET, "o0=a t0=10"),
	OK("get q/peek/peek", T_GET, "o0=p"),
	BAD("get q/peek/open", E_COMB, ""),
	BAD("get q/peek/close", E_COMB, ""),
	BAD("get q/abort/open", E_COMB, ""),
	BAD("get q/open/abort", E_COMB, ""),
	BAD("get q/abort/close", E_COMB, ""),
	BAD("get q/peek/abort", E_COMB, ""),
	BAD("get q/abort/peek", E_COMB, ""),
	BAD("get q/open/close/peek/abort", E_COMB, ""),
	BAD("get q/bogus", E_OPT, ""),
	BAD("get q/OPEN", E_OPT, ""),
	BAD("get q/opened", E_OPT, ""),
	BAD("get q/ope", E_OPT, ""),
	BAD("get q/t", E_OPT, ""),
	BAD("get q/T=5", E_OPT, ""),
	/* abort with a delay; touch (retries, issue 37) */
	OK("get q/abort/delay=500", T_GET, "o0=a d0=500"),
	OK("get q/delay=0/abort", T_GET, "o0=a d0=0"),
	OK("get q/abort/delay=315360000000", T_GET, "o0=a d0=315360000000"),
	OK("get q/touch", T_GET, "o0=u"),
	OK("get q/touch/t=5", T_GET, "o0=u t0=5"),
	OK("get a/abort/delay=7 b/touch", T_GET, "o0=a d0=7 o1=u"),
	OK("touch q 30", T_TOUCH, "exp=30"),
	OK("touch q 0 noreply", T_TOUCH, "exp=0 nr=1"),
	BAD("touch q", E_FMT, ""),
	BAD("touch q x", E_FMT, ""),
	BAD("touch q 1 2", E_FMT, ""),
	BAD("touch q/open 1", E_QN, ""),
	BAD("get q/delay=5", E_COMB, ""),
	BAD("get q/open/delay=5", E_COMB, ""),
	BAD("get q/close/delay=5", E_COMB, ""),
	BAD("get q/abort/delay=315360000001", E_FMT, ""),
	BAD("get q/abort/delay=", E_FMT, ""),
	BAD("get q/abort/delay=-1", E_FMT, ""),
	BAD("get q/touch/open", E_COMB, ""),
	BAD("get q/touch/close", E_COMB, ""),
	BAD("get q/abort/touch", E_COMB, ""),
	BAD("get q/peek/touch", E_COMB, ""),
	BAD("get q/touched", E_OPT, ""),
	BAD("get q//open", E_OPT, ""),
	BAD("get q/", E_OPT, ""),
	BAD("get q/open/", E_OPT, ""),
	BAD("get q/bogus/peek/open", E_OPT, ""),
	BAD("get /open", E_QN, ""),
	BAD("get .q", E_QN, ""),
	BAD("get .", E_QN, ""),
	BAD("get q\x80", E_QN, ""),
	BAD("get \xc3\xa9t\xc3\xa9", E_QN, ""),
	BAD("get q\x7f", E_QN, ""),
	BAD("get q\x1b", E_QN, ""),
	BAD("get q\rx", E_QN, ""),
	BAD("get q/open\x01", E_QN, ""),
	BAD("get q/t=5\x80", E_QN, ""),
	BAD("get", E_FMT, ""),
	BAD("get   ", E_FMT, ""),
	BAD("gets", E_FMT, ""),
	BAD("get a q/bogus", E_OPT, ""),
	BAD("get a .b", E_QN, ""),
	BAD("get a b/peek/open", E_COMB, ""),
	BAD("get a/peek/open b/bogus", E_COMB, ""),

	/* ---- delete ---- */
	OK("delete q", T_DEL, "nkeys=1 k0=q"),
	OK("DELETE q", T_DEL, "k0=q"),
	OK("delete q noreply", T_DEL, "k0=q nr=1"),
	OK("delete jobs+audit", T_DEL, "k0=jobs+audit"),
	BAD("delete", E_FMT, ""),
	BAD("delete q/open", E_QN, ""),
	BAD("delete q/", E_QN, ""),
	BAD("delete .q", E_QN, ""),
	BAD("delete q\x80", E_QN, ""),
	BAD("delete q junk", E_FMT, ""),
	BAD("delete q 0", E_FMT, ""),
	BAD("delete q NOREPLY", E_FMT, ""),
	BAD("delete q noreply junk", E_FMT, ""),

	/* ---- flush ---- */
	OK("flush q", T_FL, "nkeys=1 k0=q"),
	OK("Flush q noreply", T_FL, "k0=q nr=1"),
	BAD("flush", E_FMT, ""),
	BAD("flush q/t=5", E_QN, ""),
	BAD("flush q x", E_FMT, ""),
	BAD("flush q noreply x", E_FMT, ""),

	/* ---- flush_all ---- */
	OK("flush_all", T_FLA, "nkeys=0 num1=-1"),
	OK("FLUSH_ALL", T_FLA, "num1=-1"),
	OK("flush_all noreply", T_FLA, "num1=-1 nr=1"),
	OK("flush_all 10", T_FLA, "num1=10"),
	OK("flush_all 0 noreply", T_FLA, "num1=0 nr=1"),
	BAD("flush_all -1", E_FMT, ""),
	BAD("flush_all abc", E_FMT, ""),
	BAD("flush_all noreply 10", E_FMT, ""),
	BAD("flush_all 10 20", E_FMT, ""),
	BAD("flush_all 10 noreply x", E_FMT, ""),

	/* ---- flush_expired ---- */
	OK("flush_expired q", T_FLE, "nkeys=1 k0=q"),
	OK("FLUSH_EXPIRED q", T_FLE, "k0=q"),
	BAD("flush_expired", E_FMT, ""),
	BAD("flush_expired q noreply", E_FMT, ""),
	BAD("flush_expired q/t=5", E_QN, ""),

	/* ---- monitor ---- */
	OK("monitor q 10", T_MON, "nkeys=1 k0=q num1=10 num2=-1"),
	OK("monitor q 10 5", T_MON, "num1=10 num2=5"),
	OK("MONITOR q 0 0", T_MON, "num1=0 num2=0"),
	BAD("monitor", E_FMT, ""),
	BAD("monitor q", E_FMT, ""),
	BAD("monitor q -1", E_FMT, ""),
	BAD("monitor q x", E_FMT, ""),
	BAD("monitor q 10 -1", E_FMT, ""),
	BAD("monitor q 10 5 6", E_FMT, ""),
	BAD("monitor q/open 10", E_QN, ""),

	/* ---- confirm ---- */
	OK("confirm q 3", T_CONF, "nkeys=1 k0=q num1=3"),
	OK("Confirm q 0", T_CONF, "num1=0"),
	OK("confirm q 9223372036854775807", T_CONF,
	    "num1=9223372036854775807"),
	BAD("confirm q 9223372036854775808", E_FMT, ""),
	BAD("confirm q", E_FMT, ""),
	BAD("confirm q -1", E_FMT, ""),
	BAD("confirm q 1 2", E_FMT, ""),
	BAD("confirm q/x 1", E_QN, ""),
	BAD("confirm", E_FMT, ""),

	/* ---- stats, status, version, verbosity, quit, shutdown ---- */
	OK("stats", T_STATS, "nkeys=0"),
	OK("STATS", T_STATS, ""),
	OK("stats  ", T_STATS, ""),
	BAD("stats items", E_FMT, ""),
	OK("stats queues", T_STATS, "nkeys=0"),
	OK("stats queues jo", T_STATS, "nkeys=1 k0=jo"),
	OK("stats queue jobs", T_STATS, "nkeys=1 k0=jobs"),
	BAD("stats queue", E_FMT, ""),
	BAD("stats queue a/b", E_FMT, ""),
	BAD("stats queue a b", E_FMT, ""),
	BAD("stats queues a b", E_FMT, ""),
	BAD("stats queues a/", E_QN, ""),
	OK("status", T_STAT, "st=q"),
	OK("status up", T_STAT, "st=up"),
	OK("status UP", T_STAT, "st=up"),
	OK("STATUS readonly", T_STAT, "st=ro"),
	OK("status ReadOnly", T_STAT, "st=ro"),
	OK("status quiescent", T_STAT, "st=qs"),
	OK("status QUIESCENT", T_STAT, "st=qs"),
	BAD("status down", E_FMT, ""),
	BAD("status upp", E_FMT, ""),
	BAD("status up now", E_FMT, ""),
	OK("version", T_VER, ""),
	OK("VERSION", T_VER, ""),
	BAD("version 1", E_FMT, ""),
	OK("verbosity 1", T_VERB, "num1=1"),
	OK("verbosity 0 noreply", T_VERB, "num1=0 nr=1"),
	OK("VERBOSITY 5", T_VERB, "num1=5"),
	BAD("verbosity", E_FMT, ""),
	BAD("verbosity -1", E_FMT, ""),
	BAD("verbosity x", E_FMT, ""),
	BAD("verbosity 1 2", E_FMT, ""),
	BAD("verbosity noreply", E_FMT, ""),
	OK("quit", T_QUIT, ""),
	OK("QUIT", T_QUIT, ""),
	BAD("quit now", E_FMT, ""),
	OK("shutdown", T_SHUT, ""),
	OK("ShutDown", T_SHUT, ""),
	BAD("shutdown now", E_FMT, ""),
};

#define NROWS	((int)(sizeof(rows) / sizeof(rows[0])))
#define WANT_KEYS	8

/* What a row expects, after defaults are applied. */
struct expect {
	long long nkeys;
	const char *raw[WANT_KEYS];
	size_t raw_len[WANT_KEYS];
	const char *name[WANT_KEYS];
	size_t name_len[WANT_KEYS];
	int opts[WANT_KEYS];		/* -1: not checked */
	long long tmo[WANT_KEYS];	/* LLONG_MIN: not checked */
	long long kdelay[WANT_KEYS];	/* get key's delay=; UNCHECKED */
	int has_flags, has_exp, has_bytes, has_delay, has_at;
	int has_num1, has_num2, has_st;
	unsigned long long flags, bytes;
	long long exp, delay, at, num1, num2, sw;
	int nr;
	enum proto_status_arg st;
};

#define UNCHECKED	INT64_MIN

static unsigned
opts_from(const char *v, size_t n)
{
	unsigned o = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		switch (v[i]) {
		case 'o': o |= PROTO_OPT_OPEN; break;
		case 'c': o |= PROTO_OPT_CLOSE; break;
		case 'a': o |= PROTO_OPT_ABORT; break;
		case 'p': o |= PROTO_OPT_PEEK; break;
		case 'u': o |= PROTO_OPT_TOUCH; break;
		case '-': break;
		default: ck_abort_msg("bad opts spec '%.*s'", (int)n, v);
		}
	}
	return o;
}

static long long
num_from(const char *v, size_t n)
{
	char buf[32];

	ck_assert_uint_lt(n, sizeof(buf));
	memcpy(buf, v, n);
	buf[n] = '\0';
	return strtoll(buf, NULL, 10);
}

static unsigned long long
unum_from(const char *v, size_t n)
{
	char buf[32];

	ck_assert_uint_lt(n, sizeof(buf));
	memcpy(buf, v, n);
	buf[n] = '\0';
	return strtoull(buf, NULL, 10);
}

/* Build the expectation for a successful parse from the row's spec. */
static void
expect_build(const struct row *r, struct expect *e)
{
	const char *p = r->want, *item, *eq, *v;
	size_t n, vn, i;
	int idx;

	memset(e, 0, sizeof(*e));
	e->sw = -1;
	e->delay = -1;
	e->at = -1;
	e->num2 = -1;
	e->has_delay = e->has_at = r->type == PROTO_CMD_SET;
	e->has_num2 = r->type == PROTO_CMD_MONITOR;
	e->has_st = r->type == PROTO_CMD_STATUS;
	e->st = PROTO_STATUS_QUERY;
	e->nkeys = -1;
	for (i = 0; i < WANT_KEYS; i++) {
		e->opts[i] = r->type == PROTO_CMD_GET ? 0 : -1;
		e->tmo[i] = r->type == PROTO_CMD_GET ? -1 : UNCHECKED;
		e->kdelay[i] = r->type == PROTO_CMD_GET ? -1 : UNCHECKED;
	}

	while (*p != '\0') {
		while (*p == ' ')
			p++;
		if (*p == '\0')
			break;
		item = p;
		while (*p != ' ' && *p != '\0')
			p++;
		n = (size_t)(p - item);
		eq = memchr(item, '=', n);
		ck_assert_msg(eq != NULL, "bad spec item in row '%s'", r->line);
		v = eq + 1;
		vn = (size_t)(item + n - v);
#define IS(lit)	((size_t)(eq - item) == strlen(lit) && \
		    memcmp(item, lit, strlen(lit)) == 0)
		if (IS("nkeys"))
			e->nkeys = num_from(v, vn);
		else if (IS("flags")) {
			e->has_flags = 1;
			e->flags = unum_from(v, vn);
		} else if (IS("exp")) {
			e->has_exp = 1;
			e->exp = num_from(v, vn);
		} else if (IS("bytes")) {
			e->has_bytes = 1;
			e->bytes = unum_from(v, vn);
		} else if (IS("delay")) {
			e->has_delay = 1;
			e->delay = num_from(v, vn);
		} else if (IS("at")) {
			e->has_at = 1;
			e->at = num_from(v, vn);
		} else if (IS("num1")) {
			e->has_num1 = 1;
			e->num1 = num_from(v, vn);
		} else if (IS("num2")) {
			e->has_num2 = 1;
			e->num2 = num_from(v, vn);
		} else if (IS("nr"))
			e->nr = (int)num_from(v, vn);
		else if (IS("sw"))
			e->sw = num_from(v, vn);
		else if (IS("st")) {
			e->has_st = 1;
			if (vn == 1 && v[0] == 'q')
				e->st = PROTO_STATUS_QUERY;
			else if (vn == 2 && memcmp(v, "up", 2) == 0)
				e->st = PROTO_STATUS_UP;
			else if (vn == 2 && memcmp(v, "ro", 2) == 0)
				e->st = PROTO_STATUS_READONLY;
			else if (vn == 2 && memcmp(v, "qs", 2) == 0)
				e->st = PROTO_STATUS_QUIESCENT;
			else
				ck_abort_msg("bad st spec in row '%s'", r->line);
		} else if (eq - item == 2 && item[1] >= '0' &&
		    item[1] < '0' + WANT_KEYS) {
			idx = item[1] - '0';
			switch (item[0]) {
			case 'k':
				e->raw[idx] = v;
				e->raw_len[idx] = vn;
				if (e->name[idx] == NULL) {
					const char *s = memchr(v, '/', vn);
					e->name_len[idx] = s != NULL ?
					    (size_t)(s - v) : vn;
				}
				break;
			case 'n':
				e->name[idx] = v;
				e->name_len[idx] = vn;
				break;
			case 'o':
				e->opts[idx] = (int)opts_from(v, vn);
				break;
			case 't':
				e->tmo[idx] = num_from(v, vn);
				break;
			case 'd':
				e->kdelay[idx] = num_from(v, vn);
				break;
			default:
				ck_abort_msg("bad spec in row '%s'", r->line);
			}
		} else
			ck_abort_msg("bad spec item in row '%s'", r->line);
#undef IS
	}
	/* an unnamed name is the raw token up to its first '/' */
	for (i = 0; i < WANT_KEYS; i++)
		if (e->name[i] == NULL && e->raw[i] != NULL)
			e->name[i] = e->raw[i];
}

static void
check_success(const struct row *r, const struct proto_cmd *c)
{
	struct expect e;
	size_t i;

	expect_build(r, &e);
	ck_assert_msg(c->type == r->type, "'%s': type %d, want %d", r->line,
	    (int)c->type, (int)r->type);
	ck_assert_msg(c->swallow == -1, "'%s': swallow %lld on success",
	    r->line, (long long)c->swallow);
	ck_assert_msg(c->noreply == (e.nr != 0), "'%s': noreply %d", r->line,
	    (int)c->noreply);
	if (e.nkeys >= 0)
		ck_assert_msg(c->nkeys == (size_t)e.nkeys,
		    "'%s': nkeys %zu, want %lld", r->line, c->nkeys, e.nkeys);
	for (i = 0; i < WANT_KEYS && i < c->nkeys; i++) {
		const struct proto_key *k = &c->keys[i];

		if (e.raw[i] != NULL) {
			ck_assert_msg(k->raw_len == e.raw_len[i] &&
			    memcmp(k->raw, e.raw[i], e.raw_len[i]) == 0,
			    "'%s': key %zu raw '%.*s'", r->line, i,
			    (int)k->raw_len, k->raw);
		}
		if (e.name[i] != NULL) {
			ck_assert_msg(k->name_len == e.name_len[i] &&
			    memcmp(k->name, e.name[i], e.name_len[i]) == 0,
			    "'%s': key %zu name '%.*s'", r->line, i,
			    (int)k->name_len, k->name);
			ck_assert_ptr_eq(k->name, k->raw);
		}
		if (e.opts[i] >= 0)
			ck_assert_msg(k->opts == (unsigned)e.opts[i],
			    "'%s': key %zu opts %#x, want %#x", r->line, i,
			    k->opts, (unsigned)e.opts[i]);
		if (e.tmo[i] != UNCHECKED)
			ck_assert_msg(k->timeout_ms == e.tmo[i],
			    "'%s': key %zu timeout %lld, want %lld", r->line,
			    i, (long long)k->timeout_ms, e.tmo[i]);
		if (e.kdelay[i] != UNCHECKED)
			ck_assert_msg(k->delay_ms == e.kdelay[i],
			    "'%s': key %zu delay %lld, want %lld", r->line,
			    i, (long long)k->delay_ms, e.kdelay[i]);
	}
	if (e.has_flags)
		ck_assert_msg(c->flags == e.flags, "'%s': flags %u", r->line,
		    (unsigned)c->flags);
	if (e.has_exp)
		ck_assert_msg(c->exptime == e.exp, "'%s': exptime %lld",
		    r->line, (long long)c->exptime);
	if (e.has_bytes)
		ck_assert_msg(c->bytes == e.bytes, "'%s': bytes %zu", r->line,
		    c->bytes);
	if (e.has_delay)
		ck_assert_msg(c->delay_ms == e.delay, "'%s': delay %lld",
		    r->line, (long long)c->delay_ms);
	if (e.has_at)
		ck_assert_msg(c->at_s == e.at, "'%s': at %lld", r->line,
		    (long long)c->at_s);
	if (e.has_num1)
		ck_assert_msg(c->num1 == e.num1, "'%s': num1 %lld", r->line,
		    (long long)c->num1);
	if (e.has_num2)
		ck_assert_msg(c->num2 == e.num2, "'%s': num2 %lld", r->line,
		    (long long)c->num2);
	if (e.has_st)
		ck_assert_msg(c->status == e.st, "'%s': status %d", r->line,
		    (int)c->status);
}

static void
check_failure(const struct row *r, const struct proto_cmd *c)
{
	struct expect e;

	expect_build(r, &e);
	ck_assert_msg(c->swallow == e.sw, "'%s': swallow %lld, want %lld",
	    r->line, (long long)c->swallow, e.sw);
}

START_TEST(test_table)
{
	const struct row *r = &rows[_i];
	struct proto_cmd *cmd = malloc(sizeof(*cmd));
	const char *err;

	ck_assert_ptr_nonnull(cmd);
	/* garbage in the struct must not leak into the result */
	memset(cmd, 0xa5, sizeof(*cmd));
	err = proto_parse_line(r->line, strlen(r->line), cmd);
	if (r->err == NULL) {
		ck_assert_msg(err == NULL, "'%s': got %s", r->line, err);
		check_success(r, cmd);
	} else {
		ck_assert_msg(err != NULL && strcmp(err, r->err) == 0,
		    "'%s': got %s, want %s", r->line,
		    err != NULL ? err : "success", r->err);
		check_failure(r, cmd);
	}
	free(cmd);
}
END_TEST

/* Every pointer in the result points into the caller's line. */
START_TEST(test_pointers_into_line)
{
	static const char line[] = "get  a/open\tbb/t=5  ccc ";
	struct proto_cmd cmd;

	ck_assert_ptr_null(proto_parse_line(line, strlen(line), &cmd));
	ck_assert_uint_eq(cmd.nkeys, 3);
	ck_assert_ptr_eq(cmd.keys[0].raw, line + 5);
	ck_assert_uint_eq(cmd.keys[0].raw_len, 6);
	ck_assert_ptr_eq(cmd.keys[0].name, line + 5);
	ck_assert_uint_eq(cmd.keys[0].name_len, 1);
	ck_assert_ptr_eq(cmd.keys[1].raw, line + 12);
	ck_assert_uint_eq(cmd.keys[1].raw_len, 6);
	ck_assert_uint_eq(cmd.keys[1].name_len, 2);
	ck_assert_ptr_eq(cmd.keys[2].raw, line + 20);
	ck_assert_uint_eq(cmd.keys[2].raw_len, 3);

	static const char set[] = "set jobs/delay=5 1 2 3";
	ck_assert_ptr_null(proto_parse_line(set, strlen(set), &cmd));
	ck_assert_ptr_eq(cmd.keys[0].raw, set + 4);
	ck_assert_uint_eq(cmd.keys[0].raw_len, 12);
	ck_assert_ptr_eq(cmd.keys[0].name, set + 4);
	ck_assert_uint_eq(cmd.keys[0].name_len, 4);

	static const char del[] = "delete  jobs noreply";
	ck_assert_ptr_null(proto_parse_line(del, strlen(del), &cmd));
	ck_assert_ptr_eq(cmd.keys[0].raw, del + 8);
	ck_assert_uint_eq(cmd.keys[0].raw_len, 4);
}
END_TEST

/* The parser honours len and never reads past it. */
START_TEST(test_len_bounds)
{
	static const char line[] = "get abc/open/bogus";
	struct proto_cmd cmd;
	char *heap;

	/* only "get abc" is the line */
	ck_assert_ptr_null(proto_parse_line(line, 7, &cmd));
	ck_assert_uint_eq(cmd.keys[0].raw_len, 3);
	ck_assert_uint_eq(cmd.keys[0].opts, 0);
	ck_assert_ptr_null(proto_parse_line(line, 12, &cmd));
	ck_assert_uint_eq(cmd.keys[0].opts, PROTO_OPT_OPEN);

	/* exactly sized heap buffer with no terminator: valgrind/ASan watch */
	heap = malloc(14);
	ck_assert_ptr_nonnull(heap);
	memcpy(heap, "get q/t=12345", 13);
	heap[13] = '9';
	ck_assert_ptr_null(proto_parse_line(heap, 14, &cmd));
	ck_assert_int_eq(cmd.keys[0].timeout_ms, 123459);
	memcpy(heap, "set q 0 0 5 no", 14);
	ck_assert_str_eq(proto_parse_line(heap, 14, &cmd), PROTO_ERR_FORMAT);
	ck_assert_int_eq(cmd.swallow, 7);
	free(heap);
}
END_TEST

/* NUL bytes are data, not terminators. */
START_TEST(test_nul_bytes)
{
	struct proto_cmd cmd;

	ck_assert_str_eq(proto_parse_line("get q\0x", 7, &cmd), PROTO_ERR_QNAME);
	ck_assert_str_eq(proto_parse_line("get q/open\0", 11, &cmd),
	    PROTO_ERR_QNAME);
	ck_assert_str_eq(proto_parse_line("g\0et q", 6, &cmd),
	    PROTO_ERR_UNKNOWN);
	ck_assert_str_eq(proto_parse_line("set q\0 0 0 5", 12, &cmd),
	    PROTO_ERR_QNAME);
	ck_assert_int_eq(cmd.swallow, 7);
	ck_assert_str_eq(proto_parse_line("set q 0 0 5\0", 12, &cmd),
	    PROTO_ERR_FORMAT);
	ck_assert_int_eq(cmd.swallow, -1);
	ck_assert_str_eq(proto_parse_line("delete q\0", 9, &cmd),
	    PROTO_ERR_QNAME);
	ck_assert_str_eq(proto_parse_line("\0", 1, &cmd), PROTO_ERR_UNKNOWN);
}
END_TEST

/* Queue names of 250 bytes are fine, 251 are not, for every command. */
START_TEST(test_name_length)
{
	char line[600], name[260];
	struct proto_cmd cmd;
	int n;

	memset(name, 'x', sizeof(name));

	n = snprintf(line, sizeof(line), "get %.250s", name);
	ck_assert_ptr_null(proto_parse_line(line, (size_t)n, &cmd));
	ck_assert_uint_eq(cmd.keys[0].name_len, 250);
	n = snprintf(line, sizeof(line), "get %.251s", name);
	ck_assert_str_eq(proto_parse_line(line, (size_t)n, &cmd),
	    PROTO_ERR_QNAME);

	/* the limit is on the name, not on the token with its options */
	n = snprintf(line, sizeof(line), "get %.250s/t=1000/open", name);
	ck_assert_ptr_null(proto_parse_line(line, (size_t)n, &cmd));
	ck_assert_uint_eq(cmd.keys[0].name_len, 250);
	ck_assert_uint_eq(cmd.keys[0].raw_len, 250 + 12);
	n = snprintf(line, sizeof(line), "get %.251s/open", name);
	ck_assert_str_eq(proto_parse_line(line, (size_t)n, &cmd),
	    PROTO_ERR_QNAME);

	n = snprintf(line, sizeof(line), "set %.250s 0 0 5", name);
	ck_assert_ptr_null(proto_parse_line(line, (size_t)n, &cmd));
	ck_assert_uint_eq(cmd.keys[0].name_len, 250);
	n = snprintf(line, sizeof(line), "set %.251s/delay=1 0 0 5", name);
	ck_assert_str_eq(proto_parse_line(line, (size_t)n, &cmd),
	    PROTO_ERR_QNAME);
	ck_assert_int_eq(cmd.swallow, 7);

	n = snprintf(line, sizeof(line), "delete %.250s", name);
	ck_assert_ptr_null(proto_parse_line(line, (size_t)n, &cmd));
	n = snprintf(line, sizeof(line), "delete %.251s", name);
	ck_assert_str_eq(proto_parse_line(line, (size_t)n, &cmd),
	    PROTO_ERR_QNAME);
	n = snprintf(line, sizeof(line), "monitor %.251s 1", name);
	ck_assert_str_eq(proto_parse_line(line, (size_t)n, &cmd),
	    PROTO_ERR_QNAME);

	/* a one-byte name is the shortest */
	ck_assert_ptr_null(proto_parse_line("get x", 5, &cmd));
	ck_assert_uint_eq(cmd.keys[0].name_len, 1);
}
END_TEST

/* Append " q<i>" keys to a "get" line. */
static size_t
build_get(char *buf, size_t size, int nkeys, const char *suffix)
{
	size_t len;
	int i, n;

	len = (size_t)snprintf(buf, size, "get");
	for (i = 0; i < nkeys; i++) {
		n = snprintf(buf + len, size - len, " q%d%s", i, suffix);
		ck_assert_int_gt(n, 0);
		len += (size_t)n;
		ck_assert_uint_lt(len, size);
	}
	return len;
}

START_TEST(test_key_count)
{
	static char line[PROTO_MAX_GET_LINE + 1];
	static struct proto_cmd cmd;
	size_t len;
	int i;

	len = build_get(line, sizeof(line), PROTO_MAX_GET_KEYS, "");
	ck_assert_uint_gt(len, PROTO_MAX_LINE);
	ck_assert_ptr_null(proto_parse_line(line, len, &cmd));
	ck_assert_uint_eq(cmd.nkeys, PROTO_MAX_GET_KEYS);
	for (i = 0; i < PROTO_MAX_GET_KEYS; i++) {
		char want[8];
		int n = snprintf(want, sizeof(want), "q%d", i);

		ck_assert_uint_eq(cmd.keys[i].raw_len, (size_t)n);
		ck_assert(memcmp(cmd.keys[i].raw, want, (size_t)n) == 0);
		ck_assert(cmd.keys[i].raw >= line);
		ck_assert(cmd.keys[i].raw + cmd.keys[i].raw_len <= line + len);
	}

	len = build_get(line, sizeof(line), PROTO_MAX_GET_KEYS + 1, "");
	ck_assert_str_eq(proto_parse_line(line, len, &cmd),
	    PROTO_ERR_TOO_MANY_KEYS);
	/* "getsq0 ...": not a get, so over the short cap */
	memcpy(line, "gets", 4);
	ck_assert_str_eq(proto_parse_line(line, len, &cmd),
	    PROTO_ERR_LINE_TOO_LONG);

	/* all keys with options, trailing blanks do not count as keys */
	len = build_get(line, sizeof(line), PROTO_MAX_GET_KEYS, "/t=100/open");
	memcpy(line + len, "   ", 3);
	ck_assert_ptr_null(proto_parse_line(line, len + 3, &cmd));
	ck_assert_uint_eq(cmd.nkeys, PROTO_MAX_GET_KEYS);
	ck_assert_int_eq(cmd.keys[PROTO_MAX_GET_KEYS - 1].timeout_ms, 100);
	ck_assert_uint_eq(cmd.keys[PROTO_MAX_GET_KEYS - 1].opts, PROTO_OPT_OPEN);

	/* a bad key before the cap is reported as such */
	len = build_get(line, sizeof(line), PROTO_MAX_GET_KEYS + 5, "/bogus");
	ck_assert_str_eq(proto_parse_line(line, len, &cmd), PROTO_ERR_OPTION);
}
END_TEST

START_TEST(test_line_length)
{
	static char line[PROTO_MAX_GET_LINE + 2];
	static struct proto_cmd cmd;

	/* get and gets lines may be long ... */
	memset(line, ' ', sizeof(line));
	memcpy(line, "get q", 5);
	ck_assert_ptr_null(proto_parse_line(line, PROTO_MAX_LINE, &cmd));
	ck_assert_uint_eq(cmd.nkeys, 1);
	ck_assert_ptr_null(proto_parse_line(line, PROTO_MAX_GET_LINE, &cmd));
	ck_assert_str_eq(proto_parse_line(line, PROTO_MAX_GET_LINE + 1, &cmd),
	    PROTO_ERR_LINE_TOO_LONG);
	memcpy(line, "GETS q", 6);
	ck_assert_ptr_null(proto_parse_line(line, PROTO_MAX_GET_LINE, &cmd));
	ck_assert(proto_is_get_line(line, 6));
	ck_assert(!proto_is_get_line(line, 4));	/* "GETS" may go on */
	/* ... every other line keeps the short cap */
	memcpy(line, "version", 7);
	ck_assert_ptr_null(proto_parse_line(line, PROTO_MAX_LINE, &cmd));
	ck_assert_str_eq(proto_parse_line(line, PROTO_MAX_LINE + 1, &cmd),
	    PROTO_ERR_LINE_TOO_LONG);
	ck_assert(!proto_is_get_line(line, 64));
}
END_TEST

/* Results of one parse never leak into the next on a reused struct. */
START_TEST(test_reuse)
{
	struct proto_cmd cmd;
	const char *l;

	l = "set q/delay=5 1 2 3 noreply";
	ck_assert_ptr_null(proto_parse_line(l, strlen(l), &cmd));
	ck_assert(cmd.noreply);
	l = "set q/at=9 1 2 3";
	ck_assert_ptr_null(proto_parse_line(l, strlen(l), &cmd));
	ck_assert_int_eq(cmd.delay_ms, -1);
	ck_assert_int_eq(cmd.at_s, 9);
	ck_assert(!cmd.noreply);

	l = "set q 0 0 x junk";
	ck_assert_str_eq(proto_parse_line(l, strlen(l), &cmd),
	    PROTO_ERR_FORMAT);
	ck_assert_int_eq(cmd.swallow, -1);
	l = "set q 0 0 3 junk";
	ck_assert_str_eq(proto_parse_line(l, strlen(l), &cmd),
	    PROTO_ERR_FORMAT);
	ck_assert_int_eq(cmd.swallow, 5);
	l = "get a/open b";
	ck_assert_ptr_null(proto_parse_line(l, strlen(l), &cmd));
	ck_assert_int_eq(cmd.swallow, -1);
	ck_assert_uint_eq(cmd.nkeys, 2);
	l = "monitor q 5 2";
	ck_assert_ptr_null(proto_parse_line(l, strlen(l), &cmd));
	l = "monitor q 5";
	ck_assert_ptr_null(proto_parse_line(l, strlen(l), &cmd));
	ck_assert_int_eq(cmd.num2, -1);
	l = "status up";
	ck_assert_ptr_null(proto_parse_line(l, strlen(l), &cmd));
	l = "status";
	ck_assert_ptr_null(proto_parse_line(l, strlen(l), &cmd));
	ck_assert_int_eq(cmd.status, PROTO_STATUS_QUERY);
	l = "stats";
	ck_assert_ptr_null(proto_parse_line(l, strlen(l), &cmd));
	ck_assert_uint_eq(cmd.nkeys, 0);
	ck_assert_int_eq(cmd.type, PROTO_CMD_STATS);
}
END_TEST

/* Error replies compare by text: literals need not be merged across files. */
static int
same_err(const char *got, const char *want)
{
	if (got == NULL || want == NULL)
		return got == want;
	return strcmp(got, want) == 0;
}

/*
 * Every byte value inside a key: the parser's verdict agrees with the
 * queue-name rules of qname.c, on get, set and delete alike.
 */
START_TEST(test_every_byte)
{
	struct proto_cmd cmd;
	char name[3], line[32];
	const char *err, *want;
	int c, n;

	for (c = 0; c < 256; c++) {
		if (c == ' ' || c == '\t')
			continue;	/* separators: "a b" is two tokens */
		name[0] = 'a';
		name[1] = (char)c;
		name[2] = 'b';
		if (c == '/')
			want = PROTO_ERR_OPTION;	/* "a/b": option "b" */
		else if (saker_qname_valid(name, 3))
			want = NULL;
		else
			want = PROTO_ERR_QNAME;

		/* memcpy, not %s: the byte may be a NUL */
		n = snprintf(line, sizeof(line), "get xxx");
		memcpy(line + 4, name, 3);
		err = proto_parse_line(line, (size_t)n, &cmd);
		ck_assert_msg(same_err(err, want), "get, byte %#x: %s", c,
		    err != NULL ? err : "success");

		n = snprintf(line, sizeof(line), "set xxx 0 0 1");
		memcpy(line + 4, name, 3);
		err = proto_parse_line(line, (size_t)n, &cmd);
		ck_assert_msg(same_err(err, want), "set, byte %#x: %s", c,
		    err != NULL ? err : "success");
		ck_assert_int_eq(cmd.swallow, want == NULL ? -1 : 3);

		n = snprintf(line, sizeof(line), "delete xxx");
		memcpy(line + 7, name, 3);
		err = proto_parse_line(line, (size_t)n, &cmd);
		ck_assert_msg(same_err(err, c == '/' ? PROTO_ERR_QNAME : want),
		    "delete, byte %#x: %s", c, err != NULL ? err : "success");
	}
	/* and as the first byte, where '.' is also refused */
	ck_assert_str_eq(proto_parse_line("get .ab", 7, &cmd), PROTO_ERR_QNAME);
	ck_assert_ptr_null(proto_parse_line("get a.b", 7, &cmd));
	ck_assert_ptr_null(proto_parse_line("get +ab", 7, &cmd));
	{
		static const char punct[] =
		    "get ~!@#$%^&()_-=[]{};:'\"\\,<.>?`|";

		ck_assert_ptr_null(proto_parse_line(punct, strlen(punct), &cmd));
		ck_assert_uint_eq(cmd.keys[0].name_len, strlen(punct) - 4);
		/* but '*', the queues= patterns' "any" (issue 35) */
		ck_assert_str_eq(proto_parse_line("get a*b", 7, &cmd), PROTO_ERR_QNAME);
	}
}
END_TEST

/* Every error reply is a complete line ending in CRLF. */
START_TEST(test_error_strings)
{
	static const char *const errs[] = {
		PROTO_ERR_UNKNOWN, PROTO_ERR_FORMAT, PROTO_ERR_CHUNK,
		PROTO_ERR_TOO_LARGE, PROTO_ERR_LINE_TOO_LONG,
		PROTO_ERR_TOO_MANY_KEYS, PROTO_ERR_QNAME,
		PROTO_ERR_COMBINATION, PROTO_ERR_OPTION, PROTO_ERR_ID,
	};
	size_t i, n;

	for (i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		n = strlen(errs[i]);
		ck_assert_uint_gt(n, 2);
		ck_assert(memcmp(errs[i] + n - 2, "\r\n", 2) == 0);
		ck_assert_ptr_null(memchr(errs[i], '\n', n - 1));
	}
	/* the table really is table-sized */
	ck_assert_int_gt(NROWS, 100);
}
END_TEST

/* A set's deduplication id: /id=KEY, 1..128 bytes of the key charset
 * without '/', once, with delay= or at= in any order; a bad one is one
 * CLIENT_ERROR naming the id, and the data block is still swallowed. */
START_TEST(test_set_id)
{
	static struct proto_scratch sc;
	struct proto_cmd cmd;
	struct proto_key k;
	char line[512], key[300];
	const char *l, *id;
	size_t id_len;
	int64_t d, at;

	l = "set q/id=order-17 0 0 3";
	ck_assert_ptr_null(proto_parse_line(l, strlen(l), &cmd));
	ck_assert_uint_eq(cmd.id_len, 8);
	ck_assert(memcmp(cmd.id, "order-17", 8) == 0);
	ck_assert_uint_eq(cmd.keys[0].name_len, 1);
	ck_assert_int_eq(cmd.delay_ms, -1);
	/* add enqueues like set: it takes an id too */
	l = "add q/delay=50/id=x.y:z 0 0 3";
	ck_assert_ptr_null(proto_parse_line(l, strlen(l), &cmd));
	ck_assert_int_eq(cmd.delay_ms, 50);
	ck_assert_uint_eq(cmd.id_len, 5);
	ck_assert(memcmp(cmd.id, "x.y:z", 5) == 0);
	l = "set q/id=a/at=9 0 0 3";
	ck_assert_ptr_null(proto_parse_line(l, strlen(l), &cmd));
	ck_assert_int_eq(cmd.at_s, 9);
	ck_assert_uint_eq(cmd.id_len, 1);
	/* a line without one clears the last line's */
	l = "set q 0 0 3";
	ck_assert_ptr_null(proto_parse_line(l, strlen(l), &cmd));
	ck_assert_ptr_null(cmd.id);
	ck_assert_uint_eq(cmd.id_len, 0);

	/* 128 bytes yes, 129 no */
	memset(key, 'k', sizeof(key));
	snprintf(line, sizeof(line), "set q/id=%.128s 0 0 3", key);
	ck_assert_ptr_null(proto_parse_line(line, strlen(line), &cmd));
	ck_assert_uint_eq(cmd.id_len, 128);
	snprintf(line, sizeof(line), "set q/id=%.129s 0 0 3", key);
	ck_assert_str_eq(proto_parse_line(line, strlen(line), &cmd),
	    PROTO_ERR_ID);
	ck_assert_int_eq(cmd.swallow, 5);
	l = "set q/id= 0 0 3";
	ck_assert_str_eq(proto_parse_line(l, strlen(l), &cmd), PROTO_ERR_ID);
	ck_assert_int_eq(cmd.swallow, 5);
	/* a control character or high byte in the id: the id's error */
	l = "set q/id=a\x01" "b 0 0 3";
	ck_assert_str_eq(proto_parse_line(l, strlen(l), &cmd), PROTO_ERR_ID);
	ck_assert_int_eq(cmd.swallow, 5);
	l = "set q/delay=1/id=\xff 0 0 3";
	ck_assert_str_eq(proto_parse_line(l, strlen(l), &cmd), PROTO_ERR_ID);
	/* ... in the name it is still a bad name */
	l = "set q\x01/id=a 0 0 3";
	ck_assert_str_eq(proto_parse_line(l, strlen(l), &cmd), PROTO_ERR_QNAME);
	/* "/" ends the id: what follows is an option */
	l = "set q/id=a/b 0 0 3";
	ck_assert_str_eq(proto_parse_line(l, strlen(l), &cmd), PROTO_ERR_OPTION);
	/* twice, even the same: malformed */
	l = "set q/id=a/id=a 0 0 3";
	ck_assert_str_eq(proto_parse_line(l, strlen(l), &cmd), PROTO_ERR_FORMAT);
	/* not a get option */
	l = "get q/id=a";
	ck_assert_str_eq(proto_parse_line(l, strlen(l), &cmd), PROTO_ERR_OPTION);

	/* binary and meta keys: the id points into the caller's key */
	snprintf(key, sizeof(key), "jobs/id=r-1/delay=5");
	ck_assert_ptr_null(proto_parse_set_key(&sc, key, strlen(key), &k, &d,
	    &at, &id, &id_len));
	ck_assert_ptr_eq(id, key + 8);
	ck_assert_uint_eq(id_len, 3);
	ck_assert_int_eq(d, 5);
	ck_assert_ptr_null(proto_parse_set_key(&sc, "jobs", 4, &k, &d, &at,
	    &id, &id_len));
	ck_assert_ptr_null(id);
	ck_assert_str_eq(proto_parse_set_key(&sc, "jobs/id=", 8, &k, &d, &at,
	    &id, &id_len), PROTO_ERR_ID);
	/* a binary key may hold a space: in the id it is the id's error */
	ck_assert_str_eq(proto_parse_set_key(&sc, "jobs/id=a b", 11, &k, &d,
	    &at, &id, &id_len), PROTO_ERR_ID);
	ck_assert_str_eq(proto_parse_set_key(&sc, "jobs/delay=1/id=\tb", 18,
	    &k, &d, &at, &id, &id_len), PROTO_ERR_ID);
	ck_assert_str_eq(proto_parse_set_key(&sc, "jo bs/id=a", 10, &k, &d,
	    &at, &id, &id_len), PROTO_ERR_QNAME);
	ck_assert_str_eq(proto_parse_set_key(&sc, "jobs/delay= 1/id=a", 18,
	    &k, &d, &at, &id, &id_len), PROTO_ERR_QNAME);
}
END_TEST

static Suite *
proto_suite(void)
{
	Suite *s = suite_create("proto_text");
	TCase *tc;

	tc = tcase_create("table");
	tcase_add_loop_test(tc, test_table, 0, NROWS);
	suite_add_tcase(s, tc);

	tc = tcase_create("edges");
	tcase_add_test(tc, test_pointers_into_line);
	tcase_add_test(tc, test_len_bounds);
	tcase_add_test(tc, test_nul_bytes);
	tcase_add_test(tc, test_name_length);
	tcase_add_test(tc, test_key_count);
	tcase_add_test(tc, test_line_length);
	tcase_add_test(tc, test_reuse);
	tcase_add_test(tc, test_set_id);
	tcase_add_test(tc, test_every_byte);
	tcase_add_test(tc, test_error_strings);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(proto_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
