#!/usr/bin/env bash
# console.sh -- what an open web console costs (issue 24): `saker bench
# pair` against one sakerd --http, alternating runs with nobody looking
# (idle) and runs while a poller plays an open page once a second (poll):
# GET /api/server, /api/queues?history=1 (a page of 50 with sparklines),
# and the bench queue's /history, /peek?n=20 and /open (the queue page).
# Rounds alternate idle, poll, idle, poll ... in one run of one server.
#
# usage: contrib/bench/console.sh [-r ROUNDS] [-t SECONDS] [-c CONNS]
#            [-d DEPTH] [-n QUEUES] [-H HISTORY_SECONDS] [--store SPEC]
#   SAKERD=path/to/sakerd SAKER=path/to/saker (default ./sakerd ./saker).
#   Default: 6 rounds of 5 s each way, 4 connections, depth 1, 1000 other
#   queues with one item each (the overview has something to walk),
#   --http-history 60 (sakerd's default), the memory store.
#
# One line per run on stderr; on stdout a Markdown table of the medians,
# then poll/idle as the ratio of the medians and as the median of each
# round's ratio.
set -u

ROUNDS=6; SECS=5; CONNS=4; DEPTH=1; NQ=1000; HIST=60; STORE=memory
while [ $# -gt 0 ]; do
	case "$1" in
	-r) ROUNDS=$2; shift ;;
	-t) SECS=$2; shift ;;
	-c) CONNS=$2; shift ;;
	-d) DEPTH=$2; shift ;;
	-n) NQ=$2; shift ;;
	-H) HIST=$2; shift ;;
	--store) STORE=$2; shift ;;
	-h|--help) sed -n '2,17p' "$0"; exit 0 ;;
	*) echo "console.sh: unknown argument $1" >&2; exit 1 ;;
	esac
	shift
done

SAKERD=${SAKERD:-./sakerd}
SAKER=${SAKER:-./saker}
for b in "$SAKERD" "$SAKER" curl; do
	command -v "$b" >/dev/null || { echo "console.sh: $b not found" >&2; exit 1; }
done

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=ports.sh
. "$HERE/ports.sh"

TMP=$(mktemp -d /tmp/saker-console.XXXXXX)
SPID=; PPID_POLL=
cleanup() {
	[ -n "$PPID_POLL" ] && kill "$PPID_POLL" 2>/dev/null && wait "$PPID_POLL" 2>/dev/null
	[ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# a free port may be taken by the time sakerd binds it: three tries
for try in 1 2 3; do
	PORT=$(free_port)
	HTTP=$(free_port)
	while [ "$HTTP" = "$PORT" ]; do HTTP=$(free_port); done
	"$SAKERD" -l 127.0.0.1 -p "$PORT" --http "127.0.0.1:$HTTP" --store "$STORE" \
		--http-history "$HIST" >"$TMP/sakerd.log" 2>&1 &
	SPID=$!
	wait_port "$PORT" && kill -0 "$SPID" 2>/dev/null && break
	wait "$SPID" 2>/dev/null
	SPID=
	[ "$try" = 3 ] && { echo "console.sh: sakerd did not start:" >&2;
		cat "$TMP/sakerd.log" >&2; exit 1; }
done

# the other queues, one item each, in one pipelined write
if [ "$NQ" -gt 0 ]; then
	for i in $(seq 1 "$NQ"); do printf 'set other%05d 0 0 1 noreply\r\nx\r\n' "$i"; done \
		> "$TMP/fill"
	printf 'version\r\n' >> "$TMP/fill"
	python3 - "$PORT" "$TMP/fill" <<'PY' || { echo "console.sh: fill failed" >&2; exit 1; }
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(open(sys.argv[2], "rb").read())
buf = b""
while b"VERSION" not in buf:
	d = s.recv(65536)
	if not d:
		sys.exit(1)
	buf += d
PY
fi

B="http://127.0.0.1:$HTTP"
poller() {
	# one page view a second: the overview's and the queue page's requests
	while :; do
		curl -s -o /dev/null -o /dev/null -o /dev/null -o /dev/null -o /dev/null \
			"$B/api/server" "$B/api/queues?sort=name&offset=0&limit=50&history=1" \
			"$B/api/queues/bench0/history" "$B/api/queues/bench0/peek?n=20" \
			"$B/api/queues/bench0/open?n=100"
		echo x >> "$TMP/polls"
		sleep 1
	done
}

echo "sakerd: $("$SAKERD" --version | head -1), --store $STORE, --http-history $HIST, $NQ other queues" >&2
echo "$(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" >&2
echo "pair, $CONNS conns, depth $DEPTH, 64-byte items, $SECS s per run, $ROUNDS rounds (idle, poll alternated)" >&2

jf() { sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p" <<<"$2"; }
RES="$TMP/results"
: > "$RES"
for round in $(seq 1 "$ROUNDS"); do
	for mode in idle poll; do
		: > "$TMP/polls"
		if [ "$mode" = poll ]; then
			poller &
			PPID_POLL=$!
		fi
		line=$("$SAKER" bench pair -s "127.0.0.1:$PORT" -c "$CONNS" -d "$DEPTH" \
			-t "$SECS" --json --quiet --server-pid "$SPID" 2>"$TMP/err")
		if [ -n "$PPID_POLL" ]; then
			kill "$PPID_POLL" 2>/dev/null; wait "$PPID_POLL" 2>/dev/null
			PPID_POLL=
		fi
		if [ -z "$line" ]; then
			echo "  round $round $mode: FAILED: $(head -1 "$TMP/err")" >&2
			continue
		fi
		items=$(jf items_per_s "$line"); p50=$(jf lat_p50_us "$line")
		p99=$(jf lat_p99_us "$line"); cpu=$(jf server_cpu_pct "$line")
		polls=$(wc -l < "$TMP/polls")
		echo "  round $round $mode: $items items/s, p50 $p50 us, p99 $p99 us, server cpu $cpu%, $polls page views" >&2
		printf '%s %s %s %s %s\n' "$mode" "$items" "$p50" "$p99" "$cpu" >> "$RES"
	done
done

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
sel() { awk -v m="$1" -v f="$2" '$1 == m { print $f }' "$RES" | median; }
echo "| console | items/s (median) | p50 µs | p99 µs | server CPU % | runs (items/s) |"
echo "|---|---:|---:|---:|---:|---|"
for mode in idle poll; do
	runs=$(awk -v m="$mode" '$1 == m { printf "%s%s", s, $2; s = ", " }' "$RES")
	echo "| $mode | $(sel "$mode" 2) | $(sel "$mode" 3) | $(sel "$mode" 4) | $(sel "$mode" 5) | $runs |"
done
i=$(sel idle 2); p=$(sel poll 2)
[ -n "$i" ] && [ -n "$p" ] && awk -v i="$i" -v p="$p" \
	'BEGIN { printf "\npoll / idle: %.3f (medians)", p / i }'
# each round's poll run against the idle run just before it: the load of
# a shared machine drifts less within a round than across the run
r=$(awk '$1 == "idle" { i = $2 } $1 == "poll" && i > 0 { printf "%.3f\n", $2 / i; i = 0 }' \
	"$RES" | median)
[ -n "$r" ] && echo ", $r (median of the rounds' ratios)"
