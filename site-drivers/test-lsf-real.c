/* test-lsf-real.c: the lsf scheduler against the real volclava 2.2
 * (LSF-compatible) of tests/testbed/lsf-up.sh (one host with 8 job slots
 * for the whole program), through the local transport, as root (the bed
 * sets LSF_ROOT_REX=local).  Needs root; fails, never skips, when the
 * cluster cannot come up.
 *
 * The proxies' agents are small sh commands that write down what they
 * saw and wait.  The walltime case dominates the runtime: -W is whole
 * minutes, so a one-minute proxy runs a minute before LSF kills it. */

#include "tests/real-batch.h"

#define LSF "lsf"

/* A job of the user `competitor` holding all 8 slots. */
static gchar *
competitor_submit (const char *what)
{
  const char *argv[] = { "runuser", "-u",        "competitor", "--", "bsub", "-n", "8",
                         "-o",      "/dev/null", "sh",         "-c", what,   NULL };
  g_autofree gchar *out = run_command (argv, NULL);
  g_autoptr (GRegex) submitted
      = g_regex_new ("^Job <([0-9]+)> is submitted", G_REGEX_MULTILINE, 0, NULL);
  g_autoptr (GMatchInfo) match = NULL;

  if (!g_regex_match (submitted, out, 0, &match))
    g_error ("the competitor's bsub said: %s", out);
  return g_match_info_fetch (match, 1);
}

static void
bkill_as_root (const char *id)
{
  const char *argv[] = { "bkill", id, NULL };
  g_free (run_command (argv, NULL));
}

/* A proxy waits behind a competitor holding every slot, runs once the
 * competitor is killed, and its agent sees the slots and walltime end. */
static void
test_pending_behind_a_competitor_then_running (void)
{
  g_autofree gchar *competitor = competitor_submit ("sleep 600");
  /* volclava sets no LSB_DJOB_NUMPROC: DATC_SLOTS falls back to the request. */
  check_pending_behind_a_competitor (LSF, competitor, bkill_as_root, "LSB_JOBID", NULL);
}

/* Cancel takes a running proxy away, its processes with it; the poll
 * says finished (bkill's exit code 130), not failed. */
static void
test_cancel_a_running_proxy (void)
{
  check_cancel_a_running_proxy (LSF, NULL, FALSE);
}

/* An agent that exits 3 on its own: FAILED, read from bjobs -l's exit
 * code. */
static void
test_an_agent_failing_is_failed (void)
{
  g_autofree gchar *agent = agent_sh ("exit 3");
  g_autofree gchar *id = submit_proxy (LSF, "datc-test-p5", 1, 0, agent);

  await_state (LSF, id, DATC_PROXY_FAILED, 30);
}

/* A submit whose answer was lost can be found by the proxy's name. */
/* A node excluded from a proxy request is not used (fast failures). */
static void
test_an_excluded_node_is_not_used (void)
{
  check_excluded_host_is_not_used (LSF, NULL);
}

static void
test_lookup_finds_a_proxy_by_name (void)
{
  check_lookup_finds_a_proxy_by_name (LSF);
}

/* What `datc sites check` asks: the queue the bed has, and one it has
 * not, in the daemon's own words. */
static void
test_queue_query_finds_normal_and_not_nosuch (void)
{
  const char *queues[] = { "normal", "nosuch" };

  for (gsize i = 0; i < G_N_ELEMENTS (queues); i++)
    {
      gboolean exists = FALSE;
      g_autofree gchar *answer = NULL;
      g_autoptr (GError) error = NULL;

      g_assert_true (datc_site_query_queue (bed_site (LSF), queues[i], &exists, &answer, &error));
      g_assert_no_error (error);
      g_test_message ("%s: %s", queues[i], answer);
      g_assert_true (exists == (i == 0));
      g_assert_nonnull (strstr (answer, i == 0 ? "normal: Open:Active" : "No such queue"));
    }
}

static void
test_array_pending_cancel_two_then_one_runs (void)
{
  g_autofree gchar *competitor = competitor_submit ("sleep 600");
  await_state (LSF, competitor, DATC_PROXY_RUNNING, 30);
  check_array_behind_a_competitor (LSF, competitor, bkill_as_root);
}

/* A one-minute proxy gets SIGUSR2 at its run limit (-W 1; no advance
 * warning) and drains: its agent exits, and the proxy ends finished.
 * volclava does not kill a job that outlives the SIGUSR2 (seen for more
 * than 100 s), so the agent here exits on it as datc-agent does. */
static void
test_run_limit_signals_usr2_and_the_agent_drains (void)
{
  g_autofree gchar *sig_log = work_file ("signals-p4");
  g_autofree gchar *q = g_shell_quote (sig_log);
  g_autofree gchar *script
      = g_strdup_printf ("trap \"echo USR2 \\$(date +%%s) >>%s; exit 0\" USR2; "
                         "echo \"start $(date +%%s) $DATC_SLOTS ${DATC_WALLTIME_END:-0} $$\" >>%s; "
                         "while :; do sleep 1 & wait $!; done",
                         q, q);
  g_autofree gchar *agent = agent_sh (script);
  g_autofree gchar *id = submit_proxy (LSF, "datc-test-p4", 2, 60, agent);

  await_state (LSF, id, DATC_PROXY_RUNNING, 30);
  g_autofree gchar *started = await_file (sig_log, 30);
  await_state (LSF, id, DATC_PROXY_FINISHED, 150);

  g_autofree gchar *log = await_file (sig_log, 1);
  gint64 start = signal_time (log, "start");
  gint64 usr2 = signal_time (log, "USR2");
  guint slots = 0;
  gint64 end = 0;
  g_assert_cmpint (sscanf (log, "start %*d %u %" G_GINT64_FORMAT, &slots, &end), ==, 2);
  g_test_message ("agent's log (start %" G_GINT64_FORMAT "):\n%s", start, log);

  g_assert_cmpuint (slots, ==, 2);
  g_assert_cmpint (end, >=, start + 59);
  g_assert_cmpint (end, <=, start + 60);
  g_assert_cmpint (usr2, >=, end - 5);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  /* Up before any test (and before any thread: it sets LSF_ENVDIR and
   * LSB_NTRIES, and PATH gets LSF_BINDIR). */
  bed_up ("lsf", NULL);
  g_autofree gchar *path = g_strconcat (g_getenv ("LSF_BINDIR"), ":", g_getenv ("PATH"), NULL);
  g_setenv ("PATH", path, TRUE);

  g_test_add_func ("/site/lsf-real/pending-behind-a-competitor-then-running",
                   test_pending_behind_a_competitor_then_running);
  g_test_add_func ("/site/lsf-real/cancel-a-running-proxy", test_cancel_a_running_proxy);
  g_test_add_func ("/site/lsf-real/an-agent-failing-is-failed", test_an_agent_failing_is_failed);
  g_test_add_func ("/site/lsf-real/an-excluded-node-is-not-used",
                   test_an_excluded_node_is_not_used);
  g_test_add_func ("/site/lsf-real/lookup-finds-a-proxy-by-name",
                   test_lookup_finds_a_proxy_by_name);
  g_test_add_func ("/site/lsf-real/queue-query-finds-normal-and-not-nosuch",
                   test_queue_query_finds_normal_and_not_nosuch);
  g_test_add_func ("/site/lsf-real/array-pending-cancel-two-then-one-runs",
                   test_array_pending_cancel_two_then_one_runs);
  g_test_add_func ("/site/lsf-real/run-limit-signals-usr2-and-the-agent-drains",
                   test_run_limit_signals_usr2_and_the_agent_drains);

  int status = g_test_run ();
  bed_down (status != 0);
  return status;
}
