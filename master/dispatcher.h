/* dispatcher.h: the master's side of the wire.  One ROUTER socket; each
 * agent is a DEALER whose routing id is its agent id.  The dispatcher
 * never pushes work: an agent gets at most what its cumulative credit
 * allows.  Results are journaled and committed before they are
 * acknowledged.  TASKS are journaled as dispatched and leave at once,
 * before that record is synced: a master that dies in between finds the
 * task queued, holds queued work back until its agents are back, and
 * re-attaches the task to the agent that holds it (datc_ledger_reattach);
 * see master/README.md, Invariants.
 *
 * TCP endpoints always use CURVE; a ZAP handler (same context, inproc)
 * admits only the agent public keys this campaign issued, each as the
 * site it was issued for (DatcAgentKey). */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "clock.h"
#include "ledger.h"
#include "trace.h"

G_BEGIN_DECLS

#define DATC_DISPATCHER_ERROR (datc_dispatcher_error_quark ())
GQuark datc_dispatcher_error_quark (void);

typedef enum {
  DATC_DISPATCHER_ERROR_ZMQ,    /* a libzmq call failed (message: which, and errno's words) */
  DATC_DISPATCHER_ERROR_KEYS,   /* a tcp endpoint without the campaign's keys */
  DATC_DISPATCHER_ERROR_LISTEN, /* the endpoint cannot be bound (in use, no such address) */
} DatcDispatcherError;

typedef struct DatcDispatcher DatcDispatcher;

/* An agent key the campaign issued.  ZAP admits a site's key as that
 * site (its ZAP user id), and the dispatcher holds its agents to it: a
 * HELLO must name that site, and results and held tasks must be of tasks
 * dispatched to that site's agents.  A key for agents started by hand
 * (site NULL) may name any site but one that has a key of its own. */
typedef struct {
  const char *site; /* NULL: agents started by hand */
  const char *public_z85;
  gboolean revoked; /* refused (a site this run does not use) */
} DatcAgentKey;

typedef struct {
  const char *endpoint;           /* ipc://... or tcp://HOST:PORT (port * or 0: any) */
  const char *server_secret_file; /* master key file; required for tcp */
  const DatcAgentKey *agent_keys; /* n_agent_keys of them; required for tcp */
  guint n_agent_keys;
  guint heartbeat_ms;     /* both directions; at most timeout_ms / 8 */
  guint timeout_ms;       /* silence after which an agent is lost */
  DatcTrace *trace;       /* agent events (transfer none), or NULL */
  guint max_replicas;     /* live copies per task at the end game (0: the default,
                           * DATC_DISPATCHER_MAX_REPLICAS; 1: no replication) */
  const DatcClock *clock; /* (transfer none) NULL: the system's; a unit test's fake */
} DatcDispatcherOptions;

#define DATC_DISPATCHER_MAX_REPLICAS 2

DatcDispatcher *datc_dispatcher_new (void *zmq_ctx, DatcLedger *ledger,
                                     const DatcDispatcherOptions *options, GError **error);
void datc_dispatcher_free (DatcDispatcher *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcDispatcher, datc_dispatcher_free)

/* The endpoint agents connect to (a tcp port resolved), transfer none. */
const char *datc_dispatcher_endpoint (DatcDispatcher *d);
gboolean datc_dispatcher_curve (DatcDispatcher *d);
const char *datc_dispatcher_server_public (DatcDispatcher *d);

/* Appends the zmq_pollitem_t entries to watch (ROUTER, ZAP). */
void datc_dispatcher_poll_items (DatcDispatcher *d, GArray *items);

/* Reads everything waiting on its sockets, without blocking.  FALSE only on
 * a failure that stops the campaign (the ledger could not write). */
gboolean datc_dispatcher_receive (DatcDispatcher *d, GError **error);
/* Heartbeats out, silent agents declared lost. */
void datc_dispatcher_tick (DatcDispatcher *d);
/* Hands out tasks for the credit agents gave and sends them at once (a
 * restarted master re-attaches a dispatch whose record was not synced yet).
 * Commits the ledger in groups: when `force`, when a commit has waited
 * DATC_DISPATCHER_SYNC_DELAY_MS, or when many acknowledgements wait; only
 * then are ACKs sent, so an ACK never precedes the durable result.
 * Returns FALSE when the ledger could not commit.  *synced (may be NULL)
 * says whether it committed. */
#define DATC_DISPATCHER_SYNC_DELAY_MS 20
gboolean datc_dispatcher_flush (DatcDispatcher *d, gboolean force, gboolean *synced,
                                GError **error);
/* Milliseconds until tick() has work. */
int datc_dispatcher_next_timeout_ms (DatcDispatcher *d);
/* `fn` is called between the parts of a turn that take long under load
 * (every few messages received, every few agents served in the hand-out,
 * and in flush once it committed), so that
 * what must not wait for the whole turn is answered: run.c answers
 * `datc status` there.  It must not change the dispatcher, the ledger or
 * the provisioner.  NULL: none. */
typedef void (*DatcDispatcherInterlude) (gpointer data);
void datc_dispatcher_set_interlude (DatcDispatcher *d, DatcDispatcherInterlude fn, gpointer data);

guint datc_dispatcher_agents (DatcDispatcher *d);
/* Free slots of connected agents (slots minus running tasks). */
guint64 datc_dispatcher_free_slots (DatcDispatcher *d);
/* Connected agents of `site` (proxy ids appended to `proxies` if not NULL). */
guint datc_dispatcher_site_agents (DatcDispatcher *d, const char *site, GPtrArray *proxies);

/* Appends the JSON array [{id, site, proxy, host, slots, running,
 * prefetched, done, last_seen_s}] of the connected agents, by site then
 * id, the first `max` of them, to `out`: written as text, since at 1,000
 * agents a node per member cost the status reply ~8 ms of the loop. */
void datc_dispatcher_describe_agents (DatcDispatcher *d, guint max, GString *out);
/* Tasks agents run now, by what they last said (never more than their
 * slots): the rest of what they hold is prefetched. */
guint64 datc_dispatcher_executing (DatcDispatcher *d);
/* Tasks finished (any outcome) by agents of `site`, over the whole run. */
guint64 datc_dispatcher_site_done (DatcDispatcher *d, const char *site);
/* Stops running attempts of cancelled tasks (sent on the next flush). */
void datc_dispatcher_cancel_running (DatcDispatcher *d, GArray *running);

/* Tells every agent to exit (BYE) and forgets them; each answers with its
 * own BYE.  Sent on the next flush. */
void datc_dispatcher_release_all (DatcDispatcher *d, const char *reason);
/* After a failed commit, instead of a flush: sends what is queued to go
 * before a commit (tasks, BYE) and commits nothing, so no ACK or control
 * reply goes out. */
void datc_dispatcher_send_uncommitted (DatcDispatcher *d);
/* Agents that have nothing to do while nothing is queued for them get
 * BYE (but those of a site kept by datc_dispatcher_keep_idle); in direct
 * mode, agents whose one task is done.  In pull mode, once nothing is
 * queued, agents with a free slot are first offered a copy of a running
 * task expected to end later than a copy would (end-game replication,
 * up to max_replicas live copies per task; master/README.md). */
void datc_dispatcher_release_idle (DatcDispatcher *d);
/* While `keep`, idle agents of `site` are not sent away when the bag is
 * empty: tasks running there on proxies near their walltime may come
 * back, and these agents (their replacements) are where they will go. */
void datc_dispatcher_keep_idle (DatcDispatcher *d, const char *site, gboolean keep);

/* The site is done with (every proxy gone): its key is refused from now
 * on, at ZAP and on connections made before, and agents still connected
 * with it are told BYE. */
void datc_dispatcher_revoke_site (DatcDispatcher *d, const char *site);

/* Static mode: the bag is split (datc_ledger_split) and an agent of
 * sites[k] only gets tasks of partition k; agents of other sites get
 * none. */
void datc_dispatcher_split (DatcDispatcher *d, const char *const *sites);

/* Direct mode: every agent runs one task and is then told to leave.  The
 * site manager binds each proxy to its task in the ledger when it submits
 * it (datc_ledger_bind), and an agent gets what the ledger says its proxy
 * is for (datc_ledger_dispatch_bound: an agent of a proxy without a
 * binding, submitted by an earlier master, takes the next queued task). */
void datc_dispatcher_one_task (DatcDispatcher *d);

/* Hosts of `site` its later proxies must not run on (NULL-ended, transfer
 * none, valid until the next receive), or NULL: where FAST_FAILURES_MAX
 * (3) tasks in a row failed (non-zero exit, signal, spawn failure) within
 * a second of their start.  Such a host's agents get RETIRE at once, and
 * any that says HELLO later; a success there before the third resets the
 * count.  A host is drained but not excluded when it is the last the
 * site has run on that is not (the campaign would wait for ever), or its
 * name could not go into a scheduler's request.  Traced `node_excluded`
 * (site, host, why, excluded, agents, note) and said on stderr. */
const char *const *datc_dispatcher_excluded_hosts (DatcDispatcher *d, const char *site);

/* One connected agent, as the site manager sees it. */
typedef struct {
  const char *proxy; /* transfer none: valid until the next receive/flush */
  guint32 slots;
  guint64 running;
  gint64 connected_us;    /* real time of its first HELLO */
  gint64 walltime_end_us; /* 0: none */
  gboolean starved;       /* nothing queued fitted in its time left when it asked */
} DatcAgentLoad;
/* Appends a DatcAgentLoad for each agent of `site` not told to leave. */
void datc_dispatcher_proxy_agents (DatcDispatcher *d, const char *site, GArray *out);

G_END_DECLS
