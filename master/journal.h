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

#include "iothread.h"

G_BEGIN_DECLS

#define DATC_JOURNAL_RECORD_MAX (16u * 1024u * 1024u)
/* The file's bytes around the payloads: its magic at the start, then a
 * header (length, crc32c) before each record. */
#define DATC_JOURNAL_MAGIC_BYTES 8u
#define DATC_JOURNAL_FRAME_BYTES 8u

#define DATC_JOURNAL_ERROR (datc_journal_error_quark ())
GQuark datc_journal_error_quark (void);

typedef enum {
  DATC_JOURNAL_ERROR_IO,
  DATC_JOURNAL_ERROR_NOT_A_JOURNAL, /* bad magic */
  DATC_JOURNAL_ERROR_REPLAY,        /* the replay callback failed */
  DATC_JOURNAL_ERROR_SWITCHED,      /* a compacted journal is in place, but its
                                     * directory could not be synced */
} DatcJournalError;

typedef struct DatcJournal DatcJournal;

/* Called once per valid record during open.  Returning FALSE stops the open
 * with that error (prefixed with the record's offset). */
typedef gboolean (*DatcJournalReplayFunc) (const guint8 *payload, gsize len, gpointer user_data,
                                           GError **error);

typedef struct {
  guint64 records;     /* replayed */
  guint64 valid_bytes; /* where the log now ends */
  guint64 torn_bytes;  /* cut off after the last valid record */
} DatcJournalRecovery;

/* Opens or creates `path`. `replay` may be NULL. `recovery` may be NULL. */
DatcJournal *datc_journal_open (const char *path, DatcJournalReplayFunc replay, gpointer user_data,
                                DatcJournalRecovery *recovery, GError **error);
/* Replays `path` read-only: nothing is created, cut or written, so it is
 * safe while a master appends.  A torn tail is reported, not removed. */
gboolean datc_journal_scan (const char *path, DatcJournalReplayFunc replay, gpointer user_data,
                            DatcJournalRecovery *recovery, GError **error);
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
/* While a commit's fdatasync runs (tens of ms on a busy disk, hundreds
 * when other files' writeback is in the way), `wait` may serve what must
 * not wait for it: with one set, the fdatasync runs on a thread of the
 * journal's and the caller's thread calls wait (user_data, done_fd)
 * until it is done; `wait` must return once done_fd is readable (poll it
 * beside its own fds) and must not touch the journal.  NULL: the caller's
 * thread syncs, as without.  `wait` is called at least once per sync. */
typedef DatcIoWaitFunc DatcJournalWaitFunc;
void datc_journal_set_sync_wait (DatcJournal *journal, DatcJournalWaitFunc wait,
                                 gpointer user_data);

/* Where the log ends on disk: the magic and every committed record. */
guint64 datc_journal_size (DatcJournal *journal);

/* Compaction: a new journal is written beside the live one, as
 * `path`.new, while the live one goes on taking records; finishing it
 * appends the records committed since it began, syncs it and renames it
 * over `path` (one atomic step: a crash before it leaves the old journal,
 * after it the new one, both whole).  A `path`.new left by a crash is
 * removed by datc_journal_open.
 *
 * rewrite_new() needs nothing pending (call it after a commit): what the
 * journal holds at that moment is what the new file's own records must
 * stand for.  The rewrite's records are framed like the journal's
 * (begin/end) and may be written by another thread than the journal's
 * (flush), or by a forked child (take_written); finish() is the
 * journal's thread's, with nothing pending. */
typedef struct DatcJournalRewrite DatcJournalRewrite;

DatcJournalRewrite *datc_journal_rewrite_new (DatcJournal *journal, GError **error);
GByteArray *datc_journal_rewrite_begin (DatcJournalRewrite *rewrite);
void datc_journal_rewrite_end (DatcJournalRewrite *rewrite);
/* Writes the records sealed so far (bounding the memory they take). */
gboolean datc_journal_rewrite_flush (DatcJournalRewrite *rewrite, GError **error);
/* Syncs what was written: the slow part, for the writer's thread. */
gboolean datc_journal_rewrite_sync (DatcJournalRewrite *rewrite, GError **error);
/* Writes what was written from `from` on out to the disk and waits for
 * that, without a sync (no metadata, no flush of the disk's cache): how a
 * writer paces itself, a step at a time.  An fdatasync where there is no
 * sync_file_range. */
gboolean datc_journal_rewrite_write_out (DatcJournalRewrite *rewrite, guint64 from, GError **error);
/* Bytes written to the file so far (flushed). */
guint64 datc_journal_rewrite_written (DatcJournalRewrite *rewrite);
/* When another process wrote the records (a child forked after
 * rewrite_new(), writing through the same descriptor): takes what it
 * wrote, the file's size, as the rewrite's end, before finish(). */
gboolean datc_journal_rewrite_take_written (DatcJournalRewrite *rewrite, GError **error);
/* How many of the journal's committed bytes are not yet in the rewrite,
 * and copying up to `max` of them (their writeback started): done a slice at a time
 * between commits, the switch itself copies few. */
guint64 datc_journal_rewrite_behind (DatcJournal *journal, DatcJournalRewrite *rewrite);
gboolean datc_journal_rewrite_catch_up (DatcJournal *journal, DatcJournalRewrite *rewrite,
                                        guint64 max, GError **error);
/* Appends the journal's records since rewrite_new() (or since the last
 * catch_up()), syncs, renames the new file into place, and goes on
 * appending to it.  On failure before the rename the journal goes on as
 * it was (the new file is removed). */
gboolean datc_journal_rewrite_finish (DatcJournal *journal, DatcJournalRewrite *rewrite,
                                      GError **error);
/* Frees an unfinished rewrite and removes its file. */
void datc_journal_rewrite_free (DatcJournalRewrite *rewrite);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcJournalRewrite, datc_journal_rewrite_free)

G_END_DECLS
