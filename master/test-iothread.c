/* test-iothread.c: a job runs on the thread while the caller's wait runs
 * on its own, the wait learns the end through done_fd, the job's result
 * comes back, and without a wait (or a thread) the caller runs the job. */
#include <errno.h>
#include <poll.h>

#include "iothread.h"

typedef struct {
  GThread *ran_on;
  gint release; /* atomic: the job may end */
  int result;
} Job;

static int
job_main (gpointer data)
{
  Job *j = data;
  j->ran_on = g_thread_self ();
  while (!g_atomic_int_get (&j->release))
    g_usleep (1000);
  return j->result;
}

typedef struct {
  Job *job;
  GThread *owner;
  guint calls, on_owner, saw_done;
} Waited;

/* Lets the job end on the third call, then polls done_fd as a loop
 * would, returning once it is readable. */
static void
wait_main (gpointer data, int done_fd)
{
  Waited *w = data;
  w->calls++;
  if (g_thread_self () == w->owner)
    w->on_owner++;
  if (w->calls == 3)
    g_atomic_int_set (&w->job->release, 1);
  struct pollfd p = { done_fd, POLLIN, 0 };
  if (poll (&p, 1, 5) == 1)
    w->saw_done++;
}

static void
test_runs_the_job_on_its_thread_while_the_caller_waits (void)
{
  g_autoptr (DatcIoThread) t = datc_io_thread_new ("test-io");
  g_assert_nonnull (t);
  for (int round = 0; round < 3; round++)
    {
      Job job = { .result = round == 1 ? ENOSPC : 0 };
      Waited w = { .job = &job, .owner = g_thread_self () };
      int r = datc_io_thread_run (t, job_main, &job, wait_main, &w);
      g_assert_cmpint (r, ==, job.result);
      g_assert_nonnull (job.ran_on);
      g_assert_true (job.ran_on != g_thread_self ());
      /* The job could not end before the third call; the wait was then
       * called until done_fd said so. */
      g_assert_cmpuint (w.calls, >=, 3);
      g_assert_cmpuint (w.on_owner, ==, w.calls);
      g_assert_cmpuint (w.saw_done, >=, 1);
    }
}

static void
test_without_a_wait_the_caller_runs_the_job (void)
{
  g_autoptr (DatcIoThread) t = datc_io_thread_new ("test-io");
  Job job = { .release = 1, .result = EIO };
  g_assert_cmpint (datc_io_thread_run (t, job_main, &job, NULL, NULL), ==, EIO);
  g_assert_true (job.ran_on == g_thread_self ());
  Job again = { .release = 1, .result = 0 };
  Waited w = { .job = &again, .owner = g_thread_self () };
  g_assert_cmpint (datc_io_thread_run (NULL, job_main, &again, wait_main, &w), ==, 0);
  g_assert_true (again.ran_on == g_thread_self ());
  g_assert_cmpuint (w.calls, ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/iothread/runs-the-job-on-its-thread-while-the-caller-waits",
                   test_runs_the_job_on_its_thread_while_the_caller_waits);
  g_test_add_func ("/iothread/without-a-wait-the-caller-runs-the-job",
                   test_without_a_wait_the_caller_runs_the_job);
  return g_test_run ();
}
