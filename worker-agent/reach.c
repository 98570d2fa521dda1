/* reach.c: why the agent's socket does not connect, said once.
 *
 * A ZeroMQ socket monitor says when an attempt failed or a handshake went
 * wrong, but not why a connect failed: its events carry no errno (CLOSED
 * carries the fd, CONNECT_RETRIED the next interval).  So after a failed
 * attempt, or a few seconds without a connection (a connect that hangs
 * while packets are dropped), the agent connects once itself, without
 * ZeroMQ, to the same address, and says what the kernel answered.  Such
 * a probe is non-blocking (its fd is polled with the agent's others) and
 * runs at most every PROBE_INTERVAL_US; a line is printed only when the
 * reason changes, so a master that stays away costs one line, not one
 * per retry. */
#include "reach.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

#define DATC_REACH_ERROR (datc_reach_error_quark ())
enum { DATC_REACH_ERROR_MONITOR }; /* the socket monitor could not be set up */
static G_DEFINE_QUARK (datc-reach-error-quark, datc_reach_error)

/* A probe at most this often, and one that gets no answer in PROBE_WAIT_US
 * says so. */
#define PROBE_INTERVAL_US (5 * G_USEC_PER_SEC)
#define PROBE_WAIT_US (5 * G_USEC_PER_SEC)
/* Not connected this long with no failed attempt seen: probe anyway (a
 * connect whose SYNs are dropped fails only after minutes). */
#define SILENT_US (3 * G_USEC_PER_SEC)

                          struct DatcReach {
  void *mon; /* PAIR socket that receives the monitor's events */
  int mon_fd;
  gboolean unread; /* events may wait that mon_fd will not signal */
  gchar *endpoint, *host;
  gboolean connected;      /* a handshake succeeded, and no disconnect since */
  gint64 down_since_us;    /* when it last was not connected */
  gboolean attempt_failed; /* an attempt failed since the last probe */
  int probe_fd;            /* -1: none out */
  gint64 probe_deadline_us, last_probe_us;
  gchar *said; /* the reason last printed, until it connects */
};

static guint reach_serial;

DatcReach *
datc_reach_new (void *ctx, void *sock, const char *endpoint, const char *host, GError **error)
{
  g_autofree gchar *addr = g_strdup_printf ("inproc://datc-reach-%u", reach_serial++);
  int events = ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_CLOSED | ZMQ_EVENT_DISCONNECTED
               | ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
               | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
  if (zmq_socket_monitor (sock, addr, events) != 0)
    {
      g_set_error (error, DATC_REACH_ERROR, DATC_REACH_ERROR_MONITOR, "zmq_socket_monitor: %s",
                   zmq_strerror (errno));
      return NULL;
    }
  DatcReach *r = g_new0 (DatcReach, 1);
  r->probe_fd = -1;
  r->endpoint = g_strdup (endpoint);
  r->host = g_strdup (host);
  r->down_since_us = g_get_monotonic_time ();
  /* ZMQ_FD signals news, not messages, and setting the socket up may
   * already have taken the news of the first events: read once to be
   * sure.  After a read that found nothing, the fd says when more come. */
  r->unread = TRUE;
  r->mon = zmq_socket (ctx, ZMQ_PAIR);
  int zero = 0;
  size_t len = sizeof r->mon_fd;
  if (r->mon == NULL || zmq_setsockopt (r->mon, ZMQ_LINGER, &zero, sizeof zero) != 0
      || zmq_connect (r->mon, addr) != 0 || zmq_getsockopt (r->mon, ZMQ_FD, &r->mon_fd, &len) != 0)
    {
      g_set_error (error, DATC_REACH_ERROR, DATC_REACH_ERROR_MONITOR, "socket monitor %s: %s", addr,
                   zmq_strerror (errno));
      datc_reach_free (r);
      return NULL;
    }
  return r;
}

static void
probe_close (DatcReach *r)
{
  if (r->probe_fd >= 0)
    close (r->probe_fd);
  r->probe_fd = -1;
}

void
datc_reach_free (DatcReach *r)
{
  if (r == NULL)
    return;
  probe_close (r);
  if (r->mon != NULL)
    zmq_close (r->mon);
  g_free (r->endpoint);
  g_free (r->host);
  g_free (r->said);
  g_free (r);
}

/* One line per distinct reason, until the socket connects. */
static void
say (DatcReach *r, const char *why)
{
  if (g_strcmp0 (why, r->said) == 0)
    return;
  g_free (r->said);
  r->said = g_strdup (why);
  g_printerr ("datc-agent on %s" DATC_REACH_FAILED "%s: %s" DATC_REACH_RETRYING "\n", r->host,
              r->endpoint, why);
}

/* The address ZeroMQ connects to, as a plain socket address: tcp://[SOURCE;]HOST:PORT
 * (HOST may be [v6]) or ipc://PATH (@ for abstract).  FALSE with *why set
 * when it cannot be had; FALSE with *why NULL for a transport not probed. */
static gboolean
probe_address (const char *endpoint, struct sockaddr_storage *sa, socklen_t *len, gchar **why)
{
  *why = NULL;
  if (g_str_has_prefix (endpoint, "ipc://"))
    {
      const char *path = endpoint + strlen ("ipc://");
      struct sockaddr_un *sun = (struct sockaddr_un *) sa;
      if (path[0] == '\0' || strlen (path) >= sizeof sun->sun_path)
        return FALSE;
      memset (sa, 0, sizeof *sa);
      sun->sun_family = AF_UNIX;
      memcpy (sun->sun_path, path, strlen (path));
      *len = (socklen_t) (offsetof (struct sockaddr_un, sun_path) + strlen (path) + 1);
      if (path[0] == '@')
        {
          sun->sun_path[0] = '\0';
          *len -= 1;
        }
      return TRUE;
    }
  if (!g_str_has_prefix (endpoint, "tcp://"))
    return FALSE;
  const char *host = endpoint + strlen ("tcp://");
  const char *semi = strchr (host, ';');
  if (semi != NULL)
    host = semi + 1;
  const char *colon = strrchr (host, ':');
  if (colon == NULL || colon == host)
    return FALSE;
  g_autofree gchar *name = g_strndup (host, (gsize) (colon - host));
  if (name[0] == '[' && name[strlen (name) - 1] == ']')
    {
      memmove (name, name + 1, strlen (name) - 2);
      name[strlen (name) - 2] = '\0';
    }
  struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
  struct addrinfo *res = NULL;
  int rc = getaddrinfo (name, colon + 1, &hints, &res);
  if (rc != 0)
    {
      *why = g_strdup_printf ("looking up %s: %s", name, gai_strerror (rc));
      return FALSE;
    }
  /* ZeroMQ takes IPv4 unless ZMQ_IPV6 is set: the first IPv4 answer, if any. */
  const struct addrinfo *pick = res;
  for (const struct addrinfo *a = res; a != NULL; a = a->ai_next)
    if (a->ai_family == AF_INET)
      {
        pick = a;
        break;
      }
  memcpy (sa, pick->ai_addr, pick->ai_addrlen);
  *len = pick->ai_addrlen;
  freeaddrinfo (res);
  return TRUE;
}

static void
probe_start (DatcReach *r, gint64 now)
{
  r->last_probe_us = now;
  r->attempt_failed = FALSE;
  struct sockaddr_storage sa;
  socklen_t len = 0;
  g_autofree gchar *why = NULL;
  if (!probe_address (r->endpoint, &sa, &len, &why))
    {
      if (why != NULL)
        say (r, why);
      return;
    }
  int fd = socket (sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return; /* out of fds: nothing to learn about the master */
  if (connect (fd, (struct sockaddr *) &sa, len) == 0)
    {
      close (fd); /* it listens: ZeroMQ's next attempt will do, or a handshake event says why not */
      return;
    }
  if (errno == EINPROGRESS || errno == EAGAIN)
    {
      r->probe_fd = fd;
      r->probe_deadline_us = now + PROBE_WAIT_US;
      return;
    }
  int e = errno;
  close (fd);
  say (r, g_strerror (e));
}

static void
probe_finish (DatcReach *r, gint64 now)
{
  int e = 0;
  socklen_t len = sizeof e;
  struct pollfd pfd = { r->probe_fd, POLLOUT, 0 };
  if (poll (&pfd, 1, 0) == 1)
    {
      if (getsockopt (r->probe_fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0)
        e = errno;
      probe_close (r);
      if (e != 0)
        say (r, g_strerror (e));
    }
  else if (now >= r->probe_deadline_us)
    {
      probe_close (r);
      say (r, "no answer within 5 s (a firewall dropping the packets?)");
    }
}

static void
on_event (DatcReach *r, guint16 event, guint32 value, gint64 now)
{
  g_autofree gchar *why = NULL;
  switch (event)
    {
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
      r->connected = TRUE;
      probe_close (r);
      if (r->said != NULL)
        g_printerr ("datc-agent on %s: reached %s\n", r->host, r->endpoint);
      g_clear_pointer (&r->said, g_free);
      return;
    case ZMQ_EVENT_DISCONNECTED:
      if (r->connected)
        r->down_since_us = now;
      r->connected = FALSE;
      return;
    case ZMQ_EVENT_CLOSED:
    case ZMQ_EVENT_CONNECT_RETRIED:
      if (!r->connected)
        r->attempt_failed = TRUE;
      return;
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
      why = g_strdup_printf ("the handshake failed (%s): is this the campaign's master, and "
                             "--server-key its key?",
                             g_strerror ((int) value));
      break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
      why = g_strdup_printf ("the handshake failed (ZeroMQ protocol error 0x%x): is a datc "
                             "master listening there, with the --server-key given?",
                             value);
      break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      why = g_strdup_printf ("the master refused this agent's key (status %u): --key-file is "
                             "not this campaign's agent key",
                             value);
      break;
    default:
      return;
    }
  say (r, why);
}

static void
take_events (DatcReach *r, gint64 now)
{
  r->unread = FALSE;
  for (;;)
    {
      zmq_msg_t head, addr;
      zmq_msg_init (&head);
      if (zmq_msg_recv (&head, r->mon, ZMQ_DONTWAIT) < 0)
        {
          zmq_msg_close (&head);
          return;
        }
      guint16 event = 0;
      guint32 value = 0;
      gboolean ok = zmq_msg_size (&head) == 6;
      if (ok)
        {
          memcpy (&event, zmq_msg_data (&head), 2);
          memcpy (&value, (const char *) zmq_msg_data (&head) + 2, 4);
        }
      /* The second frame, the endpoint: ours is the only one. */
      while (zmq_msg_more (&head))
        {
          zmq_msg_init (&addr);
          int more = zmq_msg_recv (&addr, r->mon, ZMQ_DONTWAIT) >= 0 && zmq_msg_more (&addr);
          zmq_msg_close (&addr);
          if (!more)
            break;
        }
      zmq_msg_close (&head);
      if (ok)
        on_event (r, event, value, now);
    }
}

guint
datc_reach_pollfds (DatcReach *r, struct pollfd *fds)
{
  guint n = 0;
  fds[n++] = (struct pollfd) { r->mon_fd, POLLIN, 0 };
  if (r->probe_fd >= 0)
    fds[n++] = (struct pollfd) { r->probe_fd, POLLOUT, 0 };
  return n;
}

gint64
datc_reach_next_us (DatcReach *r)
{
  if (r->unread)
    return 0;
  if (r->probe_fd >= 0)
    return r->probe_deadline_us;
  if (r->connected)
    return G_MAXINT64;
  gint64 due = r->attempt_failed ? 0 : r->down_since_us + SILENT_US;
  return MAX (due, r->last_probe_us + PROBE_INTERVAL_US);
}

void
datc_reach_dispatch (DatcReach *r, gint64 now)
{
  take_events (r, now);
  if (r->probe_fd >= 0)
    probe_finish (r, now);
  if (!r->connected && r->probe_fd < 0 && now >= datc_reach_next_us (r))
    probe_start (r, now);
}
