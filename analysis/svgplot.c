/* svgplot.c: see svgplot.h.  Coordinates are written with one decimal
 * through g_ascii_formatd so the file is the same in every locale. */
#include "svgplot.h"

#include <math.h>

#include "duration.h"

#define W 760.0
#define H 300.0
#define LEFT 70.0
#define RIGHT 170.0
#define TOP 30.0
#define BOTTOM 50.0

typedef struct {
  gchar *name, *color;
  gboolean dashed, step;
  GArray *x, *y;
} Series;

typedef struct {
  gchar *label, *color;
  double value;
} Bar;

struct DatcSvgPlot {
  gchar *id, *title, *x_label, *y_label;
  gboolean time_axis;
  GPtrArray *series; /* Series* */
  GArray *bars;      /* Bar */
};

static void
series_free (gpointer p)
{
  Series *s = p;
  g_free (s->name);
  g_free (s->color);
  g_array_unref (s->x);
  g_array_unref (s->y);
  g_free (s);
}

static void
bar_clear (gpointer p)
{
  Bar *b = p;
  g_free (b->label);
  g_free (b->color);
}

DatcSvgPlot *
datc_svg_plot_new (const char *id, const char *title, const char *x_label, const char *y_label)
{
  DatcSvgPlot *p = g_new0 (DatcSvgPlot, 1);
  p->id = g_strdup (id);
  p->title = g_strdup (title);
  p->x_label = g_strdup (x_label);
  p->y_label = g_strdup (y_label);
  p->series = g_ptr_array_new_with_free_func (series_free);
  p->bars = g_array_new (FALSE, TRUE, sizeof (Bar));
  g_array_set_clear_func (p->bars, bar_clear);
  return p;
}

void
datc_svg_plot_free (DatcSvgPlot *p)
{
  if (p == NULL)
    return;
  g_free (p->id);
  g_free (p->title);
  g_free (p->x_label);
  g_free (p->y_label);
  g_ptr_array_unref (p->series);
  g_array_unref (p->bars);
  g_free (p);
}

void
datc_svg_plot_set_time_axis (DatcSvgPlot *p, gboolean time)
{
  p->time_axis = time;
}

void
datc_svg_plot_add_series (DatcSvgPlot *p, const char *name, const char *color, gboolean dashed,
                          gboolean step, const double *x, const double *y, gsize n)
{
  Series *s = g_new0 (Series, 1);
  s->name = g_strdup (name);
  s->color = g_strdup (color);
  s->dashed = dashed;
  s->step = step;
  s->x = g_array_sized_new (FALSE, FALSE, sizeof (double), (guint) n);
  s->y = g_array_sized_new (FALSE, FALSE, sizeof (double), (guint) n);
  for (gsize i = 0; i < n; i++)
    if (isfinite (x[i]) && isfinite (y[i]))
      {
        g_array_append_val (s->x, x[i]);
        g_array_append_val (s->y, y[i]);
      }
  g_ptr_array_add (p->series, s);
}

void
datc_svg_plot_add_bar (DatcSvgPlot *p, const char *label, const char *color, double value)
{
  Bar b = { g_strdup (label), g_strdup (color), isfinite (value) ? value : 0 };
  g_array_append_val (p->bars, b);
}

const char *
datc_svg_plot_color (guint i)
{
  static const char *const palette[] = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                         "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22" };
  return palette[i % G_N_ELEMENTS (palette)];
}

/* A round step giving about `want` ticks over `range`. */
static double
nice_step (double range, double want, gboolean time)
{
  if (!(range > 0))
    return 1;
  double raw = range / want;
  if (time && raw >= 1)
    {
      static const double steps[]
          = { 1,   2,    5,    10,   15,    30,    60,    120,   300,    600,
              900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800 };
      for (guint i = 0; i < G_N_ELEMENTS (steps); i++)
        if (steps[i] >= raw)
          return steps[i];
      return ceil (raw / 604800) * 604800;
    }
  double mag = pow (10, floor (log10 (raw)));
  double f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

static void
num (GString *o, double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append (o, g_ascii_formatd (buf, sizeof buf, "%.1f", v));
}

static gchar *
tick_label (double v, gboolean time, double step)
{
  if (time)
    return datc_duration_format (v);
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  if (step >= 1 || v == 0)
    return g_strdup (g_ascii_formatd (buf, sizeof buf, "%.0f", v));
  int decimals = (int) CLAMP (ceil (-log10 (step)), 1, 6);
  char fmt[8];
  g_snprintf (fmt, sizeof fmt, "%%.%df", decimals);
  return g_strdup (g_ascii_formatd (buf, sizeof buf, fmt, v));
}

static void
text (GString *o, double x, double y, const char *anchor, const char *extra, const char *s)
{
  g_autofree gchar *esc = g_markup_escape_text (s, -1);
  g_string_append (o, "<text x=\"");
  num (o, x);
  g_string_append (o, "\" y=\"");
  num (o, y);
  g_string_append_printf (o, "\" text-anchor=\"%s\"%s>%s</text>\n", anchor, extra ? extra : "",
                          esc);
}

static void
line (GString *o, double x1, double y1, double x2, double y2, const char *cls)
{
  g_string_append_printf (o, "<line class=\"%s\" x1=\"", cls);
  num (o, x1);
  g_string_append (o, "\" y1=\"");
  num (o, y1);
  g_string_append (o, "\" x2=\"");
  num (o, x2);
  g_string_append (o, "\" y2=\"");
  num (o, y2);
  g_string_append (o, "\"/>\n");
}

/* The y axis from 0 to a round maximum, with grid lines. */
static double
y_axis (GString *o, double ymax, gboolean time)
{
  if (!(ymax > 0))
    ymax = 1;
  double step = nice_step (ymax, 5, time);
  double top = ceil (ymax / step) * step;
  double ph = H - TOP - BOTTOM;
  for (double v = 0; v <= top + step / 2; v += step)
    {
      double y = TOP + ph - v / top * ph;
      line (o, LEFT, y, W - RIGHT, y, "grid");
      g_autofree gchar *l = tick_label (v, time, step);
      text (o, LEFT - 6, y + 4, "end", NULL, l);
    }
  return top;
}

static void
frame (const DatcSvgPlot *p, GString *o)
{
  g_autofree gchar *id = g_markup_escape_text (p->id, -1);
  g_autofree gchar *title = g_markup_escape_text (p->title, -1);
  g_string_append_printf (
      o,
      "<svg class=\"plot\" id=\"%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
      "role=\"img\" aria-label=\"%s\">\n<title>%s</title>\n",
      id, (int) W, (int) H, (int) W, (int) H, title, title);
  text (o, LEFT, 18, "start", " class=\"title\"", p->title);
  text (o, LEFT + (W - LEFT - RIGHT) / 2, H - 10, "middle", NULL, p->x_label);
  g_autofree gchar *rot
      = g_strdup_printf (" transform=\"rotate(-90 14 %d)\"", (int) (TOP + (H - TOP - BOTTOM) / 2));
  text (o, 14, TOP + (H - TOP - BOTTOM) / 2, "middle", rot, p->y_label);
}

static void
render_bars (const DatcSvgPlot *p, GString *o)
{
  double ymax = 0;
  for (guint i = 0; i < p->bars->len; i++)
    ymax = MAX (ymax, g_array_index (p->bars, Bar, i).value);
  double top = y_axis (o, ymax, p->time_axis);
  double pw = W - LEFT - RIGHT, ph = H - TOP - BOTTOM;
  double slot = pw / MAX (p->bars->len, 1);
  g_string_append (o, "<g class=\"data\">\n");
  for (guint i = 0; i < p->bars->len; i++)
    {
      const Bar *b = &g_array_index (p->bars, Bar, i);
      double h = b->value / top * ph;
      g_autofree gchar *label = g_markup_escape_text (b->label, -1);
      g_string_append_printf (o, "<rect fill=\"%s\" x=\"", b->color);
      num (o, LEFT + slot * i + slot * 0.15);
      g_string_append (o, "\" y=\"");
      num (o, TOP + ph - h);
      g_string_append (o, "\" width=\"");
      num (o, slot * 0.7);
      g_string_append (o, "\" height=\"");
      num (o, MAX (h, 0.5));
      g_string_append_printf (o, "\"><title>%s</title></rect>\n", label);
    }
  g_string_append (o, "</g>\n");
  for (guint i = 0; i < p->bars->len; i++)
    {
      const Bar *b = &g_array_index (p->bars, Bar, i);
      text (o, LEFT + slot * (i + 0.5), TOP + ph + 16, "middle", NULL, b->label);
      g_autofree gchar *v = tick_label (b->value, p->time_axis, b->value >= 10 ? 1 : 0.01);
      text (o, LEFT + slot * (i + 0.5), TOP + ph - b->value / top * ph - 4, "middle",
            " class=\"value\"", v);
    }
  line (o, LEFT, TOP + ph, W - RIGHT, TOP + ph, "axis");
}

static void
render_series (const DatcSvgPlot *p, GString *o)
{
  double xmin = INFINITY, xmax = -INFINITY, ymax = 0;
  for (guint i = 0; i < p->series->len; i++)
    {
      const Series *s = p->series->pdata[i];
      for (guint k = 0; k < s->x->len; k++)
        {
          xmin = MIN (xmin, g_array_index (s->x, double, k));
          xmax = MAX (xmax, g_array_index (s->x, double, k));
          ymax = MAX (ymax, g_array_index (s->y, double, k));
        }
    }
  if (!isfinite (xmin))
    xmin = 0, xmax = 1;
  if (p->time_axis)
    xmin = MIN (xmin, 0);
  if (!(xmax > xmin))
    xmax = xmin + 1;
  double top = y_axis (o, ymax, FALSE);
  double pw = W - LEFT - RIGHT, ph = H - TOP - BOTTOM;
  double xstep = nice_step (xmax - xmin, 6, p->time_axis);
  double x0 = floor (xmin / xstep) * xstep, x1 = ceil (xmax / xstep) * xstep;
  for (double v = x0; v <= x1 + xstep / 2; v += xstep)
    {
      double x = LEFT + (v - x0) / (x1 - x0) * pw;
      line (o, x, TOP + ph, x, TOP + ph + 4, "axis");
      g_autofree gchar *l = tick_label (v, p->time_axis, xstep);
      text (o, x, TOP + ph + 16, "middle", NULL, l);
    }
  line (o, LEFT, TOP + ph, W - RIGHT, TOP + ph, "axis");
  line (o, LEFT, TOP, LEFT, TOP + ph, "axis");
  g_string_append (o, "<g class=\"data\">\n");
  for (guint i = 0; i < p->series->len; i++)
    {
      const Series *s = p->series->pdata[i];
      if (s->x->len == 0)
        continue;
      g_autofree gchar *name = g_markup_escape_text (s->name, -1);
      g_string_append_printf (o, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s d=\"",
                              s->color, s->dashed ? " stroke-dasharray=\"6 4\"" : "");
      double prev_y = 0;
      for (guint k = 0; k < s->x->len; k++)
        {
          double x = LEFT + (g_array_index (s->x, double, k) - x0) / (x1 - x0) * pw;
          double y = TOP + ph - g_array_index (s->y, double, k) / top * ph;
          if (k == 0)
            g_string_append_c (o, 'M');
          else
            {
              g_string_append (o, " L");
              if (s->step)
                {
                  num (o, x);
                  g_string_append_c (o, ' ');
                  num (o, prev_y);
                  g_string_append (o, " L");
                }
            }
          num (o, x);
          g_string_append_c (o, ' ');
          num (o, y);
          prev_y = y;
        }
      g_string_append_printf (o, "\"><title>%s</title></path>\n", name);
    }
  g_string_append (o, "</g>\n");
  /* Legend on the right. */
  for (guint i = 0; i < p->series->len; i++)
    {
      const Series *s = p->series->pdata[i];
      double y = TOP + 10 + 18 * i;
      g_string_append_printf (o, "<line x1=\"%d\" y1=\"", (int) (W - RIGHT + 12));
      num (o, y);
      g_string_append_printf (o, "\" x2=\"%d\" y2=\"", (int) (W - RIGHT + 36));
      num (o, y);
      g_string_append_printf (o, "\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", s->color,
                              s->dashed ? " stroke-dasharray=\"6 4\"" : "");
      text (o, W - RIGHT + 42, y + 4, "start", NULL, s->name);
    }
}

void
datc_svg_plot_render (const DatcSvgPlot *p, GString *o)
{
  frame (p, o);
  if (p->bars->len > 0)
    render_bars (p, o);
  else
    render_series (p, o);
  g_string_append (o, "</svg>\n");
}
