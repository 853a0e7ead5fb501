/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Which instruction sets the CPU kernels may use, asked of the CPU once.
 * Everything that picks a kernel takes an LlmCpuKernels table (matmul.h)
 * built for one of these, so the choice is made when a backend is created
 * and never again per call. Pure C, no GLib. */
#pragma once

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  LLM_CPU_ISA_SCALAR,   /* the reference kernels, any CPU */
  LLM_CPU_ISA_AVX2,     /* AVX2, FMA and F16C (AVX-VNNI where present) */
  LLM_CPU_ISA_AVX512,   /* the AVX2 set plus AVX-512 F/BW/VL/DQ and VNNI */
} LlmCpuIsa;

#define LLM_CPU_N_ISA 3

/* Whether this CPU (and the OS's saving of its register state) runs the
 * kernels of @isa, and whether this build has them. */
bool llm_cpu_isa_supported (LlmCpuIsa isa);

/* The fastest supported one; LLM_NO_AVX512 in the environment keeps the
 * AVX2 kernels (to test and compare them on a CPU that has both). */
LlmCpuIsa llm_cpu_isa_best (void);

/* Whether the AVX2 kernels may use AVX-VNNI (VEX vpdpbusd/vpdpwssd:
 * CPUID leaf 7 subleaf 1, EAX bit 4; the OS saves YMM state, as AVX2
 * needs) and GFNI (leaf 7, ECX bit 8), asked once. LLM_NO_AVX_VNNI in the
 * environment answers false, so the plain AVX2 kernels (what a Zen 3
 * runs; same results) can be tested and measured on a newer CPU. */
bool llm_cpu_has_avx_vnni (void);
bool llm_cpu_has_gfni (void);

/* Whether the AVX-512 kernels may run products of many tokens on AMX
 * (AMX-TILE and AMX-INT8: CPUID leaf 7 EDX bits 24 and 25; the OS saves
 * tile state, XCR0 bits 17 and 18; and Linux granted this process the
 * tile data, arch_prctl ARCH_REQ_XCOMP_PERM), asked once. Only where
 * AVX-512 is supported and this build has the AMX kernels. LLM_NO_AMX in
 * the environment answers false, so the AVX-512 kernels alone (what a Zen
 * 4/5 or Ice Lake runs; same results) can be tested and measured on an
 * AMX CPU. */
bool llm_cpu_has_amx (void);

/* How many row tiles the F16/BF16 products of one token (a decode step)
 * read at once: 1, one stream, or 2, two streams and twice the FMA
 * chains. One row tile is one chain per 16 rows, 8 bytes of weights a
 * cycle: on Zen 4 about what DRAM gives one thread, and 246M F16 decode
 * ran 1.01-1.18x faster with one than with two; on Zen 5 one thread
 * reads faster than that, and two ran 1.08-1.19x faster (AVX-512, plain
 * AVX2 1.04-1.27x). On Zen 3 (plain AVX2, 2.9 GHz) two ran 1.13x faster
 * on two threads (9 of 10 pairs) and 1.17x on one (6 of 6), the two
 * taking turns. So 2 on AMD Zen 3 and family 26 (Zen 5) and later, 1
 * elsewhere (no other CPU measured). LLM_F16_ONE_TOKEN_TILES=1 or 2 in the
 * environment sets it (tests check both kernels on any CPU). Same results
 * either way: rows are summed apart. */
unsigned llm_cpu_f16_one_token_tiles (void);

/* Whether the AVX2 products of one token (a decode step) over the packed
 * Q4_0/Q5_0/Q8_0 layouts fetch their stream X16_PREFETCH_NEAR_BYTES (1
 * KiB) ahead rather than 8 KiB, as the AVX-512 ones do. On Zen 3 (AVX2
 * only) 1 KiB read 1.08-1.11x faster (x16-simd.h). On Zen 5 8 KiB was
 * faster on both AVX2 paths (decode, the two taking turns, 3-7 pairs
 * each): plain, 246M Q4_0 1.09-1.27x on two threads and 1.13-1.31x on
 * one, Q8_0 1.02-1.15x on two, 494M Q4_0 1.11-1.18x on two; AVX-VNNI,
 * 246M Q4_0 1.04-1.17x and Q8_0 1.02-1.19x on two. So false on AMD family
 * 26 and later (Zen 5), true elsewhere (no other CPU measured).
 * LLM_X16_ONE_TOKEN_AHEAD=near or far in the environment sets it. Same
 * results either way. */
bool llm_cpu_x16_one_token_near (void);

/* What LLM_X16_ONE_TOKEN_AHEAD in the environment says of those products
 * (AVX2 and AVX-512): "near" and "far" (llm_cpu_x16_one_token_near, for
 * AVX2), or "none": they fetch nothing ahead themselves, the hardware
 * prefetchers alone follow the stream. AUTO where it is unset (or
 * anything else): the CPU's distance, and the engine may take turns
 * between that and none (lib/fetch-choice.h). Same results every way. */
typedef enum {
  LLM_X16_AHEAD_AUTO,
  LLM_X16_AHEAD_NEAR,
  LLM_X16_AHEAD_FAR,
  LLM_X16_AHEAD_NONE,
} LlmX16Ahead;
LlmX16Ahead llm_cpu_x16_one_token_ahead (void);

/* "scalar", "avx2", "avx512". */
const char *llm_cpu_isa_name (LlmCpuIsa isa);

#ifdef __cplusplus
}
#endif
