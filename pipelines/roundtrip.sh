#!/usr/bin/env bash
# Text through `llmtokenize ! llmdetokenize`: prints the token ids on the
# way (teed off to a file, read with od) and the text that comes back, and
# says whether the round trip was byte-exact. filesrc reads 7 bytes at a
# time, so UTF-8 characters are split across buffers on purpose.
#
#   pipelines/roundtrip.sh [TEXT_FILE [MODEL.gguf]]
#
# Defaults: tests/data/multilingual.txt and the qwen2 vocabulary. Uses the
# plugin in $BUILD_DIR/plugins (default: build), or GST_PLUGIN_PATH if set.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
text=${1:-$top/tests/data/multilingual.txt}
model=${2:-$top/tests/data/vocab/ggml-vocab-qwen2.gguf}
export GST_PLUGIN_PATH=${GST_PLUGIN_PATH:-${BUILD_DIR:-$top/build}/plugins}

if ! gst-inspect-1.0 llmtokenize >/dev/null 2>&1; then
  echo "llmtokenize not found in GST_PLUGIN_PATH=$GST_PLUGIN_PATH;" \
    "build first: meson setup build && meson compile -C build" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

gst-launch-1.0 -q filesrc location="$text" blocksize=7 \
  ! llmtokenize model="$model" ! tee name=t \
  t. ! queue ! filesink location="$tmp/ids.bin" \
  t. ! queue ! llmdetokenize model="$model" ! filesink location="$tmp/text.txt"

echo "== $(( $(stat -c %s "$tmp/ids.bin") / 4 )) token ids from $(basename "$model")" \
  "(little-endian int32, as application/x-llm-tokens carries them)"
od -An -v -t d4 -w40 "$tmp/ids.bin"
echo "== text back"
cat "$tmp/text.txt"
[ -n "$(tail -c1 "$tmp/text.txt")" ] && echo
if cmp -s "$text" "$tmp/text.txt"; then
  echo "== byte-exact round trip"
else
  echo "== the text came back different" >&2
  exit 1
fi
