/* prediction.c: see prediction.h.  Turnarounds are kept per trial (8
 * doubles per trial) so medians and p95 are exact order statistics, not
 * histograms; everything else is a running sum. */
#include "prediction.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis-error.h"
#include "duration.h"
#include "jsonout.h"

struct DatcPrediction {
  const DatcScenario *sc;
  guint64 trials, seed;
  gboolean deterministic;
  guint mask, skipped;
  double *turnaround[DATC_N_POLICIES]; /* per trial */
  DatcPolicyStats stats[DATC_N_POLICIES];
  guint *pay_off;        /* per site */
  DatcWaitBound *bounds; /* per site; index 0 and observations 0: none */
  gboolean *has_bound;
  double pull_at_bounds;
};

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

void
datc_prediction_free (DatcPrediction *p)
{
  if (p == NULL)
    return;
  for (guint i = 0; i < DATC_N_POLICIES; i++)
    g_free (p->turnaround[i]);
  g_free (p->pay_off);
  g_free (p->bounds);
  g_free (p->has_bound);
  g_free (p);
}

static void
summarise (const double *values, guint64 n, double *sorted, DatcPolicyStats *st)
{
  memcpy (sorted, values, n * sizeof (double));
  qsort (sorted, n, sizeof (double), cmp_double);
  double s = 0, s2 = 0;
  for (guint64 i = 0; i < n; i++)
    s += values[i];
  st->mean = s / (double) n;
  for (guint64 i = 0; i < n; i++)
    s2 += (values[i] - st->mean) * (values[i] - st->mean);
  st->se = n > 1 ? sqrt (s2 / (double) (n - 1) / (double) n) : 0;
  st->median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  /* Nearest rank: the smallest value with at least 95% at or below it. */
  st->p95 = sorted[(guint64) ceil (0.95 * (double) n) - 1];
  st->min = sorted[0];
  st->max = sorted[n - 1];
}

/* Runs the asked policies and fills turnarounds and the sums. */
static void
run_trials (DatcPrediction *p, const DatcScenario *sc, guint mask, double *mean_kth_start)
{
  g_autoptr (DatcSimulation) sim = datc_simulation_new (sc, p->seed);
  guint C = datc_simulation_n_proxies (sim);
  g_autofree double *starts = mean_kth_start ? g_new (double, C) : NULL;
  for (guint64 t = 0; t < p->trials; t++)
    {
      for (DatcPolicy k = 0; k < DATC_N_POLICIES; k++)
        {
          if (!(mask & (1u << k)))
            continue;
          DatcOutcome o;
          datc_simulation_run (sim, t, k, &o);
          p->turnaround[k][t] = o.turnaround;
          p->stats[k].slot_hours += o.charged / 3600.0;
          p->stats[k].wasted_slot_hours += o.wasted / 3600.0;
          p->stats[k].resubmissions += (double) o.resubmissions;
        }
      if (mean_kth_start != NULL)
        {
          /* Proxies are numbered site by site: sort each site's run. */
          datc_simulation_first_starts (sim, t, starts);
          for (guint c = 0; c < C;)
            {
              guint site = datc_simulation_proxy_site (sim, c), e = c;
              while (e < C && datc_simulation_proxy_site (sim, e) == site)
                e++;
              qsort (starts + c, e - c, sizeof (double), cmp_double);
              c = e;
            }
          for (guint c = 0; c < C; c++)
            mean_kth_start[c] += starts[c] / (double) p->trials;
        }
    }
}

DatcPrediction *
datc_prediction_run (const DatcScenario *sc, guint64 trials, guint64 seed, guint policy_mask,
                     GError **error)
{
  if (trials == 0 || trials > DATC_PREDICT_MAX_TRIALS)
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_LIMIT,
                   "trials must be from 1 to %u", DATC_PREDICT_MAX_TRIALS);
      return NULL;
    }
  if ((policy_mask & DATC_POLICY_ALL) == 0)
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT, "no policy asked for");
      return NULL;
    }
  g_autoptr (DatcPrediction) p = g_new0 (DatcPrediction, 1);
  p->sc = sc;
  p->seed = seed;
  p->mask = policy_mask & DATC_POLICY_ALL;
  guint direct = (1u << DATC_POLICY_DIRECT_COMMON) | (1u << DATC_POLICY_DIRECT_CAP);
  if (datc_scenario_tasks (sc) > DATC_PREDICT_MAX_DIRECT_TASKS && (p->mask & direct))
    {
      p->skipped = p->mask & direct;
      p->mask &= ~direct;
      if (p->mask == 0)
        {
          g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_LIMIT,
                       "direct submission is simulated for at most %u tasks",
                       DATC_PREDICT_MAX_DIRECT_TASKS);
          return NULL;
        }
    }
  p->deterministic = datc_scenario_is_deterministic (sc);
  p->trials = p->deterministic ? 1 : trials;
  for (DatcPolicy k = 0; k < DATC_N_POLICIES; k++)
    if (p->mask & (1u << k))
      p->turnaround[k] = g_new (double, p->trials);

  guint n_sites = datc_scenario_n_sites (sc);
  guint C = datc_scenario_total_proxies (sc);
  g_autofree double *kth = g_new0 (double, C);
  run_trials (p, sc, p->mask, kth);

  g_autofree double *sorted = g_new (double, p->trials);
  for (DatcPolicy k = 0; k < DATC_N_POLICIES; k++)
    if (p->mask & (1u << k))
      {
        double sh = p->stats[k].slot_hours, wh = p->stats[k].wasted_slot_hours,
               rs = p->stats[k].resubmissions;
        summarise (p->turnaround[k], p->trials, sorted, &p->stats[k]);
        p->stats[k].slot_hours = sh / (double) p->trials;
        p->stats[k].wasted_slot_hours = wh / (double) p->trials;
        p->stats[k].resubmissions = rs / (double) p->trials;
      }

  /* Proxies that pay off, against the reference mean turnaround. */
  double ref = p->stats[datc_prediction_reference (p)].mean;
  p->pay_off = g_new0 (guint, n_sites);
  for (guint i = 0, c = 0; i < n_sites; i++)
    {
      const DatcScenarioSite *s = datc_scenario_site (sc, i);
      for (guint j = 0; j < s->proxies; j++, c++)
        if (kth[c] + s->task_time < ref)
          p->pay_off[i]++;
    }

  /* Empirical waits: their bound, and pull with every wait at it. */
  p->bounds = g_new0 (DatcWaitBound, n_sites);
  p->has_bound = g_new0 (gboolean, n_sites);
  p->pull_at_bounds = NAN;
  g_autoptr (DatcScenario) bounded = datc_scenario_copy_without (sc, G_MAXUINT);
  gboolean any = FALSE;
  for (guint i = 0; i < n_sites; i++)
    {
      const DatcScenarioSite *s = datc_scenario_site (sc, i);
      if (datc_wait_dist_kind (s->wait) != DATC_WAIT_EMPIRICAL)
        continue;
      gsize n;
      const double *w = datc_wait_dist_samples (s->wait, &n);
      p->has_bound[i] = datc_wait_bound_compute (
          w, n, DATC_PREDICT_BOUND_QUANTILE, DATC_PREDICT_BOUND_CONFIDENCE, &p->bounds[i], NULL);
      if (p->has_bound[i] && p->bounds[i].index > 0)
        {
          datc_scenario_set_site_wait (bounded, i, datc_wait_dist_new_const (p->bounds[i].bound));
          any = TRUE;
        }
    }
  if (any)
    {
      g_autoptr (DatcSimulation) sim = datc_simulation_new (bounded, seed);
      guint64 n = datc_scenario_is_deterministic (bounded) ? 1 : p->trials;
      double s = 0;
      for (guint64 t = 0; t < n; t++)
        {
          DatcOutcome o;
          datc_simulation_run (sim, t, DATC_POLICY_PULL, &o);
          s += o.turnaround;
        }
      p->pull_at_bounds = s / (double) n;
    }
  return g_steal_pointer (&p);
}

guint64
datc_prediction_trials (const DatcPrediction *p)
{
  return p->trials;
}

guint
datc_prediction_skipped (const DatcPrediction *p)
{
  return p->skipped;
}

gboolean
datc_prediction_deterministic (const DatcPrediction *p)
{
  return p->deterministic;
}

gboolean
datc_prediction_has (const DatcPrediction *p, DatcPolicy policy)
{
  return policy < DATC_N_POLICIES && (p->mask & (1u << policy));
}

const DatcPolicyStats *
datc_prediction_stats (const DatcPrediction *p, DatcPolicy policy)
{
  return datc_prediction_has (p, policy) ? &p->stats[policy] : NULL;
}

const double *
datc_prediction_turnarounds (const DatcPrediction *p, DatcPolicy policy)
{
  return datc_prediction_has (p, policy) ? p->turnaround[policy] : NULL;
}

DatcPolicy
datc_prediction_reference (const DatcPrediction *p)
{
  if (p->mask & (1u << DATC_POLICY_PULL))
    return DATC_POLICY_PULL;
  for (DatcPolicy k = 0; k < DATC_N_POLICIES; k++)
    if (p->mask & (1u << k))
      return k;
  return DATC_POLICY_PULL;
}

guint
datc_prediction_pay_off (const DatcPrediction *p, guint site)
{
  g_return_val_if_fail (site < datc_scenario_n_sites (p->sc), 0);
  return p->pay_off[site];
}

const DatcWaitBound *
datc_prediction_wait_bound (const DatcPrediction *p, guint site)
{
  g_return_val_if_fail (site < datc_scenario_n_sites (p->sc), NULL);
  return p->has_bound[site] ? &p->bounds[site] : NULL;
}

double
datc_prediction_pull_at_bounds (const DatcPrediction *p)
{
  return p->pull_at_bounds;
}

/* ---- output ---- */

static void
json_bound (GString *o, const DatcWaitBound *b)
{
  gboolean first = TRUE;
  g_string_append_c (o, '{');
  datc_json_key (o, &first, "quantile");
  datc_json_number (o, b->quantile, 4);
  datc_json_key (o, &first, "confidence");
  datc_json_number (o, b->confidence, 4);
  datc_json_key (o, &first, "observations");
  g_string_append_printf (o, "%" G_GSIZE_FORMAT, b->observations);
  datc_json_key (o, &first, "needed");
  g_string_append_printf (o, "%" G_GSIZE_FORMAT, b->needed);
  datc_json_key (o, &first, "bound");
  datc_json_number (o, b->index > 0 ? b->bound : NAN, 3);
  g_string_append_c (o, '}');
}

gchar *
datc_prediction_to_json (const DatcPrediction *p)
{
  GString *o = g_string_new ("{");
  gboolean first = TRUE;
  datc_json_key (o, &first, "tasks");
  g_string_append_printf (o, "%" G_GUINT64_FORMAT, datc_scenario_tasks (p->sc));
  datc_json_key (o, &first, "trials");
  g_string_append_printf (o, "%" G_GUINT64_FORMAT, p->trials);
  datc_json_key (o, &first, "seed");
  g_string_append_printf (o, "%" G_GUINT64_FORMAT, p->seed);
  datc_json_key (o, &first, "deterministic");
  g_string_append (o, p->deterministic ? "true" : "false");
  datc_json_key (o, &first, "policies");
  g_string_append_c (o, '{');
  gboolean pf = TRUE;
  for (DatcPolicy k = 0; k < DATC_N_POLICIES; k++)
    {
      const DatcPolicyStats *st = datc_prediction_stats (p, k);
      if (st == NULL)
        continue;
      datc_json_key (o, &pf, datc_policy_name (k));
      gboolean f = TRUE;
      g_string_append_c (o, '{');
      const struct {
        const char *key;
        double v;
        int decimals;
      } fields[] = { { "mean", st->mean, 3 },
                     { "mean_se", st->se, 3 },
                     { "median", st->median, 3 },
                     { "p95", st->p95, 3 },
                     { "min", st->min, 3 },
                     { "max", st->max, 3 },
                     { "slot_hours", st->slot_hours, 4 },
                     { "wasted_slot_hours", st->wasted_slot_hours, 4 },
                     { "resubmissions", st->resubmissions, 3 } };
      for (guint i = 0; i < G_N_ELEMENTS (fields); i++)
        {
          datc_json_key (o, &f, fields[i].key);
          datc_json_number (o, fields[i].v, fields[i].decimals);
        }
      g_string_append_c (o, '}');
    }
  g_string_append_c (o, '}');
  datc_json_key (o, &first, "reference");
  datc_json_append_string (o, datc_policy_name (datc_prediction_reference (p)));
  datc_json_key (o, &first, "sites");
  g_string_append_c (o, '{');
  gboolean sf = TRUE;
  for (guint i = 0; i < datc_scenario_n_sites (p->sc); i++)
    {
      const DatcScenarioSite *s = datc_scenario_site (p->sc, i);
      datc_json_key (o, &sf, s->name);
      gboolean f = TRUE;
      g_string_append_c (o, '{');
      datc_json_key (o, &f, "proxies");
      g_string_append_printf (o, "%u", s->proxies);
      datc_json_key (o, &f, "pay_off");
      g_string_append_printf (o, "%u", p->pay_off[i]);
      if (p->has_bound[i])
        {
          datc_json_key (o, &f, "wait_bound");
          json_bound (o, &p->bounds[i]);
        }
      g_string_append_c (o, '}');
    }
  g_string_append_c (o, '}');
  if (!isnan (p->pull_at_bounds))
    {
      datc_json_key (o, &first, "pull_at_wait_bounds");
      datc_json_number (o, p->pull_at_bounds, 3);
    }
  if (p->skipped)
    {
      datc_json_key (o, &first, "skipped");
      g_string_append_c (o, '[');
      gboolean kf = TRUE;
      for (DatcPolicy k = 0; k < DATC_N_POLICIES; k++)
        if (p->skipped & (1u << k))
          {
            if (!kf)
              g_string_append_c (o, ',');
            kf = FALSE;
            datc_json_append_string (o, datc_policy_name (k));
          }
      g_string_append_c (o, ']');
    }
  g_string_append (o, "}\n");
  return g_string_free (o, FALSE);
}

static void
append_time (GString *o, double s)
{
  g_autofree gchar *t = datc_duration_format (s);
  g_string_append_printf (o, " %10s", t);
}

/* What the direct policies leave out, said where their numbers are: the
 * ideal ones are far below a run of `datc run --mode direct`, whose jobs
 * wait one after the other in a few places. */
static void
append_direct_limits (const DatcPrediction *p, GString *o)
{
  guint ideal = (1u << DATC_POLICY_DIRECT_COMMON) | (1u << DATC_POLICY_DIRECT_CAP);
  if (p->mask & ideal)
    g_string_append (o, "direct-common, direct-cap: every job queued at time 0, its wait elapsing "
                        "while earlier jobs run (not what `datc run --mode direct` does)\n");
  if (!(p->mask & (1u << DATC_POLICY_DIRECT)))
    return;
  g_string_append (o, "direct: `datc run --mode direct`, slots_per_proxy x proxies jobs at "
                      "once per site, each waiting from its submission, its end seen by the "
                      "master's next poll (poll_interval), then job_overhead before the next "
                      "submit");
  gboolean budget = FALSE;
  for (guint i = 0; i < datc_scenario_n_sites (p->sc); i++)
    budget |= datc_scenario_site (p->sc, i)->calls_per_minute > 0;
  if (budget)
    g_string_append (o, ", max_calls_per_minute as one poll and one array submit per 180/B s "
                        "(no arrays, as fork and HTCondor: optimistic)");
  g_string_append (o, "; walltime ignored\n");
}

gchar *
datc_prediction_to_text (const DatcPrediction *p)
{
  GString *o = g_string_new (NULL);
  const char *path = datc_scenario_path (p->sc);
  g_string_append_printf (
      o, "%s: %" G_GUINT64_FORMAT " tasks on %u site%s (%" G_GUINT64_FORMAT " slots); ",
      path ? path : "scenario", datc_scenario_tasks (p->sc), datc_scenario_n_sites (p->sc),
      datc_scenario_n_sites (p->sc) == 1 ? "" : "s", datc_scenario_total_slots (p->sc));
  if (p->deterministic)
    g_string_append (o, "nothing is random: exact values\n");
  else
    g_string_append_printf (o, "%" G_GUINT64_FORMAT " trials, seed %" G_GUINT64_FORMAT "\n",
                            p->trials, p->seed);
  g_string_append_printf (o, "%-14s %10s %10s %10s %10s %12s %12s\n", "policy", "mean", "+-1se",
                          "median", "p95", "slot-hours", "wasted");
  char a[G_ASCII_DTOSTR_BUF_SIZE], b[G_ASCII_DTOSTR_BUF_SIZE];
  for (DatcPolicy k = 0; k < DATC_N_POLICIES; k++)
    {
      const DatcPolicyStats *st = datc_prediction_stats (p, k);
      if (st == NULL)
        continue;
      g_string_append_printf (o, "%-14s", datc_policy_name (k));
      append_time (o, st->mean);
      append_time (o, st->se);
      append_time (o, st->median);
      append_time (o, st->p95);
      g_string_append_printf (o, " %12s %12s\n",
                              g_ascii_formatd (a, sizeof a, "%.1f", st->slot_hours),
                              g_ascii_formatd (b, sizeof b, "%.1f", st->wasted_slot_hours));
    }
  for (DatcPolicy k = 0; k < DATC_N_POLICIES; k++)
    if (p->skipped & (1u << k))
      g_string_append_printf (o, "%-14s left out: it keeps every job in memory, at most %u tasks\n",
                              datc_policy_name (k), DATC_PREDICT_MAX_DIRECT_TASKS);
  append_direct_limits (p, o);
  DatcPolicy ref = datc_prediction_reference (p);
  g_autofree gchar *reft = datc_duration_format (p->stats[ref].mean);
  g_string_append_printf (
      o, "proxies worth submitting (mean start + one task before the %s mean of %s):\n",
      datc_policy_name (ref), reft);
  for (guint i = 0; i < datc_scenario_n_sites (p->sc); i++)
    {
      const DatcScenarioSite *s = datc_scenario_site (p->sc, i);
      g_string_append_printf (o, "  %-16s %u of %u\n", s->name, p->pay_off[i], s->proxies);
    }
  for (guint i = 0; i < datc_scenario_n_sites (p->sc); i++)
    {
      if (!p->has_bound[i])
        continue;
      const DatcWaitBound *bd = &p->bounds[i];
      const char *name = datc_scenario_site (p->sc, i)->name;
      if (bd->index == 0)
        g_string_append_printf (
            o,
            "  %s: no bound on the %.0f%% wait at %.0f%% confidence from %" G_GSIZE_FORMAT
            " observed waits: %" G_GSIZE_FORMAT " are needed\n",
            name, bd->quantile * 100, bd->confidence * 100, bd->observations, bd->needed);
      else
        {
          g_autofree gchar *bt = datc_duration_format (bd->bound);
          g_string_append_printf (
              o,
              "  %s: %.0f%% of waits end within %s (%.0f%% confidence, %" G_GSIZE_FORMAT
              " observed)\n",
              name, bd->quantile * 100, bt, bd->confidence * 100, bd->observations);
        }
    }
  if (!isnan (p->pull_at_bounds))
    {
      g_autofree gchar *t = datc_duration_format (p->pull_at_bounds);
      g_string_append_printf (o, "pull with every empirical wait at its bound: %s\n", t);
    }
  return g_string_free (o, FALSE);
}
