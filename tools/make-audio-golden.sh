#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Records llama.cpp's log-mel spectrogram and audio embeddings of the first
# 3 s of tests/data/media/jfk.wav through the random projector files
# test-audio-encoder writes, as tests/data/golden/audio-mel-jfk.f32 and
# audio-{ultravox,qwen2a}.f32, which test_mel_matches_llama_cpp_for_jfk and
# test_encoders_match_llama_cpp_for_jfk compare gst-llm's with.
#
#   tools/make-audio-golden.sh [BUILD_DIR]
#
# Builds llama.cpp's mtmd natively from the bundle in node-llama-cpp
# (tools/build-llama-cpp.sh --mtmd, cached outside the tree), then
# tools/mtmd-audio-embed.cpp against it, beside that build. test-audio-encoder
# writes the files and the decoded samples (LLM_TEST_AUDIO_OUT), so both
# sides read the same floats; mtmd-audio-embed runs mtmd's Whisper front end
# and encoder on them. Only the first frames and rows are kept: the files
# stay small and every row depends on the whole window anyway.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
bench=$("$top/tools/build-llama-cpp.sh" --mtmd)
dir=$(dirname "$bench")
src=$(ls -d "$dir"/../src-node-llama-cpp-* | head -n1)
embed=$dir/mtmd-audio-embed
g++ -O2 -std=c++17 -I"$src/tools/mtmd" -I"$src/include" -I"$src/ggml/include" \
    "$top/tools/mtmd-audio-embed.cpp" -o "$embed" \
    "$dir/build/tools/mtmd/libmtmd.a" "$dir/build/src/libllama.a" \
    "$dir/build/ggml/src/libggml.a" "$dir/build/ggml/src/libggml-cpu.a" \
    "$dir/build/ggml/src/libggml-base.a" -fopenmp -lpthread -ldl
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
LLM_TEST_AUDIO_OUT=$out "$build/tests/test-audio-encoder" >/dev/null
golden=$top/tests/data/golden
# 320 frames: the 300 of the audio and 20 of the silence after it.
for type in ultravox qwen2a; do
  "$embed" "$out/$type.gguf" "$out/pcm.f32" "$out/mel.f32" 320 "$golden/audio-$type.f32" 96
done
cp "$out/mel.f32" "$golden/audio-mel-jfk.f32"
echo "llama.cpp $(sed -n 's/^commit=//p' "$dir/build-info"):" \
  "tests/data/golden/audio-mel-jfk.f32, audio-{ultravox,qwen2a}.f32"
