/* crc32c.h: CRC-32C (Castagnoli), as used by iSCSI, ext4 and LevelDB logs.
 * Table-driven, slicing by 8 bytes. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* crc32c(crc32c(0, a), b) == crc32c of a then b.  Start with 0. */
guint32 datc_crc32c (guint32 crc, const void *data, gsize len);

G_END_DECLS
