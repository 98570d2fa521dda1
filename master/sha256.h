/* sha256.h: SHA-256 (FIPS 180-4) of a task file, as campaign.json and the
 * journal's SOURCE records name it.  The CPU's SHA instructions where there
 * are some (x86-64 SHA-NI, asked once), else portable C: the same digest
 * as GLib's G_CHECKSUM_SHA256, which a start at 10M tasks spent 2.3 s of
 * its 4–6 s in (97–190 MB/s against over 1 GB/s). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  guint32 h[8];
  guint8 block[64]; /* a partial block, `fill` bytes */
  gsize fill;
  guint64 bytes; /* hashed so far */
  gboolean portable;
} DatcSha256;

#define DATC_SHA256_HEX_LEN 64

void datc_sha256_init (DatcSha256 *s);
/* The same, never using the CPU's instructions (tests compare the two). */
void datc_sha256_init_portable (DatcSha256 *s);
void datc_sha256_update (DatcSha256 *s, const void *data, gsize len);
/* Ends the hash: its digest in lowercase hex, NUL-ended, into `hex`.  `s`
 * is spent (init it again to reuse it). */
void datc_sha256_hex (DatcSha256 *s, gchar hex[DATC_SHA256_HEX_LEN + 1]);
/* The digest of `len` bytes at `data`, in one call. */
void datc_sha256_hex_of (const void *data, gsize len, gchar hex[DATC_SHA256_HEX_LEN + 1]);
/* Whether datc_sha256_init's hashes use the CPU's instructions. */
gboolean datc_sha256_accelerated (void);

G_END_DECLS
