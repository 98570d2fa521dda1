/* bench-predict.c: how fast `datc analyze predict` is.  Not a test: it
 * prints numbers.  The scenario is the four-site one of the README (256
 * slots, lognormal/exp/lomax/const waits, walltime, failures, an outage,
 * variable task times) at 10^3, 10^4 and 10^6 tasks:
 *
 *   bench-predict            all of it
 *   bench-predict N TRIALS   one size
 */
#include <stdio.h>
#include <stdlib.h>

#include "prediction.h"

static DatcScenario *
four_sites (guint64 tasks)
{
  DatcScenario *sc = datc_scenario_new (tasks);
  DatcScenarioSite *a = datc_scenario_add_site (
      sc, "A", 32, 2, 1800, 0.3, datc_wait_dist_parse ("lognormal 30m 1", NULL, NULL));
  a->walltime = 4 * 3600;
  a->fail_rate = 0.05;
  DatcScenarioSite *b
      = datc_scenario_add_site (sc, "B", 16, 4, 1200, 0.3, datc_wait_dist_new_exp (3600));
  b->outage_probability = 0.1;
  b->outage_length = 12 * 3600;
  datc_scenario_add_site (sc, "C", 64, 1, 2700, 0,
                          datc_wait_dist_parse ("lomax 3600 2.5", NULL, NULL));
  datc_scenario_add_site (sc, "D", 8, 8, 1500, 0.5, datc_wait_dist_new_const (600));
  return sc;
}

static void
bench (guint64 tasks, guint64 trials)
{
  g_autoptr (DatcScenario) sc = four_sites (tasks);
  printf ("%" G_GUINT64_FORMAT " tasks, 4 sites, %" G_GUINT64_FORMAT " slots, %" G_GUINT64_FORMAT
          " trials\n",
          tasks, datc_scenario_total_slots (sc), trials);
  for (DatcPolicy k = 0; k < DATC_N_POLICIES; k++)
    {
      gint64 t0 = g_get_monotonic_time ();
      g_autoptr (DatcPrediction) p = datc_prediction_run (sc, trials, 1, 1u << k, NULL);
      double s = (double) (g_get_monotonic_time () - t0) / 1e6;
      printf ("  %-14s %9.3f s  %10.3f ms/trial  %8.1f ns/task  (mean turnaround %.0f s)\n",
              datc_policy_name (k), s, 1e3 * s / (double) trials,
              1e9 * s / (double) trials / (double) tasks, datc_prediction_stats (p, k)->mean);
    }
  gint64 t0 = g_get_monotonic_time ();
  g_autoptr (DatcPrediction) all = datc_prediction_run (sc, trials, 1, DATC_POLICY_ALL, NULL);
  double s = (double) (g_get_monotonic_time () - t0) / 1e6;
  g_assert (all != NULL);
  printf ("  %-14s %9.3f s  %10.3f ms/trial   (as datc analyze predict runs them)\n\n",
          "all policies", s, 1e3 * s / (double) trials);
}

int
main (int argc, char **argv)
{
  if (argc == 3)
    {
      bench (g_ascii_strtoull (argv[1], NULL, 10), g_ascii_strtoull (argv[2], NULL, 10));
      return 0;
    }
  bench (1000, 1000);
  bench (10000, 100);
  bench (1000000, 3);
  return 0;
}
