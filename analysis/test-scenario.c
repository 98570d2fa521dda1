/* test-scenario.c: scenario files as in the issue parse to the values they
 * say; every malformed one fails with FILE:LINE naming the bad line. */
#include "scenario.h"

#include <glib/gstdio.h>
#include <string.h>

#include "analysis-error.h"

typedef struct {
  gchar *dir;
  gchar *path;
} Fixture;

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  f->dir = g_dir_make_tmp ("datc-scenario-XXXXXX", NULL);
  f->path = g_build_filename (f->dir, "s.ini", NULL);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  g_autoptr (GDir) d = g_dir_open (f->dir, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      g_autofree gchar *p = g_build_filename (f->dir, name, NULL);
      g_unlink (p);
    }
  g_rmdir (f->dir);
  g_free (f->dir);
  g_free (f->path);
}

static const char issue_example[]
    = "[campaign]\n"
      "tasks = 1000\n"
      "[site A]\n"
      "slots_per_proxy = 64\n"
      "proxies = 2\n"
      "task_time = 30m\n"
      "task_cv = 0.1\n"
      "wait = lognormal 30m 1      # const X | exp MEAN | lognormal MEDIAN SIGMA | lomax SCALE "
      "ALPHA\n"
      "walltime = 2h               # optional\n"
      "fail_rate = 0.05            # optional, per proxy-hour\n"
      "outage = 0.2 24h            # optional, probability and length\n"
      "poll_interval = 1s          # direct\n"
      "job_overhead = 2s           # direct\n"
      "max_calls_per_minute = 12   # direct\n"
      "\n"
      "# a second site with the defaults\n"
      "[site B]\n"
      "slots_per_proxy=8\n"
      "task_time=90\n";

static void
test_scenario_reads_the_issue_example (Fixture *f, gconstpointer data)
{
  g_assert_true (g_file_set_contents (f->path, issue_example, -1, NULL));
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcScenario) sc = datc_scenario_load (f->path, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (datc_scenario_tasks (sc), ==, 1000);
  g_assert_cmpuint (datc_scenario_n_sites (sc), ==, 2);
  const DatcScenarioSite *a = datc_scenario_site (sc, 0), *b = datc_scenario_site (sc, 1);
  g_assert_cmpstr (a->name, ==, "A");
  g_assert_cmpuint (a->line, ==, 3);
  g_assert_cmpuint (a->slots_per_proxy, ==, 64);
  g_assert_cmpuint (a->proxies, ==, 2);
  g_assert_cmpfloat (a->task_time, ==, 1800);
  g_assert_cmpfloat (a->task_cv, ==, 0.1);
  g_assert_cmpint (datc_wait_dist_kind (a->wait), ==, DATC_WAIT_LOGNORMAL);
  g_autofree gchar *w = datc_wait_dist_describe (a->wait);
  g_assert_cmpstr (w, ==, "lognormal 1800 1");
  g_assert_cmpfloat (a->walltime, ==, 7200);
  g_assert_cmpfloat (a->fail_rate, ==, 0.05);
  g_assert_cmpfloat (a->outage_probability, ==, 0.2);
  g_assert_cmpfloat (a->outage_length, ==, 86400);
  g_assert_cmpfloat (a->poll_interval, ==, 1);
  g_assert_cmpfloat (a->job_overhead, ==, 2);
  g_assert_cmpuint (a->calls_per_minute, ==, 12);
  g_assert_cmpstr (b->name, ==, "B");
  g_assert_cmpfloat (b->poll_interval, ==, DATC_SCENARIO_POLL_INTERVAL);
  g_assert_cmpfloat (b->job_overhead, ==, 0);
  g_assert_cmpuint (b->calls_per_minute, ==, 0);
  g_assert_cmpuint (b->proxies, ==, 1);
  g_assert_cmpfloat (b->task_cv, ==, 0);
  g_assert_cmpfloat (b->walltime, ==, 0);
  g_assert_true (datc_wait_dist_is_constant (b->wait));
  g_assert_cmpuint (datc_scenario_total_slots (sc), ==, 136);
  g_assert_false (datc_scenario_is_deterministic (sc));
  g_assert_true (datc_scenario_validate (sc, NULL));
}

typedef struct {
  const char *name;
  const char *text;
  guint line; /* 0: "FILE: " without a line */
  const char *says;
} Malformed;

static const Malformed malformed[] = {
  { "no-group", "tasks = 3\n", 1, "before any group" },
  { "not-a-key-value", "[campaign]\ntasks = 3\nfoo\n", 3, "not key = value" },
  { "unclosed-group", "[campaign]\ntasks = 3\n[site A\n", 3, "group header" },
  { "unknown-group", "[campaign]\ntasks = 3\n[sites A]\n", 3, "unknown group" },
  { "unnamed-site", "[campaign]\ntasks = 3\n[site  ]\n", 3, "needs a name" },
  { "duplicate-group", "[campaign]\ntasks=1\n[site A]\nslots_per_proxy=1\ntask_time=1\n[site A]\n",
    6, "appears again" },
  { "duplicate-key", "[campaign]\ntasks = 3\ntasks = 4\n", 3, "first at line 2" },
  { "no-tasks", "[campaign]\n[site A]\nslots_per_proxy=1\ntask_time=1\n", 1, "has no tasks" },
  { "zero-tasks", "[campaign]\ntasks = 0\n", 2, "whole number" },
  { "too-many-tasks", "[campaign]\ntasks = 100000001\n", 2, "whole number" },
  { "tasks-not-a-number", "[campaign]\ntasks = many\n", 2, "whole number" },
  { "unknown-campaign-key", "[campaign]\ntasks = 3\nseed = 4\n", 3, "unknown key 'seed'" },
  { "no-site", "[campaign]\ntasks = 3\n", 1, "no [site NAME]" },
  { "missing-slots", "[campaign]\ntasks = 3\n\n[site A]\ntask_time = 1\n", 4,
    "has no slots_per_proxy" },
  { "missing-task-time", "[campaign]\ntasks = 3\n[site A]\nslots_per_proxy = 2\n", 3,
    "has no task_time" },
  { "zero-task-time", "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=2\ntask_time = 0\n", 5,
    "above 0" },
  { "bad-time", "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=2\ntask_time = 3d\n", 5,
    "not a time" },
  { "negative-time", "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=2\ntask_time = -3m\n", 5,
    "negative" },
  { "misspelt-key", "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=2\ntask_time=1\nwalltim = 1h\n",
    6, "unknown key 'walltim'" },
  { "locale-key",
    "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=2\ntask_time=1\nwait[fr] = const 1\n", 6,
    "unknown key" },
  { "overhead-not-a-time",
    "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=1\ntask_time=1\njob_overhead = soon\n", 6,
    "job_overhead" },
  { "calls-negative",
    "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=1\ntask_time=1\nmax_calls_per_minute = -1\n", 6,
    "whole number" },
  { "slots-zero", "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=0\ntask_time=1\n", 4,
    "whole number" },
  { "slots-too-many", "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=100001\ntask_time=1\n", 4,
    "whole number" },
  { "proxies-negative",
    "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=1\nproxies=-1\ntask_time=1\n", 5,
    "whole number" },
  { "cv-negative", "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=1\ntask_time=1\ntask_cv=-0.1\n",
    6, "number from 0" },
  { "wait-unknown",
    "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=1\ntask_time=1\nwait = weibull 1 2\n", 6,
    "unknown wait kind" },
  { "wait-arity", "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=1\ntask_time=1\nwait = exp\n", 6,
    "takes 1 value" },
  { "wait-file-missing",
    "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=1\ntask_time=1\nwait = empirical nope.txt\n", 6,
    "nope.txt" },
  { "walltime-short",
    "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=1\ntask_time=1h\nwalltime=30m\n", 6,
    "shorter than task_time" },
  { "fail-rate-bad",
    "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=1\ntask_time=1\nfail_rate = often\n", 6,
    "fail_rate" },
  { "outage-one-word",
    "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=1\ntask_time=1\noutage = 0.5\n", 6,
    "probability" },
  { "outage-prob",
    "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=1\ntask_time=1\noutage = 1.5 1h\n", 6,
    "probability" },
  { "bad-utf8", "[campaign]\ntasks=3\n# caf\xe9\n", 3, "UTF-8" },
  { "empty-file", "", 1, "no [campaign]" },
  { "only-comments", "# nothing here\n\n", 1, "no [campaign]" },
  { "max-proxies-below-proxies",
    "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=1\nproxies=2\nmax_proxies=1\ntask_time=1\n", 6,
    "whole number from 2" },
  { "proxies-zero-without-room",
    "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=1\nproxies=0\ntask_time=1\n", 5,
    "needs max_proxies" },
  { "migrate-after-not-a-time",
    "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=1\ntask_time=1\nmigrate_after = later\n", 6,
    "migrate_after" },
  { "only-room",
    "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=1\nproxies=0\nmax_proxies=1\ntask_time=1\n", 0,
    "no site has proxies" },
  { "too-many-slots",
    "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=100000\nproxies=11\ntask_time=1\n", 3,
    "slots" },
};

static void
test_scenario_malformed_names_file_and_line (Fixture *f, gconstpointer data)
{
  const Malformed *m = data;
  g_assert_true (g_file_set_contents (f->path, m->text, -1, NULL));
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcScenario) sc = datc_scenario_load (f->path, &error);
  g_assert_null (sc);
  g_assert_nonnull (error);
  g_assert_true (error->domain == DATC_ANALYSIS_ERROR);
  g_autofree gchar *want
      = m->line ? g_strdup_printf ("%s:%u: ", f->path, m->line) : g_strdup_printf ("%s: ", f->path);
  if (!g_str_has_prefix (error->message, want) || strstr (error->message, m->says) == NULL)
    g_error ("%s: got \"%s\", want prefix \"%s\" and \"%s\"", m->name, error->message, want,
             m->says);
}

static void
test_scenario_nul_byte_names_its_line (Fixture *f, gconstpointer data)
{
  static const char text[] = "[campaign]\ntasks = 3\n[site A]\nslots\0_per_proxy = 1\n";
  g_assert_true (g_file_set_contents (f->path, text, sizeof text - 1, NULL));
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcScenario) sc = datc_scenario_load (f->path, &error);
  g_assert_null (sc);
  g_autofree gchar *want = g_strdup_printf ("%s:4: ", f->path);
  g_assert_true (g_str_has_prefix (error->message, want));
}

static void
test_scenario_missing_file_is_an_error (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcScenario) sc = datc_scenario_load ("/nonexistent/scenario.ini", &error);
  g_assert_null (sc);
  g_assert_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_IO);
}

static void
test_scenario_empirical_path_is_relative_to_the_file (Fixture *f, gconstpointer data)
{
  g_autofree gchar *waits = g_build_filename (f->dir, "w.txt", NULL);
  g_assert_true (g_file_set_contents (waits, "5\n7\n", -1, NULL));
  g_assert_true (g_file_set_contents (
      f->path,
      "[campaign]\ntasks=3\n[site A]\nslots_per_proxy=1\ntask_time=1\nwait = empirical w.txt\n", -1,
      NULL));
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcScenario) sc = datc_scenario_load (f->path, &error);
  g_assert_no_error (error);
  gsize n;
  datc_wait_dist_samples (datc_scenario_site (sc, 0)->wait, &n);
  g_assert_cmpuint (n, ==, 2);

  /* An error inside the waits file carries both places. */
  g_assert_true (g_file_set_contents (waits, "5\nlater\n", -1, NULL));
  g_clear_pointer (&sc, datc_scenario_free);
  sc = datc_scenario_load (f->path, &error);
  g_assert_null (sc);
  g_autofree gchar *want = g_strdup_printf ("%s:6: wait: %s:2: ", f->path, waits);
  g_assert_true (g_str_has_prefix (error->message, want));
}

static void
test_scenario_deterministic_when_nothing_is_random (void)
{
  g_autoptr (DatcScenario) sc = datc_scenario_new (10);
  DatcScenarioSite *s = datc_scenario_add_site (sc, "A", 2, 1, 5, 0, datc_wait_dist_new_const (3));
  g_assert_true (datc_scenario_is_deterministic (sc));
  s->outage_probability = 1;
  s->outage_length = 60;
  g_assert_true (datc_scenario_is_deterministic (sc));
  s->outage_probability = 0.5;
  g_assert_false (datc_scenario_is_deterministic (sc));
  s->outage_probability = 0;
  datc_scenario_add_site (sc, "B", 2, 1, 5, 0, datc_wait_dist_new_exp (3));
  g_assert_false (datc_scenario_is_deterministic (sc));
  g_autoptr (DatcScenario) only_a = datc_scenario_copy_without (sc, 1);
  g_assert_cmpuint (datc_scenario_n_sites (only_a), ==, 1);
  g_assert_true (datc_scenario_is_deterministic (only_a));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/scenario/load/reads-the-issue-example", Fixture, NULL, fixture_setup,
              test_scenario_reads_the_issue_example, fixture_teardown);
  for (guint i = 0; i < G_N_ELEMENTS (malformed); i++)
    {
      g_autofree gchar *path
          = g_strdup_printf ("/scenario/load/rejects-%s-at-its-line", malformed[i].name);
      g_test_add (path, Fixture, &malformed[i], fixture_setup,
                  test_scenario_malformed_names_file_and_line, fixture_teardown);
    }
  g_test_add ("/scenario/load/rejects-a-nul-byte-at-its-line", Fixture, NULL, fixture_setup,
              test_scenario_nul_byte_names_its_line, fixture_teardown);
  g_test_add_func ("/scenario/load/reports-a-missing-file", test_scenario_missing_file_is_an_error);
  g_test_add ("/scenario/load/finds-empirical-waits-beside-the-file", Fixture, NULL, fixture_setup,
              test_scenario_empirical_path_is_relative_to_the_file, fixture_teardown);
  g_test_add_func ("/scenario/deterministic/when-nothing-is-random",
                   test_scenario_deterministic_when_nothing_is_random);
  return g_test_run ();
}
