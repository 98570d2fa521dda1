/* test-sha256.c: SHA-256 against FIPS 180-4's examples and against GLib's
 * G_CHECKSUM_SHA256 at every length around the block and padding edges and
 * over random data fed in random pieces, by the CPU's instructions (where
 * this CPU has them) and by the portable code alike. */
#include <glib.h>
#include <string.h>

#include "sha256.h"

typedef void (*InitFunc) (DatcSha256 *s);

static gchar *
hash_in_pieces (InitFunc init, const guint8 *data, gsize len, GRand *pieces)
{
  DatcSha256 s;
  gchar hex[DATC_SHA256_HEX_LEN + 1];
  init (&s);
  for (gsize at = 0; at < len;)
    {
      gsize n = pieces != NULL ? (gsize) g_rand_int_range (pieces, 0, 300) : len - at;
      n = MIN (n, len - at);
      datc_sha256_update (&s, data + at, n);
      at += n;
    }
  datc_sha256_hex (&s, hex);
  return g_strdup (hex);
}

static const InitFunc inits[] = { datc_sha256_init, datc_sha256_init_portable };

static void
test_fips_examples (void)
{
  struct {
    const char *text;
    const char *digest;
  } cases[] = {
    { "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
    { "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
    { "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (inits); i++)
    {
      for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
        {
          g_autofree gchar *hex = hash_in_pieces (inits[i], (const guint8 *) cases[c].text,
                                                  strlen (cases[c].text), NULL);
          g_assert_cmpstr (hex, ==, cases[c].digest);
        }
      /* A million 'a', in pieces. */
      g_autofree guint8 *a = g_malloc (1000000);
      memset (a, 'a', 1000000);
      g_autoptr (GRand) r = g_rand_new_with_seed (17);
      g_autofree gchar *hex = hash_in_pieces (inits[i], a, 1000000, r);
      g_assert_cmpstr (hex, ==, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    }
}

static void
test_as_glib_at_every_edge_and_in_pieces (void)
{
  g_autoptr (GRand) r = g_rand_new_with_seed (20261202);
  gsize max = 70000;
  g_autofree guint8 *data = g_malloc (max);
  for (gsize i = 0; i < max; i++)
    data[i] = (guint8) g_rand_int (r);
  /* Every length to 4 blocks (the padding's 55/56/64 edges), then some
   * long ones. */
  for (gsize len = 0; len < max; len = len < 260 ? len + 1 : len * 3 + 7)
    {
      g_autofree gchar *want = g_compute_checksum_for_data (G_CHECKSUM_SHA256, data, len);
      for (guint i = 0; i < G_N_ELEMENTS (inits); i++)
        {
          g_autofree gchar *whole = hash_in_pieces (inits[i], data, len, NULL);
          g_autofree gchar *pieces = hash_in_pieces (inits[i], data, len, r);
          g_assert_cmpstr (whole, ==, want);
          g_assert_cmpstr (pieces, ==, want);
        }
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_message ("this CPU's SHA instructions: %s",
                  datc_sha256_accelerated () ? "used" : "none (both runs are the portable code)");
  g_test_add_func ("/sha256/fips-180-examples", test_fips_examples);
  g_test_add_func ("/sha256/as-glib-at-every-edge-and-in-pieces",
                   test_as_glib_at_every_edge_and_in_pieces);
  return g_test_run ();
}
