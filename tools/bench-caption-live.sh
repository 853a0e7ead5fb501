#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Glass-to-caption latency on live video: a live 1280x720 30 fps source,
# one caption every INTERVAL seconds through
#   queue leaky ! llmvisionencode ! llmprefill ! llmdecode ! llmdetokenize
#   mode=caption ! webvttenc
# for DURATION seconds. Prints, from llm-stats' caption-latency-ms (a
# frame's time on the pipeline clock to the end of its caption): the count,
# median, p95 and maximum, the median of the first and of the last third
# (a backlog shows as growth), captions made against captions due, frames
# the encoder dropped for being late, and the RSS of the pipeline sampled
# every 5 s (after the first caption, its maximum, at the end).
#
#   tools/bench-caption-live.sh [--duration S] [--interval S] [--max-tokens N]
#       [--mmproj FILE --model FILE] [--width W --height H]
#
# Without --mmproj/--model it uses SmolVLM-256M's shapes with random
# weights: the SigLIP-B/16 tower and pixel shuffle (gst-llm-make-mmproj
# smolvlm) and SmolLM2-135M in Q8_0 (gst-llm-bench --make-model
# smollm2-135m), written once to ~/.cache/gst-llm/bench.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
duration=60 interval=2 max_tokens=24 width=1280 height=720 mmproj="" model=""
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --max-tokens) max_tokens=$2; shift 2 ;;
    --mmproj) mmproj=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --width) width=$2; shift 2 ;;
    --height) height=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
export GST_PLUGIN_PATH=${GST_PLUGIN_PATH:-$build/plugins}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gst-llm/bench
mkdir -p "$cache"
if [ -z "$model" ]; then
  model=$cache/smollm2-135m-q8_0.gguf
  [ -f "$model" ] || "$build/tools/gst-llm-bench" --make-model smollm2-135m --type q8_0 \
    -o "$model" >&2
fi
if [ -z "$mmproj" ]; then
  mmproj=$cache/mmproj-smolvlm-$(basename "$model" .gguf).gguf
  [ -f "$mmproj" ] || "$build/tools/gst-llm-make-mmproj" smolvlm --lm "$model" -o "$mmproj"
fi

log=$(mktemp)
rss=$(mktemp)
trap 'rm -f "$log" "$rss"' EXIT
timeout -s INT "$duration" gst-launch-1.0 -e -m \
  videotestsrc is-live=true pattern=ball ! "video/x-raw,width=$width,height=$height,framerate=30/1" \
  ! queue leaky=downstream max-size-buffers=2 \
  ! llmvisionencode name=enc mmproj="$mmproj" interval="$interval" \
  ! llmprefill model="$model" prompt="Describe this frame in one sentence." \
  ! llmdecode max-tokens="$max_tokens" \
  ! llmdetokenize model="$model" mode=caption ! webvttenc ! fakesink sync=false \
  >"$log" 2>&1 &
pid=$!
sleep 1
gst=$(pgrep -P "$pid" gst-launch-1.0 || echo "$pid")
while kill -0 "$pid" 2>/dev/null; do
  sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$gst/status" 2>/dev/null >>"$rss" || true
  sleep 5
done
wait "$pid" || true

python3 - "$log" "$rss" "$duration" "$interval" "$(lscpu | sed -n 's/^Model name:[[:space:]]*//p')" <<'EOF'
import re, statistics, sys
log, rss_path, duration, interval, cpu = sys.argv[1:]
text = open(log, errors="replace").read()
lat = [float(x) for x in re.findall(r"caption-latency-ms=\(double\)([0-9.]+)", text)]
ttft = [float(x) for x in re.findall(r"ttft-ms=\(double\)([0-9.]+)", text)]
rss = [int(x) for x in open(rss_path).read().split()]
def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] if v else float("nan")
print(f"cpu: {cpu}")
print(f"captions: {len(lat)} of {int(float(duration) / float(interval))} due")
if lat:
    third = max(1, len(lat) // 3)
    print(f"caption latency ms: median {q(lat, 50):.0f}, p95 {q(lat, 95):.0f}, max {max(lat):.0f}; "
          f"median of first third {statistics.median(lat[:third]):.0f}, of last third "
          f"{statistics.median(lat[-third:]):.0f}")
if ttft:
    print(f"ttft ms median {q(ttft, 50):.1f}")
if len(rss) > 2:
    print(f"rss kB: after start {rss[1]}, max {max(rss)}, end {rss[-1]}, growth {rss[-1] - rss[1]}")
if "ERROR" in text:
    print("errors:", "\n".join(l for l in text.splitlines() if "ERROR" in l)[:2000])
EOF
