/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the CPU kernels: how a product's rows are shared by
 * threads, for the SIMD drivers and the portable references alike. Rows
 * are claimed @step at a time from *@next (which starts at r0) when it is
 * not NULL, so several threads can share one product; with NULL the
 * caller takes all of [r0, r1). The caller sets *@ra = r0, *@rb = r1 and
 * *@first = true, then loops while this returns true over [*@ra, *@rb). */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

static inline bool
claim (atomic_size_t *next, size_t step, size_t r1, size_t *ra, size_t *rb, bool *first)
{
  if (next == NULL) {
    if (!*first)
      return false;
    *first = false;
    return *ra < r1;
  }
  size_t at = atomic_load_explicit (next, memory_order_relaxed);
  for (;;) {
    if (at >= r1)
      return false;
    size_t s = step;
    while (s % 32 == 0 && r1 - at < 4 * s)
      s /= 2;
    if (atomic_compare_exchange_weak_explicit (next, &at, at + s, memory_order_relaxed,
            memory_order_relaxed)) {
      step = s;
      break;
    }
  }
  *ra = at;
  *rb = *ra + step < r1 ? *ra + step : r1;
  return true;
}
