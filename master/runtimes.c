/* runtimes.c: the histogram of observed run times (see runtimes.h).  Four
 * buckets per power of two: bucket 4e + s holds [2^e (4 + s) / 4,
 * 2^e (5 + s) / 4), so a bucket is at most a quarter of its lower bound
 * wide and a quantile read off its top is at most 19 % long (a bit more
 * below 4 ms, where a bucket is a millisecond). */
#include "runtimes.h"

#include <string.h>

struct DatcRuntimes {
  guint32 counts[DATC_RUNTIMES_BUCKETS];
  guint64 n;
  guint64 estimate_ms; /* the 90th percentile, once there are enough */
};

static guint
bucket_of (guint64 ms)
{
  if (ms < 1)
    return 0;
  guint e = (guint) g_bit_storage (ms) - 1; /* 2^e <= ms < 2^(e+1) */
  guint sub = e >= 2 ? (guint) ((ms >> (e - 2)) & 3) : (guint) ((ms << (2 - e)) & 3);
  return MIN (DATC_RUNTIMES_BUCKETS - 1, 4 * e + sub);
}

/* The largest duration of bucket b (so an estimate errs long, not short). */
static guint64
bucket_top (guint b)
{
  guint e = b / 4, sub = b % 4;
  if (e >= 2)
    return ((4ull + sub + 1) << (e - 2)) - 1;
  return MAX (1u, ((4u + sub + 1) >> (2 - e)));
}

DatcRuntimes *
datc_runtimes_new (void)
{
  return g_new0 (DatcRuntimes, 1);
}

void
datc_runtimes_free (DatcRuntimes *rt)
{
  g_free (rt);
}

void
datc_runtimes_note (DatcRuntimes *rt, gint64 started_us, gint64 finished_us)
{
  if (started_us <= 0 || finished_us < started_us)
    return;
  rt->counts[bucket_of ((guint64) (finished_us - started_us) / 1000u)]++;
  rt->n++;
  if (rt->n < DATC_RUNTIMES_MIN_SAMPLES || rt->n % 16 != 4)
    return;
  guint64 want = (rt->n * 9 + 9) / 10, seen = 0;
  for (guint b = 0; b < DATC_RUNTIMES_BUCKETS; b++)
    if ((seen += rt->counts[b]) >= want)
      {
        rt->estimate_ms = bucket_top (b);
        break;
      }
}

guint64
datc_runtimes_count (const DatcRuntimes *rt)
{
  return rt->n;
}

guint64
datc_runtimes_estimate_ms (const DatcRuntimes *rt)
{
  return rt->estimate_ms;
}

void
datc_runtimes_prepare (const DatcRuntimes *rt, DatcRuntimesTail *tail)
{
  guint64 bottom = 0;
  for (guint b = 0; b < DATC_RUNTIMES_BUCKETS; b++)
    {
      guint64 top = bucket_top (b);
      tail->mid[b] = (MIN (bottom, top) + top) / 2.0;
      tail->top[b] = (double) top;
      bottom = top + 1;
    }
  tail->n_above[DATC_RUNTIMES_BUCKETS] = tail->sum_above[DATC_RUNTIMES_BUCKETS] = 0;
  for (guint b = DATC_RUNTIMES_BUCKETS; b-- > 0;)
    {
      tail->n_above[b] = tail->n_above[b + 1] + rt->counts[b];
      tail->sum_above[b] = tail->sum_above[b + 1] + rt->counts[b] * tail->mid[b];
    }
}

guint64
datc_runtimes_mean_ms (const DatcRuntimesTail *tail)
{
  return (guint64) (tail->sum_above[0] / tail->n_above[0]);
}

guint64
datc_runtimes_remaining_ms (const DatcRuntimesTail *tail, guint64 e)
{
  /* The first bucket whose top is not below e (tops increase). */
  guint b = 0, hi = DATC_RUNTIMES_BUCKETS;
  while (b < hi)
    {
      guint m = (b + hi) / 2;
      if (tail->top[m] < (double) e)
        b = m + 1;
      else
        hi = m;
    }
  if (b == DATC_RUNTIMES_BUCKETS || tail->n_above[b] == 0)
    return G_MAXUINT64;
  double n_here = tail->n_above[b] - tail->n_above[b + 1];
  double end_here = MAX (tail->mid[b], ((double) e + tail->top[b]) / 2.0);
  double mean_end = (n_here * end_here + tail->sum_above[b + 1]) / tail->n_above[b];
  return mean_end > (double) e ? (guint64) (mean_end - (double) e) : 0;
}

void
datc_runtimes_save (const DatcRuntimes *rt, GByteArray *out)
{
  guint64 v64[2] = { GUINT64_TO_LE (rt->n), GUINT64_TO_LE (rt->estimate_ms) };
  g_byte_array_append (out, (const guint8 *) v64, sizeof v64);
  for (guint b = 0; b < DATC_RUNTIMES_BUCKETS; b++)
    {
      guint32 c = GUINT32_TO_LE (rt->counts[b]);
      g_byte_array_append (out, (const guint8 *) &c, sizeof c);
    }
}

gboolean
datc_runtimes_load (DatcRuntimes *rt, const guint8 *data, gsize len)
{
  guint64 v64[2];
  if (len != DATC_RUNTIMES_SAVED_LEN)
    return FALSE;
  memcpy (v64, data, sizeof v64);
  rt->n = GUINT64_FROM_LE (v64[0]);
  rt->estimate_ms = GUINT64_FROM_LE (v64[1]);
  for (guint b = 0; b < DATC_RUNTIMES_BUCKETS; b++)
    {
      guint32 c;
      memcpy (&c, data + 16 + 4 * b, sizeof c);
      rt->counts[b] = GUINT32_FROM_LE (c);
    }
  return TRUE;
}
