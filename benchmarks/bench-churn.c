/* bench-churn: the master's memory while agents come and go, as in a
 * direct-mode campaign (one agent per task, released once its task is
 * done).  It drives the ledger the way the dispatcher does for each agent
 * (its proxy submitted, HELLO, one task, its result, its departure, its
 * proxy ended; a commit every 256) and
 * prints the RSS after every tenth of the tasks: the curve must be
 * flat, not grow by an agent's bookkeeping per task.  A million real
 * agent processes would take an hour on two cores; the ledger is where
 * the per-agent state lived (the dispatcher forgets an agent when it
 * leaves).
 *
 *   bench-churn [N]      (default 1,000,000) */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "ledger.h"

static long
peak_rss_kib (void)
{
  struct rusage ru;
  getrusage (RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

static long
rss_kib (void)
{
  g_autofree gchar *text = NULL;
  if (!g_file_get_contents ("/proc/self/statm", &text, NULL, NULL))
    return -1;
  long pages = 0, resident = 0;
  if (sscanf (text, "%ld %ld", &pages, &resident) != 2)
    return -1;
  return resident * (sysconf (_SC_PAGESIZE) / 1024);
}

int
main (int argc, char **argv)
{
  guint64 n = argc > 1 ? g_ascii_strtoull (argv[1], NULL, 10) : 1000000;
  if (n < 10)
    {
      fprintf (stderr, "usage: bench-churn [N >= 10]\n");
      return 2;
    }
  g_autoptr (GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("datc-churn-XXXXXX", &error);
  g_assert_no_error (error);
  /* ~40-byte commands, as in bench-core memory. */
  GString *text = g_string_sized_new (n * 16);
  for (guint64 i = 0; i < n; i++)
    g_string_append (text, "/bin/true\n");
  DatcBag *bag = datc_bag_new ();
  if (!datc_bag_load_data (bag, "t.txt", text->str, text->len, DATC_TASKFILE_LINES, &error))
    g_error ("%s", error->message);
  g_string_free (text, TRUE);
  DatcLedgerOptions o = { 0 };
  DatcLedger *l = datc_ledger_open (dir, bag, "t.txt", "00", &o, &error);
  if (l == NULL)
    g_error ("%s", error->message);
  GArray *picked = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  GBytes *empty = g_bytes_new_static ("", 0);
  gint64 t0 = g_get_monotonic_time ();
  long base = rss_kib ();
  printf ("%10s %14s %14s %12s\n", "agents", "rss_kib", "peak_rss_kib", "live_agents");
  for (guint64 i = 1; i <= n; i++)
    {
      gchar id[64];
      g_snprintf (id, sizeof id, "node-%" G_GUINT64_FORMAT "-deadbeef", i);
      /* The provisioner journals each proxy it submits and sees end. */
      datc_ledger_proxy_event (l, "direct", id, id, "submitted");
      guint32 agent = datc_ledger_agent_hello (l, id, "direct", id, "node");
      DatcDispatchRequest req = { .agent = agent, .max = 1, .budget_ms = G_MAXUINT64 };
      g_array_set_size (picked, 0);
      guint got = datc_ledger_dispatch (l, &req, picked);
      g_assert_cmpuint (got, ==, 1);
      gint64 now = g_get_real_time ();
      DatcResult r = {
        .id = i,
        .attempt = 1,
        .status = DATC_STATUS_EXITED,
        .started_us = now,
        .finished_us = now,
        .out = empty,
        .err = empty,
      };
      datc_ledger_take_result (l, agent, &r, NULL, &error);
      g_assert_no_error (error);
      datc_ledger_agent_gone (l, agent, FALSE);
      datc_ledger_proxy_event (l, "direct", id, id, "ended");
      if (i % 256 == 0 && !datc_ledger_commit (l, &error))
        g_error ("%s", error->message);
      if (i % (n / 10) == 0)
        printf ("%10" G_GUINT64_FORMAT " %14ld %14ld %12u\n", i, rss_kib (), peak_rss_kib (),
                datc_ledger_live_agents (l));
    }
  if (!datc_ledger_commit (l, &error))
    g_error ("%s", error->message);
  double s = (g_get_monotonic_time () - t0) / 1e6;
  printf ("# %" G_GUINT64_FORMAT " agents in %.1f s; RSS %ld KiB before the first, %ld after the "
          "last (%+.1f bytes per agent)\n",
          n, s, base, rss_kib (), (rss_kib () - base) * 1024.0 / (double) n);
  datc_ledger_free (l);
  datc_bag_free (bag);
  g_array_unref (picked);
  g_bytes_unref (empty);
  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  return system (cmd) == 0 ? 0 : 1;
}
