/* clock.h: the time the planners decide by.  The dispatcher and the
 * provisioner read both clocks through a DatcClock, so that their unit
 * tests drive them with a fake one (a walltime two hours away, a backoff,
 * a minute of scheduler budget) without waiting; NULL is the system's. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  gint64 (*monotonic_us) (gpointer data); /* as g_get_monotonic_time */
  gint64 (*real_us) (gpointer data);      /* as g_get_real_time */
  gpointer data;
} DatcClock;

static inline gint64
datc_clock_monotonic (const DatcClock *clock)
{
  return clock != NULL ? clock->monotonic_us (clock->data) : g_get_monotonic_time ();
}

static inline gint64
datc_clock_real (const DatcClock *clock)
{
  return clock != NULL ? clock->real_us (clock->data) : g_get_real_time ();
}

G_END_DECLS
