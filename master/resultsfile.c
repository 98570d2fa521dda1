/* resultsfile.c: see resultsfile.h.  The master writes a line per finished
 * task, so integers are formatted without printf, and strings go through
 * the one JSON escaper (analysis/jsonout.c). */
#include "resultsfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonout.h"
#include "ledger.h"

struct DatcResultsFile {
  gchar *path;    /* where it is now, for messages */
  int fd;
  GString *line;  /* scratch for one line */
  GString *out;   /* lines waiting to be written */
};

DatcResultsFile *
datc_results_file_open (const char *path, GError **error)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    {
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s: %s", path,
                   g_strerror (errno));
      return NULL;
    }
  DatcResultsFile *f = g_new0 (DatcResultsFile, 1);
  f->path = g_strdup (path);
  f->fd = fd;
  f->line = g_string_sized_new (512);
  f->out = g_string_sized_new (1 << 16);
  return f;
}

void
datc_results_file_free (DatcResultsFile *f)
{
  if (f == NULL)
    return;
  if (f->fd >= 0)
    close (f->fd);
  g_string_free (f->line, TRUE);
  g_string_free (f->out, TRUE);
  g_free (f->path);
  g_free (f);
}

/* Decimal integers without printf: a line holds ten of them. */
static void
append_u64 (GString *s, guint64 v)
{
  char buf[20];
  guint i = sizeof buf;
  do
    buf[--i] = (char) ('0' + v % 10);
  while ((v /= 10) != 0);
  g_string_append_len (s, buf + i, (gssize) (sizeof buf - i));
}

static void
append_i64 (GString *s, gint64 v)
{
  if (v < 0)
    {
      g_string_append_c (s, '-');
      append_u64 (s, (guint64) 0 - (guint64) v);
    }
  else
    append_u64 (s, (guint64) v);
}

/* `,"name":` then the value. */
static void
append_member_u64 (GString *s, const char *name, guint64 v)
{
  g_string_append (s, name);
  append_u64 (s, v);
}

static void
append_member_i64 (GString *s, const char *name, gint64 v)
{
  g_string_append (s, name);
  append_i64 (s, v);
}

void
datc_results_file_add (DatcResultsFile *f, const DatcResultLine *r)
{
  GString *s = f->line;

  g_string_truncate (s, 0);
  append_member_u64 (s, "{\"id\":", r->id);
  append_member_u64 (s, ",\"line\":", r->line);
  append_member_u64 (s, ",\"attempt\":", r->attempt);
  g_string_append (s, ",\"status\":\"");
  g_string_append (s, r->status);
  g_string_append (s, "\",\"class\":\"");
  g_string_append (s, r->end_class);
  append_member_i64 (s, "\",\"exit_code\":", r->exit_code);
  append_member_i64 (s, ",\"signal\":", r->signal);
  g_string_append (s, ",\"site\":");
  datc_json_append_string (s, r->site);
  g_string_append (s, ",\"proxy\":");
  datc_json_append_string (s, r->proxy);
  g_string_append (s, ",\"host\":");
  datc_json_append_string (s, r->host);
  g_string_append (s, ",\"agent\":");
  datc_json_append_string (s, r->agent);
  append_member_i64 (s, ",\"submitted\":", r->submitted);
  append_member_i64 (s, ",\"started\":", r->started);
  append_member_i64 (s, ",\"finished\":", r->finished);
  g_string_append (s, ",\"output\":");
  datc_json_append_string (s, r->output);
  append_member_u64 (s, ",\"stdout_offset\":", r->out_off);
  append_member_u64 (s, ",\"stdout_bytes\":", r->out_len);
  append_member_u64 (s, ",\"stderr_offset\":", r->err_off);
  append_member_u64 (s, ",\"stderr_bytes\":", r->err_len);
  append_member_u64 (s, ",\"stdout_dropped\":", r->out_dropped);
  append_member_u64 (s, ",\"stderr_dropped\":", r->err_dropped);
  if (r->message != NULL)
    {
      g_string_append (s, ",\"message\":");
      datc_json_append_string (s, r->message);
    }
  if (r->oom_evidence != NULL)
    {
      g_string_append (s, ",\"oom_evidence\":");
      datc_json_append_string (s, r->oom_evidence);
    }
  g_string_append (s, "}\n");
  g_string_append_len (f->out, s->str, (gssize) s->len);
}

gsize
datc_results_file_pending (DatcResultsFile *f)
{
  return f->out->len;
}

void
datc_results_file_add_lines (DatcResultsFile *f, const guint8 *lines, gsize len)
{
  g_string_append_len (f->out, (const char *) lines, (gssize) len);
}

const char *
datc_results_file_path (DatcResultsFile *f)
{
  return f->path;
}

guint64
datc_results_file_written (DatcResultsFile *f)
{
  off_t at = lseek (f->fd, 0, SEEK_CUR);
  return at > 0 ? (guint64) at : 0;
}

gboolean
datc_results_file_write (DatcResultsFile *f, GError **error)
{
  gsize done = 0;
  while (done < f->out->len)
    {
      ssize_t w = write (f->fd, f->out->str + done, f->out->len - done);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0)
        {
          int errsv = errno;
          g_string_erase (f->out, 0, (gssize) done);
          g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s: %s", f->path,
                       g_strerror (errsv));
          return FALSE;
        }
      done += (gsize) w;
    }
  g_string_truncate (f->out, 0);
  return TRUE;
}

gboolean
datc_results_file_filter (DatcResultsFile *f, guint64 n_tasks, DatcResultsKeepFunc keep,
                          gpointer user_data, GError **error)
{
  g_autofree gchar *out_path = g_strconcat (f->path, ".filtered", NULL);
  FILE *in = fopen (f->path, "re");
  int out = open (out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  g_autofree guint8 *kept = g_new0 (guint8, n_tasks + 1);
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  gboolean ok = in != NULL && out >= 0;

  while (ok && (n = getline (&line, &cap, in)) > 0)
    {
      guint64 id = 0;
      if (sscanf (line, "{\"id\":%" G_GUINT64_FORMAT ",", &id) != 1 || id == 0 || id > n_tasks)
        continue;
      gboolean cancelled = strstr (line, "\"status\":\"cancelled\"") != NULL;
      if (kept[id] || !keep (id, cancelled, user_data))
        continue;
      kept[id] = 1;
      ok = write (out, line, (size_t) n) == n;
    }
  free (line);
  if (in != NULL)
    fclose (in);
  if (ok)
    ok = fsync (out) == 0 && rename (out_path, f->path) == 0;
  if (!ok)
    {
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s: %s", f->path,
                   g_strerror (errno));
      if (out >= 0)
        close (out);
      return FALSE;
    }
  /* Go on appending to the filtered file. */
  close (f->fd);
  f->fd = out;
  lseek (out, 0, SEEK_END);
  return TRUE;
}

gboolean
datc_results_file_finish (DatcResultsFile *f, const char *path, GError **error)
{
  if (fsync (f->fd) != 0 || rename (f->path, path) != 0)
    {
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s: %s", path,
                   g_strerror (errno));
      return FALSE;
    }
  g_free (f->path);
  f->path = g_strdup (path);
  return TRUE;
}
