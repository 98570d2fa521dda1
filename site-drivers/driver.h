/* driver.h: how the master reaches a cluster.  A site is a transport (how
 * commands run and files move: local, ssh) times a scheduler (how a proxy
 * becomes a batch job: fork, slurm, sge, ...).  Both are compiled-in
 * `static const` tables of function pointers, looked up by name in one
 * registry (registry.c); the core only calls the datc_site_* wrappers.
 *
 * Schedulers never run anything themselves: they turn a request into an
 * argv for the transport and parse what came back.  That keeps every
 * parser testable on recorded output. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DATC_SITE_ERROR (datc_site_error_quark ())
GQuark datc_site_error_quark (void);

typedef enum {
  DATC_SITE_ERROR_CONFIG,    /* unknown driver, bad value */
  DATC_SITE_ERROR_TRANSPORT, /* could not run the command at all */
  DATC_SITE_ERROR_COMMAND,   /* the command ran and failed: message has its stderr */
  DATC_SITE_ERROR_TIMEOUT,   /* the command did not finish in time */
  DATC_SITE_ERROR_PARSE,     /* the scheduler's answer made no sense */
} DatcSiteError;

/* ---- transports ---------------------------------------------------- */

typedef struct {
  gint exit_status; /* as the command's own exit code */
  GBytes *out;
  GBytes *err;
} DatcCommandResult;

void datc_command_result_clear (DatcCommandResult *res);

/* ---- schedulers ---------------------------------------------------- */

typedef enum {
  DATC_PROXY_PENDING = 0,
  DATC_PROXY_RUNNING,
  DATC_PROXY_FINISHED,
  DATC_PROXY_FAILED,
  DATC_PROXY_UNKNOWN,
} DatcProxyState;

const char *datc_proxy_state_name (DatcProxyState state);

/* What a proxy asks of the batch system. */
typedef struct {
  const char *name; /* job name identifying campaign + proxy */
  guint slots;
  guint walltime_s;          /* 0: none */
  const char *queue;         /* or NULL */
  const char *submit_args;   /* extra arguments, split like a shell would, or NULL */
  const char *workdir;       /* directory on the site for the script and its log */
  const char *agent_command; /* the shell command line that starts the agent */
  /* Hosts the proxy must not run on (NULL-ended, or NULL), each a valid
   * host name (datc_batch_host_is_valid): nodes where tasks kept failing
   * fast.  Each scheduler says it its own way; those that cannot ignore
   * it (datc_scheduler_can_exclude_hosts says why). */
  const char *const *exclude_hosts;
} DatcProxyRequest;

/* Proxies as one job array (optional per scheduler, see `arrays` below).
 * An array of k proxies is one script submitted once; element i (1..k)
 * runs the script with DATC_ARRAY_INDEX=i exported (from SLURM_ARRAY_TASK_ID,
 * SGE_TASK_ID, PBS_ARRAY_INDEX or LSB_JOBINDEX) before the agent command,
 * so that command can give each element its own proxy name:
 * `--proxy NAME-"$DATC_ARRAY_INDEX"` (the script runs it with sh).  A script
 * that finds no valid index exits 1 rather than start an agent under a
 * wrong name. */
#define DATC_ARRAY_INDEX_VAR "DATC_ARRAY_INDEX"
/* Elements per array: 2 (one proxy is a plain job; PBS has no array of
 * one) to DATC_ARRAY_MAX (LSF's and Slurm's default limits are 1000). */
#define DATC_ARRAY_MIN 2u
#define DATC_ARRAY_MAX 1000u

/* ---- registry ------------------------------------------------------ */

/* The drivers' tables stay inside site-drivers/ (drivers-private.h); the
 * rest of datc asks these. */

/* A host name a proxy request may exclude: 1 to 253 bytes of letters,
 * digits, '.', '-' and '_', not starting with '-' (it goes into
 * directives and requirement expressions unquoted). */
gboolean datc_proxy_host_is_valid (const char *host);

/* Whether the scheduler `name` can keep a proxy off some hosts
 * (DatcProxyRequest.exclude_hosts); when not, *why (may be NULL) says why
 * (transfer none). */
gboolean datc_scheduler_can_exclude_hosts (const char *name, const char **why);

/* Commands the local transport runs start with this soft RLIMIT_NOFILE
 * (never above their hard limit), for a caller that raised its own to
 * hold many connections: what it starts keeps the user's limit.  0 (the
 * default) leaves it as inherited. */
void datc_site_set_child_fd_limit (guint64 soft);
gboolean datc_transport_exists (const char *name);
gboolean datc_scheduler_exists (const char *name);
/* The programs a scheduler runs on a site (what `datc sites check` looks
 * for): its table's list, else argv[0] of its submit, poll and cancel.
 * NULL for an unknown scheduler (transfer full). */
GStrv datc_scheduler_programs (const char *name);
/* Whether the scheduler can be asked about a queue
 * (datc_site_query_queue).  When it cannot, *why (may be NULL) says why
 * ("fork has no queues"; transfer none) and the answer of
 * datc_scheduler_takes_queue is all there is to know. */
gboolean datc_scheduler_has_queues (const char *name, const char **why);
/* Whether a proxy of this scheduler naming `queue` can be written at all
 * (condor refuses any queue, fork ignores it). */
gboolean datc_scheduler_takes_queue (const char *name, const char *queue);

/* ---- a site: one transport instance and one scheduler ------------ */

typedef struct DatcSite DatcSite;

/* name: the site's name; transport/scheduler: driver names. */
DatcSite *datc_site_new (const char *name, const char *transport, const char *scheduler,
                         GKeyFile *config, const char *group, GError **error);
void datc_site_free (DatcSite *site);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcSite, datc_site_free)

const char *datc_site_name (DatcSite *site);

/* Writes the proxy script under req->workdir on the site, submits it and
 * returns the job id (transfer full). */
gboolean datc_site_submit (DatcSite *site, const DatcProxyRequest *req, const char *script_name,
                           gchar **job_id, GError **error);
/* Whether the scheduler can submit proxies as job arrays. */
gboolean datc_site_scheduler_has_arrays (DatcSite *site);
/* Writes the array's proxy script under req->workdir, submits it as k
 * elements (DATC_ARRAY_MIN..DATC_ARRAY_MAX) in one command and returns
 * their ids (transfer full, k of them, element i+1 at [i]), which poll and
 * cancel take like any job id.  A submit lost in transit is looked up by
 * req->name, as datc_site_submit does.  DATC_SITE_ERROR_CONFIG for a
 * scheduler without arrays. */
gboolean datc_site_submit_array (DatcSite *site, const DatcProxyRequest *req, guint k,
                                 const char *script_name, GStrv *element_ids, GError **error);
/* Finds the array named `job_name` (a resume, a submit lost in transit):
 * *element_ids its k element ids, or NULL when the scheduler has no such
 * array.  As reliable as the scheduler's memory (see parse_lookup). */
gboolean datc_site_lookup_array (DatcSite *site, const char *job_name, guint k, GStrv *element_ids,
                                 GError **error);
/* states[i] for ids[i], one command for all of them. */
gboolean datc_site_poll (DatcSite *site, const char *const *ids, DatcProxyState *states,
                         GError **error);
/* The same command, and reasons[i] (transfer full, NULL for none) why a
 * pending ids[i] waits, where the scheduler's poll answer says
 * (parse_poll_reasons); `reasons` has a slot per id, set to NULL first. */
gboolean datc_site_poll_reasons (DatcSite *site, const char *const *ids, DatcProxyState *states,
                                 gchar **reasons, GError **error);
gboolean datc_site_cancel (DatcSite *site, const char *const *ids, GError **error);
/* Writes `data` to `path` on the site (atomically, with `mode`). */
gboolean datc_site_put (DatcSite *site, GBytes *data, const char *path, int mode, GError **error);
/* Runs one command on the site (its exit status is in res, not an error). */
gboolean datc_site_run (DatcSite *site, const char *const *argv, DatcCommandResult *res,
                        GError **error);
/* Finds the job named `job_name` (the proxy request's name): *job_id is its
 * id, or NULL when the scheduler has no such job.  A submit that failed in
 * transit (transport error, timeout) is checked this way before it is
 * reported as failed, so a proxy is never submitted twice on a guess. */
gboolean datc_site_lookup (DatcSite *site, const char *job_name, gchar **job_id, GError **error);
/* Whether the scheduler can find a job by its name (not fork: its proxies
 * are the caller's own processes). */
gboolean datc_site_scheduler_can_lookup (DatcSite *site);
/* Asks the scheduler whether `queue` exists: *exists and *answer (transfer
 * full) as the scheduler's parse_queue says.  DATC_SITE_ERROR_CONFIG for a
 * scheduler without queues (its no_queues in the message) or a name it
 * refuses; otherwise the errors of a command and its parser. */
gboolean datc_site_query_queue (DatcSite *site, const char *queue, gboolean *exists, gchar **answer,
                                GError **error);
/* The absolute path of job `job_id`'s log on the site (the agent's stderr
 * is there), for the request whose script was `script_name` in
 * req->workdir (an array's: `job_id` is an element's); NULL when it
 * cannot be known (transfer full).  Runs nothing. */
gchar *datc_site_proxy_log (DatcSite *site, const DatcProxyRequest *req, const char *script_name,
                            const char *job_id);
/* The logs a proxy leaves in the workdir (the scheduler's proxy_logs):
 * plain file names (transfer full), or NULL when the scheduler cannot
 * name them for that job id. */
GStrv datc_site_proxy_logs (DatcSite *site, const char *job_name, const char *job_id,
                            const char *script_name);
/* Removes the files `names` (plain file names: no '/', not "." or "..")
 * from `workdir` (absolute) on the site with `rm -f`: one command for
 * hundreds of names (more only past what one command line may hold),
 * never anything outside workdir.  A name that is not plain is
 * DATC_SITE_ERROR_CONFIG, and nothing is removed. */
gboolean datc_site_remove_files (DatcSite *site, const char *workdir, const char *const *names,
                                 GError **error);
/* ---- a long-lived command as a byte stream (the relay's) ----------- */

typedef struct _DatcSiteStream DatcSiteStream;

/* Starts argv on the site with its stdin and stdout as a stream, within
 * the site's command timeout.  Over ssh it is an exec channel on the
 * site's connection, which then serves the stream alone: give a stream
 * a DatcSite of its own (no command may run on it until the stream is
 * closed).  DATC_SITE_ERROR_CONFIG when the transport has no streams. */
DatcSiteStream *datc_site_open_stream (DatcSite *site, const char *const *argv, GError **error);
/* Poll it for POLLIN: bytes, or the stream's end, may be waiting.  Read
 * until datc_site_stream_read returns 0 before polling: bytes the
 * transport already took off the fd do not show there. */
int datc_site_stream_fd (DatcSiteStream *s);
/* Never blocks: bytes read (> 0), 0 when none is there yet, -1 with an
 * error (DATC_SITE_ERROR_TRANSPORT) once the command ended or the
 * connection is lost. */
gssize datc_site_stream_read (DatcSiteStream *s, guint8 *buf, gsize len, GError **error);
/* Writes all of buf within timeout_ms (DATC_SITE_ERROR_TIMEOUT), or fails
 * (DATC_SITE_ERROR_TRANSPORT). */
gboolean datc_site_stream_write (DatcSiteStream *s, const guint8 *buf, gsize len, guint timeout_ms,
                                 GError **error);
/* What the command wrote to stderr since the last call (at most 64 KiB
 * kept), or NULL when nothing (transfer full). */
gchar *datc_site_stream_take_stderr (DatcSiteStream *s);
/* Ends the stream: closes the command's stdin, gives it timeout_ms to
 * exit, then kills it (and, over ssh, drops the connection). */
void datc_site_stream_close (DatcSiteStream *s, guint timeout_ms);

/* Timeout for every command on this site (default DATC_SITE_COMMAND_TIMEOUT_MS). */
void datc_site_set_command_timeout (DatcSite *site, guint timeout_ms);
/* Whether a poll or cancel that failed in the transport (the connection
 * dropped) runs once more (the default).  A caller that counts every
 * scheduler command against a budget turns it off: a command cut off
 * mid-way may have reached the scheduler, and the retry would be a call
 * it did not count. */
void datc_site_set_retry (DatcSite *site, gboolean retry);
const char *datc_site_scheduler_name (DatcSite *site);
const char *datc_site_transport_name (DatcSite *site);

/* Longest pending reason kept from a scheduler's answer, in bytes. */
#define DATC_SITE_REASON_MAX 200u

/* Timeout for every scheduler command, ms. */
#define DATC_SITE_COMMAND_TIMEOUT_MS 30000u

G_END_DECLS
