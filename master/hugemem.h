/* hugemem.h: memory for the master's few big, long-lived arrays (the bag's
 * task records and arena chunks, the ledger's task slots), in mappings
 * aligned to 2 MiB and put in huge pages once written.  A compaction forks
 * the master, and fork copies one page-table entry per 4 KiB page mapped:
 * 12-15 ms for the ~470 MiB of 10M tasks.  In huge pages that is one entry
 * per 2 MiB.  glibc's malloc hands out big blocks at page alignment, so THP
 * in `madvise` mode (the common default) would give them few huge pages
 * even when advised.
 *
 * Not by MADV_HUGEPAGE: a process advised so is scanned by khugepaged for
 * the rest of its life, and khugepaged (nice 19) holds the process's
 * mmap_lock while it waits for a CPU: on a busy host the master's mmap, and
 * every page fault queued behind it, the `datc status` thread's included,
 * waited up to 247 ms (benchmarks/README.md, "Where a slow status
 * waited").  The owner of an array says when a part of it is written
 * (datc_huge_settle) and those pages are made huge then, by MADV_COLLAPSE
 * (Linux 6.1 on), which involves no khugepaged.  On an older kernel
 * settling advises MADV_HUGEPAGE as before.  (With THP `always`, the
 * kernel gives huge pages and scans every process anyway.)
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
/* The first `used` bytes of `p` (`len` long, as allocated or last
 * reallocated) are in use: from now on in huge pages, those of them not yet
 * written included (they are written with zeros: they count in the RSS from
 * now on).  Costs a copy of what is not huge yet (about 0.2 s for 466 MiB
 * here); what is huge already is skipped.  Nothing below DATC_HUGE_MIN,
 * nothing when memory or huge pages are short. */
void datc_huge_settle (gpointer p, gsize len, gsize used);
/* Frees `p`, which is `len` long (as allocated or last reallocated). */
void datc_huge_free (gpointer p, gsize len);

G_END_DECLS
