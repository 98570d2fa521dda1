/* recorded.h: the scheduler tests' reader of recorded answers, and the
 * checks every batch scheduler's test runs on each of them.  Included by
 * one test program each (the functions are static and all used there).
 *
 * A recorded answer is one file under DATA_DIR/<scheduler>/ (meson sets
 * DATA_DIR to site-drivers/tests/data):
 *
 *   # source: where it comes from (a test bed, or a documentation page)
 *   # command: the command that was run
 *   # exit: its exit status
 *   # kind: submit | poll | cancel | lookup | queue | submit-array | lookup-array
 *   # ids: ID...                      (poll, cancel)
 *   # name: JOB-NAME                  (lookup)
 *   # queue: QUEUE                    (queue)
 *   # expect: ...                     (see below)
 *   # reasons: R1 | R2 | -            (poll, optional: per id, why it is
 *                                      pending, "-" for none; checked
 *                                      through parse_poll_reasons)
 *   # message: text the error must contain   (optional)
 *   # no-final-newline: stdout|stderr  (optional)
 *   # note: ... (optional, for people)
 *   --- stdout
 *   <bytes>
 *   --- stderr
 *   <bytes>
 *
 * expect: submit: the job id, or "error command" / "error parse"; poll:
 * one state name per id (pending, running, finished, failed, unknown), or
 * an error; lookup: the job id, "none", or an error; cancel: "ok" or
 * "error"; queue: "exists", "missing" (the scheduler says there is no
 * such queue), or an error.  For a queue the message (if any) is what the
 * answer must contain when there is no error.  submit-array: the ids of
 * the array's elements 1..k (k is how many there are), or an error;
 * lookup-array (with name): the array's base id, "none", or an error.
 *
 * Each file is checked twice: its parser alone (parse_submit, parse_poll,
 * parse_lookup, parse_queue), and, where the test names the command, end to end through
 * a local DatcSite whose PATH starts with a stub of that command replaying
 * the recording (this is how the cancel wrappers' shell filters are
 * tested).  Parse errors must name the scheduler. */
#pragma once

#include "drivers-private.h"

#include <glib/gstdio.h>

#include <string.h>
#include <unistd.h>

typedef struct {
  gchar *file;
  gchar *source, *command, *kind, *name, *queue, *message;
  gint exit_status;
  GStrv ids;
  GStrv expect;
  GStrv reasons;
  GBytes *out, *err;
} Recorded;

/* Commands the stubs stand in for, per kind; NULL: no end-to-end check. */
typedef struct {
  const char *submit;
  const char *poll;
  const char *cancel;
  const char *queue;
} RecordedCommands;

typedef struct {
  const DatcSchedulerClass *klass;
  RecordedCommands commands;
  gchar *path;
} RecordedCase;

static void
recorded_free (Recorded *r)
{
  if (r == NULL)
    return;
  g_free (r->file);
  g_free (r->source);
  g_free (r->command);
  g_free (r->kind);
  g_free (r->name);
  g_free (r->queue);
  g_free (r->message);
  g_strfreev (r->ids);
  g_strfreev (r->expect);
  g_strfreev (r->reasons);
  g_clear_pointer (&r->out, g_bytes_unref);
  g_clear_pointer (&r->err, g_bytes_unref);
  g_free (r);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Recorded, recorded_free)

static GBytes *
section_bytes (const char *start, const char *end, gboolean strip_final_newline)
{
  gsize len = (gsize) (end - start);

  if (strip_final_newline && len > 0 && start[len - 1] == '\n')
    len--;
  return g_bytes_new (start, len);
}

static Recorded *
recorded_load (const char *path)
{
  g_autofree gchar *text = NULL;
  gsize len = 0;
  g_autoptr (GError) error = NULL;

  g_assert_true (g_file_get_contents (path, &text, &len, &error));
  g_assert_no_error (error);

  g_autoptr (Recorded) r = g_new0 (Recorded, 1);
  r->file = g_path_get_basename (path);
  r->exit_status = -1;

  const char *out_mark = strstr (text, "--- stdout\n");
  g_assert_nonnull (out_mark);
  const char *out_start = out_mark + strlen ("--- stdout\n");
  const char *err_mark = out_start;
  /* The stderr marker starts a line: right after the stdout marker when
   * stdout is empty, else after a newline. */
  if (!g_str_has_prefix (err_mark, "--- stderr\n"))
    {
      err_mark = strstr (out_start, "\n--- stderr\n");
      g_assert_nonnull (err_mark);
      err_mark++;
    }
  const char *err_start = err_mark + strlen ("--- stderr\n");
  gboolean out_nofinal = FALSE, err_nofinal = FALSE;

  g_autofree gchar *header = g_strndup (text, (gsize) (out_mark - text));
  g_auto (GStrv) lines = g_strsplit (header, "\n", -1);
  for (gsize i = 0; lines[i] != NULL; i++)
    {
      const char *line = lines[i];
      const char *colon = strchr (line, ':');

      if (line[0] == '\0')
        continue;
      g_assert_true (g_str_has_prefix (line, "# ") && colon != NULL);
      g_autofree gchar *key = g_strndup (line + 2, (gsize) (colon - line - 2));
      const char *value = colon + 1;
      while (*value == ' ')
        value++;

      if (strcmp (key, "source") == 0)
        r->source = g_strdup (value);
      else if (strcmp (key, "command") == 0)
        r->command = g_strdup (value);
      else if (strcmp (key, "exit") == 0)
        r->exit_status = (gint) g_ascii_strtoll (value, NULL, 10);
      else if (strcmp (key, "kind") == 0)
        r->kind = g_strdup (value);
      else if (strcmp (key, "ids") == 0)
        r->ids = g_strsplit (value, " ", -1);
      else if (strcmp (key, "name") == 0)
        r->name = g_strdup (value);
      else if (strcmp (key, "queue") == 0)
        r->queue = g_strdup (value);
      else if (strcmp (key, "expect") == 0)
        r->expect = g_strsplit (value, " ", -1);
      else if (strcmp (key, "reasons") == 0)
        r->reasons = g_strsplit (value, " | ", -1);
      else if (strcmp (key, "message") == 0)
        r->message = g_strdup (value);
      else if (strcmp (key, "no-final-newline") == 0)
        {
          out_nofinal = strstr (value, "stdout") != NULL;
          err_nofinal = strstr (value, "stderr") != NULL;
        }
      else
        g_assert_cmpstr (key, ==, "note");
    }

  g_assert_nonnull (r->source);
  g_assert_nonnull (r->kind);
  g_assert_nonnull (r->expect);
  g_assert_cmpint (r->exit_status, >=, 0);
  r->out = section_bytes (out_start, err_mark, out_nofinal);
  r->err = section_bytes (err_start, text + len, err_nofinal);
  return g_steal_pointer (&r);
}

static gboolean
recorded_expects_error (const Recorded *r)
{
  return strcmp (r->expect[0], "error") == 0;
}

static gint
recorded_error_code (const Recorded *r)
{
  g_assert_nonnull (r->expect[1]);
  if (strcmp (r->expect[1], "parse") == 0)
    return DATC_SITE_ERROR_PARSE;
  g_assert_cmpstr (r->expect[1], ==, "command");
  return DATC_SITE_ERROR_COMMAND;
}

static void
recorded_assert_error (const Recorded *r, const DatcSchedulerClass *klass, const GError *error,
                       gint code)
{
  g_assert_nonnull (error);
  g_test_message ("%s: error: %s", r->file, error->message);
  g_assert_error ((GError *) error, DATC_SITE_ERROR, code);
  if (code == DATC_SITE_ERROR_PARSE || code == DATC_SITE_ERROR_COMMAND)
    {
      g_autofree gchar *named = g_strconcat (klass->name, ": ", NULL);
      g_assert_nonnull (strstr (error->message, named));
    }
  if (r->message != NULL)
    g_assert_nonnull (strstr (error->message, r->message));
}

static DatcProxyState
recorded_state (const char *word)
{
  for (DatcProxyState s = DATC_PROXY_PENDING; s <= DATC_PROXY_UNKNOWN; s++)
    if (strcmp (datc_proxy_state_name (s), word) == 0)
      return s;
  g_error ("unknown state '%s' in an expect: line", word);
}

/* A poll's reasons against the recording's "# reasons:" line, where it
 * has one (recordings older than reasons have none). */
static void
recorded_assert_reasons (const Recorded *r, const DatcProxyState *states, gchar **reasons)
{
  guint n = g_strv_length (r->ids);

  if (r->reasons == NULL)
    return;
  g_assert_cmpuint (g_strv_length (r->reasons), ==, n);
  for (guint i = 0; i < n; i++)
    {
      const char *want = strcmp (r->reasons[i], "-") != 0 ? r->reasons[i] : NULL;
      g_test_message ("%s: id %s (%s): reason %s", r->file, r->ids[i],
                      datc_proxy_state_name (states[i]), reasons[i] != NULL ? reasons[i] : "-");
      g_assert_cmpstr (reasons[i], ==, want);
    }
}

static void
recorded_reasons_free (gchar **reasons, guint n)
{
  for (guint i = 0; i < n; i++)
    g_free (reasons[i]);
  g_free (reasons);
}

/* ---- the parsers alone -------------------------------------------------- */

static void
recorded_check_parser (const DatcSchedulerClass *klass, const Recorded *r)
{
  DatcCommandResult res = { .exit_status = r->exit_status, .out = r->out, .err = r->err };
  g_autoptr (GError) error = NULL;

  if (strcmp (r->kind, "submit-array") == 0)
    {
      g_assert_nonnull (klass->arrays);
      guint k = recorded_expects_error (r) ? DATC_ARRAY_MIN : g_strv_length (r->expect);
      g_autofree gchar *base = NULL;
      gboolean ok = klass->arrays->parse_submit (&res, k, &base, &error);

      if (recorded_expects_error (r))
        {
          g_assert_false (ok);
          g_assert_null (base);
          recorded_assert_error (r, klass, error, recorded_error_code (r));
        }
      else
        {
          g_assert_no_error (error);
          g_assert_true (ok);
          for (guint i = 0; i < k; i++)
            {
              g_autofree gchar *element = klass->arrays->element_id (base, i + 1);
              g_assert_cmpstr (element, ==, r->expect[i]);
            }
        }
    }
  else if (strcmp (r->kind, "lookup-array") == 0)
    {
      g_autofree gchar *base = NULL;

      g_assert_nonnull (klass->arrays);
      g_assert_nonnull (r->name);
      g_auto (GStrv) argv = klass->arrays->lookup_argv (r->name);
      g_assert_nonnull (argv);
      gboolean ok = klass->arrays->parse_lookup (&res, &base, &error);
      if (recorded_expects_error (r))
        {
          g_assert_false (ok);
          g_assert_null (base);
          recorded_assert_error (r, klass, error, recorded_error_code (r));
        }
      else
        {
          g_assert_no_error (error);
          g_assert_true (ok);
          if (strcmp (r->expect[0], "none") == 0)
            g_assert_null (base);
          else
            g_assert_cmpstr (base, ==, r->expect[0]);
        }
    }
  else if (strcmp (r->kind, "submit") == 0)
    {
      g_autofree gchar *id = NULL;
      gboolean ok = klass->parse_submit (&res, &id, &error);

      if (recorded_expects_error (r))
        {
          g_assert_false (ok);
          g_assert_null (id);
          recorded_assert_error (r, klass, error, recorded_error_code (r));
        }
      else
        {
          g_assert_no_error (error);
          g_assert_true (ok);
          g_assert_cmpstr (id, ==, r->expect[0]);
        }
    }
  else if (strcmp (r->kind, "poll") == 0)
    {
      guint n = g_strv_length (r->ids);
      g_autofree DatcProxyState *states = g_new0 (DatcProxyState, n);
      gboolean ok;

      g_assert_cmpuint (n, >, 0);
      ok = klass->parse_poll (&res, (const char *const *) r->ids, states, &error);
      if (recorded_expects_error (r))
        {
          g_assert_false (ok);
          recorded_assert_error (r, klass, error, recorded_error_code (r));
        }
      else
        {
          g_assert_no_error (error);
          g_assert_true (ok);
          g_assert_cmpuint (g_strv_length (r->expect), ==, n);
          for (guint i = 0; i < n; i++)
            {
              g_test_message ("%s: id %s", r->file, r->ids[i]);
              g_assert_cmpstr (datc_proxy_state_name (states[i]), ==,
                               datc_proxy_state_name (recorded_state (r->expect[i])));
            }
        }
      /* The same answer with its reasons: the same states, or the same
       * error. */
      g_assert_true (r->reasons == NULL || klass->parse_poll_reasons != NULL);
      if (klass->parse_poll_reasons != NULL)
        {
          g_autofree DatcProxyState *again = g_new0 (DatcProxyState, n);
          gchar **reasons = g_new0 (gchar *, n);
          g_autoptr (GError) again_error = NULL;

          ok = klass->parse_poll_reasons (&res, (const char *const *) r->ids, again, reasons,
                                          &again_error);
          g_assert_cmpint (ok, ==, !recorded_expects_error (r));
          if (ok)
            {
              g_assert_cmpmem (again, n * sizeof *again, states, n * sizeof *states);
              recorded_assert_reasons (r, states, reasons);
            }
          else
            for (guint i = 0; i < n; i++)
              g_assert_null (reasons[i]);
          recorded_reasons_free (reasons, n);
        }
    }
  else if (strcmp (r->kind, "lookup") == 0)
    {
      g_autofree gchar *id = NULL;
      gboolean ok;

      g_assert_nonnull (klass->lookup_argv);
      g_assert_nonnull (r->name);
      g_auto (GStrv) argv = klass->lookup_argv (r->name);
      g_assert_nonnull (argv);
      ok = klass->parse_lookup (&res, &id, &error);
      if (recorded_expects_error (r))
        {
          g_assert_false (ok);
          g_assert_null (id);
          recorded_assert_error (r, klass, error, recorded_error_code (r));
        }
      else
        {
          g_assert_no_error (error);
          g_assert_true (ok);
          if (strcmp (r->expect[0], "none") == 0)
            g_assert_null (id);
          else
            g_assert_cmpstr (id, ==, r->expect[0]);
        }
    }
  else if (strcmp (r->kind, "queue") == 0)
    {
      gboolean exists = FALSE, ok;
      g_autofree gchar *answer = NULL;

      g_assert_nonnull (klass->queue_argv);
      g_assert_nonnull (r->queue);
      g_auto (GStrv) argv = klass->queue_argv (r->queue);
      g_assert_nonnull (argv);
      ok = klass->parse_queue (&res, r->queue, &exists, &answer, &error);
      if (recorded_expects_error (r))
        {
          g_assert_false (ok);
          g_assert_null (answer);
          recorded_assert_error (r, klass, error, recorded_error_code (r));
        }
      else
        {
          g_assert_no_error (error);
          g_assert_true (ok);
          g_test_message ("%s: answer: %s", r->file, answer);
          g_assert_nonnull (answer);
          g_assert_cmpint (exists, ==, strcmp (r->expect[0], "exists") == 0);
          if (!exists)
            g_assert_cmpstr (r->expect[0], ==, "missing");
          if (r->message != NULL)
            g_assert_nonnull (strstr (answer, r->message));
        }
    }
  else
    g_assert_cmpstr (r->kind, ==, "cancel");
}

/* A made-up queue answer (stdout `out`, stderr `err`) that parse_queue
 * must refuse with `code`, naming the scheduler. */
G_GNUC_UNUSED static void
queue_answer_fails (const DatcSchedulerClass *klass, const char *queue, gint exit_status,
                    const char *out, const char *err, gint code)
{
  g_auto (DatcCommandResult) res = { .exit_status = exit_status,
                                     .out = g_bytes_new (out, strlen (out)),
                                     .err = g_bytes_new (err, strlen (err)) };
  gboolean exists = TRUE;
  g_autofree gchar *answer = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree gchar *named = g_strconcat (klass->name, ": ", NULL);

  g_test_message ("queue %s: exit %d, stdout '%s', stderr '%s'", queue, exit_status, out, err);
  g_assert_false (klass->parse_queue (&res, queue, &exists, &answer, &error));
  g_assert_error (error, DATC_SITE_ERROR, code);
  g_assert_true (g_str_has_prefix (error->message, named));
  g_assert_null (answer);
}

/* ---- end to end, with a stub command on PATH ------------------------------ */

/* The stubs live in one directory put at the front of PATH once, before
 * any thread exists (setenv is not thread-safe, and GSubprocess starts
 * threads); each check writes its stub there and removes it after. */
static gchar *stub_dir;

static void
stub_dir_init (void)
{
  g_autoptr (GError) error = NULL;

  stub_dir = g_dir_make_tmp ("datc-stub-XXXXXX", &error);
  g_assert_no_error (error);
  g_autofree gchar *path = g_strconcat (stub_dir, ":", g_getenv ("PATH"), NULL);
  g_setenv ("PATH", path, TRUE);
}

static void
stub_dir_clear (void)
{
  g_autoptr (GDir) dir = g_dir_open (stub_dir, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree gchar *child = g_build_filename (stub_dir, name, NULL);
      if (g_file_test (child, G_FILE_TEST_IS_DIR))
        {
          g_autoptr (GDir) sub = g_dir_open (child, 0, NULL);
          const char *subname;
          while (sub != NULL && (subname = g_dir_read_name (sub)) != NULL)
            {
              g_autofree gchar *grandchild = g_build_filename (child, subname, NULL);
              (void) g_unlink (grandchild);
            }
          (void) g_rmdir (child);
        }
      else
        (void) g_unlink (child);
    }
}

/* An executable `command` in stub_dir that appends its arguments to
 * stub_dir/args and replays the recording's stdout, stderr and exit
 * status. */
static void
stub_install (const Recorded *r, const char *command)
{
  g_autofree gchar *args_file = g_build_filename (stub_dir, "args", NULL);
  g_autofree gchar *out_file = g_build_filename (stub_dir, "out", NULL);
  g_autofree gchar *err_file = g_build_filename (stub_dir, "err", NULL);
  gsize len = 0;
  const char *data = g_bytes_get_data (r->out, &len);

  g_assert_true (g_file_set_contents (out_file, data != NULL ? data : "", (gssize) len, NULL));
  data = g_bytes_get_data (r->err, &len);
  g_assert_true (g_file_set_contents (err_file, data != NULL ? data : "", (gssize) len, NULL));

  g_autofree gchar *q_args = g_shell_quote (args_file);
  g_autofree gchar *q_out = g_shell_quote (out_file);
  g_autofree gchar *q_err = g_shell_quote (err_file);
  g_autofree gchar *script
      = g_strdup_printf ("#!/bin/sh\nprintf '%%s\\n' \"$*\" >>%s\ncat %s\ncat %s >&2\nexit %d\n",
                         q_args, q_out, q_err, r->exit_status);
  g_autofree gchar *path = g_build_filename (stub_dir, command, NULL);
  g_assert_true (g_file_set_contents (path, script, -1, NULL));
  g_assert_cmpint (g_chmod (path, 0755), ==, 0);
}

/* What the stub was called with (NULL: not called); clears stub_dir. */
static gchar *
stub_remove (void)
{
  g_autofree gchar *args_file = g_build_filename (stub_dir, "args", NULL);
  gchar *args = NULL;

  if (!g_file_get_contents (args_file, &args, NULL, NULL))
    args = NULL;
  stub_dir_clear ();
  return args;
}

static void
recorded_check_through_site (const DatcSchedulerClass *klass, const RecordedCommands *commands,
                             const Recorded *r)
{
  const char *command = NULL;

  if (strcmp (r->kind, "submit") == 0 || strcmp (r->kind, "submit-array") == 0)
    command = commands->submit;
  else if (strcmp (r->kind, "poll") == 0)
    command = commands->poll;
  else if (strcmp (r->kind, "cancel") == 0)
    command = commands->cancel;
  else if (strcmp (r->kind, "queue") == 0)
    command = commands->queue;
  if (command == NULL)
    return;

  g_autoptr (GError) error = NULL;
  g_autoptr (DatcSite) site = datc_site_new ("recorded", "local", klass->name, NULL, NULL, &error);
  g_assert_no_error (error);
  gboolean ok = FALSE;

  stub_install (r, command);
  g_autofree gchar *workdir = NULL;

  if (strcmp (r->kind, "submit") == 0)
    {
      g_autofree gchar *id = NULL;
      workdir = g_build_filename (stub_dir, "work", NULL);
      DatcProxyRequest req = {
        .name = "datc-recorded-p1",
        .slots = 2,
        .walltime_s = 600,
        .workdir = workdir,
        .agent_command = "true",
      };

      ok = datc_site_submit (site, &req, "proxy.sh", &id, &error);
      if (!recorded_expects_error (r))
        g_assert_cmpstr (id, ==, r->expect[0]);
    }
  else if (strcmp (r->kind, "submit-array") == 0)
    {
      g_auto (GStrv) elements = NULL;
      guint k = recorded_expects_error (r) ? DATC_ARRAY_MIN : g_strv_length (r->expect);
      workdir = g_build_filename (stub_dir, "work", NULL);
      DatcProxyRequest req = {
        .name = "datc-recorded-a1",
        .slots = 2,
        .walltime_s = 600,
        .workdir = workdir,
        .agent_command = "true",
      };

      ok = datc_site_submit_array (site, &req, k, "array.sh", &elements, &error);
      if (!recorded_expects_error (r))
        g_assert_cmpstrv (elements, r->expect);
      else
        g_assert_null (elements);
    }
  else if (strcmp (r->kind, "poll") == 0)
    {
      guint n = g_strv_length (r->ids);
      g_autofree DatcProxyState *states = g_new0 (DatcProxyState, n);

      gchar **reasons = g_new0 (gchar *, n);

      ok = datc_site_poll_reasons (site, (const char *const *) r->ids, states, reasons, &error);
      for (guint i = 0; ok && i < n; i++)
        g_assert_cmpstr (datc_proxy_state_name (states[i]), ==,
                         datc_proxy_state_name (recorded_state (r->expect[i])));
      if (ok && klass->parse_poll_reasons != NULL)
        recorded_assert_reasons (r, states, reasons);
      recorded_reasons_free (reasons, n);
    }
  else if (strcmp (r->kind, "queue") == 0)
    {
      gboolean exists = FALSE;
      g_autofree gchar *answer = NULL;

      ok = datc_site_query_queue (site, r->queue, &exists, &answer, &error);
      if (ok)
        g_assert_cmpint (exists, ==, strcmp (r->expect[0], "exists") == 0);
    }
  else
    ok = datc_site_cancel (site, (const char *const *) r->ids, &error);

  g_autofree gchar *args = stub_remove ();
  g_test_message ("%s: stub %s got: %s", r->file, command, args != NULL ? args : "(not run)");
  g_assert_nonnull (args);

  gboolean want_ok = strcmp (r->expect[0], "ok") == 0 || !recorded_expects_error (r);
  if (want_ok)
    {
      g_assert_no_error (error);
      g_assert_true (ok);
    }
  else
    {
      g_assert_false (ok);
      g_assert_nonnull (error);
      g_test_message ("%s: site error: %s", r->file, error->message);
      g_assert_true (g_str_has_prefix (error->message, "site recorded: "));
      if (r->message != NULL)
        g_assert_nonnull (strstr (error->message, r->message));
    }
}

static void
recorded_test (gconstpointer data)
{
  const RecordedCase *c = data;
  g_autoptr (Recorded) r = recorded_load (c->path);

  g_test_message ("%s: %s", r->file, r->source);
  recorded_check_parser (c->klass, r);
  recorded_check_through_site (c->klass, &c->commands, r);
}

static void
recorded_missing (gconstpointer data)
{
  g_test_message ("%s", (const char *) data);
  g_test_fail ();
}

static gint
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

static void
recorded_case_free (gpointer data)
{
  RecordedCase *c = data;

  g_free (c->path);
  g_free (c);
}

/* One test per file in DATA_DIR/<scheduler>/, "/site/<scheduler>/recorded/<file>";
 * a test that fails when DATA_DIR is unset or the folder has no answers.
 * Returns how many files there are. */
static guint
recorded_add_tests (const DatcSchedulerClass *klass, RecordedCommands commands)
{
  const char *data_dir = g_getenv ("DATA_DIR");
  g_autofree gchar *dir = data_dir != NULL ? g_build_filename (data_dir, klass->name, NULL) : NULL;
  g_autoptr (GDir) d = dir != NULL ? g_dir_open (dir, 0, NULL) : NULL;
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    if (g_str_has_suffix (name, ".txt"))
      g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, compare_names);

  if (stub_dir == NULL)
    stub_dir_init ();
  if (names->len == 0)
    {
      g_autofree gchar *path = g_strdup_printf ("/site/%s/recorded/missing", klass->name);
      g_test_add_data_func_full (path,
                                 g_strdup_printf ("no recorded answers in %s (DATA_DIR=%s)",
                                                  dir != NULL ? dir : "(unset)",
                                                  data_dir != NULL ? data_dir : "(unset)"),
                                 recorded_missing, g_free);
      return 0;
    }
  for (guint i = 0; i < names->len; i++)
    {
      const char *file = g_ptr_array_index (names, i);
      RecordedCase *c = g_new0 (RecordedCase, 1);
      g_autofree gchar *base = g_strndup (file, strlen (file) - strlen (".txt"));
      g_autofree gchar *path = g_strdup_printf ("/site/%s/recorded/%s", klass->name, base);

      c->klass = klass;
      c->commands = commands;
      c->path = g_build_filename (dir, file, NULL);
      g_test_add_data_func_full (path, c, recorded_test, recorded_case_free);
    }
  return names->len;
}

/* ---- running a proxy script ------------------------------------------------ */

/* Runs `script` with /bin/sh in an environment of only PATH and `env`
 * ("NAME=value" strings, may be NULL) and returns its stdout: the scripts'
 * `exec` line is then whatever the test put in agent_command. */
static gchar *run_script_status (const char *script, const char *const *env, gint *status);

static gchar *
run_script (const char *script, const char *const *env)
{
  gint status = 0;
  gchar *out = run_script_status (script, env, &status);

  g_assert_true (g_spawn_check_wait_status (status, NULL));
  return out;
}

/* As run_script, but the script may fail: *status is its wait status. */
static gchar *
run_script_status (const char *script, const char *const *env, gint *status)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("datc-script-XXXXXX", &error);
  g_assert_no_error (error);
  g_autofree gchar *path = g_build_filename (dir, "proxy.sh", NULL);
  g_assert_true (g_file_set_contents (path, script, -1, NULL));

  g_autoptr (GPtrArray) envp = g_ptr_array_new ();
  g_ptr_array_add (envp, (gpointer) "PATH=/usr/bin:/bin");
  for (gsize i = 0; env != NULL && env[i] != NULL; i++)
    g_ptr_array_add (envp, (gpointer) env[i]);
  g_ptr_array_add (envp, NULL);

  const char *argv[] = { "/bin/sh", path, NULL };
  gchar *out = NULL;
  g_assert_true (g_spawn_sync (dir, (gchar **) argv, (gchar **) envp->pdata,
                               G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL, status, &error));
  g_assert_no_error (error);
  (void) g_unlink (path);
  (void) g_rmdir (dir);
  return out;
}

/* The agent command the script tests use: prints what the agent would see. */
#define SHOW_AGENT_ENV "/bin/sh -c 'echo \"$DATC_SLOTS $DATC_WALLTIME_END\"'"

/* Runs the script with `env` and checks DATC_SLOTS and that
 * DATC_WALLTIME_END is now + walltime_s (or empty without walltime). */
static void
check_script_env (const char *script, const char *const *env, guint want_slots, guint walltime_s)
{
  gint64 before = g_get_real_time () / G_USEC_PER_SEC;
  g_autofree gchar *out = run_script (script, env);
  gint64 after = g_get_real_time () / G_USEC_PER_SEC;
  g_auto (GStrv) words = g_strsplit (g_strstrip (out), " ", -1);
  g_autofree gchar *slots = g_strdup_printf ("%u", want_slots);

  g_assert_cmpstr (words[0], ==, slots);
  if (walltime_s == 0)
    g_assert_true (words[1] == NULL || words[1][0] == '\0');
  else
    {
      gint64 end = g_ascii_strtoll (words[1], NULL, 10);
      g_assert_cmpint (end, >=, before + walltime_s);
      g_assert_cmpint (end, <=, after + walltime_s);
    }
}

/* An array's script (`klass` has arrays) gives each element's agent its
 * index from the scheduler's `variable`, usable in the agent command as
 * the proxy name's end, and refuses to start an agent without a valid
 * one.  Also: the array argv builders take k in DATC_ARRAY_MIN..MAX
 * only, and element_id builds ids from a base only. */
G_GNUC_UNUSED static void
check_array_script (const DatcSchedulerClass *klass, const char *variable)
{
  DatcProxyRequest req = {
    .name = "datc-c42-a3",
    .slots = 2,
    .walltime_s = 600,
    .workdir = "/tmp",
    .agent_command = "echo --proxy site-c42-3-\"$DATC_ARRAY_INDEX\" \"$DATC_SLOTS\"",
  };
  g_assert_nonnull (klass->arrays);
  g_autofree gchar *script = klass->arrays->script (&req);
  g_assert_nonnull (script);
  g_autofree gchar *seven = g_strdup_printf ("%s=7", variable);
  const char *env[] = { seven, NULL };
  gint status = 0;
  g_autofree gchar *out = run_script_status (script, env, &status);

  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_assert_cmpstr (out, ==, "--proxy site-c42-3-7 2\n");

  static const char *const bad[] = { NULL, "", "0", "07", "x", "3x", "-1", "undefined" };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autofree gchar *var = bad[i] != NULL ? g_strdup_printf ("%s=%s", variable, bad[i]) : NULL;
      const char *bad_env[] = { var, NULL };
      g_autofree gchar *bad_out = run_script_status (script, bad_env, &status);

      g_test_message ("%s=%s", variable, bad[i] != NULL ? bad[i] : "(unset)");
      g_assert_false (g_spawn_check_wait_status (status, NULL));
      g_assert_cmpstr (bad_out, ==, "");
    }

  /* The plain script knows nothing of arrays. */
  g_autofree gchar *plain = klass->script (&req);
  g_assert_null (strstr (plain, variable));
  g_assert_null (strstr (plain, "export " DATC_ARRAY_INDEX_VAR));

  static const guint bad_k[] = { 0, 1, DATC_ARRAY_MAX + 1, G_MAXUINT };
  for (gsize i = 0; i < G_N_ELEMENTS (bad_k); i++)
    g_assert_null (klass->arrays->submit_argv (&req, bad_k[i], "/tmp/a.sh"));
  g_auto (GStrv) two = klass->arrays->submit_argv (&req, DATC_ARRAY_MIN, "/tmp/a.sh");
  g_auto (GStrv) most = klass->arrays->submit_argv (&req, DATC_ARRAY_MAX, "/tmp/a.sh");
  g_assert_nonnull (two);
  g_assert_nonnull (most);
  req.name = "7up";
  g_assert_null (klass->arrays->script (&req));
  g_assert_null (klass->arrays->lookup_argv ("7up"));

  static const char *const not_bases[] = { "", "0", "x", "12;x", "12_1", "12.1.2", "12[3]" };
  for (gsize i = 0; i < G_N_ELEMENTS (not_bases); i++)
    {
      g_autofree gchar *element = klass->arrays->element_id (not_bases[i], 1);
      g_test_message ("base '%s'", not_bases[i]);
      g_assert_null (element);
    }
}

/* After g_test_run: removes the stub directory. */
static void
recorded_cleanup (void)
{
  if (stub_dir == NULL)
    return;
  stub_dir_clear ();
  (void) g_rmdir (stub_dir);
  g_clear_pointer (&stub_dir, g_free);
}
