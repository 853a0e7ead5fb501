/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tensor element types as numbered by GGUF/ggml, with their block geometry.
 * Pure C: shared by the kernels and the library. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Values are the on-disk type ids; never renumber. */
typedef enum {
  LLM_TYPE_F32 = 0,
  LLM_TYPE_F16 = 1,
  LLM_TYPE_Q4_0 = 2,
  LLM_TYPE_Q4_1 = 3,
  LLM_TYPE_Q5_0 = 6,
  LLM_TYPE_Q5_1 = 7,
  LLM_TYPE_Q8_0 = 8,
  LLM_TYPE_Q8_1 = 9,
  LLM_TYPE_Q2_K = 10,
  LLM_TYPE_Q3_K = 11,
  LLM_TYPE_Q4_K = 12,
  LLM_TYPE_Q5_K = 13,
  LLM_TYPE_Q6_K = 14,
  LLM_TYPE_Q8_K = 15,
  LLM_TYPE_IQ4_NL = 20,
  LLM_TYPE_IQ4_XS = 23,
  LLM_TYPE_I8 = 24,
  LLM_TYPE_I16 = 25,
  LLM_TYPE_I32 = 26,
  LLM_TYPE_I64 = 27,
  LLM_TYPE_F64 = 28,
  LLM_TYPE_BF16 = 30,
} LlmType;

/* true if @id is a type this build knows the block geometry of; fills
 * @block_elems (elements per block) and @block_bytes when non-NULL. */
bool llm_type_info (uint32_t id, uint32_t *block_elems, uint32_t *block_bytes);

/* "F32", "Q4_K", ...; "unknown" for ids llm_type_info() rejects. */
const char *llm_type_name (uint32_t id);

/* Bytes of a row of @n_elems elements. false if @type is unknown or @n_elems
 * is not a whole number of blocks. */
bool llm_type_row_bytes (uint32_t type, uint64_t n_elems, uint64_t *bytes);

#ifdef __cplusplus
}
#endif
