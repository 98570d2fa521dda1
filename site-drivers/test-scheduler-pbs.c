/* test-scheduler-pbs.c: the pbs scheduler, without a server.
 *
 * The builders are checked for what they put where and what they refuse,
 * the script is run with sh to check DATC_SLOTS and DATC_WALLTIME_END, and
 * the parsers run on every recorded answer (tests/data/pbs: live-*.txt from
 * a real OpenPBS 23.06, capture-pbs.sh; the others transcribed from the
 * OpenPBS documentation and sources, each file naming its source),
 * directly and through a local site with stub commands.  The live server
 * itself is test-pbs-real.c's. */

#include "scheduler-batch.h"
#include "tests/recorded.h"

#include <string.h>

static const DatcSchedulerClass *
pbs (void)
{
  const DatcSchedulerClass *klass = datc_scheduler_lookup ("pbs");

  g_assert_nonnull (klass);
  return klass;
}

static const DatcProxyRequest base_request = {
  .name = "datc-c42-p7",
  .slots = 16,
  .walltime_s = 7265,
  .queue = "workq",
  .workdir = "/scratch/it's datc",
  .agent_command = "/opt/datc/bin/datc-agent --connect tcp://10.1.2.3:5555",
};

static void
test_script_directives (void)
{
  g_autofree gchar *script = pbs ()->script (&base_request);
  g_autofree gchar *cd = g_strdup_printf ("\ncd %s || exit 1\nexec ", "'/scratch/it'\\''s datc'");

  g_assert_true (g_str_has_prefix (script, "#!/bin/sh\n#PBS -N datc-c42-p7\n"));
  g_assert_nonnull (strstr (script, "#PBS -l select=1:ncpus=16\n"));
  g_assert_nonnull (strstr (script, "#PBS -l walltime=2:01:05\n"));
  g_assert_nonnull (strstr (script, "#PBS -q workq\n"));
  g_assert_nonnull (strstr (script, "#PBS -j oe\n"));
  g_assert_nonnull (strstr (script, "DATC_SLOTS=${NCPUS:-${PBS_NUM_PPN:-${PBS_NP:-}}}\n"));
  /* PBS starts jobs in $HOME: the script goes to the workdir first. */
  g_assert_nonnull (strstr (script, cd));
  g_assert_true (g_strrstr (script, "#PBS") < strstr (script, "\nDATC_SLOTS="));

  DatcProxyRequest req = base_request;
  req.walltime_s = 0;
  req.queue = NULL;
  g_autofree gchar *bare = pbs ()->script (&req);
  g_assert_null (strstr (bare, "-l walltime"));
  g_assert_null (strstr (bare, "#PBS -q"));
}

static void
test_script_gives_the_agent_what_pbs_granted (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("datc-pbs-XXXXXX", NULL);
  DatcProxyRequest req = base_request;
  req.workdir = dir;
  req.agent_command = SHOW_AGENT_ENV;
  g_autofree gchar *script = pbs ()->script (&req);
  const char *pbs_pro[] = { "NCPUS=12", NULL };
  const char *torque[] = { "PBS_NUM_PPN=6", "PBS_NP=6", NULL };

  check_script_env (script, pbs_pro, 12, 7265);
  check_script_env (script, torque, 6, 7265);
  check_script_env (script, NULL, 16, 7265);
  g_rmdir (dir);
}

static void
test_argv (void)
{
  DatcProxyRequest req = base_request;
  req.submit_args = "-A proj -l place=excl";
  g_auto (GStrv) submit = pbs ()->submit_argv (&req, "/scratch/it's datc/p 1.sh");
  const char *ids[] = { "1234.pbsserver", "1235.pbsserver.example.org", "77", NULL };
  g_auto (GStrv) poll = pbs ()->poll_argv (ids);
  g_auto (GStrv) cancel = pbs ()->cancel_argv (ids);
  g_auto (GStrv) lookup = pbs ()->lookup_argv ("datc-c42-p7");
  const char *want_poll[]
      = { "qstat", "-x", "-f", "-F", "dsv", "1234.pbsserver", "1235.pbsserver.example.org",
          "77",    NULL };
  const char *want_lookup[] = { "qselect", "-x", "-N", "datc-c42-p7", NULL };

  g_assert_cmpstr (submit[0], ==, "/bin/sh");
  g_assert_nonnull (strstr (submit[2], "exec qsub \"$@\""));
  g_assert_cmpstr (submit[4], ==, "/scratch/it's datc");
  g_assert_cmpstr (submit[5], ==, "-A");
  g_assert_cmpstr (submit[8], ==, "place=excl");
  g_assert_cmpstr (submit[9], ==, "/scratch/it's datc/p 1.sh");
  g_assert_null (submit[10]);
  g_assert_cmpstrv (poll, want_poll);
  g_assert_nonnull (strstr (cancel[2], "qdel \"$@\""));
  g_assert_cmpstr (cancel[4], ==, "1234.pbsserver");
  g_assert_cmpstrv (lookup, want_lookup);

  /* A fresh OpenPBS 23.06 server numbers jobs from 0 ("0.vm"). */
  const char *zero[] = { "0.vm", "0", "0[2].vm", NULL };
  g_auto (GStrv) poll_zero = pbs ()->poll_argv (zero);
  g_assert_nonnull (poll_zero);
  g_autofree gchar *element_zero = pbs ()->arrays->element_id ("0[].vm", 2);
  g_assert_cmpstr (element_zero, ==, "0[2].vm");

  static const char *const bad[]
      = { "",      "01",    "00.vm",    "x.pbs", "12.",     "12..x", "12.-x",
          "12 13", "12;rm", "12[].pbs", "$(x)",  "12.pbs@", "-12" };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      const char *one[] = { "5.pbs", bad[i], NULL };
      g_auto (GStrv) p = pbs ()->poll_argv (one);
      g_auto (GStrv) c = pbs ()->cancel_argv (one);
      g_test_message ("bad id '%s'", bad[i]);
      g_assert_null (p);
      g_assert_null (c);
    }
}

static void
test_malformed_answers_are_parse_errors_naming_pbs (void)
{
  static const char *const polls[] = {
    "Job Id: 1234.pbsserver|Job_Name = x\n",
    "Job Id: 1234.pbsserver|job_state = Z\n",
    "Job Id: 1234.pbsserver|job_state = F|Exit_status = x\n",
    "Job Id: 1234.pbsserver|job_state=Z\n",
    "Job Id: 1234.pbsserver|job_state=F|Exit_status=x\n",
    "Job Id: 1234.pbsserver|job_state==R\n",
    "Job Id: 1234.pbsserver|job_stateR\n",
    "1234.pbsserver|job_state = R\n",
    "Job Id: $(x)|job_state = R\n",
  };
  const char *ids[] = { "1234.pbsserver", NULL };

  for (gsize i = 0; i < G_N_ELEMENTS (polls); i++)
    {
      g_auto (DatcCommandResult) res = { .out = g_bytes_new_static (polls[i], strlen (polls[i])) };
      DatcProxyState states[1];
      g_autoptr (GError) error = NULL;

      g_test_message ("poll %s", polls[i]);
      g_assert_false (pbs ()->parse_poll (&res, ids, states, &error));
      g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE);
      g_assert_true (g_str_has_prefix (error->message, "pbs: "));
    }

  g_auto (DatcCommandResult) res = { .out = g_bytes_new_static ("1234.pbsserver x\n", 17) };
  g_autofree gchar *id = NULL;
  g_autoptr (GError) error = NULL;
  g_assert_false (pbs ()->parse_submit (&res, &id, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE);
  g_assert_true (g_str_has_prefix (error->message, "pbs: "));
}

static void
test_queue_argv_and_malformed_answers (void)
{
  g_auto (GStrv) argv = pbs ()->queue_argv ("workq@pbsserver");
  const char *want[] = { "qstat", "-Q", "-f", "workq@pbsserver", NULL };
  g_auto (GStrv) list = pbs ()->queue_argv ("workq,long");

  g_assert_cmpstrv (argv, want);
  g_assert_null (list); /* PBS takes one destination */
  /* Another queue, no header, nothing. */
  queue_answer_fails (pbs (), "workq", 0, "Queue: long\n    enabled = True\n", "",
                      DATC_SITE_ERROR_PARSE);
  queue_answer_fails (pbs (), "workq", 0, "    enabled = True\n", "", DATC_SITE_ERROR_PARSE);
  queue_answer_fails (pbs (), "workq", 0, "", "", DATC_SITE_ERROR_PARSE);
  queue_answer_fails (pbs (), "workq", 2, "", "usage: qstat ...\n", DATC_SITE_ERROR_COMMAND);
}

/* ---- arrays (from the documentation only: no PBS daemon here) ---------- */

static void
test_array_script_and_argv (void)
{
  g_autofree gchar *script = pbs ()->arrays->script (&base_request);
  DatcProxyRequest req = base_request;
  req.submit_args = "-A proj";
  g_auto (GStrv) submit = pbs ()->arrays->submit_argv (&req, 4, "/scratch/it's datc/a.sh");
  const char *want_args[]
      = { "/scratch/it's datc", "-J", "1-4", "-A", "proj", "/scratch/it's datc/a.sh", NULL };
  g_assert_cmpstr (submit[0], ==, "/bin/sh");
  g_assert_cmpstrv (submit + 4, want_args);
  g_autofree gchar *element = pbs ()->arrays->element_id ("1240[].srv", 4);

  g_assert_nonnull (strstr (script, "PBS_ARRAY_INDEX"));
  g_autofree gchar *not_array = pbs ()->arrays->element_id ("1240.srv", 1);
  g_assert_null (not_array);
  g_assert_cmpstr (element, ==, "1240[4].srv");
  check_array_script (pbs (), "PBS_ARRAY_INDEX");
}

/* PBS's select says what a host must have, never what it must not: the
 * scheduler says so, and its script is the same with or without hosts. */
static void
test_script_cannot_exclude_hosts (void)
{
  static const char *const one[] = { "node07", NULL };
  DatcProxyRequest req = base_request;
  g_autofree gchar *without = pbs ()->script (&req);
  req.exclude_hosts = one;
  g_autofree gchar *with = pbs ()->script (&req);
  g_assert_cmpstr (with, ==, without);
  const char *why = NULL;
  g_assert_false (datc_scheduler_can_exclude_hosts ("pbs", &why));
  g_assert_nonnull (strstr (why, "no per-job host exclusion"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/site/pbs/script/directives", test_script_directives);
  g_test_add_func ("/site/pbs/script/cannot-exclude-hosts", test_script_cannot_exclude_hosts);
  g_test_add_func ("/site/pbs/script/gives-the-agent-what-pbs-granted",
                   test_script_gives_the_agent_what_pbs_granted);
  g_test_add_func ("/site/pbs/argv/submit-poll-cancel-lookup-and-bad-ids", test_argv);
  g_test_add_func ("/site/pbs/parse/malformed-answers-are-parse-errors-naming-pbs",
                   test_malformed_answers_are_parse_errors_naming_pbs);
  g_test_add_func ("/site/pbs/array/script-and-argv", test_array_script_and_argv);
  g_test_add_func ("/site/pbs/queue/argv-and-malformed-answers",
                   test_queue_argv_and_malformed_answers);
  recorded_add_tests (
      pbs (),
      (RecordedCommands) { .submit = "qsub", .poll = "qstat", .cancel = "qdel", .queue = "qstat" });

  int status = g_test_run ();
  recorded_cleanup ();
  return status;
}
