/* textreply.c: {"text":"..."} to its text.  Only the exact form the
 * master writes is taken (json-glib's compact output: no spaces, one
 * member); anything else is refused, and the fast `datc status` then
 * leaves the request to the full datc, which parses any JSON.  The
 * string is decoded strictly (RFC 8259) but for one thing: a raw control
 * character is taken as it is, since json-glib 1.6 writes U+001F so.
 * Unknown escapes and unpaired surrogates are errors, \u0000 too (the
 * text is printed as a C string). */
#include "textreply.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int
hex4 (const char *p)
{
  int v = 0;
  for (int i = 0; i < 4; i++)
    {
      char c = p[i];
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0)
        return -1;
      v = v << 4 | d;
    }
  return v;
}

static size_t
put_utf8 (char *out, uint32_t cp)
{
  if (cp < 0x80)
    {
      out[0] = (char) cp;
      return 1;
    }
  if (cp < 0x800)
    {
      out[0] = (char) (0xC0 | cp >> 6);
      out[1] = (char) (0x80 | (cp & 0x3F));
      return 2;
    }
  if (cp < 0x10000)
    {
      out[0] = (char) (0xE0 | cp >> 12);
      out[1] = (char) (0x80 | (cp >> 6 & 0x3F));
      out[2] = (char) (0x80 | (cp & 0x3F));
      return 3;
    }
  out[0] = (char) (0xF0 | cp >> 18);
  out[1] = (char) (0x80 | (cp >> 12 & 0x3F));
  out[2] = (char) (0x80 | (cp >> 6 & 0x3F));
  out[3] = (char) (0x80 | (cp & 0x3F));
  return 4;
}

/* The escape at p[0] == '\\', within `end`: writes its character to
 * out, returns the bytes of input it took, or 0 when it is invalid. */
static size_t
unescape (const char *p, const char *end, char *out, size_t *wrote)
{
  if (end - p < 2)
    return 0;
  static const char from[] = "\"\\/bfnrt";
  static const char to[] = "\"\\/\b\f\n\r\t";
  const char *simple = strchr (from, p[1]);
  if (p[1] != '\0' && simple != NULL)
    {
      *out = to[simple - from];
      *wrote = 1;
      return 2;
    }
  if (p[1] != 'u' || end - p < 6)
    return 0;
  int hi = hex4 (p + 2);
  if (hi < 0)
    return 0;
  if (hi < 0xD800 || hi > 0xDFFF)
    {
      if (hi == 0)
        return 0;
      *wrote = put_utf8 (out, (uint32_t) hi);
      return 6;
    }
  if (hi > 0xDBFF || end - p < 12 || p[6] != '\\' || p[7] != 'u')
    return 0;
  int lo = hex4 (p + 8);
  if (lo < 0xDC00 || lo > 0xDFFF)
    return 0;
  *wrote = put_utf8 (out, 0x10000 + (((uint32_t) hi - 0xD800) << 10) + ((uint32_t) lo - 0xDC00));
  return 12;
}

bool
datc_text_reply_decode (const char *reply, size_t len, char **text, size_t *text_len,
                        const char **why)
{
  static const char open[] = "{\"text\":\"";
  static const char close[] = "\"}";
  const size_t open_len = sizeof open - 1, close_len = sizeof close - 1;
  if (len < open_len + close_len || memcmp (reply, open, open_len) != 0
      || memcmp (reply + len - close_len, close, close_len) != 0)
    {
      *why = "not a {\"text\": ...} reply";
      return false;
    }
  const char *p = reply + open_len;
  const char *end = reply + len - close_len;
  /* Each escape yields at most as many bytes as it takes. */
  char *out = malloc ((size_t) (end - p) + 1);
  if (out == NULL)
    {
      *why = "out of memory";
      return false;
    }
  size_t n = 0;
  while (p < end)
    {
      unsigned char c = (unsigned char) *p;
      if (c == '"')
        {
          *why = "an unescaped quote inside the text";
          free (out);
          return false;
        }
      if (c != '\\')
        {
          out[n++] = (char) c;
          p++;
          continue;
        }
      size_t wrote = 0;
      size_t took = unescape (p, end, out + n, &wrote);
      if (took == 0)
        {
          *why = "an invalid escape inside the text";
          free (out);
          return false;
        }
      p += took;
      n += wrote;
    }
  out[n] = '\0';
  *text = out;
  *text_len = n;
  return true;
}
