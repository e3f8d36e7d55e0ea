#!/bin/bash
# soak_ab.sh -- contrib/bench/soak.sh against several servers, alternated
# (A B C, A B C, ...), each on a fresh store in a temporary directory.
#
#   SAKER=./saker contrib/bench/soak_ab.sh [-t SECONDS (60)] [-r ROUNDS (2)]
#       [--out DIR] NAME=SAKERD_BINARY ... [redis]
#
# NAME=BINARY runs `BINARY --store lmdb:TMP/NAME --sync always`; `redis`
# runs redis-server with appendonly yes, appendfsync always (no delayed
# workload: Redis has none).  STORE=sqlite runs the saker servers on
# sqlite:TMP/NAME.db instead.  Writes DIR/NAME-ROUND/ (soak.sh's files)
# and DIR/table.md: one row per run with the load average at its start.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/ports.sh"
secs=60
rounds=2
out=
store=${STORE:-lmdb}
targets=()
while [ $# -gt 0 ]; do
	case $1 in
	-t) secs=$2; shift 2 ;;
	-r) rounds=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) targets+=("$1"); shift ;;
	esac
done
[ ${#targets[@]} -gt 0 ] || { echo "soak_ab.sh: name a server" >&2; exit 1; }
[ -n "$out" ] || out=$(mktemp -d "${TMPDIR:-/tmp}/soak_ab.XXXXXX")
mkdir -p "$out"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/soak_ab_data.XXXXXX")
spid=
cleanup() { [ -n "$spid" ] && kill "$spid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

table=$out/table.md
{
	echo "| round | server | load avg | pair p99.9 | pair max | blocking p99.9 | blocking max | delayed p99.9 | delayed max | pairs/s | lost/dup |"
	echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
} > "$table"

ms() { jq -r --arg k "$2" 'if .[$k] == null then "-" else (.[$k] / 1000 * 10 | round / 10 | tostring) end' "$1" 2>/dev/null || echo -; }

for r in $(seq "$rounds"); do
	for t in "${targets[@]}"; do
		name=${t%%=*}
		port=$(free_port)
		rm -rf "$tmp"/*
		proto=memcache
		if [ "$t" = redis ]; then
			proto=resp
			redis-server --bind 127.0.0.1 --port "$port" --save '' \
			    --appendonly yes --appendfsync always --dir "$tmp" \
			    > "$tmp/server.log" 2>&1 &
		else
			bin=${t#*=}
			spec=lmdb:$tmp/$name
			[ "$store" = sqlite ] && spec=sqlite:$tmp/$name.db
			"$bin" -l 127.0.0.1 -p "$port" --store "$spec" --sync always \
			    > "$tmp/server.log" 2>&1 &
		fi
		spid=$!
		wait_port "$port" || { echo "soak_ab.sh: $name did not start" >&2; cat "$tmp/server.log" >&2; exit 1; }
		load=$(cut -d' ' -f1 /proc/loadavg)
		d=$out/$name-$r
		"$here/soak.sh" -s "127.0.0.1:$port" --pid "$spid" -t "$secs" \
		    --protocol "$proto" --out "$d" > /dev/null
		kill "$spid"; wait "$spid" 2>/dev/null; spid=
		lost=$(jq -s -r 'map(.lost) | add | tostring' "$d"/*.json)/$(jq -s -r 'map(.duplicates) | add | tostring' "$d"/*.json)
		pps=$(jq -r '.items_per_s' "$d/pair.json")
		dp=- dm=-
		[ -s "$d/delayed.json" ] && { dp=$(ms "$d/delayed.json" late_p999_us); dm=$(ms "$d/delayed.json" late_max_us); }
		echo "| $r | $name | $load | $(ms "$d/pair.json" lat_p999_us) | $(ms "$d/pair.json" lat_max_us) | $(ms "$d/blocking.json" e2e_p999_us) | $(ms "$d/blocking.json" e2e_max_us) | $dp | $dm | $pps | $lost |" >> "$table"
		tail -1 "$table"
	done
done
echo "latencies in ms; results in $out"
