/* test-runner.c: the runner against real processes.  Each test drives the
 * runner with a small poll() loop, the way the agent's event loop does, and
 * its teardown kills and reaps whatever the test left running.  Checks that
 * nothing of a task survives wait for the condition (bounded), never for a
 * fixed time: a SIGKILLed process takes a moment to die. */
#include "runner.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "command.h"
#include "datc-limits.h"

#define GRACE_MS 200
#define WAIT_MS 30000

/* DATC_TEST_SLOT_THREADS=1 (meson test worker-agent/runner-slot-threads):
 * every test again with the runner's slot threads, as the agent runs it
 * (runner.c, "slot threads"), the lease never lapsing. */
#define TEST_SLOTS 64

static gboolean
slot_threads (void)
{
  return g_strcmp0 (g_getenv ("DATC_TEST_SLOT_THREADS"), "1") == 0;
}

static DatcRunner *
test_runner_new (gsize output_limit, guint kill_grace_ms, GError **error)
{
  DatcRunner *runner = datc_runner_new (output_limit, kill_grace_ms, error);
  if (runner == NULL || !slot_threads ())
    return runner;
  if (!datc_runner_use_slot_threads (runner, TEST_SLOTS, TEST_SLOTS * DATC_RUNNER_STAGE_DEPTH, 0,
                                     error))
    {
      datc_runner_free (runner);
      return NULL;
    }
  datc_runner_set_start_until (runner, G_MAXINT64);
  return runner;
}

typedef struct {
  DatcRunner *runner;
  GPtrArray *results; /* DatcResult*, owned */
  gchar *tmpdir;
} Fixture;

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  f->runner = test_runner_new (DATC_OUTPUT_DEFAULT, GRACE_MS, &error);
  g_assert_no_error (error);
  f->results = g_ptr_array_new_with_free_func ((GDestroyNotify) datc_result_free);
  f->tmpdir = g_dir_make_tmp ("datc-runner-XXXXXX", &error);
  g_assert_no_error (error);
}

/* Drives the runner until it has produced `want` results in all. */
static void
run_until_results (Fixture *f, guint want)
{
  gint64 end = g_get_monotonic_time () + WAIT_MS * 1000;
  while (f->results->len < want)
    {
      gint64 left_ms = (end - g_get_monotonic_time ()) / 1000;
      if (left_ms <= 0)
        g_error ("runner gave %u results, expected %u", f->results->len, want);
      int timeout = datc_runner_next_timeout_ms (f->runner);
      if (timeout < 0 || timeout > left_ms)
        timeout = (int) left_ms;
      struct pollfd pfd = { .fd = datc_runner_get_fd (f->runner), .events = POLLIN };
      if (poll (&pfd, 1, timeout) < 0 && errno != EINTR)
        g_error ("poll: %s", g_strerror (errno));
      datc_runner_dispatch (f->runner, f->results);
    }
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
fixture_teardown (Fixture *f, gconstpointer data)
{
  datc_runner_cancel_all (f->runner, DATC_STATUS_DRAINED);
  run_until_results (f, f->results->len + datc_runner_running (f->runner));
  g_clear_pointer (&f->runner, datc_runner_free);
  g_clear_pointer (&f->results, g_ptr_array_unref);
  remove_tree (f->tmpdir);
  g_clear_pointer (&f->tmpdir, g_free);
}

static DatcTask *
task_new (guint64 id, const char *line)
{
  DatcTask *task = g_new0 (DatcTask, 1);
  task->id = id;
  task->attempt = 1;
  task->spec.sh = g_strdup (line);
  return task;
}

static void
start (Fixture *f, const DatcTask *task)
{
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_runner_start (f->runner, task, &error));
  g_assert_no_error (error);
  /* With slot threads a task starts a moment later, on its thread: the
   * tests then go on as after a start on the caller's thread. */
  gint64 end = g_get_monotonic_time () + WAIT_MS * 1000;
  while (datc_runner_waiting (f->runner) > 0)
    {
      if (g_get_monotonic_time () > end)
        g_error ("task %" G_GUINT64_FORMAT " did not start", task->id);
      g_usleep (200);
    }
}

/* Runs one line to its end and returns its result (owned by the fixture). */
static DatcResult *
run_line (Fixture *f, const char *line)
{
  g_autoptr (DatcTask) task = task_new (f->results->len + 1, line);
  start (f, task);
  run_until_results (f, f->results->len + 1);
  return g_ptr_array_index (f->results, f->results->len - 1);
}

static DatcResult *
result_for (Fixture *f, guint64 id)
{
  for (guint i = 0; i < f->results->len; i++)
    {
      DatcResult *r = g_ptr_array_index (f->results, i);
      if (r->id == id)
        return r;
    }
  g_error ("no result for task %" G_GUINT64_FORMAT, id);
}

static void
assert_bytes (GBytes *bytes, const char *want)
{
  gsize len;
  const char *data = g_bytes_get_data (bytes, &len);
  if (len != strlen (want) || (len > 0 && memcmp (data, want, len) != 0))
    {
      g_autofree gchar *raw = g_strndup (data, MIN (len, 200));
      g_autofree gchar *got = g_strescape (raw, NULL);
      g_test_message ("got \"%s\" (%" G_GSIZE_FORMAT " bytes)", got, len);
    }
  g_assert_cmpmem (data, len, want, strlen (want));
}

static gchar *
bytes_str (GBytes *bytes)
{
  gsize len;
  const char *data = g_bytes_get_data (bytes, &len);
  return g_strndup (data, len);
}

/* --- processes left behind --------------------------------------------- */

/* Reads state and pgid from /proc/PID/stat; FALSE if the process is gone. */
static gboolean
proc_stat (pid_t pid, char *state, pid_t *pgid)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/stat", (int) pid);
  g_autofree gchar *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return FALSE;
  const char *p = strrchr (text, ')'); /* comm may hold spaces and parens */
  int group = 0;
  if (p == NULL || sscanf (p + 1, " %c %*d %d", state, &group) != 2)
    return FALSE;
  *pgid = group;
  return TRUE;
}

/* A zombie has run its course: only its parent's bookkeeping is left. */
static gboolean
process_alive (pid_t pid)
{
  char state;
  pid_t pgid;
  return proc_stat (pid, &state, &pgid) && state != 'Z' && state != 'X';
}

static gboolean
group_alive (pid_t pgid)
{
  g_autoptr (GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *name;
  while (proc != NULL && (name = g_dir_read_name (proc)) != NULL)
    {
      char state;
      pid_t group;
      if (g_ascii_isdigit (name[0]) && proc_stat (atoi (name), &state, &group) && group == pgid
          && state != 'Z' && state != 'X')
        return TRUE;
    }
  return FALSE;
}

/* Waits (bounded) until no pid listed in `pids_text` (one per line) is
 * alive and the group of the first one is empty. */
static void
assert_all_gone (const char *pids_text)
{
  g_auto (GStrv) lines = g_strsplit (pids_text, "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), >=, 2);
  pid_t pgid = atoi (lines[0]);
  g_assert_cmpint (pgid, >, 1);

  gint64 end = g_get_monotonic_time () + WAIT_MS * 1000;
  for (;;)
    {
      gboolean any = group_alive (pgid);
      for (gchar **l = lines; !any && *l != NULL; l++)
        any = **l != '\0' && process_alive (atoi (*l));
      if (!any)
        return;
      if (g_get_monotonic_time () > end)
        g_error ("processes of group %d are still alive", (int) pgid);
      g_usleep (10 * 1000); /* polling a condition, not waiting a time */
    }
}

/* Waits (bounded) until `path` exists and holds `lines` complete lines;
 * returns its text. */
static gchar *
await_file_lines (const char *path, guint lines)
{
  gint64 end = g_get_monotonic_time () + WAIT_MS * 1000;
  for (;;)
    {
      g_autofree gchar *text = NULL;
      if (g_file_get_contents (path, &text, NULL, NULL))
        {
          guint n = 0;
          for (const char *p = text; *p != '\0'; p++)
            n += *p == '\n';
          if (n >= lines)
            return g_steal_pointer (&text);
        }
      if (g_get_monotonic_time () > end)
        g_error ("%s did not get %u lines", path, lines);
      g_usleep (5 * 1000); /* polling a condition, not waiting a time */
    }
}

/* --- exit --------------------------------------------------------------- */

static void
test_exit_reports_exit_code (Fixture *f, gconstpointer data)
{
  DatcResult *r = run_line (f, "exit 3");
  g_assert_cmpint (r->status, ==, DATC_STATUS_EXITED);
  g_assert_cmpint (r->exit_code, ==, 3);
  g_assert_cmpint (r->signal, ==, 0);
  g_assert_cmpint (r->started_us, >, 0);
  g_assert_cmpint (r->finished_us, >=, r->started_us);
  g_assert_null (r->message);

  r = run_line (f, "false");
  g_assert_cmpint (r->status, ==, DATC_STATUS_EXITED);
  g_assert_cmpint (r->exit_code, ==, 1);

  r = run_line (f, "true");
  g_assert_cmpint (r->status, ==, DATC_STATUS_EXITED);
  g_assert_cmpint (r->exit_code, ==, 0);
}

static void
test_exit_reports_signal (Fixture *f, gconstpointer data)
{
  DatcResult *r = run_line (f, "kill -KILL $$");
  g_assert_cmpint (r->status, ==, DATC_STATUS_SIGNALED);
  g_assert_cmpint (r->signal, ==, SIGKILL);
  g_assert_cmpint (r->exit_code, ==, 128 + SIGKILL);
}

static void
test_exit_kills_background_children_left_behind (Fixture *f, gconstpointer data)
{
  /* The background sleep also holds stdout open: the result must not wait
   * for its EOF. */
  DatcResult *r = run_line (f, "echo $$; sleep 300 & echo $!");
  g_assert_cmpint (r->status, ==, DATC_STATUS_EXITED);
  g_assert_cmpint (r->exit_code, ==, 0);
  g_autofree gchar *pids = bytes_str (r->out);
  assert_all_gone (pids);
}

/* --- output ------------------------------------------------------------- */

static void
test_output_captures_stdout_and_stderr_separately (Fixture *f, gconstpointer data)
{
  DatcResult *r = run_line (f, "printf 'to out\\n'; printf 'to err' >&2; printf more");
  g_assert_cmpint (r->status, ==, DATC_STATUS_EXITED);
  assert_bytes (r->out, "to out\nmore");
  assert_bytes (r->err, "to err");
  g_assert_cmpuint (r->out_dropped, ==, 0);
  g_assert_cmpuint (r->err_dropped, ==, 0);

  r = run_line (f, "true");
  g_assert_nonnull (r->out);
  g_assert_cmpuint (g_bytes_get_size (r->out), ==, 0);
  g_assert_cmpuint (g_bytes_get_size (r->err), ==, 0);
}

/* A grandchild that leaves the group (setsid) keeps the pipe's write end
 * open after the leader exits: the task still ends with the leader and
 * keeps what was written, it does not wait for the escapee's EOF. */
static void
test_output_escaped_writer_does_not_hold_the_task (Fixture *f, gconstpointer data)
{
  /* The escapee says its pid once it has left the group, and only then
   * does the leader exit (else the group kill could catch it first).  It
   * then waits on a FIFO only this process writes to: whatever happens
   * to the test, it ends with it. */
  g_autofree gchar *fifo = g_build_filename (f->tmpdir, "escaped", NULL);
  g_autofree gchar *hold_path = g_build_filename (f->tmpdir, "hold", NULL);
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  g_assert_cmpint (mkfifo (hold_path, 0600), ==, 0);
  int hold = open (hold_path, O_RDWR | O_CLOEXEC);
  g_assert_cmpint (hold, >=, 0);
  g_autofree gchar *line
      = g_strdup_printf ("setsid sh -c 'echo $$ > %s; exec cat < %s' & read pid < %s; echo $pid",
                         fifo, hold_path, fifo);
  DatcResult *r = run_line (f, line);
  g_autofree gchar *out = bytes_str (r->out);
  pid_t escapee = (pid_t) g_ascii_strtoll (out, NULL, 10);
  gboolean was_alive = escapee > 1 && process_alive (escapee);
  if (escapee > 1)
    kill (escapee, SIGKILL);
  close (hold);
  g_assert_true (was_alive);
  g_assert_cmpint (r->status, ==, DATC_STATUS_EXITED);
  g_assert_cmpint (r->exit_code, ==, 0);
  g_autofree gchar *pids = g_strdup_printf ("%d\n", (int) escapee);
  assert_all_gone (pids);
}

static void
test_output_keeps_large_output_under_the_limit_whole (Fixture *f, gconstpointer data)
{
  DatcResult *r = run_line (f, "head -c 1048576 /dev/urandom");
  g_assert_cmpint (r->status, ==, DATC_STATUS_EXITED);
  g_assert_cmpuint (g_bytes_get_size (r->out), ==, 1048576);
  g_assert_cmpuint (r->out_dropped, ==, 0);
}

static void
test_output_truncates_over_the_limit_with_marker (Fixture *f, gconstpointer data)
{
  DatcResult *r = run_line (f, "head -c 3145728 /dev/zero; head -c 1048577 /dev/zero >&2");
  g_assert_cmpint (r->status, ==, DATC_STATUS_EXITED);
  g_assert_cmpuint (r->out_dropped, ==, 2097152);
  g_assert_cmpuint (r->err_dropped, ==, 1);

  const char out_marker[] = "\n[datc: 2097152 bytes of stdout dropped]\n";
  gsize len;
  const guint8 *out = g_bytes_get_data (r->out, &len);
  g_assert_cmpuint (len, ==, DATC_OUTPUT_DEFAULT + strlen (out_marker));
  for (gsize i = 0; i < DATC_OUTPUT_DEFAULT; i++)
    if (out[i] != 0)
      g_error ("byte %" G_GSIZE_FORMAT " of kept stdout is %u", i, out[i]);
  g_assert_cmpmem (out + DATC_OUTPUT_DEFAULT, len - DATC_OUTPUT_DEFAULT, out_marker,
                   strlen (out_marker));

  const char err_marker[] = "\n[datc: 1 bytes of stderr dropped]\n";
  const guint8 *err = g_bytes_get_data (r->err, &len);
  g_assert_cmpuint (len, ==, DATC_OUTPUT_DEFAULT + strlen (err_marker));
  g_assert_cmpmem (err + DATC_OUTPUT_DEFAULT, len - DATC_OUTPUT_DEFAULT, err_marker,
                   strlen (err_marker));
}

static void
test_output_with_maximum_limit_stays_within_wire_maximum (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  datc_runner_free (f->runner);
  f->runner = test_runner_new (DATC_OUTPUT_MAX, GRACE_MS, &error);
  g_assert_no_error (error);

  DatcResult *r = run_line (f, "head -c 4194304 /dev/zero");
  g_assert_cmpuint (g_bytes_get_size (r->out), ==, DATC_OUTPUT_MAX);
  g_autofree gchar *marker = g_strdup_printf (
      "\n[datc: %" G_GUINT64_FORMAT " bytes of stdout dropped]\n", r->out_dropped);
  gsize kept = DATC_OUTPUT_MAX - strlen (marker);
  g_assert_cmpuint (kept + r->out_dropped, ==, 4194304);
  gsize len;
  const char *out = g_bytes_get_data (r->out, &len);
  g_assert_cmpmem (out + kept, len - kept, marker, strlen (marker));
}

static void
test_output_limit_over_maximum_is_refused (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcRunner) runner = test_runner_new (DATC_OUTPUT_MAX + 1, 0, &error);
  g_assert_null (runner);
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL);
}

/* --- open files ------------------------------------------------------- */

#define FD_TASKS 40
#define FD_RESERVED 16

/* Under a soft limit of 64 open files, 40 tasks (5 fds each) still start
 * side by side once the runner has reserved them, and a task sees the soft
 * limit the process had. */
static void
test_fds_reserve_raises_soft_limit_for_tasks_only (void)
{
  if (g_test_subprocess ())
    {
      struct rlimit lim;
      g_assert_cmpint (getrlimit (RLIMIT_NOFILE, &lim), ==, 0);
      if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < 1024)
        g_error ("hard RLIMIT_NOFILE %lu is below this test's needs", (unsigned long) lim.rlim_max);
      lim.rlim_cur = 64;
      g_assert_cmpint (setrlimit (RLIMIT_NOFILE, &lim), ==, 0);

      Fixture fx, *f = &fx;
      fixture_setup (f, NULL);
      g_assert_cmpuint (datc_runner_reserve_fds (f->runner, FD_TASKS, FD_RESERVED), ==, FD_TASKS);
      g_assert_cmpint (getrlimit (RLIMIT_NOFILE, &lim), ==, 0);
      g_assert_cmpuint (lim.rlim_cur, >=, FD_TASKS * DATC_RUNNER_FDS_PER_TASK + FD_RESERVED);
      /* The tasks wait on a FIFO only this process writes to: they end
       * when it does, however it ends. */
      g_autofree gchar *hold_path = g_build_filename (f->tmpdir, "hold", NULL);
      g_assert_cmpint (mkfifo (hold_path, 0600), ==, 0);
      int hold = open (hold_path, O_RDWR | O_CLOEXEC);
      g_assert_cmpint (hold, >=, 0);
      g_autofree gchar *wait_line = g_strdup_printf ("cat %s", hold_path);
      for (guint i = 1; i < FD_TASKS; i++)
        {
          g_autoptr (DatcTask) task = task_new (1000 + i, wait_line);
          start (f, task);
        }
      g_assert_cmpuint (datc_runner_running (f->runner), ==, FD_TASKS - 1);
      DatcResult *r = run_line (f, "sh -c 'ulimit -Sn'");
      g_assert_cmpint (r->status, ==, DATC_STATUS_EXITED);
      assert_bytes (r->out, "64\n");
      fixture_teardown (f, NULL);
      return;
    }
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
}

/* Under a hard limit too low for every slot, it says how many tasks fit. */
static void
test_fds_reserve_reports_what_fits_under_hard_limit (void)
{
  if (g_test_subprocess ())
    {
      struct rlimit lim = { .rlim_cur = 100, .rlim_max = 100 };
      g_assert_cmpint (setrlimit (RLIMIT_NOFILE, &lim), ==, 0);
      g_autoptr (GError) error = NULL;
      g_autoptr (DatcRunner) runner = test_runner_new (DATC_OUTPUT_DEFAULT, GRACE_MS, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (datc_runner_reserve_fds (runner, FD_TASKS, FD_RESERVED), ==,
                        (100 - FD_RESERVED) / DATC_RUNNER_FDS_PER_TASK);
      g_assert_cmpuint (datc_runner_reserve_fds (runner, 2, FD_RESERVED), ==, 2);
      return;
    }
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
}

/* --- what the child gets ------------------------------------------------ */

static void
test_spawn_stdin_is_dev_null (Fixture *f, gconstpointer data)
{
  /* `cat` would hang if stdin were anything else. */
  DatcResult *r = run_line (f, "cat");
  g_assert_cmpint (r->status, ==, DATC_STATUS_EXITED);
  g_assert_cmpint (r->exit_code, ==, 0);
  assert_bytes (r->out, "");

  r = run_line (f, "readlink /proc/self/fd/0");
  assert_bytes (r->out, "/dev/null\n");
}

static void
test_spawn_child_inherits_only_stdio (Fixture *f, gconstpointer data)
{
  /* An fd the test leaks on purpose (no O_CLOEXEC). */
  int leaked = open ("/dev/null", O_RDONLY);
  g_assert_cmpint (leaked, >=, 3);
  DatcResult *r = run_line (f, "ls /proc/self/fd");
  close (leaked);
  /* 3 is the directory ls itself reads */
  assert_bytes (r->out, "0\n1\n2\n3\n");
}

static void
test_spawn_child_has_default_signals (Fixture *f, gconstpointer data)
{
  /* Like the agent: signals blocked for a signalfd, SIGPIPE ignored (after
   * the runner was made: it is among the signals commonly ignored); and an
   * uncommon signal ignored before the runner was made, which it notes. */
  sigset_t block, old;
  sigemptyset (&block);
  sigaddset (&block, SIGTERM);
  sigaddset (&block, SIGCHLD);
  sigprocmask (SIG_BLOCK, &block, &old);
  struct sigaction ign = { .sa_handler = SIG_IGN }, old_pipe, old_prof;
  sigaction (SIGPROF, &ign, &old_prof);
  g_autoptr (GError) error = NULL;
  datc_runner_free (f->runner);
  f->runner = test_runner_new (DATC_OUTPUT_DEFAULT, GRACE_MS, &error);
  g_assert_no_error (error);
  sigaction (SIGPIPE, &ign, &old_pipe);

  g_autoptr (DatcTask) task = g_new0 (DatcTask, 1);
  task->id = 1;
  const char *argv[] = { "grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status", NULL };
  task->spec.argv = g_strdupv ((gchar **) argv);
  start (f, task);
  run_until_results (f, 1);

  sigaction (SIGPIPE, &old_pipe, NULL);
  sigaction (SIGPROF, &old_prof, NULL);
  sigprocmask (SIG_SETMASK, &old, NULL);

  DatcResult *r = g_ptr_array_index (f->results, 0);
  g_autofree gchar *out = bytes_str (r->out);
  guint64 blocked = 0, ignored = 0;
  g_assert_cmpint (sscanf (out,
                           "SigBlk:\t%" G_GINT64_MODIFIER "x\nSigIgn:\t%" G_GINT64_MODIFIER "x",
                           &blocked, &ignored),
                   ==, 2);
  g_assert_cmphex (blocked, ==, 0);
  /* glibc's posix_spawn leaves its two internal signals (32, 33: below
   * SIGRTMIN) ignored; the child's libc installs its own handlers. */
  g_assert_cmphex (ignored & ~(G_GUINT64_CONSTANT (3) << 31), ==, 0);
}

static void
test_spawn_runs_in_its_own_process_group (Fixture *f, gconstpointer data)
{
  DatcResult *r = run_line (f, "echo $$ $(cut -d' ' -f5 /proc/$$/stat)");
  g_autofree gchar *out = bytes_str (r->out);
  g_auto (GStrv) words = g_strsplit_set (g_strstrip (out), " ", -1);
  g_assert_cmpuint (g_strv_length (words), ==, 2);
  g_assert_cmpstr (words[0], ==, words[1]);
}

static void
test_spawn_plain_line_runs_without_shell (Fixture *f, gconstpointer data)
{
  /* dash exports PWD even when it was unset: its absence shows that no
   * shell ran between the runner and printenv. */
  gboolean direct = FALSE;
  g_auto (GStrv) argv = datc_command_argv ("printenv PWD", &direct);
  g_assert_true (direct);

  g_autofree gchar *saved = g_strdup (g_getenv ("PWD"));
  g_unsetenv ("PWD");
  DatcResult *r = run_line (f, "printenv PWD");
  if (saved != NULL)
    g_setenv ("PWD", saved, TRUE);
  g_assert_cmpint (r->status, ==, DATC_STATUS_EXITED);
  g_assert_cmpint (r->exit_code, ==, 1);
  assert_bytes (r->out, "");
}

static void
test_spawn_argv_is_passed_as_is (Fixture *f, gconstpointer data)
{
  g_autoptr (DatcTask) task = g_new0 (DatcTask, 1);
  task->id = 1;
  const char *argv[] = { "printf", "%s|%s", "a b", "$c", NULL };
  task->spec.argv = g_strdupv ((gchar **) argv);
  start (f, task);
  run_until_results (f, 1);
  DatcResult *r = g_ptr_array_index (f->results, 0);
  assert_bytes (r->out, "a b|$c");
}

static void
test_env_adds_task_entries (Fixture *f, gconstpointer data)
{
  g_setenv ("DATC_TEST_INHERITED", "from-agent", TRUE);
  g_setenv ("DATC_TEST_OVERRIDDEN", "from-agent", TRUE);
  g_autoptr (DatcTask) task = task_new (1, "printenv DATC_TEST_INHERITED "
                                           "DATC_TEST_OVERRIDDEN DATC_TEST_ADDED");
  const char *env[] = { "DATC_TEST_OVERRIDDEN=from-task", "DATC_TEST_ADDED=a=b", NULL };
  task->spec.env = g_strdupv ((gchar **) env);
  start (f, task);
  run_until_results (f, 1);
  g_unsetenv ("DATC_TEST_INHERITED");
  g_unsetenv ("DATC_TEST_OVERRIDDEN");

  DatcResult *r = g_ptr_array_index (f->results, 0);
  assert_bytes (r->out, "from-agent\nfrom-task\na=b\n");
}

static void
test_env_task_path_is_searched (Fixture *f, gconstpointer data)
{
  g_autofree gchar *script = g_build_filename (f->tmpdir, "datc-hello", NULL);
  g_assert_true (g_file_set_contents (script, "#!/bin/sh\necho hello from $0\n", -1, NULL));
  g_chmod (script, 0755);

  g_autoptr (DatcTask) task = task_new (1, "datc-hello");
  g_autofree gchar *path = g_strdup_printf ("PATH=/nonexistent:%s:/usr/bin:/bin", f->tmpdir);
  task->spec.env = g_new0 (gchar *, 2);
  task->spec.env[0] = g_strdup (path);
  start (f, task);
  run_until_results (f, 1);

  DatcResult *r = g_ptr_array_index (f->results, 0);
  g_assert_cmpint (r->status, ==, DATC_STATUS_EXITED);
  g_autofree gchar *want = g_strdup_printf ("hello from %s\n", script);
  assert_bytes (r->out, want);
}

static void
test_env_bad_entry_is_spawn_failed (Fixture *f, gconstpointer data)
{
  g_autoptr (DatcTask) task = task_new (1, "true");
  task->spec.env = g_new0 (gchar *, 2);
  task->spec.env[0] = g_strdup ("NO_EQUALS_SIGN");
  start (f, task);
  run_until_results (f, 1);
  DatcResult *r = g_ptr_array_index (f->results, 0);
  g_assert_cmpint (r->status, ==, DATC_STATUS_SPAWN_FAILED);
  g_assert_nonnull (strstr (r->message, "NO_EQUALS_SIGN"));
}

static void
test_cwd_is_applied (Fixture *f, gconstpointer data)
{
  g_autoptr (DatcTask) task = task_new (1, "pwd");
  task->spec.cwd = g_strdup (f->tmpdir);
  start (f, task);
  run_until_results (f, 1);
  DatcResult *r = g_ptr_array_index (f->results, 0);
  g_autofree gchar *real = realpath (f->tmpdir, NULL);
  g_autofree gchar *want = g_strdup_printf ("%s\n", real);
  assert_bytes (r->out, want);
}

static void
test_cwd_bad_dir_is_spawn_failed (Fixture *f, gconstpointer data)
{
  g_autoptr (DatcTask) task = task_new (1, "true");
  task->spec.cwd = g_build_filename (f->tmpdir, "no-such-dir", NULL);
  start (f, task);
  run_until_results (f, 1);
  DatcResult *r = g_ptr_array_index (f->results, 0);
  g_assert_cmpint (r->status, ==, DATC_STATUS_SPAWN_FAILED);
  g_assert_nonnull (r->message);
  g_assert_nonnull (strstr (r->message, task->spec.cwd));
}

/* --- spawn failures ----------------------------------------------------- */

static void
test_spawn_missing_program_is_127 (Fixture *f, gconstpointer data)
{
  DatcResult *r = run_line (f, "datc-no-such-program --flag");
  g_assert_cmpint (r->status, ==, DATC_STATUS_SPAWN_FAILED);
  g_assert_cmpint (r->exit_code, ==, 127);
  g_assert_cmpstr (r->message, ==, "datc-no-such-program: command not found");
  g_assert_nonnull (r->out);
  g_assert_nonnull (r->err);
}

static void
test_spawn_not_executable_is_126 (Fixture *f, gconstpointer data)
{
  g_autofree gchar *file = g_build_filename (f->tmpdir, "not-executable", NULL);
  g_assert_true (g_file_set_contents (file, "#!/bin/sh\n", -1, NULL));
  g_chmod (file, 0644);
  DatcResult *r = run_line (f, file);
  g_assert_cmpint (r->status, ==, DATC_STATUS_SPAWN_FAILED);
  g_assert_cmpint (r->exit_code, ==, 126);
}

/* The agent's PATH, searched as execvp does: an entry whose file cannot
 * run is passed over for a later one; only if none runs is it EACCES. */
static void
test_spawn_path_search_passes_over_what_cannot_run (Fixture *f, gconstpointer data)
{
  g_autofree gchar *a = g_build_filename (f->tmpdir, "a", NULL);
  g_autofree gchar *b = g_build_filename (f->tmpdir, "b", NULL);
  g_autofree gchar *in_a = g_build_filename (a, "datc-test-prog", NULL);
  g_autofree gchar *in_b = g_build_filename (b, "datc-test-prog", NULL);
  g_assert_cmpint (g_mkdir (a, 0755), ==, 0);
  g_assert_cmpint (g_mkdir (b, 0755), ==, 0);
  g_assert_true (g_file_set_contents (in_a, "#!/bin/sh\necho a\n", -1, NULL));
  g_assert_true (g_file_set_contents (in_b, "#!/bin/sh\necho b\n", -1, NULL));
  g_chmod (in_a, 0644);
  g_chmod (in_b, 0755);
  g_autofree gchar *saved = g_strdup (g_getenv ("PATH"));
  g_autofree gchar *both = g_strdup_printf ("/nonexistent:%s:%s", a, b);

  g_setenv ("PATH", both, TRUE);
  DatcResult *r = run_line (f, "datc-test-prog");
  g_assert_cmpint (r->status, ==, DATC_STATUS_EXITED);
  assert_bytes (r->out, "b\n");

  g_setenv ("PATH", a, TRUE);
  r = run_line (f, "datc-test-prog");
  g_assert_cmpint (r->status, ==, DATC_STATUS_SPAWN_FAILED);
  g_assert_cmpint (r->exit_code, ==, 126);

  g_setenv ("PATH", "/nonexistent", TRUE);
  r = run_line (f, "datc-test-prog");
  g_assert_cmpint (r->status, ==, DATC_STATUS_SPAWN_FAILED);
  g_assert_cmpint (r->exit_code, ==, 127);
  g_setenv ("PATH", saved, TRUE);
}

static void
test_spawn_script_without_shebang_runs_in_shell (Fixture *f, gconstpointer data)
{
  g_autofree gchar *file = g_build_filename (f->tmpdir, "no-shebang", NULL);
  g_assert_true (g_file_set_contents (file, "echo fallback\n", -1, NULL));
  g_chmod (file, 0755);
  DatcResult *r = run_line (f, file);
  g_assert_cmpint (r->status, ==, DATC_STATUS_EXITED);
  assert_bytes (r->out, "fallback\n");
}

static void
test_spawn_failure_wakes_the_poller (Fixture *f, gconstpointer data)
{
  g_autoptr (DatcTask) task = task_new (1, "datc-no-such-program");
  start (f, task);
  struct pollfd pfd = { .fd = datc_runner_get_fd (f->runner), .events = POLLIN };
  /* A slot thread spawns, and fails, a moment later: then it tells. */
  if (!slot_threads ())
    g_assert_cmpint (datc_runner_next_timeout_ms (f->runner), ==, 0);
  g_assert_cmpint (poll (&pfd, 1, slot_threads () ? WAIT_MS : 0), ==, 1);
  datc_runner_dispatch (f->runner, f->results);
  g_assert_cmpuint (f->results->len, ==, 1);
  g_assert_cmpint (datc_runner_next_timeout_ms (f->runner), ==, -1);
  g_assert_cmpint (poll (&pfd, 1, 0), ==, 0);
}

static void
test_spawn_same_key_twice_is_refused (Fixture *f, gconstpointer data)
{
  g_autoptr (DatcTask) task = task_new (7, "sleep 300");
  start (f, task);
  g_autoptr (GError) error = NULL;
  g_assert_false (datc_runner_start (f->runner, task, &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_EXIST);
  g_assert_cmpuint (datc_runner_running (f->runner), ==, 1);
}

/* --- timeouts ----------------------------------------------------------- */

static void
test_timeout_kills_forked_children (Fixture *f, gconstpointer data)
{
  g_autoptr (DatcTask) task = task_new (1, "echo $$; sleep 300 & echo $!; "
                                           "sleep 300 & echo $!; wait");
  task->spec.timeout_ms = 300;
  start (f, task);
  run_until_results (f, 1);
  DatcResult *r = g_ptr_array_index (f->results, 0);
  g_assert_cmpint (r->status, ==, DATC_STATUS_TIMEOUT);
  g_assert_cmpint (r->signal, ==, SIGTERM);
  g_assert_cmpstr (r->message, ==, "timed out after 300 ms");
  g_assert_cmpint (r->finished_us - r->started_us, >=, 300 * 1000);
  g_autofree gchar *pids = bytes_str (r->out);
  assert_all_gone (pids);
}

static void
test_timeout_kills_term_ignoring_children_when_leader_dies (Fixture *f, gconstpointer data)
{
  /* The leader dies of SIGTERM; its child ignores it.  The grace is long,
   * so only the group kill after the leader's death can end the child. */
  g_autoptr (GError) error = NULL;
  datc_runner_free (f->runner);
  f->runner = test_runner_new (DATC_OUTPUT_DEFAULT, 600 * 1000, &error);
  g_assert_no_error (error);

  g_autoptr (DatcTask) task = task_new (1, "echo $$; (trap '' TERM; exec sleep 300) & "
                                           "echo $!; wait");
  task->spec.timeout_ms = 300;
  start (f, task);
  run_until_results (f, 1);
  DatcResult *r = g_ptr_array_index (f->results, 0);
  g_assert_cmpint (r->status, ==, DATC_STATUS_TIMEOUT);
  g_assert_cmpint (r->signal, ==, SIGTERM);
  g_autofree gchar *pids = bytes_str (r->out);
  assert_all_gone (pids);
}

static void
test_timeout_kills_term_ignoring_task_after_grace (Fixture *f, gconstpointer data)
{
  g_autoptr (DatcTask) task = task_new (1, "trap '' TERM; echo $$; "
                                           "while :; do sleep 1; done");
  task->spec.timeout_ms = 500;
  start (f, task);
  run_until_results (f, 1);
  DatcResult *r = g_ptr_array_index (f->results, 0);
  g_assert_cmpint (r->status, ==, DATC_STATUS_TIMEOUT);
  g_assert_cmpint (r->signal, ==, SIGKILL);
  g_assert_cmpint (r->finished_us - r->started_us, >=, (500 + GRACE_MS) * 1000);
  g_autofree gchar *pids = bytes_str (r->out);
  assert_all_gone (pids);
}

/* A leader that leaves its own group (here: into this test's, which it may
 * join, being in the same session) is out of reach of the group's kill:
 * the runner signals the leader itself too (by pidfd, or by pid from a
 * slot thread).  Without that, it would sleep on and exit 0. */
static void
test_timeout_reaches_a_leader_that_left_its_group (Fixture *f, gconstpointer data)
{
  g_autoptr (DatcTask) task
      = task_new (1, "exec perl -e 'setpgrp (0, getpgrp (getppid ())) or die \"setpgrp: $!\"; "
                     "$| = 1; print getpgrp (0), \"\\n\"; sleep 30'");
  task->spec.timeout_ms = 300;
  start (f, task);
  run_until_results (f, 1);
  DatcResult *r = g_ptr_array_index (f->results, 0);
  g_autofree gchar *out = bytes_str (r->out);
  g_assert_cmpuint (r->err != NULL ? g_bytes_get_size (r->err) : 0, ==, 0);
  /* It did leave: its group is this process's. */
  g_assert_cmpint (atoi (out), ==, getpgrp ());
  g_assert_cmpint (r->status, ==, DATC_STATUS_TIMEOUT);
  g_assert_cmpint (r->signal, ==, SIGTERM);
}

static void
test_timeout_next_timeout_follows_deadlines (Fixture *f, gconstpointer data)
{
  g_assert_cmpint (datc_runner_next_timeout_ms (f->runner), ==, -1);

  g_autoptr (DatcTask) untimed = task_new (1, "sleep 300");
  start (f, untimed);
  g_assert_cmpint (datc_runner_next_timeout_ms (f->runner), ==, -1);

  g_autoptr (DatcTask) timed = task_new (2, "sleep 300");
  timed->spec.timeout_ms = 100000;
  start (f, timed);
  int ms = datc_runner_next_timeout_ms (f->runner);
  g_assert_cmpint (ms, >, 90000);
  g_assert_cmpint (ms, <=, 100000);

  g_assert_true (datc_runner_cancel (f->runner, 1, 1, DATC_STATUS_CANCELLED));
  ms = datc_runner_next_timeout_ms (f->runner);
  g_assert_cmpint (ms, >=, 0);
  g_assert_cmpint (ms, <=, GRACE_MS);
}

/* --- cancel ------------------------------------------------------------- */

static void
test_cancel_reports_cancelled (Fixture *f, gconstpointer data)
{
  g_autoptr (DatcTask) task = task_new (1, "sleep 300");
  start (f, task);
  g_assert_true (datc_runner_cancel (f->runner, 1, 1, DATC_STATUS_CANCELLED));
  run_until_results (f, 1);
  DatcResult *r = g_ptr_array_index (f->results, 0);
  g_assert_cmpint (r->status, ==, DATC_STATUS_CANCELLED);
  g_assert_cmpint (r->signal, ==, SIGTERM);
  g_assert_cmpuint (datc_runner_running (f->runner), ==, 0);
}

static void
test_cancel_unknown_task_returns_false (Fixture *f, gconstpointer data)
{
  g_autoptr (DatcTask) task = task_new (1, "sleep 300");
  start (f, task);
  g_assert_false (datc_runner_cancel (f->runner, 2, 1, DATC_STATUS_CANCELLED));
  g_assert_false (datc_runner_cancel (f->runner, 1, 2, DATC_STATUS_CANCELLED));
}

static void
test_cancel_all_reports_drained (Fixture *f, gconstpointer data)
{
  for (guint64 id = 1; id <= 3; id++)
    {
      g_autoptr (DatcTask) task = task_new (id, "sleep 300");
      start (f, task);
    }
  g_autofree gchar *ready = g_build_filename (f->tmpdir, "ready", NULL);
  g_autofree gchar *line = g_strdup_printf ("trap '' TERM; touch %s; sleep 300", ready);
  g_autoptr (DatcTask) stubborn = task_new (4, line);
  start (f, stubborn);
  g_free (await_file_lines (ready, 0));

  datc_runner_cancel_all (f->runner, DATC_STATUS_DRAINED);
  run_until_results (f, 4);
  for (guint i = 0; i < 4; i++)
    {
      DatcResult *r = g_ptr_array_index (f->results, i);
      g_assert_cmpint (r->status, ==, DATC_STATUS_DRAINED);
    }
  g_assert_cmpint (result_for (f, 4)->signal, ==, SIGKILL);
}

static void
test_list_reports_running_keys (Fixture *f, gconstpointer data)
{
  g_autoptr (DatcTask) a = task_new (10, "sleep 300");
  g_autoptr (DatcTask) b = task_new (11, "sleep 300");
  b->attempt = 3;
  start (f, a);
  start (f, b);
  g_assert_cmpuint (datc_runner_running (f->runner), ==, 2);

  g_autoptr (GArray) keys = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  datc_runner_list (f->runner, keys);
  g_assert_cmpuint (keys->len, ==, 2);
  guint seen = 0;
  for (guint i = 0; i < keys->len; i++)
    {
      DatcTaskKey *k = &g_array_index (keys, DatcTaskKey, i);
      if (k->id == 10 && k->attempt == 1)
        seen |= 1;
      if (k->id == 11 && k->attempt == 3)
        seen |= 2;
    }
  g_assert_cmpuint (seen, ==, 3);

  datc_runner_cancel_all (f->runner, DATC_STATUS_CANCELLED);
  run_until_results (f, 2);
  g_array_set_size (keys, 0);
  datc_runner_list (f->runner, keys);
  g_assert_cmpuint (keys->len, ==, 0);
}

/* --- concurrency -------------------------------------------------------- */

static void
test_concurrency_fifty_tasks_complete (Fixture *f, gconstpointer data)
{
  const guint n = 50;
  for (guint64 id = 1; id <= n; id++)
    {
      g_autofree gchar *line
          = g_strdup_printf ("echo task-%" G_GUINT64_FORMAT "; echo e%" G_GUINT64_FORMAT
                             " >&2; exit %" G_GUINT64_FORMAT,
                             id, id, id % 7);
      g_autoptr (DatcTask) task = task_new (id, line);
      start (f, task);
    }
  g_assert_cmpuint (datc_runner_running (f->runner), ==, n);
  run_until_results (f, n);
  for (guint64 id = 1; id <= n; id++)
    {
      DatcResult *r = result_for (f, id);
      g_autofree gchar *out = g_strdup_printf ("task-%" G_GUINT64_FORMAT "\n", id);
      g_autofree gchar *err = g_strdup_printf ("e%" G_GUINT64_FORMAT "\n", id);
      g_assert_cmpint (r->status, ==, DATC_STATUS_EXITED);
      g_assert_cmpint (r->exit_code, ==, (gint) (id % 7));
      assert_bytes (r->out, out);
      assert_bytes (r->err, err);
    }
  g_assert_cmpuint (datc_runner_running (f->runner), ==, 0);
}

static void
test_free_kills_running_tasks (Fixture *f, gconstpointer data)
{
  g_autofree gchar *pidfile = g_build_filename (f->tmpdir, "pids", NULL);
  g_autofree gchar *line
      = g_strdup_printf ("echo $$ > %s; sleep 300 & echo $! >> %s; wait", pidfile, pidfile);
  g_autoptr (DatcTask) task = task_new (1, line);
  start (f, task);

  g_autofree gchar *pids = await_file_lines (pidfile, 2);

  g_clear_pointer (&f->runner, datc_runner_free);
  assert_all_gone (pids);

  g_autoptr (GError) error = NULL;
  f->runner = test_runner_new (DATC_OUTPUT_DEFAULT, GRACE_MS, &error);
  g_assert_no_error (error);
}

/* --- slot threads --------------------------------------------------------
 * These make their own runner with two slot threads, whatever mode the
 * program runs in. */

static void
use_two_slots (Fixture *f, gint64 work_end_us)
{
  g_autoptr (GError) error = NULL;
  g_clear_pointer (&f->runner, datc_runner_free);
  f->runner = datc_runner_new (DATC_OUTPUT_DEFAULT, GRACE_MS, &error);
  g_assert_no_error (error);
  g_assert_true (datc_runner_use_slot_threads (f->runner, 2, 2 * DATC_RUNNER_STAGE_DEPTH,
                                               work_end_us, &error));
  g_assert_no_error (error);
}

/* Starts (hands over) a task that leaves `marker` behind if it ever runs. */
static void
give_marked (Fixture *f, guint64 id, const char *marker)
{
  g_autofree gchar *line = g_strdup_printf ("touch %s", marker);
  g_autoptr (DatcTask) task = task_new (id, line);
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_runner_start (f->runner, task, &error));
  g_assert_no_error (error);
}

/* Nothing starts without a lease; what waits is held, not executing, and
 * starts once the lease is renewed. */
static void
test_slots_ready_tasks_wait_for_the_lease (Fixture *f, gconstpointer data)
{
  use_two_slots (f, 0);
  g_autofree gchar *marker = g_build_filename (f->tmpdir, "ran", NULL);
  give_marked (f, 1, marker);
  g_assert_cmpuint (datc_runner_running (f->runner), ==, 1);
  /* Not a condition to await (it must not happen): a window in which a
   * slot thread that ignored the lease would have run it. */
  struct pollfd pfd = { .fd = datc_runner_get_fd (f->runner), .events = POLLIN };
  g_assert_cmpint (poll (&pfd, 1, 200), ==, 0);
  g_assert_false (g_file_test (marker, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (datc_runner_executing (f->runner), ==, 0);
  g_assert_cmpuint (datc_runner_waiting (f->runner), ==, 1);

  /* A lease that has already lapsed changes nothing either. */
  datc_runner_set_start_until (f->runner, g_get_monotonic_time () - 1);
  g_assert_cmpint (poll (&pfd, 1, 100), ==, 0);
  g_assert_false (g_file_test (marker, G_FILE_TEST_EXISTS));

  datc_runner_set_start_until (f->runner, G_MAXINT64);
  run_until_results (f, 1);
  DatcResult *r = g_ptr_array_index (f->results, 0);
  g_assert_cmpint (r->status, ==, DATC_STATUS_EXITED);
  g_assert_true (g_file_test (marker, G_FILE_TEST_EXISTS));
}

/* A drain gives back what has not started: never run, status drained. */
static void
test_slots_unstage_gives_back_unstarted_tasks (Fixture *f, gconstpointer data)
{
  use_two_slots (f, 0);
  g_autofree gchar *m1 = g_build_filename (f->tmpdir, "ran-1", NULL);
  g_autofree gchar *m2 = g_build_filename (f->tmpdir, "ran-2", NULL);
  give_marked (f, 1, m1);
  give_marked (f, 2, m2);
  datc_runner_unstage (f->runner, DATC_STATUS_DRAINED);
  run_until_results (f, 2);
  for (guint64 id = 1; id <= 2; id++)
    {
      DatcResult *r = result_for (f, id);
      g_assert_cmpint (r->status, ==, DATC_STATUS_DRAINED);
      g_assert_cmpstr (r->message, ==, "stopped before it started");
    }
  g_assert_cmpuint (datc_runner_running (f->runner), ==, 0);
  /* The lease comes back: nothing is left to start. */
  datc_runner_set_start_until (f->runner, G_MAXINT64);
  g_autofree gchar *m3 = g_build_filename (f->tmpdir, "ran-3", NULL);
  give_marked (f, 3, m3);
  run_until_results (f, 3);
  g_assert_true (g_file_test (m3, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (m1, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (m2, G_FILE_TEST_EXISTS));
}

/* A cancel of a task that has not started ends it with the cancel's
 * status, without running it. */
static void
test_slots_cancel_of_a_waiting_task (Fixture *f, gconstpointer data)
{
  use_two_slots (f, 0);
  g_autofree gchar *marker = g_build_filename (f->tmpdir, "ran", NULL);
  give_marked (f, 1, marker);
  g_assert_true (datc_runner_cancel (f->runner, 1, 1, DATC_STATUS_CANCELLED));
  run_until_results (f, 1);
  DatcResult *r = g_ptr_array_index (f->results, 0);
  g_assert_cmpint (r->status, ==, DATC_STATUS_CANCELLED);
  g_assert_cmpint (r->signal, ==, 0);
  datc_runner_set_start_until (f->runner, G_MAXINT64);
  g_autofree gchar *m2 = g_build_filename (f->tmpdir, "ran-2", NULL);
  give_marked (f, 2, m2);
  run_until_results (f, 2);
  g_assert_false (g_file_test (marker, G_FILE_TEST_EXISTS));
}

/* The walltime is asked when a task's turn comes, not when it was handed
 * over: one whose est_runtime no longer fits is refused unrun. */
static void
test_slots_walltime_is_asked_at_the_start (Fixture *f, gconstpointer data)
{
  use_two_slots (f, g_get_real_time () + 60 * G_USEC_PER_SEC);
  g_autofree gchar *marker = g_build_filename (f->tmpdir, "ran", NULL);
  g_autofree gchar *line = g_strdup_printf ("touch %s", marker);
  g_autoptr (DatcTask) fits = task_new (1, line);
  fits->spec.est_runtime_ms = 1000;
  g_autoptr (DatcTask) too_long = task_new (2, line);
  too_long->spec.est_runtime_ms = 3600 * 1000;
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_runner_start (f->runner, fits, &error));
  g_assert_true (datc_runner_start (f->runner, too_long, &error));
  g_assert_no_error (error);
  datc_runner_set_start_until (f->runner, G_MAXINT64);
  run_until_results (f, 2);
  g_assert_cmpint (result_for (f, 1)->status, ==, DATC_STATUS_EXITED);
  DatcResult *r = result_for (f, 2);
  g_assert_cmpint (r->status, ==, DATC_STATUS_REFUSED);
  g_assert_cmpstr (r->message, ==, "expected runtime does not fit the walltime left");
}

/* One queue for all slots: short tasks go by while one slot runs a long
 * task, whichever slot they were handed to. */
static void
test_slots_short_tasks_pass_a_long_one (Fixture *f, gconstpointer data)
{
  use_two_slots (f, 0);
  datc_runner_set_start_until (f->runner, G_MAXINT64);
  g_autoptr (DatcTask) slow = task_new (1, "sleep 300");
  start (f, slow);
  for (guint64 id = 2; id <= 7; id++)
    {
      g_autoptr (DatcTask) quick = task_new (id, "true");
      start (f, quick);
    }
  run_until_results (f, 6);
  for (guint64 id = 2; id <= 7; id++)
    g_assert_cmpint (result_for (f, id)->status, ==, DATC_STATUS_EXITED);
  g_assert_cmpuint (datc_runner_executing (f->runner), ==, 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

#define ADD(path, fn) g_test_add (path, Fixture, NULL, fixture_setup, fn, fixture_teardown)

  ADD ("/runner/exit/reports-exit-code", test_exit_reports_exit_code);
  ADD ("/runner/exit/reports-signal", test_exit_reports_signal);
  ADD ("/runner/exit/kills-background-children-left-behind",
       test_exit_kills_background_children_left_behind);
  ADD ("/runner/output/captures-stdout-and-stderr-separately",
       test_output_captures_stdout_and_stderr_separately);
  ADD ("/runner/output/an-escaped-writer-does-not-hold-the-task",
       test_output_escaped_writer_does_not_hold_the_task);
  ADD ("/runner/output/keeps-large-output-under-the-limit-whole",
       test_output_keeps_large_output_under_the_limit_whole);
  ADD ("/runner/output/truncates-over-the-limit-with-marker",
       test_output_truncates_over_the_limit_with_marker);
  ADD ("/runner/output/with-maximum-limit-stays-within-wire-maximum",
       test_output_with_maximum_limit_stays_within_wire_maximum);
  g_test_add_func ("/runner/output/limit-over-maximum-is-refused",
                   test_output_limit_over_maximum_is_refused);
  g_test_add_func ("/runner/fds/reserve-raises-the-soft-limit-for-tasks-only",
                   test_fds_reserve_raises_soft_limit_for_tasks_only);
  g_test_add_func ("/runner/fds/reserve-reports-what-fits-under-the-hard-limit",
                   test_fds_reserve_reports_what_fits_under_hard_limit);
  ADD ("/runner/spawn/stdin-is-dev-null", test_spawn_stdin_is_dev_null);
  ADD ("/runner/spawn/child-inherits-only-stdio", test_spawn_child_inherits_only_stdio);
  ADD ("/runner/spawn/child-has-default-signals", test_spawn_child_has_default_signals);
  ADD ("/runner/spawn/runs-in-its-own-process-group", test_spawn_runs_in_its_own_process_group);
  ADD ("/runner/spawn/plain-line-runs-without-shell", test_spawn_plain_line_runs_without_shell);
  ADD ("/runner/spawn/argv-is-passed-as-is", test_spawn_argv_is_passed_as_is);
  ADD ("/runner/spawn/missing-program-is-127", test_spawn_missing_program_is_127);
  ADD ("/runner/spawn/not-executable-is-126", test_spawn_not_executable_is_126);
  ADD ("/runner/spawn/path-search-passes-over-what-cannot-run",
       test_spawn_path_search_passes_over_what_cannot_run);
  ADD ("/runner/spawn/script-without-shebang-runs-in-shell",
       test_spawn_script_without_shebang_runs_in_shell);
  ADD ("/runner/spawn/failure-wakes-the-poller", test_spawn_failure_wakes_the_poller);
  ADD ("/runner/spawn/same-key-twice-is-refused", test_spawn_same_key_twice_is_refused);
  ADD ("/runner/env/adds-task-entries", test_env_adds_task_entries);
  ADD ("/runner/env/task-path-is-searched", test_env_task_path_is_searched);
  ADD ("/runner/env/bad-entry-is-spawn-failed", test_env_bad_entry_is_spawn_failed);
  ADD ("/runner/cwd/is-applied", test_cwd_is_applied);
  ADD ("/runner/cwd/bad-dir-is-spawn-failed", test_cwd_bad_dir_is_spawn_failed);
  ADD ("/runner/timeout/kills-forked-children", test_timeout_kills_forked_children);
  ADD ("/runner/timeout/kills-term-ignoring-children-when-leader-dies",
       test_timeout_kills_term_ignoring_children_when_leader_dies);
  ADD ("/runner/timeout/kills-term-ignoring-task-after-grace",
       test_timeout_kills_term_ignoring_task_after_grace);
  ADD ("/runner/timeout/reaches-a-leader-that-left-its-group",
       test_timeout_reaches_a_leader_that_left_its_group);
  ADD ("/runner/timeout/next-timeout-follows-deadlines",
       test_timeout_next_timeout_follows_deadlines);
  ADD ("/runner/cancel/reports-cancelled", test_cancel_reports_cancelled);
  ADD ("/runner/cancel/unknown-task-returns-false", test_cancel_unknown_task_returns_false);
  ADD ("/runner/cancel/all-reports-drained", test_cancel_all_reports_drained);
  ADD ("/runner/list/reports-running-keys", test_list_reports_running_keys);
  ADD ("/runner/concurrency/fifty-tasks-complete", test_concurrency_fifty_tasks_complete);
  ADD ("/runner/free/kills-running-tasks", test_free_kills_running_tasks);
  ADD ("/runner/slots/ready-tasks-wait-for-the-lease", test_slots_ready_tasks_wait_for_the_lease);
  ADD ("/runner/slots/unstage-gives-back-unstarted-tasks",
       test_slots_unstage_gives_back_unstarted_tasks);
  ADD ("/runner/slots/cancel-of-a-waiting-task", test_slots_cancel_of_a_waiting_task);
  ADD ("/runner/slots/walltime-is-asked-at-the-start", test_slots_walltime_is_asked_at_the_start);
  ADD ("/runner/slots/short-tasks-pass-a-long-one", test_slots_short_tasks_pass_a_long_one);

#undef ADD
  return g_test_run ();
}
