/* test-runtimes.c: the observed run times: the 90th percentile from known
 * samples (a bucket's top: long by at most 19 %), nothing before 20 runs,
 * and the end game's expected time left and mean. */
#include <glib.h>

#include "runtimes.h"

/* Notes one run of `ms` milliseconds. */
static void
note_ms (DatcRuntimes *rt, guint64 ms)
{
  gint64 start = 1700000000000000;
  datc_runtimes_note (rt, start, start + (gint64) ms * 1000);
}

static void
test_nothing_before_twenty_runs (void)
{
  g_autoptr (DatcRuntimes) rt = datc_runtimes_new ();
  for (guint i = 0; i < DATC_RUNTIMES_MIN_SAMPLES - 1; i++)
    note_ms (rt, 50);
  g_assert_cmpuint (datc_runtimes_count (rt), ==, 19);
  g_assert_cmpuint (datc_runtimes_estimate_ms (rt), ==, 0);
  note_ms (rt, 50);
  /* 50 ms lies in the bucket [48, 55]: the estimate is its top. */
  g_assert_cmpuint (datc_runtimes_estimate_ms (rt), ==, 55);
}

static void
test_ninetieth_percentile_of_known_runs (void)
{
  g_autoptr (DatcRuntimes) rt = datc_runtimes_new ();
  for (guint64 ms = 1; ms <= 100; ms++)
    note_ms (rt, ms);
  /* The 90th run is 90 ms, in the bucket [80, 95]. */
  guint64 est = datc_runtimes_estimate_ms (rt);
  g_assert_cmpuint (est, ==, 95);
  g_assert_cmpuint (est, >=, 90);
  g_assert_cmpuint (est, <=, 90 * 119 / 100);
}

static void
test_impossible_runs_are_ignored (void)
{
  g_autoptr (DatcRuntimes) rt = datc_runtimes_new ();
  datc_runtimes_note (rt, 0, 5000);    /* never started */
  datc_runtimes_note (rt, 9000, 8000); /* ended before it started */
  g_assert_cmpuint (datc_runtimes_count (rt), ==, 0);
  datc_runtimes_note (rt, 8000, 8000); /* 0 ms: counts */
  g_assert_cmpuint (datc_runtimes_count (rt), ==, 1);
}

static void
test_time_left_and_mean (void)
{
  g_autoptr (DatcRuntimes) rt = datc_runtimes_new ();
  /* Half the runs take 100 ms, half 10 s. */
  for (guint i = 0; i < 20; i++)
    {
      note_ms (rt, 100);
      note_ms (rt, 10000);
    }
  DatcRuntimesTail tail;
  datc_runtimes_prepare (rt, &tail);
  /* Bucket middles: 100 ms in [96, 111] (103.5), 10 s in [8192, 10239]
   * (9215.5). */
  g_assert_cmpuint (datc_runtimes_mean_ms (&tail), ==, (guint64) ((103.5 + 9215.5) / 2));
  g_assert_cmpuint (datc_runtimes_remaining_ms (&tail, 0), ==, (guint64) ((103.5 + 9215.5) / 2));
  /* Past the short ones only the long ones are left. */
  g_assert_cmpuint (datc_runtimes_remaining_ms (&tail, 5000), ==, (guint64) (9215.5 - 5000));
  /* Longer than any run: a straggler, its time left unknown. */
  g_assert_cmpuint (datc_runtimes_remaining_ms (&tail, 20000), ==, G_MAXUINT64);
}

/* A run time is known only to its bucket: a task past the middle of the
 * bucket every run fell in may still be one of them, about to end.  It is
 * a straggler only past the bucket's top (it used to be one past the
 * middle, so end-game copies were started of tasks ending that instant). */
static void
test_past_the_middle_is_not_a_straggler (void)
{
  g_autoptr (DatcRuntimes) rt = datc_runtimes_new ();
  for (guint i = 0; i < 20; i++)
    note_ms (rt, 1000); /* the bucket [896, 1023] ms */
  DatcRuntimesTail tail;
  datc_runtimes_prepare (rt, &tail);
  g_assert_cmpuint (datc_runtimes_remaining_ms (&tail, 500), ==, (guint64) (959.5 - 500));
  /* At 1000 ms: counted as ending halfway to 1023. */
  g_assert_cmpuint (datc_runtimes_remaining_ms (&tail, 1000), ==, 11);
  g_assert_cmpuint (datc_runtimes_remaining_ms (&tail, 1023), ==, 0);
  g_assert_cmpuint (datc_runtimes_remaining_ms (&tail, 1024), ==, G_MAXUINT64);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/runtimes/nothing-is-estimated-before-twenty-runs",
                   test_nothing_before_twenty_runs);
  g_test_add_func ("/runtimes/the-estimate-is-the-90th-percentile-rounded-up",
                   test_ninetieth_percentile_of_known_runs);
  g_test_add_func ("/runtimes/impossible-runs-are-ignored", test_impossible_runs_are_ignored);
  g_test_add_func ("/runtimes/time-left-is-the-mean-of-the-longer-runs", test_time_left_and_mean);
  g_test_add_func ("/runtimes/a-task-past-the-middle-of-its-bucket-is-not-a-straggler",
                   test_past_the_middle_is_not_a_straggler);
  return g_test_run ();
}
