#!/usr/bin/env bash
# Tells N stories at once: ONE gst-launch-1.0 pipeline with N branches
#   filesrc ! llmtokenize ! llmprefill ! llmdecode ! llmdetokenize ! filesink
# each with its own prompt, all on the same model. The llmprefill elements
# share one engine (same file, same properties), so the N streams' decode
# steps are gathered into shared forward passes that read the weights once
# for all of them. Prints each branch's prompt and story, then its
# llm-stats (tokens/s, TTFT, inter-token latency) and the sum over branches.
#
#   pipelines/many-streams.sh N [MODEL.gguf]
#
# MODEL defaults to tests/data/models/stories260K.gguf. The prompts are
# eight story openings, taken in turn (branch i gets seed i, so with a
# temperature above 0 branches with the same opening still differ).
# Environment: MAX_TOKENS (default 64), TEMPERATURE (default 0: greedy),
# THREADS (llmprefill n-threads, default 0: one per core), and for a KV
# pool smaller than the branches need KV_POOL_BYTES (default 0: no limit),
# KV_FULL (refuse or preempt) and KV_TIME_SLICE (ns, default 0: streams
# with memory keep it until their response ends). Uses the plugin
# in $BUILD_DIR/plugins (default: build), or GST_PLUGIN_PATH if set.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
n=$1
model=${2:-$top/tests/data/models/stories260K.gguf}
export GST_PLUGIN_PATH=${GST_PLUGIN_PATH:-${BUILD_DIR:-$top/build}/plugins}

if ! gst-inspect-1.0 llmdecode >/dev/null 2>&1; then
  echo "llmdecode not found in GST_PLUGIN_PATH=$GST_PLUGIN_PATH;" \
    "build first: meson setup build && meson compile -C build" >&2
  exit 1
fi

prompts=(
  "Once upon a time"
  "One day, a little girl named Lily"
  "Tom had a big red ball"
  "The sun was hot and the sky was blue"
  "There was a small dog who"
  "Mia wanted to fly like a bird"
  "In the park, Ben found a box"
  "The cat and the mouse were friends"
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Every llmprefill gets the same properties: the engine is shared per
# model file and options, and a branch with other options would get an
# engine of its own.
branches=()
for ((i = 0; i < n; i++)); do
  # No trailing newline: it would be part of the prompt.
  printf '%s' "${prompts[i % ${#prompts[@]}]}" > "$tmp/prompt-$i.txt"
  branches+=(
    filesrc location="$tmp/prompt-$i.txt"
    ! llmtokenize model="$model"
    ! llmprefill model="$model" n-threads="${THREADS:-0}"
        kv-pool-bytes="${KV_POOL_BYTES:-0}" kv-full="${KV_FULL:-refuse}"
        kv-time-slice="${KV_TIME_SLICE:-0}"
    ! llmdecode name="decode$i" max-tokens="${MAX_TOKENS:-64}"
        temperature="${TEMPERATURE:-0}" seed="$i"
    ! llmdetokenize model="$model"
    ! filesink location="$tmp/story-$i.txt"
  )
done

# -m prints every bus message; keep llmdecode's llm-stats, one per branch.
start=$(date +%s.%N)
if ! gst-launch-1.0 -m "${branches[@]}" > "$tmp/log" 2>&1; then
  cat "$tmp/log" >&2
  exit 1
fi
end=$(date +%s.%N)

# A field of branch $1's llm-stats line, e.g. field 0 tokens-per-s.
field() {
  sed -n "s/.*from element \"decode$1\" (element): llm-stats.*[ ,]$2=([a-z0-9]*)\([^,;]*\).*/\1/p" \
    "$tmp/log"
}

total_tokens=0
sum_tps=0
for ((i = 0; i < n; i++)); do
  echo "== branch $i"
  cat "$tmp/prompt-$i.txt" "$tmp/story-$i.txt"
  echo
  tokens=$(field "$i" generated-tokens)
  tps=$(field "$i" tokens-per-s)
  if [ -z "$tps" ]; then
    echo "   (no llm-stats from decode$i)"
    continue
  fi
  printf '   %s tokens, %.1f tokens/s, TTFT %.2f ms, ITL mean %.2f ms, p95 %.2f ms\n' \
    "$tokens" "$tps" "$(field "$i" ttft-ms)" "$(field "$i" itl-ms-mean)" \
    "$(field "$i" itl-ms-p95)"
  total_tokens=$((total_tokens + tokens))
  sum_tps=$(awk -v a="$sum_tps" -v b="$tps" 'BEGIN { print a + b }')
done
echo "== $n branches on one engine: $total_tokens tokens; the branches' tokens/s add up to" \
  "$(printf '%.1f' "$sum_tps"); wall time of the whole pipeline (model loading included)" \
  "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') s"
