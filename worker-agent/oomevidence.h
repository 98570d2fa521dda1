/* oomevidence.h: what this node says about the kernel's OOM killer, so a
 * task that died of SIGKILL can be told apart from one the OOM killer
 * took.  Two sources, both read only when they can be:
 *
 *  - the OOM-kill counter of the agent's memory cgroup (its tasks are in
 *    it): cgroup v2 `memory.events` "oom_kill N" (which also counts the
 *    cgroup's descendants), cgroup v1 `memory.oom_control` "oom_kill N"
 *    (kernel 4.13 and later; this cgroup only).  The runner reads it when a
 *    task starts and again when it dies of SIGKILL: a rise is evidence.
 *  - the kernel log (/dev/kmsg, readable by root or when dmesg_restrict is
 *    0): an "out of memory: Killed process PID" line naming the task's pid,
 *    logged after the task started.
 *
 * With neither, there is no evidence and the task stays "killed by
 * SIGKILL": we never guess. */
#pragma once

#include <glib.h>
#include <sys/types.h>

G_BEGIN_DECLS

typedef struct DatcOomWatch DatcOomWatch;

/* Finds this process's memory cgroup from `proc_cgroup` (normally
 * /proc/self/cgroup) under `cgroup_root` (normally /sys/fs/cgroup) and
 * keeps its counter file open; `kmsg` (normally /dev/kmsg) is opened only
 * when evidence is asked for.  Never fails: what cannot be read is simply
 * not a source. */
DatcOomWatch *datc_oom_watch_new (const char *proc_cgroup, const char *cgroup_root,
                                  const char *kmsg);
void datc_oom_watch_free (DatcOomWatch *watch);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcOomWatch, datc_oom_watch_free)

/* The counter file found, or NULL (transfer none). */
const char *datc_oom_watch_counter_path (DatcOomWatch *watch);

/* The OOM kills the cgroup has counted so far, or -1 when there is no
 * counter.  One pread. */
gint64 datc_oom_watch_kills (DatcOomWatch *watch);

/* Evidence that the task whose leader was `pid`, started at
 * `started_mono_us` (g_get_monotonic_time) with the counter at
 * `kills_at_start`, was killed by the OOM killer, as one line of text
 * (transfer full), or NULL when there is none. */
gchar *datc_oom_watch_evidence (DatcOomWatch *watch, gint64 kills_at_start, pid_t pid,
                                gint64 started_mono_us);

/* Parsers, public for their tests. */

/* From /proc/PID/cgroup's text: the cgroup v2 path ("0::PATH") and the v1
 * memory controller's ("N:...memory...:PATH"), each NULL when absent. */
void datc_oom_parse_proc_cgroup (const char *text, gchar **v2_path, gchar **v1_memory_path);
/* The value of the "oom_kill N" line of memory.events or
 * memory.oom_control, or -1. */
gint64 datc_oom_parse_counter (const char *text);
/* One /dev/kmsg record ("prio,seq,usec,flags;message"): TRUE when its
 * message says the OOM killer killed `pid`; its time since boot in `usec`. */
gboolean datc_oom_parse_kmsg (const char *record, pid_t pid, guint64 *usec, const char **message);

G_END_DECLS
