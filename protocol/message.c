/* message.c: the datc wire codec.
 *
 * Every body on the wire is a fixed positional record, so each record is
 * described once, as a table of fields (name, kind, offset in its struct).
 * The same tables drive the encoder, the shape check, the copy and the
 * destructors, which keeps the four in step by construction.
 *
 * Decoding is a chain of named checks, each stopping at the first failure:
 *   1. size cap;
 *   2. a pre-scan of the raw bytes that allocates nothing (msgpack-c
 *      preallocates from declared counts, so a frame that lies about a count
 *      must never reach it);
 *   3. msgpack_unpack_next;
 *   4. an exact shape check of the object tree, which allocates nothing
 *      except the error;
 *   5. a copy into the typed structs, which cannot fail.
 * No msgpack_object leaves this file.
 *
 * The streaming TASKS encoder is written out by hand for the master's hot
 * path (no allocation per task beyond growing the output); test-message.c
 * proves it writes the same bytes as datc_msg_encode(). */

#include "message.h"
#include "datc-limits.h"

#include <msgpack.h>
#include <stdarg.h>
#include <string.h>

G_DEFINE_QUARK (datc-wire-error-quark, datc_wire_error)

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (msgpack_unpacked, msgpack_unpacked_destroy)

/* ------------------------------------------------------------------ names */

static const char *const type_names[] = {
  [DATC_MSG_HELLO] = "HELLO",         [DATC_MSG_WELCOME] = "WELCOME",
  [DATC_MSG_CREDIT] = "CREDIT",       [DATC_MSG_TASKS] = "TASKS",
  [DATC_MSG_RESULT] = "RESULT",       [DATC_MSG_ACK] = "ACK",
  [DATC_MSG_HEARTBEAT] = "HEARTBEAT", [DATC_MSG_CANCEL] = "CANCEL",
  [DATC_MSG_RETIRE] = "RETIRE",       [DATC_MSG_BYE] = "BYE",
};

const char *
datc_msg_type_name (DatcMsgType type)
{
  if ((guint) type < G_N_ELEMENTS (type_names) && type_names[type] != NULL)
    return type_names[type];
  return "UNKNOWN";
}

static const char *const status_names[] = {
  [DATC_STATUS_EXITED] = "exited",       [DATC_STATUS_SIGNALED] = "signaled",
  [DATC_STATUS_TIMEOUT] = "timeout",     [DATC_STATUS_SPAWN_FAILED] = "spawn-failed",
  [DATC_STATUS_CANCELLED] = "cancelled", [DATC_STATUS_DRAINED] = "drained",
  [DATC_STATUS_REFUSED] = "refused",
};

guint
datc_task_key_hash (gconstpointer key)
{
  const DatcTaskKey *k = key;
  return g_int64_hash (&k->id) ^ (k->attempt * 2654435761u);
}

gboolean
datc_task_key_equal (gconstpointer a, gconstpointer b)
{
  const DatcTaskKey *x = a, *y = b;
  return x->id == y->id && x->attempt == y->attempt;
}

const char *
datc_task_status_name (DatcTaskStatus status)
{
  if ((guint) status < G_N_ELEMENTS (status_names))
    return status_names[status];
  return "unknown";
}

/* ----------------------------------------------------------------- shapes */

typedef enum {
  FIELD_U32,           /* guint32 */
  FIELD_U64,           /* guint64 */
  FIELD_I32,           /* gint32 */
  FIELD_I64,           /* gint64 */
  FIELD_BOOL,          /* gboolean */
  FIELD_STATUS,        /* DatcTaskStatus: uint <= DATC_STATUS_LAST */
  FIELD_NAME,          /* gchar *: str of at most DATC_NAME_MAX bytes */
  FIELD_REASON,        /* gchar *: str of at most DATC_REASON_MAX bytes */
  FIELD_REASON_OR_NIL, /* gchar *: as FIELD_REASON, or nil for NULL */
  FIELD_STR_OR_NIL,    /* gchar *: str (DATC_STRING_MAX) or nil for NULL */
  FIELD_BIN,           /* GBytes *: bin of at most DATC_OUTPUT_MAX bytes */
  FIELD_ARGV,          /* gchar **: non-empty [str...] or nil */
  FIELD_ENV,           /* gchar ** of "KEY=VALUE": {str: str} or nil */
  FIELD_SPEC,          /* DatcTaskSpec, inline */
  FIELD_KEYS,          /* GArray of DatcTaskKey */
  FIELD_TASKS,         /* GPtrArray of DatcTask *, owning */
  FIELD_RESULTS,       /* GPtrArray of DatcResult *, owning */
} FieldKind;

typedef struct {
  const char *name;
  FieldKind kind;
  gsize offset;
  const char *noun; /* list kinds: what one element is called in errors */
} Field;

typedef struct {
  const Field *fields;
  guint n_fields;
  /* Fields past the first n_required are optional trailing ones (string or
   * nil kinds), added after version 1 shipped: a sender leaves them out
   * while they are NULL, so its frame is the one an older peer expects, and
   * a receiver reads a missing one as NULL. */
  guint n_required;
  /* A rule across fields, run after each field passed on its own. */
  gboolean (*check_whole) (const msgpack_object *items, GError **error);
} Shape;

#define SHAPE(fields, whole) { fields, G_N_ELEMENTS (fields), G_N_ELEMENTS (fields), whole }
#define SHAPE_OPTIONAL(fields, required, whole) { fields, G_N_ELEMENTS (fields), required, whole }

static const Field key_fields[] = {
  { "id", FIELD_U64, G_STRUCT_OFFSET (DatcTaskKey, id) },
  { "attempt", FIELD_U32, G_STRUCT_OFFSET (DatcTaskKey, attempt) },
};

static const Field spec_fields[] = {
  { "argv", FIELD_ARGV, G_STRUCT_OFFSET (DatcTaskSpec, argv) },
  { "sh", FIELD_STR_OR_NIL, G_STRUCT_OFFSET (DatcTaskSpec, sh) },
  { "env", FIELD_ENV, G_STRUCT_OFFSET (DatcTaskSpec, env) },
  { "cwd", FIELD_STR_OR_NIL, G_STRUCT_OFFSET (DatcTaskSpec, cwd) },
  { "timeout_ms", FIELD_U32, G_STRUCT_OFFSET (DatcTaskSpec, timeout_ms) },
  { "est_runtime_ms", FIELD_U32, G_STRUCT_OFFSET (DatcTaskSpec, est_runtime_ms) },
};

static const Field task_fields[] = {
  { "id", FIELD_U64, G_STRUCT_OFFSET (DatcTask, id) },
  { "attempt", FIELD_U32, G_STRUCT_OFFSET (DatcTask, attempt) },
  { "spec", FIELD_SPEC, G_STRUCT_OFFSET (DatcTask, spec) },
};

static const Field result_fields[] = {
  { "id", FIELD_U64, G_STRUCT_OFFSET (DatcResult, id) },
  { "attempt", FIELD_U32, G_STRUCT_OFFSET (DatcResult, attempt) },
  { "status", FIELD_STATUS, G_STRUCT_OFFSET (DatcResult, status) },
  { "exit_code", FIELD_I32, G_STRUCT_OFFSET (DatcResult, exit_code) },
  { "signal", FIELD_I32, G_STRUCT_OFFSET (DatcResult, signal) },
  { "started_us", FIELD_I64, G_STRUCT_OFFSET (DatcResult, started_us) },
  { "finished_us", FIELD_I64, G_STRUCT_OFFSET (DatcResult, finished_us) },
  { "stdout", FIELD_BIN, G_STRUCT_OFFSET (DatcResult, out) },
  { "stderr", FIELD_BIN, G_STRUCT_OFFSET (DatcResult, err) },
  { "stdout_dropped", FIELD_U64, G_STRUCT_OFFSET (DatcResult, out_dropped) },
  { "stderr_dropped", FIELD_U64, G_STRUCT_OFFSET (DatcResult, err_dropped) },
  { "message", FIELD_REASON_OR_NIL, G_STRUCT_OFFSET (DatcResult, message) },
  /* optional trailing */
  { "oom_evidence", FIELD_REASON_OR_NIL, G_STRUCT_OFFSET (DatcResult, oom_evidence) },
};

static const Field hello_fields[] = {
  { "agent_id", FIELD_NAME, G_STRUCT_OFFSET (DatcHello, agent_id) },
  { "site", FIELD_NAME, G_STRUCT_OFFSET (DatcHello, site) },
  { "proxy", FIELD_NAME, G_STRUCT_OFFSET (DatcHello, proxy) },
  { "host", FIELD_NAME, G_STRUCT_OFFSET (DatcHello, host) },
  { "pid", FIELD_U32, G_STRUCT_OFFSET (DatcHello, pid) },
  { "slots", FIELD_U32, G_STRUCT_OFFSET (DatcHello, slots) },
  { "walltime_end_us", FIELD_I64, G_STRUCT_OFFSET (DatcHello, walltime_end_us) },
  { "session", FIELD_U32, G_STRUCT_OFFSET (DatcHello, session) },
  { "held", FIELD_KEYS, G_STRUCT_OFFSET (DatcHello, held), "held key" },
};

static const Field welcome_fields[] = {
  { "epoch", FIELD_U64, G_STRUCT_OFFSET (DatcWelcome, epoch) },
  { "session", FIELD_U32, G_STRUCT_OFFSET (DatcWelcome, session) },
  { "heartbeat_ms", FIELD_U32, G_STRUCT_OFFSET (DatcWelcome, heartbeat_ms) },
  { "timeout_ms", FIELD_U32, G_STRUCT_OFFSET (DatcWelcome, timeout_ms) },
};

static const Field credit_fields[] = {
  { "session", FIELD_U32, G_STRUCT_OFFSET (DatcCredit, session) },
  { "limit", FIELD_U64, G_STRUCT_OFFSET (DatcCredit, limit) },
};

static const Field tasks_fields[] = {
  { "session", FIELD_U32, G_STRUCT_OFFSET (DatcTasks, session) },
  { "tasks", FIELD_TASKS, G_STRUCT_OFFSET (DatcTasks, tasks), "task" },
};

static const Field results_fields[] = {
  { "results", FIELD_RESULTS, G_STRUCT_OFFSET (DatcResults, results), "result" },
};

/* ACK and CANCEL: the body's only field is the union member itself. */
static const Field keys_fields[] = {
  { "keys", FIELD_KEYS, 0, "key" },
};

static const Field heartbeat_fields[] = {
  { "epoch", FIELD_U64, G_STRUCT_OFFSET (DatcHeartbeat, epoch) },
  { "session", FIELD_U32, G_STRUCT_OFFSET (DatcHeartbeat, session) },
  { "received", FIELD_U64, G_STRUCT_OFFSET (DatcHeartbeat, received) },
  { "running", FIELD_U32, G_STRUCT_OFFSET (DatcHeartbeat, running) },
  { "rehello", FIELD_BOOL, G_STRUCT_OFFSET (DatcHeartbeat, rehello) },
};

/* RETIRE and BYE. */
static const Field reason_fields[] = {
  { "reason", FIELD_REASON, 0 },
};

static gboolean check_spec_whole (const msgpack_object *items, GError **error);

static const Shape key_shape = SHAPE (key_fields, NULL);
static const Shape spec_shape = SHAPE (spec_fields, check_spec_whole);
static const Shape task_shape = SHAPE (task_fields, NULL);
static const Shape result_shape = SHAPE_OPTIONAL (result_fields, 12, NULL);
static const Shape hello_shape = SHAPE (hello_fields, NULL);
static const Shape welcome_shape = SHAPE (welcome_fields, NULL);
static const Shape credit_shape = SHAPE (credit_fields, NULL);
static const Shape tasks_shape = SHAPE (tasks_fields, NULL);
static const Shape results_shape = SHAPE (results_fields, NULL);
static const Shape keys_shape = SHAPE (keys_fields, NULL);
static const Shape heartbeat_shape = SHAPE (heartbeat_fields, NULL);
static const Shape reason_shape = SHAPE (reason_fields, NULL);

/* Every body is read and written at &msg->u: each union member starts there. */
static const Shape *const body_shapes[] = {
  [DATC_MSG_HELLO] = &hello_shape,         [DATC_MSG_WELCOME] = &welcome_shape,
  [DATC_MSG_CREDIT] = &credit_shape,       [DATC_MSG_TASKS] = &tasks_shape,
  [DATC_MSG_RESULT] = &results_shape,      [DATC_MSG_ACK] = &keys_shape,
  [DATC_MSG_HEARTBEAT] = &heartbeat_shape, [DATC_MSG_CANCEL] = &keys_shape,
  [DATC_MSG_RETIRE] = &reason_shape,       [DATC_MSG_BYE] = &reason_shape,
};

static const Shape *
body_shape (guint64 type)
{
  if (type < G_N_ELEMENTS (body_shapes))
    return body_shapes[type];
  return NULL;
}

/* The element record of a list kind (FIELD_KEYS, FIELD_TASKS, FIELD_RESULTS). */
static const Shape *
element_shape (FieldKind kind)
{
  if (kind == FIELD_KEYS)
    return &key_shape;
  if (kind == FIELD_TASKS)
    return &task_shape;
  return &result_shape;
}

#define FIELD_AT(base, f) ((gpointer) ((guint8 *) (base) + (f)->offset))
#define CFIELD_AT(base, f) ((gconstpointer) ((const guint8 *) (base) + (f)->offset))

/* ------------------------------------------------------- construct, free */

static void clear_record (const Shape *shape, gpointer base);

void
datc_task_spec_clear (DatcTaskSpec *spec)
{
  if (spec == NULL)
    return;
  clear_record (&spec_shape, spec);
  memset (spec, 0, sizeof *spec);
}

void
datc_task_free (DatcTask *task)
{
  if (task == NULL)
    return;
  datc_task_spec_clear (&task->spec);
  g_free (task);
}

DatcResult *
datc_result_new (guint64 id, guint32 attempt)
{
  DatcResult *result = g_new0 (DatcResult, 1);

  result->id = id;
  result->attempt = attempt;
  return result;
}

void
datc_result_free (DatcResult *result)
{
  if (result == NULL)
    return;
  clear_record (&result_shape, result);
  g_free (result);
}

static GArray *
keys_new (guint reserve)
{
  return g_array_sized_new (FALSE, TRUE, sizeof (DatcTaskKey), reserve);
}

static GPtrArray *
list_new (FieldKind kind, guint reserve)
{
  if (kind == FIELD_TASKS)
    return g_ptr_array_new_full (reserve, (GDestroyNotify) datc_task_free);
  return g_ptr_array_new_full (reserve, (GDestroyNotify) datc_result_free);
}

DatcMsg *
datc_msg_new (DatcMsgType type)
{
  const Shape *shape = body_shape (type);

  g_return_val_if_fail (shape != NULL, NULL);

  DatcMsg *msg = g_new0 (DatcMsg, 1);
  msg->type = type;
  for (guint i = 0; i < shape->n_fields; i++)
    {
      const Field *f = &shape->fields[i];
      if (f->kind == FIELD_KEYS)
        *(GArray **) FIELD_AT (&msg->u, f) = keys_new (0);
      else if (f->kind == FIELD_TASKS || f->kind == FIELD_RESULTS)
        *(GPtrArray **) FIELD_AT (&msg->u, f) = list_new (f->kind, 0);
    }
  return msg;
}

void
datc_msg_free (DatcMsg *msg)
{
  if (msg == NULL)
    return;
  const Shape *shape = body_shape (msg->type);
  if (shape != NULL)
    clear_record (shape, &msg->u);
  g_free (msg);
}

static void
clear_record (const Shape *shape, gpointer base)
{
  for (guint i = 0; i < shape->n_fields; i++)
    {
      const Field *f = &shape->fields[i];
      gpointer p = FIELD_AT (base, f);

      switch (f->kind)
        {
        case FIELD_NAME:
        case FIELD_REASON:
        case FIELD_REASON_OR_NIL:
        case FIELD_STR_OR_NIL:
          g_clear_pointer ((gchar **) p, g_free);
          break;
        case FIELD_BIN:
          g_clear_pointer ((GBytes **) p, g_bytes_unref);
          break;
        case FIELD_ARGV:
        case FIELD_ENV:
          g_clear_pointer ((gchar ***) p, g_strfreev);
          break;
        case FIELD_SPEC:
          clear_record (&spec_shape, p);
          break;
        case FIELD_KEYS:
          g_clear_pointer ((GArray **) p, g_array_unref);
          break;
        case FIELD_TASKS:
        case FIELD_RESULTS:
          g_clear_pointer ((GPtrArray **) p, g_ptr_array_unref);
          break;
        case FIELD_U32:
        case FIELD_U64:
        case FIELD_I32:
        case FIELD_I64:
        case FIELD_BOOL:
        case FIELD_STATUS:
          break;
        }
    }
}

/* ----------------------------------------------------------------- encode */

static int
byte_array_write (void *data, const char *buf, size_t len)
{
  g_byte_array_append (data, (const guint8 *) buf, (guint) len);
  return 0;
}

static void
pack_str (msgpack_packer *pk, const char *s, gsize len)
{
  msgpack_pack_str (pk, len);
  msgpack_pack_str_body (pk, s, len);
}

static void
pack_frame_header (msgpack_packer *pk, DatcMsgType type)
{
  msgpack_pack_array (pk, 3);
  msgpack_pack_uint32 (pk, DATC_PROTOCOL_VERSION);
  msgpack_pack_uint32 (pk, type);
}

static void encode_record (msgpack_packer *pk, const Shape *shape, gconstpointer base);

static void
encode_env (msgpack_packer *pk, char *const *env)
{
  guint n = g_strv_length ((gchar **) env);

  msgpack_pack_map (pk, n);
  for (guint i = 0; i < n; i++)
    {
      /* An entry without '=' is a caller's slip; it travels as KEY="". */
      const char *eq = strchr (env[i], '=');
      gsize klen = eq != NULL ? (gsize) (eq - env[i]) : strlen (env[i]);
      const char *value = eq != NULL ? eq + 1 : "";

      pack_str (pk, env[i], klen);
      pack_str (pk, value, strlen (value));
    }
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
    case FIELD_I32:
      msgpack_pack_int32 (pk, *(const gint32 *) p);
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
    case FIELD_STATUS:
      msgpack_pack_uint32 (pk, (guint32) * (const DatcTaskStatus *) p);
      break;
    case FIELD_NAME:
    case FIELD_REASON:
      {
        /* NULL travels as "": these fields are never nil on the wire. */
        const char *s = *(char *const *) p;
        if (s == NULL)
          s = "";
        pack_str (pk, s, strlen (s));
        break;
      }
    case FIELD_REASON_OR_NIL:
    case FIELD_STR_OR_NIL:
      {
        const char *s = *(char *const *) p;
        if (s == NULL)
          msgpack_pack_nil (pk);
        else
          pack_str (pk, s, strlen (s));
        break;
      }
    case FIELD_BIN:
      {
        GBytes *bytes = *(GBytes *const *) p;
        gsize size = 0;
        const void *data = bytes != NULL ? g_bytes_get_data (bytes, &size) : NULL;
        msgpack_pack_bin (pk, size);
        msgpack_pack_bin_body (pk, data, size);
        break;
      }
    case FIELD_ARGV:
      {
        char *const *argv = *(char **const *) p;
        if (argv == NULL)
          {
            msgpack_pack_nil (pk);
            break;
          }
        guint n = g_strv_length ((gchar **) argv);
        msgpack_pack_array (pk, n);
        for (guint i = 0; i < n; i++)
          pack_str (pk, argv[i], strlen (argv[i]));
        break;
      }
    case FIELD_ENV:
      {
        char *const *env = *(char **const *) p;
        if (env == NULL)
          msgpack_pack_nil (pk);
        else
          encode_env (pk, env);
        break;
      }
    case FIELD_SPEC:
      encode_record (pk, &spec_shape, p);
      break;
    case FIELD_KEYS:
      {
        const GArray *keys = *(GArray *const *) p;
        guint n = keys != NULL ? keys->len : 0;
        msgpack_pack_array (pk, n);
        for (guint i = 0; i < n; i++)
          encode_record (pk, &key_shape, &g_array_index (keys, DatcTaskKey, i));
        break;
      }
    case FIELD_TASKS:
    case FIELD_RESULTS:
      {
        const GPtrArray *list = *(GPtrArray *const *) p;
        const Shape *shape = element_shape (f->kind);
        guint n = list != NULL ? list->len : 0;
        msgpack_pack_array (pk, n);
        for (guint i = 0; i < n; i++)
          encode_record (pk, shape, g_ptr_array_index (list, i));
        break;
      }
    }
}

static void
encode_record (msgpack_packer *pk, const Shape *shape, gconstpointer base)
{
  guint n = shape->n_fields;
  while (n > shape->n_required && *(char *const *) CFIELD_AT (base, &shape->fields[n - 1]) == NULL)
    n--;
  msgpack_pack_array (pk, n);
  for (guint i = 0; i < n; i++)
    encode_field (pk, &shape->fields[i], base);
}

void
datc_msg_encode (const DatcMsg *msg, GByteArray *out)
{
  g_return_if_fail (msg != NULL);
  g_return_if_fail (out != NULL);
  const Shape *shape = body_shape (msg->type);
  g_return_if_fail (shape != NULL);

  msgpack_packer pk;
  msgpack_packer_init (&pk, out, byte_array_write);
  pack_frame_header (&pk, msg->type);
  encode_record (&pk, shape, &msg->u);
}

void
datc_task_spec_encode (const DatcTaskSpec *spec, GByteArray *out)
{
  g_return_if_fail (spec != NULL);
  g_return_if_fail (out != NULL);

  msgpack_packer pk;
  msgpack_packer_init (&pk, out, byte_array_write);
  encode_record (&pk, &spec_shape, spec);
}

void
datc_tasks_encode_begin (GByteArray *out, guint32 session, guint32 count)
{
  g_return_if_fail (out != NULL);

  msgpack_packer pk;
  msgpack_packer_init (&pk, out, byte_array_write);
  pack_frame_header (&pk, DATC_MSG_TASKS);
  msgpack_pack_array (&pk, G_N_ELEMENTS (tasks_fields));
  msgpack_pack_uint32 (&pk, session);
  msgpack_pack_array (&pk, count);
}

/* Writes what encode_record (&task_shape) writes up to the spec. */
static void
pack_task_head (msgpack_packer *pk, guint64 id, guint32 attempt)
{
  msgpack_pack_array (pk, G_N_ELEMENTS (task_fields));
  msgpack_pack_uint64 (pk, id);
  msgpack_pack_uint32 (pk, attempt);
}

void
datc_tasks_encode_add_line (GByteArray *out, guint64 id, guint32 attempt, const char *line,
                            gsize len)
{
  g_return_if_fail (out != NULL);
  g_return_if_fail (line != NULL || len == 0);

  msgpack_packer pk;
  msgpack_packer_init (&pk, out, byte_array_write);
  pack_task_head (&pk, id, attempt);
  msgpack_pack_array (&pk, G_N_ELEMENTS (spec_fields));
  msgpack_pack_nil (&pk);       /* argv */
  pack_str (&pk, line, len);    /* sh */
  msgpack_pack_nil (&pk);       /* env */
  msgpack_pack_nil (&pk);       /* cwd */
  msgpack_pack_uint32 (&pk, 0); /* timeout_ms */
  msgpack_pack_uint32 (&pk, 0); /* est_runtime_ms */
}

void
datc_tasks_encode_add_spec (GByteArray *out, guint64 id, guint32 attempt, const guint8 *spec,
                            gsize len)
{
  g_return_if_fail (out != NULL);
  g_return_if_fail (spec != NULL && len > 0);

  msgpack_packer pk;
  msgpack_packer_init (&pk, out, byte_array_write);
  pack_task_head (&pk, id, attempt);
  g_byte_array_append (out, spec, (guint) len);
}

/* ---------------------------------------------------- decode: 1. size cap */

static gboolean
check_size (gsize len, gsize max_size, GError **error)
{
  if (len > max_size)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_TOO_BIG,
                   "frame of %" G_GSIZE_FORMAT " bytes is over the cap of %" G_GSIZE_FORMAT, len,
                   max_size);
      return FALSE;
    }
  if (len == 0)
    {
      g_set_error_literal (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_MALFORMED, "empty frame");
      return FALSE;
    }
  return TRUE;
}

/* ---------------------------------------------------- decode: 2. pre-scan */

static gboolean scan_error (GError **error, DatcWireError code, gsize pos, const char *format, ...)
    G_GNUC_PRINTF (4, 5);

static gboolean
scan_error (GError **error, DatcWireError code, gsize pos, const char *format, ...)
{
  va_list ap;

  va_start (ap, format);
  g_autofree char *what = g_strdup_vprintf (format, ap);
  va_end (ap);
  g_set_error (error, DATC_WIRE_ERROR, code, "at byte %" G_GSIZE_FORMAT ": %s", pos, what);
  return FALSE;
}

static guint64
read_be (const guint8 *p, guint n)
{
  guint64 v = 0;

  for (guint i = 0; i < n; i++)
    v = (v << 8) | p[i];
  return v;
}

typedef enum {
  SCAN_SCALAR,
  SCAN_STR,
  SCAN_BIN,
  SCAN_ARRAY,
  SCAN_MAP,
} ScanKind;

/* Walks every msgpack header in data[0..len) without allocating, so that
 * what msgpack-c will preallocate is known to be backed by real bytes and
 * within the limits.  Each container's declared objects must each have at
 * least one byte left to live in; since every declared object is then
 * walked, the whole frame is accounted for before msgpack-c sees it. */
static gboolean
prescan (const guint8 *data, gsize len, GError **error)
{
  guint64 pending[DATC_DEPTH_MAX + 1]; /* objects still to read per open level */
  guint depth = 0;
  guint64 elements = 0;
  gsize pos = 0;

  pending[0] = 1; /* exactly one top-level object */
  for (;;)
    {
      while (depth > 0 && pending[depth] == 0)
        depth--;
      if (pending[depth] == 0)
        break;
      pending[depth]--;

      gsize at = pos;
      if (pos >= len)
        return scan_error (error, DATC_WIRE_ERROR_MALFORMED, at,
                           "truncated: the frame ends inside the message");

      guint8 b = data[pos++];
      ScanKind kind = SCAN_SCALAR;
      guint length_bytes = 0; /* big-endian length or count after the type byte */
      gsize fixed = 0;        /* payload bytes of a scalar */
      guint64 n = 0;          /* payload bytes (str, bin) or count (array, map) */

      if (b <= 0x7f || b >= 0xe0)
        kind = SCAN_SCALAR;
      else if (b <= 0x8f)
        kind = SCAN_MAP, n = b & 0x0f;
      else if (b <= 0x9f)
        kind = SCAN_ARRAY, n = b & 0x0f;
      else if (b <= 0xbf)
        kind = SCAN_STR, n = b & 0x1f;
      else
        switch (b)
          {
          case 0xc0: /* nil */
          case 0xc2: /* false */
          case 0xc3: /* true */
            break;
          case 0xc1:
            return scan_error (error, DATC_WIRE_ERROR_MALFORMED, at,
                               "byte 0xc1 is never used in msgpack");
          case 0xc4:
            kind = SCAN_BIN, length_bytes = 1;
            break;
          case 0xc5:
            kind = SCAN_BIN, length_bytes = 2;
            break;
          case 0xc6:
            kind = SCAN_BIN, length_bytes = 4;
            break;
          case 0xc7:
          case 0xc8:
          case 0xc9:
          case 0xd4:
          case 0xd5:
          case 0xd6:
          case 0xd7:
          case 0xd8:
            return scan_error (error, DATC_WIRE_ERROR_MALFORMED, at,
                               "msgpack ext types are not used on the datc wire");
          case 0xca:
            fixed = 4;
            break; /* float 32 */
          case 0xcb:
            fixed = 8;
            break; /* float 64 */
          case 0xcc:
          case 0xd0:
            fixed = 1;
            break;
          case 0xcd:
          case 0xd1:
            fixed = 2;
            break;
          case 0xce:
          case 0xd2:
            fixed = 4;
            break;
          case 0xcf:
          case 0xd3:
            fixed = 8;
            break;
          case 0xd9:
            kind = SCAN_STR, length_bytes = 1;
            break;
          case 0xda:
            kind = SCAN_STR, length_bytes = 2;
            break;
          case 0xdb:
            kind = SCAN_STR, length_bytes = 4;
            break;
          case 0xdc:
            kind = SCAN_ARRAY, length_bytes = 2;
            break;
          case 0xdd:
            kind = SCAN_ARRAY, length_bytes = 4;
            break;
          case 0xde:
            kind = SCAN_MAP, length_bytes = 2;
            break;
          default:
            kind = SCAN_MAP, length_bytes = 4;
            break; /* 0xdf */
          }

      if (len - pos < length_bytes)
        return scan_error (error, DATC_WIRE_ERROR_MALFORMED, at, "truncated inside a header");
      if (length_bytes > 0)
        {
          n = read_be (data + pos, length_bytes);
          pos += length_bytes;
        }

      gsize left = len - pos;
      switch (kind)
        {
        case SCAN_SCALAR:
          if (left < fixed)
            return scan_error (error, DATC_WIRE_ERROR_MALFORMED, at, "truncated inside a number");
          pos += fixed;
          break;

        case SCAN_STR:
        case SCAN_BIN:
          {
            const char *what = kind == SCAN_STR ? "str" : "bin";
            guint64 max = kind == SCAN_STR ? DATC_STRING_MAX : DATC_OUTPUT_MAX;
            if (n > left)
              return scan_error (error, DATC_WIRE_ERROR_MALFORMED, at,
                                 "%s declares %" G_GUINT64_FORMAT " bytes, only %" G_GSIZE_FORMAT
                                 " follow",
                                 what, n, left);
            if (n > max)
              return scan_error (error, DATC_WIRE_ERROR_LIMIT, at,
                                 "%s of %" G_GUINT64_FORMAT
                                 " bytes, over the limit of %" G_GUINT64_FORMAT,
                                 what, n, max);
            pos += (gsize) n;
            break;
          }

        case SCAN_ARRAY:
        case SCAN_MAP:
          {
            const char *what = kind == SCAN_ARRAY ? "array" : "map";
            guint64 objects = kind == SCAN_MAP ? 2 * n : n;
            if (objects > left)
              return scan_error (error, DATC_WIRE_ERROR_MALFORMED, at,
                                 "%s declares %" G_GUINT64_FORMAT " %s, only %" G_GSIZE_FORMAT
                                 " bytes follow",
                                 what, n, kind == SCAN_ARRAY ? "elements" : "pairs", left);
            if (depth == DATC_DEPTH_MAX)
              return scan_error (error, DATC_WIRE_ERROR_LIMIT, at,
                                 "containers nested deeper than %u", DATC_DEPTH_MAX);
            elements += n;
            if (elements > DATC_ELEMENTS_MAX)
              return scan_error (error, DATC_WIRE_ERROR_LIMIT, at,
                                 "more than %u declared elements in one frame", DATC_ELEMENTS_MAX);
            pending[++depth] = objects;
            break;
          }
        }
    }

  if (pos != len)
    return scan_error (error, DATC_WIRE_ERROR_MALFORMED, pos,
                       "%" G_GSIZE_FORMAT " trailing bytes after the message", len - pos);
  return TRUE;
}

/* ------------------------------------------------------ decode: 3. unpack */

static gboolean
unpack (const guint8 *data, gsize len, msgpack_unpacked *up, GError **error)
{
  size_t off = 0;
  msgpack_unpack_return ret = msgpack_unpack_next (up, (const char *) data, len, &off);

  if (ret == MSGPACK_UNPACK_NOMEM_ERROR)
    {
      g_set_error_literal (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_LIMIT,
                           "msgpack-c ran out of memory unpacking the frame");
      return FALSE;
    }
  /* The pre-scan has walked the same bytes, so this is msgpack-c and us
   * disagreeing about msgpack; refuse rather than guess. */
  if (ret != MSGPACK_UNPACK_SUCCESS || off != len)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_MALFORMED,
                   "msgpack-c could not unpack the frame (%d at byte %" G_GSIZE_FORMAT ")",
                   (int) ret, (gsize) off);
      return FALSE;
    }
  return TRUE;
}

/* ------------------------------------------------------- decode: 4. shape */

static const char *
object_type_name (const msgpack_object *o)
{
  switch (o->type)
    {
    case MSGPACK_OBJECT_NIL:
      return "nil";
    case MSGPACK_OBJECT_BOOLEAN:
      return "bool";
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
      return "uint";
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
      return "negative int";
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
      return "float";
    case MSGPACK_OBJECT_STR:
      return "str";
    case MSGPACK_OBJECT_BIN:
      return "bin";
    case MSGPACK_OBJECT_ARRAY:
      return "array";
    case MSGPACK_OBJECT_MAP:
      return "map";
    case MSGPACK_OBJECT_EXT:
      return "ext";
    }
  return "unknown";
}

static gboolean
wrong_type (const msgpack_object *o, const char *expected, GError **error)
{
  g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_SHAPE, "expected %s, got %s", expected,
               object_type_name (o));
  return FALSE;
}

static gboolean
check_uint (const msgpack_object *o, guint64 max, const char *c_type, GError **error)
{
  if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
    return wrong_type (o, "uint", error);
  if (o->via.u64 > max)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_SHAPE,
                   "%" G_GUINT64_FORMAT " is out of range for %s", o->via.u64, c_type);
      return FALSE;
    }
  return TRUE;
}

/* msgpack-c reports any non-negative integer as POSITIVE_INTEGER, whichever
 * encoding the sender chose, so a signed field accepts both kinds. */
static gboolean
check_int (const msgpack_object *o, gint64 min, gint64 max, const char *c_type, GError **error)
{
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
    {
      if (o->via.u64 > (guint64) max)
        {
          g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_SHAPE,
                       "%" G_GUINT64_FORMAT " is out of range for %s", o->via.u64, c_type);
          return FALSE;
        }
      return TRUE;
    }
  if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
    {
      if (o->via.i64 < min)
        {
          g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_SHAPE,
                       "%" G_GINT64_FORMAT " is out of range for %s", o->via.i64, c_type);
          return FALSE;
        }
      return TRUE;
    }
  return wrong_type (o, "int", error);
}

/* The bytes of a str object that is already known to be one. */
static gboolean
check_text (const char *s, gsize size, gsize max, GError **error)
{
  if (size > max)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_LIMIT,
                   "%" G_GSIZE_FORMAT " bytes, over the limit of %" G_GSIZE_FORMAT, size, max);
      return FALSE;
    }
  if (size == 0)
    return TRUE;
  if (memchr (s, '\0', size) != NULL)
    {
      g_set_error_literal (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_SHAPE, "contains a NUL byte");
      return FALSE;
    }
  if (!g_utf8_validate_len (s, size, NULL))
    {
      g_set_error_literal (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_SHAPE, "not valid UTF-8");
      return FALSE;
    }
  return TRUE;
}

static gboolean
check_str (const msgpack_object *o, gsize max, GError **error)
{
  if (o->type != MSGPACK_OBJECT_STR)
    return wrong_type (o, "str", error);
  return check_text (o->via.str.ptr, o->via.str.size, max, error);
}

static gboolean
check_str_or_nil (const msgpack_object *o, gsize max, GError **error)
{
  if (o->type == MSGPACK_OBJECT_NIL)
    return TRUE;
  if (o->type != MSGPACK_OBJECT_STR)
    return wrong_type (o, "str or nil", error);
  return check_text (o->via.str.ptr, o->via.str.size, max, error);
}

static gboolean
check_argv (const msgpack_object *o, GError **error)
{
  if (o->type == MSGPACK_OBJECT_NIL)
    return TRUE;
  if (o->type != MSGPACK_OBJECT_ARRAY)
    return wrong_type (o, "array or nil", error);

  guint n = o->via.array.size;
  if (n == 0)
    {
      g_set_error_literal (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_SHAPE,
                           "empty argv (it needs at least the program)");
      return FALSE;
    }
  if (n > DATC_ARGV_MAX)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_LIMIT, "%u items, over the limit of %u",
                   n, DATC_ARGV_MAX);
      return FALSE;
    }
  for (guint i = 0; i < n; i++)
    if (!check_str (&o->via.array.ptr[i], DATC_STRING_MAX, error))
      {
        g_prefix_error (error, "item %u: ", i);
        return FALSE;
      }
  return TRUE;
}

static gboolean
check_env (const msgpack_object *o, GError **error)
{
  if (o->type == MSGPACK_OBJECT_NIL)
    return TRUE;
  if (o->type != MSGPACK_OBJECT_MAP)
    return wrong_type (o, "map or nil", error);

  guint n = o->via.map.size;
  if (n > DATC_ENV_MAX)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_LIMIT,
                   "%u entries, over the limit of %u", n, DATC_ENV_MAX);
      return FALSE;
    }
  for (guint i = 0; i < n; i++)
    {
      const msgpack_object *key = &o->via.map.ptr[i].key;
      const msgpack_object *value = &o->via.map.ptr[i].val;

      if (!check_str (key, DATC_STRING_MAX, error))
        {
          g_prefix_error (error, "entry %u: key: ", i);
          return FALSE;
        }
      if (key->via.str.size == 0)
        {
          g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_SHAPE, "entry %u: empty key", i);
          return FALSE;
        }
      if (memchr (key->via.str.ptr, '=', key->via.str.size) != NULL)
        {
          g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_SHAPE, "entry %u: key contains '='",
                       i);
          return FALSE;
        }
      if (!check_str (value, DATC_STRING_MAX, error))
        {
          g_prefix_error (error, "entry %u: value: ", i);
          return FALSE;
        }
    }
  return TRUE;
}

static gboolean check_record (const Shape *shape, const msgpack_object *o, GError **error);

/* Element errors read "result 3: field stdout: ..."; the list's own errors
 * read "field results: ...". */
static gboolean
check_list (const Field *f, const msgpack_object *o, GError **error)
{
  if (o->type != MSGPACK_OBJECT_ARRAY)
    {
      wrong_type (o, "array", error);
      g_prefix_error (error, "field %s: ", f->name);
      return FALSE;
    }

  guint n = o->via.array.size;
  if (n > DATC_BATCH_MAX)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_LIMIT,
                   "field %s: %u entries, over the limit of %u", f->name, n, DATC_BATCH_MAX);
      return FALSE;
    }

  const Shape *shape = element_shape (f->kind);
  for (guint i = 0; i < n; i++)
    if (!check_record (shape, &o->via.array.ptr[i], error))
      {
        g_prefix_error (error, "%s %u: ", f->noun, i);
        return FALSE;
      }
  return TRUE;
}

static gboolean
check_field (const Field *f, const msgpack_object *o, GError **error)
{
  gboolean ok = FALSE;

  switch (f->kind)
    {
    case FIELD_U32:
      ok = check_uint (o, G_MAXUINT32, "uint32", error);
      break;
    case FIELD_U64:
      ok = check_uint (o, G_MAXUINT64, "uint64", error);
      break;
    case FIELD_I32:
      ok = check_int (o, G_MININT32, G_MAXINT32, "int32", error);
      break;
    case FIELD_I64:
      ok = check_int (o, G_MININT64, G_MAXINT64, "int64", error);
      break;
    case FIELD_BOOL:
      ok = o->type == MSGPACK_OBJECT_BOOLEAN || wrong_type (o, "bool", error);
      break;
    case FIELD_STATUS:
      ok = check_uint (o, G_MAXUINT64, "uint64", error);
      if (ok && o->via.u64 > DATC_STATUS_LAST)
        {
          g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_SHAPE,
                       "%" G_GUINT64_FORMAT " is not a known status (0 to %d)", o->via.u64,
                       DATC_STATUS_LAST);
          ok = FALSE;
        }
      break;
    case FIELD_NAME:
      ok = check_str (o, DATC_NAME_MAX, error);
      break;
    case FIELD_REASON:
      ok = check_str (o, DATC_REASON_MAX, error);
      break;
    case FIELD_REASON_OR_NIL:
      ok = check_str_or_nil (o, DATC_REASON_MAX, error);
      break;
    case FIELD_STR_OR_NIL:
      ok = check_str_or_nil (o, DATC_STRING_MAX, error);
      break;
    case FIELD_BIN:
      /* The pre-scan has held every bin to DATC_OUTPUT_MAX. */
      ok = o->type == MSGPACK_OBJECT_BIN || wrong_type (o, "bin", error);
      break;
    case FIELD_ARGV:
      ok = check_argv (o, error);
      break;
    case FIELD_ENV:
      ok = check_env (o, error);
      break;
    case FIELD_SPEC:
      ok = check_record (&spec_shape, o, error);
      break;
    case FIELD_KEYS:
    case FIELD_TASKS:
    case FIELD_RESULTS:
      return check_list (f, o, error);
    }

  if (!ok)
    g_prefix_error (error, "field %s: ", f->name);
  return ok;
}

static gboolean
check_record (const Shape *shape, const msgpack_object *o, GError **error)
{
  if (o->type != MSGPACK_OBJECT_ARRAY)
    return wrong_type (o, "array", error);
  if (o->via.array.size != shape->n_fields
      && (o->via.array.size < shape->n_required || o->via.array.size > shape->n_fields))
    {
      if (shape->n_required == shape->n_fields)
        g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_SHAPE, "expected %u field%s, got %u",
                     shape->n_fields, shape->n_fields == 1 ? "" : "s", o->via.array.size);
      else
        g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_SHAPE,
                     "expected %u to %u fields, got %u", shape->n_required, shape->n_fields,
                     o->via.array.size);
      return FALSE;
    }
  for (guint i = 0; i < o->via.array.size; i++)
    if (!check_field (&shape->fields[i], &o->via.array.ptr[i], error))
      return FALSE;
  if (shape->check_whole != NULL && !shape->check_whole (o->via.array.ptr, error))
    return FALSE;
  return TRUE;
}

static gboolean
check_spec_whole (const msgpack_object *items, GError **error)
{
  gboolean has_argv = items[0].type != MSGPACK_OBJECT_NIL;
  gboolean has_sh = items[1].type != MSGPACK_OBJECT_NIL;

  if (has_argv == has_sh)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_SHAPE,
                   "exactly one of argv and sh must be set, got %s", has_argv ? "both" : "neither");
      return FALSE;
    }
  return TRUE;
}

/* [version, type, body]: the version is read before the arity so that a
 * future frame layout is still reported as a version we do not speak. */
static gboolean
check_frame (const msgpack_object *top, DatcMsgType *type_out, const msgpack_object **body_out,
             GError **error)
{
  if (top->type != MSGPACK_OBJECT_ARRAY || top->via.array.size == 0)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_MALFORMED,
                   "expected a [version, type, body] array, got %s%s",
                   top->type == MSGPACK_OBJECT_ARRAY ? "an empty " : "", object_type_name (top));
      return FALSE;
    }

  const msgpack_object *items = top->via.array.ptr;
  const msgpack_object *version = &items[0];
  if (version->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_VERSION,
                   "version %" G_GINT64_FORMAT " is not spoken here (this side speaks %d)",
                   version->via.i64, DATC_PROTOCOL_VERSION);
      return FALSE;
    }
  if (version->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_VERSION,
                   "version: expected uint, got %s", object_type_name (version));
      return FALSE;
    }
  if (version->via.u64 != DATC_PROTOCOL_VERSION)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_VERSION,
                   "version %" G_GUINT64_FORMAT " is not spoken here (this side speaks %d)",
                   version->via.u64, DATC_PROTOCOL_VERSION);
      return FALSE;
    }

  if (top->via.array.size != 3)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_MALFORMED,
                   "frame has %u elements, expected 3 [version, type, body]", top->via.array.size);
      return FALSE;
    }

  const msgpack_object *type = &items[1];
  if (type->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_TYPE,
                   "unknown message type %" G_GINT64_FORMAT, type->via.i64);
      return FALSE;
    }
  if (type->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_TYPE,
                   "message type: expected uint, got %s", object_type_name (type));
      return FALSE;
    }
  if (body_shape (type->via.u64) == NULL)
    {
      g_set_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_TYPE,
                   "unknown message type %" G_GUINT64_FORMAT, type->via.u64);
      return FALSE;
    }

  *type_out = (DatcMsgType) type->via.u64;
  *body_out = &items[2];
  return TRUE;
}

/* -------------------------------------------------------- decode: 5. copy */

/* Everything below runs on a tree that passed check_record(), and relies on
 * it: types, ranges and counts are not looked at again. */

static char *
copy_text (const char *s, gsize size)
{
  char *copy = g_malloc (size + 1);

  if (size > 0)
    memcpy (copy, s, size);
  copy[size] = '\0';
  return copy;
}

static char *
copy_str (const msgpack_object *o)
{
  return copy_text (o->via.str.ptr, o->via.str.size);
}

static gint64
int_value (const msgpack_object *o)
{
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
    return (gint64) o->via.u64;
  return o->via.i64;
}

static char **
copy_argv (const msgpack_object *o)
{
  guint n = o->via.array.size;
  char **argv = g_new (char *, n + 1);

  for (guint i = 0; i < n; i++)
    argv[i] = copy_str (&o->via.array.ptr[i]);
  argv[n] = NULL;
  return argv;
}

static char **
copy_env (const msgpack_object *o)
{
  guint n = o->via.map.size;
  char **env = g_new (char *, n + 1);

  for (guint i = 0; i < n; i++)
    {
      const msgpack_object_str *key = &o->via.map.ptr[i].key.via.str;
      const msgpack_object_str *value = &o->via.map.ptr[i].val.via.str;
      char *entry = g_malloc ((gsize) key->size + 1 + value->size + 1);

      memcpy (entry, key->ptr, key->size);
      entry[key->size] = '=';
      if (value->size > 0)
        memcpy (entry + key->size + 1, value->ptr, value->size);
      entry[key->size + 1 + value->size] = '\0';
      env[i] = entry;
    }
  env[n] = NULL;
  return env;
}

static void copy_record (const Shape *shape, const msgpack_object *o, gpointer base);

static void
copy_field (const Field *f, const msgpack_object *o, gpointer base)
{
  gpointer p = FIELD_AT (base, f);

  switch (f->kind)
    {
    case FIELD_U32:
      *(guint32 *) p = (guint32) o->via.u64;
      break;
    case FIELD_U64:
      *(guint64 *) p = o->via.u64;
      break;
    case FIELD_I32:
      *(gint32 *) p = (gint32) int_value (o);
      break;
    case FIELD_I64:
      *(gint64 *) p = int_value (o);
      break;
    case FIELD_BOOL:
      *(gboolean *) p = o->via.boolean ? TRUE : FALSE;
      break;
    case FIELD_STATUS:
      *(DatcTaskStatus *) p = (DatcTaskStatus) o->via.u64;
      break;
    case FIELD_NAME:
    case FIELD_REASON:
      *(char **) p = copy_str (o);
      break;
    case FIELD_REASON_OR_NIL:
    case FIELD_STR_OR_NIL:
      *(char **) p = o->type == MSGPACK_OBJECT_NIL ? NULL : copy_str (o);
      break;
    case FIELD_BIN:
      *(GBytes **) p = g_bytes_new (o->via.bin.ptr, o->via.bin.size);
      break;
    case FIELD_ARGV:
      *(char ***) p = o->type == MSGPACK_OBJECT_NIL ? NULL : copy_argv (o);
      break;
    case FIELD_ENV:
      *(char ***) p = o->type == MSGPACK_OBJECT_NIL ? NULL : copy_env (o);
      break;
    case FIELD_SPEC:
      copy_record (&spec_shape, o, p);
      break;
    case FIELD_KEYS:
      {
        guint n = o->via.array.size;
        GArray *keys = keys_new (n);
        g_array_set_size (keys, n);
        for (guint i = 0; i < n; i++)
          copy_record (&key_shape, &o->via.array.ptr[i], &g_array_index (keys, DatcTaskKey, i));
        *(GArray **) p = keys;
        break;
      }
    case FIELD_TASKS:
    case FIELD_RESULTS:
      {
        guint n = o->via.array.size;
        GPtrArray *list = list_new (f->kind, n);
        gsize size = f->kind == FIELD_TASKS ? sizeof (DatcTask) : sizeof (DatcResult);
        for (guint i = 0; i < n; i++)
          {
            gpointer element = g_malloc0 (size);
            copy_record (element_shape (f->kind), &o->via.array.ptr[i], element);
            g_ptr_array_add (list, element);
          }
        *(GPtrArray **) p = list;
        break;
      }
    }
}

/* Optional fields the sender left out stay as they are: zero, NULL. */
static void
copy_record (const Shape *shape, const msgpack_object *o, gpointer base)
{
  for (guint i = 0; i < o->via.array.size; i++)
    copy_field (&shape->fields[i], &o->via.array.ptr[i], base);
}

/* ---------------------------------------------------------------- decode */

DatcMsg *
datc_msg_decode (const guint8 *data, gsize len, gsize max_size, GError **error)
{
  g_return_val_if_fail (data != NULL || len == 0, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (!check_size (len, max_size, error))
    return NULL;
  if (!prescan (data, len, error))
    return NULL;

  g_auto (msgpack_unpacked) up = { 0 };
  msgpack_unpacked_init (&up);
  if (!unpack (data, len, &up, error))
    return NULL;

  DatcMsgType type;
  const msgpack_object *body;
  if (!check_frame (&up.data, &type, &body, error))
    return NULL;
  const Shape *shape = body_shape (type);
  if (!check_record (shape, body, error))
    {
      g_prefix_error (error, "%s: ", datc_msg_type_name (type));
      return NULL;
    }

  DatcMsg *msg = g_new0 (DatcMsg, 1);
  msg->type = type;
  copy_record (shape, body, &msg->u);
  return msg;
}
