/* qbets.c: binomial order-statistic bounds.  The CDF walks the pmf upward
 * from j = 0 with the ratio pmf(j+1)/pmf(j) in log space: no factorials, no
 * overflow, O(k) for the index search. */
#include "qbets.h"

#include <math.h>

#include "analysis-error.h"

/* Calls visit (j, cdf(j)) for j = 0, 1, ... until it returns FALSE or j = n. */
typedef gboolean (*CdfVisit) (guint64 j, double cdf, gpointer data);

static void
walk_cdf (guint64 n, double q, CdfVisit visit, gpointer data)
{
  double lq = log (q), l1q = log1p (-q);
  double lp = (double) n * l1q; /* log pmf(0) */
  double cdf = 0;
  for (guint64 j = 0; j <= n; j++)
    {
      cdf += exp (lp);
      if (!visit (j, MIN (cdf, 1.0), data))
        return;
      if (j < n)
        lp += log ((double) (n - j)) - log ((double) (j + 1)) + lq - l1q;
    }
}

typedef struct {
  guint64 k;
  double cdf;
} CdfAt;

static gboolean
visit_until_k (guint64 j, double cdf, gpointer data)
{
  CdfAt *a = data;
  a->cdf = cdf;
  return j < a->k;
}

double
datc_binomial_cdf (guint64 k, guint64 n, double q)
{
  if (k >= n || q <= 0)
    return 1.0;
  if (q >= 1)
    return 0.0;
  CdfAt a = { k, 0 };
  walk_cdf (n, q, visit_until_k, &a);
  return a.cdf;
}

guint64
datc_qbets_needed (double q, double c)
{
  g_return_val_if_fail (q > 0 && q < 1 && c > 0 && c < 1, 0);
  /* 1 - q^n >= c  <=>  n >= log(1 - c) / log(q); guard the rounding. */
  guint64 n = (guint64) MAX (1.0, floor (log1p (-c) / log (q)));
  while (n > 1 && 1.0 - pow (q, (double) (n - 1)) >= c)
    n--;
  while (1.0 - pow (q, (double) n) < c)
    n++;
  return n;
}

typedef struct {
  double c;
  guint64 found; /* j + 1 for the first cdf(j) >= c */
  double cdf;
} IndexSearch;

static gboolean
visit_until_c (guint64 j, double cdf, gpointer data)
{
  IndexSearch *s = data;
  if (cdf >= s->c)
    {
      s->found = j + 1;
      s->cdf = cdf;
      return FALSE;
    }
  return TRUE;
}

static guint64
index_and_cdf (guint64 n, double q, double c, double *achieved)
{
  if (n == 0 || n < datc_qbets_needed (q, c))
    return 0;
  IndexSearch s = { c, 0, 0 };
  walk_cdf (n, q, visit_until_c, &s);
  /* cdf(n-1) = 1 - q^n >= c once n is enough, but the summed cdf can fall a
   * rounding short of the closed form: then the answer is n itself. */
  if (s.found == 0 || s.found > n)
    {
      s.found = n;
      s.cdf = 1.0 - pow (q, (double) n);
    }
  if (achieved != NULL)
    *achieved = s.cdf;
  return s.found;
}

guint64
datc_qbets_index (guint64 n, double q, double c)
{
  g_return_val_if_fail (q > 0 && q < 1 && c > 0 && c < 1, 0);
  return index_and_cdf (n, q, c, NULL);
}

gboolean
datc_wait_bound_compute (const double *sorted, gsize n, double q, double c, DatcWaitBound *out,
                         GError **error)
{
  if (!(q > 0 && q < 1) || !(c > 0 && c < 1))
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT,
                   "quantile and confidence must be strictly between 0 and 1");
      return FALSE;
    }
  DatcWaitBound b = { .quantile = q, .confidence = c, .observations = n, .bound = NAN };
  b.needed = datc_qbets_needed (q, c);
  b.index = index_and_cdf (n, q, c, &b.achieved);
  if (b.index > 0)
    b.bound = sorted[b.index - 1];
  *out = b;
  return TRUE;
}
