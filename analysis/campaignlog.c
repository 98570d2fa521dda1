/* campaignlog.c: see campaignlog.h.  Each file is read line by line with
 * one reused JsonParser; a line is copied out into small records at once,
 * so memory is one DatcResultPoint per finished task, whatever the size of
 * the lines. */
#include "campaignlog.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "analysis-error.h"

#define MAX_WARNINGS 20

struct DatcCampaignLog {
  gchar *dir;
  GPtrArray *warnings;
  guint suppressed;
  guint64 tasks, done, failed;
  gboolean finished, saw_start;
  guint sessions;
  gchar *mode;        /* of the last session that said, or campaign.json's; NULL: unknown */
  guint max_replicas; /* of the last session that said (1: none); 0: unknown */
  gint64 start, last_session, end, first_seen;
  GPtrArray *sites;           /* DatcSiteLog* */
  GHashTable *site_index;     /* name -> index + 1 */
  GPtrArray *proxies;         /* DatcProxyLog* */
  GHashTable *proxy_index;    /* "site\nproxy" -> index + 1 */
  GHashTable *agents;         /* agent id -> proxy index + 1, for slots */
  GArray *results;            /* DatcResultPoint */
  GArray *run_sum, *run_sum2; /* per site: seconds, for mean and cv */
  GHashTable *classes;        /* why tasks ended: class -> count (in a pointer) */
};

/* Distinct classes counted; a file with more (not ours) counts the rest as "other". */
#define CLASSES_MAX 32

static gint
class_cmp (gconstpointer a, gconstpointer b, gpointer classes)
{
  const char *x = *(const char *const *) a, *y = *(const char *const *) b;
  guint nx = GPOINTER_TO_UINT (g_hash_table_lookup (classes, x));
  guint ny = GPOINTER_TO_UINT (g_hash_table_lookup (classes, y));
  return nx != ny ? (nx > ny ? -1 : 1) : strcmp (x, y);
}

GPtrArray *
datc_campaign_log_classes (const DatcCampaignLog *log, GArray *counts)
{
  GPtrArray *names = g_ptr_array_new ();
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init (&it, log->classes);
  while (g_hash_table_iter_next (&it, &k, NULL))
    g_ptr_array_add (names, k);
  g_ptr_array_sort_with_data (names, class_cmp, log->classes);
  for (guint i = 0; i < names->len; i++)
    {
      guint64 n = GPOINTER_TO_UINT (g_hash_table_lookup (log->classes, names->pdata[i]));
      g_array_append_val (counts, n);
    }
  return names;
}

static void
site_log_free (gpointer p)
{
  DatcSiteLog *s = p;
  g_free (s->name);
  g_array_unref (s->waits);
  g_free (s);
}

static void
proxy_log_free (gpointer p)
{
  DatcProxyLog *x = p;
  g_free (x->site);
  g_free (x->proxy);
  g_free (x->job);
  g_free (x);
}

void
datc_campaign_log_free (DatcCampaignLog *log)
{
  if (log == NULL)
    return;
  g_free (log->dir);
  g_free (log->mode);
  g_ptr_array_unref (log->warnings);
  g_ptr_array_unref (log->sites);
  g_hash_table_unref (log->site_index);
  g_ptr_array_unref (log->proxies);
  g_hash_table_unref (log->proxy_index);
  g_hash_table_unref (log->agents);
  g_array_unref (log->results);
  g_array_unref (log->run_sum);
  g_array_unref (log->run_sum2);
  g_hash_table_unref (log->classes);
  g_free (log);
}

G_GNUC_PRINTF (4, 5)
static void
warn (DatcCampaignLog *log, const char *path, guint64 line, const char *fmt, ...)
{
  if (log->warnings->len >= MAX_WARNINGS)
    {
      log->suppressed++;
      return;
    }
  va_list ap;
  va_start (ap, fmt);
  g_autofree gchar *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_ptr_array_add (log->warnings,
                   g_strdup_printf ("%s:%" G_GUINT64_FORMAT ": %s", path, line, msg));
}

static guint
site_get (DatcCampaignLog *log, const char *name)
{
  gpointer v = g_hash_table_lookup (log->site_index, name);
  if (v != NULL)
    return GPOINTER_TO_UINT (v) - 1;
  DatcSiteLog *s = g_new0 (DatcSiteLog, 1);
  s->name = g_strdup (name);
  s->waits = g_array_new (FALSE, FALSE, sizeof (double));
  g_ptr_array_add (log->sites, s);
  double zero = 0;
  g_array_append_val (log->run_sum, zero);
  g_array_append_val (log->run_sum2, zero);
  g_hash_table_insert (log->site_index, g_strdup (name), GUINT_TO_POINTER (log->sites->len));
  return log->sites->len - 1;
}

/* The proxy, created when first seen; NULL past the limit. */
static DatcProxyLog *
proxy_get (DatcCampaignLog *log, const char *site, const char *proxy)
{
  g_autofree gchar *key = g_strconcat (site, "\n", proxy, NULL);
  gpointer v = g_hash_table_lookup (log->proxy_index, key);
  if (v != NULL)
    return log->proxies->pdata[GPOINTER_TO_UINT (v) - 1];
  if (log->proxies->len >= DATC_LOG_MAX_PROXIES)
    return NULL;
  DatcProxyLog *x = g_new0 (DatcProxyLog, 1);
  x->site = g_strdup (site);
  x->proxy = g_strdup (proxy);
  x->site_index = site_get (log, site);
  g_ptr_array_add (log->proxies, x);
  g_hash_table_insert (log->proxy_index, g_steal_pointer (&key),
                       GUINT_TO_POINTER (log->proxies->len));
  return x;
}

typedef gboolean (*LineFunc) (DatcCampaignLog *log, JsonObject *o, const char *path, guint64 line);

/* Reads DIR/NAME line by line; FALSE (no error) when the file is absent. */
static gboolean
read_lines (DatcCampaignLog *log, const char *name, LineFunc fn, GError **error)
{
  g_autofree gchar *path = g_build_filename (log->dir, name, NULL);
  FILE *f = fopen (path, "re");
  if (f == NULL)
    {
      int e = errno;
      if (e != ENOENT)
        g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_IO, "%s: %s", path,
                     g_strerror (e));
      return FALSE;
    }
  g_autoptr (JsonParser) parser = json_parser_new ();
  GString *buf = g_string_sized_new (512);
  char chunk[8192];
  guint64 lineno = 0;
  gboolean too_long = FALSE;
  while (fgets (chunk, sizeof chunk, f) != NULL)
    {
      gsize n = strlen (chunk);
      gboolean complete = n > 0 && chunk[n - 1] == '\n';
      if (!too_long)
        {
          if (buf->len + n > DATC_LOG_MAX_LINE)
            too_long = TRUE;
          else
            g_string_append_len (buf, chunk, (gssize) n);
        }
      if (!complete)
        continue;
      lineno++;
      if (too_long)
        warn (log, path, lineno, "line longer than %u bytes, skipped", DATC_LOG_MAX_LINE);
      else if (buf->len > 1)
        {
          g_autoptr (GError) local = NULL;
          if (!json_parser_load_from_data (parser, buf->str, (gssize) buf->len, &local)
              || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
            warn (log, path, lineno, "not a JSON object%s%s, skipped", local ? ": " : "",
                  local ? local->message : "");
          else
            fn (log, json_node_get_object (json_parser_get_root (parser)), path, lineno);
        }
      g_string_truncate (buf, 0);
      too_long = FALSE;
    }
  /* A last line without its newline is still being written: not an error. */
  g_string_free (buf, TRUE);
  fclose (f);
  return TRUE;
}

static gboolean
get_int (JsonObject *o, const char *key, gint64 *out)
{
  JsonNode *n = json_object_get_member (o, key);
  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_INT64)
    return FALSE;
  *out = json_node_get_int (n);
  return TRUE;
}

static const char *
get_str (JsonObject *o, const char *key)
{
  JsonNode *n = json_object_get_member (o, key);
  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (n);
}

static void
see_time (DatcCampaignLog *log, gint64 t)
{
  if (t > log->end)
    log->end = t;
  if (log->first_seen == 0 || t < log->first_seen)
    log->first_seen = t;
}

/* One scheduler command the master's budget counted: site, kind, calls. */
static gboolean
on_site_command (DatcCampaignLog *log, JsonObject *o, const char *path, guint64 line)
{
  const char *site = get_str (o, "site"), *kind = get_str (o, "kind");
  gint64 calls;
  if (site == NULL || kind == NULL || !get_int (o, "calls", &calls) || calls < 0
      || calls > DATC_LOG_MAX_CALLS_PER_EVENT)
    {
      warn (log, path, line,
            "site_command without \"site\", \"kind\" and \"calls\" (0 to %u), skipped",
            DATC_LOG_MAX_CALLS_PER_EVENT);
      return FALSE;
    }
  guint i = site_get (log, site); /* before reading pdata: it may grow it */
  DatcSiteLog *s = log->sites->pdata[i];
  s->calls += (guint64) calls;
  if (g_str_equal (kind, "submit"))
    s->calls_submit += (guint64) calls;
  else if (g_str_equal (kind, "poll"))
    s->calls_poll += (guint64) calls;
  else if (g_str_equal (kind, "cancel"))
    s->calls_cancel += (guint64) calls;
  return TRUE;
}

static gboolean
on_event (DatcCampaignLog *log, JsonObject *o, const char *path, guint64 line)
{
  gint64 t;
  const char *ev = get_str (o, "event");
  if (ev == NULL || !get_int (o, "time", &t) || t <= 0)
    {
      warn (log, path, line, "no \"event\" and \"time\", skipped");
      return FALSE;
    }
  if (g_str_equal (ev, "campaign_started"))
    {
      gint64 tasks = 0;
      if (get_int (o, "tasks", &tasks) && tasks >= 0)
        log->tasks = (guint64) tasks;
      const char *mode = get_str (o, "mode");
      if (mode != NULL)
        {
          g_free (log->mode);
          log->mode = g_strdup (mode);
        }
      gint64 replicas = 0;
      log->max_replicas = get_int (o, "max_replicas", &replicas) && replicas >= 1
                              ? (guint) MIN (replicas, G_MAXUINT32)
                              : 0;
      if (!log->saw_start)
        log->start = t;
      log->saw_start = TRUE;
      /* A new master: agents of the old one are gone or will say HELLO again. */
      for (guint i = 0; i < log->proxies->len; i++)
        ((DatcProxyLog *) log->proxies->pdata[i])->agents_live = 0;
      log->sessions++;
      log->last_session = t;
      log->finished = FALSE;
      see_time (log, t);
      return TRUE;
    }
  if (g_str_equal (ev, "campaign_finished"))
    {
      log->finished = TRUE;
      see_time (log, t);
      return TRUE;
    }
  /* Not a time seen: the commands of the end (cancels, polls) would move
   * the end of proxies the trace does not see end. */
  if (g_str_equal (ev, "site_command"))
    return on_site_command (log, o, path, line);
  gboolean is_proxy = g_str_has_prefix (ev, "proxy_"), is_agent = g_str_has_prefix (ev, "agent_");
  if (!is_proxy && !is_agent)
    return TRUE; /* an event of a newer master */
  const char *site = get_str (o, "site"), *proxy = get_str (o, "proxy");
  if (site == NULL || proxy == NULL)
    {
      warn (log, path, line, "%s without \"site\" and \"proxy\", skipped", ev);
      return FALSE;
    }
  see_time (log, t);
  DatcProxyLog *x = proxy_get (log, site, proxy);
  if (x == NULL)
    {
      warn (log, path, line, "more than %u proxies, the rest are not counted",
            DATC_LOG_MAX_PROXIES);
      return FALSE;
    }
  gint64 v;
  if (g_str_equal (ev, "proxy_submitted"))
    {
      /* A proxy id is submitted once; keep the first. */
      if (x->submitted == 0)
        x->submitted = t;
      if (get_int (o, "slots", &v) && v > 0 && v <= G_MAXUINT)
        x->slots = (guint) v;
      if (get_int (o, "walltime", &v) && v > 0)
        x->walltime = (double) v;
      const char *job = get_str (o, "job");
      if (job != NULL && x->job == NULL)
        x->job = g_strdup (job);
    }
  else if (g_str_equal (ev, "proxy_ended") || g_str_equal (ev, "proxy_cancelled"))
    {
      x->ended = t;
      if (g_str_equal (ev, "proxy_cancelled") && x->started == 0)
        x->cancelled = TRUE;
    }
  else if (g_str_equal (ev, "agent_connected"))
    {
      if (x->started == 0)
        x->started = t;
      x->agents_live++;
      const char *agent = get_str (o, "agent");
      /* Slots from agents only when the submission did not say; each agent once. */
      if (agent != NULL && !g_hash_table_contains (log->agents, agent))
        {
          g_hash_table_add (log->agents, g_strdup (agent));
          if (get_int (o, "slots", &v) && v > 0 && v <= G_MAXUINT && x->submitted == 0)
            x->slots += (guint) v;
        }
    }
  else if (g_str_equal (ev, "agent_exited") || g_str_equal (ev, "agent_lost"))
    {
      /* The proxy's end once its last agent is gone, unless the
       * provisioner says so itself (proxy_ended comes later). */
      if (x->agents_live > 0 && --x->agents_live == 0 && x->ended == 0)
        x->ended = t;
    }
  return TRUE;
}

static gboolean
on_result (DatcCampaignLog *log, JsonObject *o, const char *path, guint64 line)
{
  gint64 started, finished, code = -1;
  const char *status = get_str (o, "status");
  const char *site = get_str (o, "site");
  if (status == NULL || !get_int (o, "finished", &finished) || finished <= 0)
    {
      warn (log, path, line, "result without \"status\" and \"finished\", skipped");
      return FALSE;
    }
  if (log->results->len >= DATC_LOG_MAX_RESULTS)
    {
      warn (log, path, line, "more than %u results, the rest are not counted",
            DATC_LOG_MAX_RESULTS);
      return FALSE;
    }
  if (!get_int (o, "started", &started) || started <= 0 || started > finished)
    started = finished;
  get_int (o, "exit_code", &code);
  /* A line of an older datc has no class: it follows from the status. */
  static const char *const by_status[][2] = {
    { "exited", "exit" },
    { "signaled", "signal" },
    { "drained", "walltime" },
  };
  const char *cls = get_str (o, "class");
  for (guint i = 0; cls == NULL && i < G_N_ELEMENTS (by_status); i++)
    if (g_str_equal (status, by_status[i][0]))
      cls = by_status[i][1];
  if (cls == NULL)
    cls = status; /* timeout, spawn_failed, cancelled, refused, lost: the same word */
  guint n = GPOINTER_TO_UINT (g_hash_table_lookup (log->classes, cls));
  if (n == 0 && g_hash_table_size (log->classes) >= CLASSES_MAX)
    cls = "other";
  n = GPOINTER_TO_UINT (g_hash_table_lookup (log->classes, cls));
  g_hash_table_replace (log->classes, g_strdup (cls), GUINT_TO_POINTER (n + 1));
  DatcResultPoint r = { started, finished, site_get (log, site && site[0] ? site : "?"),
                        g_str_equal (status, "exited") && code == 0 };
  g_array_append_val (log->results, r);
  DatcSiteLog *s = log->sites->pdata[r.site_index];
  double run = (double) (finished - started) / 1e6;
  s->busy_seconds += run;
  g_array_index (log->run_sum, double, r.site_index) += run;
  g_array_index (log->run_sum2, double, r.site_index) += run * run;
  if (r.ok)
    {
      s->done++;
      log->done++;
    }
  else
    {
      s->failed++;
      log->failed++;
    }
  see_time (log, started);
  see_time (log, finished);
  return TRUE;
}

static int
cmp_result (const void *a, const void *b)
{
  const DatcResultPoint *x = a, *y = b;
  return (x->finished > y->finished) - (x->finished < y->finished);
}

static int
cmp_proxy_start (const void *a, const void *b)
{
  const DatcProxyLog *x = *(DatcProxyLog *const *) a, *y = *(DatcProxyLog *const *) b;
  gint64 sx = x->started ? x->started : G_MAXINT64, sy = y->started ? y->started : G_MAXINT64;
  if (sx != sy)
    return (sx > sy) - (sx < sy);
  return (x->submitted > y->submitted) - (x->submitted < y->submitted);
}

/* The mode campaign.json recorded when the campaign was created: traces
 * written before campaign_started said it.  NULL when it does not say. */
static gchar *
mode_from_campaign_json (const char *dir)
{
  g_autofree gchar *path = g_build_filename (dir, "campaign.json", NULL);
  GStatBuf st;
  if (g_stat (path, &st) != 0 || !S_ISREG (st.st_mode) || st.st_size > DATC_LOG_MAX_LINE)
    return NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  if (!json_parser_load_from_file (parser, path, NULL)
      || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return NULL;
  const char *mode = get_str (json_node_get_object (json_parser_get_root (parser)), "mode");
  return g_strdup (mode);
}

DatcCampaignLog *
datc_campaign_log_load (const char *dir, GError **error)
{
  g_autoptr (DatcCampaignLog) log = g_new0 (DatcCampaignLog, 1);
  log->dir = g_strdup (dir);
  log->warnings = g_ptr_array_new_with_free_func (g_free);
  log->sites = g_ptr_array_new_with_free_func (site_log_free);
  log->site_index = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  log->proxies = g_ptr_array_new_with_free_func (proxy_log_free);
  log->proxy_index = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  log->agents = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  log->results = g_array_new (FALSE, FALSE, sizeof (DatcResultPoint));
  log->classes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  log->run_sum = g_array_new (FALSE, FALSE, sizeof (double));
  log->run_sum2 = g_array_new (FALSE, FALSE, sizeof (double));

  if (!g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_IO,
                   "%s: not a campaign directory", dir);
      return NULL;
    }
  GError *local = NULL;
  gboolean have_trace = read_lines (log, "trace.jsonl", on_event, &local);
  if (local != NULL)
    {
      g_propagate_error (error, local);
      return NULL;
    }
  gboolean have_results = read_lines (log, "results.jsonl", on_result, &local);
  if (local != NULL)
    {
      g_propagate_error (error, local);
      return NULL;
    }
  if (!have_trace && !have_results)
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_IO,
                   "%s: no trace.jsonl or results.jsonl: not a campaign directory", dir);
      return NULL;
    }
  if (!have_trace)
    g_ptr_array_add (log->warnings,
                     g_strdup_printf ("%s/trace.jsonl: missing; proxies are unknown", dir));
  if (log->suppressed > 0)
    g_ptr_array_add (log->warnings,
                     g_strdup_printf ("... and %u more lines skipped", log->suppressed));
  if (log->mode == NULL)
    log->mode = mode_from_campaign_json (dir);
  if (!log->saw_start)
    log->start = log->first_seen;
  if (log->tasks == 0)
    log->tasks = log->done + log->failed;
  if (log->sessions == 0)
    log->last_session = log->start;

  if (log->results->len > 1)
    qsort (log->results->data, log->results->len, sizeof (DatcResultPoint), cmp_result);
  g_ptr_array_sort (log->proxies, cmp_proxy_start);

  /* Per site: proxies, waits in start order, held slot time. */
  for (guint i = 0; i < log->proxies->len; i++)
    {
      DatcProxyLog *x = log->proxies->pdata[i];
      DatcSiteLog *s = log->sites->pdata[x->site_index];
      if (x->submitted)
        s->submitted++;
      if (x->cancelled)
        s->cancelled++;
      if (x->started == 0)
        continue;
      s->started++;
      if (x->submitted && x->started >= x->submitted)
        {
          double w = (double) (x->started - x->submitted) / 1e6;
          g_array_append_val (s->waits, w);
        }
      gint64 end = x->ended ? x->ended : log->end;
      if (end > x->started)
        s->held_seconds += (double) MAX (x->slots, 1) * (double) (end - x->started) / 1e6;
    }
  for (guint i = 0; i < log->sites->len; i++)
    {
      DatcSiteLog *s = log->sites->pdata[i];
      double n = (double) (s->done + s->failed);
      if (n > 0)
        {
          double m = g_array_index (log->run_sum, double, i) / n;
          double var = g_array_index (log->run_sum2, double, i) / n - m * m;
          s->task_mean = m;
          s->task_cv = m > 0 ? sqrt (MAX (0, var)) / m : 0;
        }
    }
  return g_steal_pointer (&log);
}

const char *
datc_campaign_log_dir (const DatcCampaignLog *log)
{
  return log->dir;
}

guint
datc_campaign_log_n_warnings (const DatcCampaignLog *log)
{
  return log->warnings->len;
}

const char *
datc_campaign_log_warning (const DatcCampaignLog *log, guint i)
{
  g_return_val_if_fail (i < log->warnings->len, NULL);
  return log->warnings->pdata[i];
}

guint64
datc_campaign_log_tasks (const DatcCampaignLog *log)
{
  return log->tasks;
}

guint64
datc_campaign_log_done (const DatcCampaignLog *log)
{
  return log->done;
}

guint64
datc_campaign_log_failed (const DatcCampaignLog *log)
{
  return log->failed;
}

gboolean
datc_campaign_log_finished (const DatcCampaignLog *log)
{
  return log->finished;
}

const char *
datc_campaign_log_mode (const DatcCampaignLog *log)
{
  return log->mode;
}

guint
datc_campaign_log_max_replicas (const DatcCampaignLog *log)
{
  return log->max_replicas;
}

guint
datc_campaign_log_sessions (const DatcCampaignLog *log)
{
  return log->sessions;
}

gint64
datc_campaign_log_start (const DatcCampaignLog *log)
{
  return log->start;
}

gint64
datc_campaign_log_last_session_start (const DatcCampaignLog *log)
{
  return log->last_session;
}

gint64
datc_campaign_log_end (const DatcCampaignLog *log)
{
  return log->end;
}

guint
datc_campaign_log_n_sites (const DatcCampaignLog *log)
{
  return log->sites->len;
}

const DatcSiteLog *
datc_campaign_log_site (const DatcCampaignLog *log, guint i)
{
  g_return_val_if_fail (i < log->sites->len, NULL);
  return log->sites->pdata[i];
}

guint
datc_campaign_log_n_proxies (const DatcCampaignLog *log)
{
  return log->proxies->len;
}

const DatcProxyLog *
datc_campaign_log_proxy (const DatcCampaignLog *log, guint i)
{
  g_return_val_if_fail (i < log->proxies->len, NULL);
  return log->proxies->pdata[i];
}

guint64
datc_campaign_log_n_results (const DatcCampaignLog *log)
{
  return log->results->len;
}

const DatcResultPoint *
datc_campaign_log_results (const DatcCampaignLog *log)
{
  return (const DatcResultPoint *) log->results->data;
}
