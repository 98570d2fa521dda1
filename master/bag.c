/* bag.c: the task bag.  A million tasks must fit in tens of megabytes and
 * load in well under a second, so a task is a 16-byte record in one array
 * and its bytes live in an arena of fixed-size chunks (chunks never move, so
 * spec pointers stay valid; a record's offset is chunk << shift | position).
 * Where a task came from (file and line) is kept per run of tasks from
 * consecutive lines of one file (LineRun), which is one run per file
 * unless it skips blank lines or comments.
 * Both are most of a big master's memory, so they come from hugemem.h (huge
 * pages: a compaction's fork copies their page tables), all but the first
 * chunk, which a small bag would not fill.
 *
 * A file is read with read() into one buffer that holds at most a line
 * plus a read's worth, hashed as it goes.  Each line is checked (length,
 * NUL, UTF-8) before it is trimmed and stored.  JSON Lines go through a
 * strict RFC 8259 syntax check of our own first: json-glib 1.6 recurses
 * without a depth limit, accepts single quotes, JavaScript `var` statements
 * and trailing values, truncates strings at \u0000 and silently merges
 * duplicate keys.  Only a line that passed the check is handed to
 * json-glib to build the tree.
 *
 * A load is a transaction (Loader): it remembers where the bag ended and
 * puts it back unless committed, so a bad line leaves the bag unchanged. */
#include "bag.h"

#include <errno.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <unistd.h>

#include "datc-limits.h"
#include "hugemem.h"
#include "jsonout.h"
#include "message.h"
#include "sha256.h"

G_DEFINE_QUARK (datc-bag-error-quark, datc_bag_error)

G_STATIC_ASSERT (sizeof (DatcBagTask) == 16);

#define ARENA_CHUNK_SHIFT 22u
#define ARENA_CHUNK_SIZE ((gsize) 1 << ARENA_CHUNK_SHIFT)
#define ARENA_CHUNK_MASK (ARENA_CHUNK_SIZE - 1)

/* A line plus its "\r\n", plus room so that most reads are large. */
#define READ_MIN_SPACE ((gsize) 256 * 1024)
#define READ_BUFFER_SIZE ((gsize) DATC_TASK_LINE_MAX + 2 + READ_MIN_SPACE)

/* Our schema needs two levels; anything deeper is rejected later anyway. */
#define JSON_DEPTH_MAX 32

/* Longest field name quoted back in an error message, in characters. */
#define QUOTED_NAME_MAX 64

/* A retries value of more than this is a typo, not a policy. */
#define RETRIES_MAX 100

/* Tasks `id`, `id` + 1, ... came from lines `line`, `line` + 1, ... of file
 * `source`, up to the next run's first id. */
typedef struct {
  guint32 id, line, source;
} LineRun;

struct DatcBag {
  DatcBagTask *tasks; /* task id N is index N - 1; hugemem.h, tasks_cap long */
  guint n_tasks, tasks_cap;
  GArray *runs;       /* LineRun, by first id; the first starts at id 1 */
  GPtrArray *chunks;  /* ARENA_CHUNK_SIZE bytes each (chunk_new) */
  guint64 arena_end;  /* where the next task's bytes go */
  GPtrArray *sources; /* file names, gchar* */
};

/* ---- arena ---- */

static gpointer
chunk_new (guint index)
{
  return index == 0 ? g_malloc (ARENA_CHUNK_SIZE) : datc_huge_alloc (ARENA_CHUNK_SIZE);
}

/* Chunk `index`, written up to `used`, into huge pages (hugemem.h); the
 * first chunk is plain malloc. */
static void
chunk_settle (DatcBag *bag, guint64 index, gsize used)
{
  if (index > 0 && index < bag->chunks->len)
    datc_huge_settle (bag->chunks->pdata[index], ARENA_CHUNK_SIZE, used);
}

static void
chunks_truncate (DatcBag *bag, guint n)
{
  for (guint i = n; i < bag->chunks->len; i++)
    {
      if (i == 0)
        g_free (bag->chunks->pdata[i]);
      else
        datc_huge_free (bag->chunks->pdata[i], ARENA_CHUNK_SIZE);
    }
  g_ptr_array_set_size (bag->chunks, MIN (n, bag->chunks->len));
}

DatcBag *
datc_bag_new (void)
{
  DatcBag *bag = g_new0 (DatcBag, 1);

  bag->chunks = g_ptr_array_new ();
  bag->runs = g_array_new (FALSE, FALSE, sizeof (LineRun));
  bag->sources = g_ptr_array_new_with_free_func (g_free);
  return bag;
}

void
datc_bag_free (DatcBag *bag)
{
  if (bag == NULL)
    return;
  datc_huge_free (bag->tasks, (gsize) bag->tasks_cap * sizeof (DatcBagTask));
  chunks_truncate (bag, 0);
  g_ptr_array_unref (bag->chunks);
  g_array_unref (bag->runs);
  g_ptr_array_unref (bag->sources);
  g_free (bag);
}

gboolean
datc_task_file_format_parse (const char *name, DatcTaskFileFormat *out)
{
  g_return_val_if_fail (out != NULL, FALSE);

  if (g_strcmp0 (name, "auto") == 0)
    *out = DATC_TASKFILE_AUTO;
  else if (g_strcmp0 (name, "lines") == 0)
    *out = DATC_TASKFILE_LINES;
  else if (g_strcmp0 (name, "jsonl") == 0)
    *out = DATC_TASKFILE_JSONL;
  else
    return FALSE;
  return TRUE;
}

static gboolean
has_suffix_nocase (const char *name, const char *suffix)
{
  gsize n = strlen (name), s = strlen (suffix);

  return n >= s && g_ascii_strcasecmp (name + n - s, suffix) == 0;
}

static DatcTaskFileFormat
format_resolve (DatcTaskFileFormat format, const char *name)
{
  if (format != DATC_TASKFILE_AUTO)
    return format;
  if (has_suffix_nocase (name, ".jsonl") || has_suffix_nocase (name, ".ndjson"))
    return DATC_TASKFILE_JSONL;
  return DATC_TASKFILE_LINES;
}

static guint64
arena_append (DatcBag *bag, const void *bytes, gsize len)
{
  guint64 chunk = bag->arena_end >> ARENA_CHUNK_SHIFT;
  gsize pos = bag->arena_end & ARENA_CHUNK_MASK;
  guint64 offset;

  g_assert (len > 0 && len <= ARENA_CHUNK_SIZE);
  if (pos + len > ARENA_CHUNK_SIZE)
    {
      chunk_settle (bag, chunk, pos);
      chunk++;
      pos = 0;
    }
  while (chunk >= bag->chunks->len)
    g_ptr_array_add (bag->chunks, chunk_new (bag->chunks->len));
  memcpy ((guint8 *) bag->chunks->pdata[chunk] + pos, bytes, len);
  offset = (chunk << ARENA_CHUNK_SHIFT) | pos;
  bag->arena_end = offset + len;
  return offset;
}

/* ---- messages ---- */

/* A name from the input, quoted for an error message: escaped as JSON
 * (the one escaper, jsonout.h), and cut short after QUOTED_NAME_MAX
 * characters so that a 1 MiB key does not become a 1 MiB message. */
static gchar *
quote_name (const char *name)
{
  GString *out = g_string_new (NULL);
  const char *cut = name;
  guint n = 0;

  while (*cut != '\0' && n < QUOTED_NAME_MAX)
    {
      cut = g_utf8_next_char (cut);
      n++;
    }
  g_autofree gchar *kept = g_strndup (name, cut - name);
  datc_json_append_string (out, kept);
  if (*cut != '\0')
    g_string_insert (out, out->len - 1, "...");
  return g_string_free (out, FALSE);
}

static const char *
json_node_kind (JsonNode *node)
{
  switch (json_node_get_node_type (node))
    {
    case JSON_NODE_OBJECT:
      return "an object";
    case JSON_NODE_ARRAY:
      return "an array";
    case JSON_NODE_NULL:
      return "null";
    case JSON_NODE_VALUE:
    default:
      break;
    }
  switch (json_node_get_value_type (node))
    {
    case G_TYPE_STRING:
      return "a string";
    case G_TYPE_BOOLEAN:
      return "a boolean";
    default:
      return "a number";
    }
}

/* ---- strict JSON syntax ---- */

typedef struct {
  const char *p, *end;
  const char *why; /* set on failure; p is where it went wrong */
  guint depth;
} JsonCheck;

static gboolean json_check_value (JsonCheck *c);

static gboolean
json_check_fail (JsonCheck *c, const char *why)
{
  c->why = why;
  return FALSE;
}

static void
json_check_space (JsonCheck *c)
{
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
    c->p++;
}

static gboolean
json_check_hex4 (JsonCheck *c, guint *out)
{
  guint v = 0;

  if (c->end - c->p < 4)
    return json_check_fail (c, "invalid \\u escape");
  for (int i = 0; i < 4; i++)
    {
      int d = g_ascii_xdigit_value (c->p[i]);

      if (d < 0)
        return json_check_fail (c, "invalid \\u escape");
      v = v << 4 | (guint) d;
    }
  c->p += 4;
  *out = v;
  return TRUE;
}

static gboolean
json_check_string (JsonCheck *c)
{
  const char *open = c->p;

  c->p++;
  for (;;)
    {
      guchar ch;

      if (c->p >= c->end)
        {
          c->p = open;
          return json_check_fail (c, "unterminated string");
        }
      ch = (guchar) *c->p;
      if (ch == '"')
        {
          c->p++;
          return TRUE;
        }
      if (ch < 0x20)
        return json_check_fail (c, "control character in string (escape it)");
      if (ch != '\\')
        {
          c->p++;
          continue;
        }
      c->p++;
      if (c->p >= c->end)
        {
          c->p = open;
          return json_check_fail (c, "unterminated string");
        }
      if (strchr ("\"\\/bfnrt", *c->p) != NULL)
        {
          c->p++;
        }
      else if (*c->p == 'u')
        {
          const char *escape = c->p - 1;
          guint cp;

          c->p++;
          if (!json_check_hex4 (c, &cp))
            return FALSE;
          if (cp == 0)
            {
              c->p = escape;
              return json_check_fail (c, "\\u0000 is not allowed");
            }
          if (cp >= 0xdc00 && cp <= 0xdfff)
            {
              c->p = escape;
              return json_check_fail (c, "unpaired surrogate in \\u escape");
            }
          if (cp >= 0xd800 && cp <= 0xdbff)
            {
              guint low;

              if (c->end - c->p < 2 || c->p[0] != '\\' || c->p[1] != 'u')
                {
                  c->p = escape;
                  return json_check_fail (c, "unpaired surrogate in \\u escape");
                }
              c->p += 2;
              if (!json_check_hex4 (c, &low))
                return FALSE;
              if (low < 0xdc00 || low > 0xdfff)
                {
                  c->p = escape;
                  return json_check_fail (c, "unpaired surrogate in \\u escape");
                }
            }
        }
      else
        {
          c->p--;
          return json_check_fail (c, "invalid escape in string");
        }
    }
}

static gboolean
json_check_number (JsonCheck *c)
{
  const char *start = c->p;
  gsize digits = 0;
  gboolean integral = TRUE;

  if (*c->p == '-')
    c->p++;
  if (c->p < c->end && *c->p == '0')
    {
      c->p++;
      digits = 1;
    }
  else
    {
      while (c->p < c->end && g_ascii_isdigit (*c->p))
        {
          c->p++;
          digits++;
        }
    }
  if (digits == 0)
    return json_check_fail (c, "invalid number");
  if (c->p < c->end && *c->p == '.')
    {
      gsize frac = 0;

      c->p++;
      integral = FALSE;
      while (c->p < c->end && g_ascii_isdigit (*c->p))
        {
          c->p++;
          frac++;
        }
      if (frac == 0)
        return json_check_fail (c, "invalid number");
    }
  if (c->p < c->end && (*c->p == 'e' || *c->p == 'E'))
    {
      gsize exp = 0;

      c->p++;
      integral = FALSE;
      if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
        c->p++;
      while (c->p < c->end && g_ascii_isdigit (*c->p))
        {
          c->p++;
          exp++;
        }
      if (exp == 0)
        return json_check_fail (c, "invalid number");
    }
  /* json-glib wraps integers beyond 64 bits to negative numbers. */
  if (integral && digits > 18)
    {
      c->p = start;
      return json_check_fail (c, "integer out of range");
    }
  return TRUE;
}

static gboolean
json_check_literal (JsonCheck *c, const char *word)
{
  gsize n = strlen (word);

  if ((gsize) (c->end - c->p) < n || memcmp (c->p, word, n) != 0)
    return json_check_fail (c, "unexpected character");
  c->p += n;
  return TRUE;
}

static gboolean
json_check_container (JsonCheck *c, char close)
{
  if (++c->depth > JSON_DEPTH_MAX)
    return json_check_fail (c, "nested more than 32 levels deep");
  c->p++;
  json_check_space (c);
  if (c->p < c->end && *c->p == close)
    {
      c->p++;
      c->depth--;
      return TRUE;
    }
  for (;;)
    {
      if (close == '}')
        {
          json_check_space (c);
          if (c->p >= c->end || *c->p != '"')
            return json_check_fail (c, "expected a string key");
          if (!json_check_string (c))
            return FALSE;
          json_check_space (c);
          if (c->p >= c->end || *c->p != ':')
            return json_check_fail (c, "expected ':'");
          c->p++;
        }
      if (!json_check_value (c))
        return FALSE;
      json_check_space (c);
      if (c->p < c->end && *c->p == ',')
        {
          c->p++;
          continue;
        }
      if (c->p < c->end && *c->p == close)
        {
          c->p++;
          c->depth--;
          return TRUE;
        }
      return json_check_fail (c, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static gboolean
json_check_value (JsonCheck *c)
{
  json_check_space (c);
  if (c->p >= c->end)
    return json_check_fail (c, "expected a value");
  switch (*c->p)
    {
    case '{':
      return json_check_container (c, '}');
    case '[':
      return json_check_container (c, ']');
    case '"':
      return json_check_string (c);
    case 't':
      return json_check_literal (c, "true");
    case 'f':
      return json_check_literal (c, "false");
    case 'n':
      return json_check_literal (c, "null");
    default:
      if (*c->p == '-' || g_ascii_isdigit (*c->p))
        return json_check_number (c);
      return json_check_fail (c, "unexpected character");
    }
}

gboolean
datc_bag_check_json (const char *text, gsize len, const char **why, gsize *at)
{
  JsonCheck c = { .p = text, .end = text + len };

  if (json_check_value (&c))
    {
      json_check_space (&c);
      if (c.p == c.end)
        return TRUE;
      c.why = "unexpected text after the value";
    }
  *why = c.why;
  *at = (gsize) (c.p - text);
  return FALSE;
}

/* ---- loading ---- */

/* One load in progress; rolls the bag back when cleared uncommitted. */
typedef struct {
  DatcBag *bag;
  const char *name;
  DatcTaskFileFormat format;
  guint32 source;
  guint32 line;     /* the line being read, 1-based */
  guint mark_tasks; /* where the bag ended before this load */
  guint64 mark_arena;
  guint mark_runs;
  gboolean committed;
  JsonParser *parser; /* JSON Lines only */
  gulong member_handler;
  GHashTable *member_counts; /* JsonObject* -> members seen while parsing */
  JsonObject *dup_object;    /* where the first duplicate key was seen */
  gchar *dup_name;
  GByteArray *packed;
} Loader;

static void
on_object_member (JsonParser *parser, JsonObject *object, const char *name, gpointer user_data)
{
  Loader *l = user_data;
  guint seen = GPOINTER_TO_UINT (g_hash_table_lookup (l->member_counts, object)) + 1;

  /* Emitted after the member is set: a duplicate replaced an earlier one
   * and the object did not grow. */
  g_hash_table_insert (l->member_counts, object, GUINT_TO_POINTER (seen));
  if (seen > json_object_get_size (object) && l->dup_name == NULL)
    {
      l->dup_object = object;
      l->dup_name = g_strdup (name);
    }
}

static void
loader_begin (Loader *l, DatcBag *bag, const char *name, DatcTaskFileFormat format)
{
  l->bag = bag;
  l->name = name;
  l->format = format_resolve (format, name);
  l->source = bag->sources->len;
  l->mark_tasks = bag->n_tasks;
  l->mark_arena = bag->arena_end;
  l->mark_runs = bag->runs->len;
  g_ptr_array_add (bag->sources, g_strdup (name));
  if (l->format == DATC_TASKFILE_JSONL)
    {
      l->parser = json_parser_new ();
      l->member_handler
          = g_signal_connect (l->parser, "object-member", G_CALLBACK (on_object_member), l);
      l->member_counts = g_hash_table_new (g_direct_hash, g_direct_equal);
      l->packed = g_byte_array_new ();
    }
}

static void
loader_clear (Loader *l)
{
  if (l->bag != NULL && !l->committed)
    {
      DatcBag *bag = l->bag;

      bag->n_tasks = l->mark_tasks;
      bag->arena_end = l->mark_arena;
      chunks_truncate (bag, (guint) ((l->mark_arena + ARENA_CHUNK_SIZE - 1) >> ARENA_CHUNK_SHIFT));
      g_array_set_size (bag->runs, l->mark_runs);
      g_ptr_array_set_size (bag->sources, l->source);
    }
  if (l->parser != NULL)
    g_signal_handler_disconnect (l->parser, l->member_handler);
  g_clear_object (&l->parser);
  g_clear_pointer (&l->member_counts, g_hash_table_unref);
  g_clear_pointer (&l->dup_name, g_free);
  g_clear_pointer (&l->packed, g_byte_array_unref);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Loader, loader_clear)

static gboolean G_GNUC_PRINTF (4, 5)
    loader_fail (Loader *l, guint64 line, GError **error, const char *format, ...)
{
  g_autofree gchar *what = NULL;
  va_list args;

  va_start (args, format);
  what = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (error, DATC_BAG_ERROR, DATC_BAG_ERROR_PARSE, "%s:%" G_GUINT64_FORMAT ": %s", l->name,
               line, what);
  return FALSE;
}

/* Task `id` came from `line` of `source`: a new run unless it follows on
 * from the last one. */
static void
runs_note (DatcBag *bag, guint32 id, guint32 line, guint32 source)
{
  if (bag->runs->len > 0)
    {
      const LineRun *last = &g_array_index (bag->runs, LineRun, bag->runs->len - 1);
      if (last->source == source && (guint64) last->line + (id - last->id) == line)
        return;
    }
  g_array_append_val (bag->runs, ((LineRun) { .id = id, .line = line, .source = source }));
}

static gboolean
loader_add (Loader *l, DatcBagSpecKind kind, const void *bytes, gsize len, guint8 retries,
            guint32 est_runtime_ms, gboolean no_replicate, GError **error)
{
  DatcBag *bag = l->bag;
  DatcBagTask task = { 0 };

  if (len > ARENA_CHUNK_SIZE)
    return loader_fail (l, l->line, error,
                        "task too large once encoded (%" G_GSIZE_FORMAT " bytes)", len);
  if (bag->n_tasks == G_MAXUINT)
    return loader_fail (l, l->line, error, "too many tasks");
  if (bag->arena_end + 2 * ARENA_CHUNK_SIZE > DATC_BAG_ARENA_MAX)
    return loader_fail (l, l->line, error,
                        "too many task bytes (the limit is %" G_GUINT64_FORMAT " GiB in all)",
                        DATC_BAG_ARENA_MAX >> 30);
  if (bag->n_tasks == bag->tasks_cap)
    {
      guint cap = bag->tasks_cap < 64              ? 64
                  : bag->tasks_cap > G_MAXUINT / 2 ? G_MAXUINT
                                                   : bag->tasks_cap * 2;
      bag->tasks = datc_huge_realloc (bag->tasks, (gsize) bag->tasks_cap * sizeof (DatcBagTask),
                                      (gsize) cap * sizeof (DatcBagTask));
      bag->tasks_cap = cap;
    }
  task.offset = arena_append (bag, bytes, len);
  task.length = len;
  task.kind = (guint8) kind;
  task.retries = retries;
  task.est_runtime_ms = est_runtime_ms;
  task.no_replicate = no_replicate ? 1 : 0;
  bag->tasks[bag->n_tasks++] = task;
  runs_note (bag, bag->n_tasks, l->line, l->source);
  return TRUE;
}

static gboolean
loader_commit (Loader *l, GError **error)
{
  if (l->bag->n_tasks == l->mark_tasks)
    {
      g_set_error (error, DATC_BAG_ERROR, DATC_BAG_ERROR_EMPTY, "%s: no tasks", l->name);
      return FALSE;
    }
  l->committed = TRUE;
  /* What this load wrote, into huge pages (hugemem.h); full chunks were
   * as they filled. */
  DatcBag *bag = l->bag;
  datc_huge_settle (bag->tasks, (gsize) bag->tasks_cap * sizeof (DatcBagTask),
                    (gsize) bag->n_tasks * sizeof (DatcBagTask));
  chunk_settle (bag, bag->arena_end >> ARENA_CHUNK_SHIFT, bag->arena_end & ARENA_CHUNK_MASK);
  return TRUE;
}

/* A JSON number member as milliseconds.  `positive`: must be > 0 (and is
 * then at least 1 ms), else >= 0. */
static gboolean
loader_seconds (Loader *l, const char *field, JsonNode *node, gboolean positive, guint32 *ms,
                GError **error)
{
  GType type = JSON_NODE_HOLDS_VALUE (node) ? json_node_get_value_type (node) : G_TYPE_INVALID;
  double seconds, rounded;

  if (type != G_TYPE_INT64 && type != G_TYPE_DOUBLE)
    return loader_fail (l, l->line, error, "field \"%s\": expected a number, got %s", field,
                        json_node_kind (node));
  seconds = json_node_get_double (node);
  if (positive && !(seconds > 0))
    return loader_fail (l, l->line, error, "field \"%s\": must be greater than 0", field);
  if (!positive && !(seconds >= 0))
    return loader_fail (l, l->line, error, "field \"%s\": must not be negative", field);
  /* Rounded to the nearest ms by hand: master-core does not link libm. */
  rounded = seconds * 1000.0 + 0.5;
  if (!(rounded < 4294967296.0))
    return loader_fail (l, l->line, error, "field \"%s\": must be at most %u seconds", field,
                        G_MAXUINT32 / 1000);
  *ms = (guint32) rounded;
  if (positive && *ms == 0)
    *ms = 1;
  return TRUE;
}

static gboolean
loader_string (Loader *l, const char *field, JsonNode *node, const char **out, GError **error)
{
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
    return loader_fail (l, l->line, error, "field \"%s\": expected a string, got %s", field,
                        json_node_kind (node));
  *out = json_node_get_string (node);
  if (**out == '\0')
    return loader_fail (l, l->line, error, "field \"%s\": must not be empty", field);
  return TRUE;
}

static gboolean
loader_argv (Loader *l, JsonNode *node, GPtrArray *argv, GError **error)
{
  JsonArray *array;
  guint n;

  if (!JSON_NODE_HOLDS_ARRAY (node))
    return loader_fail (l, l->line, error, "field \"cmd\": expected an array of strings, got %s",
                        json_node_kind (node));
  array = json_node_get_array (node);
  n = json_array_get_length (array);
  if (n == 0)
    return loader_fail (l, l->line, error, "field \"cmd\": must not be empty");
  if (n > DATC_ARGV_MAX)
    return loader_fail (l, l->line, error, "field \"cmd\": more than %u arguments", DATC_ARGV_MAX);
  for (guint i = 0; i < n; i++)
    {
      JsonNode *item = json_array_get_element (array, i);

      if (!JSON_NODE_HOLDS_VALUE (item) || json_node_get_value_type (item) != G_TYPE_STRING)
        return loader_fail (l, l->line, error,
                            "field \"cmd\": expected an array of strings, element %u is %s", i,
                            json_node_kind (item));
      /* The strings stay owned by the parser until the spec is encoded. */
      g_ptr_array_add (argv, (gchar *) json_node_get_string (item));
    }
  if (*(const char *) argv->pdata[0] == '\0')
    return loader_fail (l, l->line, error, "field \"cmd\": the program (element 0) is empty");
  g_ptr_array_add (argv, NULL);
  return TRUE;
}

static gboolean
loader_env (Loader *l, JsonNode *node, GPtrArray *env, GError **error)
{
  JsonObject *object;
  g_autoptr (GList) names = NULL;

  if (!JSON_NODE_HOLDS_OBJECT (node))
    return loader_fail (l, l->line, error, "field \"env\": expected an object of strings, got %s",
                        json_node_kind (node));
  object = json_node_get_object (node);
  if (json_object_get_size (object) > DATC_ENV_MAX)
    return loader_fail (l, l->line, error, "field \"env\": more than %u variables", DATC_ENV_MAX);
  names = json_object_get_members (object);
  for (GList *it = names; it != NULL; it = it->next)
    {
      const char *name = it->data;
      JsonNode *value = json_object_get_member (object, name);
      g_autofree gchar *quoted = quote_name (name);

      if (*name == '\0')
        return loader_fail (l, l->line, error, "field \"env\": empty variable name");
      if (strchr (name, '=') != NULL)
        return loader_fail (l, l->line, error, "field \"env\": variable name %s contains '='",
                            quoted);
      if (!JSON_NODE_HOLDS_VALUE (value) || json_node_get_value_type (value) != G_TYPE_STRING)
        return loader_fail (l, l->line, error,
                            "field \"env\": expected an object of strings, %s is %s", quoted,
                            json_node_kind (value));
      g_ptr_array_add (env, g_strconcat (name, "=", json_node_get_string (value), NULL));
    }
  g_ptr_array_add (env, NULL);
  return TRUE;
}

static gboolean
loader_json (Loader *l, const char *text, gsize len, gsize column, GError **error)
{
  const char *why = NULL;
  gsize at = 0;
  g_autoptr (GError) local = NULL;
  g_autoptr (GList) names = NULL;
  g_autoptr (GPtrArray) argv = NULL;
  g_autoptr (GPtrArray) env = NULL;
  DatcTaskSpec spec = { 0 };
  const char *cwd = NULL, *sh = NULL;
  guint8 retries = 0;
  gboolean no_replicate = FALSE;
  JsonNode *root;
  JsonObject *object;

  if (!datc_bag_check_json (text, len, &why, &at))
    {
      if (at >= len)
        return loader_fail (l, l->line, error, "invalid JSON: %s, found end of line", why);
      return loader_fail (l, l->line, error, "invalid JSON: %s at byte %" G_GSIZE_FORMAT, why,
                          column + at + 1);
    }
  g_hash_table_remove_all (l->member_counts);
  g_clear_pointer (&l->dup_name, g_free);
  l->dup_object = NULL;
  if (!json_parser_load_from_data (l->parser, text, (gssize) len, &local))
    return loader_fail (l, l->line, error, "invalid JSON: %s", local->message);
  root = json_parser_get_root (l->parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return loader_fail (l, l->line, error, "expected a JSON object, got %s",
                        root != NULL ? json_node_kind (root) : "nothing");
  object = json_node_get_object (root);

  if (l->dup_name != NULL)
    {
      g_autofree gchar *quoted = quote_name (l->dup_name);
      JsonNode *env_node = json_object_get_member (object, "env");

      if (l->dup_object == object)
        return loader_fail (l, l->line, error, "duplicate field %s", quoted);
      if (env_node != NULL && JSON_NODE_HOLDS_OBJECT (env_node)
          && json_node_get_object (env_node) == l->dup_object)
        return loader_fail (l, l->line, error, "field \"env\": duplicate variable %s", quoted);
      return loader_fail (l, l->line, error, "duplicate key %s", quoted);
    }

  names = json_object_get_members (object);
  for (GList *it = names; it != NULL; it = it->next)
    {
      const char *name = it->data;
      JsonNode *node = json_object_get_member (object, name);

      if (g_str_equal (name, "cmd"))
        {
          argv = g_ptr_array_new ();
          if (!loader_argv (l, node, argv, error))
            return FALSE;
        }
      else if (g_str_equal (name, "sh"))
        {
          if (!loader_string (l, "sh", node, &sh, error))
            return FALSE;
        }
      else if (g_str_equal (name, "env"))
        {
          env = g_ptr_array_new_with_free_func (g_free);
          if (!loader_env (l, node, env, error))
            return FALSE;
        }
      else if (g_str_equal (name, "cwd"))
        {
          if (!loader_string (l, "cwd", node, &cwd, error))
            return FALSE;
        }
      else if (g_str_equal (name, "timeout"))
        {
          if (!loader_seconds (l, "timeout", node, TRUE, &spec.timeout_ms, error))
            return FALSE;
        }
      else if (g_str_equal (name, "est_runtime"))
        {
          if (!loader_seconds (l, "est_runtime", node, FALSE, &spec.est_runtime_ms, error))
            return FALSE;
        }
      else if (g_str_equal (name, "retries"))
        {
          gint64 v;

          if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
            return loader_fail (l, l->line, error, "field \"retries\": expected an integer, got %s",
                                json_node_kind (node));
          v = json_node_get_int (node);
          if (v < 0 || v > RETRIES_MAX)
            return loader_fail (l, l->line, error, "field \"retries\": must be between 0 and %d",
                                RETRIES_MAX);
          retries = (guint8) v;
        }
      else if (g_str_equal (name, "replicate"))
        {
          if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_BOOLEAN)
            return loader_fail (l, l->line, error,
                                "field \"replicate\": expected true or false, got %s",
                                json_node_kind (node));
          no_replicate = !json_node_get_boolean (node);
        }
      else
        {
          g_autofree gchar *quoted = quote_name (name);

          return loader_fail (l, l->line, error, "unknown field %s", quoted);
        }
    }
  if (argv != NULL && sh != NULL)
    return loader_fail (l, l->line, error, "both \"cmd\" and \"sh\" given; use one");
  if (argv == NULL && sh == NULL)
    return loader_fail (l, l->line, error, "neither \"cmd\" nor \"sh\" given");

  spec.argv = argv != NULL ? (gchar **) argv->pdata : NULL;
  spec.sh = (gchar *) sh;
  spec.env = env != NULL ? (gchar **) env->pdata : NULL;
  spec.cwd = (gchar *) cwd;
  g_byte_array_set_size (l->packed, 0);
  datc_task_spec_encode (&spec, l->packed);
  return loader_add (l, DATC_BAG_SPEC_PACKED, l->packed->data, l->packed->len, retries,
                     spec.est_runtime_ms, no_replicate, error);
}

static gboolean
is_blank (char c)
{
  return c == ' ' || c == '\t' || c == '\r';
}

/* One line without its '\n'. */
static gboolean
loader_line (Loader *l, const char *text, gsize len, GError **error)
{
  const char *bad = NULL;
  const char *line_start;

  if (l->line == G_MAXUINT32)
    return loader_fail (l, (guint64) l->line + 1, error, "too many lines");
  l->line++;
  if (len > 0 && text[len - 1] == '\r')
    len--;
  if (len > DATC_TASK_LINE_MAX)
    return loader_fail (l, l->line, error, "line longer than %u bytes", DATC_TASK_LINE_MAX);
  line_start = text;
  if (l->line == 1 && len >= 3 && memcmp (text, "\xef\xbb\xbf", 3) == 0)
    {
      text += 3;
      len -= 3;
    }
  if (!g_utf8_validate_len (text, len, &bad))
    {
      gsize column = (gsize) (bad - line_start) + 1;

      if (*bad == '\0')
        return loader_fail (l, l->line, error, "NUL character at byte %" G_GSIZE_FORMAT, column);
      return loader_fail (l, l->line, error, "invalid UTF-8 at byte %" G_GSIZE_FORMAT, column);
    }
  while (len > 0 && is_blank (*text))
    {
      text++;
      len--;
    }
  while (len > 0 && is_blank (text[len - 1]))
    len--;
  if (len == 0)
    return TRUE;
  if (l->format == DATC_TASKFILE_JSONL)
    return loader_json (l, text, len, (gsize) (text - line_start), error);
  if (*text == '#')
    return TRUE;
  return loader_add (l, DATC_BAG_SPEC_LINE, text, len, 0, 0, FALSE, error);
}

/* Handles the complete lines in data[0, len) (with `at_eof`, the last one
 * too) and says how many bytes it used.  The first `clean` bytes are known
 * to hold no '\n'. */
static gboolean
loader_feed (Loader *l, const char *data, gsize len, gsize clean, gboolean at_eof, gsize *consumed,
             GError **error)
{
  gsize start = 0, from = clean;
  const char *nl;

  while (from < len && (nl = memchr (data + from, '\n', len - from)) != NULL)
    {
      gsize end = (gsize) (nl - data);

      if (!loader_line (l, data + start, end - start, error))
        return FALSE;
      start = from = end + 1;
    }
  if (at_eof && start < len)
    {
      if (!loader_line (l, data + start, len - start, error))
        return FALSE;
      start = len;
    }
  *consumed = start;
  return TRUE;
}

/* `checksum` (may be NULL) is fed every byte read. */
static gboolean
loader_read (Loader *l, int fd, DatcSha256 *checksum, GError **error)
{
  g_autofree char *buf = g_malloc (READ_BUFFER_SIZE);
  gsize start = 0, end = 0;

  for (;;)
    {
      gssize n;
      gsize clean, consumed;

      if (start > 0 && READ_BUFFER_SIZE - end < READ_MIN_SPACE)
        {
          memmove (buf, buf + start, end - start);
          end -= start;
          start = 0;
        }
      do
        n = read (fd, buf + end, READ_BUFFER_SIZE - end);
      while (n < 0 && errno == EINTR);
      if (n < 0)
        {
          int saved = errno;

          g_set_error (error, DATC_BAG_ERROR, DATC_BAG_ERROR_IO, "%s: %s", l->name,
                       g_strerror (saved));
          return FALSE;
        }
      if (checksum != NULL)
        datc_sha256_update (checksum, buf + end, (gsize) n);
      clean = end - start;
      end += (gsize) n;
      if (!loader_feed (l, buf + start, end - start, clean, n == 0, &consumed, error))
        return FALSE;
      start += consumed;
      if (n == 0)
        return TRUE;
      /* No '\n' in a line plus "\r\n" worth of bytes: too long, whatever
       * follows.  Stop before buffering any more of it. */
      if (end - start >= (gsize) DATC_TASK_LINE_MAX + 2)
        return loader_fail (l, (guint64) l->line + 1, error, "line longer than %u bytes",
                            DATC_TASK_LINE_MAX);
    }
}

gboolean
datc_bag_load_file (DatcBag *bag, const char *path, DatcTaskFileFormat format, gchar **sha256_hex,
                    GError **error)
{
  g_auto (Loader) l = { 0 };
  DatcSha256 checksum;
  gboolean ok;
  int fd;

  g_return_val_if_fail (bag != NULL, FALSE);
  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  do
    fd = open (path, O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0)
    {
      int saved = errno;

      g_set_error (error, DATC_BAG_ERROR, DATC_BAG_ERROR_IO, "%s: %s", path, g_strerror (saved));
      return FALSE;
    }
  datc_sha256_init (&checksum);
  loader_begin (&l, bag, path, format);
  ok = loader_read (&l, fd, sha256_hex != NULL ? &checksum : NULL, error);
  close (fd);
  if (!ok || !loader_commit (&l, error))
    return FALSE;
  if (sha256_hex != NULL)
    {
      *sha256_hex = g_malloc (DATC_SHA256_HEX_LEN + 1);
      datc_sha256_hex (&checksum, *sha256_hex);
    }
  return TRUE;
}

gboolean
datc_bag_load_data (DatcBag *bag, const char *name, const char *data, gsize len,
                    DatcTaskFileFormat format, GError **error)
{
  g_auto (Loader) l = { 0 };
  gsize consumed;

  g_return_val_if_fail (bag != NULL, FALSE);
  g_return_val_if_fail (name != NULL, FALSE);
  g_return_val_if_fail (data != NULL || len == 0, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  loader_begin (&l, bag, name, format);
  return loader_feed (&l, data, len, 0, TRUE, &consumed, error) && loader_commit (&l, error);
}

/* ---- access ---- */

guint64
datc_bag_count (const DatcBag *bag)
{
  g_return_val_if_fail (bag != NULL, 0);
  return bag->n_tasks;
}

const DatcBagTask *
datc_bag_get (const DatcBag *bag, guint64 id)
{
  g_return_val_if_fail (bag != NULL, NULL);
  g_return_val_if_fail (id >= 1 && id <= bag->n_tasks, NULL);
  return &bag->tasks[id - 1];
}

const guint8 *
datc_bag_spec (const DatcBag *bag, const DatcBagTask *task)
{
  g_return_val_if_fail (bag != NULL, NULL);
  g_return_val_if_fail (task != NULL, NULL);
  g_return_val_if_fail ((task->offset >> ARENA_CHUNK_SHIFT) < bag->chunks->len, NULL);
  return (const guint8 *) bag->chunks->pdata[task->offset >> ARENA_CHUNK_SHIFT]
         + (task->offset & ARENA_CHUNK_MASK);
}

/* The run task `id` (1 <= id <= n_tasks) is in. */
static const LineRun *
run_of (const DatcBag *bag, guint64 id)
{
  const LineRun *runs = (const LineRun *) (gpointer) bag->runs->data;
  guint lo = 0, hi = bag->runs->len;

  /* runs[0].id == 1 <= id: find the last run starting at or before it. */
  while (hi - lo > 1)
    {
      guint mid = lo + (hi - lo) / 2;
      if (runs[mid].id <= id)
        lo = mid;
      else
        hi = mid;
    }
  return &runs[lo];
}

guint32
datc_bag_line (const DatcBag *bag, guint64 id, guint32 *source)
{
  const LineRun *run;

  g_return_val_if_fail (bag != NULL, 0);
  g_return_val_if_fail (id >= 1 && id <= bag->n_tasks, 0);
  run = run_of (bag, id);
  if (source != NULL)
    *source = run->source;
  return run->line + (guint32) (id - run->id);
}

const char *
datc_bag_source (const DatcBag *bag, guint32 source)
{
  g_return_val_if_fail (bag != NULL, NULL);
  g_return_val_if_fail (source < bag->sources->len, NULL);
  return bag->sources->pdata[source];
}

gchar *
datc_bag_describe (const DatcBag *bag, guint64 id)
{
  const DatcBagTask *task = datc_bag_get (bag, id);
  const guint8 *spec;
  g_autoptr (GByteArray) frame = NULL;
  g_autoptr (DatcMsg) msg = NULL;
  DatcTask *decoded;

  g_return_val_if_fail (task != NULL, NULL);
  spec = datc_bag_spec (bag, task);
  if (task->kind == DATC_BAG_SPEC_LINE)
    return g_strndup ((const char *) spec, task->length);

  /* Not a hot path: let the wire decoder do the work. */
  frame = g_byte_array_new ();
  datc_tasks_encode_begin (frame, 0, 1);
  datc_tasks_encode_add_spec (frame, id, 0, spec, task->length);
  msg = datc_msg_decode (frame->data, frame->len, DATC_FRAME_MAX, NULL);
  if (msg == NULL || msg->type != DATC_MSG_TASKS || msg->u.tasks.tasks->len != 1)
    return g_strdup ("(undecodable task)");
  decoded = msg->u.tasks.tasks->pdata[0];
  if (decoded->spec.sh != NULL)
    return g_strdup (decoded->spec.sh);
  if (decoded->spec.argv != NULL)
    return g_strjoinv (" ", decoded->spec.argv);
  return g_strdup ("(empty task)");
}

gsize
datc_bag_memory_size (const DatcBag *bag)
{
  g_return_val_if_fail (bag != NULL, 0);
  return (gsize) bag->n_tasks * sizeof (DatcBagTask) + (gsize) bag->chunks->len * ARENA_CHUNK_SIZE
         + (gsize) bag->chunks->len * sizeof (gpointer) + (gsize) bag->runs->len * sizeof (LineRun);
}
