/* ledger.c: task state, its journal records, results.jsonl and outputs/.
 *
 * Every public mutator builds a journal record and then calls the same
 * apply_* function that replay calls, so live operation and recovery can
 * not drift apart.  Records are msgpack arrays whose first element is the
 * record type (enum RecordType); they are our own data but are still
 * shape-checked on replay, because a checksum only proves the bytes are the
 * ones we wrote, not that an older datc wrote the same shapes.
 *
 * Which queued task goes next is taskqueue.c's business (per partition in
 * static mode); the ledger tells it about every change to the queued
 * state. */
#include "ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "journal.h"
#include "jsonout.h"
#include "taskqueue.h"

G_DEFINE_QUARK (datc-ledger-error-quark, datc_ledger_error)

enum RecordType {
  REC_START = 1,    /* [1, epoch, time_us] */
  REC_AGENT = 2,    /* [2, idx, agent_id, site, proxy, host] */
  REC_DISPATCH = 3, /* [3, agent, time_us, [id, attempt, ...]] */
  REC_RESULT = 4,   /* [4, id, attempt, agent, final, status, exit, signal, started,
                        finished, out_off, out_len, err_off, err_len, out_dropped,
                        err_dropped, message|nil(, class, oom_evidence|nil)]: the last
                        two since results have a class; without them (an older
                        journal) the class follows from the status */
  REC_REQUEUE = 5,  /* [5, id, lost(bool)] */
  REC_SOURCE = 7,   /* [7, index, path, sha256, first_id, count, submitted_us, format,
                        data|nil]: data holds submitted tasks; the task file is nil */
  REC_PROXY = 8,    /* [8, site, proxy, job_id, event, time_us] */
  REC_CANCEL = 9,   /* [9, time_us, [id, ...] | nil (all)] */
  REC_RETRY = 10,   /* [10, time_us]: cancelled tasks go back to the queue */
  REC_ORPHANS = 11, /* [11, deadline_us, [id, attempt, ...]]: tasks running when the last
                       master died stay bound to their agents until the deadline */
  REC_AGENT_GONE = 12, /* [12, idx]: the agent left or was lost; its index is free */
  REC_REPLICATE = 13,  /* [13, agent, time_us, id, attempt]: one more copy of a running task */
  REC_COPY_END = 14,   /* [14, id, attempt]: one copy of a replicated task ended unrecorded
                          while another still runs */
};

#define RESULT_FIELDS 18  /* after the type */
#define RESULT_FIELDS_OLD 16

typedef struct {
  guint32 agent;      /* when running */
  guint32 attempt;    /* the open (or last) attempt, as wide as the wire's; 0: never
                       * dispatched */
  guint8 state;       /* DatcTaskState */
  guint8 crashes;
  guint8 failures;
  guint8 bound : 1;    /* queued, but bound to a proxy (direct mode, `binders`): not in
                        * the queue */
  guint8 orphan : 1;  /* running when the last master died, its agent not back yet */
  guint8 replicated : 1; /* running as copies: their agents and attempts are in `replicas` */
  guint16 site;       /* the site of the agent its last attempt went to (site_names); 0: none */
} TaskSlot;

typedef struct {
  gchar *agent_id, *site, *proxy, *host;
  gchar *output_name;  /* "outputs/<agent_id>.out", relative to the dir */
  int out_fd;          /* -1 until first written */
  guint64 out_size;
  gboolean out_dirty;  /* written since the last commit: in dirty_outputs */
  gboolean gone;       /* left: freed (and its index reused) once its output is committed */
  gboolean awaited;    /* known to the last master, not back since this one started */
  guint32 idx;
  gint64 walltime_end_us; /* as its HELLO said, 0: none (not journaled) */
} AgentInfo;

/* Tasks an earlier master left running, kept for their agents until
 * `deadline_us` (real time, journaled: a second crash does not extend it). */
typedef struct {
  gint64 deadline_us;
  GArray *keys;        /* DatcTaskKey */
} OrphanWindow;

typedef struct {
  gchar *path, *sha256;
  guint64 first_id, count;
  gint64 submitted_us;
} SourceInfo;

/* Direct mode: the task a proxy was submitted for.  Its task stays
 * reserved (TaskSlot.bound, in `binders`) until the proxy's agent takes it
 * or it moves on (cancelled); the binding itself stays until the proxy
 * ends, so what it was for can still be told. */
typedef struct {
  guint64 id;
  gboolean taken;      /* its agent asked for its task (and got it, or it had moved on) */
} Binding;

/* One live attempt of a replicated task.  Times are milliseconds of the
 * real clock modulo 2^32: differences stay right for runs under 49 days. */
typedef struct {
  guint32 agent, attempt;
  guint32 since_ms;    /* its dispatch */
} Copy;

struct DatcLedger {
  gchar *dir;
  DatcBag *bag;
  DatcJournal *journal;
  DatcLedgerOptions options;
  TaskSlot *tasks;          /* index id - 1 */
  guint64 n_tasks;
  DatcLedgerCounts counts;
  DatcTaskQueue *queue;     /* which queued task goes next */
  GHashTable *bindings;     /* direct mode: "site\tproxy" -> Binding*, from its submit to its
                             * end: the one record of which task a proxy is for */
  GHashTable *binders;      /* id -> the Binding* its task is reserved for: exactly the tasks
                             * with `bound` set */
  guint32 *runtimes;        /* histogram of observed run times (see runtime_bucket) */
  guint64 runtimes_n;
  guint64 runtime_est_ms;   /* its 90th percentile, once there are enough */
  GHashTable *running;      /* id -> dispatch time (Copy.since_ms) of running tasks: the
                             * end game looks only at these, never at the whole bag */
  GHashTable *replicas;     /* id -> GArray of Copy: tasks running as more than one copy */
  GPtrArray *agents;        /* AgentInfo* by index; NULL: free */
  GArray *attempts_on;      /* guint32 by agent index: its live attempts (attempts_add) */
  GArray *free_agents;      /* guint32 indices of departed agents, reused first */
  guint live_agents;        /* non-NULL entries of agents */
  guint awaited;            /* agents with `awaited` set */
  GPtrArray *windows;       /* OrphanWindow*, oldest first */
  guint64 orphans;          /* tasks with `orphan` set */
  GHashTable *agent_index;  /* agent_id -> index + 1 */
  GPtrArray *site_names;    /* gchar*, the sites tasks went to; [0] is none */
  GHashTable *site_ids;     /* site -> its index in site_names */
  GHashTable *proxies_seen; /* "site\nproxy" of every agent that said HELLO */
  GPtrArray *sources;       /* SourceInfo* */
  GHashTable *proxies;      /* "site\tproxy" -> job_id, open ones */
  GHashTable *submits;      /* "site\tid" -> k, submissions whose outcome is not journaled */
  int results_fd;
  GString *line;            /* scratch for a results line */
  GString *results_out;     /* lines waiting for their journal commit */
  GArray *pick;             /* scratch: ids picked by dispatch */
  GArray *deferred;         /* scratch: ids that did not fit */
  GArray *dirty_outputs;    /* guint32 agents whose output file needs a sync */
  gchar *sync_failed;       /* an output file's fdatasync failed: no commit after it */
  gboolean replaying;
  gboolean filter_results;  /* a retry record was seen: drop superseded lines */
};

/* ---- small helpers ------------------------------------------------- */

static int
gba_write (void *data, const char *buf, size_t len)
{
  g_byte_array_append ((GByteArray *) data, (const guint8 *) buf, len);
  return 0;
}

/* Starts a journal record: a msgpack array of `length` elements whose
 * first is the record type; the caller packs the rest and calls
 * datc_journal_end(). */
static void
record_begin (DatcLedger *l, msgpack_packer *pk, enum RecordType type, guint length)
{
  GByteArray *buf = datc_journal_begin (l->journal);
  msgpack_packer_init (pk, buf, gba_write);
  msgpack_pack_array (pk, length);
  msgpack_pack_uint8 (pk, (guint8) type);
}

static void
pack_str (msgpack_packer *pk, const char *s)
{
  if (s == NULL)
    {
      msgpack_pack_nil (pk);
      return;
    }
  size_t len = strlen (s);
  msgpack_pack_str (pk, len);
  msgpack_pack_str_body (pk, s, len);
}

static void
agent_info_free (gpointer p)
{
  AgentInfo *a = p;
  if (a->out_fd >= 0)
    close (a->out_fd);
  g_free (a->agent_id);
  g_free (a->site);
  g_free (a->proxy);
  g_free (a->host);
  g_free (a->output_name);
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

/* Observed run times, for tasks without est_runtime: a histogram with four
 * buckets per power of two of milliseconds (a quantile is then known to
 * within 19 %), from which the 90th percentile is the estimate once
 * RUNTIME_MIN_SAMPLES tasks have run. */
#define RUNTIME_BUCKETS (4 * 42)
#define RUNTIME_MIN_SAMPLES 20

static guint
runtime_bucket (guint64 ms)
{
  if (ms < 1)
    return 0;
  guint e = (guint) g_bit_storage (ms) - 1;          /* 2^e <= ms < 2^(e+1) */
  guint sub = e >= 2 ? (guint) ((ms >> (e - 2)) & 3) : (guint) ((ms << (2 - e)) & 3);
  return MIN (RUNTIME_BUCKETS - 1, 4 * e + sub);
}

/* The largest duration of bucket b (so an estimate errs long, not short). */
static guint64
runtime_bucket_top (guint b)
{
  guint e = b / 4, sub = b % 4;
  if (e >= 2)
    return ((4ull + sub + 1) << (e - 2)) - 1;
  return MAX (1u, ((4u + sub + 1) >> (2 - e)));
}

static void
note_runtime (DatcLedger *l, gint64 started_us, gint64 finished_us)
{
  if (started_us <= 0 || finished_us < started_us)
    return;
  l->runtimes[runtime_bucket ((guint64) (finished_us - started_us) / 1000u)]++;
  l->runtimes_n++;
  /* Recomputed on every 16th sample: cheap, and fresh enough. */
  if (l->runtimes_n < RUNTIME_MIN_SAMPLES || l->runtimes_n % 16 != 4)
    return;
  guint64 want = (l->runtimes_n * 9 + 9) / 10, seen = 0;
  for (guint b = 0; b < RUNTIME_BUCKETS; b++)
    if ((seen += l->runtimes[b]) >= want)
      {
        l->runtime_est_ms = runtime_bucket_top (b);
        break;
      }
}

static guint64 *
count_for (DatcLedger *l, guint8 state)
{
  switch ((DatcTaskState) state)
    {
    case DATC_TASK_QUEUED: return &l->counts.queued;
    case DATC_TASK_RUNNING: return &l->counts.running;
    case DATC_TASK_DONE: return &l->counts.done;
    case DATC_TASK_FAILED: return &l->counts.failed;
    case DATC_TASK_CANCELLED: return &l->counts.cancelled;
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
attempts_add (DatcLedger *l, guint32 agent, gint delta)
{
  if (agent > AGENT_INDEX_MAX)
    return;
  if (agent >= l->attempts_on->len)
    g_array_set_size (l->attempts_on, agent + 1);
  guint32 *n = &g_array_index (l->attempts_on, guint32, agent);
  g_return_if_fail (delta > 0 || *n > 0);
  *n += delta;
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
      t->orphan = FALSE;  /* it moved on: no longer waiting for its agent */
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
            attempts_add (l, g_array_index (copies, Copy, i).agent, -1);
          g_hash_table_remove (l->replicas, TASK_KEY (id));
          t->replicated = FALSE;
        }
      else
        attempts_add (l, t->agent, -1);
    }
  if (t->bound && state != DATC_TASK_QUEUED)
    {
      t->bound = FALSE;   /* its proxy's binding is void: the task moved on */
      g_hash_table_remove (l->binders, TASK_KEY (id));
    }
  t->state = state;
  (*count_for (l, t->state))++;
  if (state == DATC_TASK_QUEUED)
    datc_task_queue_count (l->queue, id, +1);
  if (state == DATC_TASK_RUNNING && !was_running)
    attempts_add (l, t->agent, +1);
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

typedef struct {
  guint64 id;
  guint32 attempt, agent;
  gboolean final;
  guint status;
  gint64 exit_code, signal, started, finished;
  guint64 out_off, out_len, err_off, err_len, out_dropped, err_dropped;
  const char *message;
  DatcEndClass end_class;
  const char *oom_evidence;
} ResultRec;

static const char *const end_class_names[DATC_END_N] = {
  [DATC_END_EXIT] = "exit",          [DATC_END_SIGNAL] = "signal",
  [DATC_END_TIMEOUT] = "timeout",    [DATC_END_WALLTIME] = "walltime",
  [DATC_END_OOM] = "oom",            [DATC_END_LOST] = "lost",
  [DATC_END_SPAWN_FAILED] = "spawn_failed", [DATC_END_CANCELLED] = "cancelled",
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
    case DATC_STATUS_EXITED: return DATC_END_EXIT;
    case DATC_STATUS_SIGNALED:
      return signal == SIGKILL && oom_evidence != NULL ? DATC_END_OOM : DATC_END_SIGNAL;
    case DATC_STATUS_TIMEOUT: return DATC_END_TIMEOUT;
    case DATC_STATUS_SPAWN_FAILED: return DATC_END_SPAWN_FAILED;
    case DATC_STATUS_CANCELLED: return DATC_END_CANCELLED;
    case DATC_STATUS_DRAINED: return DATC_END_WALLTIME;
    case DATC_STATUS_REFUSED: return DATC_END_REFUSED;
    case DATC_STATUS_LOST: return walltime ? DATC_END_WALLTIME : DATC_END_LOST;
    default: return DATC_END_N;
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

static gboolean write_results (DatcLedger *l, GError **error);
static void drop_copies_of_agents (DatcLedger *l, guint32 idx, const char *site,
                                   const char *proxy);
static void journal_requeue (DatcLedger *l, guint64 id, gboolean lost);
static void journal_agent_gone (DatcLedger *l, guint32 agent);
static void open_orphan_window (DatcLedger *l);

/* Decimal integers without printf: a results line holds ten of them and
 * the master writes one line per finished task. */
static void
append_u64 (GString *s, guint64 v)
{
  char buf[20];
  guint i = sizeof buf;
  do
    buf[--i] = (char) ('0' + v % 10);
  while ((v /= 10) != 0);
  g_string_append_len (s, buf + i, (gssize) (sizeof buf - i));
}

static void
append_i64 (GString *s, gint64 v)
{
  if (v < 0)
    {
      g_string_append_c (s, '-');
      append_u64 (s, (guint64) 0 - (guint64) v);
    }
  else
    append_u64 (s, (guint64) v);
}

/* `,"name":` then the value. */
static void
append_member_u64 (GString *s, const char *name, guint64 v)
{
  g_string_append (s, name);
  append_u64 (s, v);
}

static void
append_member_i64 (GString *s, const char *name, gint64 v)
{
  g_string_append (s, name);
  append_i64 (s, v);
}

static void
write_result_line (DatcLedger *l, const ResultRec *r)
{
  const DatcBagTask *bt = datc_bag_get (l->bag, r->id);
  const SourceInfo *src = bt->source < l->sources->len ? l->sources->pdata[bt->source] : NULL;
  const AgentInfo *a = r->agent < l->agents->len ? l->agents->pdata[r->agent] : NULL;
  GString *s = l->line;

  g_string_truncate (s, 0);
  append_member_u64 (s, "{\"id\":", r->id);
  append_member_u64 (s, ",\"line\":", bt->line);
  append_member_u64 (s, ",\"attempt\":", r->attempt);
  g_string_append (s, ",\"status\":\"");
  g_string_append (s, status_name (r->status));
  g_string_append (s, "\",\"class\":\"");
  g_string_append (s, datc_end_class_name (r->end_class));
  append_member_i64 (s, "\",\"exit_code\":", r->exit_code);
  append_member_i64 (s, ",\"signal\":", r->signal);
  g_string_append (s, ",\"site\":");
  datc_json_append_string (s, a ? a->site : "");
  g_string_append (s, ",\"proxy\":");
  datc_json_append_string (s, a ? a->proxy : "");
  g_string_append (s, ",\"host\":");
  datc_json_append_string (s, a ? a->host : "");
  g_string_append (s, ",\"agent\":");
  datc_json_append_string (s, a ? a->agent_id : "");
  append_member_i64 (s, ",\"submitted\":", src ? src->submitted_us : 0);
  append_member_i64 (s, ",\"started\":", r->started);
  append_member_i64 (s, ",\"finished\":", r->finished);
  g_string_append (s, ",\"output\":");
  datc_json_append_string (s, a ? a->output_name : "");
  append_member_u64 (s, ",\"stdout_offset\":", r->out_off);
  append_member_u64 (s, ",\"stdout_bytes\":", r->out_len);
  append_member_u64 (s, ",\"stderr_offset\":", r->err_off);
  append_member_u64 (s, ",\"stderr_bytes\":", r->err_len);
  append_member_u64 (s, ",\"stdout_dropped\":", r->out_dropped);
  append_member_u64 (s, ",\"stderr_dropped\":", r->err_dropped);
  if (r->message != NULL)
    {
      g_string_append (s, ",\"message\":");
      datc_json_append_string (s, r->message);
    }
  if (r->oom_evidence != NULL)
    {
      g_string_append (s, ",\"oom_evidence\":");
      datc_json_append_string (s, r->oom_evidence);
    }
  g_string_append (s, "}\n");
  if (l->options.read_only)
    return;
  g_string_append_len (l->results_out, s->str, (gssize) s->len);
  /* During replay the records are durable already: stream them out. */
  if (l->replaying && l->results_out->len > (1u << 20))
    write_results (l, NULL);
}

/* Lines are written only after the journal records behind them are
 * durable, so results.jsonl never shows a result a crash could take back.
 * A write that fails part way (a full disk) keeps only what did not reach
 * the file: the next attempt goes on from there and completes the torn
 * line, where writing the whole buffer again would repeat its start. */
static gboolean
write_results (DatcLedger *l, GError **error)
{
  gsize done = 0;
  while (done < l->results_out->len)
    {
      ssize_t w = write (l->results_fd, l->results_out->str + done, l->results_out->len - done);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0)
        {
          int errsv = errno;
          g_string_erase (l->results_out, 0, (gssize) done);
          g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s/results.jsonl: %s",
                       l->dir, g_strerror (errsv));
          return FALSE;
        }
      done += (gsize) w;
    }
  g_string_truncate (l->results_out, 0);
  return TRUE;
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
apply_agent (DatcLedger *l, guint32 idx, const char *agent_id, const char *site,
             const char *proxy, const char *host)
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
  a->output_name = g_strdup_printf ("outputs/%s.out", agent_id);
  a->out_fd = -1;
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
      if (t == NULL || t->state != DATC_TASK_RUNNING || t->attempt != keys[i].attempt
          || t->orphan)
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
  gpointer v = g_hash_table_lookup (l->site_ids, a->site);
  if (v != NULL)
    return (guint16) GPOINTER_TO_UINT (v);
  if (l->site_names->len > G_MAXUINT16)
    return 0;
  guint16 id = (guint16) l->site_names->len;
  g_ptr_array_add (l->site_names, g_strdup (a->site));
  g_hash_table_insert (l->site_ids, l->site_names->pdata[id], GUINT_TO_POINTER (id));
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
      attempts_add (l, t->agent, -1);
      attempts_add (l, agent, +1);
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
  attempts_add (l, agent, +1);
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
        attempts_add (l, g_array_index (copies, Copy, i).agent, -1);
        g_array_remove_index (copies, i);
        break;
      }
  if (copies->len == 0)
    requeue_slot (l, id, t);
}

/* Copies on agent `idx` end (their agent is gone), or, when `idx` is
 * G_MAXUINT32, the copies of tasks waiting for re-attach that are on
 * agents of (site, proxy) (that proxy ended).  A task left without a copy
 * goes back to the queue.  Scans only the replicated tasks. */
static void
drop_copies_of_agents (DatcLedger *l, guint32 idx, const char *site, const char *proxy)
{
  if (g_hash_table_size (l->replicas) == 0)
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
              attempts_add (l, agent, -1);
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
apply_result (DatcLedger *l, const ResultRec *r)
{
  TaskSlot *t = slot (l, r->id);
  if (t == NULL || is_final (t))
    return;
  if (r->status == DATC_STATUS_EXITED)
    note_runtime (l, r->started, r->finished);
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
  l->tasks = g_renew (TaskSlot, l->tasks, n);
  memset (l->tasks + l->n_tasks, 0, (n - l->n_tasks) * sizeof (TaskSlot));
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
  ResultRec rr = {
    .id = id, .attempt = t->attempt,
    .agent = t->state == DATC_TASK_RUNNING ? t->agent : G_MAXUINT32,
    .final = TRUE, .status = DATC_STATUS_CANCELLED, .exit_code = -1,
    .finished = when, .message = "cancelled by the user", .end_class = DATC_END_CANCELLED,
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

typedef struct {
  const msgpack_object *items;
  guint32 n;
  GError **error;
  const char *what;
} Rec;

static gboolean
rec_fail (Rec *r, const char *why, guint32 i)
{
  g_set_error (r->error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_CORRUPT,
               "%s record: field %u: %s", r->what, i, why);
  return FALSE;
}

static gboolean
rec_u64 (Rec *r, guint32 i, guint64 *out)
{
  if (i >= r->n || r->items[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
    return rec_fail (r, "expected an unsigned integer", i);
  *out = r->items[i].via.u64;
  return TRUE;
}

static gboolean
rec_i64 (Rec *r, guint32 i, gint64 *out)
{
  if (i < r->n && r->items[i].type == MSGPACK_OBJECT_POSITIVE_INTEGER
      && r->items[i].via.u64 <= G_MAXINT64)
    {
      *out = (gint64) r->items[i].via.u64;
      return TRUE;
    }
  if (i < r->n && r->items[i].type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
    {
      *out = r->items[i].via.i64;
      return TRUE;
    }
  return rec_fail (r, "expected an integer", i);
}

/* Returns a NUL-terminated copy (transfer full) or NULL for nil. */
static gboolean
rec_str (Rec *r, guint32 i, gboolean nullable, gchar **out)
{
  if (i < r->n && nullable && r->items[i].type == MSGPACK_OBJECT_NIL)
    {
      *out = NULL;
      return TRUE;
    }
  if (i >= r->n || r->items[i].type != MSGPACK_OBJECT_STR)
    return rec_fail (r, "expected a string", i);
  *out = g_strndup (r->items[i].via.str.ptr, r->items[i].via.str.size);
  return TRUE;
}

static gboolean
replay_record (const guint8 *payload, gsize len, gpointer user_data, GError **error)
{
  DatcLedger *l = user_data;
  msgpack_unpacked up;
  size_t off = 0;
  gboolean ok = FALSE;

  msgpack_unpacked_init (&up);
  if (msgpack_unpack_next (&up, (const char *) payload, len, &off) != MSGPACK_UNPACK_SUCCESS
      || off != len || up.data.type != MSGPACK_OBJECT_ARRAY || up.data.via.array.size < 1
      || up.data.via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
    {
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_CORRUPT,
                   "record is not a typed msgpack array");
      goto out;
    }
  Rec r = { up.data.via.array.ptr, up.data.via.array.size, error, "journal" };
  guint64 type = r.items[0].via.u64;

  switch (type)
    {
    case REC_START:
      ok = TRUE;
      break;
    case REC_AGENT:
      {
        guint64 idx;
        g_autofree gchar *id = NULL, *site = NULL, *proxy = NULL, *host = NULL;
        r.what = "agent";
        if (r.n != 6 || !rec_u64 (&r, 1, &idx) || !rec_str (&r, 2, FALSE, &id)
            || !rec_str (&r, 3, FALSE, &site) || !rec_str (&r, 4, FALSE, &proxy)
            || !rec_str (&r, 5, FALSE, &host))
          goto shape;
        if (idx > G_MAXUINT16 * 256u)
          goto shape;
        apply_agent (l, (guint32) idx, id, site, proxy, host);
        ok = TRUE;
        break;
      }
    case REC_DISPATCH:
      {
        guint64 agent;
        gint64 when;
        r.what = "dispatch";
        if (r.n != 4 || !rec_u64 (&r, 1, &agent) || !rec_i64 (&r, 2, &when)
            || r.items[3].type != MSGPACK_OBJECT_ARRAY
            || r.items[3].via.array.size % 2 != 0)
          goto shape;
        Rec keys = { r.items[3].via.array.ptr, r.items[3].via.array.size, error, "dispatch" };
        for (guint32 i = 0; i < keys.n; i += 2)
          {
            guint64 id, attempt;
            if (!rec_u64 (&keys, i, &id) || !rec_u64 (&keys, i + 1, &attempt))
              goto out;
            apply_dispatch (l, (guint32) agent, id, (guint32) attempt, when);
          }
        ok = TRUE;
        break;
      }
    case REC_REPLICATE:
      {
        guint64 agent, id, attempt;
        gint64 when;
        r.what = "replicate";
        if (r.n != 5 || !rec_u64 (&r, 1, &agent) || !rec_i64 (&r, 2, &when)
            || !rec_u64 (&r, 3, &id) || !rec_u64 (&r, 4, &attempt) || agent > G_MAXUINT32
            || attempt > G_MAXUINT32)
          goto shape;
        apply_replicate (l, (guint32) agent, id, (guint32) attempt, when);
        ok = TRUE;
        break;
      }
    case REC_COPY_END:
      {
        guint64 id, attempt;
        r.what = "copy end";
        if (r.n != 3 || !rec_u64 (&r, 1, &id) || !rec_u64 (&r, 2, &attempt)
            || attempt > G_MAXUINT32)
          goto shape;
        apply_copy_end (l, id, (guint32) attempt);
        ok = TRUE;
        break;
      }
    case REC_RESULT:
      {
        ResultRec rr = { 0 };
        guint64 v[6];
        g_autofree gchar *message = NULL, *oom_evidence = NULL;
        guint64 attempt, agent, status, end_class = DATC_END_N;
        r.what = "result";
        if ((r.n != RESULT_FIELDS + 1 && r.n != RESULT_FIELDS_OLD + 1) || !rec_u64 (&r, 1, &rr.id) || !rec_u64 (&r, 2, &attempt)
            || !rec_u64 (&r, 3, &agent) || r.items[4].type != MSGPACK_OBJECT_BOOLEAN
            || !rec_u64 (&r, 5, &status) || !rec_i64 (&r, 6, &rr.exit_code)
            || !rec_i64 (&r, 7, &rr.signal) || !rec_i64 (&r, 8, &rr.started)
            || !rec_i64 (&r, 9, &rr.finished))
          goto shape;
        for (guint32 i = 0; i < 6; i++)
          if (!rec_u64 (&r, 10 + i, &v[i]))
            goto out;
        if (!rec_str (&r, 16, TRUE, &message))
          goto out;
        if (r.n == RESULT_FIELDS + 1
            && (!rec_u64 (&r, 17, &end_class) || !rec_str (&r, 18, TRUE, &oom_evidence)))
          goto out;
        rr.attempt = (guint32) attempt;
        rr.agent = (guint32) agent;
        rr.final = r.items[4].via.boolean;
        rr.status = (guint) status;
        rr.out_off = v[0], rr.out_len = v[1], rr.err_off = v[2], rr.err_len = v[3];
        rr.out_dropped = v[4], rr.err_dropped = v[5];
        rr.message = message;
        rr.oom_evidence = oom_evidence;
        rr.end_class = end_class < DATC_END_N
                           ? (DatcEndClass) end_class
                           : end_class_of (rr.status, rr.signal, oom_evidence, FALSE);
        if (rr.id == 0 || rr.id > l->n_tasks)
          {
            g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_MISMATCH,
                         "result for task %" G_GUINT64_FORMAT " but the bag has %" G_GUINT64_FORMAT,
                         rr.id, l->n_tasks);
            goto out;
          }
        apply_result (l, &rr);
        ok = TRUE;
        break;
      }
    case REC_REQUEUE:
      {
        guint64 id;
        r.what = "requeue";
        if (r.n != 3 || !rec_u64 (&r, 1, &id) || r.items[2].type != MSGPACK_OBJECT_BOOLEAN)
          goto shape;
        apply_requeue (l, id, r.items[2].via.boolean);
        ok = TRUE;
        break;
      }
    case REC_SOURCE:
      {
        guint64 idx, first, count, format;
        gint64 when;
        g_autofree gchar *path = NULL, *sha = NULL;
        r.what = "source";
        if (r.n != 9 || !rec_u64 (&r, 1, &idx) || !rec_str (&r, 2, FALSE, &path)
            || !rec_str (&r, 3, FALSE, &sha) || !rec_u64 (&r, 4, &first)
            || !rec_u64 (&r, 5, &count) || !rec_i64 (&r, 6, &when) || !rec_u64 (&r, 7, &format)
            || (r.items[8].type != MSGPACK_OBJECT_NIL && r.items[8].type != MSGPACK_OBJECT_BIN))
          goto shape;
        if (idx != l->sources->len)
          goto shape;
        if (r.items[8].type == MSGPACK_OBJECT_BIN)
          {
            /* Tasks submitted to the campaign: they become part of the bag
             * again, with the same ids. */
            if (first != datc_bag_count (l->bag) + 1)
              {
                g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_CORRUPT,
                             "submitted tasks from %s should start at id %" G_GUINT64_FORMAT
                             ", not %" G_GUINT64_FORMAT,
                             path, datc_bag_count (l->bag) + 1, first);
                goto out;
              }
            if (!datc_bag_load_data (l->bag, path, r.items[8].via.bin.ptr, r.items[8].via.bin.size,
                                     (DatcTaskFileFormat) format, error))
              goto out;
            if (datc_bag_count (l->bag) != first + count - 1)
              {
                g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_CORRUPT,
                             "submitted tasks from %s: %" G_GUINT64_FORMAT " recorded, %"
                             G_GUINT64_FORMAT " read back", path, count,
                             datc_bag_count (l->bag) - first + 1);
                goto out;
              }
            grow_tasks (l, datc_bag_count (l->bag));
          }
        SourceInfo *s = g_new0 (SourceInfo, 1);
        s->path = g_steal_pointer (&path);
        s->sha256 = g_steal_pointer (&sha);
        s->first_id = first;
        s->count = count;
        s->submitted_us = when;
        g_ptr_array_add (l->sources, s);
        ok = TRUE;
        break;
      }
    case REC_PROXY:
      {
        gint64 when;
        g_autofree gchar *site = NULL, *proxy = NULL, *job = NULL, *event = NULL;
        r.what = "proxy";
        if (r.n != 6 || !rec_str (&r, 1, FALSE, &site) || !rec_str (&r, 2, FALSE, &proxy)
            || !rec_str (&r, 3, FALSE, &job) || !rec_str (&r, 4, FALSE, &event)
            || !rec_i64 (&r, 5, &when))
          goto shape;
        apply_proxy (l, site, proxy, job, event);
        ok = TRUE;
        break;
      }
    case REC_CANCEL:
      {
        gint64 when;
        r.what = "cancel";
        if (r.n != 3 || !rec_i64 (&r, 1, &when))
          goto shape;
        if (r.items[2].type == MSGPACK_OBJECT_NIL)
          apply_cancel (l, when, NULL, 0);
        else if (r.items[2].type == MSGPACK_OBJECT_ARRAY)
          {
            Rec ids = { r.items[2].via.array.ptr, r.items[2].via.array.size, error, "cancel" };
            for (guint32 i = 0; i < ids.n; i++)
              {
                guint64 id;
                if (!rec_u64 (&ids, i, &id))
                  goto out;
                apply_cancel (l, when, &id, 1);
              }
          }
        else
          goto shape;
        ok = TRUE;
        break;
      }
    case REC_ORPHANS:
      {
        gint64 deadline;
        r.what = "orphans";
        if (r.n != 3 || !rec_i64 (&r, 1, &deadline) || r.items[2].type != MSGPACK_OBJECT_ARRAY
            || r.items[2].via.array.size % 2 != 0)
          goto shape;
        Rec keys = { r.items[2].via.array.ptr, r.items[2].via.array.size, error, "orphans" };
        g_autoptr (GArray) k = g_array_sized_new (FALSE, FALSE, sizeof (DatcTaskKey), keys.n / 2);
        for (guint32 i = 0; i < keys.n; i += 2)
          {
            guint64 id, attempt;
            if (!rec_u64 (&keys, i, &id) || !rec_u64 (&keys, i + 1, &attempt)
                || attempt > G_MAXUINT32)
              goto shape;
            DatcTaskKey key = { id, (guint32) attempt };
            g_array_append_val (k, key);
          }
        apply_orphans (l, deadline, (const DatcTaskKey *) k->data, k->len);
        ok = TRUE;
        break;
      }
    case REC_AGENT_GONE:
      {
        guint64 idx;
        r.what = "agent gone";
        if (r.n != 2 || !rec_u64 (&r, 1, &idx) || idx > G_MAXUINT32)
          goto shape;
        apply_agent_gone (l, (guint32) idx);
        ok = TRUE;
        break;
      }
    case REC_RETRY:
      r.what = "retry";
      if (r.n != 2)
        goto shape;
      apply_retry (l);
      ok = TRUE;
      break;
    default:
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_CORRUPT,
                   "unknown record type %" G_GUINT64_FORMAT, type);
      goto out;
    }
  goto out;

shape:
  if (error != NULL && *error == NULL)
    g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_CORRUPT,
                 "%s record has the wrong shape", r.what);
out:
  msgpack_unpacked_destroy (&up);
  return ok;
}

/* ---- open / free --------------------------------------------------- */

static void
journal_source (DatcLedger *l, guint32 idx, const char *path, const char *sha,
                guint64 first, guint64 count, gint64 when, DatcTaskFileFormat format,
                const char *data, gsize len)
{
  msgpack_packer pk;
  record_begin (l, &pk, REC_SOURCE, 9);
  msgpack_pack_uint32 (&pk, idx);
  pack_str (&pk, path);
  pack_str (&pk, sha);
  msgpack_pack_uint64 (&pk, first);
  msgpack_pack_uint64 (&pk, count);
  msgpack_pack_int64 (&pk, when);
  msgpack_pack_uint8 (&pk, (guint8) format);
  if (data != NULL)
    {
      msgpack_pack_bin (&pk, len);
      msgpack_pack_bin_body (&pk, data, len);
    }
  else
    msgpack_pack_nil (&pk);
  datc_journal_end (l->journal);

  SourceInfo *s = g_new0 (SourceInfo, 1);
  s->path = g_strdup (path);
  s->sha256 = g_strdup (sha);
  s->first_id = first;
  s->count = count;
  s->submitted_us = when;
  g_ptr_array_add (l->sources, s);
}

/* After cancelled tasks were retried, results.jsonl (rebuilt in journal
 * order) holds "cancelled" lines that no longer say how those tasks ended.
 * Keep one line per final task: the cancelled one only for tasks that are
 * cancelled now, the other one otherwise. */
static gboolean
filter_results (DatcLedger *l, const char *tmp, GError **error)
{
  g_autofree gchar *out_path = g_strconcat (tmp, ".filtered", NULL);
  FILE *in = fopen (tmp, "re");
  int out = open (out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  g_autofree guint8 *kept = g_new0 (guint8, l->n_tasks + 1);
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  gboolean ok = in != NULL && out >= 0;

  while (ok && (n = getline (&line, &cap, in)) > 0)
    {
      guint64 id = 0;
      if (sscanf (line, "{\"id\":%" G_GUINT64_FORMAT ",", &id) != 1 || id == 0 || id > l->n_tasks)
        continue;
      TaskSlot *t = &l->tasks[id - 1];
      gboolean line_cancelled = strstr (line, "\"status\":\"cancelled\"") != NULL;
      if (!is_final (t) || kept[id] || line_cancelled != (t->state == DATC_TASK_CANCELLED))
        continue;
      kept[id] = 1;
      ok = write (out, line, (size_t) n) == n;
    }
  free (line);
  if (in != NULL)
    fclose (in);
  if (ok)
    ok = fsync (out) == 0 && rename (out_path, tmp) == 0;
  if (!ok)
    {
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s: %s", tmp,
                   g_strerror (errno));
      if (out >= 0)
        close (out);
      return FALSE;
    }
  /* Go on appending to the filtered file. */
  close (l->results_fd);
  l->results_fd = out;
  lseek (out, 0, SEEK_END);
  return TRUE;
}

DatcLedger *
datc_ledger_open (const char *dir, DatcBag *bag, const char *task_file,
                  const char *task_file_sha256, const DatcLedgerOptions *options,
                  GError **error)
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
  l->tasks = g_new0 (TaskSlot, l->n_tasks);
  l->counts.total = l->n_tasks;
  l->counts.queued = l->n_tasks;
  l->queue = datc_task_queue_new (is_dispatchable, l);
  for (guint64 id = 1; id <= l->n_tasks; id++)
    datc_task_queue_count (l->queue, id, +1);
  l->runtimes = g_new0 (guint32, RUNTIME_BUCKETS);
  l->running = g_hash_table_new (g_direct_hash, g_direct_equal);
  l->replicas = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL,
                                       (GDestroyNotify) g_array_unref);
  l->agents = g_ptr_array_new ();
  l->attempts_on = g_array_new (FALSE, TRUE, sizeof (guint32));
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
  l->line = g_string_sized_new (512);
  l->results_out = g_string_sized_new (1 << 16);
  l->results_fd = -1;
  l->pick = g_array_new (FALSE, FALSE, sizeof (guint32));
  l->deferred = g_array_new (FALSE, FALSE, sizeof (guint32));
  l->dirty_outputs = g_array_new (FALSE, FALSE, sizeof (guint32));

  if (l->options.read_only)
    {
      l->replaying = TRUE;
      gboolean ok = datc_journal_scan (journal_path, replay_record, l, NULL, error);
      l->replaying = FALSE;
      if (!ok)
        return NULL;
      for (guint64 id = 1; id <= l->n_tasks; id++)
        if (l->tasks[id - 1].state == DATC_TASK_RUNNING)
          set_state (l, &l->tasks[id - 1], DATC_TASK_QUEUED);
      return g_steal_pointer (&l);
    }

  if (g_mkdir_with_parents (outputs, 0700) != 0)
    {
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s: %s", outputs,
                   g_strerror (errno));
      return NULL;
    }
  l->results_fd = open (results_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (l->results_fd < 0)
    {
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s: %s", results_tmp,
                   g_strerror (errno));
      return NULL;
    }

  l->replaying = TRUE;
  l->journal = datc_journal_open (journal_path, replay_record, l, &rec, error);
  l->replaying = FALSE;
  if (l->journal == NULL)
    {
      g_prefix_error (error, "%s: ", journal_path);
      unlink (results_tmp);
      return NULL;
    }
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
                       "%s belongs to task file %s (sha256 %.12s…), not to %s (sha256 %.12s…)",
                       dir, s->path, s->sha256, task_file, task_file_sha256);
          unlink (results_tmp);
          return NULL;
        }
    }

  open_orphan_window (l);
  datc_task_queue_rewind (l->queue);

  /* Start record: marks each master incarnation in the journal. */
  {
    msgpack_packer pk;
    record_begin (l, &pk, REC_START, 3);
    msgpack_pack_uint64 (&pk, g_random_int ());
    msgpack_pack_int64 (&pk, g_get_real_time ());
    datc_journal_end (l->journal);
  }

  if (l->options.retry_cancelled && l->counts.cancelled > 0)
    {
      msgpack_packer pk;
      record_begin (l, &pk, REC_RETRY, 2);
      msgpack_pack_int64 (&pk, g_get_real_time ());
      datc_journal_end (l->journal);
      apply_retry (l);
    }

  if (!write_results (l, error))
    return NULL;
  if (l->filter_results && !filter_results (l, results_tmp, error))
    return NULL;
  if (fsync (l->results_fd) != 0 || rename (results_tmp, results_path) != 0)
    {
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s: %s", results_path,
                   g_strerror (errno));
      return NULL;
    }
  if (!datc_journal_commit (l->journal, error))
    return NULL;
  return g_steal_pointer (&l);
}

#define ORPHANS_PER_RECORD 65536u  /* ~1 MiB: far below DATC_JOURNAL_RECORD_MAX */

static void
journal_orphans (DatcLedger *l, gint64 deadline_us, const DatcTaskKey *keys, guint n)
{
  msgpack_packer pk;
  record_begin (l, &pk, REC_ORPHANS, 3);
  msgpack_pack_int64 (&pk, deadline_us);
  msgpack_pack_array (&pk, n * 2);
  for (guint i = 0; i < n; i++)
    {
      msgpack_pack_uint64 (&pk, keys[i].id);
      msgpack_pack_uint32 (&pk, keys[i].attempt);
    }
  datc_journal_end (l->journal);
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
  g_autofree gchar *sha = g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) data, len);
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

  msgpack_packer pk;
  record_begin (l, &pk, REC_CANCEL, 3);
  msgpack_pack_int64 (&pk, when);
  if (ids == NULL)
    msgpack_pack_nil (&pk);
  else
    {
      msgpack_pack_array (&pk, open_ids->len);
      for (guint i = 0; i < open_ids->len; i++)
        msgpack_pack_uint64 (&pk, g_array_index (open_ids, guint64, i));
    }
  datc_journal_end (l->journal);
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
  if (l->results_fd >= 0)
    close (l->results_fd);
  g_string_free (l->results_out, TRUE);
  datc_journal_free (l->journal);
  for (guint i = 0; i < l->agents->len; i++)
    if (l->agents->pdata[i] != NULL)
      agent_info_free (l->agents->pdata[i]);
  g_ptr_array_unref (l->agents);
  g_array_unref (l->attempts_on);
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
  g_string_free (l->line, TRUE);
  g_array_unref (l->pick);
  g_array_unref (l->deferred);
  g_array_unref (l->dirty_outputs);
  g_free (l->sync_failed);
  datc_task_queue_free (l->queue);
  g_free (l->runtimes);
  g_hash_table_unref (l->running);
  g_hash_table_unref (l->replicas);
  g_free (l->tasks);
  g_free (l->dir);
  g_free (l);
}

/* ---- queries ------------------------------------------------------- */

void
datc_ledger_counts (DatcLedger *l, DatcLedgerCounts *counts)
{
  *counts = l->counts;
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
  msgpack_packer pk;
  record_begin (l, &pk, REC_AGENT, 6);
  msgpack_pack_uint32 (&pk, idx);
  pack_str (&pk, agent_id);
  pack_str (&pk, site);
  pack_str (&pk, proxy);
  pack_str (&pk, host);
  datc_journal_end (l->journal);
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
  return l->runtime_est_ms;
}

/* Encodes the picked tasks (l->pick) into `frame` and journals one
 * dispatch record for all of them. */
static guint
dispatch_picked (DatcLedger *l, guint32 agent, guint32 session, GByteArray *frame)
{
  guint n = l->pick->len;
  if (n == 0)
    return 0;

  msgpack_packer pk;
  gint64 now = g_get_real_time ();
  record_begin (l, &pk, REC_DISPATCH, 4);
  msgpack_pack_uint32 (&pk, agent);
  msgpack_pack_int64 (&pk, now);
  msgpack_pack_array (&pk, n * 2);

  datc_tasks_encode_begin (frame, session, n);
  for (guint i = 0; i < n; i++)
    {
      guint32 tid = g_array_index (l->pick, guint32, i);
      TaskSlot *t = &l->tasks[tid - 1];
      guint32 attempt = t->attempt + 1u;
      const DatcBagTask *bt = datc_bag_get (l->bag, tid);
      const guint8 *spec = datc_bag_spec (l->bag, bt);

      msgpack_pack_uint32 (&pk, tid);
      msgpack_pack_uint32 (&pk, attempt);
      if (bt->kind == DATC_BAG_SPEC_LINE)
        datc_tasks_encode_add_line (frame, tid, attempt, (const char *) spec, bt->length);
      else
        datc_tasks_encode_add_spec (frame, tid, attempt, spec, bt->length);
      apply_dispatch (l, agent, tid, attempt, now);
    }
  datc_journal_end (l->journal);
  return n;
}

guint
datc_ledger_dispatch (DatcLedger *l, DatcDispatchRequest *req, GByteArray *frame)
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
  return dispatch_picked (l, req->agent, req->session, frame);
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
                            guint32 session, GByteArray *frame)
{
  g_autofree gchar *key = proxy_key (site, proxy);
  Binding *b = g_hash_table_lookup (l->bindings, key);
  if (b == NULL || b->taken)
    {
      /* A proxy of an earlier master (bindings are not journaled), or one
       * whose agent comes back for more: the next queued task. */
      DatcDispatchRequest req = {
        .agent = agent, .max = 1, .budget_ms = G_MAXUINT64, .session = session,
      };
      return datc_ledger_dispatch (l, &req, frame);
    }
  b->taken = TRUE;
  TaskSlot *t = bound_slot (l, b);
  if (t == NULL || t->state != DATC_TASK_QUEUED)
    return 0;
  unbind (l, b->id, t);
  guint32 id32 = (guint32) b->id;
  g_array_set_size (l->pick, 0);
  g_array_append_val (l->pick, id32);
  return dispatch_picked (l, agent, session, frame);
}

guint64
datc_ledger_unbound_queued (DatcLedger *l)
{
  guint64 bound = g_hash_table_size (l->binders);
  return l->counts.queued - MIN (bound, l->counts.queued);
}

guint64
datc_ledger_runtime_estimate_ms (DatcLedger *l)
{
  return l->runtime_est_ms;
}

/* ---- end-game replication ------------------------------------------ */

/* The observed run times as (middle of bucket, count), with the sums
 * above each bucket, so that E[T - e | T > e] costs a binary search per
 * running task (the end game asks at every loop turn while an agent has
 * a free slot). */
typedef struct {
  double mid[RUNTIME_BUCKETS];
  double n_above[RUNTIME_BUCKETS + 1];   /* runs in buckets b.. */
  double sum_above[RUNTIME_BUCKETS + 1]; /* their middles, summed */
} RunTimes;

static void
runtimes_prepare (const DatcLedger *l, RunTimes *rt)
{
  guint64 bottom = 0;
  for (guint b = 0; b < RUNTIME_BUCKETS; b++)
    {
      guint64 top = runtime_bucket_top (b);
      rt->mid[b] = (MIN (bottom, top) + top) / 2.0;
      bottom = top + 1;
    }
  rt->n_above[RUNTIME_BUCKETS] = rt->sum_above[RUNTIME_BUCKETS] = 0;
  for (guint b = RUNTIME_BUCKETS; b-- > 0;)
    {
      rt->n_above[b] = rt->n_above[b + 1] + l->runtimes[b];
      rt->sum_above[b] = rt->sum_above[b + 1] + l->runtimes[b] * rt->mid[b];
    }
}

/* A task is not copied before it has run this long: a short task a
 * little past every observed one is in flight (its elapsed counts from
 * dispatch: the trip to its agent, a wait behind prefetched tasks), not
 * straggling, and copying it would only start the same work twice. */
#define REPLICA_MIN_ELAPSED_MS 1000u

/* E[T - e | T > e] over the observed runs, in ms; G_MAXUINT64 when no
 * observed run lasted longer than e (a straggler: how much is left is
 * unknown, so a copy is worth it). */
static guint64
remaining_ms (const RunTimes *rt, guint64 e)
{
  /* The first bucket whose middle is past e (middles never decrease). */
  guint b = 0, hi = RUNTIME_BUCKETS;
  while (b < hi)
    {
      guint m = (b + hi) / 2;
      if (rt->mid[m] <= (double) e)
        b = m + 1;
      else
        hi = m;
    }
  if (rt->n_above[b] == 0)
    return G_MAXUINT64;
  return (guint64) (rt->sum_above[b] / rt->n_above[b] - (double) e);
}

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
  if (l->runtimes_n < RUNTIME_MIN_SAMPLES || max_copies < 2)
    return;
  RunTimes rt;
  runtimes_prepare (l, &rt);
  guint64 copy_ms = (guint64) (rt.sum_above[0] / rt.n_above[0]);
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
          guint32 since = copies != NULL ? g_array_index (copies, Copy, c).since_ms
                                         : GPOINTER_TO_UINT (v);
          guint64 elapsed = (guint32) (now - since);
          guint64 rem = remaining_ms (&rt, elapsed);
          if (c == 0 || rem < best_remaining)
            best_remaining = rem, best_elapsed = elapsed;
        }
      if (best_remaining <= copy_ms || best_elapsed < REPLICA_MIN_ELAPSED_MS)
        continue;
      DatcReplicaCandidate cand = {
        .id = id, .attempt = t->attempt, .copies = n, .elapsed_ms = best_elapsed,
        .remaining_ms = best_remaining, .copy_ms = copy_ms,
        .fit_ms = expected_ms (l, bt, FALSE),
      };
      g_array_append_val (out, cand);
    }
  if (out->len > first + 1)
    qsort (&g_array_index (out, DatcReplicaCandidate, first), out->len - first,
           sizeof (DatcReplicaCandidate), candidate_later_first);
}

guint
datc_ledger_replicate (DatcLedger *l, guint32 agent, guint64 id, guint32 session,
                       GByteArray *frame)
{
  TaskSlot *t = slot (l, id);
  if (t == NULL || t->state != DATC_TASK_RUNNING || live_on (l, id, t, agent, 0))
    return 0;
  guint32 attempt = t->attempt + 1u;
  gint64 now = g_get_real_time ();
  msgpack_packer pk;
  record_begin (l, &pk, REC_REPLICATE, 5);
  msgpack_pack_uint32 (&pk, agent);
  msgpack_pack_int64 (&pk, now);
  msgpack_pack_uint64 (&pk, id);
  msgpack_pack_uint32 (&pk, attempt);
  datc_journal_end (l->journal);

  const DatcBagTask *bt = datc_bag_get (l->bag, id);
  const guint8 *spec = datc_bag_spec (l->bag, bt);
  datc_tasks_encode_begin (frame, session, 1);
  if (bt->kind == DATC_BAG_SPEC_LINE)
    datc_tasks_encode_add_line (frame, id, attempt, (const char *) spec, bt->length);
  else
    datc_tasks_encode_add_spec (frame, id, attempt, spec, bt->length);
  apply_replicate (l, agent, id, attempt, now);
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
  msgpack_packer pk;
  gint64 now = g_get_real_time ();
  record_begin (l, &pk, REC_DISPATCH, 4);
  msgpack_pack_uint32 (&pk, agent);
  msgpack_pack_int64 (&pk, now);
  msgpack_pack_array (&pk, 2);
  msgpack_pack_uint64 (&pk, id);
  msgpack_pack_uint32 (&pk, attempt);
  datc_journal_end (l->journal);
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
  msgpack_packer pk;
  record_begin (l, &pk, REC_AGENT_GONE, 2);
  msgpack_pack_uint32 (&pk, agent);
  datc_journal_end (l->journal);
  apply_agent_gone (l, agent);
}

static gboolean
write_output (DatcLedger *l, guint32 agent, const DatcResult *res, ResultRec *rr,
              GError **error)
{
  AgentInfo *a = agent < l->agents->len ? l->agents->pdata[agent] : NULL;
  gsize out_len = res->out ? g_bytes_get_size (res->out) : 0;
  gsize err_len = res->err ? g_bytes_get_size (res->err) : 0;

  g_return_val_if_fail (a != NULL, FALSE);
  if (a->out_fd < 0)
    {
      g_autofree gchar *path = g_build_filename (l->dir, a->output_name, NULL);
      struct stat st;
      a->out_fd = open (path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      if (a->out_fd < 0 || fstat (a->out_fd, &st) != 0)
        {
          g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s: %s", path,
                       g_strerror (errno));
          return FALSE;
        }
      a->out_size = (guint64) st.st_size;
    }
  rr->out_off = a->out_size;
  rr->out_len = out_len;
  rr->err_off = a->out_size + out_len;
  rr->err_len = err_len;
  if (out_len + err_len == 0)
    return TRUE;

  struct iovec iov[2] = {
    { (void *) (out_len ? g_bytes_get_data (res->out, NULL) : NULL), out_len },
    { (void *) (err_len ? g_bytes_get_data (res->err, NULL) : NULL), err_len },
  };
  gsize total = out_len + err_len, done = 0;
  while (done < total)
    {
      ssize_t w;
      if (done < out_len)
        {
          struct iovec v[2] = { { (char *) iov[0].iov_base + done, out_len - done }, iov[1] };
          w = writev (a->out_fd, v, 2);
        }
      else
        w = write (a->out_fd, (const char *) iov[1].iov_base + (done - out_len), total - done);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0)
        {
          g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s/%s: %s", l->dir,
                       a->output_name, g_strerror (errno));
          return FALSE;
        }
      done += (gsize) w;
    }
  a->out_size += total;
  if (!a->out_dirty)
    {
      a->out_dirty = TRUE;
      g_array_append_val (l->dirty_outputs, agent);
    }
  return TRUE;
}

static void
journal_result (DatcLedger *l, const ResultRec *rr)
{
  msgpack_packer pk;
  record_begin (l, &pk, REC_RESULT, RESULT_FIELDS + 1);
  msgpack_pack_uint64 (&pk, rr->id);
  msgpack_pack_uint32 (&pk, rr->attempt);
  msgpack_pack_uint32 (&pk, rr->agent);
  if (rr->final)
    msgpack_pack_true (&pk);
  else
    msgpack_pack_false (&pk);
  msgpack_pack_uint32 (&pk, rr->status);
  msgpack_pack_int64 (&pk, rr->exit_code);
  msgpack_pack_int64 (&pk, rr->signal);
  msgpack_pack_int64 (&pk, rr->started);
  msgpack_pack_int64 (&pk, rr->finished);
  msgpack_pack_uint64 (&pk, rr->out_off);
  msgpack_pack_uint64 (&pk, rr->out_len);
  msgpack_pack_uint64 (&pk, rr->err_off);
  msgpack_pack_uint64 (&pk, rr->err_len);
  msgpack_pack_uint64 (&pk, rr->out_dropped);
  msgpack_pack_uint64 (&pk, rr->err_dropped);
  pack_str (&pk, rr->message);
  msgpack_pack_uint32 (&pk, rr->end_class);
  pack_str (&pk, rr->oom_evidence);
  datc_journal_end (l->journal);
}

static void
journal_requeue (DatcLedger *l, guint64 id, gboolean lost)
{
  msgpack_packer pk;
  record_begin (l, &pk, REC_REQUEUE, 3);
  msgpack_pack_uint64 (&pk, id);
  if (lost)
    msgpack_pack_true (&pk);
  else
    msgpack_pack_false (&pk);
  datc_journal_end (l->journal);
}

static void
journal_copy_end (DatcLedger *l, guint64 id, guint32 attempt)
{
  msgpack_packer pk;
  record_begin (l, &pk, REC_COPY_END, 3);
  msgpack_pack_uint64 (&pk, id);
  msgpack_pack_uint32 (&pk, attempt);
  datc_journal_end (l->journal);
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
other_copies (DatcLedger *l, guint64 id, TaskSlot *t, guint32 agent, guint32 attempt,
              GArray *out)
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
  ResultRec rr = {
    .id = res->id,
    .attempt = res->attempt,
    .agent = agent,
    .final = ok || t->failures >= bt->retries,
    .status = res->status,
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
    return DATC_RESULT_DUPLICATE;
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

void
datc_ledger_agent_tasks (DatcLedger *l, guint32 agent, GArray *keys)
{
  /* Most agents leave holding nothing: no scan of the bag for them. */
  if (datc_ledger_agent_attempts (l, agent) == 0)
    return;
  for (guint64 id = 1; id <= l->n_tasks; id++)
    {
      TaskSlot *t = &l->tasks[id - 1];
      if (t->state == DATC_TASK_RUNNING && t->agent == agent && !t->replicated)
        {
          DatcTaskKey k = { id, t->attempt };
          g_array_append_val (keys, k);
        }
    }
  GHashTableIter it;
  gpointer id, copies;
  g_hash_table_iter_init (&it, l->replicas);
  while (g_hash_table_iter_next (&it, &id, &copies))
    {
      gint i = copy_index (copies, agent, 0);
      if (i >= 0)
        {
          DatcTaskKey k = { GPOINTER_TO_SIZE (id), g_array_index ((GArray *) copies, Copy, i).attempt };
          g_array_append_val (keys, k);
        }
    }
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
          g_autofree gchar *msg = g_strdup_printf (
              "lost with its agent %u times (crash limit %u)", t->crashes + 1u,
              l->options.crash_limit);
          AgentInfo *a = agent < l->agents->len ? l->agents->pdata[agent] : NULL;
          gboolean walltime = a != NULL && a->walltime_end_us > 0 && now >= a->walltime_end_us;
          ResultRec rr = {
            .id = k->id, .attempt = k->attempt, .agent = agent, .final = TRUE,
            .status = DATC_STATUS_LOST, .exit_code = -1, .signal = 0,
            .started = 0, .finished = now, .message = msg,
            .end_class = end_class_of (DATC_STATUS_LOST, 0, NULL, walltime),
          };
          rr.out_off = rr.err_off = a ? a->out_size : 0;
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
  msgpack_packer pk;
  record_begin (l, &pk, REC_PROXY, 6);
  pack_str (&pk, site);
  pack_str (&pk, proxy);
  pack_str (&pk, job_id);
  pack_str (&pk, event);
  msgpack_pack_int64 (&pk, g_get_real_time ());
  datc_journal_end (l->journal);
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
  return (l->journal ? datc_journal_pending (l->journal) : 0) + l->results_out->len;
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
      if (fdatasync (a->out_fd) != 0)
        {
          /* Never tried again: after a failed fdatasync the kernel may
           * have dropped the dirty pages and cleared the error, so a
           * second one could succeed on output that never reached the
           * disk, and the results pointing at it would be journaled.  The
           * journal rewrites its own bytes instead (journal.c), but these
           * are gone from memory: the ledger commits nothing more, the
           * master stops, and the next run re-derives everything from the
           * journal, which holds none of these results (they run again). */
          int errsv = errno;
          l->sync_failed = g_strdup_printf ("%s/%s: %s", l->dir, a->output_name,
                                            g_strerror (errsv));
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
  return write_results (l, error);
}
