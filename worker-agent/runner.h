/* runner.h: runs tasks for the agent.  Each task is spawned (a
 * vfork-style clone, see runner.c) in its own process group, stdin from /dev/null, stdout and
 * stderr into pipes captured up to a limit.  The runner owns one epoll fd
 * that becomes readable whenever it has work to do (output to read, a
 * child that exited, tracked with pidfds), so the agent's single zmq_poll
 * loop watches one fd for all tasks.
 *
 * Ending a task: when the leader exits, the rest of its process group is
 * killed before the leader is reaped (waitid WNOWAIT keeps the pgid from
 * being reused), so nothing of a finished task lingers.  A timeout or a
 * cancel sends SIGTERM to the group, then SIGKILL after the grace period.
 *
 * Captured output beyond the limit is counted, not kept; the kept bytes end
 * with a marker line "[datc: N bytes of stdout dropped]" so the loss is
 * visible wherever the output is read. */
#pragma once

#include <glib.h>
#include "message.h"
#include "oomevidence.h"

G_BEGIN_DECLS

typedef struct DatcRunner DatcRunner;

/* output_limit: bytes kept per stream (<= DATC_OUTPUT_MAX).
 * kill_grace_ms: time between SIGTERM and SIGKILL. */
DatcRunner *datc_runner_new (gsize output_limit, guint kill_grace_ms, GError **error);
void datc_runner_free (DatcRunner *runner);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcRunner, datc_runner_free)

/* Starts `task` (transfer none: what is needed is copied).  If the task
 * cannot be spawned (no such program, bad cwd), it is not an error of the
 * runner: a result with DATC_STATUS_SPAWN_FAILED is queued and returned by
 * the next datc_runner_dispatch().  Returns FALSE only when the runner
 * itself failed (out of fds, pipe() failed). */
gboolean datc_runner_start (DatcRunner *runner, const DatcTask *task, GError **error);

/* Tasks held: started and not yet reported, or, with slot threads,
 * ready to start. */
guint datc_runner_running (DatcRunner *runner);
/* Of those, the ones started (what a heartbeat says the agent runs). */
guint datc_runner_executing (DatcRunner *runner);
/* With slot threads: of those, the ones not started yet (ready, or being
 * spawned); 0 without. */
guint datc_runner_waiting (DatcRunner *runner);

/* Asks the calling thread for a 0.1 ms time slice (reset on fork: tasks
 * keep the default; only for the normal policy at nice >= 0): woken by a
 * task's end, it then preempts at once.  See runner.c. */
void datc_runner_ask_short_slice (void);

/* Slot threads (runner.c, "slot threads"): one thread per slot spawns
 * tasks from a ready queue and waits for each, so that a task's end wakes
 * a thread on the core that task left.  datc_runner_start() then prepares
 * a task and queues it; up to `max_held` tasks are held, started or
 * ready (their fds reserved by the caller: DATC_RUNNER_STAGE_DEPTH per
 * slot).  With `work_end_us` (real time, 0: none) a task whose
 * est_runtime_ms would end after it is refused when its turn comes.
 * Nothing starts until datc_runner_set_start_until().  Call once, before
 * the first task. */
#define DATC_RUNNER_STAGE_DEPTH 4
gboolean datc_runner_use_slot_threads (DatcRunner *runner, guint slots, guint max_held,
                                       gint64 work_end_us, GError **error);
/* With slot threads: no task starts at or after `until` (monotonic µs;
 * the agent's lease: the master heard from recently).  Tasks that may not
 * start wait in the queue. */
void datc_runner_set_start_until (DatcRunner *runner, gint64 until);
/* Whether datc_runner_start() may be called now, `slots` being the
 * agent's slots (without slot threads: fewer than `slots` held). */
gboolean datc_runner_has_room (DatcRunner *runner, guint slots);
/* With slot threads: every task not started yet ends unstarted with
 * `status` (its result comes from the next dispatch()). */
void datc_runner_unstage (DatcRunner *runner, DatcTaskStatus status);

/* Each running task holds DATC_RUNNER_FDS_PER_TASK fds (pidfd, two pipe
 * read ends and the runner's copies of their write ends).  Raises this
 * process's soft RLIMIT_NOFILE, up to the hard limit, so that `tasks` can
 * run at once beside `reserved` fds of the caller's own; tasks still start
 * with the soft limit the process had (a program using select() expects
 * it).  Returns how many tasks fit (== tasks unless the hard limit is too
 * low). */
#define DATC_RUNNER_FDS_PER_TASK 5
guint datc_runner_reserve_fds (DatcRunner *runner, guint tasks, guint reserved);

/* The fd to poll for POLLIN. */
int datc_runner_get_fd (DatcRunner *runner);

/* Milliseconds until the runner needs dispatch() even with nothing to read
 * (a timeout or a kill escalation is due); -1 when nothing is due. */
int datc_runner_next_timeout_ms (DatcRunner *runner);

/* Does all pending work without blocking: reads output, enforces timeouts,
 * reaps finished tasks.  Appends each finished task's DatcResult* (transfer
 * full) to `finished`. */
void datc_runner_dispatch (DatcRunner *runner, GPtrArray *finished);

/* Kills a running task's group (TERM, then KILL after the grace); its
 * result comes back through dispatch() with `status` (CANCELLED or
 * DRAINED).  Returns FALSE if no such task runs. */
gboolean datc_runner_cancel (DatcRunner *runner, guint64 id, guint32 attempt,
                             DatcTaskStatus status);
/* The same for every running task. */
void datc_runner_cancel_all (DatcRunner *runner, DatcTaskStatus status);

/* Keys of the running tasks (appended to `keys`, a DatcTaskKey array). */
void datc_runner_list (DatcRunner *runner, GArray *keys);

/* Where a task killed by SIGKILL gets its OOM evidence (result->oom_evidence)
 * from: by default this process's memory cgroup and /dev/kmsg
 * (oomevidence.h); tests give another (transfer full). */
void datc_runner_set_oom_watch (DatcRunner *runner, DatcOomWatch *watch);

G_END_DECLS
