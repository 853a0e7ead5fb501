#!/usr/bin/env bash
# The caption-like workload through speculative decoding: the captions of
# a scene so far (tools/spec-workloads/caption.txt) go through
#   llmtokenize ! llmprefill ! llmdraft method=ngram ! llmspecverify ! llmdetokenize
# and the next captions are printed as they are confirmed, then
# llmspecverify's llm-stats (drafts checked and accepted, tokens per
# verifying forward, tokens/s). The text is the one llmdecode gives.
#
#   pipelines/caption-spec.sh [PROMPT_FILE]
#
# Environment: MODEL (default tests/data/models/TinyStories-656K-Q8_0.gguf),
# MAX_TOKENS (default 96), BUDGET (dynamic or fixed; default dynamic),
# DRAFT_MAX (default 8), PLAIN=1 to run llmdecode instead for comparison.
# Uses the plugin in $BUILD_DIR/plugins (default: build), or
# GST_PLUGIN_PATH if set.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
prompt=${1:-$top/tools/spec-workloads/caption.txt}
model=${MODEL:-$top/tests/data/models/TinyStories-656K-Q8_0.gguf}
export GST_PLUGIN_PATH=${GST_PLUGIN_PATH:-${BUILD_DIR:-$top/build}/plugins}

if ! gst-inspect-1.0 llmspecverify >/dev/null 2>&1; then
  echo "llmspecverify not found in GST_PLUGIN_PATH=$GST_PLUGIN_PATH;" \
    "build first: meson setup build && meson compile -C build" >&2
  exit 1
fi

if [ "${PLAIN:-0}" = 1 ]; then
  decode=(llmdecode)
else
  decode=(llmdraft method=ngram ! llmspecverify budget="${BUDGET:-dynamic}"
    draft-max="${DRAFT_MAX:-8}")
fi

# gst-launch -m prints bus messages on stdout: the captions go to stderr.
gst-launch-1.0 -m filesrc location="$prompt" \
  ! llmtokenize model="$model" \
  ! llmprefill model="$model" \
  ! "${decode[@]}" max-tokens="${MAX_TOKENS:-96}" \
  ! llmdetokenize model="$model" \
  ! fdsink fd=2 sync=false \
  | sed -n 's/.*(element): \(llm-stats.*\)/\n\n\1/p' | sed -E 's/, ([a-z-]+=)/\n \1/g' \
  | grep -E 'llm-stats|generated-tokens|tokens-per-s|draft|accept|step-us' || true
echo
