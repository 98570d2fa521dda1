/* resultpack.h: results.jsonl lines packed for a journal checkpoint
 * (master/README.md, Compaction).  A line is ~370 bytes of JSON; packed,
 * it is ~25: integers as varints, most of them as the difference from
 * the line before, and the strings that repeat (the agent's site, proxy,
 * host, id and output file; the status and class) named once per packed
 * run and then by their index in it.  A packed run stands alone (no
 * state crosses from one to the next), so each checkpoint record can be
 * read by itself.  A line that would not come back byte for byte goes in
 * verbatim, so unpacking always gives the exact bytes that were packed.
 * The packer reads only the lines it is given: it runs on the compaction's
 * writer thread, away from the ledger. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Packs `len` bytes of whole lines (each ended by "\n") onto `out`;
 * returns how many of them went in verbatim. */
guint datc_result_pack (const guint8 *lines, gsize len, GByteArray *out);

/* Appends the lines packed in `packed` to `out`.  Bad bytes are refused
 * (DATC_LEDGER_ERROR_CORRUPT) naming the offset and what was wrong. */
gboolean datc_result_unpack (const guint8 *packed, gsize len, GString *out, GError **error);

G_END_DECLS
