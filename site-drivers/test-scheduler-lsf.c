/* test-scheduler-lsf.c: the lsf scheduler, without a cluster: builders,
 * the script run with sh, and the parsers on every recorded answer
 * (tests/data/lsf: live-*.txt recorded from volclava 2.2 by
 * tests/testbed/capture-lsf.sh, the others transcribed from the IBM
 * Spectrum LSF documentation, each file naming its source), directly and
 * through a local site with stubs.  test-lsf-real.c runs the driver
 * against the live daemons. */

#include "scheduler-batch.h"
#include "tests/recorded.h"

#include <string.h>

static const DatcSchedulerClass *
lsf (void)
{
  const DatcSchedulerClass *klass = datc_scheduler_lookup ("lsf");

  g_assert_nonnull (klass);
  return klass;
}

static const DatcProxyRequest base_request = {
  .name = "datc-c42-p7",
  .slots = 16,
  .walltime_s = 7201,
  .queue = "normal",
  .workdir = "/scratch/datc",
  .agent_command = "/opt/datc/bin/datc-agent --connect tcp://10.1.2.3:5555",
};

static void
test_script_directives (void)
{
  g_autofree gchar *script = lsf ()->script (&base_request);

  g_assert_true (g_str_has_prefix (script, "#!/bin/sh\n#BSUB -J datc-c42-p7\n"));
  g_assert_nonnull (strstr (script, "#BSUB -n 16\n#BSUB -R \"span[hosts=1]\"\n"));
  g_assert_nonnull (strstr (script, "#BSUB -o datc-c42-p7.%J.log\n"));
  g_assert_nonnull (strstr (script, "#BSUB -W 121\n"));
  /* volclava's bsub reads -wa USR1 as -w a: a dependency never met. */
  g_assert_null (strstr (script, "-wa"));
  g_assert_null (strstr (script, "-wt"));
  g_assert_nonnull (strstr (script, "#BSUB -q normal\n"));
  g_assert_nonnull (strstr (script, "DATC_SLOTS=${LSB_DJOB_NUMPROC:-}\n"));
  g_assert_true (g_strrstr (script, "#BSUB") < strstr (script, "\nDATC_SLOTS="));

  DatcProxyRequest req = base_request;
  req.walltime_s = 60;
  g_autofree gchar *short_one = lsf ()->script (&req);
  g_assert_nonnull (strstr (short_one, "#BSUB -W 1\n"));
  g_assert_null (strstr (short_one, "-wa"));
}

static void
test_script_gives_the_agent_what_lsf_granted (void)
{
  DatcProxyRequest req = base_request;
  req.agent_command = SHOW_AGENT_ENV;
  g_autofree gchar *script = lsf ()->script (&req);
  const char *granted[] = { "LSB_DJOB_NUMPROC=8", NULL };

  check_script_env (script, granted, 8, 7201);
  check_script_env (script, NULL, 16, 7201);
}

static void
test_argv (void)
{
  DatcProxyRequest req = base_request;
  req.submit_args = "-P proj -app 'long jobs'";
  g_auto (GStrv) submit = lsf ()->submit_argv (&req, "/scratch/datc/p.sh");
  const char *ids[] = { "1234", "1235", NULL };
  g_auto (GStrv) poll = lsf ()->poll_argv (ids);
  g_auto (GStrv) cancel = lsf ()->cancel_argv (ids);
  g_auto (GStrv) lookup = lsf ()->lookup_argv ("datc-c42-p7");
  const char *want_poll[] = { "-a", "-l", "1234", "1235", NULL };
  const char *want_lookup[] = { "-a", "-w", "-J", "datc-c42-p7", NULL };

  g_assert_nonnull (strstr (submit[2], "exec bsub \"$@\" <\"$s\""));
  g_assert_cmpstr (submit[4], ==, "/scratch/datc");
  g_assert_cmpstr (submit[5], ==, "/scratch/datc/p.sh");
  g_assert_cmpstr (submit[8], ==, "-app");
  g_assert_cmpstr (submit[9], ==, "long jobs");
  g_assert_cmpstr (poll[0], ==, "/bin/sh");
  g_assert_nonnull (strstr (poll[2], "exec bjobs \"$@\""));
  g_assert_cmpstrv (poll + 4, want_poll);
  g_assert_nonnull (strstr (cancel[2], "bkill \"$@\""));
  g_assert_nonnull (strstr (lookup[2], "exec bjobs \"$@\""));
  g_assert_cmpstrv (lookup + 4, want_lookup);

  static const char *const bad[]
      = { "", "0", "1234[0]", "1234[]", "1234[01]", "[1]", "1234[1]x", "12.3", "-1", "1 2", "1;x" };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      const char *one[] = { "5", bad[i], NULL };
      g_auto (GStrv) p = lsf ()->poll_argv (one);
      g_auto (GStrv) c = lsf ()->cancel_argv (one);
      g_assert_null (p);
      g_assert_null (c);
    }
}

static void
test_malformed_answers_are_parse_errors_naming_lsf (void)
{
  static const char *const polls[] = {
    /* The table poll used before volclava showed the exit code was only in -l. */
    "JOBID USER STAT QUEUE\n1234 alice RUN normal\n",
    "Job <1234>, User <alice>, Project <default>, Status <SLEEPING>, Queue <normal>\n",
    "Job <x>, User <alice>, Project <default>, Status <RUN>, Queue <normal>\n",
    "Tue Nov 24 09:16:17: Done successfully.\n",
  };
  static const char *const submits[] = {
    "Job <1234> is submitted to queue <normal>.\nJob <1235> is submitted to queue <normal>.\n",
    "Job <abc> is submitted to queue <normal>.\n",
    "",
  };
  const char *ids[] = { "1234", NULL };

  for (gsize i = 0; i < G_N_ELEMENTS (polls); i++)
    {
      g_auto (DatcCommandResult) res = { .out = g_bytes_new_static (polls[i], strlen (polls[i])) };
      DatcProxyState states[1];
      g_autoptr (GError) error = NULL;

      g_assert_false (lsf ()->parse_poll (&res, ids, states, &error));
      g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE);
      g_assert_true (g_str_has_prefix (error->message, "lsf: "));
    }
  for (gsize i = 0; i < G_N_ELEMENTS (submits); i++)
    {
      g_auto (DatcCommandResult) res
          = { .out = g_bytes_new_static (submits[i], strlen (submits[i])) };
      g_autofree gchar *id = NULL;
      g_autoptr (GError) error = NULL;

      g_assert_false (lsf ()->parse_submit (&res, &id, &error));
      g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE);
      g_assert_true (g_str_has_prefix (error->message, "lsf: "));
    }
}

static void
test_queue_argv_and_malformed_answers (void)
{
  g_auto (GStrv) argv = lsf ()->queue_argv ("normal");
  const char *want[] = { "-w", "normal", NULL };
  g_auto (GStrv) list = lsf ()->queue_argv ("normal,night");

  g_assert_nonnull (strstr (argv[2], "exec bqueues \"$@\""));
  g_assert_cmpstrv (argv + 4, want);
  g_assert_null (list);
  /* No header, another queue's row, nothing. */
  queue_answer_fails (lsf (), "normal", 0, "normal 30 Open:Active - - - - 0 0 0 0\n", "",
                      DATC_SITE_ERROR_PARSE);
  queue_answer_fails (lsf (), "normal", 0, "QUEUE_NAME PRIO STATUS MAX\nnight 40 Open:Inactive -\n",
                      "", DATC_SITE_ERROR_PARSE);
  queue_answer_fails (lsf (), "normal", 0, "", "", DATC_SITE_ERROR_PARSE);
  queue_answer_fails (lsf (), "normal", 255, "", "LSF is down; try later\n",
                      DATC_SITE_ERROR_COMMAND);
}

/* Every command runs with LSB_NTRIES=1: without it, volclava's commands
 * retry for ever while the daemons are down (live-*-daemon-down.txt
 * are what they say with it). */
static void
test_every_command_gives_up_when_the_daemons_are_down (void)
{
  const char *ids[] = { "1234", "1235[2]", NULL };
  g_auto (GStrv) submit = lsf ()->submit_argv (&base_request, "/scratch/datc/p.sh");
  g_auto (GStrv) array = lsf ()->arrays->submit_argv (&base_request, 3, "/scratch/datc/a.sh");
  g_auto (GStrv) poll = lsf ()->poll_argv (ids);
  g_auto (GStrv) cancel = lsf ()->cancel_argv (ids);
  g_auto (GStrv) lookup = lsf ()->lookup_argv ("datc-c42-p7");
  g_auto (GStrv) queue = lsf ()->queue_argv ("normal");
  GStrv all[] = { submit, array, poll, cancel, lookup, queue };

  for (gsize i = 0; i < G_N_ELEMENTS (all); i++)
    {
      g_assert_cmpstr (all[i][0], ==, "/bin/sh");
      g_assert_cmpstr (all[i][1], ==, "-c");
      g_assert_nonnull (strstr (all[i][2], "LSB_NTRIES=1"));
    }
}

/* How an EXIT job ended decides FINISHED (LSF killed it) or FAILED (the
 * agent's own exit code); only `bjobs -l` says. */
static void
test_poll_reads_the_exit_code_of_exit_jobs (void)
{
  static const struct {
    const char *end;
    DatcProxyState want;
  } cases[] = {
    { "Tue Nov 24 04:59:52: Exited with exit code 3. The CPU time used is 0.0 seconds.",
      DATC_PROXY_FAILED },
    { "Tue Nov 24 04:59:52: Exited with exit code 1. The CPU time used is 0.0 seconds.",
      DATC_PROXY_FAILED },
    { "Tue Nov 24 05:00:12: Exited with exit code 130. The CPU time used is 0.0 seconds.",
      DATC_PROXY_FINISHED },
    { "Tue Nov 24 05:01:35: Exited with exit code 140. The CPU time used is 0.0 seconds.",
      DATC_PROXY_FINISHED },
    { "Tue Nov 24 05:01:35: Exited by signal 9. The CPU time used is 0.0 seconds.",
      DATC_PROXY_FINISHED },
    /* No code although it ran (no CPU time used): count it a failure. */
    { "Tue Nov 24 05:01:35: Exited The CPU time used is unknown.", DATC_PROXY_FAILED },
  };
  const char *ids[] = { "7", "8", NULL };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree gchar *out = g_strdup_printf (
          "\nJob <7>, Job Name <datc-c42-p7>, User <alice>, Project <default>, Status <EXIT>, "
          "Queue <normal>, Command <#!/bin/sh;exec agent>\n"
          "Tue Nov 24 04:59:39: Submitted from host <vm>, CWD </scratch/datc>;\n"
          "Tue Nov 24 04:59:49: Started on <vm>, Execution Home </home/alice>;\n"
          "%s\n"
          "------------------------------------------------------------------------------\n"
          "\nJob <8>, Job Name <datc-c42-p8>, User <alice>, Project <default>, Status <EXIT>, "
          "Queue <normal>, Command <#!/bin/sh;exec agent>\n"
          "Tue Nov 24 04:59:39: Submitted from host <vm>, CWD </scratch/datc>;\n"
          "Tue Nov 24 05:00:12: Exited\n",
          cases[i].end);
      g_auto (DatcCommandResult) res = { .out = g_bytes_new (out, strlen (out)) };
      DatcProxyState states[2];
      g_autoptr (GError) error = NULL;

      g_test_message ("%s", cases[i].end);
      g_assert_true (lsf ()->parse_poll (&res, ids, states, &error));
      g_assert_no_error (error);
      g_assert_cmpint (states[0], ==, cases[i].want);
      /* Killed while pending: no code, never started. */
      g_assert_cmpint (states[1], ==, DATC_PROXY_FINISHED);
    }
}

/* ---- arrays ------------------------------------------------------------ */

static void
test_array_script_and_argv (void)
{
  g_autofree gchar *script = lsf ()->arrays->script (&base_request);
  DatcProxyRequest req = base_request;
  req.submit_args = "-A proj";
  g_auto (GStrv) submit = lsf ()->arrays->submit_argv (&req, 4, "/scratch/datc/a.sh");
  const char *want_args[]
      = { "/scratch/datc", "/scratch/datc/a.sh", "-J", "datc-c42-p7[1-4]", "-A", "proj", NULL };
  g_assert_cmpstr (submit[0], ==, "/bin/sh");
  g_assert_cmpstrv (submit + 4, want_args);
  g_autofree gchar *element = lsf ()->arrays->element_id ("1250", 4);

  g_assert_nonnull (strstr (script, "LSB_JOBINDEX"));
  g_assert_nonnull (strstr (script, "#BSUB -o datc-c42-p7.%J_%I.log\n"));
  g_assert_cmpstr (element, ==, "1250[4]");
  check_array_script (lsf (), "LSB_JOBINDEX");
}

/* One -R string: the hosts left out (select) and the one host (span). */
static void
test_script_excludes_hosts (void)
{
  static const char *const two[] = { "node07", "node12", NULL };
  DatcProxyRequest req = base_request;

  g_autofree gchar *none = lsf ()->script (&req);
  g_assert_nonnull (strstr (none, "\n#BSUB -R \"span[hosts=1]\"\n"));
  req.exclude_hosts = two;
  g_autofree gchar *s2 = lsf ()->script (&req);
  g_assert_nonnull (
      strstr (s2, "\n#BSUB -R \"select[hname!='node07' && hname!='node12'] span[hosts=1]\"\n"));
  g_assert_true (datc_scheduler_can_exclude_hosts ("lsf", NULL));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/site/lsf/script/directives", test_script_directives);
  g_test_add_func ("/site/lsf/script/excludes-hosts", test_script_excludes_hosts);
  g_test_add_func ("/site/lsf/script/gives-the-agent-what-lsf-granted",
                   test_script_gives_the_agent_what_lsf_granted);
  g_test_add_func ("/site/lsf/argv/submit-poll-cancel-lookup-and-bad-ids", test_argv);
  g_test_add_func ("/site/lsf/parse/malformed-answers-are-parse-errors-naming-lsf",
                   test_malformed_answers_are_parse_errors_naming_lsf);
  g_test_add_func ("/site/lsf/array/script-and-argv", test_array_script_and_argv);
  g_test_add_func ("/site/lsf/argv/every-command-gives-up-when-the-daemons-are-down",
                   test_every_command_gives_up_when_the_daemons_are_down);
  g_test_add_func ("/site/lsf/parse/poll-reads-the-exit-code-of-exit-jobs",
                   test_poll_reads_the_exit_code_of_exit_jobs);
  g_test_add_func ("/site/lsf/queue/argv-and-malformed-answers",
                   test_queue_argv_and_malformed_answers);
  recorded_add_tests (
      lsf (), (RecordedCommands) {
                  .submit = "bsub", .poll = "bjobs", .cancel = "bkill", .queue = "bqueues" });

  int status = g_test_run ();
  recorded_cleanup ();
  return status;
}
