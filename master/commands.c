/* commands.c: status, submit, cancel, close and shell.  Live when a master
 * holds the campaign's lock (through DIR/control); otherwise status reads
 * the journal read-only, and submit and cancel take the lock themselves and
 * append to the journal, so the next `datc run` sees what they did. */
#include "commands.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "bag.h"
#include "campaign.h"
#include "control.h"
#include "ledger.h"
#include "status.h"

#define EXIT_OK 0
#define EXIT_INPUT 2
#define EXIT_CANNOT 3
#define CALL_TIMEOUT_MS 30000

gchar *
datc_cmd_take_dir (int *argc, char **argv)
{
  /* Anywhere before "--", as users put options first as often as last
   * (`datc status --json DIR`); only a directory holding campaign.json
   * (or a master's lock) counts, so option values and task ids are never taken for it. */
  const char *first_word = NULL;
  for (int i = 1; i < *argc && strcmp (argv[i], "--") != 0; i++)
    {
      if (argv[i][0] == '-')
        continue;
      if (first_word == NULL)
        first_word = argv[i];
      g_autofree gchar *json = g_build_filename (argv[i], "campaign.json", NULL);
      GStatBuf st;
      /* A master that is reading a new campaign's task file holds DIR
       * before campaign.json is written: it answers `status`. */
      if (g_stat (json, &st) == 0 || datc_control_master_running (argv[i]))
        {
          gchar *dir = g_strdup (argv[i]);
          memmove (argv + i, argv + i + 1, (size_t) (*argc - i) * sizeof *argv);
          (*argc)--;
          return dir;
        }
      /* A word we may not look into is a directory, not a task id: say so
       * rather than "no campaign.json", which would send the user looking
       * for a file that is there. */
      if (errno == EACCES)
        {
          g_printerr ("datc: %s: %s\n", argv[i], g_strerror (EACCES));
          return NULL;
        }
    }
  const char *env = g_getenv ("DATC_DIR");
  if (env != NULL && env[0])
    return g_strdup (env);
  if (first_word != NULL)
    g_printerr ("datc: %s is not a campaign directory (no campaign.json)\n", first_word);
  else
    g_printerr ("datc: which campaign? Give DIR, or run inside `datc shell DIR`\n");
  return NULL;
}

/* `datc CMD --help` prints CMD's usage before any DIR is looked for: a
 * user asking for help is often one who does not know what DIR is. */
static gboolean
help_asked (int argc, char **argv, GOptionContext *ctx)
{
  for (int i = 1; i < argc && strcmp (argv[i], "--") != 0; i++)
    if (g_str_equal (argv[i], "--help") || g_str_equal (argv[i], "-h")
        || g_str_equal (argv[i], "-?"))
      {
        g_option_context_set_description (ctx, "DIR is a campaign directory; without it, "
                                               "$DATC_DIR (which `datc shell DIR` sets).");
        g_autofree gchar *help = g_option_context_get_help (ctx, TRUE, NULL);
        fputs (help, stdout);
        return TRUE;
      }
  return FALSE;
}

/* Offline writers hold the lock so no master starts meanwhile. */
static int
lock_offline (const char *dir)
{
  g_autofree gchar *path = g_build_filename (dir, "lock", NULL);
  int fd = open (path, O_RDWR | O_CLOEXEC);
  if (fd < 0 || flock (fd, LOCK_EX | LOCK_NB) != 0)
    {
      if (fd >= 0)
        close (fd);
      return -1;
    }
  return fd;
}

/* The campaign's bag and ledger, for offline changes (lock held). */
static DatcLedger *
open_offline (const char *dir, DatcBag *bag, GError **error)
{
  DatcLedgerOptions o = { .crash_limit = 5 };
  return datc_campaign_open_ledger (dir, bag, &o, error);
}

/* ---- status -------------------------------------------------------- */

static JsonNode *
fetch_status (const char *dir, gint agents_max, guint timeout_ms, GError **error)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "cmd");
  json_builder_add_string_value (b, "status");
  if (agents_max >= 0)
    {
      json_builder_set_member_name (b, "agents_max");
      json_builder_add_int_value (b, agents_max);
    }
  json_builder_end_object (b);
  g_autoptr (JsonNode) req = json_builder_get_root (b);
  g_autoptr (GError) local = NULL;
  JsonNode *st = datc_control_call (dir, req, timeout_ms, &local);
  if (st != NULL)
    return st;
  if (!g_error_matches (local, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_NO_MASTER))
    {
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  return datc_status_offline (dir, error);
}

JsonNode *
datc_cmd_fetch_status (const char *dir, gint agents_max, GError **error)
{
  return fetch_status (dir, agents_max, CALL_TIMEOUT_MS, error);
}

/* How long --watch asks before asking again, and how long a master that
 * holds the campaign may stay silent.  A master that is ending no longer
 * answers its control socket (it cleans its sites, up to 30 s) and then
 * lets the lock go: until then the watch keeps asking, and afterwards the
 * journal holds the final state. */
#define WATCH_CALL_MS 2000
#define WATCH_SILENCE_MS 90000

static JsonNode *
watch_fetch (const char *dir, gint agents_max, GError **error)
{
  gint64 until = g_get_monotonic_time () + (gint64) WATCH_SILENCE_MS * 1000;
  for (;;)
    {
      g_autoptr (GError) local = NULL;
      JsonNode *st = fetch_status (dir, agents_max, WATCH_CALL_MS, &local);
      if (st != NULL)
        return st;
      gboolean silent = g_error_matches (local, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_TIMEOUT)
                        || g_error_matches (local, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_FAILED);
      if (!silent || g_get_monotonic_time () >= until)
        {
          g_propagate_error (error, g_steal_pointer (&local));
          return NULL;
        }
      /* A timeout has waited already; a socket missing while the lock is
       * held (a master starting or ending) is asked again shortly.  Once
       * the lock is free, the next call reads the journal. */
      if (datc_control_master_running (dir)
          && g_error_matches (local, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_FAILED))
        g_usleep (100 * 1000);
    }
}

/* Agents the text form lists (--agents: all; --json always all).  A
 * thousand agents are a thousand lines no one reads, and their reply is
 * most of what `datc status` costs the master and itself. */
#define STATUS_TEXT_AGENTS 20

int
datc_cmd_status (int argc, char **argv)
{
  gboolean json = FALSE, watch = FALSE, all_agents = FALSE;
  gdouble interval = 1.0;
  GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, "One JSON object", NULL },
    { "watch", 'w', 0, G_OPTION_ARG_NONE, &watch, "Refresh in place until the campaign ends",
      NULL },
    { "agents", 0, 0, G_OPTION_ARG_NONE, &all_agents,
      "List every agent (the text lists " G_STRINGIFY (STATUS_TEXT_AGENTS) ")", NULL },
    { "interval", 0, 0, G_OPTION_ARG_DOUBLE, &interval, "Seconds between refreshes (default 1)",
      "S" },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("[DIR] - show a campaign");
  g_autoptr (GError) error = NULL;
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (help_asked (argc, argv, ctx))
    return EXIT_OK;
  g_autofree gchar *dir = datc_cmd_take_dir (&argc, argv);
  if (dir == NULL)
    return EXIT_INPUT;
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || argc != 1 || interval < 0.1)
    {
      g_printerr ("datc status: %s\n", error ? error->message : "unexpected arguments");
      return EXIT_INPUT;
    }
  /* Refreshed in place on a terminal only: into a pipe or a file, frames
   * follow each other (JSON: one object per line) with no control codes. */
  gboolean in_place = watch && isatty (STDOUT_FILENO);
  gint agents_max = json || all_agents ? -1 : STATUS_TEXT_AGENTS;
  for (guint frame = 0;; frame++)
    {
      g_autoptr (JsonNode) st = watch ? watch_fetch (dir, agents_max, &error)
                                      : datc_cmd_fetch_status (dir, agents_max, &error);
      if (st == NULL)
        {
          g_printerr ("datc status: %s\n", error->message);
          return EXIT_CANNOT;
        }
      JsonObject *o = json_node_get_object (st);
      if (in_place)
        fputs ("\033[H\033[J", stdout); /* home and clear */
      else if (watch && frame > 0 && !json)
        fputc ('\n', stdout);
      if (json)
        {
          g_autofree gchar *text = json_to_string (st, FALSE);
          puts (text);
        }
      else
        datc_status_print (o, stdout);
      fflush (stdout);
      JsonObject *m = json_object_get_object_member (o, "master");
      if (!watch || !json_object_get_boolean_member_with_default (m, "running", FALSE))
        return EXIT_OK;
      g_usleep ((gulong) (interval * G_USEC_PER_SEC));
    }
}

/* ---- submit -------------------------------------------------------- */

static gchar *
argv_as_jsonl (char **words, int n)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "cmd");
  json_builder_begin_array (b);
  for (int i = 0; i < n; i++)
    json_builder_add_string_value (b, words[i]);
  json_builder_end_array (b);
  json_builder_end_object (b);
  g_autoptr (JsonNode) root = json_builder_get_root (b);
  g_autofree gchar *line = json_to_string (root, FALSE);
  return g_strconcat (line, "\n", NULL);
}

int
datc_cmd_submit (int argc, char **argv)
{
  g_autofree gchar *file = NULL, *format = NULL;
  GOptionEntry entries[] = {
    { "file", 'f', 0, G_OPTION_ARG_FILENAME, &file, "Task file to add (- for stdin)", "FILE" },
    { "format", 0, 0, G_OPTION_ARG_STRING, &format, "auto, lines or jsonl", "F" },
    { NULL },
  };
  /* Everything after "--" is one command, never options: split argv there. */
  g_autoptr (GPtrArray) opts = g_ptr_array_new ();
  char **words = NULL;
  int n_words = 0;
  for (int i = 0; i < argc; i++)
    {
      if (i > 0 && g_str_equal (argv[i], "--"))
        {
          words = argv + i + 1;
          n_words = argc - i - 1;
          break;
        }
      g_ptr_array_add (opts, argv[i]);
    }
  g_ptr_array_add (opts, NULL);
  int opt_argc = (int) opts->len - 1;
  char **opt_argv = (char **) opts->pdata;
  g_autoptr (GOptionContext) ctx
      = g_option_context_new ("[DIR] (--file FILE | -- COMMAND ...) - add tasks");
  g_autoptr (GError) error = NULL;
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (help_asked (opt_argc, opt_argv, ctx))
    return EXIT_OK;
  g_autofree gchar *dir = datc_cmd_take_dir (&opt_argc, opt_argv);
  if (dir == NULL)
    return EXIT_INPUT;
  if (!g_option_context_parse (ctx, &opt_argc, &opt_argv, &error) || opt_argc != 1)
    {
      g_printerr ("datc submit: %s\n", error ? error->message : "unexpected arguments");
      return EXIT_INPUT;
    }
  DatcTaskFileFormat fmt;
  if (!datc_task_file_format_parse (format ? format : "auto", &fmt))
    {
      g_printerr ("datc submit: --format must be auto, lines or jsonl\n");
      return EXIT_INPUT;
    }

  g_autofree gchar *data = NULL;
  g_autofree gchar *name = NULL;
  gsize len = 0;
  if (words != NULL && file == NULL)
    {
      if (n_words == 0)
        {
          g_printerr ("datc submit: nothing after --\n");
          return EXIT_INPUT;
        }
      data = argv_as_jsonl (words, n_words);
      len = strlen (data);
      name = g_strdup ("command line");
      fmt = DATC_TASKFILE_JSONL;
    }
  else if (file != NULL && words == NULL)
    {
      g_autoptr (GIOChannel) ch = NULL;
      if (g_str_equal (file, "-"))
        ch = g_io_channel_unix_new (STDIN_FILENO);
      else
        ch = g_io_channel_new_file (file, "r", &error);
      if (ch != NULL)
        {
          g_io_channel_set_encoding (ch, NULL, NULL);
          g_io_channel_read_to_end (ch, &data, &len, &error);
        }
      if (error != NULL)
        {
          g_printerr ("datc submit: %s: %s\n", file, error->message);
          return EXIT_INPUT;
        }
      name = g_strdup (g_str_equal (file, "-") ? "stdin" : file);
      if (fmt == DATC_TASKFILE_AUTO)
        fmt = g_str_has_suffix (name, ".jsonl") || g_str_has_suffix (name, ".ndjson")
                  ? DATC_TASKFILE_JSONL
                  : DATC_TASKFILE_LINES;
    }
  else
    {
      g_printerr ("datc submit: give either --file FILE or -- COMMAND ...\n");
      return EXIT_INPUT;
    }
  if (memchr (data, '\0', len) != NULL)
    {
      g_printerr ("datc submit: %s: contains a NUL byte\n", name);
      return EXIT_INPUT;
    }

  guint64 first = 0, count = 0;
  if (datc_control_master_running (dir))
    {
      g_autoptr (JsonBuilder) b = json_builder_new ();
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "cmd");
      json_builder_add_string_value (b, "submit");
      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, name);
      json_builder_set_member_name (b, "format");
      json_builder_add_string_value (b, fmt == DATC_TASKFILE_JSONL ? "jsonl" : "lines");
      json_builder_set_member_name (b, "data");
      json_builder_add_string_value (b, data);
      json_builder_end_object (b);
      g_autoptr (JsonNode) req = json_builder_get_root (b);
      g_autoptr (JsonNode) rep = datc_control_call (dir, req, CALL_TIMEOUT_MS, &error);
      if (rep == NULL)
        {
          g_printerr ("datc submit: %s\n", error->message);
          return g_error_matches (error, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_REFUSED)
                     ? EXIT_INPUT
                     : EXIT_CANNOT;
        }
      JsonObject *o = json_node_get_object (rep);
      first = (guint64) json_object_get_int_member_with_default (o, "first", 0);
      count = (guint64) json_object_get_int_member_with_default (o, "count", 0);
    }
  else
    {
      int lock = lock_offline (dir);
      if (lock < 0)
        {
          g_printerr ("datc submit: %s: cannot take the campaign's lock\n", dir);
          return EXIT_CANNOT;
        }
      g_autoptr (DatcBag) bag = datc_bag_new ();
      g_autoptr (DatcLedger) l = open_offline (dir, bag, &error);
      gboolean ok = l != NULL
                    && datc_ledger_submit (l, name, data, len, fmt, &first, &count, &error)
                    && datc_ledger_commit (l, &error);
      close (lock);
      if (!ok)
        {
          g_printerr ("datc submit: %s\n", error->message);
          return g_error_matches (error, DATC_BAG_ERROR, DATC_BAG_ERROR_PARSE)
                         || g_error_matches (error, DATC_BAG_ERROR, DATC_BAG_ERROR_EMPTY)
                     ? EXIT_INPUT
                     : EXIT_CANNOT;
        }
    }
  printf ("%" G_GUINT64_FORMAT " task%s added: ids %" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT "\n",
          count, count == 1 ? "" : "s", first, first + count - 1);
  return EXIT_OK;
}

/* ---- cancel, close ------------------------------------------------- */

int
datc_cmd_cancel (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx
      = g_option_context_new ("[DIR] [ID ...] - cancel these tasks, or every unfinished one");
  if (help_asked (argc, argv, ctx))
    return EXIT_OK;
  g_autofree gchar *dir = datc_cmd_take_dir (&argc, argv);
  if (dir == NULL)
    return EXIT_INPUT;
  g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (guint64));
  for (int i = 1; i < argc; i++)
    {
      guint64 id;
      if (!g_ascii_string_to_unsigned (argv[i], 10, 1, G_MAXUINT32, &id, NULL))
        {
          g_printerr ("datc cancel: '%s' is not a task id\n", argv[i]);
          return EXIT_INPUT;
        }
      g_array_append_val (ids, id);
    }
  g_autoptr (GError) error = NULL;
  guint64 n = 0;
  if (datc_control_master_running (dir))
    {
      g_autoptr (JsonBuilder) b = json_builder_new ();
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "cmd");
      json_builder_add_string_value (b, "cancel");
      if (ids->len > 0)
        {
          json_builder_set_member_name (b, "ids");
          json_builder_begin_array (b);
          for (guint i = 0; i < ids->len; i++)
            json_builder_add_int_value (b, (gint64) g_array_index (ids, guint64, i));
          json_builder_end_array (b);
        }
      json_builder_end_object (b);
      g_autoptr (JsonNode) req = json_builder_get_root (b);
      g_autoptr (JsonNode) rep = datc_control_call (dir, req, CALL_TIMEOUT_MS, &error);
      if (rep == NULL)
        {
          g_printerr ("datc cancel: %s\n", error->message);
          return EXIT_CANNOT;
        }
      n = (guint64) json_object_get_int_member_with_default (json_node_get_object (rep),
                                                             "cancelled", 0);
    }
  else
    {
      int lock = lock_offline (dir);
      if (lock < 0)
        {
          g_printerr ("datc cancel: %s: cannot take the campaign's lock\n", dir);
          return EXIT_CANNOT;
        }
      g_autoptr (DatcBag) bag = datc_bag_new ();
      g_autoptr (DatcLedger) l = open_offline (dir, bag, &error);
      gboolean ok = l != NULL;
      if (ok)
        {
          n = datc_ledger_cancel (l, ids->len ? (const guint64 *) ids->data : NULL, ids->len, NULL);
          ok = datc_ledger_commit (l, &error);
        }
      close (lock);
      if (!ok)
        {
          g_printerr ("datc cancel: %s\n", error->message);
          return EXIT_CANNOT;
        }
    }
  printf ("%" G_GUINT64_FORMAT " task%s cancelled\n", n, n == 1 ? "" : "s");
  return EXIT_OK;
}

int
datc_cmd_close (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx
      = g_option_context_new ("[DIR] - let an open campaign end when its bag is empty");
  if (help_asked (argc, argv, ctx))
    return EXIT_OK;
  g_autofree gchar *dir = datc_cmd_take_dir (&argc, argv);
  if (dir == NULL)
    return EXIT_INPUT;
  if (argc != 1)
    {
      g_printerr ("datc close: unexpected arguments\n");
      return EXIT_INPUT;
    }
  g_autoptr (JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "cmd");
  json_builder_add_string_value (b, "close");
  json_builder_end_object (b);
  g_autoptr (JsonNode) req = json_builder_get_root (b);
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) rep = datc_control_call (dir, req, CALL_TIMEOUT_MS, &error);
  if (rep == NULL)
    {
      g_printerr ("datc close: %s\n", error->message);
      return EXIT_CANNOT;
    }
  return EXIT_OK;
}

/* ---- shell --------------------------------------------------------- */

int
datc_cmd_shell (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx
      = g_option_context_new ("[DIR] - a shell where datc commands need no DIR");
  if (help_asked (argc, argv, ctx))
    return EXIT_OK;
  g_autofree gchar *dir = datc_cmd_take_dir (&argc, argv);
  if (dir == NULL)
    return EXIT_INPUT;
  g_autofree gchar *abs = g_canonicalize_filename (dir, NULL);
  const char *sh = g_getenv ("SHELL");
  if (sh == NULL || sh[0] == '\0')
    sh = "/bin/sh";
  g_setenv ("DATC_DIR", abs, TRUE);
  if (isatty (STDERR_FILENO))
    fprintf (stderr,
             "datc: a shell on campaign %s: `datc submit -- CMD`, `datc status`; exit to leave\n",
             abs);
  char *const args[] = { (char *) sh, NULL };
  execv (sh, args);
  g_printerr ("datc shell: %s: %s\n", sh, g_strerror (errno));
  return EXIT_CANNOT;
}
