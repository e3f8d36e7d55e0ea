#!/usr/bin/env bash
# check_failover.sh -- the short form of contrib/failover/failover.sh: two
# brokers over a PostgreSQL primary with a synchronous standby, under
# verified load, through two cycles of each fault: kill -9 of the primary
# and promotion of the standby, then a fast restart of the primary
# (tests/check_failover_partition.sh runs the partition).  Passes only
# when every cycle ran, both brokers' loads were verified, items were
# acknowledged, nothing acknowledged was lost, `version` never took longer
# than LIVE_MAX_MS (5000 here) after a fault, and both brokers exited 0 on
# SIGTERM.  About a minute and a half.
#
# Needs root (a network namespace; PostgreSQL then runs as nobody), ip
# (iproute2), setpriv and PostgreSQL's binaries: without them it skips
# (exit 77), except under CI=true, where a missing requirement is a hard
# error (exit 99, which XFAIL_TESTS does not excuse).  Not run under
# valgrind (tests/valgrind.sh): a script that times faults against load.
#
# Environment: SAKERD, SAKER, SAKER_SRCDIR (make check sets them);
# FAILOVER_FAULTS (default "kill restart"), FAILOVER_CYCLES (2),
# LIVE_MAX_MS (5000), FAILOVER_IDS (non-empty: the producers resend with
# deduplication ids, failover.sh --ids, and a duplicate fails a cycle);
# PG_OPTS and PG_CONNINFO go through to the script.
set -u
srcdir=${SAKER_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
script=$srcdir/contrib/failover/failover.sh
SAKERD=${SAKERD:-./sakerd}
SAKER=${SAKER:-./saker}
LIVE_MAX_MS=${LIVE_MAX_MS:-5000}
export SAKERD SAKER LIVE_MAX_MS
faults=${FAILOVER_FAULTS:-kill restart}
cycles=${FAILOVER_CYCLES:-2}
name=${FAILOVER_NAME:-check_failover}

[ -r "$script" ] || { echo "$name: FAIL: $script is missing"; exit 99; }

out=$(mktemp -d "${TMPDIR:-/tmp}/saker-check-failover.XXXXXX") || exit 99
trap 'rm -rf "$out"' EXIT

# bounded: a broker that stops answering costs RECOVER_MAX, then
# BENCH_STOP_MAX, then BROKER_STOP_MAX seconds, and no further cycles
SETTLE=${SETTLE:-3} RECOVER_MAX=${RECOVER_MAX:-20} \
    BENCH_STOP_MAX=${BENCH_STOP_MAX:-20} BROKER_STOP_MAX=${BROKER_STOP_MAX:-10} \
    bash "$script" -n "$cycles" --faults "$faults" --partition 5 --rate 150 \
    ${FAILOVER_IDS:+--ids} --out "$out/res" 2>&1
rc=$?

if [ "$rc" -eq 77 ]; then
	if [ "${CI:-}" = true ]; then
		echo "$name: FAIL: a requirement is missing and CI=true (see the SKIP line above)"
		exit 99
	fi
	exit 77
fi

fail() {
	echo "$name: FAIL: $*"
	[ -r "$out/res/cycles.txt" ] && cat "$out/res/cycles.txt"
	for f in "$out"/res/broker?.log; do
		[ -r "$f" ] && { echo "--- $f (last lines)"; tail -n 15 "$f"; }
	done
	exit 1
}

[ "$rc" -eq 0 ] || fail "failover.sh exited $rc"
sum=$out/res/summary.txt
[ -r "$sum" ] || fail "no summary"
grep -q '^RESULT: ok$' "$sum" || fail "the summary does not say ok"
# the script's verdict, checked again from its figures: every fault ran
# its cycles, acknowledged items and lost none
for f in $faults; do
	grep -q "^fault $f: $cycles cycles, 0 not ok$" "$sum" ||
	    fail "fault $f did not run $cycles clean cycles"
	line=$(grep -A1 "^fault $f:" "$sum" | tail -n 1)
	acked=$(sed -n 's/.*acknowledged \([0-9]*\),.*/\1/p' <<<"$line")
	lost=$(sed -n 's/.*lost \([0-9]*\),.*/\1/p' <<<"$line")
	[ -n "$acked" ] && [ "$acked" -gt 0 ] || fail "fault $f: nothing acknowledged ($line)"
	[ "$lost" = 0 ] || fail "fault $f: lost ${lost:-?} acknowledged items ($line)"
	n=$(awk -v f="$f" '$1 == f && $3 > 0 && $4 == 0 && $12 ~ /^ok;?$/' "$out/res/cycles.txt" | wc -l)
	[ "$n" -eq "$cycles" ] || fail "fault $f: $n of $cycles cycles verified with nothing lost"
done
grep -q '^broker A exited 0, broker B exited 0' "$sum" || fail "the brokers did not stop cleanly"
echo "$name: ok"
exit 0
