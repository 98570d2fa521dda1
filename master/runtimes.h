/* runtimes.h: the run times a campaign observed, for the tasks that do not
 * say their own (est_runtime).  A histogram with four buckets per power of
 * two of milliseconds: a quantile is known to within 19 %, in a fixed 672
 * bytes whatever the number of tasks.  Two readers: dispatch asks whether a
 * task fits an agent's walltime (the 90th percentile), the end game asks
 * how long a running task has left (E[T - e | T > e]). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Nothing is estimated from fewer run times than this. */
#define DATC_RUNTIMES_MIN_SAMPLES 20

typedef struct DatcRuntimes DatcRuntimes;

DatcRuntimes *datc_runtimes_new (void);
void datc_runtimes_free (DatcRuntimes *runtimes);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcRuntimes, datc_runtimes_free)

/* One task ran from `started_us` to `finished_us` (ignored unless
 * 0 < started <= finished). */
void datc_runtimes_note (DatcRuntimes *runtimes, gint64 started_us, gint64 finished_us);
/* How many run times were noted. */
guint64 datc_runtimes_count (const DatcRuntimes *runtimes);
/* The 90th percentile, rounded up to its bucket's top (an estimate errs
 * long, not short), or 0 until DATC_RUNTIMES_MIN_SAMPLES were noted.
 * Recomputed on every 16th sample: cheap, and fresh enough. */
guint64 datc_runtimes_estimate_ms (const DatcRuntimes *runtimes);

#define DATC_RUNTIMES_BUCKETS (4 * 42)

/* The histogram as bytes (a journal checkpoint keeps it), and back:
 * u64 n, u64 estimate, u32 per bucket, little-endian. */
#define DATC_RUNTIMES_SAVED_LEN (16 + 4 * DATC_RUNTIMES_BUCKETS)
void datc_runtimes_save (const DatcRuntimes *runtimes, GByteArray *out);
gboolean datc_runtimes_load (DatcRuntimes *runtimes, const guint8 *data, gsize len);

/* The noted run times prepared for the end game's question, asked of every
 * running task at every loop turn: (middle of bucket, count) with the sums
 * above each bucket, so that an answer costs a binary search. */
typedef struct {
  double mid[DATC_RUNTIMES_BUCKETS];
  double top[DATC_RUNTIMES_BUCKETS];           /* the longest run a bucket holds */
  double n_above[DATC_RUNTIMES_BUCKETS + 1];   /* runs in buckets b.. */
  double sum_above[DATC_RUNTIMES_BUCKETS + 1]; /* their middles, summed */
} DatcRuntimesTail;

/* Fills `tail`; needs at least one noted run time to be of any use. */
void datc_runtimes_prepare (const DatcRuntimes *runtimes, DatcRuntimesTail *tail);
/* The mean of the noted run times, in ms (bucket middles). */
guint64 datc_runtimes_mean_ms (const DatcRuntimesTail *tail);
/* E[T - e | T > e] over the noted runs, in ms; G_MAXUINT64 when no noted
 * run can have lasted longer than `elapsed_ms` (past the top of the
 * highest bucket: a straggler, how much is left is unknown).  A run in the
 * bucket that `elapsed_ms` falls in counts as ending halfway between it and
 * the bucket's top: a task just past the middle of a tight distribution is
 * about to end, not a straggler. */
guint64 datc_runtimes_remaining_ms (const DatcRuntimesTail *tail, guint64 elapsed_ms);

G_END_DECLS
