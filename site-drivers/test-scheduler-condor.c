/* test-scheduler-condor.c: the condor scheduler, without a pool.
 *
 * HTCondor is not packaged for Debian 12, so this is all there is: the
 * submit description and script builders, the script run with sh (with a
 * machine ad file like the one HTCondor names in _CONDOR_MACHINE_AD), and
 * the parsers on every answer transcribed from the HTCondor manual and
 * sources (tests/data/condor, each file naming its source), directly and,
 * for submit and cancel, through a local site with stub commands. */

#include "scheduler-batch.h"
#include "tests/recorded.h"

#include <string.h>

static const DatcSchedulerClass *
condor (void)
{
  const DatcSchedulerClass *klass = datc_scheduler_lookup ("condor");

  g_assert_nonnull (klass);
  return klass;
}

static const DatcProxyRequest base_request = {
  .name = "datc-c42-p7",
  .slots = 16,
  .walltime_s = 7200,
  .workdir = "/scratch/datc",
  .agent_command = "/opt/datc/bin/datc-agent --connect tcp://10.1.2.3:5555",
};

static void
test_submit_description (void)
{
  DatcProxyRequest req = base_request;
  req.submit_args = "-name schedd2@example.org";
  g_auto (GStrv) argv = condor ()->submit_argv (&req, "/scratch/datc/p 1.sh");

  g_assert_cmpstr (argv[0], ==, "/bin/sh");
  g_assert_nonnull (strstr (argv[2], "| condor_submit -terse \"$@\" -"));
  g_assert_cmpstr (argv[4], ==, "/scratch/datc");
  g_assert_cmpstr (argv[5], ==,
                   "universe = vanilla\n"
                   "executable = /scratch/datc/p 1.sh\n"
                   "batch_name = datc-c42-p7\n"
                   "request_cpus = 16\n"
                   "output = datc-c42-p7.$(ClusterId).out\n"
                   "error = datc-c42-p7.$(ClusterId).err\n"
                   "getenv = false\n"
                   "should_transfer_files = IF_NEEDED\n"
                   "when_to_transfer_output = ON_EXIT\n"
                   "periodic_remove = JobStatus == 2 && time() - EnteredCurrentStatus > 7200\n"
                   "job_max_vacate_time = 60\n"
                   "queue");
  g_assert_cmpstr (argv[6], ==, "-name");
  g_assert_cmpstr (argv[7], ==, "schedd2@example.org");
  g_assert_null (argv[8]);

  /* What would break the description or be a macro is refused. */
  g_assert_null (condor ()->submit_argv (&req, "/scratch/datc/p$(x).sh"));
  g_assert_null (condor ()->submit_argv (&req, "/scratch/datc/p\nqueue 1000.sh"));
  req.queue = "short";
  g_assert_null (condor ()->submit_argv (&req, "/scratch/datc/p.sh"));
  g_assert_null (condor ()->script (&req));
}

static void
test_script_reads_the_slot_cpus (void)
{
  DatcProxyRequest req = base_request;
  req.agent_command = SHOW_AGENT_ENV;
  g_autofree gchar *script = condor ()->script (&req);
  g_autofree gchar *dir = g_dir_make_tmp ("datc-condor-XXXXXX", NULL);
  g_autofree gchar *ad = g_build_filename (dir, ".machine.ad", NULL);
  g_autofree gchar *ad_env = g_strconcat ("_CONDOR_MACHINE_AD=", ad, NULL);
  const char *env[] = { ad_env, NULL };

  g_assert_null (strstr (script, "#"
                                 "BSUB"));
  g_assert_true (g_file_set_contents (ad,
                                      "TotalCpus = 64\nCpus = 4\nDetectedCpus = 64\n"
                                      "Memory = 2048\n",
                                      -1, NULL));
  check_script_env (script, env, 4, 7200);
  check_script_env (script, NULL, 16, 7200);
  g_unlink (ad);
  g_rmdir (dir);
}

static void
test_poll_and_lookup_argv (void)
{
  const char *ids[] = { "12.0", "13.4", NULL };
  g_auto (GStrv) poll = condor ()->poll_argv (ids);
  g_auto (GStrv) cancel = condor ()->cancel_argv (ids);
  g_auto (GStrv) lookup = condor ()->lookup_argv ("datc-c42-p7");

  g_assert_cmpstr (poll[4], ==,
                   "(ClusterId == 12 && ProcId == 0) || (ClusterId == 13 && ProcId == 4)");
  g_assert_cmpstr (poll[5], ==, "2");
  g_assert_nonnull (strstr (poll[2], "condor_q -constraint \"$1\" -af:j JobStatus ExitCode"));
  g_assert_nonnull (strstr (poll[2], "condor_history -constraint \"$1\" -limit \"$2\""));
  g_assert_nonnull (strstr (cancel[2], "condor_rm \"$@\""));
  g_assert_cmpstr (cancel[4], ==, "12.0");
  g_assert_cmpstr (lookup[4], ==, "JobBatchName == \"datc-c42-p7\"");

  static const char *const bad[]
      = { "", "12", "0.0", "12.x", "12.0.1", "12.-1", "12.0 13.0", "12.0)||(true", "$(x)" };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      const char *one[] = { "5.0", bad[i], NULL };
      g_auto (GStrv) p = condor ()->poll_argv (one);
      g_auto (GStrv) c = condor ()->cancel_argv (one);
      g_test_message ("bad id '%s'", bad[i]);
      g_assert_null (p);
      g_assert_null (c);
    }
  g_assert_null (condor ()->lookup_argv ("x\" || true || \""));
}

static void
test_malformed_answers_are_parse_errors_naming_condor (void)
{
  static const char *const polls[] = {
    "12.0 2 undefined\n",             /* no history mark */
    "12.0 9 undefined\n-- history\n", /* unknown status */
    "12.0 2\n-- history\n",           /* two words */
    "-- history\n-- history\n",
  };
  const char *ids[] = { "12.0", NULL };

  for (gsize i = 0; i < G_N_ELEMENTS (polls); i++)
    {
      g_auto (DatcCommandResult) res = { .out = g_bytes_new_static (polls[i], strlen (polls[i])) };
      DatcProxyState states[1];
      g_autoptr (GError) error = NULL;

      g_test_message ("poll %s", polls[i]);
      g_assert_false (condor ()->parse_poll (&res, ids, states, &error));
      g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE);
      g_assert_true (g_str_has_prefix (error->message, "condor: "));
    }
}

static void
test_has_no_queues (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcSite) site = datc_site_new ("pool", "local", "condor", NULL, NULL, &error);
  gboolean exists = TRUE;
  g_autofree gchar *answer = NULL;

  g_assert_no_error (error);
  g_assert_null (condor ()->queue_argv);
  g_assert_null (condor ()->parse_queue);
  g_assert_nonnull (strstr (condor ()->no_queues, "HTCondor has no queues"));
  g_assert_false (datc_site_query_queue (site, "vanilla", &exists, &answer, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
  g_assert_nonnull (strstr (error->message, "site pool: "));
  g_assert_nonnull (strstr (error->message, "HTCondor has no queues"));
  g_assert_false (exists);
  g_assert_null (answer);
}

static void
test_submit_excludes_hosts (void)
{
  static const char *const two[] = { "node07.example.org", "node12", NULL };
  DatcProxyRequest req = base_request;
  req.exclude_hosts = two;
  g_auto (GStrv) argv = condor ()->submit_argv (&req, "/scratch/datc/p.sh");

  g_assert_nonnull (strstr (argv[5], "\nrequirements = (Machine != \"node07.example.org\") && "
                                     "(Machine != \"node12\")\nqueue"));
  g_assert_true (datc_scheduler_can_exclude_hosts ("condor", NULL));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/site/condor/submit/description", test_submit_description);
  g_test_add_func ("/site/condor/submit/excludes-hosts", test_submit_excludes_hosts);
  g_test_add_func ("/site/condor/script/reads-the-slot-cpus", test_script_reads_the_slot_cpus);
  g_test_add_func ("/site/condor/argv/poll-cancel-lookup-and-bad-ids", test_poll_and_lookup_argv);
  g_test_add_func ("/site/condor/parse/malformed-answers-are-parse-errors-naming-condor",
                   test_malformed_answers_are_parse_errors_naming_condor);
  /* Poll runs condor_q and condor_history: one stub cannot stand in. */
  g_test_add_func ("/site/condor/queue/there-are-none", test_has_no_queues);
  recorded_add_tests (condor (),
                      (RecordedCommands) { .submit = "condor_submit", .cancel = "condor_rm" });

  int status = g_test_run ();
  recorded_cleanup ();
  return status;
}
