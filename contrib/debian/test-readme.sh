#!/usr/bin/env bash
# Runs the README's commands as written, in the order written, as root in a
# fresh Debian 12 (bookworm) debootstrap root: the source fetched with git,
# the quick start (stopped with SIGINT once its ready line is out, which is
# compared with the README's), the store examples (each served, then
# stopped; the postgres one must fail for want of a server, not of its
# driver), the examples' tools, the session (telnet fed
# the typed lines; the replies compared with the README's transcript), nc and
# ./saker, the Debian package build and install, make install, and the
# by-hand systemd steps (systemctl cannot run in a chroot: reported, not
# failed; the unit's ExecReload is run as systemd would, and the packaged
# store is opened as the user saker, which a root-made store there broke),
# and the self-signed certificate recipe with a put over TLS.  Not run: `bash .ci/run` and the suite's command (~25 minutes).
#
# The commands are read from the README (a line that is not found fails the
# script: update it with the README), so they are the README's own text.
# The root uses the host's network (apt needs it): the README's port 22133
# must be free on the host.
#
# Usage, as root on Debian 12 with debootstrap and git:
#   contrib/debian/test-readme.sh [WORKDIR]
# The source is a `git clone` of this checkout's HEAD (commit first).  The
# debootstrap tarball is cached as in test-package.sh.  About 2-3 minutes.
set -euo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-$(mktemp -d /tmp/saker-readme.XXXXXX)}
cache=${SAKER_DEBOOTSTRAP_CACHE:-/var/cache/saker-test}
mirror=${MIRROR:-http://deb.debian.org/debian}
suite=bookworm
root=$work/root
readme=$src/README

[ "$(id -u)" -eq 0 ] || { echo "test-readme.sh: run as root" >&2; exit 1; }
fail() { echo "FAIL: $*" >&2; exit 1; }
if (exec 3<>/dev/tcp/127.0.0.1/22133) 2>/dev/null; then
	fail "port 22133 is in use on this host (the root shares its network)"
fi
mounted=""
cleanup() {
	[ -z "$mounted" ] || umount "$root/proc" 2>/dev/null || true
	if [ "${KEEP:-0}" != 1 ]; then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT

# cmd PATTERN: the README's indented command line starting with PATTERN
cmd() {
	local line
	line=$(grep -m1 -F -- "    $1" "$readme" | sed 's/^    //') || true
	[ -n "$line" ] || fail "the README has no command line starting with '$1'"
	printf '%s' "$line"
}
c_quick=$(cmd 'apt-get update && apt-get install -y build-essential autoconf')
c_tools=$(cmd 'apt-get install -y telnet')
c_bg=$(cmd './sakerd -p 22133 &')
c_telnet=$(cmd 'telnet 127.0.0.1 22133')
c_nc=$(grep -o "printf 'set jobs 0 0 2.*nc -q1 127.0.0.1 22133" "$readme") || fail "no nc example"
c_pkgdeps=$(cmd 'apt-get update && apt-get install -y build-essential && apt-get build-dep')
c_pkgbuild=$(cmd 'DEB_BUILD_OPTIONS=nocheck dpkg-buildpackage')
c_pkginst=$(cmd 'apt-get install -y ../saker_')
c_make=$(cmd './autogen.sh && ./configure --prefix=/usr/local && make -j2 && make install')
c_user=$(cmd 'getent passwd saker ||')
c_conf=$(cmd 'install -D -m 644 /usr/local/share/doc/saker/saker.conf.example')
c_unit=$(cmd 'cp /usr/local/share/doc/saker/sakerd.service')
c_systemctl=$(cmd 'systemctl daemon-reload')
# the store examples: the command before the description (two spaces)
c_st_lmdb=$(cmd './sakerd --store lmdb:' | sed 's/  .*//')
c_st_sqlite=$(cmd './sakerd --store sqlite:' | sed 's/  .*//')
c_st_memory=$(cmd './sakerd --store memory ' | sed 's/  .*//')
c_st_pg=$(cmd "./sakerd --store 'postgres:" | sed 's/  .*//')
c_openssl_pkg=$(grep -o 'apt-get install -y openssl' "$readme" | head -1) || fail "no openssl package"
c_cert=$(cmd 'openssl req -x509')
c_tls_srv=$(cmd './sakerd --store memory --tls-cert')
c_tls_put=$(cmd './saker --tls --tls-ca server.pem put')
# the ready line the README shows, and the session's replies
ready=$(grep -m1 -E '^    [0-9]{4}-[0-9]{2}-[0-9]{2}T.* serving ' "$readme" | sed 's/^    //') ||
	fail "no ready line in the README"
expected_session=$(sed -n '/^    telnet 127.0.0.1 22133$/,/^    quit$/p' "$readme" |
	sed -e 's/^    //' -e 's/ *(arrives.*//' |
	awk 'skip { skip = 0; next } /^set / { skip = 1; next } /^(get |quit|telnet )/ { next } { print }')

mkdir -p "$cache" "$work"
tarball=$cache/$suite-minbase.tgz
if [ ! -s "$tarball" ]; then
	debootstrap --variant=minbase --make-tarball="$tarball.part" "$suite" "$work/mk" "$mirror" \
		>"$work/debootstrap.log" 2>&1 || { tail "$work/debootstrap.log"; fail "debootstrap --make-tarball"; }
	mv "$tarball.part" "$tarball"
fi
debootstrap --variant=minbase --unpack-tarball="$tarball" "$suite" "$root" "$mirror" \
	>"$work/debootstrap.log" 2>&1 || { tail "$work/debootstrap.log"; fail "debootstrap"; }
mount -t proc proc "$root/proc"; mounted=1
cp /etc/resolv.conf "$root/etc/resolv.conf"
# what `git clone` of the repository gives: this checkout's HEAD
git clone -q --no-checkout "$src" "$root/srcrepo"
git -C "$root/srcrepo" checkout -q "$(git -C "$src" rev-parse HEAD)"

# The steps run in the root: the README's lines as variables, then the script.
{
	for v in c_quick c_tools c_bg c_telnet c_nc c_pkgdeps c_pkgbuild c_pkginst c_make \
		c_user c_conf c_unit c_systemctl ready expected_session \
		c_st_lmdb c_st_sqlite c_st_memory c_st_pg c_openssl_pkg c_cert c_tls_srv \
		c_tls_put; do
		printf '%s=%q\n' "$v" "${!v}"
	done
	cat <<'EOF'
set -u
fail() { echo "FAIL: $*"; exit 1; }
# run TITLE CMD [LINES]: the README's command line, as written, run by bash;
# the last LINES (3) of its output shown
run() {
	echo; echo "# $1"; echo "\$ $2"
	local start rc=0
	start=$(date +%s)
	bash -c "$2" >/root/out.log 2>&1 || rc=$?
	tail -n "${3:-3}" /root/out.log | sed 's/^/  | /'
	echo "  -> exit $rc, $(( $(date +%s) - start )) s"
	return $rc
}
# the sakerd processes started from this root (the host's /proc shows all)
our_sakerd() {
	for e in /proc/[0-9]*/exe; do
		case "$(readlink "$e" 2>/dev/null)" in
		/root/saker/sakerd|/usr/sbin/sakerd|/usr/local/sbin/sakerd)
			basename "$(dirname "$e")";;
		esac
	done
}
# a failing step leaves no server behind
trap 'p=$(our_sakerd); [ -z "$p" ] || kill $p' EXIT
cd /root
run "the source (the README's git route)" \
	'apt-get update -qq && apt-get install -y -qq git && git clone -q /srcrepo saker' 1 || fail "git clone"
cd /root/saker

echo; echo "# quick start, as written (stopped with SIGINT once ready)"; echo "\$ $c_quick"
start=$(date +%s)
bash -c "$c_quick" >/root/quick.log 2>&1 &
qpid=$!
until grep -q ' serving ' /root/quick.log; do
	kill -0 $qpid 2>/dev/null || { tail -20 /root/quick.log; fail "the quick start ended before sakerd was ready"; }
	sleep 1
done
line=$(grep ' serving ' /root/quick.log)
echo "  ready after $(( $(date +%s) - start )) s:"; echo "  | $line"
echo "  the README shows:"; echo "  | $ready"
strip() { sed -E 's/^[^ ]+ sakerd\[[0-9]+\]//'; }
[ "$(echo "$line" | strip)" = "$(echo "$ready" | strip)" ] ||
	fail "the ready line differs from the README's beyond the time and the pid"
kill -INT $(our_sakerd); wait $qpid; echo "  -> exit $? after SIGINT"

# serve TITLE CMD: a server command run until its ready line, then SIGINT;
# fails when it exits first
serve() {
	echo; echo "# $1"; echo "\$ $2"
	bash -c "$2" >/root/serve.log 2>&1 &
	local spid=$! n=0
	until grep -q ' serving ' /root/serve.log; do
		kill -0 $spid 2>/dev/null || { sed 's/^/  | /' /root/serve.log; return 1; }
		n=$((n + 1)); [ $n -lt 200 ] || { kill $spid; return 1; }
		sleep 0.1
	done
	grep ' serving ' /root/serve.log | sed 's/^/  | /'
	kill -INT $(our_sakerd); wait $spid; echo "  -> exit $? after SIGINT"
}
serve "choosing a store" "$c_st_lmdb" || fail "lmdb example"
serve "choosing a store" "$c_st_sqlite" || fail "sqlite example"
serve "choosing a store" "$c_st_memory" || fail "memory example"
echo; echo "# choosing a store (no PostgreSQL server here: the driver must be built)"
echo "\$ $c_st_pg"
rc=0; bash -c "$c_st_pg" >/root/pg.log 2>&1 || rc=$?
sed 's/^/  | /' /root/pg.log; echo "  -> exit $rc"
[ $rc -eq 1 ] && ! grep -qE 'unknown store type|not compiled in' /root/pg.log ||
	fail "the postgres example: the driver is not built"
[ ! -e /var/lib/saker ] || fail "the store examples made /var/lib/saker"

run "the examples' tools" "$c_tools" 1 || fail "tools"
command -v telnet >/dev/null && command -v nc >/dev/null || fail "telnet or nc missing"

echo; echo "# the session"; echo "\$ $c_bg"
eval "$c_bg" 2>/root/session-sakerd.log
sleep 1
echo "\$ $c_telnet   (the typed lines fed from a pipe, 0.3 s apart)"
( printf 'set jobs 0 0 5\nhello\n'; sleep 0.3; printf 'set jobs/delay=2000 7 0 5\nlater\n'; sleep 0.3
  printf 'get jobs\n'; sleep 0.3; printf 'get jobs/t=5000\n'; sleep 3; printf 'quit\n'; sleep 0.5 ) |
	$c_telnet 2>&1 | tr -d '\r' >/root/session.log
sed 's/^/  | /' /root/session.log
[ "$(grep -vE '^(Trying|Connected|Escape|Connection closed)' /root/session.log)" = "$expected_session" ] ||
	fail "the session's replies differ from the README's"
echo "  -> the replies are the README's"
run "from a script" "$c_nc" || fail "nc"
run "the companion tool" './saker put jobs hi' || fail "saker put"
run "the companion tool" './saker get -t 1000 jobs' || fail "saker get"
run "the companion tool" './saker stats' 4 || fail "saker stats"
echo; echo "\$ kill %1"; kill %1; wait; echo "  -> stopped"

run "Debian package: build dependencies" "$c_pkgdeps" 1 || fail "build-dep"
run "Debian package: build" "$c_pkgbuild" 2 || fail "dpkg-buildpackage"
run "Debian package: install" "$c_pkginst" 1 || fail "apt-get install"
v=$(dpkg-query -W -f='${Version}' saker)
echo "  package $v, $(saker --version), $(sakerd --version)"
[ "$(saker --version)" = "saker $v" ] && [ "$(sakerd --version)" = "sakerd $v" ] || fail "--version"
stat -c '  %A %U:%G %n' /var/lib/saker /etc/saker/saker.conf /lib/systemd/system/sakerd.service
# what sakerd.service runs, as its user (no systemd in a chroot)
serve "the packaged store, opened as the service's user" \
	'runuser -u saker -- /usr/sbin/sakerd -p 22134 --store lmdb:/var/lib/saker' ||
	fail "the service's user cannot open /var/lib/saker"

run "make install" "$c_make" 1 || fail "make install"
grep '^ExecStart=' /usr/local/share/doc/saker/sakerd.service | sed 's/^/  /'
grep -q '^ExecStart=/usr/local/sbin/sakerd ' /usr/local/share/doc/saker/sakerd.service || fail "the unit's path"
run "under systemd by hand" "$c_user" || fail "useradd"
run "under systemd by hand" "$c_conf" || fail "install"
run "under systemd by hand" "$c_unit" || fail "cp"
# the unit's ExecReload, its words split as systemd does (shell quoting),
# $MAINPID in the environment as systemd sets it
reload=$(sed -n 's/^ExecReload=//p' /etc/systemd/system/sakerd.service)
echo; echo "# ExecReload=$reload  (as systemd runs it; /bin/kill: $(test -e /bin/kill && echo present || echo absent))"
/usr/local/sbin/sakerd -p 22135 --store memory 2>/root/reload.log &
rpid=$!
sleep 1
MAINPID=$rpid sh -c "$reload" || fail "ExecReload failed"
sleep 0.5
/usr/local/bin/saker stats -s 127.0.0.1:22135 | grep '^reloads' | sed 's/^/  | /'
/usr/local/bin/saker stats -s 127.0.0.1:22135 | grep -q '^reloads  *1$' || fail "ExecReload sent no SIGHUP"
kill $rpid; wait $rpid || true
if [ -d /run/systemd/system ]; then
	run "under systemd by hand" "$c_systemctl" || fail "systemctl"
else
	echo; echo "# not run: $c_systemctl  (no systemd running in a chroot)"
fi

run "Encrypt it: openssl" "$c_openssl_pkg" 1 || fail "openssl"
run "Encrypt it: a test certificate" "$c_cert" 1 || fail "openssl req"
echo; echo "# Encrypt it"; echo "\$ $c_tls_srv"
eval "$c_tls_srv" 2>/root/tls.log
sleep 1
run "Encrypt it" "$c_tls_put" || fail "saker put over TLS"
run "Encrypt it (the item back)" './saker --tls --tls-ca server.pem get jobs' || fail "saker get over TLS"
kill %1; wait || true
echo; echo "test-readme.sh: the README's commands ran as written"
EOF
} >"$root/root/steps.sh"
chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/root TERM=dumb LANG=C.UTF-8 /bin/bash /root/steps.sh
