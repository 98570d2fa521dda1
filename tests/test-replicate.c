/* test-replicate.c: end-game replication through the real programs (the
 * embedded local site, two agents of two slots).  One task is slow only
 * the first time it runs (it leaves a marker: its first run sleeps 10 s,
 * later ones 0.2 s), among quick ones: with replication the campaign ends
 * in about the time of the rest plus one short task, the copy wins (its
 * attempt in results.jsonl), the trace has the copy and the cancel, and
 * the slow first run is killed; with --max-replicas 1, or the task marked
 * "replicate": false, it takes the 10 s.  A master killed while the copy
 * runs is resumed and every task ends exactly once. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define QUICK 39

typedef struct {
  gchar *tasks, *marker, *pidfile, *copy_started, *gate;
} Files;

static void
files_clear (Files *f)
{
  g_free (f->tasks);
  g_free (f->marker);
  g_free (f->pidfile);
  g_free (f->copy_started);
  g_free (f->gate);
}

/* Task 1 runs slow.sh; QUICK tasks sleep 0.2 s.  With `gated`, a later
 * run of task 1 says it started and waits for the gate file. */
static void
make_tasks (TbDir *d, const char *slow_fields, gboolean gated, Files *f)
{
  f->marker = g_build_filename (d->path, "marker", NULL);
  f->pidfile = g_build_filename (d->path, "slow.pid", NULL);
  f->copy_started = g_build_filename (d->path, "copy-started", NULL);
  f->gate = g_build_filename (d->path, "gate", NULL);
  g_autofree gchar *later
      = gated ? g_strdup_printf (": > '%s'; while [ ! -e '%s' ]; do sleep 0.05; done",
                                 f->copy_started, f->gate)
              : g_strdup ("sleep 0.2");
  g_autofree gchar *script = g_strdup_printf ("if [ -e '%s' ]; then %s; exit 0; fi\n"
                                              ": > '%s'\n"
                                              "echo $$ > '%s'\n"
                                              "exec sleep 10\n",
                                              f->marker, later, f->marker, f->pidfile);
  g_autofree gchar *slow = tb_write (d, "slow.sh", script);
  g_autoptr (GString) t = g_string_new (NULL);
  g_string_append_printf (t, "{\"cmd\": [\"sh\", \"%s\"]%s}\n", slow, slow_fields);
  for (guint i = 0; i < QUICK; i++)
    g_string_append (t, "{\"cmd\": [\"sleep\", \"0.2\"]}\n");
  f->tasks = tb_write (d, "tasks.jsonl", t->str);
}

static guint
count_events (GPtrArray *trace, const char *event, gint64 task, gint64 attempt)
{
  guint n = 0;
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      if (g_str_equal (json_object_get_string_member (o, "event"), event)
          && json_object_get_int_member (o, "task") == task
          && (attempt == 0 || json_object_get_int_member (o, "attempt") == attempt))
        n++;
    }
  return n;
}

static int
slow_pid (const Files *f)
{
  g_autofree gchar *text = NULL;
  g_assert_true (g_file_get_contents (f->pidfile, &text, NULL, NULL));
  return atoi (text);
}

/* Runs the campaign to its end; returns its duration in seconds. */
static double
run (TbDir *d, const char *dir, const Files *f, const char *max_replicas)
{
  const char *argv[]
      = { tb_datc (),       "run", "--dir",          dir,          "--local-slots", "4",
          "--local-agents", "2",   "--max-replicas", max_replicas, f->tasks,        NULL };
  g_autofree gchar *err = NULL;
  gint64 start = g_get_monotonic_time ();
  int status = tb_run (d, argv, 120, &err);
  double secs = (g_get_monotonic_time () - start) / 1e6;
  if (status != 0)
    g_printerr ("%s", err);
  g_assert_cmpint (status, ==, 0);
  g_test_message ("--max-replicas %s: %.2f s", max_replicas, secs);
  return secs;
}

/* Every task once in results.jsonl, done; task 1 by `attempt`. */
static void
check_results (const char *dir, gint64 attempt)
{
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, QUICK + 1);
  for (gint64 id = 1; id <= QUICK + 1; id++)
    {
      JsonObject *o = g_hash_table_lookup (res, &id);
      g_assert_nonnull (o);
      g_assert_cmpstr (json_object_get_string_member (o, "status"), ==, "exited");
      g_assert_cmpint (json_object_get_int_member (o, "exit_code"), ==, 0);
    }
  gint64 one = 1;
  g_assert_cmpint (json_object_get_int_member (g_hash_table_lookup (res, &one), "attempt"), ==,
                   attempt);
}

static void
test_straggler_is_copied (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  Files f = { 0 };
  make_tasks (d, "", FALSE, &f);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  double secs = run (d, dir, &f, "2");
  /* The quick tasks take about 2 s on 3 slots, the copy 0.2 s: far below
   * the 10 s of the first run. */
  g_assert_cmpfloat (secs, <, 7.0);
  check_results (dir, 2);
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  g_assert_cmpuint (count_events (trace, "task_replicated", 1, 2), ==, 1);
  g_assert_cmpuint (count_events (trace, "task_replica_cancelled", 1, 1), ==, 1);
  /* The first run was stopped, not left to sleep its 10 s. */
  g_assert_true (tb_pid_gone (slow_pid (&f)));
  files_clear (&f);
}

static void
test_no_copy_with_max_replicas_1 (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  Files f = { 0 };
  make_tasks (d, "", FALSE, &f);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  g_assert_cmpfloat (run (d, dir, &f, "1"), >=, 10.0);
  check_results (dir, 1);
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  g_assert_cmpuint (count_events (trace, "task_replicated", 1, 0), ==, 0);
  files_clear (&f);
}

static void
test_no_copy_of_a_task_not_to_replicate (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  Files f = { 0 };
  make_tasks (d, ", \"replicate\": false", FALSE, &f);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  g_assert_cmpfloat (run (d, dir, &f, "2"), >=, 10.0);
  check_results (dir, 1);
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  g_assert_cmpuint (count_events (trace, "task_replicated", 1, 0), ==, 0);
  files_clear (&f);
}

/* The master is killed while the copy runs: the next one knows both
 * copies, both agents re-attach theirs, the copy wins, the first run is
 * stopped, and every task has exactly one result. */
static void
test_resume_while_a_copy_runs (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  Files f = { 0 };
  make_tasks (d, "", TRUE, &f);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[]
      = { tb_datc (),       "run", "--dir",          dir,   "--local-slots",      "4",
          "--local-agents", "2",   "--heartbeat-ms", "200", "--agent-timeout-ms", "3000",
          f.tasks,          NULL };
  gint64 start = g_get_monotonic_time ();
  g_autoptr (TbProc) first = tb_spawn (d, "master", argv);
  g_assert_true (tb_await_file (f.copy_started, 60));
  /* A status reply leaves after a commit: the copy's record is durable. */
  g_autoptr (JsonObject) st = tb_status (dir);
  g_assert_nonnull (st);
  g_assert_true (tb_proc_signal (first, SIGKILL));
  tb_wait (first, 30);

  g_autoptr (TbProc) second = tb_spawn (d, "master", argv);
  g_autofree gchar *unused = tb_write (d, "gate", "");
  int status = tb_wait (second, 120);
  double secs = (g_get_monotonic_time () - start) / 1e6;
  if (status != 0)
    {
      g_autofree gchar *err = tb_proc_stderr (second);
      g_printerr ("%s", err);
    }
  g_assert_cmpint (status, ==, 0);
  g_test_message ("killed and resumed: %.2f s", secs);
  check_results (dir, 2);
  g_assert_cmpfloat (secs, <, 9.0);
  g_assert_true (tb_pid_gone (slow_pid (&f)));
  g_autoptr (GArray) left = tb_find_agents (dir);
  g_assert_cmpuint (left->len, ==, 0);
  files_clear (&f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/replicate/a-straggler-is-copied-and-the-copy-wins", test_straggler_is_copied);
  g_test_add_func ("/replicate/no-copy-with-max-replicas-1", test_no_copy_with_max_replicas_1);
  g_test_add_func ("/replicate/no-copy-of-a-task-marked-replicate-false",
                   test_no_copy_of_a_task_not_to_replicate);
  g_test_add_func ("/replicate/a-master-killed-while-a-copy-runs-resumes-each-task-once",
                   test_resume_while_a_copy_runs);
  return g_test_run ();
}
