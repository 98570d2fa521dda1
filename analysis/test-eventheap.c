/* test-eventheap.c: the indexed heap pops in (time, entity) order through
 * any mix of sets, updates and removals, against a plain array. */
#include "eventheap.h"

#include <math.h>

#include "rng.h"

static void
test_eventheap_pops_in_time_then_entity_order (void)
{
  g_autoptr (DatcEventHeap) h = datc_event_heap_new (5);
  datc_event_heap_set (h, 3, 2.0);
  datc_event_heap_set (h, 1, 2.0);
  datc_event_heap_set (h, 4, 1.0);
  datc_event_heap_set (h, 0, 5.0);
  guint e;
  double t;
  const guint order[] = { 4, 1, 3, 0 };
  for (guint i = 0; i < 4; i++)
    {
      g_assert_true (datc_event_heap_pop (h, &e, &t));
      g_assert_cmpuint (e, ==, order[i]);
    }
  g_assert_false (datc_event_heap_pop (h, &e, &t));
}

static void
test_eventheap_agrees_with_a_plain_array (void)
{
  const guint n = 200;
  g_autoptr (DatcEventHeap) h = datc_event_heap_new (n);
  double ref[200];
  for (guint i = 0; i < n; i++)
    ref[i] = INFINITY;
  DatcRng r;
  datc_rng_init (&r, 8);
  for (guint step = 0; step < 100000; step++)
    {
      guint e = (guint) datc_rng_below (&r, n);
      guint op = (guint) datc_rng_below (&r, 4);
      if (op == 0)
        {
          datc_event_heap_remove (h, e);
          ref[e] = INFINITY;
        }
      else if (op == 1)
        {
          guint pe;
          double pt;
          gboolean any = datc_event_heap_pop (h, &pe, &pt);
          guint best = n;
          for (guint i = 0; i < n; i++)
            if (isfinite (ref[i]) && (best == n || ref[i] < ref[best]))
              best = i;
          g_assert_cmpint (any, ==, best < n);
          if (any)
            {
              g_assert_cmpuint (pe, ==, best);
              g_assert_cmpfloat (pt, ==, ref[best]);
              ref[best] = INFINITY;
            }
        }
      else
        {
          /* Coarse times so that ties happen. */
          double t = (double) datc_rng_below (&r, 50);
          datc_event_heap_set (h, e, t);
          ref[e] = t;
        }
      guint live = 0;
      for (guint i = 0; i < n; i++)
        live += isfinite (ref[i]);
      g_assert_cmpuint (datc_event_heap_size (h), ==, live);
      g_assert_cmpint (datc_event_heap_contains (h, e), ==, isfinite (ref[e]));
    }
  datc_event_heap_clear (h);
  g_assert_cmpuint (datc_event_heap_size (h), ==, 0);
  g_assert_false (datc_event_heap_contains (h, 0));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/eventheap/pop/goes-in-time-then-entity-order",
                   test_eventheap_pops_in_time_then_entity_order);
  g_test_add_func ("/eventheap/updates/agree-with-a-plain-array",
                   test_eventheap_agrees_with_a_plain_array);
  return g_test_run ();
}
