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
