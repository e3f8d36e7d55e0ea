#!/usr/bin/env python3
"""gen_seeds.py -- (re)writes the seed corpus under tests/fuzz/corpus/{proto,dump,store,conn,http,conf,tls}.

Run from anywhere: python3 tests/fuzz/gen_seeds.py.  Deterministic.  Files
named regress-* are inputs that once found bugs; this script never touches
them.
"""
import os, random, struct

HERE = os.path.dirname(os.path.abspath(__file__))
C = os.path.join(HERE, "corpus")

def write(sub, name, data):
    os.makedirs(os.path.join(C, sub), exist_ok=True)
    with open(os.path.join(C, sub, name), "wb") as f:
        f.write(data)

# --- proto: every command form of docs/protocol.md, plus error forms ------
PROTO = [
    b"set jobs 0 0 5", b"set jobs 123 0 5 noreply", b"set jobs 4294967295 60 0",
    b"set jobs 0 2592001 3", b"set jobs 0 -1 3", b"set jobs/delay=250 0 0 5",
    b"set jobs/at=1900000000 0 0 5", b"set jobs+audit 0 0 1",
    b"set jobs/delay=1/at=2 0 0 1", b"set jobs 0 0 18446744073709551616",
    b"set .bad 0 0 1", b"set jobs 0 0", b"SET Jobs 0 0 1",
    b"get jobs", b"gets jobs", b"get a b c d", b"get jobs/t=250",
    b"get jobs/open", b"get jobs/close", b"get jobs/close/open",
    b"get jobs/abort", b"get jobs/peek", b"get jobs/t=100/open",
    b"get jobs/peek/open", b"get jobs/abort/open", b"get jobs/bogus",
    b"get " + b" ".join(b"k%d" % i for i in range(129)),
    b"get jobs/t=99999999999999999999", b"GET jobs",
    b"delete jobs", b"delete jobs noreply", b"flush jobs", b"flush jobs noreply",
    b"flush_all", b"flush_all noreply", b"flush_all 10", b"flush_expired jobs",
    b"monitor jobs 5", b"monitor jobs 5 10", b"confirm jobs 1", b"confirm jobs -1",
    b"stats", b"status", b"status up", b"status readonly", b"status quiescent",
    b"status bogus", b"version", b"verbosity 1", b"verbosity 1 noreply",
    b"quit", b"shutdown", b"bogus", b"", b" ", b"get", b"set",
    b"get " + b"x" * 251, b"set jobs\x00 0 0 1",
    # deduplication ids (issue 44)
    b"set jobs/id=order-17 0 0 5", b"add jobs/delay=5/id=a 0 0 1",
    b"set jobs/id= 0 0 1", b"set jobs/id=a/id=a 0 0 1",
    b"set jobs/id=" + b"i" * 129 + b" 0 0 1", b"set jobs/id=a\x01 0 0 1",
    b"get jobs/id=a",
]
for i, line in enumerate(PROTO):
    write("proto", "seed-%03d" % i, line + b"\r\n")
write("proto", "seed-session",
      b"set jobs 0 0 5\r\nhello\r\nget jobs/open\r\nget jobs/close\r\n"
      b"stats\nversion\r\nquit\r\n")

# --- dump: the stream of src/tools/dump.h ------------------------------------------
def fnv(b, h=0xcbf29ce484222325):
    for x in b:
        h ^= x
        h = (h * 0x100000001b3) & 0xffffffffffffffff
    return h

def dump(queues):
    out = b"SAKERDMP\r\n\x1a\n" + struct.pack(">I", 1)
    nitems = 0
    for name, items in queues:
        q = b"Q" + struct.pack(">H", len(name)) + name
        for tag, flags, exp, due, created, data in items:
            q += tag + struct.pack(">IqqqI", flags, exp, due, created, len(data)) + data
        q += b"E" + struct.pack(">Q", len(items))
        q += struct.pack(">Q", fnv(q))
        out += q
        nitems += len(items)
    out += b"Z" + struct.pack(">QQ", len(queues), nitems)
    out += struct.pack(">Q", fnv(out))
    return out

T = 1700000000000
write("dump", "seed-empty", dump([]))
write("dump", "seed-one", dump([(b"jobs", [(b"R", 0, 0, 0, T, b"hello")])]))
write("dump", "seed-mixed", dump([
    (b"a", [(b"R", 7, 0, 0, T, b""), (b"R", 1, T + 5000, 0, T, b"x" * 300)]),
    (b"jobs+audit", [(b"D", 0, 0, T + 1000, T, b"later")]),
    (b"z", [])]))
good = dump([(b"jobs", [(b"R", 0, 0, 0, T, b"abc")])])
write("dump", "seed-truncated", good[:-5])
bad = bytearray(good); bad[-1] ^= 1
write("dump", "seed-badsum", bytes(bad))
write("dump", "seed-badversion", good[:12] + struct.pack(">I", 2) + good[16:])
write("dump", "seed-trailing", good + b"x")

# --- store: op programs for fuzz_store.c (random but fixed) ------------------
rng = random.Random(10)
for i in range(16):
    n = [16, 64, 256, 1024][i % 4]
    write("store", "seed-%02d" % i, bytes(rng.randrange(256) for _ in range(n)))
# puts (op 0) with delays, time passing (9), promote (6), take/open/confirm/release
prog = b""
for k in range(20):
    prog += bytes([0, k % 3, 1 | 2, k, 0, 0, 0, k, 10 + k, 50])
prog += bytes([9, 200, 3, 6]) + bytes([2, 0, 0, 2, 1, 0, 5, 0, 0, 4, 1, 1, 12])
write("store", "seed-lifecycle", prog)

# --- conn: whole client sessions for fuzz_conn.c ------------------------------
# The first byte picks how the rest is written: < 128 in one piece, else in
# chunks of (byte & 63) + 1 bytes.
def sess(name, body, chunk=None):
    write("conn", name, bytes([0 if chunk is None else 128 | (chunk - 1)]) + body)

TEXT = [
    b"set jobs 0 0 5\r\nhello\r\nget jobs\r\nget jobs\r\n",
    b"set jobs 7 0 3\r\nabc\r\nget jobs/open\r\nget jobs/close\r\nget jobs/peek\r\n",
    b"set jobs 0 0 1\r\nx\r\nget jobs/open\r\nget jobs/abort\r\nget jobs/close/open\r\n",
    b"set jobs/delay=1 0 0 1\r\nd\r\nget jobs/t=20\r\nstats\r\n",
    b"set jobs/at=1 0 0 1\r\nd\r\nget jobs\r\n",
    b"set a 0 0 1\r\n1\r\nset b 0 0 1\r\n2\r\nget a b c a\r\ngets b\r\n",
    b"get jobs/t=5\r\nset jobs 0 0 1\r\nz\r\n",
    b"set jobs+audit 0 0 2\r\nfo\r\nget jobs\r\nget jobs+audit\r\ndelete jobs+audit\r\n",
    b"set jobs 0 0 2 noreply\r\nab\r\nflush jobs\r\nflush_all\r\ndelete jobs\r\nget jobs\r\n",
    b"set jobs 0 -1 1\r\nx\r\nflush_expired jobs\r\nget jobs\r\n",
    b"set jobs 0 0 1\r\nx\r\nset jobs 0 0 1\r\ny\r\nmonitor jobs 1 5\r\nconfirm jobs 2\r\n",
    b"status readonly\r\nset jobs 0 0 1\r\nx\r\nstatus quiescent\r\nget jobs\r\nstatus\r\n",
    b"set jobs 0 0 70000\r\n" + b"x" * 70000 + b"\r\nget jobs\r\n",
    b"set jobs 0 0 3\r\nabcdef\r\nget jobs\r\n",
    b"set jobs 0 0 z\r\nbogus\r\n\r\nget " + b"k" * 300 + b"\r\nversion\r\n",
    b"verbosity 1\r\nversion\r\nstats\r\nquit\r\nget jobs\r\n",
    b"get jobs\nset jobs 0 0 1\nx\nget jobs\n",
    b"get " + b" ".join(b"q%d" % i for i in range(100)) + b"\r\n",
    b"set jobs/id=a 0 0 1\r\nx\r\nset jobs/id=a 0 0 1\r\ny\r\n"
    b"set jobs/id= 0 0 1\r\nz\r\nget jobs\r\nget jobs\r\nstats\r\n",
]
for i, t in enumerate(TEXT):
    sess("seed-text-%02d" % i, t)
    sess("seed-text-%02d-split" % i, t, chunk=1 + i % 7)

def bin_req(op, key=b"", val=b"", extra=b"", opaque=0):
    body = extra + key + val
    return struct.pack(">BBHBBHIIQ", 0x80, op, len(key), len(extra), 0, 0,
                       len(body), opaque, 0) + body

SETX = struct.pack(">II", 5, 0)
BIN = [
    bin_req(0x01, b"jobs", b"hello", SETX) + bin_req(0x00, b"jobs"),
    bin_req(0x11, b"jobs", b"a", SETX, 1) + bin_req(0x11, b"jobs", b"b", SETX, 2)
    + bin_req(0x0d, b"jobs", opaque=3) + bin_req(0x09, b"none", opaque=4)
    + bin_req(0x0c, b"jobs", opaque=5) + bin_req(0x0a, opaque=6),
    bin_req(0x01, b"jobs/open", b"x", SETX) + bin_req(0x00, b"jobs/open")
    + bin_req(0x00, b"jobs/close"),
    bin_req(0x04, b"jobs") + bin_req(0x08) + bin_req(0x18) + bin_req(0x14, b"x"),
    bin_req(0x0b) + bin_req(0x10) + bin_req(0x10, b"items") + bin_req(0x1b, extra=b"\0\0\0\1"),
    bin_req(0x20) + bin_req(0x21, b"PLAIN", b"\0u\0p") + bin_req(0x22, b"PLAIN", b""),
    bin_req(0x02, b"jobs", b"x", SETX) + bin_req(0x03, b"jobs", b"x", SETX),
    bin_req(0x01, b"jobs", b"x", b"\0\0") + bin_req(0x00, b"k" * 251),
    bin_req(0x55, b"what") + bin_req(0x07),
    bin_req(0x00, b"jobs")[:30],
    struct.pack(">BBHBBHIIQ", 0x80, 0x01, 4, 8, 0, 0, 0xffffffff, 0, 0) + b"jobs",
    bin_req(0x01, b"jobs/id=b1", b"x", SETX) + bin_req(0x02, b"jobs/id=b1", b"y", SETX)
    + bin_req(0x01, b"jobs/id=", b"z", SETX) + bin_req(0x00, b"jobs"),
]
for i, b in enumerate(BIN):
    sess("seed-bin-%02d" % i, b)
    sess("seed-bin-%02d-split" % i, b, chunk=1 + (i * 5) % 24)

META = [
    b"ms jobs 5 T0 F7\r\nhello\r\nmg jobs v f k s t c\r\n",
    b"ms jobs 1 q\r\nx\r\nmg jobs v q\r\nmg none v q\r\nmn\r\n",
    b"ms jobs 2 b\r\nab\r\nmg amobz v b\r\nmg am9icw== v b O123\r\n",
    b"ms jobs 1 MS\r\nx\r\nms jobs 1 ME\r\ny\r\nmd jobs\r\nmd jobs q\r\nmn\r\n",
    b"me jobs\r\nmg\r\nms jobs\r\nms jobs abc\r\nmg " + b"k" * 260 + b" v\r\n",
    b"ms jobs/delay=5 1\r\nx\r\nmg jobs/open v\r\nmg jobs/close v\r\n",
    b"ms jobs 3 I\r\nabc\r\nmg jobs v N30\r\nmg jobs E5 v\r\nmx\r\n",
    b"ms jobs/id=m1 1\r\nx\r\nms jobs/id=m1 1\r\ny\r\nms jobs 1\r\nz\r\n"
    b"mg jobs v i d\r\nmg jobs v i\r\nmg jobs i5\r\n",
]
for i, m in enumerate(META):
    sess("seed-meta-%02d" % i, m)
    sess("seed-meta-%02d-split" % i, m, chunk=1 + i % 5)

# --- http: requests to --http (first byte: 0 = written whole) -------------
import base64
def b64(s):
    return base64.b64encode(s)
HTTP = [
    b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic " + b64(b"a:p") + b"\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nAuthorization: Basic " + b64(b"u:p") + b"\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nAuthorization: Basic " + b64(b"a:wrong") + b"\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nAuthorization: Basic !!!!\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nAuthorization: Basic " + b64(b"nocolon") + b"\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nAuthorization: Bearer x\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nAuthorization: Basic " + b64(b"a:" + b"p" * 600) + b"\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\n\r\n",
    b"HEAD /healthz HTTP/1.0\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nConnection: keep-alive\r\n\r\nGET /metrics HTTP/1.1\r\nAuthorization: Basic " + b64(b"a:p") + b"\r\n\r\n",
    b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
    b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"POST /x HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
    b"DELETE /metrics HTTP/1.1\r\n\r\n",
    b"GET /nope?x=%00%zz HTTP/1.1\r\n\r\n",
    b"GET /metrics?x=1#frag HTTP/1.1\r\n\r\n",
    b"GET http://h/metrics HTTP/1.1\r\n\r\n",
    b"GET /metrics HTTP/9.9\r\n\r\n",
    b"GET /metrics\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * 9000 + b"\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\n" + b"".join(b"H%d: v\r\n" % i for i in range(200)) + b"\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\n",
    b"\r\n\r\n",
    b"GET /api/queues HTTP/1.1\r\n\r\n",
]
# the console's API, as an admin (fuzz_http fills jobs, jobs_dead and other
# first, and replaces @CSRF@ by the server's token)
ADMIN = b"Authorization: Basic " + b64(b"a:p") + b"\r\n"
def api(method, path, body=b""):
    h = method + b" " + path + b" HTTP/1.1\r\n" + ADMIN
    if method == b"POST":
        h += b"X-CSRF-Token: @CSRF@\r\nContent-Length: %d\r\n" % len(body)
    return h + b"\r\n" + body
HTTP += [
    api(b"GET", b"/"),
    api(b"GET", b"/console.js"),
    api(b"GET", b"/api/server"),
    api(b"GET", b"/api/queues?sort=items&limit=2&offset=1&history=1&prefix=jo"),
    api(b"GET", b"/api/queues?sort=name&order=desc"),
    api(b"GET", b"/api/queues/jobs/peek?n=5&offset=1"),
    api(b"GET", b"/api/queues/jobs/history"),
    api(b"GET", b"/api/queues/jobs/open?limit=3"),
    api(b"GET", b"/api/queues/j%6fbs/peek"),
    api(b"POST", b"/api/queues/jobs_dead/requeue?n=1"),
    api(b"POST", b"/api/queues/jobs/requeue?to=other&n=1"),
    api(b"POST", b"/api/queues/jobs/flush"),
    api(b"POST", b"/api/queues/other/delete"),
    api(b"POST", b"/api/queues/jobs/flush", b"x=1"),
    api(b"GET", b"/api/server") + api(b"GET", b"/api/queues/jobs/peek") +
        api(b"POST", b"/api/queues/jobs_dead/requeue"),
]
for i, req in enumerate(HTTP):
    write("http", "seed-%03d" % i, b"\x00" + req)
# keep-alive requests pipelined by a client that never reads (first byte
# 0x40: fuzz_http's send_unread(), issue 35), foreign Host and Origin, and
# methods evhttp would have refused itself
HOSTX = b"Host: x\r\n"
write("http", "seed-unread-healthz", b"\x40" +
    (b"GET /healthz HTTP/1.1\r\n" + HOSTX + b"\r\n") * 600)
write("http", "seed-unread-metrics", b"\x40" +
    (b"GET /metrics HTTP/1.1\r\n" + HOSTX + ADMIN + b"\r\n") * 200)
write("http", "seed-unread-api-split", b"\xc7" +
    (api(b"GET", b"/api/queues?limit=1000") + api(b"GET", b"/api/server")) * 100)
write("http", "seed-foreign-host", b"\x00" +
    b"GET /api/server HTTP/1.1\r\nHost: evil.example\r\n" + ADMIN + b"\r\n" +
    b"POST /api/queues/jobs/flush HTTP/1.1\r\n" + HOSTX + ADMIN +
    b"Origin: http://evil.example\r\nX-CSRF-Token: @CSRF@\r\nContent-Length: 0\r\n\r\n" +
    b"GET /healthz HTTP/1.1\r\nHost: [::1\r\n\r\n")
write("http", "seed-methods", b"\x00" + b"".join(
    m + b" /metrics HTTP/1.1\r\n" + HOSTX + b"\r\n"
    for m in (b"PUT", b"OPTIONS", b"TRACE", b"PATCH", b"DELETE")))

# --- conf: --config files (first byte even) and --auth-file permission
# fields (odd) -------------------------------------------------------------
CONF = [
    b"",
    b"# defaults\nmax_items = 1000\nmax_bytes = 64k\nmax_age = 10m\n",
    b"[queue jobs]\nmax_open = 4\nopen_timeout = 30s\nmax_deliveries = 5\n"
    b"dead_letter = jobs_failed\n",
    b"max_item_size = 1m\n[queue mail*]\ndiscard_old_when_full = yes\n"
    b"expire_to = mail_expired\n[queue mail_bulk]\nmax_items = 10\n",
    b"[queue a]\nmax_age = 99999999999h\n",
    b"[queue ]\n",
    b"[queue jobs\nmax_items = 1\n",
    b"max_open = 0\n",
    b"max_deliveries = 65536\n",
    b"dead_letter = a/b\n",
    b"nonsense\n",
    b"x" * 1100 + b"\n",
    b"  [queue   spaced*  ]  \n  max_items=  3  \n",
    b"dedup_window = 10m\n[queue jobs]\nmax_dedup_ids = 5\ndedup_window = 1s\n",
    b"dedup_window = 0\nmax_dedup_ids = 100000001\n",
]
for i, c in enumerate(CONF):
    write("conf", "seed-config-%02d" % i, b"\x00" + c)
PERMS = [
    b"", b"read", b"write", b"admin", b"read,write", b"queues=jobs*,read",
    b"queues=a,queues=b*,write", b"queues=*", b"queues=", b"queues=a*b",
    b" read , write ", b"read,,write", b"bogus", b"queues=" + b"q" * 300,
]
for i, p in enumerate(PERMS):
    write("conf", "seed-perms-%02d" % i, b"\x01" + p)

# --- tls: a client's first bytes on a TLS connection (first byte as for
# conn).  A real ClientHello holds random bytes, so it is written once and
# kept, not remade on every run. --------------------------------------------
import ssl
def client_hello(**kw):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    for k, v in kw.items():
        setattr(ctx, k, v)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    s = ctx.wrap_bio(inc, out, server_hostname="localhost")
    try:
        s.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()
def keep(sub, name, make):
    if not os.path.exists(os.path.join(C, sub, name)):
        write(sub, name, make())
keep("tls", "seed-hello13", lambda: b"\x00" + client_hello())
keep("tls", "seed-hello12", lambda: b"\x00" + client_hello(
    maximum_version=ssl.TLSVersion.TLSv1_2))
keep("tls", "seed-hello13-split", lambda: b"\x80" + client_hello())
keep("tls", "seed-hello-then-garbage", lambda: b"\x00" + client_hello() +
    b"\x17\x03\x03\x00\x10" + b"\x00" * 16)
# three clients at once against the handshake budget and deadline (first
# byte 0x40: fuzz_tls's three_clients(), issue 35)
def hello_file(name):
    with open(os.path.join(C, "tls", name), "rb") as f:
        return f.read()[1:]
write("tls", "seed-three-hellos", b"\x40" + hello_file("seed-hello13") * 3)
write("tls", "seed-three-halves", b"\x40" + hello_file("seed-hello12")[:40] * 3)
write("tls", "seed-three-hellos-split", b"\xc5" + hello_file("seed-hello12") * 3)
write("tls", "seed-plain", b"\x00get jobs\r\n")
write("tls", "seed-empty-record", b"\x00\x16\x03\x01\x00\x00")
write("tls", "seed-huge-record", b"\x00\x16\x03\x01\xff\xff" + b"\x01" * 300)
write("tls", "seed-alert", b"\x00\x15\x03\x03\x00\x02\x02\x28")
write("tls", "seed-sslv2", b"\x00\x80\x2e\x01\x00\x02\x00\x15\x00\x00\x00\x10")

# redo: journal records of the SQLite driver (backends/sqlite_redo.h),
# for fuzz_redo's table: 0 insert (a, b, c), 1 delete by a, 2 update,
# 3 a read, 4 a SAVEPOINT. --------------------------------------------------
def r_int(p, v): return b"i" + bytes([p]) + struct.pack("<q", v)
def r_bytes(p, x, k=b"b"): return k + bytes([p]) + struct.pack("<I", len(x)) + x
def r_exec(w): return b"x" + bytes([w])
R = b"\x01"	# SR_FORMAT
write("redo", "seed-insert", R + r_int(1, 7) + r_bytes(2, b"it0001") +
    r_bytes(3, b"k", b"t") + r_exec(0))
write("redo", "seed-insert-update-delete", R + r_int(1, 7) + r_bytes(2, b"ab") +
    r_exec(0) + r_int(1, 8) + r_bytes(2, b"") + r_exec(0) + r_int(1, 7) +
    r_bytes(2, b"zz") + r_bytes(3, b"c", b"t") + r_exec(2) + r_int(1, 8) +
    r_exec(1))
write("redo", "seed-read-statement", R + r_int(1, 7) + r_exec(3))
write("redo", "seed-transaction-statement", R + r_exec(4))
write("redo", "seed-duplicate-key", R + r_int(1, 9) + r_bytes(2, b"a") +
    r_exec(0) + r_int(1, 9) + r_bytes(2, b"b") + r_exec(0))
write("redo", "seed-null-blob", R + r_int(1, 3) + r_exec(0))
