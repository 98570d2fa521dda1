/* reach.h: says on stderr, once per distinct failure, why the agent's
 * socket cannot reach the master.  ZeroMQ connects in the background and
 * retries in silence; an agent whose master is unreachable (a wrong
 * advertise, a firewall) would otherwise sit in its batch job with an
 * empty log.  The master reads that line from the proxy's log (see
 * master/provisioner.c), so its shape is fixed:
 *
 *   datc-agent on HOST: cannot reach ENDPOINT: WHY (retrying)
 *
 * and, once the socket connects after such a line,
 *
 *   datc-agent on HOST: reached ENDPOINT */
#pragma once

#include <glib.h>
#include <poll.h>

G_BEGIN_DECLS

typedef struct DatcReach DatcReach;

/* What the master looks for in a proxy's log. */
#define DATC_REACH_FAILED ": cannot reach "
#define DATC_REACH_RETRYING " (retrying)"

/* Watches `sock` (a ZeroMQ socket of `ctx`, before its zmq_connect) through
 * a socket monitor.  Only the thread that owns `sock` may call the rest. */
DatcReach *datc_reach_new (void *ctx, void *sock, const char *endpoint, const char *host,
                           GError **error);
void datc_reach_free (DatcReach *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcReach, datc_reach_free)

/* Fills up to DATC_REACH_FDS entries to poll; returns how many. */
#define DATC_REACH_FDS 2
guint datc_reach_pollfds (DatcReach *r, struct pollfd *fds);
/* When datc_reach_dispatch wants to run next (monotonic us), or G_MAXINT64. */
gint64 datc_reach_next_us (DatcReach *r);
/* Takes the monitor's events and a probe's outcome, starts a probe when
 * one is due; prints what is new.  Call it when one of its fds polled
 * ready or at datc_reach_next_us. */
void datc_reach_dispatch (DatcReach *r, gint64 now);

G_END_DECLS
