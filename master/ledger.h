/* ledger.h: the state of every task of a campaign and the only code that
 * changes it.  Every change is a journal record first (so a restarted
 * master replays to the same state), then applied in memory; final results
 * also become a line of results.jsonl and their output goes to the agent's
 * append-only file under outputs/.
 *
 * On open the journal is replayed and results.jsonl is rebuilt from it, so
 * the file always holds exactly one line per finished task, whatever
 * instant the previous master died at.  Tasks that were running when the
 * master died stay bound to their agents for a re-attach window (journaled,
 * so a second crash does not extend it): a returning agent re-attaches them
 * (datc_ledger_reattach), and only at the window's end do the others go
 * back to the queue (datc_ledger_expire_orphans).
 *
 * Nothing here talks to the network: the dispatcher decides who gets what,
 * the ledger records it and hands back the (id, attempt) of what it picked;
 * the dispatcher encodes the frames.  The journal records are
 * journalrec.h's, results.jsonl is written by resultsfile.h, each agent's
 * output file by agentoutput.h, observed run times are runtimes.h's. */
#pragma once

#include <glib.h>
#include "bag.h"
#include "message.h"
#include "journal.h"

G_BEGIN_DECLS

#define DATC_LEDGER_ERROR (datc_ledger_error_quark ())
GQuark datc_ledger_error_quark (void);

typedef enum {
  DATC_LEDGER_ERROR_IO,
  DATC_LEDGER_ERROR_CORRUPT,  /* a checksummed record that makes no sense */
  DATC_LEDGER_ERROR_MISMATCH, /* the journal is of another task file */
} DatcLedgerError;

typedef enum {
  DATC_TASK_QUEUED = 0,
  DATC_TASK_RUNNING,
  DATC_TASK_DONE,      /* final: exit 0 */
  DATC_TASK_FAILED,    /* final: non-zero exit, signal, timeout, lost, ... */
  DATC_TASK_CANCELLED, /* final: cancelled by the user */
} DatcTaskState;

/* Final status "lost" (crash limit reached), beside DatcTaskStatus. */
#define DATC_STATUS_LOST 100

/* Why a task ended, as results.jsonl's `class` says it: from the status,
 * the signal, the agent's OOM evidence and whether its proxy's walltime
 * had ended.  An OOM kill is only ever "oom" with evidence; without it,
 * a SIGKILL stays "signal". */
typedef enum {
  DATC_END_EXIT = 0, /* exited, the code kept (0 or not) */
  DATC_END_SIGNAL,   /* killed by a signal we did not send */
  DATC_END_TIMEOUT,  /* its own timeout */
  DATC_END_WALLTIME, /* its proxy's walltime ended (the agent's drain, the scheduler's kill) */
  DATC_END_OOM,      /* SIGKILL, and the node recorded the OOM killer at work */
  DATC_END_LOST,     /* its node or agent was lost */
  DATC_END_SPAWN_FAILED,
  DATC_END_CANCELLED,
  DATC_END_REFUSED,
  DATC_END_N,
} DatcEndClass;

const char *datc_end_class_name (DatcEndClass end_class);
/* The class of a status name of results.jsonl ("exited", "lost", ...),
 * for lines an older datc wrote without `class`; DATC_END_N if unknown. */
DatcEndClass datc_end_class_of_status_name (const char *status, gint64 signal);

/* Default re-attach window: twice the default agent timeout. */
#define DATC_LEDGER_REATTACH_WINDOW_MS 60000u

/* How far datc_ledger_open has come replaying the journal, for another
 * thread to read (`datc status` while a master loads): bytes, stored
 * with __atomic_store_n every few thousand records. */
typedef struct {
  guint64 journal_bytes; /* the journal's size when the replay began */
  guint64 replayed;      /* bytes of it replayed so far */
} DatcLedgerLoad;

typedef struct {
  guint crash_limit;        /* agent losses before a task fails as lost */
  guint reattach_window_ms; /* 0: DATC_LEDGER_REATTACH_WINDOW_MS */
  gboolean read_only;       /* replay only: no journal writes, no results.jsonl */
  gboolean retry_cancelled; /* cancelled tasks go back to the queue */
  /* Compaction (master/README.md, Compaction): the journal is rewritten
   * as a checkpoint once it exceeds both compact_min_bytes (0:
   * DATC_LEDGER_COMPACT_MIN_BYTES; G_MAXUINT64: never) and compact_factor
   * (0: DATC_LEDGER_COMPACT_FACTOR) times the last checkpoint's size. */
  guint64 compact_min_bytes;
  guint compact_factor;
  DatcLedgerLoad *load; /* NULL, or where the replay says how far it is */
  /* The most of the records committed while a checkpoint was written
   * copied behind it per commit (0: DATC_LEDGER_COMPACT_SLICE_BYTES). */
  guint64 compact_slice_bytes;
  /* The checkpoint's writer's pace: it writes this much out to the disk,
   * then rests as long as that took (0: DATC_LEDGER_COMPACT_STEP_BYTES). */
  guint64 compact_step_bytes;
} DatcLedgerOptions;

#define DATC_LEDGER_COMPACT_MIN_BYTES (64u * 1024u * 1024u)
#define DATC_LEDGER_COMPACT_FACTOR 4u
#define DATC_LEDGER_COMPACT_SLICE_BYTES (1024u * 1024u)
#define DATC_LEDGER_COMPACT_STEP_BYTES (1024u * 1024u)

typedef struct DatcLedger DatcLedger;

typedef struct {
  guint64 total, queued, running, done, failed, cancelled;
} DatcLedgerCounts;

/* Opens DIR's journal (creating it), replays it against `bag` (transfer
 * none, must outlive the ledger), rebuilds DIR/results.jsonl.
 * `task_file_sha256` identifies the bag's first file: a journal made for
 * another file is refused. */
DatcLedger *datc_ledger_open (const char *dir, DatcBag *bag, const char *task_file,
                              const char *task_file_sha256, const DatcLedgerOptions *options,
                              GError **error);
void datc_ledger_free (DatcLedger *ledger);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcLedger, datc_ledger_free)

void datc_ledger_counts (DatcLedger *ledger, DatcLedgerCounts *counts);
/* The counts as of the last commit (or the open): they agree with
 * results.jsonl, which a commit writes.  `datc status` says these, so it
 * need not wait for a commit to answer. */
void datc_ledger_counts_committed (DatcLedger *ledger, DatcLedgerCounts *counts);
/* No task is queued or running. */
gboolean datc_ledger_finished (DatcLedger *ledger);
DatcTaskState datc_ledger_task_state (DatcLedger *ledger, guint64 id);
guint32 datc_ledger_task_attempt (DatcLedger *ledger, guint64 id);
/* The agent a running task runs on (its newest copy's), or G_MAXUINT32. */
guint32 datc_ledger_task_agent (DatcLedger *ledger, guint64 id);
/* The site (as its agent said in HELLO) of the agent the task's last
 * attempt was dispatched to, running or not, or NULL (never dispatched),
 * transfer none.  Replayed from the journal like the rest. */
const char *datc_ledger_task_site (DatcLedger *ledger, guint64 id);

/* An agent said HELLO: it gets a small index, journaled with what it said.  An
 * agent id seen before (a reconnect, or a master restart) keeps its index. */
guint32 datc_ledger_agent_hello (DatcLedger *ledger, const char *agent_id, const char *site,
                                 const char *proxy, const char *host);
/* The end of the agent's walltime, as its HELLO said (0: none).  Not
 * journaled: an agent says it again to a restarted master.  A task lost
 * with its agent after that moment ended because of the walltime. */
void datc_ledger_agent_walltime (DatcLedger *ledger, guint32 agent, gint64 walltime_end_us);
/* The site an agent id still known to the ledger said it was of, or NULL
 * (transfer none). */
const char *datc_ledger_agent_site (DatcLedger *ledger, const char *agent_id);

/* A request for work from one agent.  `partition` is the agent's share
 * of a split bag (0 when the bag is not split; see datc_ledger_split). */
typedef struct {
  guint32 agent;
  guint partition;
  guint max;
  guint64 budget_ms; /* time the agent has left; G_MAXUINT64: no limit */
  gboolean fresh;    /* the agent has not been handed a task yet: only
                      * a task's own est_runtime keeps a task from it */
  guint deferred;    /* out: tasks looked at that were expected not to fit */
} DatcDispatchRequest;

/* Picks up to `max` queued tasks of the partition that are expected to fit
 * in `budget_ms` (their est_runtime, else, unless the agent is fresh, the
 * campaign's observed run time once known:
 * datc_ledger_runtime_estimate_ms), marks them running on
 * `agent` with the next attempt, journals one record for all, and appends
 * their (id, attempt) to `picked` (DatcTaskKey).  Returns how many. */
guint datc_ledger_dispatch (DatcLedger *ledger, DatcDispatchRequest *request, GArray *picked);

/* The bag the ledger was opened on (transfer none): what the dispatcher
 * encodes picked tasks from. */
DatcBag *datc_ledger_bag (DatcLedger *ledger);

/* The 90th percentile of the run times observed so far (rounded up to
 * within 19 %), or 0 until 20 tasks have run. */
guint64 datc_ledger_runtime_estimate_ms (DatcLedger *ledger);

/* Static mode: splits the queue into `n` partitions in proportion to
 * `weights` (see taskqueue.h for how ids are dealt).  Not journaled: a
 * resumed campaign splits what is left by the sites it runs with. */
void datc_ledger_split (DatcLedger *ledger, guint n, const guint *weights);
/* Queued tasks of one partition. */
guint64 datc_ledger_queued_in (DatcLedger *ledger, guint partition);

/* Direct mode binds a task to a proxy when the proxy is submitted, and
 * the ledger is the one place that knows which (nothing else keeps a
 * copy).  datc_ledger_bind takes the next queued task out of the queue
 * for (site, proxy) (it stays queued, counted, and is not journaled: a
 * restarted master binds afresh); datc_ledger_dispatch_bound hands the
 * proxy's agent exactly that task, or, for a proxy without a binding (an
 * earlier master's) or whose agent already asked, the next queued one, and
 * returns 0 when its task is no longer queued (the user cancelled it);
 * datc_ledger_release ends the binding when the proxy ends (or its
 * submit failed), putting its task back in the queue if it never ran.
 * A bound task that becomes final is no longer reserved, and a binding
 * never reserves a task that was bound to another proxy since. */
gboolean datc_ledger_bind (DatcLedger *ledger, const char *site, const char *proxy, guint64 *id);
guint datc_ledger_dispatch_bound (DatcLedger *ledger, guint32 agent, const char *site,
                                  const char *proxy, GArray *picked);
void datc_ledger_release (DatcLedger *ledger, const char *site, const char *proxy);
/* The task (site, proxy) was submitted for, taken or not, until it ends;
 * 0: none. */
guint64 datc_ledger_proxy_task (DatcLedger *ledger, const char *site, const char *proxy);
/* Queued tasks not bound to a proxy. */
guint64 datc_ledger_unbound_queued (DatcLedger *ledger);

/* An agent said HELLO holding (id, attempt): if that attempt is still the
 * task's open attempt (or the next one, whose dispatch record a crash took
 * before it was synced), it runs on `agent` again and TRUE is returned;
 * FALSE means the agent should drop it (finished, or superseded). */
gboolean datc_ledger_reattach (DatcLedger *ledger, guint32 agent, guint64 id, guint32 attempt);

/* One live attempt of a task, on one agent. */
typedef struct {
  guint32 agent;
  guint32 attempt;
  guint64 id;
} DatcLedgerRunning;

typedef enum {
  DATC_RESULT_ACCEPTED,  /* journaled (final, or retried) */
  DATC_RESULT_REQUEUED,  /* drained or refused: back in the queue */
  DATC_RESULT_DUPLICATE, /* the task already has a final result: ignored */
  DATC_RESULT_DROPPED,   /* one copy of a replicated task ended (failed, drained,
                          * refused) while another still runs: nothing recorded */
  DATC_RESULT_FAILED,    /* its output could not be written (`error` says why):
                          * nothing recorded, the task runs on as before */
} DatcResultOutcome;

/* Takes one result from `agent`.  Writes its output to the agent's file
 * first; when that fails, returns DATC_RESULT_FAILED with `error` set.  When the result makes the
 * task final while other attempts of it still run (a re-attached copy, a replica), those are
 * appended to `cancel` (DatcLedgerRunning, may be NULL) so the caller can cancel them. */
DatcResultOutcome datc_ledger_take_result (DatcLedger *ledger, guint32 agent,
                                           const DatcResult *result, GArray *cancel,
                                           GError **error);

/* End-game replication.  A running task may have up to `max_copies` live
 * attempts on different agents (a side table holds the copies of the few
 * tasks that have more than one; the per-task state does not grow); the
 * first result that counts wins and the others are cancelled.  Copies are
 * journaled (REPLICATE, COPY_END records) and replayed like the rest. */
typedef struct {
  guint64 id;
  guint32 attempt;      /* its newest live attempt */
  guint32 copies;       /* live attempts */
  guint64 elapsed_ms;   /* since the dispatch of the copy expected to end first */
  guint64 remaining_ms; /* E[T - elapsed | T > elapsed]; G_MAXUINT64: a straggler, it has
                         * run longer than any observed run (remaining unknown) */
  guint64 copy_ms;      /* what a new copy is expected to take (the observed mean) */
  guint64 fit_ms;       /* the time a copy needs left in its agent's walltime (the
                         * dispatch estimate: est_runtime, else the observed p90) */
} DatcReplicaCandidate;

/* Running tasks a new copy started at `now_real` is expected to finish
 * sooner than their live copies (now + copy_ms < the earliest expected end
 * of their copies), with fewer than `max_copies` copies and not marked
 * `"replicate": false`, latest expected end first, appended to `out`.
 * Nothing until DATC_RUNTIMES_MIN_SAMPLES run times are observed.  Bounded by
 * the running tasks, never by the bag. */
void datc_ledger_replica_candidates (DatcLedger *ledger, guint max_copies, gint64 now_real,
                                     GArray *out);
/* Whether some running task may yet get a copy: one with fewer than
 * `max_copies` copies, not marked `"replicate": false`, in a campaign
 * that has observed (or, counting the running ones, will have observed)
 * enough run times to judge.  Stops at the first such task. */
gboolean datc_ledger_may_copy (DatcLedger *ledger, guint max_copies);
/* Attempts running on agents of `site` that are expected to end after
 * their agent's walltime end (as its HELLO said; agents without one do
 * not count): each from its dispatch, its est_runtime, else the observed
 * 90th percentile (datc_ledger_runtime_estimate_ms), and once it has run
 * past that, E[T - elapsed | T > elapsed] over the observed runs (none
 * observed that long, or none observed at all: longer than any
 * walltime).  A task with no estimate at all is not counted.  Such a task
 * comes back to the queue at that walltime and waits for a slot.
 * Bounded by the running tasks, never by the bag. */
guint64 datc_ledger_walltime_outliving (DatcLedger *ledger, const char *site, gint64 now_real);
/* Starts one more copy of running task `id` on `agent` (which must not run
 * one already) as the next attempt: journaled, and its (id, attempt)
 * appended to `picked`.  Returns 1, or 0 when it is not running. */
guint datc_ledger_replicate (DatcLedger *ledger, guint32 agent, guint64 id, GArray *picked);
/* TRUE when (`agent`, `attempt`) is a live attempt of `id`. */
gboolean datc_ledger_attempt_live (DatcLedger *ledger, guint64 id, guint32 agent, guint32 attempt);
/* TRUE when `agent` runs a live attempt of `id`. */
gboolean datc_ledger_runs_on (DatcLedger *ledger, guint64 id, guint32 agent);

/* `agent` is gone, the one way out of the ledger for every departure:
 * what it still ran goes back to the queue, with one more crash each
 * when `lost` (failing as lost at the crash limit), without penalty when
 * it left; the departure is journaled, and its entry, output file and
 * index are released once what it wrote is committed, so a campaign that
 * sees a million agents come and go (direct mode, walltime generations)
 * holds only the agents still connected.  A returning agent gets a new
 * index; its file is opened again.  Returns how many tasks it still ran. */
guint datc_ledger_agent_gone (DatcLedger *ledger, guint32 agent, gboolean lost);
/* Live attempts on `agent` (tasks it was handed and has not given back or
 * finished, copies included), in O(1): counted by the same transitions
 * replay applies. */
guint datc_ledger_agent_attempts (DatcLedger *ledger, guint32 agent);
/* Agents with an entry (connected, or awaited after a restart). */
guint datc_ledger_live_agents (DatcLedger *ledger);

/* After a restart: tasks still waiting for their agent to re-attach, and
 * agents of the last master not back yet.  While agents are awaited, a
 * task the journal shows queued may be one a crash took the dispatch
 * record of, still running on an agent that is about to say HELLO. */
guint64 datc_ledger_orphans (DatcLedger *ledger);
guint datc_ledger_awaited (DatcLedger *ledger);
/* Re-attach windows that ended by `now_real`: their tasks whose agent did
 * not come back go to the queue (no crash counted: the master died, not
 * the task), and awaited agents not back are gone.  Returns how many
 * tasks were requeued. */
guint64 datc_ledger_expire_orphans (DatcLedger *ledger, gint64 now_real);
/* The tasks `agent` runs, per the ledger (DatcTaskKey appended, in id
 * order, copies after): O(its tasks), never a scan of the bag. */
void datc_ledger_agent_tasks (DatcLedger *ledger, guint32 agent, GArray *keys);
/* Puts one running task of `agent` back in the queue without penalty (it
 * never reached the agent, or the agent gave it back). */
void datc_ledger_requeue (DatcLedger *ledger, guint32 agent, guint64 id, guint32 attempt);

/* TRUE when an agent of (site, proxy) ever said HELLO to this campaign. */
gboolean datc_ledger_proxy_connected (DatcLedger *ledger, const char *site, const char *proxy);

/* Proxies, journaled so a restarted master still knows what it left on
 * each site: event is "submitted", "ended" or "cancelled".  A submit
 * itself is bracketed by "submitting" (proxy: the submission's id, the
 * job name's; job_id: how many proxies, 1 or an array's k), synced before
 * the command goes out, and "settled" (same id) once its outcome is
 * journaled: a master killed in between finds that submission open and
 * asks the scheduler for it by name. */
void datc_ledger_proxy_event (DatcLedger *ledger, const char *site, const char *proxy,
                              const char *job_id, const char *event);
/* Proxies submitted and not seen ended (cancelled ones included), as
 * site\tproxy\tjob_id strings. */
GPtrArray *datc_ledger_open_proxies (DatcLedger *ledger);
/* Submissions journaled "submitting" and not "settled", as site\tid\tk
 * strings. */
GPtrArray *datc_ledger_open_submits (DatcLedger *ledger);

/* Adds the tasks in `data` (a task file's content, `name` for messages)
 * to the bag and the queue, all or nothing; ids continue after the last
 * task.  The data itself is journaled, so a resumed campaign has them. */
gboolean datc_ledger_submit (DatcLedger *ledger, const char *name, const char *data, gsize len,
                             DatcTaskFileFormat format, guint64 *first, guint64 *count,
                             GError **error);

/* Cancels `ids` (n of them), or every unfinished task when ids is NULL:
 * each becomes final with status "cancelled".  Attempts that were running
 * (every copy of a replicated task) are appended to `running` as
 * DatcLedgerRunning so the caller can stop them.  Returns how many tasks
 * were cancelled. */
guint64 datc_ledger_cancel (DatcLedger *ledger, const guint64 *ids, guint n, GArray *running);

/* Bytes recorded and not yet committed (journal records, results lines). */
gsize datc_ledger_pending (DatcLedger *ledger);

/* Makes everything recorded so far durable: output files, then the journal
 * (one fdatasync each), then flushes results.jsonl.  A failed journal or
 * results write is taken up where it stopped by the next commit; after an
 * output file's fdatasync failed, every later commit fails (the master
 * must stop; the next run recovers from the journal). */
gboolean datc_ledger_commit (DatcLedger *ledger, GError **error);

/* The journal's size and its compactions (for status and benchmarks). */
typedef struct {
  guint64 bytes;             /* the journal's committed size */
  guint64 checkpoint_bytes;  /* the last checkpoint's size (0: none yet; after a
                              * resume, up to its last TASKS or LINES record) */
  guint64 compacted_from;    /* the size of the journal it replaced */
  gint64 last_compaction_us; /* when it was taken (real time; 0: never) */
  gboolean compacting;       /* one is being written now */
  guint compactions;         /* finished by this master */
  gint64 pause_max_us;       /* the longest the caller's thread was held by one */
  gint64 fork_max_us;        /* the longest fork() for one (within the hold) */
} DatcLedgerJournalInfo;

void datc_ledger_journal_info (DatcLedger *ledger, DatcLedgerJournalInfo *info);
/* What the loop's thread serves while a commit's journal fdatasync runs
 * (datc_journal_set_sync_wait) and while results.jsonl's lines are
 * written (datc_results_file_set_write_wait); NULL: nothing, it syncs
 * and writes itself. */
void datc_ledger_set_sync_wait (DatcLedger *ledger, DatcJournalWaitFunc wait, gpointer user_data);

/* Compacts the journal now (nothing must be pending: call after a
 * commit).  With `wait`, returns once the compacted journal is in place;
 * otherwise a forked child writes it and a later commit puts it in place
 * (as commits do on their own past the thresholds).  A compaction already
 * under way is waited for (`wait`) or left to go on. */
gboolean datc_ledger_compact (DatcLedger *ledger, gboolean wait, GError **error);
/* A compaction under way (one a resume started, say) is waited for and
 * put in place, so that a master that ends well leaves the compacted
 * journal; FALSE only when the switch failed after the rename (a commit
 * failure).  Nothing under way: TRUE at once. */
gboolean datc_ledger_finish_compaction (DatcLedger *ledger, GError **error);

G_END_DECLS
