/* rng.h: the seeded random numbers of the analysis: xoshiro256** streams
 * seeded through splitmix64, and a counter-based draw for values that must
 * be found by key (the n-th task's runtime) rather than in sequence.
 *
 * Every simulated quantity comes from a stream named by a key path
 * (seed, trial, purpose, site, proxy...), never from shared state, so two
 * policies replay exactly the same waits and the same seed gives the same
 * bytes on every run. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* A plain value record: copy it to fork a stream. */
typedef struct {
  guint64 s[4];
} DatcRng;

/* Mixes `v` into the key `key` (splitmix64 finaliser): keys are built by
 * chaining, datc_rng_key (datc_rng_key (seed, trial), site). */
guint64 datc_rng_key (guint64 key, guint64 v);

/* Seeds a stream from a key. */
void datc_rng_init (DatcRng *rng, guint64 key);

guint64 datc_rng_next (DatcRng *rng);
/* Uniform in (0, 1): never 0 and never 1, so logs are finite. */
double datc_rng_uniform (DatcRng *rng);
/* Standard normal (Box-Muller, one value per call). */
double datc_rng_normal (DatcRng *rng);
/* Exponential with the given mean. */
double datc_rng_exp (DatcRng *rng, double mean);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
guint64 datc_rng_below (DatcRng *rng, guint64 n);

/* The same draws from a key alone (counter-based): a uniform in (0, 1) and a
 * standard normal that depend only on `key`. */
double datc_rng_uniform_at (guint64 key);
double datc_rng_normal_at (guint64 key);

G_END_DECLS
