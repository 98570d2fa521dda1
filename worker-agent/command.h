/* command.h: how a task's command becomes an argv.  A shell line with no
 * shell syntax is split on blanks and executed directly (as make does), so
 * a simple command costs one spawn instead of two; anything else runs as
 * `/bin/sh -c LINE`. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Returns a NULL-terminated argv (transfer full) for `line`: either its
 * words, when the line holds only plain words, or {"/bin/sh","-c",line}.
 * `*direct` says which.  Words are split on spaces and tabs.  A line is
 * "plain" when it has no character from the shell's special set
 * (quotes, $, `, \, ;, &, |, <, >, (, ), {, }, [, ], *, ?, ~, #, !, =
 * in the first word, newline), and its first word is not a shell
 * builtin or keyword (cd, export, exit, if, for, while, ., source, ...). */
gchar **datc_command_argv (const char *line, gboolean *direct);

G_END_DECLS
