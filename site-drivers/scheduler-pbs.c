/* scheduler-pbs.c: a proxy is one PBS Professional / OpenPBS job with one
 * chunk of `slots` CPUs.
 *
 * Tested live against OpenPBS 23.06.06, built from source by
 * tests/testbed/pbs-build.sh (no PBS server is packaged for Debian 12):
 * tests/data/pbs/live-*.txt are its answers (capture-pbs.sh), the other
 * files there are transcribed from the documentation.  Torque is not
 * targeted: its `qstat -x` means XML and it has no `select`.
 *
 * Shapes that matter:
 *
 *  - `-l select=1:ncpus=N`, `-l walltime=HH:MM:SS`, `-j oe`; the log is
 *    PBS's default NAME.oSEQ in the directory qsub ran in, which the
 *    submit command `cd`s to.  A PBS job starts in $HOME (sandbox=HOME),
 *    so the script `cd`s to the workdir before it execs the agent.
 *  - DATC_SLOTS is NCPUS (PBS Pro) or PBS_NP / PBS_NUM_PPN (Torque-style
 *    sites); the script computes DATC_WALLTIME_END from its own start.
 *  - No advance warning exists: PBS documents none.  At the walltime the
 *    MoM kills the job (SIGTERM, then SIGKILL), and so does qdel; the
 *    agent drains on SIGTERM and should keep its own deadline.
 *  - Submit prints the job id ("SEQ.SERVER") alone; SEQ starts at 0 on a
 *    fresh server (the documentation's examples never show it).
 *  - Poll is `qstat -x -f -F dsv IDS`: one line per job, "Job Id: ID|
 *    attr=value|..." with '|' inside values escaped by a backslash (the
 *    man page shows "attr = value"; 23.06 prints no spaces: both are
 *    read); -x keeps finished jobs (state F, with Exit_status) while job
 *    history is on, which it is not by default.  An id it does not know
 *    ("qstat: Unknown Job Id ID", the "Job has finished" answer without
 *    -x, or, history off, "qstat: PBS is not configured to maintain job
 *    history ID" with exit 0) is FINISHED; qstat then exits non-zero (the
 *    error number mod 256), which is not an error when those are the only
 *    complaints.
 *  - Exit_status 0, -29 (JOB_EXEC_KILL_WALLTIME) or >= 256 (killed by a
 *    signal: the walltime or qdel) is how proxies end: FINISHED; 1..255
 *    and PBS's other negative codes (could not start it): FAILED.
 *  - qdel says "qdel: Unknown Job Id ID" / "qdel: Job has finished ID"
 *    for jobs already gone: the cancel wrapper lets that pass.
 *  - Lookup is `qselect -x -N NAME`: job ids, whitespace-separated.
 *  - The queue is asked about with `qstat -Q -f Q` (Q or Q@SERVER):
 *    "Queue: Q" then "    attr = value" lines (queue_type, enabled,
 *    started, ...); an unknown one gives "qstat: Unknown queue Q" and the
 *    error code as exit status (PBSE_UNKQUE 15018, seen as 170).
 *  - Arrays: `qsub -J 1-K` prints "SEQ[].SERVER"; subjob I is
 *    SEQ[I].SERVER, which qstat and qdel take; a finished subjob is X in
 *    the documentation, F with history on in 23.06.  qselect lists the
 *    array as SEQ[].SERVER.  X < Y in -J, so there is no array of one. */

#include "scheduler-batch.h"

#include <string.h>

#define PBS "pbs"

/* SEQ[.SERVER][@SERVER], SERVER a host name, SEQ from 0; a subjob of an
 * array is SEQ[INDEX][.SERVER]. */
static gboolean
pbs_id_is_valid (const char *id)
{
  return id != NULL && strlen (id) <= DATC_BATCH_ID_MAX
         && g_regex_match_simple ("^(0|[1-9][0-9]{0,17})(\\[[1-9][0-9]{0,8}\\])?"
                                  "(\\.[A-Za-z0-9][A-Za-z0-9.-]*)?"
                                  "(@[A-Za-z0-9][A-Za-z0-9.-]*)?$",
                                  id, 0, 0);
}

/* An array job as qsub -J and qselect name it: SEQ[][.SERVER]. */
static gboolean
pbs_array_id_is_valid (const char *id)
{
  return id != NULL && strlen (id) <= DATC_BATCH_ID_MAX
         && g_regex_match_simple ("^(0|[1-9][0-9]{0,17})\\[\\](\\.[A-Za-z0-9][A-Za-z0-9.-]*)?$", id,
                                  0, 0);
}
/* ---- script and submit ------------------------------------------------ */

/* The script of one proxy or of an array (DATC_ARRAY_INDEX from
 * PBS_ARRAY_INDEX; PBS names each subjob's log NAME.oSEQ.INDEX itself). */
static gchar *
pbs_write_script (const DatcProxyRequest *req, gboolean array)
{
  g_return_val_if_fail (req != NULL, NULL);

  if (!datc_batch_request_is_valid (req))
    return NULL;

  g_autoptr (GString) d = g_string_new (NULL);
  g_string_append_printf (d, "#PBS -N %s\n", req->name);
  g_string_append_printf (d, "#PBS -l select=1:ncpus=%u\n", req->slots);
  if (req->walltime_s > 0)
    g_string_append_printf (d, "#PBS -l walltime=%u:%02u:%02u\n", req->walltime_s / 3600,
                            req->walltime_s / 60 % 60, req->walltime_s % 60);
  if (req->queue != NULL)
    g_string_append_printf (d, "#PBS -q %s\n", req->queue);
  /* exclude_hosts: none (see no_exclude) */
  g_string_append (d, "#PBS -j oe\n");

  g_autofree gchar *workdir = g_shell_quote (req->workdir);
  g_autofree gchar *index_code
      = array ? datc_batch_array_index_code ("PBS_ARRAY_INDEX", FALSE) : g_strdup ("");
  g_autofree gchar *cd = g_strdup_printf ("%scd %s || exit 1\n", index_code, workdir);
  return datc_batch_script (req, PBS, d->str, "DATC_SLOTS=${NCPUS:-${PBS_NUM_PPN:-${PBS_NP:-}}}\n",
                            cd);
}

static gchar *
pbs_script (const DatcProxyRequest *req)
{
  return pbs_write_script (req, FALSE);
}

/* qsub for one job (k == 0) or an array of subjobs 1..k. */
static GStrv
pbs_write_submit_argv (const DatcProxyRequest *req, guint k, const char *script_path)
{
  g_return_val_if_fail (req != NULL, NULL);
  g_return_val_if_fail (script_path != NULL, NULL);

  g_auto (GStrv) extra = datc_batch_split_submit_args (req->submit_args);
  if (extra == NULL || req->workdir == NULL || req->workdir[0] != '/' || script_path[0] != '/')
    return NULL;

  g_autoptr (GPtrArray) args = datc_batch_argv_new ();
  datc_batch_argv_add (args, req->workdir);
  if (k > 0)
    {
      datc_batch_argv_add (args, "-J");
      g_ptr_array_add (args, g_strdup_printf ("1-%u", k));
    }
  datc_batch_argv_add_all (args, (const char *const *) extra);
  datc_batch_argv_add (args, script_path);
  g_ptr_array_add (args, NULL);
  /* PBS_O_WORKDIR, and with it the default log's place, is where qsub
   * runs. */
  return datc_batch_sh_argv ("cd \"$1\" || exit 1\nshift\nexec qsub \"$@\"\n", "datc-pbs-submit",
                             (const char *const *) args->pdata);
}

static GStrv
pbs_submit_argv (const DatcProxyRequest *req, const char *script_path)
{
  return pbs_write_submit_argv (req, 0, script_path);
}

static gboolean
pbs_parse_submit (const DatcCommandResult *res, gchar **job_id, GError **error)
{
  g_return_val_if_fail (res != NULL && job_id != NULL, FALSE);

  if (res->exit_status != 0)
    {
      datc_batch_set_command_error (error, PBS, "qsub", res);
      return FALSE;
    }

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, PBS, "qsub's stdout", &lines, error))
    return FALSE;
  return datc_batch_one_id ((const char *const *) lines, pbs_id_is_valid, PBS,
                            "expected one job id from qsub", job_id, error);
}

/* ---- poll ------------------------------------------------------------- */

static GStrv
pbs_poll_argv (const char *const *ids)
{
  if (!datc_batch_ids_are_valid (ids, pbs_id_is_valid))
    return NULL;

  GPtrArray *argv = datc_batch_argv_new ();
  const char *const fixed[] = { "qstat", "-x", "-f", "-F", "dsv", NULL };
  datc_batch_argv_add_all (argv, fixed);
  datc_batch_argv_add_all (argv, ids);
  return datc_batch_argv_end (argv);
}

/* The fields of one DSV line, split at '|' that are not escaped, with the
 * escapes removed. */
static GStrv
dsv_fields (const char *line)
{
  GPtrArray *fields = datc_batch_argv_new ();
  GString *field = g_string_new (NULL);

  for (const char *p = line; *p != '\0'; p++)
    {
      if (*p == '\\' && p[1] != '\0')
        g_string_append_c (field, *++p);
      else if (*p == '|')
        {
          g_ptr_array_add (fields, g_string_free (field, FALSE));
          field = g_string_new (NULL);
        }
      else
        g_string_append_c (field, *p);
    }
  g_ptr_array_add (fields, g_string_free (field, FALSE));
  return datc_batch_argv_end (fields);
}

/* "name=value" (what OpenPBS 23.06 prints) or "name = value" (what its
 * man page shows) -> value, when the field is that attribute. */
static const char *
dsv_value (const char *field, const char *name)
{
  gsize len = strlen (name);

  if (strncmp (field, name, len) != 0)
    return NULL;
  if (field[len] == '=')
    return field + len + 1;
  if (strncmp (field + len, " = ", 3) == 0)
    return field + len + 3;
  return NULL;
}

static DatcProxyState
pbs_state (const char *state, const char *exit_status)
{
  if (strlen (state) != 1)
    return DATC_PROXY_UNKNOWN;
  switch (state[0])
    {
    case 'Q':
    case 'H':
    case 'W':
    case 'T':
      return DATC_PROXY_PENDING;
    case 'R':
    case 'E':
    case 'S':
    case 'U':
    case 'B':
      return DATC_PROXY_RUNNING;
    case 'X':
      return DATC_PROXY_FINISHED;
    case 'F':
      {
        if (exit_status == NULL)
          return DATC_PROXY_FINISHED;
        gchar *end = NULL;
        gint64 code = g_ascii_strtoll (exit_status, &end, 10);
        if (end == exit_status || *end != '\0')
          return DATC_PROXY_UNKNOWN;
        return code == 0 || code == -29 || code >= 256 ? DATC_PROXY_FINISHED : DATC_PROXY_FAILED;
      }
    default:
      return DATC_PROXY_UNKNOWN;
    }
}

/* The sequence number, with a subjob's [INDEX]: what a job id means
 * whatever server suffix the answer prints (short or fully qualified). */
static gchar *
pbs_sequence (const char *id)
{
  gsize len = strspn (id, "0123456789");

  if (id[len] == '[')
    {
      const char *close = strchr (id + len, ']');
      if (close != NULL)
        len = (gsize) (close - id) + 1;
    }
  return g_strndup (id, len);
}

/* A queued job's comment says why the scheduler did not run it: "Not
 * Running: Insufficient amount of resource: ncpus"; the prefix says
 * nothing a pending state does not. */
static const char *
pbs_reason (const char *comment)
{
  if (comment != NULL && g_str_has_prefix (comment, "Not Running: "))
    return comment + strlen ("Not Running: ");
  return comment;
}

static gboolean
pbs_parse_poll_reasons (const DatcCommandResult *res, const char *const *ids,
                        DatcProxyState *states, gchar **reasons, GError **error)
{
  g_return_val_if_fail (res != NULL && ids != NULL, FALSE);

  g_auto (GStrv) lines = NULL;
  g_auto (GStrv) err_lines = NULL;
  if (!datc_batch_answer_lines (res->out, PBS, "qstat's stdout", &lines, error)
      || !datc_batch_answer_lines (res->err, PBS, "qstat's stderr", &err_lines, error))
    return FALSE;

  g_autoptr (GHashTable) answers = datc_batch_answers_new ();
  g_autoptr (GHashTable) by_sequence = datc_batch_answers_new ();
  g_autoptr (GHashTable) why = datc_batch_reasons_new ();
  g_autoptr (GHashTable) why_by_sequence = datc_batch_reasons_new ();

  /* Complaints about ids: gone.  Anything else on stderr with a failed
   * exit: the command failed. */
  g_autoptr (GRegex) gone = g_regex_new ("^qstat: (?:Unknown Job Id (\\S+)|(\\S+) Job has "
                                         "finished, use -x or -H to obtain historical job "
                                         "information|PBS is not configured to maintain job "
                                         "history (\\S+))$",
                                         0, 0, NULL);
  for (gsize i = 0; err_lines[i] != NULL; i++)
    {
      g_autoptr (GMatchInfo) match = NULL;

      if (g_regex_match (gone, err_lines[i], 0, &match))
        {
          g_autofree gchar *a = g_match_info_fetch (match, 1);
          g_autofree gchar *b = g_match_info_fetch (match, 2);
          g_autofree gchar *c = g_match_info_fetch (match, 3);
          const char *id = a != NULL && a[0] != '\0' ? a : b != NULL && b[0] != '\0' ? b : c;
          g_autofree gchar *seq = pbs_sequence (id);
          datc_batch_answers_set (answers, id, DATC_PROXY_FINISHED);
          datc_batch_answers_set (by_sequence, seq, DATC_PROXY_FINISHED);
        }
      else if (res->exit_status != 0)
        {
          datc_batch_set_command_error (error, PBS, "qstat", res);
          return FALSE;
        }
    }
  if (res->exit_status != 0 && err_lines[0] == NULL)
    {
      datc_batch_set_command_error (error, PBS, "qstat", res);
      return FALSE;
    }

  for (gsize i = 0; lines[i] != NULL; i++)
    {
      g_auto (GStrv) fields = dsv_fields (lines[i]);
      const char *id = g_str_has_prefix (fields[0], "Job Id: ") ? fields[0] + 8 : NULL;
      const char *state = NULL, *exit_status = NULL, *comment = NULL;

      for (gsize j = 1; fields[j] != NULL; j++)
        {
          state = state != NULL ? state : dsv_value (fields[j], "job_state");
          exit_status = exit_status != NULL ? exit_status : dsv_value (fields[j], "Exit_status");
          comment = comment != NULL ? comment : dsv_value (fields[j], "comment");
        }
      if (id == NULL || !pbs_id_is_valid (id) || state == NULL
          || pbs_state (state, exit_status) == DATC_PROXY_UNKNOWN)
        {
          datc_batch_set_parse_error (
              error, PBS, "expected 'Job Id: ID|...|job_state=S|...' from qstat", lines[i]);
          return FALSE;
        }
      DatcProxyState s = pbs_state (state, exit_status);
      g_autofree gchar *seq = pbs_sequence (id);
      datc_batch_answers_set (answers, id, s);
      datc_batch_answers_set (by_sequence, seq, s);
      datc_batch_reasons_set (why, id, pbs_reason (comment));
      datc_batch_reasons_set (why_by_sequence, seq, pbs_reason (comment));
    }

  for (gsize i = 0; ids[i] != NULL; i++)
    {
      const char *one[] = { ids[i], NULL };
      g_autofree gchar *seq = pbs_sequence (ids[i]);
      const char *by_seq[] = { seq, NULL };

      gboolean exact = g_hash_table_contains (answers, ids[i]);

      if (exact)
        datc_batch_answers_fill (answers, one, &states[i], DATC_PROXY_FINISHED);
      else
        datc_batch_answers_fill (by_sequence, by_seq, &states[i], DATC_PROXY_FINISHED);
      if (reasons != NULL)
        {
          const char *reason = exact ? g_hash_table_lookup (why, ids[i])
                                     : g_hash_table_lookup (why_by_sequence, seq);
          if (states[i] == DATC_PROXY_PENDING)
            reasons[i] = g_strdup (reason);
        }
    }
  return TRUE;
}

static gboolean
pbs_parse_poll (const DatcCommandResult *res, const char *const *ids, DatcProxyState *states,
                GError **error)
{
  return pbs_parse_poll_reasons (res, ids, states, NULL, error);
}

/* ---- cancel and lookup ------------------------------------------------- */

static GStrv
pbs_cancel_argv (const char *const *ids)
{
  /* qdel prints nothing for a job it deletes, "qdel: TEXT ID" otherwise. */
  return datc_batch_cancel_argv ("qdel",
                                 "^qdel: (Unknown Job Id|Job has finished|Request invalid for "
                                 "state of job|Delete already in progress) ",
                                 "datc-pbs-cancel", ids, pbs_id_is_valid);
}

static GStrv
pbs_lookup_argv (const char *job_name)
{
  if (!datc_batch_name_is_valid (job_name))
    return NULL;

  GPtrArray *argv = datc_batch_argv_new ();
  const char *const fixed[] = { "qselect", "-x", "-N", job_name, NULL };
  datc_batch_argv_add_all (argv, fixed);
  return datc_batch_argv_end (argv);
}

/* qselect's answer: the ids of the jobs of one name, each checked by
 * `valid` (a plain job id, or an array's SEQ[].SERVER). */
static gboolean
parse_qselect_ids (const DatcCommandResult *res, gboolean (*valid) (const char *),
                   const char *expected, gchar **id, GError **error)
{
  *id = NULL;
  if (res->exit_status != 0)
    {
      datc_batch_set_command_error (error, PBS, "qselect", res);
      return FALSE;
    }

  g_autofree gchar *out = NULL;
  if (!datc_site_answer_text (res->out, "qselect's stdout", &out, error))
    {
      g_prefix_error (error, PBS ": ");
      return FALSE;
    }
  g_auto (GStrv) ids = datc_batch_words (out);
  return datc_batch_lookup_ids ((const char *const *) ids, valid, PBS, expected, id, error);
}

static gboolean
pbs_parse_lookup (const DatcCommandResult *res, gchar **job_id, GError **error)
{
  g_return_val_if_fail (res != NULL && job_id != NULL, FALSE);
  return parse_qselect_ids (res, pbs_id_is_valid, "expected job ids from qselect", job_id, error);
}

/* ---- arrays ------------------------------------------------------------- */

static gchar *
pbs_array_script (const DatcProxyRequest *req)
{
  return pbs_write_script (req, TRUE);
}

static GStrv
pbs_array_submit_argv (const DatcProxyRequest *req, guint k, const char *script_path)
{
  if (!datc_batch_array_size_is_valid (k))
    return NULL;
  return pbs_write_submit_argv (req, k, script_path);
}

/* qsub -J prints the array's id, "SEQ[].SERVER". */
static gboolean
pbs_array_parse_submit (const DatcCommandResult *res, guint k, gchar **base_id, GError **error)
{
  g_return_val_if_fail (res != NULL && base_id != NULL, FALSE);
  (void) k;

  if (res->exit_status != 0)
    {
      datc_batch_set_command_error (error, PBS, "qsub", res);
      return FALSE;
    }

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, PBS, "qsub's stdout", &lines, error))
    return FALSE;
  return datc_batch_one_id ((const char *const *) lines, pbs_array_id_is_valid, PBS,
                            "expected one array id SEQ[].SERVER from qsub -J", base_id, error);
}

/* SEQ[].SERVER -> SEQ[INDEX].SERVER */
static gchar *
pbs_element_id (const char *base_id, guint index)
{
  if (!pbs_array_id_is_valid (base_id) || index == 0)
    return NULL;
  const char *brackets = strstr (base_id, "[]");
  return g_strdup_printf ("%.*s[%u]%s", (int) (brackets - base_id), base_id, index, brackets + 2);
}

/* qselect lists an array once, by its SEQ[].SERVER. */
static gboolean
pbs_array_parse_lookup (const DatcCommandResult *res, gchar **base_id, GError **error)
{
  g_return_val_if_fail (res != NULL && base_id != NULL, FALSE);
  return parse_qselect_ids (res, pbs_array_id_is_valid,
                            "expected array ids SEQ[].SERVER from qselect", base_id, error);
}

static const DatcSchedulerArrays pbs_arrays = {
  .script = pbs_array_script,
  .submit_argv = pbs_array_submit_argv,
  .parse_submit = pbs_array_parse_submit,
  .element_id = pbs_element_id,
  .lookup_argv = pbs_lookup_argv,
  .parse_lookup = pbs_array_parse_lookup,
};

/* ---- queue ------------------------------------------------------------ */

static GStrv
pbs_queue_argv (const char *queue)
{
  /* One destination: QUEUE or QUEUE@SERVER. */
  if (!datc_batch_queue_is_valid (queue) || strchr (queue, ',') != NULL)
    return NULL;

  GPtrArray *argv = datc_batch_argv_new ();
  const char *const fixed[] = { "qstat", "-Q", "-f", NULL };

  datc_batch_argv_add_all (argv, fixed);
  datc_batch_argv_add (argv, queue);
  return datc_batch_argv_end (argv);
}

static gboolean
pbs_parse_queue (const DatcCommandResult *res, const char *queue, gboolean *exists, gchar **answer,
                 GError **error)
{
  g_return_val_if_fail (res != NULL && queue != NULL && exists != NULL && answer != NULL, FALSE);

  if (res->exit_status != 0)
    return datc_batch_queue_missing (res, res->err, "^qstat: Unknown queue", NULL, PBS, "qstat -Q",
                                     exists, answer, error);

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, PBS, "qstat -Q's stdout", &lines, error))
    return FALSE;

  /* "Queue: NAME" shows the name without the server part. */
  g_autofree gchar *name = g_strndup (queue, strcspn (queue, "@"));
  g_autofree gchar *header = g_strconcat ("Queue: ", name, NULL);
  g_autoptr (GString) summary = NULL;
  for (gsize i = 0; lines[i] != NULL; i++)
    {
      if (g_str_has_prefix (lines[i], "Queue: "))
        {
          if (summary != NULL)
            break;
          if (strcmp (lines[i], header) == 0)
            summary = g_string_new (name);
          continue;
        }
      if (summary == NULL)
        continue;
      static const char *const keys[] = { "queue_type = ", "enabled = ", "started = " };
      for (gsize k = 0; k < G_N_ELEMENTS (keys); k++)
        if (g_str_has_prefix (lines[i], keys[k]))
          g_string_append_printf (summary, "%s%s", strchr (summary->str, ':') ? ", " : ": ",
                                  lines[i]);
    }
  if (summary == NULL)
    {
      g_autofree gchar *all = g_strjoinv ("\n", lines);
      g_autofree gchar *what = g_strdup_printf ("expected '%s' from qstat -Q -f", header);
      datc_batch_set_parse_error (error, PBS, what, all);
      return FALSE;
    }
  const char *const parts[] = { summary->str, NULL };
  *exists = TRUE;
  *answer = datc_batch_queue_answer (parts);
  return TRUE;
}

/* PBS's default log (-j oe) is NAME.oSEQ, a subjob's NAME.oSEQ.INDEX:
 * SEQ[INDEX].SERVER gives both. */
static GStrv
pbs_proxy_logs (const char *job_name, const char *job_id, const char *script_name)
{
  (void) script_name;
  if (!pbs_id_is_valid (job_id))
    return NULL;
  gsize seq = strspn (job_id, "0123456789");
  g_autofree gchar *index = NULL;
  if (job_id[seq] == '[')
    index = g_strndup (job_id + seq + 1, strcspn (job_id + seq + 1, "]"));
  GStrv logs = g_new0 (gchar *, 2);
  logs[0] = g_strdup_printf ("%s.o%.*s%s%s", job_name, (int) seq, job_id, index ? "." : "",
                             index ? index : "");
  return logs;
}

static const char *const pbs_programs[] = { "qsub", "qstat", "qdel", "qselect", NULL };

const DatcSchedulerClass datc_scheduler_pbs = {
  .name = "pbs",
  /* A select chunk says what a host must have (host=NAME picks one), never
   * what it must not: no "!=" in PBS resource requests. */
  .no_exclude = "PBS has no per-job host exclusion (a select chunk can name a host, not "
                "exclude one)",
  .script = pbs_script,
  .submit_argv = pbs_submit_argv,
  .parse_submit = pbs_parse_submit,
  .poll_argv = pbs_poll_argv,
  .parse_poll = pbs_parse_poll,
  .parse_poll_reasons = pbs_parse_poll_reasons,
  .cancel_argv = pbs_cancel_argv,
  .lookup_argv = pbs_lookup_argv,
  .parse_lookup = pbs_parse_lookup,
  .queue_argv = pbs_queue_argv,
  .parse_queue = pbs_parse_queue,
  .programs = pbs_programs,
  .arrays = &pbs_arrays,
  .proxy_logs = pbs_proxy_logs,
};
