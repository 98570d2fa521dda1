/* prediction.h: `datc analyze predict`: many seeded trials of a scenario
 * under each asked policy, summed up as mean (with its standard error),
 * median, p95 and slot-hours; which proxies pay off; and, for sites whose
 * waits are empirical, the QBETS bound on their waits and the pull
 * turnaround if every wait hit that bound.
 *
 * Trial t of every policy replays the same draws (simulate.h), so the
 * numbers of two policies differ only by what the policies do, and the
 * whole output is a function of (scenario, trials, seed). */
#pragma once

#include <glib.h>

#include "qbets.h"
#include "scenario.h"
#include "simulate.h"

G_BEGIN_DECLS

#define DATC_PREDICT_MAX_TRIALS 10000000u
/* The wait bound reported for empirical waits. */
#define DATC_PREDICT_BOUND_QUANTILE 0.95
#define DATC_PREDICT_BOUND_CONFIDENCE 0.95
/* direct-* keep every waiting job in memory (16 bytes each): above this
 * many tasks they are left out, and the output says so. */
#define DATC_PREDICT_MAX_DIRECT_TASKS 20000000u

/* One policy over all trials: a plain value record, times in seconds. */
typedef struct {
  double mean, se, median, p95, min, max;
  double slot_hours, wasted_slot_hours; /* means per trial */
  double resubmissions;                 /* mean per trial */
} DatcPolicyStats;

typedef struct DatcPrediction DatcPrediction;

/* sc must outlive the prediction.  A deterministic scenario runs one trial
 * whatever `trials` says: it is exact. */
DatcPrediction *datc_prediction_run (const DatcScenario *sc, guint64 trials, guint64 seed,
                                     guint policy_mask, GError **error);
void datc_prediction_free (DatcPrediction *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcPrediction, datc_prediction_free)

guint64 datc_prediction_trials (const DatcPrediction *p);
/* Policies asked for but left out (DATC_PREDICT_MAX_DIRECT_TASKS), as a mask. */
guint datc_prediction_skipped (const DatcPrediction *p);
gboolean datc_prediction_deterministic (const DatcPrediction *p);
gboolean datc_prediction_has (const DatcPrediction *p, DatcPolicy policy);
/* NULL for a policy that was not asked for. */
const DatcPolicyStats *datc_prediction_stats (const DatcPrediction *p, DatcPolicy policy);
/* Turnaround of each trial, in trial order (transfer none). */
const double *datc_prediction_turnarounds (const DatcPrediction *p, DatcPolicy policy);
/* The policy proxies are judged against: pull if asked, else the first asked. */
DatcPolicy datc_prediction_reference (const DatcPrediction *p);
/* How many of site i's proxies are worth submitting: those whose mean
 * start (as the k-th to start at that site) plus one task falls before
 * the reference policy's mean turnaround. */
guint datc_prediction_pay_off (const DatcPrediction *p, guint site);
/* Site i's wait bound, NULL unless its waits are empirical. */
const DatcWaitBound *datc_prediction_wait_bound (const DatcPrediction *p, guint site);
/* Mean pull turnaround with every bounded empirical wait at its bound;
 * NAN when no site has one. */
double datc_prediction_pull_at_bounds (const DatcPrediction *p);

/* {"tasks": N, "trials": M, "seed": S, "deterministic": b,
 *  "policies": {"pull": {"mean": s, "median": s, "p95": s, "slot_hours": h, ...}, ...},
 *  "sites": {"A": {"proxies": n, "pay_off": k, "wait_bound": {...}}, ...},
 *  "skipped": ["direct-cap", ...] only when some were left out} */
gchar *datc_prediction_to_json (const DatcPrediction *p);
gchar *datc_prediction_to_text (const DatcPrediction *p);

G_END_DECLS
