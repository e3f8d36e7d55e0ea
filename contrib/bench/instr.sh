#!/bin/bash
# instr.sh -- instructions per item, counted by callgrind: the steady
# "nothing slower" figure on a machine whose wall-clock rates are noisy.
# For each store, sakerd runs under callgrind while `saker bench MODE`
# drives it for a few seconds; the total instructions the server executed
# (from the first
# request on: start-up is zeroed) are divided by the items the bench moved.
#
#   contrib/bench/instr.sh [-m MODE] [-t SECS] [STORE...]   (memory lmdb sqlite)
#   SAKERD=path/to/sakerd SAKER=path/to/saker (default ./sakerd ./saker)
#   BENCH_ARGS="-c 4 -d 16" (the default)
#
# Run it for two builds, one after the other, and compare the figures; the
# count does not depend on the machine's load (system calls, fdatasync
# included, count a few instructions each).
set -eu
cd "$(dirname "$0")/../.."
. contrib/bench/ports.sh
SAKERD=${SAKERD:-./sakerd}
SAKER=${SAKER:-./saker}
MODE=pair
SECS=5
while getopts m:t: o; do
	case $o in
	m) MODE=$OPTARG ;;
	t) SECS=$OPTARG ;;
	*) echo "usage: $0 [-m MODE] [-t SECS] [STORE...]" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- memory lmdb sqlite
command -v valgrind >/dev/null || { echo "instr.sh: needs valgrind" >&2; exit 1; }
TMP=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$TMP"' EXIT
echo "store  mode  items  instructions  per_item"
for store in "$@"; do
	case $store in
	memory) spec=memory ;;
	lmdb) spec="lmdb:$TMP/lmdb" ;;
	sqlite) spec="sqlite:$TMP/q.db" ;;
	*) echo "instr.sh: unknown store $store" >&2; exit 2 ;;
	esac
	port=$(free_port)
	valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.$store" \
	    "$SAKERD" --store "$spec" -l 127.0.0.1 -p "$port" \
	    >"$TMP/sakerd-$store.log" 2>&1 &
	PID=$!
	wait_port "$port" || sleep 10
	# count from here: start-up (and its recovery) is not per item
	callgrind_control -z "$PID" >/dev/null 2>&1 || true
	"$SAKER" bench "$MODE" -s "127.0.0.1:$port" ${BENCH_ARGS:--c 4 -d 16} \
	    -t "$SECS" --json --quiet >"$TMP/bench.$store"
	kill -TERM "$PID"
	wait "$PID" || true
	PID=
	items=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j.get("items") or j.get("pairs") or j.get("ops"))' "$TMP/bench.$store")
	ir=$(callgrind_annotate "$TMP/cg.$store" 2>/dev/null |
	    awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }')
	printf '%s  %s  %s  %s  %s\n' "$store" "$MODE" "$items" "$ir" \
	    "$(( ir / (items > 0 ? items : 1) ))"
done
