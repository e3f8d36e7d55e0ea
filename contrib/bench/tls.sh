#!/usr/bin/env bash
# tls.sh -- what TLS costs: `saker bench pair` (set+get pairs) against sakerd
# plain, sakerd --tls-cert, memcached plain and memcached -Z, at depth 1
# and 16, the four servers alternated in each round (A B C D A B C D ...).
#
# usage: contrib/bench/tls.sh [--quick] [-c CONNS] [-t SECONDS] [-r ROUNDS]
#   SAKERD=path/to/sakerd SAKER=path/to/saker (default ./sakerd ./saker).
#   Default: 4 connections, 3 s per run, 3 rounds (about 2.5 minutes);
#   --quick: 1 s, 1 round.
#
# The certificate (EC P-256, made here with openssl req) and every server
# live in a temporary directory removed on exit.  One line per run on
# stderr; a Markdown table of the medians on stdout.
set -u

CONNS=4; SECS=3; ROUNDS=3
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) SECS=1; ROUNDS=1 ;;
	-c) CONNS=$2; shift ;;
	-t) SECS=$2; shift ;;
	-r) ROUNDS=$2; shift ;;
	-h|--help) sed -n '2,13p' "$0"; exit 0 ;;
	*) echo "tls.sh: unknown argument $1" >&2; exit 1 ;;
	esac
	shift
done

SAKERD=${SAKERD:-./sakerd}
SAKER=${SAKER:-./saker}
for b in "$SAKERD" "$SAKER" memcached openssl; do
	command -v "$b" >/dev/null || { echo "tls.sh: $b not found" >&2; exit 1; }
done
memcached -h 2>/dev/null | grep -q -- '--enable-ssl' ||
	{ echo "tls.sh: this memcached has no TLS (-Z)" >&2; exit 1; }

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=ports.sh
. "$HERE/ports.sh"

TMP=$(mktemp -d /tmp/saker-tls.XXXXXX)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$TMP/key.pem" -out "$TMP/cert.pem" -days 1 -subj /CN=localhost \
	-addext subjectAltName=IP:127.0.0.1 2>/dev/null ||
	{ echo "tls.sh: openssl req failed" >&2; exit 1; }

declare -A PORT PID TLS VERIFY
start() {
	# start NAME TLS VERIFY cmd... (@PORT@ replaced)
	local name=$1 tls=$2 verify=$3; shift 3
	local port; port=$(free_port)
	"${@//@PORT@/$port}" >"$TMP/$name.log" 2>&1 &
	PIDS+=("$!")
	wait_port "$port" || { echo "tls.sh: $name did not start:" >&2;
		cat "$TMP/$name.log" >&2; exit 1; }
	PORT[$name]=$port; PID[$name]=$!; TLS[$name]=$tls; VERIFY[$name]=$verify
}
MCU=(); [ "$(id -u)" = 0 ] && MCU=(-u root)
start saker 0 1 "$SAKERD" -l 127.0.0.1 -p @PORT@ --store memory
start saker-tls 1 1 "$SAKERD" -l 127.0.0.1 -p @PORT@ --store memory \
	--tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem"
start memcached 0 0 memcached "${MCU[@]}" -l 127.0.0.1 -p @PORT@ -U 0 -m 256
start memcached-tls 1 0 memcached "${MCU[@]}" -l 127.0.0.1 -p @PORT@ -U 0 -m 256 \
	-Z -o "ssl_chain_cert=$TMP/cert.pem,ssl_key=$TMP/key.pem"
NAMES="saker saker-tls memcached memcached-tls"

echo "sakerd: $("$SAKERD" --version | head -1); $(memcached -V); $(openssl version)" >&2
echo "$(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" >&2
echo "pair, $CONNS conns, 64-byte items, $SECS s per run, $ROUNDS rounds" >&2

jf() { sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p" <<<"$2"; }
RES="$TMP/results"
: > "$RES"
for round in $(seq 1 "$ROUNDS"); do
	for depth in 1 16; do
		for n in $NAMES; do
			opts=(pair -s "127.0.0.1:${PORT[$n]}" -c "$CONNS" -d "$depth"
			    -t "$SECS" --json --quiet --server-pid "${PID[$n]}")
			[ "${TLS[$n]}" = 1 ] && opts+=(--tls --tls-ca "$TMP/cert.pem")
			[ "${VERIFY[$n]}" = 0 ] && opts+=(--no-verify)
			line=$("$SAKER" bench "${opts[@]}" 2>"$TMP/err")
			if [ -z "$line" ]; then
				echo "  $n d=$depth: FAILED: $(head -1 "$TMP/err")" >&2
				continue
			fi
			items=$(jf items_per_s "$line"); p50=$(jf lat_p50_us "$line")
			p99=$(jf lat_p99_us "$line"); cpu=$(jf server_cpu_pct "$line")
			echo "  round $round d=$depth $n: $items items/s, p50 $p50 us, p99 $p99 us, server cpu $cpu%" >&2
			printf '%s %s %s %s %s %s\n' "$n" "$depth" "$items" "$p50" "$p99" "$cpu" >> "$RES"
		done
	done
done

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "| server | depth | items/s (median) | p50 µs | p99 µs | server CPU % |"
echo "|---|---:|---:|---:|---:|---:|"
for depth in 1 16; do
	for n in $NAMES; do
		sel() { awk -v n="$n" -v d="$depth" -v f="$1" '$1 == n && $2 == d { print $f }' "$RES" | median; }
		echo "| $n | $depth | $(sel 3) | $(sel 4) | $(sel 5) | $(sel 6) |"
	done
done
