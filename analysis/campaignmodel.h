/* campaignmodel.h: what the model would have predicted for a campaign
 * that ran, side by side with what happened.  Each proxy that started
 * becomes a proxy of the model with its observed start as a fixed wait,
 * its slots and walltime, and its site's observed mean task time and
 * spread; the model then runs fluid, ect, pull and pull+rep.  A direct-mode
 * campaign (the mode is in the trace) is modelled as such instead: per
 * site, its jobs in the places it had at once, each waiting a wait drawn
 * from the observed ones (policy `direct`), beside fluid, ect and pull on
 * the same slots.  A resumed
 * campaign is modelled from its last session's start, over the tasks that
 * finished in it. */
#pragma once

#include <glib.h>

#include "campaignlog.h"
#include "prediction.h"

G_BEGIN_DECLS

#define DATC_CAMPAIGN_MODEL_POLICIES                                                               \
  ((1u << DATC_POLICY_FLUID) | (1u << DATC_POLICY_ECT) | (1u << DATC_POLICY_PULL)                  \
   | (1u << DATC_POLICY_PULL_REP))

/* A direct-mode campaign: its own model, and the same slots pulling. */
#define DATC_CAMPAIGN_MODEL_POLICIES_DIRECT                                                        \
  ((1u << DATC_POLICY_FLUID) | (1u << DATC_POLICY_ECT) | (1u << DATC_POLICY_PULL)                  \
   | (1u << DATC_POLICY_DIRECT))

typedef struct DatcCampaignModel DatcCampaignModel;

/* NULL when there is nothing to model (no task finished, or no proxy started). */
DatcCampaignModel *datc_campaign_model_run (const DatcCampaignLog *log);
void datc_campaign_model_free (DatcCampaignModel *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcCampaignModel, datc_campaign_model_free)

/* The mode that ran, as the trace says ("pull", "static", "direct"), or NULL. */
const char *datc_campaign_model_mode (const DatcCampaignModel *m);
/* The policy that models that mode (pull, direct; pull when the trace does
 * not say), or -1 (static). */
int datc_campaign_model_matches (const DatcCampaignModel *m);
/* One line: what was modelled and how. (transfer full) */
gchar *datc_campaign_model_describe (const DatcCampaignModel *m);
/* "campaign" or "last session". */
const char *datc_campaign_model_basis (const DatcCampaignModel *m);
guint64 datc_campaign_model_tasks (const DatcCampaignModel *m);
guint datc_campaign_model_proxies (const DatcCampaignModel *m);
/* Seconds from the basis start to the last task's end. */
double datc_campaign_model_actual (const DatcCampaignModel *m);
const DatcPrediction *datc_campaign_model_prediction (const DatcCampaignModel *m);

/* The "model" member of `datc analyze trace --json`. */
void datc_campaign_model_append_json (const DatcCampaignModel *m, GString *out);
void datc_campaign_model_append_text (const DatcCampaignModel *m, GString *out);

G_END_DECLS
