/* test-rng.c: the generator is the published xoshiro256**, streams are
 * reproducible and distinct, and the derived draws have the right moments. */
#include "rng.h"

#include <math.h>

static void
test_rng_matches_reference_xoshiro (void)
{
  /* Reference output of xoshiro256** from state {1, 2, 3, 4}. */
  DatcRng r = { { 1, 2, 3, 4 } };
  const guint64 expect[] = { 11520ull, 0ull, 1509978240ull, 1215971899390074240ull };
  for (guint i = 0; i < G_N_ELEMENTS (expect); i++)
    g_assert_cmpuint (datc_rng_next (&r), ==, expect[i]);
}

static void
test_rng_same_key_same_stream (void)
{
  DatcRng a, b, c;
  datc_rng_init (&a, datc_rng_key (7, 3));
  datc_rng_init (&b, datc_rng_key (7, 3));
  datc_rng_init (&c, datc_rng_key (7, 4));
  guint same_c = 0;
  for (guint i = 0; i < 1000; i++)
    {
      guint64 x = datc_rng_next (&a);
      g_assert_cmpuint (x, ==, datc_rng_next (&b));
      same_c += x == datc_rng_next (&c);
    }
  g_assert_cmpuint (same_c, ==, 0);
  g_assert_cmpuint (datc_rng_key (1, 2), !=, datc_rng_key (2, 1));
}

static void
test_rng_uniform_is_open_and_flat (void)
{
  DatcRng r;
  datc_rng_init (&r, 99);
  const guint n = 200000;
  guint bins[10] = { 0 };
  double sum = 0;
  for (guint i = 0; i < n; i++)
    {
      double u = datc_rng_uniform (&r);
      g_assert_cmpfloat (u, >, 0);
      g_assert_cmpfloat (u, <, 1);
      bins[(guint) (u * 10)]++;
      sum += u;
    }
  /* Each bin: n/10 +- 5 standard deviations. */
  double sd = sqrt (n * 0.1 * 0.9);
  for (guint b = 0; b < 10; b++)
    g_assert_cmpfloat (fabs (bins[b] - n / 10.0), <, 5 * sd);
  g_assert_cmpfloat (fabs (sum / n - 0.5), <, 5 * sqrt (1.0 / 12 / n));
}

static void
test_rng_normal_and_exp_have_their_moments (void)
{
  DatcRng r;
  datc_rng_init (&r, 5);
  const guint n = 200000;
  double s1 = 0, s2 = 0, e1 = 0;
  for (guint i = 0; i < n; i++)
    {
      double z = datc_rng_normal (&r);
      s1 += z;
      s2 += z * z;
      e1 += datc_rng_exp (&r, 3.0);
    }
  g_assert_cmpfloat (fabs (s1 / n), <, 5 / sqrt (n));
  g_assert_cmpfloat (fabs (s2 / n - 1), <, 5 * sqrt (2.0 / n));
  g_assert_cmpfloat (fabs (e1 / n - 3), <, 5 * 3 / sqrt (n));
  /* Counter-based draws: same key, same value; moments as well. */
  g_assert_cmpfloat (datc_rng_normal_at (11), ==, datc_rng_normal_at (11));
  double m = 0;
  for (guint i = 0; i < n; i++)
    m += datc_rng_normal_at (datc_rng_key (1, i));
  g_assert_cmpfloat (fabs (m / n), <, 5 / sqrt (n));
}

static void
test_rng_below_stays_in_range (void)
{
  DatcRng r;
  datc_rng_init (&r, 1);
  guint seen[7] = { 0 };
  for (guint i = 0; i < 7000; i++)
    seen[datc_rng_below (&r, 7)]++;
  for (guint i = 0; i < 7; i++)
    g_assert_cmpuint (seen[i], >, 800);
  g_assert_cmpuint (datc_rng_below (&r, 1), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/rng/xoshiro/matches-the-reference-output", test_rng_matches_reference_xoshiro);
  g_test_add_func ("/rng/streams/same-key-gives-the-same-stream", test_rng_same_key_same_stream);
  g_test_add_func ("/rng/uniform/is-open-and-flat", test_rng_uniform_is_open_and_flat);
  g_test_add_func ("/rng/normal-and-exp/have-their-moments",
                   test_rng_normal_and_exp_have_their_moments);
  g_test_add_func ("/rng/below/stays-in-range", test_rng_below_stays_in_range);
  return g_test_run ();
}
