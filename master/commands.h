/* commands.h: the commands that act on an existing campaign: status,
 * submit, cancel, close, shell.  Each talks to the running master through
 * DIR/control, or works on the journal directly when none runs. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

int datc_cmd_status (int argc, char **argv);
int datc_cmd_submit (int argc, char **argv);
int datc_cmd_cancel (int argc, char **argv);
int datc_cmd_close (int argc, char **argv);
int datc_cmd_shell (int argc, char **argv);

/* DIR from the first argument before "--" that is a campaign directory
 * (holds campaign.json), wherever it stands among the options, else from
 * $DATC_DIR (set by `datc shell`); removes it from argv.  NULL with a
 * message when there is neither (transfer full). */
gchar *datc_cmd_take_dir (int *argc, char **argv);

/* The campaign's status object (as `datc status --json` prints it): from
 * the running master, else read from DIR's journal (transfer full).  Its
 * "agents" lists at most `agents_max` agents (-1: all). */
JsonNode *datc_cmd_fetch_status (const char *dir, gint agents_max, GError **error);

G_END_DECLS
