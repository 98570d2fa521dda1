/* test-provisioner.c: the site manager's decisions, on a clock the test
 * moves, with fake agents (planner-fakes.h) and a fake site in place of
 * the site driver (DatcSiteCalls): it records every submit, poll and
 * cancel and answers them as the test says.  When to submit (up to
 * max_proxies while work waits, nothing for an empty bag), backing off
 * after a failed submit, cancelling pending proxies once running slots
 * cover the work, replacing a proxy ahead of its walltime, and the budget
 * of scheduler calls. */
#include <glib.h>
#include <string.h>

#include "planner-fakes.h"
#include "provisioner.h"

#define SECOND ((gint64) G_USEC_PER_SEC)
#define MINUTE (60 * SECOND)
#define HOUR (60 * MINUTE)

/* The fake scheduler: jobs are numbered from 1; an array's elements are
 * N_1..N_k.  A job is pending until the test says otherwise. */
typedef struct {
  guint submits, polls, cancels; /* commands */
  GPtrArray *jobs;               /* job ids, as submitted */
  GPtrArray *proxies;            /* the proxy id of each (what its agent says in HELLO) */
  GPtrArray *cancelled;          /* job ids, as cancelled */
  GHashTable *states;            /* job id -> DatcProxyState + 1; absent: pending */
  gboolean fail_submits;
  guint serial;
} FakeSite;

static FakeSite fake;

static void
fake_site_reset (void)
{
  g_clear_pointer (&fake.jobs, g_ptr_array_unref);
  g_clear_pointer (&fake.proxies, g_ptr_array_unref);
  g_clear_pointer (&fake.cancelled, g_ptr_array_unref);
  g_clear_pointer (&fake.states, g_hash_table_unref);
  memset (&fake, 0, sizeof fake);
  fake.jobs = g_ptr_array_new_with_free_func (g_free);
  fake.proxies = g_ptr_array_new_with_free_func (g_free);
  fake.cancelled = g_ptr_array_new_with_free_func (g_free);
  fake.states = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
}

static gboolean
refuse (GError **error)
{
  g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_COMMAND, "sbatch: error: refused");
  return FALSE;
}

static gboolean
fake_submit_array (DatcSite *site, const DatcProxyRequest *req, guint k, const char *script_name,
                   GStrv *element_ids, GError **error)
{
  fake.submits++;
  if (fake.fail_submits)
    return refuse (error);
  guint n = ++fake.serial;
  const char *proxy = req->name + strlen ("datc-");
  *element_ids = g_new0 (gchar *, k + 1);
  for (guint i = 0; i < k; i++)
    {
      (*element_ids)[i] = g_strdup_printf ("%u_%u", n, i + 1);
      g_ptr_array_add (fake.jobs, g_strdup ((*element_ids)[i]));
      g_ptr_array_add (fake.proxies, g_strdup_printf ("%s-%u", proxy, i + 1));
    }
  return TRUE;
}

static gboolean
fake_submit (DatcSite *site, const DatcProxyRequest *req, const char *script_name, gchar **job_id,
             GError **error)
{
  fake.submits++;
  if (fake.fail_submits)
    return refuse (error);
  *job_id = g_strdup_printf ("%u", ++fake.serial);
  g_ptr_array_add (fake.jobs, g_strdup (*job_id));
  g_ptr_array_add (fake.proxies, g_strdup (req->name + strlen ("datc-")));
  return TRUE;
}

static gboolean
fake_lookup (DatcSite *site, const char *job_name, gchar **job_id, GError **error)
{
  *job_id = NULL;
  return TRUE;
}

static gboolean
fake_lookup_array (DatcSite *site, const char *job_name, guint k, GStrv *element_ids,
                   GError **error)
{
  *element_ids = NULL;
  return TRUE;
}

static gboolean
fake_poll (DatcSite *site, const char *const *ids, DatcProxyState *states, gchar **reasons,
           GError **error)
{
  fake.polls++;
  for (guint i = 0; ids[i] != NULL; i++)
    {
      gpointer v = g_hash_table_lookup (fake.states, ids[i]);
      states[i] = v != NULL ? (DatcProxyState) (GPOINTER_TO_UINT (v) - 1) : DATC_PROXY_PENDING;
    }
  return TRUE;
}

static gboolean
fake_cancel (DatcSite *site, const char *const *ids, GError **error)
{
  fake.cancels++;
  for (guint i = 0; ids[i] != NULL; i++)
    g_ptr_array_add (fake.cancelled, g_strdup (ids[i]));
  return TRUE;
}

static gboolean
fake_run (DatcSite *site, const char *const *argv, DatcCommandResult *res, GError **error)
{
  g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT, "no command runs here");
  return FALSE;
}

static const DatcSiteCalls fake_calls = {
  .submit = fake_submit,
  .submit_array = fake_submit_array,
  .lookup = fake_lookup,
  .lookup_array = fake_lookup_array,
  .poll_reasons = fake_poll,
  .cancel = fake_cancel,
  .run = fake_run,
};

static void
fake_job_state (guint i, DatcProxyState state)
{
  g_hash_table_replace (fake.states, g_strdup (fake.jobs->pdata[i]),
                        GUINT_TO_POINTER ((guint) state + 1));
}

static gboolean
was_cancelled (guint i)
{
  for (guint k = 0; k < fake.cancelled->len; k++)
    if (g_str_equal (fake.cancelled->pdata[k], fake.jobs->pdata[i]))
      return TRUE;
  return FALSE;
}

typedef struct {
  guint slots_per_proxy, max_proxies, walltime_s;
  guint calls_per_minute; /* 0: the scheduler's default */
} SiteShape;

/* A Slurm site "a" (arrays, a budget of 12 calls a minute by default)
 * whose commands go to the fake. */
static DatcProvisioner *
provisioner_new (FakeCampaign *c, const SiteShape *shape)
{
  g_autoptr (GError) error = NULL;
  DatcSiteSpec *spec = g_new0 (DatcSiteSpec, 1);
  spec->name = g_strdup ("a");
  spec->site = datc_site_new ("a", "local", "slurm", NULL, NULL, &error);
  g_assert_no_error (error);
  spec->slots_per_proxy = shape->slots_per_proxy;
  spec->max_proxies = shape->max_proxies;
  spec->walltime_s = shape->walltime_s;
  spec->migrate_after_s = DATC_MIGRATE_NEVER;
  spec->calls_per_minute
      = shape->calls_per_minute ? shape->calls_per_minute : DATC_SITE_CALLS_DEFAULT;
  spec->workdir = g_strdup ("/nonexistent/datc-test");
  spec->agent_path = g_strdup ("datc-agent");
  GPtrArray *specs = g_ptr_array_new_with_free_func ((GDestroyNotify) datc_site_spec_free);
  g_ptr_array_add (specs, spec);
  DatcProvisionerOptions o = {
    .endpoint = c->endpoint,
    .mode = DATC_MODE_PULL,
    .keep_site_files = TRUE,
    .clock = &c->time.clock,
    .site_calls = &fake_calls,
  };
  return datc_provisioner_new (c->ledger, c->disp, specs, &o);
}

/* The clock moves past the provisioner's period and it ticks: it takes
 * the outcomes of the commands of its last tick, then plans. */
static void
step (FakeCampaign *c, DatcProvisioner *p, gint64 us)
{
  fake_campaign_advance (c, us);
  datc_provisioner_tick (p);
}

/* The first plans: the site is prepared (nothing to put there: done at
 * once), then the plan submits. */
static void
start (FakeCampaign *c, DatcProvisioner *p)
{
  step (c, p, 0);
  g_assert_cmpuint (fake.submits, ==, 0);
  step (c, p, 100 * 1000);
}

/* Steps of 100 ms for `us`. */
static void
run_for (FakeCampaign *c, DatcProvisioner *p, gint64 us)
{
  for (gint64 t = 0; t < us; t += 100 * 1000)
    step (c, p, 100 * 1000);
}

static gchar *
tasks (guint n, const char *fields)
{
  GString *text = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (text, "{\"sh\": \"true\"%s}\n", fields);
  return g_string_free (text, FALSE);
}

static void
test_submits_up_to_max (void)
{
  fake_site_reset ();
  g_autofree gchar *bag = tasks (100, "");
  FakeCampaign *c = fake_campaign_new (bag, 0);
  SiteShape shape = { .slots_per_proxy = 4, .max_proxies = 3, .walltime_s = 3600 };
  DatcProvisioner *p = provisioner_new (c, &shape);
  start (c, p);
  /* 100 tasks want 25 proxies: max_proxies of them, as one array. */
  g_assert_cmpuint (fake.submits, ==, 1);
  g_assert_cmpuint (fake.jobs->len, ==, 3);
  run_for (c, p, 30 * SECOND);
  g_assert_cmpuint (fake.jobs->len, ==, 3);
  g_assert_cmpuint (fake.cancels, ==, 0);
  g_assert_cmpuint (datc_provisioner_alive (p), ==, 3);
  datc_provisioner_free (p);
  fake_campaign_free (c);
}

static void
test_empty_bag (void)
{
  fake_site_reset ();
  g_autofree gchar *bag = tasks (2, "");
  FakeCampaign *c = fake_campaign_new (bag, 0);
  /* An agent started by hand does the whole bag first. */
  FakeAgent *h = fake_agent_hello (c, "h", "a", "hand", "n1", 2, 0);
  fake_agent_credit (h, 2);
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (h), ==, 2);
  fake_agent_result (h, 1, 1, 0, 10);
  fake_agent_result (h, 2, 1, 0, 10);
  fake_campaign_turn (c);
  g_assert_true (datc_ledger_finished (c->ledger));
  SiteShape shape = { .slots_per_proxy = 4, .max_proxies = 3, .walltime_s = 3600 };
  DatcProvisioner *p = provisioner_new (c, &shape);
  run_for (c, p, 10 * SECOND);
  g_assert_cmpuint (fake.submits, ==, 0);
  datc_provisioner_free (p);
  fake_campaign_free (c);
}

static void
test_backoff (void)
{
  fake_site_reset ();
  fake.fail_submits = TRUE;
  g_autofree gchar *bag = tasks (10, "");
  FakeCampaign *c = fake_campaign_new (bag, 0);
  SiteShape shape = { .slots_per_proxy = 4, .max_proxies = 3, .walltime_s = 3600 };
  DatcProvisioner *p = provisioner_new (c, &shape);
  start (c, p);
  g_assert_cmpuint (fake.submits, ==, 1);
  /* Its failure comes back at the next tick: 2 s before the next try... */
  step (c, p, 100 * 1000);
  run_for (c, p, 1800 * 1000);
  g_assert_cmpuint (fake.submits, ==, 1);
  run_for (c, p, 300 * 1000);
  g_assert_cmpuint (fake.submits, ==, 2);
  /* ...doubling with each failure in a row: 4 s before the third. */
  step (c, p, 100 * 1000);
  run_for (c, p, 3800 * 1000);
  g_assert_cmpuint (fake.submits, ==, 2);
  run_for (c, p, 300 * 1000);
  g_assert_cmpuint (fake.submits, ==, 3);
  /* The next works (8 s after the third failure). */
  fake.fail_submits = FALSE;
  run_for (c, p, 9 * SECOND);
  g_assert_cmpuint (fake.submits, ==, 4);
  g_assert_cmpuint (fake.jobs->len, ==, 3);
  datc_provisioner_free (p);
  fake_campaign_free (c);
}

static void
test_budget (void)
{
  fake_site_reset ();
  fake.fail_submits = TRUE;
  g_autofree gchar *bag = tasks (10, "");
  FakeCampaign *c = fake_campaign_new (bag, 0);
  /* 4 calls a minute: a submit takes 2, and 2 are kept for the end. */
  SiteShape shape
      = { .slots_per_proxy = 4, .max_proxies = 3, .walltime_s = 3600, .calls_per_minute = 4 };
  DatcProvisioner *p = provisioner_new (c, &shape);
  start (c, p);
  g_assert_cmpuint (fake.submits, ==, 1);
  /* The backoff (1 s) is long over: the budget holds the next submit
   * until the first leaves the last minute. */
  run_for (c, p, 59 * SECOND);
  g_assert_cmpuint (fake.submits, ==, 1);
  run_for (c, p, 2 * SECOND);
  g_assert_cmpuint (fake.submits, ==, 2);
  datc_provisioner_free (p);
  fake_campaign_free (c);
}

/* The agent of fake job i says HELLO with `slots` and its walltime end. */
static FakeAgent *
job_starts (FakeCampaign *c, guint i, guint32 slots, gint64 walltime_end_us)
{
  fake_job_state (i, DATC_PROXY_RUNNING);
  g_autofree gchar *id = g_strdup_printf ("agent-%u", i);
  return fake_agent_hello (c, id, "a", fake.proxies->pdata[i], "n1", slots, walltime_end_us);
}

static void
test_cancel_when_work_fits (void)
{
  fake_site_reset ();
  g_autofree gchar *bag = tasks (8, "");
  FakeCampaign *c = fake_campaign_new (bag, 0);
  SiteShape shape = { .slots_per_proxy = 4, .max_proxies = 3, .walltime_s = 7200 };
  DatcProvisioner *p = provisioner_new (c, &shape);
  start (c, p);
  g_assert_cmpuint (fake.jobs->len, ==, 2);
  /* The first proxy's agent has room for the whole bag. */
  FakeAgent *a = job_starts (c, 0, 8, datc_clock_real (&c->time.clock) + 2 * HOUR);
  fake_agent_credit (a, 8);
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (a), ==, 8);
  run_for (c, p, SECOND);
  g_assert_cmpuint (fake.cancels, ==, 1);
  g_assert_true (was_cancelled (1));
  g_assert_false (was_cancelled (0));
  g_assert_cmpuint (fake.jobs->len, ==, 2);
  datc_provisioner_free (p);
  fake_campaign_free (c);
}

static void
test_replace_before_walltime (void)
{
  fake_site_reset ();
  g_autofree gchar *bag = tasks (100, "");
  FakeCampaign *c = fake_campaign_new (bag, 0);
  SiteShape shape = { .slots_per_proxy = 4, .max_proxies = 1, .walltime_s = 7200 };
  DatcProvisioner *p = provisioner_new (c, &shape);
  start (c, p);
  g_assert_cmpuint (fake.jobs->len, ==, 1);
  step (c, p, 100 * 1000);
  gint64 end = datc_clock_real (&c->time.clock) + 2 * HOUR;
  FakeAgent *a = job_starts (c, 0, 4, end);
  fake_agent_credit (a, 4);
  fake_campaign_turn (c);
  /* Working, far from its end: max_proxies holds. */
  run_for (c, p, 10 * SECOND);
  g_assert_cmpuint (fake.jobs->len, ==, 1);
  fake_campaign_advance (c, end - datc_clock_real (&c->time.clock) - 2 * MINUTE);
  run_for (c, p, SECOND);
  g_assert_cmpuint (fake.jobs->len, ==, 1);
  /* Within the lead time (the queue wait seen, at least 5 s, and a poll
   * interval) of its end: its replacement goes in beyond max_proxies. */
  fake_campaign_advance (c, 2 * MINUTE - 8 * SECOND);
  run_for (c, p, SECOND);
  g_assert_cmpuint (fake.jobs->len, ==, 2);
  g_assert_cmpuint (fake.cancels, ==, 0);
  /* Only one: the replacement is not replaced in turn. */
  run_for (c, p, 5 * SECOND);
  g_assert_cmpuint (fake.jobs->len, ==, 2);
  datc_provisioner_free (p);
  fake_campaign_free (c);
}

/* Tasks 1..20 of the bag ran 50 minutes each (on an agent started by
 * hand, gone since): what the ledger estimates a task takes. */
static void
warm_up (FakeCampaign *c)
{
  FakeAgent *h = fake_agent_hello (c, "h", "a", "hand", "n0", 20, 0);
  fake_agent_credit (h, 20);
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (h), ==, 20);
  for (guint64 id = 1; id <= 20; id++)
    fake_agent_result (h, id, 1, 0, 50 * MINUTE / 1000);
  fake_agent_bye (h);
  fake_campaign_turn (c);
  g_assert_cmpuint (datc_ledger_runtime_estimate_ms (c->ledger), >=, 50 * MINUTE / 1000);
}

/* A fresh agent (which gets tasks whatever the estimate) takes the last
 * two tasks with `left` of its walltime. */
static FakeAgent *
last_tasks_on (FakeCampaign *c, gint64 left)
{
  FakeAgent *g
      = fake_agent_hello (c, "g", "a", "hand2", "n1", 2, datc_clock_real (&c->time.clock) + left);
  fake_agent_credit (g, 2);
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (g), ==, 2);
  return g;
}

/* Two proxies wait in the queue when the last two tasks go to an agent
 * with `left` of its walltime: which of them are cancelled. */
static void
pending_when_work_fits (gint64 left, gboolean *first, gboolean *second)
{
  fake_site_reset ();
  g_autofree gchar *bag = tasks (22, "");
  FakeCampaign *c = fake_campaign_new (bag, 0);
  warm_up (c);
  SiteShape shape = { .slots_per_proxy = 1, .max_proxies = 3, .walltime_s = 7200 };
  DatcProvisioner *p = provisioner_new (c, &shape);
  start (c, p);
  g_assert_cmpuint (fake.jobs->len, ==, 2);
  step (c, p, 100 * 1000);
  last_tasks_on (c, left);
  run_for (c, p, 2 * SECOND);
  *first = was_cancelled (0);
  *second = was_cancelled (1);
  g_assert_cmpuint (fake.jobs->len, ==, 2);
  datc_provisioner_free (p);
  fake_campaign_free (c);
}

static void
test_keep_one_pending (void)
{
  gboolean first, second;
  /* Tasks of about 50 minutes on an agent with 30 left: they come back
   * at its end, and the proxy queued longest stays for them. */
  pending_when_work_fits (30 * MINUTE, &first, &second);
  g_assert_false (first);
  g_assert_true (second);
  /* With 3 hours left they fit: both go. */
  pending_when_work_fits (3 * HOUR, &first, &second);
  g_assert_true (first);
  g_assert_true (second);
}

/* The last two tasks run on an agent with `left` of its walltime when
 * the provisioner starts, nothing pending: the proxies it submits. */
static guint
submitted_ahead (gint64 left)
{
  fake_site_reset ();
  g_autofree gchar *bag = tasks (22, "");
  FakeCampaign *c = fake_campaign_new (bag, 0);
  warm_up (c);
  last_tasks_on (c, left);
  SiteShape shape = { .slots_per_proxy = 2, .max_proxies = 3, .walltime_s = 7200 };
  DatcProvisioner *p = provisioner_new (c, &shape);
  start (c, p);
  run_for (c, p, 10 * SECOND);
  guint n = fake.jobs->len;
  g_assert_cmpuint (fake.cancels, ==, 0);
  if (n == 1)
    {
      /* Its agent, with nothing to do, stays for those tasks (not sent
       * away, not submitted again). */
      FakeAgent *b = job_starts (c, 0, 2, datc_clock_real (&c->time.clock) + 2 * HOUR);
      fake_agent_credit (b, 2);
      fake_campaign_turn (c);
      run_for (c, p, 10 * SECOND);
      fake_campaign_turn (c);
      g_assert_false (b->told_bye);
      g_assert_cmpuint (fake.jobs->len, ==, 1);
    }
  datc_provisioner_free (p);
  fake_campaign_free (c);
  return n;
}

static void
test_submit_ahead (void)
{
  g_assert_cmpuint (submitted_ahead (30 * MINUTE), ==, 1);
  g_assert_cmpuint (submitted_ahead (3 * HOUR), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* A failing site is logged as warnings, as it should be: not fatal here
   * (criticals still are). */
  g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
  g_test_add_func ("/provisioner/pull/submits-up-to-max-proxies-while-work-waits",
                   test_submits_up_to_max);
  g_test_add_func ("/provisioner/pull/submits-nothing-for-an-empty-bag", test_empty_bag);
  g_test_add_func ("/provisioner/failures/a-failed-submit-backs-off", test_backoff);
  g_test_add_func ("/provisioner/budget/a-submit-waits-for-the-call-budget", test_budget);
  g_test_add_func ("/provisioner/cancel/pending-proxies-go-once-running-slots-cover-the-work",
                   test_cancel_when_work_fits);
  g_test_add_func ("/provisioner/walltime/a-proxy-is-replaced-ahead-of-its-walltime",
                   test_replace_before_walltime);
  g_test_add_func (
      "/provisioner/walltime/a-pending-proxy-stays-for-tasks-that-would-outlive-theirs",
      test_keep_one_pending);
  g_test_add_func (
      "/provisioner/walltime/a-proxy-goes-in-ahead-for-tasks-that-would-outlive-theirs",
      test_submit_ahead);
  return g_test_run ();
}
