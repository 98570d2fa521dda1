/* qbets.h: an upper bound on a quantile of the queue wait from observed
 * waits, by the binomial order-statistic method of QBETS (Nurmi, Brevik and
 * Wolski, 2007).  Of n sorted observations, the k-th smallest exceeds the
 * q-quantile unless at least k of them fall below it, which happens with
 * probability 1 - P(Bin(n, q) <= k - 1).  The bound is the smallest k whose
 * P(Bin(n, q) <= k - 1) >= c; it needs no assumption about the shape of the
 * distribution, only that the waits are independent draws of one.  With
 * fewer than the n where even k = n fails (1 - q^n < c) there is no bound:
 * 59 waits are needed for q = c = 0.95. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* A plain value record. */
typedef struct {
  double quantile;   /* q */
  double confidence; /* c */
  gsize observations;
  gsize needed;    /* fewest observations that give any bound */
  gsize index;     /* 1-based order statistic used; 0: too few observations */
  double bound;    /* the index-th smallest wait, seconds; NAN when index is 0 */
  double achieved; /* P(Bin(n, q) <= index - 1), >= confidence */
} DatcWaitBound;

/* P(Bin(n, q) <= k), summed in log space so n may be large. */
double datc_binomial_cdf (guint64 k, guint64 n, double q);
/* The fewest observations for which any order statistic bounds the
 * q-quantile at confidence c: the smallest n with 1 - q^n >= c. */
guint64 datc_qbets_needed (double q, double c);
/* The 1-based index of the bounding order statistic, 0 if n is too few. */
guint64 datc_qbets_index (guint64 n, double q, double c);
/* The bound from waits sorted ascending.  Fails only on q or c outside
 * (0, 1); too few observations is a result (index 0), not an error. */
gboolean datc_wait_bound_compute (const double *sorted, gsize n, double q, double c,
                                  DatcWaitBound *out, GError **error);

G_END_DECLS
