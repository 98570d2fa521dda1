/* fuzz-journalrec.c: libFuzzer target for datc_record_decode(), the
 * ledger's journal record codec.  A record that decodes must encode to
 * bytes that decode again and encode to the same bytes (the input may use
 * longer integer forms than datc writes, or an older record's fewer
 * fields); a refusal must be a DATC_RECORD_ERROR with a reason and leave
 * nothing to free.
 *
 *   CC=clang meson setup build-fuzz -Dfuzz=true
 *   ninja -C build-fuzz master/fuzz-journalrec
 *   build-fuzz/master/fuzz-journalrec -max_total_time=600 */
#include "journalrec.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
fail (const char *what)
{
  fprintf (stderr, "fuzz-journalrec: %s\n", what);
  abort ();
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  DatcRecord rec;
  GError *error = NULL;

  if (!datc_record_decode (data, size, &rec, &error))
    {
      if (error == NULL || error->domain != DATC_RECORD_ERROR || error->message[0] == '\0')
        fail ("a refusal without its reason");
      if (rec.type != 0)
        fail ("a refused record left something behind");
      g_error_free (error);
      return 0;
    }
  if (error != NULL)
    fail ("success with an error");

  GByteArray *again = g_byte_array_new ();
  datc_record_encode (&rec, again);
  DatcRecord back;
  if (!datc_record_decode (again->data, again->len, &back, NULL))
    fail ("its own encoding is refused");
  GByteArray *twice = g_byte_array_new ();
  datc_record_encode (&back, twice);
  /* Input may use longer forms than datc writes; the re-encoding may not
   * drift once it is datc's own. */
  if (twice->len != again->len || memcmp (twice->data, again->data, again->len) != 0)
    fail ("re-encoded differently");
  datc_record_clear (&back);
  datc_record_clear (&rec);
  g_byte_array_unref (again);
  g_byte_array_unref (twice);
  return 0;
}
