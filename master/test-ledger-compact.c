/* test-ledger-compact.c: journal compaction on a real campaign directory.
 * A campaign with tasks in every state (queued, running, re-attached
 * orphans, replicated, done, failed, cancelled, requeued after a crash),
 * submitted tasks, open proxies and submissions is compacted; reopened,
 * it must hold what the uncompacted journal gives (every task's state,
 * attempt, agent and site, the counts, the agents' loads, the proxies,
 * the run-time estimate, results.jsonl byte for byte).  Records taken
 * while the checkpoint is written land behind it.  And a compaction
 * killed at each of its steps (DATC_TEST_COMPACT_KILL_AT), or whose new
 * file is cut at every offset, leaves a journal that opens to the same
 * state; a child slow to exit once its work is done is not waited for. */
#include <glib.h>
#include <glib/gstdio.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ledger.h"
#include "test-iowait.h"

#define N_TASKS 60

static DatcBag *
make_bag (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) text = g_string_new (NULL);
  for (guint i = 0; i < N_TASKS; i++)
    g_string_append_printf (text, "echo %u\n", i);
  DatcBag *bag = datc_bag_new ();
  g_assert_true (
      datc_bag_load_data (bag, "t.txt", text->str, text->len, DATC_TASKFILE_LINES, &error));
  return bag;
}

static DatcLedger *
open_ledger_with (const char *dir, DatcBag *bag, const DatcLedgerOptions *o)
{
  g_autoptr (GError) error = NULL;
  DatcLedger *l = datc_ledger_open (dir, bag, "t.txt", "00", o, &error);
  g_assert_no_error (error);
  return l;
}

static DatcLedger *
open_ledger (const char *dir, DatcBag *bag)
{
  /* Never on its own: the tests say when. */
  DatcLedgerOptions o = { .compact_min_bytes = G_MAXUINT64 };
  return open_ledger_with (dir, bag, &o);
}

static void
result (DatcLedger *l, guint32 agent, guint64 id, gint exit_code, guint64 ms)
{
  DatcResult r = {
    .id = id,
    .attempt = datc_ledger_task_attempt (l, id),
    .status = DATC_STATUS_EXITED,
    .exit_code = exit_code,
    .started_us = 1000000,
    .finished_us = 1000000 + (gint64) ms * 1000,
    .out = g_bytes_new ("out\n", 4),
    .err = g_bytes_new (NULL, 0),
  };
  g_autoptr (GError) error = NULL;
  datc_ledger_take_result (l, agent, &r, NULL, &error);
  g_assert_no_error (error);
  g_bytes_unref (r.out);
  g_bytes_unref (r.err);
}

static void
commit (DatcLedger *l)
{
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_ledger_commit (l, &error));
  g_assert_no_error (error);
}

static gint
cmp_str (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* Equal texts, or the first line that differs. */
static void
assert_same (const char *got, const char *want)
{
  g_auto (GStrv) g = g_strsplit (got, "\n", -1);
  g_auto (GStrv) w = g_strsplit (want, "\n", -1);
  for (guint i = 0; g[i] != NULL || w[i] != NULL; i++)
    {
      g_assert_cmpstr (g[i], ==, w[i]);
      if (g[i] == NULL || w[i] == NULL)
        break;
    }
}

/* Everything a replay rebuilds, as text, to compare. */
static gchar *
dump (const char *dir, DatcLedger *l)
{
  GString *s = g_string_new (NULL);
  DatcLedgerCounts c;
  datc_ledger_counts (l, &c);
  g_string_append_printf (s,
                          "counts %" G_GUINT64_FORMAT " q%" G_GUINT64_FORMAT " r%" G_GUINT64_FORMAT
                          " d%" G_GUINT64_FORMAT " f%" G_GUINT64_FORMAT " c%" G_GUINT64_FORMAT
                          " orphans %" G_GUINT64_FORMAT " awaited %u"
                          " agents %u estimate %" G_GUINT64_FORMAT "\n",
                          c.total, c.queued, c.running, c.done, c.failed, c.cancelled,
                          datc_ledger_orphans (l), datc_ledger_awaited (l),
                          datc_ledger_live_agents (l), datc_ledger_runtime_estimate_ms (l));
  for (guint64 id = 1; id <= c.total; id++)
    {
      g_string_append_printf (s, "%" G_GUINT64_FORMAT ": %d a%u on %u at %s copies", id,
                              datc_ledger_task_state (l, id), datc_ledger_task_attempt (l, id),
                              datc_ledger_task_agent (l, id),
                              datc_ledger_task_site (l, id) ? datc_ledger_task_site (l, id) : "-");
      for (guint32 a = 0; a < 4; a++)
        if (datc_ledger_runs_on (l, id, a))
          g_string_append_printf (s, " %u", a);
      g_string_append_c (s, '\n');
    }
  for (guint32 a = 0; a < 4; a++)
    g_string_append_printf (s, "agent %u: %u\n", a, datc_ledger_agent_attempts (l, a));
  GPtrArray *lists[] = { datc_ledger_open_proxies (l), datc_ledger_open_submits (l) };
  for (guint k = 0; k < G_N_ELEMENTS (lists); k++)
    {
      g_ptr_array_sort (lists[k], cmp_str);
      for (guint i = 0; i < lists[k]->len; i++)
        g_string_append_printf (s, "open %s\n", (const char *) lists[k]->pdata[i]);
      g_ptr_array_unref (lists[k]);
    }
  g_string_append_printf (s, "seen %d %d\n", datc_ledger_proxy_connected (l, "a", "p1"),
                          datc_ledger_proxy_connected (l, "b", "p2"));
  g_autofree gchar *path = g_build_filename (dir, "results.jsonl", NULL);
  g_autofree gchar *results = NULL;
  g_assert_true (g_file_get_contents (path, &results, NULL, NULL));
  g_string_append (s, results);
  return g_string_free (s, FALSE);
}

static void
copy_dir (const char *from, const char *to)
{
  g_autofree gchar *cmd = g_strdup_printf ("cp -a '%s' '%s'", from, to);
  g_assert_cmpint (system (cmd), ==, 0);
}

static void
remove_dir (const char *dir)
{
  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  g_assert_cmpint (system (cmd), ==, 0);
}

/* A campaign in every state, left by a "crashed" master (freed after its
 * last commit) and reopened once: its running tasks are orphans. */
static void
build_campaign (const char *dir)
{
  g_autoptr (DatcBag) bag = make_bag ();
  g_autoptr (DatcLedger) l = open_ledger (dir, bag);
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) picked = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  guint32 a1 = datc_ledger_agent_hello (l, "agent-1", "a", "p1", "h1");
  guint32 a2 = datc_ledger_agent_hello (l, "agent-2", "b", "p2", "h2");
  guint32 a3 = datc_ledger_agent_hello (l, "agent-3", "b", "p3", "h3");
  DatcDispatchRequest r1 = { .agent = a1, .max = 30, .budget_ms = G_MAXUINT64 };
  DatcDispatchRequest r2 = { .agent = a2, .max = 20, .budget_ms = G_MAXUINT64 };
  DatcDispatchRequest r3 = { .agent = a3, .max = 5, .budget_ms = G_MAXUINT64 };
  datc_ledger_dispatch (l, &r1, picked);
  datc_ledger_dispatch (l, &r2, picked);
  datc_ledger_dispatch (l, &r3, picked);
  for (guint64 id = 1; id <= 25; id++)
    result (l, a1, id, id % 5 == 0 ? 1 : 0, 10 * id);
  /* Agent 3 is lost: its tasks back with a crash each. */
  datc_ledger_agent_gone (l, a3, TRUE);
  guint64 cancel[] = { 26, 55, 56 };
  datc_ledger_cancel (l, cancel, G_N_ELEMENTS (cancel), NULL);
  g_assert_cmpuint (datc_ledger_replicate (l, a2, 27, picked), ==, 1);
  guint64 first = 0, count = 0;
  g_assert_true (datc_ledger_submit (l, "more", "echo x\necho y\n", 14, DATC_TASKFILE_LINES, &first,
                                     &count, &error));
  datc_ledger_proxy_event (l, "a", "p1", "101", "submitted");
  datc_ledger_proxy_event (l, "b", "p9", "109", "submitted");
  datc_ledger_proxy_event (l, "b", "s1", "2", "submitting");
  commit (l);
}

static gchar *
compacted_copy (const char *dir, const char *name)
{
  g_autofree gchar *parent = g_path_get_dirname (dir);
  gchar *copy = g_build_filename (parent, name, NULL);
  copy_dir (dir, copy);
  return copy;
}

typedef struct {
  gchar *dir;      /* the campaign, opened once since its "crash" */
  gchar *expected; /* what reopening it gives without compaction */
} Fixture;

/* What `dir` opens to becomes the state every later check expects. */
static void
expect_state_of (Fixture *f, const char *dir)
{
  g_autoptr (DatcBag) bag = make_bag ();
  g_autoptr (DatcLedger) l = open_ledger (dir, bag);
  g_free (f->expected);
  f->expected = dump (dir, l);
}

static void
setup (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *root = g_dir_make_tmp ("datc-compact-XXXXXX", &error);
  g_assert_no_error (error);
  f->dir = g_build_filename (root, "c", NULL);
  g_assert_cmpint (g_mkdir (f->dir, 0700), ==, 0);
  build_campaign (f->dir);
  /* The reference: a copy reopened from its raw journal. */
  g_autofree gchar *ref = compacted_copy (f->dir, "ref");
  expect_state_of (f, ref);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  g_autofree gchar *root = g_path_get_dirname (f->dir);
  remove_dir (root);
  g_free (f->dir);
  g_free (f->expected);
}

static void
assert_reopens_as_expected (Fixture *f, const char *dir)
{
  g_autoptr (DatcBag) bag = make_bag ();
  g_autoptr (DatcLedger) l = open_ledger (dir, bag);
  g_autofree gchar *got = dump (dir, l);
  assert_same (got, f->expected);
  g_autofree gchar *leftover = g_build_filename (dir, "journal.new", NULL);
  g_assert_false (g_file_test (leftover, G_FILE_TEST_EXISTS));
}

static guint64
journal_size (const char *dir)
{
  g_autofree gchar *path = g_build_filename (dir, "journal", NULL);
  GStatBuf st;
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  return (guint64) st.st_size;
}

/* Tasks handed out to `agent` and given back (churn that a checkpoint
 * forgets), committed. */
static void
churn (DatcLedger *l, guint32 agent)
{
  g_autoptr (GArray) picked = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  DatcDispatchRequest r = { .agent = agent, .max = 20, .budget_ms = G_MAXUINT64 };
  datc_ledger_dispatch (l, &r, picked);
  for (guint i = 0; i < picked->len; i++)
    {
      DatcTaskKey *k = &g_array_index (picked, DatcTaskKey, i);
      datc_ledger_requeue (l, agent, k->id, k->attempt);
    }
  commit (l);
}

static void
test_round_trip (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *ref = NULL;
  {
    g_autoptr (DatcBag) bag = make_bag ();
    g_autoptr (DatcLedger) l = open_ledger (f->dir, bag);
    guint32 a4 = datc_ledger_agent_hello (l, "agent-4", "a", "p4", "h4");
    for (guint round = 0; round < 1000; round++)
      churn (l, a4);
    ref = compacted_copy (f->dir, "ref2");
    guint64 before = journal_size (f->dir);
    g_assert_true (datc_ledger_compact (l, TRUE, &error));
    g_assert_no_error (error);
    DatcLedgerJournalInfo info;
    datc_ledger_journal_info (l, &info);
    g_assert_cmpuint (info.compactions, ==, 1);
    g_assert_cmpuint (info.compacted_from, ==, before);
    g_assert_cmpuint (info.bytes, <, before / 4);
    g_assert_cmpuint (journal_size (f->dir), ==, info.bytes);
  }
  expect_state_of (f, ref);
  assert_reopens_as_expected (f, f->dir);
}

/* Commits (nothing new in them) until no compaction is under way: the
 * child's end is seen, and the records behind it copied, by commits. */
static void
commit_until_compacted (DatcLedger *l)
{
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  DatcLedgerJournalInfo info;
  for (;;)
    {
      commit (l);
      datc_ledger_journal_info (l, &info);
      if (!info.compacting)
        break;
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_usleep (1000);
    }
}

/* The records committed while the writer runs land behind the checkpoint.
 * `data`: the most copied behind it per commit (0: all at the switch). */
static void
test_records_during_compaction (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *ref = compacted_copy (f->dir, "ref3");
  guint64 slice = GPOINTER_TO_SIZE (data);
  {
    g_autoptr (DatcBag) bag = make_bag ();
    g_autoptr (DatcBag) rbag = make_bag ();
    DatcLedgerOptions o = { .compact_min_bytes = G_MAXUINT64, .compact_slice_bytes = slice };
    g_autoptr (DatcLedger) l = open_ledger_with (f->dir, bag, &o);
    g_autoptr (DatcLedger) rl = open_ledger (ref, rbag);
    g_assert_true (datc_ledger_compact (l, FALSE, &error));
    DatcLedger *both[] = { l, rl };
    for (guint k = 0; k < 2; k++)
      {
        datc_ledger_expire_orphans (both[k], G_MAXINT64);
        guint32 a = datc_ledger_agent_hello (both[k], "agent-5", "b", "p5", "h5");
        g_autoptr (GArray) picked = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
        DatcDispatchRequest r = { .agent = a, .max = 3, .budget_ms = G_MAXUINT64 };
        datc_ledger_dispatch (both[k], &r, picked);
        for (guint i = 0; i < picked->len; i++)
          result (both[k], a, g_array_index (picked, DatcTaskKey, i).id, 0, 7);
        commit (both[k]);
      }
    if (slice > 0)
      commit_until_compacted (l);
    else
      g_assert_true (datc_ledger_compact (l, TRUE, &error));
    g_assert_no_error (error);
    DatcLedgerJournalInfo info;
    datc_ledger_journal_info (l, &info);
    g_assert_cmpuint (info.compactions, >=, 1);
  }
  expect_state_of (f, ref);
  assert_reopens_as_expected (f, f->dir);
}

/* Without fork (it failed) the loop takes the snapshot and a thread
 * writes the rest, to the same journal. */
static void
test_without_fork (Fixture *f, gconstpointer data)
{
  if (g_test_subprocess ())
    {
      g_setenv ("DATC_TEST_COMPACT_NO_FORK", "1", TRUE);
      test_records_during_compaction (f, NULL);
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("*cannot fork to compact the journal*");
}

/* A writer paced a byte at a time (every record it writes is a step: out
 * on the disk, waited for, then a rest) still finishes, forked or on a
 * thread, and its journal opens to the same state. */
static void
test_paced_writer (Fixture *f, gconstpointer data)
{
  if (data != NULL && !g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      g_test_trap_assert_stderr ("*cannot fork to compact the journal*");
      return;
    }
  if (data != NULL)
    g_setenv ("DATC_TEST_COMPACT_NO_FORK", "1", TRUE);
  g_autofree gchar *ref = compacted_copy (f->dir, "ref5");
  {
    g_autoptr (DatcBag) bag = make_bag ();
    DatcLedgerOptions o = { .compact_min_bytes = G_MAXUINT64, .compact_step_bytes = 1 };
    g_autoptr (DatcLedger) l = open_ledger_with (f->dir, bag, &o);
    g_autoptr (GError) error = NULL;
    g_assert_true (datc_ledger_compact (l, FALSE, &error));
    g_assert_no_error (error);
    commit_until_compacted (l);
    DatcLedgerJournalInfo info;
    datc_ledger_journal_info (l, &info);
    g_assert_cmpuint (info.compactions, ==, 1);
  }
  expect_state_of (f, ref);
  assert_reopens_as_expected (f, f->dir);
}

/* Churns both until `l` has `n` compactions and none under way; with
 * `moving` (a results.jsonl renamed there while it runs: the child
 * cannot read it) the name is put back once a compaction has ended. */
static void
churn_until_compactions (DatcLedger *l, guint32 a, DatcLedger *rl, guint32 ra, guint n,
                         const char *results, const char *moving)
{
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  DatcLedgerJournalInfo info;
  gboolean started = FALSE;
  if (moving != NULL)
    g_assert_cmpint (g_rename (results, moving), ==, 0);
  for (;;)
    {
      churn (l, a);
      churn (rl, ra);
      datc_ledger_journal_info (l, &info);
      started = started || info.compacting;
      if (started && !info.compacting)
        break;
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
    }
  if (moving != NULL)
    g_assert_cmpint (g_rename (moving, results), ==, 0);
  g_assert_cmpuint (info.compactions, ==, n);
}

/* The compaction's child, started by this (the main) thread. */
static pid_t
only_child (void)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/self/task/%d/children", (int) getpid ());
  g_autofree gchar *text = NULL;
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_auto (GStrv) pids = g_strsplit (g_strstrip (text), " ", -1);
  g_assert_cmpuint (g_strv_length (pids), ==, 1);
  return (pid_t) g_ascii_strtoll (pids[0], NULL, 10);
}

/* The state letter of /proc/PID/stat, or 0 once the process is gone. */
static char
process_state (pid_t pid)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/stat", (int) pid);
  g_autofree gchar *stat = NULL;
  if (!g_file_get_contents (path, &stat, NULL, NULL))
    return 0;
  const char *state = strrchr (stat, ')');
  return state != NULL ? state[2] : 0;
}

/* A ledger whose open compacts at once, its child told to stop at
 * `kill_at` (DATC_TEST_COMPACT_KILL_AT). */
static DatcLedger *
open_compacting (Fixture *f, DatcBag *bag, const char *kill_at)
{
  DatcLedgerOptions o = { .compact_min_bytes = 1 };
  g_setenv ("DATC_TEST_COMPACT_KILL_AT", kill_at, TRUE);
  DatcLedger *l = open_ledger_with (f->dir, bag, &o);
  g_unsetenv ("DATC_TEST_COMPACT_KILL_AT");
  return l;
}

/* A campaign that ends while its compaction's writer still works waits
 * for it through the owner's wait function (the master answers `datc
 * status` meanwhile), not blind: here the child stops itself at its start
 * and only the wait function lets it go on. */
static void
test_finish_waits_through_the_owner (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr (DatcBag) bag = make_bag ();
  g_autoptr (DatcLedger) l = open_compacting (f, bag, "stopped");
  DatcLedgerJournalInfo info;
  datc_ledger_journal_info (l, &info);
  g_assert_true (info.compacting);
  pid_t child = only_child ();
  /* Stopped (it may not have got there yet). */
  while (process_state (child) != 'T')
    {
      g_assert_cmpint (process_state (child), !=, 0);
      g_usleep (1000);
    }
  TestIoWait w = test_io_wait_init (TRUE);
  w.other_threads = TRUE;
  w.stopped = child;
  datc_ledger_set_sync_wait (l, test_io_wait, &w);
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_ledger_finish_compaction (l, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (w.calls, >=, 1);
  g_assert_cmpint (w.stopped, ==, 0);
  datc_ledger_journal_info (l, &info);
  g_assert_false (info.compacting);
  g_assert_cmpuint (info.compactions, ==, 1);
  datc_ledger_set_sync_wait (l, NULL, NULL);
}

/* A child that has written and synced the checkpoint says so before its
 * exit, which can take seconds on a busy host: the compaction is put in
 * place without waiting for that exit (here the child stops itself just
 * after saying it), the child by then holds no descriptor but its pipe
 * and the standard three (not the campaign's lock), and the ledger's end
 * kills it without waiting. */
static void
test_child_slow_to_exit (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr (DatcBag) bag = make_bag ();
  DatcLedger *l = open_compacting (f, bag, "exiting");
  pid_t child = only_child ();
  g_autoptr (GError) error = NULL;
  gint64 t0 = g_get_monotonic_time ();
  g_assert_true (datc_ledger_finish_compaction (l, &error));
  g_assert_no_error (error);
  /* Not its 120 s deadline. */
  g_assert_cmpint (g_get_monotonic_time () - t0, <, 60 * G_USEC_PER_SEC);
  DatcLedgerJournalInfo info;
  datc_ledger_journal_info (l, &info);
  g_assert_false (info.compacting);
  g_assert_cmpuint (info.compactions, ==, 1);
  /* Stopped after it said so (it may not have got there yet). */
  while (process_state (child) != 'T')
    {
      g_assert_cmpint (g_get_monotonic_time () - t0, <, 60 * G_USEC_PER_SEC);
      g_usleep (1000);
    }
  g_autofree gchar *fd_dir = g_strdup_printf ("/proc/%d/fd", (int) child);
  g_autoptr (GDir) fds = g_dir_open (fd_dir, 0, &error);
  g_assert_no_error (error);
  guint n_fds = 0;
  while (g_dir_read_name (fds) != NULL)
    n_fds++;
  g_assert_cmpuint (n_fds, <=, 4);

  datc_ledger_free (l);
  /* Killed; reaped by the ledger, or left for its parent (us) to reap. */
  int status = 0;
  pid_t got = waitpid (child, &status, 0);
  if (got == child)
    g_assert_true (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);
  else
    g_assert_cmpint (errno, ==, ECHILD);
  g_assert_cmpint (process_state (child), ==, 0);
  /* The compacted journal opens to the campaign's state. */
  assert_reopens_as_expected (f, f->dir);
}

/* A compaction whose child fails (killed, or it cannot read results.jsonl)
 * costs nothing but itself: the campaign goes on committing, no
 * journal.new is left, the failure is said, and the next compaction that
 * is due (the journal twice its checkpoint here) succeeds; the journal
 * then opens to the same state as one never compacted. */
static void
test_failed_child (Fixture *f, gconstpointer data)
{
  const char *how = data;
  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      g_test_trap_assert_stderr (g_str_equal (how, "killed")
                                     ? "*compacting the journal failed*killed by signal 9*"
                                     : "*compacting the journal failed*results.jsonl*");
      return;
    }
  g_autofree gchar *ref = compacted_copy (f->dir, "ref4");
  g_autofree gchar *results = g_build_filename (f->dir, "results.jsonl", NULL);
  g_autofree gchar *moved = g_build_filename (f->dir, "results.moved", NULL);
  g_autofree gchar *leftover = g_build_filename (f->dir, "journal.new", NULL);
  {
    g_autoptr (DatcBag) bag = make_bag ();
    g_autoptr (DatcBag) rbag = make_bag ();
    /* Due from the start (compacted at the open), then at twice that. */
    DatcLedgerOptions o = { .compact_min_bytes = 1, .compact_factor = 2 };
    g_autoptr (DatcLedger) l = open_ledger_with (f->dir, bag, &o);
    g_autoptr (GError) error = NULL;
    /* The open's compaction goes on while the ledger serves: in place
     * before the test's own. */
    g_assert_true (datc_ledger_finish_compaction (l, &error));
    g_assert_no_error (error);
    g_autoptr (DatcLedger) rl = open_ledger (ref, rbag);
    guint32 a = datc_ledger_agent_hello (l, "agent-6", "a", "p6", "h6");
    guint32 ra = datc_ledger_agent_hello (rl, "agent-6", "a", "p6", "h6");

    if (g_str_equal (how, "killed"))
      g_setenv ("DATC_TEST_COMPACT_KILL_AT", "child", TRUE);
    churn_until_compactions (l, a, rl, ra, 1, results,
                             g_str_equal (how, "unreadable") ? moved : NULL);
    g_unsetenv ("DATC_TEST_COMPACT_KILL_AT");
    g_assert_false (g_file_test (leftover, G_FILE_TEST_EXISTS));

    churn_until_compactions (l, a, rl, ra, 2, results, NULL);
    g_assert_false (g_file_test (leftover, G_FILE_TEST_EXISTS));
  }
  expect_state_of (f, ref);
  assert_reopens_as_expected (f, f->dir);
}

/* A master killed at each step of a compaction: the journal opens, to the
 * same state, and no journal.new is left. */
static void
test_killed_at_every_step (Fixture *f, gconstpointer data)
{
  const char *steps[] = { "written", "copied", "synced", "renamed" };
  for (guint i = 0; i < G_N_ELEMENTS (steps); i++)
    {
      g_autofree gchar *name = g_strdup_printf ("kill-%s", steps[i]);
      g_autofree gchar *dir = compacted_copy (f->dir, name);
      pid_t pid = fork ();
      g_assert_cmpint (pid, >=, 0);
      if (pid == 0)
        {
          g_setenv ("DATC_TEST_COMPACT_KILL_AT", steps[i], TRUE);
          DatcBag *bag = make_bag ();
          DatcLedger *l = open_ledger (dir, bag);
          datc_ledger_compact (l, TRUE, NULL);
          _exit (0);
        }
      int status = 0;
      g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
      g_assert_true (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);
      g_autofree gchar *leftover = g_build_filename (dir, "journal.new", NULL);
      g_assert_true (g_file_test (leftover, G_FILE_TEST_EXISTS) == (i < 3));
      assert_reopens_as_expected (f, dir);
    }
}

/* A journal.new cut anywhere (a crash while it was written) is never
 * taken for the journal. */
static void
test_cut_new_file_at_every_offset (Fixture *f, gconstpointer data)
{
  g_autofree gchar *whole = compacted_copy (f->dir, "whole");
  pid_t pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      g_setenv ("DATC_TEST_COMPACT_KILL_AT", "synced", TRUE);
      DatcBag *bag = make_bag ();
      DatcLedger *l = open_ledger (whole, bag);
      datc_ledger_compact (l, TRUE, NULL);
      _exit (0);
    }
  int status = 0;
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_autofree gchar *new_path = g_build_filename (whole, "journal.new", NULL);
  g_autofree gchar *contents = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (new_path, &contents, &len, NULL));
  g_assert_cmpuint (len, >, 8);
  for (gsize cut = 0; cut <= len; cut += 1 + cut / 16)
    {
      g_autofree gchar *dir = compacted_copy (whole, "cut");
      g_autofree gchar *p = g_build_filename (dir, "journal.new", NULL);
      g_assert_true (g_file_set_contents (p, contents, (gssize) cut, NULL));
      assert_reopens_as_expected (f, dir);
      remove_dir (dir);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/ledger/compact/reopens-to-the-same-state-in-a-fraction-of-the-bytes", Fixture, NULL,
              setup, test_round_trip, teardown);
  g_test_add ("/ledger/compact/records-taken-meanwhile-land-behind-the-checkpoint", Fixture, NULL,
              setup, test_records_during_compaction, teardown);
  g_test_add ("/ledger/compact/records-taken-meanwhile-are-copied-a-slice-per-commit", Fixture,
              GSIZE_TO_POINTER (64), setup, test_records_during_compaction, teardown);
  g_test_add ("/ledger/compact/without-fork-a-thread-writes-the-same-journal", Fixture, NULL, setup,
              test_without_fork, teardown);
  g_test_add ("/ledger/compact/a-writer-paced-a-byte-at-a-time-still-finishes", Fixture, NULL,
              setup, test_paced_writer, teardown);
  g_test_add ("/ledger/compact/a-writer-paced-a-byte-at-a-time-still-finishes-without-fork",
              Fixture, "no fork", setup, test_paced_writer, teardown);
  g_test_add ("/ledger/compact/an-end-that-waits-for-the-writer-waits-through-the-owner", Fixture,
              NULL, setup, test_finish_waits_through_the_owner, teardown);
  g_test_add ("/ledger/compact/a-child-slow-to-exit-is-not-waited-for", Fixture, NULL, setup,
              test_child_slow_to_exit, teardown);
  g_test_add ("/ledger/compact/a-killed-child-costs-only-that-compaction", Fixture, "killed", setup,
              test_failed_child, teardown);
  g_test_add ("/ledger/compact/a-failing-child-costs-only-that-compaction", Fixture, "unreadable",
              setup, test_failed_child, teardown);
  g_test_add ("/ledger/compact/a-kill-at-every-step-leaves-a-journal-that-opens", Fixture, NULL,
              setup, test_killed_at_every_step, teardown);
  g_test_add ("/ledger/compact/a-new-file-cut-anywhere-is-never-the-journal", Fixture, NULL, setup,
              test_cut_new_file_at_every_offset, teardown);
  return g_test_run ();
}
