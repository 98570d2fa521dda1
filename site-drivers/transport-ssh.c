/* transport-ssh.c: a site reached over SSH, with libssh.
 *
 * Configuration.  The site's `host` is looked up in ~/.ssh/config (and
 * /etc/ssh/ssh_config) the way ssh would: HostName, Port, User,
 * IdentityFile, UserKnownHostsFile, ProxyJump (libssh 0.10 turns it into a
 * ProxyCommand running `ssh -J`).  The site group's `port`, `user`,
 * `identity` and `known_hosts` then override what the config said.
 *
 * One connection per site.  open() only checks the configuration; the first
 * run() or put() connects, and every later one reuses the connection.  A
 * call that finds the connection broken fails with
 * DATC_SITE_ERROR_TRANSPORT and drops it; run() never runs a command twice,
 * because only the caller knows whether that is harmless (site.c retries
 * poll and cancel once; submit is not retried).  The next call connects
 * again: at once after a connection that worked, then, after failed
 * attempts, no sooner than a backoff (0.5 s doubling to 30 s) -- a call in
 * the backoff fails at once with the last attempt's error, so a dead site
 * costs its caller nothing and is not hammered.
 *
 * Trust.  The host key must be in known_hosts already; an unknown or
 * changed key is an error naming the host and the key's SHA256
 * fingerprint, never accepted.  Authentication is by public key only:
 * ssh-agent (SSH_AUTH_SOCK), then the site's `identity` if it has one,
 * else the config's IdentityFiles and ssh's default key files.
 *
 * Commands.  argv is sent as one command line, each word g_shell_quote()d,
 * which the remote login shell runs as `sh -c` would (a POSIX login shell
 * is assumed: csh does not accept newlines inside quotes).  Every blocking
 * libssh call is bounded by what is left of the command's timeout
 * (SSH_OPTIONS_TIMEOUT), and the wait for output is poll() on the socket.
 * On timeout the command is sent KILL (sshd signals the remote shell, not
 * its children), and the channel and the connection are closed: from here
 * a stuck command and a stuck link look the same, and a fresh connection
 * settles it.
 *
 * put() writes over SFTP to a temporary name beside the target, sets the
 * mode, fsyncs (fsync@openssh.com) and renames.  SFTP v3's rename refuses
 * an existing target and libssh 0.10 has no posix-rename call, so
 * replacing a file falls back to `mv -f` (rename(2), still atomic). */

#include "drivers-private.h"

#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <libssh/sftp.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>

/* Backoff between failed connection attempts. */
#define SSH_BACKOFF_FIRST_MS 500
#define SSH_BACKOFF_MAX_MS 30000

/* Bound on each blocking step of put() (connect, each SFTP request): a
 * stalled link, not the size of the file, is what it catches. */
#define SSH_FILE_STEP_TIMEOUT_MS 60000u

/* Largest write to a channel or an SFTP file at once. */
#define SSH_CHUNK (32u * 1024u)

/* Output kept per stream: one byte more than any parser accepts, so an
 * oversized answer still fails its parser (and memory stays bounded). */
#define SSH_OUTPUT_KEEP ((gsize) DATC_SITE_ANSWER_MAX + 1)

typedef struct {
  DatcTransport parent;

  /* From the site's group; NULL: not set there. */
  gchar *host;
  guint port; /* 0: not set */
  gchar *user;
  gchar *identity;
  gchar *known_hosts;

  /* "alias (user@hostname:port)" once a session was configured. */
  gchar *name;

  ssh_session session; /* NULL: not connected */
  sftp_session sftp;   /* opened by the first put() on this connection */

  guint failures;    /* connection attempts failed since the last success */
  gint64 retry_at;   /* monotonic µs; no attempt before this */
  gchar *last_error; /* the last attempt's error message */
} DatcTransportSsh;

static DatcTransportSsh *
ssh_transport (DatcTransport *t)
{
  return (DatcTransportSsh *) t;
}

/* g_set_error that returns FALSE, so a check can fail in one line. */
static gboolean set_error_va (GError **error, gint code, const char *format, ...)
    G_GNUC_PRINTF (3, 4);

static gboolean
set_error_va (GError **error, gint code, const char *format, ...)
{
  va_list args;

  va_start (args, format);
  g_propagate_error (error, g_error_new_valist (DATC_SITE_ERROR, code, format, args));
  va_end (args);
  return FALSE;
}

/* ---- configuration ---------------------------------------------------- */

/* Characters a host or user name may hold.  Nothing a shell would
 * interpret: the host may reach a ProxyCommand through %h. */
static gboolean
name_is_plain (const char *s, gboolean allow_colon)
{
  if (*s == '\0' || *s == '-')
    return FALSE;
  for (const char *p = s; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && strchr ("._-", *p) == NULL && !(allow_colon && *p == ':'))
      return FALSE;
  return TRUE;
}

/* An optional string key; absent is fine, present and empty is not. */
static gboolean
read_key (GKeyFile *config, const char *group, const char *key, gchar **value, GError **error)
{
  g_autoptr (GError) local_error = NULL;
  g_autofree gchar *v = g_key_file_get_string (config, group, key, &local_error);

  if (v == NULL)
    {
      if (g_error_matches (local_error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_KEY_NOT_FOUND))
        return TRUE;
      return set_error_va (error, DATC_SITE_ERROR_CONFIG, "ssh: key '%s': %s", key,
                           local_error->message);
    }
  g_strstrip (v);
  if (*v == '\0')
    return set_error_va (error, DATC_SITE_ERROR_CONFIG, "ssh: key '%s' is empty", key);
  *value = g_steal_pointer (&v);
  return TRUE;
}

/* "~/x" as the user's home would make it; other paths unchanged. */
static gchar *
expand_home (gchar *path)
{
  if (path == NULL || path[0] != '~' || (path[1] != '/' && path[1] != '\0'))
    return path;
  gchar *expanded = g_build_filename (g_get_home_dir (), path + 1, NULL);
  g_free (path);
  return expanded;
}

static gboolean
read_config (DatcTransportSsh *t, GKeyFile *config, const char *group, GError **error)
{
  g_autofree gchar *port = NULL;

  if (!read_key (config, group, "host", &t->host, error)
      || !read_key (config, group, "port", &port, error)
      || !read_key (config, group, "user", &t->user, error)
      || !read_key (config, group, "identity", &t->identity, error)
      || !read_key (config, group, "known_hosts", &t->known_hosts, error))
    return FALSE;

  if (t->host == NULL)
    return set_error_va (error, DATC_SITE_ERROR_CONFIG, "ssh: the site has no 'host'");
  if (!name_is_plain (t->host, TRUE))
    return set_error_va (error, DATC_SITE_ERROR_CONFIG,
                         "ssh: host '%s' is not a host name or address (letters, digits, "
                         "'.', '-', '_', ':'; a user goes in 'user')",
                         t->host);
  if (t->user != NULL && !name_is_plain (t->user, FALSE))
    return set_error_va (error, DATC_SITE_ERROR_CONFIG, "ssh: user '%s' is not a user name",
                         t->user);
  if (port != NULL)
    {
      guint64 n = 0;

      if (!g_ascii_string_to_unsigned (port, 10, 1, 65535, &n, NULL))
        return set_error_va (error, DATC_SITE_ERROR_CONFIG,
                             "ssh: port '%s' is not a number from 1 to 65535", port);
      t->port = (guint) n;
    }
  t->identity = expand_home (t->identity);
  t->known_hosts = expand_home (t->known_hosts);
  return TRUE;
}

/* A new, unconnected session: the host through ssh's config, then the
 * site's overrides.  Also sets t->name for messages. */
static ssh_session
configure_session (DatcTransportSsh *t, GError **error)
{
  ssh_session session = ssh_new ();
  int verbosity = SSH_LOG_NOLOG;
  int yes = 1;
  /* Public key only: no prompt could be answered here. */
  int no = 0;

  if (session == NULL)
    {
      set_error_va (error, DATC_SITE_ERROR_TRANSPORT, "ssh: cannot create a session");
      return NULL;
    }
  if (ssh_options_set (session, SSH_OPTIONS_HOST, t->host) != SSH_OK
      || ssh_options_parse_config (session, NULL) != SSH_OK
      || (t->port != 0 && ssh_options_set (session, SSH_OPTIONS_PORT, &t->port) != SSH_OK)
      || (t->user != NULL && ssh_options_set (session, SSH_OPTIONS_USER, t->user) != SSH_OK)
      || (t->known_hosts != NULL
          && ssh_options_set (session, SSH_OPTIONS_KNOWNHOSTS, t->known_hosts) != SSH_OK)
      || ssh_options_set (session, SSH_OPTIONS_LOG_VERBOSITY, &verbosity) != SSH_OK
      || ssh_options_set (session, SSH_OPTIONS_NODELAY, &yes) != SSH_OK
      || ssh_options_set (session, SSH_OPTIONS_PASSWORD_AUTH, &no) != SSH_OK
      || ssh_options_set (session, SSH_OPTIONS_KBDINT_AUTH, &no) != SSH_OK
      || ssh_options_set (session, SSH_OPTIONS_GSSAPI_AUTH, &no) != SSH_OK)
    {
      set_error_va (error, DATC_SITE_ERROR_CONFIG, "ssh %s: bad option: %s", t->host,
                    ssh_get_error (session));
      ssh_free (session);
      return NULL;
    }

  char *hostname = NULL;
  char *user = NULL;
  unsigned int port = 0;
  (void) ssh_options_get (session, SSH_OPTIONS_HOST, &hostname);
  (void) ssh_options_get (session, SSH_OPTIONS_USER, &user);
  (void) ssh_options_get_port (session, &port);
  g_free (t->name);
  if (hostname != NULL && strcmp (hostname, t->host) != 0)
    t->name = g_strdup_printf ("%s (%s%s%s:%u)", t->host, user != NULL ? user : "",
                               user != NULL ? "@" : "", hostname, port);
  else
    t->name = g_strdup_printf ("%s%s%s:%u", user != NULL ? user : "", user != NULL ? "@" : "",
                               t->host, port);
  ssh_string_free_char (hostname);
  ssh_string_free_char (user);
  return session;
}

/* ---- time ------------------------------------------------------------- */

static gint64
deadline_after_ms (guint ms)
{
  return g_get_monotonic_time () + (gint64) ms * 1000;
}

/* Bounds the next blocking libssh call by the time left.  FALSE when none
 * is left (libssh reads a zero timeout as "forever"). */
static gboolean
bound_by (ssh_session session, gint64 deadline)
{
  gint64 left = deadline - g_get_monotonic_time ();
  long seconds, micros;

  if (left < 1000)
    return FALSE;
  seconds = (long) (left / G_USEC_PER_SEC);
  micros = (long) (left % G_USEC_PER_SEC);
  return ssh_options_set (session, SSH_OPTIONS_TIMEOUT, &seconds) == SSH_OK
         && ssh_options_set (session, SSH_OPTIONS_TIMEOUT_USEC, &micros) == SSH_OK;
}

static gboolean
past (gint64 deadline)
{
  return g_get_monotonic_time () >= deadline - 1000;
}

/* ---- connection ------------------------------------------------------- */

static void
drop_connection (DatcTransportSsh *t)
{
  g_clear_pointer (&t->sftp, sftp_free);
  if (t->session != NULL)
    {
      /* Never let a dead peer hold us: one second to say goodbye. */
      (void) bound_by (t->session, deadline_after_ms (1000));
      ssh_disconnect (t->session);
      ssh_free (t->session);
      t->session = NULL;
    }
}

/* The session is usable: connected and not in an error state. */
static gboolean
session_is_alive (ssh_session session)
{
  return session != NULL && ssh_is_connected (session)
         && (ssh_get_status (session) & (SSH_CLOSED | SSH_CLOSED_ERROR)) == 0;
}

static guint
backoff_ms (guint failures)
{
  guint ms = SSH_BACKOFF_FIRST_MS;

  for (guint i = 1; i < failures && ms < SSH_BACKOFF_MAX_MS; i++)
    ms *= 2;
  return MIN (ms, SSH_BACKOFF_MAX_MS);
}

static char *
key_fingerprint (ssh_key key)
{
  unsigned char *hash = NULL;
  size_t len = 0;

  if (ssh_get_publickey_hash (key, SSH_PUBLICKEY_HASH_SHA256, &hash, &len) != SSH_OK)
    return NULL;
  char *fp = ssh_get_fingerprint_hash (SSH_PUBLICKEY_HASH_SHA256, hash, len);
  ssh_clean_pubkey_hash (&hash);
  return fp;
}

/* The host as known_hosts names it: "host", or "[host]:port" off port 22. */
static gchar *
known_hosts_name (ssh_session session)
{
  char *host = NULL;
  unsigned int port = 22;
  gchar *name;

  (void) ssh_options_get (session, SSH_OPTIONS_HOST, &host);
  (void) ssh_options_get_port (session, &port);
  if (port == 22)
    name = g_strdup (host != NULL ? host : "?");
  else
    name = g_strdup_printf ("[%s]:%u", host != NULL ? host : "?", port);
  ssh_string_free_char (host);
  return name;
}

static gboolean
check_host_key (DatcTransportSsh *t, ssh_session session, GError **error)
{
  ssh_key key = NULL;

  if (ssh_get_server_publickey (session, &key) != SSH_OK)
    return set_error_va (error, DATC_SITE_ERROR_TRANSPORT, "ssh %s: no host key: %s", t->name,
                         ssh_get_error (session));

  char *fp = key_fingerprint (key);
  const char *type = ssh_key_type_to_char (ssh_key_type (key));
  g_autofree gchar *host = known_hosts_name (session);
  char *file = NULL;
  (void) ssh_options_get (session, SSH_OPTIONS_KNOWNHOSTS, &file);
  g_autofree gchar *where = g_strdup_printf ("%s%s", file != NULL ? file : "known_hosts",
                                             " (or /etc/ssh/ssh_known_hosts)");
  enum ssh_known_hosts_e known = ssh_session_is_known_server (session);
  gboolean ok = TRUE;

  switch (known)
    {
    case SSH_KNOWN_HOSTS_OK:
      break;
    case SSH_KNOWN_HOSTS_CHANGED:
      ok = set_error_va (error, DATC_SITE_ERROR_TRANSPORT,
                         "ssh %s: the host key of %s has CHANGED: the server offers %s key "
                         "%s, which is not the key %s holds for it. Someone may be "
                         "intercepting the connection, or the host was reinstalled; ask "
                         "the site's admins before replacing the entry",
                         t->name, host, type, fp != NULL ? fp : "?", where);
      break;
    case SSH_KNOWN_HOSTS_OTHER:
      ok = set_error_va (error, DATC_SITE_ERROR_TRANSPORT,
                         "ssh %s: the host key of %s has CHANGED type: the server offers "
                         "%s key %s, but %s holds a key of another type for it; ask the "
                         "site's admins before adding this one",
                         t->name, host, type, fp != NULL ? fp : "?", where);
      break;
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      ok = set_error_va (error, DATC_SITE_ERROR_TRANSPORT,
                         "ssh %s: the host key of %s is not known: the server offers %s "
                         "key %s, and %s has no entry for it. datc never accepts a host "
                         "key by itself: check the fingerprint with the site, then add "
                         "the key (e.g. log in once with ssh)",
                         t->name, host, type, fp != NULL ? fp : "?", where);
      break;
    case SSH_KNOWN_HOSTS_ERROR:
    default:
      ok = set_error_va (error, DATC_SITE_ERROR_TRANSPORT,
                         "ssh %s: cannot check the host key of %s against %s: %s", t->name, host,
                         where, ssh_get_error (session));
      break;
    }
  ssh_string_free_char (fp);
  ssh_string_free_char (file);
  ssh_key_free (key);
  return ok;
}

static gboolean
authenticate (DatcTransportSsh *t, ssh_session session, GError **error)
{
  g_autoptr (GString) tried = g_string_new (NULL);
  int rc = ssh_userauth_none (session, NULL);

  if (rc == SSH_AUTH_SUCCESS)
    return TRUE;
  if (rc == SSH_AUTH_ERROR)
    goto lost;

  if (t->identity == NULL)
    {
      /* The agent, then the config's IdentityFiles and ssh's defaults. */
      rc = ssh_userauth_publickey_auto (session, NULL, NULL);
      g_string_append (tried, "ssh-agent, the config's IdentityFile and the default keys");
    }
  else
    {
      rc = SSH_AUTH_DENIED;
      if (g_getenv ("SSH_AUTH_SOCK") != NULL)
        {
          rc = ssh_userauth_agent (session, NULL);
          g_string_append (tried, "ssh-agent, ");
        }
      /* An agent that failed (not the session) is as good as a refusal. */
      if (rc != SSH_AUTH_SUCCESS && session_is_alive (session))
        {
          ssh_key key = NULL;
          int import = ssh_pki_import_privkey_file (t->identity, NULL, NULL, NULL, &key);

          if (import != SSH_OK)
            return set_error_va (error, DATC_SITE_ERROR_TRANSPORT,
                                 "ssh %s: cannot use identity %s: %s", t->name, t->identity,
                                 import == SSH_EOF
                                     ? "no such file or not readable"
                                     : "not a private key, or encrypted (load an encrypted "
                                       "key into ssh-agent)");
          rc = ssh_userauth_publickey (session, NULL, key);
          ssh_key_free (key);
          g_string_append (tried, t->identity);
        }
    }
  if (rc == SSH_AUTH_SUCCESS)
    return TRUE;
  if (rc == SSH_AUTH_ERROR)
    goto lost;
  {
    char *user = NULL;
    (void) ssh_options_get (session, SSH_OPTIONS_USER, &user);
    set_error_va (error, DATC_SITE_ERROR_TRANSPORT,
                  "ssh %s: the server refused every key for user %s (tried: %s)", t->name,
                  user != NULL ? user : "?", tried->str);
    ssh_string_free_char (user);
    return FALSE;
  }
lost:
  return set_error_va (error, DATC_SITE_ERROR_TRANSPORT, "ssh %s: authentication failed: %s",
                       t->name, ssh_get_error (session));
}

static gboolean
record_failure (DatcTransportSsh *t, GError *error)
{
  t->failures++;
  t->retry_at = g_get_monotonic_time () + (gint64) backoff_ms (t->failures) * 1000;
  g_free (t->last_error);
  t->last_error = g_strdup (error != NULL ? error->message : "unknown error");
  return FALSE;
}

/* Makes sure t->session is connected, host key checked and authenticated,
 * within `deadline`. */
static gboolean
ensure_connected (DatcTransportSsh *t, gint64 deadline, GError **error)
{
  if (t->session != NULL && session_is_alive (t->session))
    return TRUE;
  drop_connection (t);

  gint64 now = g_get_monotonic_time ();
  if (t->failures > 0 && now < t->retry_at)
    return set_error_va (error, DATC_SITE_ERROR_TRANSPORT,
                         "%s (%u failed connection attempt%s; next one in %" G_GINT64_FORMAT " ms)",
                         t->last_error, t->failures, t->failures > 1 ? "s" : "",
                         (t->retry_at - now + 999) / 1000);

  g_autoptr (GError) local_error = NULL;
  ssh_session session = configure_session (t, &local_error);
  if (session == NULL)
    {
      record_failure (t, local_error);
      g_propagate_error (error, g_steal_pointer (&local_error));
      return FALSE;
    }
  /* Out of time means the login node did not answer in time
   * (DATC_SITE_ERROR_TIMEOUT: its caller may treat a site that hangs
   * apart from one that refuses). */
  if (!bound_by (session, deadline))
    set_error_va (&local_error, DATC_SITE_ERROR_TIMEOUT, "ssh %s: no time left to connect",
                  t->name);
  else if (ssh_connect (session) != SSH_OK)
    set_error_va (&local_error,
                  past (deadline) ? DATC_SITE_ERROR_TIMEOUT : DATC_SITE_ERROR_TRANSPORT,
                  "ssh %s: cannot connect: %s%s", t->name, ssh_get_error (session),
                  past (deadline) ? " (timed out)" : "");
  else if (check_host_key (t, session, &local_error) && bound_by (session, deadline))
    (void) authenticate (t, session, &local_error);
  else if (local_error == NULL)
    set_error_va (&local_error, DATC_SITE_ERROR_TIMEOUT, "ssh %s: no time left to authenticate",
                  t->name);

  if (local_error != NULL)
    {
      ssh_disconnect (session);
      ssh_free (session);
      record_failure (t, local_error);
      g_propagate_error (error, g_steal_pointer (&local_error));
      return FALSE;
    }
  t->session = session;
  t->failures = 0;
  g_clear_pointer (&t->last_error, g_free);
  return TRUE;
}

/* ---- open / close ----------------------------------------------------- */

static DatcTransport *
ssh_open (GKeyFile *config, const char *group, GError **error)
{
  static gsize initialised = 0;

  if (config == NULL || group == NULL)
    {
      set_error_va (error, DATC_SITE_ERROR_CONFIG,
                    "ssh: a site reached over ssh needs its configuration (host, ...)");
      return NULL;
    }
  if (g_once_init_enter (&initialised))
    {
      /* Process-wide and never finalised: sessions come and go. */
      (void) ssh_init ();
      g_once_init_leave (&initialised, 1);
    }

  DatcTransportSsh *t = g_new0 (DatcTransportSsh, 1);
  t->parent.klass = &datc_transport_ssh;
  if (!read_config (t, config, group, error))
    {
      datc_transport_ssh.close (&t->parent);
      return NULL;
    }
  /* Reads ~/.ssh/config now, so t->name is right in every message. */
  ssh_session probe = configure_session (t, error);
  if (probe == NULL)
    {
      datc_transport_ssh.close (&t->parent);
      return NULL;
    }
  ssh_free (probe);
  return &t->parent;
}

static void
ssh_close (DatcTransport *base)
{
  DatcTransportSsh *t = ssh_transport (base);

  if (t == NULL)
    return;
  drop_connection (t);
  g_free (t->host);
  g_free (t->user);
  g_free (t->identity);
  g_free (t->known_hosts);
  g_free (t->name);
  g_free (t->last_error);
  g_free (t);
}

/* ---- run -------------------------------------------------------------- */

static gchar *
command_line (const char *const *argv)
{
  GString *s = g_string_new (NULL);

  for (gsize i = 0; argv[i] != NULL; i++)
    {
      g_autofree gchar *quoted = g_shell_quote (argv[i]);

      if (i > 0)
        g_string_append_c (s, ' ');
      g_string_append (s, quoted);
    }
  return g_string_free (s, FALSE);
}

static int
signal_number (const char *name)
{
  static const struct {
    const char *name;
    int number;
  } table[] = {
    { "ABRT", SIGABRT }, { "ALRM", SIGALRM }, { "BUS", SIGBUS },   { "FPE", SIGFPE },
    { "HUP", SIGHUP },   { "ILL", SIGILL },   { "INT", SIGINT },   { "KILL", SIGKILL },
    { "PIPE", SIGPIPE }, { "QUIT", SIGQUIT }, { "SEGV", SIGSEGV }, { "TERM", SIGTERM },
    { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "XCPU", SIGXCPU }, { "XFSZ", SIGXFSZ },
  };

  for (gsize i = 0; name != NULL && i < G_N_ELEMENTS (table); i++)
    if (strcmp (table[i].name, name) == 0)
      return table[i].number;
  return 0;
}

typedef struct {
  int signal; /* the remote command died of it; 0: none reported */
} ExitSignal;

static void
on_exit_signal (ssh_session session, ssh_channel channel, const char *signal, int core,
                const char *errmsg, const char *lang, void *userdata)
{
  ExitSignal *exit_signal = userdata;
  int n = signal_number (signal);

  exit_signal->signal = n > 0 ? n : 127; /* an unknown signal still is one */
}

/* Appends what `stream` has ready, up to SSH_OUTPUT_KEEP bytes kept.
 * FALSE when the channel failed. */
static gboolean
read_ready (ssh_channel channel, int is_stderr, GByteArray *kept)
{
  char buf[SSH_CHUNK];

  for (;;)
    {
      int n = ssh_channel_read_nonblocking (channel, buf, sizeof buf, is_stderr);

      if (n == SSH_ERROR)
        return FALSE;
      if (n <= 0) /* nothing now, or SSH_EOF */
        return TRUE;
      if (kept->len < SSH_OUTPUT_KEEP)
        g_byte_array_append (kept, (const guint8 *) buf,
                             (guint) MIN ((gsize) n, SSH_OUTPUT_KEEP - kept->len));
    }
}

typedef enum {
  RUN_DONE,
  RUN_TIMEOUT,
  RUN_LOST,
} RunOutcome;

/* Feeds input, collects output until the remote side's EOF, then its exit
 * status.  Everything bounded by `deadline`. */
static RunOutcome
exchange (ssh_session session, ssh_channel channel, GBytes *input, gint64 deadline, GByteArray *out,
          GByteArray *err, const char **why)
{
  gsize in_len = 0;
  const guint8 *in = input != NULL ? g_bytes_get_data (input, &in_len) : NULL;
  gsize in_off = 0;
  gboolean eof_sent = FALSE;
  int fd = ssh_get_fd (session);

  for (;;)
    {
      if (!read_ready (channel, 0, out) || !read_ready (channel, 1, err))
        return *why = "reading output", RUN_LOST;
      if (ssh_channel_is_eof (channel) || ssh_channel_is_closed (channel))
        return RUN_DONE;
      if (!session_is_alive (session))
        return *why = "waiting for output", RUN_LOST;
      if (past (deadline))
        return RUN_TIMEOUT;

      if (!eof_sent)
        {
          /* Never more than the peer's window: a write then never waits
           * for the peer, only for our own socket. */
          gsize n
              = MIN (in_len - in_off, (gsize) MIN (ssh_channel_window_size (channel), SSH_CHUNK));

          if (n > 0)
            {
              if (!bound_by (session, deadline))
                return RUN_TIMEOUT;
              int w = ssh_channel_write (channel, in + in_off, (uint32_t) n);
              if (w < 0)
                return past (deadline) ? RUN_TIMEOUT : (*why = "writing input", RUN_LOST);
              in_off += (gsize) w;
            }
          if (in_off == in_len)
            {
              if (!bound_by (session, deadline))
                return RUN_TIMEOUT;
              if (ssh_channel_send_eof (channel) != SSH_OK)
                return past (deadline) ? RUN_TIMEOUT : (*why = "closing input", RUN_LOST);
              eof_sent = TRUE;
            }
          if (n > 0)
            continue;
        }

      /* Data, a window adjustment or the end: all arrive on the socket. */
      struct pollfd pfd = { .fd = fd, .events = POLLIN };
      gint64 left_ms = (deadline - g_get_monotonic_time ()) / 1000;
      int rc = poll (&pfd, 1, (int) CLAMP (left_ms, 1, 1000));

      if (rc < 0 && errno != EINTR)
        return *why = "waiting for output", RUN_LOST;
    }
}

static gboolean
ssh_run (DatcTransport *base, const char *const *argv, GBytes *input, guint timeout_ms,
         DatcCommandResult *res, GError **error)
{
  DatcTransportSsh *t = ssh_transport (base);

  g_return_val_if_fail (t != NULL && base->klass == &datc_transport_ssh, FALSE);
  g_return_val_if_fail (argv != NULL && argv[0] != NULL, FALSE);
  g_return_val_if_fail (timeout_ms > 0, FALSE);
  g_return_val_if_fail (res != NULL && res->out == NULL && res->err == NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  gint64 deadline = deadline_after_ms (timeout_ms);
  g_autofree gchar *line = command_line (argv);

  if (!ensure_connected (t, deadline, error))
    return FALSE;

  ssh_session session = t->session;
  ssh_channel channel = ssh_channel_new (session);
  ExitSignal exit_signal = { 0 };
  struct ssh_channel_callbacks_struct callbacks = {
    .userdata = &exit_signal,
    .channel_exit_signal_function = on_exit_signal,
  };
  ssh_callbacks_init (&callbacks);

  const char *why = NULL;
  RunOutcome outcome = RUN_LOST;
  g_autoptr (GByteArray) out = g_byte_array_new ();
  g_autoptr (GByteArray) err = g_byte_array_new ();
  int exit_status = -1;

  if (channel == NULL)
    why = "opening a channel";
  else if (!bound_by (session, deadline))
    outcome = RUN_TIMEOUT;
  else if (ssh_channel_open_session (channel) != SSH_OK)
    {
      why = "opening a channel";
      outcome = past (deadline) ? RUN_TIMEOUT : RUN_LOST;
    }
  else if (ssh_set_channel_callbacks (channel, &callbacks) != SSH_OK)
    why = "setting up a channel";
  else if (!bound_by (session, deadline))
    outcome = RUN_TIMEOUT;
  else if (ssh_channel_request_exec (channel, line) != SSH_OK)
    {
      why = "starting the command";
      outcome = past (deadline) ? RUN_TIMEOUT : RUN_LOST;
    }
  else
    {
      outcome = exchange (session, channel, input, deadline, out, err, &why);
      if (outcome == RUN_DONE)
        {
          /* The exit status may trail the EOF; a killed command sends
           * exit-signal instead, and then the wait ends at the close. */
          if (!bound_by (session, deadline))
            outcome = RUN_TIMEOUT;
          else
            {
              exit_status = ssh_channel_get_exit_status (channel);
              if (exit_status < 0 && exit_signal.signal > 0)
                exit_status = 128 + exit_signal.signal;
              else if (exit_status < 0 && !session_is_alive (session))
                outcome = RUN_LOST, why = "waiting for the exit status";
              else if (exit_status < 0 && past (deadline))
                outcome = RUN_TIMEOUT;
            }
        }
    }

  if (outcome == RUN_DONE)
    {
      (void) ssh_remove_channel_callbacks (channel, &callbacks);
      (void) ssh_channel_close (channel);
      ssh_channel_free (channel);
      res->exit_status = exit_status;
      res->out = g_byte_array_free_to_bytes (g_steal_pointer (&out));
      res->err = g_byte_array_free_to_bytes (g_steal_pointer (&err));
      return TRUE;
    }

  g_autofree gchar *command = datc_site_describe_argv (argv);
  if (outcome == RUN_TIMEOUT)
    {
      /* Best effort, a second at most: the link itself may be what hangs. */
      if (channel != NULL && bound_by (session, deadline_after_ms (1000)))
        (void) ssh_channel_request_send_signal (channel, "KILL");
      set_error_va (error, DATC_SITE_ERROR_TIMEOUT,
                    "ssh %s: %s did not finish within %u ms; sent it KILL and closed the "
                    "connection",
                    t->name, command, timeout_ms);
    }
  else
    set_error_va (error, DATC_SITE_ERROR_TRANSPORT,
                  "ssh %s: lost the connection while %s for %s: %s (the next command "
                  "reconnects)",
                  t->name, why != NULL ? why : "running", command, ssh_get_error (session));
  if (channel != NULL)
    {
      (void) ssh_remove_channel_callbacks (channel, &callbacks);
      ssh_channel_free (channel);
    }
  drop_connection (t);
  return FALSE;
}

/* ---- put -------------------------------------------------------------- */

static const char *
sftp_error_text (int code)
{
  switch (code)
    {
    case SSH_FX_OK:
      return "ok";
    case SSH_FX_EOF:
      return "end of file";
    case SSH_FX_NO_SUCH_FILE:
      return "no such file or directory";
    case SSH_FX_PERMISSION_DENIED:
      return "permission denied";
    case SSH_FX_FAILURE:
      return "failure";
    case SSH_FX_BAD_MESSAGE:
      return "bad message";
    case SSH_FX_NO_CONNECTION:
      return "no connection";
    case SSH_FX_CONNECTION_LOST:
      return "connection lost";
    case SSH_FX_OP_UNSUPPORTED:
      return "operation not supported";
    case SSH_FX_FILE_ALREADY_EXISTS:
      return "file already exists";
    case SSH_FX_WRITE_PROTECT:
      return "write protected";
    case SSH_FX_NO_MEDIA:
      return "no media";
    default:
      return "unknown SFTP error";
    }
}

/* Fails put() with what SFTP said, and what the session said when SFTP
 * only knows "failure". */
static gboolean
set_sftp_error (DatcTransportSsh *t, GError **error, const char *doing, const char *path)
{
  int code = t->sftp != NULL ? sftp_get_error (t->sftp) : SSH_FX_OK;
  const char *session_error = t->session != NULL ? ssh_get_error (t->session) : "";
  g_autoptr (GString) why = g_string_new (NULL);

  if (code != SSH_FX_OK)
    g_string_append (why, sftp_error_text (code));
  if ((code == SSH_FX_OK || code == SSH_FX_FAILURE) && *session_error != '\0')
    g_string_append_printf (why, "%s%s", why->len > 0 ? "; " : "", session_error);
  if (why->len == 0)
    g_string_append (why, "no time left or no connection");
  return set_error_va (error, DATC_SITE_ERROR_TRANSPORT, "ssh %s: %s %s: %s", t->name, doing, path,
                       why->str);
}

static gboolean
step (DatcTransportSsh *t)
{
  return t->session != NULL && bound_by (t->session, deadline_after_ms (SSH_FILE_STEP_TIMEOUT_MS));
}

static gboolean
ensure_sftp (DatcTransportSsh *t, GError **error)
{
  if (!ensure_connected (t, deadline_after_ms (SSH_FILE_STEP_TIMEOUT_MS), error))
    return FALSE;
  if (t->sftp != NULL)
    return TRUE;
  if (!step (t))
    return set_error_va (error, DATC_SITE_ERROR_TRANSPORT, "ssh %s: cannot set a timeout", t->name);
  t->sftp = sftp_new (t->session);
  if (t->sftp == NULL || sftp_init (t->sftp) != SSH_OK)
    {
      set_error_va (error, DATC_SITE_ERROR_TRANSPORT,
                    "ssh %s: cannot start SFTP (is the sftp subsystem enabled?): %s", t->name,
                    ssh_get_error (t->session));
      g_clear_pointer (&t->sftp, sftp_free);
      if (!session_is_alive (t->session))
        drop_connection (t);
      return FALSE;
    }
  return TRUE;
}

/* mkdir -p, each new directory 0700 like the local transport's. */
static gboolean
make_parents (DatcTransportSsh *t, const char *dir, GError **error)
{
  if (strcmp (dir, "/") == 0 || strcmp (dir, ".") == 0)
    return TRUE;
  if (!step (t))
    return set_sftp_error (t, error, "checking directory", dir);

  sftp_attributes attr = sftp_stat (t->sftp, dir);
  if (attr != NULL)
    {
      gboolean is_dir = attr->type == SSH_FILEXFER_TYPE_DIRECTORY;
      sftp_attributes_free (attr);
      if (!is_dir)
        return set_error_va (error, DATC_SITE_ERROR_TRANSPORT, "ssh %s: %s is not a directory",
                             t->name, dir);
      return TRUE;
    }
  if (sftp_get_error (t->sftp) != SSH_FX_NO_SUCH_FILE)
    return set_sftp_error (t, error, "checking directory", dir);

  g_autofree gchar *parent = g_path_get_dirname (dir);
  if (strcmp (parent, dir) != 0 && !make_parents (t, parent, error))
    return FALSE;
  if (!step (t))
    return set_sftp_error (t, error, "creating directory", dir);
  if (sftp_mkdir (t->sftp, dir, 0700) != 0)
    {
      /* Someone else may have made it meanwhile. */
      attr = sftp_stat (t->sftp, dir);
      gboolean is_dir = attr != NULL && attr->type == SSH_FILEXFER_TYPE_DIRECTORY;
      sftp_attributes_free (attr);
      if (!is_dir)
        return set_sftp_error (t, error, "creating directory", dir);
    }
  return TRUE;
}

/* Opens a new temporary file beside `path`; *tmp gets its name. */
static sftp_file
open_temporary (DatcTransportSsh *t, const char *dir, const char *base, gchar **tmp, GError **error)
{
  static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

  for (guint attempt = 0; attempt < 5; attempt++)
    {
      char suffix[7];

      for (gsize i = 0; i < sizeof suffix - 1; i++)
        suffix[i] = letters[g_random_int_range (0, (gint32) sizeof letters - 1)];
      suffix[sizeof suffix - 1] = '\0';
      g_free (*tmp);
      *tmp = g_strdup_printf ("%s/.%s.%s", dir, base, suffix);
      if (!step (t))
        break;
      sftp_file file = sftp_open (t->sftp, *tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
      if (file != NULL)
        return file;
      if (sftp_get_error (t->sftp) != SSH_FX_FILE_ALREADY_EXISTS
          && sftp_get_error (t->sftp) != SSH_FX_FAILURE)
        break;
    }
  set_sftp_error (t, error, "creating a temporary file", *tmp);
  return NULL;
}

static gboolean
write_file (DatcTransportSsh *t, sftp_file file, GBytes *data, const char *tmp, GError **error)
{
  gsize len = 0;
  const guint8 *bytes = g_bytes_get_data (data, &len);

  for (gsize off = 0; off < len;)
    {
      if (!step (t))
        return set_sftp_error (t, error, "writing", tmp);
      ssize_t n = sftp_write (file, bytes + off, MIN (len - off, (gsize) SSH_CHUNK));
      if (n <= 0)
        return set_sftp_error (t, error, "writing", tmp);
      off += (gsize) n;
    }
  return TRUE;
}

/* SFTP v3 rename refuses an existing target: replace it with mv, whose
 * rename(2) is atomic. */
static gboolean
replace (DatcTransportSsh *t, const char *tmp, const char *path, GError **error)
{
  if (step (t) && sftp_rename (t->sftp, tmp, path) == 0)
    return TRUE;
  if (!session_is_alive (t->session))
    return set_sftp_error (t, error, "renaming a temporary file to", path);

  const char *argv[] = { "mv", "-f", "--", tmp, path, NULL };
  g_auto (DatcCommandResult) res = { 0 };
  if (!ssh_run (&t->parent, argv, NULL, SSH_FILE_STEP_TIMEOUT_MS, &res, error))
    return FALSE;
  if (res.exit_status != 0)
    {
      g_autofree gchar *quoted = datc_site_quote_output (res.err);
      return set_error_va (error, DATC_SITE_ERROR_TRANSPORT,
                           "ssh %s: renaming a temporary file to %s: %s", t->name, path, quoted);
    }
  return TRUE;
}

/* After a failed put: the temporary file goes if the link still works;
 * a dead link is dropped so the next call reconnects. */
static void
put_failed (DatcTransportSsh *t, const char *tmp)
{
  if (t->session == NULL)
    return;
  if (!session_is_alive (t->session))
    {
      drop_connection (t);
      return;
    }
  if (tmp != NULL && t->sftp != NULL && step (t))
    (void) sftp_unlink (t->sftp, tmp);
}

static gboolean
ssh_put (DatcTransport *base, GBytes *data, const char *path, int mode, GError **error)
{
  DatcTransportSsh *t = ssh_transport (base);

  g_return_val_if_fail (t != NULL && base->klass == &datc_transport_ssh, FALSE);
  g_return_val_if_fail (data != NULL, FALSE);
  g_return_val_if_fail (path != NULL && *path != '\0', FALSE);
  g_return_val_if_fail (mode >= 0 && mode <= 07777, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  g_autofree gchar *dir = g_path_get_dirname (path);
  g_autofree gchar *name = g_path_get_basename (path);
  g_autofree gchar *tmp = NULL;

  if (!ensure_sftp (t, error))
    return FALSE;
  if (!make_parents (t, dir, error))
    {
      put_failed (t, NULL);
      return FALSE;
    }
  sftp_file file = open_temporary (t, dir, name, &tmp, error);
  if (file == NULL)
    {
      put_failed (t, NULL);
      return FALSE;
    }

  gboolean ok = write_file (t, file, data, tmp, error);
  if (ok && sftp_extension_supported (t->sftp, "fsync@openssh.com", "1")
      && (!step (t) || sftp_fsync (file) != 0))
    ok = set_sftp_error (t, error, "syncing", tmp);
  /* Always closed (that frees it), bounded even on a dead link.  A failed
   * close after good writes still means the file may be incomplete. */
  (void) bound_by (t->session, deadline_after_ms (ok ? SSH_FILE_STEP_TIMEOUT_MS : 1000));
  if (sftp_close (file) != SSH_NO_ERROR && ok)
    ok = set_sftp_error (t, error, "closing", tmp);
  /* Explicitly: the mode given at open went through the server's umask. */
  if (ok && (!step (t) || sftp_chmod (t->sftp, tmp, (mode_t) mode) != 0))
    ok = set_sftp_error (t, error, "setting the mode of", tmp);
  if (ok)
    ok = replace (t, tmp, path, error);

  if (!ok)
    put_failed (t, tmp);
  return ok;
}

/* ---- stream ------------------------------------------------------------ */

#define STREAM_STDERR_KEEP (64u * 1024u)

typedef struct {
  DatcSiteStream parent;
  DatcTransportSsh *t;
  ssh_channel channel;
  GString *stderr_text;
} SshStream;

static void
stream_drain_stderr (SshStream *ss)
{
  char buf[4096];
  int n;

  while ((n = ssh_channel_read_nonblocking (ss->channel, buf, sizeof buf, 1)) > 0)
    if (ss->stderr_text->len < STREAM_STDERR_KEEP)
      g_string_append_len (ss->stderr_text, buf,
                           MIN ((gsize) n, STREAM_STDERR_KEEP - ss->stderr_text->len));
}

static int
ssh_stream_fd (DatcSiteStream *s)
{
  return ssh_get_fd (((SshStream *) s)->t->session);
}

static gssize
ssh_stream_read (DatcSiteStream *s, guint8 *buf, gsize len, GError **error)
{
  SshStream *ss = (SshStream *) s;
  /* Reading handles what waits on the socket (window adjustments, the
   * peer's keepalives) without blocking, stderr first. */
  stream_drain_stderr (ss);
  int n = ssh_channel_read_nonblocking (ss->channel, buf, (uint32_t) MIN (len, SSH_CHUNK), 0);

  if (n > 0)
    return n;
  if (n == 0 && !ssh_channel_is_eof (ss->channel) && !ssh_channel_is_closed (ss->channel)
      && session_is_alive (ss->t->session))
    return 0;
  if (n == 0 || n == SSH_EOF || ssh_channel_is_eof (ss->channel))
    set_error_va (error, DATC_SITE_ERROR_TRANSPORT, "ssh %s: the command ended", ss->t->name);
  else
    set_error_va (error, DATC_SITE_ERROR_TRANSPORT, "ssh %s: lost the connection: %s", ss->t->name,
                  ssh_get_error (ss->t->session));
  return -1;
}

static gboolean
ssh_stream_write (DatcSiteStream *s, const guint8 *buf, gsize len, guint timeout_ms, GError **error)
{
  SshStream *ss = (SshStream *) s;
  gint64 deadline = deadline_after_ms (timeout_ms);
  gsize off = 0;

  while (off < len)
    {
      if (!bound_by (ss->t->session, deadline))
        return set_error_va (error, DATC_SITE_ERROR_TIMEOUT,
                             "ssh %s: the command took no input for %u ms", ss->t->name,
                             timeout_ms);
      int w = ssh_channel_write (ss->channel, buf + off, (uint32_t) MIN (len - off, SSH_CHUNK));
      if (w < 0)
        return set_error_va (error,
                             past (deadline) ? DATC_SITE_ERROR_TIMEOUT : DATC_SITE_ERROR_TRANSPORT,
                             "ssh %s: lost the connection while writing: %s", ss->t->name,
                             ssh_get_error (ss->t->session));
      off += (gsize) w;
    }
  return TRUE;
}

static gchar *
ssh_stream_take_stderr (DatcSiteStream *s)
{
  SshStream *ss = (SshStream *) s;

  if (session_is_alive (ss->t->session))
    stream_drain_stderr (ss);
  if (ss->stderr_text->len == 0)
    return NULL;
  gchar *text = g_strdup (ss->stderr_text->str);
  g_string_truncate (ss->stderr_text, 0);
  return text;
}

/* EOF on its stdin, up to timeout_ms for it to end, then the connection
 * goes (sshd ends what it ran). */
static void
ssh_stream_close (DatcSiteStream *s, guint timeout_ms)
{
  SshStream *ss = (SshStream *) s;
  gint64 deadline = deadline_after_ms (timeout_ms);

  if (session_is_alive (ss->t->session) && bound_by (ss->t->session, deadline))
    {
      (void) ssh_channel_send_eof (ss->channel);
      char sink[4096];
      while (!past (deadline) && session_is_alive (ss->t->session)
             && !ssh_channel_is_eof (ss->channel) && !ssh_channel_is_closed (ss->channel))
        {
          stream_drain_stderr (ss);
          if (ssh_channel_read_nonblocking (ss->channel, sink, sizeof sink, 0) < 0)
            break;
          struct pollfd p = { ssh_get_fd (ss->t->session), POLLIN, 0 };
          (void) poll (&p, 1, 50);
        }
    }
  ssh_channel_free (ss->channel);
  drop_connection (ss->t);
  g_string_free (ss->stderr_text, TRUE);
  g_free (ss);
}

static const DatcSiteStreamClass ssh_stream_class = {
  .fd = ssh_stream_fd,
  .read = ssh_stream_read,
  .write = ssh_stream_write,
  .take_stderr = ssh_stream_take_stderr,
  .close = ssh_stream_close,
};

static DatcSiteStream *
ssh_stream (DatcTransport *base, const char *const *argv, guint timeout_ms, GError **error)
{
  DatcTransportSsh *t = ssh_transport (base);
  gint64 deadline = deadline_after_ms (timeout_ms);
  g_autofree gchar *line = command_line (argv);

  /* A fresh connection: a stream must not inherit a half-dead one. */
  drop_connection (t);
  t->failures = 0;
  if (!ensure_connected (t, deadline, error))
    return NULL;
  ssh_channel channel = ssh_channel_new (t->session);
  const char *why = NULL;

  if (channel == NULL)
    why = "opening a channel";
  else if (!bound_by (t->session, deadline) || ssh_channel_open_session (channel) != SSH_OK)
    why = "opening a channel";
  else if (!bound_by (t->session, deadline) || ssh_channel_request_exec (channel, line) != SSH_OK)
    why = "starting the command";
  if (why != NULL)
    {
      g_autofree gchar *command = datc_site_describe_argv (argv);
      set_error_va (error, past (deadline) ? DATC_SITE_ERROR_TIMEOUT : DATC_SITE_ERROR_TRANSPORT,
                    "ssh %s: %s for %s: %s", t->name, why, command, ssh_get_error (t->session));
      if (channel != NULL)
        ssh_channel_free (channel);
      drop_connection (t);
      return NULL;
    }
  SshStream *ss = g_new0 (SshStream, 1);
  ss->parent.klass = &ssh_stream_class;
  ss->t = t;
  ss->channel = channel;
  ss->stderr_text = g_string_new (NULL);
  return &ss->parent;
}

const DatcTransportClass datc_transport_ssh = {
  .name = "ssh",
  .open = ssh_open,
  .run = ssh_run,
  .put = ssh_put,
  .stream = ssh_stream,
  .close = ssh_close,
};
