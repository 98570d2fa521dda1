/* test-hugemem.c: contents kept through every kind of growth and shrink
 * (small to small, across DATC_HUGE_MIN both ways, mapping to mapping, which
 * moves pages), zero-filled allocations, and on Linux that a mapping is
 * 2 MiB-aligned, never advised MADV_HUGEPAGE (its VmFlags in
 * /proc/self/smaps without `hg`: khugepaged never scans the process), and
 * in huge pages once settled (AnonHugePages), only as far as said to be
 * used, also after it was moved by a growth; on a kernel without
 * MADV_COLLAPSE, advised once settled. */
#include "hugemem.h"

#include <stdio.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

static guint8
pattern (gsize i)
{
  return (guint8) (i * 2654435761u >> 13);
}

static void
fill (guint8 *p, gsize from, gsize to)
{
  for (gsize i = from; i < to; i++)
    p[i] = pattern (i);
}

static void
assert_filled (const guint8 *p, gsize len)
{
  for (gsize i = 0; i < len; i++)
    if (p[i] != pattern (i))
      g_error ("byte %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT " changed", i, len);
}

static void
test_alloc_is_zeroed (void)
{
  gsize lens[] = { 1, 4096, DATC_HUGE_MIN - 1, DATC_HUGE_MIN, 3 * DATC_HUGE_MIN + 5 };
  for (guint k = 0; k < G_N_ELEMENTS (lens); k++)
    {
      guint8 *p = datc_huge_alloc (lens[k]);
      for (gsize i = 0; i < lens[k]; i++)
        g_assert_cmpuint (p[i], ==, 0);
      datc_huge_free (p, lens[k]);
    }
  g_assert_null (datc_huge_alloc (0));
  datc_huge_free (NULL, 0);
}

static void
test_realloc_keeps_contents (void)
{
  /* Each step keeps what was there and fills what it added. */
  const gsize steps[] = {
    100,                      /* small */
    1 << 20,                  /* small to small */
    DATC_HUGE_MIN + 1,        /* across: copied into a mapping */
    5 * DATC_HUGE_MIN + 4095, /* mapping to mapping: pages moved */
    5 * DATC_HUGE_MIN + 4096, /* within the same rounded length */
    64 * DATC_HUGE_MIN,       /* moved again, much larger */
    3 * DATC_HUGE_MIN,        /* shrunk, still a mapping */
    DATC_HUGE_MIN - 1,        /* across, down: copied into malloc */
    10,
  };
  guint8 *p = NULL;
  gsize len = 0;
  for (guint k = 0; k < G_N_ELEMENTS (steps); k++)
    {
      p = datc_huge_realloc (p, len, steps[k]);
      if (steps[k] > len)
        fill (p, len, steps[k]);
      len = steps[k];
      assert_filled (p, len);
    }
  datc_huge_free (p, len);
}

#ifdef __linux__
/* A field of the mapping that holds `p`, from /proc/self/smaps: the text
 * after its name. */
static gchar *
smaps_field (gconstpointer p, const char *name)
{
  g_autofree gchar *smaps = NULL;
  g_assert_true (g_file_get_contents ("/proc/self/smaps", &smaps, NULL, NULL));
  g_auto (GStrv) lines = g_strsplit (smaps, "\n", -1);
  gboolean inside = FALSE;
  for (guint i = 0; lines[i] != NULL; i++)
    {
      guint64 lo, hi;
      /* A mapping's first line is "LO-HI perms ..."; its fields' names
       * never parse as that ("AnonHugePages:" stops at the 'n'). */
      if (sscanf (lines[i], "%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x ", &lo, &hi) == 2)
        inside = (guintptr) p >= lo && (guintptr) p < hi;
      else if (inside && g_str_has_prefix (lines[i], name))
        return g_strdup (lines[i] + strlen (name));
    }
  return NULL;
}

static gboolean
advised_huge (gconstpointer p)
{
  g_autofree gchar *flags = smaps_field (p, "VmFlags:");
  g_assert_nonnull (flags);
  g_auto (GStrv) words = g_strsplit_set (g_strstrip (flags), " ", -1);
  return g_strv_contains ((const char *const *) words, "hg");
}

/* "AnonHugePages:" or "Rss:" of the mappings over [p, p + len), in bytes
 * (a growth leaves the moved pages and the new ones in two). */
static guint64
smaps_bytes (gconstpointer p, gsize len, const char *name)
{
  g_autofree gchar *smaps = NULL;
  g_assert_true (g_file_get_contents ("/proc/self/smaps", &smaps, NULL, NULL));
  g_auto (GStrv) lines = g_strsplit (smaps, "\n", -1);
  gboolean inside = FALSE;
  guint64 sum = 0;
  for (guint i = 0; lines[i] != NULL; i++)
    {
      guint64 lo, hi;
      if (sscanf (lines[i], "%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x ", &lo, &hi) == 2)
        inside = lo < (guintptr) p + len && hi > (guintptr) p;
      else if (inside && g_str_has_prefix (lines[i], name))
        sum += g_ascii_strtoull (lines[i] + strlen (name), NULL, 10) * 1024;
    }
  return sum;
}

/* MADV_COLLAPSE known (Linux 6.1 on): an advice the kernel does not know is
 * EINVAL even for no bytes. */
static gboolean
kernel_collapses (void)
{
  gsize page = (gsize) sysconf (_SC_PAGESIZE);
  void *p = mmap (NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  g_assert_true (p != MAP_FAILED);
  gboolean yes = madvise (p, 0, 25 /* MADV_COLLAPSE */) == 0;
  munmap (p, page);
  return yes;
}

static void
test_mapping_aligned_and_settled (void)
{
  if (!g_file_test ("/sys/kernel/mm/transparent_hugepage/enabled", G_FILE_TEST_EXISTS))
    {
      g_test_skip ("no transparent huge pages in this kernel");
      return;
    }
  gboolean collapses = kernel_collapses ();
  gsize len = 3 * DATC_HUGE_MIN;
  guint8 *p = datc_huge_alloc (len);
  g_assert_cmpuint ((guintptr) p % DATC_HUGE_MIN, ==, 0);
  /* Not advised: khugepaged never learns of this process (hugemem.h). */
  g_assert_false (advised_huge (p));
  fill (p, 0, len);
  datc_huge_settle (p, len, len);
  if (collapses)
    {
      g_assert_false (advised_huge (p));
      g_assert_cmpuint (smaps_bytes (p, len, "AnonHugePages:"), ==, len);
    }
  else
    g_assert_true (advised_huge (p));
  assert_filled (p, len);

  /* Grown: moved to another aligned region, its huge pages whole; only the
   * part said to be used is settled (5 MiB: 3 huge pages, the rest of the
   * mapping not even there). */
  gsize more = 40 * DATC_HUGE_MIN + 17;
  p = datc_huge_realloc (p, len, more);
  g_assert_cmpuint ((guintptr) p % DATC_HUGE_MIN, ==, 0);
  assert_filled (p, len);
  if (collapses)
    g_assert_cmpuint (smaps_bytes (p, more, "AnonHugePages:"), ==, len);
  fill (p, len, len + DATC_HUGE_MIN / 2);
  datc_huge_settle (p, more, len + DATC_HUGE_MIN / 2);
  if (collapses)
    {
      g_assert_cmpuint (smaps_bytes (p, more, "AnonHugePages:"), ==, len + DATC_HUGE_MIN);
      g_assert_cmpuint (smaps_bytes (p, more, "Rss:"), ==, len + DATC_HUGE_MIN);
      g_assert_false (advised_huge (p + more - 1));
    }
  assert_filled (p, len + DATC_HUGE_MIN / 2);
  datc_huge_free (p, more);

  /* Below the threshold: plain malloc, never advised nor settled. */
  guint8 *small = datc_huge_alloc (4096);
  datc_huge_settle (small, 4096, 4096);
  g_assert_false (advised_huge (small));
  datc_huge_free (small, 4096);
}
#endif

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/hugemem/alloc/is-zero-filled", test_alloc_is_zeroed);
  g_test_add_func ("/hugemem/realloc/keeps-contents-across-growth-and-shrink",
                   test_realloc_keeps_contents);
#ifdef __linux__
  g_test_add_func ("/hugemem/alloc/is-2mib-aligned-and-huge-once-settled-not-advised",
                   test_mapping_aligned_and_settled);
#endif
  return g_test_run ();
}
