/* provisioner.h: the site manager.  Keeps sites supplied with proxies
 * while work remains, and makes sure none is left when the campaign ends.
 * Every proxy submitted is journaled through the ledger, so a restarted
 * master still knows (and at the end cancels) what an earlier one left on
 * a site.
 *
 * Per site: up to max_proxies proxies of slots_per_proxy slots; states
 * polled in one command per site every poll interval (sooner when one of
 * its agents leaves; backing off while polls fail); a proxy whose
 * walltime is near gets its replacement submitted ahead of time; pending
 * proxies are cancelled as soon as the work left fits in the slots already
 * running (but one, or one submitted ahead, while running tasks are
 * expected to outlive their proxy's walltime); failing sites back off and
 * are shown degraded.  How tasks meet
 * proxies is the mode (see DatcMode). */
#pragma once

#include <glib.h>
#include <zmq.h>
#include "clock.h"
#include "dispatcher.h"
#include "driver.h"
#include "relay.h"
#include "waitcache.h"
#include "ledger.h"
#include "trace.h"

G_BEGIN_DECLS

typedef enum {
  DATC_MODE_PULL = 0, /* DA-TC: any agent pulls any task */
  DATC_MODE_STATIC,   /* the bag is split across sites by capacity before anything runs */
  DATC_MODE_DIRECT,   /* one batch job per task, bound to it when submitted */
} DatcMode;

/* "pull", "static", "direct" -> mode; FALSE for anything else. */
gboolean datc_mode_parse (const char *text, DatcMode *mode);
const char *datc_mode_name (DatcMode mode);

/* Pending proxies move (migrate_after of SITES.ini): until a site's
 * queue waits bound it, after this long; and never. */
#define DATC_MIGRATE_DEFAULT_S 600u
#define DATC_MIGRATE_NEVER G_MAXUINT

typedef struct {
  gchar *name;
  DatcSite *site; /* owned */
  guint slots_per_proxy;
  guint max_proxies;
  guint walltime_s;        /* 0: none */
  guint poll_s;            /* 0: the provisioner's default */
  guint command_timeout_s; /* 0: DATC_SITE_COMMAND_TIMEOUT_MS */
  guint connect_wait_s;    /* 0: DATC_CONNECT_WAIT_S */
  guint migrate_after_s;   /* a proxy queued this long moves (pull); 0: the site's
                            * QBETS bound, else DATC_MIGRATE_DEFAULT_S; DATC_MIGRATE_NEVER */
  guint calls_per_minute;  /* scheduler commands in any minute; 0: no limit;
                            * DATC_SITE_CALLS_DEFAULT: the scheduler's default */
  gchar *queue, *submit_args;
  gchar *workdir;        /* on the site; may start with ~/ until the site is prepared */
  gboolean make_workdir; /* made and checked on the site (workdir.h) before anything goes
                          * there; workdir is then the absolute path it resolved to */
  gchar *agent_path;     /* datc-agent on the site (set after the upload when upload_from) */
  gchar *upload_from;    /* agent = upload: the local binary copied to the site, or NULL */
  gchar *key_file;       /* agent key on the site (tcp only) */
  GBytes *key_data;      /* put at key_file (mode 0600) before the first submit, or NULL */
  DatcRelay *relay;      /* reach = relay: started after the upload, before the first
                          * submit; its endpoint is the one this site's agents get */
} DatcSiteSpec;

void datc_site_spec_free (DatcSiteSpec *spec);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcSiteSpec, datc_site_spec_free)

/* The budget of scheduler commands when SITES.ini does not say: one every
 * 5 s on average for a batch system, none for fork (the user's own
 * machine). */
#define DATC_SITE_CALLS_DEFAULT G_MAXUINT
#define DATC_SITE_CALLS_PER_MINUTE 12u

/* A proxy the scheduler says runs and whose agent has not connected this
 * long after has its log read on the site (SITES.ini connect_wait): an
 * agent that cannot reach the master says so there. */
#define DATC_CONNECT_WAIT_S 60u

typedef struct DatcProvisioner DatcProvisioner;

/* The commands the provisioner has a site run (each on the site's worker
 * thread), as driver.h declares them: the seam where a unit test
 * (test-provisioner.c) answers submits, polls and cancels itself. */
typedef struct {
  gboolean (*submit) (DatcSite *site, const DatcProxyRequest *req, const char *script_name,
                      gchar **job_id, GError **error);
  gboolean (*submit_array) (DatcSite *site, const DatcProxyRequest *req, guint k,
                            const char *script_name, GStrv *element_ids, GError **error);
  gboolean (*lookup) (DatcSite *site, const char *job_name, gchar **job_id, GError **error);
  gboolean (*lookup_array) (DatcSite *site, const char *job_name, guint k, GStrv *element_ids,
                            GError **error);
  gboolean (*poll_reasons) (DatcSite *site, const char *const *ids, DatcProxyState *states,
                            gchar **reasons, GError **error);
  gboolean (*cancel) (DatcSite *site, const char *const *ids, GError **error);
  gboolean (*run) (DatcSite *site, const char *const *argv, DatcCommandResult *res, GError **error);
} DatcSiteCalls;

typedef struct {
  const char *endpoint;      /* where agents connect */
  const char *server_public; /* or NULL for ipc */
  const char *agent_args;    /* extra agent arguments (--exec none, ...) or NULL */
  guint poll_ms;             /* default poll interval of a site */
  DatcMode mode;
  DatcTrace *trace;         /* proxy and site events (transfer none), or NULL */
  guint give_up_s;          /* see datc_provisioner_cannot_run; 0: never */
  gboolean keep_site_files; /* leave every proxy script and log on the sites */
  DatcWaitCache *waits;     /* queue waits of earlier campaigns, kept up to date
                             * (transfer none), or NULL */
  const DatcClock *clock;   /* (transfer none) NULL: the system's; a unit test's fake */
  /* (transfer none) NULL: driver.h's.  A unit test's fake, which answers at
   * once: each command then runs on the caller's thread when it is posted,
   * and its outcome is taken at the next tick, as a worker's would be. */
  const DatcSiteCalls *site_calls;
} DatcProvisionerOptions;

/* Takes ownership of the specs (DatcSiteSpec*).  Sets the mode up in the
 * ledger and the dispatcher (static: splits the bag; direct: one task per
 * agent), so call it before the first dispatch. */
DatcProvisioner *datc_provisioner_new (DatcLedger *ledger, DatcDispatcher *dispatcher,
                                       GPtrArray *specs, const DatcProvisionerOptions *options);
void datc_provisioner_free (DatcProvisioner *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcProvisioner, datc_provisioner_free)

/* Polls, submits and cancels as needed.  Errors are logged per site, never
 * fatal.  Cheap to call on every loop turn: it decides at most every
 * DATC_PROVISIONER_PERIOD_MS. */
#define DATC_PROVISIONER_PERIOD_MS 50
void datc_provisioner_tick (DatcProvisioner *p);
/* Each site's commands run on a worker thread of its own: their outcomes
 * arrive on these sockets (ZMQ_POLLIN), which the loop polls beside its
 * others so that it wakes for them; datc_provisioner_tick takes them. */
void datc_provisioner_poll_items (DatcProvisioner *p, GArray *items);
/* Milliseconds until the provisioner wants a tick (a poll brought forward,
 * a plan held back by the period), -1 when nothing is due: the loop must
 * not sleep past it, or a direct-mode site waits for the loop's other
 * timers (up to a second) between one job's end and the next submit. */
int datc_provisioner_next_timeout_ms (DatcProvisioner *p);
/* Proxies submitted and not seen ended. */
guint datc_provisioner_alive (DatcProvisioner *p);
/* Adds "mode" and "sites": [{name, state, last_error, proxies, proxies_pending,
 * proxies_running, proxies_expiring, agents, slots_per_proxy, max_proxies,
 * done, submit_failures, proxies_died_early, proxies_submitted,
 * proxies_cancelled, commands (every command on the site), scheduler_calls
 * (submit, poll, cancel and lookup commands), commands_by_kind {submit,
 * poll, cancel, put, lookup}, scheduler_calls_per_1000_tasks (null before
 * a task is done there), max_calls_per_minute (null: no limit),
 * calls_last_minute (budget taken: a submit takes 2), waiting_for_calls
 * (a submit waits for the budget), queue_wait_s}] to an object being
 * built. */
void datc_provisioner_describe (DatcProvisioner *p, JsonBuilder *b);

/* TRUE (and *why, transfer full: each site and its last error, a line
 * each) once no site has been able to run the campaign for the options'
 * give_up_s: work waits, every site is degraded, no agent is connected.
 * Proxies waiting in a queue are no reason: their site is not degraded.
 * Cheap: call it on every loop turn. */
gboolean datc_provisioner_cannot_run (DatcProvisioner *p, gchar **why);

/* The end of every run, whatever ended it: cancels every proxy still
 * alive (`why` in the trace) and polls until all have ended, then removes
 * the agent key from each site left without proxies, and from each
 * site's workdir the scripts and logs of proxies that ended well (unless
 * keep_site_files; one command per site; those of proxies that failed
 * stay), all within `timeout_ms` (each command's timeout is cut to the
 * time left).  Every proxy and key left is logged.  Returns TRUE when
 * nothing is left. */
gboolean datc_provisioner_shutdown (DatcProvisioner *p, const char *why, guint timeout_ms);
/* While it waits for the sites (shutdown, and freeing workers stuck in a
 * command), the provisioner also polls `items` (copied) and calls
 * `serve (data)` after each wake-up: the loop's control socket, so that
 * `datc status` is answered to the very end.  Pass NULL to stop. */
void datc_provisioner_serve_while_waiting (DatcProvisioner *p, const zmq_pollitem_t *items,
                                           guint n_items, void (*serve) (gpointer data),
                                           gpointer data);

G_END_DECLS
