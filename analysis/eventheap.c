/* eventheap.c: see eventheap.h.  pos[e] is e's index in heap[] plus one
 * (0: not scheduled), so membership and updates are O(1) to find and
 * O(log n) to restore. */
#include "eventheap.h"

struct DatcEventHeap
{
  guint n, size;
  guint *heap; /* entity ids, heap-ordered by (time, id) */
  guint *pos;  /* per entity: index in heap + 1, or 0 */
  double *time;
};

DatcEventHeap *
datc_event_heap_new (guint n_entities)
{
  DatcEventHeap *h = g_new0 (DatcEventHeap, 1);
  h->n = n_entities;
  h->heap = g_new (guint, MAX (n_entities, 1));
  h->pos = g_new0 (guint, MAX (n_entities, 1));
  h->time = g_new0 (double, MAX (n_entities, 1));
  return h;
}

void
datc_event_heap_free (DatcEventHeap *h)
{
  if (h == NULL)
    return;
  g_free (h->heap);
  g_free (h->pos);
  g_free (h->time);
  g_free (h);
}

void
datc_event_heap_clear (DatcEventHeap *h)
{
  for (guint i = 0; i < h->size; i++)
    h->pos[h->heap[i]] = 0;
  h->size = 0;
}

static inline gboolean
before (const DatcEventHeap *h, guint a, guint b)
{
  double ta = h->time[a], tb = h->time[b];
  return ta < tb || (ta == tb && a < b);
}

static inline void
place (DatcEventHeap *h, guint i, guint e)
{
  h->heap[i] = e;
  h->pos[e] = i + 1;
}

static void
sift_up (DatcEventHeap *h, guint i)
{
  guint e = h->heap[i];
  while (i > 0)
    {
      guint parent = (i - 1) / 2;
      if (!before (h, e, h->heap[parent]))
        break;
      place (h, i, h->heap[parent]);
      i = parent;
    }
  place (h, i, e);
}

static void
sift_down (DatcEventHeap *h, guint i)
{
  guint e = h->heap[i];
  for (;;)
    {
      guint c = 2 * i + 1;
      if (c >= h->size)
        break;
      if (c + 1 < h->size && before (h, h->heap[c + 1], h->heap[c]))
        c++;
      if (!before (h, h->heap[c], e))
        break;
      place (h, i, h->heap[c]);
      i = c;
    }
  place (h, i, e);
}

void
datc_event_heap_set (DatcEventHeap *h, guint e, double t)
{
  g_return_if_fail (e < h->n);
  if (h->pos[e] == 0)
    {
      h->time[e] = t;
      place (h, h->size++, e);
      sift_up (h, h->size - 1);
      return;
    }
  double old = h->time[e];
  h->time[e] = t;
  if (t < old)
    sift_up (h, h->pos[e] - 1);
  else if (t > old)
    sift_down (h, h->pos[e] - 1);
}

void
datc_event_heap_remove (DatcEventHeap *h, guint e)
{
  g_return_if_fail (e < h->n);
  guint p = h->pos[e];
  if (p == 0)
    return;
  guint i = p - 1;
  h->pos[e] = 0;
  h->size--;
  if (i == h->size)
    return;
  guint last = h->heap[h->size];
  place (h, i, last);
  sift_up (h, i);
  sift_down (h, h->pos[last] - 1);
}

gboolean
datc_event_heap_contains (const DatcEventHeap *h, guint e)
{
  return e < h->n && h->pos[e] != 0;
}

guint
datc_event_heap_size (const DatcEventHeap *h)
{
  return h->size;
}

gboolean
datc_event_heap_peek (const DatcEventHeap *h, guint *e, double *t)
{
  if (h->size == 0)
    return FALSE;
  *e = h->heap[0];
  *t = h->time[h->heap[0]];
  return TRUE;
}

gboolean
datc_event_heap_pop (DatcEventHeap *h, guint *e, double *t)
{
  if (!datc_event_heap_peek (h, e, t))
    return FALSE;
  datc_event_heap_remove (h, *e);
  return TRUE;
}
