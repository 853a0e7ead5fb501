#!/usr/bin/env bash
# Tells a story with the bundled TinyStories model (stories260K): the
# prompt goes through llmtokenize ! llmprefill ! llmdecode ! llmdetokenize
# and the continuation is printed token by token as it is generated.
#
#   pipelines/story.sh ["PROMPT"]
#
# PROMPT defaults to "Once upon a time"; it is sent without a trailing
# newline (a newline would be part of the prompt and change the story).
# Environment: MODEL (default tests/data/models/stories260K.gguf),
# MAX_TOKENS (default 256), TEMPERATURE (default 0: greedy, the same story
# every time; try 0.8), STATS=1 to print llmdecode's llm-stats message
# (TTFT, inter-token latency, tokens/s) after the story. Uses the plugin in
# $BUILD_DIR/plugins (default: build), or GST_PLUGIN_PATH if set.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
prompt=${1:-Once upon a time}
model=${MODEL:-$top/tests/data/models/stories260K.gguf}
export GST_PLUGIN_PATH=${GST_PLUGIN_PATH:-${BUILD_DIR:-$top/build}/plugins}

if ! gst-inspect-1.0 llmdecode >/dev/null 2>&1; then
  echo "llmdecode not found in GST_PLUGIN_PATH=$GST_PLUGIN_PATH;" \
    "build first: meson setup build && meson compile -C build" >&2
  exit 1
fi

story() {
  # fdsink sync=false: each piece of text is printed the moment it is
  # made, not at its PTS. $1: where the text goes (1 stdout, 2 stderr).
  printf '%s' "$prompt" | gst-launch-1.0 "${flags[@]}" fdsrc fd=0 \
    ! llmtokenize model="$model" \
    ! llmprefill model="$model" \
    ! llmdecode max-tokens="${MAX_TOKENS:-256}" temperature="${TEMPERATURE:-0}" \
    ! llmdetokenize model="$model" \
    ! fdsink fd="$1" sync=false
}

printf '%s' "$prompt"
if [ "${STATS:-0}" = 1 ]; then
  # gst-launch -m prints bus messages on stdout: the story goes to stderr
  flags=(-m)
  story 2 | sed -n 's/.*(element): \(llm-stats.*\)/\n\n\1/p'
else
  flags=(-q)
  story 1
fi
echo
