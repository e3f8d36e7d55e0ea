#!/usr/bin/env bash
# capped.sh -- acknowledged sets to a queue with a cap against the same
# queue without one, on one broker over PostgreSQL (issue 42: every set
# to a capped queue used to count the queue's rows in the database).
#   The queue bench0 is filled with FILL items (45,000) first; then, in
#   turn ROUNDS times, a broker with `[queue bench0] max_items` in its
#   --config (far above what a run adds) and one without, each taking
#   16 connections of `saker bench produce` for SECONDS.  Items pile up
#   between runs (no clean), so every run starts with FILL or more.
# usage: SAKERD=./sakerd SAKER=./saker contrib/bench/capped.sh [ROUNDS] [SECONDS]
# The cluster lives in a temporary directory (as user nobody when run as
# root), on 127.0.0.1, default durability; the EXIT trap removes it.
set -u
SAKERD=${SAKERD:-./sakerd}
SAKER=${SAKER:-./saker}
ROUNDS=${1:-2}
SECS=${2:-5}
FILL=${FILL:-45000}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d /tmp/saker-capped-XXXXXX)
PID=
PGBIN=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
RUNAS=()
[ "$(id -u)" = 0 ] && RUNAS=(runuser -u nobody --)

cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	[ -f "$TMP/data/postmaster.pid" ] &&
	    "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$TMP/data" -m immediate -w stop >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. "$HERE/ports.sh"

[ ${#RUNAS[@]} -gt 0 ] && chown nobody "$TMP"
"${RUNAS[@]}" "$PGBIN/initdb" -D "$TMP/data" -A trust -U saker -E UTF8 \
    >"$TMP/initdb.log" 2>&1 || { cat "$TMP/initdb.log"; exit 1; }
# a free port may be taken by someone else meanwhile: try three
for try in 1 2 3; do
	PGPORT=$(free_port)
	"${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$TMP/data" -l "$TMP/server.log" -w -o \
	    "-c listen_addresses=127.0.0.1 -p $PGPORT -k $TMP" start >/dev/null &&
	    break
	[ "$try" = 3 ] && { cat "$TMP/server.log"; exit 1; }
done
DB="host=127.0.0.1 port=$PGPORT dbname=postgres user=saker"
printf '[queue bench0]\nmax_items = 100000000\n' >"$TMP/capped.conf"
: >"$TMP/plain.conf"

# broker CONFIG: a sakerd on a free port with that --config
broker() {
	[ -n "$PID" ] && { kill "$PID"; wait "$PID" 2>/dev/null; }
	for try in 1 2 3; do
		PORT=$(free_port)
		"$SAKERD" -l 127.0.0.1 -p "$PORT" --store "postgres:$DB" \
		    --config "$1" >"$TMP/sakerd.log" 2>&1 &
		PID=$!
		wait_port "$PORT" && sleep 0.3 && kill -0 "$PID" 2>/dev/null && return
		wait "$PID" 2>/dev/null
	done
	cat "$TMP/sakerd.log"
	exit 1
}

# run: acknowledged sets/s of 16 producers, one queue
run() {
	"$SAKER" bench produce -s "127.0.0.1:$PORT" -c 16 -t "$SECS" \
	    --no-clean --no-verify --quiet --json | sed -n 's/.*"ops_per_s":\([0-9.]*\).*/\1/p'
}

# queued: the items of bench0 now
queued() {
	"$SAKER" stats -s "127.0.0.1:$PORT" --raw 2>/dev/null |
	    sed -n 's/^STAT queue_bench0_items \([0-9]*\).*/\1/p'
}

broker "$TMP/plain.conf"
"$SAKER" bench produce -s "127.0.0.1:$PORT" -c 16 -t 1 --no-verify --quiet >/dev/null ||
    exit 1
while [ "$(queued)" -lt "$FILL" ]; do
	"$SAKER" bench produce -s "127.0.0.1:$PORT" -c 16 -t 1 --no-clean --no-verify \
	    --quiet >/dev/null || exit 1
done
echo "filled: $(queued) items in bench0"
for r in $(seq "$ROUNDS"); do
	broker "$TMP/capped.conf"
	c=$(run)
	broker "$TMP/plain.conf"
	p=$(run)
	echo "round $r: capped $c sets/s, uncapped $p sets/s"
done
echo "queued at the end: $(queued)"
