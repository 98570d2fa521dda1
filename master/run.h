/* run.h: `datc run`: open or resume a campaign and drive it to the end. */
#pragma once

#include <glib.h>
#include "provisioner.h"

G_BEGIN_DECLS

typedef struct {
  const char *dir; /* NULL: derived from the task file name */
  const char *task_file;
  const char *format;     /* "auto", "lines", "jsonl" */
  const char *listen;     /* tcp endpoint for remote agents, or NULL */
  const char *sites;      /* SITES.ini, or NULL for the embedded local site */
  guint local_slots;      /* 0: number of CPUs */
  guint local_agents;     /* 0: 1 */
  gboolean no_local;      /* no embedded local site (agents come from --listen) */
  const char *local_exec; /* NULL, or "none" (benchmarks) */
  guint heartbeat_ms;
  guint timeout_ms;
  guint crash_limit;
  gboolean json;             /* final summary as JSON on stdout */
  gboolean open;             /* keep serving when the bag is empty, until `datc close` */
  gboolean retry_cancelled;  /* cancelled tasks of an earlier run go back to the queue */
  gboolean no_progress;      /* no progress line even on a terminal */
  DatcMode mode;             /* how tasks meet proxies (default pull) */
  gboolean give_up_set;      /* --give-up-after was given: give_up_s, not the sites file's */
  guint give_up_s;           /* stop when no site can run the campaign this long; 0: never */
  gboolean keep_site_files;  /* leave every proxy script and log on the sites */
  guint max_replicas;        /* --max-replicas; 0: the sites file's, else the default */
  guint64 compact_min_bytes; /* --compact-min-bytes; 0: the sites file's, else the
                              * default; G_MAXUINT64: never compacted */
} DatcRunOptions;

/* Returns the process exit status: 0 all tasks succeeded, 1 some failed,
 * 2 usage or input error, 3 the campaign could not run. */
int datc_run (const DatcRunOptions *options);

G_END_DECLS
