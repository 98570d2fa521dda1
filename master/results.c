/* results.c: read back results.jsonl and the per-agent output files.  The
 * master writes every line as {"id":N,... first, so finding one task is a
 * prefix match per line and only that line is parsed as JSON. */
#include "results.h"

#include <errno.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "ledger.h"

static FILE *
open_results (const char *dir)
{
  g_autofree gchar *path = g_build_filename (dir, "results.jsonl", NULL);
  FILE *f = fopen (path, "re");
  if (f == NULL)
    g_printerr ("datc: %s: %s\n", path, g_strerror (errno));
  return f;
}

static gboolean
copy_range (const char *path, guint64 off, guint64 len)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    {
      g_printerr ("datc: %s: %s\n", path, g_strerror (errno));
      return FALSE;
    }
  char buf[65536];
  while (len > 0)
    {
      ssize_t n = pread (fd, buf, MIN (len, sizeof buf), (off_t) off);
      if (n <= 0)
        {
          g_printerr ("datc: %s: output ends early (%s)\n", path,
                      n < 0 ? g_strerror (errno) : "truncated");
          close (fd);
          return FALSE;
        }
      if (fwrite (buf, 1, (size_t) n, stdout) != (size_t) n)
        break;
      off += (guint64) n;
      len -= (guint64) n;
    }
  close (fd);
  return TRUE;
}

/* An id beyond the campaign is a typo, not a task still to come: say which
 * (the count is the master's, or the journal's when none runs). */
static void
say_no_result (const char *dir, guint64 id)
{
  g_autoptr (JsonNode) st = datc_cmd_fetch_status (dir, 0, NULL);
  JsonNode *tasks = st && JSON_NODE_HOLDS_OBJECT (st)
                        ? json_object_get_member (json_node_get_object (st), "tasks")
                        : NULL;
  gint64 total
      = tasks && JSON_NODE_HOLDS_OBJECT (tasks)
            ? json_object_get_int_member_with_default (json_node_get_object (tasks), "total", -1)
            : -1;
  if (total >= 0 && id > (guint64) total)
    g_printerr ("datc: no task %" G_GUINT64_FORMAT ": the campaign has %" G_GINT64_FORMAT
                " task%s\n",
                id, total, total == 1 ? "" : "s");
  else
    g_printerr ("datc: task %" G_GUINT64_FORMAT " has no result in %s\n", id, dir);
}

int
datc_results_print_output (const char *dir, guint64 id, gboolean want_stderr)
{
  FILE *f = open_results (dir);
  if (f == NULL)
    return 2;
  g_autofree gchar *prefix = g_strdup_printf ("{\"id\":%" G_GUINT64_FORMAT ",", id);
  gsize plen = strlen (prefix);
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int status = 2;
  gboolean found = FALSE;

  while ((n = getline (&line, &cap, f)) > 0)
    {
      if ((gsize) n < plen || memcmp (line, prefix, plen) != 0)
        continue;
      found = TRUE;
      g_autoptr (JsonParser) p = json_parser_new ();
      g_autoptr (GError) error = NULL;
      if (!json_parser_load_from_data (p, line, n, &error)
          || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (p)))
        {
          g_printerr ("datc: %s/results.jsonl: task %" G_GUINT64_FORMAT ": unreadable line\n", dir,
                      id);
          break;
        }
      JsonObject *o = json_node_get_object (json_parser_get_root (p));
      const char *file = json_object_get_string_member_with_default (o, "output", "");
      const char *which = want_stderr ? "stderr" : "stdout";
      g_autofree gchar *k_off = g_strdup_printf ("%s_offset", which);
      g_autofree gchar *k_len = g_strdup_printf ("%s_bytes", which);
      gint64 off = json_object_get_int_member_with_default (o, k_off, -1);
      gint64 len = json_object_get_int_member_with_default (o, k_len, -1);
      if (off < 0 || len < 0 || file[0] == '\0' || strstr (file, "..") != NULL)
        {
          g_printerr ("datc: task %" G_GUINT64_FORMAT ": no output recorded\n", id);
          break;
        }
      g_autofree gchar *path = g_build_filename (dir, file, NULL);
      if (len == 0 || copy_range (path, (guint64) off, (guint64) len))
        status = 0;
      break;
    }
  if (!found)
    say_no_result (dir, id);
  free (line);
  fclose (f);
  fflush (stdout);
  return status;
}

int
datc_results_list (const char *dir, gboolean failed_only, gboolean json)
{
  FILE *f = open_results (dir);
  if (f == NULL)
    return 2;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  g_autoptr (JsonParser) p = json_parser_new ();

  guint64 per_class[DATC_END_N + 1] = { 0 }; /* [DATC_END_N]: a class this datc does not know */
  if (!json)
    printf ("%8s %7s %-12s %-12s %5s %6s %-16s %10s\n", "ID", "ATTEMPT", "STATUS", "CLASS", "EXIT",
            "SIGNAL", "SITE", "SECONDS");
  while ((n = getline (&line, &cap, f)) > 0)
    {
      if (!json_parser_load_from_data (p, line, n, NULL)
          || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (p)))
        continue;
      JsonObject *o = json_node_get_object (json_parser_get_root (p));
      const char *st = json_object_get_string_member_with_default (o, "status", "?");
      gint64 code = json_object_get_int_member_with_default (o, "exit_code", -1);
      gboolean ok = g_str_equal (st, "exited") && code == 0;
      if (failed_only && ok)
        continue;
      /* Lines of an older datc have no class: it follows from the status. */
      gint64 sig = json_object_get_int_member_with_default (o, "signal", 0);
      const char *cls = json_object_get_string_member_with_default (o, "class", NULL);
      if (cls == NULL)
        cls = datc_end_class_name (datc_end_class_of_status_name (st, sig));
      guint c = 0;
      while (c < DATC_END_N && !g_str_equal (cls, datc_end_class_name ((DatcEndClass) c)))
        c++;
      per_class[c]++;
      if (json)
        fputs (line, stdout);
      else
        {
          gint64 s = json_object_get_int_member_with_default (o, "started", 0);
          gint64 e = json_object_get_int_member_with_default (o, "finished", 0);
          printf ("%8" G_GINT64_FORMAT " %7" G_GINT64_FORMAT " %-12s %-12s %5" G_GINT64_FORMAT
                  " %6" G_GINT64_FORMAT " %-16s %10.3f\n",
                  json_object_get_int_member_with_default (o, "id", 0),
                  json_object_get_int_member_with_default (o, "attempt", 0), st, cls, code, sig,
                  json_object_get_string_member_with_default (o, "site", ""),
                  s > 0 && e >= s ? (e - s) / 1e6 : 0.0);
        }
    }
  free (line);
  fclose (f);
  /* Why they ended, one line per class seen: "# exit 98", "# oom 2". */
  if (!json)
    for (guint c = 0; c <= DATC_END_N; c++)
      if (per_class[c] > 0)
        printf ("# %-12s %" G_GUINT64_FORMAT "\n",
                c < DATC_END_N ? datc_end_class_name ((DatcEndClass) c) : "other", per_class[c]);
  return 0;
}
