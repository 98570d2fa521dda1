/* rng.c: xoshiro256** (Blackman and Vigna, 2018) with splitmix64 seeding.
 * Small, fast, and ours, so results do not change with the C library. */
#include "rng.h"

#include <math.h>

static inline guint64
rotl (guint64 x, int k)
{
  return (x << k) | (x >> (64 - k));
}

static inline guint64
splitmix64 (guint64 *state)
{
  guint64 z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

guint64
datc_rng_key (guint64 key, guint64 v)
{
  guint64 st = key ^ (v * 0xD1B54A32D192ED03ull);
  (void) splitmix64 (&st);
  return splitmix64 (&st);
}

void
datc_rng_init (DatcRng *rng, guint64 key)
{
  guint64 st = key;
  for (int i = 0; i < 4; i++)
    rng->s[i] = splitmix64 (&st);
  /* The all-zero state is the one xoshiro cannot leave. */
  if ((rng->s[0] | rng->s[1] | rng->s[2] | rng->s[3]) == 0)
    rng->s[0] = 1;
}

guint64
datc_rng_next (DatcRng *rng)
{
  guint64 *s = rng->s;
  guint64 result = rotl (s[1] * 5, 7) * 9;
  guint64 t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl (s[3], 45);
  return result;
}

/* 53 random bits, shifted half a step off zero: (0, 1) exactly. */
static inline double
to_open_unit (guint64 x)
{
  return ((double) (x >> 11) + 0.5) * 0x1.0p-53;
}

double
datc_rng_uniform (DatcRng *rng)
{
  return to_open_unit (datc_rng_next (rng));
}

static inline double
box_muller (double u1, double u2)
{
  return sqrt (-2.0 * log (u1)) * cos (2.0 * G_PI * u2);
}

double
datc_rng_normal (DatcRng *rng)
{
  double u1 = datc_rng_uniform (rng);
  return box_muller (u1, datc_rng_uniform (rng));
}

double
datc_rng_exp (DatcRng *rng, double mean)
{
  return -mean * log (datc_rng_uniform (rng));
}

guint64
datc_rng_below (DatcRng *rng, guint64 n)
{
  g_return_val_if_fail (n > 0, 0);
  guint64 limit = G_MAXUINT64 - G_MAXUINT64 % n;
  guint64 x;
  do
    x = datc_rng_next (rng);
  while (x >= limit);
  return x % n;
}

double
datc_rng_uniform_at (guint64 key)
{
  guint64 st = key;
  return to_open_unit (splitmix64 (&st));
}

double
datc_rng_normal_at (guint64 key)
{
  guint64 st = key;
  double u1 = to_open_unit (splitmix64 (&st));
  return box_muller (u1, to_open_unit (splitmix64 (&st)));
}
