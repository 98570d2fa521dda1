/* test-proxies-real.c: proxies of a real campaign (`datc run --sites`) on
 * real Slurm and real Grid Engine, with real agents connecting back over
 * TCP with CURVE, in two shapes:
 *
 *  - local: the master in this network namespace, the cluster's commands
 *    run here (transport local), like test-batch.c;
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
 *  2. a running proxy cancelled with scancel or qdel drains
 *     its agent on the signal that comes first (TERM; USR2 with -notify):
 *     its tasks come back without a crash and a new proxy finishes them;
 *  3. a proxy that reaches its walltime drains before the kill (Slurm's
 *     --signal USR1 warning; Grid Engine: the agent's own end, which the
 *     proxy script exports, comes before h_rt's USR2), and a new proxy
 *     finishes the tasks.  Slurm's limit is a whole minute, so its case
 *     runs once, over ssh.
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
bed_path(const char *name)
{
  return g_build_filename(beds, name, NULL);
}

static GHashTable *
bed_env(const char *bed, const char *file)
{
  g_autofree gchar *path = g_build_filename(beds, bed, file, NULL);
  GHashTable *env = tb_env_read(path);
  g_assert_nonnull(env);
  return env;
}

/* A line in the test's log (stderr: the child's own messages do not reach
 * the parent's TAP stream) with the seconds since the case began. */
static gint64 case_start_us;

static void step(const char *format, ...) G_GNUC_PRINTF(1, 2);

static void
step(const char *format, ...)
{
  va_list ap;
  va_start(ap, format);
  g_autofree gchar *text = g_strdup_vprintf(format, ap);
  va_end(ap);
  g_printerr("# %6.1f s  %s\n", (g_get_monotonic_time() - case_start_us) / 1e6, text);
}

/* ---- a cluster as the tests see it ------------------------------------- */

typedef struct
{
  const char *scheduler; /* "slurm" or "sge" (also the site's name) */
  gboolean ssh;
  gchar *netns;        /* the cluster's namespace; NULL: this one */
  gchar *master_netns; /* ssh: where the master runs */
  gchar *master_addr;
  GPtrArray *client_env; /* "K=V" the cluster's commands need */
  GHashTable *sshd;      /* ssh: sshd.env of its login node */
} Site;

static void
site_free(Site *s)
{
  if (s == NULL)
    return;
  g_free(s->netns);
  g_free(s->master_netns);
  g_free(s->master_addr);
  g_ptr_array_unref(s->client_env);
  if (s->sshd != NULL)
    g_hash_table_unref(s->sshd);
  g_free(s);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Site, site_free)

static gboolean
is_slurm(const Site *s)
{
  return g_str_equal(s->scheduler, "slurm");
}

/* The cluster's bed: Slurm has one per namespace, Grid Engine one cell. */
static const char *
cluster_bed(const char *scheduler, gboolean ssh)
{
  if (g_str_equal(scheduler, "sge"))
    return "sge";
  return ssh ? "slurm-ns" : "slurm-local";
}

static Site *
site_load(const char *scheduler, gboolean ssh)
{
  Site *s = g_new0(Site, 1);
  s->scheduler = scheduler;
  s->ssh = ssh;
  s->client_env = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GHashTable) env = bed_env(cluster_bed(scheduler, ssh), "env");
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, env);
  while (g_hash_table_iter_next(&it, &k, &v))
    g_ptr_array_add(s->client_env, g_strdup_printf("%s=%s", (char *)k, (char *)v));
  if (ssh)
    {
      g_autoptr(GHashTable) ns = bed_env("netns", "netns.env");
      g_autofree gchar *key = g_strdup_printf("NETNS_SITE_%s", scheduler);
      s->netns = g_strdup(g_hash_table_lookup(ns, key));
      s->master_netns = g_strdup(g_hash_table_lookup(ns, "NETNS_MASTER"));
      s->master_addr = g_strdup(g_hash_table_lookup(ns, "NETNS_MASTER_ADDR"));
      g_assert_nonnull(s->netns);
      g_assert_nonnull(s->master_netns);
      g_autofree gchar *sshd_bed = g_strdup_printf("sshd-%s", scheduler);
      s->sshd = bed_env(sshd_bed, "sshd.env");
    }
  return s;
}

static const char *
sshd_get(const Site *s, const char *key)
{
  const char *v = g_hash_table_lookup(s->sshd, key);
  g_assert_nonnull(v);
  return v;
}

/* argv run inside the cluster's namespace with its clients' environment,
 * as root (transfer full). */
static GStrv
site_argv(const Site *s, const char *const *cmd)
{
  g_autoptr(GStrvBuilder) b = g_strv_builder_new();
  if (s->netns != NULL)
    {
      g_autofree gchar *net = g_strdup_printf("--net=/run/netns/%s", s->netns);
      g_strv_builder_add_many(b, "nsenter", net, NULL);
    }
  g_strv_builder_add(b, "env");
  for (guint i = 0; i < s->client_env->len; i++)
    g_strv_builder_add(b, s->client_env->pdata[i]);
  for (guint i = 0; cmd[i] != NULL; i++)
    g_strv_builder_add(b, cmd[i]);
  return g_strv_builder_end(b);
}

/* stdout of a command run on the cluster; fails the test unless it exits 0. */
static gchar *
site_run(const Site *s, const char *const *cmd)
{
  g_auto(GStrv) argv = site_argv(s, cmd);
  int status;
  gchar *out = tb_capture((const char *const *)argv, &status);
  if (status != 0)
    {
      g_autofree gchar *line = g_strjoinv(" ", argv);
      g_error("%s exited with %d", line, status);
    }
  return out;
}

/* A job of user `competitor` that takes every slot of the cluster. */
static gchar *
competitor_fill(const Site *s)
{
  const char *slurm[]
      = { "runuser", "-u", "competitor", "--",     "sbatch",    "--parsable", "-n",
          "8",       "-o", "/dev/null",  "--wrap", "sleep 600", NULL };
  const char *sge[] = { "runuser", "-u",  "competitor", "--",        "qsub", "-terse",
                        "-b",      "y",   "-o",         "/dev/null", "-j",   "y",
                        "-pe",     "smp", "8",          "sleep",     "600",  NULL };
  g_autofree gchar *out = site_run(s, is_slurm(s) ? slurm : sge);
  return g_strdup(g_strstrip(out));
}

/* The scheduler's word for job `id`: Slurm's state (PENDING, RUNNING,
 * COMPLETED, CANCELLED, ...; "" once forgotten), Grid Engine's state
 * letters (qw, r, dr, ...; "" once it is gone: qstat forgets finished
 * jobs at once). */
static gchar *
job_state(const Site *s, const char *id)
{
  if (is_slurm(s))
    {
      const char *cmd[] = { "squeue", "-h", "-t", "all", "-j", id, "-o", "%T", NULL };
      g_auto(GStrv) argv = site_argv(s, cmd);
      g_autofree gchar *out = tb_capture((const char *const *)argv, NULL);
      return g_strdup(g_strstrip(out));
    }
  const char *cmd[] = { "qstat", "-u", "*", NULL };
  g_autofree gchar *out = site_run(s, cmd);
  g_auto(GStrv) lines = g_strsplit(out, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_auto(GStrv) w = g_strsplit_set(g_strstrip(lines[i]), " \t", -1);
      g_autoptr(GPtrArray) words = g_ptr_array_new();
      for (guint j = 0; w[j] != NULL; j++)
        if (w[j][0] != '\0')
          g_ptr_array_add(words, w[j]);
      if (words->len >= 5 && g_str_equal(words->pdata[0], id))
        return g_strdup(words->pdata[4]);
    }
  return g_strdup("");
}

static gboolean
state_is_pending(const Site *s, const char *state)
{
  return g_str_equal(state, is_slurm(s) ? "PENDING" : "qw");
}

/* Grid Engine says t (transferring) until the execd's word that the job
 * started reaches the qmaster, which may come after the job's agent has
 * connected; the sge driver counts it as running too. */
static gboolean
state_is_running(const Site *s, const char *state)
{
  if (is_slurm(s))
    return g_str_equal(state, "RUNNING");
  return g_str_equal(state, "r") || g_str_equal(state, "t");
}

static void
await_job(const Site *s, const char *id, gboolean (*want)(const Site *, const char *),
          const char *what, guint timeout_s)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_s * G_USEC_PER_SEC;
  for (;;)
    {
      g_autofree gchar *state = job_state(s, id);
      if (want(s, state))
        return;
      if (g_get_monotonic_time() > deadline)
        g_error("job %s is '%s' after %u s, not %s", id, state, timeout_s, what);
      g_usleep(100 * 1000);
    }
}

static void
job_cancel(const Site *s, const char *id)
{
  const char *slurm[] = { "scancel", id, NULL };
  const char *sge[] = { "qdel", id, NULL };
  g_free(site_run(s, is_slurm(s) ? slurm : sge));
}

/* Nothing queued or running on the cluster, by anyone. */
static gboolean
queue_empty(const Site *s)
{
  const char *slurm[] = { "squeue", "-h", "-o", "%i %u %T", NULL };
  const char *sge[] = { "qstat", "-u", "*", NULL };
  g_autofree gchar *out = site_run(s, is_slurm(s) ? slurm : sge);
  return g_strstrip(out)[0] == '\0';
}

static void
await_queue_empty(const Site *s, guint timeout_s)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_s * G_USEC_PER_SEC;
  while (!queue_empty(s))
    {
      if (g_get_monotonic_time() > deadline)
        g_error("%s: jobs are still queued or running after %u s", s->scheduler,
                timeout_s);
      g_usleep(200 * 1000);
    }
}

/* ---- a campaign --------------------------------------------------------- */

typedef struct
{
  const Site *site;
  TbDir *d;
  gchar *dir;     /* the campaign directory */
  gchar *workdir; /* the proxies' working directory (tasks' cwd) */
  TbProc *master;
} Campaign;

static void
campaign_free(Campaign *c)
{
  if (c == NULL)
    return;
  tb_proc_free(c->master);
  g_free(c->dir);
  g_free(c->workdir);
  g_free(c);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Campaign, campaign_free)

/* The master's PID where the parent finds it, should this child die
 * before it stops the master. */
static void
note_master(int pid)
{
  g_autofree gchar *path = bed_path("masters");
  g_autofree gchar *line = g_strdup_printf("%d\n", pid);
  FILE *f = fopen(path, "a");
  g_assert_nonnull(f);
  g_assert_cmpint(fputs(line, f), >=, 0);
  g_assert_cmpint(fclose(f), ==, 0);
}

static gchar *
sites_ini(const Campaign *c, guint slots, const char *walltime)
{
  const Site *s = c->site;
  GString *ini = g_string_new(NULL);
  g_string_append_printf(ini,
                         "[master]\nlisten = tcp://%s:0\n\n[site %s]\nscheduler = %s\n"
                         "slots_per_proxy = %u\nmax_proxies = 1\nwalltime = %s\n"
                         "workdir = %s\n",
                         s->ssh ? s->master_addr : "127.0.0.1", s->scheduler,
                         s->scheduler, slots, walltime, c->workdir);
  if (s->ssh)
    g_string_append_printf(
        ini,
        "transport = ssh\nhost = %s\nport = %s\nuser = %s\nidentity = %s\n"
        "known_hosts = %s\nagent = upload\n",
        sshd_get(s, "SSHD_ADDR"), sshd_get(s, "SSHD_PORT"), sshd_get(s, "SSHD_USER"),
        sshd_get(s, "SSHD_IDENTITY"), sshd_get(s, "SSHD_KNOWN_HOSTS"));
  return g_string_free(ini, FALSE);
}

/* Starts `datc run` on `tasks` with one proxy of `slots` slots at a time
 * on the site: here, or (ssh) in the master's namespace. */
static Campaign *
campaign_start(const Site *s, TbDir *d, const char *tasks, guint slots,
               const char *walltime)
{
  Campaign *c = g_new0(Campaign, 1);
  c->site = s;
  c->d = d;
  c->dir = g_build_filename(d->path, "c", NULL);
  if (s->ssh)
    {
      /* On the login node, owned by its user; one per campaign. */
      g_autofree gchar *base = g_path_get_basename(d->path);
      c->workdir = g_build_filename(sshd_get(s, "SSHD_REMOTE_DIR"), base, NULL);
    }
  else
    c->workdir = g_build_filename(d->path, "work", NULL);
  g_autofree gchar *file = tb_write(d, "tasks.txt", tasks);
  g_autofree gchar *ini_text = sites_ini(c, slots, walltime);
  g_autofree gchar *ini = tb_write(d, "sites.ini", ini_text);

  g_autoptr(GStrvBuilder) b = g_strv_builder_new();
  if (s->ssh)
    {
      g_autofree gchar *net = g_strdup_printf("--net=/run/netns/%s", s->master_netns);
      g_strv_builder_add_many(b, "nsenter", net, "env", NULL);
    }
  else
    {
      g_strv_builder_add(b, "env");
      for (guint i = 0; i < s->client_env->len; i++)
        g_strv_builder_add(b, s->client_env->pdata[i]);
    }
  g_autofree gchar *agent = g_strdup_printf("DATC_AGENT=%s", tb_agent());
  g_strv_builder_add_many(b, agent, tb_datc(), "run", "--dir", c->dir, "--sites", ini,
                          file, NULL);
  g_auto(GStrv) argv = g_strv_builder_end(b);
  c->master = tb_spawn(d, "master", (const char *const *)argv);
  note_master(tb_proc_pid(c->master));
  return c;
}

static void
assert_master_alive(Campaign *c)
{
  if (tb_pid_gone(tb_proc_pid(c->master)))
    {
      g_autofree gchar *err = tb_proc_stderr(c->master);
      g_error("the master ended early:\n%s", err);
    }
}

static int
campaign_finish(Campaign *c, guint timeout_s)
{
  int status = tb_wait(c->master, timeout_s);
  if (status != 0)
    {
      g_autofree gchar *err = tb_proc_stderr(c->master);
      g_printerr("# the master exited with %d:\n%s\n", status, err);
    }
  return status;
}

/* The first trace event `event` about `proxy` (any when NULL), skipping
 * those about `not_proxy`; borrowed from `trace`. */
static JsonObject *
trace_find(GPtrArray *trace, const char *event, const char *proxy, const char *not_proxy)
{
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      const char *p = json_object_get_string_member_with_default(o, "proxy", "");
      if (g_str_equal(json_object_get_string_member(o, "event"), event)
          && (proxy == NULL || g_str_equal(p, proxy))
          && (not_proxy == NULL || !g_str_equal(p, not_proxy)))
        return o;
    }
  return NULL;
}

/* Waits for that event while the master runs (transfer full). */
static JsonObject *
await_event(Campaign *c, const char *event, const char *proxy, const char *not_proxy)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)TRACE_WAIT_S * G_USEC_PER_SEC;
  for (;;)
    {
      g_autoptr(GPtrArray) trace = tb_trace(c->dir);
      JsonObject *o = trace_find(trace, event, proxy, not_proxy);
      if (o != NULL)
        return json_object_ref(o);
      assert_master_alive(c);
      if (g_get_monotonic_time() > deadline)
        g_error("no %s event in %s/trace.jsonl after %u s", event, c->dir, TRACE_WAIT_S);
      g_usleep(50 * 1000);
    }
}

static const char *
str_member(JsonObject *o, const char *name)
{
  const char *v = json_object_get_string_member_with_default(o, name, NULL);
  g_assert_nonnull(v);
  return v;
}

/* The site's entry of the live status (transfer full). */
static JsonObject *
site_status(Campaign *c)
{
  g_autoptr(JsonObject) st = tb_status(c->dir);
  g_assert_nonnull(st);
  JsonArray *sites = json_object_get_array_member(st, "sites");
  for (guint i = 0; sites != NULL && i < json_array_get_length(sites); i++)
    {
      JsonObject *site = json_array_get_object_element(sites, i);
      if (g_str_equal(str_member(site, "name"), c->site->scheduler))
        return json_object_ref(site);
    }
  g_error("status of %s has no site %s", c->dir, c->site->scheduler);
}

/* Waits until the live status shows `pending` and `running` proxies. */
static void
await_proxies(Campaign *c, gint64 pending, gint64 running)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)TRACE_WAIT_S * G_USEC_PER_SEC;
  for (;;)
    {
      assert_master_alive(c);
      g_autoptr(JsonObject) site = site_status(c);
      gint64 p = json_object_get_int_member(site, "proxies_pending");
      gint64 r = json_object_get_int_member(site, "proxies_running");
      if (p == pending && r == running)
        return;
      if (g_get_monotonic_time() > deadline)
        g_error("status shows %" G_GINT64_FORMAT " pending and %" G_GINT64_FORMAT
                " running proxies, not %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT,
                p, r, pending, running);
      g_usleep(50 * 1000);
    }
}

/* The proxy's own log (what its batch job printed, the agent's messages
 * among it); "" when there is none. */
static gchar *
proxy_log(Campaign *c, const char *proxy, const char *job)
{
  g_autofree gchar *name = g_strdup_printf("datc-%s.%s.log", proxy, job);
  g_autofree gchar *path = g_build_filename(c->workdir, name, NULL);
  gchar *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return g_strdup("");
  return text;
}

/* Tasks that are slow (`seconds`) on their first attempt only: each
 * leaves started.N in its cwd (the proxy's workdir) and later attempts
 * see it and end at once. */
static gchar *
slow_first_tasks(guint n, guint seconds)
{
  GString *t = g_string_new(NULL);
  for (guint i = 1; i <= n; i++)
    g_string_append_printf(t,
                           "if [ -e started.%u ]; then echo again; "
                           "else touch started.%u; sleep %u; fi\n",
                           i, i, seconds);
  return g_string_free(t, FALSE);
}

static void
await_started(Campaign *c, guint n)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)TRACE_WAIT_S * G_USEC_PER_SEC;
  for (guint i = 1; i <= n; i++)
    {
      g_autofree gchar *name = g_strdup_printf("started.%u", i);
      g_autofree gchar *path = g_build_filename(c->workdir, name, NULL);
      while (!g_file_test(path, G_FILE_TEST_EXISTS))
        {
          assert_master_alive(c);
          if (g_get_monotonic_time() > deadline)
            g_error("task %u did not start within %u s", i, TRACE_WAIT_S);
          g_usleep(50 * 1000);
        }
    }
}

/* The first proxy was interrupted while its agent ran every task; they
 * came back to the queue without a crash (the agent left, it was not
 * lost) and the next proxy ran each exactly once, fast this time. */
static void
assert_tasks_came_back(Campaign *c, guint n, const char *first_proxy)
{
  g_autoptr(GPtrArray) trace = tb_trace(c->dir);
  g_assert_nonnull(trace_find(trace, "agent_exited", first_proxy, NULL));
  g_assert_null(trace_find(trace, "agent_lost", NULL, NULL));
  JsonObject *second = trace_find(trace, "agent_connected", NULL, first_proxy);
  g_assert_nonnull(second);

  g_autoptr(GHashTable) res = tb_results(c->dir);
  g_assert_cmpuint(g_hash_table_size(res), ==, n);
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init(&it, res);
  while (g_hash_table_iter_next(&it, NULL, &v))
    {
      g_assert_cmpstr(json_object_get_string_member(v, "status"), ==, "exited");
      g_assert_cmpint(json_object_get_int_member(v, "exit_code"), ==, 0);
      g_assert_cmpint(json_object_get_int_member(v, "attempt"), ==, 2);
      g_assert_cmpstr(json_object_get_string_member(v, "proxy"), !=, first_proxy);
      g_assert_cmpstr(json_object_get_string_member(v, "site"), ==, c->site->scheduler);
    }
}

/* ---- 1. pending behind a competitor, then running ---------------------- */

static void
pending_behind_a_competitor(const Site *s)
{
  g_autoptr(TbDir) d = tb_dir_new();
  g_autofree gchar *competitor = competitor_fill(s);
  await_job(s, competitor, state_is_running, "running", 30);
  step("competitor's job %s runs", competitor);

  GString *tasks = g_string_new(NULL);
  for (guint i = 0; i < 6; i++)
    g_string_append(tasks, "sleep 1; echo job $SLURM_JOB_ID$JOB_ID\n");
  g_autofree gchar *tasks_text = g_string_free(tasks, FALSE);
  g_autoptr(Campaign) c = campaign_start(s, d, tasks_text, 2, "10m");
  g_autoptr(JsonObject) submitted = await_event(c, "proxy_submitted", NULL, NULL);
  const char *proxy = str_member(submitted, "proxy");
  const char *job = str_member(submitted, "job");

  /* Pending as the master sees it and as the scheduler says, and it stays
   * so (Grid Engine schedules every second, Slurm at once on a change). */
  await_proxies(c, 1, 0);
  step("proxy %s (job %s) pending", proxy, job);
  for (guint i = 0; i < 6; i++)
    {
      g_autofree gchar *state = job_state(s, job);
      g_assert_true(state_is_pending(s, state));
      g_autoptr(JsonObject) site = site_status(c);
      g_assert_cmpint(json_object_get_int_member(site, "proxies_pending"), ==, 1);
      g_assert_cmpint(json_object_get_int_member(site, "proxies_running"), ==, 0);
      g_assert_cmpint(json_object_get_int_member(site, "agents"), ==, 0);
      g_usleep(500 * 1000);
    }
  /* Status says it waits in the queue (once a poll said so), and why:
   * Slurm's %r (Grid Engine's qstat gives no reason for a plain qw). */
  gint64 reason_deadline = g_get_monotonic_time() + (gint64)TRACE_WAIT_S * G_USEC_PER_SEC;
  for (gboolean said = FALSE; !said;)
    {
      g_autoptr(JsonObject) site = site_status(c);
      JsonObject *reasons = json_object_get_object_member(site, "pending_reasons");
      gint64 queued = json_object_get_int_member(site, "proxies_queued");
      gint64 why = json_object_get_int_member_with_default(reasons, "Resources", 0)
                   + json_object_get_int_member_with_default(reasons, "Priority", 0);
      said = queued == 1 && (why == 1 || !g_str_equal(s->scheduler, "slurm"));
      if (!said && g_get_monotonic_time() > reason_deadline)
        g_error("status shows %" G_GINT64_FORMAT " proxies queued, %" G_GINT64_FORMAT
                " for Resources or Priority, not 1 (job %s)", queued, why, job);
      if (!said)
        g_usleep(100 * 1000);
    }
  step("status shows proxy %s queued (and why, on Slurm)", proxy);
  g_autoptr(GPtrArray) before = tb_trace(c->dir);
  g_assert_null(trace_find(before, "agent_connected", NULL, NULL));
  g_autofree gchar *results = g_build_filename(c->dir, "results.jsonl", NULL);
  g_assert_cmpuint(tb_count_lines(results), ==, 0);

  gint64 released_us = g_get_real_time();
  job_cancel(s, competitor);
  step("competitor cancelled");
  g_autoptr(JsonObject) connected = await_event(c, "agent_connected", proxy, NULL);
  g_assert_cmpint(json_object_get_int_member(connected, "time"), >, released_us);
  g_assert_cmpint(json_object_get_int_member(connected, "slots"), ==, 2);
  /* Running, in both eyes, while its tasks run. */
  await_proxies(c, 0, 1);
  step("proxy running, its agent connected");
  g_autofree gchar *running = job_state(s, job);
  if (!state_is_running(s, running))
    g_error("the agent of job %s connected, and the scheduler says it is '%s'", job,
            running);

  g_assert_cmpint(campaign_finish(c, 120), ==, 0);
  step("campaign finished");
  g_autoptr(GHashTable) res = tb_results(c->dir);
  g_assert_cmpuint(g_hash_table_size(res), ==, 6);
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init(&it, res);
  while (g_hash_table_iter_next(&it, NULL, &v))
    {
      g_assert_cmpint(json_object_get_int_member(v, "exit_code"), ==, 0);
      g_assert_cmpint(json_object_get_int_member(v, "attempt"), ==, 1);
      g_assert_cmpstr(json_object_get_string_member(v, "proxy"), ==, proxy);
    }
  /* The tasks ran inside that batch job. */
  const char *out_argv[] = { tb_datc(), "output", c->dir, "1", NULL };
  g_autoptr(TbProc) out = tb_spawn(d, "output", out_argv);
  g_assert_cmpint(tb_wait(out, 30), ==, 0);
  g_autofree gchar *printed = tb_proc_stdout(out);
  g_autofree gchar *expected = g_strdup_printf("job %s\n", job);
  g_assert_cmpstr(printed, ==, expected);
  await_queue_empty(s, 30);
  step("nothing left in the queue");
}

/* ---- 2. a running proxy cancelled -------------------------------------- */

static void
cancelled_proxy_gives_its_tasks_back(const Site *s)
{
  g_autoptr(TbDir) d = tb_dir_new();
  g_autofree gchar *tasks = slow_first_tasks(2, 300);
  g_autoptr(Campaign) c = campaign_start(s, d, tasks, 2, "10m");
  g_autoptr(JsonObject) submitted = await_event(c, "proxy_submitted", NULL, NULL);
  const char *proxy = str_member(submitted, "proxy");
  const char *job = str_member(submitted, "job");
  g_autoptr(JsonObject) connected = await_event(c, "agent_connected", proxy, NULL);
  await_started(c, 2);
  step("proxy %s (job %s): both tasks started", proxy, job);

  job_cancel(s, job);
  g_autoptr(JsonObject) ended = await_event(c, "proxy_ended", proxy, NULL);
  step("proxy cancelled and ended");
  g_assert_cmpint(campaign_finish(c, 120), ==, 0);
  step("campaign finished");
  assert_tasks_came_back(c, 2, proxy);

  /* The agent drained on the signal the scheduler sends first: TERM from
   * scancel; USR2 from qdel, since proxies are submitted with -notify. */
  g_autofree gchar *log = proxy_log(c, proxy, job);
  const char *why
      = is_slurm(s) ? "draining: Terminated" : "draining: User defined signal 2";
  if (strstr(log, why) == NULL)
    g_error("proxy %s's log does not say \"%s\":\n%s", proxy, why, log);
  if (is_slurm(s))
    {
      g_autofree gchar *state = job_state(s, job);
      g_assert_cmpstr(state, ==, "CANCELLED");
    }
  await_queue_empty(s, 30);
  step("nothing left in the queue");
}

/* ---- 3. walltime ----------------------------------------------------- */

static void
walltime_drains_before_the_kill(const Site *s)
{
  /* Slurm: whole minutes; the USR1 warning comes 35 s before the end,
   * give or take its 60 s resolution.  Grid Engine: h_rt in seconds. */
  guint walltime_s = is_slurm(s) ? 60 : 20;
  g_autoptr(TbDir) d = tb_dir_new();
  g_autofree gchar *tasks = slow_first_tasks(2, 600);
  g_autofree gchar *walltime = g_strdup_printf("%us", walltime_s);
  g_autoptr(Campaign) c = campaign_start(s, d, tasks, 2, walltime);
  g_autoptr(JsonObject) submitted = await_event(c, "proxy_submitted", NULL, NULL);
  const char *proxy = str_member(submitted, "proxy");
  const char *job = str_member(submitted, "job");
  g_assert_cmpint(json_object_get_int_member(submitted, "walltime"), ==, walltime_s);
  g_autoptr(JsonObject) connected = await_event(c, "agent_connected", proxy, NULL);
  step("proxy %s (job %s): agent connected", proxy, job);

  g_assert_cmpint(campaign_finish(c, walltime_s + 120), ==, 0);
  step("campaign finished");
  assert_tasks_came_back(c, 2, proxy);

  /* It left before the scheduler's limit. */
  g_autoptr(GPtrArray) trace = tb_trace(c->dir);
  JsonObject *exited = trace_find(trace, "agent_exited", proxy, NULL);
  gint64 lived_us = json_object_get_int_member(exited, "time")
                    - json_object_get_int_member(connected, "time");
  step("the first agent lived %.1f s of a %u s walltime", lived_us / 1e6, walltime_s);
  g_assert_cmpint(lived_us, <, (gint64)walltime_s * G_USEC_PER_SEC);

  /* On what: Slurm's warning through the proxy script, which execs the
   * agent as the batch shell; on Grid Engine the agent's own end
   * (DATC_WALLTIME_END from the script, 3 s before it) comes before h_rt's
   * USR2, which the cancel test shows reaching it. */
  g_autofree gchar *log = proxy_log(c, proxy, job);
  const char *why
      = is_slurm(s) ? "draining: User defined signal 1" : "draining: walltime is ending";
  if (strstr(log, why) == NULL)
    g_error("proxy %s's log does not say \"%s\":\n%s", proxy, why, log);
  if (is_slurm(s))
    {
      /* Not TIMEOUT: the job ended on its own before the limit's kill. */
      g_autofree gchar *state = job_state(s, job);
      g_assert_cmpstr(state, ==, "COMPLETED");
    }
  await_queue_empty(s, 30);
  step("nothing left in the queue");
}

/* ---- the beds (parent) ------------------------------------------------- */

typedef enum
{
  SGE_DOWN,
  SGE_HERE,
  SGE_NETNS
} SgeWhere;

static struct
{
  gboolean failed; /* a bed would not come up: keep the directory */
  gboolean slurm_local, netns, slurm_ns, sshd_slurm, sshd_sge;
  SgeWhere sge;
} up;

static gboolean
script_in(const char *script, const char *bed, const char *const *options)
{
  g_autoptr(GPtrArray) args = g_ptr_array_new();
  for (guint i = 0; options != NULL && options[i] != NULL; i++)
    g_ptr_array_add(args, (gpointer)options[i]);
  g_autofree gchar *dir = bed_path(bed);
  g_ptr_array_add(args, dir);
  g_ptr_array_add(args, NULL);
  gint64 start = g_get_monotonic_time();
  gboolean ok = tb_script(script, (const char *const *)args->pdata, NULL);
  g_test_message("%s %s: %s in %.1f s", script, bed, ok ? "done" : "FAILED",
                 (g_get_monotonic_time() - start) / 1e6);
  up.failed |= !ok;
  return ok;
}

static gchar *
netns_get(const char *key)
{
  g_autofree gchar *path = g_build_filename(beds, "netns", "netns.env", NULL);
  g_autoptr(GHashTable) env = tb_env_read(path);
  return env != NULL ? g_strdup(g_hash_table_lookup(env, key)) : NULL;
}

static gboolean
netns_ensure(void)
{
  if (up.netns)
    return TRUE;
  g_autofree gchar *suffix = g_strdup_printf("p%d", (int)getpid());
  g_autofree gchar *dir = bed_path("netns");
  const char *args[] = { "--suffix", suffix, dir, "slurm", "sge", NULL };
  up.netns = tb_script("netns-up.sh", args, NULL);
  up.failed |= !up.netns;
  return up.netns;
}

static gboolean
slurm_ensure(gboolean ssh)
{
  g_autofree gchar *cluster = g_strdup_printf("prx%s%d", ssh ? "n" : "l", (int)getpid());
  if (!ssh)
    {
      const char *opts[] = { "--cluster", cluster, NULL };
      if (!up.slurm_local)
        up.slurm_local = script_in("slurm-up.sh", "slurm-local", opts);
      return up.slurm_local;
    }
  if (!netns_ensure())
    return FALSE;
  g_autofree gchar *ns = netns_get("NETNS_SITE_slurm");
  g_autofree gchar *addr = netns_get("NETNS_ADDR_slurm");
  if (!up.slurm_ns)
    {
      const char *opts[] = { "--netns", ns, "--addr", addr, "--cluster", cluster, NULL };
      up.slurm_ns = script_in("slurm-up.sh", "slurm-ns", opts);
    }
  if (up.slurm_ns && !up.sshd_slurm)
    {
      /* The login node's sessions see this cluster. */
      g_autofree gchar *conf_path = g_build_filename(beds, "slurm-ns", "env", NULL);
      g_autoptr(GHashTable) conf = tb_env_read(conf_path);
      g_autofree gchar *setenv = g_strdup_printf(
          "SLURM_CONF=%s", conf ? (char *)g_hash_table_lookup(conf, "SLURM_CONF") : "");
      const char *opts[] = { "--netns", ns, "--addr", addr, "--setenv", setenv, NULL };
      up.sshd_slurm = script_in("sshd-up.sh", "sshd-slurm", opts);
    }
  return up.slurm_ns && up.sshd_slurm;
}

static gboolean
sge_ensure(gboolean ssh)
{
  SgeWhere want = ssh ? SGE_NETNS : SGE_HERE;
  if (ssh && !netns_ensure())
    return FALSE;
  g_autofree gchar *ns = ssh ? netns_get("NETNS_SITE_sge") : NULL;
  if (up.sge != want)
    {
      /* One cell per host: up again on the same directory restarts it
       * there; another test's cell is waited for. */
      const char *here[] = { "--wait", "180", NULL };
      const char *there[] = { "--netns", ns, "--wait", "180", NULL };
      up.sge = script_in("sge-up.sh", "sge", ssh ? there : here) ? want : SGE_DOWN;
      if (up.sge == SGE_DOWN)
        return FALSE;
    }
  if (ssh && !up.sshd_sge)
    {
      /* The login node's sessions get the cell's settings (its ports when
       * they are not the defaults the client wrappers know). */
      g_autofree gchar *env_path = g_build_filename(beds, "sge", "env", NULL);
      g_autoptr(GHashTable) env = tb_env_read(env_path);
      g_autofree gchar *addr = netns_get("NETNS_ADDR_sge");
      g_autoptr(GPtrArray) opts = g_ptr_array_new_with_free_func(g_free);
      g_ptr_array_add(opts, g_strdup("--netns"));
      g_ptr_array_add(opts, g_strdup(ns));
      g_ptr_array_add(opts, g_strdup("--addr"));
      g_ptr_array_add(opts, g_strdup(addr));
      GHashTableIter it;
      gpointer k, v;
      g_hash_table_iter_init(&it, env);
      while (env != NULL && g_hash_table_iter_next(&it, &k, &v))
        {
          g_ptr_array_add(opts, g_strdup("--setenv"));
          g_ptr_array_add(opts, g_strdup_printf("%s=%s", (char *)k, (char *)v));
        }
      g_ptr_array_add(opts, NULL);
      up.sshd_sge = script_in("sshd-up.sh", "sshd-sge", (const char *const *)opts->pdata);
    }
  return up.sge == want && (!ssh || up.sshd_sge);
}

/* Kills, by PID, masters a failed child left running, then cancels every
 * job left on the cluster (a proxy of that master, the competitor). */
static void
sweep(const char *scheduler, gboolean ssh)
{
  g_autofree gchar *path = bed_path("masters");
  g_autofree gchar *text = NULL;
  if (g_file_get_contents(path, &text, NULL, NULL))
    {
      g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
      for (guint i = 0; lines[i] != NULL; i++)
        {
          int pid = atoi(lines[i]);
          g_autofree gchar *exe_link = g_strdup_printf("/proc/%d/exe", pid);
          g_autofree gchar *exe = pid > 1 ? g_file_read_link(exe_link, NULL) : NULL;
          g_autofree gchar *base = exe != NULL ? g_path_get_basename(exe) : NULL;
          if (pid > 1 && base != NULL && g_str_equal(base, "datc") && !tb_pid_gone(pid))
            {
              g_printerr("# killing master %d, left by a failed test\n", pid);
              kill(pid, SIGKILL);
            }
        }
      g_unlink(path);
    }
  g_autoptr(Site) s = site_load(scheduler, ssh);
  const char *users[] = { "root", "competitor", "datc-tb" };
  for (guint i = 0; i < G_N_ELEMENTS(users); i++)
    {
      const char *slurm[] = { "scancel", "-u", users[i], NULL };
      const char *sge[] = { "qdel", "-u", users[i], NULL };
      g_auto(GStrv) argv = site_argv(s, is_slurm(s) ? slurm : sge);
      g_free(tb_capture((const char *const *)argv, NULL));
    }
}

/* A bed whose up script ran, even if it failed half-way: its down script
 * is idempotent and stops whatever the up script started. */
static gboolean
bed_tried(const char *bed)
{
  g_autofree gchar *dir = bed_path(bed);
  return g_file_test(dir, G_FILE_TEST_IS_DIR);
}

static void
beds_down(void)
{
  const struct
  {
    const char *script, *bed;
  } downs[] = {
    { "sshd-down.sh", "sshd-sge" },     { "sshd-down.sh", "sshd-slurm" },
    { "sge-down.sh", "sge" },           { "slurm-down.sh", "slurm-ns" },
    { "slurm-down.sh", "slurm-local" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(downs); i++)
    if (bed_tried(downs[i].bed))
      script_in(downs[i].script, downs[i].bed, NULL);
  /* Last: the daemons above run inside these namespaces. */
  if (bed_tried("netns"))
    {
      g_autofree gchar *dir = bed_path("netns");
      const char *args[] = { dir, NULL };
      up.failed |= !tb_script("netns-down.sh", args, NULL);
    }
}

/* ---- the cases ----------------------------------------------------------- */

typedef struct
{
  const char *scheduler;
  gboolean ssh;
  void (*body)(const Site *s);
} Case;

static void
test_case(gconstpointer data)
{
  const Case *k = data;
  if (g_test_subprocess())
    {
      case_start_us = g_get_monotonic_time();
      g_autoptr(Site) s = site_load(k->scheduler, k->ssh);
      k->body(s);
      return;
    }
  gboolean ready
      = g_str_equal(k->scheduler, "slurm") ? slurm_ensure(k->ssh) : sge_ensure(k->ssh);
  if (!ready)
    {
      g_printerr("# the %s test bed (%s) did not come up: see above\n", k->scheduler,
                 k->ssh ? "ssh, network namespaces" : "local");
      g_test_fail();
      return;
    }
  g_test_trap_subprocess(NULL, 300 * G_USEC_PER_SEC,
                         G_TEST_SUBPROCESS_INHERIT_STDOUT
                             | G_TEST_SUBPROCESS_INHERIT_STDERR);
  sweep(k->scheduler, k->ssh);
  g_test_trap_assert_passed();
}

static const Case cases[] = {
  { "slurm", FALSE, pending_behind_a_competitor },
  { "slurm", FALSE, cancelled_proxy_gives_its_tasks_back },
  { "slurm", TRUE, pending_behind_a_competitor },
  { "slurm", TRUE, cancelled_proxy_gives_its_tasks_back },
  { "slurm", TRUE, walltime_drains_before_the_kill },
  { "sge", FALSE, pending_behind_a_competitor },
  { "sge", FALSE, cancelled_proxy_gives_its_tasks_back },
  { "sge", FALSE, walltime_drains_before_the_kill },
  { "sge", TRUE, pending_behind_a_competitor },
  { "sge", TRUE, cancelled_proxy_gives_its_tasks_back },
  { "sge", TRUE, walltime_drains_before_the_kill },
};

static const char *
case_name(const Case *k)
{
  if (k->body == pending_behind_a_competitor)
    return "pending-behind-a-competitor-then-runs-the-tasks";
  if (k->body == cancelled_proxy_gives_its_tasks_back)
    return "cancelled-proxy-gives-its-tasks-back";
  return "walltime-drains-the-agent-before-the-kill";
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  gboolean parent = !g_test_subprocess();
  if (parent)
    {
      if (getuid() != 0)
        g_error("the batch test beds need root");
      /* A failed case must not abort this process: it brings the beds
       * down after the last case. */
      g_test_set_nonfatal_assertions();
      gchar *dir = g_strdup_printf("/tmp/datc-proxies-%d", (int)getpid());
      /* The login nodes' user reaches its directories below this one. */
      if (g_mkdir_with_parents(dir, 0755) != 0 || chmod(dir, 0755) != 0)
        g_error("cannot make %s: %s", dir, g_strerror(errno));
      g_setenv("DATC_PROXIES_BEDS", dir, TRUE);
      beds = dir;
    }
  else
    beds = g_getenv("DATC_PROXIES_BEDS");
  g_assert_nonnull(beds);

  for (guint i = 0; i < G_N_ELEMENTS(cases); i++)
    {
      g_autofree gchar *path
          = g_strdup_printf("/proxies/%s/%s/%s", cases[i].scheduler,
                            cases[i].ssh ? "ssh" : "local", case_name(&cases[i]));
      g_test_add_data_func(path, &cases[i], test_case);
    }
  int rc = g_test_run();
  if (parent)
    {
      beds_down();
      if (up.failed)
        rc = 1;
      if (rc != 0 || g_getenv("DATC_TEST_KEEP") != NULL)
        g_printerr("# test beds' state and logs kept in %s\n", beds);
      else
        {
          const char *rm[] = { "rm", "-rf", "--", beds, NULL };
          g_free(tb_capture(rm, NULL));
        }
    }
  return rc;
}
