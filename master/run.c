/* run.c: the master's main loop.
 *
 *   load the bag -> open the campaign dir -> replay the ledger
 *   -> bind the dispatcher -> provision the local site
 *   -> loop { provision; poll; receive; tick; flush } until the bag is done
 *   -> release agents -> end every proxy -> summary
 *
 * One thread: ZeroMQ sockets are only touched here, signals arrive on a
 * signalfd polled beside them. */
#include "run.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include <zmq.h>

#include "bag.h"
#include "campaign.h"
#include "curve.h"
#include "dispatcher.h"
#include "driver.h"
#include "ledger.h"
#include "filepin.h"
#include "malloctune.h"
#include "control.h"
#include "provisioner.h"
#include "relay.h"
#include "sitesfile.h"
#include "upload.h"
#include "status.h"
#include "trace.h"

#define EXIT_ALL_OK 0
#define EXIT_SOME_FAILED 1
#define EXIT_INPUT 2
#define EXIT_CANNOT_RUN 3

/* What the control handler needs to reach. */
typedef struct {
  const char *dir;
  DatcLedger *ledger;
  DatcDispatcher *disp;
  DatcProvisioner *prov;
  DatcRate *rate;
  gboolean open;
  gboolean cancelled_all;
} Master;

/* A request that changes the campaign (submit, cancel, close; its reply
 * leaves once the change is committed), or one not known. */
static JsonNode *
handle_change (Master *m, const char *cmd, JsonObject *req)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();

  if (g_str_equal (cmd, "submit"))
    {
      const char *name = json_object_get_string_member_with_default (req, "name", "submitted");
      const char *fmt = json_object_get_string_member_with_default (req, "format", "auto");
      const char *data = json_object_get_string_member_with_default (req, "data", NULL);
      DatcTaskFileFormat format;
      guint64 first, count;
      g_autoptr (GError) error = NULL;
      if (data == NULL || !datc_task_file_format_parse (fmt, &format))
        return datc_control_error_reply (
            "submit needs \"data\" and a format of auto, lines or jsonl");
      if (!datc_ledger_submit (m->ledger, name, data, strlen (data), format, &first, &count,
                               &error))
        return datc_control_error_reply (error->message);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "first");
      json_builder_add_int_value (b, (gint64) first);
      json_builder_set_member_name (b, "count");
      json_builder_add_int_value (b, (gint64) count);
      json_builder_end_object (b);
      return json_builder_get_root (b);
    }

  if (g_str_equal (cmd, "cancel"))
    {
      g_autoptr (GArray) running = g_array_new (FALSE, FALSE, sizeof (DatcLedgerRunning));
      guint64 n;
      if (json_object_has_member (req, "ids"))
        {
          JsonArray *ids = json_object_get_array_member (req, "ids");
          if (ids == NULL)
            return datc_control_error_reply ("\"ids\" must be an array of task ids");
          g_autoptr (GArray) v = g_array_new (FALSE, FALSE, sizeof (guint64));
          for (guint i = 0; i < json_array_get_length (ids); i++)
            {
              gint64 id = json_array_get_int_element (ids, i);
              if (id <= 0)
                return datc_control_error_reply ("task ids are positive integers");
              guint64 u = (guint64) id;
              g_array_append_val (v, u);
            }
          n = datc_ledger_cancel (m->ledger, (const guint64 *) v->data, v->len, running);
        }
      else
        {
          n = datc_ledger_cancel (m->ledger, NULL, 0, running);
          m->cancelled_all = TRUE;
          m->open = FALSE;
        }
      datc_dispatcher_cancel_running (m->disp, running);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "cancelled");
      json_builder_add_int_value (b, (gint64) n);
      json_builder_end_object (b);
      return json_builder_get_root (b);
    }

  if (g_str_equal (cmd, "close"))
    {
      m->open = FALSE;
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "closed");
      json_builder_add_boolean_value (b, TRUE);
      json_builder_end_object (b);
      return json_builder_get_root (b);
    }
  g_autofree gchar *msg = g_strdup_printf ("unknown command \"%s\"", cmd);
  return datc_control_error_reply (msg);
}

/* `status`, with "agents_max" N (optional) to list only the first N
 * agents. */
static gchar *
handle_status (Master *m, JsonObject *req)
{
  guint agents_max = G_MAXUINT;
  JsonNode *max = json_object_get_member (req, "agents_max");
  if (max != NULL)
    {
      if (!JSON_NODE_HOLDS_VALUE (max) || json_node_get_value_type (max) != G_TYPE_INT64
          || json_node_get_int (max) < 0)
        {
          g_autoptr (JsonNode) refused
              = datc_control_error_reply ("\"agents_max\" must be a count of agents (0 or more)");
          return json_to_string (refused, FALSE);
        }
      agents_max = (guint) MIN (json_node_get_int (max), (gint64) G_MAXUINT);
    }
  return datc_status_reply (req, datc_status_text (m->dir, m->ledger, m->disp, m->prov, m->rate,
                                                   TRUE, m->open, agents_max));
}

static gchar *
handle_control (JsonObject *req, gpointer user_data)
{
  Master *m = user_data;
  const char *cmd = json_object_get_string_member_with_default (req, "cmd", "");
  if (g_str_equal (cmd, "status"))
    return handle_status (m, req);
  g_autoptr (JsonNode) reply = handle_change (m, cmd, req);
  return json_to_string (reply, FALSE);
}

/* While the run ends (agents released, sites cleaned: up to SHUTDOWN_MS)
 * the control socket still answers `status`; anything that would change
 * the campaign is refused, since nothing more will run in this master. */
static gchar *
handle_control_ending (JsonObject *req, gpointer user_data)
{
  const char *cmd = json_object_get_string_member_with_default (req, "cmd", "");
  if (g_str_equal (cmd, "status"))
    return handle_control (req, user_data);
  g_autoptr (JsonNode) refused
      = datc_control_error_reply ("the campaign is ending: this master takes no more requests "
                                  "(run the same command again to resume)");
  return json_to_string (refused, FALSE);
}

/* The master and its control socket, for a callback. */
typedef struct {
  Master *m;
  DatcControl *control;
} MasterControl;

static void
serve_ending (gpointer data)
{
  MasterControl *e = data;
  datc_control_receive (e->control, handle_control_ending, e->m);
  /* Status only, nothing to commit first. */
  if (datc_control_replies_pending (e->control))
    datc_control_send_replies (e->control);
}

static void
progress (Master *m, gboolean final)
{
  /* \r and erase-to-end: the line updates in place, and the last call
   * only erases it, so the summary starts on a clean line. */
  fputs ("\r\033[K", stderr);
  if (!final)
    {
      g_autoptr (JsonNode) st
          = datc_status_build (m->dir, m->ledger, m->disp, m->prov, m->rate, TRUE, m->open, 0);
      g_autofree gchar *line = datc_status_line (json_node_get_object (st));
      fputs (line, stderr);
    }
  fflush (stderr);
}

static gchar *
find_agent (void)
{
  const char *env = g_getenv ("DATC_AGENT");
  if (env != NULL && env[0])
    return g_strdup (env);
  g_autofree gchar *self = g_file_read_link ("/proc/self/exe", NULL);
  if (self != NULL)
    {
      g_autofree gchar *dir = g_path_get_dirname (self);
      const char *cands[] = { "datc-agent", "../worker-agent/datc-agent" };
      for (guint i = 0; i < G_N_ELEMENTS (cands); i++)
        {
          g_autofree gchar *p = g_build_filename (dir, cands[i], NULL);
          if (g_file_test (p, G_FILE_TEST_IS_EXECUTABLE))
            return g_canonicalize_filename (p, NULL);
        }
    }
  return g_find_program_in_path ("datc-agent");
}

/* The `datc` front (front.c) beside this datc-full, as an install puts
 * them, kept in memory while the master runs (filepin.h says why), or
 * NULL when there is none: a `datc status` then costs what it did. */
static DatcFilePin *
pin_front (void)
{
  g_autofree gchar *self = g_file_read_link ("/proc/self/exe", NULL);
  if (self == NULL)
    return NULL;
  g_autofree gchar *dir = g_path_get_dirname (self);
  g_autofree gchar *front = g_build_filename (dir, "datc", NULL);
  g_autoptr (GError) error = NULL;
  DatcFilePin *pin = datc_file_pin (front, &error);
  if (pin == NULL)
    g_debug ("datc: the front's pages are not kept in memory: %s", error->message);
  else if (!datc_file_pin_locked (pin))
    g_debug ("datc: %s mapped but not locked (RLIMIT_MEMLOCK)", front);
  return pin;
}

/* The endpoint agents are told: the bound one, with the advertised host in
 * place of a wildcard address. */
static gchar *
advertised_endpoint (const char *bound, const char *advertise)
{
  const char *colon = strrchr (bound, ':');
  if (!g_str_has_prefix (bound, "tcp://") || colon == NULL)
    return g_strdup (bound);
  g_autofree gchar *host = g_strndup (bound + 6, (gsize) (colon - bound - 6));
  if (advertise != NULL)
    return g_strdup_printf ("tcp://%s%s", advertise, colon);
  if (g_str_equal (host, "0.0.0.0") || g_str_equal (host, "*") || g_str_equal (host, "[::]"))
    return g_strdup_printf ("tcp://%s%s", g_get_host_name (), colon);
  return g_strdup (bound);
}

/* One provisioner site per [site] of SITES.ini.  Remote sites get their
 * own agent key (`site_keys`: site -> its key file here) copied (mode
 * 0600) into their work directory.  A remote site's workdir is by default
 * ~/.datc/TAG/SITE in the login user's home (a shared file system on a
 * cluster, where /tmp is the login node's own and every user's): TAG is a
 * plain name of 16 hex digits from this host and the campaign's
 * directory, so two campaigns of a user never share one, and a resumed
 * campaign finds its own again.  Every workdir but a local site's default
 * (inside the campaign's directory) is made and checked on the site
 * before anything goes there (workdir.h). */
static GPtrArray *
sites_from_file (DatcSitesFile *file, DatcCampaign *campaign, const char *local_agent,
                 GHashTable *site_keys, const char *dispatcher, GError **error)
{
  g_autoptr (GPtrArray) specs
      = g_ptr_array_new_with_free_func ((GDestroyNotify) datc_site_spec_free);
  g_autofree gchar *where
      = g_strdup_printf ("%s\n%s", g_get_host_name (), datc_campaign_dir (campaign));
  g_autofree gchar *tag = g_compute_checksum_for_string (G_CHECKSUM_SHA256, where, -1);
  for (guint i = 0; i < file->sites->len; i++)
    {
      DatcSiteConfig *c = file->sites->pdata[i];
      g_autoptr (DatcSiteSpec) spec = g_new0 (DatcSiteSpec, 1);
      gboolean local = g_str_equal (c->transport, "local");
      spec->name = g_strdup (c->name);
      spec->site
          = datc_site_new (c->name, c->transport, c->scheduler, file->keyfile, c->group, error);
      if (spec->site == NULL)
        return NULL;
      spec->slots_per_proxy = c->slots_per_proxy;
      spec->max_proxies = c->max_proxies;
      spec->walltime_s = c->walltime_s;
      spec->queue = g_strdup (c->queue);
      spec->submit_args = g_strdup (c->submit_args);
      if (c->workdir != NULL)
        spec->workdir = g_strdup (c->workdir);
      else if (local)
        spec->workdir = g_build_filename (datc_campaign_dir (campaign), "proxies", c->name, NULL);
      else
        spec->workdir = g_strdup_printf ("~/.datc/%.16s/%s", tag, c->name);
      spec->make_workdir = c->workdir != NULL || !local;
      spec->poll_s = c->poll_s;
      spec->command_timeout_s = c->command_timeout_s;
      spec->connect_wait_s = c->connect_wait_s;
      spec->migrate_after_s = !c->migrate_set           ? 0
                              : c->migrate_after_s == 0 ? DATC_MIGRATE_NEVER
                                                        : c->migrate_after_s;
      spec->calls_per_minute = c->calls_set ? c->calls_per_minute : DATC_SITE_CALLS_DEFAULT;
      /* The agent and the key reach the site at its first submit (see
       * provisioner.c), so a site unreachable now only delays itself. */
      if (g_str_equal (c->agent, "upload"))
        {
          /* The statically linked agent when it was built, so it runs on
           * sites whose libraries differ; copied once per content. */
          g_autofree gchar *dir = g_path_get_dirname (local_agent);
          g_autofree gchar *static_agent = g_build_filename (dir, "datc-agent-static", NULL);
          spec->upload_from = g_strdup (
              g_file_test (static_agent, G_FILE_TEST_IS_EXECUTABLE) ? static_agent : local_agent);
        }
      else
        spec->agent_path
            = g_strdup (local && g_str_equal (c->agent, "datc-agent") ? local_agent : c->agent);
      const char *site_key = g_hash_table_lookup (site_keys, c->name);
      if (local)
        spec->key_file = g_strdup (site_key);
      else
        {
          spec->key_file = g_build_filename (spec->workdir, "agent.key", NULL);
          /* The secret, held until the site has it: wiped on free. */
          spec->key_data = datc_curve_secret_file_read (site_key, error);
          if (spec->key_data == NULL)
            return NULL;
        }
      if (c->relay)
        {
          /* Its own connection: the relay's session never waits behind
           * the site's commands, nor they behind it. */
          DatcSite *own
              = datc_site_new (c->name, c->transport, c->scheduler, file->keyfile, c->group, error);
          if (own == NULL)
            return NULL;
          datc_site_set_command_timeout (
              own,
              (c->command_timeout_s ? c->command_timeout_s : DATC_SITE_COMMAND_TIMEOUT_MS / 1000)
                  * 1000);
          g_autofree gchar *port_file
              = g_strdup_printf ("%s/relay-%s.port", datc_campaign_dir (campaign), c->name);
          DatcRelayOptions ro = { .site_name = c->name,
                                  .site = own,
                                  .target = dispatcher,
                                  .listen = c->relay_address,
                                  .port_file = port_file };
          spec->relay = datc_relay_new (&ro, error);
          if (spec->relay == NULL)
            return NULL;
        }
      g_ptr_array_add (specs, g_steal_pointer (&spec));
    }
  return g_steal_pointer (&specs);
}

/* The keys the dispatcher knows: each site of this run gets its own
 * (made the first time it is used; `site_keys`: site -> key file), the
 * hand-started agents' keys, and the keys of sites an earlier run of the
 * campaign used and this one does not, refused (their agents have no
 * proxy here) but kept as names no hand-started agent may take.  The
 * strvs hold the strings `keys` points to. */
static gboolean
agent_keys_for (DatcCampaign *campaign, DatcSitesFile *file, gboolean no_local,
                GHashTable *site_keys, GArray *keys, GStrv *hand, GStrv *sites, GStrv *publics,
                GError **error)
{
  g_autoptr (GPtrArray) names = g_ptr_array_new ();
  if (file != NULL)
    for (guint i = 0; i < file->sites->len; i++)
      g_ptr_array_add (names, ((DatcSiteConfig *) file->sites->pdata[i])->name);
  else if (!no_local)
    g_ptr_array_add (names, "local");
  for (guint i = 0; i < names->len; i++)
    {
      gchar *path = datc_campaign_site_key (campaign, names->pdata[i], error);
      if (path == NULL)
        return FALSE;
      g_hash_table_replace (site_keys, names->pdata[i], path);
    }
  *hand = datc_campaign_agent_publics (campaign, error);
  if (*hand == NULL || (*publics = datc_campaign_site_publics (campaign, sites, error)) == NULL)
    return FALSE;
  for (guint i = 0; (*hand)[i] != NULL; i++)
    {
      DatcAgentKey k = { .site = NULL, .public_z85 = (*hand)[i] };
      g_array_append_val (keys, k);
    }
  for (guint i = 0; (*publics)[i] != NULL; i++)
    {
      DatcAgentKey k = { .site = (*sites)[i],
                         .public_z85 = (*publics)[i],
                         .revoked = !g_hash_table_contains (site_keys, (*sites)[i]) };
      g_array_append_val (keys, k);
    }
  return TRUE;
}

/* `listen` for the dispatcher.  A resumed campaign asked for any port
 * (HOST:0) takes the port it had before, from DIR/endpoint: agents started
 * by hand know only that one and keep retrying it; another port would
 * strand them and their finished results.  *same_port says it did. */
static gchar *
listen_endpoint (DatcCampaign *campaign, const char *listen, gboolean *same_port)
{
  g_autofree gchar *path = g_build_filename (datc_campaign_dir (campaign), "endpoint", NULL);
  g_autofree gchar *before = NULL;
  guint64 port;
  *same_port = FALSE;
  if (!datc_campaign_resumed (campaign) || !g_str_has_suffix (listen, ":0")
      || !g_file_get_contents (path, &before, NULL, NULL))
    return g_strdup (listen);
  g_strstrip (before);
  const char *colon = strrchr (before, ':');
  if (!g_str_has_prefix (before, "tcp://") || colon == NULL
      || !g_ascii_string_to_unsigned (colon + 1, 10, 1, 65535, &port, NULL))
    return g_strdup (listen);
  *same_port = TRUE;
  return g_strdup_printf ("%.*s%" G_GUINT64_FORMAT, (int) (strlen (listen) - 1), listen, port);
}

static gchar *
default_dir (const char *task_file)
{
  g_autofree gchar *base = g_path_get_basename (task_file);
  char *dot = strrchr (base, '.');
  if (dot != NULL && dot != base)
    *dot = '\0';
  return g_strdup_printf ("%s.datc", base);
}

static void
summary (DatcLedger *ledger, const char *dir, gint64 started_us, gboolean json)
{
  DatcLedgerCounts c;
  datc_ledger_counts (ledger, &c);
  double secs = (g_get_monotonic_time () - started_us) / 1e6;
  if (json)
    printf ("{\"dir\":\"%s\",\"tasks\":{\"total\":%" G_GUINT64_FORMAT ",\"done\":%" G_GUINT64_FORMAT
            ",\"failed\":%" G_GUINT64_FORMAT ",\"queued\":%" G_GUINT64_FORMAT
            ",\"running\":%" G_GUINT64_FORMAT ",\"cancelled\":%" G_GUINT64_FORMAT
            "},\"seconds\":%.3f}\n",
            dir, c.total, c.done, c.failed, c.queued, c.running, c.cancelled, secs);
  else
    {
      g_autofree gchar *cancelled
          = c.cancelled ? g_strdup_printf (", %" G_GUINT64_FORMAT " cancelled", c.cancelled)
                        : g_strdup ("");
      fprintf (stderr,
               "datc: %s: %" G_GUINT64_FORMAT " tasks, %" G_GUINT64_FORMAT
               " done, %" G_GUINT64_FORMAT " failed%s%s in %.2f s\n",
               dir, c.total, c.done, c.failed, cancelled,
               c.queued + c.running ? " (unfinished)" : "", secs);
    }
}

/* How long the end of a run may take to clean the sites, whatever ended
 * it. */
#define SHUTDOWN_MS 30000

/* Every way out of a running campaign ends here: agents are told to go,
 * every proxy is cancelled and polled until gone and the agent keys are
 * removed from the sites, within SHUTDOWN_MS; what could not be cleaned
 * is logged (datc_provisioner_shutdown).  While the ledger works
 * (`commit`) the agents' last results and the proxies' ends are
 * committed; a failure to commit the results is said and set in `error`.
 * After a failed commit nothing more is: a failed fdatasync must not be
 * followed by one that seems to succeed (ledger.h), and the next run
 * re-derives everything from the journal, adopting and cancelling any
 * proxy not recorded as ended.  Returns TRUE when nothing is left on the
 * sites. */
static gboolean
end_run (DatcDispatcher *disp, DatcProvisioner *prov, const char *why, gboolean commit,
         GError **error)
{
  datc_dispatcher_release_all (disp, why);
  if (commit && !datc_dispatcher_flush (disp, TRUE, NULL, error))
    {
      g_printerr ("datc: %s\n", (*error)->message);
      commit = FALSE;
    }
  if (!commit)
    datc_dispatcher_send_uncommitted (disp);
  gboolean clean = datc_provisioner_shutdown (prov, why, SHUTDOWN_MS);
  /* Only the proxies' ends: a failure costs the next run a poll. */
  if (commit)
    datc_dispatcher_flush (disp, TRUE, NULL, NULL);
  return clean;
}

/* Every agent is a connection and, while it writes output, an open file:
 * a campaign with hundreds of agents would run out under the usual soft
 * limit of 1024.  The master takes what the hard limit allows; what it
 * starts (the local transport's commands, local agents) gets the user's
 * limit back. */
static void
raise_fd_limit (void)
{
  struct rlimit lim;
  if (getrlimit (RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == lim.rlim_max)
    return;
  rlim_t user = lim.rlim_cur;
  lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? MAX (user, (rlim_t) 1 << 20) : lim.rlim_max;
  if (setrlimit (RLIMIT_NOFILE, &lim) == 0)
    datc_site_set_child_fd_limit ((guint64) user);
}

/* What `datc status` is told while the campaign loads (on the control
 * socket's loading thread: only `phase` and `load` change meanwhile). */
typedef struct {
  const char *dir;
  gint phase; /* DatcStatusLoading, g_atomic */
  DatcLedgerLoad load;
} Loading;

static gchar *
status_while_loading (JsonObject *req, gpointer user_data)
{
  Loading *ld = user_data;
  g_autoptr (JsonNode) st
      = datc_status_loading (ld->dir, (DatcStatusLoading) g_atomic_int_get (&ld->phase),
                             __atomic_load_n (&ld->load.replayed, __ATOMIC_RELAXED),
                             __atomic_load_n (&ld->load.journal_bytes, __ATOMIC_RELAXED));
  return datc_status_reply (req, json_to_string (st, FALSE));
}

/* The control socket, from the moment DIR is ours, with a thread that
 * answers `status` until the loop takes over: ZeroMQ's threads and that
 * one start with the loop's signals blocked (signals_fd below), and the
 * caller's mask is put back, so that a signal during the load ends the
 * process as before. */
static DatcControl *
control_for_loading (DatcCampaign *campaign, Loading *ld, GError **error)
{
  sigset_t mask, old;
  sigemptyset (&mask);
  sigaddset (&mask, SIGINT);
  sigaddset (&mask, SIGTERM);
  sigaddset (&mask, SIGHUP);
  pthread_sigmask (SIG_BLOCK, &mask, &old);
  DatcControl *control = datc_control_new (datc_campaign_dir (campaign), error);
  if (control != NULL)
    datc_control_start_loading (control, status_while_loading, ld);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  return control;
}

/* Steps 0 to 2: the sites file, the campaign directory (locked, its
 * control socket answering `status` from then on), the bag, each checked
 * whole before anything starts (a bad line: EXIT_INPUT, and a directory
 * made for it removed), then the ledger, replayed from the journal.
 * Returns EXIT_ALL_OK, or the exit status once it has said why.  The
 * ledger refers to the bag: the caller frees the ledger first. */
static int
open_campaign (const DatcRunOptions *o, DatcSitesFile **sites_file, DatcBag **bag,
               DatcCampaign **campaign, DatcLedger **ledger, DatcControl **control)
{
  g_autoptr (GError) error = NULL;
  DatcTaskFileFormat format;

  if (!datc_task_file_format_parse (o->format ? o->format : "auto", &format))
    {
      g_printerr ("datc: --format must be auto, lines or jsonl\n");
      return EXIT_INPUT;
    }

  if (o->sites != NULL)
    {
      *sites_file = datc_sites_file_load (o->sites, &error);
      if (*sites_file == NULL)
        {
          g_printerr ("datc: %s\n", error->message);
          return EXIT_INPUT;
        }
    }

  g_autofree gchar *dir = o->dir ? g_strdup (o->dir) : default_dir (o->task_file);
  *campaign = datc_campaign_lock (dir, &error);
  if (*campaign == NULL)
    {
      g_printerr ("datc: %s\n", error->message);
      return EXIT_CANNOT_RUN;
    }
  g_autofree Loading *ld = g_new0 (Loading, 1);
  ld->dir = datc_campaign_dir (*campaign);
  ld->phase = DATC_STATUS_LOADING_TASKS;
  *control = control_for_loading (*campaign, ld, &error);
  if (*control == NULL)
    {
      g_printerr ("datc: %s\n", error->message);
      return EXIT_CANNOT_RUN;
    }

  *bag = datc_bag_new ();
  g_autofree gchar *sha = NULL;
  int status = EXIT_ALL_OK;
  if (!datc_bag_load_file (*bag, o->task_file, format, &sha, &error))
    status = EXIT_INPUT;
  else if (!datc_campaign_bind (*campaign, o->task_file, sha, o->format ? o->format : "auto",
                                datc_mode_name (o->mode), &error))
    status = g_error_matches (error, DATC_CAMPAIGN_ERROR, DATC_CAMPAIGN_ERROR_MISMATCH)
                 ? EXIT_INPUT
                 : EXIT_CANNOT_RUN;
  if (status == EXIT_ALL_OK)
    {
      DatcLedgerOptions lopt = {
        .crash_limit = o->crash_limit ? o->crash_limit : 5,
        /* Twice the agent timeout: an agent notices a silent master within
         * it and then says HELLO at least every half timeout. */
        .reattach_window_ms = 2 * (o->timeout_ms ? o->timeout_ms : 30000u),
        .retry_cancelled = o->retry_cancelled,
        .compact_min_bytes = o->compact_min_bytes  ? o->compact_min_bytes
                             : *sites_file != NULL ? (*sites_file)->compact_min_bytes
                                                   : 0,
        .compact_factor = *sites_file != NULL ? (*sites_file)->compact_factor : 0,
        .load = &ld->load,
      };
      g_atomic_int_set (&ld->phase, DATC_STATUS_LOADING_JOURNAL);
      *ledger = datc_ledger_open (datc_campaign_dir (*campaign), *bag, o->task_file, sha, &lopt,
                                  &error);
      if (*ledger == NULL)
        status = g_error_matches (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_MISMATCH)
                     ? EXIT_INPUT
                     : EXIT_CANNOT_RUN;
    }
  /* `ld` goes with this frame: the thread that reads it stops first. */
  datc_control_stop_loading (*control);
  if (status != EXIT_ALL_OK)
    {
      g_printerr ("datc: %s\n", error->message);
      g_clear_pointer (control, datc_control_free);
      datc_campaign_abandon (*campaign);
    }
  return status;
}

/* Step 3: signals become readable on a fd; blocked before ZeroMQ starts
 * its threads so none of those gets them. */
static int
signals_fd (void)
{
  sigset_t mask;
  sigemptyset (&mask);
  sigaddset (&mask, SIGINT);
  sigaddset (&mask, SIGTERM);
  sigaddset (&mask, SIGHUP);
  sigprocmask (SIG_BLOCK, &mask, NULL);
  signal (SIGPIPE, SIG_IGN);
  return signalfd (-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* Copies of a task at once: --max-replicas, else the sites file's, else
 * the default. */
static guint
max_replicas_of (const DatcRunOptions *o, const DatcSitesFile *sites_file)
{
  return o->max_replicas      ? o->max_replicas
         : sites_file != NULL ? sites_file->max_replicas
                              : DATC_MAX_REPLICAS_DEFAULT;
}

/* The ROUTER agents connect to: the campaign's socket, or `listen` (a
 * resumed campaign keeps the port it had) with the agent keys of every
 * site (`site_keys` gets each site's key file).  Its endpoint goes to
 * DIR/endpoint, for agents started by hand.  NULL once it has said why. */
static DatcDispatcher *
start_dispatcher (const DatcRunOptions *o, void *ctx, DatcCampaign *campaign,
                  DatcSitesFile *sites_file, DatcLedger *ledger, DatcTrace *trace,
                  GHashTable *site_keys)
{
  g_autoptr (GError) error = NULL;
  const char *listen = o->listen ? o->listen : sites_file ? sites_file->listen : NULL;
  /* Relays carry agents' connections to a TCP port here: loopback
   * serves them when nothing else is asked for. */
  if (listen == NULL && sites_file != NULL)
    for (guint i = 0; i < sites_file->sites->len; i++)
      if (((DatcSiteConfig *) sites_file->sites->pdata[i])->relay)
        listen = "tcp://127.0.0.1:0";
  gboolean same_port = FALSE;
  g_autofree gchar *endpoint = listen ? listen_endpoint (campaign, listen, &same_port)
                                      : datc_campaign_ipc_endpoint (campaign, &error);
  g_autoptr (GArray) agent_keys = g_array_new (FALSE, FALSE, sizeof (DatcAgentKey));
  g_auto (GStrv) hand_publics = NULL, key_sites = NULL, site_publics = NULL;
  if (endpoint == NULL
      || !agent_keys_for (campaign, sites_file, o->no_local, site_keys, agent_keys, &hand_publics,
                          &key_sites, &site_publics, &error))
    {
      g_printerr ("datc: %s\n", error->message);
      return NULL;
    }
  DatcDispatcherOptions dopt = {
    .endpoint = endpoint,
    .server_secret_file = datc_campaign_master_key (campaign),
    .agent_keys = (const DatcAgentKey *) agent_keys->data,
    .n_agent_keys = agent_keys->len,
    .heartbeat_ms = o->heartbeat_ms,
    .timeout_ms = o->timeout_ms,
    .trace = trace,
    .max_replicas = max_replicas_of (o, sites_file),
  };
  g_autoptr (DatcDispatcher) disp = datc_dispatcher_new (ctx, ledger, &dopt, &error);
  if (disp == NULL)
    {
      if (same_port)
        g_prefix_error (&error,
                        "%s is where this campaign's agents reached it before and "
                        "keep trying (free that port, or give --listen another one): ",
                        endpoint);
      g_printerr ("datc: %s\n", error->message);
      return NULL;
    }
  g_autofree gchar *ep_file = g_build_filename (datc_campaign_dir (campaign), "endpoint", NULL);
  g_autofree gchar *text = g_strdup_printf ("%s\n", datc_dispatcher_endpoint (disp));
  g_file_set_contents (ep_file, text, -1, NULL);
  return g_steal_pointer (&disp);
}

/* Step 4: the embedded local site, a fork scheduler over the local
 * transport like any other site: `agents` proxies sharing the machine's
 * slots (direct mode: one one-slot job per slot). */
static DatcSiteSpec *
local_site (const DatcRunOptions *o, DatcCampaign *campaign, const char *agent,
            GHashTable *site_keys, GError **error)
{
  guint slots = o->local_slots ? o->local_slots : g_get_num_processors ();
  guint agents = o->local_agents ? o->local_agents : 1;
  g_autoptr (DatcSiteSpec) local = g_new0 (DatcSiteSpec, 1);
  local->name = g_strdup ("local");
  local->site = datc_site_new ("local", "local", "fork", NULL, NULL, error);
  if (local->site == NULL)
    return NULL;
  local->max_proxies = agents;
  local->poll_s = 1;
  local->slots_per_proxy = (slots + agents - 1) / agents;
  /* Direct mode: one job per task, as many at once as there are slots. */
  if (o->mode == DATC_MODE_DIRECT)
    {
      local->max_proxies = slots;
      local->slots_per_proxy = 1;
    }
  local->workdir = g_build_filename (datc_campaign_dir (campaign), "proxies", NULL);
  local->agent_path = g_strdup (agent);
  local->key_file = g_strdup (g_hash_table_lookup (site_keys, "local"));
  return g_steal_pointer (&local);
}

/* The sites of this run (DatcSiteSpec*): SITES.ini's, or the local one
 * (none with --no-local). */
static GPtrArray *
site_specs (const DatcRunOptions *o, DatcSitesFile *sites_file, DatcCampaign *campaign,
            const char *agent, GHashTable *site_keys, const char *dispatcher, GError **error)
{
  if (sites_file != NULL)
    return sites_from_file (sites_file, campaign, agent, site_keys, dispatcher, error);
  g_autoptr (GPtrArray) specs
      = g_ptr_array_new_with_free_func ((GDestroyNotify) datc_site_spec_free);
  if (!o->no_local)
    {
      DatcSiteSpec *local = local_site (o, campaign, agent, site_keys, error);
      if (local == NULL)
        return NULL;
      g_ptr_array_add (specs, local);
    }
  return g_steal_pointer (&specs);
}

/* Step 5: the loop, until the bag is done (an --open campaign: until
 * `datc close`), a signal, or no site can run the campaign (*stop and
 * *stop_why say which).  Each turn: provision, poll, receive from agents
 * and the control socket, tick, then flush: TASKS out, a commit when due,
 * then ACKs and the control replies it made durable.  FALSE on a failure
 * that stops the campaign (the ledger could not commit). */
static gboolean
run_turns (Master *m, DatcControl *control, DatcTrace *trace, GArray *items, int sfd,
           gboolean show_progress, gboolean *stop, const char **stop_why, GError **error)
{
  gint64 next_progress = 0;

  if (!datc_dispatcher_flush (m->disp, TRUE, NULL, error))
    return FALSE;
  while (!*stop && !(datc_ledger_finished (m->ledger) && !m->open))
    {
      datc_provisioner_tick (m->prov);
      int timeout = datc_dispatcher_next_timeout_ms (m->disp);
      int prov_timeout = datc_provisioner_next_timeout_ms (m->prov);
      if (prov_timeout >= 0 && prov_timeout < timeout)
        timeout = prov_timeout;
      if (datc_control_requests_kept (control))
        timeout = 0;
      if (zmq_poll ((zmq_pollitem_t *) items->data, (int) items->len, timeout) < 0
          && errno != EINTR)
        {
          int e = errno;
          g_set_error (error, G_IO_ERROR, g_io_error_from_errno (e), "zmq_poll: %s",
                       zmq_strerror (e));
          return FALSE;
        }
      struct signalfd_siginfo si;
      while (read (sfd, &si, sizeof si) == sizeof si)
        {
          g_printerr ("datc: %s: stopping; run the same command again to resume\n",
                      strsignal ((int) si.ssi_signo));
          *stop = TRUE;
        }
      if (!datc_dispatcher_receive (m->disp, error))
        return FALSE;
      datc_control_receive (control, handle_control, m);
      /* No site can run it: say why, site by site, and end as a signal
       * would (resumable), not wait for ever. */
      g_autofree gchar *cannot = NULL;
      if (!*stop && datc_provisioner_cannot_run (m->prov, &cannot))
        {
          if (show_progress)
            progress (m, TRUE);
          g_printerr ("datc: %s\n", cannot);
          datc_trace_event (trace, "campaign_gave_up", "reason", 's', cannot, NULL);
          *stop_why = "no site can run the campaign";
          *stop = TRUE;
        }
      datc_dispatcher_tick (m->disp);
      datc_dispatcher_release_idle (m->disp);
      /* Control replies leave once what they changed is committed. */
      gboolean synced;
      if (!datc_dispatcher_flush (m->disp, datc_control_replies_pending (control), &synced, error))
        return FALSE;
      if (synced)
        datc_control_send_replies (control);

      DatcLedgerCounts c;
      datc_ledger_counts (m->ledger, &c);
      datc_rate_sample (m->rate, c.done + c.failed);
      if (show_progress && g_get_monotonic_time () >= next_progress)
        {
          progress (m, FALSE);
          next_progress = g_get_monotonic_time () + 200 * 1000;
        }
    }
  if (show_progress)
    progress (m, TRUE);
  return TRUE;
}

/* In the middle of a turn: `datc status` now, the rest at its end. */
static void
answer_status (gpointer data)
{
  MasterControl *mc = data;
  datc_control_answer_status (mc->control, handle_control, mc->m);
}

/* While a commit's fdatasync runs: `datc status` too. */
static void
answer_status_while_syncing (gpointer data, int done_fd)
{
  MasterControl *mc = data;
  datc_control_answer_status_until (mc->control, done_fd, handle_control, mc->m);
}

/* The turns, with `datc status` answered in the middle of each
 * (datc_dispatcher_set_interlude): under load a turn's receive, hand-out
 * and commit take tens of ms each. */
static gboolean
run_loop (MasterControl *mc, DatcTrace *trace, GArray *items, int sfd, gboolean show_progress,
          gboolean *stop, const char **stop_why, GError **error)
{
  datc_dispatcher_set_interlude (mc->m->disp, answer_status, mc);
  gboolean ok
      = run_turns (mc->m, mc->control, trace, items, sfd, show_progress, stop, stop_why, error);
  datc_dispatcher_set_interlude (mc->m->disp, NULL, NULL);
  return ok;
}

/* Step 6: everyone goes home (agents exit, proxies end; `datc status` is
 * still answered meanwhile), then the summary.  Returns the exit
 * status. */
static int
finish_run (Master *m, DatcControl *control, DatcTrace *trace, gint64 started_us, gboolean json,
            gboolean stop, const char *stop_why, GError **error)
{
  int status = EXIT_ALL_OK;
  g_autoptr (GArray) control_items = g_array_new (FALSE, FALSE, sizeof (zmq_pollitem_t));
  datc_control_poll_items (control, control_items);
  MasterControl ending = { m, control };
  datc_provisioner_serve_while_waiting (m->prov, (zmq_pollitem_t *) control_items->data,
                                        control_items->len, serve_ending, &ending);
  /* Requests kept in the last turn's flush, and in end_run's (answered
   * while it synced), are refused: the socket no longer shows them. */
  serve_ending (&ending);
  if (!end_run (m->disp, m->prov, stop ? stop_why : "campaign finished", TRUE, error))
    status = EXIT_CANNOT_RUN;
  serve_ending (&ending);
  if (*error != NULL || !datc_ledger_finish_compaction (m->ledger, error))
    return EXIT_CANNOT_RUN;
  /* The wait for the compaction answered `status` and kept the rest:
   * refused now, not left to time out. */
  serve_ending (&ending);
  summary (m->ledger, m->dir, started_us, json);
  DatcLedgerCounts c;
  datc_ledger_counts (m->ledger, &c);
  datc_trace_event (trace, "campaign_finished", "done", 'i', (gint64) c.done, "failed", 'i',
                    (gint64) c.failed, "cancelled", 'i', (gint64) c.cancelled, NULL);
  if (stop || m->cancelled_all || c.cancelled > 0 || c.queued + c.running > 0)
    return EXIT_CANNOT_RUN;
  if (c.failed > 0 && status == EXIT_ALL_OK)
    return EXIT_SOME_FAILED;
  return status;
}

/* After a failure that stops the campaign: nothing the master started
 * may outlive it (a dead master's proxies would hold their queue places,
 * or allocations, for nothing), and nothing more is committed. */
static void
stop_on_error (Master *m, DatcControl *control)
{
  g_printerr ("datc: stopping: ending every proxy and removing agent keys (at most %u s)\n",
              SHUTDOWN_MS / 1000);
  if (control != NULL)
    {
      g_autoptr (GArray) control_items = g_array_new (FALSE, FALSE, sizeof (zmq_pollitem_t));
      datc_control_poll_items (control, control_items);
      MasterControl failing = { m, control };
      datc_provisioner_serve_while_waiting (m->prov, (zmq_pollitem_t *) control_items->data,
                                            control_items->len, serve_ending, &failing);
    }
  if (end_run (m->disp, m->prov, "the master stopped on an error", FALSE, NULL))
    g_printerr ("datc: nothing left on the sites; run the same command again to resume\n");
  else
    g_printerr ("datc: some proxies or keys are left on the sites (see above); the next run "
                "of the same command cancels the proxies\n");
}

int
datc_run (const DatcRunOptions *o)
{
  raise_fd_limit ();
  /* Before the master's threads start: fewer calls that take the
   * mmap_lock for writing, each a chance to wait behind khugepaged while
   * `datc status` waits behind it (malloctune.h). */
  (void) datc_malloc_tune_for_master ();
  /* Before the load: a `datc status` may ask from its start. */
  g_autoptr (DatcFilePin) front = pin_front ();
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcControl) control = NULL;
  g_autoptr (DatcRate) rate = NULL;
  g_autoptr (GArray) items = NULL;
  g_autoptr (DatcWaitCache) waits = NULL;
  g_autoptr (DatcProvisioner) prov = NULL;
  g_autofree gchar *agents_endpoint = NULL;
  gint64 started = g_get_monotonic_time ();

  /* 0-2. The sites file, the bag, the campaign directory and its ledger. */
  g_autoptr (DatcSitesFile) sites_file = NULL;
  g_autoptr (DatcBag) bag = NULL;
  g_autoptr (DatcCampaign) campaign = NULL;
  g_autoptr (DatcLedger) ledger = NULL;
  void *ctx = zmq_ctx_new ();
  int opened = open_campaign (o, &sites_file, &bag, &campaign, &ledger, &control);
  if (opened != EXIT_ALL_OK)
    {
      zmq_ctx_term (ctx);
      return opened;
    }

  g_autoptr (DatcTrace) trace = datc_trace_open (datc_campaign_dir (campaign));
  {
    DatcLedgerCounts c0;
    datc_ledger_counts (ledger, &c0);
    /* The mode of this session and whether it copies stragglers: `analyze
     * trace` models the one that ran (pull, or pull+rep). */
    datc_trace_event (trace, "campaign_started", "tasks", 'i', (gint64) c0.total, "resumed", 'b',
                      datc_campaign_resumed (campaign), "mode", 's', datc_mode_name (o->mode),
                      "max_replicas", 'i', (gint64) max_replicas_of (o, sites_file), NULL);
  }

  /* 3. Signals on a fd, then the dispatcher. */
  int sfd = signals_fd ();
  g_autoptr (GHashTable) site_keys = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
  g_autoptr (DatcDispatcher) disp
      = start_dispatcher (o, ctx, campaign, sites_file, ledger, trace, site_keys);
  if (disp == NULL)
    {
      g_clear_pointer (&ledger, datc_ledger_free);
      g_clear_pointer (&control, datc_control_free);
      zmq_ctx_term (ctx);
      return EXIT_CANNOT_RUN;
    }

  /* 4. The sites (the embedded local one without SITES.ini) and their
   * provisioner. */
  g_autofree gchar *agent = find_agent ();
  if (agent == NULL)
    {
      g_printerr ("datc: cannot find datc-agent (set DATC_AGENT)\n");
      return EXIT_CANNOT_RUN;
    }
  /* Every owning local is declared before the first `goto fatal`. */
  g_autofree gchar *agent_args
      = o->local_exec != NULL ? g_strdup_printf ("--exec %s", o->local_exec) : g_strdup ("");
  Master m = {
    .dir = datc_campaign_dir (campaign),
    .ledger = ledger,
    .disp = disp,
    .open = o->open,
  };
  g_autoptr (GPtrArray) specs = site_specs (o, sites_file, campaign, agent, site_keys,
                                            datc_dispatcher_endpoint (disp), &error);
  if (specs == NULL)
    goto fatal;
  agents_endpoint = advertised_endpoint (datc_dispatcher_endpoint (disp),
                                         sites_file ? sites_file->advertise : NULL);

  DatcProvisionerOptions popt = {
    .endpoint = agents_endpoint,
    .server_public = datc_dispatcher_server_public (disp),
    .agent_args = agent_args,
    .poll_ms = 5000,
    .mode = o->mode,
    .trace = trace,
    .give_up_s = o->give_up_set       ? o->give_up_s
                 : sites_file != NULL ? sites_file->give_up_s
                                      : DATC_GIVE_UP_DEFAULT_S,
    .keep_site_files = o->keep_site_files,
    .waits = waits = datc_wait_cache_open (NULL),
  };
  prov = datc_provisioner_new (ledger, disp, g_steal_pointer (&specs), &popt);
  m.prov = prov;

  rate = datc_rate_new ();
  m.rate = rate;

  /* 5. The loop. */
  gboolean stop = FALSE;
  const char *stop_why = "campaign stopped";
  items = g_array_new (FALSE, FALSE, sizeof (zmq_pollitem_t));
  datc_dispatcher_poll_items (disp, items);
  datc_control_poll_items (control, items);
  datc_provisioner_poll_items (prov, items);
  zmq_pollitem_t sig_item = { NULL, sfd, ZMQ_POLLIN, 0 };
  g_array_append_val (items, sig_item);
  gboolean show_progress = !o->no_progress && isatty (STDERR_FILENO);
  /* `datc status` is answered while a commit waits for the disk too: an
   * fdatasync behind results.jsonl's writeback takes hundreds of ms. */
  MasterControl mc = { &m, control };
  datc_ledger_set_sync_wait (ledger, answer_status_while_syncing, &mc);
  if (!run_loop (&mc, trace, items, sfd, show_progress, &stop, &stop_why, &error))
    goto fatal;

  /* 6. Everyone goes home. */
  int status = finish_run (&m, control, trace, started, o->json, stop, stop_why, &error);
  datc_ledger_set_sync_wait (ledger, NULL, NULL);
  g_clear_pointer (&prov, datc_provisioner_free);
  g_clear_pointer (&control, datc_control_free);
  g_clear_pointer (&disp, datc_dispatcher_free);
  zmq_ctx_term (ctx);
  close (sfd);
  return status;

fatal:
  datc_ledger_set_sync_wait (ledger, NULL, NULL);
  g_printerr ("datc: %s\n", error->message);
  if (prov != NULL)
    stop_on_error (&m, control);
  g_clear_pointer (&prov, datc_provisioner_free);
  g_clear_pointer (&control, datc_control_free);
  g_clear_pointer (&disp, datc_dispatcher_free);
  zmq_ctx_term (ctx);
  close (sfd);
  return EXIT_CANNOT_RUN;
}
