#!/usr/bin/env python3
"""gen_seeds.py -- (re)writes the seed corpus under tests/fuzz/corpus/{proto,dump,store}.

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

# --- proto: every command form of CONTRACT §3, plus error forms --------------
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
]
for i, line in enumerate(PROTO):
    write("proto", "seed-%03d" % i, line + b"\r\n")
write("proto", "seed-session",
      b"set jobs 0 0 5\r\nhello\r\nget jobs/open\r\nget jobs/close\r\n"
      b"stats\nversion\r\nquit\r\n")

# --- dump: the stream of src/dump.h ------------------------------------------
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
