/* test-taskqueue.c: the order queued tasks are handed out in, and the
 * static split: each id belongs to exactly one partition, shares follow
 * the weights, every queued id is handed out exactly once, ids that come
 * back are served first, and ids added later are dealt the same way. */
#include <glib.h>
#include <string.h>

#include "taskqueue.h"

/* The owner's side: a state per id, as the ledger keeps it. */
typedef struct {
  guint8 *queued; /* index id - 1 */
  guint64 n;
} Owner;

static gboolean
is_queued (gpointer data, guint64 id)
{
  Owner *o = data;
  return id >= 1 && id <= o->n && o->queued[id - 1];
}

static Owner *
owner_new (guint64 n)
{
  Owner *o = g_new0 (Owner, 1);
  o->n = n;
  o->queued = g_new (guint8, n);
  memset (o->queued, 1, n);
  return o;
}

static void
owner_free (Owner *o)
{
  g_free (o->queued);
  g_free (o);
}

/* Takes one id out of the queue the way the ledger does. */
static gboolean
take (DatcTaskQueue *q, Owner *o, guint part, guint64 *id)
{
  if (!datc_task_queue_next (q, part, o->n, id))
    return FALSE;
  g_assert_true (o->queued[*id - 1]);
  o->queued[*id - 1] = 0;
  datc_task_queue_count (q, *id, -1);
  return TRUE;
}

static void
test_one_partition_in_order (void)
{
  Owner *o = owner_new (1000);
  DatcTaskQueue *q = datc_task_queue_new (is_queued, o);
  for (guint64 id = 1; id <= o->n; id++)
    datc_task_queue_count (q, id, +1);
  g_assert_cmpuint (datc_task_queue_queued (q, 0), ==, 1000);

  guint64 id, expect = 1;
  while (take (q, o, 0, &id))
    g_assert_cmpuint (id, ==, expect++);
  g_assert_cmpuint (expect, ==, 1001);
  g_assert_cmpuint (datc_task_queue_queued (q, 0), ==, 0);
  datc_task_queue_free (q);
  owner_free (o);
}

static void
test_split_shares_follow_weights (void)
{
  const guint weights[] = { 16, 8, 2, 6 }; /* gcd 2: a round of 16 positions */
  Owner *o = owner_new (3200);
  DatcTaskQueue *q = datc_task_queue_new (is_queued, o);
  datc_task_queue_split (q, 4, weights, o->n);
  g_assert_cmpuint (datc_task_queue_partitions (q), ==, 4);

  guint64 total = 0;
  for (guint k = 0; k < 4; k++)
    {
      /* 3200 ids in rounds of 16: exactly weight/32 of them each. */
      guint64 want = 3200u * weights[k] / 32u;
      g_assert_cmpuint (datc_task_queue_queued (q, k), ==, want);
      guint64 id, n = 0, last = 0;
      while (take (q, o, k, &id))
        {
          g_assert_cmpuint (datc_task_queue_partition_of (q, id), ==, k);
          g_assert_cmpuint (id, >, last); /* fresh ids in increasing order */
          last = id;
          n++;
        }
      g_assert_cmpuint (n, ==, want);
      g_assert_cmpuint (datc_task_queue_queued (q, k), ==, 0);
      total += n;
    }
  g_assert_cmpuint (total, ==, o->n);
  datc_task_queue_free (q);
  owner_free (o);
}

/* The deal is interleaved: no partition gets a long run of consecutive
 * ids while another waits (sorted task files keep their mix per site). */
static void
test_split_is_interleaved (void)
{
  const guint weights[] = { 3, 1 };
  Owner *o = owner_new (400);
  DatcTaskQueue *q = datc_task_queue_new (is_queued, o);
  datc_task_queue_split (q, 2, weights, o->n);
  guint run = 0, longest = 0, prev = G_MAXUINT;
  for (guint64 id = 1; id <= o->n; id++)
    {
      guint k = datc_task_queue_partition_of (q, id);
      run = k == prev ? run + 1 : 1;
      longest = MAX (longest, run);
      prev = k;
    }
  g_assert_cmpuint (longest, <=, 3);
  datc_task_queue_free (q);
  owner_free (o);
}

static void
test_requeued_first_and_once (void)
{
  const guint weights[] = { 1, 1 };
  Owner *o = owner_new (100);
  DatcTaskQueue *q = datc_task_queue_new (is_queued, o);
  datc_task_queue_split (q, 2, weights, o->n);
  guint64 a, b, c;
  g_assert_true (take (q, o, 0, &a));
  g_assert_true (take (q, o, 0, &b));
  g_assert_true (take (q, o, 0, &c));
  /* b comes back: it is next, before any fresh id, and only once even if
   * pushed twice. */
  o->queued[b - 1] = 1;
  datc_task_queue_count (q, b, +1);
  datc_task_queue_push (q, b);
  datc_task_queue_push (q, b);
  guint64 id;
  g_assert_true (take (q, o, 0, &id));
  g_assert_cmpuint (id, ==, b);
  g_assert_true (take (q, o, 0, &id));
  g_assert_cmpuint (id, >, c);
  /* An id of the other partition pushed back does not show up here. */
  guint64 other;
  g_assert_true (take (q, o, 1, &other));
  o->queued[other - 1] = 1;
  datc_task_queue_push (q, other);
  g_assert_true (take (q, o, 0, &id));
  g_assert_cmpuint (datc_task_queue_partition_of (q, id), ==, 0);
  g_assert_true (take (q, o, 1, &id));
  g_assert_cmpuint (id, ==, other);
  datc_task_queue_free (q);
  owner_free (o);
}

/* Ids added after the split (datc submit) are dealt by the same rule and
 * found by the scans, which stopped at the old end. */
static void
test_ids_added_later (void)
{
  const guint weights[] = { 2, 1 };
  Owner *o = owner_new (30);
  DatcTaskQueue *q = datc_task_queue_new (is_queued, o);
  datc_task_queue_split (q, 2, weights, o->n);
  guint64 id, n0 = 0, n1 = 0;
  while (take (q, o, 0, &id))
    n0++;
  while (take (q, o, 1, &id))
    n1++;
  g_assert_cmpuint (n0, ==, 20);
  g_assert_cmpuint (n1, ==, 10);

  o->queued = g_renew (guint8, o->queued, 60);
  memset (o->queued + 30, 1, 30);
  o->n = 60;
  for (guint64 i = 31; i <= 60; i++)
    datc_task_queue_count (q, i, +1);
  g_assert_cmpuint (datc_task_queue_queued (q, 0), ==, 20);
  n0 = 0;
  while (take (q, o, 0, &id))
    {
      g_assert_cmpuint (id, >, 30);
      n0++;
    }
  g_assert_cmpuint (n0, ==, 20);
  datc_task_queue_free (q);
  owner_free (o);
}

/* Huge capacities (100000 slots x 10000 proxies) keep a small deal table
 * and still give every site a share. */
static void
test_huge_weights (void)
{
  const guint weights[] = { 1000000000u, 1u, 7u };
  Owner *o = owner_new (100000);
  DatcTaskQueue *q = datc_task_queue_new (is_queued, o);
  datc_task_queue_split (q, 3, weights, o->n);
  for (guint k = 0; k < 3; k++)
    g_assert_cmpuint (datc_task_queue_queued (q, k), >, 0);
  g_assert_cmpuint (datc_task_queue_queued (q, 0), >, 99000);
  g_assert_cmpuint (datc_task_queue_queued (q, 0) + datc_task_queue_queued (q, 1)
                        + datc_task_queue_queued (q, 2),
                    ==, 100000);
  datc_task_queue_free (q);
  owner_free (o);
}

/* After a rewind (replay) every queued id is found again, none twice. */
static void
test_rewind (void)
{
  Owner *o = owner_new (50);
  DatcTaskQueue *q = datc_task_queue_new (is_queued, o);
  guint64 id;
  for (guint i = 0; i < 20; i++)
    g_assert_true (take (q, o, 0, &id));
  for (guint64 i = 5; i <= 20; i += 5)
    {
      o->queued[i - 1] = 1;
      datc_task_queue_push (q, i);
    }
  datc_task_queue_rewind (q);
  g_autoptr (GHashTable) seen = g_hash_table_new (g_int64_hash, g_int64_equal);
  guint64 ids[64];
  guint n = 0;
  while (take (q, o, 0, &ids[n]))
    {
      g_assert_false (g_hash_table_contains (seen, &ids[n]));
      g_hash_table_add (seen, &ids[n]);
      n++;
    }
  g_assert_cmpuint (n, ==, 34);
  datc_task_queue_free (q);
  owner_free (o);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/taskqueue/one-partition-in-order", test_one_partition_in_order);
  g_test_add_func ("/taskqueue/split-shares-follow-weights", test_split_shares_follow_weights);
  g_test_add_func ("/taskqueue/split-is-interleaved", test_split_is_interleaved);
  g_test_add_func ("/taskqueue/requeued-first-and-once", test_requeued_first_and_once);
  g_test_add_func ("/taskqueue/ids-added-later", test_ids_added_later);
  g_test_add_func ("/taskqueue/huge-weights", test_huge_weights);
  g_test_add_func ("/taskqueue/rewind", test_rewind);
  return g_test_run ();
}
