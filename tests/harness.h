/* harness.h: helpers for tests that run the real datc and datc-agent
 * programs.  Paths to the programs come from the environment meson sets
 * (DATC, DATC_AGENT).  Every process a test starts is tracked by PID and
 * killed at the end if it is still there; waiting is always on a condition
 * with a deadline, never a fixed sleep. */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef struct {
  gchar *path; /* a fresh temporary directory */
} TbDir;

TbDir *tb_dir_new (void);
void tb_dir_free (TbDir *d); /* removes it, after killing its agents */
G_DEFINE_AUTOPTR_CLEANUP_FUNC (TbDir, tb_dir_free)

/* Writes `content` to DIR/name and returns the path (transfer full). */
gchar *tb_write (TbDir *d, const char *name, const char *content);

const char *tb_datc (void);
const char *tb_agent (void);

typedef struct {
  GSubprocess *proc;
  gchar *stderr_path;
  gchar *stdout_path;
} TbProc;

/* Starts argv (NULL-terminated) with stdout and stderr going to files in
 * `d`, named after `tag`. */
TbProc *tb_spawn (TbDir *d, const char *tag, const char *const *argv);
/* Waits up to `timeout_s`; on timeout kills it and fails the test.
 * Returns the exit status (128+signal when killed by a signal). */
int tb_wait (TbProc *p, guint timeout_s);
void tb_proc_free (TbProc *p); /* kills it if still running */
G_DEFINE_AUTOPTR_CLEANUP_FUNC (TbProc, tb_proc_free)
gchar *tb_proc_stderr (TbProc *p);
gchar *tb_proc_stdout (TbProc *p);
int tb_proc_pid (TbProc *p);
/* Sends `sig` if it still runs (never to a pid <= 0); TRUE if sent. */
gboolean tb_proc_signal (TbProc *p, int sig);

/* Runs to completion and returns the exit status; stderr in *err if not NULL. */
int tb_run (TbDir *d, const char *const *argv, guint timeout_s, gchar **err);

/* Polls `cond` every few ms until it holds or `timeout_s` passes. */
gboolean tb_await (gboolean (*cond) (gpointer), gpointer data, guint timeout_s);
/* tb_await for `path` to exist, and for `needle` in what `p` printed on
 * stderr so far. */
gboolean tb_await_file (const char *path, guint timeout_s);
gboolean tb_await_stderr (TbProc *p, const char *needle, guint timeout_s);
/* tb_await for `path` to hold at least `n` lines (results.jsonl...). */
gboolean tb_await_lines (const char *path, guint64 n, guint timeout_s);

/* results.jsonl as id -> JsonObject (ref'd).  Fails the test on an id seen
 * twice or an unreadable line. */
GHashTable *tb_results (const char *campaign_dir);
/* DIR/trace.jsonl as JsonObjects (ref'd), in file order; a torn last
 * line (the master writing it) is left out; any other bad line fails the
 * test (transfer full). */
GPtrArray *tb_trace (const char *campaign_dir);
/* `datc status --json DIR` (live through the control socket while the
 * master runs); NULL when it fails (transfer full). */
JsonObject *tb_status (const char *campaign_dir);
/* Number of lines of a file (0 if it does not exist). */
guint64 tb_count_lines (const char *path);

/* PIDs of datc-agent processes whose command line mentions `needle`. */
GArray *tb_find_agents (const char *needle);
/* Kills (SIGKILL) every such agent; returns how many there were. */
guint tb_kill_agents (const char *needle);
/* TRUE when no process has pid `pid` (or it is a zombie). */
gboolean tb_pid_gone (int pid);

G_END_DECLS
