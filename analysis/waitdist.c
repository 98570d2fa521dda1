/* waitdist.c: queue-wait distributions.  Each kind is a closed-form sampler
 * of one or two uniforms, so sampling costs no allocation and the same
 * stream position always yields the same wait. */
#include "waitdist.h"

#include <errno.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis-error.h"
#include "duration.h"

struct DatcWaitDist {
  gint refs;
  DatcWaitKind kind;
  double a, b;     /* const: X; exp: mean; lognormal: median, sigma; lomax: scale, alpha */
  double *samples; /* empirical, sorted */
  gsize n;
  gchar *file;
};

static DatcWaitDist *
wait_dist_new (DatcWaitKind kind, double a, double b)
{
  DatcWaitDist *d = g_new0 (DatcWaitDist, 1);
  d->refs = 1;
  d->kind = kind;
  d->a = a;
  d->b = b;
  return d;
}

DatcWaitDist *
datc_wait_dist_new_const (double seconds)
{
  return wait_dist_new (DATC_WAIT_CONST, seconds, 0);
}

DatcWaitDist *
datc_wait_dist_new_exp (double mean)
{
  return wait_dist_new (DATC_WAIT_EXP, mean, 0);
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

DatcWaitDist *
datc_wait_dist_new_empirical (const double *waits, gsize n)
{
  g_return_val_if_fail (waits != NULL && n > 0, NULL);
  DatcWaitDist *d = wait_dist_new (DATC_WAIT_EMPIRICAL, 0, 0);
  d->samples = g_memdup2 (waits, n * sizeof (double));
  d->n = n;
  qsort (d->samples, n, sizeof (double), cmp_double);
  return d;
}

DatcWaitDist *
datc_wait_dist_ref (DatcWaitDist *d)
{
  g_atomic_int_inc (&d->refs);
  return d;
}

void
datc_wait_dist_unref (DatcWaitDist *d)
{
  if (d == NULL || !g_atomic_int_dec_and_test (&d->refs))
    return;
  g_free (d->samples);
  g_free (d->file);
  g_free (d);
}

GArray *
datc_waits_load_file (const char *path, GError **error)
{
  FILE *f = fopen (path, "re");
  if (f == NULL)
    {
      int e = errno;
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_IO, "%s: %s", path,
                   g_strerror (e));
      return NULL;
    }
  g_autoptr (GArray) waits = g_array_new (FALSE, FALSE, sizeof (double));
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  guint lineno = 0;
  gboolean ok = TRUE;
  while (ok && (len = getline (&line, &cap, f)) >= 0)
    {
      lineno++;
      if ((size_t) len != strlen (line))
        {
          g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT,
                       "%s:%u: NUL byte in line", path, lineno);
          ok = FALSE;
          break;
        }
      char *p = g_strstrip (line);
      if (*p == '\0' || *p == '#')
        continue;
      g_autoptr (GError) local = NULL;
      double v;
      if (!datc_duration_parse (p, &v, &local))
        {
          g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT, "%s:%u: %s", path,
                       lineno, local->message);
          ok = FALSE;
        }
      else if (waits->len >= DATC_WAIT_MAX_SAMPLES)
        {
          g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_LIMIT,
                       "%s:%u: more than %u waits", path, lineno, DATC_WAIT_MAX_SAMPLES);
          ok = FALSE;
        }
      else
        g_array_append_val (waits, v);
    }
  if (ok && ferror (f))
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_IO, "%s: read error", path);
      ok = FALSE;
    }
  free (line);
  fclose (f);
  if (ok && waits->len == 0)
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT,
                   "%s: no waits in the file (one time per line)", path);
      ok = FALSE;
    }
  return ok ? g_steal_pointer (&waits) : NULL;
}

static gboolean
parse_time_arg (const char *what, const char *text, double *v, GError **error)
{
  g_autoptr (GError) local = NULL;
  if (!datc_duration_parse (text, v, &local))
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT, "%s: %s", what,
                   local->message);
      return FALSE;
    }
  return TRUE;
}

static gboolean
parse_positive_arg (const char *what, const char *text, double lo, double hi, double *v,
                    GError **error)
{
  if (!datc_number_parse (text, v, NULL) || !(*v > lo) || *v > hi)
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT,
                   "%s '%s' must be a number above %g and at most %g", what, text, lo, hi);
      return FALSE;
    }
  return TRUE;
}

void
datc_site_waits_free (DatcSiteWaits *w)
{
  if (w == NULL)
    return;
  g_free (w->site);
  g_array_unref (w->waits);
  g_free (w);
}

gboolean
datc_waits_file_is_trace (const char *path)
{
  FILE *f = fopen (path, "re");
  if (f == NULL)
    return FALSE;
  gboolean trace = FALSE;
  int ch;
  /* Skip blank lines and # comments a byte at a time: no line is read
   * whole, so a huge first line costs nothing. */
  while ((ch = getc (f)) != EOF)
    {
      if (ch == '#')
        {
          while ((ch = getc (f)) != EOF && ch != '\n')
            ;
          continue;
        }
      if (g_ascii_isspace (ch))
        continue;
      trace = ch == '{';
      break;
    }
  fclose (f);
  return trace;
}

static DatcSiteWaits *
site_waits_get (GPtrArray *sites, const char *name)
{
  for (guint i = 0; i < sites->len; i++)
    {
      DatcSiteWaits *w = sites->pdata[i];
      if (g_str_equal (w->site, name))
        return w;
    }
  DatcSiteWaits *w = g_new0 (DatcSiteWaits, 1);
  w->site = g_strdup (name);
  w->waits = g_array_new (FALSE, FALSE, sizeof (double));
  g_ptr_array_add (sites, w);
  return w;
}

/* A string member, or NULL when absent or of another type (the trace
 * comes from outside: no type is taken on trust). */
static const char *
string_member (JsonObject *o, const char *key)
{
  JsonNode *n = json_object_get_member (o, key);
  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (n);
}

static gboolean
int_member (JsonObject *o, const char *key, gint64 *out)
{
  JsonNode *n = json_object_get_member (o, key);
  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_INT64)
    return FALSE;
  *out = json_node_get_int (n);
  return TRUE;
}

/* What the trace says of one proxy, in µs since the epoch (0: not seen). */
typedef struct {
  gchar *site;
  gint64 submitted, started, wait_us;
} ProxyTimes;

static void
proxy_times_free (gpointer p)
{
  ProxyTimes *x = p;
  g_free (x->site);
  g_free (x);
}

static const char *const trace_events[] = { "proxy_submitted", "proxy_started", "agent_connected" };

/* One line of the trace: FALSE when it is one of trace_events but not
 * readable as one. */
static gboolean
see_trace_line (JsonParser *parser, const char *line, gssize len, GHashTable *index,
                GPtrArray *proxies)
{
  if (!json_parser_load_from_data (parser, line, len, NULL)
      || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return FALSE;
  JsonObject *o = json_node_get_object (json_parser_get_root (parser));
  const char *ev = string_member (o, "event");
  const char *site = string_member (o, "site"), *proxy = string_member (o, "proxy");
  gint64 t, v;
  if (ev == NULL || !g_strv_contains (trace_events, ev))
    return TRUE; /* the name was in another member */
  if (site == NULL || proxy == NULL || !int_member (o, "time", &t) || t <= 0)
    return FALSE;
  g_autofree gchar *key = g_strconcat (site, "\n", proxy, NULL);
  ProxyTimes *x = g_hash_table_lookup (index, key);
  if (x == NULL)
    {
      if (proxies->len >= DATC_WAIT_MAX_SAMPLES)
        return FALSE;
      x = g_new0 (ProxyTimes, 1);
      x->site = g_strdup (site);
      x->wait_us = -1;
      g_ptr_array_add (proxies, x);
      g_hash_table_insert (index, g_steal_pointer (&key), x);
    }
  if (g_str_equal (ev, "proxy_submitted"))
    x->submitted = x->submitted ? x->submitted : t;
  else
    {
      /* The first sign it ran: its agent's HELLO, or the scheduler's word
       * (proxy_started's `started`, which a master that noticed a quick
       * agent only after it left may give later than the HELLO). */
      gint64 s = t;
      if (g_str_equal (ev, "proxy_started"))
        {
          if (!int_member (o, "started", &s) || s <= 0)
            s = t;
          if (int_member (o, "wait_us", &v) && v >= 0 && x->wait_us < 0)
            x->wait_us = v;
        }
      x->started = x->started ? MIN (x->started, s) : s;
    }
  return TRUE;
}

GPtrArray *
datc_waits_load_trace (const char *path, guint *skipped, GError **error)
{
  FILE *f = fopen (path, "re");
  if (f == NULL)
    {
      int e = errno;
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_IO, "%s: %s", path,
                   g_strerror (e));
      return NULL;
    }
  g_autoptr (GPtrArray) proxies = g_ptr_array_new_with_free_func (proxy_times_free);
  g_autoptr (GHashTable) index = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  *skipped = 0;
  while ((len = getline (&line, &cap, f)) >= 0)
    {
      /* A last line without its newline is still being written. */
      if (line[len - 1] != '\n')
        break;
      /* Most events say nothing of queue waits: parse only those that do. */
      gboolean wanted = FALSE;
      for (guint i = 0; i < G_N_ELEMENTS (trace_events) && !wanted; i++)
        {
          g_autofree gchar *quoted = g_strdup_printf ("\"%s\"", trace_events[i]);
          wanted = strstr (line, quoted) != NULL;
        }
      if (wanted && !see_trace_line (parser, line, len, index, proxies))
        (*skipped)++;
    }
  gboolean ok = !ferror (f);
  free (line);
  fclose (f);
  if (!ok)
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_IO, "%s: read error", path);
      return NULL;
    }
  g_autoptr (GPtrArray) sites
      = g_ptr_array_new_with_free_func ((GDestroyNotify) datc_site_waits_free);
  for (guint i = 0; i < proxies->len; i++)
    {
      const ProxyTimes *x = proxies->pdata[i];
      double w;
      if (x->started > 0 && x->submitted > 0 && x->started >= x->submitted)
        w = (double) (x->started - x->submitted) / 1e6;
      else if (x->wait_us >= 0)
        w = (double) x->wait_us / 1e6;
      else
        continue; /* never started, or its submit time is lost */
      g_array_append_val (site_waits_get (sites, x->site)->waits, w);
    }
  if (sites->len == 0)
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT,
                   "%s: no proxy started on a site yet, so no queue waits (the embedded local "
                   "site has no queue)",
                   path);
      return NULL;
    }
  return g_steal_pointer (&sites);
}

DatcWaitDist *
datc_wait_dist_parse (const char *text, const char *base_dir, GError **error)
{
  g_auto (GStrv) words = g_strsplit_set (text, " \t", -1);
  g_autoptr (GPtrArray) w = g_ptr_array_new ();
  for (guint i = 0; words[i] != NULL; i++)
    if (words[i][0] != '\0')
      g_ptr_array_add (w, words[i]);
  if (w->len == 0)
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT,
                   "empty wait: expected const X, exp MEAN, lognormal MEDIAN SIGMA, "
                   "lomax SCALE ALPHA or empirical FILE");
      return NULL;
    }
  const char *kind = w->pdata[0];
  struct {
    const char *name;
    guint nargs;
  } const kinds[]
      = { { "const", 1 }, { "exp", 1 }, { "lognormal", 2 }, { "lomax", 2 }, { "empirical", 1 } };
  guint k;
  for (k = 0; k < G_N_ELEMENTS (kinds); k++)
    if (g_str_equal (kind, kinds[k].name))
      break;
  if (k == G_N_ELEMENTS (kinds))
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT,
                   "unknown wait kind '%s': expected const, exp, lognormal, lomax or empirical",
                   kind);
      return NULL;
    }
  if (w->len - 1 != kinds[k].nargs)
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT,
                   "wait '%s' takes %u value%s, not %u", kind, kinds[k].nargs,
                   kinds[k].nargs == 1 ? "" : "s", w->len - 1);
      return NULL;
    }
  const char *a1 = w->pdata[1], *a2 = w->len > 2 ? w->pdata[2] : NULL;
  double x, y;
  switch ((DatcWaitKind) k)
    {
    case DATC_WAIT_CONST:
      if (!parse_time_arg ("const", a1, &x, error))
        return NULL;
      return datc_wait_dist_new_const (x);
    case DATC_WAIT_EXP:
      if (!parse_time_arg ("exp mean", a1, &x, error))
        return NULL;
      return datc_wait_dist_new_exp (x);
    case DATC_WAIT_LOGNORMAL:
      if (!parse_time_arg ("lognormal median", a1, &x, error))
        return NULL;
      if (!datc_number_parse (a2, &y, NULL) || y < 0 || y > 10)
        {
          g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT,
                       "lognormal sigma '%s' must be a number from 0 to 10", a2);
          return NULL;
        }
      return wait_dist_new (DATC_WAIT_LOGNORMAL, x, y);
    case DATC_WAIT_LOMAX:
      if (!parse_time_arg ("lomax scale", a1, &x, error)
          || !parse_positive_arg ("lomax alpha", a2, 0, 1000, &y, error))
        return NULL;
      return wait_dist_new (DATC_WAIT_LOMAX, x, y);
    case DATC_WAIT_EMPIRICAL:
      {
        g_autofree gchar *path = g_path_is_absolute (a1) || base_dir == NULL
                                     ? g_strdup (a1)
                                     : g_build_filename (base_dir, a1, NULL);
        g_autoptr (GArray) waits = datc_waits_load_file (path, error);
        if (waits == NULL)
          return NULL;
        DatcWaitDist *d = datc_wait_dist_new_empirical ((double *) waits->data, waits->len);
        d->file = g_strdup (a1);
        return d;
      }
    }
  g_assert_not_reached ();
}

DatcWaitKind
datc_wait_dist_kind (const DatcWaitDist *d)
{
  return d->kind;
}

double
datc_wait_dist_sample (const DatcWaitDist *d, DatcRng *rng)
{
  switch (d->kind)
    {
    case DATC_WAIT_CONST:
      return d->a;
    case DATC_WAIT_EXP:
      return datc_rng_exp (rng, d->a);
    case DATC_WAIT_LOGNORMAL:
      return d->a * exp (d->b * datc_rng_normal (rng));
    case DATC_WAIT_LOMAX:
      /* Inverse CDF of Pareto II: scale ((1-U)^(-1/alpha) - 1); U is in (0, 1). */
      return MIN (d->a * expm1 (-log (datc_rng_uniform (rng)) / d->b), DATC_DURATION_MAX);
    case DATC_WAIT_EMPIRICAL:
      return d->samples[datc_rng_below (rng, d->n)];
    }
  return 0;
}

double
datc_wait_dist_mean (const DatcWaitDist *d)
{
  switch (d->kind)
    {
    case DATC_WAIT_CONST:
    case DATC_WAIT_EXP:
      return d->a;
    case DATC_WAIT_LOGNORMAL:
      return d->a * exp (d->b * d->b / 2);
    case DATC_WAIT_LOMAX:
      return d->b > 1 ? d->a / (d->b - 1) : INFINITY;
    case DATC_WAIT_EMPIRICAL:
      {
        double s = 0;
        for (gsize i = 0; i < d->n; i++)
          s += d->samples[i];
        return s / (double) d->n;
      }
    }
  return 0;
}

gboolean
datc_wait_dist_is_constant (const DatcWaitDist *d)
{
  switch (d->kind)
    {
    case DATC_WAIT_CONST:
      return TRUE;
    case DATC_WAIT_EXP:
    case DATC_WAIT_LOMAX:
      return d->a == 0;
    case DATC_WAIT_LOGNORMAL:
      return d->a == 0 || d->b == 0;
    case DATC_WAIT_EMPIRICAL:
      return d->samples[0] == d->samples[d->n - 1];
    }
  return FALSE;
}

const double *
datc_wait_dist_samples (const DatcWaitDist *d, gsize *n)
{
  if (n != NULL)
    *n = d->n;
  return d->samples;
}

gchar *
datc_wait_dist_describe (const DatcWaitDist *d)
{
  char a[G_ASCII_DTOSTR_BUF_SIZE], b[G_ASCII_DTOSTR_BUF_SIZE];
  g_ascii_formatd (a, sizeof a, "%g", d->a);
  g_ascii_formatd (b, sizeof b, "%g", d->b);
  switch (d->kind)
    {
    case DATC_WAIT_CONST:
      return g_strdup_printf ("const %s", a);
    case DATC_WAIT_EXP:
      return g_strdup_printf ("exp %s", a);
    case DATC_WAIT_LOGNORMAL:
      return g_strdup_printf ("lognormal %s %s", a, b);
    case DATC_WAIT_LOMAX:
      return g_strdup_printf ("lomax %s %s", a, b);
    case DATC_WAIT_EMPIRICAL:
      return g_strdup_printf ("empirical %s (%" G_GSIZE_FORMAT " waits)", d->file ? d->file : "-",
                              d->n);
    }
  return g_strdup ("?");
}
