/* closedform.h: the two turnarounds that need no simulation, given when
 * each proxy starts.  Both see tasks as taking exactly their mean time and
 * proxies as running until the work is done (no walltime, no failures):
 * they are the optimistic references the simulated policies are held to.
 *
 *   fluid: work flows like water into every slot that has started,
 *          T = (N + sum_A s r W) / sum_A s r over the proxies A with W < T
 *          (r = 1/t); a lower bound on any policy with these starts.
 *   ect:   the earliest-completion oracle, the N-th smallest of all slot
 *          completion times W_c + m t_c (m = 1, 2, ...); exact for
 *          deterministic task times. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* One proxy as the closed forms see it: a plain value record. */
typedef struct {
  double start; /* seconds after submission; INFINITY: never */
  double slots;
  double task_time; /* seconds per task per slot, > 0 */
} DatcCapacity;

/* Sorts caps by start (in place) and water-fills; INFINITY if no proxy
 * ever starts.  tasks may be fractional here. */
double datc_fluid_turnaround (DatcCapacity *caps, gsize n, double tasks);
/* The N-th smallest slot completion; INFINITY if no proxy ever starts.
 * O((N / s) log n) with a heap over proxies.  work (may be NULL) gets the
 * summed task time of those N completions. */
double datc_ect_turnaround (const DatcCapacity *caps, gsize n, guint64 tasks, double *work);

G_END_DECLS
