#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Where gst-llm's time goes, by stage of the forward pass: runs
# gst-llm-bench under perf with DWARF call graphs and charges each sample
# to the first frame, from the innermost out, that belongs to a known
# stage. A worker spinning or sleeping between parallel steps counts as
# "threads: waiting", so load imbalance and fork-join cost show up too.
#
#   tools/bench-profile.sh [-b BUILD_DIR] [-F HZ] -- GST-LLM-BENCH-ARGS...
#
# e.g. decode only:   tools/bench-profile.sh -- -m m.gguf -p 0 -n 128 -r 2 -t 2
#      prompt only:   tools/bench-profile.sh -- -m m.gguf -p 512 -n 0 -r 2 -t 2
# (--bandwidth-mib 0 is added so the bandwidth test is not profiled.)
# Needs perf (Debian: linux-perf) and perf_event_paranoid <= 2.
set -euo pipefail

build=build
freq=1000
while [ $# -gt 0 ]; do
  case "$1" in
    -b) build=$2; shift 2 ;;
    -F) freq=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '/^#   tools/,/^# Needs/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "bench-profile: give gst-llm-bench arguments after --" >&2; exit 2; }
bench="$build/tools/gst-llm-bench"
[ -x "$bench" ] || { echo "bench-profile: $bench not found (-b BUILD_DIR)" >&2; exit 1; }

data=$(mktemp)
trap 'rm -f "$data"' EXIT
perf record -q -o "$data" -F "$freq" --call-graph dwarf,16384 -- \
    "$bench" --bandwidth-mib 0 "$@" >&2
perf script -i "$data" -F comm,ip,sym 2>/dev/null | awk '
  # Stages, tried in this order on each frame (innermost first).
  function stage(sym) {
    if (sym ~ /^(llm_kv_cache_write|llm_attn_row_store)/) return "KV cache write";
    if (sym ~ /^(llm_attn_|llm_attention_head|llm_kv_cache_attend|attention_task)/)
      return "attention (scores, softmax, V)";
    if (sym ~ /^(llm_quantize_row_q8_K|llm_quantize_row_q8_0_act|llm_matmul_convert|convert_)/)
      return "matmul: activation conversion";
    if (sym ~ /^(dot_|dot4_|llm_vec_dot_|llm_matvec|llm_matmul|matmul_task)/)
      return "matmul: weight x activation";
    if (sym ~ /^(llm_rmsnorm|llm_rope|llm_swiglu|llm_add|llm_softmax|rmsnorm_rows|rope_rows|add_bias|head_norm|read_row|llm_dequantize_row)/)
      return "norm, rope, swiglu, add, embedding";
    if (sym ~ /^(worker_main|llm_threadpool_run|__sched_yield|sched_yield|pthread_cond_wait|futex)/)
      return "threads: waiting";
    if (sym ~ /^argmax$/) return "bench: argmax";
    if (sym ~ /^(llm_model_|load_path|llm_vocab|llm_tokenizer|llm_gguf_)/) return "model loading";
    return "";
  }
  /^[^ \t]/ { flush(); in_sample = 1; got = ""; next }
  /^[ \t]*$/ { flush(); next }
  {
    if (got != "") next;
    s = stage($2);
    if (s != "") got = s;
  }
  function flush() {
    if (!in_sample) return;
    total++;
    key = got == "" ? "other (kernel, libc, unattributed)" : got;
    count[key]++;
    in_sample = 0;
  }
  END {
    flush();
    if (total == 0) { print "no samples" > "/dev/stderr"; exit 1 }
    printf "\n%-40s %8s %7s\n", "stage", "samples", "share";
    n = 0;
    for (k in count) order[++n] = k;
    # Largest first.
    for (i = 1; i <= n; i++)
      for (j = i + 1; j <= n; j++)
        if (count[order[j]] > count[order[i]]) { t = order[i]; order[i] = order[j]; order[j] = t }
    for (i = 1; i <= n; i++)
      printf "%-40s %8d %6.1f%%\n", order[i], count[order[i]], 100 * count[order[i]] / total;
  }'
