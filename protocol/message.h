/* message.h: the datc wire.  One ZeroMQ frame is one msgpack array
 * [version, type, body]; body is a msgpack array whose shape is fixed per
 * type and version (positional fields, no maps except a task's env).
 *
 * Decoding is a chain of named checks (size cap, pre-scan of depth and
 * declared lengths, unpack, exact shape, copy) so that no msgpack_object
 * ever leaves protocol/: callers only see the typed structs below.
 *
 * Shapes (version 1).  "key" is [id uint, attempt uint].
 *   HELLO     a->m [agent_id str, site str, proxy str, host str, pid uint,
 *                   slots uint, walltime_end_us int, session uint, held [key...]]
 *   WELCOME   m->a [epoch uint, session uint, heartbeat_ms uint, timeout_ms uint]
 *   CREDIT    a->m [session uint, limit uint]
 *   TASKS     m->a [session uint, [task...]]
 *               task = [id uint, attempt uint, spec]
 *               spec = [argv [str...]|nil, sh str|nil, env {str:str}|nil,
 *                       cwd str|nil, timeout_ms uint, est_runtime_ms uint]
 *   RESULT    a->m [[result...]]
 *               result = [id uint, attempt uint, status uint, exit_code int,
 *                         signal int, started_us int, finished_us int,
 *                         stdout bin, stderr bin, stdout_dropped uint,
 *                         stderr_dropped uint, message str|nil
 *                         [, oom_evidence str|nil]]
 *               oom_evidence is optional (added without a version bump):
 *               sent only when set, so a result without it is byte for byte
 *               the version-1 shape, and a missing one decodes as NULL.
 *   ACK       m->a [[key...]]
 *   HEARTBEAT both [epoch uint, session uint, received uint, running uint,
 *                   rehello bool]
 *   CANCEL    m->a [[key...]]
 *   RETIRE    m->a [reason str]  (the master sends none today; the agent honours it)
 *   BYE       both [reason str]
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DATC_PROTOCOL_VERSION 1

#define DATC_WIRE_ERROR (datc_wire_error_quark ())
GQuark datc_wire_error_quark (void);

typedef enum {
  DATC_WIRE_ERROR_TOO_BIG,   /* frame over the cap */
  DATC_WIRE_ERROR_MALFORMED, /* not msgpack, truncated, trailing bytes */
  DATC_WIRE_ERROR_LIMIT,     /* depth, element count or a length over a limit */
  DATC_WIRE_ERROR_VERSION,   /* version we do not speak */
  DATC_WIRE_ERROR_TYPE,      /* unknown message type */
  DATC_WIRE_ERROR_SHAPE,     /* known type, wrong body shape */
} DatcWireError;

typedef enum {
  DATC_MSG_HELLO = 1,
  DATC_MSG_WELCOME = 2,
  DATC_MSG_CREDIT = 3,
  DATC_MSG_TASKS = 4,
  DATC_MSG_RESULT = 5,
  DATC_MSG_ACK = 6,
  DATC_MSG_HEARTBEAT = 7,
  DATC_MSG_CANCEL = 8,
  DATC_MSG_RETIRE = 9,
  DATC_MSG_BYE = 10,
} DatcMsgType;

const char *datc_msg_type_name (DatcMsgType type);

/* How one attempt of a task ended. */
typedef enum {
  DATC_STATUS_EXITED = 0,       /* exit_code is valid */
  DATC_STATUS_SIGNALED = 1,     /* killed by `signal` (not by us) */
  DATC_STATUS_TIMEOUT = 2,      /* its own timeout expired; we killed the group */
  DATC_STATUS_SPAWN_FAILED = 3, /* could not start; exit_code 127 or 126, message says why */
  DATC_STATUS_CANCELLED = 4,    /* the master cancelled it */
  DATC_STATUS_DRAINED = 5,      /* the agent was draining (SIGTERM, walltime); run it elsewhere */
  DATC_STATUS_REFUSED = 6,      /* never started: est_runtime does not fit the walltime */
  DATC_STATUS_LAST = DATC_STATUS_REFUSED,
} DatcTaskStatus;

const char *datc_task_status_name (DatcTaskStatus status);

typedef struct {
  guint64 id;
  guint32 attempt;
} DatcTaskKey;

/* For GHashTables keyed by DatcTaskKey*. */
guint datc_task_key_hash (gconstpointer key);
gboolean datc_task_key_equal (gconstpointer a, gconstpointer b);

/* What to run.  Exactly one of argv / sh is set. */
typedef struct {
  gchar **argv;           /* NULL-terminated, or NULL */
  gchar *sh;              /* a shell command line, or NULL */
  gchar **env;            /* "KEY=VALUE" strings added to the agent's environment, or NULL */
  gchar *cwd;             /* or NULL */
  guint32 timeout_ms;     /* 0: none */
  guint32 est_runtime_ms; /* 0: unknown */
} DatcTaskSpec;

void datc_task_spec_clear (DatcTaskSpec *spec);

typedef struct {
  guint64 id;
  guint32 attempt;
  DatcTaskSpec spec;
} DatcTask;

void datc_task_free (DatcTask *task);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcTask, datc_task_free)

typedef struct {
  guint64 id;
  guint32 attempt;
  DatcTaskStatus status;
  gint32 exit_code;
  gint32 signal;
  gint64 started_us; /* microseconds since the epoch */
  gint64 finished_us;
  GBytes *out; /* never NULL after decode (maybe empty) */
  GBytes *err;
  guint64 out_dropped; /* bytes beyond the capture limit */
  guint64 err_dropped;
  gchar *message;      /* or NULL */
  gchar *oom_evidence; /* what the agent saw of the kernel's OOM killer, or NULL */
} DatcResult;

DatcResult *datc_result_new (guint64 id, guint32 attempt);
void datc_result_free (DatcResult *result);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcResult, datc_result_free)

typedef struct {
  gchar *agent_id;
  gchar *site;
  gchar *proxy;
  gchar *host;
  guint32 pid;
  guint32 slots;
  gint64 walltime_end_us; /* 0: none */
  guint32 session;
  GArray *held; /* DatcTaskKey: tasks running here or with unacked results */
} DatcHello;

typedef struct {
  guint64 epoch;
  guint32 session;
  guint32 heartbeat_ms;
  guint32 timeout_ms;
} DatcWelcome;

typedef struct {
  guint32 session;
  guint64 limit; /* cumulative: tasks this session may have been sent in all */
} DatcCredit;

typedef struct {
  guint32 session;
  GPtrArray *tasks; /* DatcTask*, owned */
} DatcTasks;

typedef struct {
  GPtrArray *results; /* DatcResult*, owned */
} DatcResults;

typedef struct {
  guint64 epoch; /* master's epoch (0 from an agent) */
  guint32 session;
  guint64 received; /* agent: tasks received this session */
  guint32 running;  /* agent: tasks running now */
  gboolean rehello; /* master: say HELLO again */
} DatcHeartbeat;

typedef struct {
  DatcMsgType type;
  union {
    DatcHello hello;
    DatcWelcome welcome;
    DatcCredit credit;
    DatcTasks tasks;
    DatcResults results;
    GArray *keys; /* ACK, CANCEL: DatcTaskKey */
    DatcHeartbeat heartbeat;
    gchar *reason; /* RETIRE, BYE */
  } u;
} DatcMsg;

/* Allocates a message of `type` with empty containers ready to fill. */
DatcMsg *datc_msg_new (DatcMsgType type);
void datc_msg_free (DatcMsg *msg);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcMsg, datc_msg_free)

/* Appends the encoded frame to `out`. */
void datc_msg_encode (const DatcMsg *msg, GByteArray *out);

/* Decodes one frame.  `max_size` is the cap for this peer (DATC_FRAME_MAX,
 * or DATC_HELLO_FRAME_MAX for a peer that has not said HELLO yet).  On
 * failure sets DATC_WIRE_ERROR with a reason that names the field. */
DatcMsg *datc_msg_decode (const guint8 *data, gsize len, gsize max_size, GError **error);

/* Encodes a spec alone (the master stores JSON Lines tasks this way so that
 * dispatch copies bytes instead of re-encoding). */
void datc_task_spec_encode (const DatcTaskSpec *spec, GByteArray *out);

/* Streaming TASKS encoder for the master's hot path: no DatcTask structs.
 * begin() writes the header for exactly `count` tasks, then call one add_*
 * per task. */
void datc_tasks_encode_begin (GByteArray *out, guint32 session, guint32 count);
/* A plain task-file line: encoded as spec [nil, line, nil, nil, 0, 0]. */
void datc_tasks_encode_add_line (GByteArray *out, guint64 id, guint32 attempt, const char *line,
                                 gsize len);
/* A spec produced by datc_task_spec_encode(), copied as is. */
void datc_tasks_encode_add_spec (GByteArray *out, guint64 id, guint32 attempt, const guint8 *spec,
                                 gsize len);

G_END_DECLS
