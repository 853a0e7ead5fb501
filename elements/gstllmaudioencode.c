/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-llmaudioencode
 * @title: llmaudioencode
 * @short_description: turns audio into the embedding rows of an audio language model
 *
 * llmaudioencode runs the audio tower and projector of an mmproj file (a
 * Whisper encoder with Ultravox's, Qwen2-Audio's or Voxtral's projector,
 * in llama.cpp's layout) on `audio/x-raw` and pushes
 * `application/x-llm-embeddings` (modality=audio, dim the language
 * model's width, projector the file's type): one buffer per chunk of
 * audio, a row of floats per token the language model takes.
 *
 * Audio of any rate and channel count (F32 or S16) is mixed to mono (the
 * channels' mean) and resampled to the encoder's 16 kHz with
 * libswresample, then cut into chunks of #GstLlmAudioEncode:chunk-duration
 * seconds, consecutive chunks sharing #GstLlmAudioEncode:overlap seconds.
 * Each chunk's log-mel spectrogram is Whisper's; by default it is padded
 * with silence to the encoder's 30 s window, as llama.cpp's mtmd encodes
 * audio (#GstLlmAudioEncode:pad-chunks).
 *
 * Each output buffer has the PTS of its chunk's first sample and lasts
 * until the next chunk starts (the last one: to its end), so overlapping
 * chunks, and the captions timed by them, follow one another; times count samples from the first buffer's PTS (a
 * DISCONT buffer or a GAP event starts the count again, after the audio
 * before it is encoded). Chunks quieter than #GstLlmAudioEncode:silence-threshold are
 * not encoded: a GAP event with their time goes downstream instead. EOS
 * encodes the audio no chunk has covered as one last, shorter chunk; a
 * flush drops the audio held.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 filesrc location=jfk.wav ! decodebin ! audioconvert ! \
 *     llmaudioencode mmproj=mmproj-ultravox.gguf chunk-duration=5 ! fakesink
 * ]| Encodes jfk.wav in 5 s chunks (three buffers for its 11 s).
 *
 * Since: 0.1
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include <gst/audio/audio.h>

#include "audio-chunker.h"
#include "audio-encoder.h"
#include "audio-mel.h"
#include "audio-resample.h"
#include "gstllmelements.h"
#include "gstllmmmproj.h"
#include "llm-caps.h"
#include "llm-meta.h"

GST_DEBUG_CATEGORY_STATIC (gst_llm_audio_encode_debug);
#define GST_CAT_DEFAULT gst_llm_audio_encode_debug

#define DEFAULT_MMPROJ NULL
#define DEFAULT_DEVICE "cpu"
#define DEFAULT_CHUNK_DURATION 5.0
#define DEFAULT_OVERLAP 0.0
/* The level floor of llm_audio_level_dbfs: nothing is quieter, so
 * nothing is dropped. */
#define DEFAULT_SILENCE_THRESHOLD -200.0
#define DEFAULT_PAD_CHUNKS TRUE
#define DEFAULT_N_THREADS 0
#define MAX_SECONDS 3600.0

enum {
  PROP_0,
  PROP_MMPROJ,
  PROP_DEVICE,
  PROP_ACTIVE_DEVICE,
  PROP_CHUNK_DURATION,
  PROP_OVERLAP,
  PROP_SILENCE_THRESHOLD,
  PROP_PAD_CHUNKS,
  PROP_N_THREADS,
};

#define GST_TYPE_LLM_AUDIO_ENCODE (gst_llm_audio_encode_get_type ())
G_DECLARE_FINAL_TYPE (GstLlmAudioEncode, gst_llm_audio_encode, GST, LLM_AUDIO_ENCODE,
    GstElement)

struct _GstLlmAudioEncode {
  GstElement parent;
  GstPad *sinkpad, *srcpad;

  /* properties; object lock */
  char *mmproj;
  char *device;
  double chunk_duration, overlap, silence_threshold;
  gboolean pad_chunks;
  guint n_threads;

  /* from NULL->READY to READY->NULL; caps and active_device also under the
   * object lock, as queries and property reads come from any thread */
  LlmMmproj *proj;
  const LlmMmprojAudio *audio;
  LlmAudioMel *mel;
  GstCaps *caps;
  const char *active_device;

  /* from READY->PAUSED to PAUSED->READY, streaming thread: the properties
   * as the stream started */
  gboolean pad;
  /* The tower with its weights prepared and its scratch for a whole
   * window, and the spectrogram and rows of one chunk. */
  LlmAudioEncoder *encoder;
  float *spec, *rows;
  LlmAudioChunker *chunker;
  gsize hop;                      /* samples between chunk starts */
  LlmAudioResampler *resampler;   /* from the sink caps */
  gsize bpf;                      /* bytes per input frame */
  GArray *pcm;                    /* scratch: resampled floats */
  GstSegment segment;
  GstClockTime t0;                /* time of the chunker's sample 0, or NONE */
  gboolean caps_pushed;
};

G_DEFINE_TYPE (GstLlmAudioEncode, gst_llm_audio_encode, GST_TYPE_ELEMENT);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (llmaudioencode, "llmaudioencode", GST_RANK_NONE,
    GST_TYPE_LLM_AUDIO_ENCODE, gst_llm_element_init (plugin));

/* Interleaved only: the resampler reads frames of all channels at once. */
#define SINK_CAPS \
  "audio/x-raw, format = (string) { " GST_AUDIO_NE (F32) ", " GST_AUDIO_NE (S16) " }, " \
  "rate = (int) [ 1, MAX ], channels = (int) [ 1, MAX ], layout = (string) interleaved"

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS (SINK_CAPS));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS (GST_LLM_CAPS_EMBEDDINGS ", modality = (string) " GST_LLM_MODALITY_AUDIO));

static GstClockTime
sample_time (const GstLlmAudioEncode *self, guint64 samples)
{
  return gst_util_uint64_scale (samples, GST_SECOND, self->audio->sample_rate);
}

/* Pushes one chunk of @n samples from @start: its embeddings, or a GAP
 * when it is quieter than the threshold. It stands for its first @own
 * samples, up to where the next chunk starts (all of them for the last),
 * so that chunks sharing an overlap do not overlap in time, nor do the
 * captions timed by them. */
static GstFlowReturn
push_chunk (GstLlmAudioEncode *self, const float *pcm, gsize n, guint64 start, gsize own)
{
  const GstClockTime pts = self->t0 + sample_time (self, start);
  const GstClockTime duration = sample_time (self, start + MIN (n, own))
      - sample_time (self, start);
  const double level = llm_audio_level_dbfs (pcm, n);
  GST_OBJECT_LOCK (self);
  const double threshold = self->silence_threshold;
  GST_OBJECT_UNLOCK (self);
  if (level < threshold) {
    GST_DEBUG_OBJECT (self, "chunk at %" GST_TIME_FORMAT " is %.1f dBFS, below %.1f: a gap",
        GST_TIME_ARGS (pts), level, threshold);
    gst_pad_push_event (self->srcpad, gst_event_new_gap (pts, duration));
    return GST_FLOW_OK;
  }
  const LlmMmprojAudio *a = self->audio;
  GError *error = NULL;
  guint got = 0;
  if (!llm_audio_encoder_encode_pcm (self->encoder, self->mel, pcm, n, self->pad, self->spec,
          self->rows, &got, &error)) {
    GST_ELEMENT_ERROR (self, STREAM, FAILED, ("Cannot encode a chunk of audio: %s.",
            error->message), (NULL));
    g_clear_error (&error);
    return GST_FLOW_ERROR;
  }
  GstBuffer *buf = gst_llm_embeddings_buffer_new (self->rows, got, a->n_out);
  /* Audio rows lie on no grid. */
  gst_buffer_add_llm_embeddings_meta (buf, got, 0, 0);
  GST_BUFFER_PTS (buf) = pts;
  GST_BUFFER_DURATION (buf) = duration;
  GST_LOG_OBJECT (self, "%u rows for %" G_GSIZE_FORMAT " samples at %" GST_TIME_FORMAT, got, n,
      GST_TIME_ARGS (pts));
  return gst_pad_push (self->srcpad, buf);
}

/* Every whole chunk the samples held make. */
static GstFlowReturn
push_chunks (GstLlmAudioEncode *self)
{
  const float *pcm;
  gsize n;
  guint64 start;
  GstFlowReturn ret = GST_FLOW_OK;
  while (ret == GST_FLOW_OK && llm_audio_chunker_next (self->chunker, &pcm, &n, &start))
    ret = push_chunk (self, pcm, n, start, self->hop);
  return ret;
}

/* The end of a stream (EOS, or a DISCONT that starts another): what the
 * resampler still holds, the whole chunks, the last shorter one. Then
 * the next sample starts a new count. */
static GstFlowReturn
finish_stream (GstLlmAudioEncode *self)
{
  GstFlowReturn ret = GST_FLOW_OK;
  GError *error = NULL;
  if (self->resampler != NULL) {
    g_array_set_size (self->pcm, 0);
    if (!llm_audio_resampler_drain (self->resampler, self->pcm, &error)) {
      GST_ELEMENT_ERROR (self, STREAM, FAILED, ("Cannot resample the audio: %s.",
              error->message), (NULL));
      g_error_free (error);
      return GST_FLOW_ERROR;
    }
    llm_audio_chunker_push (self->chunker, (const float *) self->pcm->data, self->pcm->len);
  }
  if (self->t0 != GST_CLOCK_TIME_NONE) {
    ret = push_chunks (self);
    const float *pcm;
    gsize n;
    guint64 start;
    if (ret == GST_FLOW_OK && llm_audio_chunker_last (self->chunker, &pcm, &n, &start))
      ret = push_chunk (self, pcm, n, start, n);
  }
  llm_audio_chunker_reset (self->chunker);
  self->t0 = GST_CLOCK_TIME_NONE;
  return ret;
}

/* Forgets the audio held (a flush). */
static void
drop_stream (GstLlmAudioEncode *self)
{
  if (self->chunker)
    llm_audio_chunker_reset (self->chunker);
  if (self->resampler)
    llm_audio_resampler_reset (self->resampler);
  self->t0 = GST_CLOCK_TIME_NONE;
}

static GstFlowReturn
gst_llm_audio_encode_chain (GstPad *pad, GstObject *parent, GstBuffer *buf)
{
  GstLlmAudioEncode *self = GST_LLM_AUDIO_ENCODE (parent);
  GstFlowReturn ret = GST_FLOW_OK;

  if (self->resampler == NULL) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("No audio caps before the first buffer."),
        (NULL));
    gst_buffer_unref (buf);
    return GST_FLOW_NOT_NEGOTIATED;
  }
  if (GST_BUFFER_IS_DISCONT (buf) && self->t0 != GST_CLOCK_TIME_NONE) {
    GST_DEBUG_OBJECT (self, "discontinuity: the audio held so far ends a stream");
    ret = finish_stream (self);
    if (ret != GST_FLOW_OK) {
      gst_buffer_unref (buf);
      return ret;
    }
  }
  if (self->t0 == GST_CLOCK_TIME_NONE) {
    self->t0 = GST_BUFFER_PTS_IS_VALID (buf) ? GST_BUFFER_PTS (buf)
        : self->segment.format == GST_FORMAT_TIME ? self->segment.start : 0;
  }

  GstMapInfo map;
  if (!gst_buffer_map (buf, &map, GST_MAP_READ)) {
    GST_ELEMENT_ERROR (self, STREAM, FAILED, ("Cannot read an input buffer."), (NULL));
    gst_buffer_unref (buf);
    return GST_FLOW_ERROR;
  }
  GError *error = NULL;
  g_array_set_size (self->pcm, 0);
  const gboolean ok = map.size % self->bpf == 0
      && llm_audio_resampler_push (self->resampler, map.data, map.size / self->bpf, self->pcm,
          &error);
  gst_buffer_unmap (buf, &map);
  gst_buffer_unref (buf);
  if (!ok) {
    GST_ELEMENT_ERROR (self, STREAM, FAILED, ("Cannot resample the audio: %s.",
            error ? error->message : "a buffer holds part of a frame"), (NULL));
    g_clear_error (&error);
    return GST_FLOW_ERROR;
  }
  llm_audio_chunker_push (self->chunker, (const float *) self->pcm->data, self->pcm->len);
  return push_chunks (self);
}

/* New sink caps: a resampler for them, and our caps downstream. */
static gboolean
set_caps (GstLlmAudioEncode *self, GstCaps *caps)
{
  GstAudioInfo info;
  if (!gst_audio_info_from_caps (&info, caps)) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Cannot read the audio caps."),
        ("%" GST_PTR_FORMAT, caps));
    return FALSE;
  }
  /* The audio held so far was of the old format: encode it first. */
  if (self->resampler != NULL && finish_stream (self) != GST_FLOW_OK)
    return FALSE;
  GError *error = NULL;
  const LlmAudioFormat format = GST_AUDIO_INFO_FORMAT (&info) == GST_AUDIO_FORMAT_S16
      ? LLM_AUDIO_FORMAT_S16 : LLM_AUDIO_FORMAT_F32;
  LlmAudioResampler *r = llm_audio_resampler_new (format, GST_AUDIO_INFO_RATE (&info),
      GST_AUDIO_INFO_CHANNELS (&info), self->audio->sample_rate, &error);
  if (r == NULL) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Cannot take this audio: %s.", error->message),
        ("%" GST_PTR_FORMAT, caps));
    g_error_free (error);
    return FALSE;
  }
  g_clear_pointer (&self->resampler, llm_audio_resampler_free);
  self->resampler = r;
  self->bpf = GST_AUDIO_INFO_BPF (&info);
  GST_DEBUG_OBJECT (self, "%d channels at %d Hz to mono at %u Hz", GST_AUDIO_INFO_CHANNELS (&info),
      GST_AUDIO_INFO_RATE (&info), self->audio->sample_rate);
  if (!self->caps_pushed) {
    GST_OBJECT_LOCK (self);
    GstCaps *ours = gst_caps_ref (self->caps);
    GST_OBJECT_UNLOCK (self);
    self->caps_pushed = gst_pad_push_event (self->srcpad, gst_event_new_caps (ours));
    gst_caps_unref (ours);
    if (!self->caps_pushed) {
      GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Downstream does not take these embeddings."),
          ("%" GST_PTR_FORMAT, self->caps));
      return FALSE;
    }
  }
  return TRUE;
}

static gboolean
gst_llm_audio_encode_sink_event (GstPad *pad, GstObject *parent, GstEvent *event)
{
  GstLlmAudioEncode *self = GST_LLM_AUDIO_ENCODE (parent);

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_CAPS: {
      GstCaps *caps;
      gst_event_parse_caps (event, &caps);
      const gboolean ok = set_caps (self, caps);
      gst_event_unref (event);
      return ok;
    }
    case GST_EVENT_SEGMENT:
      gst_event_copy_segment (event, &self->segment);
      break;
    case GST_EVENT_EOS:
      /* Errors are posted; EOS goes on so the pipeline ends either way. */
      if (self->chunker != NULL)
        finish_stream (self);
      break;
    case GST_EVENT_GAP:
      /* No audio for a while: the samples held end a stream, and the next
       * buffer's PTS starts the count again (as a DISCONT does). */
      if (self->chunker != NULL && self->t0 != GST_CLOCK_TIME_NONE)
        finish_stream (self);
      break;
    case GST_EVENT_FLUSH_STOP:
      drop_stream (self);
      gst_segment_init (&self->segment, GST_FORMAT_UNDEFINED);
      break;
    default:
      break;
  }
  return gst_pad_event_default (pad, parent, event);
}

static gboolean
gst_llm_audio_encode_src_query (GstPad *pad, GstObject *parent, GstQuery *query)
{
  GstLlmAudioEncode *self = GST_LLM_AUDIO_ENCODE (parent);

  switch (GST_QUERY_TYPE (query)) {
    case GST_QUERY_CAPS: {
      GST_OBJECT_LOCK (self);
      GstCaps *caps = self->caps ? gst_caps_ref (self->caps)
          : gst_pad_get_pad_template_caps (pad);
      GST_OBJECT_UNLOCK (self);
      return gst_llm_answer_caps_query (query, caps);
    }
    case GST_QUERY_LATENCY: {
      /* A chunk goes out when its last sample is in: that is a chunk's
       * time after its first. */
      if (!gst_pad_peer_query (self->sinkpad, query))
        return FALSE;
      gboolean live;
      GstClockTime min, max;
      gst_query_parse_latency (query, &live, &min, &max);
      GST_OBJECT_LOCK (self);
      const GstClockTime chunk = (GstClockTime) (self->chunk_duration * GST_SECOND);
      GST_OBJECT_UNLOCK (self);
      min += chunk;
      if (max != GST_CLOCK_TIME_NONE)
        max += chunk;
      gst_query_set_latency (query, live, min, max);
      return TRUE;
    }
    default:
      return gst_pad_query_default (pad, parent, query);
  }
}

/* Loads the file and checks the device, at NULL->READY, so a bad file or
 * device fails the first state change and caps queries in READY answer. */
static gboolean
open_encoder (GstLlmAudioEncode *self)
{
  GST_OBJECT_LOCK (self);
  g_autofree char *path = g_strdup (self->mmproj);
  g_autofree char *device = g_strdup (self->device);
  GST_OBJECT_UNLOCK (self);

  /* The audio encoder runs on the CPU alone for now. */
  if (g_strcmp0 (device, "cpu") != 0) {
    GST_ELEMENT_ERROR (self, RESOURCE, NOT_FOUND,
        ("Device \"%s\" is not available for audio encoding. Available: cpu.", device),
        ("set the device property to cpu"));
    return FALSE;
  }
  LlmMmproj *proj = GST_LLM_LOAD_MMPROJ (self, path, LLM_MMPROJ_TOWER_AUDIO);
  if (proj == NULL)
    return FALSE;
  const LlmMmprojAudio *a = llm_mmproj_audio (proj);
  GError *error = NULL;
  LlmAudioMel *mel = llm_audio_mel_new_for (a, &error);
  if (mel == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, FAILED, ("Cannot make the audio front end of \"%s\": %s.",
            path, error->message), (NULL));
    g_error_free (error);
    llm_mmproj_free (proj);
    return FALSE;
  }
  GstCaps *caps = gst_llm_caps_new_embeddings (a->n_out, GST_LLM_MODALITY_AUDIO,
      llm_mmproj_type_name (a->type));
  GST_OBJECT_LOCK (self);
  self->proj = proj;
  self->audio = a;
  self->mel = mel;
  self->caps = caps;
  self->active_device = "cpu";
  GST_OBJECT_UNLOCK (self);
  GST_INFO_OBJECT (self, "%s: %s audio tower, %u layers of %u, rows of %u", path,
      llm_mmproj_type_name (a->type), a->n_layer, a->n_embd, a->n_out);
  return TRUE;
}

static void
close_encoder (GstLlmAudioEncode *self)
{
  GST_OBJECT_LOCK (self);
  g_clear_pointer (&self->caps, gst_caps_unref);
  self->active_device = NULL;
  GST_OBJECT_UNLOCK (self);
  g_clear_pointer (&self->mel, llm_audio_mel_free);
  g_clear_pointer (&self->proj, llm_mmproj_free);
  self->audio = NULL;
}

static void stop_stream (GstLlmAudioEncode *self);

/* Latches the chunking properties and makes the stream's encoder at
 * READY->PAUSED: its weights are prepared once for every chunk. */
static gboolean
start_stream (GstLlmAudioEncode *self)
{
  const LlmMmprojAudio *a = self->audio;
  GST_OBJECT_LOCK (self);
  const double chunk = self->chunk_duration, overlap = self->overlap;
  self->pad = self->pad_chunks;
  const guint n_threads = self->n_threads;
  GST_OBJECT_UNLOCK (self);

  const double window = (double) a->n_frames_max * a->hop / a->sample_rate;
  const gsize chunk_samples = (gsize) llround (chunk * a->sample_rate);
  const gsize overlap_samples = (gsize) llround (overlap * a->sample_rate);
  if (chunk_samples < 1 || llm_audio_chunk_frames (a, chunk_samples, FALSE) == 0) {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS, ("chunk-duration %g s does not fit the "
            "encoder's window of %g s.", chunk, window), ("set chunk-duration to at most %g",
            window));
    return FALSE;
  }
  if (overlap_samples >= chunk_samples) {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS, ("overlap %g s is not shorter than "
            "chunk-duration %g s.", overlap, chunk), ("set overlap below chunk-duration"));
    return FALSE;
  }
  GError *error = NULL;
  self->encoder = llm_audio_encoder_new (self->proj, (int) n_threads, &error);
  if (self->encoder == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, FAILED, ("Cannot make the audio encoder: %s.",
            error->message), ("check n-threads (%u) and the mmproj file", n_threads));
    g_error_free (error);
    return FALSE;
  }
  self->spec = g_try_new (float, (gsize) a->n_mel * a->n_frames_max);
  self->rows = g_try_new (float, (gsize) llm_audio_encoder_max_rows (self->encoder)
      * a->n_out);
  if (self->spec == NULL || self->rows == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, FAILED, ("Out of memory for a chunk's spectrogram "
            "and rows."), (NULL));
    stop_stream (self);
    return FALSE;
  }
  GST_INFO_OBJECT (self, "encoding on %d threads, %s",
      llm_audio_encoder_n_threads (self->encoder),
      llm_audio_encoder_backend_name (self->encoder));
  self->chunker = llm_audio_chunker_new (chunk_samples, overlap_samples);
  self->hop = chunk_samples - overlap_samples;
  self->pcm = g_array_new (FALSE, FALSE, sizeof (float));
  self->t0 = GST_CLOCK_TIME_NONE;
  self->caps_pushed = FALSE;
  gst_segment_init (&self->segment, GST_FORMAT_UNDEFINED);
  return TRUE;
}

static void
stop_stream (GstLlmAudioEncode *self)
{
  g_clear_pointer (&self->chunker, llm_audio_chunker_free);
  g_clear_pointer (&self->resampler, llm_audio_resampler_free);
  g_clear_pointer (&self->encoder, llm_audio_encoder_free);
  g_clear_pointer (&self->spec, g_free);
  g_clear_pointer (&self->rows, g_free);
  g_clear_pointer (&self->pcm, g_array_unref);
}

static GstStateChangeReturn
gst_llm_audio_encode_change_state (GstElement *element, GstStateChange transition)
{
  GstLlmAudioEncode *self = GST_LLM_AUDIO_ENCODE (element);

  if (transition == GST_STATE_CHANGE_NULL_TO_READY && !open_encoder (self))
    return GST_STATE_CHANGE_FAILURE;
  if (transition == GST_STATE_CHANGE_READY_TO_PAUSED && !start_stream (self))
    return GST_STATE_CHANGE_FAILURE;

  GstStateChangeReturn ret =
      GST_ELEMENT_CLASS (gst_llm_audio_encode_parent_class)->change_state (element, transition);

  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY
      || (transition == GST_STATE_CHANGE_READY_TO_PAUSED && ret == GST_STATE_CHANGE_FAILURE))
    stop_stream (self);
  if (transition == GST_STATE_CHANGE_READY_TO_NULL
      || (transition == GST_STATE_CHANGE_NULL_TO_READY && ret == GST_STATE_CHANGE_FAILURE))
    close_encoder (self);
  return ret;
}

static void
gst_llm_audio_encode_set_property (GObject *object, guint prop_id, const GValue *value,
    GParamSpec *pspec)
{
  GstLlmAudioEncode *self = GST_LLM_AUDIO_ENCODE (object);

  GST_OBJECT_LOCK (self);
  /* The file is opened at NULL->READY (open_encoder), the stream's
   * chunking latched at READY->PAUSED (start_stream). */
  if (pspec->flags & GST_PARAM_MUTABLE_READY)
    gst_llm_note_late_setting (GST_ELEMENT (self), pspec, prop_id == PROP_MMPROJ
        || prop_id == PROP_DEVICE ? GST_STATE_CHANGE_NULL_TO_READY
        : GST_STATE_CHANGE_READY_TO_PAUSED);
  switch (prop_id) {
    case PROP_MMPROJ:
      g_free (self->mmproj);
      self->mmproj = g_value_dup_string (value);
      break;
    case PROP_DEVICE:
      g_free (self->device);
      self->device = g_value_dup_string (value);
      if (self->device == NULL)
        self->device = g_strdup (DEFAULT_DEVICE);
      break;
    case PROP_CHUNK_DURATION:
      self->chunk_duration = g_value_get_double (value);
      break;
    case PROP_OVERLAP:
      self->overlap = g_value_get_double (value);
      break;
    case PROP_SILENCE_THRESHOLD:
      self->silence_threshold = g_value_get_double (value);
      break;
    case PROP_PAD_CHUNKS:
      self->pad_chunks = g_value_get_boolean (value);
      break;
    case PROP_N_THREADS:
      self->n_threads = g_value_get_uint (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_audio_encode_get_property (GObject *object, guint prop_id, GValue *value,
    GParamSpec *pspec)
{
  GstLlmAudioEncode *self = GST_LLM_AUDIO_ENCODE (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MMPROJ:
      g_value_set_string (value, self->mmproj);
      break;
    case PROP_DEVICE:
      g_value_set_string (value, self->device);
      break;
    case PROP_ACTIVE_DEVICE:
      g_value_set_string (value, self->active_device);
      break;
    case PROP_CHUNK_DURATION:
      g_value_set_double (value, self->chunk_duration);
      break;
    case PROP_OVERLAP:
      g_value_set_double (value, self->overlap);
      break;
    case PROP_SILENCE_THRESHOLD:
      g_value_set_double (value, self->silence_threshold);
      break;
    case PROP_PAD_CHUNKS:
      g_value_set_boolean (value, self->pad_chunks);
      break;
    case PROP_N_THREADS:
      g_value_set_uint (value, self->n_threads);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_audio_encode_finalize (GObject *object)
{
  GstLlmAudioEncode *self = GST_LLM_AUDIO_ENCODE (object);

  stop_stream (self);
  close_encoder (self);
  g_free (self->mmproj);
  g_free (self->device);
  G_OBJECT_CLASS (gst_llm_audio_encode_parent_class)->finalize (object);
}

static void
gst_llm_audio_encode_init (GstLlmAudioEncode *self)
{
  self->sinkpad = gst_pad_new_from_static_template (&sink_template, "sink");
  gst_pad_set_chain_function (self->sinkpad, GST_DEBUG_FUNCPTR (gst_llm_audio_encode_chain));
  gst_pad_set_event_function (self->sinkpad,
      GST_DEBUG_FUNCPTR (gst_llm_audio_encode_sink_event));
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);

  self->srcpad = gst_pad_new_from_static_template (&src_template, "src");
  gst_pad_set_query_function (self->srcpad, GST_DEBUG_FUNCPTR (gst_llm_audio_encode_src_query));
  gst_pad_use_fixed_caps (self->srcpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);

  self->mmproj = g_strdup (DEFAULT_MMPROJ);
  self->device = g_strdup (DEFAULT_DEVICE);
  self->chunk_duration = DEFAULT_CHUNK_DURATION;
  self->overlap = DEFAULT_OVERLAP;
  self->silence_threshold = DEFAULT_SILENCE_THRESHOLD;
  self->pad_chunks = DEFAULT_PAD_CHUNKS;
  self->n_threads = DEFAULT_N_THREADS;
  self->t0 = GST_CLOCK_TIME_NONE;
}

static void
gst_llm_audio_encode_class_init (GstLlmAudioEncodeClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);

  GST_DEBUG_CATEGORY_INIT (gst_llm_audio_encode_debug, "llmaudioencode", 0,
      "gst-llm audio encoder");

  gobject_class->set_property = gst_llm_audio_encode_set_property;
  gobject_class->get_property = gst_llm_audio_encode_get_property;
  gobject_class->finalize = gst_llm_audio_encode_finalize;

  /**
   * GstLlmAudioEncode:mmproj:
   *
   * The multimodal projector file (GGUF, llama.cpp's mmproj layout) whose
   * audio tower encodes: one with `clip.has_audio_encoder` and a projector
   * of type ultravox, qwen2a or voxtral. Read when the element goes to
   * READY; a missing or unusable file is an error then.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_MMPROJ,
      g_param_spec_string ("mmproj", "Projector file",
          "mmproj GGUF file with an audio tower (Ultravox, Qwen2-Audio or Voxtral)",
          DEFAULT_MMPROJ, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
          GST_PARAM_MUTABLE_READY));

  /**
   * GstLlmAudioEncode:device:
   *
   * Where the encoder runs. Only `cpu` today: any other name is an error
   * at the change to READY that names it; nothing falls back silently.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_DEVICE,
      g_param_spec_string ("device", "Device", "Device to run on (only cpu for now)",
          DEFAULT_DEVICE, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
          GST_PARAM_MUTABLE_READY));

  /**
   * GstLlmAudioEncode:active-device:
   *
   * The device the encoder runs on, from READY on (NULL before).
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_ACTIVE_DEVICE,
      g_param_spec_string ("active-device", "Active device", "The device the encoder runs on",
          NULL, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));

  /**
   * GstLlmAudioEncode:chunk-duration:
   *
   * Seconds of audio per output buffer. The encoder's window bounds it
   * (30 s for Whisper's towers): a longer one is an error at the change to
   * PAUSED. Shorter chunks come out sooner (the element's latency is one
   * chunk), longer ones give the model more context each.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_CHUNK_DURATION,
      g_param_spec_double ("chunk-duration", "Chunk duration",
          "Seconds of audio per output buffer (at most the encoder's 30 s window)",
          0.01, MAX_SECONDS, DEFAULT_CHUNK_DURATION, G_PARAM_READWRITE |
          G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY));

  /**
   * GstLlmAudioEncode:overlap:
   *
   * Seconds each chunk shares with the one before it: chunks start
   * chunk-duration - overlap apart, so a word cut by one chunk's end is
   * whole in the next. Must be shorter than chunk-duration.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_OVERLAP,
      g_param_spec_double ("overlap", "Overlap",
          "Seconds each chunk shares with the one before (less than chunk-duration)",
          0.0, MAX_SECONDS, DEFAULT_OVERLAP, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
          GST_PARAM_MUTABLE_READY));

  /**
   * GstLlmAudioEncode:silence-threshold:
   *
   * An energy gate, in dBFS: a chunk whose RMS level (of the mono 16 kHz
   * signal the encoder hears; full scale is 1.0 in F32, 32768 in S16) is
   * below it is not encoded, and a GAP event with its time goes
   * downstream instead of a buffer. Levels are floored at -200 dBFS
   * (digital silence), so the default, -200, lets every chunk through;
   * -60 drops chunks of silence or faint noise.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_SILENCE_THRESHOLD,
      g_param_spec_double ("silence-threshold", "Silence threshold",
          "Chunks whose RMS level is below this many dBFS are dropped (a GAP event instead); "
          "-200 drops none", -200.0, 0.0, DEFAULT_SILENCE_THRESHOLD, G_PARAM_READWRITE |
          G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING));

  /**
   * GstLlmAudioEncode:pad-chunks:
   *
   * Whether each chunk is padded with silence to the encoder's whole
   * window (30 s) before encoding, as llama.cpp's mtmd does and as Whisper,
   * Qwen2-Audio and Voxtral were trained: every chunk then gives the same
   * number of rows (188 for Ultravox, 750 for Qwen2-Audio, 375 for
   * Voxtral), most of them of that silence. Off, a chunk is encoded from
   * its own frames alone (Ultravox's encoder takes such shorter input),
   * and gives rows in proportion to its length.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_PAD_CHUNKS,
      g_param_spec_boolean ("pad-chunks", "Pad chunks",
          "Pad each chunk with silence to the encoder's 30 s window, as llama.cpp does "
          "(off: encode the chunk's own frames, fewer rows)", DEFAULT_PAD_CHUNKS,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY));

  /**
   * GstLlmAudioEncode:n-threads:
   *
   * Worker threads of the encoder; 0 uses one per core. The workers are
   * the process's pool of that count (lib/workers.h), shared with the
   * language model elements of the same n-threads: an encode and a
   * forward pass take turns on the cores instead of fighting over them.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_N_THREADS,
      g_param_spec_uint ("n-threads", "Threads",
          "Worker threads of the audio encoder (0 = one per core)", 0, 1024,
          DEFAULT_N_THREADS,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "LLM audio encoder",
      "Codec/Encoder/Audio",
      "Encodes audio into the embedding rows of an audio language model "
      "(the Whisper tower and projector of an mmproj file)",
      "gst-llm contributors");
  gst_element_class_add_static_metadata (element_class, "example",
      "filesrc location=jfk.wav ! decodebin ! audioconvert ! "
      "llmaudioencode mmproj=mmproj-ultravox.gguf ! fakesink");

  element_class->change_state = GST_DEBUG_FUNCPTR (gst_llm_audio_encode_change_state);
}
