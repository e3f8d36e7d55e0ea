#!/usr/bin/env bash
# Builds saker's Debian package from this checkout and tries it the way an
# operator would, on a fresh Debian 12 (bookworm) root made by debootstrap:
#
#   1. dpkg-buildpackage -us -uc -b (DEB_BUILD_OPTIONS=nocheck: the suite is
#      CI's job, ~25 minutes) in a copy of the tree, then lintian;
#   2. debootstrap a minimal bookworm root (the debootstrap tarball is cached
#      in $SAKER_DEBOOTSTRAP_CACHE, default /var/cache/saker-test, so a rerun
#      does not download the base system again), install the .deb with apt
#      (which fetches its dependencies from $MIRROR);
#   3. check the user, the directories, the conffile and the unit, verify the
#      unit with the host's systemd-analyze, then run the unit's ExecStart
#      line, read from the installed unit, as the user saker with setpriv
#      (there is no systemd in a chroot), round-trip an item with `saker put`/`saker get`
#      and another one across a restart (the LMDB store in /var/lib/saker);
#   4. reinstall over an edited conffile (kept) and the store (kept);
#      apt-get remove (configuration, store and user stay), then purge
#      (they go; the user is locked) and show what remains; a reinstall
#      after the purge unlocks the user.
#
# The root runs in its own network namespace (unshare --net), so the unit's
# fixed ports 22133 and 9122 cannot collide with anything on the host.
#
# Usage, as root on Debian 12 with debhelper, lintian, debootstrap and the
# build dependencies (debian/control) installed:
#   contrib/debian/test-package.sh [WORKDIR]
# WORKDIR (default: a new /tmp/saker-pkg.XXXXXX) is removed at the end unless
# KEEP=1.  It takes about 45 s on two cores with the tarball cached (making
# the tarball adds ~20 s) and needs the network for apt.  Not in CI: it needs
# root with mount, chroot and unshare --net, which a CI container may not
# grant, and a Debian mirror; .ci/run already takes ~25 of its 45 minutes
# (up to 40 under load).
set -euo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-$(mktemp -d /tmp/saker-pkg.XXXXXX)}
cache=${SAKER_DEBOOTSTRAP_CACHE:-/var/cache/saker-test}
mirror=${MIRROR:-http://deb.debian.org/debian}
suite=bookworm
root=$work/root

[ "$(id -u)" -eq 0 ] || { echo "test-package.sh: run as root (debootstrap, chroot)" >&2; exit 1; }
for t in dpkg-buildpackage lintian debootstrap unshare ip; do
	command -v "$t" >/dev/null || { echo "test-package.sh: $t is missing" >&2; exit 1; }
done

step() { printf '\n=== %s\n' "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
mounted=""
cleanup() {
	[ -z "$mounted" ] || umount "$root/proc" 2>/dev/null || true
	if [ "${KEEP:-0}" != 1 ]; then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT

# ----------------------------------------------------------------------
step "build: dpkg-buildpackage -us -uc -b (DEB_BUILD_OPTIONS=nocheck)"
# A copy of the tree (tracked and new files, not the build products), so
# the build neither sees nor cleans the developer's configured tree.
mkdir -p "$work/src"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	git -C "$src" ls-files -z --cached --others --exclude-standard |
		(cd "$src" && tar --null -T - -cf - 2>/dev/null) | tar -xf - -C "$work/src"
else
	cp -a "$src/." "$work/src/"
fi
start=$(date +%s)
(cd "$work/src" && DEB_BUILD_OPTIONS=nocheck dpkg-buildpackage -us -uc -b) \
	>"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; fail "dpkg-buildpackage"; }
grep -E '^dpkg-deb: building|^dpkg-buildpackage: info: binary-only' "$work/build.log"
echo "built in $(( $(date +%s) - start )) s"
deb=$(ls "$work"/saker_*.deb | grep -v dbgsym)
version=$(dpkg-deb -f "$deb" Version)
echo "$deb: version $version"
dpkg-deb -c "$deb" | awk '{print $1, $2, $6}'

step "lintian $(basename "$deb")"
# lintian's exit status is 0 unless it finds an error (its default --fail-on)
lintian --info --display-info "$work"/saker_*.changes || fail "lintian reports errors"

# ----------------------------------------------------------------------
step "debootstrap $suite (cached base tarball)"
mkdir -p "$cache"
tarball=$cache/$suite-minbase.tgz
if [ ! -s "$tarball" ]; then
	debootstrap --variant=minbase --make-tarball="$tarball.part" "$suite" \
		"$work/mk" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail "$work/debootstrap.log"; fail "debootstrap --make-tarball"; }
	mv "$tarball.part" "$tarball"
fi
start=$(date +%s)
debootstrap --variant=minbase --unpack-tarball="$tarball" "$suite" "$root" "$mirror" \
	>"$work/debootstrap.log" 2>&1 || { tail "$work/debootstrap.log"; fail "debootstrap"; }
echo "root in $(( $(date +%s) - start )) s: $(cat "$root/etc/debian_version")"
mount -t proc proc "$root/proc"; mounted=1
cp /etc/resolv.conf "$root/etc/resolv.conf"
# no init system in here: nothing may try to start services
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"; }

step "apt-get install ./$(basename "$deb") in the root"
cp "$deb" "$root/tmp/"
in_root apt-get update -qq
in_root apt-get install -y -q --no-install-recommends "/tmp/$(basename "$deb")" \
	>"$work/install.log" 2>&1 || { tail -30 "$work/install.log"; fail "apt-get install"; }
grep -E '^(The following NEW|  |Setting up|Unpacking saker)' "$work/install.log" | head -20

step "what the package made"
in_root getent passwd saker || fail "no saker user"
in_root getent group saker || fail "no saker group"
in_root stat -c '%A %U:%G %n' /var/lib/saker /etc/saker /etc/saker/saker.conf
[ "$(in_root stat -c %U:%G:%a /var/lib/saker)" = saker:saker:750 ] ||
	fail "/var/lib/saker is not saker:saker 0750"
echo "conffiles:"; in_root dpkg-query -W -f='${Conffiles}\n' saker
in_root dpkg-query -W -f='${Conffiles}\n' saker | grep -q ' /etc/saker/saker.conf ' ||
	fail "/etc/saker/saker.conf is not a conffile"
unit=/lib/systemd/system/sakerd.service
grep -E '^(ExecStart|    |User|StateDirectory|ConfigurationDirectory)' "$root$unit"
echo "enabled: $(ls "$root"/etc/systemd/system/multi-user.target.wants/ 2>/dev/null)"
echo "versions: $(in_root sakerd --version), $(in_root saker --version), package $version"
[ "$(in_root sakerd --version)" = "sakerd $version" ] || fail "sakerd --version is not $version"
[ "$(in_root saker --version)" = "saker $version" ] || fail "saker --version is not $version"

step "systemd-analyze verify, in the root with systemd and man-db added"
# minbase has no systemd: the unit's targets and man pages (Documentation=)
# are only there to check against once they are installed
in_root apt-get install -y -q --no-install-recommends systemd man-db >"$work/systemd.log" 2>&1 ||
	{ tail "$work/systemd.log"; fail "apt-get install systemd"; }
in_root systemd-analyze verify "$unit" || fail "systemd-analyze verify"
echo "systemd-analyze verify $unit: ok ($(in_root systemd-analyze --version | head -1))"

# ----------------------------------------------------------------------
step "run the unit's ExecStart as saker, round-trip with saker put/get"
# The ExecStart line with its continuation lines joined, as systemd reads it.
execstart=$(sed -n '/^ExecStart=/,/[^\\]$/p' "$root$unit" |
	sed -e 's/^ExecStart=//' -e 's/\\$//' | tr '\n' ' ')
echo "ExecStart: $execstart"
cat >"$root/tmp/inside.sh" <<EOF
set -eu
start() {
	# setpriv execs (runuser would stay as a root parent), as systemd's
	# User=saker Group=saker do
	setpriv --reuid=saker --regid=saker --init-groups -- $execstart 2>>/tmp/sakerd.log &
	pid=\$!
	i=0
	until grep -q ' serving ' /tmp/sakerd.log; do
		i=\$((i + 1)); [ \$i -lt 100 ] || { cat /tmp/sakerd.log; exit 1; }
		kill -0 \$pid 2>/dev/null || { cat /tmp/sakerd.log; exit 1; }
		sleep 0.1
	done
}
stop() { kill -TERM \$pid; wait \$pid; }
start
echo "sakerd runs as \$(stat -c %U /proc/\$pid): \$(tr '\\0' ' ' </proc/\$pid/cmdline)"
[ "\$(stat -c %U /proc/\$pid)" = saker ]
saker put jobs "hello from the package"
got=\$(saker get -t 1000 jobs)
echo "saker get: \$got"
[ "\$got" = "hello from the package" ]
saker put jobs "kept across a restart"
stop
: >/tmp/sakerd.log
start
got=\$(saker get -t 1000 jobs)
echo "after a restart, saker get: \$got"
[ "\$got" = "kept across a restart" ]
stop
echo "sakerd's log (second run):"; cat /tmp/sakerd.log
ls -l /var/lib/saker
EOF
unshare --net -- sh -c "ip link set lo up && chroot '$root' /usr/bin/env -i \
	PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 /bin/sh /tmp/inside.sh" ||
	fail "round trip"

step "reinstall over an edited conffile and the store: both stay"
echo "# an administrator's line" >>"$root/etc/saker/saker.conf"
in_root apt-get install --reinstall -y -q "/tmp/$(basename "$deb")" >"$work/reinstall.log" 2>&1 ||
	{ tail "$work/reinstall.log"; fail "reinstall"; }
tail -1 "$root/etc/saker/saker.conf"
grep -q "an administrator's line" "$root/etc/saker/saker.conf" || fail "reinstall replaced the edited conffile"
[ -s "$root/var/lib/saker/data.mdb" ] || fail "reinstall lost the store"
echo "store kept: $(in_root stat -c '%U:%G %s bytes %n' /var/lib/saker/data.mdb)"

# ----------------------------------------------------------------------
step "apt-get remove saker: configuration, store and user stay"
in_root apt-get remove -y -q saker >"$work/remove.log" 2>&1 || { cat "$work/remove.log"; fail "remove"; }
in_root dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' saker
for f in /var/lib/saker/data.mdb /etc/saker/saker.conf; do
	[ -e "$root$f" ] || fail "remove deleted $f"; echo "kept $f"
done
[ ! -e "$root/usr/sbin/sakerd" ] || fail "remove left /usr/sbin/sakerd"

step "apt-get purge saker: what remains"
in_root apt-get purge -y -q saker >"$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "purge"; }
in_root dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' saker 2>&1 || true
for f in /var/lib/saker /etc/saker /usr/sbin/sakerd /usr/bin/saker "$unit" \
	/etc/systemd/system/multi-user.target.wants/sakerd.service /usr/share/doc/saker; do
	if [ -e "$root$f" ] || [ -L "$root$f" ]; then fail "purge left $f"; fi
	echo "gone: $f"
done
echo "the saker account stays, locked: $(in_root getent passwd saker)"
echo "  expires: $(in_root chage -l saker | grep 'Account expires')"
in_root chage -l saker | grep -q 'Account expires.*1970' || fail "saker is not locked"
echo "files owned by saker left in the root:"
in_root find / -xdev \( -user saker -o -group saker \) -print | sed 's/^/  /'
[ -z "$(in_root find / -xdev \( -user saker -o -group saker \) -print)" ] || fail "saker's files remain"

step "reinstall after a purge: the account is unlocked again"
in_root apt-get install -y -q --no-install-recommends "/tmp/$(basename "$deb")" >/dev/null 2>&1 ||
	fail "reinstall"
in_root chage -l saker | grep 'Account expires'
in_root chage -l saker | grep -q 'Account expires.*never' || fail "saker is still locked"
[ "$(in_root stat -c %U:%G:%a /var/lib/saker)" = saker:saker:750 ] || fail "/var/lib/saker after reinstall"
in_root apt-get purge -y -q saker >/dev/null 2>&1

echo
echo "test-package.sh: all checks passed ($version)"
