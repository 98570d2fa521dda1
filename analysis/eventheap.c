/* eventheap.c: see eventheap.h.  pos[e] is e's index in heap[] plus one
 * (0: not scheduled), so membership and updates are O(1) to find and
 * O(log n) to restore.  Times sit in the heap entries themselves: the
 * comparisons of a sift touch one array. */
#include "eventheap.h"

typedef struct {
  double time;
  guint e;
} Entry;

struct DatcEventHeap {
  guint n, size;
  Entry *heap; /* heap-ordered by (time, e) */
  guint *pos;  /* per entity: index in heap + 1, or 0 */
};

DatcEventHeap *
datc_event_heap_new (guint n_entities)
{
  DatcEventHeap *h = g_new0 (DatcEventHeap, 1);
  h->n = n_entities;
  h->heap = g_new (Entry, MAX (n_entities, 1));
  h->pos = g_new0 (guint, MAX (n_entities, 1));
  return h;
}

void
datc_event_heap_free (DatcEventHeap *h)
{
  if (h == NULL)
    return;
  g_free (h->heap);
  g_free (h->pos);
  g_free (h);
}

void
datc_event_heap_clear (DatcEventHeap *h)
{
  for (guint i = 0; i < h->size; i++)
    h->pos[h->heap[i].e] = 0;
  h->size = 0;
}

static inline gboolean
before (const Entry *a, const Entry *b)
{
  return a->time < b->time || (a->time == b->time && a->e < b->e);
}

static inline void
place (DatcEventHeap *h, guint i, Entry x)
{
  h->heap[i] = x;
  h->pos[x.e] = i + 1;
}

static void
sift_up (DatcEventHeap *h, guint i)
{
  Entry x = h->heap[i];
  while (i > 0)
    {
      guint parent = (i - 1) / 2;
      if (!before (&x, &h->heap[parent]))
        break;
      place (h, i, h->heap[parent]);
      i = parent;
    }
  place (h, i, x);
}

static void
sift_down (DatcEventHeap *h, guint i)
{
  Entry x = h->heap[i];
  for (;;)
    {
      guint c = 2 * i + 1;
      if (c >= h->size)
        break;
      if (c + 1 < h->size && before (&h->heap[c + 1], &h->heap[c]))
        c++;
      if (!before (&h->heap[c], &x))
        break;
      place (h, i, h->heap[c]);
      i = c;
    }
  place (h, i, x);
}

void
datc_event_heap_set (DatcEventHeap *h, guint e, double t)
{
  g_return_if_fail (e < h->n);
  if (h->pos[e] == 0)
    {
      place (h, h->size++, (Entry) { t, e });
      sift_up (h, h->size - 1);
      return;
    }
  guint i = h->pos[e] - 1;
  double old = h->heap[i].time;
  h->heap[i].time = t;
  if (t < old)
    sift_up (h, i);
  else if (t > old)
    sift_down (h, i);
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
  Entry last = h->heap[h->size];
  place (h, i, last);
  sift_up (h, i);
  sift_down (h, h->pos[last.e] - 1);
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
  *e = h->heap[0].e;
  *t = h->heap[0].time;
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
