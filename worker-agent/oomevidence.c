/* oomevidence.c: the OOM killer's traces on this node (see oomevidence.h).
 *
 * The counter file stays open so that reading it at every task start is
 * one pread (cgroup files regenerate their text at offset 0).  The kernel
 * log is read only for a task that died of SIGKILL, from the start of its
 * ring buffer: rare, and bounded by KMSG_RECORDS_MAX. */
#include "oomevidence.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A kernel log holds some thousands of records; a flood is not read to its end. */
#define KMSG_RECORDS_MAX 100000
/* The kernel log's clock and ours may differ a little. */
#define KMSG_SLACK_US G_USEC_PER_SEC
#define COUNTER_TEXT_MAX 4096
/* Evidence is one line for results.jsonl: the kernel's line is cut here,
 * and the whole (a cgroup path may be long) well within the wire's
 * DATC_REASON_MAX. */
#define EVIDENCE_LINE_MAX 300
#define EVIDENCE_MAX 1024

struct DatcOomWatch {
  int counter_fd; /* -1: no counter */
  gchar *counter_path;
  gchar *kmsg;
};

void
datc_oom_parse_proc_cgroup (const char *text, gchar **v2_path, gchar **v1_memory_path)
{
  *v2_path = NULL;
  *v1_memory_path = NULL;
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      /* hierarchy-id:controller-list:path; the path may hold ':' */
      g_auto (GStrv) f = g_strsplit (lines[i], ":", 3);
      if (g_strv_length (f) != 3 || f[2][0] != '/')
        continue;
      if (g_str_equal (f[0], "0") && f[1][0] == '\0')
        {
          if (*v2_path == NULL)
            *v2_path = g_strdup (f[2]);
          continue;
        }
      g_auto (GStrv) controllers = g_strsplit (f[1], ",", -1);
      if (g_strv_contains ((const gchar *const *) controllers, "memory") && *v1_memory_path == NULL)
        *v1_memory_path = g_strdup (f[2]);
    }
}

gint64
datc_oom_parse_counter (const char *text)
{
  for (const char *p = text; p != NULL && *p != '\0';)
    {
      if (g_str_has_prefix (p, "oom_kill "))
        {
          char *end = NULL;
          errno = 0;
          guint64 v = g_ascii_strtoull (p + strlen ("oom_kill "), &end, 10);
          if (errno == 0 && end != p + strlen ("oom_kill ") && (*end == '\n' || *end == '\0')
              && v <= G_MAXINT64)
            return (gint64) v;
          return -1;
        }
      p = strchr (p, '\n');
      if (p != NULL)
        p++;
    }
  return -1;
}

gboolean
datc_oom_parse_kmsg (const char *record, pid_t pid, guint64 *usec, const char **message)
{
  /* "prio,seq,usec,flags;message": the message ends at the first newline
   * (continuation lines " KEY=VALUE" follow it). */
  const char *semi = strchr (record, ';');
  if (semi == NULL)
    return FALSE;
  g_auto (GStrv) head = g_strsplit (record, ",", 4);
  if (g_strv_length (head) < 3)
    return FALSE;
  char *end = NULL;
  guint64 t = g_ascii_strtoull (head[2], &end, 10);
  if (end == head[2] || (*end != ',' && *end != ';' && *end != '\0'))
    return FALSE;
  /* "Out of memory: Killed process 42 (sim) ..." (global) or "Memory
   * cgroup out of memory: Killed process 42 (sim) ..." (a cgroup's limit) */
  const char *k = strstr (semi + 1, "of memory: Killed process ");
  if (k == NULL)
    return FALSE;
  k += strlen ("of memory: Killed process ");
  guint64 killed = g_ascii_strtoull (k, &end, 10);
  if (end == k || *end != ' ' || killed != (guint64) pid)
    return FALSE;
  *usec = t;
  *message = semi + 1;
  return TRUE;
}

static gboolean
try_counter (DatcOomWatch *w, gchar *path)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    {
      g_free (path);
      return FALSE;
    }
  w->counter_fd = fd;
  w->counter_path = path;
  if (datc_oom_watch_kills (w) < 0)
    {
      /* a v1 memory.oom_control of a kernel before 4.13: no oom_kill line */
      close (w->counter_fd);
      w->counter_fd = -1;
      g_clear_pointer (&w->counter_path, g_free);
      return FALSE;
    }
  return TRUE;
}

DatcOomWatch *
datc_oom_watch_new (const char *proc_cgroup, const char *cgroup_root, const char *kmsg)
{
  DatcOomWatch *w = g_new0 (DatcOomWatch, 1);
  w->counter_fd = -1;
  w->kmsg = g_strdup (kmsg);

  g_autofree gchar *text = NULL;
  if (proc_cgroup == NULL || cgroup_root == NULL
      || !g_file_get_contents (proc_cgroup, &text, NULL, NULL))
    return w;
  g_autofree gchar *v2 = NULL, *v1 = NULL;
  datc_oom_parse_proc_cgroup (text, &v2, &v1);
  /* Pure v2 mounts at the root; a hybrid system's v2 tree (unified/)
   * usually has no memory controller, and then v1's memory tree counts. */
  if (v2 != NULL
      && (try_counter (w, g_build_filename (cgroup_root, v2, "memory.events", NULL))
          || try_counter (w, g_build_filename (cgroup_root, "unified", v2, "memory.events", NULL))))
    return w;
  if (v1 != NULL)
    try_counter (w, g_build_filename (cgroup_root, "memory", v1, "memory.oom_control", NULL));
  return w;
}

void
datc_oom_watch_free (DatcOomWatch *w)
{
  if (w == NULL)
    return;
  if (w->counter_fd >= 0)
    close (w->counter_fd);
  g_free (w->counter_path);
  g_free (w->kmsg);
  g_free (w);
}

const char *
datc_oom_watch_counter_path (DatcOomWatch *w)
{
  return w != NULL ? w->counter_path : NULL;
}

gint64
datc_oom_watch_kills (DatcOomWatch *w)
{
  if (w == NULL || w->counter_fd < 0)
    return -1;
  char buf[COUNTER_TEXT_MAX];
  ssize_t n;
  while ((n = pread (w->counter_fd, buf, sizeof buf - 1, 0)) < 0 && errno == EINTR)
    ;
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  return datc_oom_parse_counter (buf);
}

/* The kernel log's line about `pid`, logged since the task started. */
static gchar *
kmsg_evidence (const char *kmsg, pid_t pid, gint64 started_mono_us)
{
  if (kmsg == NULL)
    return NULL;
  int fd = open (kmsg, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  gchar *found = NULL;
  char rec[8192];
  for (guint i = 0; i < KMSG_RECORDS_MAX; i++)
    {
      ssize_t n = read (fd, rec, sizeof rec - 1);
      if (n < 0 && (errno == EINTR || errno == EPIPE))
        continue; /* EPIPE: records overwritten while we read: go on */
      if (n <= 0)
        break; /* EAGAIN: the end; anything else: give up */
      rec[n] = '\0';
      guint64 usec;
      const char *message;
      if (datc_oom_parse_kmsg (rec, pid, &usec, &message)
          && (gint64) usec + KMSG_SLACK_US >= started_mono_us)
        {
          gsize len = strcspn (message, "\n");
          if (len > EVIDENCE_LINE_MAX)
            len = EVIDENCE_LINE_MAX;
          g_free (found);
          found = g_strdup_printf ("kernel log: %.*s", (int) len, message);
        }
    }
  close (fd);
  return found;
}

/* Valid UTF-8 of at most EVIDENCE_MAX bytes, as the wire wants. */
static gchar *
fit_evidence (gchar *text)
{
  gchar *valid = g_utf8_make_valid (text, -1);
  g_free (text);
  if (strlen (valid) > EVIDENCE_MAX)
    *g_utf8_find_prev_char (valid, valid + EVIDENCE_MAX + 1) = '\0';
  return valid;
}

gchar *
datc_oom_watch_evidence (DatcOomWatch *w, gint64 kills_at_start, pid_t pid, gint64 started_mono_us)
{
  if (w == NULL)
    return NULL;
  g_autofree gchar *log = kmsg_evidence (w->kmsg, pid, started_mono_us);
  gint64 now = datc_oom_watch_kills (w);
  g_autofree gchar *counter = NULL;
  if (kills_at_start >= 0 && now > kills_at_start)
    counter = g_strdup_printf ("oom_kill %" G_GINT64_FORMAT " -> %" G_GINT64_FORMAT
                               " in %s while it ran",
                               kills_at_start, now, w->counter_path);
  if (counter != NULL && log != NULL)
    return fit_evidence (g_strdup_printf ("%s; %s", counter, log));
  if (counter != NULL)
    return fit_evidence (g_steal_pointer (&counter));
  if (log != NULL)
    return fit_evidence (g_steal_pointer (&log));
  return NULL;
}
