/* test-transport-local.c: the local transport runs real commands here, so
 * these tests spawn sh, cat and sleep and look at what came back.  Every
 * process a test starts is waited for or killed before the test ends. */

#include "drivers-private.h"

#include <glib/gstdio.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

typedef struct {
  DatcTransport *transport;
  gchar *dir;
} Fixture;

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  f->transport = datc_transport_local.open (NULL, NULL, &error);
  g_assert_no_error (error);
  f->dir = g_dir_make_tmp ("datc-test-local-XXXXXX", &error);
  g_assert_no_error (error);
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
        (void) g_unlink (child);
    }
  (void) g_rmdir (path);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  f->transport->klass->close (f->transport);
  remove_tree (f->dir);
  g_free (f->dir);
}

static gboolean
run (Fixture *f, const char *const *argv, GBytes *input, guint timeout_ms, DatcCommandResult *res,
     GError **error)
{
  return f->transport->klass->run (f->transport, argv, input, timeout_ms, res, error);
}

static void
assert_bytes_eq (GBytes *bytes, const char *expected)
{
  gsize len = 0;
  const char *data = g_bytes_get_data (bytes, &len);

  g_assert_cmpmem (data, len, expected, strlen (expected));
}

/* Waits, with an overall deadline, until `pid` no longer exists.  This
 * test is the subreaper for orphans, so it reaps the pid when it can. */
static gboolean
await_pid_gone (pid_t pid, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;

  for (;;)
    {
      (void) waitpid (pid, NULL, WNOHANG);
      if (kill (pid, 0) != 0 && errno == ESRCH)
        return TRUE;
      if (g_get_monotonic_time () > deadline)
        return FALSE;
      g_usleep (10 * 1000);
    }
}

/* 0 when the command was killed before it could write the file: then
 * it had started nothing worth checking on. */
static pid_t
read_pid_file (const char *path)
{
  g_autofree gchar *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    {
      g_test_message ("%s was never written", path);
      return 0;
    }
  return (pid_t) g_ascii_strtoll (text, NULL, 10);
}

/* ---- run -------------------------------------------------------------- */

static void
test_run_reports_exit_status (Fixture *f, gconstpointer data)
{
  const char *argv[] = { "/bin/sh", "-c", "exit 3", NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_true (run (f, argv, NULL, 10000, &res, &error));
  g_assert_no_error (error);
  g_assert_cmpint (res.exit_status, ==, 3);
}

static void
test_run_reports_a_signal_as_a_shell_would (Fixture *f, gconstpointer data)
{
  const char *argv[] = { "/bin/sh", "-c", "kill -s KILL $$", NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_true (run (f, argv, NULL, 10000, &res, &error));
  g_assert_no_error (error);
  g_assert_cmpint (res.exit_status, ==, 128 + SIGKILL);
}

static void
test_run_captures_stdout_and_stderr (Fixture *f, gconstpointer data)
{
  const char *argv[] = { "/bin/sh", "-c", "printf 'to out\\n'; printf 'to err' >&2; exit 1", NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_true (run (f, argv, NULL, 10000, &res, &error));
  g_assert_no_error (error);
  g_assert_cmpint (res.exit_status, ==, 1);
  assert_bytes_eq (res.out, "to out\n");
  assert_bytes_eq (res.err, "to err");
}

static void
test_run_feeds_input_on_stdin (Fixture *f, gconstpointer data)
{
  const char *argv[] = { "cat", NULL };
  g_autoptr (GBytes) input = g_bytes_new_static ("line one\nline two\n", 18);
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_true (run (f, argv, input, 10000, &res, &error));
  g_assert_no_error (error);
  g_assert_cmpint (res.exit_status, ==, 0);
  assert_bytes_eq (res.out, "line one\nline two\n");
}

/* Through a pipe, the unread rest of the input would raise SIGPIPE here
 * and kill the test. */
static void
test_run_command_ignoring_its_input_is_harmless (Fixture *f, gconstpointer data)
{
  const char *argv[] = { "true", NULL };
  gsize len = 8 * 1024 * 1024;
  g_autoptr (GBytes) input = g_bytes_new_take (g_malloc0 (len), len);
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_true (run (f, argv, input, 10000, &res, &error));
  g_assert_no_error (error);
  g_assert_cmpint (res.exit_status, ==, 0);
}

/* Were stdin inherited, cat would wait on the test runner's stdin. */
static void
test_run_without_input_reads_dev_null (Fixture *f, gconstpointer data)
{
  const char *argv[] = { "cat", NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_true (run (f, argv, NULL, 10000, &res, &error));
  g_assert_no_error (error);
  g_assert_cmpint (res.exit_status, ==, 0);
  g_assert_cmpuint (g_bytes_get_size (res.out), ==, 0);
}

static void
test_run_times_out_and_kills_the_command (Fixture *f, gconstpointer data)
{
  g_autofree gchar *pid_file = g_build_filename (f->dir, "pid", NULL);
  g_autofree gchar *script = g_strdup_printf (
      "echo $$ >'%s.tmp' && mv '%s.tmp' '%s' && exec sleep 30", pid_file, pid_file, pid_file);
  const char *argv[] = { "/bin/sh", "-c", script, NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;
  gint64 start = g_get_monotonic_time ();

  g_assert_false (run (f, argv, NULL, 500, &res, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TIMEOUT);
  g_assert_nonnull (strstr (error->message, "/bin/sh -c"));
  g_assert_null (res.out);
  /* Promptly: far less than the 30 s the command wanted. */
  g_assert_cmpint (g_get_monotonic_time () - start, <, 10 * G_USEC_PER_SEC);
  /* Reaped by run(), so already gone, not a zombie. */
  pid_t pid = read_pid_file (pid_file);
  if (pid > 0)
    {
      g_assert_cmpint (kill (pid, 0), ==, -1);
      g_assert_cmpint (errno, ==, ESRCH);
    }
}

/* The grandchild keeps the output pipes open after the shell is killed;
 * killing only argv[0] would leave run() waiting for it. */
static void
test_run_timeout_kills_the_whole_command_group (Fixture *f, gconstpointer data)
{
  g_autofree gchar *pid_file = g_build_filename (f->dir, "grandchild", NULL);
  g_autofree gchar *script = g_strdup_printf (
      "sleep 30 & echo $! >'%s.tmp' && mv '%s.tmp' '%s'; wait", pid_file, pid_file, pid_file);
  const char *argv[] = { "/bin/sh", "-c", script, NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;
  gint64 start = g_get_monotonic_time ();

  g_assert_false (run (f, argv, NULL, 500, &res, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TIMEOUT);
  g_assert_cmpint (g_get_monotonic_time () - start, <, 10 * G_USEC_PER_SEC);

  pid_t grandchild = read_pid_file (pid_file);
  if (grandchild > 0 && !await_pid_gone (grandchild, 10000))
    {
      (void) kill (grandchild, SIGKILL);
      g_assert_not_reached ();
    }
}

/* The shell exits at once, but the sleep it left holds stdout open. */
static void
test_run_timeout_kills_what_the_command_left_behind (Fixture *f, gconstpointer data)
{
  g_autofree gchar *pid_file = g_build_filename (f->dir, "left-behind", NULL);
  g_autofree gchar *script = g_strdup_printf (
      "sleep 30 & echo $! >'%s.tmp' && mv '%s.tmp' '%s'; exit 0", pid_file, pid_file, pid_file);
  const char *argv[] = { "/bin/sh", "-c", script, NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_false (run (f, argv, NULL, 500, &res, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TIMEOUT);

  pid_t left = read_pid_file (pid_file);
  if (left > 0 && !await_pid_gone (left, 10000))
    {
      (void) kill (left, SIGKILL);
      g_assert_not_reached ();
    }
}

static void
test_run_missing_program_is_a_transport_error (Fixture *f, gconstpointer data)
{
  const char *argv[] = { "/nonexistent/datc-no-such-program", "--flag", NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_false (run (f, argv, NULL, 10000, &res, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT);
  g_assert_nonnull (strstr (error->message, "/nonexistent/datc-no-such-program"));
}

/* ---- put -------------------------------------------------------------- */

static guint
count_entries (const char *path)
{
  g_autoptr (GDir) dir = g_dir_open (path, 0, NULL);
  guint n = 0;

  g_assert_nonnull (dir);
  while (g_dir_read_name (dir) != NULL)
    n++;
  return n;
}

static void
assert_mode (const char *path, mode_t mode)
{
  struct stat st;

  g_assert_cmpint (stat (path, &st), ==, 0);
  g_assert_cmpuint (st.st_mode & 07777, ==, mode);
}

static void
test_put_creates_parents_and_applies_mode (Fixture *f, gconstpointer data)
{
  g_autofree gchar *parent = g_build_filename (f->dir, "a", "b", NULL);
  g_autofree gchar *path = g_build_filename (parent, "script.sh", NULL);
  g_autoptr (GBytes) content = g_bytes_new_static ("#!/bin/sh\n", 10);
  g_autoptr (GError) error = NULL;
  g_autofree gchar *read_back = NULL;
  mode_t old_umask = umask (077); /* the mode must not depend on it */

  gboolean ok = f->transport->klass->put (f->transport, content, path, 0755, &error);
  umask (old_umask);
  g_assert_no_error (error);
  g_assert_true (ok);

  g_assert_true (g_file_get_contents (path, &read_back, NULL, NULL));
  g_assert_cmpstr (read_back, ==, "#!/bin/sh\n");
  assert_mode (path, 0755);
  assert_mode (parent, 0700);
  g_assert_cmpuint (count_entries (parent), ==, 1); /* no temp file left */
}

/* A reader that has the old file open keeps the old bytes: the new file
 * arrives by rename, never by rewriting the old one in place. */
static void
test_put_replaces_atomically (Fixture *f, gconstpointer data)
{
  g_autofree gchar *path = g_build_filename (f->dir, "script.sh", NULL);
  g_autoptr (GBytes) old_content = g_bytes_new_static ("old old old\n", 12);
  g_autoptr (GBytes) new_content = g_bytes_new_static ("new\n", 4);
  g_autoptr (GError) error = NULL;
  g_autofree gchar *read_back = NULL;
  char buf[64] = { 0 };

  g_assert_true (f->transport->klass->put (f->transport, old_content, path, 0600, &error));
  g_assert_no_error (error);
  int fd = open (path, O_RDONLY);
  g_assert_cmpint (fd, >=, 0);

  g_assert_true (f->transport->klass->put (f->transport, new_content, path, 0640, &error));
  g_assert_no_error (error);

  g_assert_cmpint (read (fd, buf, sizeof buf - 1), ==, 12);
  g_assert_cmpstr (buf, ==, "old old old\n");
  close (fd);
  g_assert_true (g_file_get_contents (path, &read_back, NULL, NULL));
  g_assert_cmpstr (read_back, ==, "new\n");
  assert_mode (path, 0640);
  g_assert_cmpuint (count_entries (f->dir), ==, 1);
}

static void
test_put_failure_leaves_no_temp_file (Fixture *f, gconstpointer data)
{
  g_autofree gchar *path = g_build_filename (f->dir, "taken", NULL);
  g_autofree gchar *inside = g_build_filename (path, "x", NULL);
  g_autoptr (GBytes) content = g_bytes_new_static ("x", 1);
  g_autoptr (GError) error = NULL;

  /* A non-empty directory where the file should go: rename must fail. */
  g_assert_cmpint (g_mkdir (path, 0700), ==, 0);
  g_assert_true (g_file_set_contents (inside, "x", 1, NULL));

  g_assert_false (f->transport->klass->put (f->transport, content, path, 0600, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT);
  g_assert_nonnull (strstr (error->message, path));
  g_assert_cmpuint (count_entries (f->dir), ==, 1);
}

/* ---- registry and site ---------------------------------------------- */

static void
test_registry_finds_the_compiled_in_drivers (void)
{
  g_assert_true (datc_transport_lookup ("local") == &datc_transport_local);
  g_assert_true (datc_scheduler_lookup ("fork") == &datc_scheduler_fork);
  g_assert_null (datc_transport_lookup ("Local"));
  g_assert_null (datc_scheduler_lookup ("nosuch"));
}

static void
test_site_unknown_driver_is_a_config_error (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcSite) site = datc_site_new ("hpc1", "telepathy", "fork", NULL, NULL, &error);

  g_assert_null (site);
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
  g_assert_nonnull (strstr (error->message, "site hpc1: unknown transport 'telepathy'"));
  g_assert_nonnull (strstr (error->message, "local"));
  g_clear_error (&error);

  site = datc_site_new ("hpc1", "local", "nosuch", NULL, NULL, &error);
  g_assert_null (site);
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
  g_assert_nonnull (strstr (error->message, "unknown scheduler 'nosuch' (known: fork, "));
}

static void
test_site_names_every_proxy_state (void)
{
  g_assert_cmpstr (datc_proxy_state_name (DATC_PROXY_PENDING), ==, "pending");
  g_assert_cmpstr (datc_proxy_state_name (DATC_PROXY_RUNNING), ==, "running");
  g_assert_cmpstr (datc_proxy_state_name (DATC_PROXY_FINISHED), ==, "finished");
  g_assert_cmpstr (datc_proxy_state_name (DATC_PROXY_FAILED), ==, "failed");
  g_assert_cmpstr (datc_proxy_state_name (DATC_PROXY_UNKNOWN), ==, "unknown");
  g_assert_cmpstr (datc_proxy_state_name ((DatcProxyState) 99), ==, "invalid");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

#ifdef __linux__
  /* Orphans (the killed shell's grandchild) come to us to be reaped, so
   * "gone" can be checked with kill(pid, 0) even where init does not reap. */
  (void) prctl (PR_SET_CHILD_SUBREAPER, 1);
#endif

#define ADD(path, fn) g_test_add (path, Fixture, NULL, fixture_set_up, fn, fixture_tear_down)
  ADD ("/site/local/run/reports-exit-status", test_run_reports_exit_status);
  ADD ("/site/local/run/reports-a-signal-as-a-shell-would",
       test_run_reports_a_signal_as_a_shell_would);
  ADD ("/site/local/run/captures-stdout-and-stderr", test_run_captures_stdout_and_stderr);
  ADD ("/site/local/run/feeds-input-on-stdin", test_run_feeds_input_on_stdin);
  ADD ("/site/local/run/without-input-reads-dev-null", test_run_without_input_reads_dev_null);
  ADD ("/site/local/run/command-ignoring-its-input-is-harmless",
       test_run_command_ignoring_its_input_is_harmless);
  ADD ("/site/local/run/times-out-and-kills-the-command", test_run_times_out_and_kills_the_command);
  ADD ("/site/local/run/timeout-kills-the-whole-command-group",
       test_run_timeout_kills_the_whole_command_group);
  ADD ("/site/local/run/timeout-kills-what-the-command-left-behind",
       test_run_timeout_kills_what_the_command_left_behind);
  ADD ("/site/local/run/missing-program-is-a-transport-error",
       test_run_missing_program_is_a_transport_error);
  ADD ("/site/local/put/creates-parents-and-applies-mode",
       test_put_creates_parents_and_applies_mode);
  ADD ("/site/local/put/replaces-atomically", test_put_replaces_atomically);
  ADD ("/site/local/put/failure-leaves-no-temp-file", test_put_failure_leaves_no_temp_file);
#undef ADD
  g_test_add_func ("/site/registry/finds-the-compiled-in-drivers",
                   test_registry_finds_the_compiled_in_drivers);
  g_test_add_func ("/site/new/unknown-driver-is-a-config-error",
                   test_site_unknown_driver_is_a_config_error);
  g_test_add_func ("/site/proxy-state/has-a-name-for-every-state",
                   test_site_names_every_proxy_state);

  return g_test_run ();
}
