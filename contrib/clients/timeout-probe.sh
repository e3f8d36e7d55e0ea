#!/usr/bin/env bash
# What each memcache client does when a blocking get (`get q/t=3000`) outlives
# the client's own read timeout (1 s here), measured against a real sakerd
# (docs/clients.md, "Blocking gets past the client's timeout", quotes it).
#
# For every client: sakerd (memory store) on a free port, a logging proxy in
# front of it that prints every request the client sends (text lines, binary
# opcodes and keys) with the time since it started, and the client calling
# get("q/t=3000"), then get("q") at once and again 3 s later.  Two runs each:
# the queue stays empty, or an item is set directly on sakerd 2 s in (while
# the abandoned get would still be waiting).  The end shows whether that item
# is still queued, was delivered, or was lost.
#
# Needs (Debian): python3, python3-pymemcache, python3-memcache, ruby-dalli,
# php-cli php-memcached, nodejs and memjs (NODE_PATH, e.g.
# tests/clients/node_modules after `npm ci` there).  A missing client is
# skipped with a note.  About 2 minutes; not part of make check.
#
# Usage: contrib/clients/timeout-probe.sh [SAKERD [SAKER]]   (default ./sakerd ./saker)
set -u
sakerd=$(realpath "${1:-./sakerd}")
saker=$(realpath "${2:-./saker}")
[ -x "$sakerd" ] && [ -x "$saker" ] || { echo "usage: $0 [SAKERD [SAKER]] (build first)" >&2; exit 2; }
dir=$(mktemp -d /tmp/saker-timeout-probe.XXXXXX)
trap 'rm -rf "$dir"' EXIT
py=/usr/bin/python3
cat >"$dir/proxy.py" <<'PY'
# logging TCP proxy: every client->server request, summarised, with the time since start
import asyncio, sys, time, struct
LPORT, UPORT = int(sys.argv[1]), int(sys.argv[2])
T0 = time.time(); n = 0
def log(s): print("%7.3f %s" % (time.time() - T0, s), flush=True)
def summarise(buf):
    out = []
    while buf:
        if buf[0] == 0x80 and len(buf) >= 24:
            op, klen = buf[1], struct.unpack(">H", buf[2:4])[0]
            elen, blen = buf[4], struct.unpack(">I", buf[8:12])[0]
            key = buf[24 + elen:24 + elen + klen].decode(errors="replace")
            out.append("bin op=0x%02x key=%s" % (op, key)); buf = buf[24 + blen:]
        else:
            line, _, buf = buf.partition(b"\r\n")
            out.append(line.decode(errors="replace")[:80])
            if line.split()[:1] and line.split()[0] in (b"set", b"add"):
                buf = buf.partition(b"\r\n")[2]
    return out
async def pipe(r, w, tag, cid):
    try:
        while True:
            d = await r.read(65536)
            if not d: break
            if tag == ">":
                for s in summarise(d): log("conn%d C>S %s" % (cid, s))
            w.write(d); await w.drain()
    except Exception as e: pass
    finally:
        if tag == ">": log("conn%d closed by client" % cid)
        try: w.close()
        except Exception: pass
async def handle(cr, cw):
    global n; n += 1; cid = n; log("conn%d open" % cid)
    sr, sw = await asyncio.open_connection("127.0.0.1", UPORT)
    await asyncio.gather(pipe(cr, sw, ">", cid), pipe(sr, cw, "<", cid))
async def main():
    srv = await asyncio.start_server(handle, "127.0.0.1", LPORT)
    async with srv: await srv.serve_forever()
asyncio.run(main())
PY
cat >"$dir/probe_pymemcache.py" <<'PY'
import os, time
from pymemcache.client.base import Client
t0 = time.time()
el = lambda: "%.3f" % (time.time() - t0)
c = Client(("127.0.0.1", int(os.environ["PORT"])), default_noreply=False, timeout=1, connect_timeout=1)
for key in ("q/t=3000", "q"):
    try:
        v = c.get(key); print("  [+%s s] get %s returned %r" % (el(), key, v))
    except Exception as e:
        print("  [+%s s] get %s raised %s: %s" % (el(), key, type(e).__name__, e))
time.sleep(3)
try:
    v = c.get("q"); print("  [+%s s] get q (3 s later) returned %r" % (el(), v))
except Exception as e:
    print("  [+%s s] get q (3 s later) raised %s: %s" % (el(), type(e).__name__, e))
PY
cat >"$dir/probe_python_memcache.py" <<'PY'
import os, time, memcache
t0 = time.time()
el = lambda: "%.3f" % (time.time() - t0)
mc = memcache.Client(["127.0.0.1:%s" % os.environ["PORT"]], socket_timeout=1, debug=1)
for key in ("q/t=3000", "q"):
    try:
        v = mc.get(key); print("  [+%s s] get %s returned %r" % (el(), key, v))
    except Exception as e:
        print("  [+%s s] get %s raised %s: %s" % (el(), key, type(e).__name__, e))
time.sleep(3)
v = mc.get("q"); print("  [+%s s] get q (3 s later) returned %r" % (el(), v))
PY
cat >"$dir/probe_dalli.rb" <<'RB'
require "dalli"
t0 = Time.now
el = -> { "%.3f" % (Time.now - t0) }
dc = Dalli::Client.new("127.0.0.1:#{ENV['PORT']}", serializer: nil, compress: false, socket_timeout: 1)
begin
  v = dc.get("q/t=3000")
  puts "  [+#{el.()} s] get q/t=3000 returned #{v.inspect}"
rescue => e
  puts "  [+#{el.()} s] get q/t=3000 raised #{e.class}: #{e.message}"
end
begin
  v = dc.get("q")
  puts "  [+#{el.()} s] then get q returned #{v.inspect}"
rescue => e
  puts "  [+#{el.()} s] then get q raised #{e.class}: #{e.message}"
end
RB
cat >"$dir/probe_php_memcached.php" <<'PHP'
<?php
$t0 = microtime(true);
function el() { global $t0; return sprintf("%.3f", microtime(true) - $t0); }
$m = new Memcached();
$m->setOption(Memcached::OPT_BINARY_PROTOCOL, getenv("BIN") === "1");
$m->setOption(Memcached::OPT_COMPRESSION, false);
$m->addServer('127.0.0.1', (int)getenv("PORT"));
// defaults: OPT_POLL_TIMEOUT 1000 ms, OPT_RETRY_TIMEOUT, OPT_SERVER_FAILURE_LIMIT
printf("  libmemcached defaults: OPT_POLL_TIMEOUT %d ms, OPT_RECV_TIMEOUT %d, OPT_RETRY_TIMEOUT %d s, OPT_SERVER_FAILURE_LIMIT %d\n", $m->getOption(Memcached::OPT_POLL_TIMEOUT), $m->getOption(Memcached::OPT_RECV_TIMEOUT), $m->getOption(Memcached::OPT_RETRY_TIMEOUT), $m->getOption(Memcached::OPT_SERVER_FAILURE_LIMIT));
if (getenv("POLL")) $m->setOption(Memcached::OPT_POLL_TIMEOUT, (int)getenv("POLL"));
printf("  OPT_POLL_TIMEOUT used: %d ms\n", $m->getOption(Memcached::OPT_POLL_TIMEOUT));
foreach ([getenv("KEY") ?: "q/t=3000", "q"] as $k) {
  $v = $m->get($k);
  printf("  [+%s s] get %s returned %s, result %d %s\n", el(), $k, var_export($v, true), $m->getResultCode(), $m->getResultMessage());
}
sleep(3);
$v = $m->get("q");
printf("  [+%s s] get q (3 s later) returned %s, result %d %s\n", el(), var_export($v, true), $m->getResultCode(), $m->getResultMessage());
PHP
cat >"$dir/probe_memjs.js" <<'JS'
const memjs = require('memjs');
const t0 = Date.now();
const el = () => ((Date.now() - t0) / 1000).toFixed(3);
const opts = { timeout: 1 };
if (process.env.RETRIES) opts.retries = +process.env.RETRIES;
const mc = memjs.Client.create('127.0.0.1:' + process.env.PORT, opts);
(async () => {
  for (const k of ['q/t=3000', 'q']) {
    try { const { value } = await mc.get(k); console.log(`  [+${el()} s] get ${k} returned ${value}`); }
    catch (e) { console.log(`  [+${el()} s] get ${k} raised ${e.message}`); }
  }
  await new Promise(r => setTimeout(r, 3000));
  try { const { value } = await mc.get('q'); console.log(`  [+${el()} s] get q (3 s later) returned ${value}`); }
  catch (e) { console.log(`  [+${el()} s] get q (3 s later) raised ${e.message}`); }
  mc.close();
  process.exit(0);  // memjs 1.3.2 keeps a socket open after close()
})();
JS

# probe TITLE ITEM CMD...: one run; ITEM=1 sets an item directly on sakerd 2 s in
probe() {
	local title=$1 item=$2; shift 2
	local sp pp spid ppid
	sp=$(( 20000 + RANDOM % 20000 )); pp=$(( sp + 1 ))
	echo; echo "##### $title, $( [ "$item" = 1 ] && echo "item set at +2 s" || echo "queue stays empty")"
	"$sakerd" -p "$sp" --store memory >"$dir/sakerd.log" 2>&1 & spid=$!
	"$py" "$dir/proxy.py" "$pp" "$sp" >"$dir/proxy.log" 2>&1 & ppid=$!
	sleep 0.5
	local ipid=""
	if [ "$item" = 1 ]; then
		( sleep 2; "$saker" put -s "127.0.0.1:$sp" q item-set-at-2s >/dev/null &&
			echo "  [+2.0 s] (the item is set directly on sakerd)" ) & ipid=$!
	fi
	# Dalli never returns from an empty queue: stopped after 15 s
	PORT=$pp timeout 15 "$@" 2>&1 | grep -v '^W, \[' ; local rc=${PIPESTATUS[0]}
	[ "$rc" = 124 ] && echo "  (still running after 15 s: stopped)"
	[ -z "$ipid" ] || wait "$ipid" 2>/dev/null
	sleep 0.3
	local left; left=$("$saker" get -s "127.0.0.1:$sp" -t 0 q 2>/dev/null)
	echo "  queue q afterwards: ${left:-empty}; sakerd: $("$saker" stats -s "127.0.0.1:$sp" --raw |
		tr -d '\r' | awk '$2 == "cmd_get" || $2 == "get_hits" || $2 == "total_connections" {printf "%s %s  ", $2, $3}')"
	kill "$ppid" "$spid" 2>/dev/null; wait "$spid" "$ppid" 2>/dev/null
	echo "  requests the client sent (s since the proxy started):"
	sed 's/^/    /' "$dir/proxy.log"
}
have() { "$@" >/dev/null 2>&1 || { echo; echo "##### skipped: '$*' fails"; return 1; }; }

for item in 0 1; do
	have "$py" -c 'import pymemcache' &&
		probe "pymemcache $("$py" -c 'import pymemcache; print(pymemcache.__version__)') (timeout=1)" \
			$item "$py" "$dir/probe_pymemcache.py"
	have "$py" -c 'import memcache' &&
		probe "python-memcache $("$py" -c 'import memcache; print(memcache.__version__)') (socket_timeout=1)" \
			$item "$py" "$dir/probe_python_memcache.py"
	have ruby -rdalli -e 1 &&
		probe "Dalli $(ruby -rdalli -e 'print Dalli::VERSION') (socket_timeout: 1)" \
			$item ruby "$dir/probe_dalli.rb"
	for bin in 0 1; do
		have php -r 'exit(class_exists("Memcached") ? 0 : 1);' &&
			BIN=$bin POLL=1000 probe "PHP Memcached $(php -r 'echo phpversion("memcached");') ($( [ $bin = 1 ] && echo binary || echo text), OPT_POLL_TIMEOUT 1000)" \
				$item php "$dir/probe_php_memcached.php"
	done
	if have node -e 'require("memjs")'; then
		probe "memjs $(node -p 'require("memjs/package.json").version') (timeout: 1, retries default)" \
			$item node "$dir/probe_memjs.js"
		RETRIES=0 probe "memjs (timeout: 1, retries: 0)" $item node "$dir/probe_memjs.js"
	fi
done
# libmemcached's default poll timeout in PHP Memcached 3.2.0 is 5000 ms
have php -r 'exit(class_exists("Memcached") ? 0 : 1);' &&
	KEY=q/t=8000 BIN=0 probe "PHP Memcached (text, default OPT_POLL_TIMEOUT), get q/t=8000" 0 php "$dir/probe_php_memcached.php"
