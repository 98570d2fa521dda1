/* test-scheduler-sge.c: the sge scheduler without a cluster.
 *
 * Builders are checked for what they put where and what they refuse; the
 * script is run with sh to check DATC_SLOTS and DATC_WALLTIME_END.  The
 * parsers run on every answer recorded from the real Son of Grid Engine
 * 8.1.9 test bed (tests/data/sge, made by tests/testbed/capture-sge.sh),
 * directly and through a local site with stub commands (which is how the
 * qdel wrapper's filter is tested), and on malformed answers.  The run
 * against the real daemons is test-sge-real.c. */

#include "scheduler-batch.h"
#include "tests/recorded.h"

#include <string.h>

static const DatcSchedulerClass *
sge (void)
{
  const DatcSchedulerClass *klass = datc_scheduler_lookup ("sge");

  g_assert_nonnull (klass);
  return klass;
}

static const DatcProxyRequest base_request = {
  .name = "datc-c42-p7",
  .slots = 16,
  .walltime_s = 7200,
  .queue = "all.q",
  .workdir = "/scratch/datc",
  .agent_command = "/opt/datc/bin/datc-agent --connect tcp://10.1.2.3:5555",
};

static void
test_script_directives (void)
{
  g_autofree gchar *script = sge ()->script (&base_request);

  g_assert_true (g_str_has_prefix (script, "#!/bin/sh\n#$ -S /bin/sh\n#$ -N datc-c42-p7\n"));
  g_assert_nonnull (strstr (script, "#$ -j y\n#$ -o datc-c42-p7.$JOB_ID.log\n"));
  g_assert_nonnull (strstr (script, "#$ -notify\n"));
  g_assert_nonnull (strstr (script, "#$ -pe smp 16\n"));
  g_assert_nonnull (strstr (script, "#$ -l h_rt=7200\n"));
  g_assert_nonnull (strstr (script, "#$ -q all.q\n"));
  g_assert_null (strstr (script, "s_rt"));
  g_assert_nonnull (strstr (script, "DATC_SLOTS=${NSLOTS:-}\n"));
  g_assert_true (
      g_str_has_suffix (script, "\nexec /opt/datc/bin/datc-agent --connect tcp://10.1.2.3:5555\n"));
  g_assert_true (g_strrstr (script, "#$") < strstr (script, "\nDATC_SLOTS="));
}

static void
test_script_one_slot_no_walltime_no_queue (void)
{
  DatcProxyRequest req = base_request;
  req.slots = 1;
  req.walltime_s = 0;
  req.queue = NULL;
  g_autofree gchar *script = sge ()->script (&req);

  g_assert_null (strstr (script, "-pe"));
  g_assert_null (strstr (script, "h_rt"));
  g_assert_null (strstr (script, "#$ -q"));
  g_assert_null (strstr (script, "DATC_WALLTIME_END="));
  /* qdel then warns with SIGUSR2 too. */
  g_assert_nonnull (strstr (script, "#$ -notify\n"));
}

static void
test_script_gives_the_agent_what_sge_granted (void)
{
  DatcProxyRequest req = base_request;
  req.agent_command = SHOW_AGENT_ENV;
  g_autofree gchar *script = sge ()->script (&req);
  const char *granted[] = { "NSLOTS=8", NULL };
  const char *empty[] = { "NSLOTS=", NULL };

  check_script_env (script, granted, 8, 7200);
  check_script_env (script, NULL, 16, 7200);
  check_script_env (script, empty, 16, 7200);
}

static void
test_script_refuses_bad_names_and_queues (void)
{
  static const char *const bad_names[] = { "", "1abc", "a b", "a\nb", "a:b", "a*", "a@b" };
  static const char *const bad_queues[] = { "", "a b", "q\nq", "q'", "q;x" };

  for (gsize i = 0; i < G_N_ELEMENTS (bad_names); i++)
    {
      DatcProxyRequest req = base_request;
      req.name = bad_names[i];
      g_assert_null (sge ()->script (&req));
      g_assert_null (sge ()->lookup_argv (bad_names[i]));
    }
  for (gsize i = 0; i < G_N_ELEMENTS (bad_queues); i++)
    {
      DatcProxyRequest req = base_request;
      req.queue = bad_queues[i];
      g_assert_null (sge ()->script (&req));
    }
  DatcProxyRequest req = base_request;
  req.queue = "all.q@node1,long.q";
  g_autofree gchar *ok = sge ()->script (&req);
  g_assert_nonnull (ok);
}

static void
test_argv (void)
{
  DatcProxyRequest req = base_request;
  req.workdir = "/w/it's here";
  req.submit_args = "-P proj -pe 'threads' 16";
  g_auto (GStrv) submit = sge ()->submit_argv (&req, "/w/it's here/p 1.sh");
  const char *want_submit[] = { "qsub", "-terse",  "-wd", "/w/it's here",        "-P", "proj",
                                "-pe",  "threads", "16",  "/w/it's here/p 1.sh", NULL };
  const char *ids[] = { "12", "13", NULL };
  g_auto (GStrv) poll = sge ()->poll_argv (ids);
  g_auto (GStrv) cancel = sge ()->cancel_argv (ids);
  g_auto (GStrv) lookup = sge ()->lookup_argv ("datc-c42-p7");
  const char *want_lookup[] = { "qstat", "-j", "datc-c42-p7", NULL };

  g_assert_cmpstrv (submit, want_submit);
  g_assert_cmpstr (poll[0], ==, "/bin/sh");
  g_assert_cmpstr (poll[2], ==, "exec qstat -u \"$(id -un)\"");
  g_assert_cmpuint (g_strv_length (poll), ==, 4);
  g_assert_cmpstr (cancel[0], ==, "/bin/sh");
  g_assert_nonnull (strstr (cancel[2], "qdel \"$@\""));
  g_assert_cmpstr (cancel[4], ==, "12");
  g_assert_cmpstr (cancel[5], ==, "13");
  g_assert_cmpstrv (lookup, want_lookup);

  req.submit_args = "-N 'unterminated";
  g_assert_null (sge ()->submit_argv (&req, "/w/p.sh"));
}

static void
test_argv_refuses_ids_that_are_not_sge_ids (void)
{
  static const char *const bad[]
      = { "",       "0",       "07", "12.0", "12.01", "12.",   ".1",
          "12.1.2", "12-20:2", "-1", "1;x",  "$(x)",  "12 13", "1234567890123456789" };

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      const char *ids[] = { "5", bad[i], NULL };
      g_auto (GStrv) poll = sge ()->poll_argv (ids);
      g_auto (GStrv) cancel = sge ()->cancel_argv (ids);

      g_test_message ("bad id '%s'", bad[i]);
      g_assert_null (poll);
      g_assert_null (cancel);
    }
}

static void
test_poll_maps_state_letters (void)
{
  static const struct {
    const char *letters;
    DatcProxyState state;
  } cases[] = {
    { "qw", DATC_PROXY_PENDING }, { "hqw", DATC_PROXY_PENDING }, { "hRwq", DATC_PROXY_PENDING },
    { "r", DATC_PROXY_RUNNING },  { "t", DATC_PROXY_RUNNING },   { "Rr", DATC_PROXY_RUNNING },
    { "s", DATC_PROXY_RUNNING },  { "S", DATC_PROXY_RUNNING },   { "dr", DATC_PROXY_RUNNING },
    { "Eqw", DATC_PROXY_FAILED }, { "Ehqw", DATC_PROXY_FAILED },
  };
  const char *ids[] = { "12", "13", NULL };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree gchar *out = g_strdup_printf (
          "job-ID  prior   name       user         state submit/start at     queue  slots "
          "ja-task-ID\n"
          "------------------------------------------------------------------------------\n"
          "     12 0.50000 datc-c42-p root         %s   11/21/2026 17:05:04  all.q@vm  1\n",
          cases[i].letters);
      g_auto (DatcCommandResult) res = { .out = g_bytes_new (out, strlen (out)) };
      DatcProxyState states[2];
      g_autoptr (GError) error = NULL;

      g_test_message ("state %s", cases[i].letters);
      g_assert_true (sge ()->parse_poll (&res, ids, states, &error));
      g_assert_no_error (error);
      g_assert_cmpstr (datc_proxy_state_name (states[0]), ==,
                       datc_proxy_state_name (cases[i].state));
      g_assert_cmpint (states[1], ==, DATC_PROXY_FINISHED);
    }
}

static void
test_malformed_answers_are_parse_errors_naming_sge (void)
{
  static const char *const submits[] = {
    "Your job 12 (\"p.sh\") has been submitted\n", "12\n13\n", "", "12.1-10:1\n", "x\n",
  };
  static const char *const polls[] = {
    "     12 0.50000 datc root zz 11/21/2026 17:05:04 all.q@vm 1\n",
    "     12 0.50000 datc root\n",
    "garbage\n",
    "job-ID prior name\n----\nx 0.5 a b r c d\n",
  };
  static const char *const lookups[] = {
    "job_name: datc-c42-p7\n",
    "job_number: x\n",
    "job_number: 12 13\n",
  };
  const char *ids[] = { "12", NULL };

  for (gsize i = 0; i < G_N_ELEMENTS (submits); i++)
    {
      g_auto (DatcCommandResult) res
          = { .out = g_bytes_new_static (submits[i], strlen (submits[i])) };
      g_autofree gchar *id = NULL;
      g_autoptr (GError) error = NULL;

      g_assert_false (sge ()->parse_submit (&res, &id, &error));
      g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE);
      g_assert_true (g_str_has_prefix (error->message, "sge: "));
    }
  for (gsize i = 0; i < G_N_ELEMENTS (polls); i++)
    {
      g_auto (DatcCommandResult) res = { .out = g_bytes_new_static (polls[i], strlen (polls[i])) };
      DatcProxyState states[1];
      g_autoptr (GError) error = NULL;

      g_test_message ("poll %s", polls[i]);
      g_assert_false (sge ()->parse_poll (&res, ids, states, &error));
      g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE);
      g_assert_true (g_str_has_prefix (error->message, "sge: "));
    }
  for (gsize i = 0; i < G_N_ELEMENTS (lookups); i++)
    {
      g_auto (DatcCommandResult) res
          = { .out = g_bytes_new_static (lookups[i], strlen (lookups[i])) };
      g_autofree gchar *id = NULL;
      g_autoptr (GError) error = NULL;

      g_assert_false (sge ()->parse_lookup (&res, &id, &error));
      g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE);
      g_assert_true (g_str_has_prefix (error->message, "sge: "));
    }
}

static void
test_queue_argv_and_malformed_answers (void)
{
  g_auto (GStrv) argv = sge ()->queue_argv ("all.q@node1,long.q");
  const char *want[] = { "qconf", "-sq", "all.q@node1,long.q", NULL };
  g_auto (GStrv) bad = sge ()->queue_argv ("all q");

  g_assert_cmpstrv (argv, want);
  g_assert_null (bad);
  /* No qname first, a line that is not KEY VALUE, nothing at all. */
  queue_answer_fails (sge (), "all.q", 0, "hostlist @allhosts\nslots 8\n", "",
                      DATC_SITE_ERROR_PARSE);
  queue_answer_fails (sge (), "all.q", 0, "qname all.q\nGARBAGE\n", "", DATC_SITE_ERROR_PARSE);
  queue_answer_fails (sge (), "all.q", 0, "", "", DATC_SITE_ERROR_PARSE);
  /* A failure that is not "no such queue". */
  queue_answer_fails (sge (), "all.q", 1, "",
                      "error: commlib error: got select error (Connection refused)\n",
                      DATC_SITE_ERROR_COMMAND);
}

/* ---- arrays ----------------------------------------------------------- */

static void
test_array_script_and_argv (void)
{
  g_autofree gchar *script = sge ()->arrays->script (&base_request);
  DatcProxyRequest req = base_request;
  req.submit_args = "-P proj";
  g_auto (GStrv) submit = sge ()->arrays->submit_argv (&req, 5, "/scratch/datc/a.sh");
  const char *want_submit[] = { "qsub", "-terse", "-wd",  "/scratch/datc",      "-t",
                                "1-5",  "-P",     "proj", "/scratch/datc/a.sh", NULL };
  g_autofree gchar *element = sge ()->arrays->element_id ("123", 4);

  g_assert_nonnull (strstr (script, "#$ -N datc-c42-p7\n"));
  g_assert_nonnull (strstr (script, "#$ -o datc-c42-p7.$JOB_ID.$TASK_ID.log\n"));
  g_assert_cmpstrv (submit, want_submit);
  g_assert_cmpstr (element, ==, "123.4");
  check_array_script (sge (), "SGE_TASK_ID");

  /* qsub -terse -t 1-K says "ID.1-K:1": another K is not our array. */
  static const struct {
    const char *out;
    guint k;
  } bad[] = { { "12.1-5:1\n", 4 },           { "12\n", 3 }, { "12.1-3:2\n", 3 }, { "x.1-3:1\n", 3 },
              { "12.1-3:1\n13.1-3:1\n", 3 }, { "", 3 } };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_auto (DatcCommandResult) res
          = { .out = g_bytes_new_static (bad[i].out, strlen (bad[i].out)) };
      g_autofree gchar *base = NULL;
      g_autoptr (GError) error = NULL;

      g_test_message ("qsub said '%s' for %u", bad[i].out, bad[i].k);
      g_assert_false (sge ()->arrays->parse_submit (&res, bad[i].k, &base, &error));
      g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE);
      g_assert_true (g_str_has_prefix (error->message, "sge: "));
      g_assert_null (base);
    }
}

/* Task lists as qstat prints them: ranges with a step, single tasks,
 * comma lists; running tasks on lines of their own. */
static void
test_poll_reads_task_lists (void)
{
  const char *out
      = "job-ID  prior   name       user         state submit/start at     queue                "
        "          slots ja-task-ID \n"
        "-----------------------------------------------------------------------------------------"
        "------------------------\n"
        "      7 0.25000 a          root         r     11/24/2026 06:37:45 all.q@vm              "
        "             1 2\n"
        "      7 0.25000 a          root         qw    11/24/2026 06:37:45                       "
        "             1 1,3-9:3,20\n"
        "      8 0.25000 b          root         Eqw   11/24/2026 06:37:45                       "
        "             1 1-2:1\n"
        "      9 0.25000 c          root         r     11/24/2026 06:37:45 all.q@vm              "
        "             1\n"
        "     10 0.25000 d          root         qw    11/24/2026 06:37:45                       "
        "             2\n";
  g_auto (DatcCommandResult) res = { .out = g_bytes_new_static (out, strlen (out)) };
  const char *ids[]
      = { "7.1", "7.2", "7.3", "7.4", "7.6", "7.9", "7.20", "7.21", "8.2", "9", "10", "9.1", NULL };
  const DatcProxyState want[]
      = { DATC_PROXY_PENDING, DATC_PROXY_RUNNING, DATC_PROXY_PENDING, DATC_PROXY_FINISHED,
          DATC_PROXY_PENDING, DATC_PROXY_PENDING, DATC_PROXY_PENDING, DATC_PROXY_FINISHED,
          DATC_PROXY_FAILED,  DATC_PROXY_RUNNING, DATC_PROXY_PENDING, DATC_PROXY_FINISHED };
  DatcProxyState states[G_N_ELEMENTS (want)];
  g_autoptr (GError) error = NULL;

  g_assert_true (sge ()->parse_poll (&res, ids, states, &error));
  g_assert_no_error (error);
  for (gsize i = 0; i < G_N_ELEMENTS (want); i++)
    {
      g_test_message ("%s", ids[i]);
      g_assert_cmpstr (datc_proxy_state_name (states[i]), ==, datc_proxy_state_name (want[i]));
    }

  static const char *const bad[] = {
    "      7 0.25 a root qw 11/24/2026 06:37:45 1 2-\n",
    "      7 0.25 a root qw 11/24/2026 06:37:45 1 5-2:1\n",
    "      7 0.25 a root qw 11/24/2026 06:37:45 1 1-4:0\n",
    "      7 0.25 a root qw 11/24/2026 06:37:45 1 1,,2\n",
    "      7 0.25 a root qw 11/24/2026 06:37:45 1 x\n",
    "      7 0.25 a root r 11/24/2026 06:37:45 all.q@vm 1 2 extra\n",
  };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_auto (DatcCommandResult) bad_res = { .out = g_bytes_new_static (bad[i], strlen (bad[i])) };
      g_autoptr (GError) bad_error = NULL;

      g_test_message ("answer '%s'", bad[i]);
      g_assert_false (sge ()->parse_poll (&bad_res, ids, states, &bad_error));
      g_assert_error (bad_error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE);
      g_assert_true (g_str_has_prefix (bad_error->message, "sge: "));
    }
}

/* sge_types(1) host expressions: !a for one host, !(a|b) for several. */
static void
test_script_excludes_hosts (void)
{
  static const char *const one[] = { "node07", NULL };
  static const char *const two[] = { "node07", "node12", NULL };
  DatcProxyRequest req = base_request;

  g_autofree gchar *none = sge ()->script (&req);
  g_assert_null (strstr (none, "h=!"));
  req.exclude_hosts = one;
  g_autofree gchar *s1 = sge ()->script (&req);
  g_assert_nonnull (strstr (s1, "\n#$ -l h=!node07\n"));
  req.exclude_hosts = two;
  g_autofree gchar *s2 = sge ()->script (&req);
  g_assert_nonnull (strstr (s2, "\n#$ -l h=!(node07|node12)\n"));
  g_assert_true (datc_scheduler_can_exclude_hosts ("sge", NULL));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/site/sge/script/directives", test_script_directives);
  g_test_add_func ("/site/sge/script/excludes-hosts", test_script_excludes_hosts);
  g_test_add_func ("/site/sge/script/one-slot-no-walltime-no-queue",
                   test_script_one_slot_no_walltime_no_queue);
  g_test_add_func ("/site/sge/script/gives-the-agent-what-sge-granted",
                   test_script_gives_the_agent_what_sge_granted);
  g_test_add_func ("/site/sge/script/refuses-bad-names-and-queues",
                   test_script_refuses_bad_names_and_queues);
  g_test_add_func ("/site/sge/argv/submit-poll-cancel-lookup", test_argv);
  g_test_add_func ("/site/sge/argv/refuses-ids-that-are-not-sge-ids",
                   test_argv_refuses_ids_that_are_not_sge_ids);
  g_test_add_func ("/site/sge/parse/poll-maps-state-letters", test_poll_maps_state_letters);
  g_test_add_func ("/site/sge/parse/malformed-answers-are-parse-errors-naming-sge",
                   test_malformed_answers_are_parse_errors_naming_sge);
  g_test_add_func ("/site/sge/array/script-and-argv", test_array_script_and_argv);
  g_test_add_func ("/site/sge/array/poll-reads-task-lists", test_poll_reads_task_lists);
  g_test_add_func ("/site/sge/queue/argv-and-malformed-answers",
                   test_queue_argv_and_malformed_answers);
  recorded_add_tests (
      sge (),
      (RecordedCommands) { .submit = "qsub", .poll = "qstat", .cancel = "qdel", .queue = "qconf" });

  int status = g_test_run ();
  recorded_cleanup ();
  return status;
}
