/* bench-replay.c: how fast a resumed master replays its journal (issue 17).
 * Builds, through the ledger API, the journal a `datc run --exec none` of
 * N tasks (default 10,000,000) leaves when killed after a fraction F of
 * them (0.5): per agent, DISPATCH records of 64 tasks, a RESULT per task
 * (class exit, real timestamps), one task in 1,000 given back and handed
 * out again, the last batch still running.  Then, R times (3): the task
 * file's load, the journal read and checksummed alone (datc_journal_scan,
 * no callback), every record decoded (journalrec.c), and the whole
 * datc_ledger_open, compaction off (with `compact`: at datc run's thresholds,
 * as a resume compacts before it serves; the first round then leaves a
 * compacted journal to the next), and the task file's load as a start does
 * it (read from disk and hashed).  Numbers only: see benchmarks/README.md,
 * "Replay".
 *
 *   bench-replay [N] [F] [R] [AGENTS] [compact] */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "journal.h"
#include "journalrec.h"
#include "ledger.h"
#include "sha256.h"

/* bench-scale's tasks: ~44-byte null commands. */
static GString *
task_text (guint64 n)
{
  GString *text = g_string_sized_new (n * 44);
  for (guint64 i = 1; i <= n; i++)
    g_string_append_printf (text, "/usr/bin/printf %%s\\n parameter-set-%08" G_GUINT64_FORMAT "\n",
                            i);
  return text;
}

/* The start's own load: the task file read from disk and hashed, as
 * datc run does it (the page cache warm from the first round on). */
static double
load_file_s (const char *path)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *sha = NULL;
  gint64 t0 = g_get_monotonic_time ();
  DatcBag *bag = datc_bag_new ();
  if (!datc_bag_load_file (bag, path, DATC_TASKFILE_LINES, &sha, &error))
    g_error ("%s", error->message);
  double s = (g_get_monotonic_time () - t0) / 1e6;
  datc_bag_free (bag);
  return s;
}

static DatcBag *
load_bag (const GString *text, double *load_s)
{
  g_autoptr (GError) error = NULL;
  gint64 t0 = g_get_monotonic_time ();
  DatcBag *bag = datc_bag_new ();
  if (!datc_bag_load_data (bag, "tasks.txt", text->str, text->len, DATC_TASKFILE_LINES, &error))
    g_error ("%s", error->message);
  *load_s = (g_get_monotonic_time () - t0) / 1e6;
  return bag;
}

/* User + system CPU of this process, in seconds: the machine is shared,
 * so the wall time also counts what others took from us. */
static double
cpu_s (void)
{
  struct rusage ru;
  getrusage (RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec
         + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static gboolean compact_on_open;

static DatcLedger *
open_ledger (const char *dir, DatcBag *bag, double *open_s, double *open_cpu_s)
{
  g_autoptr (GError) error = NULL;
  DatcLedgerOptions o = { .compact_min_bytes = compact_on_open ? 0 : G_MAXUINT64 };
  gint64 t0 = g_get_monotonic_time ();
  double c0 = cpu_s ();
  DatcLedger *l = datc_ledger_open (dir, bag, "tasks.txt", "00", &o, &error);
  if (l == NULL)
    g_error ("%s", error->message);
  *open_s = (g_get_monotonic_time () - t0) / 1e6;
  *open_cpu_s = cpu_s () - c0;
  return l;
}

static void
build (const char *dir, const GString *text, guint64 n, double fraction, guint n_agents)
{
  g_autoptr (GError) error = NULL;
  double s, c;
  DatcBag *bag = load_bag (text, &s);
  DatcLedger *l = open_ledger (dir, bag, &s, &c);
  g_autofree guint32 *agents = g_new (guint32, n_agents);
  for (guint a = 0; a < n_agents; a++)
    {
      g_autofree gchar *id = g_strdup_printf ("vm-%u-f7290143", 22401 + a);
      g_autofree gchar *proxy = g_strdup_printf ("local-aebf-%u", a + 1);
      agents[a] = datc_ledger_agent_hello (l, id, "local", proxy, "vm");
    }
  GArray *picked = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  GBytes *empty = g_bytes_new_static ("", 0);
  guint64 target = (guint64) (n * fraction), done = 0, batches = 0;

  for (guint a = 0; done < target; a = (a + 1) % n_agents)
    {
      g_array_set_size (picked, 0);
      DatcDispatchRequest req = { .agent = agents[a], .max = 64, .budget_ms = G_MAXUINT64 };
      guint got = datc_ledger_dispatch (l, &req, picked);
      if (got == 0)
        break;
      for (guint i = 0; i < got && done < target; i++)
        {
          DatcTaskKey *k = &g_array_index (picked, DatcTaskKey, i);
          if (k->id % 1000 == 0 && k->attempt == 1)
            {
              datc_ledger_requeue (l, agents[a], k->id, k->attempt);
              continue;
            }
          gint64 now = g_get_real_time ();
          DatcResult res = { .id = k->id,
                             .attempt = k->attempt,
                             .status = DATC_STATUS_EXITED,
                             .started_us = now,
                             .finished_us = now,
                             .out = empty,
                             .err = empty };
          if (datc_ledger_take_result (l, agents[a], &res, NULL, &error) != DATC_RESULT_ACCEPTED)
            g_error ("result %" G_GUINT64_FORMAT " not taken", k->id);
          done++;
        }
      /* Group commits as a busy master makes them, without an fsync per
       * batch. */
      if (++batches % 64 == 0 && !datc_ledger_commit (l, &error))
        g_error ("%s", error->message);
    }
  if (!datc_ledger_commit (l, &error))
    g_error ("%s", error->message);
  g_array_unref (picked);
  g_bytes_unref (empty);
  datc_ledger_free (l);
  datc_bag_free (bag);
}

static gboolean
decode_only (const guint8 *payload, gsize len, gpointer user_data, GError **error)
{
  g_auto (DatcRecord) rec = { 0 };
  return datc_record_decode (payload, len, &rec, error);
}

int
main (int argc, char **argv)
{
  guint64 n = argc > 1 ? g_ascii_strtoull (argv[1], NULL, 10) : 10000000;
  double fraction = argc > 2 ? g_ascii_strtod (argv[2], NULL) : 0.5;
  guint rounds = argc > 3 ? (guint) g_ascii_strtoull (argv[3], NULL, 10) : 3;
  guint n_agents = argc > 4 ? (guint) g_ascii_strtoull (argv[4], NULL, 10) : 1;
  gboolean compact = argc > 5 && g_str_equal (argv[5], "compact");
  g_autoptr (GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("datc-replay-XXXXXX", &error);
  g_autofree gchar *journal = g_build_filename (dir, "journal", NULL);
  if (n == 0 || n_agents == 0 || fraction <= 0 || fraction > 1)
    {
      g_printerr ("usage: bench-replay [TASKS] [FRACTION DONE] [ROUNDS] [AGENTS] [compact]\n");
      return 2;
    }

  GString *text = task_text (n);
  g_autofree gchar *task_path = g_build_filename (dir, "tasks.txt", NULL);
  if (!g_file_set_contents (task_path, text->str, (gssize) text->len, &error))
    g_error ("%s", error->message);
  gint64 t0 = g_get_monotonic_time ();
  build (dir, text, n, fraction, n_agents);
  DatcJournalRecovery rec;
  if (!datc_journal_scan (journal, NULL, NULL, &rec, &error))
    g_error ("%s", error->message);
  printf ("tasks %" G_GUINT64_FORMAT ", %.0f%% done, %u agent(s): journal of %" G_GUINT64_FORMAT
          " records, %.1f MiB (built in %.1f s)\n",
          n, fraction * 100, n_agents, rec.records, rec.valid_bytes / 1048576.0,
          (g_get_monotonic_time () - t0) / 1e6);

  compact_on_open = compact;
  for (guint r = 0; r < rounds; r++)
    {
      double load_s, scan_s, decode_s, open_s, open_cpu;
      t0 = g_get_monotonic_time ();
      if (!datc_journal_scan (journal, NULL, NULL, &rec, &error))
        g_error ("%s", error->message);
      scan_s = (g_get_monotonic_time () - t0) / 1e6;
      t0 = g_get_monotonic_time ();
      if (!datc_journal_scan (journal, decode_only, NULL, &rec, &error))
        g_error ("%s", error->message);
      decode_s = (g_get_monotonic_time () - t0) / 1e6;
      DatcBag *bag = load_bag (text, &load_s);
      DatcLedger *l = open_ledger (dir, bag, &open_s, &open_cpu);
      datc_ledger_free (l);
      datc_bag_free (bag);
      double file_s = load_file_s (task_path);
      /* What the hash alone took before sha256.c: GLib's, in memory. */
      gint64 g0 = g_get_monotonic_time ();
      g_free (
          g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) text->str, text->len));
      double glib_s = (g_get_monotonic_time () - g0) / 1e6;
      gchar hex[DATC_SHA256_HEX_LEN + 1];
      g0 = g_get_monotonic_time ();
      datc_sha256_hex_of (text->str, text->len, hex);
      double ours_s = (g_get_monotonic_time () - g0) / 1e6;
      printf ("round %u: load %.3f s | read+crc %.3f s (%.0f records/s) | + decode %.3f s "
              "(%.0f/s) | ledger open %.3f s (CPU %.3f s): %.0f records/s, %.0f with the load "
              "| the task file read and hashed (SHA-256 %s) %.3f s, %.0f lines/s | the hash "
              "alone %.3f s, GLib's %.3f s\n",
              r + 1, load_s, scan_s, rec.records / scan_s, decode_s, rec.records / decode_s, open_s,
              open_cpu, rec.records / open_s, rec.records / (open_s + load_s),
              datc_sha256_accelerated () ? "SHA-NI" : "portable", file_s, n / file_s, ours_s,
              glib_s);
    }
  g_string_free (text, TRUE);
  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  return system (cmd) == 0 ? 0 : 1;
}
