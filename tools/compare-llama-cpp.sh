#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Measures gst-llm (gst-llm-bench) and llama.cpp on the same GGUF files,
# interleaved (model by model, round by round) so that a busy machine slows
# both alike, and prints both sets of figures side by side.
#
# llama.cpp is not part of this tree: node-llama-cpp, from the npm registry,
# ships a prebuilt CPU build of it, which tools/llama-cpp-bench.mjs drives
# through node-llama-cpp's public API. It is installed into a temporary
# directory with install scripts off, so nothing else is downloaded or
# built; the directory is removed at the end unless --node-dir names one to
# keep and reuse.
#
#   tools/compare-llama-cpp.sh [-b BUILD_DIR] [-t THREADS] [-p P] [-n N] [-r REPS]
#       [--rounds K] [--node-dir DIR] [--json FILE] MODEL.gguf...
#
# Defaults: build dir ./build, 2 threads, -p 128, -n 64, 3 repetitions, 2 rounds.
# Needs node and npm (Debian: nodejs, npm).
set -euo pipefail

NODE_LLAMA_CPP_VERSION=3.21.1

here=$(cd "$(dirname "$0")" && pwd)
build=build
threads=2
n_prompt=128
n_gen=64
reps=3
rounds=2
node_dir=
json_out=
models=()

usage () {
  sed -n '/^#   tools/,/^# Needs/p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}

while [ $# -gt 0 ]; do
  case "$1" in
    -b) build=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --node-dir) node_dir=$2; shift 2 ;;
    --json) json_out=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    -*) echo "compare-llama-cpp: unknown option $1" >&2; usage 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
[ ${#models[@]} -gt 0 ] || usage 2

bench="$build/tools/gst-llm-bench"
[ -x "$bench" ] || { echo "compare-llama-cpp: $bench not found; build first (-b BUILD_DIR)" >&2; exit 1; }
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "compare-llama-cpp: needs node and npm" >&2
  exit 1
fi

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) platform_pkg=@node-llama-cpp/linux-x64 ;;
  Linux-aarch64) platform_pkg=@node-llama-cpp/linux-arm64 ;;
  *) echo "compare-llama-cpp: no prebuilt llama.cpp CPU package for $(uname -sm)" >&2; exit 1 ;;
esac

if [ -z "$node_dir" ]; then
  node_dir=$(mktemp -d)
  trap 'rm -rf "$node_dir"' EXIT
fi
if [ ! -d "$node_dir/node_modules/node-llama-cpp" ]; then
  echo "installing node-llama-cpp $NODE_LLAMA_CPP_VERSION into $node_dir" >&2
  mkdir -p "$node_dir"
  [ -f "$node_dir/package.json" ] || echo '{"name": "llama-cpp-bench", "private": true}' > "$node_dir/package.json"
  # --ignore-scripts: node-llama-cpp's postinstall would otherwise offer to
  # download and build llama.cpp; the prebuilt binaries of the platform
  # package are all this needs. --omit=optional skips the GPU builds.
  (cd "$node_dir" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --no-audit --no-fund \
      --ignore-scripts --omit=optional \
      "node-llama-cpp@$NODE_LLAMA_CPP_VERSION" "$platform_pkg@$NODE_LLAMA_CPP_VERSION" >&2)
fi
cp "$here/llama-cpp-bench.mjs" "$node_dir/"

results=$(mktemp)
for round in $(seq 1 "$rounds"); do
  for m in "${models[@]}"; do
    echo "round $round/$rounds: $(basename "$m")" >&2
    "$bench" --json -m "$m" -t "$threads" -p "$n_prompt" -n "$n_gen" -r "$reps" \
        | sed 's/^{/{"engine": "gst-llm", /' >> "$results"
    # One libuv worker: node's default four keep waking up beside ggml's
    # threads and, on a machine with few cores, cut llama.cpp's decode
    # speed to a third.
    (cd "$node_dir" && UV_THREADPOOL_SIZE=1 node llama-cpp-bench.mjs -m "$(realpath "$m")" \
        -t "$threads" -p "$n_prompt" -n "$n_gen" -r "$reps") >> "$results"
  done
done
[ -z "$json_out" ] || cp "$results" "$json_out"

# Mean over rounds per (model, engine), then one line per model.
node - "$results" "$n_prompt" "$n_gen" "$threads" <<'EOF'
const fs = require("fs");
const [file, p, n, t] = process.argv.slice(2);
const rows = fs.readFileSync(file, "utf8").split("\n").filter(Boolean).map(JSON.parse);
const by = new Map();
for (const r of rows) {
  const k = r.model;
  if (!by.has(k)) by.set(k, { "gst-llm": [], "llama.cpp": [] });
  by.get(k)[r.engine].push(r);
}
const mean = (v, f) => v.length ? v.reduce((s, r) => s + r[f], 0) / v.length : NaN;
const range = (v, f) => v.length ? `${Math.min(...v.map(r => r[f])).toFixed(1)}-${Math.max(...v.map(r => r[f])).toFixed(1)}` : "-";
console.log(`\n${t} threads, pp${p} and tg${n}; mean over rounds (range). llama.cpp figures are its own timing of llama_decode.`);
console.log("| model | type | gst-llm pp t/s | llama.cpp pp t/s | gst-llm tg t/s | llama.cpp tg t/s | tg ratio | gst-llm of ceiling |");
console.log("|---|---|--:|--:|--:|--:|--:|--:|");
for (const [model, e] of by) {
  const g = e["gst-llm"], l = e["llama.cpp"];
  const gtg = mean(g, "tg_tokens_per_s"), ltg = mean(l, "tg_tokens_per_s");
  console.log(`| ${model} | ${g[0]?.type ?? "-"} | ${mean(g, "pp_tokens_per_s").toFixed(1)} (${range(g, "pp_tokens_per_s")}) ` +
    `| ${mean(l, "pp_tokens_per_s").toFixed(1)} (${range(l, "pp_tokens_per_s")}) ` +
    `| ${gtg.toFixed(1)} (${range(g, "tg_tokens_per_s")}) | ${ltg.toFixed(1)} (${range(l, "tg_tokens_per_s")}) ` +
    `| ${(gtg / ltg).toFixed(2)} | ${(100 * mean(g, "bandwidth_fraction")).toFixed(1)}% |`);
}
EOF
rm -f "$results"
