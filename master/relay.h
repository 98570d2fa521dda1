/* relay.h: the master's end of a site in relay mode (`reach = relay`).
 *
 * Compute nodes that cannot reach the master reach the login node; the
 * master reaches its sshd.  A DatcRelay keeps one SSH session to the
 * login node (a DatcSite of its own) running `datc-agent relay` there
 * (worker-agent/relay.h), which listens where agents connect and carries
 * each agent connection's bytes over the session in the frames of
 * protocol/relayframe.h.  Here each carried connection becomes a TCP
 * connection to the dispatcher, so the ROUTER sees the agents as if they
 * had connected themselves: CurveZMQ runs end to end and the login node
 * sees ciphertext only.
 *
 * A thread per relay pumps the bytes.  It pings the relay every ping_ms;
 * a session that says nothing for lost_ms, or whose stream ends, is lost:
 * its carried connections are closed (agents reconnect and resend what
 * was not acknowledged) and the session and the relay are started again,
 * with backoff, on the same port, until the relay is freed. */
#pragma once

#include <glib.h>

#include "driver.h"

G_BEGIN_DECLS

typedef struct DatcRelay DatcRelay;

typedef struct {
  const char *site_name;
  DatcSite *site;        /* the relay's own connection to the site (transfer full) */
  const char *target;    /* the dispatcher's endpoint "tcp://HOST:PORT" (a wildcard
                          * host means loopback) */
  const char *listen;    /* relay_address on the login node, or NULL: every address */
  guint ping_ms;         /* 0: 5000 */
  guint lost_ms;         /* 0: 15000 */
  guint idle_timeout_s;  /* the relay's own limit without a word from us; 0: 30 */
  const char *port_file; /* the relay's port, kept across masters: read here (a
                          * resumed campaign's relay listens where its agents
                          * knew it), written once the relay says; or NULL */
} DatcRelayOptions;

/* NULL with an error when target is not a tcp endpoint it can resolve. */
DatcRelay *datc_relay_new (const DatcRelayOptions *o, GError **error);

/* Starts the relay (once; later calls return the endpoint at once) from
 * `agent_path` on the site, its pid file in `workdir`, and waits for it
 * to listen: *endpoint is where the site's agents connect (transfer
 * full).  Blocks (the site's worker calls it): up to the site's command
 * timeout to start, then hello_ms for the relay to answer.  On failure
 * the relay is not running and a later call tries again. */
gboolean datc_relay_start (DatcRelay *r, const char *agent_path, const char *workdir,
                           guint hello_ms, gchar **endpoint, GError **error);

typedef struct {
  gboolean started; /* datc_relay_start succeeded once */
  gboolean up;      /* a session is carrying connections now */
  guint sessions;   /* sessions started (1 + re-established) */
  guint conns;      /* carried connections open now */
  guint64 conns_total;
  guint64 bytes_to_master, bytes_to_agents;
  gchar *endpoint;   /* or NULL */
  gchar *last_error; /* why the last session ended or failed, or NULL */
} DatcRelayState;

/* A copy, taken under the relay's lock (any thread). */
void datc_relay_state (DatcRelay *r, DatcRelayState *out);
void datc_relay_state_clear (DatcRelayState *s);

/* Says BYE to the relay (which exits and removes its pid file), waits up
 * to 2 s for it, closes the session and joins the thread. */
void datc_relay_free (DatcRelay *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcRelay, datc_relay_free)

G_END_DECLS
