/* eventheap.h: the future events of a simulation, as an indexed binary
 * min-heap over a fixed set of entities (slots, proxies).  Each entity has
 * at most one pending event, so rescheduling or cancelling is an update in
 * place: the heap never grows, never holds stale entries, and is allocated
 * once per simulation.  Equal times pop in entity order, which keeps runs
 * reproducible and lets callers order simultaneous kinds of events by how
 * they number entities. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct DatcEventHeap DatcEventHeap;

DatcEventHeap *datc_event_heap_new (guint n_entities);
void datc_event_heap_free (DatcEventHeap *h);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcEventHeap, datc_event_heap_free)

/* Removes every pending event. */
void datc_event_heap_clear (DatcEventHeap *h);
/* Schedules (or reschedules) entity e at time t. */
void datc_event_heap_set (DatcEventHeap *h, guint e, double t);
/* Cancels entity e's event if it has one. */
void datc_event_heap_remove (DatcEventHeap *h, guint e);
gboolean datc_event_heap_contains (const DatcEventHeap *h, guint e);
guint datc_event_heap_size (const DatcEventHeap *h);
/* The earliest event, left in place; FALSE when there is none. */
gboolean datc_event_heap_peek (const DatcEventHeap *h, guint *e, double *t);
/* The earliest event, removed; FALSE when there is none. */
gboolean datc_event_heap_pop (DatcEventHeap *h, guint *e, double *t);

G_END_DECLS
