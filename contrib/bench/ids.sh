#!/usr/bin/env bash
# ids.sh -- what deduplication ids cost (issue 44): `saker bench MODE`
# with plain sets next to the same run with `--ids` (every set carries
# its own /id=KEY, so the store writes an id record with every item), on
# the same sakerd, alternated in each round (plain ids plain ids ...; the
# order flips every other round so neither always runs on a fresher store).
#
# usage: contrib/bench/ids.sh [--quick] [-m MODE] [-c CONNS] [-d DEPTH]
#          [-t SECONDS] [-r ROUNDS] [-s SYNC] [STORE...]
#   SAKERD=path/to/sakerd SAKER=path/to/saker (default ./sakerd ./saker).
#   STORE: memory (default), lmdb, sqlite.  Default: mode produce (sets
#   only), 4 connections at depth 16, 3 s per run, 3 rounds, the durable
#   stores with --sync always (-s never or periodic to see the CPU cost
#   without the fsync); --quick: 1 s, 1 round.  The queues bench* keep up
#   to 10,000,000 ids (the default max_dedup_ids, 100000, would refuse
#   the ids of a fast run's later sets).
#
# Everything lives in a temporary directory removed on exit.  One line
# per run on stderr; a Markdown table of the medians and the ratio
# plain/ids of the medians on stdout.
set -u

MODE=produce; CONNS=4; DEPTH=16; SECS=3; ROUNDS=3; SYNC=always
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) SECS=1; ROUNDS=1 ;;
	-m) MODE=$2; shift ;;
	-c) CONNS=$2; shift ;;
	-d) DEPTH=$2; shift ;;
	-t) SECS=$2; shift ;;
	-r) ROUNDS=$2; shift ;;
	-s) SYNC=$2; shift ;;
	-h|--help) sed -n '2,20p' "$0"; exit 0 ;;
	-*) echo "ids.sh: unknown argument $1" >&2; exit 1 ;;
	*) break ;;
	esac
	shift
done
STORES=${*:-memory}

SAKERD=${SAKERD:-./sakerd}
SAKER=${SAKER:-./saker}
for b in "$SAKERD" "$SAKER" python3; do
	command -v "$b" >/dev/null || { echo "ids.sh: $b not found" >&2; exit 1; }
done

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=ports.sh
. "$HERE/ports.sh"

TMP=$(mktemp -d)
PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

printf '[queue bench*]\nmax_dedup_ids = 10000000\n' >"$TMP/ids.conf"

for store in $STORES; do
	case "$store" in
	memory) spec=memory ;;
	lmdb) spec="lmdb:$TMP/lmdb" ;;
	sqlite) spec="sqlite:$TMP/saker.sqlite" ;;
	*) echo "ids.sh: unknown store $store" >&2; exit 1 ;;
	esac
	port=$(free_port)
	"$SAKERD" -l 127.0.0.1 -p "$port" --store "$spec" --sync "$SYNC" \
	    --config "$TMP/ids.conf" >"$TMP/sakerd-$store.log" 2>&1 &
	PID=$!
	wait_port "$port" || { echo "ids.sh: sakerd did not start" >&2; exit 1; }
	for r in $(seq "$ROUNDS"); do
		order="plain ids"
		[ $((r % 2)) -eq 0 ] && order="ids plain"
		for kind in $order; do
			out="$TMP/$store-$kind-$r.json"
			opt=()
			[ "$kind" = ids ] && opt=(--ids)
			"$SAKER" bench "$MODE" -s "127.0.0.1:$port" -c "$CONNS" \
			    -d "$DEPTH" -t "$SECS" "${opt[@]}" --quiet --json \
			    --server-pid "$PID" >"$out" 2>"$TMP/err" ||
			    { echo "ids.sh: $kind run failed:" >&2; cat "$TMP/err" "$out" >&2; exit 1; }
			python3 - "$out" "$store" "$kind" "$r" >&2 <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print("%s %s round %s: %d sets/s, p50 %.0f us, p99 %.0f us, server %.2f us/item,"
      " errors %d, lost %d, duplicates %d" % (
          sys.argv[2], sys.argv[3], sys.argv[4], d["items_per_s"],
          d["lat_p50_us"], d["lat_p99_us"], d.get("server_us_per_item", -1),
          d["errors"], d["lost"], d["duplicates"]))
EOF
		done
	done
	kill "$PID"; wait "$PID" 2>/dev/null; PID=
done

python3 - "$TMP" "$STORES" "$MODE" "$SYNC" <<'EOF'
import glob, json, statistics, sys
tmp, stores, mode, sync = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4]
print("mode %s, durable stores with --sync %s; medians" % (mode, sync))
print()
print("| store | sets | sets/s | p50 us | p99 us | server us/set | runs | plain/ids sets/s |")
print("|---|---|---|---|---|---|---|---|")
for s in stores:
    med = {}
    for k in ("plain", "ids"):
        ds = [json.load(open(f)) for f in sorted(glob.glob("%s/%s-%s-*.json" % (tmp, s, k)))]
        m = lambda f: statistics.median(f(d) for d in ds)
        med[k] = m(lambda d: d["items_per_s"])
        print("| %s | %s | %d | %.0f | %.0f | %.2f | %d | %s |" % (
            s, k, med[k], m(lambda d: d["lat_p50_us"]), m(lambda d: d["lat_p99_us"]),
            m(lambda d: d.get("server_us_per_item", 0)), len(ds),
            "%.2f" % (med["plain"] / med["ids"]) if k == "ids" and med["ids"] > 0 else ""))
EOF
