/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "ggml-type.h"

#include <stddef.h>

#define N_ELEMENTS(a) (sizeof (a) / sizeof ((a)[0]))

typedef struct {
  uint32_t id;
  const char *name;
  uint32_t block_elems;
  uint32_t block_bytes;
} TypeInfo;

/* Block sizes follow ggml's on-disk layouts (e.g. Q4_K: fp16 d, fp16 dmin,
 * 12 bytes of 6-bit scales, 128 bytes of nibbles for 256 weights). */
static const TypeInfo type_table[] = {
  { LLM_TYPE_F32, "F32", 1, 4 },
  { LLM_TYPE_F16, "F16", 1, 2 },
  { LLM_TYPE_Q4_0, "Q4_0", 32, 18 },
  { LLM_TYPE_Q4_1, "Q4_1", 32, 20 },
  { LLM_TYPE_Q5_0, "Q5_0", 32, 22 },
  { LLM_TYPE_Q5_1, "Q5_1", 32, 24 },
  { LLM_TYPE_Q8_0, "Q8_0", 32, 34 },
  { LLM_TYPE_Q8_1, "Q8_1", 32, 36 },
  { LLM_TYPE_Q2_K, "Q2_K", 256, 84 },
  { LLM_TYPE_Q3_K, "Q3_K", 256, 110 },
  { LLM_TYPE_Q4_K, "Q4_K", 256, 144 },
  { LLM_TYPE_Q5_K, "Q5_K", 256, 176 },
  { LLM_TYPE_Q6_K, "Q6_K", 256, 210 },
  { LLM_TYPE_Q8_K, "Q8_K", 256, 292 },
  { LLM_TYPE_IQ4_NL, "IQ4_NL", 32, 18 },
  { LLM_TYPE_IQ4_XS, "IQ4_XS", 256, 136 },
  { LLM_TYPE_I8, "I8", 1, 1 },
  { LLM_TYPE_I16, "I16", 1, 2 },
  { LLM_TYPE_I32, "I32", 1, 4 },
  { LLM_TYPE_I64, "I64", 1, 8 },
  { LLM_TYPE_F64, "F64", 1, 8 },
  { LLM_TYPE_BF16, "BF16", 1, 2 },
};

static const TypeInfo *
lookup (uint32_t id)
{
  for (size_t i = 0; i < N_ELEMENTS (type_table); i++)
    if (type_table[i].id == id)
      return &type_table[i];
  return NULL;
}

bool
llm_type_info (uint32_t id, uint32_t *block_elems, uint32_t *block_bytes)
{
  const TypeInfo *t = lookup (id);
  if (t == NULL)
    return false;
  if (block_elems)
    *block_elems = t->block_elems;
  if (block_bytes)
    *block_bytes = t->block_bytes;
  return true;
}

const char *
llm_type_name (uint32_t id)
{
  const TypeInfo *t = lookup (id);
  return t ? t->name : "unknown";
}

bool
llm_type_row_bytes (uint32_t type, uint64_t n_elems, uint64_t *bytes)
{
  const TypeInfo *t = lookup (type);
  if (t == NULL || n_elems % t->block_elems != 0)
    return false;
  uint64_t blocks = n_elems / t->block_elems;
  if (blocks > UINT64_MAX / t->block_bytes)
    return false;
  *bytes = blocks * t->block_bytes;
  return true;
}
