/* site.c: a site is one open transport and one scheduler table.
 *
 * The wrappers here are the only code that calls a driver: they check
 * what the core hands over, build the command through the scheduler, run
 * it through the transport and hand the answer back to the scheduler's
 * parser.  Errors leave here prefixed "site NAME: " so a user with several
 * sites knows which one failed.
 *
 * Argument builders (script, submit_argv, poll_argv, cancel_argv) have no
 * GError in the contract, so a builder that cannot put a request or an id
 * into a command safely returns NULL; the wrappers turn that into
 * DATC_SITE_ERROR_CONFIG and, for ids, name the first one refused. */

#include "drivers-private.h"

#include <string.h>

G_DEFINE_QUARK (datc-site-error-quark, datc_site_error)

struct DatcSite {
  gchar *name;
  DatcTransport *transport;
  const DatcSchedulerClass *scheduler;
  guint timeout_ms;  /* per command */
  gboolean no_retry; /* poll and cancel are not run again after a transport error */
};

void
datc_command_result_clear (DatcCommandResult *res)
{
  if (res == NULL)
    return;
  g_clear_pointer (&res->out, g_bytes_unref);
  g_clear_pointer (&res->err, g_bytes_unref);
  res->exit_status = 0;
}

const char *
datc_proxy_state_name (DatcProxyState state)
{
  switch (state)
    {
    case DATC_PROXY_PENDING:
      return "pending";
    case DATC_PROXY_RUNNING:
      return "running";
    case DATC_PROXY_FINISHED:
      return "finished";
    case DATC_PROXY_FAILED:
      return "failed";
    case DATC_PROXY_UNKNOWN:
      return "unknown";
    }
  return "invalid";
}

/* ---- helpers shared by drivers -------------------------------------- */

static gboolean
arg_needs_quotes (const char *arg)
{
  if (*arg == '\0')
    return TRUE;
  for (const char *p = arg; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && strchr ("_-./=:,+@%", *p) == NULL)
      return TRUE;
  return FALSE;
}

/* Cuts `s` to DATC_SITE_QUOTE_MAX bytes without splitting an escape
 * sequence's meaning much: it is for humans, so "..." marks the cut. */
static gchar *
shorten (GString *s)
{
  if (s->len > DATC_SITE_QUOTE_MAX)
    {
      g_string_truncate (s, DATC_SITE_QUOTE_MAX);
      g_string_append (s, "...");
    }
  return g_string_free (s, FALSE);
}

gchar *
datc_site_describe_argv (const char *const *argv)
{
  GString *s = g_string_new (NULL);

  for (gsize i = 0; argv != NULL && argv[i] != NULL; i++)
    {
      g_autofree gchar *escaped = g_strescape (argv[i], NULL);

      if (i > 0)
        g_string_append_c (s, ' ');
      if (arg_needs_quotes (argv[i]))
        g_string_append_printf (s, "'%s'", escaped);
      else
        g_string_append (s, escaped);
      if (s->len > DATC_SITE_QUOTE_MAX)
        break;
    }
  return shorten (s);
}

gchar *
datc_site_quote_output (GBytes *bytes)
{
  gsize len = 0;
  const char *data = bytes != NULL ? g_bytes_get_data (bytes, &len) : NULL;
  GString *s = g_string_new (NULL);

  /* Trim, then escape only what is needed to keep the message one line. */
  while (len > 0 && g_ascii_isspace (data[0]))
    data++, len--;
  while (len > 0 && g_ascii_isspace (data[len - 1]))
    len--;
  for (gsize i = 0; i < len && s->len <= DATC_SITE_QUOTE_MAX; i++)
    {
      guchar c = (guchar) data[i];

      if (c == '\n')
        g_string_append (s, "\\n");
      else if (c == '\\')
        g_string_append (s, "\\\\");
      else if (c < 0x20 || c == 0x7f)
        g_string_append_printf (s, "\\x%02x", c);
      else
        g_string_append_c (s, (char) c);
    }
  if (s->len == 0)
    g_string_append (s, "(nothing)");
  return shorten (s);
}

gboolean
datc_site_answer_text (GBytes *bytes, const char *what, gchar **text, GError **error)
{
  gsize len = 0;
  const char *data = bytes != NULL ? g_bytes_get_data (bytes, &len) : NULL;

  g_return_val_if_fail (text != NULL, FALSE);

  if (len > DATC_SITE_ANSWER_MAX)
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE,
                   "%s is %" G_GSIZE_FORMAT " bytes, more than the %u a scheduler "
                   "answer may be",
                   what, len, DATC_SITE_ANSWER_MAX);
      return FALSE;
    }
  if (len > 0 && memchr (data, '\0', len) != NULL)
    {
      g_autofree gchar *quoted = datc_site_quote_output (bytes);
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE, "%s holds a NUL byte: %s", what,
                   quoted);
      return FALSE;
    }
  *text = g_strndup (data != NULL ? data : "", len);
  return TRUE;
}

/* A command's stderr is the scheduler or the system talking to the user
 * ("sbatch: error: ..." on two lines): its lines stay lines, each after a
 * line break and an indent, so a log or a terminal shows them as the
 * scheduler wrote them, never as a literal "\n".  Each line is escaped and
 * shortened like datc_site_quote_output; at most QUOTE_LINES_MAX lines. */
#define QUOTE_LINES_MAX 8u

static gchar *
quote_lines (GBytes *bytes)
{
  gsize len = 0;
  const char *data = bytes != NULL ? g_bytes_get_data (bytes, &len) : NULL;
  /* Up to a NUL byte, if any (as a message, not as data to parse). */
  g_autofree gchar *text = g_strndup (data != NULL ? data : "", len);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  GString *s = g_string_new (NULL);
  guint shown = 0, more = 0;

  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_strstrip (lines[i]);
      if (lines[i][0] == '\0')
        continue;
      if (shown == QUOTE_LINES_MAX)
        {
          more++;
          continue;
        }
      g_autoptr (GBytes) line = g_bytes_new_static (lines[i], strlen (lines[i]));
      g_autofree gchar *quoted = datc_site_quote_output (line);
      if (shown++ > 0)
        g_string_append (s, "\n  ");
      g_string_append (s, quoted);
    }
  if (more > 0)
    g_string_append_printf (s, "\n  (%u more lines)", more);
  if (s->len == 0)
    g_string_append (s, "(nothing)");
  return g_string_free (s, FALSE);
}

void
datc_site_set_command_error (GError **error, const char *what, const DatcCommandResult *res)
{
  g_autofree gchar *quoted = quote_lines (res->err);

  g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_COMMAND, "%s exited with status %d: %s",
               what, res->exit_status, quoted);
}

/* ---- DatcSite -------------------------------------------------------- */

DatcSite *
datc_site_new (const char *name, const char *transport, const char *scheduler, GKeyFile *config,
               const char *group, GError **error)
{
  g_return_val_if_fail (name != NULL, NULL);
  g_return_val_if_fail (transport != NULL, NULL);
  g_return_val_if_fail (scheduler != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  const DatcTransportClass *tclass = datc_transport_lookup (transport);
  const DatcSchedulerClass *sclass = datc_scheduler_lookup (scheduler);

  if (*name == '\0')
    {
      g_set_error_literal (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG, "a site needs a name");
      return NULL;
    }
  if (tclass == NULL)
    {
      g_autofree gchar *known = datc_transport_known_names ();
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "site %s: unknown transport '%s' (known: %s)", name, transport, known);
      return NULL;
    }
  if (sclass == NULL)
    {
      g_autofree gchar *known = datc_scheduler_known_names ();
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "site %s: unknown scheduler '%s' (known: %s)", name, scheduler, known);
      return NULL;
    }

  DatcTransport *t = tclass->open (config, group, error);
  if (t == NULL)
    {
      g_prefix_error (error, "site %s: ", name);
      return NULL;
    }

  DatcSite *site = g_new0 (DatcSite, 1);
  site->name = g_strdup (name);
  site->transport = t;
  site->scheduler = sclass;
  site->timeout_ms = DATC_SITE_COMMAND_TIMEOUT_MS;
  return site;
}

void
datc_site_free (DatcSite *site)
{
  if (site == NULL)
    return;
  if (site->transport != NULL)
    site->transport->klass->close (site->transport);
  g_free (site->name);
  g_free (site);
}

const char *
datc_site_name (DatcSite *site)
{
  g_return_val_if_fail (site != NULL, NULL);
  return site->name;
}

static gboolean
site_run (DatcSite *site, const char *const *argv, DatcCommandResult *res, GError **error)
{
  return site->transport->klass->run (site->transport, argv, NULL, site->timeout_ms, res, error);
}

/* Poll and cancel mean the same however often they run, so one that never
 * reached the site (DATC_SITE_ERROR_TRANSPORT: the ssh connection dropped,
 * say; the transport reconnects on its next run) runs once more.  Submit
 * is never retried here: a submit whose answer was lost may have gone
 * through, and finding out means asking the scheduler for the job by its
 * name, which is the scheduler's lookup, not a transport retry. */
static gboolean
site_run_idempotent (DatcSite *site, const char *const *argv, DatcCommandResult *res,
                     GError **error)
{
  g_autoptr (GError) first = NULL;

  if (site_run (site, argv, res, &first))
    return TRUE;
  if (site->no_retry || !g_error_matches (first, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT))
    {
      g_propagate_error (error, g_steal_pointer (&first));
      return FALSE;
    }
  datc_command_result_clear (res);
  if (site_run (site, argv, res, error))
    return TRUE;
  g_prefix_error (error, "%s; retried once: ", first->message);
  return FALSE;
}

/* The builder refused the list: find the id it refuses on its own. */
static void
set_refused_ids_error (DatcSite *site, GStrv (*build) (const char *const *ids),
                       const char *const *ids, GError **error)
{
  for (gsize i = 0; ids[i] != NULL; i++)
    {
      const char *one[] = { ids[i], NULL };
      g_auto (GStrv) argv = build (one);

      if (argv == NULL)
        {
          g_autofree gchar *escaped = g_strescape (ids[i], NULL);
          g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                       "site %s: '%s' is not a %s job id", site->name, escaped,
                       site->scheduler->name);
          return;
        }
    }
  g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
               "site %s: scheduler %s refused the job id list", site->name, site->scheduler->name);
}

static gboolean
name_is_plain_file_name (const char *name)
{
  return *name != '\0' && strchr (name, '/') == NULL && strcmp (name, ".") != 0
         && strcmp (name, "..") != 0;
}

/* What every submit checks and does first: the workdir and script name,
 * then the script written under the workdir.  *script_path is where it
 * went (transfer full). */
static gboolean
put_script (DatcSite *site, const DatcProxyRequest *req, const char *script_name,
            gchar *(*write_script) (const DatcProxyRequest *req), gchar **script_path,
            GError **error)
{
  const DatcSchedulerClass *sched = site->scheduler;

  /* The scheduler's command may cd before it names the script, so only an
   * absolute workdir means the same directory to both. */
  if (req->workdir == NULL || !g_path_is_absolute (req->workdir))
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "site %s: workdir '%s' is not an absolute path", site->name,
                   req->workdir != NULL ? req->workdir : "(none)");
      return FALSE;
    }
  if (!name_is_plain_file_name (script_name))
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "site %s: script name '%s' is not a plain file name", site->name, script_name);
      return FALSE;
    }

  g_autofree gchar *script = write_script (req);
  if (script == NULL)
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "site %s: scheduler %s cannot write a script for proxy %s", site->name,
                   sched->name, req->name != NULL ? req->name : "(unnamed)");
      return FALSE;
    }

  g_autofree gchar *path = g_build_filename (req->workdir, script_name, NULL);
  gsize script_len = strlen (script);
  g_autoptr (GBytes) data = g_bytes_new_take (g_steal_pointer (&script), script_len);
  if (!site->transport->klass->put (site->transport, data, path, 0700, error))
    {
      g_prefix_error (error, "site %s: ", site->name);
      return FALSE;
    }
  *script_path = g_steal_pointer (&path);
  return TRUE;
}

gchar *
datc_site_proxy_log (DatcSite *site, const DatcProxyRequest *req, const char *script_name,
                     const char *job_id)
{
  g_return_val_if_fail (site != NULL && req != NULL && script_name != NULL, NULL);

  if (job_id == NULL || req->name == NULL || req->workdir == NULL
      || !g_path_is_absolute (req->workdir) || !name_is_plain_file_name (script_name))
    return NULL;
  /* One naming of a proxy's files: the scheduler's proxy_logs, the
   * agent's stderr last. */
  g_auto (GStrv) logs = datc_site_proxy_logs (site, req->name, job_id, script_name);
  guint n = logs != NULL ? g_strv_length (logs) : 0;
  return n > 0 ? g_build_filename (req->workdir, logs[n - 1], NULL) : NULL;
}

/* A submit that failed this way may have reached the scheduler before the
 * connection broke or the clock ran out. */
static gboolean
failed_in_transit (const GError *error)
{
  return g_error_matches (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT)
         || g_error_matches (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TIMEOUT);
}

gboolean
datc_site_submit (DatcSite *site, const DatcProxyRequest *req, const char *script_name,
                  gchar **job_id, GError **error)
{
  g_return_val_if_fail (site != NULL, FALSE);
  g_return_val_if_fail (req != NULL, FALSE);
  g_return_val_if_fail (script_name != NULL, FALSE);
  g_return_val_if_fail (job_id != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  const DatcSchedulerClass *sched = site->scheduler;
  g_autofree gchar *script_path = NULL;

  if (!put_script (site, req, script_name, sched->script, &script_path, error))
    return FALSE;

  g_auto (GStrv) argv = sched->submit_argv (req, script_path);
  if (argv == NULL)
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "site %s: scheduler %s cannot submit %s", site->name, sched->name, script_path);
      return FALSE;
    }

  g_auto (DatcCommandResult) res = { 0 };
  g_autofree gchar *id = NULL;
  g_autoptr (GError) run_error = NULL;
  if (!site_run (site, (const char *const *) argv, &res, &run_error))
    {
      /* The submit may have reached the scheduler before the connection
       * broke or the clock ran out: never submit twice on a guess.  Look
       * the job up by its name (unique per campaign and proxy). */
      g_autoptr (GError) lookup_error = NULL;
      if (failed_in_transit (run_error) && req->name != NULL && sched->lookup_argv != NULL
          && datc_site_lookup (site, req->name, &id, &lookup_error) && id != NULL)
        {
          g_message ("site %s: submitting %s failed in transit (%s), but job %s went through",
                     site->name, script_path, run_error->message, id);
          *job_id = g_steal_pointer (&id);
          return TRUE;
        }
      g_propagate_prefixed_error (error, g_steal_pointer (&run_error),
                                  "site %s: submitting %s: ", site->name, script_path);
      return FALSE;
    }
  if (!sched->parse_submit (&res, &id, error))
    {
      g_prefix_error (error, "site %s: submitting %s: ", site->name, script_path);
      return FALSE;
    }
  *job_id = g_steal_pointer (&id);
  return TRUE;
}

gboolean
datc_site_scheduler_can_lookup (DatcSite *site)
{
  g_return_val_if_fail (site != NULL, FALSE);
  return site->scheduler->lookup_argv != NULL && site->scheduler->parse_lookup != NULL;
}

gboolean
datc_site_lookup (DatcSite *site, const char *job_name, gchar **job_id, GError **error)
{
  g_return_val_if_fail (site != NULL && job_name != NULL && job_id != NULL, FALSE);
  const DatcSchedulerClass *sched = site->scheduler;
  *job_id = NULL;
  if (sched->lookup_argv == NULL || sched->parse_lookup == NULL)
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "site %s: scheduler %s cannot find a job by its name", site->name, sched->name);
      return FALSE;
    }
  g_auto (GStrv) argv = sched->lookup_argv (job_name);
  if (argv == NULL)
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "site %s: '%s' is not a job name %s accepts", site->name, job_name, sched->name);
      return FALSE;
    }
  g_auto (DatcCommandResult) res = { 0 };
  if (!site_run (site, (const char *const *) argv, &res, error)
      || !sched->parse_lookup (&res, job_id, error))
    {
      g_prefix_error (error, "site %s: looking up %s: ", site->name, job_name);
      return FALSE;
    }
  return TRUE;
}

/* ---- proxies as job arrays ------------------------------------------- */

gboolean
datc_site_scheduler_has_arrays (DatcSite *site)
{
  g_return_val_if_fail (site != NULL, FALSE);
  return site->scheduler->arrays != NULL;
}

static gboolean
check_arrays (DatcSite *site, guint k, GError **error)
{
  if (site->scheduler->arrays == NULL)
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "site %s: scheduler %s has no job arrays", site->name, site->scheduler->name);
      return FALSE;
    }
  if (k < DATC_ARRAY_MIN || k > DATC_ARRAY_MAX)
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "site %s: an array of %u proxies (arrays have %u to %u)", site->name, k,
                   DATC_ARRAY_MIN, DATC_ARRAY_MAX);
      return FALSE;
    }
  return TRUE;
}

/* The ids of elements 1..k of the array `base_id` (transfer full). */
static gboolean
element_ids_new (DatcSite *site, const char *base_id, guint k, GStrv *element_ids, GError **error)
{
  GStrv ids = g_new0 (gchar *, k + 1);

  for (guint i = 0; i < k; i++)
    {
      ids[i] = site->scheduler->arrays->element_id (base_id, i + 1);
      if (ids[i] == NULL)
        {
          g_autofree gchar *escaped = g_strescape (base_id, NULL);
          g_strfreev (ids);
          g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE,
                       "site %s: '%s' is not a %s array id", site->name, escaped,
                       site->scheduler->name);
          return FALSE;
        }
    }
  *element_ids = ids;
  return TRUE;
}

gboolean
datc_site_lookup_array (DatcSite *site, const char *job_name, guint k, GStrv *element_ids,
                        GError **error)
{
  g_return_val_if_fail (site != NULL && job_name != NULL && element_ids != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  *element_ids = NULL;
  if (!check_arrays (site, k, error))
    return FALSE;

  const DatcSchedulerArrays *arrays = site->scheduler->arrays;
  g_auto (GStrv) argv = arrays->lookup_argv (job_name);
  if (argv == NULL)
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "site %s: '%s' is not a job name %s accepts", site->name, job_name,
                   site->scheduler->name);
      return FALSE;
    }
  g_auto (DatcCommandResult) res = { 0 };
  g_autofree gchar *base_id = NULL;
  if (!site_run (site, (const char *const *) argv, &res, error)
      || !arrays->parse_lookup (&res, &base_id, error))
    {
      g_prefix_error (error, "site %s: looking up array %s: ", site->name, job_name);
      return FALSE;
    }
  return base_id == NULL || element_ids_new (site, base_id, k, element_ids, error);
}

gboolean
datc_site_submit_array (DatcSite *site, const DatcProxyRequest *req, guint k,
                        const char *script_name, GStrv *element_ids, GError **error)
{
  g_return_val_if_fail (site != NULL && req != NULL && script_name != NULL, FALSE);
  g_return_val_if_fail (element_ids != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  *element_ids = NULL;
  if (!check_arrays (site, k, error))
    return FALSE;

  const DatcSchedulerArrays *arrays = site->scheduler->arrays;
  g_autofree gchar *script_path = NULL;
  if (!put_script (site, req, script_name, arrays->script, &script_path, error))
    return FALSE;

  g_auto (GStrv) argv = arrays->submit_argv (req, k, script_path);
  if (argv == NULL)
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "site %s: scheduler %s cannot submit %s as an array of %u", site->name,
                   site->scheduler->name, script_path, k);
      return FALSE;
    }

  g_auto (DatcCommandResult) res = { 0 };
  g_autofree gchar *base_id = NULL;
  g_autoptr (GError) run_error = NULL;
  if (!site_run (site, (const char *const *) argv, &res, &run_error))
    {
      /* As datc_site_submit: never submit twice on a guess. */
      g_autoptr (GError) lookup_error = NULL;
      g_auto (GStrv) found = NULL;
      if (failed_in_transit (run_error) && req->name != NULL
          && datc_site_lookup_array (site, req->name, k, &found, &lookup_error) && found != NULL)
        {
          g_message ("site %s: submitting %s failed in transit (%s), but array %s went through",
                     site->name, script_path, run_error->message, found[0]);
          *element_ids = g_steal_pointer (&found);
          return TRUE;
        }
      g_propagate_prefixed_error (error, g_steal_pointer (&run_error),
                                  "site %s: submitting %s: ", site->name, script_path);
      return FALSE;
    }
  if (!arrays->parse_submit (&res, k, &base_id, error))
    {
      g_prefix_error (error, "site %s: submitting %s: ", site->name, script_path);
      return FALSE;
    }
  return element_ids_new (site, base_id, k, element_ids, error);
}

gboolean
datc_site_query_queue (DatcSite *site, const char *queue, gboolean *exists, gchar **answer,
                       GError **error)
{
  g_return_val_if_fail (site != NULL && queue != NULL && exists != NULL && answer != NULL, FALSE);
  const DatcSchedulerClass *sched = site->scheduler;
  *exists = FALSE;
  *answer = NULL;
  if (sched->queue_argv == NULL || sched->parse_queue == NULL)
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "site %s: scheduler %s has no queue to ask about (%s)", site->name, sched->name,
                   sched->no_queues != NULL ? sched->no_queues : "no queues");
      return FALSE;
    }
  g_auto (GStrv) argv = sched->queue_argv (queue);
  if (argv == NULL)
    {
      g_autofree gchar *escaped = g_strescape (queue, NULL);
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "site %s: '%s' is not a queue name %s accepts", site->name, escaped,
                   sched->name);
      return FALSE;
    }
  /* Asking is idempotent, like poll. */
  g_auto (DatcCommandResult) res = { 0 };
  if (!site_run_idempotent (site, (const char *const *) argv, &res, error)
      || !sched->parse_queue (&res, queue, exists, answer, error))
    {
      g_prefix_error (error, "site %s: asking about queue %s: ", site->name, queue);
      return FALSE;
    }
  return TRUE;
}

void
datc_site_set_command_timeout (DatcSite *site, guint timeout_ms)
{
  g_return_if_fail (site != NULL && timeout_ms > 0);
  site->timeout_ms = timeout_ms;
}

void
datc_site_set_retry (DatcSite *site, gboolean retry)
{
  g_return_if_fail (site != NULL);
  site->no_retry = !retry;
}

gboolean
datc_site_poll (DatcSite *site, const char *const *ids, DatcProxyState *states, GError **error)
{
  return datc_site_poll_reasons (site, ids, states, NULL, error);
}

gboolean
datc_site_poll_reasons (DatcSite *site, const char *const *ids, DatcProxyState *states,
                        gchar **reasons, GError **error)
{
  g_return_val_if_fail (site != NULL, FALSE);
  g_return_val_if_fail (ids != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (ids[0] == NULL)
    return TRUE;
  g_return_val_if_fail (states != NULL, FALSE);
  for (gsize i = 0; reasons != NULL && ids[i] != NULL; i++)
    reasons[i] = NULL;

  g_auto (GStrv) argv = site->scheduler->poll_argv (ids);
  if (argv == NULL)
    {
      set_refused_ids_error (site, site->scheduler->poll_argv, ids, error);
      return FALSE;
    }

  g_auto (DatcCommandResult) res = { 0 };
  /* Same command either way: the reasons come with the states or not at
   * all. */
  gboolean with_reasons = reasons != NULL && site->scheduler->parse_poll_reasons != NULL;
  if (!site_run_idempotent (site, (const char *const *) argv, &res, error)
      || !(with_reasons ? site->scheduler->parse_poll_reasons (&res, ids, states, reasons, error)
                        : site->scheduler->parse_poll (&res, ids, states, error)))
    {
      g_prefix_error (error, "site %s: poll: ", site->name);
      return FALSE;
    }
  return TRUE;
}

gboolean
datc_site_cancel (DatcSite *site, const char *const *ids, GError **error)
{
  g_return_val_if_fail (site != NULL, FALSE);
  g_return_val_if_fail (ids != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (ids[0] == NULL)
    return TRUE;

  g_auto (GStrv) argv = site->scheduler->cancel_argv (ids);
  if (argv == NULL)
    {
      set_refused_ids_error (site, site->scheduler->cancel_argv, ids, error);
      return FALSE;
    }

  g_auto (DatcCommandResult) res = { 0 };
  if (!site_run_idempotent (site, (const char *const *) argv, &res, error))
    {
      g_prefix_error (error, "site %s: cancel: ", site->name);
      return FALSE;
    }
  if (res.exit_status != 0)
    {
      datc_site_set_command_error (error, "cancel command", &res);
      g_prefix_error (error, "site %s: ", site->name);
      return FALSE;
    }
  return TRUE;
}

/* ---- plain access for the site manager and `datc sites check` ------- */

gboolean
datc_site_put (DatcSite *site, GBytes *data, const char *path, int mode, GError **error)
{
  g_return_val_if_fail (site != NULL && data != NULL && path != NULL, FALSE);
  if (!site->transport->klass->put (site->transport, data, path, mode, error))
    {
      g_prefix_error (error, "site %s: ", site->name);
      return FALSE;
    }
  return TRUE;
}

gboolean
datc_site_run (DatcSite *site, const char *const *argv, DatcCommandResult *res, GError **error)
{
  g_return_val_if_fail (site != NULL && argv != NULL && res != NULL, FALSE);
  if (!site_run (site, argv, res, error))
    {
      g_prefix_error (error, "site %s: ", site->name);
      return FALSE;
    }
  return TRUE;
}

/* ---- streams ------------------------------------------------------------ */

DatcSiteStream *
datc_site_open_stream (DatcSite *site, const char *const *argv, GError **error)
{
  g_return_val_if_fail (site != NULL && argv != NULL && argv[0] != NULL, NULL);
  if (site->transport->klass->stream == NULL)
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "site %s: transport %s cannot carry a stream", site->name,
                   site->transport->klass->name);
      return NULL;
    }
  DatcSiteStream *s
      = site->transport->klass->stream (site->transport, argv, site->timeout_ms, error);
  if (s == NULL)
    g_prefix_error (error, "site %s: ", site->name);
  return s;
}

int
datc_site_stream_fd (DatcSiteStream *s)
{
  return s->klass->fd (s);
}

gssize
datc_site_stream_read (DatcSiteStream *s, guint8 *buf, gsize len, GError **error)
{
  return s->klass->read (s, buf, len, error);
}

gboolean
datc_site_stream_write (DatcSiteStream *s, const guint8 *buf, gsize len, guint timeout_ms,
                        GError **error)
{
  return s->klass->write (s, buf, len, timeout_ms, error);
}

gchar *
datc_site_stream_take_stderr (DatcSiteStream *s)
{
  return s->klass->take_stderr (s);
}

void
datc_site_stream_close (DatcSiteStream *s, guint timeout_ms)
{
  if (s != NULL)
    s->klass->close (s, timeout_ms);
}

/* ---- the files proxies leave in the workdir ---------------------------- */

GStrv
datc_site_proxy_logs (DatcSite *site, const char *job_name, const char *job_id,
                      const char *script_name)
{
  g_return_val_if_fail (site != NULL && job_name != NULL && job_id != NULL, NULL);
  g_return_val_if_fail (script_name != NULL, NULL);

  if (site->scheduler->proxy_logs == NULL)
    return NULL;
  g_auto (GStrv) logs = site->scheduler->proxy_logs (job_name, job_id, script_name);
  for (gsize i = 0; logs != NULL && logs[i] != NULL; i++)
    if (!name_is_plain_file_name (logs[i]))
      return NULL;
  return g_steal_pointer (&logs);
}

/* What one command line may carry: over ssh the whole command is one
 * argument of the login shell, and Linux caps one argument at 128 KiB. */
#define REMOVE_ARGV_BYTES_MAX (64u * 1024u)

gboolean
datc_site_remove_files (DatcSite *site, const char *workdir, const char *const *names,
                        GError **error)
{
  g_return_val_if_fail (site != NULL && workdir != NULL && names != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  /* rm runs in workdir and is given plain names only: whatever a name
   * says, it cannot reach outside. */
  if (!g_path_is_absolute (workdir))
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "site %s: workdir '%s' is not an absolute path", site->name, workdir);
      return FALSE;
    }
  for (gsize i = 0; names[i] != NULL; i++)
    if (!name_is_plain_file_name (names[i]))
      {
        g_autofree gchar *escaped = g_strescape (names[i], NULL);
        g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                     "site %s: '%s' is not a plain file name: nothing removed", site->name,
                     escaped);
        return FALSE;
      }

  gsize next = 0;
  while (names[next] != NULL)
    {
      g_autoptr (GPtrArray) argv = g_ptr_array_new ();
      gsize bytes = strlen (workdir);
      g_ptr_array_add (argv, (gpointer) "/bin/sh");
      g_ptr_array_add (argv, (gpointer) "-c");
      g_ptr_array_add (argv, (gpointer) "cd \"$1\" || exit 1\nshift\nexec rm -f -- \"$@\"\n");
      g_ptr_array_add (argv, (gpointer) "datc-remove-files");
      g_ptr_array_add (argv, (gpointer) workdir);
      do
        {
          bytes += strlen (names[next]) + 3;
          g_ptr_array_add (argv, (gpointer) names[next++]);
        }
      while (names[next] != NULL && bytes + strlen (names[next]) + 3 < REMOVE_ARGV_BYTES_MAX);
      g_ptr_array_add (argv, NULL);

      g_auto (DatcCommandResult) res = { 0 };
      if (!site_run (site, (const char *const *) argv->pdata, &res, error))
        {
          g_prefix_error (error, "site %s: removing files from %s: ", site->name, workdir);
          return FALSE;
        }
      if (res.exit_status != 0)
        {
          datc_site_set_command_error (error, "rm", &res);
          g_prefix_error (error, "site %s: removing files from %s: ", site->name, workdir);
          return FALSE;
        }
    }
  return TRUE;
}

const char *
datc_site_scheduler_name (DatcSite *site)
{
  return site->scheduler->name;
}

const char *
datc_site_transport_name (DatcSite *site)
{
  return site->transport->klass->name;
}
