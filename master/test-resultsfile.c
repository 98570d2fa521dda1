/* test-resultsfile.c: results.jsonl's writer: the exact line for a result
 * (strings escaped: quotes, newlines, control bytes, UTF-8 kept), lines
 * held until written, the filter that keeps one line per task after a
 * retry, and the rename into place. */
#include <glib.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "resultsfile.h"

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

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/resultsfile/a-line-is-exact-escaped-json", test_line_is_exact_json);
  g_test_add_func ("/resultsfile/the-filter-keeps-one-line-per-task",
                   test_filter_keeps_one_line_per_task);
  return g_test_run ();
}
