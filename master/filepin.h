/* filepin.h: a file's pages kept in memory for as long as a process runs.
 *
 * Why.  `datc status` is the `datc` front (front.c), a program of its own
 * run now and then.  Between two runs its file's pages are page cache that
 * no process maps, the first thing memory reclaim takes: on these VMs
 * DAMON's proactive reclaim (a `pageout` scheme for unmapped file pages
 * left idle for a minute) took them during the first campaign after a
 * build, and the `datc status` after that, reading its own code back from
 * a disk busy with the journal, took 558 ms (benchmarks/README.md, "The
 * front's pages, and a stall at a campaign's end").  A head node under memory pressure does the
 * same to a command run every few minutes.  So the master pins the front's file while it runs
 * (run.c): mapped, its pages are not reclaimed as unmapped cache (a `pageout` of unmapped pages,
 * POSIX_FADV_DONTNEED, a drop of clean caches pass them by); locked too, when RLIMIT_MEMLOCK allows
 * (the front is under 1 MiB; Debian's default limit is 8 MiB), they are
 * not reclaimed at all.
 *
 * The mapping is read-only and shared with the page cache: it costs the
 * file's size once, whoever else maps it.  A fork does not copy it (no
 * anonymous pages) and the child does not inherit the lock. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct DatcFilePin DatcFilePin;

/* Maps PATH read-only, reads every page in and locks them if it may.
 * NULL with an error naming PATH when it cannot be opened or mapped, is
 * not a regular file, or is empty. */
DatcFilePin *datc_file_pin (const char *path, GError **error);
/* TRUE when the pages are locked (mlock succeeded), not only mapped. */
gboolean datc_file_pin_locked (const DatcFilePin *pin);
gsize datc_file_pin_size (const DatcFilePin *pin);
/* Unmaps (and so unlocks).  Accepts NULL. */
void datc_file_pin_free (DatcFilePin *pin);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcFilePin, datc_file_pin_free)

G_END_DECLS
