/* report.h: `datc report`: one self-contained HTML file explaining a
 * campaign — its sites, proxies per site over time (pending and running),
 * tasks completed over time, throughput per site, and the model's
 * turnaround next to the actual one.  Everything is inline (CSS, SVG, a
 * few lines of script that only check the plots drew): the file opens
 * offline and fetches nothing. */
#pragma once

#include <glib.h>

#include "campaignlog.h"
#include "campaignmodel.h"

G_BEGIN_DECLS

/* Points per plotted series, at most: longer series are sampled. */
#define DATC_REPORT_MAX_POINTS 1000u

/* model may be NULL.  (transfer full) */
gchar *datc_report_render (const DatcCampaignLog *log, const DatcCampaignModel *model);

G_END_DECLS
