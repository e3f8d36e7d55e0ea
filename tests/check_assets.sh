#!/bin/sh
# check_assets.sh -- src/daemon/console_assets.c is what embed.sh makes of
# src/daemon/console/ now (a changed page was re-embedded and committed).
top=${srcdir:-.}
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
srcdir=$top sh "$top/src/daemon/console/embed.sh" > "$tmp" || exit 1
if ! cmp -s "$tmp" "$top/src/daemon/console_assets.c"; then
	echo "src/daemon/console_assets.c is stale: run" >&2
	echo "  sh src/daemon/console/embed.sh > src/daemon/console_assets.c" >&2
	exit 1
fi
echo "console assets up to date"
