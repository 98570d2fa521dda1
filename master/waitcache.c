/* waitcache.c: see waitcache.h. */
#include "waitcache.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "jsonout.h"

struct DatcWaitCache {
  gchar *path;
  GHashTable *sites; /* key -> GArray of Wait, oldest first, at most DATC_WAIT_CACHE_PER_SITE */
  guint64 lines;     /* lines in the file as far as we know */
  gboolean warned;   /* said once that the file cannot be used */
};

typedef struct {
  double wait_s;
  gint64 when;
} Wait;

static void warn_once (DatcWaitCache *c, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

static void
warn_once (DatcWaitCache *c, const char *fmt, ...)
{
  if (c->warned)
    return;
  c->warned = TRUE;
  va_list ap;
  va_start (ap, fmt);
  g_autofree gchar *text = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_printerr ("datc: queue-wait cache %s: %s (ignored: it only informs estimates)\n", c->path,
              text);
}

gchar *
datc_wait_cache_default_path (void)
{
  return g_build_filename (g_get_user_cache_dir (), "datc", "waits.jsonl", NULL);
}

gchar *
datc_wait_cache_key (const char *name, const char *scheduler, const char *queue)
{
  return g_strdup_printf ("%s|%s|%s", name, scheduler, queue != NULL ? queue : "");
}

static void
keep (DatcWaitCache *c, const char *key, double wait_s, gint64 when)
{
  GArray *a = g_hash_table_lookup (c->sites, key);
  if (a == NULL)
    {
      a = g_array_new (FALSE, FALSE, sizeof (Wait));
      g_hash_table_insert (c->sites, g_strdup (key), a);
    }
  Wait w = { wait_s, when };
  g_array_append_val (a, w);
  if (a->len > DATC_WAIT_CACHE_PER_SITE)
    g_array_remove_range (a, 0, a->len - DATC_WAIT_CACHE_PER_SITE);
}

/* One line: {"site": KEY, "wait_s": SECONDS, "time": EPOCH_S}. */
static gboolean
parse_line (DatcWaitCache *c, const char *line, guint64 lineno)
{
  g_autoptr (JsonParser) p = json_parser_new ();
  JsonNode *root = NULL;
  if (json_parser_load_from_data (p, line, -1, NULL))
    root = json_parser_get_root (p);
  JsonObject *o
      = root != NULL && JSON_NODE_HOLDS_OBJECT (root) ? json_node_get_object (root) : NULL;
  JsonNode *site = o != NULL ? json_object_get_member (o, "site") : NULL;
  JsonNode *wait = o != NULL ? json_object_get_member (o, "wait_s") : NULL;
  JsonNode *when = o != NULL ? json_object_get_member (o, "time") : NULL;
  if (site == NULL || json_node_get_value_type (site) != G_TYPE_STRING || wait == NULL
      || !JSON_NODE_HOLDS_VALUE (wait) || when == NULL || !JSON_NODE_HOLDS_VALUE (when))
    {
      warn_once (c,
                 "line %" G_GUINT64_FORMAT ": not {\"site\": KEY, \"wait_s\": SECONDS, "
                 "\"time\": EPOCH}",
                 lineno);
      return FALSE;
    }
  double w = json_node_get_double (wait);
  if (!(w >= 0 && w < 1e9))
    {
      warn_once (c, "line %" G_GUINT64_FORMAT ": wait_s out of range", lineno);
      return FALSE;
    }
  keep (c, json_node_get_string (site), w, json_node_get_int (when));
  return TRUE;
}

DatcWaitCache *
datc_wait_cache_open (const char *path)
{
  DatcWaitCache *c = g_new0 (DatcWaitCache, 1);
  c->path = path != NULL ? g_strdup (path) : datc_wait_cache_default_path ();
  c->sites
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_array_unref);
  g_autofree gchar *text = NULL;
  g_autoptr (GError) error = NULL;
  if (!g_file_get_contents (c->path, &text, NULL, &error))
    {
      if (!g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        warn_once (c, "%s", error->message);
      return c;
    }
  guint64 lineno = 0;
  for (char *line = text, *nl; *line != '\0'; line = nl + 1)
    {
      nl = strchr (line, '\n');
      if (nl == NULL)
        break; /* a last line without its newline: cut off by a crash */
      *nl = '\0';
      lineno++;
      if (line[0] != '\0')
        parse_line (c, line, lineno);
    }
  c->lines = lineno;
  return c;
}

void
datc_wait_cache_free (DatcWaitCache *c)
{
  if (c == NULL)
    return;
  g_hash_table_unref (c->sites);
  g_free (c->path);
  g_free (c);
}

void
datc_wait_cache_get (DatcWaitCache *c, const char *key, GArray *out)
{
  GArray *a = g_hash_table_lookup (c->sites, key);
  for (guint i = 0; a != NULL && i < a->len; i++)
    g_array_append_val (out, g_array_index (a, Wait, i).wait_s);
}

static void
append_line (GString *s, const char *key, const Wait *w)
{
  g_string_append (s, "{\"site\":");
  datc_json_append_string (s, key);
  g_string_append (s, ",\"wait_s\":");
  datc_json_number (s, w->wait_s, 3);
  g_string_append_printf (s, ",\"time\":%" G_GINT64_FORMAT "}\n", w->when);
}

/* The file again with what is kept: temporary file, then rename. */
static gboolean
rewrite (DatcWaitCache *c)
{
  g_autoptr (GString) s = g_string_new (NULL);
  guint64 lines = 0;
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init (&it, c->sites);
  while (g_hash_table_iter_next (&it, &k, &v))
    for (guint i = 0; i < ((GArray *) v)->len; i++, lines++)
      append_line (s, k, &g_array_index ((GArray *) v, Wait, i));
  g_autoptr (GError) error = NULL;
  if (!g_file_set_contents_full (c->path, s->str, (gssize) s->len, G_FILE_SET_CONTENTS_CONSISTENT,
                                 0600, &error))
    {
      warn_once (c, "%s", error->message);
      return FALSE;
    }
  c->lines = lines;
  return TRUE;
}

void
datc_wait_cache_add (DatcWaitCache *c, const char *key, double wait_s, gint64 when)
{
  keep (c, key, wait_s, when);
  g_autofree gchar *dir = g_path_get_dirname (c->path);
  if (g_mkdir_with_parents (dir, 0700) != 0)
    {
      warn_once (c, "%s: %s", dir, g_strerror (errno));
      return;
    }
  guint64 bound = 2 * (guint64) DATC_WAIT_CACHE_PER_SITE * MAX (1u, g_hash_table_size (c->sites));
  if (c->lines + 1 > bound)
    {
      rewrite (c); /* holds the new wait too */
      return;
    }
  g_autoptr (GString) s = g_string_new (NULL);
  Wait w = { wait_s, when };
  append_line (s, key, &w);
  /* One write of one line with O_APPEND: whole lines, even beside another
   * campaign's. */
  FILE *f = g_fopen (c->path, "a");
  if (f == NULL)
    {
      warn_once (c, "%s", g_strerror (errno));
      return;
    }
  gboolean written = fwrite (s->str, 1, s->len, f) == s->len;
  if (fclose (f) != 0 || !written)
    {
      warn_once (c, "cannot append: %s", g_strerror (errno));
      return;
    }
  c->lines++;
}
