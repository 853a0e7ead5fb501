/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the CPU kernels: the AVX-512 + VNNI batched products
 * (prefill) in gemm-avx512.c, same contract and results as gemm-avx2.h's.
 * That file is compiled with AVX-512F/BW/VL/DQ and AVX512-VNNI, so nothing
 * in it may run before matmul.c has checked the CPU (and the OS's saving
 * of the ZMM state) for them. */
#pragma once

#include <stdint.h>

#include "gemm-avx2.h"

/* The AVX-512 batched kernel for weights of @wtype, or NULL if there is
 * none (the AVX2 one is used then). */
LlmGemmFn llm_avx512_gemm_fn (uint32_t wtype);
