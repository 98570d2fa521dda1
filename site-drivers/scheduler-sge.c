/* scheduler-sge.c: a proxy is one (Son of) Grid Engine job, with its
 * slots from a parallel environment.  Tested on recorded answers and
 * against the real Son of Grid Engine 8.1.9 of tests/testbed/sge-up.sh
 * (test-sge-real.c).
 *
 * Shapes that matter (../shared/TESTBED-NOTES.md section 2):
 *
 *  - `-S /bin/sh`: the queue's shell is csh otherwise.  `-pe smp N` for
 *    N > 1 (one slot needs no PE); the PE's name is the site's choice, so
 *    submit_args can name another (`-pe threads 16`): the command line
 *    overrides the script's directives.
 *  - Submit is `qsub -terse -wd WORKDIR [submit_args] SCRIPT`, no shell;
 *    -terse prints the id alone.  The log NAME.$JOB_ID.log (-j y) is
 *    relative to -wd.
 *  - DATC_SLOTS is NSLOTS, what the PE granted.  No end-time variable, so
 *    the script computes DATC_WALLTIME_END from its own start.
 *  - The warning is `-notify` with `-l h_rt=T` (the recipe the notes
 *    recommend: s_rt together with h_rt is broken in 8.1.9, h_rt is then
 *    never enforced).  At T the job gets SIGUSR2 (the agent drains) and
 *    SIGKILL after the queue's `notify` time (60 s by default, 5 s on the
 *    test bed).  -notify is always on, so qdel, which otherwise sends
 *    SIGKILL alone, also gives the agent its SIGUSR2 first.  The agent
 *    should keep its own deadline (DATC_WALLTIME_END) too.
 *  - Poll is `qstat -u $(id -un)`, every job of the submitting user in one
 *    table; finished jobs leave qstat at once, so an id it does not list
 *    is FINISHED (qacct would know more, but lags ~15 s and may be off).
 *    State letters: E (error, e.g. Eqw: never runs until cleared) is
 *    FAILED; r t R s S T hold slots: RUNNING; q w h: PENDING.
 *  - qdel says 'denied: job "N" does not exist' (exit 1) for jobs already
 *    gone: the cancel wrapper lets that pass.
 *  - Lookup is `qstat -j NAME`: one "job_number:" line per job of that
 *    name; "Following jobs do not exist" (exit 1) when none.
 *  - The queue is asked about with `qconf -sq Q` (any user may; Q is a
 *    cluster queue, an instance queue@host, or a list of them): its
 *    configuration, "qname Q" first, or 'No cluster queue or queue
 *    instance matches the phrase "Q"' (exit 1) for each unknown one.
 *  - Arrays: `qsub -terse -t 1-K` prints "ID.1-K:1".  qstat has a line per
 *    running task (its ja-task-ID) and one for the pending tasks with a
 *    list ("2-5:1", "1,4").  qdel takes task ids ID.I, several at once
 *    ("has deleted job-array task ID.I"; 'job "ID" task "I" does not
 *    exist' for one already gone).  qstat -j NAME shows the array once. */

#include "scheduler-batch.h"

#include <string.h>

#define SGE "sge"

/* A job's id, as qsub prints it. */
static gboolean
sge_job_id_is_valid (const char *id)
{
  return datc_batch_id_is_numeric (id);
}

/* What poll and cancel take: a job's id or an array task's, 123.4. */
static gboolean
sge_id_is_valid (const char *id)
{
  return datc_batch_id_is_numeric (id) || datc_batch_id_is_element (id, '.');
}

/* ---- script and submit ------------------------------------------------ */

/* The script of one proxy or of an array (one log per task, and
 * DATC_ARRAY_INDEX from SGE_TASK_ID). */
static gchar *
sge_write_script (const DatcProxyRequest *req, gboolean array)
{
  g_return_val_if_fail (req != NULL, NULL);

  if (!datc_batch_request_is_valid (req))
    return NULL;

  g_autoptr (GString) d = g_string_new ("#$ -S /bin/sh\n");
  g_string_append_printf (d, "#$ -N %s\n", req->name);
  g_string_append (d, "#$ -j y\n");
  g_string_append_printf (d, "#$ -o %s.$JOB_ID%s.log\n", req->name, array ? ".$TASK_ID" : "");
  g_string_append (d, "#$ -notify\n");
  if (req->slots > 1)
    g_string_append_printf (d, "#$ -pe smp %u\n", req->slots);
  if (req->walltime_s > 0)
    g_string_append_printf (d, "#$ -l h_rt=%u\n", req->walltime_s);
  if (req->queue != NULL)
    g_string_append_printf (d, "#$ -q %s\n", req->queue);
  /* A host expression (sge_types(1)): !a for one, !(a|b) for several. */
  if (req->exclude_hosts != NULL && req->exclude_hosts[0] != NULL)
    {
      g_autofree gchar *hosts = g_strjoinv ("|", (gchar **) req->exclude_hosts);
      if (req->exclude_hosts[1] == NULL)
        g_string_append_printf (d, "#$ -l h=!%s\n", hosts);
      else
        g_string_append_printf (d, "#$ -l h=!(%s)\n", hosts);
    }

  g_autofree gchar *index_code = array ? datc_batch_array_index_code ("SGE_TASK_ID", FALSE) : NULL;
  return datc_batch_script (req, SGE, d->str, "DATC_SLOTS=${NSLOTS:-}\n", index_code);
}

static gchar *
sge_script (const DatcProxyRequest *req)
{
  return sge_write_script (req, FALSE);
}

/* qsub for one job (k == 0) or an array of tasks 1..k. */
static GStrv
sge_write_submit_argv (const DatcProxyRequest *req, guint k, const char *script_path)
{
  g_return_val_if_fail (req != NULL, NULL);
  g_return_val_if_fail (script_path != NULL, NULL);

  g_auto (GStrv) extra = datc_batch_split_submit_args (req->submit_args);
  if (extra == NULL || req->workdir == NULL || req->workdir[0] != '/' || script_path[0] != '/')
    return NULL;

  GPtrArray *argv = datc_batch_argv_new ();
  datc_batch_argv_add (argv, "qsub");
  datc_batch_argv_add (argv, "-terse");
  datc_batch_argv_add (argv, "-wd");
  datc_batch_argv_add (argv, req->workdir);
  if (k > 0)
    {
      datc_batch_argv_add (argv, "-t");
      g_ptr_array_add (argv, g_strdup_printf ("1-%u", k));
    }
  datc_batch_argv_add_all (argv, (const char *const *) extra);
  datc_batch_argv_add (argv, script_path);
  return datc_batch_argv_end (argv);
}

static GStrv
sge_submit_argv (const DatcProxyRequest *req, const char *script_path)
{
  return sge_write_submit_argv (req, 0, script_path);
}

static gboolean
sge_parse_submit (const DatcCommandResult *res, gchar **job_id, GError **error)
{
  g_return_val_if_fail (res != NULL && job_id != NULL, FALSE);

  if (res->exit_status != 0)
    {
      datc_batch_set_command_error (error, SGE, "qsub", res);
      return FALSE;
    }

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, SGE, "qsub's stdout", &lines, error))
    return FALSE;
  return datc_batch_one_id ((const char *const *) lines, sge_job_id_is_valid, SGE,
                            "expected one job id from qsub -terse", job_id, error);
}

/* ---- poll ------------------------------------------------------------- */

static GStrv
sge_poll_argv (const char *const *ids)
{
  /* The ids do not go into the command, but one that could not be an id
   * is the caller's mistake all the same. */
  if (!datc_batch_ids_are_valid (ids, sge_id_is_valid))
    return NULL;

  const char *const no_args[] = { NULL };
  return datc_batch_sh_argv ("exec qstat -u \"$(id -un)\"", "datc-sge-poll", no_args);
}

/* The state column is a few letters (qw, hqw, r, t, Rr, dr, Eqw, s, ...). */
static DatcProxyState
sge_state (const char *letters)
{
  if (letters[0] == '\0' || strspn (letters, "qwhrtRsSTdE") != strlen (letters))
    return DATC_PROXY_UNKNOWN;
  if (strchr (letters, 'E') != NULL)
    return DATC_PROXY_FAILED;
  if (strpbrk (letters, "rtsST") != NULL)
    return DATC_PROXY_RUNNING;
  if (strpbrk (letters, "qwh") != NULL)
    return DATC_PROXY_PENDING;
  return DATC_PROXY_UNKNOWN;
}

static gboolean
is_dashes (const char *line)
{
  return line[0] == '-' && strspn (line, "-") == strlen (line);
}

/* An array's ja-task-ID "2-5:1,7" (ranges with a step, or single tasks,
 * comma-separated): `state` for each task "JOB.T" of `job`.  Only tasks up
 * to DATC_ARRAY_MAX are ours, so a range never makes more answers than
 * that. */
static gboolean
sge_set_task_answers (GHashTable *answers, GHashTable *why, const char *job, const char *tasks,
                      DatcProxyState state, const char *reason)
{
  g_auto (GStrv) items = g_strsplit (tasks, ",", -1);

  for (gsize i = 0; items[i] != NULL; i++)
    {
      guint64 lo = 0, hi = 0, step = 1;
      gchar *colon = strchr (items[i], ':');
      gchar *dash = strchr (items[i], '-');

      if (colon != NULL)
        {
          *colon = '\0';
          if (dash == NULL
              || !g_ascii_string_to_unsigned (colon + 1, 10, 1, G_MAXINT32, &step, NULL))
            return FALSE;
        }
      if (dash != NULL)
        *dash = '\0';
      if (!g_ascii_string_to_unsigned (items[i], 10, 1, G_MAXINT32, &lo, NULL))
        return FALSE;
      hi = lo;
      if (dash != NULL && !g_ascii_string_to_unsigned (dash + 1, 10, lo, G_MAXINT32, &hi, NULL))
        return FALSE;
      for (guint64 t = lo; t <= hi && t <= DATC_ARRAY_MAX; t += step)
        {
          g_autofree gchar *id = g_strdup_printf ("%s.%" G_GUINT64_FORMAT, job, t);
          datc_batch_answers_set (answers, id, state);
          datc_batch_reasons_set (why, id, reason);
        }
    }
  return TRUE;
}

/* Plain qstat says why a job waits only when it is held: the scheduling
 * info of `qstat -j` would take a second command per poll, and is off
 * unless the cell sets schedd_job_info (see README.md). */
static gchar *
sge_reason (const char *letters)
{
  return strchr (letters, 'h') != NULL ? g_strdup_printf ("on hold (%s)", letters) : NULL;
}

static gboolean
sge_parse_poll_reasons (const DatcCommandResult *res, const char *const *ids,
                        DatcProxyState *states, gchar **reasons, GError **error)
{
  g_return_val_if_fail (res != NULL && ids != NULL, FALSE);

  if (res->exit_status != 0)
    {
      datc_batch_set_command_error (error, SGE, "qstat", res);
      return FALSE;
    }

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, SGE, "qstat's stdout", &lines, error))
    return FALSE;

  /* Nothing at all when the user has no job; otherwise the header, a
   * line of dashes, and one line per job:
   * job-ID prior name user state submit/start-at [queue] slots [ja-task-ID]
   * The queue (queue@host) is there once the job has one; an array has a
   * line per running task and one for its pending tasks, whose ja-task-ID
   * is a list ("2-5:1", "1,3,6"). */
  g_autoptr (GHashTable) answers = datc_batch_answers_new ();
  g_autoptr (GHashTable) why = datc_batch_reasons_new ();
  for (gsize i = 0; lines[i] != NULL; i++)
    {
      if (i == 0 && g_str_has_prefix (lines[i], "job-ID "))
        continue;
      if (i == 1 && is_dashes (lines[i]))
        continue;

      g_auto (GStrv) words = datc_batch_words (lines[i]);
      guint n = g_strv_length (words);
      DatcProxyState state = DATC_PROXY_UNKNOWN;
      if (n >= 7 && sge_job_id_is_valid (words[0]))
        state = sge_state (words[4]);
      /* Words after the date and time: [queue] slots [tasks]. */
      guint slots_at = n > 7 && strchr (words[7], '@') != NULL ? 8 : 7;
      const char *tasks = n == slots_at + 2 ? words[slots_at + 1] : NULL;
      g_autofree gchar *reason = state != DATC_PROXY_UNKNOWN ? sge_reason (words[4]) : NULL;
      if (state == DATC_PROXY_UNKNOWN || n > slots_at + 2
          || (tasks != NULL
              && !sge_set_task_answers (answers, why, words[0], tasks, state, reason)))
        {
          datc_batch_set_parse_error (
              error, SGE, "expected 'job-ID prior name user state ...' from qstat", lines[i]);
          return FALSE;
        }
      if (tasks == NULL)
        {
          datc_batch_answers_set (answers, words[0], state);
          datc_batch_reasons_set (why, words[0], reason);
        }
    }
  datc_batch_answers_fill (answers, ids, states, DATC_PROXY_FINISHED);
  if (reasons != NULL)
    datc_batch_reasons_fill (why, ids, states, reasons);
  return TRUE;
}

static gboolean
sge_parse_poll (const DatcCommandResult *res, const char *const *ids, DatcProxyState *states,
                GError **error)
{
  return sge_parse_poll_reasons (res, ids, states, NULL, error);
}

/* ---- cancel and lookup ------------------------------------------------- */

static GStrv
sge_cancel_argv (const char *const *ids)
{
  /* Deleted now, registered for deletion, or already gone; a job or an
   * array's task (qdel takes 123.4 and says "job-array task 123.4"). */
  return datc_batch_cancel_argv ("qdel",
                                 "has (registered the (job|job-array task) [0-9.]+ for deletion"
                                 "|deleted (job|job-array task) [0-9.]+)"
                                 "|^denied: job \"[0-9]+\" does not exist"
                                 "|^job \"[0-9]+\" task \"[0-9]+\" does not exist"
                                 "|(job|job-array task) [0-9.]+ is already in deletion",
                                 "datc-sge-cancel", ids, sge_id_is_valid);
}

static GStrv
sge_lookup_argv (const char *job_name)
{
  if (!datc_batch_name_is_valid (job_name))
    return NULL;

  GPtrArray *argv = datc_batch_argv_new ();
  datc_batch_argv_add (argv, "qstat");
  datc_batch_argv_add (argv, "-j");
  datc_batch_argv_add (argv, job_name);
  return datc_batch_argv_end (argv);
}

static gboolean
sge_parse_lookup (const DatcCommandResult *res, gchar **job_id, GError **error)
{
  g_return_val_if_fail (res != NULL && job_id != NULL, FALSE);

  *job_id = NULL;
  if (res->exit_status != 0)
    {
      g_autofree gchar *err = NULL;
      static const char *const none[]
          = { "^Following jobs do not exist( or permissions are not sufficient)?:",
              "^[A-Za-z][A-Za-z0-9_.-]*$", NULL };

      /* "Following jobs do not exist: \nNAME": nobody of that name. */
      if (datc_site_answer_text (res->err, "stderr", &err, NULL)
          && strstr (err, "Following jobs do not exist") != NULL
          && datc_batch_lines_all_match (err, none))
        return TRUE;
      datc_batch_set_command_error (error, SGE, "qstat -j", res);
      return FALSE;
    }

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, SGE, "qstat -j's stdout", &lines, error))
    return FALSE;

  g_autoptr (GPtrArray) found = datc_batch_argv_new ();
  for (gsize i = 0; lines[i] != NULL; i++)
    {
      if (!g_str_has_prefix (lines[i], "job_number:"))
        continue;
      g_auto (GStrv) words = datc_batch_words (lines[i]);
      if (g_strv_length (words) != 2 || !sge_job_id_is_valid (words[1]))
        {
          datc_batch_set_parse_error (error, SGE, "expected 'job_number: ID' from qstat -j",
                                      lines[i]);
          return FALSE;
        }
      datc_batch_argv_add (found, words[1]);
    }
  if (found->len == 0)
    {
      g_autofree gchar *all = g_strjoinv ("\n", lines);
      datc_batch_set_parse_error (error, SGE, "no job_number in qstat -j's answer", all);
      return FALSE;
    }
  g_ptr_array_add (found, NULL);
  return datc_batch_lookup_result ((const char *const *) found->pdata, SGE, job_id, error);
}

/* ---- arrays ------------------------------------------------------------- */

static gchar *
sge_array_script (const DatcProxyRequest *req)
{
  return sge_write_script (req, TRUE);
}

static GStrv
sge_array_submit_argv (const DatcProxyRequest *req, guint k, const char *script_path)
{
  if (!datc_batch_array_size_is_valid (k))
    return NULL;
  return sge_write_submit_argv (req, k, script_path);
}

/* qsub -terse -t 1-K prints "ID.1-K:1". */
static gboolean
sge_array_parse_submit (const DatcCommandResult *res, guint k, gchar **base_id, GError **error)
{
  g_return_val_if_fail (res != NULL && base_id != NULL, FALSE);

  if (res->exit_status != 0)
    {
      datc_batch_set_command_error (error, SGE, "qsub", res);
      return FALSE;
    }

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, SGE, "qsub's stdout", &lines, error))
    return FALSE;
  g_autofree gchar *tail = g_strdup_printf (".1-%u:1", k);
  g_autofree gchar *id = NULL;
  if (g_strv_length (lines) == 1 && g_str_has_suffix (lines[0], tail))
    id = g_strndup (lines[0], strlen (lines[0]) - strlen (tail));
  if (id == NULL || !sge_job_id_is_valid (id))
    {
      g_autofree gchar *all = g_strjoinv ("\n", lines);
      g_autofree gchar *what
          = g_strdup_printf ("expected 'ID%s' from qsub -terse -t 1-%u", tail, k);
      datc_batch_set_parse_error (error, SGE, what, all);
      return FALSE;
    }
  *base_id = g_steal_pointer (&id);
  return TRUE;
}

static gchar *
sge_element_id (const char *base_id, guint index)
{
  if (!sge_job_id_is_valid (base_id) || index == 0)
    return NULL;
  return g_strdup_printf ("%s.%u", base_id, index);
}

/* qstat -j NAME shows an array once, as its job_number: the plain lookup
 * answers with the base id already. */
static const DatcSchedulerArrays sge_arrays = {
  .script = sge_array_script,
  .submit_argv = sge_array_submit_argv,
  .parse_submit = sge_array_parse_submit,
  .element_id = sge_element_id,
  .lookup_argv = sge_lookup_argv,
  .parse_lookup = sge_parse_lookup,
};
/* ---- queue ------------------------------------------------------------ */

static GStrv
sge_queue_argv (const char *queue)
{
  if (!datc_batch_queue_is_valid (queue))
    return NULL;

  GPtrArray *argv = datc_batch_argv_new ();
  datc_batch_argv_add (argv, "qconf");
  datc_batch_argv_add (argv, "-sq");
  datc_batch_argv_add (argv, queue);
  return datc_batch_argv_end (argv);
}

/* One queue's configuration, as far as the summary needs it. */
typedef struct {
  gchar *name;  /* qname, @hostname for an instance */
  gchar *where; /* "hostlist @allhosts", or NULL for an instance */
  gchar *slots;
} SgeQueue;

static void
sge_queue_free (gpointer data)
{
  SgeQueue *q = data;

  g_free (q->name);
  g_free (q->where);
  g_free (q->slots);
  g_free (q);
}

static gboolean
sge_parse_queue (const DatcCommandResult *res, const char *queue, gboolean *exists, gchar **answer,
                 GError **error)
{
  g_return_val_if_fail (res != NULL && queue != NULL && exists != NULL && answer != NULL, FALSE);

  if (res->exit_status != 0)
    return datc_batch_queue_missing (
        res, res->err, "^No cluster queue or queue instance matches the phrase \".*\"$", NULL, SGE,
        "qconf -sq", exists, answer, error);

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, SGE, "qconf -sq's stdout", &lines, error))
    return FALSE;

  /* "key value ..." lines; each queue starts with its qname. */
  g_autoptr (GPtrArray) queues = g_ptr_array_new_with_free_func (sge_queue_free);
  for (gsize i = 0; lines[i] != NULL; i++)
    {
      g_auto (GStrv) words = datc_batch_words (lines[i]);
      SgeQueue *q = queues->len > 0 ? g_ptr_array_index (queues, queues->len - 1) : NULL;

      if (words[0] == NULL || words[1] == NULL
          || !g_regex_match_simple ("^[a-z_]+$", words[0], 0, 0))
        {
          datc_batch_set_parse_error (error, SGE, "expected 'KEY VALUE' lines from qconf -sq",
                                      lines[i]);
          return FALSE;
        }
      if (strcmp (words[0], "qname") == 0)
        {
          q = g_new0 (SgeQueue, 1);
          q->name = g_strdup (words[1]);
          g_ptr_array_add (queues, q);
        }
      else if (q == NULL)
        {
          datc_batch_set_parse_error (error, SGE, "expected 'qname Q' first from qconf -sq",
                                      lines[i]);
          return FALSE;
        }
      else if (strcmp (words[0], "hostname") == 0)
        {
          gchar *instance = g_strconcat (q->name, "@", words[1], NULL);
          g_free (q->name);
          q->name = instance;
        }
      else if (strcmp (words[0], "hostlist") == 0 && q->where == NULL)
        q->where = g_strjoinv (" ", words);
      else if (strcmp (words[0], "slots") == 0 && q->slots == NULL)
        q->slots = g_strdup (words[1]);
    }
  if (queues->len == 0)
    {
      datc_batch_set_parse_error (error, SGE, "expected a queue's configuration from qconf -sq",
                                  "");
      return FALSE;
    }

  g_autoptr (GPtrArray) parts = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < queues->len; i++)
    {
      SgeQueue *q = g_ptr_array_index (queues, i);
      g_ptr_array_add (
          parts, g_strdup_printf ("%s: slots %s%s%s", q->name, q->slots != NULL ? q->slots : "?",
                                  q->where != NULL ? ", " : "", q->where != NULL ? q->where : ""));
    }
  g_ptr_array_add (parts, NULL);
  *exists = TRUE;
  *answer = datc_batch_queue_answer ((const char *const *) parts->pdata);
  return TRUE;
}

/* -o NAME.$JOB_ID.log, an array task's NAME.$JOB_ID.$TASK_ID.log:
 * NAME.ID.log either way, the element's id being JOB.TASK. */
static GStrv
sge_proxy_logs (const char *job_name, const char *job_id, const char *script_name)
{
  (void) script_name;
  if (!sge_id_is_valid (job_id))
    return NULL;
  GStrv logs = g_new0 (gchar *, 2);
  logs[0] = g_strdup_printf ("%s.%s.log", job_name, job_id);
  return logs;
}

static const char *const sge_programs[] = { "qsub", "qstat", "qdel", "qconf", NULL };

const DatcSchedulerClass datc_scheduler_sge = {
  .name = "sge",
  .script = sge_script,
  .submit_argv = sge_submit_argv,
  .parse_submit = sge_parse_submit,
  .poll_argv = sge_poll_argv,
  .parse_poll = sge_parse_poll,
  .parse_poll_reasons = sge_parse_poll_reasons,
  .cancel_argv = sge_cancel_argv,
  .lookup_argv = sge_lookup_argv,
  .parse_lookup = sge_parse_lookup,
  .queue_argv = sge_queue_argv,
  .parse_queue = sge_parse_queue,
  .programs = sge_programs,
  .arrays = &sge_arrays,
  .proxy_logs = sge_proxy_logs,
};
