/* jsonout.h: the one JSON writer of datc: the string escaper for every
 * line written by hand (the master's results.jsonl and trace.jsonl, where
 * building a JsonNode per line would cost more than the rest of the work;
 * the bag's error messages; every --json of analysis/), and numbers.
 * Numbers are printed with a fixed number of decimals through
 * g_ascii_formatd, so output is the same bytes in every locale and on
 * every run; non-finite numbers become null.
 *
 * Built as a library of its own (datc-jsonout, GLib only) so that the
 * master's storage core links it without linking the analysis. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Appends `s` (UTF-8; NULL is written as "") as a quoted JSON string:
 * `"` and `\` escaped, \n \r \t as such, other control characters and DEL
 * as \u00XX, so the string is safe on a terminal too. */
void datc_json_append_string (GString *out, const char *s);
/* The same into a buffer with room for DATC_JSON_STRING_MAX (len) bytes,
 * for writers that reserve a whole line at once; `s` stops at `len`, not at
 * a NUL.  Returns the end of what was written. */
#define DATC_JSON_STRING_MAX(len) (6 * (gsize) (len) + 2)
char *datc_json_put_string (char *out, const char *s, gsize len);
void datc_json_number (GString *out, double v, int decimals);
/* `"key":` with the comma before it unless `*first`. */
void datc_json_key (GString *out, gboolean *first, const char *key);

G_END_DECLS
