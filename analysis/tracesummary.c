/* tracesummary.c: see tracesummary.h. */
#include "tracesummary.h"

#include <math.h>
#include <stdlib.h>

#include "duration.h"
#include "jsonout.h"

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

double
datc_trace_summary_median (GArray *v)
{
  if (v->len == 0)
    return NAN;
  qsort (v->data, v->len, sizeof (double), cmp_double);
  const double *d = (const double *) v->data;
  return v->len % 2 ? d[v->len / 2] : (d[v->len / 2 - 1] + d[v->len / 2]) / 2;
}

typedef struct {
  double min, median, max, mean;
} WaitStats;

static WaitStats
wait_stats (const DatcSiteLog *s)
{
  WaitStats w = { NAN, NAN, NAN, NAN };
  if (s->waits->len == 0)
    return w;
  g_autoptr (GArray) c = g_array_copy (s->waits);
  w.median = datc_trace_summary_median (c);
  const double *d = (const double *) c->data;
  w.min = d[0];
  w.max = d[c->len - 1];
  double sum = 0;
  for (guint i = 0; i < c->len; i++)
    sum += d[i];
  w.mean = sum / c->len;
  return w;
}

/* From the campaign's first start to its last task's end (to the last
 * event when no task has finished). */
static double
turnaround (const DatcCampaignLog *log)
{
  guint64 n = datc_campaign_log_n_results (log);
  gint64 end
      = n > 0 ? datc_campaign_log_results (log)[n - 1].finished : datc_campaign_log_end (log);
  return (double) (end - datc_campaign_log_start (log)) / 1e6;
}

double
datc_trace_summary_calls_per_1000 (const DatcSiteLog *s)
{
  guint64 n = s->done + s->failed;
  return n > 0 ? 1000.0 * (double) s->calls / (double) n : NAN;
}

gchar *
datc_trace_summary_to_json (const DatcCampaignLog *log, const DatcCampaignModel *model)
{
  GString *o = g_string_new ("{");
  gboolean first = TRUE;
  datc_json_key (o, &first, "dir");
  datc_json_append_string (o, datc_campaign_log_dir (log));
  datc_json_key (o, &first, "tasks");
  g_string_append_printf (o, "%" G_GUINT64_FORMAT, datc_campaign_log_tasks (log));
  datc_json_key (o, &first, "done");
  g_string_append_printf (o, "%" G_GUINT64_FORMAT, datc_campaign_log_done (log));
  datc_json_key (o, &first, "failed");
  g_string_append_printf (o, "%" G_GUINT64_FORMAT, datc_campaign_log_failed (log));
  datc_json_key (o, &first, "finished");
  g_string_append (o, datc_campaign_log_finished (log) ? "true" : "false");
  datc_json_key (o, &first, "sessions");
  g_string_append_printf (o, "%u", datc_campaign_log_sessions (log));
  datc_json_key (o, &first, "turnaround");
  datc_json_number (o, turnaround (log), 6);
  datc_json_key (o, &first, "sites");
  g_string_append_c (o, '{');
  gboolean sf = TRUE;
  for (guint i = 0; i < datc_campaign_log_n_sites (log); i++)
    {
      const DatcSiteLog *s = datc_campaign_log_site (log, i);
      WaitStats w = wait_stats (s);
      gboolean f = TRUE;
      datc_json_key (o, &sf, s->name);
      g_string_append_c (o, '{');
      datc_json_key (o, &f, "proxies_submitted");
      g_string_append_printf (o, "%u", s->submitted);
      datc_json_key (o, &f, "proxies_started");
      g_string_append_printf (o, "%u", s->started);
      datc_json_key (o, &f, "proxies_cancelled");
      g_string_append_printf (o, "%u", s->cancelled);
      datc_json_key (o, &f, "waits");
      gboolean wf = TRUE;
      g_string_append_c (o, '{');
      datc_json_key (o, &wf, "count");
      g_string_append_printf (o, "%u", s->waits->len);
      datc_json_key (o, &wf, "min");
      datc_json_number (o, w.min, 6);
      datc_json_key (o, &wf, "median");
      datc_json_number (o, w.median, 6);
      datc_json_key (o, &wf, "max");
      datc_json_number (o, w.max, 6);
      datc_json_key (o, &wf, "mean");
      datc_json_number (o, w.mean, 6);
      g_string_append_c (o, '}');
      datc_json_key (o, &f, "tasks_done");
      g_string_append_printf (o, "%" G_GUINT64_FORMAT, s->done);
      datc_json_key (o, &f, "tasks_failed");
      g_string_append_printf (o, "%" G_GUINT64_FORMAT, s->failed);
      datc_json_key (o, &f, "task_time_mean");
      datc_json_number (o, s->done + s->failed ? s->task_mean : NAN, 6);
      datc_json_key (o, &f, "task_time_cv");
      datc_json_number (o, s->done + s->failed ? s->task_cv : NAN, 4);
      datc_json_key (o, &f, "slot_hours");
      datc_json_number (o, s->held_seconds / 3600, 6);
      datc_json_key (o, &f, "busy_slot_hours");
      datc_json_number (o, s->busy_seconds / 3600, 6);
      datc_json_key (o, &f, "utilisation");
      datc_json_number (o, s->held_seconds > 0 ? MIN (1.0, s->busy_seconds / s->held_seconds) : NAN,
                        4);
      datc_json_key (o, &f, "scheduler_calls");
      gboolean cf = TRUE;
      g_string_append_c (o, '{');
      datc_json_key (o, &cf, "total");
      g_string_append_printf (o, "%" G_GUINT64_FORMAT, s->calls);
      datc_json_key (o, &cf, "submit");
      g_string_append_printf (o, "%" G_GUINT64_FORMAT, s->calls_submit);
      datc_json_key (o, &cf, "poll");
      g_string_append_printf (o, "%" G_GUINT64_FORMAT, s->calls_poll);
      datc_json_key (o, &cf, "cancel");
      g_string_append_printf (o, "%" G_GUINT64_FORMAT, s->calls_cancel);
      g_string_append_c (o, '}');
      datc_json_key (o, &f, "scheduler_calls_per_1000_tasks");
      datc_json_number (o, datc_trace_summary_calls_per_1000 (s), 3);
      g_string_append_c (o, '}');
    }
  g_string_append_c (o, '}');
  datc_json_key (o, &first, "model");
  if (model != NULL)
    datc_campaign_model_append_json (model, o);
  else
    g_string_append (o, "null");
  g_string_append (o, "}\n");
  return g_string_free (o, FALSE);
}

static gchar *
fmt_duration (double s)
{
  return isnan (s) ? g_strdup ("-") : datc_duration_format (s);
}

/* What each site's scheduler was asked, per kind and per 1,000 tasks
 * finished there; nothing from a trace without site_command events. */
static void
append_calls_text (const DatcCampaignLog *log, GString *o)
{
  guint64 total = 0;
  for (guint i = 0; i < datc_campaign_log_n_sites (log); i++)
    total += datc_campaign_log_site (log, i)->calls;
  if (total == 0)
    return;
  g_string_append (
      o, "scheduler calls (a submit counts 2: itself and the lookup that may check it):\n");
  g_string_append_printf (o, "%-16s %9s %8s %8s %8s %15s\n", "site", "calls", "submit", "poll",
                          "cancel", "per 1000 tasks");
  for (guint i = 0; i < datc_campaign_log_n_sites (log); i++)
    {
      const DatcSiteLog *s = datc_campaign_log_site (log, i);
      double per = datc_trace_summary_calls_per_1000 (s);
      g_autofree gchar *per_s = isnan (per) ? g_strdup ("-") : g_strdup_printf ("%.1f", per);
      g_string_append_printf (o,
                              "%-16s %9" G_GUINT64_FORMAT " %8" G_GUINT64_FORMAT
                              " %8" G_GUINT64_FORMAT " %8" G_GUINT64_FORMAT " %15s\n",
                              s->name, s->calls, s->calls_submit, s->calls_poll, s->calls_cancel,
                              per_s);
    }
}

gchar *
datc_trace_summary_to_text (const DatcCampaignLog *log, const DatcCampaignModel *model)
{
  GString *o = g_string_new (NULL);
  g_autofree gchar *ta = datc_duration_format (turnaround (log));
  guint sessions = datc_campaign_log_sessions (log);
  g_string_append_printf (o,
                          "campaign %s: %" G_GUINT64_FORMAT " tasks, %" G_GUINT64_FORMAT
                          " done, %" G_GUINT64_FORMAT " failed; %s after %s (%u session%s)\n",
                          datc_campaign_log_dir (log), datc_campaign_log_tasks (log),
                          datc_campaign_log_done (log), datc_campaign_log_failed (log),
                          datc_campaign_log_finished (log) ? "finished"
                                                           : "not finished (running or stopped)",
                          ta, sessions, sessions == 1 ? "" : "s");
  g_string_append_printf (o, "%-16s %9s %8s %9s %10s %10s %10s %8s %7s %10s %6s\n", "site",
                          "submitted", "started", "cancelled", "wait min", "median", "max", "done",
                          "failed", "task mean", "util");
  for (guint i = 0; i < datc_campaign_log_n_sites (log); i++)
    {
      const DatcSiteLog *s = datc_campaign_log_site (log, i);
      WaitStats w = wait_stats (s);
      g_autofree gchar *wmin = fmt_duration (w.min), *wmed = fmt_duration (w.median),
                       *wmax = fmt_duration (w.max);
      g_autofree gchar *tm = fmt_duration (s->done + s->failed ? s->task_mean : NAN);
      g_autofree gchar *util
          = s->held_seconds > 0
                ? g_strdup_printf (
                      "%d%%", (int) lround (100 * MIN (1.0, s->busy_seconds / s->held_seconds)))
                : g_strdup ("-");
      g_string_append_printf (o,
                              "%-16s %9u %8u %9u %10s %10s %10s %8" G_GUINT64_FORMAT
                              " %7" G_GUINT64_FORMAT " %10s %6s\n",
                              s->name, s->submitted, s->started, s->cancelled, wmin, wmed, wmax,
                              s->done, s->failed, tm, util);
    }
  append_calls_text (log, o);
  if (model != NULL)
    datc_campaign_model_append_text (model, o);
  else
    g_string_append (o, "no model: no task finished on a proxy that started\n");
  return g_string_free (o, FALSE);
}
