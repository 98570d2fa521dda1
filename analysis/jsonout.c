/* jsonout.c: see jsonout.h. */
#include "jsonout.h"

#include <math.h>
#include <string.h>

/* What a byte becomes: 0 itself, else the letter after its backslash
 * ('u' for \u00XX).  A table, so runs of plain bytes (nearly every byte
 * of a results line) are found with one load each and copied at once. */
static const char escape_of[256] = {
  [0x00] = 'u', [0x01] = 'u', [0x02] = 'u', [0x03] = 'u', [0x04] = 'u', [0x05] = 'u',  [0x06] = 'u',
  [0x07] = 'u', [0x08] = 'u', ['\t'] = 't', ['\n'] = 'n', [0x0b] = 'u', [0x0c] = 'u',  ['\r'] = 'r',
  [0x0e] = 'u', [0x0f] = 'u', [0x10] = 'u', [0x11] = 'u', [0x12] = 'u', [0x13] = 'u',  [0x14] = 'u',
  [0x15] = 'u', [0x16] = 'u', [0x17] = 'u', [0x18] = 'u', [0x19] = 'u', [0x1a] = 'u',  [0x1b] = 'u',
  [0x1c] = 'u', [0x1d] = 'u', [0x1e] = 'u', [0x1f] = 'u', ['"'] = '"',  ['\\'] = '\\', [0x7f] = 'u',
};

char *
datc_json_put_string (char *out, const char *s, gsize len)
{
  static const char hex[] = "0123456789abcdef";
  const unsigned char *p = (const unsigned char *) s, *end = p + len;

  *out++ = '"';
  while (p < end)
    {
      const unsigned char *run = p;
      while (p < end && escape_of[*p] == 0)
        p++;
      memcpy (out, run, (gsize) (p - run));
      out += p - run;
      if (p == end)
        break;
      char e = escape_of[*p];
      *out++ = '\\';
      *out++ = e;
      if (e == 'u')
        {
          *out++ = '0';
          *out++ = '0';
          *out++ = hex[*p >> 4];
          *out++ = hex[*p & 0xf];
        }
      p++;
    }
  *out++ = '"';
  return out;
}

void
datc_json_append_string (GString *out, const char *s)
{
  gsize len = s != NULL ? strlen (s) : 0, at = out->len;

  g_string_set_size (out, at + DATC_JSON_STRING_MAX (len));
  char *end = datc_json_put_string (out->str + at, s != NULL ? s : "", len);
  g_string_truncate (out, (gsize) (end - out->str));
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
