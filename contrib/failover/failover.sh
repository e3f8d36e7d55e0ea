#!/usr/bin/env bash
# failover.sh -- lose the database under load and count what the clients
# lost.  Two sakerd brokers share a PostgreSQL primary with a synchronous
# streaming standby (contrib/failover/cluster.sh); each broker carries a
# `saker bench blocking` run with verification on (one producer at a fixed
# rate, consumers in get q/t=) and a probe that sends version, set and get
# every 50 ms.  Each fault is injected N times at a random moment under
# load:
#
#   kill       kill -9 of the primary (postmaster and backends), pg_ctl
#              promote of the standby, the old primary rebuilt with
#              pg_basebackup as the new synchronous standby
#   restart    pg_ctl restart -m fast of the primary
#   partition  broker A's packets to and from the database dropped for
#              --partition seconds (a network namespace; broker B is not
#              cut off and must not notice)
#
# Usage (as root, from the build directory or with SAKERD/SAKER set):
#   contrib/failover/failover.sh [-n CYCLES] [--faults "kill restart partition"]
#       [--partition SECS] [--ids] [--out DIR] [--keep]
#
#   -n, --cycles N     cycles of each fault (default 20)
#   --faults LIST      which faults, in this order (default: all three)
#   --partition SECS   how long a partition lasts (default 30)
#   --rate R           items/s each broker's producer sends (default 200)
#   --ids              exactly-once producers: every set carries a
#                      deduplication id and is sent again, same item, same
#                      id, until STORED (saker bench --ids --resend); a
#                      cycle is then ok only with nothing lost, nothing
#                      delivered twice and nothing left unacknowledged
#   --strict           keep synchronous_standby_names on the promoted
#                      primary: writes wait until the rebuilt standby is
#                      back (nothing acknowledged then rests on one node)
#   --out DIR          keep the logs and results in DIR (default: a
#                      temporary directory, removed unless --keep)
#   --keep             keep the work directory (cluster, logs)
#
# Environment: SAKERD, SAKER (default ./sakerd, ./saker), PG_BINDIR (the
# newest /usr/lib/postgresql/N/bin), PG_OPTS (driver options, e.g.
# "lease=10,timeout=2": the store is postgres,PG_OPTS:CONNINFO),
# PG_CONNINFO (more libpq keywords, e.g. "keepalives_idle=5"), LIVE_MAX_MS
# (fail when a broker's `version` takes longer than this after a fault;
# unset: report only), SETTLE (seconds of load after recovery, default 5),
# RECOVER_MAX (seconds to wait for STORED again, default 150),
# BENCH_STOP_MAX (seconds a bench may take to drain and report once told
# to stop, default 100), BROKER_STOP_MAX (seconds for a broker to exit
# after SIGTERM, default 30).
#
# Prints a line per cycle and a table per fault: items acknowledged, lost
# (must be 0), delivered twice (with --ids: must be 0), delivered without
# an acknowledgement (sets whose outcome the client was not told; with
# --ids, the sets sent again and those never acknowledged), the window from the fault to the
# first STORED on each broker, the longest `version` round trip after the
# fault (a frozen event loop shows here), and each broker's RSS and open
# fds before and after.  Exit status: 0 all verified with nothing lost;
# 1 a loss, a run that could not be verified (a broker that never answered
# again), fds that grew, or a broken setup; 77 a requirement is missing
# (root, ip netns, PostgreSQL's binaries).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=cluster.sh
. "$here/cluster.sh"

SAKERD=${SAKERD:-./sakerd}
SAKER=${SAKER:-./saker}
PG_OPTS=${PG_OPTS:-}
PG_CONNINFO=${PG_CONNINFO:-}
SETTLE=${SETTLE:-5}
RECOVER_MAX=${RECOVER_MAX:-150}
BENCH_STOP_MAX=${BENCH_STOP_MAX:-100}
BROKER_STOP_MAX=${BROKER_STOP_MAX:-30}
LIVE_MAX_MS=${LIVE_MAX_MS:-}
cycles=20
faults="kill restart partition"
part_secs=30
rate=200
strict=0
ids=0
out=
keep=0

usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
	exit "$1"
}

while [ $# -gt 0 ]; do
	case $1 in
	-n|--cycles) cycles=$2; shift 2 ;;
	--faults) faults=$2; shift 2 ;;
	--partition) part_secs=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--strict) strict=1; shift ;;
	--ids) ids=1; shift ;;
	--out) out=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	-h|--help) usage 0 ;;
	*) echo "failover.sh: unknown argument $1" >&2; usage 1 >&2 ;;
	esac
done
for v in "$cycles" "$part_secs" "$rate" "$SETTLE" "$RECOVER_MAX" "$BENCH_STOP_MAX" "$BROKER_STOP_MAX"; do
	case $v in ''|*[!0-9]*|0) echo "failover.sh: counts and seconds are whole numbers > 0: $v" >&2; exit 1 ;; esac
done
for f in $faults; do
	case $f in kill|restart|partition) ;; *) echo "failover.sh: unknown fault $f" >&2; exit 1 ;; esac
done

say() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
skip() { echo "failover.sh: SKIP: $*" >&2; exit 77; }
die() { say "FAILED: $*"; exit 1; }

# ----------------------------------------------------------------- needs
[ "$(id -u)" -eq 0 ] || skip "needs root (a network namespace for the partition; PostgreSQL then runs as nobody)"
command -v ip >/dev/null 2>&1 || skip "needs ip (iproute2) for the network namespace"
command -v setpriv >/dev/null 2>&1 || skip "needs setpriv (util-linux)"
id nobody >/dev/null 2>&1 || skip "needs the user nobody"
pgc_find_bindir || skip "PostgreSQL binaries not found (Debian: postgresql; or set PG_BINDIR)"
[ -x "$SAKERD" ] && [ -x "$SAKER" ] || skip "no $SAKERD or $SAKER (run from the build directory or set SAKERD and SAKER)"
"$SAKERD" --help 2>&1 | grep -q 'postgres' || skip "$SAKERD was built without the postgres store"
SAKERD=$(cd "$(dirname "$SAKERD")" && pwd)/$(basename "$SAKERD")
SAKER=$(cd "$(dirname "$SAKER")" && pwd)/$(basename "$SAKER")

# ------------------------------------------------------------- clean-up
W=$(mktemp -d "${TMPDIR:-/tmp}/saker-failover.XXXXXX") || exit 1
chmod 0755 "$W"		# PostgreSQL, as nobody, works in $W/pg
[ -n "$out" ] || out=$W/out
mkdir -p "$out" || exit 1
declare -A PID=()	# name -> pid of what this script started

cleanup() {
	local n
	trap - EXIT INT TERM
	touch "$W/stop" 2>/dev/null
	for n in "${!PID[@]}"; do
		kill -TERM "${PID[$n]}" 2>/dev/null
	done
	sleep 0.3
	for n in "${!PID[@]}"; do
		kill -KILL "${PID[$n]}" 2>/dev/null
	done
	pgc_destroy
	ns_destroy
	if [ "$keep" -eq 1 ]; then
		say "kept $W"
	else
		rm -rf "$W"
	fi
}
trap cleanup EXIT
trap 'say "interrupted"; exit 1' INT TERM

free_port() {
	local p
	while :; do
		p=$(( 20000 + RANDOM % 40000 ))
		[ -z "$(ss -Htan "sport = :$p" 2>/dev/null)" ] && { echo "$p"; return; }
	done
}

now_us() { echo "${EPOCHREALTIME/./}"; }

# ------------------------------------------------------------- the stage
ns_init || skip "cannot make a network namespace with veth pairs here (ip netns add)"
PGC_PORT=("$(free_port)" "$(free_port)")
while [ "${PGC_PORT[1]}" = "${PGC_PORT[0]}" ]; do PGC_PORT[1]=$(free_port); done
say "cluster: primary :${PGC_PORT[0]}, standby :${PGC_PORT[1]}; namespace $NS_NAME"
pgc_init "$W/pg" "$NS_DB_IP" || { cat "$W/pg/setup.log" >&2 2>/dev/null; die "the cluster did not start"; }

conninfo() {	# HOST
	echo "host=$1,$1 port=${PGC_PORT[0]},${PGC_PORT[1]} dbname=postgres user=saker target_session_attrs=read-write${PG_CONNINFO:+ $PG_CONNINFO}"
}
store() { echo "postgres${PG_OPTS:+,$PG_OPTS}:$(conninfo "$1")"; }

# broker A lives in the namespace (its clients reach it on NS_CLIENT_IP,
# the database on NS_DB_IP); broker B on loopback
declare -A HOST PORT HTTP
HOST[A]=$NS_CLIENT_IP; PORT[A]=$(free_port); HTTP[A]=$(free_port)
HOST[B]=127.0.0.1; PORT[B]=$(free_port); HTTP[B]=$(free_port)
say "store (broker B): $(store 127.0.0.1)"
ip netns exec "$NS_NAME" "$SAKERD" -l "${HOST[A]}" -p "${PORT[A]}" \
    --http "${HOST[A]}:${HTTP[A]}" --store "$(store "$NS_DB_IP")" \
    --log "$out/brokerA.log" 2>>"$out/brokerA.log" &
PID[brokerA]=$!
"$SAKERD" -l 127.0.0.1 -p "${PORT[B]}" --http "127.0.0.1:${HTTP[B]}" \
    --store "$(store 127.0.0.1)" --log "$out/brokerB.log" 2>>"$out/brokerB.log" &
PID[brokerB]=$!

tcp_ask() {	# HOST PORT REQUEST [SECS]: the reply, within SECS (5)
	timeout "${4:-5}" bash -c 'exec 3<>"/dev/tcp/$1/$2" || exit 1; printf "%b" "$3" >&3; cat <&3' \
	    _ "$1" "$2" "$3" 2>/dev/null
}
http_get() {	# BROKER PATH [SECS]
	tcp_ask "${HOST[$1]}" "${HTTP[$1]}" "GET $2 HTTP/1.0\r\nHost: ${HOST[$1]}:${HTTP[$1]}\r\n\r\n" "${3:-5}" | tr -d '\r'
}

for b in A B; do
	ok=0
	for _ in $(seq 100); do
		kill -0 "${PID[broker$b]}" 2>/dev/null || break
		case $(tcp_ask "${HOST[$b]}" "${PORT[$b]}" 'version\r\nquit\r\n') in
		VERSION*) ok=1; break ;;
		esac
		sleep 0.1
	done
	[ "$ok" -eq 1 ] || { tail -n 20 "$out/broker$b.log" >&2; die "broker $b did not start"; }
done
say "brokers: A ${HOST[A]}:${PORT[A]} (pid ${PID[brokerA]}), B ${HOST[B]}:${PORT[B]} (pid ${PID[brokerB]})"

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
nfds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
# the broker's own counters that mention the database, as one line
db_metrics() {
	http_get "$1" /metrics | grep -Ei '^saker_[a-z_]*(connected|reconnect|doubt)[a-z_]*(\{[^}]*\})? ' |
	    tr '\n' ' '
}
healthz() {	# BROKER: the status line's code, or "no answer" (1 s)
	local r
	r=$(http_get "$1" /healthz 1 | head -n 1)
	r=${r#HTTP/1.? }
	echo "${r:-no answer in 1 s}"
}

# ---------------------------------------------------------------- probes
# One probe per broker: version, set and get on its own queue every 50 ms,
# each reply (or a 1 s timeout) a line "SENT_US RECV_US KIND REPLY"; after
# a timeout the connection is dropped (a late reply would desync it) and a
# new one made.
probe() {	# NAME HOST PORT LOG
	local name=$1 host=$2 port=$3 log=$4 fd='' zfd t0 line kind r
	[ -p "$W/zz.$name" ] || mkfifo "$W/zz.$name"
	exec {zfd}<>"$W/zz.$name"
	ask() {	# KIND REQUEST: one exchange; 1 when the connection is dropped
		kind=$1
		t0=$(now_us)
		if ! { printf '%b' "$2" >&"$fd"; } 2>/dev/null; then
			echo "$t0 - $kind WRITE_FAILED"
			exec {fd}>&-; fd=
			return 1
		fi
		r=
		while read -r -t 1 line <&"$fd"; do
			line=${line%$'\r'}
			case $kind:$line in
			get:VALUE*) r=VALUE; continue ;;
			get:x) continue ;;
			get:END) r=${r:-END} ;;
			*) r=$line ;;
			esac
			break
		done
		if [ -z "$r" ]; then
			echo "$t0 - $kind TIMEOUT"
			exec {fd}>&-; fd=
			return 1
		fi
		echo "$t0 $(now_us) $kind $r"
	}
	while [ ! -e "$W/stop" ] && [ ! -e "$W/stop.$name" ]; do
		if [ -z "$fd" ]; then
			exec {fd}<>"/dev/tcp/$host/$port" 2>/dev/null || {
				echo "$(now_us) - connect REFUSED"; fd=
				read -r -t 0.2 -u "$zfd"
				continue
			}
		fi
		ask version 'version\r\n' &&
		ask set "set probe$name 0 0 1\r\nx\r\n" &&
		ask get "get probe$name\r\n"
		read -r -t 0.05 -u "$zfd"
	done >>"$log"
}

start_probe() {	# NAME
	rm -f "$W/stop.$1"
	probe "$1" "${HOST[$1]}" "${PORT[$1]}" "$2" &
	PID[probe$1]=$!
}
stop_probe() {
	touch "$W/stop.$1"
	for _ in $(seq 30); do
		kill -0 "${PID[probe$1]}" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "${PID[probe$1]}" 2>/dev/null
	wait "${PID[probe$1]}" 2>/dev/null
	unset "PID[probe$1]"
}

# From a probe log and the fault's time: "WINDOW_MS LIVE_MAX_MS FAILED"
# WINDOW: from the fault to the first STORED after the outage began (the
# first set not STORED, or any request not answered within 1 s); 0: no
# outage.  LIVE_MAX: the slowest version, where a request left unanswered
# counts as the time until the broker's next reply of any kind (-1: none).
probe_stats() {	# LOG T0_US
	awk -v t0="$2" '
	$1 < t0 { next }
	{ sent = $1; recv = $2; kind = $3; r = $4 }
	recv == "-" { if (!waiting) { waiting = 1; wstart = sent }
	              down = 1; fails++; next }
	waiting { gap = recv - wstart; if (gap > live) live = gap; waiting = 0 }
	kind == "version" { d = recv - sent; if (d > live) live = d }
	kind == "set" && r != "STORED" { down = 1; fails++ }
	kind == "set" && r == "STORED" && down && !back { back = recv }
	END {
		if (waiting) live = -1000
		w = !down ? 0 : back ? (back - t0) / 1000 : -1
		printf "%d %d %d\n", w, live / 1000, fails
	}' "$1"
}

# Wait until every probe log has a STORED after the outage began (or no
# outage at all and a STORED after the fault); bounded by RECOVER_MAX.
wait_recovered() {	# T0_US LOGS...
	local t0=$1 end=$((SECONDS + RECOVER_MAX)) log w all
	shift
	while [ "$SECONDS" -lt "$end" ]; do
		all=1
		for log in "$@"; do
			w=$(probe_stats "$log" "$t0" | cut -d' ' -f1)
			if [ "$w" -lt 0 ] || ! awk -v t0="$t0" '$1 >= t0 && $4 == "STORED" { f = 1 } END { exit !f }' "$log"; then
				all=0
			fi
		done
		[ "$all" -eq 1 ] && return 0
		sleep 0.5
	done
	return 1
}

# ---------------------------------------------------------------- benches
start_bench() {	# NAME TAG
	local b=$1
	local idopts=()
	[ "$ids" -eq 1 ] && idopts=(--ids --resend)
	"$SAKER" bench blocking -s "${HOST[$b]}:${PORT[$b]}" -c 2 -q 2 -d 4 \
	    --rate "$rate" --timeout 500 -t 3600 --queue-prefix "fo$b${2}_" \
	    "${idopts[@]}" --json --quiet >"$W/bench$b.json" 2>"$W/bench$b.err" &
	PID[bench$b]=$!
}
# SIGINT ends the measured phase; a bench then collects what is left (its
# drain gives up after 60 s) and reports.  Bounded: BENCH_STOP_MAX, then
# KILL.
stop_benches() {
	local b alive
	for b in A B; do kill -INT "${PID[bench$b]}" 2>/dev/null; done
	for _ in $(seq $((BENCH_STOP_MAX * 10))); do
		alive=0
		for b in A B; do kill -0 "${PID[bench$b]}" 2>/dev/null && alive=1; done
		[ "$alive" -eq 0 ] && break
		sleep 0.1
	done
	for b in A B; do
		if kill -0 "${PID[bench$b]}" 2>/dev/null; then
			kill -KILL "${PID[bench$b]}" 2>/dev/null
			echo "broker $b: the bench did not finish within $BENCH_STOP_MAX s of its stop (no answers): KILLED" >>"$W/bench$b.err"
		fi
		wait "${PID[bench$b]}" 2>/dev/null
		unset "PID[bench$b]"
	done
}
jget() {	# FILE KEY: a number from the bench's JSON
	sed -n "s/.*\"$2\":\\([0-9.]*\\).*/\\1/p" "$1" | head -n 1
}
jtrue() { grep -q "\"$2\":true" "$1" 2>/dev/null; }
# The bench's lost items, as "connection/sequence STORED at HH:MM:SS.mmm"
# (UTC) to look up in the broker's log.
lost_items() {
	local l c q acked out=
	l=$(grep -o '"lost_items":\[[^"]*' "$1" 2>/dev/null | sed 's/^"lost_items":\[//; s/\],*$//')
	while IFS=, read -r c q _ acked; do
		[ -n "$q" ] || continue
		out="$out ${c#[}/$q"
		case ${acked%]} in
		''|null) ;;
		*) acked=${acked%]}
		   out="$out STORED at $(TZ=UTC printf '%(%H:%M:%S)T' $((acked / 1000))).$(printf '%03d' $((acked % 1000)))" ;;
		esac
	done < <(sed 's/\],\[/\n/g' <<<"$l")
	echo "${out# }"
}

# ---------------------------------------------------------------- faults
fault_kill() {
	local p=$PGC_PRIMARY s=$PGC_STANDBY t
	pgc_kill "$p" || return 1
	# a failover manager takes the standby out of sync mode as it promotes
	# (Patroni without synchronous_mode_strict): with no standby left,
	# '*' would hold every commit until the rebuilt one is back
	[ "$strict" -eq 1 ] || { pgc_sync_file "$s" off; pgc_reload "$s"; }
	pgc_promote "$s" || return 1
	PROMOTED_US=$(now_us)
	t=$(now_us)
	pgc_rebuild "$p" on || return 1
	[ "$strict" -eq 1 ] || { pgc_sync_file "$PGC_PRIMARY" on; pgc_reload "$PGC_PRIMARY"; }
	pgc_wait_sync 60 || return 1
	REBUILT_MS=$(( ($(now_us) - t) / 1000 ))
}
fault_restart() {
	pgc_restart "$PGC_PRIMARY" || return 1
	PROMOTED_US=$(now_us)
	pgc_wait_sync 60
}
fault_partition() {
	local t
	ns_cut || return 1
	t=$(now_us)
	sleep "$((part_secs / 2))"
	HEALTHZ=$(healthz A)
	sleep "$(( part_secs - ($(now_us) - t) / 1000000 ))" 2>/dev/null
	ns_heal || return 1
	PROMOTED_US=$(now_us)	# here: when the partition ended
}

# -------------------------------------------------------------- one cycle
declare -A SUM
status=0
BROKEN=0
printf '%-9s %3s %7s %5s %5s %6s %8s %8s %8s %8s %6s\n' fault n acked lost dups unack winA_ms winB_ms liveA_ms liveB_ms end_ms \
    >"$out/cycles.txt"

run_cycle() {	# FAULT N
	local f=$1 n=$2 b t0 wait_ms st a l d u v e res bad r=0 p=0
	rm -f "$W"/bench?.json "$W"/bench?.err
	for b in A B; do
		: >"$W/probe$b.log"
		start_bench "$b" "$n"
		start_probe "$b" "$W/probe$b.log"
	done
	# a random moment 2 to 6 s into the load
	wait_ms=$(( 2000 + RANDOM % 4000 ))
	sleep "$((wait_ms / 1000)).$(printf '%03d' $((wait_ms % 1000)))"
	t0=$(now_us)
	PROMOTED_US=0 REBUILT_MS=0 HEALTHZ=
	bad=0 res=
	if ! "fault_$f"; then
		say "$f $n: the fault's own steps failed (see $W/pg/setup.log); no more cycles"
		res="; the cluster's steps failed"
		bad=1 BROKEN=1
	fi
	if ! wait_recovered "$t0" "$W/probeA.log" "$W/probeB.log"; then
		say "$f $n: a broker had no STORED within $RECOVER_MAX s of the fault"
	fi
	sleep "$SETTLE"
	stop_benches
	for b in A B; do stop_probe "$b"; done
	cp "$W/probeA.log" "$out/probe-$f-$n-A.log"
	cp "$W/probeB.log" "$out/probe-$f-$n-B.log"
	a=0 l=0 d=0 u=0
	for b in A B; do
		cp "$W/bench$b.json" "$out/bench-$f-$n-$b.json" 2>/dev/null
		if ! jtrue "$W/bench$b.json" verified; then
			res="$res; UNVERIFIED($b: $(tail -n 1 "$W/bench$b.err" 2>/dev/null))"
			bad=1
			continue
		fi
		a=$((a + $(jget "$W/bench$b.json" in)))
		l=$((l + $(jget "$W/bench$b.json" lost)))
		d=$((d + $(jget "$W/bench$b.json" duplicates)))
		u=$((u + $(jget "$W/bench$b.json" unacked_seen)))
		if [ "$ids" -eq 1 ]; then
			r=$((r + $(jget "$W/bench$b.json" resent)))
			p=$((p + $(jget "$W/bench$b.json" resend_pending)))
		fi
	done
	# --ids: a producer that resends with the same id must see each item
	# exactly once, and every set acknowledged in the end
	if [ "$ids" -eq 1 ]; then
		[ "$d" -eq 0 ] || { res="$res; DUPLICATED $d"; bad=1; }
		[ "$u" -eq 0 ] || { res="$res; $u delivered unacknowledged"; bad=1; }
		[ "$p" -eq 0 ] || { res="$res; $p never acknowledged"; bad=1; }
	fi
	if [ "$l" -gt 0 ]; then
		res="$res; LOST $l"
		bad=1
		for b in A B; do
			v=$(lost_items "$W/bench$b.json")
			[ -z "$v" ] || res="$res ($b: $v)"
		done
	fi
	# a cycle in which nothing got through proves nothing
	[ "$a" -gt 0 ] || { res="$res; nothing acknowledged"; bad=1; }
	read -r wa va _ <<<"$(probe_stats "$W/probeA.log" "$t0")"
	read -r wb vb _ <<<"$(probe_stats "$W/probeB.log" "$t0")"
	if [ "$wa" -lt 0 ] || [ "$wb" -lt 0 ]; then
		# a broker stuck for good: more cycles would only wait on it
		res="$res; no STORED within ${RECOVER_MAX} s: no more cycles"
		bad=1 BROKEN=1
	fi
	e=0
	[ "$PROMOTED_US" -gt 0 ] && e=$(( (PROMOTED_US - t0) / 1000 ))
	for v in "$va" "$vb"; do
		if [ -n "$LIVE_MAX_MS" ] && { [ "$v" -lt 0 ] || [ "$v" -gt "$LIVE_MAX_MS" ]; }; then
			res="$res; version took ${v} ms > LIVE_MAX_MS"
			bad=1
		fi
	done
	[ "$bad" -eq 1 ] || res="ok$res"
	res=${res#; }
	[ "$ids" -eq 1 ] && res="$res; resent $r"
	[ -z "$HEALTHZ" ] || res="$res; A's /healthz mid-partition: $HEALTHZ"
	printf '%-9s %3d %7d %5d %5d %6d %8d %8d %8d %8d %6d %s\n' "$f" "$n" "$a" "$l" "$d" "$u" \
	    "$wa" "$wb" "$va" "$vb" "$e" "$res" | tee -a "$out/cycles.txt" >&2
	SUM[$f.acked]=$(( ${SUM[$f.acked]:-0} + a ))
	SUM[$f.lost]=$(( ${SUM[$f.lost]:-0} + l ))
	SUM[$f.dups]=$(( ${SUM[$f.dups]:-0} + d ))
	SUM[$f.unack]=$(( ${SUM[$f.unack]:-0} + u ))
	SUM[$f.resent]=$(( ${SUM[$f.resent]:-0} + r ))
	SUM[$f.pending]=$(( ${SUM[$f.pending]:-0} + p ))
	SUM[$f.cycles]=$(( ${SUM[$f.cycles]:-0} + 1 ))
	[ "$bad" -eq 0 ] || { SUM[$f.bad]=$(( ${SUM[$f.bad]:-0} + 1 )); status=1; }
	for st in wa wb va vb e; do
		v=${!st}
		SUM[$f.$st.list]="${SUM[$f.$st.list]:-} $v"
	done
	[ "$REBUILT_MS" -gt 0 ] && SUM[$f.rebuild.list]="${SUM[$f.rebuild.list]:-} $REBUILT_MS"
	return 0
}

# "min / median / max" of a list of numbers (-1: never)
spread() {
	tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -n | awk '
	{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
	  printf "%s / %s / %s", v[1], v[int((NR + 1) / 2)], v[NR] }'
}

snapshot() {	# LABEL: RSS and fds of both brokers
	local b
	for b in A B; do
		kill -0 "${PID[broker$b]}" 2>/dev/null || { say "broker $b is gone"; status=1; continue; }
		SNAP[$1.$b.rss]=$(rss_kb "${PID[broker$b]}")
		SNAP[$1.$b.fds]=$(nfds "${PID[broker$b]}")
		# its sockets and their states, to tell what an fd that stayed is
		if [ "$b" = A ]; then
			ip netns exec "$NS_NAME" ss -tanp 2>/dev/null
		else
			ss -tanp 2>/dev/null
		fi | grep "pid=${PID[broker$b]}," >"$out/sockets-$1-$b.txt"
	done
}
declare -A SNAP

# a clean run first: it warms the brokers up (their RSS settles) and shows
# the stage works before anything is broken
say "warm-up: 4 s of load, no fault"
for b in A B; do start_bench "$b" w; done
sleep 4
stop_benches
for b in A B; do
	jtrue "$W/bench$b.json" verified && [ "$(jget "$W/bench$b.json" lost)" = 0 ] &&
	    [ "$(jget "$W/bench$b.json" in)" -gt 0 ] ||
	    { cat "$W/bench$b.json" "$W/bench$b.err" >&2; die "the warm-up run on broker $b did not verify"; }
done
say "warm-up verified: A $(jget "$W/benchA.json" in) items, B $(jget "$W/benchB.json" in) items"

for f in $faults; do
	[ "$BROKEN" -eq 0 ] || break
	sleep 1
	snapshot "$f.before"
	say "fault $f: $cycles cycles (metrics A: $(db_metrics A))"
	for n in $(seq "$cycles"); do
		[ "$BROKEN" -eq 0 ] || break
		run_cycle "$f" "$n"
		for b in A B; do
			kill -0 "${PID[broker$b]}" 2>/dev/null || die "broker $b died (see $out/broker$b.log)"
		done
	done
	sleep 2	# let connections the probes gave up on close
	snapshot "$f.after"
	say "fault $f done (metrics A: $(db_metrics A))"
done

# The brokers stop as they would in production: SIGTERM, exit 0 (a
# sanitizer build also reports its leaks here).
declare -A EXIT
for b in A B; do
	kill -TERM "${PID[broker$b]}" 2>/dev/null
done
for b in A B; do
	for _ in $(seq $((BROKER_STOP_MAX * 10))); do
		kill -0 "${PID[broker$b]}" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "${PID[broker$b]}" 2>/dev/null; then
		kill -KILL "${PID[broker$b]}" 2>/dev/null
		EXIT[$b]="did not stop within $BROKER_STOP_MAX s of SIGTERM"
		wait "${PID[broker$b]}" 2>/dev/null
	else
		wait "${PID[broker$b]}"
		EXIT[$b]="exited $?"
	fi
	unset "PID[broker$b]"
	[ "${EXIT[$b]}" = "exited 0" ] || status=1
done

# ----------------------------------------------------------------- report
# fds must come back to where they were; RSS is reported (allocator and
# sanitizer caches make a fixed bound on it a guess)
fdnote=
for f in $faults; do
	for b in A B; do
		if [ -n "${SNAP[$f.after.$b.fds]:-}" ] && [ -n "${SNAP[$f.before.$b.fds]:-}" ] &&
		    [ "${SNAP[$f.after.$b.fds]}" -gt $(( ${SNAP[$f.before.$b.fds]} + 2 )) ]; then
			fdnote="$fdnote $f/$b"
			status=1
		fi
	done
done
{
	echo
	echo "saker failover test: $cycles cycles per fault, $rate items/s per broker,"
	echo "partition ${part_secs} s, store postgres${PG_OPTS:+,$PG_OPTS}:$(conninfo HOST)"
	[ "$strict" -eq 1 ] && echo "strict: the promoted primary waits for its rebuilt standby"
	[ "$ids" -eq 1 ] && echo "ids: producers send every set with a deduplication id and resend it until STORED"
	echo "windows in ms as min / median / max; -1: never again within ${RECOVER_MAX} s"
	for f in $faults; do
		echo
		echo "fault $f: ${SUM[$f.cycles]:-0} cycles, ${SUM[$f.bad]:-0} not ok"
		echo "  acknowledged ${SUM[$f.acked]:-0}, lost ${SUM[$f.lost]:-0}, delivered twice ${SUM[$f.dups]:-0}, delivered but not acknowledged ${SUM[$f.unack]:-0}"
		[ "$ids" -eq 1 ] && echo "  with ids: sets sent again ${SUM[$f.resent]:-0}, never acknowledged ${SUM[$f.pending]:-0}, duplicates ${SUM[$f.dups]:-0}"
		case $f in
		kill) echo "  kill to promoted:            $(spread "${SUM[$f.e.list]:-}")"
		      echo "  promoted to standby rebuilt: $(spread "${SUM[$f.rebuild.list]:-}")" ;;
		restart) echo "  restart command took:        $(spread "${SUM[$f.e.list]:-}")" ;;
		partition) echo "  partition (cut to heal):     $(spread "${SUM[$f.e.list]:-}")" ;;
		esac
		echo "  fault to first STORED, A:    $(spread "${SUM[$f.wa.list]:-}")"
		echo "  fault to first STORED, B:    $(spread "${SUM[$f.wb.list]:-}")"
		echo "  slowest version after it, A: $(spread "${SUM[$f.va.list]:-}")"
		echo "  slowest version after it, B: $(spread "${SUM[$f.vb.list]:-}")"
		for b in A B; do
			echo "  broker $b: RSS ${SNAP[$f.before.$b.rss]:-?} -> ${SNAP[$f.after.$b.rss]:-?} kB, fds ${SNAP[$f.before.$b.fds]:-?} -> ${SNAP[$f.after.$b.fds]:-?}"
			case " $fdnote " in *" $f/$b "*)
				echo "  FAILED: broker $b's open fds grew; its sockets after:" \
				    "$(awk '{ print $1 }' "$out/sockets-$f.after-$b.txt" | sort | uniq -c | tr -s ' \n' ' ')" ;;
			esac
		done
	done
	echo
	echo "broker A ${EXIT[A]}, broker B ${EXIT[B]} (SIGTERM)"
	echo "per cycle: $out/cycles.txt"
	[ "$status" -eq 0 ] && echo "RESULT: ok" || echo "RESULT: FAILED"
} | tee "$out/summary.txt"
exit "$status"
