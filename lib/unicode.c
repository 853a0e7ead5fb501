/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "unicode.h"

guint16
llm_unicode_flags (guint32 cpt)
{
  if (cpt > LLM_CPT_MAX)
    return 0;

  /* Last range whose start is <= cpt; the table starts at 0 and ends with a
   * sentinel above LLM_CPT_MAX, so the answer is always inside it. */
  guint lo = 0, hi = llm_unicode_n_ranges - 1;
  while (hi - lo > 1) {
    guint mid = lo + (hi - lo) / 2;
    if (llm_unicode_ranges[mid].start <= cpt)
      lo = mid;
    else
      hi = mid;
  }
  return llm_unicode_ranges[lo].flags;
}

static inline gboolean
is_continuation (guint8 b)
{
  return (b & 0xc0) == 0x80;
}

guint32
llm_utf8_decode (const char *text, gsize len, gsize *pos)
{
  const guint8 *s = (const guint8 *) text + *pos;
  gsize avail = len - *pos;
  guint32 cpt;
  guint n;

  g_assert (*pos < len);

  if (s[0] < 0x80) {
    *pos += 1;
    return s[0];
  }

  /* The lead byte alone decides the length, as in llama.cpp: no check for
   * overlong forms or surrogates, which therefore decode to their value. */
  if ((s[0] & 0xe0) == 0xc0) {
    n = 2;
    cpt = s[0] & 0x1f;
  } else if ((s[0] & 0xf0) == 0xe0) {
    n = 3;
    cpt = s[0] & 0x0f;
  } else if ((s[0] & 0xf8) == 0xf0) {
    n = 4;
    cpt = s[0] & 0x07;
  } else {
    /* lone continuation byte or 0xf8..0xff */
    goto invalid;
  }

  if (avail < n)
    goto invalid;
  for (guint i = 1; i < n; i++) {
    if (!is_continuation (s[i]))
      goto invalid;
    cpt = (cpt << 6) | (s[i] & 0x3f);
  }

  /* llama.cpp decodes F4 90.. to F7 .. as values above U+10FFFF and then
   * throws when it re-encodes them; treating them as invalid bytes instead
   * keeps every codepoint we hand out encodable. */
  if (cpt > LLM_CPT_MAX)
    goto invalid;

  *pos += n;
  return cpt;

invalid:
  *pos += 1;
  return LLM_CPT_REPLACEMENT;
}

guint32 *
llm_utf8_to_cpts (const char *text, gsize len, gsize *n_cpts)
{
  /* Never more codepoints than bytes. */
  guint32 *cpts = g_new (guint32, MAX (len, 1));
  gsize n = 0, pos = 0;

  while (pos < len)
    cpts[n++] = llm_utf8_decode (text, len, &pos);

  *n_cpts = n;
  return cpts;
}

guint
llm_utf8_encode (guint32 cpt, char out[4])
{
  guint8 *o = (guint8 *) out;

  if (cpt > LLM_CPT_MAX)
    cpt = LLM_CPT_REPLACEMENT;

  if (cpt < 0x80) {
    o[0] = cpt;
    return 1;
  }
  if (cpt < 0x800) {
    o[0] = 0xc0 | (cpt >> 6);
    o[1] = 0x80 | (cpt & 0x3f);
    return 2;
  }
  if (cpt < 0x10000) {
    o[0] = 0xe0 | (cpt >> 12);
    o[1] = 0x80 | ((cpt >> 6) & 0x3f);
    o[2] = 0x80 | (cpt & 0x3f);
    return 3;
  }
  o[0] = 0xf0 | (cpt >> 18);
  o[1] = 0x80 | ((cpt >> 12) & 0x3f);
  o[2] = 0x80 | ((cpt >> 6) & 0x3f);
  o[3] = 0x80 | (cpt & 0x3f);
  return 4;
}
