/* test-proxies-real.c: proxies of a real campaign (`datc run --sites`) on
 * real Slurm, Grid Engine, OpenPBS and volclava (LSF), with real agents
 * connecting back over TCP with CURVE, in two shapes:
 *
 *  - local: the master in this network namespace, the cluster's commands
 *    run here (transport local), like test-batch.c (PBS: the master in
 *    the bed's own namespace, where PBS's jobs run);
 *  - ssh: the master in a namespace of its own (tb-master-S, 10.200.0.1),
 *    the cluster's daemons and its login node (a private sshd whose
 *    sessions see that cluster) in the site's namespace; the agent is
 *    uploaded over SFTP and connects back across the namespaces' bridge.
 *
 * For each, what a user relies on when a cluster is busy or takes a job
 * away, read from the campaign's own records (trace.jsonl, live `datc
 * status --json`, results.jsonl, the proxy's log) and from the
 * scheduler's squeue/qstat:
 *
 *  1. a proxy waits behind a competing user's job that fills the cluster,
 *     runs once that job is gone, and its agent runs the tasks;
 *  2. a running proxy cancelled with scancel, qdel or bkill drains its
 *     agent on the signal that comes first (TERM; USR2 with Grid Engine's
 *     -notify; INT from bkill):
 *     its tasks come back without a crash and a new proxy finishes them;
 *  3. a proxy that reaches its walltime drains before the kill (Slurm's
 *     --signal USR1 warning; Grid Engine: the agent's own end, which the
 *     proxy script exports, comes before h_rt's USR2; so on PBS and LSF),
 *     and a new proxy finishes the tasks.  Slurm's and LSF's limits are
 *     whole minutes, so their cases run once;
 *  4. (Slurm, local) a campaign that wants 8 proxies keeps to a budget of
 *     6 scheduler calls a minute, by its own trace and by a log of the
 *     commands that reached Slurm (tests/testbed/command-log.sh).
 *
 * Tasks that must be interrupted are slow on their first attempt only
 * (they leave a mark in the proxy's working directory), so a test ends
 * soon after the interruption.
 *
 * The parent process brings each test bed up the first time a test needs
 * it (Grid Engine has one cell per host, so it moves from this namespace
 * to the site's between the local and the ssh cases) and everything down
 * at the end; the test bodies run in g_test_trap_subprocess children, so
 * a failed assertion still leaves nothing running: after each test the
 * parent kills, by PID, a master the child left and cancels every job on
 * that cluster. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "harness.h"
#include "testbed.h"

#define TRACE_WAIT_S 60

/* ---- where the beds live ------------------------------------------------ */

/* /tmp/datc-proxies-PID (of the parent): one directory per bed, and
 * `masters`, the PIDs of the masters the children started.  Children find
 * it in DATC_PROXIES_BEDS. */
static const char *beds;

static gchar *
bed_path (const char *name)
{
  return g_build_filename (beds, name, NULL);
}

static GHashTable *
bed_env (const char *bed, const char *file)
{
  g_autofree gchar *path = g_build_filename (beds, bed, file, NULL);
  GHashTable *env = tb_env_read (path);
  g_assert_nonnull (env);
  return env;
}

/* A line in the test's log (stderr: the child's own messages do not reach
 * the parent's TAP stream) with the seconds since the case began. */
static gint64 case_start_us;

static void step (const char *format, ...) G_GNUC_PRINTF (1, 2);

static void
step (const char *format, ...)
{
  va_list ap;
  va_start (ap, format);
  g_autofree gchar *text = g_strdup_vprintf (format, ap);
  va_end (ap);
  g_printerr ("# %6.1f s  %s\n", (g_get_monotonic_time () - case_start_us) / 1e6, text);
}

/* ---- a cluster as the tests see it ------------------------------------- */

typedef enum { SLURM, SGE, PBS, LSF } Kind;

typedef struct {
  const char *scheduler; /* "slurm", "sge", "pbs" or "lsf" (also the site's name) */
  Kind kind;
  gboolean ssh;
  gchar *netns;        /* the cluster's namespace; NULL: this one */
  gchar *master_netns; /* ssh, and PBS: where the master runs; NULL: here */
  gchar *master_addr;
  GPtrArray *client_env; /* "K=V" the cluster's commands need */
  GHashTable *sshd;      /* ssh: sshd.env of its login node */
} Site;

static void
site_free (Site *s)
{
  if (s == NULL)
    return;
  g_free (s->netns);
  g_free (s->master_netns);
  g_free (s->master_addr);
  g_ptr_array_unref (s->client_env);
  if (s->sshd != NULL)
    g_hash_table_unref (s->sshd);
  g_free (s);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Site, site_free)

static Kind
kind_of (const char *scheduler)
{
  const char *const names[] = { [SLURM] = "slurm", [SGE] = "sge", [PBS] = "pbs", [LSF] = "lsf" };
  for (guint k = 0; k < G_N_ELEMENTS (names); k++)
    if (g_str_equal (scheduler, names[k]))
      return (Kind) k;
  g_error ("no test bed for scheduler %s", scheduler);
}

static gboolean
is_slurm (const Site *s)
{
  return s->kind == SLURM;
}

/* The cluster's bed: Slurm has one per namespace, Grid Engine one cell;
 * PBS and LSF run here only (PBS in a namespace of its own). */
static const char *
cluster_bed (const char *scheduler, gboolean ssh)
{
  switch (kind_of (scheduler))
    {
    case SGE:
      return "sge";
    case PBS:
      return "pbs";
    case LSF:
      return "lsf";
    case SLURM:
      break;
    }
  return ssh ? "slurm-ns" : "slurm-local";
}

static Site *
site_load (const char *scheduler, gboolean ssh)
{
  Site *s = g_new0 (Site, 1);
  s->scheduler = scheduler;
  s->kind = kind_of (scheduler);
  s->ssh = ssh;
  s->client_env = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GHashTable) env = bed_env (cluster_bed (scheduler, ssh), "env");
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init (&it, env);
  while (g_hash_table_iter_next (&it, &k, &v))
    g_ptr_array_add (s->client_env, g_strdup_printf ("%s=%s", (char *) k, (char *) v));
  /* LSF's commands are in LSF_BINDIR; PBS's env already puts its
   * wrappers first on PATH. */
  if (s->kind == LSF)
    g_ptr_array_add (s->client_env,
                     g_strdup_printf ("PATH=%s:%s",
                                      (char *) g_hash_table_lookup (env, "LSF_BINDIR"),
                                      g_getenv ("PATH")));
  /* PBS's jobs run in its namespace (PBS ignores loopback addresses, so it
   * has one of its own, test bed README): the master goes there too and
   * its agents reach it on that namespace's loopback.  The wrappers on
   * PATH enter the namespace themselves. */
  if (s->kind == PBS)
    {
      s->master_netns = g_strdup (g_hash_table_lookup (env, "PBS_NETNS"));
      g_assert_nonnull (s->master_netns);
    }
  if (ssh)
    {
      g_autoptr (GHashTable) ns = bed_env ("netns", "netns.env");
      g_autofree gchar *key = g_strdup_printf ("NETNS_SITE_%s", scheduler);
      s->netns = g_strdup (g_hash_table_lookup (ns, key));
      s->master_netns = g_strdup (g_hash_table_lookup (ns, "NETNS_MASTER"));
      s->master_addr = g_strdup (g_hash_table_lookup (ns, "NETNS_MASTER_ADDR"));
      g_assert_nonnull (s->netns);
      g_assert_nonnull (s->master_netns);
      g_autofree gchar *sshd_bed = g_strdup_printf ("sshd-%s", scheduler);
      s->sshd = bed_env (sshd_bed, "sshd.env");
    }
  return s;
}

static const char *
sshd_get (const Site *s, const char *key)
{
  const char *v = g_hash_table_lookup (s->sshd, key);
  g_assert_nonnull (v);
  return v;
}

/* argv run inside the cluster's namespace with its clients' environment,
 * as root (transfer full). */
static GStrv
site_argv (const Site *s, const char *const *cmd)
{
  g_autoptr (GStrvBuilder) b = g_strv_builder_new ();
  if (s->netns != NULL)
    {
      g_autofree gchar *net = g_strdup_printf ("--net=/run/netns/%s", s->netns);
      g_strv_builder_add_many (b, "nsenter", net, NULL);
    }
  g_strv_builder_add (b, "env");
  for (guint i = 0; i < s->client_env->len; i++)
    g_strv_builder_add (b, s->client_env->pdata[i]);
  for (guint i = 0; cmd[i] != NULL; i++)
    g_strv_builder_add (b, cmd[i]);
  return g_strv_builder_end (b);
}

/* stdout of a command run on the cluster; fails the test unless it exits 0. */
static gchar *
site_run (const Site *s, const char *const *cmd)
{
  g_auto (GStrv) argv = site_argv (s, cmd);
  int status;
  gchar *out = tb_capture ((const char *const *) argv, &status);
  if (status != 0)
    {
      g_autofree gchar *line = g_strjoinv (" ", argv);
      g_error ("%s exited with %d", line, status);
    }
  return out;
}

/* A job of user `competitor` that takes every slot of the cluster (on
 * PBS a job of root's: the bed's wrappers need root, and root may run
 * jobs there). */
static gchar *
competitor_fill (const Site *s)
{
  const char *slurm[] = { "runuser", "-u", "competitor", "--",     "sbatch",    "--parsable", "-n",
                          "8",       "-o", "/dev/null",  "--wrap", "sleep 600", NULL };
  const char *sge[]
      = { "runuser",   "-u", "competitor", "--",  "qsub", "-terse", "-b",    "y",   "-o",
          "/dev/null", "-j", "y",          "-pe", "smp",  "8",      "sleep", "600", NULL };
  const char *pbs[] = { "qsub",       "-N",        "competitor", "-l", "select=1:ncpus=8",
                        "-o",         "/dev/null", "-j",         "oe", "--",
                        "/bin/sleep", "600",       NULL };
  const char *lsf[] = { "runuser", "-u", "competitor", "--",    "bsub", "-n",
                        "8",       "-o", "/dev/null",  "sleep", "600",  NULL };
  const char *const *cmd[] = { [SLURM] = slurm, [SGE] = sge, [PBS] = pbs, [LSF] = lsf };
  g_autofree gchar *out = site_run (s, cmd[s->kind]);
  if (s->kind != LSF)
    return g_strdup (g_strstrip (out));
  /* "Job <N> is submitted to default queue <normal>." */
  g_autoptr (GRegex) submitted
      = g_regex_new ("^Job <([0-9]+)> is submitted", G_REGEX_MULTILINE, 0, NULL);
  g_autoptr (GMatchInfo) match = NULL;
  if (!g_regex_match (submitted, out, 0, &match))
    g_error ("the competitor's bsub said: %s", out);
  return g_match_info_fetch (match, 1);
}

/* The JSON object `json` parses to (transfer full); NULL when it is not
 * one (a command that printed nothing). */
static JsonObject *
json_parse_object (const char *json)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  if (!json_parser_load_from_data (parser, json, -1, NULL))
    return NULL;
  JsonNode *root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return NULL;
  return json_object_ref (json_node_get_object (root));
}

/* LSF's `bjobs -o "jobid stat" -json` records (borrowed from `o`); NULL
 * when there are none. */
static JsonArray *
lsf_records (JsonObject *o)
{
  if (o == NULL || !json_object_has_member (o, "RECORDS"))
    return NULL;
  JsonArray *a = json_object_get_array_member (o, "RECORDS");
  return a != NULL && json_array_get_length (a) > 0 ? a : NULL;
}

/* The scheduler's word for job `id`: Slurm's state (PENDING, RUNNING,
 * COMPLETED, CANCELLED, ...; "" once forgotten), Grid Engine's state
 * letters (qw, r, dr, ...; "" once it is gone: qstat forgets finished
 * jobs at once), PBS's job_state (Q, R, E, F: the bed keeps history),
 * LSF's STAT (PEND, RUN, DONE, EXIT). */
static gchar *
job_state (const Site *s, const char *id)
{
  if (is_slurm (s))
    {
      const char *cmd[] = { "squeue", "-h", "-t", "all", "-j", id, "-o", "%T", NULL };
      g_auto (GStrv) argv = site_argv (s, cmd);
      g_autofree gchar *out = tb_capture ((const char *const *) argv, NULL);
      return g_strdup (g_strstrip (out));
    }
  if (s->kind == PBS)
    {
      const char *cmd[] = { "qstat", "-x", "-f", "-F", "json", id, NULL };
      g_auto (GStrv) argv = site_argv (s, cmd);
      g_autofree gchar *out = tb_capture ((const char *const *) argv, NULL);
      g_autoptr (JsonObject) o = json_parse_object (out);
      JsonObject *jobs = o != NULL && json_object_has_member (o, "Jobs")
                             ? json_object_get_object_member (o, "Jobs")
                             : NULL;
      JsonObject *job = jobs != NULL && json_object_has_member (jobs, id)
                            ? json_object_get_object_member (jobs, id)
                            : NULL;
      return g_strdup (
          job != NULL ? json_object_get_string_member_with_default (job, "job_state", "") : "");
    }
  if (s->kind == LSF)
    {
      const char *cmd[] = { "bjobs", "-a", "-o", "jobid stat", "-json", id, NULL };
      g_auto (GStrv) argv = site_argv (s, cmd);
      g_autofree gchar *out = tb_capture ((const char *const *) argv, NULL);
      g_autoptr (JsonObject) o = json_parse_object (out);
      JsonArray *records = lsf_records (o);
      if (records == NULL)
        return g_strdup ("");
      JsonObject *r = json_array_get_object_element (records, 0);
      return g_strdup (json_object_get_string_member_with_default (r, "STAT", ""));
    }
  const char *cmd[] = { "qstat", "-u", "*", NULL };
  g_autofree gchar *out = site_run (s, cmd);
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_auto (GStrv) w = g_strsplit_set (g_strstrip (lines[i]), " \t", -1);
      g_autoptr (GPtrArray) words = g_ptr_array_new ();
      for (guint j = 0; w[j] != NULL; j++)
        if (w[j][0] != '\0')
          g_ptr_array_add (words, w[j]);
      if (words->len >= 5 && g_str_equal (words->pdata[0], id))
        return g_strdup (words->pdata[4]);
    }
  return g_strdup ("");
}

static gboolean
state_is_pending (const Site *s, const char *state)
{
  const char *const pending[] = { [SLURM] = "PENDING", [SGE] = "qw", [PBS] = "Q", [LSF] = "PEND" };
  return g_str_equal (state, pending[s->kind]);
}

/* Grid Engine says t (transferring) until the execd's word that the job
 * started reaches the qmaster, which may come after the job's agent has
 * connected; the sge driver counts it as running too. */
static gboolean
state_is_running (const Site *s, const char *state)
{
  switch (s->kind)
    {
    case SLURM:
      return g_str_equal (state, "RUNNING");
    case PBS:
      return g_str_equal (state, "R");
    case LSF:
      return g_str_equal (state, "RUN");
    case SGE:
      break;
    }
  return g_str_equal (state, "r") || g_str_equal (state, "t");
}

static void
await_job (const Site *s, const char *id, gboolean (*want) (const Site *, const char *),
           const char *what, guint timeout_s)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_s * G_USEC_PER_SEC;
  for (;;)
    {
      g_autofree gchar *state = job_state (s, id);
      if (want (s, state))
        return;
      if (g_get_monotonic_time () > deadline)
        g_error ("job %s is '%s' after %u s, not %s", id, state, timeout_s, what);
      g_usleep (100 * 1000);
    }
}

static void
job_cancel (const Site *s, const char *id)
{
  const char *slurm[] = { "scancel", id, NULL };
  const char *qdel[] = { "qdel", id, NULL };
  const char *bkill[] = { "bkill", id, NULL };
  const char *const *cmd[] = { [SLURM] = slurm, [SGE] = qdel, [PBS] = qdel, [LSF] = bkill };
  g_free (site_run (s, cmd[s->kind]));
}

/* Nothing queued or running on the cluster, by anyone. */
static gboolean
queue_empty (const Site *s)
{
  if (s->kind == LSF)
    {
      /* Unfinished jobs of every user; bjobs exits 255 when there are
       * none, with JOBS 0. */
      const char *cmd[] = { "bjobs", "-u", "all", "-o", "jobid stat", "-json", NULL };
      g_auto (GStrv) argv = site_argv (s, cmd);
      g_autofree gchar *out = tb_capture ((const char *const *) argv, NULL);
      g_autoptr (JsonObject) o = json_parse_object (out);
      if (o == NULL)
        g_error ("bjobs -u all did not answer JSON: %s", out);
      return lsf_records (o) == NULL;
    }
  const char *slurm[] = { "squeue", "-h", "-o", "%i %u %T", NULL };
  const char *qstat_all[] = { "qstat", "-u", "*", NULL };
  const char *qstat[] = { "qstat", NULL };
  const char *const *cmd[] = { [SLURM] = slurm, [SGE] = qstat_all, [PBS] = qstat };
  g_autofree gchar *out = site_run (s, cmd[s->kind]);
  return g_strstrip (out)[0] == '\0';
}

static void
await_queue_empty (const Site *s, guint timeout_s)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_s * G_USEC_PER_SEC;
  while (!queue_empty (s))
    {
      if (g_get_monotonic_time () > deadline)
        g_error ("%s: jobs are still queued or running after %u s", s->scheduler, timeout_s);
      g_usleep (200 * 1000);
    }
}

/* ---- a campaign --------------------------------------------------------- */

typedef struct {
  const Site *site;
  TbDir *d;
  gchar *dir;     /* the campaign directory */
  gchar *workdir; /* the proxies' working directory (tasks' cwd) */
  TbProc *master;
} Campaign;

static void
campaign_free (Campaign *c)
{
  if (c == NULL)
    return;
  tb_proc_free (c->master);
  g_free (c->dir);
  g_free (c->workdir);
  g_free (c);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Campaign, campaign_free)

/* The master's PID where the parent finds it, should this child die
 * before it stops the master. */
static void
note_master (int pid)
{
  g_autofree gchar *path = bed_path ("masters");
  g_autofree gchar *line = g_strdup_printf ("%d\n", pid);
  FILE *f = fopen (path, "a");
  g_assert_nonnull (f);
  g_assert_cmpint (fputs (line, f), >=, 0);
  g_assert_cmpint (fclose (f), ==, 0);
}

/* How a campaign's site is set beyond its slots and walltime. */
typedef struct {
  guint max_proxies;
  const char *site_keys;  /* more "key = value\n" lines for the site's group, or NULL */
  const char *path_first; /* local: a directory put first on the master's PATH, or NULL */
  const char *mode;       /* datc run --mode, or NULL: pull */
  gboolean keep;          /* the proxies' logs are read after the campaign (--keep-site-files) */
} CampaignOptions;

static gchar *
sites_ini (const Campaign *c, guint slots, const char *walltime, const CampaignOptions *o)
{
  const Site *s = c->site;
  GString *ini = g_string_new (NULL);
  g_string_append_printf (ini,
                          "[master]\nlisten = tcp://%s:0\n\n[site %s]\nscheduler = %s\n"
                          "slots_per_proxy = %u\nmax_proxies = %u\nwalltime = %s\n"
                          "workdir = %s\n",
                          s->ssh ? s->master_addr : "127.0.0.1", s->scheduler, s->scheduler, slots,
                          o->max_proxies, walltime, c->workdir);
  if (o->site_keys != NULL)
    g_string_append (ini, o->site_keys);
  if (s->ssh)
    g_string_append_printf (ini,
                            "transport = ssh\nhost = %s\nport = %s\nuser = %s\nidentity = %s\n"
                            "known_hosts = %s\nagent = upload\n",
                            sshd_get (s, "SSHD_ADDR"), sshd_get (s, "SSHD_PORT"),
                            sshd_get (s, "SSHD_USER"), sshd_get (s, "SSHD_IDENTITY"),
                            sshd_get (s, "SSHD_KNOWN_HOSTS"));
  return g_string_free (ini, FALSE);
}

/* Starts `datc run` on `tasks` with proxies of `slots` slots on the
 * site: here, or (ssh, PBS) in the master's namespace. */
static Campaign *
campaign_start_with (const Site *s, TbDir *d, const char *tasks, guint slots, const char *walltime,
                     const CampaignOptions *o)
{
  Campaign *c = g_new0 (Campaign, 1);
  c->site = s;
  c->d = d;
  c->dir = g_build_filename (d->path, "c", NULL);
  if (s->ssh)
    {
      /* On the login node, owned by its user; one per campaign. */
      g_autofree gchar *base = g_path_get_basename (d->path);
      c->workdir = g_build_filename (sshd_get (s, "SSHD_REMOTE_DIR"), base, NULL);
    }
  else
    c->workdir = g_build_filename (d->path, "work", NULL);
  g_autofree gchar *file = tb_write (d, "tasks.txt", tasks);
  g_autofree gchar *ini_text = sites_ini (c, slots, walltime, o);
  g_autofree gchar *ini = tb_write (d, "sites.ini", ini_text);

  g_autoptr (GStrvBuilder) b = g_strv_builder_new ();
  if (s->master_netns != NULL)
    {
      g_autofree gchar *net = g_strdup_printf ("--net=/run/netns/%s", s->master_netns);
      g_strv_builder_add_many (b, "nsenter", net, NULL);
    }
  g_strv_builder_add (b, "env");
  if (!s->ssh)
    {
      for (guint i = 0; i < s->client_env->len; i++)
        g_strv_builder_add (b, s->client_env->pdata[i]);
      g_autofree gchar *path
          = o->path_first != NULL ? g_strdup_printf ("PATH=%s:%s", o->path_first, g_getenv ("PATH"))
                                  : NULL;
      if (path != NULL)
        g_strv_builder_add (b, path);
    }
  g_autofree gchar *agent = g_strdup_printf ("DATC_AGENT=%s", tb_agent ());
  g_strv_builder_add_many (b, agent, tb_datc (), "run", "--dir", c->dir, "--sites", ini, "--mode",
                           o->mode != NULL ? o->mode : "pull", NULL);
  if (o->keep)
    g_strv_builder_add (b, "--keep-site-files");
  g_strv_builder_add (b, file);
  g_auto (GStrv) argv = g_strv_builder_end (b);
  c->master = tb_spawn (d, "master", (const char *const *) argv);
  note_master (tb_proc_pid (c->master));
  return c;
}

/* One proxy at a time. */
static Campaign *
campaign_start (const Site *s, TbDir *d, const char *tasks, guint slots, const char *walltime,
                gboolean keep)
{
  const CampaignOptions one = { .max_proxies = 1, .keep = keep };
  return campaign_start_with (s, d, tasks, slots, walltime, &one);
}

static void
assert_master_alive (Campaign *c)
{
  if (tb_pid_gone (tb_proc_pid (c->master)))
    {
      g_autofree gchar *err = tb_proc_stderr (c->master);
      g_error ("the master ended early:\n%s", err);
    }
}

static int
campaign_finish (Campaign *c, guint timeout_s)
{
  int status = tb_wait (c->master, timeout_s);
  if (status != 0)
    {
      g_autofree gchar *err = tb_proc_stderr (c->master);
      g_printerr ("# the master exited with %d:\n%s\n", status, err);
    }
  return status;
}

/* The first trace event `event` about `proxy` (any when NULL), skipping
 * those about `not_proxy`; borrowed from `trace`. */
static JsonObject *
trace_find (GPtrArray *trace, const char *event, const char *proxy, const char *not_proxy)
{
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      const char *p = json_object_get_string_member_with_default (o, "proxy", "");
      if (g_str_equal (json_object_get_string_member (o, "event"), event)
          && (proxy == NULL || g_str_equal (p, proxy))
          && (not_proxy == NULL || !g_str_equal (p, not_proxy)))
        return o;
    }
  return NULL;
}

/* Waits for that event while the master runs (transfer full). */
static JsonObject *
await_event (Campaign *c, const char *event, const char *proxy, const char *not_proxy)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) TRACE_WAIT_S * G_USEC_PER_SEC;
  for (;;)
    {
      g_autoptr (GPtrArray) trace = tb_trace (c->dir);
      JsonObject *o = trace_find (trace, event, proxy, not_proxy);
      if (o != NULL)
        return json_object_ref (o);
      assert_master_alive (c);
      if (g_get_monotonic_time () > deadline)
        g_error ("no %s event in %s/trace.jsonl after %u s", event, c->dir, TRACE_WAIT_S);
      g_usleep (50 * 1000);
    }
}

static const char *
str_member (JsonObject *o, const char *name)
{
  const char *v = json_object_get_string_member_with_default (o, name, NULL);
  g_assert_nonnull (v);
  return v;
}

/* The site's entry of the live status (transfer full). */
static JsonObject *
site_status (Campaign *c)
{
  g_autoptr (JsonObject) st = tb_status (c->dir);
  g_assert_nonnull (st);
  JsonArray *sites = json_object_get_array_member (st, "sites");
  for (guint i = 0; sites != NULL && i < json_array_get_length (sites); i++)
    {
      JsonObject *site = json_array_get_object_element (sites, i);
      if (g_str_equal (str_member (site, "name"), c->site->scheduler))
        return json_object_ref (site);
    }
  g_error ("status of %s has no site %s", c->dir, c->site->scheduler);
}

/* Waits until the live status shows `pending` and `running` proxies. */
static void
await_proxies (Campaign *c, gint64 pending, gint64 running)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) TRACE_WAIT_S * G_USEC_PER_SEC;
  for (;;)
    {
      assert_master_alive (c);
      g_autoptr (JsonObject) site = site_status (c);
      gint64 p = json_object_get_int_member (site, "proxies_pending");
      gint64 r = json_object_get_int_member (site, "proxies_running");
      if (p == pending && r == running)
        return;
      if (g_get_monotonic_time () > deadline)
        g_error ("status shows %" G_GINT64_FORMAT " pending and %" G_GINT64_FORMAT
                 " running proxies, not %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT,
                 p, r, pending, running);
      g_usleep (50 * 1000);
    }
}

/* The proxy's own log (what its batch job printed, the agent's messages
 * among it); "" when there is none. */
static gchar *
proxy_log_name (const Site *s, const char *proxy, const char *job)
{
  /* PBS names it itself: JOBNAME.oSEQ (SEQ: the id before the server). */
  if (s->kind == PBS)
    return g_strdup_printf ("datc-%s.o%.*s", proxy, (int) strcspn (job, "."), job);
  return g_strdup_printf ("datc-%s.%s.log", proxy, job);
}

static gchar *
proxy_log (Campaign *c, const char *proxy, const char *job)
{
  g_autofree gchar *name = proxy_log_name (c->site, proxy, job);
  g_autofree gchar *path = g_build_filename (c->workdir, name, NULL);
  gchar *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return g_strdup ("");
  return text;
}

/* Tasks that are slow (`seconds`) on their first attempt only: each
 * leaves started.N in its cwd (the proxy's workdir) and later attempts
 * see it and end at once. */
static gchar *
slow_first_tasks (guint n, guint seconds)
{
  GString *t = g_string_new (NULL);
  for (guint i = 1; i <= n; i++)
    g_string_append_printf (t,
                            "if [ -e started.%u ]; then echo again; "
                            "else touch started.%u; sleep %u; fi\n",
                            i, i, seconds);
  return g_string_free (t, FALSE);
}

static void
await_started (Campaign *c, guint n)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) TRACE_WAIT_S * G_USEC_PER_SEC;
  for (guint i = 1; i <= n; i++)
    {
      g_autofree gchar *name = g_strdup_printf ("started.%u", i);
      g_autofree gchar *path = g_build_filename (c->workdir, name, NULL);
      while (!g_file_test (path, G_FILE_TEST_EXISTS))
        {
          assert_master_alive (c);
          if (g_get_monotonic_time () > deadline)
            g_error ("task %u did not start within %u s", i, TRACE_WAIT_S);
          g_usleep (50 * 1000);
        }
    }
}

/* The first proxy was interrupted while its agent ran every task; they
 * came back to the queue without a crash (the agent left, it was not
 * lost) and the next proxy ran each exactly once, fast this time. */
static void
assert_tasks_came_back (Campaign *c, guint n, const char *first_proxy)
{
  g_autoptr (GPtrArray) trace = tb_trace (c->dir);
  g_assert_nonnull (trace_find (trace, "agent_exited", first_proxy, NULL));
  g_assert_null (trace_find (trace, "agent_lost", NULL, NULL));
  JsonObject *second = trace_find (trace, "agent_connected", NULL, first_proxy);
  g_assert_nonnull (second);

  g_autoptr (GHashTable) res = tb_results (c->dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, n);
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      g_assert_cmpstr (json_object_get_string_member (v, "status"), ==, "exited");
      g_assert_cmpint (json_object_get_int_member (v, "exit_code"), ==, 0);
      g_assert_cmpint (json_object_get_int_member (v, "attempt"), ==, 2);
      g_assert_cmpstr (json_object_get_string_member (v, "proxy"), !=, first_proxy);
      g_assert_cmpstr (json_object_get_string_member (v, "site"), ==, c->site->scheduler);
    }
}

/* ---- 1. pending behind a competitor, then running ---------------------- */

/* How many of the status's pending reasons say the cluster is full, in
 * the scheduler's words: Slurm's Resources (or Priority, behind the
 * competitor), PBS's "Not enough free nodes available" (the one node is
 * busy) or "Insufficient amount of resource: ncpus ...",
 * LSF's slot limits. */
static gint64
pending_for_resources (const Site *s, JsonObject *reasons)
{
  gint64 n = 0;
  GList *names = reasons != NULL ? json_object_get_members (reasons) : NULL;
  for (GList *l = names; l != NULL; l = l->next)
    {
      const char *why = l->data;
      gboolean full = FALSE;
      switch (s->kind)
        {
        case SLURM:
          full = g_str_equal (why, "Resources") || g_str_equal (why, "Priority");
          break;
        case PBS:
          full = g_str_equal (why, "Not enough free nodes available")
                 || g_str_has_prefix (why, "Insufficient amount of resource: ncpus");
          break;
        case LSF:
          full = strstr (why, "slot") != NULL;
          break;
        case SGE:
          break;
        }
      if (full)
        n += json_object_get_int_member (reasons, why);
    }
  g_list_free (names);
  return n;
}

static void
pending_behind_a_competitor (const Site *s)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *competitor = competitor_fill (s);
  await_job (s, competitor, state_is_running, "running", 30);
  step ("competitor's job %s runs", competitor);

  GString *tasks = g_string_new (NULL);
  for (guint i = 0; i < 6; i++)
    g_string_append (tasks, "sleep 1; echo job $SLURM_JOB_ID$JOB_ID$PBS_JOBID$LSB_JOBID\n");
  g_autofree gchar *tasks_text = g_string_free (tasks, FALSE);
  g_autoptr (Campaign) c = campaign_start (s, d, tasks_text, 2, "10m", FALSE);
  g_autoptr (JsonObject) submitted = await_event (c, "proxy_submitted", NULL, NULL);
  const char *proxy = str_member (submitted, "proxy");
  const char *job = str_member (submitted, "job");

  /* Pending as the master sees it and as the scheduler says, and it stays
   * so (Grid Engine schedules every second, Slurm at once on a change). */
  await_proxies (c, 1, 0);
  step ("proxy %s (job %s) pending", proxy, job);
  for (guint i = 0; i < 6; i++)
    {
      g_autofree gchar *state = job_state (s, job);
      g_assert_true (state_is_pending (s, state));
      g_autoptr (JsonObject) site = site_status (c);
      g_assert_cmpint (json_object_get_int_member (site, "proxies_pending"), ==, 1);
      g_assert_cmpint (json_object_get_int_member (site, "proxies_running"), ==, 0);
      g_assert_cmpint (json_object_get_int_member (site, "agents"), ==, 0);
      g_usleep (500 * 1000);
    }
  /* Status says it waits in the queue (once a poll said so), and why:
   * Slurm's %r, PBS's comment, LSF's pending reasons (Grid Engine's qstat
   * gives no reason for a plain qw). */
  gint64 reason_deadline = g_get_monotonic_time () + (gint64) TRACE_WAIT_S * G_USEC_PER_SEC;
  for (gboolean said = FALSE; !said;)
    {
      g_autoptr (JsonObject) site = site_status (c);
      JsonObject *reasons = json_object_get_object_member (site, "pending_reasons");
      gint64 queued = json_object_get_int_member (site, "proxies_queued");
      gint64 why = pending_for_resources (s, reasons);
      said = queued == 1 && (why == 1 || s->kind == SGE);
      if (!said && g_get_monotonic_time () > reason_deadline)
        {
          g_autoptr (JsonNode) node = json_node_init_object (json_node_alloc (), site);
          g_autofree gchar *text = json_to_string (node, FALSE);
          g_error ("status shows %" G_GINT64_FORMAT " proxies queued, %" G_GINT64_FORMAT
                   " of them for want of resources, not 1 (job %s): %s",
                   queued, why, job, text);
        }
      if (!said)
        g_usleep (100 * 1000);
    }
  step ("status shows proxy %s queued (and why, but on Grid Engine)", proxy);
  g_autoptr (GPtrArray) before = tb_trace (c->dir);
  g_assert_null (trace_find (before, "agent_connected", NULL, NULL));
  g_autofree gchar *results = g_build_filename (c->dir, "results.jsonl", NULL);
  g_assert_cmpuint (tb_count_lines (results), ==, 0);

  gint64 released_us = g_get_real_time ();
  job_cancel (s, competitor);
  step ("competitor cancelled");
  g_autoptr (JsonObject) connected = await_event (c, "agent_connected", proxy, NULL);
  g_assert_cmpint (json_object_get_int_member (connected, "time"), >, released_us);
  g_assert_cmpint (json_object_get_int_member (connected, "slots"), ==, 2);
  /* Running, in both eyes, while its tasks run. */
  await_proxies (c, 0, 1);
  step ("proxy running, its agent connected");
  g_autofree gchar *running = job_state (s, job);
  if (!state_is_running (s, running))
    g_error ("the agent of job %s connected, and the scheduler says it is '%s'", job, running);

  g_assert_cmpint (campaign_finish (c, 120), ==, 0);
  step ("campaign finished");
  g_autoptr (GHashTable) res = tb_results (c->dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 6);
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      g_assert_cmpint (json_object_get_int_member (v, "exit_code"), ==, 0);
      g_assert_cmpint (json_object_get_int_member (v, "attempt"), ==, 1);
      g_assert_cmpstr (json_object_get_string_member (v, "proxy"), ==, proxy);
    }
  /* The tasks ran inside that batch job. */
  const char *out_argv[] = { tb_datc (), "output", c->dir, "1", NULL };
  g_autoptr (TbProc) out = tb_spawn (d, "output", out_argv);
  g_assert_cmpint (tb_wait (out, 30), ==, 0);
  g_autofree gchar *printed = tb_proc_stdout (out);
  g_autofree gchar *expected = g_strdup_printf ("job %s\n", job);
  g_assert_cmpstr (printed, ==, expected);
  /* The proxy ended well: its script and log are gone from the workdir
   * (the names Slurm and Grid Engine gave them). */
  g_autofree gchar *script_name = g_strdup_printf ("%s.sh", proxy);
  g_autofree gchar *log_name = proxy_log_name (s, proxy, job);
  g_autofree gchar *script = g_build_filename (c->workdir, script_name, NULL);
  g_autofree gchar *log = g_build_filename (c->workdir, log_name, NULL);
  g_assert_false (g_file_test (script, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (log, G_FILE_TEST_EXISTS));
  await_queue_empty (s, 30);
  step ("nothing left in the queue");
}

/* ---- 2. a running proxy cancelled -------------------------------------- */

static void
cancelled_proxy_gives_its_tasks_back (const Site *s)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *tasks = slow_first_tasks (2, 300);
  g_autoptr (Campaign) c = campaign_start (s, d, tasks, 2, "10m", TRUE);
  g_autoptr (JsonObject) submitted = await_event (c, "proxy_submitted", NULL, NULL);
  const char *proxy = str_member (submitted, "proxy");
  const char *job = str_member (submitted, "job");
  g_autoptr (JsonObject) connected = await_event (c, "agent_connected", proxy, NULL);
  await_started (c, 2);
  step ("proxy %s (job %s): both tasks started", proxy, job);

  job_cancel (s, job);
  g_autoptr (JsonObject) ended = await_event (c, "proxy_ended", proxy, NULL);
  step ("proxy cancelled and ended");
  g_assert_cmpint (campaign_finish (c, 120), ==, 0);
  step ("campaign finished");
  assert_tasks_came_back (c, 2, proxy);

  /* The agent drained on the signal the scheduler sends first: TERM from
   * scancel and PBS's qdel; USR2 from Grid Engine's qdel, since proxies
   * are submitted with -notify; INT from bkill. */
  g_autofree gchar *log = proxy_log (c, proxy, job);
  const char *const first_signal[] = { [SLURM] = "draining: Terminated",
                                       [SGE] = "draining: User defined signal 2",
                                       [PBS] = "draining: Terminated",
                                       [LSF] = "draining: Interrupt" };
  const char *why = first_signal[s->kind];
  if (strstr (log, why) == NULL)
    g_error ("proxy %s's log does not say \"%s\":\n%s", proxy, why, log);
  if (is_slurm (s))
    {
      g_autofree gchar *state = job_state (s, job);
      g_assert_cmpstr (state, ==, "CANCELLED");
    }
  await_queue_empty (s, 30);
  step ("nothing left in the queue");
}

/* ---- 3. walltime ----------------------------------------------------- */

static void
walltime_drains_before_the_kill (const Site *s)
{
  /* Slurm and LSF: whole minutes; Slurm's USR1 warning comes 35 s before
   * the end, give or take its 60 s resolution.  Grid Engine (h_rt) and
   * PBS (walltime): seconds. */
  guint walltime_s = s->kind == SLURM || s->kind == LSF ? 60 : 20;
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *tasks = slow_first_tasks (2, 600);
  g_autofree gchar *walltime = g_strdup_printf ("%us", walltime_s);
  g_autoptr (Campaign) c = campaign_start (s, d, tasks, 2, walltime, TRUE);
  g_autoptr (JsonObject) submitted = await_event (c, "proxy_submitted", NULL, NULL);
  const char *proxy = str_member (submitted, "proxy");
  const char *job = str_member (submitted, "job");
  g_assert_cmpint (json_object_get_int_member (submitted, "walltime"), ==, walltime_s);
  g_autoptr (JsonObject) connected = await_event (c, "agent_connected", proxy, NULL);
  step ("proxy %s (job %s): agent connected", proxy, job);

  g_assert_cmpint (campaign_finish (c, walltime_s + 120), ==, 0);
  step ("campaign finished");
  assert_tasks_came_back (c, 2, proxy);

  /* It left before the scheduler's limit. */
  g_autoptr (GPtrArray) trace = tb_trace (c->dir);
  JsonObject *exited = trace_find (trace, "agent_exited", proxy, NULL);
  gint64 lived_us = json_object_get_int_member (exited, "time")
                    - json_object_get_int_member (connected, "time");
  step ("the first agent lived %.1f s of a %u s walltime", lived_us / 1e6, walltime_s);
  g_assert_cmpint (lived_us, <, (gint64) walltime_s * G_USEC_PER_SEC);

  /* On what: Slurm's warning through the proxy script, which execs the
   * agent as the batch shell; elsewhere the agent's own end
   * (DATC_WALLTIME_END from the script, 3 s before it) comes before the
   * limit's signal (Grid Engine's h_rt USR2, which the cancel test shows
   * reaching it; PBS's TERM; LSF's USR2 at -W). */
  g_autofree gchar *log = proxy_log (c, proxy, job);
  const char *why
      = is_slurm (s) ? "draining: User defined signal 1" : "draining: walltime is ending";
  if (strstr (log, why) == NULL)
    g_error ("proxy %s's log does not say \"%s\":\n%s", proxy, why, log);
  if (is_slurm (s))
    {
      /* Not TIMEOUT: the job ended on its own before the limit's kill. */
      g_autofree gchar *state = job_state (s, job);
      g_assert_cmpstr (state, ==, "COMPLETED");
    }
  await_queue_empty (s, 30);
  step ("nothing left in the queue");
}

/* ---- 4. the budget of scheduler commands ------------------------------ */

/* A campaign that wants many proxies on a site whose scheduler may be
 * asked BUDGET times a minute (max_calls_per_minute): submits (the sbatch
 * and, counted with it, the squeue lookup run only when its answer is
 * lost), polls and cancels.  Without the budget it would ask far more (8
 * submits at once, a poll a second while a proxy waits for its agent).
 *
 * datc's trace says when the budget let each command go; command-log.sh's
 * wrappers say when it reached Slurm, a little later (the site's worker
 * runs one command at a time; a submit puts its script first).  So Slurm
 * is held to the budget over windows shorter than a minute by the largest
 * of those delays, after checking that every command datc announced
 * reached Slurm and no other did. */
#define BUDGET 6
#define MINUTE_US (60 * G_USEC_PER_SEC)
/* The most a command may take from the budget's word to the cluster. */
#define MAX_LAG_US (5 * G_USEC_PER_SEC)

typedef enum {
  CMD_SUBMIT,
  CMD_POLL,
  CMD_CANCEL,
  CMD_LOOKUP, /* the submit's second call */
  CMD_OTHER,
  N_CMD
} CmdKind;

static const char *const cmd_names[N_CMD] = { "submit", "poll", "cancel", "lookup", "other" };

typedef struct {
  gint64 time; /* microseconds since the epoch */
  CmdKind kind;
  gint64 calls;
} Cmd;

static gint
cmd_by_time (gconstpointer a, gconstpointer b)
{
  gint64 ta = ((const Cmd *) a)->time, tb = ((const Cmd *) b)->time;
  return ta < tb ? -1 : ta > tb;
}

/* The most calls in any `window_us` [t, t + window_us) of `cmds` (sorted). */
static gint64
max_in_window (GArray *cmds, gint64 window_us)
{
  gint64 most = 0;
  for (guint i = 0; i < cmds->len; i++)
    {
      const Cmd *first = &g_array_index (cmds, Cmd, i);
      gint64 n = 0;
      for (guint j = i;
           j < cmds->len && g_array_index (cmds, Cmd, j).time < first->time + window_us; j++)
        n += g_array_index (cmds, Cmd, j).calls;
      most = MAX (most, n);
    }
  return most;
}

/* What datc says it asked the site: its site_command trace events. */
static GArray *
datc_commands (Campaign *c)
{
  GArray *cmds = g_array_new (FALSE, FALSE, sizeof (Cmd));
  g_autoptr (GPtrArray) trace = tb_trace (c->dir);
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      if (!g_str_equal (json_object_get_string_member (o, "event"), "site_command")
          || !g_str_equal (str_member (o, "site"), c->site->scheduler))
        continue;
      const char *kind = str_member (o, "kind");
      /* What it took of the budget (a submit 2: its lookup set aside). */
      Cmd cmd = { .time = json_object_get_int_member (o, "time"),
                  .calls = json_object_get_int_member (o, "budget") };
      if (g_str_equal (kind, "submit"))
        cmd.kind = CMD_SUBMIT;
      else if (g_str_equal (kind, "poll"))
        cmd.kind = CMD_POLL;
      else if (g_str_equal (kind, "cancel"))
        cmd.kind = CMD_CANCEL;
      else if (g_str_equal (kind, "lookup"))
        cmd.kind = CMD_LOOKUP;
      else
        g_error ("%s/trace.jsonl: a site_command of unknown kind \"%s\"", c->dir, kind);
      g_assert_cmpint (cmd.calls, >=, 1);
      g_array_append_val (cmds, cmd);
    }
  g_array_sort (cmds, cmd_by_time);
  return cmds;
}

/* What reached Slurm: command-log.sh's log (TIME_US PROG ARG...). */
static GArray *
slurm_commands (const char *log)
{
  g_autofree gchar *text = NULL;
  g_autoptr (GError) error = NULL;
  if (!g_file_get_contents (log, &text, NULL, &error))
    g_error ("%s", error->message);
  GArray *cmds = g_array_new (FALSE, FALSE, sizeof (Cmd));
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      if (lines[i][0] == '\0')
        continue;
      g_auto (GStrv) argv = NULL;
      if (!g_shell_parse_argv (lines[i], NULL, &argv, &error) || g_strv_length (argv) < 2)
        g_error ("%s:%u: not TIME PROG ARG...: %s", log, i + 1, lines[i]);
      Cmd cmd = { .time = g_ascii_strtoll (argv[0], NULL, 10), .calls = 1, .kind = CMD_OTHER };
      if (g_str_equal (argv[1], "sbatch"))
        cmd.kind = CMD_SUBMIT;
      else if (g_str_equal (argv[1], "scancel"))
        cmd.kind = CMD_CANCEL;
      else if (g_str_equal (argv[1], "squeue"))
        for (guint k = 2; argv[k] != NULL; k++)
          {
            /* A poll names its jobs, a lookup the submit's job name. */
            if (g_str_equal (argv[k], "-j"))
              cmd.kind = CMD_POLL;
            else if (g_str_has_prefix (argv[k], "--name="))
              cmd.kind = CMD_LOOKUP;
          }
      if (cmd.kind == CMD_OTHER)
        g_printerr ("# %s:%u: not a command datc counts: %s\n", log, i + 1, lines[i]);
      g_array_append_val (cmds, cmd);
    }
  g_array_sort (cmds, cmd_by_time);
  return cmds;
}

static guint
count_kind (GArray *cmds, CmdKind kind)
{
  guint n = 0;
  for (guint i = 0; i < cmds->len; i++)
    n += g_array_index (cmds, Cmd, i).kind == kind;
  return n;
}

/* The calls of `kind` beyond one per command: for submits, the lookups
 * the budget set aside. */
static gint64
extra_calls (GArray *cmds, CmdKind kind)
{
  gint64 n = 0;
  for (guint i = 0; i < cmds->len; i++)
    if (g_array_index (cmds, Cmd, i).kind == kind)
      n += g_array_index (cmds, Cmd, i).calls - 1;
  return n;
}

/* The i-th command of each kind datc announced is the i-th Slurm saw
 * (one worker runs a site's commands in order): the largest delay from
 * the budget's decision to the cluster; a lookup belongs to the submit
 * before it. */
static gint64
max_lag (GArray *datc, GArray *slurm)
{
  gint64 most = 0;
  for (CmdKind kind = CMD_SUBMIT; kind <= CMD_CANCEL; kind++)
    {
      guint j = 0;
      for (guint i = 0; i < slurm->len; i++)
        {
          const Cmd *seen = &g_array_index (slurm, Cmd, i);
          if (seen->kind != kind)
            continue;
          while (j < datc->len && g_array_index (datc, Cmd, j).kind != kind)
            j++;
          g_assert_cmpuint (j, <, datc->len);
          gint64 lag = seen->time - g_array_index (datc, Cmd, j).time;
          if (lag < 0 || lag > MAX_LAG_US)
            g_error ("the %s Slurm saw at %" G_GINT64_FORMAT " came %.3f s after datc's "
                     "trace said it (not within 0-%d s)",
                     cmd_names[kind], seen->time, lag / 1e6, (int) (MAX_LAG_US / G_USEC_PER_SEC));
          most = MAX (most, lag);
          j++;
        }
    }
  for (guint i = 0; i < slurm->len; i++)
    {
      const Cmd *seen = &g_array_index (slurm, Cmd, i);
      if (seen->kind != CMD_LOOKUP)
        continue;
      const Cmd *submit = NULL;
      for (guint j = 0; j < datc->len; j++)
        {
          const Cmd *said = &g_array_index (datc, Cmd, j);
          if (said->kind == CMD_SUBMIT && said->time <= seen->time)
            submit = said;
        }
      g_assert_nonnull (submit);
      g_assert_cmpint (seen->time - submit->time, <=, MAX_LAG_US);
      most = MAX (most, seen->time - submit->time);
    }
  return most;
}

static void
budget_holds_with_many_proxies (const Site *s)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *log_dir = g_build_filename (d->path, "command-log", NULL);
  const char *log_args[] = { log_dir, "sbatch", "squeue", "scancel", "scontrol", NULL };
  g_assert_true (tb_script ("command-log.sh", log_args, NULL));
  g_autofree gchar *log_bin = g_build_filename (log_dir, "bin", NULL);
  g_autofree gchar *log = g_build_filename (log_dir, "commands.log", NULL);

  /* 375 slot-seconds: about a minute on 8 one-slot proxies (one array),
   * long enough for a poll a second to run into the budget. */
  guint n_tasks = 75;
  GString *tasks = g_string_new (NULL);
  for (guint i = 0; i < n_tasks; i++)
    g_string_append (tasks, "sleep 5\n");
  g_autofree gchar *tasks_text = g_string_free (tasks, FALSE);
  g_autofree gchar *keys
      = g_strdup_printf ("poll_interval = 1s\nmax_calls_per_minute = %d\n", BUDGET);
  const CampaignOptions o = { .max_proxies = 8, .site_keys = keys, .path_first = log_bin };
  g_autoptr (Campaign) c = campaign_start_with (s, d, tasks_text, 1, "10m", &o);
  g_assert_cmpint (campaign_finish (c, 240), ==, 0);
  step ("campaign finished");
  g_autoptr (GHashTable) res = tb_results (c->dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, n_tasks);
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    g_assert_cmpint (json_object_get_int_member (v, "exit_code"), ==, 0);
  await_queue_empty (s, 30);
  step ("nothing left in the queue");

  /* (a) datc's own account: never more than the budget in any minute. */
  g_autoptr (GArray) datc = datc_commands (c);
  gint64 total = 0;
  for (guint i = 0; i < datc->len; i++)
    total += g_array_index (datc, Cmd, i).calls;
  gint64 most = max_in_window (datc, MINUTE_US);
  step ("datc: %u submits, %u polls, %u cancels (%" G_GINT64_FORMAT " calls) over %.0f s; "
        "at most %" G_GINT64_FORMAT " in a minute",
        count_kind (datc, CMD_SUBMIT), count_kind (datc, CMD_POLL), count_kind (datc, CMD_CANCEL),
        total,
        datc->len
            ? (g_array_index (datc, Cmd, datc->len - 1).time - g_array_index (datc, Cmd, 0).time)
                  / 1e6
            : 0.0,
        most);
  g_assert_cmpint (total, >, 0);
  g_assert_cmpint (most, <=, BUDGET);
  /* Several proxies went through it (8 were wanted at once: one array). */
  g_assert_cmpuint (count_kind (datc, CMD_SUBMIT), >=, 1);
  g_autoptr (GPtrArray) trace = tb_trace (c->dir);
  guint proxies = 0;
  for (guint i = 0; i < trace->len; i++)
    proxies += g_str_equal (json_object_get_string_member (trace->pdata[i], "event"),
                            "proxy_submitted");
  g_assert_cmpuint (proxies, >=, 4);

  /* (b) Slurm's side: the same commands reached it, each soon after datc
   * decided it, so no window shorter by that delay holds more. */
  g_autoptr (GArray) slurm = slurm_commands (log);
  g_assert_cmpuint (count_kind (slurm, CMD_OTHER), ==, 0);
  g_assert_cmpuint (count_kind (slurm, CMD_SUBMIT), ==, count_kind (datc, CMD_SUBMIT));
  g_assert_cmpuint (count_kind (slurm, CMD_POLL), ==, count_kind (datc, CMD_POLL));
  g_assert_cmpuint (count_kind (slurm, CMD_CANCEL), ==, count_kind (datc, CMD_CANCEL));
  g_assert_cmpint (count_kind (slurm, CMD_LOOKUP), <=, extra_calls (datc, CMD_SUBMIT));
  gint64 lag = max_lag (datc, slurm);
  gint64 seen_most = max_in_window (slurm, MINUTE_US - lag);
  gint64 seen_minute = max_in_window (slurm, MINUTE_US);
  step ("Slurm: %u commands (%u lookups), at most %" G_GINT64_FORMAT " in %.3f s, "
        "%" G_GINT64_FORMAT " in a minute (largest delay after datc's word %.3f s)",
        slurm->len, count_kind (slurm, CMD_LOOKUP), seen_most, (MINUTE_US - lag) / 1e6, seen_minute,
        lag / 1e6);
  g_assert_cmpint (seen_most, <=, BUDGET);
}

/* ---- 5. proxies as one job array --------------------------------------- */

/* The proxy_submitted events of the trace (borrowed). */
static GPtrArray *
trace_all (GPtrArray *trace, const char *event)
{
  GPtrArray *out = g_ptr_array_new ();
  for (guint i = 0; i < trace->len; i++)
    if (g_str_equal (json_object_get_string_member (trace->pdata[i], "event"), event))
      g_ptr_array_add (out, trace->pdata[i]);
  return out;
}

static guint
site_commands_of (GPtrArray *trace, const char *kind)
{
  guint n = 0;
  g_autoptr (GPtrArray) cmds = trace_all (trace, "site_command");
  for (guint i = 0; i < cmds->len; i++)
    n += g_str_equal (str_member (cmds->pdata[i], "kind"), kind);
  return n;
}

/* A site that needs K proxies at once gets them in one submit: K elements
 * of one array, each a proxy of its own (ID-1..ID-K as its agent names
 * itself, the element's job id), polled and ended on its own.  In direct
 * mode each element runs the one task bound to it. */
#define ARRAY_K 3

static void
proxies_as_one_array (const Site *s, const char *mode)
{
  gboolean direct = g_str_equal (mode, "direct");
  g_autoptr (TbDir) d = tb_dir_new ();
  /* Pull: twice the slots, so all K are wanted at once; direct: one task
   * per element. */
  guint n_tasks = direct ? ARRAY_K : 2 * ARRAY_K;
  GString *tasks = g_string_new (NULL);
  for (guint i = 0; i < n_tasks; i++)
    g_string_append (tasks, "sleep 2\n");
  g_autofree gchar *tasks_text = g_string_free (tasks, FALSE);
  const CampaignOptions o = { .max_proxies = ARRAY_K, .mode = mode };
  g_autoptr (Campaign) c = campaign_start_with (s, d, tasks_text, 1, "10m", &o);
  g_assert_cmpint (campaign_finish (c, 180), ==, 0);
  step ("campaign finished (%s)", mode);

  g_autoptr (GPtrArray) trace = tb_trace (c->dir);
  g_autoptr (GPtrArray) submitted = trace_all (trace, "proxy_submitted");
  g_assert_cmpuint (submitted->len, ==, ARRAY_K);
  g_assert_cmpuint (site_commands_of (trace, "submit"), ==, 1);
  const char *array = str_member (submitted->pdata[0], "array");
  g_assert_true (g_str_has_prefix (array, "datc-"));
  const char *sep = is_slurm (s) ? "_" : ".";
  g_autoptr (GHashTable) elements = g_hash_table_new (g_str_hash, g_str_equal);
  g_autofree gchar *base = NULL;
  for (guint i = 0; i < submitted->len; i++)
    {
      JsonObject *e = submitted->pdata[i];
      g_assert_cmpstr (str_member (e, "array"), ==, array);
      g_autofree gchar *want = g_strdup_printf ("%s-%u", array + strlen ("datc-"), i + 1);
      g_assert_cmpstr (str_member (e, "proxy"), ==, want);
      /* Element i+1 of one scheduler array: BASE_I (Slurm), BASE.I (SGE). */
      const char *job = str_member (e, "job");
      g_autofree gchar *suffix = g_strdup_printf ("%s%u", sep, i + 1);
      g_assert_true (g_str_has_suffix (job, suffix));
      g_autofree gchar *b = g_strndup (job, strlen (job) - strlen (suffix));
      if (base == NULL)
        base = g_strdup (b);
      g_assert_cmpstr (b, ==, base);
      g_assert_nonnull (trace_find (trace, "proxy_ended", want, NULL));
      g_hash_table_add (elements, (gpointer) str_member (e, "proxy"));
    }
  step ("one submit: array %s, jobs %s%s1..%u, every element ended", array, base, sep, ARRAY_K);

  /* The elements' agents ran the tasks, each under its own name. */
  g_autoptr (GHashTable) res = tb_results (c->dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, n_tasks);
  g_autoptr (GHashTable) ran = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      const char *proxy = json_object_get_string_member (v, "proxy");
      g_assert_cmpint (json_object_get_int_member (v, "exit_code"), ==, 0);
      g_assert_true (g_hash_table_contains (elements, proxy));
      g_hash_table_add (ran, (gpointer) proxy);
    }
  /* Direct: one task per element; pull: the elements started together. */
  g_assert_cmpuint (g_hash_table_size (ran), >=, direct ? ARRAY_K : 2);
  await_queue_empty (s, 30);
  step ("tasks ran on %u elements; nothing left in the queue", g_hash_table_size (ran));
}

static void
pull_proxies_as_one_array (const Site *s)
{
  proxies_as_one_array (s, "pull");
}

static void
direct_tasks_as_one_array (const Site *s)
{
  proxies_as_one_array (s, "direct");
}

/* ---- 6. a submit the master never saw come back ------------------------ */

typedef struct {
  const char *path;
} FileWatch;

static gboolean
file_is_there (gpointer data)
{
  return g_file_test (((FileWatch *) data)->path, G_FILE_TEST_EXISTS);
}

/* The master is killed while its sbatch is out: the job is at Slurm, the
 * journal does not have its id.  The resumed master finds it by its job
 * name, adopts it (it counts against max_proxies: no second job is
 * submitted in its place), lets its agent work, and ends it. */
static void
resume_finds_a_lost_submit (const Site *s)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *competitor = competitor_fill (s);
  await_job (s, competitor, state_is_running, "running", 30);

  /* An sbatch that goes through, then never answers. */
  g_autofree gchar *shim = g_build_filename (d->path, "shim", NULL);
  g_assert_cmpint (g_mkdir (shim, 0755), ==, 0);
  g_autofree gchar *out = g_build_filename (d->path, "sbatch.out", NULL);
  g_autofree gchar *pid = g_build_filename (d->path, "sbatch.pid", NULL);
  const char *which[] = { "sh", "-c", "command -v sbatch", NULL };
  g_auto (GStrv) which_argv = site_argv (s, which);
  g_autofree gchar *real = tb_capture ((const char *const *) which_argv, NULL);
  g_autofree gchar *script = g_strdup_printf (
      "#!/bin/sh\n%s \"$@\" >%s.tmp || exit $?\necho $$ >%s\nmv %s.tmp %s\nexec sleep 600\n",
      g_strstrip (real), out, pid, out, out);
  g_autofree gchar *sbatch = g_build_filename (shim, "sbatch", NULL);
  g_assert_true (g_file_set_contents (sbatch, script, -1, NULL));
  g_assert_cmpint (g_chmod (sbatch, 0755), ==, 0);

  g_autofree gchar *tasks = g_strdup ("sleep 1\nsleep 1\n");
  const CampaignOptions stalled
      = { .max_proxies = 1, .path_first = shim, .site_keys = "command_timeout = 5m\n" };
  g_autoptr (Campaign) first = campaign_start_with (s, d, tasks, 2, "10m", &stalled);
  FileWatch w = { out };
  g_assert_true (tb_await (file_is_there, &w, 60));
  g_autofree gchar *said = NULL;
  g_assert_true (g_file_get_contents (out, &said, NULL, NULL));
  g_autofree gchar *job = g_strdup (g_strstrip (said));
  g_assert_true (g_ascii_isdigit (job[0]));
  g_assert_true (tb_proc_signal (first->master, SIGKILL));
  tb_wait (first->master, 30);
  g_autofree gchar *stuck = NULL;
  g_assert_true (g_file_get_contents (pid, &stuck, NULL, NULL));
  kill ((pid_t) g_ascii_strtoll (stuck, NULL, 10), SIGKILL);
  g_autofree gchar *state = job_state (s, job);
  g_assert_true (state_is_pending (s, state));
  g_autoptr (GPtrArray) before = tb_trace (first->dir);
  g_assert_null (trace_find (before, "proxy_submitted", NULL, NULL));
  step ("master killed with its sbatch out; job %s pending, not in the trace", job);

  const CampaignOptions plain = { .max_proxies = 1 };
  g_autoptr (Campaign) again = campaign_start_with (s, d, tasks, 2, "10m", &plain);
  g_autoptr (JsonObject) found = await_event (again, "proxy_found", NULL, NULL);
  g_assert_cmpstr (str_member (found, "job"), ==, job);
  const char *proxy = str_member (found, "proxy");
  step ("the resumed master found job %s (proxy %s)", job, proxy);
  /* It stands for the proxy the campaign wants: none other is submitted
   * while it waits. */
  await_proxies (again, 1, 0);
  g_autoptr (GPtrArray) during = tb_trace (again->dir);
  g_assert_null (trace_find (during, "proxy_submitted", NULL, NULL));

  job_cancel (s, competitor);
  g_assert_cmpint (campaign_finish (again, 120), ==, 0);
  g_autoptr (GPtrArray) trace = tb_trace (again->dir);
  g_assert_null (trace_find (trace, "proxy_submitted", NULL, NULL));
  g_assert_nonnull (trace_find (trace, "proxy_ended", proxy, NULL));
  g_autoptr (GHashTable) res = tb_results (again->dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 2);
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    g_assert_cmpstr (json_object_get_string_member (v, "proxy"), ==, proxy);
  await_queue_empty (s, 30);
  step ("its agent ran both tasks; nothing left in the queue");
}

/* ---- the beds (parent) ------------------------------------------------- */

typedef enum { SGE_DOWN, SGE_HERE, SGE_NETNS } SgeWhere;

static struct {
  gboolean failed; /* a bed would not come up: keep the directory */
  gboolean slurm_local, netns, slurm_ns, sshd_slurm, sshd_sge, pbs, lsf;
  SgeWhere sge;
} up;

static gboolean
script_in (const char *script, const char *bed, const char *const *options)
{
  g_autoptr (GPtrArray) args = g_ptr_array_new ();
  for (guint i = 0; options != NULL && options[i] != NULL; i++)
    g_ptr_array_add (args, (gpointer) options[i]);
  g_autofree gchar *dir = bed_path (bed);
  g_ptr_array_add (args, dir);
  g_ptr_array_add (args, NULL);
  gint64 start = g_get_monotonic_time ();
  gboolean ok = tb_script (script, (const char *const *) args->pdata, NULL);
  g_test_message ("%s %s: %s in %.1f s", script, bed, ok ? "done" : "FAILED",
                  (g_get_monotonic_time () - start) / 1e6);
  up.failed |= !ok;
  return ok;
}

static gchar *
netns_get (const char *key)
{
  g_autofree gchar *path = g_build_filename (beds, "netns", "netns.env", NULL);
  g_autoptr (GHashTable) env = tb_env_read (path);
  return env != NULL ? g_strdup (g_hash_table_lookup (env, key)) : NULL;
}

static gboolean
netns_ensure (void)
{
  if (up.netns)
    return TRUE;
  g_autofree gchar *suffix = g_strdup_printf ("p%d", (int) getpid ());
  g_autofree gchar *dir = bed_path ("netns");
  const char *args[] = { "--suffix", suffix, dir, "slurm", "sge", NULL };
  up.netns = tb_script ("netns-up.sh", args, NULL);
  up.failed |= !up.netns;
  return up.netns;
}

static gboolean
slurm_ensure (gboolean ssh)
{
  g_autofree gchar *cluster = g_strdup_printf ("prx%s%d", ssh ? "n" : "l", (int) getpid ());
  if (!ssh)
    {
      const char *opts[] = { "--cluster", cluster, NULL };
      if (!up.slurm_local)
        up.slurm_local = script_in ("slurm-up.sh", "slurm-local", opts);
      return up.slurm_local;
    }
  if (!netns_ensure ())
    return FALSE;
  g_autofree gchar *ns = netns_get ("NETNS_SITE_slurm");
  g_autofree gchar *addr = netns_get ("NETNS_ADDR_slurm");
  if (!up.slurm_ns)
    {
      const char *opts[] = { "--netns", ns, "--addr", addr, "--cluster", cluster, NULL };
      up.slurm_ns = script_in ("slurm-up.sh", "slurm-ns", opts);
    }
  if (up.slurm_ns && !up.sshd_slurm)
    {
      /* The login node's sessions see this cluster. */
      g_autofree gchar *conf_path = g_build_filename (beds, "slurm-ns", "env", NULL);
      g_autoptr (GHashTable) conf = tb_env_read (conf_path);
      g_autofree gchar *setenv = g_strdup_printf (
          "SLURM_CONF=%s", conf ? (char *) g_hash_table_lookup (conf, "SLURM_CONF") : "");
      const char *opts[] = { "--netns", ns, "--addr", addr, "--setenv", setenv, NULL };
      up.sshd_slurm = script_in ("sshd-up.sh", "sshd-slurm", opts);
    }
  return up.slurm_ns && up.sshd_slurm;
}

static gboolean
sge_ensure (gboolean ssh)
{
  SgeWhere want = ssh ? SGE_NETNS : SGE_HERE;
  if (ssh && !netns_ensure ())
    return FALSE;
  g_autofree gchar *ns = ssh ? netns_get ("NETNS_SITE_sge") : NULL;
  if (up.sge != want)
    {
      /* One cell per host: up again on the same directory restarts it
       * there; another test's cell is waited for. */
      const char *here[] = { "--wait", "180", NULL };
      const char *there[] = { "--netns", ns, "--wait", "180", NULL };
      up.sge = script_in ("sge-up.sh", "sge", ssh ? there : here) ? want : SGE_DOWN;
      if (up.sge == SGE_DOWN)
        return FALSE;
    }
  if (ssh && !up.sshd_sge)
    {
      /* The login node's sessions get the cell's settings (its ports when
       * they are not the defaults the client wrappers know). */
      g_autofree gchar *env_path = g_build_filename (beds, "sge", "env", NULL);
      g_autoptr (GHashTable) env = tb_env_read (env_path);
      g_autofree gchar *addr = netns_get ("NETNS_ADDR_sge");
      g_autoptr (GPtrArray) opts = g_ptr_array_new_with_free_func (g_free);
      g_ptr_array_add (opts, g_strdup ("--netns"));
      g_ptr_array_add (opts, g_strdup (ns));
      g_ptr_array_add (opts, g_strdup ("--addr"));
      g_ptr_array_add (opts, g_strdup (addr));
      GHashTableIter it;
      gpointer k, v;
      g_hash_table_iter_init (&it, env);
      while (env != NULL && g_hash_table_iter_next (&it, &k, &v))
        {
          g_ptr_array_add (opts, g_strdup ("--setenv"));
          g_ptr_array_add (opts, g_strdup_printf ("%s=%s", (char *) k, (char *) v));
        }
      g_ptr_array_add (opts, NULL);
      up.sshd_sge = script_in ("sshd-up.sh", "sshd-sge", (const char *const *) opts->pdata);
    }
  return up.sge == want && (!ssh || up.sshd_sge);
}

/* PBS (its own namespace) and LSF come up here once (a first run on a
 * machine builds them from ../shared/vendor, minutes). */
static gboolean
pbs_ensure (void)
{
  if (!up.pbs)
    up.pbs = script_in ("pbs-up.sh", "pbs", NULL);
  return up.pbs;
}

static gboolean
lsf_ensure (void)
{
  if (!up.lsf)
    up.lsf = script_in ("lsf-up.sh", "lsf", NULL);
  return up.lsf;
}

static gboolean
bed_ensure (const char *scheduler, gboolean ssh)
{
  switch (kind_of (scheduler))
    {
    case SLURM:
      return slurm_ensure (ssh);
    case SGE:
      return sge_ensure (ssh);
    case PBS:
      return !ssh && pbs_ensure ();
    case LSF:
      return !ssh && lsf_ensure ();
    }
  return FALSE;
}

/* Cancels every job on the cluster, by anyone (PBS: qselect names them,
 * qdel takes a list). */
static void
cancel_all (const Site *s)
{
  if (s->kind == PBS)
    {
      const char *select[] = { "qselect", NULL };
      g_auto (GStrv) argv = site_argv (s, select);
      g_autofree gchar *out = tb_capture ((const char *const *) argv, NULL);
      g_auto (GStrv) ids = g_strsplit_set (g_strstrip (out), " \n", -1);
      for (guint i = 0; ids[i] != NULL; i++)
        if (ids[i][0] != '\0')
          {
            const char *qdel[] = { "qdel", "-W", "force", ids[i], NULL };
            g_auto (GStrv) del = site_argv (s, qdel);
            g_free (tb_capture ((const char *const *) del, NULL));
          }
      return;
    }
  if (s->kind == LSF)
    {
      const char *bkill[] = { "bkill", "-u", "all", "0", NULL };
      g_auto (GStrv) argv = site_argv (s, bkill);
      g_free (tb_capture ((const char *const *) argv, NULL));
      return;
    }
  const char *users[] = { "root", "competitor", "datc-tb" };
  for (guint i = 0; i < G_N_ELEMENTS (users); i++)
    {
      const char *slurm[] = { "scancel", "-u", users[i], NULL };
      const char *sge[] = { "qdel", "-u", users[i], NULL };
      g_auto (GStrv) argv = site_argv (s, is_slurm (s) ? slurm : sge);
      g_free (tb_capture ((const char *const *) argv, NULL));
    }
}

/* Kills, by PID, masters a failed child left running, then cancels every
 * job left on the cluster (a proxy of that master, the competitor). */
static void
sweep (const char *scheduler, gboolean ssh)
{
  g_autofree gchar *path = bed_path ("masters");
  g_autofree gchar *text = NULL;
  if (g_file_get_contents (path, &text, NULL, NULL))
    {
      g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
      for (guint i = 0; lines[i] != NULL; i++)
        {
          int pid = atoi (lines[i]);
          g_autofree gchar *exe_link = g_strdup_printf ("/proc/%d/exe", pid);
          g_autofree gchar *exe = pid > 1 ? g_file_read_link (exe_link, NULL) : NULL;
          g_autofree gchar *base = exe != NULL ? g_path_get_basename (exe) : NULL;
          if (pid > 1 && base != NULL && g_str_equal (base, "datc") && !tb_pid_gone (pid))
            {
              g_printerr ("# killing master %d, left by a failed test\n", pid);
              kill (pid, SIGKILL);
            }
        }
      g_unlink (path);
    }
  g_autoptr (Site) s = site_load (scheduler, ssh);
  cancel_all (s);
}

/* A bed whose up script ran, even if it failed half-way: its down script
 * is idempotent and stops whatever the up script started. */
static gboolean
bed_tried (const char *bed)
{
  g_autofree gchar *dir = bed_path (bed);
  return g_file_test (dir, G_FILE_TEST_IS_DIR);
}

static void
beds_down (void)
{
  const struct {
    const char *script, *bed;
  } downs[] = {
    { "sshd-down.sh", "sshd-sge" },  { "sshd-down.sh", "sshd-slurm" },   { "sge-down.sh", "sge" },
    { "slurm-down.sh", "slurm-ns" }, { "slurm-down.sh", "slurm-local" }, { "pbs-down.sh", "pbs" },
    { "lsf-down.sh", "lsf" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (downs); i++)
    if (bed_tried (downs[i].bed))
      script_in (downs[i].script, downs[i].bed, NULL);
  /* Last: the daemons above run inside these namespaces. */
  if (bed_tried ("netns"))
    {
      g_autofree gchar *dir = bed_path ("netns");
      const char *args[] = { dir, NULL };
      up.failed |= !tb_script ("netns-down.sh", args, NULL);
    }
}

/* ---- the cases ----------------------------------------------------------- */

typedef struct {
  const char *scheduler;
  gboolean ssh;
  void (*body) (const Site *s);
} Case;

static void
test_case (gconstpointer data)
{
  const Case *k = data;
  if (g_test_subprocess ())
    {
      case_start_us = g_get_monotonic_time ();
      g_autoptr (Site) s = site_load (k->scheduler, k->ssh);
      k->body (s);
      return;
    }
  gboolean ready = bed_ensure (k->scheduler, k->ssh);
  if (!ready)
    {
      g_printerr ("# the %s test bed (%s) did not come up: see above\n", k->scheduler,
                  k->ssh ? "ssh, network namespaces" : "local");
      g_test_fail ();
      return;
    }
  g_test_trap_subprocess (NULL, 300 * G_USEC_PER_SEC,
                          G_TEST_SUBPROCESS_INHERIT_STDOUT | G_TEST_SUBPROCESS_INHERIT_STDERR);
  sweep (k->scheduler, k->ssh);
  g_test_trap_assert_passed ();
}

static const Case cases[] = {
  { "slurm", FALSE, pending_behind_a_competitor },
  { "slurm", FALSE, cancelled_proxy_gives_its_tasks_back },
  { "slurm", FALSE, budget_holds_with_many_proxies },
  { "slurm", TRUE, pending_behind_a_competitor },
  { "slurm", TRUE, cancelled_proxy_gives_its_tasks_back },
  { "slurm", TRUE, walltime_drains_before_the_kill },
  { "sge", FALSE, pending_behind_a_competitor },
  { "sge", FALSE, cancelled_proxy_gives_its_tasks_back },
  { "sge", FALSE, walltime_drains_before_the_kill },
  { "sge", TRUE, pending_behind_a_competitor },
  { "sge", TRUE, cancelled_proxy_gives_its_tasks_back },
  { "sge", TRUE, walltime_drains_before_the_kill },
  { "slurm", FALSE, pull_proxies_as_one_array },
  { "slurm", FALSE, direct_tasks_as_one_array },
  { "slurm", FALSE, resume_finds_a_lost_submit },
  { "sge", FALSE, pull_proxies_as_one_array },
  { "sge", FALSE, direct_tasks_as_one_array },
  { "pbs", FALSE, pending_behind_a_competitor },
  { "pbs", FALSE, cancelled_proxy_gives_its_tasks_back },
  { "pbs", FALSE, walltime_drains_before_the_kill },
  { "lsf", FALSE, pending_behind_a_competitor },
  { "lsf", FALSE, cancelled_proxy_gives_its_tasks_back },
  { "lsf", FALSE, walltime_drains_before_the_kill },
};

static const char *
case_name (const Case *k)
{
  if (k->body == pending_behind_a_competitor)
    return "pending-behind-a-competitor-then-runs-the-tasks";
  if (k->body == cancelled_proxy_gives_its_tasks_back)
    return "cancelled-proxy-gives-its-tasks-back";
  if (k->body == budget_holds_with_many_proxies)
    return "scheduler-calls-within-the-budget-with-many-proxies";
  if (k->body == pull_proxies_as_one_array)
    return "proxies-wanted-at-once-are-one-array";
  if (k->body == direct_tasks_as_one_array)
    return "direct-mode-tasks-are-one-array";
  if (k->body == resume_finds_a_lost_submit)
    return "resume-finds-a-submit-the-master-never-saw-come-back";
  return "walltime-drains-the-agent-before-the-kill";
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  gboolean parent = !g_test_subprocess ();
  if (parent)
    {
      if (getuid () != 0)
        g_error ("the batch test beds need root");
      /* A failed case must not abort this process: it brings the beds
       * down after the last case. */
      g_test_set_nonfatal_assertions ();
      gchar *dir = g_strdup_printf ("/tmp/datc-proxies-%d", (int) getpid ());
      /* The login nodes' user reaches its directories below this one. */
      if (g_mkdir_with_parents (dir, 0755) != 0 || chmod (dir, 0755) != 0)
        g_error ("cannot make %s: %s", dir, g_strerror (errno));
      g_setenv ("DATC_PROXIES_BEDS", dir, TRUE);
      beds = dir;
    }
  else
    beds = g_getenv ("DATC_PROXIES_BEDS");
  g_assert_nonnull (beds);

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree gchar *path
          = g_strdup_printf ("/proxies/%s/%s/%s", cases[i].scheduler,
                             cases[i].ssh ? "ssh" : "local", case_name (&cases[i]));
      g_test_add_data_func (path, &cases[i], test_case);
    }
  int rc = g_test_run ();
  if (parent)
    {
      beds_down ();
      if (up.failed)
        rc = 1;
      if (rc != 0 || g_getenv ("DATC_TEST_KEEP") != NULL)
        g_printerr ("# test beds' state and logs kept in %s\n", beds);
      else
        {
          const char *rm[] = { "rm", "-rf", "--", beds, NULL };
          g_free (tb_capture (rm, NULL));
        }
    }
  return rc;
}
