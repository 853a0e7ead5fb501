#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds gst-llm, and tells a story with
# the bundled TinyStories model through the GStreamer elements:
#   text -> llmtokenize -> llmprefill -> llmdecode -> llmdetokenize -> stdout
# then the text round trip of a multilingual file through
# llmtokenize ! llmdetokenize, and captions of the bundled video and speech
# as WebVTT (random-weight encoders: the captions are well formed and
# timed, but say nothing about the media). Arguments are passed to
# pipelines/story.sh (a prompt, default "Once upon a time").
set -euo pipefail
cd "$(dirname "$0")"
./tools/install-deps.sh

[ -f build/build.ninja ] || meson setup build >/dev/null
meson compile -C build >/dev/null

echo "== story (stories260K, greedy; llm-stats below)"
STATS=1 MAX_TOKENS=128 pipelines/story.sh "$@"
echo
echo "== round trip of tests/data/multilingual.txt through llmtokenize ! llmdetokenize"
pipelines/roundtrip.sh
echo
echo "== captions of tests/data/media/test-3.mp4, one frame every 2 s (pipelines/caption-video.sh)"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
pipelines/caption-video.sh tests/data/media/test-3.mp4 "$out/video.vtt" 2>/dev/null
cat "$out/video.vtt"
echo
echo "== captions of tests/data/media/jfk.wav, 5 s chunks (pipelines/caption-voice.sh)"
pipelines/caption-voice.sh tests/data/media/jfk.wav "$out/voice.vtt" 2>/dev/null
cat "$out/voice.vtt"
