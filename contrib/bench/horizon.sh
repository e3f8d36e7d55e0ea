#!/usr/bin/env bash
# horizon.sh -- the PostgreSQL store while something else holds the
# database's xmin horizon (issue 47, docs/benchmarks.md "Held horizon").
#
# One sakerd on the postgres store over a unix socket, saker bench pairs
# (set+get) from CONNS connections in windows of SECS seconds, the same
# queue throughout (--no-clean).  Windows follow PLAN, a word per window:
#   off   nothing holds the horizon
#   on    an idle session holds one: BEGIN ISOLATION LEVEL REPEATABLE
#         READ; SELECT 1; opened before the first "on" window of a run
#         of them and committed after its last
# After every window: pairs/s, the dead tuples of saker_items (of its
# segments, pg_stat_user_tables) and the store's size on disk (relations
# and indexes).  PGOPTS: more postgres options; with PGOPTS="-c
# shared_preload_libraries=pg_stat_statements" STMTS=1 the statements
# that took the database's time are listed at the end.  With PGBENCH=1 the same plan is run again with pgbench on a
# plain SKIP LOCKED table (insert, then DELETE ... WHERE id = (SELECT ...
# FOR UPDATE SKIP LOCKED LIMIT 1)) from the same number of clients.
#
# usage: SAKERD=./sakerd SAKER=./saker contrib/bench/horizon.sh \
#            [PLAN [SECS [CONNS]]]
#   e.g. contrib/bench/horizon.sh "off on off on off on" 15 16
# Needs PostgreSQL's server binaries (initdb, pg_ctl; PG_BINDIR overrides
# /usr/lib/postgresql/*/bin), psql, and pgbench for PGBENCH=1.  The
# cluster lives in a temporary directory (as user nobody when run as
# root) with default settings, and is removed by the EXIT trap.
set -u
SAKERD=${SAKERD:-./sakerd}
SAKER=${SAKER:-./saker}
PLAN=${1:-off on on on off}
SECS=${2:-15}
CONNS=${3:-16}
PGBENCH=${PGBENCH:-0}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d /tmp/saker-horizon-XXXXXX)
PIDS=()
HOLD=
PGBIN=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
RUNAS=()
[ "$(id -u)" = 0 ] && RUNAS=(runuser -u nobody --)

cleanup() {
	[ -n "$HOLD" ] && kill "$HOLD" 2>/dev/null
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	[ -f "$TMP/data/postmaster.pid" ] &&
	    "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$TMP/data" -m immediate -w stop >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. "$HERE/ports.sh"

for t in "$PGBIN/initdb" "$PGBIN/pg_ctl" psql; do
	command -v "$t" >/dev/null || { echo "horizon.sh: $t not found" >&2; exit 1; }
done
[ ${#RUNAS[@]} -gt 0 ] && chown nobody "$TMP"
"${RUNAS[@]}" "$PGBIN/initdb" -D "$TMP/data" -A trust -U saker -E UTF8 \
    >"$TMP/initdb.log" 2>&1 || { cat "$TMP/initdb.log"; exit 1; }
"${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$TMP/data" -l "$TMP/server.log" -w -o \
    "-c listen_addresses= -k $TMP ${PGOPTS:-}" start >/dev/null ||
    { cat "$TMP/server.log"; exit 1; }
DB="host=$TMP dbname=postgres user=saker"
sql() { psql "$DB" -qAtX -c "$1"; }

# hold / unhold: the idle REPEATABLE READ session, a psql reading a fifo
mkfifo "$TMP/hold" || exit 1
hold() {
	[ -n "$HOLD" ] && return
	psql "$DB" -qAtX <"$TMP/hold" >/dev/null &
	HOLD=$!
	exec 9>"$TMP/hold"
	echo "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1;" >&9
	# until the snapshot is taken
	for _ in $(seq 50); do
		[ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_xmin IS NOT NULL AND state = 'idle in transaction'")" -gt 0 ] && return
		sleep 0.1
	done
	echo "horizon.sh: the holding session did not start" >&2
	exit 1
}
unhold() {
	[ -z "$HOLD" ] && return
	echo "COMMIT;" >&9
	exec 9>&-
	wait "$HOLD" 2>/dev/null
	HOLD=
}
# dead TABLE: n_dead_tup (of its segments too: saker_items_s0..., store
# format 7); size PATTERN: bytes of the matching tables
dead() { sql "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE relname = '$1' OR relname LIKE '$1\_s_'"; }
size() { sql "SELECT coalesce(sum(pg_total_relation_size(oid)), 0) FROM pg_class WHERE relkind = 'r' AND relname LIKE '$1'"; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

# a free port may be taken meanwhile: three tries
for try in 1 2 3; do
	PORT=$(free_port)
	"$SAKERD" -l 127.0.0.1 -p "$PORT" --store "postgres:$DB" >"$TMP/sakerd.log" 2>&1 &
	SPID=$!
	wait_port "$PORT" && kill -0 "$SPID" 2>/dev/null && break
	wait "$SPID" 2>/dev/null
	[ "$try" = 3 ] && { echo "sakerd did not start:"; cat "$TMP/sakerd.log"; exit 1; }
done
PIDS+=("$SPID")

echo "horizon.sh: PostgreSQL $("$PGBIN/postgres" --version | awk '{ print $3 }'), unix socket, $CONNS connections, ${SECS} s windows, $(nproc) cores"
echo "plan: $PLAN"
printf '%-6s %-6s %10s %10s %9s\n' what window pairs/s dead_tup size_MB
n=0
for w in $PLAN; do
	n=$((n + 1))
	[ "$w" = on ] && hold
	[ "$w" = off ] && unhold
	out=$("$SAKER" bench pair -s "127.0.0.1:$PORT" -c "$CONNS" -t "$SECS" \
	    --no-clean --quiet 2>&1)
	if ! grep -q "lost 0, duplicates 0, unacknowledged 0.*=> ok" <<<"$out"; then
		echo "VERIFY FAILED:" >&2
		echo "$out" >&2
		exit 1
	fi
	rate=$(sed -n 's/.*(\([0-9]*\) pairs\/s).*/\1/p; s/.*(\([0-9]*\) items\/s).*/\1/p' <<<"$out" | head -1)
	sleep 1	# the statistics collector's next flush
	printf '%-6s %-6s %10s %10s %9s\n' saker "$n:$w" "$rate" "$(dead saker_items)" \
	    "$(mb "$(size 'saker_%')")"
done
unhold
# PGOPTS="-c shared_preload_libraries=pg_stat_statements" STMTS=1: where
# the database's time went
if [ -n "${STMTS:-}" ]; then
	sql "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
	sql "SELECT calls, round(total_exec_time)::bigint AS ms, shared_blks_hit + shared_blks_read AS blks, left(regexp_replace(query, '\s+', ' ', 'g'), 110) FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 12"
fi
[ -n "${SAKER_HORIZON_LOG:-}" ] && cp "$TMP/sakerd.log" "$SAKER_HORIZON_LOG"

[ "$PGBENCH" = 1 ] || exit 0
command -v pgbench >/dev/null || { echo "horizon.sh: pgbench not found" >&2; exit 1; }
sql "CREATE TABLE bench_q (id bigserial PRIMARY KEY, data text NOT NULL)" || exit 1
PAYLOAD=$(printf 'x%.0s' $(seq 64))
{
	printf "INSERT INTO bench_q(data) VALUES ('%s');\n" "$PAYLOAD"
	echo "DELETE FROM bench_q WHERE id = (SELECT id FROM bench_q ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING data;"
} >"$TMP/pair.sql"
n=0
for w in $PLAN; do
	n=$((n + 1))
	[ "$w" = on ] && hold
	[ "$w" = off ] && unhold
	rate=$(pgbench -n -h "$TMP" -U saker -c "$CONNS" -j 2 -T "$SECS" \
	    -f "$TMP/pair.sql" postgres 2>/dev/null |
	    sed -n 's/^tps = \([0-9]*\).*/\1/p' | head -1)
	sleep 1
	printf '%-6s %-6s %10s %10s %9s\n' pgbench "$n:$w" "$rate" "$(dead bench_q)" \
	    "$(mb "$(size 'bench_q')")"
done
unhold
