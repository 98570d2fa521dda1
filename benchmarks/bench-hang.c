/* bench-hang.c: does a login node that hangs slow down the others?  The
 * same bag of short tasks runs on a healthy fork site (`here`, local
 * transport, 2 proxies x 2 slots, agents over tcp://127.0.0.1) alone (run
 * A) and with a second site listed first whose login node hangs (run B):
 * a real sshd of the test bed on loopback (site-drivers/testbed-sshd.h),
 * stopped with SIGSTOP before the campaign starts and continued after it,
 * so the kernel accepts connections that never get an SSH banner.
 *
 * Runs alternate A B A B ... A, and each B is compared with the mean of
 * the A just before and just after it (the VM's speed drifts by tens of
 * percent between runs; see bench-core's spawn).  Per run it prints:
 *   - tasks/s of the healthy site: its results over the time from its
 *     first task's start to its last task's end (results.jsonl), and the
 *     wall time of `datc run`, start to exit;
 *   - `datc status --json DIR` asked every ~50 ms while the master runs:
 *     max and p99 of the command's wall time (process start included), and
 *     of the same request made in-process (datc_control_call, as `datc
 *     status` makes it: what the master's loop took, plus the ipc round
 *     trip);
 *   - agent_lost events (trace.jsonl) and the agents' "no word from the
 *     master" lines (DIR/proxies/here/\*.log): missed heartbeats;
 *   - B: when the hung site was first shown degraded (site_degraded in the
 *     trace, and the first status answer saying so), after
 *     campaign_started.
 * Nothing here asserts.  As root (the test bed's sshd), by hand:
 *
 *   DATC=... DATC_AGENT=... DATC_TESTBED=tests/testbed bench-hang \
 *     [--tasks N] [--task CMD] [--rounds R] [--command-timeout 5s|default]
 *
 * Every process started here is ended by pid: `datc run` (SIGTERM, then
 * SIGKILL), the fork site's agents (this process is their subreaper; their
 * pids are the jobs in the trace) and the sshd (continued, then brought
 * down by sshd-down.sh), also on SIGINT/SIGTERM. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "campaign.h"
#include "control.h"
#include "testbed-sshd.h"

extern char **environ;

#define STATUS_EVERY_US (50 * 1000)
#define STATUS_TIMEOUT_MS 5000

static volatile sig_atomic_t interrupted;

static void
on_signal (int sig)
{
  interrupted = sig;
}

typedef struct {
  gboolean hung; /* run B: the hung site listed first */
  int status;    /* datc run's exit status (128+signal) */
  double wall_s; /* datc run, start to exit */
  double rate;   /* the healthy site's tasks/s */
  guint done_here, results;
  GArray *cli_ms, *raw_ms; /* status latencies (double) */
  double cli_max, raw_max;
  double cli_max_at, raw_max_at; /* when the slowest answer came, after datc run started */
  gchar *missed_first;           /* the first "no word from the master" line */
  guint cli_failed, raw_failed;
  guint cut;     /* in-process questions the master's exit left unanswered */
  double cut_ms; /* the longest of them */
  guint cli_cut; /* the same for `datc status` (its own timeout is 30 s) */
  double cli_cut_ms;
  guint lost;              /* agent_lost in the trace */
  guint lapsed, reconnect; /* agents' "no word from the master" lines: lease lapsed, lost */
  guint degraded;          /* site_degraded events for the hung site */
  double degraded_s;       /* first one, after campaign_started; < 0: none */
  double degraded_live_s;  /* first status answer showing it; < 0: none */
  gchar *degraded_error;
} Run;

static void
run_clear (Run *r)
{
  g_clear_pointer (&r->cli_ms, g_array_unref);
  g_clear_pointer (&r->raw_ms, g_array_unref);
  g_clear_pointer (&r->degraded_error, g_free);
  g_clear_pointer (&r->missed_first, g_free);
}

static void
die (const char *what)
{
  g_printerr ("bench-hang: %s\n", what);
  exit (1);
}

static const char *
env_or_die (const char *name)
{
  const char *v = g_getenv (name);
  if (v == NULL || *v == '\0')
    die ("set DATC, DATC_AGENT and DATC_TESTBED (tests/testbed)");
  return v;
}

static pid_t
spawn (const char *const *argv, const char *out, const char *err)
{
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init (&fa);
  posix_spawn_file_actions_addopen (&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen (&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen (&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  int e = posix_spawn (&pid, argv[0], &fa, NULL, (char *const *) argv, environ);
  posix_spawn_file_actions_destroy (&fa);
  if (e != 0)
    {
      g_printerr ("bench-hang: cannot run %s: %s\n", argv[0], g_strerror (e));
      return -1;
    }
  return pid;
}

static int
wait_status (pid_t pid)
{
  int status;
  while (waitpid (pid, &status, 0) < 0)
    if (errno != EINTR)
      return -1;
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

/* Alive and not a zombie, and its command line mentions `needle`. */
static gboolean
pid_runs (pid_t pid, const char *needle)
{
  g_autofree gchar *stat_path = g_strdup_printf ("/proc/%d/stat", (int) pid);
  g_autofree gchar *cmd_path = g_strdup_printf ("/proc/%d/cmdline", (int) pid);
  g_autofree gchar *stat = NULL, *cmd = NULL;
  gsize len = 0;
  if (!g_file_get_contents (stat_path, &stat, NULL, NULL)
      || !g_file_get_contents (cmd_path, &cmd, &len, NULL))
    return FALSE;
  const char *p = strrchr (stat, ')');
  if (p == NULL || strncmp (p, ") Z", 3) == 0)
    return FALSE;
  for (gsize i = 0; i + 1 < len; i++)
    if (cmd[i] == '\0')
      cmd[i] = ' ';
  return strstr (cmd, needle) != NULL;
}

/* Collects the orphans reparented here (the fork site's agents). */
static void
reap_orphans (void)
{
  while (waitpid (-1, NULL, WNOHANG) > 0)
    ;
}

/* DIR/trace.jsonl, one object per line (a torn last line skipped). */
static GPtrArray *
read_trace (const char *dir)
{
  GPtrArray *events = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);
  g_autofree gchar *path = g_build_filename (dir, "trace.jsonl", NULL);
  g_autofree gchar *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return events;
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_autoptr (JsonParser) p = json_parser_new ();
      if (*lines[i] == '\0' || !json_parser_load_from_data (p, lines[i], -1, NULL))
        continue;
      JsonNode *root = json_parser_get_root (p);
      if (JSON_NODE_HOLDS_OBJECT (root))
        g_ptr_array_add (events, json_object_ref (json_node_get_object (root)));
    }
  return events;
}

static const char *
str_member (JsonObject *o, const char *name)
{
  return json_object_get_string_member_with_default (o, name, "");
}

/* The fork site's agents that are still there: their pids are the jobs
 * of its proxy_submitted events.  Killed by pid, checked to be agents. */
static void
kill_agents (const char *dir)
{
  g_autoptr (GPtrArray) trace = read_trace (dir);
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *e = trace->pdata[i];
      if (!g_str_equal (str_member (e, "event"), "proxy_submitted")
          || !g_str_equal (str_member (e, "site"), "here"))
        continue;
      pid_t pid = (pid_t) g_ascii_strtoll (str_member (e, "job"), NULL, 10);
      if (pid > 1 && pid_runs (pid, "datc-agent"))
        {
          g_printerr ("bench-hang: agent %d was still there: killed\n", (int) pid);
          kill (pid, SIGKILL);
        }
    }
  reap_orphans ();
}

/* Lines of the agents' logs under DIR/proxies/here/ saying the master
 * was silent past the lease (lapsed) or the timeout (reconnect). */
static void
count_missed (const char *dir, Run *r)
{
  g_autofree gchar *logs = g_build_filename (dir, "proxies", "here", NULL);
  g_autoptr (GDir) d = g_dir_open (logs, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      if (!g_str_has_suffix (name, ".log"))
        continue;
      g_autofree gchar *path = g_build_filename (logs, name, NULL);
      g_autofree gchar *text = NULL;
      if (!g_file_get_contents (path, &text, NULL, NULL))
        continue;
      g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
      for (guint i = 0; lines[i] != NULL; i++)
        if (strstr (lines[i], "no word from the master") != NULL)
          {
            if (r->missed_first == NULL)
              r->missed_first = g_strdup (g_strstrip (lines[i]));
            if (strstr (lines[i], "reconnecting") != NULL)
              r->reconnect++;
            else
              r->lapsed++;
          }
    }
}

static void
read_outcome (const char *dir, Run *r)
{
  g_autoptr (GPtrArray) trace = read_trace (dir);
  gint64 started = 0;
  r->degraded_s = -1;
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *e = trace->pdata[i];
      const char *ev = str_member (e, "event");
      gint64 t = json_object_get_int_member_with_default (e, "time", 0);
      if (g_str_equal (ev, "campaign_started") && started == 0)
        started = t;
      else if (g_str_equal (ev, "agent_lost"))
        r->lost++;
      else if (g_str_equal (ev, "site_degraded") && g_str_equal (str_member (e, "site"), "hung"))
        {
          if (r->degraded++ == 0)
            {
              r->degraded_s = (t - started) / 1e6;
              r->degraded_error = g_strdup (str_member (e, "error"));
            }
        }
    }

  g_autofree gchar *path = g_build_filename (dir, "results.jsonl", NULL);
  g_autofree gchar *text = NULL;
  gint64 first = G_MAXINT64, last = 0;
  if (g_file_get_contents (path, &text, NULL, NULL))
    {
      g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
      for (guint i = 0; lines[i] != NULL; i++)
        {
          g_autoptr (JsonParser) p = json_parser_new ();
          if (*lines[i] == '\0' || !json_parser_load_from_data (p, lines[i], -1, NULL))
            continue;
          JsonObject *o = json_node_get_object (json_parser_get_root (p));
          r->results++;
          if (!g_str_equal (str_member (o, "site"), "here"))
            continue;
          r->done_here++;
          first = MIN (first, json_object_get_int_member_with_default (o, "started", first));
          last = MAX (last, json_object_get_int_member_with_default (o, "finished", last));
        }
    }
  r->rate = r->done_here > 0 && last > first ? r->done_here / ((last - first) / 1e6) : 0;
  count_missed (dir, r);
}

/* The status object says the hung site is degraded. */
static gboolean
shows_degraded (JsonNode *st)
{
  if (st == NULL || !JSON_NODE_HOLDS_OBJECT (st))
    return FALSE;
  JsonObject *o = json_node_get_object (st);
  if (!json_object_has_member (o, "sites"))
    return FALSE;
  JsonArray *sites = json_object_get_array_member (o, "sites");
  for (guint i = 0; i < json_array_get_length (sites); i++)
    {
      JsonObject *s = json_array_get_object_element (sites, i);
      if (g_str_equal (str_member (s, "name"), "hung")
          && g_str_equal (str_member (s, "state"), "degraded"))
        return TRUE;
    }
  return FALSE;
}

/* Waits for `datc run` on a thread of its own, so that its exit time is
 * known even while a status question is out (one asked during the
 * master's shutdown waits for its timeout: the master no longer reads). */
typedef struct {
  pid_t pid;
  int status;
  gint64 end_us;
  gint done;
} Waiter;

static gpointer
waiter_main (gpointer p)
{
  Waiter *w = p;
  w->status = wait_status (w->pid);
  w->end_us = g_get_monotonic_time ();
  g_atomic_int_set (&w->done, 1);
  return NULL;
}

static void
stop_child (Waiter *w)
{
  kill (w->pid, SIGTERM);
  for (int i = 0; i < 200 && !g_atomic_int_get (&w->done); i++)
    g_usleep (50 * 1000);
  if (!g_atomic_int_get (&w->done))
    kill (w->pid, SIGKILL);
}

/* One campaign; the status questions are asked while it runs. */
static void
run_once (const char *tmp, guint index, const char *tasks, const char *hung_group, Run *r)
{
  const char *datc = g_getenv ("DATC"), *agent = g_getenv ("DATC_AGENT");
  g_autofree gchar *dir = g_strdup_printf ("%s/r%u", tmp, index);
  g_autofree gchar *sites = g_strdup_printf ("%s/r%u.ini", tmp, index);
  g_autofree gchar *out = g_strdup_printf ("%s/r%u.out", tmp, index);
  g_autofree gchar *err = g_strdup_printf ("%s/r%u.err", tmp, index);
  g_autofree gchar *ini = g_strdup_printf ("[master]\nlisten = tcp://127.0.0.1:0\n\n%s"
                                           "[site here]\nscheduler = fork\nslots_per_proxy = 2\n"
                                           "max_proxies = 2\nagent = %s\n",
                                           hung_group ? hung_group : "", agent);
  if (!g_file_set_contents (sites, ini, -1, NULL))
    die ("cannot write the sites file");
  r->hung = hung_group != NULL;
  r->cli_ms = g_array_new (FALSE, FALSE, sizeof (double));
  r->raw_ms = g_array_new (FALSE, FALSE, sizeof (double));
  r->degraded_live_s = -1;

  /* The agents' logs are read afterwards (count_missed): kept. */
  const char *argv[] = { datc,
                         "run",
                         "--dir",
                         dir,
                         "--sites",
                         sites,
                         "--heartbeat-ms",
                         "200",
                         "--agent-timeout-ms",
                         "1600",
                         "--keep-site-files",
                         tasks,
                         NULL };
  const char *st_argv[] = { datc, "status", "--json", dir, NULL };
  g_autoptr (JsonNode) req = json_from_string ("{\"cmd\":\"status\"}", NULL);
  gint64 t0 = g_get_monotonic_time ();
  Waiter w = { .pid = spawn (argv, out, err) };
  if (w.pid < 0)
    die ("cannot start datc run");
  GThread *waiter = g_thread_new ("waiter", waiter_main, &w);
  gboolean done = FALSE;
  while (!done && !interrupted)
    {
      gint64 tick = g_get_monotonic_time ();
      done = g_atomic_int_get (&w.done);
      /* Only while a master holds the campaign: before, `datc status`
       * would read the files and answer without it. */
      if (!done && datc_control_master_running (dir))
        {
          g_autoptr (GError) error = NULL;
          gint64 a = g_get_monotonic_time ();
          g_autoptr (JsonNode) st = datc_control_call (dir, req, STATUS_TIMEOUT_MS, &error);
          double raw = (g_get_monotonic_time () - a) / 1000.0;
          /* A question the master's exit left unanswered is not a slow
           * answer: counted apart, with how long its asker waited. */
          gboolean gone = !datc_control_master_running (dir);
          gdouble at = (g_get_monotonic_time () - t0) / 1e6;
          if (st != NULL && (r->raw_ms->len == 0 || raw > r->raw_max))
            r->raw_max = raw, r->raw_max_at = at;
          if (st != NULL)
            g_array_append_val (r->raw_ms, raw);
          else if (gone)
            {
              r->cut++;
              r->cut_ms = MAX (r->cut_ms, raw);
            }
          else
            {
              r->raw_failed++;
              g_printerr ("bench-hang: status (in-process) after %.1f ms: %s\n", raw,
                          error->message);
            }
          if (!gone)
            {
              a = g_get_monotonic_time ();
              pid_t s = spawn (st_argv, "/dev/null", "/dev/null");
              int cli_status = s > 0 ? wait_status (s) : -1;
              double cli = (g_get_monotonic_time () - a) / 1000.0;
              if (cli_status == 0 && (r->cli_ms->len == 0 || cli > r->cli_max))
                r->cli_max = cli, r->cli_max_at = (g_get_monotonic_time () - t0) / 1e6;
              if (cli_status == 0)
                g_array_append_val (r->cli_ms, cli);
              else if (!datc_control_master_running (dir))
                {
                  r->cli_cut++;
                  r->cli_cut_ms = MAX (r->cli_cut_ms, cli);
                }
              else
                r->cli_failed++;
            }
          if (r->degraded_live_s < 0 && shows_degraded (st))
            r->degraded_live_s = (g_get_monotonic_time () - t0) / 1e6;
        }
      gint64 left = tick + STATUS_EVERY_US - g_get_monotonic_time ();
      if (!done && left > 0)
        g_usleep (left);
    }
  if (!done)
    stop_child (&w);
  g_thread_join (waiter);
  r->status = w.status;
  r->wall_s = (w.end_us - t0) / 1e6;
  kill_agents (dir);
  read_outcome (dir, r);
  /* degraded_live_s counts from the spawn; the trace from campaign_started. */
  if (r->status != 0)
    {
      g_autofree gchar *text = NULL;
      g_file_get_contents (err, &text, NULL, NULL);
      g_printerr ("bench-hang: datc run %s exited %d:\n%s\n", dir, r->status, text ? text : "");
    }
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

/* The p-th percentile (nearest rank) and the max of `ms`; sorts it. */
static void
tail_of (GArray *ms, double *p99, double *max)
{
  *p99 = *max = 0;
  if (ms->len == 0)
    return;
  g_array_sort (ms, cmp_double);
  guint rank = (guint) (0.99 * ms->len + 0.999999);
  *p99 = g_array_index (ms, double, MAX (rank, 1u) - 1);
  *max = g_array_index (ms, double, ms->len - 1);
}

static void
print_run (const char *label, const Run *r, guint n)
{
  double cp99, cmax, rp99, rmax;
  tail_of (r->cli_ms, &cp99, &cmax);
  tail_of (r->raw_ms, &rp99, &rmax);
  printf ("  %s %5.0f tasks/s here (%u/%u done; datc run %.2f s, exit %d)\n", label, r->rate,
          r->done_here, n, r->wall_s, r->status);
  printf ("      status, %u answers: datc p99 %.1f max %.1f ms (at %.1f s; %u failed); in-process "
          "p99 %.1f max %.1f ms (at %.1f s; %u failed)\n",
          r->cli_ms->len, cp99, cmax, r->cli_max_at, r->cli_failed, rp99, rmax, r->raw_max_at,
          r->raw_failed);
  if (r->cut + r->cli_cut > 0)
    printf ("      unanswered when the master exited: datc %u (waited %.0f ms), in-process %u "
            "(waited %.0f ms)\n",
            r->cli_cut, r->cli_cut_ms, r->cut, r->cut_ms);
  printf ("      agent_lost %u; no word from the master %u (lease lapsed %u, lost %u)", r->lost,
          r->lapsed + r->reconnect, r->lapsed, r->reconnect);
  if (r->hung && r->degraded > 0)
    printf ("; hung site degraded %u x, first %.2f s after campaign_started (status: %.2f s "
            "after datc run started): %s",
            r->degraded, r->degraded_s, r->degraded_live_s, r->degraded_error);
  else if (r->hung)
    printf ("; hung site NOT degraded");
  printf ("\n");
  if (r->missed_first != NULL)
    printf ("      first: %s\n", r->missed_first);
  fflush (stdout);
}

static double
median (double *v, guint n)
{
  qsort (v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int
main (int argc, char **argv)
{
  gint tasks = 6000, rounds = 3;
  g_autofree gchar *task = NULL, *timeout = NULL;
  gboolean keep = FALSE;
  GOptionEntry entries[] = {
    { "tasks", 'n', 0, G_OPTION_ARG_INT, &tasks, "Tasks in the bag (default 6000)", "N" },
    { "task", 0, 0, G_OPTION_ARG_STRING, &task, "Each task (default: sleep 0.01)", "CMD" },
    { "rounds", 'r', 0, G_OPTION_ARG_INT, &rounds, "B runs, each between two A runs (default 3)",
      "R" },
    { "command-timeout", 0, 0, G_OPTION_ARG_STRING, &timeout,
      "The hung site's command_timeout (default 5s; 'default': the key left out, 30 s)", "T" },
    { "keep", 0, 0, G_OPTION_ARG_NONE, &keep, "Keep the working directory", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- a campaign beside a hung login node");
  g_option_context_add_main_entries (ctx, entries, NULL);
  g_autoptr (GError) error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      g_printerr ("bench-hang: %s\n", error->message);
      return 2;
    }
  if (tasks < 1 || rounds < 1 || rounds > 100)
    {
      g_printerr ("bench-hang: --tasks >= 1, --rounds 1..100\n");
      return 2;
    }
  if (task == NULL)
    task = g_strdup ("sleep 0.01");
  if (timeout == NULL)
    timeout = g_strdup ("5s");
  env_or_die ("DATC");
  env_or_die ("DATC_AGENT");
  env_or_die ("DATC_TESTBED");
  if (geteuid () != 0)
    die ("run as root: the test bed's sshd needs it");

  /* The fork site's agents leave their session: collected here. */
  prctl (PR_SET_CHILD_SUBREAPER, 1);
  struct sigaction sa = { 0 };
  sa.sa_handler = on_signal;
  sigaction (SIGINT, &sa, NULL);
  sigaction (SIGTERM, &sa, NULL);
  sigaction (SIGHUP, &sa, NULL);

  g_autofree gchar *tmp = g_dir_make_tmp ("datc-hang-XXXXXX", &error);
  if (tmp == NULL)
    die (error->message);
  g_autofree gchar *tasks_file = g_build_filename (tmp, "tasks.txt", NULL);
  GString *bag = g_string_new (NULL);
  for (gint i = 0; i < tasks; i++)
    g_string_append_printf (bag, "%s\n", task);
  if (!g_file_set_contents (tasks_file, bag->str, (gssize) bag->len, NULL))
    die ("cannot write the task file");
  g_string_free (bag, TRUE);

  TestbedSshd sshd;
  if (!testbed_sshd_up (&sshd, NULL, NULL))
    {
      testbed_sshd_clear (&sshd);
      die ("the test bed's sshd did not come up");
    }
  pid_t sshd_pid = testbed_sshd_pid (&sshd);
  g_autofree gchar *workdir
      = g_build_filename (testbed_sshd_get (&sshd, "SSHD_REMOTE_DIR"), "datc", NULL);
  g_autofree gchar *timeout_line = g_str_equal (timeout, "default")
                                       ? g_strdup ("")
                                       : g_strdup_printf ("command_timeout = %s\n", timeout);
  g_autofree gchar *hung_group = g_strdup_printf (
      "[site hung]\ntransport = ssh\nhost = %s\nport = %s\nuser = %s\nidentity = %s\n"
      "known_hosts = %s\nscheduler = slurm\nslots_per_proxy = 2\nmax_proxies = 2\n"
      "workdir = %s\nagent = %s\n%s\n",
      testbed_sshd_get (&sshd, "SSHD_ADDR"), testbed_sshd_get (&sshd, "SSHD_PORT"),
      testbed_sshd_get (&sshd, "SSHD_USER"), testbed_sshd_get (&sshd, "SSHD_IDENTITY"),
      testbed_sshd_get (&sshd, "SSHD_KNOWN_HOSTS"), workdir, g_getenv ("DATC_AGENT"), timeout_line);

  printf ("hang: %d x %s on site here (fork, 2 proxies x 2 slots), --heartbeat-ms 200 "
          "--agent-timeout-ms 1600;\n  B adds site hung first (sshd pid %d SIGSTOPped, "
          "command_timeout %s); runs A B A ... A, %d rounds, in %s\n",
          tasks, task, (int) sshd_pid, timeout, rounds, tmp);
  fflush (stdout);

  guint n_runs = 2 * (guint) rounds + 1, index = 0;
  g_autofree Run *a = g_new0 (Run, rounds + 1);
  g_autofree Run *b = g_new0 (Run, rounds);
  g_autofree double *ratios = g_new (double, rounds);
  guint measured = 0;
  for (guint i = 0; i < n_runs && !interrupted; i++)
    {
      guint k = i / 2;
      if (i % 2 == 0)
        {
          run_once (tmp, index++, tasks_file, NULL, &a[k]);
          print_run ("A", &a[k], (guint) tasks);
        }
      else
        {
          kill (sshd_pid, SIGSTOP);
          run_once (tmp, index++, tasks_file, hung_group, &b[k]);
          /* Continued between B runs: the connections the master left
           * in its backlog are accepted and closed, so each B starts
           * from the same state. */
          kill (sshd_pid, SIGCONT);
          print_run ("B", &b[k], (guint) tasks);
        }
      if (i % 2 == 0 && i > 0 && !interrupted)
        {
          double mean_a = (a[k - 1].rate + a[k].rate) / 2;
          ratios[measured] = mean_a > 0 ? b[k - 1].rate / mean_a : 0;
          printf ("  round %u: B %.0f / mean A %.0f tasks/s = %.3f\n", k, b[k - 1].rate, mean_a,
                  ratios[measured]);
          measured++;
        }
    }
  /* Continued first: a stopped sshd would take the SIGTERM only later.
   * Stopped and removed here, for testbed_sshd_clear() would keep the
   * directory outside a GTest run (g_test_failed() says TRUE there). */
  kill (sshd_pid, SIGCONT);
  if (testbed_sshd_stop (&sshd) && !keep)
    testbed_remove_tree (sshd.dir);
  sshd.owner = FALSE;
  testbed_sshd_clear (&sshd);

  if (measured > 0)
    {
      double lo = ratios[0], hi = ratios[0];
      for (guint i = 0; i < measured; i++)
        lo = MIN (lo, ratios[i]), hi = MAX (hi, ratios[i]);
      printf ("  ratio B/A %.3f median of %u (min %.3f, max %.3f)\n", median (ratios, measured),
              measured, lo, hi);
      /* Status over all runs of each kind. */
      for (int kind = 0; kind < 2; kind++)
        {
          Run *v = kind ? b : a;
          guint nv = kind ? measured : measured + 1;
          g_autoptr (GArray) cli = g_array_new (FALSE, FALSE, sizeof (double));
          g_autoptr (GArray) raw = g_array_new (FALSE, FALSE, sizeof (double));
          guint lost = 0, missed = 0, failed = 0, cut = 0, cli_cut = 0;
          for (guint i = 0; i < nv; i++)
            {
              if (v[i].cli_ms == NULL)
                continue;
              g_array_append_vals (cli, v[i].cli_ms->data, v[i].cli_ms->len);
              g_array_append_vals (raw, v[i].raw_ms->data, v[i].raw_ms->len);
              lost += v[i].lost;
              missed += v[i].lapsed + v[i].reconnect;
              failed += v[i].cli_failed + v[i].raw_failed;
              cut += v[i].cut;
              cli_cut += v[i].cli_cut;
            }
          double cp99, cmax, rp99, rmax;
          tail_of (cli, &cp99, &cmax);
          tail_of (raw, &rp99, &rmax);
          printf (
              "  all %s: status datc p99 %.1f max %.1f ms, in-process p99 %.1f max %.1f ms "
              "(%u answers, %u failed; unanswered at the master's exit: datc %u, in-process %u); "
              "agent_lost %u; no word from the master %u\n",
              kind ? "B" : "A", cp99, cmax, rp99, rmax, cli->len, failed, cli_cut, cut, lost,
              missed);
        }
    }
  if (interrupted)
    printf ("  interrupted by signal %d\n", (int) interrupted);

  for (gint i = 0; i <= rounds; i++)
    run_clear (&a[i]);
  for (gint i = 0; i < rounds; i++)
    run_clear (&b[i]);
  if (!keep)
    {
      const char *rm[] = { "/bin/rm", "-rf", tmp, NULL };
      pid_t pid = spawn (rm, "/dev/null", "/dev/null");
      if (pid > 0)
        wait_status (pid);
    }
  else
    printf ("  kept %s\n", tmp);
  return interrupted ? 1 : 0;
}
