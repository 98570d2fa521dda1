/* test-report-campaign.c: a real campaign on the local site, then
 * `datc analyze trace` and `datc report` on its directory: the trace
 * analysis finds every task, proxy and wait, the model's turnaround for the
 * observed starts is near what happened, and the report loads in headless
 * Chromium with every plot drawn.  Runs the real `datc` named by $DATC
 * (registered in tests/meson.build, suite integration). */
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/wait.h>

#include "test-chromium.h"
#include "test-fixture-campaign.h"

#define TASKS 60

static const char *
datc (void)
{
  const char *d = g_getenv ("DATC");
  if (d == NULL || !g_file_test (d, G_FILE_TEST_IS_EXECUTABLE))
    g_error ("DATC must name the datc program (meson sets it)");
  return d;
}

/* Runs datc with a deadline; returns its exit status, stdout in *out. */
static int
run (const char *const *args, gchar **out)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_ptr_array_add (argv, (gpointer) "timeout");
  g_ptr_array_add (argv, (gpointer) "-k");
  g_ptr_array_add (argv, (gpointer) "5");
  g_ptr_array_add (argv, (gpointer) "120");
  g_ptr_array_add (argv, (gpointer) datc ());
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  g_autoptr (GError) error = NULL;
  g_autofree gchar *err = NULL;
  int status = 0;
  g_assert_true (g_spawn_sync (NULL, (gchar **) argv->pdata, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
                               out, &err, &status, &error));
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, NULL))
    g_test_message ("datc %s: %s", args[0], err);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128;
}

static void
test_report_campaign_of_a_real_local_run (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("datc-report-campaign-XXXXXX", NULL);
  g_autofree gchar *campaign = g_build_filename (dir, "c.datc", NULL);
  g_autofree gchar *tasks = g_build_filename (dir, "tasks.txt", NULL);
  GString *t = g_string_new (NULL);
  for (guint i = 0; i < TASKS; i++)
    g_string_append_printf (t, "sleep 0.0%u\n", 2 + i % 4);
  g_assert_true (g_file_set_contents (tasks, t->str, -1, NULL));
  g_string_free (t, TRUE);

  g_autofree gchar *run_out = NULL;
  g_assert_cmpint (run ((const char *[]) { "run", "--dir", campaign, "--local-slots", "4",
                                           "--local-agents", "2", tasks, NULL },
                        &run_out),
                   ==, 0);

  /* The trace analysis. */
  g_autofree gchar *json = NULL;
  g_assert_cmpint (run ((const char *[]) { "analyze", "trace", campaign, "--json", NULL }, &json),
                   ==, 0);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (json_parser_load_from_data (parser, json, -1, &error));
  JsonObject *o = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpint (json_object_get_int_member (o, "tasks"), ==, TASKS);
  g_assert_cmpint (json_object_get_int_member (o, "done"), ==, TASKS);
  g_assert_cmpint (json_object_get_int_member (o, "failed"), ==, 0);
  g_assert_true (json_object_get_boolean_member (o, "finished"));
  g_assert_cmpint (json_object_get_int_member (o, "sessions"), ==, 1);
  double turnaround = json_object_get_double_member (o, "turnaround");
  g_assert_cmpfloat (turnaround, >, 0);
  JsonObject *local
      = json_object_get_object_member (json_object_get_object_member (o, "sites"), "local");
  g_assert_nonnull (local);
  gint64 started = json_object_get_int_member (local, "proxies_started");
  g_assert_cmpint (started, >=, 1);
  g_assert_cmpint (json_object_get_int_member (local, "proxies_submitted"), >=, started);
  g_assert_cmpint (json_object_get_int_member (local, "tasks_done"), ==, TASKS);
  JsonObject *waits = json_object_get_object_member (local, "waits");
  g_assert_cmpint (json_object_get_int_member (waits, "count"), ==, started);
  g_assert_cmpfloat (json_object_get_double_member (waits, "min"), >=, 0);
  /* Tasks sleep 20-50 ms (plus a spawn). */
  double task = json_object_get_double_member (local, "task_time_mean");
  g_assert_cmpfloat (task, >=, 0.02);
  g_assert_cmpfloat (task, <, 1.0);
  double util = json_object_get_double_member (local, "utilisation");
  g_assert_cmpfloat (util, >, 0);
  g_assert_cmpfloat (util, <=, 1);

  /* The model, side by side with what happened: the same starts and task
   * times, so pull lands near the actual turnaround (the master's own
   * overhead is what the model leaves out). */
  JsonObject *model = json_object_get_object_member (o, "model");
  g_assert_nonnull (model);
  g_assert_cmpint (json_object_get_int_member (model, "tasks"), ==, TASKS);
  double actual = json_object_get_double_member (model, "actual");
  JsonObject *pol = json_object_get_object_member (model, "policies");
  double pull = json_object_get_double_member (json_object_get_object_member (pol, "pull"), "mean");
  double fluid
      = json_object_get_double_member (json_object_get_object_member (pol, "fluid"), "mean");
  g_test_message ("actual %.3f s, pull %.3f s, fluid %.3f s", actual, pull, fluid);
  g_assert_cmpfloat (actual, >, 0);
  g_assert_cmpfloat (fluid, <=, pull + 1e-9);
  g_assert_cmpfloat (pull, >, actual / 3);
  g_assert_cmpfloat (pull, <, actual * 3);

  g_autofree gchar *text = NULL;
  g_assert_cmpint (run ((const char *[]) { "analyze", "trace", campaign, NULL }, &text), ==, 0);
  g_assert_nonnull (strstr (text, "local"));

  /* The report, in a browser. */
  g_autofree gchar *html = g_build_filename (dir, "report.html", NULL);
  g_autofree gchar *rep_out = NULL;
  g_assert_cmpint (run ((const char *[]) { "report", campaign, "-o", html, NULL }, &rep_out), ==,
                   0);
  g_autofree gchar *content = NULL;
  g_assert_true (g_file_get_contents (html, &content, NULL, NULL));
  g_assert_null (strstr (content, "http:"));
  g_assert_null (strstr (content, "https:"));
  g_autofree gchar *dom = chromium_dump_dom (html);
  chromium_assert_report_drawn (dom, 4);
  fixture_remove_tree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/analysis/report-campaign/explains-a-real-local-run",
                   test_report_campaign_of_a_real_local_run);
  return g_test_run ();
}
