/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cpuid, not __builtin_cpu_supports: clang does not know "f16c" there. */
#include "isa.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(LLM_HAVE_AMX) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(LLM_HAVE_AVX2)
#include <cpuid.h>

/* AVX needs the OS to save YMM state too (XCR0 bits 1 and 2). */
static bool
detect_avx2_fma_f16c (void)
{
  unsigned a, b, c, d;
  if (!__get_cpuid (1, &a, &b, &c, &d))
    return false;
  const unsigned need1 = bit_FMA | bit_OSXSAVE | bit_AVX | bit_F16C;
  if ((c & need1) != need1)
    return false;
  unsigned xcr0_lo, xcr0_hi;
  __asm__ ("xgetbv" : "=a" (xcr0_lo), "=d" (xcr0_hi) : "c" (0));
  if ((xcr0_lo & 6) != 6)
    return false;
  if (__get_cpuid_max (0, NULL) < 7)
    return false;
  __cpuid_count (7, 0, a, b, c, d);
  return (b & bit_AVX2) != 0;
}
#endif

#if defined(LLM_HAVE_AVX512)
/* The opmask and ZMM state saved too: XCR0 bits 5-7 besides 1-2. */
static bool
detect_avx512_vnni (void)
{
  unsigned a, b, c, d;
  if (!detect_avx2_fma_f16c ())
    return false;
  unsigned xcr0_lo, xcr0_hi;
  __asm__ ("xgetbv" : "=a" (xcr0_lo), "=d" (xcr0_hi) : "c" (0));
  if ((xcr0_lo & 0xe6) != 0xe6)
    return false;
  __cpuid_count (7, 0, a, b, c, d);
  const unsigned need_b = bit_AVX512F | bit_AVX512DQ | bit_AVX512BW | bit_AVX512VL;
  return (b & need_b) == need_b && (c & bit_AVX512VNNI) != 0;
}
#endif

#if defined(LLM_HAVE_AVX2)
/* Leaf 7 feature bits: bit 0 AVX-VNNI (subleaf 1, EAX bit 4), bit 1 GFNI
 * (subleaf 0, ECX bit 8). */
static int
leaf7_extras (void)
{
  static atomic_int cached = -1;
  int bits = atomic_load_explicit (&cached, memory_order_relaxed);
  if (bits < 0) {
    bits = 0;
    if (detect_avx2_fma_f16c ()) {
      unsigned a, b, c, d;
      __cpuid_count (7, 0, a, b, c, d);
      if (c & (1u << 8))
        bits |= 2;
      if (a >= 1) {
        __cpuid_count (7, 1, a, b, c, d);
        if (a & (1u << 4))
          bits |= 1;
      }
    }
    atomic_store_explicit (&cached, bits, memory_order_relaxed);
  }
  return bits;
}
#endif

bool
llm_cpu_has_avx_vnni (void)
{
#if defined(LLM_HAVE_AVX2)
  return (leaf7_extras () & 1) != 0 && getenv ("LLM_NO_AVX_VNNI") == NULL;
#else
  return false;
#endif
}

#if defined(LLM_HAVE_AMX) && defined(__linux__)
/* Linux hands out the 8 KiB of tile data per process on request
 * (arch/x86/include/uapi/asm/prctl.h: ARCH_REQ_XCOMP_PERM, and
 * XFEATURE_XTILEDATA is state component 18). */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static bool
detect_amx (void)
{
  if (!detect_avx512_vnni ())
    return false;
  unsigned a, b, c, d;
  __cpuid_count (7, 0, a, b, c, d);
  const unsigned tile = 1u << 24, int8 = 1u << 25;
  if ((d & (tile | int8)) != (tile | int8))
    return false;
  if (syscall (SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
    return false;
  unsigned xcr0_lo, xcr0_hi;
  __asm__ ("xgetbv" : "=a" (xcr0_lo), "=d" (xcr0_hi) : "c" (0));
  return ((xcr0_lo >> 17) & 3) == 3;
}
#endif

bool
llm_cpu_has_amx (void)
{
#if defined(LLM_HAVE_AMX) && defined(__linux__)
  static atomic_int cached = -1;
  int has = atomic_load_explicit (&cached, memory_order_relaxed);
  if (has < 0) {
    has = detect_amx () ? 1 : 0;
    atomic_store_explicit (&cached, has, memory_order_relaxed);
  }
  return has == 1 && getenv ("LLM_NO_AMX") == NULL;
#else
  return false;
#endif
}

/* The AMD Zen generation of this CPU: 3 (family 25 without AVX-512 in
 * the hardware), 4 (family 25 with it), 5 (family 26 and later, as the
 * newest measured), 0 for any other CPU. Family 25 is Zen 3 and Zen 4;
 * of the two only Zen 4 has AVX-512 (in the hardware: LLM_NO_AVX512 does
 * not make a Zen 4 read like a Zen 3). */
static unsigned
amd_zen (void)
{
#if defined(LLM_HAVE_AVX2)
  unsigned a, b, c, d;
  if (!__get_cpuid (0, &a, &b, &c, &d))
    return 0;
  /* "AuthenticAMD" in EBX, EDX, ECX. */
  if (b != 0x68747541u || d != 0x69746e65u || c != 0x444d4163u)
    return 0;
  __get_cpuid (1, &a, &b, &c, &d);
  const unsigned base = (a >> 8) & 0xf, family = base == 0xf ? base + ((a >> 20) & 0xff) : base;
  if (family >= 0x1a)
    return 5;
  if (family != 0x19)
    return 0;
  __cpuid_count (7, 0, a, b, c, d);
  return (b & bit_AVX512F) ? 4 : 3;
#else
  return 0;
#endif
}

unsigned
llm_cpu_f16_one_token_tiles (void)
{
  const char *force = getenv ("LLM_F16_ONE_TOKEN_TILES");
  if (force != NULL && (force[0] == '1' || force[0] == '2') && force[1] == '\0')
    return (unsigned) (force[0] - '0');
  const unsigned zen = amd_zen ();
  return zen == 3 || zen == 5 ? 2 : 1;
}

LlmX16Ahead
llm_cpu_x16_one_token_ahead (void)
{
  const char *force = getenv ("LLM_X16_ONE_TOKEN_AHEAD");
  if (force == NULL)
    return LLM_X16_AHEAD_AUTO;
  return strcmp (force, "near") == 0 ? LLM_X16_AHEAD_NEAR
      : strcmp (force, "far") == 0 ? LLM_X16_AHEAD_FAR
      : strcmp (force, "none") == 0 ? LLM_X16_AHEAD_NONE : LLM_X16_AHEAD_AUTO;
}

bool
llm_cpu_x16_one_token_near (void)
{
  const LlmX16Ahead force = llm_cpu_x16_one_token_ahead ();
  if (force == LLM_X16_AHEAD_NEAR || force == LLM_X16_AHEAD_FAR)
    return force == LLM_X16_AHEAD_NEAR;
  return amd_zen () != 5;
}

bool
llm_cpu_has_gfni (void)
{
#if defined(LLM_HAVE_AVX2)
  return (leaf7_extras () & 2) != 0;
#else
  return false;
#endif
}

/* Bit i set: ISA i supported; -1 until asked. Racing first calls compute
 * the same answer. */
static int
supported_mask (void)
{
  static atomic_int cached = -1;
  int mask = atomic_load_explicit (&cached, memory_order_relaxed);
  if (mask < 0) {
    mask = 1 << LLM_CPU_ISA_SCALAR;
#if defined(LLM_HAVE_AVX2)
    if (detect_avx2_fma_f16c ())
      mask |= 1 << LLM_CPU_ISA_AVX2;
#endif
#if defined(LLM_HAVE_AVX512)
    if (detect_avx512_vnni ())
      mask |= 1 << LLM_CPU_ISA_AVX512;
#endif
    atomic_store_explicit (&cached, mask, memory_order_relaxed);
  }
  return mask;
}

bool
llm_cpu_isa_supported (LlmCpuIsa isa)
{
  return (unsigned) isa < LLM_CPU_N_ISA && (supported_mask () & (1 << isa)) != 0;
}

LlmCpuIsa
llm_cpu_isa_best (void)
{
  if (llm_cpu_isa_supported (LLM_CPU_ISA_AVX512) && getenv ("LLM_NO_AVX512") == NULL)
    return LLM_CPU_ISA_AVX512;
  if (llm_cpu_isa_supported (LLM_CPU_ISA_AVX2))
    return LLM_CPU_ISA_AVX2;
  return LLM_CPU_ISA_SCALAR;
}

const char *
llm_cpu_isa_name (LlmCpuIsa isa)
{
  switch (isa) {
    case LLM_CPU_ISA_AVX512:
      return "avx512";
    case LLM_CPU_ISA_AVX2:
      return "avx2";
    case LLM_CPU_ISA_SCALAR:
      break;
  }
  return "scalar";
}
