#!/usr/bin/env bash
# retry.sh -- what retries cost (issue 37): `saker bench retry` (workers
# set, get/open, then close the job or, for --fail PCT of them, abort it
# into the queue's retry_backoff) next to `saker bench pair` (set+get) on
# the same sakerd, alternated in each round (pair retry pair retry ...).
#
# usage: contrib/bench/retry.sh [--quick] [-c CONNS] [-t SECONDS] [-r ROUNDS]
#          [-f PCT] [STORE...]
#   SAKERD=path/to/sakerd SAKER=path/to/saker (default ./sakerd ./saker).
#   STORE: memory (default), lmdb, sqlite, postgres; the durable ones with
#   --sync always (postgres: a throwaway cluster from PostgreSQL's server
#   binaries, PG_BINDIR overrides /usr/lib/postgresql/*/bin, as user nobody
#   when run as root, default durability).  Default: 4 connections, 5 s per
#   run, 3 rounds, 10 %
#   of the jobs failing; --quick: 1 s, 1 round.  The queue bench0 has
#   retry_backoff = 100,2s and max_deliveries = 5.
#
# Everything lives in a temporary directory removed on exit.  One line
# per run on stderr; a Markdown table of the medians on stdout.
set -u

CONNS=4; SECS=5; ROUNDS=3; FAIL=10
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) SECS=1; ROUNDS=1 ;;
	-c) CONNS=$2; shift ;;
	-t) SECS=$2; shift ;;
	-r) ROUNDS=$2; shift ;;
	-f) FAIL=$2; shift ;;
	-h|--help) sed -n '2,19p' "$0"; exit 0 ;;
	-*) echo "retry.sh: unknown argument $1" >&2; exit 1 ;;
	*) break ;;
	esac
	shift
done
STORES=${*:-memory}

SAKERD=${SAKERD:-./sakerd}
SAKER=${SAKER:-./saker}
for b in "$SAKERD" "$SAKER" python3; do
	command -v "$b" >/dev/null || { echo "retry.sh: $b not found" >&2; exit 1; }
done

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=ports.sh
. "$HERE/ports.sh"

TMP=$(mktemp -d)
PID=
PGBIN=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
RUNAS=()
[ "$(id -u)" = 0 ] && RUNAS=(runuser -u nobody --)
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null
	[ -f "$TMP/pg/postmaster.pid" ] &&
	    "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$TMP/pg" -m immediate -w stop >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT

# A throwaway PostgreSQL cluster on a free loopback port; prints its
# conninfo.
start_pg() {
	local try port
	[ ${#RUNAS[@]} -gt 0 ] && chown nobody "$TMP"
	"${RUNAS[@]}" "$PGBIN/initdb" -D "$TMP/pg" -A trust -U saker -E UTF8 \
	    >"$TMP/initdb.log" 2>&1 || { cat "$TMP/initdb.log" >&2; return 1; }
	for try in 1 2 3; do
		port=$(free_port)
		"${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$TMP/pg" -l "$TMP/pg.log" -w -o \
		    "-c listen_addresses=127.0.0.1 -p $port -k $TMP" start \
		    >/dev/null && { echo "host=127.0.0.1 port=$port dbname=postgres user=saker"; return 0; }
	done
	cat "$TMP/pg.log" >&2
	return 1
}

printf '[queue bench0]\nretry_backoff = 100,2s\nmax_deliveries = 5\n' \
    >"$TMP/retry.conf"

for store in $STORES; do
	case "$store" in
	memory) spec=memory ;;
	lmdb) spec="lmdb:$TMP/lmdb" ;;
	sqlite) spec="sqlite:$TMP/saker.sqlite" ;;
	postgres) spec="postgres:$(start_pg)" || exit 1 ;;
	*) echo "retry.sh: unknown store $store" >&2; exit 1 ;;
	esac
	port=$(free_port)
	"$SAKERD" -l 127.0.0.1 -p "$port" --store "$spec" --sync always \
	    --config "$TMP/retry.conf" >"$TMP/sakerd-$store.log" 2>&1 &
	PID=$!
	wait_port "$port" || { echo "retry.sh: sakerd did not start" >&2; exit 1; }
	for r in $(seq "$ROUNDS"); do
		for mode in pair retry; do
			out="$TMP/$store-$mode-$r.json"
			"$SAKER" bench "$mode" -s "127.0.0.1:$port" -c "$CONNS" \
			    -t "$SECS" --fail "$FAIL" --quiet --json \
			    --server-pid "$PID" >"$out" 2>"$TMP/err" ||
			    { echo "retry.sh: $mode failed:" >&2; cat "$TMP/err" >&2; exit 1; }
			python3 - "$out" "$store" "$mode" "$r" >&2 <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print("%s %s round %s: %d items/s, %d ops/s, p99 %.0f us, server %.1f us/item,"
      " retries %s, dead-lettered %s, lost %d, duplicates %d" % (
          sys.argv[2], sys.argv[3], sys.argv[4], d["items_per_s"],
          d["ops_per_s"], d["lat_p99_us"], d.get("server_us_per_item", -1),
          d.get("retries", "-"), d.get("dead_lettered", "-"), d["lost"],
          d["duplicates"]))
EOF
		done
	done
	kill "$PID"; wait "$PID" 2>/dev/null; PID=
done

python3 - "$TMP" "$STORES" <<'EOF'
import glob, json, statistics, sys
tmp, stores = sys.argv[1], sys.argv[2].split()
print("| store | mode | items/s | ops/s | p99 us | server us/item | runs |")
print("|---|---|---|---|---|---|---|")
for s in stores:
    for m in ("pair", "retry"):
        ds = [json.load(open(f)) for f in sorted(glob.glob("%s/%s-%s-*.json" % (tmp, s, m)))]
        med = lambda k: statistics.median(d.get(k, 0) for d in ds)
        print("| %s | %s | %d | %d | %.0f | %.1f | %d |" % (
            s, m, med("items_per_s"), med("ops_per_s"), med("lat_p99_us"),
            med("server_us_per_item"), len(ds)))
EOF
