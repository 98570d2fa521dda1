/* transport-local.c: the embedded local site runs commands on this host.
 *
 * run() spawns argv with GSubprocess (no shell), stdin from a copy of the
 * input in an unlinked file (never a pipe: see input_fd), collects
 * stdout and stderr, and iterates a private GMainContext until the command
 * is done or a timeout source fires.  A private context keeps the call
 * synchronous without touching whatever loop the caller runs.
 *
 * Each command starts in a process group of its own, so a timeout kills
 * everything it started (a `sh -c` and its children), not just argv[0],
 * which would leave the grandchildren running after the call gave up.
 * Processes that leave that group on purpose (the fork scheduler's
 * setsid) are not touched.
 *
 * put() is the classic durable replace: temp file in the same directory,
 * write, fchmod (so the mode is exact whatever the umask), fsync, rename,
 * then fsync the directory. */

#include "drivers-private.h"

#include <gio/gio.h>
#include <glib/gstdio.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  DatcTransport parent;
} DatcTransportLocal;

static DatcTransport *
local_open (GKeyFile *config, const char *group, GError **error)
{
  DatcTransportLocal *t = g_new0 (DatcTransportLocal, 1);

  t->parent.klass = &datc_transport_local;
  return &t->parent;
}

static void
local_close (DatcTransport *t)
{
  g_free ((DatcTransportLocal *) t);
}

/* ---- helpers ---------------------------------------------------------- */

static gboolean
set_errno_error (GError **error, int saved_errno, const char *doing, const char *path)
{
  g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT, "%s %s: %s", doing, path,
               g_strerror (saved_errno));
  return FALSE;
}

static gboolean
write_all (int fd, const guint8 *data, gsize len, const char *path, GError **error)
{
  while (len > 0)
    {
      ssize_t n = write (fd, data, len);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return set_errno_error (error, errno, "writing", path);
      data += n;
      len -= (gsize) n;
    }
  return TRUE;
}

/* ---- run -------------------------------------------------------------- */

/* Runs in the child between fork and exec: only async-signal-safe calls.
 * It reports the new group's id through a shared page because the parent
 * cannot ask GSubprocess: a quick command may already have been reaped,
 * and its identifier cleared, by the time spawn returns.
 *
 * The child also gets back the soft RLIMIT_NOFILE the master started with
 * (datc_transport_local_set_child_fd_limit).
 *
 * A blocked mask and ignored dispositions survive exec: the master blocks
 * TERM, INT and HUP (for its signalfd) and ignores PIPE, and a proxy
 * started by the fork scheduler would otherwise shrug off the TERM that
 * cancels it. */
static guint64 child_fd_limit; /* 0: as inherited */

void
datc_transport_local_set_child_fd_limit (guint64 soft)
{
  child_fd_limit = soft;
}

static void
child_enter_own_group (gpointer user_data)
{
  volatile pid_t *report = user_data;
  sigset_t none;
  struct rlimit lim;

  if (child_fd_limit != 0 && getrlimit (RLIMIT_NOFILE, &lim) == 0)
    {
      lim.rlim_cur = lim.rlim_max != RLIM_INFINITY && lim.rlim_max < child_fd_limit
                         ? lim.rlim_max
                         : (rlim_t) child_fd_limit;
      (void) setrlimit (RLIMIT_NOFILE, &lim);
    }
  sigemptyset (&none);
  (void) sigprocmask (SIG_SETMASK, &none, NULL);
  (void) signal (SIGPIPE, SIG_DFL);
  (void) setpgid (0, 0);
  *report = getpid ();
}

/* Spawns argv in a group of its own; *group is that group's id, or 0 if
 * the child could not say (then there is no group to kill). */
static GSubprocess *
spawn_in_own_group (GSubprocessLauncher *launcher, const char *const *argv, pid_t *group,
                    GError **error)
{
  volatile pid_t *report
      = mmap (NULL, sizeof *report, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  g_autoptr (GError) spawn_error = NULL;

  if (report == MAP_FAILED)
    {
      set_errno_error (error, errno, "mapping a page to spawn", argv[0]);
      return NULL;
    }
  *report = 0;
  g_subprocess_launcher_set_child_setup (launcher, child_enter_own_group, (gpointer) report, NULL);

  GSubprocess *proc
      = g_subprocess_launcher_spawnv (launcher, (const gchar *const *) argv, &spawn_error);
  *group = *report;
  (void) munmap ((void *) report, sizeof *report);
  if (proc == NULL)
    g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT, "cannot run %s: %s", argv[0],
                 spawn_error->message);
  return proc;
}

typedef struct {
  GSubprocess *proc;
  pid_t group;
  GCancellable *cancellable;
  GAsyncResult *result;
  gboolean timed_out;
} LocalRun;

static void
on_communicated (GObject *source, GAsyncResult *result, gpointer user_data)
{
  LocalRun *run = user_data;

  run->result = g_object_ref (result);
}

static gboolean
on_timeout (gpointer user_data)
{
  LocalRun *run = user_data;

  run->timed_out = TRUE;
  /* Even when argv[0] has exited and been reaped: what is left of its group
   * may be what holds the output open.  A group id is not reused while the
   * group has a member, so this can only miss, not hit a stranger, unless
   * the whole group died and its number came round again meanwhile. */
  if (run->group > 1) /* kill(-0) would be our own group */
    (void) kill (-run->group, SIGKILL);
  g_subprocess_force_exit (run->proc);
  g_cancellable_cancel (run->cancellable);
  return G_SOURCE_REMOVE;
}

/* The command's stdin: a copy of `input` in an unlinked file, read from
 * the start.  Not a pipe: a command that exits without reading its input
 * would make our write raise SIGPIPE, which kills the master unless it
 * ignores that signal. */
static int
input_fd (GBytes *input, GError **error)
{
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (input, &len);
  int fd = -1;

#ifdef __linux__
  fd = memfd_create ("datc-stdin", MFD_CLOEXEC);
#endif
  if (fd < 0)
    {
      g_autofree gchar *path = NULL;
      g_autoptr (GError) tmp_error = NULL;

      fd = g_file_open_tmp ("datc-stdin-XXXXXX", &path, &tmp_error);
      if (fd < 0)
        {
          g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT,
                       "cannot hold a command's input: %s", tmp_error->message);
          return -1;
        }
      (void) g_unlink (path);
    }
  if (!write_all (fd, data, len, "a command's input", error))
    {
      (void) close (fd);
      return -1;
    }
  if (lseek (fd, 0, SEEK_SET) != 0)
    {
      set_errno_error (error, errno, "rewinding", "a command's input");
      (void) close (fd);
      return -1;
    }
  return fd;
}

static gint
exit_status_of (GSubprocess *proc)
{
  if (g_subprocess_get_if_exited (proc))
    return g_subprocess_get_exit_status (proc);
  if (g_subprocess_get_if_signaled (proc))
    return 128 + g_subprocess_get_term_sig (proc); /* as a shell reports it */
  return -1;
}

static gboolean
local_run (DatcTransport *t, const char *const *argv, GBytes *input, guint timeout_ms,
           DatcCommandResult *res, GError **error)
{
  g_return_val_if_fail (t != NULL && t->klass == &datc_transport_local, FALSE);
  g_return_val_if_fail (argv != NULL && argv[0] != NULL, FALSE);
  g_return_val_if_fail (timeout_ms > 0, FALSE);
  g_return_val_if_fail (res != NULL && res->out == NULL && res->err == NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  /* Without a stdin fd or flag GSubprocess gives the child /dev/null. */
  g_autoptr (GSubprocessLauncher) launcher
      = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE);
  if (input != NULL)
    {
      int fd = input_fd (input, error);
      if (fd < 0)
        return FALSE;
      g_subprocess_launcher_take_stdin_fd (launcher, fd);
    }

  pid_t group = 0;
  g_autoptr (GSubprocess) proc = spawn_in_own_group (launcher, argv, &group, error);
  if (proc == NULL)
    return FALSE;

  g_autoptr (GMainContext) context = g_main_context_new ();
  g_autoptr (GMainContextPusher) pusher G_GNUC_UNUSED = g_main_context_pusher_new (context);
  g_autoptr (GCancellable) cancellable = g_cancellable_new ();
  LocalRun run = {
    .proc = proc,
    .group = group,
    .cancellable = cancellable,
  };

  g_subprocess_communicate_async (proc, NULL, cancellable, on_communicated, &run);

  g_autoptr (GSource) timeout = g_timeout_source_new (timeout_ms);
  g_source_set_callback (timeout, on_timeout, &run, NULL);
  g_source_attach (timeout, context);

  /* Wait for the callback even after a timeout: the operation holds `run`
   * until it reports, cancelled or not. */
  while (run.result == NULL)
    g_main_context_iteration (context, TRUE);
  g_source_destroy (timeout);

  g_autoptr (GAsyncResult) result = g_steal_pointer (&run.result);
  g_autoptr (GBytes) out = NULL;
  g_autoptr (GBytes) err = NULL;
  g_autoptr (GError) io_error = NULL;
  gboolean done = g_subprocess_communicate_finish (proc, result, &out, &err, &io_error);

  if (run.timed_out)
    {
      g_autofree gchar *command = datc_site_describe_argv (argv);

      /* Killed above; reap it so no zombie outlives the call. */
      (void) g_subprocess_wait (proc, NULL, NULL);
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TIMEOUT,
                   "%s did not finish within %u ms; killed it", command, timeout_ms);
      return FALSE;
    }
  if (!done)
    {
      g_autofree gchar *command = datc_site_describe_argv (argv);

      g_subprocess_force_exit (proc);
      (void) g_subprocess_wait (proc, NULL, NULL);
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT, "talking to %s: %s", command,
                   io_error->message);
      return FALSE;
    }

  res->exit_status = exit_status_of (proc);
  res->out = out != NULL ? g_steal_pointer (&out) : g_bytes_new (NULL, 0);
  res->err = err != NULL ? g_steal_pointer (&err) : g_bytes_new (NULL, 0);
  return TRUE;
}

/* ---- put -------------------------------------------------------------- */

/* Everything between creating the temp file and renaming it; closes fd. */
static gboolean
fill_and_close (int fd, GBytes *data, int mode, const char *tmp, GError **error)
{
  gsize len = 0;
  const guint8 *bytes = g_bytes_get_data (data, &len);
  gboolean ok = write_all (fd, bytes, len, tmp, error);

  if (ok && fchmod (fd, (mode_t) mode) != 0)
    ok = set_errno_error (error, errno, "setting the mode of", tmp);
  if (ok && fsync (fd) != 0)
    ok = set_errno_error (error, errno, "syncing", tmp);
  /* On Linux the descriptor is gone even when close() says EINTR. */
  if (close (fd) != 0 && errno != EINTR && ok)
    ok = set_errno_error (error, errno, "closing", tmp);
  return ok;
}

/* Makes the rename itself durable.  Some file systems refuse fsync on a
 * directory; the data is already safe then, so this is best effort. */
static void
sync_directory (const char *dir)
{
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0)
    return;
  (void) fsync (fd);
  (void) close (fd);
}

static gboolean
local_put (DatcTransport *t, GBytes *data, const char *path, int mode, GError **error)
{
  g_return_val_if_fail (t != NULL && t->klass == &datc_transport_local, FALSE);
  g_return_val_if_fail (data != NULL, FALSE);
  g_return_val_if_fail (path != NULL && *path != '\0', FALSE);
  g_return_val_if_fail (mode >= 0 && mode <= 07777, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  g_autofree gchar *dir = g_path_get_dirname (path);
  g_autofree gchar *base = g_path_get_basename (path);

  if (g_mkdir_with_parents (dir, 0700) != 0)
    return set_errno_error (error, errno, "creating directory", dir);

  g_autofree gchar *tmp = g_strdup_printf ("%s/.%s.XXXXXX", dir, base);
  int fd = g_mkstemp_full (tmp, O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0)
    return set_errno_error (error, errno, "creating a temporary file beside", path);

  if (!fill_and_close (fd, data, mode, tmp, error))
    {
      (void) unlink (tmp);
      return FALSE;
    }
  if (rename (tmp, path) != 0)
    {
      int saved_errno = errno;

      (void) unlink (tmp);
      return set_errno_error (error, saved_errno, "renaming a temporary file to", path);
    }
  sync_directory (dir);
  return TRUE;
}

/* ---- stream ------------------------------------------------------------ */

#define STREAM_STDERR_KEEP (64u * 1024u)

typedef struct {
  DatcSiteStream parent;
  GPid pid;         /* also its process group */
  int in, out, err; /* its stdin (ours to write), stdout, stderr; -1 once closed */
  GString *stderr_text;
  gboolean reaped;
} LocalStream;

static void
stream_child_setup (gpointer user_data)
{
  static volatile pid_t unused;
  child_enter_own_group ((gpointer) &unused);
}

static void
drain_stderr (LocalStream *ls)
{
  char buf[4096];
  ssize_t n;

  while (ls->err >= 0 && (n = read (ls->err, buf, sizeof buf)) > 0)
    if (ls->stderr_text->len < STREAM_STDERR_KEEP)
      g_string_append_len (ls->stderr_text, buf,
                           MIN ((gsize) n, STREAM_STDERR_KEEP - ls->stderr_text->len));
}

static int
local_stream_fd (DatcSiteStream *s)
{
  return ((LocalStream *) s)->out;
}

static gssize
local_stream_read (DatcSiteStream *s, guint8 *buf, gsize len, GError **error)
{
  LocalStream *ls = (LocalStream *) s;

  drain_stderr (ls);
  ssize_t n = read (ls->out, buf, len);
  if (n > 0)
    return n;
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return 0;
  g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT, "the command %s",
               n == 0 ? "ended (its stdout closed)" : g_strerror (errno));
  return -1;
}

static gboolean
local_stream_write (DatcSiteStream *s, const guint8 *buf, gsize len, guint timeout_ms,
                    GError **error)
{
  LocalStream *ls = (LocalStream *) s;
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  gsize off = 0;

  while (off < len)
    {
      ssize_t n = write (ls->in, buf + off, len - off);
      if (n > 0)
        {
          off += (gsize) n;
          continue;
        }
      if (n < 0 && errno != EAGAIN && errno != EINTR)
        return set_errno_error (error, errno, "writing to", "the command's stdin");
      gint64 left_ms = (deadline - g_get_monotonic_time ()) / 1000;
      if (left_ms <= 0)
        {
          g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TIMEOUT,
                       "the command took no input for %u ms", timeout_ms);
          return FALSE;
        }
      struct pollfd p = { ls->in, POLLOUT, 0 };
      (void) poll (&p, 1, (int) MIN (left_ms, 1000));
    }
  return TRUE;
}

static gchar *
local_stream_take_stderr (DatcSiteStream *s)
{
  LocalStream *ls = (LocalStream *) s;

  drain_stderr (ls);
  if (ls->stderr_text->len == 0)
    return NULL;
  gchar *text = g_strdup (ls->stderr_text->str);
  g_string_truncate (ls->stderr_text, 0);
  return text;
}

/* Reaps it within timeout_ms, else KILLs its group and reaps it. */
static void
local_stream_close (DatcSiteStream *s, guint timeout_ms)
{
  LocalStream *ls = (LocalStream *) s;
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;

  if (ls->in >= 0)
    close (ls->in);
  while (!ls->reaped)
    {
      int status;
      pid_t r = waitpid (ls->pid, &status, WNOHANG);
      if (r == ls->pid || (r < 0 && errno != EINTR))
        ls->reaped = TRUE;
      else if (g_get_monotonic_time () >= deadline)
        {
          (void) kill (-ls->pid, SIGKILL);
          (void) waitpid (ls->pid, &status, 0);
          ls->reaped = TRUE;
        }
      else
        {
          /* Its stdout ends when it exits: wait on that, not a clock. */
          drain_stderr (ls);
          struct pollfd p = { ls->out, POLLIN, 0 };
          char sink[4096];
          if (poll (&p, 1, 50) > 0 && read (ls->out, sink, sizeof sink) <= 0)
            {
              (void) waitpid (ls->pid, &status, 0);
              ls->reaped = TRUE;
            }
        }
    }
  close (ls->out);
  if (ls->err >= 0)
    close (ls->err);
  g_string_free (ls->stderr_text, TRUE);
  g_free (ls);
}

static const DatcSiteStreamClass local_stream_class = {
  .fd = local_stream_fd,
  .read = local_stream_read,
  .write = local_stream_write,
  .take_stderr = local_stream_take_stderr,
  .close = local_stream_close,
};

static DatcSiteStream *
local_stream (DatcTransport *t, const char *const *argv, guint timeout_ms, GError **error)
{
  LocalStream *ls = g_new0 (LocalStream, 1);
  g_autoptr (GError) spawn_error = NULL;

  ls->parent.klass = &local_stream_class;
  if (!g_spawn_async_with_pipes_and_fds (
          NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_CLOEXEC_PIPES, stream_child_setup,
          NULL, -1, -1, -1, NULL, NULL, 0, &ls->pid, &ls->in, &ls->out, &ls->err, &spawn_error))
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT, "cannot run %s: %s", argv[0],
                   spawn_error->message);
      g_free (ls);
      return NULL;
    }
  ls->stderr_text = g_string_new (NULL);
  (void) fcntl (ls->in, F_SETFL, fcntl (ls->in, F_GETFL) | O_NONBLOCK);
  (void) fcntl (ls->out, F_SETFL, fcntl (ls->out, F_GETFL) | O_NONBLOCK);
  (void) fcntl (ls->err, F_SETFL, fcntl (ls->err, F_GETFL) | O_NONBLOCK);
  return &ls->parent;
}

const DatcTransportClass datc_transport_local = {
  .name = "local",
  .open = local_open,
  .run = local_run,
  .put = local_put,
  .stream = local_stream,
  .close = local_close,
};
