/* crc32c.h: CRC-32C (Castagnoli), as used by iSCSI, ext4 and LevelDB logs.
 * The CPU's instruction where there is one (x86-64 SSE4.2), else
 * table-driven, slicing by 8 bytes. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* crc32c(crc32c(0, a), b) == crc32c of a then b.  Start with 0. */
guint32 datc_crc32c (guint32 crc, const void *data, gsize len);
/* The table-driven one, which datc_crc32c falls back to: the same values
 * (exported so that tests check it on a CPU that never uses it). */
guint32 datc_crc32c_sliced (guint32 crc, const void *data, gsize len);

G_END_DECLS
