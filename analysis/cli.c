/* cli.c: `datc analyze predict|waits|trace` and `datc report`.  Each
 * command parses its options, loads its input (every error FILE:LINE,
 * exit 2), computes, and prints text or --json; nothing else lives here. */
#include "cli.h"

#include <math.h>
#include <stdio.h>

#include "analysis-error.h"
#include "campaignlog.h"
#include "campaignmodel.h"
#include "duration.h"
#include "jsonout.h"
#include "prediction.h"
#include "qbets.h"
#include "report.h"
#include "scenario.h"
#include "tracesummary.h"
#include "waitdist.h"

#define EXIT_OK 0
#define EXIT_INPUT 2
#define EXIT_FAILED 3

static void
analyze_usage (FILE *out)
{
  fputs ("usage:\n"
         "  datc analyze predict SCENARIO.ini [--trials M] [--seed S] [--policies LIST] [--json]\n"
         "  datc analyze waits FILE|DIR|trace.jsonl [--site NAME] [--quantile q] [--confidence c] "
         "[--json]\n"
         "  datc analyze trace DIR [--json]\n"
         "policies: fluid, ect, pull, pull+rep, pull+mig, static-cap, static-proc, direct-common, "
         "direct-cap, direct, all\n",
         out);
}

static gboolean
parse_options (const char *name, const char *summary, GOptionEntry *entries, int *argc,
               char ***argv, int want_args)
{
  g_autofree gchar *param = g_strdup_printf ("%s", summary);
  g_autoptr (GOptionContext) ctx = g_option_context_new (param);
  g_autoptr (GError) error = NULL;
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, argc, argv, &error))
    {
      g_printerr ("datc %s: %s\n", name, error->message);
      return FALSE;
    }
  if (*argc != want_args + 1)
    {
      g_printerr ("datc %s: expected %s\n", name, summary);
      return FALSE;
    }
  return TRUE;
}

static gboolean
parse_u64_option (const char *name, const char *what, const char *text, guint64 lo, guint64 hi,
                  guint64 *out)
{
  g_autoptr (GError) error = NULL;
  if (text != NULL && !g_ascii_string_to_unsigned (text, 10, lo, hi, out, &error))
    {
      g_printerr ("datc %s: %s: %s\n", name, what, error->message);
      return FALSE;
    }
  return TRUE;
}

static gboolean
parse_fraction_option (const char *name, const char *what, const char *text, double *out)
{
  if (text == NULL)
    return TRUE;
  if (!datc_number_parse (text, out, NULL) || !(*out > 0 && *out < 1))
    {
      g_printerr ("datc %s: %s '%s' must be a number strictly between 0 and 1\n", name, what, text);
      return FALSE;
    }
  return TRUE;
}

static int
cmd_predict (int argc, char **argv)
{
  g_autofree gchar *trials_s = NULL, *seed_s = NULL, *policies_s = NULL;
  gboolean json = FALSE;
  GOptionEntry entries[] = {
    { "trials", 0, 0, G_OPTION_ARG_STRING, &trials_s, "Monte Carlo trials (default 1000)", "M" },
    { "seed", 0, 0, G_OPTION_ARG_STRING, &seed_s, "Seed (default 1): same seed, same numbers",
      "S" },
    { "policies", 0, 0, G_OPTION_ARG_STRING, &policies_s, "Comma-separated policies (default all)",
      "LIST" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, "Print JSON", NULL },
    { NULL },
  };
  if (!parse_options ("analyze predict", "SCENARIO.ini", entries, &argc, &argv, 1))
    return EXIT_INPUT;
  guint64 trials = 1000, seed = 1;
  guint mask = DATC_POLICY_ALL;
  g_autoptr (GError) error = NULL;
  if (!parse_u64_option ("analyze predict", "--trials", trials_s, 1, DATC_PREDICT_MAX_TRIALS,
                         &trials)
      || !parse_u64_option ("analyze predict", "--seed", seed_s, 0, G_MAXUINT64, &seed))
    return EXIT_INPUT;
  if (policies_s != NULL && !datc_policy_mask_parse (policies_s, &mask, &error))
    {
      g_printerr ("datc analyze predict: --policies: %s\n", error->message);
      return EXIT_INPUT;
    }
  g_autoptr (DatcScenario) sc = datc_scenario_load (argv[1], &error);
  if (sc == NULL)
    {
      g_printerr ("datc analyze predict: %s\n", error->message);
      return EXIT_INPUT;
    }
  g_autoptr (DatcPrediction) p = datc_prediction_run (sc, trials, seed, mask, &error);
  if (p == NULL)
    {
      g_printerr ("datc analyze predict: %s\n", error->message);
      return EXIT_INPUT;
    }
  g_autofree gchar *out = json ? datc_prediction_to_json (p) : datc_prediction_to_text (p);
  fputs (out, stdout);
  return EXIT_OK;
}

/* The bound on one set of waits, as text (`what`: the file, or the site)
 * or as JSON members appended to the object open in `json` (`first`: it
 * has none yet). */
static gboolean
print_wait_bound (const char *what, GArray *waits, double q, double c, GString *json,
                  gboolean first)
{
  g_autoptr (DatcWaitDist) d = datc_wait_dist_new_empirical ((double *) waits->data, waits->len);
  gsize n;
  const double *sorted = datc_wait_dist_samples (d, &n);
  DatcWaitBound b;
  g_autoptr (GError) error = NULL;
  if (!datc_wait_bound_compute (sorted, n, q, c, &b, &error))
    {
      g_printerr ("datc analyze waits: %s\n", error->message);
      return FALSE;
    }
  if (json != NULL)
    {
      datc_json_key (json, &first, "quantile");
      datc_json_number (json, q, 4);
      datc_json_key (json, &first, "confidence");
      datc_json_number (json, c, 4);
      datc_json_key (json, &first, "observations");
      g_string_append_printf (json, "%" G_GSIZE_FORMAT, n);
      datc_json_key (json, &first, "needed");
      g_string_append_printf (json, "%" G_GSIZE_FORMAT, b.needed);
      datc_json_key (json, &first, "index");
      g_string_append_printf (json, "%" G_GSIZE_FORMAT, b.index);
      datc_json_key (json, &first, "bound");
      datc_json_number (json, b.index ? b.bound : NAN, 3);
      datc_json_key (json, &first, "achieved_confidence");
      datc_json_number (json, b.index ? b.achieved : NAN, 6);
      datc_json_key (json, &first, "median");
      datc_json_number (json, n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2, 3);
      datc_json_key (json, &first, "max");
      datc_json_number (json, sorted[n - 1], 3);
      g_string_append (json, "}");
      return TRUE;
    }
  /* printf's %g would follow LC_NUMERIC; these do not. */
  char qs[G_ASCII_DTOSTR_BUF_SIZE], cs[G_ASCII_DTOSTR_BUF_SIZE], bs[G_ASCII_DTOSTR_BUF_SIZE],
      as[G_ASCII_DTOSTR_BUF_SIZE];
  g_ascii_formatd (qs, sizeof qs, "%g", q);
  g_ascii_formatd (cs, sizeof cs, "%g", c);
  if (b.index == 0)
    {
      printf ("%s: %" G_GSIZE_FORMAT " observed waits are too few to bound the %s-quantile at "
              "confidence %s: %" G_GSIZE_FORMAT " are needed\n",
              what, n, qs, cs, b.needed);
      return TRUE;
    }
  g_autofree gchar *bt = datc_duration_format (b.bound);
  printf (
      "%s: with confidence %s, a fraction %s of waits end within %s s (%s): the %" G_GSIZE_FORMAT
      "th smallest of %" G_GSIZE_FORMAT " observed waits (achieved confidence %s)\n",
      what, cs, qs, g_ascii_formatd (bs, sizeof bs, "%.3f", b.bound), bt, b.index, n,
      g_ascii_formatd (as, sizeof as, "%.4f", b.achieved));
  return TRUE;
}

/* A campaign's waits, per site, from DIR/trace.jsonl or a trace itself. */
static int
waits_of_trace (const char *trace, const char *only_site, double q, double c, gboolean json)
{
  g_autoptr (GError) error = NULL;
  guint skipped = 0;
  g_autoptr (GPtrArray) sites = datc_waits_load_trace (trace, &skipped, &error);
  if (sites == NULL)
    {
      g_printerr ("datc analyze waits: %s\n", error->message);
      return EXIT_INPUT;
    }
  if (skipped > 0)
    g_printerr ("datc analyze waits: %s: %u unreadable proxy_started line%s skipped\n", trace,
                skipped, skipped == 1 ? "" : "s");
  if (only_site != NULL)
    {
      g_autoptr (GString) names = g_string_new (NULL);
      for (guint i = 0; i < sites->len; i++)
        g_string_append_printf (names, "%s%s", i ? ", " : "",
                                ((DatcSiteWaits *) sites->pdata[i])->site);
      for (guint i = sites->len; i-- > 0;)
        if (!g_str_equal (((DatcSiteWaits *) sites->pdata[i])->site, only_site))
          g_ptr_array_remove_index (sites, i);
      if (sites->len == 0)
        {
          g_printerr ("datc analyze waits: %s: no queue waits of site %s (sites with waits: %s)\n",
                      trace, only_site, names->str);
          return EXIT_INPUT;
        }
    }
  GString *o = json ? g_string_new ("{\"sites\":[") : NULL;
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < sites->len; i++)
    {
      DatcSiteWaits *w = sites->pdata[i];
      g_autofree gchar *what = g_strdup_printf ("%s, site %s", trace, w->site);
      if (o != NULL)
        {
          gboolean first = TRUE;
          g_string_append (o, i ? ",{" : "{");
          datc_json_key (o, &first, "site");
          datc_json_append_string (o, w->site);
        }
      ok = print_wait_bound (what, w->waits, q, c, o, FALSE);
    }
  if (o != NULL)
    {
      g_string_append (o, "]}\n");
      if (ok)
        fputs (o->str, stdout);
      g_string_free (o, TRUE);
    }
  return ok ? EXIT_OK : EXIT_INPUT;
}

static int
cmd_waits (int argc, char **argv)
{
  g_autofree gchar *q_s = NULL, *c_s = NULL, *site = NULL;
  gboolean json = FALSE;
  GOptionEntry entries[] = {
    { "quantile", 0, 0, G_OPTION_ARG_STRING, &q_s, "Quantile of the wait to bound (default 0.95)",
      "q" },
    { "confidence", 0, 0, G_OPTION_ARG_STRING, &c_s, "Confidence of the bound (default 0.95)",
      "c" },
    { "site", 0, 0, G_OPTION_ARG_STRING, &site, "Of a campaign: only this site's waits", "NAME" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, "Print JSON", NULL },
    { NULL },
  };
  if (!parse_options ("analyze waits", "FILE|DIR|trace.jsonl", entries, &argc, &argv, 1))
    return EXIT_INPUT;
  double q = 0.95, c = 0.95;
  if (!parse_fraction_option ("analyze waits", "--quantile", q_s, &q)
      || !parse_fraction_option ("analyze waits", "--confidence", c_s, &c))
    return EXIT_INPUT;
  /* A campaign directory or its trace: the waits of its proxies, per site. */
  if (g_file_test (argv[1], G_FILE_TEST_IS_DIR))
    {
      g_autofree gchar *trace = g_build_filename (argv[1], "trace.jsonl", NULL);
      if (!g_file_test (trace, G_FILE_TEST_EXISTS))
        {
          g_printerr ("datc analyze waits: %s: no trace.jsonl: not a campaign directory\n",
                      argv[1]);
          return EXIT_INPUT;
        }
      return waits_of_trace (trace, site, q, c, json);
    }
  if (datc_waits_file_is_trace (argv[1]))
    return waits_of_trace (argv[1], site, q, c, json);
  if (site != NULL)
    {
      g_printerr ("datc analyze waits: --site is for a campaign DIR or its trace.jsonl; %s is a "
                  "file of times\n",
                  argv[1]);
      return EXIT_INPUT;
    }
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) waits = datc_waits_load_file (argv[1], &error);
  if (waits == NULL)
    {
      g_printerr ("datc analyze waits: %s\n", error->message);
      return EXIT_INPUT;
    }
  GString *o = json ? g_string_new ("{") : NULL;
  gboolean ok = print_wait_bound (argv[1], waits, q, c, o, TRUE);
  if (o != NULL)
    {
      g_string_append (o, "\n");
      if (ok)
        fputs (o->str, stdout);
      g_string_free (o, TRUE);
    }
  return ok ? EXIT_OK : EXIT_INPUT;
}

static int
cmd_trace (int argc, char **argv)
{
  gboolean json = FALSE;
  GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, "Print JSON", NULL },
    { NULL },
  };
  if (!parse_options ("analyze trace", "DIR", entries, &argc, &argv, 1))
    return EXIT_INPUT;
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcCampaignLog) log = datc_campaign_log_load (argv[1], &error);
  if (log == NULL)
    {
      g_printerr ("datc analyze trace: %s\n", error->message);
      return EXIT_INPUT;
    }
  for (guint i = 0; i < datc_campaign_log_n_warnings (log); i++)
    g_printerr ("datc analyze trace: %s\n", datc_campaign_log_warning (log, i));
  g_autoptr (DatcCampaignModel) model = datc_campaign_model_run (log);
  g_autofree gchar *out
      = json ? datc_trace_summary_to_json (log, model) : datc_trace_summary_to_text (log, model);
  fputs (out, stdout);
  return EXIT_OK;
}

int
datc_analyze_main (int argc, char **argv)
{
  if (argc < 2)
    {
      analyze_usage (stderr);
      return EXIT_INPUT;
    }
  const char *cmd = argv[1];
  if (g_str_equal (cmd, "--help") || g_str_equal (cmd, "-h") || g_str_equal (cmd, "help"))
    {
      analyze_usage (stdout);
      return EXIT_OK;
    }
  if (g_str_equal (cmd, "predict"))
    return cmd_predict (argc - 1, argv + 1);
  if (g_str_equal (cmd, "waits"))
    return cmd_waits (argc - 1, argv + 1);
  if (g_str_equal (cmd, "trace"))
    return cmd_trace (argc - 1, argv + 1);
  g_printerr ("datc analyze: unknown subcommand '%s'\n", cmd);
  analyze_usage (stderr);
  return EXIT_INPUT;
}

int
datc_report_main (int argc, char **argv)
{
  g_autofree gchar *output = NULL;
  GOptionEntry entries[] = {
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Where to write (default DIR/report.html)",
      "FILE" },
    { NULL },
  };
  if (!parse_options ("report", "DIR", entries, &argc, &argv, 1))
    return EXIT_INPUT;
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcCampaignLog) log = datc_campaign_log_load (argv[1], &error);
  if (log == NULL)
    {
      g_printerr ("datc report: %s\n", error->message);
      return EXIT_INPUT;
    }
  for (guint i = 0; i < datc_campaign_log_n_warnings (log); i++)
    g_printerr ("datc report: %s\n", datc_campaign_log_warning (log, i));
  g_autoptr (DatcCampaignModel) model = datc_campaign_model_run (log);
  g_autofree gchar *path
      = output ? g_strdup (output) : g_build_filename (argv[1], "report.html", NULL);
  g_autofree gchar *html = datc_report_render (log, model);
  if (!g_file_set_contents (path, html, -1, &error))
    {
      g_printerr ("datc report: %s\n", error->message);
      return EXIT_FAILED;
    }
  printf ("%s\n", path);
  return EXIT_OK;
}
