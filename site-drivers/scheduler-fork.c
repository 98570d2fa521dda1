/* scheduler-fork.c: "submitting" a proxy means starting it in the
 * background on the site host, detached, in a session of its own.
 *
 * It has to work over any transport, so every command is POSIX sh plus
 * standard tools (setsid from util-linux is the one exception): no procps,
 * no bash-isms.  Shapes that matter:
 *
 *  - The job id is the pid `$!` of `setsid /bin/sh SCRIPT &`.  That child
 *    is not a process group leader (job control is off in sh -c), so
 *    setsid(1) calls setsid() without forking: pid == session id ==
 *    process group id, and the script `exec`s the agent, which keeps it.
 *  - Poll asks `kill -s 0` about the pid.  Between `$!` and setsid() the
 *    group does not exist yet, so poll looks at the pid, never the group.
 *    A zombie nobody reaped (no init in a container) answers kill -0 too,
 *    so where /proc exists its state Z counts as gone.
 *  - Cancel signals the group (the agent and everything it started), and
 *    falls back to the pid for the instant before setsid().
 *  - `kill -s SIG -- -PID` is the spelling both dash and bash accept:
 *    dash rejects `kill -TERM -- -PID`.
 *  - Ids go to the shell as positional parameters, after being checked to
 *    be decimal pids above 1: `kill -- -1` would signal every process the
 *    user owns, and `-0` the caller's own group. */

#include "drivers-private.h"

#include <string.h>

/* Longest pid we accept, in digits (pid_max is at most 2^22 on Linux). */
#define FORK_ID_MAX_DIGITS 10

static gboolean
fork_id_is_valid (const char *id)
{
  gsize len = strlen (id);

  if (len == 0 || len > FORK_ID_MAX_DIGITS || id[0] == '0')
    return FALSE;
  for (gsize i = 0; i < len; i++)
    if (!g_ascii_isdigit (id[i]))
      return FALSE;

  guint64 pid = g_ascii_strtoull (id, NULL, 10);
  return pid > 1 && pid <= G_MAXINT32;
}

static gboolean
fork_ids_are_valid (const char *const *ids)
{
  g_return_val_if_fail (ids != NULL, FALSE);

  for (gsize i = 0; ids[i] != NULL; i++)
    if (!fork_id_is_valid (ids[i]))
      return FALSE;
  return TRUE;
}

/* ---- script and submit ------------------------------------------------ */

/* The proxy's name goes in a comment: it must not end the line. */
static gchar *
comment_text (const char *name)
{
  gchar *s = g_strdup (name != NULL ? name : "(unnamed)");

  for (gchar *p = s; *p != '\0'; p++)
    if ((guchar) *p < 0x20 || *p == 0x7f)
      *p = '?';
  return s;
}

static gchar *
fork_script (const DatcProxyRequest *req)
{
  g_return_val_if_fail (req != NULL, NULL);

  /* The command line follows `exec` on one line of the script. */
  if (req->agent_command == NULL || *req->agent_command == '\0'
      || strpbrk (req->agent_command, "\n\r") != NULL || req->slots == 0)
    return NULL;

  g_autofree gchar *name = comment_text (req->name);
  GString *s = g_string_new ("#!/bin/sh\n");

  g_string_append_printf (s, "# datc proxy %s (scheduler fork)\n", name);
  g_string_append_printf (s, "export DATC_SLOTS=%u\n", req->slots);
  /* Computed when the script starts, which for fork is at submission. */
  if (req->walltime_s > 0)
    g_string_append_printf (s, "export DATC_WALLTIME_END=$(( $(date +%%s) + %u ))\n",
                            req->walltime_s);
  g_string_append_printf (s, "exec %s\n", req->agent_command);
  return g_string_free (s, FALSE);
}

static GStrv
fork_submit_argv (const DatcProxyRequest *req, const char *script_path)
{
  g_return_val_if_fail (req != NULL, NULL);
  g_return_val_if_fail (script_path != NULL, NULL);

  /* Absolute paths, so neither the cd nor sh can take them for options or
   * resolve them against the wrong directory. */
  if (req->workdir == NULL || req->workdir[0] != '/' || script_path[0] != '/')
    return NULL;

  g_autofree gchar *workdir = g_shell_quote (req->workdir);
  g_autofree gchar *script = g_shell_quote (script_path);
  g_autofree gchar *log_path = g_strconcat (script_path, ".log", NULL);
  g_autofree gchar *log = g_shell_quote (log_path);
  /* Without setsid the background job would die a moment later with only
   * its log saying why; say it now, on stderr, as a failed submit.  The
   * `&` ends the list on its own line, so $! is setsid's pid itself. */
  gchar *command = g_strdup_printf ("command -v setsid >/dev/null 2>&1 || "
                                    "{ echo 'setsid(1) not found on this host' >&2; exit 127; }\n"
                                    "cd %s || exit 1\n"
                                    "setsid /bin/sh %s >%s 2>&1 </dev/null &\n"
                                    "echo $!\n",
                                    workdir, script, log);

  GStrv argv = g_new0 (gchar *, 4);
  argv[0] = g_strdup ("/bin/sh");
  argv[1] = g_strdup ("-c");
  argv[2] = command;
  return argv;
}
static gboolean
fork_parse_submit (const DatcCommandResult *res, gchar **job_id, GError **error)
{
  g_return_val_if_fail (res != NULL, FALSE);
  g_return_val_if_fail (job_id != NULL, FALSE);

  if (res->exit_status != 0)
    {
      datc_site_set_command_error (error, "submit command", res);
      return FALSE;
    }

  g_autofree gchar *out = NULL;
  if (!datc_site_answer_text (res->out, "submit command's stdout", &out, error))
    return FALSE;
  g_strstrip (out);
  if (!fork_id_is_valid (out))
    {
      g_autofree gchar *quoted = datc_site_quote_output (res->out);
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE,
                   "expected a process id from the submit command, got: %s", quoted);
      return FALSE;
    }
  *job_id = g_steal_pointer (&out);
  return TRUE;
}

/* ---- poll ------------------------------------------------------------- */

static const char poll_script[] = "for p do\n"
                                  "  s=gone\n"
                                  "  if kill -s 0 \"$p\" 2>/dev/null; then\n"
                                  "    s=running\n"
                                  "    if { read -r l <\"/proc/$p/stat\"; } 2>/dev/null; then\n"
                                  "      l=${l##*) }\n"
                                  "      case $l in Z*|X*) s=gone ;; esac\n"
                                  "    fi\n"
                                  "  fi\n"
                                  "  echo \"$p $s\"\n"
                                  "done\n"
                                  "exit 0\n";

static const char cancel_script[]
    = "for p do\n"
      "  kill -s TERM -- \"-$p\" 2>/dev/null || kill -s TERM \"$p\" 2>/dev/null\n"
      "done\n"
      "exit 0\n";

/* argv: /bin/sh -c SCRIPT NAME ID... */
static GStrv
sh_with_ids (const char *script, const char *name, const char *const *ids)
{
  if (!fork_ids_are_valid (ids))
    return NULL;

  guint n = g_strv_length ((gchar **) ids);
  GStrv argv = g_new0 (gchar *, n + 5);
  argv[0] = g_strdup ("/bin/sh");
  argv[1] = g_strdup ("-c");
  argv[2] = g_strdup (script);
  argv[3] = g_strdup (name);
  for (guint i = 0; i < n; i++)
    argv[4 + i] = g_strdup (ids[i]);
  return argv;
}

static GStrv
fork_poll_argv (const char *const *ids)
{
  return sh_with_ids (poll_script, "datc-fork-poll", ids);
}

/* Splits a stripped line into exactly two words, in place. */
static gboolean
split_two_words (gchar *line, const char **first, const char **second)
{
  gchar *sep = strpbrk (line, " \t");

  if (sep == NULL)
    return FALSE;
  *sep = '\0';
  sep++;
  sep += strspn (sep, " \t");
  if (*sep == '\0' || strpbrk (sep, " \t") != NULL)
    return FALSE;
  *first = line;
  *second = sep;
  return TRUE;
}

/* One answer line: "PID running" or "PID gone"; `line` is stripped and
 * gets split in place. */
static gboolean
parse_poll_line (gchar *line, const char **id, DatcProxyState *state, GError **error)
{
  g_autoptr (GBytes) original = g_bytes_new (line, strlen (line));
  const char *word = NULL;

  *state = DATC_PROXY_UNKNOWN;
  if (split_two_words (line, id, &word) && fork_id_is_valid (*id))
    {
      if (strcmp (word, "running") == 0)
        *state = DATC_PROXY_RUNNING;
      else if (strcmp (word, "gone") == 0)
        *state = DATC_PROXY_FINISHED;
    }
  if (*state == DATC_PROXY_UNKNOWN)
    {
      g_autofree gchar *quoted = datc_site_quote_output (original);
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE,
                   "expected 'PID running' or 'PID gone', got: %s", quoted);
      return FALSE;
    }
  return TRUE;
}

static gboolean
fork_parse_poll (const DatcCommandResult *res, const char *const *ids, DatcProxyState *states,
                 GError **error)
{
  g_return_val_if_fail (res != NULL, FALSE);
  g_return_val_if_fail (ids != NULL, FALSE);

  if (res->exit_status != 0)
    {
      datc_site_set_command_error (error, "poll command", res);
      return FALSE;
    }

  g_autofree gchar *out = NULL;
  if (!datc_site_answer_text (res->out, "poll command's stdout", &out, error))
    return FALSE;

  /* Keys point into `lines`, which outlives the table. */
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  g_autoptr (GHashTable) answers = g_hash_table_new (g_str_hash, g_str_equal);

  for (guint i = 0; lines[i] != NULL; i++)
    {
      const char *id = NULL;
      DatcProxyState state;

      g_strstrip (lines[i]);
      if (lines[i][0] == '\0')
        continue;
      if (!parse_poll_line (lines[i], &id, &state, error))
        return FALSE;
      g_hash_table_replace (answers, (gpointer) id, GINT_TO_POINTER (state + 1));
    }

  /* An id the answer leaves out was never asked about: we cannot tell. */
  for (gsize i = 0; ids[i] != NULL; i++)
    {
      gpointer found = g_hash_table_lookup (answers, ids[i]);
      states[i]
          = found != NULL ? (DatcProxyState) (GPOINTER_TO_INT (found) - 1) : DATC_PROXY_UNKNOWN;
    }
  return TRUE;
}

/* ---- cancel ----------------------------------------------------------- */

static GStrv
fork_cancel_argv (const char *const *ids)
{
  return sh_with_ids (cancel_script, "datc-fork-cancel", ids);
}

/* The submit command sends the proxy's output to SCRIPT.log. */
static GStrv
fork_proxy_logs (const char *job_name, const char *job_id, const char *script_name)
{
  (void) job_name;
  if (!fork_id_is_valid (job_id))
    return NULL;
  GStrv logs = g_new0 (gchar *, 2);
  logs[0] = g_strconcat (script_name, ".log", NULL);
  return logs;
}

const DatcSchedulerClass datc_scheduler_fork = {
  .name = "fork",
  .script = fork_script,
  .submit_argv = fork_submit_argv,
  .parse_submit = fork_parse_submit,
  .poll_argv = fork_poll_argv,
  .parse_poll = fork_parse_poll,
  .cancel_argv = fork_cancel_argv,
  .no_queues = "fork has no queues: `queue` is ignored",
  .no_exclude = "fork runs proxies on the site's one host: it cannot exclude it",
  .proxy_logs = fork_proxy_logs,
};
