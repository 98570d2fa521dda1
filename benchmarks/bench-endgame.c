/* bench-endgame: the master's loop at a campaign's end, when the bag is
 * empty, many tasks are still out and agents go idle and leave.  Driven
 * through the real dispatcher and ledger by fake agents on inproc sockets
 * and a fake clock (master/planner-fakes.c), all in this thread, so the
 * times are the master's own work:
 *
 *   1. RUNNING tasks held by AGENTS agents (RUNNING / AGENTS each), after
 *      20 tasks that ran 100 ms (run times observed, as the end game needs);
 *   2. 10 s later every one of them has run far longer than that: IDLE new
 *      agents with SLOTS free slots each come, and one turn copies
 *      stragglers onto them (the end game's copies);
 *   3. the first AGENTS agents leave, one BYE per turn.
 *
 * It prints the time of step 2's search for idle agents (where the copies
 * are made) and the slowest and total of step 3's handling of a BYE, wall
 * and CPU; the commits and the fake agents' side are not timed.  Before this benchmark, step 2
 * removed each copied candidate from the front of the list (moving the rest) and each departure of
 * step 3 scanned every replicated task: 0.45-0.73 s stalls of `datc status` at the end of 10M x
 * 1,000 (benchmarks/README.md, "The front's pages, and a stall at a campaign's end").
 *
 *   bench-endgame [AGENTS [RUNNING [IDLE [SLOTS]]]]   (default 1000 64000 100 64) */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "planner-fakes.h"

static double
thread_cpu_ms (void)
{
  struct rusage ru;
  getrusage (RUSAGE_THREAD, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3
         + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static GLogWriterOutput
drop_messages (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer data)
{
  if ((level & G_LOG_LEVEL_MASK) == G_LOG_LEVEL_MESSAGE)
    return G_LOG_WRITER_HANDLED;
  return g_log_writer_default (level, fields, n_fields, data);
}

static guint
arg (int argc, char **argv, int i, guint dflt)
{
  if (argc <= i)
    return dflt;
  char *end;
  unsigned long v = strtoul (argv[i], &end, 10);
  if (*end != '\0' || v == 0 || v > 1000000)
    {
      fprintf (stderr, "bench-endgame: \"%s\": a count from 1 to 1000000\n", argv[i]);
      exit (2);
    }
  return (guint) v;
}

int
main (int argc, char **argv)
{
  guint agents = arg (argc, argv, 1, 1000), running = arg (argc, argv, 2, 64000),
        idle_n = arg (argc, argv, 3, 100), slots = arg (argc, argv, 4, 64);
  guint per = (running + agents - 1) / agents;
  /* The end game logs each copy (a line in the master's log): its
   * writing is not what is measured here. */
  g_log_set_writer_func (drop_messages, NULL, NULL);

  GString *text = g_string_new (NULL);
  for (guint i = 0; i < 20 + agents * per; i++)
    g_string_append (text, "{\"sh\": \"true\"}\n");
  FakeCampaign *c = fake_campaign_new (text->str, 0);
  g_string_free (text, TRUE);

  FakeAgent *warm = fake_agent_hello (c, "warm", "s", "pw", "n0", 20, 0);
  fake_agent_credit (warm, 20);
  fake_campaign_turn (c);
  for (guint64 id = 1; id <= 20; id++)
    fake_agent_result (warm, id, 1, 0, 100);
  fake_agent_bye (warm);
  fake_campaign_turn (c);

  g_autofree FakeAgent **held = g_new (FakeAgent *, agents);
  for (guint i = 0; i < agents; i++)
    {
      g_autofree gchar *id = g_strdup_printf ("a%u", i);
      g_autofree gchar *proxy = g_strdup_printf ("pa%u", i);
      held[i] = fake_agent_hello (c, id, "s", proxy, "n1", per, 0);
      fake_agent_credit (held[i], per);
    }
  fake_campaign_turn (c);
  guint out = 0;
  for (guint i = 0; i < agents; i++)
    out += fake_agent_received (held[i]);

  fake_campaign_advance (c, 10 * G_USEC_PER_SEC);
  for (guint i = 0; i < idle_n; i++)
    {
      g_autofree gchar *id = g_strdup_printf ("b%u", i);
      g_autofree gchar *proxy = g_strdup_printf ("pb%u", i);
      FakeAgent *b = fake_agent_hello (c, id, "s", proxy, "n2", slots, 0);
      fake_agent_credit (b, slots);
    }
  /* The HELLOs and credit taken first; then what the loop does when it
   * looks for idle agents is timed (the copies are made there), not the
   * commit that follows nor the fake agents taking what came. */
  fake_campaign_tick (c);
  gint64 t0 = g_get_monotonic_time ();
  double cpu0 = thread_cpu_ms ();
  datc_dispatcher_release_idle (c->disp);
  double copy_ms = (g_get_monotonic_time () - t0) / 1e3, copy_cpu = thread_cpu_ms () - cpu0;
  fake_campaign_turn (c);
  guint copies = 0;
  for (guint i = agents + 1; i < c->agents->len; i++)
    copies += fake_agent_received (c->agents->pdata[i]);
  printf ("endgame: %u tasks out on %u agents, %u idle agents with %u slots: the turn that made "
          "%u copies took %.1f ms (CPU %.1f ms)\n",
          out, agents, idle_n, slots, copies, copy_ms, copy_cpu);

  double leave_ms = 0, leave_max = 0, leave_cpu = 0;
  for (guint i = 0; i < agents; i++)
    {
      fake_agent_bye (held[i]);
      /* Timed: taking the BYE (the agent forgotten, its tasks handed back,
       * its copies dropped); then the turn's commit, untimed. */
      t0 = g_get_monotonic_time ();
      cpu0 = thread_cpu_ms ();
      fake_campaign_tick (c);
      double ms = (g_get_monotonic_time () - t0) / 1e3;
      leave_cpu += thread_cpu_ms () - cpu0;
      fake_campaign_turn (c);
      leave_ms += ms;
      leave_max = MAX (leave_max, ms);
    }
  printf ("endgame: %u agents leaving, one per turn: %.1f ms in all (CPU %.1f ms), the slowest "
          "turn %.2f ms\n",
          agents, leave_ms, leave_cpu, leave_max);
  fake_campaign_free (c);
  return 0;
}
