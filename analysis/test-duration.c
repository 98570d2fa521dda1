/* test-duration.c: the time syntax of scenario files. */
#include "duration.h"

#include <locale.h>
#include <math.h>

static void
test_duration_accepts_suffixes_and_plain_seconds (void)
{
  const struct {
    const char *text;
    double seconds;
  } ok[] = { { "90", 90 },     { "45s", 45 }, { "30m", 1800 }, { "2h", 7200 },
             { "1.5h", 5400 }, { " 0 ", 0 },  { "0.25m", 15 }, { "1e2", 100 } };
  for (guint i = 0; i < G_N_ELEMENTS (ok); i++)
    {
      double v = -1;
      g_autoptr (GError) error = NULL;
      g_assert_true (datc_duration_parse (ok[i].text, &v, &error));
      g_assert_no_error (error);
      g_assert_cmpfloat (v, ==, ok[i].seconds);
    }
}

static void
test_duration_rejects_what_is_not_a_time (void)
{
  const char *bad[] = { "",    " ",   "h",     "-1",   "-5m",   "1d",         "1 h", "1hh",
                        "nan", "inf", "1e400", "0x10", "12abc", "3650000000", "m30" };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      double v = 42;
      g_autoptr (GError) error = NULL;
      g_assert_false (datc_duration_parse (bad[i], &v, &error));
      g_assert_nonnull (error);
      g_assert_cmpfloat (v, ==, 42);
    }
}

static void
test_duration_ignores_the_locale_decimal_comma (void)
{
  /* The program calls setlocale (LC_ALL, ""); "1.5h" must still parse. */
  setlocale (LC_NUMERIC, "de_DE.UTF-8");
  double v = 0;
  g_assert_true (datc_duration_parse ("1.5h", &v, NULL));
  g_assert_cmpfloat (v, ==, 5400);
  setlocale (LC_NUMERIC, "C");
}

static void
test_duration_formats_for_people (void)
{
  const struct {
    double s;
    const char *text;
  } cases[] = { { 12.34, "12.3s" },
                { 0.3841, "0.384s" },
                { 245, "4m05s" },
                { 7380, "2h03m" },
                { INFINITY, "never" } };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree gchar *s = datc_duration_format (cases[i].s);
      g_assert_cmpstr (s, ==, cases[i].text);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/duration/parse/accepts-suffixes-and-plain-seconds",
                   test_duration_accepts_suffixes_and_plain_seconds);
  g_test_add_func ("/duration/parse/rejects-what-is-not-a-time",
                   test_duration_rejects_what_is_not_a_time);
  g_test_add_func ("/duration/parse/ignores-the-locale-decimal-comma",
                   test_duration_ignores_the_locale_decimal_comma);
  g_test_add_func ("/duration/format/is-for-people", test_duration_formats_for_people);
  return g_test_run ();
}
