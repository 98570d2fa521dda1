/* hugemem.c: 2 MiB-aligned mappings put in huge pages once written (see
 * hugemem.h for why, and why not by MADV_HUGEPAGE).  A mapping's length is
 * the caller's rounded up to 2 MiB, so its last huge page lies wholly
 * inside it (a partial one could never be huge).  It is aligned by mapping
 * 2 MiB more than needed and unmapping the ends.  Growth maps a new aligned
 * region and moves the old pages onto its start with mremap (MREMAP_FIXED):
 * page tables are moved, huge ones whole, and nothing is copied. */
#include "hugemem.h"

#include <errno.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

#if defined(__linux__) && defined(MREMAP_FIXED) && defined(MREMAP_MAYMOVE)
#define HUGE_MAPPED 1
#else
#define HUGE_MAPPED 0
#endif

#define HUGE_ALIGN DATC_HUGE_MIN

static gboolean
is_mapped (gsize len)
{
  return HUGE_MAPPED && len >= DATC_HUGE_MIN;
}

static gsize
mapped_len (gsize len)
{
  if (len > G_MAXSIZE - HUGE_ALIGN)
    g_error ("hugemem: %" G_GSIZE_FORMAT " bytes is too much to map", len);
  return (len + HUGE_ALIGN - 1) & ~(HUGE_ALIGN - 1);
}

#if HUGE_MAPPED
/* `len` bytes (a multiple of HUGE_ALIGN) at a multiple of HUGE_ALIGN. */
static guint8 *
map_aligned (gsize len)
{
  gsize span = len + HUGE_ALIGN;
  guint8 *p = mmap (NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    g_error ("hugemem: cannot map %" G_GSIZE_FORMAT " bytes: %s", len, g_strerror (errno));
  guint8 *a = (guint8 *) (((guintptr) p + HUGE_ALIGN - 1) & ~(guintptr) (HUGE_ALIGN - 1));
  if (a > p)
    munmap (p, (gsize) (a - p));
  if (a + len < p + span)
    munmap (a + len, (gsize) (p + span - (a + len)));
  return a;
}

/* Linux's numbers, for C libraries whose headers lack them. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

/* Whether this kernel knows MADV_COLLAPSE (6.1 on): an advice it does not
 * know is EINVAL even for no bytes, one it knows does nothing for none. */
static gboolean
collapse_known (void)
{
  static gsize known = 0; /* 0 not asked, 1 no, 2 yes */
  if (g_once_init_enter (&known))
    {
      gsize page = (gsize) sysconf (_SC_PAGESIZE);
      void *p = mmap (NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      gboolean yes = p != MAP_FAILED && madvise (p, 0, MADV_COLLAPSE) == 0;
      if (p != MAP_FAILED)
        munmap (p, page);
      g_once_init_leave (&known, yes ? 2 : 1);
    }
  return known == 2;
}
#endif

gpointer
datc_huge_alloc (gsize len)
{
  if (!is_mapped (len))
    return g_malloc0 (len);
#if HUGE_MAPPED
  return map_aligned (mapped_len (len));
#else
  g_assert_not_reached ();
#endif
}

gpointer
datc_huge_realloc (gpointer p, gsize old_len, gsize new_len)
{
  if (p == NULL)
    return datc_huge_alloc (new_len);
  if (!is_mapped (old_len) && !is_mapped (new_len))
    return g_realloc (p, new_len);
  if (!is_mapped (old_len) || !is_mapped (new_len))
    {
      /* Across DATC_HUGE_MIN: the one time the bytes are copied (at most
       * 2 MiB of them, from or to the small kind). */
      gpointer q = datc_huge_alloc (new_len);
      memcpy (q, p, MIN (old_len, new_len));
      datc_huge_free (p, old_len);
      return q;
    }
#if HUGE_MAPPED
  gsize from = mapped_len (old_len), to = mapped_len (new_len);
  if (to <= from)
    {
      if (to < from)
        munmap ((guint8 *) p + to, from - to);
      return p;
    }
  guint8 *q = map_aligned (to);
  /* The old pages onto the start of the new region, which this replaces;
   * the rest of the region stays as mapped (and advised) above. */
  if (mremap (p, from, from, MREMAP_MAYMOVE | MREMAP_FIXED, q) == MAP_FAILED)
    g_error ("hugemem: cannot move %" G_GSIZE_FORMAT " bytes: %s", from, g_strerror (errno));
  return q;
#else
  g_assert_not_reached ();
#endif
}

void
datc_huge_free (gpointer p, gsize len)
{
  if (p == NULL)
    return;
  if (!is_mapped (len))
    {
      g_free (p);
      return;
    }
#if HUGE_MAPPED
  munmap (p, mapped_len (len));
#endif
}

void
datc_huge_settle (gpointer p, gsize len, gsize used)
{
  if (p == NULL || !is_mapped (len) || used == 0)
    return;
#if HUGE_MAPPED
  gsize n = mapped_len (MIN (used, len));
  if (collapse_known ())
    {
      /* Written pages first (a range never written is no page at all, and
       * collapse skips it), then made huge.  Either can fail for want of
       * memory or of a free huge page: the pages stay as they are. */
      (void) madvise (p, n, MADV_POPULATE_WRITE);
      (void) madvise (p, n, MADV_COLLAPSE);
      return;
    }
#ifdef MADV_HUGEPAGE
  /* An older kernel: khugepaged makes them huge in its own time (and scans
   * this process from then on); later faults get huge pages at once.
   * EINVAL where THP is not built in: ordinary pages then. */
  (void) madvise (p, mapped_len (len), MADV_HUGEPAGE);
#endif
#endif
}
