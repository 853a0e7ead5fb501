#!/bin/sh
# Builds the GGUF reader's libFuzzer harness with clang and runs it for a
# bounded time. Exits non-zero if the fuzzer finds a crash, leak or trap;
# the input that did it is left as build-fuzz/fuzz/crash-* (or leak-*,
# timeout-*), and can be replayed with: build-fuzz/fuzz/gguf_fuzz FILE
#
# Usage: tools/run-gguf-fuzz.sh [SECONDS] [extra libFuzzer flags...]
#   SECONDS defaults to 60. BUILD_DIR overrides build-fuzz; JOBS runs that
#   many fuzzing processes in parallel (default 1).
set -eu

seconds=${1:-60}
[ $# -gt 0 ] && shift
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build-fuzz}
jobs=${JOBS:-1}
# -jobs sends each worker's output to a fuzz-N.log; one job stays on stdout.
parallel=
if [ "$jobs" -gt 1 ]; then
  parallel="-jobs=$jobs -workers=$jobs"
fi

if [ ! -f "$build/build.ninja" ]; then
  CC=clang meson setup "$build" "$src" -Dfuzz=true -Dtests=disabled \
    -Dcuda=disabled -Dhip=disabled
fi
meson compile -C "$build" gguf_fuzz gguf_fuzz_seeds

seeds=$build/fuzz/seeds
corpus=$build/fuzz/corpus
mkdir -p "$corpus"
"$build/fuzz/gguf_fuzz_seeds" "$seeds"

# Inputs stay small: everything interesting in a GGUF header fits in a
# few kilobytes, and small inputs run fast.
"$build/fuzz/gguf_fuzz" \
  -max_total_time="$seconds" \
  -max_len=4096 \
  -timeout=10 \
  -rss_limit_mb=2048 \
  $parallel \
  -print_final_stats=1 \
  -dict="$src/fuzz/gguf.dict" \
  -artifact_prefix="$build/fuzz/" \
  "$@" \
  "$corpus" "$seeds"
