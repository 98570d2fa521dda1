/* provisioner.c: proxies per site, submitted, polled and cancelled through
 * the site drivers. */
#include "provisioner.h"

#include <string.h>

typedef struct {
  gchar *id;               /* our proxy id, unique in the campaign */
  gchar *job_id;           /* the scheduler's */
  DatcProxyState state;
  gint64 submitted_us;
  gboolean connected;      /* its agent said HELLO at least once */
} Proxy;

typedef struct {
  DatcSiteSpec *spec;
  GPtrArray *proxies;      /* Proxy*, alive ones */
  gint64 next_poll_us;
  gint64 next_submit_us;   /* backoff after a failed submit */
  guint failures;          /* submits that failed in a row */
  guint early_deaths;      /* proxies that ended before their agent connected, in a row */
  guint early_deaths_total;
  guint serial;
} SiteState;

struct DatcProvisioner {
  DatcLedger *ledger;
  GPtrArray *sites;        /* SiteState* */
  gchar *endpoint, *server_public, *agent_args;
  guint poll_ms;
  guint32 tag;             /* distinguishes proxy ids across master restarts */
  DatcTrace *trace;
};

void
datc_site_spec_free (DatcSiteSpec *s)
{
  if (s == NULL)
    return;
  datc_site_free (s->site);
  g_free (s->name);
  g_free (s->queue);
  g_free (s->submit_args);
  g_free (s->workdir);
  g_free (s->agent_path);
  g_free (s->key_file);
  g_free (s);
}

static void
proxy_free (gpointer p)
{
  Proxy *x = p;
  g_free (x->id);
  g_free (x->job_id);
  g_free (x);
}

static void
site_state_free (gpointer p)
{
  SiteState *s = p;
  g_ptr_array_unref (s->proxies);
  datc_site_spec_free (s->spec);
  g_free (s);
}

DatcProvisioner *
datc_provisioner_new (DatcLedger *ledger, GPtrArray *specs, const DatcProvisionerOptions *o)
{
  DatcProvisioner *p = g_new0 (DatcProvisioner, 1);
  p->ledger = ledger;
  p->sites = g_ptr_array_new_with_free_func (site_state_free);
  p->endpoint = g_strdup (o->endpoint);
  p->server_public = g_strdup (o->server_public);
  p->agent_args = g_strdup (o->agent_args);
  p->poll_ms = o->poll_ms ? o->poll_ms : 1000;
  p->trace = o->trace;
  p->tag = g_random_int_range (0x1000, 0xffff);

  for (guint i = 0; i < specs->len; i++)
    {
      SiteState *s = g_new0 (SiteState, 1);
      s->spec = specs->pdata[i];
      s->proxies = g_ptr_array_new_with_free_func (proxy_free);
      g_ptr_array_add (p->sites, s);
    }
  g_ptr_array_set_free_func (specs, NULL);
  g_ptr_array_unref (specs);

  /* Proxies an earlier master submitted and never saw end are still ours. */
  g_autoptr (GPtrArray) open = datc_ledger_open_proxies (ledger);
  for (guint i = 0; i < open->len; i++)
    {
      g_auto (GStrv) f = g_strsplit (open->pdata[i], "\t", 3);
      if (g_strv_length (f) != 3)
        continue;
      for (guint j = 0; j < p->sites->len; j++)
        {
          SiteState *s = p->sites->pdata[j];
          if (g_str_equal (s->spec->name, f[0]))
            {
              Proxy *x = g_new0 (Proxy, 1);
              x->id = g_strdup (f[1]);
              x->job_id = g_strdup (f[2]);
              x->state = DATC_PROXY_UNKNOWN;
              g_ptr_array_add (s->proxies, x);
            }
        }
    }
  return p;
}

void
datc_provisioner_free (DatcProvisioner *p)
{
  if (p == NULL)
    return;
  g_ptr_array_unref (p->sites);
  g_free (p->endpoint);
  g_free (p->server_public);
  g_free (p->agent_args);
  g_free (p);
}

/* Backoff shared by failed submits and proxies that die before their agent
 * connects: a site that cannot run our agent must not be hammered. */
static void
back_off (SiteState *s, guint in_a_row)
{
  guint backoff = MIN (60000u, 1000u << MIN (in_a_row, 6u));
  s->next_submit_us = g_get_monotonic_time () + (gint64) backoff * 1000;
}

static gchar *
agent_command (DatcProvisioner *p, SiteState *s, const char *proxy_id)
{
  g_autofree gchar *agent = g_shell_quote (s->spec->agent_path);
  g_autofree gchar *ep = g_shell_quote (p->endpoint);
  g_autofree gchar *site = g_shell_quote (s->spec->name);
  g_autofree gchar *proxy = g_shell_quote (proxy_id);
  GString *cmd = g_string_new (NULL);
  g_string_printf (cmd, "%s --connect %s --site %s --proxy %s --slots \"${DATC_SLOTS:-%u}\"",
                   agent, ep, site, proxy, s->spec->slots_per_proxy);
  if (p->server_public != NULL && s->spec->key_file != NULL)
    {
      /* Z85 uses shell characters (& ! { ...): quote it like the rest. */
      g_autofree gchar *server = g_shell_quote (p->server_public);
      g_autofree gchar *key = g_shell_quote (s->spec->key_file);
      g_string_append_printf (cmd, " --server-key %s --key-file %s", server, key);
    }
  if (p->agent_args != NULL && p->agent_args[0])
    g_string_append_printf (cmd, " %s", p->agent_args);
  return g_string_free (cmd, FALSE);
}

static gboolean
submit_one (DatcProvisioner *p, SiteState *s)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *id = g_strdup_printf ("%s-%04x-%u", s->spec->name, p->tag, ++s->serial);
  g_autofree gchar *cmd = agent_command (p, s, id);
  g_autofree gchar *name = g_strdup_printf ("datc-%s", id);
  g_autofree gchar *script = g_strdup_printf ("%s.sh", id);
  gchar *job = NULL;
  DatcProxyRequest req = {
    .name = name,
    .slots = s->spec->slots_per_proxy,
    .walltime_s = s->spec->walltime_s,
    .queue = s->spec->queue,
    .submit_args = s->spec->submit_args,
    .workdir = s->spec->workdir,
    .agent_command = cmd,
  };

  if (!datc_site_submit (s->spec->site, &req, script, &job, &error))
    {
      s->failures++;
      back_off (s, s->failures);
      g_warning ("site %s: could not submit a proxy (%u in a row): %s", s->spec->name,
                 s->failures, error->message);
      return FALSE;
    }
  s->failures = 0;
  Proxy *x = g_new0 (Proxy, 1);
  x->id = g_steal_pointer (&id);
  x->job_id = job;
  x->state = DATC_PROXY_PENDING;
  x->submitted_us = g_get_real_time ();
  g_ptr_array_add (s->proxies, x);
  datc_ledger_proxy (p->ledger, s->spec->name, x->id, x->job_id, "submitted");
  datc_trace_event (p->trace, "proxy_submitted", "site", 's', s->spec->name, "proxy", 's', x->id,
                    "job", 's', x->job_id, "slots", 'i', (gint64) s->spec->slots_per_proxy,
                    "walltime", 'i', (gint64) s->spec->walltime_s, NULL);
  g_debug ("site %s: proxy %s submitted as job %s", s->spec->name, x->id, x->job_id);
  return TRUE;
}

static void
poll_site (DatcProvisioner *p, SiteState *s, DatcDispatcher *d)
{
  if (s->proxies->len == 0)
    return;
  g_autoptr (GPtrArray) ids = g_ptr_array_new ();
  for (guint i = 0; i < s->proxies->len; i++)
    g_ptr_array_add (ids, ((Proxy *) s->proxies->pdata[i])->job_id);
  g_ptr_array_add (ids, NULL);
  g_autofree DatcProxyState *states = g_new0 (DatcProxyState, s->proxies->len);
  g_autoptr (GError) error = NULL;
  if (!datc_site_poll (s->spec->site, (const char *const *) ids->pdata, states, &error))
    {
      g_warning ("site %s: could not poll proxies: %s", s->spec->name, error->message);
      return;
    }
  for (guint i = s->proxies->len; i-- > 0;)
    {
      Proxy *x = s->proxies->pdata[i];
      x->state = states[i];
      if (!x->connected)
        x->connected = datc_ledger_proxy_connected (p->ledger, s->spec->name, x->id);
      if (states[i] == DATC_PROXY_FINISHED || states[i] == DATC_PROXY_FAILED)
        {
          if (!x->connected && d != NULL)
            {
              s->early_deaths++;
              s->early_deaths_total++;
              back_off (s, s->early_deaths);
              g_warning ("site %s: proxy %s (job %s) ended before its agent connected "
                         "(%u in a row; see its log in %s)",
                         s->spec->name, x->id, x->job_id, s->early_deaths, s->spec->workdir);
            }
          else if (x->connected)
            s->early_deaths = 0;
          datc_ledger_proxy (p->ledger, s->spec->name, x->id, x->job_id, "ended");
          datc_trace_event (p->trace, "proxy_ended", "site", 's', s->spec->name, "proxy", 's',
                            x->id, "job", 's', x->job_id, NULL);
          g_ptr_array_remove_index (s->proxies, i);
        }
    }
}

void
datc_provisioner_tick (DatcProvisioner *p, DatcDispatcher *d)
{
  gint64 now = g_get_monotonic_time ();
  DatcLedgerCounts c;
  datc_ledger_counts (p->ledger, &c);

  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      if (now >= s->next_poll_us)
        {
          poll_site (p, s, d);
          s->next_poll_us = now + (gint64) p->poll_ms * 1000;
        }
    }

  /* Capacity that is coming: proxies whose agent has not said HELLO yet. */
  guint64 coming = 0;
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      guint connected = datc_dispatcher_site_agents (d, s->spec->name, NULL);
      if (s->proxies->len > connected)
        coming += (guint64) (s->proxies->len - connected) * s->spec->slots_per_proxy;
    }
  guint64 free_slots = datc_dispatcher_free_slots (d) + coming;

  for (guint i = 0; i < p->sites->len && c.queued > free_slots; i++)
    {
      SiteState *s = p->sites->pdata[i];
      while (c.queued > free_slots && s->proxies->len < s->spec->max_proxies
             && now >= s->next_submit_us)
        {
          if (!submit_one (p, s))
            break;
          free_slots += s->spec->slots_per_proxy;
        }
    }
}

guint
datc_provisioner_alive (DatcProvisioner *p)
{
  guint n = 0;
  for (guint i = 0; i < p->sites->len; i++)
    n += ((SiteState *) p->sites->pdata[i])->proxies->len;
  return n;
}

gboolean
datc_provisioner_shutdown (DatcProvisioner *p, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  gint64 cancel_at = g_get_monotonic_time () + 2 * G_USEC_PER_SEC;
  gboolean cancelled = FALSE;
  gulong wait_us = 2000;

  /* Agents were told BYE: most proxies end on their own within
   * milliseconds.  Poll with growing waits; cancel what is still there
   * after two seconds. */
  for (;;)
    {
      for (guint i = 0; i < p->sites->len; i++)
        poll_site (p, p->sites->pdata[i], NULL);
      if (datc_provisioner_alive (p) == 0)
        return TRUE;
      gint64 now = g_get_monotonic_time ();
      if (now >= deadline)
        break;
      if (!cancelled && now >= cancel_at)
        {
          for (guint i = 0; i < p->sites->len; i++)
            {
              SiteState *s = p->sites->pdata[i];
              if (s->proxies->len == 0)
                continue;
              g_autoptr (GPtrArray) ids = g_ptr_array_new ();
              for (guint j = 0; j < s->proxies->len; j++)
                g_ptr_array_add (ids, ((Proxy *) s->proxies->pdata[j])->job_id);
              g_ptr_array_add (ids, NULL);
              g_autoptr (GError) error = NULL;
              if (!datc_site_cancel (s->spec->site, (const char *const *) ids->pdata, &error))
                g_warning ("site %s: could not cancel proxies: %s", s->spec->name,
                           error->message);
              else
                for (guint j = 0; j < s->proxies->len; j++)
                  {
                    Proxy *x = s->proxies->pdata[j];
                    datc_ledger_proxy (p->ledger, s->spec->name, x->id, x->job_id,
                                       "cancelled");
                    datc_trace_event (p->trace, "proxy_cancelled", "site", 's', s->spec->name,
                                      "proxy", 's', x->id, "job", 's', x->job_id, NULL);
                  }
            }
          cancelled = TRUE;
        }
      g_usleep (wait_us);
      wait_us = MIN (wait_us * 2, 200000ul);
    }
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      for (guint j = 0; j < s->proxies->len; j++)
        g_warning ("site %s: proxy %s (job %s) is still there", s->spec->name,
                   ((Proxy *) s->proxies->pdata[j])->id, ((Proxy *) s->proxies->pdata[j])->job_id);
    }
  return FALSE;
}

void
datc_provisioner_describe (DatcProvisioner *p, DatcDispatcher *d, JsonBuilder *b)
{
  json_builder_set_member_name (b, "sites");
  json_builder_begin_array (b);
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      guint agents = datc_dispatcher_site_agents (d, s->spec->name, NULL);
      guint alive = s->proxies->len;
      guint running = MIN (agents, alive);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, s->spec->name);
      json_builder_set_member_name (b, "proxies");
      json_builder_add_int_value (b, alive);
      json_builder_set_member_name (b, "proxies_pending");
      json_builder_add_int_value (b, alive - running);
      json_builder_set_member_name (b, "proxies_running");
      json_builder_add_int_value (b, running);
      json_builder_set_member_name (b, "agents");
      json_builder_add_int_value (b, agents);
      json_builder_set_member_name (b, "slots_per_proxy");
      json_builder_add_int_value (b, s->spec->slots_per_proxy);
      json_builder_set_member_name (b, "max_proxies");
      json_builder_add_int_value (b, s->spec->max_proxies);
      json_builder_set_member_name (b, "done");
      json_builder_add_int_value (b, (gint64) datc_dispatcher_site_done (d, s->spec->name));
      json_builder_set_member_name (b, "submit_failures");
      json_builder_add_int_value (b, s->failures);
      json_builder_set_member_name (b, "proxies_died_early");
      json_builder_add_int_value (b, s->early_deaths_total);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
}
