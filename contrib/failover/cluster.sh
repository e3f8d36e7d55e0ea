# shellcheck shell=bash disable=SC2034  # the PGC_ and NS_ variables are failover.sh's
# cluster.sh -- a PostgreSQL primary and a synchronous streaming standby on
# loopback TCP, and a network namespace to cut one broker off the database.
# Sourced by contrib/failover/failover.sh (bash); every function is bounded
# in time.
#
#   pgc_init WORKDIR [EXTRA_LISTEN_ADDR]   initdb node 0, start it, clone
#                        node 1 with pg_basebackup -R, wait until it is the
#                        synchronous standby.  PGC_PRIMARY/PGC_STANDBY hold
#                        the node numbers, PGC_PORT[n] the ports.
#   pgc_kill N           kill -9 node N's postmaster and every backend of it
#                        (what a lost machine looks like to its clients)
#   pgc_promote N        pg_ctl promote (the standby becomes the primary)
#   pgc_rebuild N        throw node N away, clone it from the primary with
#                        pg_basebackup -R and start it as a standby
#   pgc_restart N        pg_ctl restart -m fast
#   pgc_sync on|off      synchronous_standby_names '*' or '' on both nodes
#   pgc_wait_sync SECS   until the standby is synchronous ('sync' in
#                        pg_stat_replication)
#   pgc_destroy          stop both (immediate), keep nothing
#   ns_init / ns_cut / ns_heal / ns_destroy   the namespace (see ns_init)
#
# PostgreSQL refuses to run as root: as root the servers run as "nobody"
# (tests/pg_cluster.c does the same).  fsync is off: the faults here kill
# processes, not the machine, so the page cache survives them and fsync
# changes nothing that is tested; production keeps fsync on.

PGC_BINDIR=${PG_BINDIR:-}	# as tests/pg_cluster.c: PG_BINDIR overrides the lookup
PGC_WORK=
PGC_PRIMARY=0
PGC_STANDBY=1
PGC_PORT=(0 0)
PGC_LISTEN=127.0.0.1
PGC_USER=saker

pgc_log() { printf '%s cluster: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

pgc_find_bindir() {
	local d
	if [ -n "$PGC_BINDIR" ]; then
		[ -x "$PGC_BINDIR/pg_ctl" ]
		return
	fi
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V); do
		[ -x "$d/pg_ctl" ] && [ -x "$d/pg_basebackup" ] && PGC_BINDIR=$d
	done
	[ -n "$PGC_BINDIR" ]
}

# As root, run as nobody; everything it writes goes to $PGC_WORK/setup.log.
pgc_as() {
	if [ "$(id -u)" -eq 0 ]; then
		setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"
	else
		"$@"
	fi
}

pgc_dir() { echo "$PGC_WORK/node$1"; }

pgc_psql() {	# NODE SQL: one value per line, nothing on failure
	PGCONNECT_TIMEOUT=3 timeout 10 "$PGC_BINDIR/psql" -X -At -q \
	    -h 127.0.0.1 -p "${PGC_PORT[$1]}" -U "$PGC_USER" -d postgres \
	    -c "$2" 2>>"$PGC_WORK/setup.log"
}

pgc_start() {
	local n=$1
	# port and addresses on the command line: pg_basebackup copies
	# postgresql.conf from node to node
	pgc_as timeout 70 "$PGC_BINDIR/pg_ctl" -D "$(pgc_dir "$n")" -w -t 60 \
	    -l "$PGC_WORK/node$n.log" \
	    -o "-p ${PGC_PORT[$n]} -c listen_addresses=$PGC_LISTEN -k $PGC_WORK/sock" \
	    start >>"$PGC_WORK/setup.log" 2>&1
}

pgc_postmaster_pid() {
	local f
	f="$(pgc_dir "$1")/postmaster.pid"
	[ -r "$f" ] && head -n 1 "$f"
}

# The pids whose parent is $1 and whose name is postgres (the name in
# /proc/PID/stat may hold spaces: the fields are counted after its ')').
pgc_children() {
	local f line rest
	for f in /proc/[0-9]*/stat; do
		read -r line 2>/dev/null <"$f" || continue
		case $line in *"(postgres) "*) ;; *) continue ;; esac
		rest=${line##*) }
		rest=${rest#* }		# the state
		[ "${rest%% *}" = "$1" ] && echo "${f//[^0-9]/}"
	done
}

# The postmaster, then its children: SIGSTOP first so it cannot start new
# ones between the listing and the kill.
pgc_kill() {
	local pm kids
	pm=$(pgc_postmaster_pid "$1") || return 1
	[ -n "$pm" ] && kill -0 "$pm" 2>/dev/null || return 1
	kill -STOP "$pm" 2>/dev/null
	kids=$(pgc_children "$pm")
	kill -KILL "$pm" $kids 2>/dev/null
	# gone, or a zombie nobody reaps yet (pg_ctl, its parent, has exited)
	for _ in $(seq 100); do
		[ "$(awk '{ print $3 }' "/proc/$pm/stat" 2>/dev/null)" = Z ] && break
		kill -0 "$pm" 2>/dev/null || break
		sleep 0.05
	done
}

pgc_stop() {	# NODE MODE
	pgc_as timeout 70 "$PGC_BINDIR/pg_ctl" -D "$(pgc_dir "$1")" -w -t 60 \
	    -m "${2:-fast}" stop >>"$PGC_WORK/setup.log" 2>&1
}

pgc_restart() {
	pgc_as timeout 70 "$PGC_BINDIR/pg_ctl" -D "$(pgc_dir "$1")" -w -t 60 \
	    -m fast -l "$PGC_WORK/node$1.log" \
	    -o "-p ${PGC_PORT[$1]} -c listen_addresses=$PGC_LISTEN -k $PGC_WORK/sock" \
	    restart >>"$PGC_WORK/setup.log" 2>&1
}

pgc_promote() {
	pgc_as timeout 40 "$PGC_BINDIR/pg_ctl" -D "$(pgc_dir "$1")" -w -t 30 \
	    promote >>"$PGC_WORK/setup.log" 2>&1 || return 1
	PGC_PRIMARY=$1
	PGC_STANDBY=$((1 - $1))
}

# synchronous_standby_names lives in sync.conf (included by
# postgresql.conf) so it can change on a standby too, before a promotion.
pgc_sync_file() {	# NODE on|off
	local v="''"
	[ "$2" = on ] && v="'*'"
	echo "synchronous_standby_names = $v" >"$(pgc_dir "$1")/sync.conf"
	[ "$(id -u)" -ne 0 ] || chown nobody:nogroup "$(pgc_dir "$1")/sync.conf"
}

pgc_reload() {
	pgc_as timeout 20 "$PGC_BINDIR/pg_ctl" -D "$(pgc_dir "$1")" reload \
	    >>"$PGC_WORK/setup.log" 2>&1
}

pgc_sync() {
	local n
	for n in 0 1; do
		[ -d "$(pgc_dir "$n")" ] || continue
		pgc_sync_file "$n" "$1"
		[ -n "$(pgc_postmaster_pid "$n")" ] && pgc_reload "$n"
	done
	return 0
}

pgc_wait_sync() {
	local end=$((SECONDS + ${1:-60}))
	while [ "$SECONDS" -lt "$end" ]; do
		[ "$(pgc_psql "$PGC_PRIMARY" "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'")" = sync ] && return 0
		sleep 0.2
	done
	pgc_log "no synchronous standby after ${1:-60} s"
	return 1
}

pgc_wait_ready() {	# NODE SECS: accepting connections
	local end=$((SECONDS + ${2:-30}))
	while [ "$SECONDS" -lt "$end" ]; do
		[ "$(pgc_psql "$1" "SELECT 1")" = 1 ] && return 0
		sleep 0.1
	done
	return 1
}

pgc_basebackup() {	# NODE: clone it from the primary
	local d
	d=$(pgc_dir "$1")
	rm -rf "$d"
	pgc_as timeout 120 "$PGC_BINDIR/pg_basebackup" -h 127.0.0.1 \
	    -p "${PGC_PORT[$PGC_PRIMARY]}" -U "$PGC_USER" -D "$d" -R -X stream \
	    -c fast --no-sync >>"$PGC_WORK/setup.log" 2>&1
}

pgc_rebuild() {	# NODE [on|off]: a fresh standby of the primary
	local n=$1
	pgc_stop "$n" immediate 2>/dev/null
	pgc_kill "$n" 2>/dev/null
	pgc_basebackup "$n" || { pgc_log "pg_basebackup of node $n failed"; return 1; }
	pgc_sync_file "$n" "${2:-on}"
	pgc_start "$n" || { pgc_log "node $n did not start"; return 1; }
	PGC_STANDBY=$n
}

pgc_init() {	# WORKDIR [EXTRA_LISTEN]
	PGC_WORK=$1
	[ -n "${2:-}" ] && PGC_LISTEN="127.0.0.1,$2"
	pgc_find_bindir || { pgc_log "PostgreSQL binaries not found (set PG_BINDIR)"; return 2; }
	mkdir -p "$PGC_WORK/sock"
	[ "$(id -u)" -ne 0 ] || chown -R nobody:nogroup "$PGC_WORK"
	PGC_PRIMARY=0
	PGC_STANDBY=1
	pgc_as timeout 120 "$PGC_BINDIR/initdb" -D "$(pgc_dir 0)" -A trust \
	    -U "$PGC_USER" -E UTF8 --no-sync >>"$PGC_WORK/setup.log" 2>&1 ||
	    { pgc_log "initdb failed (see $PGC_WORK/setup.log)"; return 1; }
	cat >>"$(pgc_dir 0)/postgresql.conf" <<-EOF
	# contrib/failover: a synchronous standby; nothing acknowledged lost
	synchronous_commit = on
	include_if_exists = 'sync.conf'
	hot_standby = on
	wal_level = replica
	max_wal_senders = 10
	wal_keep_size = 64MB
	max_connections = 100
	fsync = off
	full_page_writes = off
	# a broker cut off leaves a backend holding its transaction's locks:
	# find out in seconds, not the kernel's two hours
	tcp_keepalives_idle = 5
	tcp_keepalives_interval = 2
	tcp_keepalives_count = 3
	tcp_user_timeout = 10000
	wal_sender_timeout = 5s
	wal_receiver_timeout = 5s
	# a restarted primary's standby is back in a second, not five: the
	# primary holds its commits until then
	wal_retrieve_retry_interval = 1s
	EOF
	if [ "${2:-}" != "" ]; then
		echo "host all all ${2%.*}.0/24 trust" >>"$(pgc_dir 0)/pg_hba.conf"
	fi
	pgc_sync_file 0 on
	pgc_start 0 || { pgc_log "node 0 did not start (see $PGC_WORK/node0.log)"; return 1; }
	pgc_rebuild 1 on || return 1
	pgc_wait_sync 60
}

pgc_destroy() {
	local n
	[ -n "$PGC_WORK" ] || return 0
	for n in 0 1; do
		[ -n "$(pgc_postmaster_pid "$n" 2>/dev/null)" ] || continue
		pgc_stop "$n" immediate 2>/dev/null || true
		pgc_kill "$n" 2>/dev/null || true
	done
}

# --------------------------------------------------------------------------
# The partition: broker A runs in network namespace NS_NAME.  Two veth
# pairs join it to the host: one for its clients (NS_CLIENT_IP, the
# address they connect to), one for its database traffic (NS_DB_IP, the
# host's end, where PostgreSQL also listens).  ns_cut sets the host's end
# of the database pair down: packets sent into a veth whose peer is down
# are dropped, so from the broker's side the database stops answering
# (a blackhole, not a refusal), while its clients still reach it.
NS_NAME=
NS_CLIENT_IP=
NS_DB_IP=
NS_DB_IF=

ns_init() {
	local id=$(( $$ % 60000 )) a b
	# 10.A.B.0/24 subnets: A from 200-249, one /30 for each pair
	a=$(( 200 + id % 50 ))
	b=$(( (id / 50) % 250 ))
	NS_NAME="skfo$id"
	NS_DB_IF="skd$id"
	NS_DB_IP="10.$a.$b.1"
	NS_CLIENT_IP="10.$a.$b.6"
	ip netns add "$NS_NAME" || return 1
	ip link add "skc$id" type veth peer name "skcn$id" &&
	ip link set "skcn$id" netns "$NS_NAME" &&
	ip addr add "10.$a.$b.5/30" dev "skc$id" &&
	ip link set "skc$id" up &&
	ip -n "$NS_NAME" addr add "$NS_CLIENT_IP/30" dev "skcn$id" &&
	ip -n "$NS_NAME" link set "skcn$id" up &&
	ip link add "$NS_DB_IF" type veth peer name "skdn$id" &&
	ip link set "skdn$id" netns "$NS_NAME" &&
	ip addr add "$NS_DB_IP/30" dev "$NS_DB_IF" &&
	ip link set "$NS_DB_IF" up &&
	ip -n "$NS_NAME" addr add "10.$a.$b.2/30" dev "skdn$id" &&
	ip -n "$NS_NAME" link set "skdn$id" up &&
	ip -n "$NS_NAME" link set lo up || { ns_destroy; return 1; }
	# fixed neighbour entries: a cut must not leave a failed ARP entry
	# that answers "no route to host" for a while after the heal
	ip -n "$NS_NAME" neigh replace "$NS_DB_IP" dev "skdn$id" nud permanent \
	    lladdr "$(cat "/sys/class/net/$NS_DB_IF/address")" &&
	ip neigh replace "10.$a.$b.2" dev "$NS_DB_IF" nud permanent \
	    lladdr "$(ip netns exec "$NS_NAME" cat "/sys/class/net/skdn$id/address")" ||
	    { ns_destroy; return 1; }
}

ns_cut() { ip link set "$NS_DB_IF" down; }
ns_heal() { ip link set "$NS_DB_IF" up; }

ns_destroy() {
	local id=${NS_NAME#skfo}
	[ -n "$NS_NAME" ] || return 0
	# the namespace's ends go with it, and with them their peers
	ip netns del "$NS_NAME" 2>/dev/null
	ip link del "skc$id" 2>/dev/null
	ip link del "skd$id" 2>/dev/null
	NS_NAME=
	return 0
}
