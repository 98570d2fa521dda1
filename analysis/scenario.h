/* scenario.h: what `datc analyze predict` is asked about.  A GKeyFile with
 * one [campaign] group and one [site NAME] group per site:
 *
 *   [campaign]
 *   tasks = 1000
 *   [site A]
 *   slots_per_proxy = 64
 *   proxies = 2              # default 1
 *   task_time = 30m          # mean time of one task on one slot
 *   task_cv = 0.1            # lognormal spread of task times, default 0
 *   wait = lognormal 30m 1   # queue wait of a proxy, default const 0
 *   walltime = 2h            # optional
 *   fail_rate = 0.05         # optional, proxy failures per proxy-hour
 *   outage = 0.2 24h         # optional: probability and length
 *   poll_interval = 5s       # direct: the site's poll interval (fork: 1s); default 5s
 *   job_overhead = 0         # direct: from a job seen ended to the next submit; default 0
 *   max_calls_per_minute = 12 # direct: scheduler calls in any minute, 0 (default): no limit
 *   max_proxies = 4          # pull+mig: room for proxies moved here; default `proxies`
 *   migrate_after = 30s      # pull+mig: a proxy queued this long moves; default 0: never
 *
 * Times take s, m, h suffixes; plain numbers are seconds.  Text after " #"
 * is a comment.  Every error is "FILE:LINE: what is wrong". */
#pragma once

#include <glib.h>

#include "waitdist.h"

G_BEGIN_DECLS

#define DATC_SCENARIO_MAX_BYTES (1u << 20)
#define DATC_SCENARIO_MAX_TASKS 100000000u
#define DATC_SCENARIO_MAX_SITES 256u
#define DATC_SCENARIO_MAX_SLOTS_PER_PROXY 100000u
#define DATC_SCENARIO_MAX_PROXIES 100000u
/* Total slots and total proxies over all sites. */
#define DATC_SCENARIO_MAX_TOTAL_SLOTS 1000000u
#define DATC_SCENARIO_MAX_TOTAL_PROXIES 100000u

/* One site: a plain value record owned by its scenario. */
typedef struct {
  gchar *name;
  guint line; /* of the [site NAME] header; 0 when built in code */
  guint slots_per_proxy;
  guint proxies;
  double task_time;   /* mean seconds per task per slot, > 0 */
  double task_cv;     /* 0: every task takes exactly task_time */
  DatcWaitDist *wait; /* owned (a reference) */
  double walltime;    /* seconds; 0: none */
  double fail_rate;   /* failures per running proxy-hour */
  double outage_probability;
  double outage_length; /* seconds from time 0 */
  /* The `direct` policy (datc --mode direct): the site's poll interval
   * (0: a job's end is seen at once), what a job takes past being seen
   * ended before the next submit in its place, and the site's budget of
   * scheduler calls (0: none). */
  double poll_interval;
  double job_overhead;
  guint calls_per_minute;
  /* The `pull+mig` policy (SITES.ini's migrate_after): a proxy queued
   * migrate_after seconds (0: never) moves to a site with room, one whose
   * max_proxies exceeds its proxies (at least `proxies`; a site may have
   * proxies = 0 and only room). */
  guint max_proxies;
  double migrate_after;
} DatcScenarioSite;

/* The master's default poll interval of a batch site (fork sites: 1 s). */
#define DATC_SCENARIO_POLL_INTERVAL 5.0
#define DATC_SCENARIO_MAX_CALLS_PER_MINUTE 100000u

typedef struct DatcScenario DatcScenario;

DatcScenario *datc_scenario_load (const char *path, GError **error);
DatcScenario *datc_scenario_new (guint64 tasks);
void datc_scenario_free (DatcScenario *sc);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcScenario, datc_scenario_free)

/* Adds a site (wait: transfer full) and returns it for further settings. */
DatcScenarioSite *datc_scenario_add_site (DatcScenario *sc, const char *name, guint slots_per_proxy,
                                          guint proxies, double task_time, double task_cv,
                                          DatcWaitDist *wait);
/* A copy without site `skip` (G_MAXUINT: none); waits are shared. */
DatcScenario *datc_scenario_copy_without (const DatcScenario *sc, guint skip);
/* Replaces site i's wait (transfer full). */
void datc_scenario_set_site_wait (DatcScenario *sc, guint i, DatcWaitDist *wait);

const char *datc_scenario_path (const DatcScenario *sc); /* NULL when built in code */
guint64 datc_scenario_tasks (const DatcScenario *sc);
void datc_scenario_set_tasks (DatcScenario *sc, guint64 tasks);
guint datc_scenario_n_sites (const DatcScenario *sc);
const DatcScenarioSite *datc_scenario_site (const DatcScenario *sc, guint i);
DatcScenarioSite *datc_scenario_site_mut (DatcScenario *sc, guint i);
guint64 datc_scenario_total_slots (const DatcScenario *sc);
guint datc_scenario_total_proxies (const DatcScenario *sc);
/* TRUE when nothing in it is random: one trial gives the exact answer. */
gboolean datc_scenario_is_deterministic (const DatcScenario *sc);
/* Checks the limits and the relations between keys (walltime >= task_time). */
gboolean datc_scenario_validate (const DatcScenario *sc, GError **error);

G_END_DECLS
