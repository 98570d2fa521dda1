/* test-chaos.c: the short version of benchmarks/bench-chaos (both run
 * tests/chaos.c): a campaign of short tasks that log their own
 * executions, through kill -9s of the master and of agents, an agent
 * stopped past the timeout, and (in network namespaces) a TCP agent whose
 * link goes down past the timeout.  Nothing may be lost, recorded twice,
 * or run again once its result was recorded; a master kill costs at most
 * half a re-run. */
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>

#include "chaos.h"
#include "harness.h"

static void
run_and_check (ChaosPlan *plan)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autoptr (GError) error = NULL;
  ChaosOutcome o;
  plan->seed = g_test_rand_int ();
  g_printerr ("# chaos in %s, seed %u\n", d->path, plan->seed);
  gboolean ok = chaos_run (d->path, plan, &o, &error);
  chaos_outcome_print (&o, stderr);
  g_assert_no_error (error);
  g_assert_true (ok);

  /* Every planned event happened while the campaign ran, or the numbers
   * below prove less than they say. */
  g_assert_cmpuint (o.master_kills, ==, plan->master_kills);
  g_assert_cmpuint (o.agent_kills, ==, plan->agent_kills);
  g_assert_cmpuint (o.stops, ==, plan->stop ? 1 : 0);
  g_assert_cmpuint (o.link_downs, ==, plan->link_down ? 1 : 0);

  g_assert_cmpint (o.status, ==, 0);
  g_assert_cmpuint (o.lost, ==, 0);
  g_assert_cmpuint (o.duplicate_lines, ==, 0);
  g_assert_cmpuint (o.not_ok, ==, 0);
  g_assert_cmpuint (o.unlogged, ==, 0);
  g_assert_cmpuint (o.reruns_after_recorded, ==, 0);
  g_assert_cmpuint (o.reruns_after_result, ==, 0);
  /* The target: at most 0.5 re-runs per master kill. */
  g_assert_cmpuint (2 * o.reruns_by_cause[CHAOS_CAUSE_MASTER_KILL], <=, o.master_kills);
  chaos_outcome_clear (&o);
}

/* The metrics on a made-up campaign, so a violation is known to show:
 * task 1 ran again after its recorded result had finished, task 2 has two
 * result lines, task 3 ran twice before its result, task 4 has none. */
static void
test_measure (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *c = g_build_filename (d->path, "c", NULL);
  g_assert_cmpint (g_mkdir (c, 0700), ==, 0);
  g_autofree gchar *results = tb_write (
      d, "c/results.jsonl",
      "{\"id\":1,\"status\":\"exited\",\"exit_code\":0,\"started\":900000,\"finished\":1000000}\n"
      "{\"id\":2,\"status\":\"exited\",\"exit_code\":0,\"started\":1900000,\"finished\":2000000}\n"
      "{\"id\":2,\"status\":\"exited\",\"exit_code\":0,\"started\":1900000,\"finished\":2000000}\n"
      "{\"id\":3,\"status\":\"lost\",\"exit_code\":0,\"started\":2600000,\"finished\":3000000}\n");
  g_autofree gchar *log = tb_write (d, "executions",
                                    "1 900000000 10\n"
                                    "2 1900000000 10\n"
                                    "3 2500000000 10\n"
                                    "1 1500000000 11\n"
                                    "3 2600000000 12\n");
  g_autoptr (GError) error = NULL;
  ChaosOutcome o;
  g_assert_true (chaos_measure (d->path, 4, &o, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (o.lost, ==, 1);
  g_assert_cmpuint (o.duplicate_lines, ==, 1);
  g_assert_cmpuint (o.not_ok, ==, 1);
  g_assert_cmpuint (o.executions, ==, 5);
  g_assert_cmpuint (o.reruns, ==, 2);
  g_assert_cmpuint (o.reruns_after_result, ==, 1);
  g_assert_cmpuint (o.reruns_by_cause[CHAOS_CAUSE_OTHER], ==, 2);
  g_assert_nonnull (strstr (o.example, "task 1:"));
  chaos_outcome_clear (&o);

  /* A log line the tasks could not have written is an error naming it. */
  g_autofree gchar *bad = tb_write (d, "executions", "1 900000000 10\n7 1 1\n");
  g_assert_false (chaos_measure (d->path, 4, &o, &error));
  g_assert_nonnull (strstr (error->message, "executions:2:"));
  chaos_outcome_clear (&o);
}

/* The embedded local site: 2 agents sharing 4 slots; 800 x 0.1 s lasts
 * well past the ~15 s of events. */
static void
test_local_site (void)
{
  ChaosPlan plan;
  chaos_plan_init (&plan);
  plan.tasks = 800;
  plan.master_kills = 3;
  plan.agent_kills = 2;
  plan.stop = TRUE;
  plan.link_down = FALSE;
  plan.gap_max_ms = 1200;
  plan.deadline_s = 120;
  run_and_check (&plan);
}

/* A 2-slot agent connecting over TCP from its own network namespace, and
 * one local agent: the link goes down for 8 s, and the master dies once. */
static void
test_tcp_agent_link_down (void)
{
  ChaosPlan plan;
  chaos_plan_init (&plan);
  plan.tasks = 500;
  plan.master_kills = 1;
  plan.agent_kills = 0;
  plan.stop = FALSE;
  plan.link_down = TRUE;
  plan.local_agents = 1;
  plan.local_slots = 2;
  plan.tcp_slots = 2;
  plan.gap_max_ms = 1200;
  plan.deadline_s = 120;
  run_and_check (&plan);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/chaos/measure/counts-lost-duplicates-and-reruns-after-a-result", test_measure);
  g_test_add_func (
      "/chaos/local-site/kills-and-a-stopped-agent-lose-nothing-and-rerun-nothing-recorded",
      test_local_site);
  g_test_add_func (
      "/chaos/tcp-agent/link-down-past-the-timeout-loses-nothing-and-reruns-nothing-recorded",
      test_tcp_agent_link_down);
  return g_test_run ();
}
