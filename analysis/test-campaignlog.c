/* test-campaignlog.c: a campaign read back from its trace and results —
 * counts, waits, utilisation, the model of it — and what happens with
 * unreadable lines, a torn last line, a running campaign, no directory. */
#include "campaignlog.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "analysis-error.h"
#include "campaignmodel.h"
#include "test-fixture-campaign.h"
#include "tracesummary.h"

static const DatcSiteLog *
site_named (const DatcCampaignLog *log, const char *name)
{
  for (guint i = 0; i < datc_campaign_log_n_sites (log); i++)
    if (g_str_equal (datc_campaign_log_site (log, i)->name, name))
      return datc_campaign_log_site (log, i);
  g_error ("no site %s", name);
}

static void
test_campaignlog_counts_what_happened (void)
{
  g_autofree gchar *dir = fixture_campaign_new (FIXTURE_CLEAN);
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcCampaignLog) log = datc_campaign_log_load (dir, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (datc_campaign_log_n_warnings (log), ==, 0);
  g_assert_cmpuint (datc_campaign_log_tasks (log), ==, 8);
  g_assert_cmpuint (datc_campaign_log_done (log), ==, 8);
  g_assert_cmpuint (datc_campaign_log_failed (log), ==, 0);
  g_assert_true (datc_campaign_log_finished (log));
  g_assert_cmpuint (datc_campaign_log_sessions (log), ==, 1);
  g_assert_cmpint (datc_campaign_log_start (log), ==, FIXTURE_T0);
  g_assert_cmpuint (datc_campaign_log_n_results (log), ==, 8);
  const DatcResultPoint *r = datc_campaign_log_results (log);
  for (guint i = 1; i < 8; i++)
    g_assert_cmpint (r[i - 1].finished, <=, r[i].finished);

  const DatcSiteLog *a = site_named (log, "A"), *b = site_named (log, "B");
  g_assert_cmpuint (a->submitted, ==, 2);
  g_assert_cmpuint (a->started, ==, 2);
  g_assert_cmpuint (a->cancelled, ==, 0);
  g_assert_cmpuint (a->waits->len, ==, 2);
  g_assert_cmpfloat (g_array_index (a->waits, double, 0), ==, 4);
  g_assert_cmpfloat (g_array_index (a->waits, double, 1), ==, 13);
  g_assert_cmpuint (a->done, ==, 8);
  g_assert_cmpfloat_with_epsilon (a->task_mean, 10, 1e-9);
  g_assert_cmpfloat_with_epsilon (a->task_cv, 0, 1e-6);
  g_assert_cmpfloat_with_epsilon (a->busy_seconds, 80, 1e-9);
  /* a1 held 2 slots from 5 to 35.5, a2 from 15 to 25.5. */
  g_assert_cmpfloat_with_epsilon (a->held_seconds, 2 * 30.5 + 2 * 10.5, 1e-9);
  g_assert_cmpuint (b->submitted, ==, 1);
  g_assert_cmpuint (b->started, ==, 0);
  g_assert_cmpuint (b->cancelled, ==, 1);
  g_assert_cmpuint (b->waits->len, ==, 0);
  fixture_remove_tree (dir);
}

static void
test_campaignlog_model_matches_the_run (void)
{
  g_autofree gchar *dir = fixture_campaign_new (FIXTURE_CLEAN);
  g_autoptr (DatcCampaignLog) log = datc_campaign_log_load (dir, NULL);
  g_autoptr (DatcCampaignModel) m = datc_campaign_model_run (log);
  g_assert_nonnull (m);
  g_assert_cmpstr (datc_campaign_model_basis (m), ==, "campaign");
  g_assert_cmpuint (datc_campaign_model_tasks (m), ==, 8);
  g_assert_cmpuint (datc_campaign_model_proxies (m), ==, 2);
  g_assert_cmpfloat (datc_campaign_model_actual (m), ==, 35);
  const DatcPrediction *p = datc_campaign_model_prediction (m);
  g_assert_true (datc_prediction_deterministic (p));
  g_assert_cmpfloat_with_epsilon (datc_prediction_stats (p, DATC_POLICY_PULL)->mean, 35, 1e-6);
  g_assert_cmpfloat_with_epsilon (datc_prediction_stats (p, DATC_POLICY_ECT)->mean, 35, 1e-6);
  g_assert_cmpfloat_with_epsilon (datc_prediction_stats (p, DATC_POLICY_FLUID)->mean, 30, 1e-6);

  g_autofree gchar *json = datc_trace_summary_to_json (log, m);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (json_parser_load_from_data (parser, json, -1, &error));
  JsonObject *o = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpint (json_object_get_int_member (o, "done"), ==, 8);
  g_assert_cmpfloat (json_object_get_double_member (o, "turnaround"), ==, 35);
  JsonObject *sa = json_object_get_object_member (json_object_get_object_member (o, "sites"), "A");
  g_assert_cmpint (json_object_get_int_member (sa, "proxies_started"), ==, 2);
  g_assert_cmpfloat (
      json_object_get_double_member (json_object_get_object_member (sa, "waits"), "median"), ==,
      8.5);
  JsonObject *model = json_object_get_object_member (o, "model");
  g_assert_cmpfloat (json_object_get_double_member (model, "actual"), ==, 35);
  JsonObject *pull
      = json_object_get_object_member (json_object_get_object_member (model, "policies"), "pull");
  g_assert_cmpfloat (json_object_get_double_member (pull, "mean"), ==, 35);

  g_autofree gchar *text = datc_trace_summary_to_text (log, m);
  g_assert_nonnull (strstr (text, "8 done"));
  g_assert_nonnull (strstr (text, "actual"));
  fixture_remove_tree (dir);
}

/* A direct-mode run is modelled as one: its own model gives what happened
 * (44 s), where the per-proxy pull model of a pull campaign would say 29 s;
 * the text and the JSON name the model of the mode that ran.  The mode
 * comes from campaign_started, or from campaign.json for older traces. */
static void
test_campaignlog_direct_campaign_modelled_as_direct (gconstpointer data)
{
  gboolean mode_in_json = GPOINTER_TO_INT (data);
  g_autofree gchar *dir = g_dir_make_tmp ("datc-direct-XXXXXX", NULL);
  fixture_direct_campaign_write (dir, mode_in_json);
  g_autoptr (DatcCampaignLog) log = datc_campaign_log_load (dir, NULL);
  g_assert_cmpuint (datc_campaign_log_n_warnings (log), ==, 0);
  g_assert_cmpstr (datc_campaign_log_mode (log), ==, "direct");
  g_autoptr (DatcCampaignModel) m = datc_campaign_model_run (log);
  g_assert_nonnull (m);
  g_assert_cmpfloat (datc_campaign_model_actual (m), ==, 44);
  g_assert_cmpint (datc_campaign_model_matches (m), ==, DATC_POLICY_DIRECT);
  const DatcPrediction *p = datc_campaign_model_prediction (m);
  g_assert_true (datc_prediction_deterministic (p));
  g_assert_cmpfloat_with_epsilon (datc_prediction_stats (p, DATC_POLICY_DIRECT)->mean, 44, 1e-6);
  /* The same two slots pulling, each started once at 4 s: 3 rounds. */
  g_assert_cmpfloat_with_epsilon (datc_prediction_stats (p, DATC_POLICY_PULL)->mean, 34, 1e-6);

  g_autofree gchar *json = datc_trace_summary_to_json (log, m);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_assert_true (json_parser_load_from_data (parser, json, -1, NULL));
  JsonObject *model = json_object_get_object_member (
      json_node_get_object (json_parser_get_root (parser)), "model");
  g_assert_cmpstr (json_object_get_string_member (model, "mode"), ==, "direct");
  g_assert_cmpstr (json_object_get_string_member (model, "matches"), ==, "direct");
  g_assert_cmpint (json_object_get_int_member (model, "places"), ==, 2);
  g_assert_cmpfloat (json_object_get_double_member (model, "job_overhead"), ==, 1);
  JsonObject *direct
      = json_object_get_object_member (json_object_get_object_member (model, "policies"), "direct");
  g_assert_cmpfloat (json_object_get_double_member (direct, "mean"), ==, 44);

  g_autofree gchar *text = datc_trace_summary_to_text (log, m);
  g_assert_nonnull (strstr (text, "direct mode"));
  g_assert_nonnull (strstr (text, "(44.0s)  <- the mode that ran (direct)"));
  fixture_remove_tree (dir);
}

/* A pull campaign that copied stragglers (campaign_started says
 * max_replicas 2) is modelled by pull+rep, and the text says so; with
 * max_replicas 1 it is pull. */
static void
test_campaignlog_replicating_campaign_names_pull_rep (void)
{
  for (guint replicas = 1; replicas <= 2; replicas++)
    {
      g_autofree gchar *dir = fixture_campaign_new (FIXTURE_CLEAN);
      g_autofree gchar *path = g_build_filename (dir, "trace.jsonl", NULL);
      g_autofree gchar *trace = NULL;
      g_assert_true (g_file_get_contents (path, &trace, NULL, NULL));
      g_autofree gchar *with
          = g_strdup_printf ("\"event\":\"campaign_started\",\"max_replicas\":%u,", replicas);
      g_auto (GStrv) parts = g_strsplit (trace, "\"event\":\"campaign_started\",", 2);
      g_assert_cmpuint (g_strv_length (parts), ==, 2);
      g_autofree gchar *edited = g_strjoin (with, parts[0], parts[1], NULL);
      g_assert_true (g_file_set_contents (path, edited, -1, NULL));

      g_autoptr (DatcCampaignLog) log = datc_campaign_log_load (dir, NULL);
      g_assert_cmpuint (datc_campaign_log_max_replicas (log), ==, replicas);
      g_autoptr (DatcCampaignModel) m = datc_campaign_model_run (log);
      g_autofree gchar *text = datc_trace_summary_to_text (log, m);
      if (replicas == 2)
        {
          g_assert_cmpint (datc_campaign_model_matches (m), ==, DATC_POLICY_PULL_REP);
          g_assert_nonnull (strstr (text, "<- the mode that ran (pull+rep)"));
        }
      else
        {
          g_assert_cmpint (datc_campaign_model_matches (m), ==, DATC_POLICY_PULL);
          g_assert_nonnull (strstr (text, "<- the mode that ran (pull)"));
        }
      fixture_remove_tree (dir);
    }
}

/* A pull campaign's text names pull as the model of the mode that ran. */
static void
test_campaignlog_pull_campaign_names_pull (void)
{
  g_autofree gchar *dir = fixture_campaign_new (FIXTURE_CLEAN);
  g_autoptr (DatcCampaignLog) log = datc_campaign_log_load (dir, NULL);
  g_autoptr (DatcCampaignModel) m = datc_campaign_model_run (log);
  g_assert_cmpint (datc_campaign_model_matches (m), ==, DATC_POLICY_PULL);
  g_autofree gchar *text = datc_trace_summary_to_text (log, m);
  g_assert_nonnull (strstr (text, "(35.0s)  <- the mode that ran (pull)"));
  g_assert_nonnull (strstr (text, "does not say the mode"));
  g_assert_null (strstr (text, "direct"));
  fixture_remove_tree (dir);
}

/* site_command events: calls (not events) per kind and site, per 1,000
 * tasks finished there, in the log, the JSON and the text. */
static void
test_campaignlog_counts_scheduler_calls (void)
{
  g_autofree gchar *dir = fixture_campaign_new (FIXTURE_CLEAN);
  g_autoptr (DatcCampaignLog) log = datc_campaign_log_load (dir, NULL);
  g_assert_cmpuint (datc_campaign_log_n_warnings (log), ==, 0);
  const DatcSiteLog *a = site_named (log, "A"), *b = site_named (log, "B");
  g_assert_cmpuint (a->calls, ==, 7);
  g_assert_cmpuint (a->calls_submit, ==, 4);
  g_assert_cmpuint (a->calls_poll, ==, 3);
  g_assert_cmpuint (a->calls_cancel, ==, 0);
  g_assert_cmpuint (b->calls, ==, 3);
  g_assert_cmpuint (b->calls_submit, ==, 2);
  g_assert_cmpuint (b->calls_cancel, ==, 1);
  g_assert_cmpfloat (datc_trace_summary_calls_per_1000 (a), ==, 875);
  g_assert_true (isnan (datc_trace_summary_calls_per_1000 (b)));

  g_autofree gchar *json = datc_trace_summary_to_json (log, NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_assert_true (json_parser_load_from_data (parser, json, -1, NULL));
  JsonObject *root = json_node_get_object (json_parser_get_root (parser));
  JsonObject *sites = json_object_get_object_member (root, "sites");
  JsonObject *sa = json_object_get_object_member (sites, "A");
  JsonObject *sb = json_object_get_object_member (sites, "B");
  JsonObject *ca = json_object_get_object_member (sa, "scheduler_calls");
  g_assert_cmpint (json_object_get_int_member (ca, "total"), ==, 7);
  g_assert_cmpint (json_object_get_int_member (ca, "submit"), ==, 4);
  g_assert_cmpint (json_object_get_int_member (ca, "poll"), ==, 3);
  g_assert_cmpint (json_object_get_int_member (ca, "cancel"), ==, 0);
  g_assert_cmpfloat (json_object_get_double_member (sa, "scheduler_calls_per_1000_tasks"), ==, 875);
  JsonObject *cb = json_object_get_object_member (sb, "scheduler_calls");
  g_assert_cmpint (json_object_get_int_member (cb, "cancel"), ==, 1);
  g_assert_true (json_object_get_null_member (sb, "scheduler_calls_per_1000_tasks"));

  g_autofree gchar *text = datc_trace_summary_to_text (log, NULL);
  g_assert_nonnull (
      strstr (text, "\nsite                 calls   submit     poll   cancel  per 1000 tasks\n"
                    "A                        7        4        3        0           875.0\n"
                    "B                        3        2        0        1               -\n"));
  fixture_remove_tree (dir);
}

/* The master writes a submit's site_command before its proxy_submitted:
 * the first line that names a site may be one (it used to crash). */
static void
test_campaignlog_site_first_named_by_a_command (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("datc-campaign-XXXXXX", NULL);
  g_autofree gchar *tp = g_build_filename (dir, "trace.jsonl", NULL);
  g_assert_true (g_file_set_contents (
      tp,
      "{\"time\":1700000000000000,\"event\":\"campaign_started\",\"tasks\":1}\n"
      "{\"time\":1700000001000000,\"event\":\"site_command\",\"site\":\"Z\","
      "\"kind\":\"submit\",\"calls\":2}\n",
      -1, NULL));
  g_autoptr (DatcCampaignLog) log = datc_campaign_log_load (dir, NULL);
  g_assert_nonnull (log);
  g_assert_cmpuint (datc_campaign_log_n_sites (log), ==, 1);
  g_assert_cmpuint (site_named (log, "Z")->calls_submit, ==, 2);
  fixture_remove_tree (dir);
}

/* A site_command line without its calls is named and not counted. */
static void
test_campaignlog_skips_a_site_command_without_calls (void)
{
  g_autofree gchar *dir = fixture_campaign_new (FIXTURE_CLEAN);
  g_autofree gchar *tp = g_build_filename (dir, "trace.jsonl", NULL);
  g_autofree gchar *old = NULL;
  g_assert_true (g_file_get_contents (tp, &old, NULL, NULL));
  guint lines = 0;
  for (const char *c = old; *c; c++)
    lines += *c == '\n';
  g_autofree gchar *all
      = g_strconcat (old,
                     "{\"time\":1700000040000000,\"event\":\"site_command\",\"site\":\"A\","
                     "\"kind\":\"poll\",\"calls\":-5}\n"
                     "{\"time\":1700000040000000,\"event\":\"site_command\",\"site\":\"A\","
                     "\"kind\":\"poll\"}\n",
                     NULL);
  g_assert_true (g_file_set_contents (tp, all, -1, NULL));
  g_autoptr (DatcCampaignLog) log = datc_campaign_log_load (dir, NULL);
  g_assert_cmpuint (datc_campaign_log_n_warnings (log), ==, 2);
  for (guint i = 0; i < 2; i++)
    {
      g_autofree gchar *want
          = g_strdup_printf ("%s/trace.jsonl:%u: site_command without", dir, lines + 1 + i);
      if (!g_str_has_prefix (datc_campaign_log_warning (log, i), want))
        g_error ("warning %u: \"%s\", want prefix \"%s\"", i, datc_campaign_log_warning (log, i),
                 want);
    }
  g_assert_cmpuint (site_named (log, "A")->calls_poll, ==, 3);
  fixture_remove_tree (dir);
}

static void
test_campaignlog_skips_unreadable_lines_with_file_and_line (void)
{
  g_autofree gchar *dir = fixture_campaign_new (FIXTURE_GARBAGE | FIXTURE_TORN_TAIL);
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcCampaignLog) log = datc_campaign_log_load (dir, &error);
  g_assert_no_error (error);
  /* The same numbers as the clean campaign... */
  g_assert_cmpuint (datc_campaign_log_done (log), ==, 8);
  g_assert_cmpuint (site_named (log, "A")->started, ==, 2);
  /* ...and one warning per bad line, each naming its place; the unknown
   * event and the torn last line are not errors. */
  const char *want[] = { "trace.jsonl:5: ", "trace.jsonl:6: ", "trace.jsonl:7: ",
                         "results.jsonl:7: ", "results.jsonl:8: " };
  g_assert_cmpuint (datc_campaign_log_n_warnings (log), ==, G_N_ELEMENTS (want));
  for (guint i = 0; i < G_N_ELEMENTS (want); i++)
    {
      const char *w = datc_campaign_log_warning (log, i);
      g_autofree gchar *prefix = g_strdup_printf ("%s/%s", dir, want[i]);
      if (!g_str_has_prefix (w, prefix))
        g_error ("warning %u: \"%s\", want prefix \"%s\"", i, w, prefix);
    }
  fixture_remove_tree (dir);
}

static void
test_campaignlog_reads_a_running_campaign (void)
{
  g_autofree gchar *dir = fixture_campaign_new (FIXTURE_RUNNING | FIXTURE_TORN_TAIL);
  g_autoptr (DatcCampaignLog) log = datc_campaign_log_load (dir, NULL);
  g_assert_nonnull (log);
  g_assert_false (datc_campaign_log_finished (log));
  g_assert_cmpuint (datc_campaign_log_done (log), ==, 7);
  g_assert_cmpuint (datc_campaign_log_tasks (log), ==, 8);
  /* a1 still runs: held until the last thing seen (35 s). */
  g_assert_cmpfloat_with_epsilon (site_named (log, "A")->held_seconds, 2 * 30 + 2 * 10.5, 1e-9);
  g_autoptr (DatcCampaignModel) m = datc_campaign_model_run (log);
  g_assert_nonnull (m);
  g_assert_cmpuint (datc_campaign_model_tasks (m), ==, 7);
  fixture_remove_tree (dir);
}

static void
test_campaignlog_refuses_what_is_not_a_campaign (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcCampaignLog) log = datc_campaign_log_load ("/nonexistent/campaign", &error);
  g_assert_null (log);
  g_assert_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_IO);
  g_clear_error (&error);
  g_autofree gchar *empty = g_dir_make_tmp ("datc-empty-XXXXXX", NULL);
  log = datc_campaign_log_load (empty, &error);
  g_assert_null (log);
  g_assert_nonnull (strstr (error->message, "not a campaign directory"));
  fixture_remove_tree (empty);
}

static void
test_campaignlog_resumed_campaign_models_its_last_session (void)
{
  g_autofree gchar *dir = fixture_campaign_new (FIXTURE_CLEAN);
  /* A second master: 4 more tasks on a proxy that starts 2 s after it. */
  g_autofree gchar *tp = g_build_filename (dir, "trace.jsonl", NULL);
  g_autofree gchar *rp = g_build_filename (dir, "results.jsonl", NULL);
  gint64 s2 = FIXTURE_T0 + 100 * G_USEC_PER_SEC;
  g_autofree gchar *more = g_strdup_printf (
      "{\"time\":%" G_GINT64_FORMAT
      ",\"event\":\"campaign_started\",\"tasks\":12,\"resumed\":true}\n"
      "{\"time\":%" G_GINT64_FORMAT ",\"event\":\"proxy_submitted\",\"site\":\"A\",\"proxy\":"
      "\"a3\",\"job\":\"3\",\"slots\":4,\"walltime\":0}\n"
      "{\"time\":%" G_GINT64_FORMAT ",\"event\":\"agent_connected\",\"site\":\"A\",\"proxy\":"
      "\"a3\",\"agent\":\"g-a3\",\"host\":\"h\",\"slots\":4}\n",
      s2, s2 + 1000000, s2 + 2000000);
  g_autofree gchar *old = NULL;
  g_assert_true (g_file_get_contents (tp, &old, NULL, NULL));
  g_autofree gchar *all = g_strconcat (old, more, NULL);
  g_assert_true (g_file_set_contents (tp, all, -1, NULL));
  g_autofree gchar *rold = NULL;
  g_assert_true (g_file_get_contents (rp, &rold, NULL, NULL));
  GString *r = g_string_new (rold);
  for (guint i = 9; i <= 12; i++)
    g_string_append_printf (
        r,
        "{\"id\":%u,\"status\":\"exited\",\"exit_code\":0,\"site\":\"A\",\"proxy\":\"a3\","
        "\"started\":%" G_GINT64_FORMAT ",\"finished\":%" G_GINT64_FORMAT "}\n",
        i, s2 + 2000000, s2 + 12000000);
  g_assert_true (g_file_set_contents (rp, r->str, -1, NULL));
  g_string_free (r, TRUE);

  g_autoptr (DatcCampaignLog) log = datc_campaign_log_load (dir, NULL);
  g_assert_cmpuint (datc_campaign_log_sessions (log), ==, 2);
  g_assert_cmpuint (datc_campaign_log_tasks (log), ==, 12);
  g_assert_false (datc_campaign_log_finished (log));
  g_autoptr (DatcCampaignModel) m = datc_campaign_model_run (log);
  g_assert_cmpstr (datc_campaign_model_basis (m), ==, "last session");
  g_assert_cmpuint (datc_campaign_model_tasks (m), ==, 4);
  g_assert_cmpuint (datc_campaign_model_proxies (m), ==, 1);
  g_assert_cmpfloat (datc_campaign_model_actual (m), ==, 12);
  g_assert_cmpfloat_with_epsilon (
      datc_prediction_stats (datc_campaign_model_prediction (m), DATC_POLICY_PULL)->mean, 12, 1e-6);
  fixture_remove_tree (dir);
}

/* Why tasks ended: `class` where the line has one, else from the status
 * (the fixture's lines are an older datc's: "exited" is "exit"). */
static void
test_campaignlog_counts_why_tasks_ended (void)
{
  g_autofree gchar *dir = fixture_campaign_new (FIXTURE_CLEAN);
  g_autofree gchar *rp = g_build_filename (dir, "results.jsonl", NULL);
  g_autofree gchar *old = NULL;
  g_assert_true (g_file_get_contents (rp, &old, NULL, NULL));
  g_autofree gchar *more = g_strdup_printf (
      "%s{\"id\":9,\"status\":\"signaled\",\"class\":\"oom\",\"exit_code\":137,\"signal\":9,"
      "\"site\":\"A\",\"started\":%" G_GINT64_FORMAT ",\"finished\":%" G_GINT64_FORMAT "}\n"
      "{\"id\":10,\"status\":\"timeout\",\"exit_code\":143,\"signal\":15,"
      "\"site\":\"A\",\"started\":%" G_GINT64_FORMAT ",\"finished\":%" G_GINT64_FORMAT "}\n",
      old, FIXTURE_T0 + 1000000, FIXTURE_T0 + 2000000, FIXTURE_T0 + 1000000, FIXTURE_T0 + 3000000);
  g_assert_true (g_file_set_contents (rp, more, -1, NULL));
  g_autoptr (DatcCampaignLog) log = datc_campaign_log_load (dir, NULL);
  g_autoptr (GArray) counts = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr (GPtrArray) classes = datc_campaign_log_classes (log, counts);
  g_assert_cmpuint (classes->len, ==, 3);
  g_assert_cmpstr (classes->pdata[0], ==, "exit");
  g_assert_cmpuint (g_array_index (counts, guint64, 0), ==, 8);
  g_assert_cmpstr (classes->pdata[1], ==, "oom");
  g_assert_cmpuint (g_array_index (counts, guint64, 1), ==, 1);
  g_assert_cmpstr (classes->pdata[2], ==, "timeout");
  fixture_remove_tree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/campaignlog/replicating-campaign-names-pull-rep",
                   test_campaignlog_replicating_campaign_names_pull_rep);
  g_test_add_func ("/campaignlog/load/counts-what-happened", test_campaignlog_counts_what_happened);
  g_test_add_func ("/campaignlog/load/counts-why-tasks-ended",
                   test_campaignlog_counts_why_tasks_ended);
  g_test_add_func ("/campaignlog/model/matches-the-run-it-explains",
                   test_campaignlog_model_matches_the_run);
  g_test_add_data_func ("/campaignlog/model/of-a-direct-campaign-is-direct",
                        GINT_TO_POINTER (FALSE),
                        test_campaignlog_direct_campaign_modelled_as_direct);
  g_test_add_data_func ("/campaignlog/model/of-a-direct-campaign-by-campaign-json",
                        GINT_TO_POINTER (TRUE),
                        test_campaignlog_direct_campaign_modelled_as_direct);
  g_test_add_func ("/campaignlog/model/of-a-pull-campaign-names-pull",
                   test_campaignlog_pull_campaign_names_pull);
  g_test_add_func ("/campaignlog/load/skips-unreadable-lines-naming-file-and-line",
                   test_campaignlog_skips_unreadable_lines_with_file_and_line);
  g_test_add_func ("/campaignlog/calls/counted-per-kind-and-per-1000-tasks",
                   test_campaignlog_counts_scheduler_calls);
  g_test_add_func ("/campaignlog/calls/a-site-first-named-by-a-command",
                   test_campaignlog_site_first_named_by_a_command);
  g_test_add_func ("/campaignlog/calls/skips-a-site-command-without-calls",
                   test_campaignlog_skips_a_site_command_without_calls);
  g_test_add_func ("/campaignlog/load/reads-a-running-campaign",
                   test_campaignlog_reads_a_running_campaign);
  g_test_add_func ("/campaignlog/load/refuses-what-is-not-a-campaign",
                   test_campaignlog_refuses_what_is_not_a_campaign);
  g_test_add_func ("/campaignlog/model/of-a-resumed-campaign-is-its-last-session",
                   test_campaignlog_resumed_campaign_models_its_last_session);
  return g_test_run ();
}
