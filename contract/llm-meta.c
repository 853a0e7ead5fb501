/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "llm-meta.h"

/* The contract is a static library, so the plugin module and a program
 * that loads it (a test, an application reading these metas) each hold a
 * copy of the functions below and of their once-flags, while GType and
 * meta names are process-wide: registering a name twice fails and leaves
 * the second copy with type 0. Whichever copy comes second takes what
 * the first registered under the same name. */
static GType
api_type (const char *name)
{
  static const gchar *tags[] = { NULL };
  GType t = g_type_from_name (name);
  return t ? t : gst_meta_api_type_register (name, tags);
}

static const GstMetaInfo *
meta_info (GType api, const char *impl, gsize size, GstMetaInitFunction init,
    GstMetaFreeFunction free_func, GstMetaTransformFunction transform)
{
  const GstMetaInfo *info = gst_meta_get_info (impl);
  return info ? info : gst_meta_register (api, impl, size, init, free_func, transform);
}

GType
gst_llm_session_meta_api_get_type (void)
{
  static GType type = 0;
  if (g_once_init_enter (&type))
    g_once_init_leave (&type, api_type ("GstLlmSessionMetaAPI"));
  return type;
}

static gboolean
meta_init (GstMeta *meta, gpointer params, GstBuffer *buffer)
{
  GstLlmSessionMeta *m = (GstLlmSessionMeta *) meta;
  m->session = NULL;
  m->prompt_pts = GST_CLOCK_TIME_NONE;
  m->prompt_time_us = 0;
  m->prompt_tokens = 0;
  m->logits_pending = FALSE;
  m->prompt_serial = 0;
  m->taken = NULL;
  return TRUE;
}

static void
meta_free (GstMeta *meta, GstBuffer *buffer)
{
  GstLlmSessionMeta *m = (GstLlmSessionMeta *) meta;
  llm_session_unref (m->session);
  m->session = NULL;
  g_clear_pointer (&m->taken, g_atomic_rc_box_release);
}

static gboolean
meta_transform (GstBuffer *dest, GstMeta *meta, GstBuffer *src, GQuark type, gpointer data)
{
  const GstLlmSessionMeta *m = (const GstLlmSessionMeta *) meta;
  GstLlmSessionMeta *d = gst_buffer_add_llm_session_meta (dest, m->session);
  d->prompt_pts = m->prompt_pts;
  d->prompt_time_us = m->prompt_time_us;
  d->prompt_tokens = m->prompt_tokens;
  d->logits_pending = m->logits_pending;
  d->prompt_serial = m->prompt_serial;
  g_atomic_rc_box_release (d->taken);
  d->taken = g_atomic_rc_box_acquire (m->taken);
  return TRUE;
}

const GstMetaInfo *
gst_llm_session_meta_get_info (void)
{
  static const GstMetaInfo *info = NULL;
  if (g_once_init_enter ((GstMetaInfo **) &info)) {
    const GstMetaInfo *i = meta_info (GST_LLM_SESSION_META_API_TYPE,
        "GstLlmSessionMeta", sizeof (GstLlmSessionMeta), meta_init, meta_free,
        meta_transform);
    g_once_init_leave ((GstMetaInfo **) &info, (GstMetaInfo *) i);
  }
  return info;
}

GstLlmSessionMeta *
gst_buffer_add_llm_session_meta (GstBuffer *buffer, LlmSession *session)
{
  GstLlmSessionMeta *m = (GstLlmSessionMeta *) gst_buffer_add_meta (buffer,
      gst_llm_session_meta_get_info (), NULL);
  m->session = llm_session_ref (session);
  m->taken = g_atomic_rc_box_new0 (gint);
  return m;
}

gboolean
gst_llm_session_meta_take (GstLlmSessionMeta *meta)
{
  return g_atomic_int_compare_and_exchange (meta->taken, 0, 1);
}

/* --- GstLlmDraftMeta ----------------------------------------------------- */

GType
gst_llm_draft_meta_api_get_type (void)
{
  static GType type = 0;
  if (g_once_init_enter (&type))
    g_once_init_leave (&type, api_type ("GstLlmDraftMetaAPI"));
  return type;
}

static gboolean
draft_meta_init (GstMeta *meta, gpointer params, GstBuffer *buffer)
{
  GstLlmDraftMeta *m = (GstLlmDraftMeta *) meta;
  m->drafter = NULL;
  m->ahead = FALSE;
  m->pushed_from = NULL;
  return TRUE;
}

static void
draft_meta_free (GstMeta *meta, GstBuffer *buffer)
{
  GstLlmDraftMeta *m = (GstLlmDraftMeta *) meta;
  llm_drafter_unref (m->drafter);
  m->drafter = NULL;
  g_clear_pointer (&m->pushed_from, g_thread_unref);
}

static gboolean
draft_meta_transform (GstBuffer *dest, GstMeta *meta, GstBuffer *src, GQuark type,
    gpointer data)
{
  const GstLlmDraftMeta *from = (const GstLlmDraftMeta *) meta;
  GstLlmDraftMeta *to = gst_buffer_add_llm_draft_meta (dest, from->drafter);
  to->ahead = from->ahead;
  to->pushed_from = from->pushed_from ? g_thread_ref (from->pushed_from) : NULL;
  return TRUE;
}

const GstMetaInfo *
gst_llm_draft_meta_get_info (void)
{
  static const GstMetaInfo *info = NULL;
  if (g_once_init_enter ((GstMetaInfo **) &info)) {
    const GstMetaInfo *i = meta_info (GST_LLM_DRAFT_META_API_TYPE,
        "GstLlmDraftMeta", sizeof (GstLlmDraftMeta), draft_meta_init, draft_meta_free,
        draft_meta_transform);
    g_once_init_leave ((GstMetaInfo **) &info, (GstMetaInfo *) i);
  }
  return info;
}

GstLlmDraftMeta *
gst_buffer_add_llm_draft_meta (GstBuffer *buffer, LlmDrafter *drafter)
{
  GstLlmDraftMeta *m = (GstLlmDraftMeta *) gst_buffer_add_meta (buffer,
      gst_llm_draft_meta_get_info (), NULL);
  m->drafter = llm_drafter_ref (drafter);
  return m;
}

/* --- GstLlmEmbeddingsMeta ------------------------------------------------ */

GType
gst_llm_embeddings_meta_api_get_type (void)
{
  static GType type = 0;
  if (g_once_init_enter (&type))
    g_once_init_leave (&type, api_type ("GstLlmEmbeddingsMetaAPI"));
  return type;
}

static gboolean
embd_meta_init (GstMeta *meta, gpointer params, GstBuffer *buffer)
{
  GstLlmEmbeddingsMeta *m = (GstLlmEmbeddingsMeta *) meta;
  m->grid_w = m->grid_h = m->n_source_rows = m->n_rows = 0;
  m->tiles_x = m->tiles_y = 0;
  m->saliency = m->sizes = NULL;
  return TRUE;
}

static void
embd_meta_free (GstMeta *meta, GstBuffer *buffer)
{
  GstLlmEmbeddingsMeta *m = (GstLlmEmbeddingsMeta *) meta;
  g_clear_pointer (&m->saliency, g_free);
  g_clear_pointer (&m->sizes, g_free);
}

static gboolean
embd_meta_transform (GstBuffer *dest, GstMeta *meta, GstBuffer *src, GQuark type,
    gpointer data)
{
  const GstLlmEmbeddingsMeta *m = (const GstLlmEmbeddingsMeta *) meta;
  GstLlmEmbeddingsMeta *d = gst_buffer_add_llm_embeddings_meta (dest, m->n_rows, m->grid_w,
      m->grid_h);
  d->n_source_rows = m->n_source_rows;
  d->tiles_x = m->tiles_x;
  d->tiles_y = m->tiles_y;
  if (m->saliency)
    gst_llm_embeddings_meta_set_saliency (d, m->saliency);
  if (m->sizes)
    gst_llm_embeddings_meta_set_sizes (d, m->sizes, m->n_rows);
  return TRUE;
}

const GstMetaInfo *
gst_llm_embeddings_meta_get_info (void)
{
  static const GstMetaInfo *info = NULL;
  if (g_once_init_enter ((GstMetaInfo **) &info)) {
    const GstMetaInfo *i = meta_info (GST_LLM_EMBEDDINGS_META_API_TYPE,
        "GstLlmEmbeddingsMeta", sizeof (GstLlmEmbeddingsMeta), embd_meta_init,
        embd_meta_free, embd_meta_transform);
    g_once_init_leave ((GstMetaInfo **) &info, (GstMetaInfo *) i);
  }
  return info;
}

GstLlmEmbeddingsMeta *
gst_buffer_add_llm_embeddings_meta (GstBuffer *buffer, guint n_rows, guint grid_w,
    guint grid_h)
{
  GstLlmEmbeddingsMeta *m = (GstLlmEmbeddingsMeta *) gst_buffer_add_meta (buffer,
      gst_llm_embeddings_meta_get_info (), NULL);
  m->n_rows = n_rows;
  m->n_source_rows = n_rows;
  m->grid_w = grid_w;
  m->grid_h = grid_h;
  return m;
}

void
gst_llm_embeddings_meta_set_saliency (GstLlmEmbeddingsMeta *m, const float *saliency)
{
  g_free (m->saliency);
  m->saliency = saliency ? g_memdup2 (saliency, m->n_rows * sizeof (float)) : NULL;
}

void
gst_llm_embeddings_meta_set_sizes (GstLlmEmbeddingsMeta *m, const float *sizes, guint n_rows)
{
  if (n_rows != m->n_rows) {
    /* The rows changed: a saliency for the old rows means nothing now. */
    g_clear_pointer (&m->saliency, g_free);
    m->n_rows = n_rows;
  }
  g_free (m->sizes);
  m->sizes = sizes ? g_memdup2 (sizes, n_rows * sizeof (float)) : NULL;
}
