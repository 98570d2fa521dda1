/* taskqueue.h: the order in which queued tasks are handed out, optionally
 * split into partitions so that each site only gets its share (static
 * mode).
 *
 * It costs no memory per task: ids never handed out are found by one
 * cursor per partition walking that partition's ids upward, and ids that
 * come back (lost agent, drained, retried, deferred) go to their
 * partition's ring, served first.  Whether an id is still queued is asked
 * of the owner (the ledger) through a callback, so a stale ring entry
 * costs one skip and nothing else.
 *
 * The owner also tells the queue when an id enters or leaves the queued
 * state (datc_task_queue_count), which keeps a count per partition. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct DatcTaskQueue DatcTaskQueue;

/* TRUE when `id` may be handed out now. */
typedef gboolean (*DatcTaskQueueIsQueued) (gpointer data, guint64 id);

/* One partition holding every id. */
DatcTaskQueue *datc_task_queue_new (DatcTaskQueueIsQueued is_queued, gpointer data);
void datc_task_queue_free (DatcTaskQueue *q);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcTaskQueue, datc_task_queue_free)

/* Deals ids to `n` partitions in proportion to `weights` (each > 0): the
 * positions 0..W-1 (W the sum of the weights divided by their gcd) are
 * dealt by a smooth weighted round robin, and id goes to the partition of
 * position (id - 1) mod W.  So the split is a pure function of the weights,
 * interleaved (no partition gets all the long tail of a sorted file), and
 * holds for ids added later.  Restarts every scan from id 1 and recounts
 * the queued ids of each partition among 1..n_tasks. */
void datc_task_queue_split (DatcTaskQueue *q, guint n, const guint *weights, guint64 n_tasks);
guint datc_task_queue_partitions (DatcTaskQueue *q);
guint datc_task_queue_partition_of (DatcTaskQueue *q, guint64 id);

/* The owner's state change: `id` became queued (+1) or stopped being (-1). */
void datc_task_queue_count (DatcTaskQueue *q, guint64 id, gint delta);
/* Queued ids in `partition`, per the owner's counts. */
guint64 datc_task_queue_queued (DatcTaskQueue *q, guint partition);

/* `id` was handed out (or looked at) and is queued again: it is served
 * before fresh ids of its partition.  Ids the scan has not reached yet
 * need nothing and are ignored. */
void datc_task_queue_push (DatcTaskQueue *q, guint64 id);

/* The next queued id of `partition` among 1..n_tasks, FALSE when none. */
gboolean datc_task_queue_next (DatcTaskQueue *q, guint partition, guint64 n_tasks, guint64 *id);

/* Forgets the rings and restarts every scan from id 1 (after a replay,
 * when any id may be queued again). */
void datc_task_queue_rewind (DatcTaskQueue *q);

G_END_DECLS
