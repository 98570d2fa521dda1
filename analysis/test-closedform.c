/* test-closedform.c: fluid against its formula and ect against a brute
 * force list of every slot completion, exactly. */
#include "closedform.h"

#include <math.h>
#include <stdlib.h>

#include "rng.h"

static void
test_fluid_one_proxy_is_wait_plus_work (void)
{
  DatcCapacity c[] = { { 100, 8, 30 } };
  g_assert_cmpfloat (datc_fluid_turnaround (c, 1, 80), ==, 100 + 80 * 30 / 8.0);
}

static void
test_fluid_ignores_proxies_that_start_too_late (void)
{
  /* Alone the first proxy ends at 10 + 10 = 20, before the second starts. */
  DatcCapacity c[] = { { 25, 1, 1 }, { 10, 1, 1 }, { INFINITY, 100, 1 } };
  g_assert_cmpfloat (datc_fluid_turnaround (c, 3, 10), ==, 20);
  /* With an earlier second proxy: T = (N + W1 + W2) / 2. */
  DatcCapacity d[] = { { 10, 1, 1 }, { 14, 1, 1 } };
  g_assert_cmpfloat (datc_fluid_turnaround (d, 2, 10), ==, (10 + 10 + 14) / 2.0);
  DatcCapacity none[] = { { INFINITY, 1, 1 } };
  g_assert_true (isinf (datc_fluid_turnaround (none, 1, 10)));
}

static void
test_fluid_matches_the_formula_on_random_instances (void)
{
  /* T solves T = (N + sum_A a W) / sum_A a with A = {W < T}: check both
   * the equation and that no excluded proxy starts before T. */
  DatcRng r;
  datc_rng_init (&r, 77);
  for (guint rep = 0; rep < 2000; rep++)
    {
      guint n = 1 + (guint) datc_rng_below (&r, 12);
      DatcCapacity c[12];
      for (guint i = 0; i < n; i++)
        c[i] = (DatcCapacity) { datc_rng_exp (&r, 100), 1 + (double) datc_rng_below (&r, 16),
                                1 + datc_rng_exp (&r, 20) };
      double N = 1 + (double) datc_rng_below (&r, 1000);
      double T = datc_fluid_turnaround (c, n, N);
      double rate = 0, weighted = 0;
      for (guint i = 0; i < n; i++)
        if (c[i].start < T)
          {
            rate += c[i].slots / c[i].task_time;
            weighted += c[i].slots / c[i].task_time * c[i].start;
          }
      g_assert_cmpfloat_with_epsilon (T, (N + weighted) / rate, 1e-9 * T);
    }
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

static void
test_ect_is_the_nth_completion_exactly (void)
{
  DatcRng r;
  datc_rng_init (&r, 5);
  for (guint rep = 0; rep < 500; rep++)
    {
      guint n = 1 + (guint) datc_rng_below (&r, 6);
      DatcCapacity c[6];
      for (guint i = 0; i < n; i++)
        c[i] = (DatcCapacity) { (double) datc_rng_below (&r, 100),
                                1 + (double) datc_rng_below (&r, 4),
                                1 + (double) datc_rng_below (&r, 30) };
      guint64 N = 1 + datc_rng_below (&r, 200);
      /* Every slot's first N completions, sorted: the N-th is the answer. */
      GArray *all = g_array_new (FALSE, FALSE, sizeof (double));
      for (guint i = 0; i < n; i++)
        for (guint s = 0; s < (guint) c[i].slots; s++)
          for (guint64 m = 1; m <= N; m++)
            {
              double t = c[i].start + (double) m * c[i].task_time;
              g_array_append_val (all, t);
            }
      qsort (all->data, all->len, sizeof (double), cmp_double);
      double work = 0;
      double T = datc_ect_turnaround (c, n, N, &work);
      g_assert_cmpfloat (T, ==, g_array_index (all, double, N - 1));
      g_assert_cmpfloat (work, >, 0);
      double fluid = datc_fluid_turnaround (c, n, (double) N);
      g_assert_cmpfloat (fluid, <=, T + 1e-9);
      g_array_unref (all);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/closedform/fluid/one-proxy-is-wait-plus-work",
                   test_fluid_one_proxy_is_wait_plus_work);
  g_test_add_func ("/closedform/fluid/ignores-proxies-that-start-too-late",
                   test_fluid_ignores_proxies_that_start_too_late);
  g_test_add_func ("/closedform/fluid/solves-its-equation-on-random-instances",
                   test_fluid_matches_the_formula_on_random_instances);
  g_test_add_func ("/closedform/ect/is-the-nth-slot-completion-exactly",
                   test_ect_is_the_nth_completion_exactly);
  return g_test_run ();
}
