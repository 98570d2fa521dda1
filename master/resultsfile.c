/* resultsfile.c: see resultsfile.h.  The master writes a line per finished
 * task (and a resumed one a line per task it replays), so a line is
 * written with a cursor into room reserved once, integers without printf,
 * and strings through the one JSON escaper (analysis/jsonout.c). */
#include "resultsfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jsonout.h"
#include "ledger.h"

struct DatcResultsFile {
  gchar *path; /* where it is now, for messages */
  int fd;
  GString *out; /* lines waiting to be written */
  /* Rebuilt over the file an earlier master left (datc_results_file_rebuild):
   * while the lines match its bytes, nothing is written (`checking`, fd
   * is that file); from the first that differs they go to `tmp_path`. */
  gboolean checking;
  gboolean in_place; /* still the earlier file: no rename at the end */
  guint64 checked;   /* its bytes that matched */
  /* Lines were appended to the earlier file past its end (every byte of
   * it matched): a start that fails cuts it back to `restore_len`. */
  gboolean restore;
  guint64 restore_len;
  gchar *tmp_path;
  guint8 *old; /* scratch: the earlier file's bytes to compare */
  gsize old_cap;
  /* datc_results_file_set_write_wait: the lines' write() on `writer`
   * while the owner's thread calls `wait` */
  DatcIoWaitFunc wait;
  gpointer wait_data;
  DatcIoThread *writer;
  gboolean no_writer; /* no thread could be had: the owner's thread writes */
  /* datc_results_file_begin_replay: lines are written as they come; with
   * `formatter`, formatted, compared and written on that thread, handed
   * over in batches (`full`) that come back emptied (`empty`). */
  gboolean replaying;
  GThread *formatter;
  GAsyncQueue *full, *empty;
  struct Batch *filling; /* the caller's, not handed over yet */
};

static void replay_stream (DatcResultsFile *f);
static void queue_line (DatcResultsFile *f, const DatcResultLine *r);
static void queue_lines (DatcResultsFile *f, const guint8 *lines, gsize len);

static gboolean
io_error (GError **error, int errsv, const char *path)
{
  g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s: %s", path, g_strerror (errsv));
  return FALSE;
}

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
  f->out = g_string_sized_new (1 << 16);
  return f;
}

void
datc_results_file_free (DatcResultsFile *f)
{
  if (f == NULL)
    return;
  datc_results_file_end_replay (f);
  if (f->restore && ftruncate (f->fd, (off_t) f->restore_len) < 0)
    g_warning ("%s: %s", f->path, g_strerror (errno));
  datc_io_thread_free (f->writer);
  if (f->fd >= 0)
    close (f->fd);
  g_string_free (f->out, TRUE);
  g_free (f->path);
  g_free (f->tmp_path);
  g_free (f->old);
  g_free (f);
}

/* The lines differ from the earlier file's from `checked` on: the file is
 * written anew beside it, starting with the part that matched, so that
 * the earlier one stays as it was until finish renames over it. */
static gboolean
diverge (DatcResultsFile *f, GError **error)
{
  int tmp = open (f->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (tmp < 0)
    return io_error (error, errno, f->tmp_path);
  g_autofree guint8 *chunk = f->checked > 0 ? g_malloc (1 << 20) : NULL;
  for (guint64 from = 0; from < f->checked;)
    {
      ssize_t n = pread (f->fd, chunk, (gsize) MIN (f->checked - from, 1u << 20), (off_t) from);
      if (n < 0 && errno == EINTR)
        continue;
      ssize_t w = n > 0 ? write (tmp, chunk, (gsize) n) : 0;
      if (n <= 0 || w != n)
        {
          /* Shorter than what matched (cut meanwhile), or a short write. */
          int errsv = n < 0 || w < 0 ? errno : EIO;
          close (tmp);
          return io_error (error, errsv, n < 0 ? f->path : f->tmp_path);
        }
      from += (guint64) n;
    }
  if (f->fd >= 0)
    close (f->fd);
  f->fd = tmp;
  g_free (f->path);
  f->path = g_strdup (f->tmp_path);
  f->checking = FALSE;
  f->in_place = FALSE;
  g_clear_pointer (&f->old, g_free);
  return TRUE;
}

DatcResultsFile *
datc_results_file_rebuild (const char *path, const char *tmp_path, GError **error)
{
  /* A rebuild a crash cut short: never renamed, so never the file. */
  if (unlink (tmp_path) < 0 && errno != ENOENT)
    {
      io_error (error, errno, tmp_path);
      return NULL;
    }
  int fd = open (path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 && errno != ENOENT && errno != ELOOP)
    {
      io_error (error, errno, path);
      return NULL;
    }
  if (fd >= 0 && (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode)))
    {
      close (fd);
      fd = -1;
    }
  g_autoptr (DatcResultsFile) f = g_new0 (DatcResultsFile, 1);
  f->path = g_strdup (path);
  f->fd = fd;
  f->out = g_string_sized_new (1 << 16);
  f->checking = TRUE;
  f->in_place = TRUE;
  f->tmp_path = g_strdup (tmp_path);
  /* None yet, or not a regular file (a symlink, say): nothing to compare
   * with, and never written through; made anew and renamed into place. */
  if (fd < 0 && !diverge (f, error))
    return NULL;
  return g_steal_pointer (&f);
}

/* Compares the lines waiting with the earlier file's next bytes: *same
 * gets how many match (nothing to write for those).  Past the first
 * difference, or the earlier file's end, they are written anew. */
static gboolean
check_earlier (DatcResultsFile *f, gsize *same, GError **error)
{
  gsize want = f->out->len, got = 0;
  if (f->old_cap < want)
    {
      g_free (f->old);
      f->old = g_malloc (want);
      f->old_cap = want;
    }
  while (got < want)
    {
      ssize_t n = pread (f->fd, f->old + got, want - got, (off_t) (f->checked + got));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return io_error (error, errno, f->path);
      if (n == 0)
        break;
      got += (gsize) n;
    }
  gsize n = 0;
  if (memcmp (f->old, f->out->str, got) == 0)
    n = got;
  else
    while (f->old[n] == (guint8) f->out->str[n])
      n++;
  f->checked += n;
  *same = n;
  if (n == want)
    return TRUE;
  if (n < got)
    return diverge (f, error);
  /* The earlier file ends here, every byte of it right (results the last
   * master had not written yet, a torn last line): the rest follows at its
   * end, not in a copy of it; a start that fails takes them back. */
  f->checking = FALSE;
  g_clear_pointer (&f->old, g_free);
  f->restore = TRUE;
  f->restore_len = f->checked;
  if (lseek (f->fd, (off_t) f->checked, SEEK_SET) < 0)
    return io_error (error, errno, f->path);
  return TRUE;
}

/* The earlier file holds every line: what it has beyond them goes. */
static gboolean
end_check (DatcResultsFile *f, GError **error)
{
  struct stat st;
  f->checking = FALSE;
  g_clear_pointer (&f->old, g_free);
  if (fstat (f->fd, &st) < 0
      || ((guint64) st.st_size > f->checked && ftruncate (f->fd, (off_t) f->checked) < 0)
      || lseek (f->fd, (off_t) f->checked, SEEK_SET) < 0)
    return io_error (error, errno, f->path);
  return TRUE;
}

/* A line is written with a cursor into room reserved for its longest
 * form: one size check per line, not one per piece (a resumed master
 * writes a line per finished task it replays, millions of them). */
#define PUT(p, lit) (memcpy ((p), (lit), sizeof (lit) - 1), (p) + sizeof (lit) - 1)
#define U64_DIGITS_MAX 20

static const char digit_pairs[] = "0001020304050607080910111213141516171819"
                                  "2021222324252627282930313233343536373839"
                                  "4041424344454647484950515253545556575859"
                                  "6061626364656667686970717273747576777879"
                                  "8081828384858687888990919293949596979899";

/* Exactly eight digits of v < 10^8, in 32-bit arithmetic. */
static void
put_8_digits (char *p, guint32 v)
{
  guint32 hi = v / 10000, lo = v % 10000;
  memcpy (p, digit_pairs + (hi / 100) * 2, 2);
  memcpy (p + 2, digit_pairs + (hi % 100) * 2, 2);
  memcpy (p + 4, digit_pairs + (lo / 100) * 2, 2);
  memcpy (p + 6, digit_pairs + (lo % 100) * 2, 2);
}

/* Up to eight digits, no leading zero, written in place from the last. */
static char *
put_u32_short (char *p, guint32 v)
{
  if (v < 10)
    {
      *p = (char) ('0' + v);
      return p + 1;
    }
  char *end = p
              + (v < 100        ? 2
                 : v < 1000     ? 3
                 : v < 10000    ? 4
                 : v < 100000   ? 5
                 : v < 1000000  ? 6
                 : v < 10000000 ? 7
                                : 8);
  char *d = end;
  while (v >= 100)
    {
      d -= 2;
      memcpy (d, digit_pairs + (v % 100) * 2, 2);
      v /= 100;
    }
  if (v >= 10)
    memcpy (d - 2, digit_pairs + v * 2, 2);
  else
    d[-1] = (char) ('0' + v);
  return end;
}

/* Decimal integers without printf, in blocks of eight digits: a line
 * holds thirteen of them, three of them 16-digit times. */
static char *
put_u64 (char *p, guint64 v)
{
  if (v < 100000000u)
    return put_u32_short (p, (guint32) v);
  guint64 high = v / 100000000u;
  guint32 low = (guint32) (v % 100000000u);
  if (high < 100000000u)
    p = put_u32_short (p, (guint32) high);
  else
    {
      /* Up to 20 digits: at most four, then eight. */
      p = put_u32_short (p, (guint32) (high / 100000000u));
      put_8_digits (p, (guint32) (high % 100000000u));
      p += 8;
    }
  put_8_digits (p, low);
  return p + 8;
}

static char *
put_i64 (char *p, gint64 v)
{
  if (v >= 0)
    return put_u64 (p, (guint64) v);
  *p++ = '-';
  return put_u64 (p, (guint64) 0 - (guint64) v);
}

static char *
put_raw (char *p, const char *s, gsize len)
{
  memcpy (p, s, len);
  return p + len;
}

/* The four strings of DatcResultLine.who, each with its length. */
enum { WHO_SITE, WHO_PROXY, WHO_HOST, WHO_AGENT, N_WHO };

/* Room for put_who's bytes: the names and punctuation, the strings at
 * their worst escaped. */
static gsize
who_room (const gsize len[N_WHO])
{
  gsize room = 64;
  for (guint i = 0; i < N_WHO; i++)
    room += DATC_JSON_STRING_MAX (len[i]);
  return room;
}

static char *
put_who (char *p, const char *const str[N_WHO], const gsize len[N_WHO])
{
  p = datc_json_put_string (PUT (p, ",\"site\":"), str[WHO_SITE], len[WHO_SITE]);
  p = datc_json_put_string (PUT (p, ",\"proxy\":"), str[WHO_PROXY], len[WHO_PROXY]);
  p = datc_json_put_string (PUT (p, ",\"host\":"), str[WHO_HOST], len[WHO_HOST]);
  return datc_json_put_string (PUT (p, ",\"agent\":"), str[WHO_AGENT], len[WHO_AGENT]);
}

static void
who_strings (const char *const in[N_WHO], const char *str[N_WHO], gsize len[N_WHO])
{
  for (guint i = 0; i < N_WHO; i++)
    {
      str[i] = in[i] != NULL ? in[i] : ""; /* as the escaper writes NULL */
      len[i] = strlen (str[i]);
    }
}

gchar *
datc_result_line_who (const char *site, const char *proxy, const char *host, const char *agent)
{
  const char *in[N_WHO] = { site, proxy, host, agent }, *str[N_WHO];
  gsize len[N_WHO];
  who_strings (in, str, len);
  gchar *who = g_malloc (who_room (len) + 1);
  *put_who (who, str, len) = '\0';
  return who;
}

void
datc_result_line_format (GString *s, const DatcResultLine *r)
{
  enum { STATUS, CLASS, OUTPUT, MESSAGE, OOM, N_STR };
  const char *str[N_STR] = { r->status, r->end_class, r->output, r->message, r->oom_evidence };
  gsize len[N_STR];
  /* The names and punctuation (under 400 bytes), 13 numbers, the strings
   * at their worst escaped. */
  gsize room = 512 + 13 * (U64_DIGITS_MAX + 1);
  for (guint i = 0; i < N_STR; i++)
    {
      if (str[i] == NULL && i < MESSAGE)
        str[i] = ""; /* as the escaper writes NULL */
      len[i] = str[i] != NULL ? strlen (str[i]) : 0;
      room += DATC_JSON_STRING_MAX (len[i]);
    }
  const char *who_in[N_WHO] = { r->site, r->proxy, r->host, r->agent }, *who[N_WHO];
  gsize who_len[N_WHO], who_bytes = 0;
  if (r->who != NULL)
    room += who_bytes = strlen (r->who);
  else
    {
      who_strings (who_in, who, who_len);
      room += who_room (who_len);
    }
  gsize at = s->len;
  g_string_set_size (s, at + room);
  char *p = s->str + at;

  p = put_u64 (PUT (p, "{\"id\":"), r->id);
  p = put_u64 (PUT (p, ",\"line\":"), r->line);
  p = put_u64 (PUT (p, ",\"attempt\":"), r->attempt);
  p = put_raw (PUT (p, ",\"status\":\""), str[STATUS], len[STATUS]);
  p = put_raw (PUT (p, "\",\"class\":\""), str[CLASS], len[CLASS]);
  p = put_i64 (PUT (p, "\",\"exit_code\":"), r->exit_code);
  p = put_i64 (PUT (p, ",\"signal\":"), r->signal);
  p = r->who != NULL ? put_raw (p, r->who, who_bytes) : put_who (p, who, who_len);
  p = put_i64 (PUT (p, ",\"submitted\":"), r->submitted);
  p = put_i64 (PUT (p, ",\"started\":"), r->started);
  p = put_i64 (PUT (p, ",\"finished\":"), r->finished);
  p = datc_json_put_string (PUT (p, ",\"output\":"), str[OUTPUT], len[OUTPUT]);
  p = put_u64 (PUT (p, ",\"stdout_offset\":"), r->out_off);
  p = put_u64 (PUT (p, ",\"stdout_bytes\":"), r->out_len);
  p = put_u64 (PUT (p, ",\"stderr_offset\":"), r->err_off);
  p = put_u64 (PUT (p, ",\"stderr_bytes\":"), r->err_len);
  p = put_u64 (PUT (p, ",\"stdout_dropped\":"), r->out_dropped);
  p = put_u64 (PUT (p, ",\"stderr_dropped\":"), r->err_dropped);
  if (r->message != NULL)
    p = datc_json_put_string (PUT (p, ",\"message\":"), r->message, len[MESSAGE]);
  if (r->oom_evidence != NULL)
    p = datc_json_put_string (PUT (p, ",\"oom_evidence\":"), r->oom_evidence, len[OOM]);
  p = PUT (p, "}\n");
  g_string_truncate (s, (gsize) (p - s->str));
}

void
datc_results_file_add (DatcResultsFile *f, const DatcResultLine *r)
{
  if (f->formatter != NULL)
    {
      queue_line (f, r);
      return;
    }
  datc_result_line_format (f->out, r);
  if (f->replaying)
    replay_stream (f);
}

/* ---- a replay's lines, on a thread ------------------------------------ */

/* What a resume spends most on, at millions of results, is their lines:
 * formatting each and comparing it with the bytes results.jsonl holds.
 * The formatter thread does that while the caller decodes and applies the
 * next records.  The caller copies a line's values and strings (they are
 * its, and change as the replay goes on) into a batch; a few batches are
 * in flight, so the caller waits when the thread falls behind. */
#define REPLAY_BATCH_LINES 1024u
#define REPLAY_BATCHES 8u
#define REPLAY_WRITE_BYTES ((gsize) 1 << 20)

typedef enum { BATCH_LINES, BATCH_RAW, BATCH_END } BatchKind;

/* The strings of a DatcResultLine, in `copy` order. */
enum {
  REF_STATUS,
  REF_CLASS,
  REF_SITE,
  REF_PROXY,
  REF_HOST,
  REF_AGENT,
  REF_OUTPUT,
  REF_MESSAGE,
  REF_OOM,
  REF_WHO,
  N_REF
};

typedef struct {
  DatcResultLine line; /* its strings NULL: they are in the batch's `bytes` */
  gsize at[N_REF];     /* offset + 1 there; 0: NULL */
} QueuedLine;

typedef struct Batch {
  BatchKind kind;
  GArray *lines;  /* QueuedLine (BATCH_LINES) */
  GString *bytes; /* their strings, NUL-ended; BATCH_RAW: whole lines */
} Batch;

static const gsize ref_offset[N_REF] = {
  G_STRUCT_OFFSET (DatcResultLine, status),       G_STRUCT_OFFSET (DatcResultLine, end_class),
  G_STRUCT_OFFSET (DatcResultLine, site),         G_STRUCT_OFFSET (DatcResultLine, proxy),
  G_STRUCT_OFFSET (DatcResultLine, host),         G_STRUCT_OFFSET (DatcResultLine, agent),
  G_STRUCT_OFFSET (DatcResultLine, output),       G_STRUCT_OFFSET (DatcResultLine, message),
  G_STRUCT_OFFSET (DatcResultLine, oom_evidence), G_STRUCT_OFFSET (DatcResultLine, who),
};

static const char **
line_ref (DatcResultLine *l, guint i)
{
  return G_STRUCT_MEMBER_P (l, ref_offset[i]);
}

/* Written whenever a megabyte waits: the replay's results are durable.  A
 * write that fails keeps its lines for the next (after the replay), which
 * says why. */
static void
replay_stream (DatcResultsFile *f)
{
  if (f->out->len < REPLAY_WRITE_BYTES)
    return;
  g_autoptr (GError) dropped = NULL;
  datc_results_file_write (f, &dropped);
}

static gpointer
formatter_main (gpointer data)
{
  DatcResultsFile *f = data;
  for (;;)
    {
      Batch *b = g_async_queue_pop (f->full);
      BatchKind kind = b->kind;
      if (kind == BATCH_RAW)
        g_string_append_len (f->out, b->bytes->str, (gssize) b->bytes->len);
      for (guint i = 0; kind == BATCH_LINES && i < b->lines->len; i++)
        {
          QueuedLine *q = &g_array_index (b->lines, QueuedLine, i);
          for (guint r = 0; r < N_REF; r++)
            *line_ref (&q->line, r) = q->at[r] != 0 ? b->bytes->str + q->at[r] - 1 : NULL;
          datc_result_line_format (f->out, &q->line);
        }
      g_array_set_size (b->lines, 0);
      g_string_truncate (b->bytes, 0);
      g_async_queue_push (f->empty, b);
      if (kind == BATCH_END)
        return NULL;
      replay_stream (f);
    }
}

static Batch *
batch_new (void)
{
  Batch *b = g_new0 (Batch, 1);
  b->lines = g_array_sized_new (FALSE, FALSE, sizeof (QueuedLine), REPLAY_BATCH_LINES);
  b->bytes = g_string_sized_new (REPLAY_BATCH_LINES * 128);
  return b;
}

static void
batch_free (gpointer p)
{
  Batch *b = p;
  g_array_unref (b->lines);
  g_string_free (b->bytes, TRUE);
  g_free (b);
}

/* The caller's batch to fill, of `kind`: the one being filled if it is of
 * that kind, else the one being filled goes to the thread first. */
static Batch *
filling (DatcResultsFile *f, BatchKind kind)
{
  if (f->filling != NULL && f->filling->kind != kind)
    {
      g_async_queue_push (f->full, f->filling);
      f->filling = NULL;
    }
  if (f->filling == NULL)
    {
      f->filling = g_async_queue_pop (f->empty);
      f->filling->kind = kind;
    }
  return f->filling;
}

static void
queue_line (DatcResultsFile *f, const DatcResultLine *r)
{
  Batch *b = filling (f, BATCH_LINES);
  /* Filled in place, every member set: no initializer to zero it first. */
  g_array_set_size (b->lines, b->lines->len + 1);
  QueuedLine *q = &g_array_index (b->lines, QueuedLine, b->lines->len - 1);
  q->line = *r;
  for (guint i = 0; i < N_REF; i++)
    {
      const char **s = line_ref (&q->line, i);
      q->at[i] = 0;
      if (*s != NULL && (i < REF_SITE || i > REF_AGENT || r->who == NULL))
        {
          q->at[i] = b->bytes->len + 1;
          g_string_append_len (b->bytes, *s, (gssize) strlen (*s) + 1);
        }
      *s = NULL;
    }
  if (b->lines->len == REPLAY_BATCH_LINES)
    {
      g_async_queue_push (f->full, b);
      f->filling = NULL;
    }
}

static void
queue_lines (DatcResultsFile *f, const guint8 *lines, gsize len)
{
  Batch *b = filling (f, BATCH_RAW);
  g_string_append_len (b->bytes, (const char *) lines, (gssize) len);
  g_async_queue_push (f->full, b);
  f->filling = NULL;
}

void
datc_results_file_begin_replay (DatcResultsFile *f)
{
  g_return_if_fail (!f->replaying);
  /* A large write would run the owner's wait on the formatter's thread. */
  g_return_if_fail (f->wait == NULL);
  f->replaying = TRUE;
  f->full = g_async_queue_new ();
  f->empty = g_async_queue_new ();
  for (guint i = 0; i < REPLAY_BATCHES; i++)
    g_async_queue_push (f->empty, batch_new ());
  f->formatter = g_thread_try_new ("datc-lines-fmt", formatter_main, f, NULL);
}

void
datc_results_file_end_replay (DatcResultsFile *f)
{
  if (!f->replaying)
    return;
  if (f->formatter != NULL)
    {
      g_async_queue_push (f->full, filling (f, BATCH_END));
      f->filling = NULL;
      g_thread_join (f->formatter);
      f->formatter = NULL;
    }
  /* Every batch is back. */
  for (guint i = 0; i < REPLAY_BATCHES; i++)
    batch_free (g_async_queue_pop (f->empty));
  g_clear_pointer (&f->full, g_async_queue_unref);
  g_clear_pointer (&f->empty, g_async_queue_unref);
  f->replaying = FALSE;
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
  g_return_val_if_fail (!f->replaying, 0);
  return f->out->len;
}

void
datc_results_file_add_lines (DatcResultsFile *f, const guint8 *lines, gsize len)
{
  if (f->formatter != NULL)
    {
      queue_lines (f, lines, len);
      return;
    }
  g_string_append_len (f->out, (const char *) lines, (gssize) len);
  if (f->replaying)
    replay_stream (f);
}

const char *
datc_results_file_path (DatcResultsFile *f)
{
  g_return_val_if_fail (!f->replaying, NULL);
  return f->path;
}

guint64
datc_results_file_written (DatcResultsFile *f)
{
  g_return_val_if_fail (!f->replaying, 0);
  if (f->checking)
    return f->checked;
  off_t at = lseek (f->fd, 0, SEEK_CUR);
  return at > 0 ? (guint64) at : 0;
}

void
datc_results_file_set_write_wait (DatcResultsFile *f, DatcIoWaitFunc wait, gpointer user_data)
{
  f->wait = wait;
  f->wait_data = user_data;
}

/* A write of fewer bytes stays on the caller's thread: a hand-over costs
 * two wake-ups, more than copying a few hundred lines does, and a slow
 * campaign's commits (the spawn benchmark's: ~70 lines) gain nothing.  A
 * commit at 300,000 tasks/s holds 1-2 MB. */
#define WRITE_ON_THREAD_MIN ((gsize) 256 * 1024)

/* The lines' write(), from `done` on (its own thread with a wait set). */
typedef struct {
  DatcResultsFile *f;
  gsize done;
} WriteJob;

static int
write_job (gpointer data)
{
  WriteJob *j = data;
  const GString *out = j->f->out;
  while (j->done < out->len)
    {
      ssize_t w = write (j->f->fd, out->str + j->done, out->len - j->done);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0)
        return errno;
      j->done += (gsize) w;
    }
  return 0;
}

gboolean
datc_results_file_write (DatcResultsFile *f, GError **error)
{
  /* During a replay, only its thread writes (or the caller's, without one). */
  g_return_val_if_fail (!f->replaying || f->formatter == NULL || g_thread_self () == f->formatter,
                        FALSE);
  WriteJob j = { f, 0 };
  if (f->checking && f->out->len > 0 && !check_earlier (f, &j.done, error))
    {
      g_string_erase (f->out, 0, (gssize) j.done);
      return FALSE;
    }
  gboolean large = f->out->len - j.done >= WRITE_ON_THREAD_MIN;
  if (large && f->wait != NULL && f->writer == NULL && !f->no_writer)
    {
      f->writer = datc_io_thread_new ("datc-results");
      f->no_writer = f->writer == NULL;
    }
  int errsv = large ? datc_io_thread_run (f->writer, write_job, &j, f->wait, f->wait_data)
                    : write_job (&j);
  if (errsv != 0)
    {
      g_string_erase (f->out, 0, (gssize) j.done);
      return io_error (error, errsv, f->path);
    }
  g_string_truncate (f->out, 0);
  return TRUE;
}

gboolean
datc_results_file_filter (DatcResultsFile *f, guint64 n_tasks, DatcResultsKeepFunc keep,
                          gpointer user_data, GError **error)
{
  g_return_val_if_fail (!f->replaying, FALSE);
  if (f->checking && !end_check (f, error))
    return FALSE;
  f->restore = FALSE; /* the start went through: the lines stay */
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
  g_return_val_if_fail (!f->replaying, FALSE);
  if (f->checking && !end_check (f, error))
    return FALSE;
  f->restore = FALSE;
  /* Never copied: the lines it held were right and the others follow
   * them (all derive from the journal, which is durable): nothing to sync
   * and swap. */
  if (f->in_place && g_str_equal (f->path, path))
    return TRUE;
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
