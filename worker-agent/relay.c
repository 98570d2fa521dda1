/* relay.c: `datc-agent relay` (relay.h).
 *
 * One poll loop over: stdin (frames from the master), stdout (frames to
 * it), the listening socket, each agent's connection and a signalfd.
 * Nothing is dropped: when the master's side backs up (stdout's queue over
 * HIGH_WATER) the relay stops reading agents and accepting; when an
 * agent's queue backs up it stops reading stdin.  The session's end is
 * the relay's: stdin at EOF, or no frame from the master (which pings
 * every few seconds) for --idle-timeout; the relay then closes every
 * connection (agents reconnect, through the next relay the master
 * starts) and exits, removing its pid file.  A relay started while an
 * older one of the same workdir still holds the port (the master noticed
 * the session's loss first) stops that one by the PID in the pid file
 * (when that PID is a `datc-agent relay` of this user) and takes the
 * port over. */
#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "relayframe.h"

#define HIGH_WATER (4u * 1024u * 1024u)
#define MAX_CONNS 16384u
#define TAKEOVER_MS 5000
#define BIND_RETRY_MS 10000

typedef struct {
  int listen_fd, sig_fd;
  GHashTable *conns; /* id -> DatcRelayConn* */
  guint32 next_id;
  GByteArray *in, *up; /* from stdin not yet parsed; to stdout not yet written */
  gint64 last_master_us;
  guint idle_timeout_s;
  gchar *pidfile;
  guint64 carried, to_master, to_agents; /* connections and bytes, said at the exit */
  const char *ended;                     /* why the loop ended, for stderr */
  int status;
} Relay;

static void
frame (Relay *r, DatcRelayType type, guint32 conn, const void *payload, gsize len)
{
  datc_relay_frame_put (r->up, type, conn, payload, (guint32) len);
}

static void
end (Relay *r, int status, const char *why)
{
  if (r->ended == NULL)
    {
      r->ended = why;
      r->status = status;
    }
}

/* ---- the port, and an older relay that holds it ----------------------- */

static gboolean
is_my_relay (pid_t pid)
{
  g_autofree gchar *proc = g_strdup_printf ("/proc/%d", (int) pid);
  g_autofree gchar *cmdline_path = g_strdup_printf ("/proc/%d/cmdline", (int) pid);
  struct stat st;
  g_autofree gchar *cmdline = NULL;
  gsize len = 0;
  if (stat (proc, &st) != 0 || st.st_uid != getuid ()
      || !g_file_get_contents (cmdline_path, &cmdline, &len, NULL))
    return FALSE;
  /* argv[1] is "relay": the second NUL-ended word. */
  const char *second = memchr (cmdline, '\0', len);
  return second != NULL && (gsize) (second + 1 - cmdline) < len
         && g_str_equal (second + 1, "relay");
}

/* Stops the relay the pid file names, if it is one of ours and alive. */
static void
take_over (const char *pidfile)
{
  g_autofree gchar *text = NULL;
  guint64 pid;
  if (pidfile == NULL || !g_file_get_contents (pidfile, &text, NULL, NULL)
      || !g_ascii_string_to_unsigned (g_strstrip (text), 10, 2, G_MAXINT32, &pid, NULL)
      || (pid_t) pid == getpid () || !is_my_relay ((pid_t) pid))
    return;
  int pfd = (int) syscall (SYS_pidfd_open, (pid_t) pid, 0);
  if (pfd < 0)
    return;
  g_printerr ("datc-agent relay: stopping the older relay %d that holds this workdir\n", (int) pid);
  syscall (SYS_pidfd_send_signal, pfd, SIGTERM, NULL, 0);
  struct pollfd p = { pfd, POLLIN, 0 };
  if (poll (&p, 1, TAKEOVER_MS) <= 0)
    syscall (SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
  close (pfd);
}

static gboolean
write_pidfile (const char *pidfile, GError **error)
{
  g_autofree gchar *text = g_strdup_printf ("%d\n", (int) getpid ());
  g_autofree gchar *dir = g_path_get_dirname (pidfile);
  /* The workdir may not exist before the first proxy's script. */
  if (g_mkdir_with_parents (dir, 0700) != 0)
    {
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno), "cannot create %s: %s",
                   dir, g_strerror (errno));
      return FALSE;
    }
  return g_file_set_contents_full (pidfile, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, error);
}

/* Removes the pid file if it still names this process. */
static void
remove_pidfile (const char *pidfile)
{
  g_autofree gchar *text = NULL;
  guint64 pid;
  if (pidfile != NULL && g_file_get_contents (pidfile, &text, NULL, NULL)
      && g_ascii_string_to_unsigned (g_strstrip (text), 10, 1, G_MAXINT32, &pid, NULL)
      && (pid_t) pid == getpid ())
    unlink (pidfile);
}

/* A listening socket on host:port (host NULL: every address), retrying a
 * port still held (an older relay on its way out, TIME_WAIT) for up to
 * BIND_RETRY_MS, then any free port.  Sets *bound_port. */
static int
listen_on (const char *host, guint port, guint *bound_port, GError **error)
{
  struct addrinfo hints = { .ai_family = AF_UNSPEC,
                            .ai_socktype = SOCK_STREAM,
                            .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
  g_autofree gchar *service = g_strdup_printf ("%u", port);
  gint64 give_up = g_get_monotonic_time () + BIND_RETRY_MS * (gint64) 1000;
  for (;;)
    {
      struct addrinfo *ai = NULL;
      int rc = getaddrinfo (host, service, &hints, &ai);
      if (rc != 0)
        {
          g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT, "cannot resolve %s: %s",
                       host ? host : "*", gai_strerror (rc));
          return -1;
        }
      int err = 0, fd = -1;
      /* Every address: an IPv6 wildcard comes first where it exists and
       * takes IPv4 too (bindv6only is 0 by default). */
      for (struct addrinfo *a = ai; a != NULL && fd < 0; a = a->ai_next)
        {
          fd = socket (a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
          if (fd < 0)
            {
              err = errno;
              continue;
            }
          int one = 1;
          setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
          if (bind (fd, a->ai_addr, a->ai_addrlen) != 0 || listen (fd, 512) != 0)
            {
              err = errno;
              close (fd);
              fd = -1;
            }
        }
      freeaddrinfo (ai);
      if (fd >= 0)
        {
          struct sockaddr_storage ss;
          socklen_t sl = sizeof ss;
          getsockname (fd, (struct sockaddr *) &ss, &sl);
          *bound_port = ntohs (ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &ss)->sin6_port
                                                        : ((struct sockaddr_in *) &ss)->sin_port);
          return fd;
        }
      if (err == EADDRINUSE && port != 0 && g_get_monotonic_time () > give_up)
        {
          /* Agents started before know only that port, but a relay on
           * another one still serves every proxy submitted from now. */
          g_printerr ("datc-agent relay: port %u stays taken; listening on another\n", port);
          port = 0;
          g_free (service);
          service = g_strdup ("0");
          continue;
        }
      if (err != EADDRINUSE || g_get_monotonic_time () > give_up)
        {
          g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (err),
                       "cannot listen on %s port %u: %s", host ? host : "every address", port,
                       g_strerror (err));
          return -1;
        }
      struct pollfd none = { -1, 0, 0 };
      poll (&none, 1, 100);
    }
}

/* ---- the loop ------------------------------------------------------------ */

static void
drop_conn (Relay *r, DatcRelayConn *c, gboolean tell_master)
{
  if (tell_master)
    frame (r, DATC_RELAY_CLOSE, c->id, NULL, 0);
  g_hash_table_remove (r->conns, GUINT_TO_POINTER (c->id));
}

static void
flush_conn (Relay *r, DatcRelayConn *c)
{
  if (!datc_relay_flush (c->fd, c->out))
    drop_conn (r, c, TRUE);
  else if (c->out->len == 0 && c->closing)
    drop_conn (r, c, FALSE);
}

static void
flush_up (Relay *r)
{
  if (!datc_relay_flush (STDOUT_FILENO, r->up))
    end (r, 1, "its session is gone (stdout closed)");
}

static void
on_frame (Relay *r, const DatcRelayFrame *f)
{
  DatcRelayConn *c = f->conn ? g_hash_table_lookup (r->conns, GUINT_TO_POINTER (f->conn)) : NULL;
  switch (f->type)
    {
    case DATC_RELAY_DATA:
      /* A connection the relay already closed: its CLOSE is on the way. */
      if (c != NULL && !c->closing)
        {
          g_byte_array_append (c->out, f->payload, f->length);
          r->to_agents += f->length;
          flush_conn (r, c);
        }
      break;
    case DATC_RELAY_CLOSE:
      if (c != NULL)
        {
          c->closing = TRUE;
          flush_conn (r, c);
        }
      break;
    case DATC_RELAY_PING:
      frame (r, DATC_RELAY_PONG, 0, f->payload, f->length);
      break;
    case DATC_RELAY_BYE:
      end (r, 0, "the master said the campaign is over");
      break;
    default: /* refused by datc_relay_frame_take */
      break;
    }
}

static void
read_master (Relay *r)
{
  guint8 buf[65536];
  ssize_t n = read (STDIN_FILENO, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n <= 0)
    {
      end (r, 1, "its session is gone (stdin closed)");
      return;
    }
  r->last_master_us = g_get_monotonic_time ();
  g_byte_array_append (r->in, buf, (guint) n);
  gsize off = 0;
  for (;;)
    {
      g_autoptr (GError) error = NULL;
      DatcRelayFrame f;
      gssize took = datc_relay_frame_take (r->in->data + off, r->in->len - off, FALSE, &f, &error);
      if (took == 0)
        break;
      if (took < 0)
        {
          g_printerr ("datc-agent relay: from the master: %s\n", error->message);
          frame (r, DATC_RELAY_ERROR, 0, error->message, MIN (strlen (error->message), 1024));
          end (r, 1, "the master's stream is out of step");
          return;
        }
      on_frame (r, &f);
      off += (gsize) took;
    }
  g_byte_array_remove_range (r->in, 0, (guint) off);
}

static void
read_agent (Relay *r, DatcRelayConn *c)
{
  guint8 buf[DATC_RELAY_PAYLOAD_MAX];
  ssize_t n = read (c->fd, buf, sizeof buf);
  if (n > 0)
    {
      frame (r, DATC_RELAY_DATA, c->id, buf, (gsize) n);
      r->to_master += (guint64) n;
    }
  else if (n == 0 || (errno != EAGAIN && errno != EINTR))
    drop_conn (r, c, TRUE);
}

static void
accept_agent (Relay *r)
{
  int fd = accept4 (r->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0)
    return;
  if (g_hash_table_size (r->conns) >= MAX_CONNS || r->next_id == G_MAXUINT32)
    {
      close (fd);
      return;
    }
  int one = 1;
  setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  DatcRelayConn *c = datc_relay_conn_new (++r->next_id, fd);
  g_hash_table_insert (r->conns, GUINT_TO_POINTER (c->id), c);
  r->carried++;
  frame (r, DATC_RELAY_OPEN, c->id, NULL, 0);
}

static gboolean
agents_backed_up (Relay *r)
{
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, r->conns);
  while (g_hash_table_iter_next (&it, NULL, &v))
    if (((DatcRelayConn *) v)->out->len > HIGH_WATER)
      return TRUE;
  return FALSE;
}

static void
loop (Relay *r)
{
  g_autoptr (GArray) fds = g_array_new (FALSE, FALSE, sizeof (struct pollfd));
  g_autoptr (GPtrArray) polled = g_ptr_array_new ();
  while (r->ended == NULL)
    {
      gboolean up_full = r->up->len > HIGH_WATER;
      g_array_set_size (fds, 0);
      g_ptr_array_set_size (polled, 0);
      struct pollfd head[4] = {
        { STDIN_FILENO, agents_backed_up (r) ? 0 : POLLIN, 0 },
        { STDOUT_FILENO, r->up->len > 0 ? POLLOUT : 0, 0 },
        { r->listen_fd, up_full ? 0 : POLLIN, 0 },
        { r->sig_fd, POLLIN, 0 },
      };
      g_array_append_vals (fds, head, 4);
      GHashTableIter it;
      gpointer v;
      g_hash_table_iter_init (&it, r->conns);
      while (g_hash_table_iter_next (&it, NULL, &v))
        {
          DatcRelayConn *c = v;
          struct pollfd p
              = { c->fd,
                  (short) ((up_full || c->closing ? 0 : POLLIN) | (c->out->len > 0 ? POLLOUT : 0)),
                  0 };
          g_array_append_val (fds, p);
          g_ptr_array_add (polled, c);
        }
      gint64 idle_end = r->last_master_us + (gint64) r->idle_timeout_s * G_USEC_PER_SEC;
      gint64 left_ms = (idle_end - g_get_monotonic_time ()) / 1000;
      if (left_ms <= 0)
        {
          end (r, 1, "no word from the master within --idle-timeout: its session is gone");
          break;
        }
      int rc = poll ((struct pollfd *) fds->data, fds->len, (int) MIN (left_ms + 1, 60000));
      if (rc < 0 && errno != EINTR)
        {
          end (r, 1, "poll failed");
          break;
        }
      struct pollfd *p = (struct pollfd *) fds->data;
      if (p[3].revents)
        {
          end (r, 0, "stopped by a signal");
          break;
        }
      if (p[0].revents)
        read_master (r);
      if (p[1].revents & (POLLERR | POLLHUP))
        end (r, 1, "its session is gone (stdout closed)");
      if (p[2].revents & POLLIN)
        accept_agent (r);
      /* Connections by id, not pointer: one may have gone meanwhile. */
      for (guint i = 0; i < polled->len; i++)
        {
          guint32 id = ((DatcRelayConn *) polled->pdata[i])->id;
          short ev = p[4 + i].revents;
          DatcRelayConn *c = g_hash_table_lookup (r->conns, GUINT_TO_POINTER (id));
          if (c == NULL || ev == 0)
            continue;
          if (ev & POLLOUT)
            flush_conn (r, c);
          c = g_hash_table_lookup (r->conns, GUINT_TO_POINTER (id));
          if (c != NULL && (ev & (POLLIN | POLLHUP | POLLERR)))
            read_agent (r, c);
        }
      flush_up (r);
    }
}

/* ---- main ------------------------------------------------------------------ */

static gchar *
endpoint_of (const char *advertise, const char *listen, guint port)
{
  const char *host = advertise;
  if (host == NULL && listen != NULL && !g_str_equal (listen, "*"))
    host = listen;
  if (host == NULL)
    host = g_get_host_name ();
  if (strchr (host, ':') != NULL)
    return g_strdup_printf ("tcp://[%s]:%u", host, port);
  return g_strdup_printf ("tcp://%s:%u", host, port);
}

int
datc_relay_main (int argc, char **argv)
{
  g_autofree gchar *listen = NULL, *advertise = NULL, *pidfile = NULL;
  gint port = 0, idle_timeout = 30;
  GOptionEntry entries[] = {
    { "listen", 0, 0, G_OPTION_ARG_STRING, &listen,
      "Address agents connect to (default: every address)", "ADDR" },
    { "port", 0, 0, G_OPTION_ARG_INT, &port, "Port (default 0: any free one)", "PORT" },
    { "advertise", 0, 0, G_OPTION_ARG_STRING, &advertise,
      "Host name agents are told (default: ADDR, else this host's name)", "HOST" },
    { "pidfile", 0, 0, G_OPTION_ARG_FILENAME, &pidfile,
      "This relay's pid file; an older relay it names is stopped first", "FILE" },
    { "idle-timeout", 0, 0, G_OPTION_ARG_INT, &idle_timeout,
      "Exit after this long without a word from the master (default 30)", "SECONDS" },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx
      = g_option_context_new ("- carry agents' connections to the master over stdin and stdout");
  g_autoptr (GError) error = NULL;
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      g_printerr ("datc-agent relay: %s\n", error->message);
      return 2;
    }
  if (port < 0 || port > 65535 || idle_timeout < 1 || idle_timeout > 86400 || argc > 1)
    {
      g_printerr ("datc-agent relay: --port 0-65535, --idle-timeout 1-86400, no other arguments\n");
      return 2;
    }

  signal (SIGPIPE, SIG_IGN);
  sigset_t mask;
  sigemptyset (&mask);
  sigaddset (&mask, SIGTERM);
  sigaddset (&mask, SIGINT);
  sigaddset (&mask, SIGHUP);
  sigprocmask (SIG_BLOCK, &mask, NULL);

  take_over (pidfile);
  const char *host = listen != NULL && !g_str_equal (listen, "*") ? listen : NULL;
  guint bound = 0;
  Relay r = { .sig_fd = signalfd (-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK),
              .idle_timeout_s = (guint) idle_timeout,
              .in = g_byte_array_new (),
              .up = g_byte_array_new (),
              .conns = g_hash_table_new_full (NULL, NULL, NULL, datc_relay_conn_free) };
  r.listen_fd = listen_on (host, (guint) port, &bound, &error);
  g_autofree gchar *endpoint = r.listen_fd >= 0 ? endpoint_of (advertise, listen, bound) : NULL;
  if (r.listen_fd >= 0 && pidfile != NULL && !write_pidfile (pidfile, &error))
    {
      close (r.listen_fd);
      r.listen_fd = -1;
    }
  g_byte_array_append (r.up, (const guint8 *) DATC_RELAY_MAGIC, strlen (DATC_RELAY_MAGIC));
  if (r.listen_fd < 0)
    {
      g_printerr ("datc-agent relay: %s\n", error->message);
      frame (&r, DATC_RELAY_ERROR, 0, error->message, MIN (strlen (error->message), 1024));
      fcntl (STDOUT_FILENO, F_SETFL, fcntl (STDOUT_FILENO, F_GETFL) & ~O_NONBLOCK);
      flush_up (&r);
      return 2;
    }
  frame (&r, DATC_RELAY_HELLO, 0, endpoint, strlen (endpoint));
  fcntl (STDIN_FILENO, F_SETFL, fcntl (STDIN_FILENO, F_GETFL) | O_NONBLOCK);
  fcntl (STDOUT_FILENO, F_SETFL, fcntl (STDOUT_FILENO, F_GETFL) | O_NONBLOCK);
  g_printerr ("datc-agent relay: pid %d, agents connect to %s\n", (int) getpid (), endpoint);
  r.last_master_us = g_get_monotonic_time ();
  flush_up (&r);
  loop (&r);

  /* What it cost the login node, for its admins (and bench-relay). */
  struct rusage ru;
  getrusage (RUSAGE_SELF, &ru);
  g_printerr (
      "datc-agent relay: exiting: %s (carried %" G_GUINT64_FORMAT " connections, %" G_GUINT64_FORMAT
      " bytes to the master, %" G_GUINT64_FORMAT " to agents; cpu "
      "%.3f s, max RSS %ld KiB)\n",
      r.ended, r.carried, r.to_master, r.to_agents,
      ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
      ru.ru_maxrss);
  g_hash_table_destroy (r.conns);
  close (r.listen_fd);
  remove_pidfile (pidfile);
  g_byte_array_unref (r.in);
  g_byte_array_unref (r.up);
  close (r.sig_fd);
  return r.status;
}
