/* campaignmodel.c: see campaignmodel.h.  Pull and static: one model site
 * per observed proxy, because each proxy's start is a fact here, not a
 * draw.  Direct: one model site per site, because what decided the run
 * is how jobs followed one another in a site's few places, each waiting
 * anew; the observed waits are drawn from, not replayed. */
#include "campaignmodel.h"

#include <math.h>

#include "duration.h"
#include "jsonout.h"

struct DatcCampaignModel {
  gboolean resumed;
  gchar *mode;        /* as the trace says, or NULL */
  guint max_replicas; /* as the trace says (1: no copies), 0: unknown */
  gboolean direct;
  guint64 tasks;
  guint proxies;   /* proxies that started; direct: jobs */
  guint places;    /* direct: jobs at once, summed over sites */
  double overhead; /* direct: mean of the sites' job_overhead */
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
  g_free (m->mode);
  g_free (m);
}

/* Tasks that finished since t0, and when the last one did. */
static guint64
tasks_since (const DatcCampaignLog *log, gint64 t0, gint64 *last)
{
  const DatcResultPoint *r = datc_campaign_log_results (log);
  guint64 nr = datc_campaign_log_n_results (log), tasks = 0;
  *last = 0;
  for (guint64 i = 0; i < nr; i++)
    if (r[i].finished >= t0)
      {
        tasks++;
        *last = MAX (*last, r[i].finished);
      }
  return tasks;
}

/* Mean task time over every site that ran something: for sites without. */
static double
fallback_task_time (const DatcCampaignLog *log)
{
  double all_busy = 0, all_n = 0;
  for (guint i = 0; i < datc_campaign_log_n_sites (log); i++)
    {
      const DatcSiteLog *s = datc_campaign_log_site (log, i);
      all_busy += s->busy_seconds;
      all_n += (double) (s->done + s->failed);
    }
  return all_n > 0 ? all_busy / all_n : 1;
}

/* Pull and static: each proxy that started, from its observed start. */
static guint
add_observed_proxies (const DatcCampaignLog *log, gint64 t0, DatcScenario *sc, gboolean *random)
{
  double fallback = fallback_task_time (log);
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
      DatcScenarioSite *spec = datc_scenario_add_site (sc, name, MAX (x->slots, 1), 1, t, cv,
                                                       datc_wait_dist_new_const (start));
      if (x->walltime >= t)
        spec->walltime = x->walltime;
      *random |= cv > 0;
      proxies++;
    }
  return proxies;
}

typedef struct {
  gint64 t;
  int delta;
} Step;

static int
cmp_step (const void *a, const void *b)
{
  const Step *x = a, *y = b;
  if (x->t != y->t)
    return (x->t > y->t) - (x->t < y->t);
  return x->delta - y->delta; /* an end before a submit at the same instant */
}

/* Direct: per site, as many places as it had jobs queued or running at
 * once (its cap), each job waiting a wait drawn from the site's observed
 * ones, its observed task times, and as job_overhead the time a job was
 * seen alive past its task (from its agent's HELLO to its end, less the
 * mean task).  Jobs of the sessions since t0 only. */
static guint
add_direct_sites (const DatcCampaignLog *log, gint64 t0, DatcScenario *sc, guint *jobs,
                  double *overhead, gboolean *random)
{
  double fallback = fallback_task_time (log);
  gint64 end = datc_campaign_log_end (log);
  guint n_sites = datc_campaign_log_n_sites (log), added = 0;
  double overhead_sum = 0;
  *jobs = 0;
  for (guint i = 0; i < n_sites; i++)
    {
      const DatcSiteLog *s = datc_campaign_log_site (log, i);
      g_autoptr (GArray) steps = g_array_new (FALSE, FALSE, sizeof (Step));
      g_autoptr (GArray) waits = g_array_new (FALSE, FALSE, sizeof (double));
      double alive_sum = 0;
      guint alive_n = 0;
      for (guint k = 0; k < datc_campaign_log_n_proxies (log); k++)
        {
          const DatcProxyLog *x = datc_campaign_log_proxy (log, k);
          if (x->site_index != i || x->submitted < t0)
            continue;
          Step up = { x->submitted, 1 }, down = { x->ended ? x->ended : end, -1 };
          g_array_append_val (steps, up);
          g_array_append_val (steps, down);
          if (x->started == 0)
            continue;
          double w = (double) (x->started - x->submitted) / 1e6;
          if (w >= 0)
            g_array_append_val (waits, w);
          if (x->ended > x->started)
            {
              alive_sum += (double) (x->ended - x->started) / 1e6;
              alive_n++;
            }
        }
      if (waits->len == 0)
        continue;
      qsort (steps->data, steps->len, sizeof (Step), cmp_step);
      int alive = 0, most = 0;
      for (guint k = 0; k < steps->len; k++)
        {
          alive += g_array_index (steps, Step, k).delta;
          most = MAX (most, alive);
        }
      double t = MAX (s->done + s->failed > 0 ? s->task_mean : fallback, 1e-6);
      double cv = MIN (s->task_cv, 10.0);
      const double *w = (const double *) waits->data;
      gboolean same = TRUE;
      for (guint k = 1; k < waits->len; k++)
        same &= w[k] == w[0];
      DatcWaitDist *wait
          = same ? datc_wait_dist_new_const (w[0]) : datc_wait_dist_new_empirical (w, waits->len);
      DatcScenarioSite *spec
          = datc_scenario_add_site (sc, s->name, 1, (guint) MAX (most, 1), t, cv, wait);
      /* The observed overhead holds the polls that saw jobs end. */
      spec->poll_interval = 0;
      spec->job_overhead = alive_n > 0 ? MAX (0, alive_sum / alive_n - t) : 0;
      overhead_sum += spec->job_overhead;
      *random |= cv > 0 || !same;
      *jobs += waits->len;
      added++;
    }
  *overhead = added > 0 ? overhead_sum / added : 0;
  return added;
}

DatcCampaignModel *
datc_campaign_model_run (const DatcCampaignLog *log)
{
  gint64 t0 = datc_campaign_log_sessions (log) > 1 ? datc_campaign_log_last_session_start (log)
                                                   : datc_campaign_log_start (log);
  gint64 last;
  guint64 tasks = tasks_since (log, t0, &last);
  if (tasks == 0)
    return NULL;

  g_autoptr (DatcScenario) sc = datc_scenario_new (tasks);
  gboolean random = FALSE, direct = g_strcmp0 (datc_campaign_log_mode (log), "direct") == 0;
  guint proxies = 0, places = 0;
  double overhead = 0;
  if (direct)
    {
      if (add_direct_sites (log, t0, sc, &proxies, &overhead, &random) > 0)
        places = (guint) datc_scenario_total_slots (sc);
    }
  else
    proxies = add_observed_proxies (log, t0, sc, &random);
  if (proxies == 0)
    return NULL;
  /* Enough trials for a steady mean, fewer for very large campaigns. */
  guint64 trials = random ? CLAMP (5000000 / tasks, 5, 200) : 1;
  g_autoptr (DatcPrediction) p = datc_prediction_run (
      sc, trials, 1, direct ? DATC_CAMPAIGN_MODEL_POLICIES_DIRECT : DATC_CAMPAIGN_MODEL_POLICIES,
      NULL);
  if (p == NULL)
    return NULL;
  DatcCampaignModel *m = g_new0 (DatcCampaignModel, 1);
  m->resumed = datc_campaign_log_sessions (log) > 1;
  m->mode = g_strdup (datc_campaign_log_mode (log));
  m->max_replicas = datc_campaign_log_max_replicas (log);
  m->direct = direct;
  m->tasks = tasks;
  m->proxies = proxies;
  m->places = places;
  m->overhead = overhead;
  m->actual = (double) (last - t0) / 1e6;
  m->sc = g_steal_pointer (&sc);
  m->prediction = g_steal_pointer (&p);
  return m;
}

const char *
datc_campaign_model_mode (const DatcCampaignModel *m)
{
  return m->mode;
}

int
datc_campaign_model_matches (const DatcCampaignModel *m)
{
  if (m->direct)
    return DATC_POLICY_DIRECT;
  if (m->mode == NULL || g_str_equal (m->mode, "pull"))
    return m->max_replicas >= 2 ? DATC_POLICY_PULL_REP : DATC_POLICY_PULL;
  return -1; /* static: its split is not modelled here */
}

gchar *
datc_campaign_model_describe (const DatcCampaignModel *m)
{
  const char *basis = datc_campaign_model_basis (m);
  if (m->direct)
    {
      g_autofree gchar *oh = datc_duration_format (m->overhead);
      return g_strdup_printf (
          "direct mode: %" G_GUINT64_FORMAT " tasks of the %s, a job each, at most %u "
          "at once (each site's most), waits drawn from the %u observed, observed task "
          "times, %s from a task's end to the next submit; fluid, ect, pull: the same "
          "slots pulling",
          m->tasks, basis, m->places, m->proxies, oh);
    }
  const char *note = m->mode == NULL ? "; the trace does not say the mode: taken as pull"
                     : g_str_equal (m->mode, "static")
                         ? "; static mode: its split is not modelled, pull is the nearest"
                         : "";
  return g_strdup_printf ("%" G_GUINT64_FORMAT " tasks, the %u proxies that started, at their "
                          "observed start times, with observed task times%s",
                          m->tasks, m->proxies, note);
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
  datc_json_append_string (o, datc_campaign_model_basis (m));
  datc_json_key (o, &first, "tasks");
  g_string_append_printf (o, "%" G_GUINT64_FORMAT, m->tasks);
  datc_json_key (o, &first, "proxies");
  g_string_append_printf (o, "%u", m->proxies);
  datc_json_key (o, &first, "trials");
  g_string_append_printf (o, "%" G_GUINT64_FORMAT, datc_prediction_trials (m->prediction));
  datc_json_key (o, &first, "mode");
  if (m->mode != NULL)
    datc_json_append_string (o, m->mode);
  else
    g_string_append (o, "null");
  datc_json_key (o, &first, "matches");
  int match = datc_campaign_model_matches (m);
  if (match >= 0)
    datc_json_append_string (o, datc_policy_name ((DatcPolicy) match));
  else
    g_string_append (o, "null");
  if (m->direct)
    {
      datc_json_key (o, &first, "places");
      g_string_append_printf (o, "%u", m->places);
      datc_json_key (o, &first, "job_overhead");
      datc_json_number (o, m->overhead, 6);
    }
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
  g_autofree gchar *what = datc_campaign_model_describe (m);
  g_string_append_printf (o, "model of the %s (%s):\n", datc_campaign_model_basis (m), what);
  g_string_append_printf (o, "  %-10s", "actual");
  append_seconds (o, m->actual);
  g_string_append_c (o, '\n');
  int match = datc_campaign_model_matches (m);
  for (DatcPolicy k = 0; k < DATC_N_POLICIES; k++)
    {
      const DatcPolicyStats *st = datc_prediction_stats (m->prediction, k);
      if (st == NULL)
        continue;
      g_string_append_printf (o, "  %-10s", datc_policy_name (k));
      append_seconds (o, st->mean);
      if ((int) k == match)
        g_string_append_printf (o, "  <- the mode that ran (%s)", datc_policy_name (k));
      g_string_append_c (o, '\n');
    }
}
