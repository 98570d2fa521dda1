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
 * starts from the same state.
 *
 *     bench-sites held|straggler [RUNS=2]
 *
 * Issue 15: a scenario, in pull mode, as plain pull (--max-replicas 1),
 * pull with replication (--max-replicas 2) and adaptive placement
 * (--max-replicas 1, migrate_after on the batch sites), each measured
 * beside `datc analyze predict` of the same scenario written as a
 * scenario file (benchmarks/scenarios/NAME.ini: policies pull, pull+rep,
 * pull+mig) and beside the model of the campaign that ran (`datc analyze
 * trace`, what `datc report` draws).  `held`: 4 x sleep 5 on Slurm (first,
 * as Grid Engine is known to start proxies after 8 s: a waits cache of
 * earlier campaigns) while user competitor holds it for 30 s; Grid Engine
 * has room.  `straggler`: 120 tasks that sleep 1 s, 4 s under Grid Engine
 * (the job's $JOB_ID), on all three sites. */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "multisite.h"

typedef struct {
  double turnaround_s; /* campaign_started to campaign_finished */
  guint proxies;       /* proxy_submitted */
  guint commands;      /* site_commands: submit + poll + cancel */
  guint submits, polls, cancels;
  double held_slot_s;     /* agents: slots x (exit - connect) */
  double busy_slot_s;     /* tasks: finished - started */
  guint slurm, sge, here; /* tasks done per site */
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
          const char *replicas, const char *log)
{
  /* Each campaign starts with no queue waits of earlier ones (the per-user
   * cache, master/waitcache.h) but those the scenario puts there: rounds
   * and modes compare on equal terms. */
  g_autofree gchar *cache = g_strdup_printf ("XDG_CACHE_HOME=%s.xdg-cache", dir);
  const char *argv[]
      = { "env",    cache, g_getenv ("DATC"), "run",    "--dir", dir, "--sites", sites,
          "--mode", mode,  "--max-replicas",  replicas, tasks,   NULL };
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
         && ms_site_command (bed, MS_SGE, NULL, qstat, &qs, NULL) && g_strstrip (sq)[0] == '\0'
         && g_strstrip (qs)[0] == '\0';
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
  o.status = run_datc (bed, dir, sites, tasks, mode, "2", log);
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

/* ---- issue 15: measured against the model ------------------------------ */

typedef struct {
  const char *name;     /* as printed */
  const char *replicas; /* --max-replicas */
  gboolean migrate;     /* migrate_after on the batch sites, else 0 (never) */
  const char *policy;   /* the model's policy for it */
} Variant;

static const Variant variants[] = {
  { "pull", "1", FALSE, "pull" },
  { "pull+rep", "2", FALSE, "pull+rep" },
  { "adaptive", "1", TRUE, "pull+mig" },
};

typedef struct {
  gboolean held; /* else straggler */
  guint tasks;
  const char *task_line;
  guint competitor_s;
} Scenario;

typedef struct {
  double turnaround_s;  /* campaign_started to campaign_finished */
  double last_result_s; /* campaign_started to the last task's end */
  guint moved, copies, copies_cancelled, done;
  double wait_sum[3], task_sum[3]; /* slurm, sge, here */
  guint waits[3], ran[3];
  double model_actual, model_pull, model_rep; /* datc analyze trace */
  int status;
} Measured;

static int
site_of (const char *site)
{
  return g_str_equal (site, "slurm") ? 0 : g_str_equal (site, "sge") ? 1 : 2;
}

static gchar *
scenario_groups (MsBed *bed, const char *workdir, const Scenario *sc, const Variant *v)
{
  const char *migrate = v->migrate ? "migrate_after = 8s\n" : "migrate_after = 0\n";
  /* Slurm's 5 s command timeout: Grid Engine, predicted to start proxies
   * after 8 s (the cache below), is not taken while Slurm is prepared. */
  g_autofree gchar *batch
      = g_strdup_printf ("slots_per_proxy = 2\nmax_proxies = 2\nwalltime = 10m\n"
                         "command_timeout = 5s\n%s",
                         migrate);
  g_autofree gchar *slurm = ms_site_group (bed, MS_SLURM, "slurm", "slurm", workdir, batch);
  g_autofree gchar *sge = ms_site_group (bed, MS_SGE, "sge", "sge", workdir, batch);
  return g_strdup_printf ("[master]\nlisten = tcp://%s:0\n\n%s%s%s", bed->master_addr, slurm, sge,
                          sc->held ? ""
                                   : "[site here]\nscheduler = fork\nslots_per_proxy = 2\n"
                                     "max_proxies = 1\n");
}

/* Earlier campaigns saw Grid Engine start proxies after 8 s (80 waits,
 * enough for the QBETS bound): what makes the plan choose Slurm first. */
static void
seed_waits_cache (const char *dir)
{
  g_autofree gchar *cache_dir = g_strdup_printf ("%s.xdg-cache/datc", dir);
  g_mkdir_with_parents (cache_dir, 0700);
  g_autoptr (GString) w = g_string_new (NULL);
  for (guint i = 1; i <= 80; i++)
    g_string_append_printf (w, "{\"site\":\"sge|sge|\",\"wait_s\":8,\"time\":%u}\n", 1000 + i);
  g_autofree gchar *file = g_build_filename (cache_dir, "waits.jsonl", NULL);
  g_autoptr (GError) error = NULL;
  if (!g_file_set_contents (file, w->str, -1, &error))
    die (file, error);
}

/* stdout of argv parsed as JSON; NULL on any failure (said). */
static JsonNode *
json_of (const char *const *argv)
{
  g_autofree gchar *out = NULL, *err = NULL;
  gint status = 0;
  g_autoptr (GError) error = NULL;
  if (!g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err,
                     &status, &error)
      || !g_spawn_check_wait_status (status, &error))
    {
      g_printerr ("bench-sites: %s: %s %s\n", argv[1], error->message, err ? err : "");
      return NULL;
    }
  JsonNode *n = json_from_string (out, &error);
  if (n == NULL)
    g_printerr ("bench-sites: %s %s: %s\n", argv[1], argv[2], error->message);
  return n;
}

/* The mean of policies[name] in `o` (a model's JSON), or NAN. */
static double
policy_mean (JsonObject *o, const char *name)
{
  JsonObject *pol = o && json_object_has_member (o, "policies")
                        ? json_object_get_object_member (o, "policies")
                        : NULL;
  if (pol == NULL || !json_object_has_member (pol, name))
    return NAN;
  return json_object_get_double_member (json_object_get_object_member (pol, name), "mean");
}

/* The model of the campaign that ran, as `datc analyze trace --json`
 * gives it (and `datc report` draws): actual, pull and pull+rep. */
static void
trace_model (const char *dir, Measured *m)
{
  m->model_actual = m->model_pull = m->model_rep = NAN;
  const char *argv[] = { g_getenv ("DATC"), "analyze", "trace", dir, "--json", NULL };
  g_autoptr (JsonNode) n = json_of (argv);
  JsonObject *top = n && JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
  if (top == NULL || !json_object_has_member (top, "model")
      || !JSON_NODE_HOLDS_OBJECT (json_object_get_member (top, "model")))
    return;
  JsonObject *model = json_object_get_object_member (top, "model");
  m->model_actual = json_object_get_double_member (model, "actual");
  m->model_pull = policy_mean (model, "pull");
  m->model_rep = policy_mean (model, "pull+rep");
}

static Measured
scenario_run (MsBed *bed, const char *root, const char *tasks, const Scenario *sc, const Variant *v,
              guint serial)
{
  Measured m = { 0 };
  g_autoptr (GError) error = NULL;
  g_autofree gchar *name
      = g_strdup_printf ("%s-%s-%u", sc->held ? "held" : "straggler", v->name, serial);
  g_autofree gchar *work_parent = g_build_filename (root, name, NULL);
  g_mkdir_with_parents (work_parent, 0755);
  g_autofree gchar *workdirs = ms_site_workdir_root (bed, work_parent, &error);
  if (workdirs == NULL)
    die ("workdir", error);
  g_autofree gchar *ini = scenario_groups (bed, workdirs, sc, v);
  g_autofree gchar *sites = g_build_filename (work_parent, "sites.ini", NULL);
  g_autofree gchar *dir = g_build_filename (work_parent, "c", NULL);
  g_autofree gchar *log = g_build_filename (work_parent, "datc-run.log", NULL);
  if (!g_file_set_contents (sites, ini, -1, &error))
    die (sites, error);
  if (sc->held)
    seed_waits_cache (dir);

  await_clusters_empty (bed);
  g_autofree gchar *job = NULL;
  if (sc->competitor_s > 0 && !ms_competitor_fill_slurm (bed, sc->competitor_s, &job, &error))
    die ("competitor", error);
  m.status = run_datc (bed, dir, sites, tasks, "pull", v->replicas, log);
  if (job != NULL && !ms_competitor_cancel (bed, job, &error))
    die ("cancelling the competitor", error);

  g_autoptr (GPtrArray) trace = ms_read_trace (dir, &error);
  if (trace == NULL)
    die (dir, error);
  gint64 start = 0, end = 0;
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *e = trace->pdata[i];
      const char *ev = ms_str (e, "event");
      if (g_str_equal (ev, "campaign_started") && start == 0)
        start = ms_int (e, "time");
      else if (g_str_equal (ev, "campaign_finished"))
        end = ms_int (e, "time");
      else if (g_str_equal (ev, "proxy_migrated"))
        m.moved++;
      else if (g_str_equal (ev, "task_replicated"))
        m.copies++;
      else if (g_str_equal (ev, "task_replica_cancelled"))
        m.copies_cancelled++;
      else if (g_str_equal (ev, "proxy_started") && ms_int (e, "wait_us") >= 0)
        {
          int k = site_of (ms_str (e, "site"));
          m.wait_sum[k] += ms_int (e, "wait_us") / 1e6;
          m.waits[k]++;
        }
    }
  m.turnaround_s = (end - start) / 1e6;
  g_autoptr (GPtrArray) res = ms_read_results (dir, &error);
  if (res == NULL)
    die (dir, error);
  for (guint i = 0; i < res->len; i++)
    {
      JsonObject *r = res->pdata[i];
      int k = site_of (ms_str (r, "site"));
      m.task_sum[k] += (ms_int (r, "finished") - ms_int (r, "started")) / 1e6;
      m.last_result_s = MAX (m.last_result_s, (ms_int (r, "finished") - start) / 1e6);
      m.ran[k]++;
      m.done += ms_int (r, "exit_code") == 0;
    }
  trace_model (dir, &m);
  return m;
}

/* `datc analyze predict` of the scenario file, per policy. */
static void
predict (const char *ini, double predicted[G_N_ELEMENTS (variants)])
{
  const char *argv[] = { g_getenv ("DATC"),        "analyze",  "predict", ini,      "--policies",
                         "pull,pull+rep,pull+mig", "--trials", "400",     "--json", NULL };
  g_autoptr (JsonNode) n = json_of (argv);
  JsonObject *o = n && JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
  for (guint v = 0; v < G_N_ELEMENTS (variants); v++)
    predicted[v] = policy_mean (o, variants[v].policy);
}

static void
print_mean (const double *sum, const guint *n)
{
  for (int k = 0; k < 3; k++)
    {
      if (n[k] == 0)
        printf (" -");
      else
        printf (" %.2f", sum[k] / n[k]);
      printf ("%s", k < 2 ? " /" : " |");
    }
}

static int
run_scenario (MsBed *bed, const char *root, const char *which, guint runs)
{
  Scenario sc = { 0 };
  sc.held = g_str_equal (which, "held");
  sc.tasks = sc.held ? 4 : 120;
  sc.task_line = sc.held ? "sleep 5" : "if [ -n \"$JOB_ID\" ]; then sleep 4; else sleep 1; fi";
  sc.competitor_s = sc.held ? 30 : 0;

  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 0; i < sc.tasks; i++)
    g_string_append_printf (t, "%s\n", sc.task_line);
  g_autofree gchar *tasks = g_build_filename (root, "tasks.txt", NULL);
  g_autoptr (GError) error = NULL;
  if (!g_file_set_contents (tasks, t->str, -1, &error))
    die (tasks, error);
  g_autofree gchar *ini = g_strdup_printf ("%s/%s.ini", BENCH_SCENARIOS, which);
  double predicted[G_N_ELEMENTS (variants)];
  predict (ini, predicted);

  printf ("scenario %s (%s): %u x `%s`%s\n\n", which, ini, sc.tasks, sc.task_line,
          sc.held ? "; user competitor holds every Slurm CPU for the first 30 s" : "");
  /* Measured to campaign_finished (what the other tables here give) and
   * to the last task's end (the model's turnaround: it has no proxies
   * seen ended after the last task). */
  printf ("| variant | run | measured s: finished, last task | predicted s | error vs finished, "
          "last task | trace model: actual, pull, pull+rep | moved | copies (cancelled) "
          "| mean wait s slurm / sge / here | mean task s slurm / sge / here | done |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (guint r = 1; r <= runs; r++)
    for (guint v = 0; v < G_N_ELEMENTS (variants); v++)
      {
        Measured m = scenario_run (bed, root, tasks, &sc, &variants[v], r);
        double err = (predicted[v] - m.turnaround_s) / m.turnaround_s * 100;
        double err_last = (predicted[v] - m.last_result_s) / m.last_result_s * 100;
        printf ("| %s | %u | %.1f, %.1f | %.1f | %+.0f %%, %+.0f %% | %.1f, %.1f, %.1f | %u "
                "| %u (%u) |",
                variants[v].name, r, m.turnaround_s, m.last_result_s, predicted[v], err, err_last,
                m.model_actual, m.model_pull, m.model_rep, m.moved, m.copies, m.copies_cancelled);
        print_mean (m.wait_sum, m.waits);
        print_mean (m.task_sum, m.ran);
        printf (" %u%s |\n", m.done, m.status == 0 ? "" : " (datc run failed)");
        fflush (stdout);
      }
  double load[3];
  if (getloadavg (load, 3) == 3)
    printf ("\nload average at the end: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  return 0;
}

/* The multi-site bed in /tmp/datc-bench-sites-PID (*root, transfer full),
 * or exit 1 saying why. */
static MsBed *
bed_up (gchar **root)
{
  g_autoptr (GError) error = NULL;
  *root = g_strdup_printf ("/tmp/datc-bench-sites-%d", (int) getpid ());
  gint64 t0 = g_get_monotonic_time ();
  MsBed *bed = ms_bed_up (*root, &error);
  if (bed == NULL)
    die ("test bed", error);
  g_printerr ("bench-sites: test bed up in %.1f s (%s)\n", (g_get_monotonic_time () - t0) / 1e6,
              *root);
  return bed;
}

int
main (int argc, char **argv)
{
  if (argc > 1 && (g_str_equal (argv[1], "held") || g_str_equal (argv[1], "straggler")))
    {
      guint runs = argc > 2 ? (guint) g_ascii_strtoull (argv[2], NULL, 10) : 2;
      if (runs == 0 || runs > 20 || g_getenv ("DATC") == NULL || g_getenv ("DATC_TESTBED") == NULL)
        {
          g_printerr ("usage: DATC=... DATC_AGENT=... DATC_TESTBED=... bench-sites "
                      "held|straggler [RUNS]\n");
          return 2;
        }
      g_autoptr (GError) error = NULL;
      g_autofree gchar *root = NULL;
      g_autoptr (MsBed) bed = bed_up (&root);
      int rc = run_scenario (bed, root, argv[1], runs);
      if (!ms_bed_down (bed, &error))
        {
          g_printerr ("bench-sites: %s\n", error->message);
          rc = 1;
        }
      g_printerr ("bench-sites: campaigns kept in %s\n", root);
      return rc;
    }
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
  g_autofree gchar *root = NULL;
  g_autoptr (MsBed) bed = bed_up (&root);

  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (t, "sleep %g\n", task_s);
  g_autofree gchar *tasks = g_build_filename (root, "tasks.txt", NULL);
  if (!g_file_set_contents (tasks, t->str, -1, &error))
    die (tasks, error);

  printf ("%u tasks of sleep %g s; user competitor holds every Slurm CPU for the first %u s\n\n", n,
          task_s, competitor_s);
  printf ("| mode | run | turnaround s | proxies | scheduler commands | idle slot-s of held "
          "| tasks slurm / sge / here | done |\n|---|---|---|---|---|---|---|---|\n");
  const char *modes[] = { "pull", "static", "direct" };
  for (guint r = 1; r <= runs; r++)
    for (guint m = 0; m < G_N_ELEMENTS (modes); m++)
      {
        Outcome o = one_run (bed, root, tasks, modes[m], competitor_s, r);
        print_row (modes[m], r, &o);
      }

  gint64 t0 = g_get_monotonic_time ();
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
