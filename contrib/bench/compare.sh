#!/usr/bin/env bash
# compare.sh -- run the same `saker bench` workloads against sakerd (each
# compiled-in store) and, where installed, redis-server, memcached and
# beanstalkd; alternate the servers (A B A B), write a Markdown report and
# gnuplot PNGs.
#
# usage: contrib/bench/compare.sh [--quick] [--out DIR] [--report-only]
#   --report-only: rebuild results.md and the plots from DIR/results.tsv.
#   SAKERD=path/to/sakerd SAKER=path/to/saker (default: ./sakerd ./saker,
#   then $PATH).  Full run: about 9 minutes on 2 cores; --quick: about 2.
#
# Every server listens on 127.0.0.1 on a free port, keeps its data in a
# temporary directory and is stopped by the EXIT trap, even on ^C.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
QUICK=0
REPORT_ONLY=0
OUT=bench-results
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1 ;;
	--out) OUT=$2; shift ;;
	--report-only) REPORT_ONLY=1 ;;
	-h|--help) sed -n '2,14p' "$0"; exit 0 ;;
	*) echo "compare.sh: unknown argument $1" >&2; exit 1 ;;
	esac
	shift
done

findbin() {
	# $1 env value, $2 name
	if [ -n "$1" ]; then echo "$1"; return; fi
	if [ -x "./$2" ]; then echo "$(pwd)/$2"; return; fi
	command -v "$2" || true
}
SAKERD=$(findbin "${SAKERD:-}" sakerd)
SAKER=$(findbin "${SAKER:-}" saker)
if [ -z "$SAKERD" ] || [ -z "$SAKER" ]; then
	echo "compare.sh: need sakerd and saker (set SAKERD= and SAKER=)" >&2
	exit 1
fi

if [ "$QUICK" = 1 ]; then
	SECS=1; CONNS_LIST="1 16"; DUR_CONNS="1 16"; IDLE_SECS=2
	MGET_ITEMS_1=50000; MGET_ITEMS_K=1500; DELAY_WIN=2000; DELAY_ITEMS=400
else
	SECS=3; CONNS_LIST="1 4 16 64"; DUR_CONNS="1 16 64"; IDLE_SECS=10
	MGET_ITEMS_1=200000; MGET_ITEMS_K=4000; DELAY_WIN=5000; DELAY_ITEMS=1000
fi
REPS=2

TMP=$(mktemp -d /tmp/saker-compare.XXXXXX)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${PIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
RAW=$OUT/raw.jsonl
TSV=$OUT/results.tsv
# Server groups: in-memory, durable (fsync before the ack), and the slower
# runs (multi-get, delayed) that a quick run does only on the memory store.
MEM="saker-memory redis memcached beanstalkd"
DUR="saker-lmdb saker-sqlite redis-aof beanstalkd-wal"
SLOW="saker-memory saker-lmdb"
[ "$QUICK" = 1 ] && SLOW=saker-memory

if [ "$REPORT_ONLY" = 0 ]; then
: > "$RAW"
printf 'workload\ttarget\tconns\tdepth\trep\titems_s\tops_s\treq_s\tp50\tp90\tp99\tp999\tmax\tlost\tdups\tsrv_cpu_pct\n' > "$TSV"

. "$HERE/ports.sh"

# Targets: name -> "protocol port pid verify"
declare -A T_PROTO T_PORT T_PID T_VERIFY
TARGETS=()
start() {
	# start NAME PROTO VERIFY cmd... (the command gets the port via PORT)
	local name=$1 proto=$2 verify=$3; shift 3
	local port; port=$(free_port)
	local cmd=("${@//@PORT@/$port}")
	"${cmd[@]}" >"$TMP/$name.log" 2>&1 &
	local pid=$!
	PIDS+=("$pid")
	if ! wait_port "$port" || ! kill -0 "$pid" 2>/dev/null; then
		echo "  $name: did not start (see below), skipped" >&2
		sed 's/^/    /' "$TMP/$name.log" | head -3 >&2
		return
	fi
	T_PROTO[$name]=$proto; T_PORT[$name]=$port; T_PID[$name]=$pid
	T_VERIFY[$name]=$verify
	TARGETS+=("$name")
	echo "  $name on 127.0.0.1:$port (pid $pid)" >&2
}
have() { [[ " ${TARGETS[*]} " == *" $1 "* ]]; }

echo "starting servers in $TMP" >&2
mkdir -p "$TMP/lmdb" "$TMP/redis-aof" "$TMP/bs-wal"
start saker-memory memcache 1 "$SAKERD" -l 127.0.0.1 -p @PORT@ --store memory
start saker-lmdb memcache 1 "$SAKERD" -l 127.0.0.1 -p @PORT@ \
	--store "lmdb:$TMP/lmdb" --sync always
start saker-sqlite memcache 1 "$SAKERD" -l 127.0.0.1 -p @PORT@ \
	--store "sqlite:$TMP/saker.sqlite" --sync always
if command -v redis-server >/dev/null; then
	start redis resp 1 redis-server --bind 127.0.0.1 --port @PORT@ \
		--save '' --appendonly no --dir "$TMP"
	start redis-aof resp 1 redis-server --bind 127.0.0.1 --port @PORT@ \
		--save '' --appendonly yes --appendfsync always \
		--dir "$TMP/redis-aof"
fi
if command -v memcached >/dev/null; then
	MCU=(); [ "$(id -u)" = 0 ] && MCU=(-u root)
	start memcached memcache 0 memcached "${MCU[@]}" -l 127.0.0.1 \
		-p @PORT@ -U 0 -m 512
fi
if command -v beanstalkd >/dev/null; then
	start beanstalkd beanstalk 1 beanstalkd -l 127.0.0.1 -p @PORT@
	start beanstalkd-wal beanstalk 1 beanstalkd -l 127.0.0.1 -p @PORT@ \
		-b "$TMP/bs-wal" -f0
fi
[ ${#TARGETS[@]} -gt 0 ] || { echo "no server started" >&2; exit 1; }

# ------------------------------------------------------------- versions
{
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(awk '/MemTotal/ {printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo)"
	echo "kernel: $(uname -sr)"
	echo "sakerd: $("$SAKERD" --version 2>&1 | head -1)"
	command -v redis-server >/dev/null && echo "redis: $(redis-server --version)"
	command -v memcached >/dev/null && echo "memcached: $(memcached -V)"
	command -v beanstalkd >/dev/null && echo "beanstalkd: $(beanstalkd -v 2>&1 | head -1)"
	echo "libevent: $(pkg-config --modversion libevent 2>/dev/null || echo '?')"
	echo "run: compare.sh $([ "$QUICK" = 1 ] && echo --quick) (seconds per run $SECS, $REPS alternating rounds)"
} > "$OUT/versions.txt"
cat "$OUT/versions.txt" >&2

# ------------------------------------------------------------ one run
jf() { sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p" <<<"$2"; }

# run WORKLOAD TARGET REP CONNS DEPTH MODE [bench options...]
run() {
	local wl=$1 t=$2 rep=$3 conns=$4 depth=$5 mode=$6; shift 6
	local extra=()
	[ "${T_VERIFY[$t]}" = 0 ] && extra+=(--no-verify)
	local line rc
	line=$(timeout 300 "$SAKER" bench "$mode" -s "127.0.0.1:${T_PORT[$t]}" \
		--protocol "${T_PROTO[$t]}" -c "$conns" -d "$depth" \
		--queue-prefix "cmp$wl" --json --quiet \
		--server-pid "${T_PID[$t]}" "${extra[@]}" "$@" 2>"$TMP/err")
	rc=$?
	if [ -z "$line" ]; then
		echo "  $wl $t c=$conns d=$depth: FAILED rc=$rc: $(head -1 "$TMP/err")" >&2
		return
	fi
	echo "{\"workload\":\"$wl\",\"target\":\"$t\",\"rep\":$rep,${line#\{}" >> "$RAW"
	local pre=lat
	case $mode in blocking) pre=e2e ;; delayed) pre=late ;; esac
	local items ops req lost dups cpu
	items=$(jf items_per_s "$line"); ops=$(jf ops_per_s "$line")
	req=$(jf requests_per_s "$line"); lost=$(jf lost "$line")
	dups=$(jf duplicates "$line"); cpu=$(jf server_cpu_pct "$line")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
		"$wl" "$t" "$conns" "$depth" "$rep" "$items" "$ops" "${req:--}" \
		"$(jf ${pre}_p50_us "$line")" "$(jf ${pre}_p90_us "$line")" \
		"$(jf ${pre}_p99_us "$line")" "$(jf ${pre}_p999_us "$line")" \
		"$(jf ${pre}_max_us "$line")" "${lost:--}" "${dups:--}" \
		"${cpu:--}" >> "$TSV"
	printf '  %-10s %-15s c=%-4s d=%-3s rep %s: %10s items/s p99 %s us%s\n' \
		"$wl" "$t" "$conns" "$depth" "$rep" "$items" \
		"$(jf ${pre}_p99_us "$line")" \
		"$([ "${lost:-0}${dups:-0}" != 00 ] && echo "  LOST $lost DUP $dups")" >&2
}

# alternate WORKLOAD "targets" CONNS DEPTH MODE [options]: A B A B ...
alternate() {
	local wl=$1 tl=$2 conns=$3 depth=$4; shift 4
	local rep t
	for rep in $(seq $REPS); do
		for t in $tl; do
			have "$t" && run "$wl" "$t" "$rep" "$conns" "$depth" "$@"
		done
	done
}

# What --report-only needs to rebuild the report later.
declare -p SECS CONNS_LIST DUR_CONNS IDLE_SECS MGET_ITEMS_1 MGET_ITEMS_K \
	DELAY_WIN DELAY_ITEMS REPS > "$OUT/params.sh"
echo "workloads:" >&2
for d in 1 16; do
	for c in $CONNS_LIST; do
		alternate pair "$MEM" "$c" "$d" pair -t "$SECS"
	done
done
for c in $DUR_CONNS; do
	alternate durable "$DUR" "$c" 1 produce -t "$SECS"
done
alternate mget1 "$SLOW" 4 4 mget -k 1 --items "$MGET_ITEMS_1"
alternate mget100 "$SLOW" 4 4 mget -k 100 --items "$MGET_ITEMS_K"
alternate delayed "$SLOW" 4 1 delayed \
	--items "$DELAY_ITEMS" --window "$DELAY_WIN" --timeout 1000
alternate blocking "saker-memory redis beanstalkd" 100 1 blocking \
	-t "$SECS" --rate 1000
alternate idle "saker-memory redis beanstalkd" 1000 1 blocking \
	-t "$IDLE_SECS" --rate 0 --timeout 60000 --warmup 1

else
	# Targets and workload parameters as the earlier run recorded them.
	[ -f "$TSV" ] && [ -f "$OUT/params.sh" ] || { echo "compare.sh: no earlier run in $OUT" >&2; exit 1; }
	. "$OUT/params.sh"
	TARGETS=($(awk -F'\t' 'NR > 1 { print $2 }' "$TSV" | sort -u))
	have() { [[ " ${TARGETS[*]} " == *" $1 "* ]]; }
fi

# ------------------------------------------------------------- report
# Mean over the alternating rounds, per workload/target/conns/depth.
AGG=$OUT/summary.tsv
awk -F'\t' 'NR > 1 {
	k = $1 "\t" $2 "\t" $3 "\t" $4
	if (!(k in n)) order[++m] = k
	n[k]++
	for (i = 6; i <= 16; i++) if ($i != "-" && $i != "") s[k, i] += $i
	if ($14 != "-") l[k] += $14
	if ($15 != "-") dd[k] += $15
} END {
	for (j = 1; j <= m; j++) {
		k = order[j]; printf "%s", k
		for (i = 6; i <= 16; i++) printf "\t%.1f", s[k, i] / n[k]
		printf "\n"
	}
}' "$TSV" > "$AGG"
# summary.tsv: wl target conns depth items ops req p50 p90 p99 p999 max lost dups cpu

val() { # val WL TARGET CONNS DEPTH COLUMN(5=items 6=ops 7=req 10=p99 ...)
	awk -F'\t' -v w="$1" -v t="$2" -v c="$3" -v d="$4" -v col="$5" \
		'$1 == w && $2 == t && $3 == c && $4 == d { print $col }' "$AGG"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
# Server CPU microseconds per request: cpu% * 10^4 / (requests/s).
cpureq() { awk -v p="$(val "$1" "$2" 4 4 15)" -v r="$(val "$1" "$2" 4 4 7)" 'BEGIN { if (p == "" || r + 0 == 0) print "-"; else printf "%.1f", p * 10000 / r }'; }
num() { [ -n "$1" ] && printf "%.0f" "$1" || printf -- "-"; }

MD=$OUT/results.md
{
	echo "# saker bench comparison"
	echo
	echo '```'
	cat "$OUT/versions.txt"
	echo '```'
	echo
	echo "Numbers are means of $REPS alternating rounds (A B A B). Latencies in µs."
	echo
	for d in 1 16; do
		echo "## pair (set+get), depth $d: items/s (gets that returned an item)"
		echo
		printf '| conns |'; for t in $MEM; do have "$t" && printf ' %s |' "$t"; done
		printf ' saker/redis |\n|---|'; for t in $MEM; do have "$t" && printf -- '---|'; done; echo '---|'
		for c in $CONNS_LIST; do
			printf '| %s |' "$c"
			for t in $MEM; do have "$t" && printf ' %s |' "$(num "$(val pair "$t" "$c" "$d" 5)")"; done
			printf ' %s |\n' "$(ratio "$(val pair saker-memory "$c" "$d" 5)" "$(val pair redis "$c" "$d" 5)")"
		done
		echo
	done
	echo "## durable: acknowledged sets/s, depth 1 (saker --sync always, redis appendfsync always, beanstalkd -f0)"
	echo
	printf '| conns |'; for t in $DUR; do have "$t" && printf ' %s |' "$t"; done
	printf ' lmdb/redis | sqlite/redis |\n|---|'; for t in $DUR; do have "$t" && printf -- '---|'; done; echo '---|---|'
	for c in $DUR_CONNS; do
		printf '| %s |' "$c"
		for t in $DUR; do have "$t" && printf ' %s |' "$(num "$(val durable "$t" "$c" 1 5)")"; done
		printf ' %s | %s |\n' "$(ratio "$(val durable saker-lmdb "$c" 1 5)" "$(val durable redis-aof "$c" 1 5)")" \
			"$(ratio "$(val durable saker-sqlite "$c" 1 5)" "$(val durable redis-aof "$c" 1 5)")"
	done
	echo
	echo "## latency percentiles, pair, 16 conns, depth 1 (µs)"
	echo
	echo "| target | p50 | p90 | p99 | p99.9 | max |"
	echo "|---|---|---|---|---|---|"
	for t in $MEM; do
		have "$t" || continue
		printf '| %s | %s | %s | %s | %s | %s |\n' "$t" "$(val pair "$t" 16 1 8)" \
			"$(val pair "$t" 16 1 9)" "$(val pair "$t" 16 1 10)" \
			"$(val pair "$t" 16 1 11)" "$(val pair "$t" 16 1 12)"
	done
	echo
	echo "## multi-get (4 conns, depth 4)"
	echo
	echo "Cost = server CPU time per request (from /proc, 10 ms ticks); the target is a ratio <= 3."
	echo
	echo "| store | 1-key req/s | 100-key req/s | req/s ratio | server µs/req, 1 key | server µs/req, 100 keys | CPU cost ratio | 100-key items/s |"
	echo "|---|---|---|---|---|---|---|---|"
	for t in saker-memory saker-lmdb; do
		have "$t" || continue
		c1=$(cpureq mget1 "$t"); c100=$(cpureq mget100 "$t")
		printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$t" "$(num "$(val mget1 "$t" 4 4 7)")" \
			"$(num "$(val mget100 "$t" 4 4 7)")" \
			"$(ratio "$(val mget1 "$t" 4 4 7)" "$(val mget100 "$t" 4 4 7)")" \
			"$c1" "$c100" "$(ratio "$c100" "$c1")" \
			"$(num "$(val mget100 "$t" 4 4 5)")"
	done
	echo
	echo "## delayed items: promotion lateness ($DELAY_ITEMS items due over $DELAY_WIN ms; µs)"
	echo
	echo "| store | p50 | p90 | p99 | p99.9 | max |"
	echo "|---|---|---|---|---|---|"
	for t in saker-memory saker-lmdb; do
		have "$t" || continue
		printf '| %s | %s | %s | %s | %s | %s |\n' "$t" "$(val delayed "$t" 4 1 8)" \
			"$(val delayed "$t" 4 1 9)" "$(val delayed "$t" 4 1 10)" \
			"$(val delayed "$t" 4 1 11)" "$(val delayed "$t" 4 1 12)"
	done
	echo
	echo "## blocking: 100 consumers, producer at 1000 items/s; delivery latency, set sent to item received (µs)"
	echo
	echo "| target | items/s | p50 | p90 | p99 | p99.9 | max | server CPU % |"
	echo "|---|---|---|---|---|---|---|---|"
	for t in saker-memory redis beanstalkd; do
		have "$t" || continue
		printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$t" "$(num "$(val blocking "$t" 100 1 5)")" \
			"$(val blocking "$t" 100 1 8)" "$(val blocking "$t" 100 1 9)" \
			"$(val blocking "$t" 100 1 10)" "$(val blocking "$t" 100 1 11)" \
			"$(val blocking "$t" 100 1 12)" "$(val blocking "$t" 100 1 15)"
	done
	echo
	echo "## idle: 1000 clients blocked ($IDLE_SECS s, 60 s timeout): server CPU (% of one core)"
	echo
	echo "| target | server CPU % |"
	echo "|---|---|"
	for t in saker-memory redis beanstalkd; do
		have "$t" && printf '| %s | %s |\n' "$t" "$(val idle "$t" 1000 1 15)"
	done
	echo
	echo "## verification"
	echo
	awk -F'\t' 'NR > 1 && (($14 != "-" && $14 > 0) || ($15 != "-" && $15 > 0)) { bad++; print "- " $1 " " $2 " c=" $3 " d=" $4 " rep " $5 ": lost " $14 ", duplicates " $15 } END { if (!bad) print "Every verified run: 0 lost, 0 duplicated (memcached runs are not verified: it is no queue)." }' "$TSV"
} > "$MD"

# ---------------------------------------------------------------- plots
if command -v gnuplot >/dev/null; then
	for d in 1 16; do
		f=$OUT/pair_d$d.dat
		{ printf 'conns'; for t in $MEM; do have "$t" && printf ' %s' "$t"; done; echo
		  for c in $CONNS_LIST; do
			printf '%s' "$c"
			for t in $MEM; do have "$t" && printf ' %s' "$(val pair "$t" "$c" "$d" 5 | sed 's/^$/NaN/')"; done
			echo
		  done; } > "$f"
		gnuplot -e "datafile='$f'; outfile='$OUT/throughput_d$d.png'; plottitle='pair (set+get), depth $d'; ylabel='items/s'" \
			"$HERE/throughput.gp" 2> >(grep -v 'Errors of slope' >&2)
	done
	f=$OUT/durable.dat
	{ printf 'conns'; for t in $DUR; do have "$t" && printf ' %s' "$t"; done; echo
	  for c in $DUR_CONNS; do
		printf '%s' "$c"
		for t in $DUR; do have "$t" && printf ' %s' "$(val durable "$t" "$c" 1 5 | sed 's/^$/NaN/')"; done
		echo
	  done; } > "$f"
	gnuplot -e "datafile='$f'; outfile='$OUT/durable.png'; plottitle='durable produce (fsync per ack), depth 1'; ylabel='acknowledged sets/s'" \
		"$HERE/throughput.gp" 2> >(grep -v 'Errors of slope' >&2)
	f=$OUT/latency.dat
	{ echo "target p50 p90 p99 p99.9"
	  for t in $MEM; do
		have "$t" || continue
		echo "$t $(val pair "$t" 16 1 8) $(val pair "$t" 16 1 9) $(val pair "$t" 16 1 10) $(val pair "$t" 16 1 11)"
	  done; } > "$f"
	gnuplot -e "datafile='$f'; outfile='$OUT/latency.png'; plottitle='pair, 16 conns, depth 1: latency percentiles'" \
		"$HERE/latency.gp"
else
	echo "gnuplot not installed: no plots" >&2
fi
echo "wrote $MD, $TSV, $RAW and plots in $OUT" >&2
