#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The vision encoder of one mmproj file through gst-llm (gst-llm-bench
# --vision) and through llama.cpp's mtmd (tools/mtmd-time.cpp, built
# against the cached native build by tools/build-mtmd-program.sh), on the
# same image, at the same thread counts, interleaved: every round runs
# ours, then theirs, at each thread count, each process encoding -k timed
# images after an untimed one, so a neighbour's load on a shared machine
# falls on both alike. Prints the medians over all timed images.
#
#   tools/compare-vision-llama-cpp.sh [-b BUILD_DIR] [-t 1,2] [-r ROUNDS]
#       [-k IMAGES] [--flash auto|on|off] [--path native|avx2] MMPROJ
#
#   -t        thread counts (default 1,2)
#   -r        rounds (default 5); -k images per process and round (default 2)
#   --flash   llama.cpp's flash attention: auto (default: what
#             llama-mtmd-cli runs; on for the CPU), on or off
#   --path    native: gst-llm's kernels as it picks them (AVX-512 here);
#             avx2: LLM_NO_AVX512=1 LLM_NO_AVX_VNNI=1 for gst-llm (llama.cpp
#             stays native; build-llama-cpp.sh --variant avx2 has no mtmd)
#
# Make a file with: gst-llm-bench --make-mmproj smolvlm --n-out 576 -o F.
# Needs python3 for the summary.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
threads=1,2
rounds=5
images=2
flash=auto
path=native
while [ $# -gt 1 ]; do
  case "$1" in
    -b) build=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -r) rounds=$2; shift 2 ;;
    -k) images=$2; shift 2 ;;
    --flash) flash=$2; shift 2 ;;
    --path) path=$2; shift 2 ;;
    *) echo "compare-vision-llama-cpp: unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -eq 1 ] || { sed -n '/^#   tools\/compare-vision/,/^# Needs/p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
mmproj=$1
bench=$build/tools/gst-llm-bench
[ -x "$bench" ] || { echo "compare-vision-llama-cpp: no $bench (meson compile -C $build)" >&2; exit 1; }
ours_env=()
if [ "$path" = avx2 ]; then ours_env=(LLM_NO_AVX512=1 LLM_NO_AVX_VNNI=1); fi

timer=$("$top/tools/build-mtmd-program.sh" "$top/tools/mtmd-time.cpp")
llama_dir=$(dirname "$timer")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The image both encode (gst-llm-bench's pattern, normalised for the file).
env "${ours_env[@]}" "$bench" --vision "$mmproj" --vision-image "$tmp/image.f32" -t 1 -r 1 \
    --json > "$tmp/first.json"
side=$(python3 -c "import math,os; print(math.isqrt(os.path.getsize('$tmp/image.f32') // 12))")

: > "$tmp/results"
for r in $(seq 1 "$rounds"); do
  for t in ${threads//,/ }; do
    env "${ours_env[@]}" "$bench" --vision "$mmproj" -t "$t" -r "$images" --json \
        | python3 -c "import json,sys
o = json.load(sys.stdin)
for ms in o['ms']: print('ours', $t, ms / 1e3, o['backend'])" >> "$tmp/results"
    "$timer" "$mmproj" "$tmp/image.f32" "$side" "$t" "$images" "$flash" 2> "$tmp/llama.log" \
        | sed -n "s/^seconds /llama.cpp $t /p" | sed 's/$/ -/' >> "$tmp/results"
    grep -q "flash attention is" "$tmp/llama.log" && \
        sed -n 's/.*flash attention is \([a-z]*\).*/\1/p' "$tmp/llama.log" | tail -n1 > "$tmp/flash"
  done
  echo "round $r of $rounds done (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n1)
python3 - "$tmp/results" "$mmproj" "$cpu" "$(sed -n 's/^commit=//p' "$llama_dir/build-info")" \
    "$(cat "$tmp/flash" 2>/dev/null || echo "$flash")" "$rounds" "$images" "$path" <<'PY'
import statistics, sys
res, mmproj, cpu, commit, flash, rounds, images, path = sys.argv[1:]
rows = [l.split() for l in open(res) if l.strip()]
backend = next((r[3] for r in rows if r[0] == 'ours'), '?')
print(f"{mmproj}\nCPU: {cpu}; gst-llm {backend} (--path {path}); llama.cpp {commit[:12]} "
      f"native, flash attention {flash}\nmedian over {rounds} interleaved rounds x {images} "
      f"images per process (range)\n")
print("| threads | gst-llm images/s | llama.cpp images/s | gst-llm ms | llama.cpp ms | ratio |")
print("|---|---|---|---|---|---|")
for t in sorted({int(r[1]) for r in rows}):
    g = [float(r[2]) for r in rows if r[0] == 'ours' and int(r[1]) == t]
    l = [float(r[2]) for r in rows if r[0] == 'llama.cpp' and int(r[1]) == t]
    mg, ml = statistics.median(g), statistics.median(l)
    print(f"| {t} | {1 / mg:.3f} | {1 / ml:.3f} | {mg * 1e3:.0f} ({min(g) * 1e3:.0f}-{max(g) * 1e3:.0f})"
          f" | {ml * 1e3:.0f} ({min(l) * 1e3:.0f}-{max(l) * 1e3:.0f}) | {ml / mg:.2f} |")
print("\nratio: gst-llm's images/s over llama.cpp's")
PY
