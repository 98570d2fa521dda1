/* report.c: see report.h.  Times on the plots are seconds since the
 * campaign's first start.  Long series are sampled down to
 * DATC_REPORT_MAX_POINTS so a million-task campaign gives a report of the
 * same size as a small one. */
#include "report.h"

#include <math.h>
#include <stdlib.h>

#include "duration.h"
#include "svgplot.h"
#include "tracesummary.h"

static const char style[]
    = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:60em;color:#222}"
      "h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em}"
      "table{border-collapse:collapse;margin:1em 0}td,th{padding:.25em .75em;border-bottom:1px "
      "solid #ddd;"
      "text-align:right}th:first-child,td:first-child{text-align:left}"
      "svg.plot{font-size:12px;display:block}svg .grid{stroke:#eee}svg .axis{stroke:#444}"
      "svg .title{font-weight:bold}svg .value{font-size:11px}.note{color:#666;font-size:.9em}";

/* Records what goes wrong while the page loads, for whoever reads the DOM. */
static const char head_script[]
    = "window.addEventListener('error',function(e){var d=document.documentElement;"
      "d.setAttribute('data-errors',(d.getAttribute('data-errors')||'')+(e.message||'error')+';');}"
      ");";

/* Marks each plot with the size of what it drew, and the page with the count. */
static const char check_script[]
    = "(function(){var plots=document.querySelectorAll('svg.plot'),ok=0;"
      "plots.forEach(function(s){var "
      "g=s.querySelector('g.data'),n=g?g.querySelectorAll('path,rect').length:0,"
      "b=g&&n?g.getBBox():{width:0,height:0};"
      "s.setAttribute('data-rendered',Math.round(b.width)+'x'+Math.round(b.height)+' '+n);"
      "if(b.width>0&&b.height>0&&n>0)ok++;});"
      "document.body.setAttribute('data-plots',plots.length);document.body.setAttribute('data-"
      "plots-drawn',ok);})();";

typedef struct {
  double t;
  int delta;
} Step;

static int
cmp_step (const void *a, const void *b)
{
  const Step *x = a, *y = b;
  if (x->t != y->t)
    return (x->t > y->t) - (x->t < y->t);
  return x->delta - y->delta;
}

/* A count over time from +1/-1 steps, as at most max points. */
static void
add_count_series (DatcSvgPlot *plot, const char *name, const char *color, gboolean dashed,
                  GArray *steps, double t_end)
{
  if (steps->len == 0)
    return;
  qsort (steps->data, steps->len, sizeof (Step), cmp_step);
  g_autoptr (GArray) x = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr (GArray) y = g_array_new (FALSE, FALSE, sizeof (double));
  double zero = 0, first = g_array_index (steps, Step, 0).t;
  g_array_append_val (x, first);
  g_array_append_val (y, zero);
  guint stride = MAX (1, steps->len / DATC_REPORT_MAX_POINTS);
  int count = 0;
  for (guint i = 0; i < steps->len; i++)
    {
      const Step *s = &g_array_index (steps, Step, i);
      count += s->delta;
      gboolean last_at_time = i + 1 == steps->len || g_array_index (steps, Step, i + 1).t != s->t;
      if (last_at_time && (i % stride == 0 || i + 1 == steps->len))
        {
          double c = count;
          g_array_append_val (x, s->t);
          g_array_append_val (y, c);
        }
    }
  double c = count;
  g_array_append_val (x, t_end);
  g_array_append_val (y, c);
  datc_svg_plot_add_series (plot, name, color, dashed, TRUE, (double *) x->data, (double *) y->data,
                            x->len);
}

static double
rel (const DatcCampaignLog *log, gint64 t)
{
  return (double) (t - datc_campaign_log_start (log)) / 1e6;
}

static void
plot_proxies (const DatcCampaignLog *log, GString *o)
{
  g_autoptr (DatcSvgPlot) plot = datc_svg_plot_new ("proxies", "Proxies per site over time",
                                                    "time since the campaign started", "proxies");
  datc_svg_plot_set_time_axis (plot, TRUE);
  double t_end = rel (log, datc_campaign_log_end (log));
  for (guint i = 0; i < datc_campaign_log_n_sites (log); i++)
    {
      g_autoptr (GArray) pending = g_array_new (FALSE, FALSE, sizeof (Step));
      g_autoptr (GArray) running = g_array_new (FALSE, FALSE, sizeof (Step));
      for (guint k = 0; k < datc_campaign_log_n_proxies (log); k++)
        {
          const DatcProxyLog *x = datc_campaign_log_proxy (log, k);
          if (x->site_index != i)
            continue;
          if (x->submitted)
            {
              gint64 left = x->started ? x->started
                            : x->ended ? x->ended
                                       : datc_campaign_log_end (log);
              g_array_append_val (pending, ((Step) { rel (log, x->submitted), +1 }));
              g_array_append_val (pending, ((Step) { rel (log, MAX (left, x->submitted)), -1 }));
            }
          if (x->started)
            {
              gint64 end = x->ended ? x->ended : datc_campaign_log_end (log);
              g_array_append_val (running, ((Step) { rel (log, x->started), +1 }));
              g_array_append_val (running, ((Step) { rel (log, MAX (end, x->started)), -1 }));
            }
        }
      const DatcSiteLog *s = datc_campaign_log_site (log, i);
      g_autofree gchar *pn = g_strdup_printf ("%s pending", s->name);
      g_autofree gchar *rn = g_strdup_printf ("%s running", s->name);
      add_count_series (plot, rn, datc_svg_plot_color (i), FALSE, running, t_end);
      add_count_series (plot, pn, datc_svg_plot_color (i), TRUE, pending, t_end);
    }
  datc_svg_plot_render (plot, o);
}

static void
plot_completed (const DatcCampaignLog *log, GString *o)
{
  g_autoptr (DatcSvgPlot) plot
      = datc_svg_plot_new ("completed", "Tasks completed over time",
                           "time since the campaign started", "tasks finished");
  datc_svg_plot_set_time_axis (plot, TRUE);
  const DatcResultPoint *r = datc_campaign_log_results (log);
  guint64 n = datc_campaign_log_n_results (log);
  guint n_sites = datc_campaign_log_n_sites (log);
  /* One line per site when there are several, and the total. */
  for (guint site = 0; site <= (n_sites > 1 ? n_sites : 0); site++)
    {
      gboolean total = site == n_sites || n_sites <= 1;
      guint64 count = 0, m = 0;
      for (guint64 i = 0; i < n; i++)
        m += total || r[i].site_index == site;
      if (m == 0)
        continue;
      guint64 stride = MAX (1, m / DATC_REPORT_MAX_POINTS);
      g_autoptr (GArray) x = g_array_new (FALSE, FALSE, sizeof (double));
      g_autoptr (GArray) y = g_array_new (FALSE, FALSE, sizeof (double));
      double zero = 0, t0 = 0;
      g_array_append_val (x, t0);
      g_array_append_val (y, zero);
      for (guint64 i = 0; i < n; i++)
        {
          if (!total && r[i].site_index != site)
            continue;
          count++;
          if (count % stride == 0 || count == m)
            {
              double t = rel (log, r[i].finished), c = (double) count;
              g_array_append_val (x, t);
              g_array_append_val (y, c);
            }
        }
      const char *name = total ? "all sites" : datc_campaign_log_site (log, site)->name;
      datc_svg_plot_add_series (plot, name, total ? "#222222" : datc_svg_plot_color (site), FALSE,
                                TRUE, (double *) x->data, (double *) y->data, x->len);
    }
  datc_svg_plot_render (plot, o);
}

static void
plot_throughput (const DatcCampaignLog *log, GString *o)
{
  g_autoptr (DatcSvgPlot) plot = datc_svg_plot_new ("throughput", "Throughput per site", "site",
                                                    "tasks per hour while the site ran");
  const DatcResultPoint *r = datc_campaign_log_results (log);
  guint64 n = datc_campaign_log_n_results (log);
  for (guint i = 0; i < datc_campaign_log_n_sites (log); i++)
    {
      const DatcSiteLog *s = datc_campaign_log_site (log, i);
      gint64 first = 0, last = 0;
      guint64 m = 0;
      for (guint64 k = 0; k < n; k++)
        if (r[k].site_index == i)
          {
            first = first == 0 ? r[k].started : MIN (first, r[k].started);
            last = MAX (last, r[k].finished);
            m++;
          }
      /* From its first proxy start when known. */
      for (guint k = 0; k < datc_campaign_log_n_proxies (log); k++)
        {
          const DatcProxyLog *x = datc_campaign_log_proxy (log, k);
          if (x->site_index == i && x->started && (first == 0 || x->started < first))
            first = x->started;
        }
      double hours = (double) (last - first) / 3.6e9;
      datc_svg_plot_add_bar (plot, s->name, datc_svg_plot_color (i),
                             hours > 0 ? (double) m / hours : 0);
    }
  datc_svg_plot_render (plot, o);
}

static void
plot_model (const DatcCampaignModel *m, GString *o)
{
  g_autoptr (DatcSvgPlot) plot
      = datc_svg_plot_new ("model", "Turnaround: actual and predicted", "", "seconds");
  datc_svg_plot_set_time_axis (plot, TRUE);
  datc_svg_plot_add_bar (plot, "actual", "#222222", datc_campaign_model_actual (m));
  const DatcPrediction *p = datc_campaign_model_prediction (m);
  guint c = 0;
  for (DatcPolicy k = 0; k < DATC_N_POLICIES; k++)
    {
      const DatcPolicyStats *st = datc_prediction_stats (p, k);
      if (st != NULL)
        datc_svg_plot_add_bar (plot, datc_policy_name (k), datc_svg_plot_color (c++), st->mean);
    }
  datc_svg_plot_render (plot, o);
}

static void
escaped (GString *o, const char *s)
{
  g_autofree gchar *e = g_markup_escape_text (s, -1);
  g_string_append (o, e);
}

static void
cell_time (GString *o, double s)
{
  g_autofree gchar *t = isfinite (s) ? datc_duration_format (s) : g_strdup ("–");
  g_string_append_printf (o, "<td>%s</td>", t);
}

static void
site_table (const DatcCampaignLog *log, GString *o)
{
  g_string_append (
      o, "<table class=\"sites\"><tr><th>site</th><th>proxies submitted</th><th>started</th>"
         "<th>cancelled</th><th>median wait</th><th>max wait</th><th>tasks done</th>"
         "<th>failed</th><th>mean task</th><th>slot utilisation</th></tr>\n");
  for (guint i = 0; i < datc_campaign_log_n_sites (log); i++)
    {
      const DatcSiteLog *s = datc_campaign_log_site (log, i);
      g_autoptr (GArray) w = g_array_copy (s->waits);
      double median = datc_trace_summary_median (w);
      double max = w->len > 0 ? g_array_index (w, double, w->len - 1) : NAN;
      g_string_append (o, "<tr><td>");
      escaped (o, s->name);
      g_string_append_printf (o, "</td><td>%u</td><td>%u</td><td>%u</td>", s->submitted, s->started,
                              s->cancelled);
      cell_time (o, median);
      cell_time (o, max);
      g_string_append_printf (o, "<td>%" G_GUINT64_FORMAT "</td><td>%" G_GUINT64_FORMAT "</td>",
                              s->done, s->failed);
      cell_time (o, s->done + s->failed ? s->task_mean : NAN);
      if (s->held_seconds > 0)
        g_string_append_printf (o, "<td>%d%%</td>",
                                (int) lround (100 * MIN (1.0, s->busy_seconds / s->held_seconds)));
      else
        g_string_append (o, "<td>–</td>");
      g_string_append (o, "</tr>\n");
    }
  g_string_append (o, "</table>\n");
}

/* What each site's scheduler was asked: what its admins see of us. */
static void
calls_table (const DatcCampaignLog *log, GString *o)
{
  g_string_append (o,
                   "<table class=\"calls\"><tr><th>site</th><th>scheduler calls</th><th>submit</th>"
                   "<th>poll</th><th>cancel</th><th>per 1000 tasks</th></tr>\n");
  for (guint i = 0; i < datc_campaign_log_n_sites (log); i++)
    {
      const DatcSiteLog *s = datc_campaign_log_site (log, i);
      g_string_append (o, "<tr><td>");
      escaped (o, s->name);
      g_string_append_printf (o,
                              "</td><td>%" G_GUINT64_FORMAT "</td><td>%" G_GUINT64_FORMAT
                              "</td><td>%" G_GUINT64_FORMAT "</td><td>%" G_GUINT64_FORMAT "</td>",
                              s->calls, s->calls_submit, s->calls_poll, s->calls_cancel);
      double per = datc_trace_summary_calls_per_1000 (s);
      if (isfinite (per))
        g_string_append_printf (o, "<td>%.1f</td>", per);
      else
        g_string_append (o, "<td>–</td>");
      g_string_append (o, "</tr>\n");
    }
  g_string_append (
      o, "</table>\n<p class=\"note\">The calls the master counted against each site's "
         "max_calls_per_minute: a submit counts 2, itself and the lookup that may check it. "
         "Per 1000 tasks finished on the site.</p>\n");
}

static void
model_table (const DatcCampaignModel *m, GString *o)
{
  const DatcPrediction *p = datc_campaign_model_prediction (m);
  double actual = datc_campaign_model_actual (m);
  g_autofree gchar *what = datc_campaign_model_describe (m);
  g_string_append_printf (o, "<p>The model of the %s (", datc_campaign_model_basis (m));
  escaped (o, what);
  g_string_append_printf (o, "; %" G_GUINT64_FORMAT " trial%s).</p>\n", datc_prediction_trials (p),
                          datc_prediction_trials (p) == 1 ? "" : "s");
  g_string_append (
      o, "<table class=\"model\"><tr><th></th><th>turnaround</th><th>median</th><th>p95</th>"
         "<th>vs actual</th></tr>\n<tr><td>actual</td>");
  cell_time (o, actual);
  g_string_append (o, "<td></td><td></td><td></td></tr>\n");
  for (DatcPolicy k = 0; k < DATC_N_POLICIES; k++)
    {
      const DatcPolicyStats *st = datc_prediction_stats (p, k);
      if (st == NULL)
        continue;
      gboolean ran = (int) k == datc_campaign_model_matches (m);
      g_string_append_printf (o, "<tr><td>%s%s</td>", datc_policy_name (k),
                              ran ? " (the mode that ran)" : "");
      cell_time (o, st->mean);
      cell_time (o, st->median);
      cell_time (o, st->p95);
      if (actual > 0)
        g_string_append_printf (o, "<td>%+d%%</td>",
                                (int) lround (100 * (st->mean - actual) / actual));
      else
        g_string_append (o, "<td>–</td>");
      g_string_append (o, "</tr>\n");
    }
  g_string_append (o, "</table>\n");
}

gchar *
datc_report_render (const DatcCampaignLog *log, const DatcCampaignModel *model)
{
  GString *o = g_string_new (
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>datc report: ");
  escaped (o, datc_campaign_log_dir (log));
  g_string_append_printf (o, "</title>\n<style>%s</style>\n<script>%s</script>\n</head>\n<body>\n",
                          style, head_script);
  g_string_append (o, "<h1>Campaign ");
  escaped (o, datc_campaign_log_dir (log));
  g_string_append (o, "</h1>\n");
  g_autofree gchar *ta = datc_duration_format (
      (double) (datc_campaign_log_end (log) - datc_campaign_log_start (log)) / 1e6);
  guint sessions = datc_campaign_log_sessions (log);
  g_string_append_printf (o,
                          "<p class=\"summary\">%" G_GUINT64_FORMAT " tasks: %" G_GUINT64_FORMAT
                          " done, %" G_GUINT64_FORMAT " failed; %s after %s, %u session%s.</p>\n",
                          datc_campaign_log_tasks (log), datc_campaign_log_done (log),
                          datc_campaign_log_failed (log),
                          datc_campaign_log_finished (log) ? "finished" : "not finished", ta,
                          sessions, sessions == 1 ? "" : "s");
  g_autoptr (GArray) class_counts = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr (GPtrArray) classes = datc_campaign_log_classes (log, class_counts);
  if (classes->len > 0)
    {
      g_string_append (o, "<p class=\"summary\">Why tasks ended:");
      for (guint i = 0; i < classes->len; i++)
        {
          g_string_append (o, i == 0 ? " " : ", ");
          escaped (o, classes->pdata[i]);
          g_string_append_printf (o, " %" G_GUINT64_FORMAT,
                                  g_array_index (class_counts, guint64, i));
        }
      g_string_append (o, ".</p>\n");
    }
  for (guint i = 0; i < datc_campaign_log_n_warnings (log); i++)
    {
      g_string_append (o, "<p class=\"note\">");
      escaped (o, datc_campaign_log_warning (log, i));
      g_string_append (o, "</p>\n");
    }
  g_string_append (o, "<h2>Sites</h2>\n");
  site_table (log, o);
  g_string_append (o, "<h2>Scheduler calls</h2>\n");
  calls_table (log, o);
  g_string_append (o,
                   "<h2>Proxies per site over time</h2>\n<p class=\"note\">Solid: running; dashed: "
                   "submitted and waiting in the queue.</p>\n");
  plot_proxies (log, o);
  g_string_append (o, "<h2>Tasks completed over time</h2>\n");
  plot_completed (log, o);
  g_string_append (o, "<h2>Throughput per site</h2>\n");
  plot_throughput (log, o);
  g_string_append (o, "<h2>Predicted and actual turnaround</h2>\n");
  if (model != NULL)
    {
      model_table (model, o);
      plot_model (model, o);
    }
  else
    g_string_append (o, "<p>No model: no task finished on a proxy that started.</p>\n");
  g_string_append_printf (o, "<script>%s</script>\n</body></html>\n", check_script);
  return g_string_free (o, FALSE);
}
