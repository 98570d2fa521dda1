/* test-dispatcher.c: the dispatcher's decisions, driven as agents drive
 * it (HELLO, CREDIT, RESULT on the wire, planner-fakes.h) on a clock the
 * test moves: an agent gets no more tasks than its credit; a task goes to
 * an agent whose walltime it fits, and not to one it does not; once the
 * bag is empty a straggler is copied onto an idle agent, and the copy
 * that loses is cancelled; a node where tasks fail fast is drained and
 * kept off later proxies. */
#include <glib.h>

#include "planner-fakes.h"

#define MINUTE ((gint64) 60 * G_USEC_PER_SEC)

/* `n` tasks, each with `fields` added to its JSON line. */
static gchar *
tasks (guint n, const char *fields)
{
  GString *text = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (text, "{\"sh\": \"true\"%s}\n", fields);
  return g_string_free (text, FALSE);
}

static void
test_credit (void)
{
  g_autofree gchar *bag = tasks (10, "");
  FakeCampaign *c = fake_campaign_new (bag, 0);
  FakeAgent *a = fake_agent_hello (c, "a1", "s", "p1", "n1", 8, 0);
  fake_campaign_turn (c);
  g_assert_true (a->welcomed);
  /* HELLO is no request: nothing without credit. */
  g_assert_cmpuint (fake_agent_received (a), ==, 0);
  fake_agent_credit (a, 3);
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (a), ==, 3);
  /* The same credit twice is no more credit. */
  fake_campaign_turn (c);
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (a), ==, 3);
  fake_agent_credit (a, 2);
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (a), ==, 5);
  DatcLedgerCounts n;
  datc_ledger_counts (c->ledger, &n);
  g_assert_cmpuint (n.running, ==, 5);
  g_assert_cmpuint (n.queued, ==, 5);
  fake_campaign_free (c);
}

static void
test_walltime_fit (void)
{
  /* Tasks said to take 10 minutes: an agent with 5 minutes left gets
   * none (and its slots are no room: starved), one with an hour does. */
  g_autofree gchar *bag = tasks (4, ", \"est_runtime\": 600");
  FakeCampaign *c = fake_campaign_new (bag, 0);
  FakeAgent *shortlived = fake_agent_hello (c, "short", "s", "p1", "n1", 4,
                                            datc_clock_real (&c->time.clock) + 5 * MINUTE);
  fake_agent_credit (shortlived, 4);
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (shortlived), ==, 0);
  g_autoptr (GArray) loads = g_array_new (FALSE, FALSE, sizeof (DatcAgentLoad));
  datc_dispatcher_proxy_agents (c->disp, "s", loads);
  g_assert_cmpuint (loads->len, ==, 1);
  g_assert_true (g_array_index (loads, DatcAgentLoad, 0).starved);

  FakeAgent *longlived = fake_agent_hello (c, "long", "s", "p2", "n2", 4,
                                           datc_clock_real (&c->time.clock) + 60 * MINUTE);
  fake_agent_credit (longlived, 4);
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (longlived), ==, 4);
  g_assert_cmpuint (fake_agent_received (shortlived), ==, 0);
  fake_campaign_free (c);
}

/* `n` tasks on agent a: the first 20 end after 100 ms each (the observed
 * run times the end game needs), the rest keep running. */
static FakeCampaign *
stragglers (guint max_replicas, guint n, FakeAgent **a)
{
  g_autofree gchar *bag = tasks (n, "");
  FakeCampaign *c = fake_campaign_new (bag, max_replicas);
  *a = fake_agent_hello (c, "a", "s", "pa", "n1", n, 0);
  fake_agent_credit (*a, n);
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (*a), ==, n);
  for (guint64 id = 1; id <= 20; id++)
    fake_agent_result (*a, id, 1, 0, 100);
  fake_campaign_turn (c);
  return c;
}

/* Task 21 the one straggler. */
static FakeCampaign *
straggler (guint max_replicas, FakeAgent **a)
{
  return stragglers (max_replicas, 21, a);
}

static void
test_end_game_copy (void)
{
  FakeAgent *a;
  FakeCampaign *c = straggler (0, &a);
  /* Task 21 has run 10 s where every other took 100 ms: an idle agent
   * gets a copy of it, as attempt 2. */
  fake_campaign_advance (c, 10 * G_USEC_PER_SEC);
  FakeAgent *b = fake_agent_hello (c, "b", "s", "pb", "n2", 1, 0);
  fake_agent_credit (b, 1);
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (b), ==, 1);
  DatcTaskKey k = g_array_index (b->tasks, DatcTaskKey, 0);
  g_assert_cmpuint (k.id, ==, 21);
  g_assert_cmpuint (k.attempt, ==, 2);
  g_assert_false (b->told_bye);
  /* The first result wins; the other copy is cancelled. */
  fake_agent_result (a, 21, 1, 0, 10000);
  fake_campaign_turn (c);
  g_assert_cmpuint (b->cancelled->len, ==, 1);
  g_assert_cmpuint (g_array_index (b->cancelled, DatcTaskKey, 0).id, ==, 21);
  g_assert_cmpuint (g_array_index (b->cancelled, DatcTaskKey, 0).attempt, ==, 2);
  g_assert_cmpint (datc_ledger_task_state (c->ledger, 21), ==, DATC_TASK_DONE);
  fake_campaign_free (c);
}

static void
test_end_game_no_copy (void)
{
  /* Run for less than a second (in flight, not straggling): no copy yet,
   * but the idle agent stays, for the copy it gets once the task has run
   * longer than the others (sent away at once, it would be gone by then). */
  FakeAgent *a;
  FakeCampaign *c = straggler (0, &a);
  FakeAgent *b = fake_agent_hello (c, "b", "s", "pb", "n2", 1, 0);
  fake_agent_credit (b, 1);
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (b), ==, 0);
  g_assert_false (b->told_bye);
  fake_campaign_advance (c, 10 * G_USEC_PER_SEC);
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (b), ==, 1);
  g_assert_cmpuint (g_array_index (b->tasks, DatcTaskKey, 0).id, ==, 21);
  g_assert_false (b->told_bye);
  fake_campaign_free (c);

  /* max_replicas 1: no copy however long it has run, and the idle agent
   * is sent away at once. */
  c = straggler (1, &a);
  fake_campaign_advance (c, 10 * G_USEC_PER_SEC);
  b = fake_agent_hello (c, "b", "s", "pb", "n2", 1, 0);
  fake_agent_credit (b, 1);
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (b), ==, 0);
  g_assert_true (b->told_bye);
  fake_campaign_free (c);
}

/* Five stragglers, two idle agents with three free slots each: the five
 * are copied once each, none twice, in one turn (the candidates are worked
 * out once per REPLICA_RECOMPUTE_US, and those copied meanwhile are
 * marked, not removed). */
static void
test_end_game_copies_each_straggler_once (void)
{
  FakeAgent *a;
  FakeCampaign *c = stragglers (0, 25, &a);
  fake_campaign_advance (c, 10 * G_USEC_PER_SEC);
  FakeAgent *b = fake_agent_hello (c, "b", "s", "pb", "n2", 3, 0);
  FakeAgent *d = fake_agent_hello (c, "d", "s", "pd", "n3", 3, 0);
  fake_agent_credit (b, 3);
  fake_agent_credit (d, 3);
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (b) + fake_agent_received (d), ==, 5);
  guint copies[26] = { 0 };
  FakeAgent *idle[] = { b, d };
  for (guint i = 0; i < G_N_ELEMENTS (idle); i++)
    for (guint j = 0; j < idle[i]->tasks->len; j++)
      {
        DatcTaskKey k = g_array_index (idle[i]->tasks, DatcTaskKey, j);
        g_assert_cmpuint (k.id, >=, 21);
        g_assert_cmpuint (k.id, <=, 25);
        g_assert_cmpuint (k.attempt, ==, 2);
        copies[k.id]++;
      }
  for (guint id = 21; id <= 25; id++)
    g_assert_cmpuint (copies[id], ==, 1);
  /* Another turn within the same list: nothing is copied again. */
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (b) + fake_agent_received (d), ==, 5);
  fake_campaign_free (c);
}

/* Agent a on host n1 reports each of `runtimes_ms` as a failure (exit 1)
 * of its next task. */
static void
fail_tasks (FakeCampaign *c, FakeAgent *a, const gint64 *runtimes_ms, guint n)
{
  for (guint i = 0; i < n; i++)
    {
      DatcTaskKey k = g_array_index (a->tasks, DatcTaskKey, i);
      fake_agent_result (a, k.id, k.attempt, 1, runtimes_ms[i]);
    }
  fake_campaign_turn (c);
}

static void
test_fast_failures (void)
{
  g_autofree gchar *bag = tasks (20, "");
  FakeCampaign *c = fake_campaign_new (bag, 0);
  FakeAgent *bad = fake_agent_hello (c, "bad", "s", "p1", "n1", 4, 0);
  FakeAgent *good = fake_agent_hello (c, "good", "s", "p2", "n2", 4, 0);
  fake_agent_credit (bad, 4);
  fake_agent_credit (good, 4);
  fake_campaign_turn (c);
  g_assert_null (datc_dispatcher_excluded_hosts (c->disp, "s"));
  /* Three in a row, each within a second of its start. */
  const gint64 fast[] = { 10, 20, 30 };
  fail_tasks (c, bad, fast, 3);
  g_assert_true (bad->retired);
  g_assert_false (good->retired);
  const char *const *excluded = datc_dispatcher_excluded_hosts (c->disp, "s");
  g_assert_nonnull (excluded);
  g_assert_cmpstr (excluded[0], ==, "n1");
  g_assert_null (excluded[1]);
  /* A retired agent gets no more work, whatever credit it gives. */
  guint before = fake_agent_received (bad);
  fake_agent_credit (bad, 4);
  fake_campaign_turn (c);
  g_assert_cmpuint (fake_agent_received (bad), ==, before);
  fake_campaign_free (c);
}

static void
test_slow_failure_resets (void)
{
  g_autofree gchar *bag = tasks (20, "");
  FakeCampaign *c = fake_campaign_new (bag, 0);
  FakeAgent *bad = fake_agent_hello (c, "bad", "s", "p1", "n1", 4, 0);
  fake_agent_hello (c, "good", "s", "p2", "n2", 4, 0);
  fake_agent_credit (bad, 4);
  fake_campaign_turn (c);
  /* Two fast, one that ran 2 s, one fast: never three fast in a row. */
  const gint64 runtimes[] = { 10, 10, 2000, 10 };
  fail_tasks (c, bad, runtimes, 4);
  g_assert_false (bad->retired);
  g_assert_null (datc_dispatcher_excluded_hosts (c->disp, "s"));
  fake_campaign_free (c);
}

static void
test_last_host_kept (void)
{
  /* The only host the site ran on: drained, but not excluded (its later
   * proxies would have nowhere to start). */
  g_autofree gchar *bag = tasks (20, "");
  FakeCampaign *c = fake_campaign_new (bag, 0);
  FakeAgent *bad = fake_agent_hello (c, "bad", "s", "p1", "n1", 4, 0);
  fake_agent_credit (bad, 4);
  fake_campaign_turn (c);
  const gint64 fast[] = { 10, 20, 30 };
  fail_tasks (c, bad, fast, 3);
  g_assert_true (bad->retired);
  g_assert_null (datc_dispatcher_excluded_hosts (c->disp, "s"));
  fake_campaign_free (c);
}

/* Agents a, b and c each say something (a CREDIT of what they had). */
static void
speak (FakeAgent **agents, guint n)
{
  for (guint i = 0; i < n; i++)
    fake_agent_credit (agents[i], 0);
}

/* Heartbeats go to the agents due one, not to an agent silent past its
 * lease (a quarter of the timeout: 900 s here), which gets one as soon as
 * it is heard from again; only the agent silent past the timeout (3600 s)
 * is lost.  The dispatcher keeps agents in the order they were heard from
 * and beat, so a tick looks only at those due: this checks the order
 * gives what a look at every agent did. */
static void
test_heartbeats_and_losses (void)
{
  g_autofree gchar *bag = tasks (10, "");
  FakeCampaign *c = fake_campaign_new (bag, 0);
  FakeAgent *a = fake_agent_hello (c, "a", "s", "pa", "n1", 1, 0);
  FakeAgent *b = fake_agent_hello (c, "b", "s", "pb", "n1", 1, 0);
  FakeAgent *x = fake_agent_hello (c, "x", "s", "px", "n1", 1, 0);
  fake_campaign_tick (c);
  fake_campaign_turn (c);
  g_assert_cmpuint (a->heartbeats + b->heartbeats + x->heartbeats, ==, 0);
  fake_campaign_advance (c, G_USEC_PER_SEC);
  fake_campaign_tick (c);
  fake_campaign_turn (c);
  g_assert_cmpuint (a->heartbeats, ==, 1);
  g_assert_cmpuint (b->heartbeats, ==, 1);
  g_assert_cmpuint (x->heartbeats, ==, 1);
  /* Half a heartbeat later: none due. */
  fake_campaign_advance (c, G_USEC_PER_SEC / 2);
  fake_campaign_tick (c);
  fake_campaign_turn (c);
  g_assert_cmpuint (a->heartbeats + b->heartbeats + x->heartbeats, ==, 3);

  /* b and x speak every minute, a does not: past its lease it gets none. */
  FakeAgent *bx[] = { b, x };
  for (guint i = 0; i < 20; i++)
    {
      fake_campaign_advance (c, MINUTE);
      speak (bx, 2);
      fake_campaign_tick (c);
      fake_campaign_turn (c);
    }
  guint a_beats = a->heartbeats, b_beats = b->heartbeats;
  g_assert_cmpuint (a_beats, ==, 1 + 14); /* one a minute until 900 s of silence */
  g_assert_cmpuint (b_beats, ==, 1 + 20);
  fake_campaign_advance (c, MINUTE);
  speak (bx, 2);
  fake_campaign_tick (c);
  fake_campaign_turn (c);
  g_assert_cmpuint (a->heartbeats, ==, a_beats);
  g_assert_cmpuint (b->heartbeats, ==, b_beats + 1);
  /* Heard again: a heartbeat in the same turn, and again a second later. */
  speak (&a, 1);
  fake_campaign_tick (c);
  fake_campaign_turn (c);
  g_assert_cmpuint (a->heartbeats, ==, a_beats + 1);
  fake_campaign_advance (c, G_USEC_PER_SEC);
  fake_campaign_tick (c);
  fake_campaign_turn (c);
  g_assert_cmpuint (a->heartbeats, ==, a_beats + 2);

  /* x falls silent; a and b speak: at 3600 s of silence x alone is lost. */
  FakeAgent *ab[] = { a, b };
  for (guint i = 0; i < 59; i++)
    {
      fake_campaign_advance (c, MINUTE);
      speak (ab, 2);
      fake_campaign_tick (c);
      fake_campaign_turn (c);
    }
  g_assert_cmpuint (datc_dispatcher_agents (c->disp), ==, 3);
  fake_campaign_advance (c, MINUTE);
  speak (ab, 2);
  fake_campaign_tick (c);
  fake_campaign_turn (c);
  g_assert_cmpuint (datc_dispatcher_agents (c->disp), ==, 2);
  fake_campaign_free (c);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/dispatcher/credit/an-agent-gets-no-more-tasks-than-its-credit", test_credit);
  g_test_add_func ("/dispatcher/walltime/a-task-goes-only-to-an-agent-it-fits", test_walltime_fit);
  g_test_add_func ("/dispatcher/end-game/a-straggler-is-copied-and-the-losing-copy-cancelled",
                   test_end_game_copy);
  g_test_add_func ("/dispatcher/end-game/each-straggler-is-copied-once",
                   test_end_game_copies_each_straggler_once);
  g_test_add_func ("/dispatcher/end-game/an-idle-agent-waits-for-the-copy-of-a-task-in-flight",
                   test_end_game_no_copy);
  g_test_add_func ("/dispatcher/nodes/three-fast-failures-drain-and-exclude-the-host",
                   test_fast_failures);
  g_test_add_func ("/dispatcher/nodes/a-slower-failure-resets-the-count", test_slow_failure_resets);
  g_test_add_func ("/dispatcher/nodes/the-last-host-is-drained-not-excluded", test_last_host_kept);
  g_test_add_func ("/dispatcher/heartbeats/due-agents-beat-and-only-the-silent-are-lost",
                   test_heartbeats_and_losses);
  return g_test_run ();
}
