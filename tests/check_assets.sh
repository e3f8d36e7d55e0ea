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
# the page keeps to the CSP and writes data as text only: no inline
# script, style or event handler, no HTML built from strings
c="$top/src/daemon/console"
if grep -n -E '<script>|<script [^>]*>[^<]|style=|<style| on[a-z]+=' "$c/index.html" >&2; then
	echo "index.html: inline script, style or handler (the CSP forbids them)" >&2
	exit 1
fi
if grep -n -E 'innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function|\.style\b|setAttribute\("style' "$c/console.js" >&2; then
	echo "console.js: builds HTML from strings or sets inline style" >&2
	exit 1
fi
echo "console page keeps to its CSP"
echo "console assets up to date"
