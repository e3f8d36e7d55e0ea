#!/bin/sh
# check_browser.sh -- the web console in headless Chromium against a real
# sakerd: tests/console_browser.py (Debian's chromium and chromium-driver,
# Python's standard library).  Skipped (77) when they are missing, except
# under CI=true, where that fails.
top=${srcdir:-.}
if ! command -v python3 >/dev/null 2>&1; then
	if [ "${CI:-}" = true ]; then
		echo "FAIL: python3 is missing (CI=true: not skipped)" >&2
		exit 1
	fi
	echo "SKIP: python3 is missing"
	exit 77
fi
exec python3 "$top/tests/console_browser.py"
