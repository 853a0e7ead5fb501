// SPDX-License-Identifier: LGPL-2.1-or-later
// llama.cpp's own log-mel spectrogram and audio embeddings of some PCM,
// for gst-llm's audio golden data (tools/make-audio-golden.sh builds this
// against llama.cpp's mtmd, built natively from the bundle in
// node-llama-cpp, outside the tree).
//
//   mtmd-audio-embed MMPROJ PCM.f32 MEL.f32 MEL_FRAMES OUT.f32 OUT_ROWS
//
// PCM.f32: 16 kHz mono float samples. MEL.f32: the first MEL_FRAMES
// frames of every bin of the first 30 s window mtmd's Whisper front end
// makes of them (bin-major). OUT.f32: the first OUT_ROWS rows of that
// window's embeddings (all of them if 0). Both sides are fed the same
// decoded samples: nothing here decodes audio.
#include "clip.h"
#include "clip-impl.h"
#include "mtmd-audio.h"
#include <cstdio>
#include <cstdlib>
#include <vector>
int main (int argc, char **argv) {
  if (argc != 7) {
    fprintf (stderr, "usage: mmproj pcm.f32 mel.f32 mel_frames out.f32 out_rows\n");
    return 2;
  }
  clip_context_params p {};
  p.use_gpu = false; p.flash_attn_type = CLIP_FLASH_ATTN_TYPE_DISABLED;
  p.image_min_tokens = -1; p.image_max_tokens = -1; p.warmup = false;
  clip_init_result r = clip_init (argv[1], p);
  if (!r.ctx_a) { fprintf (stderr, "clip_init found no audio tower\n"); return 1; }
  FILE *f = fopen (argv[2], "rb");
  if (!f) return 1;
  std::vector<float> pcm;
  float s;
  while (fread (&s, sizeof s, 1, f) == 1) pcm.push_back (s);
  fclose (f);
  mtmd_audio_preprocessor_whisper pre (r.ctx_a);
  pre.initialize ();
  std::vector<mtmd_audio_mel> mels;
  if (!pre.preprocess (pcm.data (), pcm.size (), mels) || mels.empty ()) {
    fprintf (stderr, "preprocess failed\n");
    return 1;
  }
  const mtmd_audio_mel &mel = mels[0];
  const long keep = atol (argv[4]);
  if (keep < 1 || keep > mel.n_len) return 1;
  FILE *m = fopen (argv[3], "wb");
  for (long b = 0; b < mel.n_mel; b++)
    fwrite (mel.data.data () + b * mel.n_len, sizeof (float), keep, m);
  fclose (m);

  clip_image_f32 img;
  img.set_size ({ (int) mel.n_len, (int) mel.n_mel }, false, true);
  img.cpy_buf (mel.data);
  const int n_tokens = clip_n_output_tokens (r.ctx_a, &img);
  const int n_embd = clip_n_mmproj_embd (r.ctx_a);
  clip_image_f32_batch batch;
  batch.is_audio = true;
  batch.entries.push_back (img);
  std::vector<float> out ((size_t) n_tokens * n_embd);
  if (!clip_image_batch_encode (r.ctx_a, 2, &batch, out)) { fprintf (stderr, "encode failed\n"); return 1; }
  long rows = atol (argv[6]);
  if (rows <= 0 || rows > n_tokens) rows = n_tokens;
  FILE *o = fopen (argv[5], "wb");
  fwrite (out.data (), sizeof (float), (size_t) rows * n_embd, o);
  fclose (o);
  fprintf (stderr, "%zu mel windows of %lld frames; %d tokens of %d, %ld written\n", mels.size (),
      (long long) mel.n_len, n_tokens, n_embd, rows);
  clip_free (r.ctx_a);
  return 0;
}
