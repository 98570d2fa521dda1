/* fuzz-relayframe.c: libFuzzer target for datc_relay_frame_take() and
 * datc_relay_preamble(), as the master reads a relay (and the relay its
 * master): the input is a stream, taken frame by frame in both roles.  A
 * frame taken must lie inside the input and re-encode to the same bytes;
 * a refusal must be a DATC_WIRE_ERROR with a reason.
 *
 *   CC=clang meson setup build-fuzz -Dfuzz=true
 *   ninja -C build-fuzz protocol/fuzz-relayframe
 *   build-fuzz/protocol/fuzz-relayframe -max_total_time=600 */
#include "message.h"
#include "relayframe.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
fail (const char *what)
{
  fprintf (stderr, "fuzz-relayframe: %s\n", what);
  abort ();
}

static void
take_all (const uint8_t *data, size_t size, gboolean from_relay)
{
  gsize off = 0;
  for (;;)
    {
      GError *error = NULL;
      DatcRelayFrame f;
      gssize took = datc_relay_frame_take (data + off, size - off, from_relay, &f, &error);
      if (took == 0)
        {
          if (error != NULL)
            fail ("0 with an error");
          return;
        }
      if (took < 0)
        {
          if (error == NULL || error->domain != DATC_WIRE_ERROR || error->message[0] == '\0')
            fail ("a refusal without its reason");
          g_error_free (error);
          return;
        }
      if ((gsize) took > size - off || f.payload != data + off + DATC_RELAY_HEADER
          || (gsize) took != DATC_RELAY_HEADER + f.length)
        fail ("a frame outside the input");
      GByteArray *again = g_byte_array_new ();
      datc_relay_frame_put (again, f.type, f.conn, f.payload, f.length);
      if (again->len != (guint) took || memcmp (again->data, data + off, again->len) != 0)
        fail ("re-encoded differently");
      g_byte_array_unref (again);
      off += (gsize) took;
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  GError *error = NULL;
  gssize skip = datc_relay_preamble (data, size, &error);
  if ((skip < 0) != (error != NULL) || (gsize) MAX (skip, 0) > size)
    fail ("preamble");
  g_clear_error (&error);
  take_all (data, size, TRUE);
  take_all (data, size, FALSE);
  return 0;
}
