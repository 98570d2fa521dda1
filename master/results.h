/* results.h: reading a campaign's results.jsonl and outputs/ back, with or
 * without a running master. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Writes the stdout (or stderr) a task's final attempt captured to our
 * stdout.  Returns an exit status (0, or 2 with a message). */
int datc_results_print_output (const char *dir, guint64 id, gboolean want_stderr);
/* Lists results: a table, or the JSON lines as stored; `failed_only` keeps
 * tasks whose status is not a zero exit. */
int datc_results_list (const char *dir, gboolean failed_only, gboolean json);

G_END_DECLS
