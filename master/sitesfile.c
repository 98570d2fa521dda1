/* sitesfile.c: parse and check SITES.ini.
 *
 * GKeyFile reads the values but forgets where they were, and stops at the
 * first syntax error, so one pass over the raw lines first records the line
 * of every group and key, reports each broken line (not UTF-8, not a group
 * or a key, a group or key given twice, which GKeyFile would silently merge)
 * and blanks it before GKeyFile reads the rest.  All the problems found are
 * reported together, each as FILE:LINE: ... */
#include "sitesfile.h"

#include <string.h>

#include "driver.h"

G_DEFINE_QUARK (datc-sites-error-quark, datc_sites_error)

static const char *const master_keys[]
    = { "listen",         "advertise", "give_up_after", "max_replicas", "compact_min_bytes",
        "compact_factor", NULL };
static const char *const site_keys[] = {
  "transport",
  "host",
  "port",
  "user",
  "identity",
  "known_hosts",
  "scheduler",
  "queue",
  "slots_per_proxy",
  "max_proxies",
  "walltime",
  "submit_args",
  "agent",
  "workdir",
  "poll_interval",
  "command_timeout",
  "max_calls_per_minute",
  "connect_wait",
  "reach",
  "relay_address",
  "migrate_after",
  NULL,
};

typedef struct {
  GHashTable *lines; /* "group\nkey" or "group" -> line number */
  GString *problems;
  const char *path;
} Index;

static void problem (Index *ix, guint line, const char *fmt, ...) G_GNUC_PRINTF (3, 4);

static void
problem (Index *ix, guint line, const char *fmt, ...)
{
  va_list ap;
  g_autofree gchar *msg = NULL;
  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (ix->problems->len > 0)
    g_string_append_c (ix->problems, '\n');
  g_string_append_printf (ix->problems, "%s:%u: %s", ix->path, line, msg);
}

static guint
line_of (Index *ix, const char *group, const char *key)
{
  g_autofree gchar *k = key ? g_strdup_printf ("%s\n%s", group, key) : g_strdup (group);
  return GPOINTER_TO_UINT (g_hash_table_lookup (ix->lines, k));
}

/* GKeyFile's own verdict on one line alone, so a syntax error it would stop
 * at is reported with its line and the rest of the file is still read.
 * `group` is NULL for a group header. */
/* Edits (insertions, deletions, substitutions, swaps of two neighbours)
 * that turn a into b: the optimal string alignment distance.  Keys are
 * short (at most KEY_MAX is compared), so the table is on the stack. */
#define KEY_MAX 32

static guint
edit_distance (const char *a, const char *b)
{
  gsize m = MIN (strlen (a), KEY_MAX), n = MIN (strlen (b), KEY_MAX);
  guint d[KEY_MAX + 1][KEY_MAX + 1];
  for (gsize i = 0; i <= m; i++)
    d[i][0] = (guint) i;
  for (gsize j = 0; j <= n; j++)
    d[0][j] = (guint) j;
  for (gsize i = 1; i <= m; i++)
    for (gsize j = 1; j <= n; j++)
      {
        guint cost = a[i - 1] == b[j - 1] ? 0 : 1;
        d[i][j] = MIN (MIN (d[i - 1][j] + 1, d[i][j - 1] + 1), d[i - 1][j - 1] + cost);
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
          d[i][j] = MIN (d[i][j], d[i - 2][j - 2] + 1);
      }
  return d[m][n];
}

/* The known key a typo most likely meant, or NULL when none is close: at
 * most two edits, and at most one per three letters, so "colour" is not
 * taken for "host". */
static const char *
nearest_key (const char *key, const char *const *known)
{
  const char *best = NULL;
  guint best_d = G_MAXUINT;
  for (guint i = 0; known[i] != NULL; i++)
    {
      guint d = edit_distance (key, known[i]);
      if (d < best_d)
        {
          best_d = d;
          best = known[i];
        }
    }
  gsize len = MAX (strlen (key), best ? strlen (best) : 0);
  return best != NULL && best_d <= 2 && best_d * 3 <= len ? best : NULL;
}

static gboolean
line_parses (const char *group, const char *line, GError **error)
{
  g_autoptr (GKeyFile) kf = g_key_file_new ();
  g_autofree gchar *text
      = group ? g_strdup_printf ("[%s]\n%s\n", group, line) : g_strdup_printf ("%s\n", line);
  return g_key_file_load_from_data (kf, text, (gsize) -1, G_KEY_FILE_NONE, error);
}

/* Records where each group and key is; reports duplicates, lines that are
 * neither, lines that are not UTF-8 text.  Returns the text GKeyFile is given:
 * the same lines, with every broken one blanked (numbers unchanged), so one
 * bad line does not hide the problems of the others. */
static gchar *
index_lines (Index *ix, const char *text, gsize len)
{
  GString *clean = g_string_sized_new (len + 1);
  g_autofree gchar *group = NULL;
  gboolean group_broken = FALSE;
  const char *p = text, *stop = text + len;
  for (guint no = 1; p < stop; no++)
    {
      const char *nl = memchr (p, '\n', (gsize) (stop - p));
      gsize n = nl ? (gsize) (nl - p) : (gsize) (stop - p);
      const char *bad_byte = NULL;
      const char *raw = p;
      p += n + 1;
      if (!g_utf8_validate (raw, (gssize) n, &bad_byte))
        {
          problem (ix, no, "%s at byte %" G_GSIZE_FORMAT,
                   *bad_byte == '\0' ? "NUL character" : "invalid UTF-8",
                   (gsize) (bad_byte - raw) + 1);
          g_string_append_c (clean, '\n');
          continue;
        }
      g_autofree gchar *l = g_strstrip (g_strndup (raw, n));
      /* ';' starts a comment as in most INI files; GKeyFile knows only '#'. */
      if (l[0] == '\0' || l[0] == '#' || l[0] == ';')
        {
          g_string_append_c (clean, '\n');
          continue;
        }
      g_autoptr (GError) local = NULL;
      if (l[0] == '[')
        {
          char *end = strrchr (l, ']');
          g_free (g_steal_pointer (&group));
          group_broken = TRUE;
          if (end == NULL)
            problem (ix, no, "a group header needs a closing ]");
          else if (end[1] != '\0')
            problem (ix, no, "nothing may follow ] in a group header");
          else if (!line_parses (NULL, l, &local))
            problem (ix, no, "%s", local->message);
          else
            {
              group_broken = FALSE;
              group = g_strndup (l + 1, (gsize) (end - l - 1));
              if (g_hash_table_contains (ix->lines, group))
                problem (ix, no, "[%s] is given twice (first at line %u)", group,
                         line_of (ix, group, NULL));
              else
                g_hash_table_insert (ix->lines, g_strdup (group), GUINT_TO_POINTER (no));
              g_string_append_len (clean, raw, (gssize) n);
            }
          g_string_append_c (clean, '\n');
          continue;
        }
      char *eq = strchr (l, '=');
      if (eq == NULL)
        problem (ix, no, "expected KEY = VALUE or [GROUP]");
      else if (group_broken)
        ; /* its group is already reported; which one it meant is unknown */
      else if (group == NULL)
        problem (ix, no, "a key before any [group]");
      else if (!line_parses (group, l, &local))
        problem (ix, no, "%s", local->message);
      else
        {
          g_autofree gchar *key = g_strstrip (g_strndup (l, (gsize) (eq - l)));
          g_autofree gchar *k = g_strdup_printf ("%s\n%s", group, key);
          if (g_hash_table_contains (ix->lines, k))
            problem (ix, no, "%s is given twice in [%s] (first at line %u)", key, group,
                     GPOINTER_TO_UINT (g_hash_table_lookup (ix->lines, k)));
          else
            g_hash_table_insert (ix->lines, g_steal_pointer (&k), GUINT_TO_POINTER (no));
          g_string_append_len (clean, raw, (gssize) n);
        }
      g_string_append_c (clean, '\n');
    }
  return g_string_free (clean, FALSE);
}

gboolean
datc_parse_compact_min_bytes (const char *text, guint64 *bytes)
{
  if (g_str_equal (text, "never"))
    {
      *bytes = G_MAXUINT64;
      return TRUE;
    }
  return g_ascii_string_to_unsigned (text, 10, 1, G_MAXUINT64 - 1, bytes, NULL);
}

gboolean
datc_parse_duration (const char *text, guint *seconds)
{
  guint64 total = 0;
  const char *p = text;
  if (text == NULL || *text == '\0')
    return FALSE;
  if (strchr (text, ':') != NULL)
    {
      /* [[H:]M:]S */
      g_auto (GStrv) parts = g_strsplit (text, ":", -1);
      guint n = g_strv_length (parts);
      if (n > 3)
        return FALSE;
      for (guint i = 0; i < n; i++)
        {
          guint64 v;
          if (!g_ascii_string_to_unsigned (parts[i], 10, 0, i == 0 ? 1000000 : 59, &v, NULL))
            return FALSE;
          total = total * 60 + v;
        }
    }
  else
    {
      gboolean unit_seen = FALSE;
      while (*p)
        {
          char *end;
          if (!g_ascii_isdigit (*p))
            return FALSE;
          guint64 v = g_ascii_strtoull (p, &end, 10);
          if (v > 100000000)
            return FALSE;
          p = end;
          switch (*p)
            {
            case 'h':
              v *= 3600;
              p++;
              break;
            case 'm':
              v *= 60;
              p++;
              break;
            case 's':
              p++;
              break;
            case '\0':
              if (unit_seen)
                return FALSE; /* "1h30" is ambiguous */
              break;
            default:
              return FALSE;
            }
          unit_seen = TRUE;
          total += v;
        }
    }
  if (total > G_MAXUINT32)
    return FALSE;
  *seconds = (guint) total;
  return TRUE;
}

static void
site_config_free (gpointer p)
{
  DatcSiteConfig *c = p;
  g_free (c->name);
  g_free (c->group);
  g_free (c->transport);
  g_free (c->scheduler);
  g_free (c->host);
  g_free (c->queue);
  g_free (c->submit_args);
  g_free (c->agent);
  g_free (c->workdir);
  g_free (c->relay_address);
  g_free (c);
}

void
datc_sites_file_free (DatcSitesFile *f)
{
  if (f == NULL)
    return;
  g_free (f->path);
  if (f->keyfile)
    g_key_file_unref (f->keyfile);
  g_free (f->listen);
  g_free (f->advertise);
  if (f->sites)
    g_ptr_array_unref (f->sites);
  g_free (f);
}

static gboolean
uint_key (Index *ix, GKeyFile *kf, const char *group, const char *key, guint min, guint max,
          guint def, guint *out)
{
  g_autofree gchar *v = g_key_file_get_value (kf, group, key, NULL);
  guint64 n;
  *out = def;
  if (v == NULL)
    return TRUE;
  if (!g_ascii_string_to_unsigned (g_strstrip (v), 10, min, max, &n, NULL))
    {
      problem (ix, line_of (ix, group, key), "%s must be a whole number from %u to %u, not \"%s\"",
               key, min, max, v);
      return FALSE;
    }
  *out = (guint) n;
  return TRUE;
}

/* A listen address that is every address of this machine (0.0.0.0, ::,
 * *): no node can connect to it as such, so agents are told this host's
 * own name, which a compute node may not know or route to. */
static gboolean
listen_is_wildcard (const char *listen)
{
  if (!g_str_has_prefix (listen, "tcp://"))
    return FALSE;
  const char *host = listen + strlen ("tcp://");
  const char *colon = strrchr (host, ':');
  g_autofree gchar *h = g_strndup (host, colon ? (gsize) (colon - host) : strlen (host));
  return h[0] == '\0' || g_str_equal (h, "*") || g_str_equal (h, "0.0.0.0") || g_str_equal (h, "::")
         || g_str_equal (h, "[::]");
}

/* Agents on another machine (an ssh site) connect to what the master
 * advertises.  Without a listen they would be told an ipc:// socket on
 * this machine; with a wildcard listen and no advertise, this machine's
 * host name: either way the jobs would run and no agent would ever
 * connect, so the file is refused at once, naming the fix. */
static void
check_reach (Index *ix, DatcSitesFile *f)
{
  gboolean said_wildcard = FALSE;
  for (guint i = 0; i < f->sites->len; i++)
    {
      DatcSiteConfig *c = f->sites->pdata[i];
      /* A relay site's agents connect to its relay on the login node. */
      if (g_strcmp0 (c->transport, "ssh") != 0 || c->relay)
        continue;
      guint line = line_of (ix, c->group, "transport");
      if (f->listen == NULL)
        problem (ix, line,
                 "site %s is on another machine (transport ssh), but [master] has no listen: "
                 "its agents would be told a socket on this machine; add [master] with "
                 "listen = tcp://0.0.0.0:0 and advertise = HOST the nodes can reach",
                 c->name);
      else if (f->advertise == NULL && listen_is_wildcard (f->listen) && !said_wildcard)
        {
          said_wildcard = TRUE;
          problem (ix, line_of (ix, "master", "listen"),
                   "listen = %s is every address of this machine, and site %s (line %u) is on "
                   "another machine (transport ssh): its agents would be told this host's name "
                   "(%s), which its nodes may not reach; set advertise = HOST the nodes can "
                   "reach",
                   f->listen, c->name, line, g_get_host_name ());
        }
    }
}

static gboolean
names_ok (const char *name)
{
  if (name[0] == '\0' || strlen (name) > 64)
    return FALSE;
  for (const char *p = name; *p; p++)
    if (!g_ascii_isalnum (*p) && *p != '-' && *p != '_' && *p != '.')
      return FALSE;
  return TRUE;
}

DatcSitesFile *
datc_sites_file_load (const char *path, GError **error)
{
  g_autoptr (DatcSitesFile) f = g_new0 (DatcSitesFile, 1);
  g_autofree gchar *text = NULL;
  gsize len;
  g_autoptr (GHashTable) lines = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GString) problems = g_string_new (NULL);
  Index ix = { lines, problems, path };
  g_autoptr (GError) local = NULL;

  f->path = g_strdup (path);
  f->give_up_s = DATC_GIVE_UP_DEFAULT_S;
  f->max_replicas = DATC_MAX_REPLICAS_DEFAULT;
  f->sites = g_ptr_array_new_with_free_func (site_config_free);
  if (!g_file_get_contents (path, &text, &len, &local))
    {
      /* Say what the file is: the command line may name several. */
      const char *why
          = g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT)   ? "no such file"
            : g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_ISDIR) ? "a directory, not a file"
            : g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_ACCES) ? "permission denied"
                                                                        : local->message;
      g_set_error (error, DATC_SITES_ERROR, DATC_SITES_ERROR_IO, "sites file %s: %s", path, why);
      return NULL;
    }
  g_autofree gchar *clean = index_lines (&ix, text, len);
  f->keyfile = g_key_file_new ();
  if (!g_key_file_load_from_data (f->keyfile, clean, (gsize) -1, G_KEY_FILE_NONE, &local))
    {
      /* Every line was checked alone above; this is only a safety net. */
      problem (&ix, 1, "%s", local->message);
      g_set_error (error, DATC_SITES_ERROR, DATC_SITES_ERROR_INVALID, "%s", ix.problems->str);
      return NULL;
    }

  gsize n_groups;
  g_auto (GStrv) groups = g_key_file_get_groups (f->keyfile, &n_groups);
  for (gsize gi = 0; gi < n_groups; gi++)
    {
      const char *g = groups[gi];
      guint gline = line_of (&ix, g, NULL);
      g_auto (GStrv) keys = g_key_file_get_keys (f->keyfile, g, NULL, NULL);
      gboolean is_master = g_str_equal (g, "master");
      if (!is_master && !g_str_has_prefix (g, "site "))
        {
          problem (&ix, gline, "unknown group [%s]: expected [master] or [site NAME]", g);
          continue;
        }
      const char *const *known = is_master ? master_keys : site_keys;
      for (guint k = 0; keys && keys[k]; k++)
        if (!g_strv_contains (known, keys[k]))
          {
            const char *near = nearest_key (keys[k], known);
            g_autofree gchar *hint = near ? g_strdup_printf (": did you mean %s?", near) : NULL;
            problem (&ix, line_of (&ix, g, keys[k]), "unknown key \"%s\" in [%s]%s", keys[k], g,
                     hint ? hint : "");
          }
      if (is_master)
        {
          f->listen = g_key_file_get_string (f->keyfile, g, "listen", NULL);
          f->advertise = g_key_file_get_string (f->keyfile, g, "advertise", NULL);
          if (f->listen && !g_str_has_prefix (f->listen, "tcp://"))
            problem (&ix, line_of (&ix, g, "listen"),
                     "listen must be tcp://HOST:PORT (agents on other hosts connect there)");
          g_autofree gchar *gu = g_key_file_get_string (f->keyfile, g, "give_up_after", NULL);
          if (gu != NULL && !datc_parse_duration (g_strstrip (gu), &f->give_up_s))
            problem (&ix, line_of (&ix, g, "give_up_after"),
                     "give_up_after \"%s\": expected a duration (5m, 90s, 1h, ...) or 0 for "
                     "never",
                     gu);
          g_autofree gchar *mr = g_key_file_get_string (f->keyfile, g, "max_replicas", NULL);
          guint64 replicas = 0;
          if (mr != NULL
              && !g_ascii_string_to_unsigned (g_strstrip (mr), 10, 1, DATC_MAX_REPLICAS_MAX,
                                              &replicas, NULL))
            problem (&ix, line_of (&ix, g, "max_replicas"),
                     "max_replicas \"%s\": expected a whole number from 1 (no replication) to %u",
                     mr, DATC_MAX_REPLICAS_MAX);
          else if (mr != NULL)
            f->max_replicas = (guint) replicas;
          g_autofree gchar *cm = g_key_file_get_string (f->keyfile, g, "compact_min_bytes", NULL);
          if (cm != NULL && !datc_parse_compact_min_bytes (g_strstrip (cm), &f->compact_min_bytes))
            problem (&ix, line_of (&ix, g, "compact_min_bytes"),
                     "compact_min_bytes \"%s\": expected a whole number of bytes from 1, or never",
                     cm);
          g_autofree gchar *cf = g_key_file_get_string (f->keyfile, g, "compact_factor", NULL);
          guint64 factor = 0;
          if (cf != NULL
              && !g_ascii_string_to_unsigned (g_strstrip (cf), 10, 2, 1000, &factor, NULL))
            problem (&ix, line_of (&ix, g, "compact_factor"),
                     "compact_factor \"%s\": expected a whole number from 2 to 1000", cf);
          f->compact_factor = (guint) factor;
          continue;
        }

      DatcSiteConfig *c = g_new0 (DatcSiteConfig, 1);
      c->group = g_strdup (g);
      c->name = g_strstrip (g_strdup (g + 5));
      g_ptr_array_add (f->sites, c);
      if (!names_ok (c->name))
        problem (&ix, gline, "site name \"%s\": use letters, digits, '-', '_' and '.' (64 at most)",
                 c->name);
      if (g_str_equal (c->name, "local"))
        problem (&ix, gline, "\"local\" is the embedded site's name; choose another");
      for (guint j = 0; j + 1 < f->sites->len; j++)
        if (g_str_equal (((DatcSiteConfig *) f->sites->pdata[j])->name, c->name))
          problem (&ix, gline, "site \"%s\" is given twice", c->name);

      c->transport = g_key_file_get_string (f->keyfile, g, "transport", NULL);
      if (c->transport == NULL)
        c->transport = g_strdup ("local");
      if (!datc_transport_exists (c->transport))
        problem (&ix, line_of (&ix, g, "transport"), "unknown transport \"%s\"", c->transport);
      c->scheduler = g_key_file_get_string (f->keyfile, g, "scheduler", NULL);
      if (c->scheduler == NULL)
        problem (&ix, gline, "[%s] needs scheduler = fork | slurm | sge | pbs | condor | lsf", g);
      else if (!datc_scheduler_exists (c->scheduler))
        problem (&ix, line_of (&ix, g, "scheduler"), "unknown scheduler \"%s\"", c->scheduler);
      c->host = g_key_file_get_string (f->keyfile, g, "host", NULL);
      if (g_str_equal (c->transport, "ssh") && (c->host == NULL || c->host[0] == '\0'))
        problem (&ix, gline, "[%s] uses ssh and needs host = ...", g);
      c->queue = g_key_file_get_string (f->keyfile, g, "queue", NULL);
      c->submit_args = g_key_file_get_string (f->keyfile, g, "submit_args", NULL);
      if (c->submit_args != NULL && !g_shell_parse_argv (c->submit_args, NULL, NULL, NULL)
          && c->submit_args[0] != '\0')
        problem (&ix, line_of (&ix, g, "submit_args"), "submit_args: unbalanced quotes");
      uint_key (&ix, f->keyfile, g, "slots_per_proxy", 1, 100000, 1, &c->slots_per_proxy);
      uint_key (&ix, f->keyfile, g, "max_proxies", 1, 10000, 1, &c->max_proxies);
      uint_key (&ix, f->keyfile, g, "port", 1, 65535, 22, &(guint) { 0 });
      g_autofree gchar *wt = g_key_file_get_string (f->keyfile, g, "walltime", NULL);
      if (wt != NULL && !datc_parse_duration (g_strstrip (wt), &c->walltime_s))
        problem (&ix, line_of (&ix, g, "walltime"),
                 "walltime \"%s\": expected 90, 90s, 30m, 2h, 1h30m or H:MM:SS", wt);
      g_autofree gchar *pi = g_key_file_get_string (f->keyfile, g, "poll_interval", NULL);
      if (pi != NULL && (!datc_parse_duration (g_strstrip (pi), &c->poll_s) || c->poll_s == 0))
        problem (&ix, line_of (&ix, g, "poll_interval"),
                 "poll_interval \"%s\": expected a duration of at least 1s (5s, 1m, ...)", pi);
      g_autofree gchar *mc = g_key_file_get_string (f->keyfile, g, "max_calls_per_minute", NULL);
      if (mc != NULL)
        {
          guint64 v = 0;
          c->calls_set = TRUE;
          if (!g_ascii_string_to_unsigned (g_strstrip (mc), 10, 0, 100000, &v, NULL)
              || (v > 0 && v < 4))
            problem (&ix, line_of (&ix, g, "max_calls_per_minute"),
                     "max_calls_per_minute \"%s\": expected 0 (no limit) or at least 4 (two "
                     "are kept for the campaign's end)",
                     mc);
          c->calls_per_minute = (guint) v;
        }
      g_autofree gchar *ct = g_key_file_get_string (f->keyfile, g, "command_timeout", NULL);
      if (ct != NULL
          && (!datc_parse_duration (g_strstrip (ct), &c->command_timeout_s)
              || c->command_timeout_s == 0 || c->command_timeout_s > 3600))
        problem (&ix, line_of (&ix, g, "command_timeout"),
                 "command_timeout \"%s\": expected a duration from 1s to 1h (30s, 2m, ...)", ct);
      g_autofree gchar *cw = g_key_file_get_string (f->keyfile, g, "connect_wait", NULL);
      if (cw != NULL
          && (!datc_parse_duration (g_strstrip (cw), &c->connect_wait_s) || c->connect_wait_s == 0
              || c->connect_wait_s > 86400))
        problem (&ix, line_of (&ix, g, "connect_wait"),
                 "connect_wait \"%s\": expected a duration from 1s to 24h (60s, 5m, ...)", cw);
      c->agent = g_key_file_get_string (f->keyfile, g, "agent", NULL);
      if (c->agent == NULL)
        c->agent = g_strdup ("datc-agent");
      g_autofree gchar *ma = g_key_file_get_string (f->keyfile, g, "migrate_after", NULL);
      if (ma != NULL
          && (!datc_parse_duration (g_strstrip (ma), &c->migrate_after_s)
              || c->migrate_after_s > 7 * 86400))
        problem (&ix, line_of (&ix, g, "migrate_after"),
                 "migrate_after \"%s\": expected 0 (never) or a duration up to 7 days", ma);
      c->migrate_set = ma != NULL;
      c->workdir = g_key_file_get_string (f->keyfile, g, "workdir", NULL);
      g_autofree gchar *reach = g_key_file_get_string (f->keyfile, g, "reach", NULL);
      if (reach != NULL && g_str_equal (g_strstrip (reach), "relay"))
        c->relay = TRUE;
      else if (reach != NULL && !g_str_equal (reach, "direct"))
        problem (&ix, line_of (&ix, g, "reach"),
                 "reach \"%s\": expected direct (agents connect to the master) or relay "
                 "(through the login node)",
                 reach);
      c->relay_address = g_key_file_get_string (f->keyfile, g, "relay_address", NULL);
      /* Kept with reach = direct too: `sites check --probe` tries the
       * relay there when the compute nodes cannot reach the master. */
      if (c->relay_address != NULL
          && (c->relay_address[0] == '\0' || c->relay_address[0] == '-'
              || strpbrk (c->relay_address, " \t/") != NULL))
        problem (&ix, line_of (&ix, g, "relay_address"),
                 "relay_address \"%s\": expected an address or host name of the login node",
                 c->relay_address);
    }
  if (f->sites->len == 0 && ix.problems->len == 0)
    problem (&ix, 1, "no [site NAME] group");
  check_reach (&ix, f);

  if (ix.problems->len > 0)
    {
      g_set_error (error, DATC_SITES_ERROR, DATC_SITES_ERROR_INVALID, "%s", ix.problems->str);
      return NULL;
    }
  return g_steal_pointer (&f);
}
