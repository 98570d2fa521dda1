/* agent.h: the datc-agent event loop. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  const char *connect;    /* master endpoint */
  const char *server_key; /* Z85 public key of the master (tcp), or NULL */
  const char *key_file;   /* this agent's key file (tcp), or NULL */
  const char *site;
  const char *proxy;
  guint slots;
  guint prefetch;         /* tasks asked for beyond free slots (unused when auto) */
  gboolean prefetch_auto; /* grow prefetch when tasks are short (no --prefetch given) */
  gint64 walltime_end_us; /* 0: none */
  gboolean exec_none;     /* benchmarks: acknowledge without running */
  gsize output_limit;
  guint kill_grace_ms;
  guint reconnect_timeout_s; /* give up on a silent master after this */
} DatcAgentOptions;

/* Runs until told to leave, drained, or the master stays away too long.
 * Returns the exit status: 0 normal end, 3 gave up or failed. */
int datc_agent_run (const DatcAgentOptions *options);

G_END_DECLS
