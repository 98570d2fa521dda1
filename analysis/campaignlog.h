/* campaignlog.h: what a campaign directory says happened, read from
 * DIR/trace.jsonl (proxy and agent events) and DIR/results.jsonl (one line
 * per finished task), for `datc analyze trace` and `datc report`.
 *
 * Works on a running or interrupted campaign as well as a finished one: a
 * last line without its newline is being written and is left for later;
 * any other unreadable line is skipped with a FILE:LINE warning; unknown
 * events are ignored, so newer masters stay readable. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Scheduler calls one site_command event may count, at most. */
#define DATC_LOG_MAX_CALLS_PER_EVENT 1000000u
/* Lines longer than this are skipped, not read into memory. */
#define DATC_LOG_MAX_LINE (1u << 20)
/* Results and proxies kept, at most. */
#define DATC_LOG_MAX_RESULTS 50000000u
#define DATC_LOG_MAX_PROXIES 1000000u

/* One proxy: a plain value record, times in µs since the epoch (0: not seen). */
typedef struct {
  gchar *site, *proxy, *job;
  guint site_index;
  gint64 submitted, started, ended;
  gboolean cancelled;
  guint slots;
  double walltime;   /* seconds; 0: none */
  guint agents_live; /* agents connected and not yet gone */
} DatcProxyLog;

/* One site: a plain value record.  Waits are start - submitted of its
 * proxies that started, in seconds, in the order they started.  Calls
 * are the scheduler calls the master's budget counted (site_command
 * events, summed over sessions): a submit counts 2, itself and the
 * lookup that may check it; `calls` also holds kinds this reader does
 * not know. */
typedef struct {
  gchar *name;
  guint submitted, started, cancelled;
  GArray *waits; /* double */
  guint64 done, failed;
  guint64 calls, calls_submit, calls_poll, calls_cancel;
  double busy_seconds; /* summed run time of its tasks */
  double held_seconds; /* summed slots x (end - start) of its proxies */
  double task_mean, task_cv;
} DatcSiteLog;

/* One finished task, as the plots need it. */
typedef struct {
  gint64 started, finished;
  guint site_index;
  gboolean ok;
} DatcResultPoint;

typedef struct DatcCampaignLog DatcCampaignLog;

/* Fails (DATC_ANALYSIS_ERROR_IO) only when DIR holds neither file. */
DatcCampaignLog *datc_campaign_log_load (const char *dir, GError **error);
void datc_campaign_log_free (DatcCampaignLog *log);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcCampaignLog, datc_campaign_log_free)

const char *datc_campaign_log_dir (const DatcCampaignLog *log);
guint datc_campaign_log_n_warnings (const DatcCampaignLog *log);
const char *datc_campaign_log_warning (const DatcCampaignLog *log, guint i);

/* Tasks in the campaign (its last campaign_started, else results seen). */
guint64 datc_campaign_log_tasks (const DatcCampaignLog *log);
guint64 datc_campaign_log_done (const DatcCampaignLog *log);
guint64 datc_campaign_log_failed (const DatcCampaignLog *log);
/* Why tasks ended (results.jsonl's `class`, or from the status for lines
 * without one): the classes seen, most frequent first (transfer container:
 * the names belong to the log), their counts appended to `counts`
 * (guint64). */
GPtrArray *datc_campaign_log_classes (const DatcCampaignLog *log, GArray *counts);
gboolean datc_campaign_log_finished (const DatcCampaignLog *log);
/* The mode that ran ("pull", "static", "direct"): the last session's
 * campaign_started, else DIR/campaign.json; NULL when neither says. */
const char *datc_campaign_log_mode (const DatcCampaignLog *log);
/* The last session's end-game copies at most (1: none), 0 when its trace
 * does not say (written since campaign_started carries max_replicas). */
guint datc_campaign_log_max_replicas (const DatcCampaignLog *log);
guint datc_campaign_log_sessions (const DatcCampaignLog *log);
/* First campaign start, last session's start, and the last thing seen. */
gint64 datc_campaign_log_start (const DatcCampaignLog *log);
gint64 datc_campaign_log_last_session_start (const DatcCampaignLog *log);
gint64 datc_campaign_log_end (const DatcCampaignLog *log);

guint datc_campaign_log_n_sites (const DatcCampaignLog *log);
const DatcSiteLog *datc_campaign_log_site (const DatcCampaignLog *log, guint i);
guint datc_campaign_log_n_proxies (const DatcCampaignLog *log);
const DatcProxyLog *datc_campaign_log_proxy (const DatcCampaignLog *log, guint i);
/* Finished tasks sorted by finish time. */
guint64 datc_campaign_log_n_results (const DatcCampaignLog *log);
const DatcResultPoint *datc_campaign_log_results (const DatcCampaignLog *log);

G_END_DECLS
