#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# gst-llm's speculative decoding against llama.cpp's on the same GGUF
# files, same machine, same prompts: greedy decode tokens/s of
#   ours:   gst-llm-bench --spec ngram (plain, the dynamic budget, fixed K)
#   theirs: llama-bench tg at the prompt's depth (plain decoding; the
#           speculative example has no plain mode), and
#           llama-speculative-simple --spec-type TYPE for each TYPE given
# in one interleaved run (every round runs ours, then theirs, per workload),
# medians over the rounds. llama.cpp's binaries come from
# tools/build-llama-cpp.sh --speculative (built natively from the bundle in
# node-llama-cpp, cached outside the tree).
#
#   tools/compare-spec-llama-cpp.sh [-n N] [-t THREADS] [--rounds R] [-k K]
#       [--spec-type T1,T2,...] [--draft-model FILE] [--llama native|noamx]
#       MODEL WORKLOAD.txt...
#
# -n tokens to decode (default 128; llama.cpp runs with --ignore-eos), -k
# the fixed draft length on both sides (default 8), --spec-type llama.cpp's
# drafters (default ngram-mod,ngram-map-k,ngram-simple); with
# --draft-model, ours is --spec model and theirs draft-simple with -md.
# --llama noamx: tools/build-llama-cpp.sh's noamx variant instead of native,
# for a Xeon with AMX, where the native build's AMX code crashes.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
n=128 threads=2 rounds=3 k=8 types=ngram-mod,ngram-map-k,ngram-simple draft= variant=native
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -k) k=$2; shift 2 ;;
    --spec-type) types=$2; shift 2 ;;
    --draft-model) draft=$2; types=draft-simple; shift 2 ;;
    --llama) variant=$2; shift 2 ;;
    -h|--help) sed -n '/^#   tools/,/^# for a Xeon with AMX/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "compare-spec-llama-cpp: give a model and workload files (--help)" >&2; exit 2; }
model=$1; shift
bench=${BUILD_DIR:-$top/build}/tools/gst-llm-bench
[ -x "$bench" ] || { echo "compare-spec-llama-cpp: build gst-llm first ($bench)" >&2; exit 1; }
case "$variant" in
  native|noamx) ;;
  *) echo "compare-spec-llama-cpp: --llama native or noamx, not '$variant'" >&2; exit 2 ;;
esac
llama_bench=$("$top/tools/build-llama-cpp.sh" --variant "$variant" --speculative)
spec=$(dirname "$llama_bench")/llama-speculative-simple
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -n1); llama.cpp: $(sed -n 's/^commit=//p' "$(dirname "$llama_bench")/build-info")"
for r in $(seq "$rounds"); do
  for w in "$@"; do
    name=$(basename "$w")
    if [ -n "$draft" ]; then ours=(--spec model --draft-model "$draft"); else ours=(--spec ngram); fi
    "$bench" -m "$model" "${ours[@]}" --spec-prompt "$w" -n "$n" -r 1 -t "$threads" \
        --draft-max "$k" --spec-draft-max "$k" --bandwidth-mib 0 --json 2>/dev/null \
      | python3 -c '
import json, sys
for l in sys.stdin:
    if l.startswith("{"):
        d = json.loads(l)
        print("%s\tours %s\t%.2f\t%.3f" % (sys.argv[1], d["variant"], d["tg_tokens_per_s"], d["acceptance_rate"]))
        open(sys.argv[2], "w").write(str(d["prompt_tokens"]))
' "$name" "$out/prompt_tokens" >> "$out/rows"
    "$llama_bench" -m "$model" -p 0 -n "$n" -d "$(cat "$out/prompt_tokens")" -t "$threads" \
        -r 1 -o json 2>/dev/null | python3 -c '
import json, sys
for r in json.load(sys.stdin):
    print("%s\tllama.cpp plain (llama-bench)\t%.2f\t0" % (sys.argv[1], r["avg_ts"]))
' "$name" >> "$out/rows"
    for t in ${types//,/ }; do
      extra=()
      [ "$t" != draft-simple ] || extra=(-md "$draft")
      "$spec" -m "$model" "${extra[@]}" --spec-type "$t" -f "$w" -n "$n" -t "$threads" --temp 0 \
          --ignore-eos --spec-draft-n-max "$k" 2>&1 \
        | python3 -c '
import re, sys
text = sys.stdin.read()
m = re.search(r"decoded\s+(\d+) tokens in\s+([0-9.]+) seconds", text)
d = re.search(r"n_drafted\s*=\s*(\d+)", text); a = re.search(r"n_accept\s*=\s*(\d+)", text)
if m:
    tps = int(m.group(1)) / float(m.group(2))
    nd = int(d.group(1)) if d else 0; na = int(a.group(1)) if a else 0
    print("%s\tllama.cpp %s\t%.2f\t%.3f" % (sys.argv[1], sys.argv[2], tps, na / nd if nd else 0))
' "$name" "$t" >> "$out/rows"
    done
  done
done
python3 - "$out/rows" <<'PY'
import statistics, sys
rows = {}
order = []
for line in open(sys.argv[1]):
    w, v, tps, acc = line.rstrip("\n").split("\t")
    if (w, v) not in rows:
        rows[(w, v)] = []
        order.append((w, v))
    rows[(w, v)].append((float(tps), float(acc)))
print("| workload | decoder | t/s (median) | x our plain | acceptance |")
print("|---|---|--:|--:|--:|")
for w, v in order:
    tps = statistics.median(t for t, _ in rows[(w, v)])
    acc = statistics.median(a for _, a in rows[(w, v)])
    base = statistics.median(t for t, _ in rows[(w, "ours plain")]) if (w, "ours plain") in rows else float("nan")
    print("| %s | %s | %.1f | %.2f | %.2f |" % (w, v, tps, tps / base, acc))
PY
