/* test-scheduler-slurm.c: the slurm scheduler without a cluster.
 *
 * The script and argv builders are checked for what they put where and
 * what they refuse; the script is also run (with sh, its agent a command
 * that prints what the agent would see) to check DATC_SLOTS and
 * DATC_WALLTIME_END.  The parsers run on every answer recorded from the
 * real Slurm 22.05 test bed (tests/data/slurm, made by
 * tests/testbed/capture-slurm.sh), directly and through a local site with
 * stub commands, and on a table of malformed answers.  The run against
 * the real daemons is test-slurm-real.c. */

#include "scheduler-batch.h"
#include "tests/recorded.h"

#include <string.h>

static const DatcSchedulerClass *
slurm (void)
{
  const DatcSchedulerClass *klass = datc_scheduler_lookup ("slurm");

  g_assert_nonnull (klass);
  return klass;
}

static const DatcProxyRequest base_request = {
  .name = "datc-c42-p7",
  .slots = 16,
  .walltime_s = 7200,
  .queue = "batch",
  .workdir = "/scratch/datc",
  .agent_command = "/opt/datc/bin/datc-agent --connect tcp://10.1.2.3:5555",
};

/* ---- script ------------------------------------------------------------- */

static void
test_script_directives (void)
{
  g_autofree gchar *script = slurm ()->script (&base_request);

  g_assert_true (g_str_has_prefix (script, "#!/bin/sh\n#SBATCH --job-name=datc-c42-p7\n"));
  g_assert_nonnull (strstr (script, "#SBATCH --nodes=1\n#SBATCH --ntasks=1\n"));
  g_assert_nonnull (strstr (script, "#SBATCH --cpus-per-task=16\n"));
  g_assert_nonnull (strstr (script, "#SBATCH --output=datc-c42-p7.%j.log\n"));
  g_assert_nonnull (strstr (script, "#SBATCH --time=120\n"));
  g_assert_nonnull (strstr (script, "#SBATCH --signal=B:USR1@60\n"));
  g_assert_nonnull (strstr (script, "#SBATCH --partition=batch\n"));
  g_assert_nonnull (strstr (script, "DATC_SLOTS=${SLURM_CPUS_ON_NODE:-}\n"));
  g_assert_true (
      g_str_has_suffix (script, "\nexec /opt/datc/bin/datc-agent --connect tcp://10.1.2.3:5555\n"));
  /* Every directive comes before the first command. */
  const char *first_command = strstr (script, "\nDATC_SLOTS=");
  const char *last_directive = g_strrstr (script, "#SBATCH");
  g_assert_true (last_directive < first_command);
}

static void
test_script_rounds_walltime_up_and_scales_the_warning (void)
{
  static const struct {
    guint walltime_s;
    const char *time;
    const char *signal;
  } cases[] = {
    { 1, "--time=1\n", "@35\n" },   { 60, "--time=1\n", "@35\n" },
    { 61, "--time=2\n", "@35\n" },  { 180, "--time=3\n", "@45\n" },
    { 240, "--time=4\n", "@60\n" }, { 86400, "--time=1440\n", "@60\n" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      DatcProxyRequest req = base_request;
      req.walltime_s = cases[i].walltime_s;
      g_autofree gchar *script = slurm ()->script (&req);
      g_autofree gchar *time = g_strconcat ("#SBATCH ", cases[i].time, NULL);
      g_autofree gchar *signal = g_strconcat ("#SBATCH --signal=B:USR1", cases[i].signal, NULL);

      g_test_message ("walltime %u", cases[i].walltime_s);
      g_assert_nonnull (strstr (script, time));
      g_assert_nonnull (strstr (script, signal));
    }
}

static void
test_script_without_walltime_or_queue (void)
{
  DatcProxyRequest req = base_request;
  req.walltime_s = 0;
  req.queue = NULL;
  g_autofree gchar *script = slurm ()->script (&req);

  g_assert_null (strstr (script, "--time"));
  g_assert_null (strstr (script, "--signal"));
  g_assert_null (strstr (script, "--partition"));
  g_assert_null (strstr (script, "DATC_WALLTIME_END="));
}

static void
test_script_gives_the_agent_what_slurm_granted (void)
{
  DatcProxyRequest req = base_request;
  req.agent_command = SHOW_AGENT_ENV;
  g_autofree gchar *script = slurm ()->script (&req);
  const char *granted[] = { "SLURM_CPUS_ON_NODE=24", NULL };
  const char *odd[] = { "SLURM_CPUS_ON_NODE=2(x3)", NULL };
  const char *zero[] = { "SLURM_CPUS_ON_NODE=0", NULL };

  check_script_env (script, granted, 24, 7200);
  check_script_env (script, NULL, 16, 7200);
  check_script_env (script, odd, 16, 7200);
  check_script_env (script, zero, 16, 7200);
}

static void
test_script_refuses_what_cannot_be_a_job (void)
{
  static const char *const bad_names[] = {
    "",
    "7up",
    "-p",
    "a b",
    "a\nb",
    "a;b",
    "a$b",
    "a/b",
    "a*",
    "\xc3\xa9t\xc3\xa9",
    "a23456789012345678901234567890123456789012345678901234567890123456789",
  };
  static const char *const bad_queues[] = { "", "a b", "q\n", "q;rm", "$(q)", "q#" };

  for (gsize i = 0; i < G_N_ELEMENTS (bad_names); i++)
    {
      DatcProxyRequest req = base_request;
      req.name = bad_names[i];
      g_assert_null (slurm ()->script (&req));
      g_assert_null (slurm ()->lookup_argv (bad_names[i]));
    }
  for (gsize i = 0; i < G_N_ELEMENTS (bad_queues); i++)
    {
      DatcProxyRequest req = base_request;
      req.queue = bad_queues[i];
      g_assert_null (slurm ()->script (&req));
    }

  DatcProxyRequest req = base_request;
  req.slots = 0;
  g_assert_null (slurm ()->script (&req));
  req = base_request;
  req.agent_command = "a\nb";
  g_assert_null (slurm ()->script (&req));
  req.agent_command = "";
  g_assert_null (slurm ()->script (&req));
  req.agent_command = NULL;
  g_assert_null (slurm ()->script (&req));
  req = base_request;
  req.name = NULL;
  g_assert_null (slurm ()->script (&req));
}

/* ---- argv ----------------------------------------------------------------- */

static void
test_submit_argv (void)
{
  DatcProxyRequest req = base_request;
  req.workdir = "/w/it's here";
  req.submit_args = "--account=abc  --qos 'long run' --comment=\"a b\"";
  g_auto (GStrv) argv = slurm ()->submit_argv (&req, "/w/it's here/p 1.sh");
  const char *want[] = { "sbatch", "--parsable", "--chdir=/w/it's here", "--account=abc",
                         "--qos",  "long run",   "--comment=a b",        "/w/it's here/p 1.sh",
                         NULL };

  g_assert_cmpstrv (argv, want);
}

static void
test_submit_argv_refuses_what_it_cannot_pass (void)
{
  static const char *const bad_args[] = {
    "--x='unterminated",
    "--a \"\"",
    "--comment=$'a\\nb'x\n'y\nz'",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (bad_args); i++)
    {
      DatcProxyRequest req = base_request;
      req.submit_args = bad_args[i];
      g_test_message ("submit_args %s", bad_args[i]);
      g_assert_null (slurm ()->submit_argv (&req, "/scratch/datc/p.sh"));
    }

  GString *many = g_string_new (NULL);
  for (guint i = 0; i <= DATC_BATCH_SUBMIT_ARGS_MAX; i++)
    g_string_append (many, " -v");
  DatcProxyRequest req = base_request;
  req.submit_args = many->str;
  g_assert_null (slurm ()->submit_argv (&req, "/scratch/datc/p.sh"));
  g_string_free (many, TRUE);

  req = base_request;
  req.submit_args = "   ";
  g_auto (GStrv) blank = slurm ()->submit_argv (&req, "/scratch/datc/p.sh");
  g_assert_cmpuint (g_strv_length (blank), ==, 4);

  req = base_request;
  req.workdir = "scratch";
  g_assert_null (slurm ()->submit_argv (&req, "/scratch/p.sh"));
  req = base_request;
  g_assert_null (slurm ()->submit_argv (&req, "p.sh"));
}

static void
test_poll_cancel_and_lookup_argv (void)
{
  const char *ids[] = { "12", "13", "9007199254740993", NULL };
  g_auto (GStrv) poll = slurm ()->poll_argv (ids);
  g_auto (GStrv) cancel = slurm ()->cancel_argv (ids);
  g_auto (GStrv) lookup = slurm ()->lookup_argv ("datc-c42-p7");
  const char *want_poll[] = {
    "squeue", "-h", "-t", "all", "-r", "-j", "12,13,9007199254740993", "-o", "%i %T %r", NULL
  };
  const char *want_cancel[] = { "scancel", "12", "13", "9007199254740993", NULL };
  const char *want_lookup[]
      = { "squeue", "-h", "-t", "all", "--name=datc-c42-p7", "-o", "%i", NULL };

  g_assert_cmpstrv (poll, want_poll);
  g_assert_cmpstrv (cancel, want_cancel);
  g_assert_cmpstrv (lookup, want_lookup);
}

static void
test_argv_refuses_ids_that_are_not_slurm_ids (void)
{
  static const char *const bad[] = {
    "",      "0",        "012",       "-5",    "12a",
    "12 34", "1;reboot", "$(reboot)", "12,13", "1234567890123456789",
    " 12",   "12\n",     "12_0",      "12_03", "12_",
    "_3",    "12_3_4",   "12_[1-3]",  "12+0",  "12.batch",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      const char *ids[] = { "100", bad[i], NULL };
      g_auto (GStrv) poll = slurm ()->poll_argv (ids);
      g_auto (GStrv) cancel = slurm ()->cancel_argv (ids);

      g_test_message ("bad id '%s'", bad[i]);
      g_assert_null (poll);
      g_assert_null (cancel);
    }
}

static void
test_queue_argv (void)
{
  g_auto (GStrv) one = slurm ()->queue_argv ("short");
  g_auto (GStrv) list = slurm ()->queue_argv ("batch,short");
  const char *want_one[] = { "scontrol", "-a", "-o", "show", "partition", "short", NULL };
  const char *want_list[] = { "/bin/sh",
                              "-c",
                              "for p do scontrol -a -o show partition \"$p\" || exit; done",
                              "datc-slurm-queue",
                              "batch",
                              "short",
                              NULL };
  static const char *const bad[] = { "", ",", "a,,b", ",a", "a b", "$(reboot)", "a;b", "a\n" };

  g_assert_cmpstrv (one, want_one);
  g_assert_cmpstrv (list, want_list);
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_auto (GStrv) argv = slurm ()->queue_argv (bad[i]);
      g_test_message ("bad queue '%s'", bad[i]);
      g_assert_null (argv);
    }
}

static void
test_queue_malformed_answers (void)
{
  /* Another partition's line, nothing, a table. */
  queue_answer_fails (slurm (), "short", 0, "PartitionName=batch State=UP\n", "",
                      DATC_SITE_ERROR_PARSE);
  queue_answer_fails (slurm (), "short", 0, "", "", DATC_SITE_ERROR_PARSE);
  queue_answer_fails (slurm (), "short", 0, "PARTITION AVAIL\nshort up\n", "",
                      DATC_SITE_ERROR_PARSE);
  /* A list whose second name the answer does not mention. */
  queue_answer_fails (slurm (), "batch,short", 0, "PartitionName=batch State=UP\n", "",
                      DATC_SITE_ERROR_PARSE);
  /* Failures that do not say the partition is unknown. */
  queue_answer_fails (slurm (), "short", 1, "", "scontrol: error: something else\n",
                      DATC_SITE_ERROR_COMMAND);
  queue_answer_fails (slurm (), "short", 1,
                      "Partition short not found\nscontrol: error: something else\n", "",
                      DATC_SITE_ERROR_COMMAND);
  queue_answer_fails (slurm (), "short", 1, "", "Partition short not found\n",
                      DATC_SITE_ERROR_COMMAND);
  queue_answer_fails (slurm (), "short", 1, "", "", DATC_SITE_ERROR_COMMAND);
}

/* ---- malformed answers ------------------------------------------------------ */

typedef struct {
  const char *what;
  gint exit_status;
  const char *out;
  const char *err;
  gsize len; /* of out, when it holds a NUL */
} Malformed;

static void
test_malformed_answers_are_parse_errors_naming_slurm (void)
{
  static const Malformed submits[] = {
    { "words", 0, "Submitted batch job 12\n", "" },
    { "two ids", 0, "12\n13\n", "" },
    { "nothing", 0, "", "" },
    { "not a number", 0, "12a\n", "" },
    { "cluster but no id", 0, ";cluster\n", "" },
    { "NUL", 0, "12\0\n", "", 4 },
  };
  static const Malformed polls[] = {
    { "lower case state", 0, "12 running\n", "" },
    { "a reason where the state goes", 0, "12 Resources PENDING\n", "" },
    { "one word", 0, "12\n", "" },
    { "not an id", 0, "abc RUNNING\n", "" },
    { "table with header", 0, "JOBID STATE\n12 RUNNING\n", "" },
    { "garbage", 0, "\x1b[2J\n", "" },
  };
  static const Malformed lookups[] = {
    { "not an id", 0, "datc-c42-p7\n", "" },
    { "two words", 0, "12 PENDING\n", "" },
  };
  const char *ids[] = { "12", NULL };

  for (gsize i = 0; i < G_N_ELEMENTS (submits); i++)
    {
      gsize len = submits[i].len > 0 ? submits[i].len : strlen (submits[i].out);
      g_auto (DatcCommandResult) res = { .exit_status = submits[i].exit_status,
                                         .out = g_bytes_new_static (submits[i].out, len) };
      g_autofree gchar *id = NULL;
      g_autoptr (GError) error = NULL;

      g_test_message ("submit: %s", submits[i].what);
      g_assert_false (slurm ()->parse_submit (&res, &id, &error));
      g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE);
      g_assert_true (g_str_has_prefix (error->message, "slurm: "));
      g_assert_null (id);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (polls); i++)
    {
      g_auto (DatcCommandResult) res
          = { .out = g_bytes_new_static (polls[i].out, strlen (polls[i].out)) };
      DatcProxyState states[1];
      g_autoptr (GError) error = NULL;

      g_test_message ("poll: %s", polls[i].what);
      g_assert_false (slurm ()->parse_poll (&res, ids, states, &error));
      g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE);
      g_assert_true (g_str_has_prefix (error->message, "slurm: "));
    }
  for (gsize i = 0; i < G_N_ELEMENTS (lookups); i++)
    {
      g_auto (DatcCommandResult) res
          = { .out = g_bytes_new_static (lookups[i].out, strlen (lookups[i].out)) };
      g_autofree gchar *id = NULL;
      g_autoptr (GError) error = NULL;

      g_test_message ("lookup: %s", lookups[i].what);
      g_assert_false (slurm ()->parse_lookup (&res, &id, &error));
      g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE);
      g_assert_true (g_str_has_prefix (error->message, "slurm: "));
    }
}

static void
test_poll_maps_every_state (void)
{
  static const struct {
    const char *word;
    DatcProxyState state;
  } cases[] = {
    { "PENDING", DATC_PROXY_PENDING },        { "CONFIGURING", DATC_PROXY_PENDING },
    { "REQUEUED", DATC_PROXY_PENDING },       { "RUNNING", DATC_PROXY_RUNNING },
    { "COMPLETING", DATC_PROXY_RUNNING },     { "SUSPENDED", DATC_PROXY_RUNNING },
    { "COMPLETED", DATC_PROXY_FINISHED },     { "CANCELLED", DATC_PROXY_FINISHED },
    { "TIMEOUT", DATC_PROXY_FINISHED },       { "PREEMPTED", DATC_PROXY_FINISHED },
    { "FAILED", DATC_PROXY_FAILED },          { "NODE_FAIL", DATC_PROXY_FAILED },
    { "OUT_OF_MEMORY", DATC_PROXY_FAILED },   { "BOOT_FAIL", DATC_PROXY_FAILED },
    { "SOME_NEW_STATE", DATC_PROXY_UNKNOWN },
  };
  const char *ids[] = { "12", "13", NULL };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree gchar *out = g_strdup_printf ("12 %s\n", cases[i].word);
      g_auto (DatcCommandResult) res = { .out = g_bytes_new (out, strlen (out)) };
      DatcProxyState states[2];
      g_autoptr (GError) error = NULL;

      g_assert_true (slurm ()->parse_poll (&res, ids, states, &error));
      g_assert_no_error (error);
      g_assert_cmpstr (datc_proxy_state_name (states[0]), ==,
                       datc_proxy_state_name (cases[i].state));
      /* squeue forgot 13: it finished long ago. */
      g_assert_cmpint (states[1], ==, DATC_PROXY_FINISHED);
    }
}

/* %r is the rest of the line: kept for pending jobs only, "None" is no
 * reason, a collapsed line's goes to each element, and what reaches a
 * status line is one line of printable text, cut to DATC_SITE_REASON_MAX. */
static void
test_poll_keeps_pending_reasons (void)
{
  g_autofree gchar *long_reason = g_strnfill (DATC_SITE_REASON_MAX * 2, 'x');
  g_autofree gchar *out = g_strdup_printf (
      "12 PENDING Resources\n13 PENDING ReqNodeNotAvail, UnavailableNodes:n[1-2]\n"
      "14 RUNNING None\n15_[1-2] PENDING Priority\n16 PENDING None\n17 FAILED NonZeroExitCode\n"
      "18 PENDING \x1b[2J  held\tby \x7f admin\n19 PENDING %s\n20 PENDING\n",
      long_reason);
  g_auto (DatcCommandResult) res = { .out = g_bytes_new (out, strlen (out)) };
  const char *ids[] = { "12", "13", "14", "15_2", "16", "17", "18", "19", "20", "21", NULL };
  const char *want[] = { "Resources",
                         "ReqNodeNotAvail, UnavailableNodes:n[1-2]",
                         NULL,
                         "Priority",
                         NULL,
                         NULL,
                         "[2J held by admin",
                         NULL,
                         NULL,
                         NULL };
  DatcProxyState states[G_N_ELEMENTS (want)];
  gchar *reasons[G_N_ELEMENTS (want)] = { NULL };
  g_autoptr (GError) error = NULL;

  g_assert_true (slurm ()->parse_poll_reasons (&res, ids, states, reasons, &error));
  g_assert_no_error (error);
  for (gsize i = 0; i < G_N_ELEMENTS (want); i++)
    {
      g_test_message ("%s: %s", ids[i], reasons[i]);
      if (i == 7)
        {
          g_assert_cmpuint (strlen (reasons[i]), >, DATC_SITE_REASON_MAX / 2);
          g_assert_cmpuint (strlen (reasons[i]), <=, DATC_SITE_REASON_MAX);
        }
      else
        g_assert_cmpstr (reasons[i], ==, want[i]);
      g_free (reasons[i]);
    }
  g_assert_cmpint (states[1], ==, DATC_PROXY_PENDING);
  g_assert_cmpint (states[2], ==, DATC_PROXY_RUNNING);
  g_assert_cmpint (states[3], ==, DATC_PROXY_PENDING);
  g_assert_cmpint (states[9], ==, DATC_PROXY_FINISHED);
}

/* ---- arrays ----------------------------------------------------------- */

static void
test_array_script_and_argv (void)
{
  g_autofree gchar *script = slurm ()->arrays->script (&base_request);
  DatcProxyRequest req = base_request;
  req.submit_args = "--qos=long";
  g_auto (GStrv) submit = slurm ()->arrays->submit_argv (&req, 4, "/scratch/datc/a.sh");
  const char *want_submit[] = { "sbatch",      "--parsable", "--chdir=/scratch/datc",
                                "--array=1-4", "--qos=long", "/scratch/datc/a.sh",
                                NULL };
  g_auto (GStrv) lookup = slurm ()->arrays->lookup_argv ("datc-c42-p7");
  const char *want_lookup[]
      = { "squeue", "-h", "-t", "all", "-r", "--name=datc-c42-p7", "-o", "%F", NULL };
  g_autofree gchar *element = slurm ()->arrays->element_id ("123", 4);

  g_assert_true (g_str_has_prefix (script, "#!/bin/sh\n#SBATCH --job-name=datc-c42-p7\n"));
  g_assert_nonnull (strstr (script, "#SBATCH --output=datc-c42-p7.%A_%a.log\n"));
  g_assert_nonnull (strstr (script, "SLURM_ARRAY_TASK_ID"));
  g_assert_cmpstrv (submit, want_submit);
  g_assert_cmpstrv (lookup, want_lookup);
  g_assert_cmpstr (element, ==, "123_4");
  check_array_script (slurm (), "SLURM_ARRAY_TASK_ID");
}

/* squeue without -r (or another version) shows pending elements on one
 * line; each element asked about gets that line's state. */
static void
test_poll_reads_collapsed_elements (void)
{
  const char *out = "12_[1-3,7%2] PENDING\n12_4 RUNNING\n15_[0-2] PENDING\n13 RUNNING\n";
  g_auto (DatcCommandResult) res = { .out = g_bytes_new (out, strlen (out)) };
  const char *ids[]
      = { "12_1", "12_3", "12_4", "12_5", "12_7", "12_8", "13", "15_2", "16_1", "12", NULL };
  const DatcProxyState want[]
      = { DATC_PROXY_PENDING,  DATC_PROXY_PENDING,  DATC_PROXY_RUNNING, DATC_PROXY_FINISHED,
          DATC_PROXY_PENDING,  DATC_PROXY_FINISHED, DATC_PROXY_RUNNING, DATC_PROXY_PENDING,
          DATC_PROXY_FINISHED, DATC_PROXY_FINISHED };
  DatcProxyState states[G_N_ELEMENTS (want)];
  g_autoptr (GError) error = NULL;

  g_assert_true (slurm ()->parse_poll (&res, ids, states, &error));
  g_assert_no_error (error);
  for (gsize i = 0; i < G_N_ELEMENTS (want); i++)
    {
      g_test_message ("%s", ids[i]);
      g_assert_cmpstr (datc_proxy_state_name (states[i]), ==, datc_proxy_state_name (want[i]));
    }

  static const char *const bad[]
      = { "12_[] PENDING\n",  "12_[3-1] PENDING\n",  "12_[1-3 PENDING\n",   "12_[a] PENDING\n",
          "_[1-3] PENDING\n", "12_[1-3%] PENDING\n", "12_[1,,2] PENDING\n", "12_[1-3] pending\n" };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_auto (DatcCommandResult) bad_res = { .out = g_bytes_new (bad[i], strlen (bad[i])) };
      g_autoptr (GError) bad_error = NULL;

      g_test_message ("answer '%s'", bad[i]);
      g_assert_false (slurm ()->parse_poll (&bad_res, ids, states, &bad_error));
      g_assert_error (bad_error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE);
      g_assert_true (g_str_has_prefix (bad_error->message, "slurm: "));
    }
}

/* Nodes where tasks kept failing fast stay out of later proxies. */
static void
test_script_excludes_hosts (void)
{
  static const char *const one[] = { "node07", NULL };
  static const char *const two[] = { "node07", "node-12.cluster", NULL };
  static const char *const bad[] = { "node07", "x\n#SBATCH --uid=0", NULL };
  DatcProxyRequest req = base_request;

  g_autofree gchar *none = slurm ()->script (&req);
  g_assert_null (strstr (none, "--exclude"));
  req.exclude_hosts = one;
  g_autofree gchar *s1 = slurm ()->script (&req);
  g_assert_nonnull (strstr (s1, "\n#SBATCH --exclude=node07\n"));
  req.exclude_hosts = two;
  g_autofree gchar *s2 = slurm ()->script (&req);
  g_assert_nonnull (strstr (s2, "\n#SBATCH --exclude=node07,node-12.cluster\n"));
  g_assert_true (g_strrstr (s2, "#SBATCH") < strstr (s2, "\nDATC_SLOTS="));
  req.exclude_hosts = bad;
  g_assert_null (slurm ()->script (&req));
  g_assert_true (datc_scheduler_can_exclude_hosts ("slurm", NULL));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/site/slurm/script/directives", test_script_directives);
  g_test_add_func ("/site/slurm/script/excludes-hosts", test_script_excludes_hosts);
  g_test_add_func ("/site/slurm/script/rounds-walltime-up-and-scales-the-warning",
                   test_script_rounds_walltime_up_and_scales_the_warning);
  g_test_add_func ("/site/slurm/script/without-walltime-or-queue",
                   test_script_without_walltime_or_queue);
  g_test_add_func ("/site/slurm/script/gives-the-agent-what-slurm-granted",
                   test_script_gives_the_agent_what_slurm_granted);
  g_test_add_func ("/site/slurm/script/refuses-what-cannot-be-a-job",
                   test_script_refuses_what_cannot_be_a_job);
  g_test_add_func ("/site/slurm/argv/submit", test_submit_argv);
  g_test_add_func ("/site/slurm/argv/submit-refuses-what-it-cannot-pass",
                   test_submit_argv_refuses_what_it_cannot_pass);
  g_test_add_func ("/site/slurm/argv/poll-cancel-and-lookup", test_poll_cancel_and_lookup_argv);
  g_test_add_func ("/site/slurm/argv/refuses-ids-that-are-not-slurm-ids",
                   test_argv_refuses_ids_that_are_not_slurm_ids);
  g_test_add_func ("/site/slurm/parse/malformed-answers-are-parse-errors-naming-slurm",
                   test_malformed_answers_are_parse_errors_naming_slurm);
  g_test_add_func ("/site/slurm/parse/poll-maps-every-state", test_poll_maps_every_state);
  g_test_add_func ("/site/slurm/parse/poll-keeps-pending-reasons", test_poll_keeps_pending_reasons);
  g_test_add_func ("/site/slurm/argv/queue", test_queue_argv);
  g_test_add_func ("/site/slurm/parse/queue-malformed-answers", test_queue_malformed_answers);
  g_test_add_func ("/site/slurm/array/script-and-argv", test_array_script_and_argv);
  g_test_add_func ("/site/slurm/array/poll-reads-collapsed-elements",
                   test_poll_reads_collapsed_elements);
  recorded_add_tests (slurm (), (RecordedCommands) { .submit = "sbatch",
                                                     .poll = "squeue",
                                                     .cancel = "scancel",
                                                     .queue = "scontrol" });

  int status = g_test_run ();
  recorded_cleanup ();
  return status;
}
