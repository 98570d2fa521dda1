/* scheduler-condor.c: a proxy is one HTCondor vanilla-universe job (one
 * proc in its own cluster) whose executable is the proxy script.
 *
 * HTCondor has no candidate in Debian 12 (htcondor/condor are only named
 * by other packages), so this driver is tested on answers transcribed from
 * the HTCondor manual and sources (tests/data/condor, each file naming its
 * source), never against a daemon.
 *
 * Shapes that matter:
 *
 *  - HTCondor takes a submit description, not directives in the script.
 *    Submit is `condor_submit -terse [submit_args] -` in the workdir with
 *    the description on stdin, one line per positional parameter printed
 *    by `printf`, so nothing in it passes through a shell.  The values
 *    that go into it are checked: the name by the batch rules, the script
 *    path for line breaks and '$' (HTCondor macro syntax).
 *  - batch_name = NAME (JobBatchName, what lookup searches), request_cpus
 *    = N, output/error NAME.$(ClusterId).out/.err in the workdir.  HTCondor
 *    has no queues: a request naming one is refused.
 *  - DATC_SLOTS is the Cpus of the slot the job got, read from the
 *    machine ad file HTCondor names in _CONDOR_MACHINE_AD.
 *  - Walltime: HTCondor has none of its own.  periodic_remove removes the
 *    job once it has been running longer than the walltime (evaluated every
 *    PERIODIC_EXPR_INTERVAL, 60 s by default, so up to a minute late).
 *    There is no advance warning: removal sends kill_sig (SIGTERM by
 *    default; the agent drains on it) and a hard kill after the vacate
 *    time, which job_max_vacate_time asks to be 60 s.  The agent's own
 *    deadline (DATC_WALLTIME_END) is the real warning.
 *  - -terse prints "CLUSTER.PROC - CLUSTER.PROC"; the id is the first.
 *  - Poll asks condor_q (jobs in the queue) and then condor_history
 *    (jobs that left it, for their exit code) in one command, both with a
 *    constraint naming the ids, and `-af:j JobStatus ExitCode`.  A job
 *    neither knows is FINISHED.  JobStatus: 1 idle PENDING, 2 running, 6
 *    transferring output, 7 suspended RUNNING, 3 removed FINISHED, 4
 *    completed FINISHED (ExitCode 0) or FAILED, 5 held FAILED (it will not
 *    run again unless released: cancel it).  condor_history failing (no
 *    history file) only loses the exit codes.
 *  - condor_rm prints "Job C.P marked for removal" per job, "Job C.P not
 *    found" for one already gone (exit 1): the cancel wrapper passes that. */

#include "scheduler-batch.h"

#include <string.h>

#define CONDOR "condor"

/* Seconds between the soft kill (kill_sig) and the hard kill on removal. */
#define CONDOR_VACATE_S 60u

/* CLUSTER.PROC */
static gboolean
condor_id_is_valid (const char *id)
{
  return id != NULL && strlen (id) <= DATC_BATCH_ID_MAX
         && g_regex_match_simple ("^[1-9][0-9]{0,17}\\.[0-9]{1,9}$", id, 0, 0);
}

/* ---- script and submit ------------------------------------------------ */

static const char condor_slots_code[]
    = "DATC_SLOTS=\n"
      "if [ -r \"${_CONDOR_MACHINE_AD:-}\" ]; then\n"
      "  while read -r k e v; do\n"
      "    if [ \"$k\" = Cpus ] && [ \"$e\" = = ]; then DATC_SLOTS=$v; fi\n"
      "  done <\"$_CONDOR_MACHINE_AD\"\n"
      "fi\n";

static gchar *
condor_script (const DatcProxyRequest *req)
{
  g_return_val_if_fail (req != NULL, NULL);

  if (!datc_batch_request_is_valid (req) || req->queue != NULL)
    return NULL;
  return datc_batch_script (req, CONDOR, NULL, condor_slots_code, NULL);
}

/* The submit description, one line per element. */
static GPtrArray *
condor_description (const DatcProxyRequest *req, const char *script_path)
{
  GPtrArray *d = datc_batch_argv_new ();

  datc_batch_argv_add (d, "universe = vanilla");
  g_ptr_array_add (d, g_strdup_printf ("executable = %s", script_path));
  g_ptr_array_add (d, g_strdup_printf ("batch_name = %s", req->name));
  g_ptr_array_add (d, g_strdup_printf ("request_cpus = %u", req->slots));
  g_ptr_array_add (d, g_strdup_printf ("output = %s.$(ClusterId).out", req->name));
  g_ptr_array_add (d, g_strdup_printf ("error = %s.$(ClusterId).err", req->name));
  datc_batch_argv_add (d, "getenv = false");
  datc_batch_argv_add (d, "should_transfer_files = IF_NEEDED");
  datc_batch_argv_add (d, "when_to_transfer_output = ON_EXIT");
  if (req->walltime_s > 0)
    {
      g_ptr_array_add (d, g_strdup_printf ("periodic_remove = JobStatus == 2 && "
                                           "time() - EnteredCurrentStatus > %u",
                                           req->walltime_s));
      g_ptr_array_add (d, g_strdup_printf ("job_max_vacate_time = %u", CONDOR_VACATE_S));
    }
  if (req->exclude_hosts != NULL && req->exclude_hosts[0] != NULL)
    {
      g_autoptr (GString) r = g_string_new ("requirements = ");
      for (guint i = 0; req->exclude_hosts[i] != NULL; i++)
        g_string_append_printf (r, "%s(Machine != \"%s\")", i == 0 ? "" : " && ",
                                req->exclude_hosts[i]);
      g_ptr_array_add (d, g_string_free (g_steal_pointer (&r), FALSE));
    }
  datc_batch_argv_add (d, "queue");
  return d;
}
static GStrv
condor_submit_argv (const DatcProxyRequest *req, const char *script_path)
{
  g_return_val_if_fail (req != NULL, NULL);
  g_return_val_if_fail (script_path != NULL, NULL);

  g_auto (GStrv) extra = datc_batch_split_submit_args (req->submit_args);
  if (extra == NULL || !datc_batch_request_is_valid (req) || req->queue != NULL
      || script_path[0] != '/' || strpbrk (script_path, "\n\r$") != NULL)
    return NULL;

  g_autoptr (GPtrArray) description = condor_description (req, script_path);
  g_ptr_array_add (description, NULL);
  g_autofree gchar *text = g_strjoinv ("\n", (gchar **) description->pdata);

  g_autoptr (GPtrArray) args = datc_batch_argv_new ();
  datc_batch_argv_add (args, req->workdir);
  datc_batch_argv_add (args, text);
  datc_batch_argv_add_all (args, (const char *const *) extra);
  g_ptr_array_add (args, NULL);
  /* initialdir defaults to where condor_submit runs: the workdir. */
  return datc_batch_sh_argv ("cd \"$1\" || exit 1\n"
                             "d=$2\n"
                             "shift 2\n"
                             "printf '%s\\n' \"$d\" | condor_submit -terse \"$@\" -\n",
                             "datc-condor-submit", (const char *const *) args->pdata);
}

static gboolean
condor_parse_submit (const DatcCommandResult *res, gchar **job_id, GError **error)
{
  g_return_val_if_fail (res != NULL && job_id != NULL, FALSE);

  if (res->exit_status != 0)
    {
      datc_batch_set_command_error (error, CONDOR, "condor_submit", res);
      return FALSE;
    }

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, CONDOR, "condor_submit's stdout", &lines, error))
    return FALSE;

  g_auto (GStrv) words = lines[0] != NULL && lines[1] == NULL ? datc_batch_words (lines[0]) : NULL;
  if (words == NULL || g_strv_length (words) != 3 || strcmp (words[1], "-") != 0
      || !condor_id_is_valid (words[0]) || strcmp (words[0], words[2]) != 0)
    {
      g_autofree gchar *all = g_strjoinv ("\n", lines);
      datc_batch_set_parse_error (
          error, CONDOR, "expected 'C.P - C.P' for one job from condor_submit -terse", all);
      return FALSE;
    }
  *job_id = g_strdup (words[0]);
  return TRUE;
}

/* ---- poll ------------------------------------------------------------- */

/* (ClusterId == C && ProcId == P) || ...: ids are checked digits. */
static gchar *
condor_constraint (const char *const *ids)
{
  GString *c = g_string_new (NULL);

  for (gsize i = 0; ids[i] != NULL; i++)
    {
      const char *dot = strchr (ids[i], '.');
      g_string_append_printf (c, "%s(ClusterId == %.*s && ProcId == %s)", i > 0 ? " || " : "",
                              (int) (dot - ids[i]), ids[i], dot + 1);
    }
  return g_string_free (c, FALSE);
}

#define CONDOR_HISTORY_MARK "-- history"

static const char condor_poll_script[]
    = "condor_q -constraint \"$1\" -af:j JobStatus ExitCode || exit $?\n"
      "echo '" CONDOR_HISTORY_MARK "'\n"
      "condor_history -constraint \"$1\" -limit \"$2\" -af:j JobStatus ExitCode 2>/dev/null\n"
      "exit 0\n";

static GStrv
condor_poll_argv (const char *const *ids)
{
  if (!datc_batch_ids_are_valid (ids, condor_id_is_valid))
    return NULL;

  g_autofree gchar *constraint = condor_constraint (ids);
  g_autofree gchar *limit = g_strdup_printf ("%u", g_strv_length ((gchar **) ids));
  const char *args[] = { constraint, limit, NULL };
  return datc_batch_sh_argv (condor_poll_script, "datc-condor-poll", args);
}

static DatcProxyState
condor_state (const char *status, const char *exit_code)
{
  if (strlen (status) != 1)
    return DATC_PROXY_UNKNOWN;
  switch (status[0])
    {
    case '1':
      return DATC_PROXY_PENDING;
    case '2':
    case '6':
    case '7':
      return DATC_PROXY_RUNNING;
    case '3':
      return DATC_PROXY_FINISHED;
    case '4':
      return strcmp (exit_code, "0") == 0 || strcmp (exit_code, "undefined") == 0
                 ? DATC_PROXY_FINISHED
                 : DATC_PROXY_FAILED;
    case '5':
      return DATC_PROXY_FAILED;
    default:
      return DATC_PROXY_UNKNOWN;
    }
}

/* "C.P JobStatus ExitCode" lines, until the mark or the end; the queue's
 * answer is read first and wins over the history's. */
static gboolean
condor_parse_rows (char **lines, gsize *i, GHashTable *answers, gboolean override, GError **error)
{
  for (; lines[*i] != NULL && strcmp (lines[*i], CONDOR_HISTORY_MARK) != 0; (*i)++)
    {
      g_auto (GStrv) words = datc_batch_words (lines[*i]);
      DatcProxyState state = DATC_PROXY_UNKNOWN;

      if (g_strv_length (words) == 3 && condor_id_is_valid (words[0]))
        state = condor_state (words[1], words[2]);
      if (state == DATC_PROXY_UNKNOWN)
        {
          datc_batch_set_parse_error (error, CONDOR, "expected 'C.P JobStatus ExitCode'",
                                      lines[*i]);
          return FALSE;
        }
      if (override || !g_hash_table_contains (answers, words[0]))
        datc_batch_answers_set (answers, words[0], state);
    }
  return TRUE;
}

static gboolean
condor_parse_poll (const DatcCommandResult *res, const char *const *ids, DatcProxyState *states,
                   GError **error)
{
  g_return_val_if_fail (res != NULL && ids != NULL, FALSE);

  if (res->exit_status != 0)
    {
      datc_batch_set_command_error (error, CONDOR, "condor_q", res);
      return FALSE;
    }

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, CONDOR, "condor_q's stdout", &lines, error))
    return FALSE;

  g_autoptr (GHashTable) answers = datc_batch_answers_new ();
  gsize i = 0;
  if (!condor_parse_rows (lines, &i, answers, TRUE, error))
    return FALSE;
  if (lines[i] == NULL)
    {
      datc_batch_set_parse_error (error, CONDOR, "the answer stops before condor_history's",
                                  "(no '" CONDOR_HISTORY_MARK "' line)");
      return FALSE;
    }
  i++;
  if (!condor_parse_rows (lines, &i, answers, FALSE, error))
    return FALSE;
  if (lines[i] != NULL)
    {
      datc_batch_set_parse_error (error, CONDOR, "a second history mark", lines[i]);
      return FALSE;
    }
  datc_batch_answers_fill (answers, ids, states, DATC_PROXY_FINISHED);
  return TRUE;
}

/* ---- cancel and lookup ------------------------------------------------- */

static GStrv
condor_cancel_argv (const char *const *ids)
{
  return datc_batch_cancel_argv ("condor_rm",
                                 "^Job [0-9]+\\.[0-9]+ (marked for removal|not found|already "
                                 "marked for removal)$",
                                 "datc-condor-cancel", ids, condor_id_is_valid);
}

static const char condor_lookup_script[]
    = "condor_q -constraint \"$1\" -af:j JobStatus ExitCode || exit $?\n"
      "echo '" CONDOR_HISTORY_MARK "'\n"
      "condor_history -constraint \"$1\" -limit 2 -af:j JobStatus ExitCode 2>/dev/null\n"
      "exit 0\n";

static GStrv
condor_lookup_argv (const char *job_name)
{
  if (!datc_batch_name_is_valid (job_name))
    return NULL;

  /* The name's characters need no escaping in a ClassAd string. */
  g_autofree gchar *constraint = g_strdup_printf ("JobBatchName == \"%s\"", job_name);
  const char *args[] = { constraint, NULL };
  return datc_batch_sh_argv (condor_lookup_script, "datc-condor-lookup", args);
}

static gboolean
condor_parse_lookup (const DatcCommandResult *res, gchar **job_id, GError **error)
{
  g_return_val_if_fail (res != NULL && job_id != NULL, FALSE);

  *job_id = NULL;
  if (res->exit_status != 0)
    {
      datc_batch_set_command_error (error, CONDOR, "condor_q", res);
      return FALSE;
    }

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, CONDOR, "condor_q's stdout", &lines, error))
    return FALSE;

  g_autoptr (GHashTable) answers = datc_batch_answers_new ();
  gsize i = 0;
  if (!condor_parse_rows (lines, &i, answers, TRUE, error))
    return FALSE;
  if (lines[i] != NULL)
    {
      i++;
      if (!condor_parse_rows (lines, &i, answers, FALSE, error))
        return FALSE;
    }

  g_autofree const char **keys = (const char **) g_hash_table_get_keys_as_array (answers, NULL);
  return datc_batch_lookup_result (keys, CONDOR, job_id, error);
}

/* output = NAME.$(ClusterId).out, error = NAME.$(ClusterId).err; the id
 * is CLUSTER.PROC. */
static GStrv
condor_proxy_logs (const char *job_name, const char *job_id, const char *script_name)
{
  (void) script_name;
  if (!condor_id_is_valid (job_id))
    return NULL;
  int cluster = (int) strcspn (job_id, ".");
  GStrv logs = g_new0 (gchar *, 3);
  logs[0] = g_strdup_printf ("%s.%.*s.out", job_name, cluster, job_id);
  logs[1] = g_strdup_printf ("%s.%.*s.err", job_name, cluster, job_id);
  return logs;
}

static const char *const condor_programs[]
    = { "condor_submit", "condor_q", "condor_history", "condor_rm", NULL };

const DatcSchedulerClass datc_scheduler_condor = {
  .name = "condor",
  .script = condor_script,
  .submit_argv = condor_submit_argv,
  .parse_submit = condor_parse_submit,
  .poll_argv = condor_poll_argv,
  .parse_poll = condor_parse_poll,
  .cancel_argv = condor_cancel_argv,
  .lookup_argv = condor_lookup_argv,
  .parse_lookup = condor_parse_lookup,
  /* A request naming a queue is refused (see the top of this file). */
  .no_queues = "HTCondor has no queues: leave `queue` unset",
  .programs = condor_programs,
  .proxy_logs = condor_proxy_logs,
};
