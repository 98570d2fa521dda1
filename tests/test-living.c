/* test-living.c: a campaign seen, fed and stopped while it runs: status
 * live and offline against results.jsonl, submit (good and bad), cancel,
 * open campaigns with waves of submits, the progress line in a real
 * terminal (tmux), and the control socket's permissions. */
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zmq.h>

#include "harness.h"

/* For `env`: the fast `datc` front with no datc-full to hand work to, so
 * that what it answered, it answered itself (master/front.c). */
#define NO_FULL_DATC "DATC_FULL=/nonexistent/datc-full"

/* `datc status --json`, or NULL when it fails (the master still starting). */
static JsonObject *
try_status_json (TbDir *d, const char *dir)
{
  const char *argv[] = { tb_datc (), "status", dir, "--json", NULL };
  g_autoptr (TbProc) p = tb_spawn (d, "status", argv);
  if (tb_wait (p, 60) != 0)
    return NULL;
  g_autofree gchar *out = tb_proc_stdout (p);
  g_autoptr (JsonParser) parser = json_parser_new ();
  if (!json_parser_load_from_data (parser, out, -1, NULL))
    return NULL;
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

static JsonObject *
status_json (TbDir *d, const char *dir)
{
  const char *argv[] = { tb_datc (), "status", dir, "--json", NULL };
  g_autoptr (TbProc) p = tb_spawn (d, "status", argv);
  g_assert_cmpint (tb_wait (p, 60), ==, 0);
  g_autofree gchar *out = tb_proc_stdout (p);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  json_parser_load_from_data (parser, out, -1, &error);
  g_assert_no_error (error);
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

static gint64
tasks (JsonObject *st, const char *k)
{
  return json_object_get_int_member (json_object_get_object_member (st, "tasks"), k);
}

static int
submit (TbDir *d, const char *const *argv, gchar **err)
{
  return tb_run (d, argv, 60, err);
}

typedef struct {
  TbDir *d;
  const char *dir;
  gint64 total;
} Idle;

/* An open campaign whose bag is empty and nothing runs. */
static gboolean
campaign_idle (gpointer p)
{
  Idle *w = p;
  g_autoptr (JsonObject) st = try_status_json (w->d, w->dir);
  if (st == NULL)
    return FALSE;
  return tasks (st, "total") == w->total && tasks (st, "queued") == 0 && tasks (st, "running") == 0
         && tasks (st, "prefetched") == 0;
}

static void
count_results (const char *dir, gint64 *done, gint64 *failed, gint64 *cancelled)
{
  g_autoptr (GHashTable) res = tb_results (dir);
  GHashTableIter it;
  gpointer v;
  *done = *failed = *cancelled = 0;
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      const char *st = json_object_get_string_member (v, "status");
      if (g_str_equal (st, "cancelled"))
        (*cancelled)++;
      else if (g_str_equal (st, "exited") && json_object_get_int_member (v, "exit_code") == 0)
        (*done)++;
      else
        (*failed)++;
    }
}

static void
check_status_matches_results (TbDir *d, const char *dir, gboolean running)
{
  g_autoptr (JsonObject) st = status_json (d, dir);
  gint64 done, failed, cancelled;
  count_results (dir, &done, &failed, &cancelled);
  g_assert_cmpint (
      json_object_get_boolean_member (json_object_get_object_member (st, "master"), "running"), ==,
      running);
  g_assert_cmpint (tasks (st, "done"), ==, done);
  g_assert_cmpint (tasks (st, "failed"), ==, failed);
  g_assert_cmpint (tasks (st, "cancelled"), ==, cancelled);
  g_assert_cmpint (tasks (st, "total"), ==, done + failed + cancelled);
}

/* ---- open campaign: status, waves of submits, bad submit, close ------- */

static void
test_open_campaign (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tb_write (d, "t.txt", "true\nfalse\nsh -c 'echo one'\n");
  g_autofree gchar *wave = tb_write (d, "wave.txt", "echo w1\necho w2\nsh -c 'exit 4'\n");
  g_autofree gchar *bad = tb_write (d, "bad.jsonl", "{\"sh\": \"true\"}\n{\"sh\": 5}\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[]
      = { tb_datc (), "run", "--dir", dir, "--open", "--local-slots", "2", file, NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  g_autofree gchar *control = g_build_filename (dir, "control", NULL);
  Idle idle = { d, dir, 3 };
  g_assert_true (tb_await (campaign_idle, &idle, 60));
  check_status_matches_results (d, dir, TRUE);

  /* Three waves: a file, a command, stdin is covered by the CLI's own path. */
  for (guint w = 0; w < 3; w++)
    {
      const char *a1[] = { tb_datc (), "submit", dir, "--file", wave, NULL };
      g_autofree gchar *word = g_strdup_printf ("wave-%u", w);
      const char *a2[] = { tb_datc (), "submit", dir, "--", "echo", word, NULL };
      g_assert_cmpint (submit (d, a1, NULL), ==, 0);
      g_assert_cmpint (submit (d, a2, NULL), ==, 0);
      idle.total += 4;
      g_assert_true (tb_await (campaign_idle, &idle, 60));
      check_status_matches_results (d, dir, TRUE);
    }

  /* A bad line: refused, nothing added. */
  const char *a3[] = { tb_datc (), "submit", dir, "--file", bad, NULL };
  g_autofree gchar *err = NULL;
  g_assert_cmpint (submit (d, a3, &err), ==, 2);
  g_assert_nonnull (strstr (err, ":2:"));
  g_autoptr (JsonObject) st = status_json (d, dir);
  g_assert_cmpint (tasks (st, "total"), ==, idle.total);

  /* The submitted command ran and its output reads back. */
  const char *out_argv[] = { tb_datc (), "output", dir, "7", NULL };
  g_autoptr (TbProc) out = tb_spawn (d, "output", out_argv);
  g_assert_cmpint (tb_wait (out, 30), ==, 0);
  g_autofree gchar *text = tb_proc_stdout (out);
  g_assert_cmpstr (text, ==, "wave-0\n");

  const char *close_argv[] = { tb_datc (), "close", dir, NULL };
  g_assert_cmpint (tb_run (d, close_argv, 30, NULL), ==, 0);
  /* Some tasks failed on purpose: exit 1. */
  g_assert_cmpint (tb_wait (master, 60), ==, 1);
  check_status_matches_results (d, dir, FALSE);
  g_autoptr (GArray) left = tb_find_agents (dir);
  g_assert_cmpuint (left->len, ==, 0);

  /* Offline submit: journaled, picked up by the next run. */
  const char *a4[] = { tb_datc (), "submit", dir, "--", "echo", "later", NULL };
  g_assert_cmpint (submit (d, a4, NULL), ==, 0);
  g_autoptr (JsonObject) st2 = status_json (d, dir);
  g_assert_cmpint (tasks (st2, "queued"), ==, 1);
  const char *again[] = { tb_datc (), "run", "--dir", dir, file, NULL };
  g_assert_cmpint (tb_run (d, again, 60, NULL), ==, 1);
  check_status_matches_results (d, dir, FALSE);
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, idle.total + 1);
}

/* ---- while the master loads ------------------------------------------ */

typedef struct {
  TbDir *d;
  const char *dir;
  JsonObject *st; /* the loading status, once seen */
} Loading;

static gboolean
says_loading (gpointer p)
{
  Loading *w = p;
  g_autoptr (JsonObject) st = try_status_json (w->d, w->dir);
  JsonObject *m = st ? json_object_get_object_member (st, "master") : NULL;
  if (m == NULL || !json_object_has_member (m, "loading"))
    return FALSE;
  w->st = json_object_ref (st);
  return TRUE;
}

/* The task file is a FIFO, so the master sits in its load until the test
 * writes it: meanwhile `status` answers (loading, what it reads) and a
 * `submit` is kept, then applied once the campaign is loaded. */
static void
test_answers_while_loading (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *fifo = g_build_filename (d->path, "t.fifo", NULL);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--local-slots", "2", fifo, NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);

  Loading w = { d, dir, NULL };
  g_assert_true (tb_await (says_loading, &w, 30));
  g_autoptr (JsonObject) st = w.st;
  JsonObject *loading
      = json_object_get_object_member (json_object_get_object_member (st, "master"), "loading");
  g_assert_cmpstr (json_object_get_string_member (loading, "phase"), ==, "task file");
  g_assert_cmpint (tasks (st, "total"), ==, 0);
  /* The fast front's (no datc-full to fall back on): the loading
   * thread renders the text too. */
  const char *text_argv[] = { "env", NO_FULL_DATC, tb_datc (), "status", dir, NULL };
  g_autoptr (TbProc) text = tb_spawn (d, "status-text", text_argv);
  g_assert_cmpint (tb_wait (text, 30), ==, 0);
  g_autofree gchar *out = tb_proc_stdout (text);
  g_assert_nonnull (strstr (out, "loading: reading the task file"));

  const char *sub_argv[] = { tb_datc (), "submit", dir, "--", "echo", "kept", NULL };
  g_autoptr (TbProc) sub = tb_spawn (d, "submit", sub_argv);
  int fd = open (fifo, O_WRONLY | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);
  const char tasks_text[] = "echo a\necho b\necho c\n";
  g_assert_cmpint (write (fd, tasks_text, sizeof tasks_text - 1), ==, sizeof tasks_text - 1);
  close (fd);
  g_assert_cmpint (tb_wait (sub, 30), ==, 0);
  g_assert_cmpint (tb_wait (master, 60), ==, 0);
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 4);
}

/* A task file refused while the master holds the directory it made: the
 * directory is gone again, as before any lock was taken. */
static void
test_bad_task_file_leaves_no_directory (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tb_write (d, "bad.jsonl", "{\"sh\": \"true\"}\n{\"sh\": 5}\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, file, NULL };
  g_autofree gchar *err = NULL;
  g_assert_cmpint (tb_run (d, argv, 30, &err), ==, 2);
  g_assert_nonnull (strstr (err, ":2:"));
  g_assert_false (g_file_test (dir, G_FILE_TEST_EXISTS));
}

/* ---- cancel mid-run --------------------------------------------------- */

typedef struct {
  const char *pids;
  guint want;
} PidsWritten;

static gboolean
pids_written (gpointer p)
{
  PidsWritten *w = p;
  return tb_count_lines (w->pids) >= w->want;
}

static void
test_cancel (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *pids = g_build_filename (d->path, "pids", NULL);
  g_autoptr (GString) t = g_string_new ("true\ntrue\n");
  for (guint i = 0; i < 20; i++)
    g_string_append_printf (t, "sh -c 'echo $$ >> %s; exec sleep 300'\n", pids);
  g_autofree gchar *file = tb_write (d, "t.txt", t->str);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--local-slots", "3", file, NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  PidsWritten w = { pids, 3 };
  g_assert_true (tb_await (pids_written, &w, 60));
  /* The two quick tasks' results are recorded (they may linger a moment in
   * their agent's outbox after the sleeps start). */
  g_autofree gchar *results = g_build_filename (dir, "results.jsonl", NULL);
  PidsWritten two = { results, 2 };
  g_assert_true (tb_await (pids_written, &two, 60));

  /* One queued task alone, then everything. */
  const char *one[] = { tb_datc (), "cancel", dir, "22", NULL };
  g_assert_cmpint (tb_run (d, one, 30, NULL), ==, 0);
  const char *all[] = { tb_datc (), "cancel", dir, NULL };
  g_assert_cmpint (tb_run (d, all, 30, NULL), ==, 0);
  g_assert_cmpint (tb_wait (master, 60), ==, 3);

  gint64 done, failed, cancelled;
  count_results (dir, &done, &failed, &cancelled);
  g_assert_cmpint (done, ==, 2);
  g_assert_cmpint (failed, ==, 0);
  g_assert_cmpint (cancelled, ==, 20);
  check_status_matches_results (d, dir, FALSE);

  /* Nothing left behind: the sleeps that were running, and the agents. */
  g_autofree gchar *text = NULL;
  g_assert_true (g_file_get_contents (pids, &text, NULL, NULL));
  g_auto (GStrv) lines = g_strsplit (g_strstrip (text), "\n", -1);
  for (guint i = 0; lines[i]; i++)
    g_assert_true (tb_pid_gone (atoi (lines[i])));
  g_autoptr (GArray) left = tb_find_agents (dir);
  g_assert_cmpuint (left->len, ==, 0);

  /* Resuming does not run cancelled tasks unless asked. */
  g_assert_cmpint (tb_run (d, argv, 60, NULL), ==, 3);
  count_results (dir, &done, &failed, &cancelled);
  g_assert_cmpint (cancelled, ==, 20);
  g_assert_cmpint (tb_count_lines (pids), ==, g_strv_length (lines));

  /* Asked: they run (and are cancelled again, quickly, by a short timeout
   * we cannot give them; so cancel again and check they were started). */
  const char *retry[]
      = { tb_datc (), "run", "--dir", dir, "--local-slots", "3", "--retry-cancelled", file, NULL };
  g_autoptr (TbProc) again = tb_spawn (d, "master", retry);
  w.want = g_strv_length (lines) + 3;
  g_assert_true (tb_await (pids_written, &w, 60));
  g_assert_cmpint (tb_run (d, all, 30, NULL), ==, 0);
  g_assert_cmpint (tb_wait (again, 60), ==, 3);
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 22);
}

/* ---- the progress line in a real terminal ---------------------------- */

typedef struct {
  const char *socket;
  const char *needle;
  gchar *screen;
} Pane;

static gchar *
capture (const char *socket)
{
  gchar *out = NULL;
  const char *argv[] = { "tmux", "-L", socket, "capture-pane", "-p", "-t", "datc", NULL };
  g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL, NULL,
                NULL, &out, NULL, NULL, NULL);
  return out ? out : g_strdup ("");
}

static gboolean
pane_shows (gpointer p)
{
  Pane *x = p;
  g_free (x->screen);
  x->screen = capture (x->socket);
  return strstr (x->screen, x->needle) != NULL;
}

static guint
count_occurrences (const char *hay, const char *needle)
{
  guint n = 0;
  for (const char *p = strstr (hay, needle); p; p = strstr (p + 1, needle))
    n++;
  return n;
}

static void
test_progress_line (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 0; i < 60; i++)
    g_string_append (t, "sleep 0.1\n");
  g_autofree gchar *file = tb_write (d, "t.txt", t->str);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  g_autofree gchar *socket = g_strdup_printf ("datc-test-%d", (int) getpid ());
  g_autofree gchar *cmd = g_strdup_printf (
      "%s run --dir %s --local-slots 2 %s; echo EXIT=$?; sleep 600", tb_datc (), dir, file);
  const char *start[] = { "tmux", "-L",  socket, "new-session", "-d", "-s", "datc",
                          "-x",   "160", "-y",   "40",          cmd,  NULL };
  g_autoptr (GError) error = NULL;
  gint status = -1;
  g_spawn_sync (NULL, (gchar **) start, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, &status,
                &error);
  g_assert_no_error (error);
  g_assert_cmpint (status, ==, 0);

  /* While it runs: one line, rewritten in place, never scrolled. */
  Pane p = { socket, " / failed ", NULL };
  g_assert_true (tb_await (pane_shows, &p, 60));
  Pane later = { socket, "done 2", NULL };
  g_assert_true (tb_await (pane_shows, &later, 60));
  g_assert_cmpuint (count_occurrences (later.screen, " / failed "), ==, 1);
  /* At the end the line is gone and the summary stands alone. */
  Pane end = { socket, "EXIT=0", NULL };
  g_assert_true (tb_await (pane_shows, &end, 60));
  g_assert_cmpuint (count_occurrences (end.screen, " / failed "), ==, 0);
  g_assert_nonnull (strstr (end.screen, "60 done"));

  const char *kill_server[] = { "tmux", "-L", socket, "kill-server", NULL };
  g_spawn_sync (NULL, (gchar **) kill_server, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL,
                NULL, NULL);
  g_free (p.screen);
  g_free (later.screen);
  g_free (end.screen);

  /* Not a terminal: no progress at all. */
  g_autofree gchar *dir2 = g_build_filename (d->path, "c2", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir2, "--local-slots", "2", file, NULL };
  g_autofree gchar *err = NULL;
  g_assert_cmpint (tb_run (d, argv, 60, &err), ==, 0);
  g_assert_null (strstr (err, " / failed "));
  g_assert_null (strchr (err, '\r'));
}

/* ---- status --watch into a pipe; running apart from prefetched ------- */

/* The master answers status: the campaign is live. */
static gboolean
campaign_live (gpointer p)
{
  Idle *w = p;
  g_autoptr (JsonObject) st = try_status_json (w->d, w->dir);
  return st != NULL
         && json_object_get_boolean_member (json_object_get_object_member (st, "master"),
                                            "running");
}

/* `datc status --watch` into a pipe (not a terminal) follows the campaign
 * to its end: no screen-control codes, the final counts as its last frame,
 * exit 0 (its last frame used to stay at "running", then "the master did
 * not answer" and exit 3). */
static void
test_watch_into_a_pipe (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 0; i < 8; i++)
    g_string_append (t, "sleep 0.5\n");
  g_autofree gchar *file = tb_write (d, "t.txt", t->str);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--local-slots", "2", file, NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  Idle live = { d, dir, 8 };
  g_assert_true (tb_await (campaign_live, &live, 60));
  const char *watch_argv[] = { tb_datc (), "status", dir, "--watch", "--interval", "0.2", NULL };
  g_autoptr (TbProc) watch = tb_spawn (d, "watch", watch_argv);
  g_assert_cmpint (tb_wait (watch, 90), ==, 0);
  g_assert_cmpint (tb_wait (master, 60), ==, 0);
  g_autofree gchar *out = tb_proc_stdout (watch);
  g_assert_null (strchr (out, '\033'));
  /* Several frames, the first of a running campaign, the last its end. */
  g_assert_nonnull (strstr (out, ": running\n"));
  const char *last = g_strrstr (out, "campaign ");
  g_assert_nonnull (last);
  g_assert_true (g_str_has_prefix (last, "campaign "));
  g_assert_nonnull (strstr (last, ": no master running\n"));
  g_assert_nonnull (strstr (last, "tasks    8 total: 0 queued, 0 running, 8 done, 0 failed, "
                                  "0 cancelled\n"));
}

typedef struct {
  TbDir *d;
  const char *dir;
  JsonObject *st;      /* the status that showed it */
  gint64 most_running; /* the most any status said ran */
} Ahead;

/* Status shows tasks prefetched apart from those running, both slots
 * running (until the agent's next message says it started the second,
 * one shows as running and the other as prefetched), and the one agent
 * holding as many prefetched as the total (the totals are as of the last
 * commit, an agent's figures live: a status answered while a commit
 * syncs, or in a hand-out, may see them apart until the commit). */
static gboolean
shows_prefetched (gpointer p)
{
  Ahead *w = p;
  g_autoptr (JsonObject) st = try_status_json (w->d, w->dir);
  if (st == NULL
      || !json_object_has_member (json_object_get_object_member (st, "tasks"), "prefetched"))
    return FALSE;
  w->most_running = MAX (w->most_running, tasks (st, "running"));
  if (tasks (st, "prefetched") == 0 || tasks (st, "running") < 2)
    return FALSE;
  JsonArray *agents = json_object_get_array_member (st, "agents");
  if (json_array_get_length (agents) != 1
      || json_object_get_int_member (json_array_get_object_element (agents, 0), "prefetched")
             != tasks (st, "prefetched"))
    return FALSE;
  g_clear_pointer (&w->st, json_object_unref);
  w->st = json_object_ref (st);
  return TRUE;
}

/* Long tasks on 2 slots after two short ones (from which the agent judges
 * tasks short: it asks for more than its slots, prefetch), and status
 * counts as running only what the slots run; the rest is shown as
 * prefetched, per agent too (it used to show them all as running: 32
 * running on 16 slots). */
static void
test_prefetched_apart (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autoptr (GString) t = g_string_new ("true\ntrue\n");
  for (guint i = 0; i < 10; i++)
    g_string_append (t, "sleep 60\n");
  g_autofree gchar *file = tb_write (d, "t.txt", t->str);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--local-slots", "2", file, NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  Ahead w = { d, dir, NULL, 0 };
  g_assert_true (tb_await (shows_prefetched, &w, 60));
  g_assert_cmpint (w.most_running, ==, 2); /* never more than the slots */
  g_assert_cmpint (tasks (w.st, "running") + tasks (w.st, "prefetched") + tasks (w.st, "queued"),
                   ==, 10);
  JsonArray *agents = json_object_get_array_member (w.st, "agents");
  g_assert_cmpuint (json_array_get_length (agents), ==, 1);
  JsonObject *a = json_array_get_object_element (agents, 0);
  g_assert_cmpint (json_object_get_int_member (a, "running"), <=,
                   json_object_get_int_member (a, "slots"));
  g_assert_cmpint (json_object_get_int_member (a, "prefetched"), ==, tasks (w.st, "prefetched"));
  /* The text says so. */
  const char *text_argv[] = { tb_datc (), "status", dir, NULL };
  g_autoptr (TbProc) text = tb_spawn (d, "status-text", text_argv);
  g_assert_cmpint (tb_wait (text, 60), ==, 0);
  g_autofree gchar *out = tb_proc_stdout (text);
  g_assert_nonnull (strstr (out, " running, "));
  g_assert_nonnull (strstr (out, " prefetched, "));
  /* And what the local site was asked: calls by kind, per 1,000 tasks
   * done (2 done: at least one call, 500), and no budget on a fork site. */
  const char *head
      = "\nSITE                CALLS  SUBMIT    POLL  CANCEL   PUT  PER 1000  BUDGET/MINUTE\n";
  const char *calls = strstr (out, head);
  g_assert_nonnull (calls);
  g_auto (GStrv) row = g_strsplit (calls + strlen (head), "\n", 2);
  gint64 total, submit, poll, cancel, put;
  char per[16], budget[16];
  g_assert_cmpint (sscanf (row[0],
                           "local %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT
                           " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %15s %15s",
                           &total, &submit, &poll, &cancel, &put, per, budget),
                   ==, 7);
  g_assert_cmpint (submit, >=, 1);
  /* Scheduler calls: not the puts (a fork site asks for no lookup). */
  g_assert_cmpint (total, ==, submit + poll + cancel);
  g_assert_cmpfloat (g_ascii_strtod (per, NULL), ==, 1000.0 * (double) total / 2.0);
  g_assert_cmpstr (budget, ==, "unlimited");
  json_object_unref (w.st);
  g_assert_true (tb_proc_signal (master, SIGTERM));
  tb_wait (master, 60);
}

/* All 22 agents connected (live status, which lists them all). */
static gboolean
all_agents_listed (gpointer data)
{
  g_autoptr (JsonObject) st = tb_status (data);
  return st != NULL && json_object_has_member (st, "agents_total")
         && json_object_get_int_member (st, "agents_total") == 22
         && json_array_get_length (json_object_get_array_member (st, "agents")) == 22;
}

/* `--json` lists every agent, by id within a site; the text lists 20 and
 * says how many it left out; `--agents` lists them all. */
static void
test_status_lists_agents (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 0; i < 22; i++)
    g_string_append (t, "sleep 60\n");
  g_autofree gchar *file = tb_write (d, "t.txt", t->str);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run",           "--dir", dir,  "--local-agents",
                         "22",       "--local-slots", "22",    file, NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  g_assert_true (tb_await (all_agents_listed, dir, 60));

  g_autoptr (JsonObject) st = tb_status (dir);
  JsonArray *agents = json_object_get_array_member (st, "agents");
  for (guint i = 1; i < json_array_get_length (agents); i++)
    g_assert_cmpstr (
        json_object_get_string_member (json_array_get_object_element (agents, i - 1), "id"), <,
        json_object_get_string_member (json_array_get_object_element (agents, i), "id"));
  struct {
    const char *flag;
    guint rows;
    const char *more;
  } forms[] = { { NULL, 20, "... and 2 more agents (datc status --agents lists all)\n" },
                { "--agents", 22, NULL } };
  for (guint f = 0; f < G_N_ELEMENTS (forms); f++)
    {
      const char *text_argv[]
          = { "env", NO_FULL_DATC, tb_datc (), "status", dir, forms[f].flag, NULL };
      g_autoptr (TbProc) text = tb_spawn (d, "status-text", text_argv);
      g_assert_cmpint (tb_wait (text, 60), ==, 0);
      g_autofree gchar *out = tb_proc_stdout (text);
      guint rows = 0;
      for (guint i = 0; i < json_array_get_length (agents); i++)
        {
          const char *id
              = json_object_get_string_member (json_array_get_object_element (agents, i), "id");
          g_autofree gchar *row = g_strconcat ("\n", id, " ", NULL);
          rows += strstr (out, row) != NULL;
        }
      g_assert_cmpuint (rows, ==, forms[f].rows);
      if (forms[f].more != NULL)
        g_assert_nonnull (strstr (out, forms[f].more));
      else
        g_assert_null (strstr (out, "more agent"));
    }
  g_assert_true (tb_proc_signal (master, SIGTERM));
  tb_wait (master, 60);
}

/* ---- the fast `datc status` ------------------------------------------ */

/* A master running `lines` as an --open campaign in `dir`, once its
 * `total` tasks are done and nothing runs (transfer full). */
static TbProc *
open_campaign_idle (TbDir *d, const char *dir, const char *lines, gint64 total)
{
  g_autofree gchar *file = tb_write (d, "t.txt", lines);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--open", file, NULL };
  TbProc *master = tb_spawn (d, "master", argv);
  Idle idle = { d, dir, total };
  g_assert_true (tb_await (campaign_idle, &idle, 60));
  return master;
}

/* The text without its "progress" line (the rate moves between calls). */
static gchar *
without_progress (const char *text)
{
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  g_autoptr (GString) out = g_string_new (NULL);
  for (gchar **l = lines; *l != NULL; l++)
    if (!g_str_has_prefix (*l, "progress "))
      g_string_append_printf (out, "%s\n", *l);
  return g_string_free (g_steal_pointer (&out), FALSE);
}

/* `datc` answers a live `datc status` itself (front.c: with datc-full
 * out of reach it still does), with the very text datc-full prints;
 * what it leaves to datc-full (--json, no master) still works through
 * it. */
static void
test_front_answers_status (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  g_autoptr (TbProc) master = open_campaign_idle (d, dir, "true\ntrue\n", 2);

  const char *fast_argv[] = { "env", NO_FULL_DATC, tb_datc (), "status", dir, NULL };
  g_autoptr (TbProc) fast = tb_spawn (d, "status-fast", fast_argv);
  g_assert_cmpint (tb_wait (fast, 30), ==, 0);
  g_autofree gchar *fast_out = tb_proc_stdout (fast);
  g_autofree gchar *datc_dir = g_path_get_dirname (tb_datc ());
  g_autofree gchar *full = g_build_filename (datc_dir, "datc-full", NULL);
  const char *full_argv[] = { full, "status", dir, NULL };
  g_autoptr (TbProc) slow = tb_spawn (d, "status-full", full_argv);
  g_assert_cmpint (tb_wait (slow, 30), ==, 0);
  g_autofree gchar *full_out = tb_proc_stdout (slow);
  g_assert_nonnull (strstr (fast_out, "tasks    2 total:"));
  g_autofree gchar *a = without_progress (fast_out);
  g_autofree gchar *b = without_progress (full_out);
  g_assert_cmpstr (a, ==, b);

  /* --json is datc-full's: without it, the front says it cannot run it. */
  const char *json_argv[] = { "env", NO_FULL_DATC, tb_datc (), "status", "--json", dir, NULL };
  g_autoptr (TbProc) json = tb_spawn (d, "status-json", json_argv);
  g_assert_cmpint (tb_wait (json, 30), ==, 3);
  g_autofree gchar *json_err = tb_proc_stderr (json);
  g_assert_nonnull (strstr (json_err, "datc: cannot run /nonexistent/datc-full"));

  const char *close_argv[] = { tb_datc (), "close", dir, NULL };
  g_assert_cmpint (tb_run (d, close_argv, 30, NULL), ==, 0);
  g_assert_cmpint (tb_wait (master, 60), ==, 0);
  /* No master: the journal, read by datc-full through the front. */
  const char *offline_argv[] = { tb_datc (), "status", dir, NULL };
  g_autoptr (TbProc) offline = tb_spawn (d, "status-offline", offline_argv);
  g_assert_cmpint (tb_wait (offline, 30), ==, 0);
  g_autofree gchar *offline_out = tb_proc_stdout (offline);
  g_assert_nonnull (strstr (offline_out, "no master running"));
}

/* D/c: a campaign of `tasks` (t.txt), run to its end. */
static gchar *
finished_campaign (TbDir *d, const char *tasks)
{
  g_autofree gchar *file = tb_write (d, "t.txt", tasks);
  gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, file, NULL };
  g_assert_cmpint (tb_run (d, argv, 60, NULL), ==, 0);
  return dir;
}

/* A process asleep in a timed wait (the clients' 10 ms retries: poll in
 * the front, a nanosleep in datc-full), as /proc/PID/syscall says. */
static gboolean
asleep_retrying (gpointer data)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/syscall", GPOINTER_TO_INT (data));
  g_autofree gchar *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return FALSE;
  long nr = strtol (text, NULL, 10);
  return g_ascii_isdigit (text[0])
         && (nr == SYS_poll || nr == SYS_ppoll || nr == SYS_nanosleep || nr == SYS_clock_nanosleep);
}

/* A master holds its campaign's lock a moment before its control socket
 * is bound: `datc status` (the front, and datc-full) waits for the socket
 * while the lock is held, instead of failing on the missing socket; when
 * the lock goes without a socket, it reads the campaign offline. */
static void
test_status_waits_for_the_socket (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *dir = finished_campaign (d, "true\ntrue\n");
  g_autofree gchar *control = g_build_filename (dir, "control", NULL);
  g_assert_false (g_file_test (control, G_FILE_TEST_EXISTS));

  g_autofree gchar *datc_dir = g_path_get_dirname (tb_datc ());
  g_autofree gchar *full = g_build_filename (datc_dir, "datc-full", NULL);
  const char *clients[] = { tb_datc (), full };
  for (guint i = 0; i < G_N_ELEMENTS (clients); i++)
    {
      /* The lock, as a master takes it before it binds. */
      g_autofree gchar *lock = g_build_filename (dir, "lock", NULL);
      int fd = open (lock, O_RDWR | O_CLOEXEC);
      g_assert_cmpint (fd, >=, 0);
      g_assert_cmpint (flock (fd, LOCK_EX | LOCK_NB), ==, 0);
      const char *argv[] = { clients[i], "status", dir, NULL };
      g_autoptr (TbProc) p = tb_spawn (d, "status", argv);
      /* Still there, retrying, where it used to fail at once. */
      g_assert_true (tb_await (asleep_retrying, GINT_TO_POINTER (tb_proc_pid (p)), 30));
      close (fd);
      g_assert_cmpint (tb_wait (p, 30), ==, 0);
      g_autofree gchar *out = tb_proc_stdout (p);
      g_assert_nonnull (strstr (out, "no master running"));
      g_assert_nonnull (strstr (out, "tasks    2 total:"));
    }
}

/* ---- the control socket is the owner's alone ------------------------- */

static void
test_control_permissions (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  g_autoptr (TbProc) master = open_campaign_idle (d, dir, "true\n", 1);

  g_autofree gchar *sock = g_build_filename (dir, "control", NULL);
  GStatBuf st;
  g_assert_cmpint (g_stat (sock, &st), ==, 0);
  g_assert_true (S_ISSOCK (st.st_mode));
  g_assert_cmpint (st.st_mode & 0077, ==, 0);

  /* Even with the directory opened up, another user cannot connect. */
  g_assert_cmpint (chmod (d->path, 0755), ==, 0);
  g_assert_cmpint (chmod (dir, 0755), ==, 0);
  const char *probe[] = { "setpriv",
                          "--reuid=65534",
                          "--regid=65534",
                          "--clear-groups",
                          "--",
                          "/usr/bin/python3",
                          "-c",
                          "import socket,sys\n"
                          "s=socket.socket(socket.AF_UNIX)\n"
                          "try:\n s.connect(sys.argv[1])\nexcept PermissionError:\n sys.exit(7)\n"
                          "sys.exit(0)\n",
                          sock,
                          NULL };
  g_assert_cmpint (tb_run (d, probe, 30, NULL), ==, 7);
  /* The owner can. */
  const char *close_argv[] = { tb_datc (), "close", dir, NULL };
  g_assert_cmpint (tb_run (d, close_argv, 30, NULL), ==, 0);
  g_assert_cmpint (tb_wait (master, 60), ==, 0);
  g_assert_false (g_file_test (sock, G_FILE_TEST_EXISTS));
}

/* Offline commands read the task file in the format the campaign ran with,
 * not the one its name suggests. */
static void
test_offline_uses_the_recorded_format (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tb_write (d, "plain.jsonl", "true\nsh -c 'exit 0'\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--format", "lines", file, NULL };
  g_assert_cmpint (tb_run (d, argv, 60, NULL), ==, 0);
  g_autoptr (JsonObject) st = status_json (d, dir);
  g_assert_cmpint (tasks (st, "total"), ==, 2);
  g_assert_cmpint (tasks (st, "done"), ==, 2);
  const char *sub[] = { tb_datc (), "submit", dir, "--", "true", NULL };
  g_assert_cmpint (tb_run (d, sub, 60, NULL), ==, 0);
  g_autoptr (JsonObject) st2 = status_json (d, dir);
  g_assert_cmpint (tasks (st2, "total"), ==, 3);
}

/* ---- garbage on the control socket ----------------------------------- */

/* Sends one frame on a REQ socket and returns the reply (transfer full);
 * fails the test when none comes within 30 s. */
static gchar *
control_exchange (void *s, const void *frame, gsize len)
{
  g_assert_cmpint (zmq_send (s, frame, len, 0), ==, (int) len);
  zmq_pollitem_t it = { s, 0, ZMQ_POLLIN, 0 };
  g_assert_cmpint (zmq_poll (&it, 1, 30000), ==, 1);
  zmq_msg_t m;
  zmq_msg_init (&m);
  g_assert_cmpint (zmq_msg_recv (&m, s, 0), >=, 0);
  gchar *reply = g_strndup (zmq_msg_data (&m), zmq_msg_size (&m));
  zmq_msg_close (&m);
  return reply;
}

#define FRAME(literal) literal, sizeof literal - 1

/* Every malformed request gets {"error": ...}, never a GLib assertion
 * (the master runs with G_DEBUG=fatal-criticals) nor a crash, and the
 * master still answers after them. */
static void
test_control_refuses_garbage (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tb_write (d, "t.txt", "true\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  g_setenv ("G_DEBUG", "fatal-criticals", TRUE);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--open", file, NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  Idle idle = { d, dir, 1 };
  g_assert_true (tb_await (campaign_idle, &idle, 60));

  gsize deep_len = 100000, huge_len = 16 * 1024 * 1024;
  g_autofree gchar *deep = g_malloc (deep_len);
  memset (deep, '[', deep_len);
  g_autofree gchar *huge = g_malloc (huge_len);
  memset (huge, 'x', huge_len);
  static const char nul[] = "{\"cmd\":\"st\0atus\"}";
  struct {
    const char *name, *frame;
    gsize len;
    const char *says;
  } cases[] = {
    { "empty", FRAME (""), "an empty request" },
    { "blank", FRAME ("  \n"), "invalid JSON: expected a value" },
    { "not JSON", FRAME ("status"), "invalid JSON: unexpected character at byte 1" },
    { "single quotes", FRAME ("{'cmd':'status'}"), "invalid JSON" },
    { "two values", FRAME ("{} {}"), "unexpected text after the value" },
    { "an array", FRAME ("[1,2]"), "a request is a JSON object" },
    { "a string", FRAME ("\"status\""), "a request is a JSON object" },
    { "not UTF-8", FRAME ("{\"cmd\":\"\xff\"}"), "invalid UTF-8 at byte 9" },
    { "a NUL", nul, sizeof nul - 1, "NUL character at byte 11" },
    { "nested 100000 deep", deep, deep_len, "nested more than 32 levels deep" },
    { "16 MiB of garbage", huge, huge_len, "invalid JSON" },
    { "no cmd", FRAME ("{}"), "\"cmd\" must be a string" },
    { "cmd a number", FRAME ("{\"cmd\":5}"), "\"cmd\" must be a string" },
    { "cmd an object", FRAME ("{\"cmd\":{}}"), "\"cmd\" must be a string" },
    { "name an object", FRAME ("{\"cmd\":\"submit\",\"name\":{},\"data\":\"true\"}"),
      "\"name\" must be a string" },
    { "ids a string", FRAME ("{\"cmd\":\"cancel\",\"ids\":\"1\"}"), "\"ids\" must be an array" },
    { "ids nested", FRAME ("{\"cmd\":\"cancel\",\"ids\":[[1]]}"), "\"ids\" must be an array" },
    { "agents_max a string", FRAME ("{\"cmd\":\"status\",\"agents_max\":\"5\"}"),
      "\"agents_max\" must be a count" },
    { "agents_max negative", FRAME ("{\"cmd\":\"status\",\"agents_max\":-1}"),
      "\"agents_max\" must be a count" },
  };
  g_autofree gchar *ep = g_strconcat ("ipc://", dir, "/control", NULL);
  void *ctx = zmq_ctx_new ();
  void *s = zmq_socket (ctx, ZMQ_REQ);
  int zero = 0;
  zmq_setsockopt (s, ZMQ_LINGER, &zero, sizeof zero);
  g_assert_cmpint (zmq_connect (s, ep), ==, 0);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_test_message ("%s", cases[i].name);
      g_autofree gchar *reply = control_exchange (s, cases[i].frame, cases[i].len);
      g_autoptr (JsonParser) parser = json_parser_new ();
      g_assert_true (json_parser_load_from_data (parser, reply, -1, NULL));
      JsonObject *o = json_node_get_object (json_parser_get_root (parser));
      const char *why = json_object_get_string_member_with_default (o, "error", "");
      if (strstr (why, cases[i].says) == NULL)
        g_error ("%s: expected \"%s\" in the reply %s", cases[i].name, cases[i].says, reply);
    }
  /* A good request on the same socket is still served. */
  g_autofree gchar *reply = control_exchange (s, FRAME ("{\"cmd\":\"status\"}"));
  g_assert_nonnull (strstr (reply, "\"tasks\""));
  zmq_close (s);
  zmq_ctx_term (ctx);

  g_autoptr (JsonObject) st = status_json (d, dir);
  g_assert_cmpint (tasks (st, "total"), ==, 1);
  const char *close_argv[] = { tb_datc (), "close", dir, NULL };
  g_assert_cmpint (tb_run (d, close_argv, 30, NULL), ==, 0);
  g_assert_cmpint (tb_wait (master, 60), ==, 0);
  g_autofree gchar *err = tb_proc_stderr (master);
  g_assert_null (strstr (err, "CRITICAL"));
  g_assert_null (strstr (err, "WARNING"));
}

/* Commands on a campaign say what is wrong with what they were given:
 * an id below 1 or beyond the campaign, a directory the user may not read
 * (not "no campaign.json", which would send them looking for a file that is
 * there). */
static void
test_commands_say_what_is_wrong (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *dir = finished_campaign (d, "echo a\necho b\necho c\n");

  struct {
    const char *id, *says;
  } cases[] = {
    { "-1", "datc output: task ids start at 1, not -1\n" },
    { "0", "datc output: task ids start at 1, not 0\n" },
    { "x", "datc output: \"x\" is not a task id\n" },
    { "4", "datc: no task 4: the campaign has 3 tasks\n" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const char *out_argv[] = { tb_datc (), "output", dir, cases[i].id, NULL };
      g_autofree gchar *err = NULL;
      g_assert_cmpint (tb_run (d, out_argv, 60, &err), ==, 2);
      g_assert_cmpstr (err, ==, cases[i].says);
    }
  /* Task 3 is there, and the last one. */
  const char *ok_argv[] = { tb_datc (), "output", dir, "3", NULL };
  g_autoptr (TbProc) p = tb_spawn (d, "output", ok_argv);
  g_assert_cmpint (tb_wait (p, 60), ==, 0);
  g_autofree gchar *out = tb_proc_stdout (p);
  g_assert_cmpstr (out, ==, "c\n");

  /* DIR is 0700: as root, look as another user; otherwise close it. */
  g_assert_cmpint (chmod (d->path, 0755), ==, 0);
  g_autofree gchar *err = NULL;
  if (geteuid () == 0)
    {
      const char *st_argv[] = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                "--",      tb_datc (),      "status",        dir,
                                NULL };
      g_assert_cmpint (tb_run (d, st_argv, 60, &err), ==, 2);
    }
  else
    {
      g_assert_cmpint (chmod (dir, 0), ==, 0);
      const char *st_argv[] = { tb_datc (), "status", dir, NULL };
      int status = tb_run (d, st_argv, 60, &err);
      g_assert_cmpint (chmod (dir, 0700), ==, 0);
      g_assert_cmpint (status, ==, 2);
    }
  g_autofree gchar *want = g_strdup_printf ("datc: %s: %s\n", dir, g_strerror (EACCES));
  g_assert_cmpstr (err, ==, want);
}

/* `datc CMD --help` prints CMD's own usage and exits 0, wherever it is run
 * (not "which campaign?"); after `--` it is the task's argument. */
static void
test_every_command_has_help (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_unsetenv ("DATC_DIR");
  static const char *const cmds[][2] = {
    { "status", NULL },     { "submit", NULL },  { "cancel", NULL },       { "close", NULL },
    { "shell", NULL },      { "results", NULL }, { "output", NULL },       { "run", NULL },
    { "report", NULL },     { "sites", NULL },   { "analyze", "predict" }, { "analyze", "waits" },
    { "analyze", "trace" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cmds); i++)
    {
      const char *argv[] = { tb_datc (), cmds[i][0], cmds[i][1] ? cmds[i][1] : "--help",
                             cmds[i][1] ? "--help" : NULL, NULL };
      g_autoptr (TbProc) p = tb_spawn (d, "help", argv);
      g_assert_cmpint (tb_wait (p, 30), ==, 0);
      g_autofree gchar *out = tb_proc_stdout (p);
      g_autofree gchar *want
          = g_strdup_printf ("Usage:\n  datc %s%s%s [OPTION", cmds[i][0], cmds[i][1] ? " " : "",
                             cmds[i][1] ? cmds[i][1] : "");
      if (!g_str_has_prefix (out, want))
        g_error ("datc %s --help: expected \"%s...\", got \"%s\"", cmds[i][0], want, out);
    }
  const char *v_argv[] = { tb_datc (), "--version", NULL };
  g_autoptr (TbProc) v = tb_spawn (d, "version", v_argv);
  g_assert_cmpint (tb_wait (v, 30), ==, 0);
  g_autofree gchar *version = tb_proc_stdout (v);
  g_assert_true (g_regex_match_simple ("^datc [0-9]+\\.[0-9]+\\.[0-9]+\n$", version, 0, 0));

  const char *task_argv[] = { tb_datc (), "submit", "--", "echo", "--help", NULL };
  g_autofree gchar *err = NULL;
  g_assert_cmpint (tb_run (d, task_argv, 30, &err), ==, 2);
  g_assert_nonnull (strstr (err, "which campaign?"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/living/open-campaign-takes-waves-of-submits-and-closes", test_open_campaign);
  g_test_add_func ("/living/cancel-stops-everything-and-resumes-only-when-asked", test_cancel);
  g_test_add_func ("/living/status-and-submit-are-answered-while-the-master-loads",
                   test_answers_while_loading);
  g_test_add_func ("/living/a-refused-task-file-leaves-no-directory",
                   test_bad_task_file_leaves_no_directory);
  g_test_add_func ("/living/progress-line-updates-in-place-on-a-terminal-only", test_progress_line);
  g_test_add_func ("/living/status-watch-into-a-pipe-ends-with-the-final-counts",
                   test_watch_into_a_pipe);
  g_test_add_func ("/living/status-shows-prefetched-tasks-apart-from-running",
                   test_prefetched_apart);
  g_test_add_func ("/living/status-lists-a-few-agents-and-all-when-asked",
                   test_status_lists_agents);
  g_test_add_func ("/living/status-is-answered-by-the-front-as-datc-full-would",
                   test_front_answers_status);
  g_test_add_func ("/living/status-waits-for-a-socket-while-the-lock-is-held",
                   test_status_waits_for_the_socket);
  g_test_add_func ("/living/control-socket-refuses-other-users", test_control_permissions);
  g_test_add_func ("/living/offline-commands-use-the-recorded-format",
                   test_offline_uses_the_recorded_format);
  g_test_add_func ("/living/control-socket-answers-garbage-with-an-error",
                   test_control_refuses_garbage);
  g_test_add_func ("/living/commands-say-what-is-wrong-with-their-arguments",
                   test_commands_say_what_is_wrong);
  g_test_add_func ("/living/every-command-prints-its-help-and-datc-its-version",
                   test_every_command_has_help);
  return g_test_run ();
}
