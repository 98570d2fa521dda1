/* test-compact.c: journal compaction in a real `datc run`.  The master is
 * killed (kill -9, from inside: DATC_TEST_COMPACT_KILL_AT, master/journal.c)
 * at each step of a compaction, then resumed: every task has exactly one
 * result, and a further resume gives the same results.jsonl.  A finished campaign's journal,
 * compacted at a resume, is smaller and gives the same results.jsonl; `datc status` shows the
 * journal's size and that compaction. */
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>

#include "harness.h"

static gchar *
make_tasks (TbDir *d, guint n, const char *log)
{
  g_autoptr (GString) s = g_string_new (NULL);
  for (guint i = 1; i <= n; i++)
    g_string_append_printf (s, "sh -c 'echo %u >> %s'\n", i, log);
  return tb_write (d, "tasks.txt", s->str);
}

static guint64
file_size (const char *path)
{
  GStatBuf st;
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  return (guint64) st.st_size;
}

/* The step (a string) the master kills itself at. */
static void
test_killed_at_step (gconstpointer data)
{
  const char *step = data;
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *log = g_build_filename (d->path, "executions", NULL);
  guint n = 300;
  g_autofree gchar *file = make_tasks (d, n, log);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  g_autofree gchar *journal_new = g_build_filename (dir, "journal.new", NULL);
  /* 4 KiB: the first compaction starts after a few dozen results. */
  const char *argv[]
      = { tb_datc (), "run",           "--dir", dir, "--local-slots", "4", "--compact-min-bytes",
          "4096",     "--no-progress", file,    NULL };

  g_setenv ("DATC_TEST_COMPACT_KILL_AT", step, TRUE);
  g_autoptr (TbProc) master = tb_spawn (d, "killed", argv);
  g_unsetenv ("DATC_TEST_COMPACT_KILL_AT");
  int status = tb_wait (master, 120);
  if (status != 128 + SIGKILL)
    {
      g_autofree gchar *err = tb_proc_stderr (master);
      g_printerr ("%s", err);
    }
  /* It did compact, and died there: not at the end of the campaign. */
  g_assert_cmpint (status, ==, 128 + SIGKILL);
  {
    g_autoptr (GHashTable) before = tb_results (dir);
    g_test_message ("killed at %s with %u results", step, g_hash_table_size (before));
    g_assert_cmpuint (g_hash_table_size (before), <, n);
  }
  /* Before the rename the new journal is beside the old one. */
  g_assert_cmpint (g_file_test (journal_new, G_FILE_TEST_EXISTS), ==,
                   !g_str_equal (step, "renamed"));
  tb_kill_agents (dir);

  g_autofree gchar *err = NULL;
  status = tb_run (d, argv, 180, &err);
  if (status != 0)
    g_printerr ("%s", err);
  g_assert_cmpint (status, ==, 0);
  /* tb_results fails on an id seen twice: each task exactly once. */
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, n);
  for (gint64 id = 1; id <= n; id++)
    g_assert_nonnull (g_hash_table_lookup (res, &id));
  g_assert_false (g_file_test (journal_new, G_FILE_TEST_EXISTS));
  /* Once more: the journal that run left (compacted at its start) opens
   * to the same results.jsonl. */
  g_autofree gchar *results = g_build_filename (dir, "results.jsonl", NULL);
  g_autofree gchar *lines = NULL, *again = NULL;
  g_assert_true (g_file_get_contents (results, &lines, NULL, NULL));
  g_assert_cmpint (tb_run (d, argv, 120, NULL), ==, 0);
  g_assert_true (g_file_get_contents (results, &again, NULL, NULL));
  /* Not cmpstr: a failure would print two whole results files. */
  g_assert_cmpuint (strlen (again), ==, strlen (lines));
  g_assert_true (g_str_equal (again, lines));
  g_autoptr (GArray) left = tb_find_agents (dir);
  g_assert_cmpuint (left->len, ==, 0);
}

/* A campaign run without compaction, then resumed with it: the resume
 * compacts before anything runs (master/README.md, Compaction). */
static void
test_resume_compacts (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *log = g_build_filename (d->path, "executions", NULL);
  guint n = 300;
  g_autofree gchar *file = make_tasks (d, n, log);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  g_autofree gchar *journal = g_build_filename (dir, "journal", NULL);
  g_autofree gchar *results = g_build_filename (dir, "results.jsonl", NULL);
  const char *never[]
      = { tb_datc (), "run",           "--dir", dir, "--local-slots", "4", "--compact-min-bytes",
          "never",    "--no-progress", file,    NULL };
  const char *compact[]
      = { tb_datc (), "run",           "--dir", dir, "--local-slots", "4", "--compact-min-bytes",
          "1",        "--no-progress", file,    NULL };

  g_assert_cmpint (tb_run (d, never, 120, NULL), ==, 0);
  guint64 before = file_size (journal);
  g_autofree gchar *lines_before = NULL;
  g_assert_true (g_file_get_contents (results, &lines_before, NULL, NULL));
  /* Resumed without compaction: the journal only grows. */
  g_assert_cmpint (tb_run (d, never, 120, NULL), ==, 0);
  g_assert_cmpuint (file_size (journal), >=, before);
  before = file_size (journal);

  g_autofree gchar *err = NULL;
  int status = tb_run (d, compact, 120, &err);
  if (status != 0)
    g_printerr ("%s", err);
  g_assert_cmpint (status, ==, 0);
  guint64 after = file_size (journal);
  g_test_message ("journal of %u tasks: %" G_GUINT64_FORMAT " bytes, compacted %" G_GUINT64_FORMAT,
                  n, before, after);
  g_assert_cmpuint (after, <, before);
  /* datc status (offline here) says so, in JSON and in text. */
  g_autoptr (JsonObject) st = tb_status (dir);
  g_assert_nonnull (st);
  JsonObject *j = json_object_get_object_member (st, "journal");
  g_assert_nonnull (j);
  g_assert_cmpint (json_object_get_int_member (j, "bytes"), ==, (gint64) after);
  JsonObject *last = json_object_get_object_member (j, "last_compaction");
  g_assert_nonnull (last);
  g_assert_cmpint (json_object_get_int_member (last, "bytes_before"), >=, (gint64) before);
  g_assert_cmpint (json_object_get_int_member (last, "bytes_after"), <=, (gint64) after);
  g_assert_cmpint (json_object_get_int_member (last, "bytes_after"), >, 0);
  gint64 when = json_object_get_int_member (last, "time");
  g_assert_cmpint (when, <=, g_get_real_time () / G_USEC_PER_SEC);
  g_assert_cmpint (when, >, g_get_real_time () / G_USEC_PER_SEC - 600);
  const char *text[] = { tb_datc (), "status", dir, NULL };
  g_autoptr (TbProc) shown = tb_spawn (d, "status", text);
  g_assert_cmpint (tb_wait (shown, 60), ==, 0);
  g_autofree gchar *printed = tb_proc_stdout (shown);
  g_test_message ("%s", printed);
  g_assert_nonnull (strstr (printed, "\njournal  "));
  g_assert_nonnull (strstr (printed, ", last compacted "));

  g_autofree gchar *lines_after = NULL;
  g_assert_true (g_file_get_contents (results, &lines_after, NULL, NULL));
  g_assert_cmpstr (lines_after, ==, lines_before);
  /* And it opens again to the same. */
  g_assert_cmpint (tb_run (d, never, 120, NULL), ==, 0);
  g_autofree gchar *lines_again = NULL;
  g_assert_true (g_file_get_contents (results, &lines_again, NULL, NULL));
  g_assert_cmpstr (lines_again, ==, lines_before);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  static const char *const steps[] = { "written", "copied", "synced", "renamed" };
  for (guint i = 0; i < G_N_ELEMENTS (steps); i++)
    {
      g_autofree gchar *path
          = g_strdup_printf ("/compact/killed-when-%s-resumes-each-task-once", steps[i]);
      g_test_add_data_func (path, steps[i], test_killed_at_step);
    }
  g_test_add_func ("/compact/resume-compacts-a-journal-smaller-same-results", test_resume_compacts);
  return g_test_run ();
}
