/* real-batch.h: what test-{slurm,sge,pbs,lsf}-real.c share (the bed, and the
 * cases whose shape is the same on every scheduler).  Included by one
 * test program each.
 *
 *  - The test bed: brought up once per program by tests/testbed/NAME-up.sh
 *    (path from DATC_TESTBED, set by meson) in a directory of its own,
 *    and down by NAME-down.sh at the end, also when an assertion aborts
 *    (a SIGABRT/SIGSEGV/SIGTRAP handler forks the down script, which is what a
 *    handler may do).  Not root, no DATC_TESTBED, or a bed that does not
 *    come up: the program fails, loudly, and never skips.
 *  - The program is the subreaper of what the up script starts (the
 *    daemons daemonize, and nothing here reaps orphans), so it reaps them
 *    after the down script has stopped them, between tests, never while a
 *    GSubprocess may be waiting for its own child.
 *  - Waiting is polling a condition with a deadline. */
#pragma once

#include "drivers-private.h"

#include <glib/gstdio.h>

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  gchar *testbed; /* tests/testbed */
  gchar *dir;     /* the bed's own state directory */
  gchar *work;    /* proxies' workdir */
  gchar *down;    /* NAME-down.sh */
  DatcSite *site;
} RealBed;

static RealBed bed;

/* For the crash handler: argv of the down script, built before. */
static char *crash_down_argv[4];

static void
bring_down_on_crash (int sig)
{
  pid_t pid = fork ();

  if (pid == 0)
    {
      execv (crash_down_argv[0], crash_down_argv);
      _exit (127);
    }
  if (pid > 0)
    (void) waitpid (pid, NULL, 0);
  signal (sig, SIG_DFL);
  raise (sig);
}

/* Reaps every child that has ended (daemons and job steps reparented to
 * us); only called when no GSubprocess is running. */
static void
reap_orphans (void)
{
  while (waitpid (-1, NULL, WNOHANG) > 0)
    ;
}

/* Runs argv (no shell) with the test's environment; returns its stdout,
 * fails the test if it cannot run or exits non-zero (unless `status` is
 * given, then it gets the exit status). */
static gchar *
run_command (const char *const *argv, gint *status)
{
  g_autoptr (GError) error = NULL;
  gchar *out = NULL;
  g_autofree gchar *err = NULL;
  gint wait_status = 0;

  if (!g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err,
                     &wait_status, &error))
    g_error ("cannot run %s: %s", argv[0], error->message);
  if (status != NULL)
    {
      *status = WIFEXITED (wait_status) ? WEXITSTATUS (wait_status) : 128 + WTERMSIG (wait_status);
      return out;
    }
  if (!g_spawn_check_wait_status (wait_status, &error))
    {
      g_autofree gchar *line = g_strjoinv (" ", (gchar **) argv);
      g_error ("%s failed (%s): %s%s", line, error->message, out, err);
    }
  return out;
}

/* Brings the bed up: NAME-up.sh [extra...] DIR; each "KEY=VALUE" line it
 * prints goes into the environment (before any thread exists). */
static void
bed_up (const char *name, const char *const *extra)
{
  const char *testbed = g_getenv ("DATC_TESTBED");

  if (getuid () != 0)
    g_error ("the %s test bed needs root (daemons, munge/sgeadmin users, runuser)", name);
  if (testbed == NULL)
    g_error ("DATC_TESTBED is not set: run through meson test, or set it to tests/testbed");

  bed.testbed = g_strdup (testbed);
  bed.dir = g_strdup_printf ("/tmp/datc-test-%s-%d", name, (int) getpid ());
  bed.work = g_build_filename (bed.dir, "work", NULL);
  bed.down = g_strdup_printf ("%s/%s-down.sh", testbed, name);
  crash_down_argv[0] = (char *) "/bin/bash";
  crash_down_argv[1] = bed.down;
  crash_down_argv[2] = bed.dir;
  crash_down_argv[3] = NULL;

  (void) prctl (PR_SET_CHILD_SUBREAPER, 1);
  signal (SIGABRT, bring_down_on_crash);
  signal (SIGSEGV, bring_down_on_crash);
  /* g_error() ends with SIGTRAP, not SIGABRT. */
  signal (SIGTRAP, bring_down_on_crash);

  g_autofree gchar *up = g_strdup_printf ("%s/%s-up.sh", testbed, name);
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_ptr_array_add (argv, (gpointer) "/bin/bash");
  g_ptr_array_add (argv, up);
  for (gsize i = 0; extra != NULL && extra[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) extra[i]);
  g_ptr_array_add (argv, bed.dir);
  g_ptr_array_add (argv, NULL);

  gint64 start = g_get_monotonic_time ();
  gint status = 0;
  g_autofree gchar *out = run_command ((const char *const *) argv->pdata, &status);
  if (status != 0)
    g_error ("%s did not bring the %s test bed up (exit %d); see above and %s", up, name, status,
             bed.dir);
  g_test_message ("%s test bed up in %.1f s", name,
                  (double) (g_get_monotonic_time () - start) / G_USEC_PER_SEC);

  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  for (gsize i = 0; lines[i] != NULL; i++)
    {
      gchar *eq = strchr (lines[i], '=');
      if (eq == NULL)
        continue;
      *eq = '\0';
      g_setenv (lines[i], eq + 1, TRUE);
    }

  g_assert_cmpint (g_mkdir_with_parents (bed.work, 0755), ==, 0);
  g_assert_cmpint (chmod (bed.work, 0755), ==, 0);
}

/* Stops the bed; removes its directory too unless `keep` (a failed run,
 * or DATC_TEST_KEEP=1, as the other tests do). */
static void
bed_down (gboolean keep)
{
  const char *argv[] = { "/bin/bash", bed.down, bed.dir, NULL };
  gint64 start = g_get_monotonic_time ();
  gint status = 0;
  g_autofree gchar *out = NULL;

  datc_site_free (g_steal_pointer (&bed.site));
  out = run_command (argv, &status);
  reap_orphans ();
  g_test_message ("test bed down in %.1f s (exit %d)",
                  (double) (g_get_monotonic_time () - start) / G_USEC_PER_SEC, status);
  signal (SIGABRT, SIG_DFL);
  signal (SIGSEGV, SIG_DFL);
  signal (SIGTRAP, SIG_DFL);
  if (status != 0)
    g_printerr ("%s %s failed with status %d\n", bed.down, bed.dir, status);
  if (keep || status != 0 || g_getenv ("DATC_TEST_KEEP") != NULL)
    g_printerr ("test bed state and logs kept in %s\n", bed.dir);
  else
    {
      const char *rm[] = { "rm", "-rf", "--", bed.dir, NULL };
      g_free (run_command (rm, NULL));
    }
}

static DatcSite *
bed_site (const char *scheduler)
{
  if (bed.site == NULL)
    {
      g_autoptr (GError) error = NULL;
      bed.site = datc_site_new ("testbed", "local", scheduler, NULL, NULL, &error);
      g_assert_no_error (error);
    }
  return bed.site;
}

static gchar *
work_file (const char *name)
{
  return g_build_filename (bed.work, name, NULL);
}

/* ---- proxies ------------------------------------------------------------ */

/* An agent command: `sh -c SCRIPT`, quoted for the script's exec line. */
static gchar *
agent_sh (const char *script)
{
  g_autofree gchar *quoted = g_shell_quote (script);
  return g_strdup_printf ("/bin/sh -c %s", quoted);
}

static gchar *
submit_proxy (const char *scheduler, const char *name, guint slots, guint walltime_s,
              const char *agent_command)
{
  DatcProxyRequest req = {
    .name = name,
    .slots = slots,
    .walltime_s = walltime_s,
    .workdir = bed.work,
    .agent_command = agent_command,
  };
  g_autofree gchar *script = g_strconcat (name, ".sh", NULL);
  g_autoptr (GError) error = NULL;
  gchar *id = NULL;

  g_assert_true (datc_site_submit (bed_site (scheduler), &req, script, &id, &error));
  g_assert_no_error (error);
  g_test_message ("submitted %s as job %s", name, id);
  return id;
}

static DatcProxyState
poll_one (const char *scheduler, const char *id)
{
  const char *ids[] = { id, NULL };
  DatcProxyState state = DATC_PROXY_UNKNOWN;
  g_autoptr (GError) error = NULL;

  g_assert_true (datc_site_poll (bed_site (scheduler), ids, &state, &error));
  g_assert_no_error (error);
  return state;
}

/* Polls through the site until `id` is `want`; fails after timeout_s. */
static void
await_state (const char *scheduler, const char *id, DatcProxyState want, guint timeout_s)
{
  gint64 start = g_get_monotonic_time ();
  gint64 deadline = start + (gint64) timeout_s * G_USEC_PER_SEC;
  DatcProxyState state;

  while ((state = poll_one (scheduler, id)) != want)
    {
      reap_orphans ();
      if (g_get_monotonic_time () > deadline)
        g_error ("job %s is still %s after %u s, not %s", id, datc_proxy_state_name (state),
                 timeout_s, datc_proxy_state_name (want));
      g_usleep (200 * 1000);
    }
  g_test_message ("job %s %s after %.1f s", id, datc_proxy_state_name (want),
                  (double) (g_get_monotonic_time () - start) / G_USEC_PER_SEC);
}

/* Polls for `seconds` and asserts the state never leaves `want`. */
static void
assert_stays (const char *scheduler, const char *id, DatcProxyState want, guint seconds)
{
  gint64 end = g_get_monotonic_time () + (gint64) seconds * G_USEC_PER_SEC;

  do
    {
      g_assert_cmpstr (datc_proxy_state_name (poll_one (scheduler, id)), ==,
                       datc_proxy_state_name (want));
      g_usleep (250 * 1000);
    }
  while (g_get_monotonic_time () < end);
}

/* The contents of `path` once it exists (agents write files by rename). */
static gchar *
await_file (const char *path, guint timeout_s)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_s * G_USEC_PER_SEC;
  gchar *text = NULL;

  while (!g_file_get_contents (path, &text, NULL, NULL))
    {
      if (g_get_monotonic_time () > deadline)
        g_error ("%s did not appear within %u s", path, timeout_s);
      g_usleep (100 * 1000);
    }
  return text;
}

static void
touch (const char *path)
{
  g_assert_true (g_file_set_contents (path, "", 0, NULL));
}

/* Whether `pid` is gone (or a zombie nobody reaped yet). */
static gboolean
pid_gone (pid_t pid)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/stat", (int) pid);
  g_autofree gchar *stat = NULL;

  if (kill (pid, 0) != 0 && errno == ESRCH)
    return TRUE;
  if (!g_file_get_contents (path, &stat, NULL, NULL))
    return TRUE;
  const char *paren = strrchr (stat, ')');
  return paren != NULL && (paren[2] == 'Z' || paren[2] == 'X');
}

static void
await_pid_gone (pid_t pid, guint timeout_s)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_s * G_USEC_PER_SEC;

  while (!pid_gone (pid))
    {
      reap_orphans ();
      if (g_get_monotonic_time () > deadline)
        g_error ("process %d still there after %u s", (int) pid, timeout_s);
      g_usleep (100 * 1000);
    }
}

/* The signals the signal-recording agent saw: lines "WORD SECONDS". */
static gint64
signal_time (const char *log, const char *word)
{
  g_auto (GStrv) lines = g_strsplit (log, "\n", -1);

  for (gsize i = 0; lines[i] != NULL; i++)
    {
      g_auto (GStrv) words = g_strsplit (lines[i], " ", -1);
      if (words[0] != NULL && strcmp (words[0], word) == 0 && words[1] != NULL)
        return g_ascii_strtoll (words[1], NULL, 10);
    }
  return -1;
}

/* An agent that writes "start NOW DATC_SLOTS DATC_WALLTIME_END PID" to
 * `log`, then one line "SIG NOW" per USR1, USR2 or TERM it gets, and
 * waits for ever (until KILL).  The batch shell is this sh itself (the
 * script execs it), so signals meant for the batch shell reach it. */
static gchar *
signal_recording_agent (const char *log)
{
  g_autofree gchar *q = g_shell_quote (log);
  g_autofree gchar *script = g_strdup_printf (
      "for s in USR1 USR2 TERM; do trap \"echo $s \\$(date +%%s) >>%s\" $s; done; "
      "echo \"start $(date +%%s) $DATC_SLOTS ${DATC_WALLTIME_END:-0} $$\" >>%s; "
      "while :; do sleep 1 & wait $!; done",
      q, q);
  return agent_sh (script);
}

/* ---- arrays ------------------------------------------------------------- */

/* An array of 3 proxies submitted behind a competitor that holds the whole
 * cluster (its job `competitor`, let go by `release_competitor`): one poll
 * sees the 3 elements pending, one cancel takes elements 2 and 3 away, the
 * next poll has them gone while 1 still waits, a lookup by the array's name
 * finds the same 3 ids, and once the competitor is gone element 1 runs with
 * its own proxy name (the agent command's --proxy NAME-"$DATC_ARRAY_INDEX",
 * as the site manager writes it). */
static void
check_array_behind_a_competitor (const char *scheduler, const char *competitor,
                                 void (*release_competitor) (const char *id))
{
  g_autofree gchar *seen = work_file ("array-a1");
  g_autofree gchar *release = work_file ("release-a1");
  g_autofree gchar *qseen = g_shell_quote (seen);
  g_autofree gchar *qrelease = g_shell_quote (release);
  /* $1 $2 are the agent's --proxy NAME: what it would say HELLO with. */
  g_autofree gchar *script
      = g_strdup_printf ("echo \"$1 $2\" >%s.$DATC_ARRAY_INDEX.tmp && mv %s.$DATC_ARRAY_INDEX.tmp "
                         "%s.$DATC_ARRAY_INDEX; while [ ! -e %s ]; do sleep 0.2; done",
                         qseen, qseen, qseen, qrelease);
  g_autofree gchar *quoted = g_shell_quote (script);
  g_autofree gchar *agent = g_strdup_printf (
      "/bin/sh -c %s datc-agent --proxy datc-test-a1-\"$DATC_ARRAY_INDEX\"", quoted);
  DatcProxyRequest req = {
    .name = "datc-test-a1",
    .slots = 1,
    .walltime_s = 600,
    .workdir = bed.work,
    .agent_command = agent,
  };
  g_auto (GStrv) ids = NULL;
  g_auto (GStrv) found = NULL;
  g_autoptr (GError) error = NULL;
  DatcProxyState states[3];

  g_assert_true (datc_site_scheduler_has_arrays (bed_site (scheduler)));
  g_assert_true (
      datc_site_submit_array (bed_site (scheduler), &req, 3, "datc-test-a1.sh", &ids, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (g_strv_length (ids), ==, 3);
  g_test_message ("submitted array datc-test-a1 as %s %s %s", ids[0], ids[1], ids[2]);

  g_assert_true (datc_site_poll (bed_site (scheduler), (const char *const *) ids, states, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < 3; i++)
    g_assert_cmpstr (datc_proxy_state_name (states[i]), ==, "pending");
  assert_stays (scheduler, ids[0], DATC_PROXY_PENDING, 2);

  const char *two[] = { ids[1], ids[2], NULL };
  g_assert_true (datc_site_cancel (bed_site (scheduler), two, &error));
  g_assert_no_error (error);
  g_assert_true (datc_site_poll (bed_site (scheduler), (const char *const *) ids, states, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (datc_proxy_state_name (states[0]), ==, "pending");
  g_assert_cmpstr (datc_proxy_state_name (states[1]), ==, "finished");
  g_assert_cmpstr (datc_proxy_state_name (states[2]), ==, "finished");

  /* A resume finds the array by its name. */
  g_assert_true (datc_site_lookup_array (bed_site (scheduler), "datc-test-a1", 3, &found, &error));
  g_assert_no_error (error);
  g_assert_cmpstrv (found, ids);
  g_auto (GStrv) nobody = NULL;
  g_assert_true (
      datc_site_lookup_array (bed_site (scheduler), "datc-test-nobody", 3, &nobody, &error));
  g_assert_no_error (error);
  g_assert_null (nobody);

  release_competitor (competitor);
  await_state (scheduler, ids[0], DATC_PROXY_RUNNING, 30);
  g_autofree gchar *seen1_path = g_strconcat (seen, ".1", NULL);
  g_autofree gchar *seen1 = await_file (seen1_path, 30);
  g_assert_cmpstr (g_strstrip (seen1), ==, "--proxy datc-test-a1-1");
  touch (release);
  await_state (scheduler, ids[0], DATC_PROXY_FINISHED, 30);
  for (guint i = 2; i <= 3; i++)
    {
      g_autofree gchar *never = g_strdup_printf ("%s.%u", seen, i);
      g_assert_false (g_file_test (never, G_FILE_TEST_EXISTS));
    }
}

/* A proxy waits behind `competitor` (a job holding every CPU, given time to
 * run here), runs once `release_competitor` takes it away, and its agent
 * sees its slots (`slots_var`, the scheduler's own count; NULL: it sets
 * none here), its walltime end and its job id (`id_var`); one poll answers
 * for several ids, one never known; its log is where the driver says. */
G_GNUC_UNUSED static void
check_pending_behind_a_competitor (const char *scheduler, const char *competitor,
                                   void (*release_competitor) (const char *id), const char *id_var,
                                   const char *slots_var)
{
  await_state (scheduler, competitor, DATC_PROXY_RUNNING, 30);

  g_autofree gchar *env_file = work_file ("env-p1");
  g_autofree gchar *release = work_file ("release-p1");
  g_autofree gchar *qenv = g_shell_quote (env_file);
  g_autofree gchar *qrelease = g_shell_quote (release);
  g_autofree gchar *slots = slots_var != NULL ? g_strdup_printf ("$%s", slots_var) : g_strdup ("-");
  g_autofree gchar *script
      = g_strdup_printf ("echo \"$DATC_SLOTS $DATC_WALLTIME_END $%s %s\" >%s.tmp && "
                         "mv %s.tmp %s; while [ ! -e %s ]; do sleep 0.2; done",
                         id_var, slots, qenv, qenv, qenv, qrelease);
  g_autofree gchar *agent = agent_sh (script);
  gint64 submitted = (gint64) time (NULL);
  g_autofree gchar *id = submit_proxy (scheduler, "datc-test-p1", 3, 3600, agent);

  g_assert_cmpint (poll_one (scheduler, id), ==, DATC_PROXY_PENDING);
  assert_stays (scheduler, id, DATC_PROXY_PENDING, 2);

  /* One poll for several ids, one of them never known. */
  const char *ids[] = { id, competitor, "999999", NULL };
  DatcProxyState states[3];
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_site_poll (bed_site (scheduler), ids, states, &error));
  g_assert_no_error (error);
  g_assert_cmpint (states[0], ==, DATC_PROXY_PENDING);
  g_assert_cmpint (states[1], ==, DATC_PROXY_RUNNING);
  g_assert_cmpint (states[2], ==, DATC_PROXY_FINISHED);

  release_competitor (competitor);
  await_state (scheduler, id, DATC_PROXY_RUNNING, 30);
  g_autofree gchar *env = await_file (env_file, 30);
  gint64 now = (gint64) time (NULL);
  g_auto (GStrv) words = g_strsplit (g_strstrip (env), " ", -1);
  g_test_message ("agent saw: %s", env);

  g_assert_cmpuint (g_strv_length (words), ==, 4);
  g_assert_cmpstr (words[0], ==, "3");
  if (slots_var != NULL)
    g_assert_cmpstr (words[3], ==, "3");
  g_assert_cmpstr (words[2], ==, id);
  gint64 end = g_ascii_strtoll (words[1], NULL, 10);
  g_assert_cmpint (end, >=, submitted + 3600);
  g_assert_cmpint (end, <=, now + 3600);

  touch (release);
  await_state (scheduler, id, DATC_PROXY_FINISHED, 30);
  /* Taken away by its scheduler's cancel: ended the way proxies end. */
  await_state (scheduler, competitor, DATC_PROXY_FINISHED, 30);

  g_auto (GStrv) logs
      = datc_scheduler_lookup (scheduler)->proxy_logs ("datc-test-p1", id, "datc-test-p1.sh");
  g_assert_nonnull (logs);
  g_autofree gchar *log = work_file (logs[0]);
  /* PBS copies it into place as the job ends. */
  g_autofree gchar *log_text = await_file (log, 30);
}

/* Cancel takes a running proxy away, its processes with it; the agent saw
 * `first_signal` ("TERM", "USR2"; NULL: not checked) first; cancelling
 * again, once it is gone, is fine.  `may_outlive`: in this bed the agent
 * may outlive its job (PBS: the MoM reports the task "force exited" at
 * once and never KILLs an agent that traps TERM): then it is killed by its
 * PID and the test is marked incomplete, not passed. */
static void
check_cancel_a_running_proxy (const char *scheduler, const char *first_signal, gboolean may_outlive)
{
  g_autofree gchar *sig_log = work_file ("signals-p2");
  g_autofree gchar *agent = signal_recording_agent (sig_log);
  g_autofree gchar *id = submit_proxy (scheduler, "datc-test-p2", 1, 0, agent);
  const char *ids[] = { id, NULL };
  g_autoptr (GError) error = NULL;

  await_state (scheduler, id, DATC_PROXY_RUNNING, 30);
  g_autofree gchar *started = await_file (sig_log, 30);
  pid_t pid = 0;
  g_assert_cmpint (sscanf (started, "start %*d %*u %*d %d", &pid), ==, 1);
  g_assert_cmpint (pid, >, 1);

  g_assert_true (datc_site_cancel (bed_site (scheduler), ids, &error));
  g_assert_no_error (error);
  await_state (scheduler, id, DATC_PROXY_FINISHED, 30);
  if (!may_outlive)
    await_pid_gone (pid, 30);
  else
    {
      gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
      while (!pid_gone (pid) && g_get_monotonic_time () < deadline)
        {
          reap_orphans ();
          g_usleep (100 * 1000);
        }
      if (!pid_gone (pid))
        {
          g_assert_cmpint (kill (pid, SIGKILL), ==, 0);
          await_pid_gone (pid, 10);
          g_test_incomplete ("the agent (TERM trapped) outlived its job after the cancel");
        }
    }

  /* Already gone: cancelling again is fine. */
  g_assert_true (datc_site_cancel (bed_site (scheduler), ids, &error));
  g_assert_no_error (error);

  if (first_signal == NULL)
    return;
  g_autofree gchar *log = await_file (sig_log, 1);
  g_test_message ("agent's log:\n%s", log);
  g_assert_cmpint (signal_time (log, first_signal), >, 0);
}

/* A submit whose answer was lost can be found by the proxy's name, and a
 * name no job has finds nothing. */
static void
check_lookup_finds_a_proxy_by_name (const char *scheduler)
{
  g_autofree gchar *release = work_file ("release-p3");
  g_autofree gchar *qrelease = g_shell_quote (release);
  g_autofree gchar *script = g_strdup_printf ("while [ ! -e %s ]; do sleep 0.2; done", qrelease);
  g_autofree gchar *agent = agent_sh (script);
  g_autofree gchar *id = submit_proxy (scheduler, "datc-test-p3", 1, 0, agent);
  const DatcSchedulerClass *klass = datc_scheduler_lookup (scheduler);
  const DatcTransportClass *local = datc_transport_lookup ("local");
  g_autoptr (GError) error = NULL;
  DatcTransport *t = local->open (NULL, NULL, &error);
  g_assert_no_error (error);

  const char *names[] = { "datc-test-p3", "datc-test-nobody" };
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_auto (GStrv) argv = klass->lookup_argv (names[i]);
      g_auto (DatcCommandResult) res = { 0 };
      g_autofree gchar *found = NULL;

      g_assert_true (local->run (t, (const char *const *) argv, NULL, DATC_SITE_COMMAND_TIMEOUT_MS,
                                 &res, &error));
      g_assert_no_error (error);
      g_assert_true (klass->parse_lookup (&res, &found, &error));
      g_assert_no_error (error);
      g_assert_cmpstr (found, ==, i == 0 ? id : NULL);
    }
  local->close (t);
  touch (release);
  await_state (scheduler, id, DATC_PROXY_FINISHED, 30);
}

/* The node a first proxy ran on, as the agent reports it (Slurm's node
 * name, else the host name), excluded from a second proxy on the bed's
 * only node: the scheduler understands the exclusion and never starts
 * that proxy there: it stays pending, or, where the scheduler refuses a
 * request no node can meet, the submit fails with `refusal` (Slurm:
 * "Requested node configuration is not available"; a name it did not
 * know would have been "Invalid node name").  Not PBS, which cannot
 * exclude a host. */
G_GNUC_UNUSED static void
check_excluded_host_is_not_used (const char *scheduler, const char *refusal)
{
  g_autofree gchar *host_file = work_file ("host-p5");
  g_autofree gchar *qhost = g_shell_quote (host_file);
  g_autofree gchar *script = g_strdup_printf (
      "echo \"${SLURMD_NODENAME:-$(hostname)}\" >%s.tmp && mv %s.tmp %s", qhost, qhost, qhost);
  g_autofree gchar *agent = agent_sh (script);
  g_autofree gchar *first = submit_proxy (scheduler, "datc-test-p5", 1, 0, agent);
  g_autofree gchar *host = await_file (host_file, 60);
  g_strstrip (host);
  g_test_message ("the node: %s", host);
  await_state (scheduler, first, DATC_PROXY_FINISHED, 30);

  const char *const exclude[] = { host, NULL };
  DatcProxyRequest req = {
    .name = "datc-test-p6",
    .slots = 1,
    .workdir = bed.work,
    .agent_command = agent,
    .exclude_hosts = exclude,
  };
  g_autoptr (GError) error = NULL;
  g_autofree gchar *id = NULL;
  gboolean submitted
      = datc_site_submit (bed_site (scheduler), &req, "datc-test-p6.sh", &id, &error);
  if (refusal != NULL)
    {
      g_assert_false (submitted);
      g_assert_nonnull (error);
      g_test_message ("refused: %s", error->message);
      g_assert_nonnull (strstr (error->message, refusal));
      return;
    }
  g_assert_no_error (error);
  g_assert_true (submitted);
  assert_stays (scheduler, id, DATC_PROXY_PENDING, 5);
  const char *ids[] = { id, NULL };
  g_assert_true (datc_site_cancel (bed_site (scheduler), ids, &error));
  g_assert_no_error (error);
  await_state (scheduler, id, DATC_PROXY_FINISHED, 30);
}
