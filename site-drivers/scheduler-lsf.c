/* scheduler-lsf.c: a proxy is one LSF job with `slots` slots on one host.
 *
 * Written from the IBM Spectrum LSF 10.1 documentation and checked against
 * a live volclava 2.2 (an LSF-compatible scheduler from OpenLava, built by
 * tests/testbed/lsf-up.sh): tests/data/lsf holds answers recorded there by
 * tests/testbed/capture-lsf.sh, besides the transcribed ones (each file
 * names its source).
 *
 * Shapes that matter:
 *
 *  - Every command runs with LSB_NTRIES=1: without it an LSF command
 *    retries for ever ("LSF daemon (LIM) not responding ... still
 *    trying") while the daemons are down; with it, it fails with exit 255
 *    after ~6 s, inside the transport's timeout.  So each is
 *    `sh -c 'LSB_NTRIES=1; export LSB_NTRIES; exec PROGRAM "$@"'`.
 *  - bsub reads #BSUB directives only from a script on its standard
 *    input (`bsub script` would run the file as a command and ignore
 *    them), so submit is `cd WORKDIR && bsub [submit_args] < SCRIPT`.  The
 *    job runs in the directory bsub ran in; the log NAME.%J.log is there.
 *  - `-n N -R "span[hosts=1]"`; DATC_SLOTS is LSB_DJOB_NUMPROC, the slots
 *    LSF allocated.  The script computes DATC_WALLTIME_END itself.
 *  - Walltime is `-W` in whole minutes (rounded up).  At the run limit LSF
 *    sends SIGUSR2 (the agent drains on it) and kills the job if it has
 *    not ended ten minutes later (bsub -W); volclava kills it at once:
 *    exit code 140.  No advance warning (`-wa USR1 -wt 1`): volclava's
 *    bsub has neither option and reads `-wa USR1` as `-w a`, a dependency
 *    on a job named "a" (refused when the user has no other job, else a
 *    job pending for ever); the agent drains before DATC_WALLTIME_END on
 *    its own, and on IBM LSF a site may add them through submit_args.
 *  - bsub prints "Job <ID> is submitted to [default ]queue <QUEUE>.".
 *  - Poll is `bjobs -a -l IDS` (-a keeps jobs that ended within
 *    CLEAN_PERIOD).  The exit code is only there: `bjobs -o` has no
 *    exit_code field, the default table none either.  Each job is a block
 *    starting "Job <ID>, [Job Name <N>, ]User <U>, Project <P>, Status
 *    <STAT>, ..." (an array element's ID is 123[4]); its end is a line
 *    "DATE: Done successfully.", "DATE: Exited with exit code N.", "DATE:
 *    Exited by signal N." or "DATE: Exited" (no code: killed before it
 *    ran, or it used no CPU time).  An id it does not know ("Job <ID> is
 *    not found" on stderr, exit 255) is FINISHED.  STAT: PEND PSUSP WAIT
 *    pending; RUN USUSP SSUSP PROV running; DONE, ZOMBI finished; EXIT
 *    finished when the proxy was killed (bkill: code 130, the run limit:
 *    140, any code above 128, a signal, or no code and never started),
 *    failed otherwise (the agent's own non-zero exit); UNKWN unknown.
 *  - bkill: "Job <ID> is being terminated"; for a job already gone "Job
 *    <ID>: Job has already finished" or "...: No matching job found"
 *    (exit 255), which the cancel wrapper passes.
 *  - Lookup is `bjobs -a -w -J NAME`: the table JOBID USER STAT ...; none
 *    found is "Job <NAME> is not found" (exit 254 or 255).  JOB_NAME and
 *    SUBMIT_TIME may hold spaces, so only the first three columns are
 *    read by position.
 *  - The queue is asked about with `bqueues -w Q` (-w: the name whole):
 *    a header QUEUE_NAME PRIO STATUS ... and the queue's row; an unknown
 *    one gives "Q: No such queue" (exit 255).
 *  - Arrays: `bsub -J "NAME[1-K]"` (the command line overrides the
 *    script's -J NAME); element I is ID[I] for bjobs and bkill; the table
 *    shows each element as a row with JOBID ID and JOB_NAME NAME[I], and
 *    `bjobs -J NAME` finds them all. */

#include "scheduler-batch.h"

#include <string.h>

#define LSF "lsf"

/* A job's id, as bsub prints it. */
static gboolean
lsf_job_id_is_valid (const char *id)
{
  return datc_batch_id_is_numeric (id);
}

/* What poll and cancel take: a job's id or an array element's, 123[4]. */
static gboolean
lsf_id_is_valid (const char *id)
{
  return datc_batch_id_is_numeric (id)
         || (id != NULL && strlen (id) <= DATC_BATCH_ID_MAX
             && g_regex_match_simple ("^[1-9][0-9]{0,17}\\[[1-9][0-9]{0,8}\\]$", id, 0, 0));
}

/* `sh -c` running `program` with LSB_NTRIES=1, `fixed` then `args` as its
 * arguments (either may be NULL). */
static GStrv
lsf_argv (const char *program, const char *const *fixed, const char *const *args)
{
  g_autofree gchar *script
      = g_strdup_printf ("LSB_NTRIES=1\nexport LSB_NTRIES\nexec %s \"$@\"\n", program);
  g_autofree gchar *name = g_strdup_printf ("datc-lsf-%s", program);
  g_autoptr (GPtrArray) all = datc_batch_argv_new ();

  datc_batch_argv_add_all (all, fixed);
  datc_batch_argv_add_all (all, args);
  g_ptr_array_add (all, NULL);
  return datc_batch_sh_argv (script, name, (const char *const *) all->pdata);
}

/* ---- script and submit ------------------------------------------------ */

/* The script of one proxy or of an array (one log per element, and
 * DATC_ARRAY_INDEX from LSB_JOBINDEX).  An array's -J NAME[1-K] is on the
 * command line, which overrides the script's -J NAME. */
static gchar *
lsf_write_script (const DatcProxyRequest *req, gboolean array)
{
  g_return_val_if_fail (req != NULL, NULL);

  if (!datc_batch_request_is_valid (req))
    return NULL;

  g_autoptr (GString) d = g_string_new (NULL);
  g_string_append_printf (d, "#BSUB -J %s\n", req->name);
  g_string_append_printf (d, "#BSUB -n %u\n", req->slots);
  /* One resource requirement string holds both sections. */
  g_string_append (d, "#BSUB -R \"");
  for (guint i = 0; req->exclude_hosts != NULL && req->exclude_hosts[i] != NULL; i++)
    g_string_append_printf (d, "%shname!='%s'", i == 0 ? "select[" : " && ", req->exclude_hosts[i]);
  if (req->exclude_hosts != NULL && req->exclude_hosts[0] != NULL)
    g_string_append (d, "] ");
  g_string_append (d, "span[hosts=1]\"\n");
  g_string_append_printf (d, "#BSUB -o %s.%s.log\n", req->name, array ? "%J_%I" : "%J");
  if (req->walltime_s > 0)
    {
      guint minutes = (req->walltime_s + 59) / 60;

      g_string_append_printf (d, "#BSUB -W %u\n", minutes);
    }
  if (req->queue != NULL)
    g_string_append_printf (d, "#BSUB -q %s\n", req->queue);

  g_autofree gchar *index_code = array ? datc_batch_array_index_code ("LSB_JOBINDEX", FALSE) : NULL;
  return datc_batch_script (req, LSF, d->str, "DATC_SLOTS=${LSB_DJOB_NUMPROC:-}\n", index_code);
}

static gchar *
lsf_script (const DatcProxyRequest *req)
{
  return lsf_write_script (req, FALSE);
}

/* bsub for one job (k == 0) or an array of elements 1..k. */
static GStrv
lsf_write_submit_argv (const DatcProxyRequest *req, guint k, const char *script_path)
{
  g_return_val_if_fail (req != NULL, NULL);
  g_return_val_if_fail (script_path != NULL, NULL);

  g_auto (GStrv) extra = datc_batch_split_submit_args (req->submit_args);
  if (extra == NULL || req->workdir == NULL || req->workdir[0] != '/' || script_path[0] != '/')
    return NULL;

  g_autoptr (GPtrArray) args = datc_batch_argv_new ();
  datc_batch_argv_add (args, req->workdir);
  datc_batch_argv_add (args, script_path);
  if (k > 0)
    {
      if (!datc_batch_name_is_valid (req->name))
        return NULL;
      datc_batch_argv_add (args, "-J");
      g_ptr_array_add (args, g_strdup_printf ("%s[1-%u]", req->name, k));
    }
  datc_batch_argv_add_all (args, (const char *const *) extra);
  g_ptr_array_add (args, NULL);
  return datc_batch_sh_argv ("cd \"$1\" || exit 1\n"
                             "s=$2\n"
                             "shift 2\n"
                             "LSB_NTRIES=1\n"
                             "export LSB_NTRIES\n"
                             "exec bsub \"$@\" <\"$s\"\n",
                             "datc-lsf-submit", (const char *const *) args->pdata);
}

static GStrv
lsf_submit_argv (const DatcProxyRequest *req, const char *script_path)
{
  return lsf_write_submit_argv (req, 0, script_path);
}

static gboolean
lsf_parse_submit (const DatcCommandResult *res, gchar **job_id, GError **error)
{
  g_return_val_if_fail (res != NULL && job_id != NULL, FALSE);

  if (res->exit_status != 0)
    {
      datc_batch_set_command_error (error, LSF, "bsub", res);
      return FALSE;
    }

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, LSF, "bsub's stdout", &lines, error))
    return FALSE;

  g_autoptr (GRegex) submitted
      = g_regex_new ("^Job <([0-9]+)> is submitted to (?:default )?queue <[^<>]+>\\.$", 0, 0, NULL);
  g_autofree gchar *found = NULL;
  guint matches = 0;
  for (gsize i = 0; lines[i] != NULL; i++)
    {
      g_autoptr (GMatchInfo) match = NULL;
      if (g_regex_match (submitted, lines[i], 0, &match))
        {
          g_free (found);
          found = g_match_info_fetch (match, 1);
          matches++;
        }
    }
  if (matches != 1 || !lsf_job_id_is_valid (found))
    {
      g_autofree gchar *all = g_strjoinv ("\n", lines);
      datc_batch_set_parse_error (
          error, LSF, "expected one 'Job <ID> is submitted to queue <Q>.' from bsub", all);
      return FALSE;
    }
  *job_id = g_steal_pointer (&found);
  return TRUE;
}

/* ---- poll ------------------------------------------------------------- */

static GStrv
lsf_poll_argv (const char *const *ids)
{
  if (!datc_batch_ids_are_valid (ids, lsf_id_is_valid))
    return NULL;

  const char *const fixed[] = { "-a", "-l", NULL };
  return lsf_argv ("bjobs", fixed, ids);
}

static const DatcBatchStateWord lsf_states[] = {
  { "PEND", DATC_PROXY_PENDING },   { "PSUSP", DATC_PROXY_PENDING },
  { "WAIT", DATC_PROXY_PENDING },   { "RUN", DATC_PROXY_RUNNING },
  { "USUSP", DATC_PROXY_RUNNING },  { "SSUSP", DATC_PROXY_RUNNING },
  { "PROV", DATC_PROXY_RUNNING },   { "DONE", DATC_PROXY_FINISHED },
  { "ZOMBI", DATC_PROXY_FINISHED }, { "EXIT", DATC_PROXY_FAILED }, /* see lsf_exit_state */
  { "UNKWN", DATC_PROXY_UNKNOWN },
};

static gboolean
is_known_state (const char *word)
{
  for (gsize i = 0; i < G_N_ELEMENTS (lsf_states); i++)
    if (strcmp (lsf_states[i].word, word) == 0)
      return TRUE;
  return FALSE;
}

/* "Job <ID> is not found" lines on bjobs' stderr: each ID is gone
 * (FINISHED, unless the answer named it already).  Any other line, or a
 * non-zero exit with nothing said, fails the command. */
static gboolean
lsf_parse_not_found (const DatcCommandResult *res, GHashTable *answers, GError **error)
{
  g_auto (GStrv) err_lines = NULL;
  if (!datc_batch_answer_lines (res->err, LSF, "bjobs's stderr", &err_lines, error))
    return FALSE;

  g_autoptr (GRegex) not_found = g_regex_new ("^Job <([^<>]+)> is not found$", 0, 0, NULL);
  for (gsize i = 0; err_lines[i] != NULL; i++)
    {
      g_autoptr (GMatchInfo) match = NULL;

      if (g_regex_match (not_found, err_lines[i], 0, &match))
        {
          g_autofree gchar *id = g_match_info_fetch (match, 1);
          if (!g_hash_table_contains (answers, id))
            datc_batch_answers_set (answers, id, DATC_PROXY_FINISHED);
        }
      else if (res->exit_status != 0)
        {
          datc_batch_set_command_error (error, LSF, "bjobs", res);
          return FALSE;
        }
    }
  if (res->exit_status != 0 && err_lines[0] == NULL)
    {
      datc_batch_set_command_error (error, LSF, "bjobs", res);
      return FALSE;
    }
  return TRUE;
}

/* What an EXIT job's block says about how it ended.  A proxy killed by
 * LSF (bkill: 130, the run limit: 140, any 128+N; "by signal"; or
 * cancelled before it started, which has no code) ended the way proxies
 * end: FINISHED.  Any other code is the agent's own failure. */
typedef struct {
  gboolean started;
  gboolean has_code;
  gint64 code;
  gboolean signalled;
} LsfEnd;

static DatcProxyState
lsf_exit_state (const LsfEnd *end)
{
  if (end->signalled || (end->has_code && end->code > 128))
    return DATC_PROXY_FINISHED;
  if (end->has_code)
    return DATC_PROXY_FAILED;
  return end->started ? DATC_PROXY_FAILED : DATC_PROXY_FINISHED;
}

/* A line of a block's PENDING REASONS, " Job slot limit reached: 1 host;":
 * the reason without the count of hosts it applies to (transfer full). */
static gchar *
lsf_reason (const char *line)
{
  g_autofree gchar *text = g_strstrip (g_strdup (line));
  gsize len = strlen (text);

  if (len > 0 && text[len - 1] == ';')
    text[--len] = '\0';
  char *colon = strrchr (text, ':');
  if (colon != NULL && g_regex_match_simple ("^: [0-9]+ hosts?$", colon, 0, 0))
    *colon = '\0';
  return g_strdup (g_strstrip (text));
}

/* `bjobs -a -l` blocks: the header line gives the id and STAT, the lines
 * after it (up to the next header) whether it started and how it ended,
 * and for a pending job the first of its PENDING REASONS into `why` (may
 * be NULL).  Lines the driver does not need (limits, load thresholds, the
 * dashed separators) are skipped; a header with an unknown STAT, or text
 * before any header, is a parse error. */
static gboolean
lsf_parse_long (const DatcCommandResult *res, GHashTable *answers, GHashTable *why, GError **error)
{
  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, LSF, "bjobs's stdout", &lines, error))
    return FALSE;

  g_autoptr (GRegex) header = g_regex_new (
      "^Job <([1-9][0-9]*(?:\\[[1-9][0-9]*\\])?)>, (?:Job Name <[^<>]*>, )?User <[^<>]*>, "
      "(?:Project <[^<>]*>, )?Status <([A-Z]+)>",
      0, 0, NULL);
  g_autoptr (GRegex) started = g_regex_new (": (?:\\[[0-9]+\\] )?[Ss]tarted on <", 0, 0, NULL);
  g_autoptr (GRegex) exited = g_regex_new (
      ": Exited(?: with exit code ([0-9]{1,9})\\.| by signal ([0-9]{1,9})\\.)?(?: |$)", 0, 0, NULL);
  g_autofree gchar *id = NULL;
  g_autofree gchar *stat = NULL;
  g_autofree gchar *reason = NULL;
  gboolean in_reasons = FALSE;
  LsfEnd end = { 0 };

  for (gsize i = 0;; i++)
    {
      g_autoptr (GMatchInfo) match = NULL;
      gboolean is_header = lines[i] != NULL && g_regex_match (header, lines[i], 0, &match);

      /* A block ends at the next header or at the end. */
      if ((is_header || lines[i] == NULL) && id != NULL)
        {
          DatcProxyState state
              = strcmp (stat, "EXIT") == 0
                    ? lsf_exit_state (&end)
                    : datc_batch_state_lookup (lsf_states, G_N_ELEMENTS (lsf_states), stat);
          datc_batch_answers_set (answers, id, state);
          if (why != NULL && reason != NULL)
            datc_batch_reasons_set (why, id, reason);
          g_clear_pointer (&id, g_free);
          g_clear_pointer (&reason, g_free);
          in_reasons = FALSE;
        }
      if (lines[i] == NULL)
        break;
      if (strspn (lines[i], "-") == strlen (lines[i]))
        continue; /* the separator between blocks, also before the first */
      if (is_header)
        {
          g_free (stat);
          stat = g_match_info_fetch (match, 2);
          if (!is_known_state (stat))
            {
              datc_batch_set_parse_error (error, LSF, "unknown Status in bjobs -l", lines[i]);
              return FALSE;
            }
          id = g_match_info_fetch (match, 1);
          end = (LsfEnd) { 0 };
          continue;
        }
      if (id == NULL)
        {
          datc_batch_set_parse_error (
              error, LSF, "expected 'Job <ID>, ..., Status <STAT>, ...' from bjobs -l", lines[i]);
          return FALSE;
        }
      /* " PENDING REASONS:", then one line per reason up to a blank one. */
      const char *text = lines[i] + strspn (lines[i], " \t");
      if (text[0] == '\0')
        in_reasons = FALSE;
      else if (in_reasons && reason == NULL)
        reason = lsf_reason (text);
      if (g_str_has_prefix (text, "PENDING REASONS:"))
        in_reasons = TRUE;
      if (g_regex_match (started, lines[i], 0, NULL))
        end.started = TRUE;
      g_autoptr (GMatchInfo) ended = NULL;
      if (g_regex_match (exited, lines[i], 0, &ended))
        {
          g_autofree gchar *code = g_match_info_fetch (ended, 1);
          g_autofree gchar *sig = g_match_info_fetch (ended, 2);

          end.has_code = code != NULL && code[0] != '\0';
          end.code = end.has_code ? g_ascii_strtoll (code, NULL, 10) : 0;
          end.signalled = sig != NULL && sig[0] != '\0';
        }
    }
  return TRUE;
}

/* An array element's row has the array's JOBID and JOB_NAME NAME[INDEX]
 * (after FROM_HOST and EXEC_HOST, which is empty while pending): its id
 * is JOBID[INDEX].  A plain job's is its JOBID (transfer full). */
static gchar *
lsf_row_id (const char *const *words)
{
  for (gsize i = 4; words[i] != NULL; i++)
    {
      const char *open = strrchr (words[i], '[');
      gsize len = strlen (words[i]);

      if (open != NULL && len > 2 && words[i][len - 1] == ']' && open[1] != ']'
          && strspn (open + 1, "0123456789") == (gsize) (words[i] + len - 1 - (open + 1)))
        return g_strdup_printf ("%s%s", words[0], open);
    }
  return g_strdup (words[0]);
}

/* Rows of `bjobs -a -w`: the header, then JOBID USER STAT ... per job
 * (per element for arrays).  Ids a "Job <X> is not found" on stderr names
 * are `gone`.  `order` gets each row's JOBID. */
static gboolean
lsf_parse_table (const DatcCommandResult *res, GHashTable *answers, GPtrArray *order,
                 GError **error)
{
  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, LSF, "bjobs's stdout", &lines, error)
      || !lsf_parse_not_found (res, answers, error))
    return FALSE;

  for (gsize i = 0; lines[i] != NULL; i++)
    {
      if (i == 0 && g_str_has_prefix (lines[i], "JOBID "))
        continue;

      g_auto (GStrv) words = datc_batch_words (lines[i]);
      if (g_strv_length (words) < 4 || !lsf_job_id_is_valid (words[0])
          || !is_known_state (words[2]))
        {
          datc_batch_set_parse_error (error, LSF, "expected 'JOBID USER STAT QUEUE ...' from bjobs",
                                      lines[i]);
          return FALSE;
        }
      g_autofree gchar *id = lsf_row_id ((const char *const *) words);
      datc_batch_answers_set (
          answers, id, datc_batch_state_lookup (lsf_states, G_N_ELEMENTS (lsf_states), words[2]));
      if (order != NULL)
        datc_batch_argv_add (order, words[0]);
    }
  return TRUE;
}

static gboolean
lsf_parse_poll_reasons (const DatcCommandResult *res, const char *const *ids,
                        DatcProxyState *states, gchar **reasons, GError **error)
{
  g_return_val_if_fail (res != NULL && ids != NULL, FALSE);

  g_autoptr (GHashTable) answers = datc_batch_answers_new ();
  g_autoptr (GHashTable) why = datc_batch_reasons_new ();
  if (!lsf_parse_long (res, answers, why, error) || !lsf_parse_not_found (res, answers, error))
    return FALSE;
  datc_batch_answers_fill (answers, ids, states, DATC_PROXY_FINISHED);
  if (reasons != NULL)
    datc_batch_reasons_fill (why, ids, states, reasons);
  return TRUE;
}

static gboolean
lsf_parse_poll (const DatcCommandResult *res, const char *const *ids, DatcProxyState *states,
                GError **error)
{
  return lsf_parse_poll_reasons (res, ids, states, NULL, error);
}

/* ---- cancel and lookup ------------------------------------------------- */

static GStrv
lsf_cancel_argv (const char *const *ids)
{
  return datc_batch_cancel_argv (
      "LSB_NTRIES=1 bkill",
      "^Job <[0-9]+(\\[[0-9]+\\])?>( is being terminated|: Job has already finished|"
      ": No matching job found| is not found)",
      "datc-lsf-cancel", ids, lsf_id_is_valid);
}

static GStrv
lsf_lookup_argv (const char *job_name)
{
  if (!datc_batch_name_is_valid (job_name))
    return NULL;

  const char *const fixed[] = { "-a", "-w", "-J", job_name, NULL };
  return lsf_argv ("bjobs", fixed, NULL);
}

static gboolean
lsf_parse_lookup (const DatcCommandResult *res, gchar **job_id, GError **error)
{
  g_return_val_if_fail (res != NULL && job_id != NULL, FALSE);

  *job_id = NULL;
  g_autoptr (GHashTable) gone = datc_batch_answers_new ();
  g_autoptr (GPtrArray) found = datc_batch_argv_new ();
  if (!lsf_parse_table (res, gone, found, error))
    return FALSE;
  g_ptr_array_add (found, NULL);
  return datc_batch_lookup_result ((const char *const *) found->pdata, LSF, job_id, error);
}

/* ---- arrays ------------------------------------------------------------- */

static gchar *
lsf_array_script (const DatcProxyRequest *req)
{
  return lsf_write_script (req, TRUE);
}

static GStrv
lsf_array_submit_argv (const DatcProxyRequest *req, guint k, const char *script_path)
{
  if (!datc_batch_array_size_is_valid (k))
    return NULL;
  return lsf_write_submit_argv (req, k, script_path);
}

/* bsub says "Job <ID> is submitted ..." for an array too. */
static gboolean
lsf_array_parse_submit (const DatcCommandResult *res, guint k, gchar **base_id, GError **error)
{
  (void) k;
  return lsf_parse_submit (res, base_id, error);
}

static gchar *
lsf_element_id (const char *base_id, guint index)
{
  if (!lsf_job_id_is_valid (base_id) || index == 0)
    return NULL;
  return g_strdup_printf ("%s[%u]", base_id, index);
}

/* bjobs -J NAME lists the array's elements, each with the array's JOBID. */
static gboolean
lsf_array_parse_lookup (const DatcCommandResult *res, gchar **base_id, GError **error)
{
  g_return_val_if_fail (res != NULL && base_id != NULL, FALSE);

  *base_id = NULL;
  g_autoptr (GHashTable) gone = datc_batch_answers_new ();
  g_autoptr (GPtrArray) rows = datc_batch_argv_new ();
  if (!lsf_parse_table (res, gone, rows, error))
    return FALSE;
  g_autoptr (GPtrArray) found = datc_batch_argv_new ();
  for (guint i = 0; i < rows->len; i++)
    if (!g_ptr_array_find_with_equal_func (found, rows->pdata[i], g_str_equal, NULL))
      datc_batch_argv_add (found, rows->pdata[i]);
  g_ptr_array_add (found, NULL);
  return datc_batch_lookup_result ((const char *const *) found->pdata, LSF, base_id, error);
}

static const DatcSchedulerArrays lsf_arrays = {
  .script = lsf_array_script,
  .submit_argv = lsf_array_submit_argv,
  .parse_submit = lsf_array_parse_submit,
  .element_id = lsf_element_id,
  .lookup_argv = lsf_lookup_argv,
  .parse_lookup = lsf_array_parse_lookup,
};

/* -o NAME.%J.log, an array element's NAME.%J_%I.log: the element's id
 * ID[I] is written ID_I there. */
static GStrv
lsf_proxy_logs (const char *job_name, const char *job_id, const char *script_name)
{
  (void) script_name;
  if (!lsf_id_is_valid (job_id))
    return NULL;
  g_autofree gchar *id = g_strdup (job_id);
  gchar *bracket = strchr (id, '[');
  if (bracket != NULL)
    {
      *bracket = '_';
      bracket[strlen (bracket) - 1] = '\0'; /* the ']' */
    }
  GStrv logs = g_new0 (gchar *, 2);
  logs[0] = g_strdup_printf ("%s.%s.log", job_name, id);
  return logs;
}

/* ---- queue ------------------------------------------------------------ */

static GStrv
lsf_queue_argv (const char *queue)
{
  /* One queue name (bsub -q takes a list only separated by spaces, which
   * the queue check refuses anyway). */
  if (!datc_batch_queue_is_valid (queue) || strchr (queue, ',') != NULL)
    return NULL;

  const char *const fixed[] = { "-w", queue, NULL };
  return lsf_argv ("bqueues", fixed, NULL);
}

static gboolean
lsf_parse_queue (const DatcCommandResult *res, const char *queue, gboolean *exists, gchar **answer,
                 GError **error)
{
  g_return_val_if_fail (res != NULL && queue != NULL && exists != NULL && answer != NULL, FALSE);

  if (res->exit_status != 0)
    return datc_batch_queue_missing (res, res->err, "^\\S+: No such queue", NULL, LSF, "bqueues",
                                     exists, answer, error);

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, LSF, "bqueues's stdout", &lines, error))
    return FALSE;
  if (lines[0] == NULL || !g_str_has_prefix (lines[0], "QUEUE_NAME "))
    {
      datc_batch_set_parse_error (error, LSF, "expected bqueues' header QUEUE_NAME PRIO STATUS",
                                  lines[0] != NULL ? lines[0] : "");
      return FALSE;
    }
  for (gsize i = 1; lines[i] != NULL; i++)
    {
      g_auto (GStrv) words = datc_batch_words (lines[i]);

      if (g_strv_length (words) < 3 || strcmp (words[0], queue) != 0)
        continue;
      g_autofree gchar *summary
          = g_strdup_printf ("%s: %s, priority %s", queue, words[2], words[1]);
      const char *const parts[] = { summary, NULL };
      *exists = TRUE;
      *answer = datc_batch_queue_answer (parts);
      return TRUE;
    }
  g_autofree gchar *all = g_strjoinv ("\n", lines);
  g_autofree gchar *what = g_strdup_printf ("expected a row for queue %s from bqueues", queue);
  datc_batch_set_parse_error (error, LSF, what, all);
  return FALSE;
}

static const char *const lsf_programs[] = { "bsub", "bjobs", "bkill", "bqueues", NULL };

const DatcSchedulerClass datc_scheduler_lsf = {
  .name = "lsf",
  .script = lsf_script,
  .submit_argv = lsf_submit_argv,
  .parse_submit = lsf_parse_submit,
  .poll_argv = lsf_poll_argv,
  .parse_poll = lsf_parse_poll,
  .parse_poll_reasons = lsf_parse_poll_reasons,
  .cancel_argv = lsf_cancel_argv,
  .lookup_argv = lsf_lookup_argv,
  .parse_lookup = lsf_parse_lookup,
  .queue_argv = lsf_queue_argv,
  .parse_queue = lsf_parse_queue,
  .programs = lsf_programs,
  .arrays = &lsf_arrays,
  .proxy_logs = lsf_proxy_logs,
};
