/* test-multisite.c: campaigns across sites in their own network
 * namespaces, reached over SSH (tests/multisite.h): a Slurm cluster, a
 * Grid Engine cluster, an OpenPBS cluster, an LSF (volclava) cluster, a
 * fork site beside the master, and a login node that is down.  The
 * master runs in its own namespace and agents connect back to it over TCP
 * with CURVE, as they would from real clusters.
 *
 * The bed comes up once in this process before any test and goes down by
 * PID after the last; each test body runs in a subprocess
 * (g_test_trap_subprocess), so a failed assertion still leaves nothing
 * running.  Grid Engine has one cell per host: run this program under
 * `flock /tmp/datc-sge.lock`. */
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "multisite.h"

static MsBed *bed; /* in the subprocess: loaded from the parent's state */

/* What a test saw (counts, errors), on stderr: a subprocess's
 * g_test_message never reaches the log. */
static void note (const char *fmt, ...) G_GNUC_PRINTF (1, 2);
static void
note (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree gchar *text = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_printerr ("#   %s\n", text);
}

/* ---- campaigns ------------------------------------------------------ */

typedef struct {
  TbDir *d;
  gchar *workdirs; /* owned by the login user: the sites' workdirs go below */
} Fixture;

static void
fixture_clear (Fixture *b)
{
  g_free (b->workdirs);
  tb_dir_free (b->d);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Fixture, fixture_clear)

static void
fixture_init (Fixture *b)
{
  g_autoptr (GError) error = NULL;
  b->d = tb_dir_new ();
  b->workdirs = ms_site_workdir_root (bed, b->d->path, &error);
  g_assert_no_error (error);
}

/* SITES.ini for campaign `name`: the master in its namespace, then
 * `groups` (from site_group/fork_group). */
static gchar *
write_sites (Fixture *b, const char *name, const char *groups)
{
  g_autofree gchar *ini
      = g_strdup_printf ("[master]\nlisten = tcp://%s:0\n\n%s", bed->master_addr, groups);
  g_autofree gchar *file = g_strdup_printf ("%s.ini", name);
  return tb_write (b->d, file, ini);
}

/* A site over SSH whose workdir belongs to campaign `name`. */
static gchar *
site_group (Fixture *b, const char *name, MsHost host, const char *site, const char *scheduler,
            const char *extra)
{
  g_autofree gchar *workdir = g_build_filename (b->workdirs, name, NULL);
  return ms_site_group (bed, host, site, scheduler, workdir, extra);
}

static const char *const fork_group
    = "[site here]\nscheduler = fork\nslots_per_proxy = 2\nmax_proxies = 1\n\n";

/* `datc run` in the master's namespace, not waited for. */
static TbProc *
start_campaign (Fixture *b, const char *name, const char *sites, const char *tasks,
                const char *mode, gchar **dir)
{
  *dir = g_build_filename (b->d->path, name, NULL);
  const char *argv[]
      = { tb_datc (), "run", "--dir", *dir, "--sites", sites, "--mode", mode, tasks, NULL };
  g_auto (GStrv) in_ns = ms_in_netns (bed->ns_master, argv);
  return tb_spawn (b->d, name, (const char *const *) in_ns);
}

static void
finish_campaign (TbProc *run, const char *dir, int want_status)
{
  int status = tb_wait (run, 240);
  if (status != want_status)
    {
      g_autofree gchar *err = tb_proc_stderr (run);
      g_printerr ("# datc run %s:\n%s\n", dir, err);
    }
  g_assert_cmpint (status, ==, want_status);
  /* Every proxy is gone, so every agent is: none is left on any site. */
  g_autoptr (GArray) left = tb_find_agents (dir);
  g_assert_cmpuint (left->len, ==, 0);
}

static gchar *
run_campaign (Fixture *b, const char *name, const char *sites, const char *tasks, const char *mode,
              int want_status)
{
  gchar *dir = NULL;
  g_autoptr (TbProc) run = start_campaign (b, name, sites, tasks, mode, &dir);
  finish_campaign (run, dir, want_status);
  return dir;
}

/* Per site, how many results it produced. */
static guint
results_at (GHashTable *res, const char *site)
{
  guint n = 0;
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    n += g_str_equal (ms_str (v, "site"), site);
  return n;
}

static gchar *
output_of (Fixture *b, const char *dir, gint64 id)
{
  g_autofree gchar *ids = g_strdup_printf ("%" G_GINT64_FORMAT, id);
  const char *argv[] = { tb_datc (), "output", dir, ids, NULL };
  g_autoptr (TbProc) p = tb_spawn (b->d, "output", argv);
  g_assert_cmpint (tb_wait (p, 30), ==, 0);
  return tb_proc_stdout (p);
}

/* Each proxy submitted was seen to end (nothing left to a site). */
static void
assert_every_proxy_ended (GPtrArray *trace)
{
  g_assert_cmpuint (ms_count_events (trace, "proxy_submitted", NULL), >, 0);
  g_assert_cmpuint (ms_count_events (trace, "proxy_ended", NULL), ==,
                    ms_count_events (trace, "proxy_submitted", NULL));
}

/* Nothing of any campaign queued or running on any cluster. */
static void
assert_clusters_empty (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *sq = NULL, *qs = NULL, *pq = NULL, *bj = NULL;
  const char *squeue[] = { "squeue", "-h", "-o", "%j %T", NULL };
  g_assert_true (ms_site_command (bed, MS_SLURM, NULL, squeue, &sq, &error));
  g_assert_no_error (error);
  g_assert_null (strstr (sq, "datc-"));
  const char *qstat[] = { "qstat", "-u", "*", NULL };
  g_assert_true (ms_site_command (bed, MS_SGE, NULL, qstat, &qs, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (g_strstrip (qs), ==, "");
  /* PBS's qstat without -x: every job not finished (history keeps the rest). */
  const char *pbs_qstat[] = { "qstat", NULL };
  g_assert_true (ms_site_command (bed, MS_PBS, NULL, pbs_qstat, &pq, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (g_strstrip (pq), ==, "");
  /* bjobs lists unfinished jobs only.  With none it exits 255 (as it
   * does when it cannot reach mbatchd): its JSON, which only an answer
   * has, must count 0 jobs. */
  const char *bjobs[] = { "sh", "-c", "bjobs -u all -o 'jobid stat user' -json || true", NULL };
  g_assert_true (ms_site_command (bed, MS_LSF, NULL, bjobs, &bj, &error));
  g_assert_no_error (error);
  g_autoptr (JsonParser) parser = json_parser_new ();
  if (!json_parser_load_from_data (parser, bj, -1, NULL)
      || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    g_printerr ("# bjobs -json said: %s\n", bj);
  JsonNode *root = json_parser_get_root (parser);
  g_assert_true (root != NULL && JSON_NODE_HOLDS_OBJECT (root));
  JsonObject *answer = json_node_get_object (root);
  g_assert_true (json_object_has_member (answer, "JOBS"));
  if (json_object_get_int_member (answer, "JOBS") != 0)
    g_printerr ("# bjobs -json said: %s\n", bj);
  g_assert_cmpint (json_object_get_int_member (answer, "JOBS"), ==, 0);
}

/* `n` copies of `line`, one per line (each task is told apart by its
 * id, which results and outputs carry). */
static gchar *
same_tasks (Fixture *b, guint n, const char *line)
{
  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (t, "%s\n", line);
  return tb_write (b->d, "t.txt", t->str);
}

/* ---- one campaign across every kind of site ------------------------ */

/* The batch sites, and how a job there says its id in the shell: the
 * whole id (PBS: SEQ.SERVER, SEQ[I].SERVER for an array's element), or
 * the array's for an element (Slurm's SLURM_JOB_ID is then an id of its
 * own; Grid Engine's JOB_ID and LSF's LSB_JOBID are the array's). */
static const struct {
  const char *site;
  MsHost host;
  const char *job_id;
} batch_sites[] = {
  { "slurm", MS_SLURM, "${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}" },
  { "sge", MS_SGE, "$JOB_ID" },
  { "pbs", MS_PBS, "$PBS_JOBID" },
  { "lsf", MS_LSF, "$LSB_JOBID" },
};

/* `printed` (what a task printed) names job `job` (as datc's trace has
 * it): the same id, or the array of which `job` is an element (Slurm
 * ID_I, Grid Engine ID.I, LSF ID[I]). */
static gboolean
names_job (const char *printed, const char *job)
{
  gsize n = strlen (printed);
  return n > 0 && g_ascii_isdigit (printed[0]) && strncmp (printed, job, n) == 0
         && (job[n] == '\0' || strchr ("_.[", job[n]) != NULL);
}

/* The [site] groups of every batch site, `extra` in each. */
static gchar *
batch_groups (Fixture *b, const char *name, const char *extra)
{
  g_autoptr (GString) groups = g_string_new (NULL);
  for (guint s = 0; s < G_N_ELEMENTS (batch_sites); s++)
    {
      g_autofree gchar *g = site_group (b, name, batch_sites[s].host, batch_sites[s].site,
                                        batch_sites[s].site, extra);
      g_string_append (groups, g);
    }
  return g_string_free (g_steal_pointer (&groups), FALSE);
}

/* Proxy id -> the job id its site gave it, from the trace. */
static GHashTable *
jobs_of_proxies (GPtrArray *trace)
{
  GHashTable *jobs = g_hash_table_new (g_str_hash, g_str_equal);
  for (guint i = 0; i < trace->len; i++)
    if (g_str_equal (ms_str (trace->pdata[i], "event"), "proxy_submitted"))
      g_hash_table_insert (jobs, (gpointer) ms_str (trace->pdata[i], "proxy"),
                           (gpointer) ms_str (trace->pdata[i], "job"));
  return jobs;
}

#define ACROSS_TASKS 200

static void
across_sites (void)
{
  g_auto (Fixture) b = { 0 };
  fixture_init (&b);
  /* Each task prints every scheduler's job id, ':'-separated: only its
   * own site's may be set.  Long enough (~8 s of work on 18 slots) that
   * LSF, whose first agent connects after ~3 s, gets some. */
  g_autoptr (GString) line = g_string_new ("sh -c 'sleep 0.5; echo ");
  for (guint s = 0; s < G_N_ELEMENTS (batch_sites); s++)
    g_string_append_printf (line, "%s%s", s ? ":" : "", batch_sites[s].job_id);
  g_string_append (line, "'");
  g_autofree gchar *tasks = same_tasks (&b, ACROSS_TASKS, line->str);
  g_autofree gchar *batch
      = batch_groups (&b, "c", "slots_per_proxy = 2\nmax_proxies = 2\nwalltime = 10m\n");
  g_autofree gchar *groups = g_strconcat (batch, fork_group, NULL);
  g_autofree gchar *sites = write_sites (&b, "c", groups);
  g_autofree gchar *dir = run_campaign (&b, "c", sites, tasks, "pull", 0);

  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, ACROSS_TASKS);
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    g_assert_cmpint (ms_int (v, "exit_code"), ==, 0);
  /* Each site contributed. */
  guint n_here = results_at (res, "here"), total = n_here;
  g_autoptr (GString) counts = g_string_new ("results:");
  for (guint s = 0; s < G_N_ELEMENTS (batch_sites); s++)
    {
      guint n = results_at (res, batch_sites[s].site);
      g_string_append_printf (counts, " %s %u,", batch_sites[s].site, n);
      total += n;
    }
  note ("%s here %u", counts->str, n_here);
  for (guint s = 0; s < G_N_ELEMENTS (batch_sites); s++)
    g_assert_cmpuint (results_at (res, batch_sites[s].site), >, 0);
  g_assert_cmpuint (n_here, >, 0);
  g_assert_cmpuint (total, ==, ACROSS_TASKS);

  /* The batch sites' tasks ran inside batch jobs: each printed, in its
   * scheduler's variable and no other, the id of the job its proxy was
   * submitted as (the fork site's, nothing). */
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  g_autoptr (GHashTable) jobs = jobs_of_proxies (trace);
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      const char *site = ms_str (v, "site");
      g_autofree gchar *out = output_of (&b, dir, ms_int (v, "id"));
      g_auto (GStrv) ids = g_strsplit (g_strstrip (out), ":", -1);
      g_assert_cmpuint (g_strv_length (ids), ==, G_N_ELEMENTS (batch_sites));
      for (guint s = 0; s < G_N_ELEMENTS (batch_sites); s++)
        if (g_str_equal (site, batch_sites[s].site))
          {
            const char *job = g_hash_table_lookup (jobs, ms_str (v, "proxy"));
            g_assert_nonnull (job);
            if (!names_job (ids[s], job))
              note ("task %" G_GINT64_FORMAT " on %s printed job id \"%s\"; its proxy is job %s",
                    ms_int (v, "id"), site, ids[s], job);
            g_assert_true (names_job (ids[s], job));
          }
        else
          g_assert_cmpstr (ids[s], ==, "");
    }

  assert_every_proxy_ended (trace);
  assert_clusters_empty ();

  /* The campaign's key is not left on the sites, nor the scripts and
   * logs of its proxies, which all ended well (the same filesystem,
   * another network namespace). */
  for (guint s = 0; s < G_N_ELEMENTS (batch_sites); s++)
    {
      g_autofree gchar *wd = g_build_filename (b.workdirs, "c", batch_sites[s].site, NULL);
      g_autofree gchar *key = g_build_filename (wd, "agent.key", NULL);
      g_assert_false (g_file_test (key, G_FILE_TEST_EXISTS));
      g_autoptr (GDir) dh = g_dir_open (wd, 0, NULL);
      g_assert_nonnull (dh);
      guint left = 0;
      const char *n;
      while ((n = g_dir_read_name (dh)) != NULL)
        if (g_str_has_suffix (n, ".sh") || g_str_has_suffix (n, ".log"))
          {
            g_printerr ("# left in %s: %s\n", wd, n);
            left++;
          }
      g_assert_cmpuint (left, ==, 0);
    }
}

/* ---- a competitor fills the Slurm site ------------------------------ */

typedef struct {
  const char *dir;
  const char *site;
  guint want;
} ResultWatch;

/* At least `want` complete lines of results.jsonl are from `site` (the
 * file is read while the master appends to it: a last line without its
 * newline is not counted). */
static gboolean
site_has_results (gpointer data)
{
  ResultWatch *w = data;
  g_autofree gchar *path = g_build_filename (w->dir, "results.jsonl", NULL);
  g_autofree gchar *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return FALSE;
  g_autofree gchar *needle = g_strdup_printf ("\"site\":\"%s\"", w->site);
  guint n = 0;
  for (char *line = text, *nl; (nl = strchr (line, '\n')) != NULL; line = nl + 1)
    {
      *nl = '\0';
      n += strstr (line, needle) != NULL;
    }
  return n >= w->want;
}

static void
competitor_first (void)
{
  g_auto (Fixture) b = { 0 };
  fixture_init (&b);
  g_autoptr (GError) error = NULL;
  g_autofree gchar *job = NULL;
  g_assert_true (ms_competitor_fill_slurm (bed, 600, &job, &error));
  g_assert_no_error (error);

  g_autofree gchar *tasks = same_tasks (&b, 160, "sleep 0.5");
  g_autofree gchar *slurm = site_group (&b, "c", MS_SLURM, "slurm", "slurm",
                                        "slots_per_proxy = 2\nmax_proxies = 2\nwalltime = 10m\n");
  g_autofree gchar *sge = site_group (&b, "c", MS_SGE, "sge", "sge",
                                      "slots_per_proxy = 2\nmax_proxies = 2\nwalltime = 10m\n");
  g_autofree gchar *groups = g_strconcat (slurm, sge, NULL);
  g_autofree gchar *sites = write_sites (&b, "c", groups);
  g_autofree gchar *dir = NULL;
  g_autoptr (TbProc) run = start_campaign (&b, "c", sites, tasks, "pull", &dir);

  /* Grid Engine takes the work while Slurm is full... */
  ResultWatch w = { dir, "sge", 16 };
  g_assert_true (tb_await (site_has_results, &w, 120));
  g_autoptr (GPtrArray) before = tb_trace (dir);
  g_assert_cmpuint (ms_count_events (before, "proxy_submitted", "slurm"), >, 0);
  g_assert_cmpuint (ms_count_events (before, "agent_connected", "slurm"), ==, 0);
  g_autofree gchar *state = ms_slurm_job_state (bed, job, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (state, ==, "RUNNING");

  /* ... and Slurm joins once the competitor leaves. */
  gint64 freed = g_get_real_time ();
  g_assert_true (ms_competitor_cancel (bed, job, &error));
  g_assert_no_error (error);
  finish_campaign (run, dir, 0);

  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 160);
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  guint sge_before = 0, slurm_after = 0;
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      g_assert_cmpint (ms_int (v, "exit_code"), ==, 0);
      sge_before += g_str_equal (ms_str (v, "site"), "sge") && ms_int (v, "finished") < freed;
      slurm_after += g_str_equal (ms_str (v, "site"), "slurm") && ms_int (v, "started") > freed;
    }
  note ("sge tasks done before Slurm was free: %u; Slurm tasks after: %u of %u", sge_before,
        slurm_after, results_at (res, "slurm"));
  g_assert_cmpuint (sge_before, >=, 16);
  g_assert_cmpuint (slurm_after, >, 0);
  g_assert_cmpuint (slurm_after, ==, results_at (res, "slurm"));

  /* Slurm's proxies were submitted before it was free, and none of their
   * agents connected until it was. */
  gint64 first_submit = 0, first_connect = 0;
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      if (!g_str_equal (ms_str (o, "site"), "slurm"))
        continue;
      if (g_str_equal (ms_str (o, "event"), "proxy_submitted") && first_submit == 0)
        first_submit = ms_int (o, "time");
      if (g_str_equal (ms_str (o, "event"), "agent_connected") && first_connect == 0)
        first_connect = ms_int (o, "time");
    }
  g_assert_cmpint (first_submit, >, 0);
  g_assert_cmpint (first_submit, <, freed);
  g_assert_cmpint (first_connect, >, freed);
  assert_every_proxy_ended (trace);
  assert_clusters_empty ();
}

/* ---- pending proxies migrate ----------------------------------------- */

typedef struct {
  const char *dir, *event, *site;
  guint n;
} TraceWaitMs;

static gboolean
trace_count_reaches (gpointer data)
{
  TraceWaitMs *w = data;
  g_autoptr (GPtrArray) trace = tb_trace (w->dir);
  return ms_count_events (trace, w->event, w->site) >= w->n;
}

/* A competitor holds Slurm, which the plan chose first (predicted to
 * start proxies sooner than Grid Engine) and whose two proxies cover the
 * two tasks: they move to Grid Engine once queued past migrate_after and
 * past Grid Engine's predicted wait, and the campaign completes while the
 * competitor still holds Slurm.  With migrate_after = 0 nothing moves
 * and nothing runs. */
static void
pending_proxies_migrate (void)
{
  g_auto (Fixture) b = { 0 };
  fixture_init (&b);
  g_autoptr (GError) error = NULL;
  g_autofree gchar *job = NULL;
  g_assert_true (ms_competitor_fill_slurm (bed, 600, &job, &error));
  g_assert_no_error (error);
  g_autofree gchar *tasks = same_tasks (&b, 2, "sleep 1");
  const char *sge_extra = "slots_per_proxy = 1\nmax_proxies = 2\npoll_interval = 1s\n";
  /* Earlier campaigns saw Grid Engine start proxies after 10 s (its
   * QBETS bound): Slurm, unknown (0 s) and ready within its 5 s command
   * timeout, gets the proxies first; a move to Grid Engine pays once a
   * Slurm proxy has waited more than those 10 s. */
  g_autofree gchar *cache_dir = g_build_filename (b.d->path, "xdg-cache", "datc", NULL);
  g_assert_cmpint (g_mkdir_with_parents (cache_dir, 0700), ==, 0);
  g_autoptr (GString) earlier = g_string_new (NULL);
  for (guint i = 1; i <= 80; i++)
    g_string_append_printf (earlier, "{\"site\":\"sge|sge|\",\"wait_s\":10,\"time\":%u}\n",
                            1000 + i);
  g_autofree gchar *cache_file = g_build_filename (cache_dir, "waits.jsonl", NULL);
  g_assert_true (g_file_set_contents (cache_file, earlier->str, -1, NULL));
  const char *slurm_extra = "slots_per_proxy = 1\nmax_proxies = 2\npoll_interval = 1s\n"
                            "command_timeout = 5s\n";

  /* Never: after well past the bound, still nothing moved or ran. */
  g_autofree gchar *never
      = g_strconcat (slurm_extra, "migrate_after = 0\n", "max_calls_per_minute = 0\n", NULL);
  g_autofree gchar *slurm0 = site_group (&b, "never", MS_SLURM, "slurm", "slurm", never);
  g_autofree gchar *sge0 = site_group (&b, "never", MS_SGE, "sge", "sge", sge_extra);
  g_autofree gchar *groups0 = g_strconcat (slurm0, sge0, NULL);
  g_autofree gchar *sites0 = write_sites (&b, "never", groups0);
  g_autofree gchar *dir0 = NULL;
  g_autoptr (TbProc) run0 = start_campaign (&b, "never", sites0, tasks, "pull", &dir0);
  TraceWaitMs submitted = { dir0, "proxy_submitted", "slurm", 2 };
  g_assert_true (tb_await (trace_count_reaches, &submitted, 60));
  g_autofree gchar *results0 = g_build_filename (dir0, "results.jsonl", NULL);
  /* Not awaitable (it must not happen): 20 s, twice what a move below
   * waits for. */
  g_assert_false (tb_await_lines (results0, 1, 20));
  g_autoptr (GPtrArray) trace0 = tb_trace (dir0);
  g_assert_cmpuint (ms_count_events (trace0, "proxy_migrated", NULL), ==, 0);
  g_assert_cmpuint (ms_count_events (trace0, "proxy_submitted", "sge"), ==, 0);
  tb_proc_signal (run0, SIGTERM);
  tb_wait (run0, 120);

  /* After 5 s queued: moved, and done while Slurm is still held. */
  g_autofree gchar *move = g_strconcat (slurm_extra, "migrate_after = 5s\n", NULL);
  g_autofree gchar *slurm = site_group (&b, "move", MS_SLURM, "slurm", "slurm", move);
  g_autofree gchar *sge = site_group (&b, "move", MS_SGE, "sge", "sge", sge_extra);
  g_autofree gchar *groups = g_strconcat (slurm, sge, NULL);
  g_autofree gchar *sites = write_sites (&b, "move", groups);
  g_autofree gchar *dir = NULL;
  g_autoptr (TbProc) run = start_campaign (&b, "move", sites, tasks, "pull", &dir);
  finish_campaign (run, dir, 0);
  g_autofree gchar *state = ms_slurm_job_state (bed, job, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (state, ==, "RUNNING");

  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 2);
  g_assert_cmpuint (results_at (res, "sge"), ==, 2);
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  guint moved = 0;
  double first_move_s = 0;
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      if (!g_str_equal (ms_str (o, "event"), "proxy_migrated"))
        continue;
      if (moved++ == 0)
        first_move_s = json_object_get_double_member (o, "waited_s");
      g_assert_cmpstr (ms_str (o, "site"), ==, "slurm");
      g_assert_cmpstr (ms_str (o, "to"), ==, "sge");
      g_assert_cmpfloat (json_object_get_double_member (o, "waited_s"), >, 10.0);
      g_assert_nonnull (strstr (ms_str (o, "reason"), "over the site's bound of 5 s"));
    }
  note ("proxies moved from Slurm to Grid Engine: %u (the first after %.1f s)", moved,
        first_move_s);
  g_assert_cmpuint (moved, >=, 1);
  g_assert_cmpuint (ms_count_events (trace, "agent_connected", "slurm"), ==, 0);
  g_assert_cmpuint (ms_count_events (trace, "proxy_submitted", "sge"), >=, moved);

  g_assert_true (ms_competitor_cancel (bed, job, &error));
  g_assert_no_error (error);
  assert_every_proxy_ended (trace);
  assert_clusters_empty ();
}

/* ---- a scheduler that answers with errors, a login node that is down */

typedef struct {
  const char *dir;
  const char *const *sites;
  GHashTable *errors; /* site -> last_error, once every site in `sites` is degraded */
} StatusWatch;

/* `datc status --json DIR` shows every site of w->sites degraded, with its
 * error. */
static gboolean
sites_shown_degraded (gpointer data)
{
  StatusWatch *w = data;
  g_autoptr (JsonObject) st = tb_status (w->dir);
  if (st == NULL || !json_object_has_member (st, "sites"))
    return FALSE;
  JsonArray *sites = json_object_get_array_member (st, "sites");
  guint degraded = 0;
  for (guint i = 0; i < json_array_get_length (sites); i++)
    {
      JsonObject *s = json_array_get_object_element (sites, i);
      if (g_strv_contains (w->sites, ms_str (s, "name"))
          && g_str_equal (ms_str (s, "state"), "degraded") && ms_str (s, "last_error")[0])
        {
          degraded++;
          g_hash_table_replace (w->errors, g_strdup (ms_str (s, "name")),
                                g_strdup (ms_str (s, "last_error")));
        }
    }
  return degraded == g_strv_length ((gchar **) w->sites);
}

static void
bad_sites_degraded (void)
{
  g_auto (Fixture) b = { 0 };
  fixture_init (&b);
  g_autoptr (GError) error = NULL;
  /* The "down" site's login node is stopped: its port refuses. */
  g_assert_true (ms_login_stop (bed, MS_DOWN, &error));
  g_assert_no_error (error);

  g_autofree gchar *tasks = same_tasks (&b, 180, "sleep 0.5");
  g_autofree gchar *badq = site_group (&b, "c", MS_SLURM, "badq", "slurm",
                                       "queue = nosuchpartition\nslots_per_proxy = 2\n"
                                       "walltime = 10m\n");
  g_autofree gchar *down = site_group (&b, "c", MS_DOWN, "down", "slurm", "slots_per_proxy = 2\n");
  g_autofree gchar *sge = site_group (&b, "c", MS_SGE, "sge", "sge",
                                      "slots_per_proxy = 2\nmax_proxies = 2\nwalltime = 10m\n");
  /* The bad sites first: the site manager tries sites in file order. */
  g_autofree gchar *groups = g_strconcat (badq, down, sge, fork_group, NULL);
  g_autofree gchar *sites = write_sites (&b, "c", groups);
  g_autofree gchar *dir = NULL;
  g_autoptr (TbProc) run = start_campaign (&b, "c", sites, tasks, "pull", &dir);

  const char *const bad[] = { "badq", "down", NULL };
  g_autoptr (GHashTable) live = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  StatusWatch w = { dir, bad, live };
  g_assert_true (tb_await (sites_shown_degraded, &w, 90));
  note ("status: badq: %s", (char *) g_hash_table_lookup (live, "badq"));
  note ("status: down: %s", (char *) g_hash_table_lookup (live, "down"));
  finish_campaign (run, dir, 0);

  /* The campaign completed on the good sites. */
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 180);
  g_assert_cmpuint (results_at (res, "sge") + results_at (res, "here"), ==, 180);
  g_assert_cmpuint (results_at (res, "sge"), >, 0);

  /* Degraded once each, in the scheduler's or the connection's own words. */
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  for (guint i = 0; bad[i] != NULL; i++)
    g_assert_cmpuint (ms_count_events (trace, "site_degraded", bad[i]), ==, 1);
  g_assert_cmpuint (ms_count_events (trace, "site_degraded", "sge"), ==, 0);
  g_assert_cmpuint (ms_count_events (trace, "site_degraded", "here"), ==, 0);
  g_assert_cmpuint (ms_count_events (trace, "proxy_submitted", "badq"), ==, 0);
  g_assert_cmpuint (ms_count_events (trace, "proxy_submitted", "down"), ==, 0);
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      if (!g_str_equal (ms_str (o, "event"), "site_degraded"))
        continue;
      const char *e = ms_str (o, "error");
      note ("site_degraded %s: %s", ms_str (o, "site"), e);
      if (g_str_equal (ms_str (o, "site"), "badq"))
        g_assert_nonnull (strstr (e, "Invalid partition name specified"));
      else
        g_assert_nonnull (strstr (e, "Connection refused"));
    }
  assert_clusters_empty ();
}

/* ---- a login node that hangs ---------------------------------------- */

/* The "down" site's login sshd is stopped with SIGSTOP: connections are
 * accepted by the kernel and never answered, as on a login node that
 * hangs.  Every site command runs on its site's worker, so the campaign
 * goes on at full speed on the fork site: no agent is declared lost
 * (short heartbeats make a stalled loop show at once), `datc status`
 * answers throughout, and the hung site is shown degraded once its
 * command outlives command_timeout.  The sshd is continued before any
 * assertion, so a failure leaves the bed as it was. */
static void
hung_login_node (void)
{
  /* (Should this body abort with the sshd stopped, the parent's bed-down
   * still ends it: sshd-down.sh kills by pid, with SIGKILL at last.) */
  g_auto (Fixture) b = { 0 };
  fixture_init (&b);
  g_autoptr (GError) error = NULL;
  int sshd = ms_login_pid (bed, MS_DOWN, &error);
  g_assert_no_error (error);
  g_assert_cmpint (sshd, >, 1);

  g_autofree gchar *tasks = same_tasks (&b, 120, "sleep 0.2");
  g_autofree gchar *hung = site_group (&b, "h", MS_DOWN, "hung", "slurm",
                                       "slots_per_proxy = 2\ncommand_timeout = 2s\n");
  /* The hung site first: it is tried first. */
  g_autofree gchar *groups = g_strconcat (hung, fork_group, NULL);
  g_autofree gchar *sites = write_sites (&b, "h", groups);
  g_autofree gchar *dir = g_build_filename (b.d->path, "h", NULL);
  const char *argv[]
      = { tb_datc (),           "run",  "--dir", dir, "--sites", sites, "--heartbeat-ms", "200",
          "--agent-timeout-ms", "1600", tasks,   NULL };
  g_auto (GStrv) in_ns = ms_in_netns (bed->ns_master, argv);

  g_assert_cmpint (kill (sshd, SIGSTOP), ==, 0);
  g_autoptr (TbProc) run = tb_spawn (b.d, "h", (const char *const *) in_ns);
  /* Status, asked again and again while the campaign runs. */
  guint asked = 0, answered = 0;
  gint64 slowest = 0;
  gboolean degraded_seen = FALSE;
  g_autofree gchar *results = g_build_filename (dir, "results.jsonl", NULL);
  while (tb_count_lines (results) < 120 && asked < 2000)
    {
      gint64 t0 = g_get_monotonic_time ();
      g_autoptr (JsonObject) st = tb_status (dir);
      gint64 took = g_get_monotonic_time () - t0;
      asked++;
      if (st != NULL && json_object_has_member (st, "sites"))
        {
          answered++;
          slowest = MAX (slowest, took);
          JsonArray *sa = json_object_get_array_member (st, "sites");
          for (guint i = 0; i < json_array_get_length (sa); i++)
            {
              JsonObject *s = json_array_get_object_element (sa, i);
              degraded_seen |= g_str_equal (ms_str (s, "name"), "hung")
                               && g_str_equal (ms_str (s, "state"), "degraded");
            }
        }
      g_usleep (50 * 1000); /* pacing the questions, not awaiting anything */
    }
  int status = tb_wait (run, 120);
  kill (sshd, SIGCONT);
  if (status != 0)
    {
      g_autofree gchar *err = tb_proc_stderr (run);
      g_printerr ("# datc run %s:\n%s\n", dir, err);
    }
  g_assert_cmpint (status, ==, 0);
  note ("status: %u asked, %u answered (the first before the master listened), slowest "
        "%.1f ms; degraded seen live: %d",
        asked, answered, slowest / 1000.0, degraded_seen);

  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 120);
  g_assert_cmpuint (results_at (res, "here"), ==, 120);
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  g_assert_cmpuint (ms_count_events (trace, "agent_lost", NULL), ==, 0);
  g_assert_cmpuint (ms_count_events (trace, "site_degraded", "hung"), ==, 1);
  g_assert_cmpuint (ms_count_events (trace, "proxy_submitted", "hung"), ==, 0);
  g_assert_cmpuint (answered + 5, >=, asked);
  g_assert_cmpint (slowest, <, 2 * G_USEC_PER_SEC);
}

/* ---- short walltimes ------------------------------------------------ */

#define WALLTIME_TASKS 200

/* Proxies of 20 s on Grid Engine, one at a time, for ~40 s of work: the
 * work goes on through several generations, each replacement submitted
 * before the proxy it replaces ends; every task runs to its end (each
 * logs its run to a file on the shared filesystem), and one that ran
 * twice has a later attempt in the results. */

static void
walltime_generations (void)
{
  g_auto (Fixture) b = { 0 };
  fixture_init (&b);
  g_autofree gchar *log = g_build_filename (b.workdirs, "runs.log", NULL);
  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 1; i <= WALLTIME_TASKS; i++)
    g_string_append_printf (t, "sh -c 'sleep 1; echo %u >> %s'\n", i, log);
  g_autofree gchar *tasks = tb_write (b.d, "t.txt", t->str);
  g_autofree gchar *sge = site_group (&b, "c", MS_SGE, "sge", "sge",
                                      "slots_per_proxy = 4\nmax_proxies = 1\nwalltime = 20s\n"
                                      "poll_interval = 1s\n");
  g_autofree gchar *sites = write_sites (&b, "c", sge);
  g_autofree gchar *dir = run_campaign (&b, "c", sites, tasks, "pull", 0);

  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, WALLTIME_TASKS);
  g_autoptr (GPtrArray) trace = tb_trace (dir);

  /* Several generations: more proxies than max_proxies, each of whose
   * agents worked. */
  guint submitted = ms_count_events (trace, "proxy_submitted", "sge");
  guint connected = ms_count_events (trace, "agent_connected", "sge");
  note ("proxies submitted %u, agents connected %u", submitted, connected);
  g_assert_cmpuint (connected, >=, 3);
  g_autoptr (GHashTable) proxies = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    g_hash_table_add (proxies, (gpointer) ms_str (v, "proxy"));
  g_assert_cmpuint (g_hash_table_size (proxies), >=, 3);

  /* Ahead of time: two proxies alive at once although max_proxies is 1. */
  guint alive = 0, most = 0;
  for (guint i = 0; i < trace->len; i++)
    {
      const char *e = ms_str (trace->pdata[i], "event");
      if (g_str_equal (e, "proxy_submitted"))
        {
          alive++;
          most = MAX (most, alive);
        }
      else if (g_str_equal (e, "proxy_ended") && alive > 0)
        alive--;
    }
  g_assert_cmpuint (most, ==, 2);
  /* Expiring agents drained and left: none was lost. */
  g_assert_cmpuint (ms_count_events (trace, "agent_lost", NULL), ==, 0);

  /* Every task ran to its end at least once. */
  g_autofree gchar *runs = NULL;
  g_assert_true (g_file_get_contents (log, &runs, NULL, NULL));
  g_autofree guint *seen = g_new0 (guint, WALLTIME_TASKS + 1);
  g_auto (GStrv) lines = g_strsplit (runs, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    if (lines[i][0])
      {
        guint64 id = g_ascii_strtoull (lines[i], NULL, 10);
        g_assert_cmpuint (id, >=, 1);
        g_assert_cmpuint (id, <=, WALLTIME_TASKS);
        seen[id]++;
      }
  guint reruns = 0;
  for (guint id = 1; id <= WALLTIME_TASKS; id++)
    {
      g_assert_cmpuint (seen[id], >=, 1);
      if (seen[id] == 1)
        continue;
      /* A second run to the end is a drained attempt whose task had just
       * finished when its agent stopped (execution is at-least-once): the
       * ledger knows, since the result is a later attempt. */
      gint64 key = id;
      JsonObject *r = g_hash_table_lookup (res, &key);
      g_assert_cmpint (ms_int (r, "attempt"), >=, seen[id]);
      reruns += seen[id] - 1;
    }
  note ("tasks that ran to their end more than once: %u", reruns);
  assert_every_proxy_ended (trace);
  assert_clusters_empty ();
}

/* ---- pull, static, direct ------------------------------------------- */

/* A multiple of the total capacity (4 per batch site, 2 here: 18), so
 * the static split is exact. */
#define MODE_TASKS 36

static void
same_results_in_every_mode (void)
{
  g_auto (Fixture) b = { 0 };
  fixture_init (&b);
  /* Every 7th task exits 1: the campaign's status is 1 in every mode. */
  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 1; i <= MODE_TASKS; i++)
    g_string_append_printf (t, "sh -c 'sleep 0.2; echo task %u; exit %u'\n", i, i % 7 == 0);
  g_autofree gchar *tasks = tb_write (b.d, "t.txt", t->str);
  const char *modes[] = { "pull", "static", "direct" };
  g_autoptr (GHashTable) first = NULL;
  g_autofree gchar *first_dir = NULL;

  for (guint m = 0; m < G_N_ELEMENTS (modes); m++)
    {
      g_autofree gchar *batch = batch_groups (&b, modes[m],
                                              "slots_per_proxy = 2\nmax_proxies = 2\n"
                                              "walltime = 10m\n");
      g_autofree gchar *groups = g_strconcat (batch, fork_group, NULL);
      g_autofree gchar *sites = write_sites (&b, modes[m], groups);
      gint64 t0 = g_get_monotonic_time ();
      g_autofree gchar *dir = run_campaign (&b, modes[m], sites, tasks, modes[m], 1);
      note ("%s: %.1f s", modes[m], (g_get_monotonic_time () - t0) / 1e6);
      g_autoptr (GHashTable) res = tb_results (dir);
      g_autoptr (GPtrArray) trace = tb_trace (dir);
      g_assert_cmpuint (g_hash_table_size (res), ==, MODE_TASKS);
      assert_every_proxy_ended (trace);

      if (g_str_equal (modes[m], "static"))
        {
          /* The split follows capacity (4 : 4 : 4 : 4 : 2), and each site
           * ran exactly its share. */
          guint split = 0;
          for (guint i = 0; i < trace->len; i++)
            {
              JsonObject *o = trace->pdata[i];
              if (!g_str_equal (ms_str (o, "event"), "split"))
                continue;
              const char *site = ms_str (o, "site");
              guint want = g_str_equal (site, "here") ? MODE_TASKS / 9 : MODE_TASKS * 2 / 9;
              g_assert_cmpint (ms_int (o, "tasks"), ==, want);
              g_assert_cmpuint (results_at (res, site), ==, want);
              split++;
            }
          g_assert_cmpuint (split, ==, G_N_ELEMENTS (batch_sites) + 1);
        }
      if (g_str_equal (modes[m], "direct"))
        {
          /* One single-slot job per task, on every site, each running the
           * task it was submitted for; each agent ran one task. */
          g_assert_cmpuint (ms_count_events (trace, "proxy_submitted", NULL), >=, MODE_TASKS);
          g_autoptr (GHashTable) submitted = g_hash_table_new (g_str_hash, g_str_equal);
          for (guint i = 0; i < trace->len; i++)
            if (g_str_equal (ms_str (trace->pdata[i], "event"), "proxy_submitted"))
              g_hash_table_insert (submitted, (gpointer) ms_str (trace->pdata[i], "proxy"),
                                   trace->pdata[i]);
          GHashTableIter rit;
          gpointer r;
          g_hash_table_iter_init (&rit, res);
          while (g_hash_table_iter_next (&rit, NULL, &r))
            {
              JsonObject *sub = g_hash_table_lookup (submitted, ms_str (r, "proxy"));
              g_assert_nonnull (sub);
              g_assert_cmpstr (ms_str (sub, "site"), ==, ms_str (r, "site"));
              g_assert_cmpint (ms_int (sub, "task"), ==, ms_int (r, "id"));
            }
          for (guint s = 0; s < G_N_ELEMENTS (batch_sites); s++)
            {
              guint n = results_at (res, batch_sites[s].site);
              g_assert_cmpuint (n, >, 0);
              g_assert_cmpuint (ms_count_events (trace, "proxy_submitted", batch_sites[s].site), >=,
                                n);
            }
          for (guint i = 0; i < trace->len; i++)
            if (g_str_equal (ms_str (trace->pdata[i], "event"), "proxy_submitted"))
              g_assert_cmpint (ms_int (trace->pdata[i], "slots"), ==, 1);
          g_autoptr (GHashTable) per_proxy = g_hash_table_new (g_str_hash, g_str_equal);
          GHashTableIter it;
          gpointer v;
          g_hash_table_iter_init (&it, res);
          while (g_hash_table_iter_next (&it, NULL, &v))
            {
              g_assert_false (g_hash_table_contains (per_proxy, ms_str (v, "proxy")));
              g_hash_table_add (per_proxy, (gpointer) ms_str (v, "proxy"));
            }
        }
      note ("%s: slurm %u, sge %u, pbs %u, lsf %u, here %u", modes[m], results_at (res, "slurm"),
            results_at (res, "sge"), results_at (res, "pbs"), results_at (res, "lsf"),
            results_at (res, "here"));

      if (first == NULL)
        {
          first = g_hash_table_ref (res);
          first_dir = g_strdup (dir);
          continue;
        }
      /* Identical result sets: same ids, exit codes and outputs. */
      GHashTableIter it;
      gpointer k, v;
      g_hash_table_iter_init (&it, res);
      while (g_hash_table_iter_next (&it, &k, &v))
        {
          JsonObject *a = g_hash_table_lookup (first, k);
          g_assert_nonnull (a);
          gint64 id = ms_int (v, "id");
          g_assert_cmpint (ms_int (a, "exit_code"), ==, ms_int (v, "exit_code"));
          g_assert_cmpint (ms_int (v, "exit_code"), ==, id % 7 == 0);
          g_autofree gchar *out_a = output_of (&b, first_dir, id);
          g_autofree gchar *out_b = output_of (&b, dir, id);
          g_autofree gchar *want = g_strdup_printf ("task %" G_GINT64_FORMAT "\n", id);
          g_assert_cmpstr (out_a, ==, want);
          g_assert_cmpstr (out_b, ==, want);
        }
    }
  assert_clusters_empty ();
}

/* ---- datc sites check on every cluster --------------------------------- */

/* `datc sites check` from the master's namespace asks each cluster, over
 * its login node as the login user, about the site's queue: the queue
 * each cluster has passes with the scheduler's own words about it (Slurm's
 * partition, Grid Engine's queue, PBS's workq, LSF's normal), one it does
 * not have fails naming the queue and the scheduler's answer. */
static void
sites_check_every_queue (void)
{
  g_auto (Fixture) b = { 0 };
  fixture_init (&b);
  const struct {
    MsHost host;
    const char *scheduler, *queue, *verdict, *says;
  } want[] = {
    { MS_SLURM, "slurm", "batch", " ok ", "batch: State=UP" },
    { MS_SGE, "sge", "all.q", " ok ", "all.q: slots" },
    { MS_PBS, "pbs", "workq", " ok ", "workq: queue_type = Execution, enabled = True" },
    { MS_PBS, "pbs", "nosuch", " FAIL ", "no queue nosuch: pbs says: " },
    { MS_LSF, "lsf", "normal", " ok ", "normal: Open:Active" },
    { MS_LSF, "lsf", "nosuch", " FAIL ", "no queue nosuch: lsf says: " },
  };
  g_autoptr (GString) groups = g_string_new (NULL);
  for (guint i = 0; i < G_N_ELEMENTS (want); i++)
    {
      g_autofree gchar *name = g_strdup_printf ("%s-%s", want[i].scheduler, want[i].queue);
      g_autofree gchar *queue = g_strdup_printf ("queue = %s\n", want[i].queue);
      g_autofree gchar *group
          = site_group (&b, "check", want[i].host, name, want[i].scheduler, queue);
      g_string_append (groups, group);
    }
  g_autofree gchar *sites = write_sites (&b, "check", groups->str);
  const char *argv[] = { tb_datc (), "sites", "check", sites, NULL };
  g_auto (GStrv) in_ns = ms_in_netns (bed->ns_master, argv);
  g_autoptr (TbProc) p = tb_spawn (b.d, "check", (const char *const *) in_ns);
  g_assert_cmpint (tb_wait (p, 120), ==, 1);
  g_autofree gchar *out = tb_proc_stdout (p);
  note ("%s", out);
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  for (guint w = 0; w < G_N_ELEMENTS (want); w++)
    {
      g_autofree gchar *prefix = g_strdup_printf ("%s-%s ", want[w].scheduler, want[w].queue);
      gboolean seen = FALSE;
      for (guint i = 0; lines[i] != NULL && !seen; i++)
        seen = g_str_has_prefix (lines[i], prefix) && strstr (lines[i], " queue exists ")
               && strstr (lines[i], want[w].verdict) && strstr (lines[i], want[w].says);
      if (!seen)
        note ("no line for %s with%s%s", prefix, want[w].verdict, want[w].says);
      g_assert_true (seen);
    }
  /* Nothing else failed: each login node has its scheduler's commands. */
  g_assert_nonnull (strstr (out, "\n2 checks failed\n"));
}

/* ---- the harness ---------------------------------------------------- */

static void
in_subprocess (gconstpointer body)
{
  if (g_test_subprocess ())
    {
      g_autoptr (GError) error = NULL;
      bed = ms_bed_load (g_getenv ("DATC_MS_BED"), &error);
      g_assert_no_error (error);
      ((void (*) (void)) body) ();
      ms_bed_free (bed);
      return;
    }
  gint64 t0 = g_get_monotonic_time ();
  g_test_trap_subprocess (NULL, 240 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_printerr ("# %s: %.1f s\n", g_test_get_path (), (g_get_monotonic_time () - t0) / 1e6);
  g_test_trap_assert_passed ();
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_autoptr (MsBed) up = NULL;
  if (!g_test_subprocess ())
    {
      /* A failed test body must not abort this process: it still has to
       * bring the bed down.  (Bodies run in subprocesses, where
       * assertions stay fatal.) */
      g_test_set_nonfatal_assertions ();
      g_autoptr (GError) error = NULL;
      g_autofree gchar *dir = g_strdup_printf ("/tmp/datc-multisite-%d", (int) getpid ());
      gint64 t0 = g_get_monotonic_time ();
      up = ms_bed_up (dir, &error);
      if (up == NULL)
        g_error ("%s", error->message);
      g_printerr ("# multi-site test bed up in %.1f s (%s)\n", (g_get_monotonic_time () - t0) / 1e6,
                  dir);
      g_setenv ("DATC_MS_BED", dir, TRUE);
    }
  g_test_add_data_func ("/multisite/one-campaign-across-slurm-grid-engine-pbs-lsf-and-fork",
                        across_sites, in_subprocess);
  g_test_add_data_func ("/multisite/competitor-fills-slurm-grid-engine-takes-the-work",
                        competitor_first, in_subprocess);
  g_test_add_data_func ("/multisite/hung-login-node-holds-up-nothing", hung_login_node,
                        in_subprocess);
  g_test_add_data_func ("/multisite/pending-proxies-migrate-to-a-site-with-room",
                        pending_proxies_migrate, in_subprocess);
  g_test_add_data_func ("/multisite/bad-scheduler-and-down-login-node-are-degraded",
                        bad_sites_degraded, in_subprocess);
  g_test_add_data_func ("/multisite/short-walltime-several-generations", walltime_generations,
                        in_subprocess);
  g_test_add_data_func ("/multisite/sites-check-finds-each-schedulers-queue",
                        sites_check_every_queue, in_subprocess);
  g_test_add_data_func ("/multisite/same-results-in-pull-static-direct", same_results_in_every_mode,
                        in_subprocess);
  int rc = g_test_run ();
  if (up != NULL)
    {
      g_autoptr (GError) error = NULL;
      gint64 t0 = g_get_monotonic_time ();
      if (!ms_bed_down (up, &error))
        {
          g_printerr ("# %s\n", error->message);
          rc = 1;
        }
      else if (g_getenv ("DATC_TEST_KEEP") == NULL && rc == 0)
        {
          /* Logs and keys of the daemons: kept when a test failed. */
          const char *rm[] = { "rm", "-rf", "--", up->dir, NULL };
          g_spawn_sync (NULL, (gchar **) rm, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL,
                        NULL, NULL);
        }
      g_printerr ("# multi-site test bed down in %.1f s\n", (g_get_monotonic_time () - t0) / 1e6);
    }
  return rc;
}
