/* journal.c: the campaign's append-only log (format and contract in
 * journal.h).
 *
 * Shape, and why:
 *
 * - Appends only touch memory.  begin() reserves an 8-byte header at the end
 *   of one growing GByteArray and hands that array to the caller, who appends
 *   the payload straight into it; end() patches length and CRC-32C into the
 *   header.  No allocation per record once the array has grown to a commit's
 *   worth, and no copy of the payload.
 *
 * - commit() is the group commit: one pwrite() loop for everything sealed
 *   since the last commit, one fdatasync(), then the array is emptied but
 *   keeps its allocation.  Writes go to an explicit offset (the end of the
 *   last durable record), never O_APPEND, so that a retried commit overwrites
 *   exactly what a failed one may have half written.
 *
 * - A failed commit keeps every record pending; nothing is poisoned.  The
 *   next commit rewrites all of them from the last durable offset and syncs
 *   again.  Rewriting (rather than only calling fdatasync again) matters:
 *   after a failed fsync Linux may mark the dirty pages clean and a second
 *   fsync can then succeed without the data ever reaching the disk.  So
 *   TRUE from commit() always means "these bytes were written and synced
 *   after the last failure".  A transient ENOSPC or EDQUOT thus costs the
 *   master a retry, not the campaign.  Records that reached the file before
 *   a failure may still be replayed after a crash, as with any write-ahead
 *   log: the caller must only treat them as durable once commit() succeeds.
 *
 * - Open reads the file in 1 MiB chunks (growing the buffer only for a
 *   record that is larger and that the file is long enough to hold), checks
 *   each record, and stops at the first one that is short, has length 0 or
 *   over DATC_JOURNAL_RECORD_MAX, or fails its checksum.  That tail is cut
 *   off with ftruncate() + fsync() before any new record is appended, so new
 *   records never sit behind garbage.  Read errors are I/O errors, never
 *   mistaken for a torn tail.  A file shorter than the magic that is a prefix
 *   of it (a crash while the journal was being created) is re-initialised,
 *   and its bytes are reported as torn.
 *
 * - Replay hands the callback a pointer into the read window, valid only
 *   during the call.  If the callback fails, open fails with the callback's
 *   own GError (domain and code kept) prefixed with the path and the
 *   record's file offset, or with DATC_JOURNAL_ERROR_REPLAY if it set none;
 *   the file is then left exactly as it was found, torn tail included.
 *
 * - Empty payloads are refused (g_return_if_fail): a zero length field is
 *   what a torn, zero-filled tail looks like, so it marks the end of the log.
 *
 * A DatcJournal is not thread-safe; one thread owns it.  datc_journal_free()
 * does not commit: whatever is pending is dropped. */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "iothread.h"

G_DEFINE_QUARK (datc-journal-error-quark, datc_journal_error)

#define JOURNAL_MAGIC "DATCJNL1"
#define JOURNAL_MAGIC_LEN ((gsize) DATC_JOURNAL_MAGIC_BYTES)
#define JOURNAL_HEADER_LEN ((gsize) DATC_JOURNAL_FRAME_BYTES)
#define JOURNAL_READ_CHUNK ((gsize) 1024 * 1024)
#define JOURNAL_NO_RECORD ((gsize) - 1)

struct DatcJournal {
  char *path;
  int fd;
  guint64 durable_end; /* file offset just after the last committed record */
  GByteArray *buf;     /* sealed records, then possibly one open record */
  gsize open_record;   /* offset in buf of the open record's header, or
                          JOURNAL_NO_RECORD */
  DatcJournalWaitFunc wait;
  gpointer wait_data;
  DatcIoThread *syncer; /* a commit's fdatasync, started at the first commit with `wait` set */
  gboolean no_syncer;   /* no thread could be had: the caller's thread syncs */
};

static gboolean
set_io_error (GError **error, int errsv, const char *what, const char *path)
{
  g_set_error (error, DATC_JOURNAL_ERROR, DATC_JOURNAL_ERROR_IO, "%s journal %s: %s", what, path,
               g_strerror (errsv));
  return FALSE;
}

static gboolean
pwrite_all (int fd, const guint8 *data, gsize len, guint64 offset, int *errsv)
{
  while (len > 0)
    {
      ssize_t n = pwrite (fd, data, len, (off_t) offset);

      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          *errsv = errno;
          return FALSE;
        }
      if (n == 0)
        {
          *errsv = EIO;
          return FALSE;
        }
      data += n;
      len -= (gsize) n;
      offset += (guint64) n;
    }
  return TRUE;
}

/* Reads until `len` bytes are in or the file ends; returns how many arrived
 * in *got, or FALSE with errno in *errsv. */
static gboolean
pread_full (int fd, guint8 *data, gsize len, guint64 offset, gsize *got, int *errsv)
{
  gsize done = 0;

  while (done < len)
    {
      ssize_t n = pread (fd, data + done, len - done, (off_t) (offset + done));

      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          *errsv = errno;
          return FALSE;
        }
      if (n == 0)
        break;
      done += (gsize) n;
    }
  *got = done;
  return TRUE;
}

static gboolean
fsync_retrying (int fd, gboolean data_only)
{
  int r;

  do
    r = data_only ? fdatasync (fd) : fsync (fd);
  while (r < 0 && errno == EINTR);
  return r == 0;
}

static gboolean sync_waiting (DatcJournal *journal, int fd, gboolean data_only);

/* A new file's name must survive a crash too, or the records in it are lost
 * with it.  With `journal`, the directory's fsync runs as its fdatasyncs
 * do (sync_waiting). */
static gboolean
sync_parent_directory (DatcJournal *journal, const char *path, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (path);
  int dfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int errsv;

  if (dfd < 0)
    {
      errsv = errno;
      g_set_error (error, DATC_JOURNAL_ERROR, DATC_JOURNAL_ERROR_IO,
                   "Opening directory %s of journal %s: %s", dir, path, g_strerror (errsv));
      return FALSE;
    }
  /* Some file systems cannot sync a directory (EINVAL); they have nothing
   * to sync either. */
  gboolean synced
      = journal != NULL ? sync_waiting (journal, dfd, FALSE) : fsync_retrying (dfd, FALSE);
  if (!synced && errno != EINVAL)
    {
      errsv = errno;
      close (dfd);
      g_set_error (error, DATC_JOURNAL_ERROR, DATC_JOURNAL_ERROR_IO,
                   "Syncing directory %s of journal %s: %s", dir, path, g_strerror (errsv));
      return FALSE;
    }
  close (dfd);
  return TRUE;
}

static gboolean
write_magic (DatcJournal *journal, GError **error)
{
  int errsv = 0;

  if (ftruncate (journal->fd, 0) < 0)
    return set_io_error (error, errno, "Truncating", journal->path);
  if (!pwrite_all (journal->fd, (const guint8 *) JOURNAL_MAGIC, JOURNAL_MAGIC_LEN, 0, &errsv))
    return set_io_error (error, errsv, "Writing", journal->path);
  if (!fsync_retrying (journal->fd, FALSE))
    return set_io_error (error, errno, "Syncing", journal->path);
  return sync_parent_directory (NULL, journal->path, error);
}

/* Checks the magic, or writes it into an empty or torn-at-creation file.
 * *torn gets the length of a torn magic that was replaced. */
static gboolean
check_or_write_magic (DatcJournal *journal, guint64 *torn, GError **error)
{
  guint8 head[JOURNAL_MAGIC_LEN];
  gsize got = 0;
  int errsv = 0;

  *torn = 0;
  if (!pread_full (journal->fd, head, sizeof head, 0, &got, &errsv))
    return set_io_error (error, errsv, "Reading", journal->path);

  if (got == JOURNAL_MAGIC_LEN && memcmp (head, JOURNAL_MAGIC, got) == 0)
    return TRUE;

  if (got < JOURNAL_MAGIC_LEN && memcmp (head, JOURNAL_MAGIC, got) == 0)
    {
      *torn = got;
      return write_magic (journal, error);
    }

  g_set_error (error, DATC_JOURNAL_ERROR, DATC_JOURNAL_ERROR_NOT_A_JOURNAL,
               "%s is not a datc journal (bad magic)", journal->path);
  return FALSE;
}

/* A sliding window over the file for replay.  data[start, end) holds file
 * bytes from offset `start_offset`. */
typedef struct {
  int fd;
  guint8 *data;
  gsize cap;
  gsize start;
  gsize end;
  guint64 start_offset;
  gboolean eof;
} JournalReader;

static void
journal_reader_clear (JournalReader *r)
{
  g_clear_pointer (&r->data, g_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (JournalReader, journal_reader_clear)

/* Makes at least `want` bytes available from data[start], unless the file
 * ends first.  Grows the window only when `want` exceeds it; the caller has
 * checked `want` against the file's size and DATC_JOURNAL_RECORD_MAX. */
static gboolean
reader_fill (JournalReader *r, gsize want, int *errsv)
{
  if (r->end - r->start >= want || r->eof)
    return TRUE;

  if (r->start > 0)
    {
      memmove (r->data, r->data + r->start, r->end - r->start);
      r->start_offset += r->start;
      r->end -= r->start;
      r->start = 0;
    }
  if (want > r->cap)
    {
      r->data = g_realloc (r->data, want);
      r->cap = want;
    }

  while (r->end < want && !r->eof)
    {
      gsize got = 0;

      if (!pread_full (r->fd, r->data + r->end, r->cap - r->end, r->start_offset + r->end, &got,
                       errsv))
        return FALSE;
      if (got < r->cap - r->end)
        r->eof = TRUE;
      r->end += got;
    }
  return TRUE;
}

static guint32
get_le32 (const guint8 *p)
{
  guint32 v;

  memcpy (&v, p, sizeof v);
  return GUINT32_FROM_LE (v);
}

static void
put_le32 (guint8 *p, guint32 v)
{
  v = GUINT32_TO_LE (v);
  memcpy (p, &v, sizeof v);
}

/* Replays every valid record, then cuts off whatever follows them. */
static gboolean
replay_records (DatcJournal *journal, guint64 file_size, DatcJournalReplayFunc replay,
                gpointer user_data, gboolean cut_torn_tail, DatcJournalRecovery *out,
                GError **error)
{
  g_auto (JournalReader) r = {
    .fd = journal->fd,
    .data = g_malloc (JOURNAL_READ_CHUNK),
    .cap = JOURNAL_READ_CHUNK,
    .start_offset = JOURNAL_MAGIC_LEN,
  };
  guint64 records = 0;
  int errsv = 0;

  for (;;)
    {
      guint64 offset = r.start_offset + r.start;
      guint32 len, crc;
      const guint8 *payload;

      if (!reader_fill (&r, JOURNAL_HEADER_LEN, &errsv))
        return set_io_error (error, errsv, "Reading", journal->path);
      if (r.end - r.start < JOURNAL_HEADER_LEN)
        break;

      len = get_le32 (r.data + r.start);
      crc = get_le32 (r.data + r.start + 4);
      /* Check the declared length before reading or allocating for it. */
      if (len == 0 || len > DATC_JOURNAL_RECORD_MAX
          || offset + JOURNAL_HEADER_LEN + len > file_size)
        break;

      if (!reader_fill (&r, JOURNAL_HEADER_LEN + len, &errsv))
        return set_io_error (error, errsv, "Reading", journal->path);
      if (r.end - r.start < JOURNAL_HEADER_LEN + len)
        break;

      payload = r.data + r.start + JOURNAL_HEADER_LEN;
      if (datc_crc32c (0, payload, len) != crc)
        break;

      if (replay != NULL)
        {
          g_autoptr (GError) local_error = NULL;

          if (!replay (payload, len, user_data, &local_error))
            {
              if (local_error == NULL)
                {
                  g_set_error (error, DATC_JOURNAL_ERROR, DATC_JOURNAL_ERROR_REPLAY,
                               "Journal %s: record at offset %" G_GUINT64_FORMAT
                               " was rejected by replay",
                               journal->path, offset);
                  return FALSE;
                }
              g_propagate_prefixed_error (error, g_steal_pointer (&local_error),
                                          "Journal %s: record at offset %" G_GUINT64_FORMAT ": ",
                                          journal->path, offset);
              return FALSE;
            }
        }

      records++;
      r.start += JOURNAL_HEADER_LEN + len;
    }

  guint64 valid = r.start_offset + r.start;
  /* The file may be longer than what was read if it grew meanwhile; only
   * our own writes may follow, and none have happened yet. */
  guint64 torn = file_size > valid ? file_size - valid : 0;

  if (torn > 0 && cut_torn_tail)
    {
      if (ftruncate (journal->fd, (off_t) valid) < 0)
        return set_io_error (error, errno, "Truncating torn tail of", journal->path);
      if (!fsync_retrying (journal->fd, FALSE))
        return set_io_error (error, errno, "Syncing", journal->path);
    }

  out->records = records;
  out->valid_bytes = valid;
  out->torn_bytes = torn;
  return TRUE;
}

DatcJournal *
datc_journal_open (const char *path, DatcJournalReplayFunc replay, gpointer user_data,
                   DatcJournalRecovery *recovery, GError **error)
{
  g_autoptr (DatcJournal) journal = NULL;
  DatcJournalRecovery result = { 0 };
  guint64 torn_magic = 0;
  struct stat st;

  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  journal = g_malloc0 (sizeof *journal);
  journal->path = g_strdup (path);
  journal->open_record = JOURNAL_NO_RECORD;
  journal->buf = g_byte_array_new ();
  /* A compaction a crash cut short: never renamed, so never the journal. */
  g_autofree char *new_path = g_strconcat (path, ".new", NULL);
  if (unlink (new_path) < 0 && errno != ENOENT)
    {
      set_io_error (error, errno, "Removing the unfinished compaction of", path);
      return NULL;
    }
  journal->fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (journal->fd < 0)
    {
      set_io_error (error, errno, "Opening", path);
      return NULL;
    }

  if (fstat (journal->fd, &st) < 0)
    {
      set_io_error (error, errno, "Inspecting", path);
      return NULL;
    }
  if (!S_ISREG (st.st_mode))
    {
      g_set_error (error, DATC_JOURNAL_ERROR, DATC_JOURNAL_ERROR_NOT_A_JOURNAL,
                   "%s is not a datc journal (not a regular file)", path);
      return NULL;
    }

  if (!check_or_write_magic (journal, &torn_magic, error))
    return NULL;

  if (torn_magic > 0 || st.st_size == 0)
    {
      result.valid_bytes = JOURNAL_MAGIC_LEN;
      result.torn_bytes = torn_magic;
    }
  else if (!replay_records (journal, (guint64) st.st_size, replay, user_data, TRUE, &result, error))
    return NULL;

  journal->durable_end = result.valid_bytes;
  if (recovery != NULL)
    *recovery = result;
  return g_steal_pointer (&journal);
}

gboolean
datc_journal_scan (const char *path, DatcJournalReplayFunc replay, gpointer user_data,
                   DatcJournalRecovery *recovery, GError **error)
{
  g_autoptr (DatcJournal) journal = NULL;
  DatcJournalRecovery result = { 0 };
  guint8 magic[JOURNAL_MAGIC_LEN];
  gsize got = 0;
  int errsv = 0;
  struct stat st;

  journal = g_malloc0 (sizeof *journal);
  journal->path = g_strdup (path);
  journal->open_record = JOURNAL_NO_RECORD;
  journal->buf = g_byte_array_new ();
  journal->fd = open (path, O_RDONLY | O_CLOEXEC);
  if (journal->fd < 0)
    return set_io_error (error, errno, "Opening", path);
  if (fstat (journal->fd, &st) < 0)
    return set_io_error (error, errno, "Inspecting", path);
  if (!pread_full (journal->fd, magic, sizeof magic, 0, &got, &errsv))
    return set_io_error (error, errsv, "Reading", path);
  if (got < sizeof magic)
    {
      /* Empty or a torn magic: a journal with no records yet. */
      if (memcmp (magic, JOURNAL_MAGIC, got) != 0)
        {
          g_set_error (error, DATC_JOURNAL_ERROR, DATC_JOURNAL_ERROR_NOT_A_JOURNAL,
                       "%s is not a datc journal", path);
          return FALSE;
        }
      if (recovery != NULL)
        *recovery = result;
      return TRUE;
    }
  if (memcmp (magic, JOURNAL_MAGIC, sizeof magic) != 0)
    {
      g_set_error (error, DATC_JOURNAL_ERROR, DATC_JOURNAL_ERROR_NOT_A_JOURNAL,
                   "%s is not a datc journal", path);
      return FALSE;
    }
  if (!replay_records (journal, (guint64) st.st_size, replay, user_data, FALSE, &result, error))
    return FALSE;
  if (recovery != NULL)
    *recovery = result;
  return TRUE;
}

/* ---- syncing on a thread while the owner waits ---------------------- */

typedef struct {
  int fd;
  gboolean data_only;
} SyncJob;

static int
sync_job (gpointer data)
{
  SyncJob *job = data;
  return fsync_retrying (job->fd, job->data_only) ? 0 : errno;
}

void
datc_journal_set_sync_wait (DatcJournal *journal, DatcJournalWaitFunc wait, gpointer user_data)
{
  g_return_if_fail (journal != NULL);
  journal->wait = wait;
  journal->wait_data = user_data;
}

/* A blocking job on the syncer's thread while `wait` serves the owner's,
 * when one is set: the journal's fdatasync at each commit, and a
 * compaction's switch (the tail copied, the new file and its directory
 * synced: 0.7 s at a 10M-task campaign's end, behind results.jsonl's
 * writeback).  Returns the job's result. */
static int
run_waiting (DatcJournal *journal, DatcIoJob job, gpointer job_data)
{
  if (journal->wait != NULL && journal->syncer == NULL && !journal->no_syncer)
    {
      journal->syncer = datc_io_thread_new ("datc-sync");
      journal->no_syncer = journal->syncer == NULL;
    }
  return datc_io_thread_run (journal->syncer, job, job_data, journal->wait, journal->wait_data);
}

/* fsync (or fdatasync) of `fd` through run_waiting.  FALSE with errno
 * set on failure. */
static gboolean
sync_waiting (DatcJournal *journal, int fd, gboolean data_only)
{
  SyncJob job = { fd, data_only };
  int errsv = run_waiting (journal, sync_job, &job);
  errno = errsv;
  return errsv == 0;
}

static gboolean
datasync (DatcJournal *journal)
{
  return sync_waiting (journal, journal->fd, TRUE);
}

void
datc_journal_free (DatcJournal *journal)
{
  if (journal == NULL)
    return;
  datc_io_thread_free (journal->syncer);
  if (journal->fd >= 0)
    close (journal->fd);
  g_byte_array_unref (journal->buf);
  g_free (journal->path);
  g_free (journal);
}

/* Framing, shared by the journal and a rewrite: begin reserves the
 * header, end fills in the length and checksum of what was appended. */
static void
frame_begin (GByteArray *buf, gsize *open_record)
{
  *open_record = buf->len;
  g_byte_array_set_size (buf, buf->len + (guint) JOURNAL_HEADER_LEN);
}

static void
frame_end (GByteArray *buf, gsize *open_record)
{
  gsize start, len;
  guint8 *header;

  start = *open_record;
  *open_record = JOURNAL_NO_RECORD;
  len = buf->len >= start + JOURNAL_HEADER_LEN ? buf->len - start - JOURNAL_HEADER_LEN : 0;

  /* An empty or oversized record could never be replayed: drop it so the
   * records around it stay intact, and complain. */
  if (G_UNLIKELY (len == 0 || len > DATC_JOURNAL_RECORD_MAX))
    {
      g_byte_array_set_size (buf, (guint) start);
      g_return_if_fail (len > 0 && len <= DATC_JOURNAL_RECORD_MAX);
      return;
    }

  header = buf->data + start;
  put_le32 (header, (guint32) len);
  put_le32 (header + 4, datc_crc32c (0, header + JOURNAL_HEADER_LEN, len));
}

GByteArray *
datc_journal_begin (DatcJournal *journal)
{
  g_return_val_if_fail (journal != NULL, NULL);
  g_return_val_if_fail (journal->open_record == JOURNAL_NO_RECORD, NULL);

  frame_begin (journal->buf, &journal->open_record);
  return journal->buf;
}

void
datc_journal_end (DatcJournal *journal)
{
  g_return_if_fail (journal != NULL);
  g_return_if_fail (journal->open_record != JOURNAL_NO_RECORD);

  frame_end (journal->buf, &journal->open_record);
}

void
datc_journal_append (DatcJournal *journal, const void *payload, gsize len)
{
  GByteArray *buf;

  g_return_if_fail (journal != NULL);
  g_return_if_fail (payload != NULL);
  g_return_if_fail (len > 0 && len <= DATC_JOURNAL_RECORD_MAX);

  buf = datc_journal_begin (journal);
  if (buf == NULL)
    return;
  g_byte_array_append (buf, payload, (guint) len);
  datc_journal_end (journal);
}

gsize
datc_journal_pending (DatcJournal *journal)
{
  g_return_val_if_fail (journal != NULL, 0);

  if (journal->open_record != JOURNAL_NO_RECORD)
    return journal->open_record;
  return journal->buf->len;
}

gboolean
datc_journal_commit (DatcJournal *journal, GError **error)
{
  int errsv = 0;

  g_return_val_if_fail (journal != NULL, FALSE);
  g_return_val_if_fail (journal->open_record == JOURNAL_NO_RECORD, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (journal->buf->len == 0)
    return TRUE;

  /* On failure the records stay pending; see the comment at the top. */
  if (!pwrite_all (journal->fd, journal->buf->data, journal->buf->len, journal->durable_end,
                   &errsv))
    return set_io_error (error, errsv, "Writing", journal->path);
  if (!datasync (journal))
    return set_io_error (error, errno, "Syncing", journal->path);

  journal->durable_end += journal->buf->len;
  g_byte_array_set_size (journal->buf, 0);
  return TRUE;
}

guint64
datc_journal_size (DatcJournal *journal)
{
  g_return_val_if_fail (journal != NULL, 0);
  return journal->durable_end;
}

/* ---- compaction ---------------------------------------------------- */

struct DatcJournalRewrite {
  char *path; /* `path`.new */
  int fd;
  guint64 end;    /* bytes written to it */
  guint64 copied; /* the journal's bytes before this are in it: its durable end
                   * when it began, then as far as catch_up() went */
  GByteArray *buf;
  gsize open_record;
};

/* For the crash tests (master/test-ledger-compact.c, tests/test-compact.c):
 * the process is killed at the named step, as `kill -9` would.  The step
 * before these, `written`, is the ledger's (its writer is a child). */
static void
test_kill_point (const char *step)
{
  const char *at = g_getenv ("DATC_TEST_COMPACT_KILL_AT");
  if (at != NULL && g_str_equal (at, step))
    raise (SIGKILL);
}

DatcJournalRewrite *
datc_journal_rewrite_new (DatcJournal *journal, GError **error)
{
  g_autoptr (DatcJournalRewrite) w = NULL;
  int errsv = 0;

  g_return_val_if_fail (journal != NULL, NULL);
  g_return_val_if_fail (journal->buf->len == 0, NULL);

  w = g_new0 (DatcJournalRewrite, 1);
  w->path = g_strconcat (journal->path, ".new", NULL);
  w->open_record = JOURNAL_NO_RECORD;
  w->buf = g_byte_array_new ();
  w->copied = journal->durable_end;
  w->fd = open (w->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (w->fd < 0)
    {
      set_io_error (error, errno, "Creating", w->path);
      g_clear_pointer (&w->path, g_free);
      return NULL;
    }
  if (!pwrite_all (w->fd, (const guint8 *) JOURNAL_MAGIC, JOURNAL_MAGIC_LEN, 0, &errsv))
    {
      set_io_error (error, errsv, "Writing", w->path);
      return NULL;
    }
  w->end = JOURNAL_MAGIC_LEN;
  return g_steal_pointer (&w);
}

GByteArray *
datc_journal_rewrite_begin (DatcJournalRewrite *w)
{
  g_return_val_if_fail (w != NULL && w->open_record == JOURNAL_NO_RECORD, NULL);
  frame_begin (w->buf, &w->open_record);
  return w->buf;
}

void
datc_journal_rewrite_end (DatcJournalRewrite *w)
{
  g_return_if_fail (w != NULL && w->open_record != JOURNAL_NO_RECORD);
  frame_end (w->buf, &w->open_record);
}

gboolean
datc_journal_rewrite_flush (DatcJournalRewrite *w, GError **error)
{
  int errsv = 0;

  g_return_val_if_fail (w != NULL && w->open_record == JOURNAL_NO_RECORD, FALSE);
  if (!pwrite_all (w->fd, w->buf->data, w->buf->len, w->end, &errsv))
    return set_io_error (error, errsv, "Writing", w->path);
  w->end += w->buf->len;
  g_byte_array_set_size (w->buf, 0);
  return TRUE;
}

gboolean
datc_journal_rewrite_sync (DatcJournalRewrite *w, GError **error)
{
  if (!datc_journal_rewrite_flush (w, error))
    return FALSE;
  if (!fsync_retrying (w->fd, TRUE))
    return set_io_error (error, errno, "Syncing", w->path);
  return TRUE;
}

gboolean
datc_journal_rewrite_write_out (DatcJournalRewrite *w, guint64 from, GError **error)
{
  if (!datc_journal_rewrite_flush (w, error))
    return FALSE;
  if (from >= w->end)
    return TRUE;
#ifdef SYNC_FILE_RANGE_WRITE
  int r;
  do
    r = sync_file_range (w->fd, (off_t) from, (off_t) (w->end - from),
                         SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE
                             | SYNC_FILE_RANGE_WAIT_AFTER);
  while (r < 0 && errno == EINTR);
  if (r < 0)
    return set_io_error (error, errno, "Writing out", w->path);
#else
  if (!fsync_retrying (w->fd, TRUE))
    return set_io_error (error, errno, "Syncing", w->path);
#endif
  return TRUE;
}

guint64
datc_journal_rewrite_written (DatcJournalRewrite *w)
{
  g_return_val_if_fail (w != NULL, 0);
  return w->end;
}

gboolean
datc_journal_rewrite_take_written (DatcJournalRewrite *w, GError **error)
{
  struct stat st;

  g_return_val_if_fail (w != NULL && w->open_record == JOURNAL_NO_RECORD && w->buf->len == 0,
                        FALSE);
  if (fstat (w->fd, &st) < 0)
    return set_io_error (error, errno, "Reading the size of", w->path);
  /* Never shorter than what this process wrote: the magic. */
  if ((guint64) st.st_size < w->end)
    return set_io_error (error, EIO, "Reading the size of (shorter than begun)", w->path);
  w->end = (guint64) st.st_size;
  return TRUE;
}

/* Copies the journal's bytes [w->copied, to) to the end of the rewrite. */
static gboolean
copy_tail (DatcJournal *journal, DatcJournalRewrite *w, guint64 to, GError **error)
{
  guint64 from = w->copied;
  g_autofree guint8 *chunk = g_malloc (JOURNAL_READ_CHUNK);
  int errsv = 0;

  while (from < to)
    {
      gsize want = (gsize) MIN ((guint64) JOURNAL_READ_CHUNK, to - from), got = 0;

      if (!pread_full (journal->fd, chunk, want, from, &got, &errsv))
        return set_io_error (error, errsv, "Reading", journal->path);
      if (got < want)
        return set_io_error (error, EIO, "Reading (shorter than committed)", journal->path);
      if (!pwrite_all (w->fd, chunk, got, w->end, &errsv))
        return set_io_error (error, errsv, "Writing", w->path);
      w->end += got;
      from += got;
      w->copied = from;
    }
  return TRUE;
}

guint64
datc_journal_rewrite_behind (DatcJournal *journal, DatcJournalRewrite *w)
{
  g_return_val_if_fail (journal != NULL && w != NULL, 0);
  return journal->durable_end - w->copied;
}

gboolean
datc_journal_rewrite_catch_up (DatcJournal *journal, DatcJournalRewrite *w, guint64 max,
                               GError **error)
{
  g_return_val_if_fail (journal != NULL && w != NULL, FALSE);

  guint64 at = w->end;
  if (!datc_journal_rewrite_flush (w, error)
      || !copy_tail (journal, w, w->copied + MIN (max, journal->durable_end - w->copied), error))
    return FALSE;
#ifdef SYNC_FILE_RANGE_WRITE
  /* Its writeback started, not waited for (an fdatasync here held the
   * loop up to 44 ms on a busy disk): the switch's fdatasync finds little
   * left to wait for. */
  (void) sync_file_range (w->fd, (off_t) at, (off_t) (w->end - at), SYNC_FILE_RANGE_WRITE);
#else
  if (!fsync_retrying (w->fd, TRUE))
    return set_io_error (error, errno, "Syncing", w->path);
#endif
  return TRUE;
}

/* The replaced journal's last descriptor: closing it frees the file's
 * blocks (its name is gone), 37 ms for 69 MB on ext4 mounted with
 * `discard`, so not on the thread that commits. */
static gpointer
close_replaced (gpointer data)
{
  close (GPOINTER_TO_INT (data));
  return NULL;
}

typedef struct {
  DatcJournal *journal;
  DatcJournalRewrite *w;
  GError *error;
} SwitchJob;

/* The switch's slow part, through run_waiting: what the journal took
 * since the last catch-up copied (at a campaign's end, what its slices
 * had not copied: 0.55 s at 10M tasks), then the new file synced.  The
 * owner appends nothing meanwhile (nothing is pending: its wait answers
 * `datc status`, which only reads). */
static int
switch_job (gpointer data)
{
  SwitchJob *job = data;
  DatcJournalRewrite *w = job->w;
  if (!datc_journal_rewrite_flush (w, &job->error)
      || !copy_tail (job->journal, w, job->journal->durable_end, &job->error))
    return EIO;
  test_kill_point ("copied");
  if (!fsync_retrying (w->fd, TRUE))
    {
      int errsv = errno;
      set_io_error (&job->error, errsv, "Syncing", w->path);
      return errsv;
    }
  return 0;
}

gboolean
datc_journal_rewrite_finish (DatcJournal *journal, DatcJournalRewrite *w, GError **error)
{
  g_return_val_if_fail (journal != NULL && w != NULL, FALSE);
  g_return_val_if_fail (journal->buf->len == 0, FALSE);

  SwitchJob job = { journal, w, NULL };
  if (run_waiting (journal, switch_job, &job) != 0)
    {
      g_propagate_error (error, job.error);
      return FALSE;
    }
  test_kill_point ("synced");
  if (rename (w->path, journal->path) < 0)
    return set_io_error (error, errno, "Renaming into place", w->path);
  test_kill_point ("renamed");

  /* From here on the journal is the new file, whatever happens next. */
  GThread *closer
      = g_thread_try_new ("datc-close", close_replaced, GINT_TO_POINTER (journal->fd), NULL);
  if (closer != NULL)
    g_thread_unref (closer);
  else
    close (journal->fd);
  journal->fd = w->fd;
  journal->durable_end = w->end;
  w->fd = -1;
  g_clear_pointer (&w->path, g_free);
  /* Until the directory is synced, a crash may bring back the old name's
   * file: the old journal, still whole, and the records appended to the
   * new one since would be lost: the caller must stop committing. */
  g_autoptr (GError) local = NULL;
  if (!sync_parent_directory (journal, journal->path, &local))
    {
      g_set_error (error, DATC_JOURNAL_ERROR, DATC_JOURNAL_ERROR_SWITCHED, "%s", local->message);
      return FALSE;
    }
  return TRUE;
}

void
datc_journal_rewrite_free (DatcJournalRewrite *w)
{
  if (w == NULL)
    return;
  if (w->fd >= 0)
    close (w->fd);
  if (w->path != NULL)
    unlink (w->path);
  g_byte_array_unref (w->buf);
  g_free (w->path);
  g_free (w);
}
