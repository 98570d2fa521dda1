/* bench-relay.c: tasks/s of short tasks through a relay (`reach = relay`)
 * against the same site reached directly, and what the relay costs the
 * login node (CPU and RSS per 1,000 tasks, from its own exit line).
 *
 * One site: fork over ssh to the test bed's sshd on loopback
 * (site-drivers/testbed-sshd.h), PROXIES x SLOTS, the agent run from
 * DATC_AGENT.  Runs D R D R ... D (ROUNDS relay runs, each between two
 * direct ones) and prints each run, then the ratio relay / mean of the
 * direct runs around it, per round, with min, median and max; then an
 * idle relay's CPU (a campaign of one task sleeping 20 s).
 *
 *   DATC=... DATC_AGENT=... DATC_TESTBED=tests/testbed \
 *     bench-relay [TASKS=20000] [ROUNDS=3] [PROXIES=2] [SLOTS=2] [TASK=true]
 *
 * As root (the test bed's sshd).  Nothing here asserts. */
#include <glib.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testbed-sshd.h"

static G_NORETURN void
die (const char *why)
{
  fprintf (stderr, "bench-relay: %s\n", why);
  exit (1);
}

typedef struct {
  double seconds, rate;
  double relay_cpu_s; /* -1: direct */
  long relay_rss_kib;
} Run;

static gboolean
run_once (const char *tmp, guint index, const char *tasks, guint n, const char *group,
          gboolean relay, Run *r)
{
  const char *datc = g_getenv ("DATC");
  g_autofree gchar *dir = g_strdup_printf ("%s/r%u", tmp, index);
  g_autofree gchar *sites = g_strdup_printf ("%s/r%u.ini", tmp, index);
  g_autofree gchar *ini
      = g_strdup_printf ("%s%s%s", relay ? "" : "[master]\nlisten = tcp://127.0.0.1:0\n\n", group,
                         relay ? "reach = relay\nrelay_address = 127.0.0.1\n" : "");
  if (!g_file_set_contents (sites, ini, -1, NULL))
    die ("cannot write the sites file");
  const char *argv[]
      = { datc, "run", "--dir", dir, "--sites", sites, "--json", "--no-progress", tasks, NULL };
  g_autofree gchar *out = NULL, *err = NULL;
  gint status = 0;
  g_autoptr (GError) error = NULL;
  if (!g_spawn_sync (NULL, (gchar **) argv, NULL, 0, NULL, NULL, &out, &err, &status, &error))
    die (error->message);
  if (!g_spawn_check_wait_status (status, NULL))
    {
      fprintf (stderr, "bench-relay: run %u failed:\n%s\n", index, err);
      return FALSE;
    }
  g_autoptr (JsonNode) root = json_from_string (out, &error);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    die ("datc run --json printed no object");
  JsonObject *o = json_node_get_object (root);
  r->seconds = json_object_get_double_member (o, "seconds");
  r->rate = n / r->seconds;
  r->relay_cpu_s = -1;
  if (relay)
    {
      const char *at = strstr (err, "; cpu ");
      if (at == NULL
          || sscanf (at, "; cpu %lf s, max RSS %ld KiB", &r->relay_cpu_s, &r->relay_rss_kib) != 2)
        die ("the relay's exit line (cpu, max RSS) is not in datc run's stderr");
    }
  return TRUE;
}

static void
print_run (const char *what, const Run *r, guint n)
{
  printf ("  %s %6.2f s  %7.0f tasks/s", what, r->seconds, r->rate);
  if (r->relay_cpu_s >= 0)
    printf ("  relay: cpu %.3f s (%.1f ms per 1000 tasks), max RSS %ld KiB", r->relay_cpu_s,
            1000.0 * r->relay_cpu_s * 1000.0 / n, r->relay_rss_kib);
  printf ("\n");
  fflush (stdout);
}

static int
cmp_double (gconstpointer a, gconstpointer b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

int
main (int argc, char **argv)
{
  guint n = argc > 1 ? (guint) atoi (argv[1]) : 20000;
  guint rounds = argc > 2 ? (guint) atoi (argv[2]) : 3;
  guint proxies = argc > 3 ? (guint) atoi (argv[3]) : 2;
  guint slots = argc > 4 ? (guint) atoi (argv[4]) : 2;
  const char *task = argc > 5 ? argv[5] : "true";
  if (n == 0 || rounds == 0 || proxies == 0 || slots == 0)
    die ("usage: bench-relay [TASKS] [ROUNDS] [PROXIES] [SLOTS] [TASK]");
  if (!g_getenv ("DATC") || !g_getenv ("DATC_AGENT") || !g_getenv ("DATC_TESTBED"))
    die ("set DATC, DATC_AGENT and DATC_TESTBED (tests/testbed)");
  g_autoptr (GError) error = NULL;
  g_autofree gchar *tmp = g_dir_make_tmp ("datc-relay-XXXXXX", &error);
  if (tmp == NULL)
    die (error->message);
  g_autofree gchar *tasks = g_build_filename (tmp, "tasks.txt", NULL);
  GString *bag = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (bag, "%s\n", task);
  if (!g_file_set_contents (tasks, bag->str, (gssize) bag->len, NULL))
    die ("cannot write the task file");
  g_string_free (bag, TRUE);

  TestbedSshd sshd;
  if (!testbed_sshd_up (&sshd, NULL, NULL))
    {
      testbed_sshd_clear (&sshd);
      die ("the test bed's sshd did not come up");
    }
  g_autofree gchar *workdir
      = g_build_filename (testbed_sshd_get (&sshd, "SSHD_REMOTE_DIR"), "datc", NULL);
  g_autofree gchar *group = g_strdup_printf (
      "[site s]\ntransport = ssh\nhost = %s\nport = %s\nuser = %s\nidentity = %s\n"
      "known_hosts = %s\nscheduler = fork\nslots_per_proxy = %u\nmax_proxies = %u\n"
      "workdir = %s\nagent = %s\n",
      testbed_sshd_get (&sshd, "SSHD_ADDR"), testbed_sshd_get (&sshd, "SSHD_PORT"),
      testbed_sshd_get (&sshd, "SSHD_USER"), testbed_sshd_get (&sshd, "SSHD_IDENTITY"),
      testbed_sshd_get (&sshd, "SSHD_KNOWN_HOSTS"), slots, proxies, workdir,
      g_getenv ("DATC_AGENT"));
  printf ("relay: %u x %s on a fork site over ssh (loopback sshd), %u proxies x %u slots; "
          "D R D ... D, %u rounds, in %s\n",
          n, task, proxies, slots, rounds, tmp);
  fflush (stdout);

  g_autofree Run *d = g_new0 (Run, rounds + 1);
  g_autofree Run *r = g_new0 (Run, rounds);
  g_autofree double *ratios = g_new (double, rounds);
  guint index = 0, measured = 0;
  gboolean ok = run_once (tmp, index++, tasks, n, group, FALSE, &d[0]);
  if (ok)
    print_run ("D", &d[0], n);
  for (guint k = 0; ok && k < rounds; k++)
    {
      ok = run_once (tmp, index++, tasks, n, group, TRUE, &r[k]);
      if (ok)
        print_run ("R", &r[k], n);
      ok = ok && run_once (tmp, index++, tasks, n, group, FALSE, &d[k + 1]);
      if (!ok)
        break;
      print_run ("D", &d[k + 1], n);
      double mean = (d[k].rate + d[k + 1].rate) / 2;
      ratios[measured++] = r[k].rate / mean;
      printf ("  round %u: relay %.0f / mean direct %.0f tasks/s = %.3f\n", k + 1, r[k].rate, mean,
              r[k].rate / mean);
    }
  if (measured > 0)
    {
      qsort (ratios, measured, sizeof *ratios, cmp_double);
      printf ("ratio relay/direct: median %.3f (min %.3f, max %.3f) over %u rounds; target >= "
              "0.9\n",
              ratios[measured / 2], ratios[0], ratios[measured - 1], measured);
    }
  /* Idle: one task that sleeps 20 s; the relay only answers pings. */
  g_autofree gchar *idle_tasks = g_build_filename (tmp, "idle.txt", NULL);
  Run idle = { 0 };
  if (ok && g_file_set_contents (idle_tasks, "sleep 20\n", -1, NULL)
      && run_once (tmp, index++, idle_tasks, 1, group, TRUE, &idle))
    printf ("idle relay (one task sleeping 20 s): cpu %.1f ms over %.1f s, max RSS %ld KiB\n",
            1000 * idle.relay_cpu_s, idle.seconds, idle.relay_rss_kib);
  testbed_sshd_stop (&sshd);
  testbed_sshd_clear (&sshd);
  testbed_remove_tree (tmp);
  return ok ? 0 : 1;
}
