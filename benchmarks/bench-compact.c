/* bench-compact.c: journal compaction on N tasks (default 1,000,000).
 * Every task is handed out and given back R times (re-queues: the history
 * a checkpoint forgets), then finished; the journal is compacted while
 * dispatch goes on.  Prints the journal's bytes per task before and after,
 * the longest the caller's thread was held by the compaction (the start,
 * a fork, whose own time is shown with the process's RSS and the part of
 * it in huge pages; then the switch), the longest commit meanwhile against
 * a baseline of the same commits without a compaction, and the time a
 * resume takes to replay each journal.
 * Numbers only: see benchmarks/README.md, "Issue 17: journal compaction". */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ledger.h"

/* A "Name:   N kB" field of a /proc/self file, KiB (0 when unknown):
 * VmRSS (what fork copies the page tables of), VmHWM (the peak), and
 * smaps_rollup's AnonHugePages (the part of it in 2 MiB pages, one
 * page-table entry each). */
static guint64
proc_kib (const char *file, const char *field)
{
  g_autofree gchar *text = NULL;
  g_autofree gchar *key = g_strconcat ("\n", field, ":", NULL);
  if (!g_file_get_contents (file, &text, NULL, NULL))
    return 0;
  const char *p = strstr (text, key);
  return p != NULL ? g_ascii_strtoull (p + strlen (key), NULL, 10) : 0;
}

/* Dispatch and re-queue a batch, then commit: the loop's work while a
 * compaction runs.  Returns how long the commit took, µs. */
static gint64
dispatch_and_commit (DatcLedger *l, guint32 agent, GArray *picked)
{
  g_autoptr (GError) error = NULL;
  g_array_set_size (picked, 0);
  DatcDispatchRequest req = { .agent = agent, .max = 64, .budget_ms = G_MAXUINT64 };
  guint got = datc_ledger_dispatch (l, &req, picked);
  for (guint i = 0; i < got; i++)
    {
      DatcTaskKey *k = &g_array_index (picked, DatcTaskKey, i);
      datc_ledger_requeue (l, agent, k->id, k->attempt);
    }
  gint64 c0 = g_get_monotonic_time ();
  if (!datc_ledger_commit (l, &error))
    g_error ("%s", error->message);
  return g_get_monotonic_time () - c0;
}

/* A commit this long (µs) is counted: one outlier is told from many. */
#define SLOW_COMMIT_US 10000

static DatcLedger *
open_at (const char *dir, DatcBag **bag, guint64 n, double *open_s)
{
  g_autoptr (GError) error = NULL;
  GString *text = g_string_sized_new (n * 16);
  for (guint64 i = 0; i < n; i++)
    g_string_append (text, "/bin/true\n");
  *bag = datc_bag_new ();
  if (!datc_bag_load_data (*bag, "t.txt", text->str, text->len, DATC_TASKFILE_LINES, &error))
    g_error ("%s", error->message);
  g_string_free (text, TRUE);
  DatcLedgerOptions o = { .compact_min_bytes = G_MAXUINT64 };
  gint64 t0 = g_get_monotonic_time ();
  DatcLedger *l = datc_ledger_open (dir, *bag, "t.txt", "00", &o, &error);
  if (l == NULL)
    g_error ("%s", error->message);
  *open_s = (g_get_monotonic_time () - t0) / 1e6;
  return l;
}

int
main (int argc, char **argv)
{
  guint64 n = argc > 1 ? g_ascii_strtoull (argv[1], NULL, 10) : 1000000;
  guint rounds = argc > 2 ? (guint) g_ascii_strtoull (argv[2], NULL, 10) : 3;
  g_autoptr (GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("datc-compact-XXXXXX", &error);
  DatcBag *bag;
  double open_s;
  DatcLedger *l = open_at (dir, &bag, n, &open_s);
  guint32 agent = datc_ledger_agent_hello (l, "agent-1", "local", "p1", "h1");
  GArray *picked = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  GBytes *empty = g_bytes_new_static ("", 0);
  const guint batch = 64;

  for (guint r = 0; r < rounds; r++)
    for (guint64 done = 0; done < n;)
      {
        g_array_set_size (picked, 0);
        DatcDispatchRequest req = { .agent = agent, .max = batch, .budget_ms = G_MAXUINT64 };
        guint got = datc_ledger_dispatch (l, &req, picked);
        for (guint i = 0; i < got; i++)
          {
            DatcTaskKey *k = &g_array_index (picked, DatcTaskKey, i);
            datc_ledger_requeue (l, agent, k->id, k->attempt);
          }
        done += got;
        if (!datc_ledger_commit (l, &error))
          g_error ("%s", error->message);
      }
  /* Half the tasks finish: their results stay in any journal. */
  for (guint64 done = 0; done < n / 2;)
    {
      g_array_set_size (picked, 0);
      DatcDispatchRequest req = { .agent = agent, .max = batch, .budget_ms = G_MAXUINT64 };
      guint got = datc_ledger_dispatch (l, &req, picked);
      for (guint i = 0; i < got; i++)
        {
          DatcTaskKey *k = &g_array_index (picked, DatcTaskKey, i);
          DatcResult res = { .id = k->id,
                             .attempt = k->attempt,
                             .status = DATC_STATUS_EXITED,
                             .started_us = 1,
                             .finished_us = 2,
                             .out = empty,
                             .err = empty };
          datc_ledger_take_result (l, agent, &res, NULL, &error);
        }
      done += got;
      if (!datc_ledger_commit (l, &error))
        g_error ("%s", error->message);
    }
  DatcLedgerJournalInfo before;
  datc_ledger_journal_info (l, &before);

  /* What the campaign wrote (results.jsonl, ~1.7 GB dirty at 10M tasks)
   * written out first: left to the kernel, it goes 30 s later, in the
   * middle of the compaction, and commits wait behind it (30-110 ms at 10M
   * tasks, with or without a compaction). */
  sync ();

  /* The baseline: the same commits for 5 s without a compaction. */
  gint64 b0 = g_get_monotonic_time (), base_worst = 0;
  guint64 base_commits = 0, base_slow = 0;
  while (g_get_monotonic_time () - b0 < 5 * G_USEC_PER_SEC)
    {
      gint64 us = dispatch_and_commit (l, agent, picked);
      base_worst = MAX (base_worst, us);
      base_slow += us > SLOW_COMMIT_US;
      base_commits++;
    }

  /* Compact while dispatch goes on: the start (the fork), the longest
   * commit seen meanwhile and the last one (the switch). */
  guint64 rss_kib = proc_kib ("/proc/self/status", "VmRSS");
  guint64 huge_kib = proc_kib ("/proc/self/smaps_rollup", "AnonHugePages");
  gint64 t0 = g_get_monotonic_time (), worst_commit = 0, last_commit = 0;
  if (!datc_ledger_compact (l, FALSE, &error))
    g_error ("%s", error->message);
  gint64 start_us = g_get_monotonic_time () - t0;
  DatcLedgerJournalInfo info;
  guint64 commits = 0, slow = 0;
  do
    {
      last_commit = dispatch_and_commit (l, agent, picked);
      worst_commit = MAX (worst_commit, last_commit);
      slow += last_commit > SLOW_COMMIT_US;
      commits++;
      datc_ledger_journal_info (l, &info);
    }
  while (info.compacting);
  double compact_s = (g_get_monotonic_time () - t0) / 1e6;
  datc_ledger_free (l);
  datc_bag_free (bag);

  double reopen_s;
  l = open_at (dir, &bag, n, &reopen_s);
  printf ("tasks %" G_GUINT64_FORMAT ", %u re-queue rounds, %" G_GUINT64_FORMAT " results\n", n,
          rounds, n / 2);
  printf ("journal before: %" G_GUINT64_FORMAT " bytes (%.1f per task)\n", before.bytes,
          (double) before.bytes / n);
  printf ("journal after:  %" G_GUINT64_FORMAT
          " bytes (%.1f per task), checkpoint %" G_GUINT64_FORMAT "\n",
          info.bytes, (double) info.bytes / n, info.checkpoint_bytes);
  printf ("compaction: %.3f s in all, %" G_GUINT64_FORMAT " commits meanwhile\n", compact_s,
          commits);
  printf ("dispatch pause: longest hold %.2f ms (start or switch), longest commit %.2f ms "
          "(%" G_GUINT64_FORMAT " over 10 ms)\n",
          info.pause_max_us / 1e3, worst_commit / 1e3, slow);
  printf ("  start %.2f ms (of which fork %.2f ms, RSS %.0f MiB, %.0f MiB of it huge pages), "
          "switch commit %.2f ms\n",
          start_us / 1e3, info.fork_max_us / 1e3, rss_kib / 1024.0, huge_kib / 1024.0,
          last_commit / 1e3);
  printf ("baseline: longest commit %.2f ms (%" G_GUINT64_FORMAT
          " over 10 ms) in %" G_GUINT64_FORMAT " commits over 5 s without a compaction\n",
          base_worst / 1e3, base_slow, base_commits);
  printf ("resume: replaying the compacted journal took %.3f s; peak RSS %.0f MiB\n", reopen_s,
          proc_kib ("/proc/self/status", "VmHWM") / 1024.0);
  datc_ledger_free (l);
  datc_bag_free (bag);
  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  return system (cmd) == 0 ? 0 : 1;
}
