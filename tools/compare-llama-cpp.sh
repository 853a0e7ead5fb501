#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Measures gst-llm (gst-llm-bench) and llama.cpp on the same GGUF files,
# interleaved (model by model, round by round: ours, theirs, ours, ...) so
# that a busy machine slows both alike, and prints both sets of figures side
# by side: the median over rounds of each round's mean over -r repetitions.
#
# llama.cpp is not part of this tree. Two ways to run it (--llama):
#
#   native, noamx, avx2
#                 llama.cpp's own llama-bench, built from the source that the
#                 npm package node-llama-cpp ships by tools/build-llama-cpp.sh
#                 (cached outside the tree; --llama native|noamx|avx2 builds
#                 it when it is missing): -DGGML_NATIVE=ON; every AVX-512
#                 option but AMX off (for a Xeon where llama.cpp's AMX code
#                 crashes); or AVX2/FMA/F16C only.
#                 The strongest comparison. Tests as llama-bench defines them:
#                 ppP is one batch of P random tokens on an empty cache, tgN is
#                 N single-token steps from an empty cache; gst-llm-bench runs
#                 the same (-p P -n 0, then -p 0 -n N).
#   prebuilt      node-llama-cpp's prebuilt CPU build, driven by
#                 tools/llama-cpp-bench.mjs through its public API, installed
#                 into a temporary directory with install scripts off (kept and
#                 reused with --node-dir). One P and one N: each repetition is
#                 a prompt of P then N steps, on both sides (tg after pp).
#
# Default: native when tools/build-llama-cpp.sh's cache holds that build,
# else prebuilt (it says which). --path avx2 gives the AVX2-only comparison in
# one command: gst-llm with LLM_NO_AVX512=1 LLM_NO_AVX_VNNI=1 against the avx2
# llama-bench, on this machine, as an AVX2-only CPU (Zen 3) would run them.
#
#   tools/compare-llama-cpp.sh [-b BUILD_DIR] [-t THREADS] [-p P[,P...]] [-n N]
#       [-d DEPTH] [-r REPS] [--rounds K] [--path native|avx2] [--llama native|noamx|avx2|prebuilt]
#       [--fa on|off|auto] [--jobs J] [--max-others PCT] [--idle-wait S]
#       [--retries N] [--node-dir DIR] [--json FILE] MODEL.gguf...
#
#   --path native   gst-llm's kernels as it picks them for this CPU (default)
#   --path avx2     LLM_NO_AVX512=1 LLM_NO_AVX_VNNI=1 for gst-llm, and the avx2
#                   llama-bench unless --llama says otherwise
#   -d DEPTH        both sides first fill the cache with DEPTH tokens
#                   (llama-bench -d, gst-llm-bench -d; untimed), so tg and pp
#                   read DEPTH positions of attention: long-context speed.
#                   Not with --llama prebuilt.
#   --fa            llama-bench's flash attention (default on: what its
#                   default, auto, resolves to on a CPU-only build; gst-llm's
#                   attention is one fused pass too)
#   --jobs J        compile jobs if a llama-bench has to be built (default 2)
#   --max-others PCT  each run first waits (at most --idle-wait S, default
#                   300) until other processes use under PCT % of one CPU, and
#                   is run again (at most --retries N times, default 3) when
#                   they took more than that while it ran (default 10; 0: no
#                   check). On a shared machine a few seconds of other load
#                   can cut a run's figures to a fifth.
#   --json FILE     keep every raw result, one JSON object a line (with
#                   others_cpu_pct: what other processes took during its run)
#
# Defaults: build dir ./build, 2 threads, -p 128, -n 64, 3 repetitions,
# 3 rounds. llama-bench runs with -t THREADS -ngl 0 -ctk f16 -ctv f16
# -b 2048 -ub 512 -fa on -r REPS -o jsonl and its defaults otherwise (mmap,
# --poll 50, its warm-up). Needs node (Debian: nodejs) for the summary, npm
# for prebuilt and for building.
set -euo pipefail

NODE_LLAMA_CPP_VERSION=3.21.1

here=$(cd "$(dirname "$0")" && pwd)
build=build
threads=2
n_prompt=128
n_gen=64
depth=0
reps=3
rounds=3
llama=
path=native
fa=on
jobs=2
max_others=10
idle_wait=300
retries=3
node_dir=
json_out=
models=()

usage () {
  sed -n '/^#   tools\/compare/,/^# for prebuilt/p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}
die () { echo "compare-llama-cpp: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    -b) build=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    -d) depth=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --llama) llama=$2; shift 2 ;;
    --path) path=$2; shift 2 ;;
    --fa) fa=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --max-others) max_others=$2; shift 2 ;;
    --idle-wait) idle_wait=$2; shift 2 ;;
    --retries) retries=$2; shift 2 ;;
    --node-dir) node_dir=$2; shift 2 ;;
    --json) json_out=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    -*) echo "compare-llama-cpp: unknown option $1" >&2; usage 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
[ ${#models[@]} -gt 0 ] || usage 2
for m in "${models[@]}"; do [ -f "$m" ] || die "no such model: $m"; done
case "$n_prompt" in *[!0-9,]*|'') die "-p wants numbers: $n_prompt" ;; esac
case "$n_gen" in *[!0-9]*|'') die "-n wants one number: $n_gen" ;; esac
case "$depth" in *[!0-9]*|'') die "-d wants one number: $depth" ;; esac
case "$fa" in on|off|auto) ;; *) die "--fa wants on, off or auto" ;; esac
for v in "$max_others" "$idle_wait" "$retries" "$reps" "$rounds" "$threads"; do
  case "$v" in *[!0-9]*|'') die "not a number: $v" ;; esac
done

bench="$build/tools/gst-llm-bench"
[ -x "$bench" ] || die "$bench not found; build first (-b BUILD_DIR)"
command -v node >/dev/null || die "needs node (Debian: nodejs)"

# Our kernel path.
ours_env=()
case "$path" in
  native) ;;
  avx2) ours_env=(LLM_NO_AVX512=1 LLM_NO_AVX_VNNI=1) ;;
  *) die "--path wants native or avx2" ;;
esac

# Their build: the one asked for (built if missing), else the cached one of
# the path, else prebuilt.
build_llama=("$here/build-llama-cpp.sh")
if [ -z "$llama" ]; then
  if "${build_llama[@]}" --find --variant "$path" >/dev/null; then
    llama=$path
    echo "compare-llama-cpp: llama.cpp: the cached $path llama-bench (--llama prebuilt for node-llama-cpp's)" >&2
  elif [ "$path" = avx2 ]; then
    die "no avx2 llama-bench is cached: --llama avx2 builds it (tools/build-llama-cpp.sh --variant avx2)"
  else
    llama=prebuilt
    echo "compare-llama-cpp: llama.cpp: node-llama-cpp's prebuilt build; no native llama-bench is cached (--llama native builds one)" >&2
  fi
fi
case "$llama" in
  native|noamx|avx2)
    if ! llama_bench=$("${build_llama[@]}" --find --variant "$llama"); then
      echo "compare-llama-cpp: building the $llama llama-bench first (once; it is cached)" >&2
      llama_bench=$("${build_llama[@]}" --variant "$llama" -j "$jobs")
    fi
    [ "$llama" = "$path" ] || echo "compare-llama-cpp: note: gst-llm on the $path path, llama.cpp's $llama build" >&2
    ;;
  prebuilt)
    case "$n_prompt" in *,*) die "--llama prebuilt takes one -p" ;; esac
    [ "$depth" = 0 ] || die "--llama prebuilt takes no -d"
    [ "$path" = native ] || echo "compare-llama-cpp: note: the prebuilt llama.cpp picks its own instruction set, not AVX2 alone" >&2
    command -v npm >/dev/null || die "--llama prebuilt needs npm"
    ;;
  *) die "--llama wants native, noamx, avx2 or prebuilt" ;;
esac

# What is compared with what.
cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n1)
ours_kernels=$(env "${ours_env[@]}" "$bench" -m "${models[0]}" -p 0 -n 1 -r 1 -t "$threads" \
    --bandwidth-mib 0 --no-warmup 2>&1 | sed -n 's/^kernels: *//p' | head -n1)
info=$(mktemp)
results=$(mktemp)
errlog=$(mktemp)
lbout=$(mktemp)
node_tmp=
cleanup () { rm -f "$info" "$results" "$errlog" "$lbout"; [ -z "$node_tmp" ] || rm -rf "$node_tmp"; }
trap cleanup EXIT
{
  echo "CPU: ${cpu:-unknown} ($(nproc) CPUs), $threads threads"
  echo "gst-llm: $bench, kernels: ${ours_kernels:-?}${ours_env[*]:+ (${ours_env[*]})}"
  if [ "$llama" = prebuilt ]; then
    echo "llama.cpp: node-llama-cpp $NODE_LLAMA_CPP_VERSION prebuilt CPU build, via tools/llama-cpp-bench.mjs"
  else
    bi="$(dirname "$llama_bench")/build-info"
    echo "llama.cpp: $llama_bench"
    sed -n 's/^\(commit\|commit_date\|variant\|compiler\|cmake_flags\|ggml_cpu_arch_flags\|march_native_isa\)=/  \1: /p' "$bi"
    echo "  llama-bench -t $threads -d $depth -ngl 0 -ctk f16 -ctv f16 -b 2048 -ub 512 -fa $fa -r $reps"
  fi
} > "$info"
cat "$info" >&2

if [ "$llama" = prebuilt ]; then
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) platform_pkg=@node-llama-cpp/linux-x64 ;;
    Linux-aarch64) platform_pkg=@node-llama-cpp/linux-arm64 ;;
    *) die "no prebuilt llama.cpp CPU package for $(uname -sm)" ;;
  esac
  if [ -z "$node_dir" ]; then
    node_dir=$(mktemp -d)
    node_tmp=$node_dir
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
fi

# Other load. Two engines that keep both cores busy are only comparable when
# nothing else runs: on a shared machine another process taking a core for a
# few seconds can cut a run's figures to a fifth (llama.cpp's OpenMP threads
# suffer most). So each run waits until the machine is quiet, and the CPU
# time that went to other processes while it ran (all busy time in
# /proc/stat less this script's children's) is measured; a run where it
# passed --max-others percent of one CPU is thrown away and run again, up to
# --retries times.
quiet_name=compare-llama-cpp
# shellcheck source=tools/quiet-machine.sh
. "$here/quiet-machine.sh"
redone=0
loaded=0
quiet_run () {  # quiet_run LABEL CMD...: CMD appends JSON lines to $results
  local label=$1; shift
  local try=0 mark t0 t1 b0 b1 o0 o1 pct
  while :; do
    wait_quiet
    mark=$(wc -l < "$results")
    t0=$(date +%s%N); b0=$(cpu_busy); o0=$(own_ticks)
    "$@"
    t1=$(date +%s%N); b1=$(cpu_busy); o1=$(own_ticks)
    # Other processes' CPU time over the run's wall time, in % of one CPU.
    pct=$(( ((b1 - b0) - (o1 - o0)) * 100 * 1000000000 / ((t1 - t0) * hz + 1) ))
    [ "$pct" -ge 0 ] || pct=0
    { head -n "$mark" "$results"; tail -n +"$((mark + 1))" "$results" \
        | sed "s/^{/{\"others_cpu_pct\": $pct, /"; } > "$results.tmp"
    mv "$results.tmp" "$results"
    if [ "$max_others" = 0 ] || [ "$pct" -le "$max_others" ]; then
      return 0
    fi
    if [ "$try" -ge "$retries" ]; then
      echo "compare-llama-cpp: $label: other processes still took ${pct}% of a CPU; kept" >&2
      loaded=$((loaded + 1))
      return 0
    fi
    echo "compare-llama-cpp: $label: other processes took ${pct}% of a CPU; once more" >&2
    head -n "$mark" "$results" > "$results.tmp"
    mv "$results.tmp" "$results"
    try=$((try + 1))
    redone=$((redone + 1))
  done
}

ours () {  # ours ROUND ARGS...: one gst-llm-bench run, its JSON lines tagged
  local round=$1; shift
  env "${ours_env[@]}" "$bench" --json -t "$threads" -r "$reps" -d "$depth" "$@" \
    | sed "s/^{/{\"engine\": \"gst-llm\", \"round\": $round, /" >> "$results"
}
prebuilt () {  # prebuilt ROUND MODEL
  # One libuv worker: node's default four keep waking up beside ggml's
  # threads and, on a machine with few cores, cut llama.cpp's decode speed
  # to a third.
  (cd "$node_dir" && UV_THREADPOOL_SIZE=1 node llama-cpp-bench.mjs -m "$(realpath "$2")" \
      -t "$threads" -p "$n_prompt" -n "$n_gen" -r "$reps") \
    | sed "s/^{/{\"round\": $1, /" >> "$results"
}
theirs () {  # theirs ROUND MODEL
  # -p P,... -n N: llama-bench runs each ppP and tgN as a test of its own,
  # each after its own warm-up run.
  if ! "$llama_bench" -m "$2" -p "$n_prompt" -n "$n_gen" -d "$depth" -t "$threads" -r "$reps" \
      -ngl 0 -ctk f16 -ctv f16 -b 2048 -ub 512 -fa "$fa" -o jsonl > "$lbout" 2> "$errlog"; then
    tail -n 20 "$errlog" >&2
    die "llama-bench failed on $2"
  fi
  grep '^{' "$lbout" | sed "s/^{/{\"engine\": \"llama-bench\", \"round\": $1, /" >> "$results"
}

for round in $(seq 1 "$rounds"); do
  for m in "${models[@]}"; do
    b=$(basename "$m")
    echo "round $round/$rounds: $b" >&2
    if [ "$llama" = prebuilt ]; then
      quiet_run "$b gst-llm" ours "$round" -m "$m" -p "$n_prompt" -n "$n_gen"
      quiet_run "$b llama.cpp" prebuilt "$round" "$m"
    else
      [ "$n_prompt" = 0 ] || quiet_run "$b gst-llm pp" ours "$round" -m "$m" -p "$n_prompt" -n 0
      [ "$n_gen" = 0 ] || quiet_run "$b gst-llm tg" ours "$round" -m "$m" -p 0 -n "$n_gen"
      quiet_run "$b llama-bench" theirs "$round" "$m"
    fi
  done
done
if [ "$max_others" != 0 ]; then
  echo "other load: $redone runs redone, $loaded kept with other processes over ${max_others}% of a CPU" >> "$info"
fi
[ -z "$json_out" ] || cp "$results" "$json_out"

# Median over rounds per (model, test, engine), then one line per model and test.
node - "$results" "$info" "$threads" "$llama" <<'EOF'
const fs = require("fs");
const path = require("path");
const [file, infoFile, t, llama] = process.argv.slice(2);
const rows = fs.readFileSync(file, "utf8").split("\n").filter(Boolean).map(JSON.parse);
// Every result as {model, test, engine, ts, type, frac}.
const recs = [];
for (const r of rows) {
  if (r.engine === "gst-llm") {
    const model = r.model, type = r.type;
    const at = r.depth ? ` @ d${r.depth}` : "";
    const tgName = (r.n_prompt > 0 ? `tg${r.n_gen} after pp${r.n_prompt}` : `tg${r.n_gen}`) + at;
    if (r.pp_tokens_per_s != null)
      recs.push({ model, type, test: `pp${r.n_prompt}${at}`, engine: "gst-llm", ts: r.pp_tokens_per_s });
    if (r.tg_tokens_per_s != null)
      recs.push({ model, type, test: tgName, engine: "gst-llm", ts: r.tg_tokens_per_s,
        frac: r.depth ? r.bandwidth_fraction_with_kv : r.bandwidth_fraction });
  } else if (r.engine === "llama.cpp") {        // llama-cpp-bench.mjs (prebuilt)
    recs.push({ model: r.model, test: `pp${r.n_prompt}`, engine: "llama.cpp", ts: r.pp_tokens_per_s });
    recs.push({ model: r.model, test: `tg${r.n_gen} after pp${r.n_prompt}`, engine: "llama.cpp", ts: r.tg_tokens_per_s });
  } else if (r.engine === "llama-bench") {
    const test = r.n_prompt > 0 && r.n_gen === 0 ? `pp${r.n_prompt}`
      : r.n_prompt === 0 && r.n_gen > 0 ? `tg${r.n_gen}` : `pp${r.n_prompt}+tg${r.n_gen}`;
    recs.push({ model: path.basename(r.model_filename), test: r.n_depth ? `${test} @ d${r.n_depth}` : test,
                engine: "llama.cpp", ts: r.avg_ts, lb: r });
  }
}
const key = (r) => `${r.model}\t${r.test}`;
const by = new Map();
for (const r of recs) {
  if (!by.has(key(r))) by.set(key(r), { model: r.model, test: r.test, "gst-llm": [], "llama.cpp": [] });
  const e = by.get(key(r));
  e[r.engine].push(r);
  if (r.type) e.type = r.type;
}
const median = (v) => {
  if (!v.length) return NaN;
  const s = v.map(r => r.ts).sort((a, b) => a - b), h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
};
const fmt = (x) => Number.isFinite(x) ? (x >= 100 ? x.toFixed(1) : x.toFixed(2)) : "-";
const range = (v) => v.length > 1 ? ` (${fmt(Math.min(...v.map(r => r.ts)))}-${fmt(Math.max(...v.map(r => r.ts)))})` : "";
const lb = recs.find(r => r.lb)?.lb;
console.log("");
process.stdout.write(fs.readFileSync(infoFile, "utf8"));
if (lb)
  console.log(`  as llama-bench reports itself: build ${lb.build_commit} (${lb.build_number}), backends ${lb.backends}, ` +
              `cpu_info ${lb.cpu_info}, flash_attn ${lb.flash_attn}, type_k ${lb.type_k}, n_ubatch ${lb.n_ubatch}, poll ${lb.poll}`);
const nRounds = Math.max(0, ...[...by.values()].map(e => e["gst-llm"].length));
console.log(`\n${t} threads; t/s, median over ${nRounds} round${nRounds === 1 ? "" : "s"} (range); ratio = gst-llm / llama.cpp; ` +
            (llama === "prebuilt" ? "llama.cpp figures are its own timing of llama_decode." : "llama.cpp figures are llama-bench's avg_ts."));
console.log("| model | type | test | gst-llm t/s | llama.cpp t/s | ratio | gst-llm of ceiling |");
console.log("|---|---|---|--:|--:|--:|--:|");
for (const e of by.values()) {
  const g = e["gst-llm"], l = e["llama.cpp"];
  const fr = g.filter(r => r.frac != null);
  const frac = fr.length ? `${(100 * fr.reduce((s, r) => s + r.frac, 0) / fr.length).toFixed(1)}%` : "";
  console.log(`| ${e.model} | ${e.type ?? "-"} | ${e.test} | ${fmt(median(g))}${range(g)} | ${fmt(median(l))}${range(l)} ` +
              `| ${(median(g) / median(l)).toFixed(2)} | ${frac} |`);
}
EOF
