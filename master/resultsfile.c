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
  gchar *path; /* where it is now, for messages */
  int fd;
  GString *line; /* scratch for one line */
  GString *out;  /* lines waiting to be written */
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
datc_result_line_format (GString *s, const DatcResultLine *r)
{
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
}

void
datc_results_file_add (DatcResultsFile *f, const DatcResultLine *r)
{
  g_string_truncate (f->line, 0);
  datc_result_line_format (f->line, r);
  g_string_append_len (f->out, f->line->str, (gssize) f->line->len);
}

/* ---- reading back a line written above ------------------------------ */

/* A cursor over one line; `ok` drops to FALSE at the first surprise and
 * every later step is then a no-op. */
typedef struct {
  const char *p, *end;
  gboolean ok;
} LineCursor;

static void
expect (LineCursor *c, const char *lit)
{
  gsize n = strlen (lit);
  if (c->ok && (gsize) (c->end - c->p) >= n && memcmp (c->p, lit, n) == 0)
    c->p += n;
  else
    c->ok = FALSE;
}

static guint64
read_u64 (LineCursor *c)
{
  guint64 v = 0;
  const char *start = c->p;
  while (c->ok && c->p < c->end && *c->p >= '0' && *c->p <= '9')
    {
      guint d = (guint) (*c->p++ - '0');
      if (v > (G_MAXUINT64 - d) / 10)
        c->ok = FALSE;
      v = v * 10 + d;
    }
  if (c->p == start)
    c->ok = FALSE;
  return v;
}

static gint64
read_i64 (LineCursor *c)
{
  gboolean neg = c->ok && c->p < c->end && *c->p == '-';
  if (neg)
    c->p++;
  guint64 v = read_u64 (c);
  if (v > (guint64) G_MAXINT64 + neg)
    c->ok = FALSE;
  return neg ? (gint64) ((guint64) 0 - v) : (gint64) v;
}

/* A quoted string, unescaped into `scratch` (NUL-ended there); returns
 * its offset in scratch.  Only the escapes jsonout.c writes. */
static gsize
read_string (LineCursor *c, GString *scratch)
{
  gsize at = scratch->len;
  expect (c, "\"");
  while (c->ok && c->p < c->end && *c->p != '"')
    {
      char ch = *c->p++;
      if (ch != '\\')
        {
          g_string_append_c (scratch, ch);
          continue;
        }
      if (c->p >= c->end)
        break;
      switch (*c->p++)
        {
        case '"':
          g_string_append_c (scratch, '"');
          break;
        case '\\':
          g_string_append_c (scratch, '\\');
          break;
        case 'n':
          g_string_append_c (scratch, '\n');
          break;
        case 'r':
          g_string_append_c (scratch, '\r');
          break;
        case 't':
          g_string_append_c (scratch, '\t');
          break;
        case 'u':
          {
            int hi, lo;
            if (c->end - c->p < 4 || c->p[0] != '0' || c->p[1] != '0'
                || (hi = g_ascii_xdigit_value (c->p[2])) < 0
                || (lo = g_ascii_xdigit_value (c->p[3])) < 0 || hi * 16 + lo == 0)
              c->ok = FALSE;
            else
              g_string_append_c (scratch, (char) (hi * 16 + lo));
            c->p += 4;
            break;
          }
        default:
          c->ok = FALSE;
        }
    }
  expect (c, "\"");
  g_string_append_c (scratch, '\0');
  return at;
}

gboolean
datc_result_line_parse (const char *line, gsize len, DatcResultLine *r, GString *scratch)
{
  LineCursor c = { line, line + len, TRUE };
  gsize s_status, s_class, s_site, s_proxy, s_host, s_agent, s_output;
  gsize s_message = G_MAXSIZE, s_oom = G_MAXSIZE;

  g_string_truncate (scratch, 0);
  memset (r, 0, sizeof *r);
  expect (&c, "{\"id\":");
  r->id = read_u64 (&c);
  expect (&c, ",\"line\":");
  r->line = read_u64 (&c);
  expect (&c, ",\"attempt\":");
  guint64 attempt = read_u64 (&c);
  if (attempt > G_MAXUINT32)
    c.ok = FALSE;
  r->attempt = (guint32) attempt;
  expect (&c, ",\"status\":");
  s_status = read_string (&c, scratch);
  expect (&c, ",\"class\":");
  s_class = read_string (&c, scratch);
  expect (&c, ",\"exit_code\":");
  r->exit_code = read_i64 (&c);
  expect (&c, ",\"signal\":");
  r->signal = read_i64 (&c);
  expect (&c, ",\"site\":");
  s_site = read_string (&c, scratch);
  expect (&c, ",\"proxy\":");
  s_proxy = read_string (&c, scratch);
  expect (&c, ",\"host\":");
  s_host = read_string (&c, scratch);
  expect (&c, ",\"agent\":");
  s_agent = read_string (&c, scratch);
  expect (&c, ",\"submitted\":");
  r->submitted = read_i64 (&c);
  expect (&c, ",\"started\":");
  r->started = read_i64 (&c);
  expect (&c, ",\"finished\":");
  r->finished = read_i64 (&c);
  expect (&c, ",\"output\":");
  s_output = read_string (&c, scratch);
  expect (&c, ",\"stdout_offset\":");
  r->out_off = read_u64 (&c);
  expect (&c, ",\"stdout_bytes\":");
  r->out_len = read_u64 (&c);
  expect (&c, ",\"stderr_offset\":");
  r->err_off = read_u64 (&c);
  expect (&c, ",\"stderr_bytes\":");
  r->err_len = read_u64 (&c);
  expect (&c, ",\"stdout_dropped\":");
  r->out_dropped = read_u64 (&c);
  expect (&c, ",\"stderr_dropped\":");
  r->err_dropped = read_u64 (&c);
  if (c.ok && c.end - c.p > 11 && memcmp (c.p, ",\"message\":", 11) == 0)
    {
      c.p += 11;
      s_message = read_string (&c, scratch);
    }
  if (c.ok && c.end - c.p > 16 && memcmp (c.p, ",\"oom_evidence\":", 16) == 0)
    {
      c.p += 16;
      s_oom = read_string (&c, scratch);
    }
  expect (&c, "}\n");
  if (!c.ok || c.p != c.end)
    return FALSE;
  /* Pointers last: scratch may have moved while it grew. */
  r->status = scratch->str + s_status;
  r->end_class = scratch->str + s_class;
  r->site = scratch->str + s_site;
  r->proxy = scratch->str + s_proxy;
  r->host = scratch->str + s_host;
  r->agent = scratch->str + s_agent;
  r->output = scratch->str + s_output;
  r->message = s_message != G_MAXSIZE ? scratch->str + s_message : NULL;
  r->oom_evidence = s_oom != G_MAXSIZE ? scratch->str + s_oom : NULL;
  return TRUE;
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
