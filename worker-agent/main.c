/* main.c: the `datc-agent` command: options, then the agent loop. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "datc-limits.h"
#include "libc-setup.h"
#include "relay.h"

static gboolean
env_uint (const char *name, guint64 max, guint64 *out)
{
  const char *v = g_getenv (name);
  return v != NULL && v[0] && g_ascii_string_to_unsigned (v, 10, 0, max, out, NULL);
}

int
main (int argc, char **argv)
{
  g_autofree gchar *connect = NULL, *server_key = NULL, *key_file = NULL, *site = NULL,
                   *proxy = NULL, *exec = NULL;
  gint slots = 0, prefetch = -1, walltime = 0, grace_ms = 2000, reconnect_s = 600;
  gint64 walltime_end = 0;
  gint64 output_limit = DATC_OUTPUT_DEFAULT;
  GOptionEntry entries[] = {
    { "connect", 'c', 0, G_OPTION_ARG_STRING, &connect, "Master endpoint", "ENDPOINT" },
    { "server-key", 0, 0, G_OPTION_ARG_STRING, &server_key, "Master's CURVE public key (Z85)",
      "KEY" },
    { "key-file", 0, 0, G_OPTION_ARG_FILENAME, &key_file, "This agent's CURVE key file (mode 0600)",
      "FILE" },
    { "slots", 'n', 0, G_OPTION_ARG_INT, &slots,
      "Tasks run at once (default: $DATC_SLOTS, else CPUs)", "N" },
    { "prefetch", 0, 0, G_OPTION_ARG_INT, &prefetch,
      "Tasks asked for beyond free slots (default: none until a task ran, then what the slots run "
      "in 20 ms or two round trips)",
      "N" },
    { "walltime", 0, 0, G_OPTION_ARG_INT, &walltime, "Seconds this agent may live", "SECONDS" },
    { "walltime-end", 0, 0, G_OPTION_ARG_INT64, &walltime_end,
      "Epoch second the allocation ends (default: $DATC_WALLTIME_END)", "EPOCH" },
    { "site", 0, 0, G_OPTION_ARG_STRING, &site, "Site name reported to the master", "NAME" },
    { "proxy", 0, 0, G_OPTION_ARG_STRING, &proxy, "Proxy id reported to the master", "ID" },
    { "output-limit", 0, 0, G_OPTION_ARG_INT64, &output_limit,
      "Bytes kept per stream per task (default 1 MiB)", "BYTES" },
    { "kill-grace-ms", 0, 0, G_OPTION_ARG_INT, &grace_ms,
      "Between SIGTERM and SIGKILL (default 2000)", "MS" },
    { "reconnect-timeout", 0, 0, G_OPTION_ARG_INT, &reconnect_s,
      "Give up on a silent master after this (default 600)", "SECONDS" },
    { "exec", 0, 0, G_OPTION_ARG_STRING, &exec,
      "Benchmarks only: 'none' acknowledges tasks without running them", "none" },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- pull and run datc tasks");
  g_autoptr (GError) error = NULL;

  datc_agent_libc_setup ();
  /* On a login node, for a site in relay mode (relay.h). */
  if (argc > 1 && g_str_equal (argv[1], "relay"))
    return datc_relay_main (argc - 1, argv + 1);
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      g_printerr ("datc-agent: %s\n", error->message);
      return 2;
    }
  if (connect == NULL)
    {
      g_printerr ("datc-agent: --connect is required\n");
      return 2;
    }
  if (slots < 0 || slots > 100000 || walltime < 0 || grace_ms < 0 || reconnect_s < 0
      || output_limit < 0 || output_limit > DATC_OUTPUT_MAX || prefetch < -1 || prefetch > 1000000)
    {
      g_printerr ("datc-agent: a numeric option is out of range (--output-limit at most %u)\n",
                  DATC_OUTPUT_MAX);
      return 2;
    }
  if ((site && (strlen (site) > DATC_NAME_MAX || !g_utf8_validate (site, -1, NULL)))
      || (proxy && (strlen (proxy) > DATC_NAME_MAX || !g_utf8_validate (proxy, -1, NULL))))
    {
      g_printerr ("datc-agent: --site and --proxy are UTF-8 of at most %u bytes\n", DATC_NAME_MAX);
      return 2;
    }
  if (exec != NULL && !g_str_equal (exec, "none"))
    {
      g_printerr ("datc-agent: --exec takes only 'none'\n");
      return 2;
    }
  guint64 v;
  if (slots == 0)
    slots
        = env_uint ("DATC_SLOTS", 100000, &v) && v > 0 ? (gint) v : (gint) g_get_num_processors ();
  if (walltime > 0)
    walltime_end = g_get_real_time () / G_USEC_PER_SEC + walltime;
  else if (walltime_end == 0 && env_uint ("DATC_WALLTIME_END", G_MAXINT32, &v))
    walltime_end = (gint64) v;

  g_autofree gchar *default_proxy = g_strdup_printf ("%d", (int) getpid ());
  DatcAgentOptions o = {
    .connect = connect,
    .server_key = server_key,
    .key_file = key_file,
    .site = site ? site : "manual",
    .proxy = proxy ? proxy : default_proxy,
    .slots = (guint) slots,
    .prefetch = prefetch >= 0 ? (guint) prefetch : 0,
    .prefetch_auto = prefetch < 0,
    .walltime_end_us = walltime_end * G_USEC_PER_SEC,
    .exec_none = exec != NULL,
    .output_limit = (gsize) output_limit,
    .kill_grace_ms = (guint) grace_ms,
    .reconnect_timeout_s = (guint) reconnect_s,
  };
  return datc_agent_run (&o);
}
