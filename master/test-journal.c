/* test-journal.c: the journal's contract, mostly from the crash side: a
 * journal cut at any byte, or with any bit flipped, must reopen with exactly
 * the records wholly before the damage, cut the rest off, and accept new
 * records after them. */
#include "journal.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "test-iowait.h"

#define MAGIC "DATCJNL1"
#define HEADER 8

typedef struct {
  char *dir;
  char *path;
} Fixture;

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  f->dir = g_dir_make_tmp ("test-journal-XXXXXX", &error);
  g_assert_no_error (error);
  f->path = g_build_filename (f->dir, "journal", NULL);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_autoptr (GDir) dir = g_dir_open (f->dir, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *file = g_build_filename (f->dir, name, NULL);

      g_assert_cmpint (unlink (file), ==, 0);
    }
  g_assert_cmpint (rmdir (f->dir), ==, 0);
  g_free (f->path);
  g_free (f->dir);
}

/* ---- helpers ---------------------------------------------------------- */

static gboolean
collect_record (const guint8 *payload, gsize len, gpointer user_data, GError **error)
{
  GPtrArray *records = user_data;

  g_ptr_array_add (records, g_bytes_new (payload, len));
  return TRUE;
}

/* Opens `path`, replaying into a fresh array; asserts success. */
static DatcJournal *
open_and_collect (const char *path, GPtrArray **records, DatcJournalRecovery *recovery)
{
  g_autoptr (GError) error = NULL;
  DatcJournal *journal;

  *records = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  journal = datc_journal_open (path, collect_record, *records, recovery, &error);
  g_assert_no_error (error);
  g_assert_nonnull (journal);
  return journal;
}

/* Opens and closes `path`, returning the records replayed. */
static GPtrArray *
replay_all (const char *path, DatcJournalRecovery *recovery)
{
  GPtrArray *records = NULL;

  datc_journal_free (open_and_collect (path, &records, recovery));
  return records;
}

/* A payload whose bytes depend on `seed`, so misplaced records show. */
static GBytes *
make_payload (guint seed, gsize len)
{
  guint8 *data = g_malloc (len);

  for (gsize i = 0; i < len; i++)
    data[i] = (guint8) (seed * 131u + i * 7u + (i >> 8));
  return g_bytes_new_take (data, len);
}

static void
append_bytes (DatcJournal *journal, GBytes *payload)
{
  gsize len;
  const void *data = g_bytes_get_data (payload, &len);

  datc_journal_append (journal, data, len);
}

static void
assert_prefix (GPtrArray *got, GPtrArray *expected, guint n)
{
  g_assert_cmpuint (got->len, >=, n);
  for (guint i = 0; i < n; i++)
    g_assert_true (g_bytes_equal (got->pdata[i], expected->pdata[i]));
}

static void
assert_records (GPtrArray *got, GPtrArray *expected, guint n)
{
  g_assert_cmpuint (got->len, ==, n);
  assert_prefix (got, expected, n);
}

static guint64
file_size (const char *path)
{
  struct stat st;

  g_assert_cmpint (stat (path, &st), ==, 0);
  return (guint64) st.st_size;
}

/* Not g_file_set_contents_full (..., G_FILE_SET_CONTENTS_NONE, ...): GLib
 * 2.74 writes that in place without truncating a longer file. */
static void
write_file (const char *path, const guint8 *data, gsize len)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

  g_assert_cmpint (fd, >=, 0);
  while (len > 0)
    {
      ssize_t n = write (fd, data, len);

      g_assert_cmpint (n, >, 0);
      data += n;
      len -= (gsize) n;
    }
  g_assert_cmpint (close (fd), ==, 0);
}

static GBytes *
read_file (const char *path)
{
  g_autoptr (GError) error = NULL;
  char *data = NULL;
  gsize len = 0;

  g_file_get_contents (path, &data, &len, &error);
  g_assert_no_error (error);
  return g_bytes_new_take (data, len);
}

/* Writes a journal of records of the given sizes, committing in a few
 * groups.  Returns the payloads; ends[i] is the file offset just after
 * record i. */
static GPtrArray *
build_journal (const char *path, const gsize *sizes, guint n, GArray **ends)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcJournal) journal = NULL;
  GPtrArray *expected = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  guint64 end = strlen (MAGIC);

  *ends = g_array_new (FALSE, FALSE, sizeof (guint64));
  journal = datc_journal_open (path, NULL, NULL, NULL, &error);
  g_assert_no_error (error);

  for (guint i = 0; i < n; i++)
    {
      GBytes *payload = make_payload (i, sizes[i]);

      append_bytes (journal, payload);
      g_ptr_array_add (expected, payload);
      end += HEADER + sizes[i];
      g_array_append_val (*ends, end);
      if (i % 7 == 6)
        {
          datc_journal_commit (journal, &error);
          g_assert_no_error (error);
        }
    }
  datc_journal_commit (journal, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (file_size (path), ==, end);
  return expected;
}

/* How many records end at or before `cut`. */
static guint
records_before (GArray *ends, guint64 cut)
{
  guint n = 0;

  while (n < ends->len && g_array_index (ends, guint64, n) <= cut)
    n++;
  return n;
}

static guint64
end_of_record (GArray *ends, guint n)
{
  return n == 0 ? strlen (MAGIC) : g_array_index (ends, guint64, n - 1);
}

static void
put_le32 (guint8 *p, guint32 v)
{
  v = GUINT32_TO_LE (v);
  memcpy (p, &v, sizeof v);
}

/* ---- creation and magic ----------------------------------------------- */

static void
test_create_writes_magic (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcJournal) journal = NULL;
  g_autoptr (GBytes) contents = NULL;
  DatcJournalRecovery recovery = { 99, 99, 99 };
  struct stat st;

  journal = datc_journal_open (f->path, NULL, NULL, &recovery, &error);
  g_assert_no_error (error);
  g_assert_nonnull (journal);
  g_assert_cmpuint (recovery.records, ==, 0);
  g_assert_cmpuint (recovery.valid_bytes, ==, 8);
  g_assert_cmpuint (recovery.torn_bytes, ==, 0);

  contents = read_file (f->path);
  g_assert_cmpmem (g_bytes_get_data (contents, NULL), g_bytes_get_size (contents), MAGIC, 8);
  g_assert_cmpint (stat (f->path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
}

static void
test_open_reinitialises_torn_magic (Fixture *f, gconstpointer data)
{
  for (gsize cut = 0; cut < 8; cut++)
    {
      g_autoptr (GPtrArray) records = NULL;
      g_autoptr (DatcJournal) journal = NULL;
      g_autoptr (GBytes) contents = NULL;
      DatcJournalRecovery recovery;

      write_file (f->path, (const guint8 *) MAGIC, cut);
      journal = open_and_collect (f->path, &records, &recovery);
      g_assert_cmpuint (records->len, ==, 0);
      g_assert_cmpuint (recovery.valid_bytes, ==, 8);
      g_assert_cmpuint (recovery.torn_bytes, ==, cut);
      contents = read_file (f->path);
      g_assert_cmpmem (g_bytes_get_data (contents, NULL), g_bytes_get_size (contents), MAGIC, 8);
    }
}

static void
test_open_refuses_bad_magic (Fixture *f, gconstpointer data)
{
  const char *bad[] = { "DATCJNL2", "NOTAJOURNALATALL", "DATX", "\n" };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (DatcJournal) journal = NULL;
      g_autoptr (GBytes) contents = NULL;

      write_file (f->path, (const guint8 *) bad[i], strlen (bad[i]));
      journal = datc_journal_open (f->path, NULL, NULL, NULL, &error);
      g_assert_null (journal);
      g_assert_error (error, DATC_JOURNAL_ERROR, DATC_JOURNAL_ERROR_NOT_A_JOURNAL);
      g_assert_nonnull (strstr (error->message, f->path));

      /* Left as it was found. */
      contents = read_file (f->path);
      g_assert_cmpmem (g_bytes_get_data (contents, NULL), g_bytes_get_size (contents), bad[i],
                       strlen (bad[i]));
    }
}

static void
test_open_reports_io_error_with_path (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *path = g_build_filename (f->dir, "missing", "journal", NULL);
  g_autoptr (DatcJournal) journal = NULL;

  journal = datc_journal_open (path, NULL, NULL, NULL, &error);
  g_assert_null (journal);
  g_assert_error (error, DATC_JOURNAL_ERROR, DATC_JOURNAL_ERROR_IO);
  g_assert_nonnull (strstr (error->message, path));
  g_assert_nonnull (strstr (error->message, g_strerror (ENOENT)));
}

/* ---- appending -------------------------------------------------------- */

static void
test_append_replays_same_records_in_order (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) expected = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr (GPtrArray) records = NULL;
  DatcJournalRecovery recovery;
  guint64 size = 8;

  /* Two sessions, each appending and committing in groups. */
  for (guint session = 0; session < 2; session++)
    {
      g_autoptr (GPtrArray) replayed = NULL;
      g_autoptr (DatcJournal) journal = open_and_collect (f->path, &replayed, &recovery);

      assert_records (replayed, expected, expected->len);
      for (guint i = 0; i < 100; i++)
        {
          GBytes *payload = make_payload (session * 1000 + i, 1 + (i * 37) % 90);

          append_bytes (journal, payload);
          size += HEADER + g_bytes_get_size (payload);
          g_ptr_array_add (expected, payload);
          if (i % 10 == 9)
            {
              g_assert_true (datc_journal_commit (journal, &error));
              g_assert_no_error (error);
            }
        }
    }

  records = replay_all (f->path, &recovery);
  assert_records (records, expected, 200);
  g_assert_cmpuint (recovery.records, ==, 200);
  g_assert_cmpuint (recovery.valid_bytes, ==, size);
  g_assert_cmpuint (recovery.torn_bytes, ==, 0);
  g_assert_cmpuint (file_size (f->path), ==, size);
}

static void
test_append_builds_payload_incrementally (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) records = NULL;
  const char *parts[][3] = {
    { "task", " ", "added" },
    { "x", "", "" },
    { "", "dispatched to ", "hpc1/proxy-7" },
  };

  {
    g_autoptr (DatcJournal) journal = datc_journal_open (f->path, NULL, NULL, NULL, &error);

    g_assert_no_error (error);
    for (guint r = 0; r < G_N_ELEMENTS (parts); r++)
      {
        GByteArray *buf = datc_journal_begin (journal);

        g_assert_nonnull (buf);
        for (guint p = 0; p < 3; p++)
          g_byte_array_append (buf, (const guint8 *) parts[r][p], (guint) strlen (parts[r][p]));
        datc_journal_end (journal);
      }
    g_assert_true (datc_journal_commit (journal, &error));
    g_assert_no_error (error);
  }

  records = replay_all (f->path, NULL);
  g_assert_cmpuint (records->len, ==, 3);
  for (guint r = 0; r < 3; r++)
    {
      g_autofree char *whole = g_strconcat (parts[r][0], parts[r][1], parts[r][2], NULL);

      g_assert_cmpmem (g_bytes_get_data (records->pdata[r], NULL),
                       g_bytes_get_size (records->pdata[r]), whole, strlen (whole));
    }
}

static void
test_append_refuses_empty_payload (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) records = NULL;

  {
    g_autoptr (DatcJournal) journal = datc_journal_open (f->path, NULL, NULL, NULL, &error);

    g_assert_no_error (error);
    datc_journal_append (journal, "before", 6);

    g_test_expect_message (NULL, G_LOG_LEVEL_CRITICAL, "*len > 0*");
    datc_journal_append (journal, "", 0);
    g_test_assert_expected_messages ();

    /* begin/end with nothing in between: the record is dropped. */
    g_test_expect_message (NULL, G_LOG_LEVEL_CRITICAL, "*len > 0*");
    datc_journal_begin (journal);
    datc_journal_end (journal);
    g_test_assert_expected_messages ();

    g_assert_cmpuint (datc_journal_pending (journal), ==, HEADER + 6);
    datc_journal_append (journal, "after", 5);
    g_assert_true (datc_journal_commit (journal, &error));
    g_assert_no_error (error);
  }

  records = replay_all (f->path, NULL);
  g_assert_cmpuint (records->len, ==, 2);
  g_assert_cmpmem (g_bytes_get_data (records->pdata[0], NULL), 6, "before", 6);
  g_assert_cmpmem (g_bytes_get_data (records->pdata[1], NULL), 5, "after", 5);
}

static void
test_append_accepts_largest_record (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) records = NULL;
  g_autoptr (GBytes) big = make_payload (5, DATC_JOURNAL_RECORD_MAX);
  g_autoptr (GBytes) small = make_payload (6, 3);
  g_autofree guint8 *too_big = g_malloc0 (DATC_JOURNAL_RECORD_MAX + 1);

  {
    g_autoptr (DatcJournal) journal = datc_journal_open (f->path, NULL, NULL, NULL, &error);

    g_assert_no_error (error);
    append_bytes (journal, small);
    append_bytes (journal, big);

    g_test_expect_message (NULL, G_LOG_LEVEL_CRITICAL, "*DATC_JOURNAL_RECORD_MAX*");
    datc_journal_append (journal, too_big, DATC_JOURNAL_RECORD_MAX + 1);
    g_test_assert_expected_messages ();

    append_bytes (journal, small);
    g_assert_true (datc_journal_commit (journal, &error));
    g_assert_no_error (error);
  }

  records = replay_all (f->path, NULL);
  g_assert_cmpuint (records->len, ==, 3);
  g_assert_true (g_bytes_equal (records->pdata[0], small));
  g_assert_true (g_bytes_equal (records->pdata[1], big));
  g_assert_true (g_bytes_equal (records->pdata[2], small));
}

static void
test_pending_counts_sealed_bytes (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcJournal) journal = datc_journal_open (f->path, NULL, NULL, NULL, &error);
  GByteArray *buf;

  g_assert_no_error (error);
  g_assert_cmpuint (datc_journal_pending (journal), ==, 0);

  datc_journal_append (journal, "abc", 3);
  g_assert_cmpuint (datc_journal_pending (journal), ==, HEADER + 3);

  /* An open record is not pending until it is sealed. */
  buf = datc_journal_begin (journal);
  g_assert_cmpuint (datc_journal_pending (journal), ==, HEADER + 3);
  g_byte_array_append (buf, (const guint8 *) "defgh", 5);
  g_assert_cmpuint (datc_journal_pending (journal), ==, HEADER + 3);
  datc_journal_end (journal);
  g_assert_cmpuint (datc_journal_pending (journal), ==, 2 * HEADER + 8);

  g_assert_true (datc_journal_commit (journal, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (datc_journal_pending (journal), ==, 0);
  g_assert_cmpuint (file_size (f->path), ==, 8 + 2 * HEADER + 8);

  datc_journal_append (journal, "i", 1);
  g_assert_cmpuint (datc_journal_pending (journal), ==, HEADER + 1);
}

static void
test_commit_with_nothing_pending_succeeds (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcJournal) journal = datc_journal_open (f->path, NULL, NULL, NULL, &error);

  g_assert_no_error (error);
  g_assert_true (datc_journal_commit (journal, &error));
  g_assert_no_error (error);
  g_assert_true (datc_journal_commit (journal, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (file_size (f->path), ==, 8);
}

static void
test_uncommitted_records_are_not_written (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) records = NULL;
  DatcJournalRecovery recovery;

  {
    g_autoptr (DatcJournal) journal = datc_journal_open (f->path, NULL, NULL, NULL, &error);

    g_assert_no_error (error);
    datc_journal_append (journal, "kept", 4);
    g_assert_true (datc_journal_commit (journal, &error));
    datc_journal_append (journal, "dropped", 7);
  }

  records = replay_all (f->path, &recovery);
  g_assert_cmpuint (records->len, ==, 1);
  g_assert_cmpuint (recovery.torn_bytes, ==, 0);
  g_assert_cmpuint (file_size (f->path), ==, 8 + HEADER + 4);
}

/* With a wait set (datc_journal_set_sync_wait), a commit's fdatasync runs
 * on a thread of the journal's (there while `wait` runs) while the
 * caller's thread serves `wait`: at least once per commit, on the
 * caller's thread, until done_fd says the sync finished; the records are
 * as durable as without.  Unset, nothing is called. */
static void
test_commit_serves_the_wait_while_it_syncs (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) expected = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  DatcJournalRecovery recovery;
  TestIoWait w = test_io_wait_init (TRUE);
  {
    g_autoptr (DatcJournal) journal = datc_journal_open (f->path, NULL, NULL, NULL, &error);
    g_assert_no_error (error);
    datc_journal_set_sync_wait (journal, test_io_wait, &w);
    for (guint i = 0; i < 30; i++)
      {
        GBytes *payload = make_payload (i, 1 + i * 7);
        append_bytes (journal, payload);
        g_ptr_array_add (expected, payload);
        if (i % 3 == 2)
          {
            w.poll = i < 15;
            guint before = w.calls;
            g_assert_true (datc_journal_commit (journal, &error));
            g_assert_no_error (error);
            g_assert_cmpuint (w.calls, >, before);
          }
      }
    g_assert_cmpuint (w.saw_done, >=, 5);
    datc_journal_set_sync_wait (journal, NULL, NULL);
    guint calls = w.calls;
    GBytes *payload = make_payload (99, 10);
    append_bytes (journal, payload);
    g_ptr_array_add (expected, payload);
    g_assert_true (datc_journal_commit (journal, &error));
    g_assert_cmpuint (w.calls, ==, calls);
  }
  g_autoptr (GPtrArray) records = replay_all (f->path, &recovery);
  assert_records (records, expected, 31);
  g_assert_cmpuint (recovery.torn_bytes, ==, 0);
}

/* A compaction's switch syncs the new file and its directory on the
 * syncer's thread while the owner's wait runs (the master answers `datc
 * status` meanwhile), and the journal is then the new file: the
 * rewrite's records, then what was committed since. */
static void
test_rewrite_finish_serves_the_wait_while_it_syncs (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) expected = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  /* The switch closes the replaced file on a thread of its own, which
   * may still be there. */
  TestIoWait w = test_io_wait_init (TRUE);
  w.other_threads = TRUE;
  {
    g_autoptr (DatcJournal) journal = datc_journal_open (f->path, NULL, NULL, NULL, &error);
    g_assert_no_error (error);
    for (guint i = 0; i < 10; i++)
      {
        g_autoptr (GBytes) old = make_payload (i, 100);
        append_bytes (journal, old);
      }
    g_assert_true (datc_journal_commit (journal, &error));
    g_autoptr (DatcJournalRewrite) rw = datc_journal_rewrite_new (journal, &error);
    g_assert_no_error (error);
    GBytes *checkpoint = make_payload (1000, 64);
    gsize len;
    const guint8 *p = g_bytes_get_data (checkpoint, &len);
    g_byte_array_append (datc_journal_rewrite_begin (rw), p, (guint) len);
    datc_journal_rewrite_end (rw);
    g_ptr_array_add (expected, checkpoint);
    g_assert_true (datc_journal_rewrite_sync (rw, &error));
    for (guint i = 0; i < 5; i++)
      {
        GBytes *tail = make_payload (2000 + i, 50 + i);
        append_bytes (journal, tail);
        g_ptr_array_add (expected, tail);
      }
    g_assert_true (datc_journal_commit (journal, &error));

    datc_journal_set_sync_wait (journal, test_io_wait, &w);
    guint before = w.saw_done;
    g_assert_true (datc_journal_rewrite_finish (journal, rw, &error));
    g_assert_no_error (error);
    /* the tail copied and the new file synced, then its directory */
    g_assert_cmpuint (w.saw_done, ==, before + 2);
    GBytes *after = make_payload (3000, 30);
    append_bytes (journal, after);
    g_ptr_array_add (expected, after);
    g_assert_true (datc_journal_commit (journal, &error));
  }
  DatcJournalRecovery recovery;
  g_autoptr (GPtrArray) records = replay_all (f->path, &recovery);
  assert_records (records, expected, 7);
}

/* A commit that fails (here: the file size limit, which gives one short
 * write then EFBIG) reports the path, keeps the records pending, and a later
 * commit writes them all. */
static void
test_commit_failure_keeps_records_pending (Fixture *f, gconstpointer data)
{
  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      return;
    }

  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) expected = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr (GPtrArray) records = NULL;
  struct rlimit saved, limited;
  gsize pending;

  signal (SIGXFSZ, SIG_IGN);
  g_assert_cmpint (getrlimit (RLIMIT_FSIZE, &saved), ==, 0);

  {
    g_autoptr (DatcJournal) journal = datc_journal_open (f->path, NULL, NULL, NULL, &error);

    g_assert_no_error (error);
    for (guint i = 0; i < 3; i++)
      {
        GBytes *payload = make_payload (i, 50);

        append_bytes (journal, payload);
        g_ptr_array_add (expected, payload);
      }
    g_assert_true (datc_journal_commit (journal, &error));

    for (guint i = 3; i < 10; i++)
      {
        GBytes *payload = make_payload (i, 300);

        append_bytes (journal, payload);
        g_ptr_array_add (expected, payload);
      }
    pending = datc_journal_pending (journal);

    limited = saved;
    limited.rlim_cur = file_size (f->path) + 500;
    g_assert_cmpint (setrlimit (RLIMIT_FSIZE, &limited), ==, 0);

    for (guint attempt = 0; attempt < 2; attempt++)
      {
        g_assert_false (datc_journal_commit (journal, &error));
        g_assert_error (error, DATC_JOURNAL_ERROR, DATC_JOURNAL_ERROR_IO);
        g_assert_nonnull (strstr (error->message, f->path));
        g_clear_error (&error);
        g_assert_cmpuint (datc_journal_pending (journal), ==, pending);
      }

    /* More records can still be added while the disk is "full". */
    GBytes *late = make_payload (10, 20);
    append_bytes (journal, late);
    g_ptr_array_add (expected, late);

    g_assert_cmpint (setrlimit (RLIMIT_FSIZE, &saved), ==, 0);
    g_assert_true (datc_journal_commit (journal, &error));
    g_assert_no_error (error);
    g_assert_cmpuint (datc_journal_pending (journal), ==, 0);
  }

  records = replay_all (f->path, NULL);
  assert_records (records, expected, expected->len);
}

/* The same failure, but the master dies before any retry: the half-written
 * group is a torn tail and the committed records are all there. */
static void
test_commit_failure_then_crash_loses_only_the_group (Fixture *f, gconstpointer data)
{
  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      return;
    }

  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) records = NULL;
  g_autoptr (GBytes) kept = make_payload (1, 40);
  g_autoptr (GBytes) lost = make_payload (2, 1000);
  DatcJournalRecovery recovery;
  struct rlimit saved, limited;

  signal (SIGXFSZ, SIG_IGN);
  g_assert_cmpint (getrlimit (RLIMIT_FSIZE, &saved), ==, 0);

  {
    g_autoptr (DatcJournal) journal = datc_journal_open (f->path, NULL, NULL, NULL, &error);

    g_assert_no_error (error);
    append_bytes (journal, kept);
    g_assert_true (datc_journal_commit (journal, &error));
    append_bytes (journal, lost);

    limited = saved;
    limited.rlim_cur = file_size (f->path) + 100;
    g_assert_cmpint (setrlimit (RLIMIT_FSIZE, &limited), ==, 0);
    g_assert_false (datc_journal_commit (journal, &error));
    g_assert_error (error, DATC_JOURNAL_ERROR, DATC_JOURNAL_ERROR_IO);
    g_assert_cmpint (setrlimit (RLIMIT_FSIZE, &saved), ==, 0);
  }

  records = replay_all (f->path, &recovery);
  g_assert_cmpuint (records->len, ==, 1);
  g_assert_true (g_bytes_equal (records->pdata[0], kept));
  g_assert_cmpuint (recovery.valid_bytes, ==, 8 + HEADER + 40);
  g_assert_cmpuint (recovery.torn_bytes, ==, 100);
}

/* ---- recovery --------------------------------------------------------- */

static const gsize varied_sizes[] = {
  1,  2, 3,   7,  8,  9,  15,   16, 17, 40, 41, 60, 1,  255, 256, 257, 12,
  33, 5, 100, 64, 63, 65, 1,    1,  1,  20, 30, 40, 50, 511, 512, 513, 4,
  6,  8, 10,  90, 2,  3,  1000, 44, 45, 46, 47, 3,  2,  1,   77,  128,
};

/* Cut the journal at every byte offset: reopen replays exactly the records
 * wholly before the cut, reports the rest as torn and cuts it off, and new
 * records land right after the old ones. */
static void
test_recovery_ignores_torn_tail_at_every_offset (Fixture *f, gconstpointer data)
{
  const guint n = G_N_ELEMENTS (varied_sizes);
  g_autoptr (GArray) ends = NULL;
  g_autoptr (GPtrArray) expected = build_journal (f->path, varied_sizes, n, &ends);
  g_autoptr (GBytes) whole = read_file (f->path);
  const guint8 *bytes = g_bytes_get_data (whole, NULL);
  gsize size = g_bytes_get_size (whole);
  g_autoptr (GBytes) new1 = make_payload (9001, 33);
  g_autoptr (GBytes) new2 = make_payload (9002, 1);

  g_assert_cmpuint (n, ==, 50);
  for (gsize cut = 0; cut <= size; cut++)
    {
      g_autoptr (GError) error = NULL;
      guint before = records_before (ends, cut);
      guint64 valid = end_of_record (ends, before);
      DatcJournalRecovery recovery;

      write_file (f->path, bytes, cut);
      {
        g_autoptr (GPtrArray) records = NULL;
        g_autoptr (DatcJournal) journal = open_and_collect (f->path, &records, &recovery);

        assert_records (records, expected, before);
        g_assert_cmpuint (recovery.records, ==, before);
        g_assert_cmpuint (recovery.valid_bytes, ==, valid);
        g_assert_cmpuint (recovery.torn_bytes, ==, cut < 8 ? cut : cut - valid);
        g_assert_cmpuint (file_size (f->path), ==, valid);

        append_bytes (journal, new1);
        append_bytes (journal, new2);
        g_assert_true (datc_journal_commit (journal, &error));
        g_assert_no_error (error);
      }
      {
        g_autoptr (GPtrArray) records = replay_all (f->path, &recovery);

        g_assert_cmpuint (records->len, ==, before + 2);
        assert_prefix (records, expected, before);
        g_assert_true (g_bytes_equal (records->pdata[before], new1));
        g_assert_true (g_bytes_equal (records->pdata[before + 1], new2));
        g_assert_cmpuint (recovery.torn_bytes, ==, 0);
      }
    }
}

/* Flip one bit in the header or payload of record `victim`. */
static void
check_flip_stops_at_record (const char *path, GBytes *whole, GPtrArray *expected, GArray *ends,
                            guint victim, gsize bit_offset)
{
  gsize size = g_bytes_get_size (whole);
  g_autofree guint8 *copy = g_memdup2 (g_bytes_get_data (whole, NULL), size);
  g_autoptr (GPtrArray) records = NULL;
  g_autoptr (DatcJournal) journal = NULL;
  guint64 start = end_of_record (ends, victim);
  DatcJournalRecovery recovery;

  copy[bit_offset / 8] ^= (guint8) (1u << (bit_offset % 8));
  g_assert_cmpuint (bit_offset / 8, >=, start);
  g_assert_cmpuint (bit_offset / 8, <, end_of_record (ends, victim + 1));
  write_file (path, copy, size);

  journal = open_and_collect (path, &records, &recovery);
  assert_records (records, expected, victim);
  g_assert_cmpuint (recovery.valid_bytes, ==, start);
  g_assert_cmpuint (recovery.torn_bytes, ==, size - start);
  g_assert_cmpuint (file_size (path), ==, start);
}

static void
test_recovery_stops_at_flipped_bit (Fixture *f, gconstpointer data)
{
  const guint n = G_N_ELEMENTS (varied_sizes);
  g_autoptr (GArray) ends = NULL;
  g_autoptr (GPtrArray) expected = build_journal (f->path, varied_sizes, n, &ends);
  g_autoptr (GBytes) whole = read_file (f->path);

  for (guint victim = 0; victim < n; victim += 3)
    {
      guint64 start = end_of_record (ends, victim);
      guint64 end = end_of_record (ends, victim + 1);

      /* length field, CRC field, first and last payload byte */
      check_flip_stops_at_record (f->path, whole, expected, ends, victim, start * 8 + 3);
      check_flip_stops_at_record (f->path, whole, expected, ends, victim, (start + 5) * 8);
      check_flip_stops_at_record (f->path, whole, expected, ends, victim, (start + 8) * 8 + 7);
      check_flip_stops_at_record (f->path, whole, expected, ends, victim, (end - 1) * 8 + 1);
    }
}

/* Replaces the header of record `victim` with the given length (and a CRC
 * that would match a zero payload), keeping the rest of the file. */
static void
check_bad_length_stops_at_record (Fixture *f, guint32 bad_len)
{
  const guint n = G_N_ELEMENTS (varied_sizes);
  g_autoptr (GArray) ends = NULL;
  g_autoptr (GPtrArray) expected = build_journal (f->path, varied_sizes, n, &ends);
  g_autoptr (GBytes) whole = read_file (f->path);
  gsize size = g_bytes_get_size (whole);
  g_autofree guint8 *copy = g_memdup2 (g_bytes_get_data (whole, NULL), size);
  g_autoptr (GPtrArray) records = NULL;
  g_autoptr (DatcJournal) journal = NULL;
  guint victim = 20;
  guint64 start = end_of_record (ends, victim);
  DatcJournalRecovery recovery;

  put_le32 (copy + start, bad_len);
  put_le32 (copy + start + 4, datc_crc32c (0, copy + start + 8, 0));
  write_file (f->path, copy, size);

  journal = open_and_collect (f->path, &records, &recovery);
  assert_records (records, expected, victim);
  g_assert_cmpuint (recovery.valid_bytes, ==, start);
  g_assert_cmpuint (recovery.torn_bytes, ==, size - start);
}

static void
test_recovery_stops_at_garbage_length (Fixture *f, gconstpointer data)
{
  check_bad_length_stops_at_record (f, 0xFFFFFFFFu);
}

static void
test_recovery_stops_at_length_past_end_of_file (Fixture *f, gconstpointer data)
{
  /* Allowed by the limit, but longer than the file: refused before
   * anything is read or allocated for it. */
  check_bad_length_stops_at_record (f, DATC_JOURNAL_RECORD_MAX);
}

static void
test_recovery_stops_at_zero_length (Fixture *f, gconstpointer data)
{
  check_bad_length_stops_at_record (f, 0);
}

static gboolean
reject_fourth_record (const guint8 *payload, gsize len, gpointer user_data, GError **error)
{
  guint *seen = user_data;

  if (++*seen == 4)
    {
      g_set_error (error, G_MARKUP_ERROR, G_MARKUP_ERROR_INVALID_CONTENT, "bad task record");
      return FALSE;
    }
  return TRUE;
}

static gboolean
reject_fourth_record_silently (const guint8 *payload, gsize len, gpointer user_data, GError **error)
{
  guint *seen = user_data;

  return ++*seen != 4;
}

static void
test_replay_failure_names_record_offset (Fixture *f, gconstpointer data)
{
  const guint n = G_N_ELEMENTS (varied_sizes);
  g_autoptr (GArray) ends = NULL;
  g_autoptr (GPtrArray) expected = NULL;
  g_autofree char *offset = NULL;
  guint64 size;
  int fd;

  expected = build_journal (f->path, varied_sizes, n, &ends);
  offset = g_strdup_printf ("offset %" G_GUINT64_FORMAT, end_of_record (ends, 3));

  /* A torn tail too, which a failed open must leave alone. */
  fd = open (f->path, O_WRONLY | O_APPEND);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (write (fd, "junk", 4), ==, 4);
  g_assert_cmpint (close (fd), ==, 0);
  size = file_size (f->path);

  {
    g_autoptr (GError) error = NULL;
    g_autoptr (DatcJournal) journal = NULL;
    guint seen = 0;

    journal = datc_journal_open (f->path, reject_fourth_record, &seen, NULL, &error);
    g_assert_null (journal);
    g_assert_error (error, G_MARKUP_ERROR, G_MARKUP_ERROR_INVALID_CONTENT);
    g_assert_nonnull (strstr (error->message, offset));
    g_assert_nonnull (strstr (error->message, f->path));
    g_assert_nonnull (strstr (error->message, "bad task record"));
    g_assert_cmpuint (seen, ==, 4);
  }
  {
    g_autoptr (GError) error = NULL;
    g_autoptr (DatcJournal) journal = NULL;
    guint seen = 0;

    journal = datc_journal_open (f->path, reject_fourth_record_silently, &seen, NULL, &error);
    g_assert_null (journal);
    g_assert_error (error, DATC_JOURNAL_ERROR, DATC_JOURNAL_ERROR_REPLAY);
    g_assert_nonnull (strstr (error->message, offset));
  }
  g_assert_cmpuint (file_size (f->path), ==, size);
}

/* Random record sizes, some larger than the 1 MiB read chunk so records
 * straddle chunk boundaries and the read window has to grow, then many
 * random cuts and bit flips. */
static void
test_recovery_survives_random_damage (Fixture *f, gconstpointer data)
{
  const guint n = 400;
  g_autofree gsize *sizes = g_malloc_n (n, sizeof *sizes);
  g_autoptr (GArray) ends = NULL;
  g_autoptr (GPtrArray) expected = NULL;
  g_autoptr (GBytes) whole = NULL;
  const guint8 *bytes;
  gsize size;

  for (guint i = 0; i < n; i++)
    {
      guint kind = (guint) g_test_rand_int_range (0, 100);

      if (i == 150)
        sizes[i] = 1536 * 1024;
      else if (kind < 80)
        sizes[i] = (gsize) g_test_rand_int_range (1, 120);
      else
        sizes[i] = (gsize) g_test_rand_int_range (120, 20000);
    }
  expected = build_journal (f->path, sizes, n, &ends);
  whole = read_file (f->path);
  bytes = g_bytes_get_data (whole, NULL);
  size = g_bytes_get_size (whole);

  for (guint round = 0; round < 60; round++)
    {
      g_autoptr (GError) error = NULL;
      gsize cut = (gsize) g_test_rand_int_range (0, (gint32) size + 1);
      guint before = records_before (ends, cut);
      guint64 valid = end_of_record (ends, before);
      g_autoptr (GBytes) extra = make_payload (round, 1 + round);
      DatcJournalRecovery recovery;

      write_file (f->path, bytes, cut);
      {
        g_autoptr (GPtrArray) records = NULL;
        g_autoptr (DatcJournal) journal = open_and_collect (f->path, &records, &recovery);

        assert_records (records, expected, before);
        g_assert_cmpuint (recovery.valid_bytes, ==, valid);
        g_assert_cmpuint (recovery.torn_bytes, ==, cut < 8 ? cut : cut - valid);
        append_bytes (journal, extra);
        g_assert_true (datc_journal_commit (journal, &error));
        g_assert_no_error (error);
      }
      {
        g_autoptr (GPtrArray) records = replay_all (f->path, &recovery);

        g_assert_cmpuint (records->len, ==, before + 1);
        assert_prefix (records, expected, before);
        g_assert_true (g_bytes_equal (records->pdata[before], extra));
      }
    }

  for (guint round = 0; round < 30; round++)
    {
      gsize bit = (gsize) g_test_rand_int_range (8 * 8, (gint32) (size * 8));
      guint victim = records_before (ends, bit / 8);

      check_flip_stops_at_record (f->path, whole, expected, ends, victim, bit);
    }
}

static gboolean
count_record (const guint8 *payload, gsize len, gpointer user_data, GError **error)
{
  (*(guint *) user_data)++;
  return TRUE;
}

static void
test_scan_is_read_only (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("datc-jscan-XXXXXX", NULL);
  g_autofree gchar *path = g_build_filename (dir, "journal", NULL);
  g_autoptr (GError) error = NULL;
  {
    g_autoptr (DatcJournal) j = datc_journal_open (path, NULL, NULL, NULL, &error);
    g_assert_no_error (error);
    for (guint i = 0; i < 10; i++)
      datc_journal_append (j, "0123456789", 10);
    g_assert_true (datc_journal_commit (j, &error));
  }
  /* A torn tail: half a record. */
  GStatBuf st;
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpint (truncate (path, st.st_size - 5), ==, 0);
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  goffset size = st.st_size;

  guint seen = 0;
  DatcJournalRecovery rec;
  g_assert_true (datc_journal_scan (path, count_record, &seen, &rec, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (seen, ==, 9);
  g_assert_cmpuint (rec.records, ==, 9);
  g_assert_cmpuint (rec.torn_bytes, ==, 13);
  /* Nothing was cut or written. */
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpint (st.st_size, ==, size);

  g_autofree gchar *missing = g_build_filename (dir, "nope", NULL);
  g_assert_false (datc_journal_scan (missing, count_record, &seen, NULL, &error));
  g_assert_error (error, DATC_JOURNAL_ERROR, DATC_JOURNAL_ERROR_IO);
  g_assert_false (g_file_test (missing, G_FILE_TEST_EXISTS));
  unlink (path);
  rmdir (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

#define ADD(path, func) g_test_add (path, Fixture, NULL, fixture_set_up, func, fixture_tear_down)

  ADD ("/journal/create/writes-magic-with-mode-0600", test_create_writes_magic);
  ADD ("/journal/open/reinitialises-a-torn-magic", test_open_reinitialises_torn_magic);
  ADD ("/journal/open/refuses-bad-magic", test_open_refuses_bad_magic);
  ADD ("/journal/open/reports-io-error-with-path", test_open_reports_io_error_with_path);
  ADD ("/journal/append/replays-same-records-in-order", test_append_replays_same_records_in_order);
  ADD ("/journal/append/builds-payload-incrementally", test_append_builds_payload_incrementally);
  ADD ("/journal/append/refuses-empty-payload", test_append_refuses_empty_payload);
  ADD ("/journal/append/accepts-largest-record", test_append_accepts_largest_record);
  ADD ("/journal/pending/counts-sealed-bytes", test_pending_counts_sealed_bytes);
  ADD ("/journal/commit/with-nothing-pending-succeeds", test_commit_with_nothing_pending_succeeds);
  ADD ("/journal/commit/uncommitted-records-are-not-written",
       test_uncommitted_records_are_not_written);
  ADD ("/journal/commit/failure-keeps-records-pending", test_commit_failure_keeps_records_pending);
  ADD ("/journal/commit/serves-the-wait-while-it-syncs",
       test_commit_serves_the_wait_while_it_syncs);
  ADD ("/journal/rewrite/the-switch-syncs-while-the-owner-waits",
       test_rewrite_finish_serves_the_wait_while_it_syncs);
  ADD ("/journal/commit/failure-then-crash-loses-only-the-group",
       test_commit_failure_then_crash_loses_only_the_group);
  ADD ("/journal/recovery/ignores-torn-tail-at-every-offset",
       test_recovery_ignores_torn_tail_at_every_offset);
  ADD ("/journal/recovery/stops-at-flipped-bit", test_recovery_stops_at_flipped_bit);
  ADD ("/journal/recovery/stops-at-garbage-length", test_recovery_stops_at_garbage_length);
  ADD ("/journal/recovery/stops-at-length-past-end-of-file",
       test_recovery_stops_at_length_past_end_of_file);
  ADD ("/journal/recovery/stops-at-zero-length", test_recovery_stops_at_zero_length);
  ADD ("/journal/recovery/survives-random-damage", test_recovery_survives_random_damage);
  ADD ("/journal/replay/failure-names-record-offset", test_replay_failure_names_record_offset);

#undef ADD

  g_test_add_func ("/journal/scan/reads-without-cutting-or-creating", test_scan_is_read_only);
  return g_test_run ();
}
