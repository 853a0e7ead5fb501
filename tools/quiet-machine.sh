# SPDX-License-Identifier: LGPL-2.1-or-later
# Sourced by the comparison scripts: how busy the rest of the machine is.
# Two engines that keep both cores busy are only comparable when nothing
# else runs: on a shared machine another process taking a core for a few
# seconds can cut a run's figures to a fifth. The script sets max_others
# (percent of one CPU others may take; 0: do not wait), idle_wait (the
# longest wait, seconds) and quiet_name (its name, for messages).
hz=$(getconf CLK_TCK)
cpu_busy () {  # busy ticks of all CPUs: user nice system irq softirq
  local _c u n s _i _w q sq _r
  read -r _c u n s _i _w q sq _r < /proc/stat
  echo $((u + n + s + q + sq))
}
own_ticks () {  # this script's and its reaped children's ticks
  local f
  f=$(cat "/proc/$$/stat")
  f=${f##*) }
  # shellcheck disable=SC2086
  set -- $f
  echo $((${12} + ${13} + ${14} + ${15}))
}
wait_quiet () {  # until others use under max_others % for 2 s in a row
  [ "$max_others" != 0 ] || return 0
  local waited=0 quiet=0 b0 b1
  while [ "$quiet" -lt 2 ]; do
    b0=$(cpu_busy); sleep 1; b1=$(cpu_busy)
    if [ $((100 * (b1 - b0))) -le $((max_others * hz)) ]; then quiet=$((quiet + 1)); else quiet=0; fi
    waited=$((waited + 1))
    if [ "$waited" -ge "$idle_wait" ]; then
      echo "$quiet_name: the machine was not quiet within ${idle_wait}s; measuring anyway" >&2
      return 0
    fi
  done
  [ "$waited" -le 2 ] || echo "$quiet_name: waited ${waited}s for other load to end" >&2
}

# For the encoder comparisons (compare-vision-llama-cpp.sh,
# compare-audio-llama-cpp.sh), which also set tmp, retries, rounds and
# threads, and define ours and theirs (THREADS: "seconds S" lines, and
# "backend B" or "flash F").
# run WHO THREADS CMD...: CMD prints "seconds S" lines; they go to
# $tmp/results with what others took meanwhile, rerun while that is over
# the limit (at most $retries times).
run () {
  local who=$1 t=$2; shift 2
  local try=0 t0 t1 b0 b1 o0 o1 pct
  while :; do
    wait_quiet
    t0=$(date +%s%N); b0=$(cpu_busy); o0=$(own_ticks)
    "$@" > "$tmp/run.out"
    t1=$(date +%s%N); b1=$(cpu_busy); o1=$(own_ticks)
    pct=$(( ((b1 - b0) - (o1 - o0)) * 100 * 1000000000 / ((t1 - t0) * hz + 1) ))
    [ "$pct" -ge 0 ] || pct=0
    if [ "$max_others" = 0 ] || [ "$pct" -le "$max_others" ] || [ "$try" -ge "$retries" ]; then
      sed -n "s/^seconds \([0-9.]*\).*/$who $t \1 $pct/p" "$tmp/run.out" >> "$tmp/results"
      return 0
    fi
    echo "$quiet_name: $who, $t threads: others took ${pct}% of a CPU; once more" >&2
    try=$((try + 1))
  done
}
# Ours, theirs, ours, ... for every thread count, $rounds rounds; what
# the last runs said of our backend and their flash attention goes to
# $tmp/backend and $tmp/flash.
interleave_rounds () {
  local r t
  for r in $(seq 1 "$rounds"); do
    for t in ${threads//,/ }; do
      run ours "$t" ours "$t"
      grep '^backend' "$tmp/run.out" > "$tmp/backend" || true
      run llama.cpp "$t" theirs "$t"
      grep '^flash' "$tmp/run.out" > "$tmp/flash" || true
    done
    echo "round $r of $rounds done" >&2
  done
}
