/* crc32c.c: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the
 * checksum of every journal record.
 *
 * The journal checksums every record it writes and every record it replays,
 * so this sits on the master's hot path (a resume checksums hundreds of MiB
 * at once).  Where the CPU has the CRC-32C instruction (x86-64 with SSE4.2,
 * asked once at the first call) it takes eight bytes per instruction.
 * Elsewhere, slicing by 8 consumes eight bytes per step with eight
 * independent table lookups instead of one dependent lookup per byte, which
 * is several times faster than the classic byte-wise table.  The 8 x 256
 * tables (8 KiB) are computed once, under g_once, the first time they are
 * needed; the words are loaded little-endian with memcpy so the code is
 * correct on any alignment and byte order. */
#include "crc32c.h"

#include <string.h>

#define CRC32C_POLY_REFLECTED 0x82F63B78u

/* table[0] is the ordinary byte-wise table; table[k][b] is the CRC of byte b
 * followed by k zero bytes, so eight bytes can be folded in at once. */
static guint32 crc32c_table[8][256];

static void
crc32c_build_tables (void)
{
  for (guint i = 0; i < 256; i++)
    {
      guint32 crc = i;

      for (guint bit = 0; bit < 8; bit++)
        crc = (crc >> 1) ^ ((crc & 1u) ? CRC32C_POLY_REFLECTED : 0u);
      crc32c_table[0][i] = crc;
    }

  for (guint i = 0; i < 256; i++)
    for (guint k = 1; k < 8; k++)
      {
        guint32 prev = crc32c_table[k - 1][i];

        crc32c_table[k][i] = (prev >> 8) ^ crc32c_table[0][prev & 0xffu];
      }
}

static void
crc32c_ensure_tables (void)
{
  static gsize tables_ready = 0;

  if (g_once_init_enter (&tables_ready))
    {
      crc32c_build_tables ();
      g_once_init_leave (&tables_ready, 1);
    }
}

static inline guint32
load_le32 (const guint8 *p)
{
  guint32 v;

  memcpy (&v, p, sizeof v);
  return GUINT32_FROM_LE (v);
}

guint32
datc_crc32c_sliced (guint32 crc, const void *data, gsize len)
{
  const guint8 *p = data;

  g_return_val_if_fail (data != NULL || len == 0, crc);

  crc32c_ensure_tables ();
  crc = ~crc;

  /* Byte-wise up to an 8-byte boundary: aligned loads are cheaper on some
   * machines and the tail loop below handles what is left. */
  while (len > 0 && ((guintptr) p & 7u) != 0)
    {
      crc = crc32c_table[0][(crc ^ *p++) & 0xffu] ^ (crc >> 8);
      len--;
    }

  while (len >= 8)
    {
      guint32 lo = load_le32 (p) ^ crc;
      guint32 hi = load_le32 (p + 4);

      crc = crc32c_table[7][lo & 0xffu] ^ crc32c_table[6][(lo >> 8) & 0xffu]
            ^ crc32c_table[5][(lo >> 16) & 0xffu] ^ crc32c_table[4][lo >> 24]
            ^ crc32c_table[3][hi & 0xffu] ^ crc32c_table[2][(hi >> 8) & 0xffu]
            ^ crc32c_table[1][(hi >> 16) & 0xffu] ^ crc32c_table[0][hi >> 24];
      p += 8;
      len -= 8;
    }

  while (len > 0)
    {
      crc = crc32c_table[0][(crc ^ *p++) & 0xffu] ^ (crc >> 8);
      len--;
    }

  return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>

__attribute__ ((target ("sse4.2"))) static guint32
crc32c_sse42 (guint32 crc, const guint8 *p, gsize len)
{
  guint64 c = ~crc;

  for (; len >= 8; p += 8, len -= 8)
    {
      guint64 word;

      memcpy (&word, p, sizeof word);
      c = _mm_crc32_u64 (c, word);
    }
  guint32 c32 = (guint32) c;
  for (; len > 0; p++, len--)
    c32 = _mm_crc32_u8 (c32, *p);
  return ~c32;
}

static gboolean
have_sse42 (void)
{
  static gsize answer = 0; /* 1: no, 2: yes */

  if (g_once_init_enter (&answer))
    {
      __builtin_cpu_init ();
      g_once_init_leave (&answer, __builtin_cpu_supports ("sse4.2") ? 2 : 1);
    }
  return answer == 2;
}
#endif

guint32
datc_crc32c (guint32 crc, const void *data, gsize len)
{
  g_return_val_if_fail (data != NULL || len == 0, crc);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (have_sse42 ())
    return crc32c_sse42 (crc, data, len);
#endif
  return datc_crc32c_sliced (crc, data, len);
}
