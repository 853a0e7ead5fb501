#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds gst-llm, and tells a story with
# the bundled TinyStories model through the GStreamer elements:
#   text -> llmtokenize -> llmprefill -> llmdecode -> llmdetokenize -> stdout
# and then the text round trip of a multilingual file through
# llmtokenize ! llmdetokenize. Arguments are passed to pipelines/story.sh
# (a prompt, default "Once upon a time").
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
