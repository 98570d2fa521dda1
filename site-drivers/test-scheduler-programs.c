/* test-scheduler-programs.c: each scheduler's `programs` list (what
 * `datc sites check` looks for on a site) covers every command it runs:
 * a command's argv[0] is on the list, or, for a command wrapped in
 * `sh -c`, its script names a program of the list and only those.  And
 * each scheduler's proxy log is where its directives or submit put it
 * (the master reads the agent's "cannot reach" line there, and removes
 * the logs of proxies that ended well). */
#include <glib.h>
#include <string.h>

#include "drivers-private.h"

static const char *const ids[] = { "12345", "12346", NULL };
static const char *const condor_ids[] = { "12345.0", "12346.0", NULL }; /* cluster.proc */

/* The words of a script that look like a scheduler program of any of the
 * known families. */
static gboolean
names_only_listed (const char *script, const char *const *programs, gboolean *named_one)
{
  static const char *const family[]
      = { "sbatch",   "squeue",         "scancel",   "scontrol", "sacct",   "qsub",
          "qstat",    "qdel",           "qconf",     "qacct",    "qselect", "condor_submit",
          "condor_q", "condor_history", "condor_rm", "bsub",     "bjobs",   "bkill",
          "bqueues",  "bhist",          NULL };
  g_autoptr (GRegex) word = g_regex_new ("[A-Za-z_]+", 0, 0, NULL);
  g_autoptr (GMatchInfo) m = NULL;
  gboolean ok = TRUE;
  g_regex_match (word, script, 0, &m);
  while (g_match_info_matches (m))
    {
      g_autofree gchar *w = g_match_info_fetch (m, 0);
      if (g_strv_contains (family, w))
        {
          if (g_strv_contains (programs, w))
            *named_one = TRUE;
          else
            {
              g_test_message ("script runs %s, which the list lacks", w);
              ok = FALSE;
            }
        }
      g_match_info_next (m, NULL);
    }
  return ok;
}

static void
check_argv (const char *scheduler, const char *what, GStrv argv, const char *const *programs)
{
  /* A builder that refused these plain names would leave nothing checked. */
  if (argv == NULL)
    g_error ("%s %s: the builder refused plain names", scheduler, what);
  g_test_message ("%s %s: %s", scheduler, what, argv[0]);
  if (g_str_equal (argv[0], "/bin/sh"))
    {
      g_assert_cmpstr (argv[1], ==, "-c");
      gboolean named = FALSE;
      g_assert_true (names_only_listed (argv[2], programs, &named));
      g_assert_true (named);
    }
  else
    g_assert_true (g_strv_contains (programs, argv[0]));
}

static void
test_programs_cover_commands (gconstpointer data)
{
  const char *name = data;
  const DatcSchedulerClass *k = datc_scheduler_lookup (name);
  g_assert_nonnull (k);
  g_assert_nonnull (k->programs);
  DatcProxyRequest req = { .name = "datc-test-1",
                           .slots = 2,
                           .walltime_s = 600,
                           .workdir = "/tmp/wd",
                           .agent_command = "true" };
  g_auto (GStrv) submit = k->submit_argv (&req, "/tmp/wd/p.sh");
  const char *const *jobs = g_str_equal (name, "condor") ? condor_ids : ids;
  g_auto (GStrv) poll = k->poll_argv (jobs);
  g_auto (GStrv) cancel = k->cancel_argv (jobs);
  /* Every batch scheduler can find a job by name (submit recovery needs
   * it); one without queues says why instead of building a query. */
  g_assert_nonnull (k->lookup_argv);
  g_assert_true ((k->queue_argv == NULL) != (k->no_queues == NULL));
  g_auto (GStrv) lookup = k->lookup_argv ("datc-test-1");
  g_auto (GStrv) queue = k->queue_argv ? k->queue_argv ("q1") : NULL;
  g_assert_nonnull (submit);
  g_assert_nonnull (poll);
  g_assert_nonnull (cancel);
  check_argv (name, "submit", submit, k->programs);
  check_argv (name, "poll", poll, k->programs);
  check_argv (name, "cancel", cancel, k->programs);
  check_argv (name, "lookup", lookup, k->programs);
  if (k->queue_argv != NULL)
    check_argv (name, "queue", queue, k->programs);
  if (k->arrays != NULL)
    {
      g_auto (GStrv) array_submit = k->arrays->submit_argv (&req, 3, "/tmp/wd/p.sh");
      g_auto (GStrv) array_lookup = k->arrays->lookup_argv ("datc-test-1");
      check_argv (name, "array submit", array_submit, k->programs);
      check_argv (name, "array lookup", array_lookup, k->programs);
    }
}

/* The log of a plain job and of an array's element, as each script's
 * directives name it (slurm %j / %A_%a, sge $JOB_ID[.$TASK_ID], lsf
 * %J / %J_%I, pbs's own NAME.oSEQ[.INDEX], condor's error file, fork's
 * redirection beside the script); ids not of the scheduler get none. */
static void
test_log_paths (void)
{
  static const struct {
    const char *sched, *job, *log;
  } cases[] = {
    { "fork", "4242", "/w/p1.sh.log" },
    { "slurm", "123", "/w/datc-p1.123.log" },
    { "slurm", "123_4", "/w/datc-p1.123_4.log" },
    { "sge", "123", "/w/datc-p1.123.log" },
    { "sge", "123.4", "/w/datc-p1.123.4.log" },
    { "lsf", "123", "/w/datc-p1.123.log" },
    { "lsf", "123[4]", "/w/datc-p1.123_4.log" },
    { "pbs", "123.server", "/w/datc-p1.o123" },
    { "pbs", "123[4].server", "/w/datc-p1.o123.4" },
    { "condor", "77.0", "/w/datc-p1.77.err" },
    { "fork", "../x", NULL },
    { "slurm", "123/../x", NULL },
  };
  DatcProxyRequest req
      = { .name = "datc-p1", .slots = 1, .workdir = "/w", .agent_command = "datc-agent" };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (DatcSite) site = datc_site_new ("t", "local", cases[i].sched, NULL, NULL, &error);
      g_assert_no_error (error);
      g_autofree gchar *log = datc_site_proxy_log (site, &req, "p1.sh", cases[i].job);
      g_assert_cmpstr (log, ==, cases[i].log);
    }
  /* Among the directives, with the scheduler's own placeholders. */
  static const struct {
    const char *sched, *directive;
  } named[] = {
    { "slurm", "--output=datc-p1.%j.log" },
    { "sge", "-o datc-p1.$JOB_ID.log" },
    { "lsf", "-o datc-p1.%J.log" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (named); i++)
    {
      const DatcSchedulerClass *k = datc_scheduler_lookup (named[i].sched);
      g_autofree gchar *script = k->script (&req);
      g_assert_nonnull (script);
      g_assert_nonnull (strstr (script, named[i].directive));
    }
}

/* The logs a proxy leaves are named as its scheduler writes them (the
 * directives in scheduler-*.c), for a plain job and an array element, so
 * the site manager can remove them without guessing; a foreign id gets
 * none. */
static void
test_proxy_logs_name_what_the_scheduler_writes (void)
{
  static const struct {
    const char *scheduler, *job_id, *logs, *foreign_id;
  } cases[] = {
    { "fork", "4242", "p.sh.log", "12_3" },
    { "slurm", "12345", "datc-x.12345.log", "12345.0" },
    { "slurm", "12345_7", "datc-x.12345_7.log", NULL },
    { "sge", "12345", "datc-x.12345.log", "12345_7" },
    { "sge", "12345.7", "datc-x.12345.7.log", NULL },
    { "pbs", "812.server", "datc-x.o812", "812_3" },
    { "pbs", "812[3].server.example", "datc-x.o812.3", NULL },
    { "pbs", "812", "datc-x.o812", NULL },
    { "condor", "77.0", "datc-x.77.out datc-x.77.err", "77" },
    { "lsf", "5150", "datc-x.5150.log", "5150.1" },
    { "lsf", "5150[12]", "datc-x.5150_12.log", NULL },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const DatcSchedulerClass *k = datc_scheduler_lookup (cases[i].scheduler);
      g_assert_nonnull (k->proxy_logs);
      g_auto (GStrv) logs = k->proxy_logs ("datc-x", cases[i].job_id, "p.sh");
      g_assert_nonnull (logs);
      g_autofree gchar *joined = g_strjoinv (" ", logs);
      g_test_message ("%s %s: %s", cases[i].scheduler, cases[i].job_id, joined);
      g_assert_cmpstr (joined, ==, cases[i].logs);
      if (cases[i].foreign_id != NULL)
        g_assert_null (k->proxy_logs ("datc-x", cases[i].foreign_id, "p.sh"));
    }
}

/* What the rest of datc asks instead of reading the tables (driver.h):
 * the programs `datc sites check` looks for, whether a queue can be asked
 * about or named at all. */
static void
test_questions_outside_the_seam (void)
{
  g_auto (GStrv) slurm = datc_scheduler_programs ("slurm");
  g_assert_nonnull (slurm);
  g_assert_true (g_strv_contains ((const char *const *) slurm, "sbatch"));
  g_assert_true (g_strv_contains ((const char *const *) slurm, "squeue"));
  g_assert_true (g_strv_contains ((const char *const *) slurm, "scancel"));
  g_auto (GStrv) fork = datc_scheduler_programs ("fork");
  g_assert_nonnull (fork);
  for (guint i = 0; fork[i] != NULL; i++)
    for (guint j = i + 1; fork[j] != NULL; j++)
      g_assert_cmpstr (fork[i], !=, fork[j]);
  g_assert_null (datc_scheduler_programs ("nosuch"));

  const char *why = "unset";
  g_assert_true (datc_scheduler_has_queues ("pbs", &why));
  g_assert_null (why);
  g_assert_false (datc_scheduler_has_queues ("fork", &why));
  g_assert_nonnull (why);
  g_assert_false (datc_scheduler_has_queues ("nosuch", NULL));
  /* condor refuses a queue, fork ignores it; either takes none. */
  g_assert_false (datc_scheduler_takes_queue ("condor", "short"));
  g_assert_true (datc_scheduler_takes_queue ("condor", NULL));
  g_assert_true (datc_scheduler_takes_queue ("fork", "short"));
  g_assert_true (datc_scheduler_exists ("lsf"));
  g_assert_false (datc_scheduler_exists ("nosuch"));
  g_assert_true (datc_transport_exists ("ssh"));
  g_assert_false (datc_transport_exists ("rsh"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/scheduler/each-names-where-a-proxy-s-log-is", test_log_paths);
  static const char *const batch[] = { "slurm", "sge", "pbs", "condor", "lsf" };
  for (guint i = 0; i < G_N_ELEMENTS (batch); i++)
    {
      g_autofree gchar *path
          = g_strdup_printf ("/scheduler/%s/programs-cover-its-commands", batch[i]);
      g_test_add_data_func (path, batch[i], test_programs_cover_commands);
    }
  g_test_add_func ("/scheduler/proxy-logs-name-what-each-scheduler-writes",
                   test_proxy_logs_name_what_the_scheduler_writes);
  g_test_add_func ("/scheduler/questions-outside-the-seam", test_questions_outside_the_seam);
  return g_test_run ();
}
