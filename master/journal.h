/* journal.h: the campaign's append-only log.  A file starts with the 8-byte
 * magic "DATCJNL1"; each record is [u32 length LE][u32 CRC-32C LE of the
 * payload][payload].  Records are built in memory and written together by
 * datc_journal_commit(), which does one write() and one fdatasync() for all
 * of them (group commit).  On open, every valid record is replayed in order;
 * the first record that is short, over DATC_JOURNAL_RECORD_MAX or fails its
 * checksum ends the log: that torn tail is cut off (ftruncate) and reported,
 * never replayed.  The journal does not know what the payloads mean. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DATC_JOURNAL_RECORD_MAX (16u * 1024u * 1024u)

#define DATC_JOURNAL_ERROR (datc_journal_error_quark ())
GQuark datc_journal_error_quark (void);

typedef enum {
  DATC_JOURNAL_ERROR_IO,
  DATC_JOURNAL_ERROR_NOT_A_JOURNAL,  /* bad magic */
  DATC_JOURNAL_ERROR_REPLAY,         /* the replay callback failed */
} DatcJournalError;

typedef struct DatcJournal DatcJournal;

/* Called once per valid record during open.  Returning FALSE stops the open
 * with that error (prefixed with the record's offset). */
typedef gboolean (*DatcJournalReplayFunc) (const guint8 *payload, gsize len,
                                           gpointer user_data, GError **error);

typedef struct {
  guint64 records;        /* replayed */
  guint64 valid_bytes;    /* where the log now ends */
  guint64 torn_bytes;     /* cut off after the last valid record */
} DatcJournalRecovery;

/* Opens or creates `path`. `replay` may be NULL. `recovery` may be NULL. */
DatcJournal *datc_journal_open (const char *path, DatcJournalReplayFunc replay,
                                gpointer user_data, DatcJournalRecovery *recovery,
                                GError **error);
/* Replays `path` read-only: nothing is created, cut or written, so it is
 * safe while a master appends.  A torn tail is reported, not removed. */
gboolean datc_journal_scan (const char *path, DatcJournalReplayFunc replay,
                            gpointer user_data, DatcJournalRecovery *recovery,
                            GError **error);
void datc_journal_free (DatcJournal *journal);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcJournal, datc_journal_free)

/* Starts a record: returns the buffer to append the payload to (transfer
 * none).  Every begin() must be followed by end() before the next begin()
 * or commit(). */
GByteArray *datc_journal_begin (DatcJournal *journal);
/* Seals the record started by begin(): fills in its length and checksum. */
void datc_journal_end (DatcJournal *journal);
/* Convenience: begin + append + end. */
void datc_journal_append (DatcJournal *journal, const void *payload, gsize len);

/* Bytes sealed but not yet written. */
gsize datc_journal_pending (DatcJournal *journal);
/* Writes every sealed record and fdatasync()s once.  No-op when nothing is
 * pending.  After it returns TRUE the records survive a crash. */
gboolean datc_journal_commit (DatcJournal *journal, GError **error);

G_END_DECLS
