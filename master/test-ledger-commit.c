/* test-ledger-commit.c: a commit that fails part way, and an output write
 * that fails, on a real journal in a temporary directory.  A results.jsonl
 * write cut short (a file size limit stands in for a full disk) is taken
 * up where it stopped, so the file never holds a torn line followed by a
 * repeat; an output file whose fdatasync failed is never synced again as
 * if its data were safe (the kernel may have dropped the pages and cleared
 * the error: the test gives the ledger's descriptor a file whose sync
 * succeeds, as that second call would); an output write that fails is an
 * error, not a duplicate; a resume keeps a results.jsonl that is right
 * (the same file) and rebuilds a damaged one. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datc-limits.h"
#include "ledger.h"

typedef struct {
  gchar *dir;
  DatcBag *bag;
  DatcLedger *ledger;
  guint32 agent;
} Fixture;

static void
setup (Fixture *f, guint n)
{
  g_autoptr (GError) error = NULL;
  f->dir = g_dir_make_tmp ("datc-commit-XXXXXX", &error);
  g_assert_no_error (error);
  g_autoptr (GString) text = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    g_string_append (text, "true\n");
  f->bag = datc_bag_new ();
  g_assert_true (
      datc_bag_load_data (f->bag, "t.txt", text->str, text->len, DATC_TASKFILE_LINES, &error));
  DatcLedgerOptions o = { 0 };
  f->ledger = datc_ledger_open (f->dir, f->bag, "t.txt", "00", &o, &error);
  g_assert_no_error (error);
  f->agent = datc_ledger_agent_hello (f->ledger, "agent-1", "site", "proxy-1", "host");
  g_autoptr (GArray) picked = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  DatcDispatchRequest req = { .agent = f->agent, .max = n, .budget_ms = G_MAXUINT64 };
  g_assert_cmpuint (datc_ledger_dispatch (f->ledger, &req, picked), ==, n);
}

static void
teardown (Fixture *f)
{
  datc_ledger_free (f->ledger);
  datc_bag_free (f->bag);
  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", f->dir);
  g_assert_cmpint (system (cmd), ==, 0);
  g_free (f->dir);
}

static void
finish (Fixture *f, guint64 id, const char *out)
{
  gint64 now = g_get_real_time ();
  DatcResult r = {
    .id = id,
    .attempt = 1,
    .status = DATC_STATUS_EXITED,
    .exit_code = 0,
    .started_us = now,
    .finished_us = now,
    .out = g_bytes_new (out, strlen (out)),
    .err = g_bytes_new (NULL, 0),
  };
  g_autoptr (GError) error = NULL;
  g_assert_cmpint (datc_ledger_take_result (f->ledger, f->agent, &r, NULL, &error), ==,
                   DATC_RESULT_ACCEPTED);
  g_assert_no_error (error);
  g_bytes_unref (r.out);
  g_bytes_unref (r.err);
}

static guint64
file_size (Fixture *f, const char *name)
{
  g_autofree gchar *path = g_build_filename (f->dir, name, NULL);
  struct stat st;
  g_assert_cmpint (stat (path, &st), ==, 0);
  return (guint64) st.st_size;
}

/* The ids of results.jsonl, in order; fails on a line that is not one
 * whole result. */
static GArray *
result_ids (Fixture *f)
{
  g_autofree gchar *path = g_build_filename (f->dir, "results.jsonl", NULL);
  g_autofree gchar *text = NULL;
  g_autoptr (GError) error = NULL;
  g_assert_true (g_file_get_contents (path, &text, NULL, &error));
  g_assert_true (g_str_has_suffix (text, "}\n"));
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (guint64));
  for (guint i = 0; lines[i] != NULL && lines[i][0] != '\0'; i++)
    {
      const char *l = lines[i];
      g_assert_true (g_str_has_prefix (l, "{\"id\":"));
      g_assert_true (g_str_has_suffix (l, "}"));
      /* One object per line: a torn line runs into the next one. */
      g_assert_null (strstr (l + 1, "{\"id\":"));
      guint64 id = g_ascii_strtoull (l + 6, NULL, 10);
      g_array_append_val (ids, id);
    }
  return ids;
}

/* A file size limit makes the write of the second commit's lines stop in
 * the middle of one (a short write, then EFBIG, as a full disk gives a
 * short write, then ENOSPC).  The journal, smaller, still fits. */
static void
test_short_results_write_resumes (void)
{
  Fixture f;
  setup (&f, 10);
  g_autoptr (GError) error = NULL;
  for (guint64 id = 1; id <= 5; id++)
    finish (&f, id, "");
  g_assert_true (datc_ledger_commit (f.ledger, &error));
  g_assert_no_error (error);
  guint64 before = file_size (&f, "results.jsonl");
  for (guint64 id = 6; id <= 10; id++)
    finish (&f, id, "");

  signal (SIGXFSZ, SIG_IGN);
  struct rlimit saved, lim;
  g_assert_cmpint (getrlimit (RLIMIT_FSIZE, &saved), ==, 0);
  lim = saved;
  lim.rlim_cur = before + 100;
  g_assert_cmpint (setrlimit (RLIMIT_FSIZE, &lim), ==, 0);
  gboolean ok = datc_ledger_commit (f.ledger, &error);
  g_assert_cmpint (setrlimit (RLIMIT_FSIZE, &saved), ==, 0);
  g_assert_false (ok);
  g_assert_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO);
  g_assert_nonnull (strstr (error->message, "results.jsonl"));
  g_clear_error (&error);
  /* The journal was synced; part of a line reached results.jsonl. */
  g_assert_cmpuint (file_size (&f, "journal"), <, before + 100);
  g_assert_cmpuint (file_size (&f, "results.jsonl"), ==, before + 100);

  g_assert_true (datc_ledger_commit (f.ledger, &error));
  g_assert_no_error (error);
  g_autoptr (GArray) ids = result_ids (&f);
  g_assert_cmpuint (ids->len, ==, 10);
  for (guint i = 0; i < ids->len; i++)
    g_assert_cmpuint (g_array_index (ids, guint64, i), ==, i + 1);
  teardown (&f);
}

/* Finds the descriptor this process holds on `path` other than `mine`. */
static int
fd_on (const char *path, int mine)
{
  g_autoptr (GDir) d = g_dir_open ("/proc/self/fd", 0, NULL);
  g_assert_nonnull (d);
  const char *name;
  while ((name = g_dir_read_name (d)) != NULL)
    {
      int fd = atoi (name);
      g_autofree gchar *link = g_strdup_printf ("/proc/self/fd/%s", name);
      g_autofree gchar *target = g_file_read_link (link, NULL);
      if (fd != mine && g_strcmp0 (target, path) == 0)
        return fd;
    }
  return -1;
}

/* fdatasync fails on a FIFO (EINVAL) where a disk gives EIO; then the
 * ledger's descriptor is made a regular file, on which a second
 * fdatasync would succeed, as it may after the kernel dropped the pages
 * of a failed one.  No later commit may go through. */
static void
test_failed_output_sync_is_final (void)
{
  Fixture f;
  setup (&f, 3);
  g_autoptr (GError) error = NULL;
  g_autofree gchar *out = g_build_filename (f.dir, "outputs", "agent-1.out", NULL);
  g_assert_cmpint (mkfifo (out, 0600), ==, 0);
  int reader = open (out, O_RDWR | O_CLOEXEC);
  g_assert_cmpint (reader, >=, 0);
  finish (&f, 1, ""); /* no output: nothing to sync */
  g_assert_true (datc_ledger_commit (f.ledger, &error));
  g_assert_no_error (error);
  guint64 journal = file_size (&f, "journal");
  guint64 results = file_size (&f, "results.jsonl");

  finish (&f, 2, "two\n");
  g_assert_false (datc_ledger_commit (f.ledger, &error));
  g_assert_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO);
  g_assert_nonnull (strstr (error->message, out));
  g_clear_error (&error);

  int ledger_fd = fd_on (out, reader);
  g_assert_cmpint (ledger_fd, >=, 0);
  g_autofree gchar *plain = g_build_filename (f.dir, "plain", NULL);
  int plain_fd = open (plain, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  g_assert_cmpint (plain_fd, >=, 0);
  g_assert_cmpint (dup2 (plain_fd, ledger_fd), ==, ledger_fd);
  close (plain_fd);
  close (reader);

  finish (&f, 3, "");
  g_assert_false (datc_ledger_commit (f.ledger, &error));
  g_assert_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO);
  g_assert_nonnull (strstr (error->message, out));
  /* Neither result behind the failed sync nor the next one is journaled
   * or shown. */
  g_assert_cmpuint (file_size (&f, "journal"), ==, journal);
  g_assert_cmpuint (file_size (&f, "results.jsonl"), ==, results);
  teardown (&f);
}

/* The output of a result cannot be written (a directory stands where the
 * agent's file goes): an error naming the file, DATC_RESULT_FAILED and
 * nothing recorded; the task still runs on its agent, whose result is
 * taken once the file can be written.  (It was reported as a duplicate.) */
static void
test_failed_output_write_is_an_error (void)
{
  Fixture f;
  setup (&f, 1);
  g_autofree gchar *out = g_build_filename (f.dir, "outputs", "agent-1.out", NULL);
  g_assert_cmpint (g_mkdir (out, 0700), ==, 0);
  gint64 now = g_get_real_time ();
  DatcResult r = {
    .id = 1,
    .attempt = 1,
    .status = DATC_STATUS_EXITED,
    .started_us = now,
    .finished_us = now,
    .out = g_bytes_new_static ("one\n", 4),
  };
  g_autoptr (GError) error = NULL;
  g_assert_cmpint (datc_ledger_take_result (f.ledger, f.agent, &r, NULL, &error), ==,
                   DATC_RESULT_FAILED);
  g_assert_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO);
  g_assert_nonnull (strstr (error->message, out));
  g_clear_error (&error);
  g_assert_cmpint (datc_ledger_task_state (f.ledger, 1), ==, DATC_TASK_RUNNING);
  g_assert_true (datc_ledger_attempt_live (f.ledger, 1, f.agent, 1));
  g_assert_true (datc_ledger_commit (f.ledger, &error));
  g_assert_cmpuint (file_size (&f, "results.jsonl"), ==, 0);

  g_assert_cmpint (g_rmdir (out), ==, 0);
  g_assert_cmpint (datc_ledger_take_result (f.ledger, f.agent, &r, NULL, &error), ==,
                   DATC_RESULT_ACCEPTED);
  g_assert_no_error (error);
  g_assert_cmpint (datc_ledger_task_state (f.ledger, 1), ==, DATC_TASK_DONE);
  g_bytes_unref (r.out);
  teardown (&f);
}

/* Opens the campaign again as a resumed master does (sha "00": its task
 * file; another sha: a different one, refused) and frees it. */
static gboolean
reopen (Fixture *f, const char *sha, GError **error)
{
  DatcLedgerOptions o = { 0 };
  DatcLedger *l = datc_ledger_open (f->dir, f->bag, "t.txt", sha, &o, error);
  datc_ledger_free (l);
  return l != NULL;
}

/* A resume leaves a results.jsonl that holds the replayed lines as it
 * is (the same file: compared, not written again and swapped), and
 * rebuilds a damaged one from the journal; a resume refused (another
 * task file) leaves it as it was found. */
static void
test_resume_keeps_results (void)
{
  Fixture f;
  setup (&f, 10);
  g_autoptr (GError) error = NULL;
  for (guint64 id = 1; id <= 10; id++)
    finish (&f, id, "out");
  g_assert_true (datc_ledger_commit (f.ledger, &error));
  datc_ledger_free (f.ledger);
  f.ledger = NULL;
  g_autofree gchar *path = g_build_filename (f.dir, "results.jsonl", NULL);
  g_autofree gchar *tmp = g_build_filename (f.dir, "results.jsonl.tmp", NULL);
  g_autofree gchar *want = NULL;
  g_assert_true (g_file_get_contents (path, &want, NULL, &error));
  struct stat before, after;
  g_assert_cmpint (stat (path, &before), ==, 0);

  g_assert_true (reopen (&f, "00", &error));
  g_assert_no_error (error);
  g_assert_cmpint (stat (path, &after), ==, 0);
  g_assert_cmpuint (after.st_ino, ==, before.st_ino);
  g_autofree gchar *got = NULL;
  g_assert_true (g_file_get_contents (path, &got, NULL, &error));
  g_assert_cmpstr (got, ==, want);

  /* Short (a master killed before it wrote its last lines), cut in the
   * middle of task 4's: completed in place. */
  g_assert_cmpint (truncate (path, (off_t) (strstr (want, "{\"id\":4,") - want + 20)), ==, 0);
  g_assert_true (reopen (&f, "00", &error));
  g_assert_no_error (error);
  g_assert_cmpint (stat (path, &after), ==, 0);
  g_assert_cmpuint (after.st_ino, ==, before.st_ino);
  g_free (got);
  g_assert_true (g_file_get_contents (path, &got, NULL, &error));
  g_assert_cmpstr (got, ==, want);

  /* Damaged: task 5's exit code, and a torn end. */
  g_autofree gchar *damaged = g_strdup (want);
  char *five = strstr (damaged, "{\"id\":5,");
  g_assert_nonnull (five);
  five = strstr (five, "\"exit_code\":0");
  five[strlen ("\"exit_code\":")] = '7';
  gsize damaged_len = strlen (damaged) - 40;
  g_assert_true (g_file_set_contents (path, damaged, (gssize) damaged_len, &error));
  g_assert_false (reopen (&f, "11", &error));
  g_assert_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_MISMATCH);
  g_clear_error (&error);
  g_free (got);
  g_assert_true (g_file_get_contents (path, &got, NULL, &error));
  g_assert_cmpmem (got, strlen (got), damaged, damaged_len);
  g_assert_false (g_file_test (tmp, G_FILE_TEST_EXISTS));

  g_assert_true (reopen (&f, "00", &error));
  g_assert_no_error (error);
  g_free (got);
  g_assert_true (g_file_get_contents (path, &got, NULL, &error));
  g_assert_cmpstr (got, ==, want);
  g_assert_false (g_file_test (tmp, G_FILE_TEST_EXISTS));
  teardown (&f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/ledger/commit/a-short-results-write-is-taken-up-where-it-stopped",
                   test_short_results_write_resumes);
  g_test_add_func ("/ledger/commit/a-failed-output-sync-is-never-retried",
                   test_failed_output_sync_is_final);
  g_test_add_func ("/ledger/commit/a-failed-output-write-is-an-error-not-a-duplicate",
                   test_failed_output_write_is_an_error);
  g_test_add_func ("/ledger/commit/a-resume-keeps-results-jsonl-and-rebuilds-a-damaged-one",
                   test_resume_keeps_results);
  return g_test_run ();
}
