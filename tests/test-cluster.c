/* test-cluster.c: relay mode on a bed shaped like a real cluster
 * (tests/cluster.h): the master's namespace reaches only the login
 * node's sshd, the compute namespace (Slurm's or Grid Engine's daemons,
 * every job) only the login node.  Real datc, real agents, a real
 * `datc-agent relay` over a real SSH session:
 *
 *   relay-campaign-completes      every task done, each agent told the
 *                                 relay's address on the login node; the
 *                                 relay gone afterwards (process, pid file)
 *   direct-fails-naming-address   the same site with reach = direct stops
 *                                 (give_up_after) naming the address the
 *                                 agents could not reach: the relay is
 *                                 what carries the traffic
 *   session-cut-mid-campaign      the SSH session's sshd processes killed
 *                                 by PID mid-campaign: re-established,
 *                                 one result per task
 *   link-down-mid-campaign        (Slurm) link master-login down 20 s:
 *                                 the session is found lost, re-made once
 *                                 the link is back, one result per task
 *
 * Each case brings its own bed up and down in the parent process around
 * a subprocess running the body, so a failed assertion leaves nothing
 * behind. */
#include <signal.h>
#include <string.h>
#include <sys/stat.h>

#include "cluster.h"
#include "harness.h"

typedef void (*Body) (ClBed *bed, TbDir *d);

typedef struct {
  const char *scheduler;
  Body body;
} Case;

/* `n` tasks; each records its agent's command line in MARKS/ID, then
 * sleeps `secs`.  MARKS is readable by the login user's jobs. */
static gchar *
marked_tasks (TbDir *d, const char *marks, guint n, const char *secs)
{
  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 1; i <= n; i++)
    /* Through a temporary file: a copy of the task (end-game
     * replication) killed mid-way must not leave the mark empty. */
    g_string_append_printf (t,
                            "tr '\\0' ' ' < /proc/$PPID/cmdline > %s/%u.$$ && mv %s/%u.$$ "
                            "%s/%u; sleep %s\n",
                            marks, i, marks, i, marks, i, secs);
  return tb_write (d, "t.txt", t->str);
}

/* A directory the login user's jobs can write. */
static gchar *
job_dir (ClBed *bed, const char *name)
{
  gchar *dir = g_build_filename (bed->login_remote_dir, name, NULL);
  g_assert_cmpint (g_mkdir_with_parents (dir, 0777), ==, 0);
  g_assert_cmpint (chmod (dir, 0777), ==, 0);
  return dir;
}

static gchar *
sites_file (ClBed *bed, TbDir *d, const char *master, const char *extra)
{
  g_autofree gchar *work = g_strdup_printf ("%s/w%d", bed->login_remote_dir, (int) getpid ());
  g_autofree gchar *group = cl_site_group (bed, "c", bed->scheduler, work, extra);
  g_autofree gchar *text = g_strconcat (master ? master : "", group, NULL);
  return tb_write (d, "SITES.ini", text);
}

static gchar *
relay_extra (ClBed *bed, const char *more)
{
  return g_strdup_printf ("reach = relay\nrelay_address = %s\nslots_per_proxy = 2\n"
                          "max_proxies = 2\npoll_interval = 1s\nmax_calls_per_minute = 0\n%s",
                          bed->login_cluster_addr, more ? more : "");
}

static TbProc *
spawn_run (ClBed *bed, TbDir *d, const char *tasks, const char *sites, const char *dir)
{
  const char *argv[] = { tb_datc (), "run", tasks, "--sites", sites, "--dir", dir, NULL };
  g_auto (GStrv) in_ns = ms_in_netns (bed->ns_master, argv);
  return tb_spawn (d, "run", (const char *const *) in_ns);
}

/* Nothing of the relay left on the login node: no relay process of this
 * campaign's workdir, no pid file. */
static void
assert_relay_gone (ClBed *bed)
{
  g_autofree gchar *work = g_strdup_printf ("%s/w%d/c", bed->login_remote_dir, (int) getpid ());
  g_autofree gchar *pidfile = g_build_filename (work, "relay.pid", NULL);
  g_assert_false (g_file_test (pidfile, G_FILE_TEST_EXISTS));
  g_autoptr (GArray) left = tb_find_agents (pidfile);
  g_assert_cmpuint (left->len, ==, 0);
}

static void
relay_campaign_completes (ClBed *bed, TbDir *d)
{
  g_autofree gchar *marks = job_dir (bed, "marks");
  g_autofree gchar *tasks = marked_tasks (d, marks, 30, "0.2");
  g_autofree gchar *extra = relay_extra (bed, NULL);
  g_autofree gchar *sites = sites_file (bed, d, NULL, extra);
  g_autofree gchar *dir = g_build_filename (d->path, "c.datc", NULL);
  g_autoptr (TbProc) run = spawn_run (bed, d, tasks, sites, dir);
  g_assert_cmpint (tb_wait (run, 240), ==, 0);

  g_autoptr (GHashTable) results = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (results), ==, 30);
  g_autofree gchar *connect = g_strdup_printf (" --connect tcp://%s:", bed->login_cluster_addr);
  for (guint i = 1; i <= 30; i++)
    {
      g_autofree gchar *mark = g_strdup_printf ("%s/%u", marks, i);
      g_autofree gchar *cmd = NULL;
      g_assert_true (g_file_get_contents (mark, &cmd, NULL, NULL));
      g_assert_nonnull (strstr (cmd, connect));
    }
  g_autofree gchar *err = tb_proc_stderr (run);
  g_assert_nonnull (strstr (err, "exiting: the master said the campaign is over"));
  assert_relay_gone (bed);
}

static void
direct_fails_naming_address (ClBed *bed, TbDir *d)
{
  g_autofree gchar *tasks = tb_write (d, "t.txt", "true\ntrue\n");
  g_autofree gchar *master
      = g_strdup_printf ("[master]\nlisten = tcp://%s:0\nadvertise = %s\ngive_up_after = 20s\n\n",
                         bed->master_addr, bed->master_addr);
  g_autofree gchar *sites = sites_file (bed, d, master,
                                        "connect_wait = 5s\npoll_interval = 1s\n"
                                        "max_calls_per_minute = 0\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c.datc", NULL);
  g_autoptr (TbProc) run = spawn_run (bed, d, tasks, sites, dir);
  gint64 t0 = g_get_monotonic_time ();
  g_assert_cmpint (tb_wait (run, 180), ==, 3);
  g_printerr ("# direct: stopped after %.1f s\n", (g_get_monotonic_time () - t0) / 1e6);
  g_autofree gchar *err = tb_proc_stderr (run);
  g_autofree gchar *says = g_strdup_printf ("its agent cannot reach tcp://%s:", bed->master_addr);
  g_assert_nonnull (strstr (err, says));
  g_assert_nonnull (strstr (err, "reach = relay"));
  g_autofree gchar *results_path = g_build_filename (dir, "results.jsonl", NULL);
  g_assert_cmpuint (tb_count_lines (results_path), ==, 0);
}

/* Cuts the session (or the link) once `after` results are in; the
 * campaign still completes with one result per task. */
static void
interrupted (ClBed *bed, TbDir *d, gboolean link)
{
  g_autofree gchar *marks = job_dir (bed, "marks");
  g_autofree gchar *tasks = marked_tasks (d, marks, 60, "0.5");
  g_autofree gchar *extra = relay_extra (bed, "command_timeout = 10s\n");
  g_autofree gchar *sites = sites_file (bed, d, NULL, extra);
  g_autofree gchar *dir = g_build_filename (d->path, "c.datc", NULL);
  g_autofree gchar *results_path = g_build_filename (dir, "results.jsonl", NULL);
  g_autoptr (TbProc) run = spawn_run (bed, d, tasks, sites, dir);
  g_autoptr (GError) error = NULL;

  g_assert_true (tb_await_lines (results_path, 8, 180));
  if (link)
    {
      g_assert_true (cl_link_set (bed, FALSE, &error));
      /* Longer than the master's 15 s without a word from the relay. */
      g_assert_true (tb_await_stderr (run, "relay session lost", 60));
      g_assert_true (cl_link_set (bed, TRUE, &error));
    }
  else
    g_assert_true (cl_cut_session (bed, &error));
  g_assert_no_error (error);
  g_assert_true (tb_await_stderr (run, "session re-established", 120));
  g_assert_cmpint (tb_wait (run, 300), ==, 0);

  g_autoptr (GHashTable) results = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (results), ==, 60);
  g_assert_cmpuint (tb_count_lines (results_path), ==, 60);
  g_autofree gchar *err = tb_proc_stderr (run);
  g_assert_nonnull (strstr (err, "relay session lost"));
  assert_relay_gone (bed);
}

static void
session_cut_mid_campaign (ClBed *bed, TbDir *d)
{
  interrupted (bed, d, FALSE);
}

static void
link_down_mid_campaign (ClBed *bed, TbDir *d)
{
  interrupted (bed, d, TRUE);
}

/* `datc sites check --probe` on the direct site: its compute nodes
 * cannot reach the master, the relay works, reach = relay recommended. */
static void
probe_recommends_relay (ClBed *bed, TbDir *d)
{
  g_autofree gchar *master = g_strdup_printf ("[master]\nlisten = tcp://%s:0\nadvertise = %s\n\n",
                                              bed->master_addr, bed->master_addr);
  g_autofree gchar *extra = g_strdup_printf ("relay_address = %s\nmax_calls_per_minute = 0\n"
                                             "poll_interval = 1s\n",
                                             bed->login_cluster_addr);
  g_autofree gchar *sites = sites_file (bed, d, master, extra);
  const char *argv[]
      = { tb_datc (), "sites", "check", sites, "--probe", "--probe-timeout", "120", NULL };
  g_auto (GStrv) in_ns = ms_in_netns (bed->ns_master, argv);
  g_autoptr (TbProc) check = tb_spawn (d, "check", (const char *const *) in_ns);
  g_assert_cmpint (tb_wait (check, 400), ==, 1);
  g_autofree gchar *out = tb_proc_stdout (check);
  g_printerr ("%s", out);
  g_autofree gchar *cannot = g_strdup_printf ("FAIL compute nodes cannot reach the master "
                                              "directly: tcp://%s:",
                                              bed->master_addr);
  g_assert_nonnull (strstr (out, cannot));
  g_assert_true (
      g_regex_match_simple ("^c +probe \\(reach = relay\\) +ok ", out, G_REGEX_MULTILINE, 0));
  g_assert_nonnull (strstr (out, "recommended: set reach = relay in [site c]"));
}

static void
run_case (gconstpointer data)
{
  const Case *c = data;
  g_autoptr (GError) error = NULL;
  if (g_test_subprocess ())
    {
      g_autoptr (ClBed) bed = cl_bed_load (g_getenv ("DATC_CL_BED"), &error);
      g_assert_no_error (error);
      g_autoptr (TbDir) d = tb_dir_new ();
      c->body (bed, d);
      return;
    }
  int lock = -1;
  if (g_str_equal (c->scheduler, "sge"))
    g_assert_true (cl_sge_lock (600, &lock, &error));
  g_assert_no_error (error);
  g_autofree gchar *dir
      = g_strdup_printf ("/tmp/datc-cluster-%d-%s", (int) getpid (), c->scheduler);
  g_autoptr (ClBed) bed = cl_bed_up (dir, c->scheduler, &error);
  g_assert_no_error (error);
  g_setenv ("DATC_CL_BED", dir, TRUE);
  g_test_trap_subprocess (NULL, 600 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_INHERIT_STDERR);
  gboolean down = cl_bed_down (bed, &error);
  if (lock >= 0)
    close (lock);
  if (down && g_test_trap_has_passed () && g_getenv ("DATC_TEST_KEEP") == NULL)
    {
      const char *rm[] = { "rm", "-rf", "--", dir, NULL };
      g_spawn_sync (NULL, (gchar **) rm, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL,
                    NULL);
    }
  g_assert_no_error (error);
  g_test_trap_assert_passed ();
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  static const Case cases[] = {
    { "slurm", relay_campaign_completes },  { "slurm", direct_fails_naming_address },
    { "slurm", session_cut_mid_campaign },  { "slurm", link_down_mid_campaign },
    { "slurm", probe_recommends_relay },    { "sge", relay_campaign_completes },
    { "sge", direct_fails_naming_address }, { "sge", session_cut_mid_campaign },
  };
  static const char *const names[] = {
    "relay-campaign-completes",    "direct-fails-naming-address",        "session-cut-mid-campaign",
    "link-down-mid-campaign",      "sites-check-probe-recommends-relay", "relay-campaign-completes",
    "direct-fails-naming-address", "session-cut-mid-campaign",
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree gchar *path = g_strdup_printf ("/cluster/%s/%s", cases[i].scheduler, names[i]);
      g_test_add_data_func (path, &cases[i], run_case);
    }
  return g_test_run ();
}
