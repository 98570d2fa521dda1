/* test-resultsfile.c: results.jsonl's writer: the exact line for a result
 * (strings escaped: quotes, newlines, control bytes, UTF-8 kept; integers
 * of every width as printf writes them; an agent's strings formatted once
 * give the same line), lines held until written, a replay's lines
 * formatted on a thread in order, the
 * filter that keeps one line per task after a retry, and the rename into
 * place; the rebuild at a start: the lines already there kept (the same
 * file), a line beyond them cut, a torn end or missing lines completed in
 * place, a different line written anew and renamed into place (and a file
 * not there yet), nothing changed by a start that fails, a symlink
 * replaced rather than written through; the write on a thread of the
 * file's while the caller's wait serves, and its failure part way. */
#include <glib.h>
#include <glib/gstdio.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <unistd.h>

#include "ledger.h"
#include "resultsfile.h"
#include "test-iowait.h"

static gchar *
read_text (const char *path)
{
  gchar *text = NULL;
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  return text;
}

static const DatcResultLine sample = {
  .id = 12,
  .line = 7,
  .attempt = 2,
  .status = "exited",
  .end_class = "exit",
  .exit_code = -3,
  .signal = 0,
  .site = "s\"1",
  .proxy = "p\n1",
  .host = "hôte\x01",
  .agent = "",
  .submitted = 1700000000000000,
  .started = 1700000000000001,
  .finished = 1700000000000002,
  .output = "outputs/a.out",
  .out_off = 0,
  .out_len = 18446744073709551615u,
  .err_off = 5,
  .err_len = 6,
  .out_dropped = 7,
  .err_dropped = 8,
  .message = "tab\there",
  .oom_evidence = NULL,
};

static void
test_line_is_exact_json (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("datc-results-XXXXXX", &error);
  g_autofree gchar *tmp = g_build_filename (dir, "results.jsonl.tmp", NULL);
  g_autofree gchar *path = g_build_filename (dir, "results.jsonl", NULL);
  g_autoptr (DatcResultsFile) f = datc_results_file_open (tmp, &error);
  g_assert_no_error (error);

  datc_results_file_add (f, &sample);
  g_assert_cmpuint (datc_results_file_pending (f), >, 0);
  /* Held until written. */
  g_autofree gchar *before = read_text (tmp);
  g_assert_cmpstr (before, ==, "");
  g_assert_true (datc_results_file_write (f, &error));
  g_assert_cmpuint (datc_results_file_pending (f), ==, 0);
  g_assert_true (datc_results_file_finish (f, path, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (tmp, G_FILE_TEST_EXISTS));

  g_autofree gchar *text = read_text (path);
  g_assert_cmpstr (text, ==,
                   "{\"id\":12,\"line\":7,\"attempt\":2,\"status\":\"exited\",\"class\":\"exit\","
                   "\"exit_code\":-3,\"signal\":0,\"site\":\"s\\\"1\",\"proxy\":\"p\\n1\","
                   "\"host\":\"hôte\\u0001\",\"agent\":\"\",\"submitted\":1700000000000000,"
                   "\"started\":1700000000000001,\"finished\":1700000000000002,"
                   "\"output\":\"outputs/a.out\",\"stdout_offset\":0,"
                   "\"stdout_bytes\":18446744073709551615,\"stderr_offset\":5,"
                   "\"stderr_bytes\":6,\"stdout_dropped\":7,\"stderr_dropped\":8,"
                   "\"message\":\"tab\\there\"}\n");
  /* And it is JSON whose strings read back as written. */
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_assert_true (json_parser_load_from_data (parser, text, -1, &error));
  JsonObject *o = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpstr (json_object_get_string_member (o, "host"), ==, "hôte\x01");
  g_assert_cmpstr (json_object_get_string_member (o, "proxy"), ==, "p\n1");
  g_assert_false (json_object_has_member (o, "oom_evidence"));

  /* Lines go on after the rename, into results.jsonl. */
  DatcResultLine oom = sample;
  oom.id = 13;
  oom.message = NULL;
  oom.oom_evidence = "oom-kill";
  datc_results_file_add (f, &oom);
  g_assert_true (datc_results_file_write (f, &error));
  g_autofree gchar *after = read_text (path);
  g_assert_true (g_str_has_prefix (after, text));
  g_assert_true (
      g_str_has_suffix (after, ",\"stderr_dropped\":8,\"oom_evidence\":\"oom-kill\"}\n"));
  g_assert_null (strstr (after + strlen (text), "message"));

  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  g_assert_cmpint (system (cmd), ==, 0);
}

/* Task 1 keeps its later, not cancelled line; task 2 its cancelled one;
 * task 3 has no final state: dropped. */
static gboolean
keep (guint64 id, gboolean cancelled, gpointer user_data)
{
  (*(guint *) user_data)++;
  if (id == 1)
    return !cancelled;
  if (id == 2)
    return cancelled;
  return FALSE;
}

static void
test_filter_keeps_one_line_per_task (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("datc-results-XXXXXX", &error);
  g_autofree gchar *tmp = g_build_filename (dir, "results.jsonl.tmp", NULL);
  g_autoptr (DatcResultsFile) f = datc_results_file_open (tmp, &error);
  const struct {
    guint64 id;
    const char *status;
  } lines[] = {
    { 1, "cancelled" },
    { 2, "cancelled" },
    { 3, "exited" },
    { 1, "exited" },
    { 2, "exited" },
    { 1, "exited" },
    { 9, "exited" } /* beyond the bag */,
  };
  for (guint i = 0; i < G_N_ELEMENTS (lines); i++)
    {
      DatcResultLine l = sample;
      l.id = lines[i].id;
      l.status = lines[i].status;
      l.attempt = i;
      datc_results_file_add (f, &l);
    }
  g_assert_true (datc_results_file_write (f, &error));
  guint asked = 0;
  g_assert_true (datc_results_file_filter (f, 3, keep, &asked, &error));
  g_assert_no_error (error);
  g_autofree gchar *text = read_text (tmp);
  g_auto (GStrv) kept = g_strsplit (text, "\n", -1);
  g_assert_cmpuint (g_strv_length (kept), ==, 3); /* two lines and the end */
  g_assert_true (
      g_str_has_prefix (kept[0], "{\"id\":2,\"line\":7,\"attempt\":1,\"status\":\"cancelled\""));
  g_assert_true (
      g_str_has_prefix (kept[1], "{\"id\":1,\"line\":7,\"attempt\":3,\"status\":\"exited\""));
  /* Once a task's line is kept, its later ones are not asked about. */
  g_assert_cmpuint (asked, ==, 4);

  /* Appends go on after the filtered lines. */
  DatcResultLine l = sample;
  l.id = 3;
  datc_results_file_add (f, &l);
  g_assert_true (datc_results_file_write (f, &error));
  g_autofree gchar *after = read_text (tmp);
  g_assert_true (g_str_has_prefix (after, text));
  g_assert_true (g_str_has_prefix (after + strlen (text), "{\"id\":3,"));

  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  g_assert_cmpint (system (cmd), ==, 0);
}

/* The line of task `id` as the sample, `tag` its message. */
static void
add_task (DatcResultsFile *f, guint64 id, const char *tag)
{
  DatcResultLine l = sample;
  l.id = id;
  l.message = tag;
  datc_results_file_add (f, &l);
}

static gchar *
lines_of (const char *tags)
{
  g_autoptr (GString) s = g_string_new (NULL);
  for (guint i = 0; tags[i] != '\0'; i++)
    {
      DatcResultLine l = sample;
      char tag[2] = { tags[i], '\0' };
      l.id = i + 1;
      l.message = tag;
      datc_result_line_format (s, &l);
    }
  return g_string_free (g_steal_pointer (&s), FALSE);
}

static guint64
inode_of (const char *path)
{
  GStatBuf st;
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  return st.st_ino;
}

/* Rebuilds `path`, which holds `before`, from the lines of "abc" (one
 * write per line, as a replay streams them); returns what it holds then,
 * and whether it is still the same file (nothing renamed over it). */
static gchar *
rebuild_abc (const char *dir, const char *before, gboolean *same_file)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *path = g_build_filename (dir, "results.jsonl", NULL);
  g_autofree gchar *tmp = g_build_filename (dir, "results.jsonl.tmp", NULL);
  g_assert_true (g_file_set_contents (path, before, -1, &error));
  guint64 ino = inode_of (path);
  g_autoptr (DatcResultsFile) f = datc_results_file_rebuild (path, tmp, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < 3; i++)
    {
      add_task (f, i + 1, (const char[]) { (char) ('a' + i), '\0' });
      g_assert_true (datc_results_file_write (f, &error));
      g_assert_no_error (error);
    }
  g_assert_true (datc_results_file_finish (f, path, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (tmp, G_FILE_TEST_EXISTS));
  *same_file = inode_of (path) == ino;
  /* Lines go on at the end, as after any start. */
  add_task (f, 4, "d");
  g_assert_true (datc_results_file_write (f, &error));
  return read_text (path);
}

static void
test_rebuild_keeps_matching_lines (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("datc-results-XXXXXX", &error);
  g_autofree gchar *want = lines_of ("abcd");
  g_autofree gchar *abc = lines_of ("abc");
  g_autofree gchar *abx = lines_of ("abx");
  g_autofree gchar *abcx = lines_of ("abcx");
  gboolean same;

  /* Every line there already: the same file, nothing rewritten. */
  g_autofree gchar *got = rebuild_abc (dir, abc, &same);
  g_assert_cmpstr (got, ==, want);
  g_assert_true (same);
  /* A line beyond the journal's (a line the journal no longer backs): cut. */
  g_free (got);
  got = rebuild_abc (dir, abcx, &same);
  g_assert_cmpstr (got, ==, want);
  g_assert_true (same);
  /* A torn last line (a master killed while it wrote), or lines not yet
   * written: completed in place. */
  g_free (got);
  g_autofree gchar *torn = g_strndup (abc, strlen (abc) - 30);
  got = rebuild_abc (dir, torn, &same);
  g_assert_cmpstr (got, ==, want);
  g_assert_true (same);
  g_free (got);
  g_autofree gchar *ab = lines_of ("ab");
  got = rebuild_abc (dir, ab, &same);
  g_assert_cmpstr (got, ==, want);
  g_assert_true (same);
  /* One line that differs (an older datc's, a damaged file): written anew
   * from there, and renamed into place. */
  g_free (got);
  got = rebuild_abc (dir, abx, &same);
  g_assert_cmpstr (got, ==, want);
  g_assert_false (same);
  g_free (got);
  got = rebuild_abc (dir, "", &same);
  g_assert_cmpstr (got, ==, want);
  g_assert_true (same);

  /* None yet (a new campaign): written beside, renamed into place. */
  g_autofree gchar *path = g_build_filename (dir, "results.jsonl", NULL);
  g_autofree gchar *tmp = g_build_filename (dir, "results.jsonl.tmp", NULL);
  g_assert_cmpint (unlink (path), ==, 0);
  g_autoptr (DatcResultsFile) f = datc_results_file_rebuild (path, tmp, &error);
  g_assert_no_error (error);
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  add_task (f, 1, "a");
  g_assert_true (datc_results_file_write (f, &error));
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  g_assert_true (datc_results_file_finish (f, path, &error));
  g_assert_no_error (error);
  g_free (got);
  got = read_text (path);
  g_autofree gchar *a = lines_of ("a");
  g_assert_cmpstr (got, ==, a);

  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  g_assert_cmpint (system (cmd), ==, 0);
}

/* A start that fails after lines differed, or after lines were appended
 * (the journal is of another task file, a record makes no sense), leaves
 * results.jsonl as it was. */
static void
test_rebuild_not_finished_changes_nothing (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("datc-results-XXXXXX", &error);
  g_autofree gchar *path = g_build_filename (dir, "results.jsonl", NULL);
  g_autofree gchar *tmp = g_build_filename (dir, "results.jsonl.tmp", NULL);
  g_autofree gchar *abcx = lines_of ("abcx");
  g_assert_true (g_file_set_contents (path, abcx, -1, &error));
  {
    g_autoptr (DatcResultsFile) f = datc_results_file_rebuild (path, tmp, &error);
    add_task (f, 1, "a");
    add_task (f, 2, "y");
    g_assert_true (datc_results_file_write (f, &error));
    g_assert_no_error (error);
  }
  g_autofree gchar *after = read_text (path);
  g_assert_cmpstr (after, ==, abcx);

  /* Lines appended past its end are taken back too. */
  g_autofree gchar *ab = lines_of ("ab");
  g_assert_true (g_file_set_contents (path, ab, -1, &error));
  {
    g_autoptr (DatcResultsFile) f = datc_results_file_rebuild (path, tmp, &error);
    add_task (f, 1, "a");
    add_task (f, 2, "b");
    add_task (f, 3, "c");
    g_assert_true (datc_results_file_write (f, &error));
    g_assert_no_error (error);
    g_autofree gchar *during = read_text (path);
    g_autofree gchar *abc = lines_of ("abc");
    g_assert_cmpstr (during, ==, abc);
  }
  g_free (after);
  after = read_text (path);
  g_assert_cmpstr (after, ==, ab);

  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  g_assert_cmpint (system (cmd), ==, 0);
}

/* The filter reads the file: the earlier file's lines beyond the replayed
 * ones are gone before it does. */
static void
test_rebuild_then_filter (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("datc-results-XXXXXX", &error);
  g_autofree gchar *path = g_build_filename (dir, "results.jsonl", NULL);
  g_autofree gchar *tmp = g_build_filename (dir, "results.jsonl.tmp", NULL);
  g_autofree gchar *abc = lines_of ("abc");
  g_assert_true (g_file_set_contents (path, abc, -1, &error));
  g_autoptr (DatcResultsFile) f = datc_results_file_rebuild (path, tmp, &error);
  add_task (f, 1, "a");
  g_assert_true (datc_results_file_write (f, &error));
  guint asked = 0;
  g_assert_true (datc_results_file_filter (f, 3, keep, &asked, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (asked, ==, 1); /* task 1's line only */
  g_assert_true (datc_results_file_finish (f, path, &error));
  g_autofree gchar *got = read_text (path);
  g_autofree gchar *a = lines_of ("a");
  g_assert_cmpstr (got, ==, a);

  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  g_assert_cmpint (system (cmd), ==, 0);
}

/* A results.jsonl that is a symlink is replaced, never written through:
 * what it points to stays as it was. */
static void
test_rebuild_replaces_a_symlink (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("datc-results-XXXXXX", &error);
  g_autofree gchar *path = g_build_filename (dir, "results.jsonl", NULL);
  g_autofree gchar *tmp = g_build_filename (dir, "results.jsonl.tmp", NULL);
  g_autofree gchar *other = g_build_filename (dir, "other", NULL);
  g_autofree gchar *abcx = lines_of ("abcx");
  g_autofree gchar *abc = lines_of ("abc");
  g_assert_true (g_file_set_contents (other, abcx, -1, &error));
  g_assert_cmpint (symlink (other, path), ==, 0);
  g_autoptr (DatcResultsFile) f = datc_results_file_rebuild (path, tmp, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < 3; i++)
    add_task (f, i + 1, (const char[]) { (char) ('a' + i), '\0' });
  g_assert_true (datc_results_file_write (f, &error));
  g_assert_true (datc_results_file_finish (f, path, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (path, G_FILE_TEST_IS_SYMLINK));
  g_autofree gchar *got = read_text (path);
  g_assert_cmpstr (got, ==, abc);
  g_autofree gchar *kept = read_text (other);
  g_assert_cmpstr (kept, ==, abcx);

  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  g_assert_cmpint (system (cmd), ==, 0);
}

/* Integers at every width, as printf writes them. */
static void
test_integers_as_printf (void)
{
  g_autoptr (GString) s = g_string_new (NULL);
  for (guint64 v = 1, k = 0; k < 20; k++, v *= 10)
    {
      const guint64 cases[] = { v - 1, v, v + 1, v * 5, G_MAXUINT64 - v };
      for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
        {
          DatcResultLine l = sample;
          l.id = cases[c];
          l.exit_code = -(gint64) (cases[c] >> 1);
          l.started = G_MININT64;
          g_string_truncate (s, 0);
          datc_result_line_format (s, &l);
          g_autofree gchar *head = g_strdup_printf (
              "{\"id\":%" G_GUINT64_FORMAT ",\"line\":7,\"attempt\":2,"
              "\"status\":\"exited\",\"class\":\"exit\",\"exit_code\":%" G_GINT64_FORMAT ",",
              l.id, l.exit_code);
          g_assert_true (g_str_has_prefix (s->str, head));
          g_assert_nonnull (strstr (s->str, ",\"started\":-9223372036854775808,"));
        }
    }
}

/* A line given its agent's strings formatted once (DatcResultLine.who)
 * is the line formatted from the strings: escapes, UTF-8, "" and NULL. */
static void
test_who_formatted_once_is_the_same_line (void)
{
  const char *names[] = { "s\"1", "p\n1", "hôte\x01", "", NULL, "vm-22401-f7290143", "\\\x7f" };
  g_autoptr (GString) plain = g_string_new (NULL);
  g_autoptr (GString) cached = g_string_new (NULL);
  guint n = G_N_ELEMENTS (names);
  for (guint i = 0; i < n * n; i++)
    {
      DatcResultLine l = sample;
      l.site = names[i % n];
      l.proxy = names[i / n];
      l.host = names[(i + 1) % n];
      l.agent = names[(i / n + 3) % n];
      g_string_truncate (plain, 0);
      datc_result_line_format (plain, &l);
      g_autofree gchar *who = datc_result_line_who (l.site, l.proxy, l.host, l.agent);
      g_assert_true (g_str_has_prefix (who, ",\"site\":\""));
      /* The strings are not read when `who` is given. */
      l.who = who;
      l.site = l.proxy = l.host = l.agent = "not these";
      g_string_truncate (cached, 0);
      datc_result_line_format (cached, &l);
      g_assert_cmpstr (cached->str, ==, plain->str);
      g_assert_nonnull (strstr (plain->str, who));
    }
}

/* Replays `n` lines into `f` (datc_results_file_begin_replay): every
 * 701st a run of two whole lines (a checkpoint's), every other with its
 * agent's strings formatted once, messages the caller changes once the
 * call is back; `differ` (an id) gets another message.  Returns the
 * lines formatted one by one.  With `end`, ends the replay. */
static GString *
replay_lines (DatcResultsFile *f, guint64 n, guint64 differ, gboolean end)
{
  GString *expected = g_string_new (NULL);
  g_autoptr (GString) raw = g_string_new (NULL);
  g_autofree gchar *who = datc_result_line_who ("site-w", "proxy-w", "host-w", "agent-w");

  datc_results_file_begin_replay (f);
  for (guint64 id = 1; id <= n; id++)
    {
      DatcResultLine l = sample;
      l.id = id;
      g_autofree gchar *message = id % 3 == 0
                                      ? NULL
                                      : g_strdup_printf ("message %" G_GUINT64_FORMAT "%s\n", id,
                                                         id == differ ? " (another)" : "");
      l.message = message;
      l.who = id % 2 == 0 ? who : NULL;
      if (id % 701 == 0)
        {
          g_string_truncate (raw, 0);
          datc_result_line_format (raw, &l);
          datc_result_line_format (raw, &l);
          datc_results_file_add_lines (f, (const guint8 *) raw->str, raw->len);
          g_string_append_len (expected, raw->str, (gssize) raw->len);
          continue;
        }
      datc_result_line_format (expected, &l);
      datc_results_file_add (f, &l);
      if (message != NULL)
        memset (message, 'x', strlen (message));
    }
  if (end)
    datc_results_file_end_replay (f);
  return expected;
}

/* A replay's lines are formatted on the file's thread, in order with whole
 * lines added between them, and written as they come past a megabyte and
 * at the end: the file is the lines formatted one by one.  Over the file
 * it made, the same lines leave it in place; one line that differs has it
 * written anew; a replay freed before its end leaves it as it was. */
static void
test_replay_lines_on_a_thread_in_order (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("datc-results-XXXXXX", &error);
  g_autofree gchar *tmp = g_build_filename (dir, "results.jsonl.tmp", NULL);
  g_autofree gchar *path = g_build_filename (dir, "results.jsonl", NULL);

  for (guint round = 0; round < 3; round++)
    {
      guint64 before = round > 0 ? inode_of (path) : 0;
      g_autoptr (DatcResultsFile) f = datc_results_file_rebuild (path, tmp, &error);
      g_assert_no_error (error);
      g_autoptr (GString) expected = replay_lines (f, 6000, round == 2 ? 3001 : 0, TRUE);
      g_assert_true (datc_results_file_write (f, &error));
      g_assert_true (datc_results_file_finish (f, path, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (expected->len, >, 2u << 20);
      g_autofree gchar *text = read_text (path);
      g_assert_cmpuint (strlen (text), ==, expected->len);
      g_assert_true (strcmp (text, expected->str) == 0);
      /* The same lines: compared, not written; one differs: anew. */
      if (round == 1)
        g_assert_cmpuint (inode_of (path), ==, before);
      if (round == 2)
        g_assert_cmpuint (inode_of (path), !=, before);
    }

  g_autofree gchar *kept = read_text (path);
  {
    g_autoptr (DatcResultsFile) f = datc_results_file_rebuild (path, tmp, &error);
    g_assert_no_error (error);
    g_autoptr (GString) other = replay_lines (f, 3000, 5, FALSE);
  }
  g_autofree gchar *after = read_text (path);
  g_assert_true (strcmp (after, kept) == 0);

  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  g_assert_cmpint (system (cmd), ==, 0);
}

/* With a wait set (datc_results_file_set_write_wait) a large write()
 * runs on a thread of the file's (there while `wait` runs), while the
 * caller's thread calls `wait` until done_fd says it is done; every line
 * arrives.  With nothing to write, a small batch, or unset, `wait` is not
 * called. */
static void
add_lines (DatcResultsFile *f, guint64 first, guint n)
{
  for (guint i = 0; i < n; i++)
    {
      DatcResultLine line = sample;
      line.id = first + i;
      datc_results_file_add (f, &line);
    }
}

static guint
count_lines (const char *text)
{
  guint n = 0;
  for (const char *c = text; *c; c++)
    n += *c == '\n';
  return n;
}

static void
test_write_runs_on_a_thread_while_the_wait_serves (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("datc-results-XXXXXX", &error);
  g_autofree gchar *path = g_build_filename (dir, "results.jsonl", NULL);
  TestIoWait w = test_io_wait_init (TRUE);
  {
    g_autoptr (DatcResultsFile) f = datc_results_file_open (path, &error);
    g_assert_no_error (error);
    datc_results_file_set_write_wait (f, test_io_wait, &w);
    g_assert_true (datc_results_file_write (f, &error)); /* nothing to write */
    add_lines (f, 20001, 100);                           /* ~26 KB: written here */
    g_assert_true (datc_results_file_write (f, &error));
    g_assert_cmpuint (w.calls, ==, 0);
    for (guint round = 0; round < 3; round++)
      {
        guint before = w.calls;
        add_lines (f, 1 + round * 5000, 5000);
        g_assert_true (datc_results_file_write (f, &error));
        g_assert_no_error (error);
        g_assert_cmpuint (w.calls, >, before);
        g_assert_cmpuint (datc_results_file_pending (f), ==, 0);
      }
    g_assert_cmpuint (w.saw_done, ==, w.calls);
    datc_results_file_set_write_wait (f, NULL, NULL);
    guint calls = w.calls;
    add_lines (f, 15001, 10);
    g_assert_true (datc_results_file_write (f, &error));
    g_assert_cmpuint (w.calls, ==, calls);
  }
  g_autofree gchar *text = read_text (path);
  g_assert_cmpuint (count_lines (text), ==, 15110);
  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  g_assert_cmpint (system (cmd), ==, 0);
}

/* A write on the thread that fails part way (the file size limit: one
 * short write, then EFBIG) names the file and keeps only what did not
 * reach it; the next write completes the torn line. */
static void
test_write_on_the_thread_fails_part_way (void)
{
  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      return;
    }
  g_autoptr (GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("datc-results-XXXXXX", &error);
  g_autofree gchar *path = g_build_filename (dir, "results.jsonl", NULL);
  TestIoWait w = test_io_wait_init (TRUE);
  signal (SIGXFSZ, SIG_IGN);
  struct rlimit saved, limited;
  g_assert_cmpint (getrlimit (RLIMIT_FSIZE, &saved), ==, 0);
  {
    g_autoptr (DatcResultsFile) f = datc_results_file_open (path, &error);
    g_assert_no_error (error);
    datc_results_file_set_write_wait (f, test_io_wait, &w);
    add_lines (f, 1, 2000);
    gsize total = datc_results_file_pending (f);
    g_assert_cmpuint (total, >=, 256 * 1024); /* on the thread */
    limited = saved;
    limited.rlim_cur = 10000;
    g_assert_cmpint (setrlimit (RLIMIT_FSIZE, &limited), ==, 0);
    g_assert_false (datc_results_file_write (f, &error));
    g_assert_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO);
    g_assert_nonnull (strstr (error->message, path));
    g_assert_cmpuint (datc_results_file_pending (f), ==, total - 10000);
    g_clear_error (&error);
    g_assert_cmpint (setrlimit (RLIMIT_FSIZE, &saved), ==, 0);
    g_assert_true (datc_results_file_write (f, &error));
    g_assert_no_error (error);
    g_assert_cmpuint (w.calls, >=, 2);
  }
  g_autofree gchar *text = read_text (path);
  g_assert_cmpuint (count_lines (text), ==, 2000);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; i < 2000; i++)
    g_assert_true (json_parser_load_from_data (parser, lines[i], -1, NULL));
  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  g_assert_cmpint (system (cmd), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/resultsfile/a-line-is-exact-escaped-json", test_line_is_exact_json);
  g_test_add_func ("/resultsfile/the-filter-keeps-one-line-per-task",
                   test_filter_keeps_one_line_per_task);
  g_test_add_func ("/resultsfile/integers-as-printf-writes-them", test_integers_as_printf);
  g_test_add_func ("/resultsfile/who-formatted-once-is-the-same-line",
                   test_who_formatted_once_is_the_same_line);
  g_test_add_func ("/resultsfile/rebuild/replay-lines-on-a-thread-in-order",
                   test_replay_lines_on_a_thread_in_order);
  g_test_add_func ("/resultsfile/rebuild/keeps-the-lines-already-there",
                   test_rebuild_keeps_matching_lines);
  g_test_add_func ("/resultsfile/rebuild/a-start-that-fails-changes-nothing",
                   test_rebuild_not_finished_changes_nothing);
  g_test_add_func ("/resultsfile/rebuild/filter-sees-only-the-replayed-lines",
                   test_rebuild_then_filter);
  g_test_add_func ("/resultsfile/rebuild/replaces-a-symlink-never-writes-through-it",
                   test_rebuild_replaces_a_symlink);
  g_test_add_func ("/resultsfile/write/runs-on-a-thread-while-the-wait-serves",
                   test_write_runs_on_a_thread_while_the_wait_serves);
  g_test_add_func ("/resultsfile/write/on-the-thread-fails-part-way-and-goes-on",
                   test_write_on_the_thread_fails_part_way);
  return g_test_run ();
}
