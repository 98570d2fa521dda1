/* test-report.c: the report of a known campaign is one self-contained
 * HTML file that loads in headless Chromium without errors, with its four
 * plots present and drawn, and each site's scheduler calls; names from
 * the trace are escaped. */
#include "report.h"

#include <string.h>

#include "test-chromium.h"
#include "test-fixture-campaign.h"

static guint
count (const char *hay, const char *needle)
{
  guint n = 0;
  for (const char *p = strstr (hay, needle); p != NULL; p = strstr (p + 1, needle))
    n++;
  return n;
}

static gchar *
render (const char *dir)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcCampaignLog) log = datc_campaign_log_load (dir, &error);
  g_assert_no_error (error);
  g_autoptr (DatcCampaignModel) model = datc_campaign_model_run (log);
  return datc_report_render (log, model);
}

static void
test_report_is_self_contained (void)
{
  g_autofree gchar *dir = fixture_campaign_new (FIXTURE_CLEAN);
  g_autofree gchar *html = render (dir);
  g_assert_true (g_str_has_prefix (html, "<!DOCTYPE html>"));
  g_assert_cmpuint (count (html, "<svg class=\"plot\""), ==, 4);
  g_assert_cmpuint (count (html, "<g class=\"data\">"), ==, 4);
  /* Nothing to fetch: no URL, no external script, style, font or image. */
  const char *forbidden[]
      = { "http:", "https:", "//", "<link", " src=", "url(", "@import", "<img", "<iframe" };
  for (guint i = 0; i < G_N_ELEMENTS (forbidden); i++)
    if (strstr (html, forbidden[i]) != NULL)
      g_error ("report contains \"%s\": %.80s", forbidden[i], strstr (html, forbidden[i]));
  g_assert_nonnull (strstr (html, "pull+rep"));
  g_assert_nonnull (strstr (html, "actual"));
  fixture_remove_tree (dir);
}

static void
test_report_shows_scheduler_calls (void)
{
  g_autofree gchar *dir = fixture_campaign_new (FIXTURE_CLEAN);
  g_autofree gchar *html = render (dir);
  g_assert_nonnull (strstr (html, "<h2>Scheduler calls</h2>"));
  /* Calls, not events (a submit counts 2), per kind; per 1000 tasks
   * finished there, none on B. */
  g_assert_nonnull (
      strstr (html, "<tr><td>A</td><td>7</td><td>4</td><td>3</td><td>0</td><td>875.0</td></tr>"));
  g_assert_nonnull (
      strstr (html, "<tr><td>B</td><td>3</td><td>2</td><td>0</td><td>1</td><td>–</td></tr>"));
  fixture_remove_tree (dir);
}

static void
test_report_renders_in_chromium (void)
{
  g_autofree gchar *dir = fixture_campaign_new (FIXTURE_GARBAGE);
  g_autofree gchar *html = render (dir);
  g_autofree gchar *path = g_build_filename (dir, "report.html", NULL);
  g_assert_true (g_file_set_contents (path, html, -1, NULL));
  g_autofree gchar *dom = chromium_dump_dom (path);
  chromium_assert_report_drawn (dom, 4);
  fixture_remove_tree (dir);
}

static void
test_report_escapes_names_from_the_trace (void)
{
  g_autofree gchar *dir = fixture_campaign_new (FIXTURE_CLEAN);
  g_autofree gchar *tp = g_build_filename (dir, "trace.jsonl", NULL);
  g_autofree gchar *old = NULL;
  g_assert_true (g_file_get_contents (tp, &old, NULL, NULL));
  g_autofree gchar *all = g_strconcat (
      old,
      "{\"time\":1700000001000000,\"event\":\"proxy_submitted\",\"site\":"
      "\"<script>x</script>&\",\"proxy\":\"p\",\"job\":\"1\",\"slots\":1,\"walltime\":0}\n",
      NULL);
  g_assert_true (g_file_set_contents (tp, all, -1, NULL));
  g_autofree gchar *html = render (dir);
  g_assert_null (strstr (html, "<script>x"));
  g_assert_nonnull (strstr (html, "&lt;script&gt;x&lt;/script&gt;&amp;"));
  fixture_remove_tree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/report/html/is-self-contained", test_report_is_self_contained);
  g_test_add_func ("/report/html/shows-scheduler-calls-per-site",
                   test_report_shows_scheduler_calls);
  g_test_add_func ("/report/html/escapes-names-from-the-trace",
                   test_report_escapes_names_from_the_trace);
  g_test_add_func ("/report/chromium/loads-it-and-draws-every-plot",
                   test_report_renders_in_chromium);
  return g_test_run ();
}
