/* duration.c: strict number parsing for scenario files.  g_ascii_strtod so
 * that a user's locale never changes what "1.5h" means. */
#include "duration.h"

#include <math.h>
#include <string.h>

#include "analysis-error.h"

gboolean
datc_number_parse (const char *text, double *value, GError **error)
{
  const char *p = text;
  while (g_ascii_isspace (*p))
    p++;
  if (*p == '\0')
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT, "missing number");
      return FALSE;
    }
  char *end = NULL;
  double v = g_ascii_strtod (p, &end);
  while (end != NULL && g_ascii_isspace (*end))
    end++;
  if (end == p || end == NULL || *end != '\0' || !isfinite (v)
      || g_ascii_strncasecmp (p, "0x", 2) == 0)
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT, "'%s' is not a number",
                   p);
      return FALSE;
    }
  *value = v;
  return TRUE;
}

gboolean
datc_duration_parse (const char *text, double *seconds, GError **error)
{
  g_autofree gchar *s = g_strstrip (g_strdup (text));
  gsize len = strlen (s);
  double unit = 1.0;
  if (len > 0)
    {
      switch (s[len - 1])
        {
        case 's':
          unit = 1.0;
          s[--len] = '\0';
          break;
        case 'm':
          unit = 60.0;
          s[--len] = '\0';
          break;
        case 'h':
          unit = 3600.0;
          s[--len] = '\0';
          break;
        default:
          break;
        }
    }
  double v;
  if (len == 0 || g_ascii_isspace (s[len - 1]) || !datc_number_parse (s, &v, NULL))
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT,
                   "'%s' is not a time (a number of seconds, or with s, m or h)", text);
      return FALSE;
    }
  if (v < 0)
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT, "time '%s' is negative",
                   text);
      return FALSE;
    }
  v *= unit;
  if (v > DATC_DURATION_MAX)
    {
      g_set_error (error, DATC_ANALYSIS_ERROR, DATC_ANALYSIS_ERROR_INPUT,
                   "time '%s' is longer than ten years", text);
      return FALSE;
    }
  *seconds = v;
  return TRUE;
}

gchar *
datc_duration_format (double seconds)
{
  if (!isfinite (seconds))
    return g_strdup ("never");
  if (seconds < 60.0)
    {
      char buf[G_ASCII_DTOSTR_BUF_SIZE];
      return g_strdup_printf (
          "%ss", g_ascii_formatd (buf, sizeof buf, seconds < 10 ? "%.3f" : "%.1f", seconds));
    }
  guint64 s = (guint64) llround (seconds);
  guint64 h = s / 3600, m = (s / 60) % 60, r = s % 60;
  if (h > 0)
    return g_strdup_printf ("%" G_GUINT64_FORMAT "h%02" G_GUINT64_FORMAT "m", h, m);
  return g_strdup_printf ("%" G_GUINT64_FORMAT "m%02" G_GUINT64_FORMAT "s", m, r);
}
