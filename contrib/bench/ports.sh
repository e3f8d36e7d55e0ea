# ports.sh -- free loopback ports for the benchmark scripts (sourced by
# compare.sh and targets.sh).

port_free() { [ -z "$(ss -Htln "sport = :$1" 2>/dev/null)" ]; }

free_port() {
	local p
	while :; do
		p=$(( 20000 + RANDOM % 40000 ))
		port_free "$p" && { echo "$p"; return; }
	done
}

# Bounded: 10 s for the listener on port $1 to appear.
wait_port() {
	local i
	for i in $(seq 100); do
		port_free "$1" || return 0
		sleep 0.1
	done
	return 1
}
