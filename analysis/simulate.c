/* simulate.c: the policies of simulate.h.
 *
 * The pull family is one event loop over an indexed heap whose entities are
 * the P slots (a slot's event: its run ends) followed by the C proxies
 * (a proxy's event: it starts, or its walltime or a failure ends it).
 * Slots come first so that a run ending exactly at a proxy's walltime
 * counts as done.  A bag is a cursor over fresh task ids plus a stack of
 * returned tasks; a returned task was running, so a bag's stack, its idle
 * slots and its running tasks each fit in its share of slots, and all of
 * that is carved once from arrays of P.
 *
 * A task's run time is drawn from a key (task id, run number), not from a
 * stream, so the first run of task j takes the same time under every
 * policy whichever slot picks it up, while a copy or a retry draws anew. */
#include "simulate.h"

#include <math.h>
#include <string.h>

#include "analysis-error.h"
#include "closedform.h"
#include "eventheap.h"
#include "rng.h"

enum {
  TAG_WAIT = 1,
  TAG_FAIL,
  TAG_OUTAGE,
  TAG_TASK,
  TAG_DIRECT_WAIT,
  TAG_DIRECT_FAIL,
  TAG_DIRECT_MODE_WAIT,
  TAG_DIRECT_MODE_FAIL,
};

static const char *const policy_names[DATC_N_POLICIES] = {
  [DATC_POLICY_FLUID] = "fluid",
  [DATC_POLICY_ECT] = "ect",
  [DATC_POLICY_PULL] = "pull",
  [DATC_POLICY_PULL_REP] = "pull+rep",
  [DATC_POLICY_STATIC_CAP] = "static-cap",
  [DATC_POLICY_STATIC_PROC] = "static-proc",
  [DATC_POLICY_DIRECT_COMMON] = "direct-common",
  [DATC_POLICY_DIRECT_CAP] = "direct-cap",
  [DATC_POLICY_DIRECT] = "direct",
  [DATC_POLICY_PULL_MIG] = "pull+mig",
};

const char *
datc_policy_name (DatcPolicy p)
{
  g_return_val_if_fail (p < DATC_N_POLICIES, "?");
  return policy_names[p];
}

gboolean
datc_policy_mask_parse (const char *list, guint *mask, GError **error)
{
  g_auto (GStrv) names = g_strsplit (list, ",", -1);
  guint m = 0;
  for (guint i = 0; names[i] != NULL; i++)
    {
      const char *n = g_strstrip (names[i]);
      if (g_str_equal (n, "all"))
        {
          m |= DATC_POLICY_ALL;
          continue;
        }
      guint p;
      for (p = 0; p < DATC_N_POLICIES; p++)
        if (g_str_equal (n, policy_names[p]))
          break;
      if (p == DATC_N_POLICIES)
        {
          g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT,
                       "unknown policy '%s': expected fluid, ect, pull, pull+rep, static-cap, "
                       "static-proc, direct-common, direct-cap, direct, pull+mig or all",
                       n);
          return FALSE;
        }
      m |= 1u << p;
    }
  if (m == 0)
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT, "no policy named");
      return FALSE;
    }
  *mask = m;
  return TRUE;
}

/* ---- the workspace ---- */

typedef struct {
  double t;         /* mean task time */
  double sigma;     /* log-sd of task times; 0: exactly t */
  double mu;        /* ln t - sigma^2 / 2 */
  double walltime;  /* INFINITY: none */
  double fail_mean; /* mean running time between failures; INFINITY: none */
  double outage_p, outage_len;
  double migrate_after; /* pull+mig: a proxy queued this long moves; 0: never */
  guint room;           /* pull+mig: proxies it may take beyond its own */
  double *cond;         /* E[X | X > u t] / t at u = k / COND_STEPS, for sigma > 0 */
  guint slots;          /* per proxy */
  guint first_proxy, n_proxies, first_slot;
  const DatcWaitDist *wait;
} Site;

typedef enum { PX_QUEUED, PX_RUNNING, PX_GONE } ProxyState;

/* `site` is where the proxy was submitted first (its slots are that
 * site's slots_per_proxy); `at` is where it is now: pull+mig moves a
 * queued proxy, slots and all, and the pull engine reads `at`. */
typedef struct {
  guint site, at, group, first_slot;
  ProxyState state;
  guint busy;
  double start, end;
  DatcRng wait_rng, fail_rng;
} Proxy;

typedef enum {
  SL_OFF,  /* its proxy is not running */
  SL_IDLE, /* bag empty: waits in its bag's idle list */
  SL_RUNNING,
  SL_DRAINED, /* nothing more fits before its proxy's walltime */
} SlotState;

typedef struct {
  guint proxy;
  SlotState state;
  guint idle_pos;
  gint rec;       /* running record, -1 */
  gint next_exec; /* next slot running the same record, -1 */
  double start, runtime;
} Slot;

/* A task that is running somewhere, with one or more copies. */
typedef struct {
  guint64 task;
  guint32 next_draw; /* run number of its next run: the key of its time */
  guint nexec;
  gint first_exec;
  guint group, active_pos;
} Record;

/* A task returned to the bag. */
typedef struct {
  guint64 task;
  guint32 draw;
} Pending;

typedef struct {
  guint64 next_fresh, end_fresh, remaining;
  Pending *requeue;
  guint nrequeue;
  guint *idle, nidle;
  guint *active, nactive;
  guint first_proxy, n_proxies;
} Bag;

/* direct: one batch job waiting for its turn */
typedef struct {
  double ready;
  guint64 task;
  guint32 draw;
} Job;

struct DatcSimulation {
  const DatcScenario *sc;
  guint64 seed, N;
  guint n_sites, n_proxies, n_slots;
  Site *sites;
  Proxy *proxies;
  Slot *slots;
  Record *recs;
  guint *free_recs, nfree_recs;
  Bag *bags;
  guint n_bags;
  Pending *requeue_ws;
  guint *idle_ws, *active_ws, *scratch;
  DatcEventHeap *heap;
  DatcCapacity *caps;
  double *outage_end;
  guint64 *share_cap, *share_proc;
  Job *jobs;       /* direct, allocated on first use: max share */
  double *servers; /* direct, min(max share, max slots per site) */
  guint64 max_share;

  /* the run in progress */
  gboolean rep, cancel_when_empty;
  guint *room_left; /* pull+mig: per site, this trial */
  guint64 remaining, resubmissions;
  double last_done, charged, useful;
  guint64 task_key;
};

static void
shares_split (const DatcSimulation *sim, gboolean by_capacity, guint64 *share)
{
  /* Largest remainder: floor of each exact share, then one more to the
   * largest fractions (lowest index first on ties). */
  double total = 0;
  for (guint i = 0; i < sim->n_sites; i++)
    total += by_capacity ? sim->sites[i].slots * (double) sim->sites[i].n_proxies / sim->sites[i].t
                         : sim->sites[i].slots * (double) sim->sites[i].n_proxies;
  g_autofree double *frac = g_new (double, sim->n_sites);
  guint64 given = 0;
  for (guint i = 0; i < sim->n_sites; i++)
    {
      const Site *s = &sim->sites[i];
      double w = by_capacity ? s->slots * (double) s->n_proxies / s->t
                             : s->slots * (double) s->n_proxies;
      double exact = (double) sim->N * w / total;
      share[i] = MIN ((guint64) floor (exact), sim->N - given);
      frac[i] = exact - (double) share[i];
      given += share[i];
    }
  while (given < sim->N)
    {
      guint best = 0;
      for (guint i = 1; i < sim->n_sites; i++)
        if (frac[i] > frac[best])
          best = i;
      share[best]++;
      frac[best] = -1;
      given++;
    }
}

/* The mean of a lognormal task time given that it has lasted a seconds:
 * E[X | X > a] = t Phi(sigma - d) / Phi(-d), d = (ln a - mu) / sigma. */
static double
conditional_mean (const Site *s, double a)
{
  if (a <= 0)
    return s->t;
  double d = (log (a) - s->mu) / s->sigma;
  double survive = 0.5 * erfc (d / G_SQRT2);
  if (survive < 1e-300)
    return a + s->t;
  return MAX (a, s->t * (0.5 * erfc ((d - s->sigma) / G_SQRT2)) / survive);
}

/* Tabulated over a / t, because pull+rep asks for it for every running
 * task each time a slot frees up once the bag is dry. */
#define COND_STEPS 64
#define COND_POINTS (8 * COND_STEPS + 1)

static void
site_tabulate (Site *s)
{
  s->cond = g_new (double, COND_POINTS);
  for (guint k = 0; k < COND_POINTS; k++)
    s->cond[k] = conditional_mean (s, s->t * k / COND_STEPS) / s->t;
}

/* When a run that began at `start` is expected to end, seen at `now`. */
static double
expected_end (const Site *s, double start, double now)
{
  double a = now - start;
  if (s->sigma == 0 || a <= 0)
    return start + s->t;
  double u = a / s->t * COND_STEPS;
  if (u >= COND_POINTS - 1)
    return start + conditional_mean (s, a);
  guint k = (guint) u;
  double f = u - k;
  return start + s->t * (s->cond[k] + f * (s->cond[k + 1] - s->cond[k]));
}

DatcSimulation *
datc_simulation_new (const DatcScenario *sc, guint64 seed)
{
  DatcSimulation *sim = g_new0 (DatcSimulation, 1);
  sim->sc = sc;
  sim->seed = seed;
  sim->N = datc_scenario_tasks (sc);
  sim->n_sites = datc_scenario_n_sites (sc);
  sim->n_proxies = datc_scenario_total_proxies (sc);
  sim->n_slots = (guint) datc_scenario_total_slots (sc);
  sim->sites = g_new0 (Site, sim->n_sites);
  sim->proxies = g_new0 (Proxy, sim->n_proxies);
  sim->slots = g_new0 (Slot, sim->n_slots);
  sim->recs = g_new0 (Record, sim->n_slots);
  sim->free_recs = g_new (guint, sim->n_slots);
  sim->bags = g_new0 (Bag, sim->n_sites);
  sim->requeue_ws = g_new (Pending, sim->n_slots);
  sim->idle_ws = g_new (guint, sim->n_slots);
  sim->active_ws = g_new (guint, sim->n_slots);
  sim->scratch = g_new (guint, sim->n_slots);
  sim->heap = datc_event_heap_new (sim->n_slots + sim->n_proxies);
  sim->caps = g_new (DatcCapacity, sim->n_proxies);
  sim->outage_end = g_new0 (double, sim->n_sites);
  sim->share_cap = g_new0 (guint64, sim->n_sites);
  sim->share_proc = g_new0 (guint64, sim->n_sites);
  sim->room_left = g_new0 (guint, sim->n_sites);

  guint c = 0, k = 0;
  for (guint i = 0; i < sim->n_sites; i++)
    {
      const DatcScenarioSite *spec = datc_scenario_site (sc, i);
      Site *s = &sim->sites[i];
      s->t = spec->task_time;
      s->sigma = spec->task_cv > 0 ? sqrt (log1p (spec->task_cv * spec->task_cv)) : 0;
      s->mu = log (s->t) - s->sigma * s->sigma / 2;
      s->walltime = spec->walltime > 0 ? spec->walltime : INFINITY;
      s->fail_mean = spec->fail_rate > 0 ? 3600.0 / spec->fail_rate : INFINITY;
      s->outage_p = spec->outage_probability;
      s->outage_len = spec->outage_length;
      s->migrate_after = spec->migrate_after;
      s->room = spec->max_proxies > spec->proxies ? spec->max_proxies - spec->proxies : 0;
      s->slots = spec->slots_per_proxy;
      s->first_proxy = c;
      s->n_proxies = spec->proxies;
      s->first_slot = k;
      s->wait = spec->wait;
      if (s->sigma > 0)
        site_tabulate (s);
      for (guint j = 0; j < spec->proxies; j++, c++)
        {
          sim->proxies[c].site = i;
          sim->proxies[c].first_slot = k;
          for (guint m = 0; m < s->slots; m++, k++)
            sim->slots[k].proxy = c;
        }
    }
  shares_split (sim, TRUE, sim->share_cap);
  shares_split (sim, FALSE, sim->share_proc);
  return sim;
}

void
datc_simulation_free (DatcSimulation *sim)
{
  if (sim == NULL)
    return;
  for (guint i = 0; i < sim->n_sites; i++)
    g_free (sim->sites[i].cond);
  g_free (sim->sites);
  g_free (sim->proxies);
  g_free (sim->slots);
  g_free (sim->recs);
  g_free (sim->free_recs);
  g_free (sim->bags);
  g_free (sim->requeue_ws);
  g_free (sim->idle_ws);
  g_free (sim->active_ws);
  g_free (sim->scratch);
  datc_event_heap_free (sim->heap);
  g_free (sim->caps);
  g_free (sim->outage_end);
  g_free (sim->share_cap);
  g_free (sim->share_proc);
  g_free (sim->room_left);
  g_free (sim->jobs);
  g_free (sim->servers);
  g_free (sim);
}

guint
datc_simulation_n_proxies (const DatcSimulation *sim)
{
  return sim->n_proxies;
}

guint
datc_simulation_proxy_site (const DatcSimulation *sim, guint c)
{
  g_return_val_if_fail (c < sim->n_proxies, 0);
  return sim->proxies[c].site;
}

/* ---- keys shared by all policies of a trial ---- */

static guint64
trial_key (const DatcSimulation *sim, guint64 trial)
{
  return datc_rng_key (sim->seed, trial);
}

static void
draw_outages (DatcSimulation *sim, guint64 base)
{
  guint64 k = datc_rng_key (base, TAG_OUTAGE);
  for (guint i = 0; i < sim->n_sites; i++)
    {
      const Site *s = &sim->sites[i];
      gboolean down = s->outage_p > 0 && s->outage_len > 0
                      && datc_rng_uniform_at (datc_rng_key (k, i)) < s->outage_p;
      sim->outage_end[i] = down ? s->outage_len : 0;
    }
}

/* Proxy c's streams: its successive queue waits and failure times. */
static void
proxy_streams (const DatcSimulation *sim, guint64 base, guint c, DatcRng *wait, DatcRng *fail)
{
  guint site = sim->proxies[c].site, j = c - sim->sites[site].first_proxy;
  datc_rng_init (wait, datc_rng_key (datc_rng_key (datc_rng_key (base, TAG_WAIT), site), j));
  datc_rng_init (fail, datc_rng_key (datc_rng_key (datc_rng_key (base, TAG_FAIL), site), j));
}

static double
start_after (const DatcSimulation *sim, guint site, double submitted, DatcRng *wait)
{
  double w = datc_wait_dist_sample (sim->sites[site].wait, wait);
  return MAX (submitted + w, sim->outage_end[site]);
}

void
datc_simulation_first_starts (DatcSimulation *sim, guint64 trial, double *starts)
{
  guint64 base = trial_key (sim, trial);
  draw_outages (sim, base);
  for (guint c = 0; c < sim->n_proxies; c++)
    {
      DatcRng w, f;
      proxy_streams (sim, base, c, &w, &f);
      starts[c] = start_after (sim, sim->proxies[c].site, 0, &w);
    }
}

static double
run_time (const DatcSimulation *sim, const Site *s, guint64 task, guint32 draw)
{
  if (s->sigma == 0)
    return s->t;
  guint64 key = datc_rng_key (sim->task_key, (task << 20) | MIN (draw, (1u << 20) - 1));
  return s->t * exp (s->sigma * datc_rng_normal_at (key) - s->sigma * s->sigma / 2);
}

/* ---- closed forms ---- */

static void
run_closed_form (DatcSimulation *sim, guint64 trial, gboolean fluid, DatcOutcome *out)
{
  guint64 base = trial_key (sim, trial);
  draw_outages (sim, base);
  for (guint c = 0; c < sim->n_proxies; c++)
    {
      const Site *s = &sim->sites[sim->proxies[c].site];
      DatcRng w, f;
      proxy_streams (sim, base, c, &w, &f);
      sim->caps[c]
          = (DatcCapacity) { start_after (sim, sim->proxies[c].site, 0, &w), s->slots, s->t };
    }
  double work = 0, T;
  if (fluid)
    T = datc_fluid_turnaround (sim->caps, sim->n_proxies, (double) sim->N);
  else
    T = datc_ect_turnaround (sim->caps, sim->n_proxies, sim->N, &work);
  /* Every proxy that started before T is held until T. */
  double charged = 0;
  for (guint c = 0; c < sim->n_proxies; c++)
    if (sim->caps[c].start < T)
      charged += sim->caps[c].slots * (T - sim->caps[c].start);
  out->turnaround = T;
  out->charged = charged;
  out->wasted = fluid ? 0 : MAX (0, charged - work);
  out->resubmissions = 0;
}

/* ---- the pull engine ---- */

static inline gboolean
bag_empty (const Bag *b)
{
  return b->nrequeue == 0 && b->next_fresh == b->end_fresh;
}

static inline guint
proxy_entity (const DatcSimulation *sim, guint c)
{
  return sim->n_slots + c;
}

static void
idle_add (Bag *b, Slot *sl, guint k)
{
  sl->state = SL_IDLE;
  sl->idle_pos = b->nidle;
  b->idle[b->nidle++] = k;
}

static void
idle_remove (DatcSimulation *sim, Bag *b, guint k)
{
  guint pos = sim->slots[k].idle_pos, last = b->idle[--b->nidle];
  b->idle[pos] = last;
  sim->slots[last].idle_pos = pos;
  sim->slots[k].state = SL_OFF;
}

static guint
rec_new (DatcSimulation *sim, guint bag, Pending p)
{
  guint r = sim->free_recs[--sim->nfree_recs];
  Bag *b = &sim->bags[bag];
  sim->recs[r] = (Record) { .task = p.task,
                            .next_draw = p.draw,
                            .nexec = 0,
                            .first_exec = -1,
                            .group = bag,
                            .active_pos = b->nactive };
  b->active[b->nactive++] = r;
  return r;
}

static void
rec_free (DatcSimulation *sim, guint r)
{
  Bag *b = &sim->bags[sim->recs[r].group];
  guint pos = sim->recs[r].active_pos, last = b->active[--b->nactive];
  b->active[pos] = last;
  sim->recs[last].active_pos = pos;
  sim->free_recs[sim->nfree_recs++] = r;
}

static void
rec_unlink (DatcSimulation *sim, Record *r, guint k)
{
  gint *link = &r->first_exec;
  while (*link != (gint) k)
    link = &sim->slots[*link].next_exec;
  *link = sim->slots[k].next_exec;
  r->nexec--;
}

/* Starts a run of record r on slot k. */
static void
slot_run (DatcSimulation *sim, guint k, guint r, double now)
{
  Slot *sl = &sim->slots[k];
  Proxy *p = &sim->proxies[sl->proxy];
  Record *rec = &sim->recs[r];
  sl->state = SL_RUNNING;
  sl->rec = (gint) r;
  sl->start = now;
  sl->runtime = run_time (sim, &sim->sites[p->at], rec->task, rec->next_draw++);
  sl->next_exec = rec->first_exec;
  rec->first_exec = (gint) k;
  rec->nexec++;
  p->busy++;
  datc_event_heap_set (sim->heap, k, now + sl->runtime);
}

/* The bag ran dry: queued proxies are not needed any more (the master
 * cancels them once the remaining work fits in the running slots), unless
 * they may still be of use for copies. */
static void
bag_emptied (DatcSimulation *sim, Bag *b)
{
  if (!sim->cancel_when_empty)
    return;
  for (guint c = b->first_proxy; c < b->first_proxy + b->n_proxies; c++)
    if (sim->proxies[c].state == PX_QUEUED)
      {
        sim->proxies[c].state = PX_GONE;
        datc_event_heap_remove (sim->heap, proxy_entity (sim, c));
      }
}

/* pull+rep: copy the running task expected to end last if a copy here is
 * expected to end sooner.  O(running) per call; only once the bag is dry. */
static gboolean
try_copy (DatcSimulation *sim, guint k, double now)
{
  Slot *sl = &sim->slots[k];
  const Proxy *p = &sim->proxies[sl->proxy];
  const Site *mine = &sim->sites[p->at];
  const Bag *b = &sim->bags[p->group];
  gint best = -1;
  double best_end = -INFINITY;
  for (guint i = 0; i < b->nactive; i++)
    {
      const Record *r = &sim->recs[b->active[i]];
      double end = INFINITY;
      /* min over its copies; stop as soon as it cannot beat the best. */
      for (gint x = r->first_exec; x >= 0 && end > best_end; x = sim->slots[x].next_exec)
        {
          const Slot *xs = &sim->slots[x];
          const Site *s = &sim->sites[sim->proxies[xs->proxy].at];
          end = MIN (end, expected_end (s, xs->start, now));
        }
      if (end > best_end)
        {
          best_end = end;
          best = (gint) b->active[i];
        }
    }
  if (best < 0 || !(now + mine->t < best_end))
    return FALSE;
  slot_run (sim, k, (guint) best, now);
  return TRUE;
}

/* Slot k has nothing to do: give it the next task, a copy, or rest. */
static void
slot_free (DatcSimulation *sim, guint k, double now)
{
  Slot *sl = &sim->slots[k];
  Proxy *p = &sim->proxies[sl->proxy];
  Bag *b = &sim->bags[p->group];
  sl->rec = -1;
  if (now + sim->sites[p->at].t > p->end)
    {
      sl->state = SL_DRAINED;
      return;
    }
  if (!bag_empty (b))
    {
      Pending next = b->nrequeue > 0 ? b->requeue[--b->nrequeue] : (Pending) { b->next_fresh++, 0 };
      slot_run (sim, k, rec_new (sim, p->group, next), now);
      if (bag_empty (b))
        bag_emptied (sim, b);
      return;
    }
  if (sim->rep && try_copy (sim, k, now))
    return;
  idle_add (b, sl, k);
}

/* Proxy c's agent leaves (nothing left for it, walltime, failure): charge
 * it, and submit it again if its bag still holds work. */
static void
proxy_exit (DatcSimulation *sim, guint c, double now)
{
  Proxy *p = &sim->proxies[c];
  const Site *s = &sim->sites[p->site]; /* its slots */
  Bag *b = &sim->bags[p->group];
  sim->charged += s->slots * (now - p->start);
  for (guint k = p->first_slot; k < p->first_slot + s->slots; k++)
    {
      if (sim->slots[k].state == SL_IDLE)
        idle_remove (sim, b, k);
      sim->slots[k].state = SL_OFF;
    }
  datc_event_heap_remove (sim->heap, proxy_entity (sim, c));
  p->state = PX_GONE;
  if (!bag_empty (b))
    {
      p->state = PX_QUEUED;
      sim->resubmissions++;
      datc_event_heap_set (sim->heap, proxy_entity (sim, c),
                           start_after (sim, p->at, now, &p->wait_rng));
    }
}

static inline void
exit_if_done (DatcSimulation *sim, guint c, double now)
{
  if (sim->proxies[c].state == PX_RUNNING && sim->proxies[c].busy == 0)
    proxy_exit (sim, c, now);
}

/* Returned tasks are waiting: idle slots of running proxies take them. */
static void
wake_idle (DatcSimulation *sim, Bag *b, double now)
{
  while (b->nidle > 0 && !bag_empty (b))
    {
      guint k = b->idle[b->nidle - 1];
      idle_remove (sim, b, k);
      slot_free (sim, k, now);
    }
}

static void
proxy_start (DatcSimulation *sim, guint c, double now)
{
  Proxy *p = &sim->proxies[c];
  const Site *s = &sim->sites[p->site], *at = &sim->sites[p->at];
  p->state = PX_RUNNING;
  p->start = now;
  p->end = now + at->walltime;
  p->busy = 0;
  double fail_at
      = isfinite (at->fail_mean) ? now + datc_rng_exp (&p->fail_rng, at->fail_mean) : INFINITY;
  for (guint k = p->first_slot; k < p->first_slot + s->slots; k++)
    slot_free (sim, k, now);
  if (p->busy == 0)
    {
      proxy_exit (sim, c, now);
      return;
    }
  double next = MIN (p->end, fail_at);
  if (isfinite (next))
    datc_event_heap_set (sim->heap, proxy_entity (sim, c), next);
  else
    datc_event_heap_remove (sim->heap, proxy_entity (sim, c));
}

/* Walltime or failure: running tasks go back to the bag unless a copy of
 * them runs elsewhere. */
static void
proxy_end (DatcSimulation *sim, guint c, double now)
{
  Proxy *p = &sim->proxies[c];
  const Site *s = &sim->sites[p->site];
  Bag *b = &sim->bags[p->group];
  for (guint k = p->first_slot; k < p->first_slot + s->slots; k++)
    {
      Slot *sl = &sim->slots[k];
      if (sl->state != SL_RUNNING)
        continue;
      datc_event_heap_remove (sim->heap, k);
      Record *r = &sim->recs[sl->rec];
      rec_unlink (sim, r, k);
      p->busy--;
      if (r->nexec == 0)
        {
          b->requeue[b->nrequeue++] = (Pending) { r->task, r->next_draw };
          rec_free (sim, (guint) sl->rec);
        }
      sl->state = SL_OFF;
      sl->rec = -1;
    }
  proxy_exit (sim, c, now);
  wake_idle (sim, b, now);
}

static void
slot_done (DatcSimulation *sim, guint k, double now)
{
  Slot *sl = &sim->slots[k];
  guint r = (guint) sl->rec;
  Record *rec = &sim->recs[r];
  Bag *b = &sim->bags[rec->group];
  sim->useful += sl->runtime;
  rec_unlink (sim, rec, k);
  sim->proxies[sl->proxy].busy--;
  sl->state = SL_OFF;
  /* First copy wins: the others stop now. */
  guint n_other = 0;
  for (gint x = rec->first_exec; x >= 0; x = sim->slots[x].next_exec)
    {
      sim->scratch[n_other++] = (guint) x;
      datc_event_heap_remove (sim->heap, (guint) x);
      sim->proxies[sim->slots[x].proxy].busy--;
      sim->slots[x].state = SL_OFF;
    }
  rec_free (sim, r);
  b->remaining--;
  sim->remaining--;
  sim->last_done = now;
  if (sim->remaining == 0)
    return;
  slot_free (sim, k, now);
  /* Its event is still at the top: a new run moved it; otherwise drop it. */
  if (sim->slots[k].state != SL_RUNNING)
    datc_event_heap_remove (sim->heap, k);
  exit_if_done (sim, sim->slots[k].proxy, now);
  for (guint i = 0; i < n_other; i++)
    {
      guint x = sim->scratch[i];
      slot_free (sim, x, now);
      exit_if_done (sim, sim->slots[x].proxy, now);
    }
}

/* pull+mig: proxy c, due to start at `start`, is still queued when it has
 * waited its site's migrate_after: it moves then, as the master moves it
 * (master/provisioner.c, migrate), to the site with room left whose mean
 * wait is lowest (scenario order on ties), if that is below what it has
 * waited, and waits there anew.  Decided at submission, which is the same
 * as at migrate_after: nothing before then changes where the room is.
 * A proxy moves once; its resubmissions after a walltime stay where it
 * went.  Returns when it starts. */
static double
migrate_queued (DatcSimulation *sim, guint c, double start)
{
  Proxy *p = &sim->proxies[c];
  double m = sim->sites[p->site].migrate_after;
  if (m <= 0 || start <= m)
    return start;
  gint best = -1;
  double best_wait = m;
  for (guint j = 0; j < sim->n_sites; j++)
    {
      double w = datc_wait_dist_mean (sim->sites[j].wait);
      if (j != p->site && sim->room_left[j] > 0 && w < best_wait)
        {
          best = (gint) j;
          best_wait = w;
        }
    }
  if (best < 0)
    return start;
  sim->room_left[best]--;
  p->at = (guint) best;
  return start_after (sim, p->at, m, &p->wait_rng);
}

static void
run_pull (DatcSimulation *sim, guint64 trial, DatcPolicy policy, DatcOutcome *out)
{
  guint64 base = trial_key (sim, trial);
  gboolean per_site = policy == DATC_POLICY_STATIC_CAP || policy == DATC_POLICY_STATIC_PROC;
  sim->rep = policy == DATC_POLICY_PULL_REP;
  /* Pull cancels queued proxies once the bag is dry, as the master does;
   * with replication a proxy that starts late can still copy a straggler,
   * so they stay queued until the last task ends. */
  sim->cancel_when_empty = !sim->rep;
  sim->task_key = datc_rng_key (base, TAG_TASK);
  sim->remaining = sim->N;
  sim->resubmissions = 0;
  sim->last_done = 0;
  sim->charged = sim->useful = 0;
  draw_outages (sim, base);
  datc_event_heap_clear (sim->heap);

  /* Bags: one over everything, or one per site over its share. */
  sim->n_bags = per_site ? sim->n_sites : 1;
  guint64 first_task = 0;
  for (guint g = 0; g < sim->n_bags; g++)
    {
      Bag *b = &sim->bags[g];
      guint slot0 = per_site ? sim->sites[g].first_slot : 0;
      guint64 n = per_site
                      ? (policy == DATC_POLICY_STATIC_CAP ? sim->share_cap : sim->share_proc)[g]
                      : sim->N;
      *b = (Bag) { .next_fresh = first_task,
                   .end_fresh = first_task + n,
                   .remaining = n,
                   .requeue = sim->requeue_ws + slot0,
                   .idle = sim->idle_ws + slot0,
                   .active = sim->active_ws + slot0,
                   .first_proxy = per_site ? sim->sites[g].first_proxy : 0,
                   .n_proxies = per_site ? sim->sites[g].n_proxies : sim->n_proxies };
      first_task += n;
    }
  sim->nfree_recs = sim->n_slots;
  for (guint r = 0; r < sim->n_slots; r++)
    sim->free_recs[r] = sim->n_slots - 1 - r;
  for (guint k = 0; k < sim->n_slots; k++)
    {
      sim->slots[k].state = SL_OFF;
      sim->slots[k].rec = -1;
    }
  for (guint i = 0; i < sim->n_sites; i++)
    sim->room_left[i] = sim->sites[i].room;
  for (guint c = 0; c < sim->n_proxies; c++)
    {
      Proxy *p = &sim->proxies[c];
      p->group = per_site ? p->site : 0;
      p->at = p->site;
      p->state = PX_QUEUED;
      p->busy = 0;
      proxy_streams (sim, base, c, &p->wait_rng, &p->fail_rng);
      double start = start_after (sim, p->site, 0, &p->wait_rng);
      if (policy == DATC_POLICY_PULL_MIG)
        start = migrate_queued (sim, c, start);
      datc_event_heap_set (sim->heap, proxy_entity (sim, c), start);
    }
  for (guint g = 0; g < sim->n_bags; g++)
    if (bag_empty (&sim->bags[g]))
      bag_emptied (sim, &sim->bags[g]);

  /* Events are handled in place at the top of the heap: a slot that starts
   * its next run, or a proxy that gets its next event, moves down once
   * instead of leaving and coming back.  Every handler either reschedules
   * its entity or removes it. */
  guint e;
  double t;
  while (sim->remaining > 0 && datc_event_heap_peek (sim->heap, &e, &t))
    {
      if (e < sim->n_slots)
        slot_done (sim, e, t);
      else if (sim->proxies[e - sim->n_slots].state == PX_QUEUED)
        proxy_start (sim, e - sim->n_slots, t);
      else
        proxy_end (sim, e - sim->n_slots, t);
    }
  /* The last task ended: every agent still holding slots leaves now. */
  for (guint c = 0; c < sim->n_proxies; c++)
    if (sim->proxies[c].state == PX_RUNNING)
      {
        sim->charged
            += sim->sites[sim->proxies[c].site].slots * (sim->last_done - sim->proxies[c].start);
        sim->proxies[c].state = PX_GONE;
      }
  out->turnaround = sim->remaining == 0 ? sim->last_done : INFINITY;
  out->charged = sim->charged;
  out->wasted = MAX (0, sim->charged - sim->useful);
  out->resubmissions = sim->resubmissions;
}

/* ---- direct submission ---- */

static inline gboolean
job_before (const Job *a, const Job *b)
{
  return a->ready < b->ready || (a->ready == b->ready && a->task < b->task);
}

static void
jobs_push (Job *h, guint64 *n, Job j)
{
  guint64 i = (*n)++;
  while (i > 0)
    {
      guint64 parent = (i - 1) / 2;
      if (!job_before (&j, &h[parent]))
        break;
      h[i] = h[parent];
      i = parent;
    }
  h[i] = j;
}

static Job
jobs_pop (Job *h, guint64 *n)
{
  Job top = h[0], last = h[--(*n)];
  guint64 i = 0;
  for (;;)
    {
      guint64 c = 2 * i + 1;
      if (c >= *n)
        break;
      if (c + 1 < *n && job_before (&h[c + 1], &h[c]))
        c++;
      if (!job_before (&h[c], &last))
        break;
      h[i] = h[c];
      i = c;
    }
  if (*n > 0)
    h[i] = last;
  return top;
}

/* Replaces the smallest server free time with v and restores the heap. */
static void
servers_replace_min (double *h, guint64 n, double v)
{
  guint64 i = 0;
  for (;;)
    {
      guint64 c = 2 * i + 1;
      if (c >= n)
        break;
      if (c + 1 < n && h[c + 1] < h[c])
        c++;
      if (!(h[c] < v))
        break;
      h[i] = h[c];
      i = c;
    }
  h[i] = v;
}

static void
run_direct (DatcSimulation *sim, guint64 trial, gboolean common, DatcOutcome *out)
{
  guint64 base = trial_key (sim, trial);
  draw_outages (sim, base);
  sim->task_key = datc_rng_key (base, TAG_TASK);
  if (sim->jobs == NULL)
    {
      guint64 max_share = 1, max_servers = 1;
      for (guint i = 0; i < sim->n_sites; i++)
        {
          max_share = MAX (max_share, sim->share_cap[i]);
          max_servers = MAX (max_servers, MIN (sim->share_cap[i], (guint64) sim->sites[i].slots
                                                                      * sim->sites[i].n_proxies));
        }
      sim->jobs = g_new (Job, max_share);
      sim->servers = g_new (double, max_servers);
    }
  double T = 0, charged = 0, useful = 0;
  guint64 resub = 0, first_task = 0;
  for (guint i = 0; i < sim->n_sites; i++)
    {
      const Site *s = &sim->sites[i];
      guint64 n = sim->share_cap[i];
      guint64 K = MIN (n, (guint64) s->slots * s->n_proxies);
      DatcRng wait, fail;
      datc_rng_init (&wait, datc_rng_key (datc_rng_key (base, TAG_DIRECT_WAIT), i));
      datc_rng_init (&fail, datc_rng_key (datc_rng_key (base, TAG_DIRECT_FAIL), i));
      double common_start = 0;
      if (common && s->n_proxies > 0)
        {
          /* The one draw a whole site's jobs share: its first proxy's wait. */
          DatcRng w, f;
          proxy_streams (sim, base, s->first_proxy, &w, &f);
          common_start = start_after (sim, i, 0, &w);
        }
      guint64 nj = 0;
      for (guint64 j = 0; j < n; j++)
        {
          double ready = common ? common_start : start_after (sim, i, 0, &wait);
          jobs_push (sim->jobs, &nj, (Job) { ready, first_task + j, 0 });
        }
      for (guint64 m = 0; m < K; m++)
        sim->servers[m] = 0;
      while (nj > 0)
        {
          Job j = jobs_pop (sim->jobs, &nj);
          double start = MAX (j.ready, sim->servers[0]);
          double rt = run_time (sim, s, j.task, j.draw);
          double broke = isfinite (s->fail_mean) ? datc_rng_exp (&fail, s->fail_mean) : INFINITY;
          if (broke < rt)
            {
              /* The job's node failed: it is submitted again and waits anew. */
              servers_replace_min (sim->servers, K, start + broke);
              charged += broke;
              resub++;
              jobs_push (sim->jobs, &nj,
                         (Job) { start_after (sim, i, start + broke, &wait), j.task, j.draw + 1 });
              continue;
            }
          servers_replace_min (sim->servers, K, start + rt);
          charged += rt;
          useful += rt;
          T = MAX (T, start + rt);
        }
      first_task += n;
    }
  out->turnaround = T;
  out->charged = charged;
  out->wasted = MAX (0, charged - useful);
  out->resubmissions = resub;
}

/* The master polls a site half a second after one of its agents leaves
 * (provisioner.c, observe), unless its regular poll comes sooner. */
#define DIRECT_SEEN_AFTER 0.5

/* datc's own direct mode.  Site i has slots x proxies places, each one
 * job queued or running at a time (the master's cap), all of them filled
 * at the start.  A job submitted at a waits its own queue wait and runs
 * its task; the master sees it end at its next poll (DIRECT_SEEN_AFTER
 * after the end, or the site's regular poll if sooner; every poll puts
 * the regular one poll_interval later; poll_interval 0: at once), and
 * job_overhead after that its place takes the next task of the one bag,
 * so a site whose jobs cycle faster runs more of them.  What a cap of
 * places costs against direct-cap: a job's wait starts only when its
 * place is free, so waits add up along each place instead of elapsing
 * while earlier jobs run.  A budget of B scheduler calls a minute allows
 * a site one cycle of a poll (1 call) and a submit of every free place
 * as one array (2) per 180/B s.  Places are the simulation's slot
 * entities in the heap, each either a job running to its end or a place
 * free from then on; walltime is ignored. */
static void
run_direct_mode (DatcSimulation *sim, guint64 trial, DatcOutcome *out)
{
  guint64 base = trial_key (sim, trial);
  draw_outages (sim, base);
  sim->task_key = datc_rng_key (base, TAG_TASK);
  g_autofree DatcRng *wait = g_new (DatcRng, sim->n_sites);
  g_autofree DatcRng *fail = g_new (DatcRng, sim->n_sites);
  /* Per site: the next submit the budget allows, the next regular poll,
   * the last poll planned. */
  g_autofree double *next_submit = g_new0 (double, sim->n_sites);
  g_autofree double *regular_poll = g_new0 (double, sim->n_sites);
  g_autofree double *last_poll = g_new (double, sim->n_sites);
  for (guint i = 0; i < sim->n_sites; i++)
    {
      datc_rng_init (&wait[i], datc_rng_key (datc_rng_key (base, TAG_DIRECT_MODE_WAIT), i));
      datc_rng_init (&fail[i], datc_rng_key (datc_rng_key (base, TAG_DIRECT_MODE_FAIL), i));
      regular_poll[i] = datc_scenario_site (sim->sc, i)->poll_interval;
      last_poll[i] = -INFINITY;
    }
  /* A place whose job failed submits its task again: retry[place], a run
   * number of 0 meaning none (a retry is run 1 or later).  ended[place]:
   * its event is its job's end, not its being free. */
  Pending *retry = sim->requeue_ws;
  guint *ended = sim->idle_ws;
  datc_event_heap_clear (sim->heap);
  for (guint k = 0; k < sim->n_slots; k++)
    {
      retry[k] = (Pending) { 0, 0 };
      ended[k] = FALSE;
      datc_event_heap_set (sim->heap, k, 0);
    }
  double T = 0, charged = 0, useful = 0;
  guint64 resub = 0, next_task = 0, remaining = sim->N;
  guint e;
  double t;
  while (remaining > 0 && datc_event_heap_pop (sim->heap, &e, &t))
    {
      guint i = sim->proxies[sim->slots[e].proxy].site;
      const Site *s = &sim->sites[i];
      const DatcScenarioSite *spec = datc_scenario_site (sim->sc, i);
      if (ended[e])
        {
          /* Seen ended by the poll already planned, else by the next. */
          double seen = t, every = spec->poll_interval;
          if (every > 0 && last_poll[i] >= t)
            seen = last_poll[i];
          else if (every > 0)
            {
              if (regular_poll[i] < t)
                regular_poll[i] += every * ceil ((t - regular_poll[i]) / every);
              seen = MIN (regular_poll[i], t + DIRECT_SEEN_AFTER);
              last_poll[i] = seen;
              regular_poll[i] = seen + every;
            }
          ended[e] = FALSE;
          datc_event_heap_set (sim->heap, e, seen + spec->job_overhead);
          continue;
        }
      guint64 task;
      guint32 draw = 0;
      if (retry[e].draw > 0)
        {
          task = retry[e].task;
          draw = retry[e].draw;
          retry[e].draw = 0;
        }
      else if (next_task < sim->N)
        task = next_task++;
      else
        continue; /* the bag is dry: this place stays empty */
      double a = t;
      if (spec->calls_per_minute > 0)
        {
          /* Joins the submit already planned at or after it, else waits
           * for the budget's next cycle. */
          if (a > next_submit[i])
            next_submit[i] = MAX (a, next_submit[i] + 180.0 / spec->calls_per_minute);
          a = next_submit[i];
        }
      double start = start_after (sim, i, a, &wait[i]);
      double rt = run_time (sim, s, task, draw);
      double broke = isfinite (s->fail_mean) ? datc_rng_exp (&fail[i], s->fail_mean) : INFINITY;
      ended[e] = TRUE;
      if (broke < rt)
        {
          /* Its node failed: the same task goes out again from this place. */
          charged += broke;
          resub++;
          retry[e] = (Pending) { task, draw + 1 };
          datc_event_heap_set (sim->heap, e, start + broke);
          continue;
        }
      charged += rt;
      useful += rt;
      T = MAX (T, start + rt);
      remaining--;
      datc_event_heap_set (sim->heap, e, start + rt);
    }
  datc_event_heap_clear (sim->heap);
  out->turnaround = remaining == 0 ? T : INFINITY;
  out->charged = charged;
  out->wasted = MAX (0, charged - useful);
  out->resubmissions = resub;
}

void
datc_simulation_run (DatcSimulation *sim, guint64 trial, DatcPolicy policy, DatcOutcome *out)
{
  switch (policy)
    {
    case DATC_POLICY_FLUID:
    case DATC_POLICY_ECT:
      run_closed_form (sim, trial, policy == DATC_POLICY_FLUID, out);
      return;
    case DATC_POLICY_PULL:
    case DATC_POLICY_PULL_REP:
    case DATC_POLICY_PULL_MIG:
    case DATC_POLICY_STATIC_CAP:
    case DATC_POLICY_STATIC_PROC:
      run_pull (sim, trial, policy, out);
      return;
    case DATC_POLICY_DIRECT_COMMON:
    case DATC_POLICY_DIRECT_CAP:
      run_direct (sim, trial, policy == DATC_POLICY_DIRECT_COMMON, out);
      return;
    case DATC_POLICY_DIRECT:
      run_direct_mode (sim, trial, out);
      return;
    case DATC_N_POLICIES:
      break;
    }
  g_return_if_reached ();
}
