/* tracesummary.h: `datc analyze trace` output, text or JSON, from a
 * campaign log and (if any) its model. */
#pragma once

#include <glib.h>

#include "campaignlog.h"
#include "campaignmodel.h"

G_BEGIN_DECLS

/* {"dir": D, "tasks": N, "done": n, "failed": n, "finished": b, "sessions": k,
 *  "turnaround": s, "sites": {"NAME": {"proxies_submitted": n, "proxies_started": n,
 *  "proxies_cancelled": n, "waits": {"count", "min", "median", "max", "mean"},
 *  "tasks_done": n, "tasks_failed": n, "task_time_mean": s, "task_time_cv": x,
 *  "slot_hours": h, "busy_slot_hours": h, "utilisation": x,
 *  "scheduler_calls": {"total", "submit", "poll", "cancel"},
 *  "scheduler_calls_per_1000_tasks": x (null before a task finished there)}, ...},
 *  "model": {...} or null}.  model may be NULL. */
gchar *datc_trace_summary_to_json (const DatcCampaignLog *log, const DatcCampaignModel *model);
gchar *datc_trace_summary_to_text (const DatcCampaignLog *log, const DatcCampaignModel *model);

/* A site's scheduler calls per 1,000 tasks finished there (done or
 * failed); NAN before one has. */
double datc_trace_summary_calls_per_1000 (const DatcSiteLog *site);

/* Median of a GArray of doubles (sorted in place); NAN when empty. */
double datc_trace_summary_median (GArray *values);

G_END_DECLS
