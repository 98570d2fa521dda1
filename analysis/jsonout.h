/* jsonout.h: the small JSON writer behind every --json of analysis/.
 * Numbers are printed with a fixed number of decimals through
 * g_ascii_formatd, so output is the same bytes in every locale and on
 * every run; non-finite numbers become null. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

void datc_json_string (GString *out, const char *s);
void datc_json_number (GString *out, double v, int decimals);
/* `"key":` with the comma before it unless `*first`. */
void datc_json_key (GString *out, gboolean *first, const char *key);

G_END_DECLS
