/* test-iowait.h: the wait function the journal's and results.jsonl's
 * tests hand to a DatcIoThread's owner (datc_journal_set_sync_wait,
 * datc_results_file_set_write_wait), header-only for the test programs.
 *
 * Each call asserts it runs on the owner's thread while the file's own
 * thread exists (one thread more than before the first hand-over, unless
 * `other_threads`), lets a `stopped` process go on, and, if `poll` is
 * set, waits for done_fd as the master's loop does; else it returns at
 * once, as a wait with nothing to serve may. */
#pragma once

#include <glib.h>
#include <poll.h>
#include <signal.h>

typedef struct {
  GThread *owner;
  guint threads_before; /* before the first hand-over */
  guint calls, saw_done;
  gboolean poll;
  gboolean other_threads; /* others may come and go meanwhile: not counted */
  pid_t stopped;          /* sent SIGCONT at the first call (0: none) */
} TestIoWait;

/* Threads of this process now. */
static inline guint
test_threads_now (void)
{
  g_autoptr (GDir) tasks = g_dir_open ("/proc/self/task", 0, NULL);
  g_assert_nonnull (tasks);
  guint n = 0;
  while (g_dir_read_name (tasks) != NULL)
    n++;
  return n;
}

/* Set up on the owner's thread, before anything is handed over. */
static inline TestIoWait
test_io_wait_init (gboolean poll)
{
  return (TestIoWait) { .owner = g_thread_self (),
                        .threads_before = test_threads_now (),
                        .poll = poll };
}

static inline void
test_io_wait (gpointer data, int done_fd)
{
  TestIoWait *w = data;
  w->calls++;
  g_assert_true (g_thread_self () == w->owner);
  if (!w->other_threads)
    g_assert_cmpuint (test_threads_now (), ==, w->threads_before + 1);
  if (w->stopped > 0)
    {
      g_assert_cmpint (kill (w->stopped, SIGCONT), ==, 0);
      w->stopped = 0;
    }
  if (!w->poll)
    return;
  struct pollfd p = { .fd = done_fd, .events = POLLIN };
  g_assert_cmpint (poll (&p, 1, 10000), ==, 1);
  w->saw_done++;
}
