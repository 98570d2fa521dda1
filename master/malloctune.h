/* malloctune.h: glibc malloc's thresholds set for a long-running master.
 *
 * Every call that changes a process's mappings (brk, mmap, munmap,
 * mprotect, mremap) takes its mmap_lock for writing, and a writer waits
 * for every reader to leave: khugepaged scanning the master's huge-page
 * regions (it runs at nice 19 and holds the lock while it waits for a CPU),
 * a page fault of another thread.  While the writer waits, each new page
 * fault of the process queues behind it, the thread answering `datc
 * status` included.  With 1,000 agents on a saturated 2-core machine,
 * one `datc run` thread waited 155 ms in mmap behind khugepaged, and the
 * `datc status` asked meanwhile took 202 ms (benchmarks/README.md,
 * "Where a slow status waited").
 *
 * glibc's defaults make such calls often: the heap grows by 128 KiB past a
 * request, shrinks back (trim) when 128 KiB lie free at its top, and gives
 * anything from 128 KiB (raised as big blocks are freed, up to 32 MiB) its
 * own mapping, unmapped when freed.  datc_malloc_tune_for_master sets
 * them once, before the master's threads start:
 *
 *   M_MMAP_THRESHOLD 32 MiB  (what glibc's own sliding threshold tops out
 *                             at; the master's big arrays are hugemem's)
 *   M_TOP_PAD        16 MiB  (growth in big steps; address space, not RSS)
 *   M_TRIM_THRESHOLD 128 MiB (memory freed at the top is kept for reuse)
 *
 * Setting any of them also stops glibc's sliding threshold, so all three
 * are set.  The peak RSS does not grow (what is kept was used at the peak);
 * a master that shrinks from its peak keeps up to 128 MiB more than before. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DATC_MALLOC_MMAP_THRESHOLD ((gsize) 32 << 20)
#define DATC_MALLOC_TOP_PAD ((gsize) 16 << 20)
#define DATC_MALLOC_TRIM_THRESHOLD ((gsize) 128 << 20)

/* Sets the three; FALSE when malloc refused one (not glibc: nothing is
 * set, nothing changes). */
gboolean datc_malloc_tune_for_master (void);

G_END_DECLS
