/* scheduler-batch.c: the checks, the script body and the answer helpers
 * the batch schedulers share (see scheduler-batch.h for why they are
 * shared).
 *
 * The script body is POSIX sh, because that is what every batch system
 * runs a job with once asked (-S /bin/sh for Grid Engine; the #! line for
 * the others).  DATC_SLOTS is checked to be a positive number before it is
 * exported: a variable the batch system left empty or set to something
 * odd falls back to what the proxy asked for, rather than handing the
 * agent garbage.  The walltime end is computed when the script starts,
 * which is as close to the job's start as a script can see (Slurm 22.05,
 * Grid Engine and PBS export no end time). */

#include "scheduler-batch.h"

#include <string.h>

/* ---- what goes in ------------------------------------------------------ */

gboolean
datc_batch_name_is_valid (const char *name)
{
  if (name == NULL || !g_ascii_isalpha (name[0]) || strlen (name) > DATC_BATCH_NAME_MAX)
    return FALSE;
  for (const char *p = name; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && strchr ("_.-", *p) == NULL)
      return FALSE;
  return TRUE;
}

gboolean
datc_batch_queue_is_valid (const char *queue)
{
  if (queue == NULL || queue[0] == '\0' || strlen (queue) > DATC_BATCH_QUEUE_MAX)
    return FALSE;
  for (const char *p = queue; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && strchr ("_.@,+-", *p) == NULL)
      return FALSE;
  return TRUE;
}

gboolean
datc_proxy_host_is_valid (const char *host)
{
  if (host == NULL || host[0] == '\0' || host[0] == '-' || strlen (host) > 253)
    return FALSE;
  for (const char *p = host; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && strchr ("._-", *p) == NULL)
      return FALSE;
  return TRUE;
}

static gboolean
hosts_are_valid (const char *const *hosts)
{
  for (guint i = 0; hosts != NULL && hosts[i] != NULL; i++)
    if (!datc_proxy_host_is_valid (hosts[i]))
      return FALSE;
  return TRUE;
}

static gboolean
is_one_line (const char *s)
{
  for (const char *p = s; *p != '\0'; p++)
    if ((guchar) *p < 0x20 || *p == 0x7f)
      return FALSE;
  return TRUE;
}

gboolean
datc_batch_request_is_valid (const DatcProxyRequest *req)
{
  g_return_val_if_fail (req != NULL, FALSE);

  return datc_batch_name_is_valid (req->name) && req->slots > 0 && req->agent_command != NULL
         && req->agent_command[0] != '\0' && strpbrk (req->agent_command, "\n\r") == NULL
         && (req->queue == NULL || datc_batch_queue_is_valid (req->queue))
         && hosts_are_valid (req->exclude_hosts) && req->workdir != NULL && req->workdir[0] == '/'
         && is_one_line (req->workdir);
}

GStrv
datc_batch_split_submit_args (const char *submit_args)
{
  g_auto (GStrv) words = NULL;
  gint n = 0;

  if (submit_args == NULL)
    return g_new0 (gchar *, 1);
  /* g_shell_parse_argv refuses an empty line; blank means no argument. */
  const char *p = submit_args;
  while (g_ascii_isspace (*p))
    p++;
  if (*p == '\0')
    return g_new0 (gchar *, 1);

  if (!g_shell_parse_argv (submit_args, &n, &words, NULL))
    return NULL;
  if ((guint) n > DATC_BATCH_SUBMIT_ARGS_MAX)
    return NULL;
  for (gint i = 0; i < n; i++)
    if (words[i][0] == '\0' || strlen (words[i]) > DATC_BATCH_SUBMIT_ARG_LEN_MAX
        || !is_one_line (words[i]))
      return NULL;
  return g_steal_pointer (&words);
}

gboolean
datc_batch_id_is_numeric (const char *id)
{
  gsize len = id != NULL ? strlen (id) : 0;

  if (len == 0 || len > DATC_BATCH_NUMERIC_ID_DIGITS_MAX || id[0] == '0')
    return FALSE;
  for (gsize i = 0; i < len; i++)
    if (!g_ascii_isdigit (id[i]))
      return FALSE;
  return TRUE;
}

gboolean
datc_batch_ids_are_valid (const char *const *ids, gboolean (*valid) (const char *id))
{
  g_return_val_if_fail (valid != NULL, FALSE);

  if (ids == NULL || ids[0] == NULL)
    return FALSE;
  for (gsize i = 0; ids[i] != NULL; i++)
    if (!valid (ids[i]))
      return FALSE;
  return TRUE;
}

gboolean
datc_batch_id_is_element (const char *id, char sep)
{
  const char *at = id != NULL ? strchr (id, sep) : NULL;

  if (at == NULL || strlen (id) > DATC_BATCH_ID_MAX)
    return FALSE;
  g_autofree gchar *base = g_strndup (id, (gsize) (at - id));
  return datc_batch_id_is_numeric (base) && datc_batch_id_is_numeric (at + 1);
}

gboolean
datc_batch_array_size_is_valid (guint k)
{
  return k >= DATC_ARRAY_MIN && k <= DATC_ARRAY_MAX;
}

/* ---- the script -------------------------------------------------------- */

gchar *
datc_batch_array_index_code (const char *variable, gboolean zero_based)
{
  g_return_val_if_fail (variable != NULL, NULL);

  return g_strdup_printf (
      "# The element of the array this proxy is: its agent's proxy name\n"
      "# ends in it.\n"
      "case ${%s:-} in\n"
      "  ''|*[!0-9]*|%s) echo \"datc: %s is '${%s:-}', not an array index\" >&2; "
      "exit 1 ;;\n"
      "esac\n"
      "%s=$(( %s%s ))\n"
      "export %s\n",
      variable, zero_based ? "0?*" : "0*", variable, variable, DATC_ARRAY_INDEX_VAR, variable,
      zero_based ? " + 1" : "", DATC_ARRAY_INDEX_VAR);
}

gchar *
datc_batch_script (const DatcProxyRequest *req, const char *scheduler, const char *directives,
                   const char *slots_code, const char *before_exec)
{
  g_return_val_if_fail (req != NULL, NULL);
  g_return_val_if_fail (scheduler != NULL, NULL);

  if (!datc_batch_request_is_valid (req))
    return NULL;

  GString *s = g_string_new ("#!/bin/sh\n");

  g_string_append (s, directives != NULL ? directives : "");
  g_string_append_printf (s,
                          "# datc proxy %s (scheduler %s): the agent learns the slots %s\n"
                          "# granted and when the walltime ends from DATC_SLOTS and\n"
                          "# DATC_WALLTIME_END (seconds since the epoch).\n",
                          req->name, scheduler, scheduler);
  g_string_append (s, slots_code != NULL ? slots_code : "");
  g_string_append_printf (s,
                          "case ${DATC_SLOTS:-} in ''|*[!0-9]*|0*) DATC_SLOTS=%u ;; esac\n"
                          "export DATC_SLOTS\n",
                          req->slots);
  if (req->walltime_s > 0)
    g_string_append_printf (s,
                            "DATC_WALLTIME_END=$(( $(date +%%s) + %u ))\n"
                            "export DATC_WALLTIME_END\n",
                            req->walltime_s);
  g_string_append (s, before_exec != NULL ? before_exec : "");
  g_string_append_printf (s, "exec %s\n", req->agent_command);
  return g_string_free (s, FALSE);
}

/* ---- argv -------------------------------------------------------------- */

GPtrArray *
datc_batch_argv_new (void)
{
  return g_ptr_array_new_with_free_func (g_free);
}

void
datc_batch_argv_add (GPtrArray *argv, const char *arg)
{
  g_ptr_array_add (argv, g_strdup (arg));
}

void
datc_batch_argv_add_all (GPtrArray *argv, const char *const *args)
{
  for (gsize i = 0; args != NULL && args[i] != NULL; i++)
    datc_batch_argv_add (argv, args[i]);
}

GStrv
datc_batch_argv_end (GPtrArray *argv)
{
  g_ptr_array_set_free_func (argv, NULL);
  g_ptr_array_add (argv, NULL);
  return (GStrv) g_ptr_array_free (argv, FALSE);
}

GStrv
datc_batch_sh_argv (const char *script, const char *name, const char *const *args)
{
  GPtrArray *argv = datc_batch_argv_new ();

  datc_batch_argv_add (argv, "/bin/sh");
  datc_batch_argv_add (argv, "-c");
  datc_batch_argv_add (argv, script);
  datc_batch_argv_add (argv, name);
  datc_batch_argv_add_all (argv, args);
  return datc_batch_argv_end (argv);
}

GStrv
datc_batch_cancel_argv (const char *command, const char *ok_regex, const char *name,
                        const char *const *ids, gboolean (*valid) (const char *id))
{
  g_return_val_if_fail (command != NULL && ok_regex != NULL, NULL);
  g_return_val_if_fail (strchr (ok_regex, '\'') == NULL, NULL);

  if (!datc_batch_ids_are_valid (ids, valid))
    return NULL;

  /* A non-zero exit passes only when some line says "deleted" or "already
   * gone" and every other non-blank line does too (condor_rm, for one,
   * prints an empty line before "Job 12.0 not found"); a failure that
   * said nothing stays a failure.  What does not match goes to stderr. */
  g_autofree gchar *script = g_strdup_printf (
      "out=$(%s \"$@\" 2>&1)\n"
      "st=$?\n"
      "[ \"$st\" -eq 0 ] && exit 0\n"
      "ok='%s'\n"
      "rest=$(printf '%%s\\n' \"$out\" | grep -v -E -e '^[[:space:]]*$' -e \"$ok\")\n"
      "if [ -n \"$rest\" ] || ! printf '%%s\\n' \"$out\" | grep -q -E -e \"$ok\"; then\n"
      "  printf '%%s\\n' \"${rest:-$out}\" >&2\n"
      "  exit \"$st\"\n"
      "fi\n"
      "exit 0\n",
      command, ok_regex);
  return datc_batch_sh_argv (script, name, ids);
}

/* ---- answers ----------------------------------------------------------- */

gboolean
datc_batch_answer_lines (GBytes *bytes, const char *scheduler, const char *what, GStrv *lines,
                         GError **error)
{
  g_autofree gchar *text = NULL;

  if (!datc_site_answer_text (bytes, what, &text, error))
    {
      g_prefix_error (error, "%s: ", scheduler);
      return FALSE;
    }

  g_auto (GStrv) all = g_strsplit (text, "\n", -1);
  GPtrArray *kept = datc_batch_argv_new ();

  for (gsize i = 0; all[i] != NULL; i++)
    {
      g_strstrip (all[i]);
      if (all[i][0] != '\0')
        datc_batch_argv_add (kept, all[i]);
    }
  *lines = datc_batch_argv_end (kept);
  return TRUE;
}

void
datc_batch_set_parse_error (GError **error, const char *scheduler, const char *what,
                            const char *text)
{
  g_autoptr (GBytes) bytes = g_bytes_new (text, text != NULL ? strlen (text) : 0);
  g_autofree gchar *quoted = datc_site_quote_output (bytes);

  g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE, "%s: %s: %s", scheduler, what,
               quoted);
}

gboolean
datc_batch_one_id (const char *const *lines, gboolean (*valid) (const char *id),
                   const char *scheduler, const char *expected, gchar **job_id, GError **error)
{
  if (g_strv_length ((GStrv) lines) != 1 || !valid (lines[0]))
    {
      g_autofree gchar *all = g_strjoinv ("\n", (GStrv) lines);
      datc_batch_set_parse_error (error, scheduler, expected, all);
      return FALSE;
    }
  *job_id = g_strdup (lines[0]);
  return TRUE;
}

gboolean
datc_batch_lookup_result (const char *const *found, const char *scheduler, gchar **job_id,
                          GError **error)
{
  *job_id = NULL;
  if (g_strv_length ((GStrv) found) > 1)
    {
      g_autofree gchar *all = g_strjoinv (", ", (GStrv) found);
      datc_batch_set_parse_error (error, scheduler, "several jobs carry the name", all);
      return FALSE;
    }
  if (found[0] != NULL)
    *job_id = g_strdup (found[0]);
  return TRUE;
}

gboolean
datc_batch_lookup_ids (const char *const *items, gboolean (*valid) (const char *id),
                       const char *scheduler, const char *expected, gchar **job_id, GError **error)
{
  *job_id = NULL;
  for (gsize i = 0; items[i] != NULL; i++)
    if (!valid (items[i]))
      {
        datc_batch_set_parse_error (error, scheduler, expected, items[i]);
        return FALSE;
      }
  return datc_batch_lookup_result (items, scheduler, job_id, error);
}

void
datc_batch_set_command_error (GError **error, const char *scheduler, const char *command,
                              const DatcCommandResult *res)
{
  g_autofree gchar *what = g_strdup_printf ("%s: %s", scheduler, command);

  datc_site_set_command_error (error, what, res);
}

GStrv
datc_batch_words (const char *line)
{
  GPtrArray *words = datc_batch_argv_new ();
  const char *p = line;

  while (*p != '\0')
    {
      while (*p != '\0' && g_ascii_isspace (*p))
        p++;
      const char *start = p;
      while (*p != '\0' && !g_ascii_isspace (*p))
        p++;
      if (p > start)
        g_ptr_array_add (words, g_strndup (start, (gsize) (p - start)));
    }
  return datc_batch_argv_end (words);
}

DatcProxyState
datc_batch_state_lookup (const DatcBatchStateWord *table, gsize n, const char *word)
{
  for (gsize i = 0; i < n; i++)
    if (strcmp (table[i].word, word) == 0)
      return table[i].state;
  return DATC_PROXY_UNKNOWN;
}

GHashTable *
datc_batch_answers_new (void)
{
  return g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
}

void
datc_batch_answers_set (GHashTable *answers, const char *id, DatcProxyState state)
{
  /* +1 so that PENDING (0) is not NULL. */
  g_hash_table_replace (answers, g_strdup (id), GINT_TO_POINTER ((gint) state + 1));
}

void
datc_batch_answers_fill (GHashTable *answers, const char *const *ids, DatcProxyState *states,
                         DatcProxyState missing)
{
  for (gsize i = 0; ids[i] != NULL; i++)
    {
      gpointer found = g_hash_table_lookup (answers, ids[i]);
      states[i] = found != NULL ? (DatcProxyState) (GPOINTER_TO_INT (found) - 1) : missing;
    }
}

GHashTable *
datc_batch_reasons_new (void)
{
  return g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
}

void
datc_batch_reasons_set (GHashTable *table, const char *id, const char *text)
{
  if (text == NULL)
    return;
  g_autofree gchar *valid = g_utf8_make_valid (text, -1);
  GString *kept = g_string_new (NULL);

  /* One line of plain words: it goes into a status line and a table. */
  for (const char *p = valid; *p != '\0'; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);
      gboolean blank = g_unichar_isspace (c) || !g_unichar_isprint (c);

      if (blank && (kept->len == 0 || kept->str[kept->len - 1] == ' '))
        continue;
      if (kept->len + 6 > DATC_SITE_REASON_MAX)
        break;
      if (blank)
        g_string_append_c (kept, ' ');
      else
        g_string_append_unichar (kept, c);
    }
  g_strchomp (kept->str);
  if (kept->str[0] == '\0')
    {
      g_string_free (kept, TRUE);
      return;
    }
  g_hash_table_replace (table, g_strdup (id), g_string_free (kept, FALSE));
}

void
datc_batch_reasons_fill (GHashTable *table, const char *const *ids, const DatcProxyState *states,
                         gchar **reasons)
{
  for (gsize i = 0; ids[i] != NULL; i++)
    if (states[i] == DATC_PROXY_PENDING)
      reasons[i] = g_strdup (g_hash_table_lookup (table, ids[i]));
}

gboolean
datc_batch_lines_all_match (const char *text, const char *const *patterns)
{
  g_auto (GStrv) lines = g_strsplit (text != NULL ? text : "", "\n", -1);

  for (gsize i = 0; lines[i] != NULL; i++)
    {
      gboolean matched = FALSE;

      g_strstrip (lines[i]);
      if (lines[i][0] == '\0')
        continue;
      for (gsize j = 0; patterns[j] != NULL && !matched; j++)
        matched = g_regex_match_simple (patterns[j], lines[i], 0, 0);
      if (!matched)
        return FALSE;
    }
  return TRUE;
}

/* ---- queues ------------------------------------------------------------ */

gboolean
datc_batch_queue_missing (const DatcCommandResult *res, GBytes *stream, const char *missing_regex,
                          const char *other_regex, const char *scheduler, const char *command,
                          gboolean *exists, gchar **answer, GError **error)
{
  g_autofree gchar *text = NULL;
  g_autoptr (GPtrArray) said = g_ptr_array_new_with_free_func (g_free);
  gboolean only_expected = TRUE;

  if (res->exit_status != 0 && datc_site_answer_text (stream, "output", &text, NULL))
    {
      g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
      for (gsize i = 0; lines[i] != NULL; i++)
        {
          g_strstrip (lines[i]);
          if (lines[i][0] == '\0')
            continue;
          if (g_regex_match_simple (missing_regex, lines[i], 0, 0))
            g_ptr_array_add (said, g_strdup (lines[i]));
          else if (other_regex == NULL || !g_regex_match_simple (other_regex, lines[i], 0, 0))
            only_expected = FALSE;
        }
    }
  if (said->len == 0 || !only_expected)
    {
      datc_batch_set_command_error (error, scheduler, command, res);
      return FALSE;
    }
  g_ptr_array_add (said, NULL);
  g_autofree gchar *joined = g_strjoinv ("; ", (gchar **) said->pdata);
  g_autoptr (GBytes) bytes = g_bytes_new (joined, strlen (joined));
  *exists = FALSE;
  *answer = datc_site_quote_output (bytes);
  return TRUE;
}

gchar *
datc_batch_queue_answer (const char *const *parts)
{
  g_autofree gchar *joined = g_strjoinv ("; ", (gchar **) parts);
  g_autoptr (GBytes) bytes = g_bytes_new (joined, strlen (joined));

  return datc_site_quote_output (bytes);
}
