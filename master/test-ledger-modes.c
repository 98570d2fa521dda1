/* test-ledger-modes.c: what the site manager asks of the ledger, on a real
 * journal in a temporary directory: the static split (a partition only
 * hands out its share, and a returned task goes back to its own
 * partition), direct-mode bindings (a bound task is out of the queue until
 * dispatched to its proxy or released; a cancelled one stops being bound),
 * the observed run time that decides what fits in an agent's walltime,
 * and the output files of agents that come and go. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "datc-limits.h"
#include "ledger.h"
#include "message.h"

typedef struct {
  gchar *dir;
  DatcBag *bag;
  DatcLedger *ledger;
  guint32 agent;
  GArray *picked; /* DatcTaskKey */
} Fixture;

static void
setup_as (Fixture *f, guint n, const char *line, DatcTaskFileFormat format)
{
  g_autoptr (GError) error = NULL;
  f->dir = g_dir_make_tmp ("datc-ledger-XXXXXX", &error);
  g_assert_no_error (error);
  g_autoptr (GString) text = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (text, "%s\n", line);
  f->bag = datc_bag_new ();
  g_assert_true (datc_bag_load_data (f->bag, "t.txt", text->str, text->len, format, &error));
  DatcLedgerOptions o = { 0 };
  f->ledger = datc_ledger_open (f->dir, f->bag, "t.txt", "00", &o, &error);
  g_assert_no_error (error);
  f->agent = datc_ledger_agent_hello (f->ledger, "agent-1", "site", "proxy-1", "host");
  f->picked = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
}

static void
setup (Fixture *f, guint n, const char *line)
{
  setup_as (f, n, line, DATC_TASKFILE_LINES);
}

static void
teardown (Fixture *f)
{
  datc_ledger_free (f->ledger);
  datc_bag_free (f->bag);
  g_array_unref (f->picked);
  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", f->dir);
  g_assert_cmpint (system (cmd), ==, 0);
  g_free (f->dir);
}

/* Dispatches from `partition` and returns the ids handed out. */
static GArray *
dispatch (Fixture *f, guint partition, guint max, guint64 budget_ms, guint *deferred)
{
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_array_set_size (f->picked, 0);
  DatcDispatchRequest req = {
    .agent = f->agent,
    .partition = partition,
    .max = max,
    .budget_ms = budget_ms,
  };
  guint n = datc_ledger_dispatch (f->ledger, &req, f->picked);
  g_assert_cmpuint (f->picked->len, ==, n);
  for (guint i = 0; i < f->picked->len; i++)
    {
      /* What the dispatcher would send: each as its next attempt. */
      DatcTaskKey *k = &g_array_index (f->picked, DatcTaskKey, i);
      g_assert_cmpint (datc_ledger_task_state (f->ledger, k->id), ==, DATC_TASK_RUNNING);
      g_assert_cmpuint (datc_ledger_task_attempt (f->ledger, k->id), ==, k->attempt);
      g_array_append_val (ids, k->id);
    }
  g_assert_cmpuint (ids->len, ==, n);
  if (deferred)
    *deferred = req.deferred;
  return ids;
}

static void
finish (Fixture *f, guint64 id, gint64 runtime_ms)
{
  gint64 now = g_get_real_time ();
  DatcResult r = {
    .id = id,
    .attempt = datc_ledger_task_attempt (f->ledger, id),
    .status = DATC_STATUS_EXITED,
    .exit_code = 0,
    .started_us = now - runtime_ms * 1000,
    .finished_us = now,
    .out = g_bytes_new (NULL, 0),
    .err = g_bytes_new (NULL, 0),
  };
  g_autoptr (GError) error = NULL;
  g_assert_cmpint (datc_ledger_take_result (f->ledger, f->agent, &r, NULL, &error), ==,
                   DATC_RESULT_ACCEPTED);
  g_assert_no_error (error);
  g_bytes_unref (r.out);
  g_bytes_unref (r.err);
}

static void
test_split (void)
{
  Fixture f;
  setup (&f, 30, "true");
  const guint weights[] = { 2, 1 };
  datc_ledger_split (f.ledger, 2, weights);
  g_assert_cmpuint (datc_ledger_queued_in (f.ledger, 0), ==, 20);
  g_assert_cmpuint (datc_ledger_queued_in (f.ledger, 1), ==, 10);

  g_autoptr (GArray) b = dispatch (&f, 1, 100, G_MAXUINT64, NULL);
  g_assert_cmpuint (b->len, ==, 10);
  g_assert_cmpuint (datc_ledger_queued_in (f.ledger, 1), ==, 0);
  g_assert_cmpuint (datc_ledger_queued_in (f.ledger, 0), ==, 20);

  /* A task of partition 1 that comes back is partition 1's again. */
  guint64 back = g_array_index (b, guint64, 3);
  datc_ledger_requeue (f.ledger, f.agent, back, datc_ledger_task_attempt (f.ledger, back));
  g_assert_cmpuint (datc_ledger_queued_in (f.ledger, 1), ==, 1);
  g_autoptr (GArray) a = dispatch (&f, 0, 100, G_MAXUINT64, NULL);
  g_assert_cmpuint (a->len, ==, 20);
  for (guint i = 0; i < a->len; i++)
    g_assert_cmpuint (g_array_index (a, guint64, i), !=, back);
  g_autoptr (GArray) again = dispatch (&f, 1, 100, G_MAXUINT64, NULL);
  g_assert_cmpuint (again->len, ==, 1);
  g_assert_cmpuint (g_array_index (again, guint64, 0), ==, back);
  teardown (&f);
}

static void
test_bind_release (void)
{
  Fixture f;
  setup (&f, 5, "true");
  guint64 h1, h2;
  g_assert_true (datc_ledger_bind (f.ledger, "site", "p1", &h1));
  g_assert_true (datc_ledger_bind (f.ledger, "site", "p2", &h2));
  g_assert_cmpuint (h1, !=, h2);
  g_assert_cmpuint (datc_ledger_proxy_task (f.ledger, "site", "p1"), ==, h1);
  g_assert_cmpuint (datc_ledger_proxy_task (f.ledger, "site", "p2"), ==, h2);
  g_assert_cmpuint (datc_ledger_unbound_queued (f.ledger), ==, 3);

  /* Bound tasks are not handed to anyone else. */
  g_autoptr (GArray) rest = dispatch (&f, 0, 100, G_MAXUINT64, NULL);
  g_assert_cmpuint (rest->len, ==, 3);
  for (guint i = 0; i < rest->len; i++)
    {
      g_assert_cmpuint (g_array_index (rest, guint64, i), !=, h1);
      g_assert_cmpuint (g_array_index (rest, guint64, i), !=, h2);
    }
  /* h1 goes to its proxy's agent, exactly it. */
  g_array_set_size (f.picked, 0);
  g_assert_cmpuint (datc_ledger_dispatch_bound (f.ledger, f.agent, "site", "p1", f.picked), ==, 1);
  g_assert_cmpint (datc_ledger_task_state (f.ledger, h1), ==, DATC_TASK_RUNNING);
  g_assert_cmpuint (datc_ledger_task_agent (f.ledger, h1), ==, f.agent);
  /* Asking again, it gets what is queued and bound to no one: nothing. */
  g_assert_cmpuint (datc_ledger_dispatch_bound (f.ledger, f.agent, "site", "p1", f.picked), ==, 0);
  g_assert_cmpuint (datc_ledger_proxy_task (f.ledger, "site", "p1"), ==, h1);
  /* h2's proxy ended without running it: back in the queue, once. */
  datc_ledger_release (f.ledger, "site", "p2");
  datc_ledger_release (f.ledger, "site", "p2");
  g_assert_cmpuint (datc_ledger_proxy_task (f.ledger, "site", "p2"), ==, 0);
  g_assert_cmpuint (datc_ledger_unbound_queued (f.ledger), ==, 1);
  g_autoptr (GArray) last = dispatch (&f, 0, 100, G_MAXUINT64, NULL);
  g_assert_cmpuint (last->len, ==, 1);
  g_assert_cmpuint (g_array_index (last, guint64, 0), ==, h2);
  teardown (&f);
}

static void
test_bound_then_cancelled (void)
{
  Fixture f;
  setup (&f, 3, "true");
  guint64 h;
  g_assert_true (datc_ledger_bind (f.ledger, "site", "p", &h));
  g_autoptr (GArray) running = g_array_new (FALSE, FALSE, sizeof (DatcLedgerRunning));
  g_assert_cmpuint (datc_ledger_cancel (f.ledger, &h, 1, running), ==, 1);
  g_assert_cmpint (datc_ledger_task_state (f.ledger, h), ==, DATC_TASK_CANCELLED);
  /* Not bound any more, not queued, and its proxy's agent gets nothing. */
  g_assert_cmpuint (datc_ledger_unbound_queued (f.ledger), ==, 2);
  g_array_set_size (f.picked, 0);
  g_assert_cmpuint (datc_ledger_dispatch_bound (f.ledger, f.agent, "site", "p", f.picked), ==, 0);
  teardown (&f);
}

/* The binding is the ledger's alone: a proxy whose task moved on (an
 * agent came back holding it) and was bound to another proxy since does
 * not take it from that proxy when it ends.  (With a second copy of the
 * bindings outside the ledger, its end released the task by id and left
 * the second proxy's agent nothing.) */
static void
test_binding_moved_on (void)
{
  Fixture f;
  setup (&f, 1, "true");
  g_autoptr (GArray) ran = dispatch (&f, 0, 1, G_MAXUINT64, NULL);
  guint64 h = g_array_index (ran, guint64, 0);
  datc_ledger_requeue (f.ledger, f.agent, h, 1);
  g_assert_true (datc_ledger_bind (f.ledger, "site", "p1", NULL));
  g_assert_true (datc_ledger_reattach (f.ledger, f.agent, h, 1));
  datc_ledger_requeue (f.ledger, f.agent, h, 1);
  guint64 again;
  g_assert_true (datc_ledger_bind (f.ledger, "site", "p2", &again));
  g_assert_cmpuint (again, ==, h);
  datc_ledger_release (f.ledger, "site", "p1");
  g_assert_cmpuint (datc_ledger_unbound_queued (f.ledger), ==, 0);
  g_array_set_size (f.picked, 0);
  g_assert_cmpuint (datc_ledger_dispatch_bound (f.ledger, f.agent, "site", "p2", f.picked), ==, 1);
  g_assert_cmpint (datc_ledger_task_state (f.ledger, h), ==, DATC_TASK_RUNNING);
  teardown (&f);
}

/* Without est_runtime nothing is known until 20 tasks have run; then the
 * 90th percentile (to within 19 %, rounded up) decides what fits. */
static void
test_observed_runtime (void)
{
  Fixture f;
  setup (&f, 60, "true");
  g_autoptr (GArray) first = dispatch (&f, 0, 30, 10, NULL);
  g_assert_cmpuint (first->len, ==, 30); /* unknown run times fit any budget */
  g_assert_cmpuint (datc_ledger_runtime_estimate_ms (f.ledger), ==, 0);
  for (guint i = 0; i < 19; i++)
    finish (&f, g_array_index (first, guint64, i), i < 17 ? 100 : 1000);
  g_assert_cmpuint (datc_ledger_runtime_estimate_ms (f.ledger), ==, 0);
  finish (&f, g_array_index (first, guint64, 19), 1000);
  /* 17 of 20 at 100 ms, 3 at 1000 ms: the 90th percentile is 1000 ms. */
  guint64 est = datc_ledger_runtime_estimate_ms (f.ledger);
  g_assert_cmpuint (est, >=, 1000);
  g_assert_cmpuint (est, <=, 1190);

  guint deferred = 0;
  g_autoptr (GArray) none = dispatch (&f, 0, 5, est - 1, &deferred);
  g_assert_cmpuint (none->len, ==, 0);
  g_assert_cmpuint (deferred, >, 0);
  g_autoptr (GArray) some = dispatch (&f, 0, 5, est, &deferred);
  g_assert_cmpuint (some->len, ==, 5);
  teardown (&f);
}

/* The observed estimate is a bucket's top (up to 19 % above what tasks
 * took) and the 90th percentile of every task: tasks that ran fine in a
 * fresh agent's whole working life can be "expected" not to fit in it.
 * Keeping them from a fresh agent would leave it idle until its walltime,
 * then from its replacement, for ever; so for an agent that has not been
 * handed anything yet only a task's own est_runtime counts. */
static void
test_observed_runtime_never_starves_fresh_agent (void)
{
  Fixture f;
  setup (&f, 40, "true");
  g_autoptr (GArray) first = dispatch (&f, 0, 20, G_MAXUINT64, NULL);
  for (guint i = 0; i < first->len; i++)
    finish (&f, g_array_index (first, guint64, i), 4100);
  guint64 est = datc_ledger_runtime_estimate_ms (f.ledger);
  g_assert_cmpuint (est, >, 4900);

  /* A fresh agent with 4.9 s of working life, where each of these took 4.1 s. */
  g_array_set_size (f.picked, 0);
  DatcDispatchRequest req = {
    .agent = f.agent,
    .max = 5,
    .budget_ms = 4900,
    .fresh = TRUE,
  };
  g_assert_cmpuint (datc_ledger_dispatch (f.ledger, &req, f.picked), ==, 5);
  g_assert_cmpuint (req.deferred, ==, 0);
  /* An agent that has worked still keeps the estimate. */
  guint deferred = 0;
  g_autoptr (GArray) none = dispatch (&f, 0, 5, 4900, &deferred);
  g_assert_cmpuint (none->len, ==, 0);
  g_assert_cmpuint (deferred, >, 0);
  teardown (&f);
}

/* A task's own est_runtime keeps it even from a fresh agent. */
static void
test_own_estimate_binds_fresh_agent (void)
{
  Fixture f;
  setup_as (&f, 3, "{\"sh\": \"true\", \"est_runtime\": 60}", DATC_TASKFILE_JSONL);
  g_array_set_size (f.picked, 0);
  DatcDispatchRequest req = {
    .agent = f.agent,
    .max = 3,
    .budget_ms = 30000,
    .fresh = TRUE,
  };
  g_assert_cmpuint (datc_ledger_dispatch (f.ledger, &req, f.picked), ==, 0);
  g_assert_cmpuint (req.deferred, ==, 3);
  teardown (&f);
}

/* Open files of this process. */
static guint
open_fds (void)
{
  g_autoptr (GDir) d = g_dir_open ("/proc/self/fd", 0, NULL);
  g_assert_nonnull (d);
  guint n = 0;
  while (g_dir_read_name (d) != NULL)
    n++;
  return n;
}

/* Agents that come and go (direct mode runs one per task) leave no output
 * file open behind them, and one that comes back appends to its file. */
static void
test_gone_agents_close_their_output (void)
{
  Fixture f;
  const guint agents = 300;
  setup (&f, agents + 1, "true");
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_ledger_commit (f.ledger, &error));
  guint before = open_fds ();
  for (guint i = 0; i < agents; i++)
    {
      g_autofree gchar *id = g_strdup_printf ("agent-gone-%u", i);
      f.agent = datc_ledger_agent_hello (f.ledger, id, "site", id, "host");
      g_autoptr (GArray) ids = dispatch (&f, 0, 1, G_MAXUINT64, NULL);
      g_assert_cmpuint (ids->len, ==, 1);
      gint64 now = g_get_real_time ();
      DatcResult r = {
        .id = g_array_index (ids, guint64, 0),
        .attempt = 1,
        .status = DATC_STATUS_EXITED,
        .started_us = now,
        .finished_us = now,
        .out = g_bytes_new_static ("o", 1),
        .err = g_bytes_new (NULL, 0),
      };
      g_assert_cmpint (datc_ledger_take_result (f.ledger, f.agent, &r, NULL, &error), ==,
                       DATC_RESULT_ACCEPTED);
      g_assert_no_error (error);
      g_bytes_unref (r.out);
      g_bytes_unref (r.err);
      datc_ledger_agent_gone (f.ledger, f.agent, FALSE);
      if (i % 7 == 0)
        g_assert_true (datc_ledger_commit (f.ledger, &error));
    }
  g_assert_true (datc_ledger_commit (f.ledger, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (open_fds (), <=, before);
  /* Their entries went too, and their indices were reused: only the
   * fixture's agent is left. */
  g_assert_cmpuint (datc_ledger_live_agents (f.ledger), ==, 1);
  g_assert_cmpuint (f.agent, <=, 8); /* released at each commit, every 7th */

  /* A replay releases them the same way. */
  datc_ledger_free (f.ledger);
  DatcLedgerOptions o = { 0 };
  f.ledger = datc_ledger_open (f.dir, f.bag, "t.txt", "00", &o, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (datc_ledger_live_agents (f.ledger), ==, 1);

  /* The first one comes back for the last task: a new entry, its file
   * appended to. */
  f.agent = datc_ledger_agent_hello (f.ledger, "agent-gone-0", "site", "agent-gone-0", "host");
  g_assert_cmpuint (f.agent, <=, 8);
  g_autoptr (GArray) ids = dispatch (&f, 0, 1, G_MAXUINT64, NULL);
  g_assert_cmpuint (ids->len, ==, 1);
  gint64 now = g_get_real_time ();
  DatcResult r = {
    .id = g_array_index (ids, guint64, 0),
    .attempt = 1,
    .status = DATC_STATUS_EXITED,
    .started_us = now,
    .finished_us = now,
    .out = g_bytes_new_static ("p", 1),
    .err = g_bytes_new (NULL, 0),
  };
  g_assert_cmpint (datc_ledger_take_result (f.ledger, f.agent, &r, NULL, &error), ==,
                   DATC_RESULT_ACCEPTED);
  g_bytes_unref (r.out);
  g_bytes_unref (r.err);
  g_assert_true (datc_ledger_commit (f.ledger, &error));
  g_autofree gchar *path = g_build_filename (f.dir, "outputs", "agent-gone-0.out", NULL);
  g_autofree gchar *text = NULL;
  g_assert_true (g_file_get_contents (path, &text, NULL, &error));
  g_assert_cmpstr (text, ==, "op");
  teardown (&f);
}

/* A master that dies: the ledger is dropped without a word, as kill -9
 * would, and opened again from the journal. */
static void
crash_and_reopen (Fixture *f, guint window_ms)
{
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_ledger_commit (f->ledger, &error));
  datc_ledger_free (f->ledger);
  DatcLedgerOptions o = { .reattach_window_ms = window_ms };
  f->ledger = datc_ledger_open (f->dir, f->bag, "t.txt", "00", &o, &error);
  g_assert_no_error (error);
}

static void
test_restart_keeps_running_tasks_for_their_agent (void)
{
  Fixture f;
  setup (&f, 10, "true");
  g_autoptr (GArray) ids = dispatch (&f, 0, 3, G_MAXUINT64, NULL);
  g_assert_cmpuint (ids->len, ==, 3);
  guint32 mine = f.agent;
  crash_and_reopen (&f, 60000);

  DatcLedgerCounts c;
  datc_ledger_counts (f.ledger, &c);
  g_assert_cmpuint (c.running, ==, 3);
  g_assert_cmpuint (c.queued, ==, 7);
  g_assert_cmpuint (datc_ledger_orphans (f.ledger), ==, 3);
  g_assert_cmpuint (datc_ledger_awaited (f.ledger), ==, 1);

  /* Another agent asks first: it gets none of them. */
  f.agent = datc_ledger_agent_hello (f.ledger, "agent-2", "site", "proxy-2", "host");
  g_autoptr (GArray) other = dispatch (&f, 0, 10, G_MAXUINT64, NULL);
  g_assert_cmpuint (other->len, ==, 7);
  for (guint i = 0; i < other->len; i++)
    for (guint j = 0; j < ids->len; j++)
      g_assert_cmpuint (g_array_index (other, guint64, i), !=, g_array_index (ids, guint64, j));

  /* Their agent comes back holding two of them; the window does not
   * expire for them, and the third goes back at its end. */
  g_assert_cmpuint (datc_ledger_agent_hello (f.ledger, "agent-1", "site", "proxy-1", "host"), ==,
                    mine);
  g_assert_cmpuint (datc_ledger_awaited (f.ledger), ==, 0);
  for (guint j = 0; j < 2; j++)
    g_assert_true (datc_ledger_reattach (f.ledger, mine, g_array_index (ids, guint64, j), 1));
  g_assert_cmpuint (datc_ledger_orphans (f.ledger), ==, 1);
  g_assert_cmpuint (datc_ledger_expire_orphans (f.ledger, g_get_real_time ()), ==, 0);
  g_assert_cmpuint (datc_ledger_expire_orphans (f.ledger, g_get_real_time () + 61 * G_USEC_PER_SEC),
                    ==, 1);
  g_assert_cmpint (datc_ledger_task_state (f.ledger, g_array_index (ids, guint64, 2)), ==,
                   DATC_TASK_QUEUED);
  for (guint j = 0; j < 2; j++)
    g_assert_cmpuint (datc_ledger_task_agent (f.ledger, g_array_index (ids, guint64, j)), ==, mine);

  /* Re-attached tasks are journaled as such: a second crash orphans them
   * (and agent-2's) again, not the one that went back to the queue. */
  crash_and_reopen (&f, 60000);
  g_assert_cmpuint (datc_ledger_orphans (f.ledger), ==, 2 + other->len);
  g_assert_cmpint (datc_ledger_task_state (f.ledger, g_array_index (ids, guint64, 2)), ==,
                   DATC_TASK_QUEUED);
  teardown (&f);
}

static void
test_second_crash_keeps_the_window (void)
{
  Fixture f;
  setup (&f, 4, "true");
  g_autoptr (GArray) ids = dispatch (&f, 0, 2, G_MAXUINT64, NULL);
  crash_and_reopen (&f, 5000);
  gint64 first_open = g_get_real_time ();
  g_assert_cmpuint (datc_ledger_orphans (f.ledger), ==, 2);
  /* The master dies again inside the window: the deadline stays the first
   * one (a new one would end after first_open + 5 s). */
  crash_and_reopen (&f, 5000);
  g_assert_cmpuint (datc_ledger_orphans (f.ledger), ==, 2);
  g_assert_cmpuint (datc_ledger_expire_orphans (f.ledger, first_open + 5000 * 1000), ==, 2);
  DatcLedgerCounts c;
  datc_ledger_counts (f.ledger, &c);
  g_assert_cmpuint (c.queued, ==, 4);
  /* The agent that never came back is gone at the window's end: a third
   * master does not wait for it. */
  g_assert_cmpuint (datc_ledger_awaited (f.ledger), ==, 0);
  crash_and_reopen (&f, 5000);
  g_assert_cmpuint (datc_ledger_awaited (f.ledger), ==, 0);
  g_assert_cmpuint (datc_ledger_orphans (f.ledger), ==, 0);
  teardown (&f);
}

static void
test_attempts_as_wide_as_the_wire (void)
{
  Fixture f;
  setup (&f, 1, "true");
  /* An agent re-attaching attempt 70000 (refused and drained tasks take no
   * crash, so attempts can grow that far) gets that attempt back. */
  g_assert_true (datc_ledger_reattach (f.ledger, f.agent, 1, 1));
  g_assert_false (datc_ledger_reattach (f.ledger, f.agent, 1, 70001));
  for (guint32 a = 2; a <= 70000; a++)
    {
      datc_ledger_requeue (f.ledger, f.agent, 1, a - 1);
      g_assert_true (datc_ledger_reattach (f.ledger, f.agent, 1, a));
    }
  g_assert_cmpuint (datc_ledger_task_attempt (f.ledger, 1), ==, 70000);
  crash_and_reopen (&f, 60000);
  g_assert_cmpuint (datc_ledger_task_attempt (f.ledger, 1), ==, 70000);
  teardown (&f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/ledger/split", test_split);
  g_test_add_func ("/ledger/bind-release", test_bind_release);
  g_test_add_func ("/ledger/bound-then-cancelled", test_bound_then_cancelled);
  g_test_add_func ("/ledger/binding-moved-on-stays-with-the-proxy-bound-since",
                   test_binding_moved_on);
  g_test_add_func ("/ledger/observed-runtime", test_observed_runtime);
  g_test_add_func ("/ledger/observed-runtime-never-starves-a-fresh-agent",
                   test_observed_runtime_never_starves_fresh_agent);
  g_test_add_func ("/ledger/own-estimate-binds-a-fresh-agent", test_own_estimate_binds_fresh_agent);
  g_test_add_func ("/ledger/gone-agents-close-their-output", test_gone_agents_close_their_output);
  g_test_add_func ("/ledger/restart-keeps-running-tasks-for-their-agent",
                   test_restart_keeps_running_tasks_for_their_agent);
  g_test_add_func ("/ledger/second-crash-keeps-the-window", test_second_crash_keeps_the_window);
  g_test_add_func ("/ledger/attempts-as-wide-as-the-wire", test_attempts_as_wide_as_the_wire);
  return g_test_run ();
}
