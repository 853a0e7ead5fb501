/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The seam between the engine and a device: a table of operations.
 *
 * The forward pass (forward.c) is written once against this table and
 * never calls a kernel itself; a device is supported by filling the table
 * in. The CPU backend (backend-cpu.c) is the first and the reference. This
 * header is the porting guide for the next ones (CUDA, HIP, OpenCL, the
 * domestic accelerators): read it top to bottom.
 *
 * 1. Memory. Activations, scratch and KV blocks live in backend buffers:
 *    `alloc`/`free` them, move bytes with `upload` (host to device) and
 *    `download` (device to host). A buffer pointer is opaque to the engine
 *    except for offsets: the engine addresses row t of a [rows x width]
 *    float buffer as buf + t * width, so a device pointer must allow that
 *    arithmetic (CUDA and HIP pointers do; an OpenCL backend hands out
 *    SVM pointers or keeps a sub-buffer table). The CPU backend's buffers
 *    are host memory and its copies are memcpy.
 *
 * 2. Weights. `prepare` runs once per (model, backend) at the first
 *    engine of a model (the result is kept on the model and shared by every
 *    engine on the same backend): it turns each tensor of the file into an
 *    LlmWeight in the layout the backend's kernels want. A GPU backend
 *    uploads here; the CPU backend turns norm and bias rows into floats and
 *    repacks the types whose batched kernels want interleaved rows, so no
 *    product ever repacks per call. A weight type the backend cannot
 *    compute fails here with LLM_MODEL_ERROR_TYPE, before any stream runs.
 *
 * 3. Operations. Every op works on whole rows of a chunk (at most
 *    LLM_FORWARD_CHUNK rows: a prompt, the decode steps of many streams, a
 *    draft to verify) and may run asynchronously in the op queue it is
 *    given: the engine calls `sync` before it reads results on the host (the
 *    logits). Ops may not allocate: scratch they need comes from
 *    `reserve`, called when the chunk shape or the longest context grows.
 *    The CPU backend's queue is the engine's worker pool; a GPU backend's
 *    is a stream.
 *
 *    A vision tower (vision-encoder.c) runs through the same table: its
 *    rows are one image's patches (a few hundred to a few thousand, every
 *    one attending to every other, with no cache), uploaded once as
 *    normalised pixels; its products, biases and residuals are the LM's
 *    ops, its row moves (the class row, Idefics3's pixel shuffle) are
 *    copy, and layernorm, gelu and attention_full are its own (3b below).
 *    attention_full's scratch comes from reserve_attention_full, as the
 *    others' from reserve.
 *
 *    An audio tower (audio-encoder.c, Whisper's) is the same blocks with
 *    GELU in its erf form, after a stem of two 1-D convolutions: each is
 *    conv1d_rows (the rows of taps its kernel multiplies, im2col) and one
 *    matmul by the kernel's rows, so a backend gets convolutions from its
 *    product. Its projectors are the LM's rmsnorm, matmul and swiglu
 *    (Ultravox's fused projection prepared as two weights, its halves),
 *    gelu, and avg_pool_pairs (Qwen2-Audio) (3c below).
 *
 * 4. Results. Evaluating rows of many sequences in one batch must give
 *    each sequence the logits it gets alone (the engine's tests check it
 *    bit for bit on the CPU); a backend that cannot promise bits states its
 *    tolerance in its own tests against the CPU reference.
 *
 * GLib only: an application may use the engine without GStreamer. */
#pragma once

#include <glib.h>
#include "model.h"
#include "kvcache.h"
#include "fetch-choice.h"

G_BEGIN_DECLS

typedef struct _LlmBackend LlmBackend;

/* Where an op runs: the CPU backend's worker pool, a GPU stream. */
typedef struct _LlmBackendQueue LlmBackendQueue;

/* A tensor of the model as the backend holds it. */
typedef struct {
  guint32 type;          /* LlmType of the file's data */
  guint32 n;             /* values per row (ne[0]) */
  guint32 rows;          /* rows (ne[1]; 1 for vectors) */
  gsize row_bytes;       /* of a row in the file's layout */
  const void *host;      /* the file's bytes, in place in the mapping */
  void *data;            /* the backend's layout, or NULL: it uses @host */
  guint32 layout;        /* backend-defined; 0 is the file's layout */
} LlmWeight;

/* Every tensor the forward pass reads, per layer: NULL where the
 * architecture has none (biases of llama, head norms of qwen2). */
typedef struct {
  const LlmWeight *attn_norm;
  const LlmWeight *wq, *wk, *wv, *wo;
  const LlmWeight *bq, *bk, *bv;
  const LlmWeight *q_norm, *k_norm;
  const LlmWeight *ffn_norm;
  const LlmWeight *w_gate, *w_up, *w_down;
} LlmLayerWeights;

typedef struct {
  const LlmWeight *tok_embd, *output_norm, *output;
  LlmLayerWeights *layers;      /* [n_layer] */
  /* private to whoever prepared them */
  LlmWeight *all;
  guint n_all;
  gsize prepared_bytes;         /* memory the backend's layouts added */
} LlmWeights;

/* RoPE of the model (see kernels/cpu/ops.h llm_rope). */
typedef struct {
  guint32 n_rot;
  float freq_base, freq_scale;
  gboolean neox;
} LlmRopeParams;

/* The rows of one sequence in a chunk: rows [row0, row0 + n) go to cache
 * slots slot0.. of @kv, which the engine has reserved; row t attends to
 * slots [0, slot0 + (t - row0) + 1) (causal). */
typedef struct {
  LlmKvCache *kv;
  guint32 slot0;
  guint row0, n;
} LlmFwdPiece;

/* Attention shape of the model. */
typedef struct {
  guint32 n_head, n_head_kv, head_dim;
  float scale;                  /* 1 / sqrt(head_dim) */
} LlmAttnShape;

/* The GELUs of vision towers (kernels/cpu/ops.h says how each rounds). */
typedef enum {
  LLM_GELU_TANH,                /* the tanh approximation: SigLIP, projector MLPs */
  LLM_GELU_QUICK,               /* CLIP's x * sigmoid (1.702 x) */
  LLM_GELU_ERF,                 /* the exact form, x / 2 (1 + erf (x / sqrt 2)): Whisper */
} LlmGelu;

/* A 1-D convolution's input read as rows (conv1d_rows): @n_ch channels
 * of @n_len frames, value (channel c, frame t) at x[t * t_stride + c *
 * c_stride], so a channel-major mel spectrogram and time-major
 * activations are both read in place; output frame o reads frames o *
 * stride + k - pad, k < taps (zeros outside [0, n_len)). */
typedef struct {
  gsize n_ch, n_len, t_stride, c_stride;
  guint taps, stride, pad;
} LlmConv1dShape;

typedef struct {
  const char *name;             /* "cpu" */

  /* --- 1. memory ---------------------------------------------------- */
  void *(*alloc) (LlmBackend *be, gsize bytes, GError **error);
  void (*free) (LlmBackend *be, void *buf);
  void (*upload) (LlmBackend *be, LlmBackendQueue *q, void *dst, const void *src, gsize bytes);
  void (*download) (LlmBackend *be, LlmBackendQueue *q, void *dst, const void *src,
      gsize bytes);
  /* Within the device. */
  void (*copy) (LlmBackend *be, LlmBackendQueue *q, void *dst, const void *src, gsize bytes);
  /* Waits until every op queued on @q has finished. */
  void (*sync) (LlmBackend *be, LlmBackendQueue *q);

  /* --- 2. weights --------------------------------------------------- */
  /* Fills @w (already holding the file's view: type, n, rows, row_bytes,
   * host) for this backend. @is_vector: a norm or bias row, read as floats
   * by rmsnorm, layernorm and add_bias (a tower's position embeddings too,
   * all of their values as one row). A tower's patch kernel [p, p, 3, n]
   * comes as a matrix of n rows of 3 p^2, a convolution kernel [taps, in,
   * out] as out rows of taps x in. Called for every tensor of a model,
   * possibly from several threads at once for different tensors. */
  gboolean (*prepare_weight) (LlmBackend *be, LlmWeight *w, gboolean is_vector,
      GError **error);
  void (*release_weight) (LlmBackend *be, LlmWeight *w);
  /* A string that tells prepared layouts apart: engines whose backends
   * give the same key share one set of prepared weights. */
  const char *(*weights_key) (LlmBackend *be);

  /* --- 3. operations over the rows of a chunk ----------------------- */
  /* Scratch for chunks of @n_rows rows at most @width floats wide whose
   * longest attention reaches @n_kv positions of caches like @kv_like
   * (NULL: only the row shape). Ops never allocate; this may, and fails
   * with LLM_BACKEND_ERROR_MEMORY. */
  gboolean (*reserve) (LlmBackend *be, guint n_rows, gsize width, guint32 n_kv,
      const LlmKvCache *kv_like, GError **error);

  /* x[t] = row ids[t] of the embedding table, for @n rows. Host arrays
   * (@ids here, positions in rope) are read before the call returns. */
  void (*embed) (LlmBackend *be, LlmBackendQueue *q, const LlmWeight *table,
      const gint32 *ids, guint n, float *x);

  /* y_i[t, :] = W_i x[t, :] for i < @n_w weights that read the same
   * input (Q, K and V; gate and up), @n rows of x (width W->n). One call
   * for all of them lets a backend convert the input once. */
  void (*matmul) (LlmBackend *be, LlmBackendQueue *q, const float *x, guint n,
      const LlmWeight *const *w, float *const *y, guint n_w);

  /* out[t] = rmsnorm(x[t]) * w for @n rows of @width (w NULL: no scale). */
  void (*rmsnorm) (LlmBackend *be, LlmBackendQueue *q, const float *x, const LlmWeight *w,
      float *out, guint n, gsize width, float eps);

  /* y[t] += b for @n rows of b->n. A vector weight's data is b->n
   * floats in the backend's memory, so it may also be an operand of add
   * or copy (a tower's position and class embeddings). */
  void (*add_bias) (LlmBackend *be, LlmBackendQueue *q, float *y, const LlmWeight *b,
      guint n);

  /* x += y over @n rows of @width: the residual connection. */
  void (*add) (LlmBackend *be, LlmBackendQueue *q, float *x, const float *y, guint n,
      gsize width);

  /* gate = silu(gate) * up over @n rows of @width. */
  void (*swiglu) (LlmBackend *be, LlmBackendQueue *q, float *gate, const float *up, guint n,
      gsize width);

  /* RoPE on @n rows of @n_heads heads of @head_dim, row t at position
   * pos[t]. */
  void (*rope) (LlmBackend *be, LlmBackendQueue *q, float *x, guint n, guint n_heads,
      guint head_dim, const guint32 *pos, const LlmRopeParams *rope);

  /* Stores the keys and values of each piece's rows in its cache at layer
   * @layer (quantising to the cache's type); k, v are [rows x kv_dim]. */
  void (*kv_store) (LlmBackend *be, LlmBackendQueue *q, guint layer,
      const LlmFwdPiece *pieces, guint n_pieces, const float *k, const float *v,
      gsize kv_dim);

  /* out[t] = softmax(scale * q[t] K^T) V over each piece's cache at
   * @layer, causal; q and out are [rows x n_head * head_dim]. */
  void (*attention) (LlmBackend *be, LlmBackendQueue *q, guint layer,
      const LlmFwdPiece *pieces, guint n_pieces, const LlmAttnShape *shape,
      const float *query, float *out);

  /* --- 3b. a vision tower's own ops --------------------------------- */
  /* out[t] = layernorm(x[t]) * w + b for @n rows of @width (w, b NULL: 1
   * and 0); @out may be @x. Mean and variance as ggml_norm takes them. */
  void (*layernorm) (LlmBackend *be, LlmBackendQueue *q, const float *x, const LlmWeight *w,
      const LlmWeight *b, float *out, guint n, gsize width, float eps);

  /* x = gelu(x) in place over @n rows of @width. */
  void (*gelu) (LlmBackend *be, LlmBackendQueue *q, float *x, guint n, gsize width,
      LlmGelu kind);

  /* Scratch for attention_full over at most @n_rows rows of @shape's
   * heads; fails with LLM_BACKEND_ERROR_MEMORY. */
  gboolean (*reserve_attention_full) (LlmBackend *be, guint n_rows, const LlmAttnShape *shape,
      GError **error);

  /* out[t] = softmax(scale * q[t] K^T) V per head over all @n rows of
   * @key and @value, every row seeing every row (no cache, no mask);
   * query, key, value and out are [n x n_head * head_dim] (n_head_kv ==
   * n_head). */
  void (*attention_full) (LlmBackend *be, LlmBackendQueue *q, const LlmAttnShape *shape,
      const float *query, const float *key, const float *value, guint n, float *out);

  /* --- 3c. an audio tower's own ops ---------------------------------- */
  /* rows[o] for output frames o < @n_out of a convolution of @shape over
   * @x: for each channel c its taps at [c * taps, c * taps + taps), the
   * layout of ggml's kernels [taps, n_ch, out], so matmul by the kernel
   * is the convolution. @rows holds n_out x n_ch * taps floats. */
  void (*conv1d_rows) (LlmBackend *be, LlmBackendQueue *q, const float *x,
      const LlmConv1dShape *shape, guint n_out, float *rows);

  /* y[r] = (x[2r] + x[2r + 1]) / 2 for r < @n_rows / 2 rows of @width (an
   * odd last row dropped, as nn.AvgPool1d (2, 2)); @y is not @x. */
  void (*avg_pool_pairs) (LlmBackend *be, LlmBackendQueue *q, const float *x, float *y,
      guint n_rows, gsize width);

  /* Releases the backend. */
  void (*destroy) (LlmBackend *be);
} LlmBackendOps;

struct _LlmBackend {
  const LlmBackendOps *ops;
  gint ref_count;               /* the engine and the weights it prepared */
};

/* --- the CPU backend ----------------------------------------------- */

/* Which CPU kernels a backend runs; BEST is the fastest the CPU has. The
 * others are for tests and comparisons: SCALAR is the reference every
 * fast kernel is checked against. */
typedef enum {
  LLM_CPU_KERNELS_BEST,
  LLM_CPU_KERNELS_SCALAR,
  LLM_CPU_KERNELS_AVX2,
  LLM_CPU_KERNELS_AVX512,
} LlmCpuKernelChoice;

#define LLM_BACKEND_ERROR (llm_backend_error_quark ())
GQuark llm_backend_error_quark (void);

typedef enum {
  LLM_BACKEND_ERROR_UNSUPPORTED,  /* kernels this CPU or build lacks */
  LLM_BACKEND_ERROR_MEMORY,
} LlmBackendError;

/* A CPU backend running @kernels on at most @max_threads workers. */
LlmBackend *llm_backend_cpu_new (LlmCpuKernelChoice kernels, int max_threads, GError **error);
/* The kernel set a CPU backend runs: "scalar", "avx2", "avx512". */
const char *llm_backend_cpu_kernels_name (LlmBackend *be);
/* The queue of a CPU backend for one chunk: the engine's worker pool. */
LlmBackendQueue *llm_backend_cpu_queue (gpointer thread_pool);
/* How a CPU backend's decode steps fetch their weights, as it has chosen
 * so far (fetch-choice.h): for stats and tests. NULL for another backend,
 * which has no such choice. */
const LlmFetchChoice *llm_backend_cpu_fetch (LlmBackend *be);

LlmBackend *llm_backend_ref (LlmBackend *be);
void llm_backend_unref (LlmBackend *be);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmBackend, llm_backend_unref)

/* The weights of @model prepared for @be: made on first use and kept on
 * the model, shared by every engine whose backend has the same
 * weights_key. Released with llm_weights_unref. */
LlmWeights *llm_weights_get (LlmModel *model, LlmBackend *be, GError **error);
void llm_weights_unref (LlmModel *model, LlmWeights *w);

G_END_DECLS
