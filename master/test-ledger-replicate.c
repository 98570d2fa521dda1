/* test-ledger-replicate.c: end-game replication as the ledger keeps it,
 * on a real journal in a temporary directory: a task with two live
 * attempts on two agents, the first result that counts wins (the other is
 * to be cancelled, and what it sends later is a duplicate), a copy that
 * fails or is lost while the other runs costs the task nothing, a restart
 * replays the copies (either agent re-attaches), and which running tasks
 * are worth a copy. */
#include <glib.h>
#include <string.h>

#include "datc-limits.h"
#include "ledger.h"
#include "message.h"

typedef struct {
  gchar *dir;
  DatcBag *bag;
  DatcLedger *ledger;
  guint32 a, b;   /* two agents */
  GArray *picked; /* DatcTaskKey */
} Fixture;

static void
open_ledger (Fixture *f)
{
  g_autoptr (GError) error = NULL;
  DatcLedgerOptions o = { 0 };
  f->ledger = datc_ledger_open (f->dir, f->bag, "t.jsonl", "00", &o, &error);
  g_assert_no_error (error);
  f->a = datc_ledger_agent_hello (f->ledger, "agent-a", "site", "proxy-a", "host");
  f->b = datc_ledger_agent_hello (f->ledger, "agent-b", "site", "proxy-b", "host");
}

/* `n` tasks; the last one with `last_fields` added to its JSON line. */
static void
setup (Fixture *f, guint n, const char *last_fields)
{
  g_autoptr (GError) error = NULL;
  f->dir = g_dir_make_tmp ("datc-replicate-XXXXXX", &error);
  g_assert_no_error (error);
  g_autoptr (GString) text = g_string_new (NULL);
  for (guint i = 1; i <= n; i++)
    g_string_append_printf (text, "{\"sh\": \"true\"%s}\n", i == n ? last_fields : "");
  f->bag = datc_bag_new ();
  g_assert_true (
      datc_bag_load_data (f->bag, "t.jsonl", text->str, text->len, DATC_TASKFILE_JSONL, &error));
  open_ledger (f);
  f->picked = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
}

static void
teardown (Fixture *f)
{
  datc_ledger_free (f->ledger);
  datc_bag_free (f->bag);
  g_array_unref (f->picked);
  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", f->dir);
  g_assert_cmpint (system (cmd), ==, 0);
  g_free (f->dir);
}

static guint
dispatch (Fixture *f, guint32 agent, guint max)
{
  g_array_set_size (f->picked, 0);
  DatcDispatchRequest req = { .agent = agent, .max = max, .budget_ms = G_MAXUINT64 };
  return datc_ledger_dispatch (f->ledger, &req, f->picked);
}

static DatcResultOutcome
report (Fixture *f, guint32 agent, guint64 id, guint32 attempt, int exit_code, gint64 runtime_ms,
        GArray *cancel)
{
  gint64 now = g_get_real_time ();
  DatcResult r = {
    .id = id,
    .attempt = attempt,
    .status = DATC_STATUS_EXITED,
    .exit_code = exit_code,
    .started_us = now - runtime_ms * 1000,
    .finished_us = now,
    .out = g_bytes_new_static ("out\n", 4),
    .err = g_bytes_new (NULL, 0),
  };
  g_autoptr (GError) error = NULL;
  DatcResultOutcome oc = datc_ledger_take_result (f->ledger, agent, &r, cancel, &error);
  g_assert_no_error (error);
  g_bytes_unref (r.out);
  g_bytes_unref (r.err);
  return oc;
}

/* Tasks 1..n-1 run on agent a and finish, each taking `runtime_ms`; task
 * n is left running on agent a (attempt 1). */
static void
all_but_last_done (Fixture *f, guint n, gint64 runtime_ms)
{
  g_assert_cmpuint (dispatch (f, f->a, n), ==, n);
  for (guint64 id = 1; id < n; id++)
    g_assert_cmpint (report (f, f->a, id, 1, 0, runtime_ms, NULL), ==, DATC_RESULT_ACCEPTED);
}

static guint
count_lines (const char *path, const char *needle)
{
  g_autofree gchar *text = NULL;
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  guint n = 0;
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    if (lines[i][0] != '\0' && (needle == NULL || strstr (lines[i], needle) != NULL))
      n++;
  return n;
}

static void
commit (Fixture *f)
{
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_ledger_commit (f->ledger, &error));
  g_assert_no_error (error);
}

static void
reopen (Fixture *f)
{
  commit (f);
  datc_ledger_free (f->ledger);
  open_ledger (f);
}

static void
test_first_result_wins (void)
{
  Fixture f;
  setup (&f, 3, "");
  all_but_last_done (&f, 3, 100);
  /* A copy is never started where the task runs already. */
  g_array_set_size (f.picked, 0);
  g_assert_cmpuint (datc_ledger_replicate (f.ledger, f.a, 3, f.picked), ==, 0);
  g_assert_cmpuint (f.picked->len, ==, 0);
  g_assert_cmpuint (datc_ledger_replicate (f.ledger, f.b, 3, f.picked), ==, 1);
  /* What agent b is sent: the task as attempt 2. */
  g_assert_cmpuint (f.picked->len, ==, 1);
  DatcTaskKey *t = &g_array_index (f.picked, DatcTaskKey, 0);
  g_assert_cmpuint (t->id, ==, 3);
  g_assert_cmpuint (t->attempt, ==, 2);

  g_assert_true (datc_ledger_attempt_live (f.ledger, 3, f.a, 1));
  g_assert_true (datc_ledger_attempt_live (f.ledger, 3, f.b, 2));
  g_assert_false (datc_ledger_attempt_live (f.ledger, 3, f.a, 2));
  DatcLedgerCounts c;
  datc_ledger_counts (f.ledger, &c);
  g_assert_cmpuint (c.running, ==, 1);
  g_autoptr (GArray) on_a = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  g_autoptr (GArray) on_b = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  datc_ledger_agent_tasks (f.ledger, f.a, on_a);
  datc_ledger_agent_tasks (f.ledger, f.b, on_b);
  g_assert_cmpuint (on_a->len, ==, 1);
  g_assert_cmpuint (g_array_index (on_a, DatcTaskKey, 0).attempt, ==, 1);
  g_assert_cmpuint (on_b->len, ==, 1);
  g_assert_cmpuint (g_array_index (on_b, DatcTaskKey, 0).attempt, ==, 2);

  /* The copy ends first: it wins, the original is to be cancelled. */
  g_autoptr (GArray) cancel = g_array_new (FALSE, FALSE, sizeof (DatcLedgerRunning));
  g_assert_cmpint (report (&f, f.b, 3, 2, 0, 50, cancel), ==, DATC_RESULT_ACCEPTED);
  g_assert_cmpuint (cancel->len, ==, 1);
  DatcLedgerRunning *lr = &g_array_index (cancel, DatcLedgerRunning, 0);
  g_assert_cmpuint (lr->agent, ==, f.a);
  g_assert_cmpuint (lr->attempt, ==, 1);
  g_assert_cmpuint (lr->id, ==, 3);
  g_assert_cmpint (datc_ledger_task_state (f.ledger, 3), ==, DATC_TASK_DONE);
  g_assert_cmpuint (datc_ledger_task_attempt (f.ledger, 3), ==, 2);
  /* The loser's answer, cancelled or finished, is not recorded. */
  g_array_set_size (cancel, 0);
  g_assert_cmpint (report (&f, f.a, 3, 1, 0, 9000, cancel), ==, DATC_RESULT_DUPLICATE);
  g_assert_cmpint (report (&f, f.a, 3, 1, 1, 9000, cancel), ==, DATC_RESULT_DUPLICATE);
  g_assert_cmpuint (cancel->len, ==, 0);
  datc_ledger_counts (f.ledger, &c);
  g_assert_cmpuint (c.done, ==, 3);
  g_assert_cmpuint (c.failed, ==, 0);

  commit (&f);
  g_autofree gchar *results = g_build_filename (f.dir, "results.jsonl", NULL);
  g_assert_cmpuint (count_lines (results, NULL), ==, 3);
  g_assert_cmpuint (count_lines (results, "{\"id\":3,"), ==, 1);
  g_assert_cmpuint (count_lines (results, "{\"id\":3,\"line\":3,\"attempt\":2,"), ==, 1);
  /* Replayed, the same. */
  reopen (&f);
  g_assert_cmpint (datc_ledger_task_state (f.ledger, 3), ==, DATC_TASK_DONE);
  g_assert_cmpuint (datc_ledger_task_attempt (f.ledger, 3), ==, 2);
  g_assert_cmpuint (count_lines (results, NULL), ==, 3);
  g_assert_cmpuint (count_lines (results, "{\"id\":3,\"line\":3,\"attempt\":2,"), ==, 1);
  teardown (&f);
}

/* A copy that fails while another runs fails nothing; the last one's
 * failure is the task's. */
static void
test_failed_copy_does_not_fail_the_task (void)
{
  Fixture f;
  setup (&f, 2, "");
  all_but_last_done (&f, 2, 100);
  g_assert_cmpuint (datc_ledger_replicate (f.ledger, f.b, 2, f.picked), ==, 1);
  g_autoptr (GArray) cancel = g_array_new (FALSE, FALSE, sizeof (DatcLedgerRunning));
  g_assert_cmpint (report (&f, f.b, 2, 2, 3, 50, cancel), ==, DATC_RESULT_DROPPED);
  g_assert_cmpuint (cancel->len, ==, 0);
  g_assert_cmpint (datc_ledger_task_state (f.ledger, 2), ==, DATC_TASK_RUNNING);
  g_assert_false (datc_ledger_attempt_live (f.ledger, 2, f.b, 2));
  g_assert_true (datc_ledger_attempt_live (f.ledger, 2, f.a, 1));
  /* Replayed: still running on a alone. */
  reopen (&f);
  g_assert_cmpint (datc_ledger_task_state (f.ledger, 2), ==, DATC_TASK_RUNNING);
  g_assert_true (datc_ledger_reattach (f.ledger, f.a, 2, 1));
  g_assert_false (datc_ledger_reattach (f.ledger, f.b, 2, 2));
  /* The original fails too: now the task fails (no retries). */
  g_assert_cmpint (report (&f, f.a, 2, 1, 1, 100, cancel), ==, DATC_RESULT_ACCEPTED);
  g_assert_cmpint (datc_ledger_task_state (f.ledger, 2), ==, DATC_TASK_FAILED);
  g_assert_cmpuint (datc_ledger_task_attempt (f.ledger, 2), ==, 1);
  teardown (&f);
}

/* A master killed while a copy runs: replay knows both copies, either
 * agent re-attaches its own, the first result wins, and a lost copy
 * costs no crash. */
static void
test_replay_keeps_both_copies (void)
{
  Fixture f;
  setup (&f, 2, "");
  all_but_last_done (&f, 2, 100);
  g_assert_cmpuint (datc_ledger_replicate (f.ledger, f.b, 2, f.picked), ==, 1);
  reopen (&f);
  g_assert_cmpint (datc_ledger_task_state (f.ledger, 2), ==, DATC_TASK_RUNNING);
  g_assert_cmpuint (datc_ledger_orphans (f.ledger), ==, 1);
  g_assert_true (datc_ledger_reattach (f.ledger, f.b, 2, 2));
  g_assert_cmpuint (datc_ledger_orphans (f.ledger), ==, 0);
  g_assert_true (datc_ledger_reattach (f.ledger, f.a, 2, 1));
  g_assert_false (datc_ledger_reattach (f.ledger, f.a, 2, 2));
  /* Agent b is lost: the task runs on in a, no crash, and again after a
   * second restart. */
  g_assert_cmpuint (datc_ledger_agent_gone (f.ledger, f.b, TRUE), ==, 1);
  g_assert_cmpint (datc_ledger_task_state (f.ledger, 2), ==, DATC_TASK_RUNNING);
  g_assert_true (datc_ledger_attempt_live (f.ledger, 2, f.a, 1));
  reopen (&f);
  g_assert_true (datc_ledger_reattach (f.ledger, f.a, 2, 1));
  g_autoptr (GArray) cancel = g_array_new (FALSE, FALSE, sizeof (DatcLedgerRunning));
  g_assert_cmpint (report (&f, f.a, 2, 1, 0, 100, cancel), ==, DATC_RESULT_ACCEPTED);
  g_assert_cmpuint (cancel->len, ==, 0);
  commit (&f);
  g_autofree gchar *results = g_build_filename (f.dir, "results.jsonl", NULL);
  g_assert_cmpuint (count_lines (results, "{\"id\":2,"), ==, 1);
  g_assert_cmpuint (count_lines (results, "{\"id\":2,\"line\":2,\"attempt\":1,"), ==, 1);
  teardown (&f);
}

/* The candidates seen `later_s` seconds from now. */
static guint
candidates (Fixture *f, guint max_copies, gint64 later_s, GArray *out)
{
  g_array_set_size (out, 0);
  datc_ledger_replica_candidates (f->ledger, max_copies,
                                  g_get_real_time () + later_s * G_USEC_PER_SEC, out);
  return out->len;
}

/* A task that has run longer than every observed run is a straggler:
 * worth a copy, with its remaining time unknown.  Not before enough runs
 * were observed, not with max_copies copies live, not when marked
 * "replicate": false. */
static void
test_candidates (void)
{
  Fixture f;
  setup (&f, 22, "");
  g_assert_cmpuint (dispatch (&f, f.a, 22), ==, 22);
  g_autoptr (GArray) out = g_array_new (FALSE, FALSE, sizeof (DatcReplicaCandidate));
  for (guint64 id = 1; id <= 19; id++)
    g_assert_cmpint (report (&f, f.a, id, 1, 0, 100, NULL), ==, DATC_RESULT_ACCEPTED);
  g_assert_cmpuint (candidates (&f, 2, 10, out), ==, 0); /* 19 runs: too few to judge */
  g_assert_cmpint (report (&f, f.a, 20, 1, 0, 100, NULL), ==, DATC_RESULT_ACCEPTED);
  /* 20 runs of 0.1 s; tasks 21 and 22 seen 10 s after their dispatch. */
  g_assert_cmpuint (candidates (&f, 2, 10, out), ==, 2);
  DatcReplicaCandidate *rc = &g_array_index (out, DatcReplicaCandidate, 0);
  g_assert_true (rc->id == 21 || rc->id == 22);
  g_assert_cmpuint (rc->remaining_ms, ==, G_MAXUINT64);
  g_assert_cmpuint (rc->copies, ==, 1);
  g_assert_cmpuint (rc->elapsed_ms, >=, 10000);
  g_assert_cmpuint (rc->copy_ms, >=, 80);
  g_assert_cmpuint (rc->copy_ms, <=, 120);
  /* One copy of 21: with max 2 it has enough, with max 3 it may get one
   * more. */
  g_assert_cmpuint (datc_ledger_replicate (f.ledger, f.b, 21, f.picked), ==, 1);
  g_assert_cmpuint (candidates (&f, 2, 10, out), ==, 1);
  g_assert_cmpuint (g_array_index (out, DatcReplicaCandidate, 0).id, ==, 22);
  g_assert_cmpuint (candidates (&f, 3, 10, out), ==, 2);
  g_assert_cmpuint (candidates (&f, 1, 10, out), ==, 0);
  teardown (&f);

  /* "replicate": false on the straggler. */
  setup (&f, 21, ", \"replicate\": false");
  g_assert_cmpuint (dispatch (&f, f.a, 21), ==, 21);
  for (guint64 id = 1; id <= 20; id++)
    g_assert_cmpint (report (&f, f.a, id, 1, 0, 100, NULL), ==, DATC_RESULT_ACCEPTED);
  g_assert_cmpuint (candidates (&f, 2, 10, out), ==, 0);
  teardown (&f);
}

/* A task that has run about as long as the others is no straggler: its
 * expected remaining time is below a copy's. */
static void
test_no_copy_of_a_task_on_time (void)
{
  Fixture f;
  setup (&f, 21, "");
  g_assert_cmpuint (dispatch (&f, f.a, 21), ==, 21);
  for (guint64 id = 1; id <= 20; id++)
    g_assert_cmpint (report (&f, f.a, id, 1, 0, 60000, NULL), ==, DATC_RESULT_ACCEPTED);
  g_autoptr (GArray) out = g_array_new (FALSE, FALSE, sizeof (DatcReplicaCandidate));
  g_assert_cmpuint (candidates (&f, 2, 0, out), ==, 0);
  g_assert_cmpuint (candidates (&f, 2, 30, out), ==, 0);
  /* Seen 70 s after its dispatch: it outlived every observed run. */
  g_assert_cmpuint (candidates (&f, 2, 70, out), ==, 1);
  g_assert_cmpuint (g_array_index (out, DatcReplicaCandidate, 0).copy_ms, >=, 50000);
  teardown (&f);
}

/* What agents a and b run, per the ledger's list of an agent's tasks and
 * per its count (datc_ledger_agent_attempts, all the dispatcher reads of
 * an agent's load): both must say on_a and on_b, and the list must be
 * what a scan of the whole bag finds live on the agent, in id order. */
static void
expect_attempts (Fixture *f, guint on_a, guint on_b)
{
  const guint32 agents[] = { f->a, f->b };
  const guint want[] = { on_a, on_b };
  guint64 n = datc_bag_count (f->bag);
  for (guint i = 0; i < G_N_ELEMENTS (agents); i++)
    {
      g_autoptr (GArray) keys = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
      datc_ledger_agent_tasks (f->ledger, agents[i], keys);
      g_assert_cmpuint (keys->len, ==, want[i]);
      g_assert_cmpuint (datc_ledger_agent_attempts (f->ledger, agents[i]), ==, want[i]);
      guint live = 0;
      for (guint64 id = 1; id <= n; id++)
        live += datc_ledger_runs_on (f->ledger, id, agents[i]);
      g_assert_cmpuint (live, ==, want[i]);
      for (guint k = 0; k < keys->len; k++)
        {
          const DatcTaskKey *key = &g_array_index (keys, DatcTaskKey, k);
          g_assert_true (datc_ledger_attempt_live (f->ledger, key->id, agents[i], key->attempt));
        }
    }
}

/* Each agent's count of live attempts follows every transition (dispatch,
 * a copy, the winner ending the loser, a copy given back, a task given
 * back, a cancel, a loss) and comes out the same from a replay. */
static void
test_attempts_counted_per_agent (void)
{
  Fixture f;
  setup (&f, 6, "");
  g_assert_cmpuint (dispatch (&f, f.a, 3), ==, 3); /* 1 2 3 */
  g_assert_cmpuint (dispatch (&f, f.b, 2), ==, 2); /* 4 5 */
  expect_attempts (&f, 3, 2);
  g_autoptr (GArray) keys = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  datc_ledger_agent_tasks (f.ledger, f.a, keys);
  for (guint k = 0; k < keys->len; k++)
    g_assert_cmpuint (g_array_index (keys, DatcTaskKey, k).id, ==, k + 1);
  g_assert_cmpuint (datc_ledger_replicate (f.ledger, f.b, 1, f.picked), ==, 1);
  expect_attempts (&f, 3, 3);
  g_autoptr (GArray) cancel = g_array_new (FALSE, FALSE, sizeof (DatcLedgerRunning));
  g_assert_cmpint (report (&f, f.b, 1, 2, 0, 50, cancel), ==, DATC_RESULT_ACCEPTED);
  g_assert_cmpuint (cancel->len, ==, 1); /* a's copy, ended with the task */
  expect_attempts (&f, 2, 2);
  g_assert_cmpuint (datc_ledger_replicate (f.ledger, f.a, 4, f.picked), ==, 1);
  expect_attempts (&f, 3, 2);
  datc_ledger_requeue (f.ledger, f.a, 4, 2); /* a gives its copy back */
  expect_attempts (&f, 2, 2);
  datc_ledger_requeue (f.ledger, f.a, 2, 1); /* and task 2 */
  expect_attempts (&f, 1, 2);
  const guint64 five = 5;
  g_array_set_size (cancel, 0);
  g_assert_cmpuint (datc_ledger_cancel (f.ledger, &five, 1, cancel), ==, 1);
  expect_attempts (&f, 1, 1);
  reopen (&f);
  expect_attempts (&f, 1, 1);
  g_assert_cmpuint (datc_ledger_agent_gone (f.ledger, f.b, TRUE), ==, 1);
  g_assert_cmpuint (datc_ledger_agent_attempts (f.ledger, f.b), ==, 0);
  g_assert_cmpuint (datc_ledger_agent_attempts (f.ledger, f.a), ==, 1);
  g_assert_cmpuint (datc_ledger_agent_gone (f.ledger, f.a, FALSE), ==, 1);
  g_assert_cmpuint (datc_ledger_agent_attempts (f.ledger, f.a), ==, 0);
  DatcLedgerCounts c;
  datc_ledger_counts (f.ledger, &c);
  g_assert_cmpuint (c.running, ==, 0);
  teardown (&f);
}

/* A replay makes each agent's list from the tasks left running: plain
 * ones and the copies of replicated ones, on either agent. */
static void
test_attempts_replayed_with_copies (void)
{
  Fixture f;
  setup (&f, 6, "");
  g_assert_cmpuint (dispatch (&f, f.a, 3), ==, 3); /* 1 2 3 */
  g_assert_cmpuint (dispatch (&f, f.b, 2), ==, 2); /* 4 5 */
  g_assert_cmpuint (datc_ledger_replicate (f.ledger, f.b, 1, f.picked), ==, 1);
  g_assert_cmpuint (datc_ledger_replicate (f.ledger, f.a, 4, f.picked), ==, 1);
  g_assert_cmpint (report (&f, f.a, 2, 1, 0, 50, NULL), ==, DATC_RESULT_ACCEPTED);
  expect_attempts (&f, 3, 3);
  reopen (&f);
  expect_attempts (&f, 3, 3);
  teardown (&f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/ledger/replicate/two-live-attempts-the-first-result-wins",
                   test_first_result_wins);
  g_test_add_func ("/ledger/replicate/a-failed-copy-does-not-fail-the-task-while-another-runs",
                   test_failed_copy_does_not_fail_the_task);
  g_test_add_func ("/ledger/replicate/replay-keeps-both-copies-and-a-lost-copy-costs-no-crash",
                   test_replay_keeps_both_copies);
  g_test_add_func ("/ledger/replicate/stragglers-are-candidates-up-to-max-copies", test_candidates);
  g_test_add_func ("/ledger/replicate/a-task-on-time-gets-no-copy", test_no_copy_of_a_task_on_time);
  g_test_add_func ("/ledger/replicate/each-agent-s-live-attempts-are-counted-live-and-replayed",
                   test_attempts_counted_per_agent);
  g_test_add_func (
      "/ledger/replicate/each-agent-s-live-attempts-and-copies-come-back-from-a-replay",
      test_attempts_replayed_with_copies);
  return g_test_run ();
}
