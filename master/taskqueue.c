/* taskqueue.c: per-partition cursors over a dealt id space, plus rings of
 * ids that came back. */
#include "taskqueue.h"

/* Positions dealt per round: weights are scaled down to sum to at most
 * this, so a split is proportional to within 1/4096 of the bag and the
 * deal table stays small whatever the sites' capacities are. */
#define MAX_ROUND 4096u

typedef struct {
  guint32 *ids;
  gsize head, len, cap;
} Ring;

typedef struct {
  guint32 *pos; /* positions in a round that belong here, ascending */
  guint npos;
  guint64 round; /* cursor: round number ... */
  guint j;       /* ... and index into pos */
  Ring ring;
  guint64 queued;
} Part;

struct DatcTaskQueue {
  DatcTaskQueueIsQueued is_queued;
  gpointer data;
  guint n;
  Part *parts;
  guint round;   /* W: positions per round */
  guint16 *deal; /* position -> partition */
};

static void
ring_push (Ring *r, guint32 id)
{
  if (r->len == r->cap)
    {
      gsize cap = MAX (64, r->cap * 2);
      guint32 *n = g_new (guint32, cap);
      for (gsize i = 0; i < r->len; i++)
        n[i] = r->ids[(r->head + i) % r->cap];
      g_free (r->ids);
      r->ids = n;
      r->cap = cap;
      r->head = 0;
    }
  r->ids[(r->head + r->len) % r->cap] = id;
  r->len++;
}

static gboolean
ring_pop (Ring *r, guint32 *id)
{
  if (r->len == 0)
    return FALSE;
  *id = r->ids[r->head];
  r->head = (r->head + 1) % r->cap;
  r->len--;
  return TRUE;
}

static void
parts_free (DatcTaskQueue *q)
{
  for (guint k = 0; k < q->n; k++)
    {
      g_free (q->parts[k].pos);
      g_free (q->parts[k].ring.ids);
    }
  g_free (q->parts);
  g_free (q->deal);
  q->parts = NULL;
  q->deal = NULL;
  q->n = 0;
}

static guint64
gcd64 (guint64 a, guint64 b)
{
  while (b != 0)
    {
      guint64 t = a % b;
      a = b;
      b = t;
    }
  return a;
}

/* Builds the deal table for `n` weights (all > 0). */
static void
deal (DatcTaskQueue *q, guint n, const guint *weights)
{
  g_autofree guint64 *w = g_new (guint64, n);
  guint64 sum = 0, g = 0;
  for (guint k = 0; k < n; k++)
    {
      w[k] = MAX (weights[k], 1u);
      g = gcd64 (g, w[k]);
    }
  for (guint k = 0; k < n; k++)
    sum += (w[k] /= g);
  if (sum > MAX_ROUND)
    {
      guint64 scaled = 0;
      for (guint k = 0; k < n; k++)
        scaled += (w[k] = MAX (1u, (w[k] * MAX_ROUND + sum / 2) / sum));
      sum = scaled;
    }

  q->n = n;
  q->round = (guint) sum;
  q->deal = g_new (guint16, q->round);
  q->parts = g_new0 (Part, n);
  for (guint k = 0; k < n; k++)
    q->parts[k].pos = g_new (guint32, w[k]);

  /* Smooth weighted round robin: each position goes to the partition with
   * the largest running credit, which then pays the round's total. */
  g_autofree gint64 *credit = g_new0 (gint64, n);
  for (guint p = 0; p < q->round; p++)
    {
      guint best = 0;
      for (guint k = 0; k < n; k++)
        {
          credit[k] += (gint64) w[k];
          if (credit[k] > credit[best])
            best = k;
        }
      credit[best] -= (gint64) sum;
      q->deal[p] = (guint16) best;
      Part *pt = &q->parts[best];
      pt->pos[pt->npos++] = p;
    }
}

DatcTaskQueue *
datc_task_queue_new (DatcTaskQueueIsQueued is_queued, gpointer data)
{
  DatcTaskQueue *q = g_new0 (DatcTaskQueue, 1);
  q->is_queued = is_queued;
  q->data = data;
  deal (q, 1, (guint[]) { 1 });
  return q;
}

void
datc_task_queue_free (DatcTaskQueue *q)
{
  if (q == NULL)
    return;
  parts_free (q);
  g_free (q);
}

guint
datc_task_queue_partitions (DatcTaskQueue *q)
{
  return q->n;
}

guint
datc_task_queue_partition_of (DatcTaskQueue *q, guint64 id)
{
  g_return_val_if_fail (id > 0, 0);
  return q->deal[(id - 1) % q->round];
}

static guint64
cursor_id (DatcTaskQueue *q, const Part *p)
{
  return p->round * q->round + p->pos[p->j] + 1;
}

static void
advance (Part *p)
{
  if (++p->j == p->npos)
    {
      p->j = 0;
      p->round++;
    }
}

void
datc_task_queue_split (DatcTaskQueue *q, guint n, const guint *weights, guint64 n_tasks)
{
  g_return_if_fail (n > 0 && n <= G_MAXUINT16);
  parts_free (q);
  deal (q, n, weights);
  for (guint64 id = 1; id <= n_tasks; id++)
    if (q->is_queued (q->data, id))
      q->parts[datc_task_queue_partition_of (q, id)].queued++;
}

void
datc_task_queue_count (DatcTaskQueue *q, guint64 id, gint delta)
{
  Part *p = &q->parts[datc_task_queue_partition_of (q, id)];
  if (delta < 0 && p->queued > 0)
    p->queued--;
  else if (delta > 0)
    p->queued++;
}

guint64
datc_task_queue_queued (DatcTaskQueue *q, guint partition)
{
  return partition < q->n ? q->parts[partition].queued : 0;
}

void
datc_task_queue_push (DatcTaskQueue *q, guint64 id)
{
  Part *p = &q->parts[datc_task_queue_partition_of (q, id)];
  if (id < cursor_id (q, p))
    ring_push (&p->ring, (guint32) id);
}

gboolean
datc_task_queue_next (DatcTaskQueue *q, guint partition, guint64 n_tasks, guint64 *id)
{
  if (partition >= q->n)
    return FALSE;
  Part *p = &q->parts[partition];
  guint32 cand;
  while (ring_pop (&p->ring, &cand))
    if (q->is_queued (q->data, cand))
      {
        *id = cand;
        return TRUE;
      }
  for (;;)
    {
      guint64 c = cursor_id (q, p);
      if (c > n_tasks)
        return FALSE;
      advance (p);
      if (q->is_queued (q->data, c))
        {
          *id = c;
          return TRUE;
        }
    }
}

void
datc_task_queue_rewind (DatcTaskQueue *q)
{
  for (guint k = 0; k < q->n; k++)
    {
      Part *p = &q->parts[k];
      p->round = 0;
      p->j = 0;
      p->ring.head = p->ring.len = 0;
    }
}
