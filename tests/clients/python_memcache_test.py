"""python-memcache (text protocol) against sakerd: run by
tests/check_clients.  Usage: python3 python_memcache_test.py PORT."""
import sys
import time

import memcache

port = int(sys.argv[1])
# socket_timeout above the longest t= used below; dead_retry small so a
# failure does not hide the server for 30 s (docs/clients.md)
mc = memcache.Client(["127.0.0.1:%d" % port], socket_timeout=20, dead_retry=1,
                     cache_cas=True)


def check(what, got, want):
    if got != want:
        sys.stderr.write("FAIL %s: got %r, want %r\n" % (what, got, want))
        sys.exit(1)
    print("ok " + what)


check("set", mc.set("yq", "hello"), True)
check("get", mc.get("yq"), "hello")
check("get empty", mc.get("yq"), None)
check("add", mc.add("yq", "added"), True)
# refused: python-memcache answers False (it reads the one CLIENT_ERROR line)
check("replace", bool(mc.replace("yq", "x")), False)
check("append", bool(mc.append("yq", "x")), False)
check("prepend", bool(mc.prepend("yq", "x")), False)
check("gets", mc.gets("yq"), "added")
check("cas", bool(mc.cas("yq", "x")), False)
# still in step after all of that
mc.set("yq", "next")
check("in step", mc.get("yq"), "next")
mc.set("n7", "seven")
mc.set("n199", "last")
check("get_multi 200", mc.get_multi(["n%d" % i for i in range(200)]),
      {"n7": "seven", "n199": "last"})
mc.set("n9999", "far")
check("get_multi 10000", mc.get_multi(["n%d" % i for i in range(10000)]),
      {"n9999": "far"})
t0 = time.time()
check("blocking get timeout", mc.get("yw/t=300"), None)
check("waited", 0.25 <= time.time() - t0 < 5, True)
mc.set("yr", "item")
check("open", mc.get("yr/open"), "item")
check("close", mc.get("yr/close"), None)
check("gone", mc.get("yr"), None)
for i in range(150):
    mc.set("s%d" % i, "x")
st = mc.get_stats()
check("stats", int(st[0][1]["curr_connections"]) >= 1, True)
# 150 and a few queues exist now (the sets made them; the get_multi of
# missing queues made none): the reply lists 100
omitted = int(st[0][1]["queues_omitted"])
check("stats bounded", 50 <= omitted < 150, True)
check("delete", bool(mc.delete("yq")), True)
mc.disconnect_all()
check("disconnect", True, True)
print("done")
