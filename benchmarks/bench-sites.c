/* bench-sites.c: the same bag of short tasks on the multi-site test bed
 * (tests/multisite.h: Slurm and Grid Engine in their own namespaces,
 * reached over SSH, and a fork site beside the master), with user
 * `competitor` holding every CPU of the Slurm site for the first
 * COMPETITOR seconds, in `pull`, `static` and `direct` modes.  Prints, per
 * mode: turnaround, proxies submitted, scheduler commands issued (submit,
 * poll and cancel, from the trace's site_commands events), slot-seconds
 * held idle (agents' slots from connect to exit, less the tasks' run
 * times), and tasks per site.
 * Nothing here asserts.
 *
 *   flock /tmp/datc-sge.lock env DATC=... DATC_AGENT=... DATC_TESTBED=... \
 *     bench-sites [TASKS=240] [TASK_SECONDS=0.5] [COMPETITOR_SECONDS=20] [RUNS=1]
 *
 * Every mode gets the same slots: slurm and sge 2 proxies x 2 slots, the
 * fork site 1 x 2; direct mode has 1-slot proxies, so its sites allow 4,
 * 4 and 2 of them at once.  Between runs the clusters are emptied (the
 * competitor's job cancelled, every queue awaited empty), so each run
 * starts from the same state. */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "multisite.h"

typedef struct {
  double turnaround_s;      /* campaign_started to campaign_finished */
  guint proxies;            /* proxy_submitted */
  guint commands;           /* site_commands: submit + poll + cancel */
  guint submits, polls, cancels;
  double held_slot_s;       /* agents: slots x (exit - connect) */
  double busy_slot_s;       /* tasks: finished - started */
  guint slurm, sge, here;   /* tasks done per site */
  guint done;
  int status;
} Outcome;

static void
die (const char *what, GError *error)
{
  g_printerr ("bench-sites: %s: %s\n", what, error ? error->message : "failed");
  exit (1);
}

static gchar *
site_groups (MsBed *bed, const char *workdir, const char *mode)
{
  gboolean direct = g_str_equal (mode, "direct");
  const char *batch = direct ? "slots_per_proxy = 1\nmax_proxies = 4\nwalltime = 10m\n"
                             : "slots_per_proxy = 2\nmax_proxies = 2\nwalltime = 10m\n";
  g_autofree gchar *slurm = ms_site_group (bed, MS_SLURM, "slurm", "slurm", workdir, batch);
  g_autofree gchar *sge = ms_site_group (bed, MS_SGE, "sge", "sge", workdir, batch);
  return g_strdup_printf ("[master]\nlisten = tcp://%s:0\n\n%s%s[site here]\nscheduler = fork\n%s",
                          bed->master_addr, slurm, sge,
                          direct ? "slots_per_proxy = 1\nmax_proxies = 2\n"
                                 : "slots_per_proxy = 2\nmax_proxies = 1\n");
}

static int
run_datc (MsBed *bed, const char *dir, const char *sites, const char *tasks, const char *mode,
          const char *log)
{
  /* Each campaign starts with no queue waits of earlier ones (the per-user
   * cache, master/waitcache.h): rounds and modes compare on equal terms. */
  g_autofree gchar *cache = g_strdup_printf ("XDG_CACHE_HOME=%s.xdg-cache", dir);
  const char *argv[] = { "env", cache, g_getenv ("DATC"), "run", "--dir", dir, "--sites", sites,
                         "--mode", mode, tasks, NULL };
  g_auto (GStrv) in_ns = ms_in_netns (bed->ns_master, argv);
  g_autofree gchar *err = NULL;
  gint status = 0;
  g_autoptr (GError) error = NULL;
  if (!g_spawn_sync (NULL, in_ns, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, &err, &status,
                     &error))
    die ("datc run", error);
  g_file_set_contents (log, err, -1, NULL);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

/* Agents' slots held from connect to exit (or loss); an agent still
 * connected at the end (none should be) counts to campaign_finished. */
static void
read_trace (const char *dir, Outcome *o)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) trace = ms_read_trace (dir, &error);
  if (trace == NULL)
    die (dir, error);
  g_autoptr (GHashTable) agents = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  gint64 start = 0, end = 0;
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *e = trace->pdata[i];
      const char *ev = ms_str (e, "event");
      gint64 t = ms_int (e, "time");
      if (g_str_equal (ev, "campaign_started") && start == 0)
        start = t;
      else if (g_str_equal (ev, "campaign_finished"))
        end = t;
      else if (g_str_equal (ev, "proxy_submitted"))
        o->proxies++;
      else if (g_str_equal (ev, "site_commands"))
        {
          /* The site manager's count per site, at the end; files put on
           * the site (the agent key) are not scheduler commands. */
          o->submits += (guint) ms_int (e, "submit");
          o->polls += (guint) ms_int (e, "poll");
          o->cancels += (guint) ms_int (e, "cancel");
          o->commands += (guint) (ms_int (e, "submit") + ms_int (e, "poll") + ms_int (e, "cancel"));
        }
      else if (g_str_equal (ev, "agent_connected"))
        {
          gint64 *v = g_new (gint64, 2);
          v[0] = t;
          v[1] = ms_int (e, "slots");
          g_hash_table_replace (agents, g_strdup (ms_str (e, "agent")), v);
        }
      else if (g_str_equal (ev, "agent_exited") || g_str_equal (ev, "agent_lost"))
        {
          gint64 *v = g_hash_table_lookup (agents, ms_str (e, "agent"));
          if (v != NULL)
            {
              o->held_slot_s += v[1] * (t - v[0]) / 1e6;
              g_hash_table_remove (agents, ms_str (e, "agent"));
            }
        }
    }
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, agents);
  while (g_hash_table_iter_next (&it, NULL, &v))
    o->held_slot_s += ((gint64 *) v)[1] * (end - ((gint64 *) v)[0]) / 1e6;
  o->turnaround_s = (end - start) / 1e6;
}

static void
read_results (const char *dir, Outcome *o)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) res = ms_read_results (dir, &error);
  if (res == NULL)
    die (dir, error);
  for (guint i = 0; i < res->len; i++)
    {
      JsonObject *r = res->pdata[i];
      const char *site = ms_str (r, "site");
      o->busy_slot_s += (ms_int (r, "finished") - ms_int (r, "started")) / 1e6;
      o->slurm += g_str_equal (site, "slurm");
      o->sge += g_str_equal (site, "sge");
      o->here += g_str_equal (site, "here");
      o->done += ms_int (r, "exit_code") == 0;
    }
}

/* The clusters hold nothing of ours or the competitor's: what a fresh run
 * starts from. */
static gboolean
clusters_empty (MsBed *bed)
{
  g_autofree gchar *sq = NULL, *qs = NULL;
  const char *squeue[] = { "squeue", "-h", "-o", "%i", NULL };
  const char *qstat[] = { "qstat", "-u", "*", NULL };
  return ms_site_command (bed, MS_SLURM, NULL, squeue, &sq, NULL)
         && ms_site_command (bed, MS_SGE, NULL, qstat, &qs, NULL)
         && g_strstrip (sq)[0] == '\0' && g_strstrip (qs)[0] == '\0';
}

static void
await_clusters_empty (MsBed *bed)
{
  gint64 deadline = g_get_monotonic_time () + 120 * G_USEC_PER_SEC;
  while (!clusters_empty (bed))
    {
      if (g_get_monotonic_time () > deadline)
        die ("the clusters did not empty within 120 s", NULL);
      g_usleep (100000);
    }
}

static Outcome
one_run (MsBed *bed, const char *root, const char *tasks, const char *mode, guint competitor_s,
         guint serial)
{
  Outcome o = { 0 };
  g_autoptr (GError) error = NULL;
  g_autofree gchar *name = g_strdup_printf ("%s-%u", mode, serial);
  g_autofree gchar *work_parent = g_build_filename (root, name, NULL);
  g_mkdir_with_parents (work_parent, 0755);
  g_autofree gchar *workdirs = ms_site_workdir_root (bed, work_parent, &error);
  if (workdirs == NULL)
    die ("workdir", error);
  g_autofree gchar *ini = site_groups (bed, workdirs, mode);
  g_autofree gchar *sites = g_build_filename (work_parent, "sites.ini", NULL);
  g_autofree gchar *dir = g_build_filename (work_parent, "c", NULL);
  g_autofree gchar *log = g_build_filename (work_parent, "datc-run.log", NULL);
  if (!g_file_set_contents (sites, ini, -1, &error))
    die (sites, error);

  await_clusters_empty (bed);
  g_autofree gchar *job = NULL;
  if (competitor_s > 0 && !ms_competitor_fill_slurm (bed, competitor_s, &job, &error))
    die ("competitor", error);
  o.status = run_datc (bed, dir, sites, tasks, mode, log);
  if (job != NULL && !ms_competitor_cancel (bed, job, &error))
    die ("cancelling the competitor", error);
  read_trace (dir, &o);
  read_results (dir, &o);
  return o;
}

static void
print_row (const char *mode, guint run, const Outcome *o)
{
  double idle = o->held_slot_s - o->busy_slot_s;
  printf ("| %-6s | %u | %6.1f | %3u | %4u (%u submit, %u poll, %u cancel) | %6.1f of %6.1f "
          "| %u / %u / %u | %u%s |\n",
          mode, run, o->turnaround_s, o->proxies, o->commands, o->submits, o->polls, o->cancels,
          idle, o->held_slot_s, o->slurm, o->sge, o->here, o->done,
          o->status == 0 ? "" : " (datc run failed)");
  fflush (stdout);
}

int
main (int argc, char **argv)
{
  guint n = argc > 1 ? (guint) g_ascii_strtoull (argv[1], NULL, 10) : 240;
  double task_s = argc > 2 ? g_ascii_strtod (argv[2], NULL) : 0.5;
  guint competitor_s = argc > 3 ? (guint) g_ascii_strtoull (argv[3], NULL, 10) : 20;
  guint runs = argc > 4 ? (guint) g_ascii_strtoull (argv[4], NULL, 10) : 1;
  if (n == 0 || n > 100000 || task_s < 0 || task_s > 600 || runs == 0 || runs > 20
      || g_getenv ("DATC") == NULL || g_getenv ("DATC_TESTBED") == NULL)
    {
      g_printerr ("usage: DATC=... DATC_AGENT=... DATC_TESTBED=... bench-sites [TASKS] "
                  "[TASK_SECONDS] [COMPETITOR_SECONDS] [RUNS]\n");
      return 2;
    }
  g_autoptr (GError) error = NULL;
  g_autofree gchar *root = g_strdup_printf ("/tmp/datc-bench-sites-%d", (int) getpid ());
  gint64 t0 = g_get_monotonic_time ();
  g_autoptr (MsBed) bed = ms_bed_up (root, &error);
  if (bed == NULL)
    die ("test bed", error);
  g_printerr ("bench-sites: test bed up in %.1f s (%s)\n", (g_get_monotonic_time () - t0) / 1e6,
              root);

  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (t, "sleep %g\n", task_s);
  g_autofree gchar *tasks = g_build_filename (root, "tasks.txt", NULL);
  if (!g_file_set_contents (tasks, t->str, -1, &error))
    die (tasks, error);

  printf ("%u tasks of sleep %g s; user competitor holds every Slurm CPU for the first %u s\n\n",
          n, task_s, competitor_s);
  printf ("| mode | run | turnaround s | proxies | scheduler commands | idle slot-s of held "
          "| tasks slurm / sge / here | done |\n|---|---|---|---|---|---|---|---|\n");
  const char *modes[] = { "pull", "static", "direct" };
  for (guint r = 1; r <= runs; r++)
    for (guint m = 0; m < G_N_ELEMENTS (modes); m++)
      {
        Outcome o = one_run (bed, root, tasks, modes[m], competitor_s, r);
        print_row (modes[m], r, &o);
      }

  t0 = g_get_monotonic_time ();
  int rc = 0;
  if (!ms_bed_down (bed, &error))
    {
      g_printerr ("bench-sites: %s\n", error->message);
      rc = 1;
    }
  g_printerr ("bench-sites: test bed down in %.1f s; campaigns kept in %s\n",
              (g_get_monotonic_time () - t0) / 1e6, root);
  return rc;
}
