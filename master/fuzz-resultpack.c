/* fuzz-resultpack.c: libFuzzer target for the packed results.jsonl lines
 * of a journal checkpoint (resultpack.h).  The first byte chooses:
 *   odd:  the rest is a packed run, as a damaged checkpoint would hand it
 *         to datc_result_unpack: it is refused with a reason
 *         (DATC_LEDGER_ERROR_CORRUPT) or unpacks to lines that pack and
 *         unpack again to the same bytes;
 *   even: the rest is results.jsonl text (a newline added if the last
 *         line lacks one): packed, it unpacks to exactly those bytes.
 *
 *   CC=clang meson setup build-fuzz -Dfuzz=true
 *   ninja -C build-fuzz master/fuzz-resultpack
 *   build-fuzz/master/fuzz-resultpack -max_total_time=600 [CORPUS_DIR]
 * (a corpus of real results.jsonl lines, one file each, makes the even
 * half reach the packed form rather than the verbatim one). */
#include "resultpack.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* ledger.c is not linked in: its error domain is. */
G_DEFINE_QUARK (datc-ledger-error-quark, datc_ledger_error)

static void
fail (const char *what)
{
  fprintf (stderr, "fuzz-resultpack: %s\n", what);
  abort ();
}

/* `lines` packed and unpacked must come back byte for byte. */
static void
round_trip (const guint8 *lines, gsize len)
{
  GByteArray *packed = g_byte_array_new ();
  datc_result_pack (lines, len, packed);
  GString *back = g_string_new (NULL);
  GError *error = NULL;
  if (!datc_result_unpack (packed->data, packed->len, back, &error))
    fail (error->message);
  if (back->len != len || memcmp (back->str, lines, len) != 0)
    fail ("packed lines came back different");
  g_string_free (back, TRUE);
  g_byte_array_unref (packed);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (size == 0)
    return 0;
  const guint8 *rest = data + 1;
  gsize len = size - 1;
  if (data[0] & 1)
    {
      GString *out = g_string_new (NULL);
      GError *error = NULL;
      if (datc_result_unpack (rest, len, out, &error))
        {
          if (error != NULL)
            fail ("success with an error");
          if (out->len > 0 && out->str[out->len - 1] != '\n')
            fail ("unpacked text that does not end a line");
          round_trip ((const guint8 *) out->str, out->len);
        }
      else
        {
          if (error == NULL || error->domain != DATC_LEDGER_ERROR
              || error->code != DATC_LEDGER_ERROR_CORRUPT || error->message[0] == '\0')
            fail ("a refusal without its reason");
          g_error_free (error);
        }
      g_string_free (out, TRUE);
      return 0;
    }
  if (len == 0)
    return 0;
  if (rest[len - 1] == '\n')
    round_trip (rest, len);
  else
    {
      guint8 *lines = g_malloc (len + 1);
      memcpy (lines, rest, len);
      lines[len] = '\n';
      round_trip (lines, len + 1);
      g_free (lines);
    }
  return 0;
}
