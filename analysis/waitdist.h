/* waitdist.h: the queue wait of one proxy on one site, as a distribution
 * to sample from.  Written in scenario files as
 *   const X | exp MEAN | lognormal MEDIAN SIGMA | lomax SCALE ALPHA | empirical FILE
 * where X, MEAN, MEDIAN and SCALE are times (s, m, h suffixes) and FILE
 * holds one observed wait in seconds per line (# comments allowed). */
#pragma once

#include <glib.h>

#include "rng.h"

G_BEGIN_DECLS

/* Observations read from one waits file, at most. */
#define DATC_WAIT_MAX_SAMPLES 10000000u

typedef enum {
  DATC_WAIT_CONST,
  DATC_WAIT_EXP,
  DATC_WAIT_LOGNORMAL,
  DATC_WAIT_LOMAX,
  DATC_WAIT_EMPIRICAL,
} DatcWaitKind;

typedef struct DatcWaitDist DatcWaitDist;

/* Parses the text after "wait =".  Relative FILEs are taken from base_dir
 * (NULL: the working directory).  Errors say what is wrong; errors inside
 * FILE are "FILE:LINE: ...". */
DatcWaitDist *datc_wait_dist_parse (const char *text, const char *base_dir, GError **error);
DatcWaitDist *datc_wait_dist_new_const (double seconds);
DatcWaitDist *datc_wait_dist_new_exp (double mean);
/* Bootstraps from observed waits (copied, then sorted); n > 0. */
DatcWaitDist *datc_wait_dist_new_empirical (const double *waits, gsize n);
/* Reference counted: scenario copies share their sites' waits. */
DatcWaitDist *datc_wait_dist_ref (DatcWaitDist *d);
void datc_wait_dist_unref (DatcWaitDist *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcWaitDist, datc_wait_dist_unref)

/* Reads a waits file: one non-negative time per line.  (transfer full) */
GArray *datc_waits_load_file (const char *path, GError **error);

/* One site's queue waits, in seconds, in the order the trace has them. */
typedef struct {
  gchar *site;
  GArray *waits; /* double */
} DatcSiteWaits;

void datc_site_waits_free (DatcSiteWaits *w);

/* TRUE when `path` is a campaign's trace rather than a file of times: its
 * first line that is not blank or a # comment is a JSON object. */
gboolean datc_waits_file_is_trace (const char *path);
/* The queue waits of a campaign, per site (sites in the order their
 * first proxy was submitted), from its trace.jsonl: for each proxy that
 * started, the first sign it ran (its agent's agent_connected, or the
 * `started` of its proxy_started) less its proxy_submitted time, else the
 * proxy_started's wait_us.  A last line without its newline is still being
 * written and is left for later; other unreadable lines of those events
 * are skipped and counted in *skipped.  Fails when no proxy started.
 * (transfer full: DatcSiteWaits) */
GPtrArray *datc_waits_load_trace (const char *path, guint *skipped, GError **error);

DatcWaitKind datc_wait_dist_kind (const DatcWaitDist *d);
double datc_wait_dist_sample (const DatcWaitDist *d, DatcRng *rng);
/* The mean (INFINITY for a lomax with alpha <= 1). */
double datc_wait_dist_mean (const DatcWaitDist *d);
/* TRUE when every sample is the same value. */
gboolean datc_wait_dist_is_constant (const DatcWaitDist *d);
/* Empirical only: the sorted observations (transfer none), else NULL. */
const double *datc_wait_dist_samples (const DatcWaitDist *d, gsize *n);
/* Back as written, e.g. "lognormal 1800 1" (times in seconds). */
gchar *datc_wait_dist_describe (const DatcWaitDist *d);

G_END_DECLS
