#!/bin/sh
# soak.sh -- issue 25's soak mix against one running server, all at once:
#   pair      set+get pairs, 8 connections at depth 4
#   blocking  100 consumers blocked in get q/t=1000, fed 1,000 items/s
#   delayed   delayed items falling due over the run, 4 consumers (100 a
#             second: 30,000 in the 5 minutes of the issue)
# every workload with verification on (lost 0, duplicated 0), and the
# server's RSS sampled once a second from /proc/PID/status.
#
#   SAKER=./saker contrib/bench/soak.sh -s 127.0.0.1:22133 --pid PID \
#       [-t SECONDS (300)] [--items N (100 a second)] [--protocol memcache|resp]
#       [--out DIR]
#
# With --protocol resp (Redis) the delayed workload is left out: Redis has
# no delayed items.  Writes DIR/{pair,blocking,delayed}.json (saker bench
# --json: percentiles, a coarse histogram, the samples over 10 ms with
# their wall-clock times), DIR/rss.tsv and DIR/summary.txt, and prints the
# summary.  Exit status 2 when a workload lost or duplicated items, 1 on
# any other failure.
set -u
SAKER=${SAKER:-saker}
server=127.0.0.1:22133
pid=
secs=300
proto=memcache
out=
items=

usage() {
	sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
	exit "$1"
}

while [ $# -gt 0 ]; do
	case $1 in
	-s|--server) server=$2; shift 2 ;;
	--pid) pid=$2; shift 2 ;;
	-t|--seconds) secs=$2; shift 2 ;;
	--protocol) proto=$2; shift 2 ;;
	--items) items=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h|--help) usage 0 ;;
	*) echo "soak.sh: unknown argument $1" >&2; usage 1 >&2 ;;
	esac
done
case $secs in ''|*[!0-9]*|0) echo "soak.sh: -t wants whole seconds > 0" >&2; exit 1 ;; esac
# the issue's rate: 30,000 over 5 minutes, 100 a second
[ -n "$items" ] || items=$((secs * 100))
command -v jq >/dev/null 2>&1 || { echo "soak.sh: needs jq" >&2; exit 1; }
if [ -z "$out" ]; then
	out=$(mktemp -d "${TMPDIR:-/tmp}/soak.XXXXXX") || exit 1
fi
mkdir -p "$out" || exit 1
pidarg=
[ -n "$pid" ] && pidarg="--server-pid $pid"

# RSS (kB) once a second while the workloads run
rss() {
	printf 't_s\tvmrss_kb\trssanon_kb\n'
	t=0
	while [ -r "/proc/$pid/status" ] && [ ! -e "$out/.done" ]; do
		awk -v t="$t" '/^VmRSS:/ { r = $2 } /^RssAnon:/ { a = $2 }
		    END { printf "%d\t%d\t%d\n", t, r, a }' "/proc/$pid/status"
		sleep 1
		t=$((t + 1))
	done
}
rm -f "$out/.done"
[ -n "$pid" ] && { rss > "$out/rss.tsv" & rsspid=$!; }

common="-s $server --protocol $proto --json --quiet $pidarg"
# shellcheck disable=SC2086
"$SAKER" bench pair $common -c 8 -d 4 -t "$secs" --queue-prefix soakpair \
    > "$out/pair.json" 2> "$out/pair.err" &
p1=$!
# shellcheck disable=SC2086
"$SAKER" bench blocking $common -c 100 --rate 1000 -t "$secs" \
    --queue-prefix soakblock > "$out/blocking.json" 2> "$out/blocking.err" &
p2=$!
p3=
if [ "$proto" = memcache ]; then
	# shellcheck disable=SC2086
	"$SAKER" bench delayed $common -c 4 --items "$items" \
	    --window $((secs * 1000)) --queue-prefix soakdelay \
	    > "$out/delayed.json" 2> "$out/delayed.err" &
	p3=$!
fi
status=0
for p in $p1 $p2 $p3; do
	wait "$p"
	rc=$?
	[ $rc -gt $status ] && status=$rc
done
touch "$out/.done"
[ -n "$pid" ] && wait "$rsspid"
rm -f "$out/.done"

{
	printf 'soak: %s s, server %s (%s), load average %s\n' "$secs" "$server" \
	    "$proto" "$(cut -d' ' -f1-3 /proc/loadavg)"
	printf '%-22s %9s %9s %9s %9s %9s  %s\n' workload p50_us p99_us p999_us \
	    max_us count "lost/dup"
	for w in pair:lat blocking:e2e delayed:late; do
		f=$out/${w%%:*}.json
		k=${w#*:}
		[ -s "$f" ] || continue
		jq -r --arg k "$k" --arg w "${w%%:*}" '
		    [$w + " (" + $k + ")", .[$k + "_p50_us"], .[$k + "_p99_us"],
		     .[$k + "_p999_us"], .[$k + "_max_us"], .[$k + "_count"],
		     ((.lost | tostring) + "/" + (.duplicates | tostring))]
		    | @tsv' "$f" | awk -F'\t' '{ printf "%-22s %9s %9s %9s %9s %9s  %s\n",
		    $1, $2, $3, $4, $5, $6, $7 }'
	done
	printf '\nhistogram (samples per latency bucket, upper edges in us):\n'
	for w in pair:lat blocking:e2e delayed:late; do
		f=$out/${w%%:*}.json
		k=${w#*:}
		[ -s "$f" ] || continue
		jq -r --arg k "$k" --arg w "${w%%:*}" '
		    . as $r | [range(0; ($r[$k + "_hist"] | length))] | map(
		      (if . < ($r[$k + "_hist_edges_us"] | length)
		       then "<" + ($r[$k + "_hist_edges_us"][.] | tostring)
		       else ">=" + ($r[$k + "_hist_edges_us"][-1] | tostring) end)
		      + ":" + ($r[$k + "_hist"][.] | tostring)) | $w + "  " + join(" ")' "$f"
	done
	printf '\nsamples >= 10 ms (wall clock, us):\n'
	for w in pair:lat blocking:e2e delayed:late; do
		f=$out/${w%%:*}.json
		k=${w#*:}
		[ -s "$f" ] || continue
		jq -r --arg k "$k" --arg w "${w%%:*}" '
		    .[$k + "_slow"][] | $w + "\t" + (.[0] / 1000 | floor | strftime("%H:%M:%S"))
		    + "." + ((1000 + .[0] % 1000) | tostring | .[1:]) + "Z\t"
		    + (.[1] | tostring)' "$f"
	done
	if [ -s "$out/rss.tsv" ]; then
		awk -F'\t' 'NR > 1 { if (NR == 2) f = $2; l = $2; if ($2 > m) m = $2 }
		    END { printf "\nserver RSS kB: first %d, last %d, max %d (%s/rss.tsv)\n",
		    f, l, m, dir }' dir="$out" "$out/rss.tsv"
	fi
	for w in pair blocking delayed; do
		[ -s "$out/$w.err" ] && { printf '%s stderr: ' "$w"; cat "$out/$w.err"; }
	done
	printf 'results in %s\n' "$out"
} | tee "$out/summary.txt"
for w in pair blocking delayed; do
	f=$out/$w.json
	[ -s "$f" ] || continue
	if [ "$(jq -r '.lost + .duplicates' "$f")" != 0 ]; then
		echo "soak.sh: $w lost or duplicated items" >&2
		status=2
	fi
done
exit $status
