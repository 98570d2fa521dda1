/* scenario.c: scenario files.  GKeyFile holds the values; a line index built
 * beside it gives every group and key its line, so each complaint names its
 * place, and catches what GKeyFile forgives silently (a repeated key or
 * group, a misspelt key). */
#include "scenario.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis-error.h"
#include "duration.h"

struct DatcScenario {
  gchar *path;
  guint64 tasks;
  GPtrArray *sites; /* DatcScenarioSite* */
};

static void
site_free (gpointer p)
{
  DatcScenarioSite *s = p;
  g_free (s->name);
  datc_wait_dist_unref (s->wait);
  g_free (s);
}

DatcScenario *
datc_scenario_new (guint64 tasks)
{
  DatcScenario *sc = g_new0 (DatcScenario, 1);
  sc->tasks = tasks;
  sc->sites = g_ptr_array_new_with_free_func (site_free);
  return sc;
}

void
datc_scenario_free (DatcScenario *sc)
{
  if (sc == NULL)
    return;
  g_ptr_array_unref (sc->sites);
  g_free (sc->path);
  g_free (sc);
}

DatcScenarioSite *
datc_scenario_add_site (DatcScenario *sc, const char *name, guint slots_per_proxy, guint proxies,
                        double task_time, double task_cv, DatcWaitDist *wait)
{
  DatcScenarioSite *s = g_new0 (DatcScenarioSite, 1);
  s->name = g_strdup (name);
  s->slots_per_proxy = slots_per_proxy;
  s->proxies = proxies;
  s->max_proxies = proxies;
  s->task_time = task_time;
  s->task_cv = task_cv;
  s->wait = wait != NULL ? wait : datc_wait_dist_new_const (0);
  s->poll_interval = DATC_SCENARIO_POLL_INTERVAL;
  g_ptr_array_add (sc->sites, s);
  return s;
}

DatcScenario *
datc_scenario_copy_without (const DatcScenario *sc, guint skip)
{
  DatcScenario *c = datc_scenario_new (sc->tasks);
  c->path = g_strdup (sc->path);
  for (guint i = 0; i < sc->sites->len; i++)
    {
      if (i == skip)
        continue;
      DatcScenarioSite *s = g_memdup2 (sc->sites->pdata[i], sizeof (DatcScenarioSite));
      s->name = g_strdup (s->name);
      s->wait = datc_wait_dist_ref (s->wait);
      g_ptr_array_add (c->sites, s);
    }
  return c;
}

void
datc_scenario_set_site_wait (DatcScenario *sc, guint i, DatcWaitDist *wait)
{
  g_return_if_fail (i < sc->sites->len && wait != NULL);
  DatcScenarioSite *s = sc->sites->pdata[i];
  datc_wait_dist_unref (s->wait);
  s->wait = wait;
}

const char *
datc_scenario_path (const DatcScenario *sc)
{
  return sc->path;
}

guint64
datc_scenario_tasks (const DatcScenario *sc)
{
  return sc->tasks;
}

void
datc_scenario_set_tasks (DatcScenario *sc, guint64 tasks)
{
  sc->tasks = tasks;
}

guint
datc_scenario_n_sites (const DatcScenario *sc)
{
  return sc->sites->len;
}

const DatcScenarioSite *
datc_scenario_site (const DatcScenario *sc, guint i)
{
  g_return_val_if_fail (i < sc->sites->len, NULL);
  return sc->sites->pdata[i];
}

DatcScenarioSite *
datc_scenario_site_mut (DatcScenario *sc, guint i)
{
  g_return_val_if_fail (i < sc->sites->len, NULL);
  return sc->sites->pdata[i];
}

guint64
datc_scenario_total_slots (const DatcScenario *sc)
{
  guint64 n = 0;
  for (guint i = 0; i < sc->sites->len; i++)
    {
      const DatcScenarioSite *s = sc->sites->pdata[i];
      n += (guint64) s->slots_per_proxy * s->proxies;
    }
  return n;
}

guint
datc_scenario_total_proxies (const DatcScenario *sc)
{
  guint64 n = 0;
  for (guint i = 0; i < sc->sites->len; i++)
    n += ((const DatcScenarioSite *) sc->sites->pdata[i])->proxies;
  return (guint) MIN (n, G_MAXUINT);
}

gboolean
datc_scenario_is_deterministic (const DatcScenario *sc)
{
  for (guint i = 0; i < sc->sites->len; i++)
    {
      const DatcScenarioSite *s = sc->sites->pdata[i];
      if (!datc_wait_dist_is_constant (s->wait) || s->task_cv > 0 || s->fail_rate > 0)
        return FALSE;
      if (s->outage_length > 0 && s->outage_probability > 0 && s->outage_probability < 1)
        return FALSE;
    }
  return TRUE;
}

/* Sets "PATH:LINE: " + message (or "PATH: " when line is 0). */
G_GNUC_PRINTF (5, 6)
static void
set_at (GError **error, int code, const char *path, guint line, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree gchar *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (line > 0)
    g_set_error (error, DATC_ANALYSIS_ERROR, code, "%s:%u: %s", path ? path : "-", line, msg);
  else
    g_set_error (error, DATC_ANALYSIS_ERROR, code, "%s: %s", path ? path : "-", msg);
}

gboolean
datc_scenario_validate (const DatcScenario *sc, GError **error)
{
  const char *p = sc->path;
  if (sc->tasks == 0 || sc->tasks > DATC_SCENARIO_MAX_TASKS)
    {
      set_at (error, DATC_ANALYSIS_ERROR_LIMIT, p, 0, "tasks must be from 1 to %u",
              DATC_SCENARIO_MAX_TASKS);
      return FALSE;
    }
  if (sc->sites->len == 0 || sc->sites->len > DATC_SCENARIO_MAX_SITES)
    {
      set_at (error, DATC_ANALYSIS_ERROR_INPUT, p, 0, "a scenario needs 1 to %u [site NAME] groups",
              DATC_SCENARIO_MAX_SITES);
      return FALSE;
    }
  for (guint i = 0; i < sc->sites->len; i++)
    {
      const DatcScenarioSite *s = sc->sites->pdata[i];
      if (s->slots_per_proxy == 0 || s->slots_per_proxy > DATC_SCENARIO_MAX_SLOTS_PER_PROXY
          || s->proxies > DATC_SCENARIO_MAX_PROXIES || s->max_proxies > DATC_SCENARIO_MAX_PROXIES
          || (s->proxies == 0 && s->max_proxies == 0))
        {
          set_at (error, DATC_ANALYSIS_ERROR_LIMIT, p, s->line,
                  "[site %s]: slots_per_proxy must be 1 to %u and proxies 1 to %u "
                  "(0 with max_proxies above it)",
                  s->name, DATC_SCENARIO_MAX_SLOTS_PER_PROXY, DATC_SCENARIO_MAX_PROXIES);
          return FALSE;
        }
      if (s->max_proxies < s->proxies || !(s->migrate_after >= 0)
          || s->migrate_after > DATC_DURATION_MAX)
        {
          set_at (error, DATC_ANALYSIS_ERROR_INPUT, p, s->line,
                  "[site %s]: max_proxies must be at least proxies and migrate_after a time",
                  s->name);
          return FALSE;
        }
      if (!(s->task_time > 0) || s->task_time > DATC_DURATION_MAX || !(s->task_cv >= 0)
          || s->task_cv > 10)
        {
          set_at (error, DATC_ANALYSIS_ERROR_INPUT, p, s->line,
                  "[site %s]: task_time must be above 0 and task_cv from 0 to 10", s->name);
          return FALSE;
        }
      if (s->walltime > 0 && s->walltime < s->task_time)
        {
          set_at (error, DATC_ANALYSIS_ERROR_INPUT, p, s->line,
                  "[site %s]: walltime is shorter than task_time: no task would ever fit", s->name);
          return FALSE;
        }
      if (!(s->job_overhead >= 0) || s->job_overhead > DATC_DURATION_MAX || !(s->poll_interval >= 0)
          || s->poll_interval > DATC_DURATION_MAX
          || s->calls_per_minute > DATC_SCENARIO_MAX_CALLS_PER_MINUTE)
        {
          set_at (error, DATC_ANALYSIS_ERROR_INPUT, p, s->line,
                  "[site %s]: poll_interval and job_overhead must be times and "
                  "max_calls_per_minute 0 to %u",
                  s->name, DATC_SCENARIO_MAX_CALLS_PER_MINUTE);
          return FALSE;
        }
      if (!(s->fail_rate >= 0) || s->fail_rate > 1000 || !(s->outage_probability >= 0)
          || s->outage_probability > 1 || !(s->outage_length >= 0))
        {
          set_at (error, DATC_ANALYSIS_ERROR_INPUT, p, s->line,
                  "[site %s]: fail_rate must be 0 to 1000 and outage probability 0 to 1", s->name);
          return FALSE;
        }
      for (guint j = 0; j < i; j++)
        if (g_str_equal (((DatcScenarioSite *) sc->sites->pdata[j])->name, s->name))
          {
            set_at (error, DATC_ANALYSIS_ERROR_INPUT, p, s->line, "site '%s' appears twice",
                    s->name);
            return FALSE;
          }
    }
  if (datc_scenario_total_slots (sc) > DATC_SCENARIO_MAX_TOTAL_SLOTS
      || datc_scenario_total_proxies (sc) > DATC_SCENARIO_MAX_TOTAL_PROXIES)
    {
      set_at (error, DATC_ANALYSIS_ERROR_LIMIT, p, 0, "more than %u slots or %u proxies in all",
              DATC_SCENARIO_MAX_TOTAL_SLOTS, DATC_SCENARIO_MAX_TOTAL_PROXIES);
      return FALSE;
    }
  if (datc_scenario_total_proxies (sc) == 0)
    {
      set_at (error, DATC_ANALYSIS_ERROR_INPUT, p, 0,
              "no site has proxies: every site says proxies = 0");
      return FALSE;
    }
  return TRUE;
}

/* ---- the line index ---- */

typedef struct {
  GHashTable *lines; /* "group\nkey" or "group" -> line */
  GPtrArray *groups; /* in file order */
} LineIndex;

static void
line_index_clear (LineIndex *ix)
{
  g_clear_pointer (&ix->lines, g_hash_table_unref);
  g_clear_pointer (&ix->groups, g_ptr_array_unref);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (LineIndex, line_index_clear)

static guint
line_of (LineIndex *ix, const char *group, const char *key)
{
  g_autofree gchar *k = key ? g_strconcat (group, "\n", key, NULL) : g_strdup (group);
  return GPOINTER_TO_UINT (g_hash_table_lookup (ix->lines, k));
}

/* Follows GKeyFile's own reading of a line (both ends trimmed; '#' starts a
 * comment line; [..] a group; otherwise key = value), so a line it refuses
 * is found here first, with its number. */
static gboolean
line_index_build (LineIndex *ix, const char *path, const char *data, gsize len, GError **error)
{
  ix->lines = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  ix->groups = g_ptr_array_new_with_free_func (g_free);
  g_auto (GStrv) lines = g_strsplit (data, "\n", -1);
  const char *group = NULL;
  const char *nul = memchr (data, '\0', len);
  if (nul != NULL)
    {
      guint line = 1;
      for (const char *p = data; p < nul; p++)
        line += *p == '\n';
      set_at (error, DATC_ANALYSIS_ERROR_INPUT, path, line, "contains a NUL byte");
      return FALSE;
    }
  for (guint i = 0; lines[i] != NULL; i++)
    {
      guint lineno = i + 1;
      if (!g_utf8_validate (lines[i], -1, NULL))
        {
          set_at (error, DATC_ANALYSIS_ERROR_INPUT, path, lineno, "not valid UTF-8");
          return FALSE;
        }
      char *l = g_strstrip (lines[i]);
      if (*l == '\0' || *l == '#')
        continue;
      gsize n = strlen (l);
      if (*l == '[')
        {
          if (l[n - 1] != ']' || n < 3 || memchr (l + 1, ']', n - 2) != NULL
              || memchr (l + 1, '[', n - 2) != NULL)
            {
              set_at (error, DATC_ANALYSIS_ERROR_INPUT, path, lineno,
                      "'%s' is not a group header such as [site NAME]", l);
              return FALSE;
            }
          l[n - 1] = '\0';
          const char *name = l + 1;
          guint seen = line_of (ix, name, NULL);
          if (seen != 0)
            {
              set_at (error, DATC_ANALYSIS_ERROR_INPUT, path, lineno,
                      "group [%s] appears again (first at line %u)", name, seen);
              return FALSE;
            }
          g_hash_table_insert (ix->lines, g_strdup (name), GUINT_TO_POINTER (lineno));
          g_ptr_array_add (ix->groups, g_strdup (name));
          group = ix->groups->pdata[ix->groups->len - 1];
          continue;
        }
      const char *eq = strchr (l, '=');
      if (eq == NULL || eq == l)
        {
          set_at (error, DATC_ANALYSIS_ERROR_INPUT, path, lineno,
                  "'%s' is not key = value, a [group] or a # comment", l);
          return FALSE;
        }
      if (group == NULL)
        {
          set_at (error, DATC_ANALYSIS_ERROR_INPUT, path, lineno,
                  "key before any group: start with [campaign]");
          return FALSE;
        }
      g_autofree gchar *key = g_strstrip (g_strndup (l, (gsize) (eq - l)));
      g_autofree gchar *full = g_strconcat (group, "\n", key, NULL);
      guint seen = GPOINTER_TO_UINT (g_hash_table_lookup (ix->lines, full));
      if (seen != 0)
        {
          set_at (error, DATC_ANALYSIS_ERROR_INPUT, path, lineno,
                  "key '%s' appears again in [%s] (first at line %u)", key, group, seen);
          return FALSE;
        }
      g_hash_table_insert (ix->lines, g_steal_pointer (&full), GUINT_TO_POINTER (lineno));
    }
  return TRUE;
}

/* ---- values ---- */

typedef struct {
  GKeyFile *kf;
  LineIndex *ix;
  const char *path;
  const char *group;
} Reader;

/* The value with a trailing " # comment" removed, or NULL when absent. */
static gchar *
get_value (Reader *r, const char *key)
{
  gchar *v = g_key_file_get_value (r->kf, r->group, key, NULL);
  if (v == NULL)
    return NULL;
  for (char *p = v; *p; p++)
    if (*p == '#' && (p == v || g_ascii_isspace (p[-1])))
      {
        *p = '\0';
        break;
      }
  return g_strstrip (v);
}

static gboolean
get_uint (Reader *r, const char *key, guint64 lo, guint64 hi, gboolean required, guint64 *out,
          GError **error)
{
  g_autofree gchar *v = get_value (r, key);
  if (v == NULL)
    {
      if (!required)
        return TRUE;
      set_at (error, DATC_ANALYSIS_ERROR_INPUT, r->path, line_of (r->ix, r->group, NULL),
              "[%s] has no %s", r->group, key);
      return FALSE;
    }
  if (!g_ascii_string_to_unsigned (v, 10, lo, hi, out, NULL))
    {
      set_at (error, DATC_ANALYSIS_ERROR_INPUT, r->path, line_of (r->ix, r->group, key),
              "%s = '%s': expected a whole number from %" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT,
              key, v, lo, hi);
      return FALSE;
    }
  return TRUE;
}

static gboolean
get_time (Reader *r, const char *key, gboolean required, double *out, GError **error)
{
  g_autofree gchar *v = get_value (r, key);
  if (v == NULL)
    {
      if (!required)
        return TRUE;
      set_at (error, DATC_ANALYSIS_ERROR_INPUT, r->path, line_of (r->ix, r->group, NULL),
              "[%s] has no %s", r->group, key);
      return FALSE;
    }
  g_autoptr (GError) local = NULL;
  if (!datc_duration_parse (v, out, &local))
    {
      set_at (error, DATC_ANALYSIS_ERROR_INPUT, r->path, line_of (r->ix, r->group, key), "%s: %s",
              key, local->message);
      return FALSE;
    }
  return TRUE;
}

static gboolean
get_number (Reader *r, const char *key, double lo, double hi, double *out, GError **error)
{
  g_autofree gchar *v = get_value (r, key);
  if (v == NULL)
    return TRUE;
  if (!datc_number_parse (v, out, NULL) || *out < lo || *out > hi)
    {
      set_at (error, DATC_ANALYSIS_ERROR_INPUT, r->path, line_of (r->ix, r->group, key),
              "%s = '%s': expected a number from %g to %g", key, v, lo, hi);
      return FALSE;
    }
  return TRUE;
}

/* Every key the file wrote in the current group must be known; the index
 * sees keys GKeyFile would hide (locale keys such as name[fr]). */
static gboolean
check_keys (Reader *r, const char *const *known, GError **error)
{
  g_autofree gchar *prefix = g_strconcat (r->group, "\n", NULL);
  gsize plen = strlen (prefix);
  const char *bad = NULL;
  guint bad_line = G_MAXUINT;
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init (&it, r->ix->lines);
  while (g_hash_table_iter_next (&it, &k, &v))
    {
      const char *full = k;
      if (strncmp (full, prefix, plen) != 0 || g_strv_contains (known, full + plen))
        continue;
      if (GPOINTER_TO_UINT (v) < bad_line)
        {
          bad = full + plen;
          bad_line = GPOINTER_TO_UINT (v);
        }
    }
  if (bad != NULL)
    {
      g_autofree gchar *list = g_strjoinv (", ", (gchar **) known);
      set_at (error, DATC_ANALYSIS_ERROR_INPUT, r->path, bad_line,
              "unknown key '%s' in [%s] (known: %s)", bad, r->group, list);
      return FALSE;
    }
  return TRUE;
}

static gboolean
read_site (DatcScenario *sc, Reader *r, const char *name, const char *base_dir, GError **error)
{
  static const char *const known[] = { "slots_per_proxy",
                                       "proxies",
                                       "task_time",
                                       "task_cv",
                                       "wait",
                                       "walltime",
                                       "fail_rate",
                                       "outage",
                                       "poll_interval",
                                       "job_overhead",
                                       "max_calls_per_minute",
                                       "max_proxies",
                                       "migrate_after",
                                       NULL };
  guint line = line_of (r->ix, r->group, NULL);
  if (!check_keys (r, known, error))
    return FALSE;
  guint64 slots = 0, proxies = 1;
  double task_time = 0, cv = 0;
  if (!get_uint (r, "slots_per_proxy", 1, DATC_SCENARIO_MAX_SLOTS_PER_PROXY, TRUE, &slots, error)
      || !get_uint (r, "proxies", 0, DATC_SCENARIO_MAX_PROXIES, FALSE, &proxies, error)
      || !get_time (r, "task_time", TRUE, &task_time, error)
      || !get_number (r, "task_cv", 0, 10, &cv, error))
    return FALSE;
  if (task_time <= 0)
    {
      set_at (error, DATC_ANALYSIS_ERROR_INPUT, r->path, line_of (r->ix, r->group, "task_time"),
              "task_time must be above 0");
      return FALSE;
    }
  g_autoptr (DatcWaitDist) wait = NULL;
  g_autofree gchar *wtext = get_value (r, "wait");
  if (wtext != NULL)
    {
      g_autoptr (GError) local = NULL;
      wait = datc_wait_dist_parse (wtext, base_dir, &local);
      if (wait == NULL)
        {
          set_at (error, DATC_ANALYSIS_ERROR_INPUT, r->path, line_of (r->ix, r->group, "wait"),
                  "wait: %s", local->message);
          return FALSE;
        }
    }
  DatcScenarioSite *s = datc_scenario_add_site (sc, name, (guint) slots, (guint) proxies, task_time,
                                                cv, g_steal_pointer (&wait));
  s->line = line;
  guint64 calls = 0;
  if (!get_time (r, "walltime", FALSE, &s->walltime, error)
      || !get_number (r, "fail_rate", 0, 1000, &s->fail_rate, error)
      || !get_time (r, "poll_interval", FALSE, &s->poll_interval, error)
      || !get_time (r, "job_overhead", FALSE, &s->job_overhead, error)
      || !get_uint (r, "max_calls_per_minute", 0, DATC_SCENARIO_MAX_CALLS_PER_MINUTE, FALSE, &calls,
                    error))
    return FALSE;
  s->calls_per_minute = (guint) calls;
  guint64 max_proxies = proxies;
  if (!get_uint (r, "max_proxies", proxies, DATC_SCENARIO_MAX_PROXIES, FALSE, &max_proxies, error)
      || !get_time (r, "migrate_after", FALSE, &s->migrate_after, error))
    return FALSE;
  if (max_proxies == 0)
    {
      set_at (error, DATC_ANALYSIS_ERROR_INPUT, r->path, line_of (r->ix, r->group, "proxies"),
              "proxies = 0 needs max_proxies above it (room for proxies moved here)");
      return FALSE;
    }
  s->max_proxies = (guint) max_proxies;
  if (s->walltime > 0 && s->walltime < s->task_time)
    {
      set_at (error, DATC_ANALYSIS_ERROR_INPUT, r->path, line_of (r->ix, r->group, "walltime"),
              "walltime is shorter than task_time: no task would ever fit");
      return FALSE;
    }
  g_autofree gchar *outage = get_value (r, "outage");
  if (outage != NULL)
    {
      g_auto (GStrv) w = g_strsplit_set (outage, " \t", -1);
      g_autoptr (GPtrArray) words = g_ptr_array_new ();
      for (guint i = 0; w[i] != NULL; i++)
        if (w[i][0])
          g_ptr_array_add (words, w[i]);
      if (words->len != 2 || !datc_number_parse (words->pdata[0], &s->outage_probability, NULL)
          || s->outage_probability < 0 || s->outage_probability > 1
          || !datc_duration_parse (words->pdata[1], &s->outage_length, NULL))
        {
          set_at (error, DATC_ANALYSIS_ERROR_INPUT, r->path, line_of (r->ix, r->group, "outage"),
                  "outage = '%s': expected a probability from 0 to 1 and a time, e.g. 0.2 24h",
                  outage);
          return FALSE;
        }
    }
  return TRUE;
}

DatcScenario *
datc_scenario_load (const char *path, GError **error)
{
  struct stat st;
  if (stat (path, &st) != 0)
    {
      int e = errno;
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_IO, "%s: %s", path,
                   g_strerror (e));
      return NULL;
    }
  if (!S_ISREG (st.st_mode) || (guint64) st.st_size > DATC_SCENARIO_MAX_BYTES)
    {
      set_at (error, DATC_ANALYSIS_ERROR_LIMIT, path, 0, "not a regular file of at most %u bytes",
              DATC_SCENARIO_MAX_BYTES);
      return NULL;
    }
  g_autofree gchar *data = NULL;
  gsize len = 0;
  if (!g_file_get_contents (path, &data, &len, error))
    return NULL;
  if (len > DATC_SCENARIO_MAX_BYTES)
    {
      set_at (error, DATC_ANALYSIS_ERROR_LIMIT, path, 0, "larger than %u bytes",
              DATC_SCENARIO_MAX_BYTES);
      return NULL;
    }
  g_auto (LineIndex) ix = { 0 };
  if (!line_index_build (&ix, path, data, len, error))
    return NULL;
  g_autoptr (GKeyFile) kf = g_key_file_new ();
  g_autoptr (GError) local = NULL;
  if (!g_key_file_load_from_data (kf, data, len, G_KEY_FILE_NONE, &local))
    {
      set_at (error, DATC_ANALYSIS_ERROR_INPUT, path, 0, "%s", local->message);
      return NULL;
    }

  g_autoptr (DatcScenario) sc = datc_scenario_new (0);
  sc->path = g_strdup (path);
  g_autofree gchar *base_dir = g_path_get_dirname (path);
  Reader r = { kf, &ix, path, NULL };
  gboolean have_campaign = FALSE;
  for (guint g = 0; g < ix.groups->len; g++)
    {
      const char *group = ix.groups->pdata[g];
      r.group = group;
      if (g_str_equal (group, "campaign"))
        {
          static const char *const known[] = { "tasks", NULL };
          guint64 tasks = 0;
          if (!check_keys (&r, known, error)
              || !get_uint (&r, "tasks", 1, DATC_SCENARIO_MAX_TASKS, TRUE, &tasks, error))
            return NULL;
          sc->tasks = tasks;
          have_campaign = TRUE;
        }
      else if (g_str_has_prefix (group, "site "))
        {
          g_autofree gchar *name = g_strstrip (g_strdup (group + 5));
          if (name[0] == '\0')
            {
              set_at (error, DATC_ANALYSIS_ERROR_INPUT, path, line_of (&ix, group, NULL),
                      "[site ] needs a name: [site NAME]");
              return NULL;
            }
          if (sc->sites->len >= DATC_SCENARIO_MAX_SITES)
            {
              set_at (error, DATC_ANALYSIS_ERROR_LIMIT, path, line_of (&ix, group, NULL),
                      "more than %u sites", DATC_SCENARIO_MAX_SITES);
              return NULL;
            }
          for (guint i = 0; i < sc->sites->len; i++)
            if (g_str_equal (((DatcScenarioSite *) sc->sites->pdata[i])->name, name))
              {
                set_at (error, DATC_ANALYSIS_ERROR_INPUT, path, line_of (&ix, group, NULL),
                        "site '%s' appears again (first at line %u)", name,
                        ((DatcScenarioSite *) sc->sites->pdata[i])->line);
                return NULL;
              }
          if (!read_site (sc, &r, name, base_dir, error))
            return NULL;
        }
      else
        {
          set_at (error, DATC_ANALYSIS_ERROR_INPUT, path, line_of (&ix, group, NULL),
                  "unknown group [%s]: expected [campaign] or [site NAME]", group);
          return NULL;
        }
    }
  if (!have_campaign)
    {
      set_at (error, DATC_ANALYSIS_ERROR_INPUT, path, 1, "no [campaign] group with tasks = N");
      return NULL;
    }
  if (sc->sites->len == 0)
    {
      set_at (error, DATC_ANALYSIS_ERROR_INPUT, path, line_of (&ix, "campaign", NULL),
              "no [site NAME] group: a scenario needs at least one site");
      return NULL;
    }
  if (datc_scenario_total_slots (sc) > DATC_SCENARIO_MAX_TOTAL_SLOTS
      || datc_scenario_total_proxies (sc) > DATC_SCENARIO_MAX_TOTAL_PROXIES)
    {
      const DatcScenarioSite *last = sc->sites->pdata[sc->sites->len - 1];
      set_at (error, DATC_ANALYSIS_ERROR_LIMIT, path, last->line,
              "more than %u slots or %u proxies in all", DATC_SCENARIO_MAX_TOTAL_SLOTS,
              DATC_SCENARIO_MAX_TOTAL_PROXIES);
      return NULL;
    }
  if (datc_scenario_total_proxies (sc) == 0)
    {
      set_at (error, DATC_ANALYSIS_ERROR_INPUT, path, 0,
              "no site has proxies: every site says proxies = 0");
      return NULL;
    }
  return g_steal_pointer (&sc);
}
