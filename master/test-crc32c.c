/* test-crc32c.c: published CRC-32C vectors (RFC 3720 B.4 and the usual
 * "123456789" check value), incremental use, and agreement of both
 * implementations (the CPU's instruction where this machine has it, and the
 * sliced tables) with a bit-at-a-time reference on every length and
 * alignment that exercises their head, body and tail loops. */
#include "crc32c.h"

#include <string.h>

static guint32
reference_crc32c (guint32 crc, const guint8 *p, gsize len)
{
  crc = ~crc;
  for (gsize i = 0; i < len; i++)
    {
      crc ^= p[i];
      for (guint bit = 0; bit < 8; bit++)
        crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
    }
  return ~crc;
}

static void
test_vectors_check_string (void)
{
  g_assert_cmphex (datc_crc32c (0, "123456789", 9), ==, 0xE3069283u);
}

static void
test_vectors_rfc3720 (void)
{
  guint8 buf[32];

  memset (buf, 0x00, sizeof buf);
  g_assert_cmphex (datc_crc32c (0, buf, sizeof buf), ==, 0x8A9136AAu);

  memset (buf, 0xFF, sizeof buf);
  g_assert_cmphex (datc_crc32c (0, buf, sizeof buf), ==, 0x62A8AB43u);

  for (guint i = 0; i < sizeof buf; i++)
    buf[i] = (guint8) i;
  g_assert_cmphex (datc_crc32c (0, buf, sizeof buf), ==, 0x46DD794Eu);

  for (guint i = 0; i < sizeof buf; i++)
    buf[i] = (guint8) (31 - i);
  g_assert_cmphex (datc_crc32c (0, buf, sizeof buf), ==, 0x113FDB5Cu);
}

static void
test_empty_input_keeps_crc (void)
{
  g_assert_cmphex (datc_crc32c (0, "", 0), ==, 0);
  g_assert_cmphex (datc_crc32c (0, NULL, 0), ==, 0);
  g_assert_cmphex (datc_crc32c (0xE3069283u, NULL, 0), ==, 0xE3069283u);
}

static void
test_incremental_matches_one_shot (void)
{
  const gsize size = 4096 + 13;
  g_autofree guint8 *buf = g_malloc (size);

  for (gsize i = 0; i < size; i++)
    buf[i] = (guint8) g_test_rand_int_range (0, 256);

  guint32 whole = datc_crc32c (0, buf, size);

  for (guint round = 0; round < 500; round++)
    {
      guint32 crc = 0;
      gsize at = 0;

      while (at < size)
        {
          gsize piece = (gsize) g_test_rand_int_range (0, 100);

          piece = MIN (piece, size - at);
          crc = datc_crc32c (crc, buf + at, piece);
          at += piece;
        }
      g_assert_cmphex (crc, ==, whole);
    }
}

static void
test_sliced_matches_bitwise_reference (void)
{
  guint8 buf[8 + 300];

  for (gsize i = 0; i < sizeof buf; i++)
    buf[i] = (guint8) g_test_rand_int_range (0, 256);

  for (gsize align = 0; align < 8; align++)
    for (gsize len = 0; len <= 300; len++)
      {
        guint32 seed = (guint32) g_test_rand_int ();

        guint32 want = reference_crc32c (seed, buf + align, len);

        g_assert_cmphex (datc_crc32c (seed, buf + align, len), ==, want);
        g_assert_cmphex (datc_crc32c_sliced (seed, buf + align, len), ==, want);
      }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/crc32c/vectors/matches-check-value-of-123456789", test_vectors_check_string);
  g_test_add_func ("/crc32c/vectors/matches-rfc3720-examples", test_vectors_rfc3720);
  g_test_add_func ("/crc32c/empty-input/keeps-the-running-crc", test_empty_input_keeps_crc);
  g_test_add_func ("/crc32c/incremental/matches-one-shot-over-random-splits",
                   test_incremental_matches_one_shot);
  g_test_add_func ("/crc32c/slicing/matches-bitwise-reference-at-every-alignment",
                   test_sliced_matches_bitwise_reference);

  return g_test_run ();
}
