/* zmtp.c: a REQ client's half of ZMTP 3.1 over a Unix stream socket, in
 * libc alone (see zmtp.h for why).
 *
 * What it speaks.  Each side sends a 64-byte greeting (0xFF, 8 bytes,
 * 0x7F; version 3.1; mechanism "NULL"; as-server; filler), then a READY
 * command whose properties name its socket type.  Then frames: a flags
 * byte (MORE 1, LONG 2, COMMAND 4; the rest must be 0), the size in one
 * byte or, with LONG, eight (network order), the body.  A REQ request is
 * an empty delimiter frame and the body, sent once the peer's READY is
 * in; PING and the other commands of 3.1 are skipped; the ROUTER's reply comes back
 * the same way.  The reader is a chain of named checks over that stream
 * (MUNGE's habit): the first wrong byte stops it and says what was wrong. */
#include "zmtp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum {
  FLAG_MORE = 0x01,
  FLAG_LONG = 0x02,
  FLAG_COMMAND = 0x04,
};

enum {
  S_GREETING, /* collecting the peer's 64-byte greeting */
  S_HEADER,   /* collecting a frame's flags and size */
  S_COMMAND,  /* collecting a command's body */
  S_BODY,     /* copying a message frame's body into the reply */
  S_DONE,
  S_FAILED,
};

#define COMMAND_MAX 255

void
datc_zmtp_reader_init (DatcZmtpReader *r, size_t reply_max)
{
  memset (r, 0, sizeof *r);
  r->state = S_GREETING;
  r->head_want = DATC_ZMTP_GREETING_SIZE;
  r->reply_max = reply_max;
}

void
datc_zmtp_reader_clear (DatcZmtpReader *r)
{
  free (r->reply);
  r->reply = NULL;
  r->reply_len = 0;
}

static DatcZmtpStatus
fail (DatcZmtpReader *r, const char *why)
{
  r->state = S_FAILED;
  r->why = why;
  return DATC_ZMTP_FAILED;
}

static DatcZmtpStatus
check_greeting (DatcZmtpReader *r)
{
  const uint8_t *g = r->head;
  static const uint8_t null_mechanism[20] = "NULL";
  if (g[0] != 0xFF || g[9] != 0x7F)
    return fail (r, "not a ZeroMQ peer (no ZMTP signature)");
  if (g[10] < 3)
    return fail (r, "the peer speaks ZMTP older than 3.0");
  if (memcmp (g + 12, null_mechanism, sizeof null_mechanism) != 0)
    return fail (r, "the peer asks for a security mechanism other than NULL");
  r->state = S_HEADER;
  r->head_len = 0;
  r->head_want = 1;
  return DATC_ZMTP_NEED_MORE;
}

static uint32_t
be32 (const uint8_t *p)
{
  return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | p[3];
}

/* READY's properties: name-size, name, value-size (4 bytes), value, to
 * the end of the body; Socket-Type must be one a REQ may talk to. */
static DatcZmtpStatus
check_ready (DatcZmtpReader *r, const uint8_t *p, size_t len)
{
  bool typed = false;
  while (len > 0)
    {
      size_t name_len = p[0];
      if (name_len == 0 || 1 + name_len + 4 > len)
        return fail (r, "a READY property runs past its command");
      const uint8_t *name = p + 1;
      uint32_t value_len = be32 (p + 1 + name_len);
      if (value_len > len - 1 - name_len - 4)
        return fail (r, "a READY property's value runs past its command");
      const uint8_t *value = name + name_len + 4;
      if (name_len == 11 && strncasecmp ((const char *) name, "Socket-Type", 11) == 0)
        {
          bool router = value_len == 6 && memcmp (value, "ROUTER", 6) == 0;
          bool rep = value_len == 3 && memcmp (value, "REP", 3) == 0;
          if (!router && !rep)
            return fail (r, "the peer is not a ROUTER or REP socket");
          typed = true;
        }
      size_t used = 1 + name_len + 4 + value_len;
      p += used;
      len -= used;
    }
  if (!typed)
    return fail (r, "the peer's READY names no Socket-Type");
  r->ready_seen = true;
  return DATC_ZMTP_NEED_MORE;
}

static DatcZmtpStatus
check_command (DatcZmtpReader *r)
{
  const uint8_t *c = r->command;
  size_t len = r->command_len;
  if (len == 0 || (size_t) c[0] + 1 > len)
    return fail (r, "a command's name runs past its frame");
  size_t name_len = c[0];
  const uint8_t *name = c + 1;
  r->state = S_HEADER;
  r->head_len = 0;
  r->head_want = 1;
  if (name_len == 5 && memcmp (name, "READY", 5) == 0)
    {
      if (r->ready_seen)
        return fail (r, "a second READY");
      return check_ready (r, name + name_len, len - 1 - name_len);
    }
  if (name_len == 5 && memcmp (name, "ERROR", 5) == 0)
    return fail (r, "the peer refused the connection (ERROR)");
  /* Others (PING, PONG of ZMTP 3.1) carry nothing a reply needs. */
  if (!r->ready_seen)
    return fail (r, "a command other than READY before READY");
  return DATC_ZMTP_NEED_MORE;
}

/* A reply frame's body is in: the next frame's header, or the end. */
static DatcZmtpStatus
body_done (DatcZmtpReader *r)
{
  r->state = (r->flags & FLAG_MORE) ? S_HEADER : S_DONE;
  r->head_len = 0;
  r->head_want = 1;
  return r->state == S_DONE ? DATC_ZMTP_DONE : DATC_ZMTP_NEED_MORE;
}

/* A frame's header is complete: what follows is a command, the
 * delimiter, or a part of the reply. */
static DatcZmtpStatus
check_header (DatcZmtpReader *r)
{
  uint8_t flags = r->head[0];
  if (r->head_len == 1)
    {
      if ((flags & ~(FLAG_MORE | FLAG_LONG | FLAG_COMMAND)) != 0)
        return fail (r, "a frame's reserved flag bits are set");
      r->head_want = (flags & FLAG_LONG) ? 9 : 2;
      return DATC_ZMTP_NEED_MORE;
    }
  uint64_t size = 0;
  for (size_t i = 1; i < r->head_len; i++)
    size = size << 8 | r->head[i];
  r->flags = flags;
  r->size = size;
  if (flags & FLAG_COMMAND)
    {
      if (flags & FLAG_MORE)
        return fail (r, "a command frame says more follows");
      if (size > COMMAND_MAX)
        return fail (r, "a command frame over 255 bytes");
      r->command_len = 0;
      r->state = S_COMMAND;
      return size == 0 ? check_command (r) : DATC_ZMTP_NEED_MORE;
    }
  if (!r->ready_seen)
    return fail (r, "a message frame before READY");
  if (!r->delimiter_seen)
    {
      if (size != 0 || !(flags & FLAG_MORE))
        return fail (r, "the reply does not start with REQ's empty delimiter");
      r->delimiter_seen = true;
      r->head_len = 0;
      r->head_want = 1;
      return DATC_ZMTP_NEED_MORE;
    }
  if (size > r->reply_max - r->reply_len)
    return fail (r, "the reply is larger than this client takes");
  uint8_t *grown = realloc (r->reply, r->reply_len + (size_t) size + 1);
  if (grown == NULL)
    return fail (r, "out of memory for the reply");
  r->reply = grown;
  r->reply[r->reply_len] = '\0';
  r->state = S_BODY;
  r->taken = 0;
  return size == 0 ? body_done (r) : DATC_ZMTP_NEED_MORE;
}

/* Copies what there is of the `want` bytes still missing; returns how
 * many. */
static size_t
take_some (uint8_t *dst, size_t want, const uint8_t *src, size_t have)
{
  size_t n = want < have ? want : have;
  memcpy (dst, src, n);
  return n;
}

DatcZmtpStatus
datc_zmtp_reader_feed (DatcZmtpReader *r, const uint8_t *data, size_t len, size_t *used)
{
  size_t at = 0;
  DatcZmtpStatus st = r->state == S_DONE     ? DATC_ZMTP_DONE
                      : r->state == S_FAILED ? DATC_ZMTP_FAILED
                                             : DATC_ZMTP_NEED_MORE;
  while (at < len && st == DATC_ZMTP_NEED_MORE)
    {
      switch (r->state)
        {
        case S_GREETING:
        case S_HEADER:
          {
            size_t take = take_some (r->head + r->head_len, r->head_want - r->head_len, data + at,
                                     len - at);
            r->head_len += take;
            at += take;
            if (r->head_len == r->head_want)
              st = r->state == S_GREETING ? check_greeting (r) : check_header (r);
            break;
          }
        case S_COMMAND:
          {
            size_t take = take_some (r->command + r->command_len, (size_t) r->size - r->command_len,
                                     data + at, len - at);
            r->command_len += take;
            at += take;
            if (r->command_len == r->size)
              st = check_command (r);
            break;
          }
        case S_BODY:
          {
            size_t take = take_some (r->reply + r->reply_len, (size_t) (r->size - r->taken),
                                     data + at, len - at);
            r->reply_len += take;
            r->taken += take;
            r->reply[r->reply_len] = '\0';
            at += take;
            if (r->taken == r->size)
              st = body_done (r);
            break;
          }
        default:
          st = fail (r, "internal: the reader was fed after it ended");
          break;
        }
    }
  if (used != NULL)
    *used = at;
  return st;
}

size_t
datc_zmtp_hello (uint8_t *out)
{
  memset (out, 0, DATC_ZMTP_GREETING_SIZE);
  out[0] = 0xFF;
  out[9] = 0x7F;
  out[10] = 3; /* version 3.1 */
  out[11] = 1;
  memcpy (out + 12, "NULL", 4);
  size_t n = DATC_ZMTP_GREETING_SIZE;
  static const uint8_t ready[] = {
    5,   'R', 'E', 'A', 'D', 'Y', 11, 'S', 'o', 'c', 'k', 'e', 't',
    '-', 'T', 'y', 'p', 'e', 0,   0,  0,   3,   'R', 'E', 'Q',
  };
  out[n++] = FLAG_COMMAND;
  out[n++] = (uint8_t) sizeof ready;
  memcpy (out + n, ready, sizeof ready);
  return n + sizeof ready;
}

size_t
datc_zmtp_request_head (uint8_t *head, size_t body_len)
{
  size_t n = 0;
  head[n++] = FLAG_MORE; /* the empty delimiter */
  head[n++] = 0;
  if (body_len <= 255)
    {
      head[n++] = 0;
      head[n++] = (uint8_t) body_len;
      return n;
    }
  head[n++] = FLAG_LONG;
  for (int i = 7; i >= 0; i--)
    head[n++] = (uint8_t) ((uint64_t) body_len >> (8 * i));
  return n;
}

static int64_t
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Writes all of `len` bytes to the non-blocking `fd` by `deadline`. */
static int
send_all (int fd, const uint8_t *p, size_t len, int64_t deadline)
{
  while (len > 0)
    {
      ssize_t n = send (fd, p, len, MSG_NOSIGNAL);
      if (n > 0)
        {
          p += n;
          len -= (size_t) n;
          continue;
        }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno != EAGAIN)
        return errno;
      int64_t left = deadline - now_ms ();
      if (left <= 0)
        return ETIMEDOUT;
      struct pollfd p_out = { .fd = fd, .events = POLLOUT };
      if (poll (&p_out, 1, (int) (left > 100 ? 100 : left)) < 0 && errno != EINTR)
        return errno;
    }
  return 0;
}

static DatcZmtpStatus
call_failed (DatcZmtpReader *r, const char *why, int errsv, int *errno_out)
{
  if (r->state != S_FAILED)
    fail (r, why);
  *errno_out = errsv;
  return DATC_ZMTP_FAILED;
}

DatcZmtpStatus
datc_zmtp_call (const char *path, const char *request, size_t request_len, int timeout_ms,
                bool (*still_there) (void *), void *data, DatcZmtpReader *r, int *errno_out)
{
  *errno_out = 0;
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  if (strlen (path) >= sizeof sun.sun_path)
    return call_failed (r, "the socket's path is too long", ENAMETOOLONG, errno_out);
  strcpy (sun.sun_path, path);
  int64_t deadline = now_ms () + timeout_ms;
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return call_failed (r, "socket", errno, errno_out);
  /* Non-blocking from the start: a blocking connect to a listener whose
   * accept queue is full (a stopped master, and clients that gave up on
   * it) would wait for ever.  Linux says EAGAIN then: tried again.  So
   * are a socket not there yet and one nobody listens on yet, while
   * `still_there` says the peer is (a master that holds its campaign's
   * lock binds the socket a moment later). */
  int64_t asked = now_ms ();
  while (connect (fd, (struct sockaddr *) &sun, sizeof sun) != 0)
    {
      int errsv = errno;
      if (errsv == EINTR)
        continue;
      bool not_yet = still_there != NULL && (errsv == ENOENT || errsv == ECONNREFUSED);
      if (errsv != EAGAIN && !not_yet)
        {
          close (fd);
          return call_failed (r, "connect", errsv, errno_out);
        }
      int64_t now = now_ms ();
      if (now >= deadline)
        {
          close (fd);
          return call_failed (
              r, not_yet ? "no socket to connect to in time" : "no room to connect in time",
              ETIMEDOUT, errno_out);
        }
      if (now - asked >= 100)
        {
          asked = now;
          if (still_there != NULL && !still_there (data))
            {
              close (fd);
              return call_failed (r, "the peer went away before it answered", ESRCH, errno_out);
            }
        }
      (void) poll (NULL, 0, 10);
    }
  uint8_t hello[DATC_ZMTP_HELLO_MAX];
  int rc = send_all (fd, hello, datc_zmtp_hello (hello), deadline);
  if (rc != 0)
    {
      close (fd);
      return call_failed (r, "sending the greeting", rc, errno_out);
    }

  /* The request waits for the peer's READY: libzmq drops a connection
   * whose messages come before its handshake is done ("unexpected
   * command"). */
  bool sent = false;
  uint8_t buf[16384];
  for (;;)
    {
      ssize_t got = read (fd, buf, sizeof buf);
      if (got > 0)
        {
          DatcZmtpStatus st = datc_zmtp_reader_feed (r, buf, (size_t) got, NULL);
          if (st == DATC_ZMTP_DONE)
            {
              close (fd);
              return st;
            }
          if (st == DATC_ZMTP_FAILED)
            {
              close (fd);
              return call_failed (r, r->why, 0, errno_out);
            }
          if (!sent && r->ready_seen)
            {
              uint8_t head[16];
              rc = send_all (fd, head, datc_zmtp_request_head (head, request_len), deadline);
              if (rc == 0)
                rc = send_all (fd, (const uint8_t *) request, request_len, deadline);
              if (rc != 0)
                {
                  close (fd);
                  return call_failed (r, "sending the request", rc, errno_out);
                }
              sent = true;
            }
          continue;
        }
      if (got == 0)
        {
          close (fd);
          return call_failed (r, "the peer closed the connection before it answered", 0, errno_out);
        }
      if (errno == EINTR)
        continue;
      if (errno != EAGAIN)
        {
          int errsv = errno;
          close (fd);
          return call_failed (r, "reading the reply", errsv, errno_out);
        }
      int64_t left = deadline - now_ms ();
      if (left <= 0)
        {
          close (fd);
          return call_failed (r, "no answer in time", ETIMEDOUT, errno_out);
        }
      struct pollfd p_in = { .fd = fd, .events = POLLIN };
      int ready = poll (&p_in, 1, (int) (left > 100 ? 100 : left));
      if (ready < 0 && errno != EINTR)
        {
          int errsv = errno;
          close (fd);
          return call_failed (r, "waiting for the reply", errsv, errno_out);
        }
      if (ready == 0 && still_there != NULL && !still_there (data))
        {
          close (fd);
          return call_failed (r, "the peer went away before it answered", ESRCH, errno_out);
        }
    }
}
