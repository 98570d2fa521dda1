/* test-slurm-real.c: the slurm scheduler against the real Slurm 22.05 of
 * tests/testbed/slurm-up.sh (one cluster of 8 CPUs for the whole
 * program), through the local transport.  Needs root; fails, never
 * skips, when the cluster cannot come up.
 *
 * The proxies' agents are small sh commands that write down what they
 * saw (DATC_SLOTS, DATC_WALLTIME_END, signals with their times) and wait.
 * Runtime is dominated by the walltime case: Slurm's limits are whole
 * minutes and slurmctld enforces them every 30 s, so a one-minute proxy
 * dies 60-90 s after it starts. */

#include "tests/real-batch.h"

#define SLURM "slurm"

/* squeue as root, straight: to see the competitor's job. */
static gchar *
competitor_submit (const char *what)
{
  const char *argv[] = { "runuser", "-u", "competitor", "--",     "sbatch", "--parsable", "-n",
                         "8",       "-o", "/dev/null",  "--wrap", what,     NULL };
  g_autofree gchar *out = run_command (argv, NULL);

  return g_strdup (g_strstrip (out));
}

static void
scancel_as_root (const char *id)
{
  const char *argv[] = { "scancel", id, NULL };
  g_free (run_command (argv, NULL));
}

/* A proxy waits behind a competitor holding every CPU, runs once the
 * competitor is cancelled, and its agent sees the slots and walltime end. */
static void
test_pending_behind_a_competitor_then_running (void)
{
  g_autofree gchar *competitor = competitor_submit ("sleep 600");
  check_pending_behind_a_competitor (SLURM, competitor, scancel_as_root, "SLURM_JOB_ID",
                                     "SLURM_CPUS_ON_NODE");
}

/* Cancel takes a running proxy away, its processes with it. */
static void
test_cancel_a_running_proxy (void)
{
  check_cancel_a_running_proxy (SLURM, "TERM", FALSE);
}

/* A submit whose answer was lost can be found by the proxy's name. */
/* A node excluded from a proxy request is not used (fast failures). */
static void
test_an_excluded_node_is_not_used (void)
{
  check_excluded_host_is_not_used (SLURM, "Requested node configuration is not available");
}

static void
test_lookup_finds_a_proxy_by_name (void)
{
  check_lookup_finds_a_proxy_by_name (SLURM);
}

static void
test_array_pending_cancel_two_then_one_runs (void)
{
  g_autofree gchar *competitor = competitor_submit ("sleep 600");
  await_state (SLURM, competitor, DATC_PROXY_RUNNING, 30);
  check_array_behind_a_competitor (SLURM, competitor, scancel_as_root);
}

/* A proxy that runs into its walltime gets USR1 first, then the kill. */
static void
test_walltime_warning_comes_before_the_kill (void)
{
  g_autofree gchar *sig_log = work_file ("signals-p4");
  g_autofree gchar *agent = signal_recording_agent (sig_log);
  g_autofree gchar *id = submit_proxy (SLURM, "datc-test-p4", 2, 60, agent);

  await_state (SLURM, id, DATC_PROXY_RUNNING, 30);
  g_autofree gchar *started = await_file (sig_log, 30);
  /* Slurm enforces the one-minute limit up to ~30 s late. */
  await_state (SLURM, id, DATC_PROXY_FINISHED, 150);

  g_autofree gchar *log = await_file (sig_log, 1);
  gint64 start = signal_time (log, "start");
  gint64 usr1 = signal_time (log, "USR1");
  gint64 term = signal_time (log, "TERM");
  guint slots = 0;
  gint64 end = 0;
  g_assert_cmpint (sscanf (log, "start %*d %u %" G_GINT64_FORMAT, &slots, &end), ==, 2);
  g_test_message ("agent's log (start %" G_GINT64_FORMAT "):\n%s", start, log);

  g_assert_cmpuint (slots, ==, 2);
  g_assert_cmpint (end, >=, start + 59);
  g_assert_cmpint (end, <=, start + 60);
  /* The warning came, before the kill's TERM, and before the walltime
   * end the agent was told. */
  g_assert_cmpint (usr1, >, 0);
  g_assert_cmpint (usr1, <=, end);
  if (term > 0)
    g_assert_cmpint (usr1, <, term);
  g_assert_cmpint (term, >=, end);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  /* Up before any test (and before any thread: it sets SLURM_CONF). */
  bed_up ("slurm", NULL);

  g_test_add_func ("/site/slurm-real/pending-behind-a-competitor-then-running",
                   test_pending_behind_a_competitor_then_running);
  g_test_add_func ("/site/slurm-real/cancel-a-running-proxy", test_cancel_a_running_proxy);
  g_test_add_func ("/site/slurm-real/an-excluded-node-is-not-used",
                   test_an_excluded_node_is_not_used);
  g_test_add_func ("/site/slurm-real/lookup-finds-a-proxy-by-name",
                   test_lookup_finds_a_proxy_by_name);
  g_test_add_func ("/site/slurm-real/array-pending-cancel-two-then-one-runs",
                   test_array_pending_cancel_two_then_one_runs);
  g_test_add_func ("/site/slurm-real/walltime-warning-comes-before-the-kill",
                   test_walltime_warning_comes_before_the_kill);

  int status = g_test_run ();
  bed_down (status != 0);
  return status;
}
