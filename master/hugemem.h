/* hugemem.h: memory for the master's few big, long-lived arrays (the bag's
 * task records and arena chunks, the ledger's task slots), in mappings
 * aligned to 2 MiB and advised MADV_HUGEPAGE.  A compaction forks the
 * master, and fork copies one page-table entry per 4 KiB page mapped: 12-15
 * ms for the ~470 MiB of 10M tasks.  In huge pages that is one entry per
 * 2 MiB.  glibc's malloc hands out big blocks at page alignment, so THP in
 * `madvise` mode (the common default) would give them few huge pages even
 * when advised.
 *
 * The caller keeps the length it asked for and gives it back to grow and to
 * free (the kind of memory follows from it).  Below DATC_HUGE_MIN the
 * memory is plain g_malloc: a small bag does not take 2 MiB per array.
 * Where THP is off or absent (or outside Linux) the mapping is an ordinary
 * one and nothing else changes.  Out of memory aborts, as g_malloc does. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* One huge page: lengths from this on are mapped, rounded up to it. */
#define DATC_HUGE_MIN ((gsize) 2 << 20)

/* `len` bytes, zero-filled; NULL when `len` is 0.  (transfer full) */
gpointer datc_huge_alloc (gsize len);
/* `p` (from datc_huge_alloc or this, `old_len` long) made `new_len` long,
 * its first MIN (old_len, new_len) bytes kept; what follows them is
 * unspecified.  A mapping grows by moving its pages (mremap), not by
 * copying them, so growth never holds two copies.  (transfer full) */
gpointer datc_huge_realloc (gpointer p, gsize old_len, gsize new_len);
/* Frees `p`, which is `len` long (as allocated or last reallocated). */
void datc_huge_free (gpointer p, gsize len);

G_END_DECLS
