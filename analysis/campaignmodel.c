/* campaignmodel.c: see campaignmodel.h.  One model site per observed
 * proxy, because each proxy's start is a fact here, not a draw. */
#include "campaignmodel.h"

#include <math.h>

#include "duration.h"
#include "jsonout.h"

struct DatcCampaignModel
{
  gboolean resumed;
  guint64 tasks;
  guint proxies;
  double actual;
  DatcScenario *sc;
  DatcPrediction *prediction;
};

void
datc_campaign_model_free (DatcCampaignModel *m)
{
  if (m == NULL)
    return;
  datc_prediction_free (m->prediction);
  datc_scenario_free (m->sc);
  g_free (m);
}

DatcCampaignModel *
datc_campaign_model_run (const DatcCampaignLog *log)
{
  gint64 t0 = datc_campaign_log_sessions (log) > 1 ? datc_campaign_log_last_session_start (log)
                                                   : datc_campaign_log_start (log);
  const DatcResultPoint *r = datc_campaign_log_results (log);
  guint64 nr = datc_campaign_log_n_results (log), tasks = 0;
  gint64 last = 0;
  for (guint64 i = 0; i < nr; i++)
    if (r[i].finished >= t0)
      {
        tasks++;
        last = MAX (last, r[i].finished);
      }
  if (tasks == 0)
    return NULL;

  /* Mean task time over every site that ran something: for sites without. */
  double all_busy = 0, all_n = 0;
  for (guint i = 0; i < datc_campaign_log_n_sites (log); i++)
    {
      const DatcSiteLog *s = datc_campaign_log_site (log, i);
      all_busy += s->busy_seconds;
      all_n += (double) (s->done + s->failed);
    }
  double fallback = all_n > 0 ? all_busy / all_n : 1;

  g_autoptr (DatcScenario) sc = datc_scenario_new (tasks);
  gboolean random = FALSE;
  guint proxies = 0;
  for (guint i = 0; i < datc_campaign_log_n_proxies (log); i++)
    {
      const DatcProxyLog *x = datc_campaign_log_proxy (log, i);
      if (x->started == 0 || (x->ended != 0 && x->ended < t0))
        continue;
      const DatcSiteLog *s = datc_campaign_log_site (log, x->site_index);
      double t = s->done + s->failed > 0 ? s->task_mean : fallback;
      t = MAX (t, 1e-6);
      double cv = MIN (s->task_cv, 10.0);
      double start = (double) (MAX (x->started, t0) - t0) / 1e6;
      g_autofree gchar *name = g_strdup_printf ("%s/%s", x->site, x->proxy);
      DatcSiteSpec *spec = datc_scenario_add_site (sc, name, MAX (x->slots, 1), 1, t, cv,
                                                   datc_wait_dist_new_const (start));
      if (x->walltime >= t)
        spec->walltime = x->walltime;
      random |= cv > 0;
      proxies++;
    }
  if (proxies == 0)
    return NULL;
  /* Enough trials for a steady mean, fewer for very large campaigns. */
  guint64 trials = random ? CLAMP (5000000 / tasks, 5, 200) : 1;
  g_autoptr (DatcPrediction) p = datc_prediction_run (sc, trials, 1, DATC_CAMPAIGN_MODEL_POLICIES, NULL);
  if (p == NULL)
    return NULL;
  DatcCampaignModel *m = g_new0 (DatcCampaignModel, 1);
  m->resumed = datc_campaign_log_sessions (log) > 1;
  m->tasks = tasks;
  m->proxies = proxies;
  m->actual = (double) (last - t0) / 1e6;
  m->sc = g_steal_pointer (&sc);
  m->prediction = g_steal_pointer (&p);
  return m;
}

const char *
datc_campaign_model_basis (const DatcCampaignModel *m)
{
  return m->resumed ? "last session" : "campaign";
}

guint64
datc_campaign_model_tasks (const DatcCampaignModel *m)
{
  return m->tasks;
}

guint
datc_campaign_model_proxies (const DatcCampaignModel *m)
{
  return m->proxies;
}

double
datc_campaign_model_actual (const DatcCampaignModel *m)
{
  return m->actual;
}

const DatcPrediction *
datc_campaign_model_prediction (const DatcCampaignModel *m)
{
  return m->prediction;
}

void
datc_campaign_model_append_json (const DatcCampaignModel *m, GString *o)
{
  gboolean first = TRUE;
  g_string_append_c (o, '{');
  datc_json_key (o, &first, "basis");
  datc_json_string (o, datc_campaign_model_basis (m));
  datc_json_key (o, &first, "tasks");
  g_string_append_printf (o, "%" G_GUINT64_FORMAT, m->tasks);
  datc_json_key (o, &first, "proxies");
  g_string_append_printf (o, "%u", m->proxies);
  datc_json_key (o, &first, "trials");
  g_string_append_printf (o, "%" G_GUINT64_FORMAT, datc_prediction_trials (m->prediction));
  datc_json_key (o, &first, "actual");
  datc_json_number (o, m->actual, 6);
  datc_json_key (o, &first, "policies");
  g_string_append_c (o, '{');
  gboolean pf = TRUE;
  for (DatcPolicy k = 0; k < DATC_N_POLICIES; k++)
    {
      const DatcPolicyStats *st = datc_prediction_stats (m->prediction, k);
      if (st == NULL)
        continue;
      datc_json_key (o, &pf, datc_policy_name (k));
      gboolean f = TRUE;
      g_string_append_c (o, '{');
      datc_json_key (o, &f, "mean");
      datc_json_number (o, st->mean, 6);
      datc_json_key (o, &f, "median");
      datc_json_number (o, st->median, 6);
      datc_json_key (o, &f, "p95");
      datc_json_number (o, st->p95, 6);
      datc_json_key (o, &f, "slot_hours");
      datc_json_number (o, st->slot_hours, 6);
      g_string_append_c (o, '}');
    }
  g_string_append (o, "}}");
}

static void
append_seconds (GString *o, double s)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  g_autofree gchar *h = datc_duration_format (s);
  g_string_append_printf (o, "%12s s  (%s)", g_ascii_formatd (buf, sizeof buf, "%.3f", s), h);
}

void
datc_campaign_model_append_text (const DatcCampaignModel *m, GString *o)
{
  g_string_append_printf (o,
                          "model of the %s (%" G_GUINT64_FORMAT " tasks, the %u proxies that started, "
                          "at their observed start times, with observed task times):\n",
                          datc_campaign_model_basis (m), m->tasks, m->proxies);
  g_string_append_printf (o, "  %-10s", "actual");
  append_seconds (o, m->actual);
  g_string_append_c (o, '\n');
  for (DatcPolicy k = 0; k < DATC_N_POLICIES; k++)
    {
      const DatcPolicyStats *st = datc_prediction_stats (m->prediction, k);
      if (st == NULL)
        continue;
      g_string_append_printf (o, "  %-10s", datc_policy_name (k));
      append_seconds (o, st->mean);
      g_string_append_c (o, '\n');
    }
}
