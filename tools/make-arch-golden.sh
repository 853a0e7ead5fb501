#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Regenerates the random qwen2/qwen3/BF16/Q4_1-Q5_0-Q5_1 test models and
# llama.cpp's golden outputs on them (tests/data/models/random-*.gguf,
# tests/data/golden/random-*__once.*), and ggml's own Q4_1/Q5_0/Q5_1
# quantizers and dot products (tests/data/golden/ggml-legacy-quants.*, by
# tools/make-quant-golden.py); see tests/data/golden/README.md.
#
#   tools/make-arch-golden.sh [BUILD_DIR]
#
# BUILD_DIR (default: build) must hold a built gst-llm-make-test-models.
# llama.cpp comes from the npm package node-llama-cpp, pinned below, with its
# prebuilt CPU libraries; it is installed into $GST_LLM_ORACLE (default
# /tmp/gst-llm-oracle) unless already there. Nothing of it enters the tree.
set -euo pipefail
cd "$(dirname "$0")/.."

version=3.21.1
build=${1:-build}
oracle=${GST_LLM_ORACLE:-/tmp/gst-llm-oracle}
models=(random-qwen2-f32 random-qwen3-f32 random-llama-bf16 random-llama-q5mix)

installed=$(node -p "require('$oracle/node_modules/node-llama-cpp/package.json').version" 2>/dev/null || true)
if [ "$installed" != "$version" ]; then
  mkdir -p "$oracle"
  npm install --prefix "$oracle" --no-audit --no-fund "node-llama-cpp@$version"
fi

# The models are deterministic: regenerating them changes no byte unless
# tools/make-arch-models.c changed.
"$build/tools/gst-llm-make-test-models" tests/data/models/stories260K.gguf tests/data/models
node tools/make-arch-golden.mjs "$oracle" tests/data/models tests/data/golden "${models[@]}"
python3 tools/make-quant-golden.py "$oracle" tests/data/golden
