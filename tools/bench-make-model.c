/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Random-weight models for benchmarks: the shapes of real small models,
 * weights drawn from a seeded normal distribution, quantized the way
 * llama-quantize mixes types, and a minimal tokenizer so that llama.cpp
 * loads the same file. Speed depends on shapes and types, not on what the
 * weights say, so these stand in for real models of the same size.
 *
 * Rows are generated and converted chunk by chunk into a temporary file
 * (in parallel; each row has its own seed, so the bytes do not depend on
 * the thread count), which is then mapped and handed to the GGUF writer
 * by reference: the heap never holds more than a chunk. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "ggml-type.h"
#include "gguf-writer.h"
#include "cpu/fp16.h"
#include "cpu/kquants-quantize.h"
#include "cpu/quantize.h"
#include "cpu/threadpool.h"

/* llama.cpp's llama_ftype values for general.file_type. */
enum {
  FTYPE_ALL_F32 = 0,
  FTYPE_MOSTLY_F16 = 1,
  FTYPE_MOSTLY_Q4_0 = 2,
  FTYPE_MOSTLY_Q4_1 = 3,
  FTYPE_MOSTLY_Q8_0 = 7,
  FTYPE_MOSTLY_Q5_0 = 8,
  FTYPE_MOSTLY_Q5_1 = 9,
  FTYPE_MOSTLY_Q4_K_M = 15,
  FTYPE_MOSTLY_Q5_K_M = 17,
  FTYPE_MOSTLY_Q6_K = 18,
  FTYPE_MOSTLY_BF16 = 32,
};

/* GGUF token types (llama.cpp's llama_token_type). */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_BYTE = 6 };

typedef struct {
  const char *name;
  const char *arch;           /* general.architecture */
  guint32 n_embd, n_layer, n_ff, n_head, n_head_kv, n_vocab, n_ctx;
  float rope_base, rms_eps;
  gboolean qwen2;             /* QKV biases, tied output, byte-level BPE vocabulary */
} Shape;

static const Shape shapes[] = {
  /* A llama of 246 M parameters (TinyLlama's layout, narrower). */
  { "246m", "llama", 1024, 16, 2816, 16, 4, 32000, 8192, 10000.0f, 1e-5f, FALSE },
  /* Qwen2-0.5B's hyper-parameters: 494 M parameters. */
  { "qwen2-0.5b", "qwen2", 896, 24, 4864, 14, 2, 151936, 32768, 1000000.0f, 1e-6f, TRUE },
  /* SmolLM2-135M's hyper-parameters (SmolVLM-256M's language model). */
  { "smollm2-135m", "llama", 576, 30, 1536, 9, 3, 49152, 8192, 100000.0f, 1e-5f, FALSE },
  /* Seconds to make and run: smoke tests of the tool and the elements. */
  { "tiny", "llama", 256, 2, 512, 4, 2, 1024, 4096, 10000.0f, 1e-5f, FALSE },
  /* Room for the real test models' 8 heads in 4 groups, 3 heads a group (--widen). */
  { "tiny-12h", "llama", 384, 6, 512, 12, 4, 1024, 4096, 10000.0f, 1e-5f, FALSE },
  { "tiny-qwen2", "qwen2", 256, 2, 512, 4, 2, 1024, 4096, 1000000.0f, 1e-6f, TRUE },
};

typedef struct {
  const char *name;
  guint32 ftype;
  guint32 base;               /* type of a matrix with no special rule */
} ModelType;

static const ModelType model_types[] = {
  { "f32", FTYPE_ALL_F32, LLM_TYPE_F32 },
  { "f16", FTYPE_MOSTLY_F16, LLM_TYPE_F16 },
  { "bf16", FTYPE_MOSTLY_BF16, LLM_TYPE_BF16 },
  { "q8_0", FTYPE_MOSTLY_Q8_0, LLM_TYPE_Q8_0 },
  { "q4_0", FTYPE_MOSTLY_Q4_0, LLM_TYPE_Q4_0 },
  { "q4_1", FTYPE_MOSTLY_Q4_1, LLM_TYPE_Q4_1 },
  { "q5_0", FTYPE_MOSTLY_Q5_0, LLM_TYPE_Q5_0 },
  { "q5_1", FTYPE_MOSTLY_Q5_1, LLM_TYPE_Q5_1 },
  { "q4_k_m", FTYPE_MOSTLY_Q4_K_M, LLM_TYPE_Q4_K },
  { "q5_k_m", FTYPE_MOSTLY_Q5_K_M, LLM_TYPE_Q5_K },
  { "q6_k", FTYPE_MOSTLY_Q6_K, LLM_TYPE_Q6_K },
};

const char *const *
bench_model_shapes (void)
{
  static const char *names[G_N_ELEMENTS (shapes) + 1];
  for (gsize i = 0; i < G_N_ELEMENTS (shapes); i++)
    names[i] = shapes[i].name;
  return names;
}

const char *const *
bench_model_types (void)
{
  static const char *names[G_N_ELEMENTS (model_types) + 1];
  for (gsize i = 0; i < G_N_ELEMENTS (model_types); i++)
    names[i] = model_types[i].name;
  return names;
}

const char *
bench_model_mix_help (void)
{
  return
    "Weight types (as llama-quantize chooses them without an importance matrix):\n"
    "  f32, f16, bf16      every matrix in that type; norms and biases F32\n"
    "  q8_0, q6_k, q4_0,   every matrix in that type, except: the output matrix\n"
    "  q4_1, q5_0, q5_1    (token_embd when tied) is Q6_K for q4_0, q4_1, q5_0\n"
    "                      and q5_1\n"
    "  q4_k_m, q5_k_m      Q4_K (Q5_K) for attn_q/k/output, ffn_gate/up, token_embd;\n"
    "                      Q6_K for output (token_embd when tied), and for attn_v\n"
    "                      and ffn_down of layers i < n/8, i >= 7n/8 and\n"
    "                      (i - n/8) % 3 == 2 (llama-quantize's use_more_bits:\n"
    "                      8 of 16 layers, 12 of 24)\n"
    "  Rows not a multiple of 256 (qwen2-0.5b: every matrix reading n_embd = 896)\n"
    "  cannot hold K-quants; as llama-quantize does, they get Q5_0 for Q4_K,\n"
    "  Q5_1 for Q5_K and Q8_0 for Q6_K (so the output matrix, Q6_K, is Q8_0).\n";
}

/* --- tensor types: llama-quantize's mix --- */

typedef enum {
  CAT_TOKEN_EMBD, CAT_OUTPUT, CAT_ATTN_Q, CAT_ATTN_K, CAT_ATTN_V, CAT_ATTN_OUTPUT,
  CAT_FFN_GATE, CAT_FFN_UP, CAT_FFN_DOWN, CAT_VECTOR,
} Category;

static gboolean
is_quantized (guint32 type)
{
  return type != LLM_TYPE_F32 && type != LLM_TYPE_F16 && type != LLM_TYPE_BF16;
}

static guint32
block_elems (guint32 type)
{
  guint32 n = 1;
  llm_type_info (type, &n, NULL);
  return n;
}

/* Layers that get more bits in the _M mixes (llama-quantize's
 * use_more_bits): the first and last eighth and every third between. */
static gboolean
use_more_bits (guint i, guint n)
{
  return i < n / 8 || i >= 7 * n / 8 || ((int) i - (int) (n / 8)) % 3 == 2;
}

static guint32
tensor_type (const Shape *s, const ModelType *mt, Category cat, guint layer, guint64 ncols)
{
  if (cat == CAT_VECTOR)
    return LLM_TYPE_F32;
  if (!is_quantized (mt->base))
    return mt->base;

  guint32 t = mt->base;
  gboolean k_mix = mt->ftype == FTYPE_MOSTLY_Q4_K_M || mt->ftype == FTYPE_MOSTLY_Q5_K_M;
  if (cat == CAT_OUTPUT || (s->qwen2 && cat == CAT_TOKEN_EMBD)) {
    /* llama-quantize tests rows against 256 here, whatever the base. */
    if (ncols % 256 != 0)
      t = LLM_TYPE_Q8_0;
    else if (mt->base != LLM_TYPE_Q8_0)
      t = LLM_TYPE_Q6_K;
  } else if ((cat == CAT_ATTN_V || cat == CAT_FFN_DOWN) && k_mix
      && use_more_bits (layer, s->n_layer)) {
    t = LLM_TYPE_Q6_K;
  }

  /* K-quant rows are whole 256-blocks; otherwise llama-quantize falls back
   * to a 32-block type, and to F16 where even that does not fit. (It
   * refuses other types' misfits; those become F16 here too.) */
  if (ncols % block_elems (t) != 0) {
    switch (t) {
      case LLM_TYPE_Q4_K: t = LLM_TYPE_Q5_0; break;
      case LLM_TYPE_Q5_K: t = LLM_TYPE_Q5_1; break;
      case LLM_TYPE_Q6_K: t = LLM_TYPE_Q8_0; break;
      default: t = LLM_TYPE_F16; break;
    }
    if (ncols % block_elems (t) != 0)
      t = LLM_TYPE_F16;
  }
  return t;
}

/* --- tokenizers --- */

/* Bijective base 26: 0 -> "a", 25 -> "z", 26 -> "aa", ...; unique. */
static void
append_letters (GString *s, guint k, char first)
{
  char buf[16];
  int n = 0;
  k++;
  while (k > 0 && n < (int) sizeof buf) {
    k--;
    buf[n++] = (char) (first + k % 26);
    k /= 26;
  }
  while (n > 0)
    g_string_append_c (s, buf[--n]);
}

static void
add_token_arrays (LlmGgufWriter *w, GPtrArray *texts, GArray *types, GArray *scores)
{
  llm_gguf_writer_add_string_array (w, "tokenizer.ggml.tokens",
      (const char *const *) texts->pdata, texts->len);
  if (scores != NULL)
    llm_gguf_writer_add_array (w, "tokenizer.ggml.scores", LLM_GGUF_FLOAT32, scores->data,
        scores->len);
  llm_gguf_writer_add_array (w, "tokenizer.ggml.token_type", LLM_GGUF_INT32, types->data,
      types->len);
}

static void
push (GPtrArray *texts, GArray *types, GArray *scores, GStringChunk *chunk, const char *text,
    gint32 type, float score)
{
  g_ptr_array_add (texts, g_string_chunk_insert (chunk, text));
  g_array_append_val (types, type);
  if (scores != NULL)
    g_array_append_val (scores, score);
}

/* SentencePiece ("llama"): <unk>, <s>, </s>, the 256 byte tokens
 * (byte fallback), then distinct pieces with falling scores. */
static void
add_spm_vocab (LlmGgufWriter *w, guint32 n_vocab)
{
  GStringChunk *chunk = g_string_chunk_new (1 << 16);
  GPtrArray *texts = g_ptr_array_sized_new (n_vocab);
  GArray *types = g_array_sized_new (FALSE, FALSE, sizeof (gint32), n_vocab);
  GArray *scores = g_array_sized_new (FALSE, FALSE, sizeof (float), n_vocab);

  push (texts, types, scores, chunk, "<unk>", TOK_UNKNOWN, 0.0f);
  push (texts, types, scores, chunk, "<s>", TOK_CONTROL, 0.0f);
  push (texts, types, scores, chunk, "</s>", TOK_CONTROL, 0.0f);
  for (int b = 0; b < 256; b++) {
    char buf[8];
    g_snprintf (buf, sizeof buf, "<0x%02X>", b);
    push (texts, types, scores, chunk, buf, TOK_BYTE, 0.0f);
  }
  GString *s = g_string_new (NULL);
  for (guint k = 0; texts->len < n_vocab; k++) {
    /* "▁a", "a", "▁b", "b", ...: word-initial and inner pieces. */
    g_string_assign (s, k % 2 == 0 ? "\xe2\x96\x81" : "");
    append_letters (s, k / 2, 'a');
    push (texts, types, scores, chunk, s->str, TOK_NORMAL, -(float) k);
  }
  g_string_free (s, TRUE);

  llm_gguf_writer_add_string (w, "tokenizer.ggml.model", "llama");
  add_token_arrays (w, texts, types, scores);
  llm_gguf_writer_add_uint32 (w, "tokenizer.ggml.bos_token_id", 1);
  llm_gguf_writer_add_uint32 (w, "tokenizer.ggml.eos_token_id", 2);
  llm_gguf_writer_add_uint32 (w, "tokenizer.ggml.unknown_token_id", 0);
  llm_gguf_writer_add_bool (w, "tokenizer.ggml.add_bos_token", TRUE);
  llm_gguf_writer_add_bool (w, "tokenizer.ggml.add_eos_token", FALSE);

  g_ptr_array_unref (texts);
  g_array_unref (types);
  g_array_unref (scores);
  g_string_chunk_free (chunk);
}

/* GPT-2's byte-to-character map: printable Latin-1 bytes stand for
 * themselves, the others (controls, space, 127..160, 173) for U+0100 on,
 * in byte order. */
static gunichar
byte_char (int b)
{
  if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
    return (gunichar) b;
  int n = 0;
  for (int c = 0; c < b; c++)
    if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255)))
      n++;
  return (gunichar) (256 + n);
}

/* Byte-level BPE ("gpt2", qwen2 pre-tokenizer): the 256 byte characters,
 * a few merges and their results, distinct fillers, and Qwen's three
 * control tokens last. */
static void
add_bpe_vocab (LlmGgufWriter *w, guint32 n_vocab)
{
  GStringChunk *chunk = g_string_chunk_new (1 << 16);
  GPtrArray *texts = g_ptr_array_sized_new (n_vocab);
  GArray *types = g_array_sized_new (FALSE, FALSE, sizeof (gint32), n_vocab);

  for (int b = 0; b < 256; b++) {
    char buf[8] = { 0 };
    g_unichar_to_utf8 (byte_char (b), buf);
    push (texts, types, NULL, chunk, buf, TOK_NORMAL, 0);
  }
  /* "Ġ" is the space byte; "\x61" is an "a" that the hex escape before it
   * would otherwise swallow. */
  static const char *const merges[] = { "\xc4\xa0 t", "\xc4\xa0 a", "h e", "i n",
    "\xc4\xa0t he" };
  static const char *const merged[] = { "\xc4\xa0t", "\xc4\xa0\x61", "he", "in",
    "\xc4\xa0the" };
  for (gsize i = 0; i < G_N_ELEMENTS (merged); i++)
    push (texts, types, NULL, chunk, merged[i], TOK_NORMAL, 0);
  static const char *const specials[] = { "<|endoftext|>", "<|im_start|>", "<|im_end|>" };
  GString *s = g_string_new (NULL);
  /* Upper-case fillers cannot collide with the lower-case merges. */
  for (guint k = 0; texts->len < n_vocab - G_N_ELEMENTS (specials); k++) {
    g_string_assign (s, "\xc4\xa0");
    append_letters (s, k, 'A');
    push (texts, types, NULL, chunk, s->str, TOK_NORMAL, 0);
  }
  g_string_free (s, TRUE);
  guint32 eot = texts->len;
  for (gsize i = 0; i < G_N_ELEMENTS (specials); i++)
    push (texts, types, NULL, chunk, specials[i], TOK_CONTROL, 0);

  llm_gguf_writer_add_string (w, "tokenizer.ggml.model", "gpt2");
  llm_gguf_writer_add_string (w, "tokenizer.ggml.pre", "qwen2");
  add_token_arrays (w, texts, types, NULL);
  llm_gguf_writer_add_string_array (w, "tokenizer.ggml.merges", merges, G_N_ELEMENTS (merges));
  llm_gguf_writer_add_uint32 (w, "tokenizer.ggml.bos_token_id", eot);
  llm_gguf_writer_add_uint32 (w, "tokenizer.ggml.eos_token_id", eot);
  llm_gguf_writer_add_uint32 (w, "tokenizer.ggml.padding_token_id", eot);
  llm_gguf_writer_add_bool (w, "tokenizer.ggml.add_bos_token", FALSE);

  g_ptr_array_unref (texts);
  g_array_unref (types);
  g_string_chunk_free (chunk);
}

/* @from: the real model a widened file holds, or NULL. */
static void
add_hparams (LlmGgufWriter *w, const Shape *s, const ModelType *mt, const char *from)
{
  g_autofree char *name = from != NULL
      ? g_strdup_printf ("%s widened to %s %s", from, s->name, mt->name)
      : g_strdup_printf ("gst-llm-bench %s %s", s->name, mt->name);
  llm_gguf_writer_add_string (w, "general.architecture", s->arch);
  llm_gguf_writer_add_string (w, "general.name", name);
  llm_gguf_writer_add_uint32 (w, "general.file_type", mt->ftype);
  if (is_quantized (mt->base))
    llm_gguf_writer_add_uint32 (w, "general.quantization_version", 2);

#define KEY(k) (g_snprintf (key, sizeof key, "%s." k, s->arch), key)
  char key[96];
  guint32 head_dim = s->n_embd / s->n_head;
  llm_gguf_writer_add_uint32 (w, KEY ("context_length"), s->n_ctx);
  llm_gguf_writer_add_uint32 (w, KEY ("embedding_length"), s->n_embd);
  llm_gguf_writer_add_uint32 (w, KEY ("block_count"), s->n_layer);
  llm_gguf_writer_add_uint32 (w, KEY ("feed_forward_length"), s->n_ff);
  llm_gguf_writer_add_uint32 (w, KEY ("attention.head_count"), s->n_head);
  llm_gguf_writer_add_uint32 (w, KEY ("attention.head_count_kv"), s->n_head_kv);
  llm_gguf_writer_add_uint32 (w, KEY ("rope.dimension_count"), head_dim);
  llm_gguf_writer_add_float32 (w, KEY ("rope.freq_base"), s->rope_base);
  llm_gguf_writer_add_float32 (w, KEY ("attention.layer_norm_rms_epsilon"), s->rms_eps);
#undef KEY
}

/* --- weights --- */

typedef enum { FILL_NORMAL, FILL_ONES } Fill;

typedef struct {
  char name[64];
  Category cat;
  guint layer;
  guint32 type;
  guint n_dims;
  guint64 ne[2];
  Fill fill;
  float std;
  guint64 offset, size;       /* in the temporary file */
} TensorPlan;

static GArray *
plan_tensors (const Shape *s, const ModelType *mt)
{
  GArray *plan = g_array_new (FALSE, TRUE, sizeof (TensorPlan));
  guint64 head_dim = s->n_embd / s->n_head;
  guint64 q_dim = s->n_head * head_dim, kv_dim = s->n_head_kv * head_dim;

#define ADD(cat_, layer_, fill_, std_, ne0, ne1, ...) G_STMT_START { \
    TensorPlan t = { .cat = cat_, .layer = layer_, .fill = fill_, .std = std_, \
      .n_dims = (ne1) ? 2 : 1, .ne = { ne0, (ne1) ? (ne1) : 1 } }; \
    g_snprintf (t.name, sizeof t.name, __VA_ARGS__); \
    t.type = tensor_type (s, mt, cat_, layer_, ne0); \
    g_array_append_val (plan, t); \
  } G_STMT_END

  /* A spread of 0.02 keeps the residual stream and the logits of a random
   * model in a sane range at these widths. */
  const float std = 0.02f;
  ADD (CAT_TOKEN_EMBD, 0, FILL_NORMAL, std, s->n_embd, s->n_vocab, "token_embd.weight");
  for (guint l = 0; l < s->n_layer; l++) {
    ADD (CAT_VECTOR, l, FILL_ONES, 0, s->n_embd, 0, "blk.%u.attn_norm.weight", l);
    ADD (CAT_ATTN_Q, l, FILL_NORMAL, std, s->n_embd, q_dim, "blk.%u.attn_q.weight", l);
    ADD (CAT_ATTN_K, l, FILL_NORMAL, std, s->n_embd, kv_dim, "blk.%u.attn_k.weight", l);
    ADD (CAT_ATTN_V, l, FILL_NORMAL, std, s->n_embd, kv_dim, "blk.%u.attn_v.weight", l);
    if (s->qwen2) {
      ADD (CAT_VECTOR, l, FILL_NORMAL, std, q_dim, 0, "blk.%u.attn_q.bias", l);
      ADD (CAT_VECTOR, l, FILL_NORMAL, std, kv_dim, 0, "blk.%u.attn_k.bias", l);
      ADD (CAT_VECTOR, l, FILL_NORMAL, std, kv_dim, 0, "blk.%u.attn_v.bias", l);
    }
    ADD (CAT_ATTN_OUTPUT, l, FILL_NORMAL, std, q_dim, s->n_embd, "blk.%u.attn_output.weight", l);
    ADD (CAT_VECTOR, l, FILL_ONES, 0, s->n_embd, 0, "blk.%u.ffn_norm.weight", l);
    ADD (CAT_FFN_GATE, l, FILL_NORMAL, std, s->n_embd, s->n_ff, "blk.%u.ffn_gate.weight", l);
    ADD (CAT_FFN_UP, l, FILL_NORMAL, std, s->n_embd, s->n_ff, "blk.%u.ffn_up.weight", l);
    ADD (CAT_FFN_DOWN, l, FILL_NORMAL, std, s->n_ff, s->n_embd, "blk.%u.ffn_down.weight", l);
  }
  ADD (CAT_VECTOR, 0, FILL_ONES, 0, s->n_embd, 0, "output_norm.weight");
  if (!s->qwen2)
    ADD (CAT_OUTPUT, 0, FILL_NORMAL, std, s->n_embd, s->n_vocab, "output.weight");
#undef ADD
  return plan;
}

/* splitmix64: a fast generator whose state is one integer, so every row
 * can start from its own seed. */
static inline guint64
splitmix (guint64 *state)
{
  guint64 z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void
fill_row (float *x, gsize n, const TensorPlan *t, guint64 seed, guint tensor, guint64 row)
{
  if (t->fill == FILL_ONES) {
    for (gsize i = 0; i < n; i++)
      x[i] = 1.0f;
    return;
  }
  guint64 state = seed ^ ((guint64) tensor << 40) ^ (row * 0xd1342543de82ef95ull);
  splitmix (&state);
  /* Box-Muller, two normals per pair of uniforms in (0, 1]. */
  for (gsize i = 0; i < n; i += 2) {
    const float u1 = (float) ((splitmix (&state) >> 40) + 1) * (1.0f / 16777216.0f);
    const float u2 = (float) (splitmix (&state) >> 40) * (1.0f / 16777216.0f);
    const float r = sqrtf (-2.0f * logf (u1)) * t->std;
    x[i] = r * cosf (6.2831853f * u2);
    if (i + 1 < n)
      x[i + 1] = r * sinf (6.2831853f * u2);
  }
}

static void
convert_row (guint32 type, const float *x, void *dst, gsize n)
{
  switch (type) {
    case LLM_TYPE_F32: memcpy (dst, x, n * sizeof (float)); break;
    case LLM_TYPE_F16: llm_fp16_from_f32_row (x, dst, n); break;
    case LLM_TYPE_BF16: llm_bf16_from_f32_row (x, dst, n); break;
    case LLM_TYPE_Q8_0: llm_quantize_row_q8_0 (x, dst, n); break;
    case LLM_TYPE_Q4_0: llm_quantize_row_q4_0 (x, dst, n); break;
    case LLM_TYPE_Q4_1: llm_quantize_row_q4_1 (x, dst, n); break;
    case LLM_TYPE_Q5_0: llm_quantize_row_q5_0 (x, dst, n); break;
    case LLM_TYPE_Q5_1: llm_quantize_row_q5_1 (x, dst, n); break;
    case LLM_TYPE_Q4_K: llm_quantize_row_q4_K (x, dst, n); break;
    case LLM_TYPE_Q5_K: llm_quantize_row_q5_K (x, dst, n); break;
    case LLM_TYPE_Q6_K: llm_quantize_row_q6_K (x, dst, n); break;
    default: g_assert_not_reached ();
  }
}

typedef struct {
  const TensorPlan *t;
  const BenchWiden *widen;    /* rows from a real model instead of random ones */
  guint tensor;
  guint64 seed;
  guint64 row0, n_rows;       /* this chunk */
  gsize row_bytes;
  guint8 *out;
  float **scratch;            /* one row per thread */
} ChunkTask;

static void
chunk_task (void *data, int ith, int nth)
{
  const ChunkTask *c = data;
  gsize r0, r1;
  llm_split_range (c->n_rows, ith, nth, &r0, &r1);
  for (gsize r = r0; r < r1; r++) {
    if (c->widen != NULL)
      bench_widen_row (c->widen, c->t->name, c->row0 + r, c->scratch[ith], c->t->ne[0]);
    else
      fill_row (c->scratch[ith], c->t->ne[0], c->t, c->seed, c->tensor, c->row0 + r);
    convert_row (c->t->type, c->scratch[ith], c->out + r * c->row_bytes, c->t->ne[0]);
  }
}

static gboolean
write_all (int fd, const guint8 *p, gsize n, const char *what, GError **error)
{
  while (n > 0) {
    gssize r = write (fd, p, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      int e = errno;
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e), "cannot write %s: %s",
          what, g_strerror (e));
      return FALSE;
    }
    p += r;
    n -= (gsize) r;
  }
  return TRUE;
}

/* Generates every tensor of @plan into @fd, recording offsets. */
static gboolean
generate (GArray *plan, const BenchWiden *widen, int fd, const char *tmp_path, guint64 seed,
    int n_threads, gboolean verbose, GError **error)
{
  LlmThreadPool *pool = llm_threadpool_new (n_threads);
  if (pool == NULL) {
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "cannot start worker threads");
    return FALSE;
  }
  int nth = llm_threadpool_n_threads (pool);
  guint64 widest = 0;
  for (guint i = 0; i < plan->len; i++)
    widest = MAX (widest, g_array_index (plan, TensorPlan, i).ne[0]);
  float **scratch = g_new0 (float *, nth);
  for (int i = 0; i < nth; i++)
    scratch[i] = g_new (float, widest + 1);

  /* Chunks of about 8 MiB of output keep memory small and every thread busy. */
  const gsize chunk_bytes = 8u << 20;
  guint8 *out = NULL;
  gsize out_size = 0;
  guint64 offset = 0;
  gboolean ok = TRUE;
  gint64 t0 = g_get_monotonic_time ();
  for (guint i = 0; ok && i < plan->len; i++) {
    TensorPlan *t = &g_array_index (plan, TensorPlan, i);
    guint64 row_bytes;
    llm_type_row_bytes (t->type, t->ne[0], &row_bytes);
    /* The writer aligns tensors to 32 bytes; keeping the same alignment in
     * the temporary file keeps every block type naturally aligned. */
    guint64 pad = (32 - offset % 32) % 32;
    if (pad > 0) {
      static const guint8 zeros[32];
      ok = write_all (fd, zeros, pad, tmp_path, error);
      offset += pad;
    }
    t->offset = offset;
    t->size = row_bytes * t->ne[1];
    guint64 rows_per_chunk = MAX (1, chunk_bytes / row_bytes);
    if (out_size < rows_per_chunk * row_bytes) {
      g_free (out);
      out_size = rows_per_chunk * row_bytes;
      out = g_malloc (out_size);
    }
    for (guint64 r = 0; ok && r < t->ne[1]; r += rows_per_chunk) {
      ChunkTask c = { t, widen, i, seed, r, MIN (rows_per_chunk, t->ne[1] - r), row_bytes, out,
        scratch };
      llm_threadpool_run (pool, chunk_task, &c);
      ok = write_all (fd, out, c.n_rows * row_bytes, tmp_path, error);
    }
    offset += t->size;
    if (verbose)
      g_printerr ("\r[%3u/%3u] %-28s %-5s %8.1f MiB  %5.1f s", i + 1, plan->len, t->name,
          llm_type_name (t->type), offset / 1048576.0,
          (g_get_monotonic_time () - t0) / 1e6);
  }
  if (verbose)
    g_printerr ("\n");
  g_free (out);
  for (int i = 0; i < nth; i++)
    g_free (scratch[i]);
  g_free (scratch);
  llm_threadpool_free (pool);
  return ok;
}

static gboolean
make_model (const char *shape_name, guint n_layer, const char *type_name, const char *source,
    const char *path, guint64 seed, int n_threads, gboolean verbose, GError **error)
{
#if G_BYTE_ORDER != G_LITTLE_ENDIAN
  /* The rows go to the file as the kernels produce them (host order). */
  g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
      "--make-model writes little-endian files only; this host is big-endian");
  return FALSE;
#endif
  const Shape *s = NULL;
  const ModelType *mt = NULL;
  for (gsize i = 0; i < G_N_ELEMENTS (shapes); i++)
    if (g_ascii_strcasecmp (shapes[i].name, shape_name) == 0)
      s = &shapes[i];
  for (gsize i = 0; i < G_N_ELEMENTS (model_types); i++)
    if (g_ascii_strcasecmp (model_types[i].name, type_name) == 0)
      mt = &model_types[i];
  if (s == NULL || mt == NULL) {
    g_autofree char *all = g_strjoinv (", ", (char **) (s == NULL ? bench_model_shapes ()
        : bench_model_types ()));
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "unknown %s '%s' (known: %s)",
        s == NULL ? "shape" : "type", s == NULL ? shape_name : type_name, all);
    return FALSE;
  }

  /* Layers other than the shape's: a widened model with exactly its
   * source's layers has no identity layers, so skipping one of its layers
   * drafts what skipping it in the source would. */
  Shape layered;
  if (n_layer > 0) {
    if (n_layer > 1024) {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
          "--layers %u: at most 1024", n_layer);
      return FALSE;
    }
    layered = *s;
    layered.n_layer = n_layer;
    s = &layered;
  }

  g_autoptr (BenchWiden) widen = NULL;
  Shape widened;
  if (source != NULL) {
    /* qwen2 rotates dimension pairs (i, i + hd / 2), which the widening
     * does not move; and its biases would need widening too. */
    if (s->qwen2) {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
          "--widen takes llama shapes only, not %s", s->name);
      return FALSE;
    }
    const BenchWidenShape to = { s->n_embd, s->n_layer, s->n_ff, s->n_head, s->n_head_kv };
    widen = bench_widen_open (source, &to, error);
    if (widen == NULL)
      return FALSE;
    widened = *s;
    bench_widen_hparams (widen, &widened.n_vocab, &widened.n_ctx, &widened.rope_base,
        &widened.rms_eps);
    s = &widened;
  }

  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  g_autofree char *from = widen != NULL ? bench_widen_source_name (widen) : NULL;
  add_hparams (w, s, mt, from);
  if (widen != NULL) {
    if (!bench_widen_copy_vocab (widen, w)) {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
          "--widen: cannot copy the tokenizer of %s", source);
      return FALSE;
    }
  } else if (s->qwen2) {
    add_bpe_vocab (w, s->n_vocab);
  } else {
    add_spm_vocab (w, s->n_vocab);
  }

  g_autofree char *tmp = g_strdup_printf ("%s.weights-XXXXXX", path);
  int fd = g_mkstemp (tmp);
  if (fd < 0) {
    int e = errno;
    g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e),
        "cannot create a temporary file beside %s: %s", path, g_strerror (e));
    return FALSE;
  }
  /* Unlinked at once: the data lives as long as the descriptor. */
  g_unlink (tmp);

  GArray *plan = plan_tensors (s, mt);
  /* Progress rewrites one line: only on a terminal. */
  gboolean ok = generate (plan, widen, fd, tmp, seed, n_threads, verbose && isatty (2), error);
  GMappedFile *map = NULL;
  if (ok) {
    map = g_mapped_file_new_from_fd (fd, FALSE, error);
    ok = map != NULL;
  }
  if (ok) {
    GBytes *all = g_mapped_file_get_bytes (map);
    for (guint i = 0; ok && i < plan->len; i++) {
      const TensorPlan *t = &g_array_index (plan, TensorPlan, i);
      GBytes *slice = g_bytes_new_from_bytes (all, t->offset, t->size);
      ok = llm_gguf_writer_add_tensor_bytes (w, t->name, t->type, t->n_dims, t->ne, slice,
          error);
      g_bytes_unref (slice);
    }
    g_bytes_unref (all);
  }
  if (ok)
    ok = llm_gguf_writer_write_file (w, path, error);
  if (map != NULL)
    g_mapped_file_unref (map);
  close (fd);

  if (ok && verbose) {
    guint64 params = 0;
    GHashTable *bytes_by_type = g_hash_table_new (g_direct_hash, g_direct_equal);
    guint64 total = 0;
    for (guint i = 0; i < plan->len; i++) {
      const TensorPlan *t = &g_array_index (plan, TensorPlan, i);
      params += t->ne[0] * t->ne[1];
      total += t->size;
      gpointer key = GUINT_TO_POINTER (t->type + 1);
      guint64 *b = g_hash_table_lookup (bytes_by_type, key);
      if (b == NULL) {
        b = g_new0 (guint64, 1);
        g_hash_table_insert (bytes_by_type, key, b);
      }
      *b += t->size;
    }
    g_printerr ("wrote %s: %s, %s, %.1f M parameters, %.1f MiB of weights:", path, s->name,
        mt->name, params / 1e6, total / 1048576.0);
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init (&it, bytes_by_type);
    while (g_hash_table_iter_next (&it, &k, &v)) {
      g_printerr (" %s %.1f%%", llm_type_name (GPOINTER_TO_UINT (k) - 1),
          100.0 * *(guint64 *) v / total);
      g_free (v);
    }
    g_printerr ("\n");
    g_hash_table_unref (bytes_by_type);
  }
  g_array_unref (plan);
  return ok;
}

gboolean
bench_make_model (const char *shape_name, guint n_layer, const char *type_name,
    const char *path, guint64 seed, int n_threads, gboolean verbose, GError **error)
{
  return make_model (shape_name, n_layer, type_name, NULL, path, seed, n_threads, verbose, error);
}

gboolean
bench_make_widened_model (const char *shape_name, guint n_layer, const char *type_name,
    const char *source, const char *path, int n_threads, gboolean verbose, GError **error)
{
  return make_model (shape_name, n_layer, type_name, source, path, 0, n_threads, verbose, error);
}
