#!/usr/bin/env bash
# Captions a video: one frame every INTERVAL seconds goes through a vision
# tower into a language model, and each answer becomes a caption timed as
# its frame:
#   filesrc ! decodebin ! llmvisionencode ! llmprefill prompt=... ! llmdecode
#     ! llmdetokenize mode=caption ! webvttenc ! filesink
#
#   pipelines/caption-video.sh [MEDIA [OUT]]
#
# MEDIA defaults to the bundled tests/data/media/test-3.mp4; OUT to
# captions.vtt (or captions.webm for VARIANT=overlay).
#
# Environment:
#   MODEL, MMPROJ   a language model and its projector (mmproj) file, e.g.
#                   SmolVLM-256M-Instruct-Q8_0.gguf and its mmproj. Without
#                   them: the bundled TinyStories model and a random-weight
#                   SigLIP tower for its width (written once to
#                   ~/.cache/gst-llm), so the pipeline runs on a fresh
#                   machine; the captions then say nothing about the video.
#   PROMPT          default "Describe this frame in one sentence." with a
#                   MODEL, "The picture shows" without.
#   TEMPLATE        llmprefill prompt-template (e.g. auto for a chat model).
#   INTERVAL        seconds between captioned frames (default 2).
#   MAX_TOKENS      words of a caption, roughly (default 24).
#   COMPRESS        llmtokencompress methods between the encoder and the
#                   model, e.g. temporal+merge (default none), keeping
#                   RATIO (default 0.5) of each frame's rows.
#   VARIANT         vtt (default): WebVTT file through webvttenc.
#                   overlay: the captions drawn on the video by textoverlay,
#                     written as VP8 in WebM.
#                   cea608: CEA-608 through tttocea608 where it is installed
#                     (gst-plugins-rs); GStreamer 1.22's own plugins have
#                     none (and no cea608mux), which the script says.
#                   live: a live test pattern captioned until Ctrl-C,
#                     WebVTT cues on stdout; late frames are dropped.
# Uses the plugin in $BUILD_DIR/plugins (default: build), or GST_PLUGIN_PATH.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
media=${1:-$top/tests/data/media/test-3.mp4}
variant=${VARIANT:-vtt}
default_out=captions.vtt
[ "$variant" = overlay ] && default_out=captions.webm
out=${2:-$default_out}
build=${BUILD_DIR:-$top/build}
export GST_PLUGIN_PATH=${GST_PLUGIN_PATH:-$build/plugins}

if ! gst-inspect-1.0 llmvisionencode >/dev/null 2>&1; then
  echo "llmvisionencode not found in GST_PLUGIN_PATH=$GST_PLUGIN_PATH;" \
    "build first: meson setup build && meson compile -C build" >&2
  exit 1
fi

if [ -n "${MODEL:-}" ]; then
  model=$MODEL
  prompt=${PROMPT:-Describe this frame in one sentence.}
else
  model=$top/tests/data/models/TinyStories-656K-Q8_0.gguf
  prompt=${PROMPT:-The picture shows}
fi
if [ -n "${MMPROJ:-}" ]; then
  mmproj=$MMPROJ
else
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/gst-llm
  mkdir -p "$cache"
  mmproj=$cache/mmproj-siglip-small-$(basename "$model" .gguf).gguf
  [ -f "$mmproj" ] || "$build/tools/gst-llm-make-mmproj" siglip-small --lm "$model" -o "$mmproj"
fi

compress=()
[ -n "${COMPRESS:-}" ] && compress=(! llmtokencompress method="$COMPRESS" ratio="${RATIO:-0.5}")
caption=(llmvisionencode mmproj="$mmproj" interval="${INTERVAL:-2}" "${compress[@]}"
  ! llmprefill model="$model" prompt="$prompt" ${TEMPLATE:+prompt-template="$TEMPLATE"}
  ! llmdecode max-tokens="${MAX_TOKENS:-24}"
  ! llmdetokenize model="$model" mode=caption)

case "$variant" in
  vtt)
    gst-launch-1.0 -q filesrc location="$media" ! decodebin ! "${caption[@]}" \
      ! webvttenc ! filesink location="$out"
    echo "captions: $out" >&2
    ;;
  overlay)
    # The video waits in its queue for the caption of its time.
    gst-launch-1.0 -q filesrc location="$media" ! decodebin ! tee name=t \
      t. ! queue max-size-buffers=0 max-size-bytes=0 max-size-time=0 ! videoconvert \
        ! textoverlay name=ov wait-text=false valignment=bottom ! videoconvert \
        ! vp8enc deadline=1 ! webmmux ! filesink location="$out" \
      t. ! queue ! "${caption[@]}" ! ov.text_sink
    echo "captioned video: $out" >&2
    ;;
  cea608)
    if ! gst-inspect-1.0 tttocea608 >/dev/null 2>&1; then
      echo "CEA-608 needs tttocea608 (gst-plugins-rs closedcaption), which this GStreamer" \
        "($(gst-launch-1.0 --version | sed -n 's/.*GStreamer \(.*\)/\1/p' | head -n1)) lacks;" \
        "its own plugins carry CEA-608 already in video (ccconverter, cccombiner," \
        "line21encoder) but cannot make it from text. The WebVTT and overlay variants work." >&2
      exit 2
    fi
    gst-launch-1.0 -q filesrc location="$media" ! decodebin ! "${caption[@]}" \
      ! tttocea608 ! ccconverter ! "closedcaption/x-cea-608,format=raw" \
      ! filesink location="$out"
    echo "CEA-608 byte pairs: $out" >&2
    ;;
  live)
    gst-launch-1.0 -q videotestsrc is-live=true pattern=ball ! video/x-raw,width=1280,height=720,framerate=30/1 \
      ! queue leaky=downstream max-size-buffers=2 ! "${caption[@]}" ! webvttenc ! fdsink fd=1 sync=false
    ;;
  *)
    echo "VARIANT must be vtt, overlay, cea608 or live" >&2
    exit 2
    ;;
esac
