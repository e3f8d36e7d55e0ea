#!/bin/sh
# async_commit.sh [ROUNDS] [SECONDS] -- --commit sync against --commit async
# (issue 43), alternated: per round and mode, a fresh LMDB store with
# --sync always, `saker bench produce -c 50 -d 1 -t SECONDS --server-pid`
# and, beside it, version_probe.py (a `version` every 10 ms on another
# connection).  Run from the build directory.  Prints one line per run.
set -eu
ROUNDS=${1:-3}
SECS=${2:-4}
STORE=${STORE:-lmdb}
HERE=$(dirname "$0")
PORT=${PORT:-22199}
TMP=$(mktemp -d /tmp/saker-async.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
run() {
	mode=$1
	rm -rf "$TMP/store" "$TMP/store.db"
	case $STORE in
	lmdb) spec="lmdb:$TMP/store" ;;
	sqlite) spec="sqlite:$TMP/store.db" ;;
	esac
	./sakerd -l 127.0.0.1 -p "$PORT" --store "$spec" --sync always \
	    --commit "$mode" >"$TMP/log" 2>&1 &
	pid=$!
	sleep 0.5
	python3 "$HERE/version_probe.py" "127.0.0.1:$PORT" "$SECS" \
	    >"$TMP/probe" &
	probe=$!
	./saker bench produce -s "127.0.0.1:$PORT" -c 50 -d 1 -t "$SECS" \
	    --server-pid "$pid" >"$TMP/bench" 2>&1
	wait "$probe"
	kill "$pid"
	wait "$pid" || true
	printf '%s %-5s %s | %s\n' "$STORE" "$mode" \
	    "$(grep -E 'sets/s|items/s' "$TMP/bench" | head -1 | tr -s ' ')" \
	    "$(cat "$TMP/probe")"
	grep -E 'cpu|CPU' "$TMP/bench" | head -2 | sed 's/^/    /'
}
r=1
while [ "$r" -le "$ROUNDS" ]; do
	run sync
	run async
	r=$((r + 1))
done
