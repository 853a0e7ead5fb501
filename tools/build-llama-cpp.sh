#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Builds llama.cpp's own llama-bench natively, for tools/compare-llama-cpp.sh
# to measure gst-llm against the strongest llama.cpp this machine can run.
#
# llama.cpp is not part of this tree and none of its code is copied into it.
# The npm package node-llama-cpp ships llama.cpp's full source as a git
# bundle (llama/gitRelease.bundle); this script fetches that package with
# `npm pack` (a tarball, no install, no scripts), clones the bundle and
# builds the llama-bench target alone (no server, no examples, no tests, no
# HTTPS or CURL) with CMake, Release, static libraries, in a cache directory
# outside the tree:
#
#   ${LLAMA_CPP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gst-llm/llama.cpp}/<commit>-<variant>/
#       llama-bench     the binary (static: it needs nothing else there)
#       build-info      commit, variant, compiler, cmake flags, build time
#       build/          the CMake build tree
#
# It builds once: when the directory holds llama-bench and build-info, a
# second call only prints its path. The path of llama-bench is the one line
# printed on stdout; everything else goes to stderr.
#
#   tools/build-llama-cpp.sh [--variant native|noamx|avx2] [-j JOBS] [--cache DIR]
#       [--find] [--rebuild] [--speculative] [--mtmd]
#
#   --variant native  -DGGML_NATIVE=ON: -march=native, every extension this
#                     CPU has (AVX-512, VNNI, BF16 where present). Default.
#   --variant noamx   -DGGML_NATIVE=OFF with every AVX-512 option this
#                     project's kernels use (F, BW, DQ, VL, VBMI, VNNI, BF16)
#                     and AVX-VNNI on, AMX off: the strongest llama.cpp that
#                     runs on a Xeon whose AMX code crashes (the bundled
#                     llama.cpp segfaults in ggml_backend_amx_mul_mat on
#                     every Q4_0, Q8_0 and Q4_K_M model on the KVM Xeon of
#                     2026-12-06, llama.cpp issue 20824)
#   --variant avx2    -DGGML_NATIVE=OFF with SSE4.2, AVX, AVX2, FMA, F16C and
#                     BMI2 on and AVX-VNNI, every AVX-512 and AMX option off:
#                     what an AVX2-only CPU such as Zen 3 runs. Compare it with
#                     gst-llm under LLM_NO_AVX512=1 LLM_NO_AVX_VNNI=1.
#   -j JOBS           parallel compile jobs (default 2)
#   --cache DIR       the cache root instead of the one above
#   --find            build nothing: print the path if that build is cached,
#                     else exit 1 (compare-llama-cpp.sh uses this)
#   --rebuild         configure and build again even if cached (incremental
#                     on the kept build/; remove the directory for a clean one)
#   --speculative     also build llama.cpp's speculative-decoding examples,
#                     llama-speculative and llama-speculative-simple, next to
#                     llama-bench (examples on in the configure), for the
#                     comparisons of gst-llm-bench --spec
#   --mtmd            also build llama.cpp's multimodal library and its
#                     llama-mtmd-cli next to llama-bench, the reference the
#                     encoders' golden data comes from
#
# Everything else llama.cpp's CMake decides is left at its default
# (GGML_CPU_REPACK, GGML_LLAMAFILE and GGML_OPENMP on). CC and CXX choose the
# compilers (default gcc, g++). Needs cmake, g++, git, npm and node (Debian
# packages: cmake, g++, git, npm, nodejs); ninja (ninja-build) is used when
# present, make otherwise.
set -euo pipefail

NODE_LLAMA_CPP_VERSION=3.21.1

variant=native
jobs=2
root=${LLAMA_CPP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gst-llm/llama.cpp}
find_only=0
rebuild=0
speculative=0
mtmd=0

usage () {
  sed -n '/^#   tools\/build-llama-cpp/,/^# present/p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}
die () { echo "build-llama-cpp: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --variant) variant=$2; shift 2 ;;
    --variant=*) variant=${1#*=}; shift ;;
    -j) jobs=$2; shift 2 ;;
    -j*) jobs=${1#-j}; shift ;;
    --cache) root=$2; shift 2 ;;
    --find) find_only=1; shift ;;
    --rebuild) rebuild=1; shift ;;
    --speculative) speculative=1; shift ;;
    --mtmd) mtmd=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "build-llama-cpp: unknown argument $1" >&2; usage 2 ;;
  esac
done

common_flags=(
  -DCMAKE_BUILD_TYPE=Release
  -DBUILD_SHARED_LIBS=OFF
  -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF
  -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF
  -DGGML_CCACHE=OFF -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
)
case "$variant" in
  native)
    variant_flags=(-DGGML_NATIVE=ON) ;;
  avx2)
    variant_flags=(
      -DGGML_NATIVE=OFF
      -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
      -DGGML_AVX_VNNI=OFF
      -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF
      -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
    ) ;;
  noamx)
    variant_flags=(
      -DGGML_NATIVE=OFF
      -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
      -DGGML_AVX_VNNI=ON
      -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON
      -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
    ) ;;
  *) die "unknown variant '$variant' (native, noamx or avx2)" ;;
esac

# The commit of the bundle that node-llama-cpp $NODE_LLAMA_CPP_VERSION ships,
# recorded by the first call, so that a later one finds the build without
# fetching anything.
commit_file="$root/node-llama-cpp-$NODE_LLAMA_CPP_VERSION.commit"
cached_path () {
  [ -f "$commit_file" ] || return 1
  local c d
  c=$(cat "$commit_file")
  d="$root/$c-$variant"
  [ -x "$d/llama-bench" ] && [ -f "$d/build-info" ] || return 1
  [ "$speculative" = 0 ] || [ -x "$d/llama-speculative-simple" ] || return 1
  [ "$mtmd" = 0 ] || [ -x "$d/llama-mtmd-cli" ] || return 1
  echo "$d/llama-bench"
}

if [ "$rebuild" = 0 ] && path=$(cached_path); then
  echo "$path"
  exit 0
fi
[ "$find_only" = 0 ] || exit 1

cc=${CC:-gcc}
cxx=${CXX:-g++}
missing=()
for tool in cmake git npm node tar flock "$cc" "$cxx"; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] || die "missing: ${missing[*]} (Debian: apt-get install cmake g++ git npm nodejs)"
case "$jobs" in ''|*[!0-9]*) die "-j wants a number, not '$jobs'" ;; esac

mkdir -p "$root"
# One build at a time per cache (two compare runs starting together).
exec 9>"$root/.lock"
flock 9

src="$root/src-node-llama-cpp-$NODE_LLAMA_CPP_VERSION"
if [ ! -d "$src/.git" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "build-llama-cpp: fetching node-llama-cpp@$NODE_LLAMA_CPP_VERSION with npm pack" >&2
  # A registry tarball: npm pack neither installs it nor runs its scripts.
  (cd "$tmp" && npm pack --ignore-scripts --silent "node-llama-cpp@$NODE_LLAMA_CPP_VERSION" >/dev/null) \
    || die "npm pack node-llama-cpp@$NODE_LLAMA_CPP_VERSION failed"
  tar -xzf "$tmp/node-llama-cpp-$NODE_LLAMA_CPP_VERSION.tgz" -C "$tmp" \
      package/llama/gitRelease.bundle package/llama/llama.cpp.info.json \
    || die "the package holds no llama/gitRelease.bundle"
  git bundle verify -q "$tmp/package/llama/gitRelease.bundle" >&2 \
    || die "llama/gitRelease.bundle does not verify"
  rm -rf "$src.tmp"
  git -c advice.detachedHead=false clone -q "$tmp/package/llama/gitRelease.bundle" "$src.tmp"
  cp "$tmp/package/llama/llama.cpp.info.json" "$src.tmp/.node-llama-cpp-info.json"
  mv "$src.tmp" "$src"
  rm -rf "$tmp"
  trap - EXIT
fi
commit=$(git -C "$src" rev-parse HEAD)
commit_date=$(git -C "$src" log -1 --format=%cI HEAD)
echo "$commit" > "$commit_file"

dir="$root/$commit-$variant"
if [ "$rebuild" = 0 ] && path=$(cached_path); then
  echo "$path"
  exit 0
fi
# A rebuild on a kept tree keeps the first build's time.
first_seconds=
[ ! -f "$dir/build-info" ] || first_seconds=$(sed -n 's/^build_seconds=\([0-9]*\).*/\1/p' "$dir/build-info")
rm -f "$dir/llama-bench" "$dir/build-info"
mkdir -p "$dir"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
flags=("${common_flags[@]}" "${variant_flags[@]}")
targets=(llama-bench)
if [ "$speculative" = 1 ]; then
  flags+=(-DLLAMA_BUILD_EXAMPLES=ON)
  targets+=(llama-speculative llama-speculative-simple)
fi
[ "$mtmd" = 0 ] || targets+=(llama-mtmd-cli)
compiler="$("$cxx" --version | head -n1)"
echo "build-llama-cpp: llama.cpp $commit ($commit_date), node-llama-cpp $NODE_LLAMA_CPP_VERSION" >&2
echo "build-llama-cpp: variant $variant, compiler $compiler, $jobs jobs" >&2
echo "build-llama-cpp: cmake flags: ${flags[*]}" >&2

fresh=1
[ ! -d "$dir/build" ] || fresh=0
t0=$(date +%s)
cmake -S "$src" -B "$dir/build" "${generator[@]}" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" "${flags[@]}" \
    > "$dir/cmake-configure.log" 2>&1 \
  || { tail -n 30 "$dir/cmake-configure.log" >&2; die "cmake configure failed (log: $dir/cmake-configure.log)"; }
cmake --build "$dir/build" --target "${targets[@]}" -j "$jobs" > "$dir/cmake-build.log" 2>&1 \
  || { tail -n 30 "$dir/cmake-build.log" >&2; die "build failed (log: $dir/cmake-build.log)"; }
t1=$(date +%s)

# The instruction-set flags ggml-cpu was really compiled with.
arch_flags=$(node -e '
  const cc = require(process.argv[1]);
  const e = cc.find(c => /ggml-cpu[\/]ggml-cpu\.c$/.test(c.file));
  const f = e ? (e.command ?? e.arguments.join(" ")).split(/\s+/) : [];
  console.log([...new Set(f.filter(x => /^-m(arch|tune)=|^-m(sse|avx|fma|f16c|bmi|amx)/.test(x)))].join(" "));
' "$dir/build/compile_commands.json" 2>/dev/null || true)
# What -march=native stands for on this CPU (the native variant).
native_isa=$(echo | "$cc" -march=native -dM -E - 2>/dev/null \
    | grep -oE '__(AVX[A-Z0-9_]*|FMA|F16C|BMI2|AMX[A-Z0-9_]*)__' | sort -u | tr -d _ | tr '\n' ' ' || true)

for t in "${targets[@]}"; do
  cp "$dir/build/bin/$t" "$dir/$t.tmp"
  mv "$dir/$t.tmp" "$dir/$t"
done
{
  echo "commit=$commit"
  echo "commit_date=$commit_date"
  echo "source=node-llama-cpp@$NODE_LLAMA_CPP_VERSION llama/gitRelease.bundle"
  echo "variant=$variant"
  echo "compiler=$compiler"
  echo "cmake_flags=${flags[*]}"
  echo "ggml_cpu_arch_flags=${arch_flags% }"
  [ "$variant" != native ] || echo "march_native_isa=${native_isa% }"
  echo "cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n1)"
  if [ "$fresh" = 1 ]; then
    echo "build_seconds=$((t1 - t0))"
  else
    echo "build_seconds=${first_seconds:-?} (the first build; this rebuild on the kept tree: $((t1 - t0)))"
  fi
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$dir/build-info.tmp"
mv "$dir/build-info.tmp" "$dir/build-info"
sed 's/^/build-llama-cpp: /' "$dir/build-info" >&2
echo "$dir/llama-bench"
