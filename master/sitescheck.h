/* sitescheck.h: `datc sites check SITES.ini [--probe]`: for each site,
 * whether it is reachable (host key accepted, a command runs), whether the
 * scheduler's commands exist there, whether its queue exists (a missing
 * one fails with the scheduler's own answer), whether the workdir can be
 * made and written (and is the user's alone), whether the agent can run
 * there, and with --probe a one-task campaign on that site alone, stopped
 * at --probe-timeout.  Exit 0 when every
 * check of every site passed, 1 when one failed, 2 for a bad file. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

int datc_cmd_sites (int argc, char **argv);

G_END_DECLS
