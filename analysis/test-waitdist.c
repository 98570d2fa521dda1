/* test-waitdist.c: each wait kind parses, samples with its own mean, and
 * says what is wrong with a malformed spec or waits file. */
#include "waitdist.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "analysis-error.h"

static double
sample_mean (const DatcWaitDist *d, guint n, double *sd)
{
  DatcRng r;
  datc_rng_init (&r, 1234);
  double s = 0, s2 = 0;
  for (guint i = 0; i < n; i++)
    {
      double x = datc_wait_dist_sample (d, &r);
      g_assert_cmpfloat (x, >=, 0);
      s += x;
      s2 += x * x;
    }
  double m = s / n;
  *sd = sqrt (MAX (0, s2 / n - m * m));
  return m;
}

static void
test_waitdist_kinds_sample_with_their_means (void)
{
  const struct {
    const char *spec;
    double mean;
  } cases[] = {
    { "const 10m", 600 },
    { "exp 30", 30 },
    { "lognormal 30m 0.5", 1800 * 1.1331484530668263 }, /* exp (0.5^2 / 2) */
    { "lomax 100 3", 50 },
  };
  const guint n = 200000;
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (DatcWaitDist) d = datc_wait_dist_parse (cases[i].spec, NULL, &error);
      g_assert_no_error (error);
      g_assert_cmpfloat_with_epsilon (datc_wait_dist_mean (d), cases[i].mean, 1e-9 * cases[i].mean);
      double sd, m = sample_mean (d, n, &sd);
      /* Within 6 standard errors (lomax 3 has a finite variance). */
      g_assert_cmpfloat (fabs (m - cases[i].mean), <=, 6 * sd / sqrt (n) + 1e-9);
    }
}

static void
test_waitdist_empirical_bootstraps_from_the_file (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("datc-waits-XXXXXX", NULL);
  g_autofree gchar *path = g_build_filename (dir, "w.txt", NULL);
  g_assert_true (g_file_set_contents (path, "# observed\n10\n\n20\n30s\n1m\n", -1, NULL));
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcWaitDist) d = datc_wait_dist_parse ("empirical w.txt", dir, &error);
  g_assert_no_error (error);
  gsize n;
  const double *s = datc_wait_dist_samples (d, &n);
  g_assert_cmpuint (n, ==, 4);
  g_assert_cmpfloat (s[0], ==, 10);
  g_assert_cmpfloat (s[3], ==, 60);
  DatcRng r;
  datc_rng_init (&r, 3);
  guint hits[4] = { 0 };
  for (guint i = 0; i < 4000; i++)
    {
      double x = datc_wait_dist_sample (d, &r);
      hits[x == 10 ? 0 : x == 20 ? 1 : x == 30 ? 2 : 3]++;
    }
  for (guint i = 0; i < 4; i++)
    g_assert_cmpuint (hits[i], >, 800);
  g_unlink (path);
  g_rmdir (dir);
}

static void
test_waitdist_rejects_malformed_specs (void)
{
  const char *bad[] = { "",
                        "gamma 1 2",
                        "const",
                        "const 1 2",
                        "exp -3",
                        "lognormal 1m",
                        "lognormal 1m x",
                        "lognormal 1m -1",
                        "lomax 10 0",
                        "lomax 10",
                        "empirical /nonexistent/waits.txt",
                        "exp 1d" };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (DatcWaitDist) d = datc_wait_dist_parse (bad[i], NULL, &error);
      g_assert_null (d);
      g_assert_nonnull (error);
    }
}

static void
test_waitdist_bad_waits_file_names_its_line (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("datc-waits-XXXXXX", NULL);
  g_autofree gchar *path = g_build_filename (dir, "w.txt", NULL);
  g_assert_true (g_file_set_contents (path, "10\n20\nsoon\n", -1, NULL));
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) w = datc_waits_load_file (path, &error);
  g_assert_null (w);
  g_assert_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT);
  g_autofree gchar *want = g_strdup_printf ("%s:3: ", path);
  g_assert_true (g_str_has_prefix (error->message, want));

  g_clear_error (&error);
  g_assert_true (g_file_set_contents (path, "# nothing\n\n", -1, NULL));
  w = datc_waits_load_file (path, &error);
  g_assert_null (w);
  g_assert_nonnull (strstr (error->message, "no waits"));

  g_clear_error (&error);
  g_assert_true (g_file_set_contents (path, "10\n-4\n", -1, NULL));
  w = datc_waits_load_file (path, &error);
  g_assert_null (w);
  g_free (want);
  want = g_strdup_printf ("%s:2: ", path);
  g_assert_true (g_str_has_prefix (error->message, want));
  g_unlink (path);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/waitdist/kinds/sample-with-their-means",
                   test_waitdist_kinds_sample_with_their_means);
  g_test_add_func ("/waitdist/empirical/bootstraps-from-the-file",
                   test_waitdist_empirical_bootstraps_from_the_file);
  g_test_add_func ("/waitdist/parse/rejects-malformed-specs",
                   test_waitdist_rejects_malformed_specs);
  g_test_add_func ("/waitdist/file/names-the-bad-line",
                   test_waitdist_bad_waits_file_names_its_line);
  return g_test_run ();
}
