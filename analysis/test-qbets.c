/* test-qbets.c: the binomial bound against a direct computation, the 59
 * observations of q = c = 0.95, and the bound's coverage in practice. */
#include "qbets.h"

#include <math.h>
#include <stdlib.h>

#include "rng.h"

/* P(Bin(n, q) <= k) the schoolbook way: Pascal's triangle and pow. */
static double
direct_cdf (guint n, guint k, double q)
{
  g_autofree double *row = g_new0 (double, n + 1);
  row[0] = 1;
  for (guint i = 1; i <= n; i++)
    for (guint j = i; j > 0; j--)
      row[j] += row[j - 1];
  double s = 0;
  for (guint j = 0; j <= k && j <= n; j++)
    s += row[j] * pow (q, j) * pow (1 - q, n - j);
  return s;
}

static guint
direct_index (guint n, double q, double c)
{
  g_autofree double *row = g_new0 (double, n + 1);
  row[0] = 1;
  for (guint i = 1; i <= n; i++)
    for (guint j = i; j > 0; j--)
      row[j] += row[j - 1];
  double s = 0;
  for (guint k = 1; k <= n; k++)
    {
      s += row[k - 1] * pow (q, k - 1) * pow (1 - q, n - (k - 1));
      if (s >= c)
        return k;
    }
  return 0;
}

static void
test_qbets_cdf_matches_direct_computation (void)
{
  const double qs[] = { 0.05, 0.5, 0.9, 0.95, 0.99 };
  for (guint n = 1; n <= 120; n += 7)
    for (guint i = 0; i < G_N_ELEMENTS (qs); i++)
      for (guint k = 0; k <= n; k++)
        {
          double want = direct_cdf (n, k, qs[i]);
          g_assert_cmpfloat_with_epsilon (datc_binomial_cdf (k, n, qs[i]), want, 1e-9);
        }
}

static void
test_qbets_index_matches_direct_computation (void)
{
  const double qc[][2]
      = { { 0.95, 0.95 }, { 0.5, 0.95 }, { 0.9, 0.99 }, { 0.75, 0.9 }, { 0.99, 0.5 } };
  for (guint i = 0; i < G_N_ELEMENTS (qc); i++)
    for (guint n = 1; n <= 300; n++)
      {
        /* Skip n where the two sums sit within rounding of c. */
        guint want = direct_index (n, qc[i][0], qc[i][1]);
        if (want > 0 && fabs (direct_cdf (n, want - 1, qc[i][0]) - qc[i][1]) < 1e-12)
          continue;
        /* Where the summed cdf never reaches c the closed form 1 - q^n decides. */
        if (want == 0 && 1 - pow (qc[i][0], n) >= qc[i][1])
          want = n;
        g_assert_cmpuint (datc_qbets_index (n, qc[i][0], qc[i][1]), ==, want);
      }
}

static void
test_qbets_needs_59_for_95_95 (void)
{
  g_assert_cmpuint (datc_qbets_needed (0.95, 0.95), ==, 59);
  g_assert_cmpuint (datc_qbets_index (58, 0.95, 0.95), ==, 0);
  g_assert_cmpuint (datc_qbets_index (59, 0.95, 0.95), ==, 59);
  /* The median at 95%: 5 observations (1 - 0.5^5 = 0.969). */
  g_assert_cmpuint (datc_qbets_needed (0.5, 0.95), ==, 5);

  double w[58];
  for (guint i = 0; i < 58; i++)
    w[i] = i;
  DatcWaitBound b;
  g_assert_true (datc_wait_bound_compute (w, 58, 0.95, 0.95, &b, NULL));
  g_assert_cmpuint (b.index, ==, 0);
  g_assert_cmpuint (b.needed, ==, 59);
  g_assert_true (isnan (b.bound));
  g_assert_false (datc_wait_bound_compute (w, 58, 1.0, 0.95, &b, NULL));
  g_assert_false (datc_wait_bound_compute (w, 58, 0.5, 0, &b, NULL));
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

static void
test_qbets_bound_covers_the_quantile_as_promised (void)
{
  /* Exponential waits of mean 1: the 0.9-quantile is ln 10.  Over many
   * samples of 100 waits, the 95%-confidence bound must lie above it in
   * at least 95% of them (the order statistic makes it a little more). */
  const double q = 0.9, c = 0.95, truth = log (10);
  const guint reps = 4000, n = 100;
  DatcRng r;
  datc_rng_init (&r, 2024);
  double w[100];
  guint covered = 0;
  for (guint rep = 0; rep < reps; rep++)
    {
      for (guint i = 0; i < n; i++)
        w[i] = datc_rng_exp (&r, 1.0);
      qsort (w, n, sizeof (double), cmp_double);
      DatcWaitBound b;
      g_assert_true (datc_wait_bound_compute (w, n, q, c, &b, NULL));
      g_assert_cmpuint (b.index, >, 0);
      g_assert_cmpfloat (b.achieved, >=, c);
      covered += b.bound >= truth;
    }
  double rate = (double) covered / reps, se = sqrt (c * (1 - c) / reps);
  g_assert_cmpfloat (rate, >=, c - 4 * se);
}

static void
test_qbets_large_n_stays_finite (void)
{
  /* 10^6 observations: no factorial overflow; the index is near q n. */
  guint64 k = datc_qbets_index (1000000, 0.95, 0.95);
  g_assert_cmpuint (k, >, 950000);
  g_assert_cmpuint (k, <, 950600);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/qbets/cdf/matches-a-direct-computation",
                   test_qbets_cdf_matches_direct_computation);
  g_test_add_func ("/qbets/index/matches-a-direct-computation",
                   test_qbets_index_matches_direct_computation);
  g_test_add_func ("/qbets/needs/59-observations-for-q-and-c-of-0.95",
                   test_qbets_needs_59_for_95_95);
  g_test_add_func ("/qbets/bound/covers-the-quantile-as-promised",
                   test_qbets_bound_covers_the_quantile_as_promised);
  g_test_add_func ("/qbets/index/stays-finite-for-a-million-waits",
                   test_qbets_large_n_stays_finite);
  return g_test_run ();
}
