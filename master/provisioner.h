/* provisioner.h: keeps sites supplied with proxies while work remains and
 * makes sure none is left when the campaign ends.  Every proxy submitted is
 * journaled through the ledger, so a restarted master still knows (and at
 * the end cancels) what an earlier one left on a site.
 *
 * This is the core's provisioning: submit while queued work exceeds the
 * free and pending capacity, up to max_proxies per site; poll in one
 * command per site; cancel everything at the end. */
#pragma once

#include <glib.h>
#include "dispatcher.h"
#include "driver.h"
#include "ledger.h"
#include "trace.h"

G_BEGIN_DECLS

typedef struct {
  gchar *name;
  DatcSite *site;          /* owned */
  guint slots_per_proxy;
  guint max_proxies;
  guint walltime_s;        /* 0: none */
  gchar *queue, *submit_args;
  gchar *workdir;          /* on the site */
  gchar *agent_path;       /* datc-agent on the site */
  gchar *key_file;         /* agent key on the site (tcp only) */
} DatcSiteSpec;

void datc_site_spec_free (DatcSiteSpec *spec);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcSiteSpec, datc_site_spec_free)

typedef struct DatcProvisioner DatcProvisioner;

typedef struct {
  const char *endpoint;        /* where agents connect */
  const char *server_public;   /* or NULL for ipc */
  const char *agent_args;      /* extra agent arguments (--exec none, ...) or NULL */
  guint poll_ms;               /* how often proxy states are polled */
  DatcTrace *trace;            /* proxy events (transfer none), or NULL */
} DatcProvisionerOptions;

/* Takes ownership of the specs (DatcSiteSpec*). */
DatcProvisioner *datc_provisioner_new (DatcLedger *ledger, GPtrArray *specs,
                                       const DatcProvisionerOptions *options);
void datc_provisioner_free (DatcProvisioner *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcProvisioner, datc_provisioner_free)

/* Submits and polls as needed.  Errors are logged per site, never fatal. */
void datc_provisioner_tick (DatcProvisioner *p, DatcDispatcher *d);
/* Proxies submitted and not seen ended. */
guint datc_provisioner_alive (DatcProvisioner *p);
/* Adds "sites": [{name, proxies, proxies_pending, proxies_running, agents,
 * slots, done, degraded}] to an object being built. */
void datc_provisioner_describe (DatcProvisioner *p, DatcDispatcher *d, JsonBuilder *b);

/* Cancels every proxy still alive and polls until all have ended or
 * `timeout_ms` passed.  Returns TRUE when nothing is left. */
gboolean datc_provisioner_shutdown (DatcProvisioner *p, guint timeout_ms);

G_END_DECLS
