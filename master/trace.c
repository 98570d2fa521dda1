/* trace.c: see trace.h. */
#include "trace.h"

#include "jsonout.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdarg.h>
#include <unistd.h>

struct DatcTrace {
  int fd;
  GString *line;
};

DatcTrace *
datc_trace_open (const char *dir)
{
  g_autofree gchar *path = g_build_filename (dir, "trace.jsonl", NULL);
  int fd = open (path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    {
      g_warning ("%s: %s (no trace will be kept)", path, g_strerror (errno));
      return NULL;
    }
  DatcTrace *t = g_new0 (DatcTrace, 1);
  t->fd = fd;
  t->line = g_string_sized_new (256);
  return t;
}

void
datc_trace_free (DatcTrace *t)
{
  if (t == NULL)
    return;
  close (t->fd);
  g_string_free (t->line, TRUE);
  g_free (t);
}

void
datc_trace_event (DatcTrace *t, const char *event, ...)
{
  if (t == NULL)
    return;
  va_list ap;
  GString *s = t->line;
  g_string_printf (s, "{\"time\":%" G_GINT64_FORMAT ",\"event\":", g_get_real_time ());
  datc_json_append_string (s, event);
  va_start (ap, event);
  const char *key;
  while ((key = va_arg (ap, const char *)) != NULL)
    {
      int kind = va_arg (ap, int);
      g_string_append_c (s, ',');
      datc_json_append_string (s, key);
      g_string_append_c (s, ':');
      if (kind == 's')
        datc_json_append_string (s, va_arg (ap, const char *));
      else if (kind == 'i')
        g_string_append_printf (s, "%" G_GINT64_FORMAT, va_arg (ap, gint64));
      else if (kind == 'd')
        {
          /* JSON has no NaN or infinity; "C" decimal point whatever the locale. */
          double v = va_arg (ap, double);
          char buf[G_ASCII_DTOSTR_BUF_SIZE];
          g_string_append (s, isfinite (v) ? g_ascii_formatd (buf, sizeof buf, "%.3f", v) : "null");
        }
      else
        g_string_append (s, va_arg (ap, gboolean) ? "true" : "false");
    }
  va_end (ap);
  g_string_append (s, "}\n");
  if (write (t->fd, s->str, s->len) != (ssize_t) s->len)
    g_debug ("trace.jsonl: %s", g_strerror (errno));
}
