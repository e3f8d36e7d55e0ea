#!/bin/sh
# valgrind.sh -- run the test programs under valgrind's memcheck.
#
# Run from the build directory (`make check-valgrind` does):
#     sh tests/valgrind.sh [PROGRAM...]
# Without arguments it runs every program listed below.  In-process tests
# (the store drivers, the parser, the fuzz corpus) run under valgrind
# themselves, with CK_FORK=no so a test's memory errors are not hidden in a
# forked child.  Tests that drive the real binaries get $SAKERD and $SAKER
# pointing at wrappers that exec them under valgrind; every sakerd and saker
# a test starts writes its own log.  Any memcheck error (invalid access,
# uninitialised value, definite leak) fails the run: valgrind exits 99, and
# its non-empty logs are printed.
#
# Left out: check_crash, check_powerloss and check_faults interpose on
# write/fsync/malloc with LD_PRELOAD shims and time SIGKILLs against the
# load; valgrind replaces malloc and slows the server twenty-fold, so what
# they test would not be what runs.  ASan (--enable-sanitizers) covers
# them.  check_pg needs a PostgreSQL cluster and is left to `make check`;
# so are the failover scripts (check_failover*.sh), which time faults
# against the load.
set -u

VALGRIND=${VALGRIND:-valgrind}
if ! command -v "$VALGRIND" >/dev/null 2>&1; then
	echo "valgrind.sh: $VALGRIND not found (Debian: apt-get install valgrind)" >&2
	exit 77
fi
if [ ! -x ./sakerd ] || [ ! -x ./saker ]; then
	echo "valgrind.sh: run from the build directory, after make" >&2
	exit 2
fi

IN_PROCESS="check_proto check_store check_fuzz_replay check_http check_policy check_layer check_sqlite_faults check_longtxn check_history check_options check_conninfo check_lmdb_verify check_spec check_qconfig"
SERVER="check_server check_ops check_binary check_cli check_clients check_compat check_bench check_perms check_console check_retry check_dedup"
progs=${*:-"$IN_PROCESS $SERVER"}

work=$(mktemp -d "${TMPDIR:-/tmp}/saker-valgrind.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
mkdir "$work/logs"

# The options every run shares: errors (and definite leaks) are fatal;
# "possibly lost" blocks are LMDB's and libevent's caches kept until exit.
opts="-q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --track-origins=yes"
for bin in sakerd saker; do
	cat >"$work/$bin" <<EOF
#!/bin/sh
exec $VALGRIND $opts --log-file=$work/logs/$bin.%p $(pwd)/$bin "\$@"
EOF
	chmod +x "$work/$bin"
done

# Check's per-test timeouts stretched for a twenty-fold slower server;
# TL_VALGRIND tells tests to skip what only measures RSS (memcheck's own
# shadow memory would be counted).
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-10} TL_VALGRIND=1

failed=0
for p in $progs; do
	if [ ! -x "tests/$p" ]; then
		echo "SKIP: tests/$p (not built)"
		continue
	fi
	log="tests/$p.valgrind.log"
	case " $IN_PROCESS " in
	*" $p "*)
		CK_FORK=no $VALGRIND $opts --child-silent-after-fork=yes \
		    "tests/$p" >"$log" 2>&1
		rc=$? ;;
	*)
		SAKERD="$work/sakerd" SAKER="$work/saker" "tests/$p" >"$log" 2>&1
		rc=$? ;;
	esac
	bad=$(find "$work/logs" -type f -size +0 | head -n 20)
	if [ "$rc" -ne 0 ] || [ -n "$bad" ]; then
		echo "FAIL: tests/$p (exit $rc; see $log)"
		tail -n 20 "$log"
		for f in $bad; do
			echo "--- $f"
			cat "$f"
		done
		failed=1
	else
		echo "PASS: tests/$p $(grep -h '^[0-9]*%: Checks' "$log")"
	fi
	rm -f "$work"/logs/*
done
exit $failed
