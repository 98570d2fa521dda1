/* test-bag.c: the task bag on good and bad task files.  Every bad input
 * has its own test (most from one table) that checks the exact
 * "FILE:LINE:" prefix, a phrase of the message, and that the bag did not
 * change.  Packed specs are checked by decoding them the way an agent
 * would: as the one task of a TASKS frame. */
#include "bag.h"

#include <glib/gstdio.h>
#include <string.h>

#include "datc-limits.h"
#include "message.h"

#define MIB ((gsize) 1024 * 1024)

typedef struct {
  gchar *dir;
} Fixture;

static void
fixture_set_up (Fixture *fx, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  fx->dir = g_dir_make_tmp ("test-bag-XXXXXX", &error);
  g_assert_no_error (error);
}

static void
fixture_tear_down (Fixture *fx, gconstpointer data)
{
  g_autoptr (GDir) dir = g_dir_open (fx->dir, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree gchar *path = g_build_filename (fx->dir, name, NULL);

      g_assert_cmpint (g_unlink (path), ==, 0);
    }
  g_assert_cmpint (g_rmdir (fx->dir), ==, 0);
  g_free (fx->dir);
}

static gchar *
write_file (Fixture *fx, const char *name, const char *data, gsize len)
{
  g_autoptr (GError) error = NULL;
  gchar *path = g_build_filename (fx->dir, name, NULL);

  g_file_set_contents (path, data, (gssize) len, &error);
  g_assert_no_error (error);
  return path;
}

static gchar *
task_text (DatcBag *bag, guint64 id)
{
  const DatcBagTask *task = datc_bag_get (bag, id);

  g_assert_nonnull (task);
  return g_strndup ((const char *) datc_bag_spec (bag, task), task->length);
}

/* The index of the file task `id` came from. */
static guint32
task_source (DatcBag *bag, guint64 id)
{
  guint32 source = G_MAXUINT32;

  datc_bag_line (bag, id, &source);
  return source;
}

static void
assert_line_task (DatcBag *bag, guint64 id, const char *text, guint32 line)
{
  const DatcBagTask *task = datc_bag_get (bag, id);
  g_autofree gchar *got = task_text (bag, id);

  g_assert_cmpint (task->kind, ==, DATC_BAG_SPEC_LINE);
  g_assert_cmpstr (got, ==, text);
  g_assert_cmpuint (datc_bag_line (bag, id, NULL), ==, line);
  g_assert_cmpuint (task->retries, ==, 0);
  g_assert_cmpuint (task->est_runtime_ms, ==, 0);
}

/* The packed spec of task `id`, decoded as an agent would see it. */
static DatcMsg *
decode_task (DatcBag *bag, guint64 id)
{
  const DatcBagTask *task = datc_bag_get (bag, id);
  g_autoptr (GByteArray) frame = g_byte_array_new ();
  g_autoptr (GError) error = NULL;
  DatcMsg *msg;

  g_assert_cmpint (task->kind, ==, DATC_BAG_SPEC_PACKED);
  datc_tasks_encode_begin (frame, 7, 1);
  datc_tasks_encode_add_spec (frame, id, 0, datc_bag_spec (bag, task), task->length);
  msg = datc_msg_decode (frame->data, frame->len, DATC_FRAME_MAX, &error);
  g_assert_no_error (error);
  g_assert_nonnull (msg);
  g_assert_cmpint (msg->type, ==, DATC_MSG_TASKS);
  g_assert_cmpuint (msg->u.tasks.tasks->len, ==, 1);
  g_assert_cmpuint (((DatcTask *) msg->u.tasks.tasks->pdata[0])->id, ==, id);
  return msg;
}

static const DatcTaskSpec *
msg_spec (const DatcMsg *msg)
{
  return &((DatcTask *) msg->u.tasks.tasks->pdata[0])->spec;
}

/* Loads one JSON Lines line and returns its decoded spec's message. */
static DatcMsg *
load_json_line (DatcBag *bag, const char *line)
{
  g_autoptr (GError) error = NULL;

  datc_bag_load_data (bag, "one.jsonl", line, strlen (line), DATC_TASKFILE_AUTO, &error);
  g_assert_no_error (error);
  return decode_task (bag, datc_bag_count (bag));
}

static void
assert_parse_error (const GError *error, const char *name, guint line, const char *what)
{
  g_autofree gchar *prefix = g_strdup_printf ("%s:%u: ", name, line);

  g_assert_error (error, DATC_BAG_ERROR, DATC_BAG_ERROR_PARSE);
  if (!g_str_has_prefix (error->message, prefix) || strstr (error->message, what) == NULL)
    g_test_fail_printf ("message \"%s\" does not start with \"%s\" or lacks \"%s\"", error->message,
                        prefix, what);
}

/* A bag holding two tasks from an earlier file, to check a failed load
 * leaves it as it was. */
static DatcBag *
bag_with_two_tasks (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;

  datc_bag_load_data (bag, "first.txt", "echo 1\necho 2\n", 14, DATC_TASKFILE_AUTO, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (datc_bag_count (bag), ==, 2);
  return g_steal_pointer (&bag);
}

static void
assert_bag_unchanged (DatcBag *bag, gsize memory)
{
  g_assert_cmpuint (datc_bag_count (bag), ==, 2);
  g_assert_cmpuint (datc_bag_memory_size (bag), ==, memory);
  assert_line_task (bag, 1, "echo 1", 1);
  assert_line_task (bag, 2, "echo 2", 2);
}

/* ---- format ---- */

static void
test_format_parses_names (void)
{
  DatcTaskFileFormat format = DATC_TASKFILE_LINES;

  g_assert_true (datc_task_file_format_parse ("auto", &format));
  g_assert_cmpint (format, ==, DATC_TASKFILE_AUTO);
  g_assert_true (datc_task_file_format_parse ("lines", &format));
  g_assert_cmpint (format, ==, DATC_TASKFILE_LINES);
  g_assert_true (datc_task_file_format_parse ("jsonl", &format));
  g_assert_cmpint (format, ==, DATC_TASKFILE_JSONL);
  g_assert_false (datc_task_file_format_parse ("json", &format));
  g_assert_false (datc_task_file_format_parse ("JSONL", &format));
  g_assert_false (datc_task_file_format_parse ("", &format));
  g_assert_false (datc_task_file_format_parse (NULL, &format));
  g_assert_cmpint (format, ==, DATC_TASKFILE_JSONL);
}

static void
test_format_follows_extension (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  const char *line = "{\"sh\": \"true\"}";
  const char *names[] = { "a.jsonl", "b.ndjson", "C.JSONL", "d.txt", "e", "f.jsonl.txt" };
  const DatcBagSpecKind kinds[]
      = { DATC_BAG_SPEC_PACKED, DATC_BAG_SPEC_PACKED, DATC_BAG_SPEC_PACKED,
          DATC_BAG_SPEC_LINE,   DATC_BAG_SPEC_LINE,   DATC_BAG_SPEC_LINE };

  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      datc_bag_load_data (bag, names[i], line, strlen (line), DATC_TASKFILE_AUTO, &error);
      g_assert_no_error (error);
      g_assert_cmpint (datc_bag_get (bag, i + 1)->kind, ==, kinds[i]);
    }
  /* An explicit format wins over the extension. */
  datc_bag_load_data (bag, "g.jsonl", line, strlen (line), DATC_TASKFILE_LINES, &error);
  g_assert_no_error (error);
  assert_line_task (bag, 7, line, 1);
  datc_bag_load_data (bag, "h.txt", line, strlen (line), DATC_TASKFILE_JSONL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (datc_bag_get (bag, 8)->kind, ==, DATC_BAG_SPEC_PACKED);
}

/* ---- plain lines ---- */

static void
test_lines_skips_comments_and_blank_lines (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  const char *data
      = "# a comment\n\n   \n\t# an indented comment\necho a\n \t\necho b # not a comment\n#\n";

  datc_bag_load_data (bag, "t.txt", data, strlen (data), DATC_TASKFILE_AUTO, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (datc_bag_count (bag), ==, 2);
  assert_line_task (bag, 1, "echo a", 5);
  assert_line_task (bag, 2, "echo b # not a comment", 7);
  g_assert_cmpuint (task_source (bag, 1), ==, 0);
  g_assert_cmpstr (datc_bag_source (bag, 0), ==, "t.txt");
}

static void
test_lines_trims_blanks (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  const char *data = " \t echo  a \t\r\n\r\r echo b\r\r\n\vecho c\f\n";

  datc_bag_load_data (bag, "t.txt", data, strlen (data), DATC_TASKFILE_AUTO, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (datc_bag_count (bag), ==, 3);
  assert_line_task (bag, 1, "echo  a", 1);
  assert_line_task (bag, 2, "echo b", 2);
  /* Only space, tab and CR are blanks. */
  assert_line_task (bag, 3, "\vecho c\f", 3);
}

static void
test_lines_accepts_crlf (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  const char *data = "echo a\r\n\r\n# c\r\necho b\r\n";

  datc_bag_load_data (bag, "t.txt", data, strlen (data), DATC_TASKFILE_AUTO, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (datc_bag_count (bag), ==, 2);
  assert_line_task (bag, 1, "echo a", 1);
  assert_line_task (bag, 2, "echo b", 4);
}

static void
test_lines_accepts_last_line_without_newline (Fixture *fx, gconstpointer data)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  g_autofree gchar *path = write_file (fx, "t.txt", "echo a\necho b", 13);

  datc_bag_load_data (bag, "t.txt", "echo a\necho b", 13, DATC_TASKFILE_AUTO, &error);
  g_assert_no_error (error);
  datc_bag_load_file (bag, path, DATC_TASKFILE_AUTO, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (datc_bag_count (bag), ==, 4);
  assert_line_task (bag, 2, "echo b", 2);
  assert_line_task (bag, 4, "echo b", 2);
}

static void
test_lines_strips_utf8_bom (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  const char *data = "\xef\xbb\xbf"
                     "echo a\n";

  datc_bag_load_data (bag, "t.txt", data, strlen (data), DATC_TASKFILE_AUTO, &error);
  g_assert_no_error (error);
  assert_line_task (bag, 1, "echo a", 1);
}

static void
test_lines_keeps_utf8_as_is (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  const char *data = "echo h\xc3\xa9llo \xe2\x98\x83 \xf0\x9f\x98\x80\n";
  g_autofree gchar *described = NULL;

  datc_bag_load_data (bag, "t.txt", data, strlen (data), DATC_TASKFILE_AUTO, &error);
  g_assert_no_error (error);
  assert_line_task (bag, 1, "echo h\xc3\xa9llo \xe2\x98\x83 \xf0\x9f\x98\x80", 1);
  described = datc_bag_describe (bag, 1);
  g_assert_cmpstr (described, ==, "echo h\xc3\xa9llo \xe2\x98\x83 \xf0\x9f\x98\x80");
}

/* ---- loading ---- */

/* Past 2 MiB the task records and the arena's chunks are mappings of
 * their own (hugemem.h), the records grown by moving pages: every task
 * stays as loaded through that growth, and through a load that grew them
 * further and was then refused (its last line too long). */
static void
test_load_big_bag_keeps_tasks_through_growth_and_rollback (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  const guint n = 200000; /* 6.4 MB of records, ~9 MB of arena: three chunks */
  g_autoptr (GString) text = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (text, "echo task number %u of the big bag\n", i);
  g_assert_true (
      datc_bag_load_data (bag, "big.txt", text->str, text->len, DATC_TASKFILE_LINES, &error));
  g_assert_no_error (error);
  gsize memory = datc_bag_memory_size (bag);

  g_autoptr (GString) more = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (more, "echo refused %u\n", i);
  for (gsize i = 0; i < DATC_TASK_LINE_MAX + 1; i++)
    g_string_append_c (more, 'y');
  g_assert_false (
      datc_bag_load_data (bag, "more.txt", more->str, more->len, DATC_TASKFILE_LINES, &error));
  g_assert_error (error, DATC_BAG_ERROR, DATC_BAG_ERROR_PARSE);

  g_assert_cmpuint (datc_bag_count (bag), ==, n);
  g_assert_cmpuint (datc_bag_memory_size (bag), ==, memory);
  for (guint i = 0; i < n; i++)
    {
      g_autofree gchar *want = g_strdup_printf ("echo task number %u of the big bag", i);
      assert_line_task (bag, i + 1, want, i + 1);
    }
}

static void
test_load_continues_ids_across_loads (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  const char *second = "\n{\"sh\":\"b1\"}\n{\"cmd\":[\"b2\"]}\n";

  datc_bag_load_data (bag, "a.txt", "a1\na2\n", 6, DATC_TASKFILE_AUTO, &error);
  g_assert_no_error (error);
  datc_bag_load_data (bag, "b.jsonl", second, strlen (second), DATC_TASKFILE_AUTO, &error);
  g_assert_no_error (error);
  datc_bag_load_data (bag, "c.txt", "c1", 2, DATC_TASKFILE_AUTO, &error);
  g_assert_no_error (error);

  g_assert_cmpuint (datc_bag_count (bag), ==, 5);
  assert_line_task (bag, 1, "a1", 1);
  assert_line_task (bag, 2, "a2", 2);
  g_assert_cmpuint (datc_bag_line (bag, 3, NULL), ==, 2);
  g_assert_cmpuint (datc_bag_line (bag, 4, NULL), ==, 3);
  assert_line_task (bag, 5, "c1", 1);
  for (guint64 id = 1; id <= 5; id++)
    {
      static const guint32 sources[] = { 0, 0, 1, 1, 2 };

      g_assert_cmpuint (task_source (bag, id), ==, sources[id - 1]);
    }
  g_assert_cmpstr (datc_bag_source (bag, 0), ==, "a.txt");
  g_assert_cmpstr (datc_bag_source (bag, 1), ==, "b.jsonl");
  g_assert_cmpstr (datc_bag_source (bag, 2), ==, "c.txt");
  {
    g_autofree gchar *b1 = datc_bag_describe (bag, 3);
    g_autofree gchar *b2 = datc_bag_describe (bag, 4);

    g_assert_cmpstr (b1, ==, "b1");
    g_assert_cmpstr (b2, ==, "b2");
  }
}

static void
test_load_hashes_the_file (Fixture *fx, gconstpointer data)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  const char *text = "# header\necho a\r\n\necho b";
  g_autofree gchar *path = write_file (fx, "t.txt", text, strlen (text));
  g_autofree gchar *expected
      = g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) text, strlen (text));
  g_autofree gchar *sha = NULL;

  datc_bag_load_file (bag, path, DATC_TASKFILE_AUTO, &sha, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (strlen (sha), ==, 64);
  g_assert_cmpstr (sha, ==, expected);
  g_assert_cmpstr (datc_bag_source (bag, 0), ==, path);
}

/* Lines of many lengths (some near the limit, CRLF and LF, comments),
 * several times the read buffer: the file path must give the same bag as
 * the in-memory path, and the hash must cover every byte. */
static void
test_load_streams_large_files (Fixture *fx, gconstpointer data)
{
  g_autoptr (DatcBag) from_file = datc_bag_new ();
  g_autoptr (DatcBag) from_data = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) text = g_string_new (NULL);
  g_autoptr (GRand) rand = g_rand_new_with_seed (42);
  g_autofree gchar *path = NULL;
  g_autofree gchar *expected = NULL;
  g_autofree gchar *sha = NULL;
  guint64 tasks = 0;

  while (text->len < 9 * MIB)
    {
      guint kind = (guint) g_rand_int_range (rand, 0, 100);
      gsize len = kind < 2 ? (gsize) g_rand_int_range (rand, 500000, DATC_TASK_LINE_MAX + 1)
                           : (gsize) g_rand_int_range (rand, 1, 200);

      if (kind == 2)
        {
          g_string_append (text, "# comment\n");
          continue;
        }
      g_string_append_c (text, 'x');
      for (gsize i = 1; i < len; i++)
        g_string_append_c (text, (char) ('a' + i % 26));
      g_string_append (text, kind % 2 ? "\r\n" : "\n");
      tasks++;
    }
  g_string_append (text, "last line");
  tasks++;

  path = write_file (fx, "big.txt", text->str, text->len);
  expected = g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) text->str, text->len);
  datc_bag_load_file (from_file, path, DATC_TASKFILE_AUTO, &sha, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (sha, ==, expected);
  datc_bag_load_data (from_data, "big.txt", text->str, text->len, DATC_TASKFILE_AUTO, &error);
  g_assert_no_error (error);

  g_assert_cmpuint (datc_bag_count (from_file), ==, tasks);
  g_assert_cmpuint (datc_bag_count (from_data), ==, tasks);
  for (guint64 id = 1; id <= tasks; id++)
    {
      const DatcBagTask *a = datc_bag_get (from_file, id);
      const DatcBagTask *b = datc_bag_get (from_data, id);

      g_assert_cmpuint (a->length, ==, b->length);
      g_assert_cmpuint (datc_bag_line (from_file, id, NULL), ==,
                        datc_bag_line (from_data, id, NULL));
      g_assert_true (memcmp (datc_bag_spec (from_file, a), datc_bag_spec (from_data, b), a->length)
                     == 0);
    }
  assert_line_task (from_file, tasks, "last line", datc_bag_line (from_file, tasks, NULL));
}

static void
test_load_accepts_line_at_limit (Fixture *fx, gconstpointer data)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) text = g_string_new ("echo first\n");
  g_autofree gchar *path = NULL;

  g_string_append_c (text, 'x');
  for (gsize i = 1; i < DATC_TASK_LINE_MAX; i++)
    g_string_append_c (text, 'y');
  g_string_append (text, "\r\n");
  g_string_append_c (text, 'z');
  for (gsize i = 1; i < DATC_TASK_LINE_MAX; i++)
    g_string_append_c (text, 'y');
  path = write_file (fx, "long.txt", text->str, text->len);

  datc_bag_load_file (bag, path, DATC_TASKFILE_AUTO, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (datc_bag_count (bag), ==, 3);
  g_assert_cmpuint (datc_bag_get (bag, 2)->length, ==, DATC_TASK_LINE_MAX);
  g_assert_cmpuint (datc_bag_get (bag, 3)->length, ==, DATC_TASK_LINE_MAX);
  g_assert_cmpint (datc_bag_spec (bag, datc_bag_get (bag, 3))[0], ==, 'z');
}

static void
assert_rejects_long_line (Fixture *fx, const char *tail)
{
  g_autoptr (DatcBag) bag = bag_with_two_tasks ();
  gsize memory = datc_bag_memory_size (bag);
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) text = g_string_new ("echo first\n");
  g_autofree gchar *path = NULL;

  for (gsize i = 0; i < DATC_TASK_LINE_MAX + 1; i++)
    g_string_append_c (text, 'y');
  g_string_append (text, tail);
  path = write_file (fx, "long.txt", text->str, text->len);

  datc_bag_load_file (bag, path, DATC_TASKFILE_AUTO, NULL, &error);
  assert_parse_error (error, path, 2, "line longer than 1048576 bytes");
  assert_bag_unchanged (bag, memory);

  g_clear_error (&error);
  datc_bag_load_data (bag, "long.txt", text->str, text->len, DATC_TASKFILE_AUTO, &error);
  assert_parse_error (error, "long.txt", 2, "line longer than 1048576 bytes");
  assert_bag_unchanged (bag, memory);
}

static void
test_parse_rejects_line_over_limit (Fixture *fx, gconstpointer data)
{
  assert_rejects_long_line (fx, "\r\necho third\n");
}

static void
test_parse_rejects_line_over_limit_at_end_of_file (Fixture *fx, gconstpointer data)
{
  assert_rejects_long_line (fx, "");
}

/* A line with no newline at all is refused once it is too long, without
 * reading the rest of the file into memory first. */
static void
test_parse_rejects_endless_line (Fixture *fx, gconstpointer data)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  gsize len = 64 * MIB;
  g_autofree gchar *text = g_malloc (len);
  g_autofree gchar *path = NULL;

  memset (text, 'y', len);
  path = write_file (fx, "endless.txt", text, len);
  datc_bag_load_file (bag, path, DATC_TASKFILE_AUTO, NULL, &error);
  assert_parse_error (error, path, 1, "line longer than 1048576 bytes");
  g_assert_cmpuint (datc_bag_count (bag), ==, 0);
}

static void
test_load_reports_missing_file (Fixture *fx, gconstpointer data)
{
  g_autoptr (DatcBag) bag = bag_with_two_tasks ();
  gsize memory = datc_bag_memory_size (bag);
  g_autoptr (GError) error = NULL;
  g_autofree gchar *path = g_build_filename (fx->dir, "missing.txt", NULL);
  g_autofree gchar *sha = NULL;

  g_assert_false (datc_bag_load_file (bag, path, DATC_TASKFILE_AUTO, &sha, &error));
  g_assert_error (error, DATC_BAG_ERROR, DATC_BAG_ERROR_IO);
  g_assert_true (g_str_has_prefix (error->message, path));
  g_assert_null (sha);
  assert_bag_unchanged (bag, memory);
}

static void
test_load_reports_unreadable_file (Fixture *fx, gconstpointer data)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;

  /* A directory opens but cannot be read. */
  g_assert_false (datc_bag_load_file (bag, fx->dir, DATC_TASKFILE_AUTO, NULL, &error));
  g_assert_error (error, DATC_BAG_ERROR, DATC_BAG_ERROR_IO);
  g_assert_true (g_str_has_prefix (error->message, fx->dir));
}

static void
assert_empty (Fixture *fx, const char *name, const char *text)
{
  g_autoptr (DatcBag) bag = bag_with_two_tasks ();
  gsize memory = datc_bag_memory_size (bag);
  g_autoptr (GError) error = NULL;
  g_autofree gchar *path = write_file (fx, name, text, strlen (text));
  g_autofree gchar *message = g_strdup_printf ("%s: no tasks", path);
  g_autofree gchar *sha = NULL;

  g_assert_false (datc_bag_load_file (bag, path, DATC_TASKFILE_AUTO, &sha, &error));
  g_assert_error (error, DATC_BAG_ERROR, DATC_BAG_ERROR_EMPTY);
  g_assert_cmpstr (error->message, ==, message);
  g_assert_null (sha);
  assert_bag_unchanged (bag, memory);

  g_clear_error (&error);
  g_assert_false (datc_bag_load_data (bag, name, text, strlen (text), DATC_TASKFILE_AUTO, &error));
  g_assert_error (error, DATC_BAG_ERROR, DATC_BAG_ERROR_EMPTY);
  g_clear_pointer (&message, g_free);
  message = g_strdup_printf ("%s: no tasks", name);
  g_assert_cmpstr (error->message, ==, message);
  assert_bag_unchanged (bag, memory);
}

static void
test_load_rejects_empty_file (Fixture *fx, gconstpointer data)
{
  assert_empty (fx, "empty.txt", "");
}

static void
test_load_rejects_file_of_comments (Fixture *fx, gconstpointer data)
{
  assert_empty (fx, "comments.txt", "# one\n\n  # two\r\n\t\n");
}

static void
test_load_rejects_jsonl_of_blank_lines (Fixture *fx, gconstpointer data)
{
  assert_empty (fx, "blank.jsonl", "\n  \n\r\n");
}

/* A bad line 5 of 10 leaves the bag as it was, and the next load carries
 * on from there: same ids, same source index, same arena. */
static void
test_load_is_all_or_nothing (Fixture *fx, gconstpointer data)
{
  g_autoptr (DatcBag) bag = bag_with_two_tasks ();
  gsize memory = datc_bag_memory_size (bag);
  g_autoptr (GError) error = NULL;
  const char *bad
      = "echo 1\necho 2\necho 3\necho 4\necho \xff\necho 6\necho 7\necho 8\necho 9\necho 10\n";
  const char *good = "echo good\n";
  g_autofree gchar *path = write_file (fx, "bad.txt", bad, strlen (bad));
  g_autofree gchar *sha = NULL;

  g_assert_false (datc_bag_load_file (bag, path, DATC_TASKFILE_AUTO, &sha, &error));
  assert_parse_error (error, path, 5, "invalid UTF-8");
  g_assert_null (sha);
  assert_bag_unchanged (bag, memory);

  g_clear_error (&error);
  g_assert_false (
      datc_bag_load_data (bag, "bad.txt", bad, strlen (bad), DATC_TASKFILE_AUTO, &error));
  assert_parse_error (error, "bad.txt", 5, "invalid UTF-8");
  assert_bag_unchanged (bag, memory);

  g_clear_error (&error);
  g_assert_true (
      datc_bag_load_data (bag, "good.txt", good, strlen (good), DATC_TASKFILE_AUTO, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (datc_bag_count (bag), ==, 3);
  assert_line_task (bag, 3, "echo good", 1);
  g_assert_cmpuint (task_source (bag, 3), ==, 1);
  g_assert_cmpstr (datc_bag_source (bag, 1), ==, "good.txt");
  g_assert_cmpuint (datc_bag_get (bag, 3)->offset, ==,
                    datc_bag_get (bag, 2)->offset + datc_bag_get (bag, 2)->length);
}

/* The same when the failed load had already filled several arena chunks. */
static void
test_load_is_all_or_nothing_for_big_files (Fixture *fx, gconstpointer data)
{
  g_autoptr (DatcBag) bag = bag_with_two_tasks ();
  gsize memory = datc_bag_memory_size (bag);
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) text = g_string_new (NULL);
  g_autofree gchar *path = NULL;
  guint lines = 0;

  while (text->len < 20 * MIB)
    {
      g_string_append_printf (text, "./run --item %u --with some padding to make it longer\n",
                              lines);
      lines++;
    }
  g_string_append (text, "{\"not\": \"a command\"}\n");
  g_string_append_len (text, "nul \0 here\n", 11);
  path = write_file (fx, "big.txt", text->str, text->len);

  g_assert_false (datc_bag_load_file (bag, path, DATC_TASKFILE_AUTO, NULL, &error));
  assert_parse_error (error, path, lines + 2, "NUL character at byte 5");
  assert_bag_unchanged (bag, memory);
}

/* ---- JSON Lines ---- */

static void
test_jsonl_reads_cmd (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (DatcMsg) msg = load_json_line (bag, "{\"cmd\": [\"ls\", \"-l\", \"\", \"a b\"]}");
  const DatcTaskSpec *spec = msg_spec (msg);
  const char *argv[] = { "ls", "-l", "", "a b", NULL };
  g_autofree gchar *described = datc_bag_describe (bag, 1);

  g_assert_cmpstrv (spec->argv, argv);
  g_assert_null (spec->sh);
  g_assert_null (spec->env);
  g_assert_null (spec->cwd);
  g_assert_cmpuint (spec->timeout_ms, ==, 0);
  g_assert_cmpuint (spec->est_runtime_ms, ==, 0);
  g_assert_cmpuint (datc_bag_get (bag, 1)->retries, ==, 0);
  g_assert_cmpuint (datc_bag_line (bag, 1, NULL), ==, 1);
  g_assert_cmpstr (described, ==, "ls -l  a b");
}

static void
test_jsonl_reads_sh (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (DatcMsg) msg = load_json_line (bag, "  {\"sh\": \"echo $HOME | wc -c\"}  \r");
  const DatcTaskSpec *spec = msg_spec (msg);
  g_autofree gchar *described = datc_bag_describe (bag, 1);

  g_assert_null (spec->argv);
  g_assert_cmpstr (spec->sh, ==, "echo $HOME | wc -c");
  g_assert_cmpstr (described, ==, "echo $HOME | wc -c");
}

static void
test_jsonl_reads_env (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (DatcMsg) msg
      = load_json_line (bag, "{\"sh\": \"env\", \"env\": {\"B\": \"x=y\", \"A\": \"\", "
                             "\"\xc3\xa9t\xc3\xa9\": \"\\u2603\"}}");
  const DatcTaskSpec *spec = msg_spec (msg);
  const char *env[] = { "B=x=y", "A=", "\xc3\xa9t\xc3\xa9=\xe2\x98\x83", NULL };
  g_autoptr (DatcMsg) empty = load_json_line (bag, "{\"sh\": \"env\", \"env\": {}}");

  g_assert_cmpstrv (spec->env, env);
  g_assert_true (msg_spec (empty)->env == NULL || msg_spec (empty)->env[0] == NULL);
}

static void
test_jsonl_reads_cwd (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (DatcMsg) msg
      = load_json_line (bag, "{\"cwd\": \"/scratch/run 1\", \"cmd\": [\"pwd\"]}");

  g_assert_cmpstr (msg_spec (msg)->cwd, ==, "/scratch/run 1");
}

static void
test_jsonl_reads_timeout_as_ms (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  struct {
    const char *value;
    guint32 ms;
  } cases[] = {
    { "1.5", 1500 },
    { "30", 30000 },
    { "0.0001", 1 },
    { "2e-3", 2 },
    { "4294967", 4294967000u },
    { "4294967.295", 4294967295u },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree gchar *line = g_strdup_printf ("{\"sh\": \"x\", \"timeout\": %s}", cases[i].value);
      g_autoptr (DatcMsg) msg = load_json_line (bag, line);

      g_assert_cmpuint (msg_spec (msg)->timeout_ms, ==, cases[i].ms);
    }
}

static void
test_jsonl_reads_retries (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  const char *data = "{\"sh\": \"a\", \"retries\": 3}\n{\"sh\": \"b\", \"retries\": 0}\n"
                     "{\"sh\": \"c\", \"retries\": 100}\n{\"sh\": \"d\"}\n";

  datc_bag_load_data (bag, "r.jsonl", data, strlen (data), DATC_TASKFILE_AUTO, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (datc_bag_get (bag, 1)->retries, ==, 3);
  g_assert_cmpuint (datc_bag_get (bag, 2)->retries, ==, 0);
  g_assert_cmpuint (datc_bag_get (bag, 3)->retries, ==, 100);
  g_assert_cmpuint (datc_bag_get (bag, 4)->retries, ==, 0);
}

static void
test_jsonl_reads_est_runtime_as_ms (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (DatcMsg) zero = load_json_line (bag, "{\"sh\": \"x\", \"est_runtime\": 0}");
  g_autoptr (DatcMsg) some = load_json_line (bag, "{\"sh\": \"x\", \"est_runtime\": 2.25}");
  g_autoptr (DatcMsg) hour = load_json_line (bag, "{\"sh\": \"x\", \"est_runtime\": 3600}");

  g_assert_cmpuint (msg_spec (zero)->est_runtime_ms, ==, 0);
  g_assert_cmpuint (msg_spec (some)->est_runtime_ms, ==, 2250);
  g_assert_cmpuint (msg_spec (hour)->est_runtime_ms, ==, 3600000);
  /* Kept beside the task too, for walltime fitting without decoding. */
  g_assert_cmpuint (datc_bag_get (bag, 1)->est_runtime_ms, ==, 0);
  g_assert_cmpuint (datc_bag_get (bag, 2)->est_runtime_ms, ==, 2250);
  g_assert_cmpuint (datc_bag_get (bag, 3)->est_runtime_ms, ==, 3600000);
}

static void
test_jsonl_reads_replicate (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  const char *data = "{\"sh\": \"x\", \"replicate\": false}\n{\"sh\": \"x\", \"replicate\": true}\n"
                     "{\"sh\": \"x\"}\n";

  datc_bag_load_data (bag, "r.jsonl", data, strlen (data), DATC_TASKFILE_AUTO, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (datc_bag_get (bag, 1)->no_replicate, ==, 1);
  g_assert_cmpuint (datc_bag_get (bag, 2)->no_replicate, ==, 0);
  g_assert_cmpuint (datc_bag_get (bag, 3)->no_replicate, ==, 0);
}

static void
test_jsonl_reads_every_field (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (DatcMsg) msg = load_json_line (
      bag, "{\"est_runtime\": 60, \"retries\": 2, \"timeout\": 120, \"cwd\": \"/tmp\", "
           "\"env\": {\"OMP_NUM_THREADS\": \"1\"}, \"cmd\": [\"./sim\", \"--seed\", \"7\"]}");
  const DatcTaskSpec *spec = msg_spec (msg);
  const char *argv[] = { "./sim", "--seed", "7", NULL };
  const char *env[] = { "OMP_NUM_THREADS=1", NULL };

  g_assert_cmpstrv (spec->argv, argv);
  g_assert_cmpstrv (spec->env, env);
  g_assert_cmpstr (spec->cwd, ==, "/tmp");
  g_assert_cmpuint (spec->timeout_ms, ==, 120000);
  g_assert_cmpuint (spec->est_runtime_ms, ==, 60000);
  g_assert_cmpuint (datc_bag_get (bag, 1)->retries, ==, 2);
  g_assert_cmpuint (datc_bag_get (bag, 1)->est_runtime_ms, ==, 60000);
}

static void
test_jsonl_reads_escapes (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (DatcMsg) msg = load_json_line (
      bag, "\xef\xbb\xbf{\"sh\": \"printf '%s\\\\n' \\\"\\u00e9\\ud83d\\ude00\\t\\/\\\"\"}");

  g_assert_cmpstr (msg_spec (msg)->sh, ==, "printf '%s\\n' \"\xc3\xa9\xf0\x9f\x98\x80\t/\"");
}

static void
test_jsonl_skips_blank_lines (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  const char *data = "\n  \r\n{\"sh\": \"a\"}\r\n\t\n{\"sh\": \"b\"}";

  datc_bag_load_data (bag, "b.jsonl", data, strlen (data), DATC_TASKFILE_AUTO, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (datc_bag_count (bag), ==, 2);
  g_assert_cmpuint (datc_bag_line (bag, 1, NULL), ==, 3);
  g_assert_cmpuint (datc_bag_line (bag, 2, NULL), ==, 5);
}

/* ---- bad lines, one test each ---- */

typedef struct {
  const char *path;
  const char *name;
  const char *line; /* becomes line 2, after a good one; may hold a NUL */
  gsize len;
  const char *what;
} BadLine;

#define BAD(path, name, line, what) { path, name, line, sizeof (line) - 1, what }

static const BadLine bad_lines[] = {
  /* any format */
  BAD ("/bag/parse/rejects-nul-byte", "t.txt", "echo a\0b", "NUL character at byte 7"),
  BAD ("/bag/parse/rejects-invalid-utf8", "t.txt", "echo \xc3(", "invalid UTF-8 at byte 6"),
  BAD ("/bag/parse/rejects-overlong-utf8", "t.txt", "echo \xc0\xaf", "invalid UTF-8 at byte 6"),
  BAD ("/bag/parse/rejects-nul-byte-in-json", "t.jsonl", "{\"sh\": \"a\0\"}",
       "NUL character at byte 10"),
  BAD ("/bag/parse/rejects-invalid-utf8-in-json", "t.jsonl", "{\"sh\": \"\xff\"}",
       "invalid UTF-8 at byte 9"),
  /* JSON syntax */
  BAD ("/bag/parse/rejects-unterminated-json", "t.jsonl", "{\"sh\": \"echo hi\"",
       "invalid JSON: expected ',' or '}', found end of line"),
  BAD ("/bag/parse/rejects-unterminated-string", "t.jsonl", "{\"sh\": \"echo hi}",
       "invalid JSON: unterminated string at byte 8"),
  BAD ("/bag/parse/rejects-unterminated-array", "t.jsonl", "{\"cmd\": [\"ls\"",
       "invalid JSON: expected ',' or ']', found end of line"),
  BAD ("/bag/parse/rejects-trailing-comma", "t.jsonl", "{\"sh\": \"x\",}",
       "invalid JSON: expected a string key at byte 12"),
  BAD ("/bag/parse/rejects-single-quotes", "t.jsonl", "{'sh': 'x'}",
       "invalid JSON: expected a string key at byte 2"),
  BAD ("/bag/parse/rejects-two-values-on-a-line", "t.jsonl", "{\"sh\": \"x\"} {\"sh\": \"y\"}",
       "invalid JSON: unexpected text after the value at byte 13"),
  BAD ("/bag/parse/rejects-javascript", "t.jsonl", "var t = {\"sh\": \"x\"};",
       "invalid JSON: unexpected character at byte 1"),
  BAD ("/bag/parse/rejects-comment-line-in-json", "t.jsonl", "# not in JSON Lines",
       "invalid JSON: unexpected character at byte 1"),
  BAD ("/bag/parse/rejects-bad-literal", "t.jsonl", "{\"sh\": tru}",
       "invalid JSON: unexpected character at byte 8"),
  BAD ("/bag/parse/rejects-bad-number", "t.jsonl", "{\"sh\": \"x\", \"timeout\": 01}",
       "invalid JSON: expected ',' or '}' at byte 25"),
  BAD ("/bag/parse/rejects-hex-number", "t.jsonl", "{\"sh\": \"x\", \"timeout\": 0x10}",
       "invalid JSON: expected ',' or '}' at byte 25"),
  BAD ("/bag/parse/rejects-huge-integer", "t.jsonl",
       "{\"sh\": \"x\", \"retries\": 99999999999999999999}",
       "invalid JSON: integer out of range at byte 24"),
  BAD ("/bag/parse/rejects-nul-escape", "t.jsonl", "{\"sh\": \"rm -rf /tmp/x\\u0000/y\"}",
       "invalid JSON: \\u0000 is not allowed at byte 22"),
  BAD ("/bag/parse/rejects-unpaired-surrogate", "t.jsonl", "{\"sh\": \"\\ud800x\"}",
       "invalid JSON: unpaired surrogate in \\u escape at byte 9"),
  BAD ("/bag/parse/rejects-bad-escape", "t.jsonl", "{\"sh\": \"\\x41\"}",
       "invalid JSON: invalid escape in string at byte 9"),
  BAD ("/bag/parse/rejects-raw-control-character", "t.jsonl", "{\"sh\": \"a\tb\"}",
       "invalid JSON: control character in string"),
  /* shape */
  BAD ("/bag/parse/rejects-array", "t.jsonl", "[\"ls\"]", "expected a JSON object, got an array"),
  BAD ("/bag/parse/rejects-string", "t.jsonl", "\"ls\"", "expected a JSON object, got a string"),
  BAD ("/bag/parse/rejects-null", "t.jsonl", "null", "expected a JSON object, got null"),
  BAD ("/bag/parse/rejects-unknown-field", "t.jsonl", "{\"sh\": \"x\", \"foo\": 1}",
       "unknown field \"foo\""),
  BAD ("/bag/parse/rejects-unknown-field-with-odd-name", "t.jsonl",
       "{\"sh\": \"x\", \"a\\\"\\n\": 1}", "unknown field \"a\\\"\\n\""),
  BAD ("/bag/parse/rejects-unknown-field-with-control-characters", "t.jsonl",
       "{\"sh\": \"x\", \"b\\u0001\\u007f\": 1}", "unknown field \"b\\u0001\\u007f\""),
  BAD ("/bag/parse/rejects-unknown-field-with-long-name-cut", "t.jsonl",
       "{\"sh\": \"x\", "
       "\"éxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\": 1}",
       "unknown field \"éxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...\""),
  BAD ("/bag/parse/rejects-misspelt-field", "t.jsonl", "{\"sh\": \"x\", \"timout\": 1}",
       "unknown field \"timout\""),
  BAD ("/bag/parse/rejects-duplicate-field", "t.jsonl", "{\"sh\": \"x\", \"sh\": \"y\"}",
       "duplicate field \"sh\""),
  BAD ("/bag/parse/rejects-duplicate-env-variable", "t.jsonl",
       "{\"sh\": \"x\", \"env\": {\"A\": \"1\", \"A\": \"2\"}}",
       "field \"env\": duplicate variable \"A\""),
  BAD ("/bag/parse/rejects-both-cmd-and-sh", "t.jsonl", "{\"sh\": \"ls\", \"cmd\": [\"ls\"]}",
       "both \"cmd\" and \"sh\" given"),
  BAD ("/bag/parse/rejects-neither-cmd-nor-sh", "t.jsonl", "{\"cwd\": \"/tmp\"}",
       "neither \"cmd\" nor \"sh\" given"),
  BAD ("/bag/parse/rejects-empty-object", "t.jsonl", "{}", "neither \"cmd\" nor \"sh\" given"),
  /* cmd */
  BAD ("/bag/parse/rejects-empty-argv", "t.jsonl", "{\"cmd\": []}",
       "field \"cmd\": must not be empty"),
  BAD ("/bag/parse/rejects-empty-program", "t.jsonl", "{\"cmd\": [\"\", \"x\"]}",
       "field \"cmd\": the program (element 0) is empty"),
  BAD ("/bag/parse/rejects-cmd-string", "t.jsonl", "{\"cmd\": \"ls -l\"}",
       "field \"cmd\": expected an array of strings, got a string"),
  BAD ("/bag/parse/rejects-cmd-number-argument", "t.jsonl", "{\"cmd\": [\"sleep\", 1]}",
       "field \"cmd\": expected an array of strings, element 1 is a number"),
  BAD ("/bag/parse/rejects-cmd-null-argument", "t.jsonl", "{\"cmd\": [\"ls\", null]}",
       "field \"cmd\": expected an array of strings, element 1 is null"),
  /* sh, cwd */
  BAD ("/bag/parse/rejects-sh-array", "t.jsonl", "{\"sh\": [\"ls\"]}",
       "field \"sh\": expected a string, got an array"),
  BAD ("/bag/parse/rejects-empty-sh", "t.jsonl", "{\"sh\": \"\"}",
       "field \"sh\": must not be empty"),
  BAD ("/bag/parse/rejects-cwd-number", "t.jsonl", "{\"sh\": \"x\", \"cwd\": 1}",
       "field \"cwd\": expected a string, got a number"),
  BAD ("/bag/parse/rejects-cwd-null", "t.jsonl", "{\"sh\": \"x\", \"cwd\": null}",
       "field \"cwd\": expected a string, got null"),
  BAD ("/bag/parse/rejects-empty-cwd", "t.jsonl", "{\"sh\": \"x\", \"cwd\": \"\"}",
       "field \"cwd\": must not be empty"),
  /* env */
  BAD ("/bag/parse/rejects-env-array", "t.jsonl", "{\"sh\": \"x\", \"env\": [\"A=1\"]}",
       "field \"env\": expected an object of strings, got an array"),
  BAD ("/bag/parse/rejects-env-number-value", "t.jsonl", "{\"sh\": \"x\", \"env\": {\"N\": 1}}",
       "field \"env\": expected an object of strings, \"N\" is a number"),
  BAD ("/bag/parse/rejects-env-empty-name", "t.jsonl", "{\"sh\": \"x\", \"env\": {\"\": \"1\"}}",
       "field \"env\": empty variable name"),
  BAD ("/bag/parse/rejects-env-name-with-equals", "t.jsonl",
       "{\"sh\": \"x\", \"env\": {\"A=B\": \"1\"}}",
       "field \"env\": variable name \"A=B\" contains '='"),
  /* timeout */
  BAD ("/bag/parse/rejects-timeout-string", "t.jsonl", "{\"sh\": \"x\", \"timeout\": \"10\"}",
       "field \"timeout\": expected a number, got a string"),
  BAD ("/bag/parse/rejects-timeout-boolean", "t.jsonl", "{\"sh\": \"x\", \"timeout\": true}",
       "field \"timeout\": expected a number, got a boolean"),
  BAD ("/bag/parse/rejects-zero-timeout", "t.jsonl", "{\"sh\": \"x\", \"timeout\": 0}",
       "field \"timeout\": must be greater than 0"),
  BAD ("/bag/parse/rejects-negative-timeout", "t.jsonl", "{\"sh\": \"x\", \"timeout\": -1.5}",
       "field \"timeout\": must be greater than 0"),
  BAD ("/bag/parse/rejects-timeout-too-long", "t.jsonl", "{\"sh\": \"x\", \"timeout\": 4294968}",
       "field \"timeout\": must be at most 4294967 seconds"),
  BAD ("/bag/parse/rejects-infinite-timeout", "t.jsonl", "{\"sh\": \"x\", \"timeout\": 1e400}",
       "field \"timeout\": must be at most 4294967 seconds"),
  /* retries */
  BAD ("/bag/parse/rejects-retries-string", "t.jsonl", "{\"sh\": \"x\", \"retries\": \"3\"}",
       "field \"retries\": expected an integer, got a string"),
  BAD ("/bag/parse/rejects-fractional-retries", "t.jsonl", "{\"sh\": \"x\", \"retries\": 1.5}",
       "field \"retries\": expected an integer, got a number"),
  BAD ("/bag/parse/rejects-negative-retries", "t.jsonl", "{\"sh\": \"x\", \"retries\": -1}",
       "field \"retries\": must be between 0 and 100"),
  BAD ("/bag/parse/rejects-too-many-retries", "t.jsonl", "{\"sh\": \"x\", \"retries\": 101}",
       "field \"retries\": must be between 0 and 100"),
  /* replicate */
  BAD ("/bag/parse/rejects-replicate-string", "t.jsonl", "{\"sh\": \"x\", \"replicate\": \"no\"}",
       "field \"replicate\": expected true or false, got a string"),
  BAD ("/bag/parse/rejects-replicate-number", "t.jsonl", "{\"sh\": \"x\", \"replicate\": 0}",
       "field \"replicate\": expected true or false, got a number"),
  /* est_runtime */
  BAD ("/bag/parse/rejects-est-runtime-string", "t.jsonl",
       "{\"sh\": \"x\", \"est_runtime\": \"1h\"}",
       "field \"est_runtime\": expected a number, got a string"),
  BAD ("/bag/parse/rejects-negative-est-runtime", "t.jsonl", "{\"sh\": \"x\", \"est_runtime\": -1}",
       "field \"est_runtime\": must not be negative"),
  BAD ("/bag/parse/rejects-est-runtime-too-long", "t.jsonl",
       "{\"sh\": \"x\", \"est_runtime\": 5e6}",
       "field \"est_runtime\": must be at most 4294967 seconds"),
};

static void
test_parse_rejects (gconstpointer data)
{
  const BadLine *bad = data;
  g_autoptr (DatcBag) bag = bag_with_two_tasks ();
  gsize memory = datc_bag_memory_size (bag);
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) text = g_string_new (NULL);
  g_string_append (text,
                   g_str_has_suffix (bad->name, ".jsonl") ? "{\"sh\": \"ok\"}\n" : "echo ok\n");
  g_string_append_len (text, bad->line, (gssize) bad->len);
  g_string_append (text, "\n");
  g_string_append (text,
                   g_str_has_suffix (bad->name, ".jsonl") ? "{\"sh\": \"ok\"}\n" : "echo ok\n");

  g_assert_false (
      datc_bag_load_data (bag, bad->name, text->str, text->len, DATC_TASKFILE_AUTO, &error));
  assert_parse_error (error, bad->name, 2, bad->what);
  assert_bag_unchanged (bag, memory);
}

static void
test_parse_rejects_deep_nesting (void)
{
  g_autoptr (DatcBag) bag = bag_with_two_tasks ();
  gsize memory = datc_bag_memory_size (bag);
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) text = g_string_new ("{\"sh\": \"x\", \"cmd\": ");

  /* Deep enough to overflow the stack of a recursive parser. */
  for (guint i = 0; i < 1000000; i++)
    g_string_append_c (text, '[');
  g_assert_false (
      datc_bag_load_data (bag, "deep.jsonl", text->str, text->len, DATC_TASKFILE_AUTO, &error));
  assert_parse_error (error, "deep.jsonl", 1,
                      "invalid JSON: nested more than 32 levels deep at byte 51");
  assert_bag_unchanged (bag, memory);
}

static void
test_parse_rejects_too_many_arguments (void)
{
  g_autoptr (DatcBag) bag = bag_with_two_tasks ();
  gsize memory = datc_bag_memory_size (bag);
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) text = g_string_new ("{\"cmd\": [\"echo\"");

  for (guint i = 0; i < DATC_ARGV_MAX; i++)
    g_string_append (text, ", \"a\"");
  g_string_append (text, "]}");
  g_assert_false (
      datc_bag_load_data (bag, "argv.jsonl", text->str, text->len, DATC_TASKFILE_AUTO, &error));
  assert_parse_error (error, "argv.jsonl", 1, "field \"cmd\": more than 4096 arguments");
  assert_bag_unchanged (bag, memory);
}

static void
test_parse_rejects_too_many_variables (void)
{
  g_autoptr (DatcBag) bag = bag_with_two_tasks ();
  gsize memory = datc_bag_memory_size (bag);
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) text = g_string_new ("{\"sh\": \"env\", \"env\": {\"V\": \"\"");

  for (guint i = 0; i < DATC_ENV_MAX; i++)
    g_string_append_printf (text, ", \"V%u\": \"\"", i);
  g_string_append (text, "}}");
  g_assert_false (
      datc_bag_load_data (bag, "env.jsonl", text->str, text->len, DATC_TASKFILE_AUTO, &error));
  assert_parse_error (error, "env.jsonl", 1, "field \"env\": more than 4096 variables");
  assert_bag_unchanged (bag, memory);
}

/* ---- memory ---- */

/* Where each task came from, through files that skip blank lines and
 * comments at random, and a refused load between them whose tasks had
 * lines of their own. */
static void
test_load_tells_each_task_its_line (void)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) lines = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autoptr (GArray) sources = g_array_new (FALSE, FALSE, sizeof (guint32));
  GRand *rand = g_rand_new_with_seed (17);
  guint32 source = 0;

  for (guint file = 0; file < 4; file++)
    {
      g_autoptr (GString) text = g_string_new (NULL);
      g_autofree gchar *name = g_strdup_printf ("f%u.txt", file);
      gboolean refused = file == 2;
      guint32 line = 0;

      for (guint i = 0; i < 3000; i++)
        {
          line++;
          switch (g_rand_int_range (rand, 0, file == 0 ? 1 : 4))
            {
            case 1:
              g_string_append (text, "\n");
              continue;
            case 2:
              g_string_append (text, "# a comment\n");
              continue;
            default:
              g_string_append_printf (text, "task %u %u\n", file, i);
              if (!refused)
                {
                  g_array_append_val (lines, line);
                  g_array_append_val (sources, source);
                }
            }
        }
      if (refused)
        g_string_append (text, "echo \xff\n");
      g_assert_cmpint (
          datc_bag_load_data (bag, name, text->str, text->len, DATC_TASKFILE_AUTO, &error), ==,
          !refused);
      if (refused)
        {
          g_assert_error (error, DATC_BAG_ERROR, DATC_BAG_ERROR_PARSE);
          g_clear_error (&error);
        }
      else
        source++;
    }

  g_assert_cmpuint (datc_bag_count (bag), ==, lines->len);
  for (guint64 id = 1; id <= lines->len; id++)
    {
      g_assert_cmpuint (datc_bag_line (bag, id, NULL), ==, g_array_index (lines, guint32, id - 1));
      g_assert_cmpuint (task_source (bag, id), ==, g_array_index (sources, guint32, id - 1));
    }
  g_assert_cmpstr (datc_bag_source (bag, 2), ==, "f3.txt");
  g_rand_free (rand);
}

/* A million ~40-byte commands must fit in well under 100 MiB.  This is a
 * size check, not a benchmark: the time is reported, never asserted. */
static void
test_memory_holds_a_million_tasks (Fixture *fx, gconstpointer data)
{
  const guint n = 1000000;
  g_autoptr (DatcBag) bag = datc_bag_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) text = g_string_sized_new ((gsize) n * 42);
  g_autofree gchar *path = NULL;
  g_autofree gchar *sha = NULL;
  g_autofree gchar *expected = NULL;
  gsize bytes = 0, memory;
  gint64 start;

  for (guint i = 1; i <= n; i++)
    g_string_append_printf (text, "./process --input item-%07u.dat --fast\n", i);
  path = write_file (fx, "million.txt", text->str, text->len);

  start = g_get_monotonic_time ();
  datc_bag_load_file (bag, path, DATC_TASKFILE_AUTO, &sha, &error);
  g_test_message ("loaded %u lines (%" G_GSIZE_FORMAT " bytes) in %.3f s", n, text->len,
                  (double) (g_get_monotonic_time () - start) / G_USEC_PER_SEC);
  g_assert_no_error (error);
  expected = g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) text->str, text->len);
  g_assert_cmpstr (sha, ==, expected);

  g_assert_cmpuint (datc_bag_count (bag), ==, n);
  assert_line_task (bag, 1, "./process --input item-0000001.dat --fast", 1);
  assert_line_task (bag, n, "./process --input item-1000000.dat --fast", n);
  for (guint64 id = 1; id <= n; id++)
    bytes += datc_bag_get (bag, id)->length;
  memory = datc_bag_memory_size (bag);
  g_test_message ("memory: %" G_GSIZE_FORMAT " bytes (%.1f MiB) for %" G_GSIZE_FORMAT
                  " bytes of commands",
                  memory, (double) memory / MIB, bytes);
  g_assert_cmpuint (memory, >=, n * sizeof (DatcBagTask) + bytes);
  g_assert_cmpuint (memory, <, 100 * MIB);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/bag/format/parses-names", test_format_parses_names);
  g_test_add_func ("/bag/format/follows-the-extension", test_format_follows_extension);

  g_test_add_func ("/bag/lines/skips-comments-and-blank-lines",
                   test_lines_skips_comments_and_blank_lines);
  g_test_add_func ("/bag/lines/trims-blanks", test_lines_trims_blanks);
  g_test_add_func ("/bag/lines/accepts-crlf", test_lines_accepts_crlf);
  g_test_add ("/bag/lines/accepts-last-line-without-newline", Fixture, NULL, fixture_set_up,
              test_lines_accepts_last_line_without_newline, fixture_tear_down);
  g_test_add_func ("/bag/lines/strips-utf8-bom", test_lines_strips_utf8_bom);
  g_test_add_func ("/bag/lines/keeps-utf8-as-is", test_lines_keeps_utf8_as_is);

  g_test_add_func ("/bag/load/continues-ids-across-loads", test_load_continues_ids_across_loads);
  g_test_add_func ("/bag/load/tells-each-task-its-line", test_load_tells_each_task_its_line);
  g_test_add_func ("/bag/load/a-big-bag-keeps-its-tasks-through-growth-and-a-refused-load",
                   test_load_big_bag_keeps_tasks_through_growth_and_rollback);
  g_test_add ("/bag/load/hashes-the-file", Fixture, NULL, fixture_set_up, test_load_hashes_the_file,
              fixture_tear_down);
  g_test_add ("/bag/load/streams-large-files", Fixture, NULL, fixture_set_up,
              test_load_streams_large_files, fixture_tear_down);
  g_test_add ("/bag/load/accepts-line-at-limit", Fixture, NULL, fixture_set_up,
              test_load_accepts_line_at_limit, fixture_tear_down);
  g_test_add ("/bag/load/reports-missing-file", Fixture, NULL, fixture_set_up,
              test_load_reports_missing_file, fixture_tear_down);
  g_test_add ("/bag/load/reports-unreadable-file", Fixture, NULL, fixture_set_up,
              test_load_reports_unreadable_file, fixture_tear_down);
  g_test_add ("/bag/load/rejects-empty-file", Fixture, NULL, fixture_set_up,
              test_load_rejects_empty_file, fixture_tear_down);
  g_test_add ("/bag/load/rejects-file-of-comments", Fixture, NULL, fixture_set_up,
              test_load_rejects_file_of_comments, fixture_tear_down);
  g_test_add ("/bag/load/rejects-jsonl-of-blank-lines", Fixture, NULL, fixture_set_up,
              test_load_rejects_jsonl_of_blank_lines, fixture_tear_down);
  g_test_add ("/bag/load/is-all-or-nothing", Fixture, NULL, fixture_set_up,
              test_load_is_all_or_nothing, fixture_tear_down);
  g_test_add ("/bag/load/is-all-or-nothing-for-big-files", Fixture, NULL, fixture_set_up,
              test_load_is_all_or_nothing_for_big_files, fixture_tear_down);

  g_test_add_func ("/bag/jsonl/reads-cmd", test_jsonl_reads_cmd);
  g_test_add_func ("/bag/jsonl/reads-sh", test_jsonl_reads_sh);
  g_test_add_func ("/bag/jsonl/reads-env", test_jsonl_reads_env);
  g_test_add_func ("/bag/jsonl/reads-cwd", test_jsonl_reads_cwd);
  g_test_add_func ("/bag/jsonl/reads-timeout-as-ms", test_jsonl_reads_timeout_as_ms);
  g_test_add_func ("/bag/jsonl/reads-retries", test_jsonl_reads_retries);
  g_test_add_func ("/bag/jsonl/reads-est-runtime-as-ms", test_jsonl_reads_est_runtime_as_ms);
  g_test_add_func ("/bag/jsonl/reads-replicate", test_jsonl_reads_replicate);
  g_test_add_func ("/bag/jsonl/reads-every-field", test_jsonl_reads_every_field);
  g_test_add_func ("/bag/jsonl/reads-escapes", test_jsonl_reads_escapes);
  g_test_add_func ("/bag/jsonl/skips-blank-lines", test_jsonl_skips_blank_lines);

  for (guint i = 0; i < G_N_ELEMENTS (bad_lines); i++)
    g_test_add_data_func (bad_lines[i].path, &bad_lines[i], test_parse_rejects);
  g_test_add ("/bag/parse/rejects-line-over-limit", Fixture, NULL, fixture_set_up,
              test_parse_rejects_line_over_limit, fixture_tear_down);
  g_test_add ("/bag/parse/rejects-line-over-limit-at-end-of-file", Fixture, NULL, fixture_set_up,
              test_parse_rejects_line_over_limit_at_end_of_file, fixture_tear_down);
  g_test_add ("/bag/parse/rejects-endless-line", Fixture, NULL, fixture_set_up,
              test_parse_rejects_endless_line, fixture_tear_down);
  g_test_add_func ("/bag/parse/rejects-deep-nesting", test_parse_rejects_deep_nesting);
  g_test_add_func ("/bag/parse/rejects-too-many-arguments", test_parse_rejects_too_many_arguments);
  g_test_add_func ("/bag/parse/rejects-too-many-variables", test_parse_rejects_too_many_variables);

  g_test_add ("/bag/memory/holds-a-million-tasks-in-under-100-mib", Fixture, NULL, fixture_set_up,
              test_memory_holds_a_million_tasks, fixture_tear_down);

  return g_test_run ();
}
