#!/usr/bin/env bash
# `make test`: every test but those marked slow, as two pytest processes side by side: the native
# half (tests/: the core, the native backend and the kernels on the adapter present) and the
# browser half (e2e/: the page in headless Chromium). They share no state; alone, the browser
# half kept about one and a half of two cores busy (e2e/test_js_api.py: 60 core-seconds in 40 s),
# side by side they fill both (1583 busy core-seconds of 1615 in a quiet run of 810 s).
#   scripts/test.sh [PYTEST ARGS...]   the same arguments go to both halves
# The browser half prints as it goes; the native half writes to a log, printed when both are done.
# Exit status: 0 when both halves pass, else the first failing half's.
set -uo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
log=$(mktemp -t wgtune-native-tests.XXXXXX.log)

# A script's background job starts with SIGINT ignored (bash without job control), and its
# children inherit that: Python in them would install no KeyboardInterrupt. The native half puts
# SIGINT back to its default first, as in a terminal, so that its tests of Ctrl-C see what users do.
"$py" -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.executable, [sys.executable, "-m", "pytest", *sys.argv[1:]])' \
  tests -m "not slow" "$@" > "$log" 2>&1 &
native=$!
# Ctrl-C or a kill of this script ends the native half too, instead of leaving it running.
trap 'kill "$native" 2>/dev/null' EXIT
echo "test: the native tests run beside these browser tests; their output: $log"

"$py" -m pytest e2e -m "not slow" "$@"
browser_status=$?

wait "$native"
native_status=$?
trap - EXIT
echo
echo "===== the native tests (tests/) ====="
cat "$log"
echo "test: native tests exit $native_status, browser tests exit $browser_status"
if [ "$native_status" -ne 0 ]; then exit "$native_status"; fi
exit "$browser_status"
