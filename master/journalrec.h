/* journalrec.h: the ledger's journal records, as typed values.  Each record
 * is a msgpack array whose first element is its type and whose others are
 * fixed positional fields; journalrec.c describes every type once, as a
 * table of fields, and the same table drives encoding, decoding (with its
 * checks) and freeing.  Adding a record type is an entry in that table, a
 * struct here and its apply function in the ledger.
 *
 * The bytes on disk are the format of every journal a datc has written:
 * they must not change (an existing campaign must resume).  Records are our
 * own data, checksummed by journal.c, and still checked field by field on
 * decoding: a checksum proves the bytes are the ones written, not that an
 * older datc wrote the same shapes. */
#pragma once

#include <glib.h>
#include "message.h"

G_BEGIN_DECLS

#define DATC_RECORD_ERROR (datc_record_error_quark ())
GQuark datc_record_error_quark (void);

typedef enum {
  DATC_RECORD_ERROR_MALFORMED, /* not a record of a known type and shape */
} DatcRecordError;

typedef enum {
  DATC_REC_START = 1,    /* a master incarnation began */
  DATC_REC_AGENT = 2,    /* an agent said HELLO and got an index */
  DATC_REC_DISPATCH = 3, /* tasks handed to an agent (or re-attached to it) */
  DATC_REC_RESULT = 4,   /* a result: final, or a failure to retry */
  DATC_REC_REQUEUE = 5,  /* a task back in the queue (lost: a crash counted) */
  /* 6 was never written */
  DATC_REC_SOURCE = 7,      /* a task file, or tasks submitted with their bytes */
  DATC_REC_PROXY = 8,       /* a proxy's event (submitting, submitted, settled, ...) */
  DATC_REC_CANCEL = 9,      /* tasks cancelled by the user */
  DATC_REC_RETRY = 10,      /* cancelled tasks go back to the queue */
  DATC_REC_ORPHANS = 11,    /* tasks left running by the last master, and their deadline */
  DATC_REC_AGENT_GONE = 12, /* an agent left or was lost: its index is free */
  DATC_REC_REPLICATE = 13,  /* one more copy of a running task */
  DATC_REC_COPY_END = 14,   /* one copy of a replicated task ended unrecorded */
  /* A compacted journal starts with a checkpoint (see master/README.md,
   * Compaction): the SOURCE records, CHECKPOINT, the live agents (AGENT),
   * TASKS chunks, then REPLICATE, ORPHANS and PROXY records for what is
   * live, and LINES: results.jsonl as it was, packed (resultpack.h). */
  DATC_REC_CHECKPOINT = 15, /* the tables of a checkpoint (runtimes, sites, proxies seen) */
  DATC_REC_TASKS = 16,      /* the state of a run of tasks, fixed-width entries */
  DATC_REC_LINES = 17,      /* results.jsonl lines written before the checkpoint, packed */
} DatcRecType;

/* Lists and bytes: borrowed when encoding; owned by the record when it was
 * decoded (datc_record_clear frees them).  Strings likewise. */
typedef struct {
  const DatcTaskKey *v; /* on disk: [id, attempt, id, attempt, ...] */
  guint n;
} DatcRecKeys;

typedef struct {
  const guint64 *v;
  guint n;
  gboolean all; /* nil on disk: every unfinished task */
} DatcRecIds;

typedef struct {
  const guint8 *data; /* NULL: nil on disk */
  gsize len;
} DatcRecBytes;

typedef struct {
  guint64 epoch;
  gint64 time_us;
} DatcRecStart;

typedef struct {
  guint32 idx;
  const char *agent_id, *site, *proxy, *host;
} DatcRecAgent;

typedef struct {
  guint32 agent;
  gint64 time_us;
  DatcRecKeys keys;
} DatcRecDispatch;

/* end_class when the record has none (a journal older than classes): the
 * class follows from the status. */
#define DATC_REC_NO_CLASS G_MAXUINT32

typedef struct {
  guint64 id;
  guint32 attempt, agent;
  gboolean final;
  guint32 status; /* DatcTaskStatus, or DATC_STATUS_LOST */
  gint64 exit_code, signal, started, finished;
  guint64 out_off, out_len, err_off, err_len, out_dropped, err_dropped;
  const char *message; /* may be NULL */
  /* Optional trailing fields: absent in an older journal, always written. */
  guint32 end_class;        /* DatcEndClass, or DATC_REC_NO_CLASS */
  const char *oom_evidence; /* may be NULL */
} DatcRecResult;

typedef struct {
  guint64 id;
  gboolean lost;
} DatcRecRequeue;

typedef struct {
  guint32 index; /* the n-th source, from 0 */
  const char *path, *sha256;
  guint64 first_id, count;
  gint64 submitted_us;
  guint32 format;    /* DatcTaskFileFormat */
  DatcRecBytes data; /* submitted tasks; nil for the campaign's task file */
} DatcRecSource;

typedef struct {
  const char *site, *proxy, *job_id, *event;
  gint64 time_us;
} DatcRecProxy;

typedef struct {
  gint64 time_us;
  DatcRecIds ids;
} DatcRecCancel;

typedef struct {
  gint64 time_us;
} DatcRecRetry;

typedef struct {
  gint64 deadline_us;
  DatcRecKeys keys;
} DatcRecOrphans;

typedef struct {
  guint32 idx;
} DatcRecAgentGone;

typedef struct {
  guint32 agent;
  gint64 time_us;
  guint64 id;
  guint32 attempt;
} DatcRecReplicate;

typedef struct {
  guint64 id;
  guint32 attempt;
} DatcRecCopyEnd;

typedef struct {
  gint64 time_us;     /* when it was taken */
  guint64 from_bytes; /* the size of the journal it replaced */
  guint64 n_tasks;
  guint32 agents;        /* the length of the agent table (free entries included) */
  gboolean filter;       /* results lines are filtered (cancelled tasks were retried) */
  DatcRecBytes runtimes; /* u64 n, u64 estimate, u32 per bucket, little-endian */
  DatcRecBytes sites;    /* site names from index 1, each ended by NUL */
  DatcRecBytes seen;     /* "site\nproxy" of agents that said HELLO, each ended by NUL */
} DatcRecCheckpoint;

/* One entry of DatcRecTasks.entries, little-endian, packed. */
#define DATC_REC_TASK_ENTRY 20u
typedef struct {
  guint64 first_id;
  DatcRecBytes entries; /* DATC_REC_TASK_ENTRY bytes per task from first_id */
} DatcRecTasks;

typedef struct {
  DatcRecBytes packed; /* whole lines, packed by resultpack.h */
} DatcRecLines;

typedef struct {
  DatcRecType type;
  union {
    DatcRecStart start;
    DatcRecAgent agent;
    DatcRecDispatch dispatch;
    DatcRecResult result;
    DatcRecRequeue requeue;
    DatcRecSource source;
    DatcRecProxy proxy;
    DatcRecCancel cancel;
    DatcRecRetry retry;
    DatcRecOrphans orphans;
    DatcRecAgentGone agent_gone;
    DatcRecReplicate replicate;
    DatcRecCopyEnd copy_end;
    DatcRecCheckpoint checkpoint;
    DatcRecTasks tasks;
    DatcRecLines lines;
  } u;
} DatcRecord;

/* "dispatch", "result", ...; "unknown" for no type of ours. */
const char *datc_record_type_name (DatcRecType type);

/* Appends the payload of `record` (a known type) to `out`.  A NULL string
 * that is never nil on disk is written as "". */
void datc_record_encode (const DatcRecord *record, GByteArray *out);

/* Decodes one payload into `record` (which it overwrites; clear it after).
 * On failure the error names the record type, the field (position and
 * name) and what was wrong, and `record` holds nothing to free. */
gboolean datc_record_decode (const guint8 *payload, gsize len, DatcRecord *record, GError **error);
/* Frees what a decoded record owns and sets those pointers to NULL: the
 * record then holds nothing to free (clear it again, or decode into it). */
void datc_record_clear (DatcRecord *record);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DatcRecord, datc_record_clear)

G_END_DECLS
