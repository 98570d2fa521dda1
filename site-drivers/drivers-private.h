/* drivers-private.h: what the driver files share with the registry, the
 * DatcSite wrappers and the tests, and nothing the rest of datc needs.
 *
 * Each driver .c defines one `const` table; registry.c is the only place
 * that lists them.  The helpers below keep error messages about commands
 * and their output looking the same whichever driver produced them. */
#pragma once

#include "driver.h"

G_BEGIN_DECLS

/* ---- the drivers' tables ------------------------------------------- */

typedef struct _DatcTransport DatcTransport;

/* A command's stdin and stdout as a byte stream (driver.h,
 * datc_site_open_stream); each transport's own. */
typedef struct {
  int (*fd) (DatcSiteStream *s);
  gssize (*read) (DatcSiteStream *s, guint8 *buf, gsize len, GError **error);
  gboolean (*write) (DatcSiteStream *s, const guint8 *buf, gsize len, guint timeout_ms,
                     GError **error);
  gchar *(*take_stderr) (DatcSiteStream *s);
  void (*close) (DatcSiteStream *s, guint timeout_ms);
} DatcSiteStreamClass;

struct _DatcSiteStream {
  const DatcSiteStreamClass *klass;
};

typedef struct {
  const char *name;
  /* `config` is the site's key file group (transfer none, may be NULL for
   * the embedded local site). */
  DatcTransport *(*open) (GKeyFile *config, const char *group, GError **error);
  /* Runs argv (no shell unless argv says so), feeding `input` (may be NULL)
   * on stdin, killing it after timeout_ms.  A non-zero exit is not an
   * error here: it is in res->exit_status. */
  gboolean (*run) (DatcTransport *t, const char *const *argv, GBytes *input, guint timeout_ms,
                   DatcCommandResult *res, GError **error);
  /* Writes `data` to `path` on the site with `mode`, atomically (temp +
   * rename). */
  gboolean (*put) (DatcTransport *t, GBytes *data, const char *path, int mode, GError **error);
  /* Optional (NULL: the transport has none): starts argv with its stdin
   * and stdout as a stream, within timeout_ms (ssh: on the transport's
   * connection, which is the stream's alone until it is closed). */
  DatcSiteStream *(*stream) (DatcTransport *t, const char *const *argv, guint timeout_ms,
                             GError **error);
  void (*close) (DatcTransport *t);
} DatcTransportClass;

struct _DatcTransport {
  const DatcTransportClass *klass;
};

typedef struct {
  /* The proxy script of an array (its job name is the array's, unique per
   * campaign; one log per element). */
  gchar *(*script) (const DatcProxyRequest *req);
  /* argv that submits the script at `script_path` as elements 1..k. */
  GStrv (*submit_argv) (const DatcProxyRequest *req, guint k, const char *script_path);
  /* The array's base id from the submit's result (checked against k where
   * the answer says how many elements it made). */
  gboolean (*parse_submit) (const DatcCommandResult *res, guint k, gchar **base_id, GError **error);
  /* Element `index`'s id as poll and cancel take it and answer it (Slurm
   * 123_4, Grid Engine 123.4, PBS 123[4].server, LSF 123[4]), or NULL when
   * base_id is not an array id of this scheduler (transfer full). */
  gchar *(*element_id) (const char *base_id, guint index);
  /* Did a submit whose answer was lost go through?  As lookup_argv /
   * parse_lookup of the scheduler, but the answer names the array's base
   * id (NULL: none of that name). */
  GStrv (*lookup_argv) (const char *job_name);
  gboolean (*parse_lookup) (const DatcCommandResult *res, gchar **base_id, GError **error);
} DatcSchedulerArrays;

typedef struct {
  const char *name;
  /* The whole proxy script: #! line, directives, environment that tells
   * the agent its slots and walltime end, then the agent command. */
  gchar *(*script) (const DatcProxyRequest *req);
  /* argv that submits the script at `script_path` on the site. */
  GStrv (*submit_argv) (const DatcProxyRequest *req, const char *script_path);
  /* Job id from the submit command's result, or an error naming what the
   * scheduler said. */
  gboolean (*parse_submit) (const DatcCommandResult *res, gchar **job_id, GError **error);
  /* argv that asks for the state of all `ids` in one command. */
  GStrv (*poll_argv) (const char *const *ids);
  /* Fills states[i] for ids[i]; an id the answer does not mention is
   * FINISHED or UNKNOWN as the scheduler's semantics say. */
  gboolean (*parse_poll) (const DatcCommandResult *res, const char *const *ids,
                          DatcProxyState *states, GError **error);
  /* Optional (NULL: the poll's answer says no reason): as parse_poll, and
   * reasons[i] (transfer full) for a PENDING ids[i]: why the scheduler
   * keeps it waiting, in its own words (Slurm's %r, PBS's comment, LSF's
   * pending reason), at most DATC_SITE_REASON_MAX bytes of printable
   * UTF-8, or NULL when the answer gives none.  `reasons` has a slot per
   * id, all NULL on entry; on failure they are left NULL. */
  gboolean (*parse_poll_reasons) (const DatcCommandResult *res, const char *const *ids,
                                  DatcProxyState *states, gchar **reasons, GError **error);
  GStrv (*cancel_argv) (const char *const *ids);
  /* Optional (NULL in fork): did a submit whose answer was lost go
   * through?  argv that finds the job named `job_name` (the request's
   * name, which the site manager makes unique per campaign and proxy), or
   * NULL when the name cannot go into a command. */
  GStrv (*lookup_argv) (const char *job_name);
  /* From its result: TRUE with *job_id set (transfer full) when exactly
   * one job of that name is known, TRUE with *job_id NULL when none is,
   * FALSE with an error when the answer makes no sense, the command
   * failed, or several jobs carry the name.  "None" is as reliable as
   * the scheduler's memory: a job that already finished and was purged
   * (Slurm after MinJobAge, Grid Engine at once, LSF after CLEAN_PERIOD,
   * PBS without job history) reads as never submitted. */
  gboolean (*parse_lookup) (const DatcCommandResult *res, gchar **job_id, GError **error);
  /* Optional (NULL in fork and condor, which have no queues): argv that
   * asks the scheduler about `queue` (what DatcProxyRequest.queue would
   * be), or NULL when the name cannot go into a command. */
  GStrv (*queue_argv) (const char *queue);
  /* From its result: TRUE with *exists TRUE and *answer a one-line summary
   * of the queue (state, size) when the scheduler knows it; TRUE with
   * *exists FALSE and *answer the scheduler's own words when it says there
   * is no such queue; FALSE with an error when the command failed
   * otherwise (daemon down: DATC_SITE_ERROR_COMMAND) or the answer makes
   * no sense.  *answer is transfer full. */
  gboolean (*parse_queue) (const DatcCommandResult *res, const char *queue, gboolean *exists,
                           gchar **answer, GError **error);
  /* Where queue_argv is NULL: why, for a report ("HTCondor has no
   * queues"). */
  const char *no_queues;
  /* Why the scheduler cannot keep a proxy off hosts (its script and
   * submit ignore DatcProxyRequest.exclude_hosts), or NULL when it can. */
  const char *no_exclude;
  /* The scheduler's programs its commands run on the site (NULL-ended),
   * which `datc sites check` looks for; many commands go through `sh -c`,
   * so their argv[0] would only say /bin/sh.  NULL: the argv[0]s. */
  const char *const *programs;
  /* Optional (NULL in fork and condor): proxies as job arrays.  Poll and
   * cancel above take element ids as well as plain ones, mixed, in one
   * command; pending elements a scheduler shows collapsed (Slurm
   * 123_[2-5], Grid Engine's task ranges) are answered one by one. */
  const DatcSchedulerArrays *arrays;
  /* The log files one proxy leaves in the workdir, as names relative to
   * it (NULL-ended, transfer full), as the script's directives or the
   * submit command name them: `job_name` the request's name (an array's,
   * for its elements), `job_id` as submit or element_id gave it,
   * `script_name` the script it was submitted as.  NULL when job_id is not
   * one of this scheduler's.  The script is not in it: the caller named
   * that (an array's elements share one).  The file that holds the
   * agent's stderr comes last (HTCondor's .err after its .out). */
  GStrv (*proxy_logs) (const char *job_name, const char *job_id, const char *script_name);
} DatcSchedulerClass;

/* ---- the drivers (one line per driver .c) --------------------------- */

extern const DatcTransportClass datc_transport_local;
extern const DatcTransportClass datc_transport_ssh;
extern const DatcSchedulerClass datc_scheduler_fork;
extern const DatcSchedulerClass datc_scheduler_slurm;
extern const DatcSchedulerClass datc_scheduler_sge;
extern const DatcSchedulerClass datc_scheduler_pbs;
extern const DatcSchedulerClass datc_scheduler_condor;
extern const DatcSchedulerClass datc_scheduler_lsf;

/* ---- registry ------------------------------------------------------- */

const DatcTransportClass *datc_transport_lookup (const char *name);
const DatcSchedulerClass *datc_scheduler_lookup (const char *name);
/* Commands the local transport runs start with this soft RLIMIT_NOFILE
 * (datc_site_set_child_fd_limit). */
void datc_transport_local_set_child_fd_limit (guint64 soft);

/* "local, ssh" for error messages (transfer full). */
gchar *datc_transport_known_names (void);
gchar *datc_scheduler_known_names (void);

/* ---- helpers for drivers (site.c) ----------------------------------- */

/* Largest scheduler answer (stdout or stderr) a parser will look at; a
 * bigger one is a DATC_SITE_ERROR_PARSE, never an allocation. */
#define DATC_SITE_ANSWER_MAX (16u * 1024u * 1024u)

/* How much of a command or of its output an error message quotes. */
#define DATC_SITE_QUOTE_MAX 200u

/* A command line for an error message: arguments shell-quoted where they
 * need it, shortened to DATC_SITE_QUOTE_MAX (transfer full). */
gchar *datc_site_describe_argv (const char *const *argv);

/* Output for an error message: trimmed, control characters escaped,
 * shortened to DATC_SITE_QUOTE_MAX; "(nothing)" when empty.  `bytes` may be
 * NULL (transfer none; returns transfer full). */
gchar *datc_site_quote_output (GBytes *bytes);

/* `bytes` (may be NULL: empty) as a NUL-terminated string for a parser.
 * Fails with DATC_SITE_ERROR_PARSE when it is larger than
 * DATC_SITE_ANSWER_MAX or holds a NUL byte; `what` names it ("stdout"). */
gboolean datc_site_answer_text (GBytes *bytes, const char *what, gchar **text, GError **error);

/* The error parsers raise for a command that exited non-zero:
 * DATC_SITE_ERROR_COMMAND "<what> exited with status N: <stderr>", the
 * stderr's lines kept as lines (each after "\n  "), at most 8 of them. */
void datc_site_set_command_error (GError **error, const char *what, const DatcCommandResult *res);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DatcCommandResult, datc_command_result_clear)

G_END_DECLS
