/* test-campaign.c: whole campaigns through the real programs on the
 * embedded local site: completion, outputs, exit statuses, bad input,
 * agents killed or drained, timeouts that leave nothing behind, an agent
 * wider than the usual open-file limit. */
#include <fcntl.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "curve.h"
#include "harness.h"

static gchar *
campaign_dir (TbDir *d, const char *name)
{
  return g_build_filename (d->path, name, NULL);
}

/* ---- 10,000 tasks on 4 agents ---------------------------------------- */

static void
test_many_tasks (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autoptr (GString) tasks = g_string_new (NULL);
  for (guint i = 1; i <= 10000; i++)
    g_string_append_printf (tasks, "echo out-%u\n", i);
  g_autofree gchar *file = tb_write (d, "tasks.txt", tasks->str);
  g_autofree gchar *dir = campaign_dir (d, "c");
  const char *argv[] = { tb_datc (), "run",           "--dir", dir,  "--local-agents",
                         "4",        "--local-slots", "8",     file, NULL };
  g_autofree gchar *err = NULL;
  int status = tb_run (d, argv, 300, &err);
  if (status != 0)
    g_printerr ("%s", err);
  g_assert_cmpint (status, ==, 0);

  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 10000);
  g_autoptr (GHashTable) agents = g_hash_table_new (g_str_hash, g_str_equal);
  for (gint64 id = 1; id <= 10000; id++)
    {
      JsonObject *o = g_hash_table_lookup (res, &id);
      g_assert_nonnull (o);
      g_assert_cmpstr (json_object_get_string_member (o, "status"), ==, "exited");
      g_assert_cmpint (json_object_get_int_member (o, "exit_code"), ==, 0);
      g_assert_cmpint (json_object_get_int_member (o, "line"), ==, id);
      g_assert_cmpstr (json_object_get_string_member (o, "site"), ==, "local");
      g_hash_table_add (agents, (gpointer) json_object_get_string_member (o, "agent"));
      /* Every output, read back from the per-agent files by offset. */
      g_autofree gchar *path
          = g_build_filename (dir, json_object_get_string_member (o, "output"), NULL);
      static GHashTable *files;
      if (files == NULL)
        files = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
      gchar *content = g_hash_table_lookup (files, path);
      if (content == NULL)
        {
          g_assert_true (g_file_get_contents (path, &content, NULL, NULL));
          g_hash_table_insert (files, g_strdup (path), content);
        }
      g_autofree gchar *want = g_strdup_printf ("out-%" G_GINT64_FORMAT "\n", id);
      gint64 off = json_object_get_int_member (o, "stdout_offset");
      gint64 len = json_object_get_int_member (o, "stdout_bytes");
      g_assert_cmpint (len, ==, (gint64) strlen (want));
      g_assert_cmpmem (content + off, len, want, strlen (want));
    }
  /* Pull spreads the bag over the agents. */
  g_assert_cmpuint (g_hash_table_size (agents), >=, 2);

  /* `datc output` reads the same bytes back. */
  for (guint i = 0; i < 5; i++)
    {
      guint id = 1 + g_test_rand_int_range (0, 10000);
      g_autofree gchar *ids = g_strdup_printf ("%u", id);
      const char *out_argv[] = { tb_datc (), "output", dir, ids, NULL };
      g_autoptr (TbProc) p = tb_spawn (d, "output", out_argv);
      g_assert_cmpint (tb_wait (p, 30), ==, 0);
      g_autofree gchar *out = tb_proc_stdout (p);
      g_autofree gchar *want = g_strdup_printf ("out-%u\n", id);
      g_assert_cmpstr (out, ==, want);
    }
  /* Nothing of the campaign is left running. */
  g_autoptr (GArray) left = tb_find_agents (dir);
  g_assert_cmpuint (left->len, ==, 0);
}

/* ---- exit statuses ---------------------------------------------------- */

static void
test_exit_status (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *ok = tb_write (d, "ok.txt", "true\ntrue\n");
  g_autofree gchar *bad = tb_write (d, "bad.txt", "true\nsh -c 'echo oops >&2; exit 3'\n");
  g_autofree gchar *dir1 = campaign_dir (d, "ok");
  g_autofree gchar *dir2 = campaign_dir (d, "bad");
  const char *a1[] = { tb_datc (), "run", "--dir", dir1, ok, NULL };
  const char *a2[] = { tb_datc (), "run", "--dir", dir2, bad, NULL };
  g_assert_cmpint (tb_run (d, a1, 60, NULL), ==, 0);
  g_assert_cmpint (tb_run (d, a2, 60, NULL), ==, 1);

  g_autoptr (GHashTable) res = tb_results (dir2);
  gint64 id = 2;
  JsonObject *o = g_hash_table_lookup (res, &id);
  g_assert_nonnull (o);
  g_assert_cmpint (json_object_get_int_member (o, "exit_code"), ==, 3);
  const char *err_argv[] = { tb_datc (), "output", dir2, "2", "--stderr", NULL };
  g_autoptr (TbProc) p = tb_spawn (d, "output", err_argv);
  g_assert_cmpint (tb_wait (p, 30), ==, 0);
  g_autofree gchar *out = tb_proc_stdout (p);
  g_assert_cmpstr (out, ==, "oops\n");

  /* Usage errors are 2. */
  const char *a3[] = { tb_datc (), "run", NULL };
  g_assert_cmpint (tb_run (d, a3, 30, NULL), ==, 2);
}

static void
test_retries (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  /* Fails twice, then succeeds: counts its own runs in a file. */
  g_autofree gchar *counter = g_build_filename (d->path, "count", NULL);
  g_autofree gchar *line
      = g_strdup_printf ("{\"sh\": \"echo x >> %s; test $(wc -l < %s) -ge 3\", \"retries\": 2}\n"
                         "{\"cmd\": [\"false\"], \"retries\": 1}\n",
                         counter, counter);
  g_autofree gchar *file = tb_write (d, "t.jsonl", line);
  g_autofree gchar *dir = campaign_dir (d, "c");
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--local-slots", "1", file, NULL };
  g_assert_cmpint (tb_run (d, argv, 60, NULL), ==, 1);
  g_autoptr (GHashTable) res = tb_results (dir);
  gint64 one = 1, two = 2;
  JsonObject *o1 = g_hash_table_lookup (res, &one), *o2 = g_hash_table_lookup (res, &two);
  g_assert_cmpint (json_object_get_int_member (o1, "exit_code"), ==, 0);
  g_assert_cmpint (json_object_get_int_member (o1, "attempt"), ==, 3);
  g_assert_cmpint (json_object_get_int_member (o2, "exit_code"), ==, 1);
  g_assert_cmpint (json_object_get_int_member (o2, "attempt"), ==, 2);
}

/* ---- bad input: exit 2, FILE:LINE, nothing started -------------------- */

typedef struct {
  const char *name, *content, *message;
} BadCase;

static const BadCase bad_cases[] = {
  { "unterminated.jsonl", "{\"sh\": \"true\"}\n{\"sh\": \"tr\n", ":2: invalid JSON" },
  { "types.jsonl", "{\"sh\": \"true\", \"timeout\": \"soon\"}\n", ":1: field \"timeout\"" },
  { "unknown.jsonl", "{\"sh\": \"true\", \"colour\": 1}\n", ":1: unknown field \"colour\"" },
  { "argv.jsonl", "{\"cmd\": \"true\"}\n", ":1: field \"cmd\"" },
  { "both.jsonl", "{\"cmd\": [\"true\"], \"sh\": \"true\"}\n", ":1:" },
  { "utf8.txt", "echo ok\necho \xff\xfe\n", ":2:" },
  { "empty.txt", "# only a comment\n\n", "no tasks" },
};

static void
test_bad_input (gconstpointer data)
{
  const BadCase *c = data;
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tb_write (d, c->name, c->content);
  g_autofree gchar *dir = campaign_dir (d, "c");
  const char *argv[] = { tb_datc (), "run", "--dir", dir, file, NULL };
  g_autofree gchar *err = NULL;
  g_assert_cmpint (tb_run (d, argv, 30, &err), ==, 2);
  g_autofree gchar *want = g_strdup_printf ("%s%s", file, c->message);
  if (strstr (err, c->message) == NULL || strstr (err, file) == NULL)
    g_error ("expected '%s' in: %s", want, err);
  /* Nothing started: no campaign directory. */
  g_assert_false (g_file_test (dir, G_FILE_TEST_EXISTS));
}

static void
test_long_line (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autoptr (GString) s = g_string_new ("echo ok\necho ");
  for (guint i = 0; i < (1u << 20); i++)
    g_string_append_c (s, 'x');
  g_string_append_c (s, '\n');
  g_autofree gchar *file = tb_write (d, "long.txt", s->str);
  g_autofree gchar *dir = campaign_dir (d, "c");
  const char *argv[] = { tb_datc (), "run", "--dir", dir, file, NULL };
  g_autofree gchar *err = NULL;
  g_assert_cmpint (tb_run (d, argv, 30, &err), ==, 2);
  g_assert_nonnull (strstr (err, ":2:"));
  g_assert_false (g_file_test (dir, G_FILE_TEST_EXISTS));
}

static void
test_other_taskfile_refused (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *f1 = tb_write (d, "a.txt", "true\n");
  g_autofree gchar *f2 = tb_write (d, "b.txt", "false\n");
  g_autofree gchar *dir = campaign_dir (d, "c");
  const char *a1[] = { tb_datc (), "run", "--dir", dir, f1, NULL };
  const char *a2[] = { tb_datc (), "run", "--dir", dir, f2, NULL };
  g_assert_cmpint (tb_run (d, a1, 30, NULL), ==, 0);
  g_autofree gchar *err = NULL;
  g_assert_cmpint (tb_run (d, a2, 30, &err), ==, 2);
  g_assert_nonnull (strstr (err, "different file"));
  /* And running the finished campaign again runs nothing. */
  g_assert_cmpint (tb_run (d, a1, 30, NULL), ==, 0);
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 1);
}

/* ---- a task that forks and times out leaves nothing ------------------- */

static void
test_timeout_kills_children (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *pids = g_build_filename (d->path, "pids", NULL);
  g_autofree gchar *line = g_strdup_printf (
      "{\"sh\": \"sleep 300 & echo $! >> %s; sh -c 'sleep 300' & echo $! >> %s; wait\", "
      "\"timeout\": 0.5}\n",
      pids, pids);
  g_autofree gchar *file = tb_write (d, "t.jsonl", line);
  g_autofree gchar *dir = campaign_dir (d, "c");
  const char *argv[] = { tb_datc (), "run", "--dir", dir, file, NULL };
  g_assert_cmpint (tb_run (d, argv, 60, NULL), ==, 1);
  g_autoptr (GHashTable) res = tb_results (dir);
  gint64 one = 1;
  JsonObject *o = g_hash_table_lookup (res, &one);
  g_assert_cmpstr (json_object_get_string_member (o, "status"), ==, "timeout");
  g_autofree gchar *text = NULL;
  g_assert_true (g_file_get_contents (pids, &text, NULL, NULL));
  g_auto (GStrv) lines = g_strsplit (g_strstrip (text), "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 2);
  for (guint i = 0; lines[i]; i++)
    g_assert_true (tb_pid_gone (atoi (lines[i])));
}

/* ---- an agent killed with -9 mid-run ---------------------------------- */

typedef struct {
  const char *dir;
  guint64 want;
} ResultsAtLeast;

static gboolean
results_at_least (gpointer p)
{
  ResultsAtLeast *r = p;
  g_autofree gchar *path = g_build_filename (r->dir, "results.jsonl", NULL);
  return tb_count_lines (path) >= r->want;
}

static gboolean
two_agents (gpointer p)
{
  g_autoptr (GArray) a = tb_find_agents (p);
  return a->len >= 2;
}

static void
check_complete (const char *dir, guint n, guint *max_attempt)
{
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, n);
  *max_attempt = 0;
  for (gint64 id = 1; id <= n; id++)
    {
      JsonObject *o = g_hash_table_lookup (res, &id);
      g_assert_nonnull (o);
      g_assert_cmpint (json_object_get_int_member (o, "exit_code"), ==, 0);
      *max_attempt = MAX (*max_attempt, (guint) json_object_get_int_member (o, "attempt"));
    }
}

static void
agent_interrupted (int sig)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autoptr (GString) tasks = g_string_new (NULL);
  guint n = 200;
  for (guint i = 1; i <= n; i++)
    g_string_append (tasks, "sleep 0.05\n");
  g_autofree gchar *file = tb_write (d, "tasks.txt", tasks->str);
  g_autofree gchar *dir = campaign_dir (d, "c");
  const char *argv[] = { tb_datc (),
                         "run",
                         "--dir",
                         dir,
                         "--local-agents",
                         "2",
                         "--local-slots",
                         "4",
                         "--agent-timeout-ms",
                         "1500",
                         "--heartbeat-ms",
                         "200",
                         file,
                         NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  ResultsAtLeast r = { dir, 20 };
  g_assert_true (tb_await (two_agents, dir, 30));
  g_assert_true (tb_await (results_at_least, &r, 60));

  g_autoptr (GArray) agents = tb_find_agents (dir);
  g_assert_cmpuint (agents->len, >=, 1);
  int victim = g_array_index (agents, int, 0);
  g_assert_cmpint (victim, >, 0);
  kill (victim, sig);

  int status = tb_wait (master, 120);
  if (status != 0)
    {
      g_autofree gchar *err = tb_proc_stderr (master);
      g_printerr ("%s", err);
    }
  g_assert_cmpint (status, ==, 0);
  g_assert_true (tb_pid_gone (victim));
  guint max_attempt;
  check_complete (dir, n, &max_attempt);
  /* The victim held tasks when it went: they ran again elsewhere. */
  g_assert_cmpuint (max_attempt, >=, 2);
  g_autoptr (GArray) left = tb_find_agents (dir);
  g_assert_cmpuint (left->len, ==, 0);
}

static void
test_agent_killed (void)
{
  agent_interrupted (SIGKILL);
}

static void
test_agent_sigterm_drains (void)
{
  agent_interrupted (SIGTERM);
}

/* ---- an agent stopped past the timeout ------------------------------ */

static gboolean
agent_lost_traced (gpointer dir)
{
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  for (guint i = 0; i < trace->len; i++)
    if (g_strcmp0 (json_object_get_string_member_with_default (trace->pdata[i], "event", ""),
                   "agent_lost")
        == 0)
      return TRUE;
  return FALSE;
}

typedef struct {
  const char *dir;
  int pid;
} Prefetched;

/* The agent of `pid` holds more tasks than it has slots (live status). */
static gboolean
holds_prefetched (gpointer data)
{
  Prefetched *p = data;
  g_autoptr (JsonObject) st = tb_status (p->dir);
  if (st == NULL || !json_object_has_member (st, "agents"))
    return FALSE;
  g_autofree gchar *tag = g_strdup_printf ("-%d-", p->pid);
  JsonArray *agents = json_object_get_array_member (st, "agents");
  for (guint i = 0; i < json_array_get_length (agents); i++)
    {
      JsonObject *a = json_array_get_object_element (agents, i);
      if (strstr (json_object_get_string_member (a, "id"), tag) != NULL)
        return json_object_get_int_member (a, "running")
                   + json_object_get_int_member (a, "prefetched")
               > json_object_get_int_member (a, "slots");
    }
  return FALSE;
}

/* An agent stopped (SIGSTOP) past --agent-timeout-ms is declared lost and
 * the tasks it held, started or only prefetched, run elsewhere.  When it
 * is continued it must not start a prefetched one whose result is already
 * recorded: every execution (tasks log their id and start time) starts
 * before the recorded result of its task finished. */
static void
test_stopped_agent_starts_nothing_recorded (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *log = g_build_filename (d->path, "executions", NULL);
  g_autoptr (GString) tasks = g_string_new (NULL);
  guint n = 48;
  for (guint i = 1; i <= n; i++)
    g_string_append_printf (tasks, "sh -c 'echo %u $(date +%%s%%6N) >> %s; sleep 1'\n", i, log);
  g_autofree gchar *file = tb_write (d, "tasks.txt", tasks->str);
  g_autofree gchar *dir = campaign_dir (d, "c");
  /* Tasks of a second: on its own an agent asks ahead for none (a round
   * trip here is a thousandth of a task), and the premise is tasks held
   * ahead of the slots. */
  g_autofree gchar *script
      = g_strdup_printf ("#!/bin/sh\nexec %s --prefetch 4 \"$@\"\n", tb_agent ());
  g_autofree gchar *wrapper = tb_write (d, "datc-agent-prefetch-4", script);
  g_assert_cmpint (g_chmod (wrapper, 0755), ==, 0);
  g_autofree gchar *agent_env = g_strconcat ("DATC_AGENT=", wrapper, NULL);
  const char *argv[] = { "env",
                         agent_env,
                         tb_datc (),
                         "run",
                         "--dir",
                         dir,
                         "--local-agents",
                         "2",
                         "--local-slots",
                         "4",
                         "--agent-timeout-ms",
                         "3000",
                         "--heartbeat-ms",
                         "500",
                         file,
                         NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  ResultsAtLeast r = { dir, 4 };
  g_assert_true (tb_await (two_agents, dir, 30));
  g_assert_true (tb_await (results_at_least, &r, 60));
  g_autoptr (GArray) agents = tb_find_agents (dir);
  Prefetched p = { dir, g_array_index (agents, int, 0) };
  g_assert_cmpint (p.pid, >, 1);
  /* Stopped while it holds tasks it has not started. */
  g_assert_true (tb_await (holds_prefetched, &p, 30));
  kill (p.pid, SIGSTOP);
  int victim = p.pid;

  /* Lost, and what it held has been running elsewhere for a while. */
  g_assert_true (tb_await (agent_lost_traced, dir, 30));
  g_autofree gchar *results = g_build_filename (dir, "results.jsonl", NULL);
  r.want = tb_count_lines (results) + 12;
  gboolean enough = tb_await (results_at_least, &r, 60);
  kill (victim, SIGCONT);
  g_assert_true (enough);

  int status = tb_wait (master, 120);
  if (status != 0)
    {
      g_autofree gchar *err = tb_proc_stderr (master);
      g_printerr ("%s", err);
    }
  g_assert_cmpint (status, ==, 0);

  /* The premise: it held more than it was running (prefetched tasks). */
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  gint64 requeued = 0;
  for (guint i = 0; i < trace->len; i++)
    if (g_strcmp0 (json_object_get_string_member_with_default (trace->pdata[i], "event", ""),
                   "agent_lost")
        == 0)
      requeued += json_object_get_int_member_with_default (trace->pdata[i], "requeued", 0);
  g_assert_cmpint (requeued, >, 2);

  /* End-game copies (task_replicated) may start while the original's
   * result is on its way: no master can know it ended.  Those tasks are
   * tests/replicate's; the rule holds for every other. */
  g_autoptr (GHashTable) copied = g_hash_table_new (NULL, NULL);
  for (guint i = 0; i < trace->len; i++)
    if (g_strcmp0 (json_object_get_string_member_with_default (trace->pdata[i], "event", ""),
                   "task_replicated")
        == 0)
      {
        gint64 id = json_object_get_int_member (trace->pdata[i], "task");
        g_assert_cmpint (id, >=, 1);
        g_assert_cmpint (id, <=, (gint64) n);
        g_hash_table_add (copied, GSIZE_TO_POINTER ((gsize) id));
      }

  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, n);
  g_autofree gchar *text = NULL;
  g_assert_true (g_file_get_contents (log, &text, NULL, NULL));
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  guint checked = 0;
  for (guint i = 0; lines[i]; i++)
    {
      gint64 id, start_us;
      if (sscanf (lines[i], "%" G_GINT64_FORMAT " %" G_GINT64_FORMAT, &id, &start_us) != 2)
        continue;
      JsonObject *o = g_hash_table_lookup (res, &id);
      g_assert_nonnull (o);
      gint64 finished = json_object_get_int_member (o, "finished");
      if (start_us > finished && !g_hash_table_contains (copied, GSIZE_TO_POINTER ((gsize) id)))
        g_error ("task %" G_GINT64_FORMAT " started %.3f s after its recorded result finished", id,
                 (start_us - finished) / 1e6);
      checked++;
    }
  g_assert_cmpuint (checked, >=, n);
}

static gboolean
file_exists (gpointer path)
{
  return g_file_test (path, G_FILE_TEST_EXISTS);
}

/* An agent that drains gives its tasks back once: the master sends it
 * nothing more on what was left of its credit (it used to send the
 * requeued tasks straight back, burning an attempt each round trip).
 * The tasks are slow on their first attempt only. */
static void
test_drained_tasks_are_not_sent_back (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autoptr (GString) tasks = g_string_new (NULL);
  for (guint i = 1; i <= 2; i++)
    g_string_append_printf (tasks,
                            "if [ -e %s/started.%u ]; then exit 0; fi; "
                            "touch %s/started.%u; sleep 60\n",
                            d->path, i, d->path, i);
  g_autofree gchar *file = tb_write (d, "tasks.txt", tasks->str);
  g_autofree gchar *dir = campaign_dir (d, "c");
  const char *argv[] = { tb_datc (), "run",           "--dir", dir,  "--local-agents",
                         "1",        "--local-slots", "2",     file, NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  for (guint i = 1; i <= 2; i++)
    {
      g_autofree gchar *mark = g_strdup_printf ("%s/started.%u", d->path, i);
      g_assert_true (tb_await (file_exists, mark, 30));
    }
  g_autoptr (GArray) agents = tb_find_agents (dir);
  g_assert_cmpuint (agents->len, ==, 1);
  g_assert_cmpint (g_array_index (agents, int, 0), >, 1);
  kill (g_array_index (agents, int, 0), SIGTERM);

  g_assert_cmpint (tb_wait (master, 60), ==, 0);
  guint max_attempt;
  check_complete (dir, 2, &max_attempt);
  g_assert_cmpuint (max_attempt, ==, 2);
}

/* ---- hundreds of slots under the usual 1024-file soft limit ----------- */

#define WIDE_SLOTS 400

typedef struct {
  const char *dir;
  guint want;
} Arrivals;

static gboolean
all_arrived (gpointer data)
{
  Arrivals *a = data;
  g_autoptr (GDir) d = g_dir_open (a->dir, 0, NULL);
  guint n = 0;
  while (d != NULL && g_dir_read_name (d) != NULL)
    n++;
  return n >= a->want;
}

/* Each running task holds five of the agent's fds and each agent one of the
 * master's: under a soft limit of 1024 an agent of 400 slots still runs all
 * 400 at once (they meet at a barrier: each holds a FIFO open, says it is
 * there, and waits for EOF, which comes when the test lets go of its end),
 * and every task still sees the user's limit of 1024. */
static void
test_wide_agent_under_file_limit (void)
{
  struct rlimit user, lim;
  g_assert_cmpint (getrlimit (RLIMIT_NOFILE, &user), ==, 0);
  if (user.rlim_max != RLIM_INFINITY && user.rlim_max < 4096)
    g_error ("the hard RLIMIT_NOFILE (%lu) is below what this test needs (4096)",
             (unsigned long) user.rlim_max);

  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *fifo = g_build_filename (d->path, "barrier", NULL);
  g_autofree gchar *here = g_build_filename (d->path, "here", NULL);
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  g_assert_cmpint (g_mkdir (here, 0700), ==, 0);
  /* Our end stays open (O_RDWR never blocks on a FIFO) until all arrived;
   * CLOEXEC, or the tasks would inherit a writer and never see EOF. */
  int hold = open (fifo, O_RDWR | O_CLOEXEC);
  g_assert_cmpint (hold, >=, 0);

  g_autoptr (GString) tasks = g_string_new (NULL);
  for (guint i = 0; i < WIDE_SLOTS; i++)
    g_string_append_printf (tasks, "sh -c '{ : > %s/$$; read x || :; } < %s; ulimit -Sn'\n", here,
                            fifo);
  g_autofree gchar *file = tb_write (d, "tasks.txt", tasks->str);
  g_autofree gchar *dir = campaign_dir (d, "c");
  g_autofree gchar *slots = g_strdup_printf ("%u", WIDE_SLOTS);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--local-slots", slots, file, NULL };

  lim = user;
  lim.rlim_cur = 1024;
  g_assert_cmpint (setrlimit (RLIMIT_NOFILE, &lim), ==, 0);
  g_autoptr (TbProc) p = tb_spawn (d, "run", argv);
  g_assert_cmpint (setrlimit (RLIMIT_NOFILE, &user), ==, 0);

  Arrivals a = { here, WIDE_SLOTS };
  gboolean met = tb_await (all_arrived, &a, 120);
  close (hold);
  if (!met)
    {
      /* A failed assertion skips the cleanups: stop the campaign first
       * (its agent kills the tasks that wait at the barrier). */
      tb_proc_signal (p, SIGTERM);
      tb_wait (p, 60);
    }
  g_assert_true (met);
  int status = tb_wait (p, 120);
  if (status != 0)
    g_printerr ("%s", tb_proc_stderr (p));
  g_assert_cmpint (status, ==, 0);

  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, WIDE_SLOTS);
  for (gint64 id = 1; id <= WIDE_SLOTS; id++)
    {
      JsonObject *o = g_hash_table_lookup (res, &id);
      g_assert_nonnull (o);
      g_assert_cmpstr (json_object_get_string_member (o, "status"), ==, "exited");
      g_assert_cmpint (json_object_get_int_member (o, "attempt"), ==, 1);
    }
  for (guint i = 0; i < 3; i++)
    {
      g_autofree gchar *ids = g_strdup_printf ("%u", 1 + g_test_rand_int_range (0, WIDE_SLOTS));
      const char *out_argv[] = { tb_datc (), "output", dir, ids, NULL };
      g_autoptr (TbProc) o = tb_spawn (d, "output", out_argv);
      g_assert_cmpint (tb_wait (o, 30), ==, 0);
      g_autofree gchar *out = tb_proc_stdout (o);
      g_assert_cmpstr (out, ==, "1024\n");
    }
}

/* ---- a master whose name the node cannot resolve -------------------- */

/* The agent runs where the hosts database is /etc/hosts alone (a private
 * mount namespace with its own nsswitch.conf: no lookup leaves the
 * machine), so the name is certainly unknown.  libzmq would retry it in
 * silence until the reconnect timeout; the agent says so and exits 3. */
static void
test_unknown_master_host (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autoptr (GError) error = NULL;
  DatcCurveKeypair server, agent;
  g_assert_true (datc_curve_keypair_generate (&server, &error));
  g_assert_true (datc_curve_keypair_generate (&agent, &error));
  g_autofree gchar *key = g_build_filename (d->path, "agent.key", NULL);
  g_assert_true (datc_curve_keypair_save (&agent, key, &error));
  g_assert_no_error (error);
  g_autofree gchar *nss = tb_write (d, "nsswitch.conf", "hosts: files\n");
  const char *endpoint = "tcp://no-such-master.invalid:5555";
  g_autofree gchar *q_nss = g_shell_quote (nss);
  g_autofree gchar *q_agent = g_shell_quote (tb_agent ());
  g_autofree gchar *q_server = g_shell_quote (server.public_z85);
  g_autofree gchar *q_key = g_shell_quote (key);
  g_autofree gchar *inner = g_strdup_printf (
      "mount --bind %s /etc/nsswitch.conf && exec %s --connect %s --server-key %s "
      "--key-file %s --slots 1 --reconnect-timeout 300",
      q_nss, q_agent, endpoint, q_server, q_key);
  const char *argv[]
      = { "/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", inner, NULL };
  g_autoptr (TbProc) p = tb_spawn (d, "agent", argv);
  g_assert_cmpint (tb_wait (p, 60), ==, 3);
  g_autofree gchar *err = tb_proc_stderr (p);
  g_assert_nonnull (strstr (err, "\"no-such-master.invalid\" is not known here"));
  g_assert_nonnull (strstr (err, endpoint));
  datc_curve_keypair_clear (&server);
  datc_curve_keypair_clear (&agent);
}

/* ---- a master the agent cannot reach --------------------------------- */

/* A port bound but not listening refuses every connect, and stays ours
 * while the test runs.  ZeroMQ would retry it in silence every 100 ms; the
 * agent says why at once, and once, not once per retry. */
static void
test_agent_says_it_cannot_reach (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autoptr (GError) error = NULL;
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof sin;
  g_assert_cmpint (bind (fd, (struct sockaddr *) &sin, sizeof sin), ==, 0);
  g_assert_cmpint (getsockname (fd, (struct sockaddr *) &sin, &len), ==, 0);
  DatcCurveKeypair server, agent;
  g_assert_true (datc_curve_keypair_generate (&server, &error));
  g_assert_true (datc_curve_keypair_generate (&agent, &error));
  g_autofree gchar *key = g_build_filename (d->path, "agent.key", NULL);
  g_assert_true (datc_curve_keypair_save (&agent, key, &error));
  g_assert_no_error (error);
  g_autofree gchar *endpoint = g_strdup_printf ("tcp://127.0.0.1:%u", ntohs (sin.sin_port));
  const char *argv[] = { tb_agent (),
                         "--connect",
                         endpoint,
                         "--server-key",
                         server.public_z85,
                         "--key-file",
                         key,
                         "--slots",
                         "1",
                         "--reconnect-timeout",
                         "3",
                         NULL };
  gint64 t0 = g_get_monotonic_time ();
  g_autoptr (TbProc) p = tb_spawn (d, "agent", argv);
  g_autofree gchar *line = g_strdup_printf ("datc-agent on %s: cannot reach %s: Connection "
                                            "refused (retrying)\n",
                                            g_get_host_name (), endpoint);
  g_assert_true (tb_await_stderr (p, line, 10));
  g_assert_cmpint (g_get_monotonic_time () - t0, <, 3 * G_USEC_PER_SEC);
  g_assert_cmpint (tb_wait (p, 30), ==, 3);
  g_autofree gchar *err = tb_proc_stderr (p);
  const char *first = strstr (err, "cannot reach");
  g_assert_nonnull (first);
  g_assert_null (strstr (first + 1, "cannot reach"));
  close (fd);
  datc_curve_keypair_clear (&server);
  datc_curve_keypair_clear (&agent);
}

/* ---- why each task ended ---------------------------------------------- */

static const char *
class_of (GHashTable *res, gint64 id)
{
  JsonObject *o = g_hash_table_lookup (res, &id);
  g_assert_nonnull (o);
  return json_object_get_string_member_with_default (o, "class", "(none)");
}

/* Every class an agent can produce for real, in results.jsonl, `datc
 * results` (a CLASS column and a line per class) and `--json`.  One slot,
 * so the fast failures below come one after another; task 3's SIGKILL has
 * no OOM evidence (nothing raised a counter): "signal", never "oom". */
static void
test_results_say_why_each_task_ended (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tb_write (d, "t.jsonl",
                                     "{\"sh\": \"true\"}\n"
                                     "{\"sh\": \"exit 3\"}\n"
                                     "{\"sh\": \"kill -9 $$\"}\n"
                                     "{\"sh\": \"sleep 30\", \"timeout\": 0.3}\n"
                                     "{\"cmd\": [\"/nonexistent/datc-test-program\"]}\n");
  g_autofree gchar *dir = campaign_dir (d, "c");
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--local-slots", "1", file, NULL };
  g_assert_cmpint (tb_run (d, argv, 60, NULL), ==, 1);

  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpstr (class_of (res, 1), ==, "exit");
  g_assert_cmpstr (class_of (res, 2), ==, "exit");
  g_assert_cmpstr (class_of (res, 3), ==, "signal");
  g_assert_cmpstr (class_of (res, 4), ==, "timeout");
  g_assert_cmpstr (class_of (res, 5), ==, "spawn_failed");
  gint64 three = 3;
  JsonObject *killed = g_hash_table_lookup (res, &three);
  g_assert_cmpint (json_object_get_int_member (killed, "signal"), ==, SIGKILL);
  g_assert_false (json_object_has_member (killed, "oom_evidence"));

  const char *list[] = { tb_datc (), "results", dir, NULL };
  g_autoptr (TbProc) p = tb_spawn (d, "results", list);
  g_assert_cmpint (tb_wait (p, 30), ==, 0);
  g_autofree gchar *text = tb_proc_stdout (p);
  g_assert_nonnull (strstr (text, " CLASS "));
  g_assert_true (g_regex_match_simple ("\\n +3 +1 signaled +signal +137 +9 ", text, 0, 0));
  g_assert_true (g_regex_match_simple ("\\n +4 +1 timeout +timeout ", text, 0, 0));
  g_assert_nonnull (strstr (text, "\n# exit         2\n# signal       1\n# timeout      1\n"
                                  "# spawn_failed 1\n"));

  const char *json[] = { tb_datc (), "results", dir, "--json", "--failed", NULL };
  g_autoptr (TbProc) pj = tb_spawn (d, "results-json", json);
  g_assert_cmpint (tb_wait (pj, 30), ==, 0);
  g_autofree gchar *lines = tb_proc_stdout (pj);
  g_assert_nonnull (strstr (lines, "\"status\":\"signaled\",\"class\":\"signal\""));
  g_assert_nonnull (strstr (lines, "\"class\":\"spawn_failed\""));
  g_assert_null (strstr (lines, "# "));
}

static gboolean
node_excluded_traced (gpointer dir)
{
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  for (guint i = 0; i < trace->len; i++)
    if (g_strcmp0 (json_object_get_string_member_with_default (trace->pdata[i], "event", ""),
                   "node_excluded")
        == 0)
      return TRUE;
  return FALSE;
}

/* Three tasks in a row that fail at once: the node is taken for broken,
 * its agent retired (it gives back the tasks it holds, which a new agent
 * runs) and node_excluded traced with the host.  The local site has one
 * host, the last it ran on, and fork could not exclude it anyway: it is
 * drained, not excluded, and stderr says why. */
static void
test_fast_failures_drain_the_node (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  GString *tasks = g_string_new ("exit 1\nexit 1\nexit 1\n");
  for (guint i = 0; i < 20; i++)
    g_string_append (tasks, "true\n");
  g_autofree gchar *file = tb_write (d, "t.txt", tasks->str);
  g_string_free (tasks, TRUE);
  g_autofree gchar *dir = campaign_dir (d, "c");
  const char *argv[] = { tb_datc (),       "run", "--dir", dir, "--local-slots", "1",
                         "--local-agents", "1",   file,    NULL };
  g_autofree gchar *err = NULL;
  g_assert_cmpint (tb_run (d, argv, 60, &err), ==, 1);
  g_assert_true (node_excluded_traced (dir));

  g_autoptr (GPtrArray) trace = tb_trace (dir);
  JsonObject *ev = NULL;
  guint exited = 0;
  for (guint i = 0; i < trace->len; i++)
    {
      const char *name = json_object_get_string_member_with_default (trace->pdata[i], "event", "");
      if (g_str_equal (name, "node_excluded"))
        {
          g_assert_null (ev); /* once: the retired agent's later results do not count */
          ev = trace->pdata[i];
        }
      if (g_str_equal (name, "agent_exited"))
        exited++;
    }
  g_assert_nonnull (ev);
  g_assert_cmpstr (json_object_get_string_member (ev, "site"), ==, "local");
  g_assert_cmpstr (json_object_get_string_member (ev, "host"), ==, g_get_host_name ());
  g_assert_cmpint (json_object_get_int_member (ev, "agents"), ==, 1);
  g_assert_false (json_object_get_boolean_member (ev, "excluded"));
  g_assert_nonnull (strstr (json_object_get_string_member (ev, "why"), "3 tasks in a row failed"));
  g_assert_nonnull (strstr (err, "1 agent drained, but not excluded"));
  /* The retired agent left and another ran the rest. */
  g_assert_cmpuint (exited, >=, 2);
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 23);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/campaign/runs-10000-tasks-on-4-agents", test_many_tasks);
  g_test_add_func ("/campaign/exit-status-says-whether-tasks-failed", test_exit_status);
  g_test_add_func ("/campaign/retries-a-failing-task", test_retries);
  for (guint i = 0; i < G_N_ELEMENTS (bad_cases); i++)
    {
      g_autofree gchar *path = g_strdup_printf ("/campaign/bad-input/%s", bad_cases[i].name);
      g_test_add_data_func (path, &bad_cases[i], test_bad_input);
    }
  g_test_add_func ("/campaign/bad-input/line-over-1-MiB", test_long_line);
  g_test_add_func ("/campaign/refuses-another-task-file", test_other_taskfile_refused);
  g_test_add_func ("/campaign/timeout-leaves-no-process-behind", test_timeout_kills_children);
  g_test_add_func ("/campaign/results-say-why-each-task-ended",
                   test_results_say_why_each_task_ended);
  g_test_add_func ("/campaign/fast-failures-drain-the-node", test_fast_failures_drain_the_node);
  g_test_add_func ("/campaign/400-slots-under-a-1024-file-limit", test_wide_agent_under_file_limit);
  g_test_add_func ("/campaign/agent-says-once-that-it-cannot-reach-its-master",
                   test_agent_says_it_cannot_reach);
  g_test_add_func ("/campaign/agent-names-a-master-host-it-cannot-resolve",
                   test_unknown_master_host);
  g_test_add_func ("/campaign/agent-killed-its-tasks-run-elsewhere", test_agent_killed);
  g_test_add_func ("/campaign/agent-sigterm-drains-and-tasks-rerun", test_agent_sigterm_drains);
  g_test_add_func ("/campaign/stopped-agent-starts-nothing-already-recorded",
                   test_stopped_agent_starts_nothing_recorded);
  g_test_add_func ("/campaign/drained-tasks-are-not-sent-back-to-the-draining-agent",
                   test_drained_tasks_are_not_sent_back);
  return g_test_run ();
}
