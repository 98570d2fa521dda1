/* datc-limits.h: every size that comes from outside is checked against one of
 * these before anything is allocated for it.  They are in one place so the
 * master, the agent and the fuzz target agree on them. */
#pragma once

#include <glib.h>

/* A whole wire frame (ZMQ_MAXMSGSIZE on every peer-facing socket). */
#define DATC_FRAME_MAX (8u * 1024u * 1024u)
/* A HELLO arrives before we know who the peer is: smaller than a frame,
 * yet room for DATC_BATCH_MAX held keys of up to 15 bytes each. */
#define DATC_HELLO_FRAME_MAX (2u * 1024u * 1024u)
/* Nesting of msgpack containers in one frame. */
#define DATC_DEPTH_MAX 6u
/* Declared elements (array items + map pairs) summed over one frame. */
#define DATC_ELEMENTS_MAX (1u << 20)
/* One string on the wire (a command line, a path, an env value). */
#define DATC_STRING_MAX (1u * 1024u * 1024u)
/* Captured bytes of one stream of one task that may travel in a RESULT. */
#define DATC_OUTPUT_MAX (3u * 1024u * 1024u)
/* Default capture limit per stream (agent --output-limit). */
#define DATC_OUTPUT_DEFAULT (1u * 1024u * 1024u)
/* argv entries and env entries of one task. */
#define DATC_ARGV_MAX 4096u
#define DATC_ENV_MAX 4096u
/* Tasks in one TASKS frame, results in one RESULT frame, keys in one
 * ACK / CANCEL / HELLO held list. */
#define DATC_BATCH_MAX 65536u
/* Short identifiers: agent id, site, proxy, host, reasons. */
#define DATC_NAME_MAX 256u
#define DATC_REASON_MAX 4096u
/* One task line in a task file. */
#define DATC_TASK_LINE_MAX (1u * 1024u * 1024u)
