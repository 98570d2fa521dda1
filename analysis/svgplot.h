/* svgplot.h: small inline SVG charts for the report: step or line series
 * over a numeric (or time) x axis, or labelled bars.  The output needs no
 * script, font or file from anywhere: axes, ticks and legend are drawn
 * into the same <svg>, and every mark of the data sits in <g class="data">
 * so a reader (or a test) can tell an empty plot from a drawn one. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct DatcSvgPlot DatcSvgPlot;

DatcSvgPlot *datc_svg_plot_new (const char *id, const char *title, const char *x_label,
                                const char *y_label);
void datc_svg_plot_free (DatcSvgPlot *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcSvgPlot, datc_svg_plot_free)

/* x values are seconds: ticks at round durations, labelled "2m00s". */
void datc_svg_plot_set_time_axis (DatcSvgPlot *p, gboolean time);
/* A series of n points, x ascending.  step: hold each y until the next x. */
void datc_svg_plot_add_series (DatcSvgPlot *p, const char *name, const char *color, gboolean dashed,
                               gboolean step, const double *x, const double *y, gsize n);
/* One bar; a plot with bars draws no series. */
void datc_svg_plot_add_bar (DatcSvgPlot *p, const char *label, const char *color, double value);
void datc_svg_plot_render (const DatcSvgPlot *p, GString *out);

/* A color for series i: a fixed palette that prints well. */
const char *datc_svg_plot_color (guint i);

G_END_DECLS
