// SPDX-License-Identifier: LGPL-2.1-or-later
// How long llama.cpp's mtmd takes to encode one image, for
// tools/compare-vision-llama-cpp.sh (built there against llama.cpp's mtmd,
// like tools/mtmd-embed.cpp, outside the tree).
//
//   mtmd-time MMPROJ IMAGE.f32 SIDE THREADS ROUNDS [FLASH]
//
// IMAGE.f32 as mtmd-embed reads it (SIDE x SIDE normalised interleaved RGB
// floats). One untimed encode (llama.cpp allocates its graph there), then
// ROUNDS timed ones; prints one line per round, "seconds S". FLASH: auto
// (mtmd's default, what llama-mtmd-cli runs), on or off.
#include "clip.h"
#include "clip-impl.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
int main (int argc, char **argv) {
  if (argc != 6 && argc != 7) {
    fprintf (stderr, "usage: mmproj image.f32 side threads rounds [auto|on|off]\n");
    return 2;
  }
  clip_context_params p {};
  p.use_gpu = false;
  p.flash_attn_type = CLIP_FLASH_ATTN_TYPE_AUTO;
  if (argc == 7 && strcmp (argv[6], "on") == 0) p.flash_attn_type = CLIP_FLASH_ATTN_TYPE_ENABLED;
  if (argc == 7 && strcmp (argv[6], "off") == 0) p.flash_attn_type = CLIP_FLASH_ATTN_TYPE_DISABLED;
  p.image_min_tokens = -1; p.image_max_tokens = -1; p.warmup = true;
  clip_init_result r = clip_init (argv[1], p);
  if (!r.ctx_v) { fprintf (stderr, "clip_init failed\n"); return 1; }
  const int side = atoi (argv[3]), threads = atoi (argv[4]), rounds = atoi (argv[5]);
  std::vector<float> hwc ((size_t) side * side * 3);
  FILE *f = fopen (argv[2], "rb");
  if (!f || fread (hwc.data (), sizeof (float), hwc.size (), f) != hwc.size ()) return 1;
  fclose (f);
  clip_image_f32 img;
  img.set_size ({ side, side }, false, false);
  img.cpy_buf (hwc);
  std::vector<float> out ((size_t) clip_n_output_tokens (r.ctx_v, &img) * clip_n_mmproj_embd (r.ctx_v));
  for (int i = 0; i <= rounds; i++) {
    auto t0 = std::chrono::steady_clock::now ();
    if (!clip_image_encode (r.ctx_v, threads, &img, out)) { fprintf (stderr, "encode failed\n"); return 1; }
    double s = std::chrono::duration<double> (std::chrono::steady_clock::now () - t0).count ();
    if (i > 0) printf ("seconds %.6f\n", s);
    fflush (stdout);
  }
  clip_free (r.ctx_v);
  return 0;
}
