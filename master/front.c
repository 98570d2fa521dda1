/* front.c: `datc`, the command users type.  It answers one thing itself,
 * `datc status [DIR] [--agents]` while a master runs the campaign, and
 * hands everything else to the full datc (datc-full, main.c), exec'd in
 * place with the same arguments: same pid, same exit status, same output.
 *
 * Why a front.  `datc status` is run often (scripts, `watch`, the
 * benchmarks' once a second) and mostly while the master is busiest.  The
 * full datc loads 34 shared libraries (libzmq, GLib, json-glib, libssh and
 * theirs) before main(): 7 ms of CPU for a status, where this front, in
 * libc alone, takes well under 1; and on a core the master keeps busy,
 * each millisecond of CPU is several of waiting for it (benchmarks/README.md,
 * "A status that costs less").  So the master renders the text
 * ("format":"text", status.c) and this reads it over ZMTP in plain C
 * (zmtp.c, textreply.c).
 *
 * What it leaves to the full datc, untouched: every other command, status
 * with any other option (--json, --watch, --help...), no master running
 * (the journal is read offline), a DIR that is not plainly a campaign
 * directory, a socket path too long for the kernel (the full datc puts it
 * elsewhere), a directory another user could write to (the full datc says
 * why it refuses), and any reply it does not expect: those cost one exec
 * more, as before this front existed.  It gives its own answer only for a
 * master that took the request and then did not answer in time, in the
 * full datc's words.
 *
 * Why static (meson.build links it so).  Starting a dynamically linked
 * program maps ld.so and libc.so, and mapping a file takes the write side
 * of the lock on that file's mappings.  Anything that walks the mappings
 * of a page of libc holds the read side, and may be preempted while it
 * does: here the kernel's DAMON monitor (kdamond, on these VMs) was found
 * holding libc's while it waited for a core behind 1,000 agents, and every
 * exec of a dynamic program on the machine, this front's among them, waited
 * up to 1.6 s (benchmarks/README.md, "Why the front is static"; those
 * agents were dynamically linked, so the walk covered 1,000 mappings of
 * libc: "Static agents").  A static
 * front maps only its own file, which nothing else maps; it also starts in
 * less CPU (0.37-0.40 ms against 0.51-0.64). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "textreply.h"
#include "zmtp.h"

#define EXIT_OK 0
#define EXIT_CANNOT 3
/* As the full datc's: commands.c CALL_TIMEOUT_MS, control.c. */
#define CALL_TIMEOUT_MS 30000
/* As commands.c STATUS_TEXT_AGENTS: the text lists 20 agents. */
#define STATUS_TEXT_AGENTS 20

/* TRUE when a master holds DIR's lock (control.c's test, in libc). */
static bool
master_running (const char *dir)
{
  char lock[PATH_MAX];
  if (snprintf (lock, sizeof lock, "%s/lock", dir) >= (int) sizeof lock)
    return false;
  int fd = open (lock, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  bool running = flock (fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close (fd);
  return running;
}

static bool
still_running (void *dir)
{
  return master_running (dir);
}

/* DIR made absolute and cleaned of ".", ".." and doubled slashes without
 * looking at the disk, as g_canonicalize_filename does (the master named
 * its socket so): false when it does not fit. */
static bool
canonical_dir (const char *dir, char *out, size_t size)
{
  char joined[PATH_MAX * 2];
  if (dir[0] == '/')
    {
      if (snprintf (joined, sizeof joined, "%s", dir) >= (int) sizeof joined)
        return false;
    }
  else
    {
      char cwd[PATH_MAX];
      if (getcwd (cwd, sizeof cwd) == NULL
          || snprintf (joined, sizeof joined, "%s/%s", cwd, dir) >= (int) sizeof joined)
        return false;
    }
  size_t n = 0;
  const char *p = joined;
  while (*p != '\0')
    {
      while (*p == '/')
        p++;
      const char *end = strchr (p, '/');
      size_t len = end != NULL ? (size_t) (end - p) : strlen (p);
      bool dot = len == 1 && p[0] == '.';
      if (len == 0 || dot)
        {
          /* nothing to add */
        }
      else if (len == 2 && p[0] == '.' && p[1] == '.')
        {
          while (n > 0 && out[n - 1] != '/')
            n--;
          if (n > 0)
            n--; /* the slash before it */
        }
      else
        {
          if (n + 1 + len + 1 > size)
            return false;
          out[n++] = '/';
          memcpy (out + n, p, len);
          n += len;
        }
      p += len;
    }
  if (n == 0)
    out[n++] = '/';
  out[n] = '\0';
  return true;
}

/* The campaign directory's control socket may be trusted: a directory of
 * this user's that no one else can write to (campaign.c check_socket_dir;
 * anything else goes to the full datc, which explains its refusal). */
static bool
safe_dir (const char *dir)
{
  struct stat st;
  return lstat (dir, &st) == 0 && S_ISDIR (st.st_mode) && st.st_uid == geteuid ()
         && (st.st_mode & 022) == 0;
}

static bool
is_campaign (const char *dir)
{
  char json[PATH_MAX];
  struct stat st;
  if (snprintf (json, sizeof json, "%s/campaign.json", dir) >= (int) sizeof json)
    return false;
  return stat (json, &st) == 0 || master_running (dir);
}

/* `datc status` answered here: the exit status, or -1 to leave it to the
 * full datc.  argv[0] is "status". */
static int
fast_status (int argc, char **argv)
{
  const char *dir = NULL;
  bool all_agents = false;
  for (int i = 1; i < argc; i++)
    {
      if (strcmp (argv[i], "--agents") == 0)
        all_agents = true;
      else if (argv[i][0] == '-' || dir != NULL)
        return -1;
      else
        dir = argv[i];
    }
  if (dir != NULL && !is_campaign (dir))
    return -1;
  if (dir == NULL)
    dir = getenv ("DATC_DIR");
  if (dir == NULL || dir[0] == '\0' || !master_running (dir))
    return -1;

  char canon[PATH_MAX];
  char path[PATH_MAX + 16];
  if (!canonical_dir (dir, canon, sizeof canon) || !safe_dir (canon)
      || snprintf (path, sizeof path, "%s/control", canon) >= (int) sizeof path)
    return -1;

  char request[96];
  if (all_agents)
    snprintf (request, sizeof request, "{\"cmd\":\"status\",\"format\":\"text\"}");
  else
    snprintf (request, sizeof request, "{\"cmd\":\"status\",\"format\":\"text\",\"agents_max\":%d}",
              STATUS_TEXT_AGENTS);
  DatcZmtpReader r;
  datc_zmtp_reader_init (&r, DATC_ZMTP_REPLY_MAX);
  int errsv = 0;
  DatcZmtpStatus st = datc_zmtp_call (path, request, strlen (request), CALL_TIMEOUT_MS,
                                      still_running, (void *) dir, &r, &errsv);
  if (st != DATC_ZMTP_DONE)
    {
      datc_zmtp_reader_clear (&r);
      if (errsv != ETIMEDOUT)
        return -1;
      fprintf (stderr, "datc status: %s: the master did not answer within %d ms\n", dir,
               CALL_TIMEOUT_MS);
      return EXIT_CANNOT;
    }
  char *text = NULL;
  size_t text_len = 0;
  const char *why = NULL;
  bool ok = datc_text_reply_decode ((const char *) r.reply, r.reply_len, &text, &text_len, &why);
  datc_zmtp_reader_clear (&r);
  if (!ok)
    return -1;
  bool written = fwrite (text, 1, text_len, stdout) == text_len && fflush (stdout) == 0;
  int write_errno = errno;
  free (text);
  if (!written)
    {
      fprintf (stderr, "datc status: writing the status: %s\n", strerror (write_errno));
      return EXIT_CANNOT;
    }
  return EXIT_OK;
}

/* The full datc: $DATC_FULL, else beside this program (the build tree,
 * and an install puts both in bindir: /proc/self/exe, or argv[0] where
 * there is no /proc), else datc-full on PATH. */
static void
exec_full (char **argv)
{
  const char *env = getenv ("DATC_FULL");
  char path[PATH_MAX];
  const char *how = NULL;
  if (env != NULL && env[0] != '\0')
    {
      if (strlen (env) >= sizeof path)
        {
          fprintf (stderr, "datc: DATC_FULL is longer than a path may be\n");
          exit (EXIT_CANNOT);
        }
      strcpy (path, env);
      how = path;
    }
  else
    {
      ssize_t n = readlink ("/proc/self/exe", path, sizeof path - 1);
      if (n > 0)
        path[n] = '\0';
      else if (strchr (argv[0], '/') != NULL && strlen (argv[0]) < sizeof path)
        {
          strcpy (path, argv[0]);
          n = (ssize_t) strlen (path);
        }
      char *slash = n > 0 ? strrchr (path, '/') : NULL;
      if (slash != NULL && (size_t) (slash + 1 - path) + sizeof "datc-full" <= sizeof path)
        {
          strcpy (slash + 1, "datc-full");
          how = path;
        }
    }
  if (how != NULL)
    execv (how, argv);
  else
    {
      how = "datc-full";
      execvp (how, argv);
    }
  fprintf (stderr, "datc: cannot run %s: %s\n", how, strerror (errno));
  exit (EXIT_CANNOT);
}

int
main (int argc, char **argv)
{
  if (argc >= 2 && strcmp (argv[1], "status") == 0)
    {
      int rc = fast_status (argc - 1, argv + 1);
      if (rc >= 0)
        return rc;
    }
  exec_full (argv);
  return EXIT_CANNOT;
}
