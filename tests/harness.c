/* harness.c: see harness.h. */
#include "harness.h"
#include "testbed.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

TbDir *
tb_dir_new (void)
{
  g_autoptr (GError) error = NULL;
  TbDir *d = g_new0 (TbDir, 1);
  d->path = g_dir_make_tmp ("datc-test-XXXXXX", &error);
  g_assert_no_error (error);
  return d;
}

static void
rm_rf (const char *path)
{
  g_autoptr (GDir) dir = g_dir_open (path, 0, NULL);
  if (dir != NULL)
    {
      const char *n;
      while ((n = g_dir_read_name (dir)) != NULL)
        {
          g_autofree gchar *p = g_build_filename (path, n, NULL);
          if (g_file_test (p, G_FILE_TEST_IS_DIR) && !g_file_test (p, G_FILE_TEST_IS_SYMLINK))
            rm_rf (p);
          else
            unlink (p);
        }
    }
  rmdir (path);
}

void
tb_dir_free (TbDir *d)
{
  if (d == NULL)
    return;
  guint left = tb_kill_agents (d->path);
  if (left > 0)
    g_printerr ("# harness: killed %u leftover agent(s) of %s\n", left, d->path);
  if (g_getenv ("DATC_TEST_KEEP") == NULL)
    rm_rf (d->path);
  g_free (d->path);
  g_free (d);
}

gchar *
tb_write (TbDir *d, const char *name, const char *content)
{
  gchar *path = g_build_filename (d->path, name, NULL);
  g_autoptr (GError) error = NULL;
  g_file_set_contents (path, content, -1, &error);
  g_assert_no_error (error);
  return path;
}

const char *
tb_datc (void)
{
  const char *p = g_getenv ("DATC");
  g_assert_nonnull (p);
  return p;
}

const char *
tb_agent (void)
{
  const char *p = g_getenv ("DATC_AGENT");
  g_assert_nonnull (p);
  return p;
}

TbProc *
tb_spawn (TbDir *d, const char *tag, const char *const *argv)
{
  static guint serial;
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocessLauncher) l = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_INHERIT);
  TbProc *p = g_new0 (TbProc, 1);
  guint n = ++serial;
  p->stderr_path = g_strdup_printf ("%s/%s-%u.err", d->path, tag, n);
  p->stdout_path = g_strdup_printf ("%s/%s-%u.out", d->path, tag, n);
  g_subprocess_launcher_set_stderr_file_path (l, p->stderr_path);
  g_subprocess_launcher_set_stdout_file_path (l, p->stdout_path);
  /* The queue waits datc keeps across campaigns (master/waitcache.h) stay
   * with the test's directory: one test's waits never steer another's
   * proxies. */
  g_autofree gchar *cache = g_build_filename (d->path, "xdg-cache", NULL);
  g_subprocess_launcher_setenv (l, "XDG_CACHE_HOME", cache, TRUE);
  p->proc = g_subprocess_launcher_spawnv (l, argv, &error);
  g_assert_no_error (error);
  return p;
}

int
tb_proc_pid (TbProc *p)
{
  const char *id = g_subprocess_get_identifier (p->proc);
  return id ? atoi (id) : -1;
}

static gboolean
on_wait_timeout (gpointer c)
{
  g_cancellable_cancel (c);
  return G_SOURCE_REMOVE;
}

static gpointer
iterate_once (gpointer ctx)
{
  g_main_context_iteration (ctx, TRUE);
  return NULL;
}

int
tb_wait (TbProc *p, guint timeout_s)
{
  /* GSubprocess reaps in GLib's worker thread: wait through it, with a
   * cancellable that a timer thread trips at the deadline. */
  g_autoptr (GCancellable) c = g_cancellable_new ();
  g_autoptr (GMainContext) ctx = g_main_context_new ();
  GSource *timer = g_timeout_source_new_seconds (timeout_s);
  g_source_set_callback (timer, on_wait_timeout, c, NULL);
  g_source_attach (timer, ctx);
  g_source_unref (timer);
  g_autoptr (GThread) t = g_thread_new ("deadline", iterate_once, ctx);
  g_autoptr (GError) error = NULL;
  gboolean ok = g_subprocess_wait (p->proc, c, &error);
  if (!ok)
    {
      g_subprocess_force_exit (p->proc);
      g_subprocess_wait (p->proc, NULL, NULL);
      g_thread_join (g_steal_pointer (&t));
      g_autofree gchar *err = tb_proc_stderr (p);
      g_printerr ("# stderr of the process that timed out after %u s:\n%s\n", timeout_s, err);
      g_assert_not_reached ();
    }
  g_source_destroy (timer);
  g_main_context_wakeup (ctx);
  g_thread_join (g_steal_pointer (&t));
  if (g_subprocess_get_if_signaled (p->proc))
    return 128 + g_subprocess_get_term_sig (p->proc);
  return g_subprocess_get_exit_status (p->proc);
}

gboolean
tb_proc_signal (TbProc *p, int sig)
{
  int pid = tb_proc_pid (p);
  if (pid <= 0)
    return FALSE;
  return kill (pid, sig) == 0;
}

void
tb_proc_free (TbProc *p)
{
  if (p == NULL)
    return;
  if (p->proc != NULL)
    {
      if (tb_proc_pid (p) > 0)
        {
          g_subprocess_force_exit (p->proc);
          g_subprocess_wait (p->proc, NULL, NULL);
        }
      g_object_unref (p->proc);
    }
  g_free (p->stderr_path);
  g_free (p->stdout_path);
  g_free (p);
}

gchar *
tb_proc_stderr (TbProc *p)
{
  gchar *s = NULL;
  if (!g_file_get_contents (p->stderr_path, &s, NULL, NULL))
    s = g_strdup ("");
  return s;
}

gchar *
tb_proc_stdout (TbProc *p)
{
  gchar *s = NULL;
  if (!g_file_get_contents (p->stdout_path, &s, NULL, NULL))
    s = g_strdup ("");
  return s;
}

int
tb_run (TbDir *d, const char *const *argv, guint timeout_s, gchar **err)
{
  g_autoptr (TbProc) p = tb_spawn (d, "run", argv);
  int status = tb_wait (p, timeout_s);
  if (err != NULL)
    *err = tb_proc_stderr (p);
  return status;
}

gboolean
tb_await (gboolean (*cond) (gpointer), gpointer data, guint timeout_s)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_s * G_USEC_PER_SEC;
  while (!cond (data))
    {
      if (g_get_monotonic_time () > deadline)
        return FALSE;
      g_usleep (5000);
    }
  return TRUE;
}

static gboolean
file_exists (gpointer path)
{
  return g_file_test (path, G_FILE_TEST_EXISTS);
}

gboolean
tb_await_file (const char *path, guint timeout_s)
{
  return tb_await (file_exists, (gpointer) path, timeout_s);
}

typedef struct {
  const char *path;
  guint64 n;
} LinesWait;

static gboolean
has_lines (gpointer data)
{
  LinesWait *w = data;
  return tb_count_lines (w->path) >= w->n;
}

gboolean
tb_await_lines (const char *path, guint64 n, guint timeout_s)
{
  LinesWait w = { path, n };
  return tb_await (has_lines, &w, timeout_s);
}

typedef struct {
  TbProc *proc;
  const char *needle;
} StderrWait;

static gboolean
stderr_has (gpointer data)
{
  StderrWait *w = data;
  g_autofree gchar *err = tb_proc_stderr (w->proc);
  return strstr (err, w->needle) != NULL;
}

gboolean
tb_await_stderr (TbProc *p, const char *needle, guint timeout_s)
{
  StderrWait w = { p, needle };
  return tb_await (stderr_has, &w, timeout_s);
}

GHashTable *
tb_results (const char *campaign_dir)
{
  g_autofree gchar *path = g_build_filename (campaign_dir, "results.jsonl", NULL);
  g_autofree gchar *text = NULL;
  GHashTable *out = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free,
                                           (GDestroyNotify) json_object_unref);
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return out;
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  g_autoptr (JsonParser) parser = json_parser_new ();
  for (guint i = 0; lines[i] != NULL; i++)
    {
      if (lines[i][0] == '\0')
        continue;
      g_autoptr (GError) error = NULL;
      json_parser_load_from_data (parser, lines[i], -1, &error);
      g_assert_no_error (error);
      JsonObject *o = json_node_get_object (json_parser_get_root (parser));
      gint64 *id = g_new (gint64, 1);
      *id = json_object_get_int_member (o, "id");
      if (g_hash_table_contains (out, id))
        g_error ("%s: task %" G_GINT64_FORMAT " has two result lines", path, *id);
      g_hash_table_insert (out, id, json_object_ref (o));
    }
  return out;
}

GPtrArray *
tb_trace (const char *campaign_dir)
{
  g_autofree gchar *path = g_build_filename (campaign_dir, "trace.jsonl", NULL);
  g_autofree gchar *text = NULL;
  GPtrArray *out = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return out;
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  g_autoptr (JsonParser) parser = json_parser_new ();
  /* The last element follows the last newline: empty, or a line being written. */
  for (guint i = 0; lines[i] != NULL && lines[i + 1] != NULL; i++)
    {
      g_autoptr (GError) error = NULL;
      json_parser_load_from_data (parser, lines[i], -1, &error);
      g_assert_no_error (error);
      JsonNode *root = json_parser_get_root (parser);
      g_assert_true (JSON_NODE_HOLDS_OBJECT (root));
      g_ptr_array_add (out, json_object_ref (json_node_get_object (root)));
    }
  return out;
}

JsonObject *
tb_status (const char *campaign_dir)
{
  /* timeout(1): a master that stops answering must not hang the test. */
  const char *argv[] = { "timeout", "30", tb_datc (), "status", "--json", campaign_dir, NULL };
  gint64 until = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  for (;;)
    {
      int status;
      g_autofree gchar *out = tb_capture (argv, &status);
      if (status != 0)
        return NULL;
      g_autoptr (JsonParser) parser = json_parser_new ();
      if (!json_parser_load_from_data (parser, out, -1, NULL)
          || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
        return NULL;
      JsonObject *st = json_node_get_object (json_parser_get_root (parser));
      /* A master still loading its campaign says only that: the callers
       * want the campaign, asked again once it is loaded. */
      JsonObject *m = json_object_get_object_member (st, "master");
      if (m == NULL || !json_object_has_member (m, "loading") || g_get_monotonic_time () >= until)
        return json_object_ref (st);
      g_usleep (20 * 1000);
    }
}

guint64
tb_count_lines (const char *path)
{
  g_autofree gchar *text = NULL;
  gsize len;
  guint64 n = 0;
  if (!g_file_get_contents (path, &text, &len, NULL))
    return 0;
  for (gsize i = 0; i < len; i++)
    n += text[i] == '\n';
  return n;
}

GArray *
tb_find_agents (const char *needle)
{
  GArray *pids = g_array_new (FALSE, FALSE, sizeof (int));
  g_autoptr (GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *n;
  while (proc && (n = g_dir_read_name (proc)) != NULL)
    {
      if (!g_ascii_isdigit (n[0]))
        continue;
      g_autofree gchar *path = g_strdup_printf ("/proc/%s/cmdline", n);
      g_autofree gchar *cmd = NULL;
      gsize len;
      if (!g_file_get_contents (path, &cmd, &len, NULL) || len == 0)
        continue;
      for (gsize i = 0; i + 1 < len; i++)
        if (cmd[i] == '\0')
          cmd[i] = ' ';
      if (strstr (cmd, "datc-agent") != NULL && strstr (cmd, needle) != NULL
          && !tb_pid_gone (atoi (n)))
        {
          int pid = atoi (n);
          g_array_append_val (pids, pid);
        }
    }
  return pids;
}

guint
tb_kill_agents (const char *needle)
{
  g_autoptr (GArray) pids = tb_find_agents (needle);
  for (guint i = 0; i < pids->len; i++)
    if (g_array_index (pids, int, i) > 0)
      kill (g_array_index (pids, int, i), SIGKILL);
  return pids->len;
}

gboolean
tb_pid_gone (int pid)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree gchar *stat = NULL;
  if (pid <= 0 || (kill (pid, 0) != 0 && errno == ESRCH))
    return TRUE;
  if (!g_file_get_contents (path, &stat, NULL, NULL))
    return TRUE;
  const char *rp = strrchr (stat, ')');
  return rp != NULL && rp[1] == ' ' && rp[2] == 'Z';
}
