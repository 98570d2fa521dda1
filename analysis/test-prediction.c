/* test-prediction.c: seeded reproducibility down to the bytes of the
 * JSON, exact values for deterministic scenarios, order statistics,
 * which proxies pay off, and empirical waits feeding their bounds. */
#include "prediction.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static DatcScenario *
four_sites (void)
{
  DatcScenario *sc = datc_scenario_new (1000);
  g_autoptr (GError) error = NULL;
  DatcScenarioSite *a = datc_scenario_add_site (
      sc, "A", 32, 2, 1800, 0.3, datc_wait_dist_parse ("lognormal 30m 1", NULL, &error));
  a->walltime = 4 * 3600;
  a->fail_rate = 0.05;
  DatcScenarioSite *b
      = datc_scenario_add_site (sc, "B", 16, 4, 1200, 0.3, datc_wait_dist_new_exp (3600));
  b->outage_probability = 0.1;
  b->outage_length = 12 * 3600;
  datc_scenario_add_site (sc, "C", 64, 1, 2700, 0,
                          datc_wait_dist_parse ("lomax 3600 2.5", NULL, &error));
  datc_scenario_add_site (sc, "D", 8, 8, 1500, 0.5, datc_wait_dist_new_const (600));
  g_assert_no_error (error);
  return sc;
}

static void
test_prediction_same_seed_same_bytes (void)
{
  g_autoptr (DatcScenario) sc = four_sites ();
  g_autoptr (DatcPrediction) a = datc_prediction_run (sc, 200, 42, DATC_POLICY_ALL, NULL);
  g_autoptr (DatcPrediction) b = datc_prediction_run (sc, 200, 42, DATC_POLICY_ALL, NULL);
  g_autoptr (DatcPrediction) c = datc_prediction_run (sc, 200, 43, DATC_POLICY_ALL, NULL);
  g_autofree gchar *ja = datc_prediction_to_json (a);
  g_autofree gchar *jb = datc_prediction_to_json (b);
  g_autofree gchar *jc = datc_prediction_to_json (c);
  g_assert_cmpstr (ja, ==, jb);
  g_assert_cmpstr (ja, !=, jc);
  /* Asking for fewer policies changes nothing in the ones asked. */
  g_autoptr (DatcPrediction) d = datc_prediction_run (sc, 200, 42, 1u << DATC_POLICY_PULL, NULL);
  g_assert_cmpmem (datc_prediction_turnarounds (a, DATC_POLICY_PULL), 200 * sizeof (double),
                   datc_prediction_turnarounds (d, DATC_POLICY_PULL), 200 * sizeof (double));
}

static void
test_prediction_json_has_the_promised_shape (void)
{
  g_autoptr (DatcScenario) sc = four_sites ();
  g_autoptr (DatcPrediction) p = datc_prediction_run (sc, 50, 1, DATC_POLICY_ALL, NULL);
  g_autofree gchar *json = datc_prediction_to_json (p);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (json_parser_load_from_data (parser, json, -1, &error));
  JsonObject *o = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpint (json_object_get_int_member (o, "tasks"), ==, 1000);
  g_assert_cmpint (json_object_get_int_member (o, "trials"), ==, 50);
  JsonObject *pol = json_object_get_object_member (o, "policies");
  g_assert_cmpuint (json_object_get_size (pol), ==, DATC_N_POLICIES);
  for (DatcPolicy k = 0; k < DATC_N_POLICIES; k++)
    {
      JsonObject *st = json_object_get_object_member (pol, datc_policy_name (k));
      g_assert_nonnull (st);
      const DatcPolicyStats *want = datc_prediction_stats (p, k);
      g_assert_cmpfloat_with_epsilon (json_object_get_double_member (st, "mean"), want->mean, 1e-3);
      g_assert_cmpfloat_with_epsilon (json_object_get_double_member (st, "median"), want->median,
                                      1e-3);
      g_assert_cmpfloat_with_epsilon (json_object_get_double_member (st, "p95"), want->p95, 1e-3);
      g_assert_true (json_object_has_member (st, "slot_hours"));
      g_assert_cmpfloat (want->median, <=, want->p95);
      g_assert_cmpfloat (want->min, <=, want->median);
    }
  JsonObject *sites = json_object_get_object_member (o, "sites");
  g_assert_cmpint (
      json_object_get_int_member (json_object_get_object_member (sites, "D"), "proxies"), ==, 8);
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

static void
test_prediction_median_and_p95_are_order_statistics (void)
{
  g_autoptr (DatcScenario) sc = four_sites ();
  g_autoptr (DatcPrediction) p = datc_prediction_run (sc, 101, 5, 1u << DATC_POLICY_PULL, NULL);
  double v[101];
  memcpy (v, datc_prediction_turnarounds (p, DATC_POLICY_PULL), sizeof v);
  qsort (v, 101, sizeof (double), cmp_double);
  const DatcPolicyStats *st = datc_prediction_stats (p, DATC_POLICY_PULL);
  g_assert_cmpfloat (st->median, ==, v[50]);
  g_assert_cmpfloat (st->p95, ==, v[95]); /* ceil (0.95 * 101) = 96th */
  double s = 0;
  for (guint i = 0; i < 101; i++)
    s += v[i];
  g_assert_cmpfloat_with_epsilon (st->mean, s / 101, 1e-6);
  g_assert_null (datc_prediction_stats (p, DATC_POLICY_ECT));
}

static void
test_prediction_deterministic_is_exact_in_one_trial (void)
{
  g_autoptr (DatcScenario) sc = datc_scenario_new (100);
  datc_scenario_add_site (sc, "A", 8, 1, 30, 0, datc_wait_dist_new_const (60));
  datc_scenario_add_site (sc, "B", 4, 1, 60, 0, datc_wait_dist_new_const (7200));
  g_autoptr (DatcPrediction) p = datc_prediction_run (sc, 1000, 1, DATC_POLICY_ALL, NULL);
  g_assert_true (datc_prediction_deterministic (p));
  g_assert_cmpuint (datc_prediction_trials (p), ==, 1);
  const DatcPolicyStats *pull = datc_prediction_stats (p, DATC_POLICY_PULL);
  /* B starts after A is done: 13 rounds of 30 s after 60 s. */
  g_assert_cmpfloat (pull->mean, ==, 60 + 13 * 30);
  g_assert_cmpfloat (pull->median, ==, pull->mean);
  g_assert_cmpfloat (pull->p95, ==, pull->mean);
  g_assert_cmpfloat (pull->se, ==, 0);
  /* B's proxy would start after the turnaround: it does not pay off. */
  g_assert_cmpuint (datc_prediction_pay_off (p, 0), ==, 1);
  g_assert_cmpuint (datc_prediction_pay_off (p, 1), ==, 0);
  g_autofree gchar *text = datc_prediction_to_text (p);
  g_assert_nonnull (strstr (text, "exact"));
}

static void
test_prediction_empirical_waits_feed_their_bound (void)
{
  double waits[100];
  for (guint i = 0; i < 100; i++)
    waits[i] = 60.0 * (i + 1);
  g_autoptr (DatcScenario) sc = datc_scenario_new (200);
  datc_scenario_add_site (sc, "E", 10, 2, 300, 0, datc_wait_dist_new_empirical (waits, 100));
  datc_scenario_add_site (sc, "F", 10, 2, 300, 0, datc_wait_dist_new_empirical (waits, 58));
  g_autoptr (DatcPrediction) p = datc_prediction_run (sc, 300, 1, DATC_POLICY_ALL, NULL);
  const DatcWaitBound *e = datc_prediction_wait_bound (p, 0),
                      *f = datc_prediction_wait_bound (p, 1);
  g_assert_nonnull (e);
  g_assert_cmpuint (e->observations, ==, 100);
  g_assert_cmpuint (e->index, ==, datc_qbets_index (100, 0.95, 0.95));
  g_assert_cmpfloat (e->bound, ==, waits[e->index - 1]);
  g_assert_nonnull (f);
  g_assert_cmpuint (f->index, ==, 0);
  g_assert_cmpuint (f->needed, ==, 59);
  /* Every E wait at its bound is slower than E waits drawn at random. */
  double at = datc_prediction_pull_at_bounds (p);
  g_assert_true (isfinite (at));
  g_assert_cmpfloat (at, >, datc_prediction_stats (p, DATC_POLICY_PULL)->mean);
  g_autofree gchar *json = datc_prediction_to_json (p);
  g_assert_nonnull (
      strstr (json, "\"wait_bound\":{\"quantile\":0.9500,\"confidence\":0.9500,\"observations\":58,"
                    "\"needed\":59,\"bound\":null}"));
  g_autofree gchar *text = datc_prediction_to_text (p);
  g_assert_nonnull (strstr (text, "59 are needed"));
}

static void
test_prediction_rejects_zero_trials_and_no_policy (void)
{
  g_autoptr (DatcScenario) sc = four_sites ();
  g_autoptr (GError) error = NULL;
  g_assert_null (datc_prediction_run (sc, 0, 1, DATC_POLICY_ALL, &error));
  g_assert_nonnull (error);
  g_clear_error (&error);
  g_assert_null (datc_prediction_run (sc, 10, 1, 0, &error));
  g_assert_nonnull (error);
  guint mask = 0;
  g_clear_error (&error);
  g_assert_true (datc_policy_mask_parse ("pull, ect,pull+rep", &mask, NULL));
  g_assert_cmpuint (
      mask, ==, (1u << DATC_POLICY_PULL) | (1u << DATC_POLICY_ECT) | (1u << DATC_POLICY_PULL_REP));
  g_assert_false (datc_policy_mask_parse ("pull,magic", &mask, &error));
  g_assert_nonnull (strstr (error->message, "magic"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/prediction/seed/same-seed-gives-the-same-bytes",
                   test_prediction_same_seed_same_bytes);
  g_test_add_func ("/prediction/json/has-the-promised-shape",
                   test_prediction_json_has_the_promised_shape);
  g_test_add_func ("/prediction/stats/median-and-p95-are-order-statistics",
                   test_prediction_median_and_p95_are_order_statistics);
  g_test_add_func ("/prediction/deterministic/is-exact-in-one-trial",
                   test_prediction_deterministic_is_exact_in_one_trial);
  g_test_add_func ("/prediction/empirical/waits-feed-their-bound",
                   test_prediction_empirical_waits_feed_their_bound);
  g_test_add_func ("/prediction/input/rejects-zero-trials-and-no-policy",
                   test_prediction_rejects_zero_trials_and_no_policy);
  return g_test_run ();
}
