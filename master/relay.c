/* relay.c: the master's end of a relay (relay.h). */
#include "relay.h"

#include <gio/gio.h>

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "relayframe.h"

#define DEFAULT_PING_MS 5000u
#define DEFAULT_LOST_MS 15000u
#define DEFAULT_IDLE_S 30u
#define WRITE_MS 10000u /* a frame the relay does not take within this: lost */
#define BYE_MS 2000u
#define BACKOFF_FIRST_MS 500u
#define BACKOFF_MAX_MS 10000u

struct DatcRelay {
  gchar *site_name, *listen, *port_file;
  DatcSite *site;
  struct sockaddr_storage target;
  socklen_t target_len;
  guint ping_ms, lost_ms, idle_timeout_s;
  int wake_fd; /* eventfd: the thread looks at `stopping` */
  GThread *thread;

  /* Set before the thread starts, read by it only. */
  gchar *agent_path, *pidfile;
  guint hello_ms;
  guint port; /* the relay's port once known: kept across sessions */

  GMutex lock; /* everything below */
  GCond changed;
  gboolean stopping, start_done;
  GError *start_error;
  DatcRelayState state;
};

/* ---- the thread's session ---------------------------------------------- */

typedef struct {
  DatcRelay *r;
  DatcSiteStream *stream;
  GHashTable *conns; /* id -> DatcRelayConn* */
  GByteArray *in;    /* from the relay, not yet parsed */
  gboolean preamble_done;
  gint64 last_heard_us, next_ping_us;
  guint64 pings;
  GError *error; /* why the session ended */
} Session;

static void
set_state_conns (DatcRelay *r, Session *s, gboolean opened)
{
  g_mutex_lock (&r->lock);
  r->state.conns = g_hash_table_size (s->conns);
  if (opened)
    r->state.conns_total++;
  g_mutex_unlock (&r->lock);
}

static gboolean
send_frame (Session *s, DatcRelayType type, guint32 conn, const void *payload, gsize len)
{
  if (s->error != NULL)
    return FALSE;
  g_autoptr (GByteArray) f = g_byte_array_sized_new (DATC_RELAY_HEADER + (guint) len);
  datc_relay_frame_put (f, type, conn, payload, (guint32) len);
  if (!datc_site_stream_write (s->stream, f->data, f->len, WRITE_MS, &s->error))
    return FALSE;
  if (type == DATC_RELAY_DATA)
    {
      g_mutex_lock (&s->r->lock);
      s->r->state.bytes_to_agents += len;
      g_mutex_unlock (&s->r->lock);
    }
  return TRUE;
}

static void
drop_conn (Session *s, DatcRelayConn *c, gboolean tell_relay)
{
  if (tell_relay)
    send_frame (s, DATC_RELAY_CLOSE, c->id, NULL, 0);
  g_hash_table_remove (s->conns, GUINT_TO_POINTER (c->id));
  set_state_conns (s->r, s, FALSE);
}

static void
flush_conn (Session *s, DatcRelayConn *c)
{
  if (c->connecting)
    return;
  /* SIGPIPE is ignored by the master (run.c). */
  if (!datc_relay_flush (c->fd, c->out))
    drop_conn (s, c, TRUE);
  else if (c->out->len == 0 && c->closing)
    drop_conn (s, c, FALSE);
}

/* An agent connected to the relay: its own connection to the dispatcher. */
static void
open_conn (Session *s, guint32 id)
{
  DatcRelay *r = s->r;
  if (g_hash_table_contains (s->conns, GUINT_TO_POINTER (id)))
    {
      g_set_error (&s->error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "the relay opened connection %u twice", id);
      return;
    }
  int fd = socket (r->target.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    {
      g_warning ("site %s: relay: cannot open a socket: %s", r->site_name, g_strerror (errno));
      send_frame (s, DATC_RELAY_CLOSE, id, NULL, 0);
      return;
    }
  int one = 1;
  setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  DatcRelayConn *c = datc_relay_conn_new (id, fd);
  if (connect (fd, (struct sockaddr *) &r->target, r->target_len) != 0)
    {
      if (errno != EINPROGRESS)
        {
          g_warning ("site %s: relay: cannot reach the dispatcher: %s", r->site_name,
                     g_strerror (errno));
          datc_relay_conn_free (c);
          send_frame (s, DATC_RELAY_CLOSE, id, NULL, 0);
          return;
        }
      c->connecting = TRUE;
    }
  g_hash_table_insert (s->conns, GUINT_TO_POINTER (id), c);
  set_state_conns (r, s, TRUE);
}

static void
on_frame (Session *s, const DatcRelayFrame *f)
{
  DatcRelayConn *c = f->conn ? g_hash_table_lookup (s->conns, GUINT_TO_POINTER (f->conn)) : NULL;
  switch (f->type)
    {
    case DATC_RELAY_OPEN:
      open_conn (s, f->conn);
      break;
    case DATC_RELAY_DATA:
      if (c != NULL && !c->closing)
        {
          g_byte_array_append (c->out, f->payload, f->length);
          g_mutex_lock (&s->r->lock);
          s->r->state.bytes_to_master += f->length;
          g_mutex_unlock (&s->r->lock);
          flush_conn (s, c);
        }
      break;
    case DATC_RELAY_CLOSE:
      if (c != NULL)
        {
          c->closing = TRUE;
          flush_conn (s, c);
        }
      break;
    case DATC_RELAY_PONG:
      break;
    case DATC_RELAY_ERROR:
      g_set_error (&s->error, G_IO_ERROR, G_IO_ERROR_FAILED, "the relay stopped: %.*s",
                   (int) f->length, (const char *) f->payload);
      break;
    default: /* HELLO again */
      g_set_error (&s->error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "the relay sent %s in the middle of its session",
                   datc_relay_type_name (f->type));
      break;
    }
}

/* Takes the frames in s->in: at most until `hello` (when not NULL) is
 * set from a HELLO. */
static void
parse (Session *s, gchar **hello)
{
  gsize off = 0;
  if (!s->preamble_done)
    {
      gssize skip = datc_relay_preamble (s->in->data, s->in->len, &s->error);
      if (skip <= 0)
        return;
      if (skip > (gssize) strlen (DATC_RELAY_MAGIC))
        g_message ("site %s: relay: skipped %" G_GSSIZE_FORMAT " bytes the login shell "
                   "printed before the relay's first line",
                   s->r->site_name, skip - (gssize) strlen (DATC_RELAY_MAGIC));
      s->preamble_done = TRUE;
      off = (gsize) skip;
    }
  while (s->error == NULL)
    {
      DatcRelayFrame f;
      gssize took
          = datc_relay_frame_take (s->in->data + off, s->in->len - off, TRUE, &f, &s->error);
      if (took <= 0)
        break;
      off += (gsize) took;
      if (hello != NULL && f.type == DATC_RELAY_HELLO)
        {
          *hello = g_strndup ((const char *) f.payload, f.length);
          break;
        }
      if (hello != NULL && f.type != DATC_RELAY_ERROR)
        g_set_error (&s->error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                     "the relay sent %s before HELLO", datc_relay_type_name (f.type));
      else
        on_frame (s, &f);
    }
  if (s->error != NULL)
    g_prefix_error (&s->error, "from the relay: ");
  g_byte_array_remove_range (s->in, 0, (guint) off);
}

static void
log_stderr (Session *s)
{
  g_autofree gchar *text = datc_site_stream_take_stderr (s->stream);
  if (text == NULL)
    return;
  g_auto (GStrv) lines = g_strsplit (g_strchomp (text), "\n", 16);
  for (guint i = 0; lines[i] != NULL; i++)
    if (lines[i][0])
      g_message ("site %s: %s", s->r->site_name, lines[i]);
}

/* Reads the stream until it has nothing more now.  FALSE once the
 * session is over (s->error says why). */
static gboolean
read_stream (Session *s, gchar **hello)
{
  guint8 buf[65536];
  for (;;)
    {
      gssize n = datc_site_stream_read (s->stream, buf, sizeof buf, s->error ? NULL : &s->error);
      if (n < 0)
        return FALSE;
      if (n == 0)
        return s->error == NULL;
      s->last_heard_us = g_get_monotonic_time ();
      g_byte_array_append (s->in, buf, (guint) n);
      parse (s, hello);
      if (s->error != NULL || (hello != NULL && *hello != NULL))
        return s->error == NULL;
    }
}

static gboolean
stopping (DatcRelay *r)
{
  g_mutex_lock (&r->lock);
  gboolean stop = r->stopping;
  g_mutex_unlock (&r->lock);
  return stop;
}

/* Waits for the relay's HELLO: the endpoint agents connect to. */
static gchar *
await_hello (Session *s)
{
  gchar *hello = NULL;
  gint64 deadline = g_get_monotonic_time () + (gint64) s->r->hello_ms * 1000;
  while (hello == NULL)
    {
      if (!read_stream (s, &hello))
        return NULL;
      if (hello != NULL)
        break;
      gint64 left_ms = (deadline - g_get_monotonic_time ()) / 1000;
      if (left_ms <= 0 || stopping (s->r))
        {
          g_set_error (&s->error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                       "the relay did not say where it listens within %u ms", s->r->hello_ms);
          return NULL;
        }
      struct pollfd p[2]
          = { { datc_site_stream_fd (s->stream), POLLIN, 0 }, { s->r->wake_fd, POLLIN, 0 } };
      poll (p, 2, (int) MIN (left_ms, 1000));
    }
  guint64 port;
  const char *colon = strrchr (hello, ':');
  if (!g_str_has_prefix (hello, "tcp://") || colon == NULL
      || !g_ascii_string_to_unsigned (colon + 1, 10, 1, 65535, &port, NULL)
      || !g_utf8_validate (hello, -1, NULL))
    {
      g_autofree gchar *quoted = g_strescape (hello, NULL);
      g_set_error (&s->error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "the relay says it listens at \"%s\", not tcp://HOST:PORT", quoted);
      g_free (hello);
      return NULL;
    }
  if (s->r->port != (guint) port && s->r->port_file != NULL)
    {
      g_autofree gchar *text = g_strdup_printf ("%u\n", (guint) port);
      g_autoptr (GError) error = NULL;
      if (!g_file_set_contents (s->r->port_file, text, -1, &error))
        g_warning ("site %s: relay: %s", s->r->site_name, error->message);
    }
  s->r->port = (guint) port;
  return hello;
}

/* Carries connections until the session is lost or the relay stops. */
static void
pump (Session *s)
{
  DatcRelay *r = s->r;
  g_autoptr (GArray) fds = g_array_new (FALSE, FALSE, sizeof (struct pollfd));
  g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  while (s->error == NULL && !stopping (r))
    {
      if (!read_stream (s, NULL))
        break;
      log_stderr (s);
      gint64 now = g_get_monotonic_time ();
      if (now - s->last_heard_us > (gint64) r->lost_ms * 1000)
        {
          g_set_error (&s->error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                       "no word from the relay for %u ms", r->lost_ms);
          break;
        }
      if (now >= s->next_ping_us)
        {
          guint64 be = GUINT64_TO_BE (++s->pings);
          if (!send_frame (s, DATC_RELAY_PING, 0, &be, sizeof be))
            break;
          s->next_ping_us = now + (gint64) r->ping_ms * 1000;
        }

      g_array_set_size (fds, 0);
      g_array_set_size (ids, 0);
      struct pollfd head[2]
          = { { datc_site_stream_fd (s->stream), POLLIN, 0 }, { r->wake_fd, POLLIN, 0 } };
      g_array_append_vals (fds, head, 2);
      GHashTableIter it;
      gpointer v;
      g_hash_table_iter_init (&it, s->conns);
      while (g_hash_table_iter_next (&it, NULL, &v))
        {
          DatcRelayConn *c = v;
          short ev = (short) ((c->connecting || c->out->len > 0 ? POLLOUT : 0)
                              | (c->connecting ? 0 : POLLIN));
          struct pollfd p = { c->fd, ev, 0 };
          g_array_append_val (fds, p);
          g_array_append_val (ids, c->id);
        }
      gint64 wait_ms = (s->next_ping_us - g_get_monotonic_time ()) / 1000;
      if (poll ((struct pollfd *) fds->data, fds->len, (int) CLAMP (wait_ms, 1, 1000)) < 0
          && errno != EINTR)
        {
          g_set_error (&s->error, G_IO_ERROR, g_io_error_from_errno (errno), "poll: %s",
                       g_strerror (errno));
          break;
        }
      struct pollfd *p = (struct pollfd *) fds->data;
      for (guint i = 0; i < ids->len && s->error == NULL; i++)
        {
          short ev = p[2 + i].revents;
          guint32 id = g_array_index (ids, guint32, i);
          DatcRelayConn *c = g_hash_table_lookup (s->conns, GUINT_TO_POINTER (id));
          if (c == NULL || ev == 0)
            continue;
          if (c->connecting)
            {
              int err = 0;
              socklen_t len = sizeof err;
              getsockopt (c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
              if (err != 0)
                {
                  g_warning ("site %s: relay: cannot reach the dispatcher: %s", r->site_name,
                             g_strerror (err));
                  drop_conn (s, c, TRUE);
                  continue;
                }
              c->connecting = FALSE;
            }
          if (ev & POLLOUT)
            flush_conn (s, c);
          c = g_hash_table_lookup (s->conns, GUINT_TO_POINTER (id));
          if (c == NULL || !(ev & (POLLIN | POLLHUP | POLLERR)))
            continue;
          guint8 buf[DATC_RELAY_PAYLOAD_MAX];
          ssize_t n = recv (c->fd, buf, sizeof buf, 0);
          if (n > 0)
            send_frame (s, DATC_RELAY_DATA, id, buf, (gsize) n);
          else if (n == 0 || (errno != EAGAIN && errno != EINTR))
            drop_conn (s, c, TRUE);
        }
    }
}

/* After BYE: the relay's stream ends when it exits (its last words on
 * stderr then said), within BYE_MS. */
static void
await_end (Session *s)
{
  gint64 deadline = g_get_monotonic_time () + BYE_MS * (gint64) 1000;
  guint8 buf[4096];
  g_autoptr (GError) ended = NULL;
  while (g_get_monotonic_time () < deadline
         && datc_site_stream_read (s->stream, buf, sizeof buf, &ended) >= 0)
    {
      struct pollfd p = { datc_site_stream_fd (s->stream), POLLIN, 0 };
      poll (&p, 1, 50);
    }
}

/* One session: start the relay, wait for its HELLO (the first session
 * reports it to datc_relay_start), carry connections.  Returns whether
 * it got as far as carrying. */
static gboolean
session (DatcRelay *r)
{
  g_autofree gchar *port = g_strdup_printf ("%u", r->port);
  g_autofree gchar *idle = g_strdup_printf ("%u", r->idle_timeout_s);
  const char *argv[] = { r->agent_path,
                         "relay",
                         "--pidfile",
                         r->pidfile,
                         "--idle-timeout",
                         idle,
                         "--port",
                         port,
                         r->listen ? "--listen" : NULL,
                         r->listen,
                         NULL };
  Session s = { .r = r,
                .in = g_byte_array_new (),
                .conns = g_hash_table_new_full (NULL, NULL, NULL, datc_relay_conn_free) };
  gboolean carried = FALSE;
  s.stream = datc_site_open_stream (r->site, argv, &s.error);
  g_autofree gchar *hello = s.stream ? await_hello (&s) : NULL;
  g_mutex_lock (&r->lock);
  if (hello != NULL)
    {
      r->state.sessions++;
      r->state.up = TRUE;
      if (r->state.endpoint != NULL && !g_str_equal (r->state.endpoint, hello))
        g_warning ("site %s: the relay now listens at %s, not %s: agents started before "
                   "cannot find it",
                   r->site_name, hello, r->state.endpoint);
      g_free (r->state.endpoint);
      r->state.endpoint = g_strdup (hello);
      if (!r->start_done)
        {
          r->start_done = TRUE;
          g_cond_broadcast (&r->changed);
        }
      carried = TRUE;
    }
  g_mutex_unlock (&r->lock);
  if (hello != NULL)
    {
      if (r->state.sessions > 1)
        g_message ("site %s: relay: session re-established; agents connect to %s again",
                   r->site_name, hello);
      s.last_heard_us = g_get_monotonic_time ();
      s.next_ping_us = s.last_heard_us + (gint64) r->ping_ms * 1000;
      pump (&s);
    }

  gboolean bye = s.error == NULL && stopping (r);
  if (bye && send_frame (&s, DATC_RELAY_BYE, 0, NULL, 0))
    await_end (&s);
  if (s.stream != NULL)
    {
      log_stderr (&s);
      datc_site_stream_close (s.stream, bye ? BYE_MS : 0);
    }
  g_mutex_lock (&r->lock);
  r->state.up = FALSE;
  r->state.conns = 0;
  if (s.error != NULL)
    {
      g_free (r->state.last_error);
      r->state.last_error = g_strdup (s.error->message);
      if (!r->start_done && r->start_error == NULL)
        r->start_error = g_error_copy (s.error);
    }
  g_cond_broadcast (&r->changed);
  g_mutex_unlock (&r->lock);
  if (s.error != NULL && carried)
    g_warning ("site %s: relay session lost (%s): closing its %u agent connections; "
               "re-establishing it",
               r->site_name, s.error->message, g_hash_table_size (s.conns));
  g_hash_table_destroy (s.conns);
  g_byte_array_unref (s.in);
  g_clear_error (&s.error);
  return carried;
}

static gpointer
relay_thread (gpointer data)
{
  DatcRelay *r = data;
  guint failures = 0;
  while (!stopping (r))
    {
      if (session (r))
        failures = 0;
      else
        failures++;
      g_mutex_lock (&r->lock);
      gboolean started = r->start_done;
      g_mutex_unlock (&r->lock);
      if (!started)
        break; /* datc_relay_start reports it */
      if (failures == 0 || stopping (r))
        continue;
      guint wait_ms = MIN (BACKOFF_FIRST_MS << MIN (failures - 1, 5u), BACKOFF_MAX_MS);
      struct pollfd p = { r->wake_fd, POLLIN, 0 };
      poll (&p, 1, (int) wait_ms);
    }
  return NULL;
}

/* ---- the API -------------------------------------------------------------- */

static gboolean
resolve_target (DatcRelay *r, const char *target, GError **error)
{
  const char *colon = strrchr (target, ':');
  if (!g_str_has_prefix (target, "tcp://") || colon == NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                   "a relay needs the master to listen on tcp, not %s", target);
      return FALSE;
    }
  g_autofree gchar *host = g_strndup (target + 6, (gsize) (colon - target - 6));
  if (host[0] == '[' && host[strlen (host) - 1] == ']')
    {
      gchar *inner = g_strndup (host + 1, strlen (host) - 2);
      g_free (host);
      host = inner;
    }
  if (g_str_equal (host, "*") || g_str_equal (host, "0.0.0.0"))
    g_free (host), host = g_strdup ("127.0.0.1");
  else if (g_str_equal (host, "::"))
    g_free (host), host = g_strdup ("::1");
  struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
  struct addrinfo *ai = NULL;
  int rc = getaddrinfo (host, colon + 1, &hints, &ai);
  if (rc != 0)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "relay: cannot resolve %s: %s", target,
                   gai_strerror (rc));
      return FALSE;
    }
  memcpy (&r->target, ai->ai_addr, ai->ai_addrlen);
  r->target_len = ai->ai_addrlen;
  freeaddrinfo (ai);
  return TRUE;
}

DatcRelay *
datc_relay_new (const DatcRelayOptions *o, GError **error)
{
  DatcRelay *r = g_new0 (DatcRelay, 1);
  r->site_name = g_strdup (o->site_name);
  r->site = o->site;
  r->listen = g_strdup (o->listen);
  r->port_file = g_strdup (o->port_file);
  g_autofree gchar *kept = NULL;
  guint64 port;
  if (r->port_file != NULL && g_file_get_contents (r->port_file, &kept, NULL, NULL)
      && g_ascii_string_to_unsigned (g_strstrip (kept), 10, 1, 65535, &port, NULL))
    r->port = (guint) port;
  r->ping_ms = o->ping_ms ? o->ping_ms : DEFAULT_PING_MS;
  r->lost_ms = o->lost_ms ? o->lost_ms : DEFAULT_LOST_MS;
  r->idle_timeout_s = o->idle_timeout_s ? o->idle_timeout_s : DEFAULT_IDLE_S;
  r->wake_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  g_mutex_init (&r->lock);
  g_cond_init (&r->changed);
  if (!resolve_target (r, o->target, error))
    {
      datc_relay_free (r);
      return NULL;
    }
  return r;
}

gboolean
datc_relay_start (DatcRelay *r, const char *agent_path, const char *workdir, guint hello_ms,
                  gchar **endpoint, GError **error)
{
  g_mutex_lock (&r->lock);
  if (r->start_done)
    {
      *endpoint = g_strdup (r->state.endpoint);
      g_mutex_unlock (&r->lock);
      return TRUE;
    }
  g_mutex_unlock (&r->lock);
  if (r->thread != NULL)
    g_thread_join (g_steal_pointer (&r->thread));
  g_free (r->agent_path);
  g_free (r->pidfile);
  r->agent_path = g_strdup (agent_path);
  r->pidfile = g_build_filename (workdir, "relay.pid", NULL);
  r->hello_ms = hello_ms;
  g_clear_error (&r->start_error);
  r->thread = g_thread_new ("datc-relay", relay_thread, r);

  g_mutex_lock (&r->lock);
  while (!r->start_done && r->start_error == NULL)
    g_cond_wait (&r->changed, &r->lock);
  gboolean ok = r->start_done;
  if (ok)
    *endpoint = g_strdup (r->state.endpoint);
  else
    g_propagate_prefixed_error (error, g_steal_pointer (&r->start_error),
                                "site %s: cannot start its relay: ", r->site_name);
  g_mutex_unlock (&r->lock);
  return ok;
}

void
datc_relay_state (DatcRelay *r, DatcRelayState *out)
{
  g_mutex_lock (&r->lock);
  *out = r->state;
  out->started = r->start_done;
  out->endpoint = g_strdup (r->state.endpoint);
  out->last_error = g_strdup (r->state.last_error);
  g_mutex_unlock (&r->lock);
}

void
datc_relay_state_clear (DatcRelayState *s)
{
  g_clear_pointer (&s->endpoint, g_free);
  g_clear_pointer (&s->last_error, g_free);
}

void
datc_relay_free (DatcRelay *r)
{
  if (r == NULL)
    return;
  g_mutex_lock (&r->lock);
  r->stopping = TRUE;
  g_mutex_unlock (&r->lock);
  guint64 one = 1;
  if (write (r->wake_fd, &one, sizeof one) < 0)
    g_warning ("relay: cannot wake its thread: %s", g_strerror (errno));
  if (r->thread != NULL)
    g_thread_join (r->thread);
  close (r->wake_fd);
  g_clear_pointer (&r->site, datc_site_free);
  g_clear_error (&r->start_error);
  datc_relay_state_clear (&r->state);
  g_mutex_clear (&r->lock);
  g_cond_clear (&r->changed);
  g_free (r->site_name);
  g_free (r->listen);
  g_free (r->port_file);
  g_free (r->agent_path);
  g_free (r->pidfile);
  g_free (r);
}
