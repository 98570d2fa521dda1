/* test-jsonout.c: the escaper writes every byte as the JSON it has always
 * been (checked against a byte-by-byte reference, the way it was written
 * before runs of plain bytes were copied at once), and the buffer form
 * stays within the room it asks for. */
#include <glib.h>
#include <string.h>

#include "jsonout.h"

/* One byte at a time, printf for \u00XX: the escaper as it first was. */
static void
reference (GString *out, const char *s, gsize len)
{
  g_string_append_c (out, '"');
  for (gsize i = 0; i < len; i++)
    {
      unsigned char c = (unsigned char) s[i];
      if (c == '"')
        g_string_append (out, "\\\"");
      else if (c == '\\')
        g_string_append (out, "\\\\");
      else if (c == '\n')
        g_string_append (out, "\\n");
      else if (c == '\r')
        g_string_append (out, "\\r");
      else if (c == '\t')
        g_string_append (out, "\\t");
      else if (c < 0x20 || c == 0x7f)
        g_string_append_printf (out, "\\u%04x", c);
      else
        g_string_append_c (out, (char) c);
    }
  g_string_append_c (out, '"');
}

static void
test_every_byte_as_before (void)
{
  g_autoptr (GString) got = g_string_new (NULL), want = g_string_new (NULL);
  /* Each byte alone, then between plain runs of several lengths. */
  for (guint c = 1; c < 256; c++)
    for (guint pad = 0; pad < 4; pad++)
      {
        char s[16];
        gsize n = 0;
        for (guint i = 0; i < pad * 2; i++)
          s[n++] = 'a' + (char) i;
        s[n++] = (char) c;
        for (guint i = 0; i < pad; i++)
          s[n++] = 'z';
        s[n] = '\0';
        g_string_truncate (got, 0);
        g_string_truncate (want, 0);
        datc_json_append_string (got, s);
        reference (want, s, n);
        g_assert_cmpstr (got->str, ==, want->str);
      }
  /* UTF-8 passes as it is; NULL is "". */
  g_string_truncate (got, 0);
  datc_json_append_string (got, "hôte\x01\"\\\x7f");
  g_assert_cmpstr (got->str, ==, "\"hôte\\u0001\\\"\\\\\\u007f\"");
  g_string_truncate (got, 0);
  datc_json_append_string (got, NULL);
  g_assert_cmpstr (got->str, ==, "\"\"");
}

static void
test_put_stays_in_its_room (void)
{
  /* The worst case: every byte a \u00XX. */
  char s[64], buf[DATC_JSON_STRING_MAX (64) + 1];
  memset (s, 0x01, sizeof s);
  buf[sizeof buf - 1] = 'X';
  char *end = datc_json_put_string (buf, s, sizeof s);
  g_assert_cmpint (end - buf, ==, DATC_JSON_STRING_MAX (64));
  g_assert_cmpint (buf[sizeof buf - 1], ==, 'X');
  g_assert_true (memcmp (buf, "\"\\u0001", 7) == 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/jsonout/escapes-every-byte-as-before", test_every_byte_as_before);
  g_test_add_func ("/jsonout/put-stays-in-its-room", test_put_stays_in_its_room);
  return g_test_run ();
}
