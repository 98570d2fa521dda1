/* test-malloctune.c: memory a thread frees at the top of its heap stays
 * mapped once the master's thresholds are set, so using it again faults no
 * page in (each fault in would have been an mmap_lock writer's shrink and
 * grow before it: malloctune.h).  Measured by the thread's minor faults
 * (getrusage RUSAGE_THREAD) over rounds of 64 blocks of 16 KiB, written
 * and freed last to first: 1 MiB free at the top each round.  Without the
 * thresholds, glibc trims that 1 MiB every round and the next round faults
 * its 256 pages in again: the untuned run checks that the measure sees
 * it, so the tuned run's few faults mean something.  On the main thread's
 * heap (brk) and on a second thread's (an arena of its own: mprotect and
 * madvise).  Each run is a subprocess: mallopt cannot be undone. */
#include "malloctune.h"
#include "test-sanitizer.h"

#include <string.h>
#include <sys/resource.h>

/* AddressSanitizer brings its own allocator: mallopt is a no-op that says
 * no, and what is measured here is glibc's. */
#if DATC_TEST_UNDER_ASAN || !defined(__GLIBC__)
#define ALLOCATOR_IS_GLIBC 0
#else
#define ALLOCATOR_IS_GLIBC 1
#endif

#define BLOCKS 64
#define BLOCK_BYTES ((gsize) 16 << 10)
#define ROUNDS 40
/* Pages of one round's blocks. */
#define ROUND_PAGES (BLOCKS * BLOCK_BYTES / 4096)

static long
thread_minflt (void)
{
  struct rusage ru;
  g_assert_cmpint (getrusage (RUSAGE_THREAD, &ru), ==, 0);
  return ru.ru_minflt;
}

static void
one_round (void)
{
  guint8 *blocks[BLOCKS];
  for (guint i = 0; i < BLOCKS; i++)
    {
      blocks[i] = g_malloc (BLOCK_BYTES);
      memset (blocks[i], (int) i + 1, BLOCK_BYTES);
    }
  for (guint i = BLOCKS; i-- > 0;)
    g_free (blocks[i]);
}

/* The faults of rounds 2 to ROUNDS (the first maps the memory in). */
static gpointer
faults_of_rounds (gpointer unused)
{
  (void) unused;
  one_round ();
  long before = thread_minflt ();
  for (guint r = 1; r < ROUNDS; r++)
    one_round ();
  return GSIZE_TO_POINTER ((gsize) (thread_minflt () - before));
}

static long
measure (gboolean on_a_thread)
{
  if (!on_a_thread)
    return (long) GPOINTER_TO_SIZE (faults_of_rounds (NULL));
  GThread *t = g_thread_new ("rounds", faults_of_rounds, NULL);
  return (long) GPOINTER_TO_SIZE (g_thread_join (t));
}

static void
run_child (gboolean tuned, gboolean on_a_thread)
{
  if (tuned)
    g_assert_true (datc_malloc_tune_for_master ());
  long faults = measure (on_a_thread);
  g_printerr ("%s, %s: %ld minor faults in %d rounds\n", tuned ? "tuned" : "untuned",
              on_a_thread ? "a thread's arena" : "the main heap", faults, ROUNDS - 1);
  if (tuned)
    /* A page or two a round at most (the stack, the rusage call). */
    g_assert_cmpint (faults, <, ROUNDS * 2);
  else
    /* Trimmed each round: the measure above would see the difference. */
    g_assert_cmpint (faults, >, (ROUNDS - 1) * ROUND_PAGES / 2);
}

#if !ALLOCATOR_IS_GLIBC
static void
test_not_glibc (void)
{
  g_assert_false (datc_malloc_tune_for_master ());
}
#endif

static void
test_case (gconstpointer data)
{
  guint which = GPOINTER_TO_UINT (data);
  gboolean tuned = (which & 1) != 0, on_a_thread = (which & 2) != 0;
  if (g_test_subprocess ())
    {
      run_child (tuned, on_a_thread);
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_test_trap_assert_passed ();
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#if ALLOCATOR_IS_GLIBC
  g_test_add_data_func ("/malloctune/main-heap/untuned-trims-and-faults-again",
                        GUINT_TO_POINTER (0), test_case);
  g_test_add_data_func ("/malloctune/main-heap/tuned-keeps-freed-memory", GUINT_TO_POINTER (1),
                        test_case);
  g_test_add_data_func ("/malloctune/thread-arena/untuned-trims-and-faults-again",
                        GUINT_TO_POINTER (2), test_case);
  g_test_add_data_func ("/malloctune/thread-arena/tuned-keeps-freed-memory", GUINT_TO_POINTER (3),
                        test_case);
#else
  g_test_add_func ("/malloctune/not-glibc-malloc-says-so", test_not_glibc);
#endif
  return g_test_run ();
}
