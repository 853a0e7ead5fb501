// SPDX-License-Identifier: LGPL-2.1-or-later
// How long llama.cpp's mtmd takes to encode one 30 s audio window, for
// tools/compare-audio-llama-cpp.sh (built there against llama.cpp's mtmd,
// like tools/mtmd-audio-embed.cpp, outside the tree).
//
//   mtmd-audio-time MMPROJ PCM.f32 THREADS ROUNDS [FLASH]
//
// PCM.f32: 16 kHz mono float samples (the same floats gst-llm-bench
// --audio-pcm reads). mtmd's Whisper front end makes the first window's
// log-mel spectrogram once, untimed (gst-llm-bench times its encoder
// alone too); then one untimed encode (llama.cpp allocates its graph
// there) and ROUNDS timed ones, one line each, "seconds S". FLASH: auto
// (mtmd's default, what llama-mtmd-cli runs), on or off.
#include "clip.h"
#include "clip-impl.h"
#include "mtmd-audio.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
int main (int argc, char **argv) {
  if (argc != 5 && argc != 6) {
    fprintf (stderr, "usage: mmproj pcm.f32 threads rounds [auto|on|off]\n");
    return 2;
  }
  clip_context_params p {};
  p.use_gpu = false;
  p.flash_attn_type = CLIP_FLASH_ATTN_TYPE_AUTO;
  if (argc == 6 && strcmp (argv[5], "on") == 0) p.flash_attn_type = CLIP_FLASH_ATTN_TYPE_ENABLED;
  if (argc == 6 && strcmp (argv[5], "off") == 0) p.flash_attn_type = CLIP_FLASH_ATTN_TYPE_DISABLED;
  p.image_min_tokens = -1; p.image_max_tokens = -1; p.warmup = true;
  clip_init_result r = clip_init (argv[1], p);
  if (!r.ctx_a) { fprintf (stderr, "clip_init found no audio tower\n"); return 1; }
  const int threads = atoi (argv[3]), rounds = atoi (argv[4]);
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
  clip_image_f32 img;
  img.set_size ({ (int) mel.n_len, (int) mel.n_mel }, false, true);
  img.cpy_buf (mel.data);
  clip_image_f32_batch batch;
  batch.is_audio = true;
  batch.entries.push_back (img);
  const int n_tokens = clip_n_output_tokens (r.ctx_a, &img);
  std::vector<float> out ((size_t) n_tokens * clip_n_mmproj_embd (r.ctx_a));
  fprintf (stderr, "%lld mel frames, %d tokens\n", (long long) mel.n_len, n_tokens);
  for (int i = 0; i <= rounds; i++) {
    auto t0 = std::chrono::steady_clock::now ();
    if (!clip_image_batch_encode (r.ctx_a, threads, &batch, out)) {
      fprintf (stderr, "encode failed\n");
      return 1;
    }
    double sec = std::chrono::duration<double> (std::chrono::steady_clock::now () - t0).count ();
    if (i > 0) printf ("seconds %.6f\n", sec);
    fflush (stdout);
  }
  clip_free (r.ctx_a);
  return 0;
}
