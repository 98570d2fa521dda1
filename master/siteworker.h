/* siteworker.h: one thread per site that runs everything that talks to
 * the cluster (SSH, submit, poll, cancel, uploads), so that a login node
 * that takes 30 s to answer, or hangs, never holds up the master's loop:
 * dispatch, heartbeats, acknowledgements and the control socket go on.
 *
 * The loop posts a job (a function to run on the worker with the site,
 * and one to run back on the loop with the outcome); the worker runs its
 * jobs one after the other, in order, and hands each back over an inproc
 * socket that the loop polls beside its others.  A job's data belongs to
 * the worker from post until it comes back, then to the loop again: the
 * two threads never share state, only hand it over.  The DatcSite itself
 * is used only by the worker once it exists. */
#pragma once

#include <glib.h>
#include "driver.h"

G_BEGIN_DECLS

typedef struct DatcSiteWorker DatcSiteWorker;

/* Runs on the worker thread: talks to the site, fills `data`. */
typedef void (*DatcSiteJobRun) (DatcSite *site, gpointer data);
/* Runs on the loop's thread once the job is back: `owner` as given to
 * datc_site_worker_collect, `data` as posted (the callback frees it). */
typedef void (*DatcSiteJobDone) (gpointer owner, gpointer data);

/* Starts the worker of `site` (transfer none: it must outlive the worker,
 * unless the worker is left busy at exit, see _free).  Each worker has a
 * ZeroMQ context of its own (inproc only, no I/O thread), so that one left
 * hanging at exit never holds up the master's context. */
DatcSiteWorker *datc_site_worker_new (DatcSite *site, GError **error);
/* Stops the worker, running done(owner, ...) for the jobs that come back
 * meanwhile.  One still busy after `grace_ms` (a command that hangs) is
 * left to the process's exit with its context, and FALSE is returned: the
 * caller must then not free the site. */
gboolean datc_site_worker_free (DatcSiteWorker *w, gpointer owner, guint grace_ms);

void datc_site_worker_post (DatcSiteWorker *w, DatcSiteJobRun run, DatcSiteJobDone done,
                            gpointer data);
/* The loop's end of the channel, to poll for ZMQ_POLLIN. */
void *datc_site_worker_socket (DatcSiteWorker *w);
/* Runs done() for every job that came back; returns how many.  Never
 * blocks. */
guint datc_site_worker_collect (DatcSiteWorker *w, gpointer owner);
/* Since when (monotonic) the job the worker runs now has been running; 0
 * when idle. */
gint64 datc_site_worker_busy_since (DatcSiteWorker *w);

G_END_DECLS
