#!/usr/bin/env bash
# miss.sh -- what a get of a queue that does not exist costs (issue 36, "a
# miss is cheap"): on a memory-store sakerd, `saker bench mget` with
#   single   1-key gets, in turn over Q existing empty queues
#   empty    K-key gets over the same kind of Q empty queues (made with flush)
#   missing  K-key gets over Q names no queue has
#   single-m 1-key gets over Q missing names
# run in turn in every round (the order rotates from round to round), on
# each sakerd given, so that noise on a shared machine falls on all alike.
# The ratios are K-key requests/s over single-get requests/s, the median
# of each round's ratio; with -m, memcached runs the same gets of missing
# keys (`mget --no-verify`: its own miss is the floor of the protocol).
# With -n N, each sakerd then gets N distinct missing names (100-key gets,
# pipelined, never repeated) and its RSS is reported before and after.
#
# usage: contrib/bench/miss.sh [--quick] [-c CONNS] [-t SECONDS] [-r ROUNDS]
#          [-q QUEUES] [-k KEYS] [-m] [-n NAMES] [SAKERD...]
#   SAKER=path/to/saker (default ./saker); SAKERD... default ./sakerd (give
#   two builds to compare them in the same rounds).  Default: 50
#   connections, depth 1, 3 s per run, 5 rounds, Q=1000, K=100; --quick:
#   1 s, 1 round.  One line per run on stderr; Markdown tables of the
#   medians and ratios on stdout.
set -u

CONNS=50; SECS=3; ROUNDS=5; QUEUES=1000; KEYS=100; MEMCACHED=0; NAMES=0
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) SECS=1; ROUNDS=1 ;;
	-c) CONNS=$2; shift ;;
	-t) SECS=$2; shift ;;
	-r) ROUNDS=$2; shift ;;
	-q) QUEUES=$2; shift ;;
	-k) KEYS=$2; shift ;;
	-m) MEMCACHED=1 ;;
	-n) NAMES=$2; shift ;;
	-h|--help) sed -n '2,23p' "$0"; exit 0 ;;
	-*) echo "miss.sh: unknown argument $1" >&2; exit 1 ;;
	*) break ;;
	esac
	shift
done
[ $# -gt 0 ] || set -- ./sakerd
SAKER=${SAKER:-./saker}
for b in "$SAKER" "$@" python3; do
	command -v "$b" >/dev/null || { echo "miss.sh: $b not found" >&2; exit 1; }
done
[ "$MEMCACHED" = 1 ] && ! command -v memcached >/dev/null &&
    { echo "miss.sh: memcached not found" >&2; exit 1; }

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=ports.sh
. "$HERE/ports.sh"

TMP=$(mktemp -d)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT

# Servers: "name port pid" lines in $TMP/servers.
n=0
for d in "$@"; do
	n=$((n + 1))
	port=$(free_port)
	"$d" --store memory -l 127.0.0.1 -p "$port" >"$TMP/sakerd$n.log" 2>&1 &
	PIDS+=($!)
	wait_port "$port" || { cat "$TMP/sakerd$n.log" >&2; exit 1; }
	echo "sakerd$n $port $! $d" >>"$TMP/servers"
done
if [ "$MEMCACHED" = 1 ]; then
	port=$(free_port)
	MCUSER=()
	[ "$(id -u)" = 0 ] && MCUSER=(-u nobody)
	memcached "${MCUSER[@]}" -p "$port" -U 0 -l 127.0.0.1 >"$TMP/memcached.log" 2>&1 &
	PIDS+=($!)
	wait_port "$port" || { cat "$TMP/memcached.log" >&2; exit 1; }
	echo "memcached $port $! memcached" >>"$TMP/servers"
fi

# run SERVER PORT PID WORKLOAD ROUND: one line "server workload round
# requests/s server-us-per-request errors items" in $TMP/runs.
run() {
	local k=$KEYS fill pre=mm extra=() out
	case "$4" in
	single) k=1; fill=empty; pre=me ;;
	empty) fill=empty; pre=me ;;
	missing) fill=missing ;;
	single-m) k=1; fill=missing ;;
	esac
	# memcached has no queues to make: empty is the same as missing there
	[ "$1" = memcached ] && { fill=missing; extra=(--no-verify); }
	out=$("$SAKER" bench mget -s "127.0.0.1:$2" -c "$CONNS" -k "$k" \
	    -q "$QUEUES" --fill "$fill" --queue-prefix "$pre" -t "$SECS" \
	    --server-pid "$3" --json --quiet "${extra[@]}" 2>"$TMP/err") ||
	    { echo "miss.sh: $1 $4: bench failed: $(cat "$TMP/err")" >&2; exit 1; }
	python3 - "$1" "$4" "$5" "$out" >>"$TMP/runs" <<'EOF'
import json, sys
j = json.loads(sys.argv[4])
print(sys.argv[1], sys.argv[2], sys.argv[3], j["requests_per_s"],
      j.get("server_us_per_item", -1), j["errors"], j["items"])
EOF
	tail -1 "$TMP/runs" >&2
}

WORK=(single empty missing single-m)
for r in $(seq "$ROUNDS"); do
	for i in 0 1 2 3; do
		w=${WORK[$(( (i + r) % 4 ))]}
		while read -r name port pid _; do
			# memcached's empty and single are its missing runs
			[ "$name" = memcached ] && [ "$w" = empty -o "$w" = single ] && continue
			run "$name" "$port" "$pid" "$w" "$r"
		done <"$TMP/servers"
	done
done

python3 - "$TMP/runs" "$TMP/servers" "$KEYS" "$QUEUES" "$CONNS" "$SECS" "$ROUNDS" <<'EOF'
import statistics, sys
runs = [l.split() for l in open(sys.argv[1])]
servers = [l.split(None, 3) for l in open(sys.argv[2])]
K, Q, C, T, R = sys.argv[3:8]
med = statistics.median
def vals(s, w, col):
    return [float(x[col]) for x in runs if x[0] == s and x[1] == w]
def ratio(s, w, base):
    rs = []
    for rnd in sorted({x[2] for x in runs}):
        a = [float(x[3]) for x in runs if x[0] == s and x[1] == w and x[2] == rnd]
        b = [float(x[3]) for x in runs if x[0] == s and x[1] == base and x[2] == rnd]
        if a and b:
            rs.append(a[0] / b[0])
    return med(rs) if rs else float("nan")
print(f"{C} connections, depth 1, {T} s per run, {R} rounds; Q={Q} queues, K={K} keys\n")
print("| server | workload | requests/s (median) | keys/s | server CPU us/request | errors | items |")
print("|---|---|---|---|---|---|---|")
for s, _, _, path in servers:
    for w in ("single", "single-m", "empty", "missing"):
        rq = vals(s, w, 3)
        if not rq:
            continue
        k = 1 if w.startswith("single") else int(K)
        print(f"| {s} ({path.strip()}) | {w} | {med(rq):,.0f} | {med(rq) * k:,.0f} | "
              f"{med(vals(s, w, 4)):.2f} | {sum(vals(s, w, 5)):.0f} | {sum(vals(s, w, 6)):.0f} |")
print(f"\n| server | {K}-key over empty / single | {K}-key over missing / single | "
      f"{K}-key over missing / single over missing |")
print("|---|---|---|---|")
for s, _, _, path in servers:
    base = "single-m" if s == "memcached" else "single"
    e = "-" if s == "memcached" else f"{ratio(s, 'empty', base):.2f}x"
    print(f"| {s} | {e} | {ratio(s, 'missing', base):.2f}x | {ratio(s, 'missing', 'single-m'):.2f}x |")
EOF

[ "$NAMES" -gt 0 ] || exit 0
echo
echo "| server | RSS before | RSS after $NAMES distinct missing names | curr_queues after |"
echo "|---|---|---|---|"
while read -r name port pid path; do
	[ "$name" = memcached ] && continue
	python3 - "$port" "$pid" "$NAMES" "$name ($path)" <<'EOF'
import socket, sys
port, pid, n, label = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
def rss():
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])
s = socket.create_connection(("127.0.0.1", port))
def ask(cmd, end):
    s.sendall(cmd)
    buf = b""
    while end not in buf:
        buf += s.recv(1 << 20)
    return buf
before = rss()
sent = 0
while sent < n:
    reqs = []
    for _ in range(100):            # 100 gets of 100 names, then a version
        if sent >= n:
            break
        k = min(100, n - sent)
        reqs.append(b"get " + b" ".join(b"nx%d" % (sent + i) for i in range(k)) + b"\r\n")
        sent += k
    r = ask(b"".join(reqs) + b"version\r\n", b"VERSION")
    assert b"VALUE" not in r, "a missing name gave an item"
after = rss()
st = ask(b"stats\r\n", b"END\r\n").decode()
cq = [l.split()[2] for l in st.splitlines() if l.startswith("STAT curr_queues ")]
print(f"| {label} | {before} kB | {after} kB | {cq[0] if cq else '(no such stat)'} |")
EOF
done <"$TMP/servers"
