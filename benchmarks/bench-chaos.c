/* bench-chaos.c: a campaign of short tasks through crashes (tests/chaos.h):
 * K kill -9s of the master, J of local agents, one local agent stopped
 * and one TCP agent's link down past the agent timeout.  Prints one line
 * per metric: lost results, duplicate result lines, re-runs of tasks whose
 * result was recorded (all must be 0), re-runs per kill.  Nothing here
 * asserts.  The link-down makes network namespaces: run it as root.
 *
 *   DATC=... DATC_AGENT=... DATC_TESTBED=tests/testbed bench-chaos \
 *     [--tasks N] [--task-ms MS] [--master-kills K] [--agent-kills J] \
 *     [--no-stop] [--no-link-down] [--seed S] */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>

#include "chaos.h"

int
main (int argc, char **argv)
{
  ChaosPlan plan;
  chaos_plan_init (&plan);
  gint tasks = (gint) plan.tasks, task_ms = (gint) plan.task_ms;
  gint master_kills = (gint) plan.master_kills, agent_kills = (gint) plan.agent_kills;
  gint outage_ms = (gint) plan.outage_ms, seed = -1;
  gboolean no_stop = FALSE, no_link = FALSE, keep = FALSE;
  GOptionEntry entries[] = {
    { "tasks", 'n', 0, G_OPTION_ARG_INT, &tasks, "Tasks in the bag (default 2000)", "N" },
    { "task-ms", 0, 0, G_OPTION_ARG_INT, &task_ms, "Each task's sleep (default 100)", "MS" },
    { "master-kills", 'k', 0, G_OPTION_ARG_INT, &master_kills, "kill -9 of the master (default 5)",
      "K" },
    { "agent-kills", 'j', 0, G_OPTION_ARG_INT, &agent_kills, "kill -9 of a local agent (default 3)",
      "J" },
    { "outage-ms", 0, 0, G_OPTION_ARG_INT, &outage_ms,
      "Length of the stop and the link-down (default 8000)", "MS" },
    { "no-stop", 0, 0, G_OPTION_ARG_NONE, &no_stop, "No SIGSTOP of an agent", NULL },
    { "no-link-down", 0, 0, G_OPTION_ARG_NONE, &no_link,
      "No TCP agent in a namespace, no link-down (no root needed)", NULL },
    { "seed", 0, 0, G_OPTION_ARG_INT, &seed, "Random seed (default: from the clock)", "S" },
    { "keep", 0, 0, G_OPTION_ARG_NONE, &keep, "Keep the working directory", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- a campaign through crashes");
  g_option_context_add_main_entries (ctx, entries, NULL);
  g_autoptr (GError) error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      g_printerr ("bench-chaos: %s\n", error->message);
      return 2;
    }
  if (tasks < 1 || task_ms < 0 || task_ms > 60000 || master_kills < 0 || agent_kills < 0
      || master_kills > 1000 || agent_kills > 1000 || outage_ms < 0 || outage_ms > 600000)
    {
      g_printerr ("bench-chaos: --tasks >= 1, --task-ms 0..60000, kills 0..1000, "
                  "--outage-ms 0..600000\n");
      return 2;
    }
  plan.tasks = (guint) tasks;
  plan.task_ms = (guint) task_ms;
  plan.master_kills = (guint) master_kills;
  plan.agent_kills = (guint) agent_kills;
  plan.outage_ms = (guint) outage_ms;
  plan.stop = !no_stop;
  plan.link_down = !no_link;
  plan.seed = seed >= 0 ? (guint32) seed : (guint32) g_get_real_time ();
  if (g_getenv ("DATC") == NULL || g_getenv ("DATC_AGENT") == NULL
      || (plan.link_down && g_getenv ("DATC_TESTBED") == NULL))
    {
      g_printerr ("bench-chaos: set DATC, DATC_AGENT (and DATC_TESTBED for the link-down)\n");
      return 2;
    }

  g_autofree gchar *dir = g_dir_make_tmp ("datc-chaos-XXXXXX", &error);
  if (dir == NULL)
    {
      g_printerr ("bench-chaos: %s\n", error->message);
      return 1;
    }
  printf ("# %u x sleep %.3f s, %u master kills, %u agent kills, stop %s, link-down %s, "
          "seed %u, in %s\n",
          plan.tasks, plan.task_ms / 1000.0, plan.master_kills, plan.agent_kills,
          plan.stop ? "yes" : "no", plan.link_down ? "yes" : "no", plan.seed, dir);
  fflush (stdout);
  ChaosOutcome o;
  gboolean ok = chaos_run (dir, &plan, &o, &error);
  chaos_outcome_print (&o, stdout);
  chaos_outcome_clear (&o);
  if (!ok)
    g_printerr ("bench-chaos: %s\n", error->message);
  if (!keep)
    {
      g_autofree gchar *q = g_shell_quote (dir);
      g_autofree gchar *cmd = g_strdup_printf ("rm -rf %s", q);
      if (system (cmd) != 0)
        g_printerr ("bench-chaos: could not remove %s\n", dir);
    }
  return ok ? 0 : 1;
}
