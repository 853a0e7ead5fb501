#!/usr/bin/env bash
# Asks a chat model one question read from stdin and prints the answer as
# it is generated.
#
#   echo "Why is the sky blue?" | pipelines/chat.sh MODEL.gguf
#   pipelines/chat.sh MODEL.gguf            (type the question, then Ctrl-D)
#
# MODEL.gguf is any instruction-tuned GGUF gst-llm runs (llama, qwen2,
# qwen3; F32/F16/BF16/Q8_0/Q4_0 weights), for example Qwen2.5-0.5B-Instruct
# in Q8_0 from Hugging Face:
#   https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF
#   (file qwen2.5-0.5b-instruct-q8_0.gguf)
#
# The question is wrapped in the ChatML template Qwen models use
# (llmprefill's prompt-template and system-prompt, special tokens parsed);
# the answer ends at the model's <|im_end|>. Environment:
#   SYSTEM       system message (default "You are a helpful assistant.")
#   TEMPLATE     the user turn, {prompt} marking the question (default ChatML);
#   SYSTEM_TEMPLATE  the system turn, {system} marking SYSTEM (default ChatML);
#                set both for other chat formats, e.g. Llama 3's headers
#   MAX_TOKENS   default 512
#   TEMPERATURE  default 0.7 (0: greedy)
#   DEVICE       default cpu
#   STATS=1      print llmdecode's llm-stats message (TTFT, tokens/s) after
# Uses the plugin in $BUILD_DIR/plugins (default: build), or GST_PLUGIN_PATH.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ ! -f "$1" ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
model=$1
export GST_PLUGIN_PATH=${GST_PLUGIN_PATH:-${BUILD_DIR:-$top/build}/plugins}

if ! gst-inspect-1.0 llmdecode >/dev/null 2>&1; then
  echo "llmdecode not found in GST_PLUGIN_PATH=$GST_PLUGIN_PATH;" \
    "build first: meson setup build && meson compile -C build" >&2
  exit 1
fi

nl=$'\n'
system=${SYSTEM:-You are a helpful assistant.}
system_template=${SYSTEM_TEMPLATE:-"<|im_start|>system${nl}{system}<|im_end|>${nl}"}
template=${TEMPLATE:-"<|im_start|>user${nl}{prompt}<|im_end|>${nl}<|im_start|>assistant${nl}"}
system_prompt=${system_template//\{system\}/$system}

# The question, without the newline the terminal or echo put after it.
question=$(cat)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
printf '%s' "$question" > "$tmp"

# Property values go through gst-launch's parser: escape \ and " for it.
quote() { local s=${1//\\/\\\\}; printf '"%s"' "${s//\"/\\\"}"; }

chat() {
  # fdsink sync=false: print each piece of text the moment it is made.
  gst-launch-1.0 "${flags[@]}" filesrc location="$tmp" \
    ! llmtokenize model="$model" \
    ! llmprefill model="$model" device="${DEVICE:-cpu}" \
        system-prompt="$(quote "$system_prompt")" prompt-template="$(quote "$template")" \
    ! llmdecode max-tokens="${MAX_TOKENS:-512}" temperature="${TEMPERATURE:-0.7}" \
    ! llmdetokenize model="$model" \
    ! fdsink fd="$1" sync=false
}

if [ "${STATS:-0}" = 1 ]; then
  # gst-launch -m prints bus messages on stdout: the answer goes to stderr
  flags=(-m)
  chat 2 | sed -n 's/.*(element): \(llm-stats.*\)/\n\n\1/p'
else
  flags=(-q)
  chat 1
fi
echo
