/* sitescheck.c: see sitescheck.h.  Every check goes through the same
 * site drivers a campaign uses, so what passes here is what will run:
 * the queue is asked about with the scheduler's own queue query
 * (driver.h: queue_argv, parse_queue). */
#include "sitescheck.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"
#include "sitesfile.h"

typedef struct {
  guint failed;
} Report;

static void
line (Report *r, const char *site, const char *check, gboolean ok, const char *detail)
{
  printf ("%-14s %-22s %-4s %s\n", site, check, ok ? "ok" : "FAIL", detail ? detail : "");
  if (!ok)
    r->failed++;
}

/* The programs a scheduler runs: its table's list, else argv[0] of its
 * submit, poll and cancel. */
static GPtrArray *
scheduler_programs (const char *scheduler)
{
  GPtrArray *out = g_ptr_array_new_with_free_func (g_free);
  const DatcSchedulerClass *k = datc_scheduler_lookup (scheduler);
  if (k->programs != NULL)
    {
      for (const char *const *p = k->programs; *p != NULL; p++)
        g_ptr_array_add (out, g_strdup (*p));
      return out;
    }
  const char *ids[] = { "12345", NULL };
  DatcProxyRequest req = { .name = "datc-check", .slots = 1, .workdir = "/tmp",
                           .agent_command = "true" };
  g_auto (GStrv) a = k->submit_argv (&req, "/tmp/datc-check.sh");
  g_auto (GStrv) b = k->poll_argv (ids);
  g_auto (GStrv) c = k->cancel_argv (ids);
  GStrv all[] = { a, b, c };
  for (guint i = 0; i < G_N_ELEMENTS (all); i++)
    if (all[i] != NULL && all[i][0] != NULL)
      {
        gboolean seen = FALSE;
        for (guint j = 0; j < out->len; j++)
          seen |= g_str_equal (out->pdata[j], all[i][0]);
        if (!seen)
          g_ptr_array_add (out, g_strdup (all[i][0]));
      }
  return out;
}

static gboolean
site_has (DatcSite *site, const char *program, GError **error)
{
  g_autofree gchar *q = g_shell_quote (program);
  g_autofree gchar *cmd = g_strdup_printf ("command -v %s || test -x %s", q, q);
  const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
  DatcCommandResult res = { 0 };
  gboolean ok = datc_site_run (site, argv, &res, error) && res.exit_status == 0;
  datc_command_result_clear (&res);
  return ok;
}

/* Whether the site's queue is there, in the scheduler's own words.  A
 * scheduler without queues (fork ignores `queue`, condor refuses it) is
 * not asked: its table says why.  No queue set: the scheduler's default,
 * which every batch system has. */
static void
check_queue (Report *r, DatcSite *site, DatcSiteConfig *c)
{
  const DatcSchedulerClass *k = datc_scheduler_lookup (c->scheduler);
  if (k->queue_argv == NULL)
    {
      /* Would a proxy naming this queue even be written? */
      DatcProxyRequest req = { .name = "datc-check", .slots = 1, .workdir = "/tmp",
                               .agent_command = "true", .queue = c->queue };
      g_autofree gchar *script = k->script (&req);
      const char *none = k->no_queues != NULL ? k->no_queues : "the scheduler has no queues";
      g_autofree gchar *why = g_strdup_printf ("not applicable: %s", none);
      line (r, c->name, "queue exists", script != NULL, script != NULL ? why : none);
      return;
    }
  if (c->queue == NULL)
    {
      line (r, c->name, "queue exists", TRUE, "none set: the scheduler's default queue");
      return;
    }
  gboolean exists = FALSE;
  g_autofree gchar *answer = NULL;
  g_autoptr (GError) e = NULL;
  if (!datc_site_query_queue (site, c->queue, &exists, &answer, &e))
    {
      line (r, c->name, "queue exists", FALSE, e->message);
      return;
    }
  g_autofree gchar *missing = g_strdup_printf ("no queue %s: %s says: %s", c->queue, k->name,
                                               answer);
  line (r, c->name, "queue exists", exists, exists ? answer : missing);
}

static gboolean
probe (const char *self, DatcSitesFile *f, DatcSiteConfig *c, gchar **detail)
{
  g_autofree gchar *tmp = g_dir_make_tmp ("datc-probe-XXXXXX", NULL);
  g_autofree gchar *tasks = g_build_filename (tmp, "probe.txt", NULL);
  g_autofree gchar *sites = g_build_filename (tmp, "sites.ini", NULL);
  g_autofree gchar *dir = g_build_filename (tmp, "c", NULL);
  g_autoptr (GKeyFile) kf = g_key_file_new ();
  gsize n;
  g_auto (GStrv) keys = g_key_file_get_keys (f->keyfile, c->group, &n, NULL);
  for (gsize i = 0; i < n; i++)
    {
      g_autofree gchar *v = g_key_file_get_value (f->keyfile, c->group, keys[i], NULL);
      g_key_file_set_value (kf, c->group, keys[i], v);
    }
  g_key_file_set_string (kf, c->group, "max_proxies", "1");
  if (f->listen)
    g_key_file_set_string (kf, "master", "listen", f->listen);
  if (f->advertise)
    g_key_file_set_string (kf, "master", "advertise", f->advertise);
  g_file_set_contents (tasks, "true\n", -1, NULL);
  g_key_file_save_to_file (kf, sites, NULL);
  const char *argv[] = { self, "run", "--dir", dir, "--sites", sites, "--no-progress", tasks, NULL };
  gint status = -1;
  g_autofree gchar *err = NULL;
  g_autoptr (GError) error = NULL;
  gboolean spawned = g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                                   NULL, NULL, &err, &status, &error);
  gboolean ok = spawned && g_spawn_check_wait_status (status, NULL);
  if (!ok)
    *detail = g_strdup (spawned ? g_strstrip (err) : error->message);
  else
    *detail = g_strdup ("a proxy ran one task and ended");
  if (ok)
    {
      const char *rm[] = { "/bin/rm", "-rf", tmp, NULL };
      g_spawn_sync (NULL, (gchar **) rm, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL);
    }
  return ok;
}

int
datc_cmd_sites (int argc, char **argv)
{
  gboolean do_probe = FALSE;
  GOptionEntry entries[] = {
    { "probe", 0, 0, G_OPTION_ARG_NONE, &do_probe, "Also run one tiny proxy per site", NULL },
    { NULL }
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("check SITES.ini - check sites");
  g_autoptr (GError) error = NULL;
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || argc != 3
      || !g_str_equal (argv[1], "check"))
    {
      g_printerr ("datc sites: %s\n", error ? error->message : "usage: datc sites check SITES.ini [--probe]");
      return 2;
    }
  g_autoptr (DatcSitesFile) f = datc_sites_file_load (argv[2], &error);
  if (f == NULL)
    {
      g_printerr ("datc sites: %s\n", error->message);
      return 2;
    }
  g_autofree gchar *self = g_file_read_link ("/proc/self/exe", NULL);
  Report r = { 0 };
  printf ("%-14s %-22s %-4s %s\n", "SITE", "CHECK", "", "DETAIL");
  for (guint i = 0; i < f->sites->len; i++)
    {
      DatcSiteConfig *c = f->sites->pdata[i];
      g_autoptr (GError) e = NULL;
      g_autoptr (DatcSite) site = datc_site_new (c->name, c->transport, c->scheduler, f->keyfile,
                                                 c->group, &e);
      if (site == NULL)
        {
          line (&r, c->name, "reachable", FALSE, e->message);
          continue;
        }
      const char *t[] = { "true", NULL };
      DatcCommandResult res = { 0 };
      gboolean up = datc_site_run (site, t, &res, &e) && res.exit_status == 0;
      datc_command_result_clear (&res);
      g_autofree gchar *how = g_strdup_printf ("%s transport%s", c->transport,
                                               g_str_equal (c->transport, "ssh")
                                                   ? ", host key known" : "");
      line (&r, c->name, "reachable", up, up ? how : e ? e->message : "`true` failed");
      if (!up)
        continue;
      g_autoptr (GPtrArray) progs = scheduler_programs (c->scheduler);
      for (guint j = 0; j < progs->len; j++)
        {
          g_autofree gchar *what = g_strdup_printf ("%s found", (char *) progs->pdata[j]);
          g_clear_error (&e);
          gboolean has = site_has (site, progs->pdata[j], &e);
          line (&r, c->name, what, has, has ? NULL : e ? e->message : "not on the PATH");
        }
      check_queue (&r, site, c);
      g_clear_error (&e);
      const char *agent = g_str_equal (c->agent, "upload") ? NULL : c->agent;
      if (agent == NULL)
        {
          /* Deployable when sha256sum runs there and the cache dir is writable. */
          gboolean has = site_has (site, "sha256sum", &e);
          line (&r, c->name, "agent deployable", has,
                has ? "upload (sha256sum found)" : "upload needs sha256sum on the site");
        }
      else if (g_str_equal (c->transport, "local") && g_str_equal (agent, "datc-agent"))
        line (&r, c->name, "agent deployable", TRUE, "this machine's datc-agent");
      else
        {
          gboolean has = site_has (site, agent, &e);
          g_autofree gchar *missing = g_strdup_printf ("agent %s not found on site %s", agent,
                                                       c->name);
          line (&r, c->name, "agent deployable", has, has ? agent : missing);
        }
      if (do_probe && self != NULL)
        {
          g_autofree gchar *detail = NULL;
          gboolean ok = probe (self, f, c, &detail);
          line (&r, c->name, "probe", ok, detail);
        }
    }
  printf ("%u check%s failed\n", r.failed, r.failed == 1 ? "" : "s");
  return r.failed ? 1 : 0;
}
