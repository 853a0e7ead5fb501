#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Builds one of gst-llm's small C++ programs that call llama.cpp's mtmd
# (tools/mtmd-embed.cpp, tools/mtmd-time.cpp) against llama.cpp's static
# libraries, beside the cached build of tools/build-llama-cpp.sh --mtmd
# (outside the tree; built first if missing), and prints the binary's path.
# Rebuilt only when the source is newer than the binary.
#
#   tools/build-mtmd-program.sh SOURCE.cpp [build-llama-cpp.sh options]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 SOURCE.cpp [build-llama-cpp.sh options]" >&2; exit 2; }
cpp=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
bench=$("$top/tools/build-llama-cpp.sh" --mtmd "$@")
dir=$(dirname "$bench")
src=$(ls -d "$dir"/../src-node-llama-cpp-* | head -n1)
bin=$dir/$(basename "$cpp" .cpp)
if [ ! -x "$bin" ] || [ "$cpp" -nt "$bin" ]; then
  g++ -O2 -std=c++17 -I"$src/tools/mtmd" -I"$src/include" -I"$src/ggml/include" \
      "$cpp" -o "$bin" \
      "$dir/build/tools/mtmd/libmtmd.a" "$dir/build/src/libllama.a" \
      "$dir/build/ggml/src/libggml.a" "$dir/build/ggml/src/libggml-cpu.a" \
      "$dir/build/ggml/src/libggml-base.a" -fopenmp -lpthread -ldl >&2
fi
echo "$bin"
