#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Records llama.cpp's embeddings of the random projector files test-mmproj
# writes, as tests/data/golden/mmproj-{mlp,idefics3}.f32, which
# test_encoders_match_llama_cpp compares gst-llm's encoders with.
#
#   tools/make-mmproj-golden.sh [BUILD_DIR]
#
# Builds llama.cpp's mtmd natively from the bundle in node-llama-cpp
# (tools/build-llama-cpp.sh --mtmd, cached outside the tree), then
# tools/mtmd-embed.cpp against it, beside that build
# (tools/build-mtmd-program.sh); test-mmproj writes
# the files and the normalised image (LLM_TEST_MMPROJ_OUT), and mtmd-embed
# encodes them. The same files load in llama.cpp unchanged, which is the
# check that their layout is llama.cpp's.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
embed=$("$top/tools/build-mtmd-program.sh" "$top/tools/mtmd-embed.cpp")
dir=$(dirname "$embed")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
LLM_TEST_MMPROJ_OUT=$out "$build/tests/test-mmproj" >/dev/null
for type in mlp idefics3; do
  "$embed" "$out/$type.gguf" "$out/image.f32" 32 "$top/tests/data/golden/mmproj-$type.f32"
done
echo "llama.cpp $(sed -n 's/^commit=//p' "$dir/build-info"): tests/data/golden/mmproj-{mlp,idefics3}.f32"
