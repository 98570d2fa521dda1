/* test-relayframe.c: the relay's frames (relayframe.h): what goes in comes
 * out, byte by byte as it may arrive; every rule of who sends what with
 * how many bytes refused with its reason; the login shell's chatter
 * before the first line skipped, and too much of it refused. */
#include <string.h>

#include "message.h"
#include "relayframe.h"

static void
test_round_trip_byte_by_byte (void)
{
  g_autoptr (GByteArray) buf = g_byte_array_new ();
  datc_relay_frame_put (buf, DATC_RELAY_HELLO, 0, "tcp://h:1", 9);
  datc_relay_frame_put (buf, DATC_RELAY_OPEN, 7, NULL, 0);
  guint8 big[DATC_RELAY_PAYLOAD_MAX];
  for (guint i = 0; i < sizeof big; i++)
    big[i] = (guint8) (i * 31);
  datc_relay_frame_put (buf, DATC_RELAY_DATA, 7, big, sizeof big);
  datc_relay_frame_put (buf, DATC_RELAY_CLOSE, 7, NULL, 0);

  DatcRelayType want[] = { DATC_RELAY_HELLO, DATC_RELAY_OPEN, DATC_RELAY_DATA, DATC_RELAY_CLOSE };
  gsize off = 0;
  for (guint k = 0; k < G_N_ELEMENTS (want); k++)
    {
      DatcRelayFrame f;
      gssize took = 0;
      /* Every prefix short of the whole frame is "not yet". */
      for (gsize have = 0; took == 0; have++)
        {
          g_assert_cmpuint (off + have, <=, buf->len);
          took = datc_relay_frame_take (buf->data + off, have, TRUE, &f, NULL);
          g_assert_cmpint (took, >=, 0);
        }
      g_assert_cmpint (f.type, ==, want[k]);
      if (want[k] == DATC_RELAY_DATA)
        g_assert_cmpmem (f.payload, f.length, big, sizeof big);
      if (want[k] == DATC_RELAY_HELLO)
        g_assert_cmpmem (f.payload, f.length, "tcp://h:1", 9);
      off += (gsize) took;
    }
  g_assert_cmpuint (off, ==, buf->len);
}

typedef struct {
  const char *name;
  guint8 type;
  guint32 conn, length;
  gboolean from_relay;
  gint code;
  const char *says;
} Bad;

static void
test_rules (void)
{
  const Bad cases[] = {
    { "unknown type", 99, 0, 0, TRUE, DATC_WIRE_ERROR_TYPE, "unknown type 99" },
    { "type zero", 0, 0, 0, FALSE, DATC_WIRE_ERROR_TYPE, "unknown type 0" },
    { "OPEN from the master", DATC_RELAY_OPEN, 3, 0, FALSE, DATC_WIRE_ERROR_TYPE,
      "OPEN cannot come from the master" },
    { "PING from the relay", DATC_RELAY_PING, 0, 0, TRUE, DATC_WIRE_ERROR_TYPE,
      "PING cannot come from the relay" },
    { "DATA without a connection", DATC_RELAY_DATA, 0, 4, TRUE, DATC_WIRE_ERROR_SHAPE,
      "it needs one" },
    { "empty DATA", DATC_RELAY_DATA, 1, 0, TRUE, DATC_WIRE_ERROR_SHAPE, "with 0 bytes" },
    { "DATA too big", DATC_RELAY_DATA, 1, DATC_RELAY_PAYLOAD_MAX + 1, FALSE,
      DATC_WIRE_ERROR_TOO_BIG, "65537 bytes" },
    { "a 4 GiB length", DATC_RELAY_DATA, 1, G_MAXUINT32, TRUE, DATC_WIRE_ERROR_TOO_BIG,
      "4294967295 bytes" },
    { "CLOSE with bytes", DATC_RELAY_CLOSE, 1, 3, TRUE, DATC_WIRE_ERROR_SHAPE, "with 3 bytes" },
    { "HELLO on a connection", DATC_RELAY_HELLO, 2, 9, TRUE, DATC_WIRE_ERROR_SHAPE,
      "it takes none" },
    { "HELLO too short", DATC_RELAY_HELLO, 0, 3, TRUE, DATC_WIRE_ERROR_SHAPE, "with 3 bytes" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const Bad *c = &cases[i];
      guint8 h[DATC_RELAY_HEADER] = { c->type,
                                      (guint8) (c->conn >> 24),
                                      (guint8) (c->conn >> 16),
                                      (guint8) (c->conn >> 8),
                                      (guint8) c->conn,
                                      (guint8) (c->length >> 24),
                                      (guint8) (c->length >> 16),
                                      (guint8) (c->length >> 8),
                                      (guint8) c->length };
      g_autoptr (GError) error = NULL;
      DatcRelayFrame f;
      g_test_message ("%s", c->name);
      /* Refused on the header alone: no waiting for a payload that is
       * not to be taken. */
      g_assert_cmpint (datc_relay_frame_take (h, sizeof h, c->from_relay, &f, &error), ==, -1);
      g_assert_error (error, DATC_WIRE_ERROR, c->code);
      g_assert_nonnull (strstr (error->message, c->says));
    }
}

static void
test_preamble (void)
{
  g_autoptr (GError) error = NULL;
  const char *chatter = "Welcome to the cluster!\nquota: 80%\n" DATC_RELAY_MAGIC "\x01";
  gssize skip = datc_relay_preamble ((const guint8 *) chatter, strlen (chatter), &error);
  g_assert_no_error (error);
  g_assert_cmpint (skip, ==, (gssize) strlen (chatter) - 1);
  /* Not there yet: wait. */
  g_assert_cmpint (datc_relay_preamble ((const guint8 *) "DATC-REL", 8, &error), ==, 0);
  /* Endless chatter: refused, naming the likely cause. */
  g_autofree guint8 *noise = g_malloc (DATC_RELAY_PREAMBLE_MAX + 1);
  memset (noise, 'x', DATC_RELAY_PREAMBLE_MAX + 1);
  g_assert_cmpint (datc_relay_preamble (noise, DATC_RELAY_PREAMBLE_MAX + 1, &error), ==, -1);
  g_assert_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_MALFORMED);
  g_assert_nonnull (strstr (error->message, "login script"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/relayframe/round-trip-byte-by-byte", test_round_trip_byte_by_byte);
  g_test_add_func ("/relayframe/rules", test_rules);
  g_test_add_func ("/relayframe/preamble", test_preamble);
  return g_test_run ();
}
