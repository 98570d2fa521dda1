/* malloctune.c: see malloctune.h for why. */
#include "malloctune.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

gboolean
datc_malloc_tune_for_master (void)
{
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD) && defined(M_TOP_PAD)                          \
    && defined(M_TRIM_THRESHOLD)
  /* mallopt returns 1 on success.  The mmap threshold first: glibc refuses
   * one above its maximum (HEAP_MAX_SIZE / 2, 32 MiB on 64-bit). */
  return mallopt (M_MMAP_THRESHOLD, (int) DATC_MALLOC_MMAP_THRESHOLD) == 1
         && mallopt (M_TOP_PAD, (int) DATC_MALLOC_TOP_PAD) == 1
         && mallopt (M_TRIM_THRESHOLD, (int) DATC_MALLOC_TRIM_THRESHOLD) == 1;
#else
  return FALSE;
#endif
}
