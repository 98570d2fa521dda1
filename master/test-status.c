/* test-status.c: the text forms of a status object (status.c): what the
 * progress line and `datc status` say of proxies waiting in a scheduler's
 * queue; the journal's size and last compaction. */
#include "status.h"

#include <string.h>

/* A live status with no task running and, on site slurm, 3 proxies the
 * scheduler keeps pending (2 for Resources, 1 for Priority); site sge has
 * one it gives no reason for; site local has none. */
static const char *const waiting_status
    = "{\"dir\": \"c\", \"master\": {\"running\": true, \"open\": false},"
      " \"tasks\": {\"total\": 10, \"queued\": 10, \"running\": %d, \"prefetched\": 0,"
      "  \"done\": 0, \"failed\": 0, \"cancelled\": 0},"
      " \"mode\": \"pull\","
      " \"sites\": [{\"name\": \"slurm\", \"state\": \"ok\", \"proxies_pending\": 3,"
      "   \"proxies_queued\": 3, \"pending_reasons\": {\"Priority\": 1, \"Resources\": 2}, "
      "\"commands_by_kind\": {}},"
      "  {\"name\": \"sge\", \"state\": \"ok\", \"proxies_pending\": 1, \"proxies_queued\": 1,"
      "   \"pending_reasons\": {}, \"commands_by_kind\": {}},"
      "  {\"name\": \"local\", \"state\": \"ok\", \"proxies_queued\": 0, \"commands_by_kind\": "
      "{}}],"
      " \"agents\": [], \"rate_per_s\": 0.0, \"eta_s\": null}";

static JsonNode *
parse (int running)
{
  g_autofree gchar *text = g_strdup_printf (waiting_status, running);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (json_parser_load_from_data (parser, text, -1, &error));
  g_assert_no_error (error);
  return json_node_copy (json_parser_get_root (parser));
}

static gchar *
printed (JsonObject *st)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&buf, &len);
  datc_status_print (st, f);
  fclose (f);
  gchar *out = g_strndup (buf, len);
  free (buf);
  return out;
}

static void
test_progress_line_says_what_waits_in_a_queue (void)
{
  g_autoptr (JsonNode) idle = parse (0);
  g_autofree gchar *line = datc_status_line (json_node_get_object (idle));
  g_test_message ("%s", line);
  g_assert_true (
      g_str_has_suffix (line, " | waiting in queue: slurm 3 (Resources, +1 more), sge 1"));

  /* Tasks run: the line is about them. */
  g_autoptr (JsonNode) busy = parse (2);
  g_autofree gchar *busy_line = datc_status_line (json_node_get_object (busy));
  g_assert_null (strstr (busy_line, "waiting"));
}

static void
test_status_names_each_sites_pending_reasons (void)
{
  g_autoptr (JsonNode) st = parse (2);
  g_autofree gchar *out = printed (json_node_get_object (st));
  g_test_message ("%s", out);
  g_assert_nonnull (strstr (out, "\nsite slurm: 3 proxies pending: Resources (2), Priority (1)\n"));
  g_assert_nonnull (strstr (out, "\nsite sge: 1 proxy pending\n"));
  g_assert_null (strstr (out, "site local:"));
}

/* The journal's line: its size, and its last compaction when there was
 * one (the time in local time, with its offset from UTC: a live status
 * is rendered in the master's time zone). */
static void
test_status_says_journal_size_and_last_compaction (void)
{
  g_autoptr (GDateTime) t = g_date_time_new_local (2026, 11, 24, 17, 55, 4);
  g_autofree gchar *with = g_strdup_printf (
      "{\"dir\": \"c\", \"master\": {\"running\": false}, \"tasks\": {}, \"sites\": [], "
      "\"agents\": [],"
      " \"journal\": {\"bytes\": 12300000, \"compacting\": true, \"last_compaction\":"
      " {\"time\": %" G_GINT64_FORMAT ", \"bytes_before\": 60100000, \"bytes_after\": 9800000}}}",
      g_date_time_to_unix (t));
  const char *never
      = "{\"dir\": \"c\", \"master\": {\"running\": false}, \"tasks\": {}, \"sites\": [], "
        "\"agents\": [],"
        " \"journal\": {\"bytes\": 2048, \"compacting\": false, \"last_compaction\": null}}";
  g_autoptr (JsonParser) parser = json_parser_new ();

  g_assert_true (json_parser_load_from_data (parser, with, -1, NULL));
  g_autofree gchar *out = printed (json_node_get_object (json_parser_get_root (parser)));
  g_test_message ("%s", out);
  g_autofree gchar *offset = g_date_time_format (t, "%z");
  g_autofree gchar *line = g_strdup_printf ("\njournal  12300000 bytes, last compacted 2026-11-24 "
                                            "17:55:04 %s (60100000 -> 9800000 bytes), compacting "
                                            "now\n",
                                            offset);
  g_assert_nonnull (strstr (out, line));
  g_assert_true (json_parser_load_from_data (parser, never, -1, NULL));
  g_autofree gchar *out2 = printed (json_node_get_object (json_parser_get_root (parser)));
  g_assert_nonnull (strstr (out2, "\njournal  2048 bytes, never compacted\n"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/status/progress-line-says-what-waits-in-a-queue",
                   test_progress_line_says_what_waits_in_a_queue);
  g_test_add_func ("/status/text-names-each-sites-pending-reasons",
                   test_status_names_each_sites_pending_reasons);
  g_test_add_func ("/status/text-says-journal-size-and-last-compaction",
                   test_status_says_journal_size_and_last_compaction);
  return g_test_run ();
}
