/* jsonout.c: see jsonout.h. */
#include "jsonout.h"

#include <math.h>
#include <string.h>

void
datc_json_append_string (GString *out, const char *s)
{
  g_string_append_c (out, '"');
  for (const unsigned char *p = (const unsigned char *) (s ? s : ""); *p; p++)
    {
      switch (*p)
        {
        case '"':
          g_string_append (out, "\\\"");
          break;
        case '\\':
          g_string_append (out, "\\\\");
          break;
        case '\n':
          g_string_append (out, "\\n");
          break;
        case '\r':
          g_string_append (out, "\\r");
          break;
        case '\t':
          g_string_append (out, "\\t");
          break;
        default:
          if (*p < 0x20 || *p == 0x7f)
            g_string_append_printf (out, "\\u%04x", *p);
          else
            g_string_append_c (out, (char) *p);
        }
    }
  g_string_append_c (out, '"');
}

void
datc_json_number (GString *out, double v, int decimals)
{
  if (!isfinite (v))
    {
      g_string_append (out, "null");
      return;
    }
  char fmt[8], buf[G_ASCII_DTOSTR_BUF_SIZE + 32];
  g_snprintf (fmt, sizeof fmt, "%%.%df", CLAMP (decimals, 0, 9));
  g_ascii_formatd (buf, sizeof buf, fmt, v);
  /* -0.000 is 0. */
  if (buf[0] == '-' && strspn (buf + 1, "0.") == strlen (buf + 1))
    g_string_append (out, buf + 1);
  else
    g_string_append (out, buf);
}

void
datc_json_key (GString *out, gboolean *first, const char *key)
{
  if (!*first)
    g_string_append_c (out, ',');
  *first = FALSE;
  datc_json_append_string (out, key);
  g_string_append_c (out, ':');
}
