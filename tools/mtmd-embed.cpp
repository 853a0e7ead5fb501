// SPDX-License-Identifier: LGPL-2.1-or-later
// llama.cpp's own embeddings of one image, for gst-llm's encoder golden
// data (tools/make-mmproj-golden.sh builds this against llama.cpp's mtmd,
// built natively from the bundle in node-llama-cpp, outside the tree).
//
//   mtmd-embed MMPROJ IMAGE.f32 SIDE OUT.f32
//
// IMAGE.f32: SIDE x SIDE pixels, normalised, interleaved RGB floats (the
// preprocessing is gst-llm's to check separately; this runs the tower and
// projector only). OUT.f32: the image tokens' embeddings, row by row.
#include "clip.h"
#include "clip-impl.h"
#include <cstdio>
#include <cstdlib>
#include <vector>
int main (int argc, char **argv) {
  if (argc != 5) { fprintf (stderr, "usage: mmproj image.f32 side out.f32\n"); return 2; }
  clip_context_params p {};
  p.use_gpu = false; p.flash_attn_type = CLIP_FLASH_ATTN_TYPE_DISABLED;
  p.image_min_tokens = -1; p.image_max_tokens = -1; p.warmup = false;
  clip_init_result r = clip_init (argv[1], p);
  if (!r.ctx_v) { fprintf (stderr, "clip_init failed\n"); return 1; }
  const int side = atoi (argv[3]);
  std::vector<float> hwc ((size_t) side * side * 3);
  FILE *f = fopen (argv[2], "rb");
  if (!f || fread (hwc.data (), sizeof (float), hwc.size (), f) != hwc.size ()) return 1;
  fclose (f);
  clip_image_f32 img;
  img.set_size ({ side, side }, false, false);
  img.cpy_buf (hwc);
  std::vector<float> out ((size_t) clip_n_output_tokens (r.ctx_v, &img) * clip_n_mmproj_embd (r.ctx_v));
  if (!clip_image_encode (r.ctx_v, 2, &img, out)) { fprintf (stderr, "encode failed\n"); return 1; }
  FILE *o = fopen (argv[4], "wb");
  fwrite (out.data (), sizeof (float), out.size (), o);
  fclose (o);
  fprintf (stderr, "%zu floats, %d tokens\n", out.size (), clip_n_output_tokens (r.ctx_v, &img));
  clip_free (r.ctx_v);
  return 0;
}
