/* simulate.h: one Monte Carlo trial of a scenario under one policy.
 *
 * A trial is named by (seed, trial number).  Every random quantity in it is
 * drawn from a stream keyed by what it is about — the k-th wait of proxy c
 * of site i, the a-th run of task j, site i's outage — so every policy of
 * a trial sees the same waits, outages and task times (common random
 * numbers): policy differences within a trial are the policies' doing, and
 * a policy's result depends only on the seed, the trial and the scenario.
 *
 *   fluid, ect        closed forms (closedform.h) on the first starts
 *   pull, pull+rep    event-driven: one bag, every slot pulls
 *   static-cap/-proc  the same engine with one bag per site
 *   direct-common/-cap one batch job per task, a capped queue per site
 *   direct            what `datc run --mode direct` does: per site, one job
 *                     per task, at most slots x proxies queued or running,
 *                     each waiting its own wait from its submission, the
 *                     next one submitted once the master sees one end
 *   pull+mig          pull, where a proxy still queued after its site's
 *                     migrate_after moves to a site with room (max_proxies)
 *                     whose mean wait is lower, as the master moves it
 *
 * A simulation owns its workspace (slots, proxies, heap, bags), sized once
 * from the scenario: the event loop allocates nothing, and pull costs
 * O(N log P) per trial. */
#pragma once

#include <glib.h>

#include "scenario.h"

G_BEGIN_DECLS

typedef enum {
  DATC_POLICY_FLUID,
  DATC_POLICY_ECT,
  DATC_POLICY_PULL,
  DATC_POLICY_PULL_REP,
  DATC_POLICY_STATIC_CAP,
  DATC_POLICY_STATIC_PROC,
  DATC_POLICY_DIRECT_COMMON,
  DATC_POLICY_DIRECT_CAP,
  DATC_POLICY_DIRECT,
  DATC_POLICY_PULL_MIG,
  DATC_N_POLICIES
} DatcPolicy;

#define DATC_POLICY_ALL ((1u << DATC_N_POLICIES) - 1)

const char *datc_policy_name (DatcPolicy p);
/* "pull,ect,direct-cap" -> a bit mask of (1 << policy); "all" is every one. */
gboolean datc_policy_mask_parse (const char *list, guint *mask, GError **error);

/* What one trial of one policy gave: a plain value record. */
typedef struct {
  double turnaround;     /* seconds from submission to the last task's end */
  double charged;        /* slot-seconds held: proxies from start to exit, or jobs */
  double wasted;         /* charged minus the winning runs of the tasks */
  guint64 resubmissions; /* proxies (or jobs) submitted again after walltime or failure */
} DatcOutcome;

typedef struct DatcSimulation DatcSimulation;

/* sc must outlive the simulation and pass datc_scenario_validate. */
DatcSimulation *datc_simulation_new (const DatcScenario *sc, guint64 seed);
void datc_simulation_free (DatcSimulation *sim);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcSimulation, datc_simulation_free)

void datc_simulation_run (DatcSimulation *sim, guint64 trial, DatcPolicy policy, DatcOutcome *out);
/* The proxies in scenario order (site by site), and when each first starts
 * in this trial: its first wait, or the end of its site's outage if later. */
guint datc_simulation_n_proxies (const DatcSimulation *sim);
void datc_simulation_first_starts (DatcSimulation *sim, guint64 trial, double *starts);
/* The site of proxy c. */
guint datc_simulation_proxy_site (const DatcSimulation *sim, guint c);

G_END_DECLS
