/* iothread.c: a thread that runs one blocking call at a time for its
 * owner.  The owner hands the job over under the lock, then calls its
 * wait function (which polls done_fd beside whatever it serves) until the
 * thread says the job is done; the eventfd is written once per job and
 * drained by the owner, so a wait that returns early never misses the
 * end of the next job. */
#include "iothread.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct DatcIoThread {
  GThread *thread;
  GMutex lock;
  GCond cond;
  DatcIoJob job; /* asked and not yet taken; NULL when none */
  gpointer job_data;
  gboolean done; /* the one asked finished, with result */
  int result;
  gboolean stop;
  int done_fd; /* eventfd, written once per finished job */
};

static gpointer
io_thread_main (gpointer data)
{
  DatcIoThread *t = data;
  g_mutex_lock (&t->lock);
  for (;;)
    {
      while (t->job == NULL && !t->stop)
        g_cond_wait (&t->cond, &t->lock);
      if (t->stop)
        break;
      DatcIoJob job = t->job;
      gpointer job_data = t->job_data;
      g_mutex_unlock (&t->lock);
      int result = job (job_data);
      g_mutex_lock (&t->lock);
      t->job = NULL;
      t->result = result;
      t->done = TRUE;
      eventfd_write (t->done_fd, 1);
    }
  g_mutex_unlock (&t->lock);
  return NULL;
}

DatcIoThread *
datc_io_thread_new (const char *name)
{
  DatcIoThread *t = g_new0 (DatcIoThread, 1);
  g_mutex_init (&t->lock);
  g_cond_init (&t->cond);
  t->done_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (t->done_fd >= 0)
    t->thread = g_thread_try_new (name, io_thread_main, t, NULL);
  if (t->thread == NULL)
    {
      datc_io_thread_free (t);
      return NULL;
    }
  return t;
}

int
datc_io_thread_run (DatcIoThread *t, DatcIoJob job, gpointer job_data, DatcIoWaitFunc wait,
                    gpointer wait_data)
{
  g_return_val_if_fail (job != NULL, EINVAL);
  if (t == NULL || wait == NULL)
    return job (job_data);
  g_mutex_lock (&t->lock);
  t->job = job;
  t->job_data = job_data;
  t->done = FALSE;
  g_cond_signal (&t->cond);
  g_mutex_unlock (&t->lock);
  gboolean done;
  do
    {
      wait (wait_data, t->done_fd);
      g_mutex_lock (&t->lock);
      done = t->done;
      g_mutex_unlock (&t->lock);
    }
  while (!done);
  eventfd_t drained;
  eventfd_read (t->done_fd, &drained);
  return t->result;
}

void
datc_io_thread_free (DatcIoThread *t)
{
  if (t == NULL)
    return;
  if (t->thread != NULL)
    {
      g_mutex_lock (&t->lock);
      t->stop = TRUE;
      g_cond_signal (&t->cond);
      g_mutex_unlock (&t->lock);
      g_thread_join (t->thread);
    }
  if (t->done_fd >= 0)
    close (t->done_fd);
  g_mutex_clear (&t->lock);
  g_cond_clear (&t->cond);
  g_free (t);
}
