/* scheduler-slurm.c: a proxy is one Slurm batch job: one node, one task
 * with `slots` CPUs.  Tested on recorded answers and against the real
 * Slurm 22.05 of tests/testbed/slurm-up.sh (test-slurm-real.c).
 *
 * Shapes that matter (../shared/TESTBED-NOTES.md section 1):
 *
 *  - Submit is `sbatch --parsable --chdir=WORKDIR [submit_args] SCRIPT`:
 *    no shell, the workdir is an argument, and the log NAME.%j.log is
 *    relative to it.  --parsable prints "ID" or "ID;CLUSTER".
 *  - DATC_SLOTS is SLURM_CPUS_ON_NODE, what the node gave the job (it can
 *    be more than asked on whole-node allocations).
 *  - Slurm 22.05 exports no end time, so the script computes
 *    DATC_WALLTIME_END from its own start and the walltime asked; --time
 *    is in whole minutes (rounded up), so the real limit is never sooner.
 *  - The warning is `--signal=B:USR1@W`: USR1 to the batch shell, which
 *    is the agent (the script `exec`s it).  slurmctld checks time limits
 *    only every 30 s, so a warning shorter than that can fall between two
 *    checks; W is a quarter of the limit, kept within 35..60 s.  The kill
 *    itself comes up to ~30 s after the limit: TERM, then KILL after
 *    KillWait.
 *  - Poll is `squeue -h -t all -r -j ID,ID -o '%i %T'`, which works without
 *    slurmdbd and knows finished jobs for MinJobAge.  An id it no longer
 *    knows is left out of the answer (several ids) or makes it exit 1
 *    with "Invalid job id specified" (one id): either way FINISHED.
 *  - scancel exits 0 for ids it does not know (checked on 22.05), so the
 *    cancel command needs no wrapper.
 *  - Lookup is `squeue -h -t all --name=NAME -o %i`, empty when none.
 *  - The queue (a partition) is asked about with `scontrol -a -o show
 *    partition P` (-a: hidden ones too; -o: one line, PartitionName=P ...
 *    State=UP ...), which says "Partition P not found" (on stdout, exit
 *    1) for an unknown one; sinfo would print nothing.  A list "a,b" (sbatch's
 *    --partition takes one) is asked about name by name, stopping at the
 *    first unknown.
 *  - Arrays: `sbatch --array=1-K` prints the array's id; element I is
 *    ID_I, which squeue -j and scancel take (several in one scancel).
 *    squeue collapses pending elements into "ID_[1-4]" unless -r; the
 *    parser reads that form too.  Cancelled pending elements leave squeue
 *    at once.  An array is found by name with `-o %F` (its base id on each
 *    element's line). */

#include "scheduler-batch.h"

#include <string.h>

#define SLURM "slurm"

/* The advance warning, in seconds, for a limit of `limit_s` (see above). */
#define SLURM_WARNING_MIN_S 35u
#define SLURM_WARNING_MAX_S 60u

/* A job's id, as sbatch prints it. */
static gboolean
slurm_job_id_is_valid (const char *id)
{
  return datc_batch_id_is_numeric (id);
}

/* What poll and cancel take: a job's id or an array element's, 123_4. */
static gboolean
slurm_id_is_valid (const char *id)
{
  return datc_batch_id_is_numeric (id) || datc_batch_id_is_element (id, '_');
}

/* ---- script and submit ------------------------------------------------ */

/* The script of one proxy or of an array (one log per element, and
 * DATC_ARRAY_INDEX from SLURM_ARRAY_TASK_ID). */
static gchar *
slurm_write_script (const DatcProxyRequest *req, gboolean array)
{
  g_return_val_if_fail (req != NULL, NULL);

  if (!datc_batch_request_is_valid (req))
    return NULL;

  g_autoptr (GString) d = g_string_new (NULL);
  g_string_append_printf (d, "#SBATCH --job-name=%s\n", req->name);
  g_string_append (d, "#SBATCH --nodes=1\n#SBATCH --ntasks=1\n");
  g_string_append_printf (d, "#SBATCH --cpus-per-task=%u\n", req->slots);
  g_string_append_printf (d, "#SBATCH --output=%s.%s.log\n", req->name, array ? "%A_%a" : "%j");
  if (req->walltime_s > 0)
    {
      guint minutes = (req->walltime_s + 59) / 60;
      guint warning = CLAMP (minutes * 60 / 4, SLURM_WARNING_MIN_S, SLURM_WARNING_MAX_S);

      g_string_append_printf (d, "#SBATCH --time=%u\n", minutes);
      g_string_append_printf (d, "#SBATCH --signal=B:USR1@%u\n", warning);
    }
  if (req->queue != NULL)
    g_string_append_printf (d, "#SBATCH --partition=%s\n", req->queue);
  if (req->exclude_hosts != NULL && req->exclude_hosts[0] != NULL)
    {
      g_autofree gchar *hosts = g_strjoinv (",", (gchar **) req->exclude_hosts);
      g_string_append_printf (d, "#SBATCH --exclude=%s\n", hosts);
    }

  g_autofree gchar *index_code
      = array ? datc_batch_array_index_code ("SLURM_ARRAY_TASK_ID", FALSE) : NULL;
  return datc_batch_script (req, SLURM, d->str, "DATC_SLOTS=${SLURM_CPUS_ON_NODE:-}\n", index_code);
}

static gchar *
slurm_script (const DatcProxyRequest *req)
{
  return slurm_write_script (req, FALSE);
}

/* sbatch for one job (k == 0) or an array of elements 1..k. */
static GStrv
slurm_write_submit_argv (const DatcProxyRequest *req, guint k, const char *script_path)
{
  g_return_val_if_fail (req != NULL, NULL);
  g_return_val_if_fail (script_path != NULL, NULL);

  g_auto (GStrv) extra = datc_batch_split_submit_args (req->submit_args);
  if (extra == NULL || req->workdir == NULL || req->workdir[0] != '/' || script_path[0] != '/')
    return NULL;

  GPtrArray *argv = datc_batch_argv_new ();
  datc_batch_argv_add (argv, "sbatch");
  datc_batch_argv_add (argv, "--parsable");
  g_ptr_array_add (argv, g_strconcat ("--chdir=", req->workdir, NULL));
  if (k > 0)
    g_ptr_array_add (argv, g_strdup_printf ("--array=1-%u", k));
  datc_batch_argv_add_all (argv, (const char *const *) extra);
  datc_batch_argv_add (argv, script_path);
  return datc_batch_argv_end (argv);
}

static GStrv
slurm_submit_argv (const DatcProxyRequest *req, const char *script_path)
{
  return slurm_write_submit_argv (req, 0, script_path);
}

static gboolean
slurm_parse_submit (const DatcCommandResult *res, gchar **job_id, GError **error)
{
  g_return_val_if_fail (res != NULL && job_id != NULL, FALSE);

  if (res->exit_status != 0)
    {
      datc_batch_set_command_error (error, SLURM, "sbatch", res);
      return FALSE;
    }

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, SLURM, "sbatch's stdout", &lines, error))
    return FALSE;
  if (g_strv_length (lines) != 1)
    {
      g_autofree gchar *all = g_strjoinv ("\n", lines);
      datc_batch_set_parse_error (error, SLURM, "expected one job id from sbatch --parsable", all);
      return FALSE;
    }

  /* "ID" or, on a multi-cluster setup, "ID;CLUSTER". */
  g_autofree gchar *id = g_strdup (lines[0]);
  gchar *semicolon = strchr (id, ';');
  if (semicolon != NULL)
    *semicolon = '\0';
  if (!slurm_job_id_is_valid (id))
    {
      datc_batch_set_parse_error (error, SLURM, "expected a job id from sbatch --parsable",
                                  lines[0]);
      return FALSE;
    }
  *job_id = g_steal_pointer (&id);
  return TRUE;
}
/* ---- poll ------------------------------------------------------------- */

static GStrv
slurm_poll_argv (const char *const *ids)
{
  if (!datc_batch_ids_are_valid (ids, slurm_id_is_valid))
    return NULL;

  g_autofree gchar *list = g_strjoinv (",", (gchar **) ids);
  GPtrArray *argv = datc_batch_argv_new ();
  /* -r: an array's pending elements one per line (123_4), not collapsed
   * (123_[2-5]). */
  const char *const fixed[] = { "squeue", "-h", "-t", "all", "-r", "-j", NULL };

  datc_batch_argv_add_all (argv, fixed);
  datc_batch_argv_add (argv, list);
  datc_batch_argv_add (argv, "-o");
  /* %r: why a pending job waits (Resources, Priority, ...), "None" for
   * others; it is the rest of the line, which may hold spaces. */
  datc_batch_argv_add (argv, "%i %T %r");
  return datc_batch_argv_end (argv);
}

/* Every state squeue's %T prints (22.05 and later), and what it means for
 * a proxy.  COMPLETING still holds the allocation: RUNNING until the end
 * is final.  A proxy that ran into its walltime, was cancelled or was
 * preempted ended the way proxies end; FAILED is for what says the proxy
 * or its node went wrong. */
static const DatcBatchStateWord slurm_states[] = {
  { "PENDING", DATC_PROXY_PENDING },      { "CONFIGURING", DATC_PROXY_PENDING },
  { "REQUEUED", DATC_PROXY_PENDING },     { "REQUEUE_HOLD", DATC_PROXY_PENDING },
  { "REQUEUE_FED", DATC_PROXY_PENDING },  { "RESV_DEL_HOLD", DATC_PROXY_PENDING },
  { "RUNNING", DATC_PROXY_RUNNING },      { "COMPLETING", DATC_PROXY_RUNNING },
  { "SUSPENDED", DATC_PROXY_RUNNING },    { "STOPPED", DATC_PROXY_RUNNING },
  { "SIGNALING", DATC_PROXY_RUNNING },    { "RESIZING", DATC_PROXY_RUNNING },
  { "STAGE_OUT", DATC_PROXY_RUNNING },    { "COMPLETED", DATC_PROXY_FINISHED },
  { "CANCELLED", DATC_PROXY_FINISHED },   { "TIMEOUT", DATC_PROXY_FINISHED },
  { "PREEMPTED", DATC_PROXY_FINISHED },   { "DEADLINE", DATC_PROXY_FINISHED },
  { "REVOKED", DATC_PROXY_FINISHED },     { "FAILED", DATC_PROXY_FAILED },
  { "NODE_FAIL", DATC_PROXY_FAILED },     { "BOOT_FAIL", DATC_PROXY_FAILED },
  { "OUT_OF_MEMORY", DATC_PROXY_FAILED }, { "SPECIAL_EXIT", DATC_PROXY_FAILED },
};

/* A state word we do not know yet (a newer Slurm): upper case letters and
 * underscores.  UNKNOWN, not a parse error, so one new state does not
 * blind the whole poll. */
static gboolean
is_state_word (const char *word)
{
  if (word[0] == '\0')
    return FALSE;
  for (const char *p = word; *p != '\0'; p++)
    if (!g_ascii_isupper (*p) && *p != '_')
      return FALSE;
  return TRUE;
}

static gboolean
stderr_is_only_invalid_id (const DatcCommandResult *res)
{
  g_autofree gchar *err = NULL;
  static const char *const patterns[]
      = { "^slurm_load_jobs error: Invalid job id specified$", NULL };

  return datc_site_answer_text (res->err, "stderr", &err, NULL) && err[0] != '\0'
         && datc_batch_lines_all_match (err, patterns);
}

/* Pending elements squeue shows on one line, "123_[2-5,7%4]" (without
 * -r, or from an older squeue): base 123, indices 2..5 and 7. */
typedef struct {
  guint64 base;
  guint64 lo, hi;
  DatcProxyState state;
  const char *reason; /* the line's %r (points into the answer), or NULL */
} SlurmElements;

static gboolean
parse_index (const char *s, guint64 *value)
{
  return datc_batch_id_is_numeric (s)
         && g_ascii_string_to_unsigned (s, 10, 1, G_MAXINT64, value, NULL);
}

/* Appends the ranges of `word` to `out`; FALSE when it is not of that
 * shape. */
static gboolean
parse_collapsed (const char *word, DatcProxyState state, const char *reason, GArray *out)
{
  const char *open = strstr (word, "_[");
  gsize len = strlen (word);

  if (open == NULL || len < 4 || word[len - 1] != ']')
    return FALSE;
  g_autofree gchar *base_text = g_strndup (word, (gsize) (open - word));
  g_autofree gchar *list = g_strndup (open + 2, (gsize) (word + len - 1 - (open + 2)));
  guint64 base = 0;
  gchar *throttle = strchr (list, '%');

  if (!parse_index (base_text, &base))
    return FALSE;
  if (throttle != NULL)
    {
      guint64 ignored = 0;
      if (!parse_index (throttle + 1, &ignored))
        return FALSE;
      *throttle = '\0';
    }
  g_auto (GStrv) items = g_strsplit (list, ",", -1);
  if (items[0] == NULL)
    return FALSE;
  for (gsize i = 0; items[i] != NULL; i++)
    {
      SlurmElements e = { .base = base, .state = state, .reason = reason };
      gchar *dash = strchr (items[i], '-');

      if (dash != NULL)
        *dash = '\0';
      /* Slurm counts array indices from 0. */
      if (!(strcmp (items[i], "0") == 0 || parse_index (items[i], &e.lo)))
        return FALSE;
      e.hi = e.lo;
      if (dash != NULL && !parse_index (dash + 1, &e.hi))
        return FALSE;
      if (e.hi < e.lo)
        return FALSE;
      g_array_append_val (out, e);
    }
  return TRUE;
}

/* The state (and reason) of element id "BASE_INDEX" from the collapsed
 * lines, if one covers it. */
static gboolean
collapsed_state (const GArray *collapsed, const char *id, DatcProxyState *state,
                 const char **reason)
{
  const char *sep = strchr (id, '_');
  guint64 base = 0, index = 0;

  if (sep == NULL)
    return FALSE;
  g_autofree gchar *base_text = g_strndup (id, (gsize) (sep - id));
  if (!parse_index (base_text, &base) || !parse_index (sep + 1, &index))
    return FALSE;
  for (guint i = 0; i < collapsed->len; i++)
    {
      const SlurmElements *e = &g_array_index (collapsed, SlurmElements, i);
      if (e->base == base && index >= e->lo && index <= e->hi)
        {
          *state = e->state;
          *reason = e->reason;
          return TRUE;
        }
    }
  return FALSE;
}

/* What follows the first two words of `line` (the %r column), or NULL. */
static const char *
third_column (const char *line)
{
  const char *p = line;

  for (int word = 0; word < 2; word++)
    {
      p += strspn (p, " \t");
      p += strcspn (p, " \t");
    }
  p += strspn (p, " \t");
  return *p != '\0' ? p : NULL;
}

static gboolean
slurm_parse_poll_reasons (const DatcCommandResult *res, const char *const *ids,
                          DatcProxyState *states, gchar **reasons, GError **error)
{
  g_return_val_if_fail (res != NULL && ids != NULL, FALSE);

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, SLURM, "squeue's stdout", &lines, error))
    return FALSE;

  /* One id squeue has forgotten: exit 1 and nothing else to say. */
  if (res->exit_status != 0)
    {
      if (lines[0] == NULL && stderr_is_only_invalid_id (res))
        {
          for (gsize i = 0; ids[i] != NULL; i++)
            states[i] = DATC_PROXY_FINISHED;
          return TRUE;
        }
      datc_batch_set_command_error (error, SLURM, "squeue", res);
      return FALSE;
    }

  g_autoptr (GHashTable) answers = datc_batch_answers_new ();
  g_autoptr (GHashTable) why = datc_batch_reasons_new ();
  g_autoptr (GArray) collapsed = g_array_new (FALSE, FALSE, sizeof (SlurmElements));
  for (gsize i = 0; lines[i] != NULL; i++)
    {
      g_auto (GStrv) words = datc_batch_words (lines[i]);
      /* "None": nothing holds it (running, ended, or not looked at yet). */
      const char *reason = third_column (lines[i]);
      gboolean shaped = g_strv_length (words) >= 2 && is_state_word (words[1]);
      DatcProxyState state
          = shaped ? datc_batch_state_lookup (slurm_states, G_N_ELEMENTS (slurm_states), words[1])
                   : DATC_PROXY_UNKNOWN;

      if (g_strcmp0 (reason, "None") == 0)
        reason = NULL;
      if (shaped && slurm_id_is_valid (words[0]))
        {
          datc_batch_answers_set (answers, words[0], state);
          datc_batch_reasons_set (why, words[0], reason);
        }
      else if (!shaped || !parse_collapsed (words[0], state, reason, collapsed))
        {
          datc_batch_set_parse_error (error, SLURM, "expected 'JOBID STATE [REASON]' from squeue",
                                      lines[i]);
          return FALSE;
        }
    }
  datc_batch_answers_fill (answers, ids, states, DATC_PROXY_FINISHED);
  for (gsize i = 0; ids[i] != NULL; i++)
    {
      const char *reason = NULL;
      if (!g_hash_table_contains (answers, ids[i])
          && collapsed_state (collapsed, ids[i], &states[i], &reason))
        datc_batch_reasons_set (why, ids[i], reason);
    }
  if (reasons != NULL)
    datc_batch_reasons_fill (why, ids, states, reasons);
  return TRUE;
}

static gboolean
slurm_parse_poll (const DatcCommandResult *res, const char *const *ids, DatcProxyState *states,
                  GError **error)
{
  return slurm_parse_poll_reasons (res, ids, states, NULL, error);
}

/* ---- cancel and lookup ------------------------------------------------- */

static GStrv
slurm_cancel_argv (const char *const *ids)
{
  if (!datc_batch_ids_are_valid (ids, slurm_id_is_valid))
    return NULL;

  GPtrArray *argv = datc_batch_argv_new ();
  datc_batch_argv_add (argv, "scancel");
  datc_batch_argv_add_all (argv, ids);
  return datc_batch_argv_end (argv);
}

/* squeue for the jobs named `job_name` (one line per array element with
 * `elements`), each line in `format`. */
static GStrv
squeue_by_name (const char *job_name, gboolean elements, const char *format)
{
  if (!datc_batch_name_is_valid (job_name))
    return NULL;

  GPtrArray *argv = datc_batch_argv_new ();
  const char *const fixed[] = { "squeue", "-h", "-t", "all", NULL };

  datc_batch_argv_add_all (argv, fixed);
  if (elements)
    datc_batch_argv_add (argv, "-r");
  g_ptr_array_add (argv, g_strconcat ("--name=", job_name, NULL));
  datc_batch_argv_add (argv, "-o");
  datc_batch_argv_add (argv, format);
  return datc_batch_argv_end (argv);
}

static GStrv
slurm_lookup_argv (const char *job_name)
{
  return squeue_by_name (job_name, FALSE, "%i");
}

static gboolean
slurm_parse_lookup (const DatcCommandResult *res, gchar **job_id, GError **error)
{
  g_return_val_if_fail (res != NULL && job_id != NULL, FALSE);

  *job_id = NULL;
  if (res->exit_status != 0)
    {
      datc_batch_set_command_error (error, SLURM, "squeue", res);
      return FALSE;
    }

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, SLURM, "squeue's stdout", &lines, error))
    return FALSE;
  return datc_batch_lookup_ids ((const char *const *) lines, slurm_job_id_is_valid, SLURM,
                                "expected a job id per line from squeue", job_id, error);
}

/* ---- arrays -------------------------------------------------------------- */

static gchar *
slurm_array_script (const DatcProxyRequest *req)
{
  return slurm_write_script (req, TRUE);
}

static GStrv
slurm_array_submit_argv (const DatcProxyRequest *req, guint k, const char *script_path)
{
  if (!datc_batch_array_size_is_valid (k))
    return NULL;
  return slurm_write_submit_argv (req, k, script_path);
}

/* sbatch --parsable prints the array's job id like any other. */
static gboolean
slurm_array_parse_submit (const DatcCommandResult *res, guint k, gchar **base_id, GError **error)
{
  (void) k;
  return slurm_parse_submit (res, base_id, error);
}

static gchar *
slurm_element_id (const char *base_id, guint index)
{
  if (!slurm_job_id_is_valid (base_id) || index == 0)
    return NULL;
  return g_strdup_printf ("%s_%u", base_id, index);
}

/* %F is the array's base id on each element's line (%i would be 123_4). */
static GStrv
slurm_array_lookup_argv (const char *job_name)
{
  return squeue_by_name (job_name, TRUE, "%F");
}

static gboolean
slurm_array_parse_lookup (const DatcCommandResult *res, gchar **base_id, GError **error)
{
  g_return_val_if_fail (res != NULL && base_id != NULL, FALSE);

  *base_id = NULL;
  if (res->exit_status != 0)
    {
      datc_batch_set_command_error (error, SLURM, "squeue", res);
      return FALSE;
    }

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, SLURM, "squeue's stdout", &lines, error))
    return FALSE;
  /* One line per element, each naming the same base. */
  g_autoptr (GPtrArray) bases = datc_batch_argv_new ();
  for (gsize i = 0; lines[i] != NULL; i++)
    if (!g_ptr_array_find_with_equal_func (bases, lines[i], g_str_equal, NULL))
      datc_batch_argv_add (bases, lines[i]);
  g_ptr_array_add (bases, NULL);
  return datc_batch_lookup_ids ((const char *const *) bases->pdata, slurm_job_id_is_valid, SLURM,
                                "expected an array's job id per line from squeue", base_id, error);
}

static const DatcSchedulerArrays slurm_arrays = {
  .script = slurm_array_script,
  .submit_argv = slurm_array_submit_argv,
  .parse_submit = slurm_array_parse_submit,
  .element_id = slurm_element_id,
  .lookup_argv = slurm_array_lookup_argv,
  .parse_lookup = slurm_array_parse_lookup,
};

/* ---- queue ------------------------------------------------------------ */

static GStrv
slurm_queue_argv (const char *queue)
{
  if (!datc_batch_queue_is_valid (queue))
    return NULL;

  g_auto (GStrv) names = g_strsplit (queue, ",", -1);
  for (gsize i = 0; names[i] != NULL; i++)
    if (names[i][0] == '\0')
      return NULL;
  if (names[1] != NULL)
    return datc_batch_sh_argv ("for p do scontrol -a -o show partition \"$p\" || exit; done",
                               "datc-slurm-queue", (const char *const *) names);

  GPtrArray *argv = datc_batch_argv_new ();
  const char *const fixed[] = { "scontrol", "-a", "-o", "show", "partition", NULL };

  datc_batch_argv_add_all (argv, fixed);
  datc_batch_argv_add (argv, queue);
  return datc_batch_argv_end (argv);
}

/* "NAME: State=UP TotalCPUs=8 TotalNodes=1 MaxTime=..." from one
 * `scontrol -o` line, or NULL when the line is not about partition
 * `name`. */
static gchar *
partition_summary (const char *line, const char *name)
{
  g_auto (GStrv) words = datc_batch_words (line);
  g_autofree gchar *first = g_strconcat ("PartitionName=", name, NULL);

  if (words[0] == NULL || strcmp (words[0], first) != 0)
    return NULL;

  static const char *const keys[] = { "State=", "TotalCPUs=", "TotalNodes=", "MaxTime=" };
  g_autoptr (GString) summary = g_string_new (name);
  g_string_append_c (summary, ':');
  for (gsize k = 0; k < G_N_ELEMENTS (keys); k++)
    for (gsize i = 1; words[i] != NULL; i++)
      if (g_str_has_prefix (words[i], keys[k]))
        g_string_append_printf (summary, " %s", words[i]);
  return g_string_free (g_steal_pointer (&summary), FALSE);
}

static gboolean
slurm_parse_queue (const DatcCommandResult *res, const char *queue, gboolean *exists,
                   gchar **answer, GError **error)
{
  g_return_val_if_fail (res != NULL && queue != NULL && exists != NULL && answer != NULL, FALSE);

  if (res->exit_status != 0)
    /* On stdout, after the lines of the partitions a list found. */
    return datc_batch_queue_missing (res, res->out, "^Partition \\S+ not found$",
                                     "^PartitionName=", SLURM, "scontrol", exists, answer, error);

  g_auto (GStrv) lines = NULL;
  if (!datc_batch_answer_lines (res->out, SLURM, "scontrol's stdout", &lines, error))
    return FALSE;

  g_auto (GStrv) names = g_strsplit (queue, ",", -1);
  g_autoptr (GPtrArray) parts = g_ptr_array_new_with_free_func (g_free);
  for (gsize n = 0; names[n] != NULL; n++)
    {
      gchar *summary = NULL;

      for (gsize i = 0; lines[i] != NULL && summary == NULL; i++)
        summary = partition_summary (lines[i], names[n]);
      if (summary == NULL)
        {
          g_autofree gchar *all = g_strjoinv ("\n", lines);
          g_autofree gchar *what
              = g_strdup_printf ("expected 'PartitionName=%s ...' from scontrol", names[n]);
          datc_batch_set_parse_error (error, SLURM, what, all);
          return FALSE;
        }
      g_ptr_array_add (parts, summary);
    }
  g_ptr_array_add (parts, NULL);
  *exists = TRUE;
  *answer = datc_batch_queue_answer ((const char *const *) parts->pdata);
  return TRUE;
}

/* --output=NAME.%j.log, an array's NAME.%A_%a.log: NAME.ID.log either
 * way, the element's id being A_a. */
static GStrv
slurm_proxy_logs (const char *job_name, const char *job_id, const char *script_name)
{
  (void) script_name;
  if (!slurm_id_is_valid (job_id))
    return NULL;
  GStrv logs = g_new0 (gchar *, 2);
  logs[0] = g_strdup_printf ("%s.%s.log", job_name, job_id);
  return logs;
}

static const char *const slurm_programs[] = { "sbatch", "squeue", "scancel", "scontrol", NULL };

const DatcSchedulerClass datc_scheduler_slurm = {
  .name = "slurm",
  .script = slurm_script,
  .submit_argv = slurm_submit_argv,
  .parse_submit = slurm_parse_submit,
  .poll_argv = slurm_poll_argv,
  .parse_poll = slurm_parse_poll,
  .parse_poll_reasons = slurm_parse_poll_reasons,
  .cancel_argv = slurm_cancel_argv,
  .lookup_argv = slurm_lookup_argv,
  .parse_lookup = slurm_parse_lookup,
  .queue_argv = slurm_queue_argv,
  .parse_queue = slurm_parse_queue,
  .programs = slurm_programs,
  .arrays = &slurm_arrays,
  .proxy_logs = slurm_proxy_logs,
};
