/* test-sge-real.c: the sge scheduler against the real Son of Grid Engine
 * 8.1.9 of tests/testbed/sge-up.sh (queue all.q, 8 slots, PE smp, notify
 * time 5 s), through the local transport.  Needs root; fails, never
 * skips, when Grid Engine cannot come up (the one cell per host may be
 * busy with another test bed: sge-up.sh waits for it up to 3 minutes).
 *
 * The agents are small sh commands that write down what they saw and
 * wait.  Bringing Grid Engine down takes ~10 s (sge_qmaster's exit). */

#include "tests/real-batch.h"

#define SGE "sge"

static gchar *
competitor_submit (void)
{
  const char *argv[]
      = { "runuser",   "-u", "competitor", "--",  "qsub", "-terse", "-b",    "y",   "-o",
          "/dev/null", "-j", "y",          "-pe", "smp",  "8",      "sleep", "600", NULL };
  g_autofree gchar *out = run_command (argv, NULL);

  return g_strdup (g_strstrip (out));
}

/* The competitor's state letters, from a qstat that lists every user. */
static gchar *
state_of_any (const char *id)
{
  const char *argv[] = { "qstat", "-u", "*", NULL };
  g_autofree gchar *out = run_command (argv, NULL);
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);

  for (gsize i = 0; lines[i] != NULL; i++)
    {
      g_auto (GStrv) words = g_strsplit_set (g_strstrip (lines[i]), " ", -1);
      GPtrArray *kept = g_ptr_array_new ();
      for (gsize j = 0; words[j] != NULL; j++)
        if (words[j][0] != '\0')
          g_ptr_array_add (kept, words[j]);
      gboolean match = kept->len >= 5 && strcmp (g_ptr_array_index (kept, 0), id) == 0;
      gchar *state = match ? g_strdup (g_ptr_array_index (kept, 4)) : NULL;
      g_ptr_array_free (kept, TRUE);
      if (match)
        return state;
    }
  return g_strdup ("");
}

static void
await_any_state (const char *id, const char *want, guint timeout_s)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_s * G_USEC_PER_SEC;

  for (;;)
    {
      g_autofree gchar *state = state_of_any (id);
      if (strcmp (state, want) == 0)
        return;
      if (g_get_monotonic_time () > deadline)
        g_error ("job %s is '%s' after %u s, not '%s'", id, state, timeout_s, want);
      g_usleep (200 * 1000);
    }
}

static void
test_pending_behind_a_competitor_then_running (void)
{
  g_autofree gchar *competitor = competitor_submit ();
  await_any_state (competitor, "r", 30);

  g_autofree gchar *env_file = work_file ("env-p1");
  g_autofree gchar *release = work_file ("release-p1");
  g_autofree gchar *qenv = g_shell_quote (env_file);
  g_autofree gchar *qrelease = g_shell_quote (release);
  g_autofree gchar *script = g_strdup_printf (
      "echo \"$DATC_SLOTS $DATC_WALLTIME_END $JOB_ID $NSLOTS\" >%s.tmp && mv %s.tmp %s; "
      "while [ ! -e %s ]; do sleep 0.2; done",
      qenv, qenv, qenv, qrelease);
  g_autofree gchar *agent = agent_sh (script);
  gint64 submitted = (gint64) time (NULL);
  g_autofree gchar *id = submit_proxy (SGE, "datc-test-p1", 3, 3600, agent);

  g_assert_cmpint (poll_one (SGE, id), ==, DATC_PROXY_PENDING);
  /* The scheduler runs every second: it has had its chances. */
  assert_stays (SGE, id, DATC_PROXY_PENDING, 3);

  /* One poll for several ids: the competitor is not ours (finished as far
   * as our qstat knows), 99999 never was. */
  const char *ids[] = { id, "99999", NULL };
  DatcProxyState states[2];
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_site_poll (bed_site (SGE), ids, states, &error));
  g_assert_no_error (error);
  g_assert_cmpint (states[0], ==, DATC_PROXY_PENDING);
  g_assert_cmpint (states[1], ==, DATC_PROXY_FINISHED);

  const char *qdel[] = { "qdel", competitor, NULL };
  g_free (run_command (qdel, NULL));
  await_state (SGE, id, DATC_PROXY_RUNNING, 30);
  g_autofree gchar *env = await_file (env_file, 30);
  gint64 now = (gint64) time (NULL);
  g_auto (GStrv) words = g_strsplit (g_strstrip (env), " ", -1);

  g_assert_cmpuint (g_strv_length (words), ==, 4);
  g_assert_cmpstr (words[0], ==, "3");
  g_assert_cmpstr (words[3], ==, "3");
  g_assert_cmpstr (words[2], ==, id);
  gint64 end = g_ascii_strtoll (words[1], NULL, 10);
  g_assert_cmpint (end, >=, submitted + 3600);
  g_assert_cmpint (end, <=, now + 3600);

  touch (release);
  await_state (SGE, id, DATC_PROXY_FINISHED, 30);
  g_autofree gchar *log_name = g_strdup_printf ("datc-test-p1.%s.log", id);
  g_autofree gchar *log = work_file (log_name);
  g_assert_true (g_file_test (log, G_FILE_TEST_EXISTS));
}

/* qdel of a running proxy: SIGUSR2 first (-notify), the kill after the
 * queue's notify time, and then it is gone. */
static void
test_cancel_a_running_proxy (void)
{
  check_cancel_a_running_proxy (SGE, "USR2", FALSE);
}

/* A node excluded from a proxy request is not used (fast failures). */
static void
test_an_excluded_node_is_not_used (void)
{
  check_excluded_host_is_not_used (SGE, NULL);
}

static void
test_lookup_finds_a_proxy_by_name (void)
{
  check_lookup_finds_a_proxy_by_name (SGE);
}

static void
qdel_as_root (const char *id)
{
  const char *argv[] = { "qdel", id, NULL };
  g_free (run_command (argv, NULL));
}

static void
test_array_pending_cancel_two_then_one_runs (void)
{
  g_autofree gchar *competitor = competitor_submit ();
  await_any_state (competitor, "r", 30);
  check_array_behind_a_competitor (SGE, competitor, qdel_as_root);
}

/* h_rt with -notify: SIGUSR2 at the walltime, SIGKILL the notify time
 * (5 s here) later. */
static void
test_walltime_warning_comes_before_the_kill (void)
{
  g_autofree gchar *sig_log = work_file ("signals-p4");
  g_autofree gchar *agent = signal_recording_agent (sig_log);
  g_autofree gchar *id = submit_proxy (SGE, "datc-test-p4", 2, 15, agent);

  await_state (SGE, id, DATC_PROXY_RUNNING, 30);
  g_autofree gchar *started = await_file (sig_log, 30);
  await_state (SGE, id, DATC_PROXY_FINISHED, 60);
  gint64 gone = (gint64) time (NULL);

  g_autofree gchar *log = await_file (sig_log, 1);
  gint64 start = signal_time (log, "start");
  gint64 usr2 = signal_time (log, "USR2");
  guint slots = 0;
  gint64 end = 0;
  g_assert_cmpint (sscanf (log, "start %*d %u %" G_GINT64_FORMAT, &slots, &end), ==, 2);
  g_test_message ("agent's log (gone from qstat at %" G_GINT64_FORMAT "):\n%s", gone, log);

  g_assert_cmpuint (slots, ==, 2);
  g_assert_cmpint (end, >=, start + 14);
  g_assert_cmpint (end, <=, start + 15);
  g_assert_cmpint (usr2, >, 0);
  /* The warning comes at the limit, the kill a notify time later. */
  g_assert_cmpint (usr2, >=, end - 2);
  g_assert_cmpint (usr2, <, gone);
  g_assert_cmpint (signal_time (log, "TERM"), ==, -1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  const char *wait_for_the_cell[] = { "--wait", "180", NULL };
  bed_up ("sge", wait_for_the_cell);

  g_test_add_func ("/site/sge-real/pending-behind-a-competitor-then-running",
                   test_pending_behind_a_competitor_then_running);
  g_test_add_func ("/site/sge-real/cancel-a-running-proxy", test_cancel_a_running_proxy);
  g_test_add_func ("/site/sge-real/an-excluded-node-is-not-used",
                   test_an_excluded_node_is_not_used);
  g_test_add_func ("/site/sge-real/lookup-finds-a-proxy-by-name",
                   test_lookup_finds_a_proxy_by_name);
  g_test_add_func ("/site/sge-real/array-pending-cancel-two-then-one-runs",
                   test_array_pending_cancel_two_then_one_runs);
  g_test_add_func ("/site/sge-real/walltime-warning-comes-before-the-kill",
                   test_walltime_warning_comes_before_the_kill);

  int status = g_test_run ();
  bed_down (status != 0);
  return status;
}
