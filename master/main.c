/* main.c: the `datc` command.  Parses the subcommand and its options and
 * hands over to the module that does the work; nothing else lives here. */
#include <errno.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <locale.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "sitescheck.h"
#include "results.h"
#include "provisioner.h"
#include "run.h"
#include "sitesfile.h"

#define EXIT_INPUT 2

static void
usage (FILE *out)
{
  fputs ("usage:\n"
         "  datc run [--dir DIR] [--sites SITES.ini] [--local-slots N] [--local-agents K] [--open] "
         "[--json]\n"
         "           [--give-up-after DURATION] [--keep-site-files] TASKFILE\n"
         "  datc status [DIR] [--json] [--watch]\n"
         "  datc submit [DIR] (--file FILE | -- COMMAND ARGS...)\n"
         "  datc cancel [DIR] [ID ...]     datc close [DIR]     datc shell [DIR]\n"
         "  datc output DIR ID [--stderr]\n"
         "  datc sites check SITES.ini [--probe]\n"
         "  datc results DIR [--failed] [--json]\n"
         "  datc analyze predict SCENARIO.ini [--trials M] [--seed S] [--json]\n"
         "  datc analyze waits FILE|DIR [--site NAME] [--quantile q] [--confidence c]\n"
         "  datc analyze trace DIR [--json]\n"
         "  datc report DIR [-o report.html]\n"
         "  datc --version\n"
         "run `datc COMMAND --help` for a command's options\n",
         out);
}

static int
cmd_run (int argc, char **argv)
{
  DatcRunOptions o = { 0 };
  g_autofree gchar *dir = NULL, *format = NULL, *listen = NULL, *local_exec = NULL, *sites = NULL;
  gint local_slots = 0, local_agents = 0, heartbeat_ms = 0, timeout_ms = 0, crash_limit = 0;
  gint max_replicas = -1; /* not given */
  gboolean json = FALSE, no_local = FALSE, open_campaign = FALSE, retry_cancelled = FALSE,
           no_progress = FALSE, keep_site_files = FALSE;
  g_autofree gchar *mode = NULL, *give_up = NULL, *compact_min = NULL;
  GOptionEntry entries[] = {
    { "dir", 'd', 0, G_OPTION_ARG_FILENAME, &dir, "Campaign directory (default: TASKFILE.datc)",
      "DIR" },
    { "format", 0, 0, G_OPTION_ARG_STRING, &format, "Task file format: auto, lines, jsonl", "F" },
    { "sites", 's', 0, G_OPTION_ARG_FILENAME, &sites,
      "The clusters to use (default: the embedded local site)", "SITES.ini" },
    { "local-slots", 0, 0, G_OPTION_ARG_INT, &local_slots,
      "Slots on the local site (default: CPUs)", "N" },
    { "local-agents", 0, 0, G_OPTION_ARG_INT, &local_agents,
      "Local agents sharing those slots (default 1)", "K" },
    { "local-exec", 0, 0, G_OPTION_ARG_STRING, &local_exec,
      "Benchmarks only: 'none' acknowledges tasks without running them", "none" },
    { "no-local", 0, 0, G_OPTION_ARG_NONE, &no_local,
      "No local agents: only agents that connect to --listen", NULL },
    { "listen", 0, 0, G_OPTION_ARG_STRING, &listen,
      "Also accept agents on this TCP endpoint (CURVE)", "tcp://HOST:PORT" },
    { "mode", 0, 0, G_OPTION_ARG_STRING, &mode, "pull (default), static or direct", "MODE" },
    { "heartbeat-ms", 0, 0, G_OPTION_ARG_INT, &heartbeat_ms,
      "Heartbeat interval (default 1000; at most an eighth of the agent timeout)", "MS" },
    { "agent-timeout-ms", 0, 0, G_OPTION_ARG_INT, &timeout_ms,
      "Silence before an agent is lost (default 30000)", "MS" },
    { "crash-limit", 0, 0, G_OPTION_ARG_INT, &crash_limit,
      "Agent losses before a task fails as lost (default 5)", "N" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, "Print a JSON summary at the end", NULL },
    { "open", 0, 0, G_OPTION_ARG_NONE, &open_campaign,
      "Keep serving when the bag is empty, until `datc close`", NULL },
    { "retry-cancelled", 0, 0, G_OPTION_ARG_NONE, &retry_cancelled,
      "Run the tasks an earlier `datc cancel` cancelled", NULL },
    { "no-progress", 0, 0, G_OPTION_ARG_NONE, &no_progress, "No progress line, even on a terminal",
      NULL },
    { "give-up-after", 0, 0, G_OPTION_ARG_STRING, &give_up,
      "Stop (exit 3) when every site has been degraded this long with no agent connected; 0: never "
      "(default: the sites file's give_up_after, else 5m)",
      "DURATION" },
    { "max-replicas", 0, 0, G_OPTION_ARG_INT, &max_replicas,
      "Live copies of a task at the end of the campaign, when a copy is expected to end sooner (1: "
      "no replication; default: the sites file's max_replicas, else 2)",
      "N" },
    { "compact-min-bytes", 0, 0, G_OPTION_ARG_STRING, &compact_min,
      "Compact the journal once it holds this many bytes (and 4 times its last checkpoint); never: "
      "not compacted (default: the sites file's compact_min_bytes, else 67108864)",
      "BYTES" },
    { "keep-site-files", 0, 0, G_OPTION_ARG_NONE, &keep_site_files,
      "Leave every proxy script and log in the sites' workdirs (default: only those of proxies "
      "that failed stay)",
      NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("TASKFILE - run a campaign");
  g_autoptr (GError) error = NULL;
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      g_printerr ("datc run: %s\n", error->message);
      return EXIT_INPUT;
    }
  if (argc != 2)
    {
      g_printerr ("datc run: exactly one TASKFILE expected\n");
      return EXIT_INPUT;
    }
  if (local_slots < 0 || local_agents < 0 || heartbeat_ms < 0 || timeout_ms < 0 || crash_limit < 0
      || local_slots > 100000 || local_agents > 1000 || crash_limit > 255)
    {
      g_printerr ("datc run: a numeric option is out of range\n");
      return EXIT_INPUT;
    }
  if (mode != NULL && !datc_mode_parse (mode, &o.mode))
    {
      g_printerr ("datc run: --mode %s: expected pull, static or direct\n", mode);
      return EXIT_INPUT;
    }
  if (give_up != NULL && !datc_parse_duration (give_up, &o.give_up_s))
    {
      g_printerr ("datc run: --give-up-after %s: expected a duration (5m, 90s, 1h, ...) or 0 "
                  "for never\n",
                  give_up);
      return EXIT_INPUT;
    }
  o.give_up_set = give_up != NULL;
  if (max_replicas != -1 && (max_replicas < 1 || max_replicas > (gint) DATC_MAX_REPLICAS_MAX))
    {
      g_printerr ("datc run: --max-replicas %d: expected 1 (no replication) to %u\n", max_replicas,
                  DATC_MAX_REPLICAS_MAX);
      return EXIT_INPUT;
    }
  o.max_replicas = max_replicas > 0 ? (guint) max_replicas : 0;
  o.keep_site_files = keep_site_files;
  if (compact_min != NULL && !datc_parse_compact_min_bytes (compact_min, &o.compact_min_bytes))
    {
      g_printerr ("datc run: --compact-min-bytes %s: expected a whole number of bytes from 1, "
                  "or never\n",
                  compact_min);
      return EXIT_INPUT;
    }
  if (local_exec != NULL && !g_str_equal (local_exec, "none"))
    {
      g_printerr ("datc run: --local-exec takes only 'none'\n");
      return EXIT_INPUT;
    }
  /* Only tcp:// has CURVE: an ipc:// or other endpoint here would let
   * agents in with no key at all. */
  if (listen != NULL && !g_str_has_prefix (listen, "tcp://"))
    {
      g_printerr ("datc run: --listen %s: only tcp://HOST:PORT is accepted (agents there need "
                  "the campaign's CURVE keys; local agents use the campaign's own socket)\n",
                  listen);
      return EXIT_INPUT;
    }
  if (no_local && listen == NULL)
    {
      g_printerr ("datc run: --no-local needs --listen, or no agent could ever connect\n");
      return EXIT_INPUT;
    }
  o.no_local = no_local;
  o.sites = sites;
  o.open = open_campaign;
  o.retry_cancelled = retry_cancelled;
  o.no_progress = no_progress;
  o.dir = dir;
  o.task_file = argv[1];
  o.format = format;
  o.listen = listen;
  o.local_slots = (guint) local_slots;
  o.local_agents = (guint) local_agents;
  o.local_exec = local_exec;
  o.heartbeat_ms = (guint) heartbeat_ms;
  o.timeout_ms = (guint) timeout_ms;
  o.crash_limit = (guint) crash_limit;
  o.json = json;
  return datc_run (&o);
}

/* Task ids are the task file's line numbers (or submission order): 1, 2, ... */
static gboolean
parse_task_id (const char *text, guint64 *id, GError **error)
{
  const char *digits = text[0] == '-' ? text + 1 : text;
  guint64 v = 0;
  if (digits[0] == '\0' || strspn (digits, "0123456789") != strlen (digits))
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "\"%s\" is not a task id", text);
  else if (text[0] == '-'
           || (g_ascii_string_to_unsigned (digits, 10, 0, G_MAXUINT64, &v, NULL) && v == 0))
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "task ids start at 1, not %s",
                 text);
  else if (!g_ascii_string_to_unsigned (digits, 10, 1, G_MAXUINT64, id, NULL))
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "task id %s is too large", text);
  else
    return TRUE;
  return FALSE;
}

static int
cmd_output (int argc, char **argv)
{
  gboolean want_stderr = FALSE;
  GOptionEntry entries[] = {
    { "stderr", 0, 0, G_OPTION_ARG_NONE, &want_stderr, "Print stderr instead of stdout", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("DIR ID - print a task's captured output");
  g_autoptr (GError) error = NULL;
  guint64 id;
  /* GOption would take "-1" for an unknown option; it is a task id. */
  for (int i = 1; i < argc && !g_str_equal (argv[i], "--"); i++)
    if (argv[i][0] == '-' && g_ascii_isdigit (argv[i][1]) && !parse_task_id (argv[i], &id, &error))
      {
        g_printerr ("datc output: %s\n", error->message);
        return EXIT_INPUT;
      }
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || argc != 3)
    {
      g_printerr ("datc output: %s\n", error ? error->message : "expected DIR ID");
      return EXIT_INPUT;
    }
  if (!parse_task_id (argv[2], &id, &error))
    {
      g_printerr ("datc output: %s\n", error->message);
      return EXIT_INPUT;
    }
  return datc_results_print_output (argv[1], id, want_stderr);
}

static int
cmd_results (int argc, char **argv)
{
  gboolean failed = FALSE, json = FALSE;
  GOptionEntry entries[] = {
    { "failed", 0, 0, G_OPTION_ARG_NONE, &failed, "Only tasks that did not succeed", NULL },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, "One JSON object per line", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("DIR - list results");
  g_autoptr (GError) error = NULL;
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || argc != 2)
    {
      g_printerr ("datc results: %s\n", error ? error->message : "expected DIR");
      return EXIT_INPUT;
    }
  return datc_results_list (argv[1], failed, json);
}

int
main (int argc, char **argv)
{
  setlocale (LC_ALL, "");
  if (argc < 2)
    {
      usage (stderr);
      return EXIT_INPUT;
    }
  const char *cmd = argv[1];
  if (g_str_equal (cmd, "--help") || g_str_equal (cmd, "-h") || g_str_equal (cmd, "help"))
    {
      usage (stdout);
      return 0;
    }
  if (g_str_equal (cmd, "--version") || g_str_equal (cmd, "version"))
    {
      puts ("datc " DATC_VERSION);
      return 0;
    }
  /* GOption's --help says "Usage: PRGNAME ...": name the whole command
   * (GLib takes the name once, so analyze's subcommand is named here). */
  g_autofree gchar *prgname = g_str_equal (cmd, "analyze") && argc > 2 && argv[2][0] != '-'
                                  ? g_strdup_printf ("datc %s %s", cmd, argv[2])
                                  : g_strdup_printf ("datc %s", cmd);
  g_set_prgname (prgname);
  if (g_str_equal (cmd, "run"))
    return cmd_run (argc - 1, argv + 1);
  if (g_str_equal (cmd, "output"))
    return cmd_output (argc - 1, argv + 1);
  if (g_str_equal (cmd, "results"))
    return cmd_results (argc - 1, argv + 1);
  if (g_str_equal (cmd, "status"))
    return datc_cmd_status (argc - 1, argv + 1);
  if (g_str_equal (cmd, "submit"))
    return datc_cmd_submit (argc - 1, argv + 1);
  if (g_str_equal (cmd, "cancel"))
    return datc_cmd_cancel (argc - 1, argv + 1);
  if (g_str_equal (cmd, "close"))
    return datc_cmd_close (argc - 1, argv + 1);
  if (g_str_equal (cmd, "shell"))
    return datc_cmd_shell (argc - 1, argv + 1);
  if (g_str_equal (cmd, "sites"))
    return datc_cmd_sites (argc - 1, argv + 1);
  if (g_str_equal (cmd, "analyze"))
    return datc_analyze_main (argc - 1, argv + 1);
  if (g_str_equal (cmd, "report"))
    return datc_report_main (argc - 1, argv + 1);
  g_printerr ("datc: unknown command '%s'\n", cmd);
  usage (stderr);
  return EXIT_INPUT;
}
