#!/bin/sh
# check_layers.sh -- the dependency rule, read from the sources.
#
# Every #include "..." line under src/ and backends/ is resolved to a file
# of the tree the way the build resolves it (the including file's own
# folder first, then the include paths of its layer).  The test fails on
#   - an upward include: a layer including a header of a layer above it
#     (daemon -> proto -> core -> include/saker/store.h <- backends; util
#     below all but the store header and the drivers, which see only the
#     header and their own helpers; tools see util and the store header),
#     and
#   - an include circle between files, where a file and its header count
#     as one (conn.c and conn.h are "conn"): conn including server.h while
#     server includes conn.h is a circle, as is a.h including b.h including
#     a.h, directly or through others.
#   - a driver hook called above the layer: src/ reaches the store only
#     through the saker_store_*() functions (store.h), never a vtable.
# The includes show the calls only when every function is declared in the
# header of the file that defines it, so the test also fails on
#   - a function declared in a.h that a.c (when there is one) does not
#     define: one header declaring the functions of several files hides
#     their calls to each other (postgres's old pg_int.h did), and
#   - a function or extern object declared in a private *_int.h header:
#     those hold the types and constants a driver's or tool's files
#     share, and every file includes them.
# config.h (generated) and system headers (<...>) are not files of the tree.
set -u
top=${srcdir:-.}
cd "$top" || exit 1

# layer of a path; rank orders them: a file may include its own rank or lower
layer() {
	case $1 in
	src/util/*) echo util ;;
	include/saker/*) echo store ;;
	src/core/*) echo core ;;
	src/proto/*) echo proto ;;
	src/daemon/*) echo daemon ;;
	src/tools/*) echo tools ;;
	backends/*) echo backends ;;
	*) echo unknown ;;
	esac
}

# the folders a layer's files may include from (its include paths)
paths() {
	case $1 in
	util) echo "src/util" ;;
	store) echo "include" ;;
	core) echo "src/core include src/util" ;;
	proto) echo "src/proto src/core include src/util" ;;
	daemon) echo "src/daemon src/proto src/core include src/util" ;;
	tools) echo "src/tools include src/util" ;;
	backends) echo "backends include src/util" ;;
	esac
}

edges=$(mktemp) || exit 1
trap 'rm -f "$edges"' EXIT
fail=0

for f in $(find src backends include -name '*.[ch]' | sort); do
	l=$(layer "$f")
	dir=$(dirname "$f")
	for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
		[ "$inc" = config.h ] && continue
		found=
		# the including file's own folder first, as the compiler does
		if [ -f "$dir/$inc" ]; then
			found="$dir/$inc"
		else
			for p in $(paths "$l"); do
				if [ -f "$p/$inc" ]; then
					found="$p/$inc"
					break
				fi
			done
		fi
		if [ -z "$found" ]; then
			# not visible to this layer: upward (or a missing file)
			where=$(find src backends include -name "$(basename "$inc")" | head -n 1)
			if [ -n "$where" ]; then
				echo "upward include: $f ($l) includes $inc ($(layer "$where"): $where)"
			else
				echo "include of a missing file: $f includes $inc"
			fi
			fail=1
			continue
		fi
		# "../daemon/conn.h" from src/core resolves, but is as upward as
		# "conn.h": the file found must be in a folder the layer sees
		found=$(realpath -m --relative-to=. "$found")
		fdir=$(dirname "$found")
		ok=
		[ "$fdir" = "$dir" ] && ok=1
		for p in $(paths "$l"); do
			case $fdir in
			"$p"|"$p"/*) ok=1 ;;
			esac
		done
		if [ -z "$ok" ]; then
			echo "upward include: $f ($l) includes $inc ($(layer "$found"): $found)"
			fail=1
			continue
		fi
		a=${f%.[ch]}
		b=${found%.[ch]}
		[ "$a" = "$b" ] && continue
		echo "$a $b" >> "$edges"
	done
done

# functions declared where they are defined (first line of a prototype:
# "type name(" at the start of a line; definitions put the name first)
for h in $(find src backends -name '*.h' | sort); do
	c=${h%.h}.c
	case $h in
	*_int.h)
		if grep -nE '^(extern[[:space:]]|[A-Za-z_][A-Za-z0-9_ *]*[ *][a-z_][a-z0-9_]*\()' \
		    "$h" | grep -v '^[0-9]*:\(static\|typedef\)' | grep -q .; then
			echo "function or extern in a types-only header: $h"
			fail=1
		fi
		continue ;;
	esac
	[ -f "$c" ] || continue
	for fn in $(grep -E '^[A-Za-z_][A-Za-z0-9_ *]*[ *][a-z_][a-z0-9_]*\(' "$h" |
	    grep -v '^\(static\|typedef\)' |
	    sed -E 's/^[^(]*[ *]([a-z_][a-z0-9_]*)\(.*/\1/'); do
		if ! grep -qE "^$fn\(" "$c"; then
			echo "declared in $h but not defined in $c: $fn"
			fail=1
		fi
	done
done

# circles: tsort reports a cycle on stderr
if ! sort -u "$edges" | tsort > /dev/null 2> "$edges.err"; then
	:
fi
if [ -s "$edges.err" ]; then
	echo "include circle:"
	sed 's/^/  /' "$edges.err"
	fail=1
fi
rm -f "$edges.err"

# the core and the tools reach the store through the layer's functions
# (store.h, THE CORE'S CALLS), never through a driver's vtable: no
# `->driver` (the handle's vtable) and no hook called on a driver
# descriptor (`drv->open(`) under src/
hooks=$(grep -rnE --include='*.[ch]' -e '->driver\b|\bdrv->[a-z_]+\(' src |
    grep -v '^[^:]*:[0-9]*:[[:space:]]*\*')
if [ -n "$hooks" ]; then
	echo "a driver hook called above the layer (use saker_store_*()):"
	echo "$hooks" | sed 's/^/  /'
	fail=1
fi

if [ $fail -ne 0 ]; then
	echo "FAIL: the dependency rule is broken (docs/design.md, \"Layers\")"
	exit 1
fi
echo "ok: no upward include, no include circle, no driver hook above the layer"
exit 0
