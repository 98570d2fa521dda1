/* test-scheduler-fork.c: the fork scheduler in two halves.
 *
 * The parsers and builders are checked on tables of answers recorded from
 * the real commands under dash and bash (Debian's and RHEL's /bin/sh).
 * Then whole proxies run through the local site: submitted, polled,
 * cancelled, with the agent command a small sh script that reports what it
 * saw.  Waiting on those is polling with a deadline, never a fixed sleep.
 * The test is the subreaper for the proxies it starts, reaps them, and
 * kills any that are left in the fixture's teardown. */

#include "drivers-private.h"

#include <glib/gstdio.h>

#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define AWAIT_MS 10000u

static const DatcSchedulerClass *
fork_class (void)
{
  const DatcSchedulerClass *klass = datc_scheduler_lookup ("fork");

  g_assert_nonnull (klass);
  return klass;
}

/* ---- script and argv builders ----------------------------------------- */

static void
test_script_exports_slots_and_walltime_then_execs_the_agent (void)
{
  DatcProxyRequest req = {
    .name = "c42-p7",
    .slots = 16,
    .walltime_s = 7200,
    .workdir = "/scratch/datc",
    .agent_command = "/opt/datc/bin/datc-agent --master tcp://10.1.2.3:5555",
  };
  g_autofree gchar *script = fork_class ()->script (&req);

  g_assert_cmpstr (script, ==,
                   "#!/bin/sh\n"
                   "# datc proxy c42-p7 (scheduler fork)\n"
                   "export DATC_SLOTS=16\n"
                   "export DATC_WALLTIME_END=$(( $(date +%s) + 7200 ))\n"
                   "exec /opt/datc/bin/datc-agent --master tcp://10.1.2.3:5555\n");
}

static void
test_script_without_walltime_sets_no_end (void)
{
  DatcProxyRequest req = { .name = "p", .slots = 1, .agent_command = "datc-agent" };
  g_autofree gchar *script = fork_class ()->script (&req);

  g_assert_null (strstr (script, "DATC_WALLTIME_END"));
  g_assert_nonnull (strstr (script, "export DATC_SLOTS=1\n"));
}

static void
test_script_keeps_the_proxy_name_on_its_comment_line (void)
{
  DatcProxyRequest req = { .name = "evil\nrm -rf ~\r", .slots = 1, .agent_command = "a" };
  g_autofree gchar *script = fork_class ()->script (&req);

  g_assert_nonnull (strstr (script, "# datc proxy evil?rm -rf ~? (scheduler fork)\n"));
  g_assert_null (strstr (script, "\nrm"));
}

static void
test_script_refuses_what_cannot_follow_exec (void)
{
  DatcProxyRequest multi_line = { .name = "p", .slots = 1, .agent_command = "a\nb" };
  DatcProxyRequest empty = { .name = "p", .slots = 1, .agent_command = "" };
  DatcProxyRequest none = { .name = "p", .slots = 1 };
  DatcProxyRequest no_slots = { .name = "p", .slots = 0, .agent_command = "a" };

  g_assert_null (fork_class ()->script (&multi_line));
  g_assert_null (fork_class ()->script (&empty));
  g_assert_null (fork_class ()->script (&none));
  g_assert_null (fork_class ()->script (&no_slots));
}

static void
test_submit_argv_quotes_paths (void)
{
  DatcProxyRequest req = { .name = "p", .slots = 1, .workdir = "/w/it's here" };
  g_auto (GStrv) argv = fork_class ()->submit_argv (&req, "/w/it's here/p 1.sh");
  g_autofree gchar *workdir = g_shell_quote ("/w/it's here");
  g_autofree gchar *script = g_shell_quote ("/w/it's here/p 1.sh");
  g_autofree gchar *log = g_shell_quote ("/w/it's here/p 1.sh.log");
  g_autofree gchar *cd = g_strdup_printf ("cd %s || exit 1\n", workdir);
  g_autofree gchar *start
      = g_strdup_printf ("setsid /bin/sh %s >%s 2>&1 </dev/null &\necho $!\n", script, log);

  g_assert_cmpuint (g_strv_length (argv), ==, 3);
  g_assert_cmpstr (argv[0], ==, "/bin/sh");
  g_assert_cmpstr (argv[1], ==, "-c");
  g_assert_nonnull (strstr (argv[2], cd));
  g_assert_nonnull (strstr (argv[2], start));
}

static void
test_submit_argv_refuses_relative_paths (void)
{
  DatcProxyRequest relative_dir = { .name = "p", .slots = 1, .workdir = "datc" };
  DatcProxyRequest absolute_dir = { .name = "p", .slots = 1, .workdir = "/datc" };

  g_assert_null (fork_class ()->submit_argv (&relative_dir, "/datc/p.sh"));
  g_assert_null (fork_class ()->submit_argv (&absolute_dir, "-p.sh"));
}

static void
test_argv_refuses_ids_that_are_not_pids (void)
{
  static const char *const bad[] = {
    "",          "0",           "1",          "-5",   "012",   "12a", "12 34", "1;reboot",
    "$(reboot)", "99999999999", "4294967297", " 123", "123\n", "+12", "1e3",   "٣",
  };
  static const char *const good[] = { "2", "12345", "4194304", "2147483647" };

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      const char *ids[] = { "100", bad[i], NULL };
      g_auto (GStrv) poll = fork_class ()->poll_argv (ids);
      g_auto (GStrv) cancel = fork_class ()->cancel_argv (ids);

      g_test_message ("bad id '%s'", bad[i]);
      g_assert_null (poll);
      g_assert_null (cancel);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (good); i++)
    {
      const char *ids[] = { good[i], NULL };
      g_auto (GStrv) poll = fork_class ()->poll_argv (ids);
      g_auto (GStrv) cancel = fork_class ()->cancel_argv (ids);

      g_assert_nonnull (poll);
      g_assert_nonnull (cancel);
      /* The ids are positional parameters, never part of the script. */
      g_assert_cmpstr (poll[4], ==, good[i]);
      g_assert_cmpstr (cancel[4], ==, good[i]);
      g_assert_cmpuint (g_strv_length (poll), ==, 5);
      g_assert_cmpuint (g_strv_length (cancel), ==, 5);
    }
}

static void
test_has_no_queues (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcSite) site = datc_site_new ("here", "local", "fork", NULL, NULL, &error);
  gboolean exists = TRUE;
  g_autofree gchar *answer = NULL;

  g_assert_no_error (error);
  g_assert_null (fork_class ()->queue_argv);
  g_assert_nonnull (strstr (fork_class ()->no_queues, "fork has no queues"));
  g_assert_false (datc_site_query_queue (site, "batch", &exists, &answer, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
  g_assert_nonnull (strstr (error->message, "fork has no queues"));
  g_assert_null (answer);
}

/* ---- parsers on recorded answers ---------------------------------------- */

typedef struct {
  const char *what;
  gint exit_status;
  const char *out;
  const char *err;
  gint error_code; /* -1: parses */
  const char *expected;
} SubmitCase;

static const SubmitCase submit_cases[] = {
  { "pid from dash", 0, "48213\n", "", -1, "48213" },
  { "pid without newline", 0, "48213", "", -1, "48213" },
  { "pid with a CR", 0, "48213\r\n", "", -1, "48213" },
  { "warning on stderr is ignored", 0, "7001\n", "sh: warning\n", -1, "7001" },
  { "cd failed (dash)", 1, "", "/bin/sh: 2: cd: can't cd to /nonexistent/w\n",
    DATC_SITE_ERROR_COMMAND, "can't cd to /nonexistent/w" },
  { "cd failed (bash)", 1, "", "/bin/sh: line 2: cd: /nonexistent/w: No such file or directory\n",
    DATC_SITE_ERROR_COMMAND, "No such file or directory" },
  { "no setsid", 127, "", "setsid(1) not found on this host\n", DATC_SITE_ERROR_COMMAND,
    "exited with status 127: setsid(1) not found on this host" },
  { "empty answer", 0, "", "", DATC_SITE_ERROR_PARSE, "(nothing)" },
  { "two pids", 0, "123\n456\n", "", DATC_SITE_ERROR_PARSE, "123\\n456" },
  { "not a number", 0, "Submitted batch job 123\n", "", DATC_SITE_ERROR_PARSE,
    "Submitted batch job 123" },
  { "pid 1", 0, "1\n", "", DATC_SITE_ERROR_PARSE, "got: 1" },
  { "pid 0", 0, "0\n", "", DATC_SITE_ERROR_PARSE, "got: 0" },
  { "negative", 0, "-1\n", "", DATC_SITE_ERROR_PARSE, "got: -1" },
  { "too large", 0, "99999999999\n", "", DATC_SITE_ERROR_PARSE, "99999999999" },
  { "control bytes", 0, "12\x1b[2J\n", "", DATC_SITE_ERROR_PARSE, "12\\x1b[2J" },
};

static void
test_parse_submit_recorded_answers (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (submit_cases); i++)
    {
      const SubmitCase *c = &submit_cases[i];
      g_auto (DatcCommandResult) res = {
        .exit_status = c->exit_status,
        .out = g_bytes_new_static (c->out, strlen (c->out)),
        .err = g_bytes_new_static (c->err, strlen (c->err)),
      };
      g_autofree gchar *job_id = NULL;
      g_autoptr (GError) error = NULL;
      gboolean ok = fork_class ()->parse_submit (&res, &job_id, &error);

      g_test_message ("case: %s", c->what);
      if (c->error_code < 0)
        {
          g_assert_no_error (error);
          g_assert_true (ok);
          g_assert_cmpstr (job_id, ==, c->expected);
        }
      else
        {
          g_assert_false (ok);
          g_assert_null (job_id);
          g_assert_error (error, DATC_SITE_ERROR, c->error_code);
          g_assert_nonnull (strstr (error->message, c->expected));
        }
    }
}

static void
test_parse_submit_refuses_a_nul_byte (void)
{
  g_auto (DatcCommandResult) res = {
    .out = g_bytes_new_static ("123\0 456\n", 9),
    .err = g_bytes_new_static ("", 0),
  };
  g_autofree gchar *job_id = NULL;
  g_autoptr (GError) error = NULL;

  g_assert_false (fork_class ()->parse_submit (&res, &job_id, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE);
}

#define MAX_IDS 4

typedef struct {
  const char *what;
  const char *ids[MAX_IDS + 1];
  gint exit_status;
  const char *out;
  gint error_code; /* -1: parses */
  DatcProxyState expected[MAX_IDS];
  const char *message;
} PollCase;

#define RUNNING DATC_PROXY_RUNNING
#define FINISHED DATC_PROXY_FINISHED
#define UNKNOWN DATC_PROXY_UNKNOWN

static const PollCase poll_cases[] = {
  { "one running", { "4821", NULL }, 0, "4821 running\n", -1, { RUNNING }, NULL },
  { "one gone", { "4821", NULL }, 0, "4821 gone\n", -1, { FINISHED }, NULL },
  { "several, in order",
    { "4821", "4822", "4830", NULL },
    0,
    "4821 running\n4822 gone\n4830 running\n",
    -1,
    { RUNNING, FINISHED, RUNNING },
    NULL },
  { "answer order does not matter",
    { "4821", "4822", NULL },
    0,
    "4822 gone\n4821 running\n",
    -1,
    { RUNNING, FINISHED },
    NULL },
  { "id left out is unknown",
    { "4821", "4822", NULL },
    0,
    "4821 running\n",
    -1,
    { RUNNING, UNKNOWN },
    NULL },
  { "empty answer: all unknown", { "4821", "4822", NULL }, 0, "", -1, { UNKNOWN, UNKNOWN }, NULL },
  { "same id asked twice",
    { "4821", "4821", NULL },
    0,
    "4821 gone\n4821 gone\n",
    -1,
    { FINISHED, FINISHED },
    NULL },
  { "id not asked about is ignored",
    { "4821", NULL },
    0,
    "4821 running\n9999 gone\n",
    -1,
    { RUNNING },
    NULL },
  { "blank lines, CRLF, extra spaces",
    { "4821", "4822", NULL },
    0,
    "\n4821  running\r\n\n\t4822 gone \n",
    -1,
    { RUNNING, FINISHED },
    NULL },
  { "unknown word",
    { "4821", NULL },
    0,
    "4821 sleeping\n",
    DATC_SITE_ERROR_PARSE,
    { 0 },
    "got: 4821 sleeping" },
  { "id missing", { "4821", NULL }, 0, "running\n", DATC_SITE_ERROR_PARSE, { 0 }, "running" },
  { "id not a pid",
    { "4821", NULL },
    0,
    "abc running\n",
    DATC_SITE_ERROR_PARSE,
    { 0 },
    "abc running" },
  { "third word",
    { "4821", NULL },
    0,
    "4821 running now\n",
    DATC_SITE_ERROR_PARSE,
    { 0 },
    "4821 running now" },
  { "shell noise on stdout",
    { "4821", NULL },
    0,
    "4821 running\n/bin/sh: 1: kill: Illegal number: -\n",
    DATC_SITE_ERROR_PARSE,
    { 0 },
    "Illegal number" },
  { "shell failed",
    { "4821", NULL },
    2,
    "",
    DATC_SITE_ERROR_COMMAND,
    { 0 },
    "poll command exited with status 2" },
};

static void
test_parse_poll_recorded_answers (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (poll_cases); i++)
    {
      const PollCase *c = &poll_cases[i];
      g_auto (DatcCommandResult) res = {
        .exit_status = c->exit_status,
        .out = g_bytes_new_static (c->out, strlen (c->out)),
        .err = g_bytes_new_static ("", 0),
      };
      DatcProxyState states[MAX_IDS]
          = { DATC_PROXY_PENDING, DATC_PROXY_PENDING, DATC_PROXY_PENDING, DATC_PROXY_PENDING };
      g_autoptr (GError) error = NULL;
      gboolean ok = fork_class ()->parse_poll (&res, c->ids, states, &error);

      g_test_message ("case: %s", c->what);
      if (c->error_code < 0)
        {
          g_assert_no_error (error);
          g_assert_true (ok);
          for (gsize j = 0; c->ids[j] != NULL; j++)
            g_assert_cmpstr (datc_proxy_state_name (states[j]), ==,
                             datc_proxy_state_name (c->expected[j]));
        }
      else
        {
          g_assert_false (ok);
          g_assert_error (error, DATC_SITE_ERROR, c->error_code);
          g_assert_nonnull (strstr (error->message, c->message));
        }
    }
}

/* ---- whole proxies through the local site ------------------------------ */

typedef struct {
  DatcSite *site;
  gchar *dir;     /* the test's own temp dir */
  gchar *workdir; /* where proxies go: a name that needs quoting */
  GArray *pids;   /* every process a test may have left behind */
  guint submitted;
} Fixture;

/* The same pids, for a handler of SIGABRT and SIGSEGV: a failed
 * assertion or a crash skips teardown, and must not leave `sleep 30`s
 * behind. */
#define MAX_STARTED 64
static volatile sig_atomic_t started_count;
static volatile pid_t started[MAX_STARTED];

static void
kill_started_on_crash (int sig)
{
  for (sig_atomic_t i = 0; i < started_count; i++)
    {
      (void) kill (-started[i], SIGKILL);
      (void) kill (started[i], SIGKILL);
    }
  signal (sig, SIG_DFL);
  raise (sig);
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  f->site = datc_site_new ("local", "local", "fork", NULL, NULL, &error);
  g_assert_no_error (error);
  f->dir = g_dir_make_tmp ("datc-test-fork-XXXXXX", &error);
  g_assert_no_error (error);
  f->workdir = g_build_filename (f->dir, "work dir", "it's $HOME", NULL);
  f->pids = g_array_new (FALSE, FALSE, sizeof (pid_t));
}

/* Waits, with an overall deadline, until `pid` no longer exists, reaping
 * it if it is ours (we are the subreaper of every proxy). */
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
  for (guint i = 0; i < f->pids->len; i++)
    {
      pid_t pid = g_array_index (f->pids, pid_t, i);

      (void) kill (-pid, SIGKILL);
      (void) kill (pid, SIGKILL);
      g_assert_true (await_pid_gone (pid, AWAIT_MS));
    }
  started_count = 0;
  g_array_unref (f->pids);
  datc_site_free (f->site);
  remove_tree (f->dir);
  g_free (f->workdir);
  g_free (f->dir);
}

static void
remember_pid (Fixture *f, const char *id)
{
  pid_t pid = (pid_t) g_ascii_strtoll (id, NULL, 10);

  g_assert_cmpint (pid, >, 1);
  g_array_append_val (f->pids, pid);
  g_assert_cmpint (started_count, <, MAX_STARTED);
  started[started_count] = pid;
  started_count = started_count + 1;
}

static gchar *
submit (Fixture *f, const char *agent_command, guint walltime_s)
{
  DatcProxyRequest req = {
    .name = "test-proxy",
    .slots = 3,
    .walltime_s = walltime_s,
    .workdir = f->workdir,
    .agent_command = agent_command,
  };
  g_autoptr (GError) error = NULL;
  gchar *job_id = NULL;
  /* Each proxy its own script: rewriting one a proxy has not read yet
   * would run the wrong agent. */
  g_autofree gchar *script_name = g_strdup_printf ("proxy-%u.sh", ++f->submitted);

  g_assert_true (datc_site_submit (f->site, &req, script_name, &job_id, &error));
  g_assert_no_error (error);
  remember_pid (f, job_id);
  return job_id;
}

static DatcProxyState
poll_one (Fixture *f, const char *id)
{
  const char *ids[] = { id, NULL };
  DatcProxyState state = DATC_PROXY_PENDING;
  g_autoptr (GError) error = NULL;

  g_assert_true (datc_site_poll (f->site, ids, &state, &error));
  g_assert_no_error (error);
  return state;
}

/* Polls until the site reports `want`; reaps the proxy on the way unless
 * asked not to (reaping is init's job on a real host). */
static gboolean
await_state (Fixture *f, const char *id, DatcProxyState want, gboolean reap)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) AWAIT_MS * 1000;
  pid_t pid = (pid_t) g_ascii_strtoll (id, NULL, 10);

  for (;;)
    {
      if (reap)
        (void) waitpid (pid, NULL, WNOHANG);
      if (poll_one (f, id) == want)
        return TRUE;
      if (g_get_monotonic_time () > deadline)
        return FALSE;
      g_usleep (20 * 1000);
    }
}

static gchar *
await_file (const char *path)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) AWAIT_MS * 1000;
  gchar *text = NULL;

  while (!g_file_get_contents (path, &text, NULL, NULL))
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_usleep (10 * 1000);
    }
  return text;
}

/* Agent commands write through a temp file and mv, so a file that exists
 * is complete. */
static gchar *
agent_writing (const char *path, const char *what, const char *then)
{
  g_autofree gchar *tmp = g_strconcat (path, ".tmp", NULL);
  g_autofree gchar *qtmp = g_shell_quote (tmp);
  g_autofree gchar *qpath = g_shell_quote (path);
  g_autofree gchar *inner
      = g_strdup_printf ("%s >%s && mv %s %s; %s", what, qtmp, qtmp, qpath, then);
  g_autofree gchar *quoted = g_shell_quote (inner);

  return g_strdup_printf ("/bin/sh -c %s", quoted);
}

static void
test_agent_sees_slots_and_walltime_end (Fixture *f, gconstpointer data)
{
  g_autofree gchar *env_file = g_build_filename (f->dir, "env", NULL);
  g_autofree gchar *agent
      = agent_writing (env_file, "echo \"$DATC_SLOTS $DATC_WALLTIME_END\"", "exit 0");
  gint64 before = (gint64) time (NULL);
  g_autofree gchar *id = submit (f, agent, 3600);
  g_autofree gchar *env = await_file (env_file);
  gint64 after = (gint64) time (NULL);
  guint64 slots = 0;
  gint64 end = 0;

  g_assert_cmpint (sscanf (env, "%" G_GUINT64_FORMAT " %" G_GINT64_FORMAT, &slots, &end), ==, 2);
  g_assert_cmpuint (slots, ==, 3);
  g_assert_cmpint (end, >=, before + 3600);
  g_assert_cmpint (end, <=, after + 3600);

  g_assert_true (await_state (f, id, DATC_PROXY_FINISHED, TRUE));

  g_autofree gchar *script = g_build_filename (f->workdir, "proxy-1.sh", NULL);
  g_autofree gchar *log = g_build_filename (f->workdir, "proxy-1.sh.log", NULL);
  struct stat st;
  g_assert_cmpint (stat (script, &st), ==, 0);
  g_assert_cmpuint (st.st_mode & 07777, ==, 0700);
  g_assert_true (g_file_test (log, G_FILE_TEST_EXISTS));
}

static void
test_log_captures_agent_output (Fixture *f, gconstpointer data)
{
  g_autofree gchar *done = g_build_filename (f->dir, "done", NULL);
  g_autofree gchar *agent
      = agent_writing (done, "echo to-stdout; echo to-stderr >&2; echo", "exit 0");
  g_autofree gchar *id = submit (f, agent, 0);
  g_autofree gchar *log_path = g_build_filename (f->workdir, "proxy-1.sh.log", NULL);
  g_autofree gchar *log = NULL;

  g_free (await_file (done));
  g_assert_true (await_state (f, id, DATC_PROXY_FINISHED, TRUE));
  g_assert_true (g_file_get_contents (log_path, &log, NULL, NULL));
  g_assert_nonnull (strstr (log, "to-stdout\n"));
  g_assert_nonnull (strstr (log, "to-stderr\n"));
}

/* The site names a proxy's log, and removes its files from the workdir
 * in one command, and nothing else: not a file beside them, not one
 * outside the workdir, and nothing at all when a name is not plain. */
static void
test_proxy_files_are_named_and_removed (Fixture *f, gconstpointer data)
{
  g_autofree gchar *id = submit (f, "exit 0", 0);
  g_autofree gchar *script = g_build_filename (f->workdir, "proxy-1.sh", NULL);
  g_autofree gchar *beside = g_build_filename (f->workdir, "keep.log", NULL);
  g_autofree gchar *outside = g_build_filename (f->dir, "work dir", "outside.log", NULL);
  g_autoptr (GError) error = NULL;

  g_assert_true (await_state (f, id, DATC_PROXY_FINISHED, TRUE));
  g_auto (GStrv) logs = datc_site_proxy_logs (f->site, "test-proxy", id, "proxy-1.sh");
  g_assert_nonnull (logs);
  g_assert_cmpuint (g_strv_length (logs), ==, 1);
  g_assert_cmpstr (logs[0], ==, "proxy-1.sh.log");
  g_autofree gchar *log = g_build_filename (f->workdir, logs[0], NULL);
  g_assert_true (g_file_test (log, G_FILE_TEST_IS_REGULAR));
  g_assert_true (g_file_set_contents (beside, "x", -1, NULL));
  g_assert_true (g_file_set_contents (outside, "x", -1, NULL));
  g_assert_null (datc_site_proxy_logs (f->site, "test-proxy", "not-a-pid", "proxy-1.sh"));

  const char *refused[][3] = { { "proxy-1.sh", "../outside.log", NULL },
                               { "proxy-1.sh", "sub/x", NULL },
                               { "..", NULL, NULL },
                               { "", NULL, NULL } };
  for (guint i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      g_assert_false (datc_site_remove_files (f->site, f->workdir, refused[i], &error));
      g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
      g_clear_error (&error);
      g_assert_true (g_file_test (script, G_FILE_TEST_EXISTS));
      g_assert_true (g_file_test (outside, G_FILE_TEST_EXISTS));
    }
  const char *relative[] = { "proxy-1.sh", NULL };
  g_assert_false (datc_site_remove_files (f->site, "work dir", relative, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
  g_clear_error (&error);

  /* A name already gone is no error (rm -f). */
  const char *names[] = { "proxy-1.sh", logs[0], "never-there.log", NULL };
  g_assert_true (datc_site_remove_files (f->site, f->workdir, names, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (script, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (log, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (beside, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (outside, G_FILE_TEST_EXISTS));
}

/* A failing command's stderr keeps its lines: each on a line of its own,
 * indented, never a literal "\n". */
static void
test_command_error_keeps_stderr_lines (Fixture *f, gconstpointer data)
{
  const char *const argv[] = { "/bin/sh", "-c",
                               "printf 'sbatch: error: first\\nsbatch: error: second\\n' >&2; "
                               "exit 1",
                               NULL };
  DatcCommandResult res = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_true (datc_site_run (f->site, argv, &res, &error));
  g_assert_cmpint (res.exit_status, ==, 1);
  datc_site_set_command_error (&error, "sbatch", &res);
  datc_command_result_clear (&res);
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_COMMAND);
  g_assert_cmpstr (error->message, ==,
                   "sbatch exited with status 1: sbatch: error: first\n  sbatch: error: second");
}

static void
test_job_id_leads_its_own_session_and_group (Fixture *f, gconstpointer data)
{
  g_autofree gchar *id = submit (f, "sleep 30", 0);
  pid_t pid = (pid_t) g_ascii_strtoll (id, NULL, 10);
  const char *ids[] = { id, NULL };
  g_autoptr (GError) error = NULL;

  g_assert_cmpint (poll_one (f, id), ==, DATC_PROXY_RUNNING);
  /* setsid() may not have run yet the instant submit returns. */
  gint64 deadline = g_get_monotonic_time () + (gint64) AWAIT_MS * 1000;
  while (getsid (pid) != pid && g_get_monotonic_time () < deadline)
    g_usleep (10 * 1000);
  g_assert_cmpint (getsid (pid), ==, pid);
  g_assert_cmpint (getpgid (pid), ==, pid);
  g_assert_cmpint (getsid (pid), !=, getsid (0));

  g_assert_true (datc_site_cancel (f->site, ids, &error));
  g_assert_no_error (error);
  g_assert_true (await_state (f, id, DATC_PROXY_FINISHED, TRUE));
  g_assert_true (await_pid_gone (pid, AWAIT_MS));
}

static void
test_cancel_kills_process_group (Fixture *f, gconstpointer data)
{
  g_autofree gchar *gc_file = g_build_filename (f->dir, "grandchild", NULL);
  g_autofree gchar *agent = agent_writing (gc_file, "sleep 30 & echo $!", "wait");
  g_autofree gchar *id = submit (f, agent, 0);
  g_autofree gchar *gc_text = await_file (gc_file);
  pid_t pid = (pid_t) g_ascii_strtoll (id, NULL, 10);
  pid_t grandchild = (pid_t) g_ascii_strtoll (gc_text, NULL, 10);
  const char *ids[] = { id, NULL };
  g_autoptr (GError) error = NULL;

  g_assert_cmpint (grandchild, >, 1);
  remember_pid (f, gc_text);
  g_assert_cmpint (getpgid (grandchild), ==, pid);
  g_assert_cmpint (poll_one (f, id), ==, DATC_PROXY_RUNNING);

  g_assert_true (datc_site_cancel (f->site, ids, &error));
  g_assert_no_error (error);

  g_assert_true (await_state (f, id, DATC_PROXY_FINISHED, TRUE));
  g_assert_true (await_pid_gone (pid, AWAIT_MS));
  g_assert_true (await_pid_gone (grandchild, AWAIT_MS));
  g_assert_cmpint (kill (grandchild, 0), ==, -1);
  g_assert_cmpint (errno, ==, ESRCH);
}

static void
test_poll_answers_many_ids_in_one_command (Fixture *f, gconstpointer data)
{
  g_autofree gchar *done = g_build_filename (f->dir, "done", NULL);
  g_autofree gchar *quick_agent = agent_writing (done, "echo", "exit 0");
  g_autofree gchar *quick = submit (f, quick_agent, 0);
  g_autofree gchar *slow = submit (f, "sleep 30", 0);
  const char *ids[] = { slow, quick, slow, NULL };
  DatcProxyState states[3];
  g_autoptr (GError) error = NULL;

  g_free (await_file (done));
  g_assert_true (await_state (f, quick, DATC_PROXY_FINISHED, TRUE));
  g_assert_true (datc_site_poll (f->site, ids, states, &error));
  g_assert_no_error (error);
  g_assert_cmpint (states[0], ==, DATC_PROXY_RUNNING);
  g_assert_cmpint (states[1], ==, DATC_PROXY_FINISHED);
  g_assert_cmpint (states[2], ==, DATC_PROXY_RUNNING);
}

#ifdef __linux__
static gboolean
is_zombie (pid_t pid)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/stat", (int) pid);
  g_autofree gchar *stat = NULL;

  if (!g_file_get_contents (path, &stat, NULL, NULL))
    return FALSE;
  const char *close_paren = strrchr (stat, ')');
  return close_paren != NULL && close_paren[1] == ' ' && close_paren[2] == 'Z';
}
#endif

/* In a container without an init that reaps, an exited proxy stays a
 * zombie, which kill -0 still finds. */
static void
test_poll_reports_an_unreaped_zombie_as_finished (Fixture *f, gconstpointer data)
{
  if (!g_file_test ("/proc/self/stat", G_FILE_TEST_EXISTS))
    {
      g_test_skip ("no /proc here: zombies are reported as running");
      return;
    }
#ifdef __linux__
  /* The agent blocks on a FIFO until we open it.  Submit returns only once
   * the submitting shell has exited, so from then on the proxy's parent is
   * us, not a shell that might reap it first. */
  g_autofree gchar *fifo = g_build_filename (f->dir, "release", NULL);
  g_autofree gchar *quoted = g_shell_quote (fifo);
  g_autofree gchar *agent = g_strdup_printf ("cat %s", quoted);
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  g_autofree gchar *id = submit (f, agent, 0);
  pid_t pid = (pid_t) g_ascii_strtoll (id, NULL, 10);
  gint64 deadline = g_get_monotonic_time () + (gint64) AWAIT_MS * 1000;
  int fd;

  while ((fd = open (fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
    {
      g_assert_cmpint (errno, ==, ENXIO); /* no reader yet */
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_usleep (10 * 1000);
    }
  close (fd);

  /* We are the subreaper and do not reap yet: it must become a zombie. */
  while (!is_zombie (pid))
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_usleep (10 * 1000);
    }
  g_assert_cmpint (kill (pid, 0), ==, 0);
  g_assert_cmpint (poll_one (f, id), ==, DATC_PROXY_FINISHED);
#else
  g_test_skip ("needs PR_SET_CHILD_SUBREAPER to hold a zombie");
#endif
}

static void
test_cancel_ignores_ids_already_gone (Fixture *f, gconstpointer data)
{
  g_autofree gchar *id = submit (f, "true", 0);
  pid_t pid = (pid_t) g_ascii_strtoll (id, NULL, 10);
  const char *ids[] = { id, NULL };
  g_autoptr (GError) error = NULL;

  g_assert_true (await_state (f, id, DATC_PROXY_FINISHED, TRUE));
  g_assert_true (await_pid_gone (pid, AWAIT_MS));
  g_assert_true (datc_site_cancel (f->site, ids, &error));
  g_assert_no_error (error);
}

static void
test_site_refuses_ids_that_are_not_pids (Fixture *f, gconstpointer data)
{
  const char *ids[] = { "4821", "48;21", NULL };
  DatcProxyState states[2];
  g_autoptr (GError) error = NULL;

  g_assert_false (datc_site_poll (f->site, ids, states, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
  g_assert_cmpstr (error->message, ==, "site local: '48;21' is not a fork job id");
  g_clear_error (&error);

  g_assert_false (datc_site_cancel (f->site, ids, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
  g_assert_nonnull (strstr (error->message, "'48;21'"));
}

/* A fork site reached over ssh at a port where nothing listens (bound,
 * never listening, so no one else takes it): every command it would run
 * fails, so one that ran shows as an error. */
static DatcSite *
site_that_cannot_run_commands (int *holder)
{
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof a;
  g_autoptr (GKeyFile) config = g_key_file_new ();
  g_autoptr (GError) error = NULL;

  *holder = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint (*holder, >=, 0);
  g_assert_cmpint (bind (*holder, (struct sockaddr *) &a, sizeof a), ==, 0);
  g_assert_cmpint (getsockname (*holder, (struct sockaddr *) &a, &len), ==, 0);
  g_key_file_set_string (config, "site x", "host", "127.0.0.1");
  g_key_file_set_integer (config, "site x", "port", ntohs (a.sin_port));
  DatcSite *site = datc_site_new ("x", "ssh", "fork", config, "site x", &error);
  g_assert_no_error (error);
  return site;
}

static void
test_site_poll_and_cancel_of_no_ids_run_nothing (Fixture *f, gconstpointer data)
{
  const char *none[] = { NULL };
  const char *one[] = { "4821", NULL };
  DatcProxyState state;
  int holder = -1;
  g_autoptr (DatcSite) site = site_that_cannot_run_commands (&holder);
  g_autoptr (GError) error = NULL;

  g_assert_true (datc_site_poll (site, none, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (datc_site_cancel (site, none, &error));
  g_assert_no_error (error);
  /* The premise: a command this site runs does fail. */
  g_assert_false (datc_site_poll (site, one, &state, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT);
  g_clear_error (&error);
  g_assert_false (datc_site_cancel (site, one, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT);
  close (holder);
}

static void
test_submit_refuses_a_relative_workdir_or_odd_script_name (Fixture *f, gconstpointer data)
{
  DatcProxyRequest req = { .name = "p", .slots = 1, .workdir = "datc", .agent_command = "true" };
  g_autofree gchar *job_id = NULL;
  g_autoptr (GError) error = NULL;

  g_assert_false (datc_site_submit (f->site, &req, "p.sh", &job_id, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
  g_assert_nonnull (strstr (error->message, "site local: workdir 'datc'"));
  g_clear_error (&error);

  req.workdir = f->workdir;
  g_assert_false (datc_site_submit (f->site, &req, "../p.sh", &job_id, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
  g_clear_error (&error);

  req.agent_command = "true\nfalse";
  g_assert_false (datc_site_submit (f->site, &req, "p.sh", &job_id, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
  g_assert_null (job_id);
  g_assert_false (g_file_test (f->workdir, G_FILE_TEST_EXISTS));
}

/* A file where the workdir should be: put fails, nothing is started. */
static void
test_submit_reports_a_workdir_it_cannot_write (Fixture *f, gconstpointer data)
{
  g_autofree gchar *blocker = g_build_filename (f->dir, "work dir", NULL);
  DatcProxyRequest req
      = { .name = "p", .slots = 1, .workdir = f->workdir, .agent_command = "true" };
  g_autofree gchar *job_id = NULL;
  g_autoptr (GError) error = NULL;

  g_assert_true (g_file_set_contents (blocker, "", 0, NULL));
  g_assert_false (datc_site_submit (f->site, &req, "p.sh", &job_id, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT);
  g_assert_true (g_str_has_prefix (error->message, "site local: "));
  g_assert_null (job_id);
}

static void
test_cannot_exclude_hosts (void)
{
  const char *why = NULL;
  g_assert_false (datc_scheduler_can_exclude_hosts ("fork", &why));
  g_assert_nonnull (strstr (why, "cannot exclude"));
  g_assert_true (datc_proxy_host_is_valid ("node-07.example.org"));
  g_assert_false (datc_proxy_host_is_valid ("-rf"));
  g_assert_false (datc_proxy_host_is_valid ("a b"));
  g_assert_false (datc_proxy_host_is_valid (""));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

#ifdef __linux__
  /* Proxies are orphaned at birth (their sh -c exits at once).  Be their
   * subreaper so they can be reaped and checked with kill(pid, 0) even
   * where the nearest reaper up the tree never reaps. */
  (void) prctl (PR_SET_CHILD_SUBREAPER, 1);
#endif
  signal (SIGABRT, kill_started_on_crash);
  signal (SIGSEGV, kill_started_on_crash);

  g_test_add_func ("/site/fork/script/exports-slots-and-walltime-then-execs-the-agent",
                   test_script_exports_slots_and_walltime_then_execs_the_agent);
  g_test_add_func ("/site/fork/script/without-walltime-sets-no-end",
                   test_script_without_walltime_sets_no_end);
  g_test_add_func ("/site/fork/script/keeps-the-proxy-name-on-its-comment-line",
                   test_script_keeps_the_proxy_name_on_its_comment_line);
  g_test_add_func ("/site/fork/script/refuses-what-cannot-follow-exec",
                   test_script_refuses_what_cannot_follow_exec);
  g_test_add_func ("/site/fork/submit-argv/quotes-paths", test_submit_argv_quotes_paths);
  g_test_add_func ("/site/fork/submit-argv/refuses-relative-paths",
                   test_submit_argv_refuses_relative_paths);
  g_test_add_func ("/site/fork/argv/refuses-ids-that-are-not-pids",
                   test_argv_refuses_ids_that_are_not_pids);
  g_test_add_func ("/site/fork/queue/there-are-none", test_has_no_queues);
  g_test_add_func ("/site/fork/cannot-exclude-hosts", test_cannot_exclude_hosts);
  g_test_add_func ("/site/fork/parse-submit/recorded-answers", test_parse_submit_recorded_answers);
  g_test_add_func ("/site/fork/parse-submit/refuses-a-nul-byte",
                   test_parse_submit_refuses_a_nul_byte);
  g_test_add_func ("/site/fork/parse-poll/recorded-answers", test_parse_poll_recorded_answers);

#define ADD(path, fn) g_test_add (path, Fixture, NULL, fixture_set_up, fn, fixture_tear_down)
  ADD ("/site/fork/submit/agent-sees-slots-and-walltime-end",
       test_agent_sees_slots_and_walltime_end);
  ADD ("/site/fork/submit/log-captures-agent-output", test_log_captures_agent_output);
  ADD ("/site/fork/files/a-proxy-s-files-are-named-and-removed-nothing-else",
       test_proxy_files_are_named_and_removed);
  ADD ("/site/fork/command-error-keeps-the-lines-of-stderr", test_command_error_keeps_stderr_lines);
  ADD ("/site/fork/submit/job-id-leads-its-own-session-and-group",
       test_job_id_leads_its_own_session_and_group);
  ADD ("/site/fork/submit/refuses-a-relative-workdir-or-odd-script-name",
       test_submit_refuses_a_relative_workdir_or_odd_script_name);
  ADD ("/site/fork/submit/reports-a-workdir-it-cannot-write",
       test_submit_reports_a_workdir_it_cannot_write);
  ADD ("/site/fork/cancel-kills-process-group", test_cancel_kills_process_group);
  ADD ("/site/fork/cancel/ignores-ids-already-gone", test_cancel_ignores_ids_already_gone);
  ADD ("/site/fork/poll/answers-many-ids-in-one-command",
       test_poll_answers_many_ids_in_one_command);
  ADD ("/site/fork/poll/reports-an-unreaped-zombie-as-finished",
       test_poll_reports_an_unreaped_zombie_as_finished);
  ADD ("/site/fork/site/refuses-ids-that-are-not-pids", test_site_refuses_ids_that_are_not_pids);
  ADD ("/site/fork/site/poll-and-cancel-of-no-ids-run-nothing",
       test_site_poll_and_cancel_of_no_ids_run_nothing);
#undef ADD

  return g_test_run ();
}
