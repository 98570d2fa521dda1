/* sitescheck.c: see sitescheck.h.  Every check goes through the same
 * site drivers a campaign uses, so what passes here is what will run:
 * the queue is asked about with the scheduler's own queue query
 * (driver.h: queue_argv, parse_queue). */
#include "sitescheck.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "driver.h"
#include "sitesfile.h"
#include "workdir.h"

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
  const char *none = NULL;
  if (!datc_scheduler_has_queues (c->scheduler, &none))
    {
      /* Would a proxy naming this queue even be written? */
      gboolean takes = datc_scheduler_takes_queue (c->scheduler, c->queue);
      g_autofree gchar *why = g_strdup_printf ("not applicable: %s", none);
      line (r, c->name, "queue exists", takes, takes ? why : none);
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
  g_autofree gchar *missing
      = g_strdup_printf ("no queue %s: %s says: %s", c->queue, c->scheduler, answer);
  line (r, c->name, "queue exists", exists, exists ? answer : missing);
}

/* The workdir a campaign will use: proxy scripts, their logs, the agent
 * (agent = upload) and its key go there at the first submit, so a site
 * whose workdir cannot be made fails every submit of the campaign.  The
 * same check the campaign makes (workdir.h), making nothing: an existing
 * one must be the user's, closed to others and writable, its parents the
 * user's or root's and writable by no one else; a missing one creatable. */
static gboolean
check_workdir (Report *r, DatcSite *site, DatcSiteConfig *c)
{
  const char *dir = c->workdir;
  if (dir == NULL && g_str_equal (c->transport, "local"))
    {
      line (r, c->name, "workdir writable", TRUE,
            "none set: proxies/SITE in each campaign's directory");
      return TRUE;
    }
  /* What run.c makes for a remote site: ~/.datc/TAG/SITE per campaign. */
  gboolean by_default = dir == NULL;
  if (by_default)
    dir = "~/.datc";
  gboolean ok = FALSE;
  g_autofree gchar *said = NULL;
  g_autoptr (GError) e = NULL;
  if (!datc_site_check_workdir (site, dir, &ok, &said, &e))
    {
      line (r, c->name, "workdir writable", FALSE, e->message);
      return FALSE;
    }
  g_autofree gchar *detail = by_default ? g_strdup_printf ("none set: ~/.datc/…/%s per "
                                                           "campaign; %s",
                                                           c->name, said)
                                        : g_steal_pointer (&said);
  line (r, c->name, "workdir writable", ok, detail);
  return ok;
}

/* ---- the probe ------------------------------------------------------ */

/* How long `datc run` has to end once told to stop: its own end (agents
 * released, proxies cancelled) takes at most 30 s. */
#define PROBE_STOP_S 40

typedef struct {
  gchar *job; /* the probe's proxy, once submitted */
  gboolean submitted, started, connected, finished, degraded;
  gchar *degraded_error;
  gchar *unreachable; /* what the agent said it could not reach, and why */
} ProbeSteps;

static void
probe_steps_clear (ProbeSteps *s)
{
  g_free (s->job);
  g_free (s->degraded_error);
  g_free (s->unreachable);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (ProbeSteps, probe_steps_clear)

/* Where the probe campaign is, from its own trace: the events the site
 * manager and the dispatcher write for every campaign. */
static void
probe_read_trace (const char *dir, ProbeSteps *s)
{
  g_autofree gchar *path = g_build_filename (dir, "trace.jsonl", NULL);
  g_autofree gchar *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return;
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_autoptr (JsonParser) parser = json_parser_new ();
      if (lines[i][0] == '\0' || !json_parser_load_from_data (parser, lines[i], -1, NULL)
          || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
        continue; /* a line being written */
      JsonObject *o = json_node_get_object (json_parser_get_root (parser));
      const char *event = json_object_get_string_member_with_default (o, "event", "");
      if (g_str_equal (event, "proxy_submitted"))
        {
          s->submitted = TRUE;
          g_free (s->job);
          s->job = g_strdup (json_object_get_string_member_with_default (o, "job", "?"));
        }
      else if (g_str_equal (event, "proxy_started"))
        s->started = TRUE;
      else if (g_str_equal (event, "agent_connected"))
        s->connected = TRUE;
      else if (g_str_equal (event, "site_degraded"))
        {
          s->degraded = TRUE;
          g_free (s->degraded_error);
          s->degraded_error
              = g_strdup (json_object_get_string_member_with_default (o, "error", "?"));
        }
      else if (g_str_equal (event, "site_ok"))
        s->degraded = FALSE;
      else if (g_str_equal (event, "agent_unreachable"))
        {
          g_free (s->unreachable);
          s->unreachable = g_strdup (json_object_get_string_member_with_default (o, "error", "?"));
        }
    }
  g_autofree gchar *results = g_build_filename (dir, "results.jsonl", NULL);
  GStatBuf st;
  s->finished = g_stat (results, &st) == 0 && st.st_size > 0;
}

/* The step the probe waits on, in words. */
static gchar *
probe_step (const ProbeSteps *s)
{
  if (!s->submitted)
    return g_strdup ("submitting the proxy");
  if (s->finished)
    return g_strdup ("the probe campaign to end (its task is done)");
  if (s->connected)
    return g_strdup ("the task to run on the agent");
  if (s->started)
    return g_strdup_printf ("the agent of job %s to connect back to the master", s->job);
  return g_strdup_printf ("job %s to start (it is queued on the site)", s->job);
}

/* The last thing the probe's master said about the site (its warnings
 * name it "site NAME: ..."), else its last line, or NULL. */
static gchar *
probe_last_word (const char *err_path, const char *site)
{
  g_autofree gchar *text = NULL;
  if (!g_file_get_contents (err_path, &text, NULL, NULL))
    return NULL;
  g_autofree gchar *tag = g_strdup_printf ("site %s: ", site);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = g_strv_length (lines); i-- > 0;)
    {
      const char *at = strstr (lines[i], tag);
      if (at != NULL)
        return g_utf8_make_valid (at + strlen (tag), -1);
    }
  for (guint i = g_strv_length (lines); i-- > 0;)
    if (g_strstrip (lines[i])[0] != '\0')
      return g_utf8_make_valid (lines[i], -1);
  return NULL;
}

/* Waits up to `ms` for `pid`; TRUE (and *status) once it ended. */
static gboolean
probe_reap (GPid pid, guint ms, int *status)
{
  gint64 until = g_get_monotonic_time () + (gint64) ms * 1000;
  for (;;)
    {
      pid_t got = waitpid (pid, status, WNOHANG);
      if (got == pid || (got < 0 && errno != EINTR))
        return TRUE;
      if (g_get_monotonic_time () >= until)
        return FALSE;
      g_usleep (50 * 1000);
    }
}

/* A one-task campaign on this site alone, through `datc run` itself.  It
 * has a deadline: at `timeout_s`, or as soon as the site is degraded, the
 * campaign is stopped (SIGTERM: its proxies are cancelled like any
 * campaign's) and the detail says which step it was waiting on.  Each new
 * step is said on stderr as it comes, so a long queue wait is not
 * silence.  Its directory is removed whatever the outcome; what it said
 * is in the detail. */
static gboolean
probe (const char *self, DatcSitesFile *f, DatcSiteConfig *c, const char *reach, guint timeout_s,
       gchar **detail, gchar **unreachable)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *tmp = g_dir_make_tmp ("datc-probe-XXXXXX", &error);
  if (tmp == NULL)
    {
      *detail = g_strdup (error->message);
      return FALSE;
    }
  g_autofree gchar *tasks = g_build_filename (tmp, "probe.txt", NULL);
  g_autofree gchar *sites = g_build_filename (tmp, "sites.ini", NULL);
  g_autofree gchar *err_path = g_build_filename (tmp, "stderr", NULL);
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
  if (reach != NULL)
    g_key_file_set_string (kf, c->group, "reach", reach);
  /* An agent that cannot reach the master says so within seconds: read
   * its log sooner than a campaign would. */
  if (!g_key_file_has_key (kf, c->group, "connect_wait", NULL))
    g_key_file_set_string (kf, c->group, "connect_wait", "15s");
  if (f->listen)
    g_key_file_set_string (kf, "master", "listen", f->listen);
  if (f->advertise)
    g_key_file_set_string (kf, "master", "advertise", f->advertise);
  const char *argv[]
      = { self, "run", "--dir", dir, "--sites", sites, "--no-progress", tasks, NULL };
  int null_fd = -1, err_fd = -1;
  GPid pid = 0;
  gboolean spawned
      = g_file_set_contents (tasks, "true\n", -1, &error)
        && g_key_file_save_to_file (kf, sites, &error)
        && (null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC)) >= 0
        && (err_fd = open (err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) >= 0
        && g_spawn_async_with_fds (NULL, (gchar **) argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                   NULL, &pid, null_fd, null_fd, err_fd, &error);
  if (!spawned && error == NULL)
    g_set_error (&error, G_IO_ERROR, g_io_error_from_errno (errno), "%s: %s",
                 null_fd < 0 ? "/dev/null" : err_path, g_strerror (errno));
  if (null_fd >= 0)
    close (null_fd);
  if (err_fd >= 0)
    close (err_fd);

  gboolean ok = FALSE;
  if (!spawned)
    *detail = g_strdup (error->message);
  else
    {
      gint64 deadline = g_get_monotonic_time () + (gint64) timeout_s * G_USEC_PER_SEC;
      g_auto (ProbeSteps) s = { 0 };
      g_autofree gchar *step = NULL;
      int status = 0;
      gboolean ended = FALSE;
      while (!(ended = probe_reap (pid, 200, &status)))
        {
          probe_read_trace (dir, &s);
          g_autofree gchar *now = probe_step (&s);
          if (g_strcmp0 (now, step) != 0)
            {
              g_printerr ("probe %s: waiting for %s\n", c->name, now);
              g_free (step);
              step = g_steal_pointer (&now);
            }
          if (s.degraded || g_get_monotonic_time () >= deadline)
            break;
        }
      probe_read_trace (dir, &s);
      if (unreachable != NULL)
        *unreachable = g_strdup (s.unreachable);
      if (ended)
        {
          ok = WIFEXITED (status) && WEXITSTATUS (status) == 0;
          g_autofree gchar *said = probe_last_word (err_path, c->name);
          *detail = ok ? g_strdup ("a proxy ran one task and ended")
                       : g_strdup_printf ("the probe campaign ended with status %d%s%s",
                                          WIFEXITED (status) ? WEXITSTATUS (status)
                                                             : 128 + WTERMSIG (status),
                                          said ? ": " : "", said ? said : "");
        }
      else
        {
          g_autofree gchar *said = probe_last_word (err_path, c->name);
          if (s.degraded)
            *detail = g_strdup_printf ("the site is degraded, while waiting for %s: %s", step,
                                       s.degraded_error);
          else
            *detail = g_strdup_printf ("no answer within %u s: waiting for %s%s%s", timeout_s, step,
                                       said ? "; the master last said: " : "", said ? said : "");
          g_printerr ("probe %s: stopping the probe campaign (its proxy is cancelled)\n", c->name);
          kill (pid, SIGTERM);
          if (!probe_reap (pid, PROBE_STOP_S * 1000, &status))
            {
              g_printerr ("probe %s: the probe campaign did not end within %d s: killed; its "
                          "proxy (job %s) may be left on the site\n",
                          c->name, PROBE_STOP_S, s.job ? s.job : "none");
              kill (pid, SIGKILL);
              waitpid (pid, &status, 0);
            }
        }
      g_spawn_close_pid (pid);
    }
  const char *rm[] = { "/bin/rm", "-rf", tmp, NULL };
  g_spawn_sync (NULL, (gchar **) rm, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL);
  return ok;
}

/* The probe as configured, and whether the site's compute nodes reach
 * the master directly: a direct site whose agent says it cannot reach
 * the master is probed again through a relay, and `reach = relay`
 * recommended when that works; a relay site is also probed directly
 * when [master] has a listen to probe. */
static void
probe_site (Report *r, const char *self, DatcSitesFile *f, DatcSiteConfig *c, guint timeout_s)
{
  g_autofree gchar *detail = NULL, *unreachable = NULL;
  gboolean ok = probe (self, f, c, NULL, timeout_s, &detail, &unreachable);
  line (r, c->name, c->relay ? "probe (reach = relay)" : "probe", ok, detail);
  gboolean remote = g_str_equal (c->transport, "ssh");
  if (!c->relay)
    {
      if (ok)
        line (r, c->name, "reach", TRUE, "compute nodes reach the master directly");
      else if (unreachable != NULL)
        {
          g_autofree gchar *why = g_strdup_printf ("compute nodes cannot reach the master "
                                                   "directly: %s",
                                                   unreachable);
          line (r, c->name, "reach", FALSE, why);
          if (!remote)
            return;
          g_autofree gchar *relayed = NULL;
          gboolean works = probe (self, f, c, "relay", timeout_s, &relayed, NULL);
          line (r, c->name, "probe (reach = relay)", works, relayed);
          if (works)
            printf ("%-14s recommended: set reach = relay in [site %s] (its compute nodes "
                    "reach the login node; the relay carried the probe's agent)\n",
                    c->name, c->name);
        }
      return;
    }
  if (f->listen == NULL)
    {
      printf ("%-14s %-22s %-4s %s\n", c->name, "reach", "-",
              "direct not probed ([master] has no listen): agents reach the master through "
              "the relay");
      return;
    }
  g_autofree gchar *direct = NULL, *direct_unreachable = NULL;
  gboolean direct_ok = probe (self, f, c, "direct", timeout_s, &direct, &direct_unreachable);
  g_autofree gchar *said = direct_ok
                               ? g_strdup ("compute nodes reach the master directly too "
                                           "(reach = direct would do)")
                               : g_strdup_printf ("compute nodes cannot reach the master directly "
                                                  "(%s): reach = relay is needed",
                                                  direct_unreachable ? direct_unreachable : direct);
  printf ("%-14s %-22s %-4s %s\n", c->name, "reach", "-", said);
}

int
datc_cmd_sites (int argc, char **argv)
{
  gboolean do_probe = FALSE;
  gint probe_timeout = 600;
  GOptionEntry entries[] = {
    { "probe", 0, 0, G_OPTION_ARG_NONE, &do_probe, "Also run one tiny proxy per site", NULL },
    { "probe-timeout", 0, 0, G_OPTION_ARG_INT, &probe_timeout,
      "Seconds a probe may take, queue wait included (default 600)", "S" },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("check SITES.ini - check sites");
  g_autoptr (GError) error = NULL;
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || argc != 3
      || !g_str_equal (argv[1], "check"))
    {
      g_printerr ("datc sites: %s\n",
                  error ? error->message : "usage: datc sites check SITES.ini [--probe]");
      return 2;
    }
  if (probe_timeout < 1)
    {
      g_printerr ("datc sites: --probe-timeout must be at least 1 second\n");
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
      g_autoptr (DatcSite) site
          = datc_site_new (c->name, c->transport, c->scheduler, f->keyfile, c->group, &e);
      if (site == NULL)
        {
          line (&r, c->name, "reachable", FALSE, e->message);
          continue;
        }
      const char *t[] = { "true", NULL };
      DatcCommandResult res = { 0 };
      gboolean up = datc_site_run (site, t, &res, &e) && res.exit_status == 0;
      datc_command_result_clear (&res);
      g_autofree gchar *how
          = g_strdup_printf ("%s transport%s", c->transport,
                             g_str_equal (c->transport, "ssh") ? ", host key known" : "");
      line (&r, c->name, "reachable", up, up ? how : e ? e->message : "`true` failed");
      if (!up)
        continue;
      guint failed_before = r.failed;
      g_auto (GStrv) progs = datc_scheduler_programs (c->scheduler);
      for (guint j = 0; progs != NULL && progs[j] != NULL; j++)
        {
          g_autofree gchar *what = g_strdup_printf ("%s found", progs[j]);
          g_clear_error (&e);
          gboolean has = site_has (site, progs[j], &e);
          line (&r, c->name, what, has, has ? NULL : e ? e->message : "not on the PATH");
        }
      check_queue (&r, site, c);
      check_workdir (&r, site, c);
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
          g_autofree gchar *missing
              = g_strdup_printf ("agent %s not found on site %s", agent, c->name);
          line (&r, c->name, "agent deployable", has, has ? agent : missing);
        }
      /* A probe of a site that already failed a check would only wait
       * for the same failure. */
      if (do_probe && self != NULL && r.failed > failed_before)
        line (&r, c->name, "probe", FALSE, "not run: the checks above failed");
      else if (do_probe && self != NULL)
        probe_site (&r, self, f, c, (guint) probe_timeout);
    }
  printf ("%u check%s failed\n", r.failed, r.failed == 1 ? "" : "s");
  return r.failed ? 1 : 0;
}
