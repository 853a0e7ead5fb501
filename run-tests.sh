#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds gst-llm and runs every test
# suite. Prints Check's per-suite summaries and one total line
# "N passed, M failed"; exits non-zero if anything failed.
#   ./run-tests.sh              all suites
#   ./run-tests.sh --valgrind   the same under valgrind (leak check)
set -euo pipefail
cd "$(dirname "$0")"
./tools/install-deps.sh

build=build
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
meson compile -C "$build"

setup=()
[ "${1:-}" = "--valgrind" ] && setup=(--setup valgrind)

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
meson test -C "$build" -v --print-errorlogs "${setup[@]}" 2>&1 | tee "$log" || status=$?

# Each suite prints "check: N passed, M failed". A suite that crashed or
# timed out prints no such line, so meson's failures beyond the suites that
# reported failed checks are counted too.
read -r passed failed failing_suites < <(awk '/^check: [0-9]+ passed, [0-9]+ failed/ {p += $2; f += $4; if ($4 > 0) s++} END {print p+0, f+0, s+0}' "$log")
meson_failed=$(awk '/^(Fail|Timeout): +[0-9]+/ {n += $2} END {print n+0}' "$log")
if [ "$meson_failed" -gt "$failing_suites" ]; then
  failed=$((failed + meson_failed - failing_suites))
fi
echo "${passed} passed, ${failed} failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
