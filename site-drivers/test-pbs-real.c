/* test-pbs-real.c: the pbs scheduler against the real OpenPBS 23.06 of
 * tests/testbed/pbs-up.sh (one server, one node of 8 ncpus, job history
 * on, for the whole program), through the local transport and the bed's
 * client wrappers (first on PATH: they run each command in the bed's
 * network namespace).  Needs root; fails, never skips, when the cluster
 * cannot come up (the first run on a machine builds OpenPBS, minutes).
 *
 * Jobs run as root (the bed sets acl_roots).  PBS has no warning before
 * the walltime, so there is no walltime case here: the recorded answers
 * (tests/data/pbs/live-poll-walltime.txt) cover its Exit_status. */

#include "tests/real-batch.h"

#define PBS "pbs"

/* A job holding all 8 ncpus, through the wrapper qsub on PATH. */
static gchar *
competitor_submit (void)
{
  const char *argv[] = { "qsub",       "-N",        "competitor", "-l", "select=1:ncpus=8",
                         "-o",         "/dev/null", "-j",         "oe", "--",
                         "/bin/sleep", "600",       NULL };
  g_autofree gchar *out = run_command (argv, NULL);

  return g_strdup (g_strstrip (out));
}

static void
qdel_as_root (const char *id)
{
  const char *argv[] = { "qdel", id, NULL };
  g_free (run_command (argv, NULL));
}

/* A proxy waits behind a competitor holding every CPU, runs once the
 * competitor is deleted, and its agent sees the slots and walltime end. */
static void
test_pending_behind_a_competitor_then_running (void)
{
  g_autofree gchar *competitor = competitor_submit ();
  check_pending_behind_a_competitor (PBS, competitor, qdel_as_root, "PBS_JOBID", "NCPUS");
}

/* A proxy whose agent exits 3 failed; one that exits 0 finished. */
static void
test_exit_status_decides_failed_or_finished (void)
{
  g_autofree gchar *fail_agent = agent_sh ("exit 3");
  g_autofree gchar *ok_agent = agent_sh ("exit 0");
  g_autofree gchar *failed = submit_proxy (PBS, "datc-test-x3", 1, 0, fail_agent);
  g_autofree gchar *ok = submit_proxy (PBS, "datc-test-x0", 1, 0, ok_agent);

  await_state (PBS, failed, DATC_PROXY_FAILED, 30);
  await_state (PBS, ok, DATC_PROXY_FINISHED, 30);
}

/* Cancel takes a running proxy away, its processes with it. */
static void
test_cancel_a_running_proxy (void)
{
  check_cancel_a_running_proxy (PBS, "TERM", TRUE);
}

/* A submit whose answer was lost can be found by the proxy's name. */
static void
test_lookup_finds_a_proxy_by_name (void)
{
  check_lookup_finds_a_proxy_by_name (PBS);
}

static void
test_array_pending_cancel_two_then_one_runs (void)
{
  g_autofree gchar *competitor = competitor_submit ();
  await_state (PBS, competitor, DATC_PROXY_RUNNING, 30);
  check_array_behind_a_competitor (PBS, competitor, qdel_as_root);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  /* Up before any test (and before any thread: it sets PATH). */
  bed_up ("pbs", NULL);

  g_test_add_func ("/site/pbs-real/pending-behind-a-competitor-then-running",
                   test_pending_behind_a_competitor_then_running);
  g_test_add_func ("/site/pbs-real/exit-status-decides-failed-or-finished",
                   test_exit_status_decides_failed_or_finished);
  g_test_add_func ("/site/pbs-real/cancel-a-running-proxy", test_cancel_a_running_proxy);
  g_test_add_func ("/site/pbs-real/lookup-finds-a-proxy-by-name",
                   test_lookup_finds_a_proxy_by_name);
  g_test_add_func ("/site/pbs-real/array-pending-cancel-two-then-one-runs",
                   test_array_pending_cancel_two_then_one_runs);

  int status = g_test_run ();
  bed_down (status != 0);
  return status;
}
