/* sha256.c: see sha256.h.  Whole 64-byte blocks go to a compression
 * function straight from the caller's buffer; only a block split between
 * two updates is copied.  The portable function is FIPS 180-4 section 6.2
 * as written; the SHA-NI one keeps the state as the instructions want it
 * (ABEF and CDGH in two registers) for a run of blocks, and computes the
 * message schedule four words at a time:
 *   W[t..t+3] = msg2 (msg1 (W[t-16..], W[t-12..]) + W[t-7..t-4], W[t-4..]),
 * each group of four rounds as two sha256rnds2 of two rounds. */
#include "sha256.h"

#include <string.h>

static const guint32 K[64] = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static const guint32 H0[8] = {
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

static inline guint32
rotr (guint32 x, guint n)
{
  return (x >> n) | (x << (32 - n));
}

static inline guint32
load_be32 (const guint8 *p)
{
  return (guint32) p[0] << 24 | (guint32) p[1] << 16 | (guint32) p[2] << 8 | p[3];
}

static void
blocks_portable (guint32 h[8], const guint8 *p, gsize n)
{
  for (; n > 0; n--, p += 64)
    {
      guint32 w[64];
      for (guint t = 0; t < 16; t++)
        w[t] = load_be32 (p + 4 * t);
      for (guint t = 16; t < 64; t++)
        {
          guint32 s0 = rotr (w[t - 15], 7) ^ rotr (w[t - 15], 18) ^ (w[t - 15] >> 3);
          guint32 s1 = rotr (w[t - 2], 17) ^ rotr (w[t - 2], 19) ^ (w[t - 2] >> 10);
          w[t] = w[t - 16] + s0 + w[t - 7] + s1;
        }
      guint32 a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
      for (guint t = 0; t < 64; t++)
        {
          guint32 t1 = hh + (rotr (e, 6) ^ rotr (e, 11) ^ rotr (e, 25)) + ((e & f) ^ (~e & g))
                       + K[t] + w[t];
          guint32 t2 = (rotr (a, 2) ^ rotr (a, 13) ^ rotr (a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
          hh = g;
          g = f;
          f = e;
          e = d + t1;
          d = c;
          c = b;
          b = a;
          a = t1 + t2;
        }
      h[0] += a;
      h[1] += b;
      h[2] += c;
      h[3] += d;
      h[4] += e;
      h[5] += f;
      h[6] += g;
      h[7] += hh;
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_SHA_NI 1
#include <cpuid.h>
#include <immintrin.h>

#define SHA_NI __attribute__ ((target ("sha,sse4.1,ssse3")))

/* Four rounds from group `g` of message words `m` (W[4g..4g+3]). */
#define ROUNDS4(g, m)                                                                              \
  do                                                                                               \
    {                                                                                              \
      __m128i wk = _mm_add_epi32 ((m), _mm_loadu_si128 ((const __m128i *) &K[4 * (g)]));           \
      cdgh = _mm_sha256rnds2_epu32 (cdgh, abef, wk);                                               \
      abef = _mm_sha256rnds2_epu32 (abef, cdgh, _mm_shuffle_epi32 (wk, 0x0e));                     \
    }                                                                                              \
  while (0)

SHA_NI static void
blocks_ni (guint32 h[8], const guint8 *p, gsize n)
{
  /* Big-endian words: reverse the bytes of each 32-bit lane. */
  const __m128i bswap = _mm_set_epi64x (0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i dcba = _mm_loadu_si128 ((const __m128i *) &h[0]);
  __m128i hgfe = _mm_loadu_si128 ((const __m128i *) &h[4]);
  /* (a b c d), (e f g h) -> ABEF and CDGH, highest lane first. */
  __m128i badc = _mm_shuffle_epi32 (dcba, 0xb1);
  __m128i efgh = _mm_shuffle_epi32 (hgfe, 0x1b);
  __m128i abef = _mm_alignr_epi8 (badc, efgh, 8);
  __m128i cdgh = _mm_blend_epi16 (efgh, badc, 0xf0);

  for (; n > 0; n--, p += 64)
    {
      __m128i abef_in = abef, cdgh_in = cdgh;
      __m128i m[4];
      for (guint g = 0; g < 4; g++)
        {
          m[g] = _mm_shuffle_epi8 (_mm_loadu_si128 ((const __m128i *) (p + 16 * g)), bswap);
          ROUNDS4 (g, m[g]);
        }
      for (guint g = 4; g < 16; g++)
        {
          /* m[g % 4] holds W[4g-16..]: it becomes W[4g..]. */
          __m128i x = _mm_sha256msg1_epu32 (m[g % 4], m[(g + 1) % 4]);
          x = _mm_add_epi32 (x, _mm_alignr_epi8 (m[(g + 3) % 4], m[(g + 2) % 4], 4));
          m[g % 4] = _mm_sha256msg2_epu32 (x, m[(g + 3) % 4]);
          ROUNDS4 (g, m[g % 4]);
        }
      abef = _mm_add_epi32 (abef, abef_in);
      cdgh = _mm_add_epi32 (cdgh, cdgh_in);
    }

  /* Back to (a b c d), (e f g h). */
  __m128i feba = _mm_shuffle_epi32 (abef, 0x1b);
  __m128i dchg = _mm_shuffle_epi32 (cdgh, 0xb1);
  _mm_storeu_si128 ((__m128i *) &h[0], _mm_blend_epi16 (feba, dchg, 0xf0));
  _mm_storeu_si128 ((__m128i *) &h[4], _mm_alignr_epi8 (dchg, feba, 8));
}

static gboolean
have_sha_ni (void)
{
  static gsize answer = 0; /* 1: no, 2: yes */

  if (g_once_init_enter (&answer))
    {
      unsigned a, b, c, d;
      gboolean sse = __get_cpuid (1, &a, &b, &c, &d) && (c & bit_SSSE3) && (c & bit_SSE4_1);
      gboolean sha = __get_cpuid_count (7, 0, &a, &b, &c, &d) && (b & bit_SHA);
      g_once_init_leave (&answer, sse && sha ? 2 : 1);
    }
  return answer == 2;
}
#else
#define HAVE_SHA_NI 0
#endif

gboolean
datc_sha256_accelerated (void)
{
#if HAVE_SHA_NI
  return have_sha_ni ();
#else
  return FALSE;
#endif
}

static void
blocks (DatcSha256 *s, const guint8 *p, gsize n)
{
#if HAVE_SHA_NI
  if (!s->portable)
    {
      blocks_ni (s->h, p, n);
      return;
    }
#endif
  blocks_portable (s->h, p, n);
}

void
datc_sha256_init (DatcSha256 *s)
{
  memcpy (s->h, H0, sizeof H0);
  s->fill = 0;
  s->bytes = 0;
  s->portable = !datc_sha256_accelerated ();
}

void
datc_sha256_init_portable (DatcSha256 *s)
{
  datc_sha256_init (s);
  s->portable = TRUE;
}

void
datc_sha256_update (DatcSha256 *s, const void *data, gsize len)
{
  const guint8 *p = data;

  g_return_if_fail (data != NULL || len == 0);
  s->bytes += len;
  if (s->fill > 0)
    {
      gsize take = MIN (len, sizeof s->block - s->fill);
      memcpy (s->block + s->fill, p, take);
      s->fill += take;
      p += take;
      len -= take;
      if (s->fill < sizeof s->block)
        return;
      blocks (s, s->block, 1);
      s->fill = 0;
    }
  if (len >= 64)
    {
      blocks (s, p, len / 64);
      p += len & ~(gsize) 63;
      len &= 63;
    }
  memcpy (s->block, p, len);
  s->fill = len;
}

void
datc_sha256_hex (DatcSha256 *s, gchar hex[DATC_SHA256_HEX_LEN + 1])
{
  static const char digits[] = "0123456789abcdef";
  guint64 bits = s->bytes * 8;

  /* 0x80, zeros to 56 mod 64, the length in bits, big-endian. */
  s->block[s->fill++] = 0x80;
  if (s->fill > 56)
    {
      memset (s->block + s->fill, 0, sizeof s->block - s->fill);
      blocks (s, s->block, 1);
      s->fill = 0;
    }
  memset (s->block + s->fill, 0, 56 - s->fill);
  for (guint i = 0; i < 8; i++)
    s->block[56 + i] = (guint8) (bits >> (56 - 8 * i));
  blocks (s, s->block, 1);
  for (guint i = 0; i < 32; i++)
    {
      guint8 byte = (guint8) (s->h[i / 4] >> (24 - 8 * (i % 4)));
      hex[2 * i] = digits[byte >> 4];
      hex[2 * i + 1] = digits[byte & 0xf];
    }
  hex[DATC_SHA256_HEX_LEN] = '\0';
}

void
datc_sha256_hex_of (const void *data, gsize len, gchar hex[DATC_SHA256_HEX_LEN + 1])
{
  DatcSha256 s;
  datc_sha256_init (&s);
  datc_sha256_update (&s, data, len);
  datc_sha256_hex (&s, hex);
}
