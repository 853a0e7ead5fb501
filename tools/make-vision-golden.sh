#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Records llama.cpp's embeddings of tests/data/media/test-1.jpeg through the
# real-width random towers test-vision-golden writes, as the summaries
# tests/data/golden/vision-NAME.f32 and the pixels' fingerprints
# tests/data/golden/vision-pixels.txt (golden/README.md says what is in
# them).
#
#   tools/make-vision-golden.sh [--full] [BUILD_DIR]
#
# test-vision-golden writes each case's mmproj file and the decoded,
# resized, normalised image (LLM_TEST_VISION_OUT); tools/mtmd-embed.cpp,
# built against llama.cpp's mtmd (tools/build-mtmd-program.sh), encodes
# them with flash attention off, and the first 8 and the last row and
# every row's mean and L2 norm are kept. --full adds the full-depth cases
# (0.8 GB of files written and read; a few minutes on 2 cores).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
full=0
if [ "${1:-}" = "--full" ]; then full=1; shift; fi
build=${1:-$top/build}
embed=$("$top/tools/build-mtmd-program.sh" "$top/tools/mtmd-embed.cpp")
dir=$(dirname "$embed")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [ $full = 1 ]; then export LLM_TEST_VISION_FULL=1; fi
LLM_TEST_VISION_OUT=$out "$build/tests/test-vision-golden" >/dev/null
golden=$top/tests/data/golden
for gguf in "$out"/*.gguf; do
  name=$(basename "$gguf" .gguf)
  image=$out/$name.image.f32
  side=$(python3 -c "import math,os; print(math.isqrt(os.path.getsize('$image') // 12))")
  "$embed" "$gguf" "$image" "$side" "$out/$name.out.f32"
  rm -f "$gguf"
  python3 - "$out/$name.out.f32" "$golden/vision-$name.f32" 576 8 <<'PY'
import math, struct, sys
src, dst, n_out, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = open(src, 'rb').read()
n = len(data) // 4
assert n % n_out == 0
v = struct.unpack('<%df' % n, data)
tokens = n // n_out
row = lambda t: v[t * n_out:(t + 1) * n_out]
keep = [x for t in list(range(rows)) + [tokens - 1] for x in row(t)]
stats = []
for t in range(tokens):
    r = row(t)
    stats += [math.fsum(r) / n_out, math.sqrt(math.fsum(x * x for x in r))]
open(dst, 'wb').write(struct.pack('<%df' % (len(keep) + len(stats)), *keep, *stats))
PY
  echo "vision-$name.f32: $(( $(stat -c %s "$out/$name.out.f32") / 4 / 576 )) tokens"
done
cat "$out"/pixels-*.txt | sort -rn > "$golden/vision-pixels.txt"
echo "llama.cpp $(sed -n 's/^commit=//p' "$dir/build-info"): tests/data/golden/vision-*"
