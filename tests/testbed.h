/* testbed.h: what the tests of this folder that need real daemons share:
 * running the scripts of tests/testbed/ (their directory comes from
 * $DATC_TESTBED, which meson sets), reading the KEY=VALUE files they
 * write, and running a command to read its output.
 *
 * The up and down scripts run in the test program's parent process (the
 * bodies run in g_test_trap_subprocess children), so these report failure
 * by returning FALSE after printing the script's stderr; none aborts. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Runs `bash tests/testbed/NAME ARGS...`; its stdout in *out (transfer
 * full) when `out` is not NULL.  FALSE, after printing what the script
 * said on stderr, when it cannot run or exits non-zero. */
gboolean tb_script (const char *name, const char *const *args, gchar **out);

/* The KEY=VALUE lines of `path` (a value in double quotes loses them);
 * NULL when the file cannot be read (transfer full). */
GHashTable *tb_env_read (const char *path);

/* Every KEY=VALUE line of DIR/env into this process's environment (call
 * it before any thread exists).  FALSE when DIR/env cannot be read. */
gboolean tb_env_load (const char *dir);

/* Runs argv (searched in PATH, no shell) and returns its stdout ("" when
 * it cannot start; transfer full).  Its exit status (128+N for signal N,
 * -1 when it could not start) in *status when `status` is not NULL. */
gchar *tb_capture (const char *const *argv, int *status);

/* tb_capture of `/bin/sh -c cmd`. */
gchar *tb_capture_sh (const char *cmd);

G_END_DECLS
