/* test-oomevidence.c: the OOM killer's evidence.  The parsers on text
 * recorded from real kernels; the runner on a made-up cgroup tree whose
 * counter the task itself raises (so any user can run it); and, as root
 * where a memory cgroup can be made, a real OOM kill: this test moves
 * itself into a cgroup limited to 48 MiB and runs a task that allocates
 * more. */
#include "oomevidence.h"
#include "runner.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "datc-limits.h"

#define WAIT_MS 30000

/* Recorded: a Debian 12 VM with cgroup v1 beside an empty v2 tree. */
static const char proc_cgroup_hybrid[]
    = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/71440fa2\n3:cpuset:/\n0::/\n";
/* Recorded: systemd on cgroup v2 alone, inside a Slurm job. */
static const char proc_cgroup_v2[]
    = "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n";
static const char memory_events[] = "low 0\nhigh 0\nmax 17\noom 2\noom_kill 2\noom_group_kill 0\n";
static const char oom_control[] = "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n";
static const char oom_control_before_4_13[] = "oom_kill_disable 0\nunder_oom 0\n";
/* Recorded from /dev/kmsg after a task went over its cgroup's limit. */
static const char kmsg_record[]
    = "3,1742,31713519118,-;Memory cgroup out of memory: Killed process 10977 (dd) "
      "total-vm:310176kB, anon-rss:32512kB, file-rss:1632kB, shmem-rss:0kB, UID:0 "
      "pgtables:112kB oom_score_adj:0\n";
static const char kmsg_global[]
    = "3,90,5000000,-;Out of memory: Killed process 4242 (python3) total-vm:8000000kB\n";
static const char kmsg_other[] = "6,1637,13370910731,-;p1: entered promiscuous mode\n";

static void
test_parse_proc_cgroup (void)
{
  g_autofree gchar *v2 = NULL, *v1 = NULL;
  datc_oom_parse_proc_cgroup (proc_cgroup_hybrid, &v2, &v1);
  g_assert_cmpstr (v2, ==, "/");
  g_assert_cmpstr (v1, ==, "/process_api/71440fa2");

  g_autofree gchar *v2b = NULL, *v1b = NULL;
  datc_oom_parse_proc_cgroup (proc_cgroup_v2, &v2b, &v1b);
  g_assert_cmpstr (v2b, ==, "/system.slice/slurmstepd.scope/job_42/step_0/user/task_0");
  g_assert_null (v1b);

  g_autofree gchar *v2c = NULL, *v1c = NULL;
  datc_oom_parse_proc_cgroup ("garbage\n7:memory\n::\n", &v2c, &v1c);
  g_assert_null (v2c);
  g_assert_null (v1c);
}

static void
test_parse_counter (void)
{
  g_assert_cmpint (datc_oom_parse_counter (memory_events), ==, 2);
  g_assert_cmpint (datc_oom_parse_counter (oom_control), ==, 1);
  g_assert_cmpint (datc_oom_parse_counter (oom_control_before_4_13), ==, -1);
  g_assert_cmpint (datc_oom_parse_counter ("oom_kill x\n"), ==, -1);
  g_assert_cmpint (datc_oom_parse_counter (""), ==, -1);
}

static void
test_parse_kmsg (void)
{
  guint64 usec = 0;
  const char *message = NULL;
  g_assert_true (datc_oom_parse_kmsg (kmsg_record, 10977, &usec, &message));
  g_assert_cmpuint (usec, ==, 31713519118u);
  g_assert_true (g_str_has_prefix (message, "Memory cgroup out of memory: Killed process 10977"));
  g_assert_true (datc_oom_parse_kmsg (kmsg_global, 4242, &usec, &message));
  g_assert_cmpuint (usec, ==, 5000000u);
  /* another pid, a pid that only starts the same, another line */
  g_assert_false (datc_oom_parse_kmsg (kmsg_record, 1097, &usec, &message));
  g_assert_false (datc_oom_parse_kmsg (kmsg_global, 42, &usec, &message));
  g_assert_false (datc_oom_parse_kmsg (kmsg_other, 1637, &usec, &message));
  g_assert_false (datc_oom_parse_kmsg ("no header at all", 1, &usec, &message));
}

/* A made-up node: DIR/proc-cgroup and DIR/root/<its cgroup>/<file>. */
static gchar *
make_tree (const char *dir, const char *proc_cgroup, const char *cgroup_dir, const char *file,
           const char *counter_text)
{
  g_autofree gchar *proc = g_build_filename (dir, "proc-cgroup", NULL);
  g_assert_true (g_file_set_contents (proc, proc_cgroup, -1, NULL));
  g_autofree gchar *cg = g_build_filename (dir, "root", cgroup_dir, NULL);
  g_assert_cmpint (g_mkdir_with_parents (cg, 0700), ==, 0);
  gchar *counter = g_build_filename (cg, file, NULL);
  g_assert_true (g_file_set_contents (counter, counter_text, -1, NULL));
  return counter;
}

static void
remove_tree (const char *path)
{
  g_autoptr (GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;
  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree gchar *child = g_build_filename (path, name, NULL);
      if (g_file_test (child, G_FILE_TEST_IS_DIR) && !g_file_test (child, G_FILE_TEST_IS_SYMLINK))
        remove_tree (child);
      else
        g_unlink (child);
    }
  g_rmdir (path);
}

static void
test_watch_finds_counters (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("datc-oom-XXXXXX", NULL);
  g_autofree gchar *proc = g_build_filename (dir, "proc-cgroup", NULL);
  g_autofree gchar *root = g_build_filename (dir, "root", NULL);

  /* hybrid: the v2 tree has no memory.events, v1's memory tree counts */
  g_autofree gchar *v1 = make_tree (dir, proc_cgroup_hybrid, "memory/process_api/71440fa2",
                                    "memory.oom_control", oom_control);
  g_autoptr (DatcOomWatch) w = datc_oom_watch_new (proc, root, NULL);
  g_assert_cmpstr (datc_oom_watch_counter_path (w), ==, v1);
  g_assert_cmpint (datc_oom_watch_kills (w), ==, 1);

  /* v2 alone */
  g_autofree gchar *v2
      = make_tree (dir, proc_cgroup_v2, "system.slice/slurmstepd.scope/job_42/step_0/user/task_0",
                   "memory.events", memory_events);
  g_autoptr (DatcOomWatch) w2 = datc_oom_watch_new (proc, root, NULL);
  g_assert_cmpstr (datc_oom_watch_counter_path (w2), ==, v2);
  g_assert_cmpint (datc_oom_watch_kills (w2), ==, 2);

  /* a kernel before 4.13 (no oom_kill line), or nothing readable: no counter */
  g_autofree gchar *old = make_tree (dir, proc_cgroup_hybrid, "memory/process_api/71440fa2",
                                     "memory.oom_control", oom_control_before_4_13);
  g_autoptr (DatcOomWatch) w3 = datc_oom_watch_new (proc, root, NULL);
  g_assert_null (datc_oom_watch_counter_path (w3));
  g_assert_cmpint (datc_oom_watch_kills (w3), ==, -1);
  g_autoptr (DatcOomWatch) w4 = datc_oom_watch_new ("/nonexistent/cgroup", root, NULL);
  g_assert_cmpint (datc_oom_watch_kills (w4), ==, -1);
  g_autofree gchar *none = datc_oom_watch_evidence (w4, -1, 1, 0);
  g_assert_null (none);
  remove_tree (dir);
}

static GPtrArray *
run_tasks (DatcRunner *runner, const char *const *lines, guint32 timeout_ms)
{
  GPtrArray *results = g_ptr_array_new_with_free_func ((GDestroyNotify) datc_result_free);
  guint n = g_strv_length ((gchar **) lines);
  for (guint i = 0; i < n; i++)
    {
      g_autoptr (DatcTask) task = g_new0 (DatcTask, 1);
      task->id = i + 1;
      task->attempt = 1;
      task->spec.sh = g_strdup (lines[i]);
      task->spec.timeout_ms = timeout_ms;
      g_autoptr (GError) error = NULL;
      g_assert_true (datc_runner_start (runner, task, &error));
      g_assert_no_error (error);
    }
  gint64 end = g_get_monotonic_time () + WAIT_MS * 1000;
  while (results->len < n)
    {
      gint64 left_ms = (end - g_get_monotonic_time ()) / 1000;
      if (left_ms <= 0)
        g_error ("runner gave %u results, expected %u", results->len, n);
      int timeout = datc_runner_next_timeout_ms (runner);
      if (timeout < 0 || timeout > left_ms)
        timeout = (int) left_ms;
      struct pollfd pfd = { .fd = datc_runner_get_fd (runner), .events = POLLIN };
      if (poll (&pfd, 1, timeout) < 0 && errno != EINTR)
        g_error ("poll: %s", g_strerror (errno));
      datc_runner_dispatch (runner, results);
    }
  return results;
}

static const DatcResult *
result_for (GPtrArray *results, guint64 id)
{
  for (guint i = 0; i < results->len; i++)
    if (((DatcResult *) results->pdata[i])->id == id)
      return results->pdata[i];
  g_assert_not_reached ();
}

/* The runner reads the counter when a task starts and when it dies of
 * SIGKILL: a rise in between is evidence; a SIGKILL without one, another
 * signal, or a kill of our own (the timeout's escalation) gets none. */
static void
test_runner_sigkill_with_a_rise_carries_evidence (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("datc-oom-XXXXXX", NULL);
  g_autofree gchar *proc = g_build_filename (dir, "proc-cgroup", NULL);
  g_autofree gchar *root = g_build_filename (dir, "root", NULL);
  g_autofree gchar *counter
      = make_tree (dir, proc_cgroup_v2, "system.slice/slurmstepd.scope/job_42/step_0/user/task_0",
                   "memory.events", "oom 0\noom_kill 0\n");
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcRunner) runner = datc_runner_new (DATC_OUTPUT_DEFAULT, 100, &error);
  g_assert_no_error (error);
  datc_runner_set_oom_watch (runner, datc_oom_watch_new (proc, root, NULL));

  g_autofree gchar *oom
      = g_strdup_printf ("printf 'oom 1\\noom_kill 1\\n' > %s; kill -9 $$", counter);
  const char *const lines[] = { oom, NULL };
  g_autoptr (GPtrArray) results = run_tasks (runner, lines, 0);
  const DatcResult *r = result_for (results, 1);
  g_assert_cmpint (r->status, ==, DATC_STATUS_SIGNALED);
  g_assert_cmpint (r->signal, ==, SIGKILL);
  g_autofree gchar *want = g_strdup_printf ("oom_kill 0 -> 1 in %s while it ran", counter);
  g_assert_cmpstr (r->oom_evidence, ==, want);

  /* the counter stays at 1 from here: no rise, no evidence */
  const char *const others[] = { "kill -9 $$", "kill -TERM $$", "exit 3", "sleep 30", NULL };
  g_autoptr (GPtrArray) more = run_tasks (runner, others, 300);
  g_assert_cmpint (result_for (more, 1)->status, ==, DATC_STATUS_SIGNALED);
  g_assert_cmpint (result_for (more, 1)->signal, ==, SIGKILL);
  for (guint64 id = 1; id <= 4; id++)
    g_assert_null (result_for (more, id)->oom_evidence);
  g_assert_cmpint (result_for (more, 4)->status, ==, DATC_STATUS_TIMEOUT);
  remove_tree (dir);
}

/* Makes a memory cgroup of `limit` bytes under this process's own (v1 or
 * v2), or NULL with `why` when this machine does not let us. */
static gchar *
make_memory_cgroup (const char *limit, gchar **why)
{
  if (geteuid () != 0)
    return (*why = g_strdup ("not root"), NULL);
  g_autofree gchar *text = NULL;
  if (!g_file_get_contents ("/proc/self/cgroup", &text, NULL, NULL))
    return (*why = g_strdup ("no /proc/self/cgroup"), NULL);
  g_autofree gchar *v2 = NULL, *v1 = NULL;
  datc_oom_parse_proc_cgroup (text, &v2, &v1);
  g_autofree gchar *name = g_strdup_printf ("datc-oom-test-%d", (int) getpid ());
  const char *const tries[][3] = {
    { "/sys/fs/cgroup", v2, "memory.max" },
    { "/sys/fs/cgroup/memory", v1, "memory.limit_in_bytes" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (tries); i++)
    {
      if (tries[i][1] == NULL)
        continue;
      g_autofree gchar *cg = g_build_filename (tries[i][0], tries[i][1], name, NULL);
      if (g_mkdir (cg, 0755) != 0)
        continue;
      /* a cgroup file system makes its files at once; a plain directory
       * (a tmpfs where cgroup v2 would be mounted) has none */
      g_autofree gchar *procs = g_build_filename (cg, "cgroup.procs", NULL);
      if (!g_file_test (procs, G_FILE_TEST_EXISTS))
        {
          g_rmdir (cg);
          continue;
        }
      g_autofree gchar *file = g_build_filename (cg, tries[i][2], NULL);
      if (g_file_set_contents_full (file, limit, -1, G_FILE_SET_CONTENTS_NONE, 0644, NULL))
        return g_steal_pointer (&cg);
      g_rmdir (cg);
    }
  return (*why = g_strdup ("no memory cgroup can be made here"), NULL);
}

static gboolean
move_self (const char *cgroup)
{
  g_autofree gchar *procs = g_build_filename (cgroup, "cgroup.procs", NULL);
  g_autofree gchar *pid = g_strdup_printf ("%d\n", (int) getpid ());
  return g_file_set_contents_full (procs, pid, -1, G_FILE_SET_CONTENTS_NONE, 0644, NULL);
}

static void
test_real_oom_kill (void)
{
  g_autofree gchar *why = NULL;
  g_autofree gchar *cg = make_memory_cgroup ("48M", &why);
  if (cg == NULL)
    {
      g_test_skip (why);
      return;
    }
  g_autofree gchar *parent = g_path_get_dirname (cg);
  g_assert_true (move_self (cg));

  g_autoptr (GError) error = NULL;
  g_autoptr (DatcRunner) runner = datc_runner_new (DATC_OUTPUT_DEFAULT, 100, &error);
  g_assert_no_error (error);
  /* dd's one block of 256 MiB is written to: far over the limit, no swap
   * counted (v1 memory.limit_in_bytes; v2 memory.max) */
  const char *const lines[] = { "exec dd if=/dev/zero of=/dev/null bs=256M count=1", NULL };
  g_autoptr (GPtrArray) results = run_tasks (runner, lines, 0);
  const DatcResult *r = result_for (results, 1);

  /* back out before any assertion, so the cgroup can go */
  g_assert_true (move_self (parent));
  g_rmdir (cg);

  g_assert_cmpint (r->status, ==, DATC_STATUS_SIGNALED);
  g_assert_cmpint (r->signal, ==, SIGKILL);
  g_assert_nonnull (r->oom_evidence);
  g_test_message ("evidence: %s", r->oom_evidence);
  g_assert_nonnull (strstr (r->oom_evidence, cg));
  g_assert_nonnull (strstr (r->oom_evidence, "while it ran"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/oom/parse/proc-cgroup-v1-v2-and-garbage", test_parse_proc_cgroup);
  g_test_add_func ("/oom/parse/oom-kill-counter", test_parse_counter);
  g_test_add_func ("/oom/parse/kmsg-line-naming-the-pid", test_parse_kmsg);
  g_test_add_func ("/oom/watch/finds-v2-or-v1-counter-or-none", test_watch_finds_counters);
  g_test_add_func ("/oom/runner/sigkill-with-a-counter-rise-carries-evidence",
                   test_runner_sigkill_with_a_rise_carries_evidence);
  g_test_add_func ("/oom/runner/real-oom-kill-in-a-memory-cgroup", test_real_oom_kill);
  return g_test_run ();
}
