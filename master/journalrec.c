/* journalrec.c: the journal record codec (see journalrec.h).
 *
 * One table per record type lists its fields (name, kind, offset in the
 * type's struct); the encoder, the decoder and datc_record_clear walk the
 * same table, so they cannot disagree.  Integers are written by value
 * (msgpack-c packs each in its shortest form whatever the C type), so the
 * bytes are those the ledger wrote by hand before this table existed.
 *
 * The decoder reads the payload with a cursor instead of msgpack_unpack:
 * a record is a flat array (a list field is one array of scalars), and
 * reading it directly allocates nothing but the decoded strings and lists,
 * so a record that declares more elements than it has bytes costs nothing
 * before it is refused.  Each field is a named check; the first failure
 * stops and says the record, the field and what was wrong. */
#include "journalrec.h"

#include <msgpack.h>
#include <stdarg.h>
#include <string.h>

G_DEFINE_QUARK (datc-record-error-quark, datc_record_error)

typedef enum {
  FIELD_U32,        /* guint32 (a larger value is refused) */
  FIELD_U64,        /* guint64 */
  FIELD_I64,        /* gint64 */
  FIELD_BOOL,       /* gboolean */
  FIELD_STR,        /* const char *, never nil */
  FIELD_STR_OR_NIL, /* const char *, nil for NULL */
  FIELD_BYTES,      /* DatcRecBytes: bin, or nil */
  FIELD_KEYS,       /* DatcRecKeys: [id, attempt, ...], attempts 32-bit */
  FIELD_IDS,        /* DatcRecIds: [id, ...], or nil for all */
} FieldKind;

typedef struct {
  const char *name;
  FieldKind kind;
  gsize offset;
  guint64 max;    /* FIELD_U32, FIELD_U64: the largest value accepted; 0: the type's */
  guint64 absent; /* an optional FIELD_U32 missing from an older record reads as this */
} Field;

typedef struct {
  const char *name;
  const Field *fields;
  guint n_fields;
  /* Fields past the first n_required came later and are written always;
   * a record has either all of them or none. */
  guint n_required;
} Shape;

#define F(type, member, kind) { #member, kind, G_STRUCT_OFFSET (type, member), 0, 0 }
#define SHAPE(name, fields) { name, fields, G_N_ELEMENTS (fields), G_N_ELEMENTS (fields) }

static const Field start_fields[] = {
  F (DatcRecStart, epoch, FIELD_U64),
  F (DatcRecStart, time_us, FIELD_I64),
};

static const Field agent_fields[] = {
  /* Agent indices are dense (reused when agents leave): a larger one is
   * not ours, and would size the ledger's agent table. */
  { "idx", FIELD_U32, G_STRUCT_OFFSET (DatcRecAgent, idx), G_MAXUINT16 * 256u, 0 },
  F (DatcRecAgent, agent_id, FIELD_STR),
  F (DatcRecAgent, site, FIELD_STR),
  F (DatcRecAgent, proxy, FIELD_STR),
  F (DatcRecAgent, host, FIELD_STR),
};

static const Field dispatch_fields[] = {
  F (DatcRecDispatch, agent, FIELD_U32),
  F (DatcRecDispatch, time_us, FIELD_I64),
  F (DatcRecDispatch, keys, FIELD_KEYS),
};

static const Field result_fields[] = {
  F (DatcRecResult, id, FIELD_U64),
  F (DatcRecResult, attempt, FIELD_U32),
  F (DatcRecResult, agent, FIELD_U32),
  F (DatcRecResult, final, FIELD_BOOL),
  F (DatcRecResult, status, FIELD_U32),
  F (DatcRecResult, exit_code, FIELD_I64),
  F (DatcRecResult, signal, FIELD_I64),
  F (DatcRecResult, started, FIELD_I64),
  F (DatcRecResult, finished, FIELD_I64),
  F (DatcRecResult, out_off, FIELD_U64),
  F (DatcRecResult, out_len, FIELD_U64),
  F (DatcRecResult, err_off, FIELD_U64),
  F (DatcRecResult, err_len, FIELD_U64),
  F (DatcRecResult, out_dropped, FIELD_U64),
  F (DatcRecResult, err_dropped, FIELD_U64),
  F (DatcRecResult, message, FIELD_STR_OR_NIL),
  /* optional trailing: since results have a class */
  { "end_class", FIELD_U32, G_STRUCT_OFFSET (DatcRecResult, end_class), 0, DATC_REC_NO_CLASS },
  F (DatcRecResult, oom_evidence, FIELD_STR_OR_NIL),
};

static const Field requeue_fields[] = {
  F (DatcRecRequeue, id, FIELD_U64),
  F (DatcRecRequeue, lost, FIELD_BOOL),
};

static const Field source_fields[] = {
  F (DatcRecSource, index, FIELD_U32),  F (DatcRecSource, path, FIELD_STR),
  F (DatcRecSource, sha256, FIELD_STR), F (DatcRecSource, first_id, FIELD_U64),
  F (DatcRecSource, count, FIELD_U64),  F (DatcRecSource, submitted_us, FIELD_I64),
  F (DatcRecSource, format, FIELD_U32), F (DatcRecSource, data, FIELD_BYTES),
};

static const Field proxy_fields[] = {
  F (DatcRecProxy, site, FIELD_STR),    F (DatcRecProxy, proxy, FIELD_STR),
  F (DatcRecProxy, job_id, FIELD_STR),  F (DatcRecProxy, event, FIELD_STR),
  F (DatcRecProxy, time_us, FIELD_I64),
};

static const Field cancel_fields[] = {
  F (DatcRecCancel, time_us, FIELD_I64),
  F (DatcRecCancel, ids, FIELD_IDS),
};

static const Field retry_fields[] = {
  F (DatcRecRetry, time_us, FIELD_I64),
};

static const Field orphans_fields[] = {
  F (DatcRecOrphans, deadline_us, FIELD_I64),
  F (DatcRecOrphans, keys, FIELD_KEYS),
};

static const Field agent_gone_fields[] = {
  F (DatcRecAgentGone, idx, FIELD_U32),
};

static const Field replicate_fields[] = {
  F (DatcRecReplicate, agent, FIELD_U32),
  F (DatcRecReplicate, time_us, FIELD_I64),
  F (DatcRecReplicate, id, FIELD_U64),
  F (DatcRecReplicate, attempt, FIELD_U32),
};

static const Field copy_end_fields[] = {
  F (DatcRecCopyEnd, id, FIELD_U64),
  F (DatcRecCopyEnd, attempt, FIELD_U32),
};

static const Field checkpoint_fields[] = {
  F (DatcRecCheckpoint, time_us, FIELD_I64),
  F (DatcRecCheckpoint, from_bytes, FIELD_U64),
  F (DatcRecCheckpoint, n_tasks, FIELD_U64),
  { "agents", FIELD_U32, G_STRUCT_OFFSET (DatcRecCheckpoint, agents), G_MAXUINT16 * 256u + 1, 0 },
  F (DatcRecCheckpoint, filter, FIELD_BOOL),
  F (DatcRecCheckpoint, runtimes, FIELD_BYTES),
  F (DatcRecCheckpoint, sites, FIELD_BYTES),
  F (DatcRecCheckpoint, seen, FIELD_BYTES),
};

static const Field tasks_fields[] = {
  F (DatcRecTasks, first_id, FIELD_U64),
  F (DatcRecTasks, entries, FIELD_BYTES),
};

static const Field lines_fields[] = {
  F (DatcRecLines, packed, FIELD_BYTES),
};

/* Every record type: its name in messages, its fields.  The struct of a
 * type is the union member at &record->u. */
static const Shape shapes[] = {
  [DATC_REC_START] = SHAPE ("start", start_fields),
  [DATC_REC_AGENT] = SHAPE ("agent", agent_fields),
  [DATC_REC_DISPATCH] = SHAPE ("dispatch", dispatch_fields),
  [DATC_REC_RESULT] = { "result", result_fields, G_N_ELEMENTS (result_fields), 16 },
  [DATC_REC_REQUEUE] = SHAPE ("requeue", requeue_fields),
  [DATC_REC_SOURCE] = SHAPE ("source", source_fields),
  [DATC_REC_PROXY] = SHAPE ("proxy", proxy_fields),
  [DATC_REC_CANCEL] = SHAPE ("cancel", cancel_fields),
  [DATC_REC_RETRY] = SHAPE ("retry", retry_fields),
  [DATC_REC_ORPHANS] = SHAPE ("orphans", orphans_fields),
  [DATC_REC_AGENT_GONE] = SHAPE ("agent gone", agent_gone_fields),
  [DATC_REC_REPLICATE] = SHAPE ("replicate", replicate_fields),
  [DATC_REC_COPY_END] = SHAPE ("copy end", copy_end_fields),
  [DATC_REC_CHECKPOINT] = SHAPE ("checkpoint", checkpoint_fields),
  [DATC_REC_TASKS] = SHAPE ("tasks", tasks_fields),
  [DATC_REC_LINES] = SHAPE ("lines", lines_fields),
};

static const Shape *
shape_of (guint64 type)
{
  if (type < G_N_ELEMENTS (shapes) && shapes[type].name != NULL)
    return &shapes[type];
  return NULL;
}

const char *
datc_record_type_name (DatcRecType type)
{
  const Shape *s = shape_of (type);
  return s != NULL ? s->name : "unknown";
}

#define FIELD_AT(base, f) ((gpointer) ((guint8 *) (base) + (f)->offset))
#define CFIELD_AT(base, f) ((gconstpointer) ((const guint8 *) (base) + (f)->offset))

/* ----------------------------------------------------------------- encode */

static int
byte_array_write (void *data, const char *buf, size_t len)
{
  g_byte_array_append (data, (const guint8 *) buf, (guint) len);
  return 0;
}

static void
pack_str (msgpack_packer *pk, const char *s)
{
  size_t len = strlen (s);
  msgpack_pack_str (pk, len);
  msgpack_pack_str_body (pk, s, len);
}

static void
encode_field (msgpack_packer *pk, const Field *f, gconstpointer base)
{
  gconstpointer p = CFIELD_AT (base, f);

  switch (f->kind)
    {
    case FIELD_U32:
      msgpack_pack_uint32 (pk, *(const guint32 *) p);
      break;
    case FIELD_U64:
      msgpack_pack_uint64 (pk, *(const guint64 *) p);
      break;
    case FIELD_I64:
      msgpack_pack_int64 (pk, *(const gint64 *) p);
      break;
    case FIELD_BOOL:
      if (*(const gboolean *) p)
        msgpack_pack_true (pk);
      else
        msgpack_pack_false (pk);
      break;
    case FIELD_STR:
      {
        const char *s = *(const char *const *) p;
        pack_str (pk, s != NULL ? s : "");
        break;
      }
    case FIELD_STR_OR_NIL:
      {
        const char *s = *(const char *const *) p;
        if (s == NULL)
          msgpack_pack_nil (pk);
        else
          pack_str (pk, s);
        break;
      }
    case FIELD_BYTES:
      {
        const DatcRecBytes *b = p;
        if (b->data == NULL)
          msgpack_pack_nil (pk);
        else
          {
            msgpack_pack_bin (pk, b->len);
            msgpack_pack_bin_body (pk, b->data, b->len);
          }
        break;
      }
    case FIELD_KEYS:
      {
        const DatcRecKeys *k = p;
        msgpack_pack_array (pk, k->n * 2);
        for (guint i = 0; i < k->n; i++)
          {
            msgpack_pack_uint64 (pk, k->v[i].id);
            msgpack_pack_uint32 (pk, k->v[i].attempt);
          }
        break;
      }
    case FIELD_IDS:
      {
        const DatcRecIds *ids = p;
        if (ids->all)
          {
            msgpack_pack_nil (pk);
            break;
          }
        msgpack_pack_array (pk, ids->n);
        for (guint i = 0; i < ids->n; i++)
          msgpack_pack_uint64 (pk, ids->v[i]);
        break;
      }
    }
}

void
datc_record_encode (const DatcRecord *rec, GByteArray *out)
{
  const Shape *shape = shape_of (rec->type);
  g_return_if_fail (shape != NULL);

  msgpack_packer pk;
  msgpack_packer_init (&pk, out, byte_array_write);
  msgpack_pack_array (&pk, shape->n_fields + 1);
  msgpack_pack_uint8 (&pk, (guint8) rec->type);
  for (guint i = 0; i < shape->n_fields; i++)
    encode_field (&pk, &shape->fields[i], &rec->u);
}

/* ------------------------------------------------------------------ clear */

/* Whether a field of this kind owns memory once decoded. */
static gboolean
kind_owns (FieldKind kind)
{
  return kind == FIELD_STR || kind == FIELD_STR_OR_NIL || kind == FIELD_BYTES || kind == FIELD_KEYS
         || kind == FIELD_IDS;
}

/* Per type, a bit per field that owns memory: a replay clears millions of
 * records, most of whose fields are integers. */
static guint32 owning[G_N_ELEMENTS (shapes)];

static void
find_owning (void)
{
  static gsize done = 0;

  if (g_once_init_enter (&done))
    {
      for (guint t = 0; t < G_N_ELEMENTS (shapes); t++)
        {
          g_assert (shapes[t].n_fields <= 32); /* a bit per field */
          for (guint i = 0; i < shapes[t].n_fields; i++)
            if (kind_owns (shapes[t].fields[i].kind))
              owning[t] |= 1u << i;
        }
      g_once_init_leave (&done, 1);
    }
}

static void
clear_fields (const Shape *shape, gpointer base)
{
  find_owning ();
  for (guint32 m = owning[shape - shapes]; m != 0; m &= m - 1)
    {
      /* The lowest bit set: g_bit_nth_lsf tests them one by one. */
      const Field *f = &shape->fields[__builtin_ctz (m)];
      gpointer p = FIELD_AT (base, f);
      switch (f->kind)
        {
        case FIELD_STR:
        case FIELD_STR_OR_NIL:
          g_free ((gpointer) * (const char **) p);
          *(const char **) p = NULL;
          break;
        case FIELD_BYTES:
          g_free ((gpointer) ((DatcRecBytes *) p)->data);
          ((DatcRecBytes *) p)->data = NULL;
          ((DatcRecBytes *) p)->len = 0;
          break;
        case FIELD_KEYS:
          g_free ((gpointer) ((DatcRecKeys *) p)->v);
          ((DatcRecKeys *) p)->v = NULL;
          ((DatcRecKeys *) p)->n = 0;
          break;
        case FIELD_IDS:
          g_free ((gpointer) ((DatcRecIds *) p)->v);
          ((DatcRecIds *) p)->v = NULL;
          ((DatcRecIds *) p)->n = 0;
          break;
        case FIELD_U32:
        case FIELD_U64:
        case FIELD_I64:
        case FIELD_BOOL:
          break;
        }
    }
}

void
datc_record_clear (DatcRecord *rec)
{
  if (rec == NULL)
    return;
  const Shape *shape = shape_of (rec->type);
  /* Not a memset of the whole record: a replay clears one per record,
   * millions, and the owned pointers are all that matter. */
  if (shape != NULL)
    clear_fields (shape, &rec->u);
}

/* ----------------------------------------------------------------- decode */

/* A cursor over the payload, and where it is, for messages. */
typedef struct {
  const guint8 *p, *end;
  const Shape *shape;
  guint index; /* the field being read, from 1 (0: the type) */
  const char *name;
  GError **error;
} Reader;

static gboolean read_fail (Reader *r, const char *format, ...) G_GNUC_PRINTF (2, 3);

static gboolean
read_fail (Reader *r, const char *format, ...)
{
  va_list ap;
  va_start (ap, format);
  g_autofree gchar *why = g_strdup_vprintf (format, ap);
  va_end (ap);
  g_set_error (r->error, DATC_RECORD_ERROR, DATC_RECORD_ERROR_MALFORMED,
               "%s record: field %u (%s): %s", r->shape != NULL ? r->shape->name : "journal",
               r->index, r->name, why);
  return FALSE;
}

static guint64
read_be (const guint8 *p, guint n)
{
  guint64 v = 0;
  if (n == 8)
    {
      memcpy (&v, p, 8);
      return GUINT64_FROM_BE (v);
    }
  for (guint i = 0; i < n; i++)
    v = (v << 8) | p[i];
  return v;
}

/* Takes n bytes, or fails as truncated. */
static const guint8 *
take (Reader *r, gsize n)
{
  if ((gsize) (r->end - r->p) < n)
    {
      read_fail (r, "truncated: %" G_GSIZE_FORMAT " bytes needed, %" G_GSIZE_FORMAT " left", n,
                 (gsize) (r->end - r->p));
      return NULL;
    }
  const guint8 *at = r->p;
  r->p += n;
  return at;
}

/* An integer of any msgpack encoding: its value as a u64, and whether it
 * is negative (then the u64 holds the two's complement). */
static gboolean
read_int (Reader *r, guint64 *v, gboolean *negative)
{
  const guint8 *b = take (r, 1);
  if (b == NULL)
    return FALSE;
  *negative = FALSE;
  if (*b <= 0x7f)
    {
      *v = *b;
      return TRUE;
    }
  if (*b >= 0xe0)
    {
      *v = (guint64) (gint64) (gint8) *b;
      *negative = TRUE;
      return TRUE;
    }
  guint width = 0;
  gboolean is_signed = FALSE;
  switch (*b)
    {
    case 0xcc:
      width = 1;
      break;
    case 0xcd:
      width = 2;
      break;
    case 0xce:
      width = 4;
      break;
    case 0xcf:
      width = 8;
      break;
    case 0xd0:
      width = 1, is_signed = TRUE;
      break;
    case 0xd1:
      width = 2, is_signed = TRUE;
      break;
    case 0xd2:
      width = 4, is_signed = TRUE;
      break;
    case 0xd3:
      width = 8, is_signed = TRUE;
      break;
    default:
      return read_fail (r, "expected an integer, found type byte 0x%02x", *b);
    }
  const guint8 *d = take (r, width);
  if (d == NULL)
    return FALSE;
  guint64 raw = read_be (d, width);
  if (is_signed && width < 8 && (raw >> (width * 8 - 1)) != 0)
    raw |= ~(guint64) 0 << (width * 8); /* sign-extend */
  *v = raw;
  *negative = is_signed && (gint64) raw < 0;
  return TRUE;
}

static gboolean
read_uint (Reader *r, guint64 max, guint64 *out)
{
  gboolean negative;
  if (!read_int (r, out, &negative))
    return FALSE;
  if (negative)
    return read_fail (r, "expected an unsigned integer, found %" G_GINT64_FORMAT, (gint64) *out);
  if (*out > max)
    return read_fail (r, "%" G_GUINT64_FORMAT " is over the limit of %" G_GUINT64_FORMAT, *out,
                      max);
  return TRUE;
}

static gboolean
read_sint (Reader *r, gint64 *out)
{
  guint64 v;
  gboolean negative;
  if (!read_int (r, &v, &negative))
    return FALSE;
  if (!negative && v > G_MAXINT64)
    return read_fail (r, "%" G_GUINT64_FORMAT " is over the limit of a signed integer", v);
  *out = (gint64) v;
  return TRUE;
}

static gboolean
peek_nil (Reader *r)
{
  if (r->p < r->end && *r->p == 0xc0)
    {
      r->p++;
      return TRUE;
    }
  return FALSE;
}

/* An array header and its count. */
static gboolean
read_array_header (Reader *r, guint32 *n)
{
  const guint8 *b = take (r, 1);
  if (b == NULL)
    return FALSE;
  guint width = 0;
  if (*b >= 0x90 && *b <= 0x9f)
    *n = *b & 0x0f;
  else if (*b == 0xdc)
    width = 2;
  else if (*b == 0xdd)
    width = 4;
  else
    return read_fail (r, "expected an array, found type byte 0x%02x", *b);
  if (width > 0)
    {
      const guint8 *d = take (r, width);
      if (d == NULL)
        return FALSE;
      *n = (guint32) read_be (d, width);
    }
  return TRUE;
}

/* A list's header: its count must fit in the bytes left (every element
 * takes at least one), so nothing is allocated for a lie. */
static gboolean
read_array (Reader *r, guint32 *n)
{
  if (!read_array_header (r, n))
    return FALSE;
  if (*n > (gsize) (r->end - r->p))
    return read_fail (r, "an array of %u elements in %" G_GSIZE_FORMAT " bytes", *n,
                      (gsize) (r->end - r->p));
  return TRUE;
}

/* A str (bin = FALSE) or bin body: its bytes, borrowed from the payload. */
static gboolean
read_blob (Reader *r, gboolean bin, const guint8 **data, gsize *len)
{
  const guint8 *b = take (r, 1);
  if (b == NULL)
    return FALSE;
  guint width = 0;
  *len = 0;
  if (!bin && *b >= 0xa0 && *b <= 0xbf)
    *len = *b & 0x1f;
  else if (*b == (bin ? 0xc4 : 0xd9))
    width = 1;
  else if (*b == (bin ? 0xc5 : 0xda))
    width = 2;
  else if (*b == (bin ? 0xc6 : 0xdb))
    width = 4;
  else
    return read_fail (r, "expected %s, found type byte 0x%02x", bin ? "bytes or nil" : "a string",
                      *b);
  if (width > 0)
    {
      const guint8 *d = take (r, width);
      if (d == NULL)
        return FALSE;
      *len = (gsize) read_be (d, width);
    }
  return (*data = take (r, *len)) != NULL;
}

static gboolean
read_str (Reader *r, const char **out)
{
  const guint8 *data;
  gsize len;
  if (!read_blob (r, FALSE, &data, &len))
    return FALSE;
  *out = g_strndup ((const char *) data, len);
  return TRUE;
}

static gboolean
read_keys (Reader *r, DatcRecKeys *keys)
{
  guint32 n;
  if (!read_array (r, &n))
    return FALSE;
  if (n % 2 != 0)
    return read_fail (r, "%u integers, not (id, attempt) pairs", n);
  DatcTaskKey *v = g_new (DatcTaskKey, MAX (n / 2, 1u));
  keys->v = v; /* owned from here: freed with the record */
  keys->n = 0;
  for (guint32 i = 0; i < n / 2; i++)
    {
      guint64 id, attempt;
      if (!read_uint (r, G_MAXUINT64, &id) || !read_uint (r, G_MAXUINT32, &attempt))
        return FALSE;
      v[i].id = id;
      v[i].attempt = (guint32) attempt;
      keys->n++;
    }
  return TRUE;
}

static gboolean
read_ids (Reader *r, DatcRecIds *ids)
{
  if (peek_nil (r))
    {
      ids->all = TRUE;
      return TRUE;
    }
  guint32 n;
  if (!read_array (r, &n))
    return FALSE;
  guint64 *v = g_new (guint64, MAX (n, 1u));
  ids->v = v;
  for (guint32 i = 0; i < n; i++)
    {
      if (!read_uint (r, G_MAXUINT64, &v[i]))
        return FALSE;
      ids->n++;
    }
  return TRUE;
}

static gboolean
decode_field (Reader *r, const Field *f, gpointer base)
{
  gpointer p = FIELD_AT (base, f);
  guint64 u;

  /* Most integers of a record (ids, attempts, statuses, zeros) are a
   * positive fixint: the byte is the value. */
  if (G_LIKELY (r->p < r->end && *r->p <= 0x7f && (f->max == 0 || *r->p <= f->max)))
    switch (f->kind)
      {
      case FIELD_U32:
        *(guint32 *) p = *r->p++;
        return TRUE;
      case FIELD_U64:
        *(guint64 *) p = *r->p++;
        return TRUE;
      case FIELD_I64:
        *(gint64 *) p = *r->p++;
        return TRUE;
      default:
        break;
      }

  switch (f->kind)
    {
    case FIELD_U32:
      if (!read_uint (r, f->max != 0 ? f->max : G_MAXUINT32, &u))
        return FALSE;
      *(guint32 *) p = (guint32) u;
      return TRUE;
    case FIELD_U64:
      return read_uint (r, f->max != 0 ? f->max : G_MAXUINT64, p);
    case FIELD_I64:
      return read_sint (r, p);
    case FIELD_BOOL:
      {
        const guint8 *b = take (r, 1);
        if (b == NULL)
          return FALSE;
        if (*b != 0xc2 && *b != 0xc3)
          return read_fail (r, "expected a boolean, found type byte 0x%02x", *b);
        *(gboolean *) p = *b == 0xc3;
        return TRUE;
      }
    case FIELD_STR:
      return read_str (r, p);
    case FIELD_STR_OR_NIL:
      if (peek_nil (r))
        return TRUE;
      return read_str (r, p);
    case FIELD_BYTES:
      {
        DatcRecBytes *b = p;
        const guint8 *data;
        if (peek_nil (r))
          return TRUE;
        if (!read_blob (r, TRUE, &data, &b->len))
          return FALSE;
        /* Non-NULL even when empty: NULL means nil. */
        guint8 *copy = g_malloc (MAX (b->len, 1u));
        memcpy (copy, data, b->len);
        b->data = copy;
        return TRUE;
      }
    case FIELD_KEYS:
      return read_keys (r, p);
    case FIELD_IDS:
      return read_ids (r, p);
    }
  g_assert_not_reached ();
}

/* A record refused part way: what it took is freed, and it is left as
 * decode found it zeroed, holding nothing. */
static gboolean
refuse (DatcRecord *rec)
{
  datc_record_clear (rec);
  memset (rec, 0, sizeof *rec);
  return FALSE;
}

gboolean
datc_record_decode (const guint8 *payload, gsize len, DatcRecord *rec, GError **error)
{
  Reader r = { payload, payload + len, NULL, 0, "type", error };
  guint32 n;
  guint64 type;

  memset (rec, 0, sizeof *rec);
  /* The record's own count is held to its type's fields below. */
  if (!read_array_header (&r, &n))
    return FALSE;
  if (n < 1)
    return read_fail (&r, "an empty record");
  if (!read_uint (&r, G_MAXUINT64, &type))
    return FALSE;
  const Shape *shape = shape_of (type);
  if (shape == NULL)
    return read_fail (&r, "unknown record type %" G_GUINT64_FORMAT, type);
  r.shape = shape;
  if (n - 1 != shape->n_fields && n - 1 != shape->n_required)
    {
      if (shape->n_required == shape->n_fields)
        g_set_error (error, DATC_RECORD_ERROR, DATC_RECORD_ERROR_MALFORMED,
                     "%s record has %u fields, not %u", shape->name, n - 1, shape->n_fields);
      else
        g_set_error (error, DATC_RECORD_ERROR, DATC_RECORD_ERROR_MALFORMED,
                     "%s record has %u fields, not %u or %u", shape->name, n - 1, shape->n_fields,
                     shape->n_required);
      return FALSE;
    }
  rec->type = (DatcRecType) type;
  for (guint i = 0; i < shape->n_fields; i++)
    {
      const Field *f = &shape->fields[i];
      r.index = i + 1;
      r.name = f->name;
      if (i >= n - 1)
        {
          /* An optional field an older datc did not write. */
          if (f->kind == FIELD_U32)
            *(guint32 *) FIELD_AT (&rec->u, f) = (guint32) f->absent;
          continue;
        }
      if (!decode_field (&r, f, &rec->u))
        {
          return refuse (rec);
        }
    }
  if (r.p != r.end)
    {
      g_set_error (error, DATC_RECORD_ERROR, DATC_RECORD_ERROR_MALFORMED,
                   "%s record: %" G_GSIZE_FORMAT " bytes after its last field", shape->name,
                   (gsize) (r.end - r.p));
      return refuse (rec);
    }
  return TRUE;
}
