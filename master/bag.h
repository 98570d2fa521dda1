/* bag.h: the campaign's tasks as read from task files, stored compactly
 * (one arena of bytes plus a fixed-size record per task) so that a million
 * tasks cost tens of megabytes.  The bag is append-only and knows nothing
 * about task state; the ledger (ledger.h) keeps that beside it, indexed by id.
 *
 * Task files:
 *  - plain text: one shell command per line; blank lines and lines whose
 *    first non-blank character is '#' are skipped; leading and trailing
 *    blanks (space, tab, CR) are trimmed.  The line is stored as is and
 *    shipped as a spec whose `sh` is the line (the agent runs plain lines
 *    directly, without a shell).
 *  - JSON Lines: one object per line with exactly one of
 *      "cmd": [str, ...] (non-empty argv)  or  "sh": str
 *    and optionally "env": {str: str}, "cwd": str, "timeout": number
 *    (seconds, > 0), "retries": integer 0..100, "est_runtime": number
 *    (seconds, >= 0), "replicate": true or false (false: the task is not
 *    idempotent, so end-game replication never runs a second copy of it).
 *    Blank lines are skipped.  Any other key is an error.
 *    The spec is stored pre-encoded (datc_task_spec_encode()).
 *  The format comes from the extension (.jsonl / .ndjson: JSON Lines;
 *  anything else: plain) unless given.
 *
 * Loading is all or nothing: on any bad line the bag is left unchanged and
 * the error reads "FILE:LINE: what is wrong".  Checked: invalid UTF-8, a
 * line over DATC_TASK_LINE_MAX bytes, a NUL byte, unterminated or invalid
 * JSON, a value that is not an object, wrong types, unknown fields, both or
 * neither of cmd/sh, empty argv, out-of-range numbers, and a file with no
 * task at all ("FILE: no tasks"). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DATC_BAG_ERROR (datc_bag_error_quark ())
GQuark datc_bag_error_quark (void);

typedef enum {
  DATC_BAG_ERROR_IO,
  DATC_BAG_ERROR_PARSE, /* a bad line: message is "FILE:LINE: ..." */
  DATC_BAG_ERROR_EMPTY, /* no task in the file */
} DatcBagError;

typedef enum {
  DATC_TASKFILE_AUTO = 0,
  DATC_TASKFILE_LINES,
  DATC_TASKFILE_JSONL,
} DatcTaskFileFormat;

/* Parses "auto", "lines", "jsonl"; FALSE on anything else. */
gboolean datc_task_file_format_parse (const char *name, DatcTaskFileFormat *out);

/* The strict JSON syntax check JSON Lines go through before json-glib sees
 * them (which recurses without a depth limit): TRUE when `text` (UTF-8) is
 * exactly one JSON value nested at most 32 deep; else says why and at
 * which byte of `text` (0-based). */
gboolean datc_bag_check_json (const char *text, gsize len, const char **why, gsize *at);

typedef enum {
  DATC_BAG_SPEC_LINE = 0,   /* arena bytes are the command line */
  DATC_BAG_SPEC_PACKED = 1, /* arena bytes are an encoded DatcTaskSpec */
} DatcBagSpecKind;

/* One task, 16 bytes: at 10M tasks these records are 153 MiB of the
 * master.  The file and line a task came from are not in it: tasks from
 * consecutive lines of one file share a record of their own
 * (datc_bag_line), so a file without blank lines or comments costs one
 * such record in all. */
typedef struct {
  guint64 offset : 40;    /* into the arena (at most DATC_BAG_ARENA_MAX bytes) */
  guint64 length : 24;    /* at most one arena chunk (4 MiB) */
  guint32 est_runtime_ms; /* JSON Lines "est_runtime" in ms; 0: unknown */
  guint8 kind;            /* DatcBagSpecKind */
  guint8 retries;         /* extra attempts allowed after a non-zero exit */
  guint8 no_replicate;    /* JSON Lines "replicate": false: never two copies at once */
  guint8 reserved;
} DatcBagTask;

/* The most task bytes (lines and packed specs) one bag holds: 1 TiB. */
#define DATC_BAG_ARENA_MAX ((guint64) 1 << 40)

typedef struct DatcBag DatcBag;

DatcBag *datc_bag_new (void);
void datc_bag_free (DatcBag *bag);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcBag, datc_bag_free)

/* Appends the tasks of `path`.  `sha256_hex` (may be NULL) receives the
 * file's SHA-256 as 64 hex characters (transfer full).  Ids continue after
 * the last task already in the bag.  Streams the file: peak memory is the
 * stored tasks plus one line. */
gboolean datc_bag_load_file (DatcBag *bag, const char *path, DatcTaskFileFormat format,
                             gchar **sha256_hex, GError **error);
/* The same for bytes in memory; `name` is used in error messages and
 * `format` must not be AUTO unless `name` has an extension to go by. */
gboolean datc_bag_load_data (DatcBag *bag, const char *name, const char *data, gsize len,
                             DatcTaskFileFormat format, GError **error);

guint64 datc_bag_count (const DatcBag *bag);
/* Bytes the bag holds: task records, arena chunks and line runs. */
gsize datc_bag_memory_size (const DatcBag *bag);
/* Task `id` (1-based, <= count), transfer none. */
const DatcBagTask *datc_bag_get (const DatcBag *bag, guint64 id);
/* The bytes of a task's spec (line or packed spec), transfer none. */
const guint8 *datc_bag_spec (const DatcBag *bag, const DatcBagTask *task);
/* Task `id`'s line in its file (1-based), and in `source` (may be NULL)
 * the index of that file (for datc_bag_source): one lookup among the runs
 * of consecutive lines, O(log runs). */
guint32 datc_bag_line (const DatcBag *bag, guint64 id, guint32 *source);
/* Name of file number `source` (in the order loaded), transfer none. */
const char *datc_bag_source (const DatcBag *bag, guint32 source);
/* A human-readable command for listings: the line, or the sh string, or
 * the argv joined with spaces (transfer full). */
gchar *datc_bag_describe (const DatcBag *bag, guint64 id);

G_END_DECLS
