/* cli.h: the analysis subcommands of `datc`.  Each takes the arguments
 * after its name (argv[0] is the subcommand) and returns the exit status. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* datc analyze predict|waits|trace ... */
int datc_analyze_main (int argc, char **argv);
/* datc report DIR [-o report.html] */
int datc_report_main (int argc, char **argv);

G_END_DECLS
