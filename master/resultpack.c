/* resultpack.c: see resultpack.h.  A packed run is a list of items, each
 * a tag byte then its fields:
 *   WHO   site, proxy, host, agent, output     (the next who-index)
 *   HOW   status, class                        (the next how-index)
 *   LINE  who, how, then the numbers below, flags, [message], [oom_evidence]
 *   RAW   a line as its bytes
 * Strings are a varint length then the bytes; numbers are LEB128 varints,
 * signed ones and differences zigzagged.  Differences wrap modulo 2^64,
 * so any value packs, only less well.  The differences follow what
 * results.jsonl usually holds: ids and start times close to the line
 * before's, an agent's stdout right after its previous result's stderr,
 * and stderr right after stdout. */
#include "resultpack.h"

#include <string.h>

#include "ledger.h"
#include "resultsfile.h"

enum { TAG_WHO = 1, TAG_HOW = 2, TAG_LINE = 3, TAG_RAW = 4 };
enum { HAS_MESSAGE = 1, HAS_OOM = 2 };

/* State both sides keep in step over one run. */
typedef struct {
  guint64 id, submitted, started;
  GArray *ends; /* per who-index: where its last stderr ended */
} Prev;

static guint64
zigzag (guint64 v)
{
  return (v << 1) ^ ((guint64) 0 - (v >> 63));
}

static guint64
unzigzag (guint64 v)
{
  return (v >> 1) ^ ((guint64) 0 - (v & 1));
}

static void
put_varint (GByteArray *out, guint64 v)
{
  guint8 b[10];
  guint n = 0;
  while (v >= 0x80)
    {
      b[n++] = (guint8) (v | 0x80);
      v >>= 7;
    }
  b[n++] = (guint8) v;
  g_byte_array_append (out, b, n);
}

static void
put_string (GByteArray *out, const char *s)
{
  gsize n = strlen (s);
  put_varint (out, n);
  g_byte_array_append (out, (const guint8 *) s, (guint) n);
}

/* The index of a tuple of strings, defined in `out` by `tag` the first
 * time it is met. */
static guint
tuple_index (GHashTable *seen, GByteArray *out, guint8 tag, const char *const *s, guint n)
{
  g_autoptr (GByteArray) key = g_byte_array_new ();
  for (guint i = 0; i < n; i++)
    g_byte_array_append (key, (const guint8 *) s[i], (guint) strlen (s[i]) + 1);
  g_autoptr (GBytes) k = g_byte_array_free_to_bytes (g_steal_pointer (&key));
  gpointer v;
  if (g_hash_table_lookup_extended (seen, k, NULL, &v))
    return GPOINTER_TO_UINT (v);
  guint idx = g_hash_table_size (seen);
  g_hash_table_insert (seen, g_bytes_ref (k), GUINT_TO_POINTER (idx));
  g_byte_array_append (out, &tag, 1);
  for (guint i = 0; i < n; i++)
    put_string (out, s[i]);
  return idx;
}

static void
pack_line (GByteArray *out, const DatcResultLine *r, guint who, guint how, Prev *prev)
{
  static const guint8 tag = TAG_LINE;
  if (who >= prev->ends->len)
    g_array_set_size (prev->ends, who + 1);
  guint64 *end = &g_array_index (prev->ends, guint64, who);
  g_byte_array_append (out, &tag, 1);
  put_varint (out, who);
  put_varint (out, how);
  put_varint (out, zigzag (r->id - prev->id));
  put_varint (out, zigzag (r->line - r->id));
  put_varint (out, r->attempt);
  put_varint (out, zigzag ((guint64) r->exit_code));
  put_varint (out, zigzag ((guint64) r->signal));
  put_varint (out, zigzag ((guint64) r->submitted - prev->submitted));
  put_varint (out, zigzag ((guint64) r->started - prev->started));
  put_varint (out, zigzag ((guint64) r->finished - (guint64) r->started));
  put_varint (out, zigzag (r->out_off - *end));
  put_varint (out, r->out_len);
  put_varint (out, zigzag (r->err_off - (r->out_off + r->out_len)));
  put_varint (out, r->err_len);
  put_varint (out, r->out_dropped);
  put_varint (out, r->err_dropped);
  put_varint (out, (r->message ? HAS_MESSAGE : 0) | (r->oom_evidence ? HAS_OOM : 0));
  if (r->message != NULL)
    put_string (out, r->message);
  if (r->oom_evidence != NULL)
    put_string (out, r->oom_evidence);
  prev->id = r->id;
  prev->submitted = (guint64) r->submitted;
  prev->started = (guint64) r->started;
  *end = r->err_off + r->err_len;
}

guint
datc_result_pack (const guint8 *lines, gsize len, GByteArray *out)
{
  g_autoptr (GHashTable) whos
      = g_hash_table_new_full (g_bytes_hash, g_bytes_equal, (GDestroyNotify) g_bytes_unref, NULL);
  g_autoptr (GHashTable) hows
      = g_hash_table_new_full (g_bytes_hash, g_bytes_equal, (GDestroyNotify) g_bytes_unref, NULL);
  g_autoptr (GString) scratch = g_string_new (NULL);
  g_autoptr (GString) again = g_string_new (NULL);
  g_autoptr (GArray) ends = g_array_new (FALSE, TRUE, sizeof (guint64));
  Prev prev = { .ends = ends };
  guint raw = 0;

  for (gsize at = 0; at < len;)
    {
      const guint8 *nl = memchr (lines + at, '\n', len - at);
      gsize n = (nl != NULL ? (gsize) (nl - lines) + 1 : len) - at;
      const char *line = (const char *) lines + at;
      DatcResultLine r;
      at += n;
      /* Packed only when it comes back as the same bytes. */
      if (datc_result_line_parse (line, n, &r, scratch))
        {
          g_string_truncate (again, 0);
          datc_result_line_format (again, &r);
          if (again->len == n && memcmp (again->str, line, n) == 0)
            {
              const char *who[] = { r.site, r.proxy, r.host, r.agent, r.output };
              const char *how[] = { r.status, r.end_class };
              guint w = tuple_index (whos, out, TAG_WHO, who, G_N_ELEMENTS (who));
              guint h = tuple_index (hows, out, TAG_HOW, how, G_N_ELEMENTS (how));
              pack_line (out, &r, w, h, &prev);
              continue;
            }
        }
      static const guint8 tag = TAG_RAW;
      g_byte_array_append (out, &tag, 1);
      put_varint (out, n);
      g_byte_array_append (out, (const guint8 *) line, (guint) n);
      raw++;
    }
  return raw;
}

/* ---- unpacking ----------------------------------------------------- */

typedef struct {
  const guint8 *start, *p, *end;
  const char *bad; /* what was wrong, first failure only */
  gsize bad_at;
} Reader;

static void
fail (Reader *r, const char *what)
{
  if (r->bad == NULL)
    {
      r->bad = what;
      r->bad_at = (gsize) (r->p - r->start);
    }
  r->p = r->end;
}

static guint64
get_varint (Reader *r, const char *what)
{
  guint64 v = 0;
  for (guint shift = 0; r->bad == NULL; shift += 7)
    {
      if (r->p >= r->end || shift > 63)
        {
          fail (r, what);
          break;
        }
      guint8 b = *r->p++;
      v |= (guint64) (b & 0x7f) << shift;
      if ((b & 0x80) == 0)
        break;
    }
  return v;
}

/* A string as a NUL-ended copy, freed with the table it goes into. */
static gchar *
get_string (Reader *r, const char *what)
{
  guint64 n = get_varint (r, what);
  if (r->bad != NULL || n > (guint64) (r->end - r->p) || memchr (r->p, '\0', n) != NULL)
    {
      fail (r, what);
      return g_strdup ("");
    }
  gchar *s = g_strndup ((const char *) r->p, n);
  r->p += n;
  return s;
}

gboolean
datc_result_unpack (const guint8 *packed, gsize len, GString *out, GError **error)
{
  g_autoptr (GPtrArray) whos = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);
  g_autoptr (GPtrArray) hows = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);
  g_autoptr (GArray) ends = g_array_new (FALSE, TRUE, sizeof (guint64));
  Reader rd = { packed, packed, packed + len, NULL, 0 };
  Prev prev = { .ends = ends };

  while (rd.p < rd.end)
    {
      guint8 tag = *rd.p++;
      if (tag == TAG_WHO || tag == TAG_HOW)
        {
          guint n = tag == TAG_WHO ? 5 : 2;
          gchar **s = g_new0 (gchar *, n + 1);
          for (guint i = 0; i < n; i++)
            s[i] = get_string (&rd, "a name cut short");
          g_ptr_array_add (tag == TAG_WHO ? whos : hows, s);
        }
      else if (tag == TAG_RAW)
        {
          guint64 n = get_varint (&rd, "a line's length cut short");
          if (rd.bad == NULL && (n == 0 || n > (guint64) (rd.end - rd.p) || rd.p[n - 1] != '\n'))
            fail (&rd, "a line cut short");
          else if (rd.bad == NULL)
            {
              g_string_append_len (out, (const char *) rd.p, (gssize) n);
              rd.p += n;
            }
        }
      else if (tag == TAG_LINE)
        {
          DatcResultLine r = { 0 };
          guint64 who = get_varint (&rd, "a result cut short");
          guint64 how = get_varint (&rd, "a result cut short");
          if (rd.bad == NULL && (who >= whos->len || how >= hows->len))
            fail (&rd, "a name index beyond those given");
          if (rd.bad != NULL)
            break;
          gchar **w = whos->pdata[who], **h = hows->pdata[how];
          if (who >= ends->len)
            g_array_set_size (ends, (guint) who + 1);
          guint64 *end = &g_array_index (ends, guint64, who);
          r.site = w[0], r.proxy = w[1], r.host = w[2], r.agent = w[3], r.output = w[4];
          r.status = h[0], r.end_class = h[1];
          r.id = prev.id + unzigzag (get_varint (&rd, "a result cut short"));
          r.line = r.id + unzigzag (get_varint (&rd, "a result cut short"));
          guint64 attempt = get_varint (&rd, "a result cut short");
          if (attempt > G_MAXUINT32)
            fail (&rd, "an attempt beyond 32 bits");
          r.attempt = (guint32) attempt;
          r.exit_code = (gint64) unzigzag (get_varint (&rd, "a result cut short"));
          r.signal = (gint64) unzigzag (get_varint (&rd, "a result cut short"));
          r.submitted
              = (gint64) (prev.submitted + unzigzag (get_varint (&rd, "a result cut short")));
          r.started = (gint64) (prev.started + unzigzag (get_varint (&rd, "a result cut short")));
          r.finished
              = (gint64) ((guint64) r.started + unzigzag (get_varint (&rd, "a result cut short")));
          r.out_off = *end + unzigzag (get_varint (&rd, "a result cut short"));
          r.out_len = get_varint (&rd, "a result cut short");
          r.err_off = r.out_off + r.out_len + unzigzag (get_varint (&rd, "a result cut short"));
          r.err_len = get_varint (&rd, "a result cut short");
          r.out_dropped = get_varint (&rd, "a result cut short");
          r.err_dropped = get_varint (&rd, "a result cut short");
          guint64 flags = get_varint (&rd, "a result cut short");
          if (flags & ~(guint64) (HAS_MESSAGE | HAS_OOM))
            fail (&rd, "unknown flags");
          g_autofree gchar *message
              = flags & HAS_MESSAGE ? get_string (&rd, "a message cut short") : NULL;
          g_autofree gchar *oom
              = flags & HAS_OOM ? get_string (&rd, "an oom_evidence cut short") : NULL;
          if (rd.bad != NULL)
            break;
          r.message = message;
          r.oom_evidence = oom;
          datc_result_line_format (out, &r);
          prev.id = r.id;
          prev.submitted = (guint64) r.submitted;
          prev.started = (guint64) r.started;
          *end = r.err_off + r.err_len;
        }
      else
        {
          rd.p--;
          fail (&rd, "an unknown item");
        }
    }
  if (rd.bad != NULL)
    {
      g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_CORRUPT,
                   "packed results, byte %" G_GSIZE_FORMAT ": %s", rd.bad_at, rd.bad);
      return FALSE;
    }
  return TRUE;
}
