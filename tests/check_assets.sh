#!/bin/sh
# check_assets.sh -- the console's files (src/daemon/console/) are all
# compiled into sakerd as they are, and the page keeps to its CSP.
#
# The build writes src/daemon/console_assets.c from them (Makefile.am runs
# embed.sh again whenever one changes), so it cannot be stale; what can go
# wrong is a file left out of CONSOLE_ASSETS (served as 404) or bytes
# mangled on the way through od and sed.  So: every file has its entry,
# and its array read back is the file byte for byte.  (check_console
# compares what sakerd serves with the files, too.)
top=${srcdir:-.}
c="$top/src/daemon/console"
gen=src/daemon/console_assets.c
if [ ! -f "$gen" ]; then
	echo "$gen missing: run from the build directory after make" >&2
	exit 1
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
for f in "$c"/*; do
	name=${f##*/}
	[ "$name" = embed.sh ] && continue
	arr=$(sed -n "s|^	{ \"/$name\", \"[^\"]*\", \(a[0-9]*\), sizeof.*|\1|p" "$gen")
	if [ -z "$arr" ]; then
		echo "$name is not embedded: add it to CONSOLE_ASSETS in Makefile.am" >&2
		fail=1
		continue
	fi
	sed -n "/^static const unsigned char $arr\[\] = {/,/^};/p" "$gen" |
	    grep -o '0x[0-9a-f][0-9a-f]' | sed 's/^0x//' > "$tmp/embedded"
	od -An -v -tx1 "$f" | tr -s ' ' '\n' | sed '/^$/d' > "$tmp/file"
	if ! cmp -s "$tmp/embedded" "$tmp/file"; then
		echo "$gen: /$name ($arr) is not $f byte for byte" >&2
		fail=1
	fi
done
[ "$fail" = 0 ] || exit 1
# the page keeps to the CSP and writes data as text only: no inline
# script, style or event handler, no HTML built from strings
if grep -n -E '<script>|<script [^>]*>[^<]|style=|<style| on[a-z]+=' "$c/index.html" >&2; then
	echo "index.html: inline script, style or handler (the CSP forbids them)" >&2
	exit 1
fi
if grep -n -E 'innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function|\.style\b|setAttribute\("style' "$c/console.js" >&2; then
	echo "console.js: builds HTML from strings or sets inline style" >&2
	exit 1
fi
echo "console page keeps to its CSP"
echo "every console file is embedded byte for byte"
