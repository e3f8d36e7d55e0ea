"""pymemcache (text protocol) against sakerd: run by tests/check_clients.

Usage: python3 pymemcache_test.py PORT.  Prints "ok <step>" per step and
exits 1 at the first mismatch.
"""
import sys
import time

from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheClientError

port = int(sys.argv[1])
# default_noreply=False: a queue client wants STORED (docs/clients.md);
# timeout above the longest t= used below
c = Client(("127.0.0.1", port), default_noreply=False, timeout=20,
           connect_timeout=20)


def check(what, got, want):
    if got != want:
        sys.stderr.write("FAIL %s: got %r, want %r\n" % (what, got, want))
        sys.exit(1)
    print("ok " + what)


check("set", c.set("pq", b"hello"), True)
check("get", c.get("pq"), b"hello")
check("get empty", c.get("pq"), None)
# add enqueues; replace/append/prepend/cas are refused with one line
check("add", c.add("pq", b"added"), True)
for name, call in (("replace", lambda: c.replace("pq", b"x")),
                   ("append", lambda: c.append("pq", b"x")),
                   ("prepend", lambda: c.prepend("pq", b"x")),
                   ("cas", lambda: c.cas("pq", b"x", b"1"))):
    try:
        call()
        check(name + " refused", "accepted", "refused")
    except MemcacheClientError as e:
        check(name + " refused", "not supported on a queue" in str(e), True)
# gets: value and a CAS token; the connection stays in step
check("gets", c.gets("pq"), (b"added", b"0"))
check("gets empty", c.gets("pq"), (None, None))
# a 200-key and a 10,000-key get_many
c.set("m7", b"seven")
c.set("m199", b"last")
check("get_many 200", c.get_many(["m%d" % i for i in range(200)]),
      {"m7": b"seven", "m199": b"last"})
c.set("m9999", b"far")
check("get_many 10000", c.get_many(["m%d" % i for i in range(10000)]),
      {"m9999": b"far"})
# blocking get and reliable read
t0 = time.time()
check("blocking get timeout", c.get("pw/t=300"), None)
check("waited", 0.25 <= time.time() - t0 < 5, True)
c.set("pr", b"item")
check("open", c.get("pr/open"), b"item")
check("close", c.get("pr/close"), None)
check("gone", c.get("pr"), None)
# stats: bounded, and the per-queue forms
c.set_many({"s%d" % i: b"x" for i in range(150)})
st = c.stats()
check("stats", int(st[b"curr_connections"]) >= 1, True)
# 150 and more queues exist now (the sets made them, the get_many of
# missing queues made none): a plain stats lists 100
every = c.stats("queues")
nq = len([k for k in every if k.endswith(b"_waiters")])
check("stats bounded", int(st[b"queues_omitted"]), nq - 100)
check("stats queues", nq >= 150 and nq < 200, True)
check("get made no queue", b"queue_m5_waiters" in every, False)
check("stats queue", c.stats("queue", "pq").get(b"queue_pq_items"), 0)
# retries (issue 37): an abort with a delay, and touch
c.set("rt", b"job")
check("open for retry", c.get("rt/open"), b"job")
t0 = time.time()
check("abort with delay", c.get("rt/abort/delay=400"), None)
check("delayed meanwhile", c.get("rt"), None)
check("back after the delay", c.get("rt/t=5000"), b"job")
check("not before it", 0.39 <= time.time() - t0 < 5, True)
# lease* queues have open_timeout = 1s (check_clients); a second worker
# must not get the item while the first keeps touching it (1.5 s)
c2 = Client(("127.0.0.1", port), default_noreply=False, timeout=20)
c.set("lease1", b"long job")
check("open long job", c.get("lease1/open"), b"long job")
for i in range(3):
    time.sleep(0.5)
    check("touch %d" % i, c.touch("lease1", 0), True)
    check("still held %d" % i, c2.get("lease1"), None)
check("touch by get", c.get("lease1/touch"), None)
check("close long job", c.get("lease1/close"), None)
check("touch not held", c.touch("lease1", 0), False)
check("touch noreply", c.touch("lease1", 0, noreply=True), True)
check("in step after", c.get("lease1"), None)
c2.close()
check("delete", c.delete("pq"), True)
check("version", c.version().startswith(b"1."), True)
c.quit()
check("quit", True, True)
print("done")
