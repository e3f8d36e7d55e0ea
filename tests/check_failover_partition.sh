#!/usr/bin/env bash
# check_failover_partition.sh -- tests/check_failover.sh with the other
# fault: broker A cut off from the database for 5 s (its packets dropped in
# a network namespace) while its clients still reach it, twice.  Besides
# nothing lost, its event loop must stay live: `version` answered within
# LIVE_MAX_MS (1000 here) throughout.
# (8fecbcd's driver failed it: the broker answered nothing while the
# database did not answer, and waited for good when the server gave up on
# the connection during the cut.)
export FAILOVER_FAULTS=partition
export FAILOVER_NAME=check_failover_partition
export LIVE_MAX_MS=${LIVE_MAX_MS:-1000}
exec bash "${SAKER_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}/tests/check_failover.sh"
