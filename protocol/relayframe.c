/* relayframe.c: the relay's frames (relayframe.h). */
#include "relayframe.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "message.h"

static const char *const type_names[] = {
  [DATC_RELAY_HELLO] = "HELLO", [DATC_RELAY_OPEN] = "OPEN",   [DATC_RELAY_DATA] = "DATA",
  [DATC_RELAY_CLOSE] = "CLOSE", [DATC_RELAY_PING] = "PING",   [DATC_RELAY_PONG] = "PONG",
  [DATC_RELAY_BYE] = "BYE",     [DATC_RELAY_ERROR] = "ERROR",
};

const char *
datc_relay_type_name (DatcRelayType type)
{
  if ((guint) type < G_N_ELEMENTS (type_names) && type_names[type] != NULL)
    return type_names[type];
  return "unknown";
}

static void
put_u32 (guint8 *p, guint32 v)
{
  p[0] = (guint8) (v >> 24);
  p[1] = (guint8) (v >> 16);
  p[2] = (guint8) (v >> 8);
  p[3] = (guint8) v;
}

static guint32
get_u32 (const guint8 *p)
{
  return (guint32) p[0] << 24 | (guint32) p[1] << 16 | (guint32) p[2] << 8 | p[3];
}

void
datc_relay_frame_put (GByteArray *out, DatcRelayType type, guint32 conn, const void *payload,
                      guint32 length)
{
  g_return_if_fail (length <= DATC_RELAY_PAYLOAD_MAX);
  guint8 header[DATC_RELAY_HEADER];
  header[0] = (guint8) type;
  put_u32 (header + 1, conn);
  put_u32 (header + 5, length);
  g_byte_array_append (out, header, sizeof header);
  if (length > 0)
    g_byte_array_append (out, payload, length);
}

/* Who may send what, and how long its payload may be. */
typedef struct {
  gboolean from_relay, from_master;
  gboolean conn;    /* names a connection (non-zero) */
  guint32 min, max; /* payload bytes */
} Rule;

static const Rule rules[] = {
  [DATC_RELAY_HELLO] = { TRUE, FALSE, FALSE, 7, 512 },
  [DATC_RELAY_OPEN] = { TRUE, FALSE, TRUE, 0, 0 },
  [DATC_RELAY_DATA] = { TRUE, TRUE, TRUE, 1, DATC_RELAY_PAYLOAD_MAX },
  [DATC_RELAY_CLOSE] = { TRUE, TRUE, TRUE, 0, 0 },
  [DATC_RELAY_PING] = { FALSE, TRUE, FALSE, 0, 8 },
  [DATC_RELAY_PONG] = { TRUE, FALSE, FALSE, 0, 8 },
  [DATC_RELAY_BYE] = { FALSE, TRUE, FALSE, 0, 0 },
  [DATC_RELAY_ERROR] = { TRUE, FALSE, FALSE, 1, 1024 },
};

gssize
datc_relay_frame_take (const guint8 *buf, gsize len, gboolean from_relay, DatcRelayFrame *frame,
                       GError **error)
{
  if (len < DATC_RELAY_HEADER)
    {
      /* An unknown type is refused at once, not after more bytes came. */
      if (len >= 1 && (buf[0] == 0 || buf[0] >= G_N_ELEMENTS (rules)))
        goto unknown;
      return 0;
    }
  guint type = buf[0];
  if (type == 0 || type >= G_N_ELEMENTS (rules))
    goto unknown;
  const Rule *r = &rules[type];
  guint32 conn = get_u32 (buf + 1), length = get_u32 (buf + 5);
  if (!(from_relay ? r->from_relay : r->from_master))
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_TYPE,
                   "relay frame %s cannot come from the %s", datc_relay_type_name (type),
                   from_relay ? "relay" : "master");
      return -1;
    }
  if (length > r->max || length < r->min)
    {
      g_set_error (error, DATC_WIRE_ERROR,
                   length > DATC_RELAY_PAYLOAD_MAX ? DATC_WIRE_ERROR_TOO_BIG
                                                   : DATC_WIRE_ERROR_SHAPE,
                   "relay frame %s with %" G_GUINT32_FORMAT " bytes (it takes %" G_GUINT32_FORMAT
                   " to %" G_GUINT32_FORMAT ")",
                   datc_relay_type_name (type), length, r->min, r->max);
      return -1;
    }
  if (r->conn != (conn != 0))
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_SHAPE,
                   "relay frame %s with connection %" G_GUINT32_FORMAT " (%s)",
                   datc_relay_type_name (type), conn, r->conn ? "it needs one" : "it takes none");
      return -1;
    }
  if (len - DATC_RELAY_HEADER < length)
    return 0;
  frame->type = type;
  frame->conn = conn;
  frame->length = length;
  frame->payload = buf + DATC_RELAY_HEADER;
  return (gssize) (DATC_RELAY_HEADER + length);

unknown:
  g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_TYPE, "relay frame of unknown type %u",
               buf[0]);
  return -1;
}

DatcRelayConn *
datc_relay_conn_new (guint32 id, int fd)
{
  DatcRelayConn *c = g_new0 (DatcRelayConn, 1);
  c->id = id;
  c->fd = fd;
  c->out = g_byte_array_new ();
  return c;
}

void
datc_relay_conn_free (gpointer conn)
{
  DatcRelayConn *c = conn;
  if (c == NULL)
    return;
  close (c->fd);
  g_byte_array_unref (c->out);
  g_free (c);
}

gboolean
datc_relay_flush (int fd, GByteArray *out)
{
  while (out->len > 0)
    {
      ssize_t n = write (fd, out->data, out->len);
      if (n > 0)
        g_byte_array_remove_range (out, 0, (guint) n);
      else if (n < 0 && errno == EINTR)
        continue;
      else
        return n < 0 && errno == EAGAIN;
    }
  return TRUE;
}

gssize
datc_relay_preamble (const guint8 *buf, gsize len, GError **error)
{
  const gsize m = strlen (DATC_RELAY_MAGIC);
  for (gsize i = 0; i + m <= len; i++)
    if (memcmp (buf + i, DATC_RELAY_MAGIC, m) == 0)
      return (gssize) (i + m);
  if (len > DATC_RELAY_PREAMBLE_MAX)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_MALFORMED,
                   "the relay printed %" G_GSIZE_FORMAT " bytes without its first line %.12s "
                   "(a login script that prints? an old datc-agent?)",
                   len, DATC_RELAY_MAGIC);
      return -1;
    }
  return 0;
}
