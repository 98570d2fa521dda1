/* closedform.c: see closedform.h. */
#include "closedform.h"

#include <math.h>
#include <stdlib.h>

#include "eventheap.h"

static int
cmp_start (const void *a, const void *b)
{
  double x = ((const DatcCapacity *) a)->start, y = ((const DatcCapacity *) b)->start;
  return (x > y) - (x < y);
}

double
datc_fluid_turnaround (DatcCapacity *caps, gsize n, double tasks)
{
  qsort (caps, n, sizeof *caps, cmp_start);
  double rate = 0, weighted = 0, T = INFINITY;
  for (gsize k = 0; k < n && isfinite (caps[k].start); k++)
    {
      /* A proxy that starts at or after the current T adds nothing. */
      if (caps[k].start >= T)
        break;
      double a = caps[k].slots / caps[k].task_time;
      rate += a;
      weighted += a * caps[k].start;
      T = (tasks + weighted) / rate;
    }
  return T;
}

double
datc_ect_turnaround (const DatcCapacity *caps, gsize n, guint64 tasks, double *work)
{
  double w = 0;
  if (work != NULL)
    *work = 0;
  if (tasks == 0)
    return 0;
  g_autoptr (DatcEventHeap) heap = datc_event_heap_new ((guint) n);
  g_autofree guint64 *m = g_new0 (guint64, MAX (n, 1));
  for (gsize c = 0; c < n; c++)
    if (isfinite (caps[c].start) && caps[c].slots >= 1)
      {
        m[c] = 1;
        datc_event_heap_set (heap, (guint) c, caps[c].start + caps[c].task_time);
      }
  guint64 done = 0;
  guint e;
  double t;
  /* Each pop is one completion time shared by all slots of that proxy. */
  while (datc_event_heap_peek (heap, &e, &t))
    {
      guint64 take = MIN ((guint64) caps[e].slots, tasks - done);
      done += take;
      w += (double) take * caps[e].task_time;
      if (done >= tasks)
        {
          if (work != NULL)
            *work = w;
          return t;
        }
      m[e]++;
      datc_event_heap_set (heap, e, caps[e].start + (double) m[e] * caps[e].task_time);
    }
  return INFINITY;
}
