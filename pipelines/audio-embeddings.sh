#!/usr/bin/env bash
# Speech to audio embeddings: an audio file (default tests/data/media/
# jfk.wav) through
#   decodebin ! audioconvert ! llmaudioencode ! fakesink
# printing each embedding buffer's time and size as it comes (fakesink's
# handoffs), one buffer per chunk of CHUNK seconds.
#
#   pipelines/audio-embeddings.sh [AUDIO_FILE]
#
# Environment: MMPROJ (an mmproj file with an audio tower; default a
# Whisper-tiny-sized Ultravox tower with random weights, written by
# gst-llm-make-mmproj to a temporary file, as no real weights can be had
# here), CHUNK (default 5), OVERLAP (default 0), THRESHOLD (the silence
# gate in dBFS; default -200, none). Uses the plugin in $BUILD_DIR/plugins
# (default: build), or GST_PLUGIN_PATH if set.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
audio=${1:-$top/tests/data/media/jfk.wav}
export GST_PLUGIN_PATH=${GST_PLUGIN_PATH:-$build/plugins}

if ! gst-inspect-1.0 llmaudioencode >/dev/null 2>&1; then
  echo "llmaudioencode not found in GST_PLUGIN_PATH=$GST_PLUGIN_PATH;" \
    "build first: meson setup build && meson compile -C build" >&2
  exit 1
fi

mmproj=${MMPROJ:-}
if [ -z "$mmproj" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mmproj=$tmp/mmproj-whisper-tiny-ultravox.gguf
  "$build/tools/gst-llm-make-mmproj" whisper-tiny-ultravox --n-out 576 -o "$mmproj"
fi

# -v prints fakesink's last-message for each buffer.
gst-launch-1.0 -v filesrc location="$audio" ! decodebin ! audioconvert \
  ! llmaudioencode mmproj="$mmproj" chunk-duration="${CHUNK:-5}" overlap="${OVERLAP:-0}" \
      silence-threshold="${THRESHOLD:--200}" \
  ! fakesink silent=false 2>&1 \
  | sed -n 's/.*chain.*(\([0-9]*\) bytes, dts: [^,]*, pts: \([0-9:.]*\), duration: \([0-9:.]*\).*/embeddings at \2 for \3: \1 bytes/p'
