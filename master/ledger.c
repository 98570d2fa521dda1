/* ledger.c: the state of every task, and the only code that changes it.
 *
 * Every public mutator builds a journal record and then calls the same
 * apply_* function that replay calls, so live operation and recovery can
 * not drift apart.  Replay decodes a record (journalrec.c, whose table
 * also encodes them) and looks its type up in `replayers`, one function
 * per type around its apply_*.
 *
 * Around the state: results.jsonl is written by resultsfile.c, each
 * agent's output file by agentoutput.c, observed run times are kept by
 * runtimes.c, and which queued task goes next is taskqueue.c's business
 * (per partition in static mode; the ledger tells it about every change to
 * the queued state).  Picked tasks are handed back as (id, attempt): the
 * dispatcher encodes the TASKS frames. */
#include "ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "agentoutput.h"
#include "hugemem.h"
#include "journal.h"
#include "journalrec.h"
#include "resultpack.h"
#include "resultsfile.h"
#include "runtimes.h"
#include "sha256.h"
#include "taskqueue.h"

G_DEFINE_QUARK (datc-ledger-error-quark, datc_ledger_error)

typedef struct {
  guint32 agent;   /* when running */
  guint32 attempt; /* the open (or last) attempt, as wide as the wire's; 0: never
                    * dispatched */
  guint8 state;    /* DatcTaskState */
  guint8 crashes;
  guint8 failures;
  guint8 bound : 1;      /* queued, but bound to a proxy (direct mode, `binders`): not in
                          * the queue */
  guint8 orphan : 1;     /* running when the last master died, its agent not back yet */
  guint8 replicated : 1; /* running as copies: their agents and attempts are in `replicas` */
  guint16 site;          /* the site of the agent its last attempt went to (site_names); 0: none */
} TaskSlot;

typedef struct {
  gchar *agent_id, *site, *proxy, *host;
  gchar *who;              /* the four as its results lines have them */
  DatcAgentOutput *output; /* outputs/<agent_id>.out */
  gboolean out_dirty;      /* written since the last commit: in dirty_outputs */
  gboolean gone;           /* left: freed (and its index reused) once its output is committed */
  gboolean awaited;        /* known to the last master, not back since this one started */
  guint32 idx;
  gint64 walltime_end_us; /* as its HELLO said, 0: none (not journaled) */
  guint32 site_id;        /* its site's index in site_names + 1, once known (site_id ()) */
} AgentInfo;

/* Tasks an earlier master left running, kept for their agents until
 * `deadline_us` (real time, journaled: a second crash does not extend it). */
typedef struct {
  gint64 deadline_us;
  GArray *keys; /* DatcTaskKey */
} OrphanWindow;

typedef struct {
  gchar *path, *sha256;
  guint64 first_id, count;
  gint64 submitted_us;
  GBytes *record; /* submitted tasks: their SOURCE record, which a
                   * checkpoint copies (the bag keeps no raw bytes) */
} SourceInfo;

/* A compaction under way.  A forked child writes all of it from its
 * copy-on-write image of the ledger (the snapshot, results.jsonl packed, a
 * sync) and exits, so the loop's thread is held only for the fork; a
 * commit that sees the child ended puts the new journal in place.  When
 * fork fails, the loop's thread frames the snapshot and a writer thread
 * does the rest, as before forking was tried. */
typedef struct Compaction Compaction;
/* Seconds a compaction's child may write, plus 10 per million tasks
 * (it takes about 1 s per million here). */
#define COMPACT_CHILD_MIN_S 120

struct Compaction {
  DatcJournalRewrite *rewrite;
  pid_t child;           /* the process writing it (0: none, or reaped) */
  gint64 child_deadline; /* monotonic µs: a child still writing then is killed */
  int report;            /* read end of the child's pipe: a NUL byte once its work is done
                          * (compact_child), else its error's message */
  gchar *said;           /* what it read there before the child ended, `said_len` bytes */
  gsize said_len;
  pid_t master;    /* in the child: the process that forked it */
  GThread *writer; /* when fork failed */
  gchar *results_path;
  guint64 results_len;
  gint done;     /* atomic: the writer has finished */
  GError *error; /* the writer's, or the child's as it reported it */
  gint64 time_us;
  guint64 from_bytes;
  guint64 step;   /* the writer's pace: compact_write_some */
  guint64 synced; /* the writer's file is out on the disk up to here (not durable
                   * before the writer's last sync) */
  char kill_at;   /* test hook: 'w' kill the master once written, 'c' the child only,
                   * 's' the child stops itself at its start (SIGSTOP) */
};

/* Direct mode: the task a proxy was submitted for.  Its task stays
 * reserved (TaskSlot.bound, in `binders`) until the proxy's agent takes it
 * or it moves on (cancelled); the binding itself stays until the proxy
 * ends, so what it was for can still be told. */
typedef struct {
  guint64 id;
  gboolean taken; /* its agent asked for its task (and got it, or it had moved on) */
} Binding;

/* One live attempt of a replicated task.  Times are milliseconds of the
 * real clock modulo 2^32: differences stay right for runs under 49 days. */
typedef struct {
  guint32 agent, attempt;
  guint32 since_ms; /* its dispatch */
} Copy;

struct DatcLedger {
  gchar *dir;
  /* What the owner's thread does while the ledger waits (datc_ledger_set_sync_wait:
   * the master answers `datc status`), or NULL. */
  DatcJournalWaitFunc wait;
  gpointer wait_data;
  DatcBag *bag;
  DatcJournal *journal;
  DatcLedgerOptions options;
  TaskSlot *tasks; /* index id - 1 */
  guint64 n_tasks;
  DatcLedgerCounts counts;
  DatcLedgerCounts committed; /* as of the last commit: what results.jsonl holds */
  DatcTaskQueue *queue;       /* which queued task goes next */
  GHashTable *bindings;       /* direct mode: "site\tproxy" -> Binding*, from its submit to its
                               * end: the one record of which task a proxy is for */
  GHashTable *binders;        /* id -> the Binding* its task is reserved for: exactly the tasks
                               * with `bound` set */
  DatcRuntimes *runtimes;     /* observed run times */
  GHashTable *running;        /* id -> dispatch time (Copy.since_ms) of running tasks: the
                               * end game looks only at these, never at the whole bag */
  GHashTable *replicas;       /* id -> GArray of Copy: tasks running as more than one copy */
  GPtrArray *agents;          /* AgentInfo* by index; NULL: free */
  GArray *attempts_on;        /* guint32 by agent index: its live attempts (attempts_add) */
  GPtrArray *tasks_on;        /* by agent index: GHashTable id -> live attempts of it there
                               * (NULL: none yet), the ids behind attempts_on */
  GArray *free_agents;        /* guint32 indices of departed agents, reused first */
  guint live_agents;          /* non-NULL entries of agents */
  guint awaited;              /* agents with `awaited` set */
  GPtrArray *windows;         /* OrphanWindow*, oldest first */
  guint64 orphans;            /* tasks with `orphan` set */
  GHashTable *agent_index;    /* agent_id -> index + 1 */
  GPtrArray *site_names;      /* gchar*, the sites tasks went to; [0] is none */
  GHashTable *site_ids;       /* site -> its index in site_names */
  GHashTable *proxies_seen;   /* "site\nproxy" of every agent that said HELLO */
  GPtrArray *sources;         /* SourceInfo* */
  GHashTable *proxies;        /* "site\tproxy" -> job_id, open ones */
  GHashTable *submits;        /* "site\tid" -> k, submissions whose outcome is not journaled */
  DatcResultsFile *results;   /* NULL when read-only */
  GArray *pick;               /* scratch: ids picked by dispatch */
  GArray *deferred;           /* scratch: ids that did not fit */
  GArray *dirty_outputs;      /* guint32 agents whose output file needs a sync */
  gchar *sync_failed;         /* an output file's fdatasync failed: no commit after it */
  gboolean replaying;
  gboolean filter_results; /* a retry record was seen: drop superseded lines */
  Compaction *compaction;  /* under way, or NULL */
  GArray *exiting;         /* pid_t: compaction children done with their work, still
                            * exiting (compact_reap) */
  DatcLedgerJournalInfo jinfo;
  guint64 replayed_bytes; /* of the journal, while it replays */
  guint64 replayed_records;
};

/* ---- small helpers ------------------------------------------------- */

/* Appends one record to the journal; it is written at the next commit. */
static void
journal_record (DatcLedger *l, const DatcRecord *rec)
{
  datc_record_encode (rec, datc_journal_begin (l->journal));
  datc_journal_end (l->journal);
}

static void
agent_info_free (gpointer p)
{
  AgentInfo *a = p;
  datc_agent_output_free (a->output);
  g_free (a->agent_id);
  g_free (a->site);
  g_free (a->proxy);
  g_free (a->host);
  g_free (a->who);
  g_free (a);
}

static void
orphan_window_free (gpointer p)
{
  OrphanWindow *w = p;
  g_array_unref (w->keys);
  g_free (w);
}

static void
source_info_free (gpointer p)
{
  SourceInfo *s = p;
  g_free (s->path);
  g_free (s->sha256);
  g_clear_pointer (&s->record, g_bytes_unref);
  g_free (s);
}

static TaskSlot *
slot (DatcLedger *l, guint64 id)
{
  if (id == 0 || id > l->n_tasks)
    return NULL;
  return &l->tasks[id - 1];
}

static guint32
ms32 (gint64 real_us)
{
  return (guint32) ((guint64) real_us / 1000u);
}

#define TASK_KEY(id) GSIZE_TO_POINTER ((gsize) (id))

/* The live copies of a replicated task (NULL for any other). */
static GArray *
copies_of (DatcLedger *l, guint64 id, const TaskSlot *t)
{
  return t->replicated ? g_hash_table_lookup (l->replicas, TASK_KEY (id)) : NULL;
}

static gint
copy_index (GArray *copies, guint32 agent, guint32 attempt)
{
  for (guint i = 0; copies != NULL && i < copies->len; i++)
    {
      const Copy *c = &g_array_index (copies, Copy, i);
      if (c->agent == agent && (attempt == 0 || c->attempt == attempt))
        return (gint) i;
    }
  return -1;
}

/* Whether (agent, attempt) is a live attempt of task `id`; attempt 0: any. */
static gboolean
live_on (DatcLedger *l, guint64 id, const TaskSlot *t, guint32 agent, guint32 attempt)
{
  if (t->state != DATC_TASK_RUNNING)
    return FALSE;
  if (t->replicated)
    return copy_index (copies_of (l, id, t), agent, attempt) >= 0;
  return t->agent == agent && (attempt == 0 || t->attempt == attempt);
}

static guint
live_copies (DatcLedger *l, guint64 id, const TaskSlot *t)
{
  if (t->state != DATC_TASK_RUNNING)
    return 0;
  return t->replicated ? copies_of (l, id, t)->len : 1;
}

/* The queue's question: may `id` be handed out now? */
static gboolean
is_dispatchable (gpointer data, guint64 id)
{
  const TaskSlot *t = &((DatcLedger *) data)->tasks[id - 1];
  return t->state == DATC_TASK_QUEUED && !t->bound;
}

static guint64 *
count_for (DatcLedger *l, guint8 state)
{
  switch ((DatcTaskState) state)
    {
    case DATC_TASK_QUEUED:
      return &l->counts.queued;
    case DATC_TASK_RUNNING:
      return &l->counts.running;
    case DATC_TASK_DONE:
      return &l->counts.done;
    case DATC_TASK_FAILED:
      return &l->counts.failed;
    case DATC_TASK_CANCELLED:
      return &l->counts.cancelled;
    }
  g_assert_not_reached ();
}

/* Agent indices the replay accepts (REC_AGENT); a record naming a larger
 * one names no agent, and its attempts are not counted. */
#define AGENT_INDEX_MAX (G_MAXUINT16 * 256u)

/* The live attempts on each agent (its tasks and copies), counted by the
 * transitions themselves (set_state, apply_dispatch, apply_replicate and
 * the ends of copies), so live operation and replay count alike and the
 * dispatcher learns an agent's load in O(1) (datc_ledger_agent_attempts),
 * never by a scan per task or per heartbeat. */
static void
tasks_on_free (gpointer p)
{
  if (p != NULL)
    g_hash_table_unref (p);
}

/* Which tasks, too: an agent that leaves or comes back is reconciled
 * over its own tasks, not over the bag. */
static void
tasks_on_add (DatcLedger *l, guint32 agent, guint64 id, gint delta)
{
  GHashTable *ids = l->tasks_on->pdata[agent];
  if (ids == NULL)
    ids = l->tasks_on->pdata[agent] = g_hash_table_new (NULL, NULL);
  guint on = GPOINTER_TO_UINT (g_hash_table_lookup (ids, TASK_KEY (id))) + delta;
  if (on > 0)
    g_hash_table_insert (ids, TASK_KEY (id), GUINT_TO_POINTER (on));
  else
    g_hash_table_remove (ids, TASK_KEY (id));
}

static void
attempts_add (DatcLedger *l, guint32 agent, guint64 id, gint delta)
{
  if (agent > AGENT_INDEX_MAX)
    return;
  if (agent >= l->attempts_on->len)
    {
      g_array_set_size (l->attempts_on, agent + 1);
      g_ptr_array_set_size (l->tasks_on, agent + 1);
    }
  guint32 *n = &g_array_index (l->attempts_on, guint32, agent);
  g_return_if_fail (delta > 0 || *n > 0);
  *n += delta;
  /* A replay adds and removes nearly every task it replays: the sets are
   * made once at its end, from the tasks left running (index_running). */
  if (!l->replaying)
    tasks_on_add (l, agent, id, delta);
}

/* After a replay: each agent's set of live attempts, from the running
 * tasks and their copies, as the transitions would have left them. */
static void
index_running (DatcLedger *l)
{
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init (&it, l->running);
  while (g_hash_table_iter_next (&it, &k, NULL))
    {
      guint64 id = GPOINTER_TO_SIZE (k);
      const TaskSlot *t = &l->tasks[id - 1];
      GArray *copies = copies_of (l, id, t);
      for (guint i = 0; i < (copies != NULL ? copies->len : 1); i++)
        {
          guint32 agent = copies != NULL ? g_array_index (copies, Copy, i).agent : t->agent;
          if (agent <= AGENT_INDEX_MAX)
            tasks_on_add (l, agent, id, +1);
        }
    }
}

static void
set_state (DatcLedger *l, TaskSlot *t, DatcTaskState state)
{
  guint64 id = (guint64) (t - l->tasks) + 1;
  gboolean was_running = t->state == DATC_TASK_RUNNING;
  if (t->state == DATC_TASK_QUEUED)
    datc_task_queue_count (l->queue, id, -1);
  if (t->orphan)
    {
      t->orphan = FALSE; /* it moved on: no longer waiting for its agent */
      l->orphans--;
    }
  (*count_for (l, t->state))--;
  if (t->state == DATC_TASK_RUNNING && state != DATC_TASK_RUNNING)
    {
      g_hash_table_remove (l->running, TASK_KEY (id));
      if (t->replicated)
        {
          /* Its copies ended with it (the winner's result, a cancel, the
           * last copy given back). */
          GArray *copies = g_hash_table_lookup (l->replicas, TASK_KEY (id));
          for (guint i = 0; i < copies->len; i++)
            attempts_add (l, g_array_index (copies, Copy, i).agent, id, -1);
          g_hash_table_remove (l->replicas, TASK_KEY (id));
          t->replicated = FALSE;
        }
      else
        attempts_add (l, t->agent, id, -1);
    }
  if (t->bound && state != DATC_TASK_QUEUED)
    {
      t->bound = FALSE; /* its proxy's binding is void: the task moved on */
      g_hash_table_remove (l->binders, TASK_KEY (id));
    }
  t->state = state;
  (*count_for (l, t->state))++;
  if (state == DATC_TASK_QUEUED)
    datc_task_queue_count (l->queue, id, +1);
  if (state == DATC_TASK_RUNNING && !was_running)
    attempts_add (l, t->agent, id, +1);
}

static gboolean
is_final (const TaskSlot *t)
{
  return t->state == DATC_TASK_DONE || t->state == DATC_TASK_FAILED
         || t->state == DATC_TASK_CANCELLED;
}

/* ---- results.jsonl ------------------------------------------------- */

static const char *
status_name (guint status)
{
  if (status == DATC_STATUS_LOST)
    return "lost";
  return datc_task_status_name ((DatcTaskStatus) status);
}

static const char *const end_class_names[DATC_END_N] = {
  [DATC_END_EXIT] = "exit",
  [DATC_END_SIGNAL] = "signal",
  [DATC_END_TIMEOUT] = "timeout",
  [DATC_END_WALLTIME] = "walltime",
  [DATC_END_OOM] = "oom",
  [DATC_END_LOST] = "lost",
  [DATC_END_SPAWN_FAILED] = "spawn_failed",
  [DATC_END_CANCELLED] = "cancelled",
  [DATC_END_REFUSED] = "refused",
};

const char *
datc_end_class_name (DatcEndClass end_class)
{
  if ((guint) end_class < DATC_END_N)
    return end_class_names[end_class];
  return "unknown";
}

/* `walltime`: the task's agent had passed its walltime end. */
static DatcEndClass
end_class_of (guint status, gint64 signal, const char *oom_evidence, gboolean walltime)
{
  switch (status)
    {
    case DATC_STATUS_EXITED:
      return DATC_END_EXIT;
    case DATC_STATUS_SIGNALED:
      return signal == SIGKILL && oom_evidence != NULL ? DATC_END_OOM : DATC_END_SIGNAL;
    case DATC_STATUS_TIMEOUT:
      return DATC_END_TIMEOUT;
    case DATC_STATUS_SPAWN_FAILED:
      return DATC_END_SPAWN_FAILED;
    case DATC_STATUS_CANCELLED:
      return DATC_END_CANCELLED;
    case DATC_STATUS_DRAINED:
      return DATC_END_WALLTIME;
    case DATC_STATUS_REFUSED:
      return DATC_END_REFUSED;
    case DATC_STATUS_LOST:
      return walltime ? DATC_END_WALLTIME : DATC_END_LOST;
    default:
      return DATC_END_N;
    }
}

DatcEndClass
datc_end_class_of_status_name (const char *status, gint64 signal)
{
  if (g_str_equal (status, "lost"))
    return DATC_END_LOST;
  for (guint s = 0; s <= DATC_STATUS_LAST; s++)
    if (g_str_equal (status, datc_task_status_name ((DatcTaskStatus) s)))
      return end_class_of (s, signal, NULL, FALSE);
  return DATC_END_N;
}

static void drop_copies_of_agents (DatcLedger *l, guint32 idx, const char *site, const char *proxy);
static void journal_requeue (DatcLedger *l, guint64 id, gboolean lost);
static void journal_agent_gone (DatcLedger *l, guint32 agent);
static void open_orphan_window (DatcLedger *l);
static gboolean compact_tick (DatcLedger *l, GError **error);
static gboolean compact_finish (DatcLedger *l, gboolean wait, GError **error);
static void compaction_free (Compaction *c);
static void compact_reap (DatcLedger *l, gboolean end);

static gboolean
write_results (DatcLedger *l, GError **error)
{
  return datc_results_file_write (l->results, error);
}

/* The line of a final result: what the record says, with the task's line,
 * its source's submission time and its agent's names. */
static void
write_result_line (DatcLedger *l, const DatcRecResult *r)
{
  if (l->results == NULL)
    return;
  guint32 source = 0;
  guint32 task_line = datc_bag_line (l->bag, r->id, &source);
  const SourceInfo *src = source < l->sources->len ? l->sources->pdata[source] : NULL;
  const AgentInfo *a = r->agent < l->agents->len ? l->agents->pdata[r->agent] : NULL;
  DatcResultLine line = {
    .id = r->id,
    .line = task_line,
    .attempt = r->attempt,
    .status = status_name (r->status),
    .end_class = datc_end_class_name ((DatcEndClass) r->end_class),
    .exit_code = r->exit_code,
    .signal = r->signal,
    .site = a ? a->site : "",
    .proxy = a ? a->proxy : "",
    .host = a ? a->host : "",
    .agent = a ? a->agent_id : "",
    .submitted = src ? src->submitted_us : 0,
    .started = r->started,
    .finished = r->finished,
    .output = a ? datc_agent_output_name (a->output) : "",
    .out_off = r->out_off,
    .out_len = r->out_len,
    .err_off = r->err_off,
    .err_len = r->err_len,
    .out_dropped = r->out_dropped,
    .err_dropped = r->err_dropped,
    .message = r->message,
    .oom_evidence = r->oom_evidence,
    .who = a ? a->who : NULL,
  };
  datc_results_file_add (l->results, &line);
}

/* ---- apply: the one place state changes ---------------------------- */

/* Frees a departed agent's entry; its index is reused by the next agent,
 * so a campaign that sees a million agents come and go (direct mode)
 * holds only those still connected. */
static void
agent_release (DatcLedger *l, AgentInfo *a)
{
  guint32 idx = a->idx;
  if (GPOINTER_TO_UINT (g_hash_table_lookup (l->agent_index, a->agent_id)) == idx + 1)
    g_hash_table_remove (l->agent_index, a->agent_id);
  if (a->awaited)
    l->awaited--;
  agent_info_free (a);
  l->agents->pdata[idx] = NULL;
  l->live_agents--;
  g_array_append_val (l->free_agents, idx);
}

static void
apply_agent (DatcLedger *l, guint32 idx, const char *agent_id, const char *site, const char *proxy,
             const char *host)
{
  if (idx >= l->agents->len)
    g_ptr_array_set_size (l->agents, idx + 1);
  else
    /* A reused index: the live master took the newest free one, so the
     * search ends at once. */
    for (guint i = l->free_agents->len; i-- > 0;)
      if (g_array_index (l->free_agents, guint32, i) == idx)
        {
          g_array_remove_index (l->free_agents, i);
          break;
        }
  if (l->agents->pdata[idx] != NULL)
    {
      AgentInfo *old = l->agents->pdata[idx];
      if (old->awaited)
        l->awaited--;
      if (GPOINTER_TO_UINT (g_hash_table_lookup (l->agent_index, old->agent_id)) == idx + 1)
        g_hash_table_remove (l->agent_index, old->agent_id);
      agent_info_free (old);
      l->live_agents--;
    }
  AgentInfo *a = g_new0 (AgentInfo, 1);
  a->agent_id = g_strdup (agent_id);
  a->site = g_strdup (site);
  a->proxy = g_strdup (proxy);
  a->host = g_strdup (host);
  a->who = datc_result_line_who (site, proxy, host, agent_id);
  a->output = datc_agent_output_new (l->dir, agent_id);
  a->idx = idx;
  l->agents->pdata[idx] = a;
  l->live_agents++;
  g_hash_table_replace (l->agent_index, a->agent_id, GUINT_TO_POINTER (idx + 1));
  g_hash_table_add (l->proxies_seen, g_strconcat (site, "\n", proxy, NULL));
}

/* The agent left or was lost (its tasks were handed back first): its
 * entry goes once what it wrote is committed. */
static void
apply_agent_gone (DatcLedger *l, guint32 idx)
{
  AgentInfo *a = idx < l->agents->len ? l->agents->pdata[idx] : NULL;
  if (a == NULL || a->gone)
    return;
  a->gone = TRUE;
  if (a->awaited)
    {
      a->awaited = FALSE;
      l->awaited--;
    }
  /* Its index will be reused: no copy may stay bound to it.  (A live
   * master handed its copies back first; this catches agents of an
   * earlier master that never came back.) */
  drop_copies_of_agents (l, idx, NULL, NULL);
  if (!a->out_dirty)
    agent_release (l, a);
}

/* Tasks still running on agents of an earlier master stay theirs until
 * `deadline_us`: a returning agent re-attaches them (datc_ledger_reattach),
 * and only then, or at the deadline, may anyone else run them. */
static void
apply_orphans (DatcLedger *l, gint64 deadline_us, const DatcTaskKey *keys, guint n)
{
  OrphanWindow *w = g_new0 (OrphanWindow, 1);
  w->deadline_us = deadline_us;
  w->keys = g_array_sized_new (FALSE, FALSE, sizeof (DatcTaskKey), n);
  for (guint i = 0; i < n; i++)
    {
      TaskSlot *t = slot (l, keys[i].id);
      if (t == NULL || t->state != DATC_TASK_RUNNING || t->attempt != keys[i].attempt || t->orphan)
        continue;
      t->orphan = TRUE;
      l->orphans++;
      g_array_append_val (w->keys, keys[i]);
    }
  g_ptr_array_add (l->windows, w);
}

/* The site an attempt went to, kept with the task: agent indices are
 * reused, and an agent of one site may only hold or finish what went to
 * its own site (datc_ledger_task_site).  Past G_MAXUINT16 names (agents
 * started by hand may call their site anything) a task's site is none,
 * which no agent matches. */
static guint16
site_id (DatcLedger *l, guint32 agent)
{
  AgentInfo *a = agent < l->agents->len ? l->agents->pdata[agent] : NULL;
  if (a == NULL || a->site == NULL)
    return 0;
  /* Kept with the agent: asked for every task handed to it. */
  if (a->site_id != 0)
    return (guint16) (a->site_id - 1);
  gpointer v = g_hash_table_lookup (l->site_ids, a->site);
  guint16 id = (guint16) GPOINTER_TO_UINT (v);
  if (v == NULL && l->site_names->len <= G_MAXUINT16)
    {
      id = (guint16) l->site_names->len;
      g_ptr_array_add (l->site_names, g_strdup (a->site));
      g_hash_table_insert (l->site_ids, l->site_names->pdata[id], GUINT_TO_POINTER (id));
    }
  a->site_id = (guint32) id + 1;
  return id;
}

static void
apply_dispatch (DatcLedger *l, guint32 agent, guint64 id, guint32 attempt, gint64 when_us)
{
  TaskSlot *t = slot (l, id);
  if (t == NULL || is_final (t))
    return;
  if (t->replicated)
    {
      /* A copy re-attached after a restart: the copies stay as they are,
       * and the task no longer waits for its agents. */
      if (t->orphan && copy_index (copies_of (l, id, t), agent, attempt) >= 0)
        {
          t->orphan = FALSE;
          l->orphans--;
        }
      return;
    }
  if (t->state != DATC_TASK_RUNNING || t->attempt != attempt)
    g_hash_table_insert (l->running, TASK_KEY (id), GUINT_TO_POINTER (ms32 (when_us)));
  if (t->state == DATC_TASK_RUNNING && t->agent != agent)
    {
      attempts_add (l, t->agent, id, -1);
      attempts_add (l, agent, id, +1);
    }
  t->attempt = attempt;
  t->agent = agent;
  t->site = site_id (l, agent);
  if (t->orphan)
    {
      t->orphan = FALSE; /* its agent is back (or it went to another) */
      l->orphans--;
    }
  if (t->state != DATC_TASK_RUNNING)
    set_state (l, t, DATC_TASK_RUNNING);
}

static void
requeue_slot (DatcLedger *l, guint64 id, TaskSlot *t)
{
  if (t->state != DATC_TASK_QUEUED)
    set_state (l, t, DATC_TASK_QUEUED);
  datc_task_queue_push (l->queue, id);
}

/* One more live copy of a running task, on another agent; the task's
 * attempt and agent become the copy's (the newest), its earlier copies
 * move to (or stay in) the side table. */
static void
apply_replicate (DatcLedger *l, guint32 agent, guint64 id, guint32 attempt, gint64 when_us)
{
  TaskSlot *t = slot (l, id);
  if (t == NULL || t->state != DATC_TASK_RUNNING || attempt <= t->attempt)
    return;
  GArray *copies = copies_of (l, id, t);
  if (copies == NULL)
    {
      gpointer since = g_hash_table_lookup (l->running, TASK_KEY (id));
      Copy first = { t->agent, t->attempt, GPOINTER_TO_UINT (since) };
      copies = g_array_sized_new (FALSE, FALSE, sizeof (Copy), 2);
      g_array_append_val (copies, first);
      g_hash_table_insert (l->replicas, TASK_KEY (id), copies);
      t->replicated = TRUE;
    }
  Copy c = { agent, attempt, ms32 (when_us) };
  g_array_append_val (copies, c);
  attempts_add (l, agent, id, +1);
  t->attempt = attempt;
  t->agent = agent;
  t->site = site_id (l, agent);
}

/* One copy of a replicated task ended without a result that counts; the
 * others run on.  The last one is never ended this way (it goes back to
 * the queue, or fails, like any task), but a journal that says so is
 * still applied sanely. */
static void
apply_copy_end (DatcLedger *l, guint64 id, guint32 attempt)
{
  TaskSlot *t = slot (l, id);
  if (t == NULL || t->state != DATC_TASK_RUNNING || !t->replicated)
    return;
  GArray *copies = copies_of (l, id, t);
  for (guint i = 0; i < copies->len; i++)
    if (g_array_index (copies, Copy, i).attempt == attempt)
      {
        attempts_add (l, g_array_index (copies, Copy, i).agent, id, -1);
        g_array_remove_index (copies, i);
        break;
      }
  if (copies->len == 0)
    requeue_slot (l, id, t);
}

/* Copies on agent `idx` end (their agent is gone), or, when `idx` is
 * G_MAXUINT32, the copies of tasks waiting for re-attach that are on
 * agents of (site, proxy) (that proxy ended).  A task left without a copy
 * goes back to the queue.  Scans only the replicated tasks, and for one
 * agent only when it still has a live attempt: a live master hands a
 * departing agent's tasks back first, so then there is nothing to drop.
 * Scanning every replicated task for each departing agent cost 0.6 s of
 * the master's loop when 1,000 agents left at the end of a campaign with
 * tens of thousands of copies (benchmarks/README.md, "The front's pages,
 * and a stall at a campaign's end"). */
static void
drop_copies_of_agents (DatcLedger *l, guint32 idx, const char *site, const char *proxy)
{
  if (g_hash_table_size (l->replicas) == 0)
    return;
  if (idx != G_MAXUINT32
      && (idx >= l->attempts_on->len || g_array_index (l->attempts_on, guint32, idx) == 0))
    return;
  g_autoptr (GArray) emptied = g_array_new (FALSE, FALSE, sizeof (guint64));
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init (&it, l->replicas);
  while (g_hash_table_iter_next (&it, &k, &v))
    {
      GArray *copies = v;
      if (idx == G_MAXUINT32 && !slot (l, GPOINTER_TO_SIZE (k))->orphan)
        continue;
      for (guint i = copies->len; i-- > 0;)
        {
          guint32 agent = g_array_index (copies, Copy, i).agent;
          AgentInfo *a = agent < l->agents->len ? l->agents->pdata[agent] : NULL;
          gboolean drop = idx != G_MAXUINT32 ? agent == idx
                                             : a != NULL && g_str_equal (a->site, site)
                                                   && g_str_equal (a->proxy, proxy);
          if (drop)
            {
              attempts_add (l, agent, GPOINTER_TO_SIZE (k), -1);
              g_array_remove_index (copies, i);
            }
        }
      if (copies->len == 0)
        {
          guint64 id = GPOINTER_TO_SIZE (k);
          g_array_append_val (emptied, id);
        }
    }
  for (guint i = 0; i < emptied->len; i++)
    {
      guint64 id = g_array_index (emptied, guint64, i);
      requeue_slot (l, id, slot (l, id));
    }
}

static void
apply_requeue (DatcLedger *l, guint64 id, gboolean lost)
{
  TaskSlot *t = slot (l, id);
  if (t == NULL || is_final (t))
    return;
  if (lost && t->crashes < G_MAXUINT8)
    t->crashes++;
  requeue_slot (l, id, t);
}

static void
apply_result (DatcLedger *l, const DatcRecResult *r)
{
  TaskSlot *t = slot (l, r->id);
  if (t == NULL || is_final (t))
    return;
  if (r->status == DATC_STATUS_EXITED)
    datc_runtimes_note (l->runtimes, r->started, r->finished);
  if (r->final)
    {
      gboolean ok = r->status == DATC_STATUS_EXITED && r->exit_code == 0;
      t->attempt = r->attempt;
      set_state (l, t, ok ? DATC_TASK_DONE : DATC_TASK_FAILED);
      write_result_line (l, r);
    }
  else
    {
      if (t->failures < G_MAXUINT8)
        t->failures++;
      requeue_slot (l, r->id, t);
    }
}

/* A proxy ended: its agents are dead, so tasks an earlier master left on
 * them need not wait for the re-attach window.  Part of applying the
 * PROXY record (no record of its own), so replay does the same. */
static void
release_proxy_orphans (DatcLedger *l, const char *site, const char *proxy)
{
  if (l->orphans == 0)
    return;
  drop_copies_of_agents (l, G_MAXUINT32, site, proxy);
  for (guint w = 0; w < l->windows->len; w++)
    {
      GArray *keys = ((OrphanWindow *) l->windows->pdata[w])->keys;
      for (guint i = 0; i < keys->len; i++)
        {
          DatcTaskKey *k = &g_array_index (keys, DatcTaskKey, i);
          TaskSlot *t = slot (l, k->id);
          if (t == NULL || !t->orphan || t->attempt != k->attempt || t->replicated)
            continue;
          AgentInfo *a = t->agent < l->agents->len ? l->agents->pdata[t->agent] : NULL;
          if (a != NULL && g_str_equal (a->site, site) && g_str_equal (a->proxy, proxy))
            {
              apply_requeue (l, k->id, FALSE);
              if (a->awaited)
                {
                  a->awaited = FALSE;
                  l->awaited--;
                }
            }
        }
    }
}

static void
apply_proxy (DatcLedger *l, const char *site, const char *proxy, const char *job_id,
             const char *event)
{
  g_autofree gchar *key = g_strdup_printf ("%s\t%s", site, proxy);
  /* Only an end closes a proxy: one cancelled but not seen gone may still
   * be on its site, and a restarted master must find and end it. */
  if (g_str_equal (event, "submitted"))
    g_hash_table_replace (l->proxies, g_steal_pointer (&key), g_strdup (job_id));
  else if (g_str_equal (event, "submitting"))
    /* job_id: how many proxies (1, or an array's k) */
    g_hash_table_replace (l->submits, g_steal_pointer (&key), g_strdup (job_id));
  else if (g_str_equal (event, "settled"))
    g_hash_table_remove (l->submits, key);
  else if (g_str_equal (event, "ended"))
    {
      g_hash_table_remove (l->proxies, key);
      release_proxy_orphans (l, site, proxy);
      /* Asked only of proxies still alive: bounded by them, not by every
       * proxy the campaign ever had (one per task in direct mode). */
      g_autofree gchar *seen = g_strconcat (site, "\n", proxy, NULL);
      g_hash_table_remove (l->proxies_seen, seen);
    }
}

static void
grow_tasks (DatcLedger *l, guint64 n)
{
  if (n <= l->n_tasks)
    return;
  l->tasks = datc_huge_realloc (l->tasks, l->n_tasks * sizeof (TaskSlot), n * sizeof (TaskSlot));
  memset (l->tasks + l->n_tasks, 0, (n - l->n_tasks) * sizeof (TaskSlot));
  datc_huge_settle (l->tasks, n * sizeof (TaskSlot), n * sizeof (TaskSlot));
  l->counts.total += n - l->n_tasks;
  l->counts.queued += n - l->n_tasks;
  for (guint64 id = l->n_tasks + 1; id <= n; id++)
    datc_task_queue_count (l->queue, id, +1);
  l->n_tasks = n;
}

static void
cancel_one (DatcLedger *l, guint64 id, gint64 when)
{
  TaskSlot *t = slot (l, id);
  if (t == NULL || is_final (t))
    return;
  DatcRecResult rr = {
    .id = id,
    .attempt = t->attempt,
    .agent = t->state == DATC_TASK_RUNNING ? t->agent : G_MAXUINT32,
    .final = TRUE,
    .status = DATC_STATUS_CANCELLED,
    .exit_code = -1,
    .finished = when,
    .message = "cancelled by the user",
    .end_class = DATC_END_CANCELLED,
  };
  set_state (l, t, DATC_TASK_CANCELLED);
  write_result_line (l, &rr);
}

static void
apply_cancel (DatcLedger *l, gint64 when, const guint64 *ids, guint n)
{
  if (ids == NULL)
    for (guint64 id = 1; id <= l->n_tasks; id++)
      cancel_one (l, id, when);
  else
    for (guint i = 0; i < n; i++)
      cancel_one (l, ids[i], when);
}

static void
apply_retry (DatcLedger *l)
{
  for (guint64 id = 1; id <= l->n_tasks; id++)
    if (l->tasks[id - 1].state == DATC_TASK_CANCELLED)
      requeue_slot (l, id, &l->tasks[id - 1]);
  l->filter_results = TRUE;
}

/* ---- replay -------------------------------------------------------- */

/* One per record type: what the record means beyond its shape (checked
 * by the codec), then its apply_*. */
typedef gboolean (*Replayer) (DatcLedger *l, const DatcRecord *rec, GError **error);

static gboolean
replay_start (DatcLedger *l, const DatcRecord *rec, GError **error)
{
  return TRUE;
}

static gboolean
replay_agent (DatcLedger *l, const DatcRecord *rec, GError **error)
{
  const DatcRecAgent *r = &rec->u.agent;
  apply_agent (l, r->idx, r->agent_id, r->site, r->proxy, r->host);
  return TRUE;
}

static gboolean
replay_dispatch (DatcLedger *l, const DatcRecord *rec, GError **error)
{
  const DatcRecDispatch *r = &rec->u.dispatch;
  for (guint i = 0; i < r->keys.n; i++)
    apply_dispatch (l, r->agent, r->keys.v[i].id, r->keys.v[i].attempt, r->time_us);
  return TRUE;
}

static gboolean
replay_result (DatcLedger *l, const DatcRecord *rec, GError **error)
{
  DatcRecResult rr = rec->u.result;
  if (rr.id == 0 || rr.id > l->n_tasks)
    {
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_MISMATCH,
                   "result for task %" G_GUINT64_FORMAT " but the bag has %" G_GUINT64_FORMAT,
                   rr.id, l->n_tasks);
      return FALSE;
    }
  /* An older journal's result has no class: it follows from the status. */
  if (rr.end_class >= DATC_END_N)
    rr.end_class = end_class_of (rr.status, rr.signal, rr.oom_evidence, FALSE);
  apply_result (l, &rr);
  return TRUE;
}

static gboolean
replay_requeue (DatcLedger *l, const DatcRecord *rec, GError **error)
{
  apply_requeue (l, rec->u.requeue.id, rec->u.requeue.lost);
  return TRUE;
}

static void
add_source (DatcLedger *l, const char *path, const char *sha, guint64 first, guint64 count,
            gint64 when)
{
  SourceInfo *s = g_new0 (SourceInfo, 1);
  s->path = g_strdup (path);
  s->sha256 = g_strdup (sha);
  s->first_id = first;
  s->count = count;
  s->submitted_us = when;
  g_ptr_array_add (l->sources, s);
}

static gboolean
replay_source (DatcLedger *l, const DatcRecord *rec, GError **error)
{
  const DatcRecSource *r = &rec->u.source;
  if (r->index != l->sources->len)
    {
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_CORRUPT,
                   "source record %u where source %u was due", r->index, l->sources->len);
      return FALSE;
    }
  if (r->data.data != NULL)
    {
      /* Tasks submitted to the campaign: they become part of the bag
       * again, with the same ids. */
      if (r->first_id != datc_bag_count (l->bag) + 1)
        {
          g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_CORRUPT,
                       "submitted tasks from %s should start at id %" G_GUINT64_FORMAT
                       ", not %" G_GUINT64_FORMAT,
                       r->path, datc_bag_count (l->bag) + 1, r->first_id);
          return FALSE;
        }
      if (!datc_bag_load_data (l->bag, r->path, (const char *) r->data.data, r->data.len,
                               (DatcTaskFileFormat) r->format, error))
        return FALSE;
      if (datc_bag_count (l->bag) != r->first_id + r->count - 1)
        {
          g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_CORRUPT,
                       "submitted tasks from %s: %" G_GUINT64_FORMAT " recorded, %" G_GUINT64_FORMAT
                       " read back",
                       r->path, r->count, datc_bag_count (l->bag) - r->first_id + 1);
          return FALSE;
        }
      grow_tasks (l, datc_bag_count (l->bag));
    }
  add_source (l, r->path, r->sha256, r->first_id, r->count, r->submitted_us);
  if (r->data.data != NULL)
    {
      GByteArray *b = g_byte_array_new ();
      datc_record_encode (rec, b);
      ((SourceInfo *) l->sources->pdata[l->sources->len - 1])->record
          = g_byte_array_free_to_bytes (b);
    }
  return TRUE;
}

static gboolean
replay_proxy (DatcLedger *l, const DatcRecord *rec, GError **error)
{
  const DatcRecProxy *r = &rec->u.proxy;
  apply_proxy (l, r->site, r->proxy, r->job_id, r->event);
  return TRUE;
}

static gboolean
replay_cancel (DatcLedger *l, const DatcRecord *rec, GError **error)
{
  const DatcRecCancel *r = &rec->u.cancel;
  if (r->ids.all)
    apply_cancel (l, r->time_us, NULL, 0);
  else
    apply_cancel (l, r->time_us, r->ids.v, r->ids.n);
  return TRUE;
}

static gboolean
replay_retry (DatcLedger *l, const DatcRecord *rec, GError **error)
{
  apply_retry (l);
  return TRUE;
}

static gboolean
replay_orphans (DatcLedger *l, const DatcRecord *rec, GError **error)
{
  const DatcRecOrphans *r = &rec->u.orphans;
  apply_orphans (l, r->deadline_us, r->keys.v, r->keys.n);
  return TRUE;
}

static gboolean
replay_agent_gone (DatcLedger *l, const DatcRecord *rec, GError **error)
{
  apply_agent_gone (l, rec->u.agent_gone.idx);
  return TRUE;
}

static gboolean
replay_replicate (DatcLedger *l, const DatcRecord *rec, GError **error)
{
  const DatcRecReplicate *r = &rec->u.replicate;
  apply_replicate (l, r->agent, r->id, r->attempt, r->time_us);
  return TRUE;
}

static gboolean
replay_copy_end (DatcLedger *l, const DatcRecord *rec, GError **error)
{
  apply_copy_end (l, rec->u.copy_end.id, rec->u.copy_end.attempt);
  return TRUE;
}

/* ---- replay of a checkpoint (written by compact_snapshot below) ---- */

static gboolean
corrupt (GError **error, const char *what)
{
  g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_CORRUPT, "checkpoint: %s", what);
  return FALSE;
}

static gboolean
replay_checkpoint (DatcLedger *l, const DatcRecord *rec, GError **error)
{
  const DatcRecCheckpoint *r = &rec->u.checkpoint;
  if (r->n_tasks != l->n_tasks)
    {
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_CORRUPT,
                   "checkpoint of %" G_GUINT64_FORMAT
                   " tasks, but its sources hold %" G_GUINT64_FORMAT,
                   r->n_tasks, l->n_tasks);
      return FALSE;
    }
  if (l->agents->len > 0 || l->site_names->len > 1)
    return corrupt (error, "not at the start of the journal");
  if (r->runtimes.data == NULL
      || !datc_runtimes_load (l->runtimes, r->runtimes.data, r->runtimes.len))
    return corrupt (error, "run times of the wrong length");
  /* Names ended by NUL: a last one without is refused. */
  const DatcRecBytes *lists[] = { &r->sites, &r->seen };
  for (guint k = 0; k < G_N_ELEMENTS (lists); k++)
    {
      const guint8 *p = lists[k]->data;
      gsize len = lists[k]->len;
      if (p == NULL || len == 0)
        continue;
      if (p[len - 1] != '\0')
        return corrupt (error, k == 0 ? "a site name without its end" : "a proxy without its end");
      for (gsize at = 0; at < len; at += strlen ((const char *) p + at) + 1)
        {
          const char *name = (const char *) p + at;
          if (k == 1)
            g_hash_table_add (l->proxies_seen, g_strdup (name));
          else if (l->site_names->len <= G_MAXUINT16)
            {
              guint id = l->site_names->len;
              g_ptr_array_add (l->site_names, g_strdup (name));
              g_hash_table_insert (l->site_ids, l->site_names->pdata[id], GUINT_TO_POINTER (id));
            }
        }
    }
  /* The agent table keeps its indices: the AGENT records that follow take
   * theirs out of the free list again. */
  g_ptr_array_set_size (l->agents, r->agents);
  for (guint i = r->agents; i-- > 0;)
    g_array_append_val (l->free_agents, i);
  l->filter_results = r->filter;
  l->jinfo.compacted_from = r->from_bytes;
  l->jinfo.last_compaction_us = r->time_us;
  return TRUE;
}

static guint32
le32_at (const guint8 *p)
{
  guint32 v;
  memcpy (&v, p, sizeof v);
  return GUINT32_FROM_LE (v);
}

static gboolean
replay_tasks (DatcLedger *l, const DatcRecord *rec, GError **error)
{
  const DatcRecTasks *r = &rec->u.tasks;
  gsize n = r->entries.len / DATC_REC_TASK_ENTRY;
  if (r->entries.data == NULL || r->entries.len % DATC_REC_TASK_ENTRY != 0)
    return corrupt (error, "task entries of the wrong length");
  if (r->first_id == 0 || r->first_id > l->n_tasks || n > l->n_tasks - r->first_id + 1)
    return corrupt (error, "task entries beyond the bag");
  for (gsize i = 0; i < n; i++)
    {
      const guint8 *e = r->entries.data + i * DATC_REC_TASK_ENTRY;
      guint64 id = r->first_id + i;
      TaskSlot *t = &l->tasks[id - 1];
      guint16 site;
      if (e[0] > DATC_TASK_CANCELLED)
        return corrupt (error, "a task in no known state");
      if (t->state != DATC_TASK_QUEUED || t->attempt != 0)
        return corrupt (error, "a task given a state twice");
      memcpy (&site, e + 4, sizeof site);
      site = GUINT16_FROM_LE (site);
      t->crashes = e[1];
      t->failures = e[2];
      t->site = site < l->site_names->len ? site : 0;
      t->attempt = le32_at (e + 8);
      if (e[0] == DATC_TASK_RUNNING)
        {
          t->agent = le32_at (e + 12);
          set_state (l, t, DATC_TASK_RUNNING);
          g_hash_table_insert (l->running, TASK_KEY (id), GUINT_TO_POINTER (le32_at (e + 16)));
        }
      else if (e[0] != DATC_TASK_QUEUED)
        set_state (l, t, (DatcTaskState) e[0]);
    }
  return TRUE;
}

static gboolean
replay_lines (DatcLedger *l, const DatcRecord *rec, GError **error)
{
  const DatcRecLines *r = &rec->u.lines;
  if (r->packed.data == NULL || r->packed.len == 0)
    return corrupt (error, "results lines missing");
  g_autoptr (GString) lines = g_string_new (NULL);
  if (!datc_result_unpack (r->packed.data, r->packed.len, lines, error))
    return FALSE;
  if (l->results == NULL)
    return TRUE;
  datc_results_file_add_lines (l->results, (const guint8 *) lines->str, lines->len);
  return TRUE;
}

static const Replayer replayers[] = {
  [DATC_REC_START] = replay_start,           [DATC_REC_AGENT] = replay_agent,
  [DATC_REC_DISPATCH] = replay_dispatch,     [DATC_REC_RESULT] = replay_result,
  [DATC_REC_REQUEUE] = replay_requeue,       [DATC_REC_SOURCE] = replay_source,
  [DATC_REC_PROXY] = replay_proxy,           [DATC_REC_CANCEL] = replay_cancel,
  [DATC_REC_RETRY] = replay_retry,           [DATC_REC_ORPHANS] = replay_orphans,
  [DATC_REC_AGENT_GONE] = replay_agent_gone, [DATC_REC_REPLICATE] = replay_replicate,
  [DATC_REC_COPY_END] = replay_copy_end,     [DATC_REC_CHECKPOINT] = replay_checkpoint,
  [DATC_REC_TASKS] = replay_tasks,           [DATC_REC_LINES] = replay_lines,
};

static gboolean
replay_record (const guint8 *payload, gsize len, gpointer user_data, GError **error)
{
  DatcLedger *l = user_data;
  g_auto (DatcRecord) rec = { 0 };
  g_autoptr (GError) local = NULL;

  if (!datc_record_decode (payload, len, &rec, &local))
    {
      g_set_error_literal (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_CORRUPT, local->message);
      return FALSE;
    }
  /* Every type the codec knows has its replayer. */
  g_assert ((guint) rec.type < G_N_ELEMENTS (replayers) && replayers[rec.type] != NULL);
  if (l->replayed_bytes == 0)
    l->replayed_bytes = DATC_JOURNAL_MAGIC_BYTES;
  l->replayed_bytes += DATC_JOURNAL_FRAME_BYTES + len;
  if (l->options.load != NULL && (++l->replayed_records & 4095) == 0)
    __atomic_store_n (&l->options.load->replayed, l->replayed_bytes, __ATOMIC_RELAXED);
  /* The checkpoint's size, as far as its TASKS and LINES go (what
   * follows them in it is a few records). */
  if (rec.type == DATC_REC_TASKS || rec.type == DATC_REC_LINES)
    l->jinfo.checkpoint_bytes = l->replayed_bytes;
  return replayers[rec.type](l, &rec, error);
}

/* ---- open / free --------------------------------------------------- */

static void
journal_source (DatcLedger *l, guint32 idx, const char *path, const char *sha, guint64 first,
                guint64 count, gint64 when, DatcTaskFileFormat format, const char *data, gsize len)
{
  DatcRecord rec = { .type = DATC_REC_SOURCE,
                     .u.source = {
                         .index = idx,
                         .path = path,
                         .sha256 = sha,
                         .first_id = first,
                         .count = count,
                         .submitted_us = when,
                         .format = (guint32) format,
                         .data = { (const guint8 *) data, len },
                     } };
  journal_record (l, &rec);
  add_source (l, path, sha, first, count, when);
  if (data != NULL)
    {
      GByteArray *b = g_byte_array_new ();
      datc_record_encode (&rec, b);
      ((SourceInfo *) l->sources->pdata[l->sources->len - 1])->record
          = g_byte_array_free_to_bytes (b);
    }
}

/* After cancelled tasks were retried, results.jsonl (rebuilt in journal
 * order) holds "cancelled" lines that no longer say how those tasks ended.
 * Keep one line per final task: the cancelled one only for tasks that are
 * cancelled now, the other one otherwise. */
static gboolean
keep_result_line (guint64 id, gboolean cancelled, gpointer user_data)
{
  const TaskSlot *t = &((DatcLedger *) user_data)->tasks[id - 1];
  return is_final (t) && cancelled == (t->state == DATC_TASK_CANCELLED);
}

DatcLedger *
datc_ledger_open (const char *dir, DatcBag *bag, const char *task_file,
                  const char *task_file_sha256, const DatcLedgerOptions *options, GError **error)
{
  g_autoptr (DatcLedger) l = g_new0 (DatcLedger, 1);
  g_autofree gchar *journal_path = g_build_filename (dir, "journal", NULL);
  g_autofree gchar *results_path = g_build_filename (dir, "results.jsonl", NULL);
  g_autofree gchar *results_tmp = g_build_filename (dir, "results.jsonl.tmp", NULL);
  g_autofree gchar *outputs = g_build_filename (dir, "outputs", NULL);
  DatcJournalRecovery rec = { 0 };

  l->dir = g_strdup (dir);
  l->bag = bag;
  l->options = *options;
  if (l->options.crash_limit == 0)
    l->options.crash_limit = 5;
  if (l->options.reattach_window_ms == 0)
    l->options.reattach_window_ms = DATC_LEDGER_REATTACH_WINDOW_MS;
  l->n_tasks = datc_bag_count (bag);
  /* Huge pages (hugemem.h): a compaction's fork copies its page tables.
   * Every slot is written in the campaign's course: all of them now. */
  l->tasks = datc_huge_alloc (l->n_tasks * sizeof (TaskSlot));
  datc_huge_settle (l->tasks, l->n_tasks * sizeof (TaskSlot), l->n_tasks * sizeof (TaskSlot));
  l->counts.total = l->n_tasks;
  l->counts.queued = l->n_tasks;
  l->queue = datc_task_queue_new (is_dispatchable, l);
  for (guint64 id = 1; id <= l->n_tasks; id++)
    datc_task_queue_count (l->queue, id, +1);
  l->runtimes = datc_runtimes_new ();
  l->running = g_hash_table_new (g_direct_hash, g_direct_equal);
  l->replicas
      = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, (GDestroyNotify) g_array_unref);
  l->agents = g_ptr_array_new ();
  l->attempts_on = g_array_new (FALSE, TRUE, sizeof (guint32));
  l->tasks_on = g_ptr_array_new_with_free_func (tasks_on_free);
  l->free_agents = g_array_new (FALSE, FALSE, sizeof (guint32));
  l->site_names = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (l->site_names, NULL);
  l->site_ids = g_hash_table_new (g_str_hash, g_str_equal);
  l->windows = g_ptr_array_new_with_free_func (orphan_window_free);
  l->agent_index = g_hash_table_new (g_str_hash, g_str_equal);
  l->proxies_seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  l->bindings = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  l->binders = g_hash_table_new (g_direct_hash, g_direct_equal);
  l->sources = g_ptr_array_new_with_free_func (source_info_free);
  l->proxies = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  l->submits = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  l->pick = g_array_new (FALSE, FALSE, sizeof (guint32));
  l->deferred = g_array_new (FALSE, FALSE, sizeof (guint32));
  l->dirty_outputs = g_array_new (FALSE, FALSE, sizeof (guint32));
  l->exiting = g_array_new (FALSE, FALSE, sizeof (pid_t));

  if (l->options.read_only)
    {
      l->replaying = TRUE;
      gboolean ok = datc_journal_scan (journal_path, replay_record, l, NULL, error);
      l->replaying = FALSE;
      if (!ok)
        return NULL;
      index_running (l);
      for (guint64 id = 1; id <= l->n_tasks; id++)
        if (l->tasks[id - 1].state == DATC_TASK_RUNNING)
          set_state (l, &l->tasks[id - 1], DATC_TASK_QUEUED);
      l->committed = l->counts;
      return g_steal_pointer (&l);
    }

  if (g_mkdir_with_parents (outputs, 0700) != 0)
    {
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s: %s", outputs,
                   g_strerror (errno));
      return NULL;
    }
  l->results = datc_results_file_rebuild (results_path, results_tmp, error);
  if (l->results == NULL)
    return NULL;

  struct stat jst;
  if (l->options.load != NULL && stat (journal_path, &jst) == 0)
    __atomic_store_n (&l->options.load->journal_bytes, (guint64) jst.st_size, __ATOMIC_RELAXED);
  l->replaying = TRUE;
  datc_results_file_begin_replay (l->results);
  l->journal = datc_journal_open (journal_path, replay_record, l, &rec, error);
  datc_results_file_end_replay (l->results);
  l->replaying = FALSE;
  if (l->options.load != NULL)
    __atomic_store_n (&l->options.load->replayed, l->replayed_bytes, __ATOMIC_RELAXED);
  if (l->journal == NULL)
    {
      g_prefix_error (error, "%s: ", journal_path);
      unlink (results_tmp);
      return NULL;
    }
  index_running (l);
  if (rec.torn_bytes > 0)
    g_warning ("%s: ignored a torn tail of %" G_GUINT64_FORMAT " bytes after %" G_GUINT64_FORMAT
               " records",
               journal_path, rec.torn_bytes, rec.records);

  if (l->sources->len == 0)
    {
      if (l->options.read_only)
        {
          g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_CORRUPT,
                       "%s: the journal records no task file yet", journal_path);
          return NULL;
        }
      journal_source (l, 0, task_file, task_file_sha256, 1, datc_bag_count (bag),
                      g_get_real_time (), DATC_TASKFILE_AUTO, NULL, 0);
    }
  else
    {
      SourceInfo *s = l->sources->pdata[0];
      if (g_strcmp0 (s->sha256, task_file_sha256) != 0)
        {
          g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_MISMATCH,
                       "%s belongs to task file %s (sha256 %.12s…), not to %s (sha256 %.12s…)", dir,
                       s->path, s->sha256, task_file, task_file_sha256);
          unlink (results_tmp);
          return NULL;
        }
    }

  open_orphan_window (l);
  datc_task_queue_rewind (l->queue);

  /* Start record: marks each master incarnation in the journal. */
  DatcRecord start = { .type = DATC_REC_START, .u.start = { g_random_int (), g_get_real_time () } };
  journal_record (l, &start);

  if (l->options.retry_cancelled && l->counts.cancelled > 0)
    {
      DatcRecord retry = { .type = DATC_REC_RETRY, .u.retry = { g_get_real_time () } };
      journal_record (l, &retry);
      apply_retry (l);
    }

  if (!write_results (l, error))
    return NULL;
  if (l->filter_results
      && !datc_results_file_filter (l->results, l->n_tasks, keep_result_line, l, error))
    return NULL;
  if (!datc_results_file_finish (l->results, results_path, error))
    return NULL;
  if (!datc_journal_commit (l->journal, error))
    return NULL;
  l->committed = l->counts;
  /* A resume is a good moment to compact: nothing runs yet.  The child
   * writes the checkpoint while the master starts serving (at 10M tasks
   * that is 7 s of packing results); later commits put it in place, or
   * datc_ledger_finish_compaction at the end. */
  if (!compact_tick (l, error))
    return NULL;
  return g_steal_pointer (&l);
}

#define ORPHANS_PER_RECORD 65536u /* ~1 MiB: far below DATC_JOURNAL_RECORD_MAX */

static void
journal_orphans (DatcLedger *l, gint64 deadline_us, const DatcTaskKey *keys, guint n)
{
  DatcRecord rec = { .type = DATC_REC_ORPHANS,
                     .u.orphans = { .deadline_us = deadline_us, .keys = { keys, n } } };
  journal_record (l, &rec);
}

/* Tasks that were running when the last master stopped stay on their
 * agents for the re-attach window, instead of going to whichever agent
 * asks first while their own still runs them.  A task already waiting
 * from an earlier crash keeps its deadline (a crash loop cannot hold a
 * task for ever); the others get a new one.  Every agent the last master
 * knew is awaited: until they are back (or the window ends), a task the
 * journal shows queued may be one whose dispatch record the crash took,
 * and the dispatcher holds fresh work back for a moment
 * (datc_ledger_awaited). */
static void
open_orphan_window (DatcLedger *l)
{
  g_autoptr (GArray) keys = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  for (guint64 id = 1; id <= l->n_tasks; id++)
    {
      TaskSlot *t = &l->tasks[id - 1];
      if (t->state == DATC_TASK_RUNNING && !t->orphan)
        {
          DatcTaskKey k = { id, t->attempt };
          g_array_append_val (keys, k);
        }
    }
  for (guint i = 0; i < l->agents->len; i++)
    {
      AgentInfo *a = l->agents->pdata[i];
      if (a != NULL && !a->awaited)
        {
          a->awaited = TRUE;
          l->awaited++;
        }
    }
  if (keys->len == 0 && l->awaited == 0)
    return;
  gint64 deadline = g_get_real_time () + (gint64) l->options.reattach_window_ms * 1000;
  guint done = 0;
  do
    {
      guint n = MIN (keys->len - done, ORPHANS_PER_RECORD);
      const DatcTaskKey *k = &g_array_index (keys, DatcTaskKey, done);
      journal_orphans (l, deadline, k, n);
      apply_orphans (l, deadline, k, n);
      done += n;
    }
  while (done < keys->len);
}

guint64
datc_ledger_expire_orphans (DatcLedger *l, gint64 now_real)
{
  if (l->windows->len == 0)
    return 0;
  guint64 requeued = 0;
  gboolean expired = FALSE;
  for (guint i = 0; i < l->windows->len;)
    {
      OrphanWindow *w = l->windows->pdata[i];
      if (w->deadline_us > now_real)
        {
          i++;
          continue;
        }
      for (guint j = 0; j < w->keys->len; j++)
        {
          DatcTaskKey *k = &g_array_index (w->keys, DatcTaskKey, j);
          TaskSlot *t = slot (l, k->id);
          if (t == NULL || !t->orphan || t->attempt != k->attempt)
            continue;
          journal_requeue (l, k->id, FALSE);
          apply_requeue (l, k->id, FALSE);
          requeued++;
        }
      g_ptr_array_remove_index (l->windows, i);
      expired = TRUE;
    }
  if (!expired || l->awaited == 0)
    return requeued;
  /* Agents not back by the deadline are gone, unless a later window still
   * waits for one of their tasks: the next master does not await them. */
  g_autoptr (GHashTable) waiting = g_hash_table_new (NULL, NULL);
  for (guint i = 0; i < l->windows->len; i++)
    {
      OrphanWindow *w = l->windows->pdata[i];
      for (guint j = 0; j < w->keys->len; j++)
        {
          guint64 id = g_array_index (w->keys, DatcTaskKey, j).id;
          TaskSlot *t = slot (l, id);
          if (t != NULL && t->orphan)
            g_hash_table_add (waiting, GUINT_TO_POINTER (t->agent + 1));
          GArray *copies = t != NULL && t->orphan ? copies_of (l, id, t) : NULL;
          for (guint c = 0; copies != NULL && c < copies->len; c++)
            g_hash_table_add (waiting,
                              GUINT_TO_POINTER (g_array_index (copies, Copy, c).agent + 1));
        }
    }
  for (guint i = 0; i < l->agents->len; i++)
    {
      AgentInfo *a = l->agents->pdata[i];
      if (a != NULL && a->awaited && !g_hash_table_contains (waiting, GUINT_TO_POINTER (i + 1)))
        journal_agent_gone (l, i);
    }
  return requeued;
}

guint64
datc_ledger_orphans (DatcLedger *l)
{
  return l->orphans;
}

guint
datc_ledger_awaited (DatcLedger *l)
{
  return l->awaited;
}

guint
datc_ledger_live_agents (DatcLedger *l)
{
  return l->live_agents;
}

gboolean
datc_ledger_submit (DatcLedger *l, const char *name, const char *data, gsize len,
                    DatcTaskFileFormat format, guint64 *first, guint64 *count, GError **error)
{
  guint64 before = datc_bag_count (l->bag);
  if (!datc_bag_load_data (l->bag, name, data, len, format, error))
    return FALSE;
  guint64 after = datc_bag_count (l->bag);
  /* On the loop's thread: SHA-NI where there is one (10 ms for 44 MB). */
  gchar sha[DATC_SHA256_HEX_LEN + 1];
  datc_sha256_hex_of (data, len, sha);
  journal_source (l, l->sources->len, name, sha, before + 1, after - before, g_get_real_time (),
                  format, data, len);
  grow_tasks (l, after);
  *first = before + 1;
  *count = after - before;
  return TRUE;
}

guint64
datc_ledger_cancel (DatcLedger *l, const guint64 *ids, guint n, GArray *running)
{
  gint64 when = g_get_real_time ();
  guint64 cancelled = 0;
  g_autoptr (GArray) open_ids = g_array_new (FALSE, FALSE, sizeof (guint64));

  for (guint64 i = 0; ids != NULL ? i < n : i < l->n_tasks; i++)
    {
      guint64 id = ids != NULL ? ids[i] : i + 1;
      TaskSlot *t = slot (l, id);
      if (t == NULL || is_final (t))
        continue;
      GArray *copies = copies_of (l, id, t);
      for (guint c = 0; copies != NULL && running != NULL && c < copies->len; c++)
        {
          const Copy *cp = &g_array_index (copies, Copy, c);
          DatcLedgerRunning r = { cp->agent, cp->attempt, id };
          g_array_append_val (running, r);
        }
      if (t->state == DATC_TASK_RUNNING && copies == NULL && running != NULL)
        {
          DatcLedgerRunning r = { t->agent, t->attempt, id };
          g_array_append_val (running, r);
        }
      g_array_append_val (open_ids, id);
      cancelled++;
    }
  if (cancelled == 0)
    return 0;

  DatcRecord rec = { .type = DATC_REC_CANCEL,
                     .u.cancel = {
                         .time_us = when,
                         .ids = { (const guint64 *) open_ids->data, open_ids->len, ids == NULL },
                     } };
  journal_record (l, &rec);
  if (ids == NULL)
    apply_cancel (l, when, NULL, 0);
  else
    apply_cancel (l, when, (const guint64 *) open_ids->data, open_ids->len);
  return cancelled;
}

void
datc_ledger_free (DatcLedger *l)
{
  if (l == NULL)
    return;
  compaction_free (l->compaction);
  compact_reap (l, TRUE);
  g_array_unref (l->exiting);
  datc_results_file_free (l->results);
  datc_journal_free (l->journal);
  for (guint i = 0; i < l->agents->len; i++)
    if (l->agents->pdata[i] != NULL)
      agent_info_free (l->agents->pdata[i]);
  g_ptr_array_unref (l->agents);
  g_array_unref (l->attempts_on);
  g_ptr_array_unref (l->tasks_on);
  g_array_unref (l->free_agents);
  g_ptr_array_unref (l->windows);
  g_hash_table_unref (l->agent_index);
  g_hash_table_unref (l->site_ids);
  g_ptr_array_unref (l->site_names);
  g_hash_table_unref (l->proxies_seen);
  g_hash_table_unref (l->bindings);
  g_hash_table_unref (l->binders);
  g_ptr_array_unref (l->sources);
  g_hash_table_unref (l->proxies);
  g_hash_table_unref (l->submits);
  g_array_unref (l->pick);
  g_array_unref (l->deferred);
  g_array_unref (l->dirty_outputs);
  g_free (l->sync_failed);
  datc_task_queue_free (l->queue);
  datc_runtimes_free (l->runtimes);
  g_hash_table_unref (l->running);
  g_hash_table_unref (l->replicas);
  datc_huge_free (l->tasks, l->n_tasks * sizeof (TaskSlot));
  g_free (l->dir);
  g_free (l);
}

/* ---- queries ------------------------------------------------------- */

void
datc_ledger_counts (DatcLedger *l, DatcLedgerCounts *counts)
{
  *counts = l->counts;
}

void
datc_ledger_counts_committed (DatcLedger *l, DatcLedgerCounts *counts)
{
  *counts = l->committed;
}

gboolean
datc_ledger_finished (DatcLedger *l)
{
  return l->counts.queued == 0 && l->counts.running == 0;
}

DatcTaskState
datc_ledger_task_state (DatcLedger *l, guint64 id)
{
  TaskSlot *t = slot (l, id);
  g_return_val_if_fail (t != NULL, DATC_TASK_FAILED);
  return t->state;
}

guint32
datc_ledger_task_attempt (DatcLedger *l, guint64 id)
{
  TaskSlot *t = slot (l, id);
  g_return_val_if_fail (t != NULL, 0);
  return t->attempt;
}

guint32
datc_ledger_task_agent (DatcLedger *l, guint64 id)
{
  TaskSlot *t = slot (l, id);
  if (t == NULL || t->state != DATC_TASK_RUNNING)
    return G_MAXUINT32;
  return t->agent;
}

const char *
datc_ledger_task_site (DatcLedger *l, guint64 id)
{
  TaskSlot *t = slot (l, id);
  return t != NULL ? l->site_names->pdata[t->site] : NULL;
}

/* ---- agents -------------------------------------------------------- */

void
datc_ledger_agent_walltime (DatcLedger *l, guint32 agent, gint64 walltime_end_us)
{
  AgentInfo *a = agent < l->agents->len ? l->agents->pdata[agent] : NULL;
  if (a != NULL)
    a->walltime_end_us = walltime_end_us;
}

const char *
datc_ledger_agent_site (DatcLedger *l, const char *agent_id)
{
  gpointer v = g_hash_table_lookup (l->agent_index, agent_id);
  AgentInfo *a = v != NULL ? l->agents->pdata[GPOINTER_TO_UINT (v) - 1] : NULL;
  return a != NULL && !a->gone ? a->site : NULL;
}

guint32
datc_ledger_agent_hello (DatcLedger *l, const char *agent_id, const char *site, const char *proxy,
                         const char *host)
{
  gpointer v = g_hash_table_lookup (l->agent_index, agent_id);
  if (v != NULL)
    {
      guint32 known = GPOINTER_TO_UINT (v) - 1;
      AgentInfo *a = l->agents->pdata[known];
      if (!a->gone)
        {
          if (a->awaited)
            {
              a->awaited = FALSE;
              l->awaited--;
            }
          return known;
        }
      /* It left and came back before its entry was released: a new one. */
    }

  guint32 idx = l->free_agents->len > 0
                    ? g_array_index (l->free_agents, guint32, l->free_agents->len - 1)
                    : l->agents->len;
  DatcRecord rec = { .type = DATC_REC_AGENT, .u.agent = { idx, agent_id, site, proxy, host } };
  journal_record (l, &rec);
  apply_agent (l, idx, agent_id, site, proxy, host);
  return idx;
}

/* ---- dispatch ------------------------------------------------------ */

/* What a task is expected to take: its own est_runtime, else what tasks
 * of this campaign took so far (once there are enough of them), else
 * nothing known (0).  For a fresh agent only the task's own counts: the
 * observed estimate is a bucket's top over every task's run time, so it
 * can exceed a whole working life in which such tasks ran fine, and a
 * fresh agent refused everything on that guess would sit idle until its
 * walltime and be replaced by another just like it, for ever. */
static guint64
expected_ms (DatcLedger *l, const DatcBagTask *bt, gboolean fresh)
{
  if (bt->est_runtime_ms != 0 || fresh)
    return bt->est_runtime_ms;
  return datc_runtimes_estimate_ms (l->runtimes);
}

/* Runs the picked tasks (l->pick) on `agent` as their next attempt,
 * appends them to `picked` and journals one dispatch record for all. */
static guint
dispatch_picked (DatcLedger *l, guint32 agent, GArray *picked)
{
  guint n = l->pick->len;
  if (n == 0)
    return 0;

  gint64 now = g_get_real_time ();
  guint first = picked->len;
  g_array_set_size (picked, first + n);
  DatcTaskKey *keys = &g_array_index (picked, DatcTaskKey, first);
  for (guint i = 0; i < n; i++)
    {
      guint32 tid = g_array_index (l->pick, guint32, i);
      keys[i].id = tid;
      keys[i].attempt = l->tasks[tid - 1].attempt + 1u;
      apply_dispatch (l, agent, tid, keys[i].attempt, now);
    }
  DatcRecord rec = { .type = DATC_REC_DISPATCH,
                     .u.dispatch = { .agent = agent, .time_us = now, .keys = { keys, n } } };
  journal_record (l, &rec);
  return n;
}

guint
datc_ledger_dispatch (DatcLedger *l, DatcDispatchRequest *req, GArray *picked)
{
  guint64 id;
  guint looked = 0;

  g_array_set_size (l->pick, 0);
  g_array_set_size (l->deferred, 0);
  while (l->pick->len < req->max && looked < req->max + 256
         && datc_task_queue_next (l->queue, req->partition, l->n_tasks, &id))
    {
      looked++;
      guint32 id32 = (guint32) id;
      if (expected_ms (l, datc_bag_get (l->bag, id), req->fresh) > req->budget_ms)
        g_array_append_val (l->deferred, id32);
      else
        g_array_append_val (l->pick, id32);
    }
  /* Tasks that did not fit wait, in order, for an agent with more time. */
  for (guint i = 0; i < l->deferred->len; i++)
    datc_task_queue_push (l->queue, g_array_index (l->deferred, guint32, i));
  req->deferred = l->deferred->len;
  return dispatch_picked (l, req->agent, picked);
}

void
datc_ledger_split (DatcLedger *l, guint n, const guint *weights)
{
  datc_task_queue_split (l->queue, n, weights, l->n_tasks);
}

guint64
datc_ledger_queued_in (DatcLedger *l, guint partition)
{
  return datc_task_queue_queued (l->queue, partition);
}

static gchar *
proxy_key (const char *site, const char *proxy)
{
  return g_strdup_printf ("%s\t%s", site, proxy);
}

/* The proxy's task, when it is still reserved for it. */
static TaskSlot *
bound_slot (DatcLedger *l, Binding *b)
{
  return g_hash_table_lookup (l->binders, TASK_KEY (b->id)) == b ? slot (l, b->id) : NULL;
}

static void
unbind (DatcLedger *l, guint64 id, TaskSlot *t)
{
  if (t->bound)
    {
      t->bound = FALSE;
      g_hash_table_remove (l->binders, TASK_KEY (id));
    }
}

gboolean
datc_ledger_bind (DatcLedger *l, const char *site, const char *proxy, guint64 *id)
{
  guint64 next;
  datc_ledger_release (l, site, proxy);
  if (!datc_task_queue_next (l->queue, 0, l->n_tasks, &next))
    return FALSE;
  Binding *b = g_new0 (Binding, 1);
  b->id = next;
  g_hash_table_insert (l->bindings, proxy_key (site, proxy), b);
  l->tasks[next - 1].bound = TRUE;
  g_hash_table_insert (l->binders, TASK_KEY (next), b);
  if (id != NULL)
    *id = next;
  return TRUE;
}

void
datc_ledger_release (DatcLedger *l, const char *site, const char *proxy)
{
  g_autofree gchar *key = proxy_key (site, proxy);
  Binding *b = g_hash_table_lookup (l->bindings, key);
  if (b == NULL)
    return;
  TaskSlot *t = bound_slot (l, b);
  if (t != NULL)
    {
      unbind (l, b->id, t);
      if (t->state == DATC_TASK_QUEUED)
        datc_task_queue_push (l->queue, b->id);
    }
  g_hash_table_remove (l->bindings, key);
}

guint64
datc_ledger_proxy_task (DatcLedger *l, const char *site, const char *proxy)
{
  g_autofree gchar *key = proxy_key (site, proxy);
  Binding *b = g_hash_table_lookup (l->bindings, key);
  return b != NULL ? b->id : 0;
}

guint
datc_ledger_dispatch_bound (DatcLedger *l, guint32 agent, const char *site, const char *proxy,
                            GArray *picked)
{
  g_autofree gchar *key = proxy_key (site, proxy);
  Binding *b = g_hash_table_lookup (l->bindings, key);
  if (b == NULL || b->taken)
    {
      /* A proxy of an earlier master (bindings are not journaled), or one
       * whose agent comes back for more: the next queued task. */
      DatcDispatchRequest req = { .agent = agent, .max = 1, .budget_ms = G_MAXUINT64 };
      return datc_ledger_dispatch (l, &req, picked);
    }
  b->taken = TRUE;
  TaskSlot *t = bound_slot (l, b);
  if (t == NULL || t->state != DATC_TASK_QUEUED)
    return 0;
  unbind (l, b->id, t);
  guint32 id32 = (guint32) b->id;
  g_array_set_size (l->pick, 0);
  g_array_append_val (l->pick, id32);
  return dispatch_picked (l, agent, picked);
}

guint64
datc_ledger_unbound_queued (DatcLedger *l)
{
  guint64 bound = g_hash_table_size (l->binders);
  return l->counts.queued - MIN (bound, l->counts.queued);
}

DatcBag *
datc_ledger_bag (DatcLedger *l)
{
  return l->bag;
}

guint64
datc_ledger_runtime_estimate_ms (DatcLedger *l)
{
  return datc_runtimes_estimate_ms (l->runtimes);
}

/* ---- end-game replication ------------------------------------------ */

/* A task is not copied before it has run this long: a short task a
 * little past every observed one is in flight (its elapsed counts from
 * dispatch: the trip to its agent, a wait behind prefetched tasks), not
 * straggling, and copying it would only start the same work twice. */
#define REPLICA_MIN_ELAPSED_MS 1000u

static gint
candidate_later_first (gconstpointer a, gconstpointer b)
{
  const DatcReplicaCandidate *x = a, *y = b;
  /* Expected end = now - elapsed + elapsed + remaining: compare remaining. */
  return x->remaining_ms < y->remaining_ms ? 1 : x->remaining_ms > y->remaining_ms ? -1 : 0;
}

void
datc_ledger_replica_candidates (DatcLedger *l, guint max_copies, gint64 now_real, GArray *out)
{
  if (datc_runtimes_count (l->runtimes) < DATC_RUNTIMES_MIN_SAMPLES || max_copies < 2)
    return;
  DatcRuntimesTail rt;
  datc_runtimes_prepare (l->runtimes, &rt);
  guint64 copy_ms = datc_runtimes_mean_ms (&rt);
  guint32 now = ms32 (now_real);
  guint first = out->len;
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init (&it, l->running);
  while (g_hash_table_iter_next (&it, &k, &v))
    {
      guint64 id = GPOINTER_TO_SIZE (k);
      TaskSlot *t = slot (l, id);
      const DatcBagTask *bt = datc_bag_get (l->bag, id);
      if (t->orphan || bt->no_replicate)
        continue;
      GArray *copies = copies_of (l, id, t);
      guint n = copies != NULL ? copies->len : 1;
      if (n >= max_copies)
        continue;
      /* The model's rule (analysis/simulate.c, try_copy): the task ends
       * with its first copy, so its expected end is the earliest of its
       * copies'. */
      guint64 best_remaining = G_MAXUINT64, best_elapsed = 0;
      for (guint c = 0; c < n; c++)
        {
          guint32 since
              = copies != NULL ? g_array_index (copies, Copy, c).since_ms : GPOINTER_TO_UINT (v);
          guint64 elapsed = (guint32) (now - since);
          guint64 rem = datc_runtimes_remaining_ms (&rt, elapsed);
          if (c == 0 || rem < best_remaining)
            best_remaining = rem, best_elapsed = elapsed;
        }
      if (best_remaining <= copy_ms || best_elapsed < REPLICA_MIN_ELAPSED_MS)
        continue;
      DatcReplicaCandidate cand = {
        .id = id,
        .attempt = t->attempt,
        .copies = n,
        .elapsed_ms = best_elapsed,
        .remaining_ms = best_remaining,
        .copy_ms = copy_ms,
        .fit_ms = expected_ms (l, bt, FALSE),
      };
      g_array_append_val (out, cand);
    }
  if (out->len > first + 1)
    qsort (&g_array_index (out, DatcReplicaCandidate, first), out->len - first,
           sizeof (DatcReplicaCandidate), candidate_later_first);
}

gboolean
datc_ledger_may_copy (DatcLedger *l, guint max_copies)
{
  guint64 running = g_hash_table_size (l->running);
  if (max_copies < 2 || running == 0
      || datc_runtimes_count (l->runtimes) + running < DATC_RUNTIMES_MIN_SAMPLES)
    return FALSE;
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init (&it, l->running);
  while (g_hash_table_iter_next (&it, &k, NULL))
    {
      guint64 id = GPOINTER_TO_SIZE (k);
      TaskSlot *t = slot (l, id);
      if (t->orphan || datc_bag_get (l->bag, id)->no_replicate)
        continue;
      GArray *copies = copies_of (l, id, t);
      if ((copies != NULL ? copies->len : 1) < max_copies)
        return TRUE;
    }
  return FALSE;
}

guint64
datc_ledger_walltime_outliving (DatcLedger *l, const char *site, gint64 now_real)
{
  gboolean observed = datc_runtimes_count (l->runtimes) >= DATC_RUNTIMES_MIN_SAMPLES;
  DatcRuntimesTail rt;
  if (observed)
    datc_runtimes_prepare (l->runtimes, &rt);
  guint32 now = ms32 (now_real);
  guint64 n = 0;
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init (&it, l->running);
  while (g_hash_table_iter_next (&it, &k, &v))
    {
      guint64 id = GPOINTER_TO_SIZE (k);
      TaskSlot *t = slot (l, id);
      guint64 est = expected_ms (l, datc_bag_get (l->bag, id), FALSE);
      if (t->orphan || est == 0)
        continue; /* nothing known of how long it takes */
      GArray *copies = copies_of (l, id, t);
      guint n_copies = copies != NULL ? copies->len : 1;
      for (guint c = 0; c < n_copies; c++)
        {
          guint32 agent = copies != NULL ? g_array_index (copies, Copy, c).agent : t->agent;
          guint32 since
              = copies != NULL ? g_array_index (copies, Copy, c).since_ms : GPOINTER_TO_UINT (v);
          AgentInfo *a = agent < l->agents->len ? l->agents->pdata[agent] : NULL;
          if (a == NULL || a->gone || a->walltime_end_us <= 0 || g_strcmp0 (a->site, site) != 0)
            continue;
          /* Before its estimate, what is left of it; past it, E[T - e | T
           * > e] over the observed runs, unknown (a straggler, or a task
           * past its own est_runtime with nothing observed) counting as
           * longer than any walltime. */
          guint64 elapsed = (guint32) (now - since);
          guint64 left = elapsed < est ? est - elapsed
                         : observed    ? datc_runtimes_remaining_ms (&rt, elapsed)
                                       : G_MAXUINT64;
          if (left >= (guint64) (a->walltime_end_us - MIN (now_real, a->walltime_end_us)) / 1000u)
            n++;
        }
    }
  return n;
}

guint
datc_ledger_replicate (DatcLedger *l, guint32 agent, guint64 id, GArray *picked)
{
  TaskSlot *t = slot (l, id);
  if (t == NULL || t->state != DATC_TASK_RUNNING || live_on (l, id, t, agent, 0))
    return 0;
  DatcTaskKey key = { id, t->attempt + 1u };
  gint64 now = g_get_real_time ();
  DatcRecord rec = { .type = DATC_REC_REPLICATE,
                     .u.replicate = {
                         .agent = agent,
                         .time_us = now,
                         .id = id,
                         .attempt = key.attempt,
                     } };
  journal_record (l, &rec);
  apply_replicate (l, agent, id, key.attempt, now);
  g_array_append_val (picked, key);
  return 1;
}

gboolean
datc_ledger_attempt_live (DatcLedger *l, guint64 id, guint32 agent, guint32 attempt)
{
  TaskSlot *t = slot (l, id);
  return t != NULL && attempt != 0 && live_on (l, id, t, agent, attempt);
}

gboolean
datc_ledger_runs_on (DatcLedger *l, guint64 id, guint32 agent)
{
  TaskSlot *t = slot (l, id);
  return t != NULL && live_on (l, id, t, agent, 0);
}

static gint64
journal_dispatch_one (DatcLedger *l, guint32 agent, guint64 id, guint32 attempt)
{
  gint64 now = g_get_real_time ();
  DatcTaskKey key = { id, attempt };
  DatcRecord rec = { .type = DATC_REC_DISPATCH,
                     .u.dispatch = { .agent = agent, .time_us = now, .keys = { &key, 1 } } };
  journal_record (l, &rec);
  return now;
}

gboolean
datc_ledger_reattach (DatcLedger *l, guint32 agent, guint64 id, guint32 attempt)
{
  TaskSlot *t = slot (l, id);
  if (t == NULL || is_final (t))
    return FALSE;
  if (t->replicated)
    {
      /* One of its copies: it goes on (the copies stay as they were). */
      if (copy_index (copies_of (l, id, t), agent, attempt) < 0)
        return FALSE;
      if (t->orphan)
        apply_dispatch (l, agent, id, attempt, journal_dispatch_one (l, agent, id, attempt));
      return TRUE;
    }
  /* TASKS leave before their dispatch record is synced, so a master that
   * died in between comes back one attempt behind what the agent holds:
   * the agent's attempt is the open one then. */
  if (t->state == DATC_TASK_QUEUED && attempt == t->attempt + 1u)
    {
      apply_dispatch (l, agent, id, attempt, journal_dispatch_one (l, agent, id, attempt));
      return TRUE;
    }
  if (t->attempt != attempt)
    return FALSE;
  if (t->state == DATC_TASK_RUNNING && t->agent != agent)
    return FALSE;
  if (t->state == DATC_TASK_RUNNING && !t->orphan)
    return TRUE;
  /* Journaled: a master that dies again knows its agent is back. */
  apply_dispatch (l, agent, id, attempt, journal_dispatch_one (l, agent, id, attempt));
  return TRUE;
}

/* ---- results ------------------------------------------------------- */

/* Journals and applies the departure of an agent that holds nothing. */
static void
journal_agent_gone (DatcLedger *l, guint32 agent)
{
  AgentInfo *a = agent < l->agents->len ? l->agents->pdata[agent] : NULL;
  g_return_if_fail (a != NULL);
  if (a->gone)
    return;
  DatcRecord rec = { .type = DATC_REC_AGENT_GONE, .u.agent_gone = { agent } };
  journal_record (l, &rec);
  apply_agent_gone (l, agent);
}

/* The result's output goes to its agent's file first; the record then
 * says where it is. */
static gboolean
write_output (DatcLedger *l, guint32 agent, const DatcResult *res, DatcRecResult *rr,
              GError **error)
{
  AgentInfo *a = agent < l->agents->len ? l->agents->pdata[agent] : NULL;
  g_return_val_if_fail (a != NULL, FALSE);
  if (!datc_agent_output_append (a->output, res->out, res->err, &rr->out_off, &rr->err_off, error))
    return FALSE;
  rr->out_len = res->out ? g_bytes_get_size (res->out) : 0;
  rr->err_len = res->err ? g_bytes_get_size (res->err) : 0;
  if (rr->out_len + rr->err_len > 0 && !a->out_dirty)
    {
      a->out_dirty = TRUE;
      g_array_append_val (l->dirty_outputs, agent);
    }
  return TRUE;
}

static void
journal_result (DatcLedger *l, const DatcRecResult *rr)
{
  DatcRecord rec = { .type = DATC_REC_RESULT, .u.result = *rr };
  journal_record (l, &rec);
}

static void
journal_requeue (DatcLedger *l, guint64 id, gboolean lost)
{
  DatcRecord rec = { .type = DATC_REC_REQUEUE, .u.requeue = { id, lost } };
  journal_record (l, &rec);
}

static void
journal_copy_end (DatcLedger *l, guint64 id, guint32 attempt)
{
  DatcRecord rec = { .type = DATC_REC_COPY_END, .u.copy_end = { id, attempt } };
  journal_record (l, &rec);
}

/* A live attempt ends unrun or unrecorded (drained, refused, cancelled,
 * its agent left): one copy of several just ends; a task's only attempt
 * goes back to the queue (with a crash when `lost`). */
static void
end_attempt (DatcLedger *l, guint64 id, TaskSlot *t, guint32 attempt, gboolean lost)
{
  if (live_copies (l, id, t) > 1)
    {
      journal_copy_end (l, id, attempt);
      apply_copy_end (l, id, attempt);
      return;
    }
  journal_requeue (l, id, lost);
  apply_requeue (l, id, lost);
}

/* Every live attempt of `id` but (agent, attempt), for the caller to cancel. */
static void
other_copies (DatcLedger *l, guint64 id, TaskSlot *t, guint32 agent, guint32 attempt, GArray *out)
{
  if (out == NULL || t->state != DATC_TASK_RUNNING)
    return;
  GArray *copies = copies_of (l, id, t);
  if (copies == NULL)
    {
      if (t->agent != agent || t->attempt != attempt)
        {
          DatcLedgerRunning r = { t->agent, t->attempt, id };
          g_array_append_val (out, r);
        }
      return;
    }
  for (guint i = 0; i < copies->len; i++)
    {
      const Copy *c = &g_array_index (copies, Copy, i);
      if (c->agent != agent || c->attempt != attempt)
        {
          DatcLedgerRunning r = { c->agent, c->attempt, id };
          g_array_append_val (out, r);
        }
    }
}

DatcResultOutcome
datc_ledger_take_result (DatcLedger *l, guint32 agent, const DatcResult *res, GArray *cancel,
                         GError **error)
{
  TaskSlot *t = slot (l, res->id);

  if (t == NULL || is_final (t) || res->attempt == 0 || res->attempt > t->attempt)
    return DATC_RESULT_DUPLICATE;

  gboolean open_here = live_on (l, res->id, t, agent, res->attempt);
  switch (res->status)
    {
    case DATC_STATUS_DRAINED:
    case DATC_STATUS_REFUSED:
    case DATC_STATUS_CANCELLED:
      /* The agent gave the task back unrun (or we asked it to stop it). */
      if (!open_here)
        return DATC_RESULT_DUPLICATE;
      if (live_copies (l, res->id, t) > 1)
        {
          end_attempt (l, res->id, t, res->attempt, FALSE);
          return DATC_RESULT_DROPPED;
        }
      journal_requeue (l, res->id, FALSE);
      apply_requeue (l, res->id, FALSE);
      return DATC_RESULT_REQUEUED;
    default:
      break;
    }

  const DatcBagTask *bt = datc_bag_get (l->bag, res->id);
  gboolean ok = res->status == DATC_STATUS_EXITED && res->exit_code == 0;
  /* A copy that failed while another still runs fails nothing: the other
   * may yet succeed, and if it fails too its result is the one that
   * counts (retried or final as any failure).  Its output is not kept. */
  if (!ok && open_here && live_copies (l, res->id, t) > 1)
    {
      end_attempt (l, res->id, t, res->attempt, FALSE);
      return DATC_RESULT_DROPPED;
    }
  DatcRecResult rr = {
    .id = res->id,
    .attempt = res->attempt,
    .agent = agent,
    .final = ok || t->failures >= bt->retries,
    .status = (guint32) res->status,
    .exit_code = res->exit_code,
    .signal = res->signal,
    .started = res->started_us,
    .finished = res->finished_us,
    .out_dropped = res->out_dropped,
    .err_dropped = res->err_dropped,
    .message = res->message,
    .end_class = end_class_of (res->status, res->signal, res->oom_evidence, FALSE),
    .oom_evidence = res->oom_evidence,
  };
  /* A failed old attempt while a newer one runs changes nothing. */
  if (!rr.final && t->state == DATC_TASK_RUNNING && !open_here)
    return DATC_RESULT_DUPLICATE;

  if (!write_output (l, agent, res, &rr, error))
    return DATC_RESULT_FAILED;
  /* The first final result wins: every other copy is cancelled. */
  if (rr.final)
    other_copies (l, res->id, t, agent, res->attempt, cancel);
  journal_result (l, &rr);
  apply_result (l, &rr);
  return DATC_RESULT_ACCEPTED;
}

/* ---- losses -------------------------------------------------------- */

guint
datc_ledger_agent_attempts (DatcLedger *l, guint32 agent)
{
  return agent < l->attempts_on->len ? g_array_index (l->attempts_on, guint32, agent) : 0;
}

static gint
key_by_id (gconstpointer a, gconstpointer b)
{
  guint64 x = ((const DatcTaskKey *) a)->id, y = ((const DatcTaskKey *) b)->id;
  return x < y ? -1 : x > y;
}

void
datc_ledger_agent_tasks (DatcLedger *l, guint32 agent, GArray *keys)
{
  /* Most agents leave holding nothing: nothing to look at for them. */
  if (datc_ledger_agent_attempts (l, agent) == 0)
    return;
  GHashTable *ids = l->tasks_on->pdata[agent];
  g_autoptr (GArray) copied = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  guint first = keys->len;
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init (&it, ids);
  while (g_hash_table_iter_next (&it, &k, NULL))
    {
      guint64 id = GPOINTER_TO_SIZE (k);
      TaskSlot *t = &l->tasks[id - 1];
      if (t->state != DATC_TASK_RUNNING)
        continue;
      if (t->replicated)
        {
          gint i = copy_index (copies_of (l, id, t), agent, 0);
          if (i >= 0)
            {
              DatcTaskKey c = { id, g_array_index (copies_of (l, id, t), Copy, i).attempt };
              g_array_append_val (copied, c);
            }
        }
      else if (t->agent == agent)
        {
          DatcTaskKey c = { id, t->attempt };
          g_array_append_val (keys, c);
        }
    }
  /* In id order, as a scan of the bag would give them: the order they go
   * back to the queue in.  Copies after. */
  g_array_sort (copied, key_by_id);
  if (keys->len > first) /* an empty GArray's data is NULL: no qsort of it */
    qsort (keys->data + first * sizeof (DatcTaskKey), keys->len - first, sizeof (DatcTaskKey),
           key_by_id);
  g_array_append_vals (keys, copied->data, copied->len);
}

static guint
agent_lost (DatcLedger *l, guint32 agent)
{
  g_autoptr (GArray) keys = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  datc_ledger_agent_tasks (l, agent, keys);
  for (guint i = 0; i < keys->len; i++)
    {
      DatcTaskKey *k = &g_array_index (keys, DatcTaskKey, i);
      TaskSlot *t = &l->tasks[k->id - 1];
      /* A copy lost while another runs costs the task nothing. */
      if (live_copies (l, k->id, t) > 1)
        {
          end_attempt (l, k->id, t, k->attempt, TRUE);
          continue;
        }
      if ((guint) t->crashes + 1 >= l->options.crash_limit)
        {
          gint64 now = g_get_real_time ();
          g_autofree gchar *msg = g_strdup_printf ("lost with its agent %u times (crash limit %u)",
                                                   t->crashes + 1u, l->options.crash_limit);
          AgentInfo *a = agent < l->agents->len ? l->agents->pdata[agent] : NULL;
          gboolean walltime = a != NULL && a->walltime_end_us > 0 && now >= a->walltime_end_us;
          DatcRecResult rr = {
            .id = k->id,
            .attempt = k->attempt,
            .agent = agent,
            .final = TRUE,
            .status = DATC_STATUS_LOST,
            .exit_code = -1,
            .signal = 0,
            .started = 0,
            .finished = now,
            .message = msg,
            .end_class = end_class_of (DATC_STATUS_LOST, 0, NULL, walltime),
          };
          rr.out_off = rr.err_off = a ? datc_agent_output_size (a->output) : 0;
          t->crashes++;
          journal_result (l, &rr);
          apply_result (l, &rr);
        }
      else
        {
          journal_requeue (l, k->id, TRUE);
          apply_requeue (l, k->id, TRUE);
        }
    }
  return keys->len;
}

void
datc_ledger_requeue (DatcLedger *l, guint32 agent, guint64 id, guint32 attempt)
{
  TaskSlot *t = slot (l, id);
  if (t == NULL || !live_on (l, id, t, agent, attempt))
    return;
  end_attempt (l, id, t, attempt, FALSE);
}

guint
datc_ledger_agent_gone (DatcLedger *l, guint32 agent, gboolean lost)
{
  AgentInfo *a = agent < l->agents->len ? l->agents->pdata[agent] : NULL;
  g_return_val_if_fail (a != NULL, 0);
  if (a->gone)
    return 0;
  guint n;
  if (lost)
    n = agent_lost (l, agent);
  else
    {
      /* It left on its own: what it still had goes back without penalty. */
      g_autoptr (GArray) keys = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
      datc_ledger_agent_tasks (l, agent, keys);
      for (guint i = 0; i < keys->len; i++)
        {
          DatcTaskKey *k = &g_array_index (keys, DatcTaskKey, i);
          datc_ledger_requeue (l, agent, k->id, k->attempt);
        }
      n = keys->len;
    }
  journal_agent_gone (l, agent);
  return n;
}

/* ---- proxies ------------------------------------------------------- */

gboolean
datc_ledger_proxy_connected (DatcLedger *l, const char *site, const char *proxy)
{
  /* Asked for every proxy not yet started at every planning turn: a
   * lookup, not a scan of every agent the campaign ever had. */
  g_autofree gchar *key = g_strconcat (site, "\n", proxy, NULL);
  return g_hash_table_contains (l->proxies_seen, key);
}

void
datc_ledger_proxy_event (DatcLedger *l, const char *site, const char *proxy, const char *job_id,
                         const char *event)
{
  DatcRecord rec
      = { .type = DATC_REC_PROXY, .u.proxy = { site, proxy, job_id, event, g_get_real_time () } };
  journal_record (l, &rec);
  apply_proxy (l, site, proxy, job_id, event);
}

GPtrArray *
datc_ledger_open_proxies (DatcLedger *l)
{
  GPtrArray *out = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init (&it, l->proxies);
  while (g_hash_table_iter_next (&it, &k, &v))
    g_ptr_array_add (out, g_strdup_printf ("%s\t%s", (char *) k, (char *) v));
  return out;
}

GPtrArray *
datc_ledger_open_submits (DatcLedger *l)
{
  GPtrArray *out = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init (&it, l->submits);
  while (g_hash_table_iter_next (&it, &k, &v))
    g_ptr_array_add (out, g_strdup_printf ("%s\t%s", (char *) k, (char *) v));
  return out;
}

/* ---- commit -------------------------------------------------------- */

gsize
datc_ledger_pending (DatcLedger *l)
{
  return (l->journal ? datc_journal_pending (l->journal) : 0)
         + (l->results ? datc_results_file_pending (l->results) : 0);
}

gboolean
datc_ledger_commit (DatcLedger *l, GError **error)
{
  if (l->sync_failed != NULL)
    {
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO,
                   "nothing is committed after a failed sync: %s", l->sync_failed);
      return FALSE;
    }
  while (l->dirty_outputs->len > 0)
    {
      guint32 idx = g_array_index (l->dirty_outputs, guint32, l->dirty_outputs->len - 1);
      AgentInfo *a = l->agents->pdata[idx];
      g_autoptr (GError) local = NULL;
      if (!datc_agent_output_sync (a->output, &local))
        {
          /* Never tried again: after a failed fdatasync the kernel may
           * have dropped the dirty pages and cleared the error, so a
           * second one could succeed on output that never reached the
           * disk, and the results pointing at it would be journaled.  The
           * journal rewrites its own bytes instead (journal.c), but these
           * are gone from memory: the ledger commits nothing more, the
           * master stops, and the next run re-derives everything from the
           * journal, which holds none of these results (they run again). */
          l->sync_failed = g_strdup (local->message);
          g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s", l->sync_failed);
          return FALSE;
        }
      a->out_dirty = FALSE;
      g_array_set_size (l->dirty_outputs, l->dirty_outputs->len - 1);
      if (a->gone)
        agent_release (l, a);
    }
  if (!datc_journal_commit (l->journal, error))
    return FALSE;
  if (!write_results (l, error))
    return FALSE;
  l->committed = l->counts;
  return compact_tick (l, error);
}

/* ---- compaction ---------------------------------------------------- */

/* The most of a compaction's error its child reports (one write, below
 * PIPE_BUF: never blocks on the empty pipe). */
#define COMPACT_REPORT_MAX 4000
/* The writer's pace (compact_write_some): a step (compact_step_bytes)
 * written and out on the disk, then a rest this many times as long as
 * that took. */
#define COMPACT_REST_FACTOR 1
/* The child's nice value: its CPU goes to the loop's thread first. */
#define COMPACT_CHILD_NICE 10
/* Tasks per TASKS record: 1.25 MiB, far below DATC_JOURNAL_RECORD_MAX. */
#define TASKS_PER_RECORD 65536u
/* results.jsonl bytes per LINES record before packing (whole lines; a
 * longer line gets a record of its own); packed, about a fifteenth. */
#define LINES_PER_RECORD ((gsize) 1 << 20)

static void
rewrite_record (DatcJournalRewrite *w, const DatcRecord *rec)
{
  datc_record_encode (rec, datc_journal_rewrite_begin (w));
  datc_journal_rewrite_end (w);
}

static void
put_le32_at (guint8 *p, guint32 v)
{
  v = GUINT32_TO_LE (v);
  memcpy (p, &v, sizeof v);
}

static gboolean compact_write_some (Compaction *c, GError **error);

/* The live state as records, in the order replay needs them (sources
 * grow the bag, the checkpoint's tables come before the tasks that name
 * their sites, the tasks before what refers to them).  With `writing`
 * (in the child), the tasks are written as they are framed, not held. */
static void
compact_snapshot (DatcLedger *l, DatcJournalRewrite *w, gint64 now, guint64 from_bytes,
                  Compaction *writing)
{
  for (guint i = 0; i < l->sources->len; i++)
    {
      SourceInfo *src = l->sources->pdata[i];
      if (src->record != NULL)
        {
          gsize len;
          const guint8 *p = g_bytes_get_data (src->record, &len);
          g_byte_array_append (datc_journal_rewrite_begin (w), p, (guint) len);
          datc_journal_rewrite_end (w);
          continue;
        }
      DatcRecord rec = { .type = DATC_REC_SOURCE,
                         .u.source = {
                             .index = i,
                             .path = src->path,
                             .sha256 = src->sha256,
                             .first_id = src->first_id,
                             .count = src->count,
                             .submitted_us = src->submitted_us,
                             .format = DATC_TASKFILE_AUTO,
                         } };
      rewrite_record (w, &rec);
    }

  g_autoptr (GByteArray) runtimes = g_byte_array_new ();
  g_autoptr (GByteArray) sites = g_byte_array_new ();
  g_autoptr (GByteArray) seen = g_byte_array_new ();
  datc_runtimes_save (l->runtimes, runtimes);
  for (guint i = 1; i < l->site_names->len; i++)
    g_byte_array_append (sites, l->site_names->pdata[i],
                         (guint) strlen (l->site_names->pdata[i]) + 1);
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init (&it, l->proxies_seen);
  while (g_hash_table_iter_next (&it, &k, NULL))
    g_byte_array_append (seen, k, (guint) strlen (k) + 1);
  DatcRecord cp = { .type = DATC_REC_CHECKPOINT,
                    .u.checkpoint = {
                        .time_us = now,
                        .from_bytes = from_bytes,
                        .n_tasks = l->n_tasks,
                        .agents = l->agents->len,
                        .filter = l->filter_results,
                        .runtimes = { runtimes->data, runtimes->len },
                        .sites = { sites->len ? sites->data : NULL, sites->len },
                        .seen = { seen->len ? seen->data : NULL, seen->len },
                    } };
  rewrite_record (w, &cp);

  for (guint i = 0; i < l->agents->len; i++)
    {
      AgentInfo *a = l->agents->pdata[i];
      if (a == NULL)
        continue;
      DatcRecord rec = { .type = DATC_REC_AGENT,
                         .u.agent = {
                             .idx = i,
                             .agent_id = a->agent_id,
                             .site = a->site,
                             .proxy = a->proxy,
                             .host = a->host,
                         } };
      rewrite_record (w, &rec);
      if (a->gone)
        {
          DatcRecord gone = { .type = DATC_REC_AGENT_GONE, .u.agent_gone = { i } };
          rewrite_record (w, &gone);
        }
    }

  /* The tasks: fixed-width entries straight into the record's bytes (a
   * msgpack bin of known length), the loop's one pass over the bag. */
  for (guint64 first = 1; first <= l->n_tasks; first += TASKS_PER_RECORD)
    {
      guint64 n = MIN ((guint64) TASKS_PER_RECORD, l->n_tasks - first + 1);
      g_autofree guint8 *e = g_malloc0 (n * DATC_REC_TASK_ENTRY);
      for (guint64 i = 0; i < n; i++)
        {
          const TaskSlot *t = &l->tasks[first - 1 + i];
          guint8 *p = e + i * DATC_REC_TASK_ENTRY;
          guint16 site = GUINT16_TO_LE (t->site);
          p[0] = t->state;
          p[1] = t->crashes;
          p[2] = t->failures;
          memcpy (p + 4, &site, sizeof site);
          put_le32_at (p + 8, t->attempt);
          if (t->state == DATC_TASK_RUNNING)
            {
              /* A replicated task: its first copy here, the others as
               * REPLICATE records below. */
              GArray *copies = copies_of (l, first + i, t);
              const Copy *c0 = copies != NULL ? &g_array_index (copies, Copy, 0) : NULL;
              put_le32_at (p + 8, c0 ? c0->attempt : t->attempt);
              put_le32_at (p + 12, c0 ? c0->agent : t->agent);
              put_le32_at (p + 16, c0 ? c0->since_ms
                                      : GPOINTER_TO_UINT (g_hash_table_lookup (
                                            l->running, TASK_KEY (first + i))));
            }
        }
      DatcRecord rec
          = { .type = DATC_REC_TASKS, .u.tasks = { first, { e, n * DATC_REC_TASK_ENTRY } } };
      rewrite_record (w, &rec);
      if (writing != NULL && !compact_write_some (writing, &writing->error))
        return;
    }

  g_hash_table_iter_init (&it, l->replicas);
  while (g_hash_table_iter_next (&it, &k, &v))
    {
      GArray *copies = v;
      for (guint i = 1; i < copies->len; i++)
        {
          const Copy *c = &g_array_index (copies, Copy, i);
          DatcRecord rec = { .type = DATC_REC_REPLICATE,
                             .u.replicate = {
                                 .agent = c->agent,
                                 .time_us = (gint64) c->since_ms * 1000,
                                 .id = GPOINTER_TO_SIZE (k),
                                 .attempt = c->attempt,
                             } };
          rewrite_record (w, &rec);
        }
    }

  for (guint i = 0; i < l->windows->len; i++)
    {
      OrphanWindow *ow = l->windows->pdata[i];
      g_autoptr (GArray) keys = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
      for (guint j = 0; j < ow->keys->len; j++)
        {
          DatcTaskKey *key = &g_array_index (ow->keys, DatcTaskKey, j);
          const TaskSlot *t = slot (l, key->id);
          if (t != NULL && t->orphan && t->attempt == key->attempt)
            g_array_append_val (keys, *key);
        }
      guint done = 0;
      do
        {
          guint n = MIN (keys->len - done, ORPHANS_PER_RECORD);
          DatcRecord rec
              = { .type = DATC_REC_ORPHANS,
                  .u.orphans
                  = { .deadline_us = ow->deadline_us,
                      .keys = { n ? &g_array_index (keys, DatcTaskKey, done) : NULL, n } } };
          rewrite_record (w, &rec);
          done += n;
        }
      while (done < keys->len);
    }

  /* Open proxies and submissions, as the events that opened them. */
  GHashTable *tables[] = { l->proxies, l->submits };
  const char *events[] = { "submitted", "submitting" };
  for (guint t = 0; t < G_N_ELEMENTS (tables); t++)
    {
      g_hash_table_iter_init (&it, tables[t]);
      while (g_hash_table_iter_next (&it, &k, &v))
        {
          g_auto (GStrv) parts = g_strsplit (k, "\t", 2);
          DatcRecord rec = { .type = DATC_REC_PROXY,
                             .u.proxy = { .site = parts[0],
                                          .proxy = parts[1] ? parts[1] : "",
                                          .job_id = v,
                                          .event = events[t],
                                          .time_us = now } };
          rewrite_record (w, &rec);
        }
    }
}

/* Writes what was framed, paced: every step (compact_step_bytes) it is
 * written out and waited for (no sync: the one at the end makes it
 * durable), then the writer rests as long again.  The master's commits
 * (an fdatasync of a few KB, which also flushes the disk's cache: what the
 * writer put there since the last one) then never queue behind more than
 * a step, and the disk is the writer's at most half the time.  Syncing
 * every 8 MiB instead, as fast as it could, held commits up to 294 ms at
 * 10M tasks (290 MB written); paced, under 10 ms (benchmarks/README.md). */
static gboolean
compact_write_some (Compaction *c, GError **error)
{
  if (!datc_journal_rewrite_flush (c->rewrite, error))
    return FALSE;
  guint64 end = datc_journal_rewrite_written (c->rewrite);
  if (end - c->synced < c->step)
    return TRUE;
  gint64 t0 = g_get_monotonic_time ();
  if (!datc_journal_rewrite_write_out (c->rewrite, c->synced, error))
    return FALSE;
  c->synced = end;
  g_usleep ((gulong) ((g_get_monotonic_time () - t0) * COMPACT_REST_FACTOR));
  return TRUE;
}

/* The writer (the child, or the thread when fork failed): results.jsonl
 * as it was at the snapshot, packed into LINES records (read back from
 * the file, not derived from the ledger, whose agents' indices may since
 * belong to others), then one sync.  The file only grows meanwhile (the
 * loop appends after what is copied here). */
static gpointer
compact_writer (gpointer data)
{
  Compaction *c = data;
  GError **error = &c->error;
  int fd = open (c->results_path, O_RDONLY | O_CLOEXEC);
  g_autofree guint8 *buf = NULL;
  g_autoptr (GByteArray) packed = g_byte_array_new ();
  gsize cap = LINES_PER_RECORD, have = 0;
  guint64 at = 0;

  if (fd < 0)
    {
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s: %s", c->results_path,
                   g_strerror (errno));
      goto out;
    }
  buf = g_malloc (cap);
  while (at < c->results_len || have > 0)
    {
      gsize want = (gsize) MIN ((guint64) (cap - have), c->results_len - at);
      ssize_t got = want > 0 ? pread (fd, buf + have, want, (off_t) at) : 0;
      if (got < 0 && errno == EINTR)
        continue;
      if (got < 0 || (got == 0 && want > 0))
        {
          g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s: %s", c->results_path,
                       got < 0 ? g_strerror (errno) : "shorter than written");
          goto out;
        }
      at += (guint64) got;
      have += (gsize) got;
      /* Whole lines only; a line longer than the buffer grows it. */
      gsize cut = have;
      while (cut > 0 && buf[cut - 1] != '\n')
        cut--;
      if (cut == 0)
        {
          if (at >= c->results_len)
            break; /* a last line without its end: never written whole */
          cap *= 2;
          buf = g_realloc (buf, cap);
          continue;
        }
      g_byte_array_set_size (packed, 0);
      datc_result_pack (buf, cut, packed);
      DatcRecord rec = { .type = DATC_REC_LINES, .u.lines = { { packed->data, packed->len } } };
      rewrite_record (c->rewrite, &rec);
      memmove (buf, buf + cut, have - cut);
      have -= cut;
      if (!compact_write_some (c, error))
        goto out;
    }
  if (datc_journal_rewrite_sync (c->rewrite, error) && c->kill_at == 'w')
    {
      /* The master killed once the new file is written (for the crash
       * tests): its child, which wrote it, goes too. */
      if (c->master > 0)
        kill (c->master, SIGKILL);
      raise (SIGKILL);
    }
out:
  if (fd >= 0)
    close (fd);
  g_atomic_int_set (&c->done, 1);
  return NULL;
}

static void
compaction_free (Compaction *c)
{
  if (c == NULL)
    return;
  if (c->child > 0)
    {
      /* Abandoned (the ledger is freed): its file is removed below. */
      kill (c->child, SIGKILL);
      while (waitpid (c->child, NULL, 0) < 0 && errno == EINTR)
        ;
    }
  if (c->report >= 0)
    close (c->report);
  g_free (c->said);
  if (c->writer != NULL)
    g_thread_join (c->writer);
  datc_journal_rewrite_free (c->rewrite);
  g_clear_error (&c->error);
  g_free (c->results_path);
  g_free (c);
}

static void
note_pause (DatcLedger *l, gint64 since)
{
  gint64 us = g_get_monotonic_time () - since;
  if (us > l->jinfo.pause_max_us)
    l->jinfo.pause_max_us = us;
}

/* The forked child: the whole compaction from its copy of the ledger, its
 * outcome as its exit status, an error's message on the pipe.  It is a
 * copy of one thread of a process that has others (ZeroMQ's, the sites'
 * workers, relays), so it touches no socket, main context or stdio (their
 * locks may be held by a thread that is not here), and leaves by _exit:
 * no atexit handler, no buffer of the master's flushed twice.  Memory is
 * plain malloc, which glibc makes safe across fork. */
static void G_GNUC_NORETURN
compact_child (DatcLedger *l, Compaction *c, int report)
{
#ifdef __linux__
  /* Never left writing when the master dies: it would hold the
   * campaign's lock (a flock on a descriptor it shares) meanwhile. */
  prctl (PR_SET_PDEATHSIG, SIGKILL);
#endif
  if (getppid () != c->master)
    _exit (1);
  /* Background work: the loop's thread, waking from a commit's fdatasync,
   * gets the CPU before it (at 10M tasks on 2 busy cores, commits of up
   * to 17 ms meanwhile became 7.6 ms at most; refused, it only runs as
   * before). */
  (void) setpriority (PRIO_PROCESS, 0, COMPACT_CHILD_NICE);
  if (c->kill_at == 's')
    raise (SIGSTOP); /* a writer that takes its time (for the tests) */
  compact_snapshot (l, c->rewrite, c->time_us, c->from_bytes, c);
  if (c->error == NULL)
    compact_writer (c);
  if (c->error == NULL && c->kill_at == 'c')
    raise (SIGKILL); /* a child that crashes (for the tests) */
  if (c->error == NULL)
    {
      /* Done: the checkpoint is written and synced.  What is left is the
       * exit, which tears down this copy of the master's page tables and
       * can take seconds on a busy host (10.0 s seen, waiting for the
       * anon_vma lock it shares with the master).  It says so first,
       * holding no descriptor of the master's (the campaign's lock among
       * them), so that the master need not wait for that. */
      if (report > 3)
        close_range (3, (unsigned) report - 1, 0);
      close_range ((unsigned) report + 1, ~0u, 0);
      const char done = '\0';
      if (write (report, &done, 1) == 1 && c->kill_at == 'x')
        raise (SIGSTOP); /* a child slow to exit (for the tests) */
      _exit (0);
    }
  gsize len = MIN (strlen (c->error->message), (gsize) COMPACT_REPORT_MAX);
  if (write (report, c->error->message, len) < 0)
    _exit (2);
  _exit (1);
}

/* The ledger's wait function (it may return early: after serving one
 * request) on `pidfd` or a timer at `left_ms`, whichever comes first: one
 * epoll set holds both, since the wait function watches one fd.  FALSE
 * when the set could not be made. */
static gboolean
wait_with_owner (DatcLedger *l, int pidfd, int report, gint64 left_ms)
{
  int ep = epoll_create1 (EPOLL_CLOEXEC);
  int timer = timerfd_create (CLOCK_MONOTONIC, TFD_CLOEXEC);
  struct itimerspec at
      = { .it_value = { .tv_sec = left_ms / 1000, .tv_nsec = (left_ms % 1000) * 1000000 } };
  struct epoll_event ev = { .events = EPOLLIN };
  gboolean ok = ep >= 0 && timer >= 0 && timerfd_settime (timer, 0, &at, NULL) == 0
                && epoll_ctl (ep, EPOLL_CTL_ADD, pidfd, &ev) == 0
                && epoll_ctl (ep, EPOLL_CTL_ADD, timer, &ev) == 0
                && (report < 0 || epoll_ctl (ep, EPOLL_CTL_ADD, report, &ev) == 0);
  if (ok)
    l->wait (l->wait_data, ep);
  if (timer >= 0)
    close (timer);
  if (ep >= 0)
    close (ep);
  return ok;
}

/* Until `pid` ends, `report` (-1: none) has something to read, or
 * `deadline` (monotonic µs) passes, whichever is first (a pidfd; a short
 * sleep where there is none).  With a ledger (NULL: none) and its wait
 * function the owner's thread does its own waiting meanwhile (the master
 * answers `datc status` while its last compaction's writer ends: 0.7 s
 * at 10M tasks), and this may return earlier: the caller asks again. */
static void
wait_child_until (DatcLedger *l, pid_t pid, int report, gint64 deadline)
{
  gint64 left_ms = (deadline - g_get_monotonic_time ()) / 1000 + 1;
  int fd = (int) syscall (SYS_pidfd_open, pid, 0);
  if (fd < 0)
    {
      g_usleep (10 * 1000);
      return;
    }
  left_ms = CLAMP (left_ms, 1, G_MAXINT);
  if (l == NULL || l->wait == NULL || !wait_with_owner (l, fd, report, left_ms))
    {
      struct pollfd p[2] = { { fd, POLLIN, 0 }, { report, POLLIN, 0 } };
      (void) poll (p, report >= 0 ? 2 : 1, (int) left_ms);
    }
  close (fd);
}

/* Reads what the child has said, once there is something (or its end),
 * without waiting: TRUE when it said its work is done (a NUL byte).
 * Anything else is the start of its error's message, kept for when it has
 * ended; its pipe is not watched after that first read. */
static gboolean
child_said_done (Compaction *c)
{
  if (c->said == NULL)
    {
      struct pollfd p = { c->report, POLLIN, 0 };
      if (poll (&p, 1, 0) != 1)
        return FALSE;
      c->said = g_malloc (COMPACT_REPORT_MAX + 1);
      ssize_t n = read (c->report, c->said, COMPACT_REPORT_MAX);
      c->said_len = n > 0 ? (gsize) n : 0;
    }
  return c->said_len > 0 && c->said[0] == '\0';
}

/* At the ledger's end, how long a killed compaction child's exit is
 * waited for before it is left (a zombie of this process until it ends,
 * then init's): the rare exit that takes seconds does not hold a master's
 * end, the usual one (well under a second, ASan's included) is reaped. */
#define COMPACT_REAP_END_MS 2000

/* Compaction children that said they were done and have exited since:
 * reaped.  With `end` (the ledger's) each is killed and waited for up to
 * COMPACT_REAP_END_MS. */
static void
compact_reap (DatcLedger *l, gboolean end)
{
  gint64 deadline = g_get_monotonic_time () + COMPACT_REAP_END_MS * 1000;
  for (guint i = l->exiting->len; i-- > 0;)
    {
      pid_t pid = g_array_index (l->exiting, pid_t, i);
      if (end)
        kill (pid, SIGKILL);
      for (;;)
        {
          pid_t got;
          do
            got = waitpid (pid, NULL, WNOHANG);
          while (got < 0 && errno == EINTR);
          if (got != 0)
            {
              g_array_remove_index_fast (l->exiting, i);
              break;
            }
          if (!end || g_get_monotonic_time () >= deadline)
            break;
          /* Not through the owner's wait: the ledger is going. */
          wait_child_until (NULL, pid, -1, deadline);
        }
    }
}

/* Whether the writer has ended, its outcome then in c->error; `block`
 * waits for it.  A child that said its work is done (child_said_done) has
 * ended as far as the compaction goes: its exit is reaped later
 * (compact_reap).  Only this ledger's children's pids are reaped (nothing
 * in the master reaps with waitpid (-1) or a SIGCHLD handler of its own;
 * GLib's child watches wait for their own pids). */
static gboolean
compact_ended (DatcLedger *l, Compaction *c, gboolean block)
{
  if (c->writer != NULL)
    {
      if (!block && !g_atomic_int_get (&c->done))
        return FALSE;
      g_thread_join (c->writer);
      c->writer = NULL;
      return TRUE;
    }
  if (c->child == 0)
    return TRUE;
  int status = 0;
  pid_t got;
  /* A child that never ends (it could block on a lock another thread of
   * the master held at the fork: GLib 2.74's slice allocator has one) is
   * killed at its deadline, which fails that compaction like any other
   * death; a master that waits for it at its end waits no longer. */
  for (;;)
    {
      do
        got = waitpid (c->child, &status, WNOHANG);
      while (got < 0 && errno == EINTR);
      if (got != 0)
        break;
      if (child_said_done (c))
        {
          g_array_append_val (l->exiting, c->child);
          c->child = 0;
          close (c->report);
          c->report = -1;
          datc_journal_rewrite_take_written (c->rewrite, &c->error);
          return TRUE;
        }
      if (g_get_monotonic_time () >= c->child_deadline)
        {
          kill (c->child, SIGKILL);
          c->child_deadline = G_MAXINT64;
          continue;
        }
      if (!block)
        return FALSE;
      wait_child_until (l, c->child, c->said == NULL ? c->report : -1, c->child_deadline);
    }
  pid_t pid = c->child;
  c->child = 0;
  if (got > 0 && WIFEXITED (status) && WEXITSTATUS (status) == 0)
    datc_journal_rewrite_take_written (c->rewrite, &c->error);
  else if (got < 0)
    g_set_error (&c->error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO,
                 "waiting for the compaction's process %d: %s", (int) pid, g_strerror (errno));
  else if (WIFSIGNALED (status))
    g_set_error (&c->error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO,
                 "the compaction's process %d was killed by signal %d (%s)", (int) pid,
                 WTERMSIG (status), g_strsignal (WTERMSIG (status)));
  else
    {
      char msg[COMPACT_REPORT_MAX + 1];
      gsize n = c->said_len;
      if (n > 0)
        memcpy (msg, c->said, n);
      ssize_t more = read (c->report, msg + n, COMPACT_REPORT_MAX - n);
      n += more > 0 ? (gsize) more : 0;
      msg[n] = '\0';
      if (n > 0)
        g_set_error (&c->error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s", msg);
      else
        g_set_error (&c->error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO,
                     "the compaction's process %d failed (status %d) without saying why", (int) pid,
                     WIFEXITED (status) ? WEXITSTATUS (status) : status);
    }
  close (c->report);
  c->report = -1;
  return TRUE;
}

static char
test_kill_at (void)
{
  const char *at = g_getenv ("DATC_TEST_COMPACT_KILL_AT");
  if (at == NULL)
    return 0;
  return g_str_equal (at, "written")   ? 'w'
         : g_str_equal (at, "child")   ? 'c'
         : g_str_equal (at, "stopped") ? 's'
         : g_str_equal (at, "exiting") ? 'x'
                                       : 0;
}

/* Starts the writer (nothing pending: right after a commit): a child
 * forked from here, or when fork fails the snapshot framed here and a
 * thread for the rest.  The loop's thread is held for the fork: the
 * master's page tables copied, not its memory. */
static gboolean
compact_start (DatcLedger *l, GError **error)
{
  gint64 t0 = g_get_monotonic_time ();
  g_autoptr (DatcJournalRewrite) w = datc_journal_rewrite_new (l->journal, error);
  if (w == NULL)
    return FALSE;
  int fds[2];
  if (pipe2 (fds, O_CLOEXEC | O_NONBLOCK) < 0)
    {
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO,
                   "a pipe for the compaction's process: %s", g_strerror (errno));
      return FALSE;
    }
  Compaction *c = g_new0 (Compaction, 1);
  c->report = -1;
  c->time_us = g_get_real_time ();
  c->from_bytes = datc_journal_size (l->journal);
  c->rewrite = g_steal_pointer (&w);
  c->results_path = g_strdup (datc_results_file_path (l->results));
  c->results_len = datc_results_file_written (l->results);
  c->step = l->options.compact_step_bytes ? l->options.compact_step_bytes
                                          : DATC_LEDGER_COMPACT_STEP_BYTES;
  c->kill_at = test_kill_at ();
  c->master = getpid ();
  /* The error domains the child may use: their first use takes a lock
   * (GLib's quark table) that another thread could hold at the fork. */
  (void) DATC_LEDGER_ERROR;
  (void) DATC_JOURNAL_ERROR;

  /* DATC_TEST_COMPACT_NO_FORK: the tests' way to a refused fork. */
  gint64 f0 = g_get_monotonic_time ();
  pid_t pid = g_getenv ("DATC_TEST_COMPACT_NO_FORK") != NULL ? (errno = EAGAIN, -1) : fork ();
  int errsv = errno;
  if (pid == 0)
    compact_child (l, c, fds[1]);
  l->jinfo.fork_max_us = MAX (l->jinfo.fork_max_us, g_get_monotonic_time () - f0);
  close (fds[1]);
  if (pid > 0)
    {
      c->child = pid;
      c->report = fds[0];
      c->child_deadline
          = g_get_monotonic_time ()
            + (COMPACT_CHILD_MIN_S + (gint64) (l->n_tasks / 1000000) * 10) * G_USEC_PER_SEC;
    }
  else
    {
      close (fds[0]);
      c->master = 0;
      g_printerr ("datc: cannot fork to compact the journal (%s): the loop takes its snapshot "
                  "itself\n",
                  g_strerror (errsv));
      compact_snapshot (l, c->rewrite, c->time_us, c->from_bytes, NULL);
      c->writer = g_thread_new ("datc-compact", compact_writer, c);
    }
  l->compaction = c;
  l->jinfo.compacting = TRUE;
  note_pause (l, t0);
  return TRUE;
}

/* Puts the written checkpoint in place, behind the records committed
 * since the snapshot: those are copied a slice per call (one per commit)
 * until a slice or less is left, then the switch copies the rest (all at
 * once with `wait`).  A failure before the switch costs nothing but the
 * compaction (said, and tried again later); after it, the journal's name
 * may not be durable, so it is a commit failure. */
static gboolean
compact_finish (DatcLedger *l, gboolean wait, GError **error)
{
  Compaction *c = l->compaction;
  g_autoptr (GError) local = NULL;
  gboolean ok;
  guint64 slice = l->options.compact_slice_bytes ? l->options.compact_slice_bytes
                                                 : DATC_LEDGER_COMPACT_SLICE_BYTES;

  compact_ended (l, c, TRUE); /* at once after a tick; datc_ledger_compact's wait */
  gint64 t0 = g_get_monotonic_time ();
  if (c->error == NULL && !wait && datc_journal_rewrite_behind (l->journal, c->rewrite) > slice)
    {
      datc_journal_rewrite_catch_up (l->journal, c->rewrite, slice, &c->error);
      note_pause (l, t0);
      if (c->error == NULL)
        return TRUE;
    }
  l->compaction = NULL;
  guint64 checkpoint = 0;
  if (c->error != NULL)
    ok = FALSE, local = g_steal_pointer (&c->error);
  else
    {
      guint64 before = datc_journal_size (l->journal);
      ok = datc_journal_rewrite_finish (l->journal, c->rewrite, &local);
      checkpoint = datc_journal_size (l->journal) - (before - c->from_bytes);
    }
  if (ok)
    {
      l->jinfo.checkpoint_bytes = checkpoint;
      l->jinfo.compacted_from = c->from_bytes;
      l->jinfo.last_compaction_us = c->time_us;
      l->jinfo.compactions++;
    }
  else if (g_error_matches (local, DATC_JOURNAL_ERROR, DATC_JOURNAL_ERROR_SWITCHED))
    {
      l->jinfo.compacting = FALSE;
      compaction_free (c);
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  else
    {
      g_printerr ("datc: compacting the journal failed (it goes on uncompacted): %s\n",
                  local->message);
      /* Not again before it has grown as much once more. */
      l->jinfo.checkpoint_bytes = datc_journal_size (l->journal);
    }
  /* Only now: `datc status` is answered during the switch (its syncs
   * wait through the owner) and says "compacting now" until it is done. */
  l->jinfo.compacting = FALSE;
  compaction_free (c);
  note_pause (l, t0);
  return TRUE;
}

static gboolean
compact_due (DatcLedger *l)
{
  guint64 min
      = l->options.compact_min_bytes ? l->options.compact_min_bytes : DATC_LEDGER_COMPACT_MIN_BYTES;
  guint factor = l->options.compact_factor ? l->options.compact_factor : DATC_LEDGER_COMPACT_FACTOR;
  guint64 size = datc_journal_size (l->journal);
  return size >= min && size / factor >= l->jinfo.checkpoint_bytes;
}

/* After every commit: finish a compaction whose writer is done, or start
 * one when the journal has outgrown its last checkpoint. */
static gboolean
compact_tick (DatcLedger *l, GError **error)
{
  if (l->exiting->len > 0)
    compact_reap (l, FALSE);
  if (l->compaction != NULL)
    return !compact_ended (l, l->compaction, FALSE) || compact_finish (l, FALSE, error);
  if (datc_journal_pending (l->journal) > 0 || !compact_due (l))
    return TRUE;
  g_autoptr (GError) local = NULL;
  if (!compact_start (l, &local))
    {
      g_printerr ("datc: compacting the journal failed (it goes on uncompacted): %s\n",
                  local->message);
      l->jinfo.checkpoint_bytes = datc_journal_size (l->journal);
    }
  return TRUE;
}

gboolean
datc_ledger_finish_compaction (DatcLedger *l, GError **error)
{
  if (l->compaction == NULL)
    return TRUE;
  if (!datc_ledger_commit (l, error))
    return FALSE;
  return l->compaction == NULL || compact_finish (l, TRUE, error);
}

gboolean
datc_ledger_compact (DatcLedger *l, gboolean wait, GError **error)
{
  g_return_val_if_fail (l->journal != NULL && l->results != NULL, FALSE);
  if (l->compaction == NULL)
    {
      if (!datc_ledger_commit (l, error))
        return FALSE;
      if (l->compaction == NULL && !compact_start (l, error))
        return FALSE;
    }
  if (!wait)
    return TRUE;
  return compact_finish (l, TRUE, error);
}

void
datc_ledger_set_sync_wait (DatcLedger *l, DatcJournalWaitFunc wait, gpointer user_data)
{
  l->wait = wait;
  l->wait_data = user_data;
  datc_journal_set_sync_wait (l->journal, wait, user_data);
  if (l->results != NULL)
    datc_results_file_set_write_wait (l->results, wait, user_data);
}

void
datc_ledger_journal_info (DatcLedger *l, DatcLedgerJournalInfo *info)
{
  *info = l->jinfo;
  /* Read-only (an offline status): what was scanned. */
  info->bytes = l->journal != NULL ? datc_journal_size (l->journal) : l->replayed_bytes;
}
