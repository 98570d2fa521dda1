/* jsonline.c: see jsonline.h. */
#include "jsonline.h"

void
datc_json_append_string (GString *s, const char *v)
{
  g_string_append_c (s, '"');
  for (const char *p = v ? v : ""; *p; p++)
    {
      unsigned char c = (unsigned char) *p;
      switch (c)
        {
        case '"': g_string_append (s, "\\\""); break;
        case '\\': g_string_append (s, "\\\\"); break;
        case '\n': g_string_append (s, "\\n"); break;
        case '\r': g_string_append (s, "\\r"); break;
        case '\t': g_string_append (s, "\\t"); break;
        default:
          if (c < 0x20)
            g_string_append_printf (s, "\\u%04x", c);
          else
            g_string_append_c (s, (char) c);
        }
    }
  g_string_append_c (s, '"');
}
