#!/usr/bin/env bash
# Captions speech: CHUNK seconds of audio at a time go through an audio
# tower into a language model, and each answer becomes a caption timed as
# its chunk:
#   filesrc ! decodebin ! audioconvert ! audioresample ! llmaudioencode
#     ! llmprefill prompt=... ! llmdecode ! llmdetokenize mode=caption
#     ! webvttenc ! filesink
#
#   pipelines/caption-voice.sh [MEDIA [OUT.vtt]]
#
# MEDIA defaults to the bundled tests/data/media/jfk.wav (any file
# decodebin reads: WAV, MP3, AAC in MP4...); OUT to captions-voice.vtt.
#
# Environment:
#   MODEL, MMPROJ   a language model and its audio projector file (e.g.
#                   Ultravox's). Without them: the bundled TinyStories model
#                   and a random-weight Whisper-tiny tower with Ultravox's
#                   projector for its width (written once to
#                   ~/.cache/gst-llm), so it runs on a fresh machine; the
#                   captions then say nothing about the speech.
#   PROMPT          default "Transcribe the speech." with a MODEL, "The
#                   speaker says" without.
#   TEMPLATE        llmprefill prompt-template (e.g. auto for a chat model).
#   CHUNK, OVERLAP  seconds of audio per caption and shared with the one
#                   before (default 5 and 0).
#   SILENCE         chunks quieter than this many dBFS are not sent to the
#                   model (default -50; -200 sends everything).
#   PAD             pad every chunk to Whisper's 30 s window as llama.cpp
#                   does (true, the default with an MMPROJ: what the towers
#                   were trained on) or encode its own frames only (false,
#                   the default for the bundled tower: six times cheaper).
#   MAX_TOKENS      default 24.
#   VARIANT         file (default) or live: a live test signal captioned
#                   until Ctrl-C, WebVTT cues on stdout.
# Uses the plugin in $BUILD_DIR/plugins (default: build), or GST_PLUGIN_PATH.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
media=${1:-$top/tests/data/media/jfk.wav}
out=${2:-captions-voice.vtt}
build=${BUILD_DIR:-$top/build}
export GST_PLUGIN_PATH=${GST_PLUGIN_PATH:-$build/plugins}

if ! gst-inspect-1.0 llmaudioencode >/dev/null 2>&1; then
  echo "llmaudioencode not found in GST_PLUGIN_PATH=$GST_PLUGIN_PATH;" \
    "build first: meson setup build && meson compile -C build" >&2
  exit 1
fi

if [ -n "${MODEL:-}" ]; then
  model=$MODEL
  prompt=${PROMPT:-Transcribe the speech.}
else
  model=$top/tests/data/models/TinyStories-656K-Q8_0.gguf
  prompt=${PROMPT:-The speaker says}
fi
if [ -n "${MMPROJ:-}" ]; then
  mmproj=$MMPROJ
  pad=${PAD:-true}
else
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/gst-llm
  mkdir -p "$cache"
  mmproj=$cache/mmproj-whisper-tiny-ultravox-$(basename "$model" .gguf).gguf
  [ -f "$mmproj" ] || "$build/tools/gst-llm-make-mmproj" whisper-tiny-ultravox --lm "$model" \
    -o "$mmproj"
  pad=${PAD:-false}
fi

caption=(audioconvert ! audioresample
  ! llmaudioencode mmproj="$mmproj" chunk-duration="${CHUNK:-5}" overlap="${OVERLAP:-0}"
      silence-threshold="${SILENCE:--50}" pad-chunks="$pad"
  ! llmprefill model="$model" prompt="$prompt" ${TEMPLATE:+prompt-template="$TEMPLATE"}
  ! llmdecode max-tokens="${MAX_TOKENS:-24}"
  ! llmdetokenize model="$model" mode=caption ! webvttenc)

case "${VARIANT:-file}" in
  file)
    gst-launch-1.0 -q filesrc location="$media" ! decodebin ! "${caption[@]}" \
      ! filesink location="$out"
    echo "captions: $out" >&2
    ;;
  live)
    gst-launch-1.0 -q audiotestsrc is-live=true wave=pink-noise volume=0.3 \
      ! "${caption[@]}" ! fdsink fd=1 sync=false
    ;;
  *)
    echo "VARIANT must be file or live" >&2
    exit 2
    ;;
esac
