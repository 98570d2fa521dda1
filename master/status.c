/* status.c: see status.h. */
#include "status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bag.h"
#include "campaign.h"
#include "control.h"

#define RATE_WINDOW 61

struct DatcRate {
  gint64 t[RATE_WINDOW]; /* monotonic seconds */
  guint64 n[RATE_WINDOW];
  guint head, len;
};

DatcRate *
datc_rate_new (void)
{
  return g_new0 (DatcRate, 1);
}

void
datc_rate_free (DatcRate *r)
{
  g_free (r);
}

void
datc_rate_sample (DatcRate *r, guint64 finished)
{
  gint64 now = g_get_monotonic_time () / G_USEC_PER_SEC;
  if (r->len > 0)
    {
      guint last = (r->head + r->len - 1) % RATE_WINDOW;
      if (r->t[last] == now)
        {
          r->n[last] = finished;
          return;
        }
    }
  if (r->len == RATE_WINDOW)
    {
      r->head = (r->head + 1) % RATE_WINDOW;
      r->len--;
    }
  guint i = (r->head + r->len) % RATE_WINDOW;
  r->t[i] = now;
  r->n[i] = finished;
  r->len++;
}

double
datc_rate_per_s (DatcRate *r)
{
  if (r == NULL || r->len < 2)
    return 0.0;
  guint last = (r->head + r->len - 1) % RATE_WINDOW;
  gint64 dt = r->t[last] - r->t[r->head];
  return dt > 0 ? (double) (r->n[last] - r->n[r->head]) / (double) dt : 0.0;
}

static void
add_int (JsonBuilder *b, const char *k, gint64 v)
{
  json_builder_set_member_name (b, k);
  json_builder_add_int_value (b, v);
}

typedef struct {
  gchar *name, *error;
  gboolean degraded;
} SiteHealth;

static void
site_health_free (SiteHealth *h)
{
  g_free (h->name);
  g_free (h->error);
  g_free (h);
}

/* With no master, a site's health is what the trace last said of it: its
 * last site_degraded (the reason, in the site's own words) and whether a
 * site_ok came after.  Only those two events are parsed, so a long trace
 * costs a scan. */
static void
describe_sites_from_trace (const char *dir, JsonBuilder *b)
{
  g_autofree gchar *path = g_build_filename (dir, "trace.jsonl", NULL);
  g_autoptr (GPtrArray) sites = g_ptr_array_new_with_free_func ((GDestroyNotify) site_health_free);
  FILE *f = fopen (path, "re");
  char *buf = NULL;
  size_t cap = 0;
  while (f != NULL && getline (&buf, &cap, f) > 0)
    {
      gboolean bad = strstr (buf, "\"event\":\"site_degraded\"") != NULL;
      if (!bad && strstr (buf, "\"event\":\"site_ok\"") == NULL)
        continue;
      g_autoptr (JsonParser) parser = json_parser_new ();
      if (!json_parser_load_from_data (parser, buf, -1, NULL)
          || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
        continue; /* a torn last line */
      JsonObject *o = json_node_get_object (json_parser_get_root (parser));
      const char *name = json_object_get_string_member_with_default (o, "site", NULL);
      if (name == NULL)
        continue;
      SiteHealth *h = NULL;
      for (guint i = 0; i < sites->len && h == NULL; i++)
        if (g_str_equal (((SiteHealth *) sites->pdata[i])->name, name))
          h = sites->pdata[i];
      if (h == NULL)
        {
          h = g_new0 (SiteHealth, 1);
          h->name = g_strdup (name);
          g_ptr_array_add (sites, h);
        }
      h->degraded = bad;
      if (bad)
        {
          g_free (h->error);
          h->error = g_strdup (json_object_get_string_member_with_default (o, "error", "?"));
        }
    }
  free (buf);
  if (f != NULL)
    fclose (f);
  json_builder_set_member_name (b, "sites");
  json_builder_begin_array (b);
  for (guint i = 0; i < sites->len; i++)
    {
      SiteHealth *h = sites->pdata[i];
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, h->name);
      json_builder_set_member_name (b, "state");
      json_builder_add_string_value (b, h->degraded ? "degraded" : "ok");
      json_builder_set_member_name (b, "last_error");
      json_builder_add_string_value (b, h->error);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
}

/* A status object begun: its `dir`, and its `master` object with
 * `running`, left open for the caller's members. */
static void
begin_status (JsonBuilder *b, const char *dir, gboolean running)
{
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "dir");
  json_builder_add_string_value (b, dir);
  json_builder_set_member_name (b, "master");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "running");
  json_builder_add_boolean_value (b, running);
}

/* Every member but "agents" (datc_status_text adds it). */
static JsonNode *
build_without_agents (const char *dir, DatcLedger *ledger, DatcDispatcher *d, DatcProvisioner *p,
                      DatcRate *rate, gboolean running, gboolean open)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  DatcLedgerCounts c;
  datc_ledger_counts_committed (ledger, &c);

  begin_status (b, dir, running);
  json_builder_set_member_name (b, "open");
  json_builder_add_boolean_value (b, open);
  json_builder_end_object (b);

  json_builder_set_member_name (b, "tasks");
  json_builder_begin_object (b);
  add_int (b, "total", (gint64) c.total);
  add_int (b, "queued", (gint64) c.queued);
  /* The ledger's running tasks are those handed out; of those, what the
   * agents say they run is "running" (so it never exceeds the slots that
   * run them), the rest "prefetched".  Both from the committed count, so
   * that a status asked between a hand-out and its commit (tasks out, not
   * yet journaled: datc_dispatcher_set_interlude) adds up like any other. */
  guint64 executing = d != NULL ? MIN (datc_dispatcher_executing (d), c.running) : c.running;
  add_int (b, "running", (gint64) executing);
  add_int (b, "prefetched", (gint64) (c.running - executing));
  add_int (b, "done", (gint64) c.done);
  add_int (b, "failed", (gint64) c.failed);
  add_int (b, "cancelled", (gint64) c.cancelled);
  json_builder_end_object (b);

  if (p != NULL && d != NULL)
    datc_provisioner_describe (p, b);
  else if (!running)
    describe_sites_from_trace (dir, b);
  else
    {
      json_builder_set_member_name (b, "sites");
      json_builder_begin_array (b);
      json_builder_end_array (b);
    }
  /* The journal's size and its last compaction (master/README.md,
   * Compaction). */
  DatcLedgerJournalInfo ji;
  datc_ledger_journal_info (ledger, &ji);
  json_builder_set_member_name (b, "journal");
  json_builder_begin_object (b);
  add_int (b, "bytes", (gint64) ji.bytes);
  json_builder_set_member_name (b, "compacting");
  json_builder_add_boolean_value (b, ji.compacting);
  json_builder_set_member_name (b, "last_compaction");
  if (ji.last_compaction_us > 0)
    {
      json_builder_begin_object (b);
      add_int (b, "time", ji.last_compaction_us / G_USEC_PER_SEC);
      add_int (b, "bytes_before", (gint64) ji.compacted_from);
      add_int (b, "bytes_after", (gint64) ji.checkpoint_bytes);
      json_builder_end_object (b);
    }
  else
    json_builder_add_null_value (b);
  json_builder_end_object (b);

  double r = datc_rate_per_s (rate);
  json_builder_set_member_name (b, "rate_per_s");
  json_builder_add_double_value (b, r);
  json_builder_set_member_name (b, "eta_s");
  if (r > 0 && running)
    json_builder_add_double_value (b, ceil ((double) (c.queued + c.running) / r));
  else if (c.queued + c.running == 0)
    json_builder_add_double_value (b, 0.0);
  else
    json_builder_add_null_value (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

gchar *
datc_status_text (const char *dir, DatcLedger *ledger, DatcDispatcher *d, DatcProvisioner *p,
                  DatcRate *rate, gboolean running, gboolean open, guint agents_max)
{
  g_autoptr (JsonNode) rest = build_without_agents (dir, ledger, d, p, rate, running, open);
  g_autofree gchar *text = json_to_string (rest, FALSE);
  gsize len = strlen (text);
  g_assert (len >= 2 && text[len - 1] == '}');
  guint total = d != NULL ? datc_dispatcher_agents (d) : 0;
  GString *out = g_string_sized_new (len + 64 + 160 * (gsize) MIN (total, agents_max));
  g_string_append_len (out, text, (gssize) len - 1);
  g_string_append_printf (out, "%s\"agents_total\":%u,\"agents\":", len > 2 ? "," : "", total);
  if (d != NULL)
    datc_dispatcher_describe_agents (d, agents_max, out);
  else
    g_string_append (out, "[]");
  g_string_append_c (out, '}');
  return g_string_free (out, FALSE);
}

JsonNode *
datc_status_build (const char *dir, DatcLedger *ledger, DatcDispatcher *d, DatcProvisioner *p,
                   DatcRate *rate, gboolean running, gboolean open, guint agents_max)
{
  g_autofree gchar *text = datc_status_text (dir, ledger, d, p, rate, running, open, agents_max);
  JsonNode *st = json_from_string (text, NULL);
  g_assert (st != NULL); /* written here: a failure is a bug */
  return st;
}

JsonNode *
datc_status_loading (const char *dir, DatcStatusLoading phase, guint64 replayed,
                     guint64 journal_bytes)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  begin_status (b, dir, TRUE);
  json_builder_set_member_name (b, "loading");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "phase");
  json_builder_add_string_value (b, phase == DATC_STATUS_LOADING_TASKS ? "task file" : "journal");
  if (phase == DATC_STATUS_LOADING_JOURNAL)
    {
      add_int (b, "journal_bytes", (gint64) journal_bytes);
      add_int (b, "replayed_bytes", (gint64) MIN (replayed, journal_bytes));
    }
  json_builder_end_object (b);
  json_builder_end_object (b);
  /* The members every status has, nothing counted yet: a reader that
   * does not know `loading` sees an empty campaign, not a missing key. */
  json_builder_set_member_name (b, "tasks");
  json_builder_begin_object (b);
  static const char *const counts[]
      = { "total", "queued", "running", "prefetched", "done", "failed", "cancelled" };
  for (guint i = 0; i < G_N_ELEMENTS (counts); i++)
    add_int (b, counts[i], 0);
  json_builder_end_object (b);
  add_int (b, "agents_total", 0);
  const char *const lists[] = { "sites", "agents" };
  for (guint i = 0; i < G_N_ELEMENTS (lists); i++)
    {
      json_builder_set_member_name (b, lists[i]);
      json_builder_begin_array (b);
      json_builder_end_array (b);
    }
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* "reading the task file", "replaying the journal: 45% of 268.3 MiB",
 * or NULL when the master is not loading (transfer full). */
static gchar *
loading_text (JsonObject *st)
{
  JsonObject *m = json_object_get_object_member (st, "master");
  JsonObject *ld = m && json_object_has_member (m, "loading")
                       ? json_object_get_object_member (m, "loading")
                       : NULL;
  if (ld == NULL)
    return NULL;
  if (g_strcmp0 (json_object_get_string_member_with_default (ld, "phase", ""), "journal") != 0)
    return g_strdup ("loading: reading the task file");
  gint64 of = json_object_get_int_member_with_default (ld, "journal_bytes", 0);
  gint64 done = json_object_get_int_member_with_default (ld, "replayed_bytes", 0);
  return g_strdup_printf ("loading: replaying the journal, %.0f%% of %.1f MiB",
                          of > 0 ? 100.0 * (double) done / (double) of : 0.0,
                          (double) of / (1024.0 * 1024.0));
}

JsonNode *
datc_status_offline (const char *dir, GError **error)
{
  g_autoptr (DatcBag) bag = datc_bag_new ();
  DatcLedgerOptions o = { .read_only = TRUE };
  g_autoptr (DatcLedger) l = datc_campaign_open_ledger (dir, bag, &o, error);
  if (l == NULL)
    return NULL;
  return datc_status_build (dir, l, NULL, NULL, NULL, FALSE, FALSE, 0);
}

static gint64
tasks_member (JsonObject *st, const char *k)
{
  JsonObject *t = json_object_get_object_member (st, "tasks");
  return t ? json_object_get_int_member_with_default (t, k, 0) : 0;
}

static gchar *
human_seconds (double s)
{
  if (s < 60)
    return g_strdup_printf ("%.0fs", s);
  if (s < 3600)
    return g_strdup_printf ("%.0fm%02.0fs", floor (s / 60), fmod (s, 60));
  return g_strdup_printf ("%.0fh%02.0fm", floor (s / 3600), floor (fmod (s, 3600) / 60));
}

typedef struct {
  const char *reason;
  gint64 count;
} ReasonCount;

static gint
by_count (gconstpointer a, gconstpointer b)
{
  const ReasonCount *x = a, *y = b;
  if (x->count != y->count)
    return x->count > y->count ? -1 : 1;
  return g_strcmp0 (x->reason, y->reason);
}

/* A site's pending_reasons, most common first (borrowed strings). */
static GArray *
site_reasons (JsonObject *site)
{
  GArray *out = g_array_new (FALSE, FALSE, sizeof (ReasonCount));
  JsonObject *r = json_object_has_member (site, "pending_reasons")
                      ? json_object_get_object_member (site, "pending_reasons")
                      : NULL;
  g_autoptr (GList) names = r != NULL ? json_object_get_members (r) : NULL;
  for (GList *l = names; l != NULL; l = l->next)
    {
      ReasonCount c = { l->data, json_object_get_int_member_with_default (r, l->data, 0) };
      g_array_append_val (out, c);
    }
  g_array_sort (out, by_count);
  return out;
}

/* " | waiting in queue: slurm 2 (Resources), sge 1" when no task runs and
 * proxies wait in a scheduler's queue (the first reason of each site,
 * shortened: it must fit the line); "" otherwise. */
static gchar *
waiting_part (JsonObject *st)
{
  JsonArray *sites = json_object_get_array_member (st, "sites");
  if (sites == NULL || tasks_member (st, "running") > 0 || tasks_member (st, "prefetched") > 0)
    return g_strdup ("");
  g_autoptr (GString) out = g_string_new (NULL);
  for (guint i = 0; i < json_array_get_length (sites); i++)
    {
      JsonObject *s = json_array_get_object_element (sites, i);
      gint64 queued = json_object_get_int_member_with_default (s, "proxies_queued", 0);
      if (queued <= 0)
        continue;
      g_string_append_printf (out, "%s%s %" G_GINT64_FORMAT,
                              out->len > 0 ? ", " : " | waiting in queue: ",
                              json_object_get_string_member_with_default (s, "name", "?"), queued);
      g_autoptr (GArray) reasons = site_reasons (s);
      if (reasons->len > 0)
        {
          const char *first = g_array_index (reasons, ReasonCount, 0).reason;
          if (g_utf8_strlen (first, -1) > 40)
            {
              g_autofree gchar *cut = g_utf8_substring (first, 0, 39);
              g_string_append_printf (out, " (%s…", cut);
            }
          else
            g_string_append_printf (out, " (%s", first);
          if (reasons->len > 1)
            g_string_append_printf (out, ", +%u more", reasons->len - 1);
          g_string_append_c (out, ')');
        }
    }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

/* Connected agents: "agents_total", or (a status from before it) the
 * length of "agents". */
static gint64
agents_total (JsonObject *st)
{
  if (json_object_has_member (st, "agents_total"))
    return json_object_get_int_member (st, "agents_total");
  JsonArray *agents = json_object_get_array_member (st, "agents");
  return agents != NULL ? json_array_get_length (agents) : 0;
}

gchar *
datc_status_line (JsonObject *st)
{
  gchar *loading = loading_text (st);
  if (loading != NULL)
    return loading;
  gint64 agents = agents_total (st);
  double rate = json_object_get_double_member_with_default (st, "rate_per_s", 0);
  JsonNode *eta = json_object_get_member (st, "eta_s");
  g_autofree gchar *eta_s = eta && !JSON_NODE_HOLDS_NULL (eta)
                                ? human_seconds (json_node_get_double (eta))
                                : g_strdup ("?");
  gint64 prefetched = tasks_member (st, "prefetched");
  g_autofree gchar *ahead
      = prefetched > 0 ? g_strdup_printf (" (+%" G_GINT64_FORMAT " prefetched)", prefetched)
                       : g_strdup ("");
  g_autofree gchar *waiting = waiting_part (st);
  return g_strdup_printf (
      "done %" G_GINT64_FORMAT " / failed %" G_GINT64_FORMAT " / running %" G_GINT64_FORMAT
      "%s / queued %" G_GINT64_FORMAT " | %.1f/s | ETA %s | %u agent%s%s",
      tasks_member (st, "done"), tasks_member (st, "failed"), tasks_member (st, "running"), ahead,
      tasks_member (st, "queued"), rate, eta_s, (guint) agents, agents == 1 ? "" : "s", waiting);
}

static gint64
kind_member (JsonObject *site, const char *kind)
{
  JsonObject *k = json_object_get_object_member (site, "commands_by_kind");
  return k ? json_object_get_int_member_with_default (k, kind, 0) : 0;
}

/* What a site's admins see of us: commands per kind, per 1,000 tasks
 * finished there, and the use of its max_calls_per_minute.  A table of
 * its own, so both fit in 80 columns. */
static void
print_site_commands (JsonArray *sites, FILE *out)
{
  fprintf (out, "\n%-16s %8s %7s %7s %7s %5s %9s  %s\n", "SITE", "CALLS", "SUBMIT", "POLL",
           "CANCEL", "PUT", "PER 1000", "BUDGET/MINUTE");
  for (guint i = 0; i < json_array_get_length (sites); i++)
    {
      JsonObject *s = json_array_get_object_element (sites, i);
      JsonNode *per = json_object_get_member (s, "scheduler_calls_per_1000_tasks");
      g_autofree gchar *per_s = per && JSON_NODE_HOLDS_VALUE (per)
                                    ? g_strdup_printf ("%.1f", json_node_get_double (per))
                                    : g_strdup ("-");
      /* null or absent: the site has no budget. */
      gint64 max = json_object_get_int_member_with_default (s, "max_calls_per_minute", 0);
      g_autofree gchar *budget
          = max > 0 ? g_strdup_printf (
                          "%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT,
                          json_object_get_int_member_with_default (s, "calls_last_minute", 0), max)
                    : g_strdup ("unlimited");
      fprintf (out,
               "%-16s %8" G_GINT64_FORMAT " %7" G_GINT64_FORMAT " %7" G_GINT64_FORMAT
               " %7" G_GINT64_FORMAT " %5" G_GINT64_FORMAT " %9s  %s\n",
               json_object_get_string_member_with_default (s, "name", "?"),
               json_object_get_int_member_with_default (s, "scheduler_calls", 0),
               kind_member (s, "submit"), kind_member (s, "poll"), kind_member (s, "cancel"),
               kind_member (s, "put"), per_s, budget);
    }
  for (guint i = 0; i < json_array_get_length (sites); i++)
    {
      JsonObject *s = json_array_get_object_element (sites, i);
      if (json_object_get_boolean_member_with_default (s, "waiting_for_calls", FALSE))
        fprintf (out,
                 "site %s: a submit waits for its budget (%" G_GINT64_FORMAT
                 " calls taken in the last minute, max_calls_per_minute = %" G_GINT64_FORMAT ")\n",
                 json_object_get_string_member_with_default (s, "name", "?"),
                 json_object_get_int_member_with_default (s, "calls_last_minute", 0),
                 json_object_get_int_member_with_default (s, "max_calls_per_minute", 0));
      JsonObject *relay = json_object_has_member (s, "relay")
                                  && JSON_NODE_HOLDS_OBJECT (json_object_get_member (s, "relay"))
                              ? json_object_get_object_member (s, "relay")
                              : NULL;
      if (relay != NULL)
        {
          /* A null member reads as NULL, not as the default. */
          const char *last = json_object_get_string_member_with_default (relay, "last_error", NULL);
          const char *at = json_object_get_string_member_with_default (relay, "endpoint", NULL);
          gint64 conns = json_object_get_int_member_with_default (relay, "connections", 0);
          fprintf (out,
                   "site %s: relay %s at %s, %" G_GINT64_FORMAT " agent connection%s, "
                   "session %" G_GINT64_FORMAT "%s%s\n",
                   json_object_get_string_member_with_default (s, "name", "?"),
                   json_object_get_string_member_with_default (relay, "state", "?"), at ? at : "-",
                   conns, conns == 1 ? "" : "s",
                   json_object_get_int_member_with_default (relay, "sessions", 0),
                   last ? "; last lost: " : "", last ? last : "");
        }
      /* The site's queue-wait bound, once enough waits are known. */
      JsonObject *b = json_object_has_member (s, "queue_wait_bound")
                          ? json_object_get_object_member (s, "queue_wait_bound")
                          : NULL;
      JsonNode *bound = b != NULL ? json_object_get_member (b, "bound_s") : NULL;
      if (bound != NULL && JSON_NODE_HOLDS_VALUE (bound))
        fprintf (out,
                 "site %s: %.0f %% of queue waits end within %.0f s (QBETS, %.0f %% "
                 "confidence, %" G_GINT64_FORMAT " waits of this and earlier campaigns)\n",
                 json_object_get_string_member_with_default (s, "name", "?"),
                 100 * json_object_get_double_member_with_default (b, "quantile", 0),
                 json_node_get_double (bound),
                 100 * json_object_get_double_member_with_default (b, "confidence", 0),
                 json_object_get_int_member_with_default (b, "observations", 0));
    }
}

/* "journal  12300000 bytes, last compacted 2026-11-24 17:55:04 (60100000 ->
 * 9800000 bytes)": bytes exact, as `ls -l` would say them. */
static void
print_journal (JsonObject *st, FILE *out)
{
  JsonObject *j = json_object_has_member (st, "journal")
                      ? json_object_get_object_member (st, "journal")
                      : NULL;
  if (j == NULL)
    return;
  JsonNode *cn = json_object_get_member (j, "last_compaction");
  JsonObject *c = cn != NULL && JSON_NODE_HOLDS_OBJECT (cn) ? json_node_get_object (cn) : NULL;
  fprintf (out, "journal  %" G_GINT64_FORMAT " bytes",
           json_object_get_int_member_with_default (j, "bytes", 0));
  if (c != NULL)
    {
      g_autoptr (GDateTime) t = g_date_time_new_from_unix_local (
          json_object_get_int_member_with_default (c, "time", 0));
      /* With its offset: a live status is rendered by the master, whose
       * time zone may not be the reader's. */
      g_autofree gchar *when = t ? g_date_time_format (t, "%Y-%m-%d %H:%M:%S %z") : g_strdup ("?");
      fprintf (out, ", last compacted %s (%" G_GINT64_FORMAT " -> %" G_GINT64_FORMAT " bytes)",
               when, json_object_get_int_member_with_default (c, "bytes_before", 0),
               json_object_get_int_member_with_default (c, "bytes_after", 0));
    }
  else
    fprintf (out, ", never compacted");
  if (json_object_get_boolean_member_with_default (j, "compacting", FALSE))
    fprintf (out, ", compacting now");
  fputc ('\n', out);
}

void
datc_status_print (JsonObject *st, FILE *out)
{
  JsonObject *m = json_object_get_object_member (st, "master");
  gboolean running = m && json_object_get_boolean_member_with_default (m, "running", FALSE);
  fprintf (out, "campaign %s: %s%s\n", json_object_get_string_member_with_default (st, "dir", "?"),
           running ? "running" : "no master running",
           m && json_object_get_boolean_member_with_default (m, "open", FALSE) ? " (open)" : "");
  g_autofree gchar *loading = loading_text (st);
  if (loading != NULL)
    {
      fprintf (out, "%s\n", loading);
      return;
    }
  gint64 prefetched = tasks_member (st, "prefetched");
  g_autofree gchar *ahead = prefetched > 0
                                ? g_strdup_printf (", %" G_GINT64_FORMAT " prefetched", prefetched)
                                : g_strdup ("");
  fprintf (out,
           "tasks    %" G_GINT64_FORMAT " total: %" G_GINT64_FORMAT " queued, %" G_GINT64_FORMAT
           " running%s, %" G_GINT64_FORMAT " done, %" G_GINT64_FORMAT " failed, %" G_GINT64_FORMAT
           " cancelled\n",
           tasks_member (st, "total"), tasks_member (st, "queued"), tasks_member (st, "running"),
           ahead, tasks_member (st, "done"), tasks_member (st, "failed"),
           tasks_member (st, "cancelled"));
  if (running)
    {
      g_autofree gchar *line = datc_status_line (st);
      const char *bar = strchr (line, '|');
      fprintf (out, "progress %s\n", bar ? bar + 2 : line);
    }
  print_journal (st, out);
  JsonArray *sites = json_object_get_array_member (st, "sites");
  if (!running && sites)
    {
      /* Offline: what the trace kept of each site's trouble. */
      for (guint i = 0; i < json_array_get_length (sites); i++)
        {
          JsonObject *s = json_array_get_object_element (sites, i);
          const char *error = json_object_get_string_member_with_default (s, "last_error", NULL);
          gboolean degraded
              = g_strcmp0 (json_object_get_string_member_with_default (s, "state", ""), "degraded")
                == 0;
          if (error != NULL)
            fprintf (out, "site %s %s: %s\n",
                     json_object_get_string_member_with_default (s, "name", "?"),
                     degraded ? "was degraded when the master stopped"
                              : "was degraded, then worked again; the reason was",
                     error);
        }
    }
  else if (sites && json_array_get_length (sites) > 0)
    {
      if (json_object_has_member (st, "mode"))
        fprintf (out, "mode     %s\n", json_object_get_string_member (st, "mode"));
      fprintf (out, "\n%-16s %-8s %8s %8s %8s %8s %8s %8s\n", "SITE", "STATE", "PENDING", "RUNNING",
               "AGENTS", "DONE", "SUBMITS", "NOAGENT");
      gint64 no_agent = 0;
      for (guint i = 0; i < json_array_get_length (sites); i++)
        {
          JsonObject *s = json_array_get_object_element (sites, i);
          gint64 died = json_object_get_int_member_with_default (s, "proxies_died_early", 0);
          no_agent += died;
          fprintf (out,
                   "%-16s %-8s %8" G_GINT64_FORMAT " %8" G_GINT64_FORMAT " %8" G_GINT64_FORMAT
                   " %8" G_GINT64_FORMAT " %8" G_GINT64_FORMAT " %8" G_GINT64_FORMAT "\n",
                   json_object_get_string_member_with_default (s, "name", "?"),
                   json_object_get_string_member_with_default (s, "state", "?"),
                   json_object_get_int_member_with_default (s, "proxies_pending", 0),
                   json_object_get_int_member_with_default (s, "proxies_running", 0),
                   json_object_get_int_member_with_default (s, "agents", 0),
                   json_object_get_int_member_with_default (s, "done", 0),
                   json_object_get_int_member_with_default (s, "proxies_submitted", 0), died);
        }
      if (no_agent > 0)
        fprintf (out, "NOAGENT: proxies that ended before their agent connected "
                      "(see their logs in the site's workdir)\n");
      /* What is wrong with a degraded site, in its own words. */
      for (guint i = 0; i < json_array_get_length (sites); i++)
        {
          JsonObject *s = json_array_get_object_element (sites, i);
          const char *error = json_object_get_string_member_with_default (s, "last_error", NULL);
          if (g_strcmp0 (json_object_get_string_member_with_default (s, "state", ""), "degraded")
              == 0)
            fprintf (out, "site %s is degraded: %s\n",
                     json_object_get_string_member_with_default (s, "name", "?"),
                     error ? error : "(no message)");
        }
      /* Hosts where tasks kept failing fast. */
      for (guint i = 0; i < json_array_get_length (sites); i++)
        {
          JsonObject *s = json_array_get_object_element (sites, i);
          JsonArray *hosts = json_object_has_member (s, "excluded_hosts")
                                 ? json_object_get_array_member (s, "excluded_hosts")
                                 : NULL;
          if (hosts == NULL || json_array_get_length (hosts) == 0)
            continue;
          fprintf (out, "site %s excludes hosts where tasks failed fast:",
                   json_object_get_string_member_with_default (s, "name", "?"));
          for (guint h = 0; h < json_array_get_length (hosts); h++)
            fprintf (out, " %s", json_array_get_string_element (hosts, h));
          const char *ignored
              = json_object_get_string_member_with_default (s, "exclusion_ignored", NULL);
          if (ignored != NULL)
            fprintf (out, " (but %s)", ignored);
          fputc ('\n', out);
        }
      /* Proxies in a scheduler's queue, and why it says they wait. */
      for (guint i = 0; i < json_array_get_length (sites); i++)
        {
          JsonObject *s = json_array_get_object_element (sites, i);
          gint64 queued = json_object_get_int_member_with_default (s, "proxies_queued", 0);
          if (queued <= 0)
            continue;
          g_autoptr (GArray) reasons = site_reasons (s);
          g_autoptr (GString) why = g_string_new (NULL);
          for (guint k = 0; k < reasons->len; k++)
            {
              ReasonCount *c = &g_array_index (reasons, ReasonCount, k);
              g_string_append_printf (why, "%s%s", k > 0 ? ", " : ": ", c->reason);
              if (reasons->len > 1 || c->count != queued)
                g_string_append_printf (why, " (%" G_GINT64_FORMAT ")", c->count);
            }
          fprintf (out, "site %s: %" G_GINT64_FORMAT " prox%s pending%s\n",
                   json_object_get_string_member_with_default (s, "name", "?"), queued,
                   queued == 1 ? "y" : "ies", why->str);
        }
      print_site_commands (sites, out);
    }
  JsonArray *agents = json_object_get_array_member (st, "agents");
  if (agents && json_array_get_length (agents) > 0)
    {
      fprintf (out, "\n%-28s %-12s %-20s %6s %8s %10s %8s %10s\n", "AGENT", "SITE", "PROXY",
               "SLOTS", "RUNNING", "PREFETCHED", "DONE", "LAST SEEN");
      for (guint i = 0; i < json_array_get_length (agents); i++)
        {
          JsonObject *a = json_array_get_object_element (agents, i);
          fprintf (out,
                   "%-28s %-12s %-20s %6" G_GINT64_FORMAT " %8" G_GINT64_FORMAT
                   " %10" G_GINT64_FORMAT " %8" G_GINT64_FORMAT " %9.1fs\n",
                   json_object_get_string_member_with_default (a, "id", "?"),
                   json_object_get_string_member_with_default (a, "site", "?"),
                   json_object_get_string_member_with_default (a, "proxy", "?"),
                   json_object_get_int_member_with_default (a, "slots", 0),
                   json_object_get_int_member_with_default (a, "running", 0),
                   json_object_get_int_member_with_default (a, "prefetched", 0),
                   json_object_get_int_member_with_default (a, "done", 0),
                   json_object_get_double_member_with_default (a, "last_seen_s", 0));
        }
      gint64 more = agents_total (st) - (gint64) json_array_get_length (agents);
      if (more > 0)
        fprintf (out,
                 "... and %" G_GINT64_FORMAT " more agent%s (datc status --agents lists all)\n",
                 more, more == 1 ? "" : "s");
    }
}

/* {"text": what datc_status_print makes of `status_json`}. */
static gchar *
text_reply (const char *status_json)
{
  g_autoptr (JsonNode) st = json_from_string (status_json, NULL);
  g_assert (st != NULL && JSON_NODE_HOLDS_OBJECT (st)); /* the master's own: a bug otherwise */
  g_autofree char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream (&text, &len);
  g_assert (out != NULL); /* only ENOMEM, which GLib aborts on anyway */
  datc_status_print (json_node_get_object (st), out);
  fclose (out);
  g_autoptr (JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "text");
  json_builder_add_string_value (b, text);
  json_builder_end_object (b);
  g_autoptr (JsonNode) reply = json_builder_get_root (b);
  return json_to_string (reply, FALSE);
}

gchar *
datc_status_reply (JsonObject *request, gchar *status_json)
{
  g_autofree gchar *json = status_json;
  const char *format = json_object_get_string_member_with_default (request, "format", "json");
  if (g_str_equal (format, "json"))
    return g_steal_pointer (&json);
  if (g_str_equal (format, "text"))
    return text_reply (json);
  g_autoptr (JsonNode) refused
      = datc_control_error_reply ("\"format\" of status must be \"json\" or \"text\"");
  return json_to_string (refused, FALSE);
}
