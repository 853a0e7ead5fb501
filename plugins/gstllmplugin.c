/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The `llm` plugin: LLM inference as GStreamer elements, one element per
 * stage of inference. */
#include "config.h"

#include "gstllmelements.h"

static gboolean
plugin_init (GstPlugin *plugin)
{
  gboolean ok = FALSE;

  /* one element failing to register should not hide the others */
  ok |= GST_ELEMENT_REGISTER (llmtokenize, plugin);
  ok |= GST_ELEMENT_REGISTER (llmdetokenize, plugin);
  ok |= GST_ELEMENT_REGISTER (llmprefill, plugin);
  ok |= GST_ELEMENT_REGISTER (llmdecode, plugin);
  ok |= GST_ELEMENT_REGISTER (llmdraft, plugin);
  ok |= GST_ELEMENT_REGISTER (llmspecverify, plugin);
  ok |= GST_ELEMENT_REGISTER (llmvisionencode, plugin);
  ok |= GST_ELEMENT_REGISTER (llmtokencompress, plugin);
  ok |= GST_ELEMENT_REGISTER (llmaudioencode, plugin);
  return ok;
}

GST_PLUGIN_DEFINE (GST_VERSION_MAJOR, GST_VERSION_MINOR, llm,
    "LLM inference: tokenizer, prefill, decode, speculative decoding, detokenizer, "
    "vision and audio encoders, multimodal token compression",
    plugin_init, VERSION, "LGPL", GST_PACKAGE_NAME, GST_PACKAGE_ORIGIN)
