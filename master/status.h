/* status.h: what `datc status` shows, built by the running master (live) or
 * from the journal when none runs (offline).  One JSON object:
 *   {"dir", "master": {"running", "open"},
 *    "tasks": {"total","queued","running","prefetched","done","failed","cancelled"},
 *   ("running": started on an agent; "prefetched": handed to an agent that
 *   has not started them yet, live only),
 *    "sites": [...], "agents": [...], "rate_per_s", "eta_s" (null: unknown)}
 * Live, each site has "proxies_queued" (proxies the scheduler last said
 * are pending, their agent not here) and "pending_reasons" ({reason:
 * count} of those, in the scheduler's words, where its poll says).
 * Offline, "sites" holds the sites the trace saw degraded: {name, state,
 * last_error}, state "ok" when a site_ok came after.
 * and a one-line form for the progress line. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdio.h>

#include "dispatcher.h"
#include "ledger.h"
#include "provisioner.h"

G_BEGIN_DECLS

/* Completions over the last minute. */
typedef struct DatcRate DatcRate;
DatcRate *datc_rate_new (void);
void datc_rate_free (DatcRate *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcRate, datc_rate_free)
/* Records that `finished` tasks have ended so far (call often; it keeps one
 * sample per second). */
void datc_rate_sample (DatcRate *r, guint64 finished);
/* Tasks per second over the last minute (0 before two samples). */
double datc_rate_per_s (DatcRate *r);

/* Live status as JSON text, the reply to `status` (transfer full).  d, p
 * and rate may be NULL.  "agents_total" counts the connected agents and
 * "agents" lists the first `agents_max` of them (G_MAXUINT: all), by site
 * then id: a terminal shows a few, and 1,000 of them cost the master ~2
 * ms to write and the reader ~10 ms to parse.  The agents' list is
 * written as text (datc_dispatcher_describe_agents), the rest built as
 * nodes. */
gchar *datc_status_text (const char *dir, DatcLedger *ledger, DatcDispatcher *d, DatcProvisioner *p,
                         DatcRate *rate, gboolean running, gboolean open, guint agents_max);
/* The same, parsed (transfer full). */
JsonNode *datc_status_build (const char *dir, DatcLedger *ledger, DatcDispatcher *d,
                             DatcProvisioner *p, DatcRate *rate, gboolean running, gboolean open,
                             guint agents_max);
/* What a master says while it loads its campaign (`phase`), before it
 * can say anything else: `replayed` of `journal_bytes` bytes of the
 * journal replayed so far (transfer full).  Built on the control
 * socket's loading thread: it reads nothing else. */
typedef enum {
  DATC_STATUS_LOADING_TASKS,   /* reading the task file */
  DATC_STATUS_LOADING_JOURNAL, /* replaying the journal */
} DatcStatusLoading;
JsonNode *datc_status_loading (const char *dir, DatcStatusLoading phase, guint64 replayed,
                               guint64 journal_bytes);
/* Status of a campaign no master runs, from its journal (read-only). */
JsonNode *datc_status_offline (const char *dir, GError **error);

/* Human-readable form of a status object. */
void datc_status_print (JsonObject *status, FILE *out);
/* The reply to `status` as its "format" asks (transfer full), given the
 * status as JSON text (`status_json`, transfer full): that text for
 * "json" or none; for "text", {"text": what datc_status_print makes of
 * it}, which the fast `datc status` (front.c) prints without parsing JSON
 * itself; an error reply for anything else. */
gchar *datc_status_reply (JsonObject *request, gchar *status_json);
/* "done 12 / failed 0 / running 4 / queued 84 | 3.1/s | ETA 27s | 2 agents", and
 * when no task runs and proxies wait: " | waiting in queue: slurm 2 (Resources)" */
gchar *datc_status_line (JsonObject *status);

G_END_DECLS
