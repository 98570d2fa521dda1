/* relayframe.h: the relay's wire, between the master and `datc-agent
 * relay` on a login node, over the relay's stdin and stdout (an SSH exec
 * channel).  The relay carries the agents' TCP connections, whose bytes
 * are CurveZMQ already: it only numbers them and cuts them into frames.
 *
 * The stream starts with the line DATC_RELAY_MAGIC (anything a login
 * shell prints before it is skipped, up to DATC_RELAY_PREAMBLE_MAX
 * bytes), then frames:
 *
 *   type u8 | conn u32 (big-endian) | length u32 (big-endian) | payload
 *
 *   HELLO  r->m  conn 0, payload "tcp://HOST:PORT", where agents connect
 *   OPEN   r->m  an agent connected; conn is its number (never reused)
 *   DATA   both  bytes of conn (1..DATC_RELAY_PAYLOAD_MAX)
 *   CLOSE  both  conn ended (no payload); the other side closes its end
 *   PING   m->r  payload: the master's counter; answered by PONG with it
 *   PONG   r->m
 *   BYE    m->r  the campaign is over: the relay exits at once
 *   ERROR  r->m  payload: why the relay cannot go on (then it exits)
 *
 * A frame that breaks these rules is an error naming what is wrong: the
 * stream is then out of step and the session is dropped. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DATC_RELAY_MAGIC "DATC-RELAY-1\n"
#define DATC_RELAY_PREAMBLE_MAX 65536u
#define DATC_RELAY_HEADER 9u
#define DATC_RELAY_PAYLOAD_MAX 65536u

typedef enum {
  DATC_RELAY_HELLO = 1,
  DATC_RELAY_OPEN,
  DATC_RELAY_DATA,
  DATC_RELAY_CLOSE,
  DATC_RELAY_PING,
  DATC_RELAY_PONG,
  DATC_RELAY_BYE,
  DATC_RELAY_ERROR,
} DatcRelayType;

typedef struct {
  DatcRelayType type;
  guint32 conn;
  const guint8 *payload; /* points into the buffer given to _take */
  guint32 length;
} DatcRelayFrame;

/* Appends one frame to `out`.  length <= DATC_RELAY_PAYLOAD_MAX. */
void datc_relay_frame_put (GByteArray *out, DatcRelayType type, guint32 conn, const void *payload,
                           guint32 length);

/* Reads the frame at the start of buf[0..len): the bytes it takes (> 0)
 * with *frame set, 0 when the frame is not complete yet, -1 with an
 * error (DATC_WIRE_ERROR: TYPE, SHAPE or TOO_BIG) when it is not a
 * frame this side may receive: `from_relay` says which side sent it. */
gssize datc_relay_frame_take (const guint8 *buf, gsize len, gboolean from_relay,
                              DatcRelayFrame *frame, GError **error);

/* Skips what precedes DATC_RELAY_MAGIC: the bytes to drop including the
 * magic (> 0), 0 when it has not come yet, -1 with an error once more
 * than DATC_RELAY_PREAMBLE_MAX bytes came without it. */
gssize datc_relay_preamble (const guint8 *buf, gsize len, GError **error);

const char *datc_relay_type_name (DatcRelayType type);

/* One carried connection, at either end: its socket and the bytes
 * waiting to be written to it. */
typedef struct {
  guint32 id;
  int fd;
  GByteArray *out;
  gboolean closing;    /* the other end closed it: close once `out` is written */
  gboolean connecting; /* the master's end: its connect() is in progress */
} DatcRelayConn;

DatcRelayConn *datc_relay_conn_new (guint32 id, int fd);
/* Closes its socket (a GDestroyNotify). */
void datc_relay_conn_free (gpointer conn);

/* Writes what `out` holds to the non-blocking `fd` until it would block;
 * what was written leaves `out`.  FALSE when the fd failed (the peer
 * gone: SIGPIPE must be ignored).  Both ends of a relay pump bytes so. */
gboolean datc_relay_flush (int fd, GByteArray *out);

G_END_DECLS
