/* test-simulate.c: the simulated policies against the closed forms of the
 * issue (Monte Carlo means within a few standard errors, fixed seeds;
 * exact equality where nothing is random), the pathwise properties, and
 * seeded reproducibility. */
#include "simulate.h"

#include <math.h>
#include <stdlib.h>

#include "closedform.h"

static double
harmonic (guint n)
{
  double h = 0;
  for (guint i = 1; i <= n; i++)
    h += 1.0 / i;
  return h;
}

typedef struct {
  double mean, se;
} Estimate;

static Estimate
estimate (const DatcScenario *sc, DatcPolicy p, guint trials, guint64 seed)
{
  g_autoptr (DatcSimulation) sim = datc_simulation_new (sc, seed);
  double s = 0, s2 = 0;
  for (guint t = 0; t < trials; t++)
    {
      DatcOutcome o;
      datc_simulation_run (sim, t, p, &o);
      g_assert_true (isfinite (o.turnaround));
      s += o.turnaround;
      s2 += o.turnaround * o.turnaround;
    }
  double m = s / trials;
  return (Estimate) { m, sqrt (MAX (0, s2 / trials - m * m) / (trials - 1)) };
}

/* |mean - expected| within 4 standard errors: with fixed seeds this either
 * always passes or always fails; 4 SE makes a correct model fail on a
 * given seed with probability about 6e-5. */
static void
assert_close (const char *what, Estimate e, double expected)
{
  if (fabs (e.mean - expected) > 4 * e.se)
    g_error ("%s: Monte Carlo mean %.3f +- %.3f (1 SE), closed form %.3f", what, e.mean, e.se,
             expected);
  g_test_message ("%s: %.3f +- %.3f vs %.3f", what, e.mean, e.se, expected);
}

static DatcOutcome
run1 (const DatcScenario *sc, DatcPolicy p, guint64 seed, guint64 trial)
{
  g_autoptr (DatcSimulation) sim = datc_simulation_new (sc, seed);
  DatcOutcome o;
  datc_simulation_run (sim, trial, p, &o);
  return o;
}

/* ---- exact, deterministic ---- */

static void
test_simulate_deterministic_single_site_is_exact (void)
{
  g_autoptr (DatcScenario) sc = datc_scenario_new (100);
  datc_scenario_add_site (sc, "A", 8, 1, 30, 0, datc_wait_dist_new_const (50));
  /* 100 tasks on 8 slots: 13 rounds of 30 s after a 50 s wait. */
  DatcOutcome o = run1 (sc, DATC_POLICY_PULL, 1, 0);
  g_assert_cmpfloat (o.turnaround, ==, 50 + 13 * 30);
  g_assert_cmpfloat (o.charged, ==, 8 * 13 * 30);
  g_assert_cmpfloat (o.wasted, ==, 8 * 13 * 30 - 100 * 30);
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_ECT, 1, 0).turnaround, ==, 50 + 13 * 30);
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_PULL_REP, 1, 0).turnaround, ==, 50 + 13 * 30);
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_STATIC_CAP, 1, 0).turnaround, ==, 50 + 13 * 30);
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_FLUID, 1, 0).turnaround, ==, 50 + 100 * 30 / 8.0);
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_DIRECT_COMMON, 1, 0).turnaround, ==, 50 + 13 * 30);
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_DIRECT_CAP, 1, 0).turnaround, ==, 50 + 13 * 30);
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

static void
test_simulate_ect_is_the_nth_completion_slot_exactly (void)
{
  /* Fixed waits, deterministic times, three sites. */
  g_autoptr (DatcScenario) sc = datc_scenario_new (137);
  datc_scenario_add_site (sc, "A", 4, 2, 30, 0, datc_wait_dist_new_const (100));
  datc_scenario_add_site (sc, "B", 16, 1, 70, 0, datc_wait_dist_new_const (400));
  datc_scenario_add_site (sc, "C", 3, 3, 11, 0, datc_wait_dist_new_const (1000));
  GArray *all = g_array_new (FALSE, FALSE, sizeof (double));
  for (guint i = 0; i < datc_scenario_n_sites (sc); i++)
    {
      const DatcScenarioSite *s = datc_scenario_site (sc, i);
      double w = datc_wait_dist_mean (s->wait);
      for (guint k = 0; k < s->slots_per_proxy * s->proxies; k++)
        for (guint m = 1; m <= 137; m++)
          {
            double t = w + m * s->task_time;
            g_array_append_val (all, t);
          }
    }
  qsort (all->data, all->len, sizeof (double), cmp_double);
  double nth = g_array_index (all, double, 136);
  g_array_unref (all);
  DatcOutcome ect = run1 (sc, DATC_POLICY_ECT, 9, 0);
  g_assert_cmpfloat (ect.turnaround, ==, nth);
  /* The same for every trial and seed: nothing is random. */
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_ECT, 10, 5).turnaround, ==, nth);
  DatcOutcome pull = run1 (sc, DATC_POLICY_PULL, 9, 0);
  DatcOutcome fluid = run1 (sc, DATC_POLICY_FLUID, 9, 0);
  g_assert_cmpfloat (fluid.turnaround, <=, ect.turnaround);
  g_assert_cmpfloat (ect.turnaround, <=, pull.turnaround);
}

static void
test_simulate_static_and_direct_split_by_capacity (void)
{
  /* Capacity A: 10 slots / 10 s = 1 task/s; B: 10 slots / 30 s = 1/3.
   * 400 tasks: A gets 300, B 100.  A: 30 rounds of 10 s; B: 10 rounds of
   * 30 s; by slots each gets 200: A 20 rounds, B 20 rounds of 30 s. */
  g_autoptr (DatcScenario) sc = datc_scenario_new (400);
  datc_scenario_add_site (sc, "A", 10, 1, 10, 0, datc_wait_dist_new_const (0));
  datc_scenario_add_site (sc, "B", 5, 2, 30, 0, datc_wait_dist_new_const (60));
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_STATIC_CAP, 1, 0).turnaround, ==, MAX (300, 60 + 300));
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_STATIC_PROC, 1, 0).turnaround, ==, MAX (200, 60 + 600));
  /* Direct, capped at 10 running per site, all waiting one common 0 / 60. */
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_DIRECT_COMMON, 1, 0).turnaround, ==, 360);
}

/* datc's direct mode: 2 places, 10 s tasks, every job waiting 4 s from its
 * submission and freeing its place 1 s after its task.  Jobs go out at 0,
 * 15 and 30; their tasks end at 14, 29, 44.  direct-cap queues all six at
 * time 0, so their waits elapse while the first ones run: 4 + 3 x 10. */
static void
test_simulate_direct_mode_waits_add_up_per_place (void)
{
  g_autoptr (DatcScenario) sc = datc_scenario_new (6);
  DatcScenarioSite *s = datc_scenario_add_site (sc, "A", 1, 2, 10, 0, datc_wait_dist_new_const (4));
  s->poll_interval = 0;
  s->job_overhead = 1;
  DatcOutcome o = run1 (sc, DATC_POLICY_DIRECT, 1, 0);
  g_assert_cmpfloat (o.turnaround, ==, 44);
  g_assert_cmpfloat (o.charged, ==, 60);
  g_assert_cmpfloat (o.wasted, ==, 0);
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_DIRECT_CAP, 1, 0).turnaround, ==, 34);
  /* A budget of 6 calls a minute: a poll and a submit every 30 s, so the
   * second pair waits from 15 to 30 and the third from 45 to 60. */
  s->calls_per_minute = 6;
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_DIRECT, 1, 0).turnaround, ==, 74);
  /* The master's polls: 0.5 s after a job's end unless the regular poll
   * (every 3 s from the last poll) is sooner.  Polls at 3, ..., 12, then
   * the ends at 14 are seen at 14.5 (before 15); the next regular poll
   * is at 17.5, then 29.5, so the ends at 28.5 are seen at 29; the last
   * pair ends at 43. */
  s->calls_per_minute = 0;
  s->job_overhead = 0;
  s->poll_interval = 3;
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_DIRECT, 1, 0).turnaround, ==, 43);
  /* Every 7 s: the regular polls at 14 and 28 see the ends at once. */
  s->poll_interval = 7;
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_DIRECT, 1, 0).turnaround, ==, 42);
}

/* Tasks come from one bag and are bound to a job when it is submitted:
 * at time 0 the slow site's one place takes task 2, which then waits its
 * 100 s there while the fast site runs tasks 1 and 3. */
static void
test_simulate_direct_mode_binds_a_task_at_submission (void)
{
  g_autoptr (DatcScenario) sc = datc_scenario_new (3);
  datc_scenario_add_site (sc, "fast", 1, 1, 10, 0, datc_wait_dist_new_const (0))->poll_interval = 0;
  datc_scenario_add_site (sc, "slow", 1, 1, 10, 0, datc_wait_dist_new_const (100))->poll_interval
      = 0;
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_DIRECT, 1, 0).turnaround, ==, 110);
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_PULL, 1, 0).turnaround, ==, 30);
}

static void
test_simulate_walltime_resubmits_the_proxy (void)
{
  /* One slot, 10 s tasks, 25 s walltime: two tasks fit per allocation; the
   * proxy leaves after 20 s and waits 5 s again.  6 tasks: [5,25] [30,50]
   * [55,75]. */
  g_autoptr (DatcScenario) sc = datc_scenario_new (6);
  DatcScenarioSite *s = datc_scenario_add_site (sc, "A", 1, 1, 10, 0, datc_wait_dist_new_const (5));
  s->walltime = 25;
  DatcOutcome o = run1 (sc, DATC_POLICY_PULL, 1, 0);
  g_assert_cmpfloat (o.turnaround, ==, 75);
  g_assert_cmpfloat (o.charged, ==, 60);
  g_assert_cmpfloat (o.wasted, ==, 0);
  g_assert_cmpuint (o.resubmissions, ==, 2);
}

static void
test_simulate_outage_delays_every_start (void)
{
  g_autoptr (DatcScenario) sc = datc_scenario_new (40);
  DatcScenarioSite *s
      = datc_scenario_add_site (sc, "A", 4, 1, 30, 0, datc_wait_dist_new_const (60));
  s->outage_probability = 1;
  s->outage_length = 3600;
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_PULL, 1, 0).turnaround, ==, 3600 + 10 * 30);
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_FLUID, 1, 0).turnaround, ==, 3600 + 10 * 30);
  g_assert_cmpfloat (run1 (sc, DATC_POLICY_DIRECT_CAP, 1, 0).turnaround, ==, 3600 + 10 * 30);
}

static void
test_simulate_failures_return_tasks_and_cost_slots (void)
{
  /* Four failures an hour on 1-hour proxies running 10-minute tasks. */
  g_autoptr (DatcScenario) sc = datc_scenario_new (200);
  DatcScenarioSite *s
      = datc_scenario_add_site (sc, "A", 8, 3, 600, 0, datc_wait_dist_new_exp (300));
  s->fail_rate = 4;
  g_autoptr (DatcSimulation) sim = datc_simulation_new (sc, 3);
  guint64 resub = 0;
  for (guint t = 0; t < 50; t++)
    {
      DatcOutcome o;
      datc_simulation_run (sim, t, DATC_POLICY_PULL, &o);
      g_assert_true (isfinite (o.turnaround));
      /* Every task ran once to the end: charged = work + waste. */
      g_assert_cmpfloat_with_epsilon (o.charged - o.wasted, 200 * 600.0, 1e-6);
      resub += o.resubmissions;
    }
  g_assert_cmpuint (resub, >, 50);
}

/* ---- closed forms in expectation ---- */

static void
test_simulate_static_matches_ceiling_plus_harmonic (void)
{
  /* k identical sites, one proxy of P slots each, exponential waits of
   * mean mu: E[static] = ceil(N / (k P)) t + mu H_k. */
  const guint k = 4, P = 8, N = 320;
  const double t = 60, mu = 600;
  g_autoptr (DatcScenario) sc = datc_scenario_new (N);
  for (guint i = 0; i < k; i++)
    {
      g_autofree gchar *name = g_strdup_printf ("S%u", i);
      datc_scenario_add_site (sc, name, P, 1, t, 0, datc_wait_dist_new_exp (mu));
    }
  double want = ceil ((double) N / (k * P)) * t + mu * harmonic (k);
  assert_close ("static-cap", estimate (sc, DATC_POLICY_STATIC_CAP, 4000, 11), want);
  assert_close ("static-proc", estimate (sc, DATC_POLICY_STATIC_PROC, 4000, 12), want);
}

static void
test_simulate_direct_matches_t_plus_harmonic (void)
{
  /* One site, independent exponential per-job waits, no cap:
   * E[direct] = t + mu H_N. */
  const guint N = 50;
  const double t = 60, mu = 300;
  g_autoptr (DatcScenario) sc = datc_scenario_new (N);
  datc_scenario_add_site (sc, "A", N, 1, t, 0, datc_wait_dist_new_exp (mu));
  assert_close ("direct-cap", estimate (sc, DATC_POLICY_DIRECT_CAP, 4000, 13),
                t + mu * harmonic (N));
  /* With one common draw it is t + mu. */
  assert_close ("direct-common", estimate (sc, DATC_POLICY_DIRECT_COMMON, 4000, 14), t + mu);
}

static void
test_simulate_fluid_matches_two_site_formula (void)
{
  /* Two identical sites of P slots, exponential waits of mean mu:
   * E[fluid] = mu + tau/2 - (mu/2) e^(-tau/mu), tau = N t / P. */
  const guint P = 16, N = 320;
  const double t = 60, mu = 900, tau = N * t / P;
  g_autoptr (DatcScenario) sc = datc_scenario_new (N);
  datc_scenario_add_site (sc, "A", P, 1, t, 0, datc_wait_dist_new_exp (mu));
  datc_scenario_add_site (sc, "B", P, 1, t, 0, datc_wait_dist_new_exp (mu));
  assert_close ("fluid", estimate (sc, DATC_POLICY_FLUID, 8000, 15),
                mu + tau / 2 - (mu / 2) * exp (-tau / mu));
}

static void
test_simulate_one_proxy_pull_is_wait_plus_rounds (void)
{
  /* One proxy, exponential wait: pull = ect = W + ceil(N/s) t. */
  g_autoptr (DatcScenario) sc = datc_scenario_new (90);
  datc_scenario_add_site (sc, "A", 8, 1, 45, 0, datc_wait_dist_new_exp (200));
  g_autoptr (DatcSimulation) sim = datc_simulation_new (sc, 16);
  for (guint t = 0; t < 200; t++)
    {
      DatcOutcome pull, ect;
      double start;
      datc_simulation_run (sim, t, DATC_POLICY_PULL, &pull);
      datc_simulation_run (sim, t, DATC_POLICY_ECT, &ect);
      datc_simulation_first_starts (sim, t, &start);
      /* ect computes W + m t; pull adds t twelve times: a rounding apart. */
      g_assert_cmpfloat (ect.turnaround, ==, start + 12 * 45);
      g_assert_cmpfloat_with_epsilon (pull.turnaround, ect.turnaround, 1e-9);
    }
  assert_close ("pull", estimate (sc, DATC_POLICY_PULL, 4000, 17), 200 + 12 * 45);
}

/* ---- pathwise properties ---- */

static DatcScenario *
random_scenario (DatcRng *r, guint n_sites, gboolean exact_times)
{
  DatcScenario *sc = datc_scenario_new (1 + datc_rng_below (r, 2000));
  for (guint i = 0; i < n_sites; i++)
    {
      g_autofree gchar *name = g_strdup_printf ("S%u", i);
      DatcWaitDist *w;
      switch (datc_rng_below (r, 3))
        {
        case 0:
          w = datc_wait_dist_new_exp (datc_rng_exp (r, 1800));
          break;
        case 1:
          w = datc_wait_dist_new_const ((double) datc_rng_below (r, 3600));
          break;
        default:
          {
            g_autoptr (GError) error = NULL;
            w = datc_wait_dist_parse ("lognormal 20m 1.2", NULL, &error);
            g_assert_no_error (error);
          }
        }
      DatcScenarioSite *s = datc_scenario_add_site (
          sc, name, 1 + (guint) datc_rng_below (r, 32), 1 + (guint) datc_rng_below (r, 4),
          10 + datc_rng_exp (r, 600), exact_times ? 0 : datc_rng_uniform (r), w);
      if (!exact_times && datc_rng_below (r, 3) == 0)
        {
          s->outage_probability = 0.3;
          s->outage_length = 7200;
        }
    }
  return sc;
}

static void
test_simulate_adding_a_site_never_increases_ect_or_fluid (void)
{
  DatcRng r;
  datc_rng_init (&r, 21);
  guint checked = 0;
  for (guint rep = 0; rep < 40; rep++)
    {
      g_autoptr (DatcScenario) with
          = random_scenario (&r, 2 + (guint) datc_rng_below (&r, 3), FALSE);
      g_autoptr (DatcScenario) without
          = datc_scenario_copy_without (with, datc_scenario_n_sites (with) - 1);
      g_autoptr (DatcSimulation) a = datc_simulation_new (with, rep);
      g_autoptr (DatcSimulation) b = datc_simulation_new (without, rep);
      for (guint t = 0; t < 100; t++, checked++)
        for (DatcPolicy p = DATC_POLICY_FLUID; p <= DATC_POLICY_ECT; p++)
          {
            DatcOutcome oa, ob;
            datc_simulation_run (a, t, p, &oa);
            datc_simulation_run (b, t, p, &ob);
            if (!(oa.turnaround <= ob.turnaround))
              g_error ("%s: trial %u of scenario %u: %.6f with the extra site, %.6f without",
                       datc_policy_name (p), t, rep, oa.turnaround, ob.turnaround);
          }
    }
  g_assert_cmpuint (checked, ==, 4000);
}

static void
test_simulate_fluid_below_ect_below_pull_with_exact_times (void)
{
  DatcRng r;
  datc_rng_init (&r, 22);
  for (guint rep = 0; rep < 30; rep++)
    {
      g_autoptr (DatcScenario) sc = random_scenario (&r, 1 + (guint) datc_rng_below (&r, 4), TRUE);
      g_autoptr (DatcSimulation) sim = datc_simulation_new (sc, rep);
      for (guint t = 0; t < 50; t++)
        {
          DatcOutcome f, e, p;
          datc_simulation_run (sim, t, DATC_POLICY_FLUID, &f);
          datc_simulation_run (sim, t, DATC_POLICY_ECT, &e);
          datc_simulation_run (sim, t, DATC_POLICY_PULL, &p);
          g_assert_cmpfloat (f.turnaround, <=, e.turnaround * (1 + 1e-12));
          g_assert_cmpfloat (e.turnaround, <=, p.turnaround * (1 + 1e-12));
          /* Work is conserved: the winning runs add up to N t. */
          g_assert_cmpfloat (p.charged, >=, p.wasted);
        }
    }
}

static void
test_simulate_slow_site_hurts_pull_but_not_rep_ect_fluid (void)
{
  /* A fast site, and a very slow one added: with pull the slow site takes
   * tasks it needs hours for; with replication the fast slots copy them
   * once the bag is dry. */
  g_autoptr (DatcScenario) with = datc_scenario_new (200);
  datc_scenario_add_site (with, "fast", 10, 2, 60, 0, datc_wait_dist_new_exp (600));
  datc_scenario_add_site (with, "slow", 10, 1, 6 * 3600, 0, datc_wait_dist_new_exp (600));
  g_autoptr (DatcScenario) without = datc_scenario_copy_without (with, 1);
  g_autoptr (DatcSimulation) a = datc_simulation_new (with, 23);
  g_autoptr (DatcSimulation) b = datc_simulation_new (without, 23);
  const guint trials = 500;
  double sum[DATC_N_POLICIES][2] = { { 0 } };
  for (guint t = 0; t < trials; t++)
    for (DatcPolicy p = DATC_POLICY_FLUID; p <= DATC_POLICY_PULL_REP; p++)
      {
        DatcOutcome oa, ob;
        datc_simulation_run (a, t, p, &oa);
        datc_simulation_run (b, t, p, &ob);
        sum[p][0] += oa.turnaround;
        sum[p][1] += ob.turnaround;
        /* ect and fluid on every trial; pull+rep too: with exact times
         * every task the slow site holds is copied by a fast slot that
         * would otherwise have been running a task of its own. */
        if (p != DATC_POLICY_PULL && !(oa.turnaround <= ob.turnaround + 1e-9))
          g_error ("%s: trial %u: %.3f with the slow site, %.3f without", datc_policy_name (p), t,
                   oa.turnaround, ob.turnaround);
      }
  double pull_with = sum[DATC_POLICY_PULL][0] / trials,
         pull_without = sum[DATC_POLICY_PULL][1] / trials;
  g_test_message ("pull: %.0f s with the slow site, %.0f s without", pull_with, pull_without);
  g_assert_cmpfloat (pull_with, >, 2 * pull_without);
}

static void
test_simulate_replication_cuts_the_tail_of_variable_tasks (void)
{
  g_autoptr (DatcScenario) sc = datc_scenario_new (300);
  datc_scenario_add_site (sc, "A", 16, 2, 600, 1.5, datc_wait_dist_new_exp (300));
  Estimate pull = estimate (sc, DATC_POLICY_PULL, 400, 24);
  Estimate rep = estimate (sc, DATC_POLICY_PULL_REP, 400, 24);
  g_test_message ("pull %.0f, pull+rep %.0f", pull.mean, rep.mean);
  g_assert_cmpfloat (rep.mean, <, pull.mean);
}

/* ---- reproducibility ---- */

static void
test_simulate_same_seed_same_outcomes (void)
{
  DatcRng r;
  datc_rng_init (&r, 25);
  g_autoptr (DatcScenario) sc = random_scenario (&r, 3, FALSE);
  datc_scenario_site_mut (sc, 0)->fail_rate = 0.5;
  datc_scenario_site_mut (sc, 1)->walltime = 4 * datc_scenario_site (sc, 1)->task_time;
  g_autoptr (DatcSimulation) a = datc_simulation_new (sc, 99);
  g_autoptr (DatcSimulation) b = datc_simulation_new (sc, 99);
  g_autoptr (DatcSimulation) c = datc_simulation_new (sc, 100);
  guint differ = 0;
  for (guint t = 0; t < 20; t++)
    for (DatcPolicy p = 0; p < DATC_N_POLICIES; p++)
      {
        DatcOutcome oa, ob, oc;
        /* Interleave so that nothing from a previous run leaks into the next. */
        datc_simulation_run (a, t, p, &oa);
        datc_simulation_run (b, (t + 7) % 20, p, &ob);
        datc_simulation_run (b, t, p, &ob);
        datc_simulation_run (c, t, p, &oc);
        g_assert_cmpmem (&oa, sizeof oa, &ob, sizeof ob);
        differ += oa.turnaround != oc.turnaround;
      }
  g_assert_cmpuint (differ, >, 100);
}

/* pull+mig: A's two proxies wait 30 s; queued past A's migrate_after (8 s)
 * they move to B, which has room (max_proxies) and a lower mean wait, and
 * start 1 s later there, running at B's speed (6 s a task). */
static DatcScenario *
held_site (guint room, double b_wait, double migrate_after)
{
  DatcScenario *sc = datc_scenario_new (4);
  DatcScenarioSite *a = datc_scenario_add_site (sc, "A", 2, 2, 5, 0, datc_wait_dist_new_const (30));
  a->migrate_after = migrate_after;
  DatcScenarioSite *b
      = datc_scenario_add_site (sc, "B", 2, 0, 6, 0, datc_wait_dist_new_const (b_wait));
  b->max_proxies = room;
  g_assert_true (datc_scenario_validate (sc, NULL));
  return sc;
}

static void
test_simulate_migration_moves_queued_proxies (void)
{
  g_autoptr (DatcScenario) both = held_site (2, 1, 8);
  g_assert_cmpfloat (run1 (both, DATC_POLICY_PULL, 1, 0).turnaround, ==, 30 + 5);
  g_assert_cmpfloat (run1 (both, DATC_POLICY_PULL_REP, 1, 0).turnaround, ==, 30 + 5);
  g_assert_cmpfloat (run1 (both, DATC_POLICY_PULL_MIG, 1, 0).turnaround, ==, 8 + 1 + 6);
  /* Room for one: it takes two rounds of the four tasks; the bag is dry
   * before A starts, so A's other proxy is cancelled unused. */
  g_autoptr (DatcScenario) one = held_site (1, 1, 8);
  g_assert_cmpfloat (run1 (one, DATC_POLICY_PULL_MIG, 1, 0).turnaround, ==, 8 + 1 + 2 * 6);
  /* Nothing moves to a site whose mean wait is not below what the proxy
   * waited, nor from a site without migrate_after. */
  g_autoptr (DatcScenario) slow = held_site (2, 8, 8);
  g_assert_cmpfloat (run1 (slow, DATC_POLICY_PULL_MIG, 1, 0).turnaround, ==, 30 + 5);
  g_autoptr (DatcScenario) never = held_site (2, 1, 0);
  g_assert_cmpfloat (run1 (never, DATC_POLICY_PULL_MIG, 1, 0).turnaround, ==, 30 + 5);
  /* A proxy that starts before migrate_after stays. */
  g_autoptr (DatcScenario) late = held_site (2, 1, 40);
  g_assert_cmpfloat (run1 (late, DATC_POLICY_PULL_MIG, 1, 0).turnaround, ==, 30 + 5);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/simulate/exact/single-site-deterministic-is-exact",
                   test_simulate_deterministic_single_site_is_exact);
  g_test_add_func ("/simulate/exact/ect-is-the-nth-completion-slot",
                   test_simulate_ect_is_the_nth_completion_slot_exactly);
  g_test_add_func ("/simulate/exact/static-and-direct-split-by-capacity",
                   test_simulate_static_and_direct_split_by_capacity);
  g_test_add_func ("/simulate/exact/direct-mode-waits-add-up-per-place",
                   test_simulate_direct_mode_waits_add_up_per_place);
  g_test_add_func ("/simulate/exact/direct-mode-binds-a-task-at-submission",
                   test_simulate_direct_mode_binds_a_task_at_submission);
  g_test_add_func ("/simulate/exact/walltime-resubmits-the-proxy",
                   test_simulate_walltime_resubmits_the_proxy);
  g_test_add_func ("/simulate/exact/outage-delays-every-start",
                   test_simulate_outage_delays_every_start);
  g_test_add_func ("/simulate/failures/return-tasks-and-cost-slots",
                   test_simulate_failures_return_tasks_and_cost_slots);
  g_test_add_func ("/simulate/closed-form/static-is-ceiling-plus-harmonic",
                   test_simulate_static_matches_ceiling_plus_harmonic);
  g_test_add_func ("/simulate/closed-form/direct-is-t-plus-harmonic",
                   test_simulate_direct_matches_t_plus_harmonic);
  g_test_add_func ("/simulate/closed-form/fluid-of-two-sites",
                   test_simulate_fluid_matches_two_site_formula);
  g_test_add_func ("/simulate/closed-form/one-proxy-pull-is-wait-plus-rounds",
                   test_simulate_one_proxy_pull_is_wait_plus_rounds);
  g_test_add_func ("/simulate/pathwise/adding-a-site-never-increases-ect-or-fluid",
                   test_simulate_adding_a_site_never_increases_ect_or_fluid);
  g_test_add_func ("/simulate/pathwise/fluid-below-ect-below-pull-with-exact-times",
                   test_simulate_fluid_below_ect_below_pull_with_exact_times);
  g_test_add_func ("/simulate/pathwise/slow-site-hurts-pull-but-not-rep-ect-or-fluid",
                   test_simulate_slow_site_hurts_pull_but_not_rep_ect_fluid);
  g_test_add_func ("/simulate/replication/cuts-the-tail-of-variable-tasks",
                   test_simulate_replication_cuts_the_tail_of_variable_tasks);
  g_test_add_func ("/simulate/seed/same-seed-same-outcomes", test_simulate_same_seed_same_outcomes);
  g_test_add_func ("/simulate/migration/moves-queued-proxies-to-a-site-with-room",
                   test_simulate_migration_moves_queued_proxies);
  return g_test_run ();
}
