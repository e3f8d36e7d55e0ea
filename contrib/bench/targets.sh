#!/usr/bin/env bash
# targets.sh -- the measurements behind the "Targets" table of
# docs/benchmarks.md that compare.sh does not make: 50 connections,
# --sync never against the memory store, durable produce against Redis
# appendfsync always, 2000 delayed items over 2 s, and multi-get on one
# unpipelined connection.  Three alternating rounds where it compares.
#
# usage: SAKERD=./sakerd SAKER=./saker contrib/bench/targets.sh [ROUNDS]
# Every server listens on 127.0.0.1 on a free port with its data in a
# temporary directory, removed by the EXIT trap.  About 4 minutes.
set -u
SAKERD=${SAKERD:-./sakerd}
SAKER=${SAKER:-./saker}
ROUNDS=${1:-3}
TMP=$(mktemp -d)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. "$(dirname "$0")/ports.sh"

# start NAME COMMAND...: the command gets the port appended as the value of
# its last option; the port is stored in PORT_<NAME>.
start() {
	local name=$1 port; shift
	port=$(free_port)
	"$@" "$port" >/dev/null 2>&1 &
	PIDS+=($!)
	wait_port "$port"
	printf -v "PORT_$name" %s "$port"
}

start mem "$SAKERD" -l 127.0.0.1 --store memory -p
start lmdbnever "$SAKERD" -l 127.0.0.1 --store "lmdb:$TMP/ln" --sync never -p
start sqlnever "$SAKERD" -l 127.0.0.1 --store "sqlite:$TMP/sn.db" --sync never -p
start lmdbalways "$SAKERD" -l 127.0.0.1 --store "lmdb:$TMP/la" --sync always -p
start sqlalways "$SAKERD" -l 127.0.0.1 --store "sqlite:$TMP/sa.db" --sync always -p
mkdir -p "$TMP/aof"
if command -v redis-server >/dev/null; then
	start redis redis-server --bind 127.0.0.1 --save '' --appendonly no --port
	start redisaof redis-server --bind 127.0.0.1 --save '' --appendonly yes \
	    --appendfsync always --dir "$TMP/aof" --port
fi

# items/s of one run
ips() { "$SAKER" bench "$@" --quiet 2>&1 | sed -n 's/.*(\([0-9]*\) items\/s).*/\1/p' | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

echo "== set+get pairs, 50 connections (items/s)"
for d in 1 16; do
	for r in $(seq "$ROUNDS"); do
		m=$(ips pair -s "127.0.0.1:$PORT_mem" -c 50 -d "$d" -t 3)
		l=$(ips pair -s "127.0.0.1:$PORT_lmdbnever" -c 50 -d "$d" -t 3)
		s=$(ips pair -s "127.0.0.1:$PORT_sqlnever" -c 50 -d "$d" -t 3)
		line="depth $d round $r: memory $m, lmdb --sync never $l ($(ratio "$l" "$m")x), sqlite --sync never $s ($(ratio "$s" "$m")x)"
		if [ -n "${PORT_redis:-}" ]; then
			x=$(ips pair --protocol resp -s "127.0.0.1:$PORT_redis" -c 50 -d "$d" -t 3)
			line="$line, redis $x (memory/redis $(ratio "$m" "$x"))"
		fi
		echo "$line"
	done
done

echo "== acknowledged sets/s, 50 producers, --sync always vs appendfsync always"
for r in $(seq "$ROUNDS"); do
	l=$(ips produce -s "127.0.0.1:$PORT_lmdbalways" -c 50 -d 1 -t 3)
	s=$(ips produce -s "127.0.0.1:$PORT_sqlalways" -c 50 -d 1 -t 3)
	line="round $r: lmdb $l, sqlite $s"
	if [ -n "${PORT_redisaof:-}" ]; then
		x=$(ips produce --protocol resp -s "127.0.0.1:$PORT_redisaof" -c 50 -d 1 -t 3)
		line="$line, redis-aof $x (lmdb/redis $(ratio "$l" "$x"), sqlite/redis $(ratio "$s" "$x"))"
	fi
	echo "$line"
done

echo "== promotion lateness, 2000 items due over 2000 ms, 4 blocked consumers"
for t in mem lmdbalways sqlalways; do
	p=PORT_$t
	echo "$t: $("$SAKER" bench delayed -s "127.0.0.1:${!p}" --items 2000 --window 2000 2>&1 | grep 'promotion lateness')"
done

echo "== multi-get, one unpipelined connection: requests/s and server CPU"
pid=$(pgrep -f -- "--store memory -p $PORT_mem" | head -1)
for k in 1 100; do
	echo "keys $k: $("$SAKER" bench mget -s "127.0.0.1:$PORT_mem" -c 1 -d 1 -k "$k" --items $((400000 / k)) -t 30 --server-pid "$pid" 2>&1 | grep -E 'measured|server cpu' | tr '\n' ' ')"
done
