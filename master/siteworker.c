/* siteworker.c: a thread per site and an inproc PAIR socket between it
 * and the loop.  A message is one Job pointer: the loop sends it, the
 * worker runs it and sends the same pointer back; NULL asks the worker to
 * stop, and comes back when it has.  Ownership of a job travels with its
 * pointer, so nothing is shared and nothing is locked. */
#include "siteworker.h"

#include <errno.h>
#include <zmq.h>

typedef struct {
  DatcSiteJobRun run;
  DatcSiteJobDone done;
  gpointer data;
} Job;

struct DatcSiteWorker {
  DatcSite *site;
  void *ctx;
  void *sock; /* the loop's end */
  gchar *endpoint;
  GThread *thread;
  guint pending;
  gint64 head_since; /* when the job the worker runs now started (about) */
};

static gpointer
worker_main (gpointer p)
{
  DatcSiteWorker *w = p;
  void *s = zmq_socket (w->ctx, ZMQ_PAIR);
  if (s == NULL || zmq_connect (s, w->endpoint) != 0)
    {
      g_warning ("site %s: worker: %s", datc_site_name (w->site), zmq_strerror (errno));
      if (s != NULL)
        zmq_close (s);
      return NULL;
    }
  for (;;)
    {
      Job *j = NULL;
      int n = zmq_recv (s, &j, sizeof j, 0);
      if (n < 0 && errno == EINTR)
        continue;
      if (n != sizeof j)
        break;
      if (j != NULL)
        j->run (w->site, j->data);
      zmq_send (s, &j, sizeof j, 0);
      if (j == NULL)
        break;
    }
  zmq_close (s);
  return NULL;
}

DatcSiteWorker *
datc_site_worker_new (DatcSite *site, GError **error)
{
  static gint serial;
  DatcSiteWorker *w = g_new0 (DatcSiteWorker, 1);
  int zero = 0;
  w->site = site;
  w->ctx = zmq_ctx_new ();
  zmq_ctx_set (w->ctx, ZMQ_IO_THREADS, 0);
  w->endpoint = g_strdup_printf ("inproc://datc-site-worker-%d", g_atomic_int_add (&serial, 1));
  w->sock = zmq_socket (w->ctx, ZMQ_PAIR);
  if (w->sock == NULL || zmq_bind (w->sock, w->endpoint) != 0)
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT,
                   "site %s: cannot start its worker: %s", datc_site_name (site),
                   zmq_strerror (errno));
      if (w->sock != NULL)
        zmq_close (w->sock);
      zmq_ctx_term (w->ctx);
      g_free (w->endpoint);
      g_free (w);
      return NULL;
    }
  zmq_setsockopt (w->sock, ZMQ_LINGER, &zero, sizeof zero);
  g_autofree gchar *name = g_strdup_printf ("site-%.8s", datc_site_name (site));
  w->thread = g_thread_new (name, worker_main, w);
  return w;
}

void
datc_site_worker_post (DatcSiteWorker *w, DatcSiteJobRun run, DatcSiteJobDone done, gpointer data)
{
  Job *j = g_new (Job, 1);
  *j = (Job) { run, done, data };
  /* A PAIR over inproc blocks only past its high-water mark (1000 jobs):
   * the provisioner posts a handful per site. */
  if (zmq_send (w->sock, &j, sizeof j, 0) != sizeof j)
    g_error ("site %s: cannot hand a job to its worker: %s", datc_site_name (w->site),
             zmq_strerror (errno));
  if (w->pending++ == 0)
    w->head_since = g_get_monotonic_time ();
}

void *
datc_site_worker_socket (DatcSiteWorker *w)
{
  return w->sock;
}

static gboolean
collect_one (DatcSiteWorker *w, gpointer owner, int flags, gboolean *stopped)
{
  Job *j = NULL;
  if (zmq_recv (w->sock, &j, sizeof j, flags) != sizeof j)
    return FALSE;
  if (j == NULL)
    {
      *stopped = TRUE;
      return TRUE;
    }
  w->pending--;
  w->head_since = w->pending > 0 ? g_get_monotonic_time () : 0;
  j->done (owner, j->data);
  g_free (j);
  return TRUE;
}

guint
datc_site_worker_collect (DatcSiteWorker *w, gpointer owner)
{
  guint n = 0;
  gboolean stopped = FALSE;
  while (collect_one (w, owner, ZMQ_DONTWAIT, &stopped))
    n++;
  return n;
}

gint64
datc_site_worker_busy_since (DatcSiteWorker *w)
{
  return w->head_since;
}

gboolean
datc_site_worker_free (DatcSiteWorker *w, gpointer owner, guint grace_ms)
{
  if (w == NULL)
    return TRUE;
  Job *stop = NULL;
  zmq_send (w->sock, &stop, sizeof stop, 0);
  gint64 deadline = g_get_monotonic_time () + (gint64) grace_ms * 1000;
  gboolean stopped = FALSE;
  while (!stopped)
    {
      gint64 left = deadline - g_get_monotonic_time ();
      if (left <= 0)
        break;
      zmq_pollitem_t item = { w->sock, 0, ZMQ_POLLIN, 0 };
      if (zmq_poll (&item, 1, (long) ((left + 999) / 1000)) < 0 && errno != EINTR)
        break;
      while (collect_one (w, owner, ZMQ_DONTWAIT, &stopped) && !stopped)
        ;
    }
  if (!stopped)
    {
      /* Hanging in a command: the process's exit ends it.  Its context
       * and the site stay as they are, for the thread still uses them. */
      g_warning ("site %s: a command is still running after %u ms; left to end with the master",
                 datc_site_name (w->site), grace_ms);
      g_thread_unref (w->thread);
      return FALSE;
    }
  g_thread_join (w->thread);
  zmq_close (w->sock);
  zmq_ctx_term (w->ctx);
  g_free (w->endpoint);
  g_free (w);
  return TRUE;
}
